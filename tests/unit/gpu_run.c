/*
 * Test helper (not a test): `gpu_run DIR` writes a two-rank run with GPU records (tw.c) into DIR
 * and prints what it wrote, one line a record, for tests/report/test_reports.py (perfetto_gpu):
 *   gpu RANK OP DEVICE STREAM COMM SEQ LAUNCH T_BEGIN_NS T_END_NS
 *   host RANK OP COMM SEQ LAUNCH T_BEGIN_NS T_END_NS
 * Rank 0 has kernels on two streams of GPU 0, a memcpy and a memset, a kernel on GPU 1, NCCL
 * kernels of launches 1 and 2 (launch 2 on both GPUs) and one whose launch is unknown (0); its GPU
 * records are written out of start order on their own thread.  Rank 1 has the NCCL kernels only.
 */
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include "commscope/ops.h"
#include "tw.h"

#define US 1000ull
#define T0 (1000000ull * US)

static void host(struct tw *w, int rank, uint64_t t, uint32_t seq, uint64_t launch)
{
    struct cs_event e =
        tw_host_allreduce(w, 0, CS_COMM_WORLD_ID, T0 + t * US, T0 + t * US + 2 * US, seq, launch);
    printf("host %d %s %" PRIu64 " %" PRIu32 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", rank,
           cs_op_name(e.op), e.comm, e.seq, launch, e.t_begin, e.t_end);
}

static void gpu(struct tw *w, int rank, uint16_t op, uint64_t b, uint64_t e, int dev,
                uint32_t stream_or_seq, uint64_t launch)
{
    int nccl = op == CS_OP_GPU_NCCL;
    struct cs_event ev = {.t_begin = T0 + b * US,
                          .t_end = T0 + e * US,
                          .comm = nccl && launch ? CS_COMM_WORLD_ID : 0,
                          .bytes = op == CS_OP_GPU_MEMCPY || op == CS_OP_GPU_MEMSET ? 4096 : 0,
                          .bytes_recv = nccl ? 1 : 0,
                          .request = nccl ? launch : 0,
                          .seq = stream_or_seq,
                          .peer = -1,
                          .op = op,
                          .aux = dev};
    tw_event(w, 1, &ev);
    printf("gpu %d %s %d %d %" PRIu64 " %d %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", rank,
           cs_op_name(op), dev, nccl ? -1 : (int)stream_or_seq, ev.comm,
           nccl ? (int)stream_or_seq : -1, ev.request, ev.t_begin, ev.t_end);
}

static struct tw *rank_writer(int rank)
{
    return tw_new_gpu_rank(rank, 2, 0x6b76, 60 + (uint64_t)rank, T0, T0 + 1000 * US);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gpu_run DIR\n");
        return 2;
    }
    mkdir(argv[1], 0700);
    struct tw *w0 = rank_writer(0), *w1 = rank_writer(1);
    host(w0, 0, 10, 0, 1);
    host(w0, 0, 300, 1, 2);
    host(w1, 1, 10, 0, 1);
    host(w1, 1, 300, 1, 2);
    gpu(w0, 0, CS_OP_GPU_KERNEL, 150, 300, 0, 7, 0);
    gpu(w0, 0, CS_OP_GPU_NCCL, 50, 200, 0, 0, 1);
    gpu(w0, 0, CS_OP_GPU_KERNEL, 0, 100, 0, 7, 0);
    gpu(w0, 0, CS_OP_GPU_MEMCPY, 100, 110, 0, 7, 0);
    gpu(w0, 0, CS_OP_GPU_KERNEL, 80, 260, 0, 8, 0); /* overlaps stream 7: another track */
    gpu(w0, 0, CS_OP_GPU_MEMSET, 270, 275, 0, 8, 0);
    gpu(w0, 0, CS_OP_GPU_KERNEL, 0, 900, 1, 7, 0);
    gpu(w0, 0, CS_OP_GPU_NCCL, 400, 500, 0, 1, 2);
    gpu(w0, 0, CS_OP_GPU_NCCL, 410, 520, 1, 1, 2);
    gpu(w0, 0, CS_OP_GPU_NCCL, 600, 650, 0, 0, 0); /* launch unknown: no arrow */
    gpu(w1, 1, CS_OP_GPU_NCCL, 80, 200, 0, 0, 1);
    gpu(w1, 1, CS_OP_GPU_NCCL, 420, 500, 0, 1, 2);
    char p[600];
    int rc = 0;
    snprintf(p, sizeof p, "%s/rank-00000.cst", argv[1]);
    rc |= tw_write(w0, p, NULL) <= 0;
    snprintf(p, sizeof p, "%s/rank-00001.cst", argv[1]);
    rc |= tw_write(w1, p, NULL) <= 0;
    tw_free(w0);
    tw_free(w1);
    return rc;
}
