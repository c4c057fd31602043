/*
 * GPU side of the collector.  This build records no GPU time yet: NCCL launches are recorded on
 * the host only, and the trace says so (gpu_timing = CS_GPU_NONE, gpu_note).  The launch hooks
 * are where CUPTI external correlation ids / CUDA events go.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "../core/front.h"
#include "gpu.h"

/* The process uses CUDA when the driver library is loaded or the runtime's symbols are visible. */
static int uses_cuda(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
        dlclose(h);
        return 1;
    }
    return dlsym(RTLD_DEFAULT, "cudaLaunchKernel") != NULL;
}

void cs__gpu_init(void)
{
    /* A process without CUDA (a CPU NCCL) has no GPU time to miss. */
    if (uses_cuda())
        cs__trace_gpu_note("GPU timing (CUPTI / CUDA events) is not implemented in this build: "
                           "NCCL calls are recorded as host enqueues only");
}

void cs__gpu_launch_begin(uint64_t launch)
{
    (void)launch;
}

void cs__gpu_launch_end(uint64_t launch, cudaStream_t stream, uint64_t comm, uint32_t seq,
                        uint32_t ncalls, ncclResult_t rc)
{
    (void)launch;
    (void)stream;
    (void)comm;
    (void)seq;
    (void)ncalls;
    (void)rc;
}

void cs__gpu_shutdown(void)
{
}

void cs__gpu_bus_id(int dev, char *out, size_t cap)
{
    if (!cap)
        return;
    out[0] = '\0';
    if (dev < 0 || cap < 2)
        return;
    /* The CUDA runtime the program already loaded, if any; never loaded by us. */
    int (*fn)(char *, int, int) = (int (*)(char *, int, int))dlsym(RTLD_DEFAULT,
                                                                   "cudaDeviceGetPCIBusId");
    if (!fn || fn(out, (int)cap, dev) != 0)
        out[0] = '\0';
    out[cap - 1] = '\0';
}
