/*
 * cs_capture: the per-node capture helper.  Started by the collector in the first rank of each
 * node (or by hand), it captures until SIGTERM/SIGINT or until its parent dies, and writes one
 * commscope-wire/1 file.  It never touches the job: it runs at low priority in its own process,
 * and any failure only ends the capture.  Usage in docs/wire.md.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ctype.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "capture.h"

static void on_stop(int sig)
{
    (void)sig;
    cs_wire_live_stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: cs_capture --out FILE --ifaces LIST|auto [--host NAME] [--expect LIST]\n"
               "                  [--bucket-ms N] [--snaplen N] [--raw PREFIX] [--raw-max BYTES]\n"
               "                  [--peers-stdin] [--ready-fd N] [--parent PID]\n"
               "Captures packet headers on the interfaces until SIGTERM and writes FILE\n"
               "(commscope-wire/1).  --peers-stdin reads lines \"HOST ADDR...\" naming the job's\n"
               "nodes; the BPF filter then keeps traffic to and from them only.\n");
}

static struct cs_wire_live_opts o;
static char host_buf[256];
static char if_store[CS_WIRE_MAX_IFACES][64];

static int has_iface(const char *n)
{
    for (int i = 0; i < o.nifaces; i++)
        if (strcmp(o.ifaces[i], n) == 0)
            return 1;
    return 0;
}

static void add_iface(const char *n)
{
    if (!*n || has_iface(n) || o.nifaces == CS_WIRE_MAX_IFACES)
        return;
    snprintf(if_store[o.nifaces], sizeof if_store[0], "%s", n);
    o.ifaces[o.nifaces] = if_store[o.nifaces];
    o.nifaces++;
}

static void add_list(const char *list, void (*fn)(const char *))
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        fn(t);
}

static int addr_of(const struct sockaddr *sa, struct cs_wire_addr *a)
{
    memset(a, 0, sizeof *a);
    if (sa->sa_family == AF_INET) {
        a->b[10] = a->b[11] = 0xff;
        memcpy(a->b + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(a->b, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
        return 0;
    }
    return -1;
}

/* The interface holding local address a, or NULL. */
static const char *iface_of(struct ifaddrs *ifs, const struct cs_wire_addr *a)
{
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        struct cs_wire_addr x;
        if (i->ifa_addr && addr_of(i->ifa_addr, &x) == 0 && memcmp(x.b, a->b, 16) == 0)
            return i->ifa_name;
    }
    return NULL;
}

/* Interfaces with an IPv4 address inside CIDR ("10.77.0.0/24"). */
static void add_cidr(struct ifaddrs *ifs, const char *cidr)
{
    char net[64];
    int bits = 32;
    snprintf(net, sizeof net, "%s", cidr);
    char *sl = strchr(net, '/');
    if (sl) {
        *sl = '\0';
        bits = atoi(sl + 1);
    }
    struct in_addr n;
    if (inet_pton(AF_INET, net, &n) != 1 || bits < 0 || bits > 32)
        return;
    uint32_t mask = bits ? htonl(~0u << (32 - bits)) : 0;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
            ((((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr ^ n.s_addr) & mask) == 0)
            add_iface(i->ifa_name);
}

/*
 * auto: the interfaces the kernel routes the job's peers through (a connected UDP socket's
 * source address tells which), and those the MPI/NCCL configuration names.
 */
static void auto_ifaces(struct ifaddrs *ifs)
{
    for (int i = 0; i < o.npeers; i++) {
        const struct cs_wire_addr *p = &o.peers[i];
        int local = 0;
        for (int k = 0; k < o.nlocals; k++)
            local |= memcmp(o.locals[k].b, p->b, 16) == 0;
        if (local)
            continue;
        struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(9)};
        memcpy(&sa.sin6_addr, p->b, 16);
        int s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
            continue;
        struct sockaddr_in6 me;
        socklen_t ml = sizeof me;
        if (connect(s, (struct sockaddr *)&sa, sizeof sa) == 0 &&
            getsockname(s, (struct sockaddr *)&me, &ml) == 0) {
            struct cs_wire_addr m;
            memcpy(m.b, &me.sin6_addr, 16);
            const char *n = iface_of(ifs, &m);
            if (n)
                add_iface(n);
        }
        close(s);
    }
    static const char *const vars[] = {"NCCL_SOCKET_IFNAME", "OMPI_MCA_btl_tcp_if_include",
                                       "UCX_NET_DEVICES"};
    for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++) {
        const char *val = getenv(vars[v]);
        if (!val || !*val || val[0] == '^' || val[0] == '=')
            continue;
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", val);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char *colon = strchr(t, ':'); /* UCX: mlx5_0:1 */
            if (colon)
                *colon = '\0';
            if (strchr(t, '.') && isdigit((unsigned char)t[0]))
                add_cidr(ifs, t);
            else if (if_nametoindex(t))
                add_iface(t);
        }
    }
}

static long speed_of(const char *ifn)
{
    char p[256];
    snprintf(p, sizeof p, "/sys/class/net/%s/speed", ifn);
    FILE *f = fopen(p, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static int is_rdma(const char *ifn)
{
    char p[256];
    snprintf(p, sizeof p, "/sys/class/net/%s/device/infiniband", ifn);
    return access(p, F_OK) == 0;
}

static char *expect_list;
static void mark_expected(const char *n)
{
    for (int i = 0; i < o.nifaces; i++)
        if (strcmp(o.ifaces[i], n) == 0)
            o.expected[i] = 1;
}

/* Expected data interfaces: --expect, else RDMA-capable ones, else the fastest by link speed. */
static void choose_expected(void)
{
    for (int i = 0; i < o.nifaces; i++)
        o.speed_mbps[i] = speed_of(o.ifaces[i]);
    if (expect_list) {
        add_list(expect_list, mark_expected);
        return;
    }
    int any = 0;
    for (int i = 0; i < o.nifaces; i++)
        if (is_rdma(o.ifaces[i]))
            o.expected[i] = 1, any = 1;
    if (any)
        return;
    long best = -1;
    for (int i = 0; i < o.nifaces; i++)
        if (o.speed_mbps[i] > best)
            best = o.speed_mbps[i];
    for (int i = 0; i < o.nifaces; i++)
        o.expected[i] = o.speed_mbps[i] == best;
}

static void read_peers(FILE *in)
{
    char line[4096];
    while (fgets(line, sizeof line, in)) {
        char *save = NULL, *h = strtok_r(line, " \t\n", &save);
        if (!h)
            continue;
        for (char *t = strtok_r(NULL, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
            if (o.npeers == (int)(sizeof o.peers / sizeof o.peers[0]))
                return;
            if (cs_wire_addr_parse(t, &o.peers[o.npeers]) == 0) {
                snprintf(o.peer_host[o.npeers], sizeof o.peer_host[0], "%s", h);
                o.npeers++;
            }
        }
    }
}

/* "host A or host B ..." over the peers that are not this node's; NULL (all IP) when none or too
 * many for a filter the kernel takes quickly. */
static char *build_filter(void)
{
    size_t cap = 64 + (size_t)o.npeers * 56, n = 0;
    char *f = malloc(cap);
    if (!f)
        return NULL;
    f[0] = '\0';
    int count = 0;
    for (int i = 0; i < o.npeers; i++) {
        int local = 0;
        for (int k = 0; k < o.nlocals; k++)
            local |= memcmp(o.locals[k].b, o.peers[i].b, 16) == 0;
        if (local)
            continue;
        char a[64];
        cs_wire_addr_str(&o.peers[i], a, sizeof a);
        n += (size_t)snprintf(f + n, cap - n, "%shost %s", count ? " or " : "", a);
        count++;
    }
    if (count == 0 || count > 256) {
        free(f);
        return NULL;
    }
    return f;
}

/* --bucket-ms text as ns: 0 (refused) unless above 0 and at most an hour (out of range or NaN
 * included: the conversion would be undefined). */
static uint64_t bucket_ns_of(const char *v)
{
    double ms = strtod(v, NULL);
    return ms > 0 && ms * 1e6 <= (double)CS_WIRE_BUCKET_NS_MAX ? (uint64_t)(ms * 1e6) : 0;
}

int main(int argc, char **argv)
{
    const char *ifaces = NULL, *host = NULL;
    int peers_stdin = 0, snaplen_given = 0;
    long parent = 0;
    o.bucket_ns = CS_WIRE_BUCKET_NS_DEFAULT;
    o.snaplen = CS_WIRE_SNAPLEN_DEFAULT;
    o.raw_max_bytes = 100ull << 20;
    o.ready_fd = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--peers-stdin") == 0) {
            peers_stdin = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "cs_capture: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--out") == 0)
            o.out_path = v;
        else if (strcmp(a, "--ifaces") == 0)
            ifaces = v;
        else if (strcmp(a, "--host") == 0)
            host = v;
        else if (strcmp(a, "--expect") == 0)
            expect_list = (char *)v;
        else if (strcmp(a, "--bucket-ms") == 0)
            o.bucket_ns = bucket_ns_of(v);
        else if (strcmp(a, "--snaplen") == 0)
            o.snaplen = atoi(v), snaplen_given = 1;
        else if (strcmp(a, "--raw") == 0)
            o.raw_prefix = v;
        else if (strcmp(a, "--raw-max") == 0)
            o.raw_max_bytes = strtoull(v, NULL, 10);
        else if (strcmp(a, "--ready-fd") == 0)
            o.ready_fd = atoi(v);
        else if (strcmp(a, "--parent") == 0)
            parent = atol(v);
        else {
            fprintf(stderr, "cs_capture: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!o.out_path || !ifaces || o.bucket_ns == 0 || o.bucket_ns > CS_WIRE_BUCKET_NS_MAX ||
        o.snaplen < 64 || o.snaplen > 262144) {
        fprintf(stderr, "cs_capture: --out and --ifaces are required; --bucket-ms above 0, at "
                        "most 3600000; --snaplen 64..262144\n");
        usage(stderr);
        return 2;
    }
    /* Raw files are asked for to see payloads: whole packets then, unless told otherwise. */
    if (o.raw_prefix && !snaplen_given)
        o.snaplen = 65535;
    /* Die with the rank that started us, and never compete with the job for the CPU. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (parent > 0 && getppid() != (pid_t)parent)
        return 0;
    if (setpriority(PRIO_PROCESS, 0, 10) != 0) {
        /* Not fatal: the capture still works at normal priority. */
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (!host) {
        gethostname(host_buf, sizeof host_buf - 1);
        host = host_buf;
    }
    o.host = host;
    if (peers_stdin)
        read_peers(stdin);
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        ifs = NULL;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        struct cs_wire_addr x;
        if (i->ifa_addr && addr_of(i->ifa_addr, &x) == 0 && o.nlocals < 64)
            o.locals[o.nlocals++] = x;
    }
    if (strcmp(ifaces, "auto") == 0) {
        auto_ifaces(ifs);
        if (o.nifaces == 0) {
            /* No peer on another node and no configuration: nothing leaves this node. */
            fprintf(stderr, "cs_capture: auto found no interface carrying the job's traffic "
                            "(no peer on another node); capturing nothing\n");
        }
    } else {
        add_list(ifaces, add_iface);
    }
    freeifaddrs(ifs);
    choose_expected();
    char *filter = build_filter();
    o.filter = filter;
    char err[1024];
    int rc = cs_wire_live_run(&o, err, sizeof err);
    /* With a ready fd the starter reports problems (once per job); else say them here. */
    if (rc != 0 && err[0] && o.ready_fd < 0)
        fprintf(stderr, "cs_capture[%s]: %s\n", host, err);
    free(filter);
    return rc < 0 ? 1 : 0;
}
