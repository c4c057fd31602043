/*
 * Renderers of the GPU timeline (key "gpu") and of the Kineto import (key "kineto"): a text
 * section each and their JSON keys (docs/report-schema.md).  Formatting only.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "gpu.h"
#include "kineto.h"

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

static void integer(struct jw *w, const char *k, long long v)
{
    key(w, k);
    fprintf(w->f, "%lld", v);
}

static const char *fmt(char *b, size_t n, const char *f, double v)
{
    if (isfinite(v))
        snprintf(b, n, f, v);
    else
        snprintf(b, n, "-");
    return b;
}

void cs__report_gpu_json(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_gpu *g = rep->gpu;
    if (!g)
        return;
    struct jw w = {.f = out, .depth = 1};
    open_(&w, "gpu", '{');
    num(&w, "comm_s", g->comm_s);
    num(&w, "overlapped_s", g->overlapped_s);
    num(&w, "exposed_comm_s", g->exposed_s);
    num(&w, "overlap_ratio", g->overlap_ratio);
    integer(&w, "nccl_instances", (long long)g->nccl_instances);
    integer(&w, "unmatched_launches", (long long)g->unmatched_launch);
    integer(&w, "late_records", (long long)g->late_records);
    open_(&w, "devices", '[');
    for (size_t i = 0; i < g->ndevs; i++) {
        const struct cs_report_gpu_dev *d = &g->devs[i];
        open_(&w, NULL, '{');
        integer(&w, "rank", d->rank);
        integer(&w, "device", d->device);
        integer(&w, "compute_kernels", (long long)d->kernels);
        integer(&w, "comm_kernels", (long long)d->comm_kernels);
        num(&w, "compute_s", d->compute_s);
        num(&w, "comm_s", d->comm_s);
        num(&w, "overlapped_s", d->overlapped_s);
        num(&w, "exposed_comm_s", d->exposed_s);
        num(&w, "overlap_ratio", d->overlap_ratio);
        close_(&w, '}');
    }
    close_(&w, ']');
    open_(&w, "communicators", '[');
    for (size_t i = 0; i < g->ncomms; i++) {
        const struct cs_report_gpu_comm *c = &g->comms[i];
        open_(&w, NULL, '{');
        str(&w, "comm", c->comm);
        if (c->comm_size > 0)
            integer(&w, "comm_size", c->comm_size);
        else
            num(&w, "comm_size", NAN);
        integer(&w, "comm_kernels", (long long)c->kernels);
        num(&w, "comm_s", c->comm_s);
        num(&w, "overlapped_s", c->overlapped_s);
        num(&w, "exposed_comm_s", c->exposed_s);
        num(&w, "overlap_ratio", c->overlap_ratio);
        close_(&w, '}');
    }
    close_(&w, ']');
    close_(&w, '}');
}

void cs__report_gpu_text(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_gpu *g = rep->gpu;
    if (!g)
        return;
    char a[32], b[32];
    fprintf(out, "\n@--- GPU timeline (seconds, union of kernel intervals) %s\n",
            "----------------");
    fprintf(out, "comm_s %.6f  overlapped_s %.6f  exposed_comm_s %.6f  overlap_ratio %s\n",
            g->comm_s, g->overlapped_s, g->exposed_s, fmt(a, sizeof a, "%.4f", g->overlap_ratio));
    fprintf(out, "%5s %6s %10s %10s %12s %12s %12s %12s %8s\n", "Rank", "Device", "Kernels",
            "NCCL_krn", "Compute", "Comm", "Overlapped", "Exposed", "Ratio");
    for (size_t i = 0; i < g->ndevs; i++) {
        const struct cs_report_gpu_dev *d = &g->devs[i];
        fprintf(out,
                "%5d %6" PRId32 " %10" PRIu64 " %10" PRIu64 " %12.6f %12.6f %12.6f %12.6f %8s\n",
                d->rank, d->device, d->kernels, d->comm_kernels, d->compute_s, d->comm_s,
                d->overlapped_s, d->exposed_s, fmt(b, sizeof b, "%.4f", d->overlap_ratio));
    }
    fprintf(out, "%-21s %5s %10s %12s %12s %12s %8s\n", "Comm", "Size", "NCCL_krn", "Comm",
            "Overlapped", "Exposed", "Ratio");
    for (size_t i = 0; i < g->ncomms; i++) {
        const struct cs_report_gpu_comm *c = &g->comms[i];
        fprintf(out, "%-21s %5d %10" PRIu64 " %12.6f %12.6f %12.6f %8s\n", c->comm, c->comm_size,
                c->kernels, c->comm_s, c->overlapped_s, c->exposed_s,
                fmt(b, sizeof b, "%.4f", c->overlap_ratio));
    }
}

void cs__report_kineto_json(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_kineto *k = rep->kineto;
    if (!k)
        return;
    struct jw w = {.f = out, .depth = 1};
    open_(&w, "kineto", '{');
    open_(&w, "clock", '{');
    num(&w, "max_correction_s", k->max_correction_s);
    num(&w, "max_uncertainty_s", k->max_uncertainty_s);
    num(&w, "max_residual_s", k->max_residual_s);
    str(&w, "note", k->clock_note);
    close_(&w, '}');
    open_(&w, "ranks", '[');
    for (size_t i = 0; i < k->nranks; i++) {
        const struct cs_report_kineto_rank *r = &k->ranks[i];
        open_(&w, NULL, '{');
        integer(&w, "rank", r->rank);
        str(&w, "file", r->file);
        integer(&w, "kernels", (long long)r->kernels);
        integer(&w, "nccl_kernels", (long long)r->nccl_kernels);
        open_(&w, "nccl_by_collective", '{');
        for (int c = 0; c < CS_KC_N; c++)
            if (r->by_class[c])
                integer(&w, cs__kcoll_names[c], (long long)r->by_class[c]);
        close_(&w, '}');
        integer(&w, "nccl_with_sizes", (long long)r->with_bytes);
        integer(&w, "memcpys", (long long)r->memcpys);
        integer(&w, "memsets", (long long)r->memsets);
        integer(&w, "comm_candidates", (long long)r->candidates);
        integer(&w, "steps", r->steps);
        if (r->first_step >= 0)
            integer(&w, "first_step", r->first_step);
        else
            num(&w, "first_step", NAN);
        num(&w, "clock_correction_s", r->offset_s);
        num(&w, "clock_uncertainty_s", r->uncertainty_s);
        integer(&w, "aligned_on_instances", (long long)r->aligned_on);
        close_(&w, '}');
    }
    close_(&w, ']');
    open_(&w, "unrecognised_comm_kernels", '[');
    for (size_t i = 0; i < k->ncand; i++) {
        open_(&w, NULL, '{');
        str(&w, "name", k->cand[i].name);
        integer(&w, "count", (long long)k->cand[i].count);
        num(&w, "time_s", k->cand[i].time_s);
        close_(&w, '}');
    }
    close_(&w, ']');
    close_(&w, '}');
}

void cs__report_kineto_text(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_kineto *k = rep->kineto;
    if (!k)
        return;
    char a[32], b[32], c[32];
    fprintf(out, "\n@--- Kineto import %s\n", "---------------------------------------------");
    fprintf(out, "clock: max_correction_s %s  max_uncertainty_s %s  max_residual_s %s%s%s\n",
            fmt(a, sizeof a, "%.9f", k->max_correction_s),
            fmt(b, sizeof b, "%.9f", k->max_uncertainty_s),
            fmt(c, sizeof c, "%.9f", k->max_residual_s), k->clock_note[0] ? "  " : "",
            k->clock_note);
    fprintf(out, "%5s %9s %9s %6s %16s %14s  %s\n", "Rank", "Kernels", "NCCL", "Steps",
            "Correction_s", "Uncertainty_s", "NCCL by collective / file");
    for (size_t i = 0; i < k->nranks; i++) {
        const struct cs_report_kineto_rank *r = &k->ranks[i];
        fprintf(out, "%5d %9" PRIu64 " %9" PRIu64 " %6d %16s %14s  ", r->rank, r->kernels,
                r->nccl_kernels, r->steps, fmt(a, sizeof a, "%.9f", r->offset_s),
                fmt(b, sizeof b, "%.9f", r->uncertainty_s));
        for (int x = 0; x < CS_KC_N; x++)
            if (r->by_class[x])
                fprintf(out, "%s=%" PRIu64 " ", cs__kcoll_names[x], r->by_class[x]);
        fprintf(out, "%s\n", r->file);
    }
    for (size_t i = 0; i < k->ncand; i++)
        fprintf(out, "unrecognised communication kernel: %s (%" PRIu64 " kernels, %.6f s)\n",
                k->cand[i].name, k->cand[i].count, k->cand[i].time_s);
}
