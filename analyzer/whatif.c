/*
 * What-if: replay the per-step dependency structure of the run and estimate the step time under
 * changed conditions (docs/metrics.md, "What-if").
 *
 * After the main pass, every rank's trace is read again one step window at a time (all ranks'
 * events of step k, then of step k + 1, ...), so memory stays bounded by the events of one step.
 * Inside a window each rank's events become items in program order: the gap before an item is the
 * rank's local time (compute), and an item waits for the arrivals it depended on in the measured
 * run:
 *
 *   blocking collective   the members its pattern waits for (all for NxN, the root for 1-to-N,
 *                         all for the root of N-to-1, ranks 0..i for prefix), matched by
 *                         (communicator, sequence number)
 *   MPI_Recv              the matching send's arrival (same communicator, source, destination and
 *                         tag, in order)
 *   blocking send         the receive's arrival, when the send ended after it (rendezvous)
 *   Isend/Irecv           nothing; matched with its partner like a blocking send / receive
 *                         (from MPI_ANY_SOURCE: at its complete record, by the status' source)
 *   Sendrecv(_replace)    an Isend and an Irecv at its arrival, completed by the call itself
 *   completion of those   the partner's arrival, unless it came after the completion ended
 *   anything else         nothing (local)
 *
 * With measured arrival a_i and end e_i, s_i = max(a_i, arrivals it waits for) and x_i = e_i - s_i
 * (the time after the last dependency).  The replay sets A_i = E_prev + gap, S_i from the replayed
 * arrivals and E_i = max(A_i, S_i + x_i'), where x_i' is x_i changed by the scenario:
 *
 *   replayed        nothing changed (checks the model: it must give the measured step time)
 *   no straggler    each gap of rank r in step k scaled by median_r(compute_rk) / compute_rk
 *   full overlap    x_i' = 0 for every communication call (synchronisation kept)
 *   best bandwidth  blocking collectives: x_i' = x_i * min(1, best / t) where t is the
 *                   instance's transfer time (max_i x_i) and best the shortest transfer time of
 *                   any instance of the same op, communicator class and size in the run
 *
 * A dependency whose partner is not in the same window (a receive of the next step's message) is
 * cut: the item keeps its measured time.  Step k's time is the mean over ranks of the replayed
 * time from the rank's step-k boundary to its next one, as in the step statistics.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "steps_internal.h"


int cs__whatif_means(double *const sum[SC_N], const int *cnt, int first, int end,
                     double measured_s, struct cs_report_whatif *o)
{
    double v[SC_N] = {0};
    int m = 0;
    for (int k = first; k < end; k++) {
        if (!cnt[k])
            continue;
        m++;
        for (int sc = 0; sc < SC_N; sc++)
            v[sc] += sum[sc][k] / cnt[k] / 1e9;
    }
    if (m) {
        o->replayed_step_s = v[SC_REPLAY] / m;
        o->no_straggler_step_s = v[SC_NOSTRAG] / m;
        o->full_overlap_step_s = v[SC_OVERLAP] / m;
        o->best_bandwidth_step_s = v[SC_BESTBW] / m;
        o->replay_error = (o->replayed_step_s - measured_s) / measured_s;
    }
    return m;
}

int64_t cs__whatif_sync(enum cs_op_pattern pat, int32_t root, int32_t n, const int64_t *arr,
                        const unsigned char *have, int32_t i, int *ok)
{
    int64_t s = arr[i];
    int32_t lo = 0, hi = -1; /* members [lo, hi] are waited for */
    if (pat == CS_PAT_NXN || (pat == CS_PAT_NTO1 && i == root))
        hi = n - 1;
    else if (pat == CS_PAT_PREFIX)
        hi = i;
    else if (pat == CS_PAT_1TON && root >= 0 && i != root)
        lo = hi = root;
    *ok = 1;
    for (int32_t j = lo; j <= hi; j++) {
        if (have && !have[j]) {
            *ok = 0;
            continue;
        }
        if (arr[j] > s)
            s = arr[j];
    }
    return s;
}

/* llround(x) without the library call (a hot spot of the replay): x - (double)(int64_t)x is exact
 * for |x| < 2^63 (above 2^52 every double is an integer, so the fraction is 0), and ties round
 * away from zero as llround does.  Anything else (NaN, huge) goes to llround. */
static int64_t round_ns(double x)
{
    if (!(fabs(x) < 9.2e18))
        return (int64_t)llround(x);
    int64_t i = (int64_t)x;
    double f = x - (double)i;
    return i + (f >= 0.5) - (f <= -0.5); /* no branch: the fraction is random */
}

static uint64_t best_key(uint16_t op, int cls)
{
    return (uint64_t)op | (uint64_t)(uint32_t)(cls + 1) << 16;
}

void cs__whatif_instance(struct cs__steps *S, const struct cs__inst *in, int cls)
{
    enum cs_op_pattern pat = cs_op_info(in->op)->pattern;
    int64_t t = 0;
    uint64_t bytes = 0;
    int ok;
    /* Members waiting for all members sync at the latest arrival: found once, not per member. */
    int64_t all = in->arr[0];
    for (int32_t i = 1; i < in->n; i++)
        if (in->arr[i] > all)
            all = in->arr[i];
    for (int32_t i = 0; i < in->n; i++) {
        int64_t s = pat == CS_PAT_NXN || (pat == CS_PAT_NTO1 && i == in->root)
                        ? all
                        : cs__whatif_sync(pat, in->root, in->n, in->arr, NULL, i, &ok);
        int64_t x = in->end[i] - s;
        if (x > t)
            t = x;
        if (in->size[i] > bytes)
            bytes = in->size[i];
    }
    int fresh;
    uint64_t *v = cs__map_put(&S->best, best_key(in->op, cls), bytes, &fresh);
    if (v && (fresh || (uint64_t)t + 1 < *v))
        *v = (uint64_t)t + 1;
}

/* ---- the replay ---- */

struct item {
    double a, e;        /* measured, ns after the run's origin */
    double gap;         /* a minus the previous item's e */
    double x;           /* measured time after its dependencies were met */
    double scale;       /* best-bandwidth factor of x */
    int32_t inst;       /* collective instance in the window, -1 none */
    int32_t idx;        /* comm rank in it */
    int32_t pr, pi;     /* point-to-point partner item (rank, index) waited for, -1 none */
    int32_t doff, dn;   /* completion call: the non-blocking collectives it completed */
    unsigned char comm; /* a communication call */
    unsigned char init; /* non-blocking collective initiation (arrives, waits for nothing) */
    unsigned char nbp;  /* MPI_Isend / MPI_Irecv: linked to its partner (pr, pi), waits for
                         * nothing; the completion call of its request waits instead */
    signed char bnd;    /* 1 starts a step, -1 ends one, 2 MPI_Finalize */
    uint16_t op;
    /* replay state: the replayed arrival in each scenario, valid once it arrived (an item before
     * its rank's cursor, or the one at it with cur_arrived set; see struct wrank) */
    double A[SC_N];
};

struct wrank {
    struct item *it;
    size_t n, cap;
    const struct cs_event *peek; /* the next window's first event */
    int done;                    /* stream exhausted */
    int started;                 /* first event seen (prev_e valid) */
    double prev_e;
    uint64_t occ;
    double comp, next_gap, f_cur, f_prev;
    int fin_seen;
    /* per scenario, carried across windows */
    double R[SC_N], open_at[SC_N];
    int open_step[SC_N];
    /* The scenarios are replayed together: which item can finish when depends on which
     * arrivals are known, never on their values, so every scenario visits the items in the same
     * order (and cuts the same cycles), each with its own numbers. */
    size_t cur; /* cursor of the replay: the items before it have finished */
    /* the item at the cursor has arrived; its dependencies were cut (a cycle).  Only the item at
     * the cursor can be arrived and not finished, or forced, so these replace per-item flags
     * that every window and scenario had to clear. */
    int cur_arrived, cur_forced;
    struct cs__clock_memo clkm; /* cs__clock_map_near over the rank's stream */
    /* the rank's comm rank in its last communicators (run->my_rank lookups; INT32_MIN none) */
    struct wcc {
        uint64_t id;
        int32_t idx;
        int ok;
    } cc[4];
};

struct winst {
    uint64_t comm, bytes; /* bytes: max over members of max(bytes, bytes_recv) */
    uint16_t op;
    enum cs_op_pattern pat; /* cs_op_info(op)->pattern */
    int32_t n, root, seen;
    int broken;
    size_t off; /* into the pools */
    /* replay state: members whose replayed arrival is known, and (when all are) the latest of
     * them in each scenario, which every member waiting for all members syncs at */
    int64_t pa_all; /* the latest measured arrival (resolve) */
    int32_t narr;
    int all_known;
    int64_t all_max[SC_N];
};

struct replay {
    struct cs__run *run;
    struct cs__steps *S;
    int world;
    double origin;
    struct wrank *w;
    struct winst *in;
    size_t nin, capin;
    int64_t *pa;       /* measured arrivals (ns after origin), per instance member */
    int64_t *pA[SC_N]; /* replayed arrivals (rounded), per scenario */
    int32_t *pref;     /* the member's rank (-1 not seen) */
    int32_t *pitem;    /* the member's item index */
    unsigned char *ph; /* replayed arrival known */
    size_t npool, cappool;
    struct wdep {
        int32_t inst, idx;
    } * dep;
    size_t ndep, capdep;
    struct cs__map imap, scnt, rcnt, pair, req;
    int first, end; /* timed steps [first, end) */
    double *sum[SC_N];
    int *cnt;
    uint64_t cut, forced;
    unsigned char kind[CS_OP_MAX], pat[CS_OP_MAX]; /* cs_op_info by table */
};

static int pool_grow(struct replay *P, size_t need)
{
    if (need <= P->cappool)
        return 0;
    size_t c = P->cappool ? P->cappool : 256;
    while (c < need)
        c *= 2;
    void *a = realloc(P->pa, c * sizeof *P->pa), *b = a;
    if (a)
        P->pa = a;
    for (int sc = 0; sc < SC_N && b; sc++) {
        b = realloc(P->pA[sc], c * sizeof *P->pA[sc]);
        if (b)
            P->pA[sc] = b;
    }
    void *r = b ? realloc(P->pref, c * sizeof *P->pref) : NULL;
    if (r)
        P->pref = r;
    void *i = r ? realloc(P->pitem, c * sizeof *P->pitem) : NULL;
    if (i)
        P->pitem = i;
    void *h = i ? realloc(P->ph, c) : NULL;
    if (!h)
        return -1;
    P->ph = h;
    P->cappool = c;
    return 0;
}

static int is_send(unsigned op)
{
    return op == CS_OP_SEND || op == CS_OP_SSEND || op == CS_OP_BSEND || op == CS_OP_RSEND;
}

/* The instance of (comm, seq) in the window, created when new; -1 out of memory or unusable. */
static int32_t inst_of(struct replay *P, const struct cs_event *ev)
{
    int fresh;
    uint64_t *v = cs__map_put(&P->imap, ev->comm, ev->seq, &fresh);
    if (!v)
        return -1;
    if (!fresh)
        return (int32_t)*v - 1;
    const struct cs__comm *c = cs__comm_get(P->run, ev->comm);
    int32_t n = c ? c->size : 0;
    if (n < 2 || cs__grow((void **)&P->in, &P->capin, P->nin + 1, sizeof *P->in) ||
        pool_grow(P, P->npool + (size_t)n)) {
        *v = 0; /* remembered as unusable */
        return -1;
    }
    struct winst *w = &P->in[P->nin];
    *w = (struct winst){.comm = ev->comm,
                        .op = ev->op,
                        .pat = cs_op_info(ev->op)->pattern,
                        .n = n,
                        .root = -1,
                        .off = P->npool};
    for (int32_t i = 0; i < n; i++)
        P->pref[P->npool + (size_t)i] = -1;
    P->npool += (size_t)n;
    *v = ++P->nin;
    return (int32_t)P->nin - 1;
}

/* Non-blocking point-to-point (docs/metrics.md, "What-if"): an MPI_Isend / MPI_Irecv with a
 * known peer and tag is matched with its partner (blocking or not) like a blocking one, by
 * (communicator, tag, source, destination) in order; the completion call of its request then
 * waits for the partner's arrival. */
#define DEP_P2P (-2) /* struct wdep.inst of such a dependency; idx = the initiation's item */

static int nbp_linkable(const struct replay *P, const struct cs_event *ev)
{
    return (ev->op == CS_OP_ISEND || ev->op == CS_OP_IRECV) && ev->peer >= 0 &&
           ev->peer < P->world && ev->aux >= 0 &&
           !(ev->flags & (CS_EV_PROC_NULL | CS_EV_ANY_SOURCE));
}

/* Point-to-point pairing: the j-th send from src to dst with a tag on a communicator matches the
 * j-th receive at dst from src.  The first of the two to be read is remembered in P->pair; the
 * second, item `it` (index idx of rank r), is linked to it (pr, pi).  0, or -1 out of memory. */
static int pair_p2p(struct replay *P, int r, uint32_t idx, struct item *it, uint64_t comm,
                    int32_t tag, int32_t src, int32_t dst, int send)
{
    uint64_t key = cs__map_hash(comm, (uint64_t)(uint32_t)tag);
    uint64_t sd = (uint64_t)(uint32_t)src << 32 | (uint32_t)dst;
    int fresh;
    uint64_t *c = cs__map_put(send ? &P->scnt : &P->rcnt, key, sd, &fresh);
    if (!c)
        return -1;
    uint64_t *pv = cs__map_put(&P->pair, cs__map_hash(key, (*c)++), sd, &fresh);
    if (!pv)
        return -1;
    uint64_t me = (uint64_t)r << 32 | idx;
    if (fresh) {
        *pv = (me << 1 | (uint64_t)send) + 1;
    } else if (*pv && ((*pv - 1) & 1) != (uint64_t)send) {
        uint64_t other = (*pv - 1) >> 1;
        it->pr = (int32_t)(other >> 32);
        it->pi = (int32_t)(uint32_t)other;
        *pv = 0; /* linked */
    }
    return 0;
}

static int link_nbp(struct replay *P, int r, struct wrank *w, struct item *it,
                    const struct cs_event *ev)
{
    int send = ev->op == CS_OP_ISEND;
    int32_t src = send ? r : ev->peer, dst = send ? ev->peer : r;
    if (pair_p2p(P, r, (uint32_t)(w->n - 1), it, ev->comm, ev->aux, src, dst, send))
        return -1;
    int fresh;
    it->nbp = 1;
    uint64_t *q = cs__map_put(&P->req, (uint64_t)r, ev->request, &fresh);
    if (!q)
        return -1;
    *q = ((uint64_t)1 << 63 | (uint32_t)(w->n - 1)) + 1;
    return 0;
}

/* MPI_Irecv from MPI_ANY_SOURCE (or with MPI_ANY_TAG): its partner is known only from its
 * `complete` record (the status's source in `peer`, its tag in `aux`).  The initiation is
 * remembered with bit 62 set; at the record it is paired like an Irecv posted to that source with
 * that tag (in the order of completion among such receives). */
#define ANYSRC_BIT ((uint64_t)1 << 62)

static int anysrc_irecv(const struct replay *P, const struct cs_event *ev)
{
    return ev->op == CS_OP_IRECV && ev->request && !(ev->flags & CS_EV_PROC_NULL) &&
           ((ev->flags & CS_EV_ANY_SOURCE) || ev->aux < 0) &&
           (ev->peer < P->world);
}

static int anysrc_post(struct replay *P, int r, struct wrank *w, struct item *it,
                       const struct cs_event *ev)
{
    uint64_t *q = cs__map_put(&P->req, (uint64_t)r, ev->request, NULL);
    if (!q)
        return -1;
    it->nbp = 1;
    *q = ((uint64_t)1 << 63 | ANYSRC_BIT | (uint32_t)(w->n - 1)) + 1;
    return 0;
}

/* The complete record ev of such a receive (initiation item idx of rank r): pair it. */
static int anysrc_link(struct replay *P, int r, struct wrank *w, uint32_t idx,
                       const struct cs_event *ev)
{
    if (idx >= w->n || ev->peer < 0 || ev->peer >= P->world || ev->aux < 0 ||
        (ev->flags & (CS_EV_PROC_NULL | CS_EV_CANCELLED | CS_EV_ERROR)))
        return 0;
    return pair_p2p(P, r, idx, &w->it[idx], ev->comm, ev->aux, ev->peer, r, 0);
}

/* MPI_Sendrecv / MPI_Sendrecv_replace (docs/metrics.md, "What-if"): a send and a receive, then
 * the wait for both.  The call becomes two items at its arrival that wait for nothing, linked to
 * their partners like an Isend and an Irecv (the send half by (comm, send tag, this rank, dest),
 * the receive half by (comm, the received message's tag, its source, this rank), in order), and
 * the call itself as the completion of both.  The receive side is known from traces that record
 * it (seq = source + 1, request = tag + 1; docs/trace-format.md). */
static int sr_half(struct replay *P, int r, struct wrank *w, const struct cs_event *ev, double a,
                   int send)
{
    if (cs__grow((void **)&w->it, &w->cap, w->n + 1, sizeof *w->it) ||
        cs__grow((void **)&P->dep, &P->capdep, P->ndep + 1, sizeof *P->dep))
        return -1;
    struct item *it = &w->it[w->n++];
    *it = (struct item){.a = a,
                        .e = a,
                        .gap = a - w->prev_e,
                        .scale = 1,
                        .inst = -1,
                        .pr = -1,
                        .pi = -1,
                        .comm = 1,
                        .nbp = 1,
                        .op = send ? CS_OP_ISEND : CS_OP_IRECV};
    w->prev_e = a;
    int32_t src = send ? r : (int32_t)ev->seq - 1, dst = send ? ev->peer : r;
    int32_t tag = send ? ev->aux : (int32_t)(ev->request - 1);
    if (pair_p2p(P, r, (uint32_t)(w->n - 1), it, ev->comm, tag, src, dst, send))
        return -1;
    P->dep[P->ndep++] = (struct wdep){DEP_P2P, (int32_t)(w->n - 1)};
    return 0;
}

/* The halves of a Sendrecv event before its item; *doff, *dn: their dependencies (dn 0: the call
 * is not linked).  0, or -1 out of memory. */
static int sr_halves(struct replay *P, int r, struct wrank *w, const struct cs_event *ev,
                     double a, int32_t *doff, int32_t *dn)
{
    *dn = 0;
    if ((ev->op != CS_OP_SENDRECV && ev->op != CS_OP_SENDRECV_REPLACE) ||
        (ev->flags & CS_EV_ERROR))
        return 0;
    int send = ev->peer >= 0 && ev->peer < P->world && !(ev->flags & CS_EV_PROC_NULL) &&
               ev->aux >= 0;
    int recv = ev->seq > 0 && ev->seq <= (uint32_t)P->world && ev->request > 0 &&
               ev->request <= (uint64_t)INT32_MAX + 1;
    if (!send && !recv)
        return 0;
    *doff = (int32_t)P->ndep;
    if ((send && sr_half(P, r, w, ev, a, 1)) || (recv && sr_half(P, r, w, ev, a, 0)))
        return -1;
    *dn = send + recv;
    return 0;
}

/* Read rank r's events of the next window into P->w[r].it.  first_window: the events before the
 * first step boundary. */
static int read_window(struct replay *P, int r, int first_window)
{
    struct wrank *w = &P->w[r];
    struct cs__rank *rk = &P->run->ranks[r];
    w->n = 0;
    w->next_gap = 0;
    if (w->done)
        return 0;
    for (;;) {
        const struct cs_event *ev = w->peek ? w->peek : cs_reader_next(rk->rd);
        int was_peek = w->peek != NULL;
        w->peek = NULL;
        if (!ev) {
            w->done = 1;
            return 0;
        }
        enum cs_op_kind k = ev->op < CS_OP_MAX ? P->kind[ev->op] : cs_op_info(ev->op)->kind;
        if (k == CS_KIND_GPU)
            continue;
        if (k == CS_KIND_DONE) {
            /* The completion call just before it completed this request: a dependency. */
            uint64_t *q = cs__map_get(&P->req, (uint64_t)r, ev->request);
            if (!q)
                continue;
            uint64_t v = *q - 1;
            cs__map_del(&P->req, (uint64_t)r, ev->request);
            if (v >> 63 && (v & ANYSRC_BIT)) {
                v &= ~ANYSRC_BIT;
                if (anysrc_link(P, r, w, (uint32_t)v, ev))
                    return -1;
            }
            struct item *last = w->n ? &w->it[w->n - 1] : NULL;
            double te = (double)cs__clock_map_near(&w->clkm, &rk->clk, ev->t_end) - P->origin;
            if (!last || cs_op_info(last->op)->kind != CS_KIND_WAIT || te != last->e ||
                (last->dn && (size_t)(last->doff + last->dn) != P->ndep) ||
                cs__grow((void **)&P->dep, &P->capdep, P->ndep + 1, sizeof *P->dep))
                continue;
            if (!last->dn)
                last->doff = (int32_t)P->ndep;
            last->dn++;
            if (v >> 63) /* a non-blocking send or receive: its initiation item */
                P->dep[P->ndep++] = (struct wdep){DEP_P2P, (int32_t)(uint32_t)v};
            else
                P->dep[P->ndep++] = (struct wdep){(int32_t)(v >> 32), (int32_t)(uint32_t)v};
            continue;
        }
        double a = (double)cs__clock_map_near(&w->clkm, &rk->clk, ev->t_begin) - P->origin;
        double e = (double)cs__clock_map_near(&w->clkm, &rk->clk, ev->t_end) - P->origin;
        if (e < a)
            e = a;
        if (!w->started) { /* the rank's replayed clock starts at its first event */
            w->started = 1;
            w->prev_e = a;
            for (int sc = 0; sc < SC_N; sc++)
                w->R[sc] = a;
        }
        int b = was_peek ? 1 : cs__steps_boundary_of(P->run, P->S, ev, k, &w->occ);
        if (b == 1 && (first_window || w->n > 0) && !was_peek) {
            w->peek = ev;
            w->next_gap = a - w->prev_e;
            return 0;
        }
        int32_t sr_off = 0, sr_n = 0;
        if (k == CS_KIND_P2P && sr_halves(P, r, w, ev, a, &sr_off, &sr_n))
            return -1;
        if (cs__grow((void **)&w->it, &w->cap, w->n + 1, sizeof *w->it))
            return -1;
        struct item *it = &w->it[w->n++];
        *it = (struct item){.a = a,
                            .e = e,
                            .gap = a - w->prev_e,
                            .x = e - a,
                            .scale = 1,
                            .inst = -1,
                            .pr = -1,
                            .pi = -1,
                            .op = ev->op,
                            .bnd = (signed char)b};
        w->prev_e = e;
        if (ev->op == CS_OP_FINALIZE && !w->fin_seen) {
            w->fin_seen = 1;
            if (!it->bnd)
                it->bnd = 2;
        }
        it->comm = k == CS_KIND_COLL || k == CS_KIND_ICOLL || k == CS_KIND_P2P ||
                   k == CS_KIND_IP2P || k == CS_KIND_WAIT || k == CS_KIND_NCOLL ||
                   k == CS_KIND_NP2P || k == CS_KIND_GROUP;
        if ((k == CS_KIND_COLL || k == CS_KIND_ICOLL) &&
            (ev->op < CS_OP_MAX ? P->pat[ev->op] : cs_op_info(ev->op)->pattern) != CS_PAT_NONE) {
            int32_t x = inst_of(P, ev);
            /* The rank's comm rank: its collectives cycle over a few communicators. */
            struct wcc *cc = &w->cc[(ev->comm ^ (ev->comm >> 32)) & 3];
            if (!cc->ok || cc->id != ev->comm) {
                uint64_t *cr = cs__map_get(&P->run->my_rank, ev->comm, (uint64_t)r);
                cc->id = ev->comm;
                cc->idx = cr ? (int32_t)*cr - 1 : INT32_MIN;
                cc->ok = 1;
            }
            if (x < 0 || cc->idx == INT32_MIN)
                continue;
            struct winst *in = &P->in[x];
            int32_t idx = cc->idx;
            size_t o = in->off + (size_t)idx;
            if (idx < 0 || idx >= in->n || P->pref[o] >= 0 || in->op != ev->op) {
                in->broken = 1;
                continue;
            }
            if (ev->flags & CS_EV_ROOT)
                in->root = idx;
            P->pref[o] = r;
            P->pitem[o] = (int32_t)(w->n - 1);
            P->pa[o] = round_ns(a);
            uint64_t by = ev->bytes > ev->bytes_recv ? ev->bytes : ev->bytes_recv;
            if (by > in->bytes)
                in->bytes = by;
            in->seen++;
            it->inst = x;
            it->idx = idx;
            if (k == CS_KIND_ICOLL) {
                int fresh;
                uint64_t *q = cs__map_put(&P->req, (uint64_t)r, ev->request, &fresh);
                if (!q)
                    return -1;
                *q = ((uint64_t)(uint32_t)x << 32 | (uint32_t)idx) + 1;
                it->init = 1;
            }
        } else if (k == CS_KIND_P2P && ev->peer >= 0 && ev->peer < P->world &&
                   !(ev->flags & CS_EV_PROC_NULL) && (is_send(ev->op) || ev->op == CS_OP_RECV)) {
            /* The j-th send from s to d with a tag matches the j-th receive at d from s. */
            int send = is_send(ev->op);
            int32_t src = send ? r : ev->peer, dst = send ? ev->peer : r;
            if (pair_p2p(P, r, (uint32_t)(w->n - 1), it, ev->comm, ev->aux, src, dst, send))
                return -1;
        } else if (k == CS_KIND_IP2P && nbp_linkable(P, ev)) {
            if (link_nbp(P, r, w, it, ev))
                return -1;
        } else if (k == CS_KIND_IP2P && anysrc_irecv(P, ev)) {
            if (anysrc_post(P, r, w, it, ev))
                return -1;
        } else if (sr_n) {
            it->doff = sr_off;
            it->dn = sr_n;
        }
    }
}

/* Point-to-point links (both directions), and each collective member's x. */
static void resolve(struct replay *P)
{
    for (int r = 0; r < P->world; r++) {
        struct wrank *w = &P->w[r];
        for (size_t i = 0; i < w->n; i++) {
            struct item *it = &w->it[i];
            if (it->pr < 0 || it->pr >= P->world || (size_t)it->pi >= P->w[it->pr].n)
                continue;
            struct item *o = &P->w[it->pr].it[it->pi];
            if (o->pr >= 0)
                continue;
            o->pr = r;
            o->pi = (int32_t)i;
        }
    }
    /* Keep only the dependencies the measured run can have had: the receive waits for the send,
     * the send for the receive only when it ended after the receive began. */
    for (int r = 0; r < P->world; r++) {
        struct wrank *w = &P->w[r];
        for (size_t i = 0; i < w->n; i++) {
            struct item *it = &w->it[i];
            if (it->pr < 0 || it->nbp)
                continue;
            const struct item *o = &P->w[it->pr].it[it->pi];
            if (o->a > it->e) {
                it->pr = it->pi = -1;
                continue;
            }
            double s = o->a > it->a ? o->a : it->a;
            it->x = it->e - s;
        }
    }
    for (size_t x = 0; x < P->nin; x++) {
        struct winst *in = &P->in[x];
        if (in->broken || in->seen != in->n) {
            /* A member outside this window (or a broken sequence): the members present keep
             * their measured times. */
            for (int32_t i = 0; i < in->n; i++) {
                size_t o = in->off + (size_t)i;
                if (P->pref[o] >= 0) {
                    P->w[P->pref[o]].it[P->pitem[o]].inst = -1;
                    P->cut++;
                }
            }
            continue;
        }
        enum cs_op_pattern pat = in->pat;
        double t = 0;
        int ok;
        /* members waiting for all members sync at the latest measured arrival */
        int64_t all = P->pa[in->off];
        for (int32_t i = 1; i < in->n; i++)
            if (P->pa[in->off + (size_t)i] > all)
                all = P->pa[in->off + (size_t)i];
        in->pa_all = all;
        for (int32_t i = 0; i < in->n; i++) {
            size_t o = in->off + (size_t)i;
            struct item *it = &P->w[P->pref[o]].it[P->pitem[o]];
            if (it->init)
                continue;
            int64_t s = pat == CS_PAT_NXN || (pat == CS_PAT_NTO1 && i == in->root)
                            ? all
                            : cs__whatif_sync(pat, in->root, in->n, P->pa + in->off, NULL, i, &ok);
            it->x = it->e - (double)s;
            if (it->x < 0)
                it->x = 0;
            if (it->x > t)
                t = it->x;
        }
        int ci = cs__groups_comm(P->run, P->S, in->comm);
        int cls = ci < 0 ? -1 : cs__groups_scomm(P->S, ci)->cls;
        uint64_t *b = cs__map_get(&P->S->best, best_key(in->op, cls), in->bytes);
        double best = b && *b ? (double)(*b - 1) : t;
        double f = t > 0 && best < t ? best / t : 1;
        for (int32_t i = 0; i < in->n; i++) {
            size_t o = in->off + (size_t)i;
            P->w[P->pref[o]].it[P->pitem[o]].scale = f;
        }
    }
    /* Completion calls wait for the members their collectives' patterns wait for. */
    for (int r = 0; r < P->world; r++) {
        struct wrank *w = &P->w[r];
        for (size_t i = 0; i < w->n; i++) {
            struct item *it = &w->it[i];
            double s = it->a;
            for (int32_t d = 0; d < it->dn; d++) {
                struct wdep *dp = &P->dep[it->doff + d];
                if (dp->inst == DEP_P2P) {
                    /* The partner's arrival, unless it came after this completion ended (an
                     * eager send completes without its receive; or a clock error). */
                    const struct item *ini = &w->it[dp->idx];
                    const struct item *o = ini->pr >= 0 ? &P->w[ini->pr].it[ini->pi] : NULL;
                    if (!o || o->a > it->e)
                        dp->inst = -1;
                    else if (o->a > s)
                        s = o->a;
                    continue;
                }
                struct winst *in = &P->in[dp->inst];
                if (in->broken || in->seen != in->n) {
                    dp->inst = -1;
                    continue;
                }
                int ok;
                int64_t t = in->pat == CS_PAT_NXN || (in->pat == CS_PAT_NTO1 && dp->idx == in->root)
                                ? in->pa_all
                                : cs__whatif_sync(in->pat, in->root, in->n, P->pa + in->off, NULL,
                                                  dp->idx, &ok);
                if ((double)t > s)
                    s = (double)t;
            }
            if (it->dn)
                it->x = it->e > s ? it->e - s : 0;
        }
    }
}

/* Step k of a rank ran from `from` to `to` in scenario sc. */
static void step_done(struct replay *P, int sc, int k, double from, double to)
{
    if (k < P->first || k >= P->end)
        return;
    P->sum[sc][k] += to - from;
    if (sc == 0)
        P->cnt[k]++;
}

static void mark(struct replay *P, struct wrank *w, int sc, int k, const struct item *it, double A)
{
    if (it->bnd == 0)
        return;
    if (w->open_step[sc] >= 0) {
        step_done(P, sc, w->open_step[sc], w->open_at[sc], A);
        w->open_step[sc] = -1;
    }
    if (it->bnd == 1) {
        w->open_step[sc] = k;
        w->open_at[sc] = A;
    }
}

/* Whether the replayed sync point of member idx of instance in is known: the arrivals it waits
 * for have all arrived.  A member waiting for all members (pattern NxN, the root of N-to-1) needs
 * all n arrivals: counted, and their maxima computed once per instance instead of scanned for
 * every member and retry. */
static int inst_ready(struct replay *P, struct winst *in, int32_t idx)
{
    if (in->pat == CS_PAT_NXN || (in->pat == CS_PAT_NTO1 && idx == in->root)) {
        if (in->narr < in->n)
            return 0;
        if (!in->all_known) {
            for (int sc = 0; sc < SC_N; sc++) {
                const int64_t *a = P->pA[sc] + in->off;
                int64_t m = a[0];
                for (int32_t j = 1; j < in->n; j++)
                    if (a[j] > m)
                        m = a[j];
                in->all_max[sc] = m;
            }
            in->all_known = 1;
        }
        return 1;
    }
    int ok;
    cs__whatif_sync(in->pat, in->root, in->n, P->pA[0] + in->off, P->ph + in->off, idx, &ok);
    return ok;
}

/* The replayed sync point of member idx of instance in, in scenario sc (cs__whatif_sync over the
 * replayed arrivals); only once inst_ready() said it is known. */
static double inst_sync(const struct replay *P, const struct winst *in, int32_t idx, int sc)
{
    if (in->pat == CS_PAT_NXN || (in->pat == CS_PAT_NTO1 && idx == in->root))
        return (double)in->all_max[sc];
    int ok;
    return (double)cs__whatif_sync(in->pat, in->root, in->n, P->pA[sc] + in->off, NULL, idx, &ok);
}

/* Item i of rank w has arrived. */
static int arrived(const struct wrank *w, size_t i)
{
    return i < w->cur || (i == w->cur && w->cur_arrived);
}

/* The item at w's cursor can finish: its end in each scenario into E, and 1; 0 while it waits
 * for an arrival. */
static int try_item(struct replay *P, const struct wrank *w, double E[SC_N])
{
    const struct item *it = &w->it[w->cur];
    int forced = w->cur_forced;
    double S[SC_N];
    for (int sc = 0; sc < SC_N; sc++)
        S[sc] = it->A[sc];
    if (forced || it->init || it->nbp) {
        /* waits for nothing */
    } else if (it->dn) {
        for (int32_t d = 0; d < it->dn; d++) {
            const struct wdep *dp = &P->dep[it->doff + d];
            if (dp->inst == DEP_P2P) {
                const struct item *ini = &w->it[dp->idx];
                if (!arrived(&P->w[ini->pr], (size_t)ini->pi))
                    return 0;
                continue;
            }
            if (dp->inst >= 0 && !inst_ready(P, &P->in[dp->inst], dp->idx))
                return 0;
        }
        for (int32_t d = 0; d < it->dn; d++) {
            const struct wdep *dp = &P->dep[it->doff + d];
            if (dp->inst == DEP_P2P) {
                const struct item *ini = &w->it[dp->idx];
                const struct item *o = &P->w[ini->pr].it[ini->pi];
                for (int sc = 0; sc < SC_N; sc++)
                    if (o->A[sc] > S[sc])
                        S[sc] = o->A[sc];
                continue;
            }
            if (dp->inst < 0)
                continue;
            for (int sc = 0; sc < SC_N; sc++) {
                double s = inst_sync(P, &P->in[dp->inst], dp->idx, sc);
                if (s > S[sc])
                    S[sc] = s;
            }
        }
    } else if (it->inst >= 0) {
        struct winst *in = &P->in[it->inst];
        if (!inst_ready(P, in, it->idx))
            return 0;
        for (int sc = 0; sc < SC_N; sc++)
            S[sc] = inst_sync(P, in, it->idx, sc);
    } else if (it->pr >= 0) {
        const struct item *o = &P->w[it->pr].it[it->pi];
        if (!arrived(&P->w[it->pr], (size_t)it->pi))
            return 0;
        for (int sc = 0; sc < SC_N; sc++)
            if (o->A[sc] > S[sc])
                S[sc] = o->A[sc];
    }
    double x = it->x;
    if (forced)
        x = it->e - it->a;
    for (int sc = 0; sc < SC_N; sc++) {
        double xs = x;
        if (sc == SC_OVERLAP && it->comm)
            xs = 0;
        else if (sc == SC_BESTBW && it->inst >= 0 && !it->init && !forced)
            xs *= it->scale;
        double e = S[sc] + xs;
        E[sc] = e > it->A[sc] ? e : it->A[sc];
    }
    return 1;
}

/* Replay window k (-1: before the first step) in every scenario. */
static void replay_window(struct replay *P, int k)
{
    for (int r = 0; r < P->world; r++) {
        struct wrank *w = &P->w[r];
        w->cur = 0;
        w->cur_arrived = w->cur_forced = 0;
    }
    memset(P->ph, 0, P->npool);
    for (size_t x = 0; x < P->nin; x++) {
        P->in[x].narr = 0;
        P->in[x].all_known = 0;
    }
    for (;;) {
        int progress = 0, left = 0;
        for (int r = 0; r < P->world; r++) {
            struct wrank *w = &P->w[r];
            while (w->cur < w->n) {
                struct item *it = &w->it[w->cur];
                if (!w->cur_arrived) {
                    w->cur_arrived = 1;
                    size_t o = it->inst >= 0 ? P->in[it->inst].off + (size_t)it->idx : 0;
                    for (int sc = 0; sc < SC_N; sc++) {
                        double f = sc != SC_NOSTRAG ? 1 : w->cur == 0 ? w->f_prev : w->f_cur;
                        it->A[sc] = w->R[sc] + it->gap * f;
                        mark(P, w, sc, k, it, it->A[sc]);
                        if (it->inst >= 0)
                            P->pA[sc][o] = round_ns(it->A[sc]);
                    }
                    if (it->inst >= 0) {
                        P->ph[o] = 1;
                        P->in[it->inst].narr++;
                    }
                    progress = 1;
                }
                double E[SC_N];
                if (!try_item(P, w, E))
                    break;
                for (int sc = 0; sc < SC_N; sc++)
                    w->R[sc] = E[sc];
                w->cur++;
                w->cur_arrived = w->cur_forced = 0;
                progress = 1;
            }
            left |= w->cur < w->n;
        }
        if (!left)
            break;
        if (!progress) {
            /* A cycle of dependencies (clock error): cut the earliest waiting item's. */
            struct wrank *cut = NULL;
            for (int r = 0; r < P->world; r++) {
                struct wrank *w = &P->w[r];
                if (w->cur < w->n && (!cut || w->it[w->cur].a < cut->it[cut->cur].a))
                    cut = w;
            }
            cut->cur_forced = 1;
            P->forced++;
        }
    }
}

/* Sorts c[0..m-1] in place (insertion sort: a few thousand ranks at most); their median, 0 when
 * m is 0. */
double cs__whatif_median(double *c, size_t m)
{
    for (size_t i = 1; i < m; i++)
        for (size_t j = i; j > 0 && c[j - 1] > c[j]; j--) {
            double t = c[j];
            c[j] = c[j - 1];
            c[j - 1] = t;
        }
    return !m ? 0 : m % 2 ? c[m / 2] : (c[m / 2 - 1] + c[m / 2]) / 2;
}

/* The no-straggler factors of the window: median compute over ranks / the rank's compute. */
static int straggler_factors(struct replay *P, int k)
{
    double *c = malloc(((size_t)P->world + 1) * sizeof *c);
    size_t m = 0;
    if (!c)
        return -1;
    for (int r = 0; r < P->world; r++) {
        struct wrank *w = &P->w[r];
        w->f_prev = w->f_cur;
        w->f_cur = 1;
        w->comp = 0;
        if (!w->n || k < 0)
            continue;
        for (size_t i = 1; i < w->n; i++)
            w->comp += w->it[i].gap;
        w->comp += w->next_gap;
        c[m++] = w->comp;
    }
    double med = cs__whatif_median(c, m);
    free(c);
    for (int r = 0; r < P->world; r++) {
        struct wrank *w = &P->w[r];
        if (w->n && k >= 0 && w->comp > 0)
            w->f_cur = med / w->comp;
    }
    return 0;
}

static void replay_free(struct replay *P)
{
    if (P->w)
        for (int r = 0; r < P->world; r++)
            free(P->w[r].it);
    free(P->w);
    free(P->in);
    free(P->pa);
    for (int sc = 0; sc < SC_N; sc++)
        free(P->pA[sc]);
    free(P->pref);
    free(P->pitem);
    free(P->ph);
    cs__map_free(&P->imap);
    cs__map_free(&P->scnt);
    cs__map_free(&P->rcnt);
    cs__map_free(&P->pair);
    cs__map_free(&P->req);
    free(P->dep);
    for (int sc = 0; sc < SC_N; sc++)
        free(P->sum[sc]);
    free(P->cnt);
}

void cs__whatif_report(struct cs__run *run, struct cs__steps *S, int first, int end,
                       double measured_s, struct cs_report_whatif *o)
{
    o->measured_step_s = measured_s;
    if (!S->mode || end <= first || !(measured_s > 0)) {
        snprintf(o->note, sizeof o->note, "no complete steps to replay");
        return;
    }
    struct replay P = {.run = run, .S = S, .world = run->world, .first = first, .end = end};
    int rc = 0;
    P.w = calloc((size_t)run->world + 1, sizeof *P.w);
    P.cnt = calloc((size_t)end + 1, sizeof *P.cnt);
    for (int sc = 0; sc < SC_N; sc++) {
        P.sum[sc] = calloc((size_t)end + 1, sizeof *P.sum[sc]);
        rc |= !P.sum[sc];
    }
    if (!P.w || !P.cnt || rc || pool_grow(&P, 256)) {
        replay_free(&P);
        snprintf(o->note, sizeof o->note, "out of memory for the what-if replay");
        return;
    }
    for (unsigned op = 0; op < CS_OP_MAX; op++) {
        P.kind[op] = (unsigned char)cs_op_info(op)->kind;
        P.pat[op] = (unsigned char)cs_op_info(op)->pattern;
    }
    int have_origin = 0;
    for (int r = 0; r < run->world; r++) {
        struct cs__rank *rk = &run->ranks[r];
        P.w[r].done = !rk->present;
        P.w[r].f_cur = P.w[r].f_prev = 1;
        for (int sc = 0; sc < SC_N; sc++)
            P.w[r].open_step[sc] = -1;
        if (!rk->present)
            continue;
        cs_reader_rewind(rk->rd);
        if (!have_origin || (double)rk->t_first < P.origin)
            P.origin = (double)rk->t_first;
        have_origin = 1;
    }
    for (int k = -1; rc == 0; k++) {
        cs__map_clear(&P.imap);
        cs__map_clear(&P.scnt);
        cs__map_clear(&P.rcnt);
        cs__map_clear(&P.pair);
        cs__map_clear(&P.req);
        P.nin = P.npool = P.ndep = 0;
        int any = 0;
        for (int r = 0; r < run->world && rc == 0; r++) {
            rc = read_window(&P, r, k < 0);
            any |= P.w[r].n > 0;
        }
        if (rc || (!any && k >= 0))
            break;
        resolve(&P);
        if (straggler_factors(&P, k)) {
            rc = -1;
            break;
        }
        replay_window(&P, k);
    }
    /* Steps still open end at the rank's last replayed end (MPI_Finalize closes them above). */
    for (int r = 0; r < run->world; r++)
        for (int sc = 0; sc < SC_N; sc++)
            if (P.w[r].open_step[sc] >= 0)
                step_done(&P, sc, P.w[r].open_step[sc], P.w[r].open_at[sc], P.w[r].R[sc]);
    if (rc) {
        snprintf(o->note, sizeof o->note, "out of memory for the what-if replay");
    } else {
        cs__whatif_means(P.sum, P.cnt, first, end, measured_s, o);
        if (P.cut || P.forced)
            snprintf(o->note, sizeof o->note,
                     "%llu collective calls had members outside their step window and %llu"
                     " dependency cycles were cut; those calls keep their measured times",
                     (unsigned long long)P.cut, (unsigned long long)P.forced);
    }
    for (int r = 0; r < run->world; r++)
        if (run->ranks[r].present)
            cs_reader_rewind(run->ranks[r].rd);
    replay_free(&P);
}
