/* The step analysis' own state (steps.c, groups.c, whatif.c); the run holds it as run->steps. */
#ifndef COMMSCOPE_ANALYZER_STEPS_INTERNAL_H
#define COMMSCOPE_ANALYZER_STEPS_INTERNAL_H

#include "steps.h"

#define CS__STEP_RING 16 /* step begins remembered per rank, for waits that arrive late */
/* Entries of the communicator cache: a power of two, room for the communicators a large job's
 * ranks use at once (every rank its own tensor- and pipeline-parallel groups) with few
 * collisions; 16 KiB. */
#define CS__CCACHE_BITS 10
#define CS__CCACHE (1u << CS__CCACHE_BITS)

/* The communicator cache's slot of id (multiplicative hash: ids differ in their low and high
 * words). */
static inline unsigned cs__ccache_slot(uint64_t id)
{
    return (unsigned)((id * 0x9e3779b97f4a7c15ull) >> (64 - CS__CCACHE_BITS));
}

/* A request in flight (non-blocking initiation until its completion record): one entry of the
 * rank's short list (cs__srank.req) or, when that is full, a slot of the open-addressed table
 * S->reqs, keyed by (rank, request). */
struct cs__sreq {
    struct cs__rkey key; /* (rank, request) */
    int32_t comm;        /* step-analysis communicator index, -1 unknown */
    int64_t tb;          /* initiation begin */
    double busy0;        /* the rank's busy time at tb */
    int red;             /* a reduction */
};
/* Requests a rank keeps in its own list: a rank rarely has more in flight at once. */
#define CS__RREQ 4

struct cs__srank {
    int in_step;                 /* inside a step now */
    int step;                    /* index of the current (or last) step, -1 before the first */
    int64_t begin;               /* aligned begin of the current step */
    int64_t ring[CS__STEP_RING]; /* begins of recent steps, by index % CS__STEP_RING */
    struct cs__budget cur;       /* the open step */
    struct cs__budget first;     /* step 0 (warm-up) */
    struct cs__budget rest;      /* closed steps after the first */
    int wait_open;               /* a wait call whose completions are still to come */
    int64_t wait_te;
    double wait_dur;
    int wait_step;
    double busy;  /* ns inside MPI calls so far */
    int64_t fin;  /* aligned begin of MPI_Finalize, 0 not seen */
    uint64_t occ; /* occurrences of the pattern's anchor so far */
    int gpu;      /* the budget comes from the GPU timeline (steps_gpu.c) */
    /* &cur inside a step, else the run's sink (S->sink): the per-event budget adds need no test
     * of in_step, and the sink is never read. */
    struct cs__budget *acc;
    /* The rank's requests in flight, nreq of them (unordered); more go to S->reqs.  A request is
     * in one of the two places only. */
    int nreq;
    struct cs__sreq req[CS__RREQ];
};

/* Flags of an op in the step analysis (S->opf, set once the step mode is known). */
enum {
    CS__OPF_BOUND = 1, /* can start or end a step in the mode (boundary() looks further) */
    CS__OPF_FIN = 2,   /* MPI_Finalize */
    CS__OPF_RED = 4,   /* a reduction */
    CS__OPF_WAITS = 8, /* a blocking collective (MPI or NCCL): its instances' waits are booked */
    CS__OPF_NCOLL = 16 /* an NCCL collective */
};

struct cs__steps {
    struct cs__run *run; /* the run that holds it (for the hooks that are not given it) */
    /* How steps are found (steps.c's pre-pass over the reference rank's stream). */
    struct cs__sdetect {
        int mode;            /* 0 none, 1 markers, 2 pattern, 3 NVTX ranges */
        char nvtx_pat[128];  /* COMMSCOPE_STEP_NVTX ("" the default names) */
        uint64_t nvtx_steps; /* step ranges begun on the rank of the last pre-pass */
        uint16_t marker_op;
        uint16_t anchor_op;
        int anchor_cls;
        uint64_t anchor_bytes;
        uint64_t anchor_m; /* every anchor_m-th occurrence of the anchor starts a step */
        char source[16];
        char detail[224];
        char note[256];
        int ref; /* reference rank of the pre-pass */
        int ref_steps;
    } detect;
    struct cs__srank *r;  /* [world] */
    struct cs__budget *g; /* per step, sums over ranks */
    size_t ng, capg;
    int count_min, count_max;     /* steps per rank, over the ranks present */
    int rank_min, rank_max;       /* the lowest ranks that found count_min, count_max */
    int tail;                     /* the reference rank's last step was still open at its end */
    struct cs__rtab reqs;         /* struct cs__sreq: requests in flight beyond the ranks' lists */
    unsigned char opf[CS_OP_MAX]; /* CS__OPF_* by op */
    struct cs__budget sink;       /* where a rank's adds go outside its steps (never read) */
    /* Point-to-point transfers of matched pairs, by the message size's log2 bucket
     * (whatif/pair.h; send_bytes: of the pairs whose send call has a duration of its own, not a
     * half of MPI_Sendrecv), and the pairs not measured (a receive that never completed in the
     * window that paired it). */
    struct cs__xfer {
        uint64_t pairs;
        double bytes, xfer_ns, send_ns, recv_ns, send_bytes;
    } xfer[CS_REPORT_P2P_BUCKETS];
    uint64_t xfer_nb;
    /* The communicators' roles and classes (groups.c). */
    struct cs__groups {
        struct cs__map comm_idx; /* (id, 0) -> index + 1 */
        struct cs__ccache {      /* direct-mapped cache in front of comm_idx (indexes never move) */
            uint64_t id;
            int idx1; /* index + 1, 0 empty */
        } comm_cache[CS__CCACHE];
        struct cs__scomm *comms;
        size_t ncomms, capcomms;
        struct cs__cclass *classes;
        size_t nclasses, capclasses;
    } groups;
    /* The what-if's (whatif/): (op | (class + 1) << 16, bytes) -> shortest transfer time in
     * ns + 1, filled from the instances as they complete. */
    struct cs__map best;
    /* The GPU steps (steps_gpu.c). */
    struct cs__sgpu *gpu;
};

/* The step of the rank that contains aligned time t, -1 none (or too old to remember). */
static inline int cs__step_of(const struct cs__srank *sr, int64_t t)
{
    for (int j = sr->step; j >= 0 && j > sr->step - CS__STEP_RING; j--)
        if (t >= sr->ring[j % CS__STEP_RING])
            return j;
    return -1;
}

/* The step views' state (views_steps.c; views.c books the instance waits into its heat map). */
struct cs__vsteps {
    int world;
    int spc;      /* steps per heat-map column; doubles when the steps outgrow the columns */
    double *heat; /* [world * CS_VIEW_HEAT_BINS] ns waited, by step column */
    double outside_ns;
    /* Per rank, what the others waited for it at instances it arrived last at, by the step it
     * arrived in: step 0, the latest step seen (which may turn out to be the untimed tail), and
     * every other step. */
    struct caused {
        double first, mid, latest;
        int latest_k;
    } * caused;
};
/* views_steps.c: more steps than the pre-pass saw on the reference rank: merge column pairs. */
void cs__vsteps_widen(struct cs__vsteps *v);

/* The rank waited wait_ns in step k (-1: in no step): into the heat-map column of the step. */
static inline void cs__vsteps_wait_step(struct cs__vsteps *v, int rank, int k, double wait_ns)
{
    if (k < 0) {
        v->outside_ns += wait_ns;
        return;
    }
    while (k / v->spc >= CS_VIEW_HEAT_BINS)
        cs__vsteps_widen(v);
    v->heat[(size_t)rank * CS_VIEW_HEAT_BINS + (size_t)(k / v->spc)] += wait_ns;
}

/* The rank (state sr) waited wait_ns at a collective it arrived at at aligned time t: into the
 * heat-map column of its step (inline for cs__vsteps_member). */
static inline void cs__vsteps_wait_in(struct cs__vsteps *v, const struct cs__srank *sr, int rank,
                                      int64_t t, int64_t wait_ns)
{
    cs__vsteps_wait_step(v, rank, cs__step_of(sr, t), (double)wait_ns);
}

/* cs__groups_comm with its cache probe inline: the step budget asks per event. */
static inline int cs__groups_comm_cached(struct cs__run *run, struct cs__steps *S, uint64_t id)
{
    const struct cs__ccache *e = &S->groups.comm_cache[cs__ccache_slot(id)];
    if (e->idx1 && e->id == id)
        return e->idx1 - 1;
    return cs__groups_comm(run, S, id);
}

/* The dimension the budget books communicator ci's calls to (CS_DIM_OTHER for -1: unknown). */
static inline enum cs__dim cs__steps_dim(const struct cs__steps *S, int ci)
{
    return ci < 0 ? CS_DIM_OTHER : S->groups.comms[ci].dim;
}

/* Whether op can start or end a step in S's mode: the only ops cs__steps_boundary_of() looks at
 * further (0 for all others). */
static inline int cs__steps_boundary_op(const struct cs__steps *S, unsigned op)
{
    return (S->detect.mode == 1 && op == S->detect.marker_op) ||
           (S->detect.mode == 2 && op == S->detect.anchor_op) ||
           (S->detect.mode == 3 && (op == CS_OP_NVTX_RANGE_BEGIN || op == CS_OP_NVTX_RANGE_END));
}

/* steps.c: cs__steps_boundary_of for the ops it cannot rule out by S->opf. */
int cs__steps_boundary_slow(struct cs__run *run, struct cs__steps *S, const struct cs_event *ev,
                            enum cs_op_kind k, uint64_t *occ);

/* 1 when ev starts a step, -1 when it ends one, 0 neither; *occ counts the pattern's anchors seen
 * on the rank so far.  Inline: the replays ask for every event, and almost every op is ruled out
 * by one table look-up. */
static inline int cs__steps_boundary_of(struct cs__run *run, struct cs__steps *S,
                                        const struct cs_event *ev, enum cs_op_kind k, uint64_t *occ)
{
    if (ev->op < CS_OP_MAX && !(S->opf[ev->op] & CS__OPF_BOUND))
        return 0;
    if (S->detect.mode == 2 &&
        ev->bytes != S->detect.anchor_bytes) /* the anchor op, another size */
        return 0;
    return cs__steps_boundary_slow(run, S, ev, k, occ);
}

/* steps.c: add v to the double at offset off of step k of the rank (open or closed). */
void cs__steps_add(struct cs__steps *S, int rank, int k, size_t off, double v);

/* steps_gpu.c: the step budget of ranks with a CUPTI GPU timeline. */
int cs__sgpu_init(struct cs__run *run, struct cs__steps *S);
/* A host NCCL call (its launch id's reduction flag). */
void cs__sgpu_launch(struct cs__steps *S, int rank, const struct cs_event *ev);
/* A GPU record. */
void cs__sgpu_record(struct cs__run *run, struct cs__steps *S, int rank, const struct cs_event *ev,
                     int64_t tb, int64_t te);
/* Member `rank` of an NCCL instance on communicator ci waited [b, e) (p2p: the first side of
 * an ncclSend/ncclRecv pair, cs__steps_p2p_wait): booked as waiting where its kernels ran
 * exposed. */
void cs__sgpu_wait(struct cs__run *run, struct cs__steps *S, int rank, int ci, int64_t b, int64_t e,
                   int p2p);
/* Step `step` begins at aligned t on the rank (-1: the open step ends there). */
void cs__sgpu_boundary(struct cs__steps *S, int rank, int64_t t, int step);
/* The rank's last step ends at `end`: place everything left. */
void cs__sgpu_finish_rank(struct cs__steps *S, int rank, int64_t end);
void cs__sgpu_finish(struct cs__run *run, struct cs__steps *S);
void cs__sgpu_free(struct cs__steps *S);

/* The what-if scenarios (whatif.c, whatif_gpu.c): the replay of the measured times, no straggler,
 * full overlap, collectives at the best bandwidth. */
enum { SC_REPLAY, SC_NOSTRAG, SC_OVERLAP, SC_BESTBW, SC_N };

/* whatif.c: the mean over the timed steps first..end-1 with cnt[k] ranks of the per-scenario
 * sums of replayed step times (ns) into o's step times (s) and replay error; returns the number
 * of steps counted (0: o is left unchanged). */
int cs__whatif_means(double *const sum[SC_N], const int *cnt, int first, int end, double measured_s,
                     struct cs_report_whatif *o);
/* whatif.c: the median of c[0..m-1] (0 when m is 0), reordering c. Used for the no-straggler
 * factors of both replays. */
double cs__whatif_median(double *c, size_t m);

/* whatif_gpu.c: when every present rank has a GPU timeline, replay the GPU kernels instead of
 * the host calls and overwrite o's replayed values (left unchanged otherwise). */
void cs__whatif_gpu(struct cs__run *run, struct cs__steps *S, int first, int end, double measured_s,
                    struct cs_report_whatif *o);

/* whatif.c */
/* s_i of member i of a collective with arrivals arr: the latest of its own arrival and those its
 * pattern waits for; *ok = 0 when one of those is not known yet (have[j] == 0; have NULL: all). */
int64_t cs__whatif_sync(enum cs_op_pattern pat, int32_t root, int32_t n, const int64_t *arr,
                        const unsigned char *have, int32_t i, int *ok);
/* A complete blocking collective of class cls (-1 unknown): its transfer time into S->best. */
void cs__whatif_instance(struct cs__steps *S, const struct cs__inst *in, int cls);
/* The replay over the timed steps [first, end) (a second pass over the traces, one step window
 * at a time); fills o.  measured_s: the measured mean step time.  p2p_wait (NULL: not wanted):
 * [world * CS_DIM_N], zeroed; receives each host rank's waits at point-to-point calls and their
 * completions in the timed steps, by dimension (ns), for the step budget.  p2p_run (NULL: not
 * wanted): [3 * world], zeroed; the same over every step window (the whole run, for the POP split,
 * the ranks' p2p_wait_s and the report's time segments), then of each rank's the part inside
 * point-to-point calls (the rest is inside wait/test calls), then per rank the waits its partners
 * had for it (each wait booked to the partner that arrived last).  Returns 1 when the pass went
 * over the whole run (p2p_run holds its waits), 0 when it did not run or ran out of memory (both
 * arrays left zero). */
int cs__whatif_report(struct cs__run *run, struct cs__steps *S, int first, int end,
                      double measured_s, struct cs_report_whatif *o, double *p2p_wait,
                      double *p2p_run);

#endif
