/* Renderers of struct cs_topo: the text of `commscope topo` and commscope-topology/1 JSON. */
#include <string.h>

#include "internal.h"

/* A JSON string literal, always valid ASCII JSON: quote, backslash and control bytes escaped, and
 * bytes >= 0x7f as \u00XX, whatever encoding the file, host or program name had (a damaged
 * file may hold any byte).  The analyzer's JSON strings are written by this too (cs__json_str). */
void cs_topo_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (*p < 0x20 || *p >= 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

static void num_or_null(FILE *f, double v)
{
    if (v > 0)
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

static void int_or_null(FILE *f, int v)
{
    if (v >= 0)
        fprintf(f, "%d", v);
    else
        fputs("null", f);
}

void cs_topo_write_host_json(const struct cs_topo *t, FILE *f, int ind)
{
    fprintf(f, "%*s{\n%*s\"host\": ", ind, "", ind + 2, "");
    cs_topo_json_string(f, t->host);
    fprintf(f, ",\n%*s\"source\": ", ind + 2, "");
    cs_topo_json_string(f, t->source);
    fprintf(f, ",\n%*s\"file\": ", ind + 2, "");
    if (t->file[0])
        cs_topo_json_string(f, t->file);
    else
        fputs("null", f);
    fprintf(f, ",\n%*s\"packages\": %d, \"numa_nodes\": %d, \"pcie_switches\": %d,\n", ind + 2, "",
            t->n_packages, t->n_numa, t->n_pcie_switches);
    fprintf(f, "%*s\"gpus\": [", ind + 2, "");
    for (size_t i = 0; i < t->n_gpus; i++) {
        const struct cs_topo_gpu *g = &t->gpus[i];
        fprintf(f, "%s\n%*s{\"index\": %d, \"pci\": ", i ? "," : "", ind + 4, "", g->index);
        cs_topo_json_string(f, g->pci);
        fputs(", \"model\": ", f);
        cs_topo_json_string(f, g->model);
        fputs(", \"numa\": ", f);
        int_or_null(f, g->numa);
        fputs(", \"package\": ", f);
        int_or_null(f, g->package);
        fputs(", \"pcie_gbps\": ", f);
        num_or_null(f, g->pcie_gbps);
        fputs(", \"nic\": ", f);
        if (g->nic >= 0)
            cs_topo_json_string(f, t->nics[g->nic].name);
        else
            fputs("null", f);
        fputs(", \"distance\": ", f);
        cs_topo_json_string(f, g->nic >= 0 ? cs_topo_dist_name(g->distance) : "none");
        fputc('}', f);
    }
    fprintf(f, "%s],\n%*s\"nics\": [", t->n_gpus ? "\n" : "", ind + 2, "");
    if (t->n_gpus)
        fprintf(f, "%*s", 0, "");
    for (size_t i = 0; i < t->n_nics; i++) {
        const struct cs_topo_nic *n = &t->nics[i];
        fprintf(f, "%s\n%*s{\"name\": ", i ? "," : "", ind + 4, "");
        cs_topo_json_string(f, n->name);
        fputs(", \"netdev\": ", f);
        cs_topo_json_string(f, n->netdev);
        fputs(", \"pci\": ", f);
        cs_topo_json_string(f, n->pci);
        fputs(", \"rdma\": ", f);
        fputs(n->rdma ? "true" : "false", f);
        fputs(", \"link_layer\": ", f);
        cs_topo_json_string(f, n->link_layer);
        fputs(", \"gbps\": ", f);
        num_or_null(f, n->gbps);
        fputs(", \"max_gbps\": ", f);
        num_or_null(f, n->max_gbps);
        fputs(", \"rate_source\": ", f);
        cs_topo_json_string(f, n->rate_source);
        fprintf(f, ", \"port\": %d, \"width\": %d, \"mtu\": %d, \"state\": ", n->port, n->width,
                n->mtu);
        cs_topo_json_string(f, n->state);
        fputs(", \"phys_state\": ", f);
        cs_topo_json_string(f, n->phys_state);
        fputs(", \"numa\": ", f);
        int_or_null(f, n->numa);
        fputs(", \"pcie_gbps\": ", f);
        num_or_null(f, n->pcie_gbps);
        fputc('}', f);
    }
    fprintf(f, "%s],\n%*s\"nvlink_gbps\": ", t->n_nics ? "\n" : "", ind + 2, "");
    if (!t->nvlink)
        fputs("null", f);
    else {
        fputc('[', f);
        for (size_t i = 0; i < t->n_gpus; i++) {
            fprintf(f, "%s\n%*s[", i ? "," : "", ind + 4, "");
            for (size_t j = 0; j < t->n_gpus; j++)
                fprintf(f, "%s%.6g", j ? ", " : "", t->nvlink[i * t->n_gpus + j]);
            fputc(']', f);
        }
        fprintf(f, "\n%*s]", ind + 2, "");
    }
    fprintf(f, ",\n%*s\"warnings\": [", ind + 2, "");
    for (size_t i = 0; i < t->n_warnings; i++) {
        fprintf(f, "%s\n%*s", i ? "," : "", ind + 4, "");
        cs_topo_json_string(f, t->warnings[i]);
    }
    fprintf(f, "%s]\n%*s}", t->n_warnings ? "\n" : "", ind, "");
}

static const char *rate(char *buf, size_t len, double gbps)
{
    if (gbps > 0)
        snprintf(buf, len, "%.0f Gb/s", gbps);
    else
        snprintf(buf, len, "rate unknown");
    return buf;
}

void cs_topo_print(const struct cs_topo *t, FILE *f)
{
    char r1[24];
    fprintf(f, "host %s (%s%s%s)\n", t->host, t->source, t->file[0] ? ": " : "", t->file);
    fprintf(f, "  %d package(s), %d NUMA node(s), %d PCIe switch(es), %zu GPU(s), %zu NIC(s)\n",
            t->n_packages, t->n_numa, t->n_pcie_switches, t->n_gpus, t->n_nics);
    if (t->n_gpus) {
        fprintf(f,
                "\n  GPU  PCI            NUMA  model                      NIC          distance\n");
        for (size_t i = 0; i < t->n_gpus; i++) {
            const struct cs_topo_gpu *g = &t->gpus[i];
            char numa[16];
            snprintf(numa, sizeof(numa), g->numa >= 0 ? "%d" : "-", g->numa);
            fprintf(f, "  %-4d %-14s %-5s %-26.26s %-12s %s\n", g->index, g->pci, numa, g->model,
                    g->nic >= 0 ? t->nics[g->nic].name : "-",
                    g->nic >= 0 ? cs_topo_dist_name(g->distance) : "none");
        }
    }
    if (t->n_nics) {
        fprintf(f, "\n  NIC          netdev   PCI            layer       state   rate (source)     "
                   "   NUMA\n");
        for (size_t i = 0; i < t->n_nics; i++) {
            const struct cs_topo_nic *n = &t->nics[i];
            char numa[16], rs[96];
            snprintf(numa, sizeof(numa), n->numa >= 0 ? "%d" : "-", n->numa);
            snprintf(rs, sizeof(rs), "%s (%s)", rate(r1, sizeof(r1), n->gbps), n->rate_source);
            fprintf(f, "  %-12s %-8s %-14s %-11s %-7s %-20s %s\n", n->name,
                    n->netdev[0] ? n->netdev : "-", n->pci[0] ? n->pci : "-", n->link_layer,
                    n->state, rs, numa);
        }
    }
    if (t->nvlink) {
        fprintf(f, "\n  NVLink Gb/s\n        ");
        for (size_t j = 0; j < t->n_gpus; j++)
            fprintf(f, " GPU%-3d", t->gpus[j].index);
        fputc('\n', f);
        for (size_t i = 0; i < t->n_gpus; i++) {
            fprintf(f, "  GPU%-3d", t->gpus[i].index);
            for (size_t j = 0; j < t->n_gpus; j++)
                fprintf(f, " %6.0f", t->nvlink[i * t->n_gpus + j]);
            fputc('\n', f);
        }
    }
    fprintf(f, "\n  warnings: %zu\n", t->n_warnings);
    for (size_t i = 0; i < t->n_warnings; i++)
        fprintf(f, "  warning: %s\n", t->warnings[i]);
}
