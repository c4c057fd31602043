/*
 * cs_bench_allreduce: the cost of one MPI_Allreduce of doubles, run with and without the collector
 * preloaded.  With one rank and 8 bytes (the defaults) it measures what an interception layer
 * adds to every call (bench/overhead.sh); with several ranks and large messages, what the
 * collector costs a job (bench/job_overhead.sh).  Rank 0 prints "ns_per_call=X" for the fastest
 * of R repetitions of M calls, so a descheduled repetition does not count.
 *
 * Rank 0 also prints "floor_ns=X": the fastest of R repetitions of M pairs of clock reads, the
 * two stamps every intercepted call takes (RDTSC on x86-64, where the collector uses the invariant
 * TSC; clock_gettime elsewhere), so that the added cost can be stated against the floor of two
 * clock reads measured in the same run.
 *
 * usage: cs_bench_allreduce [CALLS [REPEATS [BYTES]]]   (defaults 200000, 5 and 8)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

/* ns per pair of clock reads, the fastest of `repeats` runs of `calls` pairs. */
static double clock_floor(long calls, long repeats)
{
    double best = 1e300;
    volatile uint64_t sink = 0;
    for (long r = 0; r < repeats; r++) {
        double t0 = now_ns();
        for (long i = 0; i < calls; i++) {
#if defined(__x86_64__)
            sink += __rdtsc();
            sink += __rdtsc();
#else
            sink += (uint64_t)now_ns();
            sink += (uint64_t)now_ns();
#endif
        }
        double ns = (now_ns() - t0) / (double)calls;
        if (ns < best)
            best = ns;
    }
    (void)sink;
    return best;
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
    long bytes = arg(argv, 3, argc, 8);
    int n = bytes / 8 > 0 ? (int)(bytes / 8) : 1;
    if (bytes / 8 > 1L << 27) {
        fprintf(stderr, "cs_bench_allreduce: %ld bytes is more than this benchmark allocates\n",
                bytes);
        return 2;
    }
    double *in = malloc((size_t)n * sizeof *in), *out = calloc((size_t)n, sizeof *out);
    if (!in || !out) {
        fprintf(stderr, "cs_bench_allreduce: out of memory for %d doubles\n", n);
        return 1;
    }
    for (int i = 0; i < n; i++)
        in[i] = 1.0;
    MPI_Init(&argc, &argv);
    double best = 1e300;
    /* Warm up caches, the collective's setup and the collector's first block. */
    for (long i = 0; i < calls / 10 + 1; i++)
        MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (long r = 0; r < repeats; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_ns();
        for (long i = 0; i < calls; i++)
            MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double ns = (now_ns() - t0) / (double)calls;
        if (ns < best)
            best = ns;
    }
    int size, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Finalize();
    int ok = out[0] == (double)size && out[n - 1] == (double)size;
    if (!ok)
        fprintf(stderr, "cs_bench_allreduce: wrong result %g, %g\n", out[0], out[n - 1]);
    else if (rank == 0)
        printf("ns_per_call=%.2f calls=%ld repeats=%ld bytes=%ld ranks=%d floor_ns=%.2f\n", best,
               calls, repeats, (long)n * 8, size, clock_floor(calls, repeats));
    free(in);
    free(out);
    return !ok;
}
