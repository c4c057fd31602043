/*
 * Test program for MPI_THREAD_MULTIPLE: T threads per rank, each with its own duplicate of
 * MPI_COMM_WORLD, each doing ITERS rounds of (Isend to the next rank + Irecv from the previous +
 * Waitall) and one MPI_Allreduce on its communicator.  Every call is counted here so the test can
 * compare exactly.  Usage: cs_test_threads T ITERS
 * Prints from rank 0: "threads: op NAME calls=C bytes=B" totals over all ranks.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int nthreads = 4, iters = 200, rank, size;
static MPI_Comm comms[64];

static void *worker(void *arg)
{
    int t = (int)(long)arg;
    MPI_Comm c = comms[t];
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    long sbuf[16], rbuf[16];
    for (int i = 0; i < 16; i++)
        sbuf[i] = rank * 1000 + t;
    for (int i = 0; i < iters; i++) {
        MPI_Request req[2];
        MPI_Isend(sbuf, 16, MPI_LONG, next, t, c, &req[0]);
        MPI_Irecv(rbuf, 16, MPI_LONG, prev, t, c, &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        if (rbuf[0] != prev * 1000 + t) {
            fprintf(stderr, "threads: wrong data on rank %d thread %d\n", rank, t);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        long v = 1, sum = 0;
        MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, c);
        if (sum != size) {
            fprintf(stderr, "threads: wrong sum on rank %d\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "threads: MPI_THREAD_MULTIPLE not provided\n");
        MPI_Finalize();
        return 77;
    }
    if (argc > 1)
        nthreads = atoi(argv[1]);
    if (argc > 2)
        iters = atoi(argv[2]);
    if (nthreads < 1 || nthreads > 64)
        nthreads = 4;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int t = 0; t < nthreads; t++)
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    pthread_t th[64];
    for (int t = 0; t < nthreads; t++)
        pthread_create(&th[t], NULL, worker, (void *)(long)t);
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < nthreads; t++)
        MPI_Comm_free(&comms[t]);
    if (rank == 0) {
        long n = (long)size * nthreads * iters;
        printf("threads: op MPI_Isend calls=%ld bytes=%ld\n", n, n * 16 * (long)sizeof(long));
        printf("threads: op MPI_Irecv calls=%ld bytes=%ld\n", n, n * 16 * (long)sizeof(long));
        printf("threads: op MPI_Waitall calls=%ld bytes=0\n", n);
        printf("threads: op MPI_Allreduce calls=%ld bytes=%ld\n", n, n * (long)sizeof(long));
    }
    MPI_Finalize();
    return 0;
}
