/*
 * `--perfetto FILE`: the run as a Chrome trace-event JSON file for ui.perfetto.dev (or
 * chrome://tracing).  A sink on the merged event stream: each event is written as it goes by, so
 * memory stays bounded by the open collective instances and pending requests, like the analysis.
 *
 *   process per rank ("rank R (host)"), one track per recording thread ("thread T") for
 *   point-to-point, completion and other calls, one track per communicator for its collectives
 *   ("collectives on world (dp)"), and with steps a "steps" track of one slice per step;
 *   every call a complete slice ("X") with op, communicator, sequence, bytes, peer in args;
 *   non-blocking operations as async slices ("b"/"e", process-scoped id) from the initiation to
 *   the completion record, on a track per op and communicator;
 *   flow arrows ("s"/"t"/"f") joining the instances of one collective across ranks in arrival
 *   order (the arrow ends at the last rank to arrive);
 *   a "bandwidth GB/s" counter per rank (bytes / duration of each blocking transfer call);
 *   MPI_Pcontrol markers as instant events;
 *   with step phases (phases.h) a "phases" track of one slice per stretch of a step spent in one
 *   phase (data, forward, backward, optimizer, other), cut at step boundaries, written from the
 *   first range that names a phase on (a run without one has no such track);
 *   resource samples as counters of the rank's process: "CPU cores" and "RSS MiB", and on the
 *   rank that sampled its node "NIC <name> Gb/s" (received + sent) and "GPU <i> util %",
 *   "GPU <i> memory MiB", "GPU <i> power W" (samples.h);
 *   GPU records as slices on a track per (rank, device, stream), NCCL kernels per (rank, device,
 *   communicator), with a "launch" arrow from the host NCCL call of the launch (gpu_event).
 * Slices that overlap without nesting on one track go to extra lanes of it ("<track> · lane 2",
 * perfetto_lanes.h), so every track nests.
 * Timestamps are rank 0's aligned clock (µs with ns precision, as the format wants).
 * --perfetto-steps A:B keeps the calls a rank makes inside its steps A..B (the step analysis'
 * boundaries, per rank: steps.c), so the export follows each rank's own steps.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "json.h"
#include "perfetto_lanes.h"
#include "phases.h"
#include "samples.h"

/* A host NCCL call's slice, kept so the GPU records of its launch can point back to it. */
struct launch_slice {
    uint64_t launch;
    int64_t tb;
    int tid;
};
#define CS_PF_LAUNCHES 64 /* per rank: the most recent launches kept (a ring) */

/* A GPU record waiting in its rank's reorder heap, with the host slice its launch arrow starts
 * on (found when the record arrived; arrow_tid -1: none). */
struct gpu_pend {
    struct cs_event ev;
    int64_t tb, te, arrow_ts;
    uint64_t order;
    int arrow_tid;
};

/* Per rank: GPU records held back so that each track receives them in start order (CUPTI
 * delivers them in completion order); up to CS_PF_GPU_REORDER at a time. */
struct gpu_heap {
    struct gpu_pend *v;
    size_t n;
};

struct pending_async {
    uint16_t op;
    uint64_t comm;
};

struct cs__perfetto {
    FILE *f;
    int first;
    int64_t w0, w1;              /* aligned window, inclusive */
    unsigned char *sel;          /* [world] rank selected */
    struct cs__pf_tracks tracks; /* (rank, track number): name and lanes (perfetto_lanes.h) */
    struct cs__map flows;        /* (comm, seq) -> flow id << 24 | members seen */
    struct cs__map async;        /* (rank, request) -> struct pending_async * */
    uint64_t next_flow;
    uint64_t written;
    struct cs__map comm_tid;        /* (comm, 0) -> track number of its collectives - 1000 + 1 */
    int steps_track;                /* step slices are written */
    int *step_cur;                  /* [world] the step rank's last event was in, -1 none */
    int *ph_cur;                    /* [world] the phase of the open phase slice, -1 none */
    int *ph_step;                   /* [world] the step it is in */
    int64_t *ph_begin;              /* [world] its begin */
    int64_t *step_begin;            /* [world] aligned begin of it */
    struct cs__map gpu_tid;         /* (device | NCCL bit, stream or comm) -> GPU track number */
    struct launch_slice **launches; /* [world] ring of CS_PF_LAUNCHES, NULL until used */
    struct gpu_heap *gpu_heap;      /* [world] GPU records held back (gpu_event) */
    uint64_t gpu_order;             /* arrival number of the next GPU record */
    unsigned *launch_next;          /* [world] next ring slot */
};

#define CS_PF_STEP_TID 999    /* the "steps" track */
#define CS_PF_PHASE_TID 998   /* the "phases" track */
#define CS_PF_COMM_TID 1000   /* first communicator track */
#define CS_PF_GPU_TID 1000000 /* first GPU track (one per device and stream / communicator) */
#define CS_PF_NCCL_BIT (1ull << 40)
#define CS_PF_GPU_REORDER 256 /* GPU records a rank may deliver out of start order, per rank */

/* Microseconds with three decimals, exact from integer ns. */
static const char *us(char *buf, size_t n, int64_t ns)
{
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    snprintf(buf, n, "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", a / 1000, (unsigned)(a % 1000));
    return buf;
}

/* Start one event object: the separator and the fields every event has. */
static void ev_open(struct cs__perfetto *p, char ph, int pid, int tid, int64_t ts)
{
    char t[40];
    fputs(p->first ? "\n" : ",\n", p->f);
    p->first = 0;
    fprintf(p->f, "{\"ph\":\"%c\",\"pid\":%d,\"tid\":%d,\"ts\":%s", ph, pid, tid,
            us(t, sizeof t, ts));
    p->written++;
}

/* Track (rank, tid), named name (with sort index sort unless INT32_MIN) when new; its index in
 * p->tracks, -1 without memory.  name is called only for a new track. */
static long track_use(struct cs__perfetto *p, int rank, int tid, int sort,
                      void (*name)(char *, size_t, const void *), const void *arg)
{
    int fresh;
    long i = cs__pf_track(&p->tracks, rank, tid, &fresh);
    if (i < 0 || !fresh)
        return i;
    struct cs__pf_track *t = &p->tracks.v[i];
    name(t->name, sizeof t->name, arg);
    t->sort = sort;
    ev_open(p, 'M', rank, tid, 0);
    fputs(",\"name\":\"thread_name\",\"args\":{\"name\":", p->f);
    cs__json_str(p->f, t->name);
    fputs("}}", p->f);
    if (sort != INT32_MIN) {
        ev_open(p, 'M', rank, tid, 0);
        fprintf(p->f, ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}}", sort);
    }
    return i;
}

/* The track number a slice [tb, te] of track i (number tid) is written on: the track itself or
 * one of its lanes (named when new).  -1: the slice is not written (too many lanes). */
static int slice_tid(struct cs__perfetto *p, long i, int tid, int64_t tb, int64_t te)
{
    if (i < 0)
        return tid;
    int lane, lt = cs__pf_lane(&p->tracks, i, tb, te, &lane);
    if (lt < 0 || !lane)
        return lt;
    const struct cs__pf_track *t = &p->tracks.v[i];
    /* "<track> · lane N": the escaped track name, its closing quote replaced. */
    char name[6 * sizeof t->name + 8] = "\"\"";
    FILE *m = fmemopen(name, sizeof name, "w");
    if (m) {
        cs__json_str(m, t->name);
        fclose(m);
    }
    name[sizeof name - 1] = 0;
    size_t n = strlen(name);
    name[n > 1 ? n - 1 : 0] = 0;
    ev_open(p, 'M', t->rank, lt, 0);
    fprintf(p->f, ",\"name\":\"thread_name\",\"args\":{\"name\":%s \\u00b7 lane %d\"}}", name,
            lane);
    if (t->sort != INT32_MIN) {
        ev_open(p, 'M', t->rank, lt, 0);
        fprintf(p->f, ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}}", t->sort);
    }
    return lt;
}

static void name_text(char *buf, size_t n, const void *arg)
{
    snprintf(buf, n, "%s", (const char *)arg);
}

static void name_thread(char *buf, size_t n, const void *arg)
{
    snprintf(buf, n, "thread %d", *(const int *)arg - 1);
}

/* Parse "0-3,8,10-11" into sel[world].  Returns 0, or -1 with a sentence in err. */
int cs__perfetto_parse_ranks(const char *spec, unsigned char *sel, int world, char *err,
                             size_t errlen)
{
    const char *s = spec;
    if (!*s) {
        snprintf(err, errlen, "--perfetto-ranks: empty rank list");
        return -1;
    }
    while (*s) {
        char *e;
        errno = 0;
        long a = strtol(s, &e, 10), b;
        if (e == s || a < 0 || errno) {
            snprintf(err, errlen, "--perfetto-ranks '%s': expected a rank at '%s'", spec, s);
            return -1;
        }
        b = a;
        if (*e == '-') {
            s = e + 1;
            b = strtol(s, &e, 10);
            if (e == s || b < a || errno) {
                snprintf(err, errlen, "--perfetto-ranks '%s': bad range end at '%s'", spec, s);
                return -1;
            }
        }
        if (*e && *e != ',') {
            snprintf(err, errlen, "--perfetto-ranks '%s': unexpected '%c'", spec, *e);
            return -1;
        }
        for (long r = a; r <= b && r < world; r++)
            sel[r] = 1;
        s = *e ? e + 1 : e;
    }
    return 0;
}

int cs__perfetto_begin(struct cs__run *run)
{
    const struct cs_perfetto_opts *o = run->perfetto_opts;
    struct cs__perfetto *p = calloc(1, sizeof *p);
    size_t w = run->world > 0 ? (size_t)run->world : 0;
    if (!p || !(p->sel = calloc(w + 1, 1)) || !(p->step_cur = calloc(w + 1, sizeof *p->step_cur)) ||
        !(p->step_begin = calloc(w + 1, sizeof *p->step_begin)) ||
        !(p->ph_cur = calloc(w + 1, sizeof *p->ph_cur)) ||
        !(p->ph_begin = calloc(w + 1, sizeof *p->ph_begin)) ||
        !(p->ph_step = calloc(w + 1, sizeof *p->ph_step)) ||
        !(p->launches = calloc(w + 1, sizeof *p->launches)) ||
        !(p->launch_next = calloc(w + 1, sizeof *p->launch_next)) ||
        !(p->gpu_heap = calloc(w + 1, sizeof *p->gpu_heap))) {
        if (p) {
            free(p->sel);
            free(p->step_cur);
            free(p->step_begin);
            free(p->ph_cur);
            free(p->ph_begin);
            free(p->ph_step);
            free(p->launches);
            free(p->launch_next);
        }
        free(p);
        cs__problem(run, "out of memory for the Perfetto export; %s not written",
                    run->perfetto_opts->path);
        return CS_ENOMEM;
    }
    p->f = o->out;
    p->first = 1;
    if (o->ranks) {
        char err[256];
        /* Checked by the command line already; a bad spec selects what parsed before it. */
        cs__perfetto_parse_ranks(o->ranks, p->sel, run->world, err, sizeof err);
    } else {
        memset(p->sel, 1, w);
    }
    int64_t t0 = INT64_MAX;
    uint64_t events = 0;
    for (int r = 0; r < run->world; r++) {
        const struct cs__rank *rk = &run->ranks[r];
        if (!rk->present)
            continue;
        if (rk->t_first < t0)
            t0 = rk->t_first;
        if (p->sel[r])
            events += cs_reader_stats(rk->rd)->events;
    }
    if (t0 == INT64_MAX)
        t0 = 0;
    p->w0 = INT64_MIN;
    p->w1 = INT64_MAX;
    if (o->window) {
        p->w0 = t0 + (int64_t)(o->from_s * 1e9);
        p->w1 = o->to_s >= 0 ? t0 + (int64_t)(o->to_s * 1e9) : INT64_MAX;
    }
    /* About 260 bytes per call (slice with args, counter samples, flow points) measured on the
     * example runs; a window cuts the estimate in proportion when the run's length is known. */
    double est = (double)events * 260.0;
    if (o->window && o->span_hint_s > 0 && o->to_s >= 0) {
        double frac = (o->to_s - o->from_s) / o->span_hint_s;
        if (frac < 1)
            est *= frac > 0 ? frac : 0;
    }
    for (size_t r = 0; r < w; r++)
        p->step_cur[r] = p->ph_cur[r] = -1;
    int nsteps = cs__vsteps_expected(run);
    p->steps_track = nsteps > 0;
    if (o->steps) {
        /* A step range keeps its share of the steps the reference rank has. */
        int to = o->step_to >= 0 && o->step_to < nsteps ? o->step_to : nsteps - 1;
        if (nsteps <= 0)
            cs__problem(run,
                        "--perfetto-steps %d:%s: this run has no steps (see the steps section), so "
                        "%s holds no calls",
                        o->step_from, o->step_to >= 0 ? "B" : "", o->path);
        else if (o->step_from >= nsteps)
            cs__problem(run,
                        "--perfetto-steps: the run has steps 0 to %d only, so %s holds no calls",
                        nsteps - 1, o->path);
        est *= nsteps > 0 && to >= o->step_from ? (double)(to - o->step_from + 1) / nsteps : 0;
    }
    p->next_flow = 1;
    run->perfetto = p;
    /* COMMSCOPE_TEST_PERFETTO_WARN_MB (tests only) lowers the threshold so the warning can be
     * checked without writing 256 MB. */
    double limit_mb = 256;
    const char *t = getenv("COMMSCOPE_TEST_PERFETTO_WARN_MB");
    if (t && atof(t) > 0)
        limit_mb = atof(t);
    if (est > limit_mb * 1024 * 1024)
        fprintf(stderr,
                "commscope analyze: warning: the Perfetto trace %s will be about %.1f MB (%" PRIu64
                " events); --perfetto-window, --perfetto-steps and --perfetto-ranks make it "
                "smaller\n",
                o->path, est / (1024.0 * 1024.0), events);

    fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"commscope\",\"run_dir\":",
          p->f);
    cs__json_str(p->f, run->dir);
    fputs(",\"clock\":\"rank 0 CLOCK_MONOTONIC, aligned\"},\n\"traceEvents\":[", p->f);
    for (int r = 0; r < run->world; r++) {
        const struct cs__rank *rk = &run->ranks[r];
        if (!rk->present || !p->sel[r])
            continue;
        char name[CS_HOST_MAX + 32];
        snprintf(name, sizeof name, "rank %d (%s)", r, rk->h->host);
        ev_open(p, 'M', r, 0, 0);
        fputs(",\"name\":\"process_name\",\"args\":{\"name\":", p->f);
        cs__json_str(p->f, name);
        fputs("}}", p->f);
        ev_open(p, 'M', r, 0, 0);
        fprintf(p->f, ",\"name\":\"process_sort_index\",\"args\":{\"sort_index\":%d}}", r);
    }
    return 0;
}

static const char *kind_cat(enum cs_op_kind k)
{
    switch (k) {
    case CS_KIND_COLL:
    case CS_KIND_ICOLL:
        return "collective";
    case CS_KIND_P2P:
    case CS_KIND_IP2P:
        return "p2p";
    case CS_KIND_WAIT:
        return "completion";
    case CS_KIND_LIFE:
        return "lifecycle";
    case CS_KIND_COMM:
        return "communicator";
    default:
        return "other";
    }
}

static void async_name(FILE *f, uint16_t op, uint64_t comm)
{
    char c[40], name[96];
    snprintf(name, sizeof name, "%s %s", cs_op_name(op), cs__comm_label(comm, c, sizeof c));
    cs__json_str(f, name);
}

/* Members of comm that are exported (selected ranks present in the run). */
static int32_t selected_members(struct cs__run *run, uint64_t comm)
{
    const struct cs__comm *c = cs__comm_get(run, comm);
    if (!c)
        return 0;
    int32_t n = 0;
    for (int32_t i = 0; i < c->size; i++) {
        int m = c->members[i];
        n += m >= 0 && m < run->world && run->ranks[m].present && run->perfetto->sel[m];
    }
    return n;
}

static void flow_point(struct cs__run *run, int rank, int tid, const struct cs_event *ev,
                       int64_t tb, int64_t te)
{
    struct cs__perfetto *p = run->perfetto;
    int fresh;
    uint64_t *v = cs__map_put(&p->flows, ev->comm, ev->seq, &fresh);
    if (!v)
        return;
    int32_t n = selected_members(run, ev->comm);
    if (fresh) {
        if (n < 2) {
            cs__map_del(&p->flows, ev->comm, ev->seq);
            return;
        }
        *v = p->next_flow++ << 24;
    }
    uint64_t id = *v >> 24, seen = (*v & 0xffffff) + 1;
    char ph = seen == 1 ? 's' : (int64_t)seen >= n ? 'f' : 't';
    /* 1 ns into the call's slice, so the arrow binds to it (and not to a slice ending there),
     * and the points of one flow keep the arrival order the merge delivers them in. */
    ev_open(p, ph, rank, tid, te > tb ? tb + 1 : tb);
    fprintf(p->f, ",\"name\":\"instance\",\"cat\":\"collective\",\"id\":%" PRIu64 "%s}", id,
            ph == 'f' ? ",\"bp\":\"e\"" : "");
    if (ph == 'f')
        cs__map_del(&p->flows, ev->comm, ev->seq);
    else
        *v = id << 24 | seen;
}

struct comm_name_arg {
    struct cs__run *run;
    uint64_t comm;
};

static void name_comm(char *buf, size_t n, const void *arg)
{
    const struct comm_name_arg *a = arg;
    char c[40];
    const char *role = cs__vsteps_role(a->run, a->comm);
    snprintf(buf, n, "collectives on %s%s%s%s", cs__comm_label(a->comm, c, sizeof c),
             role ? " (" : "", role ? role : "", role ? ")" : "");
}

/* The track of communicator comm's collectives on rank (named on first use); its index in
 * p->tracks in *track. */
static int comm_track(struct cs__run *run, int rank, uint64_t comm, long *track)
{
    struct cs__perfetto *p = run->perfetto;
    int fresh;
    uint64_t *v = cs__map_put(&p->comm_tid, comm, 0, &fresh);
    *track = -1;
    if (!v)
        return 1;
    if (fresh)
        *v = p->comm_tid.n; /* numbered in order of first use: the same number on every rank */
    int tid = CS_PF_COMM_TID + (int)*v - 1;
    struct comm_name_arg a = {run, comm};
    *track = track_use(p, rank, tid, tid, name_comm, &a);
    return tid;
}

/* One "step N" slice from the step's begin to t (step ranges and the window apply). */
static void step_emit(struct cs__run *run, int rank, int step, int64_t from, int64_t to)
{
    struct cs__perfetto *p = run->perfetto;
    const struct cs_perfetto_opts *o = run->perfetto_opts;
    char t[40];
    if ((o->steps && (step < o->step_from || (o->step_to >= 0 && step > o->step_to))) ||
        to < p->w0 || from > p->w1)
        return;
    long ti = track_use(p, rank, CS_PF_STEP_TID, -1, name_text, "steps");
    int tid = slice_tid(p, ti, CS_PF_STEP_TID, from, to > from ? to : from);
    if (tid < 0)
        return;
    ev_open(p, 'X', rank, tid, from);
    fprintf(p->f, ",\"dur\":%s,\"name\":\"step %d\",\"cat\":\"step\",\"args\":{\"step\":%d}}",
            us(t, sizeof t, to > from ? to - from : 0), step, step);
}

/* Follow rank's step (the step hook has seen the event at tb): close the last one on a change. */
static void step_slice(struct cs__run *run, int rank, int64_t tb)
{
    struct cs__perfetto *p = run->perfetto;
    int s = cs__vsteps_current(run, rank);
    if (s == p->step_cur[rank])
        return;
    if (p->step_cur[rank] >= 0)
        step_emit(run, rank, p->step_cur[rank], p->step_begin[rank], tb);
    p->step_cur[rank] = s;
    p->step_begin[rank] = tb;
}

/* One phase slice [from, to) on the "phases" track (the window and the step range apply). */
static void phase_emit(struct cs__run *run, int rank, int ph, int64_t from, int64_t to)
{
    struct cs__perfetto *p = run->perfetto;
    const struct cs_perfetto_opts *o = run->perfetto_opts;
    int step = p->ph_step[rank];
    char t[40];
    if (!cs__phases_seen(run) || to <= from || to < p->w0 || from > p->w1 ||
        (o->steps && (step < o->step_from || (o->step_to >= 0 && step > o->step_to))))
        return;
    long ti = track_use(p, rank, CS_PF_PHASE_TID, -2, name_text, "phases");
    int tid = slice_tid(p, ti, CS_PF_PHASE_TID, from, to);
    if (tid < 0)
        return;
    ev_open(p, 'X', rank, tid, from);
    fprintf(p->f, ",\"dur\":%s,\"name\":\"%s\",\"cat\":\"phase\",\"args\":{\"step\":%d}}",
            us(t, sizeof t, to - from), cs_phase_names[ph], step);
}

/* Follow rank's phase (the phases row has seen the event at tb): close the slice on a change. */
static void phase_slice(struct cs__run *run, int rank, int64_t tb)
{
    struct cs__perfetto *p = run->perfetto;
    int ph = cs__phases_now(run, rank);
    if (ph == p->ph_cur[rank] && (ph < 0 || p->step_cur[rank] == p->ph_step[rank]))
        return;
    if (p->ph_cur[rank] >= 0)
        phase_emit(run, rank, p->ph_cur[rank], p->ph_begin[rank], tb);
    p->ph_cur[rank] = ph;
    p->ph_begin[rank] = tb;
    p->ph_step[rank] = p->step_cur[rank];
}

/* Remember the slice of a host NCCL call (the first of its launch: a group's first call). */
static void launch_keep(struct cs__perfetto *p, int rank, uint64_t launch, int tid, int64_t tb,
                        int64_t te)
{
    if (!p->launches[rank] &&
        !(p->launches[rank] = calloc(CS_PF_LAUNCHES, sizeof *p->launches[rank])))
        return; /* no arrows for this rank then */
    struct launch_slice *ring = p->launches[rank];
    for (unsigned i = 0; i < CS_PF_LAUNCHES; i++)
        if (ring[i].launch == launch)
            return;
    ring[p->launch_next[rank]++ % CS_PF_LAUNCHES] =
        (struct launch_slice){.launch = launch, .tb = te > tb ? tb + 1 : tb, .tid = tid};
}

/* The track of GPU work on rank: per device and CUDA stream, NCCL kernels per device and
 * communicator (their records carry the communicator, not the stream); named on first use. */
static void name_gpu(char *buf, size_t n, const void *arg)
{
    const struct cs_event *ev = arg;
    char c[40];
    if (ev->op == CS_OP_GPU_NCCL)
        snprintf(buf, n, "GPU %" PRId32 " NCCL kernels on %s", ev->aux,
                 ev->comm ? cs__comm_label(ev->comm, c, sizeof c) : "an unknown communicator");
    else
        snprintf(buf, n, "GPU %" PRId32 " stream %" PRIu32, ev->aux, ev->seq);
}

static int gpu_track(struct cs__run *run, int rank, const struct cs_event *ev, long *track)
{
    struct cs__perfetto *p = run->perfetto;
    int nccl = ev->op == CS_OP_GPU_NCCL, fresh;
    uint64_t a = (uint64_t)(uint32_t)ev->aux | (nccl ? CS_PF_NCCL_BIT : 0);
    uint64_t *v = cs__map_put(&p->gpu_tid, a, nccl ? ev->comm : ev->seq, &fresh);
    *track = -1;
    if (!v)
        return CS_PF_GPU_TID;
    if (fresh)
        *v = p->gpu_tid.n;
    int tid = CS_PF_GPU_TID + (int)*v - 1;
    *track = track_use(p, rank, tid, tid, name_gpu, ev);
    return tid;
}

static int pend_before(const struct gpu_pend *a, const struct gpu_pend *b)
{
    if (a->tb != b->tb)
        return a->tb < b->tb;
    if (a->te != b->te)
        return a->te > b->te; /* the longer first, so the shorter can nest in it */
    return a->order < b->order;
}

static void heap_push(struct gpu_heap *h, const struct gpu_pend *x)
{
    size_t i = h->n++;
    while (i > 0 && pend_before(x, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = *x;
}

static struct gpu_pend heap_pop(struct gpu_heap *h)
{
    struct gpu_pend top = h->v[0], x = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && pend_before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!pend_before(&h->v[c], &x))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n)
        h->v[i] = x;
    return top;
}

/* Write one GPU record: a slice on its GPU track (or a lane of it), and the launch arrow. */
static void gpu_emit(struct cs__run *run, int rank, const struct gpu_pend *g)
{
    struct cs__perfetto *p = run->perfetto;
    const struct cs_event *ev = &g->ev;
    int64_t tb = g->tb, te = g->te;
    FILE *f = p->f;
    char t[40], c[40];
    long ti;
    int tid = gpu_track(run, rank, ev, &ti);
    if ((tid = slice_tid(p, ti, tid, tb, te)) < 0)
        return;
    static const char *const kinds[] = {"kernel", "memcpy", "memset", "NCCL kernel"};
    const char *kind = ev->op >= CS_OP_GPU_KERNEL && ev->op <= CS_OP_GPU_NCCL
                           ? kinds[ev->op - CS_OP_GPU_KERNEL]
                           : "GPU";
    ev_open(p, 'X', rank, tid, tb);
    fprintf(f,
            ",\"dur\":%s,\"name\":\"%s\",\"cat\":\"gpu\",\"args\":{\"kind\":\"%s\","
            "\"device\":%" PRId32,
            us(t, sizeof t, te > tb ? te - tb : 0), cs_op_name(ev->op), kind, ev->aux);
    if (ev->op == CS_OP_GPU_NCCL) {
        if (ev->comm)
            fprintf(f, ",\"comm\":\"%s\",\"seq\":%" PRIu32, cs__comm_label(ev->comm, c, sizeof c),
                    ev->seq);
        fprintf(f, ",\"calls\":%" PRIu64 ",\"launch\":%" PRIu64, ev->bytes_recv, ev->request);
    } else {
        fprintf(f, ",\"stream\":%" PRIu32, ev->seq);
    }
    if (ev->op == CS_OP_GPU_MEMCPY || ev->op == CS_OP_GPU_MEMSET)
        fprintf(f, ",\"bytes\":%" PRIu64, ev->bytes);
    fputs(ev->flags & CS_EV_GPU_EVENTS ? ",\"timing\":\"CUDA events\"}}" : "}}", f);
    if (g->arrow_tid < 0)
        return;
    uint64_t id = p->next_flow++; /* shared with the collective arrows: ids stay unique */
    ev_open(p, 's', rank, g->arrow_tid, g->arrow_ts);
    fprintf(f, ",\"name\":\"launch\",\"cat\":\"gpu\",\"id\":%" PRIu64 "}", id);
    ev_open(p, 'f', rank, tid, te > tb ? tb + 1 : tb);
    fprintf(f, ",\"name\":\"launch\",\"cat\":\"gpu\",\"id\":%" PRIu64 ",\"bp\":\"e\"}", id);
}

/* One GPU record: kept in its rank's reorder heap (written at once without memory for it); an
 * NCCL kernel also gets an arrow from the host call of its launch when that call's slice was
 * written (and does not start after the kernel). */
/* A call or kernel from tb to te on rank's clock is outside --perfetto-steps or
 * --perfetto-window. */
static int left_out(struct cs__run *run, int rank, int64_t tb, int64_t te)
{
    const struct cs__perfetto *p = run->perfetto;
    const struct cs_perfetto_opts *o = run->perfetto_opts;
    if (o->steps) {
        int s = cs__vsteps_current(run, rank);
        if (s < o->step_from || (o->step_to >= 0 && s > o->step_to))
            return 1;
    }
    return te < p->w0 || tb > p->w1;
}

static void gpu_event(struct cs__run *run, int rank, const struct cs_event *ev, int64_t tb,
                      int64_t te)
{
    struct cs__perfetto *p = run->perfetto;
    if (left_out(run, rank, tb, te))
        return;
    struct gpu_pend g = {.ev = *ev, .tb = tb, .te = te, .order = p->gpu_order++, .arrow_tid = -1};
    if (ev->op == CS_OP_GPU_NCCL && ev->request && p->launches[rank]) {
        const struct launch_slice *ring = p->launches[rank];
        int64_t at = te > tb ? tb + 1 : tb;
        for (unsigned i = 0; i < CS_PF_LAUNCHES; i++) {
            if (ring[i].launch != ev->request || ring[i].tb > at)
                continue;
            g.arrow_tid = ring[i].tid;
            g.arrow_ts = ring[i].tb;
            break;
        }
    }
    struct gpu_heap *h = &p->gpu_heap[rank];
    if (!h->v && !(h->v = malloc((CS_PF_GPU_REORDER + 1) * sizeof *h->v))) {
        gpu_emit(run, rank, &g);
        return;
    }
    heap_push(h, &g);
    if (h->n > CS_PF_GPU_REORDER) {
        struct gpu_pend first = heap_pop(h);
        gpu_emit(run, rank, &first);
    }
}

/* The slice of a host call on track number tid, with its collective flow point and its launch
 * kept for the GPU arrows. */
static void slice(struct cs__run *run, int rank, int tid, const struct cs_event *ev,
                  enum cs_op_kind k, int64_t tb, int64_t te)
{
    struct cs__perfetto *p = run->perfetto;
    FILE *f = p->f;
    char t[40], c[40];
    ev_open(p, 'X', rank, tid, tb);
    fprintf(f, ",\"dur\":%s,\"name\":\"%s\",\"cat\":\"%s\",\"args\":{", us(t, sizeof t, te - tb),
            cs_op_name(ev->op), kind_cat(k));
    if (ev->comm)
        fprintf(f, "\"comm\":\"%s\",", cs__comm_label(ev->comm, c, sizeof c));
    if (k == CS_KIND_COLL || k == CS_KIND_ICOLL)
        fprintf(f, "\"seq\":%" PRIu32 ",", ev->seq);
    if (ev->peer >= 0)
        fprintf(f, "\"%s\":%" PRId32 ",", k == CS_KIND_P2P || k == CS_KIND_IP2P ? "peer" : "root",
                ev->peer);
    if (ev->flags & CS_EV_NONBLOCKING)
        fprintf(f, "\"request\":%" PRIu64 ",", ev->request);
    fprintf(f, "\"bytes\":%" PRIu64 ",\"bytes_recv\":%" PRIu64 "}}", ev->bytes, ev->bytes_recv);

    if ((k == CS_KIND_COLL || k == CS_KIND_ICOLL) && ev->comm)
        flow_point(run, rank, tid, ev, tb, te);
    if ((k == CS_KIND_NCOLL || k == CS_KIND_NP2P) && ev->request)
        launch_keep(p, rank, ev->request, tid, tb, te);
}

void cs__perfetto_event(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k,
                        int64_t tb, int64_t te)
{
    struct cs__perfetto *p = run->perfetto;
    if (!p->sel[rank])
        return;
    int tid = (int)cs_reader_thread(run->ranks[rank].rd) + 1;
    FILE *f = p->f;
    if (k == CS_KIND_DONE) {
        /* Close the async slice of the request, if its start was written. */
        uint64_t *v = cs__map_get(&p->async, (uint64_t)rank, ev->request);
        if (!v)
            return;
        struct pending_async *a = (void *)(uintptr_t)*v;
        ev_open(p, 'e', rank, tid, te);
        fprintf(
            f, ",\"cat\":\"request\",\"id2\":{\"local\":\"0x%" PRIx64 "\"},\"name\":", ev->request);
        async_name(f, a->op, a->comm);
        fprintf(f, ",\"args\":{\"cancelled\":%s}}", ev->flags & CS_EV_CANCELLED ? "true" : "false");
        cs__map_del(&p->async, (uint64_t)rank, ev->request);
        free(a);
        return;
    }
    if (k == CS_KIND_GPU) {
        gpu_event(run, rank, ev, tb, te);
        return;
    }
    if (p->steps_track)
        step_slice(run, rank, tb);
    phase_slice(run, rank, tb);
    if (left_out(run, rank, tb, te))
        return;
    int fresh;
    long ti;
    if ((k == CS_KIND_COLL || k == CS_KIND_ICOLL || k == CS_KIND_NCOLL) && ev->comm)
        tid = comm_track(run, rank, ev->comm, &ti);
    else
        ti = track_use(p, rank, tid, INT32_MIN, name_thread, &tid);
    if (ev->op == CS_OP_NVTX_RANGE_BEGIN || ev->op == CS_OP_NVTX_RANGE_END ||
        ev->op == CS_OP_NVTX_MARK) {
        /* NVTX: push/pop ranges nest per thread, so they are slices; start/end ranges (which
         * may overlap or end on another thread) and marks are instants with the name. */
        char name[CS_NVTX_NAME_MAX + 1];
        cs_event_nvtx_name(ev, name);
        int slice = ev->aux > 0 && ev->op != CS_OP_NVTX_MARK;
        ev_open(p, slice ? (ev->op == CS_OP_NVTX_RANGE_BEGIN ? 'B' : 'E') : 'i', rank, tid, tb);
        if (!slice)
            fputs(",\"s\":\"t\"", f);
        fputs(",\"cat\":\"nvtx\",\"name\":", f);
        if (slice || ev->op == CS_OP_NVTX_MARK)
            cs__json_str(f, name);
        else {
            char label[CS_NVTX_NAME_MAX + 16];
            snprintf(label, sizeof label, "%s %s",
                     ev->op == CS_OP_NVTX_RANGE_BEGIN ? "start" : "end", name);
            cs__json_str(f, label);
        }
        fputs("}", f);
        return;
    }
    if (k == CS_KIND_MARK) {
        ev_open(p, 'i', rank, tid, tb);
        fprintf(f,
                ",\"s\":\"t\",\"name\":\"%s\",\"cat\":\"marker\",\"args\":{\"level\":%" PRId32 "}}",
                cs_op_name(ev->op), ev->aux);
        return;
    }
    /* The slice's lane: its flow points and launch arrows bind to it there. */
    int st = slice_tid(p, ti, tid, tb, te);
    if (st >= 0)
        slice(run, rank, st, ev, k, tb, te);
    if (k == CS_KIND_ICOLL || k == CS_KIND_IP2P) {
        struct pending_async *a = malloc(sizeof *a);
        uint64_t *v = a ? cs__map_put(&p->async, (uint64_t)rank, ev->request, &fresh) : NULL;
        if (!v) {
            free(a);
        } else {
            if (!fresh) { /* a request id reused before its completion was seen: close it */
                struct pending_async *old = (void *)(uintptr_t)*v;
                ev_open(p, 'e', rank, tid, tb);
                fprintf(f, ",\"cat\":\"request\",\"id2\":{\"local\":\"0x%" PRIx64 "\"},\"name\":",
                        ev->request);
                async_name(f, old->op, old->comm);
                fputs(",\"args\":{\"completion\":\"not recorded\"}}", f);
                free(old);
            }
            *a = (struct pending_async){.op = ev->op, .comm = ev->comm};
            *v = (uint64_t)(uintptr_t)a;
            ev_open(p, 'b', rank, tid, tb);
            fprintf(f, ",\"cat\":\"request\",\"id2\":{\"local\":\"0x%" PRIx64 "\"},\"name\":",
                    ev->request);
            async_name(f, ev->op, ev->comm);
            fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 "}}", ev->bytes);
        }
    }
    uint64_t b = ev->bytes > ev->bytes_recv ? ev->bytes : ev->bytes_recv;
    if ((k == CS_KIND_COLL || k == CS_KIND_P2P) && b && te > tb) {
        ev_open(p, 'C', rank, 0, tb);
        fprintf(f, ",\"name\":\"bandwidth GB/s\",\"args\":{\"GB/s\":%.6g}}",
                (double)b / (double)(te - tb));
        ev_open(p, 'C', rank, 0, te);
        fputs(",\"name\":\"bandwidth GB/s\",\"args\":{\"GB/s\":0}}", f);
    }
}

/* Resource samples as counters (the window applies); the previous sample of each counted
 * entity gives an interval's rate, written at the interval's start. */
struct pf_samples {
    struct cs__perfetto *p;
    int64_t t_proc;
    uint64_t cpu;
    struct {
        char name[16];
        int64_t t;
        uint64_t rx, tx;
    } nic[8];
    int nnic;
};

static void counter(struct cs__perfetto *p, int r, int64_t t, const char *name, double v)
{
    ev_open(p, 'C', r, 0, t);
    fputs(",\"name\":", p->f);
    cs__json_str(p->f, name);
    fprintf(p->f, ",\"args\":{\"value\":%.6g}}", v);
}

static int pf_sample(void *arg, int r, const struct cs__sample *s)
{
    struct pf_samples *q = arg;
    struct cs__perfetto *p = q->p;
    char name[64];
    int in = s->t >= p->w0 && s->t <= p->w1;
    if (s->op == CS_OP_SAMPLE_PROC) {
        if (q->t_proc && s->t > q->t_proc && s->a >= q->cpu && q->t_proc >= p->w0 && in)
            counter(p, r, q->t_proc, "CPU cores",
                    (double)(s->a - q->cpu) / (double)(s->t - q->t_proc));
        if (in)
            counter(p, r, s->t, "RSS MiB", (double)s->b / 1048576.0);
        q->t_proc = s->t;
        q->cpu = s->a;
    } else if (s->op == CS_OP_SAMPLE_NIC) {
        int i = 0;
        while (i < q->nnic && strcmp(q->nic[i].name, s->name))
            i++;
        if (i == q->nnic) {
            if (q->nnic == 8)
                return 0;
            memcpy(q->nic[q->nnic++].name, s->name, sizeof s->name);
            q->nic[i].t = 0;
        }
        if (q->nic[i].t && s->t > q->nic[i].t && s->a >= q->nic[i].rx && s->b >= q->nic[i].tx &&
            q->nic[i].t >= p->w0 && in) {
            snprintf(name, sizeof name, "NIC %s Gb/s", s->name);
            counter(p, r, q->nic[i].t, name,
                    (double)(s->a - q->nic[i].rx + s->b - q->nic[i].tx) * 8 /
                        (double)(s->t - q->nic[i].t));
        }
        q->nic[i].t = s->t;
        q->nic[i].rx = s->a;
        q->nic[i].tx = s->b;
    } else if (s->op == CS_OP_SAMPLE_GPU && in) {
        if (s->util != UINT32_MAX) {
            snprintf(name, sizeof name, "GPU %d util %%", s->index);
            counter(p, r, s->t, name, s->util);
        }
        if (s->a != UINT64_MAX) {
            snprintf(name, sizeof name, "GPU %d memory MiB", s->index);
            counter(p, r, s->t, name, (double)s->a / 1048576.0);
        }
        if (s->c != UINT64_MAX) {
            snprintf(name, sizeof name, "GPU %d power W", s->index);
            counter(p, r, s->t, name, (double)s->c / 1000.0);
        }
    }
    return 0;
}

int cs__perfetto_finish(struct cs__run *run)
{
    struct cs__perfetto *p = run->perfetto;
    if (!p)
        return 0;
    /* Requests whose completion was never recorded (the rank died, or a request was freed
     * without a wait) end at their rank's last event, marked as such. */
    for (size_t i = 0; i < p->async.cap; i++) {
        struct cs__map_slot *s = &p->async.slot[i];
        if (!s->used)
            continue;
        struct pending_async *a = (void *)(uintptr_t)s->v;
        int r = (int)s->a;
        ev_open(p, 'e', r, 1, run->ranks[r].t_last_end);
        fprintf(p->f, ",\"cat\":\"request\",\"id2\":{\"local\":\"0x%" PRIx64 "\"},\"name\":", s->b);
        async_name(p->f, a->op, a->comm);
        fputs(",\"args\":{\"completion\":\"not recorded\"}}", p->f);
        free(a);
    }
    /* GPU records still held back, in start order. */
    for (int r = 0; r < run->world; r++) {
        struct gpu_heap *h = &p->gpu_heap[r];
        while (h->n) {
            struct gpu_pend g = heap_pop(h);
            gpu_emit(run, r, &g);
        }
        free(h->v);
    }
    free(p->gpu_heap);
    /* Steps still open: they end at their rank's last event. */
    for (int r = 0; r < run->world; r++)
        if (p->sel[r] && p->step_cur[r] >= 0)
            step_emit(run, r, p->step_cur[r], p->step_begin[r], run->ranks[r].t_last_end);
    for (int r = 0; r < run->world; r++)
        if (p->sel[r] && p->ph_cur[r] >= 0)
            phase_emit(run, r, p->ph_cur[r], p->ph_begin[r], run->ranks[r].t_last_end);
    for (int r = 0; r < run->world; r++)
        if (p->sel[r]) {
            struct pf_samples q = {.p = p};
            cs__samples_each(run, r, pf_sample, &q);
        }
    fputs("\n]}\n", p->f);
    int rc = ferror(p->f) ? CS_EIO : 0;
    cs__map_free(&p->comm_tid);
    free(p->step_cur);
    free(p->step_begin);
    free(p->ph_cur);
    free(p->ph_begin);
    free(p->ph_step);
    for (int r = 0; r < run->world; r++)
        free(p->launches[r]);
    free(p->launches);
    free(p->launch_next);
    cs__map_free(&p->gpu_tid);
    if (p->tracks.dropped)
        cs__problem(run,
                    "%s: %" PRIu64 " slices not written: they overlap slices on all %d lanes of "
                    "their track",
                    run->perfetto_opts->path, p->tracks.dropped, CS_PF_MAX_LANES);
    cs__pf_tracks_free(&p->tracks);
    cs__map_free(&p->flows);
    cs__map_free(&p->async);
    free(p->sel);
    free(p);
    run->perfetto = NULL;
    return rc;
}
