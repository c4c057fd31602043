/*
 * Progress reports to the root service while the trace is open (COMMSCOPE_WATCH_MS, set by
 * `commscope run --hang-timeout`): a thread of the collector's own tells the service, every
 * interval, how many calls this rank has completed, and on the service's request sends it a
 * snapshot of the live trace.  So the launcher sees every rank's progress, and can diagnose a
 * hang from their traces, also where the traces stay on the nodes (COMMSCOPE_LOCAL_DIR) and on
 * nodes the launcher cannot read — never through the job's MPI.
 *
 * The thread takes no signals and no lock the program's threads take; every socket operation has
 * the root service's timeout (COMMSCOPE_ROOT_TIMEOUT_MS), and a service that cannot be reached
 * costs one warning and a retry each interval.  It reads the block headers the writers publish
 * (acquire loads of their magic and counts), never the events being written.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "commscope/ops.h"
#include "commscope/root.h"
#include "fence.h"
#include "front.h"
#include "internal.h"

static struct {
    pthread_t thread;
    int running;        /* a thread was started and not yet joined */
    pthread_mutex_t mu; /* stop, mapped, fd */
    pthread_cond_t cv;
    int stop;
    int mapped; /* the trace mapping may be read (cleared at stop, under mu) */
    int fd;     /* the session's socket, -1 none (stop shuts it down to end a blocked read) */
    _Atomic int alive; /* the thread has not returned */
    int interval_ms;
    char host[256], port[16];
    /* What the reports say about the trace, copied at start. */
    int rank, size;
    uint64_t run_id, nonce;
    char path[PATH_MAX + 32];
    /* The scan of the committed events (progress and live metrics): per block, the events
     * taken so far; blocks below scan_lo are sealed and taken. */
    uint8_t *seen;
    uint64_t *tag;  /* ring mode: per block, the (seq, thread) seen[] counts for, + 1 */
    uint64_t folds; /* ring mode: blocks reused at the last scan */
    uint64_t scan_lo;
    uint64_t events; /* events taken so far: every committed event but the resource samples (the
                        reports' progress) */
    struct cs_root_totals tot;
    uint64_t untested_ns; /* the header's unrecorded_test_ns (comm time, as in the analysis) */
    uint64_t last_marker, ring[8];
    unsigned ring_n, ring_i;
    int want_colls;    /* the service asked for the collectives */
    int64_t offset_ns; /* the service's clock minus ours (the session's clock rounds) */
    struct cs_root_coll *recs;
    uint32_t nrec, caprec;
    struct cs_event copy[CS_EVENTS_PER_BLOCK];
} W = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .fd = -1};

/* One committed event into the totals (and the collectives to send).  Returns 0 for a resource
 * sample, which is no progress of the program, else 1. */
static int take(const struct cs_event *ev)
{
    const struct cs_op_info *in = cs_op_info(ev->op);
    if (in->kind == CS_KIND_SAMPLE)
        return 0;
    if (!in->name || ev->t_end < ev->t_begin)
        return 1;
    uint64_t dur = ev->t_end - ev->t_begin;
    enum cs_op_kind k = in->kind;
    /* As the analysis counts them (docs/metrics.md): communication calls, their time. */
    if (ev->op == CS_OP_GPU_NCCL)
        W.tot.gpu_comm_ns += dur;
    if (k == CS_KIND_COLL || k == CS_KIND_ICOLL || k == CS_KIND_P2P || k == CS_KIND_IP2P ||
        k == CS_KIND_WAIT) {
        W.tot.comm_ns += dur;
        W.tot.calls++;
    } else if (k == CS_KIND_NCOLL || k == CS_KIND_NP2P) {
        W.tot.calls++;
    }
    if (ev->op == CS_OP_PCONTROL && ev->aux != 0) {
        W.tot.markers++;
        if (W.last_marker && ev->t_begin > W.last_marker) {
            W.ring[W.ring_i] = ev->t_begin - W.last_marker;
            W.ring_i = (W.ring_i + 1) % 8;
            W.ring_n += W.ring_n < 8;
        }
        W.last_marker = ev->t_begin;
    }
    if (in->kind != CS_KIND_COLL || !W.want_colls || !ev->comm)
        return 1;
    if (W.nrec == W.caprec) {
        uint32_t cap = W.caprec ? 2 * W.caprec : 256;
        struct cs_root_coll *r = cap <= CS_ROOT_COLLS_MAX ? realloc(W.recs, cap * sizeof *r) : NULL;
        if (!r) {
            W.tot.lost_colls++;
            return 1;
        }
        W.recs = r;
        W.caprec = cap;
    }
    W.recs[W.nrec++] =
        (struct cs_root_coll){.comm = ev->comm,
                              .bytes = ev->bytes > ev->bytes_recv ? ev->bytes : ev->bytes_recv,
                              .t_enter = (uint64_t)((int64_t)ev->t_begin + W.offset_ns),
                              .t_exit = (uint64_t)((int64_t)ev->t_end + W.offset_ns),
                              .seq = ev->seq,
                              .op = ev->op};
    return 1;
}

/* Take the events committed since the last scan.  Called with W.mu held, the mapping there. */
static void scan(void)
{
    uint64_t nb = atomic_load(&cs__t.next_block);
    int sealed_so_far = 1;
    uint64_t folds = atomic_load(&cs__t.ring_folds);
    if (folds != W.folds) {
        W.folds = folds;
        W.scan_lo = 0; /* blocks below it were reused */
    }
    for (uint64_t i = W.scan_lo; i < nb;) {
        struct cs_block_header *b = cs__block(i);
        if (__atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) != CS_BLOCK_MAGIC) {
            sealed_so_far = 0;
            i++;
            continue;
        }
        uint32_t span = __atomic_load_n(&b->span, __ATOMIC_RELAXED);
        span = span >= 1 && span <= nb - i ? span : 1;
        /* The seal is written after the last count: a sealed block's count is final. */
        uint32_t crc = __atomic_load_n(&b->crc, __ATOMIC_ACQUIRE);
        if (b->kind == CS_BLOCK_EVENTS) {
            /* In ring mode a block may be reused (ring.c) while it is read: its events are taken
             * from a copy that the block's identity still matches afterwards. */
            uint64_t tag = (b->seq << 16 | b->thread) + 1;
            if (W.tag && W.tag[i] != tag) {
                W.tag[i] = tag;
                W.seen[i] = 0;
            }
            uint32_t used = __atomic_load_n(&b->used, __ATOMIC_ACQUIRE);
            const struct cs_event *ev = (const struct cs_event *)(b + 1);
            if (used > CS_EVENTS_PER_BLOCK)
                used = CS_EVENTS_PER_BLOCK;
            uint32_t from = W.seen[i];
            if (used > from) {
                memcpy(W.copy, ev + from, (used - from) * sizeof *ev);
                CS_FENCE(__ATOMIC_ACQUIRE);
                if (__atomic_load_n(&b->magic, __ATOMIC_RELAXED) == CS_BLOCK_MAGIC &&
                    (b->seq << 16 | b->thread) + 1 == tag) {
                    for (uint32_t j = 0; j < used - from; j++)
                        W.events += (uint64_t)take(&W.copy[j]);
                    W.seen[i] = (uint8_t)used;
                }
            }
        }
        if (sealed_so_far && crc && b->kind == CS_BLOCK_EVENTS)
            W.scan_lo = i + span;
        else
            sealed_so_far = 0;
        i += span;
    }
}

/* Sleep for the interval, or until cs__watch_stop.  Returns the stop flag. */
static int nap(void)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += W.interval_ms / 1000;
    dl.tv_nsec += (long)(W.interval_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&W.mu);
    while (!W.stop)
        if (pthread_cond_timedwait(&W.cv, &W.mu, &dl) != 0)
            break;
    int stop = W.stop;
    pthread_mutex_unlock(&W.mu);
    return stop;
}

/* The counts of the report, read from the mapping while it is there.  Returns 0, or -1 once
 * the trace closed under a thread that was left behind (blocked in I/O at close). */
static int counts(uint64_t *calls, uint64_t *dropped, uint64_t *limit)
{
    pthread_mutex_lock(&W.mu);
    int ok = W.mapped;
    if (ok) {
        scan();
        W.tot.wall_ns = cs_now() - cs__t.hdr->t_init;
        *calls = W.events;
        *dropped = __atomic_load_n(&cs__t.hdr->dropped, __ATOMIC_RELAXED);
        W.untested_ns = __atomic_load_n(&cs__t.hdr->unrecorded_test_ns, __ATOMIC_RELAXED);
        *limit = CS_HEADER_SIZE + atomic_load(&cs__t.next_block) * CS_BLOCK_SIZE;
    }
    pthread_mutex_unlock(&W.mu);
    return ok ? 0 : -1;
}

/* One report (and the snapshot asked for).  Returns 0, or -1 when the session is over. */
static int report(int fd, int bye, char *err, size_t cap)
{
    uint64_t calls, dropped, limit;
    if (counts(&calls, &dropped, &limit) != 0) {
        snprintf(err, cap, "the trace closed");
        return -1;
    }
    struct cs_root_progress p = {.calls = calls,
                                 .dropped = dropped,
                                 .nonce = W.nonce,
                                 .flags =
                                     (bye ? CS_ROOT_PROGRESS_BYE : 0) | CS_ROOT_PROGRESS_TOTALS};
    struct cs_root_totals t = W.tot;
    t.comm_ns += W.untested_ns;
    t.step_n = W.ring_n;
    t.step_ns = 0;
    for (unsigned k = 0; k < W.ring_n; k++)
        t.step_ns += W.ring[k];
    t.ncoll = W.nrec;
    struct cs_root_order o;
    int sent = cs_root_send_all(fd, &p, sizeof p) == 0 && cs_root_send_all(fd, &t, sizeof t) == 0 &&
               (!W.nrec || cs_root_send_all(fd, W.recs, W.nrec * sizeof *W.recs) == 0);
    if (!sent || cs_root_recv_all(fd, &o, sizeof o) != (ssize_t)sizeof o) {
        snprintf(err, cap, "the progress report got no answer: %s",
                 errno == EAGAIN ? "timed out" : strerror(errno));
        return -1;
    }
    W.nrec = 0;
    W.want_colls = !!(o.flags & CS_ROOT_WANT_COLLS);
    if (o.cmd != CS_ROOT_CMD_SNAPSHOT || bye)
        return 0;
    /* The claimed blocks (the rest of the file is its unclaimed reserve), read through the
     * file, not the mapping. */
    if (cs__root_send_file(fd, W.path, W.nonce, limit, err, cap) != 0)
        return -1;
    return 0;
}

static void set_fd(int fd)
{
    pthread_mutex_lock(&W.mu);
    W.fd = fd;
    pthread_mutex_unlock(&W.mu);
}

static void *watch_main(void *arg)
{
    (void)arg;
    int fd = -1, warned = 0, stop = 0;
    char err[320];
    for (;;) {
        if (fd < 0 && stop)
            break; /* no session to say goodbye on */
        if (fd < 0) {
            uint32_t rounds;
            struct cs_clock_sample s;
            fd = cs__root_open(W.host, W.port, CS_ROOT_WATCH, W.rank, W.size, W.run_id, W.path,
                               &rounds, err, sizeof err);
            set_fd(fd);
            if (fd >= 0 && cs__root_clock(fd, rounds, &s) != 0) {
                snprintf(err, sizeof err, "the clock rounds failed");
                set_fd(-1);
                close(fd);
                fd = -1;
            } else if (fd >= 0 && s.valid) {
                W.offset_ns = s.offset_ns;
            }
        }
        if (fd >= 0 && report(fd, stop, err, sizeof err) != 0) {
            set_fd(-1);
            close(fd);
            fd = -1;
        }
        pthread_mutex_lock(&W.mu);
        int closing = W.stop;
        pthread_mutex_unlock(&W.mu);
        if (fd < 0 && !warned++ && !closing)
            cs_warn("progress reports to the root service at %s port %s: %s; retrying every "
                    "%d ms",
                    W.host, W.port, err, W.interval_ms);
        if (stop || (closing && fd < 0))
            break;
        stop = nap();
    }
    if (fd >= 0) {
        set_fd(-1);
        close(fd);
    }
    atomic_store(&W.alive, 0);
    return NULL;
}

void cs__watch_start(void)
{
    const char *v = getenv("COMMSCOPE_WATCH_MS");
    if (!v || !*v || W.running || atomic_load(&W.alive))
        return;
    char *end;
    long ms = strtol(v, &end, 10);
    if (*end || ms < 1 || ms > CS_ROOT_WATCH_MS_MAX) {
        cs_warn("COMMSCOPE_WATCH_MS=\"%s\" is not a number of ms in 1..%d; no progress reports", v,
                CS_ROOT_WATCH_MS_MAX);
        return;
    }
    char src[600];
    int where = cs__root_where(W.host, sizeof W.host, W.port, sizeof W.port, src, sizeof src);
    if (where <= 0) {
        if (where == 0)
            cs_warn("COMMSCOPE_WATCH_MS is set but no root service is (COMMSCOPE_ROOT); no "
                    "progress reports");
        return;
    }
    W.interval_ms = (int)ms;
    W.stop = 0;
    W.mapped = 1;
    W.fd = -1;
    free(W.seen);
    free(W.tag);
    W.tag = NULL;
    W.seen = calloc(cs__t.max_blocks ? cs__t.max_blocks : 1, 1);
    if (W.seen && (cs__t.hdr->flags & CS_FLAG_RING))
        W.tag = calloc(cs__t.max_blocks, sizeof *W.tag);
    if (!W.seen || ((cs__t.hdr->flags & CS_FLAG_RING) && !W.tag)) {
        cs_warn("out of memory for the progress reports; none are sent");
        return;
    }
    W.scan_lo = 0;
    W.folds = 0;
    W.events = 0;
    memset(&W.tot, 0, sizeof W.tot);
    W.last_marker = 0;
    W.ring_n = W.ring_i = 0;
    W.want_colls = 0;
    W.nrec = 0;
    W.rank = cs__t.hdr->rank;
    W.size = cs__t.hdr->world_size;
    W.run_id = cs__t.hdr->run_id;
    W.nonce = cs__t.hdr->nonce;
    snprintf(W.path, sizeof W.path, "%s", cs__t.path);
    atomic_store(&W.alive, 1);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&W.thread, NULL, watch_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        atomic_store(&W.alive, 0);
        cs_warn("cannot start the progress reports: %s", strerror(rc));
        return;
    }
    W.running = 1;
    pthread_setname_np(W.thread, "commscope-watch");
}

/* Wait up to ms for the thread to return. */
static int joined(int ms)
{
    for (int i = 0; i < ms && atomic_load(&W.alive); i++) {
        struct timespec t = {0, 1000000};
        nanosleep(&t, NULL);
    }
    return !atomic_load(&W.alive);
}

/*
 * The last report (BYE) goes out if the service answers at once; a thread blocked longer (a
 * service that stopped answering) is not waited for: its socket is shut down, and if it is
 * inside a connect it is left to end by its own timeout — it no longer touches the mapping, so
 * the close goes on.  MPI_Finalize is delayed by at most about half a second.
 */
void cs__watch_stop(void)
{
    if (!W.running)
        return;
    pthread_mutex_lock(&W.mu);
    W.stop = 1;
    pthread_cond_signal(&W.cv);
    pthread_mutex_unlock(&W.mu);
    if (!joined(250)) {
        pthread_mutex_lock(&W.mu);
        if (W.fd >= 0)
            shutdown(W.fd, SHUT_RDWR);
        pthread_mutex_unlock(&W.mu);
        joined(250);
    }
    pthread_mutex_lock(&W.mu);
    W.mapped = 0;
    pthread_mutex_unlock(&W.mu);
    if (!atomic_load(&W.alive))
        pthread_join(W.thread, NULL);
    else
        pthread_detach(W.thread);
    W.running = 0;
}

void cs__watch_forget(void)
{
    W.running = 0;
    W.fd = -1;
    atomic_store(&W.alive, 0);
    pthread_mutex_init(&W.mu, NULL);
    pthread_cond_init(&W.cv, NULL);
}
