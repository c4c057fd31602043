/*
 * An NCCL program for the NCCL tests (run against the CPU NCCL test double, one process per rank,
 * no MPI): every intercepted communication call with known sizes, groups, a split communicator.
 * It checks its own results and prints, per op, the calls and bytes it made on this rank as
 * "expect OP CALLS BYTES BYTES_RECV" lines computed from the arguments it passed.
 *
 * Usage: cs_nccl_ranks EXCHANGE_DIR ITERATIONS   (RANK and WORLD_SIZE, or SLURM_PROCID and
 * SLURM_NTASKS, from the environment; CS_TEST_KILL_RANK=r: rank r kills itself at the end)
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../collector/nccl/api.h"
#include "exchange.h"

#define CS_NCCL(fam, name, op, params, args) ncclResult_t nccl##name params;
#define CS_NCCL_Q(name, params, args) ncclResult_t nccl##name params;
#include "../../collector/nccl/calls.def"
#include "../../collector/nccl/queries.def"
#undef CS_NCCL
#undef CS_NCCL_Q

#define I8 ((ncclDataType_t)0)
#define I32 ((ncclDataType_t)2)
#define I64 ((ncclDataType_t)4)
#define F32 ((ncclDataType_t)7)
#define F64 ((ncclDataType_t)8)
#define SUM ((ncclRedOp_t)0)

static int failed;
#define OK(call)                                                                                   \
    do {                                                                                           \
        ncclResult_t rc_ = (call);                                                                 \
        if (rc_ != ncclSuccess) {                                                                  \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, (int)rc_);       \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

struct tally {
    const char *op;
    long calls;
    unsigned long long bytes, brecv;
} tl[16];
static int ntl;

static void count(const char *op, unsigned long long b, unsigned long long br)
{
    int i = 0;
    while (i < ntl && strcmp(tl[i].op, op))
        i++;
    if (i == ntl)
        tl[ntl++].op = op;
    tl[i].calls++;
    tl[i].bytes += b;
    tl[i].brecv += br;
}

int main(int argc, char **argv)
{
    /* torchrun's variables, else srun's. */
    const char *rv = getenv("RANK") ? getenv("RANK") : getenv("SLURM_PROCID");
    const char *nv = getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : getenv("SLURM_NTASKS");
    if (argc != 3 || !rv || !nv)
        return fprintf(stderr, "usage: RANK=r WORLD_SIZE=n %s DIR ITERATIONS\n", argv[0]), 2;
    int r = atoi(rv), n = atoi(nv), iters = atoi(argv[2]);
    unsigned long long N = (unsigned long long)n;
    ncclUniqueId id;
    exchange_id(argv[1], r, &id);
    ncclComm_t world;
    OK(ncclCommInitRank(&world, n, id, r));
    cudaStream_t s = NULL;
    static float f[1 << 14], g[1 << 14];
    static int32_t a[1 << 12], b[1 << 12];
    static double d[1 << 10], e[1 << 10];
    static int64_t l[1 << 10];
    static int8_t c8[1 << 8];
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < 1024; i++)
            f[i] = (float)(r + 1);
        OK(ncclAllReduce(f, g, 1024, F32, SUM, world, s));
        count("ncclAllReduce", 1024 * 4, 1024 * 4);
        if (g[0] != (float)(n * (n + 1) / 2) || g[1023] != g[0])
            failed = 1;
        int broot = 1 % n;
        OK(ncclBroadcast(a, b, 512, I32, broot, world, s));
        count("ncclBroadcast", r == broot ? 512 * 4 : 0, r == broot ? 0 : 512 * 4);
        OK(ncclBcast(d, 100, F64, 0, world, s));
        count("ncclBcast", r == 0 ? 800 : 0, r == 0 ? 0 : 800);
        int rroot = 2 % n;
        OK(ncclReduce(f, g, 256, F32, SUM, rroot, world, s));
        count("ncclReduce", 256 * 4, r == rroot ? 256 * 4 : 0);
        OK(ncclAllGather(l, l + 64, 64, I64, world, s));
        count("ncclAllGather", 64 * 8, 64 * 8 * N);
        OK(ncclReduceScatter(f, g, 32, F32, SUM, world, s));
        count("ncclReduceScatter", 32 * 4 * N, 32 * 4);
        OK(ncclAlltoAll(a, b, 16, I32, world, s));
        count("ncclAlltoAll", 16 * 4 * N, 16 * 4 * N);
        OK(ncclGather(d, e, 8, F64, 0, world, s));
        count("ncclGather", 64, r == 0 ? 64 * N : 0);
        OK(ncclScatter(c8, c8 + 64, 4, I8, n - 1, world, s));
        count("ncclScatter", r == n - 1 ? 4 * N : 0, 4);
        /* A ring exchange as one group launch. */
        for (int i = 0; i < 128; i++)
            f[i] = (float)r;
        OK(ncclGroupStart());
        OK(ncclSend(f, 128, F32, (r + 1) % n, world, s));
        OK(ncclRecv(g, 128, F32, (r + n - 1) % n, world, s));
        OK(ncclGroupEnd());
        count("ncclSend", 512, 0);
        count("ncclRecv", 0, 512);
        count("ncclGroupStart", 0, 0);
        count("ncclGroupEnd", 0, 2);
        if (g[0] != (float)((r + n - 1) % n))
            failed = 1;
        /* Two all-reduces fused into one launch. */
        OK(ncclGroupStart());
        OK(ncclAllReduce(a, b, 10, I32, SUM, world, s));
        OK(ncclAllReduce(a + 10, b + 10, 10, I32, SUM, world, s));
        OK(ncclGroupEnd());
        count("ncclAllReduce", 40, 40);
        count("ncclAllReduce", 40, 40);
        count("ncclGroupStart", 0, 0);
        count("ncclGroupEnd", 0, 2);
    }
    /* Split: even and odd ranks, ordered by descending world rank (key = -rank). */
    ncclComm_t half;
    OK(ncclCommSplit(world, r % 2, -r, &half, NULL));
    int hn = 0, hr = 0, expect_sum = 0, expect_n = 0, expect_r = 0;
    OK(ncclCommCount(half, &hn));
    OK(ncclCommUserRank(half, &hr));
    for (int q = 0; q < n; q++)
        if (q % 2 == r % 2) {
            expect_sum += q + 1;
            expect_n++;
            expect_r += q > r;
        }
    if (hn != expect_n || hr != expect_r)
        failed = 1;
    for (int k = 0; k < 3; k++) {
        a[0] = r + 1;
        OK(ncclAllReduce(a, b, 7, I32, SUM, half, s));
        count("ncclAllReduce", 28, 28);
        if (b[0] != expect_sum)
            failed = 1;
    }
    OK(ncclCommDestroy(half));
    OK(ncclCommDestroy(world));
    for (int i = 0; i < ntl; i++)
        printf("expect %s %ld %llu %llu\n", tl[i].op, tl[i].calls, tl[i].bytes, tl[i].brecv);
    printf("split %d %d %d\n", r % 2, hn, hr);
    if (failed)
        fprintf(stderr, "rank %d: wrong collective results\n", r);
    /* CS_TEST_KILL_RANK=r: this rank dies by SIGKILL once its work is done (a crashed rank whose
     * trace was never closed). */
    const char *kill_rank = getenv("CS_TEST_KILL_RANK");
    if (kill_rank && atoi(kill_rank) == r) {
        fflush(stdout);
        raise(SIGKILL);
    }
    return failed;
}
