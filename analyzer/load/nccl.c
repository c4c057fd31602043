/*
 * NCCL and jobs without MPI in the analyzer:
 *   - NCCL communicator records know only their own member (members[my_rank]); the records of all
 *     members are joined into one membership in world ranks;
 *   - ranks started without MPI carry clock samples against CLOCK_REALTIME
 *     (CS_FLAG_NO_MPI): they become offsets to rank 0 by subtracting rank 0's;
 *   - what the trace headers say about NCCL and GPU timing becomes problems in the report.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int cs__nccl_comm_add(struct cs__run *run, int rank, const struct cs_comm_record *rec)
{
    uint64_t *v = cs__map_get(&run->comm_by_id, rec->id, 0);
    struct cs__comm *c = v ? (struct cs__comm *)(uintptr_t)*v : NULL;
    char b[40];
    if (c && (c->size != rec->size || !c->owned)) {
        cs__problem(run,
                    "rank %d disagrees on the size of NCCL communicator %s (%" PRId32 " vs %" PRId32
                    "); its first record is used",
                    rank, cs__comm_label(rec->id, b, sizeof b), rec->size, c->size);
        return 0;
    }
    if (!c) {
        c = calloc(1, sizeof *c);
        int32_t *m = malloc((size_t)rec->size * sizeof *m);
        if (!c || !m) {
            free(c);
            free(m);
            return CS_ENOMEM;
        }
        for (int32_t i = 0; i < rec->size; i++)
            m[i] = -1;
        *c = (struct cs__comm){.id = rec->id,
                               .size = rec->size,
                               .members = m,
                               .owned = m,
                               .parent = rec->parent,
                               .op = rec->op,
                               .nccl = 1};
        if (cs__comm_register(run, c)) {
            free(m);
            free(c);
            return CS_ENOMEM;
        }
    }
    int32_t *m = c->owned;
    /* ncclCommInitAll: one process records every member, each under its own comm rank. */
    size_t goff = (sizeof *rec + (size_t)rec->size * sizeof rec->members[0] + 7) & ~(size_t)7;
    struct cs_comm_gpu g = {0};
    if (rec->record_bytes >= goff + sizeof g)
        memcpy(&g, (const char *)rec + goff, sizeof g);
    if (g.flags & CS_COMM_GPU_MULTI)
        c->multi = 1;
    if (m[rec->my_rank] != -1 && m[rec->my_rank] != rank) {
        cs__problem(run,
                    "ranks %" PRId32 " and %d both claim rank %" PRId32
                    " of NCCL communicator %s; the first is kept",
                    m[rec->my_rank], rank, rec->my_rank, cs__comm_label(rec->id, b, sizeof b));
        return 0;
    }
    for (int32_t i = 0; !c->multi && i < c->size; i++)
        if (i != rec->my_rank && m[i] == rank) {
            cs__problem(run,
                        "rank %d is two members (%" PRId32 " and %" PRId32
                        ") of NCCL communicator %s; the first is kept",
                        rank, i, rec->my_rank, cs__comm_label(rec->id, b, sizeof b));
            return 0;
        }
    m[rec->my_rank] = rank;
    return 0;
}

int cs__nccl_comms_complete(struct cs__run *run)
{
    for (size_t i = 0; i < run->ncomms; i++) {
        struct cs__comm *c = run->comms[i];
        if (!c->owned || c->members != c->owned)
            continue;
        int32_t missing = 0;
        for (int32_t k = 0; k < c->size; k++)
            missing += c->owned[k] < 0;
        if (missing) {
            char b[40];
            cs__problem(run,
                        "NCCL communicator %s: %" PRId32 " of its %" PRId32
                        " members left no record (their traces are missing)",
                        cs__comm_label(c->id, b, sizeof b), missing, c->size);
            c->incomplete = 1;
        }
    }
    return 0;
}

void cs__nccl_clock(struct cs__run *run, int r)
{
    struct cs__rank *rk = &run->ranks[r];
    if (!run->ranks[0].present || !rk->present || !(rk->h->flags & CS_FLAG_NO_MPI))
        return;
    const struct cs_file_header *h0 = run->ranks[0].h;
    if (!(h0->flags & CS_FLAG_NO_MPI))
        return;
    /* The samples are offsets to CLOCK_REALTIME of the rank's host: rank 0's clock at an instant
     * is realtime - o0 = local + o_r - o0.  Exact on one host (one CLOCK_MONOTONIC), as good as
     * the hosts' time synchronisation (NTP/PTP) across hosts. */
    struct cs_file_header h = *rk->h;
    for (int i = 0; i < 2; i++) {
        const struct cs_clock_sample *z = h0->clock[i].valid ? &h0->clock[i] : &h0->clock[0];
        if (!h.clock[i].valid || !z->valid) {
            h.clock[i].valid = 0;
            continue;
        }
        h.clock[i].offset_ns -= z->offset_ns;
        h.clock[i].rtt_ns += z->rtt_ns;
    }
    cs__clock_init(&rk->clk, &h);
}

size_t cs__nccl_metrics_event(struct cs__run *run, int rank, const struct cs_event *ev)
{
    /* An NCCL call is a communication call of its rank (its time comes from the GPU records). */
    struct cs__rank *rk = &run->ranks[rank];
    rk->calls++;
    rk->bytes += ev->bytes;
    size_t row = cs__row_get(run, ev->op, ev->comm);
    if (row == SIZE_MAX)
        return row;
    struct cs__oprow *r = &run->rows[row];
    /* The host call only enqueues: its duration is not communication time (GPU records give
     * that).  A receive sends nothing: its row counts what it received. */
    r->calls++;
    r->bytes += ev->op == CS_OP_NCCL_RECV ? ev->bytes_recv : ev->bytes;
    return row;
}

/*
 * Ranks without MPI align through the root service (CS_FLAG_CLOCK_ROOT: all against its host's
 * CLOCK_REALTIME) or, where it could not be reached, through their own host's CLOCK_REALTIME.  On
 * one host the two are the same clock; across hosts a mix is only as good as the hosts' time
 * synchronisation, which the clock uncertainty does not include: say so.
 */
static void clock_reference_problem(struct cs__run *run)
{
    int via_root = 0, via_host = 0, first_host = -1, hosts_differ = 0;
    const char *host0 = NULL;
    for (int r = 0; r < run->world; r++) {
        const struct cs__rank *rk = &run->ranks[r];
        if (!rk->present || !(rk->h->flags & CS_FLAG_NO_MPI))
            continue;
        if (rk->h->flags & CS_FLAG_CLOCK_ROOT) {
            via_root++;
        } else {
            via_host++;
            if (first_host < 0)
                first_host = r;
        }
        if (!host0)
            host0 = rk->h->host;
        else if (strncmp(host0, rk->h->host, sizeof rk->h->host) != 0)
            hosts_differ = 1;
    }
    if (via_root && via_host && hosts_differ)
        cs__problem(run,
                    "%d rank(s) (first: rank %d) could not reach the root service and were aligned "
                    "through their own host's CLOCK_REALTIME, %d through the root service: between "
                    "hosts their times agree only as well as the hosts' clocks (NTP/PTP), which "
                    "the clock uncertainty does not include",
                    via_host, first_host, via_root);
}

void cs__nccl_header_problems(struct cs__run *run)
{
    clock_reference_problem(run);
    for (int r = 0; r < run->world; r++) {
        struct cs__rank *rk = &run->ranks[r];
        if (!rk->present)
            continue;
        const struct cs_file_header *h = rk->h;
        if (h->flags & CS_FLAG_NCCL_STATIC)
            cs__problem(run,
                        "rank %d: the program's NCCL is linked statically and could not be "
                        "intercepted: its NCCL communication is NOT recorded (%s)",
                        r, h->gpu_note);
        else if (h->gpu_note[0])
            cs__problem(run, "rank %d: %s", r, h->gpu_note);
        if (h->gpu_dropped)
            cs__problem(run, "rank %d: %" PRIu64 " GPU activity records were lost", r,
                        h->gpu_dropped);
    }
}
