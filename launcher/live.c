/*
 * Live metrics of `commscope run --metrics FILE`: what the ranks' progress reports carry (their
 * totals and the blocking collectives they completed, include/commscope/root.h) turned into
 * cross-rank figures while the job runs — the waiting at each collective instance, and who
 * caused it — and written as a Prometheus text exposition (docs/metrics.md, "Live metrics").
 *
 * A collective instance (communicator, sequence number) gathers its members' records as their
 * reports arrive; once it is older than the settling time (three report intervals: every member
 * has reported since it completed), it is judged and dropped.  Everything here runs under the
 * root service's lock.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commscope/ops.h"
#include "commscope/root.h"
#include "commscope/trace.h"
#include "internal.h"

/* Instances waiting to be judged at most (a bigger backlog drops the newest, counted). */
#define PENDING_MAX (1u << 20)

struct ent {
    int32_t rank;
    uint64_t enter, exit, bytes;
};

struct inst {
    uint64_t comm;
    uint32_t seq;
    uint16_t op;
    double first_s; /* when its first record arrived */
    struct ent *e;
    size_t n, cap;
};

struct bw {
    uint64_t comm;
    uint16_t op;
    double bytes_f; /* sum of bytes x the nccl-tests factor, this window */
    double dur_s;   /* sum of the instances' times after their last arrival, this window */
    double gbps;    /* the last window's value (NAN: none yet) */
};

struct cs__live {
    struct inst *in;
    size_t nin, capin;
    int64_t *slot; /* hash (comm, seq) -> index into in, -1 empty; capslot a power of two */
    size_t capslot;
    double *wait_s, *caused_s; /* per rank */
    int32_t nrank;
    struct bw *bw;
    size_t nbw, capbw;
    uint64_t dropped_instances, judged;
};

struct cs__live *cs__live_new(void)
{
    return calloc(1, sizeof(struct cs__live));
}

void cs__live_free(struct cs__live *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->nin; i++)
        free(l->in[i].e);
    free(l->in);
    free(l->slot);
    free(l->wait_s);
    free(l->caused_s);
    free(l->bw);
    free(l);
}

/* Room for one more of n elements of size elem in *p (capacity *cap, doubled from first).
 * 0, or -1 out of memory (nothing changed). */
static int room(void **p, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? 2 * *cap : first;
    void *q = realloc(*p, c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

static size_t hash(uint64_t comm, uint32_t seq)
{
    uint64_t h = comm * 0x9E3779B97F4A7C15ull ^ ((uint64_t)seq * 0xD1B54A32D192ED03ull);
    return (size_t)(h ^ (h >> 29));
}

/* Rebuild the hash over in[] with room for twice its size. */
static int rehash(struct cs__live *l)
{
    size_t cap = 64;
    while (cap < 2 * (l->nin + 1))
        cap *= 2;
    int64_t *s = malloc(cap * sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < cap; i++)
        s[i] = -1;
    for (size_t i = 0; i < l->nin; i++) {
        size_t k = hash(l->in[i].comm, l->in[i].seq) & (cap - 1);
        while (s[k] >= 0)
            k = (k + 1) & (cap - 1);
        s[k] = (int64_t)i;
    }
    free(l->slot);
    l->slot = s;
    l->capslot = cap;
    return 0;
}

static struct inst *find_or_add(struct cs__live *l, const struct cs_root_coll *c, double now)
{
    if (l->capslot < 2 * (l->nin + 1) && rehash(l) != 0)
        return NULL;
    size_t k = hash(c->comm, c->seq) & (l->capslot - 1);
    for (; l->slot[k] >= 0; k = (k + 1) & (l->capslot - 1)) {
        struct inst *x = &l->in[l->slot[k]];
        if (x->comm == c->comm && x->seq == c->seq)
            return x;
    }
    if (l->nin >= PENDING_MAX || room((void **)&l->in, &l->capin, l->nin, sizeof *l->in, 256) != 0)
        return NULL;
    l->slot[k] = (int64_t)l->nin;
    struct inst *x = &l->in[l->nin++];
    *x = (struct inst){.comm = c->comm, .seq = c->seq, .op = c->op, .first_s = now};
    return x;
}

static int grow_ranks(struct cs__live *l, int32_t rank)
{
    if (rank < l->nrank)
        return 0;
    int32_t n = rank + 1 > 2 * l->nrank ? rank + 1 : 2 * l->nrank;
    double *w = realloc(l->wait_s, (size_t)n * sizeof *w);
    if (!w)
        return -1;
    l->wait_s = w;
    double *c = realloc(l->caused_s, (size_t)n * sizeof *c);
    if (!c)
        return -1;
    l->caused_s = c;
    for (int32_t i = l->nrank; i < n; i++)
        l->wait_s[i] = l->caused_s[i] = 0;
    l->nrank = n;
    return 0;
}

void cs__live_colls(struct cs__live *l, int32_t rank, const struct cs_root_coll *c, uint32_t n,
                    double now)
{
    if (grow_ranks(l, rank) != 0) {
        l->dropped_instances += n;
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct cs_op_info *in = cs_op_info(c[i].op);
        if (!in || in->kind != CS_KIND_COLL || c[i].t_exit < c[i].t_enter)
            continue;
        struct inst *x = find_or_add(l, &c[i], now);
        if (!x || room((void **)&x->e, &x->cap, x->n, sizeof *x->e, 8) != 0) {
            l->dropped_instances++;
            continue;
        }
        x->e[x->n++] = (struct ent){rank, c[i].t_enter, c[i].t_exit, c[i].bytes};
    }
}

static struct bw *bw_of(struct cs__live *l, uint64_t comm, uint16_t op)
{
    for (size_t i = 0; i < l->nbw; i++)
        if (l->bw[i].comm == comm && l->bw[i].op == op)
            return &l->bw[i];
    if (room((void **)&l->bw, &l->capbw, l->nbw, sizeof *l->bw, 16) != 0)
        return NULL;
    l->bw[l->nbw] = (struct bw){.comm = comm, .op = op, .gbps = NAN};
    return &l->bw[l->nbw++];
}

/* Judge one instance: who waited how long for the last arrival (everybody-waits-for-the-last
 * collectives), and its bus bandwidth. */
static void judge(struct cs__live *l, const struct inst *x)
{
    const struct cs_op_info *in = cs_op_info(x->op);
    if (x->n < 2 || !in)
        return;
    uint32_t last = 0;
    uint64_t exit_max = 0, bytes = 0;
    for (uint32_t i = 0; i < x->n; i++) {
        if (x->e[i].enter > x->e[last].enter)
            last = i;
        if (x->e[i].exit > exit_max)
            exit_max = x->e[i].exit;
        if (x->e[i].bytes > bytes)
            bytes = x->e[i].bytes;
    }
    uint64_t t_last = x->e[last].enter;
    if (in->pattern == CS_PAT_NXN)
        for (uint32_t i = 0; i < x->n; i++) {
            uint64_t w = t_last - x->e[i].enter, d = x->e[i].exit - x->e[i].enter;
            double ws = 1e-9 * (double)(w < d ? w : d);
            l->wait_s[x->e[i].rank] += ws;
            l->caused_s[x->e[last].rank] += ws;
        }
    double f = cs_op_busbw_factor(x->op, (int)x->n);
    if (f > 0 && bytes && exit_max > t_last) {
        struct bw *b = bw_of(l, x->comm, x->op);
        if (b) {
            b->bytes_f += (double)bytes * f;
            b->dur_s += 1e-9 * (double)(exit_max - t_last);
        }
    }
    l->judged++;
}

void cs__live_settle(struct cs__live *l, double now, double settle_s)
{
    size_t k = 0;
    for (size_t i = 0; i < l->nin; i++) {
        struct inst *x = &l->in[i];
        if (now - x->first_s >= settle_s) {
            judge(l, x);
            free(x->e);
            continue;
        }
        l->in[k++] = *x;
    }
    if (k != l->nin) {
        l->nin = k;
        rehash(l);
    }
    for (size_t i = 0; i < l->nbw; i++) {
        struct bw *b = &l->bw[i];
        if (b->dur_s > 0)
            b->gbps = b->bytes_f / b->dur_s / 1e9;
        b->bytes_f = b->dur_s = 0;
    }
}

double cs__live_wait_s(const struct cs__live *l, int32_t rank)
{
    return rank < l->nrank ? l->wait_s[rank] : 0;
}

double cs__live_caused_s(const struct cs__live *l, int32_t rank)
{
    return rank < l->nrank ? l->caused_s[rank] : 0;
}

void cs__live_write_busbw(const struct cs__live *l, FILE *f, const char *job)
{
    for (size_t i = 0; i < l->nbw; i++) {
        const struct bw *b = &l->bw[i];
        if (isnan(b->gbps))
            continue;
        char comm[40];
        cs_comm_label(b->comm, comm, sizeof comm);
        fprintf(f, "commscope_busbw_gbytes_per_second{%scomm=\"%s\",op=\"%s\"} %.9g\n", job, comm,
                cs_op_name(b->op), b->gbps);
    }
}

uint64_t cs__live_dropped(const struct cs__live *l)
{
    return l->dropped_instances;
}
