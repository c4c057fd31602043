/*
 * The report's per-communicator tables bounded (bound.c): the last pass of the table
 * (passes.def), after every other pass has read the full tables.
 */
#ifndef COMMSCOPE_ANALYZER_BOUND_H
#define COMMSCOPE_ANALYZER_BOUND_H

#include "internal.h"

/* Beyond CS_REPORT_COMMS_LISTED communicators: the listed ones' rows, each op's others folded
 * into one row (report.h); the rows before the fold kept for --ops-csv. */
void cs__bound_report(struct cs__run *run, struct cs_report *rep);
void cs__bound_report_free(struct cs_report *rep);

#endif
