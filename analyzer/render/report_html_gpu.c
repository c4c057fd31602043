/*
 * The HTML report's GPU overlap (section "Overlap of communication with compute", runs with GPU
 * records): how much NCCL kernel time compute kernels hid, in all and per GPU, as a sentence, one
 * bar per GPU (compute kernels, NCCL kernels overlapped, NCCL kernels exposed) and a table.
 * Formatting only: the numbers are the GPU timeline's (gpu.c, docs/metrics.md "GPU timeline").
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "gpu.h"
#include "internal.h"

#define GPU_BARS 64 /* one bar per GPU up to this many; the table holds them all */

static void ratio(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.4f", v);
    else
        fputs("&ndash;", f);
}

void cs__report_gpu_html(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_gpu *g = rep->gpu;
    if (!g)
        return;
    fputs("<h3 id=\"gpu-overlap\">On the GPU</h3>\n", f);
    fprintf(f,
            "<p>NCCL kernels ran %.6f s (union of their intervals per GPU, summed over %zu "
            "GPU%s); compute kernels ran during %.6f s of it (overlap ratio ",
            g->comm_s, g->ndevs, g->ndevs == 1 ? "" : "s", g->overlapped_s);
    ratio(f, g->overlap_ratio);
    fprintf(f, "), so %.6f s of NCCL kernel time was exposed.</p>\n", g->exposed_s);
    size_t nb = g->ndevs < GPU_BARS ? g->ndevs : GPU_BARS;
    double max = 0;
    for (size_t i = 0; i < nb; i++) {
        const struct cs_report_gpu_dev *d = &g->devs[i];
        double w = d->compute_s + d->exposed_s;
        if (w > max)
            max = w;
    }
    if (nb && max > 0) {
        static const char *const col[3] = {"#4e79a7", "#76b7b2", "#f28e2b"};
        static const char *const what[3] = {"compute kernels, no NCCL kernel running",
                                            "NCCL kernels overlapped by compute kernels",
                                            "NCCL kernels exposed"};
        fputs("<p class=\"legend\">", f);
        for (int k = 0; k < 3; k++)
            fprintf(f, "<span><i style=\"background:%s\"></i>%s</span> ", col[k], what[k]);
        fputs("</p>\n", f);
        int rh = nb <= 32 ? 18 : 13, lw = 160, pw = 600, h = (int)nb * rh + 24;
        fprintf(f,
                "<svg id=\"gpubars\" class=\"chart\" width=\"%d\" height=\"%d\" "
                "viewBox=\"0 0 %d %d\" role=\"img\">\n",
                lw + pw + 90, h, lw + pw + 90, h);
        for (size_t i = 0; i < nb; i++) {
            const struct cs_report_gpu_dev *d = &g->devs[i];
            double seg[3] = {d->compute_s - d->overlapped_s, d->overlapped_s, d->exposed_s};
            fprintf(f,
                    "<g transform=\"translate(0,%zu)\"><text x=\"%d\" y=\"%d\" "
                    "text-anchor=\"end\">rank %d GPU %" PRId32 "</text>",
                    i * (size_t)rh, lw - 6, rh - 3, d->rank, d->device);
            double x = lw;
            for (int k = 0; k < 3; k++) {
                double w = seg[k] > 0 ? seg[k] / max * pw : 0;
                fprintf(f,
                        "<rect x=\"%.2f\" y=\"1\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
                        "<title>rank %d GPU %" PRId32 ": %s %.6f s</title></rect>",
                        x, w, rh - 2, col[k], d->rank, d->device, what[k], seg[k] > 0 ? seg[k] : 0);
                x += w;
            }
            fprintf(f, "<text x=\"%.2f\" y=\"%d\">%.6f s</text></g>\n", x + 4, rh - 3,
                    d->compute_s + d->exposed_s);
        }
        fputs("</svg>\n", f);
        if (nb < g->ndevs)
            fprintf(f, "<p>The first %zu of %zu GPUs are drawn; the table has all.</p>\n", nb,
                    g->ndevs);
    }
    int fold = g->ndevs > GPU_BARS;
    if (fold)
        fprintf(f, "<details><summary>%zu GPUs</summary>\n", g->ndevs);
    fputs("<table id=\"gpu-devices\"><tr><th>rank</th><th>GPU</th><th>compute kernels (s)</th>"
          "<th>NCCL kernels (s)</th><th>overlapped (s)</th><th>exposed (s)</th>"
          "<th>overlap ratio</th></tr>\n",
          f);
    for (size_t i = 0; i < g->ndevs; i++) {
        const struct cs_report_gpu_dev *d = &g->devs[i];
        fprintf(f,
                "<tr><td>%d</td><td>%" PRId32 "</td><td>%.6f</td><td>%.6f</td><td>%.6f</td>"
                "<td>%.6f</td><td>",
                d->rank, d->device, d->compute_s, d->comm_s, d->overlapped_s, d->exposed_s);
        ratio(f, d->overlap_ratio);
        fputs("</td></tr>\n", f);
    }
    fputs(fold ? "</table></details>\n" : "</table>\n", f);
}

/* ---- the representative step's GPU lanes (the timeline of report_html.c) ---- */

#define LANE_H 9
static const char *const gcol[3] = {"#4e79a7", "#76b7b2", "#f28e2b"};
static const char *const gwhat[3] = {"compute kernels", "NCCL kernels overlapped by compute",
                                     "NCCL kernels exposed"};

static void esc_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

void cs__report_tl_gpu_legend(const struct cs_report_timeline *tl, FILE *f)
{
    fprintf(f,
            "<p>On ranks with a GPU timeline the host bar (grey outside traced calls) is "
            "followed by the GPU's lanes for the same step window: compute kernels, then one lane "
            "per communicator with its NCCL kernels, split into the part a compute kernel "
            "overlapped and the exposed rest. %d of the %zu rows have GPU lanes; the table "
            "below gives each row's numbers, which are the step budget's for this step.</p>\n",
            tl->gpu_rows, tl->nrows);
    fputs("<p class=\"legend\">", f);
    fprintf(f, "<span><i style=\"background:%s\"></i>host outside traced calls</span> ",
            CS_HTML_HOST_OUTSIDE);
    for (int k = 0; k < 3; k++)
        fprintf(f, "<span><i style=\"background:%s\"></i>%s</span> ", gcol[k], gwhat[k]);
    fputs("</p>\n", f);
}

int cs__report_tl_gpu_height(const struct cs_report_tl_row *r)
{
    return r->gpu ? (int)(1 + r->nlanes) * LANE_H + 4 : 0;
}

int cs__report_tl_gpu_svg(FILE *f, const struct cs_report_tl_row *r, int lw, int pw, double W,
                          double y)
{
    if (!r->gpu)
        return 0;
    fprintf(f, "<g class=\"tlgpu\" data-rank=\"%d\">", r->rank);
    for (size_t l = 0; l <= r->nlanes; l++) {
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" class=\"small\">", lw - 6,
                y + (double)l * LANE_H + LANE_H - 1);
        if (l == 0)
            fputs("GPU compute", f);
        else
            esc_text(f, r->lane_comm[l - 1]);
        fputs("</text>", f);
    }
    for (size_t i = 0; i < r->ngseg; i++) {
        const struct cs_report_tl_gseg *s = &r->gseg[i];
        int k = s->kind < 3 ? s->kind : 0;
        double x = lw + pw * s->t0_s / W, w = pw * (s->t1_s - s->t0_s) / W;
        if (w < 0.3)
            w = 0.3;
        fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>",
                x, y + (double)s->lane * LANE_H, w, LANE_H - 2, gcol[k]);
        fprintf(f, "rank %d %s", r->rank, gwhat[k]);
        if (s->lane > 0 && s->lane <= r->nlanes) {
            fputs(" (", f);
            esc_text(f, r->lane_comm[s->lane - 1]);
            fputc(')', f);
        }
        fprintf(f, " %.6f-%.6f s</title></rect>", s->t0_s, s->t1_s);
    }
    fprintf(f, "%s</g>\n",
            r->gtruncated ? "<text x=\"842\" y=\"0\" class=\"small\">(truncated)</text>" : "");
    return cs__report_tl_gpu_height(r);
}

void cs__report_tl_gpu_table(const struct cs_report_timeline *tl, FILE *f)
{
    fputs("<table id=\"timeline-gpu\"><tr><th>rank</th><th>step (s)</th><th>GPU compute (s)</th>"
          "<th>NCCL kernels (s)</th><th>overlapped (s)</th><th>exposed (s)</th>"
          "<th>overlap ratio</th><th>GPU idle (s)</th></tr>\n",
          f);
    for (size_t i = 0; i < tl->nrows; i++) {
        const struct cs_report_tl_row *r = &tl->rows[i];
        if (!r->gpu)
            continue;
        fprintf(f,
                "<tr><td>%d</td><td>%.6f</td><td>%.6f</td><td>%.6f</td><td>%.6f</td><td>%.6f</td>"
                "<td>",
                r->rank, r->end_s - r->begin_s, r->gpu_compute_s, r->gpu_comm_s,
                r->gpu_overlapped_s, r->gpu_exposed_s);
        ratio(f, r->gpu_comm_s > 0 ? r->gpu_overlapped_s / r->gpu_comm_s : NAN);
        fprintf(f, "</td><td>%.6f</td></tr>\n", r->gpu_idle_s);
    }
    fputs("</table>\n", f);
    if ((size_t)tl->ranks_total > tl->nrows)
        fprintf(f, "<p>%zu of %d ranks are shown (evenly spaced, the straggler included).</p>\n",
                tl->nrows, tl->ranks_total);
}
