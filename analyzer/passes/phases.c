/*
 * Step phases (phases.h): per rank, the ranges open on it in the merged stream's order, and at
 * every change (a range begins or ends, a step begins or ends) the time since the last change is
 * booked to the step's phase of the moment, and to the pattern of the innermost open range.  A
 * step's figures count once the step closes (the tail after the last boundary is left out, as in
 * the step statistics).  Memory: per rank a small stack of open ranges and one step's figures.
 */
#include "phases.h"

#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "steps.h"

const char *const cs_phase_names[CS_PHASE_N] = {"data", "forward", "backward", "optimizer",
                                                "other"};

/* The defaults: PyTorch's own annotations (profiler, DDP, FSDP, autograd, optimizers) and
 * Megatron-LM's timer names.  Patterns fit in the 31 bytes of a name a record keeps. */
static const struct cs__phase_pat defaults[] = {
    {"enumerate(DataLoader)*", "enumerate(DataLoader)", CS_PHASE_DATA},
    {"batch-generator*", "batch-generator", CS_PHASE_DATA},
    {"DistributedDataParallel.forward*", "DistributedDataParallel.forward", CS_PHASE_FORWARD},
    {"FullyShardedDataParallel.forwar*", "FullyShardedDataParallel.forward", CS_PHASE_FORWARD},
    {"forward-compute*", "forward-compute", CS_PHASE_FORWARD},
    {"CompiledFunction", "CompiledFunction", CS_PHASE_FORWARD},
    {"autograd::engine::evaluate_fun*", "autograd::engine::evaluate_function", CS_PHASE_BACKWARD},
    {"backward-compute*", "backward-compute", CS_PHASE_BACKWARD},
    {"Optimizer.step#*", "Optimizer.step", CS_PHASE_OPTIMIZER},
    {"Optimizer.zero_grad#*", "Optimizer.zero_grad", CS_PHASE_OPTIMIZER},
    {"optimizer", "optimizer", CS_PHASE_OPTIMIZER},
};
#define NDEF (int)(sizeof defaults / sizeof defaults[0])

static int phase_named(const char *s, size_t n)
{
    for (int i = 0; i < CS_PHASE_N; i++)
        if (strlen(cs_phase_names[i]) == n && !strncmp(cs_phase_names[i], s, n))
            return i;
    return -1;
}

void cs__phase_pats_init(struct cs__phase_pats *p)
{
    memset(p, 0, sizeof *p);
    const char *env = getenv("COMMSCOPE_PHASE_NVTX");
    if (env && *env) {
        snprintf(p->env, sizeof p->env, "%s", env);
        const char *s = env;
        while (*s) {
            size_t len = strcspn(s, ";");
            const char *eq = memchr(s, '=', len);
            int ph = eq ? phase_named(s, (size_t)(eq - s)) : -1;
            if (ph < 0 || (size_t)(eq - s) + 1 == len) {
                if (!p->err[0])
                    snprintf(p->err, sizeof p->err,
                             "COMMSCOPE_PHASE_NVTX: '%.*s' is not phase=pattern[,pattern] (phases: "
                             "data, forward, backward, optimizer, other); it is ignored",
                             (int)(len > 60 ? 60 : len), s);
            } else {
                const char *q = eq + 1, *end = s + len;
                while (q < end && p->n < CS__PHASE_PATS - NDEF) {
                    size_t m = strcspn(q, ",;");
                    if (q + m > end)
                        m = (size_t)(end - q);
                    if (m) {
                        struct cs__phase_pat *x = &p->v[p->n++];
                        snprintf(x->pat, sizeof x->pat, "%.*s", (int)m, q);
                        memcpy(x->label, x->pat, sizeof x->label);
                        x->phase = ph;
                    }
                    q += m + (q + m < end);
                }
            }
            s += len + (s[len] == ';');
        }
    }
    for (int i = 0; i < NDEF; i++)
        p->v[p->n++] = defaults[i];
}

int cs__phase_match(const struct cs__phase_pats *p, const char *name)
{
    char nm[CS_NVTX_NAME_MAX];
    snprintf(nm, sizeof nm, "%s", name);
    for (int i = 0; i < p->n; i++)
        if (fnmatch(p->v[i].pat, nm, 0) == 0)
            return i;
    return -1;
}

/* ---- the pass ---- */

#define OPEN 32 /* phase ranges open at once per rank that are followed */

struct prank {
    uint64_t occ; /* cs__steps_boundary's state */
    int in_step, gpu;
    int64_t t0; /* the last change */
    struct {
        uint32_t hash;
        int pat;
    } open[OPEN];
    int nopen;
    /* the open step */
    double cur[CS_PHASE_N], cur_comm[CS_PHASE_N], cur_dur;
    double *cur_pat;   /* per pattern */
    uint64_t *cur_cnt; /* ranges of the pattern begun */
    /* closed steps */
    uint64_t steps;
    double ph[CS_PHASE_N], comm[CS_PHASE_N], dur;
    /* GPU work by the phase of its launch: of the open step, of the closed steps; the work whose
     * launch is unknown or older than the history; the history of phase changes (a ring) */
    double cur_gpu[CS_PHASE_N], gpu_ph[CS_PHASE_N], gpu_lost;
    /* the same for GPU communication no compute covered, by the phase it ran in */
    double cur_exp[CS_PHASE_N], exp_ph[CS_PHASE_N];
    int gpu_exp;     /* some was seen */
    int gpu_launch;  /* some GPU record carried its launch time */
    uint64_t stepno; /* boundaries seen */
    /* The phase changes, in time order (past HIST_KEEP of them, those before the previous step
     * are let go at each boundary: GPU work launched earlier is then unplaced). */
    struct hist {
        int64_t t;
        int32_t phase; /* -1 outside steps */
        uint32_t step; /* stepno then */
    } * hist;
    size_t nhist, caphist;
    int hist_cut; /* older changes were let go */
};

struct cs__phases {
    struct cs__phase_pats P;
    int world;
    struct prank *r;
    double *pat_ns; /* per pattern, all ranks' closed steps */
    uint64_t *pat_n;
    int seen; /* some range named a phase */
    int oom;  /* a rank's phase history could not grow: GPU work of later launches is unplaced */
};

void cs__phases_begin(struct cs__run *run)
{
    struct cs__phases *Q = calloc(1, sizeof *Q);
    if (!Q) {
        cs__problem(run, "out of memory for the step phases; they are not reported");
        return;
    }
    cs__phase_pats_init(&Q->P);
    if (Q->P.err[0])
        cs__problem(run, "%s", Q->P.err);
    Q->world = run->world;
    size_t np = (size_t)Q->P.n;
    Q->r = calloc((size_t)run->world + 1, sizeof *Q->r);
    Q->pat_ns = calloc(np, sizeof *Q->pat_ns);
    Q->pat_n = calloc(np, sizeof *Q->pat_n);
    int ok = Q->r && Q->pat_ns && Q->pat_n;
    for (int i = 0; ok && i < run->world; i++) {
        Q->r[i].cur_pat = calloc(np, sizeof *Q->r[i].cur_pat);
        Q->r[i].cur_cnt = calloc(np, sizeof *Q->r[i].cur_cnt);
        ok = Q->r[i].cur_pat && Q->r[i].cur_cnt;
    }
    run->phases = Q;
    if (!ok) {
        cs__phases_free(run);
        cs__problem(run, "out of memory for the step phases; they are not reported");
    }
}

/* Book [R->t0, t) to the phase of the moment. */
static void advance(struct cs__phases *Q, struct prank *R, int64_t t)
{
    if (R->in_step && t > R->t0) {
        double L = (double)(t - R->t0);
        int pat = R->nopen ? R->open[R->nopen - 1].pat : -1;
        R->cur[pat >= 0 ? Q->P.v[pat].phase : CS_PHASE_OTHER] += L;
        if (pat >= 0)
            R->cur_pat[pat] += L;
        R->cur_dur += L;
    }
    if (t > R->t0)
        R->t0 = t;
}

static void clear_step(struct cs__phases *Q, struct prank *R)
{
    memset(R->cur, 0, sizeof R->cur);
    memset(R->cur_comm, 0, sizeof R->cur_comm);
    R->cur_dur = 0;
    memset(R->cur_pat, 0, (size_t)Q->P.n * sizeof *R->cur_pat);
    memset(R->cur_cnt, 0, (size_t)Q->P.n * sizeof *R->cur_cnt);
}

/* The phase of the moment, -1 outside steps. */
static int phase_of(const struct cs__phases *Q, const struct prank *R)
{
    if (!R->in_step)
        return -1;
    int pat = R->nopen ? R->open[R->nopen - 1].pat : -1;
    return pat >= 0 ? Q->P.v[pat].phase : CS_PHASE_OTHER;
}

/* Remember the phase from t on (after a boundary or a phase range's begin or end).  Returns 0,
 * or -1 out of memory. */
static int remember(const struct cs__phases *Q, struct prank *R, int64_t t)
{
    struct hist h = {.t = t, .phase = phase_of(Q, R), .step = (uint32_t)R->stepno};
    if (R->nhist) {
        struct hist *last = &R->hist[R->nhist - 1];
        if (last->phase == h.phase && last->step == h.step)
            return 0;
        if (last->t == t) {
            *last = h;
            return 0;
        }
    }
    if (R->nhist == R->caphist) {
        size_t cap = R->caphist ? 2 * R->caphist : 64;
        struct hist *v = realloc(R->hist, cap * sizeof *v);
        if (!v)
            return -1;
        R->hist = v;
        R->caphist = cap;
    }
    R->hist[R->nhist++] = h;
    return 0;
}

/* At a boundary, past HIST_KEEP changes: let go of those before the previous step.  (GPU records
 * and the GPU sweep's exposed stretches come up to a reorder window after the host events.) */
#define HIST_KEEP 4096
static void forget(struct prank *R)
{
    size_t k = 0;
    while (R->nhist > HIST_KEEP && k < R->nhist && R->hist[k].step + 1 < R->stepno)
        k++;
    if (k && k < R->nhist) {
        memmove(R->hist, R->hist + k, (R->nhist - k) * sizeof *R->hist);
        R->nhist -= k;
        R->hist_cut = 1;
    }
}

/* The index of the latest change at or before t (R->hist[0].t <= t, R->nhist > 0). */
static size_t at_or_before(const struct prank *R, int64_t t)
{
    size_t lo = 0, hi = R->nhist;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (R->hist[mid].t <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* GPU work of d ns launched at t (aligned): booked to the phase then, in the step then. */
static void gpu_work(struct prank *R, int64_t t, double d)
{
    if (!R->nhist || t < R->hist[0].t) {
        if (R->hist_cut)
            R->gpu_lost += d; /* before the changes kept */
        return;               /* else before the first step */
    }
    const struct hist *h = &R->hist[at_or_before(R, t)];
    if (h->phase < 0)
        return; /* launched outside the steps */
    if (h->step == (uint32_t)R->stepno && R->in_step)
        R->cur_gpu[h->phase] += d; /* counts when its step closes */
    else
        R->gpu_ph[h->phase] += d;
}

static void close_step(struct cs__phases *Q, struct prank *R)
{
    R->steps++;
    for (int i = 0; i < CS_PHASE_N; i++) {
        R->gpu_ph[i] += R->cur_gpu[i];
        R->cur_gpu[i] = 0;
        R->exp_ph[i] += R->cur_exp[i];
        R->cur_exp[i] = 0;
    }
    R->dur += R->cur_dur;
    for (int i = 0; i < CS_PHASE_N; i++) {
        R->ph[i] += R->cur[i];
        R->comm[i] += R->cur_comm[i];
    }
    for (int i = 0; i < Q->P.n; i++) {
        Q->pat_ns[i] += R->cur_pat[i];
        Q->pat_n[i] += R->cur_cnt[i];
    }
    clear_step(Q, R);
}

static int is_call(enum cs_op_kind k)
{
    return k == CS_KIND_COLL || k == CS_KIND_ICOLL || k == CS_KIND_P2P || k == CS_KIND_IP2P ||
           k == CS_KIND_WAIT;
}

int cs__phases_now(const struct cs__run *run, int rank)
{
    const struct cs__phases *Q = run->phases;
    if (!Q || rank < 0 || rank >= Q->world || !Q->r[rank].in_step)
        return -1;
    const struct prank *R = &Q->r[rank];
    int pat = R->nopen ? R->open[R->nopen - 1].pat : -1;
    return pat >= 0 ? Q->P.v[pat].phase : CS_PHASE_OTHER;
}

int cs__phases_seen(const struct cs__run *run)
{
    return run->phases && run->phases->seen;
}

void cs__phases_event(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k,
                      int64_t tb, int64_t te)
{
    struct cs__phases *Q = run->phases;
    if (!Q || rank < 0 || rank >= Q->world)
        return;
    struct prank *R = &Q->r[rank];
    if (k == CS_KIND_GPU) {
        R->gpu = 1;
        /* The program's kernels and copies carry their launch's host time (bytes_recv). */
        if (ev->op != CS_OP_GPU_NCCL && te > tb) {
            if (ev->bytes_recv) {
                R->gpu_launch = 1;
                gpu_work(R, cs__clock_map(&run->ranks[rank].clk, ev->bytes_recv),
                         (double)(te - tb));
            } else {
                R->gpu_lost += (double)(te - tb);
            }
        }
        return;
    }
    int b = cs__steps_boundary(run, ev, k, &R->occ);
    if (b || ev->op == CS_OP_NVTX_RANGE_BEGIN || ev->op == CS_OP_NVTX_RANGE_END)
        advance(Q, R, tb);
    if (b) {
        if (R->in_step)
            close_step(Q, R);
        R->in_step = b > 0;
        R->stepno++;
        forget(R);
        if (remember(Q, R, tb))
            Q->oom = 1;
        return;
    }
    if (ev->op == CS_OP_NVTX_RANGE_BEGIN || ev->op == CS_OP_NVTX_RANGE_END) {
        char name[CS_NVTX_NAME_MAX + 1];
        cs_event_nvtx_name(ev, name);
        int pat = cs__phase_match(&Q->P, name);
        if (pat < 0)
            return;
        Q->seen = 1;
        if (ev->op == CS_OP_NVTX_RANGE_BEGIN) {
            if (R->nopen < OPEN) {
                R->open[R->nopen].hash = ev->seq;
                R->open[R->nopen++].pat = pat;
            }
            if (R->in_step)
                R->cur_cnt[pat]++;
        } else {
            /* the latest open range of that name ends (start/end ranges may end out of order) */
            for (int i = R->nopen - 1; i >= 0; i--)
                if (R->open[i].hash == ev->seq && R->open[i].pat == pat) {
                    memmove(&R->open[i], &R->open[i + 1],
                            (size_t)(R->nopen - 1 - i) * sizeof R->open[0]);
                    R->nopen--;
                    break;
                }
        }
        if (remember(Q, R, tb))
            Q->oom = 1;
        return;
    }
    if (R->in_step && is_call(k) && te > tb) {
        int pat = R->nopen ? R->open[R->nopen - 1].pat : -1;
        R->cur_comm[pat >= 0 ? Q->P.v[pat].phase : CS_PHASE_OTHER] += (double)(te - tb);
    }
}

void cs__phases_exposed(struct cs__run *run, int rank, int64_t t, int64_t e)
{
    struct cs__phases *Q = run->phases;
    if (!Q || rank < 0 || rank >= Q->world)
        return;
    struct prank *R = &Q->r[rank];
    R->gpu_exp = 1;
    if (!R->nhist || e <= R->hist[0].t)
        return; /* before the first step, or before the changes kept */
    /* from the latest change at or before t, each change up to e */
    for (size_t i = at_or_before(R, t); i < R->nhist && R->hist[i].t < e; i++) {
        const struct hist *h = &R->hist[i];
        int64_t a = h->t > t ? h->t : t;
        int64_t b = i + 1 < R->nhist && R->hist[i + 1].t < e ? R->hist[i + 1].t : e;
        if (h->phase < 0 || b <= a)
            continue;
        if (h->step == (uint32_t)R->stepno && R->in_step)
            R->cur_exp[h->phase] += (double)(b - a);
        else
            R->exp_ph[h->phase] += (double)(b - a);
    }
}

void cs__phases_rank_done(struct cs__run *run, int rank)
{
    struct cs__phases *Q = run->phases;
    if (Q && rank >= 0 && rank < Q->world) {
        clear_step(Q, &Q->r[rank]); /* the tail after the last boundary */
        memset(Q->r[rank].cur_gpu, 0, sizeof Q->r[rank].cur_gpu);
        memset(Q->r[rank].cur_exp, 0, sizeof Q->r[rank].cur_exp);
    }
}

void cs__phases_report(struct cs__run *run, struct cs_report *rep)
{
    struct cs__phases *Q = run->phases;
    if (!Q || !Q->seen)
        return;
    if (Q->oom)
        cs__problem(run, "out of memory for the step phases' history; some GPU work is counted "
                         "as unplaced");
    struct cs_report_phases *P = calloc(1, sizeof *P);
    if (P) {
        P->ranks = calloc((size_t)Q->world + 1, sizeof *P->ranks);
        P->names = calloc((size_t)Q->P.n + 1, sizeof *P->names);
    }
    if (!P || !P->ranks || !P->names) {
        if (P) {
            free(P->ranks);
            free(P->names);
        }
        free(P);
        cs__problem(run, "out of memory for the step phases' report; they are left out");
        return;
    }
    snprintf(P->patterns, sizeof P->patterns, "%s", Q->P.env);
    for (int r = 0; r < Q->world; r++) {
        const struct prank *R = &Q->r[r];
        if (!run->ranks[r].present || !R->steps)
            continue;
        struct cs_report_phase_rank *x = &P->ranks[P->nranks++];
        x->rank = r;
        x->steps = R->steps;
        x->step_s = R->dur / 1e9;
        for (int i = 0; i < CS_PHASE_N; i++) {
            x->time_s[i] = R->ph[i] / 1e9;
            x->comm_s[i] = R->gpu ? NAN : R->comm[i] / 1e9;
            x->gpu_s[i] = R->gpu_launch ? R->gpu_ph[i] / 1e9 : NAN;
            x->gpu_exposed_comm_s[i] = R->gpu_exp ? R->exp_ph[i] / 1e9 : NAN;
        }
        x->gpu_unplaced_s = R->gpu_launch ? R->gpu_lost / 1e9 : NAN;
    }
    for (int i = 0; i < Q->P.n; i++) {
        if (!Q->pat_n[i] && !(Q->pat_ns[i] > 0))
            continue;
        struct cs_report_phase_name *x = &P->names[P->nnames++];
        snprintf(x->name, sizeof x->name, "%s", Q->P.v[i].label);
        x->phase = Q->P.v[i].phase;
        x->count = Q->pat_n[i];
        x->time_s = Q->pat_ns[i] / 1e9;
    }
    rep->phases = P;
}

void cs__phases_free(struct cs__run *run)
{
    struct cs__phases *Q = run->phases;
    if (!Q)
        return;
    for (int i = 0; Q->r && i < Q->world; i++) {
        free(Q->r[i].cur_pat);
        free(Q->r[i].cur_cnt);
        free(Q->r[i].hist);
    }
    free(Q->r);
    free(Q->pat_ns);
    free(Q->pat_n);
    free(Q);
    run->phases = NULL;
}

void cs__phases_report_free(struct cs_report *rep)
{
    if (!rep->phases)
        return;
    free(rep->phases->ranks);
    free(rep->phases->names);
    free(rep->phases);
    rep->phases = NULL;
}
