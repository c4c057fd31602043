/*
 * The parts of the topology every source shares: the device tree, distances between devices,
 * which NIC each GPU should use, the NVLink matrix, warnings, and the capacity model.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const dist_names[] = {
    [CS_DIST_PCIE_SWITCH] = "pcie-switch",
    [CS_DIST_HOST_BRIDGE] = "host-bridge",
    [CS_DIST_NUMA] = "numa",
    [CS_DIST_SOCKET] = "socket",
    [CS_DIST_CROSS_SOCKET] = "cross-socket",
    [CS_DIST_UNKNOWN] = "unknown",
};

const char *cs_topo_dist_name(enum cs_topo_dist d)
{
    return (unsigned)d <= CS_DIST_UNKNOWN ? dist_names[d] : "unknown";
}

static const char *const path_names[] = {
    [CS_PATH_SELF] = "self", [CS_PATH_NVLINK] = "nvlink",   [CS_PATH_PCIE] = "pcie",
    [CS_PATH_SHM] = "shm",   [CS_PATH_NETWORK] = "network", [CS_PATH_UNKNOWN] = "unknown",
};

const char *cs_topo_path_name(enum cs_topo_path_kind k)
{
    return (unsigned)k <= CS_PATH_UNKNOWN ? path_names[k] : "unknown";
}

void cs__copy(char *dst, size_t size, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= size)
        n = size - 1;
    memcpy(dst, src ? src : "", n);
    dst[n] = 0;
}

int cs__topo_add_node(struct cs_topo *t, int parent, enum cs__tkind kind, int numa, int package)
{
    if ((t->n_tree & (t->n_tree - 1)) == 0) { /* grow at powers of two */
        size_t cap = t->n_tree ? 2 * t->n_tree : 64;
        struct cs_topo_node *n = realloc(t->tree, cap * sizeof(*n));
        if (!n)
            return -1;
        t->tree = n;
    }
    struct cs_topo_node *n = &t->tree[t->n_tree];
    n->parent = parent;
    n->depth = parent >= 0 ? t->tree[parent].depth + 1 : 0;
    n->kind = kind;
    n->numa = numa;
    n->package = package;
    return (int)t->n_tree++;
}

struct cs_topo_gpu *cs__topo_add_gpu(struct cs_topo *t)
{
    struct cs_topo_gpu *g = realloc(t->gpus, (t->n_gpus + 1) * sizeof(*g));
    if (!g)
        return NULL;
    t->gpus = g;
    g = &t->gpus[t->n_gpus];
    memset(g, 0, sizeof(*g));
    g->index = (int)t->n_gpus++;
    g->numa = g->package = g->nic = g->node = -1;
    g->distance = CS_DIST_UNKNOWN;
    return g;
}

struct cs_topo_nic *cs__topo_add_nic(struct cs_topo *t)
{
    struct cs_topo_nic *n = realloc(t->nics, (t->n_nics + 1) * sizeof(*n));
    if (!n)
        return NULL;
    t->nics = n;
    n = &t->nics[t->n_nics++];
    memset(n, 0, sizeof(*n));
    n->numa = n->package = n->node = -1;
    CS__COPY(n->link_layer, "unknown");
    CS__COPY(n->state, "unknown");
    CS__COPY(n->phys_state, "unknown");
    CS__COPY(n->rate_source, "none");
    return n;
}

void cs__topo_warn(struct cs_topo *t, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    char **w = realloc(t->warnings, (t->n_warnings + 1) * sizeof(*w));
    if (!w)
        return;
    t->warnings = w;
    if ((w[t->n_warnings] = strdup(buf)))
        t->n_warnings++;
}

void cs_topo_free(struct cs_topo *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_warnings; i++)
        free(t->warnings[i]);
    free(t->warnings);
    free(t->gpus);
    free(t->nics);
    free(t->nvlink);
    free(t->tree);
    free(t);
}

/*
 * Rated maxima of common HPC adapters (all ports together where the card bonds them), used when
 * the source gives no active rate.  Sources: vendor product briefs.
 */
static const struct {
    unsigned vendor, device;
    double gbps;
} nic_table[] = {
    {0x15b3, 0x1013, 100}, /* ConnectX-4 (EDR / 100GbE) */
    {0x15b3, 0x1015, 50},  /* ConnectX-4 Lx */
    {0x15b3, 0x1017, 100}, /* ConnectX-5 */
    {0x15b3, 0x1019, 100}, /* ConnectX-5 Ex (EDR) */
    {0x15b3, 0x101b, 200}, /* ConnectX-6 (HDR) */
    {0x15b3, 0x101d, 200}, /* ConnectX-6 Dx */
    {0x15b3, 0x101f, 50},  /* ConnectX-6 Lx */
    {0x15b3, 0x1021, 400}, /* ConnectX-7 (NDR) */
    {0x15b3, 0x1023, 800}, /* ConnectX-8 (XDR) */
    {0x15b3, 0xa2dc, 400}, /* BlueField-3 */
    {0x1d0f, 0xefa0, 100}, /* AWS EFA (p4d: 4 x 100 Gb/s) */
    {0x1d0f, 0xefa1, 100}, /* AWS EFA v2 (p5: 32 x 100 Gb/s) */
    {0x8086, 0x1521, 1},   /* Intel I350 */
    {0x8086, 0x1523, 1},   /* Intel I350 (fiber) */
};

double cs__nic_max_gbps(unsigned vendor, unsigned device)
{
    for (size_t i = 0; i < sizeof(nic_table) / sizeof(nic_table[0]); i++)
        if (nic_table[i].vendor == vendor && nic_table[i].device == device)
            return nic_table[i].gbps;
    return 0;
}

double cs__nvlink_link_gbps(int sm)
{
    /* GB/s per link and direction as NCCL's topology code estimates them, times 8. */
    if (sm >= 100)
        return 40.1 * 8;
    if (sm >= 90)
        return 20.6 * 8;
    if (sm == 86 || sm == 87 || sm == 89)
        return 12.0 * 8;
    if (sm >= 70)
        return 20.0 * 8;
    if (sm >= 60)
        return 18.0 * 8;
    return 0;
}

int cs__topo_set_nvlink(struct cs_topo *t, const double *bw, const int *gpu_of, size_t n)
{
    size_t g = t->n_gpus;
    if (!g)
        return 0;
    double *m = calloc(g * g, sizeof(*m));
    double *sw = calloc(g, sizeof(*sw)); /* each GPU's total bandwidth to switches */
    if (!m || !sw) {
        free(m);
        free(sw);
        return -ENOMEM;
    }
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        if (gpu_of[i] < 0)
            continue;
        for (size_t j = 0; j < n; j++) {
            double b = bw[i * n + j];
            if (b <= 0 || i == j)
                continue;
            any = 1;
            if (gpu_of[j] >= 0)
                m[(size_t)gpu_of[i] * g + (size_t)gpu_of[j]] += b;
            else
                sw[gpu_of[i]] += b;
        }
    }
    for (size_t i = 0; i < g; i++)
        for (size_t j = 0; j < g; j++)
            if (i != j && sw[i] > 0 && sw[j] > 0)
                m[i * g + j] += sw[i] < sw[j] ? sw[i] : sw[j];
    free(sw);
    if (!any) {
        free(m);
        return 0;
    }
    free(t->nvlink);
    t->nvlink = m;
    return 0;
}

enum cs_topo_dist cs_topo_distance(const struct cs_topo *t, int a, int b)
{
    if (a < 0 || b < 0 || (size_t)a >= t->n_tree || (size_t)b >= t->n_tree)
        return CS_DIST_UNKNOWN;
    const struct cs_topo_node *na = &t->tree[a], *nb = &t->tree[b];
    int x = a, y = b;
    while (t->tree[x].depth > t->tree[y].depth)
        x = t->tree[x].parent;
    while (t->tree[y].depth > t->tree[x].depth)
        y = t->tree[y].parent;
    while (x != y) {
        x = t->tree[x].parent;
        y = t->tree[y].parent;
        if (x < 0 || y < 0)
            return CS_DIST_UNKNOWN;
    }
    switch (t->tree[x].kind) {
    case CS__T_PCIBRIDGE:
    case CS__T_PCIDEV:
    case CS__T_OSDEV:
        return CS_DIST_PCIE_SWITCH;
    case CS__T_HOSTBRIDGE:
        return CS_DIST_HOST_BRIDGE;
    default:
        break;
    }
    if (na->numa >= 0 && na->numa == nb->numa)
        return CS_DIST_NUMA;
    if (na->package >= 0 && na->package == nb->package)
        return CS_DIST_SOCKET;
    if (na->package >= 0 && nb->package >= 0)
        return CS_DIST_CROSS_SOCKET;
    return CS_DIST_UNKNOWN;
}

static int nic_up(const struct cs_topo_nic *n)
{
    return strcmp(n->state, "DOWN") != 0 && strcmp(n->state, "INIT") != 0 &&
           strcmp(n->state, "ARMED") != 0;
}

int cs_topo_rank_nic(const struct cs_topo *t, int gpu)
{
    if (gpu >= 0 && (size_t)gpu < t->n_gpus && t->gpus[gpu].nic >= 0)
        return t->gpus[gpu].nic;
    int best = -1;
    for (size_t i = 0; i < t->n_nics; i++) {
        const struct cs_topo_nic *n = &t->nics[i];
        if (!nic_up(n))
            continue;
        if (best < 0 || (n->rdma && !t->nics[best].rdma) ||
            (n->rdma == t->nics[best].rdma && n->gbps > t->nics[best].gbps))
            best = (int)i;
    }
    return best;
}

/*
 * Pair every GPU with its nearest NIC.  RDMA NICs are the candidates when the node has any (a
 * management Ethernet port is not where GPU traffic goes); among equally near NICs a GPU takes one
 * no other GPU has taken yet, so one-NIC-per-GPU designs come out one to one.
 */
static void pair_gpus(struct cs_topo *t)
{
    int have_rdma = 0;
    for (size_t i = 0; i < t->n_nics; i++)
        have_rdma |= t->nics[i].rdma;
    int *used = calloc(t->n_nics ? t->n_nics : 1, sizeof(int));
    for (size_t g = 0; g < t->n_gpus; g++) {
        struct cs_topo_gpu *gpu = &t->gpus[g];
        int best = -1;
        enum cs_topo_dist bd = CS_DIST_UNKNOWN;
        for (size_t i = 0; i < t->n_nics; i++) {
            if (have_rdma && !t->nics[i].rdma)
                continue;
            enum cs_topo_dist d = cs_topo_distance(t, gpu->node, t->nics[i].node);
            if (best < 0 || d < bd || (d == bd && used && used[best] && !used[i])) {
                best = (int)i;
                bd = d;
            }
        }
        gpu->nic = best;
        gpu->distance = best >= 0 ? bd : CS_DIST_UNKNOWN;
        if (best >= 0 && used)
            used[best]++;
    }
    free(used);
}

void cs_topo_finish(struct cs_topo *t)
{
    pair_gpus(t);
    for (size_t i = 0; i < t->n_nics; i++) {
        struct cs_topo_nic *n = &t->nics[i];
        if (n->gbps <= 0 && n->max_gbps > 0) {
            n->gbps = n->max_gbps;
            CS__COPY(n->rate_source, "pci-id");
        }
        if (!strcmp(n->state, "DOWN") || !strcmp(n->state, "INIT") || !strcmp(n->state, "ARMED"))
            cs__topo_warn(t, "NIC %s port %d is %s (physical state %s)", n->name, n->port, n->state,
                          n->phys_state);
        else if (!strcmp(n->rate_source, "verbs") || !strcmp(n->rate_source, "sysfs")) {
            if (n->max_gbps > 0 && n->gbps > 0 && n->gbps < n->max_gbps * 0.99)
                cs__topo_warn(t,
                              "NIC %s port %d runs at %.0f Gb/s, below the %.0f Gb/s the adapter "
                              "is rated for (degraded speed or width)",
                              n->name, n->port, n->gbps, n->max_gbps);
            else if (n->rdma && n->width > 0 && n->width < 4 &&
                     !strcmp(n->link_layer, "InfiniBand"))
                cs__topo_warn(t,
                              "NIC %s port %d is linked at width %dX (InfiniBand ports "
                              "normally run 4X): degraded width",
                              n->name, n->port, n->width);
        }
    }
    for (size_t g = 0; g < t->n_gpus; g++) {
        const struct cs_topo_gpu *gpu = &t->gpus[g];
        if (gpu->nic < 0 && t->n_nics == 0)
            continue; /* one warning below covers it */
        if (gpu->nic < 0)
            cs__topo_warn(t, "GPU %d (%s) has no NIC", gpu->index, gpu->pci);
        else if (gpu->distance >= CS_DIST_SOCKET)
            cs__topo_warn(t, "GPU %d (%s) has no near NIC: the nearest, %s, is %s away", gpu->index,
                          gpu->pci, t->nics[gpu->nic].name, cs_topo_dist_name(gpu->distance));
    }
    if (t->n_gpus && !t->n_nics)
        cs__topo_warn(t, "no NIC found: the %zu GPUs have no network path in this description",
                      t->n_gpus);
}

double cs_topo_ib_gbps(int speed, int width, int *lanes)
{
    double lane;
    switch (speed) {
    case 1:
        lane = 2.5;
        break; /* SDR */
    case 2:
        lane = 5.0;
        break; /* DDR */
    case 4:
        lane = 10.0;
        break; /* QDR */
    case 8:
        lane = 10.0;
        break; /* FDR10 */
    case 16:
        lane = 14.0;
        break; /* FDR */
    case 32:
        lane = 25.0;
        break; /* EDR */
    case 64:
        lane = 50.0;
        break; /* HDR */
    case 128:
        lane = 100.0;
        break; /* NDR */
    default:
        lane = 0;
        break;
    }
    int n;
    switch (width) {
    case 1:
        n = 1;
        break;
    case 2:
        n = 4;
        break;
    case 4:
        n = 8;
        break;
    case 8:
        n = 12;
        break;
    case 16:
        n = 2;
        break;
    default:
        n = 0;
        break;
    }
    if (lanes)
        *lanes = n;
    return lane * n;
}

double cs__topo_num(const char *s, double max)
{
    if (!s)
        return 0;
    double v = strtod(s, NULL);
    return isfinite(v) && v >= 0 && v <= max ? v : 0;
}

double cs_topo_parse_rate(const char *s, int *lanes)
{
    char *end;
    double v = strtod(s, &end);
    /* 1e6 Gb/s: far above any link, so a value past it is not a rate */
    if (end == s || !isfinite(v) || v < 0 || v > 1e6 || !strstr(end, "Gb/sec"))
        return 0;
    const char *x = strchr(end, '(');
    if (lanes)
        *lanes = x ? atoi(x + 1) : 0;
    return v;
}

double cs_topo_pcie_gbps(const char *speed, int width)
{
    if (!speed || width <= 0 || width > 1024)
        return 0;
    double gt = cs__topo_num(speed, 1e4); /* GT/s (PCIe 7: 128) */
    if (gt <= 0)
        return 0;
    /* 8b/10b up to 5 GT/s (PCIe 1 and 2), 128b/130b from 8 GT/s (PCIe 3 to 5). */
    double enc = gt <= 5.0 ? 0.8 : 128.0 / 130.0;
    return gt * enc * width;
}

static const struct cs_topo_nic *rank_nic(const struct cs_topo_place *p)
{
    int i = cs_topo_rank_nic(p->topo, p->gpu);
    return i >= 0 ? &p->topo->nics[i] : NULL;
}

/* A NIC's usable rate: its port rate, or less when its PCIe link is slower. */
static double nic_gbps(const struct cs_topo_nic *n)
{
    if (!n)
        return 0;
    double r = n->gbps;
    if (n->pcie_gbps > 0 && (r <= 0 || n->pcie_gbps < r))
        r = n->pcie_gbps;
    return r;
}

void cs_topo_capacity(const struct cs_topo_place *a, const struct cs_topo_place *b,
                      struct cs_topo_path *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = CS_PATH_UNKNOWN;
    if (!a->topo || !b->topo) {
        snprintf(out->why, sizeof(out->why), "no topology for rank %d",
                 a->topo ? b->rank : a->rank);
        return;
    }
    int same = a->topo == b->topo || strcmp(a->topo->host, b->topo->host) == 0;
    if (same && a->rank == b->rank) {
        out->kind = CS_PATH_SELF;
        return;
    }
    const struct cs_topo *t = a->topo;
    if (same) {
        if (a->gpu >= 0 && b->gpu >= 0 && (size_t)a->gpu < t->n_gpus &&
            (size_t)b->gpu < t->n_gpus) {
            if (a->gpu == b->gpu) {
                out->kind = CS_PATH_SHM;
                snprintf(out->why, sizeof(out->why), "ranks %d and %d share GPU %d", a->rank,
                         b->rank, a->gpu);
                return;
            }
            double nv = t->nvlink ? t->nvlink[(size_t)a->gpu * t->n_gpus + (size_t)b->gpu] : 0;
            if (nv > 0) {
                out->kind = CS_PATH_NVLINK;
                out->gbps = nv;
                snprintf(out->why, sizeof(out->why), "NVLink GPU %d - GPU %d: %.0f Gb/s", a->gpu,
                         b->gpu, nv);
                return;
            }
            const struct cs_topo_gpu *ga = &t->gpus[a->gpu], *gb = &t->gpus[b->gpu];
            out->kind = CS_PATH_PCIE;
            double pa = ga->pcie_gbps, pb = gb->pcie_gbps;
            out->gbps = pa > 0 && pb > 0 ? (pa < pb ? pa : pb) : (pa > 0 ? pa : pb);
            snprintf(out->why, sizeof(out->why), "PCIe GPU %d (%.0f Gb/s) - GPU %d (%.0f Gb/s), %s",
                     a->gpu, pa, b->gpu, pb,
                     cs_topo_dist_name(cs_topo_distance(t, ga->node, gb->node)));
            return;
        }
        out->kind = CS_PATH_SHM;
        snprintf(out->why, sizeof(out->why), "shared memory on %.64s (bandwidth not modelled)",
                 t->host);
        return;
    }
    const struct cs_topo_nic *na = rank_nic(a), *nb = rank_nic(b);
    out->kind = CS_PATH_NETWORK;
    double ra = nic_gbps(na), rb = nic_gbps(nb);
    out->gbps = ra > 0 && rb > 0 ? (ra < rb ? ra : rb) : 0;
    snprintf(out->why, sizeof(out->why), "%.32s %.0f Gb/s (%.64s) - %.32s %.0f Gb/s (%.64s)",
             na ? na->name : "no NIC", ra, a->topo->host, nb ? nb->name : "no NIC", rb,
             b->topo->host);
}
