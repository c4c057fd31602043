/*
 * The collector's clock: CLOCK_MONOTONIC nanoseconds, plus the test-only artificial offset and
 * drift of COMMSCOPE_TEST_CLOCK_SKEW=RANK:OFFSET_NS:DRIFT_PPM on the rank it names.
 *
 * Reading CLOCK_MONOTONIC costs ~30 ns even through the vDSO, and every event takes two stamps.
 * Where the CPU has an invariant TSC (x86-64, CPUID 0x80000007 EDX bit 8: constant rate, keeps
 * ticking in deep C-states), cs_now reads the TSC instead and converts it to CLOCK_MONOTONIC:
 *
 *  - every thread keeps an anchor (tsc, mono_ns) taken with a real clock_gettime, and takes a new
 *    one whenever more than ~1 ms of ticks passed since it (or the TSC seems to go backwards, as
 *    after a migration to a CPU whose TSC is behind), so at most one clock_gettime per ms and
 *    thread, and the error of the ticks->ns factor acts over 1 ms at most;
 *  - the factor (ns per tick, 32.32 fixed point) is calibrated from clock_gettime/TSC pairs over
 *    >= 1 ms after the library was loaded, then refined over doubling intervals up to ~1 s, after
 *    which the interval slides so the factor follows NTP's slewing of CLOCK_MONOTONIC;
 *  - until it is calibrated, cs_now returns clock_gettime;
 *  - a thread's results never decrease (a new anchor may lie slightly behind the old one's
 *    extrapolation: the result then holds at the last value until the clock passes it);
 *  - when a new anchor disagrees with the old one's extrapolation over a short interval by more
 *    than CS__TSC_SANITY_NS (TSC not synchronised between CPUs, or jumping), the TSC is given up
 *    for good and cs_now returns clock_gettime.
 *
 * Elsewhere (other architectures, no invariant TSC) cs_now is clock_gettime.
 *
 * The skew variable is parsed in a library constructor, so the drift's base point (the raw clock
 * at parse time) lies before anything MPI_Init measures.  The rank is not known then: a launcher's
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

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#define CS_HAVE_TSC 1
#else
#define CS_HAVE_TSC 0
#endif

static struct {
    int parsed_ok; /* the variable named a valid RANK:OFFSET_NS:DRIFT_PPM */
    int bad;       /* set but malformed: warn at open */
    int rank;
    int64_t offset_ns;
    double drift;  /* DRIFT_PPM / 1e6 */
    uint64_t base; /* raw clock when the variable was parsed */
    char text[96]; /* the bad value, for the warning */
} skew;

/* Read by every stamp (hot.h); written only by the constructor and cs_trace_open. */
int cs_clock_skew_on;

static inline uint64_t mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if CS_HAVE_TSC

/* A thread re-anchors after this much time (converted to ticks at calibration). */
#define CS__ANCHOR_NS 1000000ull
/* The factor is first computed over this much time after load. */
#define CS__CAL_MIN_NS 1000000ull
/* Refinement intervals grow up to this, then slide. */
#define CS__CAL_MAX_NS 1000000000ull
/* Largest disagreement between an anchor's extrapolation and the real clock we accept. */
#define CS__TSC_SANITY_NS 5000ull

enum { TSC_OFF = 0, TSC_CALIBRATING = 1, TSC_ON = 2 };

/* Process-wide calibration.  The hot path never reads it: threads copy the factor at anchoring. */
static struct {
    _Atomic int state;             /* TSC_* */
    _Atomic uint64_t mult;         /* ns per tick << 32; 0 until calibrated */
    _Atomic uint64_t anchor_ticks; /* ~CS__ANCHOR_NS in ticks; 0 until calibrated */
    _Atomic uint64_t next_refine;  /* TSC value after which the factor is refined */
    pthread_mutex_t mu;            /* guards base_* (taken with trylock only) */
    uint64_t base_tsc, base_ns;    /* start of the calibration interval */
} cal = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The per-thread anchor is cs_thread_state.clk (hot.h): the front ends read it inline too. */

/*
 * A (tsc, mono_ns) pair: the TSC read on both sides of clock_gettime, the middle taken.  A pair
 * whose two TSC reads lie far apart (the thread was interrupted) is taken again, a few times.
 */
/* RDTSCP is there (CPUID 0x80000001 EDX bit 27); virtual machines often hide it. */
static int have_rdtscp;

/* The TSC read in program order: RDTSCP waits for the instructions before it; where it is
 * missing, LFENCE before and after RDTSC does the same (Linux makes LFENCE dispatch-serialising
 * on AMD processors too). */
static inline uint64_t ordered_tsc(void)
{
    if (have_rdtscp) {
        unsigned aux;
        return __rdtscp(&aux);
    }
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
}

static void read_pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best_gap = UINT64_MAX;
    for (int i = 0; i < 4; i++) {
        uint64_t a = ordered_tsc();
        uint64_t n = mono_now();
        uint64_t b = ordered_tsc();
        uint64_t gap = b - a;
        if (b >= a && gap < best_gap) {
            best_gap = gap;
            *tsc = a + gap / 2;
            *ns = n;
        }
        /* ~1 µs at any plausible TSC rate: good enough, the anchor error stays small. */
        if (best_gap < 2000)
            break;
    }
    if (best_gap == UINT64_MAX) { /* TSC went backwards inside the pair: take anything */
        *tsc = __rdtsc();
        *ns = mono_now();
    }
}

static int tsc_invariant(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return 0;
    if (!__get_cpuid(0x80000007u, &a, &b, &c, &d))
        return 0;
    if (!(d & (1u << 8)))
        return 0;
    /* RDTSCP orders the calibration pairs; without it, LFENCE + RDTSC (ordered_tsc). */
    have_rdtscp = __get_cpuid(0x80000001u, &a, &b, &c, &d) && (d & (1u << 27));
    return 1;
}

static void tsc_init(void)
{
    if (!tsc_invariant())
        return;
    read_pair(&cal.base_tsc, &cal.base_ns);
    atomic_store_explicit(&cal.state, TSC_CALIBRATING, memory_order_release);
}

/* Compute the factor over [base, (tsc, ns)] and schedule the next refinement.  Under cal.mu. */
static void calibrate(uint64_t tsc, uint64_t ns)
{
    uint64_t dns = ns - cal.base_ns, dtsc = tsc - cal.base_tsc;
    if (ns < cal.base_ns || tsc <= cal.base_tsc || dns < CS__CAL_MIN_NS)
        return;
    uint64_t mult = (uint64_t)(((unsigned __int128)dns << 32) / dtsc);
    /* 0.05 .. 10 ns per tick, i.e. a TSC between 100 MHz and 20 GHz; else something is off. */
    if (mult < (1ull << 32) / 20 || mult > (10ull << 32)) {
        atomic_store_explicit(&cal.state, TSC_OFF, memory_order_relaxed);
        return;
    }
    uint64_t ticks_per_ms = (uint64_t)(((unsigned __int128)CS__ANCHOR_NS << 32) / mult);
    uint64_t window = dns < CS__CAL_MAX_NS ? dns : CS__CAL_MAX_NS;
    uint64_t window_ticks = (uint64_t)(((unsigned __int128)window << 32) / mult);
    if (dns >= CS__CAL_MAX_NS) {
        /* Slide: the next factor is measured over the next ~second only. */
        cal.base_tsc = tsc;
        cal.base_ns = ns;
    }
    atomic_store_explicit(&cal.mult, mult, memory_order_relaxed);
    atomic_store_explicit(&cal.anchor_ticks, ticks_per_ms, memory_order_relaxed);
    atomic_store_explicit(&cal.next_refine, tsc + window_ticks, memory_order_relaxed);
    atomic_store_explicit(&cal.state, TSC_ON, memory_order_release);
}

static inline uint64_t extrapolate(const struct cs_thread_clock *a, uint64_t tsc)
{
    return a->ns + (uint64_t)(((unsigned __int128)(tsc - a->tsc) * a->mult) >> 32);
}

/* No anchor, or this one is used up: read the real clock and anchor anew. */
static __attribute__((noinline)) uint64_t reanchor(struct cs_thread_clock *a)
{
    int state = atomic_load_explicit(&cal.state, memory_order_acquire);
    if (state == TSC_OFF) {
        a->limit = 0;
        uint64_t t = mono_now();
        return t > a->last ? (a->last = t) : a->last;
    }
    uint64_t tsc, ns;
    read_pair(&tsc, &ns);
    if (state == TSC_CALIBRATING ||
        tsc >= atomic_load_explicit(&cal.next_refine, memory_order_relaxed)) {
        if (pthread_mutex_trylock(&cal.mu) == 0) {
            if (tsc >= atomic_load_explicit(&cal.next_refine, memory_order_relaxed))
                calibrate(tsc, ns);
            pthread_mutex_unlock(&cal.mu);
        }
        state = atomic_load_explicit(&cal.state, memory_order_acquire);
    }
    /* A short-interval check of the old anchor against the real clock: a TSC that is not in
     * step across CPUs (or jumps) shows up here, and is then not trusted again. */
    if (a->limit && tsc >= a->tsc && tsc - a->tsc <= 4 * a->limit) {
        uint64_t x = extrapolate(a, tsc);
        uint64_t err = x > ns ? x - ns : ns - x;
        if (err > CS__TSC_SANITY_NS + (tsc - a->tsc) / a->limit * 1000) {
            atomic_store_explicit(&cal.state, TSC_OFF, memory_order_relaxed);
            state = TSC_OFF;
        }
    }
    if (state == TSC_ON) {
        a->tsc = tsc;
        a->ns = ns;
        a->mult = atomic_load_explicit(&cal.mult, memory_order_relaxed);
        a->limit = atomic_load_explicit(&cal.anchor_ticks, memory_order_relaxed);
    } else {
        a->limit = 0;
    }
    return ns > a->last ? (a->last = ns) : a->last;
}

static inline uint64_t raw_now(void)
{
    struct cs_thread_clock *a = &cs_thread_state.clk;
    uint64_t d = __rdtsc() - a->tsc;
    /* Unsigned: a TSC behind the anchor wraps to a huge d and re-anchors too. */
    if (CS_UNLIKELY(d >= a->limit))
        return reanchor(a);
    uint64_t t = a->ns + ((d * a->mult) >> 32); /* d < ~1 ms of ticks: no overflow */
    if (CS_UNLIKELY(t < a->last))
        return a->last;
    a->last = t;
    return t;
}

int cs__clock_tsc_state(void)
{
    return atomic_load_explicit(&cal.state, memory_order_acquire);
}

#else /* !CS_HAVE_TSC */

static void tsc_init(void)
{
}

static inline uint64_t raw_now(void)
{
    return mono_now();
}

int cs__clock_tsc_state(void)
{
    return 0;
}

#endif

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
    if (CS_UNLIKELY(__atomic_load_n(&cs_clock_skew_on, __ATOMIC_RELAXED)))
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

/* Runs in every process the library is preloaded into, so it only reads one variable (and asks
 * CPUID about the TSC and reads the clock once). */
__attribute__((constructor)) static void skew_init(void)
{
    tsc_init();
    const char *v = getenv("COMMSCOPE_TEST_CLOCK_SKEW");
    if (!v || !*v)
        return;
    skew.base = mono_now();
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
        __atomic_store_n(&cs_clock_skew_on, 1, __ATOMIC_RELAXED);
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
    int was = __atomic_load_n(&cs_clock_skew_on, __ATOMIC_RELAXED);
    if (want && !was)
        *t = skew_apply(*t);
    else if (!want && was)
        *t = skew_unapply(*t);
    __atomic_store_n(&cs_clock_skew_on, want, __ATOMIC_RELAXED);
    return want;
}
