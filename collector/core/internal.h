/*
 * What the core collector's files share.  Nothing here is exported from libcommscope.so (the
 * library is built with hidden visibility; only CS_EXPORT symbols of collector.h are public).
 */
#ifndef COMMSCOPE_CORE_INTERNAL_H
#define COMMSCOPE_CORE_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hot.h"

#define CS_LIKELY(x) __builtin_expect(!!(x), 1)
#define CS_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The file grows in steps of this many blocks (4 MiB), so extending it is rare. */
#define CS__GROW_BLOCKS 256u
/*
 * The prefault helper thread keeps at least this many blocks (64 MiB, ~1 M events) populated
 * beyond the claim frontier, working in steps of CS__POPULATE_BLOCKS (1 MiB, so stopping it never
 * waits long); cs_trace_open sizes and populates the first 64 MiB itself (~30-60 ms in a VM).
 * Populating a fresh page-cache page costs 1.5-3.5 us on the development VM, as much as the
 * writer spends on the 64 events that fill it, so a writer recording events back to back can
 * outrun the helper; the reserve absorbs bursts of up to ~1 M events.  It is page cache of the
 * trace file (dirty until written back, the unused part dropped when close trims the file), not
 * locked memory; COMMSCOPE_MAX_MB caps it.
 */
#define CS__AHEAD_BLOCKS 4096u
#define CS__POPULATE_BLOCKS 64u
/* Payload bytes of one block (after its header). */
#define CS__BLOCK_PAYLOAD (CS_BLOCK_SIZE - sizeof(struct cs_block_header))

/* Effective configuration, resolved from COMMSCOPE_* at cs_trace_open (config.c). */
struct cs__config {
    int disabled;             /* COMMSCOPE_DISABLE=1 */
    uint64_t max_bytes;       /* COMMSCOPE_MAX_MB in bytes */
    int ring;                 /* COMMSCOPE_TRACE_MODE=ring (the default): reuse the oldest blocks
                                 at the cap (ring.c); 0 head: drop what comes after */
    int gather;               /* COMMSCOPE_GATHER: 0 auto (the default), 1 always, 2 never */
    char run_dir[PATH_MAX];   /* COMMSCOPE_DIR or the default */
    char local_dir[PATH_MAX]; /* COMMSCOPE_LOCAL_DIR expanded, or run_dir */
};

/*
 * Read the COMMSCOPE_* variables for a trace of `rank` in run `run_id`.  Bad values are warned
 * about (once each) and replaced by their defaults.  Returns 0, or -1 when a path does not fit
 * (warned).
 */
int cs__config_load(struct cs__config *cfg, int rank, uint64_t run_id);

/* Warn about COMMSCOPE_TEST_CLOCK_SKEW if it was malformed (clock.c); called at open. */
void cs__skew_report(void);
/*
 * Confirm the skew for the rank now known (clock.c).  Turns the skew on or off to match `rank`,
 * and converts *t, a time taken with cs_now() before this call, to the clock that applies from
 * now on.  Returns 1 when the skew is active for this rank.
 */
int cs__skew_confirm(int rank, uint64_t *t);
/*
 * How cs_now reads the raw clock (clock.c), for tests and diagnostics: 0 clock_gettime only (no
 * invariant TSC, or given up), 1 invariant TSC found but the factor not yet calibrated (so
 * clock_gettime), 2 TSC with per-thread anchors.
 */
int cs__clock_tsc_state(void);

/* Rank for warnings (-1 before the first open). */
extern int cs__rank;

/* Reset the once-per-trace warning latch of cs_disable (warn.c); called at open. */
void cs__disable_reset(void);
/* Nonzero once cs_disable was called since the last cs__disable_reset. */
int cs__disable_requested(void);

/* State of the open trace (trace.c), read by the hot path in buffer.c. */
struct cs__trace {
    char *base;                    /* mapping of the whole cap; header at offset 0 */
    struct cs_file_header *hdr;    /* == base */
    size_t map_bytes;              /* CS_HEADER_SIZE + max_blocks * CS_BLOCK_SIZE */
    uint64_t max_blocks;           /* blocks that fit under the cap */
    int fd;                        /* the trace file, open while the trace is */
    int open;                      /* a trace is open (mapping valid) */
    _Atomic uint64_t next_block;   /* blocks claimed so far (never above max_blocks) */
    _Atomic uint64_t file_blocks;  /* blocks the file currently holds */
    _Atomic uint32_t next_thread;  /* next thread index */
    int fallocate_works;           /* 0 once fallocate said EOPNOTSUPP: write zeros */
    _Atomic int storage_failed;    /* the file could not grow: record nothing more */
    _Atomic uint64_t ready_blocks; /* blocks populated (page-table entries in place) */
    _Atomic uint64_t ring_folds;   /* event blocks reused in ring mode (ring.c) */
    _Atomic uint64_t wake_at;      /* a claim reaching this block wakes the helper */
    _Atomic uint32_t helper_seq;   /* futex word: bumped to wake the helper */
    _Atomic int helper_stop;       /* set at close: the helper exits */
    _Atomic int helper_running;    /* the helper thread exists (join it at close) */
    pthread_t helper;
    pthread_mutex_t grow_mu;          /* serialises extending the file */
    pthread_mutex_t comm_mu;          /* serialises the communicator table */
    struct cs_block_header *comm_blk; /* current CS_BLOCK_COMMS block, or NULL */
    uint64_t comm_seq;                /* next comm block sequence number */
    int comm_full_warned;
    char path[PATH_MAX + 32]; /* this rank's trace file */
    struct cs__config cfg;
};

extern struct cs__trace cs__t;

/* Block i's header in the mapping. */
static inline struct cs_block_header *cs__block(uint64_t i)
{
    return (struct cs_block_header *)(cs__t.base + CS_HEADER_SIZE + i * CS_BLOCK_SIZE);
}

/*
 * Claim n consecutive blocks and make sure the file holds them.  Returns the first index, or -1
 * when they do not fit under the cap (nothing claimed) or the file cannot grow (then the
 * collector is disabled with a warning).
 */
int64_t cs__claim_blocks(uint64_t n);

/* Fill in a freshly claimed block's header; magic is stored last (release). */
void cs__block_init(struct cs_block_header *b, uint16_t kind, uint16_t thread, uint32_t ostid,
                    uint64_t seq, uint32_t span);

/* Store the block's CRC (over span * CS_BLOCK_SIZE bytes with crc zero). */
void cs__block_seal(struct cs_block_header *b);
/* Publish a new `used` of a comm block with the CRC of the block as it is with it, in one
 * 8-byte store (the bytes it covers must be in place). */
void cs__block_seal_used(struct cs_block_header *b, uint32_t used);

/* The calling thread's index and OS tid in the open trace (assigned on first use). */
void cs__thread_ident(uint16_t *thread, uint32_t *ostid);

/* Populate [addr, addr+len) of the mapping ahead of use (best effort). */
void cs__prefault(void *addr, size_t len);

/* Install the exit and fatal-signal handlers that record how the process ended in the open
 * trace's header (fate.c); once per process, at the first open. */
void cs__fate_watch(void);

/*
 * Start the prefault helper for the trace just opened (buffer.c); without it (thread creation
 * failed) writers grow and populate the file themselves.  Stop it and wait for it (at close;
 * returns within one populate step).  Forget it in a forked child, where it does not exist.
 */
void cs__helper_start(void);
void cs__helper_stop(void);
void cs__helper_forget(void);
/*
 * Resource samples (sample.c), on the helper thread: read the rate at open; take the samples due
 * and return the ns until the next (UINT64_MAX: sampling is off); close the files at the helper's
 * end; forget the state in a forked child.
 */
void cs__sample_open(void);
uint64_t cs__sample_tick(void);
void cs__sample_close(void);
void cs__sample_forget(void);
/* 1 when a record begun now on the calling thread would be dropped (head mode at the cap, or
 * the file cannot grow), so that the sampler can leave it out instead of counting a drop. */
int cs__rec_would_drop(void);
/* Progress reports to the root service (watch.c): started at open when COMMSCOPE_WATCH_MS is set,
 * stopped (a last report said) at close, forgotten in a forked child. */
void cs__watch_start(void);
void cs__watch_stop(void);
void cs__watch_forget(void);

/*
 * Ring mode (ring.c): claim the totals block at open (when COMMSCOPE_TRACE_MODE is ring and the
 * cap leaves room), seal it at close, forget its lock in a forked child.  cs__ring_reuse folds
 * the oldest sealed event block into the totals and returns its index, zeroed, for the caller to
 * claim with cs__block_init; -1 when there is none (not ring mode, or no sealed block).
 */
void cs__ring_open(void);
void cs__ring_close(void);
void cs__ring_forget(void);
int64_t cs__ring_reuse(void);
/* 1 when the open trace has its totals block (ring mode is on). */
int cs__ring_active(void);

/* Count one dropped event in the header. */
void cs__count_drop(void);

/* Add n to header counter c (dropped, unrecorded_tests, ...) and keep its complement
 * counter_check[idx] (enum cs_counter) equal to ~c; lock free. */
static inline void cs__counter_add(uint64_t *c, int idx, uint64_t n)
{
    __atomic_fetch_add(c, n, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&cs__t.hdr->counter_check[idx], n, __ATOMIC_RELAXED);
}

/*
 * Recompute the open trace's live_crc after a change to its header (hdr.c): every writer of a
 * header field other than the four counters calls it, so a crashed rank's partial header can be
 * checked.  Takes a lock: not for hot paths.
 */
void cs__hdr_seal(void);

/*
 * The file cannot grow after a storage fault (out of space, the file-size limit, an I/O error):
 * warn once with the reason, put it in the header note with CS_FLAG_STORAGE.  In ring mode
 * recording goes on over the blocks the file has; else every later event is counted as dropped.
 * The program goes on untouched.
 */
void cs__storage_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- storage.c: writing files without SIGXFSZ or SIGBUS ---- */

/* The soft RLIMIT_FSIZE in bytes (read now), UINT64_MAX when there is none. */
uint64_t cs__fsize_limit(void);
/*
 * Give fd real disk blocks over [from, to): fallocate, or written zeros where the filesystem has
 * none (then *fallocate_works is cleared).  Never past the file-size limit.  Returns 0 or an
 * errno value (EFBIG at the limit, ENOSPC, EIO, ...).
 */
int cs__extend(int fd, uint64_t from, uint64_t to, int *fallocate_works);

#endif
