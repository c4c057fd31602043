/*
 * hwloc XML (the format of `lstopo foo.xml` and hwloc_topology_export_xml, versions 2 and 3)
 * into struct cs_topo.  Live topologies go the same way: hwloc discovers the machine and exports
 * XML, which is also the snapshot commscope keeps per node, so files and live runs share one path
 * and hwloc 2.x can still describe version 3 files it would refuse to import.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hwloc.h>

#include "internal.h"

/* OS device types: hwloc 2 numbers them, hwloc 3 uses bit flags. */
enum { OSDEV_GPU = 1, OSDEV_NETWORK = 2, OSDEV_OPENFABRICS = 4, OSDEV_COPROC = 8 };

static int osdev_kind(const char *type, int v3)
{
    if (!type)
        return 0;
    long v = strtol(type, NULL, 10);
    if (v3) {
        int k = 0;
        k |= (v & 4) ? OSDEV_GPU : 0;
        k |= (v & 8) ? OSDEV_COPROC : 0;
        k |= (v & 16) ? OSDEV_NETWORK : 0;
        k |= (v & 32) ? OSDEV_OPENFABRICS : 0;
        return k;
    }
    switch (v) {
    case 1:
        return OSDEV_GPU;
    case 2:
        return OSDEV_NETWORK;
    case 3:
        return OSDEV_OPENFABRICS;
    case 5:
        return OSDEV_COPROC;
    default:
        return 0;
    }
}

static const char *info(const struct cs__xml *obj, const char *name)
{
    for (const struct cs__xml *c = obj->child; c; c = c->next)
        if (!strcmp(c->name, "info")) {
            const char *n = cs__xml_attr(c, "name");
            if (n && !strcmp(n, name))
                return cs__xml_attr(c, "value");
        }
    return NULL;
}

struct gp_map {
    unsigned long long gp;
    int gpu; /* GPU index, -1 other */
};

struct ctx {
    struct cs_topo *t;
    int v3;
    struct gp_map *gp;
    size_t n_gp, cap_gp;
    char *err;
    size_t errlen;
};

static void remember_gp(struct ctx *c, const struct cs__xml *obj, int gpu)
{
    const char *s = cs__xml_attr(obj, "gp_index");
    if (!s)
        return;
    if (c->n_gp == c->cap_gp) {
        size_t cap = c->cap_gp ? 2 * c->cap_gp : 64;
        struct gp_map *m = realloc(c->gp, cap * sizeof(*m));
        if (!m)
            return;
        c->gp = m;
        c->cap_gp = cap;
    }
    c->gp[c->n_gp].gp = strtoull(s, NULL, 10);
    c->gp[c->n_gp].gpu = gpu;
    c->n_gp++;
}

/* The os_index of the first NUMANode among obj's memory children (through MemCache), or -1. */
static int numa_child(const struct cs__xml *obj)
{
    for (const struct cs__xml *c = obj->child; c; c = c->next) {
        if (strcmp(c->name, "object"))
            continue;
        const char *type = cs__xml_attr(c, "type");
        if (!type)
            continue;
        if (!strcmp(type, "NUMANode")) {
            const char *os = cs__xml_attr(c, "os_index");
            return os ? atoi(os) : -1;
        }
        if (!strcmp(type, "MemCache")) {
            int n = numa_child(c);
            if (n >= 0)
                return n;
        }
    }
    return -1;
}

static int pci_ids(const char *pci_type, unsigned *cls, unsigned *vendor, unsigned *device)
{
    return pci_type && sscanf(pci_type, "%x [%x:%x]", cls, vendor, device) == 3 ? 0 : -1;
}

/* A GPU: 3D controllers of any vendor, VGA controllers of NVIDIA and AMD (not BMC graphics). */
static int is_gpu_class(unsigned cls, unsigned vendor)
{
    return cls == 0x0302 ||
           ((cls == 0x0300 || cls == 0x0380) && (vendor == 0x10de || vendor == 0x1002));
}

static int visit(struct ctx *c, const struct cs__xml *obj, int parent, int numa, int package);

static void add_pcidev(struct ctx *c, const struct cs__xml *obj, int node, int numa, int package)
{
    struct cs_topo *t = c->t;
    unsigned cls = 0, vendor = 0, device = 0;
    const char *busid = cs__xml_attr(obj, "pci_busid");
    const char *lspeed = cs__xml_attr(obj, "pci_link_speed"); /* GB/s */
    double pcie = cs__topo_num(lspeed, 1e5) * 8;
    if (pci_ids(cs__xml_attr(obj, "pci_type"), &cls, &vendor, &device) < 0) {
        cs__topo_warn(t, "PCI device %s at line %d has no readable pci_type; ignored",
                      busid ? busid : "?", obj->line);
        return;
    }
    int osk = 0;
    const struct cs__xml *gpu_os = NULL;
    for (const struct cs__xml *ch = obj->child; ch; ch = ch->next)
        if (!strcmp(ch->name, "object")) {
            const char *ty = cs__xml_attr(ch, "type");
            if (ty && !strcmp(ty, "OSDev")) {
                int k = osdev_kind(cs__xml_attr(ch, "osdev_type"), c->v3);
                osk |= k;
                if ((k & (OSDEV_GPU | OSDEV_COPROC)) && !gpu_os)
                    gpu_os = ch;
            }
        }
    if (is_gpu_class(cls, vendor)) {
        struct cs_topo_gpu *g = cs__topo_add_gpu(t);
        if (!g)
            return;
        CS__COPY(g->pci, busid);
        g->numa = numa;
        g->package = package;
        g->node = node;
        g->pcie_gbps = pcie;
        snprintf(g->model, sizeof(g->model), "%04x:%04x", vendor, device);
        /* cudaN / nvmlN / rsmiN name the index the runtime uses. */
        for (const struct cs__xml *ch = obj->child; ch; ch = ch->next) {
            const char *nm = cs__xml_attr(ch, "name");
            const char *model = info(ch, "GPUModel");
            if (model)
                CS__COPY(g->model, model);
            if (nm && (!strncmp(nm, "cuda", 4) || !strncmp(nm, "nvml", 4)) && nm[4] >= '0' &&
                nm[4] <= '9')
                g->index = atoi(nm + 4);
            if (!strcmp(ch->name, "object"))
                remember_gp(c, ch, (int)(g - t->gpus));
        }
        remember_gp(c, obj, (int)(g - t->gpus));
        return;
    }
    remember_gp(c, obj, -1);
    if ((cls >> 8) != 0x02 && !(osk & (OSDEV_NETWORK | OSDEV_OPENFABRICS)))
        return;
    /* One NIC per OpenFabrics device; a plain network function is one NIC named by its
     * interface. */
    const char *netdev = NULL;
    for (const struct cs__xml *ch = obj->child; ch; ch = ch->next) {
        const char *ty = cs__xml_attr(ch, "type");
        if (strcmp(ch->name, "object") || !ty || strcmp(ty, "OSDev"))
            continue;
        if (osdev_kind(cs__xml_attr(ch, "osdev_type"), c->v3) & OSDEV_NETWORK)
            netdev = netdev ? netdev : cs__xml_attr(ch, "name");
    }
    int added = 0;
    for (const struct cs__xml *ch = obj->child; ch; ch = ch->next) {
        const char *ty = cs__xml_attr(ch, "type");
        if (strcmp(ch->name, "object") || !ty || strcmp(ty, "OSDev"))
            continue;
        if (!(osdev_kind(cs__xml_attr(ch, "osdev_type"), c->v3) & OSDEV_OPENFABRICS))
            continue;
        struct cs_topo_nic *n = cs__topo_add_nic(t);
        if (!n)
            return;
        CS__COPY(n->name, cs__xml_attr(ch, "name"));
        CS__COPY(n->netdev, netdev);
        n->rdma = 1;
        /* The first port hwloc knows a state for; state 4 is ACTIVE (verbs encoding). */
        for (int p = 1; p <= 4; p++) {
            char key[32];
            snprintf(key, sizeof(key), "Port%dState", p);
            const char *st = info(ch, key);
            if (!st)
                continue;
            static const char *const states[] = {"NOP",   "DOWN",   "INIT",
                                                 "ARMED", "ACTIVE", "ACTIVE_DEFER"};
            int s = atoi(st);
            n->port = p;
            CS__COPY(n->state, s >= 0 && s <= 5 ? states[s] : "unknown");
            snprintf(key, sizeof(key), "Port%dLinkLayer", p);
            if (info(ch, key))
                CS__COPY(n->link_layer, info(ch, key));
            if (s == 4)
                break;
        }
        added = 1;
        CS__COPY(n->pci, busid);
        if (!strcmp(n->link_layer, "unknown"))
            CS__COPY(n->link_layer, cls == 0x0207 ? "InfiniBand" : "Ethernet");
        n->max_gbps = cs__nic_max_gbps(vendor, device);
        n->pcie_gbps = pcie;
        n->numa = numa;
        n->package = package;
        n->node = node;
    }
    if (!added) {
        struct cs_topo_nic *n = cs__topo_add_nic(t);
        if (!n)
            return;
        if (netdev)
            CS__COPY(n->name, netdev);
        else
            snprintf(n->name, sizeof(n->name), "pci-%s", busid ? busid : "?");
        CS__COPY(n->pci, busid);
        CS__COPY(n->link_layer, cls == 0x0207 ? "InfiniBand" : "Ethernet");
        n->max_gbps = cs__nic_max_gbps(vendor, device);
        n->pcie_gbps = pcie;
        n->numa = numa;
        n->package = package;
        n->node = node;
    }
}

static int visit(struct ctx *c, const struct cs__xml *obj, int parent, int numa, int package)
{
    const char *type = cs__xml_attr(obj, "type");
    if (!type) {
        snprintf(c->err, c->errlen, "%s:%d: <object> without a type attribute", c->t->file,
                 obj->line);
        return -EINVAL;
    }
    if (!strcmp(type, "NUMANode") || !strcmp(type, "MemCache"))
        return 0; /* memory children: read by their parent through numa_child */
    enum cs__tkind kind = CS__T_CPU;
    int io = 0;
    if (!strcmp(type, "Machine"))
        kind = CS__T_MACHINE;
    else if (!strcmp(type, "Package")) {
        kind = CS__T_PACKAGE;
        const char *os = cs__xml_attr(obj, "os_index");
        package = os ? atoi(os) : package;
        c->t->n_packages++;
    } else if (!strcmp(type, "Bridge")) {
        const char *bt = cs__xml_attr(obj, "bridge_type");
        kind = bt && bt[0] == '0' ? CS__T_HOSTBRIDGE : CS__T_PCIBRIDGE;
        io = 1;
    } else if (!strcmp(type, "PCIDev")) {
        kind = CS__T_PCIDEV;
        io = 1;
    } else if (!strcmp(type, "OSDev")) {
        kind = CS__T_OSDEV;
        io = 1;
    } else if (!strcmp(type, "PU") || !strcmp(type, "Misc"))
        return 0; /* leaves: no devices below */
    if (!io) {
        int n = numa_child(obj);
        if (n >= 0)
            numa = n;
    }
    int node = cs__topo_add_node(c->t, parent, kind, numa, package);
    if (node < 0) {
        snprintf(c->err, c->errlen, "out of memory reading %s", c->t->file);
        return -ENOMEM;
    }
    if (kind == CS__T_PCIDEV)
        add_pcidev(c, obj, node, numa, package);
    else if (kind == CS__T_PCIBRIDGE) {
        /* A switch is an upstream bridge whose children are bridges (its downstream ports). */
        const char *pt = cs__xml_attr(obj, "pci_type");
        unsigned cls, v, d;
        if (pci_ids(pt, &cls, &v, &d) == 0) {
            int down = 0;
            for (const struct cs__xml *ch = obj->child; ch; ch = ch->next) {
                const char *ty = cs__xml_attr(ch, "type");
                down += !strcmp(ch->name, "object") && ty && !strcmp(ty, "Bridge");
            }
            if (down > 1)
                c->t->n_pcie_switches++;
        }
    }
    for (const struct cs__xml *ch = obj->child; ch; ch = ch->next) {
        if (strcmp(ch->name, "object"))
            continue;
        int r = visit(c, ch, node, numa, package);
        if (r < 0)
            return r;
    }
    return 0;
}

static int count_numa(const struct cs__xml *e)
{
    int n = 0;
    for (const struct cs__xml *c = e->child; c; c = c->next)
        if (!strcmp(c->name, "object")) {
            const char *ty = cs__xml_attr(c, "type");
            n += ty && !strcmp(ty, "NUMANode");
            n += count_numa(c);
        }
    return n;
}

static int find_gp(const struct ctx *c, unsigned long long gp)
{
    for (size_t i = 0; i < c->n_gp; i++)
        if (c->gp[i].gp == gp)
            return (int)i;
    return -1;
}

/* Call fn on every whitespace-separated token of the text of e's children named tag. */
static size_t each_token(const struct cs__xml *e, const char *tag, void (*fn)(void *, const char *),
                         void *arg)
{
    size_t n = 0;
    for (const struct cs__xml *c = e->child; c; c = c->next) {
        if (strcmp(c->name, tag) || !c->text)
            continue;
        for (const char *q = c->text; *q;) {
            while (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r')
                q++;
            if (!*q)
                break;
            char tok[64];
            size_t k = 0;
            while (*q && *q != ' ' && *q != '\n' && *q != '\t' && *q != '\r') {
                if (k < sizeof(tok) - 1)
                    tok[k++] = *q;
                q++;
            }
            tok[k] = 0;
            fn(arg, tok);
            n++;
        }
    }
    return n;
}

struct nv_read {
    const struct ctx *c;
    size_t n, ni, nv;
    int *gpu_of;
    double *bw;
};

static void nv_index(void *arg, const char *tok)
{
    struct nv_read *r = arg;
    if (r->ni >= r->n)
        return;
    const char *colon = strchr(tok, ':'); /* hetero: "OSDev:802", homogeneous: "802" */
    int i = find_gp(r->c, strtoull(colon ? colon + 1 : tok, NULL, 10));
    r->gpu_of[r->ni++] = i >= 0 ? r->c->gp[i].gpu : -1;
}

static void nv_value(void *arg, const char *tok)
{
    struct nv_read *r = arg;
    if (r->nv < r->n * r->n)
        r->bw[r->nv] = cs__topo_num(tok, 1e9) * 8 / 1000; /* MB/s -> Gb/s */
    r->nv++;
}

/*
 * The NVLinkBandwidth matrix: <distances2hetero> lists its objects as "Type:gp_index" in
 * <indexes> text, <distances2> as gp indexes of one type; <u64values> holds MB/s row by row.
 */
static void read_nvlink(struct ctx *c, const struct cs__xml *root)
{
    const struct cs__xml *d = NULL;
    for (const struct cs__xml *e = root->child; e && !d; e = e->next) {
        const char *nm = cs__xml_attr(e, "name");
        if (!strncmp(e->name, "distances2", 10) && nm && !strcmp(nm, "NVLinkBandwidth"))
            d = e;
    }
    if (!d)
        return;
    const char *nb = cs__xml_attr(d, "nbobjs");
    size_t n = nb ? strtoul(nb, NULL, 10) : 0;
    if (n == 0 || n > 4096) {
        cs__topo_warn(c->t, "%s:%d: NVLinkBandwidth has nbobjs \"%s\"; NVLink not read", c->t->file,
                      d->line, nb ? nb : "");
        return;
    }
    struct nv_read r = {c, n, 0, 0, malloc(n * sizeof(int)), calloc(n * n, sizeof(double))};
    if (r.gpu_of && r.bw) {
        each_token(d, "indexes", nv_index, &r);
        each_token(d, "u64values", nv_value, &r);
        if (r.ni != n || r.nv != n * n)
            cs__topo_warn(c->t,
                          "%s:%d: NVLinkBandwidth lists %zu objects and %zu values for "
                          "%zu objects; NVLink not read",
                          c->t->file, d->line, r.ni, r.nv, n);
        else
            cs__topo_set_nvlink(c->t, r.bw, r.gpu_of, n);
    }
    free(r.gpu_of);
    free(r.bw);
}

int cs__load_hwloc_xml(struct cs_topo *t, const struct cs__xml *root, char *err, size_t errlen)
{
    const char *ver = cs__xml_attr(root, "version");
    struct ctx c = {t, ver && atoi(ver) >= 3, NULL, 0, 0, err, errlen};
    if (ver && atoi(ver) < 2) {
        snprintf(err, errlen, "%s: hwloc XML version %s is not supported (2 and 3 are)", t->file,
                 ver);
        return -EINVAL;
    }
    const struct cs__xml *top = NULL;
    for (const struct cs__xml *e = root->child; e; e = e->next)
        if (!strcmp(e->name, "object")) {
            top = e;
            break;
        }
    if (!top) {
        snprintf(err, errlen, "%s: <topology> has no <object> (not an hwloc topology)", t->file);
        return -EINVAL;
    }
    CS__COPY(t->source, "hwloc-xml");
    const char *hn = info(top, "HostName");
    if (hn && !t->host[0])
        CS__COPY(t->host, hn);
    t->n_numa = count_numa(top);
    int r = visit(&c, top, -1, -1, -1);
    if (r == 0)
        read_nvlink(&c, root);
    free(c.gp);
    return r;
}

int cs__load_hwloc_live(struct cs_topo *t, char *err, size_t errlen)
{
    size_t len = 0;
    char *xml = cs_topo_export_live_xml(&len, err, errlen);
    if (!xml)
        return -EIO;
    struct cs__xml *root = NULL;
    int r = cs__xml_parse(&root, xml, len, "hwloc export", err, errlen);
    if (r == 0) {
        r = cs__load_hwloc_xml(t, root, err, errlen);
        CS__COPY(t->source, "hwloc");
    }
    cs__xml_free(root);
    free(xml);
    return r;
}

char *cs_topo_export_live_xml(size_t *len, char *err, size_t errlen)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) < 0) {
        snprintf(err, errlen, "hwloc_topology_init failed");
        return NULL;
    }
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topo) < 0) {
        snprintf(err, errlen, "hwloc could not discover this machine's topology");
        hwloc_topology_destroy(topo);
        return NULL;
    }
    char *buf = NULL;
    int blen = 0;
    if (hwloc_topology_export_xmlbuffer(topo, &buf, &blen, 0) < 0 || !buf) {
        snprintf(err, errlen, "hwloc could not export this machine's topology as XML");
        hwloc_topology_destroy(topo);
        return NULL;
    }
    char *copy = malloc((size_t)blen + 1);
    if (copy) {
        memcpy(copy, buf, (size_t)blen);
        copy[blen] = 0;
        /* hwloc counts the terminating NUL in blen. */
        *len = strlen(copy);
    } else
        snprintf(err, errlen, "out of memory copying the hwloc export");
    hwloc_free_xmlbuffer(topo, buf);
    hwloc_topology_destroy(topo);
    return copy;
}
