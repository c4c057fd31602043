/*
 * The pass table's hooks (passes.def) in one shape per phase, for the driver (analyze.c).  Each
 * pass keeps its own entry points; the adapters here give them the table's signatures, test
 * whether the pass is on, and say in the run's problems when one cannot start.
 */
#ifndef COMMSCOPE_ANALYZER_PASSES_H
#define COMMSCOPE_ANALYZER_PASSES_H

#include <stddef.h>
#include <stdint.h>

#include "bound.h"
#include "flops.h"
#include "gpu.h"
#include "hang.h"
#include "internal.h"
#include "nccl_p2p.h"
#include "phases.h"
#include "resources.h"
#include "steps.h"

/* One event of the merged stream as the driver hands it to the passes. */
struct cs__ev {
    const struct cs_event *ev;
    int r;             /* world rank */
    enum cs_op_kind k; /* the op's kind */
    int64_t tb, te;    /* begin and end, aligned to rank 0's clock */
    size_t row;        /* published by metrics (the rows above it do not see it): the op row of
                        * (op, comm), SIZE_MAX none; set by the maker of a derived event */
};

/* What metrics found on a finished instance, published to the instance hooks below it. */
struct cs__inst_facts {
    int used;         /* complete and not mixed (the driver): only then is the rest set and */
                      /* the instance's arrivals (causality-corrected) and waits in in->wait */
    uint64_t size;    /* the largest member's bytes */
    int64_t last;     /* the last arrival */
    int64_t last_end; /* the last end */
    int32_t li;       /* the member that arrived last (the first such) */
    uint64_t others;  /* what the other members waited in all */
    int late;         /* li arrived later than the clock uncertainty after the second latest */
};

/* The phases of the pass table, each one expansion of passes.def (the driver's, analyze.c, and
 * cs__analyze_fact's below). */
#define CS__HOOK_BEGIN(name, begin, ...) begin(run);
#define CS__HOOK_EVENT(name, begin, event, ...) event(run, e);
#define CS__HOOK_DERIVED(name, begin, event, derived, ...) derived(run, e);
#define CS__HOOK_FACT(name, begin, event, derived, fact, ...) fact(run, f);
#define CS__HOOK_INSTANCE(name, b, e, d, fa, instance, ...) instance(run, in, &f);
#define CS__HOOK_MEMBER(name, b, e, d, fa, in_, member, ...) member(run, in, i);
#define CS__HOOK_RANK_DONE(name, b, e, d, fa, in_, m, rank_done, ...) rank_done(run, r);
#define CS__HOOK_DRAIN(name, b, e, d, fa, in_, m, rd, drain, ...) drain(run);
#define CS__HOOK_FINISH(name, b, e, d, fa, in_, m, rd, dr, finish, ...) finish(run);
#define CS__HOOK_REPORT(name, b, e, d, fa, in_, m, rd, dr, f, report, ...) report(run, rep);
#define CS__HOOK_FREE(name, b, e, d, fa, in_, m, rd, dr, f, rp, free_) free_(run);

/* The driver's entry points for the passes: a derived event (it goes to the rows' derived
 * hooks), a finished instance (complete: every member's arrival and end are known); a fact
 * (cs__analyze_fact, at the end of this file: inline, so that a fact's kind is known where it
 * is made and only its takers' code remains). */
void cs__analyze_derived(struct cs__run *run, struct cs__ev *e);
void cs__analyze_instance(struct cs__run *run, struct cs__inst *in, int complete);
/* Every pass's free hook, in table order (cs__run_free). */
void cs__passes_free(struct cs__run *run);

/* Whether kind k is among the kinds in mask (CS__KIND(a) | CS__KIND(b) ...): one test. */
#define CS__KIND(k) (1u << (k))
static inline int cs__kind_in(enum cs_op_kind k, unsigned mask)
{
    return (CS__KIND(k) & mask) != 0;
}

/* The hooks of passes.def that are not a pass's own entry point. */
static inline void cs__none_begin(struct cs__run *run)
{
    (void)run;
}
static inline void cs__none_event(struct cs__run *run, struct cs__ev *e)
{
    (void)run, (void)e;
}
#define cs__none_derived cs__none_event
static inline void cs__none_fact(struct cs__run *run, const struct cs__fact *f)
{
    (void)run, (void)f;
}
static inline void cs__none_instance(struct cs__run *run, struct cs__inst *in,
                                     const struct cs__inst_facts *f)
{
    (void)run, (void)in, (void)f;
}
static inline void cs__none_member(struct cs__run *run, const struct cs__inst *in, int32_t i)
{
    (void)run, (void)in, (void)i;
}
static inline void cs__none_rank_done(struct cs__run *run, int r)
{
    (void)run, (void)r;
}
#define cs__none_drain cs__none_begin
#define cs__none_finish cs__none_begin
#define cs__none_free cs__none_begin
static inline void cs__none_report(struct cs__run *run, struct cs_report *rep)
{
    (void)run, (void)rep;
}

/* phases: the step phases, from the annotation ranges of each rank. */
static inline void cs__phases_pevent(struct cs__run *run, struct cs__ev *e)
{
    if (run->phases)
        cs__phases_event(run, e->r, e->ev, e->k, e->tb, e->te);
}

static inline void cs__phases_pfact(struct cs__run *run, const struct cs__fact *f)
{
    if (run->phases && f->kind == CS__FACT_GPU_EXPOSED)
        cs__phases_exposed(run, f->rank, f->t, f->e);
}

/* events: the events CSV, a sink on the stream. */
static inline void cs__events_pevent(struct cs__run *run, struct cs__ev *e)
{
    if (run->events_out)
        cs__events_csv_line(run->events_out, run, e->r, e->ev, e->tb, e->te);
}

/* metrics: per rank and op row; publishes e->row and the instance facts. */
static inline void cs__metrics_pevent(struct cs__run *run, struct cs__ev *e)
{
    e->row = cs__metrics_event(run, e->r, e->ev, e->k, e->te);
}

static inline void cs__metrics_pfact(struct cs__run *run, const struct cs__fact *f)
{
    if (f->kind == CS__FACT_REQUEST)
        cs__metrics_request_done(run, f->req, f->t);
}

/* steps: boundaries and groups need a look at one rank's whole stream first (begin). */
static inline void cs__steps_pbegin(struct cs__run *run)
{
    if (cs__steps_begin(run)) {
        cs__problem(run, "out of memory in the step analysis; steps are not reported");
        cs__steps_free(run);
    }
}
static inline void cs__steps_pevent(struct cs__run *run, struct cs__ev *e)
{
    cs__steps_event(run, e->r, e->ev, e->k, e->tb, e->te);
}
static inline void cs__steps_pfact(struct cs__run *run, const struct cs__fact *f)
{
    if (f->kind == CS__FACT_GPU_WAIT)
        cs__steps_p2p_wait(run, f->rank, f->comm, f->t, f->e);
}
static inline void cs__steps_pinstance(struct cs__run *run, struct cs__inst *in,
                                       const struct cs__inst_facts *f)
{
    if (f->used)
        cs__steps_instance(run, in);
}

/* views: the report's charts, an extra (without memory for them the analysis goes on). */
static inline void cs__views_pbegin(struct cs__run *run)
{
    if (cs__views_init(run))
        cs__problem(run, "out of memory for the report's charts; the HTML report leaves them out");
}
static inline void cs__views_pevent(struct cs__run *run, struct cs__ev *e)
{
    if (run->views)
        cs__views_event(run, e->r, e->ev, e->k);
}
static inline void cs__views_pfact(struct cs__run *run, const struct cs__fact *f)
{
    if (f->kind == CS__FACT_TRANSFER)
        cs__views_transfer(run, f->op, f->comm, f->bytes, f->ns);
    else if (f->kind == CS__FACT_WAIT)
        cs__views_wait_at(run, f->rank, f->t, f->ns);
}
static inline void cs__views_pinstance(struct cs__run *run, struct cs__inst *in,
                                       const struct cs__inst_facts *f)
{
    if (!f->used || !run->views)
        return;
    cs__views_waits(run, in); /* then each member: */
    if (in->n > 1)            /* (on a communicator of one rank nothing moves) */
        cs__views_transfer(run, in->op, in->comm, (double)f->size,
                           (double)(f->last_end > f->last ? f->last_end - f->last : 0));
}

static inline void cs__views_pmember(struct cs__run *run, const struct cs__inst *in, int32_t i)
{
    if (run->views)
        cs__views_member(run, in, i);
}

/* np2p: NCCL point-to-point calls paired across ranks. */
static inline void cs__np2p_pevent(struct cs__run *run, struct cs__ev *e)
{
    if (e->k == CS_KIND_NP2P)
        cs__np2p_call(run, e->r, e->ev);
}

static inline void cs__np2p_pfact(struct cs__run *run, const struct cs__fact *f)
{
    if (f->kind == CS__FACT_NCCL_KERNEL)
        cs__np2p_gpu(run, f->rank, f->id, f->t, f->e);
}

/* wire: the capture files against the traced traffic. */
static inline void cs__wire_pevent(struct cs__run *run, struct cs__ev *e)
{
    if (run->wire)
        cs__wire_event(run, e->r, e->ev);
}
static inline void cs__wire_pinstance(struct cs__run *run, struct cs__inst *in,
                                      const struct cs__inst_facts *f)
{
    if (f->used && run->wire)
        cs__wire_instance(run, in);
}

/* vsteps: the report views that need steps. */
static inline void cs__vsteps_pbegin(struct cs__run *run)
{
    if (cs__vsteps_init(run))
        cs__problem(run, "out of memory for the step views; the HTML report shows time bins");
}
static inline void cs__vsteps_pinstance(struct cs__run *run, struct cs__inst *in,
                                        const struct cs__inst_facts *f)
{
    if (f->used && f->late)
        cs__vsteps_late(run, in, f->li, f->others);
}
static inline void cs__vsteps_pmember(struct cs__run *run, const struct cs__inst *in, int32_t i)
{
    if (run->vsteps && in->wait[i] > 0)
        cs__vsteps_member(run, in, i);
}
static inline void cs__vsteps_pfact(struct cs__run *run, const struct cs__fact *f)
{
    if (f->kind == CS__FACT_WAIT)
        cs__vsteps_wait_at(run, f->rank, f->step, f->ns);
}

/* gpu: the GPU timeline; an NCCL kernel's record makes the collective's derived event. */
static inline void cs__gpu_pevent(struct cs__run *run, struct cs__ev *e)
{
    if (cs__kind_in(e->k, CS__KIND(CS_KIND_GPU) | CS__KIND(CS_KIND_NCOLL) | CS__KIND(CS_KIND_NP2P)))
        cs__gpu_event(run, e->r, e->ev, e->k, e->tb, e->te);
}

/* match: collective instances and requests, from collectives and requests only. */
static inline void cs__match_pevent(struct cs__run *run, struct cs__ev *e)
{
    if (cs__kind_in(e->k, CS__KIND(CS_KIND_COLL) | CS__KIND(CS_KIND_ICOLL) |
                              CS__KIND(CS_KIND_IP2P) | CS__KIND(CS_KIND_DONE)))
        cs__match_event(run, e->r, e->ev, e->k, e->row, e->tb, e->te);
}
static inline void cs__match_pderived(struct cs__run *run, struct cs__ev *e)
{
    cs__match_derived(run, e->r, e->ev, e->k, e->row, e->tb, e->te);
}

/* perfetto: the timeline export, when asked for (after the steps: --perfetto-steps needs their
 * boundaries, and a step's first event already counts as in the step). */
static inline void cs__perfetto_pbegin(struct cs__run *run)
{
    if (run->perfetto_opts)
        cs__perfetto_begin(run);
}
static inline void cs__perfetto_pevent(struct cs__run *run, struct cs__ev *e)
{
    if (run->perfetto)
        cs__perfetto_event(run, e->r, e->ev, e->k, e->tb, e->te);
}
static inline void cs__perfetto_pdrain(struct cs__run *run)
{
    if (run->perfetto && cs__perfetto_finish(run))
        cs__problem(run, "error writing the Perfetto trace %s", run->perfetto_opts->path);
}
/* Only on a path that did not drain: the trace is closed as it stands. */
static inline void cs__perfetto_free(struct cs__run *run)
{
    if (run->perfetto)
        cs__perfetto_finish(run);
}

/* hang: NCCL enqueues and NCCL kernels' completions (event hook), the incomplete instances
 * (instance hook); the diagnosis in its report hook. */
static inline void cs__hang_pevent(struct cs__run *run, struct cs__ev *e)
{
    if (e->k == CS_KIND_NCOLL || (e->k == CS_KIND_GPU && e->ev->op == CS_OP_GPU_NCCL))
        cs__hang_event(run, e->r, e->ev, e->tb);
}
static inline void cs__hang_pinstance(struct cs__run *run, struct cs__inst *in,
                                      const struct cs__inst_facts *f)
{
    if (!f->used)
        cs__hang_instance(run, in);
}

/* A fact for every row's fact hook (struct cs__fact, internal.h). */
static inline __attribute__((always_inline)) void cs__analyze_fact(struct cs__run *run,
                                                                   const struct cs__fact *f)
{
#define CS__PASS CS__HOOK_FACT
#include "passes.def"
#undef CS__PASS
}

#endif
