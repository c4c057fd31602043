/*
 * What the analyzer's files share: the run (struct cs__run: the loaded ranks, the communicator
 * and op tables, and each pass's state behind its own pointer) and the report model.  The
 * pipeline runs forward only:
 *
 *   load/      rundir.c finds and opens rank-*.cst (reader.c validates each) and checks they form
 *              one run; align.c maps each rank's timestamps onto rank 0's clock
 *   core/      analyze.c, the driver: the k-way merge of all ranks' events through the pass table
 *              (passes.def: every pass's hooks in dependency order; passes.h their shapes)
 *   passes/    metrics, steps and groups, views, NCCL point-to-point, wire, GPU timeline, matching
 *   whatif/    the what-if replay (called from the steps' report)
 *   import/    Kineto traces converted to a run;  export/  Perfetto, events CSV
 *   render/    text, JSON, HTML and the verdict: formatting only
 *
 * docs/architecture.md says what each pass reads and publishes, and how to add one.
 */
#ifndef COMMSCOPE_ANALYZER_INTERNAL_H
#define COMMSCOPE_ANALYZER_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "commscope/analyzer.h"
#include "commscope/ops.h"
#include "commscope/report.h"
#include "commscope/trace.h"
#include "reader.h"
#include "views.h"

struct cs__steps;
struct cs__gpu;
struct cs__np2p;

/* ---- small hash map: (a, b) -> 64-bit value (map.c) ---- */

struct cs__map {
    struct cs__map_slot {
        uint64_t a, b, v;
        int used;
    } * slot;
    size_t cap, n; /* cap is a power of two */
};
/* Room for need elements of elem bytes at *p (capacity *cap, doubled as needed).  0, or -1 out of
 * memory (*p and *cap unchanged). */
int cs__grow(void **p, size_t *cap, size_t need, size_t elem);
/* Append a sentence formatted as by vsnprintf (at most 1023 bytes) to the list (*v)[*n] of
 * capacity *cap.  0, or -1 out of memory (the sentence is lost). */
int cs__msg_vadd(char ***v, size_t *n, size_t *cap, const char *fmt, va_list ap);
/* Pointer to the value for (a, b), inserting 0 when absent (*fresh = 1).  NULL: out of memory. */
uint64_t *cs__map_put(struct cs__map *m, uint64_t a, uint64_t b, int *fresh);
/* A message size's bucket: floor(log2(bytes)) (0 for fewer than 2 bytes), at most n - 1 (the
 * bandwidth chart's and the point-to-point transfers' buckets). */
static inline int cs__log2_bucket(uint64_t bytes, int n)
{
    int k = bytes < 2 ? 0 : 63 - __builtin_clzll(bytes);
    return k < n ? k : n - 1;
}

static inline uint64_t cs__map_hash(uint64_t a, uint64_t b)
{
    uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull + (a << 6) + (a >> 2));
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return h;
}

/* Pointer to the value for (a, b) or NULL.  Inline: matching looks up several keys per event. */
static inline uint64_t *cs__map_get(const struct cs__map *m, uint64_t a, uint64_t b)
{
    if (!m->cap)
        return NULL;
    for (size_t j = cs__map_hash(a, b) & (m->cap - 1);; j = (j + 1) & (m->cap - 1)) {
        struct cs__map_slot *s = &m->slot[j];
        if (!s->used)
            return NULL;
        if (s->a == a && s->b == b)
            return &s->v;
    }
}
/* Remove (a, b) if present. */
void cs__map_del(struct cs__map *m, uint64_t a, uint64_t b);
/* Remove the entry whose value v points to (from cs__map_get or cs__map_put, no change since):
 * no second probe. */
void cs__map_del_at(struct cs__map *m, uint64_t *v);
/* Remove every entry, keeping the slots allocated. */
void cs__map_clear(struct cs__map *m);
void cs__map_free(struct cs__map *m);

/* ---- requests in flight by (rank, request): open addressing, linear probing (map.c) ----
 *
 * For matching's pending requests and the step budget's: records of esz bytes (the caller's
 * struct, which begins with a struct cs__rkey) kept in the slots themselves, so a look-up is one
 * probe run and no second indirection.  cap is a power of two (0: none yet), the table at most
 * half full; deletion shifts later entries back, so there are no tombstones.  The functions take
 * esz, a constant at each caller, so that slot addressing is a constant multiply. */
struct cs__rkey {
    uint64_t req;
    int32_t rank1; /* rank + 1; 0: the slot is empty */
};
struct cs__rtab {
    unsigned char *slot;
    size_t cap, n;
    int shift; /* 64 - log2(cap): the hash's top bits index the table */
};
/* The home slot of (rank, req): the top bits of a multiplicative hash, where every bit of the
 * key counts (request ids are often small counters, the same on every rank). */
static inline size_t cs__rtab_home(const struct cs__rtab *t, int rank, uint64_t req)
{
    uint64_t h = (req + (uint64_t)(uint32_t)rank * 0x632be59bd9b4e019ull) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> t->shift);
}
static inline struct cs__rkey *cs__rtab_at(const struct cs__rtab *t, size_t esz, size_t j)
{
    return (struct cs__rkey *)(void *)(t->slot + j * esz);
}
/* The record of (rank, req), or NULL. */
static inline void *cs__rtab_get(const struct cs__rtab *t, size_t esz, int rank, uint64_t req)
{
    if (!t->n)
        return NULL;
    for (size_t j = cs__rtab_home(t, rank, req);; j = (j + 1) & (t->cap - 1)) {
        struct cs__rkey *k = cs__rtab_at(t, esz, j);
        if (!k->rank1)
            return NULL;
        if (k->req == req && k->rank1 == rank + 1)
            return k;
    }
}
/* The table doubled (first: 64 slots).  0, or -1 out of memory (the table is unchanged). */
int cs__rtab_grow(struct cs__rtab *t, size_t esz);
/* The record of (rank, req), found or added with its key set (the rest is the caller's to fill;
 * a found one is overwritten too: a reused request id replaces the forgotten one); NULL out of
 * memory. */
static inline void *cs__rtab_put(struct cs__rtab *t, size_t esz, int rank, uint64_t req)
{
    if (2 * (t->n + 1) > t->cap && cs__rtab_grow(t, esz))
        return NULL;
    for (size_t j = cs__rtab_home(t, rank, req);; j = (j + 1) & (t->cap - 1)) {
        struct cs__rkey *k = cs__rtab_at(t, esz, j);
        if (!k->rank1) {
            t->n++;
            k->req = req;
            k->rank1 = rank + 1;
            return k;
        }
        if (k->req == req && k->rank1 == rank + 1)
            return k;
    }
}
/* Remove the record at k (from cs__rtab_get or cs__rtab_put, no change since): later members
 * of its probe run move back into the hole.  Inline, so that the moves are of a known size. */
static inline void cs__rtab_del(struct cs__rtab *t, size_t esz, void *k)
{
    size_t mask = t->cap - 1, i = (size_t)((unsigned char *)k - t->slot) / esz, j = i;
    for (;;) {
        j = (j + 1) & mask;
        struct cs__rkey *e = cs__rtab_at(t, esz, j);
        if (!e->rank1)
            break;
        size_t h = cs__rtab_home(t, e->rank1 - 1, e->req);
        /* e may fill hole i when its home is not cyclically within (i, j]. */
        if (((j - h) & mask) >= ((j - i) & mask)) {
            memcpy(cs__rtab_at(t, esz, i), e, esz);
            i = j;
        }
    }
    cs__rtab_at(t, esz, i)->rank1 = 0;
    t->n--;
}
void cs__rtab_free(struct cs__rtab *t);

/* ---- clocks (align.c) ---- */

/*
 * Linear model of rank 0's clock minus this rank's clock: offset(t) = o0 + (o1 - o0) * (t - l0) /
 * (l1 - l0) with both samples valid, o0 (or o1) with one, 0 with none.
 */
struct cs__clock {
    int valid;        /* samples used: 0, 1 or 2 */
    uint64_t l0, l1;  /* local times of the samples */
    int64_t o0, o1;   /* offsets at them */
    uint64_t rtt_max; /* largest valid round trip */
    /* Precomputed for cs__clock_map (valid == 2): slope numerator o1 - o0 and denominator
     * l1 - l0 with the sign moved to the numerator, and whether both fit the 64-bit fast path. */
    int64_t num, den;
    uint64_t inv; /* floor(2^64 / den) for den >= 2: division by multiplication */
    int fast;
    int shared; /* 1 rank 0's own clock (same boot), 2 its host's best samples; 0 its own */
};
void cs__clock_init(struct cs__clock *c, const struct cs_file_header *h);
struct cs__run;
/*
 * Ranks that read one clock (the same boot id, no test skew, docs/metrics.md): those on rank 0's
 * boot need no alignment at all (offset 0, whatever the ping-pong measured under load); those
 * of another host are aligned with the best round trip any of that host's ranks measured.  Call
 * after every rank's cs__clock_init.
 */
void cs__clock_shared(struct cs__run *run);
/* Start the ring-mode window of rank `only` (-1: every rank) at aligned time w or later
 * (analyze.c; before the merge). */
void cs__window_recut(struct cs__run *run, int only, int64_t w);
/* cs__clock_map for two valid samples, in 128-bit integers (any t). */
int64_t cs__clock_map_wide(const struct cs__clock *c, uint64_t t);

/* The correction q = round(num * (t - l0) / den) of cs__clock_map in 64 bits: 0 when an
 * intermediate would overflow (then only 128 bits give it). */
static inline int cs__clock_corr(const struct cs__clock *c, uint64_t t, int64_t *qo)
{
    int64_t d, num, q;
    if (!(c->fast && t <= INT64_MAX && c->l0 <= INT64_MAX &&
          !__builtin_sub_overflow((int64_t)t, (int64_t)c->l0, &d) &&
          !__builtin_mul_overflow(c->num, d, &num) && num > -INT64_MAX &&
          !__builtin_add_overflow(num >= 0 ? num : -num, c->den / 2, &q)))
        return 0;
    /* q / den by the precomputed reciprocal: q * inv / 2^64 is at most one below the quotient
     * (inv > 2^64 / den - 1 and q < 2^64), so one correction makes it exact. */
    if (c->den >= 2) {
        uint64_t n = (uint64_t)q, u = (uint64_t)(((unsigned __int128)n * c->inv) >> 64);
        if (n - u * (uint64_t)c->den >= (uint64_t)c->den)
            u++;
        q = (int64_t)u;
    }
    *qo = num >= 0 ? q : -q;
    return 1;
}

/* t on rank 0's clock (ns), rounded to nearest.  Inline: the analyzer maps every timestamp. */
static inline int64_t cs__clock_map(const struct cs__clock *c, uint64_t t)
{
    if (c->valid < 2)
        return (int64_t)t + c->o0;
    /* Exact integer interpolation, rounded to nearest (ties away from zero), extrapolating outside
     * [l0, l1].  The same arithmetic in 64 bits whenever no intermediate overflows (checked), else
     * in 128 bits. */
    int64_t q, r;
    if (cs__clock_corr(c, t, &q) && !__builtin_add_overflow((int64_t)t, c->o0, &r) &&
        !__builtin_add_overflow(r, q, &r))
        return r;
    return cs__clock_map_wide(c, t);
}

/* Memo of cs__clock_map_near (zeroed: empty): the local times lo..hi all have correction q (ok
 * set; two samples).  fast: every t in lo..hi maps to t + off without overflow (checked at both
 * ends; the sum is monotonic in t), the one test of the memo's hit.  per: the length of the last
 * range a fill found, the guess for the next one. */
struct cs__clock_memo {
    uint64_t lo, hi;
    int64_t q;
    int ok;
    int fast;
    int64_t off;
    uint64_t per;
};
/* Fill m's lo, hi, q and ok for time t, whose correction is q (align.c). */
void cs__clock_memo_fill(struct cs__clock_memo *m, const struct cs__clock *c, uint64_t t,
                         int64_t q);
/* cs__clock_map_near's miss: maps t and refills the memo (align.c). */
int64_t cs__clock_map_near_slow(struct cs__clock_memo *m, const struct cs__clock *c, uint64_t t);

/* cs__clock_map(c, t), for a stream of nearby times: the correction q(t) is a rounded linear
 * function of t, so it changes only every den / |num| ns (typically milliseconds), and the memo
 * holds the range of times around the last one that share its q (checked exactly, see
 * cs__clock_memo_fill and cs__clock_map_near_slow; with fewer than two samples the correction is
 * 0 everywhere).  Same results as cs__clock_map.  Forced inline, the memo's hit only: the
 * analyzer maps every timestamp, and GCC's link-time optimisation would otherwise make a call of
 * it. */
static inline __attribute__((always_inline)) int64_t
cs__clock_map_near(struct cs__clock_memo *m, const struct cs__clock *c, uint64_t t)
{
    if (m->fast && t >= m->lo && t <= m->hi)
        return (int64_t)t + m->off;
    return cs__clock_map_near_slow(m, c, t);
}
/* Drift in ppm ((o1 - o0) / (l1 - l0) * 1e6), 0 unless both samples are valid. */
double cs__clock_drift_ppm(const struct cs__clock *c);
/* Whether the correction c makes at local time t is less than limit ns either way (computed
 * without overflow for any t). */
int cs__clock_corr_within(const struct cs__clock *c, uint64_t t, int64_t limit);

/* ---- the run ---- */

#define CS__RING 16 /* slots of a communicator's open-instance ring (a power of two) */
struct cs__comm {
    uint64_t id;
    int32_t size;
    const int32_t *members; /* world rank of comm rank i (points into a mapping or run->ident) */
    int32_t *owned;         /* members copy owned by the run (synthesised comms) or NULL */
    struct cs__inst *spare; /* closed instances kept for reuse (all of this comm's size) */
    uint64_t parent;        /* how it was made (its record): the communicator it came from, */
    uint16_t op;            /* the creating op (0 world/self/unknown), */
    int32_t color;          /* split colour or type, */
    unsigned char nccl;     /* an NCCL communicator */
    int incomplete;         /* NCCL: some members unknown (members[i] == -1) */
    int multi;              /* NCCL: one process holds several members (ncclCommInitAll) */
    /* Open instances by sequence number mod CS__RING (match.c): a communicator's instances open
     * and close nearly in sequence order, so the slot of a new one is almost always free; when it
     * is still taken (an instance left open long), the newcomer goes to run->match.open instead. */
    struct cs__inst *ring[CS__RING];
    int nring; /* ring slots taken */
    /* With ring-mode windows (run->windows): per comm rank, 1 + the latest seq it arrived at
     * (match.c; allocated on first use, NULL else). */
    uint32_t *last_seq;
};

/* One open collective instance (match.c). */
struct cs__inst {
    uint64_t comm;
    uint32_t seq;
    uint16_t op;
    unsigned char pat;      /* enum cs_op_pattern of op */
    struct cs__comm *c;     /* its communicator (owns the spare list it returns to) */
    struct cs__inst *next;  /* link in c->spare while unused */
    size_t row;             /* op row of (op, comm), SIZE_MAX unknown */
    int mixed;              /* members disagree on the op: never used for waits */
    int edge;               /* left open at the end because the missing members' calls lie
                               before their ring-mode windows (not incomplete; match.c) */
    int32_t n;              /* members */
    int32_t root;           /* comm rank of the root, -1 unknown or none */
    int32_t ended;          /* members with their end known */
    int32_t dead_unended;   /* members that will send nothing more and have not ended */
    const int32_t *members; /* world ranks */
    int64_t *arr, *end;     /* aligned times per comm rank */
    uint64_t *size;         /* max(bytes, bytes_recv) per comm rank */
    int64_t *wait;          /* per comm rank: its wait (cs__metrics_instance, complete ones) */
    unsigned char *state;   /* bit 0 arrived, bit 1 ended */
};

#define CS__CC 16 /* entries of a rank's communicator cache (a power of two) */
struct cs__rank {
    /* The merge's and the metrics' per-event fields come first, in two cache lines (run->ranks
     * is 64-byte aligned): with thousands of ranks nothing of a rank is still cached when its
     * next event comes, so each line an event touches is a miss. */
    /* for the merge's cs__clock_map_near */
    struct cs__clock_memo clkm __attribute__((aligned(64)));
    const struct cs_event *next;
    int64_t next_key;                    /* aligned t_begin of next */
    const struct cs_event *bnext, *bend; /* the rest of the merge's last batch from the reader */
    /* metrics */
    int64_t t_first, t_last_end; /* aligned */
    uint64_t comm_ns, calls, bytes;
    /* The last wait/test call, booked on no communicator until the first request it completed
     * names one (metrics.c): its row + 1 (0 none) and duration. */
    uint64_t wait_row1, wait_dur;
    /* Sums of waits (each >= 0 and < 2^63): unsigned, so a damaged trace's absurd times wrap
     * (after 584 years of waiting) instead of overflowing. */
    uint64_t wait_ns;
    uint64_t late_arrivals;
    uint64_t others_waited_ns;
    int present;          /* a valid file was read for this rank */
    int dead;             /* will produce no more events (missing, bad, or stream done) */
    struct cs_reader *rd; /* owned */
    const struct cs_file_header *h;
    struct cs__clock clk;
    /* Communicators this rank used: id -> comm and this rank's comm rank (match.c), a small
     * open-addressing cache (c NULL: free) that keeps the entry last looked up in its home slot. */
    struct cs__rank_comm {
        uint64_t id;
        struct cs__comm *c;
        int32_t idx;
    } cc[CS__CC];
    /* GPU timeline (gpu.c), summed over the rank's GPUs; gpu is 0 when it had no GPU records */
    int gpu;
    uint64_t gpu_comm_ns, gpu_ovl_ns, gpu_compute_ns;
    char file[256];
};

/* Per (op, communicator) totals (metrics.c). */
struct cs__oprow {
    uint16_t op;
    uint64_t comm;
    uint64_t calls, bytes, time_ns;
    double inst_bytes, inst_ns; /* collectives: sum of S and t over complete instances */
    uint64_t instances;
    double p2p_bytes, p2p_ns; /* point-to-point: bytes over call (or request) durations */
    double p2p_scope_bytes[2], p2p_scope_ns[2]; /* the same by peer: [0] same host, [1] other */
};

/* A pending non-blocking request of one rank: a slot of match.c's request table, keyed by
 * (rank, req). */
struct cs__pending {
    struct cs__rkey key;   /* (world rank, request id): run->match.preq */
    unsigned char is_coll; /* a non-blocking collective */
    signed char scope;     /* point-to-point: 0 peer on the same host, 1 another host, -1 unknown */
    uint16_t op;
    uint32_t seq;       /* collectives: the instance's sequence number, */
    int32_t idx;        /* comm rank */
    struct cs__comm *c; /* and communicator */
    int64_t t_begin;    /* aligned */
    uint64_t bytes;
    size_t row; /* op row index */
};

struct cs__run {
    char dir[4096];
    int world; /* world size of the run */
    uint64_t run_id;
    char program[CS_PROGRAM_MAX];
    struct cs__rank *ranks; /* [world] */
    int32_t *ident;         /* 0..world-1, members of world without a record */
    /* communicators */
    struct cs__map comm_by_id; /* (id, 0) -> struct cs__comm * */
    struct cs__map my_rank;    /* (id, world rank) -> comm rank + 1 */
    struct cs__comm **comms;
    size_t ncomms, capcomms;
    /* Matching's own state (match.c; no other pass reads it, its free hook frees it). */
    struct cs__match {
        struct cs__map open; /* (comm, seq) -> struct cs__inst *, those not in a comm's ring */
        size_t nring;        /* open instances in the communicators' rings */
        /* Pending requests (struct cs__pending), freed by cs__match_finish (or cs__match_free
         * when the analysis stopped before it). */
        struct cs__rtab preq;
    } match;
    int ndead;               /* ranks marked dead (rundir.c's missing ones, cs__match_rank_done) */
    uint64_t uncertainty_ns; /* max rtt / 2 over all ranks */
    /* metrics */
    struct cs__map row_by_key; /* (op, comm) -> row index + 1 */
    /* Direct-mapped cache in front of row_by_key: rows never move until the report is built. */
    struct cs__rowc {
        uint64_t comm;
        uint32_t op; /* 0: empty (op 0 never has a row) */
        uint32_t row;
    } rowc[256];
    struct cs__oprow *rows;
    size_t nrows, caprows;
    uint64_t matched, incomplete, unmatched_events;
    int64_t window_start; /* ring-mode windows: the latest start (aligned ns; metrics.c) */
    int windows;          /* some rank's trace kept a window (window_cut in analyze.c) */
    uint64_t window_edge; /* collective instances cut by the windows' start (match.c) */
    double skew_sum_ns;
    int64_t skew_max_ns;
    uint64_t violations;
    uint64_t events, dropped, unrecorded_tests;
    int missing_reported_comm;
    /* problems, in the order found */
    char **problems;
    size_t nproblems, capproblems;
    int bad_files;           /* files skipped */
    FILE *events_out;        /* when set, every event is also written here on the aligned clock */
    struct cs__views *views; /* chart accumulators (views.c); NULL when out of memory */
    const struct cs_perfetto_opts *perfetto_opts; /* --perfetto: export asked for */
    struct cs__perfetto *perfetto;                /* the export sink while streaming */
    FILE *progress_out;        /* when set, progress lines go here (a terminal) */
    struct cs__steps *steps;   /* the step analysis' state (steps_internal.h), NULL when off */
    int32_t *host_of;          /* [world] host index of each rank (nodes.c), -1 unknown; or NULL */
    int nhosts;                /* hosts numbered in host_of (those of the present ranks) */
    struct cs__wire *wire;     /* wire capture data while analysing (wire.c), NULL none */
    struct cs__vsteps *vsteps; /* the step views' accumulators (views_steps.c), NULL when off */
    int want_timeline;         /* build the representative step's timeline (the HTML report) */
    int known_hung;            /* the job is stuck although its ranks run (--hung) */
    struct cs__gpu *gpu;       /* the GPU timeline's state (gpu.c), NULL until a GPU record */
    char source[16];           /* trace.source: "commscope" ("" reads so) or "kineto" */
    struct cs__np2p *np2p;     /* NCCL point-to-point matching (nccl_p2p.c), NULL until a call */
    /* [2 * world] ns, or NULL when not measured: each host rank's waiting at MPI point-to-point
     * calls over the whole run (the what-if pass's matching, steps_model.c), then of it the part
     * inside point-to-point calls (the rest is inside wait/test calls); for the time segments */
    double *p2p_wait;
    struct cs__hang *hang;     /* the hang diagnosis' kept instances (hang.c), NULL none */
    struct cs__phases *phases; /* the step phases' state (phases.c), NULL off */
    struct cs__res *res;       /* resource samples' figures (resources.c), NULL none */
    const struct cs_flops_opts *flops_opts; /* the model FLOPs per step (flops.c), NULL none */
    char (*gpu_name)[64]; /* [world] the GPU model each rank's trace names ("" none), or NULL */
};

/* Whether world rank r, a communicator's member, has a trace in the run.  An NCCL communicator
 * some of whose members left no record (incomplete) has -1 for those: never a rank. */
static inline int cs__member_present(const struct cs__run *run, int32_t r)
{
    return r >= 0 && r < run->world && run->ranks[r].present;
}

/* 0: peer runs on rank's host, 1: on another host, -1: unknown (nodes.c fills host_of). */
static inline int cs__peer_scope(const struct cs__run *run, int rank, int32_t peer)
{
    if (!run->host_of || peer < 0 || peer >= run->world || run->host_of[rank] < 0 ||
        run->host_of[peer] < 0)
        return -1;
    return run->host_of[rank] != run->host_of[peer];
}

/* run.c: record a problem (printf-style; the run owns the copy). */
void cs__problem(struct cs__run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* analyze.c: free everything of the run. */
void cs__run_free(struct cs__run *run);

/* rundir.c: find, open and check the files of RUN_DIR; fills run.  Returns 0, or CS_ENOENT /
 * CS_EIO when the directory cannot be read (message in err). */
int cs__rundir_load(struct cs__run *run, const char *dir, char *err, size_t errlen);

/* comms.c: the communicator table, agreed across ranks before the passes begin (0 or CS_ENOMEM),
 * and read by all of them. */
int cs__comms_build(struct cs__run *run);
/* Add c to the run's communicator table (owned by the run).  Returns 0 or -1 (out of memory). */
int cs__comm_register(struct cs__run *run, struct cs__comm *c);
const struct cs__comm *cs__comm_get(struct cs__run *run, uint64_t id);
/* Comm rank of world rank r in communicator c, or -1. */
static inline int32_t cs__comm_rank(const struct cs__run *run, const struct cs__comm *c, int r)
{
    uint64_t *v = cs__map_get(&run->my_rank, c->id, (uint64_t)r);
    /* The rank's own record says; unless it disagrees with the record the communicator was
     * built from (reported in cs__comms_build), then the members do. */
    if (v && *v - 1 < (uint64_t)c->size && c->members[*v - 1] == r)
        return (int32_t)(*v - 1);
    if (c->members == run->ident) /* world (self of rank 0 starts there too: size 1) */
        return r < c->size ? r : -1;
    for (int32_t i = 0; i < c->size; i++)
        if (c->members[i] == r)
            return i;
    return -1;
}
/* match.c: collective instances and requests.  tb, te: ev's t_begin and t_end on rank 0's
 * clock. */
void cs__match_event(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k,
                     size_t row, int64_t tb, int64_t te);
/* The same for an event another pass derived (through the driver). */
void cs__match_derived(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k,
                       size_t row, int64_t tb, int64_t te);
void cs__match_rank_done(struct cs__run *run, int rank);
void cs__match_finish(struct cs__run *run);
/* Matching's own state (run->match); again is harmless. */
void cs__match_free(struct cs__run *run);

/* metrics.c */
/* k: ev's op kind; te: ev's t_end on rank 0's clock.  Returns the op row of the event, SIZE_MAX
 * none. */
size_t cs__metrics_event(struct cs__run *run, int rank, const struct cs_event *ev,
                         enum cs_op_kind k, int64_t te);
/* The op row of (op, comm), created when absent; SIZE_MAX out of memory. */
size_t cs__row_get(struct cs__run *run, uint16_t op, uint64_t comm);
struct cs__inst_facts;
void cs__metrics_instance(struct cs__run *run, struct cs__inst *in, struct cs__inst_facts *f);
void cs__metrics_request_done(struct cs__run *run, const struct cs__pending *p, int64_t t_end);

/* nccl.c: NCCL communicators, clocks of jobs without MPI, header notes. */
/* Join NCCL record rec of world rank `rank` into its communicator.  0 or CS_ENOMEM. */
int cs__nccl_comm_add(struct cs__run *run, int rank, const struct cs_comm_record *rec);
/* After all records: report NCCL communicators with members nobody recorded. */
int cs__nccl_comms_complete(struct cs__run *run);
/* Re-initialise rank r's clock model when the run was traced without MPI. */
void cs__nccl_clock(struct cs__run *run, int r);
/* Problems from the headers: static NCCL, GPU notes, lost GPU records. */
void cs__nccl_header_problems(struct cs__run *run);
/* An NCCL call (CS_KIND_NCOLL/NP2P) into its op row; returns the row or SIZE_MAX. */
size_t cs__nccl_metrics_event(struct cs__run *run, int rank, const struct cs_event *ev);

/* analyze.c: the whole pipeline on a loaded run; fills rep (free with cs__report_free). */
int cs__analyze(struct cs__run *run, struct cs_report *rep);

/* A fact one pass found that other passes account for.  It goes back through the driver
 * (cs__analyze_fact of passes.h, to every row's fact hook), never into another pass directly;
 * the passes that take a kind are named at its line. */
enum cs__fact_kind {
    CS__FACT_REQUEST,     /* point-to-point request req completed at t (match): metrics */
    CS__FACT_TRANSFER,    /* op's bytes on comm moved in ns (metrics: a completed request): views */
    CS__FACT_WAIT,        /* host rank `rank` waited ns at a point-to-point call arriving at t, in
                           * step `step` (-1: none; the what-if's pairing): views, vsteps */
    CS__FACT_NCCL_KERNEL, /* an NCCL kernel of launch `id` ran on rank's GPU over [t, e) (gpu: the
                           * launch's first record): np2p */
    CS__FACT_GPU_WAIT,    /* GPU rank `rank` waited for its point-to-point partner on comm over
                           * [t, e) (np2p: an NCCL send/receive pair): steps */
    CS__FACT_GPU_EXPOSED, /* on a GPU of rank `rank`, NCCL kernels ran and no compute kernel did
                           * over [t, e) (gpu: its sweep, in time order per GPU): phases */
};
struct cs__fact {
    enum cs__fact_kind kind;
    int rank, step;
    uint16_t op;
    uint64_t comm;
    double bytes, ns;
    int64_t t, e; /* aligned ns */
    const struct cs__pending *req;
    uint64_t id;
};
/* run.c: the name of communicator id in reports: "world", "self" or "comm-<16 hex digits>";
 * returns buf. */
const char *cs__comm_label(uint64_t id, char *buf, size_t n);
/* A communicator's name by how it was made (comms.c): "world", "split of world (colour 1): ranks
 * 0,2", "dup of world #2", "NCCL comm of ranks 0-7"; its label when nothing is known. */
const char *cs__comm_name(struct cs__run *run, uint64_t id, char *buf, size_t n);

/* report_events.c: the CSV header, then one line per event with times on rank 0's clock. */
void cs__events_csv_header(FILE *f);
void cs__events_csv_line(FILE *f, const struct cs__run *run, int rank, const struct cs_event *ev,
                         int64_t t_begin, int64_t t_end);

/* Like cs__analyze on a freshly loaded RUN_DIR; when events_out is not NULL every event is also
 * written to it as CSV (see report_events.c). */
int cs__analyze_dir(const char *dir, struct cs__run *run, struct cs_report *rep, char *err,
                    size_t errlen, FILE *events_out);
void cs__report_build(struct cs__run *run, struct cs_report *rep);
void cs__report_free(struct cs_report *rep);

/* nodes.c: hosts of the ranks (from trace headers) and each node's snapshot (RUN_DIR/topology/):
 * cs__nodes_index before the event pass fills run->host_of; cs__nodes_report after the op rows
 * are built adds rep->nodes (capacity of each op's bottleneck path, inter- vs intra-host
 * bandwidth, port counter differences, GPU-NIC affinity); the renderers' hooks print it. */
void cs__nodes_index(struct cs__run *run);
void cs__nodes_report(struct cs__run *run, struct cs_report *rep);
void cs__nodes_free(struct cs_report *rep);
/* The value of the report's "topology" key (its key already written), at JSON depth depth. */
void cs__nodes_json(const struct cs_report *rep, FILE *out, int depth);
void cs__nodes_text(const struct cs_report *rep, FILE *out);
/* wire.c: wire capture files joined with the traced communication (wire.h). */
void cs__wire_begin(struct cs__run *run);
void cs__wire_event(struct cs__run *run, int rank, const struct cs_event *ev);
void cs__wire_instance(struct cs__run *run, const struct cs__inst *in);
void cs__wire_end(struct cs__run *run, struct cs_report *rep);
void cs__wire_free(struct cs__run *run);

/* Renderers. */
void cs__report_text(const struct cs_report *rep, FILE *out);
int cs__report_json(const struct cs_report *rep, FILE *out);
/* Every step as CSV (render/report_steps.c; `--steps-csv FILE`). */
int cs__report_steps_csv(const struct cs_report *rep, FILE *out);
/* Every rank as CSV (render/report_json.c; `--ranks-csv FILE`). */
int cs__report_ranks_csv(const struct cs_report *rep, FILE *out);
/* Every (op, communicator) row as CSV, folded or not (render/report_json.c; `--ops-csv FILE`). */
int cs__report_ops_csv(const struct cs_report *rep, FILE *out);

/* ---- report views, HTML, Perfetto, progress ---- */

/* views.c: accumulators on the run (cs__views_init after the clocks are set up), the hooks the
 * merge loop and the metrics call, and the model (rep->views, freed by cs__report_free). */
struct cs__views;
int cs__views_init(struct cs__run *run);
void cs__views_free(struct cs__run *run);
void cs__views_event(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k);
/* A complete instance in (cs__views_waits), then each of its members i, which waited
 * in->wait[i] (cs__views_member). */
void cs__views_waits(struct cs__run *run, const struct cs__inst *in);
void cs__views_member(struct cs__run *run, const struct cs__inst *in, int32_t i);
/* A wait of wait_ns by rank at a point-to-point call arriving at t (aligned ns), measured after
 * the main pass (the what-if's CS__FACT_WAIT): into the time-binned heat map. */
void cs__views_wait_at(struct cs__run *run, int rank, int64_t t, double wait_ns);
/* One transfer of `bytes` taking `ns` (complete instance or point-to-point call/request). */
void cs__views_transfer(struct cs__run *run, uint16_t op, uint64_t comm, double bytes, double ns);
void cs__views_build(struct cs__run *run, struct cs_report *rep);
/* Each rank's row of a heat map (CS_VIEW_HEAT_BINS bins) with its bin pairs merged into the
 * first half (the bins double in width); the step views' heat map too. */
void cs__heat_merge_pairs(double *heat, int world);
/* After cs__views_build: the heat map's row of each report rank (rep->ranks order) and the
 * ranks in each row.  0 when there is no heat map. */
int cs__views_heat_rows(const struct cs__run *run, const size_t **row, const int **counts);
void cs__report_views_free(struct cs_report_views *v);

/* views_steps.c: the report views that need steps (wait heat map by step, the representative
 * step's timeline, the verdict in step time).  init after cs__steps_begin; build after
 * cs__steps_report, while the run's step state is still there. */
struct cs__vsteps;
int cs__vsteps_init(struct cs__run *run);
void cs__vsteps_free(struct cs__run *run);
/* Member i of a complete instance in waited in->wait[i] > 0: into its step's heat-map column. */
void cs__vsteps_member(struct cs__run *run, const struct cs__inst *in, int32_t i);
/* The what-if's CS__FACT_WAIT: rank waited wait_ns in step `step` (-1: in no step). */
void cs__vsteps_wait_at(struct cs__run *run, int rank, int step, double wait_ns);
/* Member li of instance in arrived last (beyond the clock uncertainty); the others waited
 * others_ns for it. */
void cs__vsteps_late(struct cs__run *run, const struct cs__inst *in, int32_t li,
                     uint64_t others_ns);
void cs__vsteps_build(struct cs__run *run, struct cs_report *rep);
/* views_steps_gpu.c: the GPU lanes and numbers of rank r's step [begin, end) (aligned ns) on
 * the representative step's row (times in s from begin); nothing on ranks without a GPU
 * timeline.  0, or -1 out of memory. */
int cs__vsteps_gpu_row(struct cs__run *run, int r, int64_t begin, int64_t end, double merge_s,
                       struct cs_report_tl_row *row);
/* views_gpu.c: the report views of ranks with GPU records (their GPU timeline). */
double cs__views_gpu_comm(const struct cs_report_rank *r);
void cs__views_gpu_segments(const struct cs_report_rank *r, double gpu_wait_s, double nccl_wait_s,
                            double *seg);
/* steps_gpu.c: the rank's waiting on its GPU timeline over the whole run (seconds; the step
 * budget's definition, docs/metrics.md "Waiting on a GPU timeline"); NaN without one. */
double cs__sgpu_rank_wait_s(const struct cs__run *run, int rank);
void cs__views_gpu_finding(const struct cs_report *rep, struct cs_report_views *o);
/* The step index rank is in now (during the merge), -1 outside steps or without steps. */
int cs__vsteps_current(const struct cs__run *run, int rank);
/* Steps the reference rank has (known after cs__steps_begin), -1 when the run has no steps. */
int cs__vsteps_expected(const struct cs__run *run);
/* The parallelism role of communicator comm ("dp", "tp" ...), NULL unknown. */
const char *cs__vsteps_role(struct cs__run *run, uint64_t comm);

/* report_verdict.c: one finding as a plain sentence (ASCII, no markup); returns buf. */
const char *cs__finding_sentence(const struct cs_report_finding *f, char *buf, size_t n);
/* The verdict section of the text report. */
void cs__report_text_verdict(const struct cs_report *rep, FILE *out);
/* The verdict's sentence for wire warning i ("On the wire: ...") in buf, or NULL when that
 * warning is about the capture rather than the job's traffic (it stays in the wire section). */
#define CS__WIRE_SENTENCE 1100
const char *cs__wire_verdict_sentence(const struct cs_report *rep, size_t i, char *buf, size_t n);

/* report_html.c: the self-contained HTML report.  Returns 0 or CS_EIO. */
int cs__report_html(const struct cs_report *rep, FILE *out);
/* Its helpers for the sections in other files: s as HTML text; a number with fmt, or an en dash
 * when it has no value; the series colours. */
void cs__html_esc(FILE *f, const char *s);
void cs__html_num(FILE *f, const char *fmt, double v);
/* A table cell of text s, or of a number with fmt (an en dash when it has no value). */
void cs__html_td(FILE *f, const char *s);
void cs__html_td_num(FILE *f, const char *fmt, double v);
#define CS__HTML_PALETTE 10
extern const char *const cs__html_palette[CS__HTML_PALETTE];
/* report_html_wire.c: the wire section (rep->wire), or why there is none; its body for a wire
 * report w. */
void cs__report_wire_html(const struct cs_report *rep, FILE *f);
struct cs_wire_report;
void cs__report_wire_body(const struct cs_wire_report *w, FILE *f);

/* report_perfetto.c: the Chrome trace-event export, a sink on the merged stream. */
struct cs__perfetto;
/* "0-3,8,10-11" into sel[world] (sel may be NULL when world is 0: a syntax check).  Returns 0,
 * or -1 with a sentence in err. */
int cs__perfetto_parse_ranks(const char *spec, unsigned char *sel, int world, char *err,
                             size_t errlen);
/* Writes the header and process names, warns on stderr when the file will exceed 256 MB.
 * Returns 0, or CS_ENOMEM (a problem is recorded and nothing is exported). */
int cs__perfetto_begin(struct cs__run *run);
void cs__perfetto_event(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k,
                        int64_t tb, int64_t te);
/* Closes open async slices and the JSON; returns 0 or CS_EIO. */
int cs__perfetto_finish(struct cs__run *run);

/* progress.c: "analysing: 42% (N of M events)" on run->progress_out, rewritten in place. */
void cs__progress(struct cs__run *run, uint64_t done, int last);

/* Everything cs__analyze_dir can be asked for besides the report. */
struct cs__analyze_opts {
    FILE *events_out;
    const struct cs_perfetto_opts *perfetto;
    FILE *progress_out;
    int timeline; /* the HTML report will be written: build the step timeline it draws */
    int hung;     /* --hung: the live job is stuck; diagnose it */
    const struct cs_flops_opts *flops; /* --flops-per-step ...: the MFU section (flops.c) */
};
/* Load RUN_DIR into run with the options set (the events CSV's header written); 0 or a CS_E*
 * code (message in err).  The load half of cs__analyze_dir_opts. */
int cs__analyze_load(const char *dir, struct cs__run *run, char *err, size_t errlen,
                     const struct cs__analyze_opts *o);
/* cs__analyze_dir with options; err also gets the Perfetto export's usage errors
 * (CS_EUSAGE). */
int cs__analyze_dir_opts(const char *dir, struct cs__run *run, struct cs_report *rep, char *err,
                         size_t errlen, const struct cs__analyze_opts *o);

#endif
