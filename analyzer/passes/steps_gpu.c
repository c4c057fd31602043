/*
 * The step budget of ranks with a GPU timeline (CUPTI, or a Kineto import): their steps are cut
 * at the host's step boundaries as on every rank, but the time inside a step is taken from the
 * GPU.  At every instant of the step window the rank's GPUs (taken together) either run a compute
 * kernel (compute), or run NCCL kernels and no compute kernel (exposed communication, shared
 * equally by the communicators whose kernels run then), or run neither (idle).  NCCL kernels
 * that run while a compute kernel runs are overlapped communication.  Waits at NCCL instances
 * (from GPU arrivals) are booked by steps.c as for MPI collectives.  Definitions in
 * docs/metrics.md ("Time budget per step", "Ranks with a GPU timeline").
 *
 * Records come in start order per rank up to the disorder of one CUPTI buffer: a reorder heap of
 * REORDER items per rank absorbs it, and step boundaries go through the same heap, so a kernel
 * that starts before a boundary is booked to the step before it even when its record comes late.
 * Memory per rank: the heap and one running piece per communicator the rank's kernels used.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "steps_internal.h"

#define REORDER 1024

/* else: slot index of an NCCL kernel; IT_WAIT - slot: a member's waiting interval on that slot */
enum { IT_COMPUTE = -1, IT_BOUNDARY = -2, IT_WAIT = -3 };

struct item {
    int64_t b, e;
    int32_t what; /* IT_* or slot */
    int32_t step; /* boundaries: the step that begins (-1: a step ends, none begins) */
    int red;      /* NCCL kernels of a reduction launch */
    int p2p;      /* waiting: for a point-to-point partner */
};

struct slot {
    int ci;         /* step-analysis communicator index, -1 unknown */
    int64_t s, e;   /* the union's current piece; e <= s none */
    int grad;       /* a kernel of a reduction launch is in the piece */
    int64_t ws, we; /* the current piece of its members' waiting intervals */
    int64_t ps, pe; /* the same of those at point-to-point pairs (within ws, we) */
};

struct grank {
    struct item *heap;
    size_t nh;
    int started;
    int64_t w;      /* swept up to here */
    int step;       /* the GPU side's current step, -1 none */
    int64_t cs, ce; /* compute piece */
    struct slot *slots;
    size_t nslots, capslots;
    int64_t *pts;
    uint64_t last_launch;
    int last_red;
    double wait_all; /* ns waiting over the whole run, in steps or not (the report views') */
};

struct cs__sgpu {
    int world;
    struct grank *r;    /* [world] */
    struct cs__map red; /* (rank, launch id) -> 1: launches that hold a reduction */
    uint64_t late, late_waits;
    int oom;
};

static int is_nccl_red(unsigned op)
{
    return op == CS_OP_NCCL_ALLREDUCE || op == CS_OP_NCCL_REDUCE || op == CS_OP_NCCL_REDUCE_SCATTER;
}

int cs__sgpu_init(struct cs__run *run, struct cs__steps *S)
{
    int any = 0;
    for (int r = 0; r < run->world; r++)
        if (run->ranks[r].present && run->ranks[r].h->gpu_timing == CS_GPU_CUPTI) {
            S->r[r].gpu = 1;
            any = 1;
        }
    if (!any)
        return 0;
    S->gpu = calloc(1, sizeof *S->gpu);
    if (!S->gpu || !(S->gpu->r = calloc((size_t)run->world, sizeof *S->gpu->r))) {
        free(S->gpu);
        S->gpu = NULL;
        for (int r = 0; r < run->world; r++)
            S->r[r].gpu = 0;
        return CS_ENOMEM;
    }
    S->gpu->world = run->world;
    for (int r = 0; r < run->world; r++)
        S->gpu->r[r].step = -1;
    return 0;
}

static enum cs__dim dim_of(const struct cs__steps *S, int ci)
{
    if (ci < 0)
        return CS_DIM_OTHER;
    enum cs__dim d = S->groups.classes[S->groups.comms[ci].cls].role;
    return d < CS_DIM_N ? d : CS_DIM_OTHER;
}

static void add(struct cs__steps *S, int rank, int k, size_t off, double v)
{
    cs__steps_add(S, rank, k, off, v);
}

#define OFF(f) offsetof(struct cs__budget, f)

/* Account [g->w, s): the elementary pieces between the ends of the current pieces. */
static void sweep(struct cs__steps *S, int rank, struct grank *g, int64_t s)
{
    if (!g->started || s <= g->w)
        return;
    int64_t w = g->w;
    size_t np = 0;
    g->pts[np++] = w;
    g->pts[np++] = s;
#define PT(x)                                                                                      \
    do {                                                                                           \
        if ((x) > w && (x) < s)                                                                    \
            g->pts[np++] = (x);                                                                    \
    } while (0)
    PT(g->cs);
    PT(g->ce);
    for (size_t i = 0; i < g->nslots; i++) {
        PT(g->slots[i].s);
        PT(g->slots[i].e);
        PT(g->slots[i].ws);
        PT(g->slots[i].we);
        PT(g->slots[i].ps);
        PT(g->slots[i].pe);
    }
#undef PT
    /* Few points (six per communicator, two for compute, two ends): insertion sort. */
    for (size_t i = 1; i < np; i++) {
        int64_t x = g->pts[i];
        size_t j = i;
        while (j > 0 && g->pts[j - 1] > x) {
            g->pts[j] = g->pts[j - 1];
            j--;
        }
        g->pts[j] = x;
    }
    int k = g->step;
    for (size_t p = 0; p + 1 < np; p++) {
        int64_t x = g->pts[p], y = g->pts[p + 1];
        if (y <= x)
            continue;
        double L = (double)(y - x);
        int comp = g->ce > g->cs && g->cs <= x && g->ce >= y;
        int m = 0;
        for (size_t i = 0; i < g->nslots; i++)
            m += g->slots[i].e > g->slots[i].s && g->slots[i].s <= x && g->slots[i].e >= y;
        if (k >= 0) {
            if (comp)
                add(S, rank, k, OFF(gcompute), L);
            else if (!m)
                add(S, rank, k, OFF(gidle), L);
            if (m) {
                add(S, rank, k, OFF(span), L);
                if (comp)
                    add(S, rank, k, OFF(ovl), L);
            }
        }
        for (size_t i = 0; i < g->nslots && m; i++) {
            const struct slot *sl = &g->slots[i];
            if (!(sl->e > sl->s && sl->s <= x && sl->e >= y))
                continue;
            enum cs__dim d = dim_of(S, sl->ci);
            int grad = sl->grad && d == CS_DIM_DP;
            struct cs__scomm *sc = sl->ci >= 0 ? &S->groups.comms[sl->ci] : NULL;
            if (sc)
                sc->span += L;
            if (comp) {
                if (sc)
                    sc->ovl += L;
                if (k >= 0 && grad)
                    add(S, rank, k, OFF(grad_ovl), L);
            } else {
                double share = L / m;
                /* Exposed while the member waited for the others: waiting. */
                int waiting = sl->we > sl->ws && sl->ws <= x && sl->we >= y;
                int p2p = waiting && sl->pe > sl->ps && sl->ps <= x && sl->pe >= y;
                if (waiting)
                    g->wait_all += share;
                if (sc)
                    sc->blocked += share;
                if (k >= 0) {
                    add(S, rank, k, OFF(blocked) + (size_t)d * sizeof(double), share);
                    if (grad)
                        add(S, rank, k, OFF(grad_blocked), share);
                    if (p2p)
                        add(S, rank, k, OFF(p2p_wait), share);
                    if (waiting) {
                        add(S, rank, k, OFF(wait) + (size_t)d * sizeof(double), share);
                        if (grad)
                            add(S, rank, k, OFF(grad_wait), share);
                    }
                }
            }
        }
    }
    g->w = s;
}

static void extend(int64_t *ps, int64_t *pe, int64_t b, int64_t e, int *fresh)
{
    if (*pe > *ps && b <= *pe) {
        if (e > *pe)
            *pe = e;
        *fresh = 0;
    } else {
        *ps = b;
        *pe = e;
        *fresh = 1;
    }
}

static void place(struct cs__sgpu *G, struct cs__steps *S, int rank, struct grank *g,
                  struct item it)
{
    if (!g->started) {
        g->started = 1;
        g->w = it.b;
    }
    if (it.b < g->w) {
        /* Older than what was swept: only its part after w can still be placed. */
        if (it.what != IT_BOUNDARY)
            G->late++;
        if (it.what <= IT_WAIT)
            G->late_waits++;
        it.b = g->w;
        if (it.e < it.b)
            it.e = it.b;
    }
    sweep(S, rank, g, it.b);
    if (it.what == IT_BOUNDARY) {
        g->step = it.step;
    } else if (it.what == IT_COMPUTE) {
        int fresh;
        extend(&g->cs, &g->ce, it.b, it.e, &fresh);
    } else if (it.what <= IT_WAIT) {
        struct slot *sl = &g->slots[IT_WAIT - it.what];
        int fresh;
        extend(&sl->ws, &sl->we, it.b, it.e, &fresh);
        if (it.p2p)
            extend(&sl->ps, &sl->pe, it.b, it.e, &fresh);
    } else {
        struct slot *sl = &g->slots[it.what];
        int fresh;
        extend(&sl->s, &sl->e, it.b, it.e, &fresh);
        sl->grad = fresh ? it.red : (sl->grad | it.red);
    }
}

static void heap_down(struct grank *g, size_t i)
{
    struct item x = g->heap[i];
    for (;;) {
        size_t l = 2 * i + 1, m;
        if (l >= g->nh)
            break;
        m = l + 1 < g->nh && g->heap[l + 1].b < g->heap[l].b ? l + 1 : l;
        if (g->heap[m].b >= x.b)
            break;
        g->heap[i] = g->heap[m];
        i = m;
    }
    g->heap[i] = x;
}

static struct item heap_pop(struct grank *g)
{
    struct item top = g->heap[0];
    g->heap[0] = g->heap[--g->nh];
    if (g->nh)
        heap_down(g, 0);
    return top;
}

/* Boundaries sort before records that start at the same time (the record is in the new step);
 * a strict "less" keeps pushes stable enough: equal keys never need a defined order otherwise. */
static void push(struct cs__sgpu *G, struct cs__steps *S, int rank, struct grank *g, struct item it)
{
    if (!g->heap && !(g->heap = malloc(REORDER * sizeof *g->heap))) {
        G->oom = 1;
        return;
    }
    if (g->nh == REORDER)
        place(G, S, rank, g, heap_pop(g));
    size_t i = g->nh++;
    while (i > 0 && g->heap[(i - 1) / 2].b > it.b) {
        g->heap[i] = g->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    g->heap[i] = it;
}

/* The rank's slot of communicator ci (added when new); -1 out of memory. */
static int slot_of(struct cs__sgpu *G, struct grank *g, int ci)
{
    size_t i = 0;
    while (i < g->nslots && g->slots[i].ci != ci)
        i++;
    if (i < g->nslots)
        return (int)i;
    if (g->nslots == g->capslots) {
        size_t cap = g->capslots ? 2 * g->capslots : 4;
        void *p = realloc(g->slots, cap * sizeof *g->slots);
        if (p)
            g->slots = p;
        void *q = p ? realloc(g->pts, (6 * cap + 4) * sizeof *g->pts) : NULL;
        if (!q) {
            G->oom = 1;
            return -1;
        }
        g->pts = q;
        g->capslots = cap;
    }
    g->slots[g->nslots] = (struct slot){.ci = ci};
    return (int)g->nslots++;
}

void cs__sgpu_wait(struct cs__run *run, struct cs__steps *S, int rank, int ci, int64_t b, int64_t e,
                   int p2p)
{
    (void)run;
    struct cs__sgpu *G = S->gpu;
    if (!G || G->oom || e <= b)
        return;
    struct grank *g = &G->r[rank];
    int i = slot_of(G, g, ci);
    if (i < 0)
        return;
    push(G, S, rank, g, (struct item){.b = b, .e = e, .what = IT_WAIT - i, .p2p = p2p});
}

void cs__sgpu_launch(struct cs__steps *S, int rank, const struct cs_event *ev)
{
    struct cs__sgpu *G = S->gpu;
    if (!G || G->oom || !ev->request || !is_nccl_red(ev->op))
        return;
    uint64_t *v = cs__map_put(&G->red, (uint64_t)rank, ev->request, NULL);
    if (v)
        *v = 1;
}

void cs__sgpu_record(struct cs__run *run, struct cs__steps *S, int rank, const struct cs_event *ev,
                     int64_t tb, int64_t te)
{
    struct cs__sgpu *G = S->gpu;
    if (!G || G->oom || (ev->op != CS_OP_GPU_KERNEL && ev->op != CS_OP_GPU_NCCL))
        return;
    struct grank *g = &G->r[rank];
    struct item it = {.b = tb, .e = te > tb ? te : tb, .what = IT_COMPUTE};
    if (ev->op == CS_OP_GPU_NCCL) {
        /* The launch's reduction flag: the launch seen last, else the map (taken out once). */
        if (!ev->request || ev->request != g->last_launch) {
            uint64_t *v = ev->request ? cs__map_get(&G->red, (uint64_t)rank, ev->request) : NULL;
            g->last_launch = ev->request;
            g->last_red = v != NULL;
            if (v)
                cs__map_del(&G->red, (uint64_t)rank, ev->request);
        }
        it.red = g->last_red;
        int i = slot_of(G, g, cs__groups_comm(run, S, ev->comm));
        if (i < 0)
            return;
        it.what = i;
    } else if (!g->pts && !(g->pts = malloc(4 * sizeof *g->pts))) {
        G->oom = 1;
        return;
    }
    push(G, S, rank, g, it);
}

void cs__sgpu_boundary(struct cs__steps *S, int rank, int64_t t, int step)
{
    struct cs__sgpu *G = S->gpu;
    if (!G || G->oom)
        return;
    struct grank *g = &G->r[rank];
    if (!g->pts && !(g->pts = malloc(4 * sizeof *g->pts))) {
        G->oom = 1;
        return;
    }
    push(G, S, rank, g, (struct item){.b = t, .e = t, .what = IT_BOUNDARY, .step = step});
}

void cs__sgpu_finish_rank(struct cs__steps *S, int rank, int64_t end)
{
    struct cs__sgpu *G = S->gpu;
    if (!G || G->oom)
        return;
    cs__sgpu_boundary(S, rank, end, -1);
    struct grank *g = &G->r[rank];
    while (g->nh && !G->oom)
        place(G, S, rank, g, heap_pop(g));
    /* Kernels that run on after the rank's end count for the communicators' totals only. */
    int64_t last = g->ce;
    for (size_t i = 0; i < g->nslots; i++)
        if (g->slots[i].e > last)
            last = g->slots[i].e;
    sweep(S, rank, g, last);
}

double cs__sgpu_rank_wait_s(const struct cs__run *run, int rank)
{
    const struct cs__steps *S = run->steps;
    if (!S || !S->gpu || S->gpu->oom || rank < 0 || rank >= S->gpu->world || !S->r[rank].gpu)
        return NAN;
    return S->gpu->r[rank].wait_all / 1e9;
}

void cs__sgpu_finish(struct cs__run *run, struct cs__steps *S)
{
    struct cs__sgpu *G = S->gpu;
    if (!G)
        return;
    if (G->oom)
        cs__problem(run, "out of memory in the GPU step budget; GPU ranks' budgets are partial");
    if (G->late_waits)
        cs__problem(run,
                    "%llu waits at NCCL instances reached the GPU step budget after the kernels "
                    "around them were accounted; only their later part counts as waiting",
                    (unsigned long long)G->late_waits);
    if (G->late > G->late_waits)
        cs__problem(run,
                    "%llu GPU records reached the step budget more than %d records out of start "
                    "order; only their part after the records already placed was counted",
                    (unsigned long long)(G->late - G->late_waits), REORDER);
}

void cs__sgpu_free(struct cs__steps *S)
{
    struct cs__sgpu *G = S->gpu;
    if (!G)
        return;
    for (size_t i = 0; G->r && i < (size_t)G->world; i++) {
        free(G->r[i].heap);
        free(G->r[i].slots);
        free(G->r[i].pts);
    }
    free(G->r);
    cs__map_free(&G->red);
    free(G);
    S->gpu = NULL;
}
