/*
 * What the NCCL front end's files share (collector/nccl/, built into libcommscope.so).  Nothing
 * here is exported; only the ncclX wrappers are (CS_EXPORT).
 */
#ifndef COMMSCOPE_NCCL_INTERNAL_H
#define COMMSCOPE_NCCL_INTERNAL_H

#include <stdint.h>

#include "api.h"
#include "collector.h"

#define CS_LIKELY(x) __builtin_expect(!!(x), 1)
#define CS_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The wrappers themselves (exported), one per calls.def row. */
#define CS_NCCL(fam, name, op, params, args) CS_EXPORT ncclResult_t nccl##name params;
#include "calls.def"
#undef CS_NCCL

/* The real NCCL functions (pncclX, else the next ncclX), resolved once by cs__nccl_init. */
struct cs__nccl_real {
#define CS_NCCL(fam, name, op, params, args) ncclResult_t(*name) params;
#define CS_NCCL_Q(name, params, args) ncclResult_t(*name) params;
#include "calls.def"
#include "queries.def"
#undef CS_NCCL
#undef CS_NCCL_Q
};
extern struct cs__nccl_real cs__nreal;

/* Nonzero once cs__nccl_init ran (release-stored after cs__nreal is complete). */
extern int cs__nccl_inited;
/*
 * Resolve the real functions, and start tracing for a process without MPI (start.c).  Runs once;
 * later calls return at once.
 */
void cs__nccl_init(void);

/* Enter a wrapper: make sure the real functions are known; nonzero when tracing is on. */
static inline int cs__nccl_enter(void)
{
    if (CS_UNLIKELY(!__atomic_load_n(&cs__nccl_inited, __ATOMIC_ACQUIRE)))
        cs__nccl_init();
    return __atomic_load_n(&cs_active, __ATOMIC_RELAXED);
}

/* ncclResult_t returned when the real function could not be found (warned once). */
ncclResult_t cs__nccl_missing(const char *name);

/* What the collector knows about one NCCL communicator (comm.c). */
struct cs__ncomm {
    ncclComm_t h;       /* the handle; NULL = free slot */
    uint64_t id;        /* global id all members agree on; 0 unknown */
    int32_t size, rank; /* -1 unknown */
    int32_t dev;        /* CUDA device, -1 unknown */
    uint32_t seq;       /* next collective sequence number (atomic) */
    uint32_t children;  /* splits/shrinks made from it so far (atomic) */
    int need_record;    /* the communicator record is still to be written (size was unknown) */
    uint64_t parent;    /* creation details for the record */
    uint16_t op;
    int32_t color, key;
    int async_reported; /* an asynchronous error was recorded */
};

/* The entry for h, registering it as unknown (id 0, size/rank asked from NCCL) when new.  NULL
 * only when the table is full. */
struct cs__ncomm *cs__ncomm_get(ncclComm_t h);
/* Register h with a known id, size and rank (replacing an older entry of the same address), and
 * write its communicator record.  parent/op/color/key as in struct cs_comm_record. */
struct cs__ncomm *cs__ncomm_add(ncclComm_t h, uint64_t id, int size, int rank, uint64_t parent,
                                uint16_t op, int color, int key);
/* Write the communicator record of c once its size is known (no-op otherwise). */
void cs__ncomm_record(struct cs__ncomm *c);
/* Communicator ids: from unique ids, and for the idx-th child of a parent. */
uint64_t cs__ncomm_id_from_unique(const ncclUniqueId *ids, int n, int nranks);
uint64_t cs__ncomm_id_child(uint64_t parent, uint32_t idx, int color, int kind);
/* The id shared by the communicators of the idx-th ncclCommInitAll call of this process. */
uint64_t cs__ncomm_id_initall(int world_rank, uint32_t idx, int ndev);

/* Bytes of one element of datatype t, 0 (warned once) for a type this build does not know. */
uint64_t cs__nccl_type_size(ncclDataType_t t);

/* Launch ids (per rank, from 1) and the calling thread's group state (group.c). */
uint64_t cs__nccl_next_launch(void);
struct cs__ngroup {
    int depth;       /* ncclGroupStart nesting */
    uint64_t launch; /* the open group's launch id (depth > 0) */
    uint32_t calls;  /* NCCL calls recorded in the open group */
    uint64_t comm;   /* first collective's communicator and sequence number (without a
                        collective: the first call's communicator, seq 0) */
    uint32_t seq;
    int has_coll;
    cudaStream_t stream; /* the first call's stream */
};
extern __thread struct cs__ngroup cs__ngroup;

/* Write one event; common tail of every NCCL wrapper. */
void cs__nccl_event(uint16_t op, uint64_t t0, uint64_t t1, ncclResult_t rc, uint64_t comm,
                    uint32_t seq, uint64_t bytes, uint64_t brecv, uint64_t launch, uint16_t flags,
                    int32_t aux);
/* The same into ev (the wrapper's in-flight record, resumed; NULL: nothing is written). */
void cs__nccl_event_at(struct cs_event *ev, uint16_t op, uint64_t t0, uint64_t t1, ncclResult_t rc,
                       uint64_t comm, uint32_t seq, uint64_t bytes, uint64_t brecv, uint64_t launch,
                       uint16_t flags, int32_t aux);

#endif
