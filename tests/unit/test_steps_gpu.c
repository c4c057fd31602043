/*
 * The per-step budget, gradient synchronisation and overlap of ranks with a GPU timeline, on a
 * scripted kernel timeline (traces written by tw.c, every time known): compute from compute
 * kernels, exposed gradient sync and other data-parallel communication from NCCL kernels not
 * hidden by compute, waiting from GPU arrivals, idle where the GPU ran nothing; a kernel crossing
 * a step boundary split between the steps; GPU records delivered out of order.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs_test.h"
#include "gpu.h"
#include "internal.h"
#include "steps.h"
#include "tw.h"

#define US 1000ull
#define T0 (1000000ull * US)
#define STEPS 4

static struct cs_event ev_at(uint16_t op, uint64_t b, uint64_t e)
{
    return (struct cs_event){.t_begin = T0 + b * US, .t_end = T0 + e * US, .peer = -1, .op = op};
}

/* The host's NCCL call of launch `launch` (collective `seq` on the world communicator). */
static void host_call(struct tw *w, uint16_t op, uint64_t t, uint32_t seq, uint64_t launch,
                      int root)
{
    struct cs_event e = ev_at(op, t, t + 2);
    e.comm = CS_COMM_WORLD_ID;
    e.bytes = e.bytes_recv = 4096;
    e.request = launch;
    e.seq = seq;
    e.aux = 7;
    e.flags = root ? CS_EV_ROOT : 0;
    tw_event(w, 0, &e);
}

static struct cs_event kernel(uint64_t b, uint64_t e)
{
    struct cs_event k = ev_at(CS_OP_GPU_KERNEL, b, e);
    k.seq = 7;
    return k;
}

static struct cs_event nccl_kernel(uint64_t b, uint64_t e, uint32_t seq, uint64_t launch)
{
    struct cs_event k = ev_at(CS_OP_GPU_NCCL, b, e);
    k.comm = CS_COMM_WORLD_ID;
    k.seq = seq;
    k.request = launch;
    k.bytes_recv = 1;
    return k;
}

/*
 * Two ranks, steps marked by MPI_Pcontrol(1) at 0, 1000, 2000, 3000 us and closed by
 * MPI_Pcontrol(0) at 4000 us.  In step k (times relative to 1000 k):
 *   rank 0: compute [100,400) [350,500), and [950,1050) across the boundary into step k+1;
 *           ncclAllReduce kernel [450,700) (overlapped [450,500), exposed 200); it waits for
 *           rank 1's arrival at 600 over [450,600), of which [500,600) is exposed: waiting 100
 *           (the part under the compute kernel is hidden, not waiting);
 *           ncclBroadcast kernel [800,850) (root).
 *   rank 1: compute [0,600); ncclAllReduce kernel [600,700); ncclBroadcast kernel [800,850).
 *   both:   a second ncclAllReduce kernel [700,720) (both arrive at 700: no wait).
 * Per step from step 1 on, rank 0: compute 400 + 100 (the crossing kernel's two halves),
 * gradient sync 220 - 100 = 120, other DP (broadcast) 50, waiting 100, idle 230 = 1000;
 * rank 1: compute 600, gradient sync 120, other DP 50, waiting 0, idle 230 = 1000.
 */
static void write_run(const char *dir)
{
    for (int r = 0; r < 2; r++) {
        struct tw *w = tw_new_gpu_rank(r, 2, 0x5157, 70 + (uint64_t)r, T0, T0 + 5000 * US);
        struct cs_event g[STEPS * 8];
        size_t ng = 0;
        for (uint64_t k = 0; k <= STEPS; k++) {
            uint64_t o = 1000 * k;
            struct cs_event m = ev_at(CS_OP_PCONTROL, o, o);
            m.aux = k < STEPS ? 1 : 0;
            tw_event(w, 0, &m);
            if (k == STEPS)
                break;
            uint32_t q = (uint32_t)(3 * k);
            host_call(w, CS_OP_NCCL_ALLREDUCE, o + 10, q, q + 1, 0);
            host_call(w, CS_OP_NCCL_ALLREDUCE, o + 15, q + 1, q + 2, 0);
            host_call(w, CS_OP_NCCL_BROADCAST, o + 20, q + 2, q + 3, r == 0);
            if (r == 0) {
                g[ng++] = kernel(o + 100, o + 400);
                g[ng++] = kernel(o + 350, o + 500);
                g[ng++] = kernel(o + 950, o + 1050);
                g[ng++] = nccl_kernel(o + 450, o + 700, q, q + 1);
            } else {
                g[ng++] = kernel(o, o + 600);
                g[ng++] = nccl_kernel(o + 600, o + 700, q, q + 1);
            }
            g[ng++] = nccl_kernel(o + 700, o + 720, q + 1, q + 2);
            g[ng++] = nccl_kernel(o + 800, o + 850, q + 2, q + 3);
        }
        /* GPU records come in CUPTI buffers, not in start order: write them reversed in pairs. */
        for (size_t i = 0; i + 1 < ng; i += 2) {
            tw_event(w, 1, &g[i + 1]);
            tw_event(w, 1, &g[i]);
        }
        if (ng % 2)
            tw_event(w, 1, &g[ng - 1]);
        CHECK(tw_write_rank(w, dir, r) > 0);
    }
}

/* Lane `lane` of the row holds exactly the pieces want[n][3] = {t0 us, t1 us, kind}. */
static void check_lane(const struct cs_report_tl_row *r, int lane, const double (*want)[3],
                       size_t n)
{
    size_t got = 0;
    for (size_t i = 0; i < r->ngseg; i++) {
        const struct cs_report_tl_gseg *g = &r->gseg[i];
        if (g->lane != lane)
            continue;
        if (got < n) {
            CHECK_NEAR(g->t0_s - r->begin_s, want[got][0] * 1e-6, 1e-12);
            CHECK_NEAR(g->t1_s - r->begin_s, want[got][1] * 1e-6, 1e-12);
            CHECK_INT(g->kind, ==, (int)want[got][2]);
        }
        got++;
    }
    CHECK_INT(got, ==, n);
}

/*
 * The representative step's timeline with the GPU lanes (views_steps_gpu.c): in every step from
 * step 1 on (the median timed one is drawn), rank 0's compute lane is [0,50) (the crossing kernel's
 * second half), [100,500) and [950,1000); its world lane [450,500) overlapped, [500,720) exposed
 * (two kernels back to back), [800,850) exposed; rank 1 computes [0,600) and its world lane is
 * exposed [600,720), [800,850).  The row numbers are those of the step budget above: rank 0
 * compute 500, NCCL 320, overlapped 50, exposed 270, idle 230; rank 1 600, 170, 0, 170, 230 --
 * and, the timed steps being alike, equal to the budget's per-rank means.
 */
static void check_timeline(const char *root)
{
    struct cs__run run;
    struct cs_report rep;
    char err[512];
    struct cs__analyze_opts o = {.timeline = 1};
    CHECK_INT(cs__analyze_dir_opts(root, &run, &rep, err, sizeof err, &o), ==, 0);
    const struct cs_report_timeline *tl = rep.views ? rep.views->timeline : NULL;
    CHECK(tl != NULL);
    if (tl && rep.steps && rep.steps->nranks == 2) {
        const double u = 1e-6, eps = 1e-12;
        CHECK(tl->step >= 1 && tl->step < STEPS);
        CHECK_INT(tl->nrows, ==, 2);
        CHECK_INT(tl->gpu_rows, ==, 2);
        static const double c0[][3] = {
            {0, 50, CS_TL_G_COMPUTE}, {100, 500, CS_TL_G_COMPUTE}, {950, 1000, CS_TL_G_COMPUTE}};
        static const double w0[][3] = {{450, 500, CS_TL_G_OVERLAPPED},
                                       {500, 720, CS_TL_G_EXPOSED},
                                       {800, 850, CS_TL_G_EXPOSED}};
        static const double c1[][3] = {{0, 600, CS_TL_G_COMPUTE}};
        static const double w1[][3] = {{600, 720, CS_TL_G_EXPOSED}, {800, 850, CS_TL_G_EXPOSED}};
        const double want[2][5] = {{500, 320, 50, 270, 230}, {600, 170, 0, 170, 230}};
        for (size_t i = 0; i < tl->nrows && i < 2; i++) {
            const struct cs_report_tl_row *r = &tl->rows[i];
            CHECK_INT(r->rank, ==, (int)i);
            CHECK(r->gpu);
            CHECK_NEAR(r->end_s - r->begin_s, 1000 * u, eps);
            CHECK_INT(r->nlanes, ==, 1);
            if (r->nlanes)
                CHECK_STR(r->lane_comm[0], "world");
            check_lane(r, 0, i ? c1 : c0, i ? 1 : 3);
            check_lane(r, 1, i ? w1 : w0, i ? 2 : 3);
            CHECK_NEAR(r->gpu_compute_s, want[i][0] * u, eps);
            CHECK_NEAR(r->gpu_comm_s, want[i][1] * u, eps);
            CHECK_NEAR(r->gpu_overlapped_s, want[i][2] * u, eps);
            CHECK_NEAR(r->gpu_exposed_s, want[i][3] * u, eps);
            CHECK_NEAR(r->gpu_idle_s, want[i][4] * u, eps);
            /* the step budget's numbers for the same rank */
            const struct cs_report_budget *b = &rep.steps->ranks[i];
            double exposed = b->grad_sync_s + b->wait_s;
            for (int d = 0; d < CS_DIM_N; d++)
                exposed += b->comm_s[d];
            CHECK_NEAR(r->gpu_compute_s, b->compute_s, eps);
            CHECK_NEAR(r->gpu_exposed_s, exposed, eps);
            CHECK_NEAR(r->gpu_idle_s, b->idle_s, eps);
        }
        /* the step's overlap ratio (all ranks): overlapped over NCCL kernel time of the rows */
        double n = tl->rows[0].gpu_comm_s + tl->rows[1].gpu_comm_s;
        double ov = tl->rows[0].gpu_overlapped_s + tl->rows[1].gpu_overlapped_s;
        CHECK_NEAR(ov / n, rep.steps->list[tl->step].overlap_ratio, 1e-12);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

/*
 * One rank, steps [0,1000) and [1000,2000) (MPI_Pcontrol), alike, the median timed one drawn.  In
 * each step: compute [0,300); NCCL kernels of seven communicators, communicator j at
 * [100 + 100 j, 150 + 100 j).  Lanes: the first five communicators get one each, the sixth and
 * seventh share the last, named "other"; the kernels of communicators 0 and 1 are overlapped,
 * the rest exposed.  Numbers: compute 300, NCCL 350, overlapped 100, exposed 250, idle 450 --
 * the budget's (the communicators are unknown to the group analysis: dimension "other").
 */
static void check_lanes_many(const char *root)
{
    char dir[600], p[700], err[512];
    snprintf(dir, sizeof dir, "%s/lanes", root);
    CHECK(mkdir(dir, 0700) == 0);
    struct tw *w = tw_new_gpu_rank(0, 1, 0x1a9e, 90, T0, T0 + 2000 * US);
    for (uint64_t k = 0; k <= 2; k++) {
        struct cs_event m = ev_at(CS_OP_PCONTROL, 1000 * k, 1000 * k);
        m.aux = k < 2 ? 1 : 0;
        tw_event(w, 0, &m);
    }
    for (uint64_t k = 0; k < 2; k++) {
        uint64_t o = 1000 * k;
        struct cs_event c = kernel(o, o + 300);
        tw_event(w, 1, &c);
        for (uint64_t j = 0; j < 7; j++) {
            struct cs_event n = nccl_kernel(o + 100 + 100 * j, o + 150 + 100 * j, 0, 0);
            n.comm = 0x7e00 + j;
            tw_event(w, 1, &n);
        }
    }
    snprintf(p, sizeof p, "%s/rank-00000.cst", dir);
    CHECK(tw_write(w, p, NULL) > 0);
    tw_free(w);
    struct cs__run run;
    struct cs_report rep;
    struct cs__analyze_opts o = {.timeline = 1};
    CHECK_INT(cs__analyze_dir_opts(dir, &run, &rep, err, sizeof err, &o), ==, 0);
    const struct cs_report_timeline *tl = rep.views ? rep.views->timeline : NULL;
    CHECK(tl != NULL && tl->nrows == 1);
    if (tl && tl->nrows == 1 && rep.steps && rep.steps->nranks == 1) {
        const double u = 1e-6, eps = 1e-12;
        const struct cs_report_tl_row *r = &tl->rows[0];
        CHECK(tl->step == 0 || tl->step == 1); /* the two steps are alike */
        CHECK_INT(r->nlanes, ==, CS_VIEW_TL_LANES);
        for (size_t i = 0; i + 1 < r->nlanes && i < CS_VIEW_TL_LANES; i++) {
            char want[40];
            cs__comm_label(0x7e00 + i, want, sizeof want);
            CHECK_STR(r->lane_comm[i], want);
        }
        if (r->nlanes == CS_VIEW_TL_LANES)
            CHECK_STR(r->lane_comm[CS_VIEW_TL_LANES - 1], "other");
        static const double c[][3] = {{0, 300, CS_TL_G_COMPUTE}};
        check_lane(r, 0, c, 1);
        for (int j = 0; j < 5; j++) {
            const double one[][3] = {
                {100 + 100.0 * j, 150 + 100.0 * j, j < 2 ? CS_TL_G_OVERLAPPED : CS_TL_G_EXPOSED}};
            check_lane(r, 1 + j, one, 1);
        }
        static const double other[][3] = {{600, 650, CS_TL_G_EXPOSED}, {700, 750, CS_TL_G_EXPOSED}};
        check_lane(r, CS_VIEW_TL_LANES, other, 2);
        CHECK_NEAR(r->gpu_compute_s, 300 * u, eps);
        CHECK_NEAR(r->gpu_comm_s, 350 * u, eps);
        CHECK_NEAR(r->gpu_overlapped_s, 100 * u, eps);
        CHECK_NEAR(r->gpu_exposed_s, 250 * u, eps);
        CHECK_NEAR(r->gpu_idle_s, 450 * u, eps);
        const struct cs_report_budget *b = &rep.steps->ranks[0];
        double exposed = b->grad_sync_s + b->wait_s;
        for (int d = 0; d < CS_DIM_N; d++)
            exposed += b->comm_s[d];
        CHECK_NEAR(b->compute_s, r->gpu_compute_s, eps);
        CHECK_NEAR(exposed, r->gpu_exposed_s, eps);
        CHECK_NEAR(b->idle_s, r->gpu_idle_s, eps);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

int main(int argc, char **argv)
{
    /* `test_steps_gpu --write DIR`: only write the scripted run (tests/report/test_gpu_timeline.py
     * draws its HTML report). */
    if (argc == 3 && strcmp(argv[1], "--write") == 0) {
        write_run(argv[2]);
        return cs_test_result();
    }
    char root[] = "/tmp/cs-test-stepsgpu-XXXXXX";
    if (tw_tmpdir(root) != 0)
        return 1;
    write_run(root);
    struct cs__run run;
    struct cs_report rep;
    char err[512];
    CHECK_INT(cs__analyze_dir(root, &run, &rep, err, sizeof err, NULL), ==, 0);
    const double u = 1e-6, eps = 1e-12;
    const struct cs_report_steps *s = rep.steps;
    CHECK(s != NULL);
    if (s) {
        CHECK_STR(s->source, "marker");
        CHECK_INT(s->count, ==, STEPS);
        CHECK_INT(s->warmup_excluded, ==, 1);
        CHECK_INT(s->tail_excluded, ==, 0);
        CHECK_INT(s->timed, ==, STEPS - 1);
        CHECK_NEAR(s->mean_s, 1000 * u, eps);
        /* the world communicator does one all-reduce per step: data parallel */
        CHECK_INT(s->ngroups, ==, 1);
        if (s->ngroups)
            CHECK_INT(s->groups[0].role, ==, CS_DIM_DP);
        const struct cs_report_budget *t = &s->total;
        CHECK_NEAR(t->steps, 2.0 * (STEPS - 1), 0);
        CHECK_NEAR(t->step_s, 1000 * u, eps);
        CHECK_NEAR(t->compute_s, (500 + 600) / 2.0 * u, eps);
        CHECK_NEAR(t->grad_sync_s, (120 + 120) / 2.0 * u, eps);
        CHECK_NEAR(t->comm_s[CS_DIM_DP], 50 * u, eps);
        CHECK_NEAR(t->comm_s[CS_DIM_TP], 0, 0);
        CHECK_NEAR(t->comm_s[CS_DIM_OTHER], 0, 0);
        CHECK_NEAR(t->wait_s, 100 / 2.0 * u, eps);
        CHECK_NEAR(t->other_mpi_s, 0, 0);
        CHECK_NEAR(t->idle_s, 230 * u, eps);
        CHECK_INT(s->nranks, ==, 2);
        if (s->nranks == 2) {
            const struct cs_report_budget *a = &s->ranks[0], *b = &s->ranks[1];
            CHECK_NEAR(a->compute_s, 500 * u, eps);
            CHECK_NEAR(a->grad_sync_s, 120 * u, eps);
            CHECK_NEAR(a->comm_s[CS_DIM_DP], 50 * u, eps);
            CHECK_NEAR(a->wait_s, 100 * u, eps);
            CHECK_NEAR(a->idle_s, 230 * u, eps);
            CHECK_NEAR(b->compute_s, 600 * u, eps);
            CHECK_NEAR(b->grad_sync_s, 120 * u, eps);
            CHECK_NEAR(b->comm_s[CS_DIM_DP], 50 * u, eps);
            CHECK_NEAR(b->wait_s, 0, 0);
            CHECK_NEAR(b->idle_s, 230 * u, eps);
            for (int i = 0; i < 2; i++) {
                const struct cs_report_budget *x = &s->ranks[i];
                double sum = x->compute_s + x->grad_sync_s + x->wait_s + x->idle_s;
                for (int d = 0; d < CS_DIM_N; d++)
                    sum += x->comm_s[d];
                CHECK_NEAR(sum, x->step_s, eps);
            }
        }
        /* per step: NCCL kernel time under compute / all NCCL kernel time; gradient sync
         * (exposed all-reduce kernels, waiting included) / step time */
        CHECK_INT(s->nlist, ==, STEPS);
        for (size_t k = 1; k < s->nlist; k++) {
            CHECK_NEAR(s->list[k].overlap_ratio, 50.0 / 490.0, 1e-12);
            CHECK_NEAR(s->list[k].grad_sync_share, 340.0 / 2000.0, 1e-12);
        }
        /* step 0 has no crossing kernel from before it: rank 0 computes 50 us less */
        CHECK_NEAR(s->list[0].overlap_ratio, 50.0 / 490.0, 1e-12);
        CHECK_NEAR(s->grad_share, 0.17, 1e-12);
        CHECK_NEAR(s->grad_exposed_s, 170 * u, eps);
        CHECK_NEAR(s->grad_wait_s, 50 * u, eps);
        CHECK_NEAR(s->grad_overlapped_s, 25 * u, eps);
        CHECK_NEAR(s->grad_total_s, 195 * u, eps);
        /* per communicator over the whole run, as the GPU timeline's communicator numbers */
        CHECK_INT(s->noverlap, ==, 1);
        if (s->noverlap) {
            CHECK_STR(s->overlap[0].comm, "world");
            CHECK_NEAR(s->overlap[0].in_flight_s, STEPS * 490 * u, eps);
            CHECK_NEAR(s->overlap[0].overlapped_s, STEPS * 50 * u, eps);
            CHECK_NEAR(s->overlap[0].ratio, 50.0 / 490.0, 1e-12);
            if (rep.gpu && rep.gpu->ncomms == 1)
                CHECK_NEAR(s->overlap[0].ratio, rep.gpu->comms[0].overlap_ratio, 1e-12);
            else
                CHECK(0);
        }
        CHECK_NEAR(s->overlap_ratio, 50.0 / 490.0, 1e-12);
        const struct cs_report_whatif *wi = &s->whatif;
        /* The what-if replay on the GPU timelines (docs/metrics.md, "What-if"): unchanged it
         * gives the measured step.  The scenarios change the timed steps 1 to 3, which both
         * ranks begin as measured; each NCCL lane runs its kernels in start order (the records
         * were written out of order).  Full overlap (NCCL kernels cost nothing after their
         * sync): rank 1's steps end 150 after its broadcast, which now ends at 680 of its step
         * (830), until it is held by rank 0's all-reduce arrival at 450 of rank 0's step (which
         * stays 1000 long: its last compute kernel is launched 450 after the one before): rank
         * 1's timed steps 830, 850, 1000, rank 0's 1000 -> mean 946.7.  Best bandwidth (the
         * first all-reduce's transfer at the best all-reduce of that size, 20 instead of 100):
         * rank 1 920, 920 (arriving 520 into rank 0's step, after rank 0's 450), 930 (arriving
         * at 440: it waits 10) -> 961.7.  No straggler (compute kernels x 575/550 and 575/600):
         * rank 0 1025 per step (its crossing kernel ends 25 later), rank 1 1000 -> 1012.5. */
        CHECK_NEAR(wi->measured_step_s, 1000 * u, eps);
        CHECK_NEAR(wi->replayed_step_s, 1000 * u, eps);
        CHECK_NEAR(wi->replay_error, 0, 1e-9);
        CHECK_NEAR(wi->full_overlap_step_s, 5680.0 / 6 * u, eps);
        CHECK_NEAR(wi->best_bandwidth_step_s, 5770.0 / 6 * u, eps);
        CHECK_NEAR(wi->no_straggler_step_s, 1012.5 * u, eps);
        CHECK_STR(wi->note, "replayed on the GPU timelines");
    }
    /* The breakdown and the verdict take waiting as the step budget places it: rank 0 waits
     * [450,600) of each step at the all-reduce, of which [450,500) is under a compute kernel, so
     * 100 per step, 400 over the run -- not min(waits at NCCL instances = 600, exposed NCCL
     * kernel time = 4 x 270 = 1080) = 600, the rank-level rule the views used before. */
    CHECK(rep.views != NULL && rep.nranks == 2);
    if (rep.views && rep.nranks == 2) {
        const double(*seg)[CS_SEG_N] = (const double(*)[CS_SEG_N])rep.views->seg_s;
        CHECK_NEAR(rep.ranks[0].wait_s, 4 * 150 * u, eps); /* at the instances, unchanged */
        CHECK_NEAR(seg[0][CS_SEG_WAIT], 4 * 100 * u, eps);
        CHECK_NEAR(seg[0][CS_SEG_COLL], 4 * 270 * u - 4 * 100 * u, eps);
        CHECK_NEAR(seg[0][CS_SEG_COLL] + seg[0][CS_SEG_WAIT], rep.ranks[0].exposed_comm_s, eps);
        CHECK_NEAR(seg[1][CS_SEG_WAIT], 0, 0);
        CHECK_NEAR(seg[1][CS_SEG_COLL], 4 * 170 * u, eps);
        /* the same as the budget: every step waits alike, step 0 included */
        if (s && s->nranks == 2)
            CHECK_NEAR(seg[0][CS_SEG_WAIT], STEPS * s->ranks[0].wait_s, eps);
        double comm = rep.ranks[0].comm_s + rep.ranks[1].comm_s;
        int found = 0;
        for (size_t i = 0; i < rep.views->nfindings; i++)
            if (rep.views->findings[i].kind == CS_FIND_COMM_SHARE) {
                found = 1;
                CHECK_NEAR(rep.views->findings[i].v[2], 100.0 * 400 * u / comm, 1e-9);
            }
        CHECK(found);
    }
    /* the JSON: idle known on GPU ranks */
    char *buf = tw_report_json(&rep);
    CHECK(buf != NULL);
    if (buf) {
        CHECK_CONTAINS(buf, "\"idle_s\": 0.00023");
        CHECK_CONTAINS(buf, "\"comm\": \"world\"");
        free(buf);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
    check_timeline(root);
    check_lanes_many(root);
    tw_rmtree(root);
    return cs_test_result();
}
