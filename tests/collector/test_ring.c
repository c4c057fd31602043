/*
 * Ring mode (COMMSCOPE_TRACE_MODE=ring, the default) through the collector and the analyzer's
 * reader: a trace far past its cap keeps its newest events, and its totals block plus the kept
 * window account for every event recorded, exactly, per (op, communicator, size bucket) — with
 * one thread, with several, and in the file of a writer killed at a random moment.
 */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* One thread, 200,000 events into a 1 MiB trace (about 14,000 fit). */
static void test_one_thread(void)
{
    set_dir("one");
    setenv("COMMSCOPE_MAX_MB", "1", 1);
    struct cs_trace_params p = params();
    CHECK_INT(cs_trace_open(&p), ==, 0);
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
    set_dir("threads");
    setenv("COMMSCOPE_MAX_MB", "1", 1);
    struct cs_trace_params p = params();
    CHECK_INT(cs_trace_open(&p), ==, 0);
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
            }
        }
        close(ready[1]);
        char path[4096] = "";
        ssize_t got = read(ready[0], path, sizeof path - 1);
        close(ready[0]);
        CHECK(got > 0);
        struct timespec nap = {0, 30000000L + (long)(rand() % 200) * 1000000L};
        nanosleep(&nap, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status));
        struct cs_reader *r = NULL;
        char err[512];
        int rc = cs_reader_open(path, &r, err, sizeof err);
        if (rc)
            fprintf(stderr, "round %d: %s\n", round, err);
        CHECK_INT(rc, ==, 0);
        if (!r)
            continue;
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
        CHECK_INT(gaps, ==, 0);
        CHECK(kept > 0);
        CHECK(t->folded > 0);
        uint64_t calls = 0, bytes = 0, want_bytes = 0;
        for (size_t j = 0; j < t->nrows; j++) {
            calls += t->rows[j].calls;
            bytes += t->rows[j].bytes;
        }
        for (uint64_t i = 0; i + 1 < first; i++)
            want_bytes += i % 1000 + 1;
        /* Events 1 .. first-1 are in the rows, first .. last in the window. */
        CHECK_INT(calls, ==, first - 1);
        CHECK_INT(t->folded + t->outside, ==, first - 1);
        CHECK_INT(bytes, ==, want_bytes);
        cs_reader_close(r);
    }
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
    if (cs_test_failures == 0)
        nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return cs_test_result();
}
