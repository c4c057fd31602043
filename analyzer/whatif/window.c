/* The what-if replay's window reader (whatif.c): every rank's events of one step window become
 * items in program order, collectives become members of their instances (by communicator and
 * sequence number), point-to-point calls are paired as they are read (pair.c). */
#include <math.h>
#include <stdlib.h>

#include "pair.h"

/* The size of communicator id (0 unknown) and its class for the best transfer times (-1
 * unknown), each asked once (P->comm_t). */
static int32_t comm_size(struct replay *P, uint64_t id)
{
    int fresh;
    uint64_t *v = wt_put(&P->comm_t, id, 0, 0, &fresh);
    if (v && (uint32_t)*v)
        return (int32_t)((uint32_t)*v - 1);
    const struct cs__comm *c = cs__comm_get(P->run, id);
    int32_t n = c && c->size > 0 ? c->size : 0;
    if (v)
        *v |= (uint32_t)n + 1;
    return n;
}

/* A new instance of (comm, seq) for the window, its slot *v in P->inst_t; -1 unusable (*v stays
 * 0) or out of memory. */
static int32_t inst_new(struct replay *P, const struct cs_event *ev, uint64_t *v)
{
    int32_t n = comm_size(P, ev->comm);
    if (n < 2 || cs__grow((void **)&P->in, &P->capin, P->nin + 1, sizeof *P->in) ||
        cs__grow((void **)&P->mem, &P->cappool, P->npool + (size_t)n, sizeof *P->mem))
        return -1;
    struct winst *w = &P->in[P->nin];
    w->comm = ev->comm;
    w->bytes = 0;
    w->op = ev->op;
    w->pat = ev->op < CS_OP_MAX ? P->pat[ev->op] : (unsigned char)cs_op_info(ev->op)->pattern;
    w->n = n;
    w->root = -1;
    w->seen = 0;
    w->amax = -HUGE_VAL;
    w->broken = 0;
    w->off = P->npool;
    w->narr = 0;
    w->all_known = 0;
    for (int32_t i = 0; i < n; i++)
        P->mem[P->npool + (size_t)i] = -1;
    P->npool += (size_t)n;
    *v = ++P->nin;
    return (int32_t)P->nin - 1;
}

/* The instance of (comm, seq) in the window, created when new; -1 out of memory or unusable. */
static inline int32_t inst_of(struct replay *P, const struct cs_event *ev)
{
    int fresh;
    uint64_t *v = wt_put(&P->inst_t, ev->comm, ev->seq, 0, &fresh);
    if (!v)
        return -1;
    return fresh ? inst_new(P, ev, v) : (int32_t)*v - 1;
}

/* The directory of communicator id (index in P->dir), created when new; -1 out of memory. */
static int32_t dir_of(struct replay *P, uint64_t id)
{
    int fresh;
    uint64_t *v = wt_put(&P->dir_t, id, 0, 0, &fresh);
    if (!v)
        return -1;
    if (fresh) {
        if (cs__grow((void **)&P->dir, &P->capdir, P->ndir + 1, sizeof *P->dir))
            return -1;
        P->dir[P->ndir] = (struct wdir){0};
        *v = P->ndir++;
    }
    return (int32_t)*v;
}

/* inst_of() through the communicator's directory d (NULL none). */
static inline int32_t inst_in(struct replay *P, struct wdir *d, const struct cs_event *ev)
{
    if (!d)
        return inst_of(P, ev);
    if (d->stamp != P->stamp) {
        d->stamp = P->stamp;
        d->n = 0;
    }
    uint32_t i = ev->seq - d->base;
    if (i < d->n)
        return d->inst[i];
    int32_t x = inst_of(P, ev);
    if (!d->n)
        d->base = ev->seq;
    if (ev->seq == d->base + d->n &&
        !cs__grow((void **)&d->inst, &d->cap, d->n + 1, sizeof *d->inst))
        d->inst[d->n++] = x;
    return x;
}

/* A collective event ev of rank r (item it): its instance member, and the request of a
 * non-blocking one.  0, or -1 out of memory. */
static int coll_item(struct replay *P, int r, struct wrank *w, struct item *it,
                     const struct cs_event *ev, unsigned f)
{
    /* The rank's comm rank: its collectives cycle over a few communicators. */
    struct wcc *cc = &w->cc[(ev->comm ^ (ev->comm >> 32)) & 3];
    if (!cc->ok || cc->id != ev->comm) {
        uint64_t *cr = cs__map_get(&P->run->my_rank, ev->comm, (uint64_t)r);
        cc->id = ev->comm;
        cc->idx = cr ? (int32_t)*cr - 1 : INT32_MIN;
        cc->dir = dir_of(P, ev->comm);
        cc->ok = 1;
    }
    int32_t x = inst_in(P, cc->dir >= 0 ? &P->dir[cc->dir] : NULL, ev);
    if (x < 0 || cc->idx == INT32_MIN)
        return 0;
    struct winst *in = &P->in[x];
    int32_t idx = cc->idx;
    if (idx < 0 || idx >= in->n || P->mem[in->off + (size_t)idx] >= 0 || in->op != ev->op) {
        in->broken = 1;
        return 0;
    }
    if (ev->flags & CS_EV_ROOT)
        in->root = idx;
    P->mem[in->off + (size_t)idx] = (int32_t)(it - P->it);
    uint64_t by = ev->bytes > ev->bytes_recv ? ev->bytes : ev->bytes_recv;
    if (by > in->bytes)
        in->bytes = by;
    in->seen++;
    if (it->a > in->amax)
        in->amax = it->a;
    it->inst = x;
    it->idx = idx;
    it->wk = W_INST;
    if (f & F_ICOLL) {
        int fresh;
        uint64_t *q = wt_put(&P->req_t, (uint64_t)r, ev->request, 0, &fresh);
        if (!q)
            return -1;
        *q = ((uint64_t)(uint32_t)x << 32 | (uint32_t)idx) + 1;
        it->init = 1;
        it->wk = W_NONE;
    }
    return 0;
}

static int nbp_linkable(const struct replay *P, const struct cs_event *ev)
{
    return (ev->op == CS_OP_ISEND || ev->op == CS_OP_IRECV) && ev->peer >= 0 &&
           ev->peer < P->world && ev->aux >= 0 &&
           !(ev->flags & (CS_EV_PROC_NULL | CS_EV_ANY_SOURCE));
}

/* MPI_Irecv from MPI_ANY_SOURCE (or with MPI_ANY_TAG): its partner is known only from its
 * `complete` record (the status's source in `peer`, its tag in `aux`).  The initiation is
 * remembered with bit 62 set; at the record it is paired like an Irecv posted to that source with
 * that tag (in the order of completion among such receives). */
static int anysrc_irecv(const struct replay *P, const struct cs_event *ev)
{
    return ev->op == CS_OP_IRECV && ev->request && !(ev->flags & CS_EV_PROC_NULL) &&
           ((ev->flags & CS_EV_ANY_SOURCE) || ev->aux < 0) && (ev->peer < P->world);
}

/* MPI_Sendrecv / MPI_Sendrecv_replace (docs/metrics.md, "What-if"): a send and a receive, then
 * the wait for both.  The call becomes two items at its arrival that wait for nothing, linked to
 * their partners like an Isend and an Irecv (the send half by (comm, send tag, this rank, dest),
 * the receive half by (comm, the received message's tag, its source, this rank), in order), and
 * the call itself as the completion of both.  The receive side is known from traces that record
 * it (seq = source + 1, request = tag + 1; docs/trace-format.md). */
static int sr_half(struct replay *P, int r, struct wrank *w, const struct cs_event *ev, double a,
                   double e, int send)
{
    if (cs__grow((void **)&P->dep, &P->capdep, P->ndep + 1, sizeof *P->dep))
        return -1;
    struct item *it = add_item(P, w, a, a, send ? CS_OP_ISEND : CS_OP_IRECV, 1, 0);
    if (!it)
        return -1;
    it->nbp = 1;
    it->dim = cs__wi_p2p_dim(P, ev->comm);
    if (!send) { /* the receive half completes with the call */
        it->done = e;
        it->bytes = (double)ev->bytes_recv;
    }
    int32_t src = send ? r : (int32_t)ev->seq - 1, dst = send ? ev->peer : r;
    int32_t tag = send ? ev->aux : (int32_t)(ev->request - 1);
    int32_t g = (int32_t)(P->nit - 1);
    if (cs__wi_pair_p2p(P, g, ev->comm, tag, src, dst, send))
        return -1;
    P->dep[P->ndep++] = (struct wdep){DEP_P2P, g};
    return 0;
}

/* The halves of a Sendrecv event before its item; *doff, *dn: their dependencies (dn 0: the call
 * is not linked).  0, or -1 out of memory. */
static int sr_halves(struct replay *P, int r, struct wrank *w, const struct cs_event *ev, double a,
                     double e, int32_t *doff, int32_t *dn)
{
    *dn = 0;
    if (ev->flags & CS_EV_ERROR)
        return 0;
    int send =
        ev->peer >= 0 && ev->peer < P->world && !(ev->flags & CS_EV_PROC_NULL) && ev->aux >= 0;
    int recv = ev->seq > 0 && ev->seq <= (uint32_t)P->world && ev->request > 0 &&
               ev->request <= (uint64_t)INT32_MAX + 1;
    if (!send && !recv)
        return 0;
    *doff = (int32_t)P->ndep;
    if ((send && sr_half(P, r, w, ev, a, e, 1)) || (recv && sr_half(P, r, w, ev, a, e, 0)))
        return -1;
    *dn = send + recv;
    return 0;
}

/* Read rank r's events of the next window into P->it.  first_window: the events before the
 * first step boundary.  Point-to-point partners are linked as they are read (the earlier of the
 * two is in this window already). */
__attribute__((noinline)) int cs__wi_read_window(struct replay *P, int r, int first_window)
{
    struct wrank *w = &P->w[r];
    struct cs__rank *rk = &P->run->ranks[r];
    w->off = P->nit;
    w->n = 0;
    w->next_gap = 0;
    w->comp = 0;
    if (w->done)
        return 0;
    const struct cs_event *ev = w->peek;
    int was_peek = ev != NULL; /* ev is the boundary event that ended the last window */
    w->peek = NULL;
    /* The stream is read a batch of contiguous events at a time (a whole block of a one-thread
     * file): a pointer step per event instead of a call. */
    const struct cs_event *bp = w->bp, *be = w->be;
    const size_t lim = P->cap_n ? P->cap_n : SIZE_MAX; /* (cap_n >= 16: a window's first item
                                                        * is never cut off) */
    int rc = 0;
    for (;; was_peek = 0) {
        if (!was_peek) {
            if (bp == be) {
                size_t n = cs_reader_next_batch(rk->rd, &bp);
                if (!n) {
                    w->done = 1;
                    break;
                }
                be = bp + n;
            }
            ev = bp++;
            /* Many files are read in turn: too many streams for the hardware prefetcher. */
            __builtin_prefetch(bp + 8);
        }
        unsigned f = flags_of(P, ev->op);
        if (f & (F_GPU | F_DONE)) {
            if ((f & F_DONE) && cs__wi_done_record(P, r, w, ev))
                goto fail;
            continue;
        }
        if (__builtin_expect(w->n >= lim, 0)) {
            w->peek = ev; /* no steps: windows of at most cap_n items a rank */
            break;
        }
        int64_t ta, te;
        map_event(w, &rk->clk, ev, &ta, &te);
        double a = (double)ta - P->origin;
        double e = (double)te - P->origin;
        if (e < a)
            e = a;
        int b = 0;
        int32_t sr_off = 0, sr_n = 0;
        if (__builtin_expect(was_peek || !w->started || (f & (F_BOP | F_SR)), 0)) {
            if (!w->started) { /* the rank's replayed clock starts at its first event */
                w->started = 1;
                w->prev_e = a;
                for (int sc = 0; sc < SC_N; sc++)
                    LANE(w->R, sc) = a;
            }
            if (was_peek) {
                b = 1;
            } else if (f & F_BOP) {
                enum cs_op_kind k = ev->op < CS_OP_MAX ? (enum cs_op_kind)P->kind[ev->op]
                                                       : cs_op_info(ev->op)->kind;
                b = cs__steps_boundary_of(P->run, P->S, ev, k, &w->occ);
                if (b == 1 && (first_window || w->n > 0)) {
                    w->peek = ev;
                    w->next_gap = w->ended ? 0 : a - w->prev_e;
                    break;
                }
            }
            if ((f & F_SR) && sr_halves(P, r, w, ev, a, e, &sr_off, &sr_n))
                goto fail;
        }
        struct item *it = add_item(P, w, a, e, ev->op, (f & F_COMM) != 0, b);
        if (!it)
            goto fail;
        if ((f & F_FIN) && !w->fin_seen) {
            w->fin_seen = 1;
            if (!it->bnd)
                it->bnd = 2;
        }
        if (f & F_COLL) {
            if (coll_item(P, r, w, it, ev, f))
                goto fail;
        } else if ((f & (F_SEND | F_RECV)) && ev->peer >= 0 && ev->peer < P->world &&
                   !(ev->flags & CS_EV_PROC_NULL)) {
            /* The j-th send from s to d with a tag matches the j-th receive at d from s. */
            int send = (f & F_SEND) != 0;
            int32_t src = send ? r : ev->peer, dst = send ? ev->peer : r;
            it->dim = cs__wi_p2p_dim(P, ev->comm);
            it->bytes = (double)(send ? ev->bytes : ev->bytes_recv);
            if (cs__wi_pair_p2p(P, (int32_t)(P->nit - 1), ev->comm, ev->aux, src, dst, send))
                goto fail;
        } else if ((f & F_IP2P) && nbp_linkable(P, ev)) {
            if (cs__wi_link_nbp(P, r, it, ev))
                goto fail;
        } else if ((f & F_IP2P) && anysrc_irecv(P, ev)) {
            if (cs__wi_anysrc_post(P, r, it, ev))
                goto fail;
        } else if (sr_n) {
            it->doff = sr_off;
            it->dn = sr_n;
            it->wk = W_DEP;
            if (add_cd(P, P->nit - 1))
                goto fail;
        }
    }
out:
    w->bp = bp;
    w->be = be;
    return rc;
fail:
    rc = -1;
    goto out;
}
