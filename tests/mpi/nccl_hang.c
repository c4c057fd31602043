/*
 * An NCCL job that stops, for the hang diagnosis (test_hang.py nccl_*): MPI starts the ranks and
 * hands out the NCCL unique id; the NCCL and CUDA are the CPU test doubles (tests/fakes/) with
 * FAKE_NCCL_ASYNC=1, so a collective's host call returns at once and its kernel runs until every
 * member enqueued it, as on a GPU.  Each rank runs ITERATIONS (default 5) steps of one
 * ncclAllReduce (4 KiB) on the step's stream, cudaStreamSynchronize and MPI_Barrier; in step
 * SKIP (default 3) rank 1 skips the all-reduce.  Its barrier then waits for the others, whose
 * cudaStreamSynchronize waits for a kernel that never completes.
 *
 * Usage: cs_test_nccl_hang [ITERATIONS [SKIP]].  Prints "hang: rank R ready" once set up.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../collector/nccl/api.h"
#include "../fakes/fake_cuda.h"

ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t st);
ncclResult_t ncclCommDestroy(ncclComm_t comm);

#define OK(call)                                                                                   \
    do {                                                                                           \
        int rc_ = (int)(call);                                                                     \
        if (rc_ != 0) {                                                                            \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, rc_);            \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                          \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int iters = argc > 1 ? atoi(argv[1]) : 5, skip = argc > 2 ? atoi(argv[2]) : 3;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    OK(cudaSetDevice(rank % 8));
    cudaStream_t st;
    OK(cudaStreamCreate(&st));
    ncclUniqueId id;
    if (rank == 0)
        OK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    OK(ncclCommInitRank(&comm, size, id, rank));
    float *buf;
    OK(cudaMalloc((void **)&buf, 1024 * sizeof *buf));
    printf("hang: rank %d ready\n", rank);
    fflush(stdout);
    for (int i = 0; i < iters; i++) {
        if (!(i == skip && rank == 1))
            OK(ncclAllReduce(buf, buf, 1024, (ncclDataType_t)7, (ncclRedOp_t)0, comm, st));
        OK(cudaStreamSynchronize(st));
        MPI_Barrier(MPI_COMM_WORLD);
    }
    OK(ncclCommDestroy(comm));
    cudaFree(buf);
    MPI_Finalize();
    return 0;
}
