/*
 * A pipeline-parallel imitation for the NCCL point-to-point matching tests, run on the fake CUDA
 * runtime and CUPTI and the CPU NCCL (tests/fakes/), one process per rank, no MPI.  Ranks are
 * pipeline stages of one communicator.  Per iteration:
 *
 *   forward:  stage r > 0 receives an activation of 1024 (r) floats from r - 1 (ncclRecv, its own
 *             launch); a compute kernel (fwd, 2 ms); stage r < n - 1 sends 1024 (r + 1) floats to
 *             r + 1 (ncclSend, its own launch)
 *   backward: one group (ncclGroupStart/End) per stage: receive 512 (r + 2) floats from r + 1
 *             (not the last stage) and send 512 (r + 1) floats to r - 1 (not the first); a
 *             compute kernel (bwd, 3 ms)
 *
 * So r -> r + 1 carries ITERATIONS x 4096 (r + 1) bytes, r -> r - 1 ITERATIONS x 2048 (r + 1).
 * Usage: cs_nccl_pipeline EXCHANGE_DIR ITERATIONS   (RANK and WORLD_SIZE from the environment)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

static float act[1 << 16], grad[1 << 16];

int main(int argc, char **argv)
{
    if (argc != 3 || !getenv("RANK") || !getenv("WORLD_SIZE"))
        return fprintf(stderr, "usage: RANK=r WORLD_SIZE=n %s DIR ITERATIONS\n", argv[0]), 2;
    int r = atoi(getenv("RANK")), n = atoi(getenv("WORLD_SIZE")), iters = atoi(argv[2]);
    if (n < 2 || n > 8)
        return fprintf(stderr, "%s: 2 to 8 ranks\n", argv[0]), 2;
    OK(cudaSetDevice(r));
    cudaStream_t cs, ns;
    OK(cudaStreamCreate(&cs));
    OK(cudaStreamCreate(&ns));
    ncclUniqueId id;
    exchange_id(argv[1], r, &id);
    ncclComm_t comm;
    OK(ncclCommInitRank(&comm, n, id, r));
    for (int it = 0; it < iters; it++) {
        if (r > 0) {
            fakeCudaNextDuration(200 * US);
            OK(ncclRecv(act, 1024 * (size_t)r, F32, r - 1, comm, ns));
        }
        OK(fakeCudaLaunchNamed("fwd", 2 * MS, cs));
        if (r < n - 1) {
            fakeCudaNextDuration(200 * US);
            OK(ncclSend(act, 1024 * (size_t)(r + 1), F32, r + 1, comm, ns));
        }
        OK(ncclGroupStart());
        if (r < n - 1)
            OK(ncclRecv(grad, 512 * (size_t)(r + 2), F32, r + 1, comm, ns));
        if (r > 0)
            OK(ncclSend(grad, 512 * (size_t)(r + 1), F32, r - 1, comm, ns));
        fakeCudaNextDuration(300 * US);
        OK(ncclGroupEnd());
        OK(fakeCudaLaunchNamed("bwd", 3 * MS, cs));
    }
    OK(cudaStreamSynchronize(ns));
    OK(cudaStreamSynchronize(cs));
    return 0;
}
