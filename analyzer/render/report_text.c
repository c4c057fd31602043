/*
 * The text renderer: mpiP-style sections that start with "@---" so they are easy to grep and
 * diff.  Formatting only, no computation.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "flops.h"
#include "phases.h"
#include "resources.h"
#include "gpu.h"
#include "nccl_p2p.h"
#include "hang.h"
#include "internal.h"
#include "kineto.h"
#include "steps.h"
#include "wire.h"

/* A number or "-" when it has no value. */
static const char *num(char *buf, size_t n, const char *fmt, double v)
{
    if (isfinite(v))
        snprintf(buf, n, fmt, v);
    else
        snprintf(buf, n, "-");
    return buf;
}

void cs__report_text(const struct cs_report *rep, FILE *out)
{
    char a[32], b[32], c[32], b2[32], c2[32];
    fprintf(out, "@ commscope analysis\n");
    fprintf(out, "@ Run directory  : %s\n", rep->dir);
    fprintf(out, "@ Program        : %s\n", rep->program[0] ? rep->program : "-");
    fprintf(out, "@ Run id         : %016" PRIx64 "\n", rep->run_id);
    fprintf(out, "@ World size     : %d\n", rep->world_size);
    fprintf(out, "@ Ranks found    : %d\n", rep->ranks_found);
    fprintf(out, "@ Hosts          : %d\n", rep->hosts);
    cs__report_text_verdict(rep, out);
    cs__hang_text(rep, out);

    fprintf(out, "\n@--- Per-rank time (seconds) %s\n", "------------------------------------");
    fprintf(out, "%5s %-16s %12s %12s %12s %12s %12s %12s %10s %14s %s\n", "Rank", "Host", "Wall",
            "Comm", "Compute", "Wait", "P2P_wait", "P2P_caused", "Calls", "Bytes", "Partial");
    for (size_t i = 0; i < rep->nranks; i++) {
        const struct cs_report_rank *r = &rep->ranks[i];
        char p2p[32], caused[32], comm[32], comp[32];
        fprintf(out, "%5d %-16s %12.6f %12s %12s %12.6f %12s %12s %10" PRIu64 " %14" PRIu64 " %s\n",
                r->rank, r->host, r->wall_s, num(comm, sizeof comm, "%.6f", r->comm_s),
                num(comp, sizeof comp, "%.6f", r->compute_s), r->wait_s,
                num(p2p, sizeof p2p, "%.6f", r->p2p_wait_s),
                num(caused, sizeof caused, "%.6f", r->p2p_caused_s), r->calls, r->bytes,
                r->partial ? "yes" : "no");
    }
    fprintf(out, "(Wait: at collectives; P2P_wait: at point-to-point calls for partners, whole run;"
                 " P2P_caused: its partners' waits for it; '-': not measured: on a GPU rank, or "
                 "a rank that made no MPI or NCCL call)\n");

    fprintf(out, "\n@--- Per-op totals over ranks %s\n", "-----------------------------------");
    fprintf(out, "%-26s %-21s %5s %10s %14s %12s %10s %10s\n", "Op", "Comm", "Size", "Calls",
            "Bytes", "Time(s)", "AlgBW", "BusBW");
    for (size_t i = 0; i < rep->nops; i++) {
        const struct cs_report_op *o = &rep->ops[i];
        fprintf(out, "%-26s %-21s %5d %10" PRIu64 " %14" PRIu64 " %12.6f %10s %10s\n", o->op,
                o->comm, o->comm_size, o->calls, o->bytes, o->time_s,
                num(a, sizeof a, "%.3f", o->algbw_gbps), num(b, sizeof b, "%.3f", o->busbw_gbps));
    }
    if (rep->ops_all)
        fprintf(out,
                "(%zu rows on %zu communicators: the busiest listed, each op's others folded into "
                "its '" CS_REPORT_COMMS_OTHER "' row; --ops-csv FILE writes every row)\n",
                rep->nops_all, rep->comms_all ? rep->ncomms_all : rep->ncomms);
    fprintf(out, "(AlgBW, BusBW in GB/s, nccl-tests definitions; '-' = not measurable; Bytes: "
                 "what a send or collective call sent, what a receive received; a wait/test call "
                 "counts on the communicator of the first request it completed, 'unattributed' "
                 "where none is known)\n");
    if (rep->ncomms > 1) {
        fprintf(out, "Communicators:");
        size_t shown = rep->ncomms < 32 ? rep->ncomms : 32;
        for (size_t i = 0; i < shown; i++)
            if (strcmp(rep->comms[i].comm, rep->comms[i].name) != 0)
                fprintf(out, "\n  %-21s %s", rep->comms[i].comm, rep->comms[i].name);
        if (shown < rep->ncomms)
            fprintf(out, "\n  (%zu more in the JSON report's communicators)", rep->ncomms - shown);
        fputc('\n', out);
    }

    if (rep->np2p_bw || rep->p2p_bw_unmeasured) {
        fprintf(out, "\n@--- Point-to-point bandwidth by message size %s\n", "-------------------");
        fprintf(out, "%-14s %10s %14s %12s %12s %12s\n", "Size", "Pairs", "Mean_bytes", "Transfer",
                "Recv_call", "Send_call");
        for (size_t i = 0; i < rep->np2p_bw; i++) {
            const struct cs_report_p2p_bucket *q = &rep->p2p_bw[i];
            char sz[32];
            snprintf(sz, sizeof sz, "[2^%d,2^%d)", q->log2_size, q->log2_size + 1);
            fprintf(out, "%-14s %10" PRIu64 " %14.0f %12s %12s %12s\n", sz, q->pairs, q->mean_bytes,
                    num(a, sizeof a, "%.3f", q->transfer_gbps),
                    num(b2, sizeof b2, "%.3f", q->recv_call_gbps),
                    num(c2, sizeof c2, "%.3f", q->send_call_gbps));
        }
        fprintf(out,
                "(GB/s over matched send/receive pairs: Transfer = bytes / (the receive's "
                "completion - the later of the two begins; MPI_Irecv: the end of the wait that "
                "completed it); Recv_call = bytes / (receive begin to completion), Send_call = "
                "bytes / the send call's duration (an eager send returns before its message "
                "arrives, a receive includes waiting for its sender); %" PRIu64
                " pairs whose receive did not complete in the step window that paired them not "
                "measured)\n",
                rep->p2p_bw_unmeasured);
    }

    fprintf(out, "\n@--- Collective instances %s\n", "--------------------------------------");
    fprintf(out, "matched %" PRIu64 "  incomplete %" PRIu64 "  mean_skew_s %s  max_skew_s %s\n",
            rep->matched, rep->incomplete, num(a, sizeof a, "%.9f", rep->mean_skew_s),
            num(b, sizeof b, "%.9f", rep->max_skew_s));

    fprintf(out, "\n@--- Top stragglers (ranks that made others wait) %s\n", "--------------");
    if (!rep->nstragglers)
        fprintf(out, "none\n");
    else
        fprintf(out, "%5s %-16s %14s %16s\n", "Rank", "Host", "Late_arrivals", "Others_waited_s");
    for (size_t i = 0; i < rep->nstragglers && i < 10; i++) {
        const struct cs_report_straggler *s = &rep->stragglers[i];
        fprintf(out, "%5d %-16s %14" PRIu64 " %16.6f\n", s->rank, s->host, s->late_arrivals,
                s->others_waited_s);
    }

    fprintf(out, "\n@--- POP efficiency %s\n", "--------------------------------------------");
    fprintf(out, "load_balance %s  communication_efficiency %s  parallel_efficiency %s\n",
            num(a, sizeof a, "%.4f", rep->load_balance),
            num(b, sizeof b, "%.4f", rep->communication_efficiency),
            num(c, sizeof c, "%.4f", rep->parallel_efficiency));
    if (rep->steps)
        fprintf(out, "serialization_efficiency %s  transfer_efficiency %s\n",
                num(a, sizeof a, "%.4f", rep->steps->serialization_efficiency),
                num(b, sizeof b, "%.4f", rep->steps->transfer_efficiency));
    cs__report_steps_text(rep, out);
    cs__phases_text(rep, out);
    cs__res_text(rep, out);
    cs__flops_text(rep, out);
    cs__report_gpu_text(rep, out);
    cs__np2p_text(rep, out);
    cs__report_kineto_text(rep, out);

    fprintf(out, "\n@--- Clock alignment %s\n", "-------------------------------------------");
    fprintf(out, "max_offset_s %.9f  uncertainty_s %.9f  violations_repaired %" PRIu64 "\n",
            rep->max_offset_s, rep->uncertainty_s, rep->violations_repaired);
    fprintf(out, "%5s %16s %16s %12s %12s\n", "Rank", "Offset_init_s", "Offset_final_s",
            "Drift_ppm", "RTT_s");
    for (size_t i = 0; i < rep->nranks; i++) {
        const struct cs_report_rank *r = &rep->ranks[i];
        char d[32], e[32];
        fprintf(out, "%5d %16s %16s %12s %12s\n", r->rank,
                num(a, sizeof a, "%.9f", r->offset_init_s),
                num(b, sizeof b, "%.9f", r->offset_final_s), num(d, sizeof d, "%.3f", r->drift_ppm),
                num(e, sizeof e, "%.9f", r->rtt_s));
    }

    fprintf(out, "\n@--- Trace completeness %s\n", "----------------------------------------");
    fprintf(out,
            "ranks_expected %d  ranks_found %d  events %" PRIu64 "  dropped_events %" PRIu64
            "  unrecorded_tests %" PRIu64 "\n",
            rep->ranks_expected, rep->ranks_found, rep->events, rep->dropped_events,
            rep->unrecorded_tests);
    if (rep->window_ranks)
        fprintf(out,
                "window_ranks %d  window_start_s %.6f  outside_events %" PRIu64
                "  window_edge %" PRIu64
                "  (ring mode: the events before the window count in the totals, calls, bytes and "
                "times, only)\n",
                rep->window_ranks, rep->window_start_s, rep->outside_events, rep->window_edge);
    fprintf(out, "missing_ranks");
    for (size_t i = 0; i < rep->nmissing; i++)
        fprintf(out, " %d", rep->missing[i]);
    fprintf(out, "%s\npartial_ranks", rep->nmissing ? "" : " none");
    for (size_t i = 0; i < rep->npartial; i++)
        fprintf(out, " %d", rep->partial[i]);
    fprintf(out, "%s\n", rep->npartial ? "" : " none");

    cs__nodes_text(rep, out);

    fprintf(out, "\n@--- Problems (%zu) %s\n", rep->nproblems,
            "---------------------------------------------");
    if (!rep->nproblems)
        fprintf(out, "none\n");
    for (size_t i = 0; i < rep->nproblems; i++)
        fprintf(out, "problem: %s\n", rep->problems[i]);
    cs__report_wire_text(rep->wire, out);
}
