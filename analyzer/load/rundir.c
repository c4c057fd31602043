/* Loading a run directory: find rank-*.cst, open and validate each, check they form one run. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "commscope/input.h"
#include "internal.h"

/* The value of "key: value" in RUN_DIR/commscope-run.txt into out; 0 when there is none. */
static int run_file_value(const char *dir, const char *key, char *out, size_t cap)
{
    char path[PATH_MAX + 32], line[2048];
    snprintf(path, sizeof path, "%s/commscope-run.txt", dir);
    FILE *f = cs_input_fopen(path);
    size_t k = strlen(key);
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        if (!strncmp(line, key, k) && line[k] == ':' && line[k + 1] == ' ') {
            line[strcspn(line, "\n")] = '\0';
            size_t n = strlen(line + k + 2);
            if (n >= cap)
                n = cap - 1;
            memcpy(out, line + k + 2, n);
            out[n] = '\0';
            found = 1;
        }
    if (f)
        fclose(f);
    return found;
}

/* "rank-<digits>.cst": returns the number, or -1 for other names. */
static long trace_name_rank(const char *n)
{
    if (strncmp(n, "rank-", 5) != 0)
        return -1;
    const char *p = n + 5;
    long v = 0;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v > (1L << 30))
            return -1;
    }
    return strcmp(p, ".cst") == 0 ? v : -1;
}

struct found {
    char name[256];
    char *path; /* where traces.index says it is (owned); NULL: RUN_DIR/name */
    long name_rank;
    struct cs_reader *rd;
};

static int found_cmp(const void *a, const void *b)
{
    const struct found *x = a, *y = b;
    if (x->name_rank != y->name_rank)
        return x->name_rank < y->name_rank ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* bsearch's: a rank (long) against a file's name rank. */
static int name_rank_cmp(const void *key, const void *e)
{
    long r = *(const long *)key, x = ((const struct found *)e)->name_rank;
    return r < x ? -1 : r > x;
}

struct vote {
    uint64_t id;
    size_t first; /* index of the file in name order */
};

static int vote_cmp(const void *a, const void *b)
{
    const struct vote *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (x->first > y->first) - (x->first < y->first);
}

/* The run: into *id the run id most valid files carry, the lowest-numbered file breaking ties
 * (0 when no file is valid), and into *n how many carry it.  Sorted by (id, file), so thousands
 * of ranks cost no quadratic count.  0, or -1 out of memory. */
static int run_vote(const struct found *f, size_t nf, uint64_t *id, size_t *n)
{
    uint64_t best_id = 0;
    size_t best_n = 0, best_first = SIZE_MAX;
    struct vote *v = malloc((nf ? nf : 1) * sizeof *v);
    if (!v)
        return -1;
    size_t m = 0;
    for (size_t i = 0; i < nf; i++)
        if (f[i].rd)
            v[m++] = (struct vote){cs_reader_header(f[i].rd)->run_id, i};
    qsort(v, m, sizeof *v, vote_cmp);
    for (size_t i = 0, j; i < m; i = j) {
        for (j = i; j < m && v[j].id == v[i].id; j++)
            ;
        /* v[i].first: the id's lowest-numbered file */
        if (j - i > best_n || (j - i == best_n && v[i].first < best_first)) {
            best_n = j - i;
            best_id = v[i].id;
            best_first = v[i].first;
        }
    }
    free(v);
    *id = best_id;
    *n = best_n;
    return 0;
}

static void free_found(struct found *f, size_t nf)
{
    for (size_t i = 0; f && i < nf; i++)
        free(f[i].path);
    free(f);
}

static int add_found(struct found **f, size_t *nf, size_t *capf)
{
    if (*nf < *capf)
        return 0;
    size_t cap = *capf ? 2 * *capf : 64;
    void *p = realloc(*f, cap * sizeof **f);
    if (!p)
        return -1;
    *f = p;
    *capf = cap;
    return 0;
}

/*
 * The traces RUN_DIR/traces.index places outside the run directory (COMMSCOPE_GATHER; the format
 * in docs/trace-format.md): a rank without a rank-NNNNN.cst of its own in the directory whose
 * trace stayed on its host ("local") is read where the index says, when that path can be read
 * here; otherwise the problem says on which host and where its trace stayed.  f[0..nf) are the
 * directory's files, sorted (found_cmp).  Returns -1 out of memory.
 */
static int index_traces(struct cs__run *run, const char *dir, struct found **f, size_t *nf,
                        size_t *capf)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/traces.index", dir);
    FILE *in = cs_input_fopen(path);
    if (!in)
        return 0;
    size_t ndir = *nf, lineno = 0;
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, in) > 0) {
        lineno++;
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || !line[0])
            continue;
        char *fld[6], *p = line;
        int k = 0;
        for (char *t; k < 6 && (t = strsep(&p, "\t")); k++)
            fld[k] = t;
        char *end = NULL;
        long r = k == 6 && !p ? strtol(fld[0], &end, 10) : -1;
        if (r < 0 || !end || *end || r > (1L << 30)) {
            cs__problem(run,
                        "traces.index line %zu: not \"rank host path size nonce where\"; line "
                        "skipped",
                        lineno);
            continue;
        }
        /* Only traces that stayed on their hosts: one the index puts in the run directory (run_dir,
         * gathered) and that is not there is missing, also when the index names where it was
         * (a copy of a run directory keeps the original's index); none: the rank had no closed
         * trace (the missing ranks say so). */
        if (strcmp(fld[5], "local") != 0)
            continue;
        if (bsearch(&r, *f, ndir, sizeof **f, name_rank_cmp))
            continue;
        if (!fld[2][0] || access(fld[2], R_OK) != 0) {
            cs__problem(run,
                        "rank %ld's trace stayed on host %s at %s (traces.index: %s) and cannot "
                        "be read here (%s): analyse where it can be read, or copy it into %s",
                        r, fld[1], fld[2][0] ? fld[2] : "(a path the index cannot hold)", fld[5],
                        fld[2][0] ? strerror(errno) : "no path", dir);
            continue;
        }
        if (add_found(f, nf, capf) || !((*f)[*nf].path = strdup(fld[2]))) {
            rc = -1;
            break;
        }
        snprintf((*f)[*nf].name, sizeof(*f)[*nf].name, "%s", fld[2]);
        (*f)[*nf].name_rank = r;
        (*f)[*nf].rd = NULL;
        (*nf)++;
    }
    free(line);
    fclose(in);
    return rc;
}

int cs__rundir_load(struct cs__run *run, const char *dir, char *err, size_t errlen)
{
    snprintf(run->dir, sizeof run->dir, "%s", dir);
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        snprintf(err, errlen, "run directory %s: %s", dir,
                 e == ENOENT ? "does not exist" : strerror(e));
        return e == ENOENT || e == ENOTDIR ? CS_ENOENT : CS_EIO;
    }
    struct found *f = NULL;
    size_t nf = 0, capf = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        long nr = trace_name_rank(de->d_name);
        if (nr < 0)
            continue;
        if (add_found(&f, &nf, &capf)) {
            closedir(d);
            free_found(f, nf);
            snprintf(err, errlen, "run directory %s: out of memory", dir);
            return CS_ENOMEM;
        }
        snprintf(f[nf].name, sizeof f[nf].name, "%s", de->d_name);
        f[nf].path = NULL;
        f[nf].name_rank = nr;
        f[nf].rd = NULL;
        nf++;
    }
    closedir(d);
    if (nf)
        qsort(f, nf, sizeof *f, found_cmp);
    size_t ndir = nf;
    if (index_traces(run, dir, &f, &nf, &capf)) {
        snprintf(err, errlen, "run directory %s: out of memory", dir);
        goto oom;
    }
    if (nf > ndir)
        qsort(f, nf, sizeof *f, found_cmp);

    /* Open and validate every file; a bad one is a problem, not the end of the analysis. */
    for (size_t i = 0; i < nf; i++) {
        char path[4096 + 300], msg[512];
        snprintf(path, sizeof path, "%s/%s", dir, f[i].name);
        if (f[i].path)
            snprintf(path, sizeof path, "%s", f[i].path);
        if (cs_reader_open(path, &f[i].rd, msg, sizeof msg) != 0) {
            cs__problem(run, "%s; file skipped", msg);
            run->bad_files++;
        }
    }

    size_t best_n;
    uint64_t best_id;
    if (run_vote(f, nf, &best_id, &best_n)) {
        snprintf(err, errlen, "run directory %s: out of memory for %zu files", dir, nf);
        goto oom;
    }
    int world = 0;
    for (size_t i = 0; i < nf && !world; i++)
        if (f[i].rd && cs_reader_header(f[i].rd)->run_id == best_id)
            world = cs_reader_header(f[i].rd)->world_size;
    for (size_t i = 0; i < nf; i++) {
        if (!f[i].rd)
            continue;
        const struct cs_file_header *h = cs_reader_header(f[i].rd);
        if (h->run_id != best_id) {
            cs__problem(run,
                        "%s: run id %016" PRIx64 " differs from run id %016" PRIx64
                        " of the other %zu files; file skipped",
                        f[i].name, h->run_id, best_id, best_n);
        } else if (h->world_size != world) {
            cs__problem(run,
                        "%s: world size %" PRId32 " differs from %d in the other files;"
                        " file skipped",
                        f[i].name, h->world_size, world);
        } else {
            continue;
        }
        run->bad_files++;
        cs_reader_close(f[i].rd);
        f[i].rd = NULL;
    }

    run->world = world;
    run->run_id = best_id;
    if (world > 0) {
        /* Aligned as struct cs__rank asks (its per-event fields in whole cache lines). */
        run->ranks = aligned_alloc(_Alignof(struct cs__rank), (size_t)world * sizeof *run->ranks);
        if (run->ranks)
            memset(run->ranks, 0, (size_t)world * sizeof *run->ranks);
        run->ident = malloc((size_t)world * sizeof *run->ident);
        if (!run->ranks || !run->ident) {
            snprintf(err, errlen, "run directory %s: out of memory for %d ranks", dir, world);
            goto oom;
        }
        for (int r = 0; r < world; r++)
            run->ident[r] = r;
    }
    for (size_t i = 0; i < nf; i++) {
        if (!f[i].rd)
            continue;
        const struct cs_file_header *h = cs_reader_header(f[i].rd);
        struct cs__rank *rk = &run->ranks[h->rank];
        if (f[i].name_rank != h->rank)
            cs__problem(run, "%s: holds rank %" PRId32 " although its name says %ld", f[i].name,
                        h->rank, f[i].name_rank);
        if (rk->present) {
            const struct cs_file_header *o = rk->h;
            if (o->nonce == h->nonce)
                cs__problem(run, "%s is a copy of %s (rank %" PRId32 ", same nonce); file skipped",
                            f[i].name, rk->file, h->rank);
            else
                cs__problem(run, "duplicate rank %" PRId32 ": %s and %s both claim it; %s skipped",
                            h->rank, rk->file, f[i].name, f[i].name);
            run->bad_files++;
            cs_reader_close(f[i].rd);
            continue;
        }
        rk->present = 1;
        rk->rd = f[i].rd;
        rk->h = h;
        snprintf(rk->file, sizeof rk->file, "%s", f[i].name);
        const struct cs_reader_stats *st = cs_reader_stats(f[i].rd);
        if (st->partial)
            cs__problem(run,
                        "%s: partial trace (rank %" PRId32 " did not reach MPI_Finalize): %" PRIu64
                        " events recovered from %" PRIu64 " blocks, %" PRIu64
                        " unclaimed blocks skipped, %" PRIu64 " unsealed blocks",
                        f[i].name, h->rank, st->events, st->event_blocks, st->empty_blocks,
                        st->unsealed_blocks);
        if ((h->flags & CS_FLAG_STORAGE) && (h->flags & CS_FLAG_RING) && !h->dropped)
            cs__problem(run,
                        "%s: the trace could not grow past a storage fault (%s); it went on in "
                        "ring mode over the space it had, so it holds a shorter window of the run",
                        f[i].name, h->note[0] ? h->note : "no reason recorded");
        else if (h->flags & CS_FLAG_STORAGE)
            cs__problem(run,
                        "%s: recording stopped at a storage fault (%s); %" PRIu64
                        " later events were not recorded (counted as dropped)",
                        f[i].name, h->note[0] ? h->note : "no reason recorded", h->dropped);
        else if (h->dropped)
            cs__problem(run, "%s: %" PRIu64 " events dropped at the buffer cap", f[i].name,
                        h->dropped);
        if (h->flags & CS_FLAG_DISABLED)
            cs__problem(run, "%s: the collector disabled itself: %s", f[i].name,
                        h->note[0] ? h->note : "(no reason recorded)");
        if (st->trailing_bytes)
            cs__problem(run, "%s: %" PRIu64 " bytes of an incomplete last block ignored", f[i].name,
                        st->trailing_bytes);
    }
    free_found(f, nf);
    if (!nf) {
        /* "mpi_preload: no (REASON)": why the job may have left no trace. */
        char why[1024];
        size_t n;
        if (run_file_value(dir, "mpi_preload", why, sizeof why) && !strncmp(why, "no (", 4) &&
            (n = strlen(why)) > 5 && why[n - 1] == ')') {
            why[n - 1] = '\0';
            cs__problem(run,
                        "no rank-*.cst trace files in %s: commscope run preloaded no MPI "
                        "collector: %s",
                        dir, why + 4);
        } else
            cs__problem(run, "no rank-*.cst trace files in %s", dir);
        return 0;
    }
    char list[512];
    size_t k = 0, nmiss = 0;
    list[0] = '\0';
    for (int r = 0; r < world; r++) {
        if (run->ranks[r].present)
            continue;
        run->ranks[r].dead = 1;
        if (nmiss++ < 32 && k < sizeof list - 16)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%d", nmiss > 1 ? ", " : "", r);
    }
    if (nmiss)
        cs__problem(run, "%zu of %d ranks missing (no valid trace file): %s%s", nmiss, world, list,
                    nmiss > 32 ? ", ..." : "");
    const struct cs_file_header *h0 = NULL;
    for (int r = 0; r < world && !h0; r++)
        if (run->ranks[r].present)
            h0 = run->ranks[r].h;
    if (h0)
        snprintf(run->program, sizeof run->program, "%s", h0->program);
    return 0;
oom:
    for (size_t i = 0; i < nf; i++)
        cs_reader_close(f[i].rd);
    free_found(f, nf);
    return CS_ENOMEM;
}
