/*
 * GPU side of the collector: CUPTI's Activity API, loaded with dlopen when the process uses CUDA.
 *
 *   - kernels (CONCURRENT_KERNEL), memcpy and memset become GPU records;
 *   - around every NCCL launch (one call, or a group at its ncclGroupEnd) the launch id is pushed
 *     as a CUPTI external correlation id, so CUPTI's EXTERNAL_CORRELATION records tie the launch
 *     to the correlation ids of the kernels it started: those kernels become gpu_nccl records
 *     with the launching call's communicator, sequence number and launch id.  A kernel named
 *     nccl* whose correlation was not seen is still a gpu_nccl record (launch id 0);
 *   - CUPTI is asked to stamp with cs_now() (cuptiActivityRegisterTimestampCallback), so GPU times
 *     are on this rank's host clock; where that call is missing, CUPTI's own timestamps are
 *     shifted by the offset between the two clocks, measured at start and at every buffer;
 *   - if CUPTI is missing, or another tool holds it (cuptiSubscribe answers
 *     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), there is no GPU timing, and the trace says
 *     why (gpu_note).  The CUDA-event fallback is not done.
 *
 * COMMSCOPE_GPU=off turns all of this off; COMMSCOPE_CUPTI_LIB names the library to load (default
 * libcupti.so.13, .12, libcupti.so, then /usr/local/cuda/lib{,64}/libcupti.so).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/front.h"
#include "gpu.h"

/* CUPTI's ABI, as far as it is used (cupti_activity.h, CUPTI 12/13).  Records are read by offset:
 * the prefixes below are the same in every record version since CUDA 11. */
enum {
    K_MEMCPY = 1,
    K_MEMSET = 2,
    K_KERNEL = 3,
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

static uint64_t unmapped_nccl, bad_records;

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
    static const char *const names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so",
                                        "/usr/local/cuda/lib64/libcupti.so",
                                        "/usr/local/cuda/lib/libcupti.so"};
    if (env && *env) {
        snprintf(tried, cap, "%s", env);
        return dlopen(env, RTLD_NOW | RTLD_LOCAL);
    }
    snprintf(tried, cap, "libcupti.so.13/.12/libcupti.so, /usr/local/cuda/lib{64,}");
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

static void put(uint16_t op, uint64_t start, uint64_t end, uint64_t comm, uint32_t seq,
                uint64_t bytes, uint64_t brecv, uint64_t launch, uint32_t dev)
{
    if (!start || end < start) {
        bad_records++;
        return;
    }
    struct cs_event *ev = cs_rec_begin();
    if (!ev)
        return;
    ev->t_begin = to_host(start);
    ev->t_end = to_host(end);
    ev->comm = comm;
    ev->seq = seq;
    ev->bytes = bytes;
    ev->bytes_recv = brecv;
    ev->request = launch;
    ev->peer = -1;
    ev->op = op;
    ev->aux = (int32_t)dev;
    cs_rec_commit(ev);
}

/* The launch whose external correlation covered CUPTI correlation id corr, or 0. */
static uint64_t launch_of(uint32_t corr)
{
    return corrs[corr & (CORRS - 1)].corr == corr ? corrs[corr & (CORRS - 1)].launch : 0;
}

static void kernel(const uint8_t *r)
{
    uint64_t start = rd64(r, 16), end = rd64(r, 24);
    uint32_t dev = rd32(r, 40), stream = rd32(r, 48), corr = rd32(r, 92);
    const char *name;
    memcpy(&name, r + 104, sizeof name);
    uint64_t launch = launch_of(corr);
    if (launch) {
        const struct launch_info *li = &launches[launch & (LAUNCHES - 1)];
        if (__atomic_load_n(&li->launch, __ATOMIC_ACQUIRE) == launch) {
            put(CS_OP_GPU_NCCL, start, end, li->comm, li->seq, 0, li->ncalls, launch, dev);
            return;
        }
        put(CS_OP_GPU_NCCL, start, end, 0, 0, 0, 0, launch, dev);
        return;
    }
    if (name && strncmp(name, "nccl", 4) == 0) {
        unmapped_nccl++;
        put(CS_OP_GPU_NCCL, start, end, 0, 0, 0, 0, 0, dev);
        return;
    }
    put(CS_OP_GPU_KERNEL, start, end, 0, stream, 0, 0, 0, dev);
}

/* A memcpy/memset: the program's own, or NCCL's (a one-rank communicator copies with
 * cudaMemcpyAsync), which counts as the launch's GPU work. */
static void copy(const uint8_t *r, uint16_t op)
{
    uint64_t start = rd64(r, 16), end = rd64(r, 24), bytes = rd64(r, 8);
    uint32_t dev = rd32(r, 32), stream = rd32(r, 40), corr = rd32(r, 44);
    uint64_t launch = launch_of(corr);
    const struct launch_info *li = &launches[launch & (LAUNCHES - 1)];
    if (launch && __atomic_load_n(&li->launch, __ATOMIC_ACQUIRE) == launch)
        put(CS_OP_GPU_NCCL, start, end, li->comm, li->seq, bytes, li->ncalls, launch, dev);
    else
        put(op, start, end, 0, stream, bytes, 0, 0, dev);
}

static void buf_complete(void *ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    if (!buf)
        return;
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
            default:
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

static void init_once(void)
{
    const char *mode = getenv("COMMSCOPE_GPU");
    if (mode && (!strcasecmp(mode, "off") || !strcmp(mode, "0")))
        return;
    if (!uses_cuda())
        return;
    char tried[256];
    void *h = open_cupti(tried, sizeof tried);
    if (!h) {
        cs__trace_gpu_note("CUPTI not found (%s): no GPU timing", tried);
        cs_warn("CUPTI not found (%s): NCCL calls are recorded without GPU time", tried);
        return;
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
        cs__trace_gpu_note("CUPTI (%s) lacks the Activity API functions needed: no GPU timing",
                           tried);
        cs_warn("CUPTI (%s) lacks the Activity API: no GPU timing", tried);
        return;
    }
    void *sub = NULL;
    cupti_rc rc = cu.Subscribe(&sub, (void *)no_callback, NULL);
    if (rc == CUPTI_MULTIPLE_SUBSCRIBERS) {
        cs__trace_gpu_note("CUPTI is already used by another tool "
                           "(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED): no GPU timing");
        cs_warn("CUPTI is already used by another tool (a profiler?): no GPU timing");
        return;
    }
    if (rc != CUPTI_OK) {
        cs__trace_gpu_note("cuptiSubscribe failed (CUPTI error %d): no GPU timing", rc);
        cs_warn("cuptiSubscribe failed (CUPTI error %d): no GPU timing", rc);
        return;
    }
    own_clock = cu.RegisterTimestampCallback && cu.RegisterTimestampCallback(host_clock) == 0;
    if (!own_clock) {
        uint64_t c = 0;
        if (cu.GetTimestamp && cu.GetTimestamp(&c) == CUPTI_OK)
            clock_off = (int64_t)(cs_now() - c);
    }
    if (cu.RegisterCallbacks(buf_request, (buf_done_fn)buf_complete) != CUPTI_OK) {
        cs__trace_gpu_note("cuptiActivityRegisterCallbacks failed: no GPU timing");
        return;
    }
    static const int kinds[] = {K_CONCURRENT_KERNEL, K_MEMCPY, K_MEMSET, K_EXTERNAL_CORRELATION};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        rc = cu.Enable(kinds[i]);
        if (rc != CUPTI_OK) {
            for (size_t k = 0; k < i && cu.Disable; k++)
                cu.Disable(kinds[k]);
            cs__trace_gpu_note("cuptiActivityEnable(%d) failed (CUPTI error %d): no GPU timing",
                               kinds[i], rc);
            cs_warn("cuptiActivityEnable(%d) failed (CUPTI error %d): no GPU timing", kinds[i], rc);
            return;
        }
    }
    cs__trace_set_gpu_timing(CS_GPU_CUPTI);
    __atomic_store_n(&active, 1, __ATOMIC_RELEASE);
}

void cs__gpu_init(void)
{
    pthread_once(&once, init_once);
}

void cs__gpu_launch_begin(uint64_t launch)
{
    if (__atomic_load_n(&active, __ATOMIC_ACQUIRE))
        cu.Push(EXT_KIND_CUSTOM0, launch);
}

void cs__gpu_launch_end(uint64_t launch, cudaStream_t stream, uint64_t comm, uint32_t seq,
                        uint32_t ncalls, ncclResult_t rc)
{
    (void)stream;
    (void)rc;
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
    if (!__atomic_exchange_n(&active, 0, __ATOMIC_ACQ_REL))
        return;
    pthread_mutex_lock(&flush_mu);
    cu.FlushAll(1); /* CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: also records of unfinished buffers */
    if (unmapped_nccl)
        cs__trace_gpu_note("%llu NCCL kernels could not be mapped to their launch",
                           (unsigned long long)unmapped_nccl);
    if (bad_records) {
        cs__trace_gpu_note("%llu CUPTI records with impossible times were skipped",
                           (unsigned long long)bad_records);
        cs__trace_count_gpu_drop(bad_records);
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
