/*
 * The clock ping-pong every alignment uses (the MPI front end against rank 0, ranks without MPI
 * against the root service): `rounds` round trips, the one with the smallest round trip kept.
 */
#include <string.h>

#include "collector.h"

int cs_clock_pingpong(uint32_t rounds, cs_clock_exchange_fn exchange, void *ctx,
                      struct cs_clock_sample *out)
{
    memset(out, 0, sizeof(*out));
    out->rounds = rounds;
    uint64_t best = UINT64_MAX;
    for (uint32_t k = 0; k < rounds; k++) {
        uint64_t t1 = cs_now(), t0 = 0;
        if (exchange(ctx, t1, &t0) != 0)
            break;
        uint64_t t2 = cs_now();
        if (t2 - t1 < best) {
            best = t2 - t1;
            out->local_ns = t1 + (t2 - t1) / 2;
            out->offset_ns = (int64_t)(t0 - out->local_ns);
            out->rtt_ns = best;
            out->valid = 1;
        }
    }
    return out->valid ? 0 : -1;
}
