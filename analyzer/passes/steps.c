/*
 * Steps: where each training iteration begins on every rank, and what its time was spent on.
 *
 * Before the merge, a pre-pass reads one rank (the lowest present, the "reference") to choose the
 * step boundaries: step markers when it has any (MPI_Pcontrol with a level other than 0, or the op
 * COMMSCOPE_STEP_MARKER names), otherwise the period of its communication pattern: the call
 * signature (op, communicator class, bytes) that every other periodic signature repeats a fixed
 * number of times between two of its occurrences anchors the steps.  The same pass (and one on a
 * member of each class the reference rank is not in) measures each class's traffic for the
 * group inference (groups.c).
 *
 * During the merge every event of a rank is booked to the rank's open step: calls by dimension,
 * the waits of blocking collectives when their instance completes (into the step the member
 * arrived in), and each request's overlap at its completion record.  Formulas: docs/metrics.md.
 */
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "steps_internal.h"

static int is_red(unsigned op)
{
    switch (op) {
    case CS_OP_ALLREDUCE:
    case CS_OP_REDUCE:
    case CS_OP_REDUCE_SCATTER:
    case CS_OP_REDUCE_SCATTER_BLOCK:
    case CS_OP_IALLREDUCE:
    case CS_OP_IREDUCE:
    case CS_OP_IREDUCE_SCATTER:
    case CS_OP_IREDUCE_SCATTER_BLOCK:
    case CS_OP_NCCL_ALLREDUCE:
    case CS_OP_NCCL_REDUCE:
    case CS_OP_NCCL_REDUCE_SCATTER:
    case CS_OP_GLOO_ALLREDUCE:
    case CS_OP_GLOO_REDUCE:
    case CS_OP_GLOO_REDUCE_SCATTER:
        return 1;
    default:
        return 0;
    }
}

static int is_a2a(unsigned op)
{
    switch (op) {
    case CS_OP_ALLTOALL:
    case CS_OP_ALLTOALLV:
    case CS_OP_ALLTOALLW:
    case CS_OP_IALLTOALL:
    case CS_OP_IALLTOALLV:
    case CS_OP_IALLTOALLW:
    case CS_OP_NCCL_ALLTOALL:
    case CS_OP_GLOO_ALLTOALL:
        return 1;
    default:
        return 0;
    }
}

static int is_traffic(enum cs_op_kind k)
{
    return k == CS_KIND_COLL || k == CS_KIND_ICOLL || k == CS_KIND_P2P || k == CS_KIND_IP2P ||
           k == CS_KIND_NCOLL || k == CS_KIND_NP2P;
}

static int cls_of(struct cs__run *run, struct cs__steps *S, uint64_t comm)
{
    int ci = cs__groups_comm_cached(run, S, comm);
    return ci < 0 ? -1 : S->groups.comms[ci].cls;
}

/* ---- period detection (pre-passes over the reference rank) ---- */

#define NSIG 64
#define NCAND 128

/*
 * A candidate: the steps start at every m-th occurrence of signature `anchor`, giving n steps.
 * Every other signature t then either occurs the same number of times mt >= 1 in each step
 * (locked to the candidate; seen in two complete steps at least), or not.  The best candidate locks
 * most signatures (then: most steps).
 */
struct detect {
    struct sig {
        uint16_t op;
        int cls;
        uint64_t bytes;
        uint64_t count;
    } s[NSIG];
    int n;
    /* Direct-mapped memo of sig_of in front of the linear search (an index stays valid: the
     * signatures are only appended, and -1 means the table was full). */
    struct sig_memo {
        uint64_t bytes;
        int cls;
        int idx1; /* index + 2 (1: no signature), 0 empty */
        uint16_t op;
    } memo[64];
    int ncand;
    uint64_t calls; /* traffic calls seen by the evaluation (position of the current one) */
    struct cand {
        int anchor;
        uint64_t m, n, occ;
        uint64_t first, last; /* positions (in calls) of the first and last step start */
        uint64_t checks;      /* complete steps seen */
        int started;
        uint32_t between[NSIG];
        int32_t mt[NSIG];
        unsigned char broken[NSIG];
    } c[NCAND];
};

/* The signature index of (op, cls, bytes), added when `add` and there is room; -1 none. */
static int sig_of(struct detect *d, uint16_t op, int cls, uint64_t bytes, int add)
{
    for (int i = 0; i < d->n; i++)
        if (d->s[i].op == op && d->s[i].cls == cls && d->s[i].bytes == bytes)
            return i;
    if (!add || d->n == NSIG)
        return -1; /* only the first NSIG signatures are candidates */
    d->s[d->n] = (struct sig){.op = op, .cls = cls, .bytes = bytes};
    return d->n++;
}

/* sig_of through the memo. */
static inline int sig_memo(struct detect *d, uint16_t op, int cls, uint64_t bytes, int add)
{
    uint64_t h = (bytes * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)op << 32) ^ (uint64_t)(uint32_t)cls;
    struct sig_memo *m = &d->memo[(h * 0x2545f4914f6cdd1dull) >> 58];
    if (m->idx1 && m->op == op && m->cls == cls && m->bytes == bytes)
        return m->idx1 - 2;
    int x = sig_of(d, op, cls, bytes, add);
    if (x >= 0 || d->n == NSIG) /* a miss without room stays a miss; without `add` maybe not */
        *m = (struct sig_memo){.bytes = bytes, .cls = cls, .idx1 = x + 2, .op = op};
    return x;
}

static void detect_candidates(struct detect *d)
{
    for (int s = 0; s < d->n; s++) {
        uint64_t c = d->s[s].count;
        for (uint64_t m = 1; m <= 64 && 2 * m <= c; m++) {
            if (c % m)
                continue;
            uint64_t n = c / m;
            int j = 0;
            while (j < d->ncand && d->c[j].n != n)
                j++;
            if (j == d->ncand) {
                if (d->ncand == NCAND)
                    continue;
                d->ncand++;
            } else if (d->c[j].m <= m) {
                continue; /* the anchor that repeats least within a step is kept */
            }
            d->c[j] = (struct cand){.anchor = s, .m = m, .n = n};
            for (int t = 0; t < NSIG; t++)
                d->c[j].mt[t] = -1;
        }
    }
}

static void detect_eval(struct detect *d, int x)
{
    for (int j = 0; j < d->ncand; j++) {
        struct cand *c = &d->c[j];
        if (x == c->anchor) {
            if (c->occ++ % c->m == 0) {
                if (!c->started)
                    c->first = d->calls;
                c->last = d->calls;
                for (int t = 0; t < d->n && c->started; t++) {
                    if (t == c->anchor)
                        continue;
                    if (c->mt[t] < 0)
                        c->mt[t] = (int32_t)c->between[t];
                    else if ((uint32_t)c->mt[t] != c->between[t])
                        c->broken[t] = 1;
                }
                c->checks += c->started;
                memset(c->between, 0, sizeof c->between);
                c->started = 1;
            }
        } else if (c->started) {
            c->between[x]++;
        }
    }
}

/* Signature t repeats with candidate c: its anchor, or the same number of times in every
 * complete step (a lock needs two complete steps to be seen at all). */
static int locked(const struct cand *c, int t)
{
    return t == c->anchor || (c->checks >= 2 && !c->broken[t] && c->mt[t] >= 1);
}

/* The share of the rank's traffic calls from candidate c's first step start to its last. */
static double coverage(const struct detect *d, const struct cand *c)
{
    return d->calls && c->checks ? (double)(c->last - c->first) / (double)d->calls : 0;
}

static int locks(const struct detect *d, const struct cand *c)
{
    int score = 0;
    for (int t = 0; t < d->n; t++)
        score += t != c->anchor && locked(c, t);
    return score;
}

/*
 * Steps are a repeated structure of several calls over the run: a candidate is eligible when at
 * least one other signature is locked to it (a call repeating alone, a barrier between
 * irregular phases, is no step) and its step starts span at least half of the rank's traffic
 * calls (an exact message size made in one phase only, one size of a ping-pong sweep or one
 * neighbour-list period of a molecular-dynamics code, is no period of the run).
 */
#define COVER_MIN 0.5

static int eligible(const struct detect *d, const struct cand *c)
{
    return c->checks >= 2 && coverage(d, c) >= COVER_MIN && locks(d, c) >= 1;
}

/*
 * The best candidate, or -1; *score: the other signatures locked to it; *occasional: signatures
 * locked to the candidate the rule picked first that are left out of the finer one chosen.
 *
 * Among the eligible candidates, the rule: the one that locks most signatures, then the one with
 * most steps.  A call made
 * every few steps only (a loss all-reduce every 5 steps, a checkpoint every 100) locks to a
 * candidate of as many steps, which then locks one signature more than the true steps do; so a
 * finer candidate (steps that divide the chosen ones) is taken instead when it locks every
 * signature the chosen one locks except calls fewer than its steps (less than once per step:
 * occasional, not part of every step) that carry under 2 % of the rank's bytes, and locks at
 * least one signature.  The finest such wins.  (The bytes tell an occasional call from the
 * gradient all-reduce of a pipeline's step, which is also made once per several micro-batches,
 * each of them a finer candidate.)
 */
static int detect_best(const struct detect *d, int *score_out, int *occasional)
{
    int best = -1, best_score = -1;
    for (int j = 0; j < d->ncand; j++) {
        const struct cand *c = &d->c[j];
        if (!eligible(d, c))
            continue;
        int score = locks(d, c);
        if (best < 0 || score > best_score || (score == best_score && c->n > d->c[best].n)) {
            best = j;
            best_score = score;
        }
    }
    *occasional = 0;
    if (best < 0) {
        *score_out = best_score;
        return best;
    }
    const struct cand *b = &d->c[best];
    int fine = best, fine_score = best_score;
    double bytes = 0; /* (in double: a sum of products of 64-bit numbers) */
    for (int t = 0; t < d->n; t++)
        bytes += (double)d->s[t].count * (double)d->s[t].bytes;
    for (int j = 0; j < d->ncand; j++) {
        const struct cand *c = &d->c[j];
        if (c->n <= d->c[fine].n || c->n % b->n || !eligible(d, c))
            continue;
        int ok = 1, score = 0, dropped = 0;
        double dropped_bytes = 0;
        for (int t = 0; t < d->n && ok; t++) {
            int in_c = locked(c, t);
            score += t != c->anchor && in_c;
            if (locked(b, t) && !in_c) {
                dropped++;
                dropped_bytes += (double)d->s[t].count * (double)d->s[t].bytes;
                ok = d->s[t].count < c->n;
            }
        }
        if (ok && score >= 1 && dropped_bytes <= 0.02 * bytes) {
            fine = j;
            fine_score = score;
            *occasional = dropped;
        }
    }
    *score_out = fine_score;
    return fine;
}

/* Why no candidate was chosen: none repeats, the repeating calls repeat alone, or the best
 * structure of several calls spans too little of the run. */
static void explain_none(const struct detect *d, char *buf, size_t n, const char *marker, int ref)
{
    int wide = -1, multi = -1;
    for (int j = 0; j < d->ncand; j++) {
        const struct cand *c = &d->c[j];
        if (c->checks < 2)
            continue;
        if (locks(d, c) >= 1) {
            if (multi < 0 || coverage(d, c) > coverage(d, &d->c[multi]))
                multi = j;
        } else if (wide < 0 || coverage(d, c) > coverage(d, &d->c[wide])) {
            wide = j;
        }
    }
    int len = snprintf(buf, n, "no steps: no step markers (%s) and ", marker);
    if (len < 0 || (size_t)len >= n)
        return;
    if (multi >= 0) {
        const struct cand *c = &d->c[multi];
        const struct sig *a = &d->s[c->anchor];
        snprintf(buf + len, n - (size_t)len,
                 "no structure of several calls repeats over rank %d's run: the widest, %" PRIu64
                 " repeats starting at %s of %" PRIu64
                 " bytes, spans %.1f %% of its calls (a step must span half)",
                 ref, c->n, cs_op_name(a->op), a->bytes, 100 * coverage(d, c));
    } else if (wide >= 0) {
        const struct sig *a = &d->s[d->c[wide].anchor];
        snprintf(buf + len, n - (size_t)len,
                 "no structure of several calls repeats on rank %d: calls such as %s of %" PRIu64
                 " bytes repeat, but no other call repeats the same number of times with them",
                 ref, cs_op_name(a->op), a->bytes);
    } else {
        snprintf(buf + len, n - (size_t)len, "no communication call repeats on rank %d", ref);
    }
}

/* ---- markers and anchors ---- */

/* NVTX range names that mark steps when COMMSCOPE_STEP_NVTX does not say (docs/metrics.md). */
static const char *const nvtx_default[] = {
    "ProfilerStep#*", "step",        "step[ #_:-]*", "Step",
    "Step[ #_:-]*",   "train_step*", "iteration",    "iteration[ #_:-]*"};

/* Whether NVTX record ev (a range begin or end) names a step range. */
static int nvtx_step(const struct cs__steps *S, const struct cs_event *ev)
{
    char name[CS_NVTX_NAME_MAX + 1];
    cs_event_nvtx_name(ev, name);
    if (S->detect.nvtx_pat[0])
        return fnmatch(S->detect.nvtx_pat, name, 0) == 0;
    for (size_t i = 0; i < sizeof nvtx_default / sizeof nvtx_default[0]; i++)
        if (fnmatch(nvtx_default[i], name, 0) == 0)
            return 1;
    return 0;
}

/* 1 starts a step, -1 ends one (MPI_Pcontrol(0)), 0 neither. */
static int boundary(struct cs__run *run, struct cs__steps *S, const struct cs_event *ev,
                    enum cs_op_kind k, uint64_t *occ)
{
    if (S->detect.mode == 1 && ev->op == S->detect.marker_op)
        return ev->op == CS_OP_PCONTROL && ev->aux == 0 ? -1 : 1;
    if (S->detect.mode == 3 &&
        (ev->op == CS_OP_NVTX_RANGE_BEGIN || ev->op == CS_OP_NVTX_RANGE_END)) {
        /* Only the outermost step range counts (a "train_step" inside "ProfilerStep#3" is the
         * same step): *occ is the rank's depth of open step ranges. */
        if (!nvtx_step(S, ev))
            return 0;
        if (ev->op == CS_OP_NVTX_RANGE_BEGIN)
            return (*occ)++ == 0;
        return *occ > 0 && --*occ == 0 ? -1 : 0;
    }
    if (S->detect.mode == 2 && ev->op == S->detect.anchor_op &&
        ev->bytes == S->detect.anchor_bytes && is_traffic(k) &&
        cls_of(run, S, ev->comm) == S->detect.anchor_cls)
        return (*occ)++ % S->detect.anchor_m == 0;
    return 0;
}

/* boundary() in the pattern mode, inline: the anchor starts a step once per step on every rank
 * (and every m-th occurrence is the common m == 1 without a division). */
static inline int anchor_boundary(struct cs__run *run, struct cs__steps *S,
                                  const struct cs_event *ev, enum cs_op_kind k, uint64_t *occ)
{
    if (ev->op != S->detect.anchor_op || ev->bytes != S->detect.anchor_bytes || !is_traffic(k) ||
        cls_of(run, S, ev->comm) != S->detect.anchor_cls)
        return 0;
    return S->detect.anchor_m == 1 ? ((*occ)++, 1) : (*occ)++ % S->detect.anchor_m == 0;
}

int cs__steps_boundary_slow(struct cs__run *run, struct cs__steps *S, const struct cs_event *ev,
                            enum cs_op_kind k, uint64_t *occ)
{
    if (S->detect.mode == 2)
        return anchor_boundary(run, S, ev, k, occ);
    return cs__steps_boundary_op(S, ev->op) ? boundary(run, S, ev, k, occ) : 0;
}

/* One pre-pass over rank r: class traffic (classes first seen in this pass, id `pass`), markers,
 * anchors, and the signature counts (d_count) or the candidates' evaluation (d_eval) when given.
 * Returns the steps found on the rank. */
static uint64_t prepass(struct cs__run *run, struct cs__steps *S, int r, int pass,
                        struct detect *d_count, struct detect *d_eval, uint64_t *markers)
{
    struct cs_reader *rd = run->ranks[r].rd;
    const struct cs_event *ev;
    uint64_t anchors = 0, occ = 0, nvtx = 0, nvtx_depth = 0;
    *markers = 0;
    /* Op kinds by table, and which ops this pass looks at at all (ops beyond the table: all). */
    enum { PF_LOOK = 0x80 };
    unsigned char pk[CS_OP_MAX];
    for (unsigned op = 0; op < CS_OP_MAX; op++) {
        enum cs_op_kind k = cs_op_info(op)->kind;
        int look = is_traffic(k) || op == S->detect.marker_op || op == CS_OP_NVTX_RANGE_BEGIN ||
                   op == CS_OP_NVTX_RANGE_END;
        pk[op] = (unsigned char)(k | (look ? PF_LOOK : 0));
    }
    while ((ev = cs_reader_next(rd))) {
        enum cs_op_kind k;
        if (ev->op < CS_OP_MAX) {
            if (!(pk[ev->op] & PF_LOOK))
                continue;
            k = (enum cs_op_kind)(pk[ev->op] & ~PF_LOOK);
        } else {
            k = cs_op_info(ev->op)->kind;
        }
        if (ev->op == S->detect.marker_op && !(ev->op == CS_OP_PCONTROL && ev->aux == 0))
            (*markers)++;
        if ((ev->op == CS_OP_NVTX_RANGE_BEGIN || ev->op == CS_OP_NVTX_RANGE_END) &&
            nvtx_step(S, ev)) {
            /* outermost step ranges only, as boundary() counts them */
            if (ev->op == CS_OP_NVTX_RANGE_BEGIN)
                nvtx += nvtx_depth++ == 0;
            else if (nvtx_depth > 0)
                nvtx_depth--;
        }
        if (!is_traffic(k))
            continue;
        if (S->detect.mode == 2 && boundary(run, S, ev, k, &occ) == 1)
            anchors++;
        int c = cls_of(run, S, ev->comm);
        if (c >= 0 && pass > 0) {
            struct cs__cclass *cl = &S->groups.classes[c];
            if (!cl->observed)
                cl->observed = pass;
            if (cl->observed == pass) {
                cl->calls++;
                cl->red += is_red(ev->op);
                cl->a2a += is_a2a(ev->op);
                int p2p = k == CS_KIND_P2P || k == CS_KIND_IP2P || k == CS_KIND_NP2P;
                cl->p2p += p2p;
                if (p2p && ev->peer >= 0 && ev->peer != r && cl->npeers < 3) {
                    int seen = 0;
                    for (int j = 0; j < cl->npeers && j < 2; j++)
                        seen |= cl->peer[j] == ev->peer;
                    if (!seen) {
                        if (cl->npeers < 2)
                            cl->peer[cl->npeers] = ev->peer;
                        cl->npeers++;
                    }
                }
                cl->coll += k == CS_KIND_COLL || k == CS_KIND_ICOLL || k == CS_KIND_NCOLL;
            }
        }
        if (d_count) {
            int x = sig_memo(d_count, ev->op, c, ev->bytes, 1);
            if (x >= 0)
                d_count->s[x].count++;
        }
        if (d_eval) {
            int x = sig_memo(d_eval, ev->op, c, ev->bytes, 0);
            if (x >= 0)
                detect_eval(d_eval, x);
            d_eval->calls++;
        }
    }
    cs_reader_rewind(rd);
    S->detect.nvtx_steps = nvtx;
    return S->detect.mode == 1 ? *markers : S->detect.mode == 3 ? nvtx : anchors;
}

/*
 * Ring-mode windows start at one instant on every rank, which can fall between two ranks'
 * boundaries of one step: those would then count one step more than the others.  So each rank's
 * window starts again at the boundary of one same step: the reference rank's second boundary in
 * the window, recognised on every rank by the first collective call after it (its communicator and
 * sequence number, which all members agree on): each member starts at its last boundary before
 * that call.  A rank not in that communicator starts half way between the reference rank's first
 * two boundaries.  What comes before counts in the totals, as the rest outside.
 */
static void step_cut(struct cs__run *run, struct cs__steps *S)
{
    struct cs__rank *rk = &run->ranks[S->detect.ref];
    const struct cs_event *ev;
    uint64_t occ = 0, comm = 0;
    uint32_t seq = 0;
    int64_t b[2];
    int nb = 0;
    while ((ev = cs_reader_next(rk->rd))) {
        enum cs_op_kind k = cs_op_info(ev->op)->kind;
        if (nb < 2 && boundary(run, S, ev, k, &occ) == 1)
            b[nb++] = cs__clock_map(&rk->clk, ev->t_begin);
        else if (nb == 2 && ev->comm &&
                 (k == CS_KIND_COLL || k == CS_KIND_ICOLL || k == CS_KIND_NCOLL)) {
            comm = ev->comm;
            seq = ev->seq;
            break;
        }
    }
    cs_reader_rewind(rk->rd);
    if (nb < 2)
        return;
    for (int r = 0; r < run->world; r++) {
        struct cs_reader *rd = run->ranks[r].present ? run->ranks[r].rd : NULL;
        if (!rd || !cs_reader_totals(rd)->ring)
            continue;
        uint64_t last = 0, ro = 0;
        int found = 0;
        /* (a rank that does not make that call is not read further than a few steps) */
        int64_t stop = b[1] + 4 * (b[1] - b[0]);
        while (comm && (ev = cs_reader_next(rd)) &&
               cs__clock_map(&run->ranks[r].clk, ev->t_begin) <= stop) {
            enum cs_op_kind k = cs_op_info(ev->op)->kind;
            if (boundary(run, S, ev, k, &ro) == 1)
                last = ev->t_begin;
            else if (ev->comm == comm && ev->seq == seq &&
                     (k == CS_KIND_COLL || k == CS_KIND_ICOLL || k == CS_KIND_NCOLL)) {
                found = last != 0;
                break;
            }
        }
        cs_reader_rewind(rd);
        if (found && cs_reader_cut(rd, last))
            cs__problem(run, "rank %d: out of memory folding the events before the window", r);
        else if (!found)
            cs__window_recut(run, r, b[0] + (b[1] - b[0]) / 2);
    }
}

int cs__steps_begin(struct cs__run *run)
{
    struct cs__steps *S = calloc(1, sizeof *S);
    if (!S)
        return CS_ENOMEM;
    run->steps = S;
    S->run = run;
    S->detect.ref = -1;
    S->r = calloc((size_t)run->world + 1, sizeof *S->r);
    if (!S->r || cs__groups_build(run, S))
        return CS_ENOMEM;
    for (int r = 0; r < run->world; r++) {
        S->r[r].step = -1;
        S->r[r].acc = &S->sink;
    }
    for (unsigned op = 0; op < CS_OP_MAX; op++) {
        enum cs_op_kind k = cs_op_info(op)->kind;
        S->opf[op] = (unsigned char)((op == CS_OP_FINALIZE ? CS__OPF_FIN : 0) |
                                     (is_red(op) ? CS__OPF_RED : 0) |
                                     (k == CS_KIND_COLL || k == CS_KIND_NCOLL ? CS__OPF_WAITS : 0) |
                                     (k == CS_KIND_NCOLL ? CS__OPF_NCOLL : 0));
    }
    if (cs__sgpu_init(run, S))
        cs__problem(run, "out of memory for the GPU step budget; GPU ranks are budgeted from the"
                         " host");
    snprintf(S->detect.source, sizeof S->detect.source, "none");
    S->detect.marker_op = CS_OP_PCONTROL;
    const char *env = getenv("COMMSCOPE_STEP_MARKER");
    if (env && *env) {
        enum cs_op op = cs_op_by_name(env);
        if (op == CS_OP_NONE)
            cs__problem(run,
                        "COMMSCOPE_STEP_MARKER='%s' names no traced op (use a name such as"
                        " MPI_Pcontrol or MPI_Barrier); MPI_Pcontrol marks steps",
                        env);
        else
            S->detect.marker_op = (uint16_t)op;
    }
    const char *nv = getenv("COMMSCOPE_STEP_NVTX");
    if (nv && *nv)
        snprintf(S->detect.nvtx_pat, sizeof S->detect.nvtx_pat, "%s", nv);
    for (int r = 0; r < run->world && S->detect.ref < 0; r++)
        if (run->ranks[r].present)
            S->detect.ref = r;
    if (S->detect.ref < 0)
        return 0;

    struct detect *d = calloc(1, sizeof *d);
    if (!d)
        return CS_ENOMEM;
    uint64_t markers;
    prepass(run, S, S->detect.ref, 1, d, NULL, &markers);
    double steps = 0;
    /* NVTX step ranges: first when COMMSCOPE_STEP_NVTX names them, else after the markers. */
    if (S->detect.nvtx_steps > 0 && (S->detect.nvtx_pat[0] || markers == 0)) {
        S->detect.mode = 3;
        steps = (double)S->detect.nvtx_steps;
        snprintf(S->detect.source, sizeof S->detect.source, "nvtx");
        snprintf(S->detect.detail, sizeof S->detect.detail, "NVTX ranges named %s",
                 S->detect.nvtx_pat[0]
                     ? S->detect.nvtx_pat
                     : "ProfilerStep#*, step, step #N, Step, train_step*, iteration");
    } else if (markers > 0) {
        S->detect.mode = 1;
        steps = (double)markers;
        snprintf(S->detect.source, sizeof S->detect.source, "marker");
        snprintf(S->detect.detail, sizeof S->detect.detail, "%s%s", cs_op_name(S->detect.marker_op),
                 S->detect.marker_op == CS_OP_PCONTROL ? " (level != 0)" : "");
    } else {
        /* Second look at the reference rank: which period explains its calls best. */
        detect_candidates(d);
        if (d->ncand)
            prepass(run, S, S->detect.ref, 0, NULL, d, &markers);
        int score, occasional, best = detect_best(d, &score, &occasional);
        if (best >= 0) {
            const struct cand *c = &d->c[best];
            const struct sig *a = &d->s[c->anchor];
            S->detect.mode = 2;
            S->detect.anchor_op = a->op;
            S->detect.anchor_cls = a->cls;
            S->detect.anchor_bytes = a->bytes;
            S->detect.anchor_m = c->m;
            steps = (double)c->n;
            /* Evidence for reduction roles: the classes whose reductions repeat with the steps. */
            for (int x = 0; x < d->n; x++)
                if (locked(c, x) && is_red(d->s[x].op) && d->s[x].cls >= 0 &&
                    (size_t)d->s[x].cls < S->groups.nclasses)
                    S->groups.classes[d->s[x].cls].red_locked = 1;
            snprintf(S->detect.source, sizeof S->detect.source, "pattern");
            char which[32] = "each", occ[64] = "";
            if (c->m != 1)
                snprintf(which, sizeof which, "one in every %" PRIu64, c->m);
            if (occasional)
                snprintf(occ, sizeof occ, "; %d more made every few steps only", occasional);
            snprintf(S->detect.detail, sizeof S->detect.detail,
                     "%s %s of %" PRIu64 " bytes starts a step (%d other call signature%s"
                     " repeat%s with it%s; the steps span %.0f %% of rank %d's calls)",
                     which, cs_op_name(a->op), a->bytes, score, score == 1 ? "" : "s",
                     score == 1 ? "s" : "", occ, 100 * coverage(d, c), S->detect.ref);
        } else {
            explain_none(d, S->detect.note, sizeof S->detect.note, cs_op_name(S->detect.marker_op),
                         S->detect.ref);
        }
    }
    free(d);
    for (unsigned op = 0; op < CS_OP_MAX; op++)
        if (cs__steps_boundary_op(S, op))
            S->opf[op] |= CS__OPF_BOUND;
    if (run->windows && S->detect.mode)
        step_cut(run, S);
    S->detect.ref_steps = (int)steps;
    for (size_t c = 0; c < S->groups.nclasses; c++)
        if (S->groups.classes[c].observed == 1)
            S->groups.classes[c].steps = steps;
    /* Classes the reference rank is not in: a pre-pass over the lowest present member of each. */
    int pass = 1;
    for (size_t c = 0; c < S->groups.nclasses; c++) {
        if (S->groups.classes[c].observed)
            continue;
        int who = -1;
        for (size_t i = 0; i < S->groups.ncomms && who < 0; i++) {
            const struct cs__scomm *sc = &S->groups.comms[i];
            if (sc->cls != (int)c)
                continue;
            for (int32_t m = 0; m < sc->size && who < 0; m++)
                if (cs__member_present(run, sc->members[m]))
                    who = sc->members[m];
        }
        if (who < 0)
            continue;
        pass++;
        /* (also without steps: the class's traffic names its group) */
        uint64_t found = prepass(run, S, who, pass, NULL, NULL, &markers);
        double st = S->detect.mode ? (double)found : 0;
        for (size_t j = 0; j < S->groups.nclasses; j++)
            if (S->groups.classes[j].observed == pass)
                S->groups.classes[j].steps = st;
    }
    cs__groups_infer(run, S);
    return 0;
}

/* ---- the main pass ---- */

static struct cs__budget *step_slot(struct cs__steps *S, size_t k)
{
    if (k >= S->capg) {
        size_t cap = S->capg ? 2 * S->capg : 64;
        while (cap <= k)
            cap *= 2;
        void *p = realloc(S->g, cap * sizeof *S->g);
        if (!p)
            return NULL;
        memset((struct cs__budget *)p + S->capg, 0, (cap - S->capg) * sizeof *S->g);
        S->g = p;
        S->capg = cap;
    }
    if (k >= S->ng)
        S->ng = k + 1;
    return &S->g[k];
}

static void budget_add(struct cs__budget *restrict to, const struct cs__budget *restrict b)
{
    /* Two lanes at a time (SSE2 / NEON): each field's sum is the same scalar addition. */
    typedef double v2 __attribute__((vector_size(16), aligned(8)));
    enum { N = sizeof *b / sizeof(double) };
    const double *s = (const double *)b;
    double *t = (double *)to;
    size_t i = 0;
    for (; i + 2 <= N; i += 2) {
        v2 x, y;
        memcpy(&x, t + i, sizeof x);
        memcpy(&y, s + i, sizeof y);
        x += y;
        memcpy(t + i, &x, sizeof x);
    }
    for (; i < N; i++)
        t[i] += s[i];
}

/* budget_add(a, b) and budget_add(c, b) in one pass over b (the same additions). */
static void budget_add2(struct cs__budget *restrict a, struct cs__budget *restrict c,
                        const struct cs__budget *restrict b)
{
    typedef double v2 __attribute__((vector_size(16), aligned(8)));
    enum { N = sizeof *b / sizeof(double) };
    const double *s = (const double *)b;
    double *t = (double *)a, *u = (double *)c;
    size_t i = 0;
    for (; i + 2 <= N; i += 2) {
        v2 x, y, z;
        memcpy(&y, s + i, sizeof y);
        memcpy(&x, t + i, sizeof x);
        memcpy(&z, u + i, sizeof z);
        x += y;
        z += y;
        memcpy(t + i, &x, sizeof x);
        memcpy(u + i, &z, sizeof z);
    }
    for (; i < N; i++) {
        t[i] += s[i];
        u[i] += s[i];
    }
}

static void close_step(struct cs__steps *S, struct cs__srank *sr, int64_t t, int fold)
{
    if (!sr->in_step)
        return;
    sr->in_step = 0;
    sr->acc = &S->sink;
    sr->cur.n = 1;
    sr->cur.dur = t > sr->begin ? (double)(t - sr->begin) : 0;
    if (sr->gpu) {
        sr->cur.gn = 1;
        sr->cur.gdur = sr->cur.dur;
    }
    struct cs__budget *g = step_slot(S, (size_t)sr->step);
    struct cs__budget *f = sr->step == 0 ? &sr->first : &sr->rest;
    if (g && fold)
        budget_add2(g, f, &sr->cur);
    else if (g)
        budget_add(g, &sr->cur);
    else if (fold)
        budget_add(f, &sr->cur);
}

static void open_step(struct cs__srank *sr, int64_t t)
{
    sr->step++;
    sr->in_step = 1;
    sr->acc = &sr->cur;
    sr->begin = t;
    sr->ring[sr->step % CS__STEP_RING] = t;
    memset(&sr->cur, 0, sizeof sr->cur);
}

/* add_late for a step that is closed already. */
static void add_closed(struct cs__steps *S, struct cs__srank *sr, int k, size_t off, double v)
{
    struct cs__budget *g = step_slot(S, (size_t)k);
    if (g)
        *(double *)((char *)g + off) += v;
    *(double *)((char *)(k == 0 ? &sr->first : &sr->rest) + off) += v;
}

/* Add v to the double at offset off of step k of the rank (open or already closed).  Inline: the
 * waits of every instance member come here, nearly always into the open step. */
static inline void add_late(struct cs__steps *S, struct cs__srank *sr, int k, size_t off, double v)
{
    if (k < 0 || v == 0)
        return;
    if (sr->in_step && k == sr->step)
        *(double *)((char *)&sr->cur + off) += v;
    else
        add_closed(S, sr, k, off, v);
}

void cs__steps_add(struct cs__steps *S, int rank, int k, size_t off, double v)
{
    add_late(S, &S->r[rank], k, off, v);
}

/* The wait call of the rank is booked to communicator ci's dimension (-1: none known). */
static void flush_wait(struct cs__steps *S, struct cs__srank *sr, int ci, int red)
{
    enum cs__dim dim = cs__steps_dim(S, ci);
    add_late(S, sr, sr->wait_step, offsetof(struct cs__budget, blocked) + dim * sizeof(double),
             sr->wait_dur);
    if (red && dim == CS_DIM_DP)
        add_late(S, sr, sr->wait_step, offsetof(struct cs__budget, grad_blocked), sr->wait_dur);
    if (ci >= 0)
        S->groups.comms[ci].blocked += sr->wait_dur;
    sr->wait_open = 0;
}

/* The rank's request `request` in flight: its own list first, then the table; NULL none. */
static inline struct cs__sreq *rreq_find(const struct cs__steps *S, struct cs__srank *sr,
                                         uint64_t request)
{
    for (int i = 0; i < sr->nreq; i++)
        if (sr->req[i].key.req == request)
            return &sr->req[i];
    return cs__rtab_get(&S->reqs, sizeof(struct cs__sreq), (int)(sr - S->r), request);
}

/* ---- per event ---- */

/*
 * The per-event work is split so that the common case needs next to no stack frame: the entry
 * (cs__steps_event, with the booking event_book inline) calls nothing except as its last act
 * (tail calls), and whatever needs calls in the middle -- a step boundary, a wait call to book
 * into a closed step, GPU ranks, a communicator not in the cache, requests -- is done out of
 * line; the rare path (event_rare) then books the event through its own copy of event_book.
 * event_book and book_call are forced inline: with a second caller each, GCC's LTO made them
 * calls of their own (seven arguments passed and a frame per event).
 */
static inline __attribute__((always_inline)) void
event_book(struct cs__steps *S, struct cs__srank *sr, const struct cs_event *ev, enum cs_op_kind k,
           int64_t tb, int64_t te, unsigned f);

/* A non-blocking initiation: its request is in flight from now. */
__attribute__((noinline)) static void req_begin(struct cs__steps *S, struct cs__srank *sr,
                                                const struct cs_event *ev, int64_t tb, double busy0,
                                                int ci, int red)
{
    struct cs__sreq *q = rreq_find(S, sr, ev->request);
    if (!q) {
        if (sr->nreq < CS__RREQ) {
            q = &sr->req[sr->nreq++];
            q->key = (struct cs__rkey){ev->request, (int32_t)(sr - S->r) + 1};
        } else {
            q = cs__rtab_put(&S->reqs, sizeof *q, (int)(sr - S->r), ev->request);
        }
    }
    if (q) {
        q->comm = ci;
        q->tb = tb;
        q->busy0 = busy0;
        q->red = red;
    }
}

/* A completion record: the request's overlap, and the wait call that completed it. */
__attribute__((noinline)) static void event_done(struct cs__steps *S, struct cs__srank *sr,
                                                 const struct cs_event *ev, int64_t te)
{
    struct cs__sreq *q = rreq_find(S, sr, ev->request);
    if (sr->wait_open && te == sr->wait_te)
        flush_wait(S, sr, q ? q->comm : -1, q ? q->red : 0);
    if (!q)
        return;
    if (!(ev->flags & CS_EV_CANCELLED)) {
        /* In flight from the initiation to this record; exposed while inside MPI calls. */
        double D = te > q->tb ? (double)(te - q->tb) : 0;
        double E = sr->busy - q->busy0;
        double O = D > E ? D - E : 0;
        struct cs__budget *bu = sr->acc;
        bu->ovl += O;
        bu->span += D;
        if (q->red && cs__steps_dim(S, q->comm) == CS_DIM_DP)
            bu->grad_ovl += O;
        if (q->comm >= 0) {
            struct cs__scomm *sc = &S->groups.comms[q->comm];
            sc->ovl += O;
            sc->span += D;
        }
    }
    if (q >= sr->req && q < sr->req + CS__RREQ)
        *q = sr->req[--sr->nreq]; /* the last entry fills the hole */
    else
        cs__rtab_del(&S->reqs, sizeof *q, q);
}

/* A call on communicator ci (-1 unknown): its dimension's and the communicator's budget (f: the
 * op's flags). */
static inline __attribute__((always_inline)) void
book_call(struct cs__steps *S, struct cs__srank *sr, const struct cs_event *ev, enum cs_op_kind k,
          int64_t tb, double dur, int ci, unsigned f)
{
    struct cs__budget *bu = sr->acc;
    sr->busy += dur;
    bu->mpi += dur;
    int blocking = k == CS_KIND_COLL || k == CS_KIND_P2P;
    int red = (f & CS__OPF_RED) != 0;
    if (ci >= 0) {
        struct cs__scomm *sc = &S->groups.comms[ci];
        bu->blocked[sc->dim] += dur;
        if (red && sc->dim == CS_DIM_DP)
            bu->grad_blocked += dur;
        sc->blocked += dur;
        sc->bytes += (double)(ev->bytes > ev->bytes_recv ? ev->bytes : ev->bytes_recv);
        if (blocking) {
            bu->span += dur;
            sc->span += dur;
        }
    } else {
        bu->blocked[CS_DIM_OTHER] += dur;
        if (blocking)
            bu->span += dur;
    }
    if (!blocking)
        req_begin(S, sr, ev, tb, sr->busy - dur, ci, red);
}

/* A call on a communicator not in the cache (first seen, or unknown). */
__attribute__((noinline)) static void comm_miss(struct cs__steps *S, struct cs__srank *sr,
                                                const struct cs_event *ev, enum cs_op_kind k,
                                                int64_t tb, double dur)
{
    unsigned f = ev->op < CS_OP_MAX ? S->opf[ev->op] : 0;
    book_call(S, sr, ev, k, tb, dur, cs__groups_comm(S->run, S, ev->comm), f);
}

/*
 * The rare part of an event: a wait call's record still to book, a possible step boundary, the
 * rank's MPI_Finalize, or a rank whose budget comes from its GPUs; then the booking.
 */
__attribute__((noinline)) static void event_rare(struct cs__run *run, int rank,
                                                 const struct cs_event *ev, enum cs_op_kind k,
                                                 int64_t tb, int64_t te)
{
    struct cs__steps *S = run->steps;
    struct cs__srank *sr = &S->r[rank];
    unsigned f = ev->op < CS_OP_MAX ? S->opf[ev->op] : CS__OPF_BOUND;
    if (sr->wait_open && !(k == CS_KIND_DONE && te == sr->wait_te)) {
        /* flush_wait(S, sr, -1, 0) with its add to the open step inline: a step's first event
         * nearly always follows the last step's closing wait call. */
        if (sr->in_step && sr->wait_step == sr->step) {
            if (sr->wait_dur != 0)
                sr->cur.blocked[CS_DIM_OTHER] += sr->wait_dur;
            sr->wait_open = 0;
        } else {
            flush_wait(S, sr, -1, 0);
        }
    }
    /* Only the mode's boundary ops can start or end a step: test those before the call. */
    int b = 0;
    if (!(f & CS__OPF_BOUND)) {
    } else if (S->detect.mode == 2) {
        b = anchor_boundary(run, S, ev, k, &sr->occ);
    } else {
        b = cs__steps_boundary_slow(run, S, ev, k, &sr->occ);
    }
    if (b) {
        close_step(S, sr, tb, 1);
        if (b > 0)
            open_step(sr, tb);
        if (sr->gpu)
            cs__sgpu_boundary(S, rank, tb, b > 0 ? sr->step : -1);
    }
    if ((f & CS__OPF_FIN) && !sr->fin)
        sr->fin = tb;
    if (sr->gpu) {
        /* The budget of a rank with a GPU timeline comes from its GPUs (steps_gpu.c). */
        if (k == CS_KIND_NCOLL || k == CS_KIND_NP2P || k == CS_KIND_GROUP)
            cs__sgpu_launch(S, rank, ev);
        else if (k == CS_KIND_GPU)
            cs__sgpu_record(run, S, rank, ev, tb, te);
        return;
    }
    event_book(S, sr, ev, k, tb, te, f);
}

void cs__steps_event(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k,
                     int64_t tb, int64_t te)
{
    struct cs__steps *S = run->steps;
    if (!S)
        return;
    struct cs__srank *sr = &S->r[rank];
    /* Ops beyond the table take the rare path, which tests them in full.  A completion record
     * that ends the open wait call is booked with it (event_done), not here. */
    unsigned f = ev->op < CS_OP_MAX ? S->opf[ev->op] : CS__OPF_BOUND;
    if (__builtin_expect((f & (CS__OPF_BOUND | CS__OPF_FIN)) | sr->gpu, 0)) {
        /* A pattern's anchor op of other sizes can be no boundary: not worth the rare path. */
        if (!(S->detect.mode == 2 && (f & (CS__OPF_BOUND | CS__OPF_FIN)) == CS__OPF_BOUND &&
              ev->bytes != S->detect.anchor_bytes && !sr->gpu)) {
            event_rare(run, rank, ev, k, tb, te);
            return;
        }
    }
    if (__builtin_expect(sr->wait_open, 0) && !(k == CS_KIND_DONE && te == sr->wait_te)) {
        /* The wait call completed no request of a known communicator: flush_wait(S, sr, -1, 0)
         * here when its step is still the open one (or none), as it nearly always is. */
        if (sr->wait_step >= 0) {
            if (!(sr->in_step && sr->wait_step == sr->step)) {
                event_rare(run, rank, ev, k, tb, te);
                return;
            }
            if (sr->wait_dur != 0)
                sr->cur.blocked[CS_DIM_OTHER] += sr->wait_dur;
        }
        sr->wait_open = 0;
    }
    event_book(S, sr, ev, k, tb, te, f);
}

/* The host budget of one event (after any boundary it makes). */
static inline __attribute__((always_inline)) void
event_book(struct cs__steps *S, struct cs__srank *sr, const struct cs_event *ev, enum cs_op_kind k,
           int64_t tb, int64_t te, unsigned f)
{
    double dur = te > tb ? (double)(te - tb) : 0;
    switch (k) {
    case CS_KIND_COLL:
    case CS_KIND_P2P:
    case CS_KIND_ICOLL:
    case CS_KIND_IP2P: {
        /* The communicator cache knows nearly every call's communicator. */
        const struct cs__ccache *e = &S->groups.comm_cache[cs__ccache_slot(ev->comm)];
        if (__builtin_expect(!e->idx1 || e->id != ev->comm, 0))
            comm_miss(S, sr, ev, k, tb, dur);
        else
            book_call(S, sr, ev, k, tb, dur, e->idx1 - 1, f);
        return;
    }
    case CS_KIND_DONE:
        event_done(S, sr, ev, te);
        return;
    case CS_KIND_WAIT:
        sr->busy += dur;
        sr->acc->mpi += dur;
        sr->wait_open = 1;
        sr->wait_te = te;
        sr->wait_dur = dur;
        sr->wait_step = sr->in_step ? sr->step : -1;
        return;
    default:
        /* Outside a step the adds go to the sink (sr->acc), so they need no test. */
        sr->busy += dur;
        sr->acc->mpi += dur;
        sr->acc->other_mpi += dur;
        return;
    }
}

/* Placed like an NCCL instance member's waiting interval: only on a GPU timeline (steps_gpu.c),
 * where the exposed kernel time of the communicator inside [b, e) becomes waiting.  A rank
 * without one books no point-to-point wait (its host calls only enqueue the kernels). */
void cs__steps_p2p_wait(struct cs__run *run, int rank, uint64_t comm, int64_t b, int64_t e)
{
    struct cs__steps *S = run->steps;
    if (!S || rank < 0 || rank >= run->world || !S->r[rank].gpu || e <= b)
        return;
    cs__sgpu_wait(run, S, rank, cs__groups_comm_cached(run, S, comm), b, e, 1);
}

void cs__steps_instance(struct cs__run *run, const struct cs__inst *in)
{
    struct cs__steps *S = run->steps;
    if (!S)
        return;
    unsigned f = in->op < CS_OP_MAX ? S->opf[in->op] : 0;
    if (!(f & CS__OPF_WAITS) || in->n < 2)
        return;
    int ci = cs__groups_comm_cached(run, S, in->comm);
    enum cs__dim dim = cs__steps_dim(S, ci);
    int grad = (f & CS__OPF_RED) && dim == CS_DIM_DP;
    int ncoll = (f & CS__OPF_NCOLL) != 0;
    size_t off = offsetof(struct cs__budget, wait) + dim * sizeof(double);
    const int64_t *a = in->arr;
    for (int32_t i = 0; i < in->n; i++) {
        /* the member's wait by the op's pattern, as cs__metrics_instance computed it */
        int64_t w = in->wait[i];
        int64_t call = in->end[i] - a[i];
        if (w > call)
            w = call;
        if (w <= 0)
            continue;
        struct cs__srank *sr = &S->r[in->members[i]];
        if (sr->gpu && ncoll) {
            /* On a GPU timeline the waiting interval is placed among the kernels: only its part
             * not hidden by compute kernels is waiting (steps_gpu.c). */
            cs__sgpu_wait(run, S, in->members[i], ci, a[i], a[i] + w, 0);
            continue;
        }
        if (sr->in_step && a[i] >= sr->begin) {
            /* arrived in the open step (what cs__step_of and add_late find first) */
            sr->cur.wait[dim] += (double)w;
            if (grad)
                sr->cur.grad_wait += (double)w;
        } else {
            int k = cs__step_of(sr, a[i]);
            add_late(S, sr, k, off, (double)w);
            if (grad)
                add_late(S, sr, k, offsetof(struct cs__budget, grad_wait), (double)w);
        }
    }
    cs__whatif_instance(S, in, ci >= 0 ? S->groups.comms[ci].cls : -1);
}

void cs__steps_finish(struct cs__run *run)
{
    struct cs__steps *S = run->steps;
    if (!S)
        return;
    S->count_min = -1;
    for (int r = 0; r < run->world; r++) {
        struct cs__rank *rk = &run->ranks[r];
        struct cs__srank *sr = &S->r[r];
        if (!rk->present)
            continue;
        if (sr->wait_open)
            flush_wait(S, sr, -1, 0);
        /* The last step has no closing marker: it ends where MPI_Finalize begins (else at the
         * rank's last event) and is kept out of the statistics (it may hold shut-down work). */
        if (r == S->detect.ref)
            S->tail = sr->in_step;
        if (sr->gpu)
            cs__sgpu_finish_rank(S, r, sr->fin ? sr->fin : rk->t_last_end);
        close_step(S, sr, sr->fin ? sr->fin : rk->t_last_end, 0);
        int n = sr->step + 1;
        if (S->count_min < 0 || n < S->count_min) {
            S->count_min = n;
            S->rank_min = r;
        }
        if (n > S->count_max) {
            S->count_max = n;
            S->rank_max = r;
        }
    }
    cs__sgpu_finish(run, S);
}

int cs__steps_boundary(struct cs__run *run, const struct cs_event *ev, enum cs_op_kind k,
                       uint64_t *occ)
{
    return run->steps ? cs__steps_boundary_of(run, run->steps, ev, k, occ) : 0;
}

void cs__steps_free(struct cs__run *run)
{
    struct cs__steps *S = run->steps;
    if (!S)
        return;
    cs__rtab_free(&S->reqs);
    cs__groups_free(S);
    cs__sgpu_free(S);
    cs__map_free(&S->best);
    free(S->g);
    free(S->r);
    free(S);
    run->steps = NULL;
}
