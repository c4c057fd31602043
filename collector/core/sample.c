/*
 * Resource samples (COMMSCOPE_SAMPLE_HZ samples per second; unset or 0: off): the prefault helper
 * (buffer.c) wakes at that rate and records, as events of its own thread, which records nothing
 * else (docs/trace-format.md "Resource samples"):
 *
 *   CS_OP_SAMPLE_PROC  the process's CPU time (CLOCK_PROCESS_CPUTIME_ID: every thread of it) and
 *                      resident memory (/proc/self/statm)
 *   CS_OP_SAMPLE_NIC   per network interface that is up, lo left out (at most CS__SAMPLE_NICS):
 *                      the bytes it received and sent (sysfs statistics), its link speed
 *   CS_OP_SAMPLE_GPU   per GPU (NVML, loaded with dlopen where libnvidia-ml.so.1 is present; at
 *                      most CS__SAMPLE_GPUS): utilisation, memory used and total, power, SM clock
 *
 * Interfaces and GPUs are the node's, so one rank per node samples them: the one of local rank 0,
 * or every rank where the local rank is unknown (the analysis keeps one rank's per host).
 * Everything here runs on the helper thread, never on the program's threads: the first sample
 * opens the sysfs files and initialises NVML there, and later ones are a clock read, one read of
 * statm and two reads per interface (about 10-30 us per sample on another core).  A sample that
 * would be dropped at the cap (head mode) is not taken, so samples never count as dropped events.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "front.h"
#include "internal.h"

#define CS__SAMPLE_NICS 8
#define CS__SAMPLE_GPUS 16
#define HZ_MAX 1000

/* NVML's ABI, the part used (nvml.h: these are stable since NVML 1). */
typedef int nvml_ret;
struct nvml_util {
    unsigned gpu, memory;
};
struct nvml_mem {
    unsigned long long total, free, used;
};
struct nvml_pci { /* nvmlPciInfo_t (v3) */
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
};
#define NVML_CLOCK_SM 1

static struct {
    int inited; /* the first sample's setup was done in this trace */
    int node;   /* this rank samples the node's interfaces and GPUs */
    uint64_t interval_ns, next;
    long page;
    int statm;
    struct nic {
        char name[16];
        int rx, tx; /* sysfs statistics files */
        int32_t speed_mbps;
        uint32_t ifindex;
    } nic[CS__SAMPLE_NICS];
    int nnic;
    /* NVML, once per process (it stays loaded and initialised across traces). */
    int nvml_tried;
    void *nvml;
    unsigned ngpu;
    void *gpu[CS__SAMPLE_GPUS];
    int32_t pci[CS__SAMPLE_GPUS]; /* bus << 8 | device << 3 (function 0), -1 unknown */
    nvml_ret (*get_util)(void *, struct nvml_util *);
    nvml_ret (*get_mem)(void *, struct nvml_mem *);
    nvml_ret (*get_power)(void *, unsigned *);
    nvml_ret (*get_clock)(void *, int, unsigned *);
} S = {.statm = -1};

/* The rate: COMMSCOPE_SAMPLE_HZ, read at each trace open (helper start); 10 by default. */
#define HZ_DEFAULT 10
void cs__sample_open(void)
{
    S.inited = 0;
    S.next = 0;
    S.interval_ns = 1000000000ull / HZ_DEFAULT;
    const char *v = getenv("COMMSCOPE_SAMPLE_HZ");
    if (v && *v) {
        char *end;
        long hz = strtol(v, &end, 10);
        if (*end || hz < 0 || hz > HZ_MAX) {
            S.interval_ns = 0;
            cs_warn("COMMSCOPE_SAMPLE_HZ=\"%s\" is not a whole number of samples per second from "
                    "0 (off) to %d; no samples",
                    v, HZ_MAX);
        } else
            S.interval_ns = hz ? 1000000000ull / (uint64_t)hz : 0;
    }
}

static int read_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

static int nic_cmp(const void *a, const void *b)
{
    return strcmp(((const struct nic *)a)->name, ((const struct nic *)b)->name);
}

static void nics_open(void)
{
    S.nnic = 0;
    DIR *d = opendir("/sys/class/net");
    struct dirent *de;
    while (d && (de = readdir(d)) && S.nnic < CS__SAMPLE_NICS) {
        char path[320], buf[64];
        if (de->d_name[0] == '.' || !strcmp(de->d_name, "lo") || strlen(de->d_name) > 15)
            continue;
        snprintf(path, sizeof path, "/sys/class/net/%s/flags", de->d_name);
        if (read_file(path, buf, sizeof buf) || !(strtoul(buf, NULL, 0) & 1)) /* IFF_UP */
            continue;
        struct nic *n = &S.nic[S.nnic];
        memset(n, 0, sizeof *n);
        snprintf(n->name, sizeof n->name, "%s", de->d_name);
        snprintf(path, sizeof path, "/sys/class/net/%s/statistics/rx_bytes", de->d_name);
        n->rx = open(path, O_RDONLY | O_CLOEXEC);
        snprintf(path, sizeof path, "/sys/class/net/%s/statistics/tx_bytes", de->d_name);
        n->tx = open(path, O_RDONLY | O_CLOEXEC);
        if (n->rx < 0 || n->tx < 0) {
            if (n->rx >= 0)
                close(n->rx);
            if (n->tx >= 0)
                close(n->tx);
            continue;
        }
        snprintf(path, sizeof path, "/sys/class/net/%s/speed", de->d_name);
        long sp = read_file(path, buf, sizeof buf) ? -1 : strtol(buf, NULL, 10);
        n->speed_mbps = sp > 0 && sp < INT32_MAX ? (int32_t)sp : -1;
        snprintf(path, sizeof path, "/sys/class/net/%s/ifindex", de->d_name);
        n->ifindex = read_file(path, buf, sizeof buf) ? 0 : (uint32_t)strtoul(buf, NULL, 10);
        S.nnic++;
    }
    if (d)
        closedir(d);
    qsort(S.nic, (size_t)S.nnic, sizeof S.nic[0], nic_cmp);
}

static void nics_close(void)
{
    for (int i = 0; i < S.nnic; i++) {
        close(S.nic[i].rx);
        close(S.nic[i].tx);
    }
    S.nnic = 0;
}

static void nvml_open(void)
{
    if (S.nvml_tried)
        return;
    S.nvml_tried = 1;
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return; /* no NVIDIA driver here: no GPU samples */
    nvml_ret (*init)(void) = (nvml_ret(*)(void))dlsym(h, "nvmlInit_v2");
    nvml_ret (*count)(unsigned *) = (nvml_ret(*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2");
    nvml_ret (*handle)(unsigned, void **) =
        (nvml_ret(*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    S.get_util = (nvml_ret(*)(void *, struct nvml_util *))dlsym(h, "nvmlDeviceGetUtilizationRates");
    S.get_mem = (nvml_ret(*)(void *, struct nvml_mem *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    S.get_power = (nvml_ret(*)(void *, unsigned *))dlsym(h, "nvmlDeviceGetPowerUsage");
    S.get_clock = (nvml_ret(*)(void *, int, unsigned *))dlsym(h, "nvmlDeviceGetClockInfo");
    unsigned n = 0;
    if (!init || !count || !handle || !S.get_util || !S.get_mem || !S.get_power || !S.get_clock ||
        init() != 0 || count(&n) != 0) {
        cs_warn("libnvidia-ml.so.1 is present but NVML did not start; no GPU samples");
        return; /* left loaded: unloading a half-initialised driver library is not safe */
    }
    /* The PCI location joins a GPU to the rank whose NCCL communicator names its bus id. */
    nvml_ret (*pci)(void *, struct nvml_pci *) =
        (nvml_ret(*)(void *, struct nvml_pci *))dlsym(h, "nvmlDeviceGetPciInfo_v3");
    S.ngpu = 0;
    for (unsigned i = 0; i < n && S.ngpu < CS__SAMPLE_GPUS; i++)
        if (handle(i, &S.gpu[S.ngpu]) == 0) {
            struct nvml_pci p;
            S.pci[S.ngpu] = pci && pci(S.gpu[S.ngpu], &p) == 0 && p.bus < 256 && p.device < 32
                                ? (int32_t)(p.bus << 8 | p.device << 3)
                                : -1;
            S.ngpu++;
        }
    S.nvml = h;
}

static void setup(void)
{
    S.inited = 1;
    S.page = sysconf(_SC_PAGESIZE);
    S.statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    S.node = cs__ident_local_rank() <= 0;
    if (S.node) {
        nics_open();
        nvml_open();
    }
}

static uint64_t pread_u64(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return UINT64_MAX;
    buf[n] = '\0';
    return strtoull(buf, NULL, 10);
}

/* One record, unless it would be dropped (head mode at the cap, or no storage). */
static struct cs_event *begin(uint16_t op, uint64_t t)
{
    if (cs__rec_would_drop())
        return NULL;
    struct cs_event *ev = cs_rec_begin();
    if (!ev)
        return NULL;
    ev->t_begin = ev->t_end = t;
    ev->op = op;
    ev->peer = -1;
    return ev;
}

static void take(void)
{
    uint64_t t = cs_now();
    struct timespec cpu;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    struct cs_event *ev = begin(CS_OP_SAMPLE_PROC, t);
    if (ev) {
        char buf[128];
        unsigned long long pages = 0, res = 0;
        ssize_t n = S.statm >= 0 ? pread(S.statm, buf, sizeof buf - 1, 0) : -1;
        if (n > 0) {
            buf[n] = '\0';
            if (sscanf(buf, "%llu %llu", &pages, &res) != 2)
                res = 0;
        }
        ev->bytes_recv = (uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec;
        ev->request = res * (uint64_t)S.page;
        cs_rec_commit(ev);
    }
    for (int i = 0; i < S.nnic; i++) {
        uint64_t rx = pread_u64(S.nic[i].rx), tx = pread_u64(S.nic[i].tx);
        if (rx == UINT64_MAX || tx == UINT64_MAX || !(ev = begin(CS_OP_SAMPLE_NIC, t)))
            continue;
        memcpy((char *)ev + 16, S.nic[i].name, sizeof S.nic[i].name);
        ev->bytes_recv = rx;
        ev->request = tx;
        ev->seq = S.nic[i].ifindex;
        ev->aux = S.nic[i].speed_mbps;
        cs_rec_commit(ev);
    }
    for (unsigned i = 0; S.nvml && i < S.ngpu; i++) {
        struct nvml_util u;
        struct nvml_mem m;
        unsigned mw, mhz;
        int have_u = S.get_util(S.gpu[i], &u) == 0, have_m = S.get_mem(S.gpu[i], &m) == 0;
        int have_p = S.get_power(S.gpu[i], &mw) == 0;
        int have_c = S.get_clock(S.gpu[i], NVML_CLOCK_SM, &mhz) == 0;
        if (!(ev = begin(CS_OP_SAMPLE_GPU, t)))
            continue;
        ev->comm = have_m ? m.used : UINT64_MAX;
        ev->bytes = have_m ? m.total : UINT64_MAX;
        ev->bytes_recv = have_p ? mw : UINT64_MAX;
        /* SM clock in the low half (all ones unknown), PCI location + 1 in the high (0 unknown). */
        ev->request = (have_c ? mhz : UINT32_MAX) | (uint64_t)(uint32_t)(S.pci[i] + 1) << 32;
        ev->seq = have_u && u.gpu <= 100 ? u.gpu : UINT32_MAX;
        ev->aux = (int32_t)i;
        cs_rec_commit(ev);
    }
}

uint64_t cs__sample_tick(void)
{
    if (!S.interval_ns)
        return UINT64_MAX;
    uint64_t now = cs_now();
    if (now < S.next)
        return S.next - now;
    if (!__atomic_load_n(&cs_active, __ATOMIC_ACQUIRE)) {
        /* The trace is being opened (the helper starts first): look again in a millisecond. */
        S.next = now + 1000000;
        return 1000000;
    }
    if (!S.inited)
        setup();
    take();
    S.next = S.next && now - S.next < S.interval_ns ? S.next + S.interval_ns : now + S.interval_ns;
    return S.next - now;
}

void cs__sample_close(void)
{
    nics_close();
    if (S.statm >= 0)
        close(S.statm);
    S.statm = -1;
    S.inited = 0;
}

void cs__sample_forget(void)
{
    /* A forked child: the descriptors are its own copies; NVML's state belongs to the parent. */
    cs__sample_close();
    S.nvml = NULL;
    S.ngpu = 0;
}
