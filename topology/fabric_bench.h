/*
 * What cs_fabric's files share (fabric_bench.c: the MPI benchmark; fabric_nccl.c: the NCCL sweep).
 */
#ifndef COMMSCOPE_FABRIC_BENCH_H
#define COMMSCOPE_FABRIC_BENCH_H

#include <stddef.h>

#include <mpi.h>

/* The collective sweep: sizes min_bytes, min_bytes * factor, ... up to max_bytes. */
struct cs__fabric_sweep {
    size_t min_bytes, max_bytes;
    int factor;
};

/* Iterations timed per size (after one warm-up call), the same for MPI and NCCL. */
int cs__fabric_iters(size_t bytes);

/* Print one "@cs-fabric ..." result line on rank 0's stdout (other ranks: nothing). */
void cs__fabric_emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The "coll" result line of one collective and size: worst = the slowest rank's mean time per
 * call (s), algbw and busbw (nccl-tests' factor for op over n ranks) from it; none when worst
 * is 0. */
void cs__fabric_emit_coll(const char *transport, const char *name, int op, size_t bytes, int n,
                          double worst);

/*
 * The NCCL sweep (fabric_nccl.c), collective over world: every rank loads libcudart and libnccl
 * with dlopen, takes GPU local_rank modulo the device count, and the communicator is bootstrapped
 * over MPI.  mode "off" skips it.  When any rank cannot take part (no library, no GPU, an NCCL
 * error), rank 0 prints one "nccl available=0 reason=..." line and nothing more is measured with
 * NCCL; the MPI results stand.  Never aborts the job for a missing GPU or library.
 */
void cs__fabric_nccl(MPI_Comm world, int local_rank, const struct cs__fabric_sweep *s,
                     const char *mode);

#endif
