/*
 * Step phases (phases.c): each rank's step time split by the annotation ranges open on it --
 * NVTX ranges of a live run, the PyTorch profiler's annotations of a Kineto import (which become
 * NVTX records) -- into data loading, forward, backward, optimizer and other.  At every instant of
 * a step the innermost open range that names a phase decides (none: other); the communication
 * calls of host timelines are booked to the phase they begin in.  Names match the patterns of
 * COMMSCOPE_PHASE_NVTX first, then the defaults (docs/metrics.md "Step phases").
 */
#ifndef COMMSCOPE_ANALYZER_PHASES_H
#define COMMSCOPE_ANALYZER_PHASES_H

#include <stddef.h>
#include <stdio.h>

#include "internal.h"

#define CS__PHASE_PATS 48

/* The patterns in the order they are tried: COMMSCOPE_PHASE_NVTX's, then the defaults. */
struct cs__phase_pats {
    struct cs__phase_pat {
        char pat[48];   /* fnmatch(3) pattern over the range's name (its first 31 bytes) */
        char label[48]; /* what the report calls it */
        int phase;      /* enum cs_phase */
    } v[CS__PHASE_PATS];
    int n;
    char env[160]; /* COMMSCOPE_PHASE_NVTX as given */
    char err[200]; /* why (part of) it was not understood, "" none */
};

/* Fill *p from COMMSCOPE_PHASE_NVTX ("phase=pattern[,pattern][;phase=...]") and the defaults. */
void cs__phase_pats_init(struct cs__phase_pats *p);
/* The index of the first pattern that matches name (at most its first 31 bytes), -1 none. */
int cs__phase_match(const struct cs__phase_pats *p, const char *name);

/* Rank's phase at the last event the pass saw (enum cs_phase), or -1: not inside a step, or the
 * pass is off; and whether any range naming a phase was seen so far.  For the rows below (the
 * Perfetto export). */
int cs__phases_now(const struct cs__run *run, int rank);
int cs__phases_seen(const struct cs__run *run);

/* The pass's hooks (passes.def). */
void cs__phases_begin(struct cs__run *run);
void cs__phases_event(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k,
                      int64_t tb, int64_t te);
void cs__phases_rank_done(struct cs__run *run, int rank);
/* GPU communication of rank not covered by compute over [t, e) (aligned; CS__FACT_GPU_EXPOSED). */
void cs__phases_exposed(struct cs__run *run, int rank, int64_t t, int64_t e);
void cs__phases_report(struct cs__run *run, struct cs_report *rep);
void cs__phases_free(struct cs__run *run);
void cs__phases_report_free(struct cs_report *rep);

/* report_phases.c */
void cs__phases_text(const struct cs_report *rep, FILE *out);
void cs__phases_json(const struct cs_report *rep, FILE *out);
void cs__phases_html(const struct cs_report *rep, FILE *out);

#endif
