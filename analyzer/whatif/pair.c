/* The what-if replay's point-to-point pairing (whatif.c; the per-event part is inline in pair.h):
 * the j-th send from src to dst with a tag on a communicator matches the j-th receive at dst from
 * src, partners linked as the second of the two is read; a wait/test call depends on the requests
 * it completed; sends, receives and requests still waiting at the end of a window are carried into
 * the next ones, so the waits at point-to-point calls are measured over the whole run. */
#include <stdlib.h>

#include "pair.h"

/* The rank whose window holds item g (the windows are read in rank order: their offsets rise),
 * or -1. */
int32_t cs__wi_item_rank(const struct replay *P, int32_t g)
{
    int32_t lo = 0, hi = P->nread; /* the first rank whose window starts after g: in [lo, hi] */
    while (lo < hi) {
        int32_t m = lo + (hi - lo) / 2;
        if (P->w[m].off > (size_t)g)
            hi = m;
        else
            lo = m + 1;
    }
    for (int32_t r = lo - 1; r >= 0 && P->w[r].off <= (size_t)g; r--)
        if ((size_t)g < P->w[r].off + P->w[r].n)
            return r;
    return -1;
}

/* ---- waits across windows (struct half) ---- */

/* A new half (uninitialised but for next), or -1 out of memory. */
static int32_t half_new(struct replay *P)
{
    int32_t h = P->hfree;
    if (h >= 0) {
        P->hfree = P->hv[h].next;
    } else {
        if (P->nhv >= INT32_MAX || cs__grow((void **)&P->hv, &P->caphv, P->nhv + 1, sizeof *P->hv))
            return -1;
        h = (int32_t)P->nhv++;
    }
    P->hv[h].next = -1;
    return h;
}

/* Half h is done with when nothing refers to it any more: no channel, no request. */
void cs__wi_half_release(struct replay *P, int32_t h)
{
    struct half *H = &P->hv[h];
    if (H->queued || H->in_req)
        return;
    H->rec = -1;
    H->next = P->hfree;
    P->hfree = h;
}

/* Deferred completion d is complete: its wait, from its sync point to its latest partner. */
void cs__wi_defer_done(struct replay *P, int32_t d)
{
    struct defer *D = &P->dv[d];
    D->pending = 0;
    if (D->sp > D->s)
        cs__wi_p2p_book(P, D->rank, D->k, D->a, D->dim, D->sp - D->s, D->in_call, D->late);
    D->next = P->dfree;
    P->dfree = d;
}

/* A partner of deferred completion d arrived at pa on rank prank (for a request in dim). */
static void defer_partner(struct replay *P, int32_t d, double pa, int32_t prank, unsigned char dim)
{
    struct defer *D = &P->dv[d];
    if (D->pending <= 0)
        return;
    if (pa <= D->e && pa > D->sp) {
        D->sp = pa;
        D->late = prank;
        D->dim = dim;
    }
    if (--D->pending == 0)
        cs__wi_defer_done(P, d);
}

/* The carried half at the head of channel cc, taken off it (not released). */
static int32_t carried_pop(struct replay *P, struct wslot *cc)
{
    int32_t h = cc->head;
    struct half *H = &P->hv[h];
    cc->head = H->next;
    if (cc->head < 0) {
        cc->live = 0;
        P->ncch--;
    }
    H->queued = 0;
    P->pcut++;
    return h;
}

/* A blocking call of rank r over [a, e) in step k waited for its partner's arrival pa (rank
 * prank), unless the partner came before it or after it ended. */
static void blocking_wait(struct replay *P, int32_t r, int k, double a, double e, unsigned char dim,
                          double pa, int32_t prank)
{
    if (pa > a && pa <= e)
        cs__wi_p2p_book(P, r, k, a, dim, pa - a, 1, prank);
}

/* Carried half h's partner arrived at pa (rank prank): a blocking call waited for it; a
 * non-blocking one's completion does, now (deferred) or when its request completes (carried). */
static void carried_partner(struct replay *P, int32_t h, double pa, int32_t prank)
{
    struct half *H = &P->hv[h];
    if (H->blocking) {
        blocking_wait(P, H->rank, H->k, H->a, H->e, H->dim, pa, prank);
    } else if (H->rec >= 0) {
        defer_partner(P, H->rec, pa, prank, H->dim);
        H->rec = -1;
    } else {
        H->known = 1;
        H->pa = pa;
        H->prank = prank;
    }
}

/* Item g (of rank rg, read now)'s partner, carried from an earlier window, arrived at pa (rank
 * pr): a blocking call's wait, or the partner for its request's completion.  0, or -1 out of
 * memory. */
static int item_carried_partner(struct replay *P, int32_t g, int32_t rg, double pa, int32_t pr)
{
    struct item *it = &P->it[g];
    if (!it->nbp) {
        blocking_wait(P, rg, P->k, it->a, it->e, it->dim, pa, pr);
        return 0;
    }
    if (cs__grow((void **)&P->cpa, &P->capcpa, P->ncpa + 1, sizeof *P->cpa))
        return -1;
    P->cpa[P->ncpa] = (struct cpart){pa, pr};
    it->pg = -2 - (int32_t)P->ncpa++;
    return 0;
}

/* Item g (of rank rg, read now) is the partner of the carried half at the head of channel cc:
 * both sides' waits, as within a window (p2p_x, resolve); the replay does not link them.  0, or
 * -1 out of memory. */
int cs__wi_carried_match(struct replay *P, struct wslot *cc, int32_t g, int32_t rg)
{
    int32_t h = carried_pop(P, cc);
    double ha = P->hv[h].a;
    int32_t hr = P->hv[h].rank;
    carried_partner(P, h, P->it[g].a, rg);
    cs__wi_half_release(P, h);
    return item_carried_partner(P, g, rg, ha, hr);
}

/* The half of window item g (made once per window: P->gh_t), or -1 out of memory. */
static int32_t half_of(struct replay *P, int32_t g)
{
    int fresh;
    uint64_t *v = wt_put(&P->gh_t, (uint64_t)(uint32_t)g, 0, 0, &fresh);
    if (!v)
        return -1;
    if (!fresh)
        return (int32_t)(*v - 1);
    int32_t h = half_new(P);
    if (h < 0)
        return -1;
    const struct item *it = &P->it[g];
    struct half *H = &P->hv[h];
    *H = (struct half){.a = it->a,
                       .e = it->e,
                       .rank = cs__wi_item_rank(P, g),
                       .prank = -1,
                       .rec = -1,
                       .k = P->k,
                       .next = -1,
                       .dim = it->dim,
                       .blocking = !it->nbp};
    if (it->pg >= 0) {
        H->known = 1;
        H->pa = P->it[it->pg].a;
        H->prank = cs__wi_item_rank(P, it->pg);
    } else if (it->pg <= -2) {
        H->known = 1;
        H->pa = P->cpa[-2 - it->pg].a;
        H->prank = P->cpa[-2 - it->pg].rank;
    }
    *v = (uint64_t)h + 1;
    return h;
}

/* Half h (a send if send) waits at the tail of the carried channel (comm, tag, sd).  0, or -1
 * out of memory. */
static int carried_queue(struct replay *P, uint64_t comm, uint32_t tag, uint64_t sd, int send,
                         int32_t h)
{
    int fresh;
    struct wslot *cc = wt_putslot(&P->cch_t, comm, tag, sd, &fresh);
    if (!cc)
        return -1;
    if (fresh) {
        P->ncch++;
        cc->v = (uint64_t)send;
        cc->head = h;
    } else {
        P->hv[cc->tail].next = h;
    }
    cc->tail = h;
    P->hv[h].next = -1;
    P->hv[h].queued = 1;
    return 0;
}

/* The end of a window (after resolve): carry the requests still open and the sends and
 * receives still waiting for partners into the next windows.  0, or -1 out of memory. */
int cs__wi_carry(struct replay *P)
{
    cs__wt_clear(&P->gh_t);
    /* open requests of Isends / Irecvs (an MPI_ANY_SOURCE receive, not paired yet, is paired
     * at its completion record: anysrc_carried) */
    for (size_t i = 0; P->nreq_p2p && i < P->req_t.cap; i++) {
        const struct wslot *q = &P->req_t.s[i];
        if (q->stamp != P->req_t.stamp || !q->live)
            continue;
        uint64_t v = q->v - 1;
        if (!(v >> 63))
            continue;
        int32_t h = half_of(P, (int32_t)(uint32_t)v);
        if (h < 0)
            return -1;
        P->hv[h].anysrc = (v & ANYSRC_BIT) != 0;
        int fresh;
        uint64_t *c = wt_put(&P->creq_t, q->k1, q->k2, 0, &fresh);
        if (!c)
            return -1;
        if (fresh)
            P->ncreq++;
        else if (*c) /* a handle reused while its request is open: keep the newer */
            P->hv[*c - 1].in_req = 0, cs__wi_half_release(P, (int32_t)(*c - 1));
        P->hv[h].in_req = 1;
        *c = (uint64_t)h + 1;
    }
    /* sends and receives still waiting, in their channels' order, behind the halves carried
     * before (those wait on the same side: the other side pairs with them first) */
    for (size_t i = 0; i < P->nnd; i++) {
        const struct wnode *n = &P->nd[i];
        if (n->item < 0)
            continue;
        int32_t h = half_of(P, n->item);
        if (h < 0 || carried_queue(P, n->comm, (uint32_t)n->tag, n->sd, n->send, h))
            return -1;
    }
    /* completions deferred for those */
    for (size_t i = 0; i < P->nlk; i++) {
        const struct wslot *v = wt_get(&P->gh_t, (uint64_t)(uint32_t)P->lk[i].item, 0, 0);
        if (v)
            P->hv[v->v - 1].rec = P->lk[i].rec;
    }
    return 0;
}

/* The step budget's dimension of communicator comm (as steps.c books the calls on it). */
unsigned char cs__wi_p2p_dim(struct replay *P, uint64_t comm)
{
    return (unsigned char)cs__steps_dim(P->S, cs__groups_comm_cached(P->run, P->S, comm));
}

int cs__wi_link_nbp(struct replay *P, int r, struct item *it, const struct cs_event *ev)
{
    int send = ev->op == CS_OP_ISEND;
    int32_t src = send ? r : ev->peer, dst = send ? ev->peer : r;
    int32_t g = (int32_t)(it - P->it);
    it->nbp = 1;
    it->dim = cs__wi_p2p_dim(P, ev->comm);
    it->bytes = (double)(send ? ev->bytes : ev->bytes_recv); /* receive: the posted size */
    if (cs__wi_pair_p2p(P, g, ev->comm, ev->aux, src, dst, send))
        return -1;
    int fresh;
    uint64_t *q = wt_put(&P->req_t, (uint64_t)r, ev->request, 0, &fresh);
    if (!q)
        return -1;
    *q = ((uint64_t)1 << 63 | (uint32_t)g) + 1;
    P->nreq_p2p++;
    return 0;
}

int cs__wi_anysrc_post(struct replay *P, int r, struct item *it, const struct cs_event *ev)
{
    int fresh;
    uint64_t *q = wt_put(&P->req_t, (uint64_t)r, ev->request, 0, &fresh);
    if (!q)
        return -1;
    it->nbp = 1;
    it->dim = cs__wi_p2p_dim(P, ev->comm);
    it->bytes = (double)ev->bytes_recv; /* the posted size */
    *q = ((uint64_t)1 << 63 | ANYSRC_BIT | (uint32_t)(it - P->it)) + 1;
    P->nreq_p2p++;
    return 0;
}

/* The completion record ev (rank r) of an MPI_ANY_SOURCE receive carried from an earlier
 * window (half h): paired now by the status' source and tag, as anysrc_link pairs one within a
 * window, with the first send waiting on that channel -- carried from an earlier window too, or
 * read in this one --; with none, the receive waits in the carried channels for its send.
 * 0, or -1 out of memory. */
static int anysrc_carried(struct replay *P, int r, int32_t h, const struct cs_event *ev)
{
    P->hv[h].anysrc = 0;
    if (ev->peer < 0 || ev->peer >= P->world || ev->aux < 0 ||
        (ev->flags & (CS_EV_PROC_NULL | CS_EV_CANCELLED | CS_EV_ERROR)))
        return 0;
    uint64_t sd = (uint64_t)(uint32_t)ev->peer << 32 | (uint32_t)r;
    uint32_t tag = (uint32_t)ev->aux;
    struct wslot *cc = P->ncch ? wt_get(&P->cch_t, ev->comm, tag, sd) : NULL;
    if (cc && (int)cc->v == 1) { /* a send carried from an earlier window */
        int32_t s = carried_pop(P, cc);
        carried_partner(P, s, P->hv[h].a, r);
        carried_partner(P, h, P->hv[s].a, P->hv[s].rank);
        cs__wi_half_release(P, s);
        return 0;
    }
    struct wslot *c = cc ? NULL : wt_get(&P->chan_t, ev->comm, tag, sd);
    if (c && (uint32_t)c->v > (uint32_t)(c->v >> 32)) { /* a send of this window, waiting */
        int32_t og = chan_pop(P, c), orank = cs__wi_item_rank(P, og);
        c->v += (uint64_t)1 << 32; /* one more receive on the channel */
        P->pcut++;
        carried_partner(P, h, P->it[og].a, orank);
        return item_carried_partner(P, og, orank, P->hv[h].a, r);
    }
    /* no send yet: wait for it in the carried channels, behind the receives waiting there */
    return carried_queue(P, ev->comm, tag, sd, 0, h);
}

/* done_record for a request carried from an earlier window. */
int cs__wi_done_carried(struct replay *P, int r, struct wrank *w, const struct cs_event *ev)
{
    struct wslot *q = wt_get(&P->creq_t, (uint64_t)r, ev->request, 0);
    if (!q)
        return 0;
    int32_t h = (int32_t)(q->v - 1);
    q->live = 0;
    P->ncreq--;
    if (P->hv[h].anysrc && anysrc_carried(P, r, h, ev))
        return -1;
    /* in_req stays set until resolve has read the half (through the dependency) */
    int rc = cs__wi_done_dep(P, r, w, ev, (struct wdep){DEP_CARRY, h});
    if (rc <= 0) {
        P->hv[h].in_req = 0;
        cs__wi_half_release(P, h);
    }
    return rc < 0 ? -1 : 0;
}
