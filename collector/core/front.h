/*
 * Hidden helpers that the front ends built into libcommscope.so itself (collector/nccl/,
 * collector/cuda/) use to fill the parts of the trace header beyond cs_trace_params (hdr.c), and
 * the rank identity of jobs without MPI (ident.c).  Not exported.
 */
#ifndef COMMSCOPE_CORE_FRONT_H
#define COMMSCOPE_CORE_FRONT_H

#include <stddef.h>
#include <stdint.h>

#include "collector.h"

/* Set header flag bits (CS_FLAG_*) of the open trace; no-op without one. */
void cs__trace_set_flags(uint32_t flags);
/* Record where the rank identity came from and the node-local rank. */
void cs__trace_set_identity(uint32_t rank_source, int32_t local_rank);
/* Record the NCCL version code (first non-zero value wins). */
void cs__trace_set_nccl_version(uint32_t version);
/* Record the GPU timing source (enum cs_gpu_timing); a later CS_GPU_EVENTS does not replace
 * CS_GPU_CUPTI for a process that used both. */
void cs__trace_set_gpu_timing(uint32_t timing);
/* Count n GPU activity records lost. */
void cs__trace_count_gpu_drop(uint64_t n);
/* Set the header's note (what the trace is about, as one sentence; truncated at its size). */
void cs__trace_set_note(const char *note);
/* Append one sentence to gpu_note ("; " separated, truncated at the field's size). */
void cs__trace_gpu_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Called (when set) right after every successful cs_trace_open, before tracing starts. */
extern void (*cs__trace_open_hook)(void);
/* Called (when set) at the start of cs_trace_close, while tracing is still on: the GPU side
 * flushes its pending records into the trace. */
extern void (*cs__trace_close_hook)(void);

/* Rank identity of a process started without MPI, from the environment (ident.c). */
struct cs__ident {
    int rank, size;       /* 0 and 1 when nothing says otherwise */
    int local_rank;       /* -1 unknown */
    uint32_t source;      /* enum cs_rank_source */
    const char *rank_var; /* the variable the rank came from, or "" */
};

/*
 * Fill *id from, in this order: RANK/WORLD_SIZE (torchrun), SLURM_PROCID/SLURM_NTASKS, Open MPI's
 * OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, PMI_RANK/PMI_SIZE; a pair that is missing half or
 * malformed is warned about and skipped.  Without any: rank 0 of 1 (CS_RANKSRC_SINGLE).
 * local_rank from LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
 * PMI_LOCAL_RANK (first valid).
 */
void cs__ident_from_env(struct cs__ident *id);
/* The local rank alone, from those variables; -1 when none gives one. */
int cs__ident_local_rank(void);

/*
 * The run id all ranks of a job without MPI agree on: COMMSCOPE_RUN_ID (hex, set by `commscope
 * run`), else a hash of the job's identity variables (TORCHELASTIC_RUN_ID, SLURM_JOB_ID,
 * SLURM_STEP_ID, MASTER_ADDR, MASTER_PORT, COMMSCOPE_DIR) and the world size.
 */
uint64_t cs__ident_run_id(int world_size);

/*
 * A clock sample against CLOCK_REALTIME, for ranks without MPI: local_ns is this rank's clock,
 * offset_ns = CLOCK_REALTIME - local clock at that instant, rtt_ns the width of the best bracket.
 * The analyzer turns such samples (CS_FLAG_NO_MPI) into offsets to rank 0.
 */
void cs__clock_sample_realtime(struct cs_clock_sample *s);

/* ---- the root service of jobs without MPI (root.c, include/commscope/root.h) ---- */

/*
 * Where the root service is: COMMSCOPE_ROOT=HOST:PORT (or [ADDR]:PORT; "off": none), else
 * MASTER_ADDR with port MASTER_PORT + 1.  Returns 1 with host/port and the source (for messages)
 * filled, 0 when none is configured, -1 when the variables are malformed (warned).
 */
int cs__root_where(char *host, size_t hcap, char *port, size_t pcap, char *src, size_t scap);
/*
 * Connect (timeout COMMSCOPE_ROOT_TIMEOUT_MS, default 5000 ms, also for every later read and
 * write), say hello (enum cs_root_kind) and read the answer.  Returns the socket with *rounds
 * set, or -1 with the reason as a sentence fragment in err.
 */
int cs__root_open(const char *host, const char *port, uint32_t kind, int rank, int size,
                  uint64_t run_id, const char *path, uint32_t *rounds, char *err, size_t cap);
/* Run the clock rounds on fd (cs_clock_pingpong against the service's CLOCK_REALTIME).
 * Returns 0 with *s valid, -1 when a round failed. */
int cs__root_clock(int fd, uint32_t rounds, struct cs_clock_sample *s);
/* Offer the trace at path (header nonce) and stream it: the whole file, or its first `limit`
 * bytes when limit is not 0 (a live trace's claimed part).  Returns 0 when the service has it,
 * -1 with the reason in err.  Does not close fd. */
int cs__root_send_file(int fd, const char *path, uint64_t nonce, uint64_t limit, char *err,
                       size_t cap);

#endif
