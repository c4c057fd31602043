/*
 * TEST DOUBLE: an NVML (libnvidia-ml.so.1) with the few entry points commscope's resource sampler
 * uses (collector/core/sample.c), for machines without an NVIDIA driver.  Its GPUs and their
 * figures come from the environment, so a test knows every value a sample must hold:
 *
 *   FAKE_NVML_GPUS   "UTIL:MEM_MIB:TOTAL_MIB:POWER_MW:SM_MHZ:BUS,..." one entry per GPU
 *                    (BUS: the PCI bus number in hex, device 0); unset: no GPU
 *   FAKE_NVML_FAIL   "init": nvmlInit_v2 fails (NVML present but not starting)
 *
 * The figures are constant, so the analysis's means, minima and peaks are the given values.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define MAXG 16

struct gpu {
    unsigned util, power, mhz, bus;
    unsigned long long mem, total;
};
static struct gpu G[MAXG];
static unsigned ngpu;
static int inited;

typedef struct {
    unsigned gpu, memory;
} nvmlUtilization_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

/* NVML's entry points (nvml.h's declarations, the part the sampler uses). */
EXPORT int nvmlInit_v2(void);
EXPORT int nvmlDeviceGetCount_v2(unsigned *n);
EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev);
EXPORT int nvmlDeviceGetUtilizationRates(void *dev, nvmlUtilization_t *u);
EXPORT int nvmlDeviceGetMemoryInfo(void *dev, nvmlMemory_t *m);
EXPORT int nvmlDeviceGetPowerUsage(void *dev, unsigned *mw);
EXPORT int nvmlDeviceGetClockInfo(void *dev, int type, unsigned *mhz);
EXPORT int nvmlDeviceGetPciInfo_v3(void *dev, nvmlPciInfo_t *p);

EXPORT int nvmlInit_v2(void)
{
    const char *f = getenv("FAKE_NVML_FAIL");
    if (f && !strcmp(f, "init"))
        return 9; /* NVML_ERROR_DRIVER_NOT_LOADED */
    const char *s = getenv("FAKE_NVML_GPUS");
    ngpu = 0;
    while (s && *s && ngpu < MAXG) {
        struct gpu *g = &G[ngpu];
        unsigned long long mem, total;
        if (sscanf(s, "%u:%llu:%llu:%u:%u:%x", &g->util, &mem, &total, &g->power, &g->mhz,
                   &g->bus) != 6)
            return 2; /* NVML_ERROR_INVALID_ARGUMENT: the test's variable is wrong */
        g->mem = mem << 20;
        g->total = total << 20;
        ngpu++;
        s = strchr(s, ',');
        s = s ? s + 1 : NULL;
    }
    inited = 1;
    return 0;
}

EXPORT int nvmlDeviceGetCount_v2(unsigned *n)
{
    if (!inited)
        return 1; /* NVML_ERROR_UNINITIALIZED */
    *n = ngpu;
    return 0;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev)
{
    if (!inited || i >= ngpu)
        return 2;
    *dev = &G[i];
    return 0;
}

EXPORT int nvmlDeviceGetUtilizationRates(void *dev, nvmlUtilization_t *u)
{
    u->gpu = ((struct gpu *)dev)->util;
    u->memory = 0;
    return 0;
}

EXPORT int nvmlDeviceGetMemoryInfo(void *dev, nvmlMemory_t *m)
{
    const struct gpu *g = dev;
    m->total = g->total;
    m->used = g->mem;
    m->free = g->total - g->mem;
    return 0;
}

EXPORT int nvmlDeviceGetPowerUsage(void *dev, unsigned *mw)
{
    *mw = ((struct gpu *)dev)->power;
    return 0;
}

EXPORT int nvmlDeviceGetClockInfo(void *dev, int type, unsigned *mhz)
{
    *mhz = type == 1 ? ((struct gpu *)dev)->mhz : 0; /* NVML_CLOCK_SM */
    return 0;
}

EXPORT int nvmlDeviceGetPciInfo_v3(void *dev, nvmlPciInfo_t *p)
{
    const struct gpu *g = dev;
    memset(p, 0, sizeof *p);
    p->bus = g->bus;
    snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", g->bus);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02X:00.0", g->bus);
    return 0;
}
