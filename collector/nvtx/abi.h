/*
 * The part of NVTX v3's injection ABI that commscope uses (nvtx3/nvtxDetail/nvtxTypes.h and
 * nvToolsExt.h), declared here so the build never needs the NVTX headers.  check_header.c proves
 * these values against the real headers where /usr/local/cuda/include/nvtx3 exists.
 *
 * A program's NVTX calls (header-only NVTX v3) load the library named by NVTX_INJECTION64_PATH at
 * the first call and call its InitializeInjectionNvtx2(getExportTable).  The injection asks the
 * export table NVTX_ETID_CALLBACKS for each module's function table and writes its handlers into
 * the slots it wants; every later NVTX call of the program goes straight to those handlers.
 */
#ifndef COMMSCOPE_NVTX_ABI_H
#define COMMSCOPE_NVTX_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef void (*cs_nvtx_fn)(void);
typedef const void *(*cs_nvtx_get_export_table)(uint32_t export_table_id);

#define CS_NVTX_ETID_CALLBACKS 1u

/* NvtxExportTableCallbacks */
struct cs_nvtx_callbacks {
    size_t struct_size;
    int (*get_module_function_table)(int module, cs_nvtx_fn ***out_table, unsigned int *out_size);
};

/* NvtxCallbackModule */
#define CS_NVTX_MODULE_CORE 1
#define CS_NVTX_MODULE_CORE2 5

/* NvtxCallbackIdCore */
#define CS_NVTX_CORE_MarkEx 1
#define CS_NVTX_CORE_MarkA 2
#define CS_NVTX_CORE_RangeStartEx 4
#define CS_NVTX_CORE_RangeStartA 5
#define CS_NVTX_CORE_RangeEnd 7
#define CS_NVTX_CORE_RangePushEx 8
#define CS_NVTX_CORE_RangePushA 9
#define CS_NVTX_CORE_RangePop 11

/* NvtxCallbackIdCore2 */
#define CS_NVTX_CORE2_DomainMarkEx 1
#define CS_NVTX_CORE2_DomainRangeStartEx 2
#define CS_NVTX_CORE2_DomainRangeEnd 3
#define CS_NVTX_CORE2_DomainRangePushEx 4
#define CS_NVTX_CORE2_DomainRangePop 5
#define CS_NVTX_CORE2_DomainRegisterStringA 10
#define CS_NVTX_CORE2_DomainCreateA 12

/* nvtxMessageType_t */
#define CS_NVTX_MESSAGE_TYPE_ASCII 1
#define CS_NVTX_MESSAGE_TYPE_REGISTERED 3

/* nvtxEventAttributes_v2 (48 bytes on LP64). */
struct cs_nvtx_attributes {
    uint16_t version;
    uint16_t size;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type;
    int32_t reserved0;
    uint64_t payload;
    int32_t message_type;
    const void *message; /* ascii: const char *; registered: a handle from RegisterStringA */
};

#endif
