/*
 * TEST DOUBLE: the CUDA runtime subset (libcudart.so ABI, CUDA 12/13) that commscope's collector
 * and the GPU test programs use, implemented on the CPU by tests/fakes/fake_cudart.c, and the
 * double's own scripting interface (fakeCuda*).  Names, values and signatures of the cuda* part
 * are the real runtime's; the test programs include this header instead of cuda_runtime_api.h.
 *
 * The simulated GPU: every stream has a timeline on the host clock (CLOCK_MONOTONIC ns).  Work
 * launched on a stream starts when the stream's previous work ended, or at the launch, whichever
 * is later, and runs for the duration the program scripted (fakeCudaNextDuration or the
 * fakeCudaLaunchNamed argument); an event recorded on a stream completes when the stream's work
 * before it ends.  Nothing really runs: cudaEventQuery compares the completion time with the
 * clock.  Work launched into a capturing stream is captured into a graph instead, and runs when
 * the graph is launched.
 */
#ifndef COMMSCOPE_FAKE_CUDA_H
#define COMMSCOPE_FAKE_CUDA_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureImplicit = 906,
} cudaError_t;

enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2
};
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2
};
enum cudaMemcpyKind { cudaMemcpyDefault = 4 };
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef struct {
    unsigned x, y, z;
} dim3;

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph);
cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                             cudaStream_t s);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s);

/* ---- the double's scripting interface (not CUDA) ---- */

/* The next launch of the calling thread (kernel, memcpy, memset) runs for ns nanoseconds
 * (default: FAKE_CUDA_DEFAULT_NS, else 10 us). */
void fakeCudaNextDuration(uint64_t ns);
/* Launch a kernel called name on s that runs for ns nanoseconds (0: the scripted next duration),
 * as cudaLaunchKernel would. */
cudaError_t fakeCudaLaunchNamed(const char *name, uint64_t ns, cudaStream_t s);
/* Launch a kernel called name on s whose end is not known yet, as a communication kernel waiting
 * for its peers: it runs until fakeCudaComplete(id).  Events recorded behind it complete then;
 * cudaStreamSynchronize waits for it; other work launched behind it does not run (counted in
 * behind_open).  Returns its id, 0 when s already has unfinished work or is capturing. */
uint32_t fakeCudaLaunchOpen(const char *name, cudaStream_t s);
void fakeCudaComplete(uint32_t id);
/* The host time (CLOCK_MONOTONIC ns) at which the work queued on s so far ends. */
uint64_t fakeCudaStreamTail(cudaStream_t s);

/* What the program and the tools did to the simulated GPU (for the tests' assertions). */
struct fake_cuda_stats {
    uint64_t launches; /* kernels, memcpys and memsets that ran */
    uint64_t captured; /* launches captured into a graph instead */
    uint64_t syncs;    /* cudaStreamSynchronize / cudaDeviceSynchronize / EventSynchronize */
    uint64_t capture_intrusions; /* events recorded into a capturing stream */
    uint64_t unsafe_in_capture;  /* unsafe calls during a global-mode capture (not relaxed) */
    uint64_t events_recorded;
    uint64_t event_queries;
    uint64_t relaxed_queries_in_capture; /* queries in relaxed mode during a global capture */
    uint64_t behind_open;                /* launches refused behind unfinished work */
};
void fakeCudaStats(struct fake_cuda_stats *out);

/*
 * How the fake CUPTI (fake_cupti.c) observes the simulated GPU.  api() runs in the launching
 * thread for every runtime call that launches work (correlation id corr); done() for every piece
 * of work that ran, times on the host clock.  kind: 0 kernel, 1 memcpy, 2 memset.
 */
struct fake_cuda_work {
    int kind;
    const char *name; /* kernels; owned by the double, valid until exit */
    int dev;
    uint32_t stream_id, corr, graph_id;
    uint64_t start, end, bytes;
    uint64_t launch; /* host time of the runtime call that launched it */
};
struct fake_cuda_observer {
    void (*api)(uint32_t corr, uint64_t t_host); /* a launching call, its host time */
    void (*done)(const struct fake_cuda_work *w);
};
void fakeCudaObserve(const struct fake_cuda_observer *o);

#endif
