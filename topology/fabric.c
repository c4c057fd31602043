/*
 * `commscope fabric`: parse cs_fabric's "@cs-fabric" lines, judge every link and node against
 * the capacity model and against the median of their peers, rank the suspects, render.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "internal.h"

void cs_fabric_default_limits(struct cs_fabric_limits *l)
{
    l->peer_fraction = 0.75;
    l->capacity_fraction = 0.5;
    l->latency_factor = 4.0;
}

void cs_fabric_init(struct cs_fabric *f)
{
    memset(f, 0, sizeof(*f));
    f->failed_rank = -1;
    f->last_round = -1;
    f->nccl_available = -1;
}

void cs__fabric_note(struct cs_fabric *f, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    char **n = realloc(f->notes, (f->n_notes + 1) * sizeof(*n));
    if (!n)
        return;
    f->notes = n;
    if ((n[f->n_notes] = strdup(buf)))
        f->n_notes++;
}

void cs_fabric_add_note(struct cs_fabric *f, const char *text)
{
    cs__fabric_note(f, "%s", text);
}

/* The value of key=VALUE in a line of space-separated fields, copied into out. */
static int field(const char *line, const char *key, char *out, size_t len)
{
    size_t k = strlen(key);
    for (const char *p = line; (p = strstr(p, key)); p += k) {
        if ((p == line || p[-1] == ' ') && p[k] == '=') {
            const char *v = p + k + 1;
            size_t n = strcspn(v, " \r\n");
            if (n >= len)
                n = len - 1;
            memcpy(out, v, n);
            out[n] = 0;
            return 0;
        }
    }
    return -1;
}

static int fnum(const char *line, const char *key, double *v)
{
    char buf[64], *end;
    if (field(line, key, buf, sizeof(buf)) < 0)
        return -1;
    *v = strtod(buf, &end);
    return end == buf || *end || !isfinite(*v) ? -1 : 0;
}

static int fint(const char *line, const char *key, int *v)
{
    double d;
    if (fnum(line, key, &d) < 0 || d < 0 || d > 1e9 || d != floor(d))
        return -1;
    *v = (int)d;
    return 0;
}

static struct cs_fabric_node *node_at(struct cs_fabric *f, int k)
{
    if (k < 0 || k > 1000000)
        return NULL;
    if ((size_t)k >= f->n_nodes) {
        struct cs_fabric_node *n = realloc(f->nodes, ((size_t)k + 1) * sizeof(*n));
        if (!n)
            return NULL;
        memset(n + f->n_nodes, 0, ((size_t)k + 1 - f->n_nodes) * sizeof(*n));
        f->nodes = n;
        f->n_nodes = (size_t)k + 1;
    }
    return &f->nodes[k];
}

/*
 * "nccl available=1 version=V ranks=N devices=D,D,...", "nccl available=0 [ranks_without=K]
 * reason=TEXT" or "nccl error reason=TEXT" (fabric_nccl.c); TEXT runs to the end of the line.
 */
static int feed_nccl(struct cs_fabric *f, const char *line)
{
    const char *why = strstr(line, " reason=");
    if (why) {
        why += 8;
        size_t n = strcspn(why, "\r\n");
        snprintf(f->nccl_reason, sizeof(f->nccl_reason), "%.*s", (int)n, why);
    }
    if (!strncmp(line, "nccl error ", 11)) {
        if (!why)
            return -1;
        f->nccl_failed = 1;
        return 0;
    }
    int avail;
    if (fint(line, "available", &avail) < 0 || avail > 1 || (!avail && !why))
        return -1;
    f->nccl_available = avail;
    if (!avail)
        return 0;
    char devs[4096];
    if (fint(line, "version", &f->nccl_version) < 0 ||
        field(line, "devices", devs, sizeof(devs)) < 0)
        return -1;
    free(f->nccl_devices);
    f->nccl_devices = NULL;
    f->n_nccl_devices = 0;
    for (char *p = devs, *end; *p && strcmp(p, "-");) {
        long d = strtol(p, &end, 10);
        if (end == p || d < 0 || (*end && *end != ','))
            return -1;
        int *v = realloc(f->nccl_devices, (f->n_nccl_devices + 1) * sizeof(*v));
        if (!v)
            return -1;
        f->nccl_devices = v;
        v[f->n_nccl_devices++] = (int)d;
        p = *end ? end + 1 : end;
    }
    return 0;
}

int cs_fabric_feed(struct cs_fabric *f, const char *line)
{
    static const char prefix[] = "@cs-fabric ";
    if (!strncmp(line, prefix, sizeof(prefix) - 1))
        line += sizeof(prefix) - 1;
    else
        return 0;
    char kind[16] = "";
    sscanf(line, "%15s", kind);
    if (!strcmp(kind, "start")) {
        if (fint(line, "ranks", &f->ranks) < 0 || fint(line, "nodes", &f->nodes_expected) < 0)
            goto bad;
        return 1;
    }
    if (!strcmp(kind, "rank")) {
        int r, k;
        double g;
        char host[256], nic[64];
        if (fint(line, "rank", &r) < 0 || fint(line, "node", &k) < 0 ||
            field(line, "host", host, sizeof(host)) < 0 ||
            field(line, "nic", nic, sizeof(nic)) < 0 || fnum(line, "nic_gbps", &g) < 0)
            goto bad;
        struct cs_fabric_node *n = node_at(f, k);
        if (!n)
            goto bad;
        if (!n->ranks) {
            CS__COPY(n->host, host);
            CS__COPY(n->nic, strcmp(nic, "-") ? nic : "");
            n->nic_gbps = g;
        }
        n->ranks++;
        if (r < 1000000 && (size_t)r >= f->n_rank_node) {
            int *v = realloc(f->rank_node, ((size_t)r + 1) * sizeof(*v));
            if (v) {
                for (size_t i = f->n_rank_node; i <= (size_t)r; i++)
                    v[i] = -1;
                f->rank_node = v;
                f->n_rank_node = (size_t)r + 1;
            }
        }
        if ((size_t)r < f->n_rank_node)
            f->rank_node[r] = k;
        return 1;
    }
    if (!strcmp(kind, "pairs")) {
        if (fint(line, "rounds", &f->rounds) < 0 || fint(line, "of", &f->rounds_total) < 0)
            goto bad;
        return 1;
    }
    if (!strcmp(kind, "pair")) {
        struct cs_fabric_link l;
        memset(&l, 0, sizeof(l));
        if (fint(line, "a", &l.a) < 0 || fint(line, "b", &l.b) < 0 ||
            fnum(line, "ab_gbps", &l.ab_gbps) < 0 || fnum(line, "ba_gbps", &l.ba_gbps) < 0 ||
            fnum(line, "latency_us", &l.latency_us) < 0 || l.a == l.b)
            goto bad;
        if (!node_at(f, l.a > l.b ? l.a : l.b))
            goto bad;
        struct cs_fabric_link *v = realloc(f->links, (f->n_links + 1) * sizeof(*v));
        if (!v)
            goto bad;
        f->links = v;
        int round = -1;
        if (fint(line, "round", &round) == 0 && round != f->last_round) {
            f->rounds_done++; /* rank 0 prints a round's pairs together, after the round */
            f->last_round = round;
        }
        l.gbps = l.ab_gbps < l.ba_gbps ? l.ab_gbps : l.ba_gbps;
        /* Optional (newer benchmarks): the test's window and bytes, for the wire evidence. */
        double t0, t1, sent;
        if (fnum(line, "t0_ns", &t0) == 0 && fnum(line, "t1_ns", &t1) == 0 &&
            fnum(line, "sent_bytes", &sent) == 0 && t0 > 0 && t1 >= t0 && sent > 0) {
            l.t0_ns = (long long)t0;
            l.t1_ns = (long long)t1;
            l.sent_bytes = sent;
        }
        f->links[f->n_links++] = l;
        return 1;
    }
    if (!strcmp(kind, "latency")) {
        /* A re-test of a pair whose latency stood out (fabric_bench.c): the link keeps the
         * lowest figure, as one burst of round trips keeps its fastest. */
        int a, b, tries;
        double lat;
        if (fint(line, "a", &a) < 0 || fint(line, "b", &b) < 0 ||
            fnum(line, "latency_us", &lat) < 0 || fint(line, "retests", &tries) < 0 || lat <= 0)
            goto bad;
        for (size_t i = 0; i < f->n_links; i++) {
            struct cs_fabric_link *l = &f->links[i];
            if ((l->a == a && l->b == b) || (l->a == b && l->b == a)) {
                if (lat < l->latency_us)
                    l->latency_us = lat;
                l->latency_retests += tries;
                return 1;
            }
        }
        goto bad;
    }
    if (!strcmp(kind, "coll")) {
        struct cs_fabric_coll c;
        memset(&c, 0, sizeof(c));
        double bytes;
        if (field(line, "transport", c.transport, sizeof(c.transport)) < 0)
            CS__COPY(c.transport, "mpi");
        if ((strcmp(c.transport, "mpi") && strcmp(c.transport, "nccl")) ||
            field(line, "op", c.op, sizeof(c.op)) < 0 || fnum(line, "bytes", &bytes) < 0 ||
            fnum(line, "time_us", &c.time_us) < 0 || fnum(line, "algbw_gbps", &c.algbw_gbps) < 0 ||
            fnum(line, "busbw_gbps", &c.busbw_gbps) < 0 || bytes < 0)
            goto bad;
        c.bytes = (size_t)bytes;
        struct cs_fabric_coll *v = realloc(f->colls, (f->n_colls + 1) * sizeof(*v));
        if (!v)
            goto bad;
        f->colls = v;
        f->colls[f->n_colls++] = c;
        f->in_collectives = 1;
        return 1;
    }
    if (!strcmp(kind, "port")) {
        struct cs_fabric_port pt;
        memset(&pt, 0, sizeof(pt));
        double d[6];
        static const char *const keys[6] = {"xmit_bytes", "rcv_bytes",   "symbol_errors",
                                            "rcv_errors", "link_downed", "xmit_discards"};
        if (fint(line, "node", &pt.node) < 0 || field(line, "nic", pt.nic, sizeof(pt.nic)) < 0 ||
            fint(line, "port", &pt.port) < 0 || fint(line, "valid", &pt.valid) < 0)
            goto bad;
        for (int k = 0; k < 6; k++)
            if (pt.valid && fnum(line, keys[k], &d[k]) < 0)
                goto bad;
        if (pt.valid) {
            pt.xmit_bytes = (long long)d[0];
            pt.rcv_bytes = (long long)d[1];
            pt.symbol_errors = (long long)d[2];
            pt.rcv_errors = (long long)d[3];
            pt.link_downed = (long long)d[4];
            pt.xmit_discards = (long long)d[5];
        }
        if (!node_at(f, pt.node))
            goto bad;
        struct cs_fabric_port *v = realloc(f->ports, (f->n_ports + 1) * sizeof(*v));
        if (!v)
            goto bad;
        f->ports = v;
        f->ports[f->n_ports++] = pt;
        return 1;
    }
    if (!strcmp(kind, "nccl")) {
        if (feed_nccl(f, line) == 0)
            return 1;
        goto bad;
    }
    if (!strcmp(kind, "done")) {
        f->complete = 1;
        return 1;
    }
bad:
    cs__fabric_note(f, "malformed benchmark line ignored: \"%.200s\"", line);
    return -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void add_suspect(struct cs_fabric *f, const char *kind, const char *name, double ratio,
                        const char *evidence)
{
    struct cs_fabric_suspect *s = realloc(f->suspects, (f->n_suspects + 1) * sizeof(*s));
    if (!s)
        return;
    f->suspects = s;
    s = &s[f->n_suspects++];
    CS__COPY(s->kind, kind);
    CS__COPY(s->name, name);
    s->ratio = ratio;
    CS__COPY(s->evidence, evidence);
}

static int cmp_suspect(const void *a, const void *b)
{
    const struct cs_fabric_suspect *x = a, *y = b;
    if (strcmp(x->kind, y->kind))
        return strcmp(x->kind, "node") == 0 ? -1 : 1; /* nodes first: they explain links */
    return x->ratio < y->ratio ? -1 : x->ratio > y->ratio;
}

static const char *host_of(const struct cs_fabric *f, int k)
{
    return k >= 0 && (size_t)k < f->n_nodes && f->nodes[k].host[0] ? f->nodes[k].host : "?";
}

void cs_fabric_judge(struct cs_fabric *f, const struct cs_fabric_limits *lim)
{
    cs__fabric_apply_failure(f);
    size_t nl = f->n_links;
    double *v = malloc((nl ? nl : 1) * sizeof(double));
    if (!v)
        return;
    for (size_t i = 0; i < nl; i++)
        v[i] = f->links[i].gbps;
    f->link_median_gbps = median(v, nl);
    for (size_t i = 0; i < nl; i++)
        v[i] = f->links[i].latency_us;
    f->link_median_latency_us = median(v, nl);

    for (size_t i = 0; i < nl; i++) {
        struct cs_fabric_link *l = &f->links[i];
        double ca = f->nodes[l->a].nic_gbps, cb = f->nodes[l->b].nic_gbps;
        l->expected_gbps = ca > 0 && cb > 0 ? (ca < cb ? ca : cb) : 0;
        l->ratio = f->link_median_gbps > 0 ? l->gbps / f->link_median_gbps : 0;
        int slow_peer = l->ratio < lim->peer_fraction;
        int slow_cap = l->expected_gbps > 0 && l->gbps < lim->capacity_fraction * l->expected_gbps;
        /* Latency against the link's peers: the other links of its two nodes.  A node whose
         * every link is slow (a busy or badly configured host) then shows in its node figure
         * below, not as an arbitrary half of its links above a median that half of them sit
         * in; a slow cable stands out against both nodes' other links. */
        size_t np = 0;
        for (size_t j = 0; j < nl; j++)
            if (j != i && (f->links[j].a == l->a || f->links[j].b == l->a ||
                           f->links[j].a == l->b || f->links[j].b == l->b))
                v[np++] = f->links[j].latency_us;
        l->latency_ref_us = np ? median(v, np) : f->link_median_latency_us;
        int slow_lat =
            l->latency_ref_us > 0 && l->latency_us > lim->latency_factor * l->latency_ref_us;
        CS__COPY(l->status, slow_peer || slow_cap || slow_lat ? "slow" : "ok");
        char exp[48];
        if (l->expected_gbps > 0)
            snprintf(exp, sizeof(exp), "%.3g Gb/s", l->expected_gbps);
        else
            snprintf(exp, sizeof(exp), "unknown");
        snprintf(l->evidence, sizeof(l->evidence),
                 "%.3g Gb/s measured vs %s expected vs %.3g Gb/s median (%.2f of median); "
                 "latency %.3g us vs %.3g us median of the two nodes' other links%s",
                 l->gbps, exp, f->link_median_gbps, l->ratio, l->latency_us, l->latency_ref_us,
                 l->latency_retests ? " (lowest after a re-test)" : "");
        const struct cs_fabric_wire *w = &l->wire;
        if (w->have) {
            size_t n = strlen(l->evidence);
            snprintf(l->evidence + n, sizeof(l->evidence) - n,
                     "; wire: %.3f x the bytes sent, on %s, %.0f retransmission(s), %.3g/%.3g "
                     "Gb/s each way%s",
                     w->ratio, w->ifaces[0] ? w->ifaces : "-", w->retrans_ab + w->retrans_ba,
                     w->gbps_ab, w->gbps_ba, w->nwarn ? " (see its wire warnings)" : "");
        }
    }

    /* Nodes: the median of their links. */
    double *nv = malloc((f->n_nodes ? f->n_nodes : 1) * sizeof(double));
    size_t nn = 0;
    for (size_t k = 0; k < f->n_nodes; k++) {
        struct cs_fabric_node *n = &f->nodes[k];
        size_t c = 0;
        for (size_t i = 0; i < nl; i++)
            if (f->links[i].a == (int)k || f->links[i].b == (int)k)
                v[c++] = f->links[i].gbps;
        n->measured = (int)c;
        n->gbps = median(v, c);
        c = 0;
        for (size_t i = 0; i < nl; i++)
            if (f->links[i].a == (int)k || f->links[i].b == (int)k)
                v[c++] = f->links[i].latency_us;
        n->latency_us = median(v, c);
        if (n->measured && nv)
            nv[nn++] = n->gbps;
    }
    f->node_reference_gbps = nv ? median(nv, nn) : 0;
    nn = 0;
    for (size_t k = 0; nv && k < f->n_nodes; k++)
        if (f->nodes[k].measured)
            nv[nn++] = f->nodes[k].latency_us;
    f->node_reference_latency_us = nv ? median(nv, nn) : 0;
    free(nv);
    for (size_t k = 0; k < f->n_nodes; k++) {
        struct cs_fabric_node *n = &f->nodes[k];
        if (!n->host[0])
            snprintf(n->host, sizeof(n->host), "node%zu", k);
        if (n->failure[0]) {
            /* Named by the launcher: failed, whatever its links measured before. */
            CS__COPY(n->status, "failed");
            n->ratio = 0;
            if (n->measured)
                snprintf(n->evidence, sizeof(n->evidence),
                         "%.150s; before that the median of its %d link(s) was %.3g Gb/s",
                         n->failure, n->measured, n->gbps);
            else
                snprintf(n->evidence, sizeof(n->evidence), "%.200s; no link measured before",
                         n->failure);
            continue;
        }
        if (!n->measured) {
            CS__COPY(n->status, nl ? "failed" : "unmeasured");
            n->ratio = 0;
            snprintf(n->evidence, sizeof(n->evidence),
                     nl ? "no link result although other nodes have some: it did not take part "
                          "or failed mid-benchmark"
                        : "no node-to-node measurement (fewer than two nodes, or none finished)");
            continue;
        }
        n->ratio = f->node_reference_gbps > 0 ? n->gbps / f->node_reference_gbps : 0;
        int slow_lat = f->node_reference_latency_us > 0 &&
                       n->latency_us > lim->latency_factor * f->node_reference_latency_us;
        int slow = n->ratio < lim->peer_fraction ||
                   (n->nic_gbps > 0 && n->gbps < lim->capacity_fraction * n->nic_gbps) || slow_lat;
        CS__COPY(n->status, slow ? "slow" : "ok");
        char exp[96];
        if (n->nic_gbps > 0)
            snprintf(exp, sizeof(exp), "%.3g Gb/s (%.63s)", n->nic_gbps, n->nic);
        else
            snprintf(exp, sizeof(exp), "unknown");
        snprintf(
            n->evidence, sizeof(n->evidence),
            "median of its %d link(s) %.3g Gb/s measured vs %s expected vs %.3g Gb/s median of "
            "nodes (%.2f of median); latency %.3g us vs %.3g us median of nodes",
            n->measured, n->gbps, exp, f->node_reference_gbps, n->ratio, n->latency_us,
            f->node_reference_latency_us);
    }
    free(v);

    /* Port counters: errors, discards or a link that went down during the benchmark make the
     * node a suspect, whatever its bandwidth (a flapping or noisy link costs later). */
    for (size_t i = 0; i < f->n_ports; i++) {
        const struct cs_fabric_port *p = &f->ports[i];
        if (!p->valid || (size_t)p->node >= f->n_nodes)
            continue;
        char ev[160] = "";
        size_t o = 0;
        const long long cnt[4] = {p->symbol_errors, p->rcv_errors, p->link_downed,
                                  p->xmit_discards};
        static const char *const name[4] = {"symbol_errors", "rcv_errors", "link_downed",
                                            "xmit_discards"};
        for (int k = 0; k < 4 && o < sizeof(ev); k++)
            if (cnt[k] > 0)
                o += (size_t)snprintf(ev + o, sizeof(ev) - o, "%s%s +%lld", o ? ", " : "", name[k],
                                      cnt[k]);
        if (!ev[0])
            continue;
        struct cs_fabric_node *n = &f->nodes[p->node];
        size_t l = strlen(n->port_errors);
        snprintf(n->port_errors + l, sizeof(n->port_errors) - l, "%s%.60s/%d: %.120s",
                 l ? "; " : "", p->nic, p->port, ev);
    }
    for (size_t k = 0; k < f->n_nodes; k++) {
        struct cs_fabric_node *n = &f->nodes[k];
        if (!n->port_errors[0])
            continue;
        size_t l = strlen(n->evidence);
        snprintf(n->evidence + l, sizeof(n->evidence) - l,
                 "; port counters during the benchmark: %s", n->port_errors);
        if (!strcmp(n->status, "ok") || !strcmp(n->status, "unmeasured"))
            CS__COPY(n->status, "errors");
    }

    /* Suspects: slow and failed nodes; slow links between two healthy nodes (a cable, a switch
     * port).  A slow node's links are explained by the node. */
    for (size_t k = 0; k < f->n_nodes; k++) {
        const struct cs_fabric_node *n = &f->nodes[k];
        if (!strcmp(n->status, "slow") || !strcmp(n->status, "failed") ||
            !strcmp(n->status, "errors"))
            add_suspect(f, "node", n->host, n->ratio, n->evidence);
    }
    for (size_t i = 0; i < nl; i++) {
        const struct cs_fabric_link *l = &f->links[i];
        if (strcmp(l->status, "slow") || strcmp(f->nodes[l->a].status, "ok") ||
            strcmp(f->nodes[l->b].status, "ok"))
            continue;
        char name[520];
        snprintf(name, sizeof(name), "%s - %s", host_of(f, l->a), host_of(f, l->b));
        add_suspect(f, "link", name, l->ratio, l->evidence);
    }
    if (f->n_suspects > 1)
        qsort(f->suspects, f->n_suspects, sizeof(*f->suspects), cmp_suspect);

    if (f->nodes_expected && f->n_nodes != (size_t)f->nodes_expected)
        cs__fabric_note(f, "the benchmark announced %d nodes but described %zu", f->nodes_expected,
                        f->n_nodes);
    size_t pairs = f->n_nodes * (f->n_nodes ? f->n_nodes - 1 : 0) / 2;
    if (f->rounds == f->rounds_total && nl < pairs)
        cs__fabric_note(f, "%zu of %zu node pairs measured", nl, pairs);
    if (!f->complete)
        cs__fabric_note(f, "the benchmark did not finish: results are partial");
}

void cs_fabric_free(struct cs_fabric *f)
{
    free(f->nodes);
    free(f->links);
    free(f->colls);
    free(f->suspects);
    free(f->rank_node);
    free(f->ports);
    free(f->nccl_devices);
    for (size_t i = 0; i < f->n_notes; i++)
        free(f->notes[i]);
    free(f->notes);
    memset(f, 0, sizeof(*f));
}

/* The links' wire evidence (commscope fabric --capture), when there is any. */
static void fabric_print_wire(const struct cs_fabric *f, FILE *o)
{
    size_t have = 0;
    for (size_t i = 0; i < f->n_links; i++)
        have += f->links[i].wire.have != 0;
    if (!have)
        return;
    fprintf(o, "\nlinks on the wire (pair test; bytes both ways vs sent; rate: busy buckets)\n");
    fprintf(o, "  %-31s %-12s %10s %6s %8s %9s %9s\n", "a - b", "interface", "wire_MB", "ratio",
            "retrans", "a>b Gb/s", "b>a Gb/s");
    for (size_t i = 0; i < f->n_links; i++) {
        const struct cs_fabric_link *l = &f->links[i];
        const struct cs_fabric_wire *w = &l->wire;
        if (!w->have)
            continue;
        char name[520];
        snprintf(name, sizeof(name), "%s - %s", host_of(f, l->a), host_of(f, l->b));
        fprintf(o, "  %-31.31s %-12.12s %10.3f %6.3f %8.0f %9.3g %9.3g\n", name,
                w->ifaces[0] ? w->ifaces : "-", (w->bytes_ab + w->bytes_ba) / 1e6, w->ratio,
                w->retrans_ab + w->retrans_ba, w->gbps_ab, w->gbps_ba);
    }
    for (size_t i = 0; i < f->n_links; i++) {
        const struct cs_fabric_link *l = &f->links[i];
        for (int k = 0; k < l->wire.nwarn; k++)
            fprintf(o, "  WARNING: link %s - %s on the wire: %s\n", host_of(f, l->a),
                    host_of(f, l->b), l->wire.warn[k]);
    }
}

/* One line on the NCCL sweep: on which GPUs it ran, or why it did not. */
static void fabric_print_nccl(const struct cs_fabric *f, FILE *o)
{
    if (f->nccl_available < 0)
        return;
    if (!f->nccl_available) {
        fprintf(o, "NCCL: not measured (%s); the collectives above are MPI only\n", f->nccl_reason);
        return;
    }
    fprintf(o,
            "NCCL %d.%d.%d: measured on %zu rank(s), one GPU each (device = local rank mod "
            "device count)%s%s\n",
            f->nccl_version / 10000, f->nccl_version / 100 % 100, f->nccl_version % 100,
            f->n_nccl_devices, f->nccl_failed ? "; STOPPED: " : "",
            f->nccl_failed ? f->nccl_reason : "");
}

void cs_fabric_print(const struct cs_fabric *f, FILE *o)
{
    size_t pairs = f->n_nodes * (f->n_nodes ? f->n_nodes - 1 : 0) / 2;
    fprintf(o, "fabric: %zu node(s), %d rank(s); %zu of %zu node pairs measured in %d round(s)%s\n",
            f->n_nodes, f->ranks, f->n_links, pairs, f->rounds, f->complete ? "" : " (INCOMPLETE)");
    fprintf(o, "\nnodes (median of each node's links)\n");
    fprintf(o, "  %-20s %-8s %10s %8s %12s  %s\n", "host", "status", "Gb/s", "ratio", "latency_us",
            "NIC (capacity)");
    for (size_t k = 0; k < f->n_nodes; k++) {
        const struct cs_fabric_node *n = &f->nodes[k];
        char cap[96];
        if (n->nic_gbps > 0)
            snprintf(cap, sizeof(cap), "%s (%.3g Gb/s)", n->nic, n->nic_gbps);
        else
            snprintf(cap, sizeof(cap), "%s (unknown)", n->nic[0] ? n->nic : "-");
        fprintf(o, "  %-20s %-8s %10.3g %8.2f %12.3g  %s\n", n->host, n->status, n->gbps, n->ratio,
                n->latency_us, cap);
    }
    if (f->n_links) {
        fprintf(o, "\nlinks (slower direction; median %.3g Gb/s, %.3g us)\n", f->link_median_gbps,
                f->link_median_latency_us);
        fprintf(o, "  %-41s %-6s %10s %10s %8s %12s\n", "a - b", "status", "Gb/s", "expected",
                "ratio", "latency_us");
        for (size_t i = 0; i < f->n_links; i++) {
            const struct cs_fabric_link *l = &f->links[i];
            char name[520], exp[32];
            snprintf(name, sizeof(name), "%s - %s", host_of(f, l->a), host_of(f, l->b));
            if (l->expected_gbps > 0)
                snprintf(exp, sizeof(exp), "%.3g", l->expected_gbps);
            else
                snprintf(exp, sizeof(exp), "-");
            fprintf(o, "  %-41.41s %-6s %10.3g %10s %8.2f %12.3g\n", name, l->status, l->gbps, exp,
                    l->ratio, l->latency_us);
        }
    }
    fabric_print_wire(f, o);
    if (f->n_colls) {
        fprintf(o, "\ncollectives (largest size of each op; all sizes in the JSON)\n");
        fprintf(o, "  %-14s %-9s %12s %12s %12s %12s\n", "op", "transport", "bytes", "time_us",
                "algbw Gb/s", "busbw Gb/s");
        for (size_t i = 0; i < f->n_colls; i++) {
            const struct cs_fabric_coll *c = &f->colls[i];
            if (i + 1 < f->n_colls && !strcmp(f->colls[i + 1].op, c->op) &&
                !strcmp(f->colls[i + 1].transport, c->transport))
                continue;
            fprintf(o, "  %-14s %-9s %12zu %12.4g %12.4g %12.4g\n", c->op, c->transport, c->bytes,
                    c->time_us, c->algbw_gbps, c->busbw_gbps);
        }
    }
    fabric_print_nccl(f, o);
    if (f->n_ports) {
        fprintf(o, "\nport counters (differences over the benchmark)\n");
        for (size_t i = 0; i < f->n_ports; i++) {
            const struct cs_fabric_port *p = &f->ports[i];
            if (!p->valid) {
                fprintf(o, "  %-20s %s/%d: not readable\n", host_of(f, p->node), p->nic, p->port);
                continue;
            }
            fprintf(o,
                    "  %-20s %s/%d: xmit_bytes=%lld rcv_bytes=%lld symbol_errors=%lld "
                    "rcv_errors=%lld link_downed=%lld xmit_discards=%lld\n",
                    host_of(f, p->node), p->nic, p->port, p->xmit_bytes, p->rcv_bytes,
                    p->symbol_errors, p->rcv_errors, p->link_downed, p->xmit_discards);
        }
    }
    fprintf(o, "\nsuspects: %zu\n", f->n_suspects);
    for (size_t i = 0; i < f->n_suspects; i++)
        fprintf(o, "  %zu. %s %s: %s\n", i + 1, f->suspects[i].kind, f->suspects[i].name,
                f->suspects[i].evidence);
    for (size_t i = 0; i < f->n_notes; i++)
        fprintf(o, "note: %s\n", f->notes[i]);
}

static void jnum(FILE *o, double v)
{
    if (v > 0 && isfinite(v))
        fprintf(o, "%.6g", v);
    else if (v == 0)
        fputs("0", o);
    else
        fputs("null", o);
}

/* A link's "wire" object (docs/report-schema.md), null without capture. */
static void write_json_wire(const struct cs_fabric_wire *w, FILE *o)
{
    if (!w->have) {
        fputs("null", o);
        return;
    }
    fputs("{\"interfaces\": [", o);
    char names[sizeof w->ifaces];
    memcpy(names, w->ifaces, sizeof names);
    int k = 0;
    for (char *save = NULL, *t = strtok_r(names, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        fputs(k++ ? ", " : "", o);
        cs_topo_json_string(o, t);
    }
    fprintf(o, "], \"expected\": %s, \"captured_by\": \"%s\"",
            w->expected < 0 ? "null"
            : w->expected   ? "true"
                            : "false",
            w->views == 3   ? "both"
            : w->views == 1 ? "a"
                            : "b");
    const struct {
        const char *key;
        double v;
    } nums[] = {{"sent_bytes", w->sent_bytes},
                {"wire_bytes", w->bytes_ab + w->bytes_ba},
                {"ratio", w->ratio},
                {"bytes_ab", w->bytes_ab},
                {"bytes_ba", w->bytes_ba},
                {"packets_ab", w->pkts_ab},
                {"packets_ba", w->pkts_ba},
                {"retransmits_ab", w->retrans_ab},
                {"retransmits_ba", w->retrans_ba},
                {"gbps_ab", w->gbps_ab},
                {"gbps_ba", w->gbps_ba},
                {"busy_buckets_ab", w->busy_ab},
                {"busy_buckets_ba", w->busy_ba}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        fprintf(o, ", \"%s\": ", nums[i].key);
        /* Counts are whole numbers: printed exactly, not to 6 digits. */
        if (strstr(nums[i].key, "gbps") || !strcmp(nums[i].key, "ratio"))
            jnum(o, nums[i].v);
        else
            fprintf(o, "%.0f", nums[i].v);
    }
    fputs(", \"warnings\": [", o);
    for (int i = 0; i < w->nwarn; i++) {
        fputs(i ? ", " : "", o);
        cs_topo_json_string(o, w->warn[i]);
    }
    fputs("]}", o);
}

/* The "nccl" object (docs/report-schema.md), null when the benchmark said nothing of NCCL. */
static void write_json_nccl(const struct cs_fabric *f, FILE *o)
{
    if (f->nccl_available < 0) {
        fputs("null", o);
        return;
    }
    fprintf(o, "{\"available\": %s", f->nccl_available ? "true" : "false");
    if (f->nccl_available) {
        fprintf(o, ", \"version\": %d, \"devices\": [", f->nccl_version);
        for (size_t i = 0; i < f->n_nccl_devices; i++)
            fprintf(o, "%s%d", i ? ", " : "", f->nccl_devices[i]);
        fprintf(o, "], \"stopped\": %s", f->nccl_failed ? "true" : "false");
    }
    fputs(", \"reason\": ", o);
    if (f->nccl_reason[0])
        cs_topo_json_string(o, f->nccl_reason);
    else
        fputs("null", o);
    fputc('}', o);
}

void cs_fabric_write_json(const struct cs_fabric *f, FILE *o)
{
    fprintf(o, "{\n  \"schema\": \"%s\",\n  \"complete\": %s,\n  \"ranks\": %d,\n",
            CS_FABRIC_SCHEMA, f->complete ? "true" : "false", f->ranks);
    fprintf(o, "  \"rounds\": %d,\n  \"rounds_total\": %d,\n  \"link_median_gbps\": ", f->rounds,
            f->rounds_total);
    jnum(o, f->link_median_gbps);
    fputs(",\n  \"link_median_latency_us\": ", o);
    jnum(o, f->link_median_latency_us);
    fputs(",\n  \"node_reference_gbps\": ", o);
    jnum(o, f->node_reference_gbps);
    fputs(",\n  \"node_reference_latency_us\": ", o);
    jnum(o, f->node_reference_latency_us);
    fputs(",\n  \"nodes\": [", o);
    for (size_t k = 0; k < f->n_nodes; k++) {
        const struct cs_fabric_node *n = &f->nodes[k];
        fprintf(o, "%s\n    {\"host\": ", k ? "," : "");
        cs_topo_json_string(o, n->host);
        fputs(", \"status\": ", o);
        cs_topo_json_string(o, n->status);
        fprintf(o, ", \"ranks\": %d, \"links_measured\": %d, \"gbps\": ", n->ranks, n->measured);
        jnum(o, n->gbps);
        fputs(", \"latency_us\": ", o);
        jnum(o, n->latency_us);
        fputs(", \"ratio\": ", o);
        jnum(o, n->ratio);
        fputs(", \"nic\": ", o);
        if (n->nic[0])
            cs_topo_json_string(o, n->nic);
        else
            fputs("null", o);
        fputs(", \"expected_gbps\": ", o);
        if (n->nic_gbps > 0)
            jnum(o, n->nic_gbps);
        else
            fputs("null", o);
        fputs(", \"evidence\": ", o);
        cs_topo_json_string(o, n->evidence);
        fputc('}', o);
    }
    fputs(f->n_nodes ? "\n  ],\n  \"links\": [" : "],\n  \"links\": [", o);
    for (size_t i = 0; i < f->n_links; i++) {
        const struct cs_fabric_link *l = &f->links[i];
        fprintf(o, "%s\n    {\"a\": ", i ? "," : "");
        cs_topo_json_string(o, host_of(f, l->a));
        fputs(", \"b\": ", o);
        cs_topo_json_string(o, host_of(f, l->b));
        fputs(", \"gbps\": ", o);
        jnum(o, l->gbps);
        fputs(", \"ab_gbps\": ", o);
        jnum(o, l->ab_gbps);
        fputs(", \"ba_gbps\": ", o);
        jnum(o, l->ba_gbps);
        fputs(", \"latency_us\": ", o);
        jnum(o, l->latency_us);
        fputs(", \"latency_reference_us\": ", o);
        jnum(o, l->latency_ref_us);
        fprintf(o, ", \"latency_retests\": %d", l->latency_retests);
        fputs(", \"expected_gbps\": ", o);
        if (l->expected_gbps > 0)
            jnum(o, l->expected_gbps);
        else
            fputs("null", o);
        fputs(", \"ratio\": ", o);
        jnum(o, l->ratio);
        fputs(", \"status\": ", o);
        cs_topo_json_string(o, l->status);
        fputs(", \"evidence\": ", o);
        cs_topo_json_string(o, l->evidence);
        fputs(", \"wire\": ", o);
        write_json_wire(&l->wire, o);
        fputc('}', o);
    }
    fputs(f->n_links ? "\n  ],\n  \"collectives\": [" : "],\n  \"collectives\": [", o);
    for (size_t i = 0; i < f->n_colls; i++) {
        const struct cs_fabric_coll *c = &f->colls[i];
        fprintf(o, "%s\n    {\"op\": ", i ? "," : "");
        cs_topo_json_string(o, c->op);
        fprintf(o, ", \"transport\": \"%s\"", c->transport);
        fprintf(o, ", \"bytes\": %zu, \"time_us\": ", c->bytes);
        jnum(o, c->time_us);
        fputs(", \"algbw_gbps\": ", o);
        jnum(o, c->algbw_gbps);
        fputs(", \"busbw_gbps\": ", o);
        jnum(o, c->busbw_gbps);
        fputc('}', o);
    }
    fputs(f->n_colls ? "\n  ],\n  \"nccl\": " : "],\n  \"nccl\": ", o);
    write_json_nccl(f, o);
    fputs(",\n  \"ports\": [", o);
    for (size_t i = 0; i < f->n_ports; i++) {
        const struct cs_fabric_port *p = &f->ports[i];
        fprintf(o, "%s\n    {\"host\": ", i ? "," : "");
        cs_topo_json_string(o, host_of(f, p->node));
        fputs(", \"nic\": ", o);
        cs_topo_json_string(o, p->nic);
        fprintf(o, ", \"port\": %d, \"valid\": %s", p->port, p->valid ? "true" : "false");
        if (p->valid)
            fprintf(o,
                    ", \"xmit_bytes\": %lld, \"rcv_bytes\": %lld, \"symbol_errors\": %lld, "
                    "\"rcv_errors\": %lld, \"link_downed\": %lld, \"xmit_discards\": %lld",
                    p->xmit_bytes, p->rcv_bytes, p->symbol_errors, p->rcv_errors, p->link_downed,
                    p->xmit_discards);
        fputc('}', o);
    }
    fputs(f->n_ports ? "\n  ],\n  \"suspects\": [" : "],\n  \"suspects\": [", o);
    for (size_t i = 0; i < f->n_suspects; i++) {
        const struct cs_fabric_suspect *s = &f->suspects[i];
        fprintf(o, "%s\n    {\"rank\": %zu, \"kind\": ", i ? "," : "", i + 1);
        cs_topo_json_string(o, s->kind);
        fputs(", \"name\": ", o);
        cs_topo_json_string(o, s->name);
        fputs(", \"ratio\": ", o);
        jnum(o, s->ratio);
        fputs(", \"evidence\": ", o);
        cs_topo_json_string(o, s->evidence);
        fputc('}', o);
    }
    fputs(f->n_suspects ? "\n  ],\n  \"notes\": [" : "],\n  \"notes\": [", o);
    for (size_t i = 0; i < f->n_notes; i++) {
        fputs(i ? ",\n    " : "\n    ", o);
        cs_topo_json_string(o, f->notes[i]);
    }
    fputs(f->n_notes ? "\n  ]\n}\n" : "]\n}\n", o);
}
