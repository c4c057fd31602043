/* The what-if's median (cs__whatif_median, analyzer/whatif/whatif.c) against a full sort: sizes
 * 0..300 (the small path, the partitions and their boundaries), few distinct values (ties on every
 * side of the partitions) and many, NaN-free. */
#include <stdlib.h>
#include <string.h>

#include "cs_test.h"
#include "steps_internal.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    static double c[301], s[301];
    srand(12345); /* the same values every run */
    CHECK(cs__whatif_median(c, 0) == 0);
    for (int distinct = 1; distinct <= 1 << 20; distinct *= 8)
        for (size_t m = 1; m <= 300; m++)
            for (int rep = 0; rep < 3; rep++) {
                for (size_t i = 0; i < m; i++)
                    c[i] = (double)(rand() % distinct) * 0.25 - 7;
                if (rep == 2) /* already sorted, then reversed: the partitions' worst orders */
                    qsort(c, m, sizeof *c, cmp);
                if (rep == 2 && (m & 1))
                    for (size_t i = 0; i < m / 2; i++) {
                        double t = c[i];
                        c[i] = c[m - 1 - i];
                        c[m - 1 - i] = t;
                    }
                memcpy(s, c, m * sizeof *c);
                qsort(s, m, sizeof *s, cmp);
                double want = m % 2 ? s[m / 2] : (s[m / 2 - 1] + s[m / 2]) / 2;
                double got = cs__whatif_median(c, m);
                if (got != want)
                    fprintf(stderr, "m %zu distinct %d rep %d: %.17g, want %.17g\n", m, distinct,
                            rep, got, want);
                CHECK(got == want);
                /* the same values, in some order */
                qsort(c, m, sizeof *c, cmp);
                CHECK(memcmp(c, s, m * sizeof *c) == 0);
            }
    return cs_test_result();
}
