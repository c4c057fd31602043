/*
 * Test program: a 1-D halo exchange on a ring by MPI_Sendrecv and MPI_Sendrecv_replace, the
 * ground truth for the what-if replay of Sendrecv.  Usage: cs_test_halo [--steps N]
 * [--slow-rank R] [--slow-factor F]
 *
 * Each step (MPI_Pcontrol(1) at its start): compute on the local cells (rank R computes F times
 * as long), then the halo exchange with both ring neighbours: MPI_Sendrecv of the right edge to
 * the right neighbour (tag 1) receiving the left halo from the left neighbour (the right
 * neighbour's message tag 1), then MPI_Sendrecv_replace of the left edge to the left neighbour
 * (tag 2) receiving the right halo from the right neighbour in place.  It prints
 * "cs_halo: sendrecv N" with the number of Sendrecv calls of this rank.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4096 /* cells per rank */
#define H 512  /* halo width (doubles) */

static double cell[N + 2 * H];

static void compute(int reps)
{
    for (int r = 0; r < reps; r++)
        for (int i = H; i < N + H; i++)
            cell[i] = 0.5 * cell[i] + 0.25 * (sin(cell[i - 1]) + cos(cell[i + 1]));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, steps = 10, slow = -1, factor = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--slow-rank") == 0)
            slow = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--slow-factor") == 0)
            factor = atoi(argv[i + 1]);
    }
    if (steps < 1 || factor < 1) {
        if (rank == 0)
            fprintf(stderr, "usage: cs_test_halo [--steps N] [--slow-rank R] [--slow-factor F]\n");
        MPI_Finalize();
        return 2;
    }
    for (int i = 0; i < N + 2 * H; i++)
        cell[i] = (double)(rank * N + i) / (double)(size * N);
    int left = (rank + size - 1) % size, right = (rank + 1) % size, calls = 0;
    for (int s = 0; s < steps; s++) {
        MPI_Pcontrol(1);
        compute(rank == slow ? 6 * factor : 6);
        MPI_Sendrecv(cell + N, H, MPI_DOUBLE, right, 1, cell, H, MPI_DOUBLE, left, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        static double edge[H];
        memcpy(edge, cell + H, sizeof edge);
        MPI_Sendrecv_replace(edge, H, MPI_DOUBLE, left, 2, right, 2, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
        memcpy(cell + N + H, edge, sizeof edge);
        calls += 2;
    }
    MPI_Pcontrol(0);
    double sum = 0, all = 0;
    for (int i = H; i < N + H; i++)
        sum += cell[i];
    MPI_Allreduce(&sum, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    printf("cs_halo: sendrecv %d checksum %.6f\n", calls, all);
    MPI_Finalize();
    return 0;
}
