/*
 * The wire section: reads the run's commscope-wire/1 files (wire-HOST.csw, one per node) and any
 * pcap/pcapng files given with --pcap, adds up the bytes the traced communication implies between
 * hosts while the events stream by (cs__wire_event, cs__wire_instance), and joins the two at the
 * end (cs__wire_end).  Definitions in docs/metrics.md ("Wire").  Numbers only.
 */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "wire.h"
#include "wire_expect.h"
#include "capture.h"

/* Traffic on an interface that is not an expected one is flagged from this share and size on. */
#define OFF_IFACE_SHARE 0.01
#define OFF_IFACE_BYTES 65536
/* Retransmissions are flagged from this rate and count on. */
#define RETRANS_RATE 0.01
#define RETRANS_MIN 10
#define SERIES_MAX 2000
/* Per peer and per host: above this multiple of the expectation (and this many bytes over it),
 * below this fraction. */
#define WIRE_ABOVE 1.5
#define WIRE_BELOW 0.9
#define WIRE_EXCESS 65536.0
/* A peer is compared exactly when collectives could have added at most this share. */
#define WIRE_COLL_SHARE 0.01

struct interval {
    int64_t a, b;
};

struct cs__wire {
    struct cs_wire_file *files;
    char (*label)[64]; /* host of each file ("" for foreign pcaps) */
    size_t nfiles;
    char **sources;
    size_t nsources;
    uint64_t traced;
    struct interval *iv;
    size_t niv, capiv;
    int32_t *host_of; /* world rank -> host id (index into hosts) */
    char (*hosts)[CS_HOST_MAX];
    int nhosts;
    int32_t *cnt; /* scratch: members per host */
    unsigned char is_send[CS_OP_MAX];
    struct cs__wire_expect *expect; /* per peer and per host expectations */
    char **warn;
    unsigned char *loud; /* per warning: 1 for the verdict too (the job's traffic on the wire) */
    size_t nwarn, capwarn;
    size_t nbad; /* input files not read, or read only in part */
};

static char **g_pcaps;
static int g_npcaps;

void cs__wire_set_pcaps(char **paths, int n)
{
    g_pcaps = paths;
    g_npcaps = n;
}

static void vwarn(struct cs__wire *w, int loud, const char *fmt, va_list ap)
{
    void *p = realloc(w->loud, w->nwarn + 1);
    if (!p)
        return;
    w->loud = p;
    w->loud[w->nwarn] = (unsigned char)loud;
    cs__msg_vadd(&w->warn, &w->nwarn, &w->capwarn, fmt, ap);
}

/* A warning of the wire section; warn_verdict: one about the job's traffic (not the capture),
 * which the report's verdict repeats. */
static void warn(struct cs__wire *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct cs__wire *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwarn(w, 0, fmt, ap);
    va_end(ap);
}

static void warn_verdict(struct cs__wire *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void warn_verdict(struct cs__wire *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwarn(w, 1, fmt, ap);
    va_end(ap);
}

static int add_source(struct cs__wire *w, const char *s)
{
    void *p = realloc(w->sources, (w->nsources + 1) * sizeof *w->sources);
    if (!p)
        return -1;
    w->sources = p;
    if (!(w->sources[w->nsources] = strdup(s)))
        return -1;
    w->nsources++;
    return 0;
}

static int add_file(struct cs__wire *w, struct cs_wire_file *f)
{
    void *p = realloc(w->files, (w->nfiles + 1) * sizeof *w->files);
    if (!p)
        return -1;
    w->files = p;
    p = realloc(w->label, (w->nfiles + 1) * sizeof *w->label);
    if (!p)
        return -1;
    w->label = p;
    w->files[w->nfiles] = *f;
    snprintf(w->label[w->nfiles], 64, "%s", strcmp(f->host, "-") == 0 ? "" : f->host);
    w->nfiles++;
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Read the run's wire files and the --pcap files.  Problems go to the run (and the report's
 * problems) and to the wire warnings; the rest of the analysis is unaffected. */
static struct cs__wire *load(struct cs__run *run, const char *dir)
{
    struct cs__wire *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    char err[1200];
    DIR *d = dir ? opendir(dir) : NULL;
    char **names = NULL;
    size_t nn = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "wire-", 5) != 0 || l < 9 || strcmp(e->d_name + l - 4, ".csw"))
            continue;
        void *p = realloc(names, (nn + 1) * sizeof *names);
        if (!p)
            break;
        names = p;
        if ((names[nn] = strdup(e->d_name)))
            nn++;
    }
    if (d)
        closedir(d);
    if (nn)
        qsort(names, nn, sizeof *names, cmp_name);
    for (size_t i = 0; i < nn; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct cs_wire_file f;
        if (cs_wire_file_read(path, &f, err, sizeof err) != 0) {
            if (run)
                cs__problem(run, "wire capture: %s", err);
            warn(w, "%s; that node's wire data is left out", err);
            w->nbad++;
        } else if (add_file(w, &f) != 0 || add_source(w, path) != 0) {
            cs_wire_file_free(&f);
        }
        free(names[i]);
    }
    free(names);
    for (int i = 0; i < g_npcaps; i++) {
        FILE *tmp = tmpfile();
        if (!tmp)
            break;
        int rc = cs_wire_read_pcap(g_pcaps[i], tmp, 0, err, sizeof err);
        if (rc < 0) {
            if (run)
                cs__problem(run, "pcap: %s", err);
            warn(w, "%s", err);
            w->nbad++;
            fclose(tmp);
            continue;
        }
        if (rc == 1) { /* read in part (cut short) */
            warn(w, "%s", err);
            w->nbad++;
        }
        rewind(tmp);
        struct cs_wire_file f;
        char e2[1200];
        if (cs_wire_file_read_stream(tmp, g_pcaps[i], &f, e2, sizeof e2) == 0) {
            if (add_file(w, &f) != 0 || add_source(w, g_pcaps[i]) != 0)
                cs_wire_file_free(&f);
        } else {
            warn(w, "%s", e2);
            w->nbad++;
        }
        fclose(tmp);
    }
    return w;
}

static void wire_free(struct cs__wire *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->nfiles; i++)
        cs_wire_file_free(&w->files[i]);
    free(w->files);
    free(w->label);
    for (size_t i = 0; i < w->nsources; i++)
        free(w->sources[i]);
    free(w->sources);
    for (size_t i = 0; i < w->nwarn; i++)
        free(w->warn[i]);
    free(w->warn);
    free(w->loud);
    free(w->iv);
    free(w->host_of);
    free(w->hosts);
    free(w->cnt);
    cs__wire_expect_free(w->expect);
    free(w);
}

void cs__wire_begin(struct cs__run *run)
{
    if (!g_npcaps) {
        /* Nothing to do unless the run directory holds wire files. */
        DIR *d = opendir(run->dir);
        int any = 0;
        struct dirent *e;
        while (d && !any && (e = readdir(d)))
            any = strncmp(e->d_name, "wire-", 5) == 0 && strstr(e->d_name, ".csw");
        if (d)
            closedir(d);
        if (!any)
            return;
    }
    struct cs__wire *w = load(run, run->dir);
    if (!w)
        return;
    size_t world = run->world > 0 ? (size_t)run->world : 0;
    w->host_of = calloc(world + 1, sizeof *w->host_of);
    w->hosts = calloc(world + 1, sizeof *w->hosts);
    w->cnt = calloc(world + 1, sizeof *w->cnt);
    if (!w->host_of || !w->hosts || !w->cnt) {
        wire_free(w);
        return;
    }
    for (size_t r = 0; r < world; r++) {
        const struct cs__rank *rk = &run->ranks[r];
        const char *h = rk->present && rk->h ? rk->h->host : "";
        int id = -1;
        for (int k = 0; k < w->nhosts && id < 0; k++)
            if (strcmp(w->hosts[k], h) == 0)
                id = k;
        if (id < 0) {
            id = w->nhosts++;
            snprintf(w->hosts[id], CS_HOST_MAX, "%s", h);
        }
        w->host_of[r] = id;
    }
    w->expect = cs__wire_expect_new(w->nhosts);
    for (unsigned op = 0; op < CS_OP_MAX; op++) {
        const struct cs_op_info *oi = cs_op_info(op);
        w->is_send[op] = oi->name && (oi->kind == CS_KIND_P2P || oi->kind == CS_KIND_IP2P) &&
                         strncasecmp(oi->name, "MPI_", 4) == 0 && strcasestr(oi->name + 4, "send");
    }
    run->wire = w;
}

void cs__wire_event(struct cs__run *run, int rank, const struct cs_event *ev)
{
    struct cs__wire *w = run->wire;
    if (!w || ev->op >= CS_OP_MAX || !w->is_send[ev->op] || ev->peer < 0 ||
        ev->peer >= run->world || (ev->flags & (CS_EV_PROC_NULL | CS_EV_ERROR)))
        return;
    if (w->host_of[rank] != w->host_of[ev->peer]) {
        w->traced += ev->bytes;
        cs__wire_expect_p2p(w->expect, w->host_of[rank], w->host_of[ev->peer], ev->bytes);
    }
}

static void add_interval(struct cs__wire *w, int64_t a, int64_t b)
{
    /* Instances close nearly in time order: merging with the last interval keeps the list short. */
    if (w->niv && a <= w->iv[w->niv - 1].b && b >= w->iv[w->niv - 1].a) {
        struct interval *l = &w->iv[w->niv - 1];
        l->a = a < l->a ? a : l->a;
        l->b = b > l->b ? b : l->b;
        return;
    }
    if (cs__grow((void **)&w->iv, &w->capiv, w->niv + 1, sizeof *w->iv))
        return;
    w->iv[w->niv++] = (struct interval){a, b};
}

void cs__wire_instance(struct cs__run *run, const struct cs__inst *in)
{
    struct cs__wire *w = run->wire;
    if (!w || in->n < 2)
        return;
    cs__wire_expect_instance(w->expect, in, w->host_of, run->world);
    int32_t n = in->n;
    for (int32_t i = 0; i < n; i++)
        if (in->members[i] >= 0 && in->members[i] < run->world)
            w->cnt[w->host_of[in->members[i]]]++;
    double f = cs_op_busbw_factor(in->op, n);
    if (cs_op_info(in->op)->busbw == CS_BW_ONE)
        f = (double)(n - 1) / n; /* one rank already holds the data */
    double sum = 0;
    int remote = 0;
    int64_t a = INT64_MAX, b = INT64_MIN;
    for (int32_t i = 0; i < n; i++) {
        int32_t r = in->members[i];
        if (r < 0 || r >= run->world)
            continue;
        int32_t others = n - w->cnt[w->host_of[r]];
        if (others > 0) {
            remote = 1;
            sum += (double)in->size[i] * f * (double)others / (double)(n - 1);
        }
        if (in->arr[i] < a)
            a = in->arr[i];
        if (in->end[i] > b)
            b = in->end[i];
    }
    for (int32_t i = 0; i < n; i++)
        if (in->members[i] >= 0 && in->members[i] < run->world)
            w->cnt[w->host_of[in->members[i]]] = 0;
    if (!remote)
        return;
    w->traced += (uint64_t)llround(sum);
    if (a < b)
        add_interval(w, a, b);
}

static int cmp_iv(const void *x, const void *y)
{
    const struct interval *a = x, *b = y;
    return a->a < b->a ? -1 : a->a > b->a;
}

/* CLOCK_REALTIME time rt (ns) of capture f on its node's CLOCK_MONOTONIC (the trace clock), or -1
 * when it falls outside [0, 2^62) (the reader keeps rt and f's clock pair below 2^62, so the
 * difference cannot overflow). */
static int64_t wire_mono(const struct cs_wire_file *f, uint64_t rt)
{
    int64_t m = (int64_t)rt - (f->realtime_ns - f->monotonic_ns);
    return m >= 0 && (uint64_t)m < CS_TIME_LIMIT ? m : -1;
}

static int in_intervals(const struct cs__wire *w, int64_t t)
{
    size_t lo = 0, hi = w->niv;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (w->iv[m].b < t)
            lo = m + 1;
        else
            hi = m;
    }
    return lo < w->niv && w->iv[lo].a <= t;
}

/* ---- the report ---- */

static const char *addr_label(const struct cs_wire_file *f, int i, char *buf, size_t n)
{
    if (i >= 0 && (size_t)i < f->naddrs && f->addr_host[i][0])
        return f->addr_host[i];
    return cs_wire_addr_str(&f->addrs[i], buf, n);
}

struct link {
    char host[64], peer[64];
    struct cs_wire_report_peer p;
    uint64_t coll_bytes, coll_buckets;
    uint64_t bmin, bmax; /* buckets with tx traffic */
    size_t file;
    int have_tx;
};

static struct link *link_get(struct link **v, size_t *n, size_t *cap, const char *h, const char *p)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*v)[i].host, h) == 0 && strcmp((*v)[i].peer, p) == 0)
            return &(*v)[i];
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        void *q = realloc(*v, c * sizeof **v);
        if (!q)
            return NULL;
        *v = q;
        *cap = c;
    }
    struct link *l = &(*v)[(*n)++];
    memset(l, 0, sizeof *l);
    snprintf(l->host, sizeof l->host, "%s", h);
    snprintf(l->peer, sizeof l->peer, "%s", p);
    l->bmin = UINT64_MAX;
    return l;
}

/* A rank on host h, for its clock (the node's CLOCK_MONOTONIC onto rank 0's). */
static const struct cs__clock *clock_of(const struct cs__run *run, const char *h)
{
    for (int r = 0; run && r < run->world; r++)
        if (run->ranks[r].present && run->ranks[r].h && strcmp(run->ranks[r].h->host, h) == 0)
            return &run->ranks[r].clk;
    return NULL;
}

static int host_id(const struct cs__wire *w, const char *h)
{
    for (int k = 0; k < w->nhosts; k++)
        if (strcmp(w->hosts[k], h) == 0)
            return k;
    return -1;
}

/*
 * Per peer and per host, the wire against what the trace implies (wire_expect.c; docs/wire.md
 * "Per peer and per host").  A peer is compared exactly when only point-to-point traffic crossed
 * between the two hosts; every host with a capture is compared with its range.
 */
static void compare_expected(struct cs__wire *w, struct cs_wire_report *rp)
{
    for (size_t i = 0; i < rp->npeers; i++) {
        struct cs_wire_report_peer *p = &rp->peers[i];
        p->traced_p2p = p->p2p_ratio = NAN;
        p->verdict = NULL;
        int a = host_id(w, p->host), b = host_id(w, p->peer);
        if (!w->expect || a < 0 || b < 0)
            continue;
        p->traced_p2p = cs__wire_expect_pair(w->expect, a, b, &p->coll_max);
        if (p->traced_p2p <= 0 || p->coll_max > WIRE_COLL_SHARE * p->traced_p2p)
            continue;
        p->p2p_ratio = (double)p->bytes_tx / p->traced_p2p;
        p->verdict = p->p2p_ratio > WIRE_ABOVE && (double)p->bytes_tx - p->traced_p2p >= WIRE_EXCESS
                         ? "above"
                     : p->p2p_ratio < WIRE_BELOW ? "below"
                                                 : "ok";
        if (strcmp(p->verdict, "ok"))
            warn(w,
                 "%s -> %s: the wire carried %.2fx the point-to-point bytes traced between them "
                 "(%llu vs %.0f; collectives between them could add at most %.0f): %s",
                 p->host, p->peer, p->p2p_ratio, (unsigned long long)p->bytes_tx, p->traced_p2p,
                 p->coll_max,
                 p->verdict[0] == 'a' ? "retransmissions or other traffic between the two"
                                      : "the capture missed traffic (kernel drops, an interface "
                                        "not captured, RDMA)");
    }
    if (!w->expect)
        return;
    rp->hosts = calloc((size_t)w->nhosts + 1, sizeof *rp->hosts);
    for (int h = 0; rp->hosts && h < w->nhosts; h++) {
        int captured = 0;
        for (size_t fi = 0; fi < w->nfiles && !captured; fi++)
            captured = strcmp(w->label[fi], w->hosts[h]) == 0 && !w->files[fi].status_no_capture;
        if (!captured || !w->hosts[h][0])
            continue;
        struct cs_wire_report_host *x = &rp->hosts[rp->nhosts++];
        snprintf(x->host, sizeof x->host, "%s", w->hosts[h]);
        for (size_t i = 0; i < rp->npeers; i++)
            if (strcmp(rp->peers[i].host, x->host) == 0)
                x->wire_tx += rp->peers[i].bytes_tx;
        cs__wire_expect_host(w->expect, h, &x->p2p, &x->coll_min, &x->coll_max);
        double lo = x->p2p + x->coll_min, hi = x->p2p + x->coll_max;
        x->ratio_min = hi > 0 ? (double)x->wire_tx / hi : NAN;
        x->ratio_max = lo > 0 ? (double)x->wire_tx / lo : NAN;
        x->verdict = "ok";
        if ((double)x->wire_tx > WIRE_ABOVE * hi && (double)x->wire_tx - hi >= WIRE_EXCESS) {
            x->verdict = "above";
            warn(w,
                 "%s sent %llu bytes to the job's other hosts, %.2fx the most the traced "
                 "communication implies with common algorithms (%.0f): retransmissions or other "
                 "traffic from this host",
                 x->host, (unsigned long long)x->wire_tx, x->ratio_min, hi);
        } else if (lo > 0 && (double)x->wire_tx < WIRE_BELOW * lo) {
            x->verdict = "below";
            warn(w,
                 "%s sent %llu bytes to the job's other hosts, %.2fx the least the traced "
                 "communication implies (%.0f): the capture missed traffic from this host",
                 x->host, (unsigned long long)x->wire_tx, x->ratio_max, lo);
        }
    }
}

/* What capture file f (host label fh, "" unknown) says about itself, and its captures row. */
static void file_warnings(struct cs__wire *w, struct cs_wire_report *rp,
                          const struct cs_wire_file *f, const char *fh)
{
    for (size_t k = 0; k < f->nnotes; k++)
        warn(w, "%s: %s", fh[0] ? fh : f->path, f->notes[k]);
    if (f->status_no_capture)
        warn(w, "%s: no capture on this node; its traffic is seen only from its peers",
             fh[0] ? fh : f->path);
    else if (!f->complete)
        warn(w,
             "%s ends early (the capture was killed, or the disk filled); its numbers are "
             "a lower bound",
             f->path);
    if (f->untracked)
        warn(w,
             "%s: %llu packets of TCP flows beyond the 65,536 the capture tracks were not "
             "checked for retransmissions or duplicate ACKs; those counts are a lower bound",
             fh[0] ? fh : f->path, (unsigned long long)f->untracked);
    if (f->bad_time)
        warn(w,
             "%s: %llu packets have timestamps past the year 2116 (a damaged capture); they "
             "are left out of the time buckets and the links",
             fh[0] ? fh : f->path, (unsigned long long)f->bad_time);
    /* More than 1 % cut short: a snap length below the headers, or damaged frames. */
    if (f->complete && f->short_headers && f->short_headers * 100 > f->total_packets)
        warn(w,
             "%s: %llu of %llu packets (%.1f %%) were captured too short to read their "
             "headers (a snap length below them, or damaged frames); the links' and the "
             "retransmission counts are a lower bound",
             fh[0] ? fh : f->path, (unsigned long long)f->short_headers,
             (unsigned long long)f->total_packets,
             100.0 * (double)f->short_headers / (double)f->total_packets);
    if (rp->captures) {
        struct cs_wire_report_capture *rc = &rp->captures[rp->ncaptures++];
        snprintf(rc->host, sizeof rc->host, "%s", fh[0] ? fh : f->path);
        rc->packets = f->total_packets;
        rc->bytes = f->total_bytes;
        rc->ip_packets = f->ip_packets;
        rc->non_ip = f->non_ip;
        rc->short_headers = f->short_headers;
        rc->untracked = f->untracked;
        rc->bad_time = f->bad_time;
        rc->complete = f->complete;
        rc->no_capture = f->status_no_capture;
    }
}

/* The interfaces of capture file f (host label fh) into rp->ifaces (*capif its capacity). */
static void file_ifaces(struct cs__wire *w, struct cs_wire_report *rp, const struct cs_wire_file *f,
                        const char *fh, size_t *capif)
{
    uint64_t host_total = 0;
    for (int i = 0; i < f->nifaces; i++)
        host_total += f->ifaces[i].bytes;
    for (int i = 0; i < f->nifaces; i++) {
        if (rp->nifaces == *capif) {
            *capif = *capif ? 2 * *capif : 8;
            void *q = realloc(rp->ifaces, *capif * sizeof *rp->ifaces);
            if (!q)
                return;
            rp->ifaces = q;
        }
        struct cs_wire_report_iface *ri = &rp->ifaces[rp->nifaces++];
        memset(ri, 0, sizeof *ri);
        snprintf(ri->host, sizeof ri->host, "%s", fh[0] ? fh : "-");
        snprintf(ri->name, sizeof ri->name, "%s", f->ifaces[i].name);
        ri->bytes = f->ifaces[i].bytes;
        ri->pkts = f->ifaces[i].pkts;
        ri->expected = f->ifaces[i].expected;
        ri->speed_mbps = f->ifaces[i].speed_mbps;
        ri->share = host_total ? (double)ri->bytes / (double)host_total : NAN;
        if (f->ifaces[i].recv > f->ifaces[i].seen + f->ifaces[i].recv / 100)
            warn(w,
                 "%s: %llu of %llu packets on %s were still in the kernel's buffer when the "
                 "capture ended; wire numbers are a lower bound",
                 ri->host, (unsigned long long)(f->ifaces[i].recv - f->ifaces[i].seen),
                 (unsigned long long)f->ifaces[i].recv, ri->name);
        if (f->ifaces[i].drop)
            warn(w,
                 "%s: the kernel dropped %llu packets on %s before the capture saw them; "
                 "wire numbers are a lower bound",
                 ri->host, (unsigned long long)f->ifaces[i].drop, ri->name);
    }
}

/* Bytes between hosts: each direction once, from the sender's capture, or from the receiver's
 * when the sender captured nothing. */
static uint64_t bytes_between_hosts(const struct link *links, size_t nl)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < nl; i++) {
        uint64_t tx = links[i].p.bytes_tx, rx = 0;
        for (size_t j = 0; j < nl; j++)
            if (strcmp(links[j].host, links[i].peer) == 0 &&
                strcmp(links[j].peer, links[i].host) == 0)
                rx = links[j].p.bytes_rx;
        bytes += tx > rx ? tx : rx;
    }
    /* Directions seen only by the receiver. */
    for (size_t j = 0; j < nl; j++) {
        int sender_seen = 0;
        for (size_t i = 0; i < nl && !sender_seen; i++)
            sender_seen = strcmp(links[i].host, links[j].peer) == 0 &&
                          strcmp(links[i].peer, links[j].host) == 0;
        if (!sender_seen)
            bytes += links[j].p.bytes_rx;
    }
    return bytes;
}

/* The warnings about what the captures cover: traffic off the expected interface, hosts without
 * a capture file, and wire bytes far from the traced ones. */
static void coverage_warnings(struct cs__wire *w, const struct cs_wire_report *rp)
{
    /* Interfaces that should not carry the job's traffic. */
    for (size_t i = 0; i < rp->nifaces; i++) {
        const struct cs_wire_report_iface *ri = &rp->ifaces[i];
        if (ri->expected != 0 || ri->bytes < OFF_IFACE_BYTES || !(ri->share >= OFF_IFACE_SHARE))
            continue;
        char exp[256] = "";
        size_t n = 0;
        for (size_t j = 0; j < rp->nifaces; j++)
            if (rp->ifaces[j].expected == 1 && strcmp(rp->ifaces[j].host, ri->host) == 0)
                n += (size_t)snprintf(exp + n, sizeof exp - n, "%s%s", n ? "/" : "",
                                      rp->ifaces[j].name);
        char speed[64] = "";
        if (ri->speed_mbps > 0)
            snprintf(speed, sizeof speed, " (%g Gb/s)", (double)ri->speed_mbps / 1000);
        warn_verdict(w,
                     "OFF THE EXPECTED INTERFACE: rank traffic left %s through %s%s instead of %s: "
                     "%llu bytes, %.0f%% of the job's traffic captured on %s",
                     ri->host, ri->name, speed, exp[0] ? exp : "the expected data interface",
                     (unsigned long long)ri->bytes, 100 * ri->share, ri->host);
    }
    /* Hosts of the trace without wire data. */
    int live = 0;
    for (size_t fi = 0; fi < w->nfiles; fi++)
        live |= w->label[fi][0] != '\0';
    for (int h = 0; live && h < w->nhosts; h++) {
        int found = 0;
        for (size_t fi = 0; fi < w->nfiles && !found; fi++)
            found = strcmp(w->label[fi], w->hosts[h]) == 0;
        if (!found && w->hosts[h][0])
            warn(w,
                 "no wire capture file from host %s (wire-%s.csw); its traffic is seen only "
                 "from its peers",
                 w->hosts[h], w->hosts[h]);
    }
    if (rp->traced_bytes && rp->ratio < 0.9)
        warn(w,
             "the wire carried %.2fx the bytes the traced communication implies (%llu vs %llu): "
             "the capture missed traffic (a node or interface not captured, kernel drops, or "
             "RDMA/shared-memory paths libpcap cannot see)",
             rp->ratio, (unsigned long long)rp->wire_bytes, (unsigned long long)rp->traced_bytes);
    else if (rp->traced_bytes && rp->ratio > 1.5)
        warn(w,
             "the wire carried %.2fx the bytes the traced communication implies (%llu vs %llu): "
             "collective algorithms that move more than a ring, retransmissions, or other "
             "traffic between the job's hosts",
             rp->ratio, (unsigned long long)rp->wire_bytes, (unsigned long long)rp->traced_bytes);
}

static struct cs_wire_report *build(struct cs__run *run, struct cs__wire *w)
{
    struct cs_wire_report *rp = calloc(1, sizeof *rp);
    if (!rp)
        return NULL;
    rp->traced_bytes = w->traced;
    if (w->niv > 1)
        qsort(w->iv, w->niv, sizeof *w->iv, cmp_iv);
    /* Merge overlaps after sorting (instances of different communicators interleave). */
    size_t m = 0;
    for (size_t i = 0; i < w->niv; i++) {
        if (m && w->iv[i].a <= w->iv[m - 1].b) {
            if (w->iv[i].b > w->iv[m - 1].b)
                w->iv[m - 1].b = w->iv[i].b;
        } else {
            w->iv[m++] = w->iv[i];
        }
    }
    w->niv = m;

    struct link *links = NULL;
    size_t nl = 0, capl = 0;
    rp->captures = calloc(w->nfiles + 1, sizeof *rp->captures);
    if (!rp->captures)
        warn(w, "out of memory listing the capture files; the captures table is left out");
    /* The link of every record, for the series pass. */
    size_t **reclink = calloc(w->nfiles + 1, sizeof *reclink);
    size_t capif = 0;
    for (size_t fi = 0; fi < w->nfiles; fi++) {
        struct cs_wire_file *f = &w->files[fi];
        const char *fh = w->label[fi];
        char hb[64], pb[64];
        file_warnings(w, rp, f, fh);
        const struct cs__clock *clk = fh[0] ? clock_of(run, fh) : NULL;
        file_ifaces(w, rp, f, fh, &capif);
        /* Links, from this file's point of view. */
        for (size_t k = 0; k < f->nrecs; k++) {
            const struct cs_wire_rec *r = &f->recs[k];
            const char *lh = fh[0] ? fh : addr_label(f, r->local, hb, sizeof hb);
            const char *ph = addr_label(f, r->peer, pb, sizeof pb);
            struct link *l = link_get(&links, &nl, &capl, lh, ph);
            if (!l)
                break;
            if (reclink && !reclink[fi])
                reclink[fi] = calloc(f->nrecs + 1, sizeof **reclink);
            if (reclink && reclink[fi])
                reclink[fi][k] = (size_t)(l - links);
            l->file = fi;
            struct cs_wire_report_peer *p = &l->p;
            p->bytes_tx += r->c.tx_bytes;
            p->bytes_rx += r->c.rx_bytes;
            p->pkts_tx += r->c.tx_pkts;
            p->pkts_rx += r->c.rx_pkts;
            p->retransmits += r->c.tx_retrans;
            p->dupacks_rx += r->c.rx_dupack;
            p->roce_bytes += r->c.roce_bytes;
            if (r->c.tx_bytes) {
                l->have_tx = 1;
                if (r->bucket < l->bmin)
                    l->bmin = r->bucket;
                if (r->bucket > l->bmax)
                    l->bmax = r->bucket;
            }
            if (clk && w->niv && r->c.tx_bytes) {
                int64_t mono = wire_mono(f, r->bucket * f->bucket_ns + f->bucket_ns / 2);
                if (mono > 0 && in_intervals(w, cs__clock_map(clk, (uint64_t)mono))) {
                    l->coll_bytes += r->c.tx_bytes;
                    l->coll_buckets++;
                }
            }
        }
    }
    /* Per-link numbers and series. */
    rp->peers = calloc(nl + 1, sizeof *rp->peers);
    rp->series = calloc(nl + 1, sizeof *rp->series);
    uint64_t coll_bytes = 0, coll_buckets = 0;
    double coll_width = 0;
    for (size_t i = 0; rp->peers && rp->series && i < nl; i++) {
        struct link *l = &links[i];
        const struct cs_wire_file *f = &w->files[l->file];
        double width = (double)f->bucket_ns * 1e-9;
        struct cs_wire_report_peer *p = &rp->peers[rp->npeers++];
        *p = l->p;
        snprintf(p->host, sizeof p->host, "%s", l->host);
        snprintf(p->peer, sizeof p->peer, "%s", l->peer);
        p->retransmit_rate = p->pkts_tx ? (double)p->retransmits / (double)p->pkts_tx : NAN;
        p->collective_gbps =
            l->coll_buckets ? (double)l->coll_bytes * 8 / ((double)l->coll_buckets * width) / 1e9
                            : NAN;
        coll_bytes += l->coll_bytes;
        coll_buckets += l->coll_buckets;
        coll_width = width;
        rp->retransmits += p->retransmits;
        if (p->pkts_tx >= 1 && p->retransmits >= RETRANS_MIN && p->retransmit_rate >= RETRANS_RATE)
            warn_verdict(
                w,
                "%s -> %s: %.2f%% of the packets sent were TCP retransmissions (%llu of %llu); "
                "%llu duplicate ACKs came back: loss or congestion on this link",
                p->host, p->peer, 100 * p->retransmit_rate, (unsigned long long)p->retransmits,
                (unsigned long long)p->pkts_tx, (unsigned long long)p->dupacks_rx);
        /* The series: tx bytes per bucket from the first to the last with traffic, merged into
         * at most SERIES_MAX points. */
        if (!l->have_tx)
            continue;
        uint64_t span = l->bmax - l->bmin + 1, k = (span + SERIES_MAX - 1) / SERIES_MAX;
        struct cs_wire_report_series *s = &rp->series[rp->nseries];
        s->n = (size_t)((span + k - 1) / k);
        s->tx = calloc(s->n, sizeof *s->tx);
        if (!s->tx)
            continue;
        rp->nseries++;
        snprintf(s->host, sizeof s->host, "%s", l->host);
        snprintf(s->peer, sizeof s->peer, "%s", l->peer);
        s->step_s = width * (double)k;
        uint64_t peak = 0;
        for (size_t q = 0; reclink && reclink[l->file] && q < f->nrecs; q++) {
            const struct cs_wire_rec *r = &f->recs[q];
            if (r->c.tx_bytes && reclink[l->file][q] == i)
                s->tx[(r->bucket - l->bmin) / k] += r->c.tx_bytes;
        }
        for (size_t q = 0; q < s->n; q++)
            if (s->tx[q] > peak)
                peak = s->tx[q];
        p->peak_gbps = (double)peak * 8 / s->step_s / 1e9;
        const struct cs__clock *clk = w->label[l->file][0] ? clock_of(run, l->host) : NULL;
        int64_t t0 = (int64_t)(l->bmin * f->bucket_ns), mono = wire_mono(f, (uint64_t)t0);
        if (clk && f->monotonic_ns && mono >= 0)
            s->t0_s = (double)cs__clock_map(clk, (uint64_t)mono) * 1e-9;
        else
            s->t0_s = (double)t0 * 1e-9;
    }
    rp->collective_gbps =
        coll_buckets ? (double)coll_bytes * 8 / ((double)coll_buckets * coll_width) / 1e9 : NAN;
    rp->wire_bytes = bytes_between_hosts(links, nl);
    rp->ratio = rp->traced_bytes ? (double)rp->wire_bytes / (double)rp->traced_bytes : NAN;
    compare_expected(w, rp);
    coverage_warnings(w, rp);
    free(links);
    for (size_t fi = 0; reclink && fi < w->nfiles; fi++)
        free(reclink[fi]);
    free(reclink);
    rp->sources = w->sources;
    rp->nsources = w->nsources;
    w->sources = NULL;
    w->nsources = 0;
    rp->input_problems = w->nbad;
    rp->warnings = w->warn;
    rp->verdict = w->loud;
    rp->nwarnings = w->nwarn;
    w->warn = NULL;
    w->loud = NULL;
    w->nwarn = w->capwarn = 0;
    return rp;
}

void cs__wire_end(struct cs__run *run, struct cs_report *rep)
{
    struct cs__wire *w = run->wire;
    if (!w)
        return;
    rep->wire = build(run, w);
    wire_free(w);
    run->wire = NULL;
}

void cs__wire_free(struct cs__run *run)
{
    wire_free(run->wire);
    run->wire = NULL;
}

struct cs_wire_report *cs__wire_only(void)
{
    struct cs__wire *w = load(NULL, NULL);
    if (!w)
        return NULL;
    struct cs_wire_report *rp = build(NULL, w);
    wire_free(w);
    return rp;
}

void cs__wire_report_free(struct cs_wire_report *rp)
{
    if (!rp)
        return;
    for (size_t i = 0; i < rp->nsources; i++)
        free(rp->sources[i]);
    free(rp->sources);
    free(rp->ifaces);
    free(rp->captures);
    free(rp->peers);
    free(rp->hosts);
    for (size_t i = 0; i < rp->nseries; i++)
        free(rp->series[i].tx);
    free(rp->series);
    for (size_t i = 0; i < rp->nwarnings; i++)
        free(rp->warnings[i]);
    free(rp->warnings);
    free(rp->verdict);
    free(rp);
}
