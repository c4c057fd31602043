/*
 * The HTML report: one self-contained file (inline CSS, inline SVG charts, a few lines of inline
 * script for sorting; no network, no fonts, no external files).  Formatting only: every number
 * and every grouping decision comes from the report model (internal.h, views.h).
 *
 * Sections come from one table, so analyses added later (steps, parallelism groups, what-if) are
 * one function and one row; until their model exists they say what is missing.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flops.h"
#include "phases.h"
#include "resources.h"
#include "gpu.h"
#include "hang.h"
#include "internal.h"
#include "nodes.h"
#include "wire.h"
#include "steps.h"

static const char *const seg_name[CS_SEG_N] = {
    [CS_SEG_COMPUTE] = "compute",         [CS_SEG_COLL] = "collectives",
    [CS_SEG_P2P] = "point-to-point",      [CS_SEG_COMPLETION] = "wait/test calls",
    [CS_SEG_WAIT] = "waiting for others",
};
static const char *const seg_color[CS_SEG_N] = {
    [CS_SEG_COMPUTE] = "#4e79a7",    [CS_SEG_COLL] = "#f28e2b", [CS_SEG_P2P] = "#59a14f",
    [CS_SEG_COMPLETION] = "#b07aa1", [CS_SEG_WAIT] = "#e15759",
};
const char *const cs__html_palette[CS__HTML_PALETTE] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                                        "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                                        "#9c755f", "#bab0ac"};

void cs__html_esc(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            /* Names come from the traced machines: keep the page valid whatever they hold. */
            if (*p < 0x20 || *p >= 0x7f)
                fprintf(f, "&#%u;", *p < 0x20 ? 0xfffdu : (unsigned)*p);
            else
                fputc(*p, f);
        }
    }
}

static inline void esc(FILE *f, const char *s)
{
    cs__html_esc(f, s);
}

/* A number with fmt, or an en dash when it has no value. */
void cs__html_num(FILE *f, const char *fmt, double v)
{
    if (isfinite(v))
        fprintf(f, fmt, v);
    else
        fputs("&ndash;", f);
}

static inline void num(FILE *f, const char *fmt, double v)
{
    cs__html_num(f, fmt, v);
}

void cs__html_td(FILE *f, const char *s)
{
    fputs("<td>", f);
    cs__html_esc(f, s);
    fputs("</td>", f);
}

void cs__html_td_num(FILE *f, const char *fmt, double v)
{
    fputs("<td>", f);
    cs__html_num(f, fmt, v);
    fputs("</td>", f);
}

static void na(FILE *f, const char *why)
{
    fputs("<p class=\"na\">Not available in this report: ", f);
    esc(f, why);
    fputs("</p>\n", f);
}

static double clamp0(double v)
{
    return isfinite(v) && v > 0 ? v : 0;
}

/* ---- sections ---- */

static void sec_verdict(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_views *v = rep->views;
    if (!v || !v->nfindings) {
        na(f, rep->nranks ? "the charts and verdict could not be computed"
                          : "no rank could be analysed");
        return;
    }
    static const char *const evidence[] = {
        [CS_FIND_STRAGGLER] = "stragglers", [CS_FIND_NO_STRAGGLER] = "stragglers",
        [CS_FIND_COMM_SHARE] = "breakdown", [CS_FIND_IMBALANCE] = "ranks",
        [CS_FIND_BALANCED] = "efficiency",  [CS_FIND_INCOMPLETE] = "facts",
        [CS_FIND_NO_COMM] = "ops",          [CS_FIND_GRAD_SYNC] = "steps",
        [CS_FIND_GPU_COMM] = "overlap",     [CS_FIND_P2P_WAIT] = "steps",
        [CS_FIND_RES_CPU] = "resources",    [CS_FIND_RES_GPU] = "resources",
    };
    fputs("<ul class=\"verdict\">\n", f);
    static char hs[CS__HANG_MAX][CS__HANG_N];
    size_t nh = cs__hang_sentences(rep, &hs[0][0], CS__HANG_N, CS__HANG_MAX);
    for (size_t i = 0; i < nh; i++) {
        fputs("<li>", f);
        esc(f, hs[i]);
        fputs(" <a href=\"#hang\">evidence</a></li>\n", f);
    }
    for (size_t i = 0; i < v->nfindings; i++) {
        char buf[512];
        const struct cs_report_finding *x = &v->findings[i];
        fputs("<li>", f);
        esc(f, cs__finding_sentence(x, buf, sizeof buf));
        fprintf(f, " <a href=\"#%s\">evidence</a></li>\n", evidence[x->kind]);
    }
    char wb[CS__WIRE_SENTENCE];
    for (size_t i = 0; rep->wire && i < rep->wire->nwarnings; i++)
        if (cs__wire_verdict_sentence(rep, i, wb, sizeof wb)) {
            fputs("<li>", f);
            esc(f, wb);
            fputs(" <a href=\"#wire\">evidence</a></li>\n", f);
        }
    fputs("</ul>\n", f);
}

#define REST_COLOR "#d9d9d9"
#define REST_NAME "no kernel and no MPI call (ranks with GPU records)"

static void legend(FILE *f, int rest)
{
    fputs("<p class=\"legend\">", f);
    for (int s = 0; s < CS_SEG_N; s++)
        fprintf(f, "<span><i style=\"background:%s\"></i>%s</span> ", seg_color[s], seg_name[s]);
    if (rest)
        fprintf(f, "<span><i style=\"background:%s\"></i>%s</span> ", REST_COLOR, REST_NAME);
    fputs("</p>\n", f);
}

static void sec_breakdown(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_views *v = rep->views;
    if (!v || !v->nbars) {
        na(f, "no rank was analysed");
        return;
    }
    if (strcmp(v->bars_by, "rank") != 0)
        fprintf(f, "<p>%zu ranks: one bar per %s, each the mean of its ranks.</p>\n", rep->nranks,
                v->bars_by);
    int rest = 0;
    for (size_t i = 0; i < v->nbars; i++)
        rest |= v->bars[i].rest_s > 0;
    legend(f, rest);
    fputs("<p><label>Sort by <select id=\"sortby\"><option value=\"rank\">rank</option>"
          "<option value=\"wall\">wall time</option><option value=\"compute\">compute</option>"
          "<option value=\"comm\">communication</option><option value=\"wait\">waiting</option>"
          "</select></label></p>\n",
          f);
    double max = 0;
    for (size_t i = 0; i < v->nbars; i++)
        if (v->bars[i].len_s > max)
            max = v->bars[i].len_s;
    /* Rows stay tall enough for their labels: at most CS_VIEW_MAX_ROWS bars of 11 px. */
    int rh = v->nbars <= 32 ? 18 : v->nbars <= 64 ? 13 : 11, lw = 230, pw = 600;
    const char *cls = rh < 18 ? " class=\"small\"" : "";
    int h = (int)v->nbars * rh + 24;
    fprintf(f,
            "<svg id=\"bars\" class=\"chart\" data-rh=\"%d\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" role=\"img\">\n",
            rh, lw + pw + 90, h, lw + pw + 90, h);
    for (size_t i = 0; i < v->nbars; i++) {
        const struct cs_report_bar *b = &v->bars[i];
        fprintf(f,
                "<g class=\"bar\" data-rank=\"%d\" data-wall=\"%.9g\" data-compute=\"%.9g\" "
                "data-comm=\"%.9g\" data-wait=\"%.9g\" transform=\"translate(0,%zu)\">",
                b->first_rank, clamp0(b->wall_s), clamp0(b->seg_s[CS_SEG_COMPUTE]),
                clamp0(b->comm_s), clamp0(b->seg_s[CS_SEG_WAIT]), i * (size_t)rh);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\"%s>", lw - 6, rh - 3, cls);
        /* Long labels (hosts named by long file names: Kineto imports) are cut to what the
         * margin holds; the whole label is the text's tooltip. */
        if (strlen(b->label) > 36) {
            char cut[40];
            snprintf(cut, sizeof cut, "%.33s", b->label);
            fputs("<title>", f);
            esc(f, b->label);
            fputs("</title>", f);
            esc(f, cut);
            fputs("&#8230;", f);
        } else {
            esc(f, b->label);
        }
        fputs("</text>", f);
        double x = lw;
        for (int s = 0; s < CS_SEG_N; s++) {
            double w = max > 0 ? clamp0(b->seg_s[s]) / max * pw : 0;
            fprintf(f,
                    "<rect x=\"%.2f\" y=\"1\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
                    "<title>",
                    x, w, rh - 2, seg_color[s]);
            esc(f, b->label);
            fprintf(f, ": %s %.6f s</title></rect>", seg_name[s], b->seg_s[s]);
            x += w;
        }
        double r = b->rest_s;
        if (r > 0) {
            double w = max > 0 ? r / max * pw : 0;
            fprintf(f, "<rect x=\"%.2f\" y=\"1\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>",
                    x, w, rh - 2, REST_COLOR);
            esc(f, b->label);
            fprintf(f, ": %s %.6f s</title></rect>", REST_NAME, r);
            x += w;
        }
        fprintf(f, "<text x=\"%.2f\" y=\"%d\"%s>%.6f s</text></g>\n", x + 4, rh - 3, cls,
                b->wall_s);
    }
    int y = (int)v->nbars * rh;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n", lw, y, lw + pw,
            y);
    for (int t = 0; t <= 4; t++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"axis\">%.3g s</text>\n",
                lw + pw * t / 4, y + 16, max * t / 4);
    fputs("</svg>\n", f);
}

/* White to dark red, by t in [0, 1]. */
static void heat_color(char *buf, size_t n, double t)
{
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    snprintf(buf, n, "rgb(%d,%d,%d)", (int)(255 - 75 * t), (int)(245 - 215 * t),
             (int)(240 - 210 * t));
}

static void sec_heat(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_views *v = rep->views;
    if (!v || !v->heat_rows || !v->heat_bins) {
        na(f, "no rank was analysed");
        return;
    }
    double max = 0;
    for (size_t i = 0; i < v->heat_rows * v->heat_bins; i++)
        if (v->heat_wait_s[i] > max)
            max = v->heat_wait_s[i];
    if (!v->heat_by_step)
        fputs("<p>This run has no steps, so the columns are equal slices of the run's time "
              "instead of steps.</p>\n",
              f);
    if (max <= 0) {
        fputs("<p>No rank waited at any collective instance.</p>\n", f);
        return;
    }
    if (v->heat_by_step) {
        fprintf(f,
                "<p>Each cell: seconds a rank spent waiting for later members of the collectives "
                "it arrived at%s in that step",
                v->waits_p2p ? ", and for point-to-point partners," : "");
        if (v->heat_steps_per_col > 1)
            fprintf(f, " (mean per step of the column's %d steps)", v->heat_steps_per_col);
        fprintf(f,
                "; %d steps, one row per %s%s. Darkest: %.6f s. Waiting outside every step "
                "(before the first, after the last): %.6f s per rank, not drawn.</p>\n",
                v->heat_nsteps, v->heat_by,
                strcmp(v->heat_by, "rank") == 0 ? "" : " (mean per rank of the row)", max,
                v->heat_outside_s);
    } else {
        fprintf(f,
                "<p>Each cell: seconds spent waiting for later members of the collectives "
                "arrived at%s in that slice of the run (%.6f s per column); one row per %s%s. "
                "Darkest: %.6f s.</p>\n",
                v->waits_p2p ? ", and for point-to-point partners," : "", v->heat_bin_s, v->heat_by,
                strcmp(v->heat_by, "rank") == 0 ? "" : " (mean per rank of the row)", max);
    }
    int lw = 230, pw = 600;
    double cw = (double)pw / (double)v->heat_bins;
    int ch = v->heat_rows <= 32 ? 16 : v->heat_rows <= 64 ? 8 : 4;
    int h = (int)v->heat_rows * ch + 28;
    fprintf(f,
            "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "role=\"img\">\n<rect x=\"%d\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\" "
            "stroke=\"#ccc\"/>\n",
            lw + pw + 20, h, lw + pw + 20, h, lw, pw, (int)v->heat_rows * ch);
    size_t every = v->heat_rows <= 32 ? 1 : (v->heat_rows + 31) / 32;
    for (size_t r = 0; r < v->heat_rows; r++) {
        if (r % every == 0) {
            fprintf(f, "<text x=\"%d\" y=\"%zu\" text-anchor=\"end\" class=\"small\">", lw - 6,
                    r * (size_t)ch + (size_t)ch - 3);
            esc(f, v->heat_label[r]);
            fputs("</text>\n", f);
        }
        for (size_t b = 0; b < v->heat_bins; b++) {
            double w = v->heat_wait_s[r * v->heat_bins + b];
            if (w <= 0)
                continue;
            char c[32];
            heat_color(c, sizeof c, w / max);
            fprintf(f,
                    "<rect x=\"%.2f\" y=\"%zu\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
                    "<title>",
                    lw + cw * (double)b, r * (size_t)ch, cw, ch, c);
            esc(f, v->heat_label[r]);
            if (v->heat_by_step && v->heat_steps_per_col > 1)
                fprintf(f, ", steps %zu-%zu: waited %.6f s per step</title></rect>\n",
                        b * (size_t)v->heat_steps_per_col,
                        (b + 1) * (size_t)v->heat_steps_per_col - 1, w);
            else if (v->heat_by_step)
                fprintf(f, ", step %zu: waited %.6f s</title></rect>\n", b, w);
            else
                fprintf(f, ", %.6f-%.6f s: waited %.6f s</title></rect>\n",
                        v->heat_bin_s * (double)b, v->heat_bin_s * (double)(b + 1), w);
        }
    }
    int y = (int)v->heat_rows * ch;
    if (v->heat_by_step) {
        /* Step numbers under the columns, at most about 16 of them. */
        size_t step_every = (v->heat_bins + 15) / 16;
        for (size_t b = 0; b < v->heat_bins; b += step_every)
            fprintf(f,
                    "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\" class=\"small\">%zu"
                    "</text>\n",
                    lw + cw * ((double)b + 0.5), y + 12, b * (size_t)v->heat_steps_per_col);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"axis\">step</text>\n",
                lw + pw / 2, y + 23);
    } else {
        for (int t = 0; t <= 4; t++)
            fprintf(f,
                    "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"axis\">%.3g s"
                    "</text>\n",
                    lw + pw * t / 4, y + 16, v->heat_bin_s * (double)v->heat_bins * t / 4);
    }
    fputs("</svg>\n", f);
}

static void sec_p2p(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_views *v = rep->views;
    if (!v) {
        na(f, "no rank was analysed");
        return;
    }
    if (!v->p2p_total) {
        fputs("<p>No point-to-point bytes were sent in this run.</p>\n", f);
        return;
    }
    size_t n = v->p2p_n;
    uint64_t max = 0;
    for (size_t i = 0; i < n * n; i++)
        if (v->p2p_bytes[i] > max)
            max = v->p2p_bytes[i];
    fprintf(f,
            "<p>Bytes sent from the row's rank%s to the column's; %" PRIu64
            " bytes in all, largest cell %" PRIu64 " bytes (colour on a log scale).</p>\n",
            v->p2p_block > 1 ? " block" : "", v->p2p_total, max);
    if (v->p2p_block > 1)
        fprintf(f, "<p>Ranks are grouped in blocks of %d consecutive ranks.</p>\n", v->p2p_block);
    int lw = 60, side = 480;
    double cs = (double)side / (double)n;
    fprintf(f,
            "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "role=\"img\">\n<rect x=\"%d\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\" "
            "stroke=\"#ccc\"/>\n",
            lw + side + 10, side + 30, lw + side + 10, side + 30, lw, side, side);
    size_t every = n <= 32 ? 1 : (n + 15) / 16;
    for (size_t i = 0; i < n; i++) {
        if (i % every == 0) {
            fprintf(f, "<text x=\"%d\" y=\"%.2f\" text-anchor=\"end\" class=\"small\">%zu</text>",
                    lw - 4, cs * (double)i + cs / 2 + 4, i * (size_t)v->p2p_block);
            fprintf(f,
                    "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\" class=\"small\">%zu"
                    "</text>\n",
                    lw + cs * (double)i + cs / 2, side + 14, i * (size_t)v->p2p_block);
        }
        for (size_t j = 0; j < n; j++) {
            uint64_t b = v->p2p_bytes[i * n + j];
            if (!b)
                continue;
            char c[32];
            heat_color(c, sizeof c, log1p((double)b) / log1p((double)max));
            fprintf(f,
                    "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\">"
                    "<title>%zu &#8594; %zu: %" PRIu64 " bytes</title></rect>\n",
                    lw + cs * (double)j, cs * (double)i, cs, cs, c, i * (size_t)v->p2p_block,
                    j * (size_t)v->p2p_block, b);
        }
    }
    fputs("</svg>\n", f);
}

/* After a communicator's label: its name by how it was made, when that says more. */
static void comm_name(const struct cs_report *rep, FILE *f, const char *label)
{
    const char *name = cs_report_comm_name(rep, label);
    if (strcmp(name, label) == 0)
        return;
    fputs("<br><small>", f);
    esc(f, name);
    fputs("</small>", f);
}

/* Per-rank tables of bounded size: up to HTML_RANK_ROWS ranks all rows, beyond that the half
 * with the largest key and the half with the smallest (the outliers both ways), in rank order;
 * report.json has every rank.  Returns the mask of rows to show (NULL: all, or out of memory). */
#define HTML_RANK_ROWS 512

static int key_cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static unsigned char *rank_rows(const double *key, size_t n)
{
    if (n <= HTML_RANK_ROWS)
        return NULL;
    double *k = malloc(n * sizeof *k);
    unsigned char *show = calloc(n, 1);
    if (!k || !show) {
        free(k);
        free(show);
        return NULL;
    }
    memcpy(k, key, n * sizeof *k);
    qsort(k, n, sizeof *k, key_cmp);
    double lo = k[HTML_RANK_ROWS / 2 - 1], hi = k[n - HTML_RANK_ROWS / 2];
    size_t nlo = 0, nhi = 0;
    for (size_t i = 0; i < n; i++) {
        show[i] = key[i] < lo || key[i] > hi;
        nlo += key[i] < lo;
        nhi += key[i] > hi;
    }
    /* ties at a cut: the lowest ranks, up to HTML_RANK_ROWS rows in all */
    for (size_t i = 0; i < n; i++) {
        if (key[i] == lo && nlo < HTML_RANK_ROWS / 2 && !show[i])
            show[i] = 1, nlo++;
        else if (key[i] == hi && nhi < HTML_RANK_ROWS / 2 && !show[i])
            show[i] = 1, nhi++;
    }
    free(k);
    return show;
}

/* After a table of rank_rows' rows: say which were listed (when not all), free the mask and
 * the keys. */
static void rank_rows_done(const struct cs_report *rep, FILE *f, unsigned char *show, double *key,
                           size_t n, const char *most, const char *least)
{
    if (show)
        fprintf(f, "<p>%zu ranks: listed are the %d %s and the %d %s; %s has every rank.</p>\n", n,
                HTML_RANK_ROWS / 2, most, HTML_RANK_ROWS / 2, least,
                rep->rank_listed ? "ranks.csv (<code>commscope analyze --ranks-csv FILE</code>)"
                                 : "report.json");
    free(show);
    free(key);
}

/* The bandwidth chart draws the curves that moved the most bytes; the legend names them and
 * groups the rest (report.json has every curve). */
#define BW_CURVES 8

static double curve_bytes(const struct cs_report_bw_curve *cv)
{
    double b = 0;
    for (size_t i = 0; i < cv->npoints; i++)
        b += cv->pt[i].mean_bytes * (double)cv->pt[i].samples;
    return b;
}

static void sec_bw(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_views *v = rep->views;
    if (!v || !v->nbw) {
        na(f, "no transfer with a payload was measured");
        return;
    }
    /* drawn[c]: curve c is among the BW_CURVES that moved the most bytes */
    unsigned char *drawn = calloc(v->nbw, 1);
    if (!drawn) {
        na(f, "out of memory drawing the chart");
        return;
    }
    size_t ndrawn = 0;
    for (size_t c = 0; c < v->nbw; c++) {
        size_t above = 0;
        double bc = curve_bytes(&v->bw[c]);
        for (size_t d = 0; d < v->nbw && above < BW_CURVES; d++) {
            double bd = curve_bytes(&v->bw[d]);
            above += bd > bc || (bd == bc && d < c);
        }
        drawn[c] = above < BW_CURVES;
        ndrawn += drawn[c];
    }
    int ncap = 0;
    double ymax = 0;
    for (size_t c = 0; c < v->nbw; c++)
        if (drawn[c] && isfinite(v->bw[c].capacity_gbps) && v->bw[c].capacity_gbps > 0) {
            ncap++;
            if (v->bw[c].capacity_gbps > ymax)
                ymax = v->bw[c].capacity_gbps;
        }
    fputs("<p>Bus bandwidth (nccl-tests definition) of each message-size bucket, per operation and "
          "communicator; hover a point for algorithm bandwidth and sample count. ",
          f);
    if (ncap)
        fputs("Dashed lines: the bus bandwidth the topology allows for the curve of the same "
              "colour (hover for its source).</p>\n",
              f);
    else
        fputs("The topology's capacity line is not shown: this report has no capacity for these "
              "communicators (no topology snapshot was joined to it).</p>\n",
              f);
    int kmin = CS_VIEW_BW_BUCKETS, kmax = 0;
    for (size_t c = 0; c < v->nbw; c++)
        for (size_t i = 0; drawn[c] && i < v->bw[c].npoints; i++) {
            const struct cs_report_bw_point *p = &v->bw[c].pt[i];
            if (p->log2_size < kmin)
                kmin = p->log2_size;
            if (p->log2_size > kmax)
                kmax = p->log2_size;
            if (clamp0(p->busbw_gbps) > ymax)
                ymax = p->busbw_gbps;
        }
    /* A bucket spans [2^k, 2^(k+1)): the axis ends where the largest one does. */
    kmax++;
    if (ymax <= 0)
        ymax = 1;
    ymax *= 1.1;
    int lw = 70, pw = 600, ph = 300, top = 10;
    fprintf(f,
            "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "role=\"img\">\n",
            lw + pw + 20, top + ph + 40, lw + pw + 20, top + ph + 40);
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
            "stroke=\"#ccc\"/>\n",
            lw, top, pw, ph);
    for (int t = 0; t <= 4; t++) {
        double y = top + ph - (double)ph * t / 4;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" class=\"axis\">%.3g</text>",
                lw - 4, y + 4, ymax * t / 4);
    }
    fprintf(f,
            "<text x=\"12\" y=\"%d\" class=\"axis\" transform=\"rotate(-90 12 %d)\" "
            "text-anchor=\"middle\">GB/s</text>\n",
            top + ph / 2, top + ph / 2);
    for (int k = kmin; k <= kmax; k++) {
        double x = lw + (double)pw * (k - kmin) / (kmax - kmin);
        const char *u = k >= 30 ? "G" : k >= 20 ? "M" : k >= 10 ? "K" : "";
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" class=\"small\">%d%s</text>",
                x, top + ph + 14, 1 << (k % 10), u);
    }
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"axis\">message size "
            "(bytes, log scale)</text>\n",
            lw + pw / 2, top + ph + 32);
    for (size_t c = 0, shown = 0; c < v->nbw; c++) {
        if (!drawn[c])
            continue;
        const struct cs_report_bw_curve *cv = &v->bw[c];
        const char *col = cs__html_palette[shown++ % CS__HTML_PALETTE];
        fprintf(f,
                "<g class=\"curve\"><polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
                "points=\"",
                col);
        for (size_t i = 0; i < cv->npoints; i++) {
            const struct cs_report_bw_point *p = &cv->pt[i];
            double lx = log2(p->mean_bytes > 1 ? p->mean_bytes : 1);
            if (lx < kmin)
                lx = kmin;
            fprintf(f, "%.1f,%.1f ", lw + (double)pw * (lx - kmin) / (kmax - kmin),
                    top + ph - (double)ph * clamp0(p->busbw_gbps) / ymax);
        }
        fputs("\"/>", f);
        for (size_t i = 0; i < cv->npoints; i++) {
            const struct cs_report_bw_point *p = &cv->pt[i];
            double lx = log2(p->mean_bytes > 1 ? p->mean_bytes : 1);
            if (lx < kmin)
                lx = kmin;
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>",
                    lw + (double)pw * (lx - kmin) / (kmax - kmin),
                    top + ph - (double)ph * clamp0(p->busbw_gbps) / ymax, col);
            esc(f, cv->op);
            fputs(" on ", f);
            esc(f, cs_report_comm_name(rep, cv->comm));
            fprintf(f,
                    ", %.0f bytes (mean of %" PRIu64 "): busbw %.3f GB/s, algbw %.3f GB/s"
                    "</title></circle>",
                    p->mean_bytes, p->samples, p->busbw_gbps, p->algbw_gbps);
        }
        fputs("</g>\n", f);
        if (isfinite(cv->capacity_gbps) && cv->capacity_gbps > 0) {
            double y = top + ph - (double)ph * cv->capacity_gbps / ymax;
            fprintf(f,
                    "<line class=\"capacity\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                    "stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"><title>",
                    lw, y, lw + pw, y, col);
            esc(f, cv->op);
            fputs(" on ", f);
            esc(f, cv->comm);
            fprintf(f, ": capacity %.3f GB/s (", cv->capacity_gbps);
            esc(f, cv->capacity_source);
            fputs(")</title></line>\n", f);
        }
    }
    fputs("</svg>\n<p class=\"legend\">", f);
    for (size_t c = 0, shown = 0; c < v->nbw; c++) {
        if (!drawn[c])
            continue;
        fprintf(f, "<span><i style=\"background:%s\"></i>",
                cs__html_palette[shown++ % CS__HTML_PALETTE]);
        esc(f, v->bw[c].op);
        fputs(" on ", f);
        esc(f, cs_report_comm_name(rep, v->bw[c].comm));
        fputs("</span> ", f);
    }
    if (ndrawn < v->nbw) {
        double rest = 0;
        for (size_t c = 0; c < v->nbw; c++)
            rest += drawn[c] ? 0 : curve_bytes(&v->bw[c]);
        fprintf(f,
                "<span>and %zu more (op, communicator) curves, %.3g bytes in all, not drawn: "
                "report.json has every curve</span>",
                v->nbw - ndrawn, rest);
    }
    fputs("</p>\n", f);
    free(drawn);
}

/* Colours of the timeline: calls by kind, collectives by the communicator's parallelism role. */
static const char *const dim_color[CS_DIM_N] = {
    [CS_DIM_DP] = "#f28e2b", [CS_DIM_TP] = "#e15759",    [CS_DIM_PP] = "#76b7b2",
    [CS_DIM_EP] = "#edc948", [CS_DIM_OTHER] = "#9c755f",
};
static const char *const tl_name[CS_TL_N] = {
    [CS_TL_COLL] = "collective",
    [CS_TL_P2P] = "point-to-point",
    [CS_TL_DONE] = "wait/test",
    [CS_TL_OTHER] = "other call",
    [CS_TL_INFLIGHT] = "request in flight",
};
static const char *const tl_color[CS_TL_N] = {
    [CS_TL_COLL] = "#f28e2b",  [CS_TL_P2P] = "#59a14f",   [CS_TL_DONE] = "#b07aa1",
    [CS_TL_OTHER] = "#bab0ac", [CS_TL_INFLIGHT] = "#222",
};

static const char *seg_fill(const struct cs_report_tl_seg *s)
{
    if (s->kind == CS_TL_COLL && s->dim >= 0 && s->dim < CS_DIM_N)
        return dim_color[s->dim];
    return tl_color[s->kind < CS_TL_N ? s->kind : CS_TL_OTHER];
}

static void timeline_svg(const struct cs_report_timeline *tl, FILE *f)
{
    fprintf(f,
            "<p>Step %d, the median of the timed steps (%.6f s). One row per rank%s: the step "
            "from the rank's own begin to its end in compute blue, its communication calls on "
            "top, and a thin line below for non-blocking requests in flight (compute while a "
            "request is in flight is overlap). Hover a bar for its times.</p>\n",
            tl->step, tl->step_s,
            (size_t)tl->ranks_total > tl->nrows ? " (a sample of the ranks, the straggler included)"
                                                : "");
    fprintf(f, "<p class=\"legend\"><span><i style=\"background:%s\"></i>compute</span> ",
            seg_color[CS_SEG_COMPUTE]);
    for (int d = 0; d < CS_DIM_N; d++)
        fprintf(f, "<span><i style=\"background:%s\"></i>collective (%s)</span> ", dim_color[d],
                cs__dim_names[d]);
    for (int k = CS_TL_P2P; k < CS_TL_N; k++)
        fprintf(f, "<span><i style=\"background:%s\"></i>%s</span> ", tl_color[k], tl_name[k]);
    fputs("</p>\n", f);
    if (tl->gpu_rows)
        cs__report_tl_gpu_legend(tl, f);
    int lw = 200, pw = 640, rh = tl->nrows <= 16 ? 22 : tl->nrows <= 32 ? 14 : 9;
    int h = (int)tl->nrows * rh + 30;
    for (size_t i = 0; i < tl->nrows; i++)
        h += cs__report_tl_gpu_height(&tl->rows[i]);
    double W = tl->window_s > 0 ? tl->window_s : 1;
    fprintf(f,
            "<svg id=\"timeline\" class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "role=\"img\">\n",
            lw + pw + 60, h, lw + pw + 60, h);
    double y = 0;
    for (size_t i = 0; i < tl->nrows; i++) {
        const struct cs_report_tl_row *r = &tl->rows[i];
        double bh = rh - 5;
        fprintf(f,
                "<g class=\"tlrow\" data-rank=\"%d\"><text x=\"%d\" y=\"%.1f\" "
                "text-anchor=\"end\" class=\"small\">rank %d (",
                r->rank, lw - 6, y + bh - 1, r->rank);
        esc(f, r->host);
        double dur = r->end_s - r->begin_s;
        fprintf(f,
                ")</text><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">"
                "<title>rank %d: step %.6f s, in calls %.6f s, %s %.6f s, requests in "
                "flight %.6f s</title></rect>",
                lw + pw * r->begin_s / W, y, pw * dur / W, bh,
                r->gpu ? CS_HTML_HOST_OUTSIDE : seg_color[CS_SEG_COMPUTE], r->rank, dur, r->calls_s,
                r->gpu ? "host outside traced calls" : "compute", dur - r->calls_s, r->inflight_s);
        for (size_t j = 0; j < r->nseg; j++) {
            const struct cs_report_tl_seg *s = &r->seg[j];
            double x = lw + pw * s->t0_s / W, w = pw * (s->t1_s - s->t0_s) / W;
            if (w < 0.3)
                w = 0.3;
            if (s->kind == CS_TL_INFLIGHT)
                fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"2\" fill=\"%s\">",
                        x, y + bh + 1, w, tl_color[CS_TL_INFLIGHT]);
            else
                fprintf(f,
                        "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
                        "fill=\"%s\">",
                        x, y, w, bh, seg_fill(s));
            fprintf(f, "<title>%s%s%s%s %.6f-%.6f s</title></rect>",
                    tl_name[s->kind < CS_TL_N ? s->kind : CS_TL_OTHER],
                    s->dim >= 0 && s->dim < CS_DIM_N ? " (" : "",
                    s->dim >= 0 && s->dim < CS_DIM_N ? cs__dim_names[s->dim] : "",
                    s->dim >= 0 && s->dim < CS_DIM_N ? ")" : "", s->t0_s, s->t1_s);
        }
        fprintf(f, "%s</g>\n",
                r->truncated ? "<text x=\"842\" y=\"0\" class=\"small\">(truncated)</text>" : "");
        y += rh;
        y += cs__report_tl_gpu_svg(f, r, lw, pw, W, y);
    }
    int yl = (int)y + 2;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n", lw, yl, lw + pw,
            yl);
    for (int t = 0; t <= 4; t++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"axis\">%.6f s</text>\n",
                lw + pw * t / 4, yl + 16, tl->window_s * t / 4);
    fputs("</svg>\n", f);
    if (tl->gpu_rows)
        cs__report_tl_gpu_table(tl, f);
}

/* Under a table of communicators, when only the busiest are listed (passes/bound.c). */
static void folded_note(const struct cs_report *rep, FILE *f)
{
    if (rep->comms_all)
        fprintf(f,
                "<p>The %zu busiest of the run's %zu communicators (by call time); ops.csv "
                "(<code>commscope analyze --ops-csv FILE</code>) names every one.</p>\n",
                rep->ncomms_listed, rep->ncomms_all);
}

static void sec_overlap(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_views *v = rep->views;
    const struct cs_report_steps *s = rep->steps;
    if (v && v->timeline)
        timeline_svg(v->timeline, f);
    else if (v)
        na(f, v->timeline_note[0] ? v->timeline_note : "no step timeline was built");
    cs__report_gpu_html(rep, f);
    /* The host-side ratio has no value on runs whose communication is all on the GPU. */
    if (!s || (rep->gpu && !isfinite(s->overlap_ratio)))
        return;
    fputs("<p>Overlap ratio over the whole run (time requests were in flight while the rank "
          "computed, over the time communication was in flight): ",
          f);
    num(f, "%.4f", s->overlap_ratio);
    fputs(".</p>\n", f);
    if (!s->noverlap)
        return;
    fputs("<table><tr><th>communicator</th><th>overlap ratio</th><th>overlapped (s)</th>"
          "<th>in flight (s)</th></tr>\n",
          f);
    for (size_t i = 0; i < s->noverlap; i++) {
        const struct cs_report_overlap *o = &s->overlap[i];
        fputs("<tr><td>", f);
        esc(f, o->comm);
        comm_name(rep, f, o->comm);
        fputs("</td><td>", f);
        num(f, "%.4f", o->ratio);
        fprintf(f, "</td><td>%.6f</td><td>%.6f</td></tr>\n", o->overlapped_s, o->in_flight_s);
    }
    fputs("</table>\n", f);
    folded_note(rep, f);
}

static void budget_row(FILE *f, const char *who, const struct cs_report_budget *b)
{
    fprintf(f, "<tr><td>%s</td><td>", who);
    num(f, "%.6f", b->step_s);
    fputs("</td><td>", f);
    num(f, "%.6f", b->compute_s);
    fputs("</td><td>", f);
    num(f, "%.6f", b->grad_sync_s);
    fputs("</td><td>", f);
    num(f, "%.6f", b->comm_s[CS_DIM_TP]);
    fputs("</td><td>", f);
    num(f, "%.6f", b->other_comm_s);
    fputs("</td><td>", f);
    num(f, "%.6f", b->wait_s);
    fputs("</td><td>", f);
    num(f, "%.6f", b->p2p_wait_s);
    fputs("</td><td>", f);
    num(f, "%.6f", b->other_mpi_s);
    fputs("</td></tr>\n", f);
}

static void sec_steps(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_steps *s = rep->steps;
    if (!s) {
        na(f, "the step analysis did not run");
        return;
    }
    if (!s->count) {
        na(f, s->note[0] ? s->note : "no steps were found");
        return;
    }
    fprintf(f, "<p><b id=\"stepcount\">%d steps</b> (source: ", s->count);
    esc(f, s->source);
    if (s->detail[0]) {
        fputs(", ", f);
        esc(f, s->detail);
    }
    fprintf(f,
            "); %d timed, %d warm-up and %d unfinished last step%s left out of the "
            "statistics. Step time: mean ",
            s->timed, s->warmup_excluded, s->tail_excluded, s->tail_excluded == 1 ? "" : "s");
    num(f, "%.6f", s->mean_s);
    fputs(" s, median ", f);
    num(f, "%.6f", s->median_s);
    fputs(" s, p95 ", f);
    num(f, "%.6f", s->p95_s);
    fputs(" s.</p>\n", f);
    if (rep->window_ranks) {
        fputs("<p>The trace kept the newest part of the run (ring mode): these are the steps of "
              "the window. The whole run had ",
              f);
        if (s->run_count >= 0)
            fprintf(f, "<b id=\"runsteps\">%d steps</b>, mean time between step starts ",
                    s->run_count);
        else
            fputs("a number of steps the totals cannot tell, ", f);
        num(f, "%.6f", s->run_mean_s);
        fputs(" s.</p>\n", f);
    }
    if (s->note[0]) {
        fputs("<p class=\"na\">", f);
        esc(f, s->note);
        fputs("</p>\n", f);
    }
    fputs("<h3>Gradient synchronisation</h3>\n<p>Share of each step blocked in gradient "
          "all-reduces (data-parallel group): <b id=\"gradshare\">",
          f);
    num(f, "%.4f", s->grad_share);
    fputs("</b>; per step and rank: exposed ", f);
    num(f, "%.6f", s->grad_exposed_s);
    fputs(" s (of which waiting ", f);
    num(f, "%.6f", s->grad_wait_s);
    fputs(" s), overlapped with compute ", f);
    num(f, "%.6f", s->grad_overlapped_s);
    fputs(" s, total ", f);
    num(f, "%.6f", s->grad_total_s);
    fputs(" s.</p>\n", f);
    if (s->grad_note[0]) {
        fputs("<p class=\"na\">", f);
        esc(f, s->grad_note);
        fputs("</p>\n", f);
    }
    fputs("<h3>Time per step (seconds, mean over timed steps)</h3>\n<table><tr><th>rank</th>"
          "<th>step</th><th>compute</th><th>gradient sync</th><th>TP comm</th>"
          "<th>other comm</th><th>wait</th><th>of it, point-to-point</th><th>other MPI</th>"
          "</tr>\n",
          f);
    budget_row(f, "all", &s->total);
    int fold = s->nranks > CS_VIEW_RANK_BARS;
    if (fold)
        fputs("</table><details><summary>per rank</summary><table>\n", f);
    double *key = malloc((s->nranks + 1) * sizeof *key);
    for (size_t i = 0; key && i < s->nranks; i++)
        key[i] = s->ranks[i].step_s;
    unsigned char *show = key ? rank_rows(key, s->nranks) : NULL;
    for (size_t i = 0; i < s->nranks; i++) {
        if (show && !show[i])
            continue;
        char who[16];
        snprintf(who, sizeof who, "%d", s->ranks[i].rank);
        budget_row(f, who, &s->ranks[i]);
    }
    fputs(fold ? "</table></details>\n" : "</table>\n", f);
    rank_rows_done(rep, f, show, key, s->nranks, "with the longest", "with the shortest step");
    fputs("<p class=\"legend\">Gradient sync and the communication columns leave out waiting "
          "for other ranks, which is in wait: at collectives for their last member, at "
          "point-to-point calls for the partner (late senders and receivers); idle time cannot "
          "be told from compute without a GPU timeline.</p>\n",
          f);
    fputs("<h3>Steps</h3>\n", f);
    if (isfinite(s->hist_lo_s)) {
        /* the distribution of the timed steps' times */
        uint64_t most = 1;
        for (int b = 0; b < CS_REPORT_STEP_BINS; b++)
            most = s->hist[b] > most ? s->hist[b] : most;
        double r =
            s->hist_hi_s > s->hist_lo_s && s->hist_lo_s > 0 ? s->hist_hi_s / s->hist_lo_s : 1;
        fputs("<table id=\"stephist\"><tr><th>step time (s)</th><th>timed steps</th>"
              "<th></th></tr>\n",
              f);
        for (int b = 0; b < CS_REPORT_STEP_BINS; b++) {
            if (!s->hist[b])
                continue;
            fprintf(f,
                    "<tr><td>%.6f &#8211; %.6f</td><td>%" PRIu64 "</td><td style=\"text-align:"
                    "left\"><span class=\"bar\" style=\"display:inline-block;width:%.0fpx;"
                    "background:#4e79a7\">&#160;</span></td></tr>\n",
                    s->hist_lo_s * pow(r, (double)b / CS_REPORT_STEP_BINS),
                    s->hist_lo_s * pow(r, (double)(b + 1) / CS_REPORT_STEP_BINS), s->hist[b],
                    200.0 * (double)s->hist[b] / (double)most);
        }
        fputs("</table>\n", f);
    }
    if (s->rep_step >= 0 && (size_t)s->rep_step < s->nlist)
        fprintf(f, "<p>Representative step (the median timed step): <b>%d</b>.</p>\n",
                s->list[s->rep_step].index);
    int all = s->nlisted == s->nlist, fold_steps = s->nlisted > 64;
    if (!all)
        fprintf(f,
                "<p>%zu steps: listed are the %d slowest timed steps, the representative step, "
                "the first and the last; <code>commscope analyze --steps-csv FILE</code> writes "
                "every step.</p>\n",
                s->nlist, CS_REPORT_STEPS_SLOWEST);
    if (fold_steps)
        fprintf(f, "<details><summary>%zu steps</summary>\n", s->nlisted);
    fputs("<table id=\"steplist\"><tr><th>step</th><th>timed</th><th>time (s)</th>"
          "<th>compute (s)</th><th>communication (s)</th><th>wait (s)</th>"
          "<th>overlap ratio</th><th>gradient sync share</th></tr>\n",
          f);
    for (size_t i = 0; i < s->nlisted; i++) {
        const struct cs_report_step *p = &s->list[s->listed[i]];
        fprintf(f, "<tr><td>%d</td><td>%s</td><td>", p->index, p->timed ? "yes" : "no");
        num(f, "%.6f", p->time_s);
        fputs("</td><td>", f);
        num(f, "%.6f", p->compute_s);
        fputs("</td><td>", f);
        num(f, "%.6f", p->grad_sync_s + p->comm_s + p->other_mpi_s);
        fputs("</td><td>", f);
        num(f, "%.6f", p->wait_s);
        fputs("</td><td>", f);
        num(f, "%.4f", p->overlap_ratio);
        fputs("</td><td>", f);
        num(f, "%.4f", p->grad_sync_share);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    if (fold_steps)
        fputs("</details>\n", f);
}

static void sec_groups(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_steps *s = rep->steps;
    if (!s) {
        na(f, "the step analysis (which infers the groups) did not run");
        return;
    }
    if (!s->ngroups) {
        fputs("<p>No communicator with more than one member was used.</p>\n", f);
        return;
    }
    fputs("<table id=\"grouplist\"><tr><th>communicator</th><th>role</th><th>what it is</th>"
          "<th>size</th>"
          "<th>ranks</th><th>confidence</th><th>why</th></tr>\n",
          f);
    size_t shown = s->ngroups < 256 ? s->ngroups : 256;
    for (size_t i = 0; i < shown; i++) {
        const struct cs_report_group *g = &s->groups[i];
        fputs("<tr><td>", f);
        esc(f, g->comm);
        comm_name(rep, f, g->comm);
        fprintf(f, "</td><td class=\"role\">%s</td><td>",
                cs__dim_names[g->role < CS_DIM_N ? g->role : CS_DIM_OTHER]);
        esc(f, g->label);
        fprintf(f, "</td><td>%d</td><td style=\"text-align:left\">", g->size);
        for (int32_t j = 0; j < g->size && j < 32; j++)
            fprintf(f, "%s%d", j ? "," : "", g->ranks[j]);
        fprintf(f, "%s</td><td>%.2f</td><td style=\"text-align:left\">", g->size > 32 ? ",..." : "",
                g->confidence);
        esc(f, g->why);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    if (shown < s->ngroups)
        fprintf(f, "<p>%zu more communicators are in report.json.</p>\n", s->ngroups - shown);
    folded_note(rep, f);
    fputs("<h3>By parallelism dimension</h3>\n<table><tr><th>role</th><th>communicators</th>"
          "<th>time in calls (s)</th><th>bytes</th><th>exposed share</th><th>overlap ratio</th>"
          "</tr>\n",
          f);
    for (int d = 0; d < CS_DIM_N; d++) {
        const struct cs_report_dim *m = &s->dims[d];
        if (!m->comms)
            continue;
        fprintf(f, "<tr><td>%s</td><td>%d</td><td>%.6f</td><td>%.0f</td><td>", cs__dim_names[d],
                m->comms, m->time_s, m->bytes);
        num(f, "%.4f", m->exposed_share);
        fputs("</td><td>", f);
        num(f, "%.4f", m->overlap_ratio);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void whatif_row(FILE *f, const char *what, double v)
{
    fprintf(f, "<tr><th>%s</th><td>", what);
    num(f, "%.6f", v);
    fputs("</td></tr>\n", f);
}

static void sec_whatif(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_steps *s = rep->steps;
    if (!s) {
        na(f, "the step analysis did not run");
        return;
    }
    const struct cs_report_whatif *w = &s->whatif;
    if (w->note[0]) {
        fputs("<p class=\"na\">", f);
        esc(f, w->note);
        fputs("</p>\n", f);
    }
    fputs("<table class=\"facts\"><tr><th>step time (s)</th><td></td></tr>\n", f);
    whatif_row(f, "measured", w->measured_step_s);
    whatif_row(f, "replayed (model check)", w->replayed_step_s);
    whatif_row(f, "without the straggler", w->no_straggler_step_s);
    whatif_row(f, "with perfect overlap", w->full_overlap_step_s);
    whatif_row(f, "at the best measured bandwidth", w->best_bandwidth_step_s);
    fprintf(f, "<tr><th>replay error</th><td>");
    num(f, "%.4f", w->replay_error);
    fputs("</td></tr>\n</table>\n", f);
}

static void sec_efficiency(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_steps *s = rep->steps;
    fputs("<table><tr><th>load balance</th><th>communication efficiency</th>"
          "<th>serialisation efficiency</th><th>transfer efficiency</th>"
          "<th>parallel efficiency</th></tr><tr>",
          f);
    fputs("<td>", f);
    num(f, "%.4f", rep->load_balance);
    fputs("</td><td>", f);
    num(f, "%.4f", rep->communication_efficiency);
    fputs("</td><td>", f);
    num(f, "%.4f", s ? s->serialization_efficiency : NAN);
    fputs("</td><td>", f);
    num(f, "%.4f", s ? s->transfer_efficiency : NAN);
    fputs("</td><td>", f);
    num(f, "%.4f", rep->parallel_efficiency);
    fputs("</td></tr></table>\n", f);
    fputs("<p class=\"legend\">POP model: parallel = load balance &#215; communication; "
          "communication = serialisation &#215; transfer (docs/metrics.md).</p>\n",
          f);
}

static void sec_ops(const struct cs_report *rep, FILE *f)
{
    if (!rep->nops) {
        fputs("<p>No communication call was recorded.</p>\n", f);
        return;
    }
    if (rep->comms_all)
        fprintf(f,
                "<p>The run names %zu communicators: the tables list the %zu busiest (by call "
                "time), and",
                rep->ncomms_all, rep->ncomms_listed);
    else if (rep->ops_all)
        fprintf(f,
                "<p>The run has %zu (op, communicator) rows: the table lists the %d busiest, and",
                rep->nops_all, CS_REPORT_OPS_LISTED);
    if (rep->ops_all)
        fputs(" each op's other rows are folded into one row, <code>" CS_REPORT_COMMS_OTHER
              "</code>, that keeps their calls, bytes and time (no size and no bandwidth: its "
              "communicators differ). ops.csv (<code>commscope analyze --ops-csv FILE</code>) has "
              "every row.</p>\n",
              f);
    fputs("<table><tr><th>op</th><th>communicator</th><th>size</th><th>calls</th><th>bytes</th>"
          "<th>time (s)</th><th>algbw (GB/s)</th><th>busbw (GB/s)</th></tr>\n",
          f);
    for (size_t i = 0; i < rep->nops; i++) {
        const struct cs_report_op *o = &rep->ops[i];
        fputs("<tr><td>", f);
        esc(f, o->op);
        fputs("</td><td>", f);
        esc(f, o->comm);
        comm_name(rep, f, o->comm);
        fprintf(f, "</td><td>%d</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%.6f</td><td>",
                o->comm_size, o->calls, o->bytes, o->time_s);
        num(f, "%.3f", o->algbw_gbps);
        fputs("</td><td>", f);
        num(f, "%.3f", o->busbw_gbps);
        fputs("</td></tr>\n", f);
    }
    fprintf(f,
            "</table>\n<p>Collective instances: %" PRIu64 " matched, %" PRIu64
            " incomplete; arrival skew mean ",
            rep->matched, rep->incomplete);
    num(f, "%.9f", rep->mean_skew_s);
    fputs(" s, max ", f);
    num(f, "%.9f", rep->max_skew_s);
    fputs(" s.</p>\n", f);
    if (!rep->np2p_bw && !rep->p2p_bw_unmeasured)
        return;
    fputs("<h3>Point-to-point bandwidth by message size</h3>\n<table id=\"p2pbw\"><tr><th>size "
          "(bytes)</th><th>pairs</th><th>mean bytes</th><th>transfer (GB/s)</th><th>receive "
          "call (GB/s)</th><th>send call (GB/s)</th></tr>\n",
          f);
    for (size_t i = 0; i < rep->np2p_bw; i++) {
        const struct cs_report_p2p_bucket *b = &rep->p2p_bw[i];
        fprintf(f,
                "<tr><td>2<sup>%d</sup>&#8211;2<sup>%d</sup></td><td>%" PRIu64
                "</td><td>%.0f</td><td>",
                b->log2_size, b->log2_size + 1, b->pairs, b->mean_bytes);
        num(f, "%.3f", b->transfer_gbps);
        fputs("</td><td>", f);
        num(f, "%.3f", b->recv_call_gbps);
        fputs("</td><td>", f);
        num(f, "%.3f", b->send_call_gbps);
        fputs("</td></tr>\n", f);
    }
    fprintf(f,
            "</table>\n<p class=\"legend\">Over matched send/receive pairs. Transfer: bytes / "
            "(the receive's completion &#8722; the later of the two calls' begins), the rate the "
            "message moved at; an MPI_Irecv completes at the end of the wait or test that "
            "completed it. The call columns divide the same bytes by the receive's time from "
            "its begin to its completion and by the send call's duration: an eager send returns "
            "before its message arrives (faster than the wire), a receive includes waiting for "
            "its sender. %" PRIu64
            " pairs whose receive did not complete in the step window that paired them are not "
            "measured.</p>\n",
            rep->p2p_bw_unmeasured);
}

static void sec_stragglers(const struct cs_report *rep, FILE *f)
{
    if (!rep->nstragglers) {
        fputs("<p>No rank arrived last at any collective by more than the clock uncertainty."
              "</p>\n",
              f);
        return;
    }
    fputs("<table><tr><th>rank</th><th>host</th><th>late arrivals</th><th>of instances</th>"
          "<th>others waited (s)</th></tr>\n",
          f);
    for (size_t i = 0; i < rep->nstragglers && i < 20; i++) {
        const struct cs_report_straggler *s = &rep->stragglers[i];
        uint64_t elig = 0;
        for (size_t j = 0; rep->views && j < rep->nranks; j++)
            if (rep->ranks[j].rank == s->rank)
                elig = rep->views->eligible[j];
        fprintf(f, "<tr><td>%d</td><td>", s->rank);
        esc(f, s->host);
        fprintf(f, "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%.6f</td></tr>\n",
                s->late_arrivals, elig, s->others_waited_s);
    }
    fputs("</table>\n", f);
}

static void sec_ranks(const struct cs_report *rep, FILE *f)
{
    if (!rep->nranks) {
        na(f, "no rank was analysed");
        return;
    }
    int fold = rep->nranks > CS_VIEW_RANK_BARS;
    if (fold)
        fprintf(f, "<details><summary>%zu ranks</summary>\n", rep->nranks);
    fputs("<table><tr><th>rank</th><th>host</th><th>wall (s)</th><th>compute (s)</th>"
          "<th>comm (s)</th><th title=\"at collectives, for the last member\">wait (s)</th>"
          "<th title=\"at point-to-point calls, for the partner, over the whole run\">"
          "point-to-point wait (s)</th>"
          "<th title=\"its point-to-point partners' waits for it, over the whole run\">"
          "partners waited for it (s)</th><th>calls</th><th>bytes</th><th>partial</th></tr>\n",
          f);
    double *key = malloc((rep->nranks + 1) * sizeof *key);
    for (size_t i = 0; key && i < rep->nranks; i++)
        key[i] = rep->ranks[i].compute_s;
    unsigned char *show = key ? rank_rows(key, rep->nranks) : NULL;
    for (size_t i = 0; i < rep->nranks; i++) {
        const struct cs_report_rank *r = &rep->ranks[i];
        if (show && !show[i])
            continue;
        fprintf(f, "<tr><td>%d</td><td>", r->rank);
        esc(f, r->host);
        fprintf(f, "</td><td>%.6f</td><td>%.6f</td><td>%.6f</td><td>%.6f</td><td>", r->wall_s,
                r->compute_s, r->comm_s, r->wait_s);
        num(f, "%.6f", r->p2p_wait_s);
        fputs("</td><td>", f);
        num(f, "%.6f", r->p2p_caused_s);
        fprintf(f, "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%s</td></tr>\n", r->calls,
                r->bytes, r->partial ? "yes" : "no");
    }
    fputs("</table>\n", f);
    if (fold)
        fputs("</details>\n", f);
    rank_rows_done(rep, f, show, key, rep->nranks, "that computed most", "that computed least");
}

static void fact(FILE *f, const char *k, const char *v)
{
    fprintf(f, "<tr><th>%s</th><td>", k);
    esc(f, v);
    fputs("</td></tr>\n", f);
}

static void sec_facts(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_views *v = rep->views;
    char b[512];
    fputs("<table class=\"facts\">\n", f);
    fact(f, "program", rep->program[0] ? rep->program : "-");
    if (v && v->command[0])
        fact(f, "command", v->command);
    fact(f, "run directory", rep->dir);
    snprintf(b, sizeof b, "%016" PRIx64, rep->run_id);
    fact(f, "run id", b);
    snprintf(b, sizeof b, "%d expected, %d found, on %d host%s", rep->ranks_expected,
             rep->ranks_found, rep->hosts, rep->hosts == 1 ? "" : "s");
    fact(f, "ranks", b);
    int kineto = strcmp(rep->source, "kineto") == 0;
    if (v && kineto) {
        snprintf(b, sizeof b, "%.6f s from the first trace's start to the last rank's end",
                 v->span_s);
        fact(f, "span", b);
        fact(f, "timing source",
             "PyTorch profiler (Kineto) traces: each host's wall clock, ranks corrected by the "
             "end times of collective instances (see the Kineto import in the JSON and text "
             "reports)");
    } else if (v) {
        snprintf(b, sizeof b, "%.6f s from the first MPI_Init to the last rank's end", v->span_s);
        fact(f, "span", b);
        snprintf(b, sizeof b,
                 "each rank's CLOCK_MONOTONIC, mapped onto rank 0's: %d rank%s linear in two "
                 "offset samples, %d with one constant offset, %d uncorrected",
                 v->clock_linear, v->clock_linear == 1 ? "" : "s", v->clock_constant,
                 v->clock_none);
        fact(f, "timing source", b);
    }
    if (v) {
        snprintf(b, sizeof b,
                 "largest offset %.9f s, uncertainty %.9f s, largest drift %.3f ppm, %" PRIu64
                 " causality violations repaired",
                 rep->max_offset_s, rep->uncertainty_s, v->max_drift_ppm, rep->violations_repaired);
        fact(f, "clock correction", b);
    }
    snprintf(b, sizeof b,
             "%" PRIu64 " events, %" PRIu64 " dropped, %" PRIu64 " unrecorded empty tests; %zu "
             "missing rank%s, %zu partial",
             rep->events, rep->dropped_events, rep->unrecorded_tests, rep->nmissing,
             rep->nmissing == 1 ? "" : "s", rep->npartial);
    fact(f, "trace completeness", b);
    if (rep->window_ranks) {
        snprintf(b, sizeof b,
                 "%d rank%s kept the newest events of the run (ring mode); the event-level "
                 "sections cover the run from %.6f s on, and the %" PRIu64
                 " events before it count in the totals (calls, bytes, times) only",
                 rep->window_ranks, rep->window_ranks == 1 ? "" : "s", rep->window_start_s,
                 rep->outside_events);
        fact(f, "trace window", b);
    }
    if (rep->nmissing) {
        fputs("<tr><th>missing ranks</th><td>", f);
        for (size_t i = 0; i < rep->nmissing; i++)
            fprintf(f, "%s%d", i ? " " : "", rep->missing[i]);
        fputs("</td></tr>\n", f);
    }
    if (rep->npartial) {
        fputs("<tr><th>partial ranks</th><td>", f);
        for (size_t i = 0; i < rep->npartial; i++)
            fprintf(f, "%s%d", i ? " " : "", rep->partial[i]);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void sec_problems(const struct cs_report *rep, FILE *f)
{
    if (!rep->nproblems) {
        fputs("<p>None.</p>\n", f);
        return;
    }
    fputs("<ul>\n", f);
    for (size_t i = 0; i < rep->nproblems; i++) {
        fputs("<li>", f);
        esc(f, rep->problems[i]);
        fputs("</li>\n", f);
    }
    fputs("</ul>\n", f);
}

static const struct section {
    const char *id, *title;
    void (*fn)(const struct cs_report *rep, FILE *f);
} sections[] = {
    {"verdict", "Verdict", sec_verdict},
    {"hang", "Hang diagnosis", cs__hang_html},
    {"breakdown", "Where each rank's time goes", sec_breakdown},
    {"waits", "Waiting: rank &#215; step", sec_heat},
    {"p2p", "Point-to-point bytes: rank &#215; rank", sec_p2p},
    {"bandwidth", "Bandwidth against message size", sec_bw},
    {"wire", "On the wire", cs__report_wire_html},
    {"hosts", "Hosts and topology", cs__report_nodes_html},
    {"overlap", "Overlap of communication with compute", sec_overlap},
    {"steps", "Steps", sec_steps},
    {"phases", "Step phases", cs__phases_html},
    {"resources", "Resource use", cs__res_html},
    {"flops", "Model FLOPs and MFU", cs__flops_html},
    {"groups", "Parallelism groups", sec_groups},
    {"efficiency", "Efficiency (POP)", sec_efficiency},
    {"whatif", "What if", sec_whatif},
    {"ops", "Operations", sec_ops},
    {"stragglers", "Stragglers", sec_stragglers},
    {"ranks", "Per-rank numbers", sec_ranks},
    {"facts", "Run facts", sec_facts},
    {"problems", "Problems", sec_problems},
};

static const char css[] =
    "body{font:14px/1.45 system-ui,sans-serif;color:#222;max-width:1000px;margin:0 auto;"
    "padding:0 16px 40px}h1{font-size:22px;margin:18px 0 2px}h2{font-size:17px;"
    "border-bottom:1px solid #ddd;padding-bottom:3px;margin-top:28px}.sub{color:#666;margin:0}"
    "nav{font-size:12px;margin:10px 0}nav a{margin-right:10px}ul.verdict li{margin:6px 0;"
    "font-size:15px}table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;"
    "padding:2px 6px;text-align:right}th{background:#f4f4f4}table.facts th,table.facts td{"
    "text-align:left}.na{color:#8a5a00;background:#fff7e6;padding:6px 8px;border-left:3px solid "
    "#e0a030}.warn{color:#7a1616;background:#fdecec;padding:6px 8px;border-left:3px solid "
    "#e15759}tr.bad td{background:#fdecec}td.l{text-align:left}"
    "svg.chart{display:block;margin:6px 0}svg text{font-size:11px;fill:#333}"
    "h3{font-size:14px;margin:14px 0 4px}svg text.small{font-size:9px}svg "
    "text.axis{fill:#666}.legend span{margin-right:12px;"
    "font-size:12px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}";

/* Reorders the breakdown's bars; nothing else runs. */
static const char script[] =
    "(function(){var s=document.getElementById('sortby'),g=document.getElementById('bars');"
    "if(!s||!g)return;var rh=+g.getAttribute('data-rh');"
    "var bars=Array.prototype.slice.call(g.querySelectorAll('g.bar'));"
    "s.addEventListener('change',function(){var k=s.value;bars.sort(function(a,b){"
    "if(k==='rank')return a.getAttribute('data-rank')-b.getAttribute('data-rank');"
    "return b.getAttribute('data-'+k)-a.getAttribute('data-'+k);});"
    "bars.forEach(function(e,i){e.setAttribute('transform','translate(0,'+i*rh+')');});});"
    "document.body.setAttribute('data-ready','1');})();";

/* The sections only some runs have: the hang diagnosis (a job that stopped), the model FLOPs
 * (when asked for). */
static int shown(const struct section *s, const struct cs_report *rep)
{
    return (s->fn != cs__hang_html || rep->hang) && (s->fn != cs__flops_html || rep->flops) &&
           (s->fn != cs__phases_html || rep->phases) && (s->fn != cs__res_html || rep->resources);
}

int cs__report_html(const struct cs_report *rep, FILE *f)
{
    const char *prog = strrchr(rep->program, '/');
    prog = prog ? prog + 1 : rep->program[0] ? rep->program : "run";
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>commscope: ",
          f);
    esc(f, prog);
    fprintf(f, "</title>\n<style>%s</style></head>\n<body>\n<h1>commscope report: ", css);
    esc(f, prog);
    fprintf(f, "</h1>\n<p class=\"sub\">%d rank%s on %d host%s &middot; run ", rep->ranks_found,
            rep->ranks_found == 1 ? "" : "s", rep->hosts, rep->hosts == 1 ? "" : "s");
    fprintf(f, "%016" PRIx64 " &middot; ", rep->run_id);
    esc(f, rep->dir);
    fputs("</p>\n<nav>", f);
    for (size_t i = 0; i < sizeof sections / sizeof *sections; i++)
        if (shown(&sections[i], rep))
            fprintf(f, "<a href=\"#%s\">%s</a>", sections[i].id, sections[i].title);
    fputs("</nav>\n", f);
    for (size_t i = 0; i < sizeof sections / sizeof *sections; i++) {
        if (!shown(&sections[i], rep))
            continue;
        fprintf(f, "<section id=\"%s\"><h2>%s</h2>\n", sections[i].id, sections[i].title);
        sections[i].fn(rep, f);
        fputs("</section>\n", f);
    }
    fprintf(f, "<script>%s</script>\n</body></html>\n", script);
    return ferror(f) ? CS_EIO : 0;
}

int cs__report_wire_page(const struct cs_wire_report *w, FILE *f)
{
    fprintf(f,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>commscope: "
            "wire</title>\n<style>%s</style></head>\n<body>\n<h1>commscope wire report</h1>\n"
            "<p class=\"sub\">capture files only: no traces, so nothing is compared with the "
            "communication the program made</p>\n<section id=\"wire\"><h2>On the wire</h2>\n",
            css);
    cs__report_wire_body(w, f);
    fputs("</section>\n</body></html>\n", f);
    return ferror(f) ? CS_EIO : 0;
}
