/*
 * Waits for point-to-point partners in another step window (docs/metrics.md, "Time budget per
 * step"): the what-if pass reads the run a step window at a time and links partners within a
 * window for the replay, but the waits count wherever the partner was read.  Two scripted runs:
 *
 * Steps.  Rank 1 begins its steps 300 us before rank 0 (as unsynchronised markers do), so its
 * sends near the end of rank 0's step are in its next window.  Per step k (o = 1000 k us):
 *   rank 0: MPI_Wait [o+10, o+300) completing the MPI_Irecv of the step before (tag 5, k >= 1);
 *           MPI_Recv from 1, tag 9, [o+600, o+800);
 *           MPI_Irecv from 1, tag 3, [o+810, o+815) and its MPI_Wait [o+820, o+880);
 *           MPI_Irecv from 1, tag 5, [o+900, o+910) (k < 3), waited for in the next step.
 *   rank 1 (steps from 0, 700, 1700, 2700): MPI_Isend tag 5 [o+200, o+210) and its MPI_Wait
 *           (k >= 1); MPI_Send tag 9 [o+750, o+760); MPI_Isend tag 3 [o+850, o+855) and its Wait.
 * Rank 0 waits: at the Recv 750 - 600 = 150 (the send is in rank 1's next window but for k = 3);
 * at the tag-3 Wait 850 - 820 = 30 (likewise: the completion is booked once its partner is
 * read); at the tag-5 Wait 200 - 10 = 190 (k >= 1: the request was opened a window before).
 * Over the run 4 x 150 + 4 x 30 + 3 x 190 = 1290 us, 600 of them in the Recv; per timed step
 * (1 to 3) 370.  Within windows only, the run would count 180 (step 3's Recv and Wait).
 *
 * MPI_ANY_SOURCE receives completed a step later (both ranks' steps from 0, 1000, 2000, 3000):
 *   A: rank 0 posts MPI_Irecv(ANY_SOURCE, tag 7) [o+900, o+910) (k < 3) and waits for it in the
 *      next step, MPI_Wait [o+10, o+300) (k >= 1); rank 1's MPI_Isend tag 7 [o+200, o+210) is in
 *      that step, read after rank 0's completion: rank 0 waits 200 - 10 = 190, k = 1..3;
 *   B: rank 0's MPI_Irecv(ANY_SOURCE, tag 8) [o+920, o+925), its MPI_Wait [o+310, o+320) next
 *      step; rank 1's blocking MPI_Send tag 8 [o+890, o+960) in the Irecv's step waits for the
 *      post: 920 - 890 = 30, k = 0..2;
 *   C: rank 1's MPI_Irecv(ANY_SOURCE, tag 6) [o+930, o+935), its MPI_Wait [o+100, o+400) next
 *      step; rank 0's MPI_Isend tag 6 [o+50, o+55) (and Wait) in that step, read before it: no
 *      wait on either side (the post came first, the send before the Wait).
 * Rank 0 waits 3 x 190 = 570 us (caused by rank 1), rank 1 3 x 30 = 90 (caused by rank 0).
 * Each of the 9 receives is a request carried into the next window and a pair matched across
 * windows: 18 links.  Without the carrying of MPI_ANY_SOURCE receives: 0 and 0.
 *
 * No steps (no marker, no collective).  Rank 1: N blocking receives from 0 [t, t+10); rank 0:
 * the N sends at t+4 (each of another size, 5000 tags in turn), each followed by an MPI_Test:
 * twice rank 1's items, so with windows of at most 2^18 / 2 items a rank (whatif.c) most
 * receives are read a window before their sends.  Each receive waits 4 us: N x 4 us over the
 * run.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cs_test.h"
#include "internal.h"
#include "steps.h"
#include "tw.h"
#include "views.h"

#define US 1000ull
#define T0 (1000000ull * US)
#define STEPS 4
/* An MPI event at [b, e) us after T0 (tw_mpi_event). */
#define put(w, ...) tw_mpi_event((w), T0, __VA_ARGS__)

/* The run with steps, rank r's trace. */
static void steps_rank(struct tw *w, int r)
{
    put(w, CS_OP_PCONTROL, 0, 0, -1, 0, 1);
    for (uint64_t j = 0; j < STEPS; j++) {
        uint64_t o = 1000 * j;
        if (r == 0) {
            if (j >= 1) {
                put(w, CS_OP_PCONTROL, o, o, -1, 0, 1);
                put(w, CS_OP_WAIT, o + 10, o + 300, -1, 50 + j - 1, 1);
                put(w, CS_OP_COMPLETE, o + 300, o + 300, 1, 50 + j - 1, 5);
            }
            put(w, CS_OP_RECV, o + 600, o + 800, 1, 0, 9);
            put(w, CS_OP_IRECV, o + 810, o + 815, 1, 30 + j, 3);
            put(w, CS_OP_WAIT, o + 820, o + 880, -1, 30 + j, 1);
            put(w, CS_OP_COMPLETE, o + 880, o + 880, 1, 30 + j, 3);
            if (j < STEPS - 1)
                put(w, CS_OP_IRECV, o + 900, o + 910, 1, 50 + j, 5);
        } else {
            if (j >= 1) {
                put(w, CS_OP_ISEND, o + 200, o + 210, 0, 70 + j, 5);
                put(w, CS_OP_WAIT, o + 210, o + 220, -1, 70 + j, 1);
                put(w, CS_OP_COMPLETE, o + 220, o + 220, 0, 70 + j, 5);
            }
            if (j < STEPS - 1) /* rank 1's next step begins */
                put(w, CS_OP_PCONTROL, o + 700, o + 700, -1, 0, 1);
            put(w, CS_OP_SEND, o + 750, o + 760, 0, 0, 9);
            put(w, CS_OP_ISEND, o + 850, o + 855, 0, 90 + j, 3);
            put(w, CS_OP_WAIT, o + 856, o + 858, -1, 90 + j, 1);
            put(w, CS_OP_COMPLETE, o + 858, o + 858, 0, 90 + j, 3);
        }
    }
    put(w, CS_OP_PCONTROL, 1000 * STEPS, 1000 * STEPS, -1, 0, 0);
}

/* MPI_Irecv(MPI_ANY_SOURCE, tag) at [b, e) us, request req, as the collector records it. */
static void irecv_any(struct tw *w, uint64_t b, uint64_t e, uint64_t req, int32_t tag)
{
    struct cs_event ev = {.t_begin = T0 + b * US,
                          .t_end = T0 + e * US,
                          .comm = CS_COMM_WORLD_ID,
                          .peer = -1,
                          .request = req,
                          .op = CS_OP_IRECV,
                          .aux = tag,
                          .bytes_recv = 64,
                          .flags = CS_EV_NONBLOCKING | CS_EV_ANY_SOURCE};
    tw_event(w, 0, &ev);
}

/* The MPI_ANY_SOURCE run, rank r's trace. */
static void anysrc_rank(struct tw *w, int r)
{
    put(w, CS_OP_PCONTROL, 0, 0, -1, 0, 1);
    for (uint64_t j = 0; j < STEPS; j++) {
        uint64_t o = 1000 * j;
        if (j >= 1)
            put(w, CS_OP_PCONTROL, o, o, -1, 0, 1);
        if (r == 0) {
            if (j >= 1) {
                put(w, CS_OP_WAIT, o + 10, o + 300, -1, 60 + j - 1, 1); /* A */
                put(w, CS_OP_COMPLETE, o + 300, o + 300, 1, 60 + j - 1, 7);
                put(w, CS_OP_WAIT, o + 310, o + 320, -1, 80 + j - 1, 1); /* B */
                put(w, CS_OP_COMPLETE, o + 320, o + 320, 1, 80 + j - 1, 8);
                put(w, CS_OP_ISEND, o + 50, o + 55, 1, 100 + j, 6); /* C */
                put(w, CS_OP_WAIT, o + 56, o + 58, -1, 100 + j, 1);
                put(w, CS_OP_COMPLETE, o + 58, o + 58, 1, 100 + j, 6);
            }
            if (j < STEPS - 1) {
                irecv_any(w, o + 900, o + 910, 60 + j, 7);
                irecv_any(w, o + 920, o + 925, 80 + j, 8);
            }
        } else {
            if (j >= 1) {
                put(w, CS_OP_WAIT, o + 100, o + 400, -1, 110 + j - 1, 1); /* C */
                put(w, CS_OP_COMPLETE, o + 400, o + 400, 0, 110 + j - 1, 6);
                put(w, CS_OP_ISEND, o + 200, o + 210, 0, 70 + j, 7); /* A */
                put(w, CS_OP_WAIT, o + 210, o + 220, -1, 70 + j, 1);
                put(w, CS_OP_COMPLETE, o + 220, o + 220, 0, 70 + j, 7);
            }
            if (j < STEPS - 1) {
                put(w, CS_OP_SEND, o + 890, o + 960, 0, 0, 8); /* B */
                irecv_any(w, o + 930, o + 935, 110 + j, 6);
            }
        }
    }
    put(w, CS_OP_PCONTROL, 1000 * STEPS, 1000 * STEPS, -1, 0, 0);
}

#define N 140000

/* The run without steps, rank r's trace: rank 0 sends every message with another size, so that
 * no call of the reference rank (rank 0) repeats and no step is found. */
static void nosteps_rank(struct tw *w, int r)
{
    for (uint64_t i = 0; i < N; i++) {
        uint64_t t = 100 + 20 * i;
        /* 5000 tags in turn: channels come and go (the carried ones' table purges its
         * deleted entries instead of growing) */
        struct cs_event ev = {
            .comm = CS_COMM_WORLD_ID, .peer = r ? 0 : 1, .aux = (int32_t)(i % 5000)};
        ev.op = r ? CS_OP_RECV : CS_OP_SEND;
        ev.t_begin = T0 + (t + (r ? 0 : 4)) * US;
        ev.t_end = T0 + (t + (r ? 10 : 6)) * US;
        *(r ? &ev.bytes_recv : &ev.bytes) = 1000 + i;
        tw_event(w, 0, &ev);
        if (!r)
            put(w, CS_OP_TEST, t + 6, t + 7, -1, 0, 0);
    }
}

static void write_run(const char *dir, uint64_t t_end, void (*body)(struct tw *w, int r))
{
    for (int r = 0; r < 2; r++) {
        struct tw *w = tw_new(r, 2, 0xca77, 40 + (uint64_t)r);
        struct cs_file_header *h = tw_header(w);
        h->t_init = T0;
        h->t_finalize = T0 + t_end * US;
        put(w, CS_OP_INIT, 0, 0, -1, 0, 0);
        body(w, r);
        put(w, CS_OP_FINALIZE, t_end, t_end, -1, 0, 0);
        CHECK(tw_write_rank(w, dir, r) > 0);
    }
}

static const struct cs_report_rank *rank_of(const struct cs_report *rep, int r)
{
    for (size_t i = 0; i < rep->nranks; i++)
        if (rep->ranks[i].rank == r)
            return &rep->ranks[i];
    return NULL;
}

/* Analyse the run in dir into run and rep (free both after); its ranks 0 and 1.  Whether both
 * and the step report are there (checked). */
static int analyse(const char *dir, struct cs__run *run, struct cs_report *rep,
                   const struct cs_report_rank **r0, const struct cs_report_rank **r1)
{
    char err[512];
    CHECK_INT(cs__analyze_dir(dir, run, rep, err, sizeof err, NULL), ==, 0);
    *r0 = rank_of(rep, 0);
    *r1 = rank_of(rep, 1);
    CHECK(*r0 && *r1 && rep->steps);
    return *r0 && *r1 && rep->steps;
}

static void check_steps(const char *dir)
{
    struct cs__run run;
    struct cs_report rep;
    const double u = 1e-6;
    const struct cs_report_rank *r0, *r1;
    if (analyse(dir, &run, &rep, &r0, &r1)) {
        const struct cs_report_steps *s = rep.steps;
        CHECK_INT(s->count, ==, STEPS);
        CHECK_INT(s->timed, ==, STEPS - 1);
        /* 3 Recvs, 3 tag-3 Waits and 3 tag-5 requests paired across windows, and the 3 tag-5
         * Waits of requests opened a window before */
        CHECK(strstr(s->whatif.note, "12 point-to-point links spanned two step windows") != NULL);
        CHECK_NEAR(r0->p2p_wait_s, 1290 * u, 1e-12);
        CHECK_NEAR(r1->p2p_wait_s, 0, 1e-12);
        CHECK_NEAR(r1->p2p_caused_s, 1290 * u, 1e-12);
        CHECK_NEAR(r0->p2p_caused_s, 0, 1e-12);
        for (size_t i = 0; i < s->nranks && i < 2; i++) {
            const struct cs_report_budget *b = &s->ranks[i];
            CHECK_NEAR(b->p2p_wait_s, b->rank ? 0 : 370 * u, 1e-12);
        }
        /* in the time segments: 600 out of the Recv calls (4 x 200), 690 out of the Waits */
        const struct cs_report_views *v = rep.views;
        CHECK(v != NULL);
        for (size_t i = 0; v && i < rep.nranks; i++)
            if (rep.ranks[i].rank == 0) {
                CHECK_NEAR(v->seg_s[i][CS_SEG_P2P], (4 * 200 + 4 * 5 + 3 * 10 - 600) * u, 1e-12);
                CHECK(v->seg_s[i][CS_SEG_WAIT] >= 1290 * u - 1e-12);
            }
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

static void check_anysrc(const char *dir)
{
    struct cs__run run;
    struct cs_report rep;
    const double u = 1e-6;
    const struct cs_report_rank *r0, *r1;
    if (analyse(dir, &run, &rep, &r0, &r1)) {
        CHECK_INT(rep.steps->count, ==, STEPS);
        CHECK_NEAR(r0->p2p_wait_s, 570 * u, 1e-12);
        CHECK_NEAR(r1->p2p_wait_s, 90 * u, 1e-12);
        CHECK_NEAR(r1->p2p_caused_s, 570 * u, 1e-12);
        CHECK_NEAR(r0->p2p_caused_s, 90 * u, 1e-12);
        if (!strstr(rep.steps->whatif.note, "18 point-to-point links spanned two step windows")) {
            CHECK(0);
            fprintf(stderr, "what-if note: %s\n", rep.steps->whatif.note);
        }
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

static void check_nosteps(const char *dir)
{
    struct cs__run run;
    struct cs_report rep;
    const struct cs_report_rank *r0, *r1;
    if (analyse(dir, &run, &rep, &r0, &r1)) {
        CHECK(rep.steps && rep.steps->count == 0);
        CHECK_STR(rep.steps->source, "none");
        CHECK_NEAR(r1->p2p_wait_s, N * 4e-6, 1e-9);
        CHECK_NEAR(r0->p2p_caused_s, N * 4e-6, 1e-9);
        CHECK_NEAR(r0->p2p_wait_s, 0, 1e-12);
        CHECK(isfinite(rep.steps->serialization_efficiency));
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

int main(void)
{
    char root[] = "/tmp/cs-test-whatifcarry-XXXXXX";
    if (tw_tmpdir(root) != 0)
        return 1;
    char a[512], b[512], c[512];
    snprintf(a, sizeof a, "%s/steps", root);
    snprintf(b, sizeof b, "%s/nosteps", root);
    snprintf(c, sizeof c, "%s/anysrc", root);
    CHECK_INT(mkdir(a, 0755), ==, 0);
    CHECK_INT(mkdir(b, 0755), ==, 0);
    CHECK_INT(mkdir(c, 0755), ==, 0);
    write_run(a, 1000 * STEPS + 100, steps_rank);
    check_steps(a);
    write_run(c, 1000 * STEPS + 100, anysrc_rank);
    check_anysrc(c);
    write_run(b, 100 + 20 * N + 100, nosteps_rank);
    check_nosteps(b);
    tw_rmtree(root);
    return cs_test_result();
}
