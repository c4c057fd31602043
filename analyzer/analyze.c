/*
 * The pipeline on a loaded run: align clocks, stream every rank's events in aligned time order
 * (a k-way merge over ranks, so open collective instances stay few and memory stays bounded by
 * the events in flight), match and measure, then build the report model.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "internal.h"
#include "nccl_p2p.h"
#include "steps.h"

/* The merge heap keeps each rank's key beside it, so comparisons touch one array only. */
struct heap_ent {
    int64_t key;
    int r;
};

struct heap {
    struct heap_ent *e;
    size_t n;
};

static int before(const struct heap_ent *a, const struct heap_ent *b)
{
    return a->key < b->key || (a->key == b->key && a->r < b->r);
}

static void sift_down(struct heap *h, size_t i)
{
    struct heap_ent x = h->e[i];
    for (;;) {
        size_t l = 2 * i + 1, m;
        if (l >= h->n)
            break;
        m = l + 1 < h->n && before(&h->e[l + 1], &h->e[l]) ? l + 1 : l;
        if (!before(&h->e[m], &x))
            break;
        h->e[i] = h->e[m];
        i = m;
    }
    h->e[i] = x;
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
    struct heap h = {.e = malloc(((size_t)run->world + 1) * sizeof *h.e)};
    if (!h.e) {
        cs__problem(run, "out of memory for the event merge");
        cs__report_build(run, rep);
        return CS_ENOMEM;
    }
    for (int r = 0; r < run->world; r++) {
        struct cs__rank *rk = &run->ranks[r];
        if (!rk->present)
            continue;
        rk->next = cs_reader_next(rk->rd);
        if (rk->next) {
            rk->next_key = cs__clock_map(&rk->clk, rk->next->t_begin);
            h.e[h.n++] = (struct heap_ent){rk->next_key, r};
        }
    }
    for (size_t i = h.n; i-- > 0;)
        sift_down(&h, i);
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
        int r = h.e[0].r;
        struct cs__rank *rk = &run->ranks[r];
        const struct cs_event *ev = rk->next;
        /* Each timestamp is mapped once here and handed on. */
        int64_t tb = rk->next_key, te = cs__clock_map(&rk->clk, ev->t_end);
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
            rk->next_key = h.e[0].key = cs__clock_map(&rk->clk, rk->next->t_begin);
        } else {
            h.e[0] = h.e[--h.n];
            cs__match_rank_done(run, r);
        }
        sift_down(&h, 0);
    }
    free(h.e);
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
