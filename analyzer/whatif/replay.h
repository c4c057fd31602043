/* The what-if replay's state and the functions its files share (whatif.c the driver, window.c
 * the window reader, pair.c point-to-point pairing and the waits carried across windows,
 * replay.c resolve and the replay of the scenarios; docs/architecture.md). */
#ifndef COMMSCOPE_ANALYZER_REPLAY_H
#define COMMSCOPE_ANALYZER_REPLAY_H

#include <math.h>
#include <stdint.h>

#include "lanes.h"
#include "steps_internal.h"
#include "wtab.h"

/* The items of a window: all ranks' in one array (P->it), rank by rank in program order, each
 * rank's in P->it[w->off .. w->off + w->n). */
struct item {
    struct lanes A;   /* replayed arrival in each scenario, once arr is set */
    double a, e;      /* measured, ns after the run's origin */
    double gap;       /* a minus the previous item's e */
    double x;         /* measured time after its dependencies were met */
    double bytes;     /* blocking send / receive: its message's bytes (received: bytes_recv) */
    int32_t inst;     /* collective instance in the window, -1 none */
    int32_t pg;       /* point-to-point partner item (in P->it) waited for, -1 none */
    int32_t dn, doff; /* completion call: its dependencies P->dep[doff .. doff + dn) */
    int32_t idx;      /* comm rank in the instance */
    uint16_t op;
    unsigned char comm; /* a communication call */
    unsigned char init; /* non-blocking collective initiation (arrives, waits for nothing) */
    unsigned char nbp;  /* MPI_Isend / MPI_Irecv: linked to its partner pg, waits for nothing;
                         * the completion call of its request waits instead */
    unsigned char arr;  /* replayed arrival known (the item is at or before its rank's cursor) */
    unsigned char wk;   /* what the replay waits for (enum wait): set with the fields it reads */
    signed char bnd;    /* 1 starts a step, -1 ends one, 2 MPI_Finalize */
    unsigned char out;  /* its gap is outside a step (after an end marker): never scaled */
    unsigned char dim;  /* point-to-point items: the budget's dimension of their communicator */
    unsigned char xp;   /* non-blocking receive paired before it completed: its transfer is
                         * counted not measured until then (p2p_transfer) */
    double done;        /* non-blocking receive: when it completed (the end of the call that
                         * completed it, or of MPI_Sendrecv), -1 not yet */
};

struct wrank {
    size_t off, n;               /* its items in P->it */
    const struct cs_event *peek; /* the next window's first event */
    /* the events cs_reader_next_batch() gave that are not read yet: bp .. be */
    const struct cs_event *bp, *be;
    int done;    /* stream exhausted */
    int started; /* first event seen (prev_e valid) */
    double prev_e;
    uint64_t occ;
    double comp; /* compute of the window's step: its gaps after the first item, in order, +
                  * next_gap, up to an end marker */
    double next_gap, f_cur, f_prev;
    int ended; /* an end marker was read in the window (from its second item on) */
    struct lanes fv_cur, fv_prev; /* {1, f, 1, 1}: the gap factor in each scenario */
    int fin_seen;
    /* per scenario, carried across windows */
    struct lanes R; /* the replayed end of the rank's last finished item */
    double open_at[SC_N];
    int open_step[SC_N];
    /* The scenarios are replayed together: which item can finish when depends on which
     * arrivals are known, never on their values, so every scenario visits the items in the same
     * order (and cuts the same cycles), each with its own numbers. */
    size_t cur; /* cursor of the replay (in P->it): the rank's items before it have finished */
    /* the item at the cursor has its dependencies cut (a cycle); only the item at the cursor can
     * be, so this replaces a per-item flag */
    int cur_forced;
    struct cs__clock_memo clkm; /* cs__clock_map_near over the rank's stream */
    /* the rank's comm rank in its last communicators (run->my_rank lookups; INT32_MIN none) */
    struct wcc {
        uint64_t id;
        int32_t idx;
        int32_t dir; /* its P->dir, -1 none (out of memory) */
        int ok;
    } cc[4];
};

/* What an item waits for in the replay, from the fields it depends on (init, nbp, dn, inst, pg
 * and the instance's pattern), set wherever those change, so that the replay tests one byte: */
enum wait {
    W_NONE, /* nothing: local, init, nbp, or its dependencies were cut */
    W_DEP,  /* a completion call: its dependencies P->dep[doff .. doff + dn) */
    W_INST, /* an instance member waiting for some members (inst_sync) */
    W_ALL,  /* an instance member waiting for all members (NxN, the root of N-to-1; resolve) */
    W_PG,   /* a blocking send or receive: its partner pg's arrival */
};

/* The instances of a communicator in the window by sequence number, in front of P->inst_t: a
 * rank's collectives on it come in sequence, so the window's usually form one run from base. */
struct wdir {
    uint32_t stamp; /* the window it describes (P->stamp); n is 0 for any other */
    uint32_t base;
    int32_t *inst; /* instance of seq base + i (-1 unusable) */
    size_t n, cap;
};

struct winst {
    uint64_t comm, bytes; /* bytes: max over members of max(bytes, bytes_recv) */
    uint16_t op;
    unsigned char pat; /* cs_op_info(op)->pattern */
    int32_t n, root, seen;
    int broken;
    size_t off;     /* its members' items in P->mem */
    double amax;    /* the latest measured arrival of the members read */
    int64_t pa_all; /* the same rounded (resolve) */
    double scale;   /* best-bandwidth factor of its members' x (resolve) */
    /* replay state: members whose replayed arrival is known, and (when all are) the latest of
     * them in each scenario, rounded, which every member waiting for all members syncs at */
    int32_t narr;
    int all_known;
    struct lanes all_max;
};

/* What the window reader needs to know of an op, from one table lookup. */
enum {
    F_GPU = 1 << 0,   /* a GPU record, not a host call */
    F_DONE = 1 << 1,  /* one request completed */
    F_COMM = 1 << 2,  /* a communication call */
    F_COLL = 1 << 3,  /* a collective (blocking or initiation) whose pattern waits */
    F_ICOLL = 1 << 4, /* a non-blocking collective initiation */
    F_SEND = 1 << 5,  /* a blocking send */
    F_RECV = 1 << 6,  /* MPI_Recv */
    F_IP2P = 1 << 7,  /* a non-blocking point-to-point initiation */
    F_SR = 1 << 8,    /* MPI_Sendrecv(_replace) */
    F_WAIT = 1 << 9,  /* a completion call */
    F_BOP = 1 << 10,  /* it can start or end a step (cs__steps_boundary_op) */
    F_FIN = 1 << 11,  /* MPI_Finalize */
};

/* A point-to-point channel of the window (its P->chan_t entry): the j-th send from src to dst
 * with a tag on a communicator matches the j-th receive at dst from src.  v counts the sends
 * (low half) and receives (high half) read so far; the items of the side that is ahead wait in a
 * FIFO (nodes in P->nd, from the slot's head to its tail) for their partners. */
struct wnode {
    int32_t item, next; /* item -1: no longer waiting (paired) */
    uint64_t comm, sd;  /* its channel (for carrying it out of the window) */
    int32_t tag;
    int send;
};

/* Waits for point-to-point partners across step windows (docs/metrics.md, "Time budget per
 * step").  The replay links partners within a window only; the waits are measured over the
 * whole run: a send or receive still waiting for its partner at the end of a window, and a
 * non-blocking one whose request is still open, are carried out of it as a `half`; a
 * completion call with a partner not read yet is a `defer` record, booked once its partners are
 * known (or at the end).  What is carried is what is in flight: memory stays bounded by the
 * open communication, not by the run. */
struct half {
    double a, e;         /* its arrival and end */
    double pa;           /* its partner's arrival, once known */
    int32_t rank, prank; /* its rank, its partner's */
    int32_t rec;         /* the deferred completion waiting for its partner, -1 none */
    int32_t k;           /* its window's step (-1 none) */
    int32_t next;        /* the next of its channel's carried halves, or of the free list */
    unsigned char dim, blocking, known, queued, in_req;
    unsigned char anysrc; /* an MPI_ANY_SOURCE receive: paired at its completion record */
};
struct defer {
    double a, e, s, sp; /* the call's arrival and end, its sync point, its latest partner */
    int32_t rank, late, k, pending; /* late: the rank of that partner (-1 none) */
    int32_t next;                   /* free list */
    unsigned char dim, in_call;
};
/* an Isend / Irecv of the window whose partner was carried: that partner (its pg is -2 - index) */
struct cpart {
    double a;
    int32_t rank;
};
/* a deferred completion (rec) waits for the partner of initiation item `item`, still waiting
 * (within resolve, item <= -2 stands for half -2 - item, a request carried in) */
struct lnk {
    int32_t item, rec;
};

struct replay {
    struct cs__run *run;
    struct cs__steps *S;
    int world;
    int timed; /* the window being replayed is a timed step's: the scenarios change it */
    double origin;
    struct wrank *w;
    struct item *it; /* the window's items */
    size_t nit, capit;
    struct winst *in;
    size_t nin, capin;
    int32_t *mem; /* per instance member: its item, -1 not seen */
    size_t npool, cappool;
    struct wdep {
        int32_t inst, idx;
    } * dep;
    size_t ndep, capdep;
    struct wnode *nd;
    size_t nnd, capnd;
    int32_t *cd; /* the window's completion calls (items with dependencies) */
    size_t ncd, capcd;
    /* per window: (comm, seq) -> instance + 1 (0 unusable), (comm, tag, src << 32 | dst) ->
     * channel, (rank, request) -> what completes it + 1; for the whole replay: (comm) ->
     * size + 1 | (class + 2) << 32 (0: not asked yet), (op | (class + 1) << 16, bytes) ->
     * S->best's value (0 none) */
    struct wtab inst_t, chan_t, req_t, comm_t, best_t, dir_t;
    struct wdir *dir; /* by communicator (P->dir_t: comm -> index) */
    size_t ndir, capdir;
    uint32_t stamp; /* the window's number, for struct wdir */
    int first, end; /* timed steps [first, end) */
    int k;          /* the window being read: its step, -1 before the first */
    int nread;      /* ranks whose window is read (ranks 0 .. nread - 1; the others' w.off
                     * are the last window's) */
    double *sum[SC_N];
    int *cnt;
    double *med;    /* [world + 1]: the ranks' compute, for the median */
    double *prun;   /* [world] the same over every window, or NULL */
    double *pcall;  /* [world] of prun, the part inside point-to-point calls (blocking sends and
                     * receives, MPI_Sendrecv); the rest is inside wait/test calls */
    double *pcause; /* [world] the waits of prun by the partner waited for (the latest one) */
    uint64_t cut, forced;
    uint64_t pcut; /* point-to-point pairs (and requests) across windows: not linked */
    /* waits across windows (struct half): halves, deferred completions (free lists), the
     * carried channels (key as chan_t -> FIFO of halves head .. tail, v: 1 sends wait, 0
     * receives), the carried requests ((rank, request) -> half + 1), and per window the partners
     * of items paired with carried halves, the deferred completions' links and item -> half + 1 */
    struct half *hv;
    size_t nhv, caphv;
    int32_t hfree;
    struct defer *dv;
    size_t ndv, capdv;
    int32_t dfree;
    struct wtab cch_t, creq_t, gh_t;
    size_t ncch, ncreq;
    size_t nreq_p2p; /* Isend / Irecv requests put into req_t in the window, less those completed
                      * (at least those still open: cs__wi_carry() looks for them when not 0) */
    struct cpart *cpa;
    size_t ncpa, capcpa;
    struct lnk *lk;
    size_t nlk, caplk;
    double *pwb;  /* the budget's p2p_wait (timed steps), or NULL */
    int replay;   /* replaying; else only the waits are measured (no timed steps) */
    size_t cap_n; /* without steps: a rank's items in one window at most (0: windows are steps) */
    int oom;      /* out of memory carrying: the waits are incomplete */
    unsigned char kind[CS_OP_MAX], pat[CS_OP_MAX]; /* cs_op_info by table */
    uint16_t fl[CS_OP_MAX];                        /* op_flags by table */
};

/* Non-blocking point-to-point (docs/metrics.md, "What-if"): an MPI_Isend / MPI_Irecv with a
 * known peer and tag is matched with its partner (blocking or not) like a blocking one, by
 * (communicator, tag, source, destination) in order; the completion call of its request then
 * waits for the partner's arrival. */
#define DEP_P2P (-2)   /* struct wdep.inst of such a dependency; idx = the initiation's item */
#define DEP_CARRY (-3) /* a request carried from an earlier window; idx = its half */
/* req_t: an MPI_ANY_SOURCE receive, paired at its completion record */
#define ANYSRC_BIT ((uint64_t)1 << 62)

/* whatif.c: what the window reader needs to know of op (enum above), from its kind and pattern */
unsigned cs__wi_op_flags(const struct cs__steps *S, unsigned op);

/* window.c: read rank r's events of the next window into P->it (first_window: the events before
 * the first step boundary).  0, or -1 out of memory. */
int cs__wi_read_window(struct replay *P, int r, int first_window);

/* pair.c: point-to-point pairing within a window and the waits carried across windows */
int32_t cs__wi_item_rank(const struct replay *P, int32_t g);
unsigned char cs__wi_p2p_dim(struct replay *P, uint64_t comm);
int cs__wi_carried_match(struct replay *P, struct wslot *cc, int32_t g, int32_t rg);
int cs__wi_link_nbp(struct replay *P, int r, struct item *it, const struct cs_event *ev);
int cs__wi_anysrc_post(struct replay *P, int r, struct item *it, const struct cs_event *ev);
int cs__wi_done_carried(struct replay *P, int r, struct wrank *w, const struct cs_event *ev);
void cs__wi_half_release(struct replay *P, int32_t h);
void cs__wi_defer_done(struct replay *P, int32_t d);
int cs__wi_carry(struct replay *P);

/* replay.c: resolve a window's dependencies, then replay it in every scenario */
void cs__wi_resolve(struct replay *P);
void cs__wi_straggler_factors(struct replay *P, int k);
void cs__wi_replay_window(struct replay *P, int k);
void cs__wi_step_done(struct replay *P, int sc, int k, double from, double to);

static inline uint64_t best_key(uint16_t op, int cls)
{
    return (uint64_t)op | (uint64_t)(uint32_t)(cls + 1) << 16;
}

/* A new item of rank w at the end of the window: measured arrival a and end e, the gap since
 * the previous item's end, x = e - a, no dependency yet.  NULL out of memory. */
static inline struct item *add_item(struct replay *P, struct wrank *w, double a, double e,
                                    uint16_t op, int comm, int bnd)
{
    if (P->nit == P->capit &&
        (P->nit >= INT32_MAX || cs__grow((void **)&P->it, &P->capit, P->nit + 1, sizeof *P->it)))
        return NULL;
    struct item *it = &P->it[P->nit++];
    it->a = a;
    it->e = e;
    it->gap = a - w->prev_e;
    it->x = e - a;
    it->bytes = 0;
    it->inst = it->pg = -1;
    it->dn = 0;
    it->op = op;
    it->comm = (unsigned char)comm;
    it->init = it->nbp = it->arr = it->xp = 0;
    it->done = -1;
    it->wk = W_NONE;
    it->bnd = (signed char)bnd;
    it->out = (unsigned char)w->ended; /* the first item: the last window's end marker */
    if (!w->n++)
        w->ended = 0;
    else if (!w->ended)
        w->comp += it->gap;
    if (bnd == -1)
        w->ended = 1;
    w->prev_e = e;
    return it;
}

/* The first item waiting on window channel c (its side is ahead), taken off it. */
static inline int32_t chan_pop(struct replay *P, struct wslot *c)
{
    int32_t hn = c->head;
    int32_t og = P->nd[hn].item;
    c->head = P->nd[hn].next;
    P->nd[hn].item = -1;
    return og;
}

/* Item g has dependencies (P->cd, for resolve). */
static inline int add_cd(struct replay *P, size_t g)
{
    if (cs__grow((void **)&P->cd, &P->capcd, P->ncd + 1, sizeof *P->cd))
        return -1;
    P->cd[P->ncd++] = (int32_t)g;
    return 0;
}

static inline unsigned flags_of(const struct replay *P, unsigned op)
{
    return op < CS_OP_MAX ? P->fl[op] : cs__wi_op_flags(P->S, op);
}

/* cs__clock_map_near over rank w's stream. */
static inline int64_t map_t(struct wrank *w, const struct cs__clock *c, uint64_t t)
{
    return cs__clock_map_near(&w->clkm, c, t);
}

/* The same for an event's begin and end, which nearly always share the memo's range. */
static inline void map_event(struct wrank *w, const struct cs__clock *c, const struct cs_event *ev,
                             int64_t *a, int64_t *e)
{
    const struct cs__clock_memo *m = &w->clkm;
    uint64_t tb = ev->t_begin, te = ev->t_end;
    if (m->fast && tb >= m->lo && te <= m->hi && tb <= te) { /* both in the memo's range */
        *a = (int64_t)tb + m->off;
        *e = (int64_t)te + m->off;
        return;
    }
    *a = map_t(w, c, tb);
    *e = map_t(w, c, te);
}

#endif
