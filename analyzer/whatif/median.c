/* The median of a window's values, by selection (cs__whatif_median, steps_internal.h). */
#include <stddef.h>

#include "steps_internal.h"

/* The k-th and (k+1)-th smallest of c[lo..hi-1] (k + 1 < hi - lo, at most 24 values; *v1 only
 * when v1 is not NULL): the values whose ranks, ties broken by position, are k and k + 1.  Every
 * comparison is done, in loops the compiler vectorises, so nothing mispredicts (a window's ranks
 * come in no order). */
static void kth_small(const double *c, size_t lo, size_t hi, size_t k, double *v0, double *v1)
{
    for (size_t i = lo; i < hi; i++) {
        double x = c[i];
        size_t r = 0;
        for (size_t j = lo; j < i; j++)
            r += c[j] <= x;
        for (size_t j = i + 1; j < hi; j++)
            r += c[j] < x;
        if (r == k)
            *v0 = x;
        else if (v1 && r == k + 1)
            *v1 = x;
    }
}

/* The k-th smallest of c[0..m-1] (k < m), and the (k+1)-th in *v1 when v1 is not NULL (k + 1 < m),
 * reordering c: three-way partitions around a median of three until at most 24 values are left
 * (or the two are apart). */
static double kth(double *c, size_t m, size_t k, double *v1)
{
    size_t lo = 0, hi = m;
    while (hi - lo > 24) {
        double a = c[lo], b = c[lo + (hi - lo) / 2], d = c[hi - 1];
        double p = a < b ? (b < d ? b : a < d ? d : a) : (a < d ? a : b < d ? d : b);
        size_t lt = lo, i = lo, gt = hi; /* [lo, lt) < p, [lt, i) == p, [gt, hi) > p */
        while (i < gt) {
            double x = c[i];
            if (x < p) {
                c[i++] = c[lt];
                c[lt++] = x;
            } else if (x > p) {
                c[i] = c[--gt];
                c[gt] = x;
            } else {
                i++;
            }
        }
        if (v1 && k + 1 == lt) { /* the largest below p, and p */
            *v1 = p;
            return kth(c + lo, lt - lo, lt - lo - 1, NULL);
        }
        if (k < lt) {
            hi = lt;
        } else if (k < gt) {
            if (v1) /* p, or the smallest above p */
                *v1 = k + 1 < gt ? p : kth(c + gt, hi - gt, 0, NULL);
            return p;
        } else {
            lo = gt;
        }
    }
    double x = 0;
    kth_small(c, lo, hi, k - lo, &x, v1);
    return x;
}

/* The median of c[0..m-1] (0 when m is 0), reordering c: the middle value, or the mean of the
 * two middle ones. */
double cs__whatif_median(double *c, size_t m)
{
    if (!m)
        return 0;
    if (m % 2)
        return kth(c, m, m / 2, NULL);
    double hi, lo = kth(c, m, m / 2 - 1, &hi);
    return (lo + hi) / 2;
}
