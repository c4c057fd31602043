/*
 * A GPU training-step imitation for the GPU-timing tests, run on the fake CUDA runtime and the CPU
 * NCCL test doubles (tests/fakes/), one process per rank, no MPI.  Every piece of GPU work has a
 * scripted duration; the fake runtime logs what ran and when (FAKE_CUDA_LOG), which the test
 * compares with the trace.  Per iteration:
 *
 *   compute stream: gemm_fwd (5 ms), a 4 KiB memcpy (100 us), a 512 B memset (50 us)
 *   comm stream:    pre_comm (20 ms), ncclAllReduce (1.5 ms kernel),
 *                   pre_group (20 ms), ncclGroupStart/Send/Recv/GroupEnd (one 0.7 ms kernel)
 *
 * The 20 ms kernels keep the comm stream busy, so the NCCL kernels start exactly when the stream
 * reaches them.  Then a CUDA graph: an ncclAllReduce captured on a third stream (global capture
 * mode) while an all-reduce on the comm stream runs outside the capture, the graph launched
 * twice; and a last all-reduce whose kernel (300 ms) is still running when the program exits
 * (nothing synchronises).  Before the first NCCL call, one kernel (pre_nccl, 1 ms) runs.
 *
 * Usage: cs_nccl_gpu EXCHANGE_DIR ITERATIONS   (RANK and WORLD_SIZE from the environment)
 * Prints "launch KIND" lines in the order of the NCCL launches it made.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../collector/nccl/api.h"
#include "../fakes/fake_cuda.h"
#include "exchange.h"

#define CS_NCCL(fam, name, op, params, args) ncclResult_t nccl##name params;
#define CS_NCCL_Q(name, params, args) ncclResult_t nccl##name params;
#include "../../collector/nccl/calls.def"
#include "../../collector/nccl/queries.def"
#undef CS_NCCL
#undef CS_NCCL_Q

#define F32 ((ncclDataType_t)7)
#define SUM ((ncclRedOp_t)0)
#define MS 1000000ull
#define US 1000ull

#define OK(call)                                                                                   \
    do {                                                                                           \
        int rc_ = (int)(call);                                                                     \
        if (rc_ != 0) {                                                                            \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, rc_);            \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 3 || !getenv("RANK") || !getenv("WORLD_SIZE"))
        return fprintf(stderr, "usage: RANK=r WORLD_SIZE=n %s DIR ITERATIONS\n", argv[0]), 2;
    int r = atoi(getenv("RANK")), n = atoi(getenv("WORLD_SIZE")), iters = atoi(argv[2]);
    OK(cudaSetDevice(r));
    cudaStream_t cs, ns, gs;
    OK(cudaStreamCreate(&cs));
    OK(cudaStreamCreate(&ns));
    OK(cudaStreamCreate(&gs));
    OK(fakeCudaLaunchNamed("pre_nccl", 1 * MS, cs));

    ncclUniqueId id;
    exchange_id(argv[1], r, &id);
    ncclComm_t comm;
    OK(ncclCommInitRank(&comm, n, id, r));
    static float a[1024], b[1024];
    static char host[4096];
    for (int it = 0; it < iters; it++) {
        OK(fakeCudaLaunchNamed("gemm_fwd", 5 * MS, cs));
        OK(fakeCudaLaunchNamed("pre_comm", 20 * MS, ns));
        fakeCudaNextDuration(1500 * US);
        OK(ncclAllReduce(a, b, 1024, F32, SUM, comm, ns));
        puts("launch allreduce");
        fakeCudaNextDuration(100 * US);
        OK(cudaMemcpyAsync(b, host, sizeof host < sizeof b ? sizeof host : sizeof b,
                           cudaMemcpyDefault, cs));
        fakeCudaNextDuration(50 * US);
        OK(cudaMemsetAsync(a, 0, 512, cs));
        OK(fakeCudaLaunchNamed("pre_group", 20 * MS, ns));
        OK(ncclGroupStart());
        OK(ncclSend(a, 64, F32, (r + 1) % n, comm, ns));
        OK(ncclRecv(b, 64, F32, (r + n - 1) % n, comm, ns));
        fakeCudaNextDuration(700 * US);
        OK(ncclGroupEnd());
        puts("launch group");
    }

    /* A CUDA graph holding an all-reduce; meanwhile an all-reduce outside the capture. */
    OK(cudaStreamBeginCapture(gs, cudaStreamCaptureModeGlobal));
    fakeCudaNextDuration(900 * US);
    OK(ncclAllReduce(a, b, 256, F32, SUM, comm, gs));
    puts("launch captured");
    OK(fakeCudaLaunchNamed("pre_side", 20 * MS, ns));
    fakeCudaNextDuration(1200 * US);
    OK(ncclAllReduce(a, b, 128, F32, SUM, comm, ns));
    puts("launch side");
    cudaGraph_t graph;
    OK(cudaStreamEndCapture(gs, &graph));
    cudaGraphExec_t exec;
    OK(cudaGraphInstantiate(&exec, graph, 0));
    OK(cudaGraphLaunch(exec, gs));
    OK(cudaGraphLaunch(exec, gs));

    /* Still running at exit: read back by polling while the program exits. */
    OK(fakeCudaLaunchNamed("pre_last", 20 * MS, ns));
    fakeCudaNextDuration(300 * MS);
    OK(ncclAllReduce(a, b, 64, F32, SUM, comm, ns));
    puts("launch last");
    fflush(stdout);
    /* The real program would destroy the communicator; the fake's collectives finished already. */
    OK(cudaGraphExecDestroy(exec));
    OK(cudaGraphDestroy(graph));
    return 0;
}
