/*
 * Achieved FLOP/s and model FLOP utilisation (flops.h; docs/metrics.md "Model FLOPs").
 *
 * The peaks are NVIDIA's data-sheet figures for dense arithmetic (the tensor-core figures the
 * sheets give "with sparsity" halved), in TFLOP/s per GPU; B200's are the HGX B200 sheet's
 * eight-GPU figures divided by eight.  A GPU without a precision's peak (V100: no tf32, no bf16)
 * has 0 there.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flops.h"
#include "steps.h"

struct peak_row {
    const char *family;  /* in the device name, case ignored */
    const char *variant; /* also in the name, or NULL: any other */
    const char *entry;
    double fp32, tf32, fp16, bf16; /* TFLOP/s, dense */
};

/* Rows of a family with a variant before the family's catch-all row. */
static const struct peak_row PEAKS[] = {
    {"V100S", NULL, "V100S PCIe", 16.4, 0, 130, 0},
    {"V100", "PCIE", "V100 PCIe", 14, 0, 112, 0},
    {"V100", NULL, "V100 SXM2", 15.7, 0, 125, 0},
    {"A100", NULL, "A100", 19.5, 156, 312, 312},
    {"H100", "PCIE", "H100 PCIe", 51, 378, 756.5, 756.5},
    {"H100", "NVL", "H100 NVL", 60, 417.5, 835.5, 835.5},
    {"H100", NULL, "H100 SXM", 67, 494.5, 989.5, 989.5},
    {"H200", "NVL", "H200 NVL", 60, 417.5, 835.5, 835.5},
    {"H200", NULL, "H200 SXM", 67, 494.5, 989.5, 989.5},
    {"B200", NULL, "B200", 75, 1125, 2250, 2250},
};

static int has(const char *s, const char *word)
{
    size_t n = strlen(word);
    for (; *s; s++) {
        size_t i = 0;
        while (i < n && s[i] && toupper((unsigned char)s[i]) == word[i])
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

double cs__gpu_peak_flops(const char *model, const char *precision, char *entry, size_t n)
{
    if (n)
        entry[0] = '\0';
    for (size_t i = 0; model && i < sizeof PEAKS / sizeof PEAKS[0]; i++) {
        const struct peak_row *p = &PEAKS[i];
        if (!has(model, p->family) || (p->variant && !has(model, p->variant)))
            continue;
        snprintf(entry, n, "%s", p->entry);
        double t = !strcmp(precision, "fp32")   ? p->fp32
                   : !strcmp(precision, "tf32") ? p->tf32
                   : !strcmp(precision, "fp16") ? p->fp16
                   : !strcmp(precision, "bf16") ? p->bf16
                                                : 0;
        return t * 1e12;
    }
    return 0;
}

/* The job's GPU model: --gpu, else the one model every rank's trace that names one names.
 * Returns "" with a note when there is none or they differ. */
static const char *job_gpu(const struct cs__run *run, char *note, size_t n)
{
    const struct cs_flops_opts *o = run->flops_opts;
    if (o->gpu && o->gpu[0])
        return o->gpu;
    const char *model = "";
    int at = -1;
    for (int r = 0; run->gpu_name && r < run->world; r++) {
        const char *g = run->gpu_name[r];
        if (!g[0])
            continue;
        if (!model[0]) {
            model = g;
            at = r;
        } else if (strcmp(g, model) != 0) {
            snprintf(note, n,
                     "the ranks' GPUs differ (%s on rank %d, %s on rank %d): give the peak of one "
                     "GPU with --peak-flops",
                     model, at, g, r);
            return "";
        }
    }
    if (!model[0])
        snprintf(note, n,
                 "the traces name no GPU model: give it with --gpu MODEL, or the peak of "
                 "one GPU with --peak-flops");
    return model;
}

static double given(double v)
{
    return v > 0 ? v : NAN;
}

void cs__flops_report(struct cs__run *run, struct cs_report *rep)
{
    const struct cs_flops_opts *o = run->flops_opts;
    if (!o || !(o->flops_per_step > 0 || o->params > 0 || o->tokens_per_step > 0 ||
                o->samples_per_step > 0))
        return;
    struct cs_report_flops *F = calloc(1, sizeof *F);
    if (!F) {
        cs__problem(run, "out of memory for the model FLOPs section");
        return;
    }
    F->params = given(o->params);
    F->tokens_per_step = given(o->tokens_per_step);
    F->samples_per_step = given(o->samples_per_step);
    if (o->flops_per_step > 0) {
        F->flops_per_step = o->flops_per_step;
        snprintf(F->flops_from, sizeof F->flops_from, "--flops-per-step");
    } else if (o->params > 0 && o->tokens_per_step > 0) {
        F->flops_per_step = 6 * o->params * o->tokens_per_step;
        snprintf(F->flops_from, sizeof F->flops_from, "6 x params x tokens per step");
    } else {
        F->flops_per_step = NAN;
    }
    F->gpus = rep->world_size > 0 ? rep->world_size : (int)rep->nranks;
    const struct cs_report_steps *S = rep->steps;
    F->step_s = S && S->timed > 0 && S->mean_s > 0 ? S->mean_s : NAN;
    if (!(F->step_s > 0))
        snprintf(F->note, sizeof F->note,
                 "no timed steps (%.200s): the rates need the mean step time",
                 S && S->note[0] ? S->note : "no step was found");
    F->achieved_flops = F->flops_per_step / F->step_s;
    F->achieved_flops_per_gpu = F->achieved_flops / F->gpus;
    F->tokens_per_s = F->tokens_per_step / F->step_s;
    F->samples_per_s = F->samples_per_step / F->step_s;

    snprintf(F->precision, sizeof F->precision, "%s", o->precision ? o->precision : "bf16");
    char why[240] = "";
    snprintf(F->gpu, sizeof F->gpu, "%s", job_gpu(run, why, sizeof why));
    F->peak_flops_per_gpu = NAN;
    if (o->peak_flops > 0) {
        F->peak_flops_per_gpu = o->peak_flops;
        snprintf(F->peak_from, sizeof F->peak_from, "--peak-flops");
        cs__gpu_peak_flops(F->gpu, F->precision, F->gpu_entry, sizeof F->gpu_entry);
    } else if (F->gpu[0]) {
        double p = cs__gpu_peak_flops(F->gpu, F->precision, F->gpu_entry, sizeof F->gpu_entry);
        if (!p && F->gpu_entry[0] && !o->precision) {
            /* the default, a 16-bit tensor peak: fp16 where the GPU has no bf16 (V100) */
            snprintf(F->precision, sizeof F->precision, "fp16");
            p = cs__gpu_peak_flops(F->gpu, F->precision, F->gpu_entry, sizeof F->gpu_entry);
        }
        if (p > 0) {
            F->peak_flops_per_gpu = p;
            snprintf(F->peak_from, sizeof F->peak_from, "table: %s, %s%s, dense", F->gpu_entry,
                     F->precision, strcmp(F->precision, "fp32") ? " tensor" : "");
        } else if (F->gpu_entry[0]) {
            snprintf(why, sizeof why, "%s has no %s peak: choose another with --precision",
                     F->gpu_entry, F->precision);
        } else {
            snprintf(why, sizeof why,
                     "the peak table has no row for '%s': give the peak of one GPU with "
                     "--peak-flops",
                     F->gpu);
        }
    }
    if (!(F->peak_flops_per_gpu > 0) && F->flops_per_step > 0 && !F->note[0])
        snprintf(F->note, sizeof F->note, "MFU not given: %s", why);
    F->mfu = F->achieved_flops_per_gpu / F->peak_flops_per_gpu;
    rep->flops = F;
}

void cs__flops_free(struct cs__run *run)
{
    free(run->gpu_name);
    run->gpu_name = NULL;
}

void cs__flops_report_free(struct cs_report *rep)
{
    free(rep->flops);
    rep->flops = NULL;
}
