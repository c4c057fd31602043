/*
 * Renderers of the step analysis (steps, budget, gradient sync, overlap, groups, dimensions,
 * what-if): a text section and the JSON keys (docs/report-schema.md).  Formatting only.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "internal.h"
#include "json.h"
#include "steps.h"

static void budget(struct cs__jw *w, const char *k, const struct cs_report_budget *b)
{
    cs__jw_open(w, k, '{');
    if (b->rank >= 0)
        cs__jw_int(w, "rank", b->rank);
    cs__jw_num(w, "steps", b->steps);
    cs__jw_num(w, "step_s", b->step_s);
    cs__jw_num(w, "compute_s", b->compute_s);
    cs__jw_num(w, "gradient_sync_s", b->grad_sync_s);
    cs__jw_open(w, "comm_s", '{');
    for (int d = 0; d < CS_DIM_N; d++)
        cs__jw_num(w, cs__dim_names[d], b->comm_s[d]);
    cs__jw_close(w, '}');
    cs__jw_num(w, "wait_s", b->wait_s);
    cs__jw_num(w, "p2p_wait_s", b->p2p_wait_s);
    cs__jw_num(w, "other_mpi_s", b->other_mpi_s);
    cs__jw_num(w, "idle_s", b->idle_s);
    cs__jw_close(w, '}');
}

void cs__report_steps_json(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_steps *s = rep->steps;
    if (!s)
        return;
    struct cs__jw w = {.f = out, .depth = 1};
    cs__jw_open(&w, "steps", '{');
    cs__jw_int(&w, "count", s->count);
    cs__jw_int(&w, "run_count", s->run_count);
    cs__jw_num(&w, "run_mean_s", s->run_mean_s);
    cs__jw_num(&w, "mean_s", s->mean_s);
    cs__jw_num(&w, "median_s", s->median_s);
    cs__jw_num(&w, "p95_s", s->p95_s);
    cs__jw_int(&w, "warmup_excluded", s->warmup_excluded);
    cs__jw_int(&w, "tail_excluded", s->tail_excluded);
    cs__jw_int(&w, "timed", s->timed);
    cs__jw_str(&w, "source", s->source);
    cs__jw_str_or_null(&w, "detail", s->detail);
    cs__jw_str_or_null(&w, "note", s->note);
    cs__jw_bool(&w, "per_step_complete", s->nlisted == s->nlist);
    if (s->rep_step >= 0 && (size_t)s->rep_step < s->nlist)
        cs__jw_int(&w, "representative_step", s->list[s->rep_step].index);
    else
        cs__jw_num(&w, "representative_step", NAN);
    cs__jw_open(&w, "per_step", '[');
    for (size_t i = 0; i < s->nlisted; i++) {
        const struct cs_report_step *p = &s->list[s->listed[i]];
        cs__jw_open(&w, NULL, '{');
        cs__jw_int(&w, "index", p->index);
        cs__jw_bool(&w, "timed", p->timed);
        cs__jw_num(&w, "time_s", p->time_s);
        cs__jw_num(&w, "compute_s", p->compute_s);
        cs__jw_num(&w, "grad_sync_s", p->grad_sync_s);
        cs__jw_num(&w, "comm_s", p->comm_s);
        cs__jw_num(&w, "wait_s", p->wait_s);
        cs__jw_num(&w, "other_mpi_s", p->other_mpi_s);
        cs__jw_num(&w, "overlap_ratio", p->overlap_ratio);
        cs__jw_num(&w, "grad_sync_share", p->grad_sync_share);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_open(&w, "histogram", '{');
    cs__jw_num(&w, "lo_s", s->hist_lo_s);
    cs__jw_num(&w, "hi_s", s->hist_hi_s);
    cs__jw_open(&w, "counts", '[');
    for (int b = 0; b < CS_REPORT_STEP_BINS && isfinite(s->hist_lo_s); b++)
        cs__jw_num(&w, NULL, (double)s->hist[b]);
    cs__jw_close(&w, ']');
    cs__jw_close(&w, '}');
    cs__jw_close(&w, '}');

    cs__jw_open(&w, "budget", '{');
    budget(&w, "total", &s->total);
    cs__jw_open(&w, "ranks", '[');
    for (size_t i = 0; i < s->nranks; i++)
        if (cs_report_rank_listed(rep, s->ranks[i].rank))
            budget(&w, NULL, &s->ranks[i]);
    cs__jw_close(&w, ']');
    cs__jw_close(&w, '}');

    cs__jw_open(&w, "gradient_sync", '{');
    cs__jw_num(&w, "share", s->grad_share);
    cs__jw_num(&w, "total_s", s->grad_total_s);
    cs__jw_num(&w, "exposed_s", s->grad_exposed_s);
    cs__jw_num(&w, "wait_s", s->grad_wait_s);
    cs__jw_num(&w, "overlapped_s", s->grad_overlapped_s);
    cs__jw_str_or_null(&w, "note", s->grad_note);
    cs__jw_close(&w, '}');

    cs__jw_open(&w, "overlap", '[');
    for (size_t i = 0; i < s->noverlap; i++) {
        const struct cs_report_overlap *o = &s->overlap[i];
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "comm", o->comm);
        cs__jw_num(&w, "ratio", o->ratio);
        cs__jw_num(&w, "overlapped_s", o->overlapped_s);
        cs__jw_num(&w, "in_flight_s", o->in_flight_s);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_num(&w, "overlap_ratio", s->overlap_ratio);

    cs__jw_open(&w, "groups", '[');
    for (size_t i = 0; i < s->ngroups; i++) {
        const struct cs_report_group *g = &s->groups[i];
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "comm", g->comm);
        cs__jw_str(&w, "role", cs__dim_names[g->role]);
        cs__jw_str(&w, "label", g->label);
        cs__jw_open(&w, "ranks", '[');
        for (int32_t j = 0; j < g->size; j++)
            cs__jw_int(&w, NULL, g->ranks[j]);
        cs__jw_close(&w, ']');
        cs__jw_num(&w, "confidence", g->confidence);
        cs__jw_str(&w, "why", g->why);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');

    cs__jw_open(&w, "dimensions", '[');
    for (int d = 0; d < CS_DIM_N; d++) {
        const struct cs_report_dim *m = &s->dims[d];
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "role", cs__dim_names[d]);
        cs__jw_int(&w, "comms", m->comms);
        cs__jw_num(&w, "time_s", m->time_s);
        cs__jw_num(&w, "bytes", m->bytes);
        cs__jw_num(&w, "exposed_share", m->exposed_share);
        cs__jw_num(&w, "overlap_ratio", m->overlap_ratio);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');

    cs__jw_open(&w, "whatif", '{');
    cs__jw_num(&w, "measured_step_s", s->whatif.measured_step_s);
    cs__jw_num(&w, "replayed_step_s", s->whatif.replayed_step_s);
    cs__jw_num(&w, "replay_error", s->whatif.replay_error);
    cs__jw_num(&w, "no_straggler_step_s", s->whatif.no_straggler_step_s);
    cs__jw_num(&w, "full_overlap_step_s", s->whatif.full_overlap_step_s);
    cs__jw_num(&w, "best_bandwidth_step_s", s->whatif.best_bandwidth_step_s);
    cs__jw_str_or_null(&w, "note", s->whatif.note);
    cs__jw_close(&w, '}');
}

static const char *fmt(char *buf, size_t n, const char *f, double v)
{
    if (isfinite(v))
        snprintf(buf, n, f, v);
    else
        snprintf(buf, n, "-");
    return buf;
}

/* idle: the table has the Idle column (some rank has a GPU timeline). */
static void budget_line(FILE *out, const char *who, const struct cs_report_budget *b, int idle)
{
    char x[8][32];
    fprintf(out, "%6s %12s %12s %12s %12s %12s %12s %12s", who, fmt(x[0], 32, "%.6f", b->step_s),
            fmt(x[1], 32, "%.6f", b->compute_s), fmt(x[2], 32, "%.6f", b->grad_sync_s),
            fmt(x[3], 32, "%.6f", b->comm_s[CS_DIM_TP]), fmt(x[4], 32, "%.6f", b->other_comm_s),
            fmt(x[5], 32, "%.6f", b->wait_s), fmt(x[6], 32, "%.6f", b->other_mpi_s));
    if (idle)
        fprintf(out, " %12s", fmt(x[7], 32, "%.6f", b->idle_s));
    fputc('\n', out);
}

void cs__report_steps_text(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_steps *s = rep->steps;
    char a[32], b[32], c[32], d[32], e[32];
    if (!s)
        return;
    fprintf(out, "\n@--- Steps %s\n", "-----------------------------------------------------");
    fprintf(out, "count %d  source %s%s%s  warmup_excluded %d  tail_excluded %d  timed %d\n",
            s->count, s->source, s->detail[0] ? ": " : "", s->detail, s->warmup_excluded,
            s->tail_excluded, s->timed);
    fprintf(out, "step_s mean %s  median %s  p95 %s\n", fmt(a, sizeof a, "%.6f", s->mean_s),
            fmt(b, sizeof b, "%.6f", s->median_s), fmt(c, sizeof c, "%.6f", s->p95_s));
    if (rep->window_ranks)
        fprintf(out, "whole_run steps %d  step_s mean %s  (the statistics above: the window)\n",
                s->run_count, fmt(d, sizeof d, "%.6f", s->run_mean_s));
    if (s->note[0])
        fprintf(out, "note: %s\n", s->note);

    fprintf(out, "\n@--- Time per step (seconds, mean over timed steps) %s\n",
            "------------------");
    /* Ranks with a GPU timeline know their idle time (the GPU ran nothing): a column then. */
    int idle = isfinite(s->total.idle_s);
    for (size_t i = 0; i < s->nranks; i++)
        idle |= isfinite(s->ranks[i].idle_s);
    fprintf(out, "%6s %12s %12s %12s %12s %12s %12s %12s", "Rank", "Step", "Compute", "Grad_sync",
            "TP_comm", "Other_comm", "Wait", "Other_MPI");
    fputs(idle ? "         Idle\n" : "\n", out);
    budget_line(out, "all", &s->total, idle);
    for (size_t i = 0; i < s->nranks; i++) {
        char who[16];
        snprintf(who, sizeof who, "%d", s->ranks[i].rank);
        budget_line(out, who, &s->ranks[i], idle);
    }
    /* The part of Wait at point-to-point calls, when the table's precision shows it. */
    const struct cs_report_budget *top = NULL;
    for (size_t i = 0; i < s->nranks; i++)
        if (!top || s->ranks[i].p2p_wait_s > top->p2p_wait_s)
            top = &s->ranks[i];
    if (top && top->p2p_wait_s >= 0.5e-6)
        fprintf(out,
                "of Wait, for point-to-point partners (late senders, late receivers): all %.6f, "
                "most rank %d %.6f\n",
                s->total.p2p_wait_s, top->rank, top->p2p_wait_s);
    if (!idle)
        fprintf(out, "(Grad_sync and the comm columns exclude waiting for other ranks, which is in"
                     " Wait; idle cannot be told from compute without a GPU timeline)\n");
    else
        fprintf(out, "(Grad_sync and the comm columns exclude waiting for other ranks, which is in"
                     " Wait; on ranks with a GPU timeline Compute, Grad_sync, comm and Wait come "
                     "from kernels and Idle is the time the GPU ran neither compute nor NCCL "
                     "kernels; '-' where idle cannot be told from compute without one)\n");

    fprintf(out, "\n@--- Gradient synchronisation and overlap %s\n", "------------------------");
    fprintf(out, "grad_sync_share %s  exposed_s %s  overlapped_s %s  total_s %s per step\n",
            fmt(a, sizeof a, "%.4f", s->grad_share), fmt(b, sizeof b, "%.6f", s->grad_exposed_s),
            fmt(c, sizeof c, "%.6f", s->grad_overlapped_s),
            fmt(d, sizeof d, "%.6f", s->grad_total_s));
    if (s->grad_note[0])
        fprintf(out, "note: %s\n", s->grad_note);
    fprintf(out, "overlap_ratio %s\n", fmt(a, sizeof a, "%.4f", s->overlap_ratio));
    for (size_t i = 0; i < s->noverlap; i++)
        fprintf(out, "  %-21s ratio %s  overlapped_s %.6f  in_flight_s %.6f\n", s->overlap[i].comm,
                fmt(a, sizeof a, "%.4f", s->overlap[i].ratio), s->overlap[i].overlapped_s,
                s->overlap[i].in_flight_s);

    fprintf(out, "\n@--- Parallelism groups %s\n", "----------------------------------------");
    for (size_t i = 0; i < s->ngroups; i++) {
        const struct cs_report_group *g = &s->groups[i];
        fprintf(out, "%-21s %-5s %-18s confidence %.2f ranks", g->comm, cs__dim_names[g->role],
                g->label, g->confidence);
        for (int32_t j = 0; j < g->size && j < 16; j++)
            fprintf(out, "%s%d", j ? "," : " ", g->ranks[j]);
        fprintf(out, "%s  (%s)\n", g->size > 16 ? ",..." : "", g->why);
    }
    for (int k = 0; k < CS_DIM_N; k++) {
        const struct cs_report_dim *m = &s->dims[k];
        if (!m->comms)
            continue;
        fprintf(out,
                "dimension %-5s comms %d  time_s %.6f  bytes %.0f  exposed_share %s  "
                "overlap_ratio %s\n",
                cs__dim_names[k], m->comms, m->time_s, m->bytes,
                fmt(a, sizeof a, "%.4f", m->exposed_share),
                fmt(b, sizeof b, "%.4f", m->overlap_ratio));
    }

    fprintf(out, "\n@--- What-if (step time, seconds) %s\n", "-------------------------------");
    fprintf(out, "measured %s  replayed %s  no_straggler %s  full_overlap %s  best_bandwidth %s\n",
            fmt(a, sizeof a, "%.6f", s->whatif.measured_step_s),
            fmt(b, sizeof b, "%.6f", s->whatif.replayed_step_s),
            fmt(c, sizeof c, "%.6f", s->whatif.no_straggler_step_s),
            fmt(d, sizeof d, "%.6f", s->whatif.full_overlap_step_s),
            fmt(e, sizeof e, "%.6f", s->whatif.best_bandwidth_step_s));
    if (s->whatif.note[0])
        fprintf(out, "note: %s\n", s->whatif.note);
}

/* Every step, one CSV line each (`commscope analyze --steps-csv FILE`; docs/report-schema.md):
 * what the JSON's per_step holds, for all steps.  Returns 0, or -1 on a write error. */
int cs__report_steps_csv(const struct cs_report *rep, FILE *out)
{
    fputs("step,timed,time_s,compute_s,grad_sync_s,comm_s,wait_s,other_mpi_s,overlap_ratio,"
          "grad_sync_share\n",
          out);
    const struct cs_report_steps *s = rep->steps;
    for (size_t i = 0; s && i < s->nlist; i++) {
        const struct cs_report_step *p = &s->list[i];
        const double v[] = {p->time_s, p->compute_s,   p->grad_sync_s,   p->comm_s,
                            p->wait_s, p->other_mpi_s, p->overlap_ratio, p->grad_sync_share};
        fprintf(out, "%d,%d", p->index, p->timed);
        for (size_t j = 0; j < sizeof v / sizeof v[0]; j++)
            cs__csv_num(out, v[j]);
        fputc('\n', out);
    }
    return ferror(out) ? -1 : 0;
}
