/*
 * The analysis on synthetic traces with exactly known times: matching, waits, skew, stragglers,
 * load balance, bandwidths, clock alignment, causality repair, and run-directory problems through
 * cs_cmd_analyze() (exit codes and messages).
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "cs_test.h"
#include "internal.h"
#include "steps.h"
#include "tw.h"

static char root[256];

/* Rank r's local clock is rank 0's clock minus off[r] (so offset_ns = off[r]). */
static const int64_t off4[4] = {0, 0, -7000000, 0};

struct wr {
    struct tw *w;
    int64_t off;
};

static void ev(struct wr *x, uint16_t op, uint64_t tb, uint64_t te, uint64_t comm, uint32_t seq,
               uint64_t bytes, uint16_t flags, int32_t peer, uint64_t req)
{
    struct cs_event e = {.t_begin = (uint64_t)((int64_t)tb - x->off),
                         .t_end = (uint64_t)((int64_t)te - x->off),
                         .comm = comm,
                         .bytes = bytes,
                         .bytes_recv = bytes,
                         .request = req,
                         .seq = seq,
                         .peer = peer,
                         .op = op,
                         .flags = flags};
    tw_event(x->w, 0, &e);
}

static struct wr begin(int rank, int world, uint64_t run_id, int64_t off)
{
    struct wr x = {tw_new(rank, world, run_id, 1000 + (uint64_t)rank), off};
    struct cs_file_header *h = tw_header(x.w);
    h->t_init = (uint64_t)(1000 - off);
    h->t_finalize = (uint64_t)(100000 - off);
    for (int i = 0; i < 2; i++) {
        h->clock[i].valid = 1;
        h->clock[i].local_ns = (uint64_t)((i ? 100000 : 1000) - off);
        h->clock[i].offset_ns = off;
        h->clock[i].rounds = 10;
        h->clock[i].rtt_ns = 0;
    }
    int32_t m[64];
    for (int i = 0; i < world; i++)
        m[i] = i;
    tw_comm(x.w, CS_COMM_WORLD_ID, 0, world, rank, m);
    ev(&x, CS_OP_INIT, 500, 1000, 0, 0, 0, 0, -1, 0);
    return x;
}

/* Replace rank's file in dir (of a world of 4) by one of run run_id that holds only Init and
 * Finalize. */
static void rank_of_run(const char *dir, int rank, uint64_t run_id)
{
    struct wr x = begin(rank, 4, run_id, 0);
    char p[512];
    snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, rank);
    ev(&x, CS_OP_FINALIZE, 100000, 100500, 0, 0, 0, 0, -1, 0);
    tw_write(x.w, p, NULL);
    tw_free(x.w);
}

static void finish(struct wr *x, const char *dir, int rank, const struct tw_opts *o)
{
    if (!o || !o->partial)
        ev(x, CS_OP_FINALIZE, 100000, 100500, 0, 0, 0, 0, -1, 0);
    char p[512];
    snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, rank);
    CHECK(tw_write(x->w, p, o) > 0);
    tw_free(x->w);
}

#define SPLIT ((2ull << 32) | 0) /* created by world rank 1: members {1, 3} */

/*
 * Five instances with known arrivals (rank 0's clock):
 *   seq 0 Allreduce 1 KiB: arrive 10000 12000 11000 20000, all end 21000
 *   seq 1 Barrier:         arrive 30000 30000 35000 31000, all end 36000
 *   seq 2 Bcast root 1:    arrive 40000 45000 46000 41000, all end 47000
 *   seq 3 Reduce root 0:   arrive 50000 52000 51000 58000, all end 59000
 *   split seq 0 Iallreduce 512 B on {1, 3}: start 60000 / 61000 (100 ns calls), Wait 62000 /
 *   63000 .. 65000 with the completion at 65000.
 */
static void write_four(const char *dir, int partial_rank)
{
    static const uint64_t arr[4][4] = {{10000, 12000, 11000, 20000},
                                       {30000, 30000, 35000, 31000},
                                       {40000, 45000, 46000, 41000},
                                       {50000, 52000, 51000, 58000}};
    static const uint16_t ops[4] = {CS_OP_ALLREDUCE, CS_OP_BARRIER, CS_OP_BCAST, CS_OP_REDUCE};
    static const uint64_t end[4] = {21000, 36000, 47000, 59000};
    static const uint64_t bytes[4] = {1024, 0, 4096, 2048};
    static const int roots[4] = {-1, -1, 1, 0};
    mkdir(dir, 0755);
    for (int r = 0; r < 4; r++) {
        struct wr x = begin(r, 4, 0xabcdef, off4[r]);
        if (r == 1 || r == 3) {
            int32_t m[2] = {1, 3};
            tw_comm(x.w, SPLIT, CS_OP_COMM_SPLIT, 2, r == 3, m);
        }
        int n = r == partial_rank ? 2 : 4; /* the partial rank dies after seq 1 */
        for (int k = 0; k < n; k++)
            ev(&x, ops[k], arr[k][r], end[k], CS_COMM_WORLD_ID, (uint32_t)k, bytes[k],
               roots[k] == r ? CS_EV_ROOT : 0, roots[k], 0);
        if ((r == 1 || r == 3) && r != partial_rank) {
            uint64_t t0 = r == 1 ? 60000 : 61000, tw0 = r == 1 ? 62000 : 63000;
            ev(&x, CS_OP_IALLREDUCE, t0, t0 + 100, SPLIT, 0, 512, CS_EV_NONBLOCKING, -1, 7);
            ev(&x, CS_OP_COMPLETE, 65000, 65000, SPLIT, 0, 0, 0, -1, 7);
            ev(&x, CS_OP_WAIT, tw0, 65000, SPLIT, 0, 0, 0, -1, 0);
        }
        struct tw_opts po = {.partial = 1, .unsealed = 1, .zero_blocks = 2};
        finish(&x, dir, r, r == partial_rank ? &po : NULL);
    }
}

static void test_four_ranks(void)
{
    char dir[300], err[512];
    snprintf(dir, sizeof dir, "%s/four", root);
    write_four(dir, -1);
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    for (size_t i = 0; i < run.nproblems; i++)
        fprintf(stderr, "unexpected problem: %s\n", run.problems[i]);
    CHECK_INT(run.nproblems, ==, 0);
    CHECK_INT(rep.nranks, ==, 4);
    CHECK_INT(rep.matched, ==, 5);
    CHECK_INT(rep.incomplete, ==, 0);
    CHECK_INT(rep.violations_repaired, ==, 0);
    /* Skews 10000, 5000, 6000, 8000, 1000 ns. */
    CHECK_NEAR(rep.mean_skew_s, 6000e-9, 1e-15);
    CHECK_NEAR(rep.max_skew_s, 10000e-9, 1e-15);
    if (rep.nranks == 4) {
        /* Waits: allreduce 10000 8000 9000 0; barrier 5000 5000 0 4000; bcast (root 1)
         * 5000 0 0 4000; reduce (root 0) 8000 0 0 0; iallreduce on {1,3}: 1000 for rank 1. */
        CHECK_NEAR(rep.ranks[0].wait_s, 28000e-9, 1e-15);
        CHECK_NEAR(rep.ranks[1].wait_s, 14000e-9, 1e-15);
        CHECK_NEAR(rep.ranks[2].wait_s, 9000e-9, 1e-15);
        CHECK_NEAR(rep.ranks[3].wait_s, 8000e-9, 1e-15);
        /* Comm time: durations of the calls (the Wait included, completion records not). */
        CHECK_NEAR(rep.ranks[0].comm_s, 33000e-9, 1e-15);
        CHECK_NEAR(rep.ranks[1].comm_s, 27100e-9, 1e-15);
        CHECK_NEAR(rep.ranks[2].comm_s, 20000e-9, 1e-15);
        CHECK_NEAR(rep.ranks[3].comm_s, 15100e-9, 1e-15);
        for (int r = 0; r < 4; r++) {
            CHECK_NEAR(rep.ranks[r].wall_s, 99000e-9, 1e-15);
            CHECK_INT(rep.ranks[r].partial, ==, 0);
        }
        CHECK_INT(rep.ranks[1].calls, ==, 6);
        CHECK_INT(rep.ranks[0].calls, ==, 4);
        CHECK_INT(rep.ranks[1].bytes, ==, 1024 + 4096 + 2048 + 512);
        CHECK_NEAR(rep.ranks[2].offset_init_s, -7e-3, 1e-15);
        CHECK_NEAR(rep.max_offset_s, 7e-3, 1e-15);
    }
    /* compute = 66000 71900 79000 83900: mean 75200, max 83900, max wall 99000. */
    CHECK_NEAR(rep.load_balance, 75200.0 / 83900.0, 1e-12);
    CHECK_NEAR(rep.communication_efficiency, 83900.0 / 99000.0, 1e-12);
    CHECK_NEAR(rep.parallel_efficiency, 75200.0 / 99000.0, 1e-12);
    /* POP split: waiting w_r = min(wait_s, comm_s) = 28000 14000 9000 8000, compute + w =
     * 94000 85900 88000 91900, so T_ideal = min(99000, 94000) = 94000. */
    CHECK(rep.steps != NULL);
    if (rep.steps) {
        CHECK_NEAR(rep.steps->serialization_efficiency, 83900.0 / 94000.0, 1e-12);
        CHECK_NEAR(rep.steps->transfer_efficiency, 94000.0 / 99000.0, 1e-12);
        CHECK_NEAR(rep.steps->serialization_efficiency * rep.steps->transfer_efficiency,
                   rep.communication_efficiency, 1e-12);
        /* No call repeats: no steps, so no what-if either, and the report says why. */
        CHECK_INT(rep.steps->count, ==, 0);
        CHECK(isnan(rep.steps->whatif.replayed_step_s));
        CHECK(isnan(rep.steps->whatif.no_straggler_step_s));
        CHECK(rep.steps->whatif.note[0] != 0);
    }
    /* Rank 3 last at allreduce (others waited 27000), reduce (8000), iallreduce (1000);
     * rank 2 last at the barrier (14000).  The bcast's late rank 2 does not count (1toN). */
    CHECK_INT(rep.nstragglers, ==, 2);
    if (rep.nstragglers == 2) {
        CHECK_INT(rep.stragglers[0].rank, ==, 3);
        CHECK_INT(rep.stragglers[0].late_arrivals, ==, 3);
        CHECK_NEAR(rep.stragglers[0].others_waited_s, 36000e-9, 1e-15);
        CHECK_INT(rep.stragglers[1].rank, ==, 2);
        CHECK_INT(rep.stragglers[1].late_arrivals, ==, 1);
        CHECK_NEAR(rep.stragglers[1].others_waited_s, 14000e-9, 1e-15);
    }
    int seen = 0;
    for (size_t i = 0; i < rep.nops; i++) {
        const struct cs_report_op *o = &rep.ops[i];
        if (!strcmp(o->op, "MPI_Allreduce")) {
            seen++;
            CHECK_STR(o->comm, "world");
            CHECK_INT(o->calls, ==, 4);
            CHECK_INT(o->bytes, ==, 4096);
            CHECK_NEAR(o->time_s, (11000 + 9000 + 10000 + 1000) * 1e-9, 1e-15);
            CHECK_NEAR(o->algbw_gbps, 1024.0 / 1000.0, 1e-12); /* S / (last end - last arrival) */
            CHECK_NEAR(o->busbw_gbps, 1.024 * 1.5, 1e-12);
        } else if (!strcmp(o->op, "MPI_Iallreduce")) {
            seen++;
            CHECK_STR(o->comm, "comm-0000000200000000");
            CHECK_INT(o->comm_size, ==, 2);
            CHECK_INT(o->calls, ==, 2);
            CHECK_NEAR(o->algbw_gbps, 512.0 / 4000.0, 1e-12);
            CHECK_NEAR(o->busbw_gbps, 512.0 / 4000.0, 1e-12);
        } else if (!strcmp(o->op, "MPI_Barrier")) {
            seen++;
            CHECK_NEAR(o->busbw_gbps, 0.0, 0);
        } else if (!strcmp(o->op, "MPI_Wait")) {
            seen++;
            CHECK(isnan(o->algbw_gbps));
        }
    }
    CHECK_INT(seen, ==, 4);
    CHECK_INT(rep.events, ==, 4 * 6 + 2 * 3);
    cs__report_free(&rep);
    cs__run_free(&run);
}

/* Two ranks that arrive at one all-reduce after computing c0 and c1 ns (from t_init 1000); the
 * verdict's balance statements (kinds), with compute a small or a material share. */
static int balance_finding(uint64_t c0, uint64_t c1)
{
    char dir[300], err[512];
    snprintf(dir, sizeof dir, "%s/balance-%llu-%llu", root, (unsigned long long)c0,
             (unsigned long long)c1);
    mkdir(dir, 0755);
    for (int r = 0; r < 2; r++) {
        struct wr x = begin(r, 2, 0xba1, 0);
        ev(&x, CS_OP_ALLREDUCE, 1000 + (r ? c1 : c0), 99000, CS_COMM_WORLD_ID, 0, 8, 0, -1, 0);
        finish(&x, dir, r, NULL);
    }
    struct cs__run run;
    struct cs_report rep;
    int kind = -1;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    for (size_t i = 0; rep.views && i < rep.views->nfindings; i++)
        if (rep.views->findings[i].kind == CS_FIND_IMBALANCE ||
            rep.views->findings[i].kind == CS_FIND_BALANCED)
            kind = (int)rep.views->findings[i].kind;
    cs__report_free(&rep);
    cs__run_free(&run);
    return kind;
}

static void test_balance_material(void)
{
    /* compute 1000 and 3000 of 98000 + 500 wall each: 2 %, no statement (load balance 0.67) */
    CHECK_INT(balance_finding(1000, 3000), ==, -1);
    /* 20000 and 60000: 41 % of the wall, imbalanced */
    CHECK_INT(balance_finding(20000, 60000), ==, (int)CS_FIND_IMBALANCE);
    /* 60000 and 61000: balanced */
    CHECK_INT(balance_finding(60000, 61000), ==, (int)CS_FIND_BALANCED);
}

static void test_clock_map(void)
{
    struct cs_file_header h = {0};
    h.clock[0] = (struct cs_clock_sample){
        .local_ns = 1000000, .offset_ns = 5000000, .valid = 1, .rtt_ns = 800};
    h.clock[1] = (struct cs_clock_sample){
        .local_ns = 101000000, .offset_ns = 5000100, .valid = 1, .rtt_ns = 600};
    struct cs__clock c;
    cs__clock_init(&c, &h);
    CHECK_INT(c.valid, ==, 2);
    CHECK_INT(cs__clock_map(&c, 1000000), ==, 6000000);
    CHECK_INT(cs__clock_map(&c, 51000000), ==, 56000050);
    CHECK_INT(cs__clock_map(&c, 101000000), ==, 106000100);
    CHECK_INT(cs__clock_map(&c, 201000000), ==, 206000200); /* extrapolated */
    CHECK_INT(cs__clock_map(&c, 0), ==, 4999999);
    CHECK_NEAR(cs__clock_drift_ppm(&c), 1.0, 1e-12);
    CHECK_INT(c.rtt_max, ==, 800);
    h.clock[1].valid = 0; /* one sample: a constant offset */
    cs__clock_init(&c, &h);
    CHECK_INT(c.valid, ==, 1);
    CHECK_INT(cs__clock_map(&c, 777777777), ==, 782777777);
    CHECK_NEAR(cs__clock_drift_ppm(&c), 0.0, 0);
}

/* The mapping's definition in 128-bit integers, independent of cs__clock_map's fast paths. */
static int64_t ref_map(const struct cs_clock_sample *s0, const struct cs_clock_sample *s1,
                       uint64_t t)
{
    __int128 num =
        (__int128)(s1->offset_ns - s0->offset_ns) * ((__int128)t - (__int128)s0->local_ns);
    __int128 den = (__int128)s1->local_ns - (__int128)s0->local_ns;
    if (den < 0) {
        num = -num;
        den = -den;
    }
    __int128 q = num >= 0 ? (num + den / 2) / den : -((-num + den / 2) / den);
    return (int64_t)((__int128)t + s0->offset_ns + q);
}

/* Exact rounding (ties away from zero) for slopes of either sign, samples in either order,
 * denominators 1, 2 and powers of two, times far outside the samples, and inputs whose products
 * overflow 64 bits (the 128-bit path). */
static void test_clock_map_exact(void)
{
    static const int64_t offs[] = {0,       1,         -1,           3,          -7, 1000,
                                   -999999, 123456789, -(1ll << 40), (1ll << 62)};
    static const uint64_t l0s[] = {0, 1, 1000000, 1ull << 40, (1ull << 63) + 5};
    static const uint64_t dens[] = {1, 2, 3, 7, 64, 1000, 999983, 1ull << 33, 1ull << 62};
    static const uint64_t ts[] = {
        0,          1,    2, 3, 499, 500, 501, 1ull << 20, 1ull << 45, 1ull << 62, (1ull << 63) - 1,
        1ull << 63, ~0ull};
    uint64_t checked = 0, wrong = 0;
    for (size_t a = 0; a < sizeof offs / sizeof *offs; a++)
        for (size_t b = 0; b < sizeof offs / sizeof *offs; b++)
            for (size_t i = 0; i < sizeof l0s / sizeof *l0s; i++)
                for (size_t j = 0; j < sizeof dens / sizeof *dens; j++)
                    for (int swap = 0; swap < 2; swap++) {
                        struct cs_file_header h = {0};
                        uint64_t l0 = l0s[i], l1 = l0s[i] + dens[j];
                        if (l1 < l0)
                            continue;
                        h.clock[0] = (struct cs_clock_sample){
                            .local_ns = swap ? l1 : l0, .offset_ns = offs[a], .valid = 1};
                        h.clock[1] = (struct cs_clock_sample){
                            .local_ns = swap ? l0 : l1, .offset_ns = offs[b], .valid = 1};
                        struct cs__clock c;
                        cs__clock_init(&c, &h);
                        struct cs__clock_memo m = {0};
                        for (size_t k = 0; k < sizeof ts / sizeof *ts; k++)
                            for (int64_t d = -2; d <= 2; d++) {
                                uint64_t t = ts[k] + (uint64_t)d + l0;
                                int64_t want = ref_map(&h.clock[0], &h.clock[1], t);
                                checked++;
                                wrong += cs__clock_map(&c, t) != want;
                                /* the memo path, on the same (non-monotonic) sequence */
                                wrong += cs__clock_map_near(&m, &c, t) != want;
                            }
                    }
    CHECK_INT(checked, >, 10000);
    CHECK_INT(wrong, ==, 0);
}

/* cs__clock_map_near on streams like a rank's: times mostly rising with jitter back and forth
 * across many changes of the rounded correction, jumps far back and ahead, both slope signs;
 * every answer must be cs__clock_map's (and the definition's). */
static void test_clock_map_near(void)
{
    static const int64_t o1s[] = {1000, -1000, 7, -3, 1ll << 40};
    static const uint64_t dens[] = {2, 999983, 1000000, 3000000001ull};
    uint64_t checked = 0, wrong = 0, x = 0x9e3779b97f4a7c15ull;
    for (size_t a = 0; a < sizeof o1s / sizeof *o1s; a++)
        for (size_t j = 0; j < sizeof dens / sizeof *dens; j++) {
            struct cs_file_header h = {0};
            h.clock[0] =
                (struct cs_clock_sample){.local_ns = 5000000, .offset_ns = -250, .valid = 1};
            h.clock[1] = (struct cs_clock_sample){
                .local_ns = 5000000 + dens[j], .offset_ns = -250 + o1s[a], .valid = 1};
            struct cs__clock c;
            cs__clock_init(&c, &h);
            struct cs__clock_memo m = {0};
            uint64_t t = 4000000;
            for (int i = 0; i < 20000; i++) {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                uint64_t rnd = x * 0x2545f4914f6cdd1dull;
                if (rnd % 1000 == 0)
                    t += rnd % 1000000000; /* far ahead */
                else if (rnd % 1000 == 1)
                    t -= t > 3000000 ? rnd % 3000000 : 0; /* far back */
                else
                    t = t + rnd % 300 - 100; /* mostly forward, sometimes back */
                int64_t want = ref_map(&h.clock[0], &h.clock[1], t);
                checked++;
                wrong += cs__clock_map_near(&m, &c, t) != want;
                wrong += cs__clock_map(&c, t) != want;
            }
        }
    CHECK_INT(checked, ==, 400000);
    CHECK_INT(wrong, ==, 0);
}

/* The merge packs (time, rank) into 64 bits while the times fit in 2^(64 - rank bits) ns after
 * the earliest first event, and rebuilds with 128-bit packs when one does not (analyze.c): here
 * 2^61 ns later (world 8 or 5: 3 rank bits, 130: 8; times must stay below 2^62).  `late_first`:
 * rank 1 starts that late (128 bits from the start); else ranks 0 and 2 jump there mid-run (the
 * switch mid-merge).  Every event must come out once, in (time, rank) order; equal times on several
 * ranks test the rank order. */
static void merge_run(const char *name, int world, int late_first)
{
    char dir[300], err[512];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    CHECK_INT(mkdir(dir, 0700), ==, 0);
    /* 2^61 ns after the first event (1 s) and 1500 ns: a pack that wrapped would sort it among
     * the first events */
    const uint64_t far = (1ull << 61) + 1000001500ull;
    int written = 0;
    for (int r = 0; r < world; r++) {
        struct tw *w = tw_new(r, world, 0x3e63e, 500 + (uint64_t)r);
        uint64_t t0 = late_first && r == 1 ? far : 1000000000ull;
        struct cs_file_header *h = tw_header(w);
        h->t_init = t0;
        h->t_finalize = far + 9000000;
        uint64_t t[12];
        int n = 0;
        t[n++] = t0 + 7 * (uint64_t)r; /* MPI_Init */
        for (uint64_t k = 0; k < 5; k++)
            t[n++] = t0 + 1000 * (k + 1) + (k % 2 ? 3 * (uint64_t)r : 0); /* ties when k even */
        if (!late_first && r % 2 == 0)
            for (uint64_t k = 0; k < 3; k++)
                t[n++] = far + 1000 * k + (k == 1 ? 0 : (uint64_t)r);
        t[n++] = far + 8000000 + (uint64_t)(r % 2); /* MPI_Finalize */
        for (int j = 0; j < n; j++) {
            uint16_t op = j == 0 ? CS_OP_INIT : j == n - 1 ? CS_OP_FINALIZE : CS_OP_PCONTROL;
            struct cs_event e = {.t_begin = t[j], .t_end = t[j] + 10, .peer = -1, .op = op};
            tw_event(w, 0, &e);
            written++;
        }
        CHECK(tw_write_rank(w, dir, r) > 0);
    }
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f)
        return;
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, f), ==, 0);
    rewind(f);
    char line[512];
    int lines = 0, order_ok = 1, prev_rank = -1;
    long long prev_t = 0;
    while (fgets(line, sizeof line, f)) {
        int rank;
        long long tb;
        if (sscanf(line, "%d,%*[^,],%*[^,],%*[^,],%lld,", &rank, &tb) != 2)
            continue; /* the header */
        if (lines && (tb < prev_t || (tb == prev_t && rank <= prev_rank))) {
            fprintf(stderr, "%s: event %d (rank %d at %lld) after rank %d at %lld\n", name, lines,
                    rank, tb, prev_rank, prev_t);
            order_ok = 0;
        }
        prev_t = tb;
        prev_rank = rank;
        lines++;
    }
    fclose(f);
    CHECK_INT(lines, ==, written);
    CHECK(order_ok);
    cs__report_free(&rep);
    cs__run_free(&run);
}

static void test_merge_wide(void)
{
    merge_run("merge-switch", 8, 0);
    merge_run("merge-wide", 5, 1);
    merge_run("merge-switch-many", 130, 0); /* 8 rank bits */
}

/* Rank 1's clock is off so its allreduce arrival falls after rank 0 already left. */
static void test_causality(void)
{
    char dir[300], err[512];
    snprintf(dir, sizeof dir, "%s/causal", root);
    mkdir(dir, 0755);
    struct wr a = begin(0, 2, 5, 0), b = begin(1, 2, 5, 0);
    ev(&a, CS_OP_ALLREDUCE, 1000 + 1000, 5000, CS_COMM_WORLD_ID, 0, 8, 0, -1, 0);
    ev(&b, CS_OP_ALLREDUCE, 6000, 7000, CS_COMM_WORLD_ID, 0, 8, 0, -1, 0);
    finish(&a, dir, 0, NULL);
    finish(&b, dir, 1, NULL);
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    CHECK_INT(rep.violations_repaired, ==, 1);
    CHECK_INT(rep.matched, ==, 1);
    /* Rank 1's arrival is pulled back to 5000, the earliest end: rank 0 waited 3000. */
    if (rep.nranks == 2) {
        CHECK_NEAR(rep.ranks[0].wait_s, 3000e-9, 1e-15);
        CHECK_NEAR(rep.ranks[1].wait_s, 0, 0);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

/*
 * Ranks that disagree on a communicator: rank 0's record of X says it is {0} alone, rank 1's says
 * {0, 1} with itself as member 1.  X is built from rank 0's record, so rank 1 is not a member of
 * it: its all-reduce on X is unmatched, the disagreement is reported, and rank 1's own member
 * index (1, past X's one member) is never used (it overflowed the instance's arrays before).
 * Rank 1's barrier on rank 0's MPI_COMM_SELF is unmatched too (it was taken as member 1 of it).
 */
static void test_comm_disagreement(void)
{
    char dir[300], err[512];
    snprintf(dir, sizeof dir, "%s/disagree", root);
    mkdir(dir, 0755);
    const uint64_t X = (1ull << 32) | 7;
    struct wr a = begin(0, 2, 6, 0), b = begin(1, 2, 6, 0);
    int32_t m[2] = {0, 1};
    tw_comm(a.w, X, CS_OP_COMM_SPLIT, 1, 0, m);
    tw_comm(b.w, X, CS_OP_COMM_SPLIT, 2, 1, m);
    ev(&a, CS_OP_ALLREDUCE, 2000, 3000, X, 0, 8, 0, -1, 0);
    ev(&b, CS_OP_ALLREDUCE, 2500, 3000, X, 0, 8, 0, -1, 0);
    /* and rank 1 on rank 0's MPI_COMM_SELF, whose one member starts the world's member table */
    ev(&b, CS_OP_BARRIER, 4000, 4100, CS_COMM_SELF_BASE, 0, 0, 0, -1, 0);
    finish(&a, dir, 0, NULL);
    finish(&b, dir, 1, NULL);
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    CHECK_INT(rep.matched, ==, 1); /* rank 0's, alone in X as it sees it */
    CHECK_INT(run.unmatched_events, ==, 2);
    int said = 0;
    for (size_t i = 0; i < rep.nproblems; i++)
        said |= strstr(rep.problems[i], "rank 1 disagrees on the members of communicator") != NULL;
    CHECK(said);
    cs__report_free(&rep);
    cs__run_free(&run);
}

/*
 * Clock samples that are no clock: one nanosecond apart with offsets 2^50 ns apart (a drift of
 * 10^21 ppm, moving rank 1's t_init by far more than 2^58 ns), or 99,000 ns apart with offsets
 * 60,000 ns apart (60 %: small corrections at t_init and t_finalize, but 2^61 ns or more near
 * 2^62 ns, where a trace's times may reach).  They are not used (said as a problem), the rank's
 * times stay as recorded, and the run is analysed as if it had no samples.
 */
static void test_clock_absurd(void)
{
    static const struct {
        uint64_t dl;
        int64_t o1;
        const char *want;
    } cases[] = {
        {1, (int64_t)1 << 50,
         "rank 1: its clock samples (offset 0 ns to rank 0, drift 1.1259e+21"
         " ppm) would move its time 100000 ns by 2^58 ns or more"},
        {99000, 60000,
         "rank 1: its clock samples (offset 0 ns to rank 0, drift 606061 ppm) would"
         " move its time 4611686018427387904 ns by 2^61 ns or more"},
    };
    for (int k = 0; k < 2; k++) {
        char dir[300], err[512];
        snprintf(dir, sizeof dir, "%s/absurd%d", root, k);
        mkdir(dir, 0755);
        struct wr a = begin(0, 2, 8, 0), b = begin(1, 2, 8, 0);
        struct cs_file_header *h = tw_header(b.w);
        h->clock[1].local_ns = h->clock[0].local_ns + cases[k].dl;
        h->clock[1].offset_ns = cases[k].o1;
        ev(&a, CS_OP_ALLREDUCE, 2000, 3000, CS_COMM_WORLD_ID, 0, 8, 0, -1, 0);
        ev(&b, CS_OP_ALLREDUCE, 2500, 3000, CS_COMM_WORLD_ID, 0, 8, 0, -1, 0);
        finish(&a, dir, 0, NULL);
        finish(&b, dir, 1, NULL);
        struct cs__run run;
        struct cs_report rep;
        CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
        int said = 0;
        for (size_t i = 0; i < rep.nproblems; i++)
            said |= strstr(rep.problems[i], cases[k].want) != NULL;
        if (!said)
            fprintf(stderr, "expected a problem: %s\n", cases[k].want);
        CHECK(said);
        CHECK_INT(rep.matched, ==, 1);
        if (rep.nranks == 2) /* rank 0 waited for rank 1 from 2000 to 2500, recorded clocks */
            CHECK_NEAR(rep.ranks[0].wait_s, 500e-9, 1e-15);
        cs__report_free(&rep);
        cs__run_free(&run);
    }
}

/* Waits near the limit of trace times: one all-reduce in which three ranks wait about 2^62 ns for
 * the fourth, so the waits the late rank caused add up past INT64_MAX (signed overflow before:
 * a negative others_waited_s, and UBSan's report). */
static void test_wait_sums_wide(void)
{
    char dir[300], err[512];
    snprintf(dir, sizeof dir, "%s/widewait", root);
    mkdir(dir, 0755);
    const uint64_t L = (1ull << 62) - 4000; /* everyone leaves here */
    struct wr w[4];
    for (int r = 0; r < 4; r++) {
        w[r] = begin(r, 4, 8, 0);
        tw_header(w[r].w)->t_finalize = L + 2000;
        tw_header(w[r].w)->clock[1].local_ns = L + 2000;
        ev(&w[r], CS_OP_ALLREDUCE, r < 3 ? 1500 + 100 * (uint64_t)r : L - 100, L, CS_COMM_WORLD_ID,
           0, 8, 0, -1, 0);
        struct cs_event fin = {
            .t_begin = L + 1000, .t_end = L + 1500, .op = CS_OP_FINALIZE, .peer = -1};
        tw_event(w[r].w, 0, &fin);
        char p[512];
        snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, r);
        CHECK(tw_write(w[r].w, p, NULL) > 0);
        tw_free(w[r].w);
    }
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    CHECK_INT(rep.matched, ==, 1);
    CHECK_INT(rep.nstragglers, ==, 1);
    if (rep.nstragglers == 1) {
        CHECK_INT(rep.stragglers[0].rank, ==, 3);
        double want = 3 * (double)(L - 100) - 1500 - 1600 - 1700;
        CHECK_NEAR(rep.stragglers[0].others_waited_s, want / 1e9, 1e-3);
    }
    if (rep.nranks == 4)
        CHECK_NEAR(rep.ranks[0].wait_s, (double)(L - 100 - 1500) / 1e9, 1e-3);
    cs__report_free(&rep);
    cs__run_free(&run);
}

/*
 * Steps from the pattern, with a call made every few steps only: 20 steps of 4 micro-batches
 * (an all-reduce of 1000 and one of 500 bytes each) and a gradient all-reduce of 100,000 bytes,
 * and a loss all-reduce of 8 bytes every 5 steps and at the last.  The loss all-reduce locks to a
 * 5-step period (4 steps); it is occasional and carries no bytes to speak of, so the steps are the
 * 20 the gradient all-reduce delimits.  The gradient all-reduce is also less than once per
 * micro-batch, but it carries most of the bytes: the steps are not the 80 micro-batches.
 */
static void test_steps_occasional(void)
{
    char dir[300], err[512];
    snprintf(dir, sizeof dir, "%s/occasional", root);
    mkdir(dir, 0755);
    const int steps = 20, micro = 4;
    const uint64_t T = 100000; /* a step */
    for (int r = 0; r < 2; r++) {
        struct wr x = begin(r, 2, 8, 0);
        uint64_t end = 10000 + (uint64_t)steps * T;
        tw_header(x.w)->t_finalize = end + 2000;
        tw_header(x.w)->clock[1].local_ns = end + 2000;
        uint32_t seq = 0;
        for (int k = 0; k < steps; k++) {
            uint64_t t0 = 10000 + (uint64_t)k * T;
            for (int m = 0; m < micro; m++) {
                uint64_t tm = t0 + (uint64_t)m * 10000;
                ev(&x, CS_OP_ALLREDUCE, tm, tm + 1000, CS_COMM_WORLD_ID, seq++, 1000, 0, -1, 0);
                ev(&x, CS_OP_ALLREDUCE, tm + 2000, tm + 3000, CS_COMM_WORLD_ID, seq++, 500, 0, -1,
                   0);
            }
            ev(&x, CS_OP_ALLREDUCE, t0 + 50000, t0 + 52000, CS_COMM_WORLD_ID, seq++, 100000, 0, -1,
               0);
            if (k % 5 == 0 || k == steps - 1)
                ev(&x, CS_OP_ALLREDUCE, t0 + 60000, t0 + 60500, CS_COMM_WORLD_ID, seq++, 8, 0, -1,
                   0);
        }
        struct cs_event fin = {
            .t_begin = end + 500, .t_end = end + 1000, .op = CS_OP_FINALIZE, .peer = -1};
        tw_event(x.w, 0, &fin);
        char p[512];
        snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, r);
        CHECK(tw_write(x.w, p, NULL) > 0);
        tw_free(x.w);
    }
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    CHECK(rep.steps != NULL);
    if (rep.steps) {
        CHECK_STR(rep.steps->source, "pattern");
        CHECK_INT(rep.steps->count, ==, steps);
        CHECK_CONTAINS(rep.steps->detail, "1 more made every few steps only");
        CHECK_NEAR(rep.steps->mean_s, (double)T / 1e9, 1e-12);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

static int run_cmd(const char *dir, const char *json, int quiet)
{
    char *argv[6];
    int argc = 0;
    argv[argc++] = "analyze";
    argv[argc++] = (char *)dir;
    if (json) {
        argv[argc++] = "--json";
        argv[argc++] = (char *)json;
    }
    if (quiet)
        argv[argc++] = "--quiet";
    argv[argc] = NULL;
    fflush(stdout);
    return cs_cmd_analyze(argc, argv);
}

static char *slurp(const char *p)
{
    FILE *f = fopen(p, "r");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_rundir(void)
{
    char dir[300], json[400], p[512], q[512];
    snprintf(json, sizeof json, "%s/report.json", root);

    /* A clean run: exit 0, JSON with the documented keys. */
    snprintf(dir, sizeof dir, "%s/clean", root);
    write_four(dir, -1);
    CHECK_INT(run_cmd(dir, json, 1), ==, 0);
    char *s = slurp(json);
    CHECK_CONTAINS(s, "\"schema\": \"commscope-report/1\"");
    CHECK_CONTAINS(s, "\"op\": \"MPI_Allreduce\"");
    CHECK_CONTAINS(s, "\"missing_ranks\": []");
    CHECK_CONTAINS(s, "\"problems\": []");
    CHECK_CONTAINS(s, "\"run_id\": \"0000000000abcdef\"");
    CHECK(s && !strstr(s, "nan") && !strstr(s, "inf"));

    /* Missing rank 2. */
    snprintf(dir, sizeof dir, "%s/missing", root);
    write_four(dir, -1);
    snprintf(p, sizeof p, "%s/rank-00002.cst", dir);
    unlink(p);
    CHECK_INT(run_cmd(dir, json, 1), ==, 1);
    s = slurp(json);
    CHECK_CONTAINS(s, "\"missing_ranks\": [\n      2\n    ]");
    CHECK_CONTAINS(s, "1 of 4 ranks missing (no valid trace file): 2");
    CHECK_CONTAINS(s, "\"incomplete\": 4");

    /* Duplicate rank: a second file claims rank 1 with another nonce. */
    snprintf(dir, sizeof dir, "%s/dup", root);
    write_four(dir, -1);
    struct wr x = begin(1, 4, 0xabcdef, 0);
    snprintf(q, sizeof q, "%s/rank-1.cst", dir);
    tw_header(x.w)->nonce = 4242;
    ev(&x, CS_OP_FINALIZE, 100000, 100500, 0, 0, 0, 0, -1, 0);
    tw_write(x.w, q, NULL);
    tw_free(x.w);
    CHECK_INT(run_cmd(dir, json, 1), ==, 1);
    CHECK_CONTAINS(slurp(json),
                   "duplicate rank 1: rank-00001.cst and rank-1.cst both claim it; rank-1.cst"
                   " skipped");

    /* Mixed run id. */
    snprintf(dir, sizeof dir, "%s/mixed", root);
    write_four(dir, -1);
    rank_of_run(dir, 2, 0x999);
    CHECK_INT(run_cmd(dir, json, 1), ==, 1);
    s = slurp(json);
    CHECK_CONTAINS(s, "rank-00002.cst: run id 0000000000000999 differs from run id"
                      " 0000000000abcdef of the other 3 files; file skipped");
    CHECK_CONTAINS(s, "\"ranks_found\": 3");

    /* Two run ids with two files each: the lowest-numbered file's id wins the tie, whichever id
     * is the smaller number. */
    snprintf(dir, sizeof dir, "%s/tie", root);
    write_four(dir, -1);
    rank_of_run(dir, 2, 0x999);
    rank_of_run(dir, 3, 0x999);
    CHECK_INT(run_cmd(dir, json, 1), ==, 1);
    s = slurp(json);
    CHECK_CONTAINS(s, "rank-00003.cst: run id 0000000000000999 differs from run id"
                      " 0000000000abcdef of the other 2 files; file skipped");
    CHECK_CONTAINS(s, "\"ranks_found\": 2");

    /* A corrupted file is skipped with its reason. */
    snprintf(dir, sizeof dir, "%s/corrupt", root);
    write_four(dir, -1);
    snprintf(p, sizeof p, "%s/rank-00003.cst", dir);
    FILE *f = fopen(p, "r+b");
    fseek(f, 4096 + 16384 + 200, SEEK_SET);
    fputc(0x55, f);
    fclose(f);
    CHECK_INT(run_cmd(dir, json, 1), ==, 1);
    CHECK_CONTAINS(slurp(json), "rank-00003.cst: block 1 CRC mismatch (byte 20480); file skipped");

    /* A rank that died after two collectives: analysed, flagged partial, instances incomplete. */
    snprintf(dir, sizeof dir, "%s/partial", root);
    write_four(dir, 3);
    CHECK_INT(run_cmd(dir, json, 1), ==, 4); /* a rank ended before MPI_Finalize */
    s = slurp(json);
    CHECK_CONTAINS(s, "\"partial_ranks\": [\n      3\n    ]");
    CHECK_CONTAINS(s, "\"matched\": 2");
    CHECK_CONTAINS(s, "\"incomplete\": 3");
    CHECK_CONTAINS(s, "rank-00003.cst: partial trace (rank 3 did not reach MPI_Finalize)");

    /* Nothing analysable, usage errors. */
    snprintf(dir, sizeof dir, "%s/empty", root);
    mkdir(dir, 0755);
    CHECK_INT(run_cmd(dir, NULL, 1), ==, 3);
    snprintf(dir, sizeof dir, "%s/does-not-exist", root);
    CHECK_INT(run_cmd(dir, NULL, 1), ==, 3);
    char *bad[] = {"analyze", "--frobnicate", NULL};
    CHECK_INT(cs_cmd_analyze(2, bad), ==, 2);
    char *none[] = {"analyze", NULL};
    CHECK_INT(cs_cmd_analyze(1, none), ==, 2);
    char *nojson[] = {"analyze", root, "--json", NULL};
    CHECK_INT(cs_cmd_analyze(3, nojson), ==, 2);
}

/* Host indices (run->host_of, numbered in order of first rank) and the report's host count on
 * 64 ranks over 23 hosts in scrambled order, two of them named alike in their first 62 bytes,
 * against the numbering done by hand. */
static void test_hosts(void)
{
    enum { W = 64 }; /* begin() holds at most 64 ranks */
    char dir[400], name[W][CS_HOST_MAX];
    snprintf(dir, sizeof dir, "%s/hosts", root);
    mkdir(dir, 0755);
    for (int r = 0; r < W; r++) {
        int host = (r * 17 + r / 7) % 23;
        if (host < 2) /* 62 x's then 'a' or 'b': they differ in the last byte before the NUL */
            snprintf(name[r], sizeof name[r], "%.62s%c",
                     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                     "ab"[host]);
        else
            snprintf(name[r], sizeof name[r], "node%03d", host);
        struct wr x = begin(r, W, 0x4057, 0);
        memcpy(tw_header(x.w)->host, name[r], CS_HOST_MAX);
        ev(&x, CS_OP_FINALIZE, 90000, 90500, 0, 0, 0, 0, -1, 0);
        char p[500];
        snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, r);
        tw_write(x.w, p, NULL);
        tw_free(x.w);
    }
    struct cs__run run;
    struct cs_report rep;
    char err[256];
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    int want[W], nh = 0;
    for (int r = 0; r < W; r++) {
        want[r] = -1;
        for (int q = 0; q < r && want[r] < 0; q++)
            if (!strcmp(name[q], name[r]))
                want[r] = want[q];
        if (want[r] < 0)
            want[r] = nh++;
    }
    CHECK_INT(nh, ==, 23);
    CHECK_INT(rep.hosts, ==, 23);
    int same = run.host_of != NULL;
    for (int r = 0; same && r < W; r++)
        same = run.host_of[r] == want[r];
    CHECK(same);
    cs__report_free(&rep);
    cs__run_free(&run);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/cs-test-analyze-XXXXXX");
    if (!mkdtemp(root))
        return 1;
    test_clock_map();
    test_clock_map_exact();
    test_clock_map_near();
    test_four_ranks();
    test_balance_material();
    test_causality();
    test_comm_disagreement();
    test_clock_absurd();
    test_wait_sums_wide();
    test_steps_occasional();
    test_merge_wide();
    test_rundir();
    test_hosts();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    /* CS_TEST_KEEP=1 keeps the synthetic run directories for a look with the CLI. */
    if (getenv("CS_TEST_KEEP"))
        fprintf(stderr, "kept %s\n", root);
    else if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return cs_test_result();
}
