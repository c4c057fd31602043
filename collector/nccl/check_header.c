/*
 * Compile-time check (built only where /usr/local/cuda/include/nccl.h exists): every row of
 * calls.def and queries.def has exactly the real function's type, and every constant of
 * consts.def its real value.  The rows are expanded here with nccl.h's own types, so a
 * parameter list that differs from NCCL's fails to compile.  Nothing here runs.
 */
#include <nccl.h>

#define CS_NCCL(fam, name, op, params, args)                                                       \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&nccl##name), ncclResult_t(*) params),  \
                   "calls.def row " #name " differs from nccl.h");                                 \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&pnccl##name), ncclResult_t(*) params), \
                   "calls.def row " #name " differs from nccl.h (pnccl)");
#define CS_NCCL_Q(name, params, args) CS_NCCL(Q, name, 0, params, args)
#include "calls.def"
#include "queries.def"
#undef CS_NCCL
#undef CS_NCCL_Q

#define CS_NCCL_CONST(name, value) _Static_assert((name) == (value), #name " differs from nccl.h");
#include "consts.def"
#undef CS_NCCL_CONST

_Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is 128 bytes");

/* The translation unit must not be empty. */
int cs__nccl_header_checked(void);
int cs__nccl_header_checked(void)
{
    return NCCL_VERSION_CODE;
}
