/*
 * The GPU what-if replay links the kernels of NCCL sends and receives (a three-rank pipeline on a
 * scripted GPU timeline): unchanged it reproduces the measured step; with communication fully
 * overlapped the receiver's kernel still waits for the sender's, so the chain 0 -> 1 -> 2 carries
 * the delay of rank 0's late send down the pipeline.  The analyzer's late-sender waits of the
 * same run are checked too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs_test.h"
#include "gpu.h"
#include "internal.h"
#include "nccl_p2p.h"
#include "steps.h"
#include "tw.h"

#define US 1000ull
#define T0 (1000000ull * US)
#define STEPS 3

static struct cs_event ev_at(uint16_t op, uint64_t b, uint64_t e)
{
    return (struct cs_event){.t_begin = T0 + b * US, .t_end = T0 + e * US, .peer = -1, .op = op};
}

static void call(struct tw *w, uint16_t op, uint64_t t, int peer, uint64_t launch)
{
    struct cs_event e = ev_at(op, t, t + 1);
    e.comm = CS_COMM_WORLD_ID;
    e.bytes = op == CS_OP_NCCL_SEND ? 8192 : 0;
    e.bytes_recv = op == CS_OP_NCCL_RECV ? 8192 : 0;
    e.request = launch;
    e.seq = (uint32_t)peer;
    e.aux = 7;
    tw_event(w, 0, &e);
}

static void gpu(struct tw *w, uint16_t op, uint64_t b, uint64_t e, uint64_t launch)
{
    struct cs_event k = ev_at(op, b, e);
    if (op == CS_OP_GPU_NCCL) {
        k.comm = CS_COMM_WORLD_ID;
        k.request = launch;
        k.bytes_recv = 1;
    } else {
        k.seq = 7; /* stream */
    }
    tw_event(w, 1, &k);
}

/*
 * Steps marked by MPI_Pcontrol(1) every 1000 us, closed by MPI_Pcontrol(0).  In each step
 * (times relative to its begin):
 *   rank 0: compute [0,300); ncclSend to 1, kernel [300,400)
 *   rank 1: ncclRecv from 0, kernel [100,400) (waits for the sender from 100 to 300);
 *           ncclSend to 2, kernel [450,550)
 *   rank 2: ncclRecv from 1, kernel [200,550) (waits from 200 to 450)
 * Full overlap (NCCL kernels cost nothing after their sync point) changes the timed steps 1 and 2
 * (step 0 is the warm-up), which every rank begins as measured: rank 0's send ends at 300, its
 * step 300 + 600 = 900.  In step 1 rank 1's receive ends when the send starts, 300, its send
 * starts 50 later at 350 and ends there, step 350 + 450 = 800; rank 2's receive ends at 350, step
 * 800.  In step 2 ranks 1 and 2 begin 100 before rank 0 and wait for its send: the receive ends
 * 300 after rank 0's step begin, i.e. every rank's step is 900.  Mean (2500 / 3 + 900) / 2 =
 * 866.7.  Without the link (kernels keeping their measured x after their own start)
 * rank 1's steps would be 600 and rank 2's 650: mean 716.7.
 * In the step budget the receivers' waits for the late sends are waiting: rank 1 200, rank 2 250.
 */
static void write_run(const char *dir)
{
    for (int r = 0; r < 3; r++) {
        struct tw *w = tw_new_gpu_rank(r, 3, 0x7077, 90 + (uint64_t)r, T0, T0 + 4000 * US);
        uint64_t launch = 1;
        for (uint64_t k = 0; k <= STEPS; k++) {
            uint64_t o = 1000 * k;
            struct cs_event m = ev_at(CS_OP_PCONTROL, o, o);
            m.aux = k < STEPS ? 1 : 0;
            tw_event(w, 0, &m);
            if (k == STEPS)
                break;
            if (r == 0) {
                call(w, CS_OP_NCCL_SEND, o + 10, 1, launch);
                gpu(w, CS_OP_GPU_KERNEL, o, o + 300, 0);
                gpu(w, CS_OP_GPU_NCCL, o + 300, o + 400, launch++);
            } else if (r == 1) {
                call(w, CS_OP_NCCL_RECV, o + 10, 0, launch);
                gpu(w, CS_OP_GPU_NCCL, o + 100, o + 400, launch++);
                call(w, CS_OP_NCCL_SEND, o + 20, 2, launch);
                gpu(w, CS_OP_GPU_NCCL, o + 450, o + 550, launch++);
            } else {
                call(w, CS_OP_NCCL_RECV, o + 10, 1, launch);
                gpu(w, CS_OP_GPU_NCCL, o + 200, o + 550, launch++);
            }
        }
        CHECK(tw_write_rank(w, dir, r) > 0);
    }
}

int main(void)
{
    char root[] = "/tmp/cs-test-wip2p-XXXXXX";
    if (tw_tmpdir(root) != 0)
        return 1;
    write_run(root);
    struct cs__run run;
    struct cs_report rep;
    char err[512];
    CHECK_INT(cs__analyze_dir(root, &run, &rep, err, sizeof err, NULL), ==, 0);
    const double u = 1e-6, eps = 1e-9;
    const struct cs_report_steps *s = rep.steps;
    CHECK(s != NULL);
    if (s) {
        CHECK_INT(s->count, ==, STEPS);
        const struct cs_report_whatif *wi = &s->whatif;
        CHECK_NEAR(wi->measured_step_s, 1000 * u, eps);
        CHECK_NEAR(wi->replayed_step_s, 1000 * u, eps);
        CHECK_NEAR(wi->replay_error, 0, 1e-9);
        CHECK_NEAR(wi->full_overlap_step_s, 2600.0 / 3 * u, eps);
        /* rank 0's compute goes to the median (0: the others compute nothing); its send keeps
         * its start, so nothing moves */
        CHECK_NEAR(wi->no_straggler_step_s, 1000 * u, eps);
        CHECK_NEAR(wi->best_bandwidth_step_s, 1000 * u, eps);
        CHECK_STR(wi->note, "replayed on the GPU timelines");
        /* The step budget: a late sender's receiver waits from its kernel's start to the send
         * kernel's, all exposed (nothing computes then): rank 1 [100,300), rank 2 [200,450);
         * the rest of their NCCL kernels is pipeline communication (world: send/receive). */
        CHECK_INT(s->nranks, ==, 3);
        static const double want_wait[3] = {0, 200, 250}, want_nccl[3] = {100, 400, 350};
        for (size_t i = 0; i < s->nranks && i < 3; i++) {
            const struct cs_report_budget *b = &s->ranks[i];
            double comm = 0;
            for (int d = 0; d < CS_DIM_N; d++)
                comm += b->comm_s[d];
            CHECK_INT(b->rank, ==, (int)i);
            CHECK_NEAR(b->wait_s, want_wait[i] * u, eps);
            CHECK_NEAR(b->p2p_wait_s, want_wait[i] * u, eps);
            CHECK_NEAR(comm + b->grad_sync_s + b->wait_s, want_nccl[i] * u, eps);
        }
        CHECK_NEAR(s->total.wait_s, (200 + 250) / 3.0 * u, eps);
        CHECK_NEAR(s->total.p2p_wait_s, (200 + 250) / 3.0 * u, eps);
    }
    const struct cs_report_np2p *o = rep.np2p;
    CHECK(o != NULL);
    if (o) {
        CHECK_INT(o->pairs_total, ==, 2 * STEPS);
        CHECK_INT(o->timed, ==, 2 * STEPS);
        CHECK_INT(o->late_sender, ==, 2 * STEPS);
        CHECK_NEAR(o->late_sender_wait_s, STEPS * (200 + 250) * u, 1e-12);
        CHECK_INT(o->late_receiver, ==, 0);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
    tw_rmtree(root);
    return cs_test_result();
}
