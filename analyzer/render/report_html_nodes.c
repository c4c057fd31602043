/*
 * The HTML report's hosts-and-topology section: each host (its topology snapshot, the NIC its
 * ranks use and its rate, the snapshot's warnings, InfiniBand port counters over the run), the
 * bytes and bandwidth inside and between hosts, each operation's bottleneck path with its
 * capacity and the share of it the operation reached, and each GPU rank's GPU-NIC affinity.
 * Formatting only: the numbers are nodes.c's and affinity.c's (docs/metrics.md, docs/topology.md).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "internal.h"
#include "nodes.h"

/* The error counters (all but the byte counts) that moved over the run are worth a look. */
static int port_errors(const struct cs_report_port *p)
{
    for (int k = 2; k < CS_N_COUNTERS; k++)
        if (cs__nodes_port_diff(p, k) > 0)
            return 1;
    return 0;
}

static void hosts(const struct cs_report_nodes *nd, FILE *f)
{
    fputs("<table><tr><th>host</th><th>ranks</th><th>topology snapshot</th><th>NIC used</th>"
          "<th>NIC Gb/s</th><th>GPUs</th><th>note</th></tr>\n",
          f);
    for (size_t i = 0; i < nd->nhosts; i++) {
        const struct cs_report_host *h = &nd->hosts[i];
        fputs("<tr>", f);
        cs__html_td(f, h->host);
        fprintf(f, "<td>%d</td>", h->nranks);
        cs__html_td(f, h->snapshot ? h->source : "none");
        cs__html_td(f, h->nic[0] ? h->nic : "-");
        cs__html_td_num(f, "%.1f", h->nic_gbps);
        fprintf(f, "<td>%d</td>", h->ngpus);
        cs__html_td(f, h->note);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    for (size_t i = 0; i < nd->nhosts; i++) {
        const struct cs_report_host *h = &nd->hosts[i];
        for (size_t k = 0; k < h->nwarnings; k++) {
            fputs("<p class=\"warn\">", f);
            cs__html_esc(f, h->host);
            fputs(": ", f);
            cs__html_esc(f, h->warnings[k]);
            fputs("</p>\n", f);
        }
    }
    size_t nports = 0;
    for (size_t i = 0; i < nd->nhosts; i++)
        nports += nd->hosts[i].nports;
    if (!nports)
        return;
    fputs("<h3>InfiniBand ports over the run</h3>\n<p>Each counter's change from before the job "
          "to after it (&ndash;: not read both times). Errors or link-downs here make a link slow "
          "or drop it.</p>\n<table><tr><th>host</th><th>port</th>",
          f);
    for (int k = 0; k < CS_N_COUNTERS; k++)
        fprintf(f, "<th>%s</th>", cs__nodes_counter[k]);
    fputs("</tr>\n", f);
    for (size_t i = 0; i < nd->nhosts; i++)
        for (size_t j = 0; j < nd->hosts[i].nports; j++) {
            const struct cs_report_port *p = &nd->hosts[i].ports[j];
            fputs(port_errors(p) ? "<tr class=\"bad\">" : "<tr>", f);
            cs__html_td(f, nd->hosts[i].host);
            fputs("<td>", f);
            cs__html_esc(f, p->nic);
            fprintf(f, "/%d</td>", p->port);
            for (int k = 0; k < CS_N_COUNTERS; k++) {
                int64_t v = cs__nodes_port_diff(p, k);
                if (v < 0)
                    fputs("<td>&ndash;</td>", f);
                else
                    fprintf(f, "<td>%" PRId64 "</td>", v);
            }
            fputs("</tr>\n", f);
        }
    fputs("</table>\n", f);
}

static void scopes(const struct cs_report_nodes *nd, FILE *f)
{
    fputs("<h3>Inside and between hosts</h3>\n<table><tr><th>scope</th><th>kind</th><th>bytes"
          "</th><th>algbw GB/s</th><th>busbw GB/s</th></tr>\n",
          f);
    static const char *const sk[2] = {"intra-host", "inter-host"}, *const kk[2] = {"collectives",
                                                                                   "p2p"};
    for (int s = 1; s >= 0; s--)
        for (int k = 0; k < 2; k++) {
            const struct cs_report_scope *x = &nd->scope[s][k];
            fputs("<tr>", f);
            cs__html_td(f, sk[s]);
            cs__html_td(f, kk[k]);
            fprintf(f, "<td>%.0f</td>", x->bytes);
            cs__html_td_num(f, "%.3f", x->ns > 0 ? x->bytes / x->ns : NAN);
            cs__html_td_num(f, "%.3f", x->ns > 0 ? x->bus_bytes / x->ns : NAN);
            fputs("</tr>\n", f);
        }
    fputs("</table>\n", f);
}

static void ops(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_nodes *nd = rep->nodes;
    if (!rep->nops || !nd->ops)
        return;
    fputs("<h3>Against the hardware</h3>\n<p>Each operation's bottleneck path (the slowest pair "
          "of its member hosts) and the share of that path's capacity its bandwidth reached (bus "
          "bandwidth; point-to-point: between hosts).</p>\n<table><tr><th>op</th><th>comm</th>"
          "<th>scope</th><th>path</th><th>capacity Gb/s</th><th>% of capacity</th>"
          "<th>bottleneck</th></tr>\n",
          f);
    for (size_t i = 0; i < rep->nops; i++) {
        const struct cs_report_optopo *o = &nd->ops[i];
        fputs("<tr>", f);
        cs__html_td(f, rep->ops[i].op);
        cs__html_td(f, rep->ops[i].comm);
        cs__html_td(f, o->scope);
        cs__html_td(f, o->path);
        cs__html_td_num(f, "%.1f", o->capacity_gbps);
        cs__html_td_num(f, "%.2f", o->pct_of_capacity);
        fputs("<td class=\"l\">", f);
        cs__html_esc(f, o->bottleneck);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void affinity(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_nodes *nd = rep->nodes;
    fputs("<h3>GPU&ndash;NIC affinity</h3>\n", f);
    if (!nd->naff) {
        char why[400];
        fputs("<p>Not checked: ", f);
        cs__html_esc(f, cs__nodes_aff_reason(rep, why, sizeof why));
        fputs(".</p>\n", f);
        return;
    }
    fprintf(f,
            "<p>%d of %zu rank(s) with a GPU checked, %d on another socket than the NIC they "
            "use.</p>\n<table><tr><th>rank</th><th>host</th><th>GPU</th><th>PCI</th>"
            "<th>socket</th><th>NIC used</th><th>from</th><th>NIC socket</th><th>distance</th>"
            "<th>nearest NIC</th><th>check</th></tr>\n",
            nd->aff_checked, nd->naff, nd->aff_mismatches);
    for (size_t i = 0; i < nd->naff; i++) {
        const struct cs_report_affinity *a = &nd->aff[i];
        fputs(a->mismatch ? "<tr class=\"bad\">" : "<tr>", f);
        fprintf(f, "<td>%d</td>", a->rank);
        cs__html_td(f, a->host);
        if (!a->checked) {
            fputs("<td colspan=\"9\" class=\"l\">not checked: ", f);
            cs__html_esc(f, a->note);
            fputs("</td>", f);
        } else {
            fprintf(f, "<td>%d</td>", a->gpu);
            cs__html_td(f, a->gpu_pci);
            fprintf(f, "<td>%d</td>", a->gpu_package);
            cs__html_td(f, a->nic);
            cs__html_td(f, a->nic_from);
            fprintf(f, "<td>%d</td>", a->nic_package);
            cs__html_td(f, a->distance);
            fputs("<td>", f);
            cs__html_esc(f, a->nearest[0] ? a->nearest : "none");
            if (a->nearest[0]) {
                fputs(" (", f);
                cs__html_esc(f, a->nearest_distance);
                fputs(")", f);
            }
            fputs("</td>", f);
            cs__html_td(f, a->mismatch ? "MISMATCH: cross-socket" : "ok");
        }
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

void cs__report_nodes_html(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_nodes *nd = rep->nodes;
    if (!nd) {
        fputs("<p class=\"na\">Not available in this report: the ranks' hosts were not "
              "indexed.</p>\n",
              f);
        return;
    }
    hosts(nd, f);
    scopes(nd, f);
    ops(rep, f);
    affinity(rep, f);
}
