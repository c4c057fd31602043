/*
 * `commscope fabric --capture`: the wire evidence of every link verdict (docs/wire.md, "Wire
 * evidence in commscope fabric").  The benchmark ran under the collector with capture on, so the
 * run directory holds one commscope-wire/1 file per node (gathered there over MPI when it is not
 * shared).  For each link, the buckets of the pair test's window (CLOCK_REALTIME of the link's
 * first node, widened by one bucket each side for the other node's clock and the bucket edges)
 * are added up between the two hosts: bytes and frames each way, TCP retransmissions, the
 * interfaces that carried them, and the rate in the busy buckets.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "fabric.h"

/* Add one warning to a link's wire evidence (dropped when the list is full; long host names may
 * shorten the sentence). */
static void add_warn(struct cs_fabric_wire *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_warn(struct cs_fabric_wire *x, const char *fmt, ...)
{
    if (x->nwarn >= CS_FABRIC_WIRE_WARN)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->warn[x->nwarn++], sizeof x->warn[0], fmt, ap);
    va_end(ap);
}

/* Above this many buckets in one window the rate is not computed (a clock jump, a bad line). */
#define MAX_WINDOW_BUCKETS 1000000

struct host_file {
    struct cs_wire_file f;
    int ok; /* read, and captured something */
};

static void note(struct cs_fabric *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct cs_fabric *f, const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cs_fabric_add_note(f, buf);
}

/* One direction of a link as one capture saw it. */
struct dir_sum {
    double bytes, pkts, retrans;
    double *per_bucket; /* bytes per bucket of the window */
    double iface_bytes[CS_WIRE_MAX_IFACES];
};

/*
 * Add the records of file hf between its host and host `peer` inside [lo, hi] (bucket numbers):
 * tx = 1 counts what hf's host sent, tx = 0 what it received.
 */
static void add_view(const struct cs_wire_file *w, const char *peer, uint64_t lo, uint64_t hi,
                     int tx, struct dir_sum *d)
{
    for (size_t i = 0; i < w->nrecs; i++) {
        const struct cs_wire_rec *r = &w->recs[i];
        if (r->bucket < lo || r->bucket > hi || r->peer < 0 || (size_t)r->peer >= w->naddrs ||
            strcmp(w->addr_host[r->peer], peer) != 0)
            continue;
        double b = (double)(tx ? r->c.tx_bytes : r->c.rx_bytes);
        d->bytes += b;
        d->pkts += (double)(tx ? r->c.tx_pkts : r->c.rx_pkts);
        d->retrans += (double)(tx ? r->c.tx_retrans : r->c.rx_retrans);
        if (d->per_bucket)
            d->per_bucket[r->bucket - lo] += b;
        if (r->iface >= 0 && r->iface < CS_WIRE_MAX_IFACES)
            d->iface_bytes[r->iface] += b;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/*
 * The sustained rate (Gb/s): the median over the busy buckets, those holding at least a tenth of
 * the fullest one's bytes.  Buckets of acknowledgements only or of the latency test are far below
 * that; a burst at the start (a token bucket's burst, a window opening) is one bucket of many and
 * does not move the median.  v is reordered.
 */
static double busy_rate(double *v, size_t n, uint64_t bucket_ns, int *busy)
{
    double peak = 0;
    *busy = 0;
    for (size_t i = 0; v && i < n; i++)
        peak = v[i] > peak ? v[i] : peak;
    if (peak <= 0)
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] >= peak / 10)
            v[k++] = v[i];
    qsort(v, k, sizeof *v, cmp_double);
    *busy = (int)k;
    double med = k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
    return med * 8 / (double)bucket_ns; /* bytes per ns x 8 = Gb/s */
}

/* Nonzero when name is one of the comma-separated list's items. */
static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p; p += strcspn(p, ","), p += *p == ',')
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

/* Append interface names of file w that carried bytes to l's list, with their expected flags. */
static void add_ifaces(struct cs_fabric_wire *x, const struct cs_wire_file *w,
                       const struct dir_sum *d, double total)
{
    for (int i = 0; i < w->nifaces && i < CS_WIRE_MAX_IFACES; i++) {
        if (d->iface_bytes[i] <= 0)
            continue;
        const struct cs_wire_iface *f = &w->ifaces[i];
        if (!in_list(x->ifaces, f->name)) {
            size_t n = strlen(x->ifaces);
            if (n + strlen(f->name) + 2 < sizeof x->ifaces)
                snprintf(x->ifaces + n, sizeof x->ifaces - n, "%s%s", n ? "," : "", f->name);
        }
        if (f->expected == 0) {
            /* The same rule as the analyzer's: 1 % and 64 KiB of the traffic. */
            if (d->iface_bytes[i] >= 0.01 * total && d->iface_bytes[i] >= 65536)
                add_warn(x,
                         "OFF THE EXPECTED INTERFACE: %.0f bytes left %s through %s, which is not "
                         "an expected data interface",
                         d->iface_bytes[i], w->host, f->name);
            x->expected = 0;
        } else if (f->expected == 1 && x->expected != 0) {
            x->expected = 1;
        }
    }
}

/*
 * One direction s -> r of a link.  The sender's capture sees everything it sends, its
 * retransmissions included; the receiver's is the fallback.
 */
struct window {
    uint64_t lo, hi, bucket_ns; /* buckets lo..hi of bucket_ns each */
};
struct dir_wire {
    double bytes, pkts, retrans, gbps;
    int busy;
};

/* (view_bit_s: x->views' bit of the sender's capture; the receiver's is the other one) */
static struct dir_wire direction(struct cs_fabric_wire *x, struct host_file *s, const char *s_host,
                                 struct host_file *r, const char *r_host, const struct window *w,
                                 int view_bit_s)
{
    uint64_t lo = w->lo, hi = w->hi, bucket_ns = w->bucket_ns;
    struct dir_wire o = {0};
    struct dir_sum d;
    memset(&d, 0, sizeof d);
    size_t n = (size_t)(hi - lo + 1);
    if (n <= MAX_WINDOW_BUCKETS)
        d.per_bucket = calloc(n, sizeof(double));
    const struct cs_wire_file *used = NULL;
    if (s && s->ok && s->f.bucket_ns == bucket_ns) {
        add_view(&s->f, r_host, lo, hi, 1, &d);
        used = &s->f;
        x->views |= view_bit_s;
    } else if (r && r->ok && r->f.bucket_ns == bucket_ns) {
        add_view(&r->f, s_host, lo, hi, 0, &d);
        used = &r->f;
        x->views |= 3 - view_bit_s;
    }
    o.bytes = d.bytes;
    o.pkts = d.pkts;
    o.retrans = d.retrans;
    o.gbps = busy_rate(d.per_bucket, n, bucket_ns, &o.busy);
    if (used)
        add_ifaces(x, used, &d, d.bytes);
    free(d.per_bucket);
    return o;
}

static void judge_wire(struct cs_fabric_link *l, const char *ha, const char *hb)
{
    struct cs_fabric_wire *x = &l->wire;
    x->ratio = x->sent_bytes > 0 ? (x->bytes_ab + x->bytes_ba) / x->sent_bytes : 0;
    const struct {
        double retrans, pkts;
        const char *from, *to;
    } d[2] = {{x->retrans_ab, x->pkts_ab, ha, hb}, {x->retrans_ba, x->pkts_ba, hb, ha}};
    for (int k = 0; k < 2; k++)
        if (d[k].retrans >= 10 && d[k].retrans >= 0.01 * d[k].pkts)
            add_warn(x,
                     "%.0f TCP retransmissions from %s to %s (%.2f %% of %.0f frames): packets "
                     "are lost on the way",
                     d[k].retrans, d[k].from, d[k].to, 100 * d[k].retrans / d[k].pkts, d[k].pkts);
    if (x->ratio < 0.9)
        add_warn(x,
                 "the captures saw %.2f x the bytes the benchmark sent: traffic the capture cannot "
                 "see (RDMA, an interface not captured, kernel drops)",
                 x->ratio);
    else if (x->ratio > 1.5)
        add_warn(x,
                 "%.2f x the bytes the benchmark sent crossed between them during the test: "
                 "retransmissions or other traffic between these hosts",
                 x->ratio);
}

int cs__fabric_wire(struct cs_fabric *f, const char *run_dir)
{
    struct host_file *hf = calloc(f->n_nodes ? f->n_nodes : 1, sizeof(*hf));
    if (!hf)
        return -1;
    size_t found = 0;
    for (size_t k = 0; k < f->n_nodes; k++) {
        char path[4400], err[512];
        snprintf(path, sizeof path, "%s/wire-%s.csw", run_dir, f->nodes[k].host);
        if (cs_wire_file_read(path, &hf[k].f, err, sizeof err) != 0) {
            note(f, "wire: no capture from %s: %s", f->nodes[k].host, err);
            continue;
        }
        found++;
        if (hf[k].f.status_no_capture || hf[k].f.bucket_ns == 0) {
            note(f, "wire: %s captured nothing%s%s", f->nodes[k].host, hf[k].f.nnotes ? ": " : "",
                 hf[k].f.nnotes ? hf[k].f.notes[0] : "");
            continue;
        }
        hf[k].ok = 1;
        for (size_t i = 0; i < hf[k].f.nnotes; i++)
            note(f, "wire: %s: %s", f->nodes[k].host, hf[k].f.notes[i]);
        if (!hf[k].f.complete)
            note(f,
                 "wire: %s's capture file ends early (helper killed, disk full): its numbers "
                 "are a lower bound",
                 f->nodes[k].host);
    }
    size_t windows = 0;
    for (size_t i = 0; i < f->n_links; i++) {
        struct cs_fabric_link *l = &f->links[i];
        struct host_file *a = &hf[l->a], *b = &hf[l->b];
        if (!l->t0_ns || !(a->ok || b->ok))
            continue;
        windows++;
        uint64_t bucket_ns = a->ok ? a->f.bucket_ns : b->f.bucket_ns;
        uint64_t lo = (uint64_t)l->t0_ns / bucket_ns, hi = (uint64_t)l->t1_ns / bucket_ns + 1;
        lo = lo ? lo - 1 : 0;
        struct cs_fabric_wire *x = &l->wire;
        memset(x, 0, sizeof *x);
        x->have = 1;
        x->expected = -1;
        x->sent_bytes = l->sent_bytes;
        const char *ha = f->nodes[l->a].host, *hb = f->nodes[l->b].host;
        const struct window win = {lo, hi, bucket_ns};
        struct dir_wire ab = direction(x, a, ha, b, hb, &win, 1);
        struct dir_wire ba = direction(x, b, hb, a, ha, &win, 2);
        x->bytes_ab = ab.bytes, x->pkts_ab = ab.pkts, x->retrans_ab = ab.retrans;
        x->gbps_ab = ab.gbps, x->busy_ab = ab.busy;
        x->bytes_ba = ba.bytes, x->pkts_ba = ba.pkts, x->retrans_ba = ba.retrans;
        x->gbps_ba = ba.gbps, x->busy_ba = ba.busy;
        judge_wire(l, ha, hb);
    }
    if (found && f->n_links && !windows)
        note(f, "wire: the benchmark's pair lines carry no time window (an older cs_fabric?); no "
                "wire evidence per link");
    for (size_t k = 0; k < f->n_nodes; k++)
        cs_wire_file_free(&hf[k].f); /* a zeroed one (read failed) frees nothing */
    free(hf);
    return 0;
}
