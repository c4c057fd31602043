/*
 * GPU-NIC affinity per rank: a rank's GPU (the CUDA device and PCI bus id its NCCL communicator
 * records carry, docs/trace-format.md) is found in its host's topology snapshot; the NIC it uses
 * is the GPU's paired NIC (topology/: the nearest, one GPU per NIC where the node allows), or,
 * when the run's configuration records NCCL_IB_HCA, the nearest of the NICs that list allows
 * (NCCL's rule: prefix match, "=" exact names, "^" excludes).  A rank whose GPU and that NIC sit
 * on different sockets (packages) is a mismatch: its traffic crosses the inter-socket link.
 * Ranks without a GPU in their traces (MPI jobs on CPUs) are not checked.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commscope/input.h"

#include "internal.h"
#include "nodes.h"
#include "reader.h"
#include "topology.h"

/* The GPU trailer of rank r's first NCCL communicator record that names a device. */
static int rank_gpu(const struct cs__rank *rk, int *dev, char *bus, size_t buslen)
{
    size_t n = cs_reader_stats(rk->rd)->comms;
    for (size_t i = 0; i < n; i++) {
        const struct cs_comm_record *rec = cs_reader_comm(rk->rd, i);
        if (rec->kind != CS_COMM_NCCL)
            continue;
        size_t off = (sizeof(*rec) + 4 * (size_t)rec->size + 7) & ~(size_t)7;
        if (rec->record_bytes < off + sizeof(struct cs_comm_gpu))
            continue;
        struct cs_comm_gpu g;
        memcpy(&g, (const char *)rec + off, sizeof g);
        g.bus_id[sizeof g.bus_id - 1] = 0;
        if (g.cuda_dev < 0 && !g.bus_id[0])
            continue;
        *dev = g.cuda_dev;
        snprintf(bus, buslen, "%s", g.bus_id);
        return 1;
    }
    return 0;
}

/* PCI addresses compared by value: "00000000:3B:00.0" (CUDA) equals "0000:3b:00.0" (hwloc). */
static int same_pci(const char *a, const char *b)
{
    unsigned d1, b1, s1, f1, d2, b2, s2, f2;
    if (sscanf(a, "%x:%x:%x.%x", &d1, &b1, &s1, &f1) != 4 ||
        sscanf(b, "%x:%x:%x.%x", &d2, &b2, &s2, &f2) != 4)
        return 0;
    return d1 == d2 && b1 == b2 && s1 == s2 && f1 == f2;
}

/* Whether NIC name is allowed by an NCCL_IB_HCA value. */
static int hca_allows(const char *spec, const char *name)
{
    int exclude = 0, exact = 0;
    if (*spec == '^')
        exclude = 1, spec++;
    if (*spec == '=')
        exact = 1, spec++;
    int hit = 0;
    while (*spec && !hit) {
        size_t len = strcspn(spec, ",");
        size_t nlen = strcspn(spec, ":,"); /* "mlx5_0:1": the device, without its port */
        if (nlen > len)
            nlen = len;
        hit = nlen && (exact ? strlen(name) == nlen && !strncmp(name, spec, nlen)
                             : !strncmp(name, spec, nlen));
        spec += len + (spec[len] == ',');
    }
    return exclude ? !hit : hit;
}

/* NCCL_IB_HCA from RUN_DIR/commscope-run.txt ("env: NCCL_IB_HCA=..."), "" when not recorded. */
static void run_hca(const char *dir, char *out, size_t len)
{
    char path[4200], line[1024];
    out[0] = 0;
    snprintf(path, sizeof path, "%s/commscope-run.txt", dir);
    FILE *f = cs_input_fopen(path);
    if (!f)
        return;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "env: NCCL_IB_HCA=", 17)) {
            line[strcspn(line, "\r\n")] = 0;
            snprintf(out, len, "%.255s", line + 17);
        }
    fclose(f);
}

void cs__affinity_report(struct cs__run *run, struct cs_report_nodes *nd, struct cs_topo **topo)
{
    char hca[256];
    run_hca(run->dir, hca, sizeof hca);
    for (int r = 0; r < run->world; r++) {
        const struct cs__rank *rk = &run->ranks[r];
        int dev = -1;
        char bus[24] = "";
        if (!rk->present || !rank_gpu(rk, &dev, bus, sizeof bus))
            continue;
        void *v = realloc(nd->aff, (nd->naff + 1) * sizeof *nd->aff);
        if (!v)
            return;
        nd->aff = v;
        struct cs_report_affinity *a = &nd->aff[nd->naff++];
        memset(a, 0, sizeof *a);
        a->rank = r;
        a->cuda_dev = dev;
        snprintf(a->bus_id, sizeof a->bus_id, "%s", bus);
        a->gpu = a->gpu_package = a->nic_package = -1;
        int hi = run->host_of ? run->host_of[r] : -1;
        if (hi >= 0)
            snprintf(a->host, sizeof a->host, "%s", nd->hosts[hi].host);
        const struct cs_topo *t = hi >= 0 ? topo[hi] : NULL;
        if (!t) {
            snprintf(a->note, sizeof a->note, "no topology snapshot of host %s", a->host);
            continue;
        }
        /* The GPU: by PCI bus id; by CUDA ordinal only when there is no bus id (the ordinal
         * depends on CUDA_VISIBLE_DEVICES and need not match the topology's index). */
        int g = -1;
        for (size_t i = 0; i < t->n_gpus && g < 0; i++)
            if (bus[0] ? same_pci(bus, t->gpus[i].pci) : t->gpus[i].index == dev)
                g = (int)i;
        if (g < 0) {
            snprintf(a->note, sizeof a->note, "GPU %s (CUDA device %d) is not in %s's topology",
                     bus[0] ? bus : "?", dev, a->host);
            continue;
        }
        const struct cs_topo_gpu *gp = &t->gpus[g];
        a->gpu = gp->index;
        snprintf(a->gpu_pci, sizeof a->gpu_pci, "%s", gp->pci);
        a->gpu_package = gp->package;
        if (gp->nic >= 0) {
            snprintf(a->nearest, sizeof a->nearest, "%s", t->nics[gp->nic].name);
            snprintf(a->nearest_distance, sizeof a->nearest_distance, "%s",
                     cs_topo_dist_name(gp->distance));
        }
        int k = gp->nic;
        snprintf(a->nic_from, sizeof a->nic_from, "paired");
        if (hca[0]) {
            /* The nearest NIC NCCL_IB_HCA allows (RDMA devices: what the variable selects). */
            k = -1;
            enum cs_topo_dist best = CS_DIST_UNKNOWN;
            for (size_t i = 0; i < t->n_nics; i++) {
                if (!t->nics[i].rdma || !hca_allows(hca, t->nics[i].name))
                    continue;
                enum cs_topo_dist d = cs_topo_distance(t, gp->node, t->nics[i].node);
                if (k < 0 || d < best)
                    k = (int)i, best = d;
            }
            snprintf(a->nic_from, sizeof a->nic_from, "NCCL_IB_HCA=%.18s", hca);
            if (k < 0) {
                snprintf(a->note, sizeof a->note, "NCCL_IB_HCA=%.60s names no RDMA NIC of %s", hca,
                         a->host);
                continue;
            }
        }
        if (k < 0) {
            snprintf(a->note, sizeof a->note, "host %s has no NIC for GPU %s", a->host, gp->pci);
            continue;
        }
        const struct cs_topo_nic *nic = &t->nics[k];
        snprintf(a->nic, sizeof a->nic, "%s", nic->name);
        a->nic_package = nic->package;
        enum cs_topo_dist d = cs_topo_distance(t, gp->node, nic->node);
        snprintf(a->distance, sizeof a->distance, "%s", cs_topo_dist_name(d));
        a->checked = 1;
        a->mismatch = gp->package >= 0 && nic->package >= 0 ? gp->package != nic->package
                                                            : d == CS_DIST_CROSS_SOCKET;
        if (a->mismatch)
            nd->aff_mismatches++;
        nd->aff_checked++;
    }
}
