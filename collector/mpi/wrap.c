/*
 * The PMPI wrappers of collectives and point-to-point calls, expanded from calls.def: one
 * wrapper-body macro per signature family, instantiated once per row.
 *
 * Every wrapper: forwards untouched when tracing is off; otherwise takes the collective sequence
 * number before the call (blocking and non-blocking collectives share one sequence per
 * communicator), begins the event with what the call is before it (the in-flight record: a rank
 * stuck in the call shows it, hot.h), stamps around the PMPI call only, and fills the event after
 * the second stamp.
 * Bytes are computed only after a successful call, so datatype arguments that are not significant
 * at this rank (or invalid) are never touched.  The return code is always the PMPI call's.
 */
#include <stdint.h>

#include "internal.h"

/* What a family computes for its event; the shared tail (finish) does the rest. */
struct fill {
    uint64_t bytes;
    uint64_t brecv;
    int32_t peer;
    uint16_t flags;
    int32_t aux;
    int32_t tag;
    uint16_t recv;
    uint64_t rtag; /* Sendrecv: the received message's tag + 1 (0 none), into `request` */
};

/*
 * The next collective sequence number of ci.  A plain load and store, not an atomic increment
 * (a locked instruction, ~20 cycles): MPI requires the collectives of one communicator to be
 * issued in one order at every process, so a program whose threads share a communicator must
 * order its collectives on it itself (MPI-3.1 sec. 5.13); that ordering also orders these
 * accesses.  Relaxed atomics keep concurrent use of distinct communicators well defined.
 */
static inline uint32_t next_seq(struct cs__comm *ci)
{
    uint32_t s = __atomic_load_n(&ci->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&ci->seq, s + 1, __ATOMIC_RELAXED);
    return s;
}

/* A communicator nobody told us about, for point-to-point calls: peers cannot be translated. */
static const struct cs__comm no_comm = {.id = 0};

/*
 * The shared tail: track the request of a successful non-blocking call, then write the event.
 * t1 was stamped right after the PMPI call.
 */
static inline void finish(struct cs_event *ev, uint64_t t0, uint64_t t1, uint16_t op, int rc,
                          uint64_t comm, uint32_t seq, const struct fill *f, MPI_Request *request,
                          MPI_Comm c)
{
    uint64_t id = 0;
    if (request && rc == MPI_SUCCESS && *request != MPI_REQUEST_NULL) {
        struct cs__req q = {.id = cs__req_next_id(),
                            .comm = comm,
                            .handle = c,
                            .seq = seq,
                            .peer = f->peer,
                            .op = op,
                            .recv = f->recv,
                            .tag = f->tag};
        id = q.id;
        cs__req_add(*request, &q);
    }
    ev = cs_hot_resume(ev);
    if (CS_UNLIKELY(!ev))
        return;
    ev->t_begin = t0;
    ev->t_end = t1;
    ev->comm = comm;
    ev->bytes = f->bytes;
    ev->bytes_recv = f->brecv;
    ev->seq = seq;
    ev->peer = f->peer;
    ev->op = op;
    ev->flags = f->flags;
    ev->aux = f->aux;
    ev->request = f->rtag;
    if (id) {
        ev->request = id;
        ev->flags |= CS_EV_NONBLOCKING;
    }
    if (rc != MPI_SUCCESS) {
        ev->flags |= CS_EV_ERROR;
        ev->aux = rc;
    }
    cs_hot_commit(ev);
}

static inline int is_root(const struct cs__comm *ci, int root)
{
    return root == MPI_ROOT || (root >= 0 && root == ci->rank);
}

static inline uint64_t sum_counts(const int *counts, int n)
{
    uint64_t s = 0;
    for (int i = 0; counts && i < n; i++)
        s += counts[i] > 0 ? (uint64_t)counts[i] : 0;
    return s;
}

static inline uint64_t own_count(const int *counts, const struct cs__comm *ci)
{
    return counts && ci->rank >= 0 && ci->rank < ci->size && counts[ci->rank] > 0
               ? (uint64_t)counts[ci->rank]
               : 0;
}

/* Bytes received according to a receive's status (0 when unknown). */
static inline uint64_t status_bytes(const MPI_Status *st)
{
    int n = 0;
    if (PMPI_Get_count(st, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED || n < 0)
        return 0;
    return (uint64_t)n;
}

/* What a call will send, for its in-flight record: count x the size of a predefined datatype
 * (0 for others: asking MPI about a handle before the call could act on an invalid one). */
#define CS_PRE_BYTES(count, type) ((count) > 0 ? (uint64_t)(count)*cs__tsize_known(type) : 0)

/* Trailing parameters / arguments of blocking (B) and non-blocking (NB) rows. */
#define CS_REQP_B
#define CS_REQP_NB , MPI_Request *request
#define CS_REQA_B
#define CS_REQA_NB , request
#define CS_REQ_B NULL
#define CS_REQ_NB request

/*
 * The common frame of a collective wrapper: PARAMS is the parameter list, ARGS the PMPI
 * argument list, BODY fills `f` (it may use ci, which is the table entry or a temporary for an
 * unknown communicator once NEED_CI is true).
 */
#define CS_COLL(NAME, OP, NB, PARAMS, ARGS, NEED_CI, PRE, BODY)                                    \
    CS_EXPORT int MPI_##NAME PARAMS                                                                \
    {                                                                                              \
        if (CS_UNLIKELY(!cs_active))                                                               \
            return PMPI_##NAME ARGS;                                                               \
        struct cs__comm *ci = cs__comm_get(comm), tmp_;                                            \
        uint32_t seq_ = ci ? next_seq(ci) : 0;                                                     \
        uint64_t cid_ = ci ? ci->id : 0;                                                           \
        struct cs_event *ev_ = cs_hot_enter(OP, cid_, seq_, -1, 0, 0, PRE);                        \
        uint64_t t0_ = cs_hot_now();                                                               \
        cs_hot_entered(ev_, t0_);                                                                  \
        int rc_ = PMPI_##NAME ARGS;                                                                \
        uint64_t t1_ = cs_hot_now();                                                               \
        struct fill f = {.peer = -1};                                                              \
        if (rc_ == MPI_SUCCESS) {                                                                  \
            if ((NEED_CI) && !ci) {                                                                \
                cs__comm_unknown(comm, &tmp_);                                                     \
                ci = &tmp_;                                                                        \
            }                                                                                      \
            BODY                                                                                   \
        }                                                                                          \
        finish(ev_, t0_, t1_, OP, rc_, cid_, seq_, &f, CS_REQ_##NB, comm);                         \
        return rc_;                                                                                \
    }

#define CS_FAM_BARRIER(NAME, OP, NB, ARG)                                                          \
    CS_COLL(NAME, OP, NB, (MPI_Comm comm CS_REQP_##NB), (comm CS_REQA_##NB), 0, 0, (void)ci;)

#define CS_FAM_BCAST(NAME, OP, NB, ARG)                                                            \
    CS_COLL(                                                                                       \
        NAME, OP, NB,                                                                              \
        (void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm CS_REQP_##NB),    \
        (buffer, count, datatype, root, comm CS_REQA_##NB), 1, CS_PRE_BYTES(count, datatype), {    \
            uint64_t b = (uint64_t)count * cs__tsize(datatype);                                    \
            f.peer = cs__to_world(ci, root, &f.flags);                                             \
            if (is_root(ci, root)) {                                                               \
                f.flags |= CS_EV_ROOT;                                                             \
                f.bytes = b;                                                                       \
            } else if (root != MPI_PROC_NULL) {                                                    \
                f.brecv = b;                                                                       \
            }                                                                                      \
        })

#define CS_FAM_REDUCE(NAME, OP, NB, ARG)                                                           \
    CS_COLL(NAME, OP, NB,                                                                          \
            (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,      \
             int root, MPI_Comm comm CS_REQP_##NB),                                                \
            (sendbuf, recvbuf, count, datatype, op, root, comm CS_REQA_##NB), 1,                   \
            CS_PRE_BYTES(count, datatype), {                                                       \
                uint64_t b = (uint64_t)count * cs__tsize(datatype);                                \
                f.peer = cs__to_world(ci, root, &f.flags);                                         \
                f.bytes = root == MPI_PROC_NULL ? 0 : b;                                           \
                if (is_root(ci, root)) {                                                           \
                    f.flags |= CS_EV_ROOT;                                                         \
                    f.brecv = b;                                                                   \
                }                                                                                  \
                if (sendbuf == MPI_IN_PLACE)                                                       \
                    f.flags |= CS_EV_IN_PLACE;                                                     \
            })

/* ARG 1: the contribution is count per member (Reduce_scatter_block). */
#define CS_FAM_ALLRED(NAME, OP, NB, ARG)                                                           \
    CS_COLL(NAME, OP, NB,                                                                          \
            (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,      \
             MPI_Comm comm CS_REQP_##NB),                                                          \
            (sendbuf, recvbuf, count, datatype, op, comm CS_REQA_##NB), ARG,                       \
            CS_PRE_BYTES(count, datatype), {                                                       \
                uint64_t b = (uint64_t)count * cs__tsize(datatype);                                \
                f.bytes = (ARG) ? b * (uint64_t)ci->size : b;                                      \
                f.brecv = b;                                                                       \
                if (sendbuf == MPI_IN_PLACE)                                                       \
                    f.flags |= CS_EV_IN_PLACE;                                                     \
            })

#define CS_FAM_REDSCAT(NAME, OP, NB, ARG)                                                          \
    CS_COLL(NAME, OP, NB,                                                                          \
            (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,    \
             MPI_Op op, MPI_Comm comm CS_REQP_##NB),                                               \
            (sendbuf, recvbuf, recvcounts, datatype, op, comm CS_REQA_##NB), 1, 0, {               \
                uint64_t s = cs__tsize(datatype);                                                  \
                f.bytes = sum_counts(recvcounts, ci->size) * s;                                    \
                f.brecv = own_count(recvcounts, ci) * s;                                           \
                if (sendbuf == MPI_IN_PLACE)                                                       \
                    f.flags |= CS_EV_IN_PLACE;                                                     \
            })

/* ARG 0: gather (everyone sends one block to the root); 1: scatter (the root sends n blocks). */
#define CS_FAM_ROOTED(NAME, OP, NB, ARG)                                                           \
    CS_COLL(NAME, OP, NB,                                                                          \
            (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,             \
             int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm CS_REQP_##NB),          \
            (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm CS_REQA_##NB), \
            1, 0, {                                                                                \
                int r_ = is_root(ci, root);                                                        \
                f.peer = cs__to_world(ci, root, &f.flags);                                         \
                if (r_)                                                                            \
                    f.flags |= CS_EV_ROOT;                                                         \
                if ((r_ && (ARG) == 0 && sendbuf == MPI_IN_PLACE) ||                               \
                    (r_ && (ARG) == 1 && recvbuf == MPI_IN_PLACE))                                 \
                    f.flags |= CS_EV_IN_PLACE;                                                     \
                if (root == MPI_PROC_NULL) {                                                       \
                } else if ((ARG) == 0) {                                                           \
                    uint64_t rb = r_ ? (uint64_t)recvcount * cs__tsize(recvtype) : 0;              \
                    f.brecv = rb * (uint64_t)ci->size;                                             \
                    f.bytes =                                                                      \
                        (f.flags & CS_EV_IN_PLACE)                                                 \
                            ? rb                                                                   \
                            : (root == MPI_ROOT ? 0 : (uint64_t)sendcount * cs__tsize(sendtype));  \
                } else {                                                                           \
                    uint64_t sb = r_ ? (uint64_t)sendcount * cs__tsize(sendtype) : 0;              \
                    f.bytes = sb * (uint64_t)ci->size;                                             \
                    f.brecv =                                                                      \
                        (f.flags & CS_EV_IN_PLACE)                                                 \
                            ? sb                                                                   \
                            : (root == MPI_ROOT ? 0 : (uint64_t)recvcount * cs__tsize(recvtype));  \
                }                                                                                  \
            })

#define CS_FAM_GATHERV(NAME, OP, NB, ARG)                                                          \
    CS_COLL(NAME, OP, NB,                                                                          \
            (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,             \
             const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,          \
             MPI_Comm comm CS_REQP_##NB),                                                          \
            (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root,            \
             comm CS_REQA_##NB),                                                                   \
            1, 0, {                                                                                \
                f.peer = cs__to_world(ci, root, &f.flags);                                         \
                if (is_root(ci, root)) {                                                           \
                    uint64_t rs = cs__tsize(recvtype);                                             \
                    f.flags |= CS_EV_ROOT;                                                         \
                    f.brecv = sum_counts(recvcounts, ci->size) * rs;                               \
                    if (sendbuf == MPI_IN_PLACE) {                                                 \
                        f.flags |= CS_EV_IN_PLACE;                                                 \
                        f.bytes = own_count(recvcounts, ci) * rs;                                  \
                    } else if (root != MPI_ROOT) {                                                 \
                        f.bytes = (uint64_t)sendcount * cs__tsize(sendtype);                       \
                    }                                                                              \
                } else if (root != MPI_PROC_NULL) {                                                \
                    f.bytes = (uint64_t)sendcount * cs__tsize(sendtype);                           \
                }                                                                                  \
            })

#define CS_FAM_SCATTERV(NAME, OP, NB, ARG)                                                         \
    CS_COLL(NAME, OP, NB,                                                                          \
            (const void *sendbuf, const int sendcounts[], const int displs[],                      \
             MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, \
             MPI_Comm comm CS_REQP_##NB),                                                          \
            (sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,            \
             comm CS_REQA_##NB),                                                                   \
            1, 0, {                                                                                \
                f.peer = cs__to_world(ci, root, &f.flags);                                         \
                if (is_root(ci, root)) {                                                           \
                    uint64_t ss = cs__tsize(sendtype);                                             \
                    f.flags |= CS_EV_ROOT;                                                         \
                    f.bytes = sum_counts(sendcounts, ci->size) * ss;                               \
                    if (recvbuf == MPI_IN_PLACE) {                                                 \
                        f.flags |= CS_EV_IN_PLACE;                                                 \
                        f.brecv = own_count(sendcounts, ci) * ss;                                  \
                    } else if (root != MPI_ROOT) {                                                 \
                        f.brecv = (uint64_t)recvcount * cs__tsize(recvtype);                       \
                    }                                                                              \
                } else if (root != MPI_PROC_NULL) {                                                \
                    f.brecv = (uint64_t)recvcount * cs__tsize(recvtype);                           \
                }                                                                                  \
            })

/* ARG 0: allgather (one block sent, n received); 1: alltoall (n blocks each way). */
#define CS_FAM_ALL(NAME, OP, NB, ARG)                                                              \
    CS_COLL(NAME, OP, NB,                                                                          \
            (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,             \
             int recvcount, MPI_Datatype recvtype, MPI_Comm comm CS_REQP_##NB),                    \
            (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm CS_REQA_##NB), 1, 0, \
            {                                                                                      \
                uint64_t rb = (uint64_t)recvcount * cs__tsize(recvtype);                           \
                uint64_t n = (uint64_t)ci->size;                                                   \
                f.brecv = rb * n;                                                                  \
                if (sendbuf == MPI_IN_PLACE) {                                                     \
                    f.flags |= CS_EV_IN_PLACE;                                                     \
                    f.bytes = (ARG) ? rb * n : rb;                                                 \
                } else {                                                                           \
                    uint64_t sb = (uint64_t)sendcount * cs__tsize(sendtype);                       \
                    f.bytes = (ARG) ? sb * n : sb;                                                 \
                }                                                                                  \
            })

#define CS_FAM_ALLGATHERV(NAME, OP, NB, ARG)                                                       \
    CS_COLL(                                                                                       \
        NAME, OP, NB,                                                                              \
        (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,                 \
         const int recvcounts[], const int displs[], MPI_Datatype recvtype,                        \
         MPI_Comm comm CS_REQP_##NB),                                                              \
        (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm CS_REQA_##NB),  \
        1, 0, {                                                                                    \
            uint64_t rs = cs__tsize(recvtype);                                                     \
            f.brecv = sum_counts(recvcounts, ci->size) * rs;                                       \
            if (sendbuf == MPI_IN_PLACE) {                                                         \
                f.flags |= CS_EV_IN_PLACE;                                                         \
                f.bytes = own_count(recvcounts, ci) * rs;                                          \
            } else {                                                                               \
                f.bytes = (uint64_t)sendcount * cs__tsize(sendtype);                               \
            }                                                                                      \
        })

#define CS_FAM_ALLTOALLV(NAME, OP, NB, ARG)                                                        \
    CS_COLL(NAME, OP, NB,                                                                          \
            (const void *sendbuf, const int sendcounts[], const int sdispls[],                     \
             MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[],    \
             MPI_Datatype recvtype, MPI_Comm comm CS_REQP_##NB),                                   \
            (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,       \
             comm CS_REQA_##NB),                                                                   \
            1, 0, {                                                                                \
                f.brecv = sum_counts(recvcounts, ci->size) * cs__tsize(recvtype);                  \
                if (sendbuf == MPI_IN_PLACE) {                                                     \
                    f.flags |= CS_EV_IN_PLACE;                                                     \
                    f.bytes = f.brecv;                                                             \
                } else {                                                                           \
                    f.bytes = sum_counts(sendcounts, ci->size) * cs__tsize(sendtype);              \
                }                                                                                  \
            })

/* Per-peer datatypes: each count is multiplied by its own type's size (zero counts skipped). */
static inline uint64_t sum_typed(const int *counts, const MPI_Datatype *types, int n)
{
    uint64_t s = 0;
    for (int i = 0; counts && types && i < n; i++)
        if (counts[i] > 0)
            s += (uint64_t)counts[i] * cs__tsize(types[i]);
    return s;
}

#define CS_FAM_ALLTOALLW(NAME, OP, NB, ARG)                                                        \
    CS_COLL(NAME, OP, NB,                                                                          \
            (const void *sendbuf, const int sendcounts[], const int sdispls[],                     \
             const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],                \
             const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm CS_REQP_##NB),     \
            (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,     \
             comm CS_REQA_##NB),                                                                   \
            1, 0, {                                                                                \
                f.brecv = sum_typed(recvcounts, recvtypes, ci->size);                              \
                if (sendbuf == MPI_IN_PLACE) {                                                     \
                    f.flags |= CS_EV_IN_PLACE;                                                     \
                    f.bytes = f.brecv;                                                             \
                } else {                                                                           \
                    f.bytes = sum_typed(sendcounts, sendtypes, ci->size);                          \
                }                                                                                  \
            })

/* Point-to-point sends; no sequence number.  A send to MPI_PROC_NULL moves 0 bytes. */
#define CS_FAM_SEND(NAME, OP, NB, ARG)                                                             \
    CS_EXPORT int MPI_##NAME(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, \
                             MPI_Comm comm CS_REQP_##NB)                                           \
    {                                                                                              \
        if (CS_UNLIKELY(!cs_active))                                                               \
            return PMPI_##NAME(buf, count, datatype, dest, tag, comm CS_REQA_##NB);                \
        const struct cs__comm *ci = cs__comm_get(comm);                                            \
        struct fill f = {.aux = tag, .tag = tag};                                                  \
        f.peer = cs__to_world(ci ? ci : &no_comm, dest, &f.flags);                                 \
        struct cs_event *ev_ = cs_hot_enter(OP, ci ? ci->id : 0, 0, f.peer, tag, f.flags,          \
                                            CS_PRE_BYTES(count, datatype));                        \
        uint64_t t0_ = cs_hot_now();                                                               \
        cs_hot_entered(ev_, t0_);                                                                  \
        int rc_ = PMPI_##NAME(buf, count, datatype, dest, tag, comm CS_REQA_##NB);                 \
        uint64_t t1_ = cs_hot_now();                                                               \
        if (rc_ == MPI_SUCCESS && dest != MPI_PROC_NULL)                                           \
            f.bytes = (uint64_t)count * cs__tsize(datatype);                                       \
        finish(ev_, t0_, t1_, OP, rc_, ci ? ci->id : 0, 0, &f, CS_REQ_##NB, comm);                 \
        return rc_;                                                                                \
    }

/*
 * Receives.  Blocking: the actual source and byte count come from the status (the caller's, or
 * ours when it passed MPI_STATUS_IGNORE).  Non-blocking: the posted source and size; the actual
 * ones go into the completion record.
 */
#define CS_RECVP_B MPI_Status *status
#define CS_RECVP_NB MPI_Request *request
#define CS_RECVA_B status
#define CS_RECVA_NB request
#define CS_RECV_TAIL_B                                                                             \
    if (rc_ == MPI_SUCCESS) {                                                                      \
        f.peer = cs__to_world(ci ? ci : &no_comm, st_->MPI_SOURCE, &f.flags);                      \
        f.brecv = status_bytes(st_);                                                               \
    }
#define CS_RECV_TAIL_NB                                                                            \
    f.peer = cs__to_world(ci ? ci : &no_comm, source, &f.flags);                                   \
    f.recv = 1;                                                                                    \
    if (rc_ == MPI_SUCCESS && source != MPI_PROC_NULL)                                             \
        f.brecv = (uint64_t)count * cs__tsize(datatype);
#define CS_RECV_ST_B                                                                               \
    MPI_Status own_;                                                                               \
    MPI_Status *st_ = status == MPI_STATUS_IGNORE ? &own_ : status;
#define CS_RECV_ST_NB
#define CS_RECV_STA_B st_
#define CS_RECV_STA_NB request

#define CS_FAM_RECV(NAME, OP, NB, ARG)                                                             \
    CS_EXPORT int MPI_##NAME(void *buf, int count, MPI_Datatype datatype, int source, int tag,     \
                             MPI_Comm comm, CS_RECVP_##NB)                                         \
    {                                                                                              \
        if (CS_UNLIKELY(!cs_active))                                                               \
            return PMPI_##NAME(buf, count, datatype, source, tag, comm, CS_RECVA_##NB);            \
        const struct cs__comm *ci = cs__comm_get(comm);                                            \
        CS_RECV_ST_##NB uint16_t fl_ = 0;                                                          \
        int32_t from_ = cs__to_world(ci ? ci : &no_comm, source, &fl_);                            \
        struct cs_event *ev_ = cs_hot_enter(OP, ci ? ci->id : 0, 0, from_, tag, fl_, 0);           \
        uint64_t t0_ = cs_hot_now();                                                               \
        cs_hot_entered(ev_, t0_);                                                                  \
        int rc_ = PMPI_##NAME(buf, count, datatype, source, tag, comm, CS_RECV_STA_##NB);          \
        uint64_t t1_ = cs_hot_now();                                                               \
        struct fill f = {.aux = tag, .tag = tag, .peer = -1};                                      \
        if (source == MPI_ANY_SOURCE)                                                              \
            f.flags |= CS_EV_ANY_SOURCE;                                                           \
        CS_RECV_TAIL_##NB finish(ev_, t0_, t1_, OP, rc_, ci ? ci->id : 0, 0, &f, CS_REQ_##NB,      \
                                 comm);                                                            \
        return rc_;                                                                                \
    }

#define CS_FAM_HAND(NAME, OP, NB, ARG)

#define CS_MPI(FAM, NAME, OP, NB, ARG) CS_FAM_##FAM(NAME, OP, NB, ARG)
#include "calls.def"
#undef CS_MPI

/*
 * Sendrecv: peer and tag are the send side's; bytes_recv is what actually arrived; the receive
 * side is in seq (world rank of the message's source, from the status, + 1; 0 none) and request
 * (the received message's tag + 1; 0 none), which blocking calls leave unused otherwise.
 */
static void finish_sendrecv(struct cs_event *ev, uint64_t t0, uint64_t t1, uint16_t op, int rc,
                            const struct cs__comm *ci, int dest, int sendtag, uint64_t sbytes,
                            int source, const MPI_Status *st)
{
    const struct cs__comm *c = ci ? ci : &no_comm;
    struct fill f = {.aux = sendtag, .tag = sendtag};
    f.peer = cs__to_world(c, dest, &f.flags);
    if (source == MPI_ANY_SOURCE)
        f.flags |= CS_EV_ANY_SOURCE;
    uint32_t src = 0;
    if (rc == MPI_SUCCESS) {
        if (dest != MPI_PROC_NULL)
            f.bytes = sbytes;
        f.brecv = status_bytes(st);
        if (source != MPI_PROC_NULL && st->MPI_SOURCE != MPI_PROC_NULL && st->MPI_TAG >= 0) {
            uint16_t ignore = 0;
            int32_t w = cs__to_world(c, st->MPI_SOURCE, &ignore);
            if (w >= 0) {
                src = (uint32_t)w + 1;
                f.rtag = (uint64_t)st->MPI_TAG + 1;
            }
        }
    }
    finish(ev, t0, t1, op, rc, ci ? ci->id : 0, src, &f, NULL, MPI_COMM_NULL);
}

/* The in-flight record of a Sendrecv: the send side as in the event, seq the world rank of the
 * source it receives from + 1 (0 none or any). */
static inline struct cs_event *enter_sendrecv(uint16_t op, const struct cs__comm *ci, int dest,
                                              int sendtag, int source)
{
    const struct cs__comm *c = ci ? ci : &no_comm;
    uint16_t fl = 0, ignore = 0;
    int32_t to = cs__to_world(c, dest, &fl), from = cs__to_world(c, source, &ignore);
    if (source == MPI_ANY_SOURCE)
        fl |= CS_EV_ANY_SOURCE;
    return cs_hot_enter(op, ci ? ci->id : 0, from >= 0 ? (uint32_t)from + 1 : 0, to, sendtag, fl,
                        0);
}

CS_EXPORT int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                           int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                           int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    if (CS_UNLIKELY(!cs_active))
        return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                             recvtype, source, recvtag, comm, status);
    const struct cs__comm *ci = cs__comm_get(comm);
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    struct cs_event *ev = enter_sendrecv(CS_OP_SENDRECV, ci, dest, sendtag, source);
    uint64_t t0 = cs_hot_now();
    cs_hot_entered(ev, t0);
    int rc = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                           recvtype, source, recvtag, comm, st);
    uint64_t t1 = cs_hot_now();
    finish_sendrecv(ev, t0, t1, CS_OP_SENDRECV, rc, ci, dest, sendtag,
                    (uint64_t)sendcount * cs__tsize(sendtype), source, st);
    return rc;
}

CS_EXPORT int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest,
                                   int sendtag, int source, int recvtag, MPI_Comm comm,
                                   MPI_Status *status)
{
    if (CS_UNLIKELY(!cs_active))
        return PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm,
                                     status);
    const struct cs__comm *ci = cs__comm_get(comm);
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    struct cs_event *ev = enter_sendrecv(CS_OP_SENDRECV_REPLACE, ci, dest, sendtag, source);
    uint64_t t0 = cs_hot_now();
    cs_hot_entered(ev, t0);
    int rc = PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, st);
    uint64_t t1 = cs_hot_now();
    finish_sendrecv(ev, t0, t1, CS_OP_SENDRECV_REPLACE, rc, ci, dest, sendtag,
                    (uint64_t)count * cs__tsize(datatype), source, st);
    return rc;
}

/* MPI_Pcontrol is variadic; its extra arguments have no defined meaning, so only level is kept. */
CS_EXPORT int MPI_Pcontrol(const int level, ...)
{
    if (CS_UNLIKELY(!cs_active))
        return PMPI_Pcontrol(level);
    struct cs_event *ev = cs_hot_enter(CS_OP_PCONTROL, 0, 0, -1, level, 0, 0);
    uint64_t t0 = cs_hot_now();
    cs_hot_entered(ev, t0);
    int rc = PMPI_Pcontrol(level);
    uint64_t t1 = cs_hot_now();
    struct fill f = {.aux = level, .peer = -1};
    finish(ev, t0, t1, CS_OP_PCONTROL, rc, 0, 0, &f, NULL, MPI_COMM_NULL);
    return rc;
}
