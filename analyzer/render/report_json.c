/* The JSON renderer (schema in docs/report-schema.md): formatting only, no computation. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flops.h"
#include "phases.h"
#include "resources.h"
#include "gpu.h"
#include "hang.h"
#include "nccl_p2p.h"
#include "internal.h"
#include "json.h"
#include "kineto.h"
#include "nodes.h"
#include "steps.h"
#include "wire.h"

int cs__report_json(const struct cs_report *rep, FILE *out)
{
    struct cs__jw w = {.f = out};
    char buf[32];
    cs__jw_open(&w, NULL, '{');
    cs__jw_str(&w, "schema", "commscope-report/1");

    cs__jw_open(&w, "run", '{');
    cs__jw_str(&w, "dir", rep->dir);
    cs__jw_str(&w, "program", rep->program);
    cs__jw_int(&w, "world_size", rep->world_size);
    cs__jw_int(&w, "hosts", rep->hosts);
    snprintf(buf, sizeof buf, "%016" PRIx64, rep->run_id);
    cs__jw_str(&w, "run_id", buf);
    cs__jw_close(&w, '}');

    /* Beyond CS_REPORT_RANKS_LISTED ranks the per-rank arrays list the ranks at the extremes
     * (cs_report_rank_listed); --ranks-csv has every rank. */
    cs__jw_bool(&w, "ranks_complete", !rep->rank_listed);
    cs__jw_u64(&w, "ranks_listed", rep->nrank_listed);
    cs__jw_open(&w, "ranks", '[');
    for (size_t i = 0; i < rep->nranks; i++) {
        const struct cs_report_rank *r = &rep->ranks[i];
        if (!cs_report_rank_listed(rep, r->rank))
            continue;
        cs__jw_open(&w, NULL, '{');
        cs__jw_int(&w, "rank", r->rank);
        cs__jw_str(&w, "host", r->host);
        cs__jw_num(&w, "wall_s", r->wall_s);
        cs__jw_num(&w, "comm_s", r->comm_s);
        cs__jw_num(&w, "compute_s", r->compute_s);
        cs__jw_num(&w, "wait_s", r->wait_s);
        cs__jw_num(&w, "p2p_wait_s", r->p2p_wait_s);
        cs__jw_num(&w, "p2p_caused_s", r->p2p_caused_s);
        cs__jw_u64(&w, "calls", r->calls);
        cs__jw_u64(&w, "bytes", r->bytes);
        cs__jw_bool(&w, "partial", r->partial);
        cs__jw_num(&w, "overlap_ratio", r->overlap_ratio);
        cs__jw_num(&w, "exposed_comm_s", r->exposed_comm_s);
        cs__jw_num(&w, "gpu_comm_s", r->gpu_comm_s);
        cs__jw_num(&w, "gpu_overlapped_s", r->gpu_overlapped_s);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');

    /* Beyond CS_REPORT_COMMS_LISTED communicators the per-communicator tables list the busiest,
     * each op's others folded into one row (passes/bound.c); --ops-csv has every row. */
    cs__jw_bool(&w, "communicators_complete", !rep->comms_all);
    cs__jw_bool(&w, "ops_complete", !rep->ops_all);
    cs__jw_u64(&w, "ops_total", rep->ops_all ? rep->nops_all : rep->nops);
    cs__jw_u64(&w, "communicators_total", rep->comms_all ? rep->ncomms_all : rep->ncomms);
    cs__jw_u64(&w, "communicators_listed", rep->ncomms_listed);
    cs__jw_open(&w, "communicators", '[');
    for (size_t i = 0; i < rep->ncomms; i++) {
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "comm", rep->comms[i].comm);
        cs__jw_str(&w, "name", rep->comms[i].name);
        cs__jw_int(&w, "size", rep->comms[i].size);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');

    cs__jw_open(&w, "p2p_bandwidth", '{');
    cs__jw_u64(&w, "unmeasured_pairs", rep->p2p_bw_unmeasured);
    cs__jw_open(&w, "buckets", '[');
    for (size_t i = 0; i < rep->np2p_bw; i++) {
        const struct cs_report_p2p_bucket *b = &rep->p2p_bw[i];
        cs__jw_open(&w, NULL, '{');
        cs__jw_int(&w, "log2_size", b->log2_size);
        cs__jw_u64(&w, "pairs", b->pairs);
        cs__jw_num(&w, "mean_bytes", b->mean_bytes);
        cs__jw_num(&w, "transfer_gbps", b->transfer_gbps);
        cs__jw_num(&w, "recv_call_gbps", b->recv_call_gbps);
        cs__jw_num(&w, "send_call_gbps", b->send_call_gbps);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_close(&w, '}');

    cs__jw_open(&w, "ops", '[');
    for (size_t i = 0; i < rep->nops; i++) {
        const struct cs_report_op *o = &rep->ops[i];
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "op", o->op);
        cs__jw_str(&w, "comm", o->comm);
        if (o->comm_size > 0)
            cs__jw_int(&w, "comm_size", o->comm_size);
        else
            cs__jw_num(&w, "comm_size", NAN);
        cs__jw_u64(&w, "calls", o->calls);
        cs__jw_u64(&w, "bytes", o->bytes);
        cs__jw_num(&w, "time_s", o->time_s);
        cs__jw_num(&w, "algbw_gbps", o->algbw_gbps);
        cs__jw_num(&w, "busbw_gbps", o->busbw_gbps);
        cs__jw_u64(&w, "folded_comms", o->folded_comms);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');

    cs__jw_open(&w, "instances", '{');
    cs__jw_u64(&w, "matched", rep->matched);
    cs__jw_u64(&w, "incomplete", rep->incomplete);
    cs__jw_u64(&w, "window_edge", rep->window_edge);
    cs__jw_num(&w, "mean_skew_s", rep->mean_skew_s);
    cs__jw_num(&w, "max_skew_s", rep->max_skew_s);
    cs__jw_close(&w, '}');

    cs__jw_open(&w, "pop", '{');
    cs__jw_num(&w, "load_balance", rep->load_balance);
    cs__jw_num(&w, "communication_efficiency", rep->communication_efficiency);
    cs__jw_num(&w, "parallel_efficiency", rep->parallel_efficiency);
    cs__jw_num(&w, "serialization_efficiency",
               rep->steps ? rep->steps->serialization_efficiency : NAN);
    cs__jw_num(&w, "transfer_efficiency", rep->steps ? rep->steps->transfer_efficiency : NAN);
    cs__jw_close(&w, '}');

    cs__jw_open(&w, "stragglers", '[');
    for (size_t i = 0; i < rep->nstragglers; i++) {
        const struct cs_report_straggler *s = &rep->stragglers[i];
        if (!cs_report_rank_listed(rep, s->rank))
            continue;
        cs__jw_open(&w, NULL, '{');
        cs__jw_int(&w, "rank", s->rank);
        cs__jw_str(&w, "host", s->host);
        cs__jw_u64(&w, "late_arrivals", s->late_arrivals);
        cs__jw_num(&w, "others_waited_s", s->others_waited_s);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');

    cs__jw_open(&w, "clock", '{');
    cs__jw_num(&w, "max_offset_s", rep->max_offset_s);
    cs__jw_num(&w, "uncertainty_s", rep->uncertainty_s);
    cs__jw_u64(&w, "violations_repaired", rep->violations_repaired);
    cs__jw_open(&w, "ranks", '[');
    for (size_t i = 0; i < rep->nranks; i++) {
        const struct cs_report_rank *r = &rep->ranks[i];
        if (!cs_report_rank_listed(rep, r->rank))
            continue;
        cs__jw_open(&w, NULL, '{');
        cs__jw_int(&w, "rank", r->rank);
        cs__jw_num(&w, "offset_init_s", r->offset_init_s);
        cs__jw_num(&w, "offset_final_s", r->offset_final_s);
        cs__jw_num(&w, "drift_ppm", r->drift_ppm);
        cs__jw_num(&w, "rtt_s", r->rtt_s);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_close(&w, '}');

    cs__jw_open(&w, "trace", '{');
    cs__jw_str(&w, "source", rep->source[0] ? rep->source : "commscope");
    cs__jw_int(&w, "ranks_expected", rep->ranks_expected);
    cs__jw_int(&w, "ranks_found", rep->ranks_found);
    cs__jw_open(&w, "missing_ranks", '[');
    for (size_t i = 0; i < rep->nmissing; i++)
        cs__jw_int(&w, NULL, rep->missing[i]);
    cs__jw_close(&w, ']');
    cs__jw_open(&w, "partial_ranks", '[');
    for (size_t i = 0; i < rep->npartial; i++)
        cs__jw_int(&w, NULL, rep->partial[i]);
    cs__jw_close(&w, ']');
    cs__jw_u64(&w, "events", rep->events);
    cs__jw_u64(&w, "dropped_events", rep->dropped_events);
    cs__jw_u64(&w, "unrecorded_tests", rep->unrecorded_tests);
    cs__jw_int(&w, "window_ranks", rep->window_ranks);
    cs__jw_num(&w, "window_start_s", rep->window_start_s);
    cs__jw_u64(&w, "outside_events", rep->outside_events);
    cs__jw_u64(&w, "outside_unattributed", rep->outside_unattributed);
    cs__jw_open(&w, "problems", '[');
    for (size_t i = 0; i < rep->nproblems; i++)
        cs__jw_str(&w, NULL, rep->problems[i]);
    cs__jw_close(&w, ']');
    cs__jw_close(&w, '}');
    cs__report_wire_json(rep->wire, out);

    /* The report views (views.h): time segments per rank and the verdict. */
    if (rep->views) {
        static const char *const seg_key[CS_SEG_N] = {[CS_SEG_COMPUTE] = "compute_s",
                                                      [CS_SEG_COLL] = "collective_s",
                                                      [CS_SEG_P2P] = "p2p_s",
                                                      [CS_SEG_COMPLETION] = "completion_s",
                                                      [CS_SEG_WAIT] = "waiting_s"};
        cs__jw_open(&w, "breakdown", '[');
        for (size_t i = 0; i < rep->nranks; i++) {
            if (!cs_report_rank_listed(rep, rep->ranks[i].rank))
                continue;
            cs__jw_open(&w, NULL, '{');
            cs__jw_int(&w, "rank", rep->ranks[i].rank);
            for (int s = 0; s < CS_SEG_N; s++)
                cs__jw_num(&w, seg_key[s], rep->views->seg_s[i][s]);
            cs__jw_u64(&w, "eligible_instances", rep->views->eligible[i]);
            cs__jw_close(&w, '}');
        }
        cs__jw_close(&w, ']');
        cs__jw_open(&w, "verdict", '[');
        static char hs[CS__HANG_MAX][CS__HANG_N];
        size_t nh = cs__hang_sentences(rep, &hs[0][0], CS__HANG_N, CS__HANG_MAX);
        for (size_t i = 0; i < nh; i++)
            cs__jw_str(&w, NULL, hs[i]);
        for (size_t i = 0; i < rep->views->nfindings; i++) {
            char text[512];
            cs__jw_str(&w, NULL, cs__finding_sentence(&rep->views->findings[i], text, sizeof text));
        }
        char wb[CS__WIRE_SENTENCE];
        for (size_t i = 0; rep->wire && i < rep->wire->nwarnings; i++)
            if (cs__wire_verdict_sentence(rep, i, wb, sizeof wb))
                cs__jw_str(&w, NULL, wb);
        cs__jw_close(&w, ']');
    }

    cs__report_steps_json(rep, out);
    cs__jw_key(&w, "topology");
    cs__nodes_json(rep, out, w.depth);
    cs__report_gpu_json(rep, out);
    cs__np2p_json(rep, out);
    cs__report_kineto_json(rep, out);
    cs__phases_json(rep, out);
    cs__res_json(rep, out);
    cs__flops_json(rep, out);
    cs__hang_json(rep, out, 1);
    cs__jw_close(&w, '}');
    fputc('\n', out);
    return ferror(out) ? CS_EIO : 0;
}

/* Every rank, one CSV line each (`commscope analyze --ranks-csv FILE`; docs/report-schema.md):
 * what the JSON's per-rank arrays hold (ranks, stragglers, clock.ranks, breakdown,
 * steps.budget.ranks), for every rank, listed or not.  Returns 0, or -1 on a write error. */
int cs__report_ranks_csv(const struct cs_report *rep, FILE *out)
{
    fputs("rank,host,wall_s,comm_s,compute_s,wait_s,p2p_wait_s,p2p_caused_s,calls,bytes,partial,"
          "overlap_ratio,exposed_comm_s,gpu_comm_s,gpu_overlapped_s,late_arrivals,"
          "others_waited_s,offset_init_s,offset_final_s,drift_ppm,rtt_s,"
          "breakdown_compute_s,breakdown_collective_s,breakdown_p2p_s,breakdown_completion_s,"
          "breakdown_waiting_s,eligible_instances,budget_steps,budget_step_s,budget_compute_s,"
          "budget_gradient_sync_s",
          out);
    for (int d = 0; d < CS_DIM_N; d++)
        fprintf(out, ",budget_comm_%s_s", cs__dim_names[d]);
    fputs(",budget_wait_s,budget_p2p_wait_s,budget_other_mpi_s,budget_idle_s\n", out);
    /* the stragglers and budgets by rank (both hold a subset of the ranks, in their order) */
    size_t w = rep->world_size > 0 ? (size_t)rep->world_size : 0;
    const struct cs_report_straggler **st = calloc(w + 1, sizeof *st);
    const struct cs_report_budget **bu = calloc(w + 1, sizeof *bu);
    if (!st || !bu) {
        free(st);
        free(bu);
        return -1;
    }
    for (size_t i = 0; i < rep->nstragglers; i++)
        if ((size_t)rep->stragglers[i].rank < w)
            st[rep->stragglers[i].rank] = &rep->stragglers[i];
    for (size_t i = 0; rep->steps && i < rep->steps->nranks; i++)
        if (rep->steps->ranks[i].rank >= 0 && (size_t)rep->steps->ranks[i].rank < w)
            bu[rep->steps->ranks[i].rank] = &rep->steps->ranks[i];
    for (size_t i = 0; i < rep->nranks; i++) {
        const struct cs_report_rank *r = &rep->ranks[i];
        fprintf(out, "%d,", r->rank);
        cs__csv_str(out, r->host);
        const double a[] = {r->wall_s,          r->comm_s,         r->compute_s,
                            r->wait_s,          r->p2p_wait_s,     r->p2p_caused_s,
                            (double)r->calls,   (double)r->bytes,  (double)r->partial,
                            r->overlap_ratio,   r->exposed_comm_s, r->gpu_comm_s,
                            r->gpu_overlapped_s};
        for (size_t j = 0; j < sizeof a / sizeof a[0]; j++)
            cs__csv_num(out, a[j]);
        const struct cs_report_straggler *s = (size_t)r->rank < w ? st[r->rank] : NULL;
        fprintf(out, ",%" PRIu64, s ? s->late_arrivals : 0);
        cs__csv_num(out, s ? s->others_waited_s : 0);
        const double c[] = {r->offset_init_s, r->offset_final_s, r->drift_ppm, r->rtt_s};
        for (size_t j = 0; j < sizeof c / sizeof c[0]; j++)
            cs__csv_num(out, c[j]);
        for (int k = 0; k < CS_SEG_N; k++)
            cs__csv_num(out, rep->views ? rep->views->seg_s[i][k] : NAN);
        cs__csv_num(out, rep->views ? (double)rep->views->eligible[i] : NAN);
        const struct cs_report_budget *b = (size_t)r->rank < w ? bu[r->rank] : NULL;
        cs__csv_num(out, b ? b->steps : NAN);
        cs__csv_num(out, b ? b->step_s : NAN);
        cs__csv_num(out, b ? b->compute_s : NAN);
        cs__csv_num(out, b ? b->grad_sync_s : NAN);
        for (int d = 0; d < CS_DIM_N; d++)
            cs__csv_num(out, b ? b->comm_s[d] : NAN);
        cs__csv_num(out, b ? b->wait_s : NAN);
        cs__csv_num(out, b ? b->p2p_wait_s : NAN);
        cs__csv_num(out, b ? b->other_mpi_s : NAN);
        cs__csv_num(out, b ? b->idle_s : NAN);
        fputc('\n', out);
    }
    free(st);
    free(bu);
    return ferror(out) ? -1 : 0;
}

static int comm_by_label(const void *x, const void *y)
{
    return strcmp(((const struct cs_report_comm *)x)->comm,
                  ((const struct cs_report_comm *)y)->comm);
}

/* Every (op, communicator) row, one CSV line each, folded or not (`commscope analyze --ops-csv
 * FILE`; docs/report-schema.md): the per-op table's figures, the communicator's name and its
 * topology row's scope, path and capacity.  Returns 0, or -1 on a write error. */
int cs__report_ops_csv(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_op *ops = rep->ops_all ? rep->ops_all : rep->ops;
    size_t nops = rep->ops_all ? rep->nops_all : rep->nops;
    const struct cs_report_nodes *nd = rep->nodes;
    const struct cs_report_optopo *topo = !nd ? NULL : rep->ops_all ? nd->ops_all : nd->ops;
    size_t nc = rep->comms_all ? rep->ncomms_all : rep->ncomms;
    struct cs_report_comm *byl = calloc(nc + 1, sizeof *byl);
    if (!byl)
        return -1;
    memcpy(byl, rep->comms_all ? rep->comms_all : rep->comms, nc * sizeof *byl);
    qsort(byl, nc, sizeof *byl, comm_by_label);
    fputs("op,comm,comm_name,comm_size,calls,bytes,time_s,algbw_gbps,busbw_gbps,scope,path,"
          "capacity_gbps,pct_of_capacity\n",
          out);
    for (size_t i = 0; i < nops; i++) {
        const struct cs_report_op *o = &ops[i];
        struct cs_report_comm key;
        snprintf(key.comm, sizeof key.comm, "%s", o->comm);
        const struct cs_report_comm *c = bsearch(&key, byl, nc, sizeof *byl, comm_by_label);
        cs__csv_str(out, o->op);
        fputc(',', out);
        cs__csv_str(out, o->comm);
        fputc(',', out);
        cs__csv_str(out, c ? c->name : o->comm);
        cs__csv_num(out, o->comm_size > 0 ? o->comm_size : NAN);
        fprintf(out, ",%" PRIu64 ",%" PRIu64, o->calls, o->bytes);
        cs__csv_num(out, o->time_s);
        cs__csv_num(out, o->algbw_gbps);
        cs__csv_num(out, o->busbw_gbps);
        fputc(',', out);
        cs__csv_str(out, topo ? topo[i].scope : "");
        fputc(',', out);
        cs__csv_str(out, topo ? topo[i].path : "");
        cs__csv_num(out, topo ? topo[i].capacity_gbps : NAN);
        cs__csv_num(out, topo ? topo[i].pct_of_capacity : NAN);
        fputc('\n', out);
    }
    free(byl);
    return ferror(out) ? -1 : 0;
}
