/*
 * The collector's clock: CLOCK_MONOTONIC, plus the test-only artificial offset and drift of
 * COMMSCOPE_TEST_CLOCK_SKEW=RANK:OFFSET_NS:DRIFT_PPM on the rank it names.
 *
 * The variable is parsed in a library constructor, so the drift's base point (the raw clock at
 * parse time) lies before anything MPI_Init measures.  The rank is not known then: a launcher's
 * rank variable (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID) is taken as a first
 * guess so the skew already applies to MPI_Init's own timestamps, and cs_trace_open confirms or
 * corrects the guess with the real rank.  Because the skewed clock is a fixed function of the raw
 * clock, turning it on or off later only changes which function applies.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

static struct {
    int parsed_ok; /* the variable named a valid RANK:OFFSET_NS:DRIFT_PPM */
    int bad;       /* set but malformed: warn at open */
    int rank;
    int64_t offset_ns;
    double drift;  /* DRIFT_PPM / 1e6 */
    uint64_t base; /* raw clock when the variable was parsed */
    char text[96]; /* the bad value, for the warning */
} skew;

/* Read by every cs_now(); written only by the constructor and cs_trace_open. */
static _Atomic int skew_on;

static inline uint64_t raw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t skew_apply(uint64_t raw)
{
    double d = (double)(int64_t)(raw - skew.base) * skew.drift;
    return raw + (uint64_t)skew.offset_ns + (uint64_t)(int64_t)d;
}

/* Inverse of skew_apply, for a time stamped while the skew was wrongly on. */
static uint64_t skew_unapply(uint64_t t)
{
    double rel = (double)(int64_t)(t - (uint64_t)skew.offset_ns - skew.base);
    return skew.base + (uint64_t)(int64_t)(rel / (1.0 + skew.drift));
}

uint64_t cs_now(void)
{
    uint64_t t = raw_now();
    if (CS_UNLIKELY(atomic_load_explicit(&skew_on, memory_order_relaxed)))
        t = skew_apply(t);
    return t;
}

static int parse_int64(const char *s, char **end, int64_t *out)
{
    errno = 0;
    long long v = strtoll(s, end, 10);
    if (errno || *end == s)
        return -1;
    *out = v;
    return 0;
}

static int guess_rank(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        int64_t r;
        if (v && *v && parse_int64(v, &end, &r) == 0 && *end == '\0' && r >= 0 && r <= INT_MAX)
            return (int)r;
    }
    return -1;
}

/* Runs in every process the library is preloaded into, so it only reads one variable. */
__attribute__((constructor)) static void skew_init(void)
{
    const char *v = getenv("COMMSCOPE_TEST_CLOCK_SKEW");
    if (!v || !*v)
        return;
    skew.base = raw_now();
    char *end;
    int64_t rank, off;
    double ppm = 0;
    int ok = parse_int64(v, &end, &rank) == 0 && *end == ':' && rank >= 0 && rank <= INT_MAX;
    if (ok)
        ok = parse_int64(end + 1, &end, &off) == 0 && *end == ':';
    if (ok) {
        const char *p = end + 1;
        errno = 0;
        ppm = strtod(p, &end);
        /* A drift of -1e6 ppm or less would stop or reverse the clock. */
        ok = !errno && end != p && *end == '\0' && ppm > -1e6 && ppm < 1e6;
    }
    if (!ok) {
        skew.bad = 1;
        strncpy(skew.text, v, sizeof skew.text - 1);
        return;
    }
    skew.parsed_ok = 1;
    skew.rank = (int)rank;
    skew.offset_ns = off;
    skew.drift = ppm / 1e6;
    if (guess_rank() == skew.rank)
        atomic_store_explicit(&skew_on, 1, memory_order_relaxed);
}

void cs__skew_report(void)
{
    if (skew.bad)
        cs_warn("COMMSCOPE_TEST_CLOCK_SKEW=\"%s\" is not RANK:OFFSET_NS:DRIFT_PPM (integers, "
                "drift above -1e6 and below 1e6 ppm); no clock skew applied",
                skew.text);
}

int cs__skew_confirm(int rank, uint64_t *t)
{
    int want = skew.parsed_ok && skew.rank == rank;
    int was = atomic_load_explicit(&skew_on, memory_order_relaxed);
    if (want && !was)
        *t = skew_apply(*t);
    else if (!want && was)
        *t = skew_unapply(*t);
    atomic_store_explicit(&skew_on, want, memory_order_relaxed);
    return want;
}
