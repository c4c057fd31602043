/*
 * cs_bench_allreduce: the cost of one 8-byte MPI_Allreduce on one rank, the figure that measures
 * what an interception layer adds to every call (run with and without the collector preloaded by
 * bench/overhead.sh).  Prints "ns_per_call=X" for the fastest of R repetitions of M calls, so a
 * descheduled repetition does not count.
 *
 * usage: cs_bench_allreduce [CALLS [REPEATS]]   (defaults 200000 and 5)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

static long arg(char **argv, int i, int argc, long def)
{
    if (i >= argc)
        return def;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*argv[i] == '\0' || *end != '\0' || v < 1) {
        fprintf(stderr, "cs_bench_allreduce: '%s' is not a positive count\n", argv[i]);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    long calls = arg(argv, 1, argc, 200000);
    long repeats = arg(argv, 2, argc, 5);
    MPI_Init(&argc, &argv);
    double in = 1.0, out = 0.0, best = 1e300;
    /* Warm up caches, the collective's setup and the collector's first block. */
    for (long i = 0; i < calls / 10 + 1; i++)
        MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (long r = 0; r < repeats; r++) {
        double t0 = now_ns();
        for (long i = 0; i < calls; i++)
            MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double ns = (now_ns() - t0) / (double)calls;
        if (ns < best)
            best = ns;
    }
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Finalize();
    if (out != (double)size) {
        fprintf(stderr, "cs_bench_allreduce: wrong result %g\n", out);
        return 1;
    }
    printf("ns_per_call=%.2f calls=%ld repeats=%ld\n", best, calls, repeats);
    return 0;
}
