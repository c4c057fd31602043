/*
 * The CUDA runtime functions the GPU side calls, taken from the runtime the program itself loaded
 * (commscope never loads CUDA: a process that does not use it must not start a CUDA context).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "internal.h"

struct cs__cudart cs__rt;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int found;

static void load_once(void)
{
    void *lib = NULL;
    void *probe = dlsym(RTLD_DEFAULT, "cudaEventRecord");
    if (!probe) {
        /* A runtime opened with RTLD_LOCAL (e.g. by a Python extension) is not in global scope. */
        static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
        for (size_t i = 0; !lib && i < sizeof names / sizeof names[0]; i++)
            lib = dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);
        if (!lib)
            return;
    }
    void *h = lib ? lib : RTLD_DEFAULT;
#define SYM(field, name) *(void **)&cs__rt.field = dlsym(h, name)
    SYM(GetDevice, "cudaGetDevice");
    SYM(DeviceGetPCIBusId, "cudaDeviceGetPCIBusId");
    SYM(StreamIsCapturing, "cudaStreamIsCapturing");
    SYM(ThreadExchangeStreamCaptureMode, "cudaThreadExchangeStreamCaptureMode");
    SYM(StreamCreateWithFlags, "cudaStreamCreateWithFlags");
    SYM(EventCreateWithFlags, "cudaEventCreateWithFlags");
    SYM(EventRecord, "cudaEventRecord");
    SYM(EventQuery, "cudaEventQuery");
    SYM(EventElapsedTime, "cudaEventElapsedTime");
    SYM(EventDestroy, "cudaEventDestroy");
#undef SYM
    /* lib stays referenced: the program keeps its runtime loaded anyway. */
    found = 1;
}

int cs__cudart_load(void)
{
    pthread_once(&once, load_once);
    return found;
}

int cs__cuda_capturing(cudaStream_t s)
{
    if (!cs__rt.StreamIsCapturing)
        return 0;
    int status = CS__CUDA_CAPTURE_NONE;
    if (cs__rt.StreamIsCapturing(s, &status) != CS__CUDA_SUCCESS)
        return -1;
    return status != CS__CUDA_CAPTURE_NONE;
}
