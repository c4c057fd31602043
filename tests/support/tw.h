/*
 * A test-only trace writer: produces rank-NNNNN.cst files in exactly the format of
 * include/commscope/trace.h (docs/trace-format.md), CRCs included, without the collector, so the
 * reader and analyzer can be tested on files whose every byte is known.
 */
#ifndef COMMSCOPE_TESTS_TW_H
#define COMMSCOPE_TESTS_TW_H

#include <stddef.h>
#include <stdint.h>

#include "commscope/trace.h"

struct tw;

/* A writer for one rank (clock samples invalid, run_id and nonce as given).  Never NULL. */
struct tw *tw_new(int rank, int world, uint64_t run_id, uint64_t nonce);
/* A writer for a rank of a GPU job without MPI (CUPTI timing, rank from torchrun variables),
 * traced from t_init to t_finalize.  Never NULL. */
struct tw *tw_new_gpu_rank(int rank, int world, uint64_t run_id, uint64_t nonce, uint64_t t_init,
                           uint64_t t_finalize);
/* The header to adjust (clock samples, t_init, t_finalize, host, flags ...). */
struct cs_file_header *tw_header(struct tw *w);
/* Append an event to thread `thread`'s current block, claiming a new block when it is full. */
void tw_event(struct tw *w, unsigned thread, const struct cs_event *ev);
/* Append a communicator record with the given members (comm rank order); spans blocks if big. */
void tw_comm(struct tw *w, uint64_t id, uint16_t op, int size, int my_rank, const int32_t *members);

/* An NCCL communicator record (kind 2: only my_rank's member known, the others -1) for world rank
 * `rank`, with the GPU trailer (CUDA device, PCI bus id). */
void tw_comm_nccl(struct tw *w, uint64_t id, int size, int my_rank, int rank, int cuda_dev,
                  const char *bus_id);

/* The same for a member of an ncclCommInitAll communicator (op ncclCommInitAll, trailer flag
 * CS_COMM_GPU_MULTI: this process holds several members). */
void tw_comm_nccl_multi(struct tw *w, uint64_t id, int size, int my_rank, int rank, int cuda_dev);

struct tw_opts {
    int partial;     /* write as a rank that died: PARTIAL, header CRC 0, blocks 0 */
    int unsealed;    /* partial: leave the last this-many blocks without CRC */
    int zero_blocks; /* partial: append this many unclaimed all-zero blocks */
    int garbage;     /* partial: fill the slots after `used` of the last block with junk */
};
/* Write the file (closed unless opts says partial).  Returns its size, or -1. */
long tw_write(struct tw *w, const char *path, const struct tw_opts *opts);
void tw_free(struct tw *w);

/* Write `w` as `dir`/rank-NNNNN.cst (rank numbered as given) and free it.  Returns tw_write's
 * result: the size, or -1. */
long tw_write_rank(struct tw *w, const char *dir, int rank);
/* mkdtemp(`tmpl`), saying why on stderr when it fails.  Returns 0, or -1. */
int tw_tmpdir(char *tmpl);
/* rm -rf `dir` (a test's scratch directory), saying so on stderr when it fails. */
void tw_rmtree(const char *dir);

/* An MPI event on thread 0 at [t0 + b us, t0 + e us) on the world communicator, with the given
 * peer, request and aux; MPI_Isend and MPI_Irecv non-blocking with 64 bytes sent or received,
 * MPI_Pcontrol and MPI_Wait on no communicator (comm 0), as the what-if tests script them. */
void tw_mpi_event(struct tw *w, uint64_t t0, uint16_t op, uint64_t b, uint64_t e, int32_t peer,
                  uint64_t req, int32_t aux);

/* The host record of an ncclAllReduce of 1000 floats (1000 bytes each way, aux 7 ncclFloat32) on
 * communicator `comm` at [t_begin, t_end) (ns), with the given seq and launch id, appended to
 * `thread`.  Returns the event written. */
struct cs_event tw_host_allreduce(struct tw *w, unsigned thread, uint64_t comm, uint64_t t_begin,
                                  uint64_t t_end, uint32_t seq, uint64_t launch);

struct cs_report;
/* The JSON report of `rep` (cs__report_json) as a string to free(), or NULL when writing it
 * failed. */
char *tw_report_json(const struct cs_report *rep);

#endif
