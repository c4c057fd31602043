/*
 * The analyzer against damaged traces whose CRCs are right: a structure-aware fuzzer.
 *
 * The reader's CRCs catch random corruption (test_reader.c); what they cannot catch is a trace
 * that is well formed but wrong: written by a collector with a bug, by another version, edited,
 * or of a job whose ranks disagree.  Each iteration copies one of the seed runs given on the
 * command line, changes one to four things in it (a field of an event, of a communicator record
 * or of a file header; an event copied, swapped or deleted; a file dropped or cut short), seals
 * every block and header again with the right CRC, and runs `commscope analyze` on it with every
 * output (text, JSON, HTML, Perfetto, events CSV) in a child process.  The child must:
 *
 *   - exit, within 300 s, with 0, 1 (analysed, problems reported) or 3 (nothing to analyse),
 *     never by a signal, and without a sanitizer report (this test also runs under ASan+UBSan);
 *   - say why on stderr when it exits with 1 or 3;
 *   - when it exits with 0 or 1: write JSON and Perfetto files that parse as JSON (a NaN or an
 *     infinity printed into them does not), a complete HTML file, and no "nan" or "inf" in the
 *     text report or the events CSV;
 *   - and in the JSON report, a what-if whose full overlap or best bandwidth exceeds the replayed
 *     step time by more than the printed digits' rounding: the scenarios only shorten
 *     communication, and the replay is monotone in every duration however damaged the trace
 *     (cut dependencies and cycles are cut alike in every scenario).
 *
 * A seed run's wire captures (wire-HOST.csw, text) are damaged too: a number in a line replaced
 * by another (0, huge, negative, not a number), a line removed, repeated or moved, a byte
 * changed, a word added or removed, the file cut short or removed.
 *
 * Mutations are chosen by a seeded generator (-s, or CS_FUZZ_SEED), so a failure is reproduced by
 * running again with the same seed; its run directory is kept and named, with the mutations.
 *
 * usage: test_fuzz [-n ITERATIONS] [-s SEED] SEED_RUN_DIR...
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "cmd.h"
#include "fuzz.h"
#include "commscope/ops.h"
#include "commscope/trace.h"
#include "tw.h"

#define CHILD_LIMIT_S 300

struct file {
    char name[32];
    unsigned char *b;
    size_t n;
};

struct run {
    const char *dir;
    struct file *f;
    int nf;
    struct file *wf; /* wire-*.csw */
    int nwf;
};

/* A mutable copy of a run, with its event records and communicator records indexed. */
struct work {
    struct file *f;
    int nf;
    int *drop;
    struct file *wf; /* wire files (text); wdrop[i] set: removed */
    int nwf;
    int *wdrop;
    struct loc {
        int file;
        size_t off;
        size_t block; /* offset of its block */
    } * ev, *cr;
    size_t nev, ncr;
    uint64_t comms[64]; /* communicator ids seen in records (a sample) */
    int ncomms;
    int world;
};

static unsigned valid_ops[CS_OP_MAX];
static int nvalid_ops;

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static int is_trace(const char *name)
{
    size_t l = strlen(name);
    return strncmp(name, "rank-", 5) == 0 && l >= 9 && !strcmp(name + l - 4, ".cst");
}

static int is_wire(const char *name)
{
    size_t l = strlen(name);
    return strncmp(name, "wire-", 5) == 0 && l >= 9 && !strcmp(name + l - 4, ".csw");
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    while (b) {
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (n < cap)
            break;
        char *nb = realloc(b, 2 * cap + 1);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    fclose(f);
    if (b) {
        b[n] = '\0';
        if (len)
            *len = n;
    }
    return b;
}

/* The wire captures of seed run dir into r->wf. */
static int load_wire(const char *dir, struct run *r)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        if (!is_wire(de->d_name) || strlen(de->d_name) >= sizeof r->wf[0].name)
            continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct file f = {0};
        snprintf(f.name, sizeof f.name, "%s", de->d_name);
        f.b = (unsigned char *)slurp(p, &f.n);
        struct file *nf = f.b ? realloc(r->wf, (size_t)(r->nwf + 1) * sizeof *nf) : NULL;
        if (!nf) {
            fprintf(stderr, "test_fuzz: cannot read %s\n", p);
            free(f.b);
            rc = -1;
            continue;
        }
        r->wf = nf;
        r->wf[r->nwf++] = f;
    }
    closedir(d);
    return rc;
}

static int load_run(const char *dir, struct run *r)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "test_fuzz: cannot open seed run %s: %s\n", dir, strerror(errno));
        return -1;
    }
    r->dir = dir;
    r->f = NULL;
    r->nf = 0;
    r->wf = NULL;
    r->nwf = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_trace(de->d_name) || strlen(de->d_name) >= sizeof r->f[0].name)
            continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        FILE *fp = fopen(p, "rb");
        struct stat st;
        if (!fp || fstat(fileno(fp), &st) != 0) {
            fprintf(stderr, "test_fuzz: cannot read %s: %s\n", p, strerror(errno));
            if (fp)
                fclose(fp);
            closedir(d);
            return -1;
        }
        struct file f = {.n = (size_t)st.st_size};
        snprintf(f.name, sizeof f.name, "%s", de->d_name);
        f.b = malloc(f.n ? f.n : 1);
        size_t got = f.b ? fread(f.b, 1, f.n, fp) : 0;
        fclose(fp);
        /* A partial file (a rank that died) keeps the collector's unclaimed reserve, tens of MB
         * of zero blocks: all but one are left out, so iterations stay cheap. */
        const struct cs_file_header *h = (const void *)f.b;
        if (f.b && got == f.n && f.n >= CS_HEADER_SIZE && (h->flags & CS_FLAG_PARTIAL)) {
            size_t n = f.n - (f.n - CS_HEADER_SIZE) % CS_BLOCK_SIZE, zeros = 0;
            while (n >= CS_HEADER_SIZE + CS_BLOCK_SIZE &&
                   all_zero(f.b + n - CS_BLOCK_SIZE, CS_BLOCK_SIZE)) {
                n -= CS_BLOCK_SIZE;
                zeros++;
            }
            if (zeros)
                f.n = n + CS_BLOCK_SIZE;
        }
        struct file *nf = realloc(r->f, (size_t)(r->nf + 1) * sizeof *nf);
        if (!f.b || got != (size_t)st.st_size || !nf) {
            fprintf(stderr, "test_fuzz: cannot read %s\n", p);
            free(f.b);
            free(nf ? nf : r->f);
            closedir(d);
            return -1;
        }
        r->f = nf;
        r->f[r->nf++] = f;
    }
    closedir(d);
    if (r->nf == 0) {
        fprintf(stderr, "test_fuzz: no rank-*.cst files in seed run %s\n", dir);
        return -1;
    }
    return load_wire(dir, r);
}

/* Walks the blocks of f: calls fn for each claimed block (offset, header); spanning blocks are
 * skipped as a whole. */
static void each_block(const struct file *f, void (*fn)(void *, size_t, struct cs_block_header *),
                       void *arg)
{
    size_t off = CS_HEADER_SIZE;
    while (off + CS_BLOCK_SIZE <= f->n) {
        struct cs_block_header *bh = (struct cs_block_header *)(void *)(f->b + off);
        size_t span = 1;
        if (bh->magic == CS_BLOCK_MAGIC) {
            fn(arg, off, bh);
            if (bh->kind == CS_BLOCK_COMMS && bh->span > 1 && bh->span < 1u << 20)
                span = bh->span;
        }
        off += span * CS_BLOCK_SIZE;
    }
}

struct index_arg {
    struct work *w;
    int file;
    size_t cap_ev, cap_cr;
};

static void push(struct loc **v, size_t *n, size_t *cap, struct loc l)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 1024;
        struct loc *nv = realloc(*v, c * sizeof *nv);
        if (!nv) {
            fprintf(stderr, "test_fuzz: out of memory\n");
            exit(2);
        }
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = l;
}

static void index_block(void *arg, size_t off, struct cs_block_header *bh)
{
    struct index_arg *a = arg;
    struct work *w = a->w;
    const struct file *f = &w->f[a->file];
    if (bh->kind == CS_BLOCK_EVENTS) {
        for (uint32_t i = 0; i < bh->used && i < CS_EVENTS_PER_BLOCK; i++)
            push(&w->ev, &w->nev, &a->cap_ev,
                 (struct loc){a->file, off + sizeof *bh + (size_t)i * CS_EVENT_SIZE, off});
    } else if (bh->kind == CS_BLOCK_COMMS) {
        size_t end = off + sizeof *bh + bh->used, p = off + sizeof *bh;
        if (end > f->n)
            end = f->n;
        while (p + sizeof(struct cs_comm_record) <= end) {
            const struct cs_comm_record *c = (const void *)(f->b + p);
            if (c->record_bytes < sizeof *c || c->record_bytes % 8 || p + c->record_bytes > end)
                break;
            push(&w->cr, &w->ncr, &a->cap_cr, (struct loc){a->file, p, off});
            if (w->ncomms < (int)(sizeof w->comms / sizeof w->comms[0]))
                w->comms[w->ncomms++] = c->id;
            p += c->record_bytes;
        }
    }
}

static void work_index(struct work *w)
{
    w->nev = w->ncr = 0;
    w->ncomms = 0;
    struct index_arg a = {.w = w};
    for (int i = 0; i < w->nf; i++) {
        if (w->drop[i])
            continue;
        a.file = i;
        each_block(&w->f[i], index_block, &a);
    }
}

static struct cs_file_header *hdr(struct work *w, int i)
{
    return w->f[i].n >= CS_HEADER_SIZE ? (struct cs_file_header *)(void *)w->f[i].b : NULL;
}

static struct cs_event *event_at(struct work *w, const struct loc *l)
{
    return (struct cs_event *)(void *)(w->f[l->file].b + l->off);
}

/* An interesting 64-bit value near or far from v. */
static uint64_t near_u64(uint64_t v)
{
    static const uint64_t d[] = {1, 2, 7, 1000, 1000000, 1000000000ull, 3600000000000ull};
    switch (below(6)) {
    case 0:
        return v + d[below(7)];
    case 1:
        return v - d[below(7)];
    case 2:
        return 0;
    case 3:
        return below(2) ? UINT64_MAX : (uint64_t)INT64_MAX;
    case 4:
        return 1ull << below(64);
    default:
        return rnd();
    }
}

static int32_t some_rank(const struct work *w)
{
    /* mostly valid ranks, sometimes -1, rarely out of range */
    uint64_t x = below(20);
    if (x == 0)
        return -1;
    if (x == 1)
        return (int32_t)w->world + (int32_t)below(3);
    return (int32_t)below((uint64_t)w->world);
}

static int mutate_event(struct work *w, char *desc, size_t cap)
{
    if (!w->nev)
        return 0;
    const struct loc *l = &w->ev[below(w->nev)];
    struct cs_event *e = event_at(w, l);
    int k = (int)below(15);
    char what[160];
    snprintf(what, sizeof what, "%s event at byte %zu (%s): ", w->f[l->file].name, l->off,
             cs_op_name(e->op));
    size_t n = strlen(what);
    switch (k) {
    case 0: { /* another op */
        unsigned op = valid_ops[below((uint64_t)nvalid_ops)];
        if (below(2)) { /* of the same kind, so the record stays plausible */
            for (int t = 0; t < 64; t++) {
                unsigned o = valid_ops[below((uint64_t)nvalid_ops)];
                if (e->op < CS_OP_MAX && cs_op_info(o)->kind == cs_op_info(e->op)->kind) {
                    op = o;
                    break;
                }
            }
        }
        snprintf(what + n, sizeof what - n, "op %s", cs_op_name(op));
        e->op = (uint16_t)op;
        break;
    }
    case 1: { /* another communicator */
        uint64_t c = w->ncomms && below(3) ? w->comms[below((uint64_t)w->ncomms)]
                     : below(2)            ? CS_COMM_SELF_BASE + below((uint64_t)w->world + 1)
                                           : near_u64(e->comm);
        snprintf(what + n, sizeof what - n, "comm %#llx", (unsigned long long)c);
        e->comm = c;
        break;
    }
    case 2: /* sequence number */
        e->seq = below(3) ? e->seq + (uint32_t)below(5) - 2 : (uint32_t)rnd();
        snprintf(what + n, sizeof what - n, "seq %u", e->seq);
        break;
    case 3:
        e->peer = some_rank(w);
        snprintf(what + n, sizeof what - n, "peer %d", e->peer);
        break;
    case 4: { /* request: another event's, off by one, or none */
        uint64_t x = below(3);
        e->request = x == 0   ? event_at(w, &w->ev[below(w->nev)])->request
                     : x == 1 ? e->request + 1
                              : 0;
        snprintf(what + n, sizeof what - n, "request %llu", (unsigned long long)e->request);
        break;
    }
    case 5:
        if (below(2))
            e->bytes = near_u64(e->bytes);
        else
            e->bytes_recv = near_u64(e->bytes_recv);
        snprintf(what + n, sizeof what - n, "bytes %llu / %llu", (unsigned long long)e->bytes,
                 (unsigned long long)e->bytes_recv);
        break;
    case 6: { /* shifted in time, duration kept */
        uint64_t d = e->t_end - e->t_begin, t = near_u64(e->t_begin);
        if (below(4)) /* mostly inside the times the reader takes (below 2^62 ns) */
            t %= CS_TIME_LIMIT - d;
        if (t > UINT64_MAX - d)
            t = UINT64_MAX - d;
        e->t_begin = t;
        e->t_end = t + d;
        snprintf(what + n, sizeof what - n, "at %llu ns", (unsigned long long)t);
        break;
    }
    case 7: { /* another duration (rarely ending before it begins) */
        uint64_t d = below(4) ? below(10000000) : below(2) ? 0 : near_u64(0);
        e->t_end = below(30) ? (e->t_begin + d < e->t_begin ? UINT64_MAX : e->t_begin + d)
                             : e->t_begin - 1;
        snprintf(what + n, sizeof what - n, "t_end %llu", (unsigned long long)e->t_end);
        break;
    }
    case 8: /* one flag bit (the eleven defined, rarely an undefined one) */
        e->flags ^= (uint16_t)(1u << (below(20) ? below(11) : below(16)));
        snprintf(what + n, sizeof what - n, "flags %#x", e->flags);
        break;
    case 9: {
        static const int32_t v[] = {0, -1, 1, 2, INT32_MAX, INT32_MIN, 255};
        e->aux = below(4) ? v[below(7)] : (int32_t)rnd();
        snprintf(what + n, sizeof what - n, "aux %d", e->aux);
        break;
    }
    case 10: { /* a copy of another event (perhaps of another rank) */
        const struct loc *o = &w->ev[below(w->nev)];
        memcpy(e, event_at(w, o), sizeof *e);
        snprintf(what + n, sizeof what - n, "copy of %s byte %zu", w->f[o->file].name, o->off);
        break;
    }
    case 11: { /* swapped with another event of the same file */
        for (int t = 0; t < 32; t++) {
            const struct loc *o = &w->ev[below(w->nev)];
            if (o->file != l->file)
                continue;
            struct cs_event tmp = *e;
            *e = *event_at(w, o);
            *event_at(w, o) = tmp;
            snprintf(what + n, sizeof what - n, "swapped with byte %zu", o->off);
            break;
        }
        break;
    }
    case 12: { /* deleted: the block's later events move up */
        struct cs_block_header *bh = (void *)(w->f[l->file].b + l->block);
        size_t end = l->block + sizeof *bh + (size_t)bh->used * CS_EVENT_SIZE;
        memmove(e, (unsigned char *)e + CS_EVENT_SIZE, end - l->off - CS_EVENT_SIZE);
        memset(w->f[l->file].b + end - CS_EVENT_SIZE, 0, CS_EVENT_SIZE);
        bh->used--;
        struct cs_file_header *h = hdr(w, l->file);
        if (h && h->events)
            h->events--;
        snprintf(what + n, sizeof what - n, "deleted");
        work_index(w);
        break;
    }
    case 13: { /* one bit anywhere in the record */
        unsigned bit = (unsigned)below(CS_EVENT_SIZE * 8);
        ((unsigned char *)e)[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        snprintf(what + n, sizeof what - n, "bit %u flipped", bit);
        break;
    }
    default: { /* a rank's clock jumps: every later event of the thread shifted */
        uint64_t d = (uint64_t)1 << below(40);
        int back = (int)below(2);
        size_t moved = 0;
        for (size_t i = (size_t)(l - w->ev); i < w->nev && w->ev[i].file == l->file; i++) {
            struct cs_event *x = event_at(w, &w->ev[i]);
            if (back && x->t_begin > d) {
                x->t_begin -= d;
                x->t_end -= d;
            } else if (!back && x->t_end < UINT64_MAX - d) {
                x->t_begin += d;
                x->t_end += d;
            }
            moved++;
        }
        snprintf(what + n, sizeof what - n, "it and %zu later events %s by %llu ns", moved - 1,
                 back ? "earlier" : "later", (unsigned long long)d);
        break;
    }
    }
    snprintf(desc, cap, "%s", what);
    return 1;
}

static int mutate_comm(struct work *w, char *desc, size_t cap)
{
    if (!w->ncr)
        return 0;
    const struct loc *l = &w->cr[below(w->ncr)];
    struct cs_comm_record *c = (void *)(w->f[l->file].b + l->off);
    size_t room = (c->record_bytes - sizeof *c) / 4; /* member slots the record can hold */
    char what[160];
    int n = snprintf(what, sizeof what, "%s comm %#llx: ", w->f[l->file].name,
                     (unsigned long long)c->id);
    switch (below(6)) {
    case 0:
        if (c->size > 0 && (size_t)c->size <= room) {
            int32_t i = (int32_t)below((uint64_t)c->size);
            c->members[i] = below(3) ? c->members[below((uint64_t)c->size)] : some_rank(w);
            snprintf(what + n, sizeof what - (size_t)n, "member %d = %d", i, c->members[i]);
        }
        break;
    case 1:
        c->size += below(2) ? 1 : -1;
        snprintf(what + n, sizeof what - (size_t)n, "size %d", c->size);
        break;
    case 2:
        c->my_rank = (int32_t)below((uint64_t)c->size + 2) - 1;
        snprintf(what + n, sizeof what - (size_t)n, "my_rank %d", c->my_rank);
        break;
    case 3:
        c->id = w->ncomms && below(2) ? w->comms[below((uint64_t)w->ncomms)] : near_u64(c->id);
        snprintf(what + n, sizeof what - (size_t)n, "id %#llx", (unsigned long long)c->id);
        break;
    case 4:
        c->parent = w->ncomms ? w->comms[below((uint64_t)w->ncomms)] : 0;
        c->color = (int32_t)below(4);
        snprintf(what + n, sizeof what - (size_t)n, "parent %#llx color %d",
                 (unsigned long long)c->parent, c->color);
        break;
    default:
        c->kind =
            (uint16_t)(below(2) ? (uint64_t)(CS_COMM_MPI + CS_COMM_NCCL - c->kind) : below(4));
        snprintf(what + n, sizeof what - (size_t)n, "kind %u", c->kind);
        break;
    }
    snprintf(desc, cap, "%s", what);
    return 1;
}

static int mutate_file(struct work *w, char *desc, size_t cap)
{
    int i = (int)below((uint64_t)w->nf);
    if (w->drop[i])
        return 0;
    struct cs_file_header *h = hdr(w, i);
    if (!h)
        return 0;
    const char *name = w->f[i].name;
    switch (below(10)) {
    case 9: { /* a byte of the host or program name: any byte but NUL (they must stay strings) */
        char *str = below(2) ? h->host : h->program;
        size_t len = strlen(str);
        unsigned char b = (unsigned char)(1 + below(255));
        if (len)
            str[below(len)] = (char)b;
        snprintf(desc, cap, "%s %s byte -> 0x%02x", name, str == h->host ? "host" : "program", b);
        break;
    }
    case 0: { /* clock samples */
        int s = (int)below(2);
        struct cs_clock_sample *c = &h->clock[s];
        switch (below(4)) {
        case 0:
            c->offset_ns = (int64_t)near_u64((uint64_t)c->offset_ns);
            break;
        case 1:
            c->valid = !c->valid;
            break;
        case 2:
            c->rtt_ns = near_u64(c->rtt_ns);
            break;
        default:
            c->local_ns = near_u64(c->local_ns);
            break;
        }
        snprintf(desc, cap, "%s clock[%d]: local %llu offset %lld rtt %llu valid %u", name, s,
                 (unsigned long long)c->local_ns, (long long)c->offset_ns,
                 (unsigned long long)c->rtt_ns, c->valid);
        break;
    }
    case 1:
        if (below(2))
            h->t_init = near_u64(h->t_init);
        else
            h->t_finalize = below(3) ? near_u64(h->t_finalize) : 0;
        snprintf(desc, cap, "%s t_init %llu t_finalize %llu", name, (unsigned long long)h->t_init,
                 (unsigned long long)h->t_finalize);
        break;
    case 2:
        h->world_size += below(2) ? 1 : -1;
        snprintf(desc, cap, "%s world_size %d", name, h->world_size);
        break;
    case 3:
        h->rank = some_rank(w);
        snprintf(desc, cap, "%s rank %d", name, h->rank);
        break;
    case 4:
        h->run_id ^= 1;
        snprintf(desc, cap, "%s run_id %#llx", name, (unsigned long long)h->run_id);
        break;
    case 5: { /* a flag: dropped, threads, no-MPI, root clock, static NCCL, disabled */
        static const uint32_t fl[] = {CS_FLAG_DROPPED,    CS_FLAG_THREADS,     CS_FLAG_NO_MPI,
                                      CS_FLAG_CLOCK_ROOT, CS_FLAG_NCCL_STATIC, CS_FLAG_DISABLED,
                                      CS_FLAG_CLOCK_SKEW, CS_FLAG_PARTIAL};
        h->flags ^= fl[below(8)];
        if (h->flags & CS_FLAG_DROPPED)
            h->dropped = below(1000);
        snprintf(desc, cap, "%s flags %#x", name, h->flags);
        break;
    }
    case 6:
        w->drop[i] = 1;
        snprintf(desc, cap, "%s removed", name);
        work_index(w);
        break;
    case 7: { /* cut at a block boundary or anywhere */
        size_t at = below(2)
                        ? CS_HEADER_SIZE + below((w->f[i].n - CS_HEADER_SIZE) / CS_BLOCK_SIZE + 1) *
                                               CS_BLOCK_SIZE
                        : below(w->f[i].n);
        w->f[i].n = at;
        snprintf(desc, cap, "%s cut at byte %zu", name, at);
        work_index(w);
        break;
    }
    default:
        h->gpu_timing = (uint32_t)below(3);
        h->local_rank = (int32_t)below(4) - 1;
        snprintf(desc, cap, "%s gpu_timing %u local_rank %d", name, h->gpu_timing, h->local_rank);
        break;
    }
    return 1;
}

/* Line i of text b (n bytes): its start and length (without the newline); -1 past the end. */
static int text_line(const unsigned char *b, size_t n, size_t i, size_t *at, size_t *len)
{
    size_t p = 0;
    for (size_t k = 0; k < i; k++) {
        const unsigned char *nl = memchr(b + p, '\n', n - p);
        if (!nl)
            return -1;
        p = (size_t)(nl - b) + 1;
    }
    if (p >= n)
        return -1;
    const unsigned char *nl = memchr(b + p, '\n', n - p);
    *at = p;
    *len = nl ? (size_t)(nl - b) - p : n - p;
    return 0;
}

static size_t text_lines(const unsigned char *b, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += b[i] == '\n';
    return c + (n && b[n - 1] != '\n');
}

/* Replace bytes [at, at + del) of f by ins (m bytes). */
static void text_splice(struct file *f, size_t at, size_t del, const void *ins, size_t m)
{
    unsigned char *nb = malloc(f->n - del + m + 1);
    if (!nb) {
        fprintf(stderr, "test_fuzz: out of memory\n");
        exit(2);
    }
    memcpy(nb, f->b, at);
    memcpy(nb + at, ins, m);
    memcpy(nb + at + m, f->b + at + del, f->n - at - del);
    free(f->b);
    f->b = nb;
    f->n = f->n - del + m;
}

/* A number for a field of a wire file: edge values, the old one moved, or not a number (never
 * "nan" or "inf": the reports quote malformed lines, and those words are what the checks look
 * for). */
static void wire_number(const char *old, char *out, size_t cap)
{
    static const char *edge[] = {"0",
                                 "1",
                                 "-1",
                                 "18446744073709551615",
                                 "18446744073709551616",
                                 "9223372036854775807",
                                 "9223372036854775808",
                                 "-9223372036854775808",
                                 "4294967295",
                                 "2147483648",
                                 "0x10",
                                 "12abc",
                                 "1e300",
                                 "x",
                                 ""};
    unsigned long long v = strtoull(old, NULL, 10);
    switch (below(4)) {
    case 0:
        snprintf(out, cap, "%llu", v * (below(2) ? 2 : 1000) + below(2));
        break;
    case 1:
        snprintf(out, cap, "%llu", v ? v - 1 - below(v) : below(5));
        break;
    default:
        snprintf(out, cap, "%s", edge[below(sizeof edge / sizeof edge[0])]);
        break;
    }
}

/* Damage one wire capture of the run.  Returns 1 when something changed. */
static int mutate_wire(struct work *w, char *desc, size_t cap)
{
    if (!w->nwf)
        return 0;
    int i = (int)below((uint64_t)w->nwf);
    if (w->wdrop[i])
        return 0;
    struct file *f = &w->wf[i];
    size_t nl = text_lines(f->b, f->n), at, len;
    if (!nl)
        return 0;
    /* Header lines (the first dozen) as often as records. */
    size_t li = below(2) ? below(nl < 16 ? nl : 16) : below(nl);
    if (text_line(f->b, f->n, li, &at, &len))
        return 0;
    switch (below(9)) {
    case 0:
    case 1:
    case 2: { /* a word of the line replaced by a number (or not one) */
        size_t words[64][2], nw = 0;
        for (size_t p = at; p < at + len && nw < 64;) {
            while (p < at + len && f->b[p] == ' ')
                p++;
            size_t q = p;
            while (q < at + len && f->b[q] != ' ')
                q++;
            if (q > p) {
                words[nw][0] = p;
                words[nw][1] = q - p;
                nw++;
            }
            p = q;
        }
        if (nw < 2)
            return 0;
        size_t k = 1 + below(nw - 1); /* not the key */
        char old[64], num[64];
        snprintf(old, sizeof old, "%.*s", (int)(words[k][1] < 63 ? words[k][1] : 63),
                 (const char *)f->b + words[k][0]);
        wire_number(old, num, sizeof num);
        text_splice(f, words[k][0], words[k][1], num, strlen(num));
        snprintf(desc, cap, "%s line %zu word %zu \"%s\" -> \"%s\"", f->name, li + 1, k, old, num);
        break;
    }
    case 3: /* a line removed */
        text_splice(f, at, len + (at + len < f->n), "", 0);
        snprintf(desc, cap, "%s line %zu removed", f->name, li + 1);
        break;
    case 4: { /* a line repeated, here or elsewhere */
        char *copy = malloc(len + 1);
        if (!copy)
            exit(2);
        memcpy(copy, f->b + at, len);
        copy[len] = '\n';
        size_t to = at, tl = 0, lj = below(nl + 1);
        if (below(2) && text_line(f->b, f->n, lj, &to, &tl))
            to = f->n;
        if (to == f->n && f->n && f->b[f->n - 1] != '\n')
            text_splice(f, f->n, 0, "\n", 1), to = f->n;
        text_splice(f, to, 0, copy, len + 1);
        free(copy);
        snprintf(desc, cap, "%s line %zu repeated at byte %zu", f->name, li + 1, to);
        break;
    }
    case 5: /* a byte changed (a NUL, a newline, anything) */
        if (!len)
            return 0;
        {
            size_t p = at + below(len);
            unsigned char b = (unsigned char)below(256);
            f->b[p] = b;
            snprintf(desc, cap, "%s byte %zu -> 0x%02x", f->name, p, b);
        }
        break;
    case 6: { /* a word added at the end of the line */
        char num[64];
        wire_number("7", num, sizeof num);
        char ins[66];
        snprintf(ins, sizeof ins, " %s", num);
        text_splice(f, at + len, 0, ins, strlen(ins));
        snprintf(desc, cap, "%s line %zu gains \"%s\"", f->name, li + 1, num);
        break;
    }
    case 7: { /* cut short */
        size_t c = below(f->n + 1);
        f->n = c;
        snprintf(desc, cap, "%s cut at byte %zu", f->name, c);
        break;
    }
    default:
        w->wdrop[i] = 1;
        snprintf(desc, cap, "%s removed", f->name);
        break;
    }
    return 1;
}

/* Seal every block and every header again (mutations changed their bytes): CRCs, and in a
 * partial file of a checking collector its running checks and live header CRC (trace.h). */
struct reseal_ctx {
    const struct file *f;
    int checked; /* the file has CS_FLAG_CHECKED */
};

static void reseal_block(void *arg, size_t off, struct cs_block_header *bh)
{
    const struct reseal_ctx *x = arg;
    const struct file *f = x->f;
    size_t span = bh->kind == CS_BLOCK_COMMS && bh->span > 1 ? bh->span : 1;
    if (off + span * CS_BLOCK_SIZE > f->n)
        return; /* cut short: the reader must say so */
    if (!bh->crc) {
        /* unsealed block of a partial file: stays so, with its running check made to fit */
        if (x->checked && bh->kind == CS_BLOCK_EVENTS && bh->used <= CS_EVENTS_PER_BLOCK) {
            const struct cs_event *ev = (const void *)(f->b + off + sizeof *bh);
            uint32_t sum = 0;
            for (uint32_t k = 0; k < bh->used; k++)
                sum = cs_live_step(sum, &ev[k]);
            bh->live_sum = sum;
            bh->live_used = bh->used;
        }
        return;
    }
    bh->crc = 0;
    uint32_t c = cs_crc32(0, f->b + off, span * CS_BLOCK_SIZE);
    bh->crc = c ? c : 1;
}

static void reseal(struct work *w)
{
    for (int i = 0; i < w->nf; i++) {
        if (w->drop[i])
            continue;
        struct cs_file_header *h = hdr(w, i);
        struct reseal_ctx x = {&w->f[i], h && (h->flags & CS_FLAG_CHECKED)};
        each_block(&w->f[i], reseal_block, &x);
        if (h && h->header_crc) {
            h->header_crc = 0;
            h->header_crc = cs_crc32(0, h, CS_HEADER_SIZE);
        } else if (h && (h->flags & CS_FLAG_CHECKED)) {
            const uint64_t v[4] = {h->dropped, h->unrecorded_tests, h->unrecorded_test_ns,
                                   h->gpu_dropped};
            for (int k = 0; k < 4; k++)
                h->counter_check[k] = ~v[k];
            union {
                struct cs_file_header h;
                unsigned char page[CS_HEADER_SIZE];
            } c;
            memcpy(c.page, h, CS_HEADER_SIZE);
            cs_header_live_view(&c.h);
            h->live_crc = cs_crc32(0, c.page, CS_HEADER_SIZE);
        }
    }
}

static int write_all(const char *path, const unsigned char *b, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k <= 0) {
            close(fd);
            return -1;
        }
        b += k;
        n -= (size_t)k;
    }
    return close(fd);
}

/* Files f[0..n) but the dropped ones into dir; 0, or -1 (said on stderr). */
static int write_files(const char *dir, const struct file *f, const int *drop, int n)
{
    for (int i = 0; i < n; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%s", dir, f[i].name);
        if (!drop[i] && write_all(p, f[i].b, f[i].n)) {
            fprintf(stderr, "test_fuzz: cannot write %s: %s\n", p, strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* A word "nan", "inf" or "infinity" (any case) in s: a number printed that is not one. */
static const char *nonfinite_word(const char *s)
{
    for (const char *p = s; *p;) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) {
            p++;
            continue;
        }
        const char *q = p;
        while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z'))
            q++;
        size_t l = (size_t)(q - p);
        if ((l == 3 && (!strncasecmp(p, "nan", 3) || !strncasecmp(p, "inf", 3))) ||
            (l == 8 && !strncasecmp(p, "infinity", 8)))
            return p;
        p = q;
    }
    return NULL;
}

/* The what-if's full overlap and best bandwidth are at most its replayed step time; 0, or -1
 * with the reason in why. */
static int check_whatif(yajl_val v, char *why, size_t cap)
{
    const char *wp[] = {"whatif", NULL};
    yajl_val w = yajl_tree_get(v, wp, yajl_t_object);
    const char *rp[] = {"replayed_step_s", NULL};
    yajl_val r = w ? yajl_tree_get(w, rp, yajl_t_number) : NULL;
    if (!r)
        return 0;
    static const char *const keys[] = {"full_overlap_step_s", "best_bandwidth_step_s"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *kp[] = {keys[i], NULL};
        yajl_val x = yajl_tree_get(w, kp, yajl_t_number);
        if (x && YAJL_GET_DOUBLE(x) > YAJL_GET_DOUBLE(r) + 1e-9) {
            snprintf(why, cap, "what-if %s %.10f s exceeds replayed_step_s %.10f s", keys[i],
                     YAJL_GET_DOUBLE(x), YAJL_GET_DOUBLE(r));
            return -1;
        }
    }
    return 0;
}

/* path parses as JSON, and passes rule (when not NULL); 0, or -1 with the reason in why. */
static int check_json(const char *path, const char *what, int (*rule)(yajl_val, char *, size_t),
                      char *why, size_t cap)
{
    char *s = slurp(path, NULL);
    if (!s) {
        snprintf(why, cap, "the %s file was not written", what);
        return -1;
    }
    char err[256];
    yajl_val v = yajl_tree_parse(s, err, sizeof err);
    free(s);
    if (!v) {
        snprintf(why, cap, "the %s file is not JSON: %.200s", what, err);
        for (char *p = why; *p; p++)
            if (*p == '\n')
                *p = ' ';
        return -1;
    }
    int rc = rule ? rule(v, why, cap) : 0;
    yajl_tree_free(v);
    return rc;
}

static int check_text(const char *path, const char *what, char *why, size_t cap)
{
    char *s = slurp(path, NULL);
    if (!s) {
        snprintf(why, cap, "the %s was not written", what);
        return -1;
    }
    const char *bad = nonfinite_word(s);
    if (bad) {
        const char *ls = bad;
        while (ls > s && ls[-1] != '\n')
            ls--;
        const char *le = strchr(bad, '\n');
        int ll = le ? (int)(le - ls) : (int)strlen(ls);
        snprintf(why, cap, "the %s prints a non-finite number: \"%.*s\"", what, ll > 160 ? 160 : ll,
                 ls);
    }
    free(s);
    return bad ? -1 : 0;
}

/* Runs the analysis of dir in a child; returns 0 when every rule of the header comment held,
 * else -1 with the reason in why. */
static int analyse(const char dir[64], char *why, size_t cap, int *code)
{
    char out[128], err[128], json[128], html[128], pf[128], csv[128];
    snprintf(out, sizeof out, "%s.out", dir);
    snprintf(err, sizeof err, "%s.err", dir);
    snprintf(json, sizeof json, "%s.json", dir);
    snprintf(html, sizeof html, "%s.html", dir);
    snprintf(pf, sizeof pf, "%s.pftrace.json", dir);
    snprintf(csv, sizeof csv, "%s.csv", dir);
    unlink(json);
    unlink(html);
    unlink(pf);
    unlink(csv);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, cap, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        if (!freopen(out, "w", stdout) || !freopen(err, "w", stderr))
            _exit(120);
        alarm(CHILD_LIMIT_S);
        char *argv[] = {"analyze",    (char *)dir, "--json",   json, "--html", html,
                        "--perfetto", pf,          "--events", csv,  NULL};
        int rc = cs_cmd_analyze(10, argv);
        fflush(NULL);
        exit(rc); /* exit, not _exit: LeakSanitizer runs at exit */
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            snprintf(why, cap, "waitpid: %s", strerror(errno));
            return -1;
        }
    char *e = slurp(err, NULL);
    int rc = -1;
    *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (WIFSIGNALED(st))
        snprintf(why, cap, "%s",
                 WTERMSIG(st) == SIGALRM ? "the analysis did not finish in "
                                           "300 s"
                                         : strsignal(WTERMSIG(st)));
    else if (e && (strstr(e, "Sanitizer") || strstr(e, "runtime error:")))
        snprintf(why, cap, "a sanitizer report (exit %d)", WEXITSTATUS(st));
    else if (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 1 && WEXITSTATUS(st) != 3 &&
             WEXITSTATUS(st) != 4)
        snprintf(why, cap, "exit status %d", WEXITSTATUS(st));
    else if (WEXITSTATUS(st) != 0 && (!e || !*e))
        snprintf(why, cap, "exit status %d and nothing said on stderr", WEXITSTATUS(st));
    else if (WEXITSTATUS(st) == 3)
        rc = 0;
    else if (check_text(out, "text report", why, cap) == 0 &&
             check_json(json, "JSON report", check_whatif, why, cap) == 0 &&
             check_json(pf, "Perfetto", NULL, why, cap) == 0 &&
             check_text(csv, "events CSV", why, cap) == 0) {
        char *h = slurp(html, NULL);
        if (!h || !strstr(h, "</html>"))
            snprintf(why, cap, "the HTML report is %s", h ? "incomplete" : "not written");
        else
            rc = 0;
        free(h);
    }
    if (rc && e && *e) {
        size_t l = strlen(why);
        snprintf(why + l, cap - l, "; stderr: %.600s", e);
    }
    free(e);
    return rc;
}

static void rmtree_files(const char dir[64])
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
}

/* Everything of the seed run besides its traces and wire captures (the node snapshots in
 * topology/, the launcher's record) is linked into the damaged copy, unchanged. */
static void link_rest(const char *seed, const char dir[64])
{
    DIR *d = opendir(seed);
    char abs[PATH_MAX];
    if (!d || !realpath(seed, abs)) {
        if (d)
            closedir(d);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || is_trace(de->d_name) || is_wire(de->d_name))
            continue;
        char from[PATH_MAX + 300], to[400];
        snprintf(from, sizeof from, "%s/%s", abs, de->d_name);
        snprintf(to, sizeof to, "%s/%s", dir, de->d_name);
        if (symlink(from, to) != 0)
            fprintf(stderr, "test_fuzz: cannot link %s to %s: %s\n", to, from, strerror(errno));
    }
    closedir(d);
}

int main(int argc, char **argv)
{
    long iters = 200;
    uint64_t seed;
    int first =
        fuzz_args(argc, argv, &iters, &seed, "test_fuzz [-n ITERATIONS] [-s SEED] SEED_RUN_DIR...");
    if (first < 0)
        return 2;
    int nruns = argc - first;
    if (nruns < 1) {
        fprintf(stderr, "usage: test_fuzz [-n ITERATIONS] [-s SEED] SEED_RUN_DIR...\n");
        return 2;
    }
    for (unsigned op = 1; op < CS_OP_MAX; op++)
        if (cs_op_info(op)->name)
            valid_ops[nvalid_ops++] = op;
    struct run *runs = calloc((size_t)nruns, sizeof *runs);
    if (!runs)
        return 2;
    for (int i = 0; i < nruns; i++)
        if (load_run(argv[first + i], &runs[i]))
            return 2;
    char root[] = "/tmp/cs_fuzz.XXXXXX";
    if (tw_tmpdir(root))
        return 2;
    char dir[64];
    snprintf(dir, sizeof dir, "%s/run", root);
    printf("test_fuzz: %ld iterations, seed %llu, %d seed runs, scratch %s\n", iters,
           (unsigned long long)seed, nruns, root);
    rng = seed;
    int failures = 0;
    long rejected = 0, clean = 0;
    for (long it = 0; it < iters; it++) {
        const struct run *s = &runs[it % nruns];
        struct work w = {.nf = s->nf};
        w.f = calloc((size_t)s->nf, sizeof *w.f);
        w.drop = calloc((size_t)s->nf, sizeof *w.drop);
        if (!w.f || !w.drop)
            return 2;
        for (int i = 0; i < s->nf; i++) {
            w.f[i] = s->f[i];
            w.f[i].b = malloc(s->f[i].n ? s->f[i].n : 1);
            if (!w.f[i].b)
                return 2;
            memcpy(w.f[i].b, s->f[i].b, s->f[i].n);
            struct cs_file_header *h = hdr(&w, i);
            if (h && h->world_size > w.world)
                w.world = h->world_size;
        }
        if (w.world < 1)
            w.world = s->nf;
        work_index(&w);
        w.nwf = s->nwf;
        w.wf = calloc((size_t)s->nwf + 1, sizeof *w.wf);
        w.wdrop = calloc((size_t)s->nwf + 1, sizeof *w.wdrop);
        if (!w.wf || !w.wdrop)
            return 2;
        for (int i = 0; i < s->nwf; i++) {
            w.wf[i] = s->wf[i];
            w.wf[i].b = malloc(s->wf[i].n + 1);
            if (!w.wf[i].b)
                return 2;
            memcpy(w.wf[i].b, s->wf[i].b, s->wf[i].n);
        }
        char desc[2048] = "";
        size_t dl = 0;
        int nm = 1 + (int)below(4);
        for (int m = 0, tries = 0; m < nm && tries < 64; tries++) {
            char one[512];
            /* A run with wire captures: a third of the mutations are theirs. */
            uint64_t k = below(w.nwf ? 15 : 10);
            int ok = k < 6    ? mutate_event(&w, one, sizeof one)
                     : k < 8  ? mutate_comm(&w, one, sizeof one)
                     : k < 10 ? mutate_file(&w, one, sizeof one)
                              : mutate_wire(&w, one, sizeof one);
            if (!ok)
                continue;
            m++;
            int l = snprintf(desc + dl, sizeof desc - dl, "%s%s", dl ? "; " : "", one);
            if (l > 0 && (size_t)l < sizeof desc - dl)
                dl += (size_t)l;
        }
        reseal(&w);
        mkdir(dir, 0755);
        rmtree_files(dir);
        link_rest(s->dir, dir);
        if (write_files(dir, w.f, w.drop, w.nf) || write_files(dir, w.wf, w.wdrop, w.nwf))
            return 2;
        char why[1024] = "";
        int code = -1;
        if (analyse(dir, why, sizeof why, &code)) {
            failures++;
            char kept[96];
            snprintf(kept, sizeof kept, "%s/fail-%ld", root, it);
            rename(dir, kept);
            printf("FAIL iteration %ld (seed run %s): %s\n  mutations: %s\n  kept in %s\n", it,
                   s->dir, why, desc, kept);
        } else if (code == 3) {
            rejected++;
        } else {
            clean++;
        }
        for (int i = 0; i < w.nf; i++)
            free(w.f[i].b);
        free(w.f);
        free(w.drop);
        for (int i = 0; i < w.nwf; i++)
            free(w.wf[i].b);
        free(w.wf);
        free(w.wdrop);
        free(w.ev);
        free(w.cr);
    }
    printf("test_fuzz: %ld iterations: %ld analysed, %ld refused (nothing to analyse), %d failed\n",
           iters, clean, rejected, failures);
    if (!failures)
        tw_rmtree(root);
    else
        printf("test_fuzz: failing runs kept under %s (rerun with -s %llu)\n", root,
               (unsigned long long)seed);
    for (int i = 0; i < nruns; i++) {
        for (int j = 0; j < runs[i].nf; j++)
            free(runs[i].f[j].b);
        free(runs[i].f);
        for (int j = 0; j < runs[i].nwf; j++)
            free(runs[i].wf[j].b);
        free(runs[i].wf);
    }
    free(runs);
    return failures ? 1 : 0;
}
