/*
 * Compile-time proof that abi.h matches the real NVTX v3 headers (built only where
 * /usr/local/cuda/include/nvtx3 exists; never linked).
 */
#include <stddef.h>

#include "nvtx3/nvToolsExt.h"

#include "abi.h"

#define SAME(a, b) _Static_assert((a) == (b), #a " differs from " #b)

SAME(CS_NVTX_ETID_CALLBACKS, NVTX_ETID_CALLBACKS);
SAME(CS_NVTX_MODULE_CORE, NVTX_CB_MODULE_CORE);
SAME(CS_NVTX_MODULE_CORE2, NVTX_CB_MODULE_CORE2);
SAME(CS_NVTX_CORE_MarkEx, NVTX_CBID_CORE_MarkEx);
SAME(CS_NVTX_CORE_MarkA, NVTX_CBID_CORE_MarkA);
SAME(CS_NVTX_CORE_RangeStartEx, NVTX_CBID_CORE_RangeStartEx);
SAME(CS_NVTX_CORE_RangeStartA, NVTX_CBID_CORE_RangeStartA);
SAME(CS_NVTX_CORE_RangeEnd, NVTX_CBID_CORE_RangeEnd);
SAME(CS_NVTX_CORE_RangePushEx, NVTX_CBID_CORE_RangePushEx);
SAME(CS_NVTX_CORE_RangePushA, NVTX_CBID_CORE_RangePushA);
SAME(CS_NVTX_CORE_RangePop, NVTX_CBID_CORE_RangePop);
SAME(CS_NVTX_CORE2_DomainMarkEx, NVTX_CBID_CORE2_DomainMarkEx);
SAME(CS_NVTX_CORE2_DomainRangeStartEx, NVTX_CBID_CORE2_DomainRangeStartEx);
SAME(CS_NVTX_CORE2_DomainRangeEnd, NVTX_CBID_CORE2_DomainRangeEnd);
SAME(CS_NVTX_CORE2_DomainRangePushEx, NVTX_CBID_CORE2_DomainRangePushEx);
SAME(CS_NVTX_CORE2_DomainRangePop, NVTX_CBID_CORE2_DomainRangePop);
SAME(CS_NVTX_CORE2_DomainRegisterStringA, NVTX_CBID_CORE2_DomainRegisterStringA);
SAME(CS_NVTX_CORE2_DomainCreateA, NVTX_CBID_CORE2_DomainCreateA);
SAME(CS_NVTX_MESSAGE_TYPE_ASCII, NVTX_MESSAGE_TYPE_ASCII);
SAME(CS_NVTX_MESSAGE_TYPE_REGISTERED, NVTX_MESSAGE_TYPE_REGISTERED);
SAME(sizeof(struct cs_nvtx_attributes), sizeof(nvtxEventAttributes_t));
SAME(offsetof(struct cs_nvtx_attributes, size), offsetof(nvtxEventAttributes_t, size));
SAME(offsetof(struct cs_nvtx_attributes, message_type),
     offsetof(nvtxEventAttributes_t, messageType));
SAME(offsetof(struct cs_nvtx_attributes, message), offsetof(nvtxEventAttributes_t, message));
SAME(offsetof(struct cs_nvtx_callbacks, get_module_function_table),
     offsetof(NvtxExportTableCallbacks, GetModuleFunctionTable));
SAME(sizeof(nvtxRangeId_t), sizeof(uint64_t));

/* The entry point's type. */
int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);
