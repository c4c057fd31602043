/*
 * Ring mode (COMMSCOPE_TRACE_MODE=ring, the default): when the trace reaches its cap, recording
 * goes on over the oldest event blocks, so the file keeps the newest events, and what a reused
 * block held is first folded into the whole-run totals of the totals block.  The protocol that
 * keeps every event in exactly one of the two, also when the rank is killed half way, is in
 * include/commscope/totals.h.
 *
 * Reuse is the slow path of the slow path: once per full block (255 events) of a thread that
 * finds the cap reached, under one mutex.  Only sealed event blocks are reused (a thread seals
 * its block last thing before it leaves it; the block a thread fills has no CRC), never the
 * communicator table or the totals.  Rows are found through an index in process memory; the rows,
 * the journal and the head live only in the mapping.
 */
#include <stdlib.h>
#include <string.h>

#include "commscope/totals.h"
#include "front.h"
#include "internal.h"

#define INDEX_SLOTS 2048u /* a power of two above CS_TOTALS_CAP_ROWS */

static struct {
    pthread_mutex_t mu;
    struct cs_block_header *blk; /* the totals block, NULL none */
    uint64_t first;              /* its index */
    uint64_t cursor;             /* next block to consider for reuse */
    int32_t index[INDEX_SLOTS];  /* row + 1 per key hash, 0 empty */
    /* The fold being built: its journal entries (in the totals block), per row its entry + 1. */
    uint32_t nj;
    int32_t pending[CS_TOTALS_CAP_ROWS];
} R = {.mu = PTHREAD_MUTEX_INITIALIZER};

static struct cs_totals_head *head(void)
{
    return (struct cs_totals_head *)((char *)R.blk + CS_TOTALS_HEAD_OFF);
}

static struct cs_totals_journal *journal(void)
{
    return (struct cs_totals_journal *)((char *)R.blk + CS_TOTALS_JOURNAL_OFF);
}

static struct cs_total_row *rows(void)
{
    return (struct cs_total_row *)((char *)R.blk + CS_TOTALS_ROWS_OFF);
}

static uint32_t key_hash(unsigned op, uint64_t comm, unsigned bucket)
{
    uint64_t x = (comm * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)op << 8 | bucket);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    return (uint32_t)(x >> 40) & (INDEX_SLOTS - 1);
}

void cs__ring_open(void)
{
    R.blk = NULL;
    R.cursor = 0;
    if (!cs__t.cfg.ring || cs__t.max_blocks < 2 * CS_TOTALS_SPAN)
        return;
    int64_t i = cs__claim_blocks(CS_TOTALS_SPAN);
    if (i < 0)
        return;
    memset(R.index, 0, sizeof R.index);
    R.first = (uint64_t)i;
    R.cursor = (uint64_t)i + CS_TOTALS_SPAN;
    R.blk = cs__block((uint64_t)i);
    head()->cap_rows = CS_TOTALS_CAP_ROWS;
    uint16_t thread;
    uint32_t ostid;
    cs__thread_ident(&thread, &ostid);
    cs__block_init(R.blk, CS_BLOCK_TOTALS, thread, ostid, 0, CS_TOTALS_SPAN);
    cs__trace_set_flags(CS_FLAG_RING);
}

void cs__ring_close(void)
{
    pthread_mutex_lock(&R.mu);
    if (R.blk)
        cs__block_seal(R.blk);
    R.blk = NULL;
    pthread_mutex_unlock(&R.mu);
}

int cs__ring_active(void)
{
    return R.blk != NULL;
}

void cs__ring_forget(void)
{
    pthread_mutex_init(&R.mu, NULL);
    R.blk = NULL;
}

/* The row of an event's key in this fold: its journal entry, made on first use. */
static struct cs_total_row *row_for(const struct cs_event *ev)
{
    struct cs_totals_head *h = head();
    uint64_t comm, bytes;
    unsigned bucket;
    cs_total_key(ev, &comm, &bucket, &bytes);
    uint32_t s = key_hash(ev->op, comm, bucket);
    int32_t r = -1;
    for (uint32_t probe = 0; probe < INDEX_SLOTS; probe++, s = (s + 1) & (INDEX_SLOTS - 1)) {
        int32_t x = R.index[s] - 1;
        if (x < 0)
            break;
        const struct cs_total_row *w = R.pending[x] ? &journal()[R.pending[x] - 1].val : &rows()[x];
        if (w->op == ev->op && w->comm == comm && w->bucket == bucket) {
            r = x;
            break;
        }
    }
    if (r < 0) {
        /* A new row; when only the last is left, it takes whatever finds no row of its own. */
        uint32_t n = h->j_nrows;
        if (n < CS_TOTALS_CAP_ROWS - 1) {
            r = (int32_t)n;
            h->j_nrows = n + 1;
            R.index[s] = r + 1;
        } else {
            r = (int32_t)CS_TOTALS_CAP_ROWS - 1;
            h->j_nrows = CS_TOTALS_CAP_ROWS;
        }
    }
    if (!R.pending[r]) {
        struct cs_totals_journal *e = &journal()[R.nj];
        e->row = (uint32_t)r;
        e->pad = 0;
        e->val = rows()[r];
        if (e->val.calls == 0) {
            int other = r == (int32_t)CS_TOTALS_CAP_ROWS - 1;
            e->val.op = other ? CS_TOTAL_OP_OTHER : ev->op;
            e->val.bucket = other ? 0 : (uint8_t)bucket;
            e->val.comm = other ? 0 : comm;
        }
        R.pending[r] = (int32_t)++R.nj;
    }
    return &journal()[R.pending[r] - 1].val;
}

/* Fold block i (a sealed event block) into the totals and zero it (steps 1-4 of totals.h). */
static void fold(uint64_t i)
{
    struct cs_block_header *b = cs__block(i);
    struct cs_totals_head *h = head();
    uint32_t used = __atomic_load_n(&b->used, __ATOMIC_ACQUIRE);
    if (used > CS_EVENTS_PER_BLOCK)
        used = CS_EVENTS_PER_BLOCK;
    const struct cs_event *ev = (const struct cs_event *)(b + 1);
    R.nj = 0;
    h->j_nrows = h->nrows;
    h->j_events = h->events + used;
    h->j_blocks = h->blocks + 1;
    h->j_t_first = h->t_first;
    h->j_t_last = h->t_last;
    for (uint32_t k = 0; k < used; k++) {
        const struct cs_event *e = &ev[k];
        cs_total_add(row_for(e), e);
        if (!h->j_t_first || e->t_begin < h->j_t_first)
            h->j_t_first = e->t_begin;
        if (e->t_end > h->j_t_last)
            h->j_t_last = e->t_end;
    }
    h->journal_block = i;
    h->journal_bseq = b->seq;
    h->journal_thread = b->thread;
    h->journal_n = R.nj;
    /* Nothing of step 2 may be stored before the journal is valid (a release store orders only
     * what comes before it, an exchange's acquire half what comes after): a rank killed in
     * between must leave the rows as they were. */
    (void)__atomic_exchange_n(&h->journal_seq, h->folds + 1, __ATOMIC_ACQ_REL); /* 1 */
    for (uint32_t k = 0; k < R.nj; k++) {                                       /* 2 */
        rows()[journal()[k].row] = journal()[k].val;
        R.pending[journal()[k].row] = 0;
    }
    h->nrows = h->j_nrows;
    h->events = h->j_events;
    h->blocks = h->j_blocks;
    h->t_first = h->j_t_first;
    h->t_last = h->j_t_last;
    h->folds++;
    (void)__atomic_exchange_n(&b->magic, 0, __ATOMIC_ACQ_REL); /* 3 */
    memset(b, 0, CS_BLOCK_SIZE);
    __atomic_store_n(&h->journal_seq, 0, __ATOMIC_RELEASE); /* 4 */
    atomic_fetch_add(&cs__t.ring_folds, 1);
}

int64_t cs__ring_reuse(void)
{
    int64_t got = -1;
    pthread_mutex_lock(&R.mu);
    if (!R.blk || !__atomic_load_n(&cs_active, __ATOMIC_RELAXED))
        goto out;
    uint64_t nb = atomic_load(&cs__t.next_block);
    for (uint64_t tries = 0; tries < nb; tries++) {
        uint64_t i = R.cursor;
        R.cursor = i + 1 < nb ? i + 1 : 0;
        if (i >= R.first && i < R.first + CS_TOTALS_SPAN)
            continue;
        struct cs_block_header *b = cs__block(i);
        if (__atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) != CS_BLOCK_MAGIC ||
            b->kind != CS_BLOCK_EVENTS || __atomic_load_n(&b->crc, __ATOMIC_ACQUIRE) == 0)
            continue; /* the communicator table, or a block a thread is filling */
        fold(i);
        got = (int64_t)i;
        break;
    }
out:
    pthread_mutex_unlock(&R.mu);
    return got;
}
