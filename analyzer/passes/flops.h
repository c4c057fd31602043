/*
 * Achieved FLOP/s and model FLOP utilisation (flops.c): the model FLOPs of a step the user gives
 * (--flops-per-step F, or --params N --tokens-per-step T: F = 6 N T, the forward and backward
 * matrix products of a dense transformer) over the mean step time, per GPU, against the peak of
 * the GPU model the traces name (or --gpu, or --peak-flops).  A report pass: it reads only the
 * step statistics the steps pass published.  Definitions in docs/metrics.md ("Model FLOPs").
 */
#ifndef COMMSCOPE_ANALYZER_FLOPS_H
#define COMMSCOPE_ANALYZER_FLOPS_H

#include <stddef.h>
#include <stdio.h>

#include "internal.h"

/* The dense peak FLOP/s of one GPU of `model` (a device name as CUDA or a trace gives it, e.g.
 * "NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB", or a table row such as "H100 PCIe") at
 * `precision` ("bf16", "fp16", "tf32", "fp32").  Returns the peak, or 0 when the model is not in
 * the table (*entry "") or has no such peak (*entry its row); *entry gets the row's name. */
double cs__gpu_peak_flops(const char *model, const char *precision, char *entry, size_t n);

/* The pass's hooks (passes.def): the report section rep->flops when the options ask for it. */
void cs__flops_report(struct cs__run *run, struct cs_report *rep);
void cs__flops_free(struct cs__run *run);
void cs__flops_report_free(struct cs_report *rep);

/* report_flops.c */
void cs__flops_text(const struct cs_report *rep, FILE *out);
void cs__flops_json(const struct cs_report *rep, FILE *out);
void cs__flops_html(const struct cs_report *rep, FILE *out);

#endif
