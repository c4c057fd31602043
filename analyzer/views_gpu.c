/*
 * The report views of ranks with GPU records (NCCL + CUPTI, Kineto imports): their collectives
 * run as kernels, so the time segments and the verdict take the GPU timeline (gpu.c) instead of
 * the host's call times.  Definitions in docs/metrics.md ("Report views").
 */
#include <math.h>

#include "internal.h"

/* The rank's communication time: the union of its communication kernels with GPU records,
 * its MPI call time otherwise. */
double cs__views_gpu_comm(const struct cs_report_rank *r)
{
    return isfinite(r->gpu_comm_s) ? r->gpu_comm_s : r->comm_s;
}

/* Compute: the union of compute kernels; waiting: the rank's wait at instances (GPU arrivals),
 * at most its exposed communication; collective: the rest of the exposed communication.
 * Point-to-point and completion keep the host's MPI call times. */
void cs__views_gpu_segments(const struct cs_report_rank *r, double *seg)
{
    double exposed = isfinite(r->exposed_comm_s) && r->exposed_comm_s > 0 ? r->exposed_comm_s : 0;
    double wait = r->wait_s > 0 ? r->wait_s : 0;
    if (wait > exposed)
        wait = exposed;
    seg[CS_SEG_COMPUTE] = r->compute_s;
    seg[CS_SEG_COLL] = exposed - wait;
    seg[CS_SEG_WAIT] = wait;
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
