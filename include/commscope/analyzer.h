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

/* What an analysis can write besides its report; all optional (NULL or 0). */
struct cs_analysis_opts {
    FILE *events_out;   /* every event as CSV, times on rank 0's clock (docs/user-guide.md) */
    FILE *progress_out; /* "analysing: 42%" lines, rewritten in place (a terminal) */
    int timeline;       /* build the representative step's timeline (the HTML report draws it) */
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
/* Everything of the analysis, its report included (NULL is harmless). */
void cs_analysis_free(struct cs_analysis *a);

#endif
