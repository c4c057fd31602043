/*
 * What the MPI front end's files share (collector/mpi/).  Nothing here is exported: the library
 * is built with hidden visibility, and only the MPI_* wrappers are public (CS_EXPORT).
 */
#ifndef COMMSCOPE_MPI_INTERNAL_H
#define COMMSCOPE_MPI_INTERNAL_H

#include <mpi.h>
#include <stdint.h>

#include "hot.h"

#define CS_LIKELY(x) __builtin_expect(!!(x), 1)
#define CS_UNLIKELY(x) __builtin_expect(!!(x), 0)

/*
 * What the hot path knows about one communicator.  Built once when the communicator is created
 * (or at MPI_Init for world and self) and never changed afterwards except for seq.
 */
struct cs__comm {
    uint64_t id;        /* global id all members agree on; 0 = unknown communicator */
    int size;           /* members (remote group size for an unknown inter-communicator) */
    int rank;           /* this process's rank in it */
    int ident;          /* 1: comm rank == world rank (MPI_COMM_WORLD) */
    const int *members; /* world rank of comm rank i, or NULL (ident, or unknown) */
    uint32_t seq;       /* next collective sequence number (atomic) */
};

/* World and this process's world rank/size, set at MPI_Init (comm.c). */
extern struct cs__comm cs__world;

/* The known communicator for handle c (lock-free), or NULL when c is not known (comm.c). */
struct cs__comm *cs__comm_find(MPI_Comm c);

static inline struct cs__comm *cs__comm_get(MPI_Comm c)
{
    if (CS_LIKELY(c == MPI_COMM_WORLD))
        return &cs__world;
    return cs__comm_find(c);
}

/*
 * Fill *tmp for a communicator the table does not know: id 0, size and rank asked from MPI,
 * members unknown.  Only called after a successful MPI call on c (so c is valid).
 */
void cs__comm_unknown(MPI_Comm c, struct cs__comm *tmp);

/* Register world and self at MPI_Init (comm.c); writes their communicator records. */
void cs__comm_init(int world_rank, int world_size, int write_records);

/* World rank of rank r in ci, or -1; sets CS_EV_PROC_NULL / CS_EV_ANY_SOURCE in *flags. */
static inline int32_t cs__to_world(const struct cs__comm *ci, int r, uint16_t *flags)
{
    if (r == MPI_PROC_NULL) {
        *flags |= CS_EV_PROC_NULL;
        return -1;
    }
    if (r == MPI_ANY_SOURCE) {
        *flags |= CS_EV_ANY_SOURCE;
        return -1;
    }
    if (r < 0 || r >= ci->size)
        return -1;
    if (ci->ident)
        return r;
    return ci->members ? ci->members[r] : -1;
}

/*
 * Non-blocking request tracking (reqmap.c): a lock-free map from MPI_Request handle value to what
 * the completion record needs.  Safe under MPI_THREAD_MULTIPLE.
 */
struct cs__req {
    uint64_t id;     /* request id (per rank, from 1) */
    uint64_t comm;   /* communicator id */
    MPI_Comm handle; /* the communicator, to translate a receive's actual source */
    uint32_t seq;    /* collective sequence number (0 for point-to-point) */
    int32_t peer;    /* world rank of the peer / root, or -1 */
    uint16_t op;     /* op of the initiation */
    uint16_t recv;   /* 1: a receive (source and count come from the status) */
    int32_t tag;     /* point-to-point tag */
};

/* Next request id of this rank (1, 2, ...). */
uint64_t cs__req_next_id(void);
/* Remember request handle h (h != MPI_REQUEST_NULL).  Returns 0, or -1 when the map is full. */
int cs__req_add(MPI_Request h, const struct cs__req *r);
/*
 * Look h up: copies the entry to *out and returns its slot number + 1, or 0 when h is not
 * tracked.  Call it while the handle is still live (before the completion call).
 */
uint32_t cs__req_get(MPI_Request h, struct cs__req *out);
/* Forget the entry in slot (from cs__req_get) if it still holds request id `id`. */
void cs__req_done(uint32_t slot, uint64_t id);

/* Start the request side for a new trace (reqmap.c). */
void cs__req_reset(void);

/*
 * Sizes of the predefined datatypes, asked once at MPI_Init (typesize.c); read-only afterwards.
 * Open addressing, linear probing; a free slot ends a search.
 */
#define CS__TSIZE_SLOTS 128u
struct cs__tsize_entry {
    MPI_Datatype type;
    uint64_t size;
    int used;
};
extern struct cs__tsize_entry cs__tsize_table[CS__TSIZE_SLOTS];

/* Fill the table (once; before tracing is switched on). */
void cs__tsize_init(void);
/* PMPI_Type_size of t, 0 for MPI_DATATYPE_NULL or on error. */
uint64_t cs__tsize_ask(MPI_Datatype t);

/* Handles are pointers (Open MPI) or integers (MPICH): either converts to an integer. */
static inline uint32_t cs__tsize_hash(MPI_Datatype t)
{
    uint64_t x = (uint64_t)(uintptr_t)t;
    return (uint32_t)((x * 0x9E3779B97F4A7C15ull) >> 57) % CS__TSIZE_SLOTS;
}

/* The table's entry for t, or NULL when t is not a predefined datatype. */
static inline const struct cs__tsize_entry *cs__tsize_find(MPI_Datatype t)
{
    for (uint32_t i = cs__tsize_hash(t), n = 0; n < CS__TSIZE_SLOTS;
         i = (i + 1) % CS__TSIZE_SLOTS, n++) {
        const struct cs__tsize_entry *e = &cs__tsize_table[i];
        if (!e->used)
            break;
        if (e->type == t)
            return e;
    }
    return NULL;
}

/* Size in bytes of datatype t, 0 for MPI_DATATYPE_NULL or on error. */
static inline uint64_t cs__tsize(MPI_Datatype t)
{
    const struct cs__tsize_entry *e = cs__tsize_find(t);
    return e ? e->size : cs__tsize_ask(t);
}

/* Size of t when it is a predefined datatype, else 0 (MPI is not asked). */
static inline uint64_t cs__tsize_known(MPI_Datatype t)
{
    const struct cs__tsize_entry *e = cs__tsize_find(t);
    return e ? e->size : 0;
}

/* node.c: each node's topology snapshot and port counters (its first rank starts a helper).
 * Both collective over priv; start after the trace is opened (or failed to), finish before the
 * trace gather. */
void cs__node_start(MPI_Comm priv, int rank, int size, int opened);
void cs__node_finish(MPI_Comm priv, int rank, int size);
/* capture.c: the per-node wire capture helper (COMMSCOPE_CAPTURE); both collective over priv. */
void cs__capture_start(MPI_Comm priv, int rank, int size);
void cs__capture_stop(MPI_Comm priv);
/* After the stop: -1 when capture was not configured (the same on every rank), 0 when this rank
 * started no helper, 1 with the helper's wire file in path. */
int cs__capture_file(char *path, size_t len);

#endif
