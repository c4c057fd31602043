/*
 * What each host should have sent on the wire, from the trace, for the per-peer and per-host
 * comparison of the wire section (docs/wire.md, "Per peer and per host"; definitions in
 * docs/metrics.md, "Wire"):
 *
 *   - point-to-point: the exact bytes of the sending calls from each host to each other host;
 *   - collectives: per host, a range of off-host bytes sent: from the least any algorithm can
 *     send (a hierarchical, bandwidth-optimal one) to the most the common flat algorithms send
 *     when every one of the host's ranks talks off the host (ring, recursive doubling, Bruck,
 *     binomial and linear trees).
 *
 * A host pair that shared no collective is compared exactly; every host is compared with its
 * range.  Numbers only; the wire section (wire.c) adds its own view of the captures.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "wire_expect.h"

struct cs__wire_expect {
    int nh;
    double *p2p;     /* nh x nh: bytes of point-to-point sends from host a to host b */
    double *share;   /* nh x nh: the most host a's collectives with b could have sent */
    double *lo, *hi; /* per host: collective off-host bytes sent, least and most */
    int32_t *cnt;    /* scratch: members per host in one instance */
};

struct cs__wire_expect *cs__wire_expect_new(int nhosts)
{
    struct cs__wire_expect *x = calloc(1, sizeof *x);
    size_t n = nhosts > 0 ? (size_t)nhosts : 1;
    if (!x)
        return NULL;
    x->nh = nhosts;
    x->p2p = calloc(n * n, sizeof *x->p2p);
    x->share = calloc(n * n, sizeof *x->share);
    x->lo = calloc(n, sizeof *x->lo);
    x->hi = calloc(n, sizeof *x->hi);
    x->cnt = calloc(n, sizeof *x->cnt);
    if (!x->p2p || !x->share || !x->lo || !x->hi || !x->cnt) {
        cs__wire_expect_free(x);
        return NULL;
    }
    return x;
}

void cs__wire_expect_free(struct cs__wire_expect *x)
{
    if (!x)
        return;
    free(x->p2p);
    free(x->share);
    free(x->lo);
    free(x->hi);
    free(x->cnt);
    free(x);
}

void cs__wire_expect_p2p(struct cs__wire_expect *x, int from, int to, uint64_t bytes)
{
    if (x && from >= 0 && to >= 0 && from < x->nh && to < x->nh && from != to)
        x->p2p[(size_t)from * (size_t)x->nh + (size_t)to] += (double)bytes;
}

static double clog2(int n)
{
    int k = 0;
    while ((1 << k) < n && k < 30)
        k++;
    return k;
}

void cs__wire_expect_instance(struct cs__wire_expect *x, const struct cs__inst *in,
                              const int32_t *host_of, int world)
{
    if (!x || in->n < 2)
        return;
    int n = in->n, hosts = 0;
    double s = 0; /* the instance's message size S: max over members */
    for (int i = 0; i < n; i++) {
        int32_t r = in->members[i];
        if (r < 0 || r >= world)
            continue;
        if (x->cnt[host_of[r]]++ == 0)
            hosts++;
        if ((double)in->size[i] > s)
            s = (double)in->size[i];
    }
    const struct cs_op_info *oi = cs_op_info(in->op);
    if (hosts > 1 && s > 0 && oi && oi->name) {
        double H = hosts, lg = clog2(n), b = s / n;
        int ag = strcasestr(oi->name, "allgather") != NULL;
        int rs = strcasestr(oi->name, "reduce_scatter") || strcasestr(oi->name, "reducescatter");
        int a2a = strcasestr(oi->name, "alltoall") != NULL;
        for (int h = 0; h < x->nh; h++) {
            double k = x->cnt[h], lo = 0, hi = 0;
            if (!k)
                continue;
            if (oi->busbw == CS_BW_ALLREDUCE) {
                /* Hierarchical reduce-scatter + all-gather between hosts: 2(H-1)/H x S per host;
                 * flat: ring/Rabenseifner 2(n-1)/n x S, recursive doubling log2(n) x S per rank. */
                lo = 2 * (H - 1) / H * s;
                hi = k * fmax(2.0 * (n - 1) / n, lg) * s;
            } else if (oi->pattern == CS_PAT_NXN && (ag || rs || a2a)) {
                /* Block b = S / n.  All-gather: the host's own blocks leave it once; reduce-
                 * scatter: its partial sums of the other hosts' blocks, once; all-to-all: its
                 * ranks' blocks for the other hosts' ranks, exactly.  Flat: ring, recursive
                 * doubling/halving (n-1)/n x S per rank, Bruck all-to-all log2(n)/2 x S. */
                lo = ag ? k * b : rs ? (n - k) * b : k * (n - k) * b;
                hi = k * fmax((double)(n - 1) / n, a2a ? lg / 2 : 0) * s;
            } else if (oi->busbw == CS_BW_ONE &&
                       (oi->pattern == CS_PAT_1TON || oi->pattern == CS_PAT_NTO1)) {
                /* Broadcast / reduce: the root is not known here; any tree moves S into (or out
                 * of) every other rank once, (n-1) x S in all, whichever host sends it. */
                lo = 0;
                hi = (n - 1) * s;
            } else {
                /* Gather, scatter, scans and the rest: no rank of a common algorithm sends more
                 * than the whole buffer S. */
                lo = 0;
                hi = k * s;
            }
            x->lo[h] += lo;
            x->hi[h] += hi;
            /* What h sends for this instance, at most, is also the most it can send to any one
             * of the other hosts the instance spans. */
            for (int c = 0; c < x->nh; c++)
                if (x->cnt[c] && c != h)
                    x->share[(size_t)h * (size_t)x->nh + (size_t)c] += hi;
        }
    }
    for (int i = 0; i < n; i++)
        if (in->members[i] >= 0 && in->members[i] < world)
            x->cnt[host_of[in->members[i]]] = 0;
}

double cs__wire_expect_pair(const struct cs__wire_expect *x, int from, int to, double *coll_max)
{
    *coll_max = 0;
    if (!x || from < 0 || to < 0 || from >= x->nh || to >= x->nh)
        return 0;
    *coll_max = x->share[(size_t)from * (size_t)x->nh + (size_t)to];
    return x->p2p[(size_t)from * (size_t)x->nh + (size_t)to];
}

void cs__wire_expect_host(const struct cs__wire_expect *x, int h, double *p2p, double *lo,
                          double *hi)
{
    *p2p = *lo = *hi = 0;
    if (!x || h < 0 || h >= x->nh)
        return;
    for (int t = 0; t < x->nh; t++)
        *p2p += x->p2p[(size_t)h * (size_t)x->nh + (size_t)t];
    *lo = x->lo[h];
    *hi = x->hi[h];
}
