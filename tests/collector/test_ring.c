/*
 * Ring mode (COMMSCOPE_TRACE_MODE=ring, the default) through the collector and the analyzer's
 * reader: a trace far past its cap keeps its newest events, and its totals block plus the kept
 * window account for every event recorded, exactly, per (op, communicator, size bucket) — with
 * one thread, with several, in the file of a writer killed at a random moment, and in files
 * stopped at each step of a fold (include/commscope/totals.h).
 */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collector.h"
#include "commscope/ops.h"
#include "commscope/totals.h"
#include "cs_test.h"
#include "load/reader.h"

static char root[256];

static struct cs_trace_params params(void)
{
    struct cs_trace_params p = {
        .rank = 0, .world_size = 1, .thread_level = 1, .run_id = 0x5151, .t_init = cs_now()};
    return p;
}

static void set_dir(const char *sub)
{
    char d[300];
    snprintf(d, sizeof d, "%s/%s", root, sub);
    setenv("COMMSCOPE_DIR", d, 1);
}

/* What event i of the single-thread test is: its op, communicator and bytes. */
static const uint16_t OPS[3] = {CS_OP_ALLREDUCE, CS_OP_SEND, CS_OP_BCAST};
static const uint64_t SIZES[5] = {0, 8, 1000, 65536, 1u << 20};
#define NKEYS 30

static void shape(uint64_t i, uint16_t *op, uint64_t *comm, uint64_t *bytes, int *key)
{
    int o = (int)(i % 3), s = (int)(i / 3 % 5), c = (int)(i / 15 % 2);
    *op = OPS[o];
    *bytes = SIZES[s];
    *comm = c ? 7 : CS_COMM_WORLD_ID;
    *key = (o * 5 + s) * 2 + c;
}

struct want {
    uint64_t calls, bytes, time;
};

static int key_of(const struct cs_total_row *w)
{
    for (int o = 0; o < 3; o++)
        for (int s = 0; s < 5; s++)
            for (int c = 0; c < 2; c++)
                if (w->op == OPS[o] && w->bucket == cs_total_bucket(SIZES[s]) &&
                    w->comm == (c ? 7 : CS_COMM_WORLD_ID))
                    return (o * 5 + s) * 2 + c;
    return -1;
}

static struct cs_reader *open_trace(void)
{
    struct cs_reader *r = NULL;
    char err[512];
    int rc = cs_reader_open(cs_trace_path(), &r, err, sizeof err);
    if (rc)
        fprintf(stderr, "reader: %s\n", err);
    CHECK_INT(rc, ==, 0);
    return r;
}

/* A trace of 1 MiB (about 14,000 events) opened in root/sub. */
static struct cs_trace_params open_capped(const char *sub)
{
    set_dir(sub);
    setenv("COMMSCOPE_MAX_MB", "1", 1);
    struct cs_trace_params p = params();
    CHECK_INT(cs_trace_open(&p), ==, 0);
    return p;
}

/* One thread, 200,000 events into a 1 MiB trace (about 14,000 fit). */
static void test_one_thread(void)
{
    struct cs_trace_params p = open_capped("one");
    const uint64_t n = 200000;
    struct want want[NKEYS] = {{0}};
    for (uint64_t i = 0; i < n; i++) {
        struct cs_event *ev = cs_rec_begin();
        CHECK(ev != NULL);
        if (!ev)
            break;
        int k;
        shape(i, &ev->op, &ev->comm, &ev->bytes, &k);
        ev->t_begin = 1000 + 10 * i;
        ev->t_end = ev->t_begin + 3 + i % 7;
        ev->request = i + 1;
        ev->peer = -1;
        want[k].calls++;
        want[k].bytes += ev->bytes;
        want[k].time += 3 + i % 7;
        cs_rec_commit(ev);
    }
    CHECK_INT(cs_trace_header()->dropped, ==, 0);
    cs_trace_close(cs_now());

    struct cs_reader *r = open_trace();
    if (!r)
        return;
    const struct cs_reader_totals *t = cs_reader_totals(r);
    CHECK(cs_reader_header(r)->flags & CS_FLAG_RING);
    CHECK(t->ring);
    CHECK(t->folded > 0);
    struct want got[NKEYS] = {{0}};
    uint64_t kept = 0, first = 0, last = 0, gaps = 0;
    const struct cs_event *ev;
    while ((ev = cs_reader_next(r))) {
        uint16_t op;
        uint64_t comm, bytes;
        int k;
        shape(ev->request - 1, &op, &comm, &bytes, &k);
        CHECK(ev->op == op && ev->comm == comm && ev->bytes == bytes);
        if (kept == 0)
            first = ev->request;
        else if (ev->request != last + 1)
            gaps++;
        last = ev->request;
        kept++;
        got[k].calls++;
        got[k].bytes += ev->bytes;
        got[k].time += ev->t_end - ev->t_begin;
    }
    /* The window is the newest events, without a hole, up to the last one. */
    CHECK_INT(gaps, ==, 0);
    CHECK_INT(last, ==, n);
    CHECK_INT(first, ==, n - kept + 1);
    CHECK_INT(kept, >=, 50 * CS_EVENTS_PER_BLOCK);
    CHECK_INT(t->t_window, ==, 1000 + 10 * (first - 1));
    CHECK_INT(t->folded + t->outside + kept, ==, n);
    CHECK_INT(t->t_first, ==, 1000);
    for (size_t j = 0; j < t->nrows; j++) {
        int k = key_of(&t->rows[j]);
        CHECK_INT(k, >=, 0);
        if (k < 0)
            continue;
        got[k].calls += t->rows[j].calls;
        got[k].bytes += t->rows[j].bytes;
        got[k].time += t->rows[j].time_ns;
        CHECK_INT(t->rows[j].size, ==, SIZES[k / 2 % 5]);
    }
    for (int k = 0; k < NKEYS; k++) {
        CHECK_INT(got[k].calls, ==, want[k].calls);
        CHECK_INT(got[k].bytes, ==, want[k].bytes);
        CHECK_INT(got[k].time, ==, want[k].time);
    }
    cs_reader_close(r);

    /* Head mode keeps the first events and counts the rest as dropped. */
    set_dir("head");
    setenv("COMMSCOPE_TRACE_MODE", "head", 1);
    CHECK_INT(cs_trace_open(&p), ==, 0);
    uint64_t rec = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct cs_event *e = cs_rec_begin();
        if (!e)
            continue;
        e->op = CS_OP_BARRIER;
        e->t_begin = 1000 + i;
        e->t_end = 1001 + i;
        e->comm = CS_COMM_WORLD_ID;
        e->peer = -1;
        cs_rec_commit(e);
        rec++;
    }
    CHECK_INT(cs_trace_header()->dropped, ==, n - rec);
    cs_trace_close(cs_now());
    unsetenv("COMMSCOPE_TRACE_MODE");
    r = open_trace();
    if (r) {
        CHECK(!(cs_reader_header(r)->flags & CS_FLAG_RING));
        CHECK(!cs_reader_totals(r)->ring);
        CHECK_INT(cs_reader_stats(r)->events, ==, rec);
        cs_reader_close(r);
    }
    unsetenv("COMMSCOPE_MAX_MB");
}

#define NTHR 4
#define PER 60000

static void *writer(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < PER; i++) {
        struct cs_event *ev = cs_rec_begin();
        if (!ev)
            continue;
        ev->op = CS_OP_ALLREDUCE;
        ev->comm = 100 + id;
        ev->bytes = 64 + id;
        ev->request = i + 1;
        ev->peer = -1;
        ev->t_begin = cs_now();
        ev->t_end = ev->t_begin + 1;
        cs_rec_commit(ev);
    }
    return NULL;
}

/* Four threads: per thread, what the window keeps is its newest events, and the rest is in the
 * rows; every kept event is inside the window, which starts where every thread's events are
 * complete. */
static void test_threads(void)
{
    open_capped("threads");
    pthread_t th[NTHR];
    for (uintptr_t i = 0; i < NTHR; i++)
        pthread_create(&th[i], NULL, writer, (void *)i);
    for (int i = 0; i < NTHR; i++)
        pthread_join(th[i], NULL);
    CHECK_INT(cs_trace_header()->dropped, ==, 0);
    cs_trace_close(cs_now());
    struct cs_reader *r = open_trace();
    if (!r)
        return;
    const struct cs_reader_totals *t = cs_reader_totals(r);
    uint64_t kept[NTHR] = {0}, last[NTHR] = {0}, gaps = 0, early = 0;
    const struct cs_event *ev;
    while ((ev = cs_reader_next(r))) {
        unsigned id = (unsigned)(ev->comm - 100);
        CHECK_INT(id, <, NTHR);
        if (id >= NTHR)
            continue;
        if (kept[id] && ev->request != last[id] + 1)
            gaps++;
        early += ev->t_begin < t->t_window;
        last[id] = ev->request;
        kept[id]++;
    }
    CHECK_INT(gaps, ==, 0);
    CHECK_INT(early, ==, 0);
    uint64_t rows[NTHR] = {0};
    for (size_t j = 0; j < t->nrows; j++) {
        unsigned id = (unsigned)(t->rows[j].comm - 100);
        CHECK_INT(id, <, NTHR);
        if (id < NTHR) {
            rows[id] += t->rows[j].calls;
            CHECK_INT(t->rows[j].bytes, ==, t->rows[j].calls * (64 + id));
        }
    }
    /* A thread that finished before the window began has all its events in the rows. */
    uint64_t all = 0;
    for (int i = 0; i < NTHR; i++) {
        CHECK(kept[i] == 0 || last[i] == PER);
        CHECK_INT(rows[i] + kept[i], ==, PER);
        all += kept[i];
    }
    /* How much the window holds depends on how the threads interleaved: at least the newest
     * block of the thread that lost the most. */
    CHECK_INT(all, >=, CS_EVENTS_PER_BLOCK);
    cs_reader_close(r);
    unsetenv("COMMSCOPE_MAX_MB");
}

/* ---- a rank stopped inside a fold, at each step of totals.h ---------------------------------- */

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return b;
}

static int spill(const char *path, const unsigned char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(b, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Event i of the journal test's writer. */
static void journal_event(struct cs_event *ev, uint64_t i)
{
    ev->op = i % 3 ? CS_OP_SEND : CS_OP_ALLREDUCE;
    ev->comm = CS_COMM_WORLD_ID;
    ev->bytes = i % 1000 + 1;
    ev->request = i + 1;
    ev->peer = 0;
    ev->t_begin = 1000 + 4 * i;
    ev->t_end = ev->t_begin + 2;
}

/*
 * Every event of the partial file at `path`, whose writer recorded events 1 .. n (n 0: up to the
 * kill) with i % 1000 + 1 bytes, once: the kept window runs without a hole to event n and the rows
 * hold the rest, with their bytes.  Returns the events the collector folded.
 */
static uint64_t check_once(const char *path, uint64_t n, const char *what)
{
    struct cs_reader *r = NULL;
    char err[512];
    int rc = cs_reader_open(path, &r, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s: %s\n", what, err);
    CHECK_INT(rc, ==, 0);
    if (!r)
        return 0;
    const struct cs_reader_totals *t = cs_reader_totals(r);
    uint64_t kept = 0, first = 0, last = 0, gaps = 0;
    const struct cs_event *ev;
    while ((ev = cs_reader_next(r))) {
        if (kept == 0)
            first = ev->request;
        else if (ev->request != last + 1)
            gaps++;
        last = ev->request;
        kept++;
    }
    uint64_t calls = 0, bytes = 0, want = 0;
    for (size_t j = 0; j < t->nrows; j++) {
        calls += t->rows[j].calls;
        bytes += t->rows[j].bytes;
    }
    for (uint64_t i = 0; i + 1 < first; i++)
        want += i % 1000 + 1;
    if (!n)
        n = last;
    if (gaps || !kept || last != n || calls != first - 1 || bytes != want)
        fprintf(stderr,
                "%s: window %" PRIu64 "..%" PRIu64 " (%" PRIu64 " gaps), rows %" PRIu64 " calls\n",
                what, first, last, gaps, calls);
    CHECK_INT(gaps, ==, 0);
    CHECK(kept > 0);
    CHECK_INT(last, ==, n);
    CHECK_INT(calls, ==, first - 1);
    CHECK_INT(t->folded + t->outside, ==, first - 1);
    CHECK_INT(bytes, ==, want);
    uint64_t folded = t->folded;
    cs_reader_close(r);
    return folded;
}

/* A writer killed at a random moment, maybe inside a fold: its events up to the kill are all
 * there, each in the window or in the rows, none twice. */
static void test_killed(void)
{
    setenv("COMMSCOPE_MAX_MB", "1", 1);
    srand((unsigned)time(NULL));
    for (int round = 0; round < 12; round++) {
        char sub[32];
        snprintf(sub, sizeof sub, "killed-%d", round);
        set_dir(sub);
        int ready[2];
        if (pipe(ready) != 0)
            return;
        pid_t pid = fork();
        if (pid == 0) {
            close(ready[0]);
            struct cs_trace_params p = params();
            if (cs_trace_open(&p) != 0)
                _exit(2);
            if (write(ready[1], cs_trace_path(), strlen(cs_trace_path()) + 1) < 0)
                _exit(3);
            for (uint64_t i = 0;; i++) {
                struct cs_event *ev = cs_rec_begin();
                if (!ev)
                    _exit(4);
                ev->op = i % 2 ? CS_OP_SEND : CS_OP_RECV;
                ev->comm = CS_COMM_WORLD_ID;
                ev->bytes = i % 1000 + 1;
                ev->request = i + 1;
                ev->peer = 0;
                ev->t_begin = cs_now();
                ev->t_end = ev->t_begin + 1;
                cs_rec_commit(ev);
                /* past the 1 MiB cap (16,384 events) at least twice: folds have happened */
                if (i == 40000 && write(ready[1], "", 1) < 0)
                    _exit(5);
            }
        }
        close(ready[1]);
        char path[4096] = "";
        ssize_t got = read(ready[0], path, sizeof path - 1);
        CHECK(got > 0);
        /* The kill comes at a random moment after the writer passed the cap (whatever the
         * machine's speed: under ThreadSanitizer 30 ms did not always reach it). */
        size_t have = got > 0 ? strnlen(path, (size_t)got) + 1 : 0;
        char mark;
        if (have >= (size_t)got)
            CHECK(read(ready[0], &mark, 1) == 1);
        close(ready[0]);
        struct timespec nap = {0, (long)(rand() % 200) * 1000000L};
        nanosleep(&nap, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status));
        char what[32];
        snprintf(what, sizeof what, "round %d", round);
        CHECK_INT(check_once(path, 0, what), >, 0);
    }
    unsetenv("COMMSCOPE_MAX_MB");
}

static void test_journal(void)
{
    set_dir("journal");
    setenv("COMMSCOPE_MAX_MB", "1", 1);
    const uint64_t n = 40000;
    pid_t pid = fork();
    if (pid == 0) {
        struct cs_trace_params p = params();
        if (cs_trace_open(&p) != 0)
            _exit(2);
        for (uint64_t i = 0; i < n; i++) {
            struct cs_event *ev = cs_rec_begin();
            if (!ev)
                _exit(4);
            journal_event(ev, i);
            cs_rec_commit(ev);
        }
        raise(SIGKILL);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status));
    char path[400];
    snprintf(path, sizeof path, "%s/journal/rank-00000.cst", root);
    size_t len;
    unsigned char *orig = slurp(path, &len);
    CHECK(orig != NULL);
    if (!orig)
        return;
    CHECK_INT(check_once(path, n, "stopped between folds"), >, 0);

    /* The totals block and the oldest event block of thread 0 (the next to be folded). */
    size_t nb = (len - CS_HEADER_SIZE) / CS_BLOCK_SIZE, tb = SIZE_MAX, xb = SIZE_MAX;
    uint64_t xseq = UINT64_MAX;
    for (size_t i = 0; i < nb; i++) {
        const struct cs_block_header *b = (const void *)(orig + CS_HEADER_SIZE + i * CS_BLOCK_SIZE);
        if (b->magic != CS_BLOCK_MAGIC)
            continue;
        if (b->kind == CS_BLOCK_TOTALS)
            tb = i;
        if (b->kind == CS_BLOCK_EVENTS && b->thread == 0 && b->crc && b->seq < xseq) {
            xseq = b->seq;
            xb = i;
        }
    }
    CHECK(tb != SIZE_MAX && xb != SIZE_MAX);
    if (tb == SIZE_MAX || xb == SIZE_MAX) {
        free(orig);
        return;
    }
    /* The fold of block xb as the collector does it: the journal, then the rows. */
    unsigned char *jf = malloc(len);
    memcpy(jf, orig, len);
    unsigned char *tbk = jf + CS_HEADER_SIZE + tb * CS_BLOCK_SIZE;
    struct cs_totals_head *h = (void *)(tbk + CS_TOTALS_HEAD_OFF);
    struct cs_totals_journal *j = (void *)(tbk + CS_TOTALS_JOURNAL_OFF);
    struct cs_total_row *rows = (void *)(tbk + CS_TOTALS_ROWS_OFF);
    const struct cs_block_header *x = (const void *)(jf + CS_HEADER_SIZE + xb * CS_BLOCK_SIZE);
    const struct cs_event *xe = (const void *)(x + 1);
    uint32_t nj = 0, nrows = h->nrows;
    uint64_t t_first = h->t_first, t_last = h->t_last;
    for (uint32_t k = 0; k < x->used; k++) {
        uint64_t comm, bytes;
        unsigned bucket;
        cs_total_key(&xe[k], &comm, &bucket, &bytes);
        uint32_t e = 0;
        while (e < nj &&
               !(j[e].val.op == xe[k].op && j[e].val.comm == comm && j[e].val.bucket == bucket))
            e++;
        if (e == nj) {
            uint32_t row = 0;
            while (row < nrows && !(rows[row].op == xe[k].op && rows[row].comm == comm &&
                                    rows[row].bucket == bucket))
                row++;
            j[e].row = row;
            j[e].val = row < nrows ? rows[row]
                                   : (struct cs_total_row){
                                         .op = xe[k].op, .bucket = (uint8_t)bucket, .comm = comm};
            nrows += row == nrows;
            nj++;
        }
        cs_total_add(&j[e].val, &xe[k]);
        if (!t_first || xe[k].t_begin < t_first)
            t_first = xe[k].t_begin;
        if (xe[k].t_end > t_last)
            t_last = xe[k].t_end;
    }
    h->journal_block = xb;
    h->journal_bseq = x->seq;
    h->journal_thread = x->thread;
    h->journal_n = nj;
    h->j_events = h->events + x->used;
    h->j_blocks = h->blocks + 1;
    h->j_t_first = t_first;
    h->j_t_last = t_last;
    h->j_nrows = nrows;
    h->journal_seq = h->folds + 1;
    char alt[400];
    snprintf(alt, sizeof alt, "%s/journal-alt", root);
    mkdir(alt, 0755);
    snprintf(alt, sizeof alt, "%s/journal-alt/rank-00000.cst", root);

    /* 1: the journal written, the rows not yet. */
    CHECK_INT(spill(alt, jf, len), ==, 0);
    check_once(alt, n, "stopped after step 1");
    /* 2: the rows and the head overwritten, the block still whole. */
    for (uint32_t e = 0; e < nj; e++)
        rows[j[e].row] = j[e].val;
    h->nrows = h->j_nrows;
    h->events = h->j_events;
    h->blocks = h->j_blocks;
    h->t_first = h->j_t_first;
    h->t_last = h->j_t_last;
    h->folds++;
    CHECK_INT(spill(alt, jf, len), ==, 0);
    check_once(alt, n, "stopped after step 2");
    /* 3: the block's magic cleared and half of it zeroed. */
    memset((void *)x, 0, CS_BLOCK_SIZE / 2);
    CHECK_INT(spill(alt, jf, len), ==, 0);
    check_once(alt, n, "stopped inside step 3");
    /* 3 done: the block all zero, the journal still set. */
    memset((void *)x, 0, CS_BLOCK_SIZE);
    CHECK_INT(spill(alt, jf, len), ==, 0);
    check_once(alt, n, "stopped after step 3");
    /* A journal that names a fold which cannot be (two ahead) is damage, said so. */
    h->journal_seq = h->folds + 2;
    CHECK_INT(spill(alt, jf, len), ==, 0);
    struct cs_reader *r = NULL;
    char err[512] = "";
    CHECK_INT(cs_reader_open(alt, &r, err, sizeof err), !=, 0);
    CHECK_CONTAINS(err, "journal of fold");
    cs_reader_close(r);
    free(jf);
    free(orig);
    unsetenv("COMMSCOPE_MAX_MB");
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/cs-ring-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    unsetenv("COMMSCOPE_DISABLE");
    unsetenv("COMMSCOPE_LOCAL_DIR");
    unsetenv("COMMSCOPE_TRACE_MODE");
    test_one_thread();
    test_threads();
    test_killed();
    test_journal();
    if (cs_test_failures == 0)
        nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return cs_test_result();
}
