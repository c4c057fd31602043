/*
 * The per-peer wire test's MPI job: a barrier (0 bytes: every capture is running), then ITERS
 * messages from each rank r to rank r+1 (mod size) of BYTES x (r + 1) bytes, so that each host
 * pair carries its own, known amount.  No other communication crosses between the hosts.
 * With CS_P2P_LISTEN set, rank 1 runs it with system() before the barrier (a listener for
 * traffic from outside MPI); with CS_P2P_EXTRA set, rank 0 runs it after the barrier (traffic
 * the trace does not know about).  Prints "wire_p2p ok" from rank 0 when every message arrived
 * intact.
 * usage: cs_wire_p2p ITERS BYTES
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
    int iters = argc > 1 ? atoi(argv[1]) : 4;
    long bytes = argc > 2 ? atol(argv[2]) : 1 << 20;
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    long out = bytes * (rank + 1), in = bytes * (from + 1);
    unsigned char *s = malloc((size_t)out), *r = malloc((size_t)in);
    if (!s || !r)
        MPI_Abort(MPI_COMM_WORLD, 1);
    const char *listen = getenv("CS_P2P_LISTEN"), *extra = getenv("CS_P2P_EXTRA");
    if (rank == 1 && listen && *listen && system(listen) != 0)
        fprintf(stderr, "wire_p2p: CS_P2P_LISTEN failed\n");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && extra && *extra && system(extra) != 0)
        fprintf(stderr, "wire_p2p: CS_P2P_EXTRA failed\n");
    int ok = 1;
    for (int it = 0; it < iters; it++) {
        for (long i = 0; i < out; i++)
            s[i] = (unsigned char)(rank * 31 + it + i);
        MPI_Request q;
        MPI_Irecv(r, (int)in, MPI_BYTE, from, it, MPI_COMM_WORLD, &q);
        MPI_Send(s, (int)out, MPI_BYTE, to, it, MPI_COMM_WORLD);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        for (long i = 0; i < in && ok; i++)
            ok = r[i] == (unsigned char)(from * 31 + it + i);
    }
    int all = 0;
    MPI_Reduce(&ok, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("wire_p2p %s\n", all == size ? "ok" : "WRONG RESULTS");
    free(s);
    free(r);
    MPI_Finalize();
    return rank == 0 && all != size;
}
