/* The GPU timeline: per-GPU running unions and NCCL instances from GPU times (see gpu.h). */
#include "gpu.h"
#include "nccl_p2p.h"
#include "passes.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Records a GPU may deliver out of start order and still be placed exactly. */
#define REORDER 1024

enum { CLS_COMPUTE = -1, CLS_NONE = -2 }; /* else: index into the GPU's communicator classes */

struct comp {
    int64_t s, e; /* the union's current connected piece; e <= s when none */
};

struct gcomm {
    uint64_t id;
    struct comp c;
    uint64_t ns, ovl, kernels;
};

struct giv {
    int64_t b, e;
    int32_t cls;
};

struct gdev {
    int rank;
    int32_t dev;
    struct giv *heap; /* min-heap by b, at most REORDER */
    size_t nh;
    int64_t w; /* swept up to here: coverage before w is accounted */
    int started;
    struct comp comp, all;
    struct gcomm *comms;
    size_t ncomms, capcomms;
    uint64_t comp_ns, comm_ns, ovl_ns, kernels, comm_kernels;
};

/* The launching call of an NCCL launch, kept until its first GPU record. */
struct launch {
    uint64_t comm, bytes, bytes_recv;
    uint32_t seq;
    int32_t peer;
    uint16_t op, flags;
};

/* Per rank: the op of the launch seen last, for the launch's further GPU records. */
struct lastl {
    uint64_t req, comm;
    uint16_t op;
};

struct cs__gpu {
    struct cs__run *run;       /* for the facts of the sweep */
    struct cs__map dev_by_key; /* (rank, device) -> index + 1 */
    struct gdev *devs;
    size_t ndevs, capdevs;
    struct cs__map launches; /* (rank, launch id) -> struct launch * */
    struct lastl *last;      /* [world] */
    uint64_t instances, unmatched_launch, late;
    int oom;
};

static struct cs__gpu *state(struct cs__run *run)
{
    if (run->gpu)
        return run->gpu;
    struct cs__gpu *g = calloc(1, sizeof *g);
    if (g)
        g->last = calloc((size_t)(run->world > 0 ? run->world : 1), sizeof *g->last);
    if (!g || !g->last) {
        free(g);
        return NULL;
    }
    g->run = run;
    run->gpu = g;
    return g;
}

static struct gdev *dev_get(struct cs__gpu *g, int rank, int32_t dev)
{
    int fresh;
    uint64_t *v = cs__map_put(&g->dev_by_key, (uint64_t)rank, (uint64_t)(uint32_t)dev, &fresh);
    if (!v)
        return NULL;
    if (!fresh)
        return &g->devs[*v - 1];
    if (cs__grow((void **)&g->devs, &g->capdevs, g->ndevs + 1, sizeof *g->devs)) {
        cs__map_del(&g->dev_by_key, (uint64_t)rank, (uint64_t)(uint32_t)dev);
        return NULL;
    }
    struct gdev *d = &g->devs[g->ndevs];
    *d = (struct gdev){.rank = rank, .dev = dev};
    d->heap = malloc(REORDER * sizeof *d->heap);
    if (!d->heap) {
        cs__map_del(&g->dev_by_key, (uint64_t)rank, (uint64_t)(uint32_t)dev);
        return NULL;
    }
    *v = ++g->ndevs;
    return d;
}

static int32_t comm_class(struct gdev *d, uint64_t id)
{
    for (size_t i = 0; i < d->ncomms; i++)
        if (d->comms[i].id == id)
            return (int32_t)i;
    if (cs__grow((void **)&d->comms, &d->capcomms, d->ncomms + 1, sizeof *d->comms))
        return CLS_NONE;
    d->comms[d->ncomms] = (struct gcomm){.id = id};
    return (int32_t)d->ncomms++;
}

/* The part of piece c inside [w, s). */
static struct comp clip(struct comp c, int64_t w, int64_t s)
{
    struct comp r = {c.s > w ? c.s : w, c.e < s ? c.e : s};
    if (r.e < r.s)
        r.e = r.s;
    return r;
}

static uint64_t len_and(struct comp a, struct comp b)
{
    int64_t s = a.s > b.s ? a.s : b.s, e = a.e < b.e ? a.e : b.e;
    return e > s ? (uint64_t)(e - s) : 0;
}

/* Communication on [a, b) that no compute kernel covered: a fact for the rows that split it. */
static void exposed(struct cs__gpu *g, const struct gdev *d, int64_t a, int64_t b)
{
    if (b > a)
        cs__analyze_fact(
            g->run,
            &(struct cs__fact){.kind = CS__FACT_GPU_EXPOSED, .rank = d->rank, .t = a, .e = b});
}

/* Account coverage on [w, s): only the current pieces can reach past w. */
static void sweep(struct cs__gpu *g, struct gdev *d, int64_t s)
{
    if (!d->started || s <= d->w)
        return;
    struct comp cp = clip(d->comp, d->w, s), al = clip(d->all, d->w, s);
    if (al.e > al.s) {
        if (cp.e > cp.s && cp.s < al.e && cp.e > al.s) {
            exposed(g, d, al.s, cp.s);
            exposed(g, d, cp.e, al.e);
        } else {
            exposed(g, d, al.s, al.e);
        }
    }
    d->comp_ns += (uint64_t)(cp.e - cp.s);
    d->comm_ns += (uint64_t)(al.e - al.s);
    d->ovl_ns += len_and(cp, al);
    for (size_t i = 0; i < d->ncomms; i++) {
        struct comp c = clip(d->comms[i].c, d->w, s);
        d->comms[i].ns += (uint64_t)(c.e - c.s);
        d->comms[i].ovl += len_and(c, cp);
    }
    d->w = s;
}

static void extend(struct comp *c, int64_t b, int64_t e)
{
    if (c->e > c->s && b <= c->e) {
        if (e > c->e)
            c->e = e;
    } else {
        c->s = b;
        c->e = e;
    }
}

/* Add one interval in start order. */
static void place(struct cs__gpu *g, struct gdev *d, struct giv iv)
{
    if (!d->started) {
        d->started = 1;
        d->w = iv.b;
    }
    if (iv.b < d->w) {
        /* Older than everything swept: only its part after w can still be placed. */
        g->late++;
        iv.b = d->w;
        if (iv.e <= iv.b)
            return;
    }
    sweep(g, d, iv.b);
    if (iv.cls == CLS_COMPUTE) {
        extend(&d->comp, iv.b, iv.e);
    } else if (iv.cls >= 0) {
        extend(&d->all, iv.b, iv.e);
        extend(&d->comms[iv.cls].c, iv.b, iv.e);
    }
}

static void heap_down(struct gdev *d, size_t i)
{
    struct giv x = d->heap[i];
    for (;;) {
        size_t l = 2 * i + 1, m;
        if (l >= d->nh)
            break;
        m = l + 1 < d->nh && d->heap[l + 1].b < d->heap[l].b ? l + 1 : l;
        if (d->heap[m].b >= x.b)
            break;
        d->heap[i] = d->heap[m];
        i = m;
    }
    d->heap[i] = x;
}

static struct giv heap_pop(struct gdev *d)
{
    struct giv top = d->heap[0];
    d->heap[0] = d->heap[--d->nh];
    if (d->nh)
        heap_down(d, 0);
    return top;
}

static void heap_push(struct cs__gpu *g, struct gdev *d, struct giv iv)
{
    if (d->nh == REORDER)
        place(g, d, heap_pop(d));
    size_t i = d->nh++;
    while (i > 0 && d->heap[(i - 1) / 2].b > iv.b) {
        d->heap[i] = d->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    d->heap[i] = iv;
}

/* The first GPU record of an NCCL launch: this rank's member of the collective instance. */
static void nccl_member(struct cs__run *run, struct cs__gpu *g, int rank, const struct cs_event *ev,
                        int64_t tb, int64_t te)
{
    uint64_t *v = ev->request ? cs__map_get(&g->launches, (uint64_t)rank, ev->request) : NULL;
    if (!v) {
        if (g->last[rank].req != ev->request || !ev->request)
            g->unmatched_launch++;
        return;
    }
    struct launch *L = (void *)(uintptr_t)*v;
    cs__map_del(&g->launches, (uint64_t)rank, ev->request);
    g->last[rank] = (struct lastl){.req = ev->request, .comm = L->comm, .op = L->op};
    if (cs_op_info(L->op)->kind == CS_KIND_NCOLL && L->comm == ev->comm && L->seq == ev->seq) {
        struct cs_event m = {.t_begin = ev->t_begin,
                             .t_end = ev->t_end,
                             .comm = L->comm,
                             .bytes = L->bytes,
                             .bytes_recv = L->bytes_recv,
                             .seq = L->seq,
                             .peer = L->peer,
                             .op = L->op,
                             .flags = L->flags & CS_EV_ROOT};
        size_t row = cs__row_get(run, L->op, L->comm);
        g->instances++;
        struct cs__ev e = {.ev = &m, .r = rank, .k = CS_KIND_COLL, .tb = tb, .te = te, .row = row};
        cs__analyze_derived(run, &e);
    }
    free(L);
}

void cs__gpu_event(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k,
                   int64_t tb, int64_t te)
{
    if (k != CS_KIND_GPU && k != CS_KIND_NCOLL && k != CS_KIND_NP2P)
        return;
    struct cs__gpu *g = state(run);
    if (!g || g->oom)
        return;
    if (k != CS_KIND_GPU) {
        /* Remember the launching call; a group's GPU records name its first call. */
        if (!ev->request || run->ranks[rank].h->gpu_timing == CS_GPU_NONE ||
            (ev->flags & CS_EV_GRAPH))
            return;
        int fresh;
        uint64_t *v = cs__map_put(&g->launches, (uint64_t)rank, ev->request, &fresh);
        if (!v || !fresh)
            return;
        struct launch *L = malloc(sizeof *L);
        if (!L) {
            cs__map_del(&g->launches, (uint64_t)rank, ev->request);
            return;
        }
        *L = (struct launch){.comm = ev->comm,
                             .bytes = ev->bytes,
                             .bytes_recv = ev->bytes_recv,
                             .seq = ev->seq,
                             .peer = ev->peer,
                             .op = ev->op,
                             .flags = ev->flags};
        *v = (uint64_t)(uintptr_t)L;
        return;
    }
    struct gdev *d = dev_get(g, rank, ev->aux);
    if (!d) {
        g->oom = 1;
        cs__problem(run, "out of memory in the GPU timeline; its numbers are left out");
        return;
    }
    struct giv iv = {.b = tb, .e = te > tb ? te : tb, .cls = CLS_NONE};
    if (ev->op == CS_OP_GPU_KERNEL) {
        iv.cls = CLS_COMPUTE;
        d->kernels++;
    } else if (ev->op == CS_OP_GPU_NCCL) {
        iv.cls = comm_class(d, ev->comm);
        d->comm_kernels++;
        if (iv.cls >= 0)
            d->comms[iv.cls].kernels++;
        int first = !(g->last[rank].req == ev->request && ev->request);
        if (first) {
            cs__analyze_fact(run, &(struct cs__fact){.kind = CS__FACT_NCCL_KERNEL,
                                                     .rank = rank,
                                                     .id = ev->request,
                                                     .t = tb,
                                                     .e = te});
            nccl_member(run, g, rank, ev, tb, te);
        }
        /* Kernel time goes to the launching op's row (gpu_nccl's own when unknown). */
        uint16_t op = CS_OP_GPU_NCCL;
        uint64_t comm = ev->comm;
        if (ev->request && g->last[rank].req == ev->request) {
            op = g->last[rank].op;
            comm = g->last[rank].comm;
        }
        size_t row = cs__row_get(run, op, comm);
        if (row != SIZE_MAX) {
            run->rows[row].time_ns += (uint64_t)(iv.e - iv.b);
            if (op == CS_OP_GPU_NCCL)
                run->rows[row].calls++;
        }
    }
    if (iv.cls == CLS_NONE)
        return;
    heap_push(g, d, iv);
}

void cs__gpu_finish(struct cs__run *run)
{
    struct cs__gpu *g = run->gpu;
    if (!g)
        return;
    for (size_t i = 0; i < g->ndevs; i++) {
        struct gdev *d = &g->devs[i];
        while (d->nh)
            place(g, d, heap_pop(d));
        int64_t end = d->comp.e > d->all.e ? d->comp.e : d->all.e;
        sweep(g, d, end);
        struct cs__rank *rk = &run->ranks[d->rank];
        rk->gpu = 1;
        rk->gpu_comm_ns += d->comm_ns;
        rk->gpu_ovl_ns += d->ovl_ns;
        rk->gpu_compute_ns += d->comp_ns;
    }
    for (size_t i = 0; i < g->launches.cap; i++)
        if (g->launches.slot[i].used) {
            free((void *)(uintptr_t)g->launches.slot[i].v);
            g->launches.slot[i].used = 0;
        }
    g->launches.n = 0;
    if (g->unmatched_launch)
        cs__problem(run,
                    "%" PRIu64 " NCCL kernels could not be tied to the NCCL call that launched "
                    "them; they count as communication time but not in collective instances",
                    g->unmatched_launch);
    if (g->late)
        cs__problem(run,
                    "%" PRIu64 " GPU records arrived more than %d records out of start order; "
                    "only their part after the records already placed was counted",
                    g->late, REORDER);
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : NAN;
}

static int comm_cmp(const void *x, const void *y)
{
    const struct cs_report_gpu_comm *a = x, *b = y;
    return strcmp(a->comm, b->comm);
}

void cs__gpu_report(struct cs__run *run, struct cs_report *rep)
{
    struct cs__gpu *g = run->gpu;
    if (!g || g->oom || !g->ndevs) {
        cs__gpu_free(run);
        return;
    }
    struct cs_report_gpu *o = calloc(1, sizeof *o);
    size_t nc = 0;
    for (size_t i = 0; i < g->ndevs; i++)
        nc += g->devs[i].ncomms;
    if (o) {
        o->devs = calloc(g->ndevs, sizeof *o->devs);
        o->comms = calloc(nc + 1, sizeof *o->comms);
    }
    if (!o || !o->devs || !o->comms) {
        if (o) {
            free(o->devs);
            free(o->comms);
        }
        free(o);
        cs__problem(run, "out of memory for the GPU timeline report");
        cs__gpu_free(run);
        return;
    }
    double tc = 0, to = 0;
    for (size_t i = 0; i < g->ndevs; i++) {
        const struct gdev *d = &g->devs[i];
        struct cs_report_gpu_dev *x = &o->devs[o->ndevs++];
        x->rank = d->rank;
        x->device = d->dev;
        x->kernels = d->kernels;
        x->comm_kernels = d->comm_kernels;
        x->comm_s = (double)d->comm_ns / 1e9;
        x->overlapped_s = (double)d->ovl_ns / 1e9;
        x->exposed_s = x->comm_s - x->overlapped_s;
        x->compute_s = (double)d->comp_ns / 1e9;
        x->overlap_ratio = ratio(x->overlapped_s, x->comm_s);
        tc += x->comm_s;
        to += x->overlapped_s;
        for (size_t j = 0; j < d->ncomms; j++) {
            char label[40];
            cs__comm_label(d->comms[j].id, label, sizeof label);
            struct cs_report_gpu_comm *c = NULL;
            for (size_t k = 0; k < o->ncomms && !c; k++)
                if (!strcmp(o->comms[k].comm, label))
                    c = &o->comms[k];
            if (!c) {
                c = &o->comms[o->ncomms++];
                snprintf(c->comm, sizeof c->comm, "%s", label);
                const struct cs__comm *cc = cs__comm_get(run, d->comms[j].id);
                c->comm_size = cc ? cc->size : 0;
            }
            c->kernels += d->comms[j].kernels;
            c->comm_s += (double)d->comms[j].ns / 1e9;
            c->overlapped_s += (double)d->comms[j].ovl / 1e9;
        }
    }
    for (size_t k = 0; k < o->ncomms; k++) {
        o->comms[k].exposed_s = o->comms[k].comm_s - o->comms[k].overlapped_s;
        o->comms[k].overlap_ratio = ratio(o->comms[k].overlapped_s, o->comms[k].comm_s);
    }
    qsort(o->comms, o->ncomms, sizeof *o->comms, comm_cmp);
    o->comm_s = tc;
    o->overlapped_s = to;
    o->exposed_s = tc - to;
    o->overlap_ratio = ratio(to, tc);
    o->nccl_instances = g->instances;
    o->unmatched_launch = g->unmatched_launch;
    o->late_records = g->late;
    rep->gpu = o;
    cs__gpu_free(run);
}

void cs__gpu_free(struct cs__run *run)
{
    struct cs__gpu *g = run->gpu;
    if (!g)
        return;
    for (size_t i = 0; i < g->ndevs; i++) {
        free(g->devs[i].heap);
        free(g->devs[i].comms);
    }
    free(g->devs);
    for (size_t i = 0; i < g->launches.cap; i++)
        if (g->launches.slot[i].used)
            free((void *)(uintptr_t)g->launches.slot[i].v);
    cs__map_free(&g->launches);
    cs__map_free(&g->dev_by_key);
    free(g->last);
    free(g);
    run->gpu = NULL;
}

void cs__gpu_report_free(struct cs_report *rep)
{
    if (!rep->gpu)
        return;
    free(rep->gpu->devs);
    free(rep->gpu->comms);
    free(rep->gpu);
    rep->gpu = NULL;
}
