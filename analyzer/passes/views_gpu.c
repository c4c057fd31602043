/*
 * The report views of ranks with GPU records (NCCL + CUPTI, Kineto imports): their NCCL
 * collectives run as kernels, so their part of the time segments and the verdict comes from the
 * GPU timeline (gpu.c); MPI calls of the same rank keep their host call times.  Definitions in
 * docs/metrics.md ("Report views").
 */
#include <math.h>

#include "internal.h"

/* The rank's communication time: its MPI communication calls plus, with GPU records, the union
 * of its NCCL kernels (ranks[].comm_s is that sum on such ranks: metrics.c). */
double cs__views_gpu_comm(const struct cs_report_rank *r)
{
    return r->comm_s;
}

/* seg holds the host segments of the rank's MPI calls (views.c, NCCL waits left out of them).
 * Compute becomes the union of compute kernels; the NCCL part is added: waiting as the step
 * budget places it (gpu_wait_s, steps_gpu.c: the exposed NCCL kernel time inside the rank's
 * waiting intervals at NCCL instances), and the rest of the exposed time as collective.  Only
 * without that number (the GPU budget ran out of memory) the waits at NCCL instances, at most
 * the exposed time, stand in for it. */
void cs__views_gpu_segments(const struct cs_report_rank *r, double gpu_wait_s, double nccl_wait_s,
                            double *seg)
{
    double exposed = isfinite(r->exposed_comm_s) && r->exposed_comm_s > 0 ? r->exposed_comm_s : 0;
    double w = isfinite(gpu_wait_s) ? gpu_wait_s : nccl_wait_s;
    double wait = w > 0 ? w : 0;
    if (wait > exposed)
        wait = exposed;
    seg[CS_SEG_COMPUTE] = r->compute_s;
    seg[CS_SEG_COLL] += exposed - wait;
    seg[CS_SEG_WAIT] += wait;
}

/* One sentence on the GPU communication of all ranks with GPU records: its total, the share
 * hidden behind compute kernels and the exposed rest. */
void cs__views_gpu_finding(const struct cs_report *rep, struct cs_report_views *o)
{
    double comm = 0, ovl = 0, exposed = 0;
    int any = 0;
    for (size_t i = 0; i < rep->nranks; i++) {
        const struct cs_report_rank *r = &rep->ranks[i];
        if (!isfinite(r->gpu_comm_s))
            continue;
        any = 1;
        comm += r->gpu_comm_s;
        ovl += isfinite(r->gpu_overlapped_s) ? r->gpu_overlapped_s : 0;
        exposed += isfinite(r->exposed_comm_s) ? r->exposed_comm_s : 0;
    }
    if (!any || comm <= 0)
        return;
    o->findings[o->nfindings++] = (struct cs_report_finding){
        .kind = CS_FIND_GPU_COMM, .rank = -1, .v = {comm, 100.0 * ovl / comm, exposed}};
}
