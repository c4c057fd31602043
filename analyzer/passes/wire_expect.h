/*
 * The bytes each host should have sent to the others, from the trace (wire_expect.c): exact for
 * point-to-point, a range for collectives.  Used by the wire section (wire.c).
 */
#ifndef COMMSCOPE_ANALYZER_WIRE_EXPECT_H
#define COMMSCOPE_ANALYZER_WIRE_EXPECT_H

#include <stdint.h>

struct cs__inst;
struct cs__wire_expect;

/* A table for nhosts hosts (ids 0..nhosts-1); NULL when out of memory.  Free with _free. */
struct cs__wire_expect *cs__wire_expect_new(int nhosts);
void cs__wire_expect_free(struct cs__wire_expect *x);
/* A sending point-to-point call of bytes from a rank on host `from` to one on host `to`. */
void cs__wire_expect_p2p(struct cs__wire_expect *x, int from, int to, uint64_t bytes);
/* A matched collective instance; host_of maps world ranks (< world) to host ids. */
void cs__wire_expect_instance(struct cs__wire_expect *x, const struct cs__inst *in,
                              const int32_t *host_of, int world);
/* Point-to-point bytes from host `from` to host `to`; *coll_max = the most the collectives with
 * members on both could have added from `from` to `to` (the wire cannot separate the two). */
double cs__wire_expect_pair(const struct cs__wire_expect *x, int from, int to, double *coll_max);
/* Host h's expected off-host sends: exact point-to-point, and the collectives' least and most. */
void cs__wire_expect_host(const struct cs__wire_expect *x, int h, double *p2p, double *lo,
                          double *hi);

#endif
