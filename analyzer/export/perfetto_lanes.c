/* Lanes of the Perfetto export's tracks: a greedy nesting partition (see perfetto_lanes.h). */
#include "perfetto_lanes.h"

#include <stdlib.h>
#include <string.h>

long cs__pf_track(struct cs__pf_tracks *t, int rank, int tid, int *fresh)
{
    uint64_t *v = cs__map_put(&t->idx, (uint64_t)(uint32_t)rank, (uint64_t)(uint32_t)tid, fresh);
    if (!v)
        return -1;
    if (!*fresh)
        return (long)*v - 1;
    if (cs__grow((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v)) {
        cs__map_del(&t->idx, (uint64_t)(uint32_t)rank, (uint64_t)(uint32_t)tid);
        return -1;
    }
    t->v[t->n] = (struct cs__pf_track){.rank = rank, .tid = tid, .sort = INT32_MIN};
    *v = ++t->n;
    return (long)t->n - 1;
}

/* Does [b, e] nest in lane l?  Nothing is changed. */
static int fits(const struct cs__pf_lane *l, int64_t b, int64_t e)
{
    if (b >= l->last_b) {
        size_t k = l->n;
        while (k > 0 && l->ends[k - 1] <= b)
            k--;
        return k == 0 || l->ends[k - 1] >= e;
    }
    return e <= l->first_b;
}

static int place(struct cs__pf_lane *l, int64_t b, int64_t e)
{
    if (b < l->last_b) { /* before everything in the lane: the open slices stay as they are */
        l->first_b = b;
        return 0;
    }
    while (l->n > 0 && l->ends[l->n - 1] <= b)
        l->n--;
    if (cs__grow((void **)&l->ends, &l->cap, l->n + 1, sizeof *l->ends))
        return -1;
    l->ends[l->n++] = e;
    l->last_b = b;
    if (b < l->first_b)
        l->first_b = b;
    return 0;
}

int cs__pf_lane(struct cs__pf_tracks *t, long i, int64_t b, int64_t e, int *lane)
{
    struct cs__pf_track *tr = &t->v[i];
    *lane = 0;
    if (e < b)
        e = b;
    for (size_t k = 0; k < tr->nlanes; k++) {
        if (fits(&tr->lanes[k], b, e)) {
            if (place(&tr->lanes[k], b, e)) {
                t->dropped++;
                return -1;
            }
            return tr->lanes[k].tid;
        }
    }
    if (tr->nlanes >= CS_PF_MAX_LANES) {
        t->dropped++;
        return -1;
    }
    struct cs__pf_lane *n = realloc(tr->lanes, (tr->nlanes + 1) * sizeof *n);
    if (!n) {
        t->dropped++;
        return -1;
    }
    tr->lanes = n;
    struct cs__pf_lane *l = &n[tr->nlanes];
    *l = (struct cs__pf_lane){.first_b = b, .last_b = b};
    if (place(l, b, e)) {
        t->dropped++;
        return -1;
    }
    if (tr->nlanes == 0) {
        l->tid = tr->tid;
    } else {
        if (!t->next_tid)
            t->next_tid = CS_PF_LANE_TID;
        l->tid = t->next_tid++;
        *lane = (int)tr->nlanes + 1;
    }
    tr->nlanes++;
    return l->tid;
}

void cs__pf_tracks_free(struct cs__pf_tracks *t)
{
    for (size_t i = 0; i < t->n; i++) {
        for (size_t k = 0; k < t->v[i].nlanes; k++)
            free(t->v[i].lanes[k].ends);
        free(t->v[i].lanes);
    }
    free(t->v);
    cs__map_free(&t->idx);
    *t = (struct cs__pf_tracks){0};
}
