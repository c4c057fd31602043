/*
 * One Kineto trace, streamed: zlib's gzread (which reads plain files unchanged) feeds yajl's event
 * parser 64 KiB at a time, and the callbacks keep only the records kineto.c needs (kineto.h).
 * Nothing of the JSON text is kept, so memory is the kept records, not the file.
 *
 * The layout read (PyTorch profiler / Kineto "chrome trace" JSON):
 *   { "schemaVersion": 1, "distributedInfo": {"rank", "world_size", "pg_config": [{"pg_name",
 *     "pg_desc", "ranks": [...]}, ...], "nccl_version"}, "baseTimeNanoseconds": N,
 *     "traceEvents": [ {"ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args": {...}} ] }
 * Times "ts"/"dur" are microseconds with up to three decimals (ns); they are parsed as decimal
 * text into integer nanoseconds, never through a double (1.7e15 us would lose the ns).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

#include "commscope/input.h"
#include "kineto.h"
#include "phases.h"

/* Levels whose keys and types are tracked (the events are at 3, their args at 4); deeper ones are
 * skipped.  A document nested deeper than NEST_LIMIT is refused: no Kineto trace comes near it. */
#define MAXDEPTH 16
#define NEST_LIMIT 1000
/* Times within 2^61 ns of zero (73 years): a time, a duration and a base add up in int64. */
#define TIME_MAX (1ll << 61)

const char *const cs__kskip_what[CS_KSKIP_N] = {
    [CS_KSKIP_NEGATIVE_DUR] = "events with a negative duration",
    [CS_KSKIP_BAD_TS] = "events whose \"ts\" is not a finite number",
    [CS_KSKIP_TS_RANGE] = "events whose time lies beyond 2^61 ns (73 years) of zero",
    [CS_KSKIP_BAD_DUR] = "events whose \"dur\" is not a finite number below 2^61 ns",
};

struct cur {
    char ph;
    char cat[32];
    char name[256];
    int64_t pid, tid, ts, dur;
    int have_ts, have_dur;
    int bad_ts, bad_dur; /* the field was there but is no usable number: 1 not a number, 2 range */
    uint64_t id;
    /* args */
    int32_t dev, stream;
    uint64_t corr, ext, bytes;
    int has_coll;
    struct cs__kcomm c;
    CS__KVEC(int32_t) ranks; /* distributedInfo pg ranks being read */
};

struct ctx {
    struct cs__kfile *f;
    int depth;
    char type[MAXDEPTH + 1];
    char key[MAXDEPTH + 1][64];
    int top_object, saw_events, events_array;
    int too_deep; /* NEST_LIMIT reached: the parse was cancelled */
    struct cur e;
    struct cs__kpg pg;
    int oom;
    struct cs__phase_pats pats; /* the annotations kept as phase ranges */
};

#define PUSH(vec, item)                                                                            \
    (((vec).n == (vec).cap && !grow((void **)&(vec).v, &(vec).cap, sizeof *(vec).v))               \
         ? -1                                                                                      \
         : ((vec).v[(vec).n++] = (item), 0))

static int grow(void **v, size_t *cap, size_t size)
{
    size_t c = *cap ? 2 * *cap : 64;
    void *p = realloc(*v, c * size);
    if (!p)
        return 0;
    *v = p;
    *cap = c;
    return 1;
}

/*
 * Decimal microseconds ("1694128201429795", "4458676524648.797", "-3", "1.5e3") -> ns.  Returns 0,
 * -1 when the text is not a finite number, -2 when it is one beyond TIME_MAX ns.
 */
static int parse_ns(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    int64_t v = 0;
    size_t d0 = i;
    int big = 0;
    for (; i < n && isdigit((unsigned char)s[i]); i++) {
        if (v > TIME_MAX / 1000)
            big = 1; /* keep scanning: an exponent may still follow */
        else
            v = v * 10 + (s[i] - '0');
    }
    if (i == d0)
        return -1;
    int64_t frac = 0, scale = 100;
    if (i < n && s[i] == '.') {
        for (i++; i < n && isdigit((unsigned char)s[i]); i++) {
            frac += (s[i] - '0') * scale;
            scale /= 10;
        }
    }
    if (i < n) {
        /* An exponent: rare; go through a double. */
        char b[64];
        if (n >= sizeof b)
            return -1;
        memcpy(b, s, n);
        b[n] = '\0';
        char *e;
        double x = strtod(b, &e);
        if (*e || !isfinite(x))
            return -1;
        x *= 1e3;
        if (!(x < (double)TIME_MAX && x > -(double)TIME_MAX))
            return -2;
        *out = (int64_t)(x + (x >= 0 ? 0.5 : -0.5));
        return 0;
    }
    if (big || v > TIME_MAX / 1000)
        return -2;
    v = v * 1000 + frac; /* below TIME_MAX + 999: no overflow */
    if (v >= TIME_MAX)
        return -2;
    *out = neg ? -v : v;
    return 0;
}

static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    char b[32];
    if (n == 0 || n >= sizeof b)
        return -1;
    memcpy(b, s, n);
    b[n] = '\0';
    char *e;
    errno = 0;
    double d;
    unsigned long long v = strtoull(b, &e, 10);
    if (*e == '.' || *e == 'e' || *e == 'E') {
        d = strtod(b, &e);
        v = d >= 0 ? (unsigned long long)d : 0;
    }
    if (*e || errno || b[0] == '-')
        return -1;
    *out = v;
    return 0;
}

static int64_t hash_str(const unsigned char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return (int64_t)(h >> 2) | (1ll << 60); /* never a small number: not a real pid/tid */
}

static void copy_str(char *dst, size_t cap, const unsigned char *s, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

/* "[0, 1, 2]" -> ranks (owned).  Returns the count, -1 when not a list of numbers. */
static int parse_rank_list(const char *s, size_t n, int32_t **out)
{
    int32_t *v = NULL;
    int k = 0, cap = 0;
    size_t i = 0;
    while (i < n && (isspace((unsigned char)s[i]) || s[i] == '['))
        i++;
    while (i < n && s[i] != ']') {
        if (!isdigit((unsigned char)s[i])) {
            free(v);
            return -1;
        }
        long x = 0;
        while (i < n && isdigit((unsigned char)s[i]) && x < INT32_MAX / 10)
            x = x * 10 + (s[i++] - '0');
        if (k == cap) {
            cap = cap ? 2 * cap : 16;
            int32_t *p = realloc(v, (size_t)cap * sizeof *v);
            if (!p) {
                free(v);
                return -1;
            }
            v = p;
        }
        v[k++] = (int32_t)x;
        while (i < n && (isspace((unsigned char)s[i]) || s[i] == ','))
            i++;
    }
    *out = v;
    return k;
}

static int dtype_size(const char *s, size_t n)
{
    static const struct {
        const char *name;
        int size;
    } t[] = {{"Float", 4},        {"float", 4},         {"Float32", 4},       {"Half", 2},
             {"BFloat16", 2},     {"Double", 8},        {"Float64", 8},       {"Int", 4},
             {"Int32", 4},        {"Long", 8},          {"Int64", 8},         {"Short", 2},
             {"Int16", 2},        {"Byte", 1},          {"Char", 1},          {"Int8", 1},
             {"UInt8", 1},        {"Bool", 1},          {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1},
             {"ComplexFloat", 8}, {"ComplexDouble", 16}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strlen(t[i].name) == n && memcmp(t[i].name, s, n) == 0)
            return t[i].size;
    return 0;
}

/* The key a scalar at the current depth belongs to (for array elements: the array's key). */
static const char *scalar_key(struct ctx *x, int *in_array)
{
    /* Below the tracked levels nothing is read: no key. */
    if (x->depth > MAXDEPTH) {
        *in_array = 0;
        return "";
    }
    *in_array = x->type[x->depth] == '[';
    return *in_array ? x->key[x->depth - 1] : x->key[x->depth];
}

static int in_events(const struct ctx *x)
{
    return x->events_array && x->depth >= 3;
}

/* Inside an object of the top-level deviceProperties array. */
static int in_devs(const struct ctx *x)
{
    return x->depth == 3 && x->type[2] == '[' && strcmp(x->key[1], "deviceProperties") == 0;
}

static int in_dist(const struct ctx *x)
{
    return x->depth >= 2 && strcmp(x->key[1], "distributedInfo") == 0;
}

/* A scalar (number or string text) of the current event. */
static void event_scalar(struct ctx *x, const char *k, const char *s, size_t n, int is_str)
{
    struct cur *e = &x->e;
    if (x->depth == 3) {
        if (!strcmp(k, "ph") && is_str && n > 0) {
            e->ph = s[0];
        } else if (!strcmp(k, "cat") && is_str) {
            copy_str(e->cat, sizeof e->cat, (const unsigned char *)s, n);
        } else if (!strcmp(k, "name") && is_str) {
            copy_str(e->name, sizeof e->name, (const unsigned char *)s, n);
        } else if (!strcmp(k, "pid") || !strcmp(k, "tid")) {
            uint64_t v;
            int64_t h = (!is_str && parse_u64(s, n, &v) == 0)
                            ? (int64_t)v
                            : hash_str((const unsigned char *)s, n);
            if (k[0] == 'p')
                e->pid = h;
            else
                e->tid = h;
        } else if (!strcmp(k, "ts")) {
            int rc = parse_ns(s, n, &e->ts);
            e->have_ts = rc == 0;
            e->bad_ts = rc == 0 ? 0 : rc == -1 ? 1 : 2;
        } else if (!strcmp(k, "dur")) {
            int rc = parse_ns(s, n, &e->dur);
            e->have_dur = rc == 0;
            e->bad_dur = rc != 0;
        } else if (!strcmp(k, "id")) {
            uint64_t v;
            e->id = (!is_str && parse_u64(s, n, &v) == 0)
                        ? v
                        : (uint64_t)hash_str((const unsigned char *)s, n);
        }
        return;
    }
    if (x->depth != 4 || strcmp(x->key[3], "args") != 0)
        return;
    uint64_t v = 0;
    int num = !is_str && parse_u64(s, n, &v) == 0;
    if (!strcmp(k, "device") && num) {
        e->dev = (int32_t)v;
    } else if (!strcmp(k, "stream") && num) {
        e->stream = (int32_t)v;
    } else if (!strcmp(k, "correlation") && num) {
        e->corr = v;
    } else if (!strcmp(k, "External id") && num) {
        e->ext = v;
    } else if (!strcmp(k, "bytes") && num) {
        e->bytes = v;
    } else if (!strcmp(k, "Collective name") && is_str) {
        char b[64];
        copy_str(b, sizeof b, (const unsigned char *)s, n);
        e->c.cls = cs__kineto_coll_class(b);
        e->has_coll = 1;
    } else if (!strcmp(k, "In msg nelems") && num) {
        e->c.in_n = v;
    } else if (!strcmp(k, "Out msg nelems") && num) {
        e->c.out_n = v;
    } else if (!strcmp(k, "dtype") && is_str) {
        e->c.dtsize = dtype_size(s, n);
    } else if (!strcmp(k, "Root rank") && num) {
        e->c.root = (int)v;
    } else if (!strcmp(k, "Process Group Name") && is_str) {
        copy_str(e->c.pg, sizeof e->c.pg, (const unsigned char *)s, n);
    } else if (!strcmp(k, "Process Group Description") && is_str) {
        copy_str(e->c.desc, sizeof e->c.desc, (const unsigned char *)s, n);
    } else if (!strcmp(k, "Process Group Ranks") && is_str && !e->c.ranks) {
        int32_t *r = NULL;
        int m = parse_rank_list(s, n, &r);
        if (m > 0) {
            e->c.ranks = r;
            e->c.nranks = m;
        } else {
            free(r);
        }
    }
}

static void dist_scalar(struct ctx *x, const char *k, int in_array, const char *s, size_t n,
                        int is_str)
{
    uint64_t v = 0;
    int num = !is_str && parse_u64(s, n, &v) == 0;
    struct cs__kfile *f = x->f;
    if (x->depth == 2) {
        if (!strcmp(k, "rank") && num)
            f->rank = (int)v, f->has_dist |= 1;
        else if (!strcmp(k, "world_size") && num)
            f->world = (int)v, f->has_dist |= 2;
        else if (!strcmp(k, "nccl_version") && is_str)
            copy_str(f->nccl_version, sizeof f->nccl_version, (const unsigned char *)s, n);
        return;
    }
    /* distributedInfo.pg_config[i].{pg_name, pg_desc, ranks} */
    if (x->depth == 4 && !in_array && strcmp(x->key[2], "pg_config") == 0) {
        if (!strcmp(k, "pg_name"))
            copy_str(x->pg.name, sizeof x->pg.name, (const unsigned char *)s, n);
        else if (!strcmp(k, "pg_desc"))
            copy_str(x->pg.desc, sizeof x->pg.desc, (const unsigned char *)s, n);
        else if (!strcmp(k, "ranks") && is_str && !x->pg.ranks)
            x->pg.nranks = parse_rank_list(s, n, &x->pg.ranks);
    } else if (x->depth == 5 && in_array && !strcmp(k, "ranks") && num) {
        if (PUSH(x->e.ranks, (int32_t)v))
            x->oom = 1;
    }
}

static int on_scalar(struct ctx *x, const char *s, size_t n, int is_str)
{
    int in_array;
    const char *k = scalar_key(x, &in_array);
    if (x->depth == 1 && !strcmp(k, "baseTimeNanoseconds") && !is_str) {
        uint64_t v;
        if (parse_u64(s, n, &v) == 0 && v < (uint64_t)TIME_MAX)
            x->f->base_ns = (int64_t)v;
        else
            x->f->bad_base = 1;
    } else if (in_events(x)) {
        event_scalar(x, k, s, n, is_str);
    } else if (in_dist(x)) {
        dist_scalar(x, k, in_array, s, n, is_str);
    } else if (in_devs(x) && x->f->devs.n) {
        struct cs__kdev *d = &x->f->devs.v[x->f->devs.n - 1];
        uint64_t v;
        if (!strcmp(k, "id") && !is_str && parse_u64(s, n, &v) == 0 && v < INT64_MAX)
            d->id = (int64_t)v;
        else if (!strcmp(k, "name") && is_str)
            copy_str(d->name, sizeof d->name, (const unsigned char *)s, n);
    }
    return !x->oom;
}

static int cb_null(void *c)
{
    (void)c;
    return 1;
}

static int cb_bool(void *c, int b)
{
    (void)c;
    (void)b;
    return 1;
}

static int cb_number(void *c, const char *s, size_t n)
{
    return on_scalar(c, s, n, 0);
}

static int cb_string(void *c, const unsigned char *s, size_t n)
{
    return on_scalar(c, (const char *)s, n, 1);
}

static int open_container(struct ctx *x, char t)
{
    if (x->depth == 0 && t == '{')
        x->top_object = 1;
    if (x->depth == 0 && t == '[') {
        /* The pre-Kineto profiler's format (torch.autograd.profiler, and torch.profiler without
         * Kineto: PyTorch's CPU-only builds): a bare array of the events.  Read as if it were
         * {"traceEvents": [...]}. */
        x->f->legacy = 1;
        x->top_object = 1;
        x->depth = 1;
        x->type[1] = '{';
        snprintf(x->key[1], sizeof x->key[1], "traceEvents");
    }
    if (x->depth == 1 && t == '[' && !strcmp(x->key[1], "traceEvents")) {
        x->saw_events = 1;
        x->events_array = 1;
    }
    if (x->depth >= NEST_LIMIT) {
        x->too_deep = 1;
        return 0; /* cancels the parse: said as an error by cs__kineto_parse */
    }
    if (x->depth >= MAXDEPTH) {
        x->depth++; /* deeper levels are skipped (their type is not tracked) */
        return 1;
    }
    x->depth++;
    x->type[x->depth] = t;
    x->key[x->depth][0] = '\0';
    if (t == '{' && x->events_array && x->depth == 3) {
        free(x->e.c.ranks);
        int32_t *keep = x->e.ranks.v;
        size_t cap = x->e.ranks.cap;
        x->e = (struct cur){.dev = -1, .stream = -1};
        x->e.c = (struct cs__kcomm){.cls = -1, .in_n = UINT64_MAX, .out_n = UINT64_MAX, .root = -1};
        x->e.ranks.v = keep;
        x->e.ranks.cap = cap;
    }
    if (t == '{' && in_devs(x) && PUSH(x->f->devs, ((struct cs__kdev){.id = -1})))
        x->oom = 1;
    if (t == '{' && in_dist(x) && x->depth == 4 && !strcmp(x->key[2], "pg_config")) {
        x->pg = (struct cs__kpg){0};
        x->e.ranks.n = 0;
    }
    return 1;
}

static int cb_start_map(void *c)
{
    return open_container(c, '{');
}

static int cb_start_array(void *c)
{
    return open_container(c, '[');
}

static int cb_key(void *c, const unsigned char *s, size_t n)
{
    struct ctx *x = c;
    if (x->depth <= MAXDEPTH)
        copy_str(x->key[x->depth], sizeof x->key[0], s, n);
    return 1;
}

/* A runtime or driver call that puts work on a stream: kernels, and copies and sets (whose
 * records also carry the call's correlation id). */
static int is_launch(const char *name)
{
    return strstr(name, "Launch") || strstr(name, "launch") || strstr(name, "Memcpy") ||
           strstr(name, "Memset");
}

/* The event just closed: keep what the model needs. */
static void event_done(struct ctx *x)
{
    struct cs__kfile *f = x->f;
    struct cur *e = &x->e;
    f->events++;
    int timed = e->ph == 'X' || ((e->ph == 's' || e->ph == 'f') && !strcmp(e->cat, "ac2g"));
    int why = !timed                                      ? -1
              : e->bad_ts == 1                            ? CS_KSKIP_BAD_TS
              : e->bad_ts == 2                            ? CS_KSKIP_TS_RANGE
              : e->ph == 'X' && e->bad_dur                ? CS_KSKIP_BAD_DUR
              : e->ph == 'X' && e->have_dur && e->dur < 0 ? CS_KSKIP_NEGATIVE_DUR
                                                          : -1;
    if (why >= 0) {
        if (!f->skipped[why]++)
            snprintf(f->first_skipped[why], sizeof f->first_skipped[why],
                     "event %" PRIu64 " (%.100s)", f->events - 1, e->name);
        return;
    }
    if (e->ph == 'X' && e->have_ts) {
        int64_t dur = e->have_dur ? e->dur : 0;
        if (f->t_min > e->ts)
            f->t_min = e->ts;
        if (f->t_max < e->ts + dur)
            f->t_max = e->ts + dur;
        int kind = !strcmp(e->cat, "kernel")       ? CS_KK_KERNEL
                   : !strcmp(e->cat, "gpu_memcpy") ? CS_KK_MEMCPY
                   : !strcmp(e->cat, "gpu_memset") ? CS_KK_MEMSET
                                                   : -1;
        if (kind >= 0) {
            struct cs__kkernel k = {.ts = e->ts,
                                    .dur = dur,
                                    .corr = e->corr,
                                    .ext = e->ext,
                                    .bytes = e->bytes,
                                    .pid = e->pid,
                                    .tid = e->tid,
                                    .dev = e->dev >= 0 ? e->dev : (int32_t)e->pid,
                                    .stream = e->stream >= 0 ? e->stream : (int32_t)e->tid,
                                    .kind = (uint8_t)kind,
                                    .cls = CS_KCLS_COMPUTE};
            if (kind == CS_KK_KERNEL) {
                int cls = cs__kineto_nccl_class(e->name);
                if (cls >= 0) {
                    k.cls = (int16_t)cls;
                    if (e->has_coll) {
                        e->c.pid = -1;
                        e->c.ext = 0;
                        if (PUSH(f->comms, e->c)) {
                            x->oom = 1;
                            return;
                        }
                        e->c.ranks = NULL; /* now owned by f->comms */
                        k.coll = (uint32_t)f->comms.n;
                    }
                } else if (cs__kineto_comm_candidate(e->name)) {
                    k.cls = CS_KCLS_CANDIDATE;
                    size_t i = 0;
                    for (; i < f->cands.n; i++)
                        if (!strncmp(f->cands.v[i].name, e->name, sizeof f->cands.v[i].name - 1))
                            break;
                    if (i == f->cands.n) {
                        struct cs__kcand cd = {0};
                        copy_str(cd.name, sizeof cd.name, (const unsigned char *)e->name,
                                 strlen(e->name));
                        if (PUSH(f->cands, cd)) {
                            x->oom = 1;
                            return;
                        }
                    }
                    f->cands.v[i].count++;
                    f->cands.v[i].ns += dur;
                }
            }
            if (PUSH(f->kernels, k))
                x->oom = 1;
        } else if ((!strcmp(e->cat, "cuda_runtime") || !strcmp(e->cat, "cuda_driver")) && e->corr &&
                   is_launch(e->name)) {
            struct cs__klaunch l = {
                .corr = e->corr, .pid = e->pid, .tid = e->tid, .ts = e->ts, .dur = dur};
            if (PUSH(f->launches, l))
                x->oom = 1;
        } else if (!strncmp(e->name, "gloo:", 5)) {
            struct cs__kgloo gl = {.ts = e->ts,
                                   .dur = dur,
                                   .tid = e->tid,
                                   .op = (uint16_t)cs__kineto_gloo_op(e->name)};
            if (!gl.op)
                f->gloo_other++;
            else if (PUSH(f->gloo, gl))
                x->oom = 1;
        } else if (strcmp(e->cat, "gpu_user_annotation") &&
                   cs__phase_match(&x->pats, e->name) >= 0) {
            struct cs__kmark m = {.ts = e->ts, .dur = dur, .tid = e->tid, .hash = 2166136261u};
            for (const unsigned char *c = (const unsigned char *)e->name; *c; c++)
                m.hash = (m.hash ^ *c) * 16777619u;
            size_t len = strlen(e->name); /* its first 31 bytes, NUL-padded as the collector's */
            memcpy(m.name, e->name, len < sizeof m.name - 1 ? len : sizeof m.name - 1);
            if (PUSH(f->marks, m))
                x->oom = 1;
        } else if (!strcmp(e->name, "record_param_comms")) {
            e->c.pid = e->pid;
            e->c.tid = e->tid;
            e->c.ts = e->ts;
            e->c.dur = dur;
            e->c.ext = e->ext;
            if (PUSH(f->comms, e->c))
                x->oom = 1;
            else
                e->c.ranks = NULL;
        } else if (!strncmp(e->name, "ProfilerStep#", 13)) {
            int n = atoi(e->name + 13);
            for (size_t i = 0; i < f->steps.n; i++)
                if (f->steps.v[i].n == n)
                    return; /* the same step as cpu_op and as user_annotation */
            struct cs__kstep s = {.ts = e->ts, .dur = dur, .n = n};
            if (PUSH(f->steps, s))
                x->oom = 1;
        }
    } else if ((e->ph == 's' || e->ph == 'f') && !strcmp(e->cat, "ac2g") && e->have_ts) {
        struct cs__kflow fl = {.id = e->id, .pid = e->pid, .tid = e->tid, .ts = e->ts, .ph = e->ph};
        if (PUSH(f->flows, fl))
            x->oom = 1;
    }
}

static int close_container(struct ctx *x)
{
    if (x->depth <= MAXDEPTH) {
        if (x->events_array && x->depth == 3 && x->type[3] == '{')
            event_done(x);
        else if (x->events_array && x->depth == 2)
            x->events_array = 0;
        else if (in_dist(x) && x->depth == 4 && !strcmp(x->key[2], "pg_config")) {
            if (!x->pg.ranks && x->e.ranks.n) {
                x->pg.ranks = malloc(x->e.ranks.n * sizeof *x->pg.ranks);
                if (x->pg.ranks) {
                    memcpy(x->pg.ranks, x->e.ranks.v, x->e.ranks.n * sizeof *x->pg.ranks);
                    x->pg.nranks = (int)x->e.ranks.n;
                }
            }
            if (PUSH(x->f->pgs, x->pg)) {
                free(x->pg.ranks);
                x->oom = 1;
            }
            x->pg = (struct cs__kpg){0};
        }
    }
    x->depth--;
    return !x->oom;
}

static int cb_end_map(void *c)
{
    return close_container(c);
}

static int cb_end_array(void *c)
{
    return close_container(c);
}

static const char *base(const char *p)
{
    const char *s = strrchr(p, '/');
    return s && s[1] ? s + 1 : p;
}

int cs__kineto_parse(const char *path, struct cs__kfile *f, char *err, size_t errlen)
{
    *f = (struct cs__kfile){
        .path = path, .rank = -1, .world = -1, .t_min = INT64_MAX, .t_max = INT64_MIN};
    int fd = cs_input_open(path);
    gzFile g = fd >= 0 ? gzdopen(fd, "rb") : NULL;
    if (!g) {
        int e = errno ? errno : ENOMEM;
        if (fd >= 0)
            close(fd);
        snprintf(err, errlen, "%s: cannot open: %s", path, cs_input_strerror(e));
        return CS_EIO;
    }
    gzbuffer(g, 1 << 17);
    static const yajl_callbacks cb = {cb_null,    cb_bool,        NULL,         NULL,
                                      cb_number,  cb_string,      cb_start_map, cb_key,
                                      cb_end_map, cb_start_array, cb_end_array};
    struct ctx *x = calloc(1, sizeof *x);
    yajl_handle h = x ? yajl_alloc(&cb, NULL, x) : NULL;
    unsigned char *buf = malloc(1 << 16);
    if (!x || !h || !buf) {
        gzclose(g);
        if (h)
            yajl_free(h);
        free(x);
        free(buf);
        snprintf(err, errlen, "%s: out of memory", path);
        return CS_ENOMEM;
    }
    cs__phase_pats_init(&x->pats);
    x->f = f;
    yajl_config(h, yajl_dont_validate_strings, 1);
    int rc = 0;
    uint64_t off = 0;
    int n;
    yajl_status st = yajl_status_ok;
    while ((n = gzread(g, buf, 1 << 16)) > 0) {
        st = yajl_parse(h, buf, (size_t)n);
        if (st != yajl_status_ok)
            break;
        off += (uint64_t)n;
    }
    int zerr = 0;
    const char *zmsg = gzerror(g, &zerr);
    if (x->oom) {
        snprintf(err, errlen, "%s: out of memory after %" PRIu64 " events", path, f->events);
        rc = CS_ENOMEM;
    } else if (x->too_deep) {
        snprintf(err, errlen,
                 "%s: not a Kineto trace: arrays and objects nested more than %d levels deep "
                 "(at byte %" PRIu64 ")",
                 base(path), NEST_LIMIT, off + (uint64_t)yajl_get_bytes_consumed(h));
        rc = CS_EFORMAT;
    } else if (st != yajl_status_ok) {
        unsigned char *m = yajl_get_error(h, 0, buf, (size_t)n);
        size_t at = yajl_get_bytes_consumed(h);
        char *nl = strchr((char *)m, '\n');
        if (nl)
            *nl = '\0';
        snprintf(err, errlen, "%s: %s at byte %" PRIu64 ": %s", base(path),
                 off + at == 0 || !x->top_object ? "not JSON" : "invalid JSON", off + at,
                 (const char *)m);
        yajl_free_error(h, m);
        rc = CS_EFORMAT;
    } else if (n < 0 || (zerr != Z_OK && zerr != Z_STREAM_END)) {
        snprintf(err, errlen,
                 "%s: gzip data corrupt or truncated after %" PRIu64 " bytes of JSON: %s",
                 base(path), off, zmsg ? zmsg : "read error");
        rc = CS_ETRUNC;
    } else if (yajl_complete_parse(h) != yajl_status_ok) {
        snprintf(err, errlen,
                 "%s: truncated JSON: the text ends at byte %" PRIu64 " inside %s (after %" PRIu64
                 " trace events)",
                 base(path), off,
                 x->events_array ? "the traceEvents array" : "the top-level object", f->events);
        rc = off ? CS_ETRUNC : CS_EEMPTY;
        if (!off)
            snprintf(err, errlen, "%s: empty file", base(path));
    } else if (f->legacy && !f->events) {
        snprintf(err, errlen,
                 "%s: not a PyTorch profiler trace: a JSON array without trace events (the "
                 "profiler writes an object with \"traceEvents\", or an array of event objects)",
                 base(path));
        rc = CS_EFORMAT;
    } else if (!x->top_object || !x->saw_events) {
        snprintf(err, errlen, "%s: not a Kineto trace: %s", base(path),
                 x->top_object ? "no \"traceEvents\" array" : "the JSON is not an object");
        rc = CS_EFORMAT;
    }
    yajl_free(h);
    gzclose(g);
    free(buf);
    free(x->e.c.ranks);
    free(x->e.ranks.v);
    free(x->pg.ranks);
    free(x);
    if (rc)
        cs__kfile_free(f);
    return rc;
}

void cs__kfile_free(struct cs__kfile *f)
{
    for (size_t i = 0; i < f->comms.n; i++)
        free(f->comms.v[i].ranks);
    for (size_t i = 0; i < f->pgs.n; i++)
        free(f->pgs.v[i].ranks);
    free(f->kernels.v);
    free(f->launches.v);
    free(f->comms.v);
    free(f->steps.v);
    free(f->flows.v);
    free(f->pgs.v);
    free(f->cands.v);
    free(f->devs.v);
    free(f->gloo.v);
    free(f->marks.v);
    const char *p = f->path;
    *f = (struct cs__kfile){.path = p, .rank = -1, .world = -1};
}
