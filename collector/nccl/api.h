/*
 * The part of the NCCL 2.x C API (nccl.h) that commscope's wrappers need, declared here so that
 * neither building nor running commscope needs NCCL or CUDA.  The typedef names are NCCL's own so
 * calls.def reads like nccl.h; check_header.c compiles calls.def and consts.def against the real
 * nccl.h (when /usr/local/cuda has one) to prove the two agree.
 *
 * Only opaque handles are passed through: the wrappers never look inside a communicator, a
 * stream or a configuration.
 */
#ifndef COMMSCOPE_NCCL_API_H
#define COMMSCOPE_NCCL_API_H

#include <stddef.h>

typedef struct ncclComm *ncclComm_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct ncclConfig_v22800 ncclConfig_t; /* never dereferenced */

#define CS_NCCL_CONST(name, value) cs__nccl_const_##name = value,
enum cs__nccl_consts {
#include "consts.def"
};
#undef CS_NCCL_CONST

typedef enum {
    ncclSuccess = cs__nccl_const_ncclSuccess,
    ncclUnhandledCudaError = cs__nccl_const_ncclUnhandledCudaError,
    ncclSystemError = cs__nccl_const_ncclSystemError,
    ncclInternalError = cs__nccl_const_ncclInternalError,
    ncclInvalidArgument = cs__nccl_const_ncclInvalidArgument,
    ncclInvalidUsage = cs__nccl_const_ncclInvalidUsage,
    ncclRemoteError = cs__nccl_const_ncclRemoteError,
    ncclInProgress = cs__nccl_const_ncclInProgress,
    ncclNumResults = 8
} ncclResult_t;

/* Data types are passed as NCCL's enum; values beyond the table are sized 0 and warned about. */
typedef enum { ncclDataTypeMax_ = 0x7fffffff } ncclDataType_t;
typedef enum { ncclRedOpMax_ = 0x7fffffff } ncclRedOp_t;

#define NCCL_UNIQUE_ID_BYTES cs__nccl_const_NCCL_UNIQUE_ID_BYTES
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

#endif
