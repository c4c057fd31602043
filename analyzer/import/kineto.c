/*
 * The Kineto importer (kineto.h): each trace becomes the trace the native collector would have
 * written for that rank, in a temporary run directory, and the ordinary pipeline analyses it.
 *
 * Per file: NCCL kernels are tied to the record_param_comms op that launched them (the kernel's
 * own collective args, else the same "External id", else the CUDA launch with the kernel's
 * correlation id -- found directly or through its ac2g flow -- inside a record_param_comms on the
 * same thread), which gives the collective, sizes and process group.  Each process group is one
 * communicator; its kernels get sequence numbers in issue order (launch time), so the k-th
 * collective of a group on every rank forms one instance.  Every NCCL kernel becomes an NCCL call
 * at its launch plus a gpu_nccl record; other kernels gpu_kernel records; ProfilerStep#N step
 * markers.
 *
 * Clocks: Kineto stamps with each host's wall clock.  The members of a collective instance finish
 * within microseconds of each other, so each rank's correction is the median over shared
 * instances of (reference member's end - its end), chained from the lowest rank outwards; the
 * uncertainty is half the spread of those differences.
 */
#include "kineto.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- inputs ---- */

struct input {
    char *path;
    struct cs__kfile f; /* parsed, freed after conversion */
    int ok, rank, world;
    int reparse; /* records dropped after pass 1: parse again */
    char file[256];
    /* NCCL collective ends for the alignment */
    struct aend {
        uint64_t comm;
        uint32_t seq;
        int32_t size; /* members of the instance */
        int64_t end;
    } * ends;
    size_t nends;
    int64_t t_init, t_fin; /* raw ns */
    struct cs_report_kineto_rank rr;
};

/* qsort of n elements; qsort's array may not be NULL even for none (C11 7.22.5), and an empty
 * vector's is. */
static void ksort(void *v, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(v, n, size, cmp);
}

static const char *base(const char *p)
{
    const char *s = strrchr(p, '/');
    return s && s[1] ? s + 1 : p;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Expand directories into their *.json / *.json.gz files (sorted).  Returns the count, -1 on a
 * path that cannot be read (message in err). */
static int collect(const char *const *paths, int n, char ***out, char *err, size_t errlen)
{
    char **v = NULL;
    int k = 0, cap = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0) {
            snprintf(err, errlen, "%s: %s", paths[i], strerror(errno));
            goto fail;
        }
        char **names = NULL;
        int nn = 0;
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(paths[i]);
            if (!d) {
                snprintf(err, errlen, "%s: %s", paths[i], strerror(errno));
                goto fail;
            }
            struct dirent *de;
            int capn = 0;
            while ((de = readdir(d))) {
                if (de->d_name[0] == '.' ||
                    !(has_suffix(de->d_name, ".json") || has_suffix(de->d_name, ".json.gz")))
                    continue;
                if (nn == capn) {
                    capn = capn ? 2 * capn : 16;
                    char **p = realloc(names, (size_t)capn * sizeof *p);
                    if (!p)
                        break;
                    names = p;
                }
                size_t len = strlen(paths[i]) + strlen(de->d_name) + 2;
                if ((names[nn] = malloc(len)))
                    snprintf(names[nn++], len, "%s/%s", paths[i], de->d_name);
            }
            closedir(d);
            if (nn)
                ksort(names, (size_t)nn, sizeof *names, str_cmp);
            if (!nn) {
                free(names);
                snprintf(err, errlen, "%s: no *.json or *.json.gz files", paths[i]);
                goto fail;
            }
        } else {
            names = malloc(sizeof *names);
            if (names && (names[0] = strdup(paths[i])))
                nn = 1;
        }
        for (int j = 0; j < nn; j++) {
            if (k == cap) {
                cap = cap ? 2 * cap : 16;
                char **p = realloc(v, (size_t)cap * sizeof *p);
                if (!p) {
                    snprintf(err, errlen, "out of memory");
                    for (; j < nn; j++)
                        free(names[j]);
                    free(names);
                    goto fail;
                }
                v = p;
            }
            v[k++] = names[j];
        }
        free(names);
    }
    *out = v;
    return k;
fail:
    for (int i = 0; i < k; i++)
        free(v[i]);
    free(v);
    return -1;
}

/* ---- the trace writer (include/commscope/trace.h) ---- */

struct wr {
    FILE *out;
    unsigned char blk[CS_BLOCK_SIZE];
    uint32_t used; /* events in blk */
    uint64_t seq, blocks, events;
    int err;
};

static void flush_events(struct wr *w)
{
    if (!w->used)
        return;
    struct cs_block_header *h = (void *)w->blk;
    memset(h, 0, sizeof *h);
    h->magic = CS_BLOCK_MAGIC;
    h->kind = CS_BLOCK_EVENTS;
    h->used = w->used;
    h->span = 1;
    h->seq = w->seq++;
    memset(w->blk + sizeof *h + (size_t)w->used * CS_EVENT_SIZE, 0,
           CS_BLOCK_SIZE - sizeof *h - (size_t)w->used * CS_EVENT_SIZE);
    h->crc = cs_crc32(0, w->blk, CS_BLOCK_SIZE);
    if (fwrite(w->blk, 1, CS_BLOCK_SIZE, w->out) != CS_BLOCK_SIZE)
        w->err = 1;
    w->blocks++;
    w->used = 0;
}

static void put_event(struct wr *w, const struct cs_event *e)
{
    memcpy(w->blk + sizeof(struct cs_block_header) + (size_t)w->used * CS_EVENT_SIZE, e, sizeof *e);
    w->events++;
    if (++w->used == CS_EVENTS_PER_BLOCK)
        flush_events(w);
}

/* One communicator record in its own comm block.  Returns 0, -1 when it does not fit a block. */
static int put_comm(struct wr *w, uint64_t id, int size, int my_rank, const int32_t *members)
{
    uint32_t len = (uint32_t)((sizeof(struct cs_comm_record) + 4 * (size_t)size + 7) & ~(size_t)7);
    if (len > CS_BLOCK_SIZE - sizeof(struct cs_block_header))
        return -1;
    unsigned char *b = calloc(1, CS_BLOCK_SIZE);
    if (!b)
        return -1;
    struct cs_block_header *h = (void *)b;
    h->magic = CS_BLOCK_MAGIC;
    h->kind = CS_BLOCK_COMMS;
    h->used = len;
    h->span = 1;
    struct cs_comm_record *r = (void *)(b + sizeof *h);
    r->record_bytes = len;
    r->kind = CS_COMM_MPI; /* full membership is known: no joining needed */
    r->id = id;
    r->parent = CS_COMM_WORLD_ID;
    r->t_created = 1;
    r->size = size;
    r->my_rank = my_rank;
    memcpy(r->members, members, 4 * (size_t)size);
    h->crc = cs_crc32(0, b, CS_BLOCK_SIZE);
    if (fwrite(b, 1, CS_BLOCK_SIZE, w->out) != CS_BLOCK_SIZE)
        w->err = 1;
    w->blocks++;
    free(b);
    return 0;
}

static int write_header(FILE *out, const struct cs_file_header *h0)
{
    unsigned char *hdr = calloc(1, CS_HEADER_SIZE);
    if (!hdr)
        return -1;
    struct cs_file_header h = *h0;
    h.header_crc = 0;
    memcpy(hdr, &h, sizeof h);
    uint32_t crc = cs_crc32(0, hdr, CS_HEADER_SIZE);
    memcpy(hdr + offsetof(struct cs_file_header, header_crc), &crc, 4);
    int rc = fseek(out, 0, SEEK_SET) == 0 && fwrite(hdr, 1, CS_HEADER_SIZE, out) == CS_HEADER_SIZE
                 ? 0
                 : -1;
    free(hdr);
    return rc;
}

/* ---- the model of one file ---- */

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

/* Communicator of a process group: world when it is all ranks in order (or undescribed), else an
 * id from its name and members, the same on every member. */
struct pgc {
    uint64_t id;
    int size, my;
    const int32_t *members;
};

/* The id of a derived communicator from its process group's name and members, the same on every
 * member: a non-zero high half, so never world's or self's. */
static uint64_t pg_id(const char *name, const int32_t *m, int n)
{
    uint64_t h = fnv(name, strlen(name), 1469598103934665603ull);
    h = fnv(m, (size_t)n * sizeof *m, h);
    return (h & 0x3fffffff00000000ull) | (1ull << 32) | (h & 0xffffffffull);
}

static int comm_of(const struct cs__kfile *f, const struct cs__kcomm *c, int rank, int world,
                   struct pgc *out)
{
    const int32_t *m = c ? c->ranks : NULL;
    int n = c ? c->nranks : 0;
    if (c && !m && c->pg[0]) {
        for (size_t i = 0; i < f->pgs.n; i++)
            if (!strcmp(f->pgs.v[i].name, c->pg) && f->pgs.v[i].nranks > 0) {
                m = f->pgs.v[i].ranks;
                n = f->pgs.v[i].nranks;
            }
    }
    int is_world = !m;
    if (m && n == world) {
        is_world = 1;
        for (int i = 0; i < n && is_world; i++)
            is_world = m[i] == i;
    }
    if (is_world) {
        *out = (struct pgc){CS_COMM_WORLD_ID, world, rank, NULL};
        return 0;
    }
    int my = -1;
    for (int i = 0; i < n; i++)
        if (m[i] == rank)
            my = i;
    if (my < 0)
        return -1;
    *out = (struct pgc){pg_id(c->pg, m, n), n, my, m};
    return 0;
}

static uint16_t op_of(int cls)
{
    switch (cls) {
    case CS_KC_ALLREDUCE:
        return CS_OP_NCCL_ALLREDUCE;
    case CS_KC_ALLGATHER:
        return CS_OP_NCCL_ALLGATHER;
    case CS_KC_REDUCESCATTER:
        return CS_OP_NCCL_REDUCE_SCATTER;
    case CS_KC_BROADCAST:
        return CS_OP_NCCL_BROADCAST;
    case CS_KC_REDUCE:
        return CS_OP_NCCL_REDUCE;
    case CS_KC_SENDRECV:
    case CS_KC_ALLTOALL:
        return CS_OP_NCCL_ALLTOALL;
    case CS_KC_SEND:
        return CS_OP_NCCL_SEND;
    case CS_KC_RECV:
        return CS_OP_NCCL_RECV;
    default:
        return 0;
    }
}

static int launch_cmp(const void *a, const void *b)
{
    const struct cs__klaunch *x = a, *y = b;
    return x->corr < y->corr ? -1 : x->corr > y->corr;
}

static int comm_cmp(const void *a, const void *b)
{
    const struct cs__kcomm *x = *(struct cs__kcomm *const *)a, *y = *(struct cs__kcomm *const *)b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int flow_cmp(const void *a, const void *b)
{
    const struct cs__kflow *x = a, *y = b;
    if (x->ph != y->ph)
        return x->ph < y->ph ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static const struct cs__klaunch *find_launch(const struct cs__kfile *f, uint64_t corr)
{
    struct cs__klaunch key = {.corr = corr};
    /* (bsearch wants a base even for no elements: none without launches) */
    return corr && f->launches.n
               ? bsearch(&key, f->launches.v, f->launches.n, sizeof key, launch_cmp)
               : NULL;
}

/* The correlation id of a kernel without one, through its ac2g flow ('f' at the kernel). */
static uint64_t flow_corr(const struct cs__kfile *f, const struct cs__kkernel *k)
{
    struct cs__kflow key = {.pid = k->pid, .tid = k->tid, .ts = k->ts, .ph = 'f'};
    const struct cs__kflow *x = bsearch(&key, f->flows.v, f->flows.n, sizeof key, flow_cmp);
    return x ? x->id : 0;
}

/* The record_param_comms on the launch's thread whose span holds the launch. */
static const struct cs__kcomm *enclosing(struct cs__kcomm **byt, size_t n,
                                         const struct cs__klaunch *l)
{
    size_t lo = 0, hi = n;
    while (lo < hi) { /* first entry after (pid, tid, ts) */
        size_t mid = (lo + hi) / 2;
        const struct cs__kcomm *c = byt[mid];
        if (c->pid < l->pid ||
            (c->pid == l->pid && (c->tid < l->tid || (c->tid == l->tid && c->ts <= l->ts))))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const struct cs__kcomm *c = byt[lo - 1];
    if (c->pid == l->pid && c->tid == l->tid && c->ts <= l->ts && l->ts <= c->ts + c->dur)
        return c;
    return NULL;
}

struct nk {
    size_t k;      /* kernel index */
    int64_t issue; /* launch time (kernel start without one) */
    uint64_t corr;
    const struct cs__kcomm *c;
    int cls;
    struct pgc pg;
    int pg_ok;
};

static int nk_cmp(const void *a, const void *b)
{
    const struct nk *x = a, *y = b;
    if (x->issue != y->issue)
        return x->issue < y->issue ? -1 : 1;
    return x->corr < y->corr ? -1 : x->corr > y->corr;
}

static int gloo_cmp(const void *a, const void *b)
{
    const struct cs__kgloo *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int ev_cmp(const void *a, const void *b)
{
    const struct cs_event *x = a, *y = b;
    if (x->t_begin != y->t_begin)
        return x->t_begin < y->t_begin ? -1 : 1;
    /* the launching call before its GPU record */
    int g = (x->op >= CS_OP_GPU_KERNEL) - (y->op >= CS_OP_GPU_KERNEL);
    /* phase ranges at one instant: ends first, inner before outer, then begins, outer first
     * (flags holds that order until the sort is done) */
    return g ? g : (x->flags > y->flags) - (x->flags < y->flags);
}

static int mark_cmp(const void *a, const void *b)
{
    const struct cs__kmark *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return (x->dur < y->dur) - (x->dur > y->dur); /* the enclosing one first */
}

#define MARK_DEPTH 64

/* The phase annotations as NVTX push/pop ranges (begin and end records with the name and the
 * depth on their thread).  A range that ends after the one enclosing it is cut at that one's end,
 * so that ranges nest on every thread.  Returns how many records were put at ev. */
static size_t phase_events(struct cs__kfile *f, struct cs_event *ev)
{
    ksort(f->marks.v, f->marks.n, sizeof *f->marks.v, mark_cmp);
    size_t n = 0;
    int64_t end[MARK_DEPTH];
    int depth = 0;
    for (size_t i = 0; i < f->marks.n; i++) {
        const struct cs__kmark *m = &f->marks.v[i];
        if (i && m->tid != f->marks.v[i - 1].tid)
            depth = 0;
        while (depth && end[depth - 1] <= m->ts)
            depth--;
        int64_t e = m->ts + m->dur;
        if (depth && e > end[depth - 1])
            e = end[depth - 1];
        if (e <= m->ts || depth == MARK_DEPTH)
            continue;
        end[depth++] = e;
        struct cs_event b = {.t_begin = (uint64_t)m->ts,
                             .t_end = (uint64_t)m->ts,
                             .seq = m->hash,
                             .peer = -1,
                             .op = CS_OP_NVTX_RANGE_BEGIN,
                             .flags = (uint16_t)(200 + depth),
                             .aux = depth};
        memcpy((unsigned char *)&b + 16, m->name, CS_NVTX_NAME_MAX);
        struct cs_event x = b;
        x.t_begin = x.t_end = (uint64_t)e;
        x.op = CS_OP_NVTX_RANGE_END;
        x.flags = (uint16_t)(100 - depth);
        ev[n++] = b;
        ev[n++] = x;
    }
    return n;
}

/* The rank's problems, kept until the run exists. */
struct notes {
    char **v;
    size_t n, cap;
};

static void note(struct notes *ns, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct notes *ns, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cs__msg_vadd(&ns->v, &ns->n, &ns->cap, fmt, ap);
    va_end(ap);
}

/* Convert in->f (rank in->rank of in->world) into DIR/rank-NNNNN.cst.  Returns 0 or -1. */
/* The converted trace of input in: its events ev[ne] (in time order) and its process groups
 * into DIR/rank-NNNNN.cst, in the trace format.  Returns 0, or -1 (the note says why). */
static int write_trace(struct input *in, const char *dir, uint64_t run_id, const struct pgc *pgs,
                       size_t npgs, const struct cs_event *ev, size_t ne, struct notes *ns)
{
    const struct cs__kfile *f = &in->f;
    const char *name = in->file;
    char path[4200];
    snprintf(path, sizeof path, "%s/rank-%05d.cst", dir, in->rank);
    struct wr *w = calloc(1, sizeof *w);
    if (!w || !(w->out = fopen(path, "w+b"))) {
        note(ns, "%s: cannot write the converted trace %s: %s", name, path, strerror(errno));
        free(w);
        return -1;
    }
    struct cs_file_header h = {0};
    memcpy(h.magic, CS_TRACE_MAGIC, 8);
    h.version = CS_TRACE_VERSION;
    h.header_size = CS_HEADER_SIZE;
    h.block_size = CS_BLOCK_SIZE;
    h.event_size = CS_EVENT_SIZE;
    h.rank = in->rank;
    h.world_size = in->world;
    h.pid = -1;
    h.run_id = run_id;
    h.nonce = fnv(f->path, strlen(f->path), run_id);
    int64_t t0 = f->t_min <= f->t_max ? f->t_min : 0, t1 = f->t_min <= f->t_max ? f->t_max : 0;
    h.t_init = (uint64_t)t0;
    h.t_finalize = (uint64_t)t1;
    in->t_init = t0;
    in->t_fin = t1;
    h.gpu_timing = f->kernels.n ? CS_GPU_CUPTI : CS_GPU_NONE;
    h.rank_source = CS_RANKSRC_TORCH;
    h.local_rank = -1;
    snprintf(h.host, sizeof h.host, "%.63s", name);
    snprintf(h.program, sizeof h.program, "%.255s", f->path);
    unsigned char zero[CS_HEADER_SIZE] = {0};
    if (fwrite(zero, 1, CS_HEADER_SIZE, w->out) != CS_HEADER_SIZE)
        w->err = 1;
    for (size_t i = 0; i < npgs; i++)
        if (pgs[i].id != CS_COMM_WORLD_ID &&
            put_comm(w, pgs[i].id, pgs[i].size, pgs[i].my, pgs[i].members))
            note(ns,
                 "%s: process group of %d ranks too large for one record; its collectives "
                 "are not matched",
                 name, pgs[i].size);
    for (size_t i = 0; i < ne; i++)
        put_event(w, &ev[i]);
    flush_events(w);
    h.blocks = w->blocks;
    h.events = w->events;
    if (write_header(w->out, &h))
        w->err = 1;
    int werr = w->err;
    if (fclose(w->out) != 0 || werr) {
        note(ns, "%s: error writing the converted trace %s", name, path);
        free(w);
        return -1;
    }
    free(w);
    return 0;
}

/* The step markers: an MPI_Pcontrol(1) at each ProfilerStep's start, and one where the last
 * ends.  Returns how many were put at ev. */
static size_t step_events(const struct cs__kfile *f, struct cs_report_kineto_rank *rr,
                          struct cs_event *ev)
{
    size_t n = 0;
    for (size_t i = 0; i < f->steps.n; i++) {
        const struct cs__kstep *s = &f->steps.v[i];
        ev[n++] = (struct cs_event){.t_begin = (uint64_t)s->ts,
                                    .t_end = (uint64_t)s->ts,
                                    .peer = -1,
                                    .op = CS_OP_PCONTROL,
                                    .aux = 1};
        if (rr->first_step < 0 || s->n < rr->first_step)
            rr->first_step = s->n;
    }
    rr->steps = (int)f->steps.n;
    /* A marker where the last ProfilerStep ends closes it (the step analysis leaves the tail
     * after the last marker out of its statistics). */
    int64_t last_end = INT64_MIN;
    for (size_t i = 0; i < f->steps.n; i++)
        if (f->steps.v[i].ts + f->steps.v[i].dur > last_end)
            last_end = f->steps.v[i].ts + f->steps.v[i].dur;
    if (f->steps.n)
        ev[n++] = (struct cs_event){.t_begin = (uint64_t)last_end,
                                    .t_end = (uint64_t)last_end,
                                    .peer = -1,
                                    .op = CS_OP_PCONTROL,
                                    .aux = 1};
    return n;
}

/* The name deviceProperties gives the GPU most of the trace's kernels ran on; else the one name
 * all its devices share; else "". */
static void gpu_model(const struct cs__kfile *f, char *out, size_t n)
{
    enum { DEVS = 16 };
    int64_t id[DEVS];
    uint64_t cnt[DEVS];
    size_t nd = 0, best = 0;
    for (size_t i = 0; i < f->kernels.n; i++) {
        const struct cs__kkernel *k = &f->kernels.v[i];
        if (k->kind != CS_KK_KERNEL)
            continue;
        size_t j = 0;
        while (j < nd && id[j] != k->dev)
            j++;
        if (j == nd) {
            if (nd == DEVS)
                continue;
            id[nd] = k->dev;
            cnt[nd++] = 0;
        }
        if (++cnt[j] > cnt[best])
            best = j;
    }
    out[0] = '\0';
    for (size_t i = 0; nd && i < f->devs.n; i++)
        if (f->devs.v[i].id == id[best] && f->devs.v[i].name[0]) {
            snprintf(out, n, "%s", f->devs.v[i].name);
            return;
        }
    for (size_t i = 0; i < f->devs.n; i++) {
        if (!f->devs.v[i].name[0] || (out[0] && strcmp(out, f->devs.v[i].name) != 0)) {
            out[0] = '\0';
            return;
        }
        snprintf(out, n, "%s", f->devs.v[i].name);
    }
}

static int convert(struct input *in, const char *dir, uint64_t run_id, struct notes *ns)
{
    struct cs__kfile *f = &in->f;
    const char *name = in->file;
    struct cs_report_kineto_rank *rr = &in->rr;
    gpu_model(f, rr->gpu, sizeof rr->gpu);
    ksort(f->launches.v, f->launches.n, sizeof *f->launches.v, launch_cmp);
    ksort(f->flows.v, f->flows.n, sizeof *f->flows.v, flow_cmp);
    /* record_param_comms by thread and time, and by External id */
    struct cs__kcomm **byt = malloc((f->comms.n + 1) * sizeof *byt);
    size_t nbyt = 0;
    struct nk *nks = malloc((f->kernels.n + 1) * sizeof *nks);
    struct cs_event *ev =
        malloc((2 * f->kernels.n + f->gloo.n + f->steps.n + 2 * f->marks.n + 2) * sizeof *ev);
    struct pgc *pgs = NULL;
    size_t npgs = 0;
    uint32_t *pgseq = NULL;
    if (!byt || !nks || !ev) {
        free(byt);
        free(nks);
        free(ev);
        note(ns, "%s: out of memory converting the trace", name);
        return -1;
    }
    for (size_t i = 0; i < f->comms.n; i++)
        if (f->comms.v[i].pid != -1)
            byt[nbyt++] = &f->comms.v[i];
    ksort(byt, nbyt, sizeof *byt, comm_cmp);

    size_t nn = 0, ne = 0;
    uint64_t unknown_pg = 0, not_member = 0, no_sizes = 0, no_comm = 0;
    for (size_t i = 0; i < f->kernels.n; i++) {
        const struct cs__kkernel *k = &f->kernels.v[i];
        if (k->kind == CS_KK_MEMCPY)
            rr->memcpys++;
        else if (k->kind == CS_KK_MEMSET)
            rr->memsets++;
        else
            rr->kernels++;
        if (k->kind != CS_KK_KERNEL || k->cls < 0) {
            if (k->cls == CS_KCLS_CANDIDATE) {
                rr->candidates++;
                continue; /* neither compute nor communication: reported by name */
            }
            uint16_t op = k->kind == CS_KK_KERNEL   ? CS_OP_GPU_KERNEL
                          : k->kind == CS_KK_MEMCPY ? CS_OP_GPU_MEMCPY
                                                    : CS_OP_GPU_MEMSET;
            /* The CUDA runtime call that launched it (by correlation id, or its ac2g flow): its
             * start is the record's launch time, which puts the work in a step phase. */
            const struct cs__klaunch *l = find_launch(f, k->corr ? k->corr : flow_corr(f, k));
            ev[ne++] = (struct cs_event){.t_begin = (uint64_t)k->ts,
                                         .t_end = (uint64_t)(k->ts + k->dur),
                                         .bytes = k->bytes,
                                         .bytes_recv = l && l->ts > 0 ? (uint64_t)l->ts : 0,
                                         .seq = (uint32_t)k->stream,
                                         .peer = -1,
                                         .op = op,
                                         .aux = k->dev};
            continue;
        }
        rr->nccl_kernels++;
        rr->by_class[k->cls]++;
        struct nk x = {.k = i, .issue = k->ts, .corr = k->corr, .cls = k->cls};
        uint64_t corr = k->corr ? k->corr : flow_corr(f, k);
        const struct cs__klaunch *l = find_launch(f, corr);
        if (l) {
            x.issue = l->ts < k->ts ? l->ts : k->ts;
            x.corr = corr;
        }
        if (k->coll)
            x.c = &f->comms.v[k->coll - 1];
        for (size_t j = 0; !x.c && k->ext && j < f->comms.n; j++)
            if (f->comms.v[j].ext == k->ext && f->comms.v[j].pid != -1)
                x.c = &f->comms.v[j];
        if (!x.c && l)
            x.c = enclosing(byt, nbyt, l);
        if (!x.c)
            no_comm++;
        /* The kernel's name says what ran; the op's name refines SendRecv (all-to-all or
         * point-to-point) and names what a Generic kernel did. */
        if (x.c && x.c->cls >= 0 && x.c->cls != CS_KC_OTHER &&
            (x.cls == CS_KC_OTHER ||
             (x.cls == CS_KC_SENDRECV &&
              (x.c->cls == CS_KC_ALLTOALL || x.c->cls == CS_KC_SEND || x.c->cls == CS_KC_RECV))))
            x.cls = x.c->cls;
        if (x.c && x.c->dtsize && x.c->in_n != UINT64_MAX)
            rr->with_bytes++;
        else
            no_sizes++;
        if (comm_of(f, x.c, in->rank, in->world, &x.pg) == 0) {
            x.pg_ok = 1;
            if (x.c && x.c->pg[0] && !x.c->ranks && x.pg.id == CS_COMM_WORLD_ID &&
                strcmp(x.c->pg, "0") != 0 && strcmp(x.c->desc, "default_pg") != 0)
                unknown_pg++;
        } else {
            not_member++;
        }
        nks[nn++] = x;
    }
    ksort(nks, nn, sizeof *nks, nk_cmp);
    /* sequence numbers per communicator in issue order; communicator records */
    pgs = malloc((nn + 2) * sizeof *pgs);
    pgseq = calloc(nn + 2, sizeof *pgseq);
    in->ends = malloc((nn + f->gloo.n + 1) * sizeof *in->ends);
    int32_t *all = f->gloo.n ? malloc((size_t)in->world * sizeof *all) : NULL;
    if (!pgs || !pgseq || !in->ends || (f->gloo.n && !all)) {
        note(ns, "%s: out of memory converting the trace", name);
        goto fail;
    }
    uint64_t launch = 0;
    for (size_t i = 0; i < nn; i++) {
        struct nk *x = &nks[i];
        const struct cs__kkernel *k = &f->kernels.v[x->k];
        uint16_t op = op_of(x->cls);
        uint64_t req = 0, comm = 0;
        uint32_t seq = 0;
        if (op && x->pg_ok) {
            size_t p = 0;
            while (p < npgs && pgs[p].id != x->pg.id)
                p++;
            if (p == npgs)
                pgs[npgs++] = x->pg;
            seq = pgseq[p]++;
            comm = x->pg.id;
            req = ++launch;
            const struct cs__kcomm *c = x->c;
            uint64_t sz = c ? (uint64_t)c->dtsize : 0;
            int32_t root = -1;
            if (c && c->root >= 0 && c->root < in->world)
                root = c->root;
            ev[ne++] =
                (struct cs_event){.t_begin = (uint64_t)x->issue,
                                  .t_end = (uint64_t)x->issue,
                                  .comm = comm,
                                  .seq = seq,
                                  .request = req,
                                  .peer = root,
                                  .op = op,
                                  .flags = root == in->rank ? CS_EV_ROOT : 0,
                                  .bytes = c && c->in_n != UINT64_MAX ? c->in_n * sz : 0,
                                  .bytes_recv = c && c->out_n != UINT64_MAX ? c->out_n * sz : 0};
            if (cs_op_info(op)->kind == CS_KIND_NCOLL)
                in->ends[in->nends++] = (struct aend){comm, seq, x->pg.size, k->ts + k->dur};
        }
        ev[ne++] = (struct cs_event){.t_begin = (uint64_t)k->ts,
                                     .t_end = (uint64_t)(k->ts + k->dur),
                                     .comm = comm,
                                     .seq = seq,
                                     .request = req,
                                     .bytes_recv = 1,
                                     .peer = -1,
                                     .op = CS_OP_GPU_NCCL,
                                     .aux = k->dev};
    }
    /* Gloo collectives: blocking collectives of the world's Gloo process group (a communicator
     * of its own, apart from an NCCL group of the same ranks), numbered in start order. */
    if (f->gloo.n) {
        ksort(f->gloo.v, f->gloo.n, sizeof *f->gloo.v, gloo_cmp);
        for (int r = 0; r < in->world; r++)
            all[r] = r;
        struct pgc g = {pg_id("gloo", all, in->world), in->world, in->rank, all};
        size_t p = npgs;
        pgs[npgs++] = g;
        for (size_t i = 0; i < f->gloo.n; i++) {
            const struct cs__kgloo *x = &f->gloo.v[i];
            uint32_t seq = pgseq[p]++;
            ev[ne++] = (struct cs_event){.t_begin = (uint64_t)x->ts,
                                         .t_end = (uint64_t)(x->ts + x->dur),
                                         .comm = g.id,
                                         .seq = seq,
                                         .peer = -1,
                                         .op = x->op};
            in->ends[in->nends++] = (struct aend){g.id, seq, g.size, x->ts + x->dur};
        }
        rr->gloo = f->gloo.n;
    }
    rr->legacy = f->legacy;
    if (f->gloo_other)
        note(ns, "%s: %" PRIu64 " gloo:* spans are no collective (send, receive): not counted",
             name, f->gloo_other);
    ne += step_events(f, rr, ev + ne);
    ne += phase_events(f, ev + ne);
    ksort(ev, ne, sizeof *ev, ev_cmp);
    for (size_t i = 0; i < ne; i++)
        if (ev[i].op == CS_OP_NVTX_RANGE_BEGIN || ev[i].op == CS_OP_NVTX_RANGE_END)
            ev[i].flags = 0;
    if (no_comm && nbyt)
        note(ns,
             "%s: %" PRIu64 " of %" PRIu64 " NCCL kernels have no record_param_comms "
             "launching them; their process group is taken as the world",
             name, no_comm, rr->nccl_kernels);
    if (unknown_pg)
        note(ns,
             "%s: %" PRIu64 " NCCL kernels belong to process groups without a member list "
             "(no pg_config); they are matched as the world group",
             name, unknown_pg);
    if (not_member)
        note(ns,
             "%s: %" PRIu64 " NCCL kernels name a process group that does not contain rank "
             "%d; they count as communication time but are not matched",
             name, not_member, in->rank);
    for (int k = 0; k < CS_KSKIP_N; k++)
        if (f->skipped[k])
            note(ns, "%s: %" PRIu64 " %s skipped (first: %s)", name, f->skipped[k],
                 cs__kskip_what[k], f->first_skipped[k]);
    if (f->bad_base)
        note(ns,
             "%s: baseTimeNanoseconds is not a number below 2^61; ignored (times taken as "
             "they are)",
             name);

    if (write_trace(in, dir, run_id, pgs, npgs, ev, ne, ns))
        goto fail;
    free(all);
    free(byt);
    free(nks);
    free(ev);
    free(pgs);
    free(pgseq);
    return 0;
fail:
    free(all);
    free(byt);
    free(nks);
    free(ev);
    free(pgs);
    free(pgseq);
    return -1;
}

/* ---- clock alignment from collective completion times ---- */

struct tup {
    uint64_t comm;
    uint32_t seq;
    int32_t size;
    int r; /* index into inputs */
    int64_t end;
};

static int tup_cmp(const void *a, const void *b)
{
    const struct tup *x = a, *y = b;
    if (x->comm != y->comm)
        return x->comm < y->comm ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->r - y->r;
}

static int i64_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Offsets (ns, added to each input's times) and uncertainties; known[i] = 1 when estimated
 * (the reference is known by definition). */
static void align(struct input *ins, int n, int64_t *off, double *unc, uint64_t *used, int *known,
                  double *residual)
{
    size_t nt = 0;
    for (int i = 0; i < n; i++)
        nt += ins[i].ok ? ins[i].nends : 0;
    struct tup *t = malloc((nt + 1) * sizeof *t);
    int64_t *d = malloc((nt + 1) * sizeof *d);
    *residual = NAN;
    if (!t || !d) {
        free(t);
        free(d);
        return;
    }
    nt = 0;
    for (int i = 0; i < n; i++)
        for (size_t k = 0; ins[i].ok && k < ins[i].nends; k++)
            t[nt++] = (struct tup){ins[i].ends[k].comm, ins[i].ends[k].seq, ins[i].ends[k].size, i,
                                   ins[i].ends[k].end};
    ksort(t, nt, sizeof *t, tup_cmp);
    int ref = -1;
    for (int i = 0; i < n && ref < 0; i++)
        if (ins[i].ok)
            ref = i;
    if (ref < 0)
        goto out;
    known[ref] = 1;
    /* Breadth first: each pass estimates every rank that shares instances with known ones. */
    for (int progress = 1; progress;) {
        progress = 0;
        for (int r = 0; r < n; r++) {
            if (!ins[r].ok || known[r])
                continue;
            size_t nd = 0;
            for (size_t a = 0; a < nt;) {
                size_t b = a;
                while (b < nt && t[b].comm == t[a].comm && t[b].seq == t[a].seq)
                    b++;
                int64_t mine = 0, theirs = 0;
                int have_mine = 0, have_known = 0;
                /* only instances every member of which is among the inputs: in a partial set
                 * the k-th kernel of a group need not be the same collective everywhere */
                if ((int64_t)(b - a) != t[a].size) {
                    a = b;
                    continue;
                }
                for (const struct tup *x = t + a, *xe = t + b; x < xe; x++) {
                    if (x->r == r) {
                        mine = x->end;
                        have_mine = 1;
                    } else if (known[x->r] == 1 && !have_known) {
                        theirs = x->end + off[x->r];
                        have_known = 1;
                    }
                }
                if (have_mine && have_known)
                    d[nd++] = theirs - mine;
                a = b;
            }
            if (!nd)
                continue;
            ksort(d, nd, sizeof *d, i64_cmp);
            off[r] = nd % 2 ? d[nd / 2] : d[nd / 2 - 1] + (d[nd / 2] - d[nd / 2 - 1]) / 2;
            unc[r] = (double)(d[nd - 1] - d[0]) / 2;
            used[r] = nd;
            known[r] = 2; /* usable from the next pass on */
            progress = 1;
        }
        for (int r = 0; r < n; r++)
            if (known[r] == 2)
                known[r] = 1;
    }
    /* What is left after the correction: the largest spread of member ends in one instance. */
    int64_t worst = -1;
    for (size_t a = 0; a < nt;) {
        size_t b = a;
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        int members = 0;
        while (b < nt && t[b].comm == t[a].comm && t[b].seq == t[a].seq) {
            if (known[t[b].r]) {
                int64_t e = t[b].end + off[t[b].r];
                lo = e < lo ? e : lo;
                hi = e > hi ? e : hi;
                members++;
            }
            b++;
        }
        if (members > 1 && hi - lo > worst)
            worst = hi - lo;
        a = b;
    }
    if (worst >= 0)
        *residual = (double)worst;
out:
    free(t);
    free(d);
}

/* ---- the whole import ---- */

#define KEEP_BYTES ((size_t)512 << 20)

static size_t kfile_bytes(const struct cs__kfile *f)
{
    return f->kernels.cap * sizeof *f->kernels.v + f->launches.cap * sizeof *f->launches.v +
           f->comms.cap * sizeof *f->comms.v + f->flows.cap * sizeof *f->flows.v +
           f->gloo.cap * sizeof *f->gloo.v + f->marks.cap * sizeof *f->marks.v;
}

/* Keep only the identity of a parsed file. */
static void drop_records(struct input *in)
{
    struct cs__kfile id = in->f;
    cs__kfile_free(&in->f);
    in->f.has_dist = id.has_dist;
    in->f.rank = id.rank;
    in->f.world = id.world;
    in->f.t_min = id.t_min;
    in->f.t_max = id.t_max;
    in->f.base_ns = id.base_ns;
    in->reparse = 1;
}

static void rm_dir(const char *dir, struct input *ins, int n)
{
    char p[4200];
    for (int i = 0; i < n; i++)
        if (ins[i].ok) {
            snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, ins[i].rank);
            unlink(p);
        }
    rmdir(dir);
}

/* Patch each converted file's header with its clock correction (a single clock sample). */
static int patch_clock(const char *dir, const struct input *in, int64_t off, double unc,
                       uint64_t used)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, in->rank);
    FILE *f = fopen(p, "r+b");
    if (!f)
        return -1;
    struct cs_file_header h;
    int rc = -1;
    if (fread(&h, 1, sizeof h, f) == sizeof h) {
        h.clock[0] = (struct cs_clock_sample){.local_ns = h.t_init,
                                              .offset_ns = off,
                                              .rtt_ns = (uint64_t)(2 * unc + 0.5),
                                              .rounds = (uint32_t)used,
                                              .valid = 1};
        rc = write_header(f, &h);
    }
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}

/* Each usable input's rank: its distributedInfo, else (when no input has one) the file order;
 * inputs of another world size, without distributedInfo among those with it, or with a rank
 * already taken are skipped.  Returns the world size. */
static int assign_ranks(struct input *ins, int n, int with_dist, int world, struct notes *ns)
{
    int next = 0;
    for (int i = 0; i < n; i++) {
        struct input *in = &ins[i];
        if (!in->ok)
            continue;
        struct cs__kfile *f = &in->f;
        int dist = (f->has_dist & 3) == 3 && f->rank >= 0 && f->world > 0 && f->rank < f->world;
        if (dist && f->world != world) {
            note(ns,
                 "%s: world size %d differs from %d of the other traces (a different run?); "
                 "file skipped",
                 in->file, f->world, world);
            in->ok = 0;
        } else if (dist) {
            in->rank = f->rank;
        } else {
            in->rank = with_dist ? -1 : next++;
            if (with_dist)
                note(ns,
                     "%s: no distributedInfo (rank, world_size) while the other traces have "
                     "it; file skipped",
                     in->file);
            else
                note(ns,
                     "%s: no distributedInfo (rank, world_size): taken as rank %d by file "
                     "order",
                     in->file, in->rank);
            in->ok = with_dist ? 0 : 1;
        }
        for (int j = 0; j < i && in->ok; j++)
            if (ins[j].ok && ins[j].rank == in->rank) {
                note(ns, "duplicate rank %d: %s and %s both claim it; %s skipped", in->rank,
                     ins[j].file, in->file, in->file);
                in->ok = 0;
            }
        if (!in->ok)
            cs__kfile_free(f);
    }
    return with_dist ? world : next;
}

/* Mixed runs: an input whose time span lies far from the first one's (an hour apart) is
 * skipped. */
static void skip_far_traces(struct input *ins, int n, struct notes *ns)
{
    int64_t ref_t = INT64_MIN;
    for (int i = 0; i < n; i++) {
        struct input *in = &ins[i];
        if (!in->ok || in->f.t_min > in->f.t_max)
            continue;
        int64_t t = in->f.t_min + in->f.base_ns;
        if (ref_t == INT64_MIN) {
            ref_t = t;
        } else if (llabs(t - ref_t) > 3600ll * 1000000000ll) {
            note(ns,
                 "%s: starts %.0f s away from the first trace: not the same run; file "
                 "skipped",
                 in->file, (double)llabs(t - ref_t) / 1e9);
            in->ok = 0;
            cs__kfile_free(&in->f);
        }
    }
}

/* The ranks of the world without a usable input, as ranges, in one note. */
static void note_missing_ranks(const struct input *ins, int n, int world, struct notes *ns)
{
    char miss[512] = "";
    size_t len = 0;
    int nmiss = 0;
    for (int r = 0; r < world; r++) {
        int have = 0;
        for (int i = 0; i < n && !have; i++)
            have = ins[i].ok && ins[i].rank == r;
        if (have)
            continue;
        int e = r;
        while (e + 1 < world) {
            int h2 = 0;
            for (int i = 0; i < n && !h2; i++)
                h2 = ins[i].ok && ins[i].rank == e + 1;
            if (h2)
                break;
            e++;
        }
        nmiss += e - r + 1;
        if (len < sizeof miss - 40)
            len += (size_t)snprintf(miss + len, sizeof miss - len, e > r ? "%s%d-%d" : "%s%d",
                                    len ? ", " : "", r, e);
        r = e;
    }
    if (nmiss)
        note(ns,
             "%d of %d ranks have no usable trace among the inputs (ranks %s): their "
             "collectives are incomplete",
             nmiss, world, miss);
}

/* Times on one scale: ts + baseTimeNanoseconds, which must land in the trace format's range
 * [0, 2^62) (both are within 2^61 of zero: the sums cannot overflow); records outside it are
 * skipped and counted. */
static void shift_times(struct input *in, struct notes *ns)
{
    struct cs__kfile *kf = &in->f;
    uint64_t out_of_range = 0;
#define CS__KSHIFT(vec, DUR)                                                                       \
    do {                                                                                           \
        size_t keep_ = 0;                                                                          \
        for (size_t k = 0; k < (vec).n; k++) {                                                     \
            int64_t t_ = (vec).v[k].ts + kf->base_ns;                                              \
            if (t_ < 0 || t_ + (DUR) >= (int64_t)CS_TIME_LIMIT) {                                  \
                out_of_range++;                                                                    \
                continue;                                                                          \
            }                                                                                      \
            (vec).v[keep_] = (vec).v[k];                                                           \
            (vec).v[keep_++].ts = t_;                                                              \
        }                                                                                          \
        (vec).n = keep_;                                                                           \
    } while (0)
    CS__KSHIFT(kf->kernels, kf->kernels.v[k].dur);
    CS__KSHIFT(kf->launches, kf->launches.v[k].dur);
    CS__KSHIFT(kf->comms, kf->comms.v[k].dur);
    CS__KSHIFT(kf->steps, kf->steps.v[k].dur);
    CS__KSHIFT(kf->flows, 0);
    CS__KSHIFT(kf->gloo, kf->gloo.v[k].dur);
    CS__KSHIFT(kf->marks, kf->marks.v[k].dur);
#undef CS__KSHIFT
    if (out_of_range)
        note(ns,
             "%s: %" PRIu64 " records skipped whose time with baseTimeNanoseconds lies "
             "before 0 or beyond 2^62 ns",
             in->file, out_of_range);
    kf->t_min += kf->base_ns;
    kf->t_max += kf->base_ns;
    if (kf->t_min <= kf->t_max && (kf->t_min < 0 || kf->t_max >= (int64_t)CS_TIME_LIMIT)) {
        /* The span came from events out of range too: take it from the records kept. */
        kf->t_min = INT64_MAX;
        kf->t_max = INT64_MIN;
#define CS__KSPAN(vec, DUR)                                                                        \
    for (size_t k = 0; k < (vec).n; k++) {                                                         \
        if (kf->t_min > (vec).v[k].ts)                                                             \
            kf->t_min = (vec).v[k].ts;                                                             \
        if (kf->t_max < (vec).v[k].ts + (DUR))                                                     \
            kf->t_max = (vec).v[k].ts + (DUR);                                                     \
    }
        CS__KSPAN(kf->kernels, kf->kernels.v[k].dur)
        CS__KSPAN(kf->launches, kf->launches.v[k].dur)
        CS__KSPAN(kf->comms, kf->comms.v[k].dur)
        CS__KSPAN(kf->steps, kf->steps.v[k].dur)
        CS__KSPAN(kf->flows, 0)
        CS__KSPAN(kf->gloo, kf->gloo.v[k].dur)
        CS__KSPAN(kf->marks, kf->marks.v[k].dur)
#undef CS__KSPAN
    }
}

int cs_analysis_import_kineto(struct cs_analysis **out, const char *const *paths, int npaths,
                              const struct cs_analysis_opts *opts, char *err, size_t errlen)
{
    *out = NULL;
    char **files = NULL;
    int n = collect(paths, npaths, &files, err, errlen);
    if (n < 0)
        return CS_ENOENT;
    struct input *ins = calloc((size_t)n + 1, sizeof *ins);
    struct notes ns = {0};
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/commscope-kineto-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!ins || !mkdtemp(dir)) {
        snprintf(err, errlen, "cannot create a temporary directory %s: %s", dir, strerror(errno));
        for (int i = 0; i < n; i++)
            free(files[i]);
        free(files);
        free(ins);
        return CS_EIO;
    }
    uint64_t run_id = fnv(paths[0], strlen(paths[0]), 1469598103934665603ull);

    /* Pass 1: parse every file for its identity (rank, world, time span).  Its records are kept
     * for pass 2 while all files' records together stay under KEEP_BYTES; beyond that a file's
     * records are dropped and it is parsed again in pass 2, so memory stays at one file's. */
    int world = -1, with_dist = 0, nok = 0;
    size_t kept = 0;
    char perr[1024];
    for (int i = 0; i < n; i++) {
        ins[i].path = files[i];
        snprintf(ins[i].file, sizeof ins[i].file, "%s", base(files[i]));
        ins[i].rr.first_step = -1;
        snprintf(ins[i].rr.file, sizeof ins[i].rr.file, "%s", base(files[i]));
        int rc = cs__kineto_parse(files[i], &ins[i].f, perr, sizeof perr);
        if (rc) {
            note(&ns, "%s; file skipped", perr);
            continue;
        }
        ins[i].ok = 1;
        nok++;
        kept += kfile_bytes(&ins[i].f);
        if (kept > KEEP_BYTES)
            drop_records(&ins[i]);
        if ((ins[i].f.has_dist & 3) == 3 && ins[i].f.rank >= 0 && ins[i].f.world > 0 &&
            ins[i].f.rank < ins[i].f.world) {
            with_dist++;
            if (world < 0)
                world = ins[i].f.world;
        }
    }
    world = assign_ranks(ins, n, with_dist, world, &ns);
    skip_far_traces(ins, n, &ns);
    note_missing_ranks(ins, n, world, &ns);
    /* Pass 2: convert */
    nok = 0;
    for (int i = 0; i < n; i++) {
        struct input *in = &ins[i];
        if (!in->ok)
            continue;
        in->world = world;
        if (in->reparse) {
            int prc = cs__kineto_parse(in->path, &in->f, perr, sizeof perr);
            if (prc) {
                note(&ns, "%s; file skipped", perr);
                in->ok = 0;
                continue;
            }
        }
        shift_times(in, &ns);
        if (convert(in, dir, run_id, &ns)) {
            in->ok = 0;
        } else {
            nok++;
        }
    }
    struct cs_report_kineto *K = calloc(1, sizeof *K);
    int64_t *off = calloc((size_t)n + 1, sizeof *off);
    double *unc = calloc((size_t)n + 1, sizeof *unc);
    uint64_t *used = calloc((size_t)n + 1, sizeof *used);
    int *known = calloc((size_t)n + 1, sizeof *known);
    if (K)
        K->ranks = calloc((size_t)n + 1, sizeof *K->ranks);
    int rc = 0;
    if (!K || !K->ranks || !off || !unc || !used || !known) {
        snprintf(err, errlen, "out of memory importing the Kineto traces");
        rc = CS_ENOMEM;
        goto done;
    }
    double residual = NAN;
    align(ins, n, off, unc, used, known, &residual);
    K->max_residual_s = residual / 1e9;
    for (int i = 0; i < n; i++) {
        struct input *in = &ins[i];
        if (!in->ok)
            continue;
        in->rr.rank = in->rank;
        in->rr.offset_s = known[i] ? (double)off[i] / 1e9 : NAN;
        in->rr.uncertainty_s = known[i] && used[i] ? unc[i] / 1e9 : known[i] ? 0 : NAN;
        in->rr.aligned_on = used[i];
        if (!known[i])
            note(&ns,
                 "%s: rank %d shares no collective instance that all its members' traces "
                 "hold; its clock is not corrected",
                 in->file, in->rank);
        if (fabs(in->rr.offset_s) > K->max_correction_s)
            K->max_correction_s = fabs(in->rr.offset_s);
        if (isfinite(in->rr.uncertainty_s) && in->rr.uncertainty_s > K->max_uncertainty_s)
            K->max_uncertainty_s = in->rr.uncertainty_s;
        if (patch_clock(dir, in, off[i], unc[i], used[i])) {
            note(&ns, "%s: cannot write the clock correction into the converted trace", in->file);
        }
        K->ranks[K->nranks++] = in->rr;
        for (size_t c = 0; c < in->f.cands.n; c++) {
            const struct cs__kcand *cd = &in->f.cands.v[c];
            size_t j = 0;
            while (j < K->ncand && strcmp(K->cand[j].name, cd->name))
                j++;
            if (j == K->ncand) {
                void *p = realloc(K->cand, (K->ncand + 1) * sizeof *K->cand);
                if (!p)
                    continue;
                K->cand = p;
                K->cand[K->ncand++] = (struct cs_report_kineto_candidate){0};
                snprintf(K->cand[j].name, sizeof K->cand[j].name, "%s", cd->name);
            }
            K->cand[j].count += cd->count;
            K->cand[j].time_s += (double)cd->ns / 1e9;
        }
    }
    int legacy = 0;
    for (size_t i = 0; i < K->nranks; i++)
        legacy |= K->ranks[i].legacy;
    snprintf(K->clock_note, sizeof K->clock_note,
             "%s; corrections from the end times of collective instances (median over "
             "instances, uncertainty = half their spread)",
             legacy ? "times of pre-Kineto traces count from each process's profiler start, "
                      "Kineto's are each host's wall clock"
                    : "Kineto times are each host's wall clock");
    if (!nok) {
        size_t len = (size_t)snprintf(err, errlen, "no usable Kineto trace among the inputs");
        for (size_t i = 0; i < ns.n && len < errlen; i++)
            len += (size_t)snprintf(err + len, errlen - len, "\n  %s", ns.v[i]);
        rc = CS_EFORMAT;
        goto done;
    }

    /* the pipeline on the converted run, through the public API.  Step markers of an import are
     * its ProfilerStep#N ranges (converted to MPI_Pcontrol). */
    rc = cs_analysis_open(out, dir, opts, err, errlen);
    if (!*out) {
        rc = CS_ENOMEM;
        goto done;
    }
    cs_analysis_set_origin(*out, "kineto", paths[0],
                           "ProfilerStep#N ranges of the PyTorch profiler");
    for (size_t i = 0; i < K->ncand; i++)
        note(&ns,
             "%" PRIu64 " kernels named '%s' look like communication but are not NCCL's: "
             "reported apart, counted neither as compute nor as communication",
             K->cand[i].count, K->cand[i].name);
    for (size_t i = 0; i < ns.n; i++) {
        char *sentence = malloc(strlen(ns.v[i]) + sizeof "kineto: ");
        if (sentence) {
            sprintf(sentence, "kineto: %s", ns.v[i]);
            cs_analysis_add_problem(*out, sentence);
        }
        free(sentence);
    }
    for (size_t i = 0; i < K->nranks; i++)
        if (K->ranks[i].gpu[0])
            cs_analysis_set_gpu(*out, K->ranks[i].rank, K->ranks[i].gpu);
    if (!rc)
        rc = cs_analysis_run(*out);
    cs_analysis_attach_kineto(*out, K);
    K = NULL;
done:
    rm_dir(dir, ins, n);
    for (int i = 0; i < n; i++) {
        cs__kfile_free(&ins[i].f);
        free(ins[i].ends);
        free(files[i]);
    }
    for (size_t i = 0; i < ns.n; i++)
        free(ns.v[i]);
    free(ns.v);
    free(files);
    free(ins);
    if (K) {
        free(K->ranks);
        free(K->cand);
        free(K);
    }
    free(off);
    free(unc);
    free(used);
    free(known);
    return rc;
}

void cs__kineto_report_free(struct cs_report *rep)
{
    if (!rep->kineto)
        return;
    free(rep->kineto->ranks);
    free(rep->kineto->cand);
    free(rep->kineto);
    rep->kineto = NULL;
}
