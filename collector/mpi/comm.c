/*
 * Communicator identity: the handle -> cs__comm table the hot path reads without locks, the id
 * agreement at creation, and the communicator-lifecycle wrappers (hand-written: their signatures
 * share nothing worth a macro).
 *
 * The table is open addressing keyed on the handle value (a pointer in Open MPI).  Keys stay once
 * set, so a handle value that comes back after MPI_Comm_free finds its old slot; a slot's info
 * pointer is NULL while its communicator is freed.  Only when the probe window has no slot for the
 * key and no empty slot is a freed slot of another key recycled.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CSLOTS_LOG2 12
#define CSLOTS (1u << CSLOTS_LOG2)
#define CPROBE 512u
/* Marks a slot being recycled for another key; never dereferenced. */
#define CLAIMED_INFO ((struct cs__comm *)(uintptr_t)1)

struct cslot {
    uint64_t key;
    struct cs__comm *info;
};

static struct cslot ctable[CSLOTS];
static uint32_t created;    /* communicators this rank created as their rank 0 */
static int world_rank = -1; /* this process's rank in MPI_COMM_WORLD */
static int self_member;     /* members[] of MPI_COMM_SELF */
static struct cs__comm self_info;
static int full_warned;

struct cs__comm cs__world;

static inline uint32_t chash(uint64_t k)
{
    k ^= k >> 29;
    k *= 0x9e3779b97f4a7c15ull;
    return (uint32_t)(k >> (64 - CSLOTS_LOG2));
}

struct cs__comm *cs__comm_find(MPI_Comm c)
{
    uint64_t k = (uint64_t)(uintptr_t)c;
    uint32_t h0 = chash(k);
    for (uint32_t p = 0; p < CPROBE; p++) {
        struct cslot *s = &ctable[(h0 + p) & (CSLOTS - 1)];
        uint64_t key = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
        if (key == 0)
            return NULL;
        if (key != k)
            continue;
        struct cs__comm *ci = __atomic_load_n(&s->info, __ATOMIC_ACQUIRE);
        if (ci && ci != CLAIMED_INFO)
            return ci;
    }
    return NULL;
}

/* Map c to ci.  Returns 0, or -1 when the table is full. */
static int comm_insert(MPI_Comm c, struct cs__comm *ci)
{
    uint64_t k = (uint64_t)(uintptr_t)c;
    uint32_t h0 = chash(k);
    for (uint32_t p = 0; p < CPROBE; p++) {
        struct cslot *s = &ctable[(h0 + p) & (CSLOTS - 1)];
        uint64_t key = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
        if (key == 0) {
            uint64_t zero = 0;
            if (__atomic_compare_exchange_n(&s->key, &zero, k, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                key = k;
            else
                key = zero;
        }
        if (key != k)
            continue;
        /* A live handle has no other live mapping, so this slot is ours or a tombstone. */
        struct cs__comm *expect = NULL;
        if (__atomic_compare_exchange_n(&s->info, &expect, ci, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return 0;
    }
    for (uint32_t p = 0; p < CPROBE; p++) {
        struct cslot *s = &ctable[(h0 + p) & (CSLOTS - 1)];
        struct cs__comm *expect = NULL;
        if (__atomic_compare_exchange_n(&s->info, &expect, CLAIMED_INFO, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&s->key, k, __ATOMIC_RELEASE);
            __atomic_store_n(&s->info, ci, __ATOMIC_RELEASE);
            return 0;
        }
    }
    if (!__atomic_exchange_n(&full_warned, 1, __ATOMIC_RELAXED))
        cs_warn("communicator table full: later communicators are traced with comm id 0");
    return -1;
}

/* Unmap c; returns what it was mapped to (NULL if nothing). */
static struct cs__comm *comm_remove(MPI_Comm c)
{
    uint64_t k = (uint64_t)(uintptr_t)c;
    uint32_t h0 = chash(k);
    for (uint32_t p = 0; p < CPROBE; p++) {
        struct cslot *s = &ctable[(h0 + p) & (CSLOTS - 1)];
        uint64_t key = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
        if (key == 0)
            return NULL;
        if (key != k)
            continue;
        struct cs__comm *ci = __atomic_load_n(&s->info, __ATOMIC_ACQUIRE);
        if (ci && ci != CLAIMED_INFO &&
            __atomic_compare_exchange_n(&s->info, &ci, NULL, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return ci;
    }
    return NULL;
}

void cs__comm_unknown(MPI_Comm c, struct cs__comm *tmp)
{
    int inter = 0;
    memset(tmp, 0, sizeof(*tmp));
    tmp->rank = -1;
    if (c == MPI_COMM_NULL)
        return;
    PMPI_Comm_rank(c, &tmp->rank);
    if (PMPI_Comm_test_inter(c, &inter) == MPI_SUCCESS && inter)
        PMPI_Comm_remote_size(c, &tmp->size);
    else
        PMPI_Comm_size(c, &tmp->size);
}

/* Write the communicator record of ci (members as given).  Not hot: allocates. */
static void write_record(const struct cs__comm *ci, const int *members, uint16_t op,
                         uint64_t parent, int color, int key)
{
    size_t bytes = sizeof(struct cs_comm_record) + (size_t)ci->size * sizeof(int32_t);
    bytes = (bytes + 7) & ~(size_t)7;
    struct cs_comm_record *rec = calloc(1, bytes);
    if (!rec) {
        cs_warn("out of memory for the record of communicator %llu", (unsigned long long)ci->id);
        return;
    }
    rec->record_bytes = (uint32_t)bytes;
    rec->kind = CS_COMM_MPI;
    rec->op = op;
    rec->id = ci->id;
    rec->parent = parent;
    rec->t_created = cs_now();
    rec->size = ci->size;
    rec->my_rank = ci->rank;
    rec->color = color;
    rec->key = key;
    for (int i = 0; i < ci->size; i++)
        rec->members[i] = members ? members[i] : i;
    cs_trace_add_comm(rec);
    free(rec);
}

void cs__comm_init(int wrank, int wsize, int write_records)
{
    world_rank = wrank;
    cs__world.id = CS_COMM_WORLD_ID;
    cs__world.size = wsize;
    cs__world.rank = wrank;
    cs__world.ident = 1;
    cs__world.members = NULL;
    __atomic_store_n(&cs__world.seq, 0, __ATOMIC_RELAXED);
    self_member = wrank;
    self_info.id = CS_COMM_SELF_BASE + (uint64_t)wrank;
    self_info.size = 1;
    self_info.rank = 0;
    self_info.members = &self_member;
    __atomic_store_n(&self_info.seq, 0, __ATOMIC_RELAXED);
    comm_insert(MPI_COMM_SELF, &self_info);
    if (write_records) {
        write_record(&cs__world, NULL, 0, 0, 0, 0);
        write_record(&self_info, &self_member, 0, 0, 0, 0);
    }
}

/*
 * Agree on an id for the new intra-communicator nc with its members (PMPI only, collective over
 * nc), record it and map it.  Returns the new info, or NULL (then nc is traced as unknown).
 */
static struct cs__comm *comm_register(MPI_Comm parent, MPI_Comm nc, uint16_t op, int color, int key)
{
    int inter = 0, size = 0, rank = 0;
    if (PMPI_Comm_test_inter(nc, &inter) != MPI_SUCCESS || inter)
        return NULL; /* a Bcast on an inter-communicator means something else */
    if (PMPI_Comm_size(nc, &size) != MPI_SUCCESS || PMPI_Comm_rank(nc, &rank) != MPI_SUCCESS ||
        size <= 0)
        return NULL;
    /* Every member allocates even if one fails, so the collectives below stay matched. */
    struct cs__comm *ci = calloc(1, sizeof(*ci));
    int *members = malloc((size_t)size * sizeof(int));
    int *scratch = members ? members : malloc((size_t)size * sizeof(int));
    uint64_t id = 0;
    if (rank == 0)
        id = ((uint64_t)(world_rank + 1) << 32) | __atomic_fetch_add(&created, 1, __ATOMIC_RELAXED);
    int rc = PMPI_Bcast(&id, 1, MPI_UINT64_T, 0, nc);
    int me = world_rank;
    if (scratch)
        rc |= PMPI_Allgather(&me, 1, MPI_INT, scratch, 1, MPI_INT, nc);
    if (rc != MPI_SUCCESS || !ci || !members) {
        cs_warn("could not agree on an id for a new communicator; it is traced as comm 0");
        free(ci);
        free(scratch);
        return NULL;
    }
    ci->id = id;
    ci->size = size;
    ci->rank = rank;
    ci->members = members;
    struct cs__comm *pi = cs__comm_get(parent);
    write_record(ci, members, op, pi ? pi->id : 0, color, key);
    if (comm_insert(nc, ci) != 0) {
        free(members);
        free(ci);
        return NULL;
    }
    return ci;
}

/* Shared tail of the creation wrappers: register the result and record the call. */
static void comm_created(int rc, uint64_t t0, uint64_t t1, MPI_Comm parent, MPI_Comm *newcomm,
                         uint16_t op, int color, int key)
{
    struct cs__comm *ci = NULL;
    if (rc == MPI_SUCCESS && newcomm && *newcomm != MPI_COMM_NULL)
        ci = comm_register(parent, *newcomm, op, color, key);
    struct cs_event *ev = cs_rec_begin();
    if (!ev)
        return;
    ev->t_begin = t0;
    ev->t_end = t1;
    ev->op = op;
    ev->peer = -1;
    if (rc != MPI_SUCCESS) {
        ev->flags |= CS_EV_ERROR;
        ev->aux = rc;
    } else if (ci) {
        ev->comm = ci->id;
        ev->aux = ci->size;
    } else if (newcomm && *newcomm != MPI_COMM_NULL) {
        struct cs__comm tmp;
        cs__comm_unknown(*newcomm, &tmp);
        ev->aux = tmp.size;
    }
    cs_rec_commit(ev);
}

CS_EXPORT int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    if (!cs_active)
        return PMPI_Comm_dup(comm, newcomm);
    uint64_t t0 = cs_now();
    int rc = PMPI_Comm_dup(comm, newcomm);
    comm_created(rc, t0, cs_now(), comm, newcomm, CS_OP_COMM_DUP, 0, 0);
    return rc;
}

CS_EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    if (!cs_active)
        return PMPI_Comm_split(comm, color, key, newcomm);
    uint64_t t0 = cs_now();
    int rc = PMPI_Comm_split(comm, color, key, newcomm);
    comm_created(rc, t0, cs_now(), comm, newcomm, CS_OP_COMM_SPLIT, color, key);
    return rc;
}

CS_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                                  MPI_Comm *newcomm)
{
    if (!cs_active)
        return PMPI_Comm_split_type(comm, split_type, key, info, newcomm);
    uint64_t t0 = cs_now();
    int rc = PMPI_Comm_split_type(comm, split_type, key, info, newcomm);
    comm_created(rc, t0, cs_now(), comm, newcomm, CS_OP_COMM_SPLIT_TYPE, split_type, key);
    return rc;
}

CS_EXPORT int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    if (!cs_active)
        return PMPI_Comm_create(comm, group, newcomm);
    uint64_t t0 = cs_now();
    int rc = PMPI_Comm_create(comm, group, newcomm);
    comm_created(rc, t0, cs_now(), comm, newcomm, CS_OP_COMM_CREATE, 0, 0);
    return rc;
}

CS_EXPORT int MPI_Comm_free(MPI_Comm *comm)
{
    if (!cs_active || !comm)
        return PMPI_Comm_free(comm);
    MPI_Comm c = *comm;
    /*
     * Unmap before freeing: once PMPI_Comm_free returns, another thread may be handed the same
     * handle value for a new communicator, and a late removal would unmap that one.
     */
    struct cs__comm *ci = (c == MPI_COMM_WORLD || c == MPI_COMM_SELF) ? NULL : comm_remove(c);
    uint64_t t0 = cs_now();
    int rc = PMPI_Comm_free(comm);
    uint64_t t1 = cs_now();
    uint64_t id = ci ? ci->id : 0;
    int size = ci ? ci->size : 0;
    if (rc != MPI_SUCCESS && ci && comm_insert(c, ci) == 0)
        ci = NULL; /* still alive, and mapped again: keep its info */
    struct cs_event *ev = cs_rec_begin();
    if (ev) {
        ev->t_begin = t0;
        ev->t_end = t1;
        ev->op = CS_OP_COMM_FREE;
        ev->peer = -1;
        ev->comm = id;
        ev->aux = size;
        if (rc != MPI_SUCCESS) {
            ev->flags |= CS_EV_ERROR;
            ev->aux = rc;
        }
        cs_rec_commit(ev);
    }
    if (rc == MPI_SUCCESS && ci) {
        /* Using a communicator while freeing it is erroneous, so no reader still holds ci. */
        free((void *)ci->members);
        free(ci);
    }
    return rc;
}
