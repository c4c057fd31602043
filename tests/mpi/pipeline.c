/*
 * Test program: a pipeline-parallel training loop (optionally x data parallel), the ground truth
 * for commscope's PP rule.  Usage: cs_test_pipeline [--pp P] [--steps N] [--micro M]
 *
 * The world is cut into pipelines of P consecutive ranks (stage = rank % P).  With P equal to
 * the world size the pipeline runs over MPI_COMM_WORLD itself; otherwise MPI_Comm_split makes
 * one pipeline communicator per replica (color rank / P) and one data-parallel communicator per
 * stage (color rank % P).  Each step (MPI_Pcontrol(1) at its start) pushes M micro-batches
 * through the stages GPipe style: forward, stage s receives activations from s-1 (MPI_Recv),
 * computes and sends them to s+1 (MPI_Send); backward, stage s receives the gradient from s+1
 * (MPI_Irecv + MPI_Wait), computes and sends it to s-1 (MPI_Isend + MPI_Wait).  Then, with a
 * DP communicator, the stage's weight gradient is averaged over it (one MPI_Allreduce), and
 * every 5th step the loss is all-reduced over the world.  It prints the communicators it made,
 * with the role each plays: "cs_pipeline: group ROLE ranks=A,B,..".
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "print_group.h"

#define W 48 /* activation width */
#define B 16 /* samples per micro-batch */

static void compute(double *x, const double *w, int reps)
{
    double t[W];
    for (int r = 0; r < reps; r++)
        for (int b = 0; b < B; b++) {
            for (int i = 0; i < W; i++) {
                double u = 0;
                for (int j = 0; j < W; j++)
                    u += w[i * W + j] * x[b * W + j];
                t[i] = tanh(u);
            }
            memcpy(x + b * W, t, sizeof t);
        }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, P = 0, steps = 8, M = 4;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--pp") == 0)
            P = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--micro") == 0)
            M = atoi(argv[i + 1]);
    }
    if (P == 0)
        P = size;
    if (P < 2 || size % P || steps < 1 || M < 1 || size > 64) {
        if (rank == 0)
            fprintf(stderr,
                    "cs_test_pipeline: need --pp >= 2 dividing the world (%d), --steps"
                    " and --micro >= 1\n",
                    size);
        MPI_Finalize();
        return 2;
    }
    const int stage = rank % P;
    MPI_Comm pp = MPI_COMM_WORLD, dp = MPI_COMM_NULL;
    if (P < size) {
        MPI_Comm_split(MPI_COMM_WORLD, rank / P, rank, &pp);
        MPI_Comm_split(MPI_COMM_WORLD, stage, rank, &dp);
    }
    double *w = malloc(W * W * sizeof *w), *gw = calloc(W * W, sizeof *gw);
    double *x = malloc((size_t)B * W * sizeof *x);
    if (!w || !gw || !x) {
        fprintf(stderr, "cs_test_pipeline[rank %d]: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < W * W; i++)
        w[i] = 0.1 * sin(0.37 * i + stage);
    const int n = B * W;
    double loss = 0;
    for (int step = 0; step < steps; step++) {
        MPI_Pcontrol(1);
        for (int m = 0; m < M; m++) { /* forward */
            if (stage == 0)
                for (int i = 0; i < n; i++)
                    x[i] = cos(0.01 * i + m + step);
            else
                MPI_Recv(x, n, MPI_DOUBLE, stage - 1, m, pp, MPI_STATUS_IGNORE);
            compute(x, w, 2);
            if (stage < P - 1)
                MPI_Send(x, n, MPI_DOUBLE, stage + 1, m, pp);
            else
                loss += x[0] * x[0];
        }
        for (int m = 0; m < M; m++) { /* backward */
            MPI_Request rq;
            if (stage < P - 1) {
                MPI_Irecv(x, n, MPI_DOUBLE, stage + 1, 1000 + m, pp, &rq);
                MPI_Wait(&rq, MPI_STATUS_IGNORE);
            }
            compute(x, w, 2);
            for (int i = 0; i < W * W; i++)
                gw[i] += 1e-3 * x[i % n];
            if (stage > 0) {
                MPI_Isend(x, n, MPI_DOUBLE, stage - 1, 1000 + m, pp, &rq);
                MPI_Wait(&rq, MPI_STATUS_IGNORE);
            }
        }
        if (dp != MPI_COMM_NULL)
            MPI_Allreduce(MPI_IN_PLACE, gw, W * W, MPI_DOUBLE, MPI_SUM, dp);
        for (int i = 0; i < W * W; i++) {
            w[i] -= 1e-3 * gw[i];
            gw[i] = 0;
        }
        if (step % 5 == 4)
            MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    if (rank == 0 || pp != MPI_COMM_WORLD) {
        print_group("cs_pipeline", "pp", pp);
        if (dp != MPI_COMM_NULL)
            print_group("cs_pipeline", "dp", dp);
        if (pp != MPI_COMM_WORLD && rank == 0)
            print_group("cs_pipeline", "other",
                        MPI_COMM_WORLD); /* a loss all-reduce every 5th step */
    }
    fflush(stdout);
    if (pp != MPI_COMM_WORLD)
        MPI_Comm_free(&pp);
    if (dp != MPI_COMM_NULL)
        MPI_Comm_free(&dp);
    free(w);
    free(gw);
    free(x);
    MPI_Finalize();
    return loss < 0; /* loss is a sum of squares: never */
}
