/*
 * The GPU timeline on scripted kernel timelines (traces written by tw.c, times exactly known):
 * union of communication kernels, the part overlapped by compute kernels, exposed communication,
 * overlap ratio per GPU, rank and communicator; NCCL collective instances from GPU start times
 * (waits, stragglers, transfer, bus bandwidth); records delivered out of start order.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs_test.h"
#include "gpu.h"
#include "internal.h"
#include "tw.h"
#include "views.h"

#define US 1000ull           /* ns per microsecond */
#define T0 (1000000ull * US) /* the timelines start one second into the clock */

static void host_nccl(struct tw *w, uint64_t t, uint32_t seq, uint64_t launch)
{
    tw_host_allreduce(w, 0, CS_COMM_WORLD_ID, T0 + t * US, T0 + t * US + 2 * US, seq, launch);
}

static struct cs_event gpu(uint16_t op, uint64_t b, uint64_t e, int dev, uint32_t seq,
                           uint64_t launch)
{
    return (struct cs_event){.t_begin = T0 + b * US,
                             .t_end = T0 + e * US,
                             .comm = op == CS_OP_GPU_NCCL ? CS_COMM_WORLD_ID : 0,
                             .bytes_recv = op == CS_OP_GPU_NCCL ? 1 : 0,
                             .request = launch,
                             .seq = op == CS_OP_GPU_NCCL ? seq : 7,
                             .peer = -1,
                             .op = op,
                             .aux = dev};
}

static struct tw *rank_writer(int rank)
{
    return tw_new_gpu_rank(rank, 2, 0x6b75, 50 + (uint64_t)rank, T0, T0 + 1000 * US);
}

/*
 * Rank 0, GPU 0 (microseconds after T0):
 *   compute  [0,100) [150,300) [280,320) [450,460)        union 280
 *   NCCL     [50,200) seq 0, [400,500) seq 1              union 250
 *   overlap  [50,100) + [150,200) + [450,460) = 110, exposed 140, ratio 0.44
 *   GPU 1:   compute [0,1000): another device, overlaps nothing of GPU 0
 *   a memcpy [60,70) on GPU 0: neither compute nor communication
 * Rank 1, GPU 0: NCCL [80,200) seq 0, [420,500) seq 1, no compute: comm 200, exposed 200.
 * Instances: seq 0 arrivals 50 / 80 -> rank 0 waits 30, transfer 200 - 80 = 120;
 *            seq 1 arrivals 400 / 420 -> rank 0 waits 20, transfer 500 - 420 = 80.
 * Rank 0's GPU records are written in a scrambled order on their own thread.
 */
static void write_run(const char *dir)
{
    struct tw *w0 = rank_writer(0), *w1 = rank_writer(1);
    host_nccl(w0, 10, 0, 1);
    host_nccl(w0, 300, 1, 2);
    host_nccl(w1, 10, 0, 1);
    host_nccl(w1, 300, 1, 2);
    struct cs_event g0[] = {
        gpu(CS_OP_GPU_KERNEL, 150, 300, 0, 0, 0), gpu(CS_OP_GPU_NCCL, 50, 200, 0, 0, 1),
        gpu(CS_OP_GPU_KERNEL, 0, 100, 0, 0, 0),   gpu(CS_OP_GPU_MEMCPY, 60, 70, 0, 0, 0),
        gpu(CS_OP_GPU_KERNEL, 280, 320, 0, 0, 0), gpu(CS_OP_GPU_KERNEL, 0, 1000, 1, 0, 0),
        gpu(CS_OP_GPU_NCCL, 400, 500, 0, 1, 2),   gpu(CS_OP_GPU_KERNEL, 450, 460, 0, 0, 0),
    };
    for (size_t i = 0; i < sizeof g0 / sizeof g0[0]; i++)
        tw_event(w0, 1, &g0[i]);
    struct cs_event g1[] = {gpu(CS_OP_GPU_NCCL, 80, 200, 0, 0, 1),
                            gpu(CS_OP_GPU_NCCL, 420, 500, 0, 1, 2)};
    for (size_t i = 0; i < 2; i++)
        tw_event(w1, 1, &g1[i]);
    char p[600];
    snprintf(p, sizeof p, "%s/rank-00000.cst", dir);
    CHECK(tw_write(w0, p, NULL) > 0);
    snprintf(p, sizeof p, "%s/rank-00001.cst", dir);
    CHECK(tw_write(w1, p, NULL) > 0);
    tw_free(w0);
    tw_free(w1);
}

static void test_overlap(const char *root)
{
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/overlap", root);
    mkdir(dir, 0700);
    write_run(dir);
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    const double u = 1e-6, eps = 1e-12;
    CHECK_INT(rep.nranks, ==, 2);
    const struct cs_report_rank *r0 = &rep.ranks[0], *r1 = &rep.ranks[1];
    CHECK_NEAR(r0->gpu_comm_s, 250 * u, eps);
    CHECK_NEAR(r0->gpu_overlapped_s, 110 * u, eps);
    CHECK_NEAR(r0->exposed_comm_s, 140 * u, eps);
    CHECK_NEAR(r0->overlap_ratio, 0.44, 1e-12);
    CHECK_NEAR(r0->compute_s, (280 + 1000) * u, eps); /* both GPUs */
    CHECK_NEAR(r1->gpu_comm_s, 200 * u, eps);
    CHECK_NEAR(r1->exposed_comm_s, 200 * u, eps);
    CHECK_NEAR(r1->overlap_ratio, 0, 0);
    CHECK_NEAR(r1->compute_s, 0, 0);
    /* waits and stragglers from GPU arrivals */
    CHECK_NEAR(r0->wait_s, 50 * u, eps);
    CHECK_NEAR(r1->wait_s, 0, 0);
    CHECK_INT(rep.matched, ==, 2);
    CHECK_INT(rep.incomplete, ==, 0);
    CHECK_NEAR(rep.max_skew_s, 30 * u, eps);
    CHECK_INT(rep.nstragglers, ==, 1);
    if (rep.nstragglers) {
        CHECK_INT(rep.stragglers[0].rank, ==, 1);
        CHECK_INT(rep.stragglers[0].late_arrivals, ==, 2);
        CHECK_NEAR(rep.stragglers[0].others_waited_s, 50 * u, eps);
    }
    /* ncclAllReduce: kernel time on GPU, busbw = 2 x 1000 B / (120 + 80) us x 2(n-1)/n */
    int found = 0;
    for (size_t i = 0; i < rep.nops; i++) {
        const struct cs_report_op *o = &rep.ops[i];
        if (strcmp(o->op, "ncclAllReduce"))
            continue;
        found = 1;
        CHECK_INT(o->calls, ==, 4);
        CHECK_INT(o->bytes, ==, 4000);
        CHECK_NEAR(o->time_s, (150 + 100 + 120 + 80) * u, eps);
        CHECK_NEAR(o->algbw_gbps, 2000.0 / 200000.0, 1e-15);
        CHECK_NEAR(o->busbw_gbps, 2000.0 / 200000.0, 1e-15);
    }
    CHECK(found);
    /* per GPU and per communicator */
    CHECK(rep.gpu != NULL);
    if (rep.gpu) {
        CHECK_INT(rep.gpu->ndevs, ==, 3);
        for (size_t i = 0; i < rep.gpu->ndevs; i++) {
            const struct cs_report_gpu_dev *d = &rep.gpu->devs[i];
            if (d->rank == 0 && d->device == 0) {
                CHECK_NEAR(d->comm_s, 250 * u, eps);
                CHECK_NEAR(d->overlapped_s, 110 * u, eps);
                CHECK_NEAR(d->compute_s, 280 * u, eps);
                CHECK_INT(d->kernels, ==, 4);
                CHECK_INT(d->comm_kernels, ==, 2);
            } else if (d->rank == 0) {
                CHECK_INT(d->device, ==, 1);
                CHECK_NEAR(d->compute_s, 1000 * u, eps);
                CHECK_NEAR(d->comm_s, 0, 0);
                CHECK(isnan(d->overlap_ratio));
            } else {
                CHECK_NEAR(d->comm_s, 200 * u, eps);
            }
        }
        CHECK_INT(rep.gpu->ncomms, ==, 1);
        if (rep.gpu->ncomms) {
            CHECK_STR(rep.gpu->comms[0].comm, "world");
            CHECK_NEAR(rep.gpu->comms[0].comm_s, 450 * u, eps);
            CHECK_NEAR(rep.gpu->comms[0].overlapped_s, 110 * u, eps);
            CHECK_NEAR(rep.gpu->comms[0].overlap_ratio, 110.0 / 450.0, 1e-12);
        }
        CHECK_NEAR(rep.gpu->exposed_s, 340 * u, eps);
        CHECK_INT(rep.gpu->nccl_instances, ==, 4);
        CHECK_INT(rep.gpu->unmatched_launch, ==, 0);
        CHECK_INT(rep.gpu->late_records, ==, 0);
    }
    /* the report views from the GPU timeline: segments and verdict sentences */
    CHECK(rep.views != NULL);
    if (rep.views) {
        const double(*sg)[CS_SEG_N] = rep.views->seg_s;
        CHECK_NEAR(sg[0][CS_SEG_COMPUTE], 1280 * u, eps);
        /* Waiting as the step budget places it (docs/metrics.md, "Waiting on a GPU
         * timeline"): the rank's GPUs taken together, and GPU 1 computes throughout, so none of
         * rank 0's waits ([50,80), [400,420)) is exposed: waiting 0 (it was min(50, 140) = 50),
         * and all of the exposed 140 is collective. */
        CHECK_NEAR(sg[0][CS_SEG_COLL], 140 * u, eps);
        CHECK_NEAR(sg[0][CS_SEG_WAIT], 0, 0);
        CHECK_NEAR(sg[0][CS_SEG_P2P], 0, 0);
        CHECK_NEAR(sg[0][CS_SEG_COMPLETION], 0, 0);
        CHECK_NEAR(sg[1][CS_SEG_COMPUTE], 0, 0);
        CHECK_NEAR(sg[1][CS_SEG_COLL], 200 * u, eps);
        CHECK_NEAR(sg[1][CS_SEG_WAIT], 0, 0);
        int gpu_sentence = 0, share_sentence = 0;
        for (size_t i = 0; i < rep.views->nfindings; i++) {
            char sb[512];
            const struct cs_report_finding *fd = &rep.views->findings[i];
            cs__finding_sentence(fd, sb, sizeof sb);
            if (fd->kind == CS_FIND_GPU_COMM) {
                gpu_sentence++;
                /* 450 us of GPU communication, 110 us overlapped, 340 us exposed */
                CHECK_STR(sb, "NCCL communication takes 0.000450 s on the GPU, 24.4 % of it "
                              "hidden behind compute kernels; 0.000340 s of it is exposed.");
            } else if (fd->kind == CS_FIND_COMM_SHARE) {
                share_sentence++;
                /* no exposed waiting (above) of 450 us GPU communication */
                CHECK_CONTAINS(sb, "; 0.0 % of the communication time is waiting");
                CHECK_NEAR(fd->v[2], 0, 0);
            }
        }
        CHECK_INT(gpu_sentence, ==, 1);
        CHECK_INT(share_sentence, ==, 1);
    }
    /* the JSON keys */
    char *buf = tw_report_json(&rep);
    CHECK(buf != NULL);
    if (buf) {
        CHECK_CONTAINS(buf, "\"overlap_ratio\": 0.44,");
        CHECK_CONTAINS(buf, "\"exposed_comm_s\": 0.00014,");
        CHECK_CONTAINS(buf, "\"gpu\": {");
        free(buf);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

/* Two NCCL kernels of communicators a and b on one GPU against one compute kernel: each
 * communicator's own union and overlap; their common part counts once in the GPU's union. */
static void test_two_comms(const char *root)
{
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/twocomms", root);
    mkdir(dir, 0700);
    struct tw *w = tw_new(0, 1, 0x77, 9);
    struct cs_file_header *h = tw_header(w);
    h->t_init = T0;
    h->t_finalize = T0 + 1000 * US;
    h->gpu_timing = CS_GPU_CUPTI;
    const uint64_t A = (1ull << 32) | 1, B = (1ull << 32) | 2;
    int32_t m0 = 0;
    tw_comm(w, A, CS_OP_NCCL_COMM_INIT_RANK, 1, 0, &m0);
    tw_comm(w, B, CS_OP_NCCL_COMM_INIT_RANK, 1, 0, &m0);
    /* a: [0,100), b: [50,150), compute [80,120): GPU comm union 150, overlap 40;
     * a overlapped [80,100) = 20, b overlapped [80,120) = 40. */
    struct cs_event e[] = {gpu(CS_OP_GPU_NCCL, 0, 100, 0, 0, 0),
                           gpu(CS_OP_GPU_NCCL, 50, 150, 0, 0, 0),
                           gpu(CS_OP_GPU_KERNEL, 80, 120, 0, 0, 0)};
    e[0].comm = A;
    e[1].comm = B;
    for (int i = 0; i < 3; i++)
        tw_event(w, 0, &e[i]);
    char p[600];
    snprintf(p, sizeof p, "%s/rank-00000.cst", dir);
    CHECK(tw_write(w, p, NULL) > 0);
    tw_free(w);
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    const double u = 1e-6, eps = 1e-12;
    CHECK_NEAR(rep.ranks[0].gpu_comm_s, 150 * u, eps);
    CHECK_NEAR(rep.ranks[0].gpu_overlapped_s, 40 * u, eps);
    CHECK(rep.gpu && rep.gpu->ncomms == 2);
    if (rep.gpu && rep.gpu->ncomms == 2) {
        CHECK_NEAR(rep.gpu->comms[0].comm_s, 100 * u, eps);
        CHECK_NEAR(rep.gpu->comms[0].overlapped_s, 20 * u, eps);
        CHECK_NEAR(rep.gpu->comms[1].comm_s, 100 * u, eps);
        CHECK_NEAR(rep.gpu->comms[1].overlapped_s, 40 * u, eps);
        /* kernels without their launching call are counted, not matched */
        CHECK_INT(rep.gpu->unmatched_launch, ==, 2);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

/*
 * An NCCL job of three ranks whose rank 2 left no trace: its communicator's records name only
 * ranks 0 and 1 (member 2 unknown, -1).  The collectives on it can never complete: they are
 * counted incomplete, the report says which communicator lacks a member, and nothing indexes the
 * ranks by the unknown member (the groups' same-host test, the instances' dead members, the
 * steps' class probe did before).
 */
static void test_missing_member(const char *root)
{
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/missing", root);
    mkdir(dir, 0700);
    const uint64_t X = (1ull << 63) | 0x1234;
    for (int r = 0; r < 2; r++) {
        struct tw *w = tw_new_gpu_rank(r, 3, 0x6b76, 70 + (uint64_t)r, T0, T0 + 1000 * US);
        tw_comm_nccl(w, X, 3, r, r, r, "");
        for (uint32_t k = 0; k < 3; k++) {
            tw_host_allreduce(w, 0, X, T0 + (10 + 300 * k) * US, T0 + (12 + 300 * k) * US, k,
                              k + 1);
            struct cs_event g =
                gpu(CS_OP_GPU_NCCL, 50 + 300 * k + 10 * (uint64_t)r, 200 + 300 * k, r, k, k + 1);
            g.comm = X;
            tw_event(w, 1, &g);
        }
        CHECK(tw_write_rank(w, dir, r) > 0);
    }
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    CHECK_INT(rep.matched, ==, 0);
    CHECK_INT(rep.incomplete, ==, 3);
    int said = 0;
    for (size_t i = 0; i < rep.nproblems; i++)
        said |= strstr(rep.problems[i], "1 of its 3 members left no record") != NULL;
    CHECK(said);
    cs__report_free(&rep);
    cs__run_free(&run);
}

int main(void)
{
    char root[] = "/tmp/cs-test-gpu-XXXXXX";
    if (tw_tmpdir(root) != 0)
        return 1;
    test_overlap(root);
    test_two_comms(root);
    test_missing_member(root);
    tw_rmtree(root);
    return cs_test_result();
}
