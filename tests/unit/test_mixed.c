/*
 * Ranks with both MPI collectives (host call times) and NCCL collectives (GPU records): the
 * report's time segments take the MPI part from the host and the NCCL part from the GPU
 * timeline, each wait counted once, in the part of its instance (docs/metrics.md, "Report
 * views"); NCCL waiting only where no compute kernel hides it.  A scripted two-rank trace (tw.c)
 * whose every number is known.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs_test.h"
#include "internal.h"
#include "tw.h"
#include "views.h"

#define US 1000ull           /* ns per microsecond */
#define T0 (1000000ull * US) /* one second into the clock */
#define NID 0x4e43434cull    /* the NCCL communicator */

static void ev(struct tw *w, unsigned thread, uint16_t op, uint64_t b, uint64_t e, uint64_t comm,
               uint32_t seq, uint64_t bytes, uint64_t launch, int32_t dev)
{
    struct cs_event x = {.t_begin = T0 + b * US,
                         .t_end = T0 + e * US,
                         .comm = comm,
                         .bytes = bytes,
                         .bytes_recv = op == CS_OP_GPU_NCCL ? 1 : bytes,
                         .request = launch,
                         .seq = seq,
                         .peer = -1,
                         .op = op,
                         .aux = dev};
    tw_event(w, thread, &x);
}

/*
 * Microseconds after T0; both ranks MPI_Init [0,5], MPI_Finalize [990,1000] (wall 1000).
 *   MPI_Allreduce world seq 0: rank 0 [100,150], rank 1 [130,150]  -> rank 0 waits 30
 *   MPI_Barrier world seq 1:   rank 0 [640,650], rank 1 [600,650]  -> rank 1 waits 40
 *   ncclAllReduce (host enqueue [200,202], launch 1) on the NCCL communicator:
 *     GPU kernels rank 0 [300,500], rank 1 [340,500]               -> rank 0 waits 40
 *   compute kernels: rank 0 [250,350] (overlaps its NCCL kernel by 50), rank 1 [500,560]
 * Rank 0: MPI collective calls C = 60, NCCL exposed E = 200 - 50 = 150, compute 100.
 * Rank 1: C = 70, E = 160, compute 60.
 */
static void write_run(const char *dir)
{
    static const uint64_t ar[2][2] = {{100, 640}, {130, 600}}; /* MPI arrivals */
    static const uint64_t nk[2] = {300, 340};                  /* NCCL kernel starts */
    static const uint64_t ck[2][2] = {{250, 350}, {500, 560}}; /* compute kernel */
    for (int r = 0; r < 2; r++) {
        struct tw *w = tw_new(r, 2, 0x6d78, 80 + (uint64_t)r);
        struct cs_file_header *h = tw_header(w);
        h->t_init = T0;
        h->t_finalize = T0 + 1000 * US;
        h->gpu_timing = CS_GPU_CUPTI;
        for (int i = 0; i < 2; i++) {
            h->clock[i].valid = 1;
            h->clock[i].local_ns = T0 + (i ? 1000 : 0) * US;
            h->clock[i].rounds = 10;
        }
        int32_t m[2] = {0, 1};
        tw_comm(w, CS_COMM_WORLD_ID, 0, 2, r, m);
        tw_comm_nccl(w, NID, 2, r, r, 0, "0000:3b:00.0");
        ev(w, 0, CS_OP_INIT, 0, 5, 0, 0, 0, 0, 0);
        ev(w, 0, CS_OP_ALLREDUCE, ar[r][0], 150, CS_COMM_WORLD_ID, 0, 1024, 0, 0);
        ev(w, 0, CS_OP_NCCL_ALLREDUCE, 200, 202, NID, 0, 4096, 1, 7);
        ev(w, 0, CS_OP_BARRIER, ar[r][1], 650, CS_COMM_WORLD_ID, 1, 0, 0, 0);
        ev(w, 0, CS_OP_FINALIZE, 990, 1000, 0, 0, 0, 0, 0);
        /* GPU records on their own thread, the compute kernel after the NCCL one */
        ev(w, 1, CS_OP_GPU_NCCL, nk[r], 500, NID, 0, 0, 1, 0);
        ev(w, 1, CS_OP_GPU_KERNEL, ck[r][0], ck[r][1], 0, 7, 0, 0, 0);
        char p[700];
        snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, r);
        CHECK(tw_write(w, p, NULL) > 0);
        tw_free(w);
    }
}

int main(void)
{
    char root[] = "/tmp/cs-mixed-XXXXXX", dir[600], err[512] = "";
    if (!mkdtemp(root))
        return 1;
    snprintf(dir, sizeof dir, "%s/run", root);
    mkdir(dir, 0700);
    write_run(dir);
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    const double u = 1e-6, eps = 1e-12;
    CHECK_INT(rep.nranks, ==, 2);
    if (rep.nranks != 2 || !rep.views)
        return cs_test_result() | 1;
    const struct cs_report_rank *r0 = &rep.ranks[0], *r1 = &rep.ranks[1];
    /* the inputs of the segments, as the trace was written */
    CHECK_NEAR(r0->wall_s, 1000 * u, eps);
    CHECK_NEAR(r0->wait_s, (30 + 40) * u, eps); /* MPI allreduce + NCCL allreduce */
    CHECK_NEAR(r1->wait_s, 40 * u, eps);        /* MPI barrier */
    CHECK_NEAR(r0->gpu_comm_s, 200 * u, eps);
    CHECK_NEAR(r0->exposed_comm_s, 150 * u, eps);
    CHECK_NEAR(r1->exposed_comm_s, 160 * u, eps);
    CHECK_NEAR(r0->comm_s, (60 + 200) * u, eps); /* MPI calls + NCCL kernels */
    CHECK_NEAR(r1->comm_s, (70 + 160) * u, eps);
    const double(*sg)[CS_SEG_N] = rep.views->seg_s;
    /* rank 0: MPI 60 - 30 waiting; NCCL 150 exposed, of which none waiting: its NCCL wait
     * [300,340) runs under its compute kernel [250,350), hidden (the step budget's waiting,
     * docs/metrics.md "Waiting on a GPU timeline"; it was min(40, 150) = 40) */
    CHECK_NEAR(sg[0][CS_SEG_COMPUTE], 100 * u, eps);
    CHECK_NEAR(sg[0][CS_SEG_COLL], (30 + 150) * u, eps);
    CHECK_NEAR(sg[0][CS_SEG_WAIT], 30 * u, eps);
    CHECK_NEAR(sg[0][CS_SEG_P2P], 0, 0);
    CHECK_NEAR(sg[0][CS_SEG_COMPLETION], 0, 0);
    /* rank 1: MPI 70 - 40 waiting, NCCL 160 without waiting */
    CHECK_NEAR(sg[1][CS_SEG_COMPUTE], 60 * u, eps);
    CHECK_NEAR(sg[1][CS_SEG_COLL], (30 + 160) * u, eps);
    CHECK_NEAR(sg[1][CS_SEG_WAIT], 40 * u, eps);
    /* bars per rank: the same numbers */
    CHECK_INT(rep.views->nbars, ==, 2);
    CHECK_NEAR(rep.views->bars[0].seg_s[CS_SEG_COLL], 180 * u, eps);
    CHECK_NEAR(rep.views->bars[1].seg_s[CS_SEG_WAIT], 40 * u, eps);
    /* the verdict's communication share: (260 + 230) of 2000 us, waiting (30 + 40) of 490 */
    int share = 0;
    for (size_t i = 0; i < rep.views->nfindings; i++) {
        const struct cs_report_finding *f = &rep.views->findings[i];
        if (f->kind != CS_FIND_COMM_SHARE)
            continue;
        share++;
        CHECK_NEAR(f->v[0], 100.0 * 490 / 2000, 1e-9);
        CHECK_NEAR(f->v[1], 100.0 * 260 / 1000, 1e-9);
        CHECK_NEAR(f->v[2], 100.0 * 70 / 490, 1e-9);
    }
    CHECK_INT(share, ==, 1);
    cs__report_free(&rep);
    cs__run_free(&run);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return cs_test_result();
}
