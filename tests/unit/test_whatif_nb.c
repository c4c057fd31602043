/*
 * The what-if replay of non-blocking point-to-point on a scripted trace (every time known): an
 * MPI_Irecv completed by an MPI_Wait that waited for a late MPI_Isend.  The replay must give the
 * measured step time, and with communication costing nothing (full overlap) the receiver's wait
 * must still end at the sender's arrival: the dependency the Wait had in the measured run.
 */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs_test.h"
#include "internal.h"
#include "steps.h"
#include "tw.h"

#define US 1000ull
#define T0 (1000000ull * US)
#define STEPS 4

/* An MPI event at [b, e) us after T0 (tw_mpi_event). */
#define put(w, ...) tw_mpi_event((w), T0, __VA_ARGS__)

/*
 * Steps of 1000 us marked by MPI_Pcontrol(1) at 1000 k (closed by MPI_Pcontrol(0) at 4000).
 * Rank 0: MPI_Irecv from 1 [0,10), computes, MPI_Wait [200,850) (completed at 850).
 * Rank 1: computes [0,800), MPI_Isend to 0 [800,810), MPI_Wait [810,820).
 * Full overlap (communication costs nothing, dependencies kept): rank 1's steps take
 * 800 + 180 = 980; rank 0's Irecv ends at once, its Wait arrives 190 later and ends when rank 1's
 * Isend arrives (800 after rank 1's step began), and its next step begins 150 later: rank 0 is
 * held to rank 1's pace, 980 per step from step 1 on (step 0: 950).  Had the Wait not waited
 * for the Isend, rank 0's steps would take 190 + 150 = 340 and the mean 660.
 */
static void write_run(const char *dir)
{
    for (int r = 0; r < 2; r++) {
        struct tw *w = tw_new(r, 2, 0x4e42, 90 + (uint64_t)r);
        struct cs_file_header *h = tw_header(w);
        h->t_init = T0;
        h->t_finalize = T0 + 4100 * US;
        put(w, CS_OP_INIT, 0, 0, -1, 0, 0);
        for (uint64_t k = 0; k <= STEPS; k++) {
            uint64_t o = 1000 * k;
            put(w, CS_OP_PCONTROL, o, o, -1, 0, k < STEPS ? 1 : 0);
            if (k == STEPS)
                break;
            uint64_t req = k + 1;
            if (r == 0) {
                put(w, CS_OP_IRECV, o, o + 10, 1, req, 5);
                put(w, CS_OP_WAIT, o + 200, o + 850, -1, req, 1);
                put(w, CS_OP_COMPLETE, o + 850, o + 850, 1, req, 5);
            } else {
                put(w, CS_OP_ISEND, o + 800, o + 810, 0, req, 5);
                put(w, CS_OP_WAIT, o + 810, o + 820, -1, req, 1);
                put(w, CS_OP_COMPLETE, o + 820, o + 820, 0, req, 5);
            }
        }
        put(w, CS_OP_FINALIZE, 4100, 4100, -1, 0, 0);
        CHECK(tw_write_rank(w, dir, r) > 0);
    }
}

int main(void)
{
    char root[] = "/tmp/cs-test-whatifnb-XXXXXX";
    if (tw_tmpdir(root) != 0)
        return 1;
    write_run(root);
    struct cs__run run;
    struct cs_report rep;
    char err[512];
    CHECK_INT(cs__analyze_dir(root, &run, &rep, err, sizeof err, NULL), ==, 0);
    const double u = 1e-6;
    CHECK(rep.steps != NULL);
    if (rep.steps) {
        const struct cs_report_steps *s = rep.steps;
        const struct cs_report_whatif *wi = &s->whatif;
        CHECK_INT(s->count, ==, STEPS);
        CHECK_INT(s->timed, ==, STEPS - 1);
        CHECK_NEAR(s->mean_s, 1000 * u, 1e-12);
        CHECK_NEAR(wi->replayed_step_s, 1000 * u, 1e-12);
        CHECK_NEAR(wi->full_overlap_step_s, 980 * u, 1e-12);
        CHECK_STR(wi->note, "");
    }
    cs__report_free(&rep);
    cs__run_free(&run);
    tw_rmtree(root);
    return cs_test_result();
}
