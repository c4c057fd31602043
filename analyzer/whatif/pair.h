/* The what-if replay's point-to-point pairing within a window and the completion records'
 * dependencies (pair.c has the rest: the waits carried across windows), inline in the window
 * reader, which calls them for every point-to-point event and completion record it reads. */
#ifndef COMMSCOPE_ANALYZER_PAIR_H
#define COMMSCOPE_ANALYZER_PAIR_H

#include "passes.h"
#include "replay.h"

/* Rank r waited w (> 0; host ranks only) from its call's arrival a, in window k's step, for the
 * point-to-point partner on rank `cause` (-1 unknown), in dimension dim: in the step budget
 * (timed steps), over the run (in a point-to-point call, or not: in a wait/test call), and in
 * the report's heat maps. */
static inline void cs__wi_p2p_book(struct replay *P, int32_t r, int k, double a, unsigned char dim,
                                   double w, int in_call, int32_t cause)
{
    if (!(w > 0) || P->S->r[r].gpu)
        return;
    if (P->prun) {
        P->prun[r] += w;
        if (in_call)
            P->pcall[r] += w;
        if (cause >= 0)
            P->pcause[cause] += w;
        cs__analyze_fact(P->run, &(struct cs__fact){.kind = CS__FACT_WAIT,
                                                    .rank = r,
                                                    .step = k,
                                                    .t = (int64_t)(a + P->origin),
                                                    .ns = w});
    }
    if (P->pwb && k >= P->first && k < P->end)
        P->pwb[(size_t)r * CS_DIM_N + dim] += w;
}

/* A point-to-point item's x once its partner o is known: the receive waits for the send, the
 * send for the receive only when it ended after the receive began (the dependencies the
 * measured run can have had); an Isend / Irecv (nbp) waits for nothing itself.  The time from
 * its arrival to the partner's is the step budget's point-to-point waiting of its rank r (in
 * P->pw: timed steps of host ranks; completion calls: resolve). */
static inline void p2p_x(struct replay *P, struct item *it, const struct item *o, int32_t r)
{
    if (it->nbp)
        return;
    if (o->a > it->e) {
        it->pg = -1;
        return;
    }
    double s = o->a > it->a ? o->a : it->a;
    it->x = it->e - s;
    it->wk = W_PG;
    if (s > it->a)
        cs__wi_p2p_book(P, r, P->k, it->a, it->dim, s - it->a, 1,
                        cs__wi_item_rank(P, (int32_t)(o - P->it)));
}

/* A matched pair's transfer (docs/metrics.md, "Point-to-point bandwidth"): receive rv (on rank
 * r) of sd's message, from the later of the two begins to the receive's completion -- a blocking
 * receive's end; a non-blocking one's (MPI_Irecv, MPI_Sendrecv's receive half) the end of the
 * call that completed it --, by the message size's bucket, beside the send call's duration (none
 * for MPI_Sendrecv's send half) and the receive's, from its post to its completion.  A non-blocking
 * receive paired before it completed is counted not measured until it completes (nbp_recv_done). */
static inline void p2p_transfer(struct replay *P, struct item *rv, const struct item *sd, int32_t r)
{
    if (r < 0 || r >= P->world || P->S->r[r].gpu)
        return;
    if (rv->nbp && rv->done < 0) {
        P->S->xfer_nb++;
        rv->xp = 1;
        return;
    }
    double b = rv->bytes, end = rv->nbp ? rv->done : rv->e;
    double t0 = sd->a > rv->a ? sd->a : rv->a;
    struct cs__xfer *x = &P->S->xfer[cs__log2_bucket((uint64_t)b, CS_REPORT_P2P_BUCKETS)];
    x->pairs++;
    x->bytes += b;
    x->xfer_ns += end > t0 ? end - t0 : 0;
    if (sd->e > sd->a) { /* (a half of MPI_Sendrecv has none of its own) */
        x->send_ns += sd->e - sd->a;
        x->send_bytes += b;
    }
    x->recv_ns += end - rv->a;
}

/* Non-blocking receive g of rank r (an item of this window) completed at te (record ev): its
 * transfer is measured now if it was paired before. */
static inline void nbp_recv_done(struct replay *P, int r, const struct wrank *w, uint32_t g,
                                 const struct cs_event *ev, double te)
{
    if (g < w->off || g >= w->off + w->n)
        return;
    struct item *it = &P->it[g];
    if (it->op != CS_OP_IRECV || (ev->flags & (CS_EV_PROC_NULL | CS_EV_CANCELLED | CS_EV_ERROR)))
        return;
    it->done = te;
    if (ev->bytes_recv) /* the bytes received (else the posted size stays) */
        it->bytes = (double)ev->bytes_recv;
    if (it->xp && it->pg >= 0) {
        it->xp = 0;
        P->S->xfer_nb--;
        p2p_transfer(P, it, &P->it[it->pg], r);
    }
}

/* Point-to-point pairing: item g is the next send (or receive) on the channel (comm, tag, src,
 * dst); linked both ways with its partner when that was read before it.  0, or -1 out of
 * memory.  Inline: the window reader calls it for every point-to-point event. */
static inline __attribute__((always_inline)) int cs__wi_pair_p2p(struct replay *P, int32_t g,
                                                                 uint64_t comm, int32_t tag,
                                                                 int32_t src, int32_t dst, int send)
{
    uint64_t sd = (uint64_t)(uint32_t)src << 32 | (uint32_t)dst;
    if (P->ncch) { /* partners carried from earlier windows come first */
        struct wslot *cc = wt_get(&P->cch_t, comm, (uint32_t)tag, sd);
        if (cc && (int)cc->v != send)
            return cs__wi_carried_match(P, cc, g, send ? src : dst);
    }
    int fresh;
    struct wslot *c = wt_putslot(&P->chan_t, comm, (uint32_t)tag, sd, &fresh);
    if (!c)
        return -1;
    uint32_t ns = (uint32_t)c->v, nr = (uint32_t)(c->v >> 32);
    if (send ? ns < nr : nr < ns) {
        /* the partner is the first waiting item of the other side */
        int32_t og = chan_pop(P, c);
        struct item *it = &P->it[g], *o = &P->it[og];
        it->pg = og;
        p2p_x(P, it, o, send ? src : dst);
        p2p_transfer(P, send ? o : it, send ? it : o, dst);
        if (o->pg < 0) {
            o->pg = g;
            p2p_x(P, o, it, send ? dst : src);
        }
    } else {
        if (P->nnd == P->capnd && cs__grow((void **)&P->nd, &P->capnd, P->nnd + 1, sizeof *P->nd))
            return -1;
        P->nd[P->nnd] = (struct wnode){g, -1, comm, sd, tag, send};
        if (c->head < 0)
            c->head = (int32_t)P->nnd;
        else
            P->nd[c->tail].next = (int32_t)P->nnd;
        c->tail = (int32_t)P->nnd++;
    }
    c->v += send ? 1 : (uint64_t)1 << 32;
    return 0;
}

/* The complete record ev of such a receive (initiation item g of rank r): pair it. */
static inline int anysrc_link(struct replay *P, int r, const struct wrank *w, uint32_t g,
                              const struct cs_event *ev)
{
    if (g < w->off || g >= w->off + w->n || ev->peer < 0 || ev->peer >= P->world || ev->aux < 0 ||
        (ev->flags & (CS_EV_PROC_NULL | CS_EV_CANCELLED | CS_EV_ERROR)))
        return 0;
    return cs__wi_pair_p2p(P, (int32_t)g, ev->comm, ev->aux, ev->peer, r, 0);
}

/* Dependency d of the completion call just before record ev (rank r), when that call is a
 * wait/test call ending with the record and its dependencies are the last ones: 1 added, 0 not,
 * -1 out of memory. */
static inline __attribute__((always_inline)) int
cs__wi_done_dep(struct replay *P, int r, struct wrank *w, const struct cs_event *ev, struct wdep d)
{
    if (!w->n)
        return 0;
    struct item *last = &P->it[P->nit - 1];
    if (!(flags_of(P, last->op) & F_WAIT))
        return 0;
    double te = (double)map_t(w, &P->run->ranks[r].clk, ev->t_end) - P->origin;
    if (te != last->e || (last->dn && (size_t)(last->doff + last->dn) != P->ndep) ||
        cs__grow((void **)&P->dep, &P->capdep, P->ndep + 1, sizeof *P->dep))
        return 0;
    if (!last->dn) {
        if (add_cd(P, P->nit - 1))
            return -1;
        last->doff = (int32_t)P->ndep;
    }
    last->dn++;
    last->wk = W_DEP;
    P->dep[P->ndep++] = d;
    return 1;
}

/* A request completed (record ev of rank r): the completion call just before it completed it,
 * a dependency of that call.  0, or -1 out of memory.  Inline: the window reader calls it for
 * every completion record. */
static inline __attribute__((always_inline)) int
cs__wi_done_record(struct replay *P, int r, struct wrank *w, const struct cs_event *ev)
{
    struct wslot *q = wt_get(&P->req_t, (uint64_t)r, ev->request, 0);
    if (!q)
        return P->ncreq ? cs__wi_done_carried(P, r, w, ev) : 0;
    uint64_t v = q->v - 1;
    q->live = 0;
    if (v >> 63 && P->nreq_p2p)
        P->nreq_p2p--;
    if (v >> 63 && (v & ANYSRC_BIT)) {
        v &= ~ANYSRC_BIT;
        if (anysrc_link(P, r, w, (uint32_t)v, ev))
            return -1;
    }
    if (v >> 63)
        nbp_recv_done(P, r, w, (uint32_t)v, ev,
                      (double)map_t(w, &P->run->ranks[r].clk, ev->t_end) - P->origin);
    int rc = cs__wi_done_dep(P, r, w, ev,
                             v >> 63 /* a non-blocking send or receive: its initiation item */
                                 ? (struct wdep){DEP_P2P, (int32_t)(uint32_t)v}
                                 : (struct wdep){(int32_t)(v >> 32), (int32_t)(uint32_t)v});
    return rc < 0 ? -1 : 0;
}

#endif
