/*
 * The collector's per-event fast path, inline in the front ends (libcommscope_mpi.so).
 *
 * An intercepted call takes two timestamps and writes one event.  Done through the exported
 * functions cs_now, cs_rec_begin and cs_rec_commit that is four calls through the PLT into
 * libcommscope.so per event; here the common case of each is inlined into the wrapper instead,
 * working on the calling thread's state, which libcommscope.so exports as one initial-exec TLS
 * object (cs_thread_state: one %fs-relative access, no __tls_get_addr).  Everything uncommon
 * (no clock anchor yet or an old one, the test-only clock skew, a full block, a new trace, a
 * slot handed out and not committed) falls back to the exported functions, which own the logic;
 * the inline code only repeats their fast-path tests.
 *
 * libcommscope.so is always loaded at program start (preloaded, or needed by
 * libcommscope_mpi.so), which initial-exec TLS requires; it used it internally before.
 */
#ifndef COMMSCOPE_HOT_H
#define COMMSCOPE_HOT_H

#include <stdint.h>

#include "collector.h"

#define CS_HOT_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* A thread's clock anchor (clock.c): TSC ticks since `tsc` map to `ns` + ticks * mult >> 32. */
struct cs_thread_clock {
    uint64_t tsc;   /* TSC at the anchor */
    uint64_t ns;    /* CLOCK_MONOTONIC at the anchor */
    uint64_t mult;  /* ns per tick << 32 when anchored */
    uint64_t limit; /* ticks after tsc this anchor serves; 0 = no anchor (use cs_now) */
    uint64_t last;  /* last result returned to this thread (results never decrease) */
};

/* A thread's event buffer (buffer.c). */
struct cs_thread_buf {
    struct cs_block_header *blk; /* current block, NULL when none */
    uint32_t used;               /* committed events in blk; CS_EVENTS_PER_BLOCK when none */
    uint32_t generation;         /* trace generation this state belongs to */
    uint32_t ostid;
    uint16_t thread;
    uint8_t begun; /* a slot was handed out and not committed: zero it before reuse */
    uint8_t valid; /* thread index assigned in this generation */
    uint32_t sum;  /* cs_live_step() over the committed events of blk */
    uint64_t seq;  /* next block sequence number of this thread */
};

struct cs_thread_state {
    struct cs_thread_clock clk;
    struct cs_thread_buf buf;
};

/* The calling thread's state.  Zero in a new thread (no anchor, no block, generation 0). */
CS_EXPORT extern __thread struct cs_thread_state cs_thread_state
    __attribute__((tls_model("initial-exec")));

/* Bumped at every trace open, close and fork (never 0 while a trace is open). */
CS_EXPORT extern uint32_t cs_trace_generation;

/* Nonzero while the test-only clock skew applies (then every stamp goes through cs_now). */
CS_EXPORT extern int cs_clock_skew_on;

/* cs_now(), with the common case (a valid anchor, no skew) inline. */
static inline uint64_t cs_hot_now(void)
{
#if defined(__x86_64__)
    struct cs_thread_clock *a = &cs_thread_state.clk;
    uint64_t d = __builtin_ia32_rdtsc() - a->tsc;
    /* Unsigned: a TSC behind the anchor wraps to a huge d and takes the slow path too. */
    if (CS_HOT_UNLIKELY(d >= a->limit || __atomic_load_n(&cs_clock_skew_on, __ATOMIC_RELAXED)))
        return cs_now();
    uint64_t t = a->ns + ((d * a->mult) >> 32); /* d < ~1 ms of ticks: no overflow */
    if (CS_HOT_UNLIKELY(t < a->last))
        return a->last;
    a->last = t;
    return t;
#else
    return cs_now();
#endif
}

static inline struct cs_event *cs__hot_slot(const struct cs_thread_buf *t)
{
    return (struct cs_event *)((char *)t->blk + sizeof(struct cs_block_header)) + t->used;
}

/* cs_rec_begin(), with the common case (room in the current block of the open trace) inline. */
static inline struct cs_event *cs_hot_begin(void)
{
    struct cs_thread_buf *t = &cs_thread_state.buf;
    if (CS_HOT_UNLIKELY(!__atomic_load_n(&cs_active, __ATOMIC_RELAXED) ||
                        t->used >= CS_EVENTS_PER_BLOCK || t->begun ||
                        t->generation != __atomic_load_n(&cs_trace_generation, __ATOMIC_RELAXED)))
        return cs_rec_begin();
    /* Fresh slots are zero already (new file pages), as cs_rec_begin promises. */
    t->begun = 1;
    return cs__hot_slot(t);
}

/* cs_rec_commit(), inline: the same checks, then publish the event (release store). */
static inline void cs_hot_commit(struct cs_event *ev)
{
    struct cs_thread_buf *t = &cs_thread_state.buf;
    /* Ignore anything but the slot this thread was handed in the open trace (NULL, a stale
     * pointer, or a slot begun before the trace was closed, whose block may be unmapped). */
    if (CS_HOT_UNLIKELY(!ev || !t->begun || ev != cs__hot_slot(t) ||
                        t->generation != __atomic_load_n(&cs_trace_generation, __ATOMIC_RELAXED)))
        return;
    t->begun = 0;
    t->used++;
    t->sum = cs_live_step(t->sum, ev);
    /* The block's running check first, then `used` (trace.h): a reader that sees the new count
     * sees the check that covers it. */
    __atomic_store_n((uint64_t *)(void *)&t->blk->live_sum, (uint64_t)t->used << 32 | t->sum,
                     __ATOMIC_RELEASE);
    __atomic_store_n(&t->blk->used, t->used, __ATOMIC_RELEASE);
}

/*
 * An event begun before the real call, so that the trace shows the call while it is in flight:
 * a hung, killed or crashed rank's trace names the call it is in.  The slot after the block's
 * committed events gets what the call is (op, communicator, sequence number, peer, tag, bytes)
 * and then, by cs_hot_entered(), its begin time; t_end stays 0 until the call returns (trace.h,
 * "in-flight record").  No extra work: these are stores the event needs anyway, made earlier.
 */
static inline struct cs_event *cs_hot_enter(uint16_t op, uint64_t comm, uint32_t seq, int32_t peer,
                                            int32_t aux, uint16_t flags, uint64_t bytes)
{
    struct cs_event *ev = cs_hot_begin();
    if (CS_HOT_UNLIKELY(!ev))
        return NULL;
    ev->comm = comm;
    ev->bytes = bytes;
    ev->seq = seq;
    ev->peer = peer;
    ev->op = op;
    ev->flags = flags;
    ev->aux = aux;
    return ev;
}

static inline void cs_hot_entered(struct cs_event *ev, uint64_t t0)
{
    if (ev)
        ev->t_begin = t0;
}

/*
 * The slot of cs_hot_enter() after the call: still this thread's open slot, or a fresh one when
 * something was recorded on this thread during the call (a nested intercepted call took the slot)
 * or the trace changed; NULL when cs_hot_enter() had none (the event was dropped, and counted,
 * then).  The caller then writes every field of the event.
 */
static inline struct cs_event *cs_hot_resume(struct cs_event *ev)
{
    const struct cs_thread_buf *t = &cs_thread_state.buf;
    if (!ev)
        return NULL;
    if (t->begun && ev == cs__hot_slot(t) &&
        t->generation == __atomic_load_n(&cs_trace_generation, __ATOMIC_RELAXED))
        return ev;
    return cs_hot_begin();
}

#endif
