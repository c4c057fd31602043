/*
 * The pipeline on a loaded run: align clocks, stream every rank's events in aligned time order
 * (a k-way merge over ranks, so open collective instances stay few and memory stays bounded by
 * the events in flight), match and measure, then build the report model.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "internal.h"
#include "nccl_p2p.h"
#include "steps.h"

/* The merge: a tournament (loser) tree over the ranks with events, ordered by (aligned t_begin,
 * rank).  Taking the next event replays one leaf-to-root path: one comparison per level, where a
 * binary heap needs up to two and mispredicts more.  Any exact merge gives the same order: the
 * (key, rank) order is total. */
struct src {
    int64_t key;
    int r; /* world rank; INT_MAX once the stream is exhausted (key INT64_MAX): after the others */
};

struct tourney {
    struct src *s;  /* [m]: the leaves (m a power of two, padding sources done) */
    int *lose;      /* [m]: lose[i] the loser at inner node i (1..m-1) */
    int m, win, n;  /* n: sources not done */
};

static int before(const struct src *a, const struct src *b)
{
    /* (key, r) compared as one 128-bit number: no branch to mispredict */
    typedef unsigned __int128 u128;
    u128 x = (u128)((uint64_t)a->key ^ (1ull << 63)) << 64 | (unsigned)a->r,
         y = (u128)((uint64_t)b->key ^ (1ull << 63)) << 64 | (unsigned)b->r;
    return x < y;
}

/* Leaf x changed: replay its path to the root. */
static void replay(struct tourney *t, int x)
{
    int w = x;
    for (int i = (x + t->m) >> 1; i > 0; i >>= 1) {
        int l = t->lose[i];
        /* swap w and l when l wins, without a branch (the outcome is a coin toss) */
        int d = (w ^ l) & -before(&t->s[l], &t->s[w]);
        t->lose[i] = l ^ d;
        w ^= d;
    }
    t->win = w;
}

int cs__analyze(struct cs__run *run, struct cs_report *rep)
{
    int rc = cs__comms_build(run);
    if (rc) {
        cs__problem(run, "out of memory building the communicator table");
        cs__report_build(run, rep);
        return rc;
    }
    cs__nccl_header_problems(run);
    cs__nodes_index(run);
    for (int r = 0; r < run->world; r++) {
        struct cs__rank *rk = &run->ranks[r];
        if (!rk->present)
            continue;
        cs__clock_init(&rk->clk, rk->h);
        cs__nccl_clock(run, r);
        if (rk->clk.rtt_max / 2 > run->uncertainty_ns)
            run->uncertainty_ns = rk->clk.rtt_max / 2;
        rk->t_first = cs__clock_map(&rk->clk, rk->h->t_init);
        rk->t_last_end = rk->t_first;
    }
    /* Charts and the Perfetto export are extras: without memory for them the analysis goes on. */
    if (cs__views_init(run))
        cs__problem(run, "out of memory for the report's charts; the HTML report leaves them out");
    /* Step boundaries and group roles need a look at one rank's whole stream first. */
    if (cs__steps_begin(run)) {
        cs__problem(run, "out of memory in the step analysis; steps are not reported");
        cs__steps_free(run);
    }
    cs__wire_begin(run);
    if (cs__vsteps_init(run))
        cs__problem(run, "out of memory for the step views; the HTML report shows time bins");
    /* After the steps' pre-pass: --perfetto-steps needs the step boundaries. */
    if (run->perfetto_opts)
        cs__perfetto_begin(run);
    struct tourney h = {.m = 1};
    while (h.m < run->world)
        h.m *= 2;
    h.s = malloc((size_t)h.m * sizeof *h.s);
    h.lose = malloc((size_t)h.m * sizeof *h.lose);
    int *wins = malloc(2 * (size_t)h.m * sizeof *wins);
    if (!h.s || !h.lose || !wins) {
        free(h.s);
        free(h.lose);
        free(wins);
        cs__problem(run, "out of memory for the event merge");
        cs__report_build(run, rep);
        return CS_ENOMEM;
    }
    for (int x = 0; x < h.m; x++) {
        struct cs__rank *rk = x < run->world ? &run->ranks[x] : NULL;
        h.s[x] = (struct src){.key = INT64_MAX, .r = INT_MAX};
        if (!rk || !rk->present)
            continue;
        rk->next = cs_reader_next(rk->rd);
        if (rk->next) {
            rk->next_key = cs__clock_map_near(&rk->clkm, &rk->clk, rk->next->t_begin);
            h.s[x] = (struct src){.key = rk->next_key, .r = x};
            h.n++;
        }
    }
    /* Build bottom-up: wins[i] the winner below node i, lose[i] the other one. */
    for (int x = 0; x < h.m; x++)
        wins[h.m + x] = x;
    for (int i = h.m - 1; i > 0; i--) {
        int a = wins[2 * i], b = wins[2 * i + 1];
        int b_first = before(&h.s[b], &h.s[a]);
        wins[i] = b_first ? b : a;
        h.lose[i] = b_first ? a : b;
    }
    h.win = h.m > 1 ? wins[1] : 0;
    free(wins);
    /* Ranks without events will send nothing: instances need not wait for them. */
    for (int r = 0; r < run->world; r++)
        if (run->ranks[r].present && !run->ranks[r].next)
            cs__match_rank_done(run, r);
    /* Op kinds by table: every event needs its kind in two places. */
    unsigned char kind[CS_OP_MAX];
    for (unsigned op = 0; op < CS_OP_MAX; op++)
        kind[op] = (unsigned char)cs_op_info(op)->kind;
    uint64_t nev = 0;
    while (h.n) {
        int r = h.win;
        struct cs__rank *rk = &run->ranks[r];
        const struct cs_event *ev = rk->next;
        /* Each timestamp is mapped once here and handed on. */
        int64_t tb = rk->next_key, te = cs__clock_map_near(&rk->clkm, &rk->clk, ev->t_end);
        if (run->events_out)
            cs__events_csv_line(run->events_out, run, r, ev, tb, te);
        enum cs_op_kind k = ev->op < CS_OP_MAX ? kind[ev->op] : cs_op_info(ev->op)->kind;
        if (run->views)
            cs__views_event(run, r, ev, k);
        if (run->progress_out && !(++nev & 0xfffff))
            cs__progress(run, nev, 0);
        size_t row = cs__metrics_event(run, r, ev, k, te);
        cs__steps_event(run, r, ev, k, tb, te);
        /* After the step hook, so a step's first event already counts as in the step. */
        if (run->perfetto)
            cs__perfetto_event(run, r, ev, k, tb, te);
        cs__match_event(run, r, ev, k, row, tb, te);
        if (run->wire)
            cs__wire_event(run, r, ev);
        if (k == CS_KIND_NP2P)
            cs__np2p_call(run, r, ev);
        if (k == CS_KIND_GPU || k == CS_KIND_NCOLL || k == CS_KIND_NP2P)
            cs__gpu_event(run, r, ev, k, tb, te);
        rk->next = cs_reader_next(rk->rd);
        if (rk->next) {
            rk->next_key = h.s[r].key = cs__clock_map_near(&rk->clkm, &rk->clk, rk->next->t_begin);
        } else {
            h.s[r] = (struct src){.key = INT64_MAX, .r = INT_MAX};
            h.n--;
            cs__match_rank_done(run, r);
        }
        replay(&h, r);
    }
    free(h.s);
    free(h.lose);
    if (run->progress_out)
        cs__progress(run, nev, 1);
    cs__gpu_finish(run);
    cs__match_finish(run);
    if (run->perfetto && cs__perfetto_finish(run))
        cs__problem(run, "error writing the Perfetto trace %s", run->perfetto_opts->path);
    cs__steps_finish(run);
    cs__report_build(run, rep);
    cs__views_build(run, rep);
    cs__np2p_report(run, rep);
    cs__steps_report(run, rep);
    cs__wire_end(run, rep);
    cs__vsteps_build(run, rep);
    cs__vsteps_free(run);
    cs__steps_free(run);
    cs__gpu_report(run, rep);
    return 0;
}

int cs__analyze_dir(const char *dir, struct cs__run *run, struct cs_report *rep, char *err,
                    size_t errlen, FILE *events_out)
{
    struct cs__analyze_opts o = {.events_out = events_out};
    return cs__analyze_dir_opts(dir, run, rep, err, errlen, &o);
}

int cs__analyze_dir_opts(const char *dir, struct cs__run *run, struct cs_report *rep, char *err,
                         size_t errlen, const struct cs__analyze_opts *o)
{
    FILE *events_out = o->events_out;
    *run = (struct cs__run){.events_out = events_out};
    if (events_out)
        cs__events_csv_header(events_out);
    *rep = (struct cs_report){0};
    int rc = cs__rundir_load(run, dir, err, errlen);
    run->events_out = events_out;
    run->perfetto_opts = o->perfetto;
    run->progress_out = o->progress_out;
    run->want_timeline = o->timeline;
    if (rc)
        return rc;
    return cs__analyze(run, rep);
}
