/*
 * Lanes of the Perfetto export's tracks.  Chrome trace-event slices on one (pid, tid) track must
 * nest: each slice lies inside the one enclosing it or starts at or after its end.  Slices that
 * overlap without nesting (NCCL kernels of one communicator on two streams, calls of two threads
 * on one communicator's track) are put on lanes: extra tracks named "<track> · lane N" next to the
 * first one.  The partition is greedy and deterministic: a slice goes to the lowest-numbered lane
 * it nests in given the slices that lane holds, a new lane when none.
 *
 * A lane keeps its open slices as a stack of end times (the slices enclosing the latest one), the
 * latest begin and the earliest begin.  A slice [b, e] fits a lane when
 *   - b is not before the lane's latest begin (the stream's usual order) and, of the lane's open
 *     slices, the innermost still running at b (end > b) ends at or after e, or none runs at b; or
 *   - it ends at or before the lane's earliest begin (a record delivered late, before all of it).
 * Two slices that begin together nest only if the longer one came first; otherwise the second
 * takes another lane.  Memory: per lane its nesting depth.
 */
#ifndef COMMSCOPE_ANALYZER_PERFETTO_LANES_H
#define COMMSCOPE_ANALYZER_PERFETTO_LANES_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define CS_PF_MAX_LANES 256       /* per track; a slice that fits none of them is not written */
#define CS_PF_LANE_TID 1500000000 /* first track number of extra lanes */

struct cs__pf_lane {
    int tid;
    int64_t first_b, last_b;
    int64_t *ends; /* open slices' ends, outermost first */
    size_t n, cap;
};

struct cs__pf_track {
    int rank, tid;
    int sort; /* thread_sort_index of the track, INT32_MIN when none */
    char name[120];
    struct cs__pf_lane *lanes; /* [0] is the track itself */
    size_t nlanes;
};

struct cs__pf_tracks {
    struct cs__map idx; /* (rank, tid) -> index + 1 */
    struct cs__pf_track *v;
    size_t n, cap;
    int next_tid;     /* next lane track number */
    uint64_t dropped; /* slices that fit no lane */
};

/* Track (rank, tid), created unnamed when new (*fresh = 1); its index, -1 without memory. */
long cs__pf_track(struct cs__pf_tracks *t, int rank, int tid, int *fresh);

/* The track number of the lane slice [b, e] goes to on track i.  A new lane's number in *lane
 * (2, 3, ...) when one was made for it (the caller names it), else 0.  -1: over
 * CS_PF_MAX_LANES lanes or out of memory (the slice is counted in dropped and not written). */
int cs__pf_lane(struct cs__pf_tracks *t, long i, int64_t b, int64_t e, int *lane);

void cs__pf_tracks_free(struct cs__pf_tracks *t);

#endif
