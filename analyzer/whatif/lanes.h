/* The what-if replay's scenario lanes and its rounding to whole ns (whatif.c). */
#ifndef COMMSCOPE_ANALYZER_LANES_H
#define COMMSCOPE_ANALYZER_LANES_H

#include <math.h>
#include <stdint.h>

#include "steps_internal.h"

/* llround(x) without the library call (a hot spot of the replay): x - (double)(int64_t)x is exact
 * for |x| < 2^63 (above 2^52 every double is an integer, so the fraction is 0), and ties round
 * away from zero as llround does.  Anything else (NaN, huge) goes to llround. */
static inline int64_t round_ns(double x)
{
    if (!(fabs(x) < 9.2e18))
        return (int64_t)llround(x);
    int64_t i = (int64_t)x;
    double f = x - (double)i;
    return i + (f >= 0.5) - (f <= -0.5); /* no branch: the fraction is random */
}

/* The four scenarios are replayed side by side: per item, each scenario's numbers are one lane
 * of a struct lanes (two GCC vectors of two doubles: SSE2 on x86-64, NEON on aarch64), and every
 * lane does the IEEE operations its scenario needs in the same order as one scenario at a time
 * would, so the results are the same bit for bit (no fused multiply-add on x86-64). */
_Static_assert(SC_N == 4, "struct lanes holds the four scenarios");
typedef double v2d __attribute__((vector_size(2 * sizeof(double))));
struct lanes {
    v2d v[2]; /* scenarios 0, 1 and 2, 3 */
};
#define LANE(l, sc) ((l).v[(sc) >> 1][(sc)&1])

/* Per lane: b where b > a, else a (if (b > a) a = b).  SSE2's maxpd is defined as exactly that
 * (its first operand where it is greater, else the second: also for equal zeros and NaNs), and
 * SSE2 is part of every x86-64; elsewhere element by element. */
static inline v2d vmax(v2d a, v2d b)
{
#if defined(__SSE2__)
    return __builtin_ia32_maxpd(b, a);
#else
    v2d r;
    r[0] = b[0] > a[0] ? b[0] : a[0];
    r[1] = b[1] > a[1] ? b[1] : a[1];
    return r;
#endif
}

static inline struct lanes lanes_max(struct lanes a, struct lanes b)
{
    return (struct lanes){{vmax(a.v[0], b.v[0]), vmax(a.v[1], b.v[1])}};
}

/* Sync points are the latest of the rounded arrivals waited for (cs__whatif_sync).  Rounding is
 * monotonic, so that is the rounded latest arrival: found in doubles and rounded once. */
static inline struct lanes lanes_round(struct lanes x)
{
    struct lanes r;
    for (int sc = 0; sc < SC_N; sc++)
        LANE(r, sc) = (double)round_ns(LANE(x, sc));
    return r;
}

#endif
