/*
 * RDMA ports as Linux describes them in sysfs: ROOT/class/infiniband/DEV/ports/N/{state,
 * phys_state, rate, link_layer, counters/...}.  ROOT is "/sys" on a live machine; tests point it
 * at saved trees.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* Read the first line of ROOT/rel into buf (newline removed).  0, or -1 when unreadable. */
static int read_line(const char *dir, const char *rel, char *buf, size_t len)
{
    char path[4096];
    /* A path too long for the buffer is unreadable, not a truncated other file. */
    if (snprintf(path, sizeof(path), "%s/%s", dir, rel) >= (int)sizeof(path))
        return -1;
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    buf[strcspn(buf, "\n")] = 0;
    return 0;
}

/* "4: ACTIVE" -> "ACTIVE"; "5: LinkUp" -> "LinkUp". */
static void after_colon(const char *s, char *out, size_t len)
{
    const char *c = strchr(s, ':');
    c = c ? c + 1 : s;
    while (*c == ' ')
        c++;
    cs__copy(out, len, c);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Sorted names of the entries of dir (without . and ..), NULL when empty.  *n is the count, or
 * (size_t)-1 with errno set when dir cannot be opened.
 */
static char **list_dir(const char *dir, size_t *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        *n = (size_t)-1;
        return NULL;
    }
    char **v = NULL;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char **nv = realloc(v, (*n + 1) * sizeof(*v));
        if (!nv)
            break;
        v = nv;
        if ((v[*n] = strdup(e->d_name)))
            (*n)++;
    }
    closedir(d);
    if (v)
        qsort(v, *n, sizeof(*v), name_cmp);
    return v;
}

static void free_list(char **v, size_t n)
{
    if (n == (size_t)-1)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void fill_port(struct cs_topo_nic *n, const char *pdir, int port)
{
    char buf[128];
    n->port = port;
    if (read_line(pdir, "state", buf, sizeof(buf)) == 0)
        after_colon(buf, n->state, sizeof(n->state));
    if (read_line(pdir, "phys_state", buf, sizeof(buf)) == 0)
        after_colon(buf, n->phys_state, sizeof(n->phys_state));
    if (read_line(pdir, "link_layer", buf, sizeof(buf)) == 0)
        CS__COPY(n->link_layer, buf);
    if (read_line(pdir, "rate", buf, sizeof(buf)) == 0) {
        int lanes = 0;
        double g = cs_topo_parse_rate(buf, &lanes);
        if (g > 0) {
            n->gbps = g;
            n->width = lanes;
            CS__COPY(n->rate_source, "sysfs");
        }
    }
}

/* Network interfaces t already lists (not RDMA): link speed, state and MTU from class/net. */
static void apply_net(struct cs_topo *t, const char *root)
{
    for (size_t i = 0; i < t->n_nics; i++) {
        struct cs_topo_nic *n = &t->nics[i];
        char dir[1024], buf[64];
        if (n->rdma || !n->name[0] || strchr(n->name, '/'))
            continue;
        snprintf(dir, sizeof(dir), "%s/class/net/%s", root, n->name);
        if (read_line(dir, "operstate", buf, sizeof(buf)) == 0)
            CS__COPY(n->state, !strcmp(buf, "up")     ? "ACTIVE"
                               : !strcmp(buf, "down") ? "DOWN"
                                                      : "unknown");
        /* speed is Mb/s, -1 (or unreadable) when the driver does not know. */
        if (read_line(dir, "speed", buf, sizeof(buf)) == 0 && atoi(buf) > 0) {
            n->gbps = atoi(buf) / 1000.0;
            CS__COPY(n->rate_source, "sysfs");
        }
        if (read_line(dir, "mtu", buf, sizeof(buf)) == 0)
            n->mtu = atoi(buf);
    }
}

int cs_topo_apply_sysfs(struct cs_topo *t, const char *root, char *err, size_t errlen)
{
    apply_net(t, root);
    char base[768];
    snprintf(base, sizeof(base), "%s/class/infiniband", root);
    if (access(base, F_OK) != 0)
        return 0;
    size_t nd;
    char **devs = list_dir(base, &nd);
    if (nd == (size_t)-1) {
        int e = errno;
        snprintf(err, errlen, "cannot read %s: %s", base, strerror(e));
        return -e;
    }
    for (size_t i = 0; i < nd; i++) {
        char ddir[1024], pdirs[1100];
        snprintf(ddir, sizeof(ddir), "%s/%s", base, devs[i]);
        snprintf(pdirs, sizeof(pdirs), "%s/ports", ddir);
        struct cs_topo_nic *n = NULL;
        for (size_t k = 0; k < t->n_nics; k++)
            if (!strcmp(t->nics[k].name, devs[i]))
                n = &t->nics[k];
        if (!n) {
            if (!(n = cs__topo_add_nic(t)))
                break;
            CS__COPY(n->name, devs[i]);
            n->rdma = 1;
            char buf[64];
            if (read_line(ddir, "device/numa_node", buf, sizeof(buf)) == 0)
                n->numa = atoi(buf);
            unsigned v = 0, d = 0;
            if (read_line(ddir, "device/vendor", buf, sizeof(buf)) == 0)
                v = (unsigned)strtoul(buf, NULL, 16);
            if (read_line(ddir, "device/device", buf, sizeof(buf)) == 0)
                d = (unsigned)strtoul(buf, NULL, 16);
            n->max_gbps = cs__nic_max_gbps(v, d);
        }
        size_t np;
        char **ports = list_dir(pdirs, &np);
        if (np == (size_t)-1) {
            cs__topo_warn(t, "cannot read the ports of %s: %s: %s", devs[i], pdirs,
                          strerror(errno));
            continue;
        }
        /* Describe the first ACTIVE port, else the first port. */
        int chosen = -1;
        for (size_t p = 0; p < np && chosen < 0; p++) {
            char pdir[1200], st[64];
            snprintf(pdir, sizeof(pdir), "%s/%s", pdirs, ports[p]);
            if (read_line(pdir, "state", st, sizeof(st)) == 0 && strstr(st, "ACTIVE"))
                chosen = (int)p;
        }
        if (chosen < 0 && np)
            chosen = 0;
        if (chosen >= 0) {
            char pdir[1200];
            snprintf(pdir, sizeof(pdir), "%s/%s", pdirs, ports[chosen]);
            fill_port(n, pdir, atoi(ports[chosen]));
        }
        free_list(ports, np);
    }
    free_list(devs, nd);
    return (int)nd;
}

static uint64_t counter(const char *cdir, const char *name, int *ok)
{
    char buf[64];
    if (read_line(cdir, name, buf, sizeof(buf)) < 0)
        return 0;
    *ok = 1;
    return strtoull(buf, NULL, 10);
}

int cs_topo_read_counters(const char *root, struct cs_topo_counters **out, size_t *n, char *err,
                          size_t errlen)
{
    *out = NULL;
    *n = 0;
    char base[768];
    snprintf(base, sizeof(base), "%s/class/infiniband", root);
    if (access(base, F_OK) != 0)
        return 0;
    size_t nd;
    char **devs = list_dir(base, &nd);
    if (nd == (size_t)-1) {
        int e = errno;
        snprintf(err, errlen, "cannot read %s: %s", base, strerror(e));
        return -e;
    }
    for (size_t i = 0; i < nd; i++) {
        char pdirs[1024];
        snprintf(pdirs, sizeof(pdirs), "%s/%s/ports", base, devs[i]);
        size_t np;
        char **ports = list_dir(pdirs, &np);
        if (np == (size_t)-1)
            np = 0; /* a device without ports has no counters */
        for (size_t p = 0; p < np; p++) {
            struct cs_topo_counters *v = realloc(*out, (*n + 1) * sizeof(*v));
            if (!v)
                break;
            *out = v;
            struct cs_topo_counters *c = &v[*n];
            memset(c, 0, sizeof(*c));
            CS__COPY(c->nic, devs[i]);
            c->port = atoi(ports[p]);
            char cdir[1200];
            snprintf(cdir, sizeof(cdir), "%s/%s/counters", pdirs, ports[p]);
            int ok = 0;
            /* port_xmit_data and port_rcv_data count 4-byte words (InfiniBand spec). */
            c->xmit_bytes = 4 * counter(cdir, "port_xmit_data", &ok);
            c->rcv_bytes = 4 * counter(cdir, "port_rcv_data", &ok);
            c->symbol_errors = counter(cdir, "symbol_error", &ok);
            c->rcv_errors = counter(cdir, "port_rcv_errors", &ok);
            c->link_downed = counter(cdir, "link_downed", &ok);
            c->xmit_discards = counter(cdir, "port_xmit_discards", &ok);
            c->valid = ok;
            (*n)++;
        }
        free_list(ports, np);
    }
    free_list(devs, nd);
    return (int)*n;
}
