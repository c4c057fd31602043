/*
 * commscope's view of one node's hardware: GPUs, NICs, how they are wired (PCIe switches, host
 * bridges, NUMA nodes, sockets), NVLink bandwidth between GPUs, and the rate of every NIC port.
 * Read from hwloc (live, or an hwloc XML export of version 2 or 3), from an NCCL topology file
 * (NCCL_TOPO_FILE format), and completed with libibverbs (loaded with dlopen) and sysfs.
 *
 * Units: every bandwidth here is in Gb/s (10^9 bits per second), the unit NICs are rated in;
 * NVLink and PCIe figures given in GB/s by the sources are multiplied by 8.
 *
 * A struct cs_topo is filled by a loader and read-only afterwards; cs_topo_free releases it.
 * Errors: functions return 0 or a negative errno-style code and write one sentence naming the
 * file and place into the caller's err buffer.
 */
#ifndef COMMSCOPE_TOPOLOGY_H
#define COMMSCOPE_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CS_TOPO_SCHEMA "commscope-topology/1"

/* How close a GPU is to a NIC (or to another device), nearest first. */
enum cs_topo_dist {
    CS_DIST_PCIE_SWITCH = 0, /* below the same PCIe switch (a PCI-to-PCI bridge) */
    CS_DIST_HOST_BRIDGE,     /* below the same host bridge (root complex), different switches */
    CS_DIST_NUMA,            /* same NUMA node, different host bridges */
    CS_DIST_SOCKET,          /* same package (socket), different NUMA nodes */
    CS_DIST_CROSS_SOCKET,    /* different packages: traffic crosses the inter-socket link */
    CS_DIST_UNKNOWN
};
/* "pcie-switch", "host-bridge", "numa", "socket", "cross-socket", "unknown". */
const char *cs_topo_dist_name(enum cs_topo_dist d);

struct cs_topo_gpu {
    int index;         /* CUDA/NVML index when the source names it, else order of discovery */
    char pci[16];      /* "0000:44:00.0" */
    char model[64];    /* "NVIDIA A100-SXM4-40GB" when known, else "10de:20b0" */
    int numa, package; /* OS indexes, -1 unknown */
    double pcie_gbps;  /* PCIe link of the device, 0 unknown */
    int nic;           /* index into cs_topo.nics of the nearest NIC, -1 none */
    enum cs_topo_dist distance; /* to that NIC */
    int node;                   /* internal: tree node */
};

struct cs_topo_nic {
    char name[64];        /* RDMA device ("mlx5_0") or network interface ("eth0") */
    char netdev[32];      /* the network interface of an RDMA device ("ib0"), "" none */
    char pci[16];         /* "" when not a PCI device */
    char link_layer[16];  /* "InfiniBand", "Ethernet", "unknown" */
    int rdma;             /* an OpenFabrics (verbs) device */
    int port;             /* port described below (first active one), 0 unknown */
    char state[16];       /* "ACTIVE", "DOWN", "INIT", ..., "unknown" */
    char phys_state[16];  /* "LinkUp", "Polling", "Disabled", ..., "unknown" */
    double gbps;          /* active rate; 0 unknown */
    double max_gbps;      /* what the adapter can do (from its PCI id), 0 unknown */
    int width;            /* active lanes (1, 2, 4, 8, 12), 0 unknown */
    int mtu;              /* active MTU in bytes, 0 unknown */
    char rate_source[16]; /* where gbps came from: "verbs", "sysfs", "nccl", "pci-id", "none" */
    double pcie_gbps;     /* PCIe link of the adapter, 0 unknown */
    int numa, package;
    int node; /* internal: tree node */
};

/* Counters of one port, read from sysfs (cs_topo_read_counters). */
struct cs_topo_counters {
    char nic[64];
    int port;
    uint64_t xmit_bytes, rcv_bytes; /* port_xmit_data / port_rcv_data are in 4-byte words */
    uint64_t symbol_errors, rcv_errors, link_downed, xmit_discards;
    int valid;
};

struct cs_topo_node; /* internal tree of packages, NUMA nodes, bridges and devices */

struct cs_topo {
    char host[256];
    char source[32]; /* "hwloc", "hwloc-xml", "nccl-xml" */
    char file[512];  /* the file read, "" live */
    int n_packages, n_numa, n_pcie_switches;
    struct cs_topo_gpu *gpus;
    size_t n_gpus;
    struct cs_topo_nic *nics;
    size_t n_nics;
    double *nvlink; /* n_gpus x n_gpus, Gb/s between GPU i and j over NVLink; NULL none */
    char **warnings;
    size_t n_warnings;
    struct cs_topo_node *tree;
    size_t n_tree;
};

/*
 * Load a topology.  path NULL: the live machine (hwloc discovery with I/O devices, then
 * libibverbs and sysfs for port states and rates).  Otherwise a file, hwloc XML or NCCL topology
 * XML by its root element.  COMMSCOPE_TOPOLOGY, when set, is used by callers as the path; this
 * function does not read it.  Returns 0 and a topology the caller frees with cs_topo_free, or a
 * negative code with err filled and *out NULL.
 */
int cs_topo_load(const char *path, struct cs_topo **out, char *err, size_t errlen);
/* The same from a buffer holding hwloc or NCCL XML; name is used in messages. */
int cs_topo_load_buffer(const char *buf, size_t len, const char *name, struct cs_topo **out,
                        char *err, size_t errlen);
void cs_topo_free(struct cs_topo *t);

/*
 * The live machine's topology as hwloc XML (to save as a node's snapshot).  Returns a malloc'd
 * NUL-terminated buffer the caller frees, or NULL with err filled.
 */
char *cs_topo_export_live_xml(size_t *len, char *err, size_t errlen);

/*
 * RDMA ports as sysfs describes them under root ("/sys" normally; tests pass saved trees):
 * fills the state, rate, width and link layer of every NIC of t whose name matches a directory
 * of ROOT/class/infiniband, and adds the ones t lacks.  Returns the number of devices found, or
 * a negative code when ROOT/class/infiniband exists but cannot be read (err filled).  A missing
 * directory is 0 devices.
 */
int cs_topo_apply_sysfs(struct cs_topo *t, const char *root, char *err, size_t errlen);
/*
 * The same from libibverbs, loaded with dlopen.  Returns the number of devices, 0 when
 * libibverbs is absent (*have_verbs 0) or lists no device, negative on a failed query.
 */
int cs_topo_apply_verbs(struct cs_topo *t, int *have_verbs, char *err, size_t errlen);
/* Port counters of every RDMA port under ROOT/class/infiniband.  *out malloc'd, caller frees. */
int cs_topo_read_counters(const char *root, struct cs_topo_counters **out, size_t *n, char *err,
                          size_t errlen);

/* Derive pairing and warnings after loaders and cs_topo_apply_* have run (loaders call it). */
void cs_topo_finish(struct cs_topo *t);

/* Distance between two tree nodes (a GPU's and a NIC's node). */
enum cs_topo_dist cs_topo_distance(const struct cs_topo *t, int node_a, int node_b);

/* Gb/s from an InfiniBand active_speed code and active_width code (verbs encodings); 0 unknown. */
double cs_topo_ib_gbps(int speed_code, int width_code, int *lanes);
/* Gb/s from a sysfs rate string such as "200 Gb/sec (4X HDR)"; 0 if it does not parse. */
double cs_topo_parse_rate(const char *s, int *lanes);
/* PCIe link Gb/s from "16 GT/s" (or "16.0 GT/s PCIe") and a lane count; 0 if unknown. */
double cs_topo_pcie_gbps(const char *speed, int width);

/* ---- capacity model ---- */

enum cs_topo_path_kind {
    CS_PATH_SELF,    /* the same rank */
    CS_PATH_NVLINK,  /* GPUs of one node joined by NVLink (directly or via NVSwitch) */
    CS_PATH_PCIE,    /* GPUs of one node without NVLink: through PCIe (and maybe the socket link) */
    CS_PATH_SHM,     /* CPU ranks of one node: shared memory (bandwidth not modelled: 0) */
    CS_PATH_NETWORK, /* ranks on different nodes: the slower of the two NICs used */
    CS_PATH_UNKNOWN
};
/* "self", "nvlink", "pcie", "shm", "network", "unknown". */
const char *cs_topo_path_name(enum cs_topo_path_kind k);

/* Where a rank runs: its node's topology and its GPU index (-1: a CPU rank). */
struct cs_topo_place {
    const struct cs_topo *topo;
    int gpu;
    int rank;
};
struct cs_topo_path {
    enum cs_topo_path_kind kind;
    double gbps;   /* bottleneck bandwidth, 0 unknown */
    char why[256]; /* "mlx5_0 200 Gb/s (node a) vs mlx5_2 100 Gb/s (node b)" */
};
/*
 * The bottleneck path between two ranks and its bandwidth.  Two places are on the same node when
 * they point at the same cs_topo or at topologies with the same host name.
 */
void cs_topo_capacity(const struct cs_topo_place *a, const struct cs_topo_place *b,
                      struct cs_topo_path *out);
/* The NIC a rank uses: its GPU's nearest NIC, else the node's fastest active NIC; -1 none. */
int cs_topo_rank_nic(const struct cs_topo *t, int gpu);

/* ---- output ---- */

/* Text summary for `commscope topo`. */
void cs_topo_print(const struct cs_topo *t, FILE *f);
/*
 * One host object of the commscope-topology/1 schema ({"host": ..., "gpus": ...}), indented by
 * indent spaces, without a trailing newline.
 */
void cs_topo_write_host_json(const struct cs_topo *t, FILE *f, int indent);
/* s as a JSON string literal, always valid ASCII JSON (bytes >= 0x7f and control bytes as
 * \u00XX); NULL as "".  Every JSON string commscope writes goes through this. */
void cs_topo_json_string(FILE *f, const char *s);

#endif
