/*
 * The driver: on a loaded run, align clocks, then run the pass table (passes.def): every pass's
 * begin; every rank's events streamed in aligned time order (a k-way merge over ranks, so open
 * collective instances stay few and memory stays bounded by the events in flight) through every
 * pass's event hook, derived events and finished instances fanned out the same way; then drain,
 * finish, the report model section by section, and the passes' state freed.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kineto.h"
#include "wire.h"
#include "passes.h"

/* The merge: a tournament (loser) tree over the ranks with events, ordered by (aligned t_begin,
 * rank).  Taking the next event replays one leaf-to-root path: one comparison per level, where a
 * binary heap needs up to two and mispredicts more.  Any exact merge gives the same order: the
 * (key, rank) order is total.  Each inner node holds its loser's (key, rank) itself, packed into
 * one number whose unsigned order is the (key, rank) order, so a level is one load, one
 * comparison and a branch-free swap, with no indirection through the leaves.
 *
 * The pack is 64 bits while the keys fit: (key - base) << rbits | rank, base the earliest first
 * key, rbits the bits of the largest rank; it holds 2^(64 - rbits) ns after base (52 days with
 * 4096 ranks).  A key outside that (a longer run, a clock that maps an event before base) rebuilds
 * the tree from the ranks' next events with 128-bit packs, (key, rank) in full, for the rest of
 * the merge: the same order, one comparison of two words per level instead of one. */
typedef unsigned __int128 u128;

static u128 pack(int64_t key, int r)
{
    return (u128)((uint64_t)key ^ (1ull << 63)) << 64 | (uint32_t)r;
}

/* A source with no more events: after every other (rank INT_MAX sorts after real ranks; a 64-bit
 * pack stays below all ones). */
#define DONE_KEY pack(INT64_MAX, INT_MAX)
#define DONE_KEY64 UINT64_MAX

struct tourney {
    u128 *lose;       /* [m]: lose[i] the loser at inner node i (1..m-1); m a power of two */
    uint64_t *lose64; /* the same as 64-bit packs (while !wide) */
    u128 win;         /* the winner */
    uint64_t win64;
    int m, n; /* n: sources not done */
    int wide; /* 128-bit packs */
    int rbits;
    int64_t base;
    const struct cs_event **next; /* [world]: each rank's next event (its record's next) */
};

/* (key, rank) as a 64-bit pack into *out; 0 when it does not fit. */
static int pack64(const struct tourney *t, int64_t key, int r, uint64_t *out)
{
    uint64_t d = (uint64_t)key - (uint64_t)t->base;
    if (key < t->base || d >= (UINT64_MAX >> t->rbits))
        return 0;
    *out = d << t->rbits | (uint32_t)r;
    return 1;
}

/* The winner (leaf x, the rank in win) now has value v: replay its path to the root. */
static void replay(struct tourney *t, int x, u128 v)
{
    for (int i = (x + t->m) >> 1; i > 0; i >>= 1) {
        /* keep the larger here and carry the smaller up, in 64-bit halves so the compiler uses
         * conditional moves (the outcome is a coin toss: a branch would mispredict) */
        uint64_t lh = (uint64_t)(t->lose[i] >> 64), ll = (uint64_t)t->lose[i];
        uint64_t vh = (uint64_t)(v >> 64), vl = (uint64_t)v;
        int lt = (lh < vh) | ((lh == vh) & (ll < vl));
        uint64_t nh = lt ? vh : lh, nl = lt ? vl : ll;
        vh = lt ? lh : vh;
        vl = lt ? ll : vl;
        t->lose[i] = (u128)nh << 64 | nl;
        v = (u128)vh << 64 | vl;
    }
    t->win = v;
}

static void replay64(struct tourney *t, int x, uint64_t v)
{
    for (int i = (x + t->m) >> 1; i > 0; i >>= 1) {
        uint64_t l = t->lose64[i];
        int lt = l < v;
        t->lose64[i] = lt ? v : l;
        v = lt ? l : v;
    }
    t->win64 = v;
}

/* (Re)build the tree from every rank's next event, bottom-up (wins[i], w64[i]: the winner below
 * node i, lose[i] the other one), in 64 bits unless t->wide or a key does not fit (which sets
 * t->wide).  wins, w64: scratch of 2m packs each. */
static void build(struct tourney *t, const struct cs__run *run, u128 *wins, uint64_t *w64)
{
    for (int x = 0; x < t->m; x++) {
        const struct cs__rank *rk = x < run->world ? &run->ranks[x] : NULL;
        int has = rk && rk->present && rk->next;
        wins[t->m + x] = has ? pack(rk->next_key, x) : DONE_KEY;
        w64[t->m + x] = DONE_KEY64;
        if (has && !t->wide && !pack64(t, rk->next_key, x, &w64[t->m + x]))
            t->wide = 1;
    }
    for (int i = t->m - 1; i > 0; i--) {
        if (t->wide) {
            u128 a = wins[2 * i], b = wins[2 * i + 1];
            wins[i] = b < a ? b : a;
            t->lose[i] = b < a ? a : b;
        } else {
            uint64_t a = w64[2 * i], b = w64[2 * i + 1];
            w64[i] = b < a ? b : a;
            t->lose64[i] = b < a ? a : b;
        }
    }
    t->win = wins[1];
    t->win64 = w64[1];
}

/* The next winner is most often the best of the losers on the winner's path (unless the winner's
 * own next event comes first): fetch that rank's record and next event while this event is
 * processed.  With many ranks they are no longer in the first-level cache when the rank wins
 * again, and the merge would wait for them at the top of the next round.  The event's address
 * comes from t->next (hot: one pointer per rank), not from the record, whose load would hold up
 * the instructions behind it until the record came. */
static inline void prefetch_runner_up(const struct tourney *t, const struct cs__run *run, int x)
{
    uint64_t ru = DONE_KEY64;
    for (int i = (x + t->m) >> 1; i > 0; i >>= 1)
        ru = t->lose64[i] < ru ? t->lose64[i] : ru;
    if (ru != DONE_KEY64) {
        size_t q = ru & ((1ull << t->rbits) - 1);
        __builtin_prefetch(t->next[q]);
        __builtin_prefetch(&run->ranks[q]);
        __builtin_prefetch((const char *)&run->ranks[q] + 64);
    }
}

/* The rank's next event for the merge: from a batch of the reader's (the rest of a block for a
 * one-thread file), so most events cost no call. */
static inline const struct cs_event *rank_next(struct cs__rank *rk)
{
    if (rk->bnext == rk->bend) {
        size_t n = cs_reader_next_batch(rk->rd, &rk->bnext);
        if (!n)
            return NULL;
        rk->bend = rk->bnext + n;
    }
    /* The merge takes a rank's events one at a time, between other ranks' events, so the
     * hardware's stream prefetch does not see them as a stream: fetch a few events ahead (a
     * prefetch past the block does not fault). */
    __builtin_prefetch(rk->bnext + 2);
    return rk->bnext++;
}

/*
 * Clock samples that would move a rank's times by 2^58 ns (9 years) or more at its t_init or
 * t_finalize, or by 2^61 ns or more anywhere in the times a trace may hold ([0, 2^62): a drift of
 * 50 %), are not a clock but a broken trace (and would overflow sums of times): they are not used,
 * and the problem is said.  Every mapped time is then within 2^61 ns of its recorded one.
 */
static void clock_sane(struct cs__run *run, int r)
{
    struct cs__rank *rk = &run->ranks[r];
    const uint64_t t[4] = {rk->h->t_init, rk->h->t_finalize, 0, CS_TIME_LIMIT};
    for (int i = 0; rk->clk.valid && i < 4; i++) {
        if ((i == 1 && !t[i]) ||
            cs__clock_corr_within(&rk->clk, t[i], (int64_t)1 << (i < 2 ? 58 : 61)))
            continue;
        cs__problem(run,
                    "rank %d: its clock samples (offset %" PRId64 " ns to rank 0, drift %.6g ppm)"
                    " would move its time %" PRIu64 " ns by 2^%d ns or more; they are not used:"
                    " its times stay as recorded",
                    r, rk->clk.o0, cs__clock_drift_ppm(&rk->clk), t[i], i < 2 ? 58 : 61);
        rk->clk = (struct cs__clock){0};
    }
}

static void passes_begin(struct cs__run *run)
{
#define CS__PASS CS__HOOK_BEGIN
#include "passes.def"
#undef CS__PASS
}

static void passes_drain(struct cs__run *run)
{
#define CS__PASS CS__HOOK_DRAIN
#include "passes.def"
#undef CS__PASS
}

static void passes_finish(struct cs__run *run)
{
#define CS__PASS CS__HOOK_FINISH
#include "passes.def"
#undef CS__PASS
}

/* Metrics' row builds the model's frame first; the step report comes before the views: its
 * what-if pass measures the waits at point-to-point calls that the views' time segments book as
 * waiting. */
static void passes_report(struct cs__run *run, struct cs_report *rep)
{
#define CS__PASS CS__HOOK_REPORT
#include "passes.def"
#undef CS__PASS
    /* The report borrows the problem list, which a report hook may have grown (or moved):
     * every problem behind a non-zero exit is listed in the text, JSON and HTML. */
    rep->problems = run->problems;
    rep->nproblems = run->nproblems;
}

static inline void passes_event(struct cs__run *run, struct cs__ev *e)
{
#define CS__PASS CS__HOOK_EVENT
#include "passes.def"
#undef CS__PASS
}

static inline void passes_rank_done(struct cs__run *run, int r)
{
#define CS__PASS CS__HOOK_RANK_DONE
#include "passes.def"
#undef CS__PASS
}

void cs__analyze_derived(struct cs__run *run, struct cs__ev *e)
{
#define CS__PASS CS__HOOK_DERIVED
#include "passes.def"
#undef CS__PASS
}

void cs__analyze_instance(struct cs__run *run, struct cs__inst *in, int complete)
{
    struct cs__inst_facts f = {.used = complete && !in->mixed};
#define CS__PASS CS__HOOK_INSTANCE
#include "passes.def"
#undef CS__PASS
    if (!f.used)
        return;
    for (int32_t i = 0; i < in->n; i++) {
#define CS__PASS CS__HOOK_MEMBER
#include "passes.def"
#undef CS__PASS
    }
}

void cs__passes_free(struct cs__run *run)
{
#define CS__PASS CS__HOOK_FREE
#include "passes.def"
#undef CS__PASS
}

/* Every section of the report model (the passes' report hooks filled them). */
void cs__report_free(struct cs_report *rep)
{
    cs__bound_report_free(rep);
    cs__steps_report_free(rep);
    cs__nodes_free(rep);
    cs__gpu_report_free(rep);
    cs__kineto_report_free(rep);
    cs__np2p_report_free(rep);
    cs__hang_report_free(rep);
    cs__flops_report_free(rep);
    cs__phases_report_free(rep);
    cs__res_report_free(rep);
    free(rep->ranks);
    free(rep->stragglers);
    free(rep->missing);
    free(rep->partial);
    free(rep->ops);
    free(rep->comms);
    rep->comms = NULL;
    rep->ncomms = 0;
    free(rep->p2p_bw);
    rep->p2p_bw = NULL;
    rep->np2p_bw = 0;
    free(rep->rank_listed);
    rep->rank_listed = NULL;
    rep->nrank_listed = 0;
    cs__report_views_free(rep->views);
    rep->views = NULL;
    cs__wire_report_free(rep->wire);
    rep->wire = NULL;
    rep->ranks = NULL;
    rep->stragglers = NULL;
    rep->missing = rep->partial = NULL;
    rep->ops = NULL;
    rep->nranks = rep->nstragglers = rep->nmissing = rep->npartial = rep->nops = 0;
}

/* Everything of the run: the passes' state (the table's free column), the readers, the tables. */
void cs__run_free(struct cs__run *run)
{
    cs__passes_free(run);
    free(run->p2p_wait);
    run->p2p_wait = NULL;
    for (int r = 0; r < run->world && run->ranks; r++)
        cs_reader_close(run->ranks[r].rd);
    free(run->ranks);
    free(run->ident);
    free(run->host_of);
    for (size_t i = 0; i < run->ncomms; i++) {
        while (run->comms[i]->spare) {
            struct cs__inst *in = run->comms[i]->spare;
            run->comms[i]->spare = in->next;
            free(in);
        }
        free(run->comms[i]->owned);
        free(run->comms[i]->last_seq);
        free(run->comms[i]);
    }
    free(run->comms);
    cs__map_free(&run->comm_by_id);
    cs__map_free(&run->my_rank);
    cs__map_free(&run->row_by_key);
    free(run->rows);
    for (size_t i = 0; i < run->nproblems; i++)
        free(run->problems[i]);
    free(run->problems);
    *run = (struct cs__run){0};
}
void cs__window_recut(struct cs__run *run, int only, int64_t w)
{
    for (int r = 0; r < run->world; r++) {
        struct cs__rank *rk = &run->ranks[r];
        if ((only >= 0 && r != only) || !rk->present || !cs_reader_totals(rk->rd)->ring)
            continue;
        /* The first local time that maps to w or later (the map is monotonic). */
        uint64_t lo = 0, hi = CS_TIME_LIMIT;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (cs__clock_map(&rk->clk, mid) >= w)
                hi = mid;
            else
                lo = mid + 1;
        }
        if (cs_reader_cut(rk->rd, lo))
            cs__problem(run, "rank %d: out of memory folding the events before the window", r);
    }
}

/*
 * Ring-mode traces that kept a window of the run (reader.h): every rank's window starts at the
 * latest start of all, on the aligned clock, so the event-level passes see whole collectives and
 * the same span on every rank; what comes before counts in the totals (metrics.c).
 */
static void window_cut(struct cs__run *run)
{
    int64_t w = INT64_MIN;
    for (int r = 0; r < run->world; r++) {
        struct cs__rank *rk = &run->ranks[r];
        const struct cs_reader_totals *t = rk->present ? cs_reader_totals(rk->rd) : NULL;
        if (t && t->ring && t->t_window && cs__clock_map(&rk->clk, t->t_window) > w)
            w = cs__clock_map(&rk->clk, t->t_window);
    }
    if (w == INT64_MIN)
        return;
    run->windows = 1;
    cs__window_recut(run, -1, w);
}

int cs__analyze(struct cs__run *run, struct cs_report *rep)
{
    int rc = cs__comms_build(run);
    if (rc) {
        cs__problem(run, "out of memory building the communicator table");
        cs__report_build(run, rep);
        cs__nodes_report(run, rep);
        return rc;
    }
    cs__nccl_header_problems(run);
    for (int r = 0; r < run->world; r++) {
        struct cs__rank *rk = &run->ranks[r];
        if (!rk->present)
            continue;
        cs__clock_init(&rk->clk, rk->h);
        cs__nccl_clock(run, r);
    }
    cs__clock_shared(run);
    for (int r = 0; r < run->world; r++) {
        struct cs__rank *rk = &run->ranks[r];
        if (!rk->present)
            continue;
        clock_sane(run, r);
        if (rk->clk.rtt_max / 2 > run->uncertainty_ns)
            run->uncertainty_ns = rk->clk.rtt_max / 2;
        rk->t_first = cs__clock_map(&rk->clk, rk->h->t_init);
        rk->t_last_end = rk->t_first;
    }
    window_cut(run);
    passes_begin(run);
    struct tourney h = {.m = 1, .rbits = 1};
    while (h.m < run->world)
        h.m *= 2;
    while (h.rbits < 31 && (1 << h.rbits) < run->world)
        h.rbits++;
    h.lose = malloc((size_t)h.m * sizeof *h.lose);
    h.lose64 = malloc((size_t)h.m * sizeof *h.lose64);
    u128 *wins = malloc(2 * (size_t)h.m * sizeof *wins);
    uint64_t *w64 = malloc(2 * (size_t)h.m * sizeof *w64);
    h.next = calloc((size_t)h.m, sizeof *h.next);
    if (!h.lose || !h.lose64 || !wins || !w64 || !h.next) {
        free(h.next);
        free(h.lose);
        free(h.lose64);
        free(wins);
        free(w64);
        cs__problem(run, "out of memory for the event merge");
        cs__report_build(run, rep);
        return CS_ENOMEM;
    }
    int have_base = 0;
    for (int x = 0; x < run->world; x++) {
        struct cs__rank *rk = &run->ranks[x];
        if (!rk->present)
            continue;
        rk->next = rank_next(rk);
        h.next[x] = rk->next;
        if (rk->next) {
            rk->next_key = cs__clock_map_near(&rk->clkm, &rk->clk, rk->next->t_begin);
            if (!have_base || rk->next_key < h.base)
                h.base = rk->next_key;
            have_base = 1;
            h.n++;
        }
    }
    build(&h, run, wins, w64);
    /* Ranks without events will send nothing: instances need not wait for them. */
    for (int r = 0; r < run->world; r++)
        if (run->ranks[r].present && !run->ranks[r].next)
            passes_rank_done(run, r);
    /* Op kinds by table: every event needs its kind in two places. */
    unsigned char kind[CS_OP_MAX];
    for (unsigned op = 0; op < CS_OP_MAX; op++)
        kind[op] = (unsigned char)cs_op_info(op)->kind;
    uint64_t nev = 0;
    while (h.n) {
        int r = h.wide ? (int)(uint32_t)h.win : (int)(h.win64 & ((1ull << h.rbits) - 1));
        struct cs__rank *rk = &run->ranks[r];
        const struct cs_event *ev = rk->next;
        if (!h.wide)
            prefetch_runner_up(&h, run, r);
        /* Each timestamp is mapped once here and handed on. */
        struct cs__ev e = {
            .ev = ev,
            .r = r,
            .k = ev->op < CS_OP_MAX ? kind[ev->op] : cs_op_info(ev->op)->kind,
            .tb = rk->next_key,
            .te = cs__clock_map_near(&rk->clkm, &rk->clk, ev->t_end),
            .row = SIZE_MAX,
        };
        if (run->progress_out && !(++nev & 0xfffff))
            cs__progress(run, nev, 0);
        passes_event(run, &e);
        rk->next = rank_next(rk);
        h.next[r] = rk->next;
        if (rk->next) {
            rk->next_key = cs__clock_map_near(&rk->clkm, &rk->clk, rk->next->t_begin);
        } else {
            h.n--;
            passes_rank_done(run, r);
        }
        uint64_t v64 = DONE_KEY64;
        if (h.wide)
            replay(&h, r, rk->next ? pack(rk->next_key, r) : DONE_KEY);
        else if (!rk->next || pack64(&h, rk->next_key, r, &v64))
            replay64(&h, r, v64);
        else
            build(&h, run, wins, w64); /* sets h.wide */
    }
    free(h.next);
    free(h.lose);
    free(h.lose64);
    free(wins);
    free(w64);
    if (run->progress_out)
        cs__progress(run, nev, 1);
    passes_drain(run);
    passes_finish(run);
    passes_report(run, rep);
    cs__passes_free(run);
    return 0;
}

int cs__analyze_dir(const char *dir, struct cs__run *run, struct cs_report *rep, char *err,
                    size_t errlen, FILE *events_out)
{
    struct cs__analyze_opts o = {.events_out = events_out};
    return cs__analyze_dir_opts(dir, run, rep, err, errlen, &o);
}

int cs__analyze_load(const char *dir, struct cs__run *run, char *err, size_t errlen,
                     const struct cs__analyze_opts *o)
{
    FILE *events_out = o->events_out;
    *run = (struct cs__run){.events_out = events_out};
    if (events_out)
        cs__events_csv_header(events_out);
    int rc = cs__rundir_load(run, dir, err, errlen);
    run->events_out = events_out;
    run->perfetto_opts = o->perfetto;
    run->progress_out = o->progress_out;
    run->want_timeline = o->timeline;
    run->known_hung = o->hung;
    run->flops_opts = o->flops;
    return rc;
}

int cs__analyze_dir_opts(const char *dir, struct cs__run *run, struct cs_report *rep, char *err,
                         size_t errlen, const struct cs__analyze_opts *o)
{
    *rep = (struct cs_report){0};
    int rc = cs__analyze_load(dir, run, err, errlen, o);
    return rc ? rc : cs__analyze(run, rep);
}
