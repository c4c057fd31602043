/*
 * The scaffolding of the scripted two-rank what-if tests of MPI point-to-point
 * (test_whatif_nb.c, test_whatif_sendrecv.c): every time known, steps of 1000 us marked by
 * MPI_Pcontrol(1) at 1000 k us (closed by MPI_Pcontrol(0) at 1000 STEPS), each test writing the
 * calls of a step, and the checks every such run must pass.  Static functions: the checks count
 * in the including test (cs_test.h).
 */
#ifndef COMMSCOPE_WHATIF_RUN_H
#define COMMSCOPE_WHATIF_RUN_H

#include <math.h>
#include <stdint.h>

#include "cs_test.h"
#include "internal.h"
#include "steps.h"
#include "tw.h"

#define US 1000ull
#define T0 (1000000ull * US)
#define STEPS 4

/* An MPI event at [b, e) us after T0 (tw_mpi_event). */
#define put(w, ...) tw_mpi_event((w), T0, __VA_ARGS__)

/* Writes the two ranks' traces into dir; step(w, r, o) writes rank r's calls of the step that
 * begins at o us. */
static void whatif_write(const char *dir, uint64_t run_id, uint64_t nonce,
                         void (*step)(struct tw *w, int r, uint64_t o))
{
    for (int r = 0; r < 2; r++) {
        struct tw *w = tw_new(r, 2, run_id, nonce + (uint64_t)r);
        struct cs_file_header *h = tw_header(w);
        h->t_init = T0;
        h->t_finalize = T0 + 4100 * US;
        put(w, CS_OP_INIT, 0, 0, -1, 0, 0);
        for (uint64_t k = 0; k <= STEPS; k++) {
            uint64_t o = 1000 * k;
            put(w, CS_OP_PCONTROL, o, o, -1, 0, k < STEPS ? 1 : 0);
            if (k < STEPS)
                step(w, r, o);
        }
        put(w, CS_OP_FINALIZE, 4100, 4100, -1, 0, 0);
        CHECK(tw_write_rank(w, dir, r) > 0);
    }
}

/*
 * A step of the non-blocking exchange (test_whatif_nb.c; from MPI_ANY_SOURCE in
 * test_whatif_sendrecv.c): rank 0's MPI_Irecv [0,10) (posted to rank 1, or to any source),
 * MPI_Wait [200,850) completed by rank 1's MPI_Isend at 800 (the complete record names source 1,
 * tag 5, and 48 bytes received of the 64 posted); rank 1 computes [0,800), MPI_Isend [800,810),
 * MPI_Wait [810,820).
 */
static void whatif_nb_step(struct tw *w, int r, uint64_t o, int any_source)
{
    uint64_t req = o / 1000 + 1;
    if (r == 0) {
        struct cs_event ev = {.t_begin = T0 + o * US,
                              .t_end = T0 + (o + 10) * US,
                              .comm = CS_COMM_WORLD_ID,
                              .peer = any_source ? -1 : 1,
                              .request = req,
                              .bytes_recv = 64,
                              .op = CS_OP_IRECV,
                              .flags = CS_EV_NONBLOCKING | (any_source ? CS_EV_ANY_SOURCE : 0),
                              .aux = 5};
        tw_event(w, 0, &ev);
        put(w, CS_OP_WAIT, o + 200, o + 850, -1, req, 1);
        struct cs_event c = {.t_begin = T0 + (o + 850) * US,
                             .t_end = T0 + (o + 850) * US,
                             .bytes_recv = 48, /* of the 64 posted */
                             .comm = CS_COMM_WORLD_ID,
                             .peer = 1,
                             .request = req,
                             .op = CS_OP_COMPLETE,
                             .aux = 5};
        tw_event(w, 0, &c);
    } else {
        put(w, CS_OP_ISEND, o + 800, o + 810, 0, req, 5);
        put(w, CS_OP_WAIT, o + 810, o + 820, -1, req, 1);
        put(w, CS_OP_COMPLETE, o + 820, o + 820, 0, req, 5);
    }
}

/* Analyses dir: STEPS steps (the first excluded as warm-up) of 1000 us each, which the replay
 * reproduces without a note, and full_overlap_us per step with communication costing nothing.
 * In the step budget rank 0 waits wait0_us per step for rank 1's sends (the point-to-point waits
 * the replay matched), and rank 1 nothing. */
static void whatif_check(const char *dir, double full_overlap_us, double wait0_us)
{
    struct cs__run run;
    struct cs_report rep;
    char err[512];
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    const double u = 1e-6;
    CHECK(rep.steps != NULL);
    if (rep.steps) {
        const struct cs_report_steps *s = rep.steps;
        const struct cs_report_whatif *wi = &s->whatif;
        CHECK_INT(s->count, ==, STEPS);
        CHECK_INT(s->timed, ==, STEPS - 1);
        CHECK_NEAR(s->mean_s, 1000 * u, 1e-12);
        CHECK_NEAR(wi->replayed_step_s, 1000 * u, 1e-12);
        CHECK_NEAR(wi->replay_error, 0, 1e-9);
        CHECK_NEAR(wi->full_overlap_step_s, full_overlap_us * u, 1e-12);
        CHECK_STR(wi->note, "");
        CHECK_INT(s->nranks, ==, 2);
        for (size_t i = 0; i < s->nranks && i < 2; i++) {
            const struct cs_report_budget *b = &s->ranks[i];
            CHECK_NEAR(b->wait_s, i ? 0 : wait0_us * u, 1e-12);
            CHECK_NEAR(b->p2p_wait_s, i ? 0 : wait0_us * u, 1e-12);
            CHECK_NEAR(b->comm_s[CS_DIM_OTHER] + b->comm_s[CS_DIM_PP] + b->wait_s + b->compute_s +
                           b->other_mpi_s,
                       1000 * u, 1e-12);
        }
        CHECK_NEAR(s->total.wait_s, wait0_us / 2 * u, 1e-12);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

/* The point-to-point transfers measured (docs/metrics.md, "Point-to-point bandwidth"): `pairs`
 * pairs of `bytes` each, in one size bucket, none left unmeasured, whose transfers, receives
 * (post to completion) and send calls took xfer_us, recv_us and send_us per pair on average
 * (send_us 0: no send call of its own, no rate). */
static void whatif_check_transfer(const char *dir, uint64_t pairs, double bytes, double xfer_us,
                                  double recv_us, double send_us)
{
    struct cs__run run;
    struct cs_report rep;
    char err[512];
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    CHECK_INT(rep.p2p_bw_unmeasured, ==, 0);
    CHECK_INT(rep.np2p_bw, ==, 1);
    if (rep.np2p_bw == 1) {
        const struct cs_report_p2p_bucket *b = &rep.p2p_bw[0];
        CHECK_INT(b->log2_size, ==, cs__log2_bucket((uint64_t)bytes, CS_REPORT_P2P_BUCKETS));
        CHECK_INT(b->pairs, ==, pairs);
        CHECK_NEAR(b->mean_bytes, bytes, 1e-9);
        CHECK_NEAR(b->transfer_gbps, bytes / (xfer_us * US), 1e-12);
        CHECK_NEAR(b->recv_call_gbps, bytes / (recv_us * US), 1e-12);
        if (send_us > 0)
            CHECK_NEAR(b->send_call_gbps, bytes / (send_us * US), 1e-12);
        else
            CHECK(isnan(b->send_call_gbps));
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

#endif
