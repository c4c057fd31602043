/*
 * The request map: MPI_Request handle value -> what its completion record needs.
 *
 * Open addressing with linear probing over a fixed table; every field is accessed atomically so
 * any number of threads may initiate and complete requests at once (MPI_THREAD_MULTIPLE).
 *
 * A slot's key, once set, normally stays: Open MPI hands request objects out from free lists, so
 * the same handle values come back again and again and find their old slot.  A slot's id says
 * what it holds: 0 = nothing (a tombstone), CLAIMED = being written, else the live request id.
 * Because keys are never cleared, the probe sequence of a key always reaches its slot before an
 * empty one, so a handle has at most one slot reached by the first pass.  Only when a key finds
 * neither its own slot nor an empty one within the probe window does the second pass recycle a
 * tombstone of another key.
 *
 * Completion of a request frees its handle inside MPI; another thread may get the same handle for
 * a new request before the completing thread has removed the old entry.  The new initiation then
 * overwrites the entry, and the late removal does nothing because it only clears the slot if it
 * still holds the id it read before the completion call.
 */
#include <stdint.h>

#include "internal.h"

#define SLOTS_LOG2 15
#define SLOTS (1u << SLOTS_LOG2)
#define PROBE 256u
#define CLAIMED UINT64_MAX

struct slot {
    uint64_t key; /* handle value; 0 never used */
    uint64_t id;  /* 0 free, CLAIMED being written, else live request id */
    uint64_t comm;
    uint64_t handle;
    uint32_t seq;
    int32_t peer;
    uint16_t op;
    uint16_t recv;
    int32_t tag;
};

static struct slot table[SLOTS];
static uint64_t next_id;
static int full_warned;

static inline uint32_t hash(uint64_t k)
{
    k ^= k >> 29;
    k *= 0x9e3779b97f4a7c15ull;
    return (uint32_t)(k >> (64 - SLOTS_LOG2));
}

uint64_t cs__req_next_id(void)
{
    return __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
}

void cs__req_reset(void)
{
    __atomic_store_n(&next_id, 0, __ATOMIC_RELAXED);
}

static void fill(struct slot *s, uint64_t key, const struct cs__req *r)
{
    __atomic_store_n(&s->key, key, __ATOMIC_RELAXED);
    __atomic_store_n(&s->comm, r->comm, __ATOMIC_RELAXED);
    __atomic_store_n(&s->handle, (uint64_t)(uintptr_t)r->handle, __ATOMIC_RELAXED);
    __atomic_store_n(&s->seq, r->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&s->peer, r->peer, __ATOMIC_RELAXED);
    __atomic_store_n(&s->op, r->op, __ATOMIC_RELAXED);
    __atomic_store_n(&s->recv, r->recv, __ATOMIC_RELAXED);
    __atomic_store_n(&s->tag, r->tag, __ATOMIC_RELAXED);
    /* Publishing the id last makes the fields above visible to whoever acquires it. */
    __atomic_store_n(&s->id, r->id, __ATOMIC_RELEASE);
}

int cs__req_add(MPI_Request h, const struct cs__req *r)
{
    uint64_t k = (uint64_t)(uintptr_t)h;
    uint32_t h0 = hash(k);
retry:
    for (uint32_t p = 0; p < PROBE; p++) {
        struct slot *s = &table[(h0 + p) & (SLOTS - 1)];
        uint64_t key = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
        if (key == 0) {
            uint64_t zero = 0;
            if (!__atomic_compare_exchange_n(&s->key, &zero, k, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE))
                key = zero;
            else
                key = k;
        }
        if (key != k)
            continue;
        uint64_t old = __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
        if (old == CLAIMED || !__atomic_compare_exchange_n(&s->id, &old, CLAIMED, 0,
                                                           __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            goto retry; /* a recycler is taking this slot for another key; look again */
        if (__atomic_load_n(&s->key, __ATOMIC_ACQUIRE) != k) {
            /* Recycled for another key between our key read and our claim: give it back. */
            __atomic_store_n(&s->id, old, __ATOMIC_RELEASE);
            goto retry;
        }
        fill(s, k, r);
        return 0;
    }
    /* Second pass: recycle a tombstone of some other key. */
    for (uint32_t p = 0; p < PROBE; p++) {
        struct slot *s = &table[(h0 + p) & (SLOTS - 1)];
        uint64_t zero = 0;
        if (__atomic_compare_exchange_n(&s->id, &zero, CLAIMED, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            fill(s, k, r);
            return 0;
        }
    }
    if (!__atomic_exchange_n(&full_warned, 1, __ATOMIC_RELAXED))
        cs_warn("request map full: some completions will not be linked to their requests");
    return -1;
}

uint32_t cs__req_get(MPI_Request h, struct cs__req *out)
{
    uint64_t k = (uint64_t)(uintptr_t)h;
    uint32_t h0 = hash(k);
    for (uint32_t p = 0; p < PROBE; p++) {
        uint32_t i = (h0 + p) & (SLOTS - 1);
        struct slot *s = &table[i];
        uint64_t key = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
        if (key == 0)
            return 0;
        if (key != k)
            continue;
        uint64_t id = __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
        if (id == 0 || id == CLAIMED)
            continue; /* a tombstone; a live entry may have been placed further on */
        out->id = id;
        out->comm = __atomic_load_n(&s->comm, __ATOMIC_RELAXED);
        out->handle = (MPI_Comm)(uintptr_t)__atomic_load_n(&s->handle, __ATOMIC_RELAXED);
        out->seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
        out->peer = __atomic_load_n(&s->peer, __ATOMIC_RELAXED);
        out->op = __atomic_load_n(&s->op, __ATOMIC_RELAXED);
        out->recv = __atomic_load_n(&s->recv, __ATOMIC_RELAXED);
        out->tag = __atomic_load_n(&s->tag, __ATOMIC_RELAXED);
        return i + 1;
    }
    return 0;
}

void cs__req_done(uint32_t slot, uint64_t id)
{
    if (slot == 0 || slot > SLOTS)
        return;
    uint64_t expect = id;
    __atomic_compare_exchange_n(&table[slot - 1].id, &expect, 0, 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_RELAXED);
}
