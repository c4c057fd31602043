/* The analysis as a library (include/commscope/analyzer.h): a run and its report behind a handle.
 */
#include <stdlib.h>
#include <string.h>

#include "commscope/analyzer.h"
#include "internal.h"
#include "kineto.h"

struct cs_analysis {
    struct cs__run run;
    struct cs_report rep;
    int loaded; /* the run directory was read: cs_analysis_run may go on */
    int analysed;
    char marker_detail[sizeof((struct cs_report_steps *)0)->detail]; /* "": the analysis' own */
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
                                      .perfetto = opts->perfetto,
                                      .progress_out = opts->progress_out,
                                      .timeline = opts->timeline,
                                      .hung = opts->hung,
                                      .flops = opts->flops};
    int rc = cs__analyze_load(run_dir, &a->run, err, errlen, &o);
    a->loaded = rc == 0;
    return rc;
}

int cs_analysis_run(struct cs_analysis *a)
{
    if (!a->loaded || a->analysed)
        return CS_EUSAGE;
    a->analysed = 1;
    int rc = cs__analyze(&a->run, &a->rep);
    if (a->marker_detail[0] && a->rep.steps && strcmp(a->rep.steps->source, "marker") == 0)
        snprintf(a->rep.steps->detail, sizeof a->rep.steps->detail, "%s", a->marker_detail);
    return rc;
}

int cs_analysis_set_origin(struct cs_analysis *a, const char *source, const char *path,
                           const char *marker_detail)
{
    if (a->analysed)
        return CS_EUSAGE;
    snprintf(a->run.source, sizeof a->run.source, "%s", source);
    snprintf(a->run.dir, sizeof a->run.dir, "%s", path);
    snprintf(a->marker_detail, sizeof a->marker_detail, "%s", marker_detail ? marker_detail : "");
    return 0;
}

int cs_analysis_add_problem(struct cs_analysis *a, const char *sentence)
{
    if (a->analysed)
        return CS_EUSAGE;
    size_t n = a->run.nproblems;
    cs__problem(&a->run, "%s", sentence);
    return a->run.nproblems > n ? 0 : CS_ENOMEM;
}

int cs_analysis_set_gpu(struct cs_analysis *a, int rank, const char *model)
{
    struct cs__run *run = &a->run;
    if (a->analysed || !a->loaded || rank < 0 || rank >= run->world)
        return CS_EUSAGE;
    if (!run->gpu_name && !(run->gpu_name = calloc((size_t)run->world, sizeof *run->gpu_name)))
        return CS_ENOMEM;
    snprintf(run->gpu_name[rank], sizeof run->gpu_name[rank], "%s", model ? model : "");
    return 0;
}

void cs_analysis_attach_kineto(struct cs_analysis *a, struct cs_report_kineto *k)
{
    struct cs_report spare = {.kineto = k}; /* what is freed: k when no report takes it */
    if (a->analysed && a->rep.ranks) {
        spare.kineto = a->rep.kineto;
        a->rep.kineto = k;
    }
    cs__kineto_report_free(&spare);
}

int cs_analysis_nranks(const struct cs_analysis *a)
{
    return a->run.ranks ? a->run.world : 0;
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
