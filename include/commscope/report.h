/*
 * The report model: every number a commscope report shows, computed once by the analysis
 * (include/commscope/analyzer.h) and only formatted by the renderers.  NaN means "no value" (null
 * in JSON).  Definitions of the numbers: docs/metrics.md; the JSON form: docs/report-schema.md.
 *
 * The sections behind the pointers declared but not defined here (views, nodes, wire, GPU, Kineto,
 * NCCL point-to-point) are the analyzer's own; their renderers read them.
 */
#ifndef COMMSCOPE_REPORT_H
#define COMMSCOPE_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "commscope/trace.h"

struct cs_report_views;
struct cs_report_nodes;
struct cs_wire_report;
struct cs_report_gpu;
struct cs_report_kineto;
struct cs_report_np2p;

/*
 * The hang and crash diagnosis (analyzer/passes/hang.c), present when some rank did not reach
 * MPI_Finalize.  Times are seconds on rank 0's clock from the run's start (the earliest event).
 */
enum cs_hang_fate {
    CS_FATE_FINALIZED, /* closed its trace at MPI_Finalize */
    CS_FATE_RUNNING,   /* its process was still alive when the trace was read */
    CS_FATE_EXITED,    /* exited without MPI_Finalize (code: the exit status) */
    CS_FATE_SIGNALLED, /* ended by a fatal signal (code: the signal) */
    CS_FATE_VANISHED,  /* gone without warning: SIGKILL, the OOM killer, a lost node */
    CS_FATE_MISSING,   /* no trace at all */
};
/* An enqueued NCCL collective's kernel on one member. */
enum cs_hang_kernel {
    CS_KERNEL_UNTIMED,  /* the rank's GPU work was not timed (no CUPTI, no CUDA events) */
    CS_KERNEL_NOT_DONE, /* timed, and no completion of it (or a later one) was recorded */
};
struct cs_report_hang_call {
    uint16_t op;
    uint64_t comm;
    uint32_t seq;   /* collectives: the instance's sequence number */
    int32_t peer;   /* world rank of the partner or root, -1 none or any */
    int32_t from;   /* MPI_Sendrecv: the world rank it receives from, -1 none or any */
    int32_t tag;    /* point-to-point; wait family: requests */
    uint64_t bytes; /* what it sends (0 unknown) */
    double t_s;     /* in-flight call: when it began; last call: when it ended */
};
struct cs_report_hang_rank {
    int rank;
    char host[CS_HOST_MAX];
    enum cs_hang_fate fate;
    int code;      /* exit status or signal */
    double exit_s; /* when the exit or signal handler ran, NaN unknown */
    int in_call;   /* inside `call` when its trace ends */
    struct cs_report_hang_call call;
    int has_last; /* its last completed call */
    struct cs_report_hang_call last;
};
/* A communicator's oldest collective instance that never completed. */
struct cs_report_hang_coll {
    uint64_t comm;
    int32_t size;
    uint16_t op;
    uint32_t seq;
    int32_t nentered, nmissing;
    int32_t *entered; /* world ranks that entered it, ascending (owned) */
    double *since_s;  /* when each entered */
    uint64_t *bytes;  /* what each contributes (0 unknown) */
    int32_t *missing; /* world ranks that never entered it (owned) */
    int32_t inside;   /* of the entered, those still inside the call when their trace ends */
    int bytes_differ; /* the entered members disagree on the bytes of an op where all send alike */
    /* NCCL communicators: entered = enqueued (the host call); per entered member, its kernel */
    int nccl;
    enum cs_hang_kernel *kernel; /* [nentered] (owned; NULL for MPI) */
    int32_t kernels_open;        /* entered members whose kernel has no recorded completion */
    /* Hosts none of whose members of the communicator entered it (only in a run of several
     * hosts): the node stopped or lost its network, rather than one rank going astray. */
    int32_t nmissing_hosts;
    char (*missing_hosts)[CS_HOST_MAX]; /* (owned) */
};
/* A rank blocked in a point-to-point call or wait, and what it waits for. */
struct cs_report_hang_wait {
    int rank;
    uint16_t op;
    uint64_t comm;
    int32_t peer; /* the rank it waits for; -1 any source or unknown */
    int32_t tag;
    double since_s;
    int cycle; /* index of the deadlock cycle it is in + 1, 0 none */
};
struct cs_report_hang {
    int hung;      /* some rank was inside a call when its trace ends, or an NCCL one is stuck */
    int stopped;   /* some rank did not reach MPI_Finalize */
    double end_s;  /* the latest time any trace reached */
    size_t nranks; /* ranks that did not finalize (and every rank inside a call) */
    struct cs_report_hang_rank *ranks;
    size_t ncolls; /* most ranks waiting first, then oldest */
    struct cs_report_hang_coll *colls;
    size_t nwaits;
    struct cs_report_hang_wait *waits;
    size_t ncycles;
    int32_t *cycle_ranks; /* the cycles' ranks in wait order, back to back */
    size_t *cycle_len;    /* [ncycles] */
};

/* Parallelism dimensions. */
enum cs__dim { CS_DIM_DP, CS_DIM_TP, CS_DIM_PP, CS_DIM_EP, CS_DIM_OTHER, CS_DIM_N };

/* The report model of the step analysis (numbers only).  NaN: no value. */
struct cs_report_step {
    int index;
    int timed; /* used in the statistics */
    double time_s, overlap_ratio, grad_sync_share;
    /* time_s's parts, means over the ranks (they add up to time_s): compute, gradient sync,
     * other communication, waiting at collectives (waiting at point-to-point calls is measured
     * over the run only: it is in comm_s here), other MPI */
    double compute_s, grad_sync_s, comm_s, wait_s, other_mpi_s;
};

/* Reports of bounded size: the JSON and HTML list every step up to CS_REPORT_STEPS_LISTED;
 * beyond, the slowest timed steps, the representative (median) step and the first and last
 * (the distribution is in the histogram; `commscope analyze --steps-csv FILE` writes all). */
#define CS_REPORT_STEPS_LISTED 1000
#define CS_REPORT_STEPS_SLOWEST 50
#define CS_REPORT_STEP_BINS 20

/* Reports of bounded size at any rank count: the JSON lists every rank up to
 * CS_REPORT_RANKS_LISTED ranks; beyond, its per-rank arrays list the ranks at the extremes
 * (struct cs_report's rank_listed: the CS_REPORT_RANKS_EXTREME highest and lowest by wall,
 * compute, communication and waiting time, the CS_REPORT_RANKS_EXTREME that made the others
 * wait longest, and rank 0), and `commscope analyze --ranks-csv FILE` writes every rank. */
#define CS_REPORT_RANKS_LISTED 4096
#define CS_REPORT_RANKS_EXTREME 256
struct cs_report_budget {
    int rank;     /* -1: all ranks */
    double steps; /* rank-steps summed */
    double step_s, compute_s, grad_sync_s, comm_s[CS_DIM_N], wait_s, other_mpi_s, idle_s;
    double p2p_wait_s;   /* of wait_s, at point-to-point calls and their completions */
    double other_comm_s; /* comm_s of every role but TP (the tables' "other comm" column) */
};
struct cs_report_group {
    char comm[40];
    enum cs__dim role;
    char label[24]; /* the words for it: "data parallel", "neighbour exchange", ... */
    int32_t size;
    int32_t *ranks; /* owned */
    double confidence;
    char why[160];
};
struct cs_report_dim {
    enum cs__dim role;
    int comms;
    double time_s, bytes, exposed_share, overlap_ratio;
};
struct cs_report_overlap {
    char comm[40];
    double ratio, overlapped_s, in_flight_s;
};
struct cs_report_whatif {
    double measured_step_s, replayed_step_s, no_straggler_step_s, full_overlap_step_s,
        best_bandwidth_step_s, replay_error;
    char note[256];
};
struct cs_report_steps {
    /* steps */
    int count, warmup_excluded, tail_excluded, timed;
    char source[16];  /* "marker", "nvtx", "pattern" or "none" */
    char detail[224]; /* which marker op, or which call anchors the pattern */
    char note[256];   /* why something could not be computed ("" when all could) */
    double mean_s, median_s, p95_s;
    /* Where the reference rank's trace kept a window (ring mode): the steps of the whole run
     * (-1 when the events outside the window cannot tell) and the mean time between their
     * starts (NaN unknown); else run_count == count and run_mean_s NaN */
    int run_count;
    double run_mean_s;
    struct cs_report_step *list;
    size_t nlist;
    /* The steps the JSON and HTML list (indexes into list, in step order): all of them, or the
     * selection above; rep_step: list index of the representative step (the median timed step,
     * the lower middle one; -1 none) */
    size_t *listed;
    size_t nlisted;
    long rep_step;
    /* Timed steps' times: CS_REPORT_STEP_BINS bins from hist_lo_s to hist_hi_s, of equal
     * ratios (bin b: lo * (hi/lo)^(b/BINS) to lo * (hi/lo)^((b+1)/BINS)) */
    double hist_lo_s, hist_hi_s;
    uint64_t hist[CS_REPORT_STEP_BINS];
    /* budget */
    struct cs_report_budget total;
    struct cs_report_budget *ranks;
    size_t nranks;
    /* gradient synchronisation, per step and rank (means) */
    double grad_share, grad_total_s, grad_exposed_s, grad_wait_s, grad_overlapped_s;
    char grad_note[160];
    /* overlap */
    double overlap_ratio;
    struct cs_report_overlap *overlap;
    size_t noverlap;
    /* groups */
    struct cs_report_group *groups;
    size_t ngroups;
    struct cs_report_dim dims[CS_DIM_N];
    /* POP additions */
    double serialization_efficiency, transfer_efficiency;
    struct cs_report_whatif whatif;
};

/* Step phases (passes/phases.c, docs/metrics.md "Step phases"): each rank's step time split by
 * the annotation ranges open on it (PyTorch profiler annotations of a Kineto trace, NVTX ranges
 * of a live run) into data loading, forward, backward, optimizer and the rest. */
enum cs_phase {
    CS_PHASE_DATA,
    CS_PHASE_FORWARD,
    CS_PHASE_BACKWARD,
    CS_PHASE_OPTIMIZER,
    CS_PHASE_OTHER,
    CS_PHASE_N
};
extern const char *const cs_phase_names[CS_PHASE_N]; /* "data", "forward", ... */

struct cs_report_phase_rank {
    int rank;
    uint64_t steps;            /* steps the times are summed over */
    double step_s;             /* their time */
    double time_s[CS_PHASE_N]; /* of that, each phase's (they add up to step_s) */
    double comm_s[CS_PHASE_N]; /* communication calls inside each phase (host timelines;
                                * NaN for a rank with a GPU timeline) */
    /* GPU work (kernels, copies and sets; not NCCL's) by the phase that launched it, of launches
     * inside the counted steps (NaN: no GPU record names its launch); the work whose launch is
     * unknown or too far back to place */
    double gpu_s[CS_PHASE_N];
    double gpu_unplaced_s;
    /* GPU communication (NCCL kernels) that no compute kernel covered, by the phase the rank was
     * in while it ran (NaN: no GPU timeline) */
    double gpu_exposed_comm_s[CS_PHASE_N];
};

/* One annotation pattern that matched: its phase and the time it held. */
struct cs_report_phase_name {
    char name[48]; /* the pattern's label: "Optimizer.step", "DistributedDataParallel.forward" */
    int phase;
    uint64_t count; /* ranges that began inside the steps */
    double time_s;  /* step time it was the innermost open range, all ranks */
};

struct cs_report_phases {
    char patterns[160]; /* COMMSCOPE_PHASE_NVTX as given ("" the default names) */
    struct cs_report_phase_rank *ranks;
    size_t nranks;
    struct cs_report_phase_name *names;
    size_t nnames;
};

/* Resource use sampled by the collector (COMMSCOPE_SAMPLE_HZ; passes/resources.c, docs/metrics.md
 * "Resource use"): per rank CPU and memory, per node its network interfaces and GPUs, and each as
 * a series over the run in CS_RES_BINS bins.  NaN where a figure is unknown. */
#define CS_RES_BINS 120
#define CS_RES_SERIES 16 /* series drawn per chart; JSON has every one */

struct cs_report_res_rank {
    int rank;
    char host[CS_HOST_MAX];
    uint64_t samples;
    double span_s;       /* first to last sample */
    double cpu_s;        /* process CPU time over that span (every thread) */
    double cpu_util;     /* cpu_s / span_s: cores kept busy (1.0 = one core) */
    double cpu_util_max; /* the most of any interval between two samples */
    double rss_peak_bytes, rss_mean_bytes;
    int gpu; /* the index (into gpus[]) of the GPU this rank drives, -1 unknown */
};

struct cs_report_res_nic {
    char host[CS_HOST_MAX];
    char name[16];
    int32_t speed_mbps; /* -1 unknown */
    double span_s;
    double rx_bytes, tx_bytes; /* over the span */
    double rx_gbps, tx_gbps;   /* mean rates, Gb/s */
    double peak_gbps;          /* the highest rate either way over one sample interval */
    double peak_util;          /* peak_gbps / link speed, NaN speed unknown */
};

struct cs_report_res_gpu {
    char host[CS_HOST_MAX];
    int index;    /* NVML device index on its host */
    char pci[16]; /* its PCI location "BB:DD.F" (NVML), "" unknown */
    int rank;     /* the rank that drives it (its NCCL communicator's bus id), -1 unknown */
    uint64_t samples;
    double util_mean, util_min, util_max; /* % (NVML utilisation.gpu) */
    double mem_peak_bytes, mem_total_bytes;
    double power_mean_w, power_max_w;
    double sm_clock_mean_mhz;
};

struct cs_report_resources {
    double hz;    /* the sampling rate the samples show (median interval), NaN one sample */
    double bin_s; /* the series' bin width; bin b covers [b, b+1) * bin_s from the run's start */
    int nbins;    /* <= CS_RES_BINS */
    struct cs_report_res_rank *ranks; /* the ranks with samples, by rank */
    size_t nranks;
    struct cs_report_res_nic *nics;
    size_t nnics;
    struct cs_report_res_gpu *gpus;
    size_t ngpus;
    /* Series, NaN where a bin holds no interval: [nranks * nbins] CPU utilisation (cores),
     * [ngpus * nbins] GPU utilisation (%), [nnics * nbins] network rate rx + tx (Gb/s). */
    double *cpu, *gpu, *net;
    size_t *cpu_order; /* [nranks] indices into ranks[], the highest cpu_util first */
};

/* Achieved FLOP/s and model FLOP utilisation (--flops-per-step; passes/flops.c, docs/metrics.md):
 * NaN and a note where a figure cannot be given. */
struct cs_report_flops {
    double flops_per_step; /* model FLOPs of one step of the whole job */
    char flops_from[48];   /* "--flops-per-step" or "6 x params x tokens per step" */
    double params, tokens_per_step, samples_per_step; /* as given (NaN: not given) */
    double step_s;                                    /* the mean time of the timed steps */
    int gpus;              /* the job's GPUs: one per rank of the world */
    double achieved_flops; /* flops_per_step / step_s, the whole job */
    double achieved_flops_per_gpu;
    char gpu[64];       /* the GPU model (--gpu, or the traces'), "" unknown */
    char gpu_entry[24]; /* the row of the peak table it is, "" none */
    char precision[8];  /* "bf16", "fp16", "tf32" or "fp32" */
    double peak_flops_per_gpu;
    char peak_from[64]; /* "--peak-flops" or "table: A100, bf16 tensor, dense" */
    double mfu;         /* achieved_flops_per_gpu / peak_flops_per_gpu */
    double tokens_per_s, samples_per_s;
    char note[256]; /* why a figure is missing ("" when none is) */
};

/* The report model: numbers only; renderers format it.  NaN means "no value" (null in JSON). */
struct cs_report_rank {
    int rank;
    char host[CS_HOST_MAX];
    double wall_s, comm_s, compute_s, wait_s;
    uint64_t calls, bytes;
    int partial;
    double offset_init_s, offset_final_s, drift_ppm, rtt_s;
    /* GPU timeline (NaN on ranks without GPU records): union of communication kernels, the part
     * of it covered by compute kernels, comm - overlapped, and overlapped / comm */
    double gpu_comm_s, gpu_overlapped_s, exposed_comm_s, overlap_ratio;
    /* Waiting at point-to-point calls for partners over the whole run (late senders and
     * receivers, from the what-if pass's matching; steps_model.c): NaN when not measured (no
     * complete steps, or the rank's budget comes from a GPU timeline) */
    double p2p_wait_s;
    /* The waits of its partners for it at point-to-point calls over the whole run (each wait
     * booked to the partner that arrived last), NaN as p2p_wait_s */
    double p2p_caused_s;
};
struct cs_report_op {
    char op[40];
    char comm[40];
    int comm_size; /* 0 unknown */
    uint64_t calls, bytes;
    double time_s, algbw_gbps, busbw_gbps;
    /* A row of CS_REPORT_COMMS_OTHER: the communicators folded into it (else 0); its
     * communicators differ in size, so it has no comm_size and no bandwidth */
    uint32_t folded_comms;
};
/* Point-to-point bandwidth by message size (docs/metrics.md "Point-to-point bandwidth"): per
 * log2 bucket of the message's bytes, over matched send/receive pairs whose receive is a
 * blocking call: the transfer (receive end minus the later of the two begins) beside the raw
 * call times. */
#define CS_REPORT_P2P_BUCKETS 48
struct cs_report_p2p_bucket {
    int log2_size; /* messages of [2^k, 2^(k+1)) bytes (k = 0: 0 or 1 byte) */
    uint64_t pairs;
    double mean_bytes;
    double transfer_gbps;                  /* sum of bytes / sum of transfers (GB/s) */
    double recv_call_gbps, send_call_gbps; /* sum of bytes / sum of the calls' durations */
};

/* Beyond CS_REPORT_COMMS_LISTED communicators (passes/bound.c) the per-communicator tables list
 * the busiest (world, self, unattributed and the communicators of a hung collective first, then
 * by call time), and each op's rows on the others are folded into one row, labelled
 * CS_REPORT_COMMS_OTHER, that keeps their totals; beyond CS_REPORT_OPS_LISTED rows of listed
 * communicators, the least busy of them are folded too.  `commscope analyze --ops-csv FILE`
 * writes every row. */
#define CS_REPORT_COMMS_LISTED 256
#define CS_REPORT_OPS_LISTED 1024
#define CS_REPORT_COMMS_OTHER "others"

/* A communicator named by how it was made (docs/metrics.md "Communicator names"). */
struct cs_report_comm {
    char comm[40];  /* its label, as everywhere else in the report */
    char name[128]; /* "world", "split of world (colour 1): ranks 0,2", "NCCL comm of ranks 0-7" */
    int32_t size;
};
struct cs_report_straggler {
    int rank;
    char host[CS_HOST_MAX];
    uint64_t late_arrivals;
    double others_waited_s;
};
struct cs_report {
    char dir[4096];
    char program[CS_PROGRAM_MAX];
    int world_size, hosts;
    uint64_t run_id;
    struct cs_report_rank *ranks;
    size_t nranks;
    struct cs_report_op *ops;
    size_t nops;
    uint64_t matched, incomplete;
    /* Ring-mode traces that kept a window of the run (COMMSCOPE_TRACE_MODE=ring past the cap):
     * how many ranks, the events outside the windows (in the whole-run totals only; of them,
     * those in the totals' catch-all row, whose op is not known), and where the windows start
     * (the latest start of all ranks, s from the run's start; NaN when every event was kept) */
    int window_ranks;
    uint64_t outside_events, outside_unattributed;
    uint64_t window_edge; /* collective instances cut by the windows' start (left out) */
    double window_start_s;
    double mean_skew_s, max_skew_s;
    double load_balance, communication_efficiency, parallel_efficiency;
    struct cs_report_straggler *stragglers;
    size_t nstragglers;
    double max_offset_s, uncertainty_s;
    uint64_t violations_repaired;
    int ranks_expected, ranks_found;
    int *missing, *partial;
    size_t nmissing, npartial;
    uint64_t events, dropped_events, unrecorded_tests;
    /* Ranks whose process made no MPI or NCCL call (CS_FLAG_NO_CALLS): their time split is
     * unknown; what the first of them saw (its header note, "" none). */
    int no_call_ranks;
    char no_calls_note[256];
    char **problems; /* borrowed from the run */
    size_t nproblems;
    struct cs_report_views *views; /* charts and verdict (views.h); NULL when not computed */
    struct cs_report_steps *steps; /* steps, budgets, groups ... (steps.h); owned */
    struct cs_report_nodes *nodes; /* hosts, topology, capacity, scopes (nodes.c); NULL none */
    struct cs_wire_report *wire;   /* the wire section (wire.h), NULL without capture data; owned */
    struct cs_report_gpu *gpu;     /* GPU timeline per GPU and communicator (gpu.h); owned */
    char source[16];               /* trace.source */
    struct cs_report_kineto *kineto; /* what the Kineto import did (kineto.h); owned, or NULL */
    struct cs_report_np2p *np2p;     /* NCCL point-to-point pairs (nccl_p2p.h); owned, or NULL */
    struct cs_report_hang *hang;     /* hang and crash diagnosis (hang.c); owned, or NULL */
    struct cs_report_flops *flops;   /* achieved FLOP/s and MFU (flops.c); owned, or NULL */
    struct cs_report_phases *phases; /* step phases (phases.c); owned, or NULL */
    struct cs_report_resources *resources; /* resource use (resources.c); owned, or NULL */
    struct cs_report_comm *comms;          /* every communicator the run names; owned */
    size_t ncomms;
    /* Where the per-communicator tables are folded (CS_REPORT_COMMS_LISTED, _OPS_LISTED; NULL:
     * not): the op rows (ops_all) and the communicators (comms_all) before the fold, owned.
     * ops and the topology's op rows then hold the listed rows and the folded ones; comms, the
     * step model's groups and overlap the listed communicators (comms: and a last entry for
     * CS_REPORT_COMMS_OTHER) */
    struct cs_report_op *ops_all;
    size_t nops_all;
    struct cs_report_comm *comms_all;
    size_t ncomms_all;
    size_t ncomms_listed;                /* of comms_all, listed (ncomms when not folded) */
    struct cs_report_p2p_bucket *p2p_bw; /* buckets with pairs, by size; owned */
    size_t np2p_bw;
    uint64_t p2p_bw_unmeasured; /* matched pairs with a non-blocking receive */
    /* [world_size] the JSON's per-rank arrays list rank r (CS_REPORT_RANKS_LISTED); NULL:
     * every rank; owned */
    unsigned char *rank_listed;
    size_t nrank_listed; /* ranks listed (nranks when rank_listed is NULL) */
};

/* Whether the JSON's per-rank arrays list rank r. */
static inline int cs_report_rank_listed(const struct cs_report *rep, int r)
{
    return !rep->rank_listed || (r >= 0 && r < rep->world_size && rep->rank_listed[r]);
}

/* The readable name of a communicator label (label itself when the report has none). */
static inline const char *cs_report_comm_name(const struct cs_report *rep, const char *label)
{
    for (size_t i = 0; rep && i < rep->ncomms; i++)
        if (__builtin_strcmp(rep->comms[i].comm, label) == 0)
            return rep->comms[i].name;
    for (size_t i = 0; rep && i < rep->ncomms_all; i++)
        if (__builtin_strcmp(rep->comms_all[i].comm, label) == 0)
            return rep->comms_all[i].name;
    return label;
}

#endif
