/*
 * hang: the hang and crash diagnosis.  Which collective each communicator is stuck in, who
 * entered it and who never did; the ranks blocked in point-to-point calls, what they wait for and
 * the cycles among them (deadlocks); how every rank that did not reach MPI_Finalize ended.
 *
 * Takes the collective instances matching closes incomplete (its instance hook), the NCCL
 * collectives each member enqueued and those whose kernels completed (its event hook), the calls in
 * flight and the last calls from the readers (cs_reader_tails) and the exit records from the
 * headers; builds rep->hang (include/commscope/report.h) in its report hook, after the views,
 * whose timing findings it withdraws when the job hung (they would describe a step that never
 * ended).  Definitions: docs/metrics.md, "Hang diagnosis".
 */
#ifndef COMMSCOPE_ANALYZER_HANG_H
#define COMMSCOPE_ANALYZER_HANG_H

#include <stddef.h>
#include <stdio.h>

#include "internal.h"

struct cs__hang;

/* An NCCL collective's enqueue (CS_KIND_NCOLL) or an NCCL kernel's record (CS_OP_GPU_NCCL) of
 * world rank r, tb its aligned begin. */
void cs__hang_event(struct cs__run *run, int r, const struct cs_event *ev, int64_t tb);
/* An instance matching closed incomplete: kept when it is its communicator's oldest so far. */
void cs__hang_instance(struct cs__run *run, const struct cs__inst *in);
/* Build rep->hang when some rank did not reach MPI_Finalize (NULL otherwise). */
void cs__hang_report(struct cs__run *run, struct cs_report *rep);
void cs__hang_free(struct cs__run *run);
void cs__hang_report_free(struct cs_report *rep);

/* Whether the diagnosis found the job hung or a rank gone before MPI_Finalize (exit status 4 of
 * commscope analyze). */
int cs__hang_found(const struct cs_report *rep);

/* The diagnosis in sentences, most important first, for the verdict (render/report_hang.c):
 * writes up to max sentences of at most n bytes each into out[i * n]; returns how many. */
#define CS__HANG_MAX 24 /* sentences the renderers ask for */
#define CS__HANG_N 1024 /* bytes per sentence */
size_t cs__hang_sentences(const struct cs_report *rep, char *out, size_t n, size_t max);
/* The text report's section (after the verdict); nothing without rep->hang. */
void cs__hang_text(const struct cs_report *rep, FILE *f);
/* The JSON report's "hang" member (after the others; nothing without rep->hang). */
void cs__hang_json(const struct cs_report *rep, FILE *out, int depth);
/* The HTML report's section. */
void cs__hang_html(const struct cs_report *rep, FILE *f);
/* "finalized", "running", "exited", "signalled", "vanished", "missing" (the JSON's words). */
const char *cs__hang_fate_name(enum cs_hang_fate f);

#endif
