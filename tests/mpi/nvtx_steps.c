/*
 * An MPI program that marks its training steps with NVTX ranges (the real NVTX v3 header, which
 * needs no GPU and no library: without an injection library every call is a no-op).
 *
 * Each of --steps steps is an NVTX push/pop range "ProfilerStep#K" holding a nested "forward"
 * range (push/pop), a "data" start/end range, a nested "train_step" range (a step name too: only
 * the outermost counts), a busy compute phase and an all-reduce; a mark "checkpoint" follows
 * step 1.  The program measures, on CLOCK_MONOTONIC (the collector's clock),
 * the time just before and just after each push and pop of the step ranges and prints them:
 *   nvtx_steps: rank R step K a=NS b=NS c=NS d=NS
 * (a before the push, b after it, c before the pop, d after it), so the test can hold the recorded
 * range times against them.
 */
#include <mpi.h>
#include <nvtx3/nvToolsExt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double burn(uint64_t ns)
{
    volatile double x = 1;
    uint64_t t0 = now();
    while (now() - t0 < ns)
        for (int i = 0; i < 1000; i++)
            x = x * 1.0000001 + 1e-9;
    return x;
}

int main(int argc, char **argv)
{
    int steps = 6;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double buf[256] = {0}, out[256];
    /* A range that is not a step, before the first step. */
    nvtxRangePushA("setup");
    burn(200000);
    nvtxRangePop();
    for (int k = 0; k < steps; k++) {
        char name[32];
        snprintf(name, sizeof name, "ProfilerStep#%d", k);
        uint64_t a = now();
        nvtxRangePushA(name);
        uint64_t b = now();
        nvtxRangeId_t data = nvtxRangeStartA("data");
        burn(300000);
        nvtxRangeEnd(data);
        nvtxRangePushA("train_step");
        nvtxRangePushA("forward");
        buf[0] = burn(2000000 + 500000 * (uint64_t)rank);
        nvtxRangePop();
        nvtxRangePop();
        MPI_Allreduce(buf, out, 256, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        uint64_t c = now();
        nvtxRangePop();
        uint64_t d = now();
        if (k == 1)
            nvtxMarkA("checkpoint");
        printf("nvtx_steps: rank %d step %d a=%llu b=%llu c=%llu d=%llu\n", rank, k,
               (unsigned long long)a, (unsigned long long)b, (unsigned long long)c,
               (unsigned long long)d);
        /* Time between steps (outside every step range). */
        burn(300000);
    }
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
