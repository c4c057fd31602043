/*
 * The NCCL communication wrappers, expanded from calls.def: one body macro per family,
 * instantiated once per row.  Every wrapper forwards untouched when tracing is off; otherwise it
 * takes the collective sequence number, the launch id (its own, or its group's), tells the GPU
 * side that a launch begins (CUPTI correlation / CUDA events), begins the event with what the
 * call is before the real call (the in-flight record, core/hot.h: a rank blocked inside NCCL
 * shows the call it is in), stamps around the real call and completes the event.  The return value
 * is always the real call's, ncclInProgress included.
 */
#include "../core/hot.h"
#include "../cuda/gpu.h"
#include "internal.h"

/* What a family computes for its event. */
struct nfill {
    uint64_t bytes, brecv;
    uint16_t flags;
    uint32_t seq; /* point-to-point: the peer's rank in the communicator */
};

/*
 * The common frame.  COLL is 1 for collectives (they take a sequence number); BODY fills `f`
 * from the arguments, `ts` (element size) and `n` (communicator size, 0 unknown) and `me`.
 */
#define CS_NWRAP(NAME, OP, PARAMS, ARGS, COLL, BODY)                                               \
    CS_EXPORT ncclResult_t nccl##NAME PARAMS                                                       \
    {                                                                                              \
        if (CS_UNLIKELY(!cs__nccl_enter()))                                                        \
            return cs__nreal.NAME ? cs__nreal.NAME ARGS : cs__nccl_missing("nccl" #NAME);          \
        if (CS_UNLIKELY(!cs__nreal.NAME))                                                          \
            return cs__nccl_missing("nccl" #NAME);                                                 \
        struct cs__ncomm *ci = cs__ncomm_get(comm);                                                \
        uint32_t seq_ = 0;                                                                         \
        if ((COLL) && ci)                                                                          \
            seq_ = __atomic_fetch_add(&ci->seq, 1, __ATOMIC_RELAXED);                              \
        uint64_t cid_ = ci ? ci->id : 0;                                                           \
        struct cs__ngroup *g_ = &cs__ngroup;                                                       \
        int grouped_ = g_->depth > 0;                                                              \
        uint64_t launch_ = grouped_ ? g_->launch : cs__nccl_next_launch();                         \
        uint16_t gpuf_;                                                                            \
        if (grouped_) {                                                                            \
            gpuf_ = cs__gpu_stream_flags(stream);                                                  \
            if (!g_->calls++) {                                                                    \
                g_->stream = stream;                                                               \
                g_->comm = cid_;                                                                   \
            }                                                                                      \
            if ((COLL) && !g_->has_coll) {                                                         \
                g_->has_coll = 1;                                                                  \
                g_->comm = cid_;                                                                   \
                g_->seq = seq_;                                                                    \
            }                                                                                      \
        } else {                                                                                   \
            gpuf_ = cs__gpu_launch_begin(launch_, stream);                                         \
        }                                                                                          \
        struct nfill f = {0};                                                                      \
        uint64_t ts = cs__nccl_type_size(datatype);                                                \
        uint64_t n = ci && ci->size > 0 ? (uint64_t)ci->size : 0;                                  \
        int32_t me = ci ? ci->rank : -1;                                                           \
        (void)n;                                                                                   \
        (void)me;                                                                                  \
        BODY;                                                                                      \
        uint32_t evseq_ = (COLL) ? seq_ : f.seq;                                                   \
        uint16_t fl_ = (uint16_t)(f.flags | gpuf_ | (grouped_ ? CS_EV_GROUPED : 0));               \
        struct cs_event *ev_ =                                                                     \
            cs_hot_enter(OP, cid_, evseq_, -1, (int32_t)datatype, fl_, f.bytes);                   \
        if (ev_) {                                                                                 \
            ev_->bytes_recv = f.brecv;                                                             \
            ev_->request = launch_;                                                                \
        }                                                                                          \
        uint64_t t0_ = cs_now();                                                                   \
        cs_hot_entered(ev_, t0_);                                                                  \
        ncclResult_t rc_ = cs__nreal.NAME ARGS;                                                    \
        uint64_t t1_ = cs_now();                                                                   \
        if (!grouped_)                                                                             \
            cs__gpu_launch_end(launch_, stream, cid_, (COLL) ? seq_ : 0, 1, rc_);                  \
        cs__nccl_event_at(cs_hot_resume(ev_), OP, t0_, t1_, rc_, cid_, evseq_, f.bytes, f.brecv,   \
                          launch_, fl_, (int32_t)datatype);                                        \
        return rc_;                                                                                \
    }

#define CS_NFAM_ALLRED(NAME, OP, P, A)                                                             \
    CS_NWRAP(NAME, OP, P, A, 1, {                                                                  \
        f.bytes = f.brecv = count * ts;                                                            \
        if (sendbuff == recvbuff)                                                                  \
            f.flags |= CS_EV_IN_PLACE;                                                             \
    })
/* The root sends count elements, every other member receives them. */
#define CS_NFAM_BROADCAST(NAME, OP, P, A)                                                          \
    CS_NWRAP(NAME, OP, P, A, 1, {                                                                  \
        if (root == me) {                                                                          \
            f.flags |= CS_EV_ROOT;                                                                 \
            f.bytes = count * ts;                                                                  \
        } else {                                                                                   \
            f.brecv = count * ts;                                                                  \
        }                                                                                          \
        if (sendbuff == recvbuff)                                                                  \
            f.flags |= CS_EV_IN_PLACE;                                                             \
    })
#define CS_NFAM_BCAST(NAME, OP, P, A)                                                              \
    CS_NWRAP(NAME, OP, P, A, 1, {                                                                  \
        (void)buff;                                                                                \
        if (root == me) {                                                                          \
            f.flags |= CS_EV_ROOT;                                                                 \
            f.bytes = count * ts;                                                                  \
        } else {                                                                                   \
            f.brecv = count * ts;                                                                  \
        }                                                                                          \
    })
/* Everyone contributes count elements; the root receives the reduced count. */
#define CS_NFAM_REDUCE(NAME, OP, P, A)                                                             \
    CS_NWRAP(NAME, OP, P, A, 1, {                                                                  \
        f.bytes = count * ts;                                                                      \
        if (root == me) {                                                                          \
            f.flags |= CS_EV_ROOT;                                                                 \
            f.brecv = count * ts;                                                                  \
        }                                                                                          \
        if (sendbuff == recvbuff)                                                                  \
            f.flags |= CS_EV_IN_PLACE;                                                             \
    })
/* One block sent, n blocks received. */
#define CS_NFAM_ALLGATHER(NAME, OP, P, A)                                                          \
    CS_NWRAP(NAME, OP, P, A, 1, {                                                                  \
        f.bytes = sendcount * ts;                                                                  \
        f.brecv = sendcount * ts * n;                                                              \
        (void)sendbuff;                                                                            \
        (void)recvbuff;                                                                            \
    })
/* n blocks contributed, one block received. */
#define CS_NFAM_REDSCAT(NAME, OP, P, A)                                                            \
    CS_NWRAP(NAME, OP, P, A, 1, {                                                                  \
        f.bytes = recvcount * ts * n;                                                              \
        f.brecv = recvcount * ts;                                                                  \
        (void)sendbuff;                                                                            \
        (void)recvbuff;                                                                            \
    })
/* count elements to and from each member. */
#define CS_NFAM_ALLTOALL(NAME, OP, P, A)                                                           \
    CS_NWRAP(NAME, OP, P, A, 1, {                                                                  \
        f.bytes = f.brecv = count * ts * n;                                                        \
        (void)sendbuff;                                                                            \
        (void)recvbuff;                                                                            \
    })
#define CS_NFAM_GATHER(NAME, OP, P, A)                                                             \
    CS_NWRAP(NAME, OP, P, A, 1, {                                                                  \
        f.bytes = count * ts;                                                                      \
        if (root == me) {                                                                          \
            f.flags |= CS_EV_ROOT;                                                                 \
            f.brecv = count * ts * n;                                                              \
        }                                                                                          \
        (void)sendbuff;                                                                            \
        (void)recvbuff;                                                                            \
    })
#define CS_NFAM_SCATTER(NAME, OP, P, A)                                                            \
    CS_NWRAP(NAME, OP, P, A, 1, {                                                                  \
        f.brecv = count * ts;                                                                      \
        if (root == me) {                                                                          \
            f.flags |= CS_EV_ROOT;                                                                 \
            f.bytes = count * ts * n;                                                              \
        }                                                                                          \
        (void)sendbuff;                                                                            \
        (void)recvbuff;                                                                            \
    })
#define CS_NFAM_SEND(NAME, OP, P, A)                                                               \
    CS_NWRAP(NAME, OP, P, A, 0, {                                                                  \
        f.bytes = count * ts;                                                                      \
        f.seq = peer >= 0 ? (uint32_t)peer : UINT32_MAX;                                           \
        (void)sendbuff;                                                                            \
    })
#define CS_NFAM_RECV(NAME, OP, P, A)                                                               \
    CS_NWRAP(NAME, OP, P, A, 0, {                                                                  \
        f.brecv = count * ts;                                                                      \
        f.seq = peer >= 0 ? (uint32_t)peer : UINT32_MAX;                                           \
        (void)recvbuff;                                                                            \
    })
#define CS_NFAM_HAND(NAME, OP, P, A)

#define CS_NCCL(fam, name, op, params, args) CS_NFAM_##fam(name, op, params, args)
#include "calls.def"
#undef CS_NCCL
