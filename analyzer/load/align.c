/* Clock alignment: each rank's timestamps onto rank 0's clock, linear in the offset samples. */
#include <string.h>

#include "internal.h"

typedef __int128 i128;

void cs__clock_init(struct cs__clock *c, const struct cs_file_header *h)
{
    *c = (struct cs__clock){0};
    const struct cs_clock_sample *s0 = &h->clock[0], *s1 = &h->clock[1];
    if (s0->valid && s1->valid && s1->local_ns != s0->local_ns) {
        c->valid = 2;
        c->l0 = s0->local_ns;
        c->o0 = s0->offset_ns;
        c->l1 = s1->local_ns;
        c->o1 = s1->offset_ns;
    } else if (s0->valid || s1->valid) {
        /* One usable sample (or two at the same instant): a constant offset. */
        const struct cs_clock_sample *s = s0->valid ? s0 : s1;
        c->valid = 1;
        c->l0 = c->l1 = s->local_ns;
        c->o0 = c->o1 = s->offset_ns;
    }
    for (int i = 0; i < 2; i++)
        if (h->clock[i].valid && h->clock[i].rtt_ns > c->rtt_max)
            c->rtt_max = h->clock[i].rtt_ns;
    if (c->valid == 2) {
        /* The slope in 64-bit integers when it fits: the common case, and then mapping a time
         * needs one 64-bit multiply and divide instead of 128-bit arithmetic. */
        i128 num = (i128)c->o1 - (i128)c->o0, den = (i128)c->l1 - (i128)c->l0;
        if (den < 0) {
            num = -num;
            den = -den;
        }
        if (num > -INT64_MAX && num < INT64_MAX && den < INT64_MAX) {
            c->num = (int64_t)num;
            c->den = (int64_t)den;
            c->inv =
                den >= 2 ? (uint64_t)(((unsigned __int128)1 << 64) / (unsigned __int128)den) : 0;
            c->fast = 1;
        }
    }
}

/* The drift term of the correction at t (two samples), in 128 bits: exact for any t. */
static i128 drift_wide(const struct cs__clock *c, uint64_t t)
{
    i128 num = (i128)(c->o1 - c->o0) * ((i128)t - (i128)c->l0);
    i128 den = (i128)c->l1 - (i128)c->l0;
    if (den < 0) {
        num = -num;
        den = -den;
    }
    return num >= 0 ? (num + den / 2) / den : -((-num + den / 2) / den);
}

int64_t cs__clock_map_wide(const struct cs__clock *c, uint64_t t)
{
    return (int64_t)((i128)t + c->o0 + drift_wide(c, t));
}

/*
 * The times around t with t's correction q, for cs__clock_map_near.  q(t) is monotonic in t
 * (num * (t - l0) / den rounded), so when q(lo) = q(t) = q(hi) every time in [lo, hi] has q: the
 * ends of t's step are estimated in floating point, pulled in by a margin, and kept only when the
 * exact 64-bit correction there is q (else the range stays at t on that side).
 */
void cs__clock_memo_fill(struct cs__clock_memo *m, const struct cs__clock *c, uint64_t t, int64_t q)
{
    uint64_t lo = t, hi = t;
    int64_t qc;
    if (c->num == 0) {
        /* q is 0 for every t the 64-bit path takes (t <= INT64_MAX) */
        lo = 0;
        hi = INT64_MAX;
    } else {
        /* t - l0 does not overflow: cs__clock_corr computed q */
        double d = (double)((int64_t)t - (int64_t)c->l0);
        double xr = (double)c->num * d / (double)c->den; /* t in units of q */
        double per = (double)c->den / (double)c->num;    /* ns per unit of q, signed */
        double da = ((double)q - 0.5 - xr) * per, db = ((double)q + 0.5 - xr) * per;
        double dlo = da < db ? da : db, dhi = da < db ? db : da;
        double margin = 2 + 1e-6 * (dhi - dlo);
        double up = dhi - margin, down = -dlo - margin;
        if (up >= 1 && up < 4e18) {
            uint64_t x = t + (uint64_t)up;
            if (x > t && x <= INT64_MAX && cs__clock_corr(c, x, &qc) && qc == q)
                hi = x;
        }
        if (down >= 1 && down < 4e18 && (uint64_t)down <= t) {
            uint64_t x = t - (uint64_t)down;
            if (cs__clock_corr(c, x, &qc) && qc == q)
                lo = x;
        }
    }
    m->lo = lo;
    m->hi = hi;
    m->q = q;
    m->ok = 1;
}

/* m's range as the offset form of the hit (fast, off) when neither end overflows. */
static void memo_fast(struct cs__clock_memo *m, const struct cs__clock *c)
{
    int64_t x;
    m->fast =
        m->lo <= m->hi && m->hi <= INT64_MAX && !__builtin_add_overflow(c->o0, m->q, &m->off) &&
        !__builtin_add_overflow((int64_t)m->lo, c->o0, &x) &&
        !__builtin_add_overflow(x, m->q, &x) &&
        !__builtin_add_overflow((int64_t)m->hi, c->o0, &x) && !__builtin_add_overflow(x, m->q, &x);
}

int64_t cs__clock_map_near_slow(struct cs__clock_memo *m, const struct cs__clock *c, uint64_t t)
{
    if (c->valid < 2) {
        /* The correction is 0 for every t: every t maps to t + o0 (wrapping as cs__clock_map). */
        *m = (struct cs__clock_memo){.lo = 0, .hi = UINT64_MAX, .off = c->o0, .fast = 1};
        return (int64_t)t + c->o0;
    }
    int64_t q, r;
    if (m->ok && t >= m->lo && t <= m->hi) {
        q = m->q; /* in the range, but an end overflows: the sum is checked below */
    } else {
        /* Time moves forward: the next range of corrections is about as long as the last one a
         * fill found, so try [t, hi + per] with t's correction.  q(t) is monotonic, so when
         * cs__clock_corr gives the same q at both ends, every time between has it (and the 64-bit
         * path, whose limits are monotonic in |t - l0| too): exact, without a fill. */
        uint64_t hi = m->hi + m->per;
        int64_t qh;
        if (m->ok && m->per && t > m->hi && hi >= t && hi <= INT64_MAX &&
            cs__clock_corr(c, t, &q) && cs__clock_corr(c, hi, &qh) && qh == q) {
            m->lo = t;
            m->hi = hi;
            m->q = q;
        } else if (cs__clock_corr(c, t, &q)) {
            cs__clock_memo_fill(m, c, t, q);
            m->per = m->hi < INT64_MAX ? m->hi - m->lo : 0;
        } else {
            m->ok = m->fast = 0;
            return cs__clock_map_wide(c, t);
        }
        m->ok = 1;
        memo_fast(m, c);
    }
    if (!__builtin_add_overflow((int64_t)t, c->o0, &r) && !__builtin_add_overflow(r, q, &r))
        return r;
    return cs__clock_map_wide(c, t);
}

int cs__clock_corr_within(const struct cs__clock *c, uint64_t t, int64_t limit)
{
    i128 corr = c->o0 + (c->valid == 2 ? drift_wide(c, t) : 0);
    return corr > -(i128)limit && corr < (i128)limit;
}

double cs__clock_drift_ppm(const struct cs__clock *c)
{
    if (c->valid < 2)
        return 0.0;
    return (double)(c->o1 - c->o0) / ((double)c->l1 - (double)c->l0) * 1e6;
}

/* Nonzero when a and b carry the same known boot id and no test clock skew: one clock. */
static int same_clock(const struct cs_file_header *a, const struct cs_file_header *b)
{
    static const uint8_t zero[16];
    return !((a->flags | b->flags) & CS_FLAG_CLOCK_SKEW) &&
           memcmp(a->boot_id, zero, sizeof zero) != 0 &&
           memcmp(a->boot_id, b->boot_id, sizeof a->boot_id) == 0;
}

void cs__clock_shared(struct cs__run *run)
{
    if (run->world < 1 || !run->ranks[0].present)
        return;
    const struct cs_file_header *h0 = run->ranks[0].h;
    for (int r = 1; r < run->world; r++) {
        struct cs__rank *rk = &run->ranks[r];
        if (!rk->present)
            continue;
        if (same_clock(rk->h, h0)) {
            /* rank 0's own clock: nothing to align, whatever the ping-pong measured */
            rk->clk = (struct cs__clock){.valid = 1, .shared = 1};
            continue;
        }
        if (rk->h->flags & CS_FLAG_NO_MPI)
            continue; /* samples against CLOCK_REALTIME: converted per rank (nccl.c) */
        /* Another host's clock, shared by its ranks: its best round trip at each end. */
        struct cs_file_header h = *rk->h;
        int better = 0;
        for (int q = 0; q < run->world; q++) {
            const struct cs__rank *o = &run->ranks[q];
            if (q == r || !o->present || (o->h->flags & CS_FLAG_NO_MPI) || !same_clock(o->h, &h))
                continue;
            for (int i = 0; i < 2; i++)
                if (o->h->clock[i].valid &&
                    (!h.clock[i].valid || o->h->clock[i].rtt_ns < h.clock[i].rtt_ns)) {
                    h.clock[i] = o->h->clock[i];
                    better = 1;
                }
        }
        if (better) {
            cs__clock_init(&rk->clk, &h);
            rk->clk.shared = 2;
        }
    }
}
