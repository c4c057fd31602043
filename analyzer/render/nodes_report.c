/* Renderers of the hosts-and-topology part of the report (formatting only; see nodes.c). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "internal.h"
#include "nodes.h"
#include "json.h"

const char *const cs__nodes_counter[CS_N_COUNTERS] = {"xmit_bytes", "rcv_bytes",   "symbol_errors",
                                                      "rcv_errors", "link_downed", "xmit_discards"};

static const char *const gpu_reason =
    "the traces record no GPU per rank (an MPI job on CPUs, or GPUs not traced), so whether a "
    "rank's GPU and the NIC it uses share a socket cannot be checked; see each host's warnings "
    "for GPUs of the node without a near NIC";

static void ind(FILE *f, int d);

/* Why no rank's GPU/NIC affinity could be checked: runs with GPU records (a Kineto import, CUPTI
 * without NCCL's communicator records) know each rank's CUDA device from its kernels, but not
 * the GPU's PCI address, and maybe no topology snapshot (where the GPUs and NICs sit). */
const char *cs__nodes_aff_reason(const struct cs_report *rep, char *buf, size_t n)
{
    const struct cs_report_nodes *nd = rep->nodes;
    if (!rep->gpu)
        return gpu_reason;
    int snap = 0;
    for (size_t i = 0; nd && i < nd->nhosts; i++)
        snap |= nd->hosts[i].snapshot != 0;
    snprintf(buf, n,
             "the %s record each rank's GPU only as the CUDA device its kernels ran on, with no "
             "NCCL communicator record giving the GPU's PCI address%s, so whether a rank's GPU "
             "and the NIC it uses share a socket cannot be checked",
             rep->kineto ? "Kineto traces" : "traces",
             snap          ? ""
             : rep->kineto ? ", and an import has no topology snapshot of its hosts (where the "
                             "GPUs and NICs sit)"
                           : ", and no host has a topology snapshot (RUN_DIR/topology/HOST.xml: "
                             "where the GPUs and NICs sit)");
    return buf;
}

static void affinity_row_json(const struct cs_report_affinity *a, FILE *f)
{
    fprintf(f, "{\"rank\": %d, \"host\": ", a->rank);
    cs__json_str(f, a->host);
    fprintf(f, ", \"cuda_device\": %d, \"bus_id\": ", a->cuda_dev);
    cs__json_str(f, a->bus_id);
    fputs(", \"gpu\": ", f);
    if (a->gpu >= 0)
        fprintf(f, "%d", a->gpu);
    else
        fputs("null", f);
    fputs(", \"gpu_socket\": ", f);
    if (a->gpu_package >= 0)
        fprintf(f, "%d", a->gpu_package);
    else
        fputs("null", f);
    fputs(", \"nearest_nic\": ", f);
    cs__json_str(f, a->nearest);
    fputs(", \"nic\": ", f);
    cs__json_str(f, a->nic);
    fputs(", \"nic_from\": ", f);
    cs__json_str(f, a->nic_from);
    fputs(", \"nic_socket\": ", f);
    if (a->nic_package >= 0)
        fprintf(f, "%d", a->nic_package);
    else
        fputs("null", f);
    fputs(", \"distance\": ", f);
    cs__json_str(f, a->distance);
    fprintf(f, ", \"checked\": %s, \"mismatch\": %s, \"note\": ", a->checked ? "true" : "false",
            a->mismatch ? "true" : "false");
    cs__json_str(f, a->note);
    fputc('}', f);
}

static void affinity_json(const struct cs_report_nodes *nd, FILE *f, int d)
{
    fprintf(f, "\"gpu_nic_affinity\": {\"checked\": %s, \"reason\": ",
            nd->aff_checked ? "true" : "false");
    cs__json_str(
        f, nd->aff_checked ? "" : "no rank's GPU or NIC could be placed in its host's topology");
    fprintf(f, ", \"hosts_with_gpus\": %d, \"ranks_checked\": %d, \"ranks\": [",
            nd->hosts_with_gpus, nd->aff_checked);
    for (size_t i = 0; i < nd->naff; i++) {
        ind(f, d + 1);
        affinity_row_json(&nd->aff[i], f);
        if (i + 1 < nd->naff)
            fputc(',', f);
    }
    ind(f, d);
    fputs("], \"mismatches\": [", f);
    int k = 0;
    for (size_t i = 0; i < nd->naff; i++) {
        if (!nd->aff[i].mismatch)
            continue;
        fputs(k++ ? ", " : "", f);
        fprintf(f, "%d", nd->aff[i].rank);
    }
    fputs("]}", f);
}

/* "rank 2 (h1) GPU 2 0000:c4:00.0 socket 1 uses mlx5_0 (NCCL_IB_HCA=mlx5_0) socket 0:
 * cross-socket; nearest NIC mlx5_3 (pcie-switch)". */
static void affinity_text(const struct cs_report_nodes *nd, FILE *out)
{
    fprintf(out, "gpu_nic_affinity: %d of %zu rank(s) with a GPU checked, %d mismatch(es)\n",
            nd->aff_checked, nd->naff, nd->aff_mismatches);
    for (size_t i = 0; i < nd->naff; i++) {
        const struct cs_report_affinity *a = &nd->aff[i];
        if (!a->checked) {
            fprintf(out, "  rank %d (%s): not checked: %s\n", a->rank, a->host, a->note);
            continue;
        }
        fprintf(out,
                "  %srank %d (%s) GPU %d %s socket %d uses %s (%s) socket %d: %s; nearest NIC %s "
                "(%s)\n",
                a->mismatch ? "MISMATCH " : "", a->rank, a->host, a->gpu, a->gpu_pci,
                a->gpu_package, a->nic, a->nic_from, a->nic_package, a->distance,
                a->nearest[0] ? a->nearest : "-", a->nearest[0] ? a->nearest_distance : "none");
    }
}

static void num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

static void ind(FILE *f, int depth)
{
    fputc('\n', f);
    for (int i = 0; i < depth; i++)
        fputs("  ", f);
}

/* Difference of counter k of a port, or -1 when it cannot be given. */
int64_t cs__nodes_port_diff(const struct cs_report_port *p, int k)
{
    if (!p->have_before || !p->have_after || p->after[k] < p->before[k])
        return -1;
    return (int64_t)(p->after[k] - p->before[k]);
}

static void scope(FILE *f, const struct cs_report_scope *s, int d, const char *key, int last)
{
    ind(f, d);
    fprintf(f, "\"%s\": {", key);
    ind(f, d + 1);
    fprintf(f, "\"bytes\": %.0f,", s->bytes);
    ind(f, d + 1);
    fputs("\"time_s\": ", f);
    num(f, s->ns / 1e9);
    fputc(',', f);
    ind(f, d + 1);
    fputs("\"algbw_gbps\": ", f);
    num(f, s->ns > 0 ? s->bytes / s->ns : NAN);
    fputc(',', f);
    ind(f, d + 1);
    fputs("\"busbw_gbps\": ", f);
    num(f, s->ns > 0 ? s->bus_bytes / s->ns : NAN);
    ind(f, d);
    fputs(last ? "}" : "},", f);
}

void cs__nodes_json(const struct cs_report *rep, FILE *f, int d)
{
    const struct cs_report_nodes *nd = rep->nodes;
    if (!nd) {
        fputs("null", f);
        return;
    }
    fputc('{', f);
    ind(f, d + 1);
    fputs("\"hosts\": [", f);
    for (size_t i = 0; i < nd->nhosts; i++) {
        const struct cs_report_host *h = &nd->hosts[i];
        ind(f, d + 2);
        fputs("{\"host\": ", f);
        cs__json_str(f, h->host);
        fprintf(f, ", \"ranks\": %d, \"first_rank\": %d, \"snapshot\": ", h->nranks, h->first_rank);
        if (h->snapshot) {
            fputs("\"topology/", f);
            fprintf(f, "%s.xml\"", h->host); /* host names are [A-Za-z0-9.-] */
        } else {
            fputs("null", f);
        }
        fputs(", \"source\": ", f);
        if (h->snapshot)
            cs__json_str(f, h->source);
        else
            fputs("null", f);
        fputs(", \"note\": ", f);
        cs__json_str(f, h->note);
        fprintf(f, ", \"gpus\": %d, \"nic\": ", h->ngpus);
        if (h->nic[0])
            cs__json_str(f, h->nic);
        else
            fputs("null", f);
        fputs(", \"nic_gbps\": ", f);
        num(f, h->nic_gbps);
        fputs(",", f);
        ind(f, d + 3);
        fputs("\"warnings\": [", f);
        for (size_t k = 0; k < h->nwarnings; k++) {
            if (k)
                fputs(", ", f);
            cs__json_str(f, h->warnings[k]);
        }
        fputs("],", f);
        ind(f, d + 3);
        fputs("\"port_counters\": [", f);
        for (size_t k = 0; k < h->nports; k++) {
            const struct cs_report_port *p = &h->ports[k];
            ind(f, d + 4);
            fputs("{\"nic\": ", f);
            cs__json_str(f, p->nic);
            fprintf(f, ", \"port\": %d, \"complete\": %s", p->port,
                    p->have_before && p->have_after ? "true" : "false");
            for (int c = 0; c < CS_N_COUNTERS; c++) {
                int64_t v = cs__nodes_port_diff(p, c);
                if (v < 0)
                    fprintf(f, ", \"%s\": null", cs__nodes_counter[c]);
                else
                    fprintf(f, ", \"%s\": %" PRId64, cs__nodes_counter[c], v);
            }
            fputs(k + 1 < h->nports ? "}," : "}", f);
        }
        if (h->nports)
            ind(f, d + 3);
        fputs("]}", f);
        if (i + 1 < nd->nhosts)
            fputc(',', f);
    }
    if (nd->nhosts)
        ind(f, d + 1);
    fputs("],", f);
    ind(f, d + 1);
    fputs("\"bandwidth\": {", f);
    const char *sk[2] = {"intra_host", "inter_host"};
    for (int s = 1; s >= 0; s--) {
        ind(f, d + 2);
        fprintf(f, "\"%s\": {", sk[s]);
        scope(f, &nd->scope[s][0], d + 3, "collectives", 0);
        scope(f, &nd->scope[s][1], d + 3, "p2p", 1);
        ind(f, d + 2);
        fputs(s ? "}," : "}", f);
    }
    ind(f, d + 1);
    fputs("},", f);
    ind(f, d + 1);
    fputs("\"ops\": [", f);
    for (size_t i = 0; i < rep->nops; i++) {
        const struct cs_report_optopo *o = &nd->ops[i];
        ind(f, d + 2);
        fputs("{\"op\": ", f);
        cs__json_str(f, rep->ops[i].op);
        fputs(", \"comm\": ", f);
        cs__json_str(f, rep->ops[i].comm);
        fputs(", \"scope\": ", f);
        cs__json_str(f, o->scope);
        fputs(", \"path\": ", f);
        cs__json_str(f, o->path);
        fputs(", \"capacity_gbps\": ", f);
        num(f, o->capacity_gbps);
        fputs(", \"pct_of_capacity\": ", f);
        num(f, o->pct_of_capacity);
        fputs(", \"bottleneck\": ", f);
        cs__json_str(f, o->bottleneck);
        fputs(", \"p2p_intra_host_gbps\": ", f);
        num(f, o->p2p_gbps[0]);
        fputs(", \"p2p_inter_host_gbps\": ", f);
        num(f, o->p2p_gbps[1]);
        fputs(i + 1 < rep->nops ? "}," : "}", f);
    }
    if (rep->nops)
        ind(f, d + 1);
    fputs("],", f);
    ind(f, d + 1);
    if (!nd->naff) {
        char why[400];
        fputs("\"gpu_nic_affinity\": {\"checked\": false, \"reason\": ", f);
        cs__json_str(f, cs__nodes_aff_reason(rep, why, sizeof why));
        fprintf(f, ", \"hosts_with_gpus\": %d, \"mismatches\": []}", nd->hosts_with_gpus);
    } else {
        affinity_json(nd, f, d + 1);
    }
    ind(f, d);
    fputc('}', f);
}

static const char *fmt(char *buf, size_t n, const char *f, double v)
{
    if (!isfinite(v))
        return "-";
    snprintf(buf, n, f, v);
    return buf;
}

void cs__nodes_text(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_nodes *nd = rep->nodes;
    if (!nd)
        return;
    char a[32], b[32], c[32];
    fprintf(out, "\n@--- Hosts and topology %s\n", "----------------------------------------");
    fprintf(out, "%-16s %5s %10s %-12s %10s  %s\n", "Host", "Ranks", "Snapshot", "NIC", "NIC_Gb/s",
            "Note");
    for (size_t i = 0; i < nd->nhosts; i++) {
        const struct cs_report_host *h = &nd->hosts[i];
        fprintf(out, "%-16s %5d %10s %-12s %10s  %s\n", h->host, h->nranks,
                h->snapshot ? h->source : "none", h->nic[0] ? h->nic : "-",
                fmt(a, sizeof a, "%.1f", h->nic_gbps), h->note);
        for (size_t k = 0; k < h->nwarnings; k++)
            fprintf(out, "  warning: %s\n", h->warnings[k]);
        for (size_t k = 0; k < h->nports; k++) {
            const struct cs_report_port *p = &h->ports[k];
            fprintf(out, "  port %s/%d over the run:", p->nic, p->port);
            for (int n = 0; n < CS_N_COUNTERS; n++) {
                int64_t v = cs__nodes_port_diff(p, n);
                if (v < 0)
                    fprintf(out, " %s=?", cs__nodes_counter[n]);
                else
                    fprintf(out, " %s=%" PRId64, cs__nodes_counter[n], v);
            }
            fputc('\n', out);
        }
    }
    fprintf(out, "%-12s %-12s %14s %12s %12s\n", "Scope", "Kind", "Bytes", "algbw_GB/s",
            "busbw_GB/s");
    const char *sk[2] = {"intra-host", "inter-host"}, *kk[2] = {"collectives", "p2p"};
    for (int s = 1; s >= 0; s--)
        for (int k = 0; k < 2; k++) {
            const struct cs_report_scope *x = &nd->scope[s][k];
            fprintf(out, "%-12s %-12s %14.0f %12s %12s\n", sk[s], kk[k], x->bytes,
                    fmt(a, sizeof a, "%.3f", x->ns > 0 ? x->bytes / x->ns : NAN),
                    fmt(b, sizeof b, "%.3f", x->ns > 0 ? x->bus_bytes / x->ns : NAN));
        }
    fprintf(out, "%-20s %-22s %-11s %-8s %12s %9s\n", "Op", "Comm", "Scope", "Path",
            "Capacity_Gb/s", "%_of_cap");
    for (size_t i = 0; i < rep->nops; i++) {
        const struct cs_report_optopo *o = &nd->ops[i];
        fprintf(out, "%-20s %-22s %-11s %-8s %12s %9s\n", rep->ops[i].op, rep->ops[i].comm,
                o->scope, o->path, fmt(b, sizeof b, "%.1f", o->capacity_gbps),
                fmt(c, sizeof c, "%.2f", o->pct_of_capacity));
    }
    char why[400];
    if (!nd->naff)
        fprintf(out, "gpu_nic_affinity: not checked: %s\n",
                cs__nodes_aff_reason(rep, why, sizeof why));
    else
        affinity_text(nd, out);
}
