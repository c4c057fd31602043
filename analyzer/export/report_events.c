/*
 * `--events FILE`: every event as one CSV line, with times mapped onto rank 0's clock (ns, the
 * same epoch as rank 0's CLOCK_MONOTONIC).  For checking the alignment against an outside
 * reference and for ad-hoc analysis with other tools.
 */
#include <inttypes.h>

#include "internal.h"

void cs__events_csv_header(FILE *f)
{
    fputs("rank,op,comm,seq,t_begin_ns,t_end_ns,bytes,bytes_recv,peer,request,flags\n", f);
}

void cs__events_csv_line(FILE *f, const struct cs__run *run, int rank, const struct cs_event *ev,
                         int64_t t_begin, int64_t t_end)
{
    (void)run;
    char comm[40];
    fprintf(f,
            "%d,%s,%s,%" PRIu32 ",%" PRId64 ",%" PRId64 ",%" PRIu64 ",%" PRIu64 ",%" PRId32
            ",%" PRIu64 ",%u\n",
            rank, cs_op_name(ev->op), cs__comm_label(ev->comm, comm, sizeof comm), ev->seq, t_begin,
            t_end, ev->bytes, ev->bytes_recv, ev->peer, ev->request, (unsigned)ev->flags);
}
