/*
 * Resource use (resources.c): the collector's resource samples (COMMSCOPE_SAMPLE_HZ; ops 210-212,
 * docs/trace-format.md "Resource samples") turned into per-rank CPU and memory figures, per-node
 * network interface and GPU figures, series over the run, and the verdict's sentences that join
 * them to the waiting (docs/metrics.md "Resource use").  The samples live apart from the event
 * stream (cs_reader_sample_block), so the pass reads them in its begin hook, before the merge;
 * its report hook bins nothing more, it only hands the section over and adds its findings.
 */
#ifndef COMMSCOPE_ANALYZER_RESOURCES_H
#define COMMSCOPE_ANALYZER_RESOURCES_H

#include <stdio.h>

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

/* The pass's hooks (passes.def). */
void cs__res_begin(struct cs__run *run);
void cs__res_report(struct cs__run *run, struct cs_report *rep);
void cs__res_free(struct cs__run *run);
void cs__res_report_free(struct cs_report *rep);

/* report_resources.c */
void cs__res_text(const struct cs_report *rep, FILE *out);
void cs__res_json(const struct cs_report *rep, FILE *out);
void cs__res_html(const struct cs_report *rep, FILE *out);

#endif
