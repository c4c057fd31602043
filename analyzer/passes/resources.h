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
#include "samples.h"

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
