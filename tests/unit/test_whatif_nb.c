/*
 * The what-if replay of non-blocking point-to-point on a scripted trace (every time known): an
 * MPI_Irecv completed by an MPI_Wait that waited for a late MPI_Isend.  The replay must give the
 * measured step time, and with communication costing nothing (full overlap) the receiver's wait
 * must still end at the sender's arrival: the dependency the Wait had in the measured run.
 */
#include "whatif_run.h"

/*
 * Steps of 1000 us (whatif_run.h).
 * Rank 0: MPI_Irecv from 1 [0,10), computes, MPI_Wait [200,850) (completed at 850).
 * Rank 1: computes [0,800), MPI_Isend to 0 [800,810), MPI_Wait [810,820).
 * Full overlap (communication costs nothing, dependencies kept) changes the timed steps 1 to 3
 * (step 0 is the warm-up), which both ranks begin as measured: rank 1's steps take
 * 800 + 180 = 980; rank 0's Irecv ends at once, its Wait arrives 190 later and ends when rank 1's
 * Isend arrives (800 after rank 1's step began), and its next step begins 150 later: rank 0's
 * step 1 takes 950, after which it is held to rank 1's pace, 980 per step.  Mean over the timed
 * steps: ((950 + 980) / 2 + 980 + 980) / 3 = 975.  Had the Wait not waited for the Isend, rank
 * 0's steps would take 190 + 150 = 340 and the mean 660.
 * The point-to-point bandwidth measures the transfer from the later begin to the completion.
 */
static void step(struct tw *w, int r, uint64_t o)
{
    whatif_nb_step(w, r, o, 0);
}

int main(void)
{
    char root[] = "/tmp/cs-test-whatifnb-XXXXXX";
    if (tw_tmpdir(root) != 0)
        return 1;
    whatif_write(root, 0x4e42, 90, step);
    whatif_check(root, 975, 600);
    /* One transfer per step: 48 bytes from the Isend's arrival (800) to the Wait's end (850);
     * the receive from its post (0) to then, 850; the Isend's call 10. */
    whatif_check_transfer(root, STEPS, 48, 50, 850, 10);
    tw_rmtree(root);
    return cs_test_result();
}
