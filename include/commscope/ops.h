/*
 * Operation ids, names and properties, expanded from ops.def.  Shared by the collector and the
 * analyzer so op ids cannot drift between them.
 */
#ifndef COMMSCOPE_OPS_H
#define COMMSCOPE_OPS_H

#include <stddef.h>
#include <stdint.h>

enum cs_op_kind {
    CS_KIND_NONE = 0,
    CS_KIND_LIFE,   /* MPI_Init, MPI_Finalize */
    CS_KIND_MARK,   /* markers (MPI_Pcontrol) */
    CS_KIND_COMM,   /* communicator lifecycle */
    CS_KIND_COLL,   /* blocking collective */
    CS_KIND_ICOLL,  /* non-blocking collective initiation */
    CS_KIND_P2P,    /* blocking point-to-point */
    CS_KIND_IP2P,   /* non-blocking point-to-point initiation */
    CS_KIND_WAIT,   /* completion call (wait/test family) */
    CS_KIND_DONE,   /* one request completed (CS_OP_COMPLETE) */
    CS_KIND_NCOLL,  /* NCCL collective: host enqueue; GPU time in CS_KIND_GPU records */
    CS_KIND_NP2P,   /* NCCL send/recv: host enqueue */
    CS_KIND_GROUP,  /* ncclGroupStart / ncclGroupEnd */
    CS_KIND_GPU,    /* GPU activity record (kernel, memcpy, memset, NCCL kernel) */
    CS_KIND_SAMPLE, /* resource sample (CPU, memory, NIC, GPU use), by the collector's sampler */
};

/* Who waits for whom in a collective instance. */
enum cs_op_pattern {
    CS_PAT_NONE = 0,
    CS_PAT_NXN,    /* everybody waits for the last arrival */
    CS_PAT_1TON,   /* non-roots wait for the root */
    CS_PAT_NTO1,   /* the root waits for the last arrival */
    CS_PAT_PREFIX, /* rank i waits for the last of ranks 0..i */
};

/* nccl-tests bus-bandwidth factor families (n = communicator size). */
enum cs_op_busbw {
    CS_BW_NONE = 0,
    CS_BW_ZERO,      /* no payload (barrier) */
    CS_BW_ONE,       /* busbw = algbw */
    CS_BW_ALLREDUCE, /* busbw = algbw * 2(n-1)/n */
    CS_BW_NM1_N,     /* busbw = algbw * (n-1)/n */
};

enum cs_op {
    CS_OP_NONE = 0,
#define CS_OP(e, id, name, kind, pat, bw) e = id,
#include "commscope/ops.def"
#undef CS_OP
    CS_OP_MAX = 256
};

struct cs_op_info {
    const char *name; /* NULL for an unknown id */
    enum cs_op_kind kind;
    enum cs_op_pattern pattern;
    enum cs_op_busbw busbw;
};

/* Properties of op id `op`; never NULL (name NULL for ids not in the table). */
const struct cs_op_info *cs_op_info(unsigned op);

/* Name of op id `op`, or "op#N" style static text "unknown" for ids not in the table. */
const char *cs_op_name(unsigned op);

/* Op id for an MPI name ("MPI_Allreduce"), or CS_OP_NONE. */
enum cs_op cs_op_by_name(const char *name);

/* nccl-tests bus-bandwidth factor for op with n ranks (0 when it has no meaning). */
double cs_op_busbw_factor(unsigned op, int n);

/* 1 for collective ops (blocking or not). */
int cs_op_is_collective(unsigned op);

/* 1 for NCCL communication calls (collectives, send, recv). */
int cs_op_is_nccl(unsigned op);

/* CRC-32 (IEEE 802.3, as zlib's crc32) of len bytes, continuing from crc (start with 0); uses
 * carry-less multiplication where the CPU has it (crc.c). */
uint32_t cs_crc32(uint32_t crc, const void *buf, size_t len);

/* The same CRC-32, byte at a time: the reference the tests check cs_crc32 against. */
uint32_t cs_crc32_simple(uint32_t crc, const void *buf, size_t len);

#endif
