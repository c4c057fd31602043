/*
 * The trace reader: opens one rank-NNNNN.cst file (include/commscope/trace.h), validates all of it
 * and hands out its events.  Used by the analyzer and by the tests; public within the project.
 *
 * The file is mapped read-only and validated completely by cs_reader_open() (header, every block
 * header, every CRC, every event, every communicator record), so later calls cannot fail.  Memory
 * beyond the mapping is one small entry per block and per communicator record; the events stay in
 * the page cache.
 */
#ifndef COMMSCOPE_ANALYZER_READER_H
#define COMMSCOPE_ANALYZER_READER_H

#include <stddef.h>
#include <stdint.h>

#include "commscope/errors.h"
#include "commscope/totals.h"
#include "commscope/trace.h"

/* What cs_reader_open() found besides the events. */
struct cs_reader_stats {
    int partial;              /* CS_FLAG_PARTIAL was set: the rank did not close its trace */
    uint64_t events;          /* event records recovered (all committed, validated records but
                                 the resource samples) */
    uint64_t samples;         /* resource sample records (the sampler's thread: apart from the
                                 events, cs_reader_sample_block) */
    uint64_t blocks;          /* blocks examined (a spanning block counts its span) */
    uint64_t event_blocks;    /* event blocks */
    uint64_t comm_blocks;     /* communicator-table blocks (each counted once) */
    uint64_t empty_blocks;    /* unclaimed all-zero blocks skipped (partial files only) */
    uint64_t unsealed_blocks; /* blocks without CRC accepted structurally (partial files only) */
    uint64_t trailing_bytes;  /* bytes after the last whole block, ignored (partial files only) */
    uint64_t comms;           /* communicator records */
    unsigned threads;         /* recording threads seen */
    uint64_t reused_blocks;   /* ring mode, partial files: blocks caught being zeroed for reuse */
    int live;                 /* partial, and its writer may still be running (read by copy) */
};

struct cs_reader;

/*
 * Open and validate the trace at `path`.  On success returns 0 and sets *out to a reader the
 * caller owns (free it with cs_reader_close()).  On failure returns a negative CS_E* code, sets
 * *out to NULL and writes one sentence naming the file and the place into err[errlen], e.g.
 * "rank-00003.cst: truncated at byte 4096 of 20480 (block 0 of 1)".
 */
int cs_reader_open(const char *path, struct cs_reader **out, char *err, size_t errlen);

/* Release the reader and its mapping.  NULL is allowed. */
void cs_reader_close(struct cs_reader *r);

/* The file header (a copy owned by the reader; valid until cs_reader_close()). */
const struct cs_file_header *cs_reader_header(const struct cs_reader *r);

/* Statistics of the file (owned by the reader). */
const struct cs_reader_stats *cs_reader_stats(const struct cs_reader *r);

/*
 * Communicator record i (0 <= i < cs_reader_stats(r)->comms), validated: record_bytes fits,
 * 1 <= size, 0 <= my_rank < size, members are distinct world ranks, members[my_rank] is this
 * rank.  Points into the mapping; valid until cs_reader_close().
 */
const struct cs_comm_record *cs_reader_comm(const struct cs_reader *r, size_t i);

/*
 * The next event, or NULL at the end.  Each thread's events come in recording order (blocks by
 * sequence number, then position in the block); the threads are merged by t_begin.  The pointer
 * points into the mapping and stays valid until cs_reader_close().
 */
const struct cs_event *cs_reader_next(struct cs_reader *r);

/*
 * The next events as one array: sets *out to the first of n >= 1 events that follow each other in
 * the file and come next in cs_reader_next()'s order, moves past them and returns n; 0 at the
 * end (*out NULL).  A file with one recording thread gives the rest of the current block at once;
 * one with several gives one event per call (the threads are merged by t_begin), so calls of this
 * and cs_reader_next() may be mixed and every event comes exactly once, in the same order.  The
 * events point into the mapping and stay valid until cs_reader_close().
 */
size_t cs_reader_next_batch(struct cs_reader *r, const struct cs_event **out);

/*
 * The resource samples (CS_KIND_SAMPLE records of the collector's sampler thread), which the
 * event functions above never return: block i (0 <= i < cs_reader_sample_blocks(r)) holds n
 * samples, returned, from *out; blocks in recording order (so by time).  Valid until
 * cs_reader_close().
 */
size_t cs_reader_sample_blocks(const struct cs_reader *r);
size_t cs_reader_sample_block(const struct cs_reader *r, size_t i, const struct cs_event **out);

/* The recording thread (block header `thread`, 0 = first) of the event cs_reader_next() returned
 * last (of the events cs_reader_next_batch() returned last); 0 before the first. */
unsigned cs_reader_thread(const struct cs_reader *r);

/*
 * How each recording thread's trace ends: its last committed event (NULL none) and, in a partial
 * file, the call it was in when the file was last written (`inflight`: the in-flight record of
 * trace.h, t_end 0; NULL none).  Both point into the mapping.
 */
struct cs_reader_tail {
    unsigned thread;
    const struct cs_event *last;
    const struct cs_event *inflight;
};

/* One entry per recording thread (cs_reader_stats()->threads), owned by the reader; returns the
 * count and sets *out. */
size_t cs_reader_tails(const struct cs_reader *r, const struct cs_reader_tail **out);

/* Start again from the first event (of the window). */
void cs_reader_rewind(struct cs_reader *r);

/*
 * What a ring-mode trace (CS_FLAG_RING) says about the events outside its kept window: those the
 * collector folded into its totals block when it reused their blocks, and those still in the file
 * but before the window, which cs_reader_next() no longer hands out (the reader folds them into
 * the same rows).  The window starts at t_window: the first kept event of the recording thread
 * that lost the most, so from there on every thread's events are all there.  The run's whole
 * totals are the rows plus the events the reader hands out.
 */
struct cs_reader_totals {
    int ring;                        /* the file is in ring mode */
    uint64_t folded;                 /* events folded by the collector */
    uint64_t outside;                /* events in the file before the window, folded here */
    uint64_t t_window;               /* local clock; 0: the window is the whole run */
    uint64_t t_first;                /* earliest t_begin outside the window (0 none) */
    size_t nrows;                    /* rows, one per (op, communicator, size bucket) */
    const struct cs_total_row *rows; /* owned by the reader */
};
const struct cs_reader_totals *cs_reader_totals(const struct cs_reader *r);

/*
 * Start a ring-mode trace's window later, at local time t (the windows of all ranks at one
 * instant, so collectives are whole): the events before it are folded into the rows.  No effect
 * on other files or when t is not later than the window's start.  Rewinds.  Returns 0, or
 * CS_ENOMEM (the rows could not grow; the window is then left where it got to).
 */
int cs_reader_cut(struct cs_reader *r, uint64_t t);

#endif
