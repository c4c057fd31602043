/*
 * Test program for clock alignment.  Every rank brackets each of N MPI_Barrier calls with its own
 * CLOCK_MONOTONIC readings (which on one host are the same clock on every rank, so they are the
 * truth the analyzer's alignment must reproduce), sleeping between calls so that an injected
 * drift accumulates, and writes "begin end" lines (ns) to OUT_PREFIX-rank-R.txt.
 * Usage: cs_test_clockcheck N SLEEP_US OUT_PREFIX
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 20;
    int sleep_us = argc > 2 ? atoi(argv[2]) : 20000;
    const char *prefix = argc > 3 ? argv[3] : "clockcheck";
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long long *t = calloc(2 * (size_t)n, sizeof *t);
    for (int i = 0; i < n; i++) {
        usleep(sleep_us);
        t[2 * i] = now_ns();
        MPI_Barrier(MPI_COMM_WORLD);
        t[2 * i + 1] = now_ns();
    }
    char path[4096];
    snprintf(path, sizeof path, "%s-rank-%d.txt", prefix, rank);
    FILE *f = fopen(path, "w");
    if (f) {
        for (int i = 0; i < n; i++)
            fprintf(f, "%lld %lld\n", t[2 * i], t[2 * i + 1]);
        fclose(f);
    }
    free(t);
    MPI_Finalize();
    return f ? 0 : 1;
}
