/*
 * Matching: collective instances (communicator id, sequence number; the communicators are the
 * run's table, core/comms.c) collected from every member as the merged event stream goes by.  An
 * instance is handed to the metrics once every member's end is known (complete), or once every
 * member still missing can send nothing more (incomplete: a rank is missing or died).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "passes.h"

/* The home slot of communicator id in a rank's cache: a multiplicative hash of both halves
 * (split communicators' ids differ in the creator's rank, in the high half). */
_Static_assert(CS__CC == 16, "cc_home takes 4 bits");
static inline size_t cc_home(uint64_t id)
{
    return (size_t)(((id ^ (id >> 32)) * 0x9e3779b97f4a7c15ull) >> 60);
}

/* comm_of's miss: the entry further along the probe, or a new one, is moved to its home slot.
 * Entries are never removed, so a probe's slots up to the first free one are all taken, and an
 * entry moved further along that run stays on its own probe. */
static __attribute__((noinline)) const struct cs__rank_comm *comm_miss(struct cs__run *run,
                                                                       int rank, uint64_t id)
{
    struct cs__rank_comm *cc = run->ranks[rank].cc;
    size_t home = cc_home(id), j = home;
    struct cs__rank_comm e;
    for (;;) {
        j = (j + 1) & (CS__CC - 1);
        if (j == home || !cc[j].c)
            break;
        if (cc[j].id == id)
            goto found;
    }
    e.c = (struct cs__comm *)cs__comm_get(run, id);
    if (!e.c)
        return NULL;
    e.id = id;
    e.idx = cs__comm_rank(run, e.c, rank);
    if (j == home || !cc[home].c) { /* full, or the home slot free: the entry goes there */
        cc[home] = e;
        return &cc[home];
    }
    cc[j] = e;
found:
    e = cc[j];
    cc[j] = cc[home];
    cc[home] = e;
    return &cc[home];
}

/*
 * The communicator with id `id` and world rank `rank`'s rank in it (idx -1: not a member), from
 * the rank's cache of the communicators it used: both answers are fixed once found.  NULL:
 * unknown communicator.
 */
static inline const struct cs__rank_comm *comm_of(struct cs__run *run, int rank, uint64_t id)
{
    const struct cs__rank_comm *e = &run->ranks[rank].cc[cc_home(id)];
    if (e->id == id && e->c)
        return e;
    return comm_miss(run, rank, id);
}

static struct cs__inst *inst_new(struct cs__run *run, struct cs__comm *c, uint64_t comm,
                                 uint32_t seq, uint16_t op, size_t row)
{
    size_t n = (size_t)c->size;
    /* Instances of one communicator all have its size, so closed ones are reused from its spare
     * list rather than freed: no allocation per instance once the open window is reached, and
     * memory stays at the most instances that were ever open at once.  Only the states need
     * clearing: a member's times and size are written when its state bit is set, and only
     * instances with every bit set are read. */
    struct cs__inst *in = c->spare;
    if (in) {
        c->spare = in->next;
    } else {
        in = malloc(sizeof(struct cs__inst) + n * (4 * sizeof(int64_t) + 1));
        if (!in)
            return NULL;
        in->arr = (int64_t *)(in + 1);
        in->end = in->arr + n;
        in->size = (uint64_t *)(in->end + n);
        in->wait = (int64_t *)(in->size + n);
        in->state = (unsigned char *)(in->wait + n);
        in->c = c;
        in->n = c->size;
        in->members = c->members;
    }
    memset(in->state, 0, n);
    in->comm = comm;
    in->seq = seq;
    in->op = op;
    in->pat = (unsigned char)cs_op_info(op)->pattern;
    in->row = row;
    in->mixed = 0;
    in->edge = 0;
    in->root = -1;
    in->ended = 0;
    in->dead_unended = 0;
    /* A member without a trace, or not known at all (an incomplete NCCL communicator), will
     * never arrive. */
    for (size_t i = 0; (run->ndead || c->incomplete) && i < n; i++)
        in->dead_unended += c->members[i] < 0 || run->ranks[c->members[i]].dead;
    return in;
}

/* The open instance (c, seq) not in its ring slot: from run->open (moved into the slot when
 * that is free now), or a new one.  NULL: out of memory (the event counted unmatched). */
static __attribute__((noinline)) struct cs__inst *inst_open(struct cs__run *run, struct cs__comm *c,
                                                            const struct cs_event *ev, size_t row)
{
    struct cs__inst **slot = &c->ring[ev->seq & (CS__RING - 1)];
    if (run->match.open.n) {
        uint64_t *v = cs__map_get(&run->match.open, ev->comm, ev->seq);
        if (v) {
            struct cs__inst *in = (void *)(uintptr_t)*v;
            if (!*slot) {
                cs__map_del_at(&run->match.open, v);
                *slot = in;
                c->nring++;
                run->match.nring++;
            }
            return in;
        }
    }
    struct cs__inst *in = inst_new(run, c, ev->comm, ev->seq, ev->op, row);
    if (!in) {
        run->unmatched_events++;
        return NULL;
    }
    if (!*slot) {
        *slot = in;
        c->nring++;
        run->match.nring++;
        return in;
    }
    uint64_t *v = cs__map_put(&run->match.open, ev->comm, ev->seq, NULL);
    if (!v) {
        in->next = c->spare;
        c->spare = in;
        run->unmatched_events++;
        return NULL;
    }
    *v = (uint64_t)(uintptr_t)in;
    return in;
}

/* The open instance (c, seq), NULL none. */
static inline struct cs__inst *inst_find(struct cs__run *run, struct cs__comm *c, uint32_t seq)
{
    struct cs__inst *in = c->ring[seq & (CS__RING - 1)];
    if (in && in->seq == seq)
        return in;
    if (!run->match.open.n)
        return NULL;
    uint64_t *v = cs__map_get(&run->match.open, c->id, seq);
    return v ? (void *)(uintptr_t)*v : NULL;
}

/* With ring-mode windows: the latest seq each member arrived at (for edge_of). */
static __attribute__((noinline)) void note_seq(struct cs__comm *c, int32_t idx, uint32_t seq)
{
    if (!c->last_seq && !(c->last_seq = calloc((size_t)c->size, sizeof *c->last_seq)))
        return;
    if (seq + 1 > c->last_seq[idx])
        c->last_seq[idx] = seq + 1;
}

/* An instance left open at the end whose every missing member arrived at a later instance of the
 * communicator: their calls of this one lie before their windows (folded into the totals), so it
 * is cut by the window's start, not incomplete.  (A member stuck before it, in a hung job, never
 * arrives later.) */
static int edge_of(const struct cs__inst *in)
{
    const uint32_t *last = in->c->last_seq;
    int missing = 0;
    for (int32_t i = 0; i < in->n; i++) {
        if (in->state[i] & 1)
            continue;
        if (!last || last[i] <= in->seq + 1)
            return 0;
        missing++;
    }
    return missing > 0;
}

/* Hand the instance to the metrics and keep it for reuse.  Returns 1 (coll_fast's "done"). */
static __attribute__((noinline)) int inst_close(struct cs__run *run, struct cs__inst *in,
                                                int complete)
{
    struct cs__inst **slot = &in->c->ring[in->seq & (CS__RING - 1)];
    if (*slot == in) {
        *slot = NULL;
        in->c->nring--;
        run->match.nring--;
    } else {
        cs__map_del(&run->match.open, in->comm, in->seq);
    }
    in->edge = !complete && run->windows && edge_of(in);
    cs__analyze_instance(run, in, complete);
    in->next = in->c->spare;
    in->c->spare = in;
    return 1;
}

/* Close the instance when every member has ended (complete) or every member that has not can
 * send nothing more (incomplete). */
static inline void inst_check(struct cs__run *run, struct cs__inst *in)
{
    if (in->ended + in->dead_unended >= in->n)
        inst_close(run, in, in->ended == in->n);
}

/* A member arrives again at an instance it is in: on a communicator of ncclCommInitAll (GPU
 * records) this rank is several members, which take its records of one instance in turn (which
 * device is which member is not kept); else the sequence numbers are broken.  The member's
 * index, or -1 (the instance is marked mixed and the event counted unmatched). */
static __attribute__((noinline)) int32_t member_again(struct cs__run *run, struct cs__inst *in,
                                                      int rank)
{
    for (int32_t j = 0; in->c->multi && j < in->n; j++)
        if (in->members[j] == rank && !(in->state[j] & 1))
            return j;
    in->mixed = 1;
    run->unmatched_events++;
    return -1;
}

/* A non-blocking collective's request (member idx of in, which arrived at in->arr[idx]), ended
 * by its CS_KIND_DONE event. */
static __attribute__((noinline)) void icoll_request(struct cs__run *run, int rank,
                                                    const struct cs_event *ev,
                                                    const struct cs__inst *in, int32_t idx,
                                                    size_t row)
{
    struct cs__pending *p = cs__rtab_put(&run->match.preq, sizeof *p, rank, ev->request);
    if (!p)
        return;
    *p = (struct cs__pending){.key = p->key,
                              .is_coll = 1,
                              .op = ev->op,
                              .seq = ev->seq,
                              .idx = idx,
                              .c = in->c,
                              .t_begin = in->arr[idx],
                              .bytes = ev->bytes,
                              .row = row};
}

/* Member idx's arrival at tb and its size (of ev); an op other than the instance's makes it
 * mixed. */
static inline void record_arrival(struct cs__inst *in, int32_t idx, const struct cs_event *ev,
                                  int64_t tb)
{
    if (ev->op != in->op)
        in->mixed = 1;
    in->arr[idx] = tb;
    in->size[idx] = ev->bytes > ev->bytes_recv ? ev->bytes : ev->bytes_recv;
}

/* A member's collective call (blocking, or the start of a non-blocking one): every case. */
static __attribute__((noinline)) void coll_slow(struct cs__run *run, int rank,
                                                const struct cs_event *ev, enum cs_op_kind k,
                                                size_t row, int64_t tb, int64_t te)
{
    const struct cs__rank_comm *e = comm_of(run, rank, ev->comm);
    if (!e || e->idx < 0) {
        run->unmatched_events++;
        return;
    }
    struct cs__comm *c = e->c;
    int32_t idx = e->idx;
    struct cs__inst *in = c->ring[ev->seq & (CS__RING - 1)];
    if (!in || in->seq != ev->seq) {
        in = inst_open(run, c, ev, row);
        if (!in)
            return;
    }
    if (in->state[idx] & 1) {
        idx = member_again(run, in, rank);
        if (idx < 0)
            return;
    }
    record_arrival(in, idx, ev, tb);
    if (__builtin_expect(run->windows, 0))
        note_seq(c, idx, ev->seq);
    /* The root by flag, or from a member's peer (instances of other ops are mixed: never read). */
    if (ev->flags & CS_EV_ROOT)
        in->root = idx;
    else if (in->root < 0 && ev->peer >= 0 && in->pat != CS_PAT_NXN)
        in->root = cs__comm_rank(run, c, ev->peer);
    if (k != CS_KIND_COLL) {
        in->state[idx] |= 1;
        icoll_request(run, rank, ev, in, idx, row);
        return;
    }
    in->end[idx] = te;
    in->state[idx] |= 3;
    in->ended++;
    inst_check(run, in);
}

/* The open instance of a member's collective call in the usual case: the communicator in the
 * rank's cache, the instance in its ring, the member new to it and its root known or not needed;
 * its arrival and size recorded.  NULL: another case, nothing changed (coll_slow takes it). */
static inline __attribute__((always_inline)) struct cs__inst *
coll_arrive(struct cs__run *run, int rank, const struct cs_event *ev, int64_t tb, int32_t *idxo)
{
    const struct cs__rank_comm *e = &run->ranks[rank].cc[cc_home(ev->comm)];
    struct cs__comm *c = e->c;
    int32_t idx = e->idx;
    if (e->id != ev->comm || !c || idx < 0)
        return NULL;
    struct cs__inst *in = c->ring[ev->seq & (CS__RING - 1)];
    if (!in || in->seq != ev->seq || (in->state[idx] & 1) ||
        (!(ev->flags & CS_EV_ROOT) && in->root < 0 && ev->peer >= 0 && in->pat != CS_PAT_NXN))
        return NULL;
    record_arrival(in, idx, ev, tb);
    if (__builtin_expect(run->windows, 0))
        note_seq(c, idx, ev->seq);
    if (ev->flags & CS_EV_ROOT)
        in->root = idx;
    *idxo = idx;
    return in;
}

/* A blocking collective through coll_arrive.  1: done; 0: coll_slow's case.  Few arguments and
 * only a tail call, so that it needs no stack frame and no saved registers (the starts of
 * non-blocking ones, fewer, go to coll_slow: another such function made cs__match_event too
 * large for the link-time optimiser to inline into the merge loop). */
static __attribute__((noinline)) int coll_fast(struct cs__run *run, int rank,
                                               const struct cs_event *ev, int64_t tb, int64_t te)
{
    int32_t idx;
    struct cs__inst *in = coll_arrive(run, rank, ev, tb, &idx);
    if (!in)
        return 0;
    in->end[idx] = te;
    in->state[idx] |= 3;
    if (++in->ended + in->dead_unended >= in->n)
        return inst_close(run, in, in->ended == in->n);
    return 1;
}

/* A point-to-point request, ended by its CS_KIND_DONE event. */
static __attribute__((noinline)) void p2p_request(struct cs__run *run, int rank,
                                                  const struct cs_event *ev, size_t row, int64_t tb)
{
    struct cs__pending *p = cs__rtab_put(&run->match.preq, sizeof *p, rank, ev->request);
    if (!p)
        return;
    uint64_t b = ev->op == CS_OP_IRECV ? ev->bytes_recv : ev->bytes;
    *p = (struct cs__pending){.key = p->key,
                              .op = ev->op,
                              .t_begin = tb,
                              .bytes = b,
                              .row = row,
                              .scope = (signed char)cs__peer_scope(run, rank, ev->peer)};
}

/* A request completed. */
static __attribute__((noinline)) void request_done(struct cs__run *run, int rank,
                                                   const struct cs_event *ev, int64_t te)
{
    struct cs__pending *p = cs__rtab_get(&run->match.preq, sizeof *p, rank, ev->request);
    if (!p)
        return;
    if (p->is_coll) {
        struct cs__inst *in = inst_find(run, p->c, p->seq);
        if (in && !(in->state[p->idx] & 2)) {
            in->end[p->idx] = te;
            in->state[p->idx] |= 2;
            in->ended++;
            cs__rtab_del(&run->match.preq, sizeof *p, p);
            inst_check(run, in);
            return;
        }
    } else if (!(ev->flags & CS_EV_CANCELLED)) {
        cs__analyze_fact(run, &(struct cs__fact){.kind = CS__FACT_REQUEST, .req = p, .t = te});
    }
    cs__rtab_del(&run->match.preq, sizeof *p, p);
}

static inline __attribute__((always_inline)) void match_event(struct cs__run *run, int rank,
                                                              const struct cs_event *ev,
                                                              enum cs_op_kind k, size_t row,
                                                              int64_t tb, int64_t te)
{
    if (k == CS_KIND_COLL) {
        if (!coll_fast(run, rank, ev, tb, te))
            coll_slow(run, rank, ev, k, row, tb, te);
    } else if (k == CS_KIND_ICOLL) {
        coll_slow(run, rank, ev, k, row, tb, te);
    } else if (k == CS_KIND_IP2P)
        p2p_request(run, rank, ev, row, tb);
    else if (k == CS_KIND_DONE)
        request_done(run, rank, ev, te);
}

/* The merge loop's entry: one call site, so that the link-time optimiser inlines it there. */
void cs__match_event(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k,
                     size_t row, int64_t tb, int64_t te)
{
    match_event(run, rank, ev, k, row, tb, te);
}

/* Derived events (the driver's cs__analyze_derived) enter here, not through cs__match_event. */
__attribute__((noinline)) void cs__match_derived(struct cs__run *run, int rank,
                                                 const struct cs_event *ev, enum cs_op_kind k,
                                                 size_t row, int64_t tb, int64_t te)
{
    match_event(run, rank, ev, k, row, tb, te);
}

/* How many instances are open (in the communicators' rings and in run->open). */
static size_t open_count(const struct cs__run *run)
{
    return run->match.open.n + run->match.nring;
}

/* Every open instance into out (room for open_count of them); returns how many. */
static size_t open_list(const struct cs__run *run, struct cs__inst **out)
{
    size_t n = 0;
    for (size_t i = 0; i < run->ncomms && n < run->match.nring; i++)
        for (int s = 0; s < CS__RING && run->comms[i]->nring; s++)
            if (run->comms[i]->ring[s])
                out[n++] = run->comms[i]->ring[s];
    for (size_t i = 0; i < run->match.open.cap; i++)
        if (run->match.open.slot[i].used)
            out[n++] = (void *)(uintptr_t)run->match.open.slot[i].v;
    return n;
}

void cs__match_rank_done(struct cs__run *run, int rank)
{
    run->ndead += !run->ranks[rank].dead;
    run->ranks[rank].dead = 1;
    /* Instances still waiting for this rank can now only end incomplete. */
    struct cs__inst **hit = malloc((open_count(run) + 1) * sizeof *hit);
    if (!hit)
        return;
    size_t n = open_list(run, hit), m = 0;
    for (size_t i = 0; i < n; i++) {
        struct cs__inst *in = hit[i];
        int32_t idx = cs__comm_rank(run, in->c, rank);
        if (idx >= 0 && !(in->state[idx] & 2)) {
            in->dead_unended++;
            hit[m++] = in;
        }
    }
    for (size_t i = 0; i < m; i++)
        inst_check(run, hit[i]);
    free(hit);
}

void cs__match_finish(struct cs__run *run)
{
    struct cs__inst **left = malloc((open_count(run) + 1) * sizeof *left);
    if (left) {
        size_t n = open_list(run, left);
        for (size_t i = 0; i < n; i++)
            inst_close(run, left[i], 0);
        free(left);
    }
    /* Requests never completed are forgotten with the table. */
    cs__rtab_free(&run->match.preq);
    if (run->unmatched_events)
        cs__problem(run,
                    "%" PRIu64 " collective events could not be matched (communicator without a"
                    " record, rank not a member, or a sequence number seen twice)",
                    run->unmatched_events);
    if (run->incomplete)
        cs__problem(run,
                    "%" PRIu64 " collective instances incomplete (a member's events are"
                    " missing); they are left out of waits and bandwidths",
                    run->incomplete);
}

void cs__match_free(struct cs__run *run)
{
    struct cs__match *M = &run->match;
    for (size_t i = 0; i < M->open.cap; i++)
        if (M->open.slot[i].used)
            free((void *)(uintptr_t)M->open.slot[i].v);
    cs__map_free(&M->open);
    cs__rtab_free(&M->preq);
}
