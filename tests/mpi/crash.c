/*
 * Test program: every rank does N 8-byte MPI_Allreduce calls; then rank KILL_RANK sends itself
 * SIGKILL (so its trace is never closed) while the others wait in a barrier that can never
 * complete (mpirun then ends them).  Usage: cs_test_crash N KILL_RANK
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 10;
    int victim = argc > 2 ? atoi(argv[2]) : 1;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double x = rank, y = 0;
    for (int i = 0; i < n; i++)
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rank == victim) {
        fflush(stdout);
        raise(SIGKILL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
