/*
 * ncclGroupStart / ncclGroupEnd.  NCCL defers every call between the outermost GroupStart and
 * its GroupEnd and launches them together at GroupEnd, so the group is one launch: the calls in
 * it record the group's launch id (CS_EV_GROUPED), the GPU side is told about the launch around
 * the outermost GroupEnd, and that GroupEnd's event carries the launch id and, in aux, the number
 * of calls.  Groups are per thread, as in NCCL.
 */
#include "../cuda/gpu.h"
#include "internal.h"

__thread struct cs__ngroup cs__ngroup;
static uint64_t next_launch;

uint64_t cs__nccl_next_launch(void)
{
    return __atomic_add_fetch(&next_launch, 1, __ATOMIC_RELAXED);
}

CS_EXPORT ncclResult_t ncclGroupStart(void)
{
    int on = cs__nccl_enter();
    if (CS_UNLIKELY(!cs__nreal.GroupStart))
        return cs__nccl_missing("ncclGroupStart");
    if (!on)
        return cs__nreal.GroupStart();
    struct cs__ngroup *g = &cs__ngroup;
    uint64_t t0 = cs_now();
    ncclResult_t rc = cs__nreal.GroupStart();
    uint64_t t1 = cs_now();
    if (rc == ncclSuccess && g->depth++ == 0)
        *g = (struct cs__ngroup){.depth = 1, .launch = cs__nccl_next_launch()};
    cs__nccl_event(CS_OP_NCCL_GROUP_START, t0, t1, rc, 0, 0, 0, 0, g->depth ? g->launch : 0, 0,
                   g->depth);
    return rc;
}

CS_EXPORT ncclResult_t ncclGroupEnd(void)
{
    int on = cs__nccl_enter();
    if (CS_UNLIKELY(!cs__nreal.GroupEnd))
        return cs__nccl_missing("ncclGroupEnd");
    struct cs__ngroup *g = &cs__ngroup;
    if (!on || g->depth == 0) {
        /* Not traced, or a GroupStart from before tracing started. */
        if (!on)
            g->depth = 0;
        return cs__nreal.GroupEnd();
    }
    int outer = g->depth == 1;
    uint64_t launch = g->launch;
    uint16_t gpuf = outer ? cs__gpu_launch_begin(launch, g->stream) : 0;
    uint64_t t0 = cs_now();
    ncclResult_t rc = cs__nreal.GroupEnd();
    uint64_t t1 = cs_now();
    /* NCCL closes the group level even when the launch fails. */
    g->depth--;
    if (outer)
        cs__gpu_launch_end(launch, g->stream, g->comm, g->seq, g->calls, rc);
    cs__nccl_event(CS_OP_NCCL_GROUP_END, t0, t1, rc, outer ? g->comm : 0, outer ? g->seq : 0, 0,
                   outer ? g->calls : 0, launch, gpuf, outer ? (int32_t)g->calls : g->depth);
    return rc;
}
