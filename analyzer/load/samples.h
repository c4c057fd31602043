/*
 * Resource samples (ops 210-212, docs/trace-format.md "Resource samples") decoded from a rank's
 * sampler blocks (cs_reader_sample_block) onto rank 0's clock: for the resources pass and the
 * Perfetto export, which both read them apart from the event stream.
 */
#ifndef COMMSCOPE_ANALYZER_SAMPLES_H
#define COMMSCOPE_ANALYZER_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* One decoded sample on rank 0's clock (aligned ns). */
struct cs__sample {
    int64_t t;
    uint16_t op; /* CS_OP_SAMPLE_PROC, _NIC or _GPU */
    /* PROC: a = CPU ns, b = resident bytes; NIC: a = rx bytes, b = tx bytes, name, speed;
     * GPU: a = memory used, b = memory total, c = power mW, d = SM MHz, util, index, pci. */
    uint64_t a, b, c, d;
    uint32_t util; /* GPU %, UINT32_MAX unknown */
    int32_t index; /* GPU: NVML index; NIC: link speed Mb/s (-1 unknown) */
    int32_t pci;   /* GPU: bus << 8 | device << 3 | function, -1 unknown */
    char name[16]; /* NIC */
};

/* Call fn for each of rank r's samples in recording order (by time), stopping when it returns
 * non-zero.  Returns the number of samples visited. */
size_t cs__samples_each(struct cs__run *run, int r,
                        int (*fn)(void *arg, int r, const struct cs__sample *s), void *arg);

#endif
