/*
 * The totals block of a ring-mode trace (CS_FLAG_RING, CS_BLOCK_TOTALS): whole-run aggregates of
 * the events that are no longer in the file.  Documented in docs/trace-format.md.
 *
 * A ring-mode trace claims one totals block (CS_TOTALS_SPAN blocks) when it opens.  When the trace
 * reaches its cap, the collector reuses the oldest sealed event block: it first folds that
 * block's events into the totals, one row per (op, communicator, message-size bucket), then
 * zeroes the block and hands it to the thread that needs one.  So every event of the run is
 * either in a kept event block or in the totals, never in both, also in the file of a rank that
 * was killed:
 *
 *   1. the new values of every row the fold changes are written to the journal, with the block
 *      folded (index, thread, seq) and the new head counters; then journal_seq is stored;
 *   2. the rows and the head counters are overwritten with the journal's values;
 *   3. the block's magic is cleared and the block zeroed;
 *   4. journal_seq is cleared.
 *
 * A reader that finds journal_seq != 0 redoes step 2 from the journal (the values are absolute, so
 * redoing is harmless) and skips the named block if it still holds that thread's block of that
 * seq; a block with magic 0 that is not all zero is one being zeroed (step 3).
 *
 * Layout after the block header (offsets from the start of the block):
 *   [64, 192)                  struct cs_totals_head
 *   [192, 192 + 255 * 80)      journal: CS_EVENTS_PER_BLOCK x struct cs_totals_journal
 *   [CS_TOTALS_ROWS_OFF, end)  rows: cap_rows x struct cs_total_row, the first nrows in use
 */
#ifndef COMMSCOPE_TOTALS_H
#define COMMSCOPE_TOTALS_H

#include <stdint.h>

#include "commscope/ops.h"
#include "commscope/trace.h"

#define CS_TOTALS_SPAN 4u
/* The row of everything that found no row of its own (the table was full). */
#define CS_TOTAL_OP_OTHER 0xffffu
/* cs_total_row.size when the row's calls had different sizes. */
#define CS_TOTAL_MIXED UINT64_MAX

struct cs_totals_head {
    uint64_t events;  /* events folded */
    uint64_t blocks;  /* event blocks folded */
    uint64_t t_first; /* earliest t_begin of a folded event (local clock, ns); 0 none */
    uint64_t t_last;  /* latest t_end of a folded event; 0 none */
    uint32_t nrows;   /* rows in use */
    uint32_t cap_rows;
    uint64_t folds; /* folds done (journal_seq of the last) */
    /* The journal (valid while journal_seq != 0): the fold journal_seq of block journal_block
     * (thread journal_thread, seq journal_bseq), its journal_n row entries, and the head's
     * counters after it. */
    uint64_t journal_seq;
    uint64_t journal_block, journal_bseq;
    uint32_t journal_thread, journal_n;
    uint64_t j_events, j_blocks, j_t_first, j_t_last;
    uint32_t j_nrows, pad;
    uint8_t reserved[8];
};

struct cs_total_row {
    uint16_t op;    /* cs_op id, or CS_TOTAL_OP_OTHER */
    uint8_t bucket; /* message-size bucket: cs_total_bucket(bytes) */
    uint8_t pad[5];
    uint64_t comm;       /* communicator id as in the events (0 none; NVTX records: 0) */
    uint64_t size;       /* the bytes of every call of the row, CS_TOTAL_MIXED if they differ */
    uint64_t calls;      /* events */
    uint64_t bytes;      /* sum of bytes */
    uint64_t bytes_recv; /* sum of bytes_recv */
    uint64_t time_ns;    /* sum of t_end - t_begin */
    uint64_t t_first;    /* earliest t_begin */
    uint64_t t_last;     /* latest t_begin */
};

struct cs_totals_journal {
    uint32_t row; /* index of the row */
    uint32_t pad;
    struct cs_total_row val; /* its new contents */
};

CS_STATIC_ASSERT(sizeof(struct cs_totals_head) == 128, "totals head is 128 bytes");
CS_STATIC_ASSERT(sizeof(struct cs_total_row) == 72, "totals row is 72 bytes");
CS_STATIC_ASSERT(sizeof(struct cs_totals_journal) == 80, "journal entry is 80 bytes");

#define CS_TOTALS_HEAD_OFF 64u
#define CS_TOTALS_JOURNAL_OFF 192u
#define CS_TOTALS_ROWS_OFF                                                                         \
    (CS_TOTALS_JOURNAL_OFF + CS_EVENTS_PER_BLOCK * sizeof(struct cs_totals_journal))
#define CS_TOTALS_CAP_ROWS                                                                         \
    ((CS_TOTALS_SPAN * CS_BLOCK_SIZE - CS_TOTALS_ROWS_OFF) / sizeof(struct cs_total_row))

/* Message-size bucket: 0 for 0 bytes, else 1 + floor(log2(bytes)) (1 .. 64). */
static inline unsigned cs_total_bucket(uint64_t bytes)
{
    return bytes ? 64u - (unsigned)__builtin_clzll(bytes) : 0u;
}

/* NVTX records and resource samples hold other things (a name, sampled figures) where
 * communication events hold comm and bytes: they fold as counts only. */
static inline int cs_total_opaque(unsigned op)
{
    return op == CS_OP_NVTX_RANGE_BEGIN || op == CS_OP_NVTX_RANGE_END || op == CS_OP_NVTX_MARK ||
           op == CS_OP_SAMPLE_PROC || op == CS_OP_SAMPLE_NIC || op == CS_OP_SAMPLE_GPU;
}

/* The row key of an event: its op, its communicator (0 for NVTX records and samples, whose fields
 * hold other things) and the bucket of its bytes. */
static inline void cs_total_key(const struct cs_event *ev, uint64_t *comm, unsigned *bucket,
                                uint64_t *bytes)
{
    int opaque = cs_total_opaque(ev->op);
    *comm = opaque ? 0 : ev->comm;
    *bytes = opaque ? 0 : ev->bytes;
    *bucket = cs_total_bucket(*bytes);
}

/* Fold one event into a row whose key it has (calls == 0: a new row). */
static inline void cs_total_add(struct cs_total_row *w, const struct cs_event *ev)
{
    uint64_t comm, bytes;
    unsigned bucket;
    cs_total_key(ev, &comm, &bucket, &bytes);
    if (w->calls == 0) {
        w->size = bytes;
        w->t_first = ev->t_begin;
        w->t_last = ev->t_begin;
    } else if (w->size != bytes) {
        w->size = CS_TOTAL_MIXED;
    }
    w->calls++;
    w->bytes += bytes;
    w->bytes_recv += cs_total_opaque(ev->op) ? 0 : ev->bytes_recv;
    w->time_ns += ev->t_end >= ev->t_begin ? ev->t_end - ev->t_begin : 0;
    if (ev->t_begin < w->t_first)
        w->t_first = ev->t_begin;
    if (ev->t_begin > w->t_last)
        w->t_last = ev->t_begin;
}

#endif
