/* The JSON renderer (schema in docs/report-schema.md): formatting only, no computation. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "gpu.h"
#include "internal.h"
#include "kineto.h"
#include "steps.h"

/* A minimal streaming JSON writer: commas and indentation from a stack of "first" flags. */
struct jw {
    FILE *f;
    int depth;
    int first[16];
};

static void jw_str_raw(struct jw *w, const char *s)
{
    fputc('"', w->f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", w->f);
            break;
        case '\\':
            fputs("\\\\", w->f);
            break;
        case '\n':
            fputs("\\n", w->f);
            break;
        case '\r':
            fputs("\\r", w->f);
            break;
        case '\t':
            fputs("\\t", w->f);
            break;
        default:
            /* Control bytes and bytes >= 0x80 are escaped so the output is always valid
             * ASCII JSON, whatever encoding the host or program name had. */
            if (*p < 0x20 || *p >= 0x7f)
                fprintf(w->f, "\\u%04x", *p);
            else
                fputc(*p, w->f);
        }
    }
    fputc('"', w->f);
}

static void jw_key(struct jw *w, const char *key)
{
    if (w->depth > 0) {
        if (!w->first[w->depth])
            fputc(',', w->f);
        w->first[w->depth] = 0;
        fputc('\n', w->f);
        for (int i = 0; i < w->depth; i++)
            fputs("  ", w->f);
    }
    if (key) {
        jw_str_raw(w, key);
        fputs(": ", w->f);
    }
}

static void jw_open(struct jw *w, const char *key, char c)
{
    jw_key(w, key);
    fputc(c, w->f);
    w->depth++;
    w->first[w->depth] = 1;
}

static void jw_close(struct jw *w, char c)
{
    int empty = w->first[w->depth];
    w->depth--;
    if (!empty) {
        fputc('\n', w->f);
        for (int i = 0; i < w->depth; i++)
            fputs("  ", w->f);
    }
    fputc(c, w->f);
}

static void jw_str(struct jw *w, const char *key, const char *s)
{
    jw_key(w, key);
    jw_str_raw(w, s);
}

static void jw_num(struct jw *w, const char *key, double v)
{
    jw_key(w, key);
    if (isfinite(v))
        fprintf(w->f, "%.9g", v);
    else
        fputs("null", w->f);
}

static void jw_u64(struct jw *w, const char *key, uint64_t v)
{
    jw_key(w, key);
    fprintf(w->f, "%" PRIu64, v);
}

static void jw_int(struct jw *w, const char *key, long long v)
{
    jw_key(w, key);
    fprintf(w->f, "%lld", v);
}

static void jw_bool(struct jw *w, const char *key, int v)
{
    jw_key(w, key);
    fputs(v ? "true" : "false", w->f);
}

int cs__report_json(const struct cs_report *rep, FILE *out)
{
    struct jw w = {.f = out};
    char buf[32];
    jw_open(&w, NULL, '{');
    jw_str(&w, "schema", "commscope-report/1");

    jw_open(&w, "run", '{');
    jw_str(&w, "dir", rep->dir);
    jw_str(&w, "program", rep->program);
    jw_int(&w, "world_size", rep->world_size);
    jw_int(&w, "hosts", rep->hosts);
    snprintf(buf, sizeof buf, "%016" PRIx64, rep->run_id);
    jw_str(&w, "run_id", buf);
    jw_close(&w, '}');

    jw_open(&w, "ranks", '[');
    for (size_t i = 0; i < rep->nranks; i++) {
        const struct cs_report_rank *r = &rep->ranks[i];
        jw_open(&w, NULL, '{');
        jw_int(&w, "rank", r->rank);
        jw_str(&w, "host", r->host);
        jw_num(&w, "wall_s", r->wall_s);
        jw_num(&w, "comm_s", r->comm_s);
        jw_num(&w, "compute_s", r->compute_s);
        jw_num(&w, "wait_s", r->wait_s);
        jw_u64(&w, "calls", r->calls);
        jw_u64(&w, "bytes", r->bytes);
        jw_bool(&w, "partial", r->partial);
        jw_num(&w, "overlap_ratio", r->overlap_ratio);
        jw_num(&w, "exposed_comm_s", r->exposed_comm_s);
        jw_num(&w, "gpu_comm_s", r->gpu_comm_s);
        jw_num(&w, "gpu_overlapped_s", r->gpu_overlapped_s);
        jw_close(&w, '}');
    }
    jw_close(&w, ']');

    jw_open(&w, "ops", '[');
    for (size_t i = 0; i < rep->nops; i++) {
        const struct cs_report_op *o = &rep->ops[i];
        jw_open(&w, NULL, '{');
        jw_str(&w, "op", o->op);
        jw_str(&w, "comm", o->comm);
        if (o->comm_size > 0)
            jw_int(&w, "comm_size", o->comm_size);
        else
            jw_num(&w, "comm_size", NAN);
        jw_u64(&w, "calls", o->calls);
        jw_u64(&w, "bytes", o->bytes);
        jw_num(&w, "time_s", o->time_s);
        jw_num(&w, "algbw_gbps", o->algbw_gbps);
        jw_num(&w, "busbw_gbps", o->busbw_gbps);
        jw_close(&w, '}');
    }
    jw_close(&w, ']');

    jw_open(&w, "instances", '{');
    jw_u64(&w, "matched", rep->matched);
    jw_u64(&w, "incomplete", rep->incomplete);
    jw_num(&w, "mean_skew_s", rep->mean_skew_s);
    jw_num(&w, "max_skew_s", rep->max_skew_s);
    jw_close(&w, '}');

    jw_open(&w, "pop", '{');
    jw_num(&w, "load_balance", rep->load_balance);
    jw_num(&w, "communication_efficiency", rep->communication_efficiency);
    jw_num(&w, "parallel_efficiency", rep->parallel_efficiency);
    jw_num(&w, "serialization_efficiency",
           rep->steps ? rep->steps->serialization_efficiency : NAN);
    jw_num(&w, "transfer_efficiency", rep->steps ? rep->steps->transfer_efficiency : NAN);
    jw_close(&w, '}');

    jw_open(&w, "stragglers", '[');
    for (size_t i = 0; i < rep->nstragglers; i++) {
        const struct cs_report_straggler *s = &rep->stragglers[i];
        jw_open(&w, NULL, '{');
        jw_int(&w, "rank", s->rank);
        jw_str(&w, "host", s->host);
        jw_u64(&w, "late_arrivals", s->late_arrivals);
        jw_num(&w, "others_waited_s", s->others_waited_s);
        jw_close(&w, '}');
    }
    jw_close(&w, ']');

    jw_open(&w, "clock", '{');
    jw_num(&w, "max_offset_s", rep->max_offset_s);
    jw_num(&w, "uncertainty_s", rep->uncertainty_s);
    jw_u64(&w, "violations_repaired", rep->violations_repaired);
    jw_open(&w, "ranks", '[');
    for (size_t i = 0; i < rep->nranks; i++) {
        const struct cs_report_rank *r = &rep->ranks[i];
        jw_open(&w, NULL, '{');
        jw_int(&w, "rank", r->rank);
        jw_num(&w, "offset_init_s", r->offset_init_s);
        jw_num(&w, "offset_final_s", r->offset_final_s);
        jw_num(&w, "drift_ppm", r->drift_ppm);
        jw_num(&w, "rtt_s", r->rtt_s);
        jw_close(&w, '}');
    }
    jw_close(&w, ']');
    jw_close(&w, '}');

    jw_open(&w, "trace", '{');
    jw_str(&w, "source", rep->source[0] ? rep->source : "commscope");
    jw_int(&w, "ranks_expected", rep->ranks_expected);
    jw_int(&w, "ranks_found", rep->ranks_found);
    jw_open(&w, "missing_ranks", '[');
    for (size_t i = 0; i < rep->nmissing; i++)
        jw_int(&w, NULL, rep->missing[i]);
    jw_close(&w, ']');
    jw_open(&w, "partial_ranks", '[');
    for (size_t i = 0; i < rep->npartial; i++)
        jw_int(&w, NULL, rep->partial[i]);
    jw_close(&w, ']');
    jw_u64(&w, "events", rep->events);
    jw_u64(&w, "dropped_events", rep->dropped_events);
    jw_u64(&w, "unrecorded_tests", rep->unrecorded_tests);
    jw_open(&w, "problems", '[');
    for (size_t i = 0; i < rep->nproblems; i++)
        jw_str(&w, NULL, rep->problems[i]);
    jw_close(&w, ']');
    jw_close(&w, '}');

    /* The report views (views.h): time segments per rank and the verdict. */
    if (rep->views) {
        static const char *const seg_key[CS_SEG_N] = {
            [CS_SEG_COMPUTE] = "compute_s", [CS_SEG_COLL] = "collective_s",
            [CS_SEG_P2P] = "p2p_s", [CS_SEG_COMPLETION] = "completion_s",
            [CS_SEG_WAIT] = "waiting_s"};
        jw_open(&w, "breakdown", '[');
        for (size_t i = 0; i < rep->nranks; i++) {
            jw_open(&w, NULL, '{');
            jw_int(&w, "rank", rep->ranks[i].rank);
            for (int s = 0; s < CS_SEG_N; s++)
                jw_num(&w, seg_key[s], rep->views->seg_s[i][s]);
            jw_u64(&w, "eligible_instances", rep->views->eligible[i]);
            jw_close(&w, '}');
        }
        jw_close(&w, ']');
        jw_open(&w, "verdict", '[');
        for (size_t i = 0; i < rep->views->nfindings; i++) {
            char text[512];
            jw_str(&w, NULL, cs__finding_sentence(&rep->views->findings[i], text, sizeof text));
        }
        jw_close(&w, ']');
    }

    cs__report_steps_json(rep, out);
    cs__report_gpu_json(rep, out);
    cs__report_kineto_json(rep, out);
    jw_close(&w, '}');
    fputc('\n', out);
    return ferror(out) ? CS_EIO : 0;
}
