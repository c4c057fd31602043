/*
 * The analysis as a library: open a run directory (every trace found and validated), analyse it,
 * read the report model (commscope/report.h), render it, free it.  What `commscope analyze` and
 * `commscope compare` do, without their command lines.
 *
 *     struct cs_analysis *a;
 *     char err[512];
 *     int rc = cs_analysis_open(&a, "run-dir", NULL, err, sizeof err);
 *     if (!rc)
 *         rc = cs_analysis_run(a);
 *     if (!rc)
 *         cs_report_write_json(cs_analysis_report(a), stdout);
 *     cs_analysis_free(a);
 *
 * Errors are the negative codes of commscope/errors.h.  A run with problems (a rank missing, a
 * damaged trace) still analyses; each problem is a sentence in the report (problems, nproblems).
 */
#ifndef COMMSCOPE_ANALYZER_H
#define COMMSCOPE_ANALYZER_H

#include <stddef.h>
#include <stdio.h>

#include "commscope/errors.h"
#include "commscope/report.h"

struct cs_analysis; /* opaque */

/* The Perfetto (Chrome trace-event JSON) export, written while the traces are read; the limits
 * are those of `commscope analyze --perfetto-window / --perfetto-steps / --perfetto-ranks`. */
struct cs_perfetto_opts {
    FILE *out;
    const char *path;    /* for messages */
    int window;          /* limit to [from_s, to_s] seconds after the run's start */
    double from_s, to_s; /* to_s < 0: to the end */
    double span_hint_s;  /* unused when 0: the run's length, to scale the size estimate */
    const char *ranks;   /* "0-3,8" or NULL for all */
    int steps;           /* limit to steps step_from..step_to (step_to < 0: to the last) */
    int step_from, step_to;
};

/* The model FLOPs of one training step, for the achieved FLOP/s and the model FLOP utilisation
 * (MFU) of `commscope analyze --flops-per-step F | --params N --tokens-per-step T` (F = 6 N T);
 * docs/metrics.md.  Zero / NULL: not given. */
struct cs_flops_opts {
    double flops_per_step;   /* the model FLOPs of one step of the whole job (all its GPUs) */
    double params;           /* model parameters: with tokens_per_step, F = 6 x params x tokens */
    double tokens_per_step;  /* tokens of one step of the whole job (also gives tokens/s) */
    double samples_per_step; /* samples of one step of the whole job (gives samples/s) */
    double peak_flops;       /* peak FLOP/s of one GPU, instead of the GPU table's */
    const char *gpu;         /* the GPU model, instead of the one the traces name */
    const char *precision;   /* the peak to compare with: "bf16" (the default), "fp16", "tf32",
                                "fp32" */
};

/* What an analysis can write besides its report; all optional (NULL or 0). */
struct cs_analysis_opts {
    FILE *events_out;   /* every event as CSV, times on rank 0's clock (docs/user-guide.md) */
    FILE *progress_out; /* "analysing: 42%" lines, rewritten in place (a terminal) */
    int timeline;       /* build the representative step's timeline (the HTML report draws it) */
    int hung; /* the job is known to be stuck (no rank completed a call for a while): diagnose
                 it as hung although its processes still run (commscope run --hang-timeout) */
    const struct cs_perfetto_opts *perfetto; /* the Perfetto export, or NULL */
    const struct cs_flops_opts *flops; /* the model FLOPs per step: the report's MFU section */
};

/* Open run_dir: find its rank-*.cst traces, validate each and check they form one run.  Returns 0,
 * or a CS_E* code with a sentence in err.  *out is set either way (NULL only when not even the
 * handle could be allocated): its problems say what else went wrong. */
int cs_analysis_open(struct cs_analysis **out, const char *run_dir,
                     const struct cs_analysis_opts *opts, char *err, size_t errlen);
/* Analyse the opened run into its report.  Returns 0, or CS_ENOMEM (the report holds what was
 * computed, and the problem says so). */
int cs_analysis_run(struct cs_analysis *a);
/* The report model: after cs_analysis_run; all zero before.  Valid until cs_analysis_free. */
const struct cs_report *cs_analysis_report(const struct cs_analysis *a);
/* The report rendered: plain text (as `commscope analyze` prints it); JSON (docs/report-schema.md,
 * returns 0 or CS_EIO). */
void cs_report_write_text(const struct cs_report *rep, FILE *out);
int cs_report_write_json(const struct cs_report *rep, FILE *out);
/* The problems found so far (a rank missing, a damaged trace, ...): one sentence each. */
size_t cs_analysis_nproblems(const struct cs_analysis *a);
const char *cs_analysis_problem(const struct cs_analysis *a, size_t i);

/* For an importer, which converts another tool's traces into a run directory and analyses that:
 * between cs_analysis_open and cs_analysis_run, say where the run came from (the report's source,
 * e.g. "kineto", and the path the user named instead of the converted directory; marker_detail,
 * when not NULL, says what the step markers were, e.g. "ProfilerStep#N ranges") and add the
 * problems the conversion met.  Each returns 0, CS_EUSAGE (after cs_analysis_run) or CS_ENOMEM. */
int cs_analysis_set_origin(struct cs_analysis *a, const char *source, const char *path,
                           const char *marker_detail);
int cs_analysis_add_problem(struct cs_analysis *a, const char *sentence);
/* The GPU model the importer's trace of `rank` names (e.g. "NVIDIA A100-SXM4-80GB"), for the peak
 * FLOP/s of the MFU section; same returns, and CS_EUSAGE for a rank outside the run. */
int cs_analysis_set_gpu(struct cs_analysis *a, int rank, const char *model);
/* After cs_analysis_run: the report's Kineto section (report.h), which the analysis owns from
 * here on (it is freed at once when the run gave no report). */
void cs_analysis_attach_kineto(struct cs_analysis *a, struct cs_report_kineto *k);

/* PyTorch profiler (Kineto) traces: `paths` are files or directories whose *.json / *.json.gz
 * files are read, converted into a run directory, opened and analysed (cs_analysis_run is not
 * called again).  Returns what cs_analysis_open and cs_analysis_run return, with *out set as by
 * cs_analysis_open; CS_EFORMAT with the files' problems in err when no trace was usable. */
int cs_analysis_import_kineto(struct cs_analysis **out, const char *const *paths, int npaths,
                              const struct cs_analysis_opts *opts, char *err, size_t errlen);
/* How many ranks' traces the opened run has (0: none could be read). */
int cs_analysis_nranks(const struct cs_analysis *a);

/* Everything of the analysis, its report included (NULL is harmless). */
void cs_analysis_free(struct cs_analysis *a);

#endif
