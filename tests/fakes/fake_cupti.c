/*
 * TEST DOUBLE: CUPTI's Activity API (libcupti.so.13 ABI subset that collector/cuda/gpu.c uses)
 * over the fake CUDA runtime (fake_cudart.c).  It observes the simulated GPU and hands the
 * collector activity records laid out exactly as CUPTI 12/13 lays them out (CUpti_ActivityKernel10
 * for CONCURRENT_KERNEL, CUpti_ActivityMemcpy6, CUpti_ActivityMemset4,
 * CUpti_ActivityExternalCorrelation; offsets checked against cupti_activity.h by
 * fake_cupti_check.c where CUDA is installed), in buffers the collector provides, through the
 * callbacks it registered.
 *
 * Clocks: the simulated GPU runs on the host clock; CUPTI's own timestamps are that plus
 * FAKE_CUPTI_CLOCK_OFFSET_NS (default 123456789 s), as a GPU's are unrelated to the host's
 * CLOCK_MONOTONIC.  With a timestamp callback registered, records are converted to the
 * callback's clock with one offset sampled at registration, as CUPTI does.
 *
 * Knobs (environment):
 *   FAKE_CUPTI_REFUSE=1         cuptiSubscribe answers
 * CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (another tool holds CUPTI)
 *   FAKE_CUPTI_NO_TS_CALLBACK=1 cuptiActivityRegisterTimestampCallback is not supported
 *   FAKE_CUPTI_CORRUPT=1        every kernel is followed by two impossible records (end before
 *                               start, start 0) and one of a kind the collector does not know
 *   FAKE_CUPTI_BUFFER_RECORDS=N hand a buffer over once N records are pending (default 64)
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda.h"

#define API __attribute__((visibility("default")))

enum {
    OK = 0,
    ERR_INVALID_PARAMETER = 1,
    ERR_MAX_LIMIT_REACHED = 12,
    ERR_NOT_SUPPORTED = 27,
    ERR_MULTIPLE_SUBSCRIBERS = 39,
    KIND_MEMCPY = 1,
    KIND_MEMSET = 2,
    KIND_KERNEL = 3,
    KIND_DRIVER = 4,
    KIND_RUNTIME = 5,
    KIND_CONCURRENT_KERNEL = 10,
    KIND_EXTERNAL_CORRELATION = 39,
    KIND_FOREIGN = 77, /* a kind the collector never enabled */
    EXT_KINDS = 8,
};

/* Record sizes (sizeof the CUPTI 12/13 structs). */
static size_t rec_size(uint32_t kind)
{
    switch (kind) {
    case KIND_MEMCPY:
        return 96;
    case KIND_MEMSET:
        return 88;
    case KIND_KERNEL:
    case KIND_CONCURRENT_KERNEL:
        return 216;
    case KIND_EXTERNAL_CORRELATION:
        return 24;
    case KIND_DRIVER:
    case KIND_RUNTIME:
        return 40; /* CUpti_ActivityAPI */
    default:
        return 16;
    }
}

typedef void (*buf_req_fn)(uint8_t **, size_t *, size_t *);
typedef void (*buf_done_fn)(void *, uint32_t, uint8_t *, size_t, size_t);

/* The CUPTI functions provided (CUptiResult is an int, handles are pointers). */
int cuptiSubscribe(void **subscriber, void *callback, void *userdata);
int cuptiActivityRegisterCallbacks(buf_req_fn rq, buf_done_fn dn);
int cuptiActivityRegisterTimestampCallback(uint64_t (*cb)(void));
int cuptiGetTimestamp(uint64_t *t);
int cuptiActivityEnable(int kind);
int cuptiActivityDisable(int kind);
int cuptiActivityFlushAll(uint32_t flag);
int cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, void **record);
int cuptiActivityPushExternalCorrelationId(int kind, uint64_t id);
int cuptiActivityPopExternalCorrelationId(int kind, uint64_t *last);
int cuptiActivityGetNumDroppedRecords(void *ctx, uint32_t stream, size_t *dropped);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int subscribed;
static unsigned enabled; /* bit per kind < 32; external correlation tracked separately */
static int ext_enabled;
static buf_req_fn req;
static buf_done_fn done;
static int64_t conv;  /* added to host times to give record times */
static uint8_t *pend; /* pending records, back to back */
static size_t npend, cap_pend, nrec_pend;

static __thread uint64_t ext_stack[EXT_KINDS][32];
static __thread int ext_depth[EXT_KINDS];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int64_t gpu_offset(void)
{
    const char *v = getenv("FAKE_CUPTI_CLOCK_OFFSET_NS");
    return v ? strtoll(v, NULL, 10) : 123456789000000000ll;
}

static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static void put32(uint8_t *r, size_t off, uint32_t v)
{
    memcpy(r + off, &v, sizeof v);
}

static void put64(uint8_t *r, size_t off, uint64_t v)
{
    memcpy(r + off, &v, sizeof v);
}

/* A zeroed record of kind appended to the pending list (mu held), or NULL. */
static uint8_t *new_rec(uint32_t kind)
{
    size_t n = rec_size(kind);
    if (npend + n > cap_pend) {
        size_t c = cap_pend ? 2 * cap_pend : 1 << 16;
        uint8_t *p = realloc(pend, c);
        if (!p)
            return NULL;
        pend = p;
        cap_pend = c;
    }
    uint8_t *r = pend + npend;
    memset(r, 0, n);
    put32(r, 0, kind);
    npend += n;
    nrec_pend++;
    return r;
}

/* Hand every pending record over, in buffers the collector provides. */
static void deliver(void)
{
    pthread_mutex_lock(&mu);
    size_t at = 0;
    while (at < npend && req && done) {
        uint8_t *buf = NULL;
        size_t size = 0, maxrec = 0;
        req(&buf, &size, &maxrec);
        if (!buf || !size)
            break;
        size_t valid = 0;
        while (at < npend) {
            uint32_t kind;
            memcpy(&kind, pend + at, sizeof kind);
            size_t n = rec_size(kind);
            if (valid + n > size)
                break;
            memcpy(buf + valid, pend + at, n);
            valid += n;
            at += n;
        }
        done(NULL, 0, buf, size, valid);
        if (!valid)
            break; /* a buffer too small for one record */
    }
    npend = 0;
    nrec_pend = 0;
    pthread_mutex_unlock(&mu);
}

/* As CUPTI: an API record (when the runtime API kind is on), preceded by one external correlation
 * record per kind with a pushed id (when that kind is on too).  Without API records there are
 * no external correlations. */
static void on_api(uint32_t corr, uint64_t t_host)
{
    int full = 0;
    pthread_mutex_lock(&mu);
    int api = !!(enabled & (1u << KIND_RUNTIME));
    for (int k = 0; api && ext_enabled && k < EXT_KINDS; k++) {
        if (!ext_depth[k])
            continue;
        uint8_t *r = new_rec(KIND_EXTERNAL_CORRELATION);
        if (!r)
            break;
        put32(r, 4, (uint32_t)k);
        put64(r, 8, ext_stack[k][ext_depth[k] - 1]);
        put32(r, 16, corr);
    }
    uint8_t *a = api ? new_rec(KIND_RUNTIME) : NULL;
    if (a) {
        /* CUpti_ActivityAPI: start, end (the call's, on CUPTI's clock), correlationId. */
        put64(a, 8, (uint64_t)((int64_t)t_host + conv));
        put64(a, 16, (uint64_t)((int64_t)t_host + conv));
        put32(a, 32, corr);
    }
    const char *v = getenv("FAKE_CUPTI_BUFFER_RECORDS");
    size_t limit = v ? strtoull(v, NULL, 10) : 64;
    full = nrec_pend >= (limit ? limit : 1);
    pthread_mutex_unlock(&mu);
    if (full)
        deliver();
}

static void on_done(const struct fake_cuda_work *w)
{
    pthread_mutex_lock(&mu);
    uint64_t s = (uint64_t)((int64_t)w->start + conv), e = (uint64_t)((int64_t)w->end + conv);
    if (w->kind == 0 && enabled & (1u << KIND_CONCURRENT_KERNEL)) {
        uint8_t *r = new_rec(KIND_CONCURRENT_KERNEL);
        if (r) {
            put64(r, 16, s);
            put64(r, 24, e);
            put32(r, 40, (uint32_t)w->dev);
            put32(r, 44, 1); /* context */
            put32(r, 48, w->stream_id);
            put32(r, 92, w->corr);
            memcpy(r + 104, &w->name, sizeof w->name);
            put64(r, 144, w->graph_id ? 1000 + w->graph_id : 0);
            put32(r, 156, w->graph_id);
        }
        if (env_on("FAKE_CUPTI_CORRUPT")) {
            uint8_t *b = new_rec(KIND_CONCURRENT_KERNEL);
            if (b) {
                put64(b, 16, e);
                put64(b, 24, s);
                put32(b, 92, w->corr);
                memcpy(b + 104, &w->name, sizeof w->name);
            }
            b = new_rec(KIND_CONCURRENT_KERNEL);
            if (b) {
                put64(b, 24, e);
                memcpy(b + 104, &w->name, sizeof w->name);
            }
            new_rec(KIND_FOREIGN);
        }
    } else if ((w->kind == 1 && enabled & (1u << KIND_MEMCPY)) ||
               (w->kind == 2 && enabled & (1u << KIND_MEMSET))) {
        uint8_t *r = new_rec(w->kind == 1 ? KIND_MEMCPY : KIND_MEMSET);
        if (r) {
            put64(r, 8, w->bytes);
            put64(r, 16, s);
            put64(r, 24, e);
            put32(r, 32, (uint32_t)w->dev);
            put32(r, 36, 1);
            put32(r, 40, w->stream_id);
            put32(r, 44, w->corr);
            put32(r, 72, w->graph_id);
        }
    }
    pthread_mutex_unlock(&mu);
}

API int cuptiSubscribe(void **subscriber, void *callback, void *userdata)
{
    (void)callback;
    (void)userdata;
    pthread_mutex_lock(&mu);
    int rc = OK;
    if (env_on("FAKE_CUPTI_REFUSE") || subscribed)
        rc = ERR_MULTIPLE_SUBSCRIBERS;
    else
        subscribed = 1;
    conv = gpu_offset();
    pthread_mutex_unlock(&mu);
    if (rc == OK) {
        static const struct fake_cuda_observer o = {on_api, on_done};
        fakeCudaObserve(&o);
        if (subscriber)
            *subscriber = &subscribed;
    }
    return rc;
}

API int cuptiActivityRegisterCallbacks(buf_req_fn rq, buf_done_fn dn)
{
    if (!rq || !dn)
        return ERR_INVALID_PARAMETER;
    pthread_mutex_lock(&mu);
    req = rq;
    done = dn;
    pthread_mutex_unlock(&mu);
    return OK;
}

API int cuptiActivityRegisterTimestampCallback(uint64_t (*cb)(void))
{
    if (env_on("FAKE_CUPTI_NO_TS_CALLBACK"))
        return ERR_NOT_SUPPORTED;
    if (!cb)
        return ERR_INVALID_PARAMETER;
    uint64_t h = now_ns(), c = cb();
    pthread_mutex_lock(&mu);
    conv = (int64_t)(c - h);
    pthread_mutex_unlock(&mu);
    return OK;
}

API int cuptiGetTimestamp(uint64_t *t)
{
    *t = (uint64_t)((int64_t)now_ns() + gpu_offset());
    return OK;
}

API int cuptiActivityEnable(int kind)
{
    pthread_mutex_lock(&mu);
    if (kind == KIND_EXTERNAL_CORRELATION)
        ext_enabled = 1;
    else if (kind > 0 && kind < 32)
        enabled |= 1u << kind;
    pthread_mutex_unlock(&mu);
    return kind > 0 && kind < 64 ? OK : ERR_NOT_SUPPORTED;
}

API int cuptiActivityDisable(int kind)
{
    pthread_mutex_lock(&mu);
    if (kind == KIND_EXTERNAL_CORRELATION)
        ext_enabled = 0;
    else if (kind > 0 && kind < 32)
        enabled &= ~(1u << kind);
    pthread_mutex_unlock(&mu);
    return OK;
}

API int cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    deliver();
    return OK;
}

API int cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, void **record)
{
    if (!buffer || !record)
        return ERR_INVALID_PARAMETER;
    size_t at = 0;
    if (*record) {
        uint8_t *r = *record;
        uint32_t kind;
        memcpy(&kind, r, sizeof kind);
        at = (size_t)(r - buffer) + rec_size(kind);
    }
    if (at >= valid) {
        *record = NULL;
        return ERR_MAX_LIMIT_REACHED;
    }
    *record = buffer + at;
    return OK;
}

API int cuptiActivityPushExternalCorrelationId(int kind, uint64_t id)
{
    if (kind < 0 || kind >= EXT_KINDS || ext_depth[kind] == 32)
        return ERR_INVALID_PARAMETER;
    ext_stack[kind][ext_depth[kind]++] = id;
    return OK;
}

API int cuptiActivityPopExternalCorrelationId(int kind, uint64_t *last)
{
    if (kind < 0 || kind >= EXT_KINDS || !ext_depth[kind])
        return ERR_INVALID_PARAMETER;
    uint64_t v = ext_stack[kind][--ext_depth[kind]];
    if (last)
        *last = v;
    return OK;
}

API int cuptiActivityGetNumDroppedRecords(void *ctx, uint32_t stream, size_t *dropped)
{
    (void)ctx;
    (void)stream;
    *dropped = 0;
    return OK;
}
