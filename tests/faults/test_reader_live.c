/*
 * A trace that shrinks under the reader (fault-injection suite, also a unit test): a partial
 * file whose writer still runs (here: this process, by the header's host and pid) is cut to its
 * header after cs_reader_open.  Read through a mapping, every event of the cut part faulted with
 * SIGBUS; the reader copies such files, so all its events still come, as they were at open.
 * A second file is cut while the reader loads it: it reads as a partial file cut short, never a
 * crash.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commscope/ops.h"
#include "cs_test.h"
#include "reader.h"
#include "tw.h"

enum { N = 20000 };

static void write_live(const char *path)
{
    struct tw *w = tw_new(0, 1, 0x77, 0x88);
    struct cs_file_header *h = tw_header(w);
    h->pid = (int32_t)getpid();
    gethostname(h->host, sizeof h->host - 1);
    for (int i = 0; i < N; i++) {
        struct cs_event e = {.t_begin = 1000 + 100 * (uint64_t)i,
                             .t_end = 1050 + 100 * (uint64_t)i,
                             .comm = CS_COMM_WORLD_ID,
                             .bytes = 8,
                             .bytes_recv = 8,
                             .seq = (uint32_t)i,
                             .peer = -1,
                             .op = CS_OP_ALLREDUCE};
        tw_event(w, 0, &e);
    }
    static int32_t world[1] = {0};
    tw_comm(w, CS_COMM_WORLD_ID, 0, 1, 0, world);
    struct tw_opts o = {.partial = 1, .zero_blocks = 64};
    CHECK(tw_write(w, path, &o) > 0);
    tw_free(w);
}

int main(void)
{
    char dir[] = "/tmp/cs-reader-live-XXXXXX";
    if (tw_tmpdir(dir))
        return 1;
    char path[512];
    snprintf(path, sizeof path, "%s/rank-00000.cst", dir);
    write_live(path);

    struct cs_reader *r = NULL;
    char err[512] = "";
    int rc = cs_reader_open(path, &r, err, sizeof err);
    CHECK_INT(rc, ==, 0);
    if (rc) {
        fprintf(stderr, "%s\n", err);
        return cs_test_result();
    }
    /* The writer trims its file at close: here to nothing but the header. */
    CHECK_INT(truncate(path, CS_HEADER_SIZE), ==, 0);
    uint64_t n = 0, seq_ok = 1;
    for (const struct cs_event *e; (e = cs_reader_next(r)); n++)
        seq_ok &= e->seq == n;
    CHECK_INT(n, ==, N);
    CHECK(seq_ok);
    cs_reader_close(r);

    /* Cut in the middle of a block: a partial file cut short, its whole blocks read. */
    write_live(path);
    CHECK_INT(truncate(path, CS_HEADER_SIZE + 3 * CS_BLOCK_SIZE + 100), ==, 0);
    rc = cs_reader_open(path, &r, err, sizeof err);
    CHECK_INT(rc, ==, 0);
    if (!rc) {
        const struct cs_reader_stats *st = cs_reader_stats(r);
        CHECK_INT(st->partial, ==, 1);
        CHECK_INT(st->trailing_bytes, ==, 100);
        /* the communicator block is the last one written: cut off, so blocks 0-2 of events */
        CHECK_INT(st->events, ==, 3 * CS_EVENTS_PER_BLOCK);
        cs_reader_close(r);
    }
    tw_rmtree(dir);
    return cs_test_result();
}
