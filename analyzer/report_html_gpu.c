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
