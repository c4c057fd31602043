/*
 * Per-thread event buffers: the hot path.
 *
 * Every thread fills its own current block of the mapped trace file.  cs_rec_begin hands out the
 * next slot, cs_rec_commit publishes it with a release store of the block's `used`; a reader of a
 * crashed rank's file sees exactly the committed events.  Only when a block is full does the
 * thread seal it (CRC) and claim the next block index from a global counter, and only when that
 * block lies past the end of the file does it take a mutex and grow the file, by 4 MiB at a time.
 *
 * First writes to fresh file pages are expensive (page allocation and zeroing in the kernel:
 * 40-70 ns per 64-byte event in a VM).  A helper thread started with the trace keeps the file
 * grown and its pages populated (MADV_POPULATE_WRITE) CS__AHEAD_BLOCKS ahead of the claim
 * frontier, on another core, so writers find their pages ready; it sleeps on a futex, and a
 * claim that comes within half that distance of the populated end wakes it.  A writer that
 * catches up still grows the file itself, and pages it touches first fault in as usual.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "front.h"
#include "internal.h"

/* Exported for the inline fast path of hot.h; initial-exec: one %fs-relative access. */
__thread struct cs_thread_state cs_thread_state __attribute__((tls_model("initial-exec")));

static struct cs_event *slot(struct cs_block_header *b, uint32_t i)
{
    return (struct cs_event *)((char *)b + sizeof *b) + i;
}

void cs__count_drop(void)
{
    struct cs_file_header *h = cs__t.hdr;
    cs__counter_add(&h->dropped, 0, 1);
    if (!(__atomic_load_n(&h->flags, __ATOMIC_RELAXED) & CS_FLAG_DROPPED))
        cs__trace_set_flags(CS_FLAG_DROPPED);
}

void cs__prefault(void *addr, size_t len)
{
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
    /*
     * Fault the new pages in with one system call instead of one trap per 4 KiB page on the hot
     * path (a page fault on a shared file mapping costs microseconds, more in a VM: ~60 ns per
     * event at 64 events per page).  Older kernels answer EINVAL: then the pages fault lazily.
     */
    static _Atomic int unsupported;
    if (atomic_load_explicit(&unsupported, memory_order_relaxed))
        return;
    if (madvise(addr, len, MADV_POPULATE_WRITE) != 0 && (errno == EINVAL || errno == ENOSYS))
        atomic_store_explicit(&unsupported, 1, memory_order_relaxed);
}

/*
 * Make the file at least `blocks` blocks long (in CS__GROW_BLOCKS steps, or exactly `blocks` when
 * a whole step does not fit the disk or the file-size limit); with `populate`, also populate what
 * was added.  Returns 0 or an errno value; the file is unchanged on failure.
 */
static int grow_file(uint64_t blocks, int populate)
{
    if (blocks <= atomic_load_explicit(&cs__t.file_blocks, memory_order_acquire))
        return 0;
    int err = 0;
    pthread_mutex_lock(&cs__t.grow_mu);
    uint64_t have = atomic_load_explicit(&cs__t.file_blocks, memory_order_relaxed);
    if (blocks > have) {
        uint64_t want = (blocks + CS__GROW_BLOCKS - 1) / CS__GROW_BLOCKS * CS__GROW_BLOCKS;
        if (want > cs__t.max_blocks)
            want = cs__t.max_blocks;
        uint64_t from = CS_HEADER_SIZE + have * CS_BLOCK_SIZE;
        /*
         * The blocks are allocated (cs__extend) before anyone can store into their pages, so a
         * full disk or the file-size limit fails here, where recording can stop, never as SIGBUS
         * or SIGXFSZ in the program.
         */
        err = cs__extend(cs__t.fd, from, CS_HEADER_SIZE + want * CS_BLOCK_SIZE,
                         &cs__t.fallocate_works);
        if (err && want > blocks) {
            want = blocks;
            err = cs__extend(cs__t.fd, from, CS_HEADER_SIZE + want * CS_BLOCK_SIZE,
                             &cs__t.fallocate_works);
        }
        if (!err) {
            if (populate)
                cs__prefault(cs__t.base + from, (size_t)(want - have) * CS_BLOCK_SIZE);
            atomic_store_explicit(&cs__t.file_blocks, want, memory_order_release);
        }
    }
    pthread_mutex_unlock(&cs__t.grow_mu);
    return err;
}

int64_t cs__claim_blocks(uint64_t n)
{
    /*
     * A CAS loop rather than fetch_add: a failed claim must not advance the counter, or a later
     * smaller claim would leave a hole of unclaimed blocks inside a closed file.  A claim is
     * made only of blocks the file already holds (growing it first when needed), so every
     * claimed block lies inside the file: nothing ever stores past its end, and close reads
     * only blocks that exist.
     */
    uint64_t first = atomic_load_explicit(&cs__t.next_block, memory_order_relaxed);
    for (;;) {
        if (atomic_load_explicit(&cs__t.storage_failed, memory_order_relaxed) ||
            n > cs__t.max_blocks || first > cs__t.max_blocks - n)
            return -1;
        if (first + n > atomic_load_explicit(&cs__t.file_blocks, memory_order_acquire)) {
            int err = grow_file(first + n, !cs__t.helper_running);
            if (err) {
                cs__storage_failed("cannot extend trace file %s to %llu blocks (%llu MiB): %s",
                                   cs__t.path, (unsigned long long)(first + n),
                                   (unsigned long long)((first + n) * CS_BLOCK_SIZE >> 20),
                                   strerror(err));
                return -1;
            }
            first = atomic_load_explicit(&cs__t.next_block, memory_order_relaxed);
            continue;
        }
        if (atomic_compare_exchange_weak_explicit(&cs__t.next_block, &first, first + n,
                                                  memory_order_relaxed, memory_order_relaxed))
            break;
    }
    /* Seq-cst, with the helper's store of wake_at and its reload of next_block: either this
     * claim sees the helper's wake_at, or the helper sees this claim (no lost wake-up). */
    uint64_t wake = atomic_load(&cs__t.wake_at);
    if (CS_UNLIKELY(first + n >= wake) &&
        atomic_compare_exchange_strong(&cs__t.wake_at, &wake, UINT64_MAX)) {
        atomic_fetch_add(&cs__t.helper_seq, 1);
        syscall(SYS_futex, &cs__t.helper_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
    return (int64_t)first;
}

int cs__rec_would_drop(void)
{
    const struct cs_thread_buf *t = &cs_thread_state.buf;
    if (t->blk && t->used < CS_EVENTS_PER_BLOCK &&
        t->generation == __atomic_load_n(&cs_trace_generation, __ATOMIC_RELAXED))
        return 0;
    if (cs__ring_active())
        return 0;
    return atomic_load_explicit(&cs__t.storage_failed, memory_order_relaxed) ||
           atomic_load_explicit(&cs__t.next_block, memory_order_relaxed) >= cs__t.max_blocks;
}

/*
 * The helper's main loop: populate ahead of the frontier, take the resource samples when they
 * are due (sample.c), sleep until the next is due or a claim wakes it, repeat, until told to
 * stop.
 */
static void *helper_main(void *arg)
{
    (void)arg;
    for (;;) {
        uint32_t seq = atomic_load(&cs__t.helper_seq);
        if (atomic_load(&cs__t.helper_stop))
            break;
        uint64_t due = cs__sample_tick();
        uint64_t front = atomic_load(&cs__t.next_block);
        uint64_t ready = atomic_load_explicit(&cs__t.ready_blocks, memory_order_relaxed);
        uint64_t goal = front + CS__AHEAD_BLOCKS;
        if (goal > cs__t.max_blocks)
            goal = cs__t.max_blocks;
        if (ready < goal) {
            /* Pages behind the frontier are the writers' already: start at the frontier. */
            uint64_t from = ready > front ? ready : front;
            uint64_t to = from + CS__POPULATE_BLOCKS < goal ? from + CS__POPULATE_BLOCKS : goal;
            /* A failure (disk full) is the writers' to report when they reach it. */
            if (from < to && grow_file(to, 0) != 0)
                goto idle;
            if (from < to)
                cs__prefault(cs__block(from), (size_t)(to - from) * CS_BLOCK_SIZE);
            atomic_store_explicit(&cs__t.ready_blocks, to, memory_order_relaxed);
            continue;
        }
        atomic_store(&cs__t.wake_at, ready - CS__AHEAD_BLOCKS / 2);
        if (atomic_load(&cs__t.next_block) >= ready - CS__AHEAD_BLOCKS / 2)
            continue;
    idle:;
        /* Sleeps until a claim or close bumps helper_seq (returns at once if it did already),
         * or the next sample is due. */
        struct timespec ts = {(time_t)(due / 1000000000u), (long)(due % 1000000000u)};
        syscall(SYS_futex, &cs__t.helper_seq, FUTEX_WAIT_PRIVATE, seq,
                due == UINT64_MAX ? NULL : &ts, NULL, 0);
    }
    cs__sample_close();
    return NULL;
}

void cs__helper_start(void)
{
    cs__sample_open();
    atomic_store(&cs__t.helper_stop, 0);
    atomic_store(&cs__t.wake_at, UINT64_MAX);
    cs__t.helper_running = 0;
    /* The helper must never receive the program's signals: block them all while creating it
     * (the new thread inherits the mask), then restore the caller's mask. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&cs__t.helper, NULL, helper_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0) {
        cs__t.helper_running = 1;
        pthread_setname_np(cs__t.helper, "commscope-pf");
    }
}

void cs__helper_stop(void)
{
    if (!cs__t.helper_running)
        return;
    atomic_store(&cs__t.helper_stop, 1);
    atomic_fetch_add(&cs__t.helper_seq, 1);
    syscall(SYS_futex, &cs__t.helper_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    pthread_join(cs__t.helper, NULL);
    cs__t.helper_running = 0;
    atomic_store(&cs__t.wake_at, UINT64_MAX);
}

void cs__helper_forget(void)
{
    cs__sample_forget();
    cs__t.helper_running = 0;
    atomic_store(&cs__t.wake_at, UINT64_MAX);
}

void cs__block_init(struct cs_block_header *b, uint16_t kind, uint16_t thread, uint32_t ostid,
                    uint64_t seq, uint32_t span)
{
    b->kind = kind;
    b->thread = thread;
    b->span = span;
    b->ostid = ostid;
    b->seq = seq;
    __atomic_store_n(&b->magic, CS_BLOCK_MAGIC, __ATOMIC_RELEASE);
}

void cs__block_seal_used(struct cs_block_header *b, uint32_t used)
{
    uint32_t span = b->span ? b->span : 1;
    struct cs_block_header h = *b;
    h.used = used;
    h.crc = 0;
    uint32_t crc = cs_crc32(0, &h, sizeof h);
    crc = cs_crc32(crc, (const char *)b + sizeof h, (size_t)span * CS_BLOCK_SIZE - sizeof h);
    /* used (offset 8) and crc (offset 12) in one store: never one without the other. */
    __atomic_store_n((uint64_t *)(void *)&b->used, (uint64_t)crc << 32 | used, __ATOMIC_RELEASE);
}

void cs__block_seal(struct cs_block_header *b)
{
    uint32_t span = b->span ? b->span : 1;
    /* Atomic: the progress reports' thread reads crc while the block fills (watch.c). */
    __atomic_store_n(&b->crc, 0, __ATOMIC_RELAXED);
    uint32_t crc = cs_crc32(0, b, (size_t)span * CS_BLOCK_SIZE);
    __atomic_store_n(&b->crc, crc, __ATOMIC_RELEASE);
}

static void thread_reset(struct cs_thread_buf *t, uint32_t gen)
{
    t->blk = NULL;
    t->used = CS_EVENTS_PER_BLOCK;
    t->generation = gen;
    t->begun = 0;
    t->valid = 0;
    t->seq = 0;
}

static void thread_assign(struct cs_thread_buf *t)
{
    /* More than 65536 threads in one rank wrap the 16-bit index; the OS tid still differs. */
    t->thread = (uint16_t)atomic_fetch_add(&cs__t.next_thread, 1);
    t->ostid = (uint32_t)syscall(SYS_gettid);
    t->valid = 1;
}

void cs__thread_ident(uint16_t *thread, uint32_t *ostid)
{
    struct cs_thread_buf *t = &cs_thread_state.buf;
    uint32_t gen = __atomic_load_n(&cs_trace_generation, __ATOMIC_RELAXED);
    if (t->generation != gen)
        thread_reset(t, gen);
    if (!t->valid)
        thread_assign(t);
    *thread = t->thread;
    *ostid = t->ostid;
}

/* The calling thread's block is full or it has none yet (or a new trace was opened). */
static __attribute__((noinline)) struct cs_event *rec_slow(struct cs_thread_buf *t)
{
    uint32_t gen = __atomic_load_n(&cs_trace_generation, __ATOMIC_RELAXED);
    if (t->generation != gen)
        thread_reset(t, gen);
    if (!t->valid)
        thread_assign(t);
    if (t->blk) {
        cs__block_seal(t->blk);
        t->blk = NULL;
    }
    int64_t i = cs__claim_blocks(1);
    /* At the cap, or where the file cannot grow (full disk, file-size limit): ring mode goes on
     * over the blocks the file has. */
    if (i < 0)
        i = cs__ring_reuse();
    if (i < 0) {
        if (__atomic_load_n(&cs_active, __ATOMIC_RELAXED))
            cs__count_drop();
        return NULL;
    }
    t->blk = cs__block(i);
    cs__block_init(t->blk, CS_BLOCK_EVENTS, t->thread, t->ostid, t->seq++, 1);
    t->used = 0;
    t->sum = 0;
    t->begun = 1;
    return slot(t->blk, 0);
}

struct cs_event *cs_rec_begin(void)
{
    if (CS_UNLIKELY(!__atomic_load_n(&cs_active, __ATOMIC_RELAXED)))
        return NULL;
    struct cs_thread_buf *t = &cs_thread_state.buf;
    if (CS_UNLIKELY(t->used >= CS_EVENTS_PER_BLOCK ||
                    t->generation != __atomic_load_n(&cs_trace_generation, __ATOMIC_RELAXED)))
        return rec_slow(t);
    struct cs_event *ev = slot(t->blk, t->used);
    /* A slot handed out but never committed is handed out again, and must come back zeroed;
     * fresh slots are zero already (new file pages). */
    if (CS_UNLIKELY(t->begun))
        memset(ev, 0, sizeof *ev);
    t->begun = 1;
    return ev;
}

void cs_rec_commit(struct cs_event *ev)
{
    cs_hot_commit(ev);
}
