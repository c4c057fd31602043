/*
 * The resource use section (resources.h) in text, JSON and HTML.  Formatting only: the numbers
 * and series are resources.c's (docs/metrics.md "Resource use").
 */
#include <math.h>
#include <stdio.h>

#include "internal.h"
#include "json.h"
#include "resources.h"

#define JSON_RANK_SERIES 64 /* CPU series in the JSON: the busiest and the least busy ranks */

static const char *num(char *buf, size_t n, const char *fmt, double v)
{
    if (!isfinite(v))
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, fmt, v);
    return buf;
}

static double mib(double b)
{
    return b / (1024.0 * 1024.0);
}

/* Whether the i-th entry of cpu_order is shown when at most `max` are: the max/2 busiest and the
 * max/2 least busy. */
static int shown(size_t i, size_t n, size_t max)
{
    return n <= max || i < max / 2 || i >= n - max / 2;
}

void cs__res_text(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_resources *o = rep->resources;
    if (!o)
        return;
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(out, "\n@--- Resource use %s\n", "----------------------------------------------");
    fprintf(out, "sampled at %s Hz; CPU in cores kept busy (1.00 = one core)\n",
            num(a, sizeof a, "%.1f", o->hz));
    fprintf(out, "%-6s %-20s %8s %9s %9s %10s %10s\n", "rank", "host", "samples", "cpu_util",
            "cpu_max", "rss_MiB", "rss_peak");
    for (size_t k = 0; k < o->nranks; k++) {
        size_t i = o->cpu_order[k];
        if (!shown(k, o->nranks, 2 * CS_RES_SERIES)) {
            if (k == CS_RES_SERIES)
                fprintf(out, "  ... %zu ranks between ...\n", o->nranks - 2 * CS_RES_SERIES);
            continue;
        }
        const struct cs_report_res_rank *x = &o->ranks[i];
        fprintf(out, "%-6d %-20.20s %8llu %9s %9s %10s %10s\n", x->rank, x->host,
                (unsigned long long)x->samples, num(a, sizeof a, "%.2f", x->cpu_util),
                num(b, sizeof b, "%.2f", x->cpu_util_max),
                num(c, sizeof c, "%.1f", mib(x->rss_mean_bytes)),
                num(d, sizeof d, "%.1f", mib(x->rss_peak_bytes)));
    }
    if (o->nnics) {
        fprintf(out, "%-20s %-10s %9s %12s %12s %9s %9s\n", "host", "interface", "speed_Gb",
                "rx_MiB", "tx_MiB", "peak_Gb/s", "peak_use");
        for (size_t i = 0; i < o->nnics; i++) {
            const struct cs_report_res_nic *x = &o->nics[i];
            fprintf(out, "%-20.20s %-10s %9s %12s %12s %9s %9s\n", x->host, x->name,
                    num(a, sizeof a, "%.1f", x->speed_mbps > 0 ? x->speed_mbps / 1000.0 : NAN),
                    num(b, sizeof b, "%.2f", mib(x->rx_bytes)),
                    num(c, sizeof c, "%.2f", mib(x->tx_bytes)),
                    num(d, sizeof d, "%.3f", x->peak_gbps),
                    num(e, sizeof e, "%.1f%%", 100 * x->peak_util));
        }
    }
    if (o->ngpus) {
        fprintf(out, "%-20s %4s %6s %6s %6s %10s %8s %8s\n", "host", "gpu", "rank", "util%", "min%",
                "mem_peak", "power_W", "sm_MHz");
        for (size_t i = 0; i < o->ngpus; i++) {
            const struct cs_report_res_gpu *x = &o->gpus[i];
            char rk[16];
            fprintf(out, "%-20.20s %4d %6s %6s %6s %10s %8s %8s\n", x->host, x->index,
                    x->rank >= 0 ? (snprintf(rk, sizeof rk, "%d", x->rank), rk) : "-",
                    num(a, sizeof a, "%.1f", x->util_mean), num(b, sizeof b, "%.0f", x->util_min),
                    num(c, sizeof c, "%.0fMiB", mib(x->mem_peak_bytes)),
                    num(d, sizeof d, "%.1f", x->power_mean_w),
                    num(e, sizeof e, "%.0f", x->sm_clock_mean_mhz));
        }
    }
}

static void series(struct cs__jw *w, const double *v, int n)
{
    cs__jw_open(w, "values", '[');
    for (int k = 0; k < n; k++)
        cs__jw_num(w, NULL, v[k]);
    cs__jw_close(w, ']');
}

void cs__res_json(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_resources *o = rep->resources;
    if (!o)
        return;
    struct cs__jw w = {.f = out, .depth = 1};
    cs__jw_open(&w, "resources", '{');
    cs__jw_num(&w, "hz", o->hz);
    cs__jw_num(&w, "bin_s", o->bin_s);
    cs__jw_int(&w, "bins", o->nbins);
    cs__jw_open(&w, "ranks", '[');
    for (size_t i = 0; i < o->nranks; i++) {
        const struct cs_report_res_rank *x = &o->ranks[i];
        if (!cs_report_rank_listed(rep, x->rank))
            continue;
        cs__jw_open(&w, NULL, '{');
        cs__jw_int(&w, "rank", x->rank);
        cs__jw_str(&w, "host", x->host);
        cs__jw_u64(&w, "samples", x->samples);
        cs__jw_num(&w, "span_s", x->span_s);
        cs__jw_num(&w, "cpu_s", x->cpu_s);
        cs__jw_num(&w, "cpu_util", x->cpu_util);
        cs__jw_num(&w, "cpu_util_max", x->cpu_util_max);
        cs__jw_num(&w, "rss_mean_bytes", x->rss_mean_bytes);
        cs__jw_num(&w, "rss_peak_bytes", x->rss_peak_bytes);
        if (x->gpu >= 0)
            cs__jw_int(&w, "gpu", x->gpu);
        else
            cs__jw_num(&w, "gpu", NAN);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_open(&w, "nics", '[');
    for (size_t i = 0; i < o->nnics; i++) {
        const struct cs_report_res_nic *x = &o->nics[i];
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "host", x->host);
        cs__jw_str(&w, "name", x->name);
        cs__jw_num(&w, "speed_gbps", x->speed_mbps > 0 ? x->speed_mbps / 1000.0 : NAN);
        cs__jw_num(&w, "span_s", x->span_s);
        cs__jw_num(&w, "rx_bytes", x->rx_bytes);
        cs__jw_num(&w, "tx_bytes", x->tx_bytes);
        cs__jw_num(&w, "rx_gbps", x->rx_gbps);
        cs__jw_num(&w, "tx_gbps", x->tx_gbps);
        cs__jw_num(&w, "peak_gbps", x->peak_gbps);
        cs__jw_num(&w, "peak_util", x->peak_util);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_open(&w, "gpus", '[');
    for (size_t i = 0; i < o->ngpus; i++) {
        const struct cs_report_res_gpu *x = &o->gpus[i];
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "host", x->host);
        cs__jw_int(&w, "index", x->index);
        cs__jw_str_or_null(&w, "pci", x->pci);
        if (x->rank >= 0)
            cs__jw_int(&w, "rank", x->rank);
        else
            cs__jw_num(&w, "rank", NAN);
        cs__jw_u64(&w, "samples", x->samples);
        cs__jw_num(&w, "util_mean", x->util_mean);
        cs__jw_num(&w, "util_min", x->util_min);
        cs__jw_num(&w, "util_max", x->util_max);
        cs__jw_num(&w, "mem_peak_bytes", x->mem_peak_bytes);
        cs__jw_num(&w, "mem_total_bytes", x->mem_total_bytes);
        cs__jw_num(&w, "power_mean_w", x->power_mean_w);
        cs__jw_num(&w, "power_max_w", x->power_max_w);
        cs__jw_num(&w, "sm_clock_mean_mhz", x->sm_clock_mean_mhz);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_open(&w, "series", '{');
    cs__jw_open(&w, "cpu", '[');
    for (size_t k = 0; k < o->nranks; k++) {
        if (!shown(k, o->nranks, JSON_RANK_SERIES))
            continue;
        size_t i = o->cpu_order[k];
        cs__jw_open(&w, NULL, '{');
        cs__jw_int(&w, "rank", o->ranks[i].rank);
        series(&w, &o->cpu[i * (size_t)o->nbins], o->nbins);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_open(&w, "net", '[');
    for (size_t i = 0; i < o->nnics; i++) {
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "host", o->nics[i].host);
        cs__jw_str(&w, "name", o->nics[i].name);
        series(&w, &o->net[i * (size_t)o->nbins], o->nbins);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_open(&w, "gpu", '[');
    for (size_t i = 0; i < o->ngpus; i++) {
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "host", o->gpus[i].host);
        cs__jw_int(&w, "index", o->gpus[i].index);
        series(&w, &o->gpu[i * (size_t)o->nbins], o->nbins);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_close(&w, '}');
    cs__jw_close(&w, '}');
}

/* One line chart of up to CS_RES_SERIES series over the run's bins. */
struct chart_line {
    const double *v;
    char label[96];
};

static void chart(FILE *f, const char *title, const char *unit, const struct chart_line *l,
                  size_t n, int nbins, double bin_s)
{
    double ymax = 0;
    for (size_t s = 0; s < n; s++)
        for (int k = 0; k < nbins; k++)
            if (isfinite(l[s].v[k]) && l[s].v[k] > ymax)
                ymax = l[s].v[k];
    ymax = ymax > 0 ? ymax * 1.1 : 1;
    int lw = 60, pw = 600, ph = 160, top = 10;
    fprintf(f, "<h3>%s</h3>\n", title);
    fprintf(f,
            "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n"
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#ccc\"/>\n",
            lw + pw + 20, top + ph + 36, lw + pw + 20, top + ph + 36, lw, top, pw, ph);
    for (int t = 0; t <= 4; t++)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" class=\"axis\">%.3g</text>",
                lw - 4, top + ph - (double)ph * t / 4 + 4, ymax * t / 4);
    fprintf(
        f,
        "<text x=\"%d\" y=\"%d\" class=\"axis\">0 s</text><text x=\"%d\" y=\"%d\" "
        "text-anchor=\"end\" class=\"axis\">%.3g s</text>"
        "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"axis\">%s over the run</text>\n",
        lw, top + ph + 14, lw + pw, top + ph + 14, bin_s * nbins, lw + pw / 2, top + ph + 30, unit);
    for (size_t s = 0; s < n; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                cs__html_palette[s % CS__HTML_PALETTE]);
        for (int k = 0; k < nbins; k++)
            if (isfinite(l[s].v[k]))
                fprintf(f, "%.1f,%.1f ", lw + pw * (k + 0.5) / nbins,
                        top + ph - ph * (l[s].v[k] > 0 ? l[s].v[k] : 0) / ymax);
        fputs("\"><title>", f);
        cs__html_esc(f, l[s].label);
        fputs("</title></polyline>\n", f);
    }
    fputs("</svg>\n<p class=\"legend\">", f);
    for (size_t s = 0; s < n; s++) {
        fprintf(f, "<span><i style=\"background:%s\"></i>", cs__html_palette[s % CS__HTML_PALETTE]);
        cs__html_esc(f, l[s].label);
        fputs("</span> ", f);
    }
    fputs("</p>\n", f);
}

void cs__res_html(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_resources *o = rep->resources;
    if (!o)
        return;
    struct chart_line l[CS_RES_SERIES];
    size_t n = 0;
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(f,
            "<p>Sampled by the collector at %s Hz: each rank's CPU time and resident memory, each "
            "node's network interfaces and GPUs.  CPU utilisation is in cores kept busy (1.00 = "
            "one core).</p>\n",
            num(a, sizeof a, "%.1f", o->hz));
    for (size_t k = 0; k < o->nranks && n < CS_RES_SERIES; k++)
        if (shown(k, o->nranks, CS_RES_SERIES)) {
            size_t i = o->cpu_order[k];
            l[n].v = &o->cpu[i * (size_t)o->nbins];
            snprintf(l[n].label, sizeof l[n].label, "rank %d (%.2f)", o->ranks[i].rank,
                     o->ranks[i].cpu_util);
            n++;
        }
    if (o->nranks > CS_RES_SERIES)
        fprintf(f, "<p>The %d busiest and %d least busy of %zu ranks are drawn.</p>\n",
                CS_RES_SERIES / 2, CS_RES_SERIES / 2, o->nranks);
    chart(f, "CPU utilisation", "cores", l, n, o->nbins, o->bin_s);
    fputs("<table class=\"facts\"><tr><th>rank</th><th class=\"l\">host</th><th>samples</th>"
          "<th>CPU cores</th><th>max</th><th>RSS MiB</th><th>peak MiB</th></tr>\n",
          f);
    for (size_t k = 0; k < o->nranks; k++) {
        if (!shown(k, o->nranks, CS_RES_SERIES))
            continue;
        const struct cs_report_res_rank *x = &o->ranks[o->cpu_order[k]];
        fprintf(f, "<tr><td>%d</td><td class=\"l\">", x->rank);
        cs__html_esc(f, x->host);
        fprintf(f, "</td><td>%llu</td><td>%s</td><td>%s</td><td>%.1f</td><td>%.1f</td></tr>\n",
                (unsigned long long)x->samples, num(a, sizeof a, "%.2f", x->cpu_util),
                num(b, sizeof b, "%.2f", x->cpu_util_max), mib(x->rss_mean_bytes),
                mib(x->rss_peak_bytes));
    }
    fputs("</table>\n", f);
    n = 0;
    for (size_t i = 0; i < o->nnics && n < CS_RES_SERIES; i++, n++) {
        l[n].v = &o->net[i * (size_t)o->nbins];
        snprintf(l[n].label, sizeof l[n].label, "%s %s", o->nics[i].host, o->nics[i].name);
    }
    if (n)
        chart(f, "Network (received + sent)", "Gb/s", l, n, o->nbins, o->bin_s);
    n = 0;
    for (size_t i = 0; i < o->ngpus && n < CS_RES_SERIES; i++, n++) {
        l[n].v = &o->gpu[i * (size_t)o->nbins];
        if (o->gpus[i].rank >= 0)
            snprintf(l[n].label, sizeof l[n].label, "%s GPU %d (rank %d)", o->gpus[i].host,
                     o->gpus[i].index, o->gpus[i].rank);
        else
            snprintf(l[n].label, sizeof l[n].label, "%s GPU %d", o->gpus[i].host, o->gpus[i].index);
    }
    if (n) {
        chart(f, "GPU utilisation", "%", l, n, o->nbins, o->bin_s);
        fputs("<table class=\"facts\"><tr><th class=\"l\">host</th><th>GPU</th><th>rank</th>"
              "<th>util %</th><th>min %</th><th>memory peak MiB</th><th>power W</th>"
              "<th>SM MHz</th></tr>\n",
              f);
        for (size_t i = 0; i < o->ngpus; i++) {
            const struct cs_report_res_gpu *x = &o->gpus[i];
            fputs("<tr><td class=\"l\">", f);
            cs__html_esc(f, x->host);
            fprintf(f, "</td><td>%d</td><td>", x->index);
            if (x->rank >= 0)
                fprintf(f, "%d", x->rank);
            else
                fputs("-", f);
            fprintf(f, "</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
                    num(a, sizeof a, "%.1f", x->util_mean), num(b, sizeof b, "%.0f", x->util_min),
                    num(c, sizeof c, "%.0f", mib(x->mem_peak_bytes)),
                    num(d, sizeof d, "%.1f", x->power_mean_w),
                    num(e, sizeof e, "%.0f", x->sm_clock_mean_mhz));
        }
        fputs("</table>\n", f);
    }
}
