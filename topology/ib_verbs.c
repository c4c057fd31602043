/*
 * RDMA devices and ports from libibverbs, loaded with dlopen so commscope neither links nor
 * needs it (as NCCL does).  Only the device list and port queries are used.
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "internal.h"

#ifdef CS_HAVE_VERBS_H
#include <infiniband/verbs.h>

struct verbs {
    struct ibv_device **(*get_device_list)(int *);
    void (*free_device_list)(struct ibv_device **);
    const char *(*get_device_name)(struct ibv_device *);
    struct ibv_context *(*open_device)(struct ibv_device *);
    int (*close_device)(struct ibv_context *);
    int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
    /* The exported symbol takes the older, shorter attribute struct: a prefix of ours. */
    int (*query_port)(struct ibv_context *, uint8_t, struct ibv_port_attr *);
};

static void *load(struct verbs *v)
{
    void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen("libibverbs.so", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return NULL;
    *(void **)&v->get_device_list = dlsym(h, "ibv_get_device_list");
    *(void **)&v->free_device_list = dlsym(h, "ibv_free_device_list");
    *(void **)&v->get_device_name = dlsym(h, "ibv_get_device_name");
    *(void **)&v->open_device = dlsym(h, "ibv_open_device");
    *(void **)&v->close_device = dlsym(h, "ibv_close_device");
    *(void **)&v->query_device = dlsym(h, "ibv_query_device");
    *(void **)&v->query_port = dlsym(h, "ibv_query_port");
    if (!v->get_device_list || !v->free_device_list || !v->get_device_name || !v->open_device ||
        !v->close_device || !v->query_device || !v->query_port) {
        dlclose(h);
        return NULL;
    }
    return h;
}

static const char *port_state(int s)
{
    static const char *const n[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
    return s >= 0 && s <= 5 ? n[s] : "unknown";
}

static const char *phys_state(int s)
{
    static const char *const n[] = {"unknown",       "Sleep",  "Polling",        "Disabled",
                                    "PortConfTrain", "LinkUp", "LinkErrRecover", "Phytest"};
    return s >= 0 && s <= 7 ? n[s] : "unknown";
}

int cs_topo_apply_verbs(struct cs_topo *t, int *have_verbs, char *err, size_t errlen)
{
    struct verbs v;
    *have_verbs = 0;
    void *h = load(&v);
    if (!h)
        return 0;
    *have_verbs = 1;
    int nd = 0;
    struct ibv_device **list = v.get_device_list(&nd);
    if (!list) {
        dlclose(h);
        if (errno == ENOSYS || errno == 0)
            return 0; /* no RDMA subsystem: nothing to list */
        snprintf(err, errlen, "ibv_get_device_list failed: %s", strerror(errno));
        return -errno;
    }
    for (int i = 0; i < nd; i++) {
        const char *name = v.get_device_name(list[i]);
        struct ibv_context *ctx = v.open_device(list[i]);
        if (!ctx) {
            cs__topo_warn(t, "cannot open RDMA device %s: %s", name, strerror(errno));
            continue;
        }
        struct ibv_device_attr da;
        memset(&da, 0, sizeof(da));
        if (v.query_device(ctx, &da) != 0) {
            cs__topo_warn(t, "cannot query RDMA device %s", name);
            v.close_device(ctx);
            continue;
        }
        struct cs_topo_nic *n = NULL;
        for (size_t k = 0; k < t->n_nics; k++)
            if (!strcmp(t->nics[k].name, name))
                n = &t->nics[k];
        if (!n && (n = cs__topo_add_nic(t))) {
            CS__COPY(n->name, name);
            n->rdma = 1;
        }
        int chosen = 0;
        for (int p = 1; n && p <= da.phys_port_cnt && !chosen; p++) {
            struct ibv_port_attr pa;
            memset(&pa, 0, sizeof(pa));
            if (v.query_port(ctx, (uint8_t)p, &pa) != 0)
                continue;
            if (pa.state != IBV_PORT_ACTIVE && p < da.phys_port_cnt)
                continue; /* describe the first active port, else the last one */
            chosen = 1;
            n->port = p;
            CS__COPY(n->state, port_state(pa.state));
            CS__COPY(n->phys_state, phys_state(pa.phys_state));
            CS__COPY(n->link_layer,
                     pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
            int lanes = 0;
            double g = cs_topo_ib_gbps(pa.active_speed, pa.active_width, &lanes);
            if (g > 0) {
                n->gbps = g;
                n->width = lanes;
                CS__COPY(n->rate_source, "verbs");
            }
            n->mtu = pa.active_mtu >= 1 && pa.active_mtu <= 5 ? 128 << pa.active_mtu : 0;
        }
        v.close_device(ctx);
    }
    v.free_device_list(list);
    dlclose(h);
    return nd;
}
#else
int cs_topo_apply_verbs(struct cs_topo *t, int *have_verbs, char *err, size_t errlen)
{
    (void)t;
    (void)err;
    (void)errlen;
    *have_verbs = 0; /* built without infiniband/verbs.h: the port data comes from sysfs */
    return 0;
}
#endif
