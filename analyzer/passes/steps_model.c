/*
 * The report model of the step analysis: step statistics, time budgets, gradient sync, overlap,
 * groups and the POP serialisation / transfer split, from the accumulators of steps.c.  Numbers
 * only; report_steps.c formats them.  Formulas: docs/metrics.md.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commscope/totals.h"
#include "steps_internal.h"

static int dbl_cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Waiting counted in a sum of rank-steps: at most the blocked (on GPU ranks: exposed) time it
 * is part of.  Host waits never exceed their calls, so the cap only acts on GPU ranks, whose
 * waiting kernels may be hidden behind compute kernels (as in the report views). */
static int size_cmp(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    return (a > b) - (a < b);
}

static double capped(double wait, double blocked)
{
    return wait < blocked ? wait : (blocked > 0 ? blocked : 0);
}

static void fill_budget(struct cs_report_budget *o, const struct cs__budget *b, int rank)
{
    *o = (struct cs_report_budget){.rank = rank, .steps = b->n};
    double n = b->n > 0 ? b->n * 1e9 : NAN;
    double grad = b->grad_blocked - capped(b->grad_wait, b->grad_blocked), wait = 0;
    o->step_s = b->dur / n;
    /* Host ranks: step time outside MPI calls; GPU ranks: time a compute kernel ran. */
    o->compute_s = (b->dur - b->gdur - b->mpi + b->gcompute) / n;
    o->grad_sync_s = grad / n;
    for (int d = 0; d < CS_DIM_N; d++) {
        double w = capped(b->wait[d], b->blocked[d]);
        double x = b->blocked[d] - w - (d == CS_DIM_DP ? grad : 0);
        o->comm_s[d] = (x > 0 ? x : 0) / n;
        wait += w;
    }
    double comm = 0;
    for (int d = 0; d < CS_DIM_N; d++)
        comm += o->comm_s[d];
    o->other_comm_s = comm - o->comm_s[CS_DIM_TP];
    o->wait_s = wait / n;
    o->p2p_wait_s = (b->p2p_wait < wait ? b->p2p_wait : wait) / n;
    o->other_mpi_s = b->other_mpi / n;
    /* Host-side traces cannot tell a rank that waits on its GPU from one that computes: idle
     * is known only when every rank-step summed had a GPU timeline. */
    o->idle_s = b->n > 0 && b->gn == b->n ? b->gidle / n : NAN;
}

/* p2p (NULL none): [world] each rank's waits at point-to-point calls over the run (ns). */
static void pop_split(const struct cs_report *rep, struct cs_report_steps *o, int world,
                      const double *p2p)
{
    double t = 0, t_ideal = 0, comp = 0;
    for (size_t i = 0; i < rep->nranks; i++) {
        const struct cs_report_rank *r = &rep->ranks[i];
        double w = r->wait_s;
        if (p2p && r->rank >= 0 && r->rank < world)
            w += p2p[r->rank] / 1e9;
        if (w > r->comm_s)
            w = r->comm_s;
        if (w < 0)
            w = 0;
        if (r->wall_s > t)
            t = r->wall_s;
        if (r->compute_s + w > t_ideal)
            t_ideal = r->compute_s + w;
        if (r->compute_s > comp)
            comp = r->compute_s;
    }
    if (t_ideal > t)
        t_ideal = t;
    o->serialization_efficiency = t_ideal > 0 && comp > 0 ? comp / t_ideal : NAN;
    o->transfer_efficiency = t > 0 && t_ideal > 0 ? t_ideal / t : NAN;
}

/* The gradient synchronisation's figures from the timed steps' sum tot. */
static void grad_sync(struct cs_report_steps *o, const struct cs__budget *t, int any_dp)
{
    if (!any_dp)
        snprintf(o->grad_note, sizeof o->grad_note,
                 "no data-parallel group was found, so no call counts as gradient"
                 " synchronisation");
    else if (!o->timed || t->dur <= 0)
        snprintf(o->grad_note, sizeof o->grad_note, "no complete steps to measure it in");
    else {
        double rs = t->n * 1e9;
        o->grad_share = t->grad_blocked / t->dur;
        o->grad_exposed_s = t->grad_blocked / rs;
        o->grad_wait_s = capped(t->grad_wait, t->grad_blocked) / rs;
        o->grad_overlapped_s = t->grad_ovl / rs;
        o->grad_total_s = (t->grad_blocked + t->grad_ovl) / rs;
    }
}

/* Overlap per communicator, the groups and the parallelism dimensions. */
static void overlap_groups(const struct cs__steps *S, const struct cs_report *rep,
                           struct cs_report_steps *o)
{
    size_t nc = S->groups.ncomms;
    o->overlap = calloc(nc + 1, sizeof *o->overlap);
    o->groups = calloc(nc + 1, sizeof *o->groups);
    double ovl = 0, span = 0, wall = 0;
    for (size_t i = 0; i < rep->nranks; i++)
        wall += rep->ranks[i].wall_s * 1e9;
    for (int d = 0; d < CS_DIM_N; d++)
        o->dims[d] = (struct cs_report_dim){.role = (enum cs__dim)d, .overlap_ratio = NAN};
    double dspan[CS_DIM_N] = {0}, dovl[CS_DIM_N] = {0};
    for (size_t i = 0; i < nc && o->overlap && o->groups; i++) {
        const struct cs__scomm *sc = &S->groups.comms[i];
        const struct cs__cclass *cl = &S->groups.classes[sc->cls];
        if (sc->span > 0) {
            struct cs_report_overlap *v = &o->overlap[o->noverlap++];
            cs__comm_label(sc->id, v->comm, sizeof v->comm);
            v->ratio = sc->ovl / sc->span;
            v->overlapped_s = sc->ovl / 1e9;
            v->in_flight_s = sc->span / 1e9;
            ovl += sc->ovl;
            span += sc->span;
        }
        if (sc->size < 2)
            continue;
        struct cs_report_group *gr = &o->groups[o->ngroups];
        gr->ranks = malloc((size_t)sc->size * sizeof *gr->ranks);
        if (!gr->ranks)
            continue;
        o->ngroups++;
        memcpy(gr->ranks, sc->members, (size_t)sc->size * sizeof *gr->ranks);
        cs__comm_label(sc->id, gr->comm, sizeof gr->comm);
        gr->role = cl->role < CS_DIM_N ? cl->role : CS_DIM_OTHER;
        gr->size = sc->size;
        gr->confidence = cl->confidence;
        snprintf(gr->why, sizeof gr->why, "%s", cl->why);
        snprintf(gr->label, sizeof gr->label, "%s", cl->label ? cl->label : "other");
        struct cs_report_dim *dm = &o->dims[gr->role];
        dm->comms++;
        dm->time_s += sc->blocked / 1e9;
        dm->bytes += sc->bytes;
        dspan[gr->role] += sc->span;
        dovl[gr->role] += sc->ovl;
    }
    for (int d = 0; d < CS_DIM_N; d++) {
        o->dims[d].exposed_share = wall > 0 ? o->dims[d].time_s * 1e9 / wall : NAN;
        o->dims[d].overlap_ratio = dspan[d] > 0 ? dovl[d] / dspan[d] : NAN;
    }
    o->overlap_ratio = span > 0 ? ovl / span : NAN;
}

/*
 * The steps of the whole run where the reference rank's trace kept only a window (ring mode): the
 * window's steps plus the step starts among the events outside it, counted from the totals' rows
 * (markers: the marker op's calls; pattern: the anchor's calls of its size on its class, every
 * anchor_m-th a step).  NVTX steps and an anchor whose row mixes sizes cannot be counted: -1.
 */
/* A timed step by (time, index): the order of the representative step's choice. */
struct timed_step {
    double t;
    size_t i; /* list index (its step index rises with it) */
};

static int by_time(const void *x, const void *y)
{
    const struct timed_step *a = x, *b = y;
    if (a->t != b->t)
        return (a->t > b->t) - (a->t < b->t);
    return (a->i > b->i) - (a->i < b->i);
}

/* The point-to-point transfers the what-if pass measured, by size bucket (report.h). */
static void p2p_buckets(const struct cs__steps *S, struct cs_report *rep)
{
    rep->p2p_bw_unmeasured = S->xfer_nb;
    rep->p2p_bw = calloc(CS_REPORT_P2P_BUCKETS, sizeof *rep->p2p_bw);
    for (int k = 0; rep->p2p_bw && k < CS_REPORT_P2P_BUCKETS; k++) {
        const struct cs__xfer *x = &S->xfer[k];
        if (!x->pairs)
            continue;
        struct cs_report_p2p_bucket *o = &rep->p2p_bw[rep->np2p_bw++];
        o->log2_size = k;
        o->pairs = x->pairs;
        o->mean_bytes = x->bytes / (double)x->pairs;
        o->transfer_gbps = x->xfer_ns > 0 ? x->bytes / x->xfer_ns : NAN;
        o->recv_call_gbps = x->recv_ns > 0 ? x->bytes / x->recv_ns : NAN;
        o->send_call_gbps = x->send_ns > 0 ? x->send_bytes / x->send_ns : NAN;
    }
}

/* Which steps the JSON and HTML list (CS_REPORT_STEPS_LISTED), the representative step and the
 * histogram of the timed steps' times. */
static void list_steps(struct cs_report_steps *o)
{
    o->rep_step = -1;
    size_t n = o->nlist, timed = 0;
    double lo = INFINITY, hi = -INFINITY;
    /* the representative: the median timed step, the lower middle one for an even count (by
     * time, then index) */
    struct timed_step *by = malloc((n + 1) * sizeof *by);
    for (size_t i = 0; i < n; i++) {
        const struct cs_report_step *p = &o->list[i];
        if (!p->timed || !isfinite(p->time_s))
            continue;
        if (by)
            by[timed] = (struct timed_step){p->time_s, i};
        timed++;
        lo = p->time_s < lo ? p->time_s : lo;
        hi = p->time_s > hi ? p->time_s : hi;
    }
    if (by && timed) {
        qsort(by, timed, sizeof *by, by_time);
        o->rep_step = (long)by[(timed - 1) / 2].i;
    }
    free(by);
    o->hist_lo_s = timed ? lo : NAN;
    o->hist_hi_s = timed ? hi : NAN;
    for (size_t i = 0; i < n && timed; i++) {
        const struct cs_report_step *p = &o->list[i];
        if (!p->timed || !isfinite(p->time_s))
            continue;
        /* log-spaced bins: a few slow steps (a checkpoint, the first after warm-up) do not
         * squeeze the rest into one bin */
        size_t b = hi > lo && lo > 0
                       ? (size_t)(log(p->time_s / lo) / log(hi / lo) * CS_REPORT_STEP_BINS)
                       : 0;
        o->hist[b < CS_REPORT_STEP_BINS ? b : CS_REPORT_STEP_BINS - 1]++;
    }
    o->listed =
        malloc((n < CS_REPORT_STEPS_LISTED ? n : CS_REPORT_STEPS_LISTED) * sizeof *o->listed + 1);
    if (!o->listed)
        return;
    if (n <= CS_REPORT_STEPS_LISTED) {
        for (size_t i = 0; i < n; i++)
            o->listed[o->nlisted++] = i;
        return;
    }
    /* The slowest timed steps (a selection by a bounded sorted list), then the representative,
     * the first and the last, in step order. */
    size_t k = 0, *top = o->listed;
    for (size_t i = 0; i < n; i++) {
        const struct cs_report_step *p = &o->list[i];
        if (!p->timed || !isfinite(p->time_s))
            continue;
        if (k == CS_REPORT_STEPS_SLOWEST && p->time_s <= o->list[top[k - 1]].time_s)
            continue;
        size_t j = k < CS_REPORT_STEPS_SLOWEST ? k++ : k - 1;
        while (j > 0 && o->list[top[j - 1]].time_s < p->time_s) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = i;
    }
    size_t extra[3] = {o->rep_step >= 0 ? (size_t)o->rep_step : 0, 0, n - 1};
    for (int e = 0; e < 3; e++) {
        size_t j = 0;
        while (j < k && top[j] != extra[e])
            j++;
        if (j == k)
            top[k++] = extra[e];
    }
    qsort(top, k, sizeof *top, size_cmp);
    o->nlisted = k;
}

static void run_steps(struct cs__run *run, struct cs__steps *S, struct cs_report_steps *o)
{
    o->run_count = o->count;
    o->run_mean_s = NAN;
    int ref = S->detect.ref;
    if (ref < 0 || ref >= run->world || !S->detect.mode || !run->ranks[ref].present)
        return;
    const struct cs_reader_totals *t = cs_reader_totals(run->ranks[ref].rd);
    if (!t->ring || !t->t_window)
        return;
    uint64_t occ = 0, t0 = UINT64_MAX;
    int known = S->detect.mode == 1 || S->detect.mode == 2;
    for (size_t i = 0; known && i < t->nrows; i++) {
        const struct cs_total_row *w = &t->rows[i];
        if (w->op == CS_TOTAL_OP_OTHER) {
            known = 0; /* some calls are not known by op */
        } else if (S->detect.mode == 1) {
            if (w->op != S->detect.marker_op)
                continue;
            occ += w->calls;
        } else {
            if (w->op != S->detect.anchor_op ||
                w->bucket != cs_total_bucket(S->detect.anchor_bytes))
                continue;
            int ci = cs__groups_comm_cached(run, S, w->comm);
            if (ci < 0 || S->groups.comms[ci].cls != S->detect.anchor_cls)
                continue;
            if (w->size == CS_TOTAL_MIXED)
                known = 0;
            else if (w->size == S->detect.anchor_bytes)
                occ += w->calls;
            else
                continue;
        }
        if (w->t_first < t0)
            t0 = w->t_first;
    }
    if (!known) {
        o->run_count = -1;
        return;
    }
    uint64_t m = S->detect.mode == 2 && S->detect.anchor_m ? S->detect.anchor_m : 1;
    o->run_count = o->count + (int)(occ / m);
    if (occ && o->run_count > 1 && S->r[ref].step >= 0)
        o->run_mean_s = (double)(S->r[ref].begin - cs__clock_map(&run->ranks[ref].clk, t0)) / 1e9 /
                        (double)(o->run_count - 1);
}

void cs__steps_report(struct cs__run *run, struct cs_report *rep)
{
    struct cs__steps *S = run->steps;
    struct cs_report_steps *o = calloc(1, sizeof *o);
    if (!o) {
        cs__problem(run, "out of memory building the step report");
        cs__steps_free(run);
        return;
    }
    rep->steps = o;
    o->mean_s = o->median_s = o->p95_s = NAN;
    o->grad_share = o->grad_total_s = o->grad_exposed_s = o->grad_wait_s = o->grad_overlapped_s =
        NAN;
    o->overlap_ratio = NAN;
    o->rep_step = -1;
    o->hist_lo_s = o->hist_hi_s = NAN;
    o->whatif = (struct cs_report_whatif){NAN, NAN, NAN, NAN, NAN, NAN, ""};
    fill_budget(&o->total, &(struct cs__budget){0}, -1);
    pop_split(rep, o, 0, NULL);
    snprintf(o->source, sizeof o->source, "none");
    o->run_mean_s = NAN;
    if (!S) {
        snprintf(o->note, sizeof o->note, "the step analysis did not run (out of memory)");
        return;
    }
    snprintf(o->source, sizeof o->source, "%s", S->detect.source);
    snprintf(o->detail, sizeof o->detail, "%s", S->detect.detail);
    snprintf(o->note, sizeof o->note, "%s", S->detect.note);

    int n = S->detect.ref >= 0 && S->detect.mode ? S->r[S->detect.ref].step + 1 : 0;
    if (S->detect.mode && S->count_min != S->count_max) {
        /* Not a problem of the input: the structure chosen on the reference rank is made a
         * different number of times elsewhere (a rank that computes more steps, or a pattern
         * whose calls differ between ranks).  Said, and the steps all ranks have analysed. */
        snprintf(o->note, sizeof o->note,
                 "ranks disagree on the number of steps (%d to %d): rank %d found %d, rank %d"
                 " found %d, the reference rank %d found %d; the first %d are analysed",
                 S->count_min, S->count_max, S->rank_min, S->count_min, S->rank_max, S->count_max,
                 S->detect.ref, n, S->count_min);
        if (S->count_min < n)
            n = S->count_min;
    }
    if ((size_t)n > S->ng)
        n = (int)S->ng;
    o->count = n;
    run_steps(run, S, o);
    o->tail_excluded = n > 0 && S->tail;
    int usable = n - o->tail_excluded;
    o->warmup_excluded = usable >= 3;
    o->timed = usable > o->warmup_excluded ? usable - o->warmup_excluded : 0;
    if (n > 0 && !o->timed && !o->note[0])
        snprintf(o->note, sizeof o->note,
                 "%d step%s found, but none is complete (the last one has no closing marker)", n,
                 n == 1 ? "" : "s");

    /* Steps: time of step k = mean over ranks of the rank's step duration. */
    o->list = calloc((size_t)n + 1, sizeof *o->list);
    double *t = calloc((size_t)n + 1, sizeof *t);
    struct cs__budget tot = {0};
    int any_dp = 0;
    for (size_t c = 0; c < S->groups.nclasses; c++)
        any_dp |= S->groups.classes[c].role == CS_DIM_DP;
    if (o->list && t) {
        size_t m = 0;
        for (int k = 0; k < n; k++) {
            const struct cs__budget *g = &S->g[k];
            struct cs_report_step *s = &o->list[o->nlist++];
            s->index = k;
            s->timed = k >= o->warmup_excluded && k < usable;
            s->time_s = g->n > 0 ? g->dur / g->n / 1e9 : NAN;
            s->overlap_ratio = g->span > 0 ? g->ovl / g->span : NAN;
            s->grad_sync_share = any_dp && g->dur > 0 ? g->grad_blocked / g->dur : NAN;
            struct cs_report_budget pb;
            fill_budget(&pb, g, -1);
            s->compute_s = pb.compute_s;
            s->grad_sync_s = pb.grad_sync_s;
            s->comm_s = 0;
            for (int d = 0; d < CS_DIM_N; d++)
                s->comm_s += pb.comm_s[d];
            s->wait_s = pb.wait_s;
            s->other_mpi_s = pb.other_mpi_s;
            if (s->timed) {
                t[m++] = s->time_s;
                const double *src = (const double *)g;
                double *dst = (double *)&tot;
                for (size_t i = 0; i < sizeof tot / sizeof(double); i++)
                    dst[i] += src[i];
            }
        }
        if (m) {
            double sum = 0;
            for (size_t i = 0; i < m; i++)
                sum += t[i];
            qsort(t, m, sizeof *t, dbl_cmp);
            o->mean_s = sum / (double)m;
            o->median_s = m % 2 ? t[m / 2] : (t[m / 2 - 1] + t[m / 2]) / 2;
            size_t p = (size_t)ceil(0.95 * (double)m);
            o->p95_s = t[p ? p - 1 : 0];
        }
    }
    free(t);
    list_steps(o);

    /* The what-if replay's pass over the timed steps also measures the waits at point-to-point
     * calls (matched there); they are waiting in the budget (docs/metrics.md). */
    double *pw = calloc((size_t)run->world * (CS_DIM_N + 3) + 1, sizeof *pw);
    double *prun = pw ? pw + (size_t)run->world * CS_DIM_N : NULL;
    if (!pw)
        cs__problem(run, "out of memory for the point-to-point waits of the step budget");
    int whole =
        cs__whatif_report(run, S, o->warmup_excluded, usable, o->mean_s, &o->whatif, pw, prun);
    /* The POP split again, with the waits at point-to-point calls over the whole run; and those
     * waits per host rank (a GPU rank's are on its GPU timeline, in the budget only). */
    if (pw)
        pop_split(rep, o, run->world, prun);
    for (size_t i = 0; whole && prun && i < rep->nranks; i++) {
        int r = rep->ranks[i].rank;
        if (r >= 0 && r < run->world && !S->r[r].gpu) {
            rep->ranks[i].p2p_wait_s = prun[r] / 1e9;
            rep->ranks[i].p2p_caused_s = prun[2 * (size_t)run->world + (size_t)r] / 1e9;
        }
    }
    /* For the time segments (views.c): where those waits were, per host rank. */
    if (whole && prun) {
        free(run->p2p_wait);
        run->p2p_wait = malloc(2 * (size_t)run->world * sizeof *run->p2p_wait);
        if (!run->p2p_wait)
            cs__problem(run, "out of memory: the time segments keep the waits at point-to-point "
                             "calls in those calls' time");
        else /* (whatif.c books host ranks only: a GPU rank's are 0) */
            memcpy(run->p2p_wait, prun, 2 * (size_t)run->world * sizeof *prun);
    }
    cs__whatif_gpu(run, S, o->warmup_excluded, usable, o->mean_s, &o->whatif);
    p2p_buckets(S, rep);
    for (int r = 0; r < run->world && pw; r++)
        for (int d = 0; d < CS_DIM_N; d++) {
            tot.wait[d] += pw[(size_t)r * CS_DIM_N + d];
            tot.p2p_wait += pw[(size_t)r * CS_DIM_N + d];
        }

    /* Budgets. */
    fill_budget(&o->total, &tot, -1);
    o->ranks = calloc((size_t)run->world + 1, sizeof *o->ranks);
    for (int r = 0; r < run->world && o->ranks && o->timed; r++) {
        if (!run->ranks[r].present)
            continue;
        struct cs__budget b = S->r[r].rest;
        if (!o->warmup_excluded) {
            const double *src = (const double *)&S->r[r].first;
            double *dst = (double *)&b;
            for (size_t i = 0; i < sizeof b / sizeof(double); i++)
                dst[i] += src[i];
        }
        for (int d = 0; d < CS_DIM_N && pw; d++) {
            b.wait[d] += pw[(size_t)r * CS_DIM_N + d];
            b.p2p_wait += pw[(size_t)r * CS_DIM_N + d];
        }
        fill_budget(&o->ranks[o->nranks++], &b, r);
    }
    free(pw);

    grad_sync(o, &tot, any_dp);
    overlap_groups(S, rep, o);
    /* The run's step state stays for the step views (views_steps.c); analyze.c frees it. */
}

void cs__steps_report_free(struct cs_report *rep)
{
    struct cs_report_steps *o = rep->steps;
    if (!o)
        return;
    for (size_t i = 0; i < o->ngroups; i++)
        free(o->groups[i].ranks);
    free(o->groups);
    free(o->overlap);
    free(o->ranks);
    free(o->list);
    free(o->listed);
    free(o);
    rep->steps = NULL;
}
