/*
 * What-if on GPU timelines: when every rank has a CUPTI GPU timeline, the replay runs on the GPU
 * kernels instead of the host calls (whose NCCL calls only enqueue).  Definitions in
 * docs/metrics.md ("What-if", "GPU timelines").
 *
 * Each rank's step window (its host step boundaries) holds the GPU records that start in it, on
 * lanes: one per (device, stream) for compute kernels and one per (device, communicator) for NCCL
 * kernels (a communicator's kernels run in order on its stream), linked in the order of their
 * measured starts (relink(): records come in CUPTI buffers).  On a lane, an item's replayed
 * start is the previous item's replayed end plus the measured gap; the first item of a lane keeps
 * its measured offset from the step's begin.  A compute kernel lasts its measured duration; an
 * NCCL kernel is its rank's member of the collective instance (communicator, sequence) of the
 * launching call and, as an MPI collective in the host replay, ends x after the arrivals its
 * pattern waits for, x = measured end - measured sync point.  An NCCL kernel whose launch holds
 * ncclSend/ncclRecv calls (and no collective) is linked to the kernels of their counterparts
 * (paired per communicator, sender and receiver in issue order, as NCCL pairs them): it ends x
 * after the latest start among its own and theirs, x measured the same way; a counterpart outside
 * the step window is not waited for.  The rank's step ends a fixed time
 * after its GPU's last work of the step (the measured slack): the host waits for the GPU at the
 * end of a step.  The scenarios change the timed steps only, as in the host replay.  Memory: one
 * step window of GPU records of all ranks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_p2p.h"
#include "steps_internal.h"

struct gi {
    double a, e;       /* measured, ns after the origin */
    double gap;        /* lane: a - previous item's e; first on its lane: a - step begin */
    double x;          /* NCCL: e - measured sync point; compute: e - a */
    double scale;      /* best-bandwidth factor of x */
    int prev;          /* previous item on its lane in this window, -1 first */
    int lane;          /* its lane in the window (struct gr's lane) */
    int comp;          /* compute kernel */
    int32_t inst, idx; /* NCCL: instance in the window and comm rank, -1 none */
    double A, E;
    int arrived, done;
    int32_t p0, pn; /* NCCL send/recv sides of its launch: its window's pl[p0 .. p0 + pn) */
};

struct gr {
    int gpu;
    struct gi *it;
    size_t n, cap;
    uint64_t *lane; /* lane keys of this window, parallel to last */
    int *last;
    size_t nl, capl;
    int unsorted;         /* an item began before the previous one read on its lane */
    struct lane_ord *ord; /* relink(): the items by lane and start */
    size_t capord;
    const struct cs_event *peek;
    const struct cs_event *bp, *be; /* cs_reader_next_batch()'s events not read yet */
    int done_reading;
    uint64_t occ;
    int step;              /* the window being read: step index, -1 before the first */
    int fresh;             /* this window began a step */
    double b, c;           /* measured begin and end of the window's step */
    int closed;            /* the step was closed by an end marker (c known) */
    double B[SC_N];        /* replayed begin of the window's step */
    double comp, f;        /* compute in the window, no-straggler factor */
    struct cs__map launch; /* launch id -> op | root << 16, bytes in the second map */
    struct cs__map lbytes;
    /* NCCL point-to-point (whole run): launch id -> struct p2pl *, and per channel and side the
     * next pair index (issue order); per window: the items' sides, pend index * 2 + side. */
    struct cs__map p2pl, p2pk;
    int32_t *pl;
    size_t npl, cappl;
};

struct gin {
    uint64_t comm, bytes;
    uint32_t seq;
    uint16_t op;
    int32_t n, root, seen;
    int32_t *who, *item; /* per comm rank: rank, item index (-1 not seen) */
    double *pa;          /* measured arrivals */
    double *pA;          /* replayed arrivals */
    unsigned char *has;
};

struct gp {
    struct cs__run *run;
    struct cs__steps *S;
    double origin;
    struct gr *r;
    struct gin *in;
    size_t nin, capin;
    struct cs__map imap;
    int first, end;
    double *sum[SC_N];
    int *cnt;
    uint64_t cut, dropped, forced;
    int64_t *arr; /* scratch: one instance's arrivals */
    size_t caparr;
    int oom;
    /* NCCL point-to-point: channel ids (whole run); per window the pairs (chan, k) -> pend + 1 */
    struct cs__map chmap, pmap;
    uint64_t nextch;
    struct pend {
        int32_t r[2], item[2]; /* [0] the send's rank and item, [1] the receive's; -1 absent */
    } * pe;
    size_t npe, cappe;
};

/* One launch's send/recv calls, until its first kernel. */
struct p2pl {
    size_t n, cap;
    struct p2pref {
        uint64_t ch, k;
        int recv;
    } * v;
};

/* The same key as whatif.c's best transfer times (cs__whatif_instance). */
static uint64_t best_key(uint16_t op, int cls)
{
    return (uint64_t)op | (uint64_t)(uint32_t)(cls + 1) << 16;
}

static int lane_of(struct gr *w, uint64_t key)
{
    for (size_t i = 0; i < w->nl; i++)
        if (w->lane[i] == key)
            return (int)i;
    if (cs__grow((void **)&w->lane, &w->capl, w->nl + 1, sizeof *w->lane))
        return -1;
    size_t cl = w->capl;
    void *p = realloc(w->last, cl * sizeof *w->last);
    if (!p)
        return -1;
    w->last = p;
    w->lane[w->nl] = key;
    w->last[w->nl] = -1;
    return (int)w->nl++;
}

static int32_t inst_of(struct gp *P, uint64_t comm, uint32_t seq, uint16_t op)
{
    int fresh;
    uint64_t *v = cs__map_put(&P->imap, comm, seq, &fresh);
    if (!v)
        return -1;
    if (!fresh)
        return (int32_t)*v - 1;
    const struct cs__comm *c = cs__comm_get(P->run, comm);
    int32_t n = c ? c->size : 0;
    if (n < 2 || cs__grow((void **)&P->in, &P->capin, P->nin + 1, sizeof *P->in)) {
        *v = 0;
        return -1;
    }
    struct gin *g = &P->in[P->nin];
    *g = (struct gin){.comm = comm, .seq = seq, .op = op, .n = n, .root = -1};
    g->who = malloc((size_t)n * sizeof *g->who);
    g->item = malloc((size_t)n * sizeof *g->item);
    g->pa = malloc((size_t)n * sizeof *g->pa);
    g->pA = malloc((size_t)n * sizeof *g->pA);
    g->has = calloc((size_t)n, 1);
    if (!g->who || !g->item || !g->pa || !g->pA || !g->has) {
        free(g->who);
        free(g->item);
        free(g->pa);
        free(g->pA);
        free(g->has);
        *v = 0;
        return -1;
    }
    for (int32_t i = 0; i < n; i++)
        g->who[i] = -1;
    *v = ++P->nin;
    return (int32_t)P->nin - 1;
}

/* Comm rank of world rank r in communicator id, or -1 (as match.c finds it). */
static int32_t comm_rank(struct cs__run *run, uint64_t id, int r)
{
    const struct cs__comm *c = cs__comm_get(run, id);
    if (c)
        return cs__comm_rank(run, c, r);
    uint64_t *v = cs__map_get(&run->my_rank, id, (uint64_t)r);
    return v ? (int32_t)(*v - 1) : -1;
}

/* An ncclSend/ncclRecv call of rank r: its pair index on its channel (NCCL's issue order), kept
 * with its launch until the launch's first kernel.  0, or -1 out of memory. */
static int p2p_call(struct gp *P, int r, const struct cs_event *ev)
{
    int recv = ev->op == CS_OP_NCCL_RECV;
    if ((ev->op != CS_OP_NCCL_SEND && !recv) || !ev->request ||
        (ev->flags & (CS_EV_ERROR | CS_EV_GRAPH)) || !strcmp(P->run->source, "kineto"))
        return 0; /* Kineto imports: no peer recorded (seq is the group's sequence) */
    const struct cs__comm *c = cs__comm_get(P->run, ev->comm);
    int32_t me = comm_rank(P->run, ev->comm, r);
    if (!c || me < 0 || c->multi || ev->seq >= (uint32_t)c->size)
        return 0;
    uint32_t from = recv ? ev->seq : (uint32_t)me, to = recv ? (uint32_t)me : ev->seq;
    uint64_t ch = cs__np2p_chan_id(&P->chmap, &P->nextch, ev->comm, from, to);
    struct gr *w = &P->r[r];
    uint64_t *k = ch ? cs__map_put(&w->p2pk, ch, (uint64_t)recv, NULL) : NULL;
    int fresh;
    uint64_t *v = k ? cs__map_put(&w->p2pl, (uint64_t)r, ev->request, &fresh) : NULL;
    if (!v)
        return -1;
    struct p2pl *L = fresh ? calloc(1, sizeof *L) : (void *)(uintptr_t)*v;
    if (!L || cs__grow((void **)&L->v, &L->cap, L->n + 1, sizeof *L->v)) {
        if (fresh) {
            free(L);
            cs__map_del(&w->p2pl, (uint64_t)r, ev->request);
        }
        return -1;
    }
    *v = (uint64_t)(uintptr_t)L;
    L->v[L->n++] = (struct p2pref){.ch = ch, .k = (*k)++, .recv = recv};
    return 0;
}

/* The launch's first kernel (the window's last item of rank r) holds its send/recv sides: each
 * becomes that side of its pair in this window.  0, or -1 out of memory. */
static int p2p_item(struct gp *P, int r, uint64_t launch)
{
    struct gr *w = &P->r[r];
    uint64_t *v = cs__map_get(&w->p2pl, (uint64_t)r, launch);
    if (!v)
        return 0;
    struct p2pl *L = (void *)(uintptr_t)*v;
    cs__map_del(&w->p2pl, (uint64_t)r, launch);
    struct gi *it = &w->it[w->n - 1];
    it->p0 = (int32_t)w->npl;
    int rc = 0;
    for (size_t i = 0; i < L->n && !rc; i++) {
        int fresh;
        uint64_t *pv = cs__map_put(&P->pmap, L->v[i].ch, L->v[i].k, &fresh);
        if (!pv || (fresh && cs__grow((void **)&P->pe, &P->cappe, P->npe + 1, sizeof *P->pe)) ||
            cs__grow((void **)&w->pl, &w->cappl, w->npl + 1, sizeof *w->pl)) {
            rc = -1;
            break;
        }
        if (fresh) {
            P->pe[P->npe] = (struct pend){.r = {-1, -1}, .item = {-1, -1}};
            *pv = ++P->npe;
        }
        struct pend *pe = &P->pe[*pv - 1];
        int side = L->v[i].recv;
        if (pe->r[side] >= 0)
            continue;
        pe->r[side] = r;
        pe->item[side] = (int32_t)w->n - 1;
        w->pl[w->npl++] = (int32_t)(*pv - 1) * 2 + side;
        it->pn++;
    }
    free(L->v);
    free(L);
    return rc;
}

/* The other side's item of entry e of the pl lists, or NULL when not in this window. */
static struct gi *p2p_other(struct gp *P, int32_t e)
{
    const struct pend *pe = &P->pe[e / 2];
    int o = 1 - e % 2;
    return pe->r[o] >= 0 ? &P->r[pe->r[o]].it[pe->item[o]] : NULL;
}

/* Measured x of NCCL kernels holding sends/recvs (and no collective): end - the latest kernel
 * start among its own and its partners'. */
static void p2p_resolve(struct gp *P)
{
    for (int r = 0; r < P->run->world; r++) {
        struct gr *w = &P->r[r];
        for (size_t i = 0; i < w->n; i++) {
            struct gi *it = &w->it[i];
            if (!it->pn || it->inst >= 0)
                continue;
            double s = it->a;
            for (int32_t j = 0; j < it->pn; j++) {
                const struct gi *o = p2p_other(P, w->pl[it->p0 + j]);
                if (o && o->a > s)
                    s = o->a;
            }
            it->x = it->e > s ? it->e - s : 0;
        }
    }
}

/* Replay: the sync point of such a kernel, the latest replayed start among its own and its
 * partners'; 0 while a partner has not started yet. */
static int p2p_sync(struct gp *P, const struct gr *w, const struct gi *it, double *S)
{
    for (int32_t j = 0; j < it->pn; j++) {
        const struct gi *o = p2p_other(P, w->pl[it->p0 + j]);
        if (!o)
            continue;
        if (!o->arrived)
            return 0;
        if (o->A > *S)
            *S = o->A;
    }
    return 1;
}

struct lane_ord {
    int lane, idx;
    double a;
};

static int lane_ord_cmp(const void *x, const void *y)
{
    const struct lane_ord *p = x, *q = y;
    if (p->lane != q->lane)
        return p->lane < q->lane ? -1 : 1;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return (p->idx > q->idx) - (p->idx < q->idx);
}

/* Links the window's items on each lane in the order they started: GPU records come in CUPTI
 * buffers, not always in start order, and a lane runs its kernels one after the other.
 * 0, or -1 out of memory. */
static int relink(struct gr *w)
{
    if (!w->unsorted)
        return 0;
    w->unsorted = 0;
    if (cs__grow((void **)&w->ord, &w->capord, w->n, sizeof *w->ord))
        return -1;
    for (size_t i = 0; i < w->n; i++)
        w->ord[i] = (struct lane_ord){.lane = w->it[i].lane, .idx = (int)i, .a = w->it[i].a};
    qsort(w->ord, w->n, sizeof *w->ord, lane_ord_cmp);
    for (size_t j = 0; j < w->n; j++) {
        struct gi *it = &w->it[w->ord[j].idx];
        int prev = j > 0 && w->ord[j - 1].lane == it->lane ? w->ord[j - 1].idx : -1;
        it->prev = prev;
        it->gap = prev < 0 ? it->a - w->b : it->a - w->it[prev].e;
    }
    return 0;
}

/* Read rank r's GPU records of its next step window (the events up to the boundary that begins
 * the step after it); 0, or -1 out of memory. */
static int read_window(struct gp *P, int r)
{
    struct gr *w = &P->r[r];
    struct cs__rank *rk = &P->run->ranks[r];
    w->n = 0;
    w->nl = 0;
    w->npl = 0;
    w->fresh = 0;
    w->unsorted = 0;
    if (w->peek) {
        /* The boundary read last begins this window's step. */
        w->step++;
        w->b = w->c = (double)cs__clock_map(&rk->clk, w->peek->t_begin) - P->origin;
        w->closed = 0;
        w->fresh = 1;
        w->peek = NULL;
    } else if (w->done_reading) {
        return 0;
    }
    for (;;) {
        const struct cs_event *ev = w->bp;
        if (ev == w->be) {
            size_t nb = cs_reader_next_batch(rk->rd, &ev);
            w->be = nb ? ev + nb : NULL;
        }
        w->bp = ev ? ev + 1 : NULL;
        if (!ev) {
            w->done_reading = 1;
            if (w->step >= 0 && !w->closed) {
                w->c = (double)rk->t_last_end - P->origin;
                w->closed = 1;
            }
            return 0;
        }
        enum cs_op_kind k = cs_op_info(ev->op)->kind;
        double a = (double)cs__clock_map(&rk->clk, ev->t_begin) - P->origin;
        double e = (double)cs__clock_map(&rk->clk, ev->t_end) - P->origin;
        if (e < a)
            e = a;
        if (k == CS_KIND_NCOLL && ev->request) {
            /* The launching call: op and root flag, and the message size, by launch id. */
            uint64_t *v = cs__map_put(&w->launch, (uint64_t)r, ev->request, NULL);
            uint64_t *b = cs__map_put(&w->lbytes, (uint64_t)r, ev->request, NULL);
            if (!v || !b)
                return -1;
            *v = (uint64_t)ev->op | (uint64_t)((ev->flags & CS_EV_ROOT) != 0) << 16;
            *b = ev->bytes > ev->bytes_recv ? ev->bytes : ev->bytes_recv;
            continue;
        }
        if (k == CS_KIND_NP2P && p2p_call(P, r, ev))
            return -1;
        int bnd = cs__steps_boundary_of(P->run, P->S, ev, k, &w->occ);
        if (bnd != 0 || ev->op == CS_OP_FINALIZE) {
            /* The step being read ends here (a begin, an end marker, MPI_Finalize). */
            if (w->step >= 0 && !w->closed) {
                w->c = a;
                w->closed = 1;
            }
            if (bnd == 1) {
                w->peek = ev;
                return 0;
            }
            continue;
        }
        if (k != CS_KIND_GPU || (ev->op != CS_OP_GPU_KERNEL && ev->op != CS_OP_GPU_NCCL))
            continue;
        if (w->step < 0 || w->closed || a < w->b) {
            if (w->step >= 0 && a < w->b)
                P->dropped++;
            continue;
        }
        uint64_t key = ev->op == CS_OP_GPU_KERNEL
                           ? (uint64_t)(uint32_t)ev->aux << 32 | ev->seq
                           : ev->comm ^ ((uint64_t)(uint32_t)ev->aux << 48) ^ 1ull << 47;
        int lane = lane_of(w, key);
        if (lane < 0 || cs__grow((void **)&w->it, &w->cap, w->n + 1, sizeof *w->it))
            return -1;
        struct gi *it = &w->it[w->n];
        int prev = w->last[lane];
        *it = (struct gi){.a = a,
                          .e = e,
                          .gap = prev < 0 ? a - w->b : a - w->it[prev].e,
                          .x = e - a,
                          .scale = 1,
                          .prev = prev,
                          .lane = lane,
                          .comp = ev->op == CS_OP_GPU_KERNEL,
                          .inst = -1};
        if (prev >= 0 && a < w->it[prev].a)
            w->unsorted = 1;
        w->last[lane] = (int)w->n;
        w->n++;
        if (ev->op == CS_OP_GPU_NCCL && ev->request && p2p_item(P, r, ev->request))
            return -1;
        if (ev->op == CS_OP_GPU_NCCL && ev->request && ev->comm) {
            uint64_t *v = cs__map_get(&w->launch, (uint64_t)r, ev->request);
            uint64_t *bb = cs__map_get(&w->lbytes, (uint64_t)r, ev->request);
            int32_t cr = comm_rank(P->run, ev->comm, r);
            if (!v || cr < 0 || cs_op_info((uint16_t)*v)->kind != CS_KIND_NCOLL)
                continue;
            /* Only the launch's first kernel is its member. */
            uint64_t op = *v, by = bb ? *bb : 0;
            cs__map_del(&w->launch, (uint64_t)r, ev->request);
            cs__map_del(&w->lbytes, (uint64_t)r, ev->request);
            v = &op;
            bb = &by;
            int32_t x = inst_of(P, ev->comm, ev->seq, (uint16_t)*v);
            if (x < 0)
                continue;
            struct gin *g = &P->in[x];
            int32_t idx = cr;
            if (idx < 0 || idx >= g->n || g->who[idx] >= 0 || g->op != (uint16_t)*v)
                continue;
            if (*v >> 16)
                g->root = idx;
            if (bb && *bb > g->bytes)
                g->bytes = *bb;
            g->who[idx] = r;
            g->item[idx] = (int32_t)w->n - 1;
            g->pa[idx] = a;
            g->seen++;
            it->inst = x;
            it->idx = idx;
        }
    }
}

/* Each NCCL member's x (after the arrivals it waited for) and best-bandwidth factor. */
static void resolve(struct gp *P)
{
    for (size_t x = 0; x < P->nin; x++) {
        struct gin *g = &P->in[x];
        enum cs_op_pattern pat = cs_op_info(g->op)->pattern;
        if (g->seen != g->n) {
            for (int32_t i = 0; i < g->n; i++)
                if (g->who[i] >= 0) {
                    P->r[g->who[i]].it[g->item[i]].inst = -1;
                    P->cut++;
                }
            continue;
        }
        int64_t *arr = malloc((size_t)g->n * sizeof *arr);
        if (!arr)
            continue;
        for (int32_t i = 0; i < g->n; i++)
            arr[i] = (int64_t)llround(g->pa[i]);
        double t = 0;
        for (int32_t i = 0; i < g->n; i++) {
            int ok;
            struct gi *it = &P->r[g->who[i]].it[g->item[i]];
            double s = (double)cs__whatif_sync(pat, g->root, g->n, arr, NULL, i, &ok);
            if (s < it->a)
                s = it->a;
            it->x = it->e > s ? it->e - s : 0;
            if (it->x > t)
                t = it->x;
        }
        free(arr);
        int ci = cs__groups_comm(P->run, P->S, g->comm);
        int cls = ci < 0 ? -1 : cs__groups_scomm(P->S, ci)->cls;
        uint64_t *b = cs__map_get(&P->S->best, best_key(g->op, cls), g->bytes);
        double best = b && *b ? (double)(*b - 1) : t;
        double f = t > 0 && best < t ? best / t : 1;
        for (int32_t i = 0; i < g->n; i++)
            P->r[g->who[i]].it[g->item[i]].scale = f;
    }
}

static void factors(struct gp *P)
{
    int world = P->run->world;
    double *c = malloc(((size_t)world + 1) * sizeof *c);
    size_t m = 0;
    for (int r = 0; r < world; r++) {
        struct gr *w = &P->r[r];
        w->comp = 0;
        w->f = 1;
        for (size_t i = 0; i < w->n; i++)
            if (w->it[i].comp)
                w->comp += w->it[i].e - w->it[i].a;
        if (c && w->gpu && w->step >= 0)
            c[m++] = w->comp;
    }
    if (!c)
        return;
    double med = cs__whatif_median(c, m);
    free(c);
    for (int r = 0; r < world; r++)
        if (P->r[r].comp > 0)
            P->r[r].f = med / P->r[r].comp;
}

/* Free the window's collective instances (the array itself is kept for the next window). */
static void ins_clear(struct gp *P)
{
    for (size_t x = 0; x < P->nin; x++) {
        free(P->in[x].who);
        free(P->in[x].item);
        free(P->in[x].pa);
        free(P->in[x].pA);
        free(P->in[x].has);
    }
    P->nin = 0;
}

/* Replay the window in scenario sc; books the steps' replayed times. */
static void replay(struct gp *P, int sc)
{
    int world = P->run->world;
    for (size_t x = 0; x < P->nin; x++)
        memset(P->in[x].has, 0, (size_t)P->in[x].n);
    for (int r = 0; r < world; r++)
        for (size_t i = 0; i < P->r[r].n; i++)
            P->r[r].it[i].arrived = P->r[r].it[i].done = 0;
    for (;;) {
        int progress = 0, left = 0;
        for (int r = 0; r < world; r++) {
            struct gr *w = &P->r[r];
            /* the scenarios change the timed steps only: all begin the first one alike */
            int timed = w->step >= P->first && w->step < P->end;
            for (size_t i = 0; i < w->n; i++) {
                struct gi *it = &w->it[i];
                if (it->done)
                    continue;
                if (!it->arrived) {
                    if (it->prev >= 0 && !w->it[it->prev].done) {
                        left = 1;
                        continue;
                    }
                    it->A = (it->prev >= 0 ? w->it[it->prev].E : w->B[sc]) + it->gap;
                    it->arrived = 1;
                    progress = 1;
                    if (it->inst >= 0) {
                        P->in[it->inst].pA[it->idx] = it->A;
                        P->in[it->inst].has[it->idx] = 1;
                    }
                }
                double S = it->A, x = it->x;
                if (it->comp) {
                    if (sc == SC_NOSTRAG && timed)
                        x *= w->f;
                } else {
                    if (it->inst >= 0) {
                        struct gin *g = &P->in[it->inst];
                        int ok = 0;
                        if (!cs__grow((void **)&P->arr, &P->caparr, (size_t)g->n, sizeof *P->arr)) {
                            for (int32_t j = 0; j < g->n; j++)
                                P->arr[j] = (int64_t)llround(g->pA[j]);
                            double s = (double)cs__whatif_sync(cs_op_info(g->op)->pattern, g->root,
                                                               g->n, P->arr, g->has, it->idx, &ok);
                            if (ok && s > S)
                                S = s;
                        } else {
                            P->oom = 1;
                            ok = 1; /* without memory the member waits for nothing */
                        }
                        if (!ok) {
                            left = 1;
                            continue;
                        }
                    } else if (it->pn && !p2p_sync(P, w, it, &S)) {
                        left = 1;
                        continue;
                    }
                    if (sc == SC_OVERLAP && timed)
                        x = 0;
                    else if (sc == SC_BESTBW && timed && it->inst >= 0)
                        x *= it->scale;
                }
                it->E = S + x > it->A ? S + x : it->A;
                it->done = 1;
                progress = 1;
            }
        }
        if (!left)
            break;
        if (!progress) {
            /* A cycle (clock error): the earliest arrived, waiting NCCL item waits no more. */
            struct gi *cut = NULL;
            for (int r = 0; r < world; r++)
                for (size_t i = 0; i < P->r[r].n; i++) {
                    struct gi *it = &P->r[r].it[i];
                    if (it->arrived && !it->done && (it->inst >= 0 || it->pn) &&
                        (!cut || it->a < cut->a))
                        cut = it;
                }
            if (!cut)
                break;
            cut->inst = -1;
            cut->pn = 0;
            if (sc == 0)
                P->forced++;
        }
    }
    for (int r = 0; r < world; r++) {
        struct gr *w = &P->r[r];
        if (!w->gpu || w->step < 0 || !w->fresh)
            continue;
        double L = -INFINITY, Lr = -INFINITY;
        for (size_t i = 0; i < w->n; i++) {
            if (w->it[i].e > L)
                L = w->it[i].e;
            if (w->it[i].E > Lr)
                Lr = w->it[i].E;
        }
        double T = w->c - w->b;
        double end = w->n ? Lr + (w->c - L) : w->B[sc] + T;
        if (w->step >= P->first && w->step < P->end) {
            P->sum[sc][w->step] += end - w->B[sc];
            if (sc == 0)
                P->cnt[w->step]++;
        }
        w->B[sc] = end; /* the next step begins where this one ended (plus the gap, below) */
    }
}

void cs__whatif_gpu(struct cs__run *run, struct cs__steps *S, int first, int end, double measured_s,
                    struct cs_report_whatif *o)
{
    if (!S->gpu || !S->detect.mode || end <= first || !(measured_s > 0))
        return;
    for (int r = 0; r < run->world; r++)
        if (run->ranks[r].present && !S->r[r].gpu) {
            snprintf(o->note, sizeof o->note,
                     "the replay ran on host calls: some ranks have a GPU timeline and some not");
            return;
        }
    int world = run->world;
    struct gp P = {.run = run, .S = S, .first = first, .end = end};
    P.r = calloc((size_t)world + 1, sizeof *P.r);
    P.cnt = calloc((size_t)end + 1, sizeof *P.cnt);
    int bad = !P.r || !P.cnt;
    for (int sc = 0; sc < SC_N; sc++)
        bad |= !(P.sum[sc] = calloc((size_t)end + 1, sizeof *P.sum[sc]));
    int have = 0;
    for (int r = 0; r < world && !bad; r++) {
        struct cs__rank *rk = &run->ranks[r];
        P.r[r].gpu = rk->present;
        P.r[r].step = -1;
        P.r[r].done_reading = !rk->present;
        if (!rk->present)
            continue;
        cs_reader_rewind(rk->rd);
        if (!have || (double)rk->t_first < P.origin)
            P.origin = (double)rk->t_first;
        have = 1;
    }
    /* Windows in lockstep: step k of every rank, then k + 1. */
    while (!bad) {
        ins_clear(&P);
        cs__map_clear(&P.imap);
        cs__map_clear(&P.pmap);
        P.npe = 0;
        int any = 0;
        for (int r = 0; r < world && !bad; r++) {
            int was = P.r[r].step;
            double c_prev = P.r[r].c;
            bad |= read_window(&P, r) != 0 || relink(&P.r[r]) != 0;
            if (P.r[r].fresh) {
                /* A new step: its replayed begin keeps the measured gap after the last one. */
                for (int sc = 0; sc < SC_N; sc++)
                    P.r[r].B[sc] = was < 0 ? P.r[r].b : P.r[r].B[sc] + (P.r[r].b - c_prev);
            }
            any |= P.r[r].fresh || !P.r[r].done_reading;
        }
        if (bad)
            break;
        resolve(&P);
        p2p_resolve(&P);
        factors(&P);
        for (int sc = 0; sc < SC_N; sc++)
            replay(&P, sc);
        if (!any)
            break;
    }
    if (bad || P.oom) {
        snprintf(o->note, sizeof o->note, "out of memory for the GPU what-if replay");
    } else {
        if (cs__whatif_means(P.sum, P.cnt, first, end, measured_s, o)) {
            snprintf(o->note, sizeof o->note, "replayed on the GPU timelines");
            if (P.cut || P.forced || P.dropped)
                snprintf(o->note, sizeof o->note,
                         "replayed on the GPU timelines; %llu NCCL kernels had members outside"
                         " their step window, %llu dependency cycles were cut and %llu GPU"
                         " records came after their step's end was read: those keep their"
                         " measured times or are left out",
                         (unsigned long long)P.cut, (unsigned long long)P.forced,
                         (unsigned long long)P.dropped);
        }
    }
    ins_clear(&P);
    free(P.in);
    free(P.arr);
    cs__map_free(&P.imap);
    cs__map_free(&P.pmap);
    cs__map_free(&P.chmap);
    free(P.pe);
    if (P.r)
        for (int r = 0; r < world; r++) {
            free(P.r[r].it);
            free(P.r[r].lane);
            free(P.r[r].last);
            free(P.r[r].ord);
            cs__map_free(&P.r[r].launch);
            cs__map_free(&P.r[r].lbytes);
            for (size_t i = 0; i < P.r[r].p2pl.cap; i++)
                if (P.r[r].p2pl.slot[i].used) {
                    struct p2pl *L = (void *)(uintptr_t)P.r[r].p2pl.slot[i].v;
                    free(L->v);
                    free(L);
                }
            cs__map_free(&P.r[r].p2pl);
            cs__map_free(&P.r[r].p2pk);
            free(P.r[r].pl);
        }
    free(P.r);
    for (int sc = 0; sc < SC_N; sc++)
        free(P.sum[sc]);
    free(P.cnt);
    for (int r = 0; r < world; r++)
        if (run->ranks[r].present)
            cs_reader_rewind(run->ranks[r].rd);
}
