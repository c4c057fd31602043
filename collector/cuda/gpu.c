/*
 * GPU side of the collector: CUPTI's Activity API, loaded with dlopen when the process uses CUDA.
 *
 *   - kernels (CONCURRENT_KERNEL), memcpy and memset become GPU records; driver and runtime API
 *     records are enabled only because CUPTI emits external correlations with them, and skipped;
 *   - around every NCCL launch (one call, or a group at its ncclGroupEnd) the launch id is pushed
 *     as a CUPTI external correlation id, so CUPTI's EXTERNAL_CORRELATION records tie the launch
 *     to the correlation ids of the kernels it started: those kernels become gpu_nccl records
 *     with the launching call's communicator, sequence number and launch id.  A kernel named
 *     nccl* whose correlation was not seen is still a gpu_nccl record (launch id 0);
 *   - CUPTI is asked to stamp with cs_now() (cuptiActivityRegisterTimestampCallback), so GPU times
 *     are on this rank's host clock; where that call is missing, CUPTI's own timestamps are
 *     shifted by the offset between the two clocks, measured at start and at every buffer;
 *   - NCCL launches into a stream being captured into a CUDA graph are marked CS_EV_GRAPH (their
 *     kernels run later, at each graph launch, under the graph launch's correlation id); kernels
 *     and copies CUPTI reports with a graph id carry CS_EV_GRAPH too;
 *   - if CUPTI is missing, or another tool holds it (cuptiSubscribe answers
 *     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), NCCL launches are timed with CUDA events
 *     (events.c), and the trace says why (gpu_note, gpu_timing).
 *
 * COMMSCOPE_GPU=off turns all of this off, COMMSCOPE_GPU=events skips CUPTI (the fallback is
 * used); COMMSCOPE_CUPTI_LIB names the library to load (default libcupti.so.13, .12, libcupti.so,
 * then /usr/local/cuda/lib{,64}/libcupti.so and /usr/local/cuda/extras/CUPTI/lib64, where CUDA
 * toolkits install it).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/front.h"
#include "internal.h"

/* CUPTI's ABI, as far as it is used (cupti_activity.h, CUPTI 12/13).  Records are read by offset:
 * the prefixes below are the same in every record version since CUDA 11. */
enum {
    K_MEMCPY = 1,
    K_MEMSET = 2,
    K_KERNEL = 3,
    K_DRIVER = 4,
    K_RUNTIME = 5,
    K_CONCURRENT_KERNEL = 10,
    K_EXTERNAL_CORRELATION = 39,
    EXT_KIND_CUSTOM0 = 3,
    CUPTI_OK = 0,
    CUPTI_MAX_LIMIT_REACHED = 12,
    CUPTI_MULTIPLE_SUBSCRIBERS = 39,
};
#define BUF_BYTES (8u << 20)
#define BUF_ALIGN 8

typedef int cupti_rc;
typedef void (*buf_req_fn)(uint8_t **, size_t *, size_t *);
typedef void (*buf_done_fn)(void *, uint32_t, uint8_t *, size_t, size_t);
static struct {
    cupti_rc (*Subscribe)(void **, void *, void *);
    cupti_rc (*RegisterCallbacks)(buf_req_fn, buf_done_fn);
    cupti_rc (*Enable)(int);
    cupti_rc (*Disable)(int);
    cupti_rc (*FlushAll)(uint32_t);
    cupti_rc (*GetNextRecord)(uint8_t *, size_t, void **);
    cupti_rc (*Push)(int, uint64_t);
    cupti_rc (*Pop)(int, uint64_t *);
    cupti_rc (*RegisterTimestampCallback)(uint64_t (*)(void));
    cupti_rc (*GetTimestamp)(uint64_t *);
    cupti_rc (*GetNumDroppedRecords)(void *, uint32_t, size_t *);
} cu;

static int active;        /* CUPTI delivers records */
static int fallback;      /* CUDA events time NCCL launches (events.c) */
static int own_clock;     /* CUPTI stamps with cs_now() */
static int64_t clock_off; /* host - CUPTI, when it does not */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t flush_mu = PTHREAD_MUTEX_INITIALIZER;

/* What each launch was, for its kernels (written at launch end, read in the buffer callback). */
#define LAUNCHES 8192u
static struct launch_info {
    uint64_t launch; /* stored last (release) */
    uint64_t comm;
    uint32_t seq, ncalls;
} launches[LAUNCHES];

/* CUPTI correlation id -> launch id, filled from EXTERNAL_CORRELATION records. */
#define CORRS 65536u
static struct {
    uint32_t corr;
    uint64_t launch;
} corrs[CORRS];
/* CUPTI correlation id -> the runtime call's start (CUPTI's clock), from RUNTIME records: the
 * launch time of the program's kernels and copies (their bytes_recv), which puts them in the step
 * phase that launched them. */
static struct api_start {
    uint32_t corr;
    uint64_t start;
} apis[CORRS];

static uint64_t unmapped_nccl, graph_nccl, bad_records, graph_calls, foreign_records;

static uint64_t host_clock(void)
{
    return cs_now();
}

static int uses_cuda(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
        dlclose(h);
        return 1;
    }
    return dlsym(RTLD_DEFAULT, "cudaLaunchKernel") != NULL;
}

static void *open_cupti(char *tried, size_t cap)
{
    const char *env = getenv("COMMSCOPE_CUPTI_LIB");
    static const char *const names[] = {"libcupti.so.13",
                                        "libcupti.so.12",
                                        "libcupti.so",
                                        "/usr/local/cuda/lib64/libcupti.so",
                                        "/usr/local/cuda/lib/libcupti.so",
                                        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"};
    if (env && *env) {
        snprintf(tried, cap, "%s", env);
        return dlopen(env, RTLD_NOW | RTLD_LOCAL);
    }
    snprintf(tried, cap,
             "libcupti.so.13/.12/libcupti.so, /usr/local/cuda/lib{64,}, "
             "/usr/local/cuda/extras/CUPTI/lib64");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    return NULL;
}

static void buf_request(uint8_t **buf, size_t *size, size_t *max_records)
{
    *buf = aligned_alloc(BUF_ALIGN, BUF_BYTES);
    *size = *buf ? BUF_BYTES : 0;
    *max_records = 0;
}

static uint64_t rd64(const uint8_t *r, size_t off)
{
    uint64_t v;
    memcpy(&v, r + off, sizeof v);
    return v;
}

static uint32_t rd32(const uint8_t *r, size_t off)
{
    uint32_t v;
    memcpy(&v, r + off, sizeof v);
    return v;
}

static uint64_t to_host(uint64_t t)
{
    return own_clock ? t : (uint64_t)((int64_t)t + clock_off);
}

void cs__gpu_put(uint16_t op, uint64_t start, uint64_t end, uint64_t comm, uint32_t seq,
                 uint64_t bytes, uint64_t brecv, uint64_t launch, uint32_t dev, uint16_t flags)
{
    struct cs_event *ev = cs_rec_begin();
    if (!ev)
        return;
    ev->t_begin = start;
    ev->t_end = end;
    ev->comm = comm;
    ev->seq = seq;
    ev->bytes = bytes;
    ev->bytes_recv = brecv;
    ev->request = launch;
    ev->peer = -1;
    ev->op = op;
    ev->flags = flags;
    ev->aux = (int32_t)dev;
    cs_rec_commit(ev);
}

/* A CUPTI record (times checked by the caller): times mapped from CUPTI's clock to the host's. */
static void put(uint16_t op, uint64_t start, uint64_t end, uint64_t comm, uint32_t seq,
                uint64_t bytes, uint64_t brecv, uint64_t launch, uint32_t dev, uint32_t graph)
{
    cs__gpu_put(op, to_host(start), to_host(end), comm, seq, bytes, brecv, launch, dev,
                graph ? CS_EV_GRAPH : 0);
}

/* The host time of the runtime call with CUPTI correlation id corr (its API record), 0 unseen. */
static uint64_t launched_at(uint32_t corr)
{
    const struct api_start *a = &apis[corr & (CORRS - 1)];
    return a->corr == corr && a->start ? to_host(a->start) : 0;
}

/* The launch whose external correlation covered CUPTI correlation id corr, or 0. */
static uint64_t launch_of(uint32_t corr)
{
    return corrs[corr & (CORRS - 1)].corr == corr ? corrs[corr & (CORRS - 1)].launch : 0;
}

static void kernel(const uint8_t *r)
{
    uint64_t start = rd64(r, 16), end = rd64(r, 24);
    uint32_t dev = rd32(r, 40), stream = rd32(r, 48), corr = rd32(r, 92), graph = rd32(r, 156);
    if (!start || end < start) {
        bad_records++;
        return;
    }
    const char *name;
    memcpy(&name, r + 104, sizeof name);
    uint64_t launch = launch_of(corr);
    if (launch) {
        const struct launch_info *li = &launches[launch & (LAUNCHES - 1)];
        if (__atomic_load_n(&li->launch, __ATOMIC_ACQUIRE) == launch) {
            put(CS_OP_GPU_NCCL, start, end, li->comm, li->seq, 0, li->ncalls, launch, dev, graph);
            return;
        }
        put(CS_OP_GPU_NCCL, start, end, 0, 0, 0, 0, launch, dev, graph);
        return;
    }
    /* NCCL's kernels: ncclDevKernel_* (2.19+), ncclKernel_* (older), named by CUPTI with their
     * mangled names (_Z...ncclDevKernel_...). */
    if (name && (strstr(name, "ncclDevKernel") || strstr(name, "ncclKernel"))) {
        /* Kernels of a graph launch carry the graph launch's correlation, not the NCCL call's. */
        if (graph)
            graph_nccl++;
        else
            unmapped_nccl++;
        put(CS_OP_GPU_NCCL, start, end, 0, 0, 0, 0, 0, dev, graph);
        return;
    }
    put(CS_OP_GPU_KERNEL, start, end, 0, stream, 0, launched_at(corr), 0, dev, graph);
}

/* A memcpy/memset: the program's own, or NCCL's (a one-rank communicator copies with
 * cudaMemcpyAsync), which counts as the launch's GPU work. */
static void copy(const uint8_t *r, uint16_t op)
{
    uint64_t start = rd64(r, 16), end = rd64(r, 24), bytes = rd64(r, 8);
    uint32_t dev = rd32(r, 32), stream = rd32(r, 40), corr = rd32(r, 44), graph = rd32(r, 72);
    if (!start || end < start) {
        bad_records++;
        return;
    }
    uint64_t launch = launch_of(corr);
    const struct launch_info *li = &launches[launch & (LAUNCHES - 1)];
    if (launch && __atomic_load_n(&li->launch, __ATOMIC_ACQUIRE) == launch)
        put(CS_OP_GPU_NCCL, start, end, li->comm, li->seq, bytes, li->ncalls, launch, dev, graph);
    else
        put(op, start, end, 0, stream, bytes, launched_at(corr), 0, dev, graph);
}

/*
 * Buffers CUPTI completed before the trace opened (CUPTI started at load time, see early_start):
 * kept until cs__gpu_init runs with the trace open.  More than HELD are dropped (counted).
 */
#define HELD 32
static struct held {
    uint8_t *buf;
    size_t valid;
} held[HELD];
static int nheld;
static uint64_t held_lost;
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;

static void process(void *ctx, uint32_t stream, uint8_t *buf, size_t valid);

static void buf_complete(void *ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    (void)size;
    if (!buf)
        return;
    pthread_mutex_lock(&held_mu);
    if (!cs_trace_header()) {
        if (nheld < HELD) {
            held[nheld++] = (struct held){buf, valid};
        } else {
            held_lost++;
            free(buf);
        }
        pthread_mutex_unlock(&held_mu);
        return;
    }
    pthread_mutex_unlock(&held_mu);
    process(ctx, stream, buf, valid);
}

/* Hand the buffers held before the trace opened to the trace (trace open). */
static void release_held(void)
{
    pthread_mutex_lock(&held_mu);
    int n = nheld;
    struct held h[HELD];
    memcpy(h, held, sizeof h);
    nheld = 0;
    pthread_mutex_unlock(&held_mu);
    for (int i = 0; i < n; i++)
        process(NULL, 0, h[i].buf, h[i].valid);
}

/* Turn one buffer of CUPTI records into trace records, and free it. */
static void process(void *ctx, uint32_t stream, uint8_t *buf, size_t valid)
{
    if (!own_clock && cu.GetTimestamp) {
        uint64_t c = 0;
        if (cu.GetTimestamp(&c) == CUPTI_OK)
            clock_off = (int64_t)(cs_now() - c);
    }
    /* Correlations first: a kernel and its launch's correlation record share a buffer when the
     * kernel finished before the buffer was handed over. */
    for (int pass = 0; pass < 2; pass++) {
        void *rec = NULL;
        while (cu.GetNextRecord(buf, valid, &rec) == CUPTI_OK) {
            const uint8_t *r = rec;
            uint32_t kind = rd32(r, 0);
            if (pass == 0) {
                if (kind == K_RUNTIME) {
                    /* CUpti_ActivityAPI: the launching call's start, for its work's records. */
                    uint32_t corr = rd32(r, 32);
                    apis[corr & (CORRS - 1)].corr = corr;
                    apis[corr & (CORRS - 1)].start = rd64(r, 8);
                }
                if (kind == K_EXTERNAL_CORRELATION && rd32(r, 4) == EXT_KIND_CUSTOM0) {
                    uint32_t corr = rd32(r, 16);
                    corrs[corr & (CORRS - 1)].corr = corr;
                    corrs[corr & (CORRS - 1)].launch = rd64(r, 8);
                }
                continue;
            }
            switch (kind) {
            case K_KERNEL:
            case K_CONCURRENT_KERNEL:
                kernel(r);
                break;
            case K_MEMCPY:
            case K_MEMSET:
                copy(r, kind == K_MEMCPY ? CS_OP_GPU_MEMCPY : CS_OP_GPU_MEMSET);
                break;
            case K_EXTERNAL_CORRELATION:
            case K_DRIVER:
            case K_RUNTIME:
                break;
            default:
                foreign_records++;
                break;
            }
        }
    }
    size_t dropped = 0;
    if (cu.GetNumDroppedRecords && cu.GetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_OK &&
        dropped)
        cs__trace_count_gpu_drop(dropped);
    free(buf);
}

static void no_callback(void)
{
}

/* Start CUPTI.  Returns 1 when it delivers records; else 0 with why in reason. */
static int start_cupti(char *reason, size_t cap)
{
    char tried[256];
    void *h = open_cupti(tried, sizeof tried);
    if (!h) {
        snprintf(reason, cap, "CUPTI not found (%s)", tried);
        return 0;
    }
#define SYM(field, name) *(void **)&cu.field = dlsym(h, name)
    SYM(Subscribe, "cuptiSubscribe");
    SYM(RegisterCallbacks, "cuptiActivityRegisterCallbacks");
    SYM(Enable, "cuptiActivityEnable");
    SYM(Disable, "cuptiActivityDisable");
    SYM(FlushAll, "cuptiActivityFlushAll");
    SYM(GetNextRecord, "cuptiActivityGetNextRecord");
    SYM(Push, "cuptiActivityPushExternalCorrelationId");
    SYM(Pop, "cuptiActivityPopExternalCorrelationId");
    SYM(RegisterTimestampCallback, "cuptiActivityRegisterTimestampCallback");
    SYM(GetTimestamp, "cuptiGetTimestamp");
    SYM(GetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
#undef SYM
    if (!cu.Subscribe || !cu.RegisterCallbacks || !cu.Enable || !cu.FlushAll || !cu.GetNextRecord ||
        !cu.Push || !cu.Pop) {
        snprintf(reason, cap, "CUPTI (%s) lacks the Activity API functions needed", tried);
        return 0;
    }
    void *sub = NULL;
    cupti_rc rc = cu.Subscribe(&sub, (void *)no_callback, NULL);
    if (rc == CUPTI_MULTIPLE_SUBSCRIBERS) {
        snprintf(reason, cap,
                 "CUPTI is already used by another tool "
                 "(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)");
        return 0;
    }
    if (rc != CUPTI_OK) {
        snprintf(reason, cap, "cuptiSubscribe failed (CUPTI error %d)", rc);
        return 0;
    }
    own_clock = cu.RegisterTimestampCallback && cu.RegisterTimestampCallback(host_clock) == 0;
    if (!own_clock) {
        uint64_t c = 0;
        if (cu.GetTimestamp && cu.GetTimestamp(&c) == CUPTI_OK)
            clock_off = (int64_t)(cs_now() - c);
    }
    if (cu.RegisterCallbacks(buf_request, (buf_done_fn)buf_complete) != CUPTI_OK) {
        snprintf(reason, cap, "cuptiActivityRegisterCallbacks failed");
        return 0;
    }
    /* External correlation records only precede API records: the driver (NCCL launches with
     * cuLaunchKernelEx) and runtime API kinds must be on for launches to be tied to calls. */
    static const int kinds[] = {K_CONCURRENT_KERNEL,   K_MEMCPY, K_MEMSET, K_DRIVER, K_RUNTIME,
                                K_EXTERNAL_CORRELATION};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        rc = cu.Enable(kinds[i]);
        if (rc != CUPTI_OK) {
            for (size_t k = 0; k < i && cu.Disable; k++)
                cu.Disable(kinds[k]);
            snprintf(reason, cap, "cuptiActivityEnable(%d) failed (CUPTI error %d)", kinds[i], rc);
            return 0;
        }
    }
    return 1;
}

static int early_tried, early_ok;
static char early_reason[384];

static int gpu_off(void)
{
    const char *mode = getenv("COMMSCOPE_GPU");
    return mode && (!strcasecmp(mode, "off") || !strcmp(mode, "0"));
}

static int events_forced(void)
{
    const char *mode = getenv("COMMSCOPE_GPU");
    return mode && !strcasecmp(mode, "events");
}

static void init_once(void)
{
    if (gpu_off() || (!early_tried && !uses_cuda()))
        return;
    cs__cudart_load();
    char reason[384];
    int ok;
    if (events_forced()) {
        snprintf(reason, sizeof reason, "CUPTI not used (COMMSCOPE_GPU=events)");
        ok = 0;
    } else if (early_tried) {
        snprintf(reason, sizeof reason, "%s", early_reason);
        ok = early_ok;
    } else {
        ok = start_cupti(reason, sizeof reason);
    }
    if (ok) {
        cs__trace_set_gpu_timing(CS_GPU_CUPTI);
        __atomic_store_n(&active, 1, __ATOMIC_RELEASE);
        release_held();
        return;
    }
    if (cs__events_init(reason))
        __atomic_store_n(&fallback, 1, __ATOMIC_RELEASE);
}

/*
 * At load time: when the program was linked with both the CUDA runtime and a real NCCL, start
 * CUPTI now, so kernels launched before the first NCCL call (which opens the trace in jobs
 * without MPI) are recorded too; their buffers wait for the trace (held[]).  Programs that load
 * CUDA or NCCL later (Python) start CUPTI at their first NCCL call.  CUPTI's Activity API may be
 * enabled before CUDA is initialised; nothing here initialises CUDA.
 */
__attribute__((constructor)) static void early_start(void)
{
    if (gpu_off() || events_forced() || !dlsym(RTLD_DEFAULT, "cudaLaunchKernel"))
        return;
    void *nccl = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
    if (nccl)
        dlclose(nccl);
    if (!nccl && !dlsym(RTLD_DEFAULT, "pncclAllReduce"))
        return;
    early_tried = 1;
    early_ok = start_cupti(early_reason, sizeof early_reason);
}

void cs__gpu_init(void)
{
    pthread_once(&once, init_once);
}

uint16_t cs__gpu_stream_flags(cudaStream_t stream)
{
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE) &&
        !__atomic_load_n(&fallback, __ATOMIC_ACQUIRE))
        return 0;
    return cs__cuda_capturing(stream) > 0 ? CS_EV_GRAPH : 0;
}

uint16_t cs__gpu_launch_begin(uint64_t launch, cudaStream_t stream)
{
    if (__atomic_load_n(&fallback, __ATOMIC_ACQUIRE))
        return cs__events_begin(launch, stream);
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE))
        return 0;
    cu.Push(EXT_KIND_CUSTOM0, launch);
    if (cs__cuda_capturing(stream) > 0) {
        __atomic_add_fetch(&graph_calls, 1, __ATOMIC_RELAXED);
        return CS_EV_GRAPH;
    }
    return 0;
}

void cs__gpu_launch_end(uint64_t launch, cudaStream_t stream, uint64_t comm, uint32_t seq,
                        uint32_t ncalls, ncclResult_t rc)
{
    if (__atomic_load_n(&fallback, __ATOMIC_ACQUIRE)) {
        cs__events_end(launch, stream, comm, seq, ncalls, rc);
        return;
    }
    if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE))
        return;
    uint64_t last = 0;
    cu.Pop(EXT_KIND_CUSTOM0, &last);
    struct launch_info *li = &launches[launch & (LAUNCHES - 1)];
    li->comm = comm;
    li->seq = seq;
    li->ncalls = ncalls;
    __atomic_store_n(&li->launch, launch, __ATOMIC_RELEASE);
}

void cs__gpu_shutdown(void)
{
    if (__atomic_load_n(&fallback, __ATOMIC_ACQUIRE)) {
        cs__events_shutdown();
        return;
    }
    if (!__atomic_exchange_n(&active, 0, __ATOMIC_ACQ_REL))
        return;
    pthread_mutex_lock(&flush_mu);
    cu.FlushAll(1); /* CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: also records of unfinished buffers */
    if (unmapped_nccl)
        cs__trace_gpu_note("%llu NCCL kernels could not be mapped to their launch",
                           (unsigned long long)unmapped_nccl);
    if (graph_calls || graph_nccl)
        cs__trace_gpu_note("%llu NCCL calls captured into CUDA graphs (GRAPH), %llu NCCL kernels "
                           "of graph launches not mapped to calls",
                           (unsigned long long)graph_calls, (unsigned long long)graph_nccl);
    if (bad_records) {
        cs__trace_gpu_note("%llu CUPTI records with impossible times skipped",
                           (unsigned long long)bad_records);
        cs__trace_count_gpu_drop(bad_records);
    }
    if (foreign_records)
        cs__trace_gpu_note("%llu CUPTI records of kinds not enabled ignored",
                           (unsigned long long)foreign_records);
    if (held_lost) {
        cs__trace_gpu_note("%llu CUPTI buffers completed before the trace opened were dropped",
                           (unsigned long long)held_lost);
        cs__trace_count_gpu_drop(held_lost);
    }
    pthread_mutex_unlock(&flush_mu);
}

void cs__gpu_bus_id(int dev, char *out, size_t cap)
{
    if (!cap)
        return;
    out[0] = '\0';
    if (dev < 0 || cap < 2)
        return;
    /* The CUDA runtime the program already loaded, if any; never loaded by us. */
    int (*fn)(char *, int, int) =
        (int (*)(char *, int, int))dlsym(RTLD_DEFAULT, "cudaDeviceGetPCIBusId");
    if (!fn || fn(out, (int)cap, dev) != 0)
        out[0] = '\0';
    out[cap - 1] = '\0';
}
