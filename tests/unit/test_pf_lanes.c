/* The Perfetto export's lane partition (analyzer/export/perfetto_lanes.c) on hand-made slices. */
#include "cs_test.h"
#include "perfetto_lanes.h"

#define T 7 /* the track's own number */

static int lane_of(struct cs__pf_tracks *t, long i, int64_t b, int64_t e, int *made)
{
    return cs__pf_lane(t, i, b, e, made);
}

int main(void)
{
    struct cs__pf_tracks t = {0};
    int fresh, made;
    long i = cs__pf_track(&t, 0, T, &fresh);
    CHECK_INT(i, ==, 0);
    CHECK_INT(fresh, ==, 1);
    CHECK_INT(cs__pf_track(&t, 0, T, &fresh), ==, 0);
    CHECK_INT(fresh, ==, 0);
    CHECK_INT(cs__pf_track(&t, 1, T, &fresh), ==, 1); /* another rank: another track */

    /* Nesting slices stay on the track; adjacent ones too. */
    CHECK_INT(lane_of(&t, i, 0, 100, &made), ==, T);
    CHECK_INT(made, ==, 0);
    CHECK_INT(lane_of(&t, i, 10, 50, &made), ==, T);
    CHECK_INT(lane_of(&t, i, 50, 100, &made), ==, T); /* ends with its parent */
    CHECK_INT(lane_of(&t, i, 100, 120, &made), ==, T);
    /* Overlapping without nesting: lane 2, a new track number. */
    int l2 = lane_of(&t, i, 110, 200, &made);
    CHECK_INT(l2, ==, CS_PF_LANE_TID);
    CHECK_INT(made, ==, 2);
    /* Inside [110, 200] but across the end of [100, 120]: lane 2 again, nothing made. */
    CHECK_INT(lane_of(&t, i, 115, 150, &made), ==, l2);
    CHECK_INT(made, ==, 0);
    /* Overlaps [100, 120] and [110, 200] without nesting: lane 3. */
    CHECK_INT(lane_of(&t, i, 115, 300, &made), ==, CS_PF_LANE_TID + 1);
    CHECK_INT(made, ==, 3);
    /* After all of them: the track itself (the lowest lane). */
    CHECK_INT(lane_of(&t, i, 300, 310, &made), ==, T);
    /* The same begin, longer second: does not nest, next lane that fits. */
    CHECK_INT(lane_of(&t, i, 300, 320, &made), ==, l2);
    /* Late: before everything on the track. */
    CHECK_INT(lane_of(&t, i, -50, -10, &made), ==, T);
    /* Late, overlapping what lanes 1 and 2 hold, ending before lane 3 begins (115). */
    CHECK_INT(lane_of(&t, i, 40, 112, &made), ==, CS_PF_LANE_TID + 1);
    /* Late and overlapping every lane: a new one. */
    CHECK_INT(lane_of(&t, i, 20, 250, &made), ==, CS_PF_LANE_TID + 2);
    CHECK_INT(made, ==, 4);
    CHECK_INT(t.dropped, ==, 0);

    /* At most CS_PF_MAX_LANES lanes: slices beyond are counted, not placed. */
    long j = cs__pf_track(&t, 2, T, &fresh);
    for (int k = 0; k < CS_PF_MAX_LANES; k++)
        CHECK(lane_of(&t, j, k, 1000 + k, &made) >= 0);
    CHECK_INT(t.v[j].nlanes, ==, CS_PF_MAX_LANES);
    CHECK_INT(lane_of(&t, j, 500, 2000, &made), ==, -1);
    CHECK_INT(t.dropped, ==, 1);
    cs__pf_tracks_free(&t);
    return cs_test_result();
}
