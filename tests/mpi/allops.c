/*
 * Test program: calls every intercepted MPI function at least once, and writes what commscope
 * must report for this rank to OUT_PREFIX-rank-R.txt, one "op NAME calls=C bytes=B" line each,
 * computed here from the arguments with the documented definition (docs/metrics.md: bytes a
 * call sends or contributes; for receives, the bytes received).  Usage: cs_test_allops PREFIX
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXOPS 96
static struct {
    const char *name;
    long calls, bytes;
} tally[MAXOPS];

static void count(const char *name, long bytes)
{
    int i = 0;
    while (tally[i].name && strcmp(tally[i].name, name) != 0)
        i++;
    tally[i].name = name;
    tally[i].calls++;
    tally[i].bytes += bytes;
}

#define N 6 /* elements per block */
#define ISZ ((long)sizeof(int))

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm w = MPI_COMM_WORLD;
    int *s = calloc((size_t)N * n, sizeof(int)), *r = calloc((size_t)N * n, sizeof(int));
    int *cnt = calloc((size_t)n, sizeof(int)), *dsp = calloc((size_t)n, sizeof(int));
    MPI_Datatype *types = calloc((size_t)n, sizeof(MPI_Datatype));
    for (int i = 0; i < n; i++) {
        cnt[i] = N;
        dsp[i] = i * N;
        types[i] = MPI_INT;
    }
    int wcnt[64], wdsp[64];
    for (int i = 0; i < n && i < 64; i++) {
        wcnt[i] = N;
        wdsp[i] = i * N * (int)ISZ;
    }
    int root = n - 1, me_root = rank == root;
    long blk = N * ISZ;
    MPI_Request q[32];
    int nq = 0;

    for (int nb = 0; nb < 2; nb++) {
        /* Blocking on the first pass, non-blocking (then waited) on the second. */
#define COLL(B, I, bytes, ...)                                                                     \
    do {                                                                                           \
        if (!nb) {                                                                                 \
            MPI_##B(__VA_ARGS__);                                                                  \
            count("MPI_" #B, bytes);                                                               \
        } else {                                                                                   \
            MPI_##I(__VA_ARGS__, &q[nq++]);                                                        \
            count("MPI_" #I, bytes);                                                               \
        }                                                                                          \
    } while (0)
        nq = 0;
        if (!nb) {
            MPI_Barrier(w);
            count("MPI_Barrier", 0);
        } else {
            MPI_Ibarrier(w, &q[nq++]);
            count("MPI_Ibarrier", 0);
        }
        COLL(Bcast, Ibcast, me_root ? blk : 0, s, N, MPI_INT, root, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Reduce, Ireduce, blk, s, r, N, MPI_INT, MPI_SUM, root, w);
        COLL(Allreduce, Iallreduce, blk, s, r + N, N, MPI_INT, MPI_SUM, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Gather, Igather, blk, s, N, MPI_INT, r, N, MPI_INT, root, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Gatherv, Igatherv, blk, s, N, MPI_INT, r, cnt, dsp, MPI_INT, root, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Scatter, Iscatter, me_root ? n * blk : 0, s, N, MPI_INT, r, N, MPI_INT, root, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Scatterv, Iscatterv, me_root ? n * blk : 0, s, cnt, dsp, MPI_INT, r, N, MPI_INT, root,
             w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Allgather, Iallgather, blk, s, N, MPI_INT, r, N, MPI_INT, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Allgatherv, Iallgatherv, blk, s, N, MPI_INT, r, cnt, dsp, MPI_INT, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Alltoall, Ialltoall, n * blk, s, N, MPI_INT, r, N, MPI_INT, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Alltoallv, Ialltoallv, n * blk, s, cnt, dsp, MPI_INT, r, cnt, dsp, MPI_INT, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Alltoallw, Ialltoallw, n * blk, s, wcnt, wdsp, types, r, wcnt, wdsp, types, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Reduce_scatter, Ireduce_scatter, n * blk, s, r, cnt, MPI_INT, MPI_SUM, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Reduce_scatter_block, Ireduce_scatter_block, n * blk, s, r, N, MPI_INT, MPI_SUM, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Scan, Iscan, blk, s, r, N, MPI_INT, MPI_SUM, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
        COLL(Exscan, Iexscan, blk, s, r, N, MPI_INT, MPI_SUM, w);
        if (nb)
            MPI_Waitall(nq, q, MPI_STATUSES_IGNORE), count("MPI_Waitall", 0), nq = 0;
    }

    /* Point-to-point in a ring; each send kind once, received with Recv. */
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    int bsize = 4 * (int)blk + 4 * MPI_BSEND_OVERHEAD;
    void *bbuf = malloc((size_t)bsize);
    MPI_Buffer_attach(bbuf, bsize);
    for (int k = 0; k < 3; k++) {
        /* Even ranks send first, odd ranks receive first, so Ssend cannot deadlock. */
        for (int phase = 0; phase < 2; phase++) {
            if ((rank % 2 == 0) == (phase == 0)) {
                if (k == 0)
                    MPI_Send(s, N, MPI_INT, next, 1, w), count("MPI_Send", blk);
                else if (k == 1)
                    MPI_Ssend(s, N, MPI_INT, next, 1, w), count("MPI_Ssend", blk);
                else
                    MPI_Bsend(s, N, MPI_INT, next, 1, w), count("MPI_Bsend", blk);
            } else {
                MPI_Recv(r, N, MPI_INT, prev, 1, w, MPI_STATUS_IGNORE), count("MPI_Recv", blk);
            }
        }
    }
    MPI_Buffer_detach(&bbuf, &bsize);
    free(bbuf);
    /* Rsend needs the receive posted first: Irecv, barrier, Rsend, Wait. */
    MPI_Irecv(r, N, MPI_INT, prev, 2, w, &q[0]), count("MPI_Irecv", blk);
    MPI_Barrier(w), count("MPI_Barrier", 0);
    MPI_Rsend(s, N, MPI_INT, next, 2, w), count("MPI_Rsend", blk);
    MPI_Wait(&q[0], MPI_STATUS_IGNORE), count("MPI_Wait", 0);
    MPI_Sendrecv(s, N, MPI_INT, next, 3, r, N, MPI_INT, prev, 3, w, MPI_STATUS_IGNORE);
    count("MPI_Sendrecv", blk);
    MPI_Sendrecv_replace(s, N, MPI_INT, next, 4, prev, 4, w, MPI_STATUS_IGNORE);
    count("MPI_Sendrecv_replace", blk);
    /* Every completion call, each completing at least one request. */
    MPI_Isend(s, N, MPI_INT, next, 5, w, &q[0]), count("MPI_Isend", blk);
    MPI_Irecv(r, N, MPI_INT, MPI_ANY_SOURCE, 5, w, &q[1]), count("MPI_Irecv", blk);
    int idx, flag = 0, outc, outi[2];
    MPI_Waitany(2, q, &idx, MPI_STATUS_IGNORE), count("MPI_Waitany", 0);
    MPI_Waitsome(2, q, &outc, outi, MPI_STATUSES_IGNORE), count("MPI_Waitsome", 0);
    /* Test family: loop until each completes something; only completing calls are recorded. */
    MPI_Isend(s, N, MPI_INT, next, 6, w, &q[0]), count("MPI_Isend", blk);
    MPI_Irecv(r, N, MPI_INT, prev, 6, w, &q[1]), count("MPI_Irecv", blk);
    MPI_Isend(s, N, MPI_INT, next, 7, w, &q[2]), count("MPI_Isend", blk);
    MPI_Irecv(r + N, N, MPI_INT, prev, 7, w, &q[3]), count("MPI_Irecv", blk);
    do
        MPI_Test(&q[0], &flag, MPI_STATUS_IGNORE);
    while (!flag);
    count("MPI_Test", 0);
    do
        MPI_Testany(1, &q[1], &idx, &flag, MPI_STATUS_IGNORE);
    while (!flag);
    count("MPI_Testany", 0);
    do
        MPI_Testsome(1, &q[2], &outc, outi, MPI_STATUSES_IGNORE);
    while (outc == 0);
    count("MPI_Testsome", 0);
    do
        MPI_Testall(1, &q[3], &flag, MPI_STATUSES_IGNORE);
    while (!flag);
    count("MPI_Testall", 0);

    /* Communicators: dup, split, split_type, create; a collective on each; free. */
    MPI_Comm d, sp, st, cr;
    MPI_Group g;
    MPI_Comm_dup(w, &d);
    MPI_Comm_split(w, rank % 2, -rank, &sp);
    MPI_Comm_split_type(w, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &st);
    MPI_Comm_group(w, &g);
    MPI_Comm_create(w, g, &cr);
    MPI_Group_free(&g);
    MPI_Comm cs[4] = {d, sp, st, cr};
    for (int i = 0; i < 4; i++)
        MPI_Allreduce(s, r, 1, MPI_INT, MPI_SUM, cs[i]), count("MPI_Allreduce", ISZ);
    for (int i = 0; i < 4; i++)
        MPI_Comm_free(&cs[i]);
    MPI_Pcontrol(1);

    char path[4096];
    snprintf(path, sizeof path, "%s-rank-%d.txt", argc > 1 ? argv[1] : "allops", rank);
    FILE *f = fopen(path, "w");
    for (int i = 0; tally[i].name && f; i++)
        fprintf(f, "op %s calls=%ld bytes=%ld\n", tally[i].name, tally[i].calls, tally[i].bytes);
    if (f)
        fclose(f);
    MPI_Finalize();
    return f ? 0 : 1;
}
