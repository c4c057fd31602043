/*
 * The Kineto (PyTorch profiler) importer: `commscope analyze --from kineto DIR|FILE...`.
 *
 *   kineto_json.c   streams one trace (gzip or plain JSON) through yajl's event parser and keeps
 *                   only what the model needs: kernels, memcpy/memset, CUDA launches, ac2g flows,
 *                   record_param_comms ops, ProfilerStep annotations, distributedInfo/pg_config
 *   kineto_names.c  NCCL kernel names -> collective class; other communication-looking kernels
 *   kineto.c        one file -> one rank-NNNNN.cst trace (the collector's format: NCCL calls,
 *                   gpu_nccl/gpu_kernel/gpu_memcpy/gpu_memset records, step markers) in a
 *                   temporary run directory, clock alignment from collective completion times,
 *                   then the ordinary pipeline on that directory, through the public API
 *                   (commscope/analyzer.h: open, origin and problems, run, the Kineto section)
 *
 * Memory: one file's kept records at a time (kernels, launches, comms ops: tens of bytes each,
 * far less than their JSON text), plus per rank the end times of its NCCL kernels for the
 * alignment.
 */
#ifndef COMMSCOPE_ANALYZER_KINETO_H
#define COMMSCOPE_ANALYZER_KINETO_H

#include "internal.h"

/* Collective classes of NCCL kernels. */
enum cs__kcoll {
    CS_KC_ALLREDUCE,
    CS_KC_ALLGATHER,
    CS_KC_REDUCESCATTER,
    CS_KC_BROADCAST,
    CS_KC_REDUCE,
    CS_KC_SENDRECV,
    CS_KC_ALLTOALL,
    CS_KC_SEND,
    CS_KC_RECV,
    CS_KC_OTHER,
    CS_KC_N
};
extern const char *const cs__kcoll_names[CS_KC_N];

/* The class of an NCCL kernel named `name` (ncclKernel_*, ncclDevKernel_*, any nccl* kernel), or
 * -1 when the name is not an NCCL kernel. */
int cs__kineto_nccl_class(const char *name);
/* 1 when a kernel that is not NCCL's looks like communication (all-reduce, all-gather, ...). */
int cs__kineto_comm_candidate(const char *name);
/* The op (CS_OP_GLOO_*) of a Gloo span's name ("gloo:all_reduce", "gloo:allgather_coalesced"
 * ...), 0 when it is no collective (send, recv) or not gloo's. */
unsigned cs__kineto_gloo_op(const char *name);
/* The collective class of a record_param_comms "Collective name" ("allreduce", "all_gather",
 * "_allgather_base", "broadcast", "send", ...); -1 unknown. */
int cs__kineto_coll_class(const char *coll);

struct cs_report_kineto_rank {
    int rank;
    char file[256];
    uint64_t kernels, nccl_kernels, by_class[CS_KC_N], memcpys, memsets, candidates;
    uint64_t with_bytes;  /* NCCL kernels whose launching record_param_comms gave sizes */
    int steps;            /* ProfilerStep annotations */
    int first_step;       /* N of the first ProfilerStep#N, -1 none */
    char gpu[64];         /* deviceProperties' name of the GPU most of its kernels ran on */
    uint64_t gloo;        /* Gloo collectives (CPU spans gloo:all_reduce ...) */
    int legacy;           /* the file is in the pre-Kineto profiler's format (a bare array) */
    double offset_s;      /* clock correction added to this rank's times */
    double uncertainty_s; /* its uncertainty (NaN: not estimated) */
    uint64_t aligned_on;  /* collective instances the correction was estimated from */
};

struct cs_report_kineto_candidate {
    char name[128];
    uint64_t count;
    double time_s;
};

struct cs_report_kineto {
    struct cs_report_kineto_rank *ranks;
    size_t nranks;
    struct cs_report_kineto_candidate *cand;
    size_t ncand;
    double max_correction_s, max_uncertainty_s, max_residual_s;
    char clock_note[256];
};

/* ---- one parsed trace (kineto_json.c -> kineto.c) ---- */

enum { CS_KK_KERNEL, CS_KK_MEMCPY, CS_KK_MEMSET };
enum { CS_KCLS_COMPUTE = -1, CS_KCLS_CANDIDATE = -2 }; /* else an enum cs__kcoll */

struct cs__kkernel {
    int64_t ts, dur; /* ns (dur >= 0) */
    uint64_t corr;   /* CUDA correlation id, 0 none */
    uint64_t ext;    /* "External id", 0 none */
    uint64_t bytes;  /* memcpy / memset */
    int64_t pid, tid;
    int32_t dev, stream;
    int16_t cls;   /* CS_KCLS_* or enum cs__kcoll */
    uint8_t kind;  /* CS_KK_* */
    uint32_t coll; /* index + 1 of the comms entry from the kernel's own args, 0 none */
};

struct cs__klaunch {
    uint64_t corr;
    int64_t pid, tid, ts, dur;
};

/* A record_param_comms op (or the collective metadata some PyTorch versions put on kernels). */
struct cs__kcomm {
    int64_t pid, tid, ts, dur;
    uint64_t ext;
    int cls;               /* enum cs__kcoll from "Collective name"; -1 unknown */
    uint64_t in_n, out_n;  /* "In/Out msg nelems"; UINT64_MAX unknown */
    int dtsize;            /* bytes per element of "dtype"; 0 unknown */
    int root;              /* "Root rank", -1 unknown */
    char pg[64], desc[64]; /* process group name and description ("" unknown) */
    int32_t *ranks;        /* "Process Group Ranks" (owned), NULL unknown */
    int nranks;
};

struct cs__kstep {
    int64_t ts, dur;
    int n;
};

struct cs__kflow {
    uint64_t id;
    int64_t pid, tid, ts;
    char ph; /* 's' or 'f' */
};

struct cs__kpg {
    char name[64], desc[64];
    int32_t *ranks; /* owned */
    int nranks;
};

/* A Gloo collective's span ("gloo:all_reduce" ...: PyTorch's CPU backend). */
struct cs__kgloo {
    int64_t ts, dur, tid;
    uint16_t op; /* CS_OP_GLOO_* */
};

/* A CPU annotation that names a step phase (phases.h: DistributedDataParallel.forward,
 * Optimizer.step#..., autograd::engine::evaluate_function ...): an NVTX range of the trace. */
struct cs__kmark {
    int64_t ts, dur, tid;
    uint32_t hash;               /* FNV-1a of the whole name */
    char name[CS_NVTX_NAME_MAX]; /* its first 31 bytes */
};

/* deviceProperties[i]: a GPU of the host, by the id the kernels' "device" gives. */
struct cs__kdev {
    int64_t id;
    char name[64];
};

struct cs__kcand {
    char name[128];
    uint64_t count;
    int64_t ns;
};

#define CS__KVEC(T)                                                                                \
    struct {                                                                                       \
        T *v;                                                                                      \
        size_t n, cap;                                                                             \
    }

/*
 * Why an event of a trace was skipped (counted per file, reported with the first of each).  Times
 * must be finite numbers within 2^61 ns (73 years) of zero, so that a time, a duration and the
 * file's baseTimeNanoseconds always add up without overflow.
 */
enum cs__kskip {
    CS_KSKIP_NEGATIVE_DUR, /* "dur" below zero */
    CS_KSKIP_BAD_TS,       /* "ts" not a finite number (NaN, infinite, a string) */
    CS_KSKIP_TS_RANGE, /* "ts" beyond 2^61 ns, or its time with the base before 0 or past 2^62 */
    CS_KSKIP_BAD_DUR,  /* "dur" not a finite number, or beyond 2^61 ns */
    CS_KSKIP_N
};
/* The reason as a phrase: "events with a negative duration" ... */
extern const char *const cs__kskip_what[CS_KSKIP_N];

struct cs__kfile {
    const char *path;
    int has_dist, rank, world; /* distributedInfo (rank, world -1 when absent) */
    int64_t base_ns;           /* baseTimeNanoseconds, 0 none */
    char nccl_version[32];
    CS__KVEC(struct cs__kkernel) kernels;
    CS__KVEC(struct cs__klaunch) launches;
    CS__KVEC(struct cs__kcomm) comms;
    CS__KVEC(struct cs__kstep) steps;
    CS__KVEC(struct cs__kflow) flows;
    CS__KVEC(struct cs__kpg) pgs;
    CS__KVEC(struct cs__kcand) cands;
    CS__KVEC(struct cs__kdev) devs;
    CS__KVEC(struct cs__kgloo) gloo;
    CS__KVEC(struct cs__kmark) marks;
    uint64_t gloo_other; /* gloo:* spans of no collective known (send, recv, ...) */
    int legacy;          /* the pre-Kineto profiler's format: a bare array of events */
    uint64_t events;
    /* Events skipped, by reason (CS_KSKIP_*), each with the first one ("event 17 (name)"). */
    uint64_t skipped[CS_KSKIP_N];
    char first_skipped[CS_KSKIP_N][160];
    int bad_base;         /* baseTimeNanoseconds was out of range and is ignored */
    int64_t t_min, t_max; /* over all complete events, ns (t_min > t_max: none) */
};

/* Parse the Kineto trace at path (gzip or plain JSON) into f (free with cs__kfile_free).
 * Returns 0, or CS_EIO / CS_EFORMAT / CS_ETRUNC / CS_ENOMEM with a sentence naming the file. */
int cs__kineto_parse(const char *path, struct cs__kfile *f, char *err, size_t errlen);
void cs__kfile_free(struct cs__kfile *f);

/* The import itself is cs_analysis_import_kineto (commscope/analyzer.h): it converts the traces
 * and analyses them through the public API only.  The report's Kineto section is freed here. */
void cs__kineto_report_free(struct cs_report *rep);

/* report_gpu.c */
void cs__report_kineto_text(const struct cs_report *rep, FILE *out);
void cs__report_kineto_json(const struct cs_report *rep, FILE *out);

#endif
