/*
 * The step phases section (phases.h) in text, JSON and HTML.  Formatting only: the numbers are
 * phases.c's (docs/metrics.md "Step phases").
 */
#include <math.h>
#include <stdio.h>

#include "json.h"
#include "phases.h"

static const char *ms(char *b, size_t n, double s)
{
    if (!isfinite(s))
        return "-";
    snprintf(b, n, "%.3f", s * 1e3);
    return b;
}

void cs__phases_text(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_phases *P = rep->phases;
    if (!P)
        return;
    char a[32];
    fprintf(out, "\n@--- Step phases %s\n", "-----------------------------------------------");
    fprintf(out, "%-5s %6s %10s", "rank", "steps", "step_ms");
    for (int i = 0; i < CS_PHASE_N; i++)
        fprintf(out, " %10s", cs_phase_names[i]);
    fputs("   (ms per step; comm_ms inside each, gpu_ms launched in each below)\n", out);
    for (size_t r = 0; r < P->nranks; r++) {
        const struct cs_report_phase_rank *x = &P->ranks[r];
        double n = (double)x->steps;
        fprintf(out, "%-5d %6llu %10s", x->rank, (unsigned long long)x->steps,
                ms(a, sizeof a, x->step_s / n));
        for (int i = 0; i < CS_PHASE_N; i++)
            fprintf(out, " %10s", ms(a, sizeof a, x->time_s[i] / n));
        fputc('\n', out);
        if (isfinite(x->comm_s[0])) {
            fprintf(out, "%-5s %6s %10s", "", "", "comm_ms");
            for (int i = 0; i < CS_PHASE_N; i++)
                fprintf(out, " %10s", ms(a, sizeof a, x->comm_s[i] / n));
            fputc('\n', out);
        }
        if (isfinite(x->gpu_s[0])) {
            fprintf(out, "%-5s %6s %10s", "", "", "gpu_ms");
            for (int i = 0; i < CS_PHASE_N; i++)
                fprintf(out, " %10s", ms(a, sizeof a, x->gpu_s[i] / n));
            fprintf(out, "   unplaced %s ms in all\n", ms(a, sizeof a, x->gpu_unplaced_s));
        }
        if (isfinite(x->gpu_exposed_comm_s[0])) {
            fprintf(out, "%-5s %6s %10s", "", "", "exposed");
            for (int i = 0; i < CS_PHASE_N; i++)
                fprintf(out, " %10s", ms(a, sizeof a, x->gpu_exposed_comm_s[i] / n));
            fputs("   (GPU communication no compute covered)\n", out);
        }
    }
    fprintf(out, "%-36s %-10s %8s %12s\n", "annotation", "phase", "ranges", "time_ms");
    for (size_t i = 0; i < P->nnames; i++) {
        const struct cs_report_phase_name *x = &P->names[i];
        fprintf(out, "%-36s %-10s %8llu %12s\n", x->name, cs_phase_names[x->phase],
                (unsigned long long)x->count, ms(a, sizeof a, x->time_s));
    }
    fprintf(out, "(a phase: the innermost open annotation that names one; names%s%s)\n",
            P->patterns[0] ? " from COMMSCOPE_PHASE_NVTX, then the defaults: " : ": the defaults",
            P->patterns);
}

void cs__phases_json(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_phases *P = rep->phases;
    if (!P)
        return;
    struct cs__jw w = {.f = out, .depth = 1};
    cs__jw_open(&w, "phases", '{');
    cs__jw_str_or_null(&w, "patterns", P->patterns);
    cs__jw_open(&w, "ranks", '[');
    for (size_t r = 0; r < P->nranks; r++) {
        const struct cs_report_phase_rank *x = &P->ranks[r];
        if (!cs_report_rank_listed(rep, x->rank))
            continue;
        cs__jw_open(&w, NULL, '{');
        cs__jw_int(&w, "rank", x->rank);
        cs__jw_u64(&w, "steps", x->steps);
        cs__jw_num(&w, "step_s", x->step_s);
        cs__jw_open(&w, "time_s", '{');
        for (int i = 0; i < CS_PHASE_N; i++)
            cs__jw_num(&w, cs_phase_names[i], x->time_s[i]);
        cs__jw_close(&w, '}');
        cs__jw_open(&w, "comm_s", '{');
        for (int i = 0; i < CS_PHASE_N; i++)
            cs__jw_num(&w, cs_phase_names[i], x->comm_s[i]);
        cs__jw_close(&w, '}');
        cs__jw_open(&w, "gpu_s", '{');
        for (int i = 0; i < CS_PHASE_N; i++)
            cs__jw_num(&w, cs_phase_names[i], x->gpu_s[i]);
        cs__jw_close(&w, '}');
        cs__jw_num(&w, "gpu_unplaced_s", x->gpu_unplaced_s);
        cs__jw_open(&w, "gpu_exposed_comm_s", '{');
        for (int i = 0; i < CS_PHASE_N; i++)
            cs__jw_num(&w, cs_phase_names[i], x->gpu_exposed_comm_s[i]);
        cs__jw_close(&w, '}');
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_open(&w, "names", '[');
    for (size_t i = 0; i < P->nnames; i++) {
        const struct cs_report_phase_name *x = &P->names[i];
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "name", x->name);
        cs__jw_str(&w, "phase", cs_phase_names[x->phase]);
        cs__jw_u64(&w, "ranges", x->count);
        cs__jw_num(&w, "time_s", x->time_s);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_close(&w, '}');
}

void cs__phases_html(const struct cs_report *rep, FILE *f)
{
    static const char *const colour[CS_PHASE_N] = {"#8c6bb1", "#4c72b0", "#dd8452", "#55a868",
                                                   "#bbbbbb"};
    const struct cs_report_phases *P = rep->phases;
    if (!P)
        return;
    char a[32];
    fputs("<p>Each rank's mean step split by the annotation open on it: the innermost one that "
          "names a phase decides, none is <i>other</i>.</p>\n<div class=\"legend\">",
          f);
    for (int i = 0; i < CS_PHASE_N; i++)
        fprintf(f, "<span style=\"background:%s\">&nbsp;&nbsp;</span> %s ", colour[i],
                cs_phase_names[i]);
    fputs("</div>\n<table class=\"facts\" id=\"phases\">\n<tr><th>rank</th><th>step ms</th>"
          "<th class=\"l\">phases</th></tr>\n",
          f);
    for (size_t r = 0; r < P->nranks; r++) {
        const struct cs_report_phase_rank *x = &P->ranks[r];
        double n = (double)x->steps;
        fprintf(f,
                "<tr><td>%d</td><td>%s</td><td class=\"l\"><div style=\"display:flex;"
                "width:40em;height:1.2em\">",
                x->rank, ms(a, sizeof a, x->step_s / n));
        for (int i = 0; i < CS_PHASE_N; i++) {
            double share = x->step_s > 0 ? x->time_s[i] / x->step_s : 0;
            if (share > 0)
                fprintf(f, "<div style=\"width:%.2f%%;background:%s\" title=\"%s %s ms\"></div>",
                        100 * share, colour[i], cs_phase_names[i],
                        ms(a, sizeof a, x->time_s[i] / n));
        }
        fputs("</div></td></tr>\n", f);
    }
    fputs("</table>\n", f);
    /* GPU ranks: the GPU time each phase launched and the communication no compute covered. */
    int gpu = 0;
    for (size_t r = 0; r < P->nranks; r++)
        gpu |= isfinite(P->ranks[r].gpu_s[0]) || isfinite(P->ranks[r].gpu_exposed_comm_s[0]);
    if (gpu) {
        fputs("<p>GPU ms per step: the kernels, copies and sets each phase launched (by "
              "correlation), and the NCCL time no compute kernel covered while the rank was in "
              "the phase.</p>\n<table class=\"facts\"><tr><th>rank</th><th></th>",
              f);
        for (int i = 0; i < CS_PHASE_N; i++)
            fprintf(f, "<th>%s</th>", cs_phase_names[i]);
        fputs("</tr>\n", f);
        for (size_t r = 0; r < P->nranks; r++) {
            const struct cs_report_phase_rank *x = &P->ranks[r];
            double n = (double)x->steps;
            const double *row[2] = {x->gpu_s, x->gpu_exposed_comm_s};
            static const char *const what[2] = {"launched", "exposed comm"};
            for (int k = 0; k < 2; k++) {
                if (!isfinite(row[k][0]))
                    continue;
                fprintf(f, "<tr><td>%d</td><td>%s</td>", x->rank, what[k]);
                for (int i = 0; i < CS_PHASE_N; i++)
                    fprintf(f, "<td>%s</td>", ms(a, sizeof a, row[k][i] / n));
                fputs("</tr>\n", f);
            }
        }
        fputs("</table>\n", f);
    }
    fputs("<table class=\"facts\"><tr><th class=\"l\">annotation</th><th>phase</th>"
          "<th>ranges</th><th>time ms</th></tr>\n",
          f);
    for (size_t i = 0; i < P->nnames; i++) {
        const struct cs_report_phase_name *x = &P->names[i];
        fputs("<tr><td class=\"l\">", f);
        cs__html_esc(f, x->name);
        fprintf(f, "</td><td>%s</td><td>%llu</td><td>%s</td></tr>\n", cs_phase_names[x->phase],
                (unsigned long long)x->count, ms(a, sizeof a, x->time_s));
    }
    fputs("</table>\n", f);
}
