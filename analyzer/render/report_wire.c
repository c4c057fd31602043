/* The wire section's renderers, text and JSON (schema in docs/report-schema.md).  Formatting
 * only. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "wire.h"
#include "json.h"

static void jnum(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

/* Byte counts in full (not to 6 digits), null when unknown. */
static void jbytes(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.0f", v);
    else
        fputs("null", f);
}

void cs__report_wire_json(const struct cs_wire_report *w, FILE *f)
{
    if (!w)
        return;
    fputs(",\n  \"wire\": {\n    \"sources\": [", f);
    for (size_t i = 0; i < w->nsources; i++) {
        fputs(i ? ", " : "", f);
        cs__json_str(f, w->sources[i]);
    }
    fputs("],\n    \"interfaces\": [", f);
    for (size_t i = 0; i < w->nifaces; i++) {
        const struct cs_wire_report_iface *x = &w->ifaces[i];
        fprintf(f, "%s\n      {\"host\": ", i ? "," : "");
        cs__json_str(f, x->host);
        fputs(", \"name\": ", f);
        cs__json_str(f, x->name);
        fprintf(f, ", \"bytes\": %llu, \"packets\": %llu, \"expected\": %s, \"speed_mbps\": ",
                (unsigned long long)x->bytes, (unsigned long long)x->pkts,
                x->expected < 0 ? "null"
                : x->expected   ? "true"
                                : "false");
        if (x->speed_mbps > 0)
            fprintf(f, "%ld", x->speed_mbps);
        else
            fputs("null", f);
        fputs(", \"share\": ", f);
        jnum(f, x->share);
        fputs("}", f);
    }
    fputs(w->nifaces ? "\n    ],\n    \"captures\": [" : "],\n    \"captures\": [", f);
    for (size_t i = 0; i < w->ncaptures; i++) {
        const struct cs_wire_report_capture *x = &w->captures[i];
        fprintf(f, "%s\n      {\"host\": ", i ? "," : "");
        cs__json_str(f, x->host);
        fprintf(f, ", \"captured\": %s, \"complete\": %s", x->no_capture ? "false" : "true",
                x->complete ? "true" : "false");
        /* the totals are the end line's: unknown (null) in a file that ends early */
        const char *key[] = {"packets",       "bytes",     "ip_packets", "non_ip",
                             "short_headers", "untracked", "bad_time"};
        const uint64_t val[] = {x->packets,       x->bytes,     x->ip_packets, x->non_ip,
                                x->short_headers, x->untracked, x->bad_time};
        for (size_t k = 0; k < sizeof key / sizeof key[0]; k++) {
            fprintf(f, ", \"%s\": ", key[k]);
            if (x->complete)
                fprintf(f, "%llu", (unsigned long long)val[k]);
            else
                fputs("null", f);
        }
        fputs("}", f);
    }
    fputs(w->ncaptures ? "\n    ],\n    \"peers\": [" : "],\n    \"peers\": [", f);
    for (size_t i = 0; i < w->npeers; i++) {
        const struct cs_wire_report_peer *p = &w->peers[i];
        fprintf(f, "%s\n      {\"host\": ", i ? "," : "");
        cs__json_str(f, p->host);
        fputs(", \"peer\": ", f);
        cs__json_str(f, p->peer);
        fprintf(f,
                ", \"bytes_tx\": %llu, \"bytes_rx\": %llu, \"packets_tx\": %llu, \"packets_rx\": "
                "%llu, \"retransmits\": %llu, \"retransmit_rate\": ",
                (unsigned long long)p->bytes_tx, (unsigned long long)p->bytes_rx,
                (unsigned long long)p->pkts_tx, (unsigned long long)p->pkts_rx,
                (unsigned long long)p->retransmits);
        jnum(f, p->retransmit_rate);
        fprintf(f, ", \"dupacks_rx\": %llu, \"roce_bytes\": %llu, \"peak_gbps\": ",
                (unsigned long long)p->dupacks_rx, (unsigned long long)p->roce_bytes);
        jnum(f, p->peak_gbps);
        fputs(", \"collective_gbps\": ", f);
        jnum(f, p->collective_gbps);
        fputs(", \"traced_p2p_bytes\": ", f);
        jbytes(f, p->traced_p2p);
        fputs(", \"collective_bytes_max\": ", f);
        jbytes(f, isfinite(p->traced_p2p) ? p->coll_max : NAN);
        fputs(", \"p2p_ratio\": ", f);
        jnum(f, p->p2p_ratio);
        fputs(", \"verdict\": ", f);
        if (p->verdict)
            cs__json_str(f, p->verdict);
        else
            fputs("null", f);
        fputs("}", f);
    }
    fputs(w->npeers ? "\n    ],\n    \"hosts\": [" : "],\n    \"hosts\": [", f);
    for (size_t i = 0; i < w->nhosts; i++) {
        const struct cs_wire_report_host *x = &w->hosts[i];
        fprintf(f, "%s\n      {\"host\": ", i ? "," : "");
        cs__json_str(f, x->host);
        fprintf(f, ", \"wire_tx_bytes\": %llu, \"p2p_bytes\": ", (unsigned long long)x->wire_tx);
        jbytes(f, x->p2p);
        fputs(", \"collective_bytes_min\": ", f);
        jbytes(f, x->coll_min);
        fputs(", \"collective_bytes_max\": ", f);
        jbytes(f, x->coll_max);
        fputs(", \"ratio_min\": ", f);
        jnum(f, x->ratio_min);
        fputs(", \"ratio_max\": ", f);
        jnum(f, x->ratio_max);
        fputs(", \"verdict\": ", f);
        cs__json_str(f, x->verdict);
        fputs("}", f);
    }
    fprintf(f, "%s    \"traced_bytes\": %llu,\n    \"wire_bytes\": %llu,\n    \"ratio\": ",
            w->nhosts ? "\n    ],\n" : "],\n", (unsigned long long)w->traced_bytes,
            (unsigned long long)w->wire_bytes);
    jnum(f, w->ratio);
    fputs(",\n    \"collective_gbps\": ", f);
    jnum(f, w->collective_gbps);
    fprintf(f, ",\n    \"retransmits\": %llu,\n    \"series\": [",
            (unsigned long long)w->retransmits);
    for (size_t i = 0; i < w->nseries; i++) {
        const struct cs_wire_report_series *s = &w->series[i];
        fprintf(f, "%s\n      {\"host\": ", i ? "," : "");
        cs__json_str(f, s->host);
        fputs(", \"peer\": ", f);
        cs__json_str(f, s->peer);
        fputs(", \"t0_s\": ", f);
        fprintf(f, "%.9f", s->t0_s);
        fputs(", \"step_s\": ", f);
        jnum(f, s->step_s);
        fputs(", \"tx_bytes\": [", f);
        for (size_t k = 0; k < s->n; k++)
            fprintf(f, "%s%llu", k ? "," : "", (unsigned long long)s->tx[k]);
        fputs("]}", f);
    }
    fputs(w->nseries ? "\n    ],\n    \"warnings\": [" : "],\n    \"warnings\": [", f);
    for (size_t i = 0; i < w->nwarnings; i++) {
        fputs(i ? ",\n      " : "\n      ", f);
        cs__json_str(f, w->warnings[i]);
    }
    fputs(w->nwarnings ? "\n    ]\n  }" : "]\n  }", f);
}

static const char *num(char *b, size_t n, const char *fmt, double v)
{
    if (isfinite(v))
        snprintf(b, n, fmt, v);
    else
        snprintf(b, n, "-");
    return b;
}

void cs__report_wire_text(const struct cs_wire_report *w, FILE *out)
{
    if (!w)
        return;
    char a[32], b[32], c[32];
    fprintf(out, "\n@--- Wire (%zu capture files) %s\n", w->nsources,
            "----------------------------------");
    for (size_t i = 0; i < w->nwarnings; i++)
        fprintf(out, "WARNING: %s\n", w->warnings[i]);
    fprintf(out,
            "traced_bytes %llu  wire_bytes %llu  ratio %s  collective_gbps %s  "
            "retransmits %llu\n",
            (unsigned long long)w->traced_bytes, (unsigned long long)w->wire_bytes,
            num(a, sizeof a, "%.3f", w->ratio), num(b, sizeof b, "%.3f", w->collective_gbps),
            (unsigned long long)w->retransmits);
    fprintf(out, "%-16s %-12s %14s %10s %6s %9s\n", "Host", "Interface", "Bytes", "Packets",
            "Share", "Expected");
    for (size_t i = 0; i < w->nifaces; i++) {
        const struct cs_wire_report_iface *x = &w->ifaces[i];
        fprintf(out, "%-16s %-12s %14llu %10llu %6s %9s\n", x->host, x->name,
                (unsigned long long)x->bytes, (unsigned long long)x->pkts,
                num(a, sizeof a, "%.0f%%", 100 * x->share),
                x->expected < 0 ? "?"
                : x->expected   ? "yes"
                                : "NO");
    }
    fprintf(out, "%-16s %10s %14s %10s %8s %8s %s\n", "Capture", "Packets", "Bytes", "IP", "Non_IP",
            "Short", "Complete");
    for (size_t i = 0; i < w->ncaptures; i++) {
        const struct cs_wire_report_capture *x = &w->captures[i];
        if (x->complete)
            fprintf(out, "%-16s %10llu %14llu %10llu %8llu %8llu %s\n", x->host,
                    (unsigned long long)x->packets, (unsigned long long)x->bytes,
                    (unsigned long long)x->ip_packets, (unsigned long long)x->non_ip,
                    (unsigned long long)x->short_headers, x->no_capture ? "no capture" : "yes");
        else
            fprintf(out, "%-16s %10s %14s %10s %8s %8s %s\n", x->host, "-", "-", "-", "-", "-",
                    "NO (ends early)");
    }
    fprintf(out, "%-16s %-16s %14s %14s %8s %8s %9s %9s\n", "Host", "Peer", "Bytes_tx", "Bytes_rx",
            "Retrans", "Rate%", "Peak_Gbps", "Coll_Gbps");
    for (size_t i = 0; i < w->npeers; i++) {
        const struct cs_wire_report_peer *p = &w->peers[i];
        fprintf(
            out, "%-16s %-16s %14llu %14llu %8llu %8s %9s %9s\n", p->host, p->peer,
            (unsigned long long)p->bytes_tx, (unsigned long long)p->bytes_rx,
            (unsigned long long)p->retransmits, num(a, sizeof a, "%.3f", 100 * p->retransmit_rate),
            num(b, sizeof b, "%.3f", p->peak_gbps), num(c, sizeof c, "%.3f", p->collective_gbps));
    }
    /* Against the trace: exact per peer where only point-to-point crossed, a range per host. */
    int any = 0;
    for (size_t i = 0; i < w->npeers; i++)
        any |= isfinite(w->peers[i].traced_p2p);
    if (!any && !w->nhosts)
        return;
    fprintf(out, "%-16s %-16s %14s %14s %8s %s\n", "Host", "Peer", "Bytes_tx", "Traced_p2p",
            "Ratio", "Compared");
    for (size_t i = 0; i < w->npeers; i++) {
        const struct cs_wire_report_peer *p = &w->peers[i];
        if (!isfinite(p->traced_p2p))
            continue;
        fprintf(out, "%-16s %-16s %14llu %14.0f %8s %s\n", p->host, p->peer,
                (unsigned long long)p->bytes_tx, p->traced_p2p,
                num(a, sizeof a, "%.3f", p->p2p_ratio),
                p->verdict        ? p->verdict
                : p->coll_max > 0 ? "no: collectives crossed too (see the host rows)"
                                  : "no: nothing traced");
    }
    fprintf(out, "%-16s %14s %14s %14s %14s %15s %s\n", "Host", "Wire_tx", "P2P", "Coll_min",
            "Coll_max", "Ratio", "Verdict");
    for (size_t i = 0; i < w->nhosts; i++) {
        const struct cs_wire_report_host *x = &w->hosts[i];
        char r[80];
        snprintf(r, sizeof r, "%s-%s", num(a, sizeof a, "%.3f", x->ratio_min),
                 num(b, sizeof b, "%.3f", x->ratio_max));
        fprintf(out, "%-16s %14llu %14.0f %14.0f %14.0f %15s %s\n", x->host,
                (unsigned long long)x->wire_tx, x->p2p, x->coll_min, x->coll_max, r, x->verdict);
    }
}

#include <sys/stat.h>

int cs__is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int cs__analyze_wire_only(const char *json, const char *html, int quiet)
{
    struct cs_wire_report *w = cs__wire_only();
    if (!w) {
        fprintf(stderr, "commscope analyze: out of memory\n");
        return 3;
    }
    /* As for a run: 1 for input that could not be read (in full), not for what the wire shows */
    int status = w->nsources == 0 ? 3 : w->input_problems ? 1 : 0;
    if (w->nsources == 0) {
        for (size_t i = 0; i < w->nwarnings; i++)
            fprintf(stderr, "commscope analyze: %s\n", w->warnings[i]);
        fprintf(stderr, "commscope analyze: no capture file could be read\n");
        cs__wire_report_free(w);
        return status;
    }
    if (!quiet)
        cs__report_wire_text(w, stdout);
    if (json) {
        FILE *f = strcmp(json, "-") == 0 ? stdout : fopen(json, "w");
        if (!f) {
            perror(json);
            status = status ? status : 1;
        } else {
            fputs("{\n  \"schema\": \"commscope-report/1\"", f);
            cs__report_wire_json(w, f);
            fputs("\n}\n", f);
            if ((f != stdout && fclose(f) != 0) || (f == stdout && ferror(f))) {
                fprintf(stderr, "commscope analyze: error writing %s\n", json);
                status = status ? status : 1;
            }
        }
    }
    if (html) {
        FILE *f = fopen(html, "w");
        int bad = !f;
        if (f) {
            bad |= cs__report_wire_page(w, f) != 0;
            bad |= fclose(f) != 0;
        }
        if (bad) {
            fprintf(stderr, "commscope analyze: cannot write the HTML report to %s: %s\n", html,
                    strerror(errno));
            status = status ? status : 1;
        }
    }
    fflush(stdout);
    cs__wire_report_free(w);
    return status;
}
