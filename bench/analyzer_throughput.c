/*
 * Analyzer throughput: events per second through the whole in-process pipeline
 * (commscope/analyzer.h: open + validate every file, align clocks, k-way merge, match, metrics,
 * report model) on a synthetic run written with the test-only trace writer (tests/support/tw.c).
 *
 * The synthetic program does, every step on every rank: Allreduce, Barrier, Bcast and Reduce on
 * world; an Allreduce and an Iallreduce (with its completion and Wait) on a split of the even/odd
 * ranks; an Allgather on a split of groups of four; a Send and a Recv around the ring; an Isend
 * and an Irecv completed by one Waitall.  Every collective event is its own instance (the case the
 * per-instance costs dominate), arrivals are jittered per rank and every rank has its own clock
 * offset and drift, so the clock mapping takes its two-sample path.
 *
 * usage: cs_bench_analyzer [-r RANKS] [-e EVENTS_PER_RANK] [-n REPS] [-d DIR] [-k] [-j JSON]
 *                          [-p PPM]
 *   -d DIR   write the run there (default: a fresh directory under $TMPDIR or /tmp)
 *   -k       keep the run directory (and reuse DIR if it already holds a run of this shape)
 *   -j FILE  also write the JSON report of the last repetition (to diff optimisations)
 *   -p PPM   drift at most PPM of the run's span (default: up to 10 us whatever the span, which
 *            is thousands of ppm in a run of a few steps; real clocks drift tens of ppm)
 * Prints the median, min and max of REPS timed analyses (wall clock, and the process' CPU time,
 * which a shared machine's load moves less); no assertions (timings are noisy).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commscope/analyzer.h"
#include "commscope/ops.h"
#include "tw.h"

#define MAX_RANKS 16384

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of this process: on a shared machine it moves less with the load than wall time. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_state = 0x243f6a8885a308d3ull;

/* xorshift64*: deterministic jitter so every run of the benchmark analyses the same bytes. */
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* Split communicator ids as the collector makes them: (creator world rank + 1) << 32 | counter. */
static uint64_t split_id(int32_t first_member, uint32_t counter)
{
    return ((uint64_t)(first_member + 1) << 32) | counter;
}

struct rank_gen {
    struct tw *w;
    int64_t off0, off1; /* rank 0's clock minus this rank's clock at t = 0 and t = t_span */
    uint64_t t_span;
    uint64_t req; /* next request id */
    uint64_t n;   /* events written */
};

/* Local time for time t of the synthetic program (rank 0's clock reads t + 1 s then), by the
 * linear offset model the analyzer inverts; the 1 s keeps negative offsets off zero. */
static uint64_t loc(const struct rank_gen *g, uint64_t t)
{
    int64_t off =
        g->off0 + (int64_t)((double)(g->off1 - g->off0) * ((double)t / (double)g->t_span));
    return (uint64_t)((int64_t)t + 1000000000 - off);
}

static void put(struct rank_gen *g, uint16_t op, uint64_t tb, uint64_t te, uint64_t comm,
                uint32_t seq, uint64_t bytes, uint64_t bytes_recv, uint16_t flags, int32_t peer,
                uint64_t req)
{
    struct cs_event e = {.t_begin = loc(g, tb),
                         .t_end = loc(g, te),
                         .comm = comm,
                         .bytes = bytes,
                         .bytes_recv = bytes_recv,
                         .request = req,
                         .seq = seq,
                         .peer = peer,
                         .op = op,
                         .flags = flags};
    tw_event(g->w, 0, &e);
    g->n++;
}

/* Events one step writes on one rank (see the file comment). */
#define EVENTS_PER_STEP 16

static int generate(const char *dir, int world, uint64_t per_rank, double ppm)
{
    struct rank_gen g[MAX_RANKS];
    uint64_t steps = per_rank / EVENTS_PER_STEP;
    const uint64_t step_ns = 100000; /* each step spans 100 us on rank 0's clock */
    uint64_t t_span = (steps + 2) * step_ns;
    int32_t all[MAX_RANKS], half[2][MAX_RANKS], quad[MAX_RANKS / 4][4];
    int nhalf[2] = {0, 0};
    for (int r = 0; r < world; r++) {
        all[r] = r;
        half[r % 2][nhalf[r % 2]++] = r;
        quad[r / 4][r % 4] = r;
    }
    for (int r = 0; r < world; r++) {
        struct rank_gen *x = &g[r];
        *x = (struct rank_gen){.w = tw_new(r, world, 0xbe5c4, 7000 + (uint64_t)r),
                               .off0 = r ? (int64_t)(rnd() % 2000000) - 1000000 : 0,
                               .t_span = t_span,
                               .req = 1};
        x->off1 = r ? x->off0 + (int64_t)(rnd() % 20000) - 10000 : 0; /* drift up to 10 us */
        if (ppm > 0) /* drift at most ppm: the same draw, scaled from 10 us to ppm of the span */
            x->off1 = x->off0 +
                      (int64_t)((double)(x->off1 - x->off0) * ppm * 1e-6 * (double)t_span / 10000);
        struct cs_file_header *h = tw_header(x->w);
        h->t_init = loc(x, step_ns / 2);
        h->t_finalize = loc(x, t_span - step_ns / 2);
        h->clock[0] = (struct cs_clock_sample){
            .local_ns = loc(x, 0), .offset_ns = x->off0, .rtt_ns = 2000, .rounds = 10, .valid = 1};
        h->clock[1] = (struct cs_clock_sample){.local_ns = loc(x, t_span),
                                               .offset_ns = x->off1,
                                               .rtt_ns = 2000,
                                               .rounds = 10,
                                               .valid = 1};
        tw_comm(x->w, CS_COMM_WORLD_ID, 0, world, r, all);
        int hr = r % 2, qr = r / 4;
        tw_comm(x->w, split_id(half[hr][0], 0), CS_OP_COMM_SPLIT, nhalf[hr], r / 2, half[hr]);
        int qn = world - qr * 4 < 4 ? world - qr * 4 : 4;
        tw_comm(x->w, split_id(quad[qr][0], 1), CS_OP_COMM_SPLIT, qn, r % 4, quad[qr]);
        put(x, CS_OP_INIT, step_ns / 4, step_ns / 2, 0, 0, 0, 0, 0, -1, 0);
    }
    uint32_t wseq = 0, hseq[2] = {0, 0}, qseq[MAX_RANKS / 4] = {0};
    for (uint64_t s = 0; s < steps; s++) {
        uint64_t t0 = (s + 1) * step_ns;
        /* World collectives: 4 instances, 5 us apart; arrival jitter up to 2 us. */
        static const uint16_t wop[4] = {CS_OP_ALLREDUCE, CS_OP_BARRIER, CS_OP_BCAST, CS_OP_REDUCE};
        static const uint64_t wbytes[4] = {1 << 20, 0, 4096, 65536};
        for (int k = 0; k < 4; k++) {
            uint64_t base = t0 + (uint64_t)k * 5000, arr[MAX_RANKS], last = 0;
            for (int r = 0; r < world; r++) {
                arr[r] = base + rnd() % 2000;
                if (arr[r] > last)
                    last = arr[r];
            }
            int root = (int)(s % (uint64_t)world);
            for (int r = 0; r < world; r++) {
                int rooted = wop[k] == CS_OP_BCAST || wop[k] == CS_OP_REDUCE;
                put(&g[r], wop[k], arr[r], last + 1500 + rnd() % 200, CS_COMM_WORLD_ID, wseq,
                    wbytes[k], wbytes[k], rooted && r == root ? CS_EV_ROOT : 0, rooted ? root : -1,
                    0);
            }
            wseq++;
        }
        /* Halves: Allreduce, then Iallreduce + completion + Wait. */
        for (int hh = 0; hh < 2; hh++) {
            uint64_t id = split_id(half[hh][0], 0);
            uint64_t base = t0 + 25000, last = 0, arr[MAX_RANKS];
            for (int i = 0; i < nhalf[hh]; i++) {
                arr[i] = base + rnd() % 3000;
                if (arr[i] > last)
                    last = arr[i];
            }
            for (int i = 0; i < nhalf[hh]; i++)
                put(&g[half[hh][i]], CS_OP_ALLREDUCE, arr[i], last + 1000, id, hseq[hh], 262144,
                    262144, 0, -1, 0);
            hseq[hh]++;
            base = t0 + 35000;
            uint64_t done = base + 8000;
            for (int i = 0; i < nhalf[hh]; i++) {
                struct rank_gen *x = &g[half[hh][i]];
                uint64_t a = base + rnd() % 3000, req = x->req++;
                put(x, CS_OP_IALLREDUCE, a, a + 300, id, hseq[hh], 131072, 131072,
                    CS_EV_NONBLOCKING, -1, req);
                uint64_t wb = a + 4000 + rnd() % 1000, we = done + rnd() % 500;
                put(x, CS_OP_COMPLETE, we, we, id, hseq[hh], 0, 0, 0, -1, req);
                put(x, CS_OP_WAIT, wb, we, id, 0, 0, 0, 0, -1, 0);
            }
            hseq[hh]++;
        }
        /* Quads: Allgather. */
        for (int q = 0; q * 4 < world; q++) {
            int qn = world - q * 4 < 4 ? world - q * 4 : 4;
            uint64_t id = split_id(quad[q][0], 1), arr[4], last = 0, base = t0 + 50000;
            for (int i = 0; i < qn; i++) {
                arr[i] = base + rnd() % 2500;
                if (arr[i] > last)
                    last = arr[i];
            }
            for (int i = 0; i < qn; i++)
                put(&g[quad[q][i]], CS_OP_ALLGATHER, arr[i], last + 800, id, qseq[q], 32768,
                    32768 * (uint64_t)qn, 0, -1, 0);
            qseq[q]++;
        }
        /* Ring point-to-point: Send/Recv, then Isend/Irecv completed by one Waitall. */
        for (int r = 0; r < world; r++) {
            struct rank_gen *x = &g[r];
            int next = (r + 1) % world, prev = (r + world - 1) % world;
            uint64_t b = t0 + 60000 + rnd() % 1000;
            put(x, CS_OP_SEND, b, b + 2000, CS_COMM_WORLD_ID, 0, 8192, 0, 0, next, 0);
            put(x, CS_OP_RECV, b + 2100, b + 4000, CS_COMM_WORLD_ID, 0, 0, 8192, 0, prev, 0);
            b = t0 + 70000 + rnd() % 1000;
            uint64_t rs = x->req++, rr = x->req++, we = b + 6000 + rnd() % 1000;
            put(x, CS_OP_ISEND, b, b + 200, CS_COMM_WORLD_ID, 0, 16384, 0, CS_EV_NONBLOCKING, next,
                rs);
            put(x, CS_OP_IRECV, b + 300, b + 500, CS_COMM_WORLD_ID, 0, 0, 16384, CS_EV_NONBLOCKING,
                prev, rr);
            put(x, CS_OP_COMPLETE, we - 100, we - 100, CS_COMM_WORLD_ID, 0, 0, 0, 0, next, rs);
            put(x, CS_OP_COMPLETE, we, we, CS_COMM_WORLD_ID, 0, 0, 0, 0, prev, rr);
            put(x, CS_OP_WAITALL, b + 1000, we, CS_COMM_WORLD_ID, 0, 0, 0, 0, -1, 0);
        }
    }
    uint64_t total = 0;
    for (int r = 0; r < world; r++) {
        put(&g[r], CS_OP_FINALIZE, t_span - step_ns / 2, t_span - step_ns / 4, 0, 0, 0, 0, 0, -1,
            0);
        char path[4200];
        snprintf(path, sizeof path, "%s/rank-%05d.cst", dir, r);
        long sz = tw_write(g[r].w, path, NULL);
        total += g[r].n;
        tw_free(g[r].w);
        if (sz < 0) {
            fprintf(stderr, "cs_bench_analyzer: cannot write %s: %s\n", path, strerror(errno));
            return -1;
        }
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int world = 16, reps = 5, keep = 0;
    uint64_t per_rank = 500000;
    const char *dir_arg = NULL, *json = NULL;
    int opt;
    double ppm = 0;
    while ((opt = getopt(argc, argv, "r:e:n:d:kj:p:")) != -1) {
        switch (opt) {
        case 'r':
            world = atoi(optarg);
            break;
        case 'e':
            per_rank = strtoull(optarg, NULL, 10);
            break;
        case 'n':
            reps = atoi(optarg);
            break;
        case 'd':
            dir_arg = optarg;
            break;
        case 'k':
            keep = 1;
            break;
        case 'j':
            json = optarg;
            break;
        case 'p':
            ppm = atof(optarg);
            break;
        default:
            fprintf(stderr,
                    "usage: %s [-r RANKS] [-e EVENTS_PER_RANK] [-n REPS] [-d DIR] [-k]"
                    " [-j JSON] [-p PPM]\n",
                    argv[0]);
            return 2;
        }
    }
    if (world < 2 || world > MAX_RANKS || reps < 1 || reps > 100 ||
        per_rank < 2 * EVENTS_PER_STEP) {
        fprintf(stderr,
                "cs_bench_analyzer: need 2 <= RANKS <= %d, 1 <= REPS <= 100, EVENTS >= %d\n",
                MAX_RANKS, 2 * EVENTS_PER_STEP);
        return 2;
    }
    char dir[4096];
    if (dir_arg) {
        snprintf(dir, sizeof dir, "%s", dir_arg);
        mkdir(dir, 0755);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/cs_bench_analyzer.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            fprintf(stderr, "cs_bench_analyzer: mkdtemp %s: %s\n", dir, strerror(errno));
            return 1;
        }
    }
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/rank-%05d.cst", dir, world - 1);
    struct stat st;
    int reuse = keep && dir_arg && stat(probe, &st) == 0;
    double t = now_s();
    if (!reuse && generate(dir, world, per_rank, ppm))
        return 1;
    if (!reuse)
        printf("generated %d ranks x ~%" PRIu64 " events in %s (%.2f s)\n", world, per_rank, dir,
               now_s() - t);

    double tm[100], tl[100], tc[100];
    uint64_t events = 0;
    for (int i = 0; i < reps; i++) {
        struct cs_analysis *a;
        char err[512] = "";
        /* The analysis timed in two parts: open + validate, then the analysis. */
        t = now_s();
        double c0 = cpu_s();
        int rc = cs_analysis_open(&a, dir, NULL, err, sizeof err);
        tl[i] = now_s() - t;
        if (!rc)
            rc = cs_analysis_run(a);
        tm[i] = now_s() - t;
        tc[i] = cpu_s() - c0;
        if (rc) {
            fprintf(stderr, "cs_bench_analyzer: analysis failed: %s\n",
                    err[0] ? err : cs_strerror(rc));
            cs_analysis_free(a);
            return 1;
        }
        const struct cs_report *rep = cs_analysis_report(a);
        events = rep->events;
        if (i == 0)
            printf("events %" PRIu64 ", matched instances %" PRIu64 ", incomplete %" PRIu64
                   ", problems %zu\n",
                   rep->events, rep->matched, rep->incomplete, rep->nproblems);
        if (i == reps - 1 && json) {
            FILE *f = fopen(json, "w");
            if (!f || cs_report_write_json(rep, f) || fclose(f)) {
                fprintf(stderr, "cs_bench_analyzer: cannot write %s\n", json);
                cs_analysis_free(a);
                return 1;
            }
        }
        cs_analysis_free(a);
    }
    qsort(tm, (size_t)reps, sizeof *tm, cmp_double);
    qsort(tl, (size_t)reps, sizeof *tl, cmp_double);
    qsort(tc, (size_t)reps, sizeof *tc, cmp_double);
    double med = tm[reps / 2];
    printf("load + analyze: median %.3f s (min %.3f, max %.3f, %d reps) = %.2f M events/s\n", med,
           tm[0], tm[reps - 1], reps, (double)events / med / 1e6);
    printf("  CPU time: median %.3f s (min %.3f, max %.3f) = %.2f M events/s per core\n",
           tc[reps / 2], tc[0], tc[reps - 1], (double)events / tc[reps / 2] / 1e6);
    printf("  of which open + validate: median %.3f s (%.2f M events/s alone)\n", tl[reps / 2],
           (double)events / tl[reps / 2] / 1e6);
    if (!keep) {
        for (int r = 0; r < world; r++) {
            snprintf(probe, sizeof probe, "%s/rank-%05d.cst", dir, r);
            unlink(probe);
        }
        rmdir(dir);
    }
    return 0;
}
