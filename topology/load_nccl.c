/*
 * NCCL topology files (the NCCL_TOPO_FILE format, also what NCCL_TOPO_DUMP_FILE writes) into
 * struct cs_topo.  <cpu numaid=...> is a NUMA node (NCCL does not say which socket, so each is
 * taken as its own package); <pci> elements nest like the PCIe tree; <gpu> and <nic><net> name
 * the devices; <nvlink target count> gives links per GPU, at NCCL's per-link rate for the GPU's
 * compute capability.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct link {
    int gpu;
    int sm;
    char target[16];
    int count;
};

struct nctx {
    struct cs_topo *t;
    struct link *links;
    size_t n_links;
    char *err;
    size_t errlen;
};

static unsigned hexattr(const struct cs__xml *e, const char *name)
{
    const char *s = cs__xml_attr(e, name);
    return s ? (unsigned)strtoul(s, NULL, 16) : 0;
}

static void add_nets(struct nctx *c, const struct cs__xml *nic, int node, int numa, const char *pci,
                     unsigned cls, unsigned vendor, unsigned device, double pcie)
{
    int any = 0;
    for (const struct cs__xml *net = nic ? nic->child : NULL;; net = net->next) {
        if (nic && !net && any)
            break;
        if (net && strcmp(net->name, "net"))
            continue;
        struct cs_topo_nic *n = cs__topo_add_nic(c->t);
        if (!n)
            return;
        const char *name = net ? cs__xml_attr(net, "name") : NULL;
        if (name)
            CS__COPY(n->name, name);
        else
            snprintf(n->name, sizeof(n->name), "nic-%s", pci);
        CS__COPY(n->pci, pci);
        n->rdma = cls == 0x0207 || (net && cs__xml_attr(net, "gdr")) || vendor == 0x15b3;
        CS__COPY(n->link_layer, cls == 0x0207 ? "InfiniBand" : cls ? "Ethernet" : "unknown");
        const char *port = net ? cs__xml_attr(net, "port") : NULL;
        n->port = port ? atoi(port) : 0;
        const char *speed = net ? cs__xml_attr(net, "speed") : NULL; /* Mb/s */
        double mbps = cs__topo_num(speed, 1e9);                      /* up to 1 Pb/s */
        if (mbps > 0) {
            n->gbps = mbps / 1000;
            CS__COPY(n->rate_source, "nccl");
        }
        n->max_gbps = cs__nic_max_gbps(vendor, device);
        n->pcie_gbps = pcie;
        n->numa = n->package = numa;
        n->node = node;
        any = 1;
        if (!net)
            break;
    }
}

static int walk(struct nctx *c, const struct cs__xml *e, int parent, int numa)
{
    /* A <nic> inside a <pci> is that device's (read with it); only a bare one is its own. */
    int in_pci = !strcmp(e->name, "pci");
    struct cs_topo *t = c->t;
    for (const struct cs__xml *ch = e->child; ch; ch = ch->next) {
        if (!strcmp(ch->name, "cpu")) {
            const char *id = cs__xml_attr(ch, "numaid");
            int nid = id ? atoi(id) : -1;
            int node = cs__topo_add_node(t, parent, CS__T_CPU, nid, nid);
            if (node < 0)
                return -ENOMEM;
            t->n_numa++;
            t->n_packages++;
            int r = walk(c, ch, node, nid);
            if (r < 0)
                return r;
        } else if (!strcmp(ch->name, "nic") && !in_pci) {
            add_nets(c, ch, parent, numa, "", 0, 0, 0, 0);
        } else if (!strcmp(ch->name, "pci")) {
            const char *busid = cs__xml_attr(ch, "busid");
            unsigned cls = hexattr(ch, "class") >> 8; /* 0x030200 -> 0x0302 */
            unsigned vendor = hexattr(ch, "vendor"), device = hexattr(ch, "device");
            const char *ws = cs__xml_attr(ch, "link_width");
            double pcie = cs_topo_pcie_gbps(cs__xml_attr(ch, "link_speed"), ws ? atoi(ws) : 0);
            const struct cs__xml *gpu = NULL, *nic = NULL;
            int n_pci = 0;
            for (const struct cs__xml *g = ch->child; g; g = g->next) {
                gpu = !strcmp(g->name, "gpu") ? g : gpu;
                nic = !strcmp(g->name, "nic") ? g : nic;
                n_pci += !strcmp(g->name, "pci");
            }
            enum cs__tkind kind =
                (cls >> 8) == 0x06 && cls != 0x0680 ? CS__T_PCIBRIDGE : CS__T_PCIDEV;
            if (!busid) {
                snprintf(c->err, c->errlen, "%s:%d: <pci> without a busid", t->file, ch->line);
                return -EINVAL;
            }
            int node = cs__topo_add_node(t, parent, kind, numa, numa);
            if (node < 0)
                return -ENOMEM;
            if (kind == CS__T_PCIBRIDGE && n_pci > 1)
                t->n_pcie_switches++;
            if (gpu || cls == 0x0302 ||
                ((cls == 0x0300 || cls == 0x0380) && (vendor == 0x10de || vendor == 0x1002))) {
                struct cs_topo_gpu *g = cs__topo_add_gpu(t);
                if (!g)
                    return -ENOMEM;
                CS__COPY(g->pci, busid);
                g->numa = g->package = numa;
                g->node = node;
                g->pcie_gbps = pcie;
                if (vendor)
                    snprintf(g->model, sizeof(g->model), "%04x:%04x", vendor, device);
                const char *dev = gpu ? cs__xml_attr(gpu, "dev") : NULL;
                if (dev)
                    g->index = atoi(dev);
                const char *sm = gpu ? cs__xml_attr(gpu, "sm") : NULL;
                for (const struct cs__xml *l = gpu ? gpu->child : NULL; l; l = l->next) {
                    if (strcmp(l->name, "nvlink"))
                        continue;
                    struct link *nl = realloc(c->links, (c->n_links + 1) * sizeof(*nl));
                    if (!nl)
                        return -ENOMEM;
                    c->links = nl;
                    nl += c->n_links++;
                    nl->gpu = (int)(g - t->gpus);
                    nl->sm = sm ? atoi(sm) : 0;
                    CS__COPY(nl->target, cs__xml_attr(l, "target"));
                    const char *cnt = cs__xml_attr(l, "count");
                    nl->count = cnt ? atoi(cnt) : 1;
                }
            } else if (nic || (cls >> 8) == 0x02) {
                add_nets(c, nic, node, numa, busid, cls, vendor, device, pcie);
            }
            int r = walk(c, ch, node, numa);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

/* Devices of the NVLink graph: GPUs first, then every other target (NVSwitches, CPUs). */
static void build_nvlink(struct nctx *c)
{
    struct cs_topo *t = c->t;
    if (!c->n_links)
        return;
    size_t cap = t->n_gpus + c->n_links, n = t->n_gpus;
    char(*names)[16] = calloc(cap, sizeof(*names));
    int *gpu_of = malloc(cap * sizeof(int));
    double *bw = NULL;
    if (!names || !gpu_of)
        goto out;
    for (size_t i = 0; i < t->n_gpus; i++) {
        CS__COPY(names[i], t->gpus[i].pci);
        gpu_of[i] = (int)i;
    }
    for (size_t l = 0; l < c->n_links; l++) {
        size_t j;
        for (j = 0; j < n && strcasecmp(names[j], c->links[l].target); j++)
            ;
        if (j == n) {
            CS__COPY(names[n], c->links[l].target);
            gpu_of[n++] = -1;
        }
    }
    bw = calloc(n * n, sizeof(double));
    if (!bw)
        goto out;
    int unknown_sm = 0;
    for (size_t l = 0; l < c->n_links; l++) {
        const struct link *k = &c->links[l];
        size_t j;
        for (j = 0; j < n && strcasecmp(names[j], k->target); j++)
            ;
        double per = cs__nvlink_link_gbps(k->sm);
        unknown_sm |= per <= 0;
        /* Links to the CPU (POWER9) carry no GPU-to-GPU traffic. */
        bw[(size_t)k->gpu * n + j] += per * k->count;
    }
    if (unknown_sm)
        cs__topo_warn(t,
                      "%s: a GPU with NVLinks has no compute capability (sm); its NVLink "
                      "bandwidth is unknown",
                      t->file);
    cs__topo_set_nvlink(t, bw, gpu_of, n);
out:
    free(names);
    free(gpu_of);
    free(bw);
}

int cs__load_nccl_xml(struct cs_topo *t, const struct cs__xml *root, char *err, size_t errlen)
{
    struct nctx c = {t, NULL, 0, err, errlen};
    CS__COPY(t->source, "nccl-xml");
    int top = cs__topo_add_node(t, -1, CS__T_MACHINE, -1, -1);
    if (top < 0)
        return -ENOMEM;
    int r = walk(&c, root, top, -1);
    if (r == -ENOMEM)
        snprintf(err, errlen, "out of memory reading %s", t->file);
    if (r == 0)
        build_nvlink(&c);
    free(c.links);
    return r;
}
