/*
 * The GPU timeline (gpu.c, report_gpu.c): communication kernels against compute kernels on each
 * GPU, and NCCL collective instances timed on the GPU.
 *
 *   - every GPU record (ops 192-195) goes, per (rank, CUDA device), into a sweep that keeps one
 *     running union per class: compute kernels, all communication (gpu_nccl), and each
 *     communicator's communication.  Records arrive in start order (a small reorder heap per GPU
 *     absorbs the disorder of one CUPTI buffer), so the union, the time covered by both
 *     communication and compute, and the per-communicator unions need O(1) memory per GPU and
 *     class, whatever the length of the run;
 *   - the first gpu_nccl record of an NCCL launch becomes that rank's member of the collective
 *     instance (communicator, sequence) of the call that launched it, with arrival = kernel start
 *     and end = kernel end, and goes through the same matcher and metrics as MPI collectives:
 *     waits, skew, stragglers and bandwidths of NCCL ops come from GPU times.
 *
 * Definitions in docs/metrics.md ("GPU timeline").
 */
#ifndef COMMSCOPE_ANALYZER_GPU_H
#define COMMSCOPE_ANALYZER_GPU_H

#include "internal.h"

/* One GPU of one rank. */
struct cs_report_gpu_dev {
    int rank;
    int32_t device;
    uint64_t kernels, comm_kernels; /* compute and communication records seen */
    double comm_s, overlapped_s, exposed_s, compute_s, overlap_ratio;
};

/* One communicator, summed over its members' GPUs. */
struct cs_report_gpu_comm {
    char comm[40];
    int comm_size; /* 0 unknown */
    uint64_t kernels;
    double comm_s, overlapped_s, exposed_s, overlap_ratio;
};

struct cs_report_gpu {
    struct cs_report_gpu_dev *devs;
    size_t ndevs;
    struct cs_report_gpu_comm *comms;
    size_t ncomms;
    uint64_t nccl_instances;   /* gpu_nccl launches given to the matcher */
    uint64_t unmatched_launch; /* gpu_nccl records whose launching call was not seen */
    uint64_t late_records;     /* records that came too far out of start order (clipped) */
    double comm_s, overlapped_s, exposed_s, overlap_ratio; /* all GPUs */
};

/* Hooks (analyze.c): every GPU record and every NCCL call of the merged stream, then the end. */
void cs__gpu_event(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k,
                   int64_t tb, int64_t te);
/* Drain the reorder heaps and close the unions; fills the ranks' gpu_* fields. */
void cs__gpu_finish(struct cs__run *run);
/* rep->gpu (owned by rep) from the run; frees the run's GPU state.  Leaves rep->gpu NULL when
 * the run had no GPU records. */
void cs__gpu_report(struct cs__run *run, struct cs_report *rep);
void cs__gpu_free(struct cs__run *run);
void cs__gpu_report_free(struct cs_report *rep);

/* report_gpu.c */
void cs__report_gpu_text(const struct cs_report *rep, FILE *out);
/* Continues the top-level JSON object of cs__report_json (key "gpu"; nothing without GPU). */
void cs__report_gpu_json(const struct cs_report *rep, FILE *out);
/* report_html_gpu.c: the HTML report's GPU overlap (nothing without GPU records). */
void cs__report_gpu_html(const struct cs_report *rep, FILE *f);
/* The representative step's GPU lanes (report_html.c's timeline): the host bar's fill on rows
 * with GPU lanes, the legend, a row's lanes below its host bar at y (returns the height used;
 * 0 on rows without GPU lanes, and cs__report_tl_gpu_height says it first), and the table of the
 * rows' step numbers. */
#define CS_HTML_HOST_OUTSIDE "#d9dde3"
void cs__report_tl_gpu_legend(const struct cs_report_timeline *tl, FILE *f);
int cs__report_tl_gpu_height(const struct cs_report_tl_row *r);
int cs__report_tl_gpu_svg(FILE *f, const struct cs_report_tl_row *r, int lw, int pw, double W,
                          double y);
void cs__report_tl_gpu_table(const struct cs_report_timeline *tl, FILE *f);

#endif
