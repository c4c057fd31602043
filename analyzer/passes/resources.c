/*
 * Resource use (resources.h): read every rank's samples once (begin hook), keep per entity -- a
 * rank's process, a host's interface, a host's GPU -- its running figures and CS_RES_BINS bins of
 * its series, and hand the section to the report.  An interval between two consecutive samples of
 * an entity carries one rate (CPU ns per ns, bytes per ns; a GPU sample's utilisation covers the
 * interval that ends at it), which is spread over the bins it overlaps by time.  Interfaces and
 * GPUs are the node's: where several ranks of a host sampled them, the lowest rank's count.
 * Memory: the figures and bins of each entity (about 2 KiB each), nothing per sample.
 */
#include "resources.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commscope/ops.h"
#include "hang.h"
#include "nodes.h"
#include "views.h"

struct bins {
    double v[CS_RES_BINS], w[CS_RES_BINS]; /* sum of rate x overlap, sum of overlap (ns) */
};

struct ent {
    int rank;
    int host; /* host index (run->host_of), or the rank when unknown */
    uint16_t op;
    char name[16];
    int32_t index, pci, speed;
    uint64_t n;
    int64_t t_first, t_last;
    uint64_t a_first, a_last, b_first, b_last; /* the counters at both ends (last: the next
                                                  interval's start) */
    double peak;                               /* highest interval rate (unit of the series) */
    double sum_b, max_b;                       /* RSS or GPU memory used */
    double sum_c, max_c, sum_d;                /* GPU power (mW), SM clock */
    uint64_t nc, nd;
    double util_sum, util_min, util_max;
    uint64_t nutil;
    struct bins *bins;
};

struct cs__res {
    struct ent *e;
    size_t n, cap;
    int64_t t0, bin_ns;
    int nbins;
    double gaps_ns; /* the sum of the intervals between consecutive process samples */
    uint64_t ngaps;
    int failed;
};

/* ---- entities ---- */

static int host_of(const struct cs__run *run, int r)
{
    return run->host_of && run->host_of[r] >= 0 ? run->host_of[r] : -1 - r;
}

/* The entity of sample s of rank r; NULL when another rank of the host owns it (or no memory). */
static struct ent *entity(struct cs__res *R, struct cs__run *run, int r, const struct cs__sample *s)
{
    int h = host_of(run, r);
    for (size_t i = R->n; i-- > 0;) {
        struct ent *e = &R->e[i];
        if (e->op != s->op)
            continue;
        if (s->op == CS_OP_SAMPLE_PROC) {
            if (e->rank == r)
                return e;
            continue;
        }
        int same = s->op == CS_OP_SAMPLE_NIC ? !strcmp(e->name, s->name) : e->index == s->index;
        if (e->host == h && same)
            return e->rank == r ? e : NULL; /* the host's lowest rank owns it (ranks in order) */
    }
    if (R->n == R->cap) {
        size_t cap = R->cap ? 2 * R->cap : 64;
        struct ent *v = realloc(R->e, cap * sizeof *v);
        if (!v)
            return NULL;
        R->e = v;
        R->cap = cap;
    }
    struct ent *e = &R->e[R->n];
    memset(e, 0, sizeof *e);
    e->bins = calloc(1, sizeof *e->bins);
    if (!e->bins)
        return NULL;
    R->n++;
    e->rank = r;
    e->host = h;
    e->op = s->op;
    memcpy(e->name, s->name, sizeof e->name);
    e->index = s->index;
    e->pci = s->pci;
    e->speed = s->op == CS_OP_SAMPLE_NIC ? s->index : -1;
    e->util_min = INFINITY;
    e->t_first = s->t;
    e->a_first = s->a;
    e->b_first = s->b;
    return e;
}

/* Spread rate over [a, b) (aligned ns) into the bins. */
static void spread(const struct cs__res *R, struct bins *B, int64_t a, int64_t b, double rate)
{
    if (b <= a || !isfinite(rate))
        return;
    int64_t lo = a - R->t0, hi = b - R->t0;
    if (hi <= 0)
        return;
    if (lo < 0)
        lo = 0;
    for (int64_t k = lo / R->bin_ns; k < R->nbins && k * R->bin_ns < hi; k++) {
        int64_t s = k * R->bin_ns > lo ? k * R->bin_ns : lo;
        int64_t e = (k + 1) * R->bin_ns < hi ? (k + 1) * R->bin_ns : hi;
        if (e > s) {
            B->v[k] += rate * (double)(e - s);
            B->w[k] += (double)(e - s);
        }
    }
}

/* The series' unit per interval: CPU cores, network Gb/s (rx + tx), GPU %. */
static int take(void *arg, int r, const struct cs__sample *s)
{
    struct cs__run *run = arg;
    struct cs__res *R = run->res;
    struct ent *e = entity(R, run, r, s);
    if (!e) {
        if (R->n == R->cap || (R->n && !R->e[R->n - 1].bins))
            R->failed = 1;
        return 0;
    }
    int64_t dt = e->n ? s->t - e->t_last : 0;
    if (e->n && dt <= 0)
        return 0; /* a repeated or misordered instant: no interval */
    switch (s->op) {
    case CS_OP_SAMPLE_PROC:
        if (e->n) {
            double rate = s->a >= e->a_last ? (double)(s->a - e->a_last) / (double)dt : NAN;
            if (rate > e->peak)
                e->peak = rate;
            spread(R, e->bins, e->t_last, s->t, rate);
            R->gaps_ns += (double)dt;
            R->ngaps++;
        }
        e->sum_b += (double)s->b;
        if ((double)s->b > e->max_b)
            e->max_b = (double)s->b;
        break;
    case CS_OP_SAMPLE_NIC:
        if (e->n && s->a >= e->a_last && s->b >= e->b_last) {
            double rx = (double)(s->a - e->a_last) * 8 / (double)dt,
                   tx = (double)(s->b - e->b_last) * 8 / (double)dt; /* bits per ns = Gb/s */
            double pk = rx > tx ? rx : tx;
            if (pk > e->peak)
                e->peak = pk;
            spread(R, e->bins, e->t_last, s->t, rx + tx);
        }
        break;
    case CS_OP_SAMPLE_GPU:
        if (s->util != UINT32_MAX) {
            e->util_sum += s->util;
            e->nutil++;
            if (s->util < e->util_min)
                e->util_min = s->util;
            if (s->util > e->util_max)
                e->util_max = s->util;
            if (e->n)
                spread(R, e->bins, e->t_last, s->t, (double)s->util);
        }
        if (s->a != UINT64_MAX && (double)s->a > e->max_b)
            e->max_b = (double)s->a;
        if (s->b != UINT64_MAX)
            e->b_last = s->b;
        if (s->c != UINT64_MAX) {
            e->sum_c += (double)s->c;
            e->nc++;
            if ((double)s->c > e->max_c)
                e->max_c = (double)s->c;
        }
        if (s->d != UINT64_MAX) {
            e->sum_d += (double)s->d;
            e->nd++;
        }
        break;
    }
    e->n++;
    e->t_last = s->t;
    e->a_last = s->a;
    if (s->op != CS_OP_SAMPLE_GPU)
        e->b_last = s->b;
    return 0;
}

/* The last sample's time of rank r (its last sample block's last record), or INT64_MIN. */
static int64_t last_sample(struct cs__run *run, int r)
{
    const struct cs__rank *rk = &run->ranks[r];
    size_t nb = rk->present && rk->rd ? cs_reader_sample_blocks(rk->rd) : 0;
    while (nb-- > 0) {
        const struct cs_event *ev;
        size_t n = cs_reader_sample_block(rk->rd, nb, &ev);
        if (n)
            return cs__clock_map(&rk->clk, ev[n - 1].t_begin);
    }
    return INT64_MIN;
}

void cs__res_begin(struct cs__run *run)
{
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    int any = 0;
    for (int r = 0; r < run->world; r++) {
        const struct cs__rank *rk = &run->ranks[r];
        if (!rk->present)
            continue;
        if (rk->t_first < t0)
            t0 = rk->t_first;
        int64_t l = last_sample(run, r);
        if (l != INT64_MIN) {
            any = 1;
            if (l > t1)
                t1 = l;
        }
        if (rk->h->t_finalize) {
            int64_t f = cs__clock_map(&rk->clk, rk->h->t_finalize);
            if (f > t1)
                t1 = f;
        }
    }
    if (!any)
        return; /* no samples: no section */
    struct cs__res *R = calloc(1, sizeof *R);
    if (!R) {
        cs__problem(run, "resource use: out of memory; the section is left out");
        return;
    }
    R->t0 = t0;
    R->bin_ns = t1 > t0 ? (t1 - t0) / CS_RES_BINS + 1 : 1000000;
    R->nbins = t1 > t0 ? (int)((t1 - t0) / R->bin_ns + 1) : 1;
    if (R->nbins > CS_RES_BINS)
        R->nbins = CS_RES_BINS;
    run->res = R;
    for (int r = 0; r < run->world && !R->failed; r++)
        cs__samples_each(run, r, take, run);
    if (R->failed) {
        cs__problem(run, "resource use: out of memory; the section is left out");
        cs__res_free(run);
    }
}

/* ---- the report ---- */

static double series_value(const struct bins *B, int k)
{
    return B->w[k] > 0 ? B->v[k] / B->w[k] : NAN;
}

static int cpu_desc(const void *a, const void *b, void *arg)
{
    const struct cs_report_res_rank *v = arg;
    double x = v[*(const size_t *)a].cpu_util, y = v[*(const size_t *)b].cpu_util;
    if (!isfinite(x))
        x = -1;
    if (!isfinite(y))
        y = -1;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* A PCI bus id "DDDD:BB:DD.F" (NCCL's, from the communicator record) as bus << 8 | dev << 3 |
 * fn; -1 when it is not one. */
static int32_t pci_of(const char *id)
{
    unsigned dom, bus, dev, fn;
    if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4 || bus > 255 || dev > 31 || fn > 7)
        return -1;
    return (int32_t)(bus << 8 | dev << 3 | fn);
}

/* Each GPU's rank: the rank whose NCCL communicator record names the GPU's PCI location on the
 * same host (nodes' affinity rows). */
static void gpu_ranks(const struct cs_report *rep, struct cs_report_resources *o,
                      const int32_t *pci)
{
    for (size_t a = 0; rep->nodes && a < rep->nodes->naff; a++) {
        const struct cs_report_affinity *af = &rep->nodes->aff[a];
        int32_t want = pci_of(af->bus_id);
        for (size_t g = 0; want >= 0 && g < o->ngpus; g++)
            if (pci[g] == want && o->gpus[g].rank < 0 && !strcmp(o->gpus[g].host, af->host)) {
                o->gpus[g].rank = af->rank;
                for (size_t i = 0; i < o->nranks; i++)
                    if (o->ranks[i].rank == af->rank)
                        o->ranks[i].gpu = (int)g;
                break;
            }
    }
}

static void free_model(struct cs_report_resources *o)
{
    if (!o)
        return;
    free(o->ranks);
    free(o->nics);
    free(o->gpus);
    free(o->cpu);
    free(o->gpu);
    free(o->net);
    free(o->cpu_order);
    free(o);
}

static void copy_series(const struct cs__res *R, const struct ent *e, double *out)
{
    for (int k = 0; k < R->nbins; k++)
        out[k] = series_value(e->bins, k);
}

static double secs(int64_t ns)
{
    return (double)ns / 1e9;
}

/* The model from the entities (NULL out of memory). */
static struct cs_report_resources *build(struct cs__run *run, const struct cs_report *rep)
{
    struct cs__res *R = run->res;
    struct cs_report_resources *o = calloc(1, sizeof *o);
    size_t np = 0, nn = 0, ng = 0;
    for (size_t i = 0; i < R->n; i++) {
        np += R->e[i].op == CS_OP_SAMPLE_PROC;
        nn += R->e[i].op == CS_OP_SAMPLE_NIC;
        ng += R->e[i].op == CS_OP_SAMPLE_GPU;
    }
    int32_t *pci = calloc(ng + 1, sizeof *pci);
    if (!o || !pci)
        goto fail;
    o->nbins = R->nbins;
    o->bin_s = secs(R->bin_ns);
    o->hz = R->gaps_ns > 0 ? (double)R->ngaps / (R->gaps_ns / 1e9) : NAN;
    o->ranks = calloc(np + 1, sizeof *o->ranks);
    o->nics = calloc(nn + 1, sizeof *o->nics);
    o->gpus = calloc(ng + 1, sizeof *o->gpus);
    o->cpu = calloc(np * (size_t)R->nbins + 1, sizeof *o->cpu);
    o->net = calloc(nn * (size_t)R->nbins + 1, sizeof *o->net);
    o->gpu = calloc(ng * (size_t)R->nbins + 1, sizeof *o->gpu);
    o->cpu_order = calloc(np + 1, sizeof *o->cpu_order);
    if (!o->ranks || !o->nics || !o->gpus || !o->cpu || !o->net || !o->gpu || !o->cpu_order)
        goto fail;
    /* The entities stand in rank order (ranks were read in order); a host's interfaces and GPUs
     * in the order its sampling rank first recorded them. */
    for (size_t i = 0; i < R->n; i++) {
        const struct ent *e = &R->e[i];
        const char *host = run->ranks[e->rank].h->host;
        double span = secs(e->t_last - e->t_first);
        if (e->op == CS_OP_SAMPLE_PROC) {
            struct cs_report_res_rank *x = &o->ranks[o->nranks];
            x->rank = e->rank;
            snprintf(x->host, sizeof x->host, "%s", host);
            x->samples = e->n;
            x->span_s = span;
            x->cpu_s = e->a_last >= e->a_first ? (double)(e->a_last - e->a_first) / 1e9 : NAN;
            x->cpu_util = span > 0 ? x->cpu_s / span : NAN;
            x->cpu_util_max = e->n > 1 ? e->peak : NAN;
            x->rss_peak_bytes = e->max_b;
            x->rss_mean_bytes = e->n ? e->sum_b / (double)e->n : NAN;
            x->gpu = -1;
            copy_series(R, e, &o->cpu[o->nranks * (size_t)R->nbins]);
            o->cpu_order[o->nranks] = o->nranks;
            o->nranks++;
        } else if (e->op == CS_OP_SAMPLE_NIC) {
            struct cs_report_res_nic *x = &o->nics[o->nnics];
            snprintf(x->host, sizeof x->host, "%s", host);
            memcpy(x->name, e->name, sizeof x->name);
            x->speed_mbps = e->speed;
            x->span_s = span;
            x->rx_bytes = e->a_last >= e->a_first ? (double)(e->a_last - e->a_first) : NAN;
            x->tx_bytes = e->b_last >= e->b_first ? (double)(e->b_last - e->b_first) : NAN;
            x->rx_gbps = span > 0 ? x->rx_bytes * 8 / 1e9 / span : NAN;
            x->tx_gbps = span > 0 ? x->tx_bytes * 8 / 1e9 / span : NAN;
            x->peak_gbps = e->n > 1 ? e->peak : NAN;
            x->peak_util = e->speed > 0 && e->n > 1 ? e->peak / (e->speed / 1000.0) : NAN;
            copy_series(R, e, &o->net[o->nnics * (size_t)R->nbins]);
            o->nnics++;
        } else {
            struct cs_report_res_gpu *x = &o->gpus[o->ngpus];
            snprintf(x->host, sizeof x->host, "%s", host);
            x->index = e->index;
            x->rank = -1;
            pci[o->ngpus] = e->pci;
            if (e->pci >= 0)
                snprintf(x->pci, sizeof x->pci, "%02x:%02x.%x", e->pci >> 8 & 0xff,
                         e->pci >> 3 & 0x1f, e->pci & 7);
            x->samples = e->n;
            x->util_mean = e->nutil ? e->util_sum / (double)e->nutil : NAN;
            x->util_min = e->nutil ? e->util_min : NAN;
            x->util_max = e->nutil ? e->util_max : NAN;
            x->mem_peak_bytes = e->max_b > 0 ? e->max_b : NAN;
            x->mem_total_bytes = e->b_last && e->b_last != UINT64_MAX ? (double)e->b_last : NAN;
            x->power_mean_w = e->nc ? e->sum_c / (double)e->nc / 1000 : NAN;
            x->power_max_w = e->nc ? e->max_c / 1000 : NAN;
            x->sm_clock_mean_mhz = e->nd ? e->sum_d / (double)e->nd : NAN;
            copy_series(R, e, &o->gpu[o->ngpus * (size_t)R->nbins]);
            o->ngpus++;
        }
    }
    qsort_r(o->cpu_order, o->nranks, sizeof *o->cpu_order, cpu_desc, o->ranks);
    gpu_ranks(rep, o, pci);
    free(pci);
    return o;
fail:
    free(pci);
    free_model(o);
    return NULL;
}

/* The median CPU utilisation of the ranks other than `except` (cpu_order is descending, the
 * unknown last), NaN none. */
static double median_util(const struct cs_report_resources *o, int except)
{
    size_t n = 0;
    for (size_t i = 0; i < o->nranks; i++)
        n += o->ranks[i].rank != except && isfinite(o->ranks[i].cpu_util);
    if (!n)
        return NAN;
    /* the (n - 1) / 2-th and n / 2-th of them in descending order */
    double lo = NAN, hi = NAN;
    for (size_t k = 0, j = 0; k < o->nranks && j <= n / 2; k++) {
        const struct cs_report_res_rank *x = &o->ranks[o->cpu_order[k]];
        if (x->rank == except || !isfinite(x->cpu_util))
            continue;
        if (j == (n - 1) / 2)
            hi = x->cpu_util;
        if (j == n / 2)
            lo = x->cpu_util;
        j++;
    }
    return (lo + hi) / 2;
}

/* The verdict's sentences: the straggler's CPU use, the least busy GPU with its rank's data
 * loading (docs/metrics.md "Resource use"). */
static void findings(const struct cs_report *rep, const struct cs_report_resources *o)
{
    struct cs_report_views *v = rep->views;
    if (!v || !v->findings)
        return;
    for (size_t f = 0; f < v->nfindings && v->nfindings < 8; f++) {
        const struct cs_report_finding *s = &v->findings[f];
        if (s->kind != CS_FIND_STRAGGLER)
            continue;
        for (size_t i = 0; i < o->nranks; i++) {
            const struct cs_report_res_rank *x = &o->ranks[i];
            if (x->rank != s->rank || !isfinite(x->cpu_util))
                continue;
            struct cs_report_finding n = {.kind = CS_FIND_RES_CPU, .rank = x->rank};
            snprintf(n.host, sizeof n.host, "%s", x->host);
            n.v[0] = x->cpu_util;
            n.v[1] = median_util(o, x->rank);
            n.v[2] = x->cpu_s;
            n.v[3] = NAN;
            for (size_t k = 0; k < rep->nranks; k++)
                if (rep->ranks[k].rank == x->rank && rep->ranks[k].wall_s > 0)
                    n.v[3] = rep->ranks[k].compute_s / rep->ranks[k].wall_s;
            memmove(&v->findings[f + 2], &v->findings[f + 1],
                    (v->nfindings - f - 1) * sizeof *v->findings);
            v->findings[f + 1] = n;
            v->nfindings++;
            break;
        }
        break;
    }
    /* The least busy GPU whose rank is known, when it is busy less than half the time; not for a
     * job that hung (the hang diagnosis has withdrawn the timing sentences: no waiting share is
     * built on a hung step). */
    if (rep->hang && rep->hang->hung)
        return;
    const struct cs_report_res_gpu *low = NULL;
    for (size_t g = 0; g < o->ngpus; g++)
        if (o->gpus[g].rank >= 0 && isfinite(o->gpus[g].util_mean) &&
            (!low || o->gpus[g].util_mean < low->util_mean))
            low = &o->gpus[g];
    if (low && low->util_mean < 50 && v->nfindings < 8) {
        struct cs_report_finding n = {.kind = CS_FIND_RES_GPU, .rank = low->rank};
        snprintf(n.host, sizeof n.host, "%s", low->host);
        n.count = (uint64_t)low->index;
        n.v[0] = low->util_mean;
        n.v[1] = NAN;
        for (size_t i = 0; rep->phases && i < rep->phases->nranks; i++) {
            const struct cs_report_phase_rank *p = &rep->phases->ranks[i];
            if (p->rank == low->rank && p->step_s > 0)
                n.v[1] = 100 * p->time_s[CS_PHASE_DATA] / p->step_s;
        }
        n.v[2] = NAN;
        for (size_t i = 0; i < rep->nranks; i++)
            if (rep->ranks[i].rank == low->rank && v->seg_s && rep->ranks[i].wall_s > 0)
                n.v[2] = 100 * v->seg_s[i][CS_SEG_WAIT] / rep->ranks[i].wall_s;
        v->findings[v->nfindings++] = n;
    }
}

void cs__res_report(struct cs__run *run, struct cs_report *rep)
{
    if (!run->res)
        return;
    rep->resources = build(run, rep);
    if (!rep->resources) {
        cs__problem(run, "resource use: out of memory; the section is left out");
        return;
    }
    findings(rep, rep->resources);
}

void cs__res_free(struct cs__run *run)
{
    struct cs__res *R = run->res;
    if (!R)
        return;
    for (size_t i = 0; i < R->n; i++)
        free(R->e[i].bins);
    free(R->e);
    free(R);
    run->res = NULL;
}

void cs__res_report_free(struct cs_report *rep)
{
    free_model(rep->resources);
    rep->resources = NULL;
}
