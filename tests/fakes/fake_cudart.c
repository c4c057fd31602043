/*
 * TEST DOUBLE: a CUDA runtime (libcudart.so.13 ABI subset, see fake_cuda.h) whose "GPU" is a set
 * of per-stream timelines on the host clock.  Nothing runs; kernels, copies and sets occupy their
 * stream for the duration the program scripted, events complete when their stream's earlier work
 * ends, and cudaEventQuery / cudaEventElapsedTime answer from those times.  It also counts what a
 * profiler must never do to a program (synchronise its streams, record into a capture, make
 * unsafe calls during a global-mode capture) so tests can assert that commscope did none of it.
 *
 * FAKE_CUDA_LOG=PATH appends one line per piece of work that ran ("work KIND NAME dev D stream S
 * corr C graph G start T0 end T1 bytes B"): the ground truth the tests compare traces with.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda.h"

#define API __attribute__((visibility("default")))
#define MAX_DEVS 16
#define MAX_GRAPH_ITEMS 256

struct item {
    int kind;
    const char *name;
    uint64_t ns, bytes;
};

struct CUstream_st {
    int dev;
    uint32_t id;
    uint64_t tail;
    uint32_t open; /* the unfinished work at the stream's tail (fakeCudaLaunchOpen), 0 none */
    int capturing, mode;
    struct CUgraph_st *graph;
};
struct CUevent_st {
    int dev;
    unsigned flags;
    int recorded;
    uint64_t when;
    uint32_t open; /* recorded behind unfinished work: completes when it does */
};
struct CUgraph_st {
    int n;
    struct item items[MAX_GRAPH_ITEMS];
};
struct CUgraphExec_st {
    uint32_t id;
    struct CUgraph_st g;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st legacy[MAX_DEVS]; /* the NULL stream of each device */
static uint32_t next_stream_id = 16, next_graph_id = 1, next_corr = 1;
static int global_captures;
static struct CUstream_st *capturing[64]; /* streams in capture (global mode or not) */
static int ncapturing;
static struct fake_cuda_stats stats;
static struct fake_cuda_observer observer;
static const char *names[4096]; /* interned kernel names (reachable until exit) */
static int nnames;

/* Unfinished work (fakeCudaLaunchOpen): its stream's tail is unknown until fakeCudaComplete. */
#define MAX_OPEN 256
static struct open_work {
    uint32_t id; /* 0: free */
    int done;
    struct CUstream_st *st;
    struct fake_cuda_work w;
} opens[MAX_OPEN];
static uint32_t next_open = 1;
static pthread_cond_t open_cv = PTHREAD_COND_INITIALIZER;

/* Work id lives in slot id % MAX_OPEN until a later id reuses the slot (only once it is done). */
static struct open_work *open_of(uint32_t id)
{
    struct open_work *o = &opens[id % MAX_OPEN];
    return id && o->id == id ? o : NULL;
}

static __thread int cur_dev;
static __thread uint64_t next_ns;
static __thread enum cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* FAKE_CUDA_DEVICES: the number of simulated GPUs (default 8); 0: none, as on a machine without
 * a GPU, where the runtime answers cudaErrorNoDevice. */
static int ndevs(void)
{
    const char *v = getenv("FAKE_CUDA_DEVICES");
    int n = v ? atoi(v) : 8;
    return n < 0 ? 0 : n > MAX_DEVS ? MAX_DEVS : n;
}

static uint64_t take_duration(void)
{
    uint64_t ns = next_ns;
    next_ns = 0;
    if (ns)
        return ns;
    const char *v = getenv("FAKE_CUDA_DEFAULT_NS");
    return v ? strtoull(v, NULL, 10) : 10000;
}

static struct CUstream_st *stream_of(cudaStream_t s)
{
    if (s)
        return s;
    struct CUstream_st *l = &legacy[cur_dev];
    l->dev = cur_dev;
    l->id = 7;
    return l;
}

static const char *intern(const char *name)
{
    for (int i = 0; i < nnames; i++)
        if (!strcmp(names[i], name))
            return names[i];
    if (nnames == (int)(sizeof names / sizeof names[0]))
        return names[nnames - 1];
    names[nnames] = strdup(name);
    return names[nnames] ? names[nnames++] : "?";
}

/* Unsafe during a global-mode capture unless this thread switched to relaxed mode. */
static int unsafe_now(void)
{
    if (global_captures && thread_mode != cudaStreamCaptureModeRelaxed) {
        /* As in CUDA: the call fails and the captures are invalidated. */
        stats.unsafe_in_capture++;
        for (int i = 0; i < ncapturing; i++)
            capturing[i]->capturing = 2;
        return 1;
    }
    return 0;
}

static uint64_t api_t; /* the host time of the launching call being served (under mu) */

static void log_work(const struct fake_cuda_work *w)
{
    const char *path = getenv("FAKE_CUDA_LOG");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    static const char *const kinds[] = {"kernel", "memcpy", "memset"};
    fprintf(f,
            "work %s %s dev %d stream %u corr %u graph %u start %llu end %llu bytes %llu launch "
            "%llu\n",
            kinds[w->kind], w->name ? w->name : "-", w->dev, w->stream_id, w->corr, w->graph_id,
            (unsigned long long)w->start, (unsigned long long)w->end, (unsigned long long)w->bytes,
            (unsigned long long)w->launch);
    fclose(f);
}

/* Run (or capture) one item on s; mu held.  corr: the launching API call's correlation id. */
static void run_item(struct CUstream_st *st, const struct item *it, uint32_t corr, uint32_t graph)
{
    if (st->capturing && !graph) {
        if (st->graph && st->graph->n < MAX_GRAPH_ITEMS)
            st->graph->items[st->graph->n++] = *it;
        stats.captured++;
        return;
    }
    uint64_t t = now_ns();
    if (st->open) {
        /* Behind unfinished work: the double cannot know when it starts (not supported). */
        stats.behind_open++;
        return;
    }
    struct fake_cuda_work w = {.kind = it->kind,
                               .name = it->name,
                               .dev = st->dev,
                               .launch = api_t,
                               .stream_id = st->id,
                               .corr = corr,
                               .graph_id = graph,
                               .start = st->tail > t ? st->tail : t,
                               .bytes = it->bytes};
    w.end = w.start + it->ns;
    st->tail = w.end;
    stats.launches++;
    log_work(&w);
    if (observer.done)
        observer.done(&w);
}

/* A runtime call that launches work: its correlation id, after CUPTI saw the call in the
 * launching thread (its external correlation stack).  Returns with mu held. */
static uint32_t api_call(void)
{
    pthread_mutex_lock(&mu);
    uint32_t corr = next_corr++;
    pthread_mutex_unlock(&mu);
    uint64_t t = now_ns();
    if (observer.api)
        observer.api(corr, t);
    pthread_mutex_lock(&mu);
    api_t = t;
    return corr;
}

static cudaError_t launch(int kind, const char *name, uint64_t ns, uint64_t bytes, cudaStream_t s)
{
    uint32_t corr = api_call();
    struct item it = {kind, name ? intern(name) : NULL, ns, bytes};
    struct CUstream_st *st = stream_of(s);
    run_item(st, &it, corr, 0);
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

API void fakeCudaNextDuration(uint64_t ns)
{
    next_ns = ns;
}

API cudaError_t fakeCudaLaunchNamed(const char *name, uint64_t ns, cudaStream_t s)
{
    return launch(0, name, ns ? ns : take_duration(), 0, s);
}

API uint32_t fakeCudaLaunchOpen(const char *name, cudaStream_t s)
{
    uint32_t corr = api_call();
    struct CUstream_st *st = stream_of(s);
    struct open_work *o = &opens[next_open % MAX_OPEN];
    uint32_t id = 0;
    if ((!o->id || o->done) && !st->open && !st->capturing) {
        uint64_t t = now_ns();
        id = next_open++;
        *o = (struct open_work){.id = id, .st = st};
        o->w = (struct fake_cuda_work){.kind = 0,
                                       .name = intern(name),
                                       .dev = st->dev,
                                       .stream_id = st->id,
                                       .corr = corr,
                                       .start = st->tail > t ? st->tail : t};
        st->open = id;
    }
    pthread_mutex_unlock(&mu);
    return id;
}

API void fakeCudaComplete(uint32_t id)
{
    pthread_mutex_lock(&mu);
    struct open_work *o = open_of(id);
    if (o && !o->done) {
        uint64_t t = now_ns();
        o->done = 1;
        o->w.end = t > o->w.start ? t : o->w.start;
        if (o->st->open == id) {
            o->st->open = 0;
            o->st->tail = o->w.end;
        }
        stats.launches++;
        log_work(&o->w);
        if (observer.done)
            observer.done(&o->w);
        pthread_cond_broadcast(&open_cv);
    }
    pthread_mutex_unlock(&mu);
}

/* When event e completes (mu held): its recorded time, or that of the unfinished work it is
 * behind once that completed; UINT64_MAX while it has not. */
static uint64_t event_when(struct CUevent_st *e)
{
    if (e->open) {
        /* A reused slot: the work finished long ago (its end is no longer known). */
        const struct open_work *o = open_of(e->open);
        if (o && !o->done)
            return UINT64_MAX;
        if (o && o->w.end > e->when)
            e->when = o->w.end;
        e->open = 0;
    }
    return e->when;
}

API uint64_t fakeCudaStreamTail(cudaStream_t s)
{
    pthread_mutex_lock(&mu);
    uint64_t t = stream_of(s)->tail;
    pthread_mutex_unlock(&mu);
    return t;
}

API void fakeCudaStats(struct fake_cuda_stats *out)
{
    pthread_mutex_lock(&mu);
    *out = stats;
    pthread_mutex_unlock(&mu);
}

API void fakeCudaObserve(const struct fake_cuda_observer *o)
{
    pthread_mutex_lock(&mu);
    observer = *o;
    pthread_mutex_unlock(&mu);
}

API cudaError_t cudaGetDeviceCount(int *count)
{
    *count = ndevs();
    return *count ? cudaSuccess : cudaErrorNoDevice;
}

/* "Device" memory is host memory (the CPU NCCL double moves it). */
API cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
    if (!ptr)
        return cudaErrorInvalidValue;
    if (!ndevs())
        return cudaErrorNoDevice;
    *ptr = calloc(1, bytes ? bytes : 1);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

API cudaError_t cudaFree(void *ptr)
{
    free(ptr);
    return cudaSuccess;
}

API cudaError_t cudaGetDevice(int *device)
{
    *device = cur_dev;
    return cudaSuccess;
}

API cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= ndevs())
        return cudaErrorInvalidDevice;
    cur_dev = device;
    return cudaSuccess;
}

API cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int device)
{
    if (device < 0 || device >= ndevs() || !bus || len < 13)
        return cudaErrorInvalidValue;
    snprintf(bus, (size_t)len, "0000:%02x:00.0", 0x18 + device);
    return cudaSuccess;
}

API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    (void)flags;
    struct CUstream_st *st = calloc(1, sizeof *st);
    if (!st)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&mu);
    st->dev = cur_dev;
    st->id = next_stream_id++;
    pthread_mutex_unlock(&mu);
    *s = st;
    return cudaSuccess;
}

API cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    return cudaStreamCreateWithFlags(s, 0);
}

API cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    free(s);
    return cudaSuccess;
}

/* A real synchronisation would wait for the stream's tail; the double only counts it, and waits
 * only for unfinished work (fakeCudaLaunchOpen) on s (NULL: on the current device). */
API cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    pthread_mutex_lock(&mu);
    stats.syncs++;
    cudaError_t rc = unsafe_now() ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
    for (;;) {
        int waiting = 0;
        for (int i = 0; i < MAX_OPEN && rc == cudaSuccess; i++)
            waiting |= opens[i].id && !opens[i].done &&
                       (s ? opens[i].st == s : opens[i].st->dev == cur_dev);
        if (!waiting)
            break;
        pthread_cond_wait(&open_cv, &mu);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

API cudaError_t cudaDeviceSynchronize(void)
{
    return cudaStreamSynchronize(NULL);
}

API cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
    pthread_mutex_lock(&mu);
    if (!s && global_captures) {
        /* The legacy stream would synchronise with the capturing streams. */
        pthread_mutex_unlock(&mu);
        return cudaErrorStreamCaptureImplicit;
    }
    struct CUstream_st *st = stream_of(s);
    *status = st->capturing == 2   ? cudaStreamCaptureStatusInvalidated
              : st->capturing == 1 ? cudaStreamCaptureStatusActive
                                   : cudaStreamCaptureStatusNone;
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

API cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    if (!s)
        return cudaErrorStreamCaptureUnsupported; /* the legacy stream cannot be captured */
    pthread_mutex_lock(&mu);
    cudaError_t rc = cudaSuccess;
    if (s->capturing || ncapturing == (int)(sizeof capturing / sizeof capturing[0])) {
        rc = cudaErrorInvalidValue;
    } else if (!(s->graph = calloc(1, sizeof *s->graph))) {
        rc = cudaErrorInvalidValue;
    } else {
        s->capturing = 1;
        s->mode = mode;
        capturing[ncapturing++] = s;
        if (mode == cudaStreamCaptureModeGlobal)
            global_captures++;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

API cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
    if (!s)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&mu);
    if (!s->capturing) {
        pthread_mutex_unlock(&mu);
        return cudaErrorInvalidValue;
    }
    if (s->mode == cudaStreamCaptureModeGlobal)
        global_captures--;
    for (int i = 0; i < ncapturing; i++)
        if (capturing[i] == s)
            capturing[i] = capturing[--ncapturing];
    cudaError_t rc = s->capturing == 2 ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
    *graph = rc == cudaSuccess ? s->graph : NULL;
    if (rc != cudaSuccess)
        free(s->graph);
    s->graph = NULL;
    s->capturing = 0;
    pthread_mutex_unlock(&mu);
    return rc;
}

API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    enum cudaStreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return cudaSuccess;
}

API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                     unsigned long long flags)
{
    (void)flags;
    struct CUgraphExec_st *x = calloc(1, sizeof *x);
    if (!x || !graph) {
        free(x);
        return cudaErrorInvalidValue;
    }
    pthread_mutex_lock(&mu);
    x->id = next_graph_id++;
    pthread_mutex_unlock(&mu);
    x->g = *graph;
    *exec = x;
    return cudaSuccess;
}

/* All work of one graph launch shares the cudaGraphLaunch call's correlation id. */
API cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
    if (!exec)
        return cudaErrorInvalidValue;
    uint32_t corr = api_call();
    struct CUstream_st *st = stream_of(s);
    for (int i = 0; i < exec->g.n; i++)
        run_item(st, &exec->g.items[i], corr, exec->id);
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    free(exec);
    return cudaSuccess;
}

API cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    free(graph);
    return cudaSuccess;
}

API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    struct CUevent_st *ev = calloc(1, sizeof *ev);
    if (!ev)
        return cudaErrorInvalidValue;
    ev->dev = cur_dev;
    ev->flags = flags;
    *e = ev;
    return cudaSuccess;
}

API cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return cudaEventCreateWithFlags(e, cudaEventDefault);
}

API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (!e)
        return cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&mu);
    struct CUstream_st *st = stream_of(s);
    cudaError_t rc = cudaSuccess;
    if (st->dev != e->dev) {
        rc = cudaErrorInvalidResourceHandle;
    } else if (st->capturing) {
        /* Real CUDA would add a node to the program's graph: a profiler must never do this. */
        stats.capture_intrusions++;
    } else {
        uint64_t t = now_ns();
        e->recorded = 1;
        e->when = st->tail > t ? st->tail : t;
        e->open = st->open;
        stats.events_recorded++;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

API cudaError_t cudaEventQuery(cudaEvent_t e)
{
    if (!e)
        return cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&mu);
    stats.event_queries++;
    if (global_captures && thread_mode == cudaStreamCaptureModeRelaxed)
        stats.relaxed_queries_in_capture++;
    cudaError_t rc = unsafe_now()                                ? cudaErrorStreamCaptureUnsupported
                     : !e->recorded || event_when(e) <= now_ns() ? cudaSuccess
                                                                 : cudaErrorNotReady;
    pthread_mutex_unlock(&mu);
    return rc;
}

API cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    (void)e;
    return cudaStreamSynchronize(NULL);
}

/* Like the real one: both events complete and timed, float milliseconds (~0.5 us resolution). */
API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if (!a || !b || !ms)
        return cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&mu);
    cudaError_t rc = cudaSuccess;
    uint64_t t = now_ns();
    if (unsafe_now())
        rc = cudaErrorStreamCaptureUnsupported;
    else if ((a->flags | b->flags) & cudaEventDisableTiming || !a->recorded || !b->recorded)
        rc = cudaErrorInvalidResourceHandle;
    else if (event_when(a) > t || event_when(b) > t)
        rc = cudaErrorNotReady;
    else
        *ms = (float)(((double)b->when - (double)a->when) / 1e6);
    pthread_mutex_unlock(&mu);
    return rc;
}

API cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    free(e);
    return cudaSuccess;
}

/* The counters, for the tests, once every atexit handler (commscope's drain) has run. */
__attribute__((destructor)) static void log_stats(void)
{
    const char *path = getenv("FAKE_CUDA_LOG");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f)
        return;
    fprintf(f,
            "stats launches %llu captured %llu syncs %llu capture_intrusions %llu "
            "unsafe_in_capture %llu events_recorded %llu event_queries %llu "
            "relaxed_queries_in_capture %llu\n",
            (unsigned long long)stats.launches, (unsigned long long)stats.captured,
            (unsigned long long)stats.syncs, (unsigned long long)stats.capture_intrusions,
            (unsigned long long)stats.unsafe_in_capture, (unsigned long long)stats.events_recorded,
            (unsigned long long)stats.event_queries,
            (unsigned long long)stats.relaxed_queries_in_capture);
    fclose(f);
}

API cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                 cudaStream_t s)
{
    (void)grid;
    (void)block;
    (void)args;
    (void)shmem;
    char name[64];
    snprintf(name, sizeof name, "kernel_%p", func);
    return launch(0, name, take_duration(), 0, s);
}

API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                                cudaStream_t s)
{
    (void)kind;
    if (bytes && dst && src && dst != src)
        memmove(dst, src, bytes);
    return launch(1, NULL, take_duration(), bytes, s);
}

API cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s)
{
    if (bytes && dst)
        memset(dst, value, bytes);
    return launch(2, NULL, take_duration(), bytes, s);
}
