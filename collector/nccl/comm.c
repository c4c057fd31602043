/*
 * NCCL communicators: a lock-free table from handle to what the hot path needs, the global ids
 * every member agrees on, the communicator records, element sizes and the common event tail.
 *
 * Ids live in their own half of the id space (bit 63 set; MPI ids stay below 2^63):
 *   from unique ids   FNV-1a over the ncclUniqueId bytes (all of them for InitRankScalable) and
 *                     nranks: every member was handed the same unique id
 *   children          mix(parent id, index of the child among the parent's splits/shrinks, color,
 *                     kind): every member of the parent calls ncclCommSplit/Shrink collectively
 *                     and in the same order, and the members of one child share its color.  The
 *                     key differs between members, so it is recorded but not part of the id.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../core/front.h"
#include "../cuda/gpu.h"
#include "internal.h"

#define SLOTS 4096u /* communicators a process can hold; more are recorded with id 0 */
#define NCCL_ID_BIT (1ull << 63)

static struct cs__ncomm table[SLOTS];
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t slot_of(ncclComm_t h)
{
    uint64_t x = (uint64_t)(uintptr_t)h;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 29;
    return (size_t)x & (SLOTS - 1);
}

static struct cs__ncomm *find(ncclComm_t h)
{
    size_t j = slot_of(h);
    for (size_t k = 0; k < SLOTS; k++, j = (j + 1) & (SLOTS - 1)) {
        ncclComm_t e = __atomic_load_n(&table[j].h, __ATOMIC_ACQUIRE);
        if (e == h)
            return &table[j];
        if (!e)
            return NULL;
    }
    return NULL;
}

/* The slot for h, claimed when absent (under table_mu).  NULL when the table is full. */
static struct cs__ncomm *claim(ncclComm_t h, int *fresh)
{
    size_t j = slot_of(h);
    for (size_t k = 0; k < SLOTS; k++, j = (j + 1) & (SLOTS - 1)) {
        if (table[j].h == h) {
            *fresh = 0;
            return &table[j];
        }
        if (!table[j].h) {
            *fresh = 1;
            return &table[j];
        }
    }
    return NULL;
}

static void fill_unknown(struct cs__ncomm *c, ncclComm_t h)
{
    int n = -1, r = -1, d = -1;
    if (cs__nreal.CommCount && cs__nreal.CommCount(h, &n) != ncclSuccess)
        n = -1;
    if (cs__nreal.CommUserRank && cs__nreal.CommUserRank(h, &r) != ncclSuccess)
        r = -1;
    if (cs__nreal.CommCuDevice && cs__nreal.CommCuDevice(h, &d) != ncclSuccess)
        d = -1;
    c->size = n;
    c->rank = r;
    c->dev = d;
}

struct cs__ncomm *cs__ncomm_get(ncclComm_t h)
{
    if (!h)
        return NULL;
    struct cs__ncomm *c = find(h);
    if (CS_LIKELY(c != NULL)) {
        if (CS_UNLIKELY(c->need_record))
            cs__ncomm_record(c);
        return c;
    }
    /* A communicator made before tracing started, or by a call not intercepted. */
    static int full_warned;
    pthread_mutex_lock(&table_mu);
    int fresh = 0;
    c = claim(h, &fresh);
    if (c && fresh) {
        struct cs__ncomm tmp = {0};
        fill_unknown(&tmp, h);
        c->id = 0;
        c->size = tmp.size;
        c->rank = tmp.rank;
        c->dev = tmp.dev;
        c->seq = 0;
        c->children = 0;
        __atomic_store_n(&c->h, h, __ATOMIC_RELEASE);
    } else if (!c && !full_warned) {
        full_warned = 1;
        cs_warn("more than %u NCCL communicators: later ones are recorded without an id", SLOTS);
    }
    pthread_mutex_unlock(&table_mu);
    return c;
}

struct cs__ncomm *cs__ncomm_add(ncclComm_t h, uint64_t id, int size, int rank, uint64_t parent,
                                uint16_t op, int color, int key)
{
    if (!h)
        return NULL;
    pthread_mutex_lock(&table_mu);
    int fresh = 0;
    struct cs__ncomm *c = claim(h, &fresh);
    if (c) {
        /* A reused address: the old communicator was destroyed.  Readers of the old entry only
         * see consistent fields of one or the other. */
        struct cs__ncomm tmp = {0};
        fill_unknown(&tmp, h);
        c->id = id;
        c->size = size > 0 ? size : tmp.size;
        c->rank = rank >= 0 ? rank : tmp.rank;
        c->dev = tmp.dev;
        __atomic_store_n(&c->seq, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&c->children, 0, __ATOMIC_RELAXED);
        c->async_reported = 0;
        c->parent = parent;
        c->op = op;
        c->color = color;
        c->key = key;
        c->need_record = 1;
        __atomic_store_n(&c->h, h, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&table_mu);
    if (c)
        cs__ncomm_record(c);
    return c;
}

void cs__ncomm_record(struct cs__ncomm *c)
{
    static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
    if (!c->id)
        return;
    pthread_mutex_lock(&rec_mu);
    if (!c->need_record) {
        pthread_mutex_unlock(&rec_mu);
        return;
    }
    if (c->size <= 0 || c->rank < 0) {
        /* A non-blocking communicator still initialising: try again at its next use. */
        struct cs__ncomm tmp = {0};
        fill_unknown(&tmp, c->h);
        if (tmp.size <= 0 || tmp.rank < 0 || tmp.rank >= tmp.size) {
            pthread_mutex_unlock(&rec_mu);
            return;
        }
        c->size = tmp.size;
        c->rank = tmp.rank;
        c->dev = tmp.dev;
    }
    const struct cs_file_header *h = cs_trace_header();
    if (!h || c->size > (1 << 24) || c->rank >= c->size) {
        c->need_record = 0;
        pthread_mutex_unlock(&rec_mu);
        return;
    }
    size_t members = ((sizeof(struct cs_comm_record) + (size_t)c->size * 4 + 7) & ~(size_t)7);
    size_t bytes = members + sizeof(struct cs_comm_gpu);
    struct cs_comm_record *rec = malloc(bytes);
    if (rec) {
        memset(rec, 0, bytes);
        rec->record_bytes = (uint32_t)bytes;
        rec->kind = CS_COMM_NCCL;
        rec->op = c->op;
        rec->id = c->id;
        rec->parent = c->parent;
        rec->t_created = cs_now();
        rec->size = c->size;
        rec->my_rank = c->rank;
        rec->color = c->color;
        rec->key = c->key;
        for (int32_t i = 0; i < c->size; i++)
            rec->members[i] = -1;
        rec->members[c->rank] = h->rank;
        struct cs_comm_gpu *g = (struct cs_comm_gpu *)((char *)rec + members);
        g->cuda_dev = c->dev;
        /* ncclCommInitAll: every member is in this process. */
        g->flags = c->op == CS_OP_NCCL_COMM_INIT_ALL ? CS_COMM_GPU_MULTI : 0;
        cs__gpu_bus_id(c->dev, g->bus_id, sizeof g->bus_id);
        cs_trace_add_comm(rec);
        free(rec);
    }
    c->need_record = 0;
    pthread_mutex_unlock(&rec_mu);
}

uint64_t cs__ncomm_id_from_unique(const ncclUniqueId *ids, int n, int nranks)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; ids && i < n; i++)
        for (size_t k = 0; k < sizeof ids[i].internal; k++) {
            h ^= (unsigned char)ids[i].internal[k];
            h *= 0x100000001b3ull;
        }
    for (int k = 0; k < 4; k++) {
        h ^= (uint64_t)(((unsigned)nranks >> (8 * k)) & 0xff);
        h *= 0x100000001b3ull;
    }
    return h | NCCL_ID_BIT;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint64_t cs__ncomm_id_child(uint64_t parent, uint32_t idx, int color, int kind)
{
    uint64_t h = mix(parent ^ 0x9e3779b97f4a7c15ull);
    h = mix(h ^ ((uint64_t)idx << 32 | (uint32_t)color));
    h = mix(h ^ (uint64_t)(uint32_t)kind);
    return h | NCCL_ID_BIT;
}

uint64_t cs__ncomm_id_initall(int world_rank, uint32_t idx, int ndev)
{
    /* Only this process holds members, so the id must only differ from every other in the run:
     * the world rank and this process's count of ncclCommInitAll calls make it so. */
    uint64_t h = mix(0x496e6974416c6cull ^ (uint64_t)(uint32_t)world_rank << 20);
    h = mix(h ^ ((uint64_t)idx << 32 | (uint32_t)ndev));
    return h | NCCL_ID_BIT;
}

/* Element sizes of ncclDataType_t 0 .. ncclNumTypes-1 (NCCL 2.28). */
static const uint8_t type_size[cs__nccl_const_ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

uint64_t cs__nccl_type_size(ncclDataType_t t)
{
    if (CS_LIKELY((unsigned)t < cs__nccl_const_ncclNumTypes))
        return type_size[t];
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
        cs_warn("ncclDataType_t %u is unknown to commscope (it knows NCCL 2.28's %d types): bytes "
                "of calls with it are recorded as 0",
                (unsigned)t, (int)cs__nccl_const_ncclNumTypes);
        cs__trace_gpu_note("NCCL data type %u unknown: its bytes recorded as 0", (unsigned)t);
    }
    return 0;
}

void cs__nccl_event(uint16_t op, uint64_t t0, uint64_t t1, ncclResult_t rc, uint64_t comm,
                    uint32_t seq, uint64_t bytes, uint64_t brecv, uint64_t launch, uint16_t flags,
                    int32_t aux)
{
    cs__nccl_event_at(cs_rec_begin(), op, t0, t1, rc, comm, seq, bytes, brecv, launch, flags, aux);
}

void cs__nccl_event_at(struct cs_event *ev, uint16_t op, uint64_t t0, uint64_t t1, ncclResult_t rc,
                       uint64_t comm, uint32_t seq, uint64_t bytes, uint64_t brecv, uint64_t launch,
                       uint16_t flags, int32_t aux)
{
    if (CS_UNLIKELY(!ev))
        return;
    ev->t_begin = t0;
    ev->t_end = t1;
    ev->comm = comm;
    ev->bytes = bytes;
    ev->bytes_recv = brecv;
    ev->request = launch;
    ev->seq = seq;
    ev->peer = -1;
    ev->op = op;
    ev->flags = flags;
    ev->aux = aux;
    if (rc == ncclInProgress) {
        ev->flags |= CS_EV_IN_PROGRESS;
    } else if (rc != ncclSuccess) {
        ev->flags |= CS_EV_ERROR;
        ev->aux = (int32_t)rc;
    }
    cs_rec_commit(ev);
}
