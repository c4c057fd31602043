/*
 * The report model's chart-ready part (views.c): numbers the HTML report draws and the verdict
 * states, computed by the analyzer so the renderers only format them.  Everything here is derived
 * from the merged event stream (cs__views_event), the collective instances (cs__views_wait,
 * cs__views_transfer) and the finished report (cs__views_build).  Formulas: docs/metrics.md,
 * "Report views".
 */
#ifndef COMMSCOPE_ANALYZER_VIEWS_H
#define COMMSCOPE_ANALYZER_VIEWS_H

#include <stddef.h>
#include <stdint.h>

#include "commscope/trace.h"

#define CS_VIEW_HEAT_BINS 64  /* time bins of the wait heat map */
#define CS_VIEW_BW_BUCKETS 48 /* message-size buckets: [2^k, 2^(k+1)) bytes, bucket 0 = [0, 2) */
#define CS_VIEW_MAX_ROWS 128  /* at most this many rows per chart; more ranks are grouped */
#define CS_VIEW_RANK_BARS 64  /* one bar per rank up to this many ranks, then per node */

/* Segments of a rank's wall time; they add up to wall_s. */
enum cs_seg {
    CS_SEG_COMPUTE,    /* outside communication calls */
    CS_SEG_COLL,       /* in collective calls, not waiting for a later member */
    CS_SEG_P2P,        /* in point-to-point calls */
    CS_SEG_COMPLETION, /* in wait/test calls, not waiting for a later member */
    CS_SEG_WAIT,       /* waiting for the last member of collective instances */
    CS_SEG_N
};

/* One bar of the per-rank breakdown: a rank, a node, or a block of consecutive ranks (means). */
struct cs_report_bar {
    char label[96];
    int first_rank; /* lowest rank in the bar */
    int nranks;
    double wall_s;          /* mean over the bar's ranks */
    double seg_s[CS_SEG_N]; /* mean over the bar's ranks */
    double comm_s;          /* its communication: collectives, point-to-point, completion, wait */
    double rest_s;          /* wall time in no segment (ranks with GPU records), 0 up to rounding */
    double len_s;           /* the bar's length: its wall time, or its segments' sum if more */
};

/* Bandwidth of one message-size bucket of one (op, communicator). */
struct cs_report_bw_point {
    int log2_size;     /* bucket: sizes in [2^k, 2^(k+1)) */
    uint64_t samples;  /* instances (collectives) or calls/requests (point-to-point) */
    double mean_bytes; /* mean message size in the bucket */
    double algbw_gbps; /* sum of bytes / sum of transfer times */
    double busbw_gbps; /* algbw x the op's nccl-tests factor */
};

struct cs_report_bw_curve {
    char op[40];
    char comm[40];
    int comm_size;
    /* What the hardware allows for this curve's bus bandwidth (GB/s): the bottleneck path's
     * capacity from the hosts' topology snapshots (nodes.c) / 8, and where that number comes
     * from; NaN and "" while unknown.  The HTML report draws it as a dashed line. */
    double capacity_gbps;
    char capacity_source[96];
    size_t npoints;
    struct cs_report_bw_point pt[CS_VIEW_BW_BUCKETS];
};

/* The representative step's timeline (views_steps.c): what each shown rank did during one step,
 * times in seconds from the earliest shown rank's begin of that step. */
enum cs_tl_kind {
    CS_TL_COLL,     /* a collective call (blocking, or a non-blocking initiation) */
    CS_TL_P2P,      /* a point-to-point call */
    CS_TL_DONE,     /* a wait/test call */
    CS_TL_OTHER,    /* any other traced call (markers, communicator creation ...) */
    CS_TL_INFLIGHT, /* a non-blocking request in flight (initiation to completion record) */
    CS_TL_N
};
struct cs_report_tl_seg {
    double t0_s, t1_s;
    unsigned char kind; /* enum cs_tl_kind */
    signed char dim;    /* the communicator's parallelism role (enum cs__dim), -1 none */
};
/* A piece of a GPU lane: kind CS_TL_G_* on lane (0 compute, 1 + c communicator c). */
enum cs_tl_gkind { CS_TL_G_COMPUTE, CS_TL_G_OVERLAPPED, CS_TL_G_EXPOSED };
struct cs_report_tl_gseg {
    double t0_s, t1_s;
    unsigned char kind; /* enum cs_tl_gkind */
    unsigned char lane;
};
#define CS_VIEW_TL_LANES 6
#define CS_VIEW_TL_GPU_ROWS 16
struct cs_report_tl_row {
    int rank;
    char host[CS_HOST_MAX];
    double begin_s, end_s; /* the rank's own step */
    double calls_s;        /* time inside traced calls (the step's rest is compute) */
    double inflight_s;     /* requests in flight within the step (union not taken) */
    size_t nseg;
    struct cs_report_tl_seg *seg; /* owned; adjacent calls closer than 1/4000 of the window
                                     are merged */
    int truncated;                /* more than CS_VIEW_TL_SEGS segments: the rest is left out */
    /* Ranks with a GPU timeline (views_steps_gpu.c): lanes of the step's GPU records, clipped to
     * the step [begin_s, end_s) on the aligned clock -- lane 0 the compute kernels, lane 1 + c
     * communicator lane_comm[c]'s NCCL kernels split into overlapped and exposed pieces.  The
     * numbers are those of the step budget (steps_gpu.c, docs/metrics.md): gpu_comm_s the union
     * of all NCCL kernels, of it gpu_overlapped_s under a compute kernel and gpu_exposed_s not,
     * gpu_compute_s the union of compute kernels, gpu_idle_s neither running. */
    int gpu;
    double gpu_compute_s, gpu_comm_s, gpu_overlapped_s, gpu_exposed_s, gpu_idle_s;
    size_t nlanes; /* communicator lanes (at most CS_VIEW_TL_LANES; more are merged into the
                      last one, named "other") */
    char (*lane_comm)[40];
    size_t ngseg;
    struct cs_report_tl_gseg *gseg; /* owned */
    int gtruncated;
};
#define CS_VIEW_TL_SEGS 2000
struct cs_report_timeline {
    int step;        /* step index (the median timed step) */
    double step_s;   /* its time (mean over ranks, as in the steps table) */
    double window_s; /* from the earliest begin to the latest end over the shown rows */
    int ranks_total; /* ranks in the report; rows show at most CS_VIEW_RANK_BARS of them */
    int gpu_rows;    /* rows with GPU lanes (then at most CS_VIEW_TL_GPU_ROWS rows are shown) */
    size_t nrows;
    struct cs_report_tl_row *rows;
};

/* The share of the ranks' summed wall time their compute must reach for the verdict to speak of
 * its balance. */
#define CS_VIEW_COMPUTE_MATERIAL 0.10

/* One statement of the verdict; the renderers phrase it (report_verdict.c). */
enum cs_finding_kind {
    CS_FIND_STRAGGLER,    /* rank, count late of total eligible, v0 others waited s, v1 % of
                             their wall time, v2 % of the others' step time spent waiting for
                             it inside timed steps (NaN without steps; views_steps.c) */
    CS_FIND_NO_STRAGGLER, /* rank (-1 none late at all), count late of total eligible */
    CS_FIND_COMM_SHARE,   /* v0 mean comm % of wall, rank with most, v1 its %, v2 waiting % of
                             communication time; count 1 when that waiting includes waits for
                             point-to-point partners */
    CS_FIND_IMBALANCE,    /* v0 load balance, v1 mean compute s, rank with max, v2 its compute s */
    CS_FIND_BALANCED,     /* v0 load balance */
    CS_FIND_INCOMPLETE,   /* count missing of total ranks, v0 partial ranks, v1 dropped events,
                             v2 incomplete instances */
    CS_FIND_NO_COMM,      /* no communication call was recorded */
    CS_FIND_NO_CALLS,     /* count ranks of total made no MPI or NCCL call; note: what the first
                             one saw, after "no MPI or NCCL call; " (may be "") */
    CS_FIND_GRAD_SYNC,    /* v0 gradient-sync % of each step, v1 exposed s per step, v2 mean
                             step s (views_steps.c) */
    CS_FIND_GPU_COMM,     /* v0 GPU communication s (ranks with GPU records), v1 % of it
                             overlapped by compute kernels, v2 exposed s (views_gpu.c) */
    CS_FIND_P2P_WAIT,     /* v0 % of each step waiting at point-to-point calls, rank with most,
                             note "pp" when a group is pipeline stages,
                             v1 its %, v2 s per rank-step; count: 1 + the rank its partners
                             waited for most (0 unknown), v3 that wait over the run, s
                             (views_steps.c) */
    CS_FIND_RES_CPU,      /* after the straggler: its rank's v0 CPU utilisation (cores), v1 the
                             median of the other ranks', v2 its CPU s, v3 its compute share of
                             its wall time (NaN unknown) (resources.c) */
    CS_FIND_RES_GPU,      /* the least busy GPU (< 50 %): count its index, rank, v0 mean
                             utilisation %, v1 its rank's data-loading % of the step (NaN
                             unknown), v2 its rank's waiting at collectives % of wall time
                             (resources.c) */
};

struct cs_report_finding {
    enum cs_finding_kind kind;
    int rank;
    char host[CS_HOST_MAX];
    uint64_t count, total;
    double v[4];
    char note[160]; /* words of the evidence, where a kind says so */
};

struct cs_report_views {
    /* Per rank, in the order of cs_report.ranks[]: the wall-time segments. */
    double (*seg_s)[CS_SEG_N];
    uint64_t *eligible; /* complete NxN / N-to-1 instances (n > 1) the rank took part in */
    /* The breakdown chart: one bar per rank (<= CS_VIEW_RANK_BARS ranks), else per node, else per
     * block of consecutive ranks, never more than CS_VIEW_MAX_ROWS bars. */
    struct cs_report_bar *bars;
    size_t nbars;
    const char *bars_by; /* "rank", "node" or "rank block" */
    /* Wait heat map: heat_rows x heat_bins seconds of waiting (mean per rank of the row) per time
     * bin of heat_bin_s seconds from the run's start; rows as the bars (same grouping rule). */
    size_t heat_rows, heat_bins;
    double heat_bin_s;
    double *heat_wait_s;    /* [heat_rows * heat_bins] */
    char (*heat_label)[96]; /* [heat_rows] */
    const char *heat_by;
    /* Point-to-point bytes sent, p2p_n x p2p_n, [from * p2p_n + to], ranks grouped in blocks of
     * p2p_block consecutive ranks (1 = per rank). */
    size_t p2p_n;
    int p2p_block;
    uint64_t *p2p_bytes;
    uint64_t p2p_total;
    /* Bandwidth against message size, per (op, communicator), in the order of cs_report.ops[]. */
    struct cs_report_bw_curve *bw;
    size_t nbw;
    /* The verdict, most important first. */
    struct cs_report_finding *findings;
    size_t nfindings;
    /* Run facts. */
    char command[1024]; /* the `command:` line of commscope-run.txt, "" if none */
    double span_s;      /* run start (earliest aligned MPI_Init) to the last aligned end */
    int clock_linear, clock_constant, clock_none; /* ranks with 2 / 1 / 0 valid offset samples */
    double max_drift_ppm;                         /* largest |drift| */
    /* Analyses that do not exist in this analyzer yet: their sections say so. */
    int has_steps, has_groups, has_whatif;
    /* With steps (views_steps.c) the heat map's columns are steps instead of time bins: column c
     * holds steps [c * heat_steps_per_col, (c + 1) * heat_steps_per_col) of heat_nsteps, each
     * cell the mean seconds waited per step; heat_outside_s (mean per rank) fell outside every
     * step and is not drawn. */
    int heat_by_step, heat_steps_per_col, heat_nsteps;
    int waits_p2p; /* the waiting (segments, heat map) includes waits for point-to-point partners */
    double heat_outside_s;
    /* One representative step (the median timed one); NULL with timeline_note saying why. */
    struct cs_report_timeline *timeline;
    char timeline_note[200];
};

#endif
