/* Header fields beyond cs_trace_params, set by the front ends inside libcommscope.so. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "front.h"
#include "internal.h"

void cs__trace_set_flags(uint32_t flags)
{
    if (cs__t.open)
        __atomic_fetch_or(&cs__t.hdr->flags, flags, __ATOMIC_RELAXED);
}

void cs__trace_set_identity(uint32_t rank_source, int32_t local_rank)
{
    if (!cs__t.open)
        return;
    cs__t.hdr->rank_source = rank_source;
    cs__t.hdr->local_rank = local_rank;
}

void cs__trace_set_nccl_version(uint32_t version)
{
    if (cs__t.open && !cs__t.hdr->nccl_version)
        cs__t.hdr->nccl_version = version;
}

void cs__trace_set_gpu_timing(uint32_t timing)
{
    if (!cs__t.open)
        return;
    if (cs__t.hdr->gpu_timing != CS_GPU_CUPTI)
        cs__t.hdr->gpu_timing = timing;
}

void cs__trace_count_gpu_drop(uint64_t n)
{
    if (cs__t.open)
        __atomic_fetch_add(&cs__t.hdr->gpu_dropped, n, __ATOMIC_RELAXED);
}

void cs__trace_gpu_note(const char *fmt, ...)
{
    if (!cs__t.open)
        return;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    char *note = cs__t.hdr->gpu_note;
    size_t cap = sizeof cs__t.hdr->gpu_note;
    pthread_mutex_lock(&mu);
    size_t n = strnlen(note, cap - 1);
    if (n && n + 2 < cap - 1) {
        memcpy(note + n, "; ", 2);
        n += 2;
    }
    if (n < cap - 1) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(note + n, cap - n, fmt, ap);
        va_end(ap);
    }
    note[cap - 1] = '\0';
    pthread_mutex_unlock(&mu);
}
