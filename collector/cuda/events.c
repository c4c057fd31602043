/*
 * The CUDA-event fallback: GPU time of NCCL launches when CUPTI cannot be used (missing, or held
 * by another tool).
 *
 *   - Around every NCCL launch (a call, or a group at its outermost ncclGroupEnd) two events from
 *     a per-device pool are recorded on the launch's stream: the start event completes when the
 *     stream reaches the launch, the end event when the launch's GPU work is done.  Launches into
 *     a stream that is being captured into a CUDA graph get no events (recording would add nodes
 *     to the program's graph): the call is marked CS_EV_GRAPH instead.
 *   - The events are read back later, never waited for: at every later launch a few of the oldest
 *     pending launches are checked with cudaEventQuery, and at exit (or MPI_Finalize) every
 *     pending one is polled for at most COMMSCOPE_GPU_DRAIN_MS (default 2000 ms).  The program's
 *     streams are never synchronised.  The polling runs in the relaxed stream-capture mode, so it
 *     is legal while another thread captures a graph.
 *   - Event times are relative: each device has a reference event recorded on commscope's own
 *     non-blocking stream, whose host time is bracketed by the record and the first query that
 *     saw it complete (spinning at most 200 us; the stream is idle, so it completes at once).
 *     start = reference + cudaEventElapsedTime(reference, start event); end = start + elapsed
 *     (start, end).  The reference is renewed when older than a second, so the float milliseconds
 *     of cudaEventElapsedTime stay at ~0.1 us resolution.
 *
 * Accuracy: the start is when the stream reached the launch (NCCL's kernel starts then, or after
 * waiting for other streams it depends on), the end when its work finished; the host mapping is
 * within half the reference's bracket (recorded in gpu_note when above 10 us).  Only NCCL
 * launches are timed: the program's own kernels are not seen, so there is no compute timeline.
 * GPU records timed this way carry CS_EV_GPU_EVENTS.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/front.h"
#include "internal.h"

#define MAX_DEVS 16
#define POOL_MAX 8192u /* events per device */
#define PENDING 4096u  /* launches in flight */
#define POLL_PER_LAUNCH 8
#define REF_MAX_AGE_NS 1000000000ull
#define REF_SPIN_NS 200000ull
#define REF_MAX_WIDTH_NS 50000ull

struct pending {
    cs__cudaEvent_t ev0, ev1;
    uint64_t launch, comm;
    uint32_t seq, ncalls;
    int dev;
    int state; /* 1 waiting, 2 done */
};

static struct dev_state {
    cs__cudaEvent_t free[POOL_MAX];
    uint32_t nfree, created;
    cudaStream_t own; /* commscope's stream for reference events */
    cs__cudaEvent_t ref;
    uint64_t ref_host, ref_width;
    int has_ref;
} devs[MAX_DEVS];

static struct pending ring[PENDING];
static uint32_t head, tail; /* [head, tail) in use, modulo PENDING */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int on;
static uint64_t untimed, graph_launches, worst_width, timed;

/* The calling thread's launch in progress (begin .. end). */
static __thread struct {
    uint64_t launch;
    cs__cudaEvent_t ev0;
    int dev, armed;
} cur;

/* Enter / leave the relaxed capture mode, so our queries are legal during a global capture. */
static int relax(void)
{
    int mode = CS__CUDA_CAPTURE_RELAXED;
    if (cs__rt.ThreadExchangeStreamCaptureMode &&
        cs__rt.ThreadExchangeStreamCaptureMode(&mode) == CS__CUDA_SUCCESS)
        return mode;
    return -1;
}

static void unrelax(int old)
{
    if (old >= 0)
        cs__rt.ThreadExchangeStreamCaptureMode(&old);
}

int cs__events_init(const char *reason)
{
    if (!cs__cudart_load() || !cs__rt.EventCreateWithFlags || !cs__rt.EventRecord ||
        !cs__rt.EventQuery || !cs__rt.EventElapsedTime || !cs__rt.StreamCreateWithFlags ||
        !cs__rt.GetDevice) {
        cs__trace_gpu_note("%s; the CUDA runtime's event functions were not found either: no "
                           "GPU timing",
                           reason);
        cs_warn("%s, and no CUDA runtime event functions were found: NCCL calls are recorded "
                "without GPU time",
                reason);
        return 0;
    }
    cs__trace_gpu_note("%s: NCCL launches timed with CUDA events instead (the program's own "
                       "kernels are not recorded)",
                       reason);
    cs_warn("%s: timing NCCL launches with CUDA events instead", reason);
    cs__trace_set_gpu_timing(CS_GPU_EVENTS);
    __atomic_store_n(&on, 1, __ATOMIC_RELEASE);
    return 1;
}

/* An event of device dev (mu held), or NULL. */
static cs__cudaEvent_t get_event(int dev)
{
    struct dev_state *d = &devs[dev];
    if (d->nfree)
        return d->free[--d->nfree];
    if (d->created >= POOL_MAX)
        return NULL;
    cs__cudaEvent_t e = NULL;
    if (cs__rt.EventCreateWithFlags(&e, CS__CUDA_EVENT_DEFAULT) != CS__CUDA_SUCCESS)
        return NULL;
    d->created++;
    return e;
}

static void put_event(int dev, cs__cudaEvent_t e)
{
    struct dev_state *d = &devs[dev];
    if (!e)
        return;
    if (d->nfree < POOL_MAX)
        d->free[d->nfree++] = e;
    else if (cs__rt.EventDestroy)
        cs__rt.EventDestroy(e);
}

/* Make sure device dev has a reference event younger than a second (mu held, relaxed mode).
 * Returns 1 when it has one. */
static int reference(int dev)
{
    struct dev_state *d = &devs[dev];
    uint64_t now = cs_now();
    if (d->has_ref && now - d->ref_host < REF_MAX_AGE_NS)
        return 1;
    /* Our stream and events must be made on dev, which has to be the current device. */
    int current = -1;
    if (cs__rt.GetDevice(&current) != CS__CUDA_SUCCESS || current != dev)
        return d->has_ref;
    if (!d->own &&
        cs__rt.StreamCreateWithFlags(&d->own, CS__CUDA_STREAM_NON_BLOCKING) != CS__CUDA_SUCCESS) {
        d->own = NULL;
        return d->has_ref;
    }
    cs__cudaEvent_t e = get_event(dev);
    if (!e)
        return d->has_ref;
    uint64_t t0 = cs_now();
    if (cs__rt.EventRecord(e, d->own) != CS__CUDA_SUCCESS) {
        put_event(dev, e);
        return d->has_ref;
    }
    uint64_t t1;
    int rc;
    do {
        rc = cs__rt.EventQuery(e);
        t1 = cs_now();
    } while (rc == CS__CUDA_NOT_READY && t1 - t0 < REF_SPIN_NS);
    if (rc != CS__CUDA_SUCCESS || t1 - t0 > REF_MAX_WIDTH_NS) {
        /* Not seen complete quickly enough to pin it down: keep the old reference (or none) and
         * try again at a later launch.  The event may still be pending on our own stream. */
        if (rc == CS__CUDA_SUCCESS)
            put_event(dev, e);
        return d->has_ref;
    }
    if (d->has_ref)
        put_event(dev, d->ref);
    d->ref = e;
    d->ref_host = t0 + (t1 - t0) / 2;
    d->ref_width = t1 - t0;
    d->has_ref = 1;
    if (d->ref_width > worst_width)
        worst_width = d->ref_width;
    return 1;
}

/* Try to read back pending launch p (mu held, relaxed mode).  Returns 1 when it is finished with
 * (recorded or given up), 0 while its GPU work is still running. */
static int read_back(struct pending *p)
{
    int rc = cs__rt.EventQuery(p->ev1);
    if (rc == CS__CUDA_NOT_READY)
        return 0;
    float a = 0, b = 0;
    int ok = rc == CS__CUDA_SUCCESS && reference(p->dev) &&
             cs__rt.EventElapsedTime(&a, devs[p->dev].ref, p->ev0) == CS__CUDA_SUCCESS &&
             cs__rt.EventElapsedTime(&b, p->ev0, p->ev1) == CS__CUDA_SUCCESS && b >= 0;
    if (!ok && rc == CS__CUDA_SUCCESS && !devs[p->dev].has_ref)
        return 0; /* no reference yet: keep it for a later try */
    if (ok) {
        struct dev_state *d = &devs[p->dev];
        int64_t start = (int64_t)d->ref_host + (int64_t)((double)a * 1e6 + (a < 0 ? -0.5 : 0.5));
        uint64_t dur = (uint64_t)((double)b * 1e6 + 0.5);
        cs__gpu_put(CS_OP_GPU_NCCL, (uint64_t)start, (uint64_t)start + dur, p->comm, p->seq, 0,
                    p->ncalls, p->launch, (uint32_t)p->dev, CS_EV_GPU_EVENTS);
        timed++;
    } else {
        untimed++;
    }
    put_event(p->dev, p->ev0);
    put_event(p->dev, p->ev1);
    return 1;
}

/* Read back up to max pending launches, oldest first (mu held). */
static void poll_locked(uint32_t max)
{
    if (head == tail)
        return;
    int old = relax();
    uint32_t n = 0;
    for (uint32_t i = head; i != tail && n < max; i = (i + 1) % PENDING, n++)
        if (ring[i].state == 1 && read_back(&ring[i]))
            ring[i].state = 2;
    while (head != tail && ring[head].state == 2)
        head = (head + 1) % PENDING;
    unrelax(old);
}

uint16_t cs__events_begin(uint64_t launch, cudaStream_t stream)
{
    cur.armed = 0;
    if (!__atomic_load_n(&on, __ATOMIC_ACQUIRE))
        return 0;
    int cap = cs__cuda_capturing(stream);
    if (cap) {
        pthread_mutex_lock(&mu);
        if (cap > 0)
            graph_launches++;
        else
            untimed++;
        pthread_mutex_unlock(&mu);
        return cap > 0 ? CS_EV_GRAPH : 0;
    }
    int dev = -1;
    if (cs__rt.GetDevice(&dev) != CS__CUDA_SUCCESS || dev < 0 || dev >= MAX_DEVS) {
        pthread_mutex_lock(&mu);
        untimed++;
        pthread_mutex_unlock(&mu);
        return 0;
    }
    pthread_mutex_lock(&mu);
    poll_locked(POLL_PER_LAUNCH);
    int old = relax();
    reference(dev);
    cs__cudaEvent_t e = (tail + 1) % PENDING != head ? get_event(dev) : NULL;
    unrelax(old);
    pthread_mutex_unlock(&mu);
    /* The stream may belong to another device than the current one: then the record fails and
     * the launch goes untimed. */
    if (!e || cs__rt.EventRecord(e, stream) != CS__CUDA_SUCCESS) {
        pthread_mutex_lock(&mu);
        if (e)
            put_event(dev, e);
        untimed++;
        pthread_mutex_unlock(&mu);
        return 0;
    }
    cur.launch = launch;
    cur.ev0 = e;
    cur.dev = dev;
    cur.armed = 1;
    return 0;
}

void cs__events_end(uint64_t launch, cudaStream_t stream, uint64_t comm, uint32_t seq,
                    uint32_t ncalls, ncclResult_t rc)
{
    if (!cur.armed || cur.launch != launch)
        return;
    cur.armed = 0;
    pthread_mutex_lock(&mu);
    cs__cudaEvent_t e = NULL;
    /* A failed launch put no work on the stream; ncclInProgress may enqueue it later. */
    if (rc == ncclSuccess) {
        int old = relax();
        e = get_event(cur.dev);
        unrelax(old);
    }
    if (!e || cs__rt.EventRecord(e, stream) != CS__CUDA_SUCCESS || (tail + 1) % PENDING == head) {
        /* ev0 may still be pending on the program's stream: drop it from the pool rather than
         * reuse it before it completed. */
        if (e)
            put_event(cur.dev, e);
        untimed++;
        pthread_mutex_unlock(&mu);
        return;
    }
    ring[tail] = (struct pending){.ev0 = cur.ev0,
                                  .ev1 = e,
                                  .launch = launch,
                                  .comm = comm,
                                  .seq = seq,
                                  .ncalls = ncalls,
                                  .dev = cur.dev,
                                  .state = 1};
    tail = (tail + 1) % PENDING;
    pthread_mutex_unlock(&mu);
}

static uint64_t drain_ms(void)
{
    const char *v = getenv("COMMSCOPE_GPU_DRAIN_MS");
    char *end;
    unsigned long long ms = v && *v ? strtoull(v, &end, 10) : 2000;
    return v && *v && *end ? 2000 : ms;
}

void cs__events_shutdown(void)
{
    if (!__atomic_exchange_n(&on, 0, __ATOMIC_ACQ_REL))
        return;
    pthread_mutex_lock(&mu);
    uint64_t deadline = cs_now() + drain_ms() * 1000000ull;
    for (;;) {
        poll_locked(PENDING);
        if (head == tail || cs_now() >= deadline)
            break;
        pthread_mutex_unlock(&mu);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        pthread_mutex_lock(&mu);
    }
    uint64_t left = (tail + PENDING - head) % PENDING;
    pthread_mutex_unlock(&mu);
    if (left) {
        cs__trace_gpu_note("%llu NCCL launches had not finished on the GPU at exit: not timed",
                           (unsigned long long)left);
        cs__trace_count_gpu_drop(left);
    }
    if (untimed) {
        cs__trace_gpu_note("%llu NCCL launches could not be timed with CUDA events",
                           (unsigned long long)untimed);
        cs__trace_count_gpu_drop(untimed);
    }
    if (graph_launches)
        cs__trace_gpu_note("%llu NCCL launches were captured into CUDA graphs (flag GRAPH): "
                           "their GPU time is not recorded",
                           (unsigned long long)graph_launches);
    if (worst_width > 10000)
        cs__trace_gpu_note("CUDA-event times mapped to the host clock within %llu us",
                           (unsigned long long)(worst_width / 2000));
}
