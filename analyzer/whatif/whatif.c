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
 * The scenarios change the timed steps only (the windows first .. end - 1): before and after them
 * every scenario keeps the measured times, so all begin the first timed step as measured (a
 * warm-up shortened on some ranks only would make them wait in the first timed step, which would
 * count as a longer step).  Gaps after a step's end marker are outside the step: not compute,
 * never scaled.
 *
 * A dependency whose partner is not in the same window (a receive of the next step's message) is
 * cut: the item keeps its measured time.  The same matching gives the step budget its waits at
 * point-to-point calls (s_i - a_i of a send or receive, and of a completion call from its
 * collectives' sync point to its partners' latest arrival), per rank and dimension over the
 * timed steps of host ranks, and per rank over all windows for the POP split (steps_model.c).  Step
 * k's time is the mean over ranks of the replayed time from the rank's step-k boundary to its next
 * one, as in the step statistics.
 *
 * Cost (this pass reads every event a second time, so it is kept to a few dozen instructions per
 * event and item): events come from the reader a block at a time (cs_reader_next_batch); a window's
 * items are one array, rank after rank, each with one byte that says what it waits for in the
 * replay; its instances, point-to-point channels and requests are in small tables (wtab.h),
 * emptied by a new stamp per window, with a per-communicator directory by sequence number in
 * front of the instances; point-to-point partners are linked as the second of the two is read; the
 * four scenarios are replayed side by side as the lanes of two vectors of two doubles (each lane
 * does its scenario's operations in the same order, so every number is the same as one scenario at
 * a time); sync points are rounded once from the latest arrival (rounding is monotonic); and the
 * clock mapping reuses one correction over each range of local times that share it.  Memory is that
 * of one window's events.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lanes.h"
#include "steps_internal.h"
#include "wtab.h"

int cs__whatif_means(double *const sum[SC_N], const int *cnt, int first, int end, double measured_s,
                     struct cs_report_whatif *o)
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

static uint64_t best_key(uint16_t op, int cls)
{
    return (uint64_t)op | (uint64_t)(uint32_t)(cls + 1) << 16;
}

void cs__whatif_instance(struct cs__steps *S, const struct cs__inst *in, int cls)
{
    enum cs_op_pattern pat = cs_op_info(in->op)->pattern;
    int64_t t = 0;
    uint64_t bytes = in->size[0];
    int64_t all = in->arr[0];
    if (pat == CS_PAT_NXN) {
        /* Everybody syncs at the latest arrival: t is the latest end minus it (integers). */
        int64_t last = in->end[0];
        for (int32_t i = 1; i < in->n; i++) {
            if (in->arr[i] > all)
                all = in->arr[i];
            if (in->end[i] > last)
                last = in->end[i];
            if (in->size[i] > bytes)
                bytes = in->size[i];
        }
        if (last - all > 0)
            t = last - all;
    } else {
        /* s_i of cs__whatif_sync for every member in one pass: the root of N-to-1 syncs at the
         * latest arrival (found once), prefix members at the running maximum, non-roots of
         * 1-to-N at the later of theirs and the root's, the others at their own. */
        for (int32_t i = 1; i < in->n; i++)
            if (in->arr[i] > all)
                all = in->arr[i];
        int64_t pre = in->arr[0];
        int64_t root_arr =
            pat == CS_PAT_1TON && in->root >= 0 && in->root < in->n ? in->arr[in->root] : INT64_MIN;
        for (int32_t i = 0; i < in->n; i++) {
            int64_t s = in->arr[i];
            if (pat == CS_PAT_NTO1 && i == in->root) {
                s = all;
            } else if (pat == CS_PAT_PREFIX) {
                if (s > pre)
                    pre = s;
                s = pre;
            } else if (root_arr > s) {
                s = root_arr;
            }
            int64_t x = in->end[i] - s;
            if (x > t)
                t = x;
            if (in->size[i] > bytes)
                bytes = in->size[i];
        }
    }
    int fresh;
    uint64_t *v = cs__map_put(&S->best, best_key(in->op, cls), bytes, &fresh);
    if (v && (fresh || (uint64_t)t + 1 < *v))
        *v = (uint64_t)t + 1;
}

/* ---- the replay ---- */

/* The items of a window: all ranks' in one array (P->it), rank by rank in program order, each
 * rank's in P->it[w->off .. w->off + w->n). */
struct item {
    struct lanes A;   /* replayed arrival in each scenario, once arr is set */
    double a, e;      /* measured, ns after the run's origin */
    double gap;       /* a minus the previous item's e */
    double x;         /* measured time after its dependencies were met */
    int32_t inst;     /* collective instance in the window, -1 none */
    int32_t pg;       /* point-to-point partner item (in P->it) waited for, -1 none */
    int32_t dn, doff; /* completion call: its dependencies P->dep[doff .. doff + dn) */
    int32_t idx;      /* comm rank in the instance */
    uint16_t op;
    unsigned char comm; /* a communication call */
    unsigned char init; /* non-blocking collective initiation (arrives, waits for nothing) */
    unsigned char nbp;  /* MPI_Isend / MPI_Irecv: linked to its partner pg, waits for nothing;
                         * the completion call of its request waits instead */
    unsigned char arr;  /* replayed arrival known (the item is at or before its rank's cursor) */
    unsigned char wk;   /* what the replay waits for (enum wait): set with the fields it reads */
    signed char bnd;    /* 1 starts a step, -1 ends one, 2 MPI_Finalize */
    unsigned char out;  /* its gap is outside a step (after an end marker): never scaled */
    unsigned char dim;  /* point-to-point items: the budget's dimension of their communicator */
};

struct wrank {
    size_t off, n;               /* its items in P->it */
    const struct cs_event *peek; /* the next window's first event */
    /* the events cs_reader_next_batch() gave that are not read yet: bp .. be */
    const struct cs_event *bp, *be;
    int done;    /* stream exhausted */
    int started; /* first event seen (prev_e valid) */
    double prev_e;
    uint64_t occ;
    double comp; /* compute of the window's step: its gaps after the first item, in order, +
                  * next_gap, up to an end marker */
    double next_gap, f_cur, f_prev;
    int ended; /* an end marker was read in the window (from its second item on) */
    struct lanes fv_cur, fv_prev; /* {1, f, 1, 1}: the gap factor in each scenario */
    int fin_seen;
    /* per scenario, carried across windows */
    struct lanes R; /* the replayed end of the rank's last finished item */
    double open_at[SC_N];
    int open_step[SC_N];
    /* The scenarios are replayed together: which item can finish when depends on which
     * arrivals are known, never on their values, so every scenario visits the items in the same
     * order (and cuts the same cycles), each with its own numbers. */
    size_t cur; /* cursor of the replay (in P->it): the rank's items before it have finished */
    /* the item at the cursor has its dependencies cut (a cycle); only the item at the cursor can
     * be, so this replaces a per-item flag */
    int cur_forced;
    struct cs__clock_memo clkm; /* cs__clock_map_near over the rank's stream */
    /* the rank's comm rank in its last communicators (run->my_rank lookups; INT32_MIN none) */
    struct wcc {
        uint64_t id;
        int32_t idx;
        int32_t dir; /* its P->dir, -1 none (out of memory) */
        int ok;
    } cc[4];
};

/* What an item waits for in the replay, from the fields it depends on (init, nbp, dn, inst, pg
 * and the instance's pattern), set wherever those change, so that the replay tests one byte: */
enum wait {
    W_NONE, /* nothing: local, init, nbp, or its dependencies were cut */
    W_DEP,  /* a completion call: its dependencies P->dep[doff .. doff + dn) */
    W_INST, /* an instance member waiting for some members (inst_sync) */
    W_ALL,  /* an instance member waiting for all members (NxN, the root of N-to-1; resolve) */
    W_PG,   /* a blocking send or receive: its partner pg's arrival */
};

/* The instances of a communicator in the window by sequence number, in front of P->inst_t: a
 * rank's collectives on it come in sequence, so the window's usually form one run from base. */
struct wdir {
    uint32_t stamp; /* the window it describes (P->stamp); n is 0 for any other */
    uint32_t base;
    int32_t *inst; /* instance of seq base + i (-1 unusable) */
    size_t n, cap;
};

struct winst {
    uint64_t comm, bytes; /* bytes: max over members of max(bytes, bytes_recv) */
    uint16_t op;
    unsigned char pat; /* cs_op_info(op)->pattern */
    int32_t n, root, seen;
    int broken;
    size_t off;     /* its members' items in P->mem */
    double amax;    /* the latest measured arrival of the members read */
    int64_t pa_all; /* the same rounded (resolve) */
    double scale;   /* best-bandwidth factor of its members' x (resolve) */
    /* replay state: members whose replayed arrival is known, and (when all are) the latest of
     * them in each scenario, rounded, which every member waiting for all members syncs at */
    int32_t narr;
    int all_known;
    struct lanes all_max;
};

/* What the window reader needs to know of an op, from one table lookup. */
enum {
    F_GPU = 1 << 0,   /* a GPU record, not a host call */
    F_DONE = 1 << 1,  /* one request completed */
    F_COMM = 1 << 2,  /* a communication call */
    F_COLL = 1 << 3,  /* a collective (blocking or initiation) whose pattern waits */
    F_ICOLL = 1 << 4, /* a non-blocking collective initiation */
    F_SEND = 1 << 5,  /* a blocking send */
    F_RECV = 1 << 6,  /* MPI_Recv */
    F_IP2P = 1 << 7,  /* a non-blocking point-to-point initiation */
    F_SR = 1 << 8,    /* MPI_Sendrecv(_replace) */
    F_WAIT = 1 << 9,  /* a completion call */
    F_BOP = 1 << 10,  /* it can start or end a step (cs__steps_boundary_op) */
    F_FIN = 1 << 11,  /* MPI_Finalize */
};

static unsigned op_flags(const struct cs__steps *S, unsigned op)
{
    const struct cs_op_info *oi = cs_op_info(op);
    enum cs_op_kind k = oi->kind;
    unsigned f = 0;
    f |= k == CS_KIND_GPU ? F_GPU : 0;
    f |= k == CS_KIND_DONE ? F_DONE : 0;
    f |= k == CS_KIND_COLL || k == CS_KIND_ICOLL || k == CS_KIND_P2P || k == CS_KIND_IP2P ||
                 k == CS_KIND_WAIT || k == CS_KIND_NCOLL || k == CS_KIND_NP2P || k == CS_KIND_GROUP
             ? F_COMM
             : 0;
    f |= (k == CS_KIND_COLL || k == CS_KIND_ICOLL) && oi->pattern != CS_PAT_NONE ? F_COLL : 0;
    f |= k == CS_KIND_ICOLL ? F_ICOLL : 0;
    f |= k == CS_KIND_P2P &&
                 (op == CS_OP_SEND || op == CS_OP_SSEND || op == CS_OP_BSEND || op == CS_OP_RSEND)
             ? F_SEND
             : 0;
    f |= k == CS_KIND_P2P && op == CS_OP_RECV ? F_RECV : 0;
    f |= k == CS_KIND_IP2P ? F_IP2P : 0;
    f |= k == CS_KIND_P2P && (op == CS_OP_SENDRECV || op == CS_OP_SENDRECV_REPLACE) ? F_SR : 0;
    f |= k == CS_KIND_WAIT ? F_WAIT : 0;
    f |= op == CS_OP_FINALIZE ? F_FIN : 0;
    f |= cs__steps_boundary_op(S, op) ? F_BOP : 0;
    return f;
}

/* A point-to-point channel of the window (its P->chan_t entry): the j-th send from src to dst
 * with a tag on a communicator matches the j-th receive at dst from src.  v counts the sends
 * (low half) and receives (high half) read so far; the items of the side that is ahead wait in a
 * FIFO (nodes in P->nd, from the slot's head to its tail) for their partners. */
struct wnode {
    int32_t item, next; /* item -1: no longer waiting (paired) */
    uint64_t comm, sd;  /* its channel (for carrying it out of the window) */
    int32_t tag;
    int send;
};

/* Waits for point-to-point partners across step windows (docs/metrics.md, "Time budget per
 * step").  The replay links partners within a window only; the waits are measured over the
 * whole run: a send or receive still waiting for its partner at the end of a window, and a
 * non-blocking one whose request is still open, are carried out of it as a `half`; a
 * completion call with a partner not read yet is a `defer` record, booked once its partners are
 * known (or at the end).  What is carried is what is in flight: memory stays bounded by the
 * open communication, not by the run. */
struct half {
    double a, e;         /* its arrival and end */
    double pa;           /* its partner's arrival, once known */
    int32_t rank, prank; /* its rank, its partner's */
    int32_t rec;         /* the deferred completion waiting for its partner, -1 none */
    int32_t k;           /* its window's step (-1 none) */
    int32_t next;        /* the next of its channel's carried halves, or of the free list */
    unsigned char dim, blocking, known, queued, in_req;
    unsigned char anysrc; /* an MPI_ANY_SOURCE receive: paired at its completion record */
};
struct defer {
    double a, e, s, sp; /* the call's arrival and end, its sync point, its latest partner */
    int32_t rank, late, k, pending; /* late: the rank of that partner (-1 none) */
    int32_t next;                   /* free list */
    unsigned char dim, in_call;
};
/* an Isend / Irecv of the window whose partner was carried: that partner (its pg is -2 - index) */
struct cpart {
    double a;
    int32_t rank;
};
/* a deferred completion (rec) waits for the partner of initiation item `item`, still waiting
 * (within resolve, item <= -2 stands for half -2 - item, a request carried in) */
struct lnk {
    int32_t item, rec;
};

struct replay {
    struct cs__run *run;
    struct cs__steps *S;
    int world;
    int timed; /* the window being replayed is a timed step's: the scenarios change it */
    double origin;
    struct wrank *w;
    struct item *it; /* the window's items */
    size_t nit, capit;
    struct winst *in;
    size_t nin, capin;
    int32_t *mem; /* per instance member: its item, -1 not seen */
    size_t npool, cappool;
    struct wdep {
        int32_t inst, idx;
    } * dep;
    size_t ndep, capdep;
    struct wnode *nd;
    size_t nnd, capnd;
    int32_t *cd; /* the window's completion calls (items with dependencies) */
    size_t ncd, capcd;
    /* per window: (comm, seq) -> instance + 1 (0 unusable), (comm, tag, src << 32 | dst) ->
     * channel, (rank, request) -> what completes it + 1; for the whole replay: (comm) ->
     * size + 1 | (class + 2) << 32 (0: not asked yet), (op | (class + 1) << 16, bytes) ->
     * S->best's value (0 none) */
    struct wtab inst_t, chan_t, req_t, comm_t, best_t, dir_t;
    struct wdir *dir; /* by communicator (P->dir_t: comm -> index) */
    size_t ndir, capdir;
    uint32_t stamp; /* the window's number, for struct wdir */
    int first, end; /* timed steps [first, end) */
    int k;          /* the window being read: its step, -1 before the first */
    int nread;      /* ranks whose window is read (ranks 0 .. nread - 1; the others' w.off
                     * are the last window's) */
    double *sum[SC_N];
    int *cnt;
    double *med;    /* [world + 1]: the ranks' compute, for the median */
    double *prun;   /* [world] the same over every window, or NULL */
    double *pcall;  /* [world] of prun, the part inside point-to-point calls (blocking sends and
                     * receives, MPI_Sendrecv); the rest is inside wait/test calls */
    double *pcause; /* [world] the waits of prun by the partner waited for (the latest one) */
    uint64_t cut, forced;
    uint64_t pcut; /* point-to-point pairs (and requests) across windows: not linked */
    /* waits across windows (struct half): halves, deferred completions (free lists), the
     * carried channels (key as chan_t -> FIFO of halves head .. tail, v: 1 sends wait, 0
     * receives), the carried requests ((rank, request) -> half + 1), and per window the partners
     * of items paired with carried halves, the deferred completions' links and item -> half + 1 */
    struct half *hv;
    size_t nhv, caphv;
    int32_t hfree;
    struct defer *dv;
    size_t ndv, capdv;
    int32_t dfree;
    struct wtab cch_t, creq_t, gh_t;
    size_t ncch, ncreq;
    size_t nreq_p2p; /* Isend / Irecv requests put into req_t in the window, less those completed
                      * (at least those still open: carry() looks for them when not 0) */
    struct cpart *cpa;
    size_t ncpa, capcpa;
    struct lnk *lk;
    size_t nlk, caplk;
    double *pwb;  /* the budget's p2p_wait (timed steps), or NULL */
    int replay;   /* replaying; else only the waits are measured (no timed steps) */
    size_t cap_n; /* without steps: a rank's items in one window at most (0: windows are steps) */
    int oom;      /* out of memory carrying: the waits are incomplete */
    unsigned char kind[CS_OP_MAX], pat[CS_OP_MAX]; /* cs_op_info by table */
    uint16_t fl[CS_OP_MAX];                        /* op_flags by table */
};

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

/* A new item of rank w at the end of the window: measured arrival a and end e, the gap since
 * the previous item's end, x = e - a, no dependency yet.  NULL out of memory. */
static inline struct item *add_item(struct replay *P, struct wrank *w, double a, double e,
                                    uint16_t op, int comm, int bnd)
{
    if (P->nit == P->capit &&
        (P->nit >= INT32_MAX || cs__grow((void **)&P->it, &P->capit, P->nit + 1, sizeof *P->it)))
        return NULL;
    struct item *it = &P->it[P->nit++];
    it->a = a;
    it->e = e;
    it->gap = a - w->prev_e;
    it->x = e - a;
    it->inst = it->pg = -1;
    it->dn = 0;
    it->op = op;
    it->comm = (unsigned char)comm;
    it->init = it->nbp = it->arr = 0;
    it->wk = W_NONE;
    it->bnd = (signed char)bnd;
    it->out = (unsigned char)w->ended; /* the first item: the last window's end marker */
    if (!w->n++)
        w->ended = 0;
    else if (!w->ended)
        w->comp += it->gap;
    if (bnd == -1)
        w->ended = 1;
    w->prev_e = e;
    return it;
}

/* The rank whose window holds item g (the windows are read in rank order: their offsets rise),
 * or -1. */
static int32_t item_rank(const struct replay *P, int32_t g)
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

/* Rank r waited w (> 0; host ranks only) from its call's arrival a, in window k's step, for the
 * point-to-point partner on rank `cause` (-1 unknown), in dimension dim: in the step budget
 * (timed steps), over the run (in a point-to-point call, or not: in a wait/test call), and in
 * the report's heat maps. */
static void p2p_book(struct replay *P, int32_t r, int k, double a, unsigned char dim, double w,
                     int in_call, int32_t cause)
{
    if (!(w > 0) || P->S->r[r].gpu)
        return;
    if (P->prun) {
        P->prun[r] += w;
        if (in_call)
            P->pcall[r] += w;
        if (cause >= 0)
            P->pcause[cause] += w;
        cs__views_wait_at(P->run, r, (int64_t)(a + P->origin), k, w);
    }
    if (P->pwb && k >= P->first && k < P->end)
        P->pwb[(size_t)r * CS_DIM_N + dim] += w;
}

/* A point-to-point item's x once its partner o is known: the receive waits for the send, the
 * send for the receive only when it ended after the receive began (the dependencies the
 * measured run can have had); an Isend / Irecv (nbp) waits for nothing itself.  The time from
 * its arrival to the partner's is the step budget's point-to-point waiting of its rank r (in
 * P->pw: timed steps of host ranks; completion calls: resolve). */
static void p2p_x(struct replay *P, struct item *it, const struct item *o, int32_t r)
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
        p2p_book(P, r, P->k, it->a, it->dim, s - it->a, 1, item_rank(P, (int32_t)(o - P->it)));
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
static void half_release(struct replay *P, int32_t h)
{
    struct half *H = &P->hv[h];
    if (H->queued || H->in_req)
        return;
    H->rec = -1;
    H->next = P->hfree;
    P->hfree = h;
}

/* Deferred completion d is complete: its wait, from its sync point to its latest partner. */
static void defer_done(struct replay *P, int32_t d)
{
    struct defer *D = &P->dv[d];
    D->pending = 0;
    if (D->sp > D->s)
        p2p_book(P, D->rank, D->k, D->a, D->dim, D->sp - D->s, D->in_call, D->late);
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
        defer_done(P, d);
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
        p2p_book(P, r, k, a, dim, pa - a, 1, prank);
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
static int carried_match(struct replay *P, struct wslot *cc, int32_t g, int32_t rg)
{
    int32_t h = carried_pop(P, cc);
    double ha = P->hv[h].a;
    int32_t hr = P->hv[h].rank;
    carried_partner(P, h, P->it[g].a, rg);
    half_release(P, h);
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
                       .rank = item_rank(P, g),
                       .prank = -1,
                       .rec = -1,
                       .k = P->k,
                       .next = -1,
                       .dim = it->dim,
                       .blocking = !it->nbp};
    if (it->pg >= 0) {
        H->known = 1;
        H->pa = P->it[it->pg].a;
        H->prank = item_rank(P, it->pg);
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
#define ANYSRC_BIT ((uint64_t)1 << 62)
static int carry(struct replay *P)
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
            P->hv[*c - 1].in_req = 0, half_release(P, (int32_t)(*c - 1));
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

/* A completion record (ev, rank r) of a request carried from an earlier window: a dependency
 * of the completion call before it, as done_record does.  0, or -1 out of memory. */
static int done_carried(struct replay *P, int r, struct wrank *w, const struct cs_event *ev);
static int anysrc_carried(struct replay *P, int r, int32_t h, const struct cs_event *ev);

/* The step budget's dimension of communicator comm (as steps.c books the calls on it). */
static unsigned char p2p_dim(struct replay *P, uint64_t comm)
{
    return (unsigned char)cs__steps_dim(P->S, cs__groups_comm_cached(P->run, P->S, comm));
}

/* The first item waiting on window channel c (its side is ahead), taken off it. */
static inline int32_t chan_pop(struct replay *P, struct wslot *c)
{
    int32_t hn = c->head;
    int32_t og = P->nd[hn].item;
    c->head = P->nd[hn].next;
    P->nd[hn].item = -1;
    return og;
}

/* Point-to-point pairing: item g is the next send (or receive) on the channel (comm, tag, src,
 * dst); linked both ways with its partner when that was read before it.  0, or -1 out of
 * memory.  Inline: the window reader calls it for every point-to-point event. */
static inline __attribute__((always_inline)) int pair_p2p(struct replay *P, int32_t g,
                                                          uint64_t comm, int32_t tag, int32_t src,
                                                          int32_t dst, int send)
{
    uint64_t sd = (uint64_t)(uint32_t)src << 32 | (uint32_t)dst;
    if (P->ncch) { /* partners carried from earlier windows come first */
        struct wslot *cc = wt_get(&P->cch_t, comm, (uint32_t)tag, sd);
        if (cc && (int)cc->v != send)
            return carried_match(P, cc, g, send ? src : dst);
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

/* Non-blocking point-to-point (docs/metrics.md, "What-if"): an MPI_Isend / MPI_Irecv with a
 * known peer and tag is matched with its partner (blocking or not) like a blocking one, by
 * (communicator, tag, source, destination) in order; the completion call of its request then
 * waits for the partner's arrival. */
#define DEP_P2P (-2)   /* struct wdep.inst of such a dependency; idx = the initiation's item */
#define DEP_CARRY (-3) /* a request carried from an earlier window; idx = its half */

static int nbp_linkable(const struct replay *P, const struct cs_event *ev)
{
    return (ev->op == CS_OP_ISEND || ev->op == CS_OP_IRECV) && ev->peer >= 0 &&
           ev->peer < P->world && ev->aux >= 0 &&
           !(ev->flags & (CS_EV_PROC_NULL | CS_EV_ANY_SOURCE));
}

static int link_nbp(struct replay *P, int r, struct item *it, const struct cs_event *ev)
{
    int send = ev->op == CS_OP_ISEND;
    int32_t src = send ? r : ev->peer, dst = send ? ev->peer : r;
    int32_t g = (int32_t)(it - P->it);
    it->nbp = 1;
    it->dim = p2p_dim(P, ev->comm);
    if (pair_p2p(P, g, ev->comm, ev->aux, src, dst, send))
        return -1;
    int fresh;
    uint64_t *q = wt_put(&P->req_t, (uint64_t)r, ev->request, 0, &fresh);
    if (!q)
        return -1;
    *q = ((uint64_t)1 << 63 | (uint32_t)g) + 1;
    P->nreq_p2p++;
    return 0;
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

static int anysrc_post(struct replay *P, int r, struct item *it, const struct cs_event *ev)
{
    int fresh;
    uint64_t *q = wt_put(&P->req_t, (uint64_t)r, ev->request, 0, &fresh);
    if (!q)
        return -1;
    it->nbp = 1;
    it->dim = p2p_dim(P, ev->comm);
    *q = ((uint64_t)1 << 63 | ANYSRC_BIT | (uint32_t)(it - P->it)) + 1;
    P->nreq_p2p++;
    return 0;
}

/* The complete record ev of such a receive (initiation item g of rank r): pair it. */
static int anysrc_link(struct replay *P, int r, const struct wrank *w, uint32_t g,
                       const struct cs_event *ev)
{
    if (g < w->off || g >= w->off + w->n || ev->peer < 0 || ev->peer >= P->world || ev->aux < 0 ||
        (ev->flags & (CS_EV_PROC_NULL | CS_EV_CANCELLED | CS_EV_ERROR)))
        return 0;
    return pair_p2p(P, (int32_t)g, ev->comm, ev->aux, ev->peer, r, 0);
}

/* Item g has dependencies (P->cd, for resolve). */
static int add_cd(struct replay *P, size_t g)
{
    if (cs__grow((void **)&P->cd, &P->capcd, P->ncd + 1, sizeof *P->cd))
        return -1;
    P->cd[P->ncd++] = (int32_t)g;
    return 0;
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
    if (cs__grow((void **)&P->dep, &P->capdep, P->ndep + 1, sizeof *P->dep))
        return -1;
    struct item *it = add_item(P, w, a, a, send ? CS_OP_ISEND : CS_OP_IRECV, 1, 0);
    if (!it)
        return -1;
    it->nbp = 1;
    it->dim = p2p_dim(P, ev->comm);
    int32_t src = send ? r : (int32_t)ev->seq - 1, dst = send ? ev->peer : r;
    int32_t tag = send ? ev->aux : (int32_t)(ev->request - 1);
    int32_t g = (int32_t)(P->nit - 1);
    if (pair_p2p(P, g, ev->comm, tag, src, dst, send))
        return -1;
    P->dep[P->ndep++] = (struct wdep){DEP_P2P, g};
    return 0;
}

/* The halves of a Sendrecv event before its item; *doff, *dn: their dependencies (dn 0: the call
 * is not linked).  0, or -1 out of memory. */
static int sr_halves(struct replay *P, int r, struct wrank *w, const struct cs_event *ev, double a,
                     int32_t *doff, int32_t *dn)
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
    if ((send && sr_half(P, r, w, ev, a, 1)) || (recv && sr_half(P, r, w, ev, a, 0)))
        return -1;
    *dn = send + recv;
    return 0;
}

static inline unsigned flags_of(const struct replay *P, unsigned op)
{
    return op < CS_OP_MAX ? P->fl[op] : op_flags(P->S, op);
}

/* cs__clock_map_near over rank w's stream. */
static inline int64_t map_t(struct wrank *w, const struct cs__clock *c, uint64_t t)
{
    return cs__clock_map_near(&w->clkm, c, t);
}

/* The same for an event's begin and end, which nearly always share the memo's range. */
static inline void map_event(struct wrank *w, const struct cs__clock *c, const struct cs_event *ev,
                             int64_t *a, int64_t *e)
{
    const struct cs__clock_memo *m = &w->clkm;
    uint64_t tb = ev->t_begin, te = ev->t_end;
    if (m->fast && tb >= m->lo && te <= m->hi && tb <= te) { /* both in the memo's range */
        *a = (int64_t)tb + m->off;
        *e = (int64_t)te + m->off;
        return;
    }
    *a = map_t(w, c, tb);
    *e = map_t(w, c, te);
}

/* A request completed (record ev of rank r): the completion call just before it completed it,
 * a dependency of that call.  0, or -1 out of memory. */
/* Dependency d of the completion call just before record ev (rank r), when that call is a
 * wait/test call ending with the record and its dependencies are the last ones: 1 added, 0 not,
 * -1 out of memory. */
static inline __attribute__((always_inline)) int done_dep(struct replay *P, int r, struct wrank *w,
                                                          const struct cs_event *ev, struct wdep d)
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

static int done_record(struct replay *P, int r, struct wrank *w, const struct cs_event *ev)
{
    struct wslot *q = wt_get(&P->req_t, (uint64_t)r, ev->request, 0);
    if (!q)
        return P->ncreq ? done_carried(P, r, w, ev) : 0;
    uint64_t v = q->v - 1;
    q->live = 0;
    if (v >> 63 && P->nreq_p2p)
        P->nreq_p2p--;
    if (v >> 63 && (v & ANYSRC_BIT)) {
        v &= ~ANYSRC_BIT;
        if (anysrc_link(P, r, w, (uint32_t)v, ev))
            return -1;
    }
    int rc = done_dep(P, r, w, ev,
                      v >> 63 /* a non-blocking send or receive: its initiation item */
                          ? (struct wdep){DEP_P2P, (int32_t)(uint32_t)v}
                          : (struct wdep){(int32_t)(v >> 32), (int32_t)(uint32_t)v});
    return rc < 0 ? -1 : 0;
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
        half_release(P, s);
        return 0;
    }
    struct wslot *c = cc ? NULL : wt_get(&P->chan_t, ev->comm, tag, sd);
    if (c && (uint32_t)c->v > (uint32_t)(c->v >> 32)) { /* a send of this window, waiting */
        int32_t og = chan_pop(P, c), orank = item_rank(P, og);
        c->v += (uint64_t)1 << 32; /* one more receive on the channel */
        P->pcut++;
        carried_partner(P, h, P->it[og].a, orank);
        return item_carried_partner(P, og, orank, P->hv[h].a, r);
    }
    /* no send yet: wait for it in the carried channels, behind the receives waiting there */
    return carried_queue(P, ev->comm, tag, sd, 0, h);
}

static int done_carried(struct replay *P, int r, struct wrank *w, const struct cs_event *ev)
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
    int rc = done_dep(P, r, w, ev, (struct wdep){DEP_CARRY, h});
    if (rc <= 0) {
        P->hv[h].in_req = 0;
        half_release(P, h);
    }
    return rc < 0 ? -1 : 0;
}

/* A collective event ev of rank r (item it): its instance member, and the request of a
 * non-blocking one.  0, or -1 out of memory. */
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

/* Read rank r's events of the next window into P->it.  first_window: the events before the
 * first step boundary.  Point-to-point partners are linked as they are read (the earlier of the
 * two is in this window already). */
static __attribute__((noinline)) int read_window(struct replay *P, int r, int first_window)
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
            if ((f & F_DONE) && done_record(P, r, w, ev))
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
            if ((f & F_SR) && sr_halves(P, r, w, ev, a, &sr_off, &sr_n))
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
            it->dim = p2p_dim(P, ev->comm);
            if (pair_p2p(P, (int32_t)(P->nit - 1), ev->comm, ev->aux, src, dst, send))
                goto fail;
        } else if ((f & F_IP2P) && nbp_linkable(P, ev)) {
            if (link_nbp(P, r, it, ev))
                goto fail;
        } else if ((f & F_IP2P) && anysrc_irecv(P, ev)) {
            if (anysrc_post(P, r, it, ev))
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
static __attribute__((noinline)) void resolve(struct replay *P)
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
                    half_release(P, dp->idx);
                } else if (cs__grow((void **)&P->lk, &P->caplk, P->nlk + 1, sizeof *P->lk)) {
                    P->oom = 1;
                    half_release(P, dp->idx);
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
        int32_t lw = late >= 0 ? item_rank(P, late) : -1;
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
                p2p_book(P, r, P->k, it->a, dw, sw - s, in_call, lw);
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
                        half_release(P, h); /* in_req is 0: the channel keeps it */
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
static void step_done(struct replay *P, int sc, int k, double from, double to)
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
        step_done(P, sc, w->open_step[sc], w->open_at[sc], A);
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
static __attribute__((noinline)) void replay_window(struct replay *P, int k)
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
static void straggler_factors(struct replay *P, int k)
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

static void replay_free(struct replay *P)
{
    free(P->w);
    free(P->it);
    free(P->in);
    free(P->mem);
    free(P->dep);
    free(P->nd);
    free(P->cd);
    free(P->inst_t.s);
    free(P->chan_t.s);
    free(P->req_t.s);
    free(P->comm_t.s);
    free(P->best_t.s);
    free(P->dir_t.s);
    for (size_t i = 0; i < P->ndir; i++)
        free(P->dir[i].inst);
    free(P->dir);
    for (int sc = 0; sc < SC_N; sc++)
        free(P->sum[sc]);
    free(P->cnt);
    free(P->med);
    free(P->hv);
    free(P->dv);
    free(P->cch_t.s);
    free(P->creq_t.s);
    free(P->gh_t.s);
    free(P->cpa);
    free(P->lk);
}

int cs__whatif_report(struct cs__run *run, struct cs__steps *S, int first, int end,
                      double measured_s, struct cs_report_whatif *o, double *p2p_wait,
                      double *p2p_run)
{
    o->measured_step_s = measured_s;
    int replay = S->mode && end > first && measured_s > 0;
    if (!replay) {
        snprintf(o->note, sizeof o->note, "no complete steps to replay");
        /* The waits for point-to-point partners are measured all the same, in windows of steps
         * or, without steps, of at most cap_n items a rank (about 256k items in all). */
        int host = 0;
        for (int r = 0; r < run->world && !host; r++)
            host = run->ranks[r].present && !S->r[r].gpu;
        if (!p2p_run || !host)
            return 0;
        if (!cs__views_any_p2p(run))
            return 1; /* no point-to-point calls: no waits at them */
    }
    size_t cap_n = 0;
    if (!replay && !S->mode) {
        cap_n = ((size_t)1 << 18) / (size_t)run->world;
        if (cap_n < 16)
            cap_n = 16;
    }
    struct replay P = {.run = run,
                       .S = S,
                       .world = run->world,
                       .first = first,
                       .end = end,
                       .prun = p2p_run,
                       .pcall = p2p_run ? p2p_run + run->world : NULL,
                       .pcause = p2p_run ? p2p_run + 2 * (size_t)run->world : NULL,
                       .pwb = replay ? p2p_wait : NULL, /* only timed steps count in the budget */
                       .replay = replay,
                       .cap_n = cap_n,
                       .hfree = -1,
                       .dfree = -1};
    int rc = 0;
    P.w = calloc((size_t)run->world + 1, sizeof *P.w);
    P.cnt = calloc((size_t)end + 1, sizeof *P.cnt);
    P.med = malloc(((size_t)run->world + 1) * sizeof *P.med);
    for (int sc = 0; sc < SC_N; sc++) {
        P.sum[sc] = calloc((size_t)end + 1, sizeof *P.sum[sc]);
        rc |= !P.sum[sc];
    }
    rc |= cs__wt_init(&P.inst_t) | cs__wt_init(&P.chan_t) | cs__wt_init(&P.req_t) |
          cs__wt_init(&P.comm_t) | cs__wt_init(&P.best_t) | cs__wt_init(&P.dir_t) |
          cs__wt_init(&P.cch_t) | cs__wt_init(&P.creq_t) | cs__wt_init(&P.gh_t);
    P.cch_t.kept = P.creq_t.kept = 1;
    if (!P.w || !P.cnt || !P.med || rc) {
        replay_free(&P);
        snprintf(o->note, sizeof o->note, "out of memory for the what-if replay");
        return 0;
    }
    for (unsigned op = 0; op < CS_OP_MAX; op++) {
        P.kind[op] = (unsigned char)cs_op_info(op)->kind;
        P.pat[op] = (unsigned char)cs_op_info(op)->pattern;
        P.fl[op] = (uint16_t)op_flags(S, op);
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
        cs__wt_clear(&P.inst_t);
        cs__wt_clear(&P.chan_t);
        cs__wt_clear(&P.req_t);
        P.nit = P.nin = P.npool = P.ndep = P.nnd = P.ncd = 0;
        if (++P.stamp == 0) { /* wrapped: no directory may look current */
            for (size_t i = 0; i < P.ndir; i++)
                P.dir[i].stamp = 0;
            P.stamp = 1;
        }
        P.ncpa = P.nlk = P.nreq_p2p = 0;
        P.k = S->mode ? k : -1; /* the window's step */
        int any = 0;
        for (int r = 0; r < run->world && rc == 0; r++) {
            P.nread = r + 1;
            rc = read_window(&P, r, k < 0);
            any |= P.w[r].n > 0;
        }
        if (rc || (!any && k >= 0))
            break;
        resolve(&P);
        if (replay) {
            P.timed = k >= first && k < end;
            straggler_factors(&P, k);
            replay_window(&P, k);
        }
        if (P.prun && !P.oom && carry(&P))
            P.oom = 1;
    }
    /* Partners never read (unmatched): the deferred completions wait for those they had. */
    for (size_t d = 0; rc == 0 && d < P.ndv; d++)
        if (P.dv[d].pending > 0)
            defer_done(&P, (int32_t)d);
    /* Steps still open end at the rank's last replayed end (MPI_Finalize closes them above). */
    for (int r = 0; r < run->world; r++)
        for (int sc = 0; sc < SC_N; sc++)
            if (P.w[r].open_step[sc] >= 0)
                step_done(&P, sc, P.w[r].open_step[sc], P.w[r].open_at[sc], LANE(P.w[r].R, sc));
    if (rc || P.oom) {
        if (rc || replay)
            snprintf(o->note, sizeof o->note,
                     "out of memory for the what-if replay (the step budget's point-to-point "
                     "waits are left out)");
        else
            cs__problem(run, "out of memory measuring the waits at point-to-point calls; they "
                             "are left out");
        rc = -1;
        /* part of the run only: none rather than some */
        if (p2p_wait)
            memset(p2p_wait, 0, (size_t)run->world * CS_DIM_N * sizeof *p2p_wait);
        if (p2p_run)
            memset(p2p_run, 0, 3 * (size_t)run->world * sizeof *p2p_run);
    } else if (replay) {
        cs__whatif_means(P.sum, P.cnt, first, end, measured_s, o);
        int n = 0;
        if (P.cut || P.forced)
            n = snprintf(o->note, sizeof o->note,
                         "%llu collective calls had members outside their step window and %llu"
                         " dependency cycles were cut; those calls keep their measured times",
                         (unsigned long long)P.cut, (unsigned long long)P.forced);
        if (P.pcut && n >= 0 && (size_t)n < sizeof o->note)
            snprintf(o->note + n, sizeof o->note - (size_t)n,
                     "%s%llu point-to-point links spanned two step windows: the replay keeps "
                     "those calls' measured times (their waits are measured all the same)",
                     n ? "; " : "", (unsigned long long)P.pcut);
    }
    for (int r = 0; r < run->world; r++)
        if (run->ranks[r].present)
            cs_reader_rewind(run->ranks[r].rd);
    replay_free(&P);
    return rc == 0;
}
