/*
 * The what-if scenarios change the timed steps only: a scenario that shortened the warm-up step
 * would let some ranks begin the first timed step early, only to wait at its first
 * synchronisation, and that wait would count as a longer step (mean over ranks of each rank's
 * time between its step boundaries).  On a scripted three-rank trace where the warm-up holds a
 * slow all-reduce of two ranks, shortening it in the warm-up made every scenario look slower than
 * the measured run (best bandwidth 1100 us and full overlap 1061 us against 1000 measured).
 */
#include "cs_test.h"
#include "internal.h"
#include "steps.h"
#include "tw.h"

#define US 1000ull
#define T0 (1000000ull * US)
#define STEPS 4
#define SUB ((1ull << 32) | 0) /* created by world rank 0: members {0, 1} */

static void coll(struct tw *w, uint64_t comm, uint32_t seq, uint64_t b, uint64_t e)
{
    struct cs_event ev = {.t_begin = T0 + b * US,
                          .t_end = T0 + e * US,
                          .comm = comm,
                          .bytes = 4096,
                          .bytes_recv = 4096,
                          .seq = seq,
                          .peer = -1,
                          .op = CS_OP_ALLREDUCE};
    tw_event(w, 0, &ev);
}

/*
 * Steps of 1000 us marked by MPI_Pcontrol(1) at 1000 k us, closed by MPI_Pcontrol(0) at 4000.
 *   step 0 (the warm-up, not timed): ranks 0 and 1 all-reduce on SUB [100,600) (transfer 500);
 *           rank 2 computes.
 *   steps 1-3: ranks 0 and 1 all-reduce on SUB [200,250) (transfer 50), compute to 300 and
 *           all-reduce on the world [300,850), waiting for rank 2, which computes [0,800) and
 *           all-reduces [800,850).
 * Every rank's compute per timed step: ranks 0 and 1 200 + 50 + 150 = 400, rank 2 800 + 150 =
 * 950.  The 100 after the end marker, before MPI_Finalize at 4100, is outside the steps: not
 * compute, not scaled (counted, it made rank 2's last step 1050 of compute against a median of
 * 500).
 */
static void write_run(const char *dir)
{
    int32_t world[3] = {0, 1, 2}, sub[2] = {0, 1};
    for (int r = 0; r < 3; r++) {
        struct tw *w = tw_new(r, 3, 0x7761, 30 + (uint64_t)r);
        struct cs_file_header *h = tw_header(w);
        h->t_init = T0;
        h->t_finalize = T0 + 4100 * US;
        tw_comm(w, CS_COMM_WORLD_ID, 0, 3, r, world);
        if (r < 2)
            tw_comm(w, SUB, CS_OP_COMM_SPLIT, 2, r, sub);
        tw_mpi_event(w, T0, CS_OP_INIT, 0, 0, -1, 0, 0);
        for (uint64_t k = 0; k <= STEPS; k++) {
            uint64_t o = 1000 * k;
            tw_mpi_event(w, T0, CS_OP_PCONTROL, o, o, -1, 0, k < STEPS ? 1 : 0);
            if (k == STEPS)
                break;
            if (k == 0) {
                if (r < 2)
                    coll(w, SUB, 0, o + 100, o + 600);
                continue;
            }
            if (r < 2) {
                coll(w, SUB, (uint32_t)k, o + 200, o + 250);
                coll(w, CS_COMM_WORLD_ID, (uint32_t)k - 1, o + 300, o + 850);
            } else {
                coll(w, CS_COMM_WORLD_ID, (uint32_t)k - 1, o + 800, o + 850);
            }
        }
        tw_mpi_event(w, T0, CS_OP_FINALIZE, 4100, 4100, -1, 0, 0);
        CHECK(tw_write_rank(w, dir, r) > 0);
    }
}

int main(void)
{
    char root[] = "/tmp/cs-test-whatifwu-XXXXXX";
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
        const struct cs_report_whatif *wi = &s->whatif;
        CHECK_INT(s->count, ==, STEPS);
        CHECK_INT(s->timed, ==, STEPS - 1);
        CHECK_NEAR(wi->measured_step_s, 1000 * u, eps);
        CHECK_NEAR(wi->replayed_step_s, 1000 * u, eps);
        CHECK_STR(wi->note, "");
        /* Best bandwidth: the timed steps' all-reduces already run at the best transfer time of
         * their op, communicator class and size (50): nothing changes.  (Shortening the warm-up's
         * [100,600) to 50 as well moved ranks 0 and 1 into step 1 450 early, to wait for rank 2:
         * steps of 1450, 1450, 1000, then 1000 -> 1100.) */
        CHECK_NEAR(wi->best_bandwidth_step_s, 1000 * u, eps);
        /* Full overlap: the all-reduces end at their sync points; rank 2 still arrives 800 into
         * each step, so every rank's step is 800 + 150 = 950. */
        CHECK_NEAR(wi->full_overlap_step_s, 950 * u, eps);
        /* No straggler: rank 2's compute x 400/950 (the median over 400, 400, 950).  Step 1:
         * rank 2 arrives at 6400/19, ranks 0 and 1 at 300, so the world all-reduce ends at
         * 6400/19 + 50; ranks 0 and 1 end the step 150 later, rank 2 150 x 8/19 later (450).
         * From step 2 on rank 2 begins 6400/19 - 250 before ranks 0 and 1 and arrives 50 before
         * them: every step 500.  Mean ((2 x (6400/19 + 200) + 450) / 3 + 500 + 500) / 3. */
        CHECK_NEAR(wi->no_straggler_step_s, ((2 * (6400.0 / 19 + 200) + 450) / 3 + 1000) / 3 * u,
                   eps);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
    tw_rmtree(root);
    return cs_test_result();
}
