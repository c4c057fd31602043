/*
 * The what-if replay of MPI_Sendrecv / MPI_Sendrecv_replace on a scripted trace: a send and a
 * receive linked to their partners, then the wait for both.  The replay must give the measured
 * step time, and with communication costing nothing the early rank must still wait for the late
 * one's send.  Also an MPI_Irecv from MPI_ANY_SOURCE, paired at its complete record.
 */
#include <stdio.h>
#include <sys/stat.h>

#include "whatif_run.h"

/*
 * A halo exchange by MPI_Sendrecv on a scripted trace (steps of 1000 us, whatif_run.h).
 * Rank 0: computes [0,200), MPI_Sendrecv with rank 1 (send tag 5, receives tag 6) [200,800).
 * Rank 1: computes [0,780), MPI_Sendrecv_replace with rank 0 (send tag 6, receives tag 5)
 *         [780,800).
 * Each call's receive waits for the other's send: rank 0 waits from 200 to 780 and both spend
 * 20 after it.  Full overlap (communication costs nothing, dependencies kept; the timed steps
 * begin as measured): rank 1's steps take 780 + 200 = 980; rank 0's call ends when rank 1's
 * begins (780 after its step began), its next step 200 later: 980 per step.  Without the link (the
 * call keeping its measured time after its own arrival) rank 0's steps would take 400 and the mean
 * 690.
 */
static void sendrecv(struct tw *w, uint16_t op, uint64_t b, uint64_t e, int32_t peer,
                     int32_t sendtag, uint32_t source, int32_t recvtag)
{
    struct cs_event ev = {.t_begin = T0 + b * US,
                          .t_end = T0 + e * US,
                          .comm = CS_COMM_WORLD_ID,
                          .bytes = 4096,
                          .bytes_recv = 4096,
                          .request = (uint64_t)recvtag + 1,
                          .seq = source + 1,
                          .peer = peer,
                          .op = op,
                          .aux = sendtag};
    tw_event(w, 0, &ev);
}

static void step_sendrecv(struct tw *w, int r, uint64_t o)
{
    if (r == 0)
        sendrecv(w, CS_OP_SENDRECV, o + 200, o + 800, 1, 5, 1, 6);
    else
        sendrecv(w, CS_OP_SENDRECV_REPLACE, o + 780, o + 800, 0, 6, 0, 5);
}

/*
 * The same exchange as test_whatif_nb.c with the receive posted from MPI_ANY_SOURCE: rank 0's
 * MPI_Irecv(ANY_SOURCE) [0,10), MPI_Wait [200,850) completed by rank 1's MPI_Isend at 800 (the
 * complete record names source 1, tag 5).  Full overlap 975 per step, as there (the Wait still
 * ends at the Isend's arrival); had the receive stayed unlinked, 660.
 */
static void step_anysrc(struct tw *w, int r, uint64_t o)
{
    whatif_nb_step(w, r, o, 1);
}

int main(void)
{
    char root[] = "/tmp/cs-test-whatifsr-XXXXXX";
    if (tw_tmpdir(root) != 0)
        return 1;
    whatif_write(root, 0x5352, 80, step_sendrecv);
    whatif_check(root, 980, 580);
    /* Two transfers per step, each from the later begin (780) to the call's end (800), 4096
     * bytes; the receives take 600 (rank 0) and 20 (rank 1); a half of MPI_Sendrecv has no send
     * call of its own. */
    whatif_check_transfer(root, 2 * STEPS, 4096, 20, 310, 0);
    char dir[256];
    snprintf(dir, sizeof dir, "%.200s/anysrc", root);
    mkdir(dir, 0700);
    whatif_write(dir, 0x4153, 60, step_anysrc);
    whatif_check(dir, 975, 600);
    whatif_check_transfer(dir, STEPS, 48, 50, 850, 10);
    tw_rmtree(root);
    return cs_test_result();
}
