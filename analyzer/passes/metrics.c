/*
 * Metrics: one pass over the merged event stream (cs__metrics_event), one call per collective
 * instance (cs__metrics_instance), then the report model (cs__report_build).  Numbers only; the
 * renderers format them.  Every formula is documented in docs/metrics.md.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "nccl_p2p.h"
#include "internal.h"
#include "passes.h"
#include "steps.h"

static size_t row_lookup(struct cs__run *run, uint16_t op, uint64_t comm)
{
    int fresh;
    uint64_t *v = cs__map_put(&run->row_by_key, op, comm, &fresh);
    if (!v)
        return SIZE_MAX;
    if (!fresh)
        return (size_t)(*v - 1);
    if (cs__grow((void **)&run->rows, &run->caprows, run->nrows + 1, sizeof *run->rows)) {
        cs__map_del(&run->row_by_key, op, comm);
        return SIZE_MAX;
    }
    run->rows[run->nrows] = (struct cs__oprow){.op = op, .comm = comm};
    *v = ++run->nrows;
    return run->nrows - 1;
}

static __attribute__((noinline)) size_t row_miss(struct cs__run *run, struct cs__rowc *c,
                                                 uint16_t op, uint64_t comm)
{
    size_t row = row_lookup(run, op, comm);
    if (row != SIZE_MAX && op != 0 && row < UINT32_MAX)
        *c = (struct cs__rowc){.comm = comm, .op = op, .row = (uint32_t)row};
    return row;
}

/* cs__row_get inline (the per-event metrics): a cache hit costs no call, a miss goes to
 * row_miss. */
static inline size_t row_get(struct cs__run *run, uint16_t op, uint64_t comm)
{
    struct cs__rowc *c =
        &run->rowc[(comm * 0x9e3779b97f4a7c15ull + op * 0x2545f4914f6cdd1dull) >> 56];
    if (c->op == op && c->comm == comm)
        return c->row;
    return row_miss(run, c, op, comm);
}

size_t cs__row_get(struct cs__run *run, uint16_t op, uint64_t comm)
{
    return row_get(run, op, comm);
}

/* Move the rank's last wait/test call from its row on no communicator to the row of (its op,
 * comm). */
static void wait_to_comm(struct cs__run *run, struct cs__rank *rk, uint64_t comm)
{
    size_t from = rk->wait_row1 - 1;
    if (from >= run->nrows)
        return;
    size_t to = row_get(run, run->rows[from].op, comm);
    if (to == SIZE_MAX)
        return; /* (out of memory: it stays where it was) */
    struct cs__oprow *a = &run->rows[from], *b = &run->rows[to];
    a->calls--;
    a->time_ns -= rk->wait_dur;
    b->calls++;
    b->time_ns += rk->wait_dur;
}

static int is_comm_kind(enum cs_op_kind k)
{
    return k == CS_KIND_COLL || k == CS_KIND_ICOLL || k == CS_KIND_P2P || k == CS_KIND_IP2P ||
           k == CS_KIND_WAIT;
}

size_t cs__metrics_event(struct cs__run *run, int rank, const struct cs_event *ev,
                         enum cs_op_kind k, int64_t te)
{
    struct cs__rank *rk = &run->ranks[rank];
    if (te > rk->t_last_end)
        rk->t_last_end = te;
    if (rk->wait_row1 && (k != CS_KIND_DONE || ev->comm)) {
        /* A wait/test call counts on the communicator of the first request it completed (the
         * collector records the call before its completions). */
        if (k == CS_KIND_DONE)
            wait_to_comm(run, rk, ev->comm);
        rk->wait_row1 = 0;
    }
    if (!is_comm_kind(k))
        return k == CS_KIND_NCOLL || k == CS_KIND_NP2P ? cs__nccl_metrics_event(run, rank, ev)
                                                       : SIZE_MAX;
    uint64_t dur = ev->t_end - ev->t_begin;
    rk->comm_ns += dur;
    rk->calls++;
    rk->bytes += ev->bytes;
    size_t row = row_get(run, ev->op, ev->comm);
    if (row == SIZE_MAX)
        return row;
    struct cs__oprow *r = &run->rows[row];
    /* A receive sends nothing: its row counts what it received. */
    uint64_t b = (ev->op == CS_OP_RECV || ev->op == CS_OP_IRECV) ? ev->bytes_recv : ev->bytes;
    r->calls++;
    r->bytes += b;
    r->time_ns += dur;
    if (k == CS_KIND_WAIT && !ev->comm) {
        rk->wait_row1 = row + 1;
        rk->wait_dur = dur;
    }
    if (k == CS_KIND_P2P) {
        r->p2p_bytes += (double)(ev->bytes > ev->bytes_recv ? ev->bytes : ev->bytes_recv);
        r->p2p_ns += (double)dur;
        int sc = cs__peer_scope(run, rank, ev->peer);
        if (sc >= 0) {
            r->p2p_scope_bytes[sc] +=
                (double)(ev->bytes > ev->bytes_recv ? ev->bytes : ev->bytes_recv);
            r->p2p_scope_ns[sc] += (double)dur;
        }
    }
    return row;
}

void cs__metrics_request_done(struct cs__run *run, const struct cs__pending *p, int64_t t_end)
{
    if (p->row == SIZE_MAX || p->row >= run->nrows)
        return;
    struct cs__oprow *r = &run->rows[p->row];
    double b = (double)p->bytes, ns = (double)(t_end > p->t_begin ? t_end - p->t_begin : 0);
    r->p2p_bytes += b;
    r->p2p_ns += ns;
    if (p->scope >= 0) {
        r->p2p_scope_bytes[p->scope] += b;
        r->p2p_scope_ns[p->scope] += ns;
    }
    cs__analyze_fact(
        run, &(struct cs__fact){
                 .kind = CS__FACT_TRANSFER, .op = r->op, .comm = r->comm, .bytes = b, .ns = ns});
}

/* The arrival order of an instance's members: the first and last arrival, the member li of the
 * last (the first such), and the second latest (the latest of the others). */
struct arrivals {
    int64_t first, last, second;
    int32_t li;
};

static inline void arrival_order(const int64_t *a, int32_t n, struct arrivals *o)
{
    *o = (struct arrivals){.first = a[0], .last = a[0], .second = INT64_MIN, .li = 0};
    for (int32_t i = 1; i < n; i++) {
        if (a[i] > o->last) {
            o->second = o->last;
            o->last = a[i];
            o->li = i;
        } else if (a[i] > o->second) {
            o->second = a[i];
        }
        if (a[i] < o->first)
            o->first = a[i];
    }
}

void cs__metrics_instance(struct cs__run *run, struct cs__inst *in, struct cs__inst_facts *f)
{
    if (!f->used) {
        if (in->edge)
            run->window_edge++;
        else
            run->incomplete++;
        return;
    }
    run->matched++;
    int32_t n = in->n;
    enum cs_op_pattern pat = (enum cs_op_pattern)in->pat;
    int64_t *a = in->arr;

    /* The last end, the largest size and the earliest end; then the arrival order. */
    int64_t last_end = in->end[0], min_end = in->end[0];
    uint64_t S = in->size[0];
    for (int32_t i = 1; i < n; i++) {
        if (in->end[i] > last_end)
            last_end = in->end[i];
        if (in->end[i] < min_end)
            min_end = in->end[i];
        if (in->size[i] > S)
            S = in->size[i];
    }
    struct arrivals o;
    arrival_order(a, n, &o);
    /* Causality: in an NxN operation nobody leaves before the last member arrived.  A clock
     * error shows as an end before a later arrival; pull those arrivals back to the earliest
     * end, the smallest change that restores the order (then the arrival order again). */
    if (pat == CS_PAT_NXN && n > 1 && o.last > min_end) {
        run->violations++;
        for (int32_t i = 0; i < n; i++)
            if (a[i] > min_end)
                a[i] = min_end;
        arrival_order(a, n, &o);
    }
    int32_t li = o.li;
    int64_t first = o.first, last = o.last, second = o.second;
    int64_t skew = last - first;
    run->skew_sum_ns += (double)skew;
    if (skew > run->skew_max_ns)
        run->skew_max_ns = skew;

    /* Waits by the op's pattern, one loop each; then each member's rank adds its wait, and the
     * others' waits are the sum less the last member's (integers: any order gives the same). */
    int64_t *wt = in->wait;
    switch (pat) {
    case CS_PAT_NXN:
        for (int32_t i = 0; i < n; i++)
            wt[i] = last - a[i];
        break;
    case CS_PAT_1TON: {
        int32_t root = in->root;
        for (int32_t i = 0; i < n; i++)
            wt[i] = root >= 0 && i != root && a[root] > a[i] ? a[root] - a[i] : 0;
        break;
    }
    case CS_PAT_NTO1:
        for (int32_t i = 0; i < n; i++)
            wt[i] = i == in->root && last > a[i] ? last - a[i] : 0;
        break;
    case CS_PAT_PREFIX: {
        int64_t prefix = INT64_MIN;
        for (int32_t i = 0; i < n; i++) {
            if (a[i] > prefix)
                prefix = a[i];
            wt[i] = prefix - a[i];
        }
        break;
    }
    default:
        for (int32_t i = 0; i < n; i++)
            wt[i] = 0;
        break;
    }
    /* (each wait is >= 0 and below 2^63: times are within 2^61 of [0, 2^62)) */
    uint64_t others = 0;
    for (int32_t i = 0; i < n; i++) {
        run->ranks[in->members[i]].wait_ns += (uint64_t)wt[i];
        others += (uint64_t)wt[i];
    }
    others -= (uint64_t)wt[li];
    /* What the instance hooks below take (the charts, the step budget, the step views). */
    *f = (struct cs__inst_facts){
        .used = 1, .size = S, .last = last, .last_end = last_end, .li = li, .others = others};
    if ((pat == CS_PAT_NXN || pat == CS_PAT_NTO1) && n > 1 &&
        last - second > (int64_t)run->uncertainty_ns) {
        struct cs__rank *s = &run->ranks[in->members[li]];
        s->late_arrivals++;
        s->others_waited_ns += others;
        f->late = 1;
    }

    /* The row is the creating event's; look it up only if that failed (out of memory). */
    size_t row = in->row;
    if (row == SIZE_MAX) {
        uint64_t *rv = cs__map_get(&run->row_by_key, in->op, in->comm);
        row = rv ? (size_t)(*rv - 1) : SIZE_MAX;
    }
    if (row != SIZE_MAX) {
        struct cs__oprow *r = &run->rows[row];
        if (n > 1) { /* (on a communicator of one rank nothing moves: no bandwidth) */
            r->inst_bytes += (double)S;
            r->inst_ns += (double)(last_end > last ? last_end - last : 0);
        }
        r->instances++;
    }
}

/* ---- the report model ---- */

static int row_cmp(const void *x, const void *y)
{
    const struct cs__oprow *a = x, *b = y;
    if (a->op != b->op)
        return a->op < b->op ? -1 : 1;
    return a->comm < b->comm ? -1 : a->comm > b->comm;
}

static int strag_cmp(const void *x, const void *y)
{
    const struct cs_report_straggler *a = x, *b = y;
    if (a->others_waited_s != b->others_waited_s)
        return a->others_waited_s > b->others_waited_s ? -1 : 1;
    return a->rank - b->rank;
}

/* A rank's figure for the listing below: by value, ties by rank. */
struct keyed {
    double v;
    int rank;
};

static int keyed_cmp(const void *x, const void *y)
{
    const struct keyed *a = x, *b = y;
    if (a->v != b->v)
        return a->v < b->v ? -1 : 1;
    return a->rank - b->rank;
}

/* Which ranks the JSON's per-rank arrays list (report.h, CS_REPORT_RANKS_LISTED): every rank
 * up to the bound; beyond, the CS_REPORT_RANKS_EXTREME highest and lowest by wall, compute,
 * communication and waiting time (ranks without the figure not counted), those that made the
 * others wait longest, and rank 0. */
static void list_ranks(struct cs__run *run, struct cs_report *rep)
{
    rep->nrank_listed = rep->nranks;
    if (rep->nranks <= CS_REPORT_RANKS_LISTED)
        return;
    struct keyed *k = malloc(rep->nranks * sizeof *k);
    rep->rank_listed = calloc((size_t)rep->world_size, 1);
    if (!k || !rep->rank_listed) {
        free(k);
        free(rep->rank_listed);
        rep->rank_listed = NULL; /* every rank, then: complete rather than bounded */
        cs__problem(run, "out of memory choosing the ranks the JSON lists: it lists all");
        return;
    }
    const size_t E = CS_REPORT_RANKS_EXTREME;
    for (int f = 0; f < 4; f++) {
        size_t n = 0;
        for (size_t i = 0; i < rep->nranks; i++) {
            const struct cs_report_rank *o = &rep->ranks[i];
            double v = f == 0 ? o->wall_s : f == 1 ? o->compute_s : f == 2 ? o->comm_s : o->wait_s;
            if (isfinite(v))
                k[n++] = (struct keyed){v, o->rank};
        }
        qsort(k, n, sizeof *k, keyed_cmp);
        for (size_t i = 0; i < n; i++)
            if (i < E || i + E >= n)
                rep->rank_listed[k[i].rank] = 1;
    }
    for (size_t i = 0; i < rep->nstragglers && i < E; i++)
        rep->rank_listed[rep->stragglers[i].rank] = 1;
    if (run->ranks[0].present)
        rep->rank_listed[0] = 1;
    free(k);
    rep->nrank_listed = 0;
    for (int r = 0; r < rep->world_size; r++)
        rep->nrank_listed += rep->rank_listed[r];
}

static double ns_s(double ns)
{
    return ns / 1e9;
}

/* Distinct hosts of the reported ranks (the present ones): those nodes.c numbered, else (hosts
 * not indexed) their names compared pair by pair. */
static int count_hosts(const struct cs__run *run, const struct cs_report *rep)
{
    if (run->host_of)
        return run->nhosts;
    int n = 0;
    for (size_t i = 0; i < rep->nranks; i++) {
        int dup = 0;
        for (size_t j = 0; j < i && !dup; j++)
            dup = strcmp(rep->ranks[i].host, rep->ranks[j].host) == 0;
        n += !dup;
    }
    return n;
}

/*
 * A ring-mode trace's events outside its kept window (the reader's rows: folded by the collector,
 * or in the file before the window) into the rank's and the ops table's whole-run totals, as the
 * events themselves would have counted (cs__metrics_event).  Rates (bandwidths) and everything
 * that needs the events one by one come from the window alone.
 */
static void add_outside(struct cs__run *run, struct cs_report *rep, int rank)
{
    struct cs__rank *rk = &run->ranks[rank];
    const struct cs_reader_totals *t = cs_reader_totals(rk->rd);
    if (!t->ring || !t->t_window)
        return;
    rep->window_ranks++;
    rep->outside_events += t->folded + t->outside;
    int64_t tw = cs__clock_map(&rk->clk, t->t_window);
    if (rep->window_ranks == 1 || tw > run->window_start)
        run->window_start = tw;
    for (size_t i = 0; i < t->nrows; i++) {
        const struct cs_total_row *w = &t->rows[i];
        const struct cs_op_info *oi = w->op == CS_TOTAL_OP_OTHER ? NULL : cs_op_info(w->op);
        if (!oi) {
            rep->outside_unattributed += w->calls;
            continue;
        }
        int nccl = oi->kind == CS_KIND_NCOLL || oi->kind == CS_KIND_NP2P;
        if (!is_comm_kind(oi->kind) && !nccl)
            continue;
        if (!nccl)
            rk->comm_ns += w->time_ns;
        rk->calls += w->calls;
        rk->bytes += w->bytes;
        size_t row = row_get(run, w->op, w->comm);
        if (row == SIZE_MAX)
            continue;
        struct cs__oprow *o = &run->rows[row];
        int recv = w->op == CS_OP_RECV || w->op == CS_OP_IRECV || w->op == CS_OP_NCCL_RECV;
        o->calls += w->calls;
        o->bytes += recv ? w->bytes_recv : w->bytes;
        if (!nccl)
            o->time_ns += w->time_ns;
    }
}

void cs__report_build(struct cs__run *run, struct cs_report *rep)
{
    *rep = (struct cs_report){0};
    for (int r = 0; r < run->world; r++)
        if (run->ranks[r].present)
            add_outside(run, rep, r);
    snprintf(rep->dir, sizeof rep->dir, "%s", run->dir);
    snprintf(rep->program, sizeof rep->program, "%s", run->program);
    rep->world_size = run->world;
    rep->run_id = run->run_id;
    size_t w = run->world > 0 ? (size_t)run->world : 0;
    rep->ranks = calloc(w + 1, sizeof *rep->ranks);
    rep->stragglers = calloc(w + 1, sizeof *rep->stragglers);
    rep->missing = calloc(w + 1, sizeof *rep->missing);
    rep->partial = calloc(w + 1, sizeof *rep->partial);
    rep->ops = calloc(run->nrows + 1, sizeof *rep->ops);
    if (!rep->ranks || !rep->stragglers || !rep->missing || !rep->partial || !rep->ops) {
        cs__problem(run, "out of memory building the report");
        cs__report_free(rep);
        rep->problems = run->problems;
        rep->nproblems = run->nproblems;
        return;
    }

    double max_off = 0, sum_compute = 0, max_compute = 0, max_wall = 0;
    uint64_t rtt = 0;
    for (int r = 0; r < run->world; r++) {
        struct cs__rank *rk = &run->ranks[r];
        if (!rk->present) {
            rep->missing[rep->nmissing++] = r;
            continue;
        }
        const struct cs_file_header *h = rk->h;
        const struct cs_reader_stats *st = cs_reader_stats(rk->rd);
        struct cs_report_rank *o = &rep->ranks[rep->nranks++];
        o->rank = r;
        snprintf(o->host, sizeof o->host, "%s", h->host);
        int64_t t_end = (!st->partial && h->t_finalize) ? cs__clock_map(&rk->clk, h->t_finalize)
                                                        : rk->t_last_end;
        int64_t wall = t_end > rk->t_first ? t_end - rk->t_first : 0;
        o->wall_s = ns_s((double)wall);
        o->comm_s = ns_s((double)(rk->comm_ns + h->unrecorded_test_ns));
        o->compute_s = o->wall_s - o->comm_s;
        o->gpu_comm_s = o->gpu_overlapped_s = o->exposed_comm_s = o->overlap_ratio = NAN;
        if (rk->gpu) {
            /* GPU jobs: compute is the union of compute kernels; communication adds the union
             * of communication kernels (docs/metrics.md, "GPU timeline"). */
            o->gpu_comm_s = ns_s((double)rk->gpu_comm_ns);
            o->gpu_overlapped_s = ns_s((double)rk->gpu_ovl_ns);
            o->exposed_comm_s = o->gpu_comm_s - o->gpu_overlapped_s;
            o->overlap_ratio = rk->gpu_comm_ns ? o->gpu_overlapped_s / o->gpu_comm_s : NAN;
            o->comm_s += o->gpu_comm_s;
            o->compute_s = ns_s((double)rk->gpu_compute_ns);
        }
        if (h->flags & CS_FLAG_NO_CALLS) {
            /* No call was seen: how the wall time splits is unknown, not all compute. */
            o->comm_s = o->compute_s = NAN;
            if (!rep->no_call_ranks++)
                snprintf(rep->no_calls_note, sizeof rep->no_calls_note, "%s", h->note);
        }
        o->wait_s = ns_s((double)rk->wait_ns);
        o->p2p_wait_s = o->p2p_caused_s = NAN; /* steps_model.c, after the what-if pass */
        o->calls = rk->calls;
        o->bytes = rk->bytes;
        o->partial = st->partial;
        o->offset_init_s = h->clock[0].valid ? ns_s((double)h->clock[0].offset_ns) : NAN;
        o->offset_final_s = h->clock[1].valid ? ns_s((double)h->clock[1].offset_ns) : NAN;
        if (rk->clk.shared == 1) /* rank 0's clock: the offsets applied are 0 */
            o->offset_init_s = o->offset_final_s = 0;
        o->drift_ppm = rk->clk.valid == 2 ? cs__clock_drift_ppm(&rk->clk) : NAN;
        o->rtt_s = rk->clk.valid ? ns_s((double)rk->clk.rtt_max) : NAN;
        for (int i = 0; i < 2 && rk->clk.shared != 1; i++)
            if (h->clock[i].valid && fabs((double)h->clock[i].offset_ns) > max_off)
                max_off = fabs((double)h->clock[i].offset_ns);
        if (rk->clk.rtt_max > rtt)
            rtt = rk->clk.rtt_max;
        if (st->partial)
            rep->partial[rep->npartial++] = r;
        rep->events += st->events - cs_reader_totals(rk->rd)->outside;
        rep->dropped_events += h->dropped;
        rep->unrecorded_tests += h->unrecorded_tests;
        sum_compute += o->compute_s;
        if (o->compute_s > max_compute)
            max_compute = o->compute_s;
        if (o->wall_s > max_wall)
            max_wall = o->wall_s;
        if (rk->late_arrivals) {
            struct cs_report_straggler *s = &rep->stragglers[rep->nstragglers++];
            s->rank = r;
            snprintf(s->host, sizeof s->host, "%s", h->host);
            s->late_arrivals = rk->late_arrivals;
            s->others_waited_s = ns_s((double)rk->others_waited_ns);
        }
    }
    qsort(rep->stragglers, rep->nstragglers, sizeof *rep->stragglers, strag_cmp);
    list_ranks(run, rep);
    rep->ranks_expected = run->world;
    rep->ranks_found = (int)rep->nranks;
    rep->hosts = count_hosts(run, rep);

    /* POP efficiencies (no value when there is no compute or no wall time). */
    double mean_compute = rep->nranks ? sum_compute / (double)rep->nranks : NAN;
    rep->load_balance = max_compute > 0 ? mean_compute / max_compute : NAN;
    rep->communication_efficiency = max_wall > 0 ? max_compute / max_wall : NAN;
    rep->parallel_efficiency = rep->load_balance * rep->communication_efficiency;
    if (rep->no_call_ranks) /* some compute times are unknown */
        rep->load_balance = rep->communication_efficiency = rep->parallel_efficiency = NAN;

    if (run->nrows)
        qsort(run->rows, run->nrows, sizeof *run->rows, row_cmp);
    for (size_t i = 0; i < run->nrows; i++) {
        const struct cs__oprow *r = &run->rows[i];
        if (!r->calls && !r->time_ns && !r->bytes && !r->instances)
            continue; /* (every call moved to its communicator's row: a wait's) */
        struct cs_report_op *o = &rep->ops[rep->nops++];
        const struct cs_op_info *oi = cs_op_info(r->op);
        const struct cs__comm *c = cs__comm_get(run, r->comm);
        snprintf(o->op, sizeof o->op, "%s", cs_op_name(r->op));
        /* wait/test calls whose communicator is not known: no request completed (null or
         * inactive ones), or outside a ring-mode window (the collector's totals) */
        if (r->comm)
            cs__comm_label(r->comm, o->comm, sizeof o->comm);
        else
            snprintf(o->comm, sizeof o->comm, "unattributed");
        o->comm_size = c ? c->size : 0;
        o->calls = r->calls;
        o->bytes = r->bytes;
        o->time_s = ns_s((double)r->time_ns);
        o->algbw_gbps = o->busbw_gbps = NAN;
        if (oi->kind == CS_KIND_COLL || oi->kind == CS_KIND_ICOLL || oi->kind == CS_KIND_NCOLL) {
            /* No bytes (sizes not recorded, e.g. Kineto traces of PyTorch < 2.1): no bandwidth,
             * except for barriers, which move none by definition. */
            if (r->inst_ns > 0 && (r->inst_bytes > 0 || oi->busbw == CS_BW_ZERO)) {
                o->algbw_gbps = r->inst_bytes / r->inst_ns; /* bytes/ns = GB/s */
                o->busbw_gbps = o->algbw_gbps * cs_op_busbw_factor(r->op, o->comm_size);
            }
        } else if (oi->kind == CS_KIND_P2P || oi->kind == CS_KIND_IP2P) {
            if (r->p2p_ns > 0)
                o->algbw_gbps = o->busbw_gbps = r->p2p_bytes / r->p2p_ns;
        }
    }

    int64_t origin = INT64_MAX;
    for (int r = 0; r < run->world; r++)
        if (run->ranks[r].present && run->ranks[r].t_first < origin)
            origin = run->ranks[r].t_first;
    rep->window_start_s = rep->window_ranks ? ns_s((double)(run->window_start - origin)) : NAN;
    rep->matched = run->matched;
    rep->incomplete = run->incomplete;
    rep->window_edge = run->window_edge;
    rep->mean_skew_s = run->matched ? ns_s(run->skew_sum_ns / (double)run->matched) : NAN;
    rep->max_skew_s = run->matched ? ns_s((double)run->skew_max_ns) : NAN;
    rep->max_offset_s = ns_s(max_off);
    rep->uncertainty_s = ns_s((double)rtt / 2);
    rep->violations_repaired = run->violations;
    rep->problems = run->problems;
    rep->nproblems = run->nproblems;
    snprintf(rep->source, sizeof rep->source, "%s", run->source[0] ? run->source : "commscope");
    /* The communicators by name: world, then every one the records name (not self). */
    rep->comms = calloc(run->ncomms + 1, sizeof *rep->comms);
    for (size_t i = 0; rep->comms && i <= run->ncomms; i++) {
        uint64_t id = i ? run->comms[i - 1]->id : CS_COMM_WORLD_ID;
        if (i && (id == CS_COMM_WORLD_ID || id >= CS_COMM_SELF_BASE))
            continue;
        struct cs_report_comm *o = &rep->comms[rep->ncomms++];
        cs__comm_label(id, o->comm, sizeof o->comm);
        cs__comm_name(run, id, o->name, sizeof o->name);
        const struct cs__comm *c = cs__comm_get(run, id);
        o->size = c ? c->size : 0;
    }
}
