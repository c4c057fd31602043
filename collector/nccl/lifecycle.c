/*
 * Communicator lifecycle wrappers (hand-written rows of calls.def): they forward, register the
 * new communicator with its global id (comm.c) and record one event.  aux is the new
 * communicator's size where there is one.
 */
#include "internal.h"

/* Event of a lifecycle call on communicator id `comm`. */
static void life_event(uint16_t op, uint64_t t0, uint64_t t1, ncclResult_t rc, uint64_t comm,
                       int32_t aux)
{
    cs__nccl_event(op, t0, t1, rc, comm, 0, 0, 0, 0, 0, aux);
}

static int made(ncclResult_t rc)
{
    return rc == ncclSuccess || rc == ncclInProgress;
}

CS_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    int on = cs__nccl_enter();
    if (CS_UNLIKELY(!cs__nreal.GetUniqueId))
        return cs__nccl_missing("ncclGetUniqueId");
    if (!on)
        return cs__nreal.GetUniqueId(uniqueId);
    uint64_t t0 = cs_now();
    ncclResult_t rc = cs__nreal.GetUniqueId(uniqueId);
    life_event(CS_OP_NCCL_GET_UNIQUE_ID, t0, cs_now(), rc, 0, 0);
    return rc;
}

static ncclResult_t init_rank(uint16_t op, ncclComm_t *comm, int nranks, ncclUniqueId commId,
                              int rank, ncclConfig_t *config, int with_config)
{
    int on = cs__nccl_enter();
    ncclResult_t (*fn)(ncclComm_t *, int, ncclUniqueId, int) = cs__nreal.CommInitRank;
    if (with_config ? !cs__nreal.CommInitRankConfig : !fn)
        return cs__nccl_missing(with_config ? "ncclCommInitRankConfig" : "ncclCommInitRank");
    uint64_t t0 = on ? cs_now() : 0;
    ncclResult_t rc = with_config ? cs__nreal.CommInitRankConfig(comm, nranks, commId, rank, config)
                                  : fn(comm, nranks, commId, rank);
    if (!on || !__atomic_load_n(&cs_active, __ATOMIC_RELAXED))
        return rc;
    uint64_t t1 = cs_now();
    uint64_t id = cs__ncomm_id_from_unique(&commId, 1, nranks);
    if (made(rc) && comm && *comm)
        cs__ncomm_add(*comm, id, nranks, rank, 0, op, 0, 0);
    life_event(op, t0, t1, rc, made(rc) ? id : 0, nranks);
    return rc;
}

CS_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return init_rank(CS_OP_NCCL_COMM_INIT_RANK, comm, nranks, commId, rank, NULL, 0);
}

CS_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                              int rank, ncclConfig_t *config)
{
    return init_rank(CS_OP_NCCL_COMM_INIT_RANK_CONFIG, comm, nranks, commId, rank, config, 1);
}

CS_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank,
                                                int nId, ncclUniqueId *commIds,
                                                ncclConfig_t *config)
{
    int on = cs__nccl_enter();
    if (CS_UNLIKELY(!cs__nreal.CommInitRankScalable))
        return cs__nccl_missing("ncclCommInitRankScalable");
    uint64_t t0 = on ? cs_now() : 0;
    ncclResult_t rc = cs__nreal.CommInitRankScalable(newcomm, nranks, myrank, nId, commIds, config);
    if (!on || !__atomic_load_n(&cs_active, __ATOMIC_RELAXED))
        return rc;
    uint64_t t1 = cs_now();
    uint64_t id = cs__ncomm_id_from_unique(commIds, nId > 0 ? nId : 0, nranks);
    if (made(rc) && newcomm && *newcomm)
        cs__ncomm_add(*newcomm, id, nranks, myrank, 0, CS_OP_NCCL_COMM_INIT_RANK_SCALABLE, 0, 0);
    life_event(CS_OP_NCCL_COMM_INIT_RANK_SCALABLE, t0, t1, rc, made(rc) ? id : 0, nranks);
    return rc;
}

/*
 * ncclCommInitAll makes ndev communicators inside this one process, one per device: they are the
 * members of one communicator, so they share one id (this rank and the call's index in this
 * process), and each writes a record with its own rank (i), size (ndev) and device, flagged
 * CS_COMM_GPU_MULTI: the analyzer joins them into one communicator whose members are all this
 * rank.
 */
CS_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    int on = cs__nccl_enter();
    if (CS_UNLIKELY(!cs__nreal.CommInitAll))
        return cs__nccl_missing("ncclCommInitAll");
    uint64_t t0 = on ? cs_now() : 0;
    ncclResult_t rc = cs__nreal.CommInitAll(comm, ndev, devlist);
    if (!on || !__atomic_load_n(&cs_active, __ATOMIC_RELAXED))
        return rc;
    uint64_t t1 = cs_now();
    static uint32_t calls;
    const struct cs_file_header *h = cs_trace_header();
    uint64_t id =
        made(rc) && h
            ? cs__ncomm_id_initall(h->rank, __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED), ndev)
            : 0;
    for (int i = 0; id && comm && i < ndev; i++)
        if (comm[i])
            cs__ncomm_add(comm[i], id, ndev, i, 0, CS_OP_NCCL_COMM_INIT_ALL, 0, 0);
    life_event(CS_OP_NCCL_COMM_INIT_ALL, t0, t1, rc, id, ndev);
    return rc;
}

/* Split and shrink: the child's id from the parent's id, the child index and the color. */
static ncclResult_t child(uint16_t op, ncclComm_t comm, int color, int key, int *exclude,
                          int nexclude, ncclComm_t *newcomm, ncclConfig_t *config, int flags)
{
    int on = cs__nccl_enter();
    int split = op == CS_OP_NCCL_COMM_SPLIT;
    if (split ? !cs__nreal.CommSplit : !cs__nreal.CommShrink)
        return cs__nccl_missing(split ? "ncclCommSplit" : "ncclCommShrink");
    if (!on)
        return split ? cs__nreal.CommSplit(comm, color, key, newcomm, config)
                     : cs__nreal.CommShrink(comm, exclude, nexclude, newcomm, config, flags);
    struct cs__ncomm *p = cs__ncomm_get(comm);
    uint32_t idx = p ? __atomic_fetch_add(&p->children, 1, __ATOMIC_RELAXED) : 0;
    uint64_t pid = p ? p->id : 0;
    uint64_t t0 = cs_now();
    ncclResult_t rc = split ? cs__nreal.CommSplit(comm, color, key, newcomm, config)
                            : cs__nreal.CommShrink(comm, exclude, nexclude, newcomm, config, flags);
    uint64_t t1 = cs_now();
    uint64_t id = 0;
    int size = 0;
    if (made(rc) && newcomm && *newcomm) {
        /* Without the parent's id the child's cannot be agreed either. */
        id = pid ? cs__ncomm_id_child(pid, idx, split ? color : 0, split ? 1 : 2) : 0;
        struct cs__ncomm *c =
            cs__ncomm_add(*newcomm, id, -1, -1, pid, op, split ? color : 0, split ? key : 0);
        size = c && c->size > 0 ? c->size : 0;
    }
    life_event(op, t0, t1, rc, id, size);
    return rc;
}

CS_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                     ncclConfig_t *config)
{
    return child(CS_OP_NCCL_COMM_SPLIT, comm, color, key, NULL, 0, newcomm, config, 0);
}

CS_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                      ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    return child(CS_OP_NCCL_COMM_SHRINK, comm, 0, 0, excludeRanksList, excludeRanksCount, newcomm,
                 config, shrinkFlags);
}

/* Finalize, destroy and abort: one event naming the communicator. */
#define CS_NCCL_END_OF_LIFE(NAME, OP)                                                              \
    CS_EXPORT ncclResult_t nccl##NAME(ncclComm_t comm)                                             \
    {                                                                                              \
        int on = cs__nccl_enter();                                                                 \
        if (CS_UNLIKELY(!cs__nreal.NAME))                                                          \
            return cs__nccl_missing("nccl" #NAME);                                                 \
        if (!on)                                                                                   \
            return cs__nreal.NAME(comm);                                                           \
        struct cs__ncomm *c = cs__ncomm_get(comm);                                                 \
        uint64_t id = c ? c->id : 0;                                                               \
        uint64_t t0 = cs_now();                                                                    \
        ncclResult_t rc = cs__nreal.NAME(comm);                                                    \
        life_event(OP, t0, cs_now(), rc, id, 0);                                                   \
        return rc;                                                                                 \
    }
CS_NCCL_END_OF_LIFE(CommFinalize, CS_OP_NCCL_COMM_FINALIZE)
CS_NCCL_END_OF_LIFE(CommDestroy, CS_OP_NCCL_COMM_DESTROY)
CS_NCCL_END_OF_LIFE(CommAbort, CS_OP_NCCL_COMM_ABORT)

/*
 * Programs poll ncclCommGetAsyncError, often in a loop, so only the first asynchronous error of
 * each communicator is recorded (aux = the error); polling itself is not.
 */
CS_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    int on = cs__nccl_enter();
    if (CS_UNLIKELY(!cs__nreal.CommGetAsyncError))
        return cs__nccl_missing("ncclCommGetAsyncError");
    uint64_t t0 = on ? cs_now() : 0;
    ncclResult_t rc = cs__nreal.CommGetAsyncError(comm, asyncError);
    if (!on || rc != ncclSuccess || !asyncError || *asyncError == ncclSuccess ||
        *asyncError == ncclInProgress)
        return rc;
    struct cs__ncomm *c = cs__ncomm_get(comm);
    if (c && !__atomic_exchange_n(&c->async_reported, 1, __ATOMIC_RELAXED))
        cs__nccl_event(CS_OP_NCCL_COMM_GET_ASYNC_ERROR, t0, cs_now(), ncclSuccess, c->id, 0, 0, 0,
                       0, CS_EV_ERROR, (int32_t)*asyncError);
    return rc;
}
