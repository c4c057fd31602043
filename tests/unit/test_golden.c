/*
 * Golden-file tests for the text report: synthetic runs written with tw.c (every time and byte
 * known, so the report is deterministic) are analysed and the text compared byte for byte with
 * tests/data/golden-<name>.txt.  The run directories are relative to the working directory so the
 * "Run directory" line is the same everywhere.
 *
 *   test_golden DATA_DIR            compare (exit 1 and a diff hint on a mismatch)
 *   test_golden DATA_DIR --update   rewrite the golden files (review the diff before committing)
 *   test_golden --write-run DIR [four|broken|manyN|commsN]   only write a synthetic run (for
 *                                   other tests; manyN: N ranks, 8 per host, default 1024;
 *                                   commsN: 4 ranks, N communicators, default 1000)
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs_test.h"
#include "internal.h"
#include "tw.h"

#define SPLIT ((2ull << 32) | 0) /* created by world rank 1: members {1, 3} */

struct wr {
    struct tw *w;
};

static void ev(struct wr *x, uint16_t op, uint64_t tb, uint64_t te, uint64_t comm, uint32_t seq,
               uint64_t bytes, uint64_t bytes_recv, uint16_t flags, int32_t peer, uint64_t req)
{
    struct cs_event e = {.t_begin = tb,
                         .t_end = te,
                         .comm = comm,
                         .bytes = bytes,
                         .bytes_recv = bytes_recv,
                         .request = req,
                         .seq = seq,
                         .peer = peer,
                         .op = op,
                         .flags = flags};
    tw_event(x->w, 0, &e);
}

/*
 * Four ranks on two hosts (node0: ranks 0, 1; node1: 2, 3), rank 3 the straggler of most
 * collectives.  Per rank: MPI_Init; 6 rounds of {Pcontrol marker, a 64 KiB Allreduce (rank 3
 * arrives 4 us late), a Send/Recv pair 0->1 and 2->3 of 16 KiB}; a 1 MiB Allreduce; an
 * Iallreduce on {1, 3} completed by MPI_Wait; a Barrier; MPI_Finalize.  `broken`: rank 2's file
 * is missing and rank 3 dies after the third round.
 */
static int write_run(const char *dir, int broken)
{
    mkdir(dir, 0755);
    for (int r = 0; r < 4; r++) {
        if (broken && r == 2)
            continue;
        struct wr x = {tw_new(r, 4, 0x5eed, 77 + (uint64_t)r)};
        struct cs_file_header *h = tw_header(x.w);
        h->t_init = 1000;
        h->t_finalize = 900000;
        for (int i = 0; i < 2; i++) {
            h->clock[i].valid = 1;
            h->clock[i].local_ns = i ? 900000 : 1000;
            h->clock[i].offset_ns = 0;
            h->clock[i].rounds = 10;
            h->clock[i].rtt_ns = 200;
        }
        int32_t m[4] = {0, 1, 2, 3};
        tw_comm(x.w, CS_COMM_WORLD_ID, 0, 4, r, m);
        if (r == 1 || r == 3) {
            int32_t s[2] = {1, 3};
            tw_comm(x.w, SPLIT, CS_OP_COMM_SPLIT, 2, r == 3, s);
        }
        ev(&x, CS_OP_INIT, 500, 1000, 0, 0, 0, 0, 0, -1, 0);
        int rounds = broken && r == 3 ? 3 : 6;
        uint32_t seq = 0;
        for (int k = 0; k < rounds; k++) {
            uint64_t t = 10000 + (uint64_t)k * 100000;
            ev(&x, CS_OP_PCONTROL, t, t + 100, 0, 0, 0, 0, 0, -1, 0);
            uint64_t arr = t + 20000 + (r == 3 ? 4000 : (uint64_t)r * 500);
            ev(&x, CS_OP_ALLREDUCE, arr, t + 30000, CS_COMM_WORLD_ID, seq, 65536, 65536, 0, -1, 0);
            seq++;
            if (r == 0 || r == 2)
                ev(&x, CS_OP_SEND, t + 40000, t + 48000, CS_COMM_WORLD_ID, 0, 16384, 0, 0, r + 1,
                   0);
            else
                ev(&x, CS_OP_RECV, t + 39000, t + 48500, CS_COMM_WORLD_ID, 0, 0, 16384, 0, r - 1,
                   0);
        }
        if (rounds == 6) {
            ev(&x, CS_OP_ALLREDUCE, 700000 + (r == 3 ? 6000 : 0), 760000, CS_COMM_WORLD_ID, seq,
               1 << 20, 1 << 20, 0, -1, 0);
            seq++;
            if (r == 1 || r == 3) {
                uint64_t t0 = r == 1 ? 770000 : 772000;
                ev(&x, CS_OP_IALLREDUCE, t0, t0 + 500, SPLIT, 0, 4096, 4096, CS_EV_NONBLOCKING, -1,
                   5);
                ev(&x, CS_OP_COMPLETE, 790000, 790000, SPLIT, 0, 0, 0, 0, -1, 5);
                ev(&x, CS_OP_WAIT, 780000, 790000, SPLIT, 0, 0, 0, 0, -1, 0);
            }
            ev(&x, CS_OP_BARRIER, 800000 + (uint64_t)r * 1000, 805000, CS_COMM_WORLD_ID, seq, 0, 0,
               0, -1, 0);
            ev(&x, CS_OP_FINALIZE, 900000, 900500, 0, 0, 0, 0, 0, -1, 0);
        }
        char p[512];
        snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, r);
        struct tw_opts po = {.partial = 1};
        long n = tw_write(x.w, p, broken && r == 3 ? &po : NULL);
        tw_free(x.w);
        if (n <= 0)
            return -1;
    }
    return 0;
}

/* A rank's header: on `host`, traced from 1 us to t_finalize ns, the clock measured at both ends
 * with no offset (4 rounds, 300 ns round trips). */
static void rank_header(struct tw *w, const char *host, uint64_t t_finalize)
{
    struct cs_file_header *h = tw_header(w);
    snprintf(h->host, sizeof h->host, "%s", host);
    h->t_init = 1000;
    h->t_finalize = t_finalize;
    for (int i = 0; i < 2; i++) {
        h->clock[i].valid = 1;
        h->clock[i].local_ns = i ? t_finalize : 1000;
        h->clock[i].rtt_ns = 300;
        h->clock[i].rounds = 4;
    }
}

/*
 * n ranks, 8 per host ("host000", ...): 10 all-reduces of 1 MiB; rank 5 arrives 30 us late at
 * 8 of them, the others spread by rank.  For checking that the reports stay readable at scale.
 */
static int write_many(const char *dir, int n)
{
    mkdir(dir, 0755);
    int32_t *m = malloc((size_t)n * sizeof *m);
    for (int i = 0; i < n; i++)
        m[i] = i;
    for (int r = 0; r < n; r++) {
        struct wr x = {tw_new(r, n, 0x3a7, 5 + (uint64_t)r)};
        char host[16];
        snprintf(host, sizeof host, "host%03d", r / 8);
        rank_header(x.w, host, 2000000);
        tw_comm(x.w, CS_COMM_WORLD_ID, 0, n, r, m);
        ev(&x, CS_OP_INIT, 500, 1000, 0, 0, 0, 0, 0, -1, 0);
        for (uint32_t k = 0; k < 10; k++) {
            uint64_t t = 100000 + (uint64_t)k * 150000;
            uint64_t arr = t + (uint64_t)(r % 97) * 50 + (r == 5 && k < 8 ? 30000 : 0);
            ev(&x, CS_OP_ALLREDUCE, arr, t + 100000, CS_COMM_WORLD_ID, k, 1 << 20, 1 << 20, 0, -1,
               0);
        }
        ev(&x, CS_OP_FINALIZE, 2000000, 2000500, 0, 0, 0, 0, 0, -1, 0);
        char p[512];
        snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, r);
        long sz = tw_write(x.w, p, NULL);
        tw_free(x.w);
        if (sz <= 0) {
            free(m);
            return -1;
        }
    }
    free(m);
    return 0;
}

/*
 * Four ranks on two hosts and n communicators made by rank 0 (id 1 << 32 | k + 1): k % 3 == 0
 * all four ranks (a dup of world), 1 ranks {0, 1}, 2 ranks {2, 3} (made by MPI_Comm_create).  On
 * each, one all-reduce of 64 (1 + k % 7) bytes taking 1 + (37 k) % 101 us (times repeat: ties in
 * call time); on every fifth, a broadcast too; on world, 4 all-reduces of 1 MiB.  For checking that
 * the per-communicator tables stay bounded (passes/bound.c).
 */
static int write_comms(const char *dir, int n)
{
    mkdir(dir, 0755);
    static const int32_t all[4] = {0, 1, 2, 3}, lo[2] = {0, 1}, hi[2] = {2, 3};
    for (int r = 0; r < 4; r++) {
        struct wr x = {tw_new(r, 4, 0xc0, 9 + (uint64_t)r)};
        rank_header(x.w, r < 2 ? "node0" : "node1", 200000000);
        tw_comm(x.w, CS_COMM_WORLD_ID, 0, 4, r, all);
        ev(&x, CS_OP_INIT, 500, 1000, 0, 0, 0, 0, 0, -1, 0);
        for (uint32_t k = 0; k < 4; k++)
            ev(&x, CS_OP_ALLREDUCE, 10000 + k * 20000, 20000 + k * 20000, CS_COMM_WORLD_ID, k,
               1 << 20, 1 << 20, 0, -1, 0);
        for (int k = 0; k < n; k++) {
            const int32_t *m = k % 3 == 0 ? all : k % 3 == 1 ? lo : hi;
            int size = k % 3 == 0 ? 4 : 2, me = -1;
            for (int i = 0; i < size; i++)
                if (m[i] == r)
                    me = i;
            if (me < 0)
                continue;
            uint64_t id = (1ull << 32) | (uint64_t)(k + 1);
            tw_comm(x.w, id, size == 4 ? CS_OP_COMM_DUP : CS_OP_COMM_CREATE, size, me, m);
            uint64_t t = 100000 + (uint64_t)k * 100000, d = 1000 * (1 + (37 * (uint64_t)k) % 101);
            uint64_t b = 64 * (1 + (uint64_t)k % 7);
            ev(&x, CS_OP_ALLREDUCE, t, t + d, id, 0, b, b, 0, -1, 0);
            if (k % 5 == 0)
                ev(&x, CS_OP_BCAST, t + 50000, t + 51000, id, 1, b, b, 0, 0, 0);
        }
        ev(&x, CS_OP_FINALIZE, 199000000, 199000500, 0, 0, 0, 0, 0, -1, 0);
        char p[512];
        snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, r);
        long sz = tw_write(x.w, p, NULL);
        tw_free(x.w);
        if (sz <= 0)
            return -1;
    }
    return 0;
}

static char *text_of(const char *dir)
{
    struct cs__run run;
    struct cs_report rep;
    char err[512] = "", *buf = NULL;
    size_t len = 0;
    int rc = cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL);
    CHECK_INT(rc, ==, 0);
    FILE *f = open_memstream(&buf, &len);
    cs__report_text(&rep, f);
    fclose(f);
    cs__report_free(&rep);
    cs__run_free(&run);
    return buf;
}

/* The views of the clean run against numbers worked out by hand from write_run's times. */
static void check_views(void)
{
    CHECK_INT(system("rm -rf views-four"), ==, 0);
    CHECK_INT(write_run("views-four", 0), ==, 0);
    struct cs__run run;
    struct cs_report rep;
    char err[256];
    CHECK_INT(cs__analyze_dir("views-four", &run, &rep, err, sizeof err, NULL), ==, 0);
    const struct cs_report_views *v = rep.views;
    CHECK(v != NULL);
    if (!v || rep.nranks != 4) {
        cs__report_free(&rep);
        cs__run_free(&run);
        return;
    }
    /* Eligible NxN instances: 6 + 1 all-reduces and the barrier; ranks 1 and 3 also the
     * Iallreduce on {1, 3}. */
    static const uint64_t elig[4] = {8, 9, 8, 9};
    /* Waits (ns): see golden-four.txt; rank 0 = 6 x 4000 + 6000 + 3000.  Ranks 1 and 3 also wait
     * in each of their 6 receives, posted at t + 39000, for the send arriving at t + 40000:
     * 6 x 1000 for the point-to-point partner. */
    static const double wait[4] = {33000, 31000 + 6000, 25000, 6000};
    for (int r = 0; r < 4; r++) {
        double sum = 0;
        for (int s = 0; s < CS_SEG_N; s++)
            sum += v->seg_s[r][s];
        CHECK_NEAR(sum, rep.ranks[r].wall_s, 1e-12);
        CHECK_INT(v->eligible[r], ==, elig[r]);
        CHECK_NEAR(v->seg_s[r][CS_SEG_WAIT], wait[r] * 1e-9, 1e-15);
        double heat = 0;
        for (size_t b = 0; b < v->heat_bins; b++)
            heat += v->heat_wait_s[(size_t)r * v->heat_bins + b];
        CHECK_NEAR(heat, wait[r] * 1e-9, 1e-15);
    }
    /* Rank 1's Iallreduce wait (2000 ns) is exposed in its Wait call (10000 ns), not in a
     * collective call: collective call time 6 x 9500 + 60000 + 4000 + 500 = 121500, of which
     * 29000 waiting. */
    CHECK_NEAR(v->seg_s[1][CS_SEG_COLL], (121500 - 29000) * 1e-9, 1e-15);
    CHECK_NEAR(v->seg_s[1][CS_SEG_COMPLETION], (10000 - 2000) * 1e-9, 1e-15);
    CHECK_NEAR(v->seg_s[0][CS_SEG_P2P], 6 * 8000e-9, 1e-15);
    /* The senders kept them waiting: 6 x 1000 each. */
    CHECK_NEAR(rep.ranks[0].p2p_caused_s, 6000e-9, 1e-15);
    CHECK_NEAR(rep.ranks[2].p2p_caused_s, 6000e-9, 1e-15);
    CHECK_NEAR(rep.ranks[1].p2p_caused_s, 0, 1e-15);
    CHECK_NEAR(rep.ranks[3].p2p_caused_s, 0, 1e-15);
    /* The receivers' waits are out of their receives' time: 6 x (9500 - 1000). */
    CHECK_NEAR(v->seg_s[1][CS_SEG_P2P], 6 * 8500e-9, 1e-15);
    CHECK_NEAR(v->seg_s[3][CS_SEG_P2P], 6 * 8500e-9, 1e-15);
    CHECK_STR(v->bars_by, "rank");
    CHECK_INT(v->nbars, ==, 4);
    CHECK_INT(v->p2p_n, ==, 4);
    CHECK_INT(v->p2p_bytes[0 * 4 + 1], ==, 6 * 16384);
    CHECK_INT(v->p2p_bytes[2 * 4 + 3], ==, 6 * 16384);
    CHECK_INT(v->p2p_total, ==, 12 * 16384);
    int seen = 0;
    for (size_t c = 0; c < v->nbw; c++) {
        if (strcmp(v->bw[c].op, "MPI_Allreduce") != 0)
            continue;
        seen = 1;
        CHECK_INT(v->bw[c].npoints, ==, 2);
        CHECK_INT(v->bw[c].pt[0].log2_size, ==, 16);
        CHECK_INT(v->bw[c].pt[0].samples, ==, 6);
        CHECK_NEAR(v->bw[c].pt[0].algbw_gbps, 65536.0 / 6000.0, 1e-9);
        CHECK_NEAR(v->bw[c].pt[0].busbw_gbps, 65536.0 / 6000.0 * 1.5, 1e-9);
        CHECK_INT(v->bw[c].pt[1].log2_size, ==, 20);
        CHECK_NEAR(v->bw[c].pt[1].algbw_gbps, 1048576.0 / 54000.0, 1e-9);
    }
    CHECK(seen);
    CHECK_INT(v->nfindings, ==, 3);
    if (v->nfindings == 3) {
        CHECK_INT(v->findings[0].kind, ==, CS_FIND_STRAGGLER);
        CHECK_INT(v->findings[0].rank, ==, 3);
        CHECK_INT(v->findings[1].kind, ==, CS_FIND_COMM_SHARE);
        CHECK_INT(v->findings[2].kind, ==, CS_FIND_BALANCED);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

static char *slurp(const char *p)
{
    FILE *f = fopen(p, "r");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    int c;
    while ((c = fgetc(f)) != EOF)
        fputc(c, m);
    fclose(m);
    fclose(f);
    return buf;
}

static void golden(const char *data, const char *name, int broken, int update)
{
    char dir[64], path[1024];
    snprintf(dir, sizeof dir, "golden-%s", name);
    snprintf(path, sizeof path, "%s/golden-%s.txt", data, name);
    CHECK_INT(system("rm -rf golden-four golden-broken"), ==, 0);
    CHECK_INT(write_run(dir, broken), ==, 0);
    char *got = text_of(dir);
    if (update) {
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        if (f) {
            fputs(got, f);
            fclose(f);
        }
        fprintf(stderr, "wrote %s\n", path);
    } else {
        char *want = slurp(path);
        CHECK(want != NULL);
        if (want && strcmp(got, want) != 0) {
            char out[1100];
            snprintf(out, sizeof out, "%s.actual", dir);
            FILE *f = fopen(out, "w");
            if (f) {
                fputs(got, f);
                fclose(f);
            }
            CS_FAIL_("text report of %s differs from %s; see diff -u %s %s", dir, path, path, out);
        }
        free(want);
    }
    free(got);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--write-run") == 0) {
        if (argc >= 4 && strncmp(argv[3], "comms", 5) == 0)
            return write_comms(argv[2], atoi(argv[3] + 5) > 0 ? atoi(argv[3] + 5) : 1000) ? 1 : 0;
        if (argc >= 4 && strncmp(argv[3], "many", 4) == 0)
            return write_many(argv[2], atoi(argv[3] + 4) > 0 ? atoi(argv[3] + 4) : 1024) ? 1 : 0;
        int broken = argc >= 4 && strcmp(argv[3], "broken") == 0;
        return write_run(argv[2], broken) ? 1 : 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: test_golden DATA_DIR [--update] | --write-run DIR [four|broken]\n");
        return 2;
    }
    int update = argc >= 3 && strcmp(argv[2], "--update") == 0;
    golden(argv[1], "four", 0, update);
    golden(argv[1], "broken", 1, update);
    check_views();
    return cs_test_result();
}
