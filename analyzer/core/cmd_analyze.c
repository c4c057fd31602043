/*
 * `commscope analyze RUN_DIR|--from kineto FILE... [--json FILE] [--html FILE] [--events FILE]
 * [--perfetto FILE ...] [--quiet]`: the command line around the pipeline.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "hang.h"
#include "internal.h"
#include "outfile.h"
#include "wire.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: commscope analyze RUN_DIR [--json FILE] [--html FILE] [--events FILE]\n"
               "       commscope analyze --from kineto DIR|FILE... [the same options]\n"
               "                         [--perfetto FILE [--perfetto-window FROM:TO]\n"
               "                          [--perfetto-steps A:B] [--perfetto-ranks LIST]]\n"
               "                         [--steps-csv FILE] [--ranks-csv FILE] [--ops-csv FILE]\n"
               "                         [--pcap FILE...]\n"
               "                         [--hung] [--quiet]\n"
               "                         [--flops-per-step F | --params N --tokens-per-step T]\n"
               "                         [--samples-per-step S] [--gpu MODEL]\n"
               "                         [--precision P] [--peak-flops F]\n"
               "       commscope analyze --pcap FILE... [--json FILE] [--html FILE] [--quiet]\n"
               "\n"
               "Analyse the traces of a run: a text summary on stdout, and the reports asked\n"
               "for.\n"
               "\n"
               "options:\n"
               "  RUN_DIR        directory holding rank-NNNNN.cst trace files (and wire-HOST.csw\n"
               "                 capture files, read into the wire section)\n"
               "  --pcap FILE... also read these pcap/pcapng files (from any tool) into the wire\n"
               "                 section; without RUN_DIR, report the wire section only\n"
               "  --from kineto  read PyTorch profiler (Kineto) traces instead: one JSON file\n"
               "                 (.json or .json.gz) per rank, or directories of them\n"
               "  --json FILE    also write the JSON report to FILE ('-' for stdout)\n"
               "  --steps-csv FILE  every step's time and its parts to FILE (CSV); the\n"
               "                 JSON and HTML list at most 1000 steps\n"
               "  --ranks-csv FILE  every rank's figures to FILE (CSV); beyond 4096 ranks\n"
               "                 the JSON lists the ranks at the extremes (commscope run\n"
               "                 then writes ranks.csv beside it)\n"
               "  --ops-csv FILE  every (op, communicator) row to FILE (CSV); beyond 256\n"
               "                 communicators or 1024 rows the reports list the busiest\n"
               "                 and fold the others into one row per op (commscope run\n"
               "                 then writes ops.csv beside them)\n"
               "  --html FILE    also write the self-contained HTML report (charts) to FILE\n"
               "  --events FILE  write every event as CSV, times on rank 0's clock (ns)\n"
               "  --perfetto FILE  write a Chrome/Perfetto trace (open it in ui.perfetto.dev)\n"
               "  --perfetto-window FROM:TO  only calls within FROM..TO seconds after the run's\n"
               "                 start (TO may be empty: to the end)\n"
               "  --perfetto-ranks LIST  only these ranks, e.g. 0-3,8\n"
               "  --perfetto-steps A:B   only calls inside steps A..B of each rank\n"
               "                 (numbered from 0 as in the report; B may be empty: to the last)\n"
               "  --hung         the job is known to be stuck (no rank completes a call): give\n"
               "                 the hang diagnosis although its ranks still run (what\n"
               "                 commscope run --hang-timeout does)\n"
               "  --flops-per-step F  the model FLOPs of one step of the whole job: the\n"
               "                 report gives the achieved FLOP/s and the MFU (model FLOP\n"
               "                 utilisation) against the GPUs' peak\n"
               "  --params N --tokens-per-step T  the same with F = 6 x N x T (a dense\n"
               "                 transformer's forward and backward); T also gives tokens/s\n"
               "  --samples-per-step S  samples of one step of the job: samples/s\n"
               "  --gpu MODEL    the GPU model (e.g. H100-SXM, A100) instead of the one the\n"
               "                 traces name; the peak table: docs/metrics.md\n"
               "  --precision P  the peak to compare with: bf16 (default; fp16 on GPUs\n"
               "                 without bf16), fp16, tf32 or fp32\n"
               "  --peak-flops F the peak FLOP/s of one GPU instead of the table's\n"
               "                 (numbers take k, M, G or B, T, P: 7B, 312T, 1.5e15)\n"
               "  -q, --quiet    no text summary and no progress line\n"
               "  -h, --help     this text\n"
               "\n"
               "A progress line is shown on stderr while analysing, when stderr is a terminal.\n"
               "A warning gives the estimated size first when the Perfetto trace would exceed\n"
               "256 MB.\n"
               "\n"
               "examples:\n"
               "  commscope analyze ./commscope-20250101-120000\n"
               "  commscope analyze RUN --quiet --json report.json --html report.html\n"
               "  commscope analyze --from kineto traces/ --html report.html --perfetto t.json\n"
               "  commscope analyze RUN --perfetto trace.json --perfetto-window 10:12 \\\n"
               "                    --perfetto-ranks 0-7\n"
               "  commscope analyze RUN --perfetto steps.json --perfetto-steps 5:6\n"
               "  commscope analyze RUN --params 7B --tokens-per-step 4M --gpu H100-SXM\n"
               "\n"
               "exit status: 0 all input analysed, 1 analysed with problems (missing or invalid\n"
               "input, a report file not written), 2 usage error, 3 nothing could be analysed,\n"
               "4 the job hung or a rank ended before MPI_Finalize (the diagnosis leads the\n"
               "verdict)\n");
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "commscope analyze: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "; see 'commscope analyze --help'\n");
    return 2;
}

/* "FROM:TO" seconds, TO optional.  Returns 0 or -1. */
static int parse_window(const char *s, double *from, double *to)
{
    char *e;
    errno = 0;
    *from = strtod(s, &e);
    if (e == s || *e != ':' || errno || !(*from >= 0))
        return -1;
    s = e + 1;
    if (!*s) {
        *to = -1;
        return 0;
    }
    *to = strtod(s, &e);
    if (e == s || *e || errno || !(*to > *from))
        return -1;
    return 0;
}

/* "A:B" step indexes, B optional (to the last).  Returns 0 or -1. */
static int parse_steps(const char *s, int *from, int *to)
{
    char *e;
    errno = 0;
    long a = strtol(s, &e, 10), b = -1;
    if (e == s || *e != ':' || errno || a < 0 || a > 1000000000 || s[0] == '-' || s[0] == '+')
        return -1;
    s = e + 1;
    if (*s) {
        b = strtol(s, &e, 10);
        if (e == s || *e || errno || b < a || b > 1000000000 || s[0] == '+')
            return -1;
    }
    *from = (int)a;
    *to = (int)b;
    return 0;
}

/* A positive amount: a number with an optional k, M, G (or B, billions), T or P after it.
 * Returns 0 or -1. */
static int parse_amount(const char *s, double *v)
{
    char *e;
    errno = 0;
    double x = strtod(s, &e);
    if (e == s || errno || !isfinite(x) || !(x > 0))
        return -1;
    static const char units[] = "kMGBTP";
    static const double scale[] = {1e3, 1e6, 1e9, 1e9, 1e12, 1e15};
    if (*e) {
        const char *u = strchr(units, *e);
        if (!u || e[1])
            return -1;
        x *= scale[u - units];
    }
    if (!isfinite(x))
        return -1;
    *v = x;
    return 0;
}

/* The model FLOPs options (--flops-per-step ...) at argv[i]: 1 taken (i advanced), 0 not one of
 * them, 2 after a usage error was said. */
static int flops_option(int argc, char **argv, int *i, struct cs_flops_opts *fo)
{
    static const struct {
        const char *name;
        size_t off;
    } amounts[] = {
        {"--flops-per-step", offsetof(struct cs_flops_opts, flops_per_step)},
        {"--params", offsetof(struct cs_flops_opts, params)},
        {"--tokens-per-step", offsetof(struct cs_flops_opts, tokens_per_step)},
        {"--samples-per-step", offsetof(struct cs_flops_opts, samples_per_step)},
        {"--peak-flops", offsetof(struct cs_flops_opts, peak_flops)},
    };
    const char *a = argv[*i];
    for (size_t k = 0; k < sizeof amounts / sizeof amounts[0]; k++) {
        if (strcmp(a, amounts[k].name) != 0)
            continue;
        if (*i + 1 >= argc)
            return usage_error("%s needs a number", a);
        const char *v = argv[++*i];
        if (parse_amount(v, (double *)((char *)fo + amounts[k].off))) {
            fprintf(stderr,
                    "commscope analyze: %s '%s': expected a positive number, optionally with k, "
                    "M, G, B, T or P after it (e.g. 7B, 1.5e15); see 'commscope analyze "
                    "--help'\n",
                    a, v);
            return 2;
        }
        return 1;
    }
    if (strcmp(a, "--gpu") == 0 || strcmp(a, "--precision") == 0) {
        if (*i + 1 >= argc)
            return usage_error("%s needs an argument", a);
        const char *v = argv[++*i];
        if (a[2] == 'g') {
            fo->gpu = v;
            return 1;
        }
        if (strcmp(v, "bf16") && strcmp(v, "fp16") && strcmp(v, "tf32") && strcmp(v, "fp32"))
            return usage_error("--precision '%s': expected bf16, fp16, tf32 or fp32", v);
        fo->precision = v;
        return 1;
    }
    return 0;
}

/* The model FLOPs options that need others; 0, or 2 after saying why. */
static int flops_check(const struct cs_flops_opts *fo)
{
    int rates = fo->flops_per_step > 0 || fo->params > 0;
    if (fo->flops_per_step > 0 && fo->params > 0)
        return usage_error("%s", "give --flops-per-step or --params with --tokens-per-step, not "
                                 "both");
    if (fo->params > 0 && !(fo->tokens_per_step > 0))
        return usage_error("%s", "--params needs --tokens-per-step (F = 6 x params x tokens)");
    if (!rates && (fo->peak_flops > 0 || fo->gpu || fo->precision))
        return usage_error("%s", "--gpu, --precision and --peak-flops need --flops-per-step, or "
                                 "--params with --tokens-per-step");
    return 0;
}

/* Write one report file with fn, whole or not at all; returns 0, or 1 after saying why on
 * stderr. */
static int write_report(const char *what, const char *path, const struct cs_report *rep,
                        int (*fn)(const struct cs_report *, FILE *))
{
    struct cs__outfile o;
    char err[PATH_MAX + 128];
    if (cs__out_open(&o, path, err, sizeof err) != 0) {
        fprintf(stderr, "commscope analyze: the %s report: %s\n", what, err);
        return 1;
    }
    errno = 0;
    if (fn(rep, o.f) != 0) {
        int e = errno;
        cs__out_abort(&o);
        fprintf(stderr, "commscope analyze: error writing the %s report %s: %s; not written\n",
                what, path, e ? strerror(e) : "write error");
        return 1;
    }
    if (cs__out_commit(&o, err, sizeof err) != 0) {
        fprintf(stderr, "commscope analyze: the %s report: %s\n", what, err);
        return 1;
    }
    return 0;
}

/* Finish a streamed output (events CSV, Perfetto) after the analysis; 0 or 1 (said why). */
static int finish_stream(struct cs__outfile *o, int keep)
{
    if (!o->f)
        return 0;
    if (!keep) {
        cs__out_abort(o);
        return 0;
    }
    char err[PATH_MAX + 128];
    if (cs__out_commit(o, err, sizeof err) == 0)
        return 0;
    fprintf(stderr, "commscope analyze: %s\n", err);
    return 1;
}

int cs_cmd_analyze(int argc, char **argv)
{
    const char *dir = NULL, *json = NULL, *events = NULL, *html = NULL, *from = NULL;
    const char *steps_csv = NULL, *ranks_csv = NULL, *ranks_csv_capped = NULL;
    const char *ops_csv = NULL, *ops_csv_capped = NULL;
    /* --from kineto takes several inputs (argv outlives them) */
    const char *inputs[256];
    int ninputs = 0;
    struct cs_perfetto_opts po = {0};
    int quiet = 0, hung = 0;
    struct cs_flops_opts fo = {0};
    char **pcaps = NULL;
    int npcaps = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--pcap") == 0) {
            if (i + 1 >= argc || argv[i + 1][0] == '-')
                return usage_error("%s", "--pcap needs one or more files");
            /* The files up to the next option; a directory among them is the RUN_DIR.  The
             * list reuses argv's slots (no allocation): the files move to its front. */
            pcaps = argv + i + 1;
            while (i + 1 < argc && argv[i + 1][0] != '-') {
                char *x = argv[++i];
                if (!dir && cs__is_dir(x))
                    dir = x;
                else
                    pcaps[npcaps++] = x;
            }
            continue;
        }
        int fl = flops_option(argc, argv, &i, &fo);
        if (fl == 2)
            return 2;
        if (fl)
            continue;
        const char **slot = NULL;
        if (strcmp(a, "--json") == 0)
            slot = &json;
        else if (strcmp(a, "--events") == 0)
            slot = &events;
        else if (strcmp(a, "--html") == 0)
            slot = &html;
        else if (strcmp(a, "--steps-csv") == 0)
            slot = &steps_csv;
        else if (strcmp(a, "--ranks-csv") == 0)
            slot = &ranks_csv;
        else if (strcmp(a, "--ranks-csv-capped") == 0) /* commscope run's: only when capped */
            slot = &ranks_csv_capped;
        else if (strcmp(a, "--ops-csv") == 0)
            slot = &ops_csv;
        else if (strcmp(a, "--ops-csv-capped") == 0) /* commscope run's: only when folded */
            slot = &ops_csv_capped;
        else if (strcmp(a, "--perfetto") == 0)
            slot = &po.path;
        else if (strcmp(a, "--perfetto-ranks") == 0)
            slot = &po.ranks;
        else if (strcmp(a, "--from") == 0)
            slot = &from;
        if (slot) {
            if (i + 1 >= argc)
                return usage_error("%s needs an argument", a);
            *slot = argv[++i];
        } else if (strcmp(a, "--perfetto-window") == 0) {
            if (i + 1 >= argc)
                return usage_error("%s needs FROM:TO (seconds)", a);
            po.window = 1;
            if (parse_window(argv[++i], &po.from_s, &po.to_s))
                return usage_error("--perfetto-window '%s': expected FROM:TO seconds after the "
                                   "run's start, FROM >= 0, TO > FROM or empty",
                                   argv[i]);
        } else if (strcmp(a, "--perfetto-steps") == 0) {
            if (i + 1 >= argc)
                return usage_error("%s needs A:B (step numbers)", a);
            po.steps = 1;
            if (parse_steps(argv[++i], &po.step_from, &po.step_to))
                return usage_error("--perfetto-steps '%s': expected A:B step numbers from 0, "
                                   "B >= A or empty",
                                   argv[i]);
        } else if (strncmp(a, "--json=", 7) == 0 && a[7]) {
            json = a + 7;
        } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
            quiet = 1;
        } else if (strcmp(a, "--hung") == 0) {
            hung = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option '%s'", a);
        } else if (!dir) {
            dir = a;
            inputs[ninputs++] = a;
        } else if (from) {
            if (ninputs == (int)(sizeof inputs / sizeof inputs[0]))
                return usage_error("%s: too many inputs (give their directory instead)", a);
            inputs[ninputs++] = a;
        } else {
            fprintf(stderr, "commscope analyze: more than one run directory ('%s' and '%s')\n", dir,
                    a);
            usage(stderr);
            return 2;
        }
    }
    if (flops_check(&fo))
        return 2;
    int want_flops =
        fo.flops_per_step > 0 || fo.params > 0 || fo.tokens_per_step > 0 || fo.samples_per_step > 0;
    cs__wire_set_pcaps(pcaps, npcaps);
    if (!dir && npcaps) {
        /* capture files alone: the reports of traces cannot be made */
        const char *need = events                                         ? "--events"
                           : po.path || po.window || po.steps || po.ranks ? "--perfetto"
                           : from                                         ? "--from"
                           : want_flops                                   ? "--flops-per-step"
                                                                          : NULL;
        if (need)
            return usage_error("%s needs traces (a RUN_DIR); with --pcap files alone only --json, "
                               "--html and --quiet apply",
                               need);
        return cs__analyze_wire_only(json, html, quiet);
    }
    if (!dir)
        return usage_error("%s", from ? "no Kineto trace given" : "no run directory given");
    if (from && strcmp(from, "kineto") != 0)
        return usage_error("--from '%s': the only format known is 'kineto'", from);
    if ((po.window || po.ranks || po.steps) && !po.path)
        return usage_error("%s", "--perfetto-window, --perfetto-steps and --perfetto-ranks need "
                                 "--perfetto FILE");
    char err[1024] = "";
    if (po.ranks && cs__perfetto_parse_ranks(po.ranks, NULL, 0, err, sizeof err))
        return usage_error("%s", err);

    cs__out_cleanup_on_signals();
    /* The streamed outputs are written while the traces are read: through temporary files too,
     * renamed into place once the analysis is done. */
    struct cs__outfile evo = {0}, pfo = {0};
    if (events && cs__out_open(&evo, events, err, sizeof err) != 0) {
        fprintf(stderr, "commscope analyze: events: %s\n", err);
        return 3;
    }
    if (po.path && cs__out_open(&pfo, po.path, err, sizeof err) != 0) {
        fprintf(stderr, "commscope analyze: the Perfetto trace: %s\n", err);
        cs__out_abort(&evo);
        return 3;
    }
    err[0] = '\0';
    po.out = pfo.f;
    struct cs_analysis_opts ao = {.events_out = evo.f,
                                  .perfetto = po.path ? &po : NULL,
                                  .progress_out = !quiet && isatty(2) ? stderr : NULL,
                                  .timeline = html != NULL,
                                  .hung = hung,
                                  .flops = want_flops ? &fo : NULL};
    struct cs_analysis *an = NULL;
    int rc;
    if (from) {
        rc = cs_analysis_import_kineto(&an, inputs, ninputs, &ao, err, sizeof err);
    } else {
        rc = cs_analysis_open(&an, dir, &ao, err, sizeof err);
        if (!rc)
            rc = cs_analysis_run(an);
    }
    const struct cs_report *rep = an ? cs_analysis_report(an) : &(struct cs_report){0};
    size_t nproblems = an ? cs_analysis_nproblems(an) : 0;
    int hard = !an || rc == CS_ENOENT || rc == CS_EIO || (rc && !cs_analysis_nranks(an));
    /* Nothing analysed: no empty events or Perfetto file is left behind. */
    int keep = !hard && rep->ranks_found != 0;
    int stream_bad = finish_stream(&evo, keep) | finish_stream(&pfo, keep);
    for (size_t i = 0; i < nproblems; i++)
        fprintf(stderr, "commscope analyze: %s\n", cs_analysis_problem(an, i));
    if (hard) {
        fprintf(stderr, "commscope analyze: %s\n", err[0] ? err : cs_strerror(rc));
        cs_analysis_free(an);
        return 3;
    }
    int status = rep->ranks_found == 0             ? 3
                 : cs__hang_found(rep)             ? 4
                 : (rc || nproblems || stream_bad) ? 1
                                                   : 0;
    if (status == 3) {
        fprintf(stderr, "commscope analyze: nothing to analyse in %s\n", dir);
    } else {
        if (!quiet)
            cs__report_text(rep, stdout);
        if (json && write_report("JSON", json, rep, cs__report_json))
            status = status ? status : 1;
        if (html && write_report("HTML", html, rep, cs__report_html))
            status = status ? status : 1;
        if (steps_csv && write_report("step CSV", steps_csv, rep, cs__report_steps_csv))
            status = status ? status : 1;
        if (!ranks_csv && rep->rank_listed)
            ranks_csv = ranks_csv_capped;
        if (ranks_csv && write_report("rank CSV", ranks_csv, rep, cs__report_ranks_csv))
            status = status ? status : 1;
        if (!ops_csv && rep->ops_all)
            ops_csv = ops_csv_capped;
        if (ops_csv && write_report("op CSV", ops_csv, rep, cs__report_ops_csv))
            status = status ? status : 1;
        fflush(stdout);
    }
    cs_analysis_free(an);
    return status;
}
