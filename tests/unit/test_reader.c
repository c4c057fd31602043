/* Reader: round trip, every truncation, every corrupted byte, foreign/empty/partial files. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "commscope/ops.h"
#include "cs_test.h"
#include "reader.h"
#include "tw.h"

static char dir[256];

static void path_of(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
}

static struct cs_event mkev(uint64_t t, uint16_t op, uint64_t k)
{
    struct cs_event e = {.t_begin = t,
                         .t_end = t + 50 + k % 7,
                         .comm = CS_COMM_WORLD_ID,
                         .bytes = 8 * k,
                         .bytes_recv = 8 * k,
                         .seq = (uint32_t)k,
                         .peer = -1,
                         .op = op,
                         .aux = (int32_t)k};
    return e;
}

/* Write N events over 3 threads (interleaved in time) plus comm records incl. a spanning one. */
static void test_round_trip(void)
{
    enum { N = 1000, WORLD = 6000 };
    struct tw *w = tw_new(3, WORLD, 0x1234, 99);
    static struct cs_event evs[N];
    for (int i = 0; i < N; i++) {
        evs[i] =
            mkev(1000 + 100 * (uint64_t)i, i % 3 ? CS_OP_ALLREDUCE : CS_OP_BARRIER, (uint64_t)i);
        tw_event(w, (unsigned)(i % 3), &evs[i]);
    }
    static int32_t big[5000], small[2] = {3, 7};
    for (int i = 0; i < 5000; i++)
        big[i] = i;                                /* rank 3 is member 3 */
    tw_comm(w, CS_COMM_WORLD_ID, 0, 5000, 3, big); /* 20048 bytes: spans 2 blocks */
    tw_comm(w, (4ull << 32) | 1, CS_OP_COMM_SPLIT, 2, 0, small);
    char p[512];
    path_of(p, sizeof p, "rank-00003.cst");
    CHECK(tw_write(w, p, NULL) > 0);
    tw_free(w);

    struct cs_reader *r;
    char err[512] = "";
    int rc = cs_reader_open(p, &r, err, sizeof err);
    CHECK_INT(rc, ==, 0);
    if (rc) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    const struct cs_reader_stats *st = cs_reader_stats(r);
    CHECK_INT(st->events, ==, N);
    CHECK_INT(st->threads, ==, 3);
    CHECK_INT(st->comms, ==, 2);
    CHECK_INT(st->partial, ==, 0);
    CHECK_INT(cs_reader_header(r)->rank, ==, 3);
    CHECK_INT(cs_reader_header(r)->run_id, ==, 0x1234);
    int i = 0, same = 1;
    const struct cs_event *e;
    while ((e = cs_reader_next(r))) {
        if (i >= N || memcmp(e, &evs[i], sizeof *e) != 0)
            same = 0;
        i++;
    }
    CHECK_INT(i, ==, N);
    CHECK(same);
    const struct cs_comm_record *c0 = cs_reader_comm(r, 0), *c1 = cs_reader_comm(r, 1);
    CHECK(c0 && c1);
    if (c0 && c1) {
        CHECK_INT(c0->size, ==, 5000);
        CHECK(memcmp(c0->members, big, sizeof big) == 0);
        CHECK_INT(c1->id, ==, (4ull << 32) | 1);
        CHECK_INT(c1->members[1], ==, 7);
    }
    cs_reader_rewind(r);
    CHECK(cs_reader_next(r) != NULL && memcmp(cs_reader_next(r), &evs[1], sizeof evs[1]) == 0);
    cs_reader_close(r);
}

/* A small closed file: header, comm block, two event blocks of one thread, one of another. */
static long small_file(const char *p)
{
    struct tw *w = tw_new(1, 4, 77, 5);
    int32_t m[4] = {0, 1, 2, 3};
    tw_comm(w, CS_COMM_WORLD_ID, 0, 4, 1, m);
    for (int i = 0; i < 340; i++) { /* thread 0: 272 events (2 blocks), thread 1: 68 */
        struct cs_event e = mkev(1000 + 10 * (uint64_t)i, CS_OP_ALLREDUCE, (uint64_t)i);
        tw_event(w, i % 5 == 0, &e);
    }
    long size = tw_write(w, p, NULL);
    tw_free(w);
    return size;
}

/* All events of the file at p by cs_reader_next_batch(), alternating with cs_reader_next() when
 * mix is set, must be those of cs_reader_next() in the same order; returns the largest batch. */
static size_t batch_same(const char *p, int mix)
{
    struct cs_reader *r, *q;
    char err[512] = "";
    if (cs_reader_open(p, &r, err, sizeof err) || cs_reader_open(p, &q, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        CHECK(0);
        return 0;
    }
    size_t most = 0, total = 0;
    int same = 1;
    for (int call = 0;; call++) {
        const struct cs_event *b;
        size_t n;
        if (mix && call % 2) {
            b = cs_reader_next(r);
            n = b != NULL;
        } else {
            n = cs_reader_next_batch(r, &b);
            CHECK((n == 0) == (b == NULL));
        }
        if (!n)
            break;
        unsigned th = cs_reader_thread(r);
        for (size_t i = 0; i < n; i++) {
            const struct cs_event *e = cs_reader_next(q);
            if (!e || memcmp(e, &b[i], sizeof *e) != 0 || cs_reader_thread(q) != th)
                same = 0;
        }
        total += n;
        if (n > most)
            most = n;
    }
    CHECK(same);
    CHECK(cs_reader_next(q) == NULL);
    CHECK_INT(total, ==, cs_reader_stats(r)->events);
    const struct cs_event *b;
    CHECK_INT(cs_reader_next_batch(r, &b), ==, 0);
    CHECK(b == NULL);
    cs_reader_close(r);
    cs_reader_close(q);
    return most;
}

/* Batches: a one-thread file gives whole blocks, a two-thread file one event at a time, both in
 * cs_reader_next()'s order. */
static void test_batch(void)
{
    char p[512];
    path_of(p, sizeof p, "rank-00005.cst");
    CHECK(small_file(p) > 0);
    CHECK_INT(batch_same(p, 0), ==, 1);
    CHECK_INT(batch_same(p, 1), ==, 1);
    struct tw *w = tw_new(1, 4, 77, 6);
    for (int i = 0; i < 700; i++) {
        struct cs_event e = mkev(1000 + 10 * (uint64_t)i, CS_OP_BARRIER, (uint64_t)i);
        tw_event(w, 0, &e);
    }
    path_of(p, sizeof p, "rank-00006.cst");
    CHECK(tw_write(w, p, NULL) > 0);
    tw_free(w);
    CHECK_INT(batch_same(p, 0), >, 1);
    CHECK_INT(batch_same(p, 1), >, 1);
}

static void test_truncations(void)
{
    char p[512];
    path_of(p, sizeof p, "rank-00001.cst");
    long size = small_file(p);
    CHECK(size > (long)CS_HEADER_SIZE);
    struct cs_reader *r;
    char err[512];
    CHECK_INT(cs_reader_open(p, &r, err, sizeof err), ==, 0);
    cs_reader_close(r);
    int fd = open(p, O_WRONLY);
    int bad = 0, crashed_msg = 0;
    for (long len = size - 1; len >= 0; len--) {
        if (ftruncate(fd, len) != 0)
            break;
        err[0] = '\0';
        int rc = cs_reader_open(p, &r, err, sizeof err);
        if (rc == 0) {
            bad++;
            cs_reader_close(r);
            fprintf(stderr, "truncation to %ld bytes accepted\n", len);
        } else if (!strstr(err, "rank-00001.cst: ")) {
            crashed_msg++;
        }
        if (len == 4096)
            CHECK_STR(err, "rank-00001.cst: truncated at byte 4096 of 69632 (block 0 of 4)");
        if (len == 0)
            CHECK_CONTAINS(err, "empty file");
        if (len == 100)
            CHECK_CONTAINS(err, "truncated at byte 100 of at least 4096 (header)");
    }
    close(fd);
    CHECK_INT(bad, ==, 0);
    CHECK_INT(crashed_msg, ==, 0);
}

static void test_corruptions(void)
{
    char p[512];
    path_of(p, sizeof p, "rank-00001.cst");
    long size = small_file(p);
    int fd = open(p, O_RDWR);
    int accepted = 0, vague = 0;
    struct cs_reader *r;
    char err[512];
    for (long off = 0; off < size; off++) {
        unsigned char c, x;
        if (pread(fd, &c, 1, off) != 1)
            break;
        x = c ^ 0xff;
        CHECK_INT(pwrite(fd, &x, 1, off), ==, 1);
        err[0] = '\0';
        int rc = cs_reader_open(p, &r, err, sizeof err);
        if (rc == 0) {
            accepted++;
            cs_reader_close(r);
            fprintf(stderr, "corruption at byte %ld accepted\n", off);
        } else if (!strstr(err, "rank-00001.cst: ") || strlen(err) < 30) {
            vague++;
            fprintf(stderr, "vague message for byte %ld: %s\n", off, err);
        }
        if (off == 0)
            CHECK_STR(err, "rank-00001.cst: not a commscope trace (magic \"\\xbcSTRACE\\x00\" at"
                           " byte 0)");
        if (off == 8)
            CHECK_CONTAINS(err, "trace format version 254, this analyzer reads version 1");
        if (off == 200)
            CHECK_CONTAINS(err, "header CRC mismatch");
        if (off == 4096 + 3 * 16384 + 1000)
            CHECK_STR(err, "rank-00001.cst: block 3 CRC mismatch (byte 53248)");
        CHECK_INT(pwrite(fd, &c, 1, off), ==, 1);
    }
    close(fd);
    CHECK_INT(accepted, ==, 0);
    CHECK_INT(vague, ==, 0);
}

/* Invalid content with valid CRCs: the reader checks meaning, not only checksums. */
static void test_semantic_errors(void)
{
    char p[512], err[512];
    struct cs_reader *r;
    path_of(p, sizeof p, "rank-00002.cst");
    struct {
        uint16_t op;
        uint64_t tb, te;
        const char *want;
    } cases[] = {
        {250, 10, 20, "rank-00002.cst: event 17 in block 0: unknown op 250 (byte 5248)"},
        {CS_OP_BARRIER, 30, 20, "event 17 in block 0: t_end before t_begin (20 < 30"},
        {CS_OP_BARRIER, 30, 1ull << 62,
         "event 17 in block 0: t_end 4611686018427387904 beyond 2^62 ns (146 years; byte 5248)"},
        {CS_OP_BARRIER, UINT64_MAX, UINT64_MAX, "beyond 2^62 ns"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct tw *w = tw_new(2, 4, 1, 1);
        for (int i = 0; i < 20; i++) {
            struct cs_event e = mkev(100 + (uint64_t)i, CS_OP_BARRIER, (uint64_t)i);
            if (i == 17) {
                e.op = cases[k].op;
                e.t_begin = cases[k].tb;
                e.t_end = cases[k].te;
            }
            tw_event(w, 0, &e);
        }
        tw_write(w, p, NULL);
        tw_free(w);
        err[0] = '\0';
        CHECK_INT(cs_reader_open(p, &r, err, sizeof err), ==, CS_EEVENT);
        CHECK_CONTAINS(err, cases[k].want);
    }
    /* Member lists: repeated (apart, and next to each other after rising members), out of range
     * after rising members, and valid ones that do and do not rise (the file's rank is 2 of a
     * world of 4). */
    struct {
        int32_t m[3];
        int32_t n, mine;
        const char *want; /* NULL: accepted */
    } lists[] = {
        {{2, 0, 0},
         3,
         0,
         "comm record 0 in block 0: member 2 is world rank 0, out of range or"
         " repeated"},
        {{0, 2, 7},
         3,
         1,
         "comm record 0 in block 0: member 2 is world rank 7, out of range or"
         " repeated"},
        {{0, 2, 2},
         3,
         1,
         "comm record 0 in block 0: member 2 is world rank 2, out of range or"
         " repeated"},
        {{3, 2, 0}, 3, 1, NULL},
        {{0, 2, 3}, 3, 1, NULL},
    };
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++) {
        struct tw *w = tw_new(2, 4, 1, 1);
        tw_comm(w, 6ull << 32, CS_OP_COMM_SPLIT, lists[k].n, lists[k].mine, lists[k].m);
        tw_write(w, p, NULL);
        tw_free(w);
        err[0] = '\0';
        int rc = cs_reader_open(p, &r, err, sizeof err);
        if (!lists[k].want) {
            CHECK_INT(rc, ==, 0);
            if (!rc)
                cs_reader_close(r);
        } else {
            CHECK_INT(rc, ==, CS_ECOMM);
            CHECK_CONTAINS(err, lists[k].want);
        }
    }
    /* Rank out of range and a comm record whose length overflows its block. */
    struct tw *w = tw_new(2, 4, 1, 1);
    tw_header(w)->rank = 9;
    tw_write(w, p, NULL);
    tw_free(w);
    CHECK_INT(cs_reader_open(p, &r, err, sizeof err), ==, CS_EHEADER);
    CHECK_CONTAINS(err, "rank 9 out of range 0..3");
    /* Times past 2^62 ns in the header: t_init, and a valid clock sample's offset (an invalid
     * sample is not read). */
    w = tw_new(2, 4, 1, 1);
    tw_header(w)->t_init = 1ull << 62;
    tw_write(w, p, NULL);
    tw_free(w);
    CHECK_INT(cs_reader_open(p, &r, err, sizeof err), ==, CS_EHEADER);
    CHECK_CONTAINS(err, "t_init 4611686018427387904 or t_finalize 0 beyond 2^62 ns");
    for (int valid = 0; valid < 2; valid++) {
        w = tw_new(2, 4, 1, 1);
        tw_header(w)->clock[1].valid = (uint32_t)valid;
        tw_header(w)->clock[1].offset_ns = -(int64_t)(1ull << 62);
        tw_write(w, p, NULL);
        tw_free(w);
        err[0] = '\0';
        int rc = cs_reader_open(p, &r, err, sizeof err);
        CHECK_INT(rc, ==, valid ? CS_EHEADER : 0);
        if (valid)
            CHECK_CONTAINS(err, "clock sample 1: local_ns 0, offset_ns -4611686018427387904 or "
                                "rtt_ns 0 beyond 2^62 ns (146 years)");
        else if (!rc)
            cs_reader_close(r);
    }

    w = tw_new(2, 4, 1, 1);
    int32_t m[2] = {0, 2};
    tw_comm(w, 5ull << 32, CS_OP_COMM_SPLIT, 2, 1, m);
    tw_write(w, p, NULL);
    tw_free(w);
    /* Patch record_bytes to overflow, then reseal the block so only the meaning is wrong. */
    int fd = open(p, O_RDWR);
    unsigned char blk[CS_BLOCK_SIZE];
    CHECK_INT(pread(fd, blk, sizeof blk, CS_HEADER_SIZE), ==, (long)sizeof blk);
    uint32_t rb = 4000, zero = 0;
    memcpy(blk + 64, &rb, 4);
    memcpy(blk + 12, &zero, 4);
    uint32_t crc = cs_crc32(0, blk, sizeof blk);
    memcpy(blk + 12, &crc, 4);
    CHECK_INT(pwrite(fd, blk, sizeof blk, CS_HEADER_SIZE), ==, (long)sizeof blk);
    close(fd);
    CHECK_INT(cs_reader_open(p, &r, err, sizeof err), ==, CS_ECOMM);
    CHECK_CONTAINS(err, "comm record 0 in block 0: length 4000 overflows the 56 bytes left");
}

static void test_foreign_empty_missing(void)
{
    char p[512], err[512];
    struct cs_reader *r;
    path_of(p, sizeof p, "rank-00005.cst");
    FILE *f = fopen(p, "w");
    fclose(f);
    CHECK_INT(cs_reader_open(p, &r, err, sizeof err), ==, CS_EEMPTY);
    CHECK_STR(err, "rank-00005.cst: empty file (0 bytes), not a commscope trace");
    CHECK(r == NULL);
    f = fopen(p, "w");
    fputs("#!/bin/sh\necho hello\n", f);
    fclose(f);
    CHECK_INT(cs_reader_open(p, &r, err, sizeof err), ==, CS_EFORMAT);
    CHECK_STR(err, "rank-00005.cst: not a commscope trace (magic \"#!/bin/s\" at byte 0)");
    path_of(p, sizeof p, "rank-00006.cst");
    CHECK_INT(cs_reader_open(p, &r, err, sizeof err), ==, CS_ENOENT);
    CHECK_CONTAINS(err, "rank-00006.cst: cannot open: No such file or directory");
    CHECK_STR(cs_err_name(CS_ETRUNC), "CS_ETRUNC");
    CHECK_STR(cs_strerror(CS_ECRC), "checksum mismatch");
}

static void test_partial(void)
{
    char p[512], err[512];
    struct cs_reader *r;
    path_of(p, sizeof p, "rank-00000.cst");
    struct tw *w = tw_new(0, 2, 3, 3);
    int n = (int)CS_EVENTS_PER_BLOCK + 37; /* one full block, one partly filled */
    for (int i = 0; i < n; i++) {
        struct cs_event e = mkev(1000 + 10 * (uint64_t)i, CS_OP_ALLREDUCE, (uint64_t)i);
        tw_event(w, 0, &e);
    }
    struct tw_opts o = {.partial = 1, .unsealed = 1, .zero_blocks = 3, .garbage = 1};
    CHECK(tw_write(w, p, &o) > 0);
    tw_free(w);
    int rc = cs_reader_open(p, &r, err, sizeof err);
    CHECK_INT(rc, ==, 0);
    if (rc) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    const struct cs_reader_stats *st = cs_reader_stats(r);
    CHECK_INT(st->partial, ==, 1);
    CHECK_INT(st->events, ==, n);
    CHECK_INT(st->empty_blocks, ==, 3);
    CHECK_INT(st->unsealed_blocks, ==, 1);
    int k = 0;
    while (cs_reader_next(r))
        k++;
    CHECK_INT(k, ==, n);
    cs_reader_close(r);

    /* A rank killed while the file was being extended: a torn last block is ignored. */
    FILE *f = fopen(p, "ab");
    fputs("torn", f);
    fclose(f);
    CHECK_INT(cs_reader_open(p, &r, err, sizeof err), ==, 0);
    if (r) {
        CHECK_INT(cs_reader_stats(r)->trailing_bytes, ==, 4);
        CHECK_INT(cs_reader_stats(r)->events, ==, n);
        cs_reader_close(r);
    }
}

/* Bytes that must be zero, with valid CRCs: the header's padding (its last byte), and a block
 * without a magic whose only other nonzero byte is its last. */
static void test_zero_areas(void)
{
    char p[512], err[512];
    struct cs_reader *r;
    path_of(p, sizeof p, "rank-00003.cst");
    small_file(p);
    int fd = open(p, O_RDWR);
    unsigned char h[CS_HEADER_SIZE];
    CHECK_INT(pread(fd, h, sizeof h, 0), ==, (long)sizeof h);
    size_t crc_off = offsetof(struct cs_file_header, header_crc);
    h[CS_HEADER_SIZE - 1] = 1;
    memset(h + crc_off, 0, 4);
    uint32_t crc = cs_crc32(0, h, sizeof h);
    memcpy(h + crc_off, &crc, 4);
    CHECK_INT(pwrite(fd, h, sizeof h, 0), ==, (long)sizeof h);
    err[0] = '\0';
    CHECK_INT(cs_reader_open(p, &r, err, sizeof err), ==, CS_EHEADER);
    CHECK_CONTAINS(err, "header padding not zero (bytes");
    close(fd);

    small_file(p);
    fd = open(p, O_RDWR);
    static unsigned char blk[CS_BLOCK_SIZE];
    memset(blk, 0, sizeof blk);
    blk[CS_BLOCK_SIZE - 1] = 1;
    CHECK_INT(pwrite(fd, blk, sizeof blk, CS_HEADER_SIZE + CS_BLOCK_SIZE), ==, (long)sizeof blk);
    close(fd);
    err[0] = '\0';
    CHECK_INT(cs_reader_open(p, &r, err, sizeof err), ==, CS_EBLOCK);
    CHECK_CONTAINS(err, "block 1 has no block magic but is not empty (byte 20480)");
}

static void test_crc(void)
{
    unsigned char buf[1000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 131 + 7);
    int same = 1;
    for (size_t start = 0; start < 9; start++)
        for (size_t len = 0; len + start <= sizeof buf; len += 37)
            same &= cs_crc32(0, buf + start, len) == cs_crc32_simple(0, buf + start, len);
    CHECK(same);
    /* Every length and alignment around the 64- and 16-byte steps of the folding path (x86-64),
     * and a long buffer computed whole and in uneven pieces. */
    static unsigned char big[CS_BLOCK_SIZE + 100];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)((i * 2654435761u) >> 13);
    same = 1;
    for (size_t start = 0; start < 16; start++)
        for (size_t len = 0; len <= 300; len++)
            same &= cs_crc32(0x12345678u, big + start, len) ==
                    cs_crc32_simple(0x12345678u, big + start, len);
    CHECK(same);
    uint32_t whole = cs_crc32(0, big, sizeof big);
    CHECK_INT(whole, ==, cs_crc32_simple(0, big, sizeof big));
    uint32_t parts = 0;
    for (size_t off = 0, step = 1; off < sizeof big; off += step, step = step * 3 + 1)
        parts = cs_crc32(parts, big + off, step < sizeof big - off ? step : sizeof big - off);
    CHECK_INT(parts, ==, whole);
    CHECK_INT(cs_crc32(0, "123456789", 9), ==, 0xcbf43926u);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/cs-test-reader-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    test_crc();
    test_round_trip();
    test_truncations();
    test_corruptions();
    test_zero_areas();
    test_semantic_errors();
    test_foreign_empty_missing();
    test_partial();
    test_batch();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return cs_test_result();
}
