/*
 * Test helper (not a test): `overlap_run DIR` writes a two-rank run (tw.c) whose slices overlap
 * without nesting on one Perfetto track, and prints what it wrote, one line a record, for
 * tests/report/test_reports.py (perfetto_lanes):
 *   gpu RANK OP DEVICE STREAM COMM SEQ LAUNCH T_BEGIN_NS T_END_NS
 *   host RANK OP COMM SEQ LAUNCH T_BEGIN_NS T_END_NS THREAD
 * Rank 0: two threads call ncclAllReduce on the world communicator at overlapping times; three
 * NCCL kernels of that communicator on GPU 0 (two overlapping without nesting, as kernels of one
 * communicator on two streams do, the third inside the first); compute kernels on stream 7 that
 * overlap without nesting (as concurrent kernels mapped to one stream do in imported traces); a
 * long kernel alone on stream 8.  The GPU records are written out of start order.  Rank 1 has the
 * matching host calls on one thread and NCCL kernels that overlap the same way.
 */
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include "commscope/ops.h"
#include "tw.h"

#define US 1000ull
#define T0 (1000000ull * US)

static void host(struct tw *w, int rank, unsigned thread, uint64_t b, uint64_t e, uint32_t seq,
                 uint64_t launch)
{
    struct cs_event ev =
        tw_host_allreduce(w, thread, CS_COMM_WORLD_ID, T0 + b * US, T0 + e * US, seq, launch);
    printf("host %d %s %" PRIu64 " %" PRIu32 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %u\n", rank,
           cs_op_name(ev.op), ev.comm, ev.seq, launch, ev.t_begin, ev.t_end, thread);
}

static void gpu(struct tw *w, int rank, uint16_t op, uint64_t b, uint64_t e, uint32_t stream_or_seq,
                uint64_t launch)
{
    int nccl = op == CS_OP_GPU_NCCL;
    struct cs_event ev = {.t_begin = T0 + b * US,
                          .t_end = T0 + e * US,
                          .comm = nccl ? CS_COMM_WORLD_ID : 0,
                          .bytes_recv = nccl ? 1 : 0,
                          .request = nccl ? launch : 0,
                          .seq = stream_or_seq,
                          .peer = -1,
                          .op = op,
                          .aux = 0};
    tw_event(w, 2, &ev);
    printf("gpu %d %s 0 %d %" PRIu64 " %d %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", rank,
           cs_op_name(op), nccl ? -1 : (int)stream_or_seq, ev.comm, nccl ? (int)stream_or_seq : -1,
           ev.request, ev.t_begin, ev.t_end);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: overlap_run DIR\n");
        return 2;
    }
    mkdir(argv[1], 0700);
    struct tw *w[2];
    for (int r = 0; r < 2; r++)
        w[r] = tw_new_gpu_rank(r, 2, 0x6c61, 70 + (uint64_t)r, T0, T0 + 1000 * US);
    host(w[0], 0, 0, 10, 30, 0, 1);
    host(w[0], 0, 1, 20, 40, 1, 2); /* another thread, same communicator: overlaps the first */
    host(w[0], 0, 0, 60, 70, 2, 3);
    host(w[1], 1, 0, 10, 30, 0, 1);
    host(w[1], 1, 0, 31, 40, 1, 2);
    host(w[1], 1, 0, 60, 70, 2, 3);
    gpu(w[0], 0, CS_OP_GPU_NCCL, 200, 400, 1, 2);
    gpu(w[0], 0, CS_OP_GPU_KERNEL, 40, 90, 7, 0);
    gpu(w[0], 0, CS_OP_GPU_NCCL, 250, 280, 2, 3); /* inside the kernel of seq 0 */
    gpu(w[0], 0, CS_OP_GPU_KERNEL, 0, 50, 7, 0);
    gpu(w[0], 0, CS_OP_GPU_NCCL, 100, 300, 0, 1);
    gpu(w[0], 0, CS_OP_GPU_KERNEL, 45, 60, 7, 0); /* overlaps [0,50], inside [40,90] */
    gpu(w[0], 0, CS_OP_GPU_KERNEL, 0, 500, 8, 0);
    gpu(w[1], 1, CS_OP_GPU_NCCL, 220, 420, 1, 2);
    gpu(w[1], 1, CS_OP_GPU_NCCL, 120, 300, 0, 1);
    gpu(w[1], 1, CS_OP_GPU_NCCL, 290, 300, 2, 3);
    int rc = 0;
    for (int r = 0; r < 2; r++) {
        char p[600];
        snprintf(p, sizeof p, "%s/rank-%05d.cst", argv[1], r);
        rc |= tw_write(w[r], p, NULL) <= 0;
        tw_free(w[r]);
    }
    return rc;
}
