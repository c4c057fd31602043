/*
 * An ncclCommInitAll communicator: one process (world rank 0 of 1) holds all its members, one per
 * GPU.  Its records (flag CS_COMM_GPU_MULTI) join into one communicator of that size whose
 * members are all rank 0, and the NCCL collective instances built from GPU times match every
 * device's kernel to a member (times known exactly, as in test_gpu.c).  Also: a record larger
 * than the world without the flag is refused.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs_test.h"
#include "internal.h"
#include "tw.h"

#define US 1000ull
#define T0 (1000000ull * US)
#define COMM (0x8000000000000000ull | 0x1234ull)

static void host_ar(struct tw *w, uint64_t t, uint32_t seq, uint64_t launch)
{
    tw_host_allreduce(w, 0, COMM, T0 + t * US, T0 + t * US + 2 * US, seq, launch);
}

static void gpu_ar(struct tw *w, uint64_t b, uint64_t e, int dev, uint32_t seq, uint64_t launch)
{
    struct cs_event g = {.t_begin = T0 + b * US,
                         .t_end = T0 + e * US,
                         .comm = COMM,
                         .bytes_recv = 1,
                         .request = launch,
                         .seq = seq,
                         .peer = -1,
                         .op = CS_OP_GPU_NCCL,
                         .aux = dev};
    tw_event(w, 1, &g);
}

/*
 * Two devices (comm rank 0 on device 1, comm rank 1 on device 0), two all-reduces each:
 *   seq 0: device 1 kernel [50,200), device 0 kernel [80,200)   -> skew 30 us
 *   seq 1: device 1 kernel [400,500), device 0 kernel [420,500) -> skew 20 us
 */
static void test_multi(const char *root, int flagged)
{
    char dir[512], err[512], p[600];
    snprintf(dir, sizeof dir, "%s/%s", root, flagged ? "multi" : "unflagged");
    mkdir(dir, 0700);
    struct tw *w = tw_new_gpu_rank(0, 1, 0x77, 5, T0, T0 + 1000 * US);
    if (flagged) {
        tw_comm_nccl_multi(w, COMM, 2, 0, 0, 1);
        tw_comm_nccl_multi(w, COMM, 2, 1, 0, 0);
    } else {
        tw_comm_nccl(w, COMM, 2, 0, 0, 1, "");
    }
    host_ar(w, 10, 0, 1);
    host_ar(w, 11, 0, 2);
    host_ar(w, 300, 1, 3);
    host_ar(w, 301, 1, 4);
    gpu_ar(w, 50, 200, 1, 0, 1);
    gpu_ar(w, 80, 200, 0, 0, 2);
    gpu_ar(w, 400, 500, 1, 1, 3);
    gpu_ar(w, 420, 500, 0, 1, 4);
    snprintf(p, sizeof p, "%s/rank-00000.cst", dir);
    CHECK(tw_write(w, p, NULL) > 0);
    tw_free(w);

    struct cs__run run;
    struct cs_report rep;
    int rc = cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL);
    if (!flagged) {
        /* Without the flag a communicator of 2 in a world of 1 is a broken record. */
        CHECK(rc != 0 || rep.nranks == 0 || rep.nproblems > 0);
        if (rc == 0) {
            cs__report_free(&rep);
            cs__run_free(&run);
        }
        return;
    }
    CHECK_INT(rc, ==, 0);
    if (rc != 0)
        return;
    for (size_t i = 0; i < rep.nproblems; i++)
        fprintf(stderr, "problem: %s\n", rep.problems[i]);
    CHECK_INT(rep.nproblems, ==, 0);
    const struct cs__comm *c = cs__comm_get(&run, COMM);
    CHECK(c != NULL);
    if (c) {
        CHECK_INT(c->size, ==, 2);
        CHECK_INT(c->multi, ==, 1);
        CHECK_INT(c->members[0], ==, 0);
        CHECK_INT(c->members[1], ==, 0);
    }
    CHECK_INT(rep.matched, ==, 2);
    CHECK_INT(rep.incomplete, ==, 0);
    CHECK_NEAR(rep.max_skew_s, 30e-6, 1e-12);
    int found = 0;
    for (size_t i = 0; i < rep.nops; i++)
        if (!strcmp(rep.ops[i].op, "ncclAllReduce")) {
            found = 1;
            CHECK_INT(rep.ops[i].calls, ==, 4);
            CHECK_INT(rep.ops[i].comm_size, ==, 2);
        }
    CHECK(found);
    cs__report_free(&rep);
    cs__run_free(&run);
}

int main(void)
{
    char root[] = "/tmp/cs-test-initall-XXXXXX";
    if (tw_tmpdir(root) != 0)
        return 1;
    test_multi(root, 1);
    test_multi(root, 0);
    tw_rmtree(root);
    return cs_test_result();
}
