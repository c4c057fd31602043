/* The hosts-and-topology part of the report model (nodes.c computes it, nodes_report.c renders
 * it).  NaN: no value (null in JSON). */
#ifndef COMMSCOPE_ANALYZER_NODES_H
#define COMMSCOPE_ANALYZER_NODES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "commscope/trace.h"

#define CS_N_COUNTERS                                                                              \
    6 /* xmit_bytes, rcv_bytes, symbol_errors, rcv_errors, link_downed, xmit_discards */

/* One port's counters before and after the run (HOST.ports). */
struct cs_report_port {
    char nic[64];
    int port;
    int have_before, have_after;
    uint64_t before[CS_N_COUNTERS], after[CS_N_COUNTERS];
};

struct cs_report_host {
    char host[CS_HOST_MAX];
    int nranks, first_rank;
    int snapshot;    /* its topology snapshot was read */
    char source[32]; /* "hwloc-xml", "nccl-xml" */
    char note[160];  /* why there is no snapshot, "" otherwise */
    int ngpus;
    char nic[64];    /* the NIC a CPU rank of this host uses (capacity model), "" none */
    double nic_gbps; /* its rate in Gb/s, NaN unknown */
    char **warnings; /* the snapshot's warnings (owned) */
    size_t nwarnings;
    struct cs_report_port *ports;
    size_t nports;
};

/* Parallel to cs_report.ops. */
struct cs_report_optopo {
    char scope[16];         /* "inter-host", "intra-host", "unknown" */
    char path[16];          /* bottleneck path kind: "network", "shm", "self", "unknown" */
    double capacity_gbps;   /* Gb/s of the bottleneck path, NaN unknown */
    double pct_of_capacity; /* busbw (p2p: inter-host bandwidth) x 8 / capacity x 100 */
    char bottleneck[320];   /* which pair and why */
    double p2p_gbps[2];     /* point-to-point GB/s by peer: [0] same host, [1] other host */
};

/* Totals of one scope and kind. */
struct cs_report_scope {
    double bytes, ns, bus_bytes;
};

/* GPU-NIC affinity of one rank whose traces name its GPU (affinity.c). */
struct cs_report_affinity {
    int rank;
    char host[CS_HOST_MAX];
    int cuda_dev;    /* from the NCCL communicator record, -1 unknown */
    char bus_id[24]; /* as recorded */
    int gpu;         /* the GPU's index in the topology, -1 not found */
    char gpu_pci[16];
    int gpu_package, nic_package; /* sockets, -1 unknown */
    char nearest[64];             /* the GPU's paired (nearest) NIC, "" none */
    char nearest_distance[16];
    char nic[64];          /* the NIC it uses, "" unknown */
    char nic_from[32];     /* "paired" or "NCCL_IB_HCA=..." */
    char distance[16];     /* GPU to the NIC it uses */
    int checked, mismatch; /* mismatch: different sockets */
    char note[160];        /* why not checked */
};

struct cs_report_nodes {
    struct cs_report_host *hosts;
    size_t nhosts;
    struct cs_report_optopo *ops;
    struct cs_report_optopo *ops_all;   /* parallel to cs_report.ops_all (bound.c), or NULL */
    struct cs_report_scope scope[2][2]; /* [0 intra, 1 inter][0 collectives, 1 point-to-point] */
    int hosts_with_gpus;
    struct cs_report_affinity *aff; /* ranks with a GPU in their traces */
    size_t naff;
    int aff_checked, aff_mismatches;
};

/* nodes_report.c, for the renderers: the port counters' names (JSON keys), a counter's change
 * over the run (-1 unknown), and why no rank's GPU/NIC affinity was checked (buf or a constant). */
extern const char *const cs__nodes_counter[CS_N_COUNTERS];
int64_t cs__nodes_port_diff(const struct cs_report_port *p, int k);
struct cs_report;
const char *cs__nodes_aff_reason(const struct cs_report *rep, char *buf, size_t n);
/* report_html_nodes.c: the HTML report's hosts-and-topology section. */
void cs__report_nodes_html(const struct cs_report *rep, FILE *f);

struct cs__run;
struct cs_topo;
/* affinity.c: fill nd->aff from the ranks' NCCL communicator records and the hosts' topologies
 * (topo[host index], NULL where a host has none). */
void cs__affinity_report(struct cs__run *run, struct cs_report_nodes *nd, struct cs_topo **topo);

#endif
