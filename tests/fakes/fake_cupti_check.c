/*
 * Compile-time proof that the record layouts fake_cupti.c writes (and collector/cuda/gpu.c reads)
 * are CUPTI's own: built only where /usr/local/cuda has cupti_activity.h.
 */
#include <stddef.h>

#include <cupti_activity.h>

#define SAME(T, field, off) _Static_assert(offsetof(T, field) == (off), #T "." #field)
SAME(CUpti_ActivityKernel10, start, 16);
SAME(CUpti_ActivityKernel10, end, 24);
SAME(CUpti_ActivityKernel10, deviceId, 40);
SAME(CUpti_ActivityKernel10, contextId, 44);
SAME(CUpti_ActivityKernel10, streamId, 48);
SAME(CUpti_ActivityKernel10, correlationId, 92);
SAME(CUpti_ActivityKernel10, name, 104);
SAME(CUpti_ActivityKernel10, graphNodeId, 144);
SAME(CUpti_ActivityKernel10, graphId, 156);
_Static_assert(sizeof(CUpti_ActivityKernel10) == 216, "kernel record size");
SAME(CUpti_ActivityMemcpy6, bytes, 8);
SAME(CUpti_ActivityMemcpy6, start, 16);
SAME(CUpti_ActivityMemcpy6, end, 24);
SAME(CUpti_ActivityMemcpy6, deviceId, 32);
SAME(CUpti_ActivityMemcpy6, contextId, 36);
SAME(CUpti_ActivityMemcpy6, streamId, 40);
SAME(CUpti_ActivityMemcpy6, correlationId, 44);
SAME(CUpti_ActivityMemcpy6, graphId, 72);
_Static_assert(sizeof(CUpti_ActivityMemcpy6) == 96, "memcpy record size");
SAME(CUpti_ActivityMemset4, bytes, 8);
SAME(CUpti_ActivityMemset4, start, 16);
SAME(CUpti_ActivityMemset4, end, 24);
SAME(CUpti_ActivityMemset4, deviceId, 32);
SAME(CUpti_ActivityMemset4, contextId, 36);
SAME(CUpti_ActivityMemset4, streamId, 40);
SAME(CUpti_ActivityMemset4, correlationId, 44);
SAME(CUpti_ActivityMemset4, graphId, 72);
_Static_assert(sizeof(CUpti_ActivityMemset4) == 88, "memset record size");
SAME(CUpti_ActivityExternalCorrelation, externalKind, 4);
SAME(CUpti_ActivityExternalCorrelation, externalId, 8);
SAME(CUpti_ActivityExternalCorrelation, correlationId, 16);
_Static_assert(sizeof(CUpti_ActivityExternalCorrelation) == 24, "external correlation size");
SAME(CUpti_ActivityAPI, correlationId, 32);
_Static_assert(sizeof(CUpti_ActivityAPI) == 40, "API record size");
_Static_assert(CUPTI_ACTIVITY_KIND_DRIVER == 4 && CUPTI_ACTIVITY_KIND_RUNTIME == 5, "API kinds");
_Static_assert(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL == 10 && CUPTI_ACTIVITY_KIND_MEMCPY == 1 &&
                   CUPTI_ACTIVITY_KIND_MEMSET == 2 &&
                   CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION == 39,
               "activity kinds");
_Static_assert(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED == 39 &&
                   CUPTI_ERROR_MAX_LIMIT_REACHED == 12 && CUPTI_ERROR_NOT_SUPPORTED == 27,
               "CUPTI error codes");
_Static_assert(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 == 3, "external correlation kind");
