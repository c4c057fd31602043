/* The what-if replay proper (whatif.c): resolve a window's dependencies (collective members' sync
 * points and best-bandwidth factors, completion calls), then replay it in the four scenarios side
 * by side (lanes.h), step by step. */
#include <math.h>
#include <stdlib.h>

#include "pair.h"

static int comm_cls(struct replay *P, uint64_t id)
{
    int fresh;
    uint64_t *v = wt_put(&P->comm_t, id, 0, 0, &fresh);
    if (v && *v >> 32)
        return (int)(*v >> 32) - 2;
    int ci = cs__groups_comm(P->run, P->S, id);
    int cls = ci < 0 ? -1 : cs__groups_scomm(P->S, ci)->cls;
    if (v)
        *v |= (uint64_t)(uint32_t)(cls + 2) << 32;
    return cls;
}

/* S->best's value for (op, class, bytes) (0 none), looked up once. */
static uint64_t best_of(struct replay *P, uint16_t op, int cls, uint64_t bytes)
{
    int fresh;
    uint64_t key = best_key(op, cls);
    uint64_t *v = wt_put(&P->best_t, key, bytes, 0, &fresh);
    if (v && !fresh)
        return *v;
    const uint64_t *b = cs__map_get(&P->S->best, key, bytes);
    uint64_t r = b ? *b : 0;
    if (v)
        *v = r;
    return r;
}

/* The measured sync point of member i of complete instance in (cs__whatif_sync over the rounded
 * measured arrivals): the rounded latest measured arrival of those it waits for and its own. */
static inline int64_t measured_sync(const struct replay *P, const struct winst *in, int32_t i)
{
    const int32_t *m = P->mem + in->off;
    if (in->pat == CS_PAT_NXN || (in->pat == CS_PAT_NTO1 && i == in->root))
        return in->pa_all;
    int32_t lo = 0, hi = -1;
    if (in->pat == CS_PAT_PREFIX)
        hi = i;
    else if (in->pat == CS_PAT_1TON && in->root >= 0 && i != in->root)
        lo = hi = in->root;
    double s = P->it[m[i]].a;
    for (int32_t j = lo; j <= hi; j++)
        if (P->it[m[j]].a > s)
            s = P->it[m[j]].a;
    return round_ns(s);
}

/* Each collective member's x and best-bandwidth factor, cut instances, and the completion
 * calls' x (point-to-point links were resolved as they were read). */
__attribute__((noinline)) void cs__wi_resolve(struct replay *P)
{
    for (size_t x = 0; x < P->nin; x++) {
        struct winst *in = &P->in[x];
        const int32_t *m = P->mem + in->off;
        if (in->broken || in->seen != in->n) {
            /* A member outside this window (or a broken sequence): the members present keep
             * their measured times. */
            for (int32_t i = 0; i < in->n; i++)
                if (m[i] >= 0) {
                    P->it[m[i]].inst = -1;
                    P->it[m[i]].wk = W_NONE;
                    P->cut++;
                }
            continue;
        }
        /* members waiting for all members sync at the latest measured arrival */
        in->pa_all = round_ns(in->amax);
        double t = 0;
        for (int32_t i = 0; i < in->n; i++) {
            struct item *it = &P->it[m[i]];
            int allw = in->pat == CS_PAT_NXN || (in->pat == CS_PAT_NTO1 && i == in->root);
            if (it->init)
                continue;
            it->wk = allw ? W_ALL : W_INST;
            it->x = it->e - (double)(allw ? in->pa_all : measured_sync(P, in, i));
            if (it->x < 0)
                it->x = 0;
            if (it->x > t)
                t = it->x;
        }
        uint64_t b = best_of(P, in->op, comm_cls(P, in->comm), in->bytes);
        double best = b ? (double)(b - 1) : t;
        double f = t > 0 && best < t ? best / t : 1;
        in->scale = f;
    }
    /* Completion calls wait for the members their collectives' patterns wait for, and for
     * their point-to-point partners.  The time from the collectives' sync point (the call's
     * arrival without one) to a later partner's arrival is the step budget's point-to-point
     * waiting of the call's rank (P->cd is in item order, so ranks in order too). */
    int r = 0;
    for (size_t c = 0; c < P->ncd; c++) {
        struct item *it = &P->it[P->cd[c]];
        double s = it->a, sp = it->a;
        unsigned char dim = CS_DIM_OTHER;
        int32_t late = -1; /* the item of the latest partner in the window */
        /* partners in other windows (struct half): the latest known one (for the waits only:
         * the replay does not link across windows), and how many are not read yet */
        double spx = it->a;
        int32_t latex = -1, pending = 0;
        unsigned char dimx = CS_DIM_OTHER;
        size_t lk0 = P->nlk;
        for (int32_t d = 0; d < it->dn; d++) {
            struct wdep *dp = &P->dep[it->doff + d];
            if (dp->inst == DEP_P2P) {
                /* The partner's arrival, unless it came after this completion ended (an
                 * eager send completes without its receive; or a clock error). */
                const struct item *ini = &P->it[dp->idx];
                const struct item *o = ini->pg >= 0 ? &P->it[ini->pg] : NULL;
                if (!o || o->a > it->e) {
                    dp->inst = -1;
                    if (ini->pg <= -2) { /* paired with a half carried in */
                        const struct cpart *cp = &P->cpa[-2 - ini->pg];
                        if (cp->a <= it->e && cp->a > spx) {
                            spx = cp->a;
                            latex = cp->rank;
                            dimx = ini->dim;
                        }
                    } else if (ini->pg == -1 && P->prun) { /* its partner is not read yet */
                        if (!cs__grow((void **)&P->lk, &P->caplk, P->nlk + 1, sizeof *P->lk)) {
                            P->lk[P->nlk++] = (struct lnk){dp->idx, -1};
                            pending++;
                        } else {
                            P->oom = 1;
                        }
                    }
                } else if (o->a > sp) {
                    sp = o->a;
                    dim = ini->dim;
                    late = ini->pg;
                }
                continue;
            }
            if (dp->inst == DEP_CARRY) { /* a request carried in */
                struct half *H = &P->hv[dp->idx];
                H->in_req = 0; /* read now */
                dp->inst = -1;
                P->pcut++;
                if (H->known) {
                    if (H->pa <= it->e && H->pa > spx) {
                        spx = H->pa;
                        latex = H->prank;
                        dimx = H->dim;
                    }
                    cs__wi_half_release(P, dp->idx);
                } else if (cs__grow((void **)&P->lk, &P->caplk, P->nlk + 1, sizeof *P->lk)) {
                    P->oom = 1;
                    cs__wi_half_release(P, dp->idx);
                } else { /* still waiting in its channel */
                    P->lk[P->nlk++] = (struct lnk){-2 - dp->idx, -1};
                    pending++;
                }
                continue;
            }
            struct winst *in = &P->in[dp->inst];
            if (in->broken || in->seen != in->n) {
                dp->inst = -1;
                continue;
            }
            int64_t t = measured_sync(P, in, dp->idx);
            if ((double)t > s)
                s = (double)t;
        }
        /* the wait: from the sync point to the latest partner, wherever it was read */
        double sw = sp;
        int32_t lw = late >= 0 ? cs__wi_item_rank(P, late) : -1;
        unsigned char dw = dim;
        if (spx > sw) {
            sw = spx;
            lw = latex;
            dw = dimx;
        }
        if (sw > s || pending) {
            while ((size_t)P->cd[c] >= P->w[r].off + P->w[r].n)
                r++;
            enum cs_op_kind kd =
                it->op < CS_OP_MAX ? (enum cs_op_kind)P->kind[it->op] : cs_op_info(it->op)->kind;
            int in_call = kd != CS_KIND_WAIT;
            if (!pending) {
                cs__wi_p2p_book(P, r, P->k, it->a, dw, sw - s, in_call, lw);
            } else if (P->dfree < 0 &&
                       (P->ndv >= INT32_MAX ||
                        cs__grow((void **)&P->dv, &P->capdv, P->ndv + 1, sizeof *P->dv))) {
                P->oom = 1;
                P->nlk = lk0;
            } else {
                int32_t d = P->dfree >= 0 ? P->dfree : (int32_t)P->ndv++;
                if (d == P->dfree)
                    P->dfree = P->dv[d].next;
                P->dv[d] = (struct defer){.a = it->a,
                                          .e = it->e,
                                          .s = s,
                                          .sp = sw,
                                          .rank = r,
                                          .late = lw,
                                          .k = P->k,
                                          .pending = pending,
                                          .dim = dw,
                                          .next = -1,
                                          .in_call = (unsigned char)in_call};
                for (size_t i = lk0; i < P->nlk; i++)
                    P->lk[i].rec = d;
                /* requests carried in: their halves wait in channels; link them now */
                size_t j = lk0;
                for (size_t i = lk0; i < P->nlk; i++) {
                    if (P->lk[i].item <= -2) {
                        int32_t h = -2 - P->lk[i].item;
                        P->hv[h].rec = d;
                        cs__wi_half_release(P, h); /* in_req is 0: the channel keeps it */
                    } else {
                        P->lk[j++] = P->lk[i];
                    }
                }
                P->nlk = j;
            }
        }
        /* the replay: partners in this window only */
        if (sp > s)
            s = sp;
        it->x = it->e > s ? it->e - s : 0;
    }
}

/* Step k of a rank ran from `from` to `to` in scenario sc. */
void cs__wi_step_done(struct replay *P, int sc, int k, double from, double to)
{
    if (k < P->first || k >= P->end)
        return;
    P->sum[sc][k] += to - from;
    if (sc == 0)
        P->cnt[k]++;
}

/* The item at a step boundary arrived at A in scenario sc. */
static void mark(struct replay *P, struct wrank *w, int sc, int k, const struct item *it, double A)
{
    if (w->open_step[sc] >= 0) {
        cs__wi_step_done(P, sc, w->open_step[sc], w->open_at[sc], A);
        w->open_step[sc] = -1;
    }
    if (it->bnd == 1) {
        w->open_step[sc] = k;
        w->open_at[sc] = A;
    }
}

/* The latest arrival of all members of in, rounded, in every scenario (once all arrived). */
static void inst_all(struct replay *P, struct winst *in)
{
    const int32_t *m = P->mem + in->off;
    struct lanes mx = P->it[m[0]].A;
    for (int32_t j = 1; j < in->n; j++)
        mx = lanes_max(mx, P->it[m[j]].A);
    in->all_max = lanes_round(mx);
    in->all_known = 1;
}

/* The replayed sync point of member idx of instance in, in every scenario (cs__whatif_sync over
 * the rounded replayed arrivals), into *out: 1, or 0 while an arrival it waits for is not known.
 * A member waiting for all members (pattern NxN, the root of N-to-1) needs all n arrivals:
 * counted, and their maxima computed once per instance instead of scanned for every member and
 * retry. */
static inline int inst_sync(struct replay *P, struct winst *in, int32_t idx, struct lanes *out)
{
    if (in->pat == CS_PAT_NXN || (in->pat == CS_PAT_NTO1 && idx == in->root)) {
        if (in->narr < in->n)
            return 0;
        if (!in->all_known)
            inst_all(P, in);
        *out = in->all_max;
        return 1;
    }
    const int32_t *m = P->mem + in->off;
    int32_t lo = 0, hi = -1;
    if (in->pat == CS_PAT_PREFIX)
        hi = idx;
    else if (in->pat == CS_PAT_1TON && in->root >= 0 && idx != in->root)
        lo = hi = in->root;
    struct lanes s = P->it[m[idx]].A;
    for (int32_t j = lo; j <= hi; j++) {
        if (!P->it[m[j]].arr)
            return 0;
        s = lanes_max(s, P->it[m[j]].A);
    }
    *out = lanes_round(s);
    return 1;
}

/* The completion call it can finish: the latest of its arrival and its dependencies' sync points
 * into *S, and 1; 0 while one is not known. */
static int done_sync(struct replay *P, const struct item *it, struct lanes *S)
{
    *S = it->A;
    for (int32_t d = 0; d < it->dn; d++) {
        const struct wdep *dp = &P->dep[it->doff + d];
        if (dp->inst == DEP_P2P) {
            const struct item *o = &P->it[P->it[dp->idx].pg];
            if (!o->arr)
                return 0;
            *S = lanes_max(*S, o->A);
            continue;
        }
        struct lanes s;
        if (dp->inst < 0)
            continue;
        if (!inst_sync(P, &P->in[dp->inst], dp->idx, &s))
            return 0;
        *S = lanes_max(*S, s);
    }
    return 1;
}

/* The item at w's cursor can finish (forced: its dependencies are cut): its end in each scenario
 * into w->R, and 1; 0 while it waits for an arrival. */
static inline int try_item(struct replay *P, struct wrank *w, const struct item *it, int forced)
{
    struct lanes t;
    const struct lanes *S = &it->A; /* the sync point in each scenario */
    double scale = 1;               /* x's factor in best bandwidth: an instance member's */
    struct winst *in;
    switch (forced ? W_NONE : it->wk) {
    case W_DEP:
        if (!done_sync(P, it, &t))
            return 0;
        S = &t;
        break;
    case W_ALL:
        in = &P->in[it->inst];
        scale = in->scale;
        if (in->narr < in->n)
            return 0;
        if (!in->all_known)
            inst_all(P, in);
        S = &in->all_max;
        break;
    case W_INST:
        in = &P->in[it->inst];
        scale = in->scale;
        if (!inst_sync(P, in, it->idx, &t))
            return 0;
        S = &t;
        break;
    case W_PG: {
        const struct item *o = &P->it[it->pg];
        if (!o->arr)
            return 0;
        t = lanes_max(it->A, o->A);
        S = &t;
        break;
    }
    default: /* waits for nothing */
        break;
    }
    double x = forced ? it->e - it->a : it->x;
    /* full overlap: no time after the dependencies for communication calls; best bandwidth:
     * a collective member's scaled */
    v2d x01 = {x, x}, x23 = {it->comm ? 0 : x, x * scale};
    if (!P->timed)
        x23 = x01;
    w->R.v[0] = vmax(it->A.v[0], S->v[0] + x01);
    w->R.v[1] = vmax(it->A.v[1], S->v[1] + x23);
    return 1;
}

/* The gap factor outside steps: 1 in every scenario. */
static const struct lanes ones = {{{1, 1}, {1, 1}}};

/* Replay window k (-1: before the first step) in every scenario. */
__attribute__((noinline)) void cs__wi_replay_window(struct replay *P, int k)
{
    for (int r = 0; r < P->world; r++) {
        P->w[r].cur = P->w[r].off;
        P->w[r].cur_forced = 0;
    }
    for (;;) {
        int progress = 0, left = 0;
        for (int r = 0; r < P->world; r++) {
            struct wrank *w = &P->w[r];
            size_t cur = w->cur, end = w->off + w->n;
            int forced = w->cur_forced;
            while (cur < end) {
                struct item *it = &P->it[cur];
                if (!it->arr) {
                    it->arr = 1;
                    const struct lanes *f = cur == w->off ? &w->fv_prev : &w->fv_cur;
                    if (it->out)
                        f = &ones;
                    it->A.v[0] = w->R.v[0] + it->gap * f->v[0];
                    it->A.v[1] = w->R.v[1] + it->gap * f->v[1];
                    if (it->bnd)
                        for (int sc = 0; sc < SC_N; sc++)
                            mark(P, w, sc, k, it, LANE(it->A, sc));
                    if (it->inst >= 0)
                        P->in[it->inst].narr++;
                    progress = 1;
                }
                if (!try_item(P, w, it, forced))
                    break;
                cur++;
                forced = 0;
                progress = 1;
            }
            w->cur = cur;
            w->cur_forced = forced;
            left |= cur < end;
        }
        if (!left)
            break;
        if (!progress) {
            /* A cycle of dependencies (clock error): cut the earliest waiting item's. */
            struct wrank *cut = NULL;
            for (int r = 0; r < P->world; r++) {
                struct wrank *w = &P->w[r];
                if (w->cur < w->off + w->n && (!cut || P->it[w->cur].a < P->it[cut->cur].a))
                    cut = w;
            }
            cut->cur_forced = 1;
            P->forced++;
        }
    }
}

/* The no-straggler factors of the window: median compute over ranks / the rank's compute. */
void cs__wi_straggler_factors(struct replay *P, int k)
{
    size_t m = 0;
    for (int r = 0; r < P->world; r++) {
        struct wrank *w = &P->w[r];
        w->f_prev = w->f_cur;
        w->f_cur = 1;
        if (!w->n || k < 0)
            continue;
        w->comp += w->next_gap;
        P->med[m++] = w->comp;
    }
    double med = cs__whatif_median(P->med, m);
    for (int r = 0; r < P->world; r++) {
        struct wrank *w = &P->w[r];
        if (w->n && P->timed && w->comp > 0)
            w->f_cur = med / w->comp;
        for (int sc = 0; sc < SC_N; sc++) {
            LANE(w->fv_prev, sc) = sc == SC_NOSTRAG ? w->f_prev : 1;
            LANE(w->fv_cur, sc) = sc == SC_NOSTRAG ? w->f_cur : 1;
        }
    }
}
