/* Header fields beyond cs_trace_params, set by the front ends inside libcommscope.so. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "front.h"
#include "internal.h"

static pthread_mutex_t seal_mu = PTHREAD_MUTEX_INITIALIZER;

void cs__hdr_seal(void)
{
    if (!cs__t.hdr)
        return;
    /* Serialised, so the last seal is computed over every change made before it. */
    pthread_mutex_lock(&seal_mu);
    union {
        struct cs_file_header h;
        unsigned char page[CS_HEADER_SIZE];
    } c;
    memcpy(c.page, cs__t.hdr, CS_HEADER_SIZE);
    cs_header_live_view(&c.h);
    __atomic_store_n(&cs__t.hdr->live_crc, cs_crc32(0, c.page, CS_HEADER_SIZE), __ATOMIC_RELEASE);
    pthread_mutex_unlock(&seal_mu);
}

void cs__trace_set_flags(uint32_t flags)
{
    if (!cs__t.open)
        return;
    __atomic_fetch_or(&cs__t.hdr->flags, flags, __ATOMIC_RELAXED);
    cs__hdr_seal();
}

void cs__trace_set_identity(uint32_t rank_source, int32_t local_rank)
{
    if (!cs__t.open)
        return;
    cs__t.hdr->rank_source = rank_source;
    cs__t.hdr->local_rank = local_rank;
    cs__hdr_seal();
}

void cs__trace_set_nccl_version(uint32_t version)
{
    if (cs__t.open && !cs__t.hdr->nccl_version) {
        cs__t.hdr->nccl_version = version;
        cs__hdr_seal();
    }
}

void cs__trace_set_gpu_timing(uint32_t timing)
{
    if (!cs__t.open)
        return;
    if (cs__t.hdr->gpu_timing != CS_GPU_CUPTI) {
        cs__t.hdr->gpu_timing = timing;
        cs__hdr_seal();
    }
}

void cs__trace_set_note(const char *note)
{
    if (!cs__t.open)
        return;
    snprintf(cs__t.hdr->note, sizeof cs__t.hdr->note, "%s", note);
    cs__hdr_seal();
}

void cs__trace_count_gpu_drop(uint64_t n)
{
    if (cs__t.open)
        cs__counter_add(&cs__t.hdr->gpu_dropped, CS_COUNTER_GPU_DROPPED, n);
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
    cs__hdr_seal();
}
