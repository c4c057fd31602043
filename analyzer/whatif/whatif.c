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
 *
 * The files: this one drives the replay window by window (cs__whatif_report) and keeps the best
 * transfer times (cs__whatif_instance); window.c reads a window's events into items; pair.c pairs
 * point-to-point partners and carries the waits across windows; replay.c resolves a window's
 * dependencies and replays it; replay.h holds their shared state (struct replay).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

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

unsigned cs__wi_op_flags(const struct cs__steps *S, unsigned op)
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

/* Some rank spent time in point-to-point calls (blocking or not): metrics' op rows say. */
static int any_p2p_time(const struct cs__run *run)
{
    for (size_t i = 0; i < run->nrows; i++) {
        enum cs_op_kind k = cs_op_info(run->rows[i].op)->kind;
        if ((k == CS_KIND_P2P || k == CS_KIND_IP2P) && run->rows[i].time_ns)
            return 1;
    }
    return 0;
}

int cs__whatif_report(struct cs__run *run, struct cs__steps *S, int first, int end,
                      double measured_s, struct cs_report_whatif *o, double *p2p_wait,
                      double *p2p_run)
{
    o->measured_step_s = measured_s;
    int replay = S->detect.mode && end > first && measured_s > 0;
    if (!replay) {
        snprintf(o->note, sizeof o->note, "no complete steps to replay");
        /* The waits for point-to-point partners are measured all the same, in windows of steps
         * or, without steps, of at most cap_n items a rank (about 256k items in all). */
        int host = 0;
        for (int r = 0; r < run->world && !host; r++)
            host = run->ranks[r].present && !S->r[r].gpu;
        if (!p2p_run || !host)
            return 0;
        if (!any_p2p_time(run))
            return 1; /* no point-to-point calls: no waits at them */
    }
    size_t cap_n = 0;
    if (!replay && !S->detect.mode) {
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
        P.fl[op] = (uint16_t)cs__wi_op_flags(S, op);
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
        P.k = S->detect.mode ? k : -1; /* the window's step */
        int any = 0;
        for (int r = 0; r < run->world && rc == 0; r++) {
            P.nread = r + 1;
            rc = cs__wi_read_window(&P, r, k < 0);
            any |= P.w[r].n > 0;
        }
        if (rc || (!any && k >= 0))
            break;
        cs__wi_resolve(&P);
        if (replay) {
            P.timed = k >= first && k < end;
            cs__wi_straggler_factors(&P, k);
            cs__wi_replay_window(&P, k);
        }
        if (P.prun && !P.oom && cs__wi_carry(&P))
            P.oom = 1;
    }
    /* Partners never read (unmatched): the deferred completions wait for those they had. */
    for (size_t d = 0; rc == 0 && d < P.ndv; d++)
        if (P.dv[d].pending > 0)
            cs__wi_defer_done(&P, (int32_t)d);
    /* Steps still open end at the rank's last replayed end (MPI_Finalize closes them above). */
    for (int r = 0; r < run->world; r++)
        for (int sc = 0; sc < SC_N; sc++)
            if (P.w[r].open_step[sc] >= 0)
                cs__wi_step_done(&P, sc, P.w[r].open_step[sc], P.w[r].open_at[sc],
                                 LANE(P.w[r].R, sc));
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
