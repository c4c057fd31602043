/* The analysis as a library (include/commscope/analyzer.h): a run and its report behind a handle.
 */
#include <stdlib.h>

#include "commscope/analyzer.h"
#include "internal.h"

struct cs_analysis {
    struct cs__run run;
    struct cs_report rep;
    int loaded; /* the run directory was read: cs_analysis_run may go on */
    int analysed;
};

int cs_analysis_open(struct cs_analysis **out, const char *run_dir,
                     const struct cs_analysis_opts *opts, char *err, size_t errlen)
{
    struct cs_analysis *a = calloc(1, sizeof *a);
    *out = a;
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return CS_ENOMEM;
    }
    struct cs__analyze_opts o = {0};
    if (opts)
        o = (struct cs__analyze_opts){.events_out = opts->events_out,
                                      .progress_out = opts->progress_out,
                                      .timeline = opts->timeline};
    int rc = cs__analyze_load(run_dir, &a->run, err, errlen, &o);
    a->loaded = rc == 0;
    return rc;
}

int cs_analysis_run(struct cs_analysis *a)
{
    if (!a->loaded || a->analysed)
        return CS_EUSAGE;
    a->analysed = 1;
    return cs__analyze(&a->run, &a->rep);
}

const struct cs_report *cs_analysis_report(const struct cs_analysis *a)
{
    return &a->rep;
}

size_t cs_analysis_nproblems(const struct cs_analysis *a)
{
    return a->run.nproblems;
}

const char *cs_analysis_problem(const struct cs_analysis *a, size_t i)
{
    return i < a->run.nproblems ? a->run.problems[i] : NULL;
}

void cs_report_write_text(const struct cs_report *rep, FILE *out)
{
    cs__report_text(rep, out);
}

int cs_report_write_json(const struct cs_report *rep, FILE *out)
{
    return cs__report_json(rep, out);
}

void cs_analysis_free(struct cs_analysis *a)
{
    if (!a)
        return;
    cs__report_free(&a->rep);
    cs__run_free(&a->run);
    free(a);
}
