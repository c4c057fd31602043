/*
 * The HTML report's wire section (runs captured with `commscope run --capture`): the warnings
 * (those about the job's traffic first), the wire against the traced communication, each capture
 * file's own totals, the interfaces, the links (bytes, retransmissions, rates), each host's sends
 * against the range the trace allows, and each link's send rate over time.  Formatting only: the
 * numbers are wire.c's (docs/metrics.md "Wire"; how to read them: docs/wire.md "Reading the wire
 * section").
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "wire.h"

static void cell_u64(FILE *f, uint64_t v)
{
    fprintf(f, "<td>%" PRIu64 "</td>", v);
}

static void captures(const struct cs_wire_report *w, FILE *f)
{
    if (!w->ncaptures)
        return;
    fputs("<h3>Captures</h3>\n<p>What each node's capture saw in all (its interfaces, every "
          "protocol). The tables below count IP traffic between the job's hosts only; frames "
          "that are not IP (ARP, LLDP, ...) or were cut too short to read are in these totals "
          "alone.</p>\n<table><tr><th>capture</th><th>complete</th><th>packets</th><th>bytes"
          "</th><th>IP</th><th>not IP</th><th>cut short</th><th>untracked flows</th>"
          "<th>bad timestamps</th></tr>\n",
          f);
    for (size_t i = 0; i < w->ncaptures; i++) {
        const struct cs_wire_report_capture *c = &w->captures[i];
        fputs("<tr>", f);
        cs__html_td(f, c->host);
        cs__html_td(f, c->no_capture ? "captured nothing"
                       : c->complete ? "yes"
                                     : "NO: ends early (a lower bound)");
        if (c->complete) {
            const uint64_t v[] = {c->packets,       c->bytes,     c->ip_packets, c->non_ip,
                                  c->short_headers, c->untracked, c->bad_time};
            for (size_t k = 0; k < sizeof v / sizeof *v; k++)
                cell_u64(f, v[k]);
        } else {
            fputs("<td colspan=\"7\">totals unknown: the file has no end line</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void interfaces(const struct cs_wire_report *w, FILE *f)
{
    if (!w->nifaces)
        return;
    fputs("<h3>Interfaces</h3>\n<table><tr><th>host</th><th>interface</th><th>bytes</th>"
          "<th>packets</th><th>share of the host's</th><th>expected</th><th>speed (Mb/s)</th>"
          "</tr>\n",
          f);
    for (size_t i = 0; i < w->nifaces; i++) {
        const struct cs_wire_report_iface *x = &w->ifaces[i];
        fputs("<tr>", f);
        cs__html_td(f, x->host);
        cs__html_td(f, x->name);
        cell_u64(f, x->bytes);
        cell_u64(f, x->pkts);
        cs__html_td_num(f, "%.1f %%", 100 * x->share);
        cs__html_td(f, x->expected < 0 ? "?" : x->expected ? "yes" : "NO");
        cs__html_td_num(f, "%.0f", x->speed_mbps > 0 ? (double)x->speed_mbps : NAN);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void links(const struct cs_wire_report *w, FILE *f)
{
    if (!w->npeers)
        return;
    fputs("<h3>Links</h3>\n<p>Per host and peer, as the host's capture saw them. A congested or "
          "lossy link shows retransmissions from the sender and duplicate ACKs coming back; a slow "
          "link a lower rate inside collectives than its peers. Traced: the point-to-point bytes "
          "the trace sent from host to peer, compared only where no collective crossed between "
          "the two.</p>\n<table><tr><th>host</th><th>peer</th><th>bytes sent</th>"
          "<th>bytes received</th><th>retransmits</th><th>rate %</th><th>dup ACKs back</th>"
          "<th>RoCE bytes</th><th>peak Gb/s</th><th>in collectives Gb/s</th><th>traced p2p bytes"
          "</th><th>wire / traced</th><th>verdict</th></tr>\n",
          f);
    for (size_t i = 0; i < w->npeers; i++) {
        const struct cs_wire_report_peer *p = &w->peers[i];
        fputs("<tr>", f);
        cs__html_td(f, p->host);
        cs__html_td(f, p->peer);
        cell_u64(f, p->bytes_tx);
        cell_u64(f, p->bytes_rx);
        cell_u64(f, p->retransmits);
        cs__html_td_num(f, "%.3f", 100 * p->retransmit_rate);
        cell_u64(f, p->dupacks_rx);
        cell_u64(f, p->roce_bytes);
        cs__html_td_num(f, "%.3f", p->peak_gbps);
        cs__html_td_num(f, "%.3f", p->collective_gbps);
        cs__html_td_num(f, "%.0f", p->traced_p2p);
        cs__html_td_num(f, "%.3f", p->p2p_ratio);
        cs__html_td(f, p->verdict                 ? p->verdict
                       : !isfinite(p->traced_p2p) ? "no trace"
                       : p->coll_max > 0          ? "not compared: collectives crossed too"
                                                  : "not compared: nothing traced");
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void hosts(const struct cs_wire_report *w, FILE *f)
{
    if (!w->nhosts)
        return;
    fputs("<h3>Each host's sends against the trace</h3>\n<p>What a host sends to the other hosts "
          "for a collective depends on the algorithm: the trace gives a range (point-to-point "
          "bytes are exact). Outside it, the wire carried more than any algorithm needs "
          "(retransmissions, other traffic) or less than the least one does (traffic the capture "
          "could not see: RDMA, another interface).</p>\n<table><tr><th>host</th><th>wire sent"
          "</th><th>traced p2p</th><th>collectives, least</th><th>collectives, most</th>"
          "<th>wire / traced</th><th>verdict</th></tr>\n",
          f);
    for (size_t i = 0; i < w->nhosts; i++) {
        const struct cs_wire_report_host *x = &w->hosts[i];
        fputs("<tr>", f);
        cs__html_td(f, x->host);
        cell_u64(f, x->wire_tx);
        cs__html_td_num(f, "%.0f", x->p2p);
        cs__html_td_num(f, "%.0f", x->coll_min);
        cs__html_td_num(f, "%.0f", x->coll_max);
        fputs("<td>", f);
        cs__html_num(f, "%.3f", x->ratio_min);
        fputs("&ndash;", f);
        cs__html_num(f, "%.3f", x->ratio_max);
        fputs("</td>", f);
        cs__html_td(f, x->verdict);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* A series the chart can place: points, a width and a start. */
static int drawable(const struct cs_wire_report_series *x)
{
    return x->n && x->step_s > 0 && isfinite(x->t0_s);
}

/* Point i of series x as Gb/s. */
static double gbps(const struct cs_wire_report_series *x, size_t i)
{
    return (double)x->tx[i] * 8 / x->step_s / 1e9;
}

static void link_name(FILE *f, const struct cs_wire_report_series *x)
{
    cs__html_esc(f, x->host);
    fputs(" &#8594; ", f);
    cs__html_esc(f, x->peer);
}

/* Each link's send rate per point of its series (Gb/s), for the CS__HTML_PALETTE links that sent
 * the most. */
static void rates(const struct cs_wire_report *w, FILE *f)
{
    /* the links that sent the most, in that order (as many as there are colours) */
    size_t pick[CS__HTML_PALETTE], n = 0;
    uint64_t sent[CS__HTML_PALETTE];
    for (size_t s = 0; s < w->nseries; s++) {
        uint64_t b = 0;
        for (size_t i = 0; i < w->series[s].n; i++)
            b += w->series[s].tx[i];
        size_t k = n < CS__HTML_PALETTE ? n++ : CS__HTML_PALETTE;
        for (; k > 0 && sent[k - 1] < b; k--)
            if (k < CS__HTML_PALETTE) {
                pick[k] = pick[k - 1];
                sent[k] = sent[k - 1];
            }
        if (k < CS__HTML_PALETTE) {
            pick[k] = s;
            sent[k] = b;
        }
    }
    double t0 = INFINITY, t1 = -INFINITY, ymax = 0;
    for (size_t c = 0; c < n; c++) {
        const struct cs_wire_report_series *x = &w->series[pick[c]];
        if (!drawable(x))
            continue;
        if (x->t0_s < t0)
            t0 = x->t0_s;
        if (x->t0_s + (double)x->n * x->step_s > t1)
            t1 = x->t0_s + (double)x->n * x->step_s;
        for (size_t i = 0; i < x->n; i++)
            if (gbps(x, i) > ymax)
                ymax = gbps(x, i);
    }
    if (!(t1 > t0) || !isfinite(t0) || !(ymax > 0))
        return;
    ymax *= 1.1;
    fputs("<h3>Send rate over time</h3>\n<p>Each link's bytes sent per capture bucket, as Gb/s", f);
    if (n < w->nseries)
        fprintf(f,
                " (the %zu of %zu links that sent the most; the JSON's <code>wire.series</code> "
                "has all)",
                n, w->nseries);
    fputs(". Times are on rank 0's trace clock where the node has a traced rank, else on the "
          "node's CLOCK_REALTIME.</p>\n",
          f);
    int lw = 70, pw = 600, ph = 220, top = 10;
    fprintf(f,
            "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n"
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#ccc\"/>\n",
            lw + pw + 20, top + ph + 40, lw + pw + 20, top + ph + 40, lw, top, pw, ph);
    for (int t = 0; t <= 4; t++)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" class=\"axis\">%.3g</text>",
                lw - 4, top + ph - (double)ph * t / 4 + 4, ymax * t / 4);
    for (int t = 0; t <= 4; t++)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" class=\"small\">%.6g</text>",
                lw + (double)pw * t / 4, top + ph + 14, (t1 - t0) * t / 4);
    fprintf(f,
            "<text x=\"12\" y=\"%d\" class=\"axis\" transform=\"rotate(-90 12 %d)\" "
            "text-anchor=\"middle\">Gb/s</text>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
            "class=\"axis\">seconds after %.6f s</text>\n",
            top + ph / 2, top + ph / 2, lw + pw / 2, top + ph + 32, t0);
    for (size_t c = 0; c < n; c++) {
        const struct cs_wire_report_series *x = &w->series[pick[c]];
        if (!drawable(x))
            continue;
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                cs__html_palette[c]);
        for (size_t i = 0; i < x->n; i++)
            fprintf(f, "%.1f,%.1f ",
                    lw + (double)pw * (x->t0_s + ((double)i + 0.5) * x->step_s - t0) / (t1 - t0),
                    top + ph - (double)ph * gbps(x, i) / ymax);
        fputs("\"><title>", f);
        link_name(f, x);
        fputs("</title></polyline>\n", f);
    }
    fputs("</svg>\n<p class=\"legend\">", f);
    for (size_t c = 0; c < n; c++) {
        fprintf(f, "<span><i style=\"background:%s\"></i>", cs__html_palette[c]);
        link_name(f, &w->series[pick[c]]);
        fputs("</span> ", f);
    }
    fputs("</p>\n", f);
}

void cs__report_wire_html(const struct cs_report *rep, FILE *f)
{
    const struct cs_wire_report *w = rep->wire;
    if (!w) {
        if (rep->hosts == 1)
            fputs("<p class=\"na\">Not available in this report: all ranks ran on one host, so "
                  "their traffic never crossed a network interface (shared memory).</p>\n",
                  f);
        else
            fputs("<p class=\"na\">Not available in this report: no wire capture was recorded "
                  "with this run (<code>commscope run --capture auto -- ...</code> records what "
                  "each node sends and receives on its interfaces).</p>\n",
                  f);
        return;
    }
    cs__report_wire_body(w, f);
}

void cs__report_wire_body(const struct cs_wire_report *w, FILE *f)
{
    /* Those about the job's traffic (the verdict's: off the expected interface, a lossy link)
     * first, then those about the capture. */
    for (int loud = 1; loud >= 0; loud--)
        for (size_t i = 0; i < w->nwarnings; i++)
            if ((w->verdict && w->verdict[i]) == loud) {
                fputs("<p class=\"warn\">", f);
                cs__html_esc(f, w->warnings[i]);
                fputs("</p>\n", f);
            }
    fprintf(f,
            "<p>%zu capture file%s. Between the job's hosts the wire carried %" PRIu64
            " bytes; the traced communication implies %" PRIu64 " (wire / traced ",
            w->nsources, w->nsources == 1 ? "" : "s", w->wire_bytes, w->traced_bytes);
    cs__html_num(f, "%.3f", w->ratio);
    fprintf(f, "). TCP retransmissions: %" PRIu64 ". Mean send rate inside collectives: ",
            w->retransmits);
    cs__html_num(f, "%.3f", w->collective_gbps);
    fputs(" Gb/s.</p>\n", f);
    captures(w, f);
    interfaces(w, f);
    links(w, f);
    hosts(w, f);
    rates(w, f);
}
