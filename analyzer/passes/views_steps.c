/*
 * The report views that need training steps (views.h): the wait heat map with one column per step
 * (or per block of steps), the timeline of one representative step, and the verdict in step
 * time ("the others wait 12 % of each step for rank 5"; gradient sync as a share of each step).
 *
 * During the merge the hooks book each wait into the step its rank was in when it arrived
 * (the same step lookup as steps.c), and each late arrival's cost to the others into the last
 * arriver's per-step buckets.  After the step report exists, the median timed step is chosen and
 * a second, short pass over at most CS_VIEW_RANK_BARS ranks reads their events up to the end of
 * that step (the readers rewind; nothing else is kept), so memory is bounded by one step's calls
 * of the shown ranks.  Numbers only; report_html.c draws them.  Formulas: docs/metrics.md.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "steps_internal.h"

int cs__vsteps_init(struct cs__run *run)
{
    const struct cs__steps *S = run->steps;
    if (!S || !S->detect.mode || run->world <= 0)
        return 0;
    struct cs__vsteps *v = calloc(1, sizeof *v);
    size_t w = (size_t)run->world;
    if (!v || !(v->heat = calloc(w * CS_VIEW_HEAT_BINS, sizeof *v->heat)) ||
        !(v->caused = calloc(w, sizeof *v->caused))) {
        if (v)
            free(v->heat);
        free(v);
        return CS_ENOMEM;
    }
    v->world = run->world;
    v->spc = 1;
    /* The reference rank's step count sizes the columns, so a clean run is never re-binned. */
    while (S->detect.ref_steps > v->spc * CS_VIEW_HEAT_BINS)
        v->spc *= 2;
    run->vsteps = v;
    return 0;
}

void cs__vsteps_free(struct cs__run *run)
{
    struct cs__vsteps *v = run->vsteps;
    if (!v)
        return;
    free(v->heat);
    free(v->caused);
    free(v);
    run->vsteps = NULL;
}

int cs__vsteps_current(const struct cs__run *run, int rank)
{
    const struct cs__steps *S = run->steps;
    if (!S || !S->detect.mode || rank < 0 || rank >= run->world)
        return -1;
    return S->r[rank].in_step ? S->r[rank].step : -1;
}

static int dim_of_comm(struct cs__run *run, uint64_t comm)
{
    struct cs__steps *S = run->steps;
    int ci = cs__groups_comm(run, S, comm);
    if (ci < 0)
        return -1;
    enum cs__dim d = S->groups.classes[S->groups.comms[ci].cls].role;
    return d < CS_DIM_N ? (int)d : CS_DIM_OTHER;
}

int cs__vsteps_expected(const struct cs__run *run)
{
    const struct cs__steps *S = run->steps;
    return S && S->detect.mode ? S->detect.ref_steps : -1;
}

const char *cs__vsteps_role(struct cs__run *run, uint64_t comm)
{
    if (!run->steps)
        return NULL;
    int d = dim_of_comm(run, comm);
    return d >= 0 ? cs__dim_names[d] : NULL;
}

void cs__vsteps_widen(struct cs__vsteps *v)
{
    cs__heat_merge_pairs(v->heat, v->world);
    v->spc *= 2;
}

void cs__vsteps_member(struct cs__run *run, const struct cs__inst *in, int32_t i)
{
    int r = in->members[i];
    cs__vsteps_wait_in(run->vsteps, &run->steps->r[r], r, in->arr[i], in->wait[i]);
}

void cs__vsteps_wait_at(struct cs__run *run, int rank, int step, double wait_ns)
{
    struct cs__vsteps *v = run->vsteps;
    if (!v || !(wait_ns > 0) || rank < 0 || rank >= run->world)
        return;
    cs__vsteps_wait_step(v, rank, step, wait_ns);
}

void cs__vsteps_late(struct cs__run *run, const struct cs__inst *in, int32_t li, uint64_t others_ns)
{
    struct cs__vsteps *v = run->vsteps;
    if (!v || !others_ns)
        return;
    int r = in->members[li];
    int k = cs__step_of(&run->steps->r[r], in->arr[li]);
    struct caused *c = &v->caused[r];
    if (k < 0)
        return;
    if (k == 0) {
        c->first += (double)others_ns;
    } else if (k >= c->latest_k) {
        if (k > c->latest_k) {
            c->mid += c->latest;
            c->latest = 0;
            c->latest_k = k;
        }
        c->latest += (double)others_ns;
    } else {
        c->mid += (double)others_ns;
    }
}

/* The number of steps the step report covers (as steps_model.c counts them). */
static int steps_counted(const struct cs__steps *S)
{
    int n = S->detect.ref >= 0 && S->detect.mode ? S->r[S->detect.ref].step + 1 : 0;
    if (S->detect.mode && S->count_min != S->count_max && S->count_min < n)
        n = S->count_min;
    if ((size_t)n > S->ng)
        n = (int)S->ng;
    return n > 0 ? n : 0;
}

/* The views' heat map with steps as its columns instead of time bins (the same rows). */
static void step_heat(struct cs__run *run, const struct cs_report *rep, struct cs_report_views *o)
{
    struct cs__vsteps *v = run->vsteps;
    const struct cs__steps *S = run->steps;
    const size_t *row;
    const int *counts;
    if (!v || !S || !o->heat_rows || !o->heat_wait_s || !cs__views_heat_rows(run, &row, &counts))
        return;
    int n = steps_counted(S);
    if (n <= 0)
        return;
    size_t cols = (size_t)((n + v->spc - 1) / v->spc);
    if (cols > CS_VIEW_HEAT_BINS)
        cols = CS_VIEW_HEAT_BINS;
    double *h = calloc(o->heat_rows * cols + 1, sizeof *h);
    if (!h)
        return;
    double outside = v->outside_ns;
    for (size_t i = 0; i < rep->nranks; i++) {
        const double *src = &v->heat[(size_t)rep->ranks[i].rank * CS_VIEW_HEAT_BINS];
        for (size_t c = 0; c < CS_VIEW_HEAT_BINS; c++) {
            if (c >= cols) {
                outside += src[c]; /* steps beyond the counted ones (ranks disagree) */
                continue;
            }
            /* Steps in the column: spc, fewer in the last one. */
            int first = (int)c * v->spc, last = first + v->spc < n ? first + v->spc : n;
            h[row[i] * cols + c] += src[c] / 1e9 / counts[row[i]] / (last - first);
        }
    }
    free(o->heat_wait_s);
    o->heat_wait_s = h;
    o->heat_bins = cols;
    o->heat_by_step = 1;
    o->heat_steps_per_col = v->spc;
    o->heat_nsteps = n;
    o->heat_outside_s = rep->nranks ? outside / 1e9 / (double)rep->nranks : 0;
}

/* ---- the verdict in step time ---- */

static void step_findings(struct cs__run *run, struct cs_report *rep)
{
    struct cs_report_views *o = rep->views;
    const struct cs_report_steps *st = rep->steps;
    const struct cs__steps *S = run->steps;
    struct cs__vsteps *v = run->vsteps;
    if (!o || !st || !S || !st->timed || !S->g)
        return;
    int usable = st->count - st->tail_excluded;
    /* The others' time in timed steps, and what they waited in them for the straggler. */
    for (size_t f = 0; f < o->nfindings && v; f++) {
        struct cs_report_finding *x = &o->findings[f];
        if (x->kind != CS_FIND_STRAGGLER || x->rank < 0 || x->rank >= run->world)
            continue;
        double all = 0;
        for (int k = st->warmup_excluded; k < usable && (size_t)k < S->ng; k++)
            all += S->g[k].dur;
        const struct cs__srank *sr = &S->r[x->rank];
        double own = sr->rest.dur + (st->warmup_excluded ? 0 : sr->first.dur);
        const struct caused *c = &v->caused[x->rank];
        double waited = c->mid + (st->warmup_excluded ? 0 : c->first);
        if (c->latest_k > 0 && c->latest_k < usable)
            waited += c->latest;
        if (all - own > 0)
            x->v[2] = 100.0 * waited / (all - own);
    }
    if (isfinite(st->grad_share) && o->nfindings < 8) {
        /* Second, after who holds the others up. */
        size_t at = o->nfindings ? 1 : 0;
        memmove(&o->findings[at + 1], &o->findings[at], (o->nfindings - at) * sizeof *o->findings);
        o->findings[at] = (struct cs_report_finding){
            .kind = CS_FIND_GRAD_SYNC,
            .rank = -1,
            .v = {100.0 * st->grad_share, st->grad_exposed_s, st->mean_s}};
        o->nfindings++;
    }
    /* Waiting at point-to-point calls (the budget's), when it is 1 % of the step or more. */
    const struct cs_report_budget *tb = &st->total;
    if (o->nfindings < 8 && tb->step_s > 0 && tb->p2p_wait_s >= 0.01 * tb->step_s) {
        struct cs_report_finding x = {
            .kind = CS_FIND_P2P_WAIT,
            .rank = -1,
            .v = {100.0 * tb->p2p_wait_s / tb->step_s, 0, tb->p2p_wait_s}};
        /* note "pp": a group has the pipeline's shape (the verdict then names its bubbles) */
        for (size_t i = 0; i < st->ngroups; i++)
            if (st->groups[i].role == CS_DIM_PP)
                snprintf(x.note, sizeof x.note, "pp");
        for (size_t i = 0; i < st->nranks; i++) {
            const struct cs_report_budget *b = &st->ranks[i];
            double pct = b->step_s > 0 ? 100.0 * b->p2p_wait_s / b->step_s : 0;
            if (x.rank < 0 || pct > x.v[1]) {
                x.rank = b->rank;
                x.v[1] = pct;
            }
        }
        for (size_t i = 0; i < rep->nranks; i++) {
            const struct cs_report_rank *r = &rep->ranks[i];
            if (r->rank == x.rank)
                snprintf(x.host, sizeof x.host, "%s", r->host);
            if (r->p2p_caused_s > 0 && (!x.count || r->p2p_caused_s > x.v[3])) {
                x.count = (uint64_t)r->rank + 1;
                x.v[3] = r->p2p_caused_s;
            }
        }
        o->findings[o->nfindings++] = x;
    }
}

/* ---- the representative step's timeline ---- */

struct tl_build {
    struct cs_report_tl_row *row;
    size_t cap;
    int64_t lo;     /* aligned time 0 of the chart (set after all rows are read) */
    double merge_s; /* calls closer than this are merged */
};

/* The median timed step (the lower middle one for an even count), -1 none: the step report's
 * representative step. */
static int median_step(const struct cs_report_steps *st)
{
    return st->rep_step >= 0 && (size_t)st->rep_step < st->nlist ? st->list[st->rep_step].index
                                                                 : -1;
}

/* Add [t0, t1] (ns from the rank's step begin) to the row, merging with its last segment. */
static void seg_add(struct tl_build *b, struct cs_report_tl_row *r, double t0, double t1, int kind,
                    int dim)
{
    if (t1 < t0)
        t1 = t0;
    t0 /= 1e9;
    t1 /= 1e9;
    if (r->nseg) {
        struct cs_report_tl_seg *l = &r->seg[r->nseg - 1];
        if (l->kind == kind && l->dim == dim && t0 - l->t1_s < b->merge_s &&
            kind != CS_TL_INFLIGHT) {
            if (t1 > l->t1_s)
                l->t1_s = t1;
            return;
        }
    }
    if (r->nseg == CS_VIEW_TL_SEGS) {
        r->truncated = 1;
        return;
    }
    if (cs__grow((void **)&r->seg, &b->cap, r->nseg + 1, sizeof *r->seg)) {
        r->truncated = 1;
        return;
    }
    r->seg[r->nseg++] = (struct cs_report_tl_seg){t0, t1, (unsigned char)kind, (signed char)dim};
}

/*
 * Read rank r from its first event to the end of its step K and keep that step's calls (times in
 * ns from the step's begin, turned into seconds by seg_add).  Returns 0 when the rank has step
 * K, -1 otherwise.  *begin, *end: the step on the aligned clock.
 */
static int read_step(struct cs__run *run, int r, int K, struct tl_build *b,
                     struct cs_report_tl_row *row, int64_t *begin, int64_t *end, double window_hint)
{
    struct cs__rank *rk = &run->ranks[r];
    struct cs_reader *rd = rk->rd;
    struct cs__map req = {0};
    const struct cs_event *ev;
    uint64_t occ = 0;
    int step = -1, in = 0, found = 0, closed = 0;
    int64_t last = 0, fin = 0;
    b->cap = 0;
    b->merge_s = window_hint / 4000;
    cs_reader_rewind(rd);
    while ((ev = cs_reader_next(rd))) {
        enum cs_op_kind k = cs_op_info(ev->op)->kind;
        int bd = cs__steps_boundary(run, ev, k, &occ);
        /* Before step K only boundaries and MPI_Finalize matter: map no clock for the rest. */
        if (!bd && !(in && step == K) && ev->op != CS_OP_FINALIZE)
            continue;
        int64_t tb = cs__clock_map(&rk->clk, ev->t_begin), te = cs__clock_map(&rk->clk, ev->t_end);
        if (bd) {
            if (in && step == K) {
                *end = tb;
                closed = 1;
                break;
            }
            in = 0;
            if (bd > 0) {
                step++;
                in = 1;
                if (step == K) {
                    *begin = tb;
                    found = 1;
                }
            }
        }
        if (ev->op == CS_OP_FINALIZE && !fin)
            fin = tb;
        if (step > K)
            break;
        if (!(in && step == K))
            continue;
        last = te;
        double t0 = (double)(tb - *begin), t1 = (double)(te - *begin);
        int dim = -1, kind = CS_TL_OTHER;
        switch (k) {
        case CS_KIND_COLL:
        case CS_KIND_ICOLL:
        case CS_KIND_NCOLL:
            kind = CS_TL_COLL;
            dim = dim_of_comm(run, ev->comm);
            break;
        case CS_KIND_P2P:
        case CS_KIND_IP2P:
        case CS_KIND_NP2P:
            kind = CS_TL_P2P;
            dim = dim_of_comm(run, ev->comm);
            break;
        case CS_KIND_WAIT:
            kind = CS_TL_DONE;
            break;
        case CS_KIND_DONE: {
            uint64_t *v = cs__map_get(&req, 0, ev->request);
            int64_t from = v ? (int64_t)*v : *begin;
            if (v)
                cs__map_del(&req, 0, ev->request);
            row->inflight_s += (double)(te - from) / 1e9;
            seg_add(b, row, (double)(from - *begin), t1, CS_TL_INFLIGHT, -1);
            continue;
        }
        case CS_KIND_GPU:
            continue; /* device records are not host calls */
        default:
            break;
        }
        if (k == CS_KIND_ICOLL || k == CS_KIND_IP2P) {
            int fresh;
            uint64_t *v = cs__map_put(&req, 0, ev->request, &fresh);
            if (v)
                *v = (uint64_t)tb;
        }
        row->calls_s += (t1 - t0) / 1e9;
        seg_add(b, row, t0, t1, kind, dim);
    }
    if (found && !closed)
        *end = fin ? fin : last;
    /* Requests still in flight at the step's end. */
    for (size_t i = 0; found && i < req.cap; i++)
        if (req.slot[i].used && (int64_t)req.slot[i].v < *end) {
            row->inflight_s += (double)(*end - (int64_t)req.slot[i].v) / 1e9;
            seg_add(b, row, (double)((int64_t)req.slot[i].v - *begin), (double)(*end - *begin),
                    CS_TL_INFLIGHT, -1);
        }
    cs__map_free(&req);
    cs_reader_rewind(rd);
    return found ? 0 : -1;
}

/* The ranks shown: all up to CS_VIEW_RANK_BARS, else evenly spaced ones plus the straggler. */
static size_t pick_ranks(const struct cs_report *rep, int *pick, size_t most)
{
    size_t n = rep->nranks, m = n < most ? n : most;
    for (size_t j = 0; j < m; j++)
        pick[j] = rep->ranks[j * n / m].rank;
    if (m < n && rep->nstragglers) {
        int s = rep->stragglers[0].rank;
        size_t best = 0;
        int have = 0;
        for (size_t j = 0; j < m; j++) {
            have |= pick[j] == s;
            if (abs(pick[j] - s) < abs(pick[best] - s))
                best = j;
        }
        if (!have)
            pick[best] = s;
        /* Keep rank order (one swap pass at most is needed around best). */
        for (size_t j = best; j + 1 < m && pick[j] > pick[j + 1]; j++) {
            int t = pick[j];
            pick[j] = pick[j + 1];
            pick[j + 1] = t;
        }
        for (size_t j = best; j > 0 && pick[j] < pick[j - 1]; j--) {
            int t = pick[j];
            pick[j] = pick[j - 1];
            pick[j - 1] = t;
        }
    }
    return m;
}

static void build_timeline(struct cs__run *run, struct cs_report *rep)
{
    struct cs_report_views *o = rep->views;
    const struct cs_report_steps *st = rep->steps;
    if (!st || !run->steps || !run->steps->detect.mode || !st->count) {
        snprintf(o->timeline_note, sizeof o->timeline_note,
                 "it needs steps, and none were found in this run%s%.150s",
                 st && st->note[0] ? ": " : "", st ? st->note : "");
        return;
    }
    int K = median_step(st);
    if (K < 0) {
        snprintf(o->timeline_note, sizeof o->timeline_note,
                 "it needs a complete (timed) step, and none of the %d steps is one", st->count);
        return;
    }
    struct cs_report_timeline *tl = calloc(1, sizeof *tl);
    int *pick = calloc(rep->nranks + 1, sizeof *pick);
    if (tl)
        tl->rows = calloc(rep->nranks + 1, sizeof *tl->rows);
    if (!tl || !pick || !tl->rows) {
        if (tl)
            free(tl->rows);
        free(tl);
        free(pick);
        snprintf(o->timeline_note, sizeof o->timeline_note, "out of memory");
        return;
    }
    tl->step = K;
    tl->step_s = st->list[K].time_s;
    tl->ranks_total = (int)rep->nranks;
    /* Ranks with GPU lanes take several lines each: fewer of them are shown. */
    int any_gpu = 0;
    for (size_t i = 0; i < rep->nranks; i++)
        any_gpu |= run->steps->r[rep->ranks[i].rank].gpu;
    size_t m = pick_ranks(rep, pick, any_gpu ? CS_VIEW_TL_GPU_ROWS : CS_VIEW_RANK_BARS);
    struct tl_build b = {0};
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    int64_t *beg = calloc(m + 1, sizeof *beg);
    for (size_t j = 0; j < m && beg; j++) {
        struct cs_report_tl_row *row = &tl->rows[tl->nrows];
        int64_t e = 0;
        if (read_step(run, pick[j], K, &b, row, &beg[tl->nrows], &e, tl->step_s)) {
            free(row->seg);
            memset(row, 0, sizeof *row);
            continue;
        }
        if (cs__vsteps_gpu_row(run, pick[j], beg[tl->nrows], e, tl->step_s / 4000, row))
            row->gtruncated = 1; /* out of memory: the lanes drawn so far */
        tl->gpu_rows += row->gpu;
        row->rank = pick[j];
        snprintf(row->host, sizeof row->host, "%s", run->ranks[pick[j]].h->host);
        row->end_s = (double)(e - beg[tl->nrows]) / 1e9; /* made absolute below */
        if (beg[tl->nrows] < lo)
            lo = beg[tl->nrows];
        if (e > hi)
            hi = e;
        tl->nrows++;
    }
    /* Rows were read relative to their own begin: shift them onto the common origin. */
    for (size_t j = 0; j < tl->nrows; j++) {
        struct cs_report_tl_row *row = &tl->rows[j];
        double d = (double)(beg[j] - lo) / 1e9;
        row->begin_s = d;
        row->end_s += d;
        for (size_t i = 0; i < row->nseg; i++) {
            row->seg[i].t0_s += d;
            row->seg[i].t1_s += d;
        }
        for (size_t i = 0; i < row->ngseg; i++) {
            row->gseg[i].t0_s += d;
            row->gseg[i].t1_s += d;
        }
    }
    free(beg);
    free(pick);
    if (!tl->nrows) {
        free(tl->rows);
        free(tl);
        snprintf(o->timeline_note, sizeof o->timeline_note,
                 "no shown rank has step %d in its trace", K);
        return;
    }
    tl->window_s = (double)(hi - lo) / 1e9;
    o->timeline = tl;
}

void cs__vsteps_build(struct cs__run *run, struct cs_report *rep)
{
    if (!rep->views)
        return;
    rep->views->has_steps = rep->steps && rep->steps->count > 0;
    rep->views->has_groups = rep->steps != NULL;
    rep->views->has_whatif = rep->steps != NULL;
    step_heat(run, rep, rep->views);
    step_findings(run, rep);
    /* The timeline costs a second read of the shown ranks up to the chosen step: only for the
     * HTML report, which is the only renderer that draws it. */
    if (run->want_timeline)
        build_timeline(run, rep);
    else
        snprintf(rep->views->timeline_note, sizeof rep->views->timeline_note,
                 "the step timeline is built only when the HTML report is asked for");
}
