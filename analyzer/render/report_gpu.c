/*
 * Renderers of the GPU timeline (key "gpu") and of the Kineto import (key "kineto"): a text
 * section each and their JSON keys (docs/report-schema.md).  Formatting only.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "gpu.h"
#include "json.h"
#include "kineto.h"

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
    struct cs__jw w = {.f = out, .depth = 1};
    cs__jw_open(&w, "gpu", '{');
    cs__jw_num(&w, "comm_s", g->comm_s);
    cs__jw_num(&w, "overlapped_s", g->overlapped_s);
    cs__jw_num(&w, "exposed_comm_s", g->exposed_s);
    cs__jw_num(&w, "overlap_ratio", g->overlap_ratio);
    cs__jw_int(&w, "nccl_instances", (long long)g->nccl_instances);
    cs__jw_int(&w, "unmatched_launches", (long long)g->unmatched_launch);
    cs__jw_int(&w, "late_records", (long long)g->late_records);
    cs__jw_open(&w, "devices", '[');
    for (size_t i = 0; i < g->ndevs; i++) {
        const struct cs_report_gpu_dev *d = &g->devs[i];
        if (!cs_report_rank_listed(rep, d->rank))
            continue;
        cs__jw_open(&w, NULL, '{');
        cs__jw_int(&w, "rank", d->rank);
        cs__jw_int(&w, "device", d->device);
        cs__jw_int(&w, "compute_kernels", (long long)d->kernels);
        cs__jw_int(&w, "comm_kernels", (long long)d->comm_kernels);
        cs__jw_num(&w, "compute_s", d->compute_s);
        cs__jw_num(&w, "comm_s", d->comm_s);
        cs__jw_num(&w, "overlapped_s", d->overlapped_s);
        cs__jw_num(&w, "exposed_comm_s", d->exposed_s);
        cs__jw_num(&w, "overlap_ratio", d->overlap_ratio);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_open(&w, "communicators", '[');
    for (size_t i = 0; i < g->ncomms; i++) {
        const struct cs_report_gpu_comm *c = &g->comms[i];
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "comm", c->comm);
        if (c->comm_size > 0)
            cs__jw_int(&w, "comm_size", c->comm_size);
        else
            cs__jw_num(&w, "comm_size", NAN);
        cs__jw_int(&w, "comm_kernels", (long long)c->kernels);
        cs__jw_num(&w, "comm_s", c->comm_s);
        cs__jw_num(&w, "overlapped_s", c->overlapped_s);
        cs__jw_num(&w, "exposed_comm_s", c->exposed_s);
        cs__jw_num(&w, "overlap_ratio", c->overlap_ratio);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_close(&w, '}');
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
    struct cs__jw w = {.f = out, .depth = 1};
    cs__jw_open(&w, "kineto", '{');
    cs__jw_open(&w, "clock", '{');
    cs__jw_num(&w, "max_correction_s", k->max_correction_s);
    cs__jw_num(&w, "max_uncertainty_s", k->max_uncertainty_s);
    cs__jw_num(&w, "max_residual_s", k->max_residual_s);
    cs__jw_str(&w, "note", k->clock_note);
    cs__jw_close(&w, '}');
    cs__jw_open(&w, "ranks", '[');
    for (size_t i = 0; i < k->nranks; i++) {
        const struct cs_report_kineto_rank *r = &k->ranks[i];
        if (!cs_report_rank_listed(rep, r->rank))
            continue;
        cs__jw_open(&w, NULL, '{');
        cs__jw_int(&w, "rank", r->rank);
        cs__jw_str(&w, "file", r->file);
        cs__jw_int(&w, "kernels", (long long)r->kernels);
        cs__jw_int(&w, "nccl_kernels", (long long)r->nccl_kernels);
        cs__jw_open(&w, "nccl_by_collective", '{');
        for (int c = 0; c < CS_KC_N; c++)
            if (r->by_class[c])
                cs__jw_int(&w, cs__kcoll_names[c], (long long)r->by_class[c]);
        cs__jw_close(&w, '}');
        cs__jw_int(&w, "nccl_with_sizes", (long long)r->with_bytes);
        cs__jw_int(&w, "memcpys", (long long)r->memcpys);
        cs__jw_int(&w, "memsets", (long long)r->memsets);
        cs__jw_int(&w, "comm_candidates", (long long)r->candidates);
        cs__jw_int(&w, "gloo_collectives", (long long)r->gloo);
        cs__jw_bool(&w, "legacy_format", r->legacy);
        cs__jw_int(&w, "steps", r->steps);
        cs__jw_str_or_null(&w, "gpu", r->gpu);
        if (r->first_step >= 0)
            cs__jw_int(&w, "first_step", r->first_step);
        else
            cs__jw_num(&w, "first_step", NAN);
        cs__jw_num(&w, "clock_correction_s", r->offset_s);
        cs__jw_num(&w, "clock_uncertainty_s", r->uncertainty_s);
        cs__jw_int(&w, "aligned_on_instances", (long long)r->aligned_on);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_open(&w, "unrecognised_comm_kernels", '[');
    for (size_t i = 0; i < k->ncand; i++) {
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "name", k->cand[i].name);
        cs__jw_int(&w, "count", (long long)k->cand[i].count);
        cs__jw_num(&w, "time_s", k->cand[i].time_s);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_close(&w, '}');
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
        if (r->gloo)
            fprintf(out, "gloo=%" PRIu64 " ", r->gloo);
        fprintf(out, "%s%s\n", r->file, r->legacy ? " (pre-Kineto format: a bare array)" : "");
    }
    for (size_t i = 0; i < k->ncand; i++)
        fprintf(out, "unrecognised communication kernel: %s (%" PRIu64 " kernels, %.6f s)\n",
                k->cand[i].name, k->cand[i].count, k->cand[i].time_s);
}
