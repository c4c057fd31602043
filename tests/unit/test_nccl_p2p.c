/*
 * NCCL point-to-point matched across ranks on scripted GPU timelines (traces written by tw.c):
 * pairs per (communicator, sender, receiver) in issue order, single and grouped launches, late
 * senders and late receivers from kernel starts, a receive without a send, an untimed (graph)
 * pair, and the point-to-point byte matrix.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs_test.h"
#include "gpu.h"
#include "internal.h"
#include "nccl_p2p.h"
#include "tw.h"
#include "views.h"

#define US 1000ull
#define T0 (1000000ull * US)

static void call(struct tw *w, uint16_t op, uint64_t t, int peer, uint64_t bytes, uint64_t launch,
                 uint16_t flags)
{
    struct cs_event e = {.t_begin = T0 + t * US,
                         .t_end = T0 + t * US + 1 * US,
                         .comm = CS_COMM_WORLD_ID,
                         .bytes = op == CS_OP_NCCL_SEND ? bytes : 0,
                         .bytes_recv = op == CS_OP_NCCL_RECV ? bytes : 0,
                         .request = launch,
                         .seq = (uint32_t)peer,
                         .peer = -1,
                         .op = op,
                         .flags = flags,
                         .aux = 7};
    tw_event(w, 0, &e);
}

static void kern(struct tw *w, uint64_t b, uint64_t e, uint64_t launch, uint64_t calls)
{
    struct cs_event g = {.t_begin = T0 + b * US,
                         .t_end = T0 + e * US,
                         .comm = CS_COMM_WORLD_ID,
                         .bytes_recv = calls,
                         .request = launch,
                         .seq = 0,
                         .peer = -1,
                         .op = CS_OP_GPU_NCCL,
                         .aux = 0};
    tw_event(w, 1, &g);
}

/*
 * Three ranks, world communicator (microseconds after T0):
 *   rank 0: launch 1 send 1000 B to 1, kernel [100,200);
 *           launch 2 group {send 2000 B to 1, recv 3000 B from 1}, kernel [400,500)
 *   rank 1: launch 1 recv 1000 B from 0, kernel [130,200)          -> 0->1 #0: late receiver 30
 *           launch 2 group {recv 2000 from 0, send 3000 to 0, send 500 to 2}, kernel [380,500)
 *                                                                  -> 0->1 #1: late sender 20
 *                                                                  -> 1->0 #0: late receiver 20
 *           launch 3 send 64 B to 2 captured into a graph (untimed)
 *   rank 2: launch 1 recv 500 from 1, kernel [450,520)             -> 1->2 #0: late receiver 70
 *           launch 2 recv 64 from 1 (graph), kernel [600,610)      -> 1->2 #1: pair, not timed
 *           launch 3 recv 100 from 0: no send                      -> unmatched receive
 */
static void write_run(const char *dir)
{
    struct tw *w[3];
    for (int r = 0; r < 3; r++)
        w[r] = tw_new_gpu_rank(r, 3, 0x7032, 70 + (uint64_t)r, T0, T0 + 1000 * US);
    call(w[0], CS_OP_NCCL_SEND, 10, 1, 1000, 1, 0);
    call(w[0], CS_OP_NCCL_SEND, 300, 1, 2000, 2, CS_EV_GROUPED);
    call(w[0], CS_OP_NCCL_RECV, 301, 1, 3000, 2, CS_EV_GROUPED);
    kern(w[0], 100, 200, 1, 1);
    kern(w[0], 400, 500, 2, 2);
    call(w[1], CS_OP_NCCL_RECV, 12, 0, 1000, 1, 0);
    call(w[1], CS_OP_NCCL_RECV, 302, 0, 2000, 2, CS_EV_GROUPED);
    call(w[1], CS_OP_NCCL_SEND, 303, 0, 3000, 2, CS_EV_GROUPED);
    call(w[1], CS_OP_NCCL_SEND, 304, 2, 500, 2, CS_EV_GROUPED);
    call(w[1], CS_OP_NCCL_SEND, 550, 2, 64, 3, CS_EV_GRAPH);
    kern(w[1], 130, 200, 1, 1);
    kern(w[1], 380, 500, 2, 3);
    call(w[2], CS_OP_NCCL_RECV, 14, 1, 500, 1, 0);
    call(w[2], CS_OP_NCCL_RECV, 560, 1, 64, 2, 0);
    call(w[2], CS_OP_NCCL_RECV, 700, 0, 100, 3, 0);
    kern(w[2], 450, 520, 1, 1);
    kern(w[2], 600, 610, 2, 1);
    for (int r = 0; r < 3; r++) {
        char p[600];
        snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, r);
        CHECK(tw_write(w[r], p, NULL) > 0);
        tw_free(w[r]);
    }
}

static const struct cs_report_np2p_pair *chan(const struct cs_report_np2p *o, int from, int to)
{
    for (size_t i = 0; i < o->npairs; i++)
        if (o->pairs[i].from == from && o->pairs[i].to == to && !strcmp(o->pairs[i].comm, "world"))
            return &o->pairs[i];
    return NULL;
}

static void test_pairs(const char *root)
{
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/p2p", root);
    mkdir(dir, 0700);
    write_run(dir);
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    const double u = 1e-6, eps = 1e-12;
    const struct cs_report_np2p *o = rep.np2p;
    CHECK(o != NULL);
    if (o) {
        CHECK_INT(o->npairs, ==, 4);
        CHECK_INT(o->pairs_total, ==, 5);
        CHECK_INT(o->timed, ==, 4);
        CHECK_INT(o->unmatched_sends, ==, 0);
        CHECK_INT(o->unmatched_recvs, ==, 1);
        CHECK_INT(o->untimed, ==, 2); /* the graph send; the receive whose launch had no kernel */
        CHECK_INT(o->late_sender, ==, 1);
        CHECK_NEAR(o->late_sender_wait_s, 20 * u, eps);
        CHECK_INT(o->late_receiver, ==, 3);
        CHECK_NEAR(o->late_receiver_wait_s, (30 + 20 + 70) * u, eps);
        const struct cs_report_np2p_pair *a = chan(o, 0, 1), *b = chan(o, 1, 0), *c = chan(o, 1, 2),
                                         *d = chan(o, 0, 2);
        CHECK(a && b && c && d);
        if (a && b && c && d) {
            CHECK_INT(a->sends, ==, 2);
            CHECK_INT(a->recvs, ==, 2);
            CHECK_INT(a->bytes, ==, 3000);
            CHECK_INT(a->pairs, ==, 2);
            CHECK_INT(a->timed, ==, 2);
            CHECK_INT(a->late_sender, ==, 1);
            CHECK_NEAR(a->late_sender_wait_s, 20 * u, eps);
            CHECK_INT(a->late_receiver, ==, 1);
            CHECK_NEAR(a->late_receiver_wait_s, 30 * u, eps);
            CHECK_INT(a->mismatched_bytes, ==, 0);
            CHECK_INT(b->bytes, ==, 3000);
            CHECK_INT(b->pairs, ==, 1);
            CHECK_INT(b->late_receiver, ==, 1);
            CHECK_NEAR(b->late_receiver_wait_s, 20 * u, eps);
            CHECK_INT(b->late_sender, ==, 0);
            CHECK_INT(c->sends, ==, 2);
            CHECK_INT(c->bytes, ==, 564);
            CHECK_INT(c->pairs, ==, 2);
            CHECK_INT(c->timed, ==, 1);
            CHECK_NEAR(c->late_receiver_wait_s, 70 * u, eps);
            CHECK_INT(d->sends, ==, 0);
            CHECK_INT(d->recvs, ==, 1);
            CHECK_INT(d->pairs, ==, 0);
        }
    }
    /* The matrix holds what NCCL senders sent. */
    CHECK(rep.views != NULL);
    if (rep.views) {
        const struct cs_report_views *v = rep.views;
        CHECK_INT(v->p2p_n, ==, 3);
        if (v->p2p_n == 3) {
            CHECK_INT(v->p2p_bytes[0 * 3 + 1], ==, 3000);
            CHECK_INT(v->p2p_bytes[1 * 3 + 0], ==, 3000);
            CHECK_INT(v->p2p_bytes[1 * 3 + 2], ==, 564);
            CHECK_INT(v->p2p_bytes[0 * 3 + 2], ==, 0);
            CHECK_INT(v->p2p_total, ==, 6564);
        }
    }
    /* The op rows count the calls as before. */
    int seen = 0;
    for (size_t i = 0; i < rep.nops; i++)
        if (!strcmp(rep.ops[i].op, "ncclSend")) {
            seen = 1;
            CHECK_INT(rep.ops[i].calls, ==, 5);
            CHECK_INT(rep.ops[i].bytes, ==, 6564);
        }
    CHECK(seen);
    int said = 0;
    for (size_t i = 0; i < rep.nproblems; i++)
        said |= strstr(rep.problems[i], "1 ncclRecv calls have no counterpart") != NULL;
    CHECK(said);
    if (!said)
        for (size_t i = 0; i < rep.nproblems; i++)
            fprintf(stderr, "problem: %s\n", rep.problems[i]);
    char *buf = tw_report_json(&rep);
    CHECK(buf != NULL);
    if (buf) {
        CHECK(strstr(buf, "\"nccl_p2p\"") != NULL);
        CHECK(strstr(buf, "\"late_receiver\": 3") != NULL || strstr(buf, "\"late_receiver\":3"));
        free(buf);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

int main(void)
{
    char root[] = "/tmp/cs-test-np2p-XXXXXX";
    if (tw_tmpdir(root) != 0)
        return 1;
    test_pairs(root);
    tw_rmtree(root);
    return cs_test_result();
}
