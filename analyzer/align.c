/* Clock alignment: each rank's timestamps onto rank 0's clock, linear in the offset samples. */
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
            c->inv = den >= 2 ? (uint64_t)(((unsigned __int128)1 << 64) / (unsigned __int128)den) : 0;
            c->fast = 1;
        }
    }
}

int64_t cs__clock_map_wide(const struct cs__clock *c, uint64_t t)
{
    i128 num = (i128)(c->o1 - c->o0) * ((i128)t - (i128)c->l0);
    i128 den = (i128)c->l1 - (i128)c->l0;
    if (den < 0) {
        num = -num;
        den = -den;
    }
    i128 q = num >= 0 ? (num + den / 2) / den : -((-num + den / 2) / den);
    return (int64_t)((i128)t + c->o0 + q);
}

double cs__clock_drift_ppm(const struct cs__clock *c)
{
    if (c->valid < 2)
        return 0.0;
    return (double)(c->o1 - c->o0) / ((double)c->l1 - (double)c->l0) * 1e6;
}
