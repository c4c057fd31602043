/*
 * The wire tests' MPI job: ITERS rounds of an all-reduce of BYTES and an all-to-all of BYTES per
 * rank, with a barrier first so every capture is running.  Prints "wire_job ok" from rank 0 when
 * the results are right (the job must be unaffected by the capture).
 * usage: cs_wire_job ITERS BYTES
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 10;
    long bytes = argc > 2 ? atol(argv[2]) : 1 << 20;
    int n = (int)(bytes / (long)sizeof(double));
    int per = n / size;
    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    double *c = malloc((size_t)per * size * sizeof *c), *d = malloc((size_t)per * size * sizeof *d);
    if (!a || !b || !c || !d)
        MPI_Abort(MPI_COMM_WORLD, 1);
    int ok = 1;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < n; i++)
            a[i] = rank + i % 7;
        MPI_Allreduce(a, b, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < n && ok; i++)
            ok = b[i] == (double)size * (size - 1) / 2 + (double)size * (i % 7);
        for (int i = 0; i < per * size; i++)
            c[i] = rank * 1000 + i / per;
        MPI_Alltoall(c, per, MPI_DOUBLE, d, per, MPI_DOUBLE, MPI_COMM_WORLD);
        for (int i = 0; i < per * size && ok; i++)
            ok = d[i] == (double)(i / per) * 1000 + rank;
    }
    int all = 0;
    MPI_Reduce(&ok, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("wire_job %s\n", all == size ? "ok" : "WRONG RESULTS");
    free(a), free(b), free(c), free(d);
    MPI_Finalize();
    return rank == 0 && all != size;
}
