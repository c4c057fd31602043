/*
 * Hosts and hardware: which ranks ran on which host (the trace headers' host names), each node's
 * snapshot from RUN_DIR/topology/ (HOST.xml: hwloc or NCCL topology; HOST.ports: port rates and
 * counters before and after the run, written by `commscope node-snapshot`), and from them:
 *
 *   - each op row's scope: inter-host when its communicator's members span hosts, else intra-host
 *     (point-to-point rows also split by the peer's host, event by event, in metrics.c);
 *   - the capacity of each op row's bottleneck path (the topology library's capacity model over
 *     the pairs of hosts of its members) and busbw as a percentage of it;
 *   - the inter- and intra-host totals;
 *   - per host and port the counter differences over the run;
 *   - GPU-NIC affinity, which needs each rank's GPU: traces do not record one, so the report says
 *     so and lists the snapshots' own GPU-NIC warnings instead.
 * Formulas: docs/metrics.md ("Hosts, topology and capacity").
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commscope/input.h"

#include "internal.h"
#include "nodes.h"
#include "topology.h"

#define MAX_CAP_HOSTS 1024

/* FNV-1a of a host name (at most CS_HOST_MAX bytes, to its NUL). */
static uint64_t host_hash(const char *h)
{
    uint64_t x = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < CS_HOST_MAX && h[i]; i++)
        x = (x ^ (unsigned char)h[i]) * 0x100000001b3ull;
    return x;
}

/* Host index of each present rank: hosts numbered in order of first rank.  The first rank of
 * each host is found through a table by the name's hash (thousands of ranks on hundreds of hosts
 * cost no quadratic scan).  Out of memory, host_of stays NULL (hosts unknown). */
void cs__nodes_index(struct cs__run *run)
{
    if (run->world <= 0 || run->host_of)
        return;
    size_t cap = 2;
    while (cap < 2 * (size_t)run->world)
        cap *= 2;
    int32_t *first = malloc(cap * sizeof *first); /* a host's first rank, -1 empty */
    run->host_of = first ? malloc((size_t)run->world * sizeof *run->host_of) : NULL;
    if (!run->host_of) {
        free(first);
        return;
    }
    for (size_t j = 0; j < cap; j++)
        first[j] = -1;
    int nh = 0;
    for (int r = 0; r < run->world; r++) {
        run->host_of[r] = -1;
        if (!run->ranks[r].present)
            continue;
        const char *h = run->ranks[r].h->host;
        size_t j = (size_t)host_hash(h) & (cap - 1);
        for (; first[j] >= 0; j = (j + 1) & (cap - 1))
            if (!strncmp(run->ranks[first[j]].h->host, h, CS_HOST_MAX))
                break;
        if (first[j] < 0) {
            first[j] = r;
            run->host_of[r] = nh++;
        } else {
            run->host_of[r] = run->host_of[first[j]];
        }
    }
    run->nhosts = nh;
    free(first);
}

/* "key=value" of a .ports line; 0 when absent. */
static const char *field(char *const *tok, int n, const char *key)
{
    size_t k = strlen(key);
    for (int i = 0; i < n; i++)
        if (!strncmp(tok[i], key, k) && tok[i][k] == '=')
            return tok[i] + k + 1;
    return NULL;
}

static uint64_t u64(char *const *tok, int n, const char *key, int *ok)
{
    const char *v = field(tok, n, key);
    if (!v) {
        *ok = 0;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end)
        *ok = 0;
    return x;
}

static struct cs_report_port *port_of(struct cs_report_host *h, const char *nic, int port)
{
    for (size_t i = 0; i < h->nports; i++)
        if (!strcmp(h->ports[i].nic, nic) && h->ports[i].port == port)
            return &h->ports[i];
    void *p = realloc(h->ports, (h->nports + 1) * sizeof *h->ports);
    if (!p)
        return NULL;
    h->ports = p;
    struct cs_report_port *o = &h->ports[h->nports++];
    memset(o, 0, sizeof *o);
    snprintf(o->nic, sizeof o->nic, "%s", nic);
    o->port = port;
    return o;
}

static const char *const counter_name[CS_N_COUNTERS] = {
    "xmit_bytes", "rcv_bytes", "symbol_errors", "rcv_errors", "link_downed", "xmit_discards"};

/* Read HOST.ports: apply "port" lines to the topology's NICs, collect counters. */
static void read_ports(struct cs__run *run, struct cs_report_host *h, const char *path,
                       struct cs_topo *t)
{
    FILE *f = cs_input_fopen(path);
    if (!f)
        return; /* optional: an older collector or a helper that did not finish */
    char line[1024];
    int ln = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        char *tok[16];
        int n = 0;
        for (char *s = strtok(line, " \t\r\n"); s && n < 16; s = strtok(NULL, " \t\r\n"))
            tok[n++] = s;
        if (n == 0 || !strcmp(tok[0], "host"))
            continue;
        if (!strcmp(tok[0], "error")) {
            cs__problem(run, "node snapshot of %s: %s", h->host, line + 6);
            continue;
        }
        int ok = n >= 3;
        if (ok && !strcmp(tok[0], "port")) {
            for (size_t i = 0; t && i < t->n_nics; i++) {
                struct cs_topo_nic *nic = &t->nics[i];
                if (strcmp(nic->name, tok[1]) != 0)
                    continue;
                const char *v;
                if ((v = field(tok, n, "gbps")) && atof(v) > 0) {
                    nic->gbps = atof(v);
                    snprintf(nic->rate_source, sizeof nic->rate_source, "%s",
                             (v = field(tok, n, "rate_source")) ? v : "snapshot");
                }
                if ((v = field(tok, n, "state")))
                    snprintf(nic->state, sizeof nic->state, "%s", v);
                if ((v = field(tok, n, "width")))
                    nic->width = atoi(v);
            }
            continue;
        }
        if (ok && !strcmp(tok[0], "counters") && n >= 4) {
            int after = !strcmp(tok[1], "after");
            if (!after && strcmp(tok[1], "before") != 0)
                ok = 0;
            uint64_t v[CS_N_COUNTERS];
            for (int k = 0; k < CS_N_COUNTERS; k++)
                v[k] = u64(tok, n, counter_name[k], &ok);
            struct cs_report_port *p = ok ? port_of(h, tok[2], atoi(tok[3])) : NULL;
            if (p) {
                memcpy(after ? p->after : p->before, v, sizeof v);
                *(after ? &p->have_after : &p->have_before) = 1;
            }
            if (ok)
                continue;
        }
        cs__problem(run, "%s:%d: not a port or counters record; line skipped", path, ln);
    }
    fclose(f);
}

static int has_nic_rate(const struct cs_topo *t)
{
    return t && cs_topo_rank_nic(t, -1) >= 0 && t->nics[cs_topo_rank_nic(t, -1)].gbps > 0;
}

void cs__nodes_report(struct cs__run *run, struct cs_report *rep)
{
    if (!run->host_of)
        cs__nodes_index(run);
    struct cs_report_nodes *nd = calloc(1, sizeof *nd);
    if (!nd || !run->host_of) {
        free(nd);
        return;
    }
    rep->nodes = nd;
    int nh = 0;
    for (int r = 0; r < run->world; r++)
        if (run->host_of[r] >= nh)
            nh = run->host_of[r] + 1;
    nd->hosts = calloc((size_t)nh + 1, sizeof *nd->hosts);
    nd->ops = calloc(rep->nops + 1, sizeof *nd->ops);
    struct cs_topo **topo = calloc((size_t)nh + 1, sizeof *topo);
    if (!nd->hosts || !nd->ops || !topo) {
        free(topo);
        cs__problem(run, "out of memory for the host and topology report");
        return;
    }
    nd->nhosts = (size_t)nh;
    for (int r = 0; r < run->world; r++) {
        int hi = run->host_of[r];
        if (hi < 0)
            continue;
        struct cs_report_host *h = &nd->hosts[hi];
        if (!h->nranks++) {
            snprintf(h->host, sizeof h->host, "%.*s", CS_HOST_MAX - 1, run->ranks[r].h->host);
            h->first_rank = r;
        }
    }

    /* Snapshots. */
    for (int i = 0; i < nh; i++) {
        struct cs_report_host *h = &nd->hosts[i];
        char path[4200], err[512];
        snprintf(path, sizeof path, "%s/topology/%s.xml", run->dir, h->host);
        h->nic_gbps = NAN;
        FILE *probe = cs_input_fopen(path);
        if (!probe) {
            snprintf(h->note, sizeof h->note, "no topology snapshot (%s/topology/%s.xml)",
                     "RUN_DIR", h->host);
        } else {
            fclose(probe);
            if (cs_topo_load(path, &topo[i], err, sizeof err) < 0) {
                cs__problem(run, "topology snapshot of %s: %s", h->host, err);
                snprintf(h->note, sizeof h->note, "topology snapshot unreadable");
            }
        }
        snprintf(path, sizeof path, "%s/topology/%s.ports", run->dir, h->host);
        read_ports(run, h, path, topo[i]);
        struct cs_topo *t = topo[i];
        if (!t)
            continue;
        h->snapshot = 1;
        /* The node is the host the ranks ran on, whatever name the file carries (a file given
         * with COMMSCOPE_TOPOLOGY may describe a machine by another name). */
        snprintf(t->host, sizeof t->host, "%s", h->host);
        snprintf(h->source, sizeof h->source, "%s", t->source);
        h->ngpus = (int)t->n_gpus;
        int k = cs_topo_rank_nic(t, -1);
        if (k >= 0) {
            snprintf(h->nic, sizeof h->nic, "%s", t->nics[k].name);
            h->nic_gbps = t->nics[k].gbps > 0 ? t->nics[k].gbps : NAN;
        }
        h->warnings = t->warnings;
        h->nwarnings = t->n_warnings;
        t->warnings = NULL; /* the report keeps them */
        t->n_warnings = 0;
        if (t->n_gpus)
            nd->hosts_with_gpus++;
    }

    /* Per op row: scope, bottleneck path, percentage of capacity. */
    for (size_t i = 0; i < rep->nops && i < run->nrows; i++) {
        const struct cs__oprow *row = &run->rows[i];
        struct cs_report_optopo *o = &nd->ops[i];
        const struct cs_report_op *op = &rep->ops[i];
        o->capacity_gbps = o->pct_of_capacity = NAN;
        o->p2p_gbps[0] = o->p2p_gbps[1] = NAN;
        const struct cs__comm *c = cs__comm_get(run, row->comm);
        int unknown = !c, span = 0, first = -1;
        /* Hosts of the members, each once. */
        int *hs = calloc((size_t)nh + 1, sizeof *hs);
        unsigned char *seen = calloc((size_t)nh + 1, 1);
        int nhs = 0, multi = 0;
        for (int32_t m = 0; c && hs && seen && m < c->size; m++) {
            int32_t w = c->members[m];
            int hi = (w >= 0 && w < run->world) ? run->host_of[w] : -1;
            if (hi < 0) {
                unknown = 1;
                continue;
            }
            if (first < 0)
                first = hi;
            else if (hi != first)
                span = 1;
            if (seen[hi])
                multi = 1;
            else {
                seen[hi] = 1;
                hs[nhs++] = hi;
            }
        }
        snprintf(o->scope, sizeof o->scope, "%s",
                 span                     ? "inter-host"
                 : (unknown || first < 0) ? "unknown"
                                          : "intra-host");
        for (int s = 0; s < 2; s++)
            if (row->p2p_scope_ns[s] > 0)
                o->p2p_gbps[s] = row->p2p_scope_bytes[s] / row->p2p_scope_ns[s];
        /* The bottleneck: the slowest pair of member hosts (CPU ranks: a pair's path depends on
         * the two hosts only).  Ranks sharing a host talk through shared memory, which is not
         * modelled; when members span hosts, the network pairs are the bottleneck. */
        if (span && !unknown && nhs <= MAX_CAP_HOSTS) {
            double best = INFINITY;
            int missing = -1;
            for (int a = 0; a < nhs && missing < 0; a++) {
                if (!has_nic_rate(topo[hs[a]]))
                    missing = hs[a];
                for (int b = a + 1; b < nhs && missing < 0; b++) {
                    struct cs_topo_place pa = {topo[hs[a]], -1, nd->hosts[hs[a]].first_rank};
                    struct cs_topo_place pb = {topo[hs[b]], -1, nd->hosts[hs[b]].first_rank};
                    struct cs_topo_path p;
                    if (!pa.topo || !pb.topo)
                        continue;
                    cs_topo_capacity(&pa, &pb, &p);
                    if (p.gbps > 0 && p.gbps < best) {
                        best = p.gbps;
                        snprintf(o->path, sizeof o->path, "%s", cs_topo_path_name(p.kind));
                        snprintf(o->bottleneck, sizeof o->bottleneck, "%.60s-%.60s: %.190s",
                                 nd->hosts[hs[a]].host, nd->hosts[hs[b]].host, p.why);
                    }
                }
            }
            if (missing >= 0) {
                snprintf(o->path, sizeof o->path, "network");
                snprintf(o->bottleneck, sizeof o->bottleneck, "unknown: no NIC rate for host %s",
                         nd->hosts[missing].host);
            } else if (isfinite(best)) {
                o->capacity_gbps = best;
            }
        } else if (!span && !unknown && first >= 0) {
            snprintf(o->path, sizeof o->path, "%s", multi ? "shm" : "self");
            snprintf(o->bottleneck, sizeof o->bottleneck, "%s",
                     multi ? "unknown: shared memory inside a host is not modelled"
                           : "one rank: no transfer");
        } else {
            snprintf(o->path, sizeof o->path, "unknown");
            snprintf(o->bottleneck, sizeof o->bottleneck, "unknown: %s",
                     nhs > MAX_CAP_HOSTS ? "too many hosts" : "a member's host is unknown");
        }
        free(hs);
        free(seen);
        /* Report bandwidths are GB/s (bytes/ns); capacities are Gb/s. */
        double bw = op->busbw_gbps;
        enum cs_op_kind kind = cs_op_info(row->op)->kind;
        if (kind == CS_KIND_P2P || kind == CS_KIND_IP2P)
            bw = o->p2p_gbps[1];
        if (isfinite(o->capacity_gbps) && isfinite(bw))
            o->pct_of_capacity = 100.0 * bw * 8.0 / o->capacity_gbps;

        /* Scope totals. */
        if (kind == CS_KIND_COLL || kind == CS_KIND_ICOLL) {
            int s = !strcmp(o->scope, "inter-host") ? 1 : !strcmp(o->scope, "intra-host") ? 0 : -1;
            if (s >= 0 && row->inst_ns > 0) {
                struct cs_report_scope *sc = &nd->scope[s][0];
                sc->bytes += row->inst_bytes;
                sc->ns += row->inst_ns;
                sc->bus_bytes += row->inst_bytes * cs_op_busbw_factor(row->op, op->comm_size);
            }
        } else if ((kind == CS_KIND_P2P || kind == CS_KIND_IP2P) && row->op != CS_OP_RECV &&
                   row->op != CS_OP_IRECV) {
            /* point-to-point bytes counted once, at the sender (a receive's are the same) */
            for (int s = 0; s < 2; s++) {
                struct cs_report_scope *sc = &nd->scope[s][1];
                sc->bytes += row->p2p_scope_bytes[s];
                sc->ns += row->p2p_scope_ns[s];
                sc->bus_bytes += row->p2p_scope_bytes[s];
            }
        }
    }
    cs__affinity_report(run, nd, topo);
    for (int i = 0; i < nh; i++)
        cs_topo_free(topo[i]);
    free(topo);
}

void cs__nodes_free(struct cs_report *rep)
{
    struct cs_report_nodes *nd = rep->nodes;
    if (!nd)
        return;
    for (size_t i = 0; nd->hosts && i < nd->nhosts; i++) {
        for (size_t k = 0; k < nd->hosts[i].nwarnings; k++)
            free(nd->hosts[i].warnings[k]);
        free(nd->hosts[i].warnings);
        free(nd->hosts[i].ports);
    }
    free(nd->hosts);
    free(nd->ops);
    free(nd->aff);
    free(nd);
    rep->nodes = NULL;
}
