/*
 * The model FLOPs section (flops.h) in text, JSON and HTML.  Formatting only: the numbers are
 * flops.c's (docs/metrics.md "Model FLOPs").
 */
#include <math.h>
#include <stdio.h>

#include "flops.h"
#include "json.h"

/* v in its unit with an SI prefix ("312.000 TFLOP/s"), or "-" for no value. */
static const char *si(char *b, size_t n, double v, const char *unit)
{
    static const char *const pre[] = {"", "k", "M", "G", "T", "P", "E"};
    if (!isfinite(v))
        return "-";
    int k = 0;
    while (k < 6 && fabs(v) >= 1000) {
        v /= 1000;
        k++;
    }
    snprintf(b, n, "%.3f %s%s", v, pre[k], unit);
    return b;
}

static const char *pct(char *b, size_t n, double v)
{
    if (!isfinite(v))
        return "-";
    snprintf(b, n, "%.2f %%", 100 * v);
    return b;
}

void cs__flops_text(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_flops *F = rep->flops;
    if (!F)
        return;
    char a[48], b[48], c[48];
    fprintf(out, "\n@--- Model FLOPs %s\n", "-----------------------------------------------");
    fprintf(out, "flops_per_step %s (%s)  step_s %s  gpus %d\n",
            si(a, sizeof a, F->flops_per_step, "FLOP"),
            F->flops_from[0] ? F->flops_from : "not given",
            isfinite(F->step_s) ? (snprintf(b, sizeof b, "%.6f", F->step_s), b) : "-", F->gpus);
    fprintf(out, "achieved %s  per_gpu %s\n", si(a, sizeof a, F->achieved_flops, "FLOP/s"),
            si(b, sizeof b, F->achieved_flops_per_gpu, "FLOP/s"));
    fprintf(out, "gpu %s%s%s%s  peak_per_gpu %s (%s)  mfu %s\n", F->gpu[0] ? F->gpu : "unknown",
            F->gpu_entry[0] ? " (" : "", F->gpu_entry, F->gpu_entry[0] ? ")" : "",
            si(a, sizeof a, F->peak_flops_per_gpu, "FLOP/s"),
            F->peak_from[0] ? F->peak_from : F->precision, pct(c, sizeof c, F->mfu));
    if (isfinite(F->tokens_per_s) || isfinite(F->samples_per_s))
        fprintf(out, "tokens_per_s %s  samples_per_s %s\n",
                isfinite(F->tokens_per_s) ? (snprintf(a, sizeof a, "%.1f", F->tokens_per_s), a)
                                          : "-",
                isfinite(F->samples_per_s) ? (snprintf(b, sizeof b, "%.1f", F->samples_per_s), b)
                                           : "-");
    fprintf(out, "(MFU = achieved FLOP/s per GPU / the GPU's peak; the step: mean of the timed "
                 "steps)\n");
    if (F->note[0])
        fprintf(out, "note: %s\n", F->note);
}

void cs__flops_json(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_flops *F = rep->flops;
    if (!F)
        return;
    struct cs__jw w = {.f = out, .depth = 1};
    cs__jw_open(&w, "flops", '{');
    cs__jw_num(&w, "flops_per_step", F->flops_per_step);
    cs__jw_str_or_null(&w, "flops_from", F->flops_from);
    cs__jw_num(&w, "params", F->params);
    cs__jw_num(&w, "tokens_per_step", F->tokens_per_step);
    cs__jw_num(&w, "samples_per_step", F->samples_per_step);
    cs__jw_num(&w, "step_s", F->step_s);
    cs__jw_int(&w, "gpus", F->gpus);
    cs__jw_num(&w, "achieved_flops", F->achieved_flops);
    cs__jw_num(&w, "achieved_flops_per_gpu", F->achieved_flops_per_gpu);
    cs__jw_str_or_null(&w, "gpu", F->gpu);
    cs__jw_str_or_null(&w, "gpu_entry", F->gpu_entry);
    cs__jw_str(&w, "precision", F->precision);
    cs__jw_num(&w, "peak_flops_per_gpu", F->peak_flops_per_gpu);
    cs__jw_str_or_null(&w, "peak_from", F->peak_from);
    cs__jw_num(&w, "mfu", F->mfu);
    cs__jw_num(&w, "tokens_per_s", F->tokens_per_s);
    cs__jw_num(&w, "samples_per_s", F->samples_per_s);
    cs__jw_str_or_null(&w, "note", F->note);
    cs__jw_close(&w, '}');
}

static void row(FILE *f, const char *what, const char *v)
{
    fprintf(f, "<tr><th>%s</th><td class=\"l\">", what);
    cs__html_esc(f, v);
    fputs("</td></tr>\n", f);
}

void cs__flops_html(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_flops *F = rep->flops;
    if (!F)
        return;
    char a[48], b[160];
    fprintf(f,
            "<p>Model FLOP utilisation (MFU): the model FLOPs of a step over the mean step "
            "time, per GPU, against the GPU's peak.</p>\n<table class=\"facts\" id=\"flops\">\n");
    snprintf(b, sizeof b, "%s (%s)", si(a, sizeof a, F->flops_per_step, "FLOP"),
             F->flops_from[0] ? F->flops_from : "not given");
    row(f, "FLOPs per step", b);
    snprintf(b, sizeof b, isfinite(F->step_s) ? "%.6f s" : "-", F->step_s);
    row(f, "Mean step time", b);
    snprintf(b, sizeof b, "%d", F->gpus);
    row(f, "GPUs", b);
    row(f, "Achieved, whole job", si(a, sizeof a, F->achieved_flops, "FLOP/s"));
    row(f, "Achieved per GPU", si(a, sizeof a, F->achieved_flops_per_gpu, "FLOP/s"));
    row(f, "GPU model", F->gpu[0] ? F->gpu : "unknown");
    snprintf(b, sizeof b, "%s (%s)", si(a, sizeof a, F->peak_flops_per_gpu, "FLOP/s"),
             F->peak_from[0] ? F->peak_from : F->precision);
    row(f, "Peak per GPU", b);
    row(f, "MFU", pct(a, sizeof a, F->mfu));
    if (isfinite(F->tokens_per_s)) {
        snprintf(b, sizeof b, "%.1f", F->tokens_per_s);
        row(f, "Tokens per second", b);
    }
    if (isfinite(F->samples_per_s)) {
        snprintf(b, sizeof b, "%.1f", F->samples_per_s);
        row(f, "Samples per second", b);
    }
    fputs("</table>\n", f);
    if (F->note[0]) {
        fputs("<p class=\"na\">", f);
        cs__html_esc(f, F->note);
        fputs("</p>\n", f);
    }
}
