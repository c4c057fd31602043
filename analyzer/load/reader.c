/* Reading and validating one rank's trace file (format in include/commscope/trace.h). */
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commscope/ops.h"
#include "commscope/totals.h"

#define KNOWN_FILE_FLAGS                                                                           \
    (CS_FLAG_PARTIAL | CS_FLAG_DROPPED | CS_FLAG_DISABLED | CS_FLAG_CLOCK_SKEW | CS_FLAG_THREADS | \
     CS_FLAG_NCCL_STATIC | CS_FLAG_NO_MPI | CS_FLAG_CLOCK_ROOT | CS_FLAG_STORAGE |                 \
     CS_FLAG_CHECKED | CS_FLAG_NO_CALLS | CS_FLAG_RING)
#define KNOWN_EVENT_FLAGS 0x7ffu
/* Members one process may hold in an ncclCommInitAll communicator (devices), at most. */
#define CS_COMM_MULTI_MAX 4096
/* A world larger than this is a corrupted header, not a job. */
#define MAX_WORLD (1 << 24)

struct blk {
    uint64_t off; /* file offset of the block header */
    uint64_t seq;
    uint32_t used;
    uint16_t thread;
    uint8_t sample; /* its events are resource samples */
};

struct cursor {
    const struct cs_event *ev;  /* next event of this thread, NULL when done */
    const struct cs_event *end; /* end of the current block's committed events */
    size_t bi, bend;            /* current block index into r->blk and one past its last */
    unsigned thread;            /* the thread's index (block header `thread`) */
    /* Where the thread's events start: its first block and events skipped in it (the kept
     * window of a ring-mode trace; 0 when every event is in it). */
    size_t bi0;
    uint32_t skip0;
};

struct cs_reader {
    char name[256];
    const unsigned char *map;
    size_t size;
    int copied; /* map is a malloc'ed copy of the file, not a mapping */
    struct cs_file_header hdr;
    struct cs_reader_stats st;
    struct blk *blk; /* event blocks, sorted by (thread, seq) */
    size_t nblk;
    struct blk *sblk; /* the resource sampler's blocks (taken out of blk), in the same order */
    size_t nsblk;
    const struct cs_comm_record **comm;
    size_t ncomm, capcomm;
    struct cursor *cur;
    size_t ncur;
    const struct cursor *last;   /* the cursor cs_reader_next() took its last event from */
    struct cs_reader_tail *tail; /* per recording thread (check_tails) */
    /* Ring mode: the totals block as found (journal redone), and the whole-run totals handed
     * out (its rows plus the events outside the window). */
    struct cs_totals_head th;
    struct cs_total_row *trow;
    size_t ntrow, captrow;
    uint64_t totals_off; /* file offset of the totals block, 0 none */
    struct cs_reader_totals tot;
};

const char *cs_strerror(int err)
{
    switch (err) {
#define X(name, value, msg)                                                                        \
    case value:                                                                                    \
        return msg;
        CS_ERROR_MAP(X)
#undef X
    case 0:
        return "success";
    default:
        return "unknown error";
    }
}

const char *cs_err_name(int err)
{
    switch (err) {
#define X(name, value, msg)                                                                        \
    case value:                                                                                    \
        return "CS_" #name;
        CS_ERROR_MAP(X)
#undef X
    case 0:
        return "CS_OK";
    default:
        return "CS_E?";
    }
}

/* CRC of len bytes at p with the 4-byte field at field_off counted as zero. */
static uint32_t crc_without_field(const unsigned char *p, size_t len, size_t field_off)
{
    static const unsigned char zero[4];
    uint32_t c = cs_crc32(0, p, field_off);
    c = cs_crc32(c, zero, 4);
    return cs_crc32(c, p + field_off + 4, len - field_off - 4);
}

/* ---- errors ---- */

static int fail(const struct cs_reader *r, char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int fail(const struct cs_reader *r, char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        int n = snprintf(err, errlen, "%s: ", r->name);
        if (n < 0 || (size_t)n >= errlen)
            n = 0;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return code;
}

static int terminated(const char *s, size_t n)
{
    return memchr(s, '\0', n) != NULL;
}

/* Every byte zero: the first one, and each equal to the next (memcmp's vector loop instead of a
 * byte at a time: a file's unused 16 KiB blocks are checked whole). */
static int all_zero(const unsigned char *p, size_t n)
{
    return !n || (!p[0] && !memcmp(p, p + 1, n - 1));
}

/* ---- header ---- */

/*
 * A partial file of a CS_FLAG_CHECKED collector: its header has no header_crc (it changes while
 * the rank runs), but a live CRC over everything except four counters, and each counter's
 * complement beside it (trace.h).
 */
static int check_live_header(struct cs_reader *r, char *err, size_t errlen)
{
    const struct cs_file_header *h = &r->hdr;
    union {
        struct cs_file_header h;
        unsigned char page[CS_HEADER_SIZE];
    } c;
    memcpy(c.page, r->map, CS_HEADER_SIZE);
    cs_header_live_view(&c.h);
    uint32_t crc = cs_crc32(0, c.page, CS_HEADER_SIZE);
    if (crc != h->live_crc)
        return fail(r, err, errlen, CS_ECRC,
                    "partial file's header CRC mismatch (stored 0x%08" PRIx32
                    ", computed 0x%08" PRIx32 ")",
                    h->live_crc, crc);
    const uint64_t counters[4] = {h->dropped, h->unrecorded_tests, h->unrecorded_test_ns,
                                  h->gpu_dropped};
    static const char *const names[4] = {"dropped", "unrecorded_tests", "unrecorded_test_ns",
                                         "gpu_dropped"};
    for (int i = 0; i < 4; i++)
        if (h->counter_check[i] != ~counters[i])
            return fail(r, err, errlen, CS_EHEADER,
                        "header counter %s (%" PRIu64 ") does not match its check (byte %zu)",
                        names[i], counters[i],
                        offsetof(struct cs_file_header, counter_check) + 8 * (size_t)i);
    return 0;
}

static int check_header(struct cs_reader *r, char *err, size_t errlen)
{
    const struct cs_file_header *h = &r->hdr;
    if (r->size == 0)
        return fail(r, err, errlen, CS_EEMPTY, "empty file (0 bytes), not a commscope trace");
    size_t have = r->size < 8 ? r->size : 8;
    if (memcmp(r->map, CS_TRACE_MAGIC, have) != 0) {
        char shown[40];
        size_t k = 0;
        for (size_t i = 0; i < have && k + 5 < sizeof shown; i++) {
            unsigned char c = r->map[i];
            if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
                shown[k++] = (char)c;
            else
                k += (size_t)snprintf(shown + k, sizeof shown - k, "\\x%02x", c);
        }
        shown[k] = '\0';
        return fail(r, err, errlen, CS_EFORMAT, "not a commscope trace (magic \"%s\" at byte 0)",
                    shown);
    }
    if (r->size < CS_HEADER_SIZE)
        return fail(r, err, errlen, CS_ETRUNC, "truncated at byte %zu of at least %u (header)",
                    r->size, CS_HEADER_SIZE);
    memcpy(&r->hdr, r->map, sizeof r->hdr);
    if (h->version != CS_TRACE_VERSION)
        return fail(r, err, errlen, CS_EVERSION,
                    "trace format version %" PRIu32 ", this analyzer reads version %u (byte 8)",
                    h->version, CS_TRACE_VERSION);
    if (h->header_size != CS_HEADER_SIZE || h->block_size != CS_BLOCK_SIZE ||
        h->event_size != CS_EVENT_SIZE)
        return fail(r, err, errlen, CS_ESIZE,
                    "header/block/event sizes %" PRIu32 "/%" PRIu32 "/%" PRIu32
                    ", expected %u/%u/%u (byte 12)",
                    h->header_size, h->block_size, h->event_size, CS_HEADER_SIZE, CS_BLOCK_SIZE,
                    CS_EVENT_SIZE);
    size_t crc_off = offsetof(struct cs_file_header, header_crc);
    int partial = (h->flags & CS_FLAG_PARTIAL) != 0;
    if (h->header_crc != 0) {
        uint32_t c = crc_without_field(r->map, CS_HEADER_SIZE, crc_off);
        if (c != h->header_crc)
            return fail(r, err, errlen, CS_ECRC,
                        "header CRC mismatch (stored 0x%08" PRIx32 ", computed 0x%08" PRIx32 ")",
                        h->header_crc, c);
    } else if (!partial) {
        return fail(r, err, errlen, CS_EHEADER,
                    "closed file (partial flag clear) without a header CRC (byte %zu)", crc_off);
    } else if (h->flags & CS_FLAG_CHECKED) {
        int rc = check_live_header(r, err, errlen);
        if (rc)
            return rc;
    } else if (h->live_crc || h->live_pad ||
               !all_zero((const void *)h->counter_check, sizeof h->counter_check)) {
        return fail(r, err, errlen, CS_EHEADER,
                    "partial-file checks present without CS_FLAG_CHECKED (byte %zu)",
                    offsetof(struct cs_file_header, live_crc));
    }
    if (h->flags & ~(uint32_t)KNOWN_FILE_FLAGS)
        return fail(r, err, errlen, CS_EHEADER, "unknown header flags 0x%" PRIx32 " (byte %zu)",
                    h->flags & ~(uint32_t)KNOWN_FILE_FLAGS, offsetof(struct cs_file_header, flags));
    /* The exit handlers' record (trace.h): one stopped half way reads as none. */
    if (h->exit_check != cs_exit_check(h->exit_kind, h->exit_code, h->t_exit)) {
        r->hdr.exit_kind = 0;
        r->hdr.exit_code = 0;
        r->hdr.t_exit = 0;
        r->hdr.exit_check = 0;
    } else if (h->exit_kind > CS_EXIT_SIGNAL || h->t_exit >= CS_TIME_LIMIT) {
        return fail(r, err, errlen, CS_EHEADER,
                    "exit kind %" PRIu32 " unknown or exit time beyond 2^62 ns (byte %zu)",
                    h->exit_kind, offsetof(struct cs_file_header, exit_kind));
    }
    if (h->world_size < 1 || h->world_size > MAX_WORLD)
        return fail(r, err, errlen, CS_EHEADER, "world size %" PRId32 " out of range 1..%d",
                    h->world_size, MAX_WORLD);
    if (h->rank < 0 || h->rank >= h->world_size)
        return fail(r, err, errlen, CS_EHEADER, "rank %" PRId32 " out of range 0..%" PRId32,
                    h->rank, h->world_size - 1);
    if (!terminated(h->host, sizeof h->host) || !terminated(h->program, sizeof h->program) ||
        !terminated(h->note, sizeof h->note) || !terminated(h->gpu_note, sizeof h->gpu_note))
        return fail(r, err, errlen, CS_EHEADER,
                    "host, program, note or gpu_note not NUL-terminated");
    if (h->gpu_timing > CS_GPU_EVENTS || h->rank_source > CS_RANKSRC_SINGLE)
        return fail(r, err, errlen, CS_EHEADER,
                    "gpu_timing %" PRIu32 " or rank_source %" PRIu32 " unknown (bytes %zu..%zu)",
                    h->gpu_timing, h->rank_source, offsetof(struct cs_file_header, gpu_timing),
                    offsetof(struct cs_file_header, rank_source) + 3);
    for (int i = 0; i < 2; i++) {
        const struct cs_clock_sample *c = &h->clock[i];
        if (c->valid > 1)
            return fail(r, err, errlen, CS_EHEADER,
                        "clock sample %d: valid flag %" PRIu32 " is neither 0 nor 1", i, c->valid);
        if (c->valid &&
            (c->local_ns >= CS_TIME_LIMIT || c->rtt_ns >= CS_TIME_LIMIT ||
             c->offset_ns >= (int64_t)CS_TIME_LIMIT || c->offset_ns <= -(int64_t)CS_TIME_LIMIT))
            return fail(r, err, errlen, CS_EHEADER,
                        "clock sample %d: local_ns %" PRIu64 ", offset_ns %" PRId64
                        " or rtt_ns %" PRIu64 " beyond 2^62 ns (146 years)",
                        i, c->local_ns, c->offset_ns, c->rtt_ns);
    }
    if (h->t_init >= CS_TIME_LIMIT || h->t_finalize >= CS_TIME_LIMIT)
        return fail(r, err, errlen, CS_EHEADER,
                    "t_init %" PRIu64 " or t_finalize %" PRIu64 " beyond 2^62 ns (146 years)",
                    h->t_init, h->t_finalize);
    if (!partial && h->t_finalize != 0 && h->t_finalize < h->t_init)
        return fail(r, err, errlen, CS_EHEADER, "t_finalize %" PRIu64 " before t_init %" PRIu64,
                    h->t_finalize, h->t_init);
    if (!all_zero(r->map + sizeof *h, CS_HEADER_SIZE - sizeof *h))
        return fail(r, err, errlen, CS_EHEADER, "header padding not zero (bytes %zu..%u)",
                    sizeof *h, CS_HEADER_SIZE - 1);
    if (!partial) {
        uint64_t nb = h->blocks;
        if (nb > (UINT64_MAX - CS_HEADER_SIZE) / CS_BLOCK_SIZE)
            return fail(r, err, errlen, CS_EHEADER, "block count %" PRIu64 " impossible", nb);
        uint64_t want = CS_HEADER_SIZE + nb * CS_BLOCK_SIZE;
        if (r->size < want) {
            uint64_t whole = (r->size - CS_HEADER_SIZE) / CS_BLOCK_SIZE;
            return fail(r, err, errlen, CS_ETRUNC,
                        "truncated at byte %zu of %" PRIu64 " (block %" PRIu64 " of %" PRIu64 ")",
                        r->size, want, whole, nb);
        }
        if (r->size > want)
            return fail(r, err, errlen, CS_ESIZE,
                        "%" PRIu64 " unexpected bytes after the last of %" PRIu64
                        " blocks (file has %zu bytes, expected %" PRIu64 ")",
                        (uint64_t)r->size - want, nb, r->size, want);
    }
    return 0;
}

/* ---- blocks ---- */

static int add_comm(struct cs_reader *r, const struct cs_comm_record *c)
{
    if (r->ncomm == r->capcomm) {
        size_t cap = r->capcomm ? 2 * r->capcomm : 16;
        void *p = realloc(r->comm, cap * sizeof *r->comm);
        if (!p)
            return CS_ENOMEM;
        r->comm = p;
        r->capcomm = cap;
    }
    r->comm[r->ncomm++] = c;
    return 0;
}

static int check_comms(struct cs_reader *r, uint64_t bi, uint64_t off, uint32_t used, char *err,
                       size_t errlen)
{
    const unsigned char *base = r->map + off + sizeof(struct cs_block_header);
    int32_t world = r->hdr.world_size;
    uint32_t pos = 0;
    for (unsigned k = 0; pos < used; k++) {
        uint64_t at = off + sizeof(struct cs_block_header) + pos;
        if (used - pos < sizeof(struct cs_comm_record))
            return fail(r, err, errlen, CS_ECOMM,
                        "comm record %u in block %" PRIu64 ": only %" PRIu32
                        " bytes left, a record needs %zu (byte %" PRIu64 ")",
                        k, bi, used - pos, sizeof(struct cs_comm_record), at);
        const struct cs_comm_record *c = (const void *)(base + pos);
        if (c->record_bytes < sizeof *c || c->record_bytes % 8 || c->record_bytes > used - pos)
            return fail(r, err, errlen, CS_ECOMM,
                        "comm record %u in block %" PRIu64 ": length %" PRIu32
                        " overflows the %" PRIu32 " bytes left or is not a multiple of 8 >= 48"
                        " (byte %" PRIu64 ")",
                        k, bi, c->record_bytes, used - pos, at);
        if (c->kind != CS_COMM_MPI && c->kind != CS_COMM_NCCL)
            return fail(r, err, errlen, CS_ECOMM,
                        "comm record %u in block %" PRIu64 ": unknown kind %u (byte %" PRIu64 ")",
                        k, bi, (unsigned)c->kind, at);
        if (c->op != 0 && !cs_op_info(c->op)->name)
            return fail(r, err, errlen, CS_ECOMM,
                        "comm record %u in block %" PRIu64 ": unknown op %u (byte %" PRIu64 ")", k,
                        bi, (unsigned)c->op, at);
        if (c->id == 0)
            return fail(r, err, errlen, CS_ECOMM,
                        "comm record %u in block %" PRIu64 ": id 0 (byte %" PRIu64 ")", k, bi, at);
        /* ncclCommInitAll (trailer flag CS_COMM_GPU_MULTI): one process holds every member, so
         * the size is its device count, not bounded by the world. */
        int multi = 0;
        uint64_t goff = (sizeof *c + (uint64_t)(c->size > 0 ? c->size : 0) * 4 + 7) & ~7ull;
        if (c->kind == CS_COMM_NCCL && c->size > 0 &&
            goff + sizeof(struct cs_comm_gpu) <= c->record_bytes) {
            uint32_t gflags;
            memcpy(&gflags, (const char *)c + goff + 4, sizeof gflags);
            multi = (gflags & CS_COMM_GPU_MULTI) != 0;
        }
        if (c->size < 1 || c->size > (multi ? CS_COMM_MULTI_MAX : world) ||
            (uint64_t)c->size * 4 > c->record_bytes - sizeof *c)
            return fail(r, err, errlen, CS_ECOMM,
                        "comm record %u in block %" PRIu64 ": size %" PRId32
                        " does not fit the world (%" PRId32 ") or the record (%" PRIu32
                        " bytes) (byte %" PRIu64 ")",
                        k, bi, c->size, multi ? CS_COMM_MULTI_MAX : world, c->record_bytes, at);
        if (c->my_rank < 0 || c->my_rank >= c->size)
            return fail(r, err, errlen, CS_ECOMM,
                        "comm record %u in block %" PRIu64 ": my_rank %" PRId32
                        " out of range 0..%" PRId32 " (byte %" PRIu64 ")",
                        k, bi, c->my_rank, c->size - 1, at);
        if (c->members[c->my_rank] != r->hdr.rank)
            return fail(r, err, errlen, CS_ECOMM,
                        "comm record %u in block %" PRIu64 ": member %" PRId32
                        " is world rank %" PRId32 ", not this file's rank %" PRId32
                        " (byte %" PRIu64 ")",
                        k, bi, c->my_rank, c->members[c->my_rank], r->hdr.rank, at);
        /* Distinct members in range.  Most lists increase (the world, splits keyed by rank):
         * then they are distinct, and in range when the last one is; every file holds the world
         * list, so thousands of ranks make this loop count. */
        int32_t last = -1, n = c->size, mine = c->my_rank;
        const int32_t *mem = c->members;
        int rising = 1, nccl = c->kind == CS_COMM_NCCL;
        if (!nccl) {
            int32_t i = 0;
            while (i < n && mem[i] > last)
                last = mem[i++];
            rising = i == n;
        }
        for (int32_t i = 0; nccl && i < n && rising; i++) {
            int32_t m = mem[i];
            /* NCCL records know only their own member; the others are -1. */
            if (m == -1 && i != mine)
                continue;
            rising = m > last;
            last = m;
        }
        /* Otherwise a bitmap of the world, which also finds the first member out of range or
         * repeated. */
        if (!rising || last >= world) {
            unsigned char *seen = calloc((size_t)world / 8 + 1, 1);
            if (!seen)
                return fail(r, err, errlen, CS_ENOMEM, "out of memory checking comm record %u", k);
            for (int32_t i = 0; i < n; i++) {
                int32_t m = mem[i];
                if (m == -1 && nccl && i != mine)
                    continue;
                if (m < 0 || m >= world || (seen[m / 8] & (1u << (m % 8)))) {
                    free(seen);
                    return fail(r, err, errlen, CS_ECOMM,
                                "comm record %u in block %" PRIu64 ": member %" PRId32
                                " is world rank %" PRId32
                                ", out of range or repeated (byte %" PRIu64 ")",
                                k, bi, i, m, at);
                }
                seen[m / 8] |= (unsigned char)(1u << (m % 8));
            }
            free(seen);
        }
        if (add_comm(r, c))
            return fail(r, err, errlen, CS_ENOMEM, "out of memory reading comm records");
        pos += c->record_bytes;
    }
    return 0;
}

/* What check_events asks of an op, by op id (op_checks). */
enum { OPC_BAD = 1, OPC_COMM = 2, OPC_REQUEST = 4, OPC_SAMPLE = 8 };

static void op_checks(unsigned char *t)
{
    for (unsigned op = 0; op < CS_OP_MAX; op++) {
        const struct cs_op_info *oi = cs_op_info(op);
        enum cs_op_kind k = oi->kind;
        t[op] = (unsigned char)((op == CS_OP_NONE || !oi->name ? OPC_BAD : 0) |
                                (k == CS_KIND_COLL || k == CS_KIND_ICOLL ? OPC_COMM : 0) |
                                (k == CS_KIND_ICOLL || k == CS_KIND_IP2P || k == CS_KIND_DONE
                                     ? OPC_REQUEST
                                     : 0) |
                                (k == CS_KIND_SAMPLE ? OPC_SAMPLE : 0));
    }
}

/* The first thing wrong with event k of block bi (at byte `at`), said in err; 0 nothing. */
static int event_error(struct cs_reader *r, const struct cs_event *e, uint32_t k, uint64_t bi,
                       uint64_t at, int32_t world, char *err, size_t errlen)
{
    const struct cs_op_info *oi = cs_op_info(e->op);
    if (e->op == CS_OP_NONE || !oi->name)
        return fail(r, err, errlen, CS_EEVENT,
                    "event %" PRIu32 " in block %" PRIu64 ": unknown op %u (byte %" PRIu64 ")", k,
                    bi, (unsigned)e->op, at);
    if (e->t_end < e->t_begin)
        return fail(r, err, errlen, CS_EEVENT,
                    "event %" PRIu32 " in block %" PRIu64 ": t_end before t_begin (%" PRIu64
                    " < %" PRIu64 ", byte %" PRIu64 ")",
                    k, bi, e->t_end, e->t_begin, at);
    if (e->t_end >= CS_TIME_LIMIT)
        return fail(r, err, errlen, CS_EEVENT,
                    "event %" PRIu32 " in block %" PRIu64 ": t_end %" PRIu64
                    " beyond 2^62 ns (146 years; byte %" PRIu64 ")",
                    k, bi, e->t_end, at);
    if (e->flags & ~KNOWN_EVENT_FLAGS)
        return fail(r, err, errlen, CS_EEVENT,
                    "event %" PRIu32 " in block %" PRIu64 ": unknown flags 0x%x (byte %" PRIu64 ")",
                    k, bi, (unsigned)(e->flags & ~KNOWN_EVENT_FLAGS), at);
    if (e->peer < -1 || e->peer >= world)
        return fail(r, err, errlen, CS_EEVENT,
                    "event %" PRIu32 " in block %" PRIu64 ": peer %" PRId32
                    " out of range -1..%" PRId32 " (byte %" PRIu64 ")",
                    k, bi, e->peer, world - 1, at);
    if (((oi->kind == CS_KIND_COLL) | (oi->kind == CS_KIND_ICOLL)) & (e->comm == 0))
        return fail(r, err, errlen, CS_EEVENT,
                    "event %" PRIu32 " in block %" PRIu64 ": collective %s without a"
                    " communicator (byte %" PRIu64 ")",
                    k, bi, oi->name, at);
    if (((oi->kind == CS_KIND_ICOLL) | (oi->kind == CS_KIND_IP2P) | (oi->kind == CS_KIND_DONE)) &
        (e->request == 0))
        return fail(r, err, errlen, CS_EEVENT,
                    "event %" PRIu32 " in block %" PRIu64 ": %s without a request id (byte %" PRIu64
                    ")",
                    k, bi, oi->name, at);
    return 0;
}

/* The events of block bi: every check at once per event (opc: op_checks), the message from
 * event_error for the first event that fails one.  *sample: the block holds resource samples
 * (only: the sampler's thread records nothing else). */
static int check_events(struct cs_reader *r, uint64_t bi, uint64_t off, uint32_t used,
                        const unsigned char *opc, uint8_t *sample, char *err, size_t errlen)
{
    const struct cs_event *ev = (const void *)(r->map + off + sizeof(struct cs_block_header));
    int32_t world = r->hdr.world_size;
    uint32_t ns = 0;
    for (uint32_t k = 0; k < used; k++) {
        const struct cs_event *e = &ev[k];
        unsigned m = e->op < CS_OP_MAX ? opc[e->op] : OPC_BAD;
        ns += (m & OPC_SAMPLE) != 0;
        int bad = (m & OPC_BAD) | (e->t_end < e->t_begin) | (e->t_end >= CS_TIME_LIMIT) |
                  ((e->flags & ~KNOWN_EVENT_FLAGS) != 0) | (e->peer < -1) | (e->peer >= world) |
                  (((m & OPC_COMM) != 0) & (e->comm == 0)) |
                  (((m & OPC_REQUEST) != 0) & (e->request == 0));
        if (bad) {
            uint64_t at = off + sizeof(struct cs_block_header) + (uint64_t)k * CS_EVENT_SIZE;
            int rc = event_error(r, e, k, bi, at, world, err, errlen);
            if (rc)
                return rc;
        }
    }
    if (ns && ns != used)
        return fail(r, err, errlen, CS_EBLOCK,
                    "block %" PRIu64 " mixes %" PRIu32 " resource samples with %" PRIu32
                    " other events (byte %" PRIu64 ")",
                    bi, ns, used - ns, off);
    *sample = ns != 0;
    return 0;
}

/*
 * The resource sampler's thread records nothing but samples: its blocks go from r->blk to
 * r->sblk (both stay sorted by thread and sequence), out of the event cursors, so no event
 * consumer sees them.  Empty blocks go with their thread.
 */
static int split_samples(struct cs_reader *r, char *err, size_t errlen)
{
    size_t ns = 0;
    for (size_t i = 0; i < r->nblk;) {
        size_t j = i, smp = 0, evs = 0;
        while (j < r->nblk && r->blk[j].thread == r->blk[i].thread) {
            smp += r->blk[j].sample;
            evs += !r->blk[j].sample && r->blk[j].used;
            j++;
        }
        if (smp && evs)
            return fail(r, err, errlen, CS_EBLOCK,
                        "thread %u records resource samples and other events (blocks at bytes "
                        "%" PRIu64 " to %" PRIu64 ")",
                        (unsigned)r->blk[i].thread, r->blk[i].off, r->blk[j - 1].off);
        if (smp)
            ns += j - i;
        i = j;
    }
    if (!ns)
        return 0;
    r->sblk = malloc(ns * sizeof *r->sblk);
    if (!r->sblk)
        return fail(r, err, errlen, CS_ENOMEM, "out of memory indexing blocks");
    size_t keep = 0;
    for (size_t i = 0; i < r->nblk;) {
        size_t j = i;
        int smp = 0;
        while (j < r->nblk && r->blk[j].thread == r->blk[i].thread)
            smp |= r->blk[j++].sample;
        for (; i < j; i++) {
            if (smp) {
                r->sblk[r->nsblk++] = r->blk[i];
                r->st.samples += r->blk[i].used;
            } else {
                r->blk[keep++] = r->blk[i];
            }
        }
    }
    r->nblk = keep;
    r->st.events -= r->st.samples;
    return 0;
}

size_t cs_reader_sample_blocks(const struct cs_reader *r)
{
    return r->nsblk;
}

size_t cs_reader_sample_block(const struct cs_reader *r, size_t i, const struct cs_event **out)
{
    if (i >= r->nsblk) {
        *out = NULL;
        return 0;
    }
    *out = (const struct cs_event *)(r->map + r->sblk[i].off + sizeof(struct cs_block_header));
    return r->sblk[i].used;
}

/* CRC of the block at p (len bytes) with its crc field and the payload past `used` bytes taken
 * as zero. */
static uint32_t crc_zero_past(const unsigned char *p, uint64_t len, uint32_t used)
{
    static const unsigned char zero[4096];
    uint64_t keep = sizeof(struct cs_block_header) + used;
    if (keep > len)
        keep = len;
    uint32_t c = crc_without_field(p, keep, offsetof(struct cs_block_header, crc));
    for (uint64_t at = keep; at < len;) {
        size_t n = len - at < sizeof zero ? (size_t)(len - at) : sizeof zero;
        c = cs_crc32(c, zero, n);
        at += n;
    }
    return c;
}

/*
 * An unsealed event block of a CS_FLAG_CHECKED file: its running check (live_sum over live_used
 * events, trace.h) must cover exactly its events, or one more when the writer stopped between
 * storing the check and the count; that event is then counted in (*bh).used.
 */
static int check_live_block(struct cs_reader *r, uint64_t bi, uint64_t off,
                            struct cs_block_header *bh, char *err, size_t errlen)
{
    uint32_t n = bh->live_used;
    if (n != bh->used && !(n == bh->used + 1 && n <= CS_EVENTS_PER_BLOCK))
        return fail(r, err, errlen, CS_EBLOCK,
                    "block %" PRIu64 ": its running check covers %" PRIu32
                    " events, the block holds %" PRIu32 " (byte %" PRIu64 ")",
                    bi, n, bh->used, off + 32);
    const struct cs_event *ev = (const void *)(r->map + off + sizeof(struct cs_block_header));
    uint32_t sum = 0;
    for (uint32_t k = 0; k < n; k++)
        sum = cs_live_step(sum, &ev[k]);
    if (sum != bh->live_sum)
        return fail(r, err, errlen, CS_ECRC,
                    "block %" PRIu64 ": running check mismatch over its %" PRIu32
                    " events (byte %" PRIu64 ")",
                    bi, n, off);
    bh->used = n;
    return 0;
}

static int add_blk(struct cs_reader *r, size_t *cap, const struct blk *b)
{
    if (r->nblk == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        void *p = realloc(r->blk, c * sizeof *r->blk);
        if (!p)
            return CS_ENOMEM;
        r->blk = p;
        *cap = c;
    }
    r->blk[r->nblk++] = *b;
    return 0;
}

static int blk_cmp(const void *a, const void *b)
{
    const struct blk *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return 0;
}

/*
 * Each recording thread's last committed event and, in a partial file, the call it was in: the
 * slot after the committed events of its last block holding a begun record (t_begin set, t_end 0;
 * trace.h).  A slot caught half written, or holding anything that is not a valid record, is no
 * call in flight.
 */
static int check_tails(struct cs_reader *r, const unsigned char *opc)
{
    r->tail = calloc(r->ncur ? r->ncur : 1, sizeof *r->tail);
    if (!r->tail)
        return -1;
    int32_t world = r->hdr.world_size;
    for (size_t t = 0; t < r->ncur; t++) {
        const struct blk *b = &r->blk[r->cur[t].bend - 1];
        const struct cs_event *ev =
            (const void *)(r->map + b->off + sizeof(struct cs_block_header));
        struct cs_reader_tail *x = &r->tail[t];
        x->thread = r->cur[t].thread;
        if (b->used)
            x->last = &ev[b->used - 1];
        else if (r->cur[t].bend - 1 > r->cur[t].bi && b[-1].used)
            x->last =
                (const struct cs_event *)(r->map + b[-1].off + sizeof(struct cs_block_header)) +
                b[-1].used - 1;
        if (!r->st.partial || b->used >= CS_EVENTS_PER_BLOCK)
            continue;
        const struct cs_event *e = &ev[b->used];
        unsigned m = e->op < CS_OP_MAX ? opc[e->op] : OPC_BAD;
        if (e->t_end == 0 && e->t_begin != 0 && e->t_begin < CS_TIME_LIMIT && !(m & OPC_BAD) &&
            !(e->flags & ~KNOWN_EVENT_FLAGS) && e->peer >= -1 && e->peer < world &&
            (!(m & OPC_COMM) || e->comm != 0))
            x->inflight = e;
    }
    return 0;
}

size_t cs_reader_tails(const struct cs_reader *r, const struct cs_reader_tail **out)
{
    *out = r->tail;
    return r->tail ? r->ncur : 0;
}

/* ---- ring mode: the totals block and the kept window ---- */

static int row_ok(const struct cs_total_row *w)
{
    if (w->op == CS_TOTAL_OP_OTHER)
        return w->bucket == 0 && w->comm == 0;
    const struct cs_op_info *in = cs_op_info(w->op);
    return in && in->name && w->bucket <= 64 && w->calls > 0 && w->t_first <= w->t_last &&
           w->t_last < CS_TIME_LIMIT &&
           (w->size == CS_TOTAL_MIXED || (cs_total_bucket(w->size) == w->bucket));
}

/*
 * The totals block at block i: copied, the journal of a fold the rank did not finish redone
 * (partial files), every row checked.
 */
static int check_totals(struct cs_reader *r, uint64_t i, uint64_t off, char *err, size_t errlen)
{
    if (r->totals_off)
        return fail(r, err, errlen, CS_EBLOCK,
                    "block %" PRIu64 ": a second totals block (byte %" PRIu64 ")", i, off);
    r->totals_off = off;
    const unsigned char *b = r->map + off;
    memcpy(&r->th, b + CS_TOTALS_HEAD_OFF, sizeof r->th);
    struct cs_totals_head *h = &r->th;
    if (h->cap_rows != CS_TOTALS_CAP_ROWS || h->nrows > h->cap_rows)
        return fail(r, err, errlen, CS_EBLOCK,
                    "totals block %" PRIu64 ": %" PRIu32 " rows of %" PRIu32
                    " (expected room for %u) (byte %" PRIu64 ")",
                    i, h->nrows, h->cap_rows, (unsigned)CS_TOTALS_CAP_ROWS,
                    off + CS_TOTALS_HEAD_OFF);
    r->captrow = h->cap_rows;
    r->trow = calloc(r->captrow, sizeof *r->trow);
    if (!r->trow)
        return fail(r, err, errlen, CS_ENOMEM, "out of memory");
    memcpy(r->trow, b + CS_TOTALS_ROWS_OFF, r->captrow * sizeof *r->trow);
    if (h->journal_seq) {
        /* Stopped before the rows were overwritten (folds is one behind), or after. */
        if (!r->st.partial || (h->journal_seq != h->folds + 1 && h->journal_seq != h->folds) ||
            h->journal_n > CS_EVENTS_PER_BLOCK || h->j_nrows > h->cap_rows)
            return fail(r, err, errlen, CS_EBLOCK,
                        "totals block %" PRIu64 ": journal of fold %" PRIu64 " (%" PRIu32
                        " rows) does not fit (byte %" PRIu64 ")",
                        i, h->journal_seq, h->journal_n, off + CS_TOTALS_HEAD_OFF);
        const struct cs_totals_journal *j = (const void *)(b + CS_TOTALS_JOURNAL_OFF);
        for (uint32_t k = 0; k < h->journal_n; k++) {
            if (j[k].row >= h->j_nrows)
                return fail(r, err, errlen, CS_EBLOCK,
                            "totals block %" PRIu64 ": journal entry %" PRIu32 " names row %" PRIu32
                            " of %" PRIu32,
                            i, k, j[k].row, h->j_nrows);
            r->trow[j[k].row] = j[k].val;
        }
        h->nrows = h->j_nrows;
        h->events = h->j_events;
        h->blocks = h->j_blocks;
        h->t_first = h->j_t_first;
        h->t_last = h->j_t_last;
        h->folds = h->journal_seq;
    }
    for (uint32_t k = 0; k < h->nrows; k++)
        if (!row_ok(&r->trow[k]))
            return fail(r, err, errlen, CS_EBLOCK,
                        "totals block %" PRIu64 ": row %" PRIu32 " is not a valid total (op %u, "
                        "bucket %u, %" PRIu64 " calls) (byte %" PRIu64 ")",
                        i, k, (unsigned)r->trow[k].op, (unsigned)r->trow[k].bucket,
                        r->trow[k].calls, off + CS_TOTALS_ROWS_OFF + k * sizeof *r->trow);
    r->ntrow = h->nrows;
    r->tot.ring = 1;
    r->tot.folded = h->events;
    r->tot.t_first = h->t_first;
    return 0;
}

/* The block a fold named in its journal, if it still holds the events folded: they are in the
 * totals, so not in the window. */
static void drop_journal_block(struct cs_reader *r)
{
    uint64_t off = CS_HEADER_SIZE + r->th.journal_block * CS_BLOCK_SIZE;
    for (size_t k = 0; k < r->nblk; k++)
        if (r->blk[k].off == off && r->blk[k].seq == r->th.journal_bseq &&
            r->blk[k].thread == r->th.journal_thread) {
            r->st.events -= r->blk[k].used;
            r->st.event_blocks--;
            r->blk[k] = r->blk[--r->nblk];
            return;
        }
}

/* Fold one event outside the window into the rows. */
static int fold_outside(struct cs_reader *r, const struct cs_event *ev)
{
    uint64_t comm, bytes;
    unsigned bucket;
    cs_total_key(ev, &comm, &bucket, &bytes);
    size_t k = 0;
    /* Rows are few (one per op, communicator and size bucket); the last found comes first. */
    static __thread size_t hint;
    if (hint < r->ntrow && r->trow[hint].op == ev->op && r->trow[hint].comm == comm &&
        r->trow[hint].bucket == bucket)
        k = hint;
    else
        for (k = 0; k < r->ntrow; k++)
            if (r->trow[k].op == ev->op && r->trow[k].comm == comm && r->trow[k].bucket == bucket)
                break;
    if (k == r->ntrow) {
        if (r->ntrow == r->captrow) {
            size_t cap = r->captrow ? 2 * r->captrow : 64;
            struct cs_total_row *n = realloc(r->trow, cap * sizeof *n);
            if (!n)
                return -1;
            r->trow = n;
            r->captrow = cap;
        }
        r->trow[k] = (struct cs_total_row){.op = ev->op, .bucket = (uint8_t)bucket, .comm = comm};
        r->ntrow++;
    }
    hint = k;
    cs_total_add(&r->trow[k], ev);
    r->tot.outside++;
    if (!r->tot.t_first || ev->t_begin < r->tot.t_first)
        r->tot.t_first = ev->t_begin;
    return 0;
}

/* Move every thread's start to its first event at or after tw (local clock), folding the events
 * passed into the rows. */
static int cut_at(struct cs_reader *r, uint64_t tw)
{
    for (size_t t = 0; t < r->ncur; t++) {
        struct cursor *c = &r->cur[t];
        size_t j0 = c->bi0;
        uint32_t k0 = c->skip0;
        c->bi0 = c->bend;
        c->skip0 = 0;
        for (size_t j = j0; j < c->bend && c->bi0 == c->bend; j++) {
            const struct cs_event *e =
                (const void *)(r->map + r->blk[j].off + sizeof(struct cs_block_header));
            for (uint32_t k = j == j0 ? k0 : 0; k < r->blk[j].used; k++) {
                if (e[k].t_begin >= tw) {
                    c->bi0 = j;
                    c->skip0 = k;
                    break;
                }
                if (fold_outside(r, &e[k]))
                    return -1;
            }
        }
    }
    r->tot.t_window = tw;
    r->tot.nrows = r->ntrow;
    r->tot.rows = r->trow;
    return 0;
}

int cs_reader_cut(struct cs_reader *r, uint64_t t)
{
    if (!r->tot.ring || t <= r->tot.t_window)
        return 0;
    int rc = cut_at(r, t);
    cs_reader_rewind(r);
    return rc ? CS_ENOMEM : 0;
}

/*
 * The kept window of a ring-mode trace.  A thread whose blocks do not run from seq 0 without a
 * gap lost its oldest ones (their events are in the totals); the window starts at the first event
 * of its last unbroken run of blocks, the latest such start of all threads.  Every thread's events
 * before it are folded into the rows and skipped by the cursors.
 */
static int window(struct cs_reader *r)
{
    uint64_t tw = 0;
    for (size_t t = 0; t < r->ncur; t++) {
        struct cursor *c = &r->cur[t];
        size_t j = c->bend - 1;
        while (j > c->bi && r->blk[j - 1].seq + 1 == r->blk[j].seq)
            j--;
        if (j == c->bi && r->blk[j].seq == 0)
            continue; /* it lost nothing */
        for (; j < c->bend; j++)
            if (r->blk[j].used) {
                const struct cs_event *e =
                    (const void *)(r->map + r->blk[j].off + sizeof(struct cs_block_header));
                if (e->t_begin > tw)
                    tw = e->t_begin;
                break;
            }
    }
    r->tot.nrows = r->ntrow;
    r->tot.rows = r->trow;
    return tw ? cut_at(r, tw) : 0;
}

static int check_blocks(struct cs_reader *r, char *err, size_t errlen)
{
    int partial = r->st.partial;
    int checked = (r->hdr.flags & CS_FLAG_CHECKED) != 0;
    int ring = (r->hdr.flags & CS_FLAG_RING) != 0;
    uint64_t region = r->size - CS_HEADER_SIZE;
    uint64_t nb = partial ? region / CS_BLOCK_SIZE : r->hdr.blocks;
    if (partial)
        r->st.trailing_bytes = region % CS_BLOCK_SIZE;
    size_t cap = 0;
    unsigned char opc[CS_OP_MAX];
    op_checks(opc);
    for (uint64_t i = 0; i < nb;) {
        uint64_t off = CS_HEADER_SIZE + i * CS_BLOCK_SIZE;
        struct cs_block_header bh;
        memcpy(&bh, r->map + off, sizeof bh);
        if (bh.magic == 0) {
            if (partial && ring && !all_zero(r->map + off, CS_BLOCK_SIZE)) {
                r->st.reused_blocks++; /* caught being zeroed for reuse (totals.h, step 3) */
                r->st.blocks++;
                i++;
                continue;
            }
            if (!all_zero(r->map + off, CS_BLOCK_SIZE))
                return fail(r, err, errlen, CS_EBLOCK,
                            "block %" PRIu64 " has no block magic but is not empty (byte %" PRIu64
                            ")",
                            i, off);
            if (!partial)
                return fail(r, err, errlen, CS_EBLOCK,
                            "block %" PRIu64
                            " is unclaimed (all zero) in a closed file (byte %" PRIu64 ")",
                            i, off);
            r->st.empty_blocks++;
            r->st.blocks++;
            i++;
            continue;
        }
        if (bh.magic != CS_BLOCK_MAGIC)
            return fail(r, err, errlen, CS_EBLOCK,
                        "block %" PRIu64 ": bad block magic 0x%08" PRIx32 " (byte %" PRIu64 ")", i,
                        bh.magic, off);
        if (bh.kind != CS_BLOCK_EVENTS && bh.kind != CS_BLOCK_COMMS &&
            !(ring && bh.kind == CS_BLOCK_TOTALS))
            return fail(r, err, errlen, CS_EBLOCK,
                        "block %" PRIu64 ": unknown kind %u (byte %" PRIu64 ")", i,
                        (unsigned)bh.kind, off + 4);
        if (bh.span < 1 || (bh.kind == CS_BLOCK_EVENTS && bh.span != 1) ||
            (bh.kind == CS_BLOCK_TOTALS && bh.span != CS_TOTALS_SPAN) || bh.span > nb - i) {
            /* A spanning block cut short by a crash is the partial file's torn tail. */
            if (partial && bh.span > nb - i && bh.kind == CS_BLOCK_COMMS) {
                r->st.trailing_bytes += (nb - i) * CS_BLOCK_SIZE;
                break;
            }
            return fail(r, err, errlen, CS_EBLOCK,
                        "block %" PRIu64 ": span %" PRIu32 " invalid (%" PRIu64
                        " blocks remain, event blocks span 1) (byte %" PRIu64 ")",
                        i, bh.span, nb - i, off + 16);
        }
        uint64_t len = (uint64_t)bh.span * CS_BLOCK_SIZE;
        if (bh.crc != 0) {
            uint32_t c =
                crc_without_field(r->map + off, len, offsetof(struct cs_block_header, crc));
            /* A crashed rank may have written a communicator record past `used` whose CRC it
             * had not stored yet: the CRC stored covers the block with those bytes zero. */
            if (c != bh.crc && partial && bh.kind == CS_BLOCK_COMMS && checked)
                c = crc_zero_past(r->map + off, len, bh.used);
            if (c != bh.crc)
                return fail(r, err, errlen, CS_ECRC,
                            "block %" PRIu64 " CRC mismatch (byte %" PRIu64 ")", i, off);
        } else if (!partial) {
            return fail(r, err, errlen, CS_EBLOCK,
                        "block %" PRIu64 " not sealed (CRC 0) in a closed file (byte %" PRIu64 ")",
                        i, off + 12);
        } else {
            r->st.unsealed_blocks++;
            if (checked && bh.kind == CS_BLOCK_EVENTS) {
                int rc = check_live_block(r, i, off, &bh, err, errlen);
                if (rc)
                    return rc;
            } else if (checked && bh.used) {
                /* Communicator blocks are sealed with every record (trace.c): only one just
                 * claimed, still empty, has no CRC. */
                return fail(r, err, errlen, CS_EBLOCK,
                            "block %" PRIu64 ": communicator block of %" PRIu32
                            " bytes not sealed (byte %" PRIu64 ")",
                            i, bh.used, off + 12);
            }
        }
        /* The running check is only kept in event blocks of files that say so. */
        int live_ok = checked && bh.kind == CS_BLOCK_EVENTS;
        if (!all_zero(bh.reserved, sizeof bh.reserved) ||
            (!live_ok && (bh.live_sum || bh.live_used)))
            return fail(r, err, errlen, CS_EBLOCK,
                        "block %" PRIu64 ": reserved bytes not zero (byte %" PRIu64 ")", i,
                        off + 32);
        uint64_t cap_units = bh.kind == CS_BLOCK_EVENTS   ? CS_EVENTS_PER_BLOCK
                             : bh.kind == CS_BLOCK_TOTALS ? 0
                                                          : len - sizeof(struct cs_block_header);
        if (bh.used > cap_units)
            return fail(r, err, errlen, CS_EBLOCK,
                        "block %" PRIu64 ": used %" PRIu32 " exceeds its capacity %" PRIu64
                        " (byte %" PRIu64 ")",
                        i, bh.used, cap_units, off + 8);
        int rc;
        if (bh.kind == CS_BLOCK_EVENTS) {
            uint8_t sample = 0;
            rc = check_events(r, i, off, bh.used, opc, &sample, err, errlen);
            if (rc)
                return rc;
            struct blk b = {
                .off = off, .seq = bh.seq, .used = bh.used, .thread = bh.thread, .sample = sample};
            if (add_blk(r, &cap, &b))
                return fail(r, err, errlen, CS_ENOMEM, "out of memory indexing blocks");
            r->st.events += bh.used;
            r->st.event_blocks++;
        } else if (bh.kind == CS_BLOCK_TOTALS) {
            rc = check_totals(r, i, off, err, errlen);
            if (rc)
                return rc;
        } else {
            rc = check_comms(r, i, off, bh.used, err, errlen);
            if (rc)
                return rc;
            r->st.comm_blocks++;
        }
        r->st.blocks += bh.span;
        i += bh.span;
    }
    if (ring && !r->totals_off)
        return fail(r, err, errlen, CS_EBLOCK, "ring-mode trace without its totals block");
    if (r->th.journal_seq)
        drop_journal_block(r);
    if (!partial && r->st.events != r->hdr.events)
        return fail(r, err, errlen, CS_EHEADER,
                    "header says %" PRIu64 " events, the blocks hold %" PRIu64, r->hdr.events,
                    r->st.events);
    if (r->nblk)
        qsort(r->blk, r->nblk, sizeof *r->blk, blk_cmp);
    for (size_t i = 1; i < r->nblk; i++)
        if (r->blk[i].thread == r->blk[i - 1].thread && r->blk[i].seq == r->blk[i - 1].seq)
            return fail(
                r, err, errlen, CS_EBLOCK,
                "blocks at bytes %" PRIu64 " and %" PRIu64 " both claim thread %u block %" PRIu64,
                r->blk[i - 1].off, r->blk[i].off, (unsigned)r->blk[i].thread, r->blk[i].seq);
    int rc = split_samples(r, err, errlen);
    if (rc)
        return rc;
    /* One cursor per thread. */
    size_t nthr = 0;
    for (size_t i = 0; i < r->nblk; i++)
        if (i == 0 || r->blk[i].thread != r->blk[i - 1].thread)
            nthr++;
    r->cur = calloc(nthr ? nthr : 1, sizeof *r->cur);
    if (!r->cur)
        return fail(r, err, errlen, CS_ENOMEM, "out of memory");
    r->ncur = nthr;
    r->st.threads = (unsigned)nthr;
    r->st.comms = r->ncomm;
    size_t t = 0;
    for (size_t i = 0; i < r->nblk; i++) {
        if (i == 0 || r->blk[i].thread != r->blk[i - 1].thread) {
            r->cur[t].bi = r->cur[t].bi0 = i;
            r->cur[t].thread = r->blk[i].thread;
            t++;
        }
        r->cur[t - 1].bend = i + 1;
    }
    if (ring && window(r))
        return fail(r, err, errlen, CS_ENOMEM, "out of memory");
    cs_reader_rewind(r);
    return check_tails(r, opc) ? fail(r, err, errlen, CS_ENOMEM, "out of memory") : 0;
}

/* ---- loading ---- */

/*
 * 1 when the process that wrote the header may still be writing its file: a partial file whose
 * writer runs on this host (same host name, the pid alive), or on another host (no way to
 * tell).  0 when it is known to be gone: the file no longer changes.
 */
/* 1 the writer runs on this host and its process is alive, 0 it is gone, -1 another host or
 * unknown. */
static int writer_alive(const struct cs_file_header *h)
{
    char host[CS_HOST_MAX + 1] = "";
    if (h->pid <= 0 || gethostname(host, sizeof host - 1) != 0 ||
        strncmp(host, h->host, sizeof h->host) != 0)
        return -1;
    return kill(h->pid, 0) == 0 || errno != ESRCH;
}

static int writer_may_write(const struct cs_file_header *h)
{
    return writer_alive(h) != 0;
}

/*
 * Read the file at fd (size bytes by fstat) into a private buffer: a file still being written or
 * trimmed can shrink under a mapping, and touching a page past its new end is SIGBUS.  A copy
 * only gets shorter (the reader then sees a partial file cut short).
 */
static int copy_in(struct cs_reader *r, int fd, size_t size, char *err, size_t errlen)
{
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf)
        return fail(r, err, errlen, CS_ENOMEM, "out of memory reading %zu bytes", size);
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(fd, buf + got, size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(buf);
            return fail(r, err, errlen, CS_EIO, "read error at byte %zu: %s", got, strerror(e));
        }
        if (n == 0)
            break; /* trimmed while read */
        got += (size_t)n;
    }
    r->map = buf;
    r->size = got;
    r->copied = 1;
    return 0;
}

/*
 * Open path without blocking (a FIFO or device would hang open or read), refuse what is not a
 * regular file, and bring its bytes in: mapped when the file can no longer change (closed, or
 * its writer gone), else copied.
 */
static int load(struct cs_reader *r, const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return fail(r, err, errlen, errno == ENOENT ? CS_ENOENT : CS_EIO, "cannot open: %s",
                    strerror(errno));
    struct stat sb;
    int rc = 0;
    if (fstat(fd, &sb) != 0) {
        rc = fail(r, err, errlen, CS_EIO, "cannot stat: %s", strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        rc = fail(r, err, errlen, CS_EIO, "not a regular file but %s; not read",
                  S_ISFIFO(sb.st_mode)   ? "a FIFO"
                  : S_ISDIR(sb.st_mode)  ? "a directory"
                  : S_ISSOCK(sb.st_mode) ? "a socket"
                  : S_ISCHR(sb.st_mode)  ? "a character device"
                  : S_ISBLK(sb.st_mode)  ? "a block device"
                                         : "not a file");
    } else if (sb.st_size > 0) {
        size_t size = (size_t)sb.st_size;
        struct cs_file_header h;
        int live = pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
                   memcmp(h.magic, CS_TRACE_MAGIC, sizeof h.magic) == 0 &&
                   (h.flags & CS_FLAG_PARTIAL) && writer_may_write(&h);
        if (live) {
            rc = copy_in(r, fd, size, err, errlen);
        } else {
            /* Populated: every page is read (the CRCs below), and one call maps them for less
             * than a fault per few pages. */
            void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
            if (m == MAP_FAILED && errno == ENOMEM)
                /* One mapping per rank: tens of thousands of ranks reach the kernel's limit on
                 * a process's mappings before its memory runs out. */
                rc = fail(r, err, errlen, CS_EIO,
                          "cannot map %zu bytes: %s (each trace is one memory mapping: the "
                          "process may be at the kernel's limit, /proc/sys/vm/max_map_count; "
                          "raise it with sysctl -w vm.max_map_count=N above twice the ranks)",
                          size, strerror(errno));
            else if (m == MAP_FAILED)
                rc =
                    fail(r, err, errlen, CS_EIO, "cannot map %zu bytes: %s", size, strerror(errno));
            else
                r->map = m, r->size = size;
        }
    }
    close(fd);
    return rc;
}

/* Forget everything load and the checks built, for another attempt. */
static void unload(struct cs_reader *r)
{
    if (r->copied)
        free((void *)r->map);
    else if (r->map)
        munmap((void *)r->map, r->size);
    free(r->blk);
    free(r->sblk);
    free(r->comm);
    free(r->cur);
    free(r->tail);
    free(r->trow);
    r->trow = NULL;
    r->ntrow = r->captrow = 0;
    r->totals_off = 0;
    memset(&r->th, 0, sizeof r->th);
    memset(&r->tot, 0, sizeof r->tot);
    r->tail = NULL;
    r->map = NULL;
    r->size = 0;
    r->copied = 0;
    r->blk = NULL;
    r->nblk = 0;
    r->sblk = NULL;
    r->nsblk = 0;
    r->comm = NULL;
    r->ncomm = r->capcomm = 0;
    r->cur = NULL;
    r->ncur = 0;
    r->last = NULL;
    memset(&r->st, 0, sizeof r->st);
    memset(&r->hdr, 0, sizeof r->hdr);
}

/* ---- public ---- */

int cs_reader_open(const char *path, struct cs_reader **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!path) {
        snprintf(err, errlen, "no trace file name given");
        return CS_EUSAGE;
    }
    struct cs_reader *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "%s: out of memory", path);
        return CS_ENOMEM;
    }
    const char *slash = strrchr(path, '/');
    snprintf(r->name, sizeof r->name, "%s", slash ? slash + 1 : path);
    /*
     * A file still being written is copied, and a copy can catch the writer between two stores
     * of one change (a counter and its complement, a header field and its CRC): a failed check of
     * such a copy is taken again, a few times, before it counts as damage.
     */
    int rc;
    for (int attempt = 0;; attempt++) {
        rc = load(r, path, err, errlen);
        if (rc)
            goto out;
        rc = check_header(r, err, errlen);
        if (!rc) {
            r->st.partial = (r->hdr.flags & CS_FLAG_PARTIAL) != 0;
            rc = check_blocks(r, err, errlen);
        }
        /* A copy of a live file whose writer is gone now: the writer may have finished the
         * file after the copy (trimmed, closed, sealed), so it is read again as it now is. */
        if (!rc && r->copied && r->st.partial && attempt < 4 && writer_alive(&r->hdr) == 0) {
            unload(r);
            continue;
        }
        if (!rc || !r->copied || attempt == 4 || rc == CS_ENOMEM)
            break;
        unload(r);
        struct timespec pause = {0, 2000000};
        nanosleep(&pause, NULL);
    }
out:
    if (rc) {
        cs_reader_close(r);
        return rc;
    }
    r->st.live = r->st.partial && writer_alive(&r->hdr) == 1;
    *out = r;
    return 0;
}

void cs_reader_close(struct cs_reader *r)
{
    if (!r)
        return;
    unload(r);
    free(r);
}

const struct cs_file_header *cs_reader_header(const struct cs_reader *r)
{
    return &r->hdr;
}

const struct cs_reader_stats *cs_reader_stats(const struct cs_reader *r)
{
    return &r->st;
}

const struct cs_comm_record *cs_reader_comm(const struct cs_reader *r, size_t i)
{
    return i < r->ncomm ? r->comm[i] : NULL;
}

/* Point cursor c at the first committed event of block bi or a later block of its thread. */
static void cursor_seek(const struct cs_reader *r, struct cursor *c, size_t bi)
{
    for (; bi < c->bend; bi++) {
        const struct blk *b = &r->blk[bi];
        if (b->used) {
            c->bi = bi;
            c->ev = (const void *)(r->map + b->off + sizeof(struct cs_block_header));
            c->end = c->ev + b->used;
            return;
        }
    }
    c->bi = c->bend;
    c->ev = c->end = NULL;
}

void cs_reader_rewind(struct cs_reader *r)
{
    for (size_t t = 0; t < r->ncur; t++) {
        struct cursor *c = &r->cur[t];
        cursor_seek(r, c, c->bi0);
        if (c->ev && c->skip0) {
            c->ev += c->skip0;
            if (c->ev >= c->end)
                cursor_seek(r, c, c->bi + 1);
        }
    }
}

const struct cs_reader_totals *cs_reader_totals(const struct cs_reader *r)
{
    return &r->tot;
}

const struct cs_event *cs_reader_next(struct cs_reader *r)
{
    struct cursor *best = NULL;
    /* Threads are few (usually one: then no scan), so a linear scan beats a heap here. */
    if (r->ncur == 1) {
        best = r->cur->ev ? r->cur : NULL;
    } else {
        for (size_t t = 0; t < r->ncur; t++) {
            struct cursor *c = &r->cur[t];
            if (c->ev && (!best || c->ev->t_begin < best->ev->t_begin))
                best = c;
        }
    }
    if (!best)
        return NULL;
    const struct cs_event *e = best->ev++;
    r->last = best;
    /* The analyzer takes one event from each of many files in turn: too many streams for the
     * hardware prefetcher, so ask for the line a few events ahead. */
    __builtin_prefetch(e + 8);
    if (best->ev == best->end)
        cursor_seek(r, best, best->bi + 1);
    return e;
}

size_t cs_reader_next_batch(struct cs_reader *r, const struct cs_event **out)
{
    if (r->ncur != 1) {
        *out = cs_reader_next(r);
        return *out != NULL;
    }
    struct cursor *c = r->cur;
    *out = c->ev;
    if (!c->ev)
        return 0;
    size_t n = (size_t)(c->end - c->ev);
    r->last = c;
    cursor_seek(r, c, c->bi + 1);
    return n;
}

unsigned cs_reader_thread(const struct cs_reader *r)
{
    return r->last ? r->last->thread : 0;
}
