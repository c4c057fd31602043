/* The op table: nccl-tests bus-bandwidth factors for every collective at several sizes. */
#include "commscope/ops.h"
#include "cs_test.h"

/* nccl-tests' factors written out per op name (independent of the table's families). */
static double expected(const char *name, int n)
{
    static const char *const allreduce[] = {"MPI_Allreduce", "MPI_Iallreduce", "gloo:all_reduce"};
    static const char *const one[] = {"MPI_Bcast",      "MPI_Ibcast", "MPI_Reduce", "MPI_Ireduce",
                                      "MPI_Scan",       "MPI_Iscan",  "MPI_Exscan", "MPI_Iexscan",
                                      "gloo:broadcast", "gloo:reduce"};
    static const char *const nm1[] = {"MPI_Gather",
                                      "MPI_Gatherv",
                                      "MPI_Scatter",
                                      "MPI_Scatterv",
                                      "MPI_Allgather",
                                      "MPI_Allgatherv",
                                      "MPI_Alltoall",
                                      "MPI_Alltoallv",
                                      "MPI_Alltoallw",
                                      "MPI_Reduce_scatter",
                                      "MPI_Reduce_scatter_block",
                                      "MPI_Igather",
                                      "MPI_Igatherv",
                                      "MPI_Iscatter",
                                      "MPI_Iscatterv",
                                      "MPI_Iallgather",
                                      "MPI_Iallgatherv",
                                      "MPI_Ialltoall",
                                      "MPI_Ialltoallv",
                                      "MPI_Ialltoallw",
                                      "MPI_Ireduce_scatter",
                                      "MPI_Ireduce_scatter_block",
                                      "gloo:all_gather",
                                      "gloo:reduce_scatter",
                                      "gloo:all_to_all",
                                      "gloo:gather",
                                      "gloo:scatter"};
    for (size_t i = 0; i < sizeof allreduce / sizeof *allreduce; i++)
        if (!strcmp(name, allreduce[i]))
            return 2.0 * (n - 1) / n;
    for (size_t i = 0; i < sizeof one / sizeof *one; i++)
        if (!strcmp(name, one[i]))
            return 1.0;
    for (size_t i = 0; i < sizeof nm1 / sizeof *nm1; i++)
        if (!strcmp(name, nm1[i]))
            return (double)(n - 1) / n;
    if (!strcmp(name, "MPI_Barrier") || !strcmp(name, "MPI_Ibarrier") ||
        !strcmp(name, "gloo:barrier"))
        return 0.0;
    return -1.0; /* not a collective */
}

int main(void)
{
    static const int sizes[] = {1, 2, 3, 4, 8, 64, 4096};
    int collectives = 0;
    for (unsigned op = 0; op < CS_OP_MAX; op++) {
        const struct cs_op_info *oi = cs_op_info(op);
        if (!oi->name || !cs_op_is_collective(op))
            continue;
        collectives++;
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            double want = expected(oi->name, sizes[k]);
            CHECK(want >= 0.0);
            CHECK_NEAR(cs_op_busbw_factor(op, sizes[k]), want, 1e-12);
        }
        CHECK_INT(cs_op_by_name(oi->name), ==, op);
    }
    /* 17 blocking and 17 non-blocking MPI-3.1 collectives, and 9 Gloo ones (Kineto import). */
    CHECK_INT(collectives, ==, 43);

    /* NCCL: the factors of nccl-tests (its busBw functions) written out per op. */
    static const struct {
        const char *name;
        int family; /* 0: 2(n-1)/n, 1: (n-1)/n, 2: 1 */
    } nccl[] = {{"ncclAllReduce", 0}, {"ncclAllGather", 1}, {"ncclReduceScatter", 1},
                {"ncclAlltoAll", 1},  {"ncclGather", 1},    {"ncclScatter", 1},
                {"ncclBroadcast", 2}, {"ncclBcast", 2},     {"ncclReduce", 2},
                {"ncclSend", 2},      {"ncclRecv", 2}};
    int nccl_ops = 0;
    for (unsigned op = 0; op < CS_OP_MAX; op++)
        nccl_ops += cs_op_is_nccl(op);
    CHECK_INT(nccl_ops, ==, (int)(sizeof nccl / sizeof nccl[0]));
    for (size_t i = 0; i < sizeof nccl / sizeof nccl[0]; i++) {
        enum cs_op op = cs_op_by_name(nccl[i].name);
        CHECK(op != CS_OP_NONE);
        CHECK(cs_op_is_nccl(op));
        CHECK(!cs_op_is_collective(op)); /* host enqueue, not a blocking MPI collective */
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            int n = sizes[k];
            double want = nccl[i].family == 0   ? 2.0 * (n - 1) / n
                          : nccl[i].family == 1 ? (double)(n - 1) / n
                                                : 1.0;
            CHECK_NEAR(cs_op_busbw_factor(op, n), want, 1e-12);
        }
    }
    CHECK_INT(cs_op_info(CS_OP_GPU_KERNEL)->kind, ==, CS_KIND_GPU);
    CHECK_INT(cs_op_info(CS_OP_GPU_NCCL)->kind, ==, CS_KIND_GPU);
    CHECK_INT(cs_op_info(CS_OP_NCCL_GROUP_END)->kind, ==, CS_KIND_GROUP);
    CHECK_NEAR(cs_op_busbw_factor(CS_OP_ALLREDUCE, 8), 1.75, 0);
    CHECK_NEAR(cs_op_busbw_factor(CS_OP_ALLGATHER, 4), 0.75, 0);
    CHECK_NEAR(cs_op_busbw_factor(CS_OP_ALLREDUCE, 0), 0.0, 0);
    CHECK_NEAR(cs_op_busbw_factor(CS_OP_SEND, 4), 1.0, 0);
    CHECK_NEAR(cs_op_busbw_factor(CS_OP_WAIT, 4), 0.0, 0);
    return cs_test_result();
}
