/*
 * NVTX ranges and marks as trace records: libcommscope.so is an NVTX injection library.
 *
 * A program's NVTX v3 calls (header-only; PyTorch, Megatron, NeMo, most CUDA code) do nothing
 * until the first call loads the library NVTX_INJECTION64_PATH names and calls its
 * InitializeInjectionNvtx2.  `commscope run` points that variable at libcommscope.so (unless the
 * user set it, e.g. for Nsight Systems, which needs it itself), so the loader finds this already
 * preloaded library and the handlers below receive the program's MarkA/MarkEx, RangePushA/PushEx/
 * Pop, RangeStartA/StartEx/End and the domain variants.  Each becomes an instant record
 * (CS_OP_NVTX_RANGE_BEGIN at the push or start, CS_OP_NVTX_RANGE_END at the pop or end, with the
 * range's name, CS_OP_NVTX_MARK) while tracing is on; nothing is recorded before the trace opens
 * (MPI_Init or the first NCCL call).  The handlers never fail the program's call: the values NVTX
 * defines (push/pop nesting levels, range ids) are returned whether tracing is on or not.
 *
 * Names: ASCII messages and strings registered with nvtxDomainRegisterStringA; wide-character
 * names are recorded as "" (not converted).  Push/pop nesting is per thread and one stack for all
 * domains; start/end ranges may end on another thread (a small table keeps their names).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../core/collector.h"
#include "../core/fence.h"
#include "abi.h"

#define STACK 64  /* push/pop levels whose names are remembered per thread */
#define OPEN 1024 /* start/end ranges open at once whose names are remembered */

struct named {
    char name[CS_NVTX_NAME_MAX];
    uint32_t hash;
};

static __thread struct named stack[STACK];
static __thread int depth;

/* Start/end range names, without a lock: a slot's id is BUSY while its name is written (a
 * sequence lock); end() takes the name only if the id is still its own after the copy.  With more
 * than OPEN ranges open, a newer range takes the slot and the older one ends with no name. */
#define BUSY UINT64_MAX
static struct open_range {
    _Atomic uint64_t id;
    struct named n;
} open_ranges[OPEN];
static _Atomic uint64_t next_id = 1;

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void set_name(struct named *n, const char *s)
{
    if (!s)
        s = "";
    size_t len = strnlen(s, CS_NVTX_NAME_MAX - 1);
    memcpy(n->name, s, len);
    memset(n->name + len, 0, CS_NVTX_NAME_MAX - len);
    n->hash = *s ? fnv1a(s) : 0;
}

static void record(uint16_t op, const struct named *n, int32_t aux)
{
    if (!cs_active)
        return;
    uint64_t t = cs_now();
    struct cs_event *ev = cs_rec_begin();
    if (!ev)
        return;
    ev->t_begin = ev->t_end = t;
    memcpy((char *)ev + 16, n->name, CS_NVTX_NAME_MAX); /* comm .. request */
    ev->seq = n->hash;
    ev->peer = -1;
    ev->op = op;
    ev->aux = aux;
    cs_rec_commit(ev);
}

/* The name of an event's attributes: ASCII or a registered string (our own copy). */
static const char *attr_name(const struct cs_nvtx_attributes *a)
{
    if (!a || a->size < offsetof(struct cs_nvtx_attributes, message) + sizeof(void *))
        return "";
    if (a->message_type == CS_NVTX_MESSAGE_TYPE_ASCII ||
        a->message_type == CS_NVTX_MESSAGE_TYPE_REGISTERED)
        return a->message ? (const char *)a->message : "";
    return "";
}

static void mark(const char *s)
{
    struct named n;
    set_name(&n, s);
    record(CS_OP_NVTX_MARK, &n, 0);
}

static int push(const char *s)
{
    struct named n;
    set_name(&n, s);
    int level = depth++;
    if (level < STACK)
        stack[level] = n;
    record(CS_OP_NVTX_RANGE_BEGIN, &n, level + 1);
    return level;
}

static int pop(void)
{
    if (depth <= 0)
        return -1; /* NVTX: a pop without a push is an error (negative level) */
    int level = --depth;
    struct named none = {{0}, 0};
    record(CS_OP_NVTX_RANGE_END, level < STACK ? &stack[level] : &none, level + 1);
    return level;
}

static uint64_t start(const char *s)
{
    uint64_t id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
    struct named n;
    set_name(&n, s);
    struct open_range *slot = &open_ranges[id % OPEN];
    atomic_store_explicit(&slot->id, BUSY, memory_order_relaxed);
    CS_FENCE(__ATOMIC_RELEASE);
    slot->n = n;
    atomic_store_explicit(&slot->id, id, memory_order_release);
    record(CS_OP_NVTX_RANGE_BEGIN, &n, 0);
    return id;
}

static void end(uint64_t id)
{
    struct named n = {{0}, 0};
    struct open_range *slot = &open_ranges[id % OPEN];
    uint64_t mine = id;
    if (atomic_load_explicit(&slot->id, memory_order_acquire) == id) {
        n = slot->n;
        CS_FENCE(__ATOMIC_ACQUIRE);
        if (!atomic_compare_exchange_strong_explicit(&slot->id, &mine, 0, memory_order_relaxed,
                                                     memory_order_relaxed))
            n = (struct named){{0}, 0}; /* the slot was taken while the name was copied */
    }
    record(CS_OP_NVTX_RANGE_END, &n, 0);
}

/* The handlers, with NVTX's signatures. */
static void h_mark_a(const char *m)
{
    mark(m);
}
static void h_mark_ex(const struct cs_nvtx_attributes *a)
{
    mark(attr_name(a));
}
static uint64_t h_start_a(const char *m)
{
    return start(m);
}
static uint64_t h_start_ex(const struct cs_nvtx_attributes *a)
{
    return start(attr_name(a));
}
static void h_end(uint64_t id)
{
    end(id);
}
static int h_push_a(const char *m)
{
    return push(m);
}
static int h_push_ex(const struct cs_nvtx_attributes *a)
{
    return push(attr_name(a));
}
static int h_pop(void)
{
    return pop();
}
static void h_dmark(void *dom, const struct cs_nvtx_attributes *a)
{
    (void)dom;
    mark(attr_name(a));
}
static uint64_t h_dstart(void *dom, const struct cs_nvtx_attributes *a)
{
    (void)dom;
    return start(attr_name(a));
}
static void h_dend(void *dom, uint64_t id)
{
    (void)dom;
    end(id);
}
static int h_dpush(void *dom, const struct cs_nvtx_attributes *a)
{
    (void)dom;
    return push(attr_name(a));
}
static int h_dpop(void *dom)
{
    (void)dom;
    return pop();
}
/* A registered string's handle is a copy of the string (kept for the life of the process, as
 * NVTX specifies registered strings to be). */
static void *h_register(void *dom, const char *s)
{
    (void)dom;
    return s ? strdup(s) : NULL;
}
/* Domains need only be distinct non-null handles. */
static void *h_domain(const char *name)
{
    return strdup(name ? name : "");
}

static int install(const struct cs_nvtx_callbacks *cb, int module, unsigned id, cs_nvtx_fn fn)
{
    cs_nvtx_fn **table = NULL;
    unsigned size = 0;
    if (!cb->get_module_function_table(module, &table, &size) || !table || id >= size || !table[id])
        return 0;
    *table[id] = fn;
    return 1;
}

#define FN(f) ((cs_nvtx_fn)(void (*)(void))(f))

CS_EXPORT int InitializeInjectionNvtx2(cs_nvtx_get_export_table get_export_table);

int InitializeInjectionNvtx2(cs_nvtx_get_export_table get_export_table)
{
    if (getenv("COMMSCOPE_NVTX") && !strcmp(getenv("COMMSCOPE_NVTX"), "off"))
        return 0;
    const struct cs_nvtx_callbacks *cb =
        get_export_table ? get_export_table(CS_NVTX_ETID_CALLBACKS) : NULL;
    if (!cb || cb->struct_size < sizeof *cb || !cb->get_module_function_table)
        return 0;
    int ok = 0;
    ok += install(cb, CS_NVTX_MODULE_CORE, CS_NVTX_CORE_MarkA, FN(h_mark_a));
    ok += install(cb, CS_NVTX_MODULE_CORE, CS_NVTX_CORE_MarkEx, FN(h_mark_ex));
    ok += install(cb, CS_NVTX_MODULE_CORE, CS_NVTX_CORE_RangeStartA, FN(h_start_a));
    ok += install(cb, CS_NVTX_MODULE_CORE, CS_NVTX_CORE_RangeStartEx, FN(h_start_ex));
    ok += install(cb, CS_NVTX_MODULE_CORE, CS_NVTX_CORE_RangeEnd, FN(h_end));
    ok += install(cb, CS_NVTX_MODULE_CORE, CS_NVTX_CORE_RangePushA, FN(h_push_a));
    ok += install(cb, CS_NVTX_MODULE_CORE, CS_NVTX_CORE_RangePushEx, FN(h_push_ex));
    ok += install(cb, CS_NVTX_MODULE_CORE, CS_NVTX_CORE_RangePop, FN(h_pop));
    install(cb, CS_NVTX_MODULE_CORE2, CS_NVTX_CORE2_DomainMarkEx, FN(h_dmark));
    install(cb, CS_NVTX_MODULE_CORE2, CS_NVTX_CORE2_DomainRangeStartEx, FN(h_dstart));
    install(cb, CS_NVTX_MODULE_CORE2, CS_NVTX_CORE2_DomainRangeEnd, FN(h_dend));
    install(cb, CS_NVTX_MODULE_CORE2, CS_NVTX_CORE2_DomainRangePushEx, FN(h_dpush));
    install(cb, CS_NVTX_MODULE_CORE2, CS_NVTX_CORE2_DomainRangePop, FN(h_dpop));
    install(cb, CS_NVTX_MODULE_CORE2, CS_NVTX_CORE2_DomainRegisterStringA, FN(h_register));
    install(cb, CS_NVTX_MODULE_CORE2, CS_NVTX_CORE2_DomainCreateA, FN(h_domain));
    /* Without the core module nothing would be recorded: decline, so NVTX stays a no-op. */
    return ok > 0;
}
