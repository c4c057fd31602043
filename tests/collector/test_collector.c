/*
 * Unit tests of libcommscope.so without MPI: drive cs_trace_open / cs_rec_begin / commit /
 * add_comm / close directly and check the written file byte by byte (a minimal direct parse of
 * include/commscope/trace.h, not the analyzer's reader).
 *
 * Modes: no argument runs every test; "--skew-child MODE P0" is the re-executed child of the
 * clock-skew tests (COMMSCOPE_TEST_CLOCK_SKEW is read by a constructor, so it needs a fresh
 * process with the variable already set).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cs_test.h"
#include "collector.h"

static char root[256];

static uint64_t raw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- small helpers ---------------------------------------------------------------------- */

static unsigned char *slurp(const char *path, size_t *len)
{
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        *len = (size_t)n;
    return buf;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Redirect fd 2 into a file between capture_begin and capture_end. */
static int saved_stderr = -1;
static char capture_path[300];

static void capture_begin(void)
{
    snprintf(capture_path, sizeof capture_path, "%s/stderr.txt", root);
    fflush(stderr);
    saved_stderr = dup(2);
    int fd = open(capture_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
}

static char captured[8192];

static const char *capture_end(void)
{
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    size_t n;
    unsigned char *b = slurp(capture_path, &n);
    if (n >= sizeof captured)
        n = sizeof captured - 1;
    memcpy(captured, b ? (char *)b : "", n);
    captured[n] = '\0';
    free(b);
    return captured;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static struct cs_trace_params params(int rank, int world)
{
    struct cs_trace_params p = {.rank = rank,
                                .world_size = world,
                                .thread_level = 1,
                                .run_id = 0x1122334455667788ull,
                                .t_init = cs_now()};
    return p;
}

static void set_dir(const char *sub)
{
    char d[300];
    snprintf(d, sizeof d, "%s/%s", root, sub);
    setenv("COMMSCOPE_DIR", d, 1);
}

/* ---- minimal trace parse ---------------------------------------------------------------- */

struct tf {
    unsigned char *buf;
    size_t len;
    const struct cs_file_header *h;
};

static int tf_load(struct tf *f, const char *path)
{
    f->buf = slurp(path, &f->len);
    f->h = (const struct cs_file_header *)f->buf;
    return f->buf && f->len >= CS_HEADER_SIZE ? 0 : -1;
}

static const struct cs_block_header *tf_block(const struct tf *f, uint64_t i)
{
    size_t off = CS_HEADER_SIZE + (size_t)i * CS_BLOCK_SIZE;
    return off + CS_BLOCK_SIZE <= f->len ? (const struct cs_block_header *)(f->buf + off) : NULL;
}

static uint32_t block_crc(const struct cs_block_header *b, uint32_t span)
{
    size_t n = (size_t)span * CS_BLOCK_SIZE;
    unsigned char *copy = malloc(n);
    memcpy(copy, b, n);
    ((struct cs_block_header *)copy)->crc = 0;
    uint32_t c = cs_crc32_simple(0, copy, n);
    free(copy);
    return c;
}

static uint32_t header_crc(const struct tf *f)
{
    unsigned char copy[CS_HEADER_SIZE];
    memcpy(copy, f->buf, CS_HEADER_SIZE);
    ((struct cs_file_header *)copy)->header_crc = 0;
    return cs_crc32_simple(0, copy, CS_HEADER_SIZE);
}

/*
 * Check a closed file's framing: size, header constants and CRC, every block's magic, kind and
 * CRC.  Returns the sum of `used` over event blocks.
 */
static uint64_t check_closed(const struct tf *f)
{
    const struct cs_file_header *h = f->h;
    CHECK(memcmp(h->magic, CS_TRACE_MAGIC, 8) == 0);
    CHECK_INT(h->version, ==, CS_TRACE_VERSION);
    CHECK_INT(h->header_size, ==, CS_HEADER_SIZE);
    CHECK_INT(h->block_size, ==, CS_BLOCK_SIZE);
    CHECK_INT(h->event_size, ==, CS_EVENT_SIZE);
    CHECK_INT(h->flags & CS_FLAG_PARTIAL, ==, 0);
    CHECK_INT(f->len, ==, CS_HEADER_SIZE + h->blocks * CS_BLOCK_SIZE);
    CHECK_INT(h->header_crc, ==, header_crc(f));
    uint64_t events = 0;
    for (uint64_t i = 0; i < h->blocks;) {
        const struct cs_block_header *b = tf_block(f, i);
        if (!b)
            break;
        CHECK_INT(b->magic, ==, CS_BLOCK_MAGIC);
        CHECK(b->kind == CS_BLOCK_EVENTS || b->kind == CS_BLOCK_COMMS);
        uint32_t span = b->span;
        CHECK(span >= 1 && i + span <= h->blocks);
        if (span < 1 || i + span > h->blocks)
            break;
        CHECK(b->crc != 0);
        CHECK_INT(b->crc, ==, block_crc(b, span));
        if (b->kind == CS_BLOCK_EVENTS) {
            CHECK_INT(span, ==, 1);
            CHECK_INT(b->used, <=, CS_EVENTS_PER_BLOCK);
            events += b->used;
        } else {
            CHECK_INT(b->used, <=, span * CS_BLOCK_SIZE - sizeof *b);
        }
        i += span;
    }
    CHECK_INT(h->events, ==, events);
    return events;
}

static const struct cs_event *block_event(const struct cs_block_header *b, uint32_t i)
{
    return (const struct cs_event *)(b + 1) + i;
}

/* Fill an event so its content identifies the writer and its index. */
static void fill(struct cs_event *ev, uint64_t who, uint64_t idx)
{
    ev->t_begin = 1000 + idx;
    ev->t_end = 2000 + idx;
    ev->comm = CS_COMM_WORLD_ID;
    ev->bytes = who;
    ev->bytes_recv = idx * 3;
    ev->request = idx;
    ev->seq = (uint32_t)idx;
    ev->peer = (int32_t)who - 1;
    ev->op = CS_OP_ALLREDUCE;
    ev->flags = CS_EV_IN_PLACE;
    ev->aux = 0x5a5a;
}

static int event_ok(const struct cs_event *ev, uint64_t who, uint64_t idx)
{
    return ev->t_begin == 1000 + idx && ev->t_end == 2000 + idx && ev->comm == CS_COMM_WORLD_ID &&
           ev->bytes == who && ev->bytes_recv == idx * 3 && ev->request == idx &&
           ev->seq == (uint32_t)idx && ev->peer == (int32_t)who - 1 && ev->op == CS_OP_ALLREDUCE &&
           ev->flags == CS_EV_IN_PLACE && ev->aux == 0x5a5a;
}

static int record(uint64_t who, uint64_t idx)
{
    struct cs_event *ev = cs_rec_begin();
    if (!ev)
        return 0;
    fill(ev, who, idx);
    cs_rec_commit(ev);
    return 1;
}

/* A communicator record of `size` members, member i = (i * 7 + salt) % 100003. */
static struct cs_comm_record *make_comm(uint64_t id, int size, int salt)
{
    struct cs_comm_record *r = calloc(1, sizeof *r + (size_t)size * sizeof(int32_t));
    r->record_bytes = (uint32_t)((sizeof *r + (size_t)size * 4 + 7) & ~(size_t)7);
    r->kind = CS_COMM_MPI;
    r->op = CS_OP_COMM_SPLIT;
    r->id = id;
    r->parent = CS_COMM_WORLD_ID;
    r->t_created = 42 + id;
    r->size = size;
    r->my_rank = size / 2;
    r->color = salt;
    r->key = -salt;
    for (int i = 0; i < size; i++)
        r->members[i] = (int32_t)(((int64_t)i * 7 + salt) % 100003);
    return r;
}

static int comm_ok(const struct cs_comm_record *r, uint64_t id, int size, int salt)
{
    if (r->record_bytes != ((sizeof *r + (size_t)size * 4 + 7) & ~(size_t)7) ||
        r->kind != CS_COMM_MPI || r->op != CS_OP_COMM_SPLIT || r->id != id ||
        r->parent != CS_COMM_WORLD_ID || r->t_created != 42 + id || r->size != size ||
        r->my_rank != size / 2 || r->color != salt || r->key != -salt)
        return 0;
    for (int i = 0; i < size; i++)
        if (r->members[i] != (int32_t)(((int64_t)i * 7 + salt) % 100003))
            return 0;
    return 1;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_warn_format(void)
{
    capture_begin();
    cs_warn("hello %d", 42);
    const char *out = capture_end();
    CHECK_STR(out, "commscope: hello 42\n");
}

static void test_basic(void)
{
    set_dir("basic/run");
    unsetenv("COMMSCOPE_LOCAL_DIR");
    unsetenv("COMMSCOPE_MAX_MB");
    struct cs_trace_params p = params(3, 8);
    p.thread_level = 3;
    CHECK_INT(cs_trace_open(&p), ==, 0);
    CHECK_INT(cs_active, ==, 1);
    char want[400];
    snprintf(want, sizeof want, "%s/basic/run/rank-00003.cst", root);
    CHECK_STR(cs_trace_path(), want);
    snprintf(want, sizeof want, "%s/basic/run", root);
    CHECK_STR(cs_run_dir(), want);
    CHECK(cs_trace_header() != NULL);

    capture_begin();
    cs_warn("ranked");
    CHECK_STR(capture_end(), "commscope[rank 3]: ranked\n");

    /* A slot begun and not committed is handed out again, zeroed. */
    struct cs_event *ev = cs_rec_begin();
    CHECK(ev != NULL);
    ev->aux = 77;
    ev->bytes = 99;
    struct cs_event *again = cs_rec_begin();
    CHECK(again == ev);
    CHECK_INT(again->aux, ==, 0);
    CHECK_INT(again->bytes, ==, 0);

    const int n = 1000;
    int ok = 0;
    for (int i = 0; i < n; i++)
        ok += record(1, (uint64_t)i);
    CHECK_INT(ok, ==, n);

    /* Records: small, world, one spanning 3 blocks, then small ones after it. */
    struct cs_comm_record *c1 = make_comm(100, 5, 1), *c2 = make_comm(CS_COMM_WORLD_ID, 8, 2),
                          *big = make_comm(200, 10000, 3), *c3 = make_comm(300, 3, 4);
    CHECK_INT(cs_trace_add_comm(c1), ==, 0);
    CHECK_INT(cs_trace_add_comm(c2), ==, 0);
    CHECK_INT(cs_trace_add_comm(big), ==, 0);
    CHECK_INT(cs_trace_add_comm(c3), ==, 0);
    /* 400 more small ones (48 + 12 -> 64 bytes) fill a second comm block: 255 per block. */
    for (int i = 0; i < 400; i++) {
        struct cs_comm_record *c = make_comm(1000 + (uint64_t)i, 3, i);
        CHECK_INT(cs_trace_add_comm(c), ==, 0);
        free(c);
    }

    struct cs_clock_sample s0 = {
        .local_ns = 5, .offset_ns = -7, .rtt_ns = 11, .rounds = 9, .valid = 1};
    struct cs_clock_sample s1 = {
        .local_ns = 6, .offset_ns = 8, .rtt_ns = 12, .rounds = 10, .valid = 1};
    cs_trace_set_clock(0, &s0);
    cs_trace_set_clock(1, &s1);
    cs_trace_set_clock(2, &s1); /* out of range: ignored */
    cs_trace_count_test(100);
    cs_trace_count_test(23);

    uint64_t t_fin = cs_now();
    cs_trace_close(t_fin);
    CHECK_INT(cs_active, ==, 0);
    CHECK(cs_trace_header() == NULL);
    CHECK(cs_rec_begin() == NULL);
    CHECK_INT(cs_trace_add_comm(c1), ==, -1);
    cs_trace_close(t_fin + 1); /* idempotent: must not touch the file */
    snprintf(want, sizeof want, "%s/basic/run/rank-00003.cst", root);
    CHECK_STR(cs_trace_path(), want);

    struct tf f;
    CHECK_INT(tf_load(&f, want), ==, 0);
    if (!f.buf)
        return;
    const struct cs_file_header *h = f.h;
    CHECK_INT(check_closed(&f), ==, n);
    CHECK_INT(h->flags, ==, CS_FLAG_THREADS | CS_FLAG_CHECKED);
    CHECK_INT(h->rank, ==, 3);
    CHECK_INT(h->world_size, ==, 8);
    CHECK_INT(h->pid, ==, getpid());
    CHECK_INT(h->thread_level, ==, 3);
    CHECK(h->run_id == 0x1122334455667788ull);
    CHECK(h->nonce != 0);
    CHECK(h->t_init == p.t_init);
    CHECK(h->t_finalize == t_fin);
    CHECK_INT(h->dropped, ==, 0);
    CHECK_INT(h->unrecorded_tests, ==, 2);
    CHECK_INT(h->unrecorded_test_ns, ==, 123);
    CHECK(memcmp(&h->clock[0], &s0, sizeof s0) == 0);
    CHECK(memcmp(&h->clock[1], &s1, sizeof s1) == 0);
    char host[CS_HOST_MAX] = "";
    gethostname(host, sizeof host - 1);
    CHECK_STR(h->host, host);
    char exe[CS_PROGRAM_MAX] = "";
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[el > 0 ? el : 0] = '\0';
    CHECK_STR(h->program, exe);
    CHECK_STR(h->note, "");

    /* Blocks: 4 event blocks (255, 255, 255, 235 events), comm blocks seq 0 (c1, c2), 1 (big,
     * span 3), 2 (c3 + 254 small), 3 (146 small); 4 + 1 + 3 + 1 + 1 = 10 blocks. */
    CHECK_INT(h->blocks, ==, 10);
    uint64_t next_event = 0, event_seq = 0, comm_seq = 0;
    int comm_found = 0, small_found = 0;
    for (uint64_t i = 0; i < h->blocks;) {
        const struct cs_block_header *b = tf_block(&f, i);
        if (!b)
            break;
        if (b->kind == CS_BLOCK_EVENTS) {
            CHECK_INT(b->thread, ==, 0);
            CHECK_INT(b->ostid, ==, getpid()); /* main thread */
            CHECK_INT(b->seq, ==, event_seq);
            event_seq++;
            CHECK_INT(b->used, ==, next_event + 255 <= (uint64_t)n ? 255 : n - next_event);
            for (uint32_t k = 0; k < b->used; k++, next_event++)
                if (!event_ok(block_event(b, k), 1, next_event))
                    CHECK_INT(next_event, ==, -1); /* prints the bad index */
        } else {
            CHECK_INT(b->seq, ==, comm_seq);
            const unsigned char *q = (const unsigned char *)(b + 1), *end = q + b->used;
            while (q < end) {
                const struct cs_comm_record *r = (const void *)q;
                CHECK_INT(r->record_bytes % 8, ==, 0);
                if (r->id == 100) {
                    CHECK_INT(comm_seq, ==, 0);
                    CHECK(comm_ok(r, 100, 5, 1));
                    comm_found |= 1;
                } else if (r->id == CS_COMM_WORLD_ID) {
                    CHECK(comm_ok(r, CS_COMM_WORLD_ID, 8, 2));
                    comm_found |= 2;
                } else if (r->id == 200) {
                    CHECK_INT(comm_seq, ==, 1);
                    CHECK_INT(b->span, ==, 3);
                    CHECK_INT(b->used, ==, 48 + 40000);
                    CHECK(comm_ok(r, 200, 10000, 3));
                    comm_found |= 4;
                } else if (r->id == 300) {
                    CHECK_INT(comm_seq, ==, 2);
                    CHECK(comm_ok(r, 300, 3, 4));
                    comm_found |= 8;
                } else {
                    int k = (int)(r->id - 1000);
                    CHECK_INT(k, ==, small_found);
                    CHECK(comm_ok(r, r->id, 3, k));
                    small_found++;
                }
                if (r->record_bytes == 0)
                    break;
                q += r->record_bytes;
            }
            CHECK(q == end);
            comm_seq++;
        }
        i += b->span ? b->span : 1;
    }
    CHECK_INT(next_event, ==, n);
    CHECK_INT(comm_found, ==, 15);
    CHECK_INT(small_found, ==, 400);
    CHECK_INT(comm_seq, ==, 4);
    free(f.buf);
    free(c1);
    free(c2);
    free(big);
    free(c3);
}

static void test_default_dir(void)
{
    unsetenv("COMMSCOPE_DIR");
    unsetenv("COMMSCOPE_LOCAL_DIR");
    char cwd[512], d[300];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(d, sizeof d, "%s/defdir", root);
    mkdir(d, 0755);
    CHECK_INT(chdir(d), ==, 0);
    struct cs_trace_params p = params(0, 1);
    p.run_id = 0xabc;
    CHECK_INT(cs_trace_open(&p), ==, 0);
    CHECK_STR(cs_run_dir(), "./commscope-run-0000000000000abc");
    CHECK_STR(cs_trace_path(), "./commscope-run-0000000000000abc/rank-00000.cst");
    cs_trace_close(cs_now());
    CHECK(exists("commscope-run-0000000000000abc/rank-00000.cst"));
    CHECK_INT(chdir(cwd), ==, 0);
}

static void test_local_dir(void)
{
    set_dir("ldir/run");
    char l[300], want[600], host[CS_HOST_MAX] = "";
    snprintf(l, sizeof l, "%s/ldir/node-%%h/r%%r/100%%%%", root);
    setenv("COMMSCOPE_LOCAL_DIR", l, 1);
    gethostname(host, sizeof host - 1);
    struct cs_trace_params p = params(12, 16);
    CHECK_INT(cs_trace_open(&p), ==, 0);
    snprintf(want, sizeof want, "%s/ldir/node-%s/r12/100%%/rank-00012.cst", root, host);
    CHECK_STR(cs_trace_path(), want);
    record(1, 0);
    cs_trace_close(cs_now());
    CHECK(exists(want));
    /* Only rank 0 creates the run directory when it differs from the local one. */
    snprintf(want, sizeof want, "%s/ldir/run", root);
    CHECK(!exists(want));
    p = params(0, 16);
    CHECK_INT(cs_trace_open(&p), ==, 0);
    cs_trace_close(cs_now());
    CHECK(exists(want));
    unsetenv("COMMSCOPE_LOCAL_DIR");
}

static void test_bad_env(void)
{
    set_dir("badenv");
    setenv("COMMSCOPE_MAX_MB", "12abc", 1);
    setenv("COMMSCOPE_DISABLE", "banana", 1);
    char l[300];
    snprintf(l, sizeof l, "%s/badenv-%%q", root);
    setenv("COMMSCOPE_LOCAL_DIR", l, 1);
    struct cs_trace_params p = params(1, 2);
    capture_begin();
    int rc = cs_trace_open(&p);
    const char *out = capture_end();
    CHECK_INT(rc, ==, 0);
    CHECK_CONTAINS(out, "commscope[rank 1]: COMMSCOPE_MAX_MB=\"12abc\"");
    CHECK_CONTAINS(out, "using 1024");
    CHECK_CONTAINS(out, "COMMSCOPE_DISABLE=\"banana\"");
    CHECK_CONTAINS(out, "COMMSCOPE_LOCAL_DIR=");
    CHECK_CONTAINS(out, "badenv-%q");
    CHECK_INT(count_lines(out), ==, 3);
    char want[400];
    snprintf(want, sizeof want, "%s/badenv/rank-00001.cst", root);
    CHECK_STR(cs_trace_path(), want);
    cs_trace_close(cs_now());
    CHECK(exists(want));

    unsetenv("COMMSCOPE_DISABLE");
    unsetenv("COMMSCOPE_LOCAL_DIR");
    const char *bad_mb[] = {"0", "-5", "", "1048577", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad_mb / sizeof bad_mb[0]; i++) {
        setenv("COMMSCOPE_MAX_MB", bad_mb[i], 1);
        capture_begin();
        rc = cs_trace_open(&p);
        out = capture_end();
        CHECK_INT(rc, ==, 0);
        if (bad_mb[i][0]) {
            CHECK_CONTAINS(out, "COMMSCOPE_MAX_MB");
            CHECK_CONTAINS(out, bad_mb[i]);
            CHECK_INT(count_lines(out), ==, 1);
        } else {
            CHECK_STR(out, ""); /* empty = unset */
        }
        cs_trace_close(cs_now());
    }
    unsetenv("COMMSCOPE_MAX_MB");
    unsetenv("COMMSCOPE_DISABLE");
    unsetenv("COMMSCOPE_LOCAL_DIR");
}

/* COMMSCOPE_GATHER: auto (the default, also after a bad value) gathers up to 256 ranks, always
 * and never whatever the size. */
static void test_gather_env(void)
{
    set_dir("gatherenv");
    static const struct {
        const char *v;
        int at256, at257, warns;
    } cases[] = {{NULL, 1, 0, 0},
                 {"auto", 1, 0, 0},
                 {"ALWAYS", 1, 1, 0},
                 {"never", 0, 0, 0},
                 {"sometimes", 1, 0, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].v)
            setenv("COMMSCOPE_GATHER", cases[i].v, 1);
        else
            unsetenv("COMMSCOPE_GATHER");
        struct cs_trace_params p = params(0, 1);
        capture_begin();
        CHECK_INT(cs_trace_open(&p), ==, 0);
        const char *out = capture_end();
        CHECK_INT(count_lines(out), ==, cases[i].warns);
        if (cases[i].warns)
            CHECK_CONTAINS(out, "COMMSCOPE_GATHER=\"sometimes\" is not auto, always or never");
        CHECK_INT(cs_gather_traces(1), ==, cases[i].at256 || cases[i].at257);
        CHECK_INT(cs_gather_traces(CS_GATHER_AUTO_MAX), ==, cases[i].at256);
        CHECK_INT(cs_gather_traces(CS_GATHER_AUTO_MAX + 1), ==, cases[i].at257);
        cs_trace_close(cs_now());
    }
    unsetenv("COMMSCOPE_GATHER");
}

static void test_disable_env(void)
{
    set_dir("disabled");
    const char *on[] = {"1", "yes", "TRUE", "on"};
    for (size_t i = 0; i < 4; i++) {
        setenv("COMMSCOPE_DISABLE", on[i], 1);
        struct cs_trace_params p = params(0, 1);
        capture_begin();
        int rc = cs_trace_open(&p);
        CHECK_STR(capture_end(), "");
        CHECK_INT(rc, ==, -1);
        CHECK_INT(cs_active, ==, 0);
        CHECK(cs_rec_begin() == NULL);
        CHECK(cs_trace_header() == NULL);
    }
    char d[300];
    snprintf(d, sizeof d, "%s/disabled", root);
    CHECK(!exists(d));
    setenv("COMMSCOPE_DISABLE", "0", 1);
    struct cs_trace_params p = params(0, 1);
    CHECK_INT(cs_trace_open(&p), ==, 0);
    cs_trace_close(cs_now());
    unsetenv("COMMSCOPE_DISABLE");
}

static void test_cs_disable(void)
{
    set_dir("csdisable");
    struct cs_trace_params p = params(2, 4);
    CHECK_INT(cs_trace_open(&p), ==, 0);
    for (int i = 0; i < 10; i++)
        record(1, (uint64_t)i);
    capture_begin();
    cs_disable("test reason %d", 7);
    cs_disable("second reason");
    const char *out = capture_end();
    CHECK_STR(out, "commscope[rank 2]: tracing off: test reason 7\n");
    CHECK_INT(cs_active, ==, 0);
    CHECK(cs_rec_begin() == NULL);
    CHECK(cs_trace_header() != NULL);
    cs_trace_close(cs_now());
    struct tf f;
    CHECK_INT(tf_load(&f, cs_trace_path()), ==, 0);
    if (f.buf) {
        CHECK_INT(check_closed(&f), ==, 10);
        CHECK_INT(f.h->flags, ==, CS_FLAG_DISABLED | CS_FLAG_CHECKED);
        CHECK_STR(f.h->note, "test reason 7");
        free(f.buf);
    }
    /* A new trace after close starts enabled again. */
    CHECK_INT(cs_trace_open(&p), ==, 0);
    CHECK(record(1, 0));
    cs_trace_close(cs_now());
}

static void test_open_failures(void)
{
    char d[300];
    snprintf(d, sizeof d, "%s/afile", root);
    FILE *fp = fopen(d, "w");
    if (fp)
        fclose(fp);
    snprintf(d, sizeof d, "%s/afile/sub", root);
    setenv("COMMSCOPE_DIR", d, 1);
    struct cs_trace_params p = params(0, 1);
    capture_begin();
    int rc = cs_trace_open(&p);
    const char *out = capture_end();
    CHECK_INT(rc, ==, -1);
    CHECK_CONTAINS(out, "cannot create trace directory");
    CHECK_CONTAINS(out, d);
    CHECK_INT(cs_active, ==, 0);
    CHECK(cs_rec_begin() == NULL);

    set_dir("badrank");
    p = params(5, 4);
    capture_begin();
    rc = cs_trace_open(&p);
    out = capture_end();
    CHECK_INT(rc, ==, -1);
    CHECK_CONTAINS(out, "rank 5 of world size 4");
    CHECK_INT(cs_trace_open(NULL), ==, -1);

    /* Opening twice keeps the first trace. */
    p = params(0, 1);
    CHECK_INT(cs_trace_open(&p), ==, 0);
    capture_begin();
    rc = cs_trace_open(&p);
    out = capture_end();
    CHECK_INT(rc, ==, -1);
    CHECK_CONTAINS(out, "already open");
    CHECK_INT(cs_active, ==, 1);
    cs_trace_close(cs_now());
}

/* A slot begun before close and committed after a new open is ignored (its block is gone). */
static void test_stale_commit(void)
{
    set_dir("stale");
#ifdef __SANITIZE_THREAD__
    /* ThreadSanitizer's shadow memory leaves no room for a 1 TiB mapping. */
    setenv("COMMSCOPE_MAX_MB", "1024", 1);
#else
    setenv("COMMSCOPE_MAX_MB", "1048576", 1); /* the largest cap maps 1 TiB of address space */
#endif
    struct cs_trace_params p = params(0, 1);
    CHECK_INT(cs_trace_open(&p), ==, 0);
    struct cs_event *old = cs_rec_begin();
    CHECK(old != NULL);
    cs_trace_close(cs_now());
    unsetenv("COMMSCOPE_MAX_MB");
    CHECK_INT(cs_trace_open(&p), ==, 0);
    cs_rec_commit(old);
    CHECK(record(1, 0));
    cs_trace_close(cs_now());
    struct tf f;
    CHECK_INT(tf_load(&f, cs_trace_path()), ==, 0);
    if (f.buf) {
        CHECK_INT(check_closed(&f), ==, 1);
        free(f.buf);
    }
}

static void test_cap(void)
{
    set_dir("cap");
    setenv("COMMSCOPE_MAX_MB", "1", 1);
    struct cs_trace_params p = params(0, 1);
    CHECK_INT(cs_trace_open(&p), ==, 0);
    /* 1 MiB holds (1048576 - 4096) / 16384 = 63 blocks: one comm block, 62 event blocks. */
    struct cs_comm_record *c = make_comm(7, 4, 0);
    CHECK_INT(cs_trace_add_comm(c), ==, 0);
    const uint64_t fit = 62 * CS_EVENTS_PER_BLOCK, extra = 777;
    uint64_t recorded = 0, nulls = 0;
    for (uint64_t i = 0; i < fit + extra; i++) {
        if (record(2, i))
            recorded++;
        else
            nulls++;
    }
    CHECK_INT(recorded, ==, fit);
    CHECK_INT(nulls, ==, extra);
    CHECK_INT(cs_trace_header()->dropped, ==, extra);
    CHECK(cs_trace_header()->flags & CS_FLAG_DROPPED);
    /* The comm table has no room either: one warning, then -1 quietly. */
    struct cs_comm_record *big = make_comm(8, 5000, 0);
    capture_begin();
    CHECK_INT(cs_trace_add_comm(big), ==, -1);
    CHECK_INT(cs_trace_add_comm(big), ==, -1);
    const char *out = capture_end();
    CHECK_CONTAINS(out, "at its cap");
    CHECK_INT(count_lines(out), ==, 1);
    cs_trace_close(cs_now());

    struct tf f;
    CHECK_INT(tf_load(&f, cs_trace_path()), ==, 0);
    if (f.buf) {
        CHECK_INT(f.len, ==, 4096 + 63 * 16384);
        CHECK_INT(f.h->blocks, ==, 63);
        CHECK_INT(check_closed(&f), ==, fit);
        CHECK_INT(f.h->dropped, ==, extra);
        CHECK_INT(f.h->flags, ==, CS_FLAG_DROPPED | CS_FLAG_CHECKED);
        uint64_t idx = 0;
        for (uint64_t i = 0; i < 63; i++) {
            const struct cs_block_header *b = tf_block(&f, i);
            if (b->kind != CS_BLOCK_EVENTS)
                continue;
            for (uint32_t k = 0; k < b->used; k++, idx++)
                if (!event_ok(block_event(b, k), 2, idx))
                    CHECK_INT(idx, ==, -1);
        }
        CHECK_INT(idx, ==, fit);
        free(f.buf);
    }
    free(c);
    free(big);
    unsetenv("COMMSCOPE_MAX_MB");
}

#define NTHREADS 8
#define PER_THREAD 100000

/*
 * File-size limits (ulimit -f), in a child each: below the header and one block, no trace and a
 * warning; a limit of 40 KiB holds the header and two blocks, the rest is counted as dropped;
 * a limit the program lowers after the open stops the growth at it.  Never SIGXFSZ: the child
 * would die of it (the default action), which the parent sees.
 */
static int fsize_child(const char *sub, rlim_t limit, int lower_later)
{
    set_dir(sub);
    struct rlimit rl = {limit, limit};
    if (!lower_later && setrlimit(RLIMIT_FSIZE, &rl) != 0)
        return 2;
    struct cs_trace_params p = params(0, 1);
    int rc = cs_trace_open(&p);
    if (limit < CS_HEADER_SIZE + CS_BLOCK_SIZE)
        return rc == -1 && !exists(cs_trace_path()) ? 0 : 3;
    if (rc != 0)
        return 4;
    if (lower_later && setrlimit(RLIMIT_FSIZE, &rl) != 0)
        return 2;
    /* 20,000 events need 80 blocks, more than 40 KiB hold; with the limit lowered to 65 MiB
     * after the open (which reserved 64 MiB), 1,100,000 events (69 MiB) go past it. */
    uint64_t n = lower_later ? 1100000 : 20000, ok = 0;
    for (uint64_t i = 0; i < n; i++)
        ok += (uint64_t)record(3, i);
    uint64_t dropped = cs_trace_header()->dropped;
    cs_trace_close(cs_now());
    struct tf f;
    if (tf_load(&f, cs_trace_path()) != 0)
        return 5;
    uint64_t kept = check_closed(&f);
    int good = f.len <= limit && kept == ok && ok + dropped == n && dropped > 0;
    free(f.buf);
    return good ? 0 : 6;
}

static void test_fsize_limit(void)
{
    static const struct {
        const char *sub, *warning;
        rlim_t limit;
        int later;
    } cases[] = {
        {"fsize-tiny", "leaves no room for a trace file", 16 << 10, 0},
        {"fsize-small", "capped at 40 KiB by the file-size limit", 40 << 10, 0},
        {"fsize-later", "recording stopped", 65 << 20, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        capture_begin();
        pid_t pid = fork();
        if (pid == 0)
            _exit(fsize_child(cases[i].sub, cases[i].limit, cases[i].later));
        int st = 0;
        waitpid(pid, &st, 0);
        const char *out = capture_end();
        CHECK(WIFEXITED(st));
        CHECK_INT(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), ==, 0);
        CHECK_CONTAINS(out, cases[i].warning);
    }
}

static pthread_barrier_t start_barrier;

static void *thread_main(void *arg)
{
    uint64_t who = (uint64_t)(uintptr_t)arg;
    pthread_barrier_wait(&start_barrier);
    uint64_t failed = 0;
    for (uint64_t i = 0; i < PER_THREAD; i++)
        failed += !record(who, i);
    return (void *)(uintptr_t)failed;
}

/* NTHREADS writers of PER_THREAD events each, started together; returns the events that found
 * no slot. */
static uint64_t run_writers(void)
{
    pthread_t th[NTHREADS];
    pthread_barrier_init(&start_barrier, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&th[i], NULL, thread_main, (void *)(uintptr_t)(i + 1));
    uint64_t failed = 0;
    for (int i = 0; i < NTHREADS; i++) {
        void *r;
        pthread_join(th[i], &r);
        failed += (uint64_t)(uintptr_t)r;
    }
    pthread_barrier_destroy(&start_barrier);
    return failed;
}

static void test_threads(void)
{
    set_dir("threads");
    struct cs_trace_params p = params(0, 1);
    CHECK_INT(cs_trace_open(&p), ==, 0);
    uint64_t failed = run_writers();
    CHECK_INT(failed, ==, 0);
    cs_trace_close(cs_now());

    struct tf f;
    CHECK_INT(tf_load(&f, cs_trace_path()), ==, 0);
    if (!f.buf)
        return;
    CHECK_INT(check_closed(&f), ==, (uint64_t)NTHREADS * PER_THREAD);
    uint8_t *seen = calloc((size_t)NTHREADS * PER_THREAD, 1);
    /* Per thread index: which writer it is, its OS tid, and its next block seq / event index. */
    int64_t writer[NTHREADS], next_idx[NTHREADS + 1];
    uint32_t tid[NTHREADS];
    uint64_t next_seq[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        writer[i] = -1, next_seq[i] = 0, tid[i] = 0;
    for (int i = 0; i <= NTHREADS; i++)
        next_idx[i] = 0;
    uint64_t dup = 0, bad = 0;
    /* Walk each thread's blocks in seq order: collect blocks per thread first. */
    for (uint64_t i = 0; i < f.h->blocks; i++) {
        const struct cs_block_header *b = tf_block(&f, i);
        CHECK_INT(b->kind, ==, CS_BLOCK_EVENTS);
        CHECK_INT(b->thread, <, NTHREADS);
        if (b->thread >= NTHREADS || b->used == 0)
            continue;
        int64_t who = (int64_t)block_event(b, 0)->bytes;
        if (writer[b->thread] < 0) {
            writer[b->thread] = who;
            tid[b->thread] = b->ostid;
        }
        CHECK_INT(writer[b->thread], ==, who);
        CHECK_INT(tid[b->thread], ==, b->ostid);
        for (uint32_t k = 0; k < b->used; k++) {
            const struct cs_event *ev = block_event(b, k);
            uint64_t w = ev->bytes, idx = ev->request;
            /* Events of one block are consecutive in the writer's order. */
            if (w < 1 || w > NTHREADS || idx >= PER_THREAD || !event_ok(ev, w, idx) ||
                idx != ev[-(int)k].request + k || w != (uint64_t)who) {
                bad++;
                continue;
            }
            uint8_t *s = &seen[(w - 1) * PER_THREAD + idx];
            dup += *s;
            *s = 1;
        }
    }
    CHECK_INT(bad, ==, 0);
    CHECK_INT(dup, ==, 0);
    uint64_t missing = 0;
    for (size_t i = 0; i < (size_t)NTHREADS * PER_THREAD; i++)
        missing += !seen[i];
    CHECK_INT(missing, ==, 0);
    /* Every thread index belongs to exactly one writer, with distinct OS tids. */
    for (int i = 0; i < NTHREADS; i++) {
        CHECK(writer[i] >= 1);
        for (int j = 0; j < i; j++) {
            CHECK(writer[i] != writer[j]);
            CHECK(tid[i] != tid[j]);
        }
    }
    /* Block seqs of each thread are 0..k-1 and its blocks in seq order hold events 0..N-1. */
    for (int t = 0; t < NTHREADS; t++) {
        for (;;) {
            const struct cs_block_header *hit = NULL;
            for (uint64_t i = 0; i < f.h->blocks && !hit; i++) {
                const struct cs_block_header *b = tf_block(&f, i);
                if (b->thread == t && b->seq == next_seq[t])
                    hit = b;
            }
            if (!hit)
                break;
            CHECK_INT(block_event(hit, 0)->request, ==, next_idx[t]);
            next_idx[t] += hit->used;
            next_seq[t]++;
        }
        CHECK_INT(next_idx[t], ==, PER_THREAD);
        CHECK_INT(next_seq[t], ==, (PER_THREAD + CS_EVENTS_PER_BLOCK - 1) / CS_EVENTS_PER_BLOCK);
    }
    free(seen);
    free(f.buf);
}

static void test_fork_child_inert(void)
{
    set_dir("fork");
    struct cs_trace_params p = params(1, 2);
    CHECK_INT(cs_trace_open(&p), ==, 0);
    for (int i = 0; i < 10; i++)
        record(3, (uint64_t)i);
    /* A slot begun before the fork: the child scribbles on it, the parent commits its own. */
    struct cs_event *pending = cs_rec_begin();
    CHECK(pending != NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int bad = 0;
        if (pending)
            memset(pending, 0xee, sizeof *pending);
        bad |= cs_active != 0;
        bad |= (cs_rec_begin() != NULL) << 1;
        struct cs_comm_record *c = make_comm(9, 2, 0);
        bad |= (cs_trace_add_comm(c) != -1) << 2;
        bad |= (cs_trace_header() != NULL) << 3;
        bad |= (cs_trace_open(&p) != -1) << 4;
        cs_trace_close(1);
        bad |= (cs_rec_begin() != NULL) << 5;
        _exit(bad);
    }
    int st = 0;
    CHECK_INT(waitpid(pid, &st, 0), ==, pid);
    CHECK(WIFEXITED(st));
    CHECK_INT(WEXITSTATUS(st), ==, 0);
    if (pending) {
        fill(pending, 3, 10);
        cs_rec_commit(pending);
    }
    for (int i = 11; i < 20; i++)
        record(3, (uint64_t)i);
    cs_trace_close(cs_now());
    struct tf f;
    CHECK_INT(tf_load(&f, cs_trace_path()), ==, 0);
    if (f.buf) {
        CHECK_INT(check_closed(&f), ==, 20);
        CHECK_INT(f.h->blocks, ==, 1);
        const struct cs_block_header *b = tf_block(&f, 0);
        for (uint32_t k = 0; b && k < b->used; k++)
            if (!event_ok(block_event(b, k), 3, k))
                CHECK_INT(k, ==, -1);
        free(f.buf);
    }
}

/* A rank SIGKILLed mid-run keeps every committed event in its file. */
static void test_crash(void)
{
    set_dir("crash");
    const int n = 1000;
    pid_t pid = fork();
    if (pid == 0) {
        struct cs_trace_params p = params(7, 8);
        if (cs_trace_open(&p) != 0)
            _exit(1);
        struct cs_comm_record *c = make_comm(55, 6, 5);
        cs_trace_add_comm(c);
        for (int i = 0; i < n; i++)
            record(4, (uint64_t)i);
        /* A begun, uncommitted slot must not count. */
        struct cs_event *ev = cs_rec_begin();
        if (ev)
            fill(ev, 4, (uint64_t)n);
        raise(SIGKILL);
        _exit(2);
    }
    int st = 0;
    CHECK_INT(waitpid(pid, &st, 0), ==, pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    char path[400];
    snprintf(path, sizeof path, "%s/crash/rank-00007.cst", root);
    struct tf f;
    CHECK_INT(tf_load(&f, path), ==, 0);
    if (!f.buf)
        return;
    const struct cs_file_header *h = f.h;
    CHECK(memcmp(h->magic, CS_TRACE_MAGIC, 8) == 0);
    CHECK(h->flags & CS_FLAG_PARTIAL);
    CHECK_INT(h->header_crc, ==, 0);
    CHECK_INT(h->blocks, ==, 0);
    CHECK_INT(h->rank, ==, 7);
    CHECK_INT(h->pid, ==, pid);
    CHECK_INT((f.len - CS_HEADER_SIZE) % CS_BLOCK_SIZE, ==, 0);
    uint64_t idx = 0, sealed = 0, comm = 0, zero_blocks = 0, nblocks = (f.len - 4096) / 16384;
    for (uint64_t i = 0; i < nblocks; i++) {
        const struct cs_block_header *b = tf_block(&f, i);
        if (b->magic != CS_BLOCK_MAGIC) {
            zero_blocks++;
            continue;
        }
        if (b->kind == CS_BLOCK_COMMS) {
            CHECK(comm_ok((const void *)(b + 1), 55, 6, 5));
            CHECK_INT(b->used, ==, 48 + 24);
            comm++;
            continue;
        }
        CHECK_INT(b->seq, ==, idx / CS_EVENTS_PER_BLOCK);
        if (b->used == CS_EVENTS_PER_BLOCK) {
            /* Full blocks were sealed when the thread left them. */
            CHECK_INT(b->crc, ==, block_crc(b, 1));
            sealed++;
        } else {
            CHECK_INT(b->crc, ==, 0);
        }
        for (uint32_t k = 0; k < b->used; k++, idx++)
            if (!event_ok(block_event(b, k), 4, idx))
                CHECK_INT(idx, ==, -1);
    }
    CHECK_INT(idx, ==, n);
    CHECK_INT(sealed, ==, n / CS_EVENTS_PER_BLOCK);
    CHECK_INT(comm, ==, 1);
    CHECK_INT(zero_blocks, ==, nblocks - 1 - (n + CS_EVENTS_PER_BLOCK - 1) / CS_EVENTS_PER_BLOCK);
    free(f.buf);
}

/* ---- clock skew (re-executed child) ----------------------------------------------------- */

/*
 * Bounds of f(x) = x + off + (x - base) * k for base in [base_lo, base_hi], for an x read
 * somewhere in [a, b].
 */
static void skew_bounds(uint64_t a, uint64_t b, int64_t off, double k, uint64_t base_lo,
                        uint64_t base_hi, int64_t *lo, int64_t *hi)
{
    double la = (double)(int64_t)(a - (k >= 0 ? base_hi : base_lo)) * k;
    double hb = (double)(int64_t)(b - (k >= 0 ? base_lo : base_hi)) * k;
    *lo = (int64_t)a + off + (int64_t)la - 2;
    *hi = (int64_t)b + off + (int64_t)hb + 2;
}

static int skew_child(const char *mode, uint64_t p0)
{
    uint64_t a0 = raw_now(); /* the constructor parsed the variable before this */
    snprintf(root, sizeof root, "%s", getenv("CS_TEST_ROOT"));
    set_dir("skew");
    int skew_rank = atoi(getenv("CS_SKEW_RANK"));
    int open_rank = atoi(getenv("CS_OPEN_RANK"));
    int64_t off = atoll(getenv("CS_SKEW_OFF"));
    double k = atof(getenv("CS_SKEW_PPM")) / 1e6;
    int active_before = strcmp(mode, "guess") == 0 || strcmp(mode, "wrong-guess") == 0;
    int active_after = strcmp(mode, "guess") == 0 || strcmp(mode, "confirm") == 0;
    int64_t lo, hi;

    uint64_t a = raw_now(), s = cs_now(), b = raw_now();
    if (active_before) {
        skew_bounds(a, b, off, k, p0, a0, &lo, &hi);
        CHECK_INT(s, >=, lo);
        CHECK_INT(s, <=, hi);
    } else {
        CHECK_INT(s, >=, a);
        CHECK_INT(s, <=, b);
    }

    struct cs_trace_params p = params(open_rank, 4);
    p.t_init = s;
    capture_begin();
    int rc = cs_trace_open(&p);
    const char *out = capture_end();
    CHECK_INT(rc, ==, 0);
    if (strcmp(mode, "bad") == 0) {
        CHECK_CONTAINS(out, "COMMSCOPE_TEST_CLOCK_SKEW=\"");
        CHECK_CONTAINS(out, getenv("COMMSCOPE_TEST_CLOCK_SKEW"));
        CHECK_INT(count_lines(out), ==, 1);
    } else {
        CHECK_STR(out, "");
    }
    const struct cs_file_header *h = cs_trace_header();
    CHECK(h != NULL);
    if (!h)
        return cs_test_result();
    CHECK_INT(!!(h->flags & CS_FLAG_CLOCK_SKEW), ==, active_after);
    /* t_init is converted to the clock that applies from open on. */
    if (active_after) {
        skew_bounds(a, b, off, k, p0, a0, &lo, &hi);
        CHECK_INT(h->t_init, >=, lo);
        CHECK_INT(h->t_init, <=, hi);
    } else {
        CHECK_INT(h->t_init, >=, a - 16);
        CHECK_INT(h->t_init, <=, b + 16);
    }
    (void)skew_rank;

    a = raw_now();
    s = cs_now();
    b = raw_now();
    if (active_after) {
        skew_bounds(a, b, off, k, p0, a0, &lo, &hi);
        CHECK_INT(s, >=, lo);
        CHECK_INT(s, <=, hi);
    } else {
        CHECK_INT(s, >=, a);
        CHECK_INT(s, <=, b);
    }
    cs_trace_close(cs_now());
    return cs_test_result();
}

static void run_skew(const char *mode, const char *value, int skew_rank, int open_rank,
                     const char *guess, const char *off, const char *ppm)
{
    uint64_t p0 = raw_now();
    pid_t pid = fork();
    if (pid == 0) {
        char p0s[32], sr[16], orank[16];
        snprintf(p0s, sizeof p0s, "%llu", (unsigned long long)p0);
        snprintf(sr, sizeof sr, "%d", skew_rank);
        snprintf(orank, sizeof orank, "%d", open_rank);
        unsetenv("OMPI_COMM_WORLD_RANK");
        unsetenv("PMIX_RANK");
        unsetenv("PMI_RANK");
        unsetenv("SLURM_PROCID");
        if (guess)
            setenv("PMIX_RANK", guess, 1);
        setenv("COMMSCOPE_TEST_CLOCK_SKEW", value, 1);
        setenv("CS_TEST_ROOT", root, 1);
        setenv("CS_SKEW_RANK", sr, 1);
        setenv("CS_OPEN_RANK", orank, 1);
        setenv("CS_SKEW_OFF", off, 1);
        setenv("CS_SKEW_PPM", ppm, 1);
        execl("/proc/self/exe", "test_collector", "--skew-child", mode, p0s, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    CHECK_INT(waitpid(pid, &st, 0), ==, pid);
    CHECK(WIFEXITED(st));
    if (WEXITSTATUS(st) != 0)
        fprintf(stderr, "skew child mode %s failed (status %d)\n", mode, WEXITSTATUS(st));
    CHECK_INT(WEXITSTATUS(st), ==, 0);
}

static void test_clock_skew(void)
{
    /* The launcher's rank variable names the skewed rank: skewed from library load on. */
    run_skew("guess", "2:5000000000:250000", 2, 2, "2", "5000000000", "250000");
    /* No launcher variable: the skew starts at open; negative offset and drift. */
    run_skew("confirm", "0:-3000000000:-100000", 0, 0, NULL, "-3000000000", "-100000");
    /* The guess was wrong: the skew is turned off at open and t_init converted back. */
    run_skew("wrong-guess", "1:5000000000:250000", 1, 0, "1", "5000000000", "250000");
    /* Another rank: never skewed. */
    run_skew("other", "1:5000000000:0", 1, 0, NULL, "5000000000", "0");
    /* Malformed: one warning at open, no skew. */
    run_skew("bad", "1:5000000000", 1, 1, "1", "0", "0");
    run_skew("bad", "1:5000000000:2000000", 1, 1, "1", "0", "0");

    /* This process has no skew: cs_now is CLOCK_MONOTONIC. */
    uint64_t a = raw_now(), s = cs_now(), b = raw_now();
    CHECK_INT(s, >=, a);
    CHECK_INT(s, <=, b);
}

/*
 * Progress reports (COMMSCOPE_WATCH_MS): a stand-in root service in a thread of this test speaks
 * the WATCH session (include/commscope/root.h) while NTHREADS writers record; the last report
 * (BYE) must count every committed event, and the totals and collective records must be those
 * of the events, each exactly once (or counted as lost) — the collector's thread reads the
 * blocks while the writers fill them (TSan runs this).
 */
#include <netinet/in.h>
#include <sys/socket.h>

#include "commscope/root.h"

struct fake_svc {
    int lfd;
    int reports, bye, bad;
    uint64_t calls_at_bye, colls, colls_bad;
    struct cs_root_totals last;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static int full_recv(int fd, void *b, size_t n)
{
    return cs_root_recv_all(fd, b, n) == (ssize_t)n ? 0 : -1;
}

static void *fake_svc_main(void *arg)
{
    struct fake_svc *f = arg;
    int c = accept(f->lfd, NULL, NULL);
    struct cs_root_hello h;
    struct cs_root_reply r = {.magic = CS_ROOT_OK_MAGIC, .status = 0, .rounds = 1};
    uint64_t ping, pong = 0;
    if (c < 0 || full_recv(c, &h, sizeof h) || h.kind != CS_ROOT_WATCH ||
        cs_root_send_all(c, &r, sizeof r) || full_recv(c, &ping, 8) ||
        cs_root_send_all(c, &pong, 8)) {
        f->bad++;
        goto out;
    }
    struct cs_root_coll *rec = malloc(CS_ROOT_COLLS_MAX * sizeof *rec);
    for (;;) {
        struct cs_root_progress p;
        struct cs_root_totals t;
        if (full_recv(c, &p, sizeof p) || !(p.flags & CS_ROOT_PROGRESS_TOTALS) ||
            full_recv(c, &t, sizeof t) || t.ncoll > CS_ROOT_COLLS_MAX ||
            (t.ncoll && full_recv(c, rec, t.ncoll * sizeof *rec))) {
            f->bad++;
            break;
        }
        for (uint32_t i = 0; i < t.ncoll; i++) {
            const struct cs_root_coll *x = &rec[i];
            f->colls_bad += x->comm != CS_COMM_WORLD_ID || x->op != CS_OP_ALLREDUCE ||
                            x->t_exit - x->t_enter != 1000 || x->bytes < x->seq * 3ull;
        }
        struct cs_root_order o = {.cmd = CS_ROOT_CMD_CONTINUE, .flags = CS_ROOT_WANT_COLLS};
        if (cs_root_send_all(c, &o, sizeof o)) {
            f->bad++;
            break;
        }
        pthread_mutex_lock(&f->mu);
        f->colls += t.ncoll;
        f->last = t;
        f->reports++;
        if (p.flags & CS_ROOT_PROGRESS_BYE) {
            f->bye = 1;
            f->calls_at_bye = p.calls;
        }
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        if (p.flags & CS_ROOT_PROGRESS_BYE)
            break;
    }
    free(rec);
out:
    if (c >= 0)
        close(c);
    return NULL;
}

static void test_watch(void)
{
    set_dir("watch");
    struct fake_svc f = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    f.lfd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_INT(bind(f.lfd, (struct sockaddr *)&a, sizeof a), ==, 0);
    CHECK_INT(listen(f.lfd, 4), ==, 0);
    getsockname(f.lfd, (struct sockaddr *)&a, &al);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
    setenv("COMMSCOPE_ROOT", addr, 1);
    setenv("COMMSCOPE_WATCH_MS", "2", 1);
    pthread_t svc;
    pthread_create(&svc, NULL, fake_svc_main, &f);
    struct cs_trace_params p = params(0, 1);
    CHECK_INT(cs_trace_open(&p), ==, 0);
    /* The writers start once the first order (collectives wanted) is answered. */
    pthread_mutex_lock(&f.mu);
    while (f.reports < 2 && !f.bad)
        pthread_cond_wait(&f.cv, &f.mu);
    pthread_mutex_unlock(&f.mu);
    uint64_t failed = run_writers();
    cs_trace_close(cs_now());
    pthread_join(svc, NULL);
    close(f.lfd);
    unsetenv("COMMSCOPE_ROOT");
    unsetenv("COMMSCOPE_WATCH_MS");
    uint64_t n = (uint64_t)NTHREADS * PER_THREAD;
    CHECK_INT(failed, ==, 0);
    CHECK_INT(f.bad, ==, 0);
    CHECK_INT(f.bye, ==, 1);
    CHECK_INT(f.calls_at_bye, ==, n);
    CHECK_INT(f.last.calls, ==, n);
    CHECK_INT(f.last.comm_ns, ==, n * 1000);
    CHECK_INT(f.colls + f.last.lost_colls, ==, n);
    CHECK_INT(f.colls_bad, ==, 0);
    struct tf t;
    CHECK_INT(tf_load(&t, cs_trace_path()), ==, 0);
    if (t.buf)
        CHECK_INT(check_closed(&t), ==, n);
    free(t.buf);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--skew-child") == 0)
        return skew_child(argv[2], strtoull(argv[3], NULL, 10));
    /* The constructor has read the caller's COMMSCOPE_TEST_CLOCK_SKEW: start clean without it. */
    if (getenv("COMMSCOPE_TEST_CLOCK_SKEW")) {
        unsetenv("COMMSCOPE_TEST_CLOCK_SKEW");
        execv("/proc/self/exe", argv);
        return 1;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/cs-collector-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    unsetenv("COMMSCOPE_DISABLE");
    unsetenv("COMMSCOPE_MAX_MB");
    unsetenv("COMMSCOPE_LOCAL_DIR");
    /* The layout checked byte by byte here is head mode's; ring mode: test_ring.c. */
    setenv("COMMSCOPE_TRACE_MODE", "head", 1);

    test_warn_format();
    test_basic();
    test_default_dir();
    test_local_dir();
    test_bad_env();
    test_gather_env();
    test_disable_env();
    test_cs_disable();
    test_open_failures();
    test_stale_commit();
    test_cap();
    test_fsize_limit();
    test_threads();
    test_watch();
    test_fork_child_inert();
    test_crash();
    test_clock_skew();

    int rc = cs_test_result();
    if (rc == 0)
        nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    else
        fprintf(stderr, "files kept in %s\n", root);
    return rc;
}
