/*
 * The pipeline on a loaded run: align clocks, stream every rank's events in aligned time order
 * (a k-way merge over ranks, so open collective instances stay few and memory stays bounded by
 * the events in flight), match and measure, then build the report model.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct heap {
    int *r;
    size_t n;
    const struct cs__rank *ranks;
};

static int before(const struct heap *h, int a, int b)
{
    int64_t ka = h->ranks[a].next_key, kb = h->ranks[b].next_key;
    return ka < kb || (ka == kb && a < b);
}

static void sift_down(struct heap *h, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < h->n && before(h, h->r[l], h->r[m]))
            m = l;
        if (l + 1 < h->n && before(h, h->r[l + 1], h->r[m]))
            m = l + 1;
        if (m == i)
            return;
        int t = h->r[i];
        h->r[i] = h->r[m];
        h->r[m] = t;
        i = m;
    }
}

int cs__analyze(struct cs__run *run, struct cs_report *rep)
{
    int rc = cs__comms_build(run);
    if (rc) {
        cs__problem(run, "out of memory building the communicator table");
        cs__report_build(run, rep);
        return rc;
    }
    for (int r = 0; r < run->world; r++) {
        struct cs__rank *rk = &run->ranks[r];
        if (!rk->present)
            continue;
        cs__clock_init(&rk->clk, rk->h);
        if (rk->clk.rtt_max / 2 > run->uncertainty_ns)
            run->uncertainty_ns = rk->clk.rtt_max / 2;
        rk->t_first = cs__clock_map(&rk->clk, rk->h->t_init);
        rk->t_last_end = rk->t_first;
    }
    struct heap h = {.r = malloc(((size_t)run->world + 1) * sizeof(int)), .ranks = run->ranks};
    if (!h.r) {
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
            h.r[h.n++] = r;
        }
    }
    for (size_t i = h.n; i-- > 0;)
        sift_down(&h, i);
    /* Ranks without events will send nothing: instances need not wait for them. */
    for (int r = 0; r < run->world; r++)
        if (run->ranks[r].present && !run->ranks[r].next)
            cs__match_rank_done(run, r);
    while (h.n) {
        int r = h.r[0];
        struct cs__rank *rk = &run->ranks[r];
        const struct cs_event *ev = rk->next;
        if (run->events_out)
            cs__events_csv_line(run->events_out, run, r, ev, rk->next_key,
                                cs__clock_map(&rk->clk, ev->t_end));
        size_t row = cs__metrics_event(run, r, ev);
        cs__match_event(run, r, ev, row);
        rk->next = cs_reader_next(rk->rd);
        if (rk->next) {
            rk->next_key = cs__clock_map(&rk->clk, rk->next->t_begin);
        } else {
            h.r[0] = h.r[--h.n];
            cs__match_rank_done(run, r);
        }
        sift_down(&h, 0);
    }
    free(h.r);
    cs__match_finish(run);
    cs__report_build(run, rep);
    return 0;
}

int cs__analyze_dir(const char *dir, struct cs__run *run, struct cs_report *rep, char *err,
                    size_t errlen, FILE *events_out)
{
    *run = (struct cs__run){.events_out = events_out};
    if (events_out)
        cs__events_csv_header(events_out);
    *rep = (struct cs_report){0};
    int rc = cs__rundir_load(run, dir, err, errlen);
    run->events_out = events_out;
    if (rc)
        return rc;
    return cs__analyze(run, rep);
}
