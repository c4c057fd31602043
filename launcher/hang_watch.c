/*
 * `commscope run --hang-timeout SECONDS`: watch the ranks' traces for progress while the job runs.
 *
 * Progress is a completed call: the collector commits an event record into its block when a call
 * returns (a call in flight occupies the next slot without being committed).  Each poll reads the
 * block headers of every trace the run can see (the run directory, and COMMSCOPE_LOCAL_DIR with
 * %r and %h as wildcards) and sums their sequence numbers and committed counts; a sum that has not
 * changed for the timeout means no rank completed a call in that time.  Sealed blocks never
 * change again, so each file is read from its first unsealed block on: a poll costs one 64-byte
 * read per open block, not per event.  The traces are read through the page cache, never through
 * the job's MPI, and nothing is written to them.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stddef.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commscope/ops.h"
#include "commscope/trace.h"
#include "internal.h"

/* Unclaimed blocks in a row after which the rest of a file is taken as unclaimed too (the
 * collector claims blocks from the front). */
#define UNCLAIMED_RUN 64

struct watched {
    char *path;
    uint64_t lo;     /* blocks below lo are sealed */
    uint64_t lo_sum; /* their (final) part of the progress sum */
};

struct cs__hang_watch {
    char pattern[2][PATH_MAX];
    int npattern;
    struct watched *f;
    size_t nf, capf;
    uint64_t sig;
    int seen; /* some trace was found */
};

/* COMMSCOPE_LOCAL_DIR with %r and %h as '*', %% as '%'; 0, or -1 when it has another '%'. */
static int local_pattern(const char *v, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = v; *p; p++) {
        const char *put = p;
        size_t n = 1;
        if (*p == '%') {
            if (p[1] == 'r' || p[1] == 'h')
                put = "*";
            else if (p[1] != '%')
                return -1;
            p++;
        }
        if (o + n + 1 >= cap)
            return -1;
        memcpy(out + o, put, n);
        o += n;
    }
    out[o] = '\0';
    return 0;
}

struct cs__hang_watch *cs__hang_watch_new(const char *run_dir)
{
    struct cs__hang_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    snprintf(w->pattern[w->npattern++], PATH_MAX, "%s/rank-*.cst", run_dir);
    const char *local = getenv("COMMSCOPE_LOCAL_DIR");
    char dir[PATH_MAX];
    if (local && *local && local_pattern(local, dir, sizeof dir) == 0 &&
        strlen(dir) + 16 < PATH_MAX)
        snprintf(w->pattern[w->npattern++], PATH_MAX, "%s/rank-*.cst", dir);
    return w;
}

void cs__hang_watch_free(struct cs__hang_watch *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->nf; i++)
        free(w->f[i].path);
    free(w->f);
    free(w);
}

static struct watched *watched(struct cs__hang_watch *w, const char *path)
{
    for (size_t i = 0; i < w->nf; i++)
        if (strcmp(w->f[i].path, path) == 0)
            return &w->f[i];
    if (w->nf == w->capf) {
        size_t cap = w->capf ? 2 * w->capf : 64;
        struct watched *f = realloc(w->f, cap * sizeof *f);
        if (!f)
            return NULL;
        w->f = f;
        w->capf = cap;
    }
    char *p = strdup(path);
    if (!p)
        return NULL;
    w->f[w->nf] = (struct watched){.path = p};
    return &w->f[w->nf++];
}

/* The file's progress: sum of seq and committed counts of its blocks from f->lo on. */
static uint64_t file_progress(struct watched *f)
{
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    uint64_t sum = 0;
    int sealed_so_far = 1, unclaimed = 0;
    for (uint64_t i = f->lo;; i++) {
        struct cs_block_header bh;
        ssize_t n = pread(fd, &bh, sizeof bh, (off_t)(CS_HEADER_SIZE + i * CS_BLOCK_SIZE));
        if (n != (ssize_t)sizeof bh)
            break;
        if (bh.magic != CS_BLOCK_MAGIC) {
            if (++unclaimed >= UNCLAIMED_RUN)
                break;
            sealed_so_far = 0;
            continue;
        }
        unclaimed = 0;
        /* The resource sampler's blocks (its thread records nothing else) grow whatever the
         * program does: they are no progress.  Nor is a block with nothing committed yet. */
        uint16_t op = 0;
        if (bh.kind == CS_BLOCK_EVENTS &&
            (!bh.used || (pread(fd, &op, sizeof op,
                                (off_t)(CS_HEADER_SIZE + i * CS_BLOCK_SIZE + sizeof bh +
                                        offsetof(struct cs_event, op))) == (ssize_t)sizeof op &&
                          cs_op_info(op)->kind == CS_KIND_SAMPLE)))
            bh.seq = bh.used = bh.live_used = 0;
        uint64_t part = bh.seq * 0x9E3779B97F4A7C15ull + bh.used + ((uint64_t)bh.live_used << 32);
        /* A sealed block at the front is final: skipped from the next poll on, its part kept. */
        if (bh.crc && sealed_so_far) {
            f->lo = i + 1;
            f->lo_sum += part;
        } else {
            sealed_so_far = 0;
            sum += part;
        }
    }
    close(fd);
    return sum + f->lo_sum;
}

int cs__hang_watch_poll(struct cs__hang_watch *w)
{
    uint64_t sig = 0;
    size_t nfiles = 0;
    for (int k = 0; k < w->npattern; k++) {
        glob_t g;
        if (glob(w->pattern[k], 0, NULL, &g) != 0)
            continue;
        for (size_t i = 0; i < g.gl_pathc; i++) {
            struct watched *f = watched(w, g.gl_pathv[i]);
            if (!f)
                continue;
            nfiles++;
            sig += file_progress(f);
        }
        globfree(&g);
    }
    sig += nfiles;
    int changed = !w->seen || sig != w->sig;
    w->sig = sig;
    w->seen |= nfiles > 0;
    return nfiles == 0 ? -1 : changed;
}
