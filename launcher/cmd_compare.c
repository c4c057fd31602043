/*
 * `commscope compare RUN_DIR RUN_DIR... [--strong | --weak] [--json FILE] [--quiet]`: runs of one
 * program at different scales, held against the smallest (the reference) with the POP scaling
 * metrics (docs/metrics.md, "Scaling across runs"), and each run's time per step, part by part,
 * against the reference's (what changed: the same comparison serves runs at one scale before and
 * after a change).  Each run is analysed in turn and only its numbers are kept, so memory is
 * that of one analysis.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer/render/json.h"
#include "commscope/analyzer.h"
#include "internal.h"

enum { T_LB, T_CE, T_SCAL, T_N };
static const char *const term_names[T_N] = {
    [T_LB] = "load_balance",
    [T_CE] = "communication_efficiency",
    [T_SCAL] = "computation_scalability",
};

/* The parts of a step (the step budget's mean per rank-step over all ranks, report.json
 * "budget"), as the text report's "Time per step" table shows them. */
enum { B_COMPUTE, B_GRAD, B_TP, B_OTHER, B_WAIT, B_MPI, B_IDLE, B_N };
static const char *const part_names[B_N] = {
    [B_COMPUTE] = "compute_s",  [B_GRAD] = "gradient_sync_s", [B_TP] = "tp_comm_s",
    [B_OTHER] = "other_comm_s", [B_WAIT] = "wait_s",          [B_MPI] = "other_mpi_s",
    [B_IDLE] = "idle_s",
};

struct crun {
    const char *dir;
    int order; /* position on the command line: among runs of equal ranks the first is the
                * reference */
    char program[CS_PROGRAM_MAX];
    int ranks;
    double runtime_s, compute_s, lb, ce, pe, ser, xfer, step_s;
    double part[B_N]; /* NaN: not known (no timed steps; idle without a GPU timeline) */
    size_t problems;
    /* against the reference */
    double scal, ge, speed_eff, rel[T_N];
    int worst;      /* index into term_names, -1 for the reference */
    double speedup; /* reference's step time over this run's */
    int changed;    /* index into part_names of the largest change per step, -1 none */
};

static void usage(FILE *f)
{
    fprintf(f, "usage: commscope compare RUN_DIR RUN_DIR... [--strong | --weak] [--json FILE]\n"
               "                         [--quiet]\n\n"
               "Compare runs of the same program at different scales (POP metrics): scaling\n"
               "efficiency, load balance, communication efficiency, computation scalability\n"
               "and global efficiency of each run against the run with the fewest ranks, and\n"
               "which term degrades most; and each run's time per step, part by part (compute,\n"
               "gradient sync, other communication, waiting), against the reference's, with\n"
               "its speedup and the part that changed most.  Runs with the same number of ranks\n"
               "(before and after a change) compare the same way; among them the first given\n"
               "is the reference.\n\n"
               "options:\n"
               "  --strong     the runs share the total work (default: detected from the total\n"
               "               compute time of the smallest and the largest run)\n"
               "  --weak       every rank has the same work\n"
               "  --json FILE  also write the comparison as JSON to FILE ('-' for stdout)\n"
               "  -q, --quiet  no text table\n"
               "  -h, --help   this text\n\n"
               "examples:\n"
               "  commscope compare runs/np8 runs/np16 runs/np32\n"
               "  commscope compare runs/np8 runs/np64 --weak --json scaling.json\n"
               "  commscope compare runs/before runs/after\n\n"
               "exit status: 0 compared; 2 usage error; 3 a run could not be analysed.\n");
}

static int by_ranks(const void *a, const void *b)
{
    const struct crun *x = a, *y = b;
    if (x->ranks != y->ranks)
        return (x->ranks > y->ranks) - (x->ranks < y->ranks);
    return (x->order > y->order) - (x->order < y->order);
}

/* Analyse dir into c.  Returns 0, or the analyzer's error (message on stderr). */
static int load(const char *dir, struct crun *c)
{
    struct cs_analysis *a;
    char err[512] = "";
    int rc = cs_analysis_open(&a, dir, NULL, err, sizeof err);
    if (!rc)
        rc = cs_analysis_run(a);
    static const struct cs_report none;
    const struct cs_report *rp = a ? cs_analysis_report(a) : &none;
    if (rc || rp->ranks_found == 0) {
        /* (as commscope analyze: what went wrong, then why nothing can be compared) */
        for (size_t i = 0; a && i < cs_analysis_nproblems(a); i++)
            fprintf(stderr, "commscope compare: %s: %s\n", dir, cs_analysis_problem(a, i));
        if (rc)
            fprintf(stderr, "commscope compare: %s: %s\n", dir, err[0] ? err : cs_strerror(rc));
        else
            fprintf(stderr,
                    "commscope compare: %s: nothing to analyse (no rank's trace was read)\n", dir);
        cs_analysis_free(a);
        return rc ? rc : CS_ENOENT;
    }
    const struct cs_report *rep = rp;
    if (rep->nproblems)
        fprintf(stderr,
                "commscope compare: warning: %s: its analysis found %zu problem%s ('commscope"
                " analyze %s' lists them); its numbers may be incomplete\n",
                dir, rep->nproblems, rep->nproblems == 1 ? "" : "s", dir);
    *c = (struct crun){.dir = dir, .ranks = (int)rep->nranks, .worst = -1};
    snprintf(c->program, sizeof c->program, "%s", rep->program);
    for (size_t i = 0; i < rep->nranks; i++) {
        if (rep->ranks[i].wall_s > c->runtime_s)
            c->runtime_s = rep->ranks[i].wall_s;
        c->compute_s += rep->ranks[i].compute_s;
    }
    c->lb = rep->load_balance;
    c->ce = rep->communication_efficiency;
    c->pe = rep->parallel_efficiency;
    c->ser = rep->steps ? rep->steps->serialization_efficiency : NAN;
    c->xfer = rep->steps ? rep->steps->transfer_efficiency : NAN;
    c->step_s = rep->steps ? rep->steps->mean_s : NAN;
    for (int k = 0; k < B_N; k++)
        c->part[k] = NAN;
    if (rep->steps && rep->steps->timed > 0) {
        const struct cs_report_budget *b = &rep->steps->total;
        c->part[B_COMPUTE] = b->compute_s;
        c->part[B_GRAD] = b->grad_sync_s;
        c->part[B_TP] = b->comm_s[CS_DIM_TP];
        c->part[B_OTHER] = b->other_comm_s;
        c->part[B_WAIT] = b->wait_s;
        c->part[B_MPI] = b->other_mpi_s;
        c->part[B_IDLE] = b->idle_s;
    }
    c->problems = rep->nproblems;
    cs_analysis_free(a);
    return 0;
}

/* v with `digits` decimals, "-" when not finite. */
static const char *fmtd(char *b, size_t n, int digits, double v)
{
    if (isfinite(v))
        snprintf(b, n, "%.*f", digits, v);
    else
        snprintf(b, n, "-");
    return b;
}

static const char *fmt(char *b, size_t n, double v)
{
    return fmtd(b, n, 4, v);
}

/* The step table: each run's time per step, part by part, and what changed most. */
static void steps_text(const struct crun *c, int n)
{
    const struct crun *ref = &c[0];
    int idle = 0;
    for (int i = 0; i < n; i++)
        idle |= isfinite(c[i].part[B_IDLE]);
    printf("\n@--- Time per step against the reference (seconds, mean over timed steps and ranks)"
           " ---\n");
    printf("%6s %10s %10s %10s %10s %10s %10s %10s", "Ranks", "Step", "Compute", "Grad_sync",
           "TP_comm", "Other_comm", "Wait", "Other_MPI");
    if (idle)
        printf(" %10s", "Idle");
    printf(" %8s  %s\n", "Speedup", "Changed most");
    for (int i = 0; i < n; i++) {
        const struct crun *x = &c[i];
        char b[B_N + 2][32];
        printf("%6d %10s", x->ranks, fmtd(b[0], 32, 6, x->step_s));
        for (int k = 0; k < B_N; k++)
            if (k != B_IDLE || idle)
                printf(" %10s", fmtd(b[k + 1], 32, 6, x->part[k]));
        printf(" %8s  ", fmt(b[B_N + 1], 32, x->speedup));
        if (i == 0) {
            printf("(reference: %s)\n", x->dir);
        } else if (x->changed >= 0) {
            int k = x->changed;
            double d = x->part[k] - ref->part[k];
            printf("%s %+.6f s", part_names[k], d);
            if (ref->part[k] > 0)
                printf(" (%+.0f %%)", 100 * d / ref->part[k]);
            printf(": %s\n", x->dir);
        } else {
            printf("%s: %s\n", isfinite(x->step_s) && isfinite(ref->step_s) ? "none" : "-", x->dir);
        }
    }
    if (!isfinite(ref->step_s))
        printf("(the reference has no timed steps: nothing to hold the steps against)\n");
}

static int write_json(FILE *f, const struct crun *c, int n, const char *mode, int detected,
                      int worst)
{
    struct cs__jw w = {.f = f};
    cs__jw_open(&w, NULL, '{');
    cs__jw_str(&w, "schema", "commscope-compare/1");
    cs__jw_str(&w, "mode", mode);
    cs__jw_str(&w, "mode_source", detected ? "detected" : "option");
    cs__jw_str(&w, "reference", c[0].dir);
    cs__jw_open(&w, "runs", '[');
    for (int i = 0; i < n; i++) {
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "dir", c[i].dir);
        cs__jw_str(&w, "program", c[i].program);
        cs__jw_int(&w, "ranks", c[i].ranks);
        cs__jw_num(&w, "runtime_s", c[i].runtime_s);
        cs__jw_num(&w, "compute_s", c[i].compute_s);
        cs__jw_num(&w, "step_s", c[i].step_s);
        cs__jw_num(&w, "load_balance", c[i].lb);
        cs__jw_num(&w, "communication_efficiency", c[i].ce);
        cs__jw_num(&w, "serialization_efficiency", c[i].ser);
        cs__jw_num(&w, "transfer_efficiency", c[i].xfer);
        cs__jw_num(&w, "parallel_efficiency", c[i].pe);
        cs__jw_num(&w, "computation_scalability", c[i].scal);
        cs__jw_num(&w, "global_efficiency", c[i].ge);
        cs__jw_num(&w, "scaling_efficiency", c[i].speed_eff);
        cs__jw_open(&w, "relative", '{');
        for (int t = 0; t < T_N; t++)
            cs__jw_num(&w, term_names[t], c[i].rel[t]);
        cs__jw_close(&w, '}');
        cs__jw_str_or_null(&w, "degrades_most", c[i].worst >= 0 ? term_names[c[i].worst] : "");
        cs__jw_open(&w, "step_parts", '{');
        for (int k = 0; k < B_N; k++)
            cs__jw_num(&w, part_names[k], c[i].part[k]);
        cs__jw_close(&w, '}');
        cs__jw_num(&w, "step_speedup", c[i].speedup);
        if (c[i].changed >= 0) {
            int k = c[i].changed;
            cs__jw_open(&w, "changed_most", '{');
            cs__jw_str(&w, "part", part_names[k]);
            cs__jw_num(&w, "delta_s", c[i].part[k] - c[0].part[k]);
            cs__jw_num(&w, "reference_s", c[0].part[k]);
            cs__jw_close(&w, '}');
        } else {
            cs__jw_str_or_null(&w, "changed_most", "");
        }
        cs__jw_u64(&w, "problems", c[i].problems);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_str_or_null(&w, "degrades_most", worst >= 0 ? term_names[worst] : "");
    cs__jw_close(&w, '}');
    fputc('\n', f);
    return ferror(f) ? -1 : 0;
}

int cs__cmd_compare(int argc, char **argv)
{
    const char *json = NULL;
    int mode = 0, quiet = 0; /* mode 1 strong, 2 weak, 0 detect */
    const char **dirs = calloc((size_t)argc + 1, sizeof *dirs);
    int n = 0;
    if (!dirs) {
        fprintf(stderr, "commscope compare: out of memory\n");
        return 3;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            free(dirs);
            return 0;
        } else if (!strcmp(a, "--strong") || !strcmp(a, "--weak")) {
            int m = a[2] == 's' ? 1 : 2;
            if (mode && mode != m) {
                fprintf(stderr, "commscope compare: --strong and --weak exclude each other; see"
                                " 'commscope compare --help'\n");
                free(dirs);
                return CS__EXIT_USAGE;
            }
            mode = m;
        } else if (!strcmp(a, "--json")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "commscope compare: --json needs a file name; see 'commscope"
                                " compare --help'\n");
                free(dirs);
                return CS__EXIT_USAGE;
            }
            json = argv[++i];
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr,
                    "commscope compare: unknown option '%s'; see 'commscope compare"
                    " --help'\n",
                    a);
            free(dirs);
            return CS__EXIT_USAGE;
        } else {
            dirs[n++] = a;
        }
    }
    if (n < 2) {
        fprintf(stderr,
                "commscope compare: needs at least two run directories (got %d); see"
                " 'commscope compare --help'\n",
                n);
        free(dirs);
        return CS__EXIT_USAGE;
    }
    struct crun *c = calloc((size_t)n, sizeof *c);
    if (!c) {
        free(dirs);
        fprintf(stderr, "commscope compare: out of memory\n");
        return 3;
    }
    for (int i = 0; i < n; i++) {
        if (load(dirs[i], &c[i])) {
            free(c);
            free(dirs);
            return 3;
        }
        c[i].order = i;
    }
    qsort(c, (size_t)n, sizeof *c, by_ranks);
    for (int i = 1; i < n; i++) {
        const char *p0 = strrchr(c[0].program, '/'), *pi = strrchr(c[i].program, '/');
        p0 = p0 ? p0 + 1 : c[0].program;
        pi = pi ? pi + 1 : c[i].program;
        if (strcmp(p0, pi))
            fprintf(stderr,
                    "commscope compare: warning: %s ran '%s', %s ran '%s'; the comparison assumes"
                    " one program\n",
                    c[0].dir, p0, c[i].dir, pi);
    }
    /* Strong or weak: is the largest run's total compute nearer the reference's (strong) or the
     * reference's times the rank ratio (weak)?  Logarithmic distance. */
    int detected = !mode;
    if (!mode) {
        double r = c[n - 1].compute_s / c[0].compute_s;
        double p = (double)c[n - 1].ranks / c[0].ranks;
        mode = isfinite(r) && r > 0 && fabs(log(r)) > fabs(log(r / p)) ? 2 : 1;
    }
    const struct crun *ref = &c[0];
    int worst_last = -1;
    for (int i = 0; i < n; i++) {
        struct crun *x = &c[i];
        double p = (double)x->ranks / ref->ranks;
        double work = mode == 1 ? ref->compute_s : ref->compute_s * p;
        x->scal = x->compute_s > 0 ? work / x->compute_s : NAN;
        x->ge = x->pe * x->scal;
        x->speed_eff =
            mode == 1 ? ref->runtime_s / (p * x->runtime_s) : ref->runtime_s / x->runtime_s;
        x->rel[T_LB] = x->lb / ref->lb;
        x->rel[T_CE] = x->ce / ref->ce;
        x->rel[T_SCAL] = x->scal / ref->scal;
        /* The step: speedup, and the part whose time per step moved most either way (none
         * when no part moved). */
        x->speedup = x->step_s > 0 ? ref->step_s / x->step_s : NAN;
        x->changed = -1;
        for (int k = 0; i > 0 && k < B_N; k++) {
            double d = fabs(x->part[k] - ref->part[k]);
            if (isfinite(d) && d > 0 &&
                (x->changed < 0 || d > fabs(x->part[x->changed] - ref->part[x->changed])))
                x->changed = k;
        }
        if (i == 0)
            continue;
        /* the term furthest below the reference's; none when none is below it */
        for (int t = 0; t < T_N; t++)
            if (isfinite(x->rel[t]) && x->rel[t] < 1 &&
                (x->worst < 0 || x->rel[t] < x->rel[x->worst]))
                x->worst = t;
    }
    worst_last = c[n - 1].worst;
    const char *mname = mode == 1 ? "strong" : "weak";
    if (!quiet) {
        char b[10][32];
        printf("@--- Scaling (%s%s; reference %s, %d rank%s) ---------------------\n", mname,
               detected ? ", detected" : "", ref->dir, ref->ranks, ref->ranks == 1 ? "" : "s");
        printf("%6s %10s %8s %8s %8s %8s %8s %8s %8s  %s\n", "Ranks", "Runtime_s", "LB", "CommE",
               "ParE", "CompSc", "GlobE", "ScaleE", "StepS", "Degrades most");
        for (int i = 0; i < n; i++) {
            const struct crun *x = &c[i];
            printf("%6d %10s %8s %8s %8s %8s %8s %8s %8s  %s\n", x->ranks,
                   fmt(b[0], 32, x->runtime_s), fmt(b[1], 32, x->lb), fmt(b[2], 32, x->ce),
                   fmt(b[3], 32, x->pe), fmt(b[4], 32, x->scal), fmt(b[5], 32, x->ge),
                   fmt(b[6], 32, x->speed_eff), fmt(b[7], 32, x->step_s),
                   x->worst >= 0 ? term_names[x->worst]
                   : i           ? "none"
                                 : "(reference)");
        }
        const struct crun *last = &c[n - 1];
        int known = 0;
        for (int t = 0; t < T_N; t++)
            known += isfinite(last->rel[t]);
        if (worst_last >= 0)
            printf("At %d ranks %s degrades most (%.4f of the reference's).\n", last->ranks,
                   term_names[worst_last], last->rel[worst_last]);
        else if (known)
            printf("At %d ranks no term degrades: %s at least the reference's.\n", last->ranks,
                   known == T_N ? "each is" : "each that could be computed is");
        else
            printf("At %d ranks the terms could not be computed against the reference.\n",
                   last->ranks);
        if (n > 1 && c[1].ranks == ref->ranks)
            printf("(ScaleE of a run with the reference's ranks is its speedup: the reference's"
                   " runtime over its own)\n");
        steps_text(c, n);
    }
    int rc = 0;
    if (json) {
        FILE *f = strcmp(json, "-") ? fopen(json, "w") : stdout;
        if (!f) {
            fprintf(stderr, "commscope compare: cannot write %s\n", json);
            rc = 3;
        } else {
            if (write_json(f, c, n, mname, detected, worst_last))
                rc = 3;
            if (f != stdout && fclose(f))
                rc = 3;
            if (rc)
                fprintf(stderr, "commscope compare: error writing %s\n", json);
        }
    }
    free(c);
    free(dirs);
    return rc;
}
