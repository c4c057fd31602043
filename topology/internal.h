/*
 * What the topology library's files share.
 *
 *   xml.c          a small element/attribute XML reader for the two formats below
 *   load_hwloc.c   hwloc XML (v2 and v3) into struct cs_topo; live discovery via hwloc's export
 *   load_nccl.c    NCCL topology files (NCCL_TOPO_FILE) into struct cs_topo
 *   ib_sysfs.c     RDMA port state, rate and counters from sysfs
 *   ib_verbs.c     the same from libibverbs, loaded with dlopen
 *   model.c        distances, GPU-NIC pairing, NVLink matrix, warnings, capacity model
 *   output.c       text and JSON renderers
 */
#ifndef COMMSCOPE_TOPOLOGY_INTERNAL_H
#define COMMSCOPE_TOPOLOGY_INTERNAL_H

#include "topology.h"

/* ---- xml.c ---- */

struct cs__xml {
    char *name;
    char **attr; /* name, value pairs */
    size_t n_attr;
    char *text; /* the element's own text, NULL when only whitespace */
    int line;
    struct cs__xml *parent, *child, *last, *next;
};
/*
 * Parse buf into a tree of elements.  Returns 0 and *out (free with cs__xml_free), or -1 with
 * err filled ("NAME:LINE: what is wrong").
 */
int cs__xml_parse(struct cs__xml **out, const char *buf, size_t len, const char *name, char *err,
                  size_t errlen);
void cs__xml_free(struct cs__xml *e);
/* The value of attribute name, or NULL. */
const char *cs__xml_attr(const struct cs__xml *e, const char *name);

/* ---- the tree every loader builds (model.c) ---- */

enum cs__tkind {
    CS__T_MACHINE,
    CS__T_PACKAGE,
    CS__T_CPU,        /* any other non-I/O object: group, NUMA holder, cache, core, NCCL <cpu> */
    CS__T_HOSTBRIDGE, /* PCI host bridge (root complex) */
    CS__T_PCIBRIDGE,  /* PCI-to-PCI bridge: a switch port or root port */
    CS__T_PCIDEV,
    CS__T_OSDEV
};

struct cs_topo_node {
    int parent; /* -1 for the root */
    int depth;
    enum cs__tkind kind;
    int numa, package; /* of the nearest non-I/O ancestor, -1 unknown */
};

/* Append a tree node; returns its index or -1 (out of memory). */
int cs__topo_add_node(struct cs_topo *t, int parent, enum cs__tkind kind, int numa, int package);
/* Append a GPU / NIC (zeroed, with unknown fields set); NULL when out of memory. */
struct cs_topo_gpu *cs__topo_add_gpu(struct cs_topo *t);
struct cs_topo_nic *cs__topo_add_nic(struct cs_topo *t);
/* Add a warning sentence (printf format). */
void cs__topo_warn(struct cs_topo *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The rated maximum of a network adapter by PCI vendor and device id; 0 unknown. */
double cs__nic_max_gbps(unsigned vendor, unsigned device);
/* NVLink Gb/s per link for a GPU of compute capability sm (NCCL's per-link figures). */
double cs__nvlink_link_gbps(int sm);
/*
 * Fill t->nvlink from a device graph: bw[i*n+j] Gb/s between devices 0..n-1, gpu_of[i] the GPU
 * index of device i or -1 for a switch.  GPU pairs get their direct bandwidth plus, when both
 * reach switches, the smaller of their total switch bandwidths.
 */
int cs__topo_set_nvlink(struct cs_topo *t, const double *bw, const int *gpu_of, size_t n);
/* Copy src (NULL: "") into a fixed array, truncating and always terminating. */
void cs__copy(char *dst, size_t size, const char *src);
/* The number at the start of s (strtod) when it is finite and in [0, max], else 0 (unknown): rates
 * and speeds read from topology files, which may hold anything. */
double cs__topo_num(const char *s, double max);
#define CS__COPY(dst, src) cs__copy((dst), sizeof(dst), (src))

/* ---- loaders ---- */

int cs__load_hwloc_xml(struct cs_topo *t, const struct cs__xml *root, char *err, size_t errlen);
int cs__load_nccl_xml(struct cs_topo *t, const struct cs__xml *root, char *err, size_t errlen);
/* Live discovery with hwloc (I/O devices included); fills t like the XML loader. */
int cs__load_hwloc_live(struct cs_topo *t, char *err, size_t errlen);

/* ---- fabric.c, fabric_fail.c ---- */

struct cs_fabric;
/* Append a note (a problem met) to f->notes. */
void cs__fabric_note(struct cs_fabric *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Name the node of the rank the launcher reported as failed (its failure and a note). */
void cs__fabric_apply_failure(struct cs_fabric *f);

#endif
