/*
 * A tiny assertion header for commscope's unit tests: every failed check prints where it failed
 * and both operands, and the test goes on so one run shows every failure.  main() returns
 * cs_test_result() (0 pass, 1 fail); return 77 to tell ctest the test was skipped.
 */
#ifndef COMMSCOPE_CS_TEST_H
#define COMMSCOPE_CS_TEST_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int cs_test_failures;
static int cs_test_checks;

#define CS_FAIL_(fmt, ...)                                                                         \
    do {                                                                                           \
        cs_test_failures++;                                                                        \
        fprintf(stderr, "%s:%d: " fmt "\n", __FILE__, __LINE__, __VA_ARGS__);                      \
    } while (0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        cs_test_checks++;                                                                          \
        if (!(cond))                                                                               \
            CS_FAIL_("CHECK(%s) failed", #cond);                                                   \
    } while (0)

#define CHECK_INT(a, op, b)                                                                        \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        cs_test_checks++;                                                                          \
        if (!(a_ op b_))                                                                           \
            CS_FAIL_("CHECK_INT(%s %s %s): %lld vs %lld", #a, #op, #b, a_, b_);                    \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double a_ = (double)(a), b_ = (double)(b), t_ = (double)(tol);                             \
        cs_test_checks++;                                                                          \
        if (!(fabs(a_ - b_) <= t_))                                                                \
            CS_FAIL_("CHECK_NEAR(%s, %s, %s): %.9g vs %.9g (diff %.3g)", #a, #b, #tol, a_, b_,     \
                     a_ - b_);                                                                     \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        cs_test_checks++;                                                                          \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                     \
            CS_FAIL_("CHECK_STR(%s, %s): \"%s\" vs \"%s\"", #a, #b, a_ ? a_ : "(null)",            \
                     b_ ? b_ : "(null)");                                                          \
    } while (0)

/* Substring check: haystack contains needle. */
#define CHECK_CONTAINS(hay, needle)                                                                \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        cs_test_checks++;                                                                          \
        if (!h_ || !n_ || !strstr(h_, n_))                                                         \
            CS_FAIL_("CHECK_CONTAINS(%s, %s): \"%s\" lacks \"%s\"", #hay, #needle,                 \
                     h_ ? h_ : "(null)", n_ ? n_ : "(null)");                                      \
    } while (0)

static inline int cs_test_result(void)
{
    fprintf(stderr, "%d checks, %d failed\n", cs_test_checks, cs_test_failures);
    return cs_test_failures ? 1 : 0;
}

#endif
