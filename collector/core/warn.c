/* Warnings on stderr and the collector's off switch. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

int cs__rank = -1;

/* Set by the first cs_disable of a trace; cleared when the trace is closed. */
static _Atomic int disable_latch;

static void vwarn(const char *fmt, va_list ap)
{
    char buf[1024];
    int n = cs__rank >= 0 ? snprintf(buf, sizeof buf, "commscope[rank %d]: ", cs__rank)
                          : snprintf(buf, sizeof buf, "commscope: ");
    if (n < 0)
        return;
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    if (m < 0)
        m = 0;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof buf - 2)
        len = sizeof buf - 2; /* truncated message: still one line */
    buf[len++] = '\n';
    /* One write(2) so lines of different ranks sharing a terminal do not interleave. */
    ssize_t w = write(2, buf, len);
    (void)w;
}

void cs_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwarn(fmt, ap);
    va_end(ap);
}

void cs_disable(const char *fmt, ...)
{
    if (atomic_exchange(&disable_latch, 1))
        return;
    __atomic_store_n(&cs_active, 0, __ATOMIC_RELAXED);

    char reason[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    cs_warn("tracing off: %s", reason);

    if (cs__t.open) {
        struct cs_file_header *h = cs__t.hdr;
        memcpy(h->note, reason, sizeof h->note);
        h->note[sizeof h->note - 1] = '\0';
        __atomic_fetch_or(&h->flags, CS_FLAG_DISABLED, __ATOMIC_RELEASE);
        cs__hdr_seal();
    }
}

void cs__storage_failed(const char *fmt, ...)
{
    if (atomic_exchange(&cs__t.storage_failed, 1))
        return;
    char reason[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (cs__ring_active())
        cs_warn("recording stopped: %s; the program goes on, and the trace keeps its newest "
                "events in the space it has (ring mode; the older ones count in its totals)",
                reason);
    else
        cs_warn("recording stopped: %s; the program goes on, and the events it makes from now on "
                "are counted as dropped",
                reason);
    if (cs__t.open) {
        struct cs_file_header *h = cs__t.hdr;
        memcpy(h->note, reason, sizeof h->note);
        h->note[sizeof h->note - 1] = '\0';
        __atomic_fetch_or(&h->flags, CS_FLAG_STORAGE, __ATOMIC_RELEASE);
        cs__hdr_seal();
    }
}

int cs__disable_requested(void)
{
    return atomic_load(&disable_latch);
}

void cs__disable_reset(void)
{
    atomic_store(&disable_latch, 0);
}
