/*
 * commscope trace format, version 1: the one contract between the collector and the analyzer.
 * Documented in docs/trace-format.md; keep the two in step.
 *
 * One file per rank, "rank-NNNNN.cst" (rank zero-padded to 5 digits), little-endian, laid out as
 *
 *   [0, CS_HEADER_SIZE)                       struct cs_file_header, zero padded
 *   [CS_HEADER_SIZE + i * CS_BLOCK_SIZE, ...) block i, i = 0 .. blocks-1
 *
 * Every block starts with a struct cs_block_header.  Event blocks hold fixed-size struct cs_event
 * records; comm blocks hold variable-length struct cs_comm_record entries (the communicator
 * table).  Blocks are claimed by the collector's threads as they fill, so one thread's events are
 * spread over several blocks and blocks of different threads interleave; within one block events
 * are in the order the thread recorded them.
 *
 * The collector writes through a shared file mapping: if a rank dies, every committed record is in
 * the page cache.  Such a file keeps CS_FLAG_PARTIAL, has header_crc == 0 and blocks == 0, and
 * its last blocks may be unclaimed (all zero) or partly filled; readers then trust block headers
 * (magic, used) and skip all-zero blocks.  A file closed at MPI_Finalize has CS_FLAG_PARTIAL
 * cleared, blocks set, and a CRC-32 over the header and over each block.
 */
#ifndef COMMSCOPE_TRACE_H
#define COMMSCOPE_TRACE_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CS_TRACE_MAGIC "CSTRACE" /* 8 bytes with the NUL */
#define CS_TRACE_VERSION 1u
#define CS_HEADER_SIZE 4096u
#define CS_BLOCK_SIZE 16384u
#define CS_EVENT_SIZE 64u
/* Times (ns) and clock offsets must be below this (146 years): sums and differences of two never
 * overflow 64-bit signed arithmetic.  A clock that reads more is an error in the trace. */
#define CS_TIME_LIMIT (1ull << 62)
#define CS_BLOCK_MAGIC 0x4b4c4243u /* "CBLK" */
#define CS_HOST_MAX 64
#define CS_PROGRAM_MAX 256

/* File header flags. */
enum {
    CS_FLAG_PARTIAL = 1u << 0,     /* not closed by MPI_Finalize: the rank died or is running */
    CS_FLAG_DROPPED = 1u << 1,     /* events were dropped at the buffer cap (count in dropped) */
    CS_FLAG_DISABLED = 1u << 2,    /* the collector turned itself off (reason in note) */
    CS_FLAG_CLOCK_SKEW = 1u << 3,  /* test-only artificial clock offset/drift was applied */
    CS_FLAG_THREADS = 1u << 4,     /* MPI_THREAD_MULTIPLE was granted */
    CS_FLAG_NCCL_STATIC = 1u << 5, /* the program uses NCCL that could not be interposed
                                      (statically linked): its communication is not recorded */
    CS_FLAG_NO_MPI = 1u << 6,      /* opened without MPI (rank from the environment, see
                                      rank_source); clocks aligned through the run directory */
    CS_FLAG_CLOCK_ROOT = 1u << 7,  /* with NO_MPI: the clock samples were measured by TCP
                                      ping-pong against the root service's CLOCK_REALTIME
                                      (else against the rank's own host's CLOCK_REALTIME) */
    CS_FLAG_STORAGE = 1u << 8,     /* the file could not grow past a storage fault (full disk,
                                      file-size limit, I/O error; reason in note): with RING,
                                      recording went on over the blocks it had; else the events
                                      after it are counted in dropped */
    CS_FLAG_NO_CALLS = 1u << 10,   /* the process made no MPI or NCCL call: the trace holds its
                                      identity, wall time and what it saw (note), no events */
    CS_FLAG_CHECKED = 1u << 9,     /* the partial-file checks are kept: live_crc and the counter
                                      complements of the header, and live_sum/live_used of
                                      unsealed event blocks (readers check them when set) */
    CS_FLAG_RING = 1u << 11,       /* ring mode (COMMSCOPE_TRACE_MODE=ring): the file holds one
                                      totals block (CS_BLOCK_TOTALS); at the cap the oldest event
                                      blocks are reused, their events first folded into it
                                      (include/commscope/totals.h) */
};

/* How a rank's GPU work was timed (cs_file_header.gpu_timing). */
enum cs_gpu_timing {
    CS_GPU_NONE = 0,   /* no GPU work seen (or CUDA not used) */
    CS_GPU_CUPTI = 1,  /* CUPTI Activity API: every kernel, memcpy and memset */
    CS_GPU_EVENTS = 2, /* CUDA events around each NCCL call only (CUPTI unavailable / taken) */
};

/* Where a rank's identity came from (cs_file_header.rank_source). */
enum cs_rank_source {
    CS_RANKSRC_MPI = 0,    /* MPI_Comm_rank / MPI_Comm_size at MPI_Init */
    CS_RANKSRC_TORCH = 1,  /* RANK / WORLD_SIZE (torchrun and friends) */
    CS_RANKSRC_SLURM = 2,  /* SLURM_PROCID / SLURM_NTASKS */
    CS_RANKSRC_OMPI = 3,   /* OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE */
    CS_RANKSRC_PMI = 4,    /* PMI_RANK / PMI_SIZE (MPICH, Intel MPI) or PMIX_RANK */
    CS_RANKSRC_SINGLE = 5, /* none of these: a single process, rank 0 of 1 */
};

/*
 * One clock-offset measurement against rank 0, by ping-pong (minimum round trip kept).
 * offset_ns is rank 0's clock minus this rank's clock at local_ns; rank 0 records offset 0.
 */
struct cs_clock_sample {
    uint64_t local_ns; /* this rank's clock at the middle of the best round trip */
    int64_t offset_ns; /* rank0_clock - local_clock */
    uint64_t rtt_ns;   /* best round trip; uncertainty of offset_ns is rtt_ns / 2 */
    uint32_t rounds;   /* round trips measured */
    uint32_t valid;    /* 1 when measured */
};

struct cs_file_header {
    char magic[8];        /* CS_TRACE_MAGIC */
    uint32_t version;     /* CS_TRACE_VERSION */
    uint32_t header_size; /* CS_HEADER_SIZE */
    uint32_t block_size;  /* CS_BLOCK_SIZE */
    uint32_t event_size;  /* CS_EVENT_SIZE */
    uint32_t flags;       /* CS_FLAG_* */
    uint32_t header_crc;  /* CRC-32 of the CS_HEADER_SIZE bytes with this field zero; 0 = partial */
    int32_t rank;         /* world rank */
    int32_t world_size;   /* world size */
    int32_t pid;          /* process id */
    uint32_t thread_level; /* MPI thread level provided */
    uint64_t run_id;       /* same in every rank of one run (chosen by rank 0) */
    uint64_t nonce;        /* random per file; tells copies of one file apart from other files */
    uint64_t t_init;       /* local clock (ns) when MPI_Init returned */
    uint64_t t_finalize;   /* local clock (ns) when MPI_Finalize was entered; 0 if never */
    uint64_t blocks;       /* blocks in the file (closed files); 0 in partial files */
    uint64_t events;       /* event records written (closed files) */
    uint64_t dropped;      /* event records dropped at the cap */
    uint64_t unrecorded_tests;       /* MPI_Test* calls that completed nothing (not recorded) */
    uint64_t unrecorded_test_ns;     /* time spent in them */
    struct cs_clock_sample clock[2]; /* [0] at MPI_Init, [1] at MPI_Finalize */
    char host[CS_HOST_MAX];          /* node name (NUL-terminated) */
    char program[CS_PROGRAM_MAX];    /* executable path (NUL-terminated) */
    char note[256];                  /* why the collector disabled itself, if it did */
    /* Added for NCCL/GPU jobs (zero in MPI-only traces; older version-1 files have zeros). */
    uint32_t nccl_version; /* NCCL_VERSION_CODE of the program's NCCL; 0 none seen */
    uint32_t gpu_timing;   /* enum cs_gpu_timing */
    uint32_t rank_source;  /* enum cs_rank_source */
    int32_t local_rank;    /* rank on this node (LOCAL_RANK, ...); -1 unknown */
    uint64_t gpu_dropped;  /* GPU activity records lost (CUPTI dropped, or unmapped) */
    char gpu_note[256];    /* what about NCCL/GPU timing is missing, and why */
    /*
     * Added with CS_FLAG_CHECKED (zero in files without it): what makes a partial file, whose
     * header_crc is 0, checkable byte for byte.  The counters dropped, unrecorded_tests,
     * unrecorded_test_ns and gpu_dropped change on busy paths; each has its bitwise complement
     * beside it.  live_crc covers the rest of the header.
     */
    uint32_t live_crc; /* CRC-32 of the header with header_crc, live_crc and the four counters
                          and their complements taken as zero; kept current by the collector */
    uint32_t live_pad; /* 0 */
    uint64_t counter_check[4]; /* complements, indexed by enum cs_counter */
    /* The host's boot (Linux /proc/sys/kernel/random/boot_id, 16 bytes; zero unknown): ranks
     * with the same one read one CLOCK_MONOTONIC, so their clocks need no alignment. */
    uint8_t boot_id[16];
    /*
     * How the process ended when it did not reach MPI_Finalize (enum cs_exit_kind), written once
     * by the collector's exit and signal handlers.  They take no lock, so these fields are outside
     * live_crc and carry their own check: exit_check == cs_exit_check(exit_kind, exit_code,
     * t_exit), stored last.  A mismatch (the handler stopped half way) reads as CS_EXIT_NONE.
     */
    uint32_t exit_kind; /* 0 none: running, closed by MPI_Finalize, or gone without warning */
    int32_t exit_code;  /* CS_EXIT_EXIT: the exit status; CS_EXIT_SIGNAL: the signal number */
    uint64_t t_exit;    /* local clock (ns) when the handler ran; below 2^62 */
    uint64_t exit_check;
};

enum cs_exit_kind {
    CS_EXIT_NONE = 0, /* no handler ran (SIGKILL, the OOM killer, a lost node, or still running) */
    CS_EXIT_EXIT = 1, /* exit() or a return from main without MPI_Finalize */
    CS_EXIT_SIGNAL = 2, /* a fatal signal was delivered (SIGTERM from a launcher, SIGSEGV, ...) */
};

static inline uint64_t cs_exit_check(uint32_t kind, int32_t code, uint64_t t)
{
    return ~((uint64_t)kind | (uint64_t)(uint32_t)code << 32) ^ (t * 0x9E3779B97F4A7C15ull);
}

/*
 * The header as live_crc covers it: page (CS_HEADER_SIZE bytes, a copy) with header_crc, live_crc,
 * the four counters, their complements and the exit fields set to zero.
 */
static inline void cs_header_live_view(struct cs_file_header *h)
{
    h->header_crc = 0;
    h->live_crc = 0;
    h->dropped = h->unrecorded_tests = h->unrecorded_test_ns = h->gpu_dropped = 0;
    for (int i = 0; i < 4; i++)
        h->counter_check[i] = 0;
    h->exit_kind = 0;
    h->exit_code = 0;
    h->t_exit = 0;
    h->exit_check = 0;
}

/* The header counters that carry a complement (cs_file_header.counter_check). */
enum cs_counter {
    CS_COUNTER_DROPPED = 0,    /* ~dropped */
    CS_COUNTER_TESTS = 1,      /* ~unrecorded_tests */
    CS_COUNTER_TEST_NS = 2,    /* ~unrecorded_test_ns */
    CS_COUNTER_GPU_DROPPED = 3 /* ~gpu_dropped */
};

enum cs_block_kind {
    CS_BLOCK_EVENTS = 1, /* payload: used x struct cs_event */
    CS_BLOCK_COMMS = 2,  /* payload: used bytes of struct cs_comm_record entries */
    CS_BLOCK_TOTALS = 3, /* ring mode: the whole-run totals of the events no longer in the file
                            (include/commscope/totals.h); span CS_TOTALS_SPAN, used 0 */
};

struct cs_block_header {
    uint32_t magic;  /* CS_BLOCK_MAGIC; 0 in an unclaimed block */
    uint16_t kind;   /* enum cs_block_kind */
    uint16_t thread; /* index of the recording thread in this rank (0 = first) */
    uint32_t used;   /* events (CS_BLOCK_EVENTS) or bytes (CS_BLOCK_COMMS) committed */
    uint32_t crc;    /* CRC-32 of the whole block with this field zero; 0 = not sealed */
    uint32_t span;   /* blocks this block occupies (1, more for a large comm record) */
    uint32_t ostid;  /* operating-system thread id */
    uint64_t seq;    /* block sequence number of this thread (0, 1, ...) */
    /*
     * Event blocks of a CS_FLAG_CHECKED file, while unsealed: live_sum is cs_live_sum() of the
     * first live_used events, stored (with live_used, in one 8-byte store) before `used`, so a
     * reader finds live_used == used, or used + 1 when the writer stopped between the two
     * stores.  Zero in comm blocks and in files without the flag.
     */
    uint32_t live_sum;
    uint32_t live_used;
    uint8_t reserved[24];
};

/* Event flags. */
enum {
    CS_EV_ERROR = 1u << 0,        /* the MPI call returned an error (code in aux) */
    CS_EV_ANY_SOURCE = 1u << 1,   /* receive posted with MPI_ANY_SOURCE */
    CS_EV_IN_PLACE = 1u << 2,     /* MPI_IN_PLACE was used */
    CS_EV_ROOT = 1u << 3,         /* this rank is the root of a rooted collective */
    CS_EV_NONBLOCKING = 1u << 4,  /* initiation of a non-blocking operation (request set) */
    CS_EV_PROC_NULL = 1u << 5,    /* peer was MPI_PROC_NULL */
    CS_EV_CANCELLED = 1u << 6,    /* COMPLETE: the request was cancelled */
    CS_EV_GROUPED = 1u << 7,      /* NCCL call between ncclGroupStart and ncclGroupEnd */
    CS_EV_GPU_EVENTS = 1u << 8,   /* GPU record timed by CUDA events, not CUPTI */
    CS_EV_GRAPH = 1u << 9,        /* NCCL call captured into a CUDA graph: not timed on the GPU */
    CS_EV_IN_PROGRESS = 1u << 10, /* NCCL returned ncclInProgress (non-blocking communicator) */
};

/*
 * One fixed-size event record (CS_EVENT_SIZE bytes).  Times are this rank's CLOCK_MONOTONIC in
 * nanoseconds; the analyzer maps them onto rank 0's clock with the header's clock samples.
 *
 *   op          cs_op id (include/commscope/ops.def)
 *   comm        global communicator id (cs_comm_record.id); 0 when none
 *   bytes       bytes this rank sends / contributes (count x type size; v-variants: sum of this
 *               rank's send counts)
 *   bytes_recv  bytes this rank receives (v-variants: sum of its receive counts)
 *   request     non-blocking initiation: the request id given to it (per rank, from 1);
 *               CS_OP_COMPLETE: the request id completed
 *   seq         collectives: per-communicator sequence number (from 0); all members agree
 *   peer        root (rooted collectives) or peer (point-to-point) as a world rank; -1 none;
 *               CS_OP_COMPLETE of a receive: the actual source
 *   aux         point-to-point: tag; wait/test: number of requests passed; error: MPI error code;
 *               MPI_Pcontrol: its level argument; comm ops: size of the new communicator
 *
 * NCCL calls (CS_KIND_NCOLL, CS_KIND_NP2P, CS_KIND_GROUP) use the same fields, except
 *   request     the launch id (per rank, from 1): the call's own, or for calls between
 *               ncclGroupStart and ncclGroupEnd (CS_EV_GROUPED) the group's, which the
 *               ncclGroupEnd event also carries; GPU records of the launch carry it too
 *   aux         ncclDataType_t of the call; error: the ncclResult_t
 *
 * GPU records (CS_KIND_GPU) describe work on a GPU:
 *   t_begin/end GPU start and end, mapped onto this rank's host clock
 *   comm, seq   CS_OP_GPU_NCCL: communicator id and sequence number of the launching call
 *               (the first call of a group); other records: comm 0, seq = CUDA stream id
 *   bytes       memcpy/memset: bytes; kernels 0
 *   bytes_recv  CS_OP_GPU_NCCL: number of NCCL calls in the launch; else 0
 *   request     CS_OP_GPU_NCCL: launch id of the NCCL call or group; else 0
 *   peer        -1
 *   aux         CUDA device ordinal
 *
 * NVTX records (CS_OP_NVTX_*, instants: t_begin == t_end):
 *   comm..request  bytes 16-47 hold the range's or mark's name: its first CS_NVTX_NAME_MAX - 1
 *               bytes, NUL-terminated and NUL-padded (cs_event_nvtx_name)
 *   seq         FNV-1a 32-bit hash of the whole name (0 for no name)
 *   peer        -1
 *   aux         push/pop ranges: nesting depth on the thread (1 = outermost); start/end
 *               ranges and marks: 0
 *   flags       0
 */
struct cs_event {
    uint64_t t_begin;
    uint64_t t_end;
    uint64_t comm;
    uint64_t bytes;
    uint64_t bytes_recv;
    uint64_t request;
    uint32_t seq;
    int32_t peer;
    uint16_t op;
    uint16_t flags;
    int32_t aux;
};

/* NVTX records: bytes of the name stored in the event (NUL included). */
#define CS_NVTX_NAME_MAX 32

/* The name of an NVTX record (CS_OP_NVTX_*), NUL-terminated, into out. */
static inline void cs_event_nvtx_name(const struct cs_event *ev, char out[CS_NVTX_NAME_MAX + 1])
{
    const unsigned char *p = (const unsigned char *)ev + 16; /* comm .. request */
    for (int i = 0; i < CS_NVTX_NAME_MAX; i++)
        out[i] = (char)p[i];
    out[CS_NVTX_NAME_MAX] = '\0';
}

enum cs_comm_kind {
    CS_COMM_MPI = 1,
    CS_COMM_NCCL = 2,
};

/* Well-known communicator ids.  MPI_COMM_SELF of rank r is CS_COMM_SELF_BASE + r. */
#define CS_COMM_WORLD_ID 1ull
#define CS_COMM_SELF_BASE (1ull << 62)

/* How reports name a communicator: "world", "self", or "comm-" and its id in 16 hex digits. */
static inline const char *cs_comm_label(uint64_t id, char *buf, size_t n)
{
    if (id == CS_COMM_WORLD_ID)
        snprintf(buf, n, "world");
    else if (id >= CS_COMM_SELF_BASE && id < CS_COMM_SELF_BASE + (1ull << 32))
        snprintf(buf, n, "self");
    else
        snprintf(buf, n, "comm-%016" PRIx64, id);
    return buf;
}

/*
 * One communicator-table entry, in CS_BLOCK_COMMS blocks.  Every member writes the entry for each
 * communicator it belongs to; all members agree on id and members.  Derived communicators get
 * id = ((world rank of the new communicator's rank 0) + 1) << 32 | that rank's creation counter.
 * record_bytes is 8-byte aligned and includes the members array.
 */
struct cs_comm_record {
    uint32_t record_bytes;
    uint16_t kind; /* enum cs_comm_kind */
    uint16_t op;   /* cs_op id that created it (0 for world/self) */
    uint64_t id;
    uint64_t parent; /* id of the communicator it was derived from (0 none) */
    uint64_t t_created;
    int32_t size;      /* number of members */
    int32_t my_rank;   /* this rank's rank in the communicator */
    int32_t color;     /* split color / type (else 0) */
    int32_t key;       /* split key (else 0) */
    int32_t members[]; /* world rank of comm rank i, i = 0 .. size-1 */
};

/*
 * NCCL communicator records (kind CS_COMM_NCCL) know only their own member: members[my_rank] is
 * this rank and the others are -1 (the analyzer joins the records of all members).  After the
 * members (at offset 48 + 4 * size rounded up to 8) they carry this struct when record_bytes
 * leaves room for it.
 */
struct cs_comm_gpu {
    int32_t cuda_dev; /* CUDA device ordinal of this member; -1 unknown */
    uint32_t flags;   /* CS_COMM_GPU_* bits; other bits 0 */
    char bus_id[24];  /* PCI bus id "0000:3b:00.0" (NUL-terminated); "" unknown */
};

/*
 * The running check of an unsealed event block: sum = cs_live_step(sum, event) for each
 * committed event in order, from 0.  Any change of one byte of an event changes it (a rotation
 * and an exclusive-or are both invertible); it is no CRC, but costs a few instructions on the
 * collector's fast path.
 */
static inline uint32_t cs_live_step(uint32_t sum, const struct cs_event *e)
{
    const uint64_t *w = (const uint64_t *)(const void *)e;
    uint64_t x = w[0] ^ w[1] ^ w[2] ^ w[3] ^ w[4] ^ w[5] ^ w[6] ^ w[7];
    return ((sum << 5) | (sum >> 27)) ^ (uint32_t)(x ^ (x >> 32)) ^ 0x9e3779b9u;
}

#ifdef __cplusplus
#define CS_STATIC_ASSERT static_assert
#else
#define CS_STATIC_ASSERT _Static_assert
#endif
CS_STATIC_ASSERT(sizeof(struct cs_event) == CS_EVENT_SIZE, "event record must be 64 bytes");
CS_STATIC_ASSERT(sizeof(struct cs_block_header) == 64, "block header must be 64 bytes");
CS_STATIC_ASSERT(sizeof(struct cs_file_header) <= CS_HEADER_SIZE, "header must fit its page");
CS_STATIC_ASSERT(sizeof(struct cs_comm_record) == 48, "comm record header is 48 bytes");
/* cs_comm_gpu.flags: this process holds several members of the communicator (ncclCommInitAll:
 * one record per member, each naming this rank as members[my_rank]). */
#define CS_COMM_GPU_MULTI 1u

CS_STATIC_ASSERT(sizeof(struct cs_comm_gpu) == 32, "comm GPU extension is 32 bytes");

#define CS_EVENTS_PER_BLOCK ((CS_BLOCK_SIZE - sizeof(struct cs_block_header)) / CS_EVENT_SIZE)

#endif
