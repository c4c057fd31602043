/*
 * The core collector's interface to its front ends (the MPI wrappers in libcommscope_mpi.so,
 * later NCCL and CUDA).  Implemented in collector/core/, exported from libcommscope.so.
 *
 * Hot path: cs_rec_begin() + fill + cs_rec_commit(): no locks, no allocation, no system calls
 * except a block claim every CS_EVENTS_PER_BLOCK events (which may extend the file).
 */
#ifndef COMMSCOPE_COLLECTOR_H
#define COMMSCOPE_COLLECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "commscope/ops.h"
#include "commscope/trace.h"

#define CS_EXPORT __attribute__((visibility("default")))

/* Nonzero while tracing is on.  Front ends test it before doing any work. */
CS_EXPORT extern volatile int cs_active;

/*
 * Current time in ns on this rank's clock (CLOCK_MONOTONIC, plus the test-only artificial offset
 * and drift of COMMSCOPE_TEST_CLOCK_SKEW=RANK:OFFSET_NS:DRIFT_PPM when it names this rank).
 */
CS_EXPORT uint64_t cs_now(void);

/* What the front end knows when it opens the trace (at MPI_Init). */
struct cs_trace_params {
    int rank;
    int world_size;
    uint32_t thread_level;
    uint64_t run_id;
    uint64_t t_init;
    int exclusive; /* never replace an existing trace file of this rank (then not tracing) */
};

/*
 * Read COMMSCOPE_* configuration, create the rank's trace file (rank-NNNNN.cst in the local trace
 * directory), map it and write the header with CS_FLAG_PARTIAL.  Returns 0, or -1 after warning
 * once and leaving tracing off (the program goes on untraced).
 */
CS_EXPORT int cs_trace_open(const struct cs_trace_params *p);

/*
 * A slot for one event in the calling thread's current block, or NULL when tracing is off or the
 * event was dropped at the cap (then counted in the header).  The slot is zeroed.  Fill it, then
 * call cs_rec_commit(); a slot not committed is not seen by readers.
 */
CS_EXPORT struct cs_event *cs_rec_begin(void);
CS_EXPORT void cs_rec_commit(struct cs_event *ev);

/* Append one communicator-table entry (copied).  Returns 0 or -1. Takes a lock: not hot. */
CS_EXPORT int cs_trace_add_comm(const struct cs_comm_record *rec);

/*
 * Set the header's t_init: when MPI_Init returned to the program, stamped after the collector's
 * own start-up work (clock alignment, trace file, node helpers) so that work is not counted as
 * the program's time.
 */
CS_EXPORT void cs_trace_set_t_init(uint64_t t_init);

/* Store clock sample idx (0 = at init, 1 = at finalize) into the header. */
CS_EXPORT void cs_trace_set_clock(int idx, const struct cs_clock_sample *s);

/*
 * One round trip of a clock ping-pong: send this rank's clock t1 to the reference, and store the
 * reference's clock on reply in *t0.  Returns 0, or non-zero when the exchange failed.
 */
typedef int (*cs_clock_exchange_fn)(void *ctx, uint64_t t1, uint64_t *t0);

/*
 * Measure this rank's clock against a reference by `rounds` ping-pongs through `exchange` and
 * keep the round with the smallest round trip: out->local_ns = its middle on this clock,
 * offset_ns = reference - local, rtt_ns = that round trip, rounds = `rounds`, valid = 1.  Stops at
 * the first failed exchange.  Returns 0 when at least one round completed (out valid), else -1.
 */
CS_EXPORT int cs_clock_pingpong(uint32_t rounds, cs_clock_exchange_fn exchange, void *ctx,
                                struct cs_clock_sample *out);

/* Count an MPI_Test* call that completed nothing (not recorded as an event). */
CS_EXPORT void cs_trace_count_test(uint64_t ns);

/*
 * Close the trace: record t_finalize, seal every block (CRC), set blocks/events, clear
 * CS_FLAG_PARTIAL, write the header CRC, unmap.  Tracing is off afterwards.  Idempotent.
 */
CS_EXPORT void cs_trace_close(uint64_t t_finalize);

/* Path of this rank's trace file (valid after cs_trace_open), else "". */
CS_EXPORT const char *cs_trace_path(void);

/* The run directory where rank 0 collects every trace (COMMSCOPE_DIR). */
CS_EXPORT const char *cs_run_dir(void);

/* Whether MPI_Finalize brings the traces of a job of `world` ranks into the run directory
 * (COMMSCOPE_GATHER: always; never; auto, the default: up to CS_GATHER_AUTO_MAX ranks). */
#define CS_GATHER_AUTO_MAX 256
CS_EXPORT int cs_gather_traces(int world);

/* Where this rank writes before the gather (COMMSCOPE_LOCAL_DIR expanded; valid after
 * cs_trace_open), else the run directory. */
CS_EXPORT const char *cs_local_dir(void);

/* The header of the open trace (for the front end's read-only use), or NULL. */
CS_EXPORT const struct cs_file_header *cs_trace_header(void);

/*
 * Write n bytes at fd's offset, retrying short writes and EINTR, refusing with EFBIG anything that
 * would cross the file-size limit (RLIMIT_FSIZE) instead of letting the kernel send SIGXFSZ.  For
 * every file the collector writes besides the trace.  Returns 0 or an errno value.
 */
CS_EXPORT int cs_write_all(int fd, const void *buf, size_t n);

/* Print "commscope[rank N]: <message>" on stderr with write(2). */
CS_EXPORT void cs_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Turn the collector off with one warning; the trace keeps what it has, with CS_FLAG_DISABLED and
 * the reason in the header note.  The program continues untouched.
 */
CS_EXPORT void cs_disable(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
