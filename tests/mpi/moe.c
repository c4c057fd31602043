/*
 * Test program: a mixture-of-experts training loop (expert parallel x data parallel), the
 * ground truth for commscope's EP rule.  Usage: cs_test_moe [--ep E] [--steps N] [--layers L]
 *
 * The world is cut with MPI_Comm_split into expert-parallel groups of E consecutive ranks (color
 * rank / E; each rank holds one expert) and expert-data-parallel groups of the ranks holding the
 * same expert (color rank % E).  Each step (MPI_Pcontrol(1) at its start), every MoE layer
 * dispatches its tokens to the experts with one MPI_Alltoall in the EP group and combines the
 * results with a second, in forward and again in backward (4 all-to-alls per layer).  Gradients
 * are then averaged: the expert's over its expert-DP group (one MPI_Allreduce), the dense
 * (non-expert) parameters over the whole world (one MPI_Allreduce), both every step.  It prints
 * the communicators with their roles: "cs_moe: group ROLE ranks=A,B,..".
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "print_group.h"

#define D 32   /* token width */
#define TOK 16 /* tokens sent to each expert per all-to-all */

static void expert(double *t, int n, const double *w)
{
    for (int k = 0; k < n; k++) {
        double u = 0;
        for (int j = 0; j < D; j++)
            u += w[j] * t[(k / D) * D + j];
        t[k] = tanh(u + t[k]);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, E = 2, steps = 8, L = 2;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--ep") == 0)
            E = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--layers") == 0)
            L = atoi(argv[i + 1]);
    }
    if (E < 2 || size % E || size / E < 2 || steps < 1 || L < 1 || size > 64) {
        if (rank == 0)
            fprintf(stderr,
                    "cs_test_moe: need --ep >= 2 dividing the world (%d) at least twice,"
                    " --steps and --layers >= 1\n",
                    size);
        MPI_Finalize();
        return 2;
    }
    MPI_Comm ep, edp;
    MPI_Comm_split(MPI_COMM_WORLD, rank / E, rank, &ep);
    MPI_Comm_split(MPI_COMM_WORLD, rank % E, rank, &edp);
    const int n = E * TOK * D; /* one layer's tokens on this rank */
    double *tok = malloc((size_t)n * sizeof *tok), *recv = malloc((size_t)n * sizeof *recv);
    double *we = malloc((size_t)L * D * sizeof *we), *ge = calloc((size_t)L * D, sizeof *ge);
    double *dense = malloc(4 * D * sizeof *dense);
    if (!tok || !recv || !we || !ge || !dense) {
        fprintf(stderr, "cs_test_moe[rank %d]: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < L * D; i++)
        we[i] = 0.2 * sin(0.3 * i + rank % E);
    double check = 0;
    for (int step = 0; step < steps; step++) {
        MPI_Pcontrol(1);
        for (int i = 0; i < n; i++)
            tok[i] = cos(0.01 * i + rank + step);
        for (int pass = 0; pass < 2; pass++) /* forward, then backward */
            for (int l = 0; l < L; l++) {
                const int li = pass ? L - 1 - l : l;
                MPI_Alltoall(tok, TOK * D, MPI_DOUBLE, recv, TOK * D, MPI_DOUBLE, ep);
                expert(recv, n, we + li * D);
                for (int j = 0; j < D; j++)
                    ge[li * D + j] += 1e-3 * recv[j];
                MPI_Alltoall(recv, TOK * D, MPI_DOUBLE, tok, TOK * D, MPI_DOUBLE, ep);
            }
        for (int i = 0; i < 4 * D; i++)
            dense[i] = tok[i];
        MPI_Allreduce(MPI_IN_PLACE, ge, L * D, MPI_DOUBLE, MPI_SUM, edp);
        MPI_Allreduce(MPI_IN_PLACE, dense, 4 * D, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < L * D; i++) {
            we[i] -= 1e-3 * ge[i];
            ge[i] = 0;
        }
        check += dense[0];
    }
    print_group("cs_moe", "ep", ep);
    print_group("cs_moe", "dp", edp);
    if (rank == 0)
        print_group("cs_moe", "dp",
                    MPI_COMM_WORLD); /* the dense parameters' gradients, every step */
    fflush(stdout);
    MPI_Comm_free(&ep);
    MPI_Comm_free(&edp);
    free(tok);
    free(recv);
    free(we);
    free(ge);
    free(dense);
    MPI_Finalize();
    return !isfinite(check);
}
