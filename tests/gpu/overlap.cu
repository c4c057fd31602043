// GPU check program (tests/gpu/run.sh): a compute kernel on one stream and a single-rank NCCL
// all-reduce on another, ITER times, timed by the program itself with CUDA events.  The
// all-reduce uses ncclAvg: with one rank NCCL turns a sum into a copy (or nothing, in place) but
// an average into a scaling kernel, so there is an NCCL kernel to see.  Prints
//   program: iterations N comm_ms X compute_ms Y overlap_ms Z
// where overlap is the sum over iterations of |[allreduce events] ∩ [compute events]|.
//
// With a third argument `steps` every iteration is a training step: an NVTX range
// `ProfilerStep#I` pushed before its work and popped after both streams were synchronised (the
// host waits for the GPU at the end of a step), and after the all-reduce one NCCL group of an
// ncclSend and an ncclRecv of P2P_FLOATS floats to and from rank 0 itself.  It then also prints
//   steps: iterations N step_ms_mean S p2p_bytes_per_step B
// with S the mean of the host-clock times from push to pop.
#include <cuda_runtime.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define P2P_FLOATS (1u << 20)

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)
#define NK(x)                                                                                      \
    do {                                                                                           \
        ncclResult_t r_ = (x);                                                                     \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_));    \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

// One small block spinning for `cycles`: leaves the other SMs free for NCCL.
__global__ void spin(long long cycles, int *out)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = (int)(clock64() & 1);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 20;
    size_t count = argc > 2 ? strtoull(argv[2], NULL, 10) : (64u << 20); // floats
    int steps = argc > 3 && strcmp(argv[3], "steps") == 0;
    double step_ms = 0;
    CK(cudaSetDevice(0));
    int clock_khz = 0;
    CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    long long cycles = (long long)clock_khz * 3; // ~3 ms
    ncclUniqueId id;
    NK(ncclGetUniqueId(&id));
    ncclComm_t comm;
    NK(ncclCommInitRank(&comm, 1, id, 0));
    cudaStream_t sc, sa;
    CK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
    float *buf, *ps, *pr;
    int *out;
    CK(cudaMalloc(&buf, count * sizeof(float)));
    CK(cudaMalloc(&ps, P2P_FLOATS * sizeof(float)));
    CK(cudaMalloc(&pr, P2P_FLOATS * sizeof(float)));
    CK(cudaMemset(ps, 0, P2P_FLOATS * sizeof(float)));
    CK(cudaMalloc(&out, 64 * sizeof(int)));
    CK(cudaMemset(buf, 0, count * sizeof(float)));
    cudaEvent_t base, *c0 = new cudaEvent_t[iters], *c1 = new cudaEvent_t[iters],
                      *a0 = new cudaEvent_t[iters], *a1 = new cudaEvent_t[iters];
    CK(cudaEventCreate(&base));
    for (int i = 0; i < iters; i++) {
        CK(cudaEventCreate(&c0[i]));
        CK(cudaEventCreate(&c1[i]));
        CK(cudaEventCreate(&a0[i]));
        CK(cudaEventCreate(&a1[i]));
    }
    // Warm-up (not counted): first NCCL launch and first kernel.
    NK(ncclAllReduce(buf, buf, count, ncclFloat, ncclAvg, comm, sa));
    spin<<<1, 32, 0, sc>>>(1000, out);
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(base, sc));
    CK(cudaStreamWaitEvent(sa, base, 0));
    for (int i = 0; i < iters; i++) {
        double t0 = 0;
        if (steps) {
            char name[32];
            snprintf(name, sizeof name, "ProfilerStep#%d", i);
            nvtxRangePushA(name);
            t0 = now_ms();
        }
        CK(cudaEventRecord(c0[i], sc));
        spin<<<1, 32, 0, sc>>>(cycles, out);
        CK(cudaEventRecord(c1[i], sc));
        CK(cudaEventRecord(a0[i], sa));
        NK(ncclAllReduce(buf, buf, count, ncclFloat, ncclAvg, comm, sa));
        CK(cudaEventRecord(a1[i], sa));
        if (steps) {
            NK(ncclGroupStart());
            NK(ncclSend(ps, P2P_FLOATS, ncclFloat, 0, comm, sa));
            NK(ncclRecv(pr, P2P_FLOATS, ncclFloat, 0, comm, sa));
            NK(ncclGroupEnd());
        }
        // The next iteration starts when both are done.
        CK(cudaStreamWaitEvent(sc, a1[i], 0));
        CK(cudaStreamWaitEvent(sa, c1[i], 0));
        if (steps) {
            CK(cudaStreamSynchronize(sa));
            CK(cudaStreamSynchronize(sc));
            nvtxRangePop();
            step_ms += now_ms() - t0;
        }
    }
    CK(cudaDeviceSynchronize());
    double comm_ms = 0, comp_ms = 0, ov_ms = 0;
    for (int i = 0; i < iters; i++) {
        float tc0, tc1, ta0, ta1;
        CK(cudaEventElapsedTime(&tc0, base, c0[i]));
        CK(cudaEventElapsedTime(&tc1, base, c1[i]));
        CK(cudaEventElapsedTime(&ta0, base, a0[i]));
        CK(cudaEventElapsedTime(&ta1, base, a1[i]));
        comm_ms += ta1 - ta0;
        comp_ms += tc1 - tc0;
        double lo = ta0 > tc0 ? ta0 : tc0, hi = ta1 < tc1 ? ta1 : tc1;
        if (hi > lo)
            ov_ms += hi - lo;
    }
    printf("program: iterations %d comm_ms %.4f compute_ms %.4f overlap_ms %.4f\n", iters,
           comm_ms, comp_ms, ov_ms);
    if (steps)
        printf("steps: iterations %d step_ms_mean %.4f p2p_bytes_per_step %zu\n", iters,
               step_ms / iters, (size_t)P2P_FLOATS * sizeof(float));
    NK(ncclCommDestroy(comm));
    CK(cudaFree(buf));
    CK(cudaFree(ps));
    CK(cudaFree(pr));
    CK(cudaFree(out));
    return 0;
}
