/*
 * Renderers of the step analysis (steps, budget, gradient sync, overlap, groups, dimensions,
 * what-if): a text section and the JSON keys (docs/report-schema.md).  Formatting only.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "steps.h"

/* The same streaming JSON layout as report_json.c (one key per line, two-space indent). */
struct jw {
    FILE *f;
    int depth;
    int first[16];
};

static void str_raw(struct jw *w, const char *s)
{
    fputc('"', w->f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(w->f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(w->f, "\\u%04x", *p);
        else
            fputc(*p, w->f);
    }
    fputc('"', w->f);
}

static void key(struct jw *w, const char *k)
{
    if (!w->first[w->depth])
        fputc(',', w->f);
    w->first[w->depth] = 0;
    fputc('\n', w->f);
    for (int i = 0; i < w->depth; i++)
        fputs("  ", w->f);
    if (k) {
        str_raw(w, k);
        fputs(": ", w->f);
    }
}

static void open_(struct jw *w, const char *k, char c)
{
    key(w, k);
    fputc(c, w->f);
    w->depth++;
    w->first[w->depth] = 1;
}

static void close_(struct jw *w, char c)
{
    int empty = w->first[w->depth];
    w->depth--;
    if (!empty) {
        fputc('\n', w->f);
        for (int i = 0; i < w->depth; i++)
            fputs("  ", w->f);
    }
    fputc(c, w->f);
}

static void num(struct jw *w, const char *k, double v)
{
    key(w, k);
    if (isfinite(v))
        fprintf(w->f, "%.9g", v);
    else
        fputs("null", w->f);
}

static void str(struct jw *w, const char *k, const char *s)
{
    key(w, k);
    str_raw(w, s);
}

/* A string, or null when empty. */
static void note(struct jw *w, const char *k, const char *s)
{
    if (s[0]) {
        str(w, k, s);
    } else {
        key(w, k);
        fputs("null", w->f);
    }
}

static void integer(struct jw *w, const char *k, long long v)
{
    key(w, k);
    fprintf(w->f, "%lld", v);
}

static void boolean(struct jw *w, const char *k, int v)
{
    key(w, k);
    fputs(v ? "true" : "false", w->f);
}

static void budget(struct jw *w, const char *k, const struct cs_report_budget *b)
{
    open_(w, k, '{');
    if (b->rank >= 0)
        integer(w, "rank", b->rank);
    num(w, "steps", b->steps);
    num(w, "step_s", b->step_s);
    num(w, "compute_s", b->compute_s);
    num(w, "gradient_sync_s", b->grad_sync_s);
    open_(w, "comm_s", '{');
    for (int d = 0; d < CS_DIM_N; d++)
        num(w, cs__dim_names[d], b->comm_s[d]);
    close_(w, '}');
    num(w, "wait_s", b->wait_s);
    num(w, "other_mpi_s", b->other_mpi_s);
    num(w, "idle_s", b->idle_s);
    close_(w, '}');
}

void cs__report_steps_json(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_steps *s = rep->steps;
    if (!s)
        return;
    struct jw w = {.f = out, .depth = 1};
    open_(&w, "steps", '{');
    integer(&w, "count", s->count);
    num(&w, "mean_s", s->mean_s);
    num(&w, "median_s", s->median_s);
    num(&w, "p95_s", s->p95_s);
    integer(&w, "warmup_excluded", s->warmup_excluded);
    integer(&w, "tail_excluded", s->tail_excluded);
    integer(&w, "timed", s->timed);
    str(&w, "source", s->source);
    note(&w, "detail", s->detail);
    note(&w, "note", s->note);
    open_(&w, "per_step", '[');
    for (size_t i = 0; i < s->nlist; i++) {
        const struct cs_report_step *p = &s->list[i];
        open_(&w, NULL, '{');
        integer(&w, "index", p->index);
        boolean(&w, "timed", p->timed);
        num(&w, "time_s", p->time_s);
        num(&w, "overlap_ratio", p->overlap_ratio);
        num(&w, "grad_sync_share", p->grad_sync_share);
        close_(&w, '}');
    }
    close_(&w, ']');
    close_(&w, '}');

    open_(&w, "budget", '{');
    budget(&w, "total", &s->total);
    open_(&w, "ranks", '[');
    for (size_t i = 0; i < s->nranks; i++)
        budget(&w, NULL, &s->ranks[i]);
    close_(&w, ']');
    close_(&w, '}');

    open_(&w, "gradient_sync", '{');
    num(&w, "share", s->grad_share);
    num(&w, "total_s", s->grad_total_s);
    num(&w, "exposed_s", s->grad_exposed_s);
    num(&w, "wait_s", s->grad_wait_s);
    num(&w, "overlapped_s", s->grad_overlapped_s);
    note(&w, "note", s->grad_note);
    close_(&w, '}');

    open_(&w, "overlap", '[');
    for (size_t i = 0; i < s->noverlap; i++) {
        const struct cs_report_overlap *o = &s->overlap[i];
        open_(&w, NULL, '{');
        str(&w, "comm", o->comm);
        num(&w, "ratio", o->ratio);
        num(&w, "overlapped_s", o->overlapped_s);
        num(&w, "in_flight_s", o->in_flight_s);
        close_(&w, '}');
    }
    close_(&w, ']');
    num(&w, "overlap_ratio", s->overlap_ratio);

    open_(&w, "groups", '[');
    for (size_t i = 0; i < s->ngroups; i++) {
        const struct cs_report_group *g = &s->groups[i];
        open_(&w, NULL, '{');
        str(&w, "comm", g->comm);
        str(&w, "role", cs__dim_names[g->role]);
        open_(&w, "ranks", '[');
        for (int32_t j = 0; j < g->size; j++)
            integer(&w, NULL, g->ranks[j]);
        close_(&w, ']');
        num(&w, "confidence", g->confidence);
        str(&w, "why", g->why);
        close_(&w, '}');
    }
    close_(&w, ']');

    open_(&w, "dimensions", '[');
    for (int d = 0; d < CS_DIM_N; d++) {
        const struct cs_report_dim *m = &s->dims[d];
        open_(&w, NULL, '{');
        str(&w, "role", cs__dim_names[d]);
        integer(&w, "comms", m->comms);
        num(&w, "time_s", m->time_s);
        num(&w, "bytes", m->bytes);
        num(&w, "exposed_share", m->exposed_share);
        num(&w, "overlap_ratio", m->overlap_ratio);
        close_(&w, '}');
    }
    close_(&w, ']');

    open_(&w, "whatif", '{');
    num(&w, "measured_step_s", s->whatif.measured_step_s);
    num(&w, "replayed_step_s", s->whatif.replayed_step_s);
    num(&w, "replay_error", s->whatif.replay_error);
    num(&w, "no_straggler_step_s", s->whatif.no_straggler_step_s);
    num(&w, "full_overlap_step_s", s->whatif.full_overlap_step_s);
    num(&w, "best_bandwidth_step_s", s->whatif.best_bandwidth_step_s);
    note(&w, "note", s->whatif.note);
    close_(&w, '}');
}

static const char *fmt(char *buf, size_t n, const char *f, double v)
{
    if (isfinite(v))
        snprintf(buf, n, f, v);
    else
        snprintf(buf, n, "-");
    return buf;
}

static void budget_line(FILE *out, const char *who, const struct cs_report_budget *b)
{
    char x[8][32];
    double comm = 0;
    for (int d = 0; d < CS_DIM_N; d++)
        comm += b->comm_s[d];
    fprintf(out, "%6s %12s %12s %12s %12s %12s %12s %12s\n", who, fmt(x[0], 32, "%.6f", b->step_s),
            fmt(x[1], 32, "%.6f", b->compute_s), fmt(x[2], 32, "%.6f", b->grad_sync_s),
            fmt(x[3], 32, "%.6f", b->comm_s[CS_DIM_TP]),
            fmt(x[4], 32, "%.6f", comm - b->comm_s[CS_DIM_TP]), fmt(x[5], 32, "%.6f", b->wait_s),
            fmt(x[6], 32, "%.6f", b->other_mpi_s));
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
    if (s->note[0])
        fprintf(out, "note: %s\n", s->note);

    fprintf(out, "\n@--- Time per step (seconds, mean over timed steps) %s\n",
            "------------------");
    fprintf(out, "%6s %12s %12s %12s %12s %12s %12s %12s\n", "Rank", "Step", "Compute", "Grad_sync",
            "TP_comm", "Other_comm", "Wait", "Other_MPI");
    budget_line(out, "all", &s->total);
    for (size_t i = 0; i < s->nranks; i++) {
        char who[16];
        snprintf(who, sizeof who, "%d", s->ranks[i].rank);
        budget_line(out, who, &s->ranks[i]);
    }
    fprintf(out, "(Grad_sync and the comm columns exclude waiting for other ranks, which is in"
                 " Wait; idle cannot be told from compute without a GPU timeline)\n");

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
        fprintf(out, "%-21s %-5s confidence %.2f ranks", g->comm, cs__dim_names[g->role],
                g->confidence);
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
