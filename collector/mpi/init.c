/*
 * MPI_Init, MPI_Init_thread and MPI_Finalize (hand-written): start the trace, align clocks with
 * rank 0, and at the end bring every rank's trace into the run directory.
 *
 * Everything the collector says to other ranks goes over a private duplicate of MPI_COMM_WORLD
 * with PMPI calls only, so none of it is traced and none of it can match the program's messages.
 * Every rank that started the collector runs the same sequence of collectives on it whatever
 * happened locally (a trace that failed to open still takes part), so nobody hangs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commscope/ops.h"
#include "internal.h"

#define TAG_CLOCK 1
#define TAG_CHUNK 2
#define CHUNK (4u << 20)
#define ROUNDS_DEFAULT 16
#define ROUNDS_MAX 1000

static MPI_Comm priv = MPI_COMM_NULL; /* the collector's own duplicate of MPI_COMM_WORLD */
static int started;                   /* MPI_Init went through the collector's start-up */
static int opened;                    /* cs_trace_open succeeded */
static int my_rank, my_size;
static uint32_t rounds = ROUNDS_DEFAULT;

/* COMMSCOPE_DISABLE as the core reads it (1/yes/true/on): then not even the start-up runs. */
static int disabled_by_env(void)
{
    static const char *const on[] = {"1", "yes", "true", "on"};
    const char *d = getenv("COMMSCOPE_DISABLE");
    for (size_t i = 0; d && i < sizeof(on) / sizeof(on[0]); i++)
        if (strcasecmp(d, on[i]) == 0)
            return 1;
    return 0;
}

static uint64_t random64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v) && v)
        return v;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 17);
    v ^= v >> 31;
    v *= 0x9e3779b97f4a7c15ull;
    return v ? v : 1;
}

/* One ping-pong round with rank 0 over priv (cs_clock_exchange_fn). */
static int exchange_rank0(void *ctx, uint64_t t1, uint64_t *t0)
{
    (void)ctx;
    if (PMPI_Send(&t1, 1, MPI_UINT64_T, 0, TAG_CLOCK, priv) != MPI_SUCCESS ||
        PMPI_Recv(t0, 1, MPI_UINT64_T, 0, TAG_CLOCK, priv, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return -1;
    return 0;
}

/*
 * Clock offset to rank 0 by ping-pong on priv (cs_clock_pingpong, shared with the root service of
 * jobs without MPI).  Rank 0 serves the other ranks one after the other; rank r keeps the round
 * with the smallest round trip.  Collective over priv.
 */
static void clock_measure(struct cs_clock_sample *out)
{
    if (my_rank != 0) {
        cs_clock_pingpong(rounds, exchange_rank0, NULL, out);
        return;
    }
    memset(out, 0, sizeof(*out));
    out->rounds = rounds;
    out->local_ns = cs_now();
    out->valid = 1;
    for (int r = 1; r < my_size; r++) {
        for (uint32_t k = 0; k < rounds; k++) {
            uint64_t ping = 0, t0;
            if (PMPI_Recv(&ping, 1, MPI_UINT64_T, r, TAG_CLOCK, priv, MPI_STATUS_IGNORE) !=
                MPI_SUCCESS)
                break;
            t0 = cs_now();
            if (PMPI_Send(&t0, 1, MPI_UINT64_T, r, TAG_CLOCK, priv) != MPI_SUCCESS)
                break;
        }
    }
}

/* Start-up after a successful PMPI_Init*: t_pre was stamped before it. */
static void start(uint64_t t_pre, uint16_t op, int provided)
{
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &my_rank) != MPI_SUCCESS ||
        PMPI_Comm_size(MPI_COMM_WORLD, &my_size) != MPI_SUCCESS)
        return;
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &priv) != MPI_SUCCESS) {
        cs_warn("could not duplicate MPI_COMM_WORLD; tracing off");
        priv = MPI_COMM_NULL;
        return;
    }
    /* Rank 0 decides the run id and the clock rounds, so every rank does the same rounds. */
    uint64_t hdr[2] = {0, 0};
    if (my_rank == 0) {
        hdr[0] = random64();
        hdr[1] = ROUNDS_DEFAULT;
        const char *e = getenv("COMMSCOPE_CLOCK_ROUNDS");
        if (e && *e) {
            char *end = NULL;
            long v = strtol(e, &end, 10);
            if (*end == '\0' && v >= 1 && v <= ROUNDS_MAX)
                hdr[1] = (uint64_t)v;
            else
                cs_warn("COMMSCOPE_CLOCK_ROUNDS=%s is not a number in 1..%d; using %d", e,
                        ROUNDS_MAX, ROUNDS_DEFAULT);
        }
    }
    if (PMPI_Bcast(hdr, 2, MPI_UINT64_T, 0, priv) != MPI_SUCCESS) {
        cs_warn("could not agree on a run id; tracing off");
        PMPI_Comm_free(&priv);
        return;
    }
    rounds = (uint32_t)hdr[1];
    started = 1;
    struct cs_clock_sample s;
    clock_measure(&s);

    uint64_t t_init = cs_now();
    struct cs_trace_params p = {.rank = my_rank,
                                .world_size = my_size,
                                .thread_level = (uint32_t)provided,
                                .run_id = hdr[0],
                                .t_init = t_init};
    cs__req_reset();
    cs__tsize_init();
    opened = cs_trace_open(&p) == 0;
    cs__comm_init(my_rank, my_size, opened);
    cs__node_start(priv, my_rank, my_size, opened);
    cs__capture_start(priv, my_rank, my_size);
    if (!opened)
        return;
    cs_trace_set_clock(0, &s);
    /* The program's time starts when MPI_Init returns to it: after the collector's own start-up
     * (trace file, node snapshot and capture helpers), which must not count as its compute. */
    uint64_t t_ret = cs_now();
    cs_trace_set_t_init(t_ret);
    struct cs_event *ev = cs_rec_begin();
    if (ev) {
        ev->t_begin = t_pre;
        ev->t_end = t_ret;
        ev->op = op;
        ev->comm = CS_COMM_WORLD_ID;
        ev->peer = -1;
        ev->aux = provided;
        cs_rec_commit(ev);
    }
}

CS_EXPORT int MPI_Init(int *argc, char ***argv)
{
    if (disabled_by_env())
        return PMPI_Init(argc, argv);
    uint64_t t_pre = cs_now();
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) {
        int provided = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&provided);
        start(t_pre, CS_OP_INIT, provided);
    }
    return rc;
}

CS_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    if (disabled_by_env())
        return PMPI_Init_thread(argc, argv, required, provided);
    uint64_t t_pre = cs_now();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) {
        int level = provided ? *provided : MPI_THREAD_SINGLE;
        start(t_pre, CS_OP_INIT_THREAD, level);
    }
    return rc;
}

/* ---- gather ----------------------------------------------------------------------------- */

/* The files gathered to rank 0: each rank's trace, and the wire file of each node's capture. */
enum { KIND_TRACE, KIND_WIRE };
static const char *const kind_word[] = {[KIND_TRACE] = "trace", [KIND_WIRE] = "wire file"};

/* What rank 0 learns about each rank's file of one kind. */
struct file_info {
    uint64_t nonce; /* traces: the header's nonce; wire files: size and CRC-32 of the content */
    uint64_t size;
    int32_t have; /* 1: the rank has a closed file at path */
    int32_t kind;
    char host[CS_HOST_MAX];
    char path[1024];
    char name[256]; /* its name in the run directory */
};

/* CRC-32 of the whole file in the high half, its size in the low half; 0 when unreadable. */
static uint64_t content_id(const char *path, char *buf)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || !buf) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    uint32_t crc = 0;
    uint64_t size = 0;
    ssize_t n;
    while ((n = read(fd, buf, CHUNK)) > 0) {
        crc = cs_crc32(crc, buf, (size_t)n);
        size += (uint64_t)n;
    }
    close(fd);
    return n < 0 ? 0 : (uint64_t)crc << 32 | (size & 0xffffffffu);
}

/* Nonzero when the file at path is the one fi describes (rank 0 can see it already). */
static int same_file(const char *path, const struct file_info *fi, char *buf)
{
    if (fi->kind == KIND_WIRE)
        return fi->nonce != 0 && content_id(path, buf) == fi->nonce;
    struct cs_file_header h;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = pread(fd, &h, sizeof(h), 0);
    close(fd);
    return n == (ssize_t)sizeof(h) && memcmp(h.magic, CS_TRACE_MAGIC, 8) == 0 &&
           h.nonce == fi->nonce;
}

static void dest_path(char *out, size_t cap, const struct file_info *fi, int tmp)
{
    snprintf(out, cap, "%s/%s%s%s", cs_run_dir(), tmp ? "." : "", fi->name, tmp ? ".tmp" : "");
}

/* Rank 0: copy its own file into the run directory (it lives in a local directory). */
static void copy_local(const struct file_info *fi, char *buf)
{
    char dst[4200], tmp[4200];
    dest_path(dst, sizeof(dst), fi, 0);
    dest_path(tmp, sizeof(tmp), fi, 1);
    int in = open(fi->path, O_RDONLY | O_CLOEXEC);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int ok = in >= 0 && out >= 0;
    for (uint64_t off = 0; ok && off < fi->size;) {
        ssize_t n = pread(in, buf, CHUNK, (off_t)off);
        ok = n > 0 && (errno = cs_write_all(out, buf, (size_t)n)) == 0;
        off += n > 0 ? (uint64_t)n : 0;
    }
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        ok = 0;
    if (ok && rename(tmp, dst) == 0)
        return;
    unlink(tmp);
    cs_warn("could not copy %s to %s: %s; the %s stays where it is", fi->path, dst, strerror(errno),
            kind_word[fi->kind]);
}

/* Rank 0: receive rank r's file in chunks and write it into the run directory. */
static void receive_file(int r, const struct file_info *fi, char *buf)
{
    char dst[4200], tmp[4200];
    dest_path(dst, sizeof(dst), fi, 0);
    dest_path(tmp, sizeof(tmp), fi, 1);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int ok = out >= 0, werr = out < 0 ? errno : 0;
    uint64_t got = 0;
    /* Always drain every chunk the rank sends, even when writing fails, so it does not hang. */
    while (got < fi->size) {
        MPI_Status st;
        int n = 0;
        if (PMPI_Recv(buf, (int)(CHUNK + 8), MPI_BYTE, r, TAG_CHUNK, priv, &st) != MPI_SUCCESS) {
            ok = 0;
            break;
        }
        PMPI_Get_count(&st, MPI_BYTE, &n);
        int64_t len;
        memcpy(&len, buf, 8);
        if (n < 8 || len < 0 || (uint64_t)len != (uint64_t)(n - 8) || len == 0) {
            ok = 0; /* the sender could not read its file and stopped */
            break;
        }
        /* cs_write_all: a full disk or a file-size limit fails the copy, never the rank. */
        if (ok && (werr = cs_write_all(out, buf + 8, (size_t)len)) != 0)
            ok = 0;
        got += (uint64_t)len;
    }
    if (out >= 0 && close(out) != 0)
        ok = 0;
    if (ok && got == fi->size && rename(tmp, dst) == 0)
        return;
    unlink(tmp);
    cs_warn("could not bring rank %d's %s (%s:%s) into %s%s%s; it stays on that host", r,
            kind_word[fi->kind], fi->host, fi->path, cs_run_dir(), werr ? ": " : "",
            werr ? strerror(werr) : "");
}

/* Rank r: stream its file to rank 0; a chunk with length -1 says reading failed. */
static void send_file(const struct file_info *fi, char *buf)
{
    int in = open(fi->path, O_RDONLY | O_CLOEXEC);
    for (uint64_t off = 0; off < fi->size;) {
        ssize_t n = in >= 0 ? pread(in, buf + 8, CHUNK, (off_t)off) : -1;
        int64_t len = n > 0 ? (int64_t)n : -1;
        memcpy(buf, &len, 8);
        if (PMPI_Send(buf, n > 0 ? (int)n + 8 : 8, MPI_BYTE, 0, TAG_CHUNK, priv) != MPI_SUCCESS ||
            n <= 0)
            break;
        off += (uint64_t)n;
    }
    if (in >= 0)
        close(in);
}

/* Where a rank's trace is after the gather (traces.index's last column). */
enum { AT_NONE, AT_RUN_DIR, AT_GATHERED, AT_LOCAL };
static const char *const at_word[] = {"none", "run_dir", "gathered", "local"};

/*
 * Rank 0: RUN_DIR/traces.index, one line per rank: rank, host, path, size, nonce (16 hex digits)
 * and where (none: no closed trace; run_dir: it was there already; gathered: brought there;
 * local: it stays on its host at path, COMMSCOPE_GATHER).  docs/trace-format.md.  Written to a
 * temporary file and renamed; a write error is warned about, never fatal.
 */
static void write_index(const struct file_info *all, const unsigned char *at)
{
    char tmp[4200], dst[4200];
    snprintf(dst, sizeof dst, "%s/traces.index", cs_run_dir());
    snprintf(tmp, sizeof tmp, "%s/.traces.index.tmp", cs_run_dir());
    /* Made in memory, then written through cs_write_all: a file-size limit fails the write
     * (EFBIG) instead of raising SIGXFSZ in the job. */
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    int err = m ? 0 : ENOMEM;
    if (m) {
        fprintf(m, "# commscope traces index 1: rank host path size nonce where\n");
        for (int r = 0; r < my_size; r++) {
            const struct file_info *x = &all[r];
            char here[4200];
            const char *path = x->path;
            if (at[r] == AT_RUN_DIR || at[r] == AT_GATHERED) {
                dest_path(here, sizeof here, x, 0);
                path = here;
            }
            if (strpbrk(path, "\t\n") || strpbrk(x->host, "\t\n"))
                path = ""; /* (a name the format cannot hold: the analysis says the rank is lost) */
            fprintf(m, "%d\t%s\t%s\t%" PRIu64 "\t%016" PRIx64 "\t%s\n", r, x->host, path, x->size,
                    x->nonce, at_word[at[r]]);
        }
        if (fclose(m) != 0 || !text)
            err = ENOMEM;
    }
    int fd = err ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!err && fd < 0)
        err = errno;
    if (fd >= 0) {
        err = cs_write_all(fd, text, len);
        if (close(fd) != 0 && !err)
            err = errno;
    }
    free(text);
    if (!err && rename(tmp, dst) == 0)
        return;
    if (!err)
        err = errno;
    if (fd >= 0)
        unlink(tmp);
    cs_warn("could not write %s: %s", dst, strerror(err));
}

/*
 * Make every rank's file of mine->kind readable by rank 0 in the run directory.  Collective over
 * priv.  Files rank 0 can already see (shared filesystem, same host) are not moved, and traces
 * are not moved at all when COMMSCOPE_GATHER says so (cs_gather_traces): rank 0 writes
 * traces.index, where each rank's trace is.  Every rank has a trace; only the ranks that started
 * a node's capture helper have a wire file.
 */
static void gather(const struct file_info *mine)
{
    struct file_info *all = NULL;
    unsigned char *need = calloc((size_t)my_size, 1), *at = NULL;
    char *buf = malloc(CHUNK + 8);
    int move = mine->kind != KIND_TRACE || cs_gather_traces(my_size);
    if (my_rank == 0) {
        all = calloc((size_t)my_size, sizeof(*all));
        at = calloc((size_t)my_size, 1);
    }
    /* Everyone takes part in the collectives even without memory; rank 0 then moves nothing. */
    int rc =
        PMPI_Gather(mine, (int)sizeof(*mine), MPI_BYTE, all, (int)sizeof(*mine), MPI_BYTE, 0, priv);
    if (my_rank == 0 && need) {
        int ok = rc == MPI_SUCCESS && all && buf && cs_run_dir()[0];
        if (!ok)
            cs_warn("could not gather the %s list; each %s stays where its rank wrote it",
                    kind_word[mine->kind], kind_word[mine->kind]);
        mkdir(cs_run_dir(), 0755);
        for (int r = 0; ok && r < my_size; r++) {
            char dst[4200];
            all[r].name[sizeof all[r].name - 1] = '\0';
            all[r].host[sizeof all[r].host - 1] = '\0';
            all[r].path[sizeof all[r].path - 1] = '\0';
            all[r].kind = mine->kind;
            dest_path(dst, sizeof(dst), &all[r], 0);
            if (!all[r].have) {
                if (mine->kind == KIND_TRACE && move)
                    cs_warn("rank %d has no closed trace to gather", r);
            } else if (!all[r].name[0] || strchr(all[r].name, '/')) {
                cs_warn("rank %d's %s has no usable name; it stays at %s:%s", r,
                        kind_word[mine->kind], all[r].host, all[r].path);
                if (at)
                    at[r] = AT_LOCAL;
            } else if (same_file(dst, &all[r], buf)) {
                if (at)
                    at[r] = AT_RUN_DIR;
            } else {
                need[r] = (unsigned char)move;
                if (at)
                    at[r] = move ? AT_GATHERED : AT_LOCAL;
            }
        }
        if (ok && at && mine->kind == KIND_TRACE)
            write_index(all, at);
    }
    unsigned char dummy = 0;
    free(at);
    if (PMPI_Bcast(need ? need : &dummy, need ? my_size : 1, MPI_BYTE, 0, priv) != MPI_SUCCESS ||
        !need) {
        free(need);
        free(buf);
        free(all);
        return;
    }
    if (my_rank == 0) {
        if (need[0] && buf)
            copy_local(&all[0], buf);
        for (int r = 1; r < my_size; r++)
            if (need[r])
                receive_file(r, &all[r], buf);
    } else if (need[my_rank]) {
        if (buf) {
            send_file(mine, buf);
        } else {
            int64_t len = -1;
            PMPI_Send(&len, 8, MPI_BYTE, 0, TAG_CHUNK, priv);
        }
    }
    free(need);
    free(buf);
    free(all);
}

/* This rank's wire file (docs/wire.md), described for the gather; -1 when capture was off. */
static int wire_info(struct file_info *fi)
{
    memset(fi, 0, sizeof(*fi));
    fi->kind = KIND_WIRE;
    gethostname(fi->host, sizeof(fi->host) - 1);
    int rc = cs__capture_file(fi->path, sizeof(fi->path));
    if (rc <= 0)
        return rc;
    struct stat sb;
    const char *base = strrchr(fi->path, '/');
    snprintf(fi->name, sizeof(fi->name), "%.255s", base ? base + 1 : fi->path);
    char *buf = malloc(CHUNK);
    if (stat(fi->path, &sb) == 0 && sb.st_size > 0 && buf) {
        fi->size = (uint64_t)sb.st_size;
        fi->nonce = content_id(fi->path, buf);
        fi->have = fi->nonce != 0;
    }
    free(buf);
    return 0;
}

CS_EXPORT int MPI_Finalize(void)
{
    if (!started)
        return PMPI_Finalize();
    /* The rank's wall time ends here: the program is done. */
    uint64_t t_fin = cs_now();
    cs__capture_stop(priv);
    struct cs_clock_sample s;
    clock_measure(&s);

    struct file_info mine;
    memset(&mine, 0, sizeof(mine));
    mine.kind = KIND_TRACE;
    gethostname(mine.host, sizeof(mine.host) - 1);
    if (opened) {
        cs_trace_set_clock(1, &s);
        const struct cs_file_header *h = cs_trace_header();
        if (h)
            mine.nonce = h->nonce;
        snprintf(mine.path, sizeof(mine.path), "%s", cs_trace_path());
        cs_trace_close(t_fin);
        struct stat sb;
        if (mine.path[0] && stat(mine.path, &sb) == 0 && sb.st_size > 0) {
            mine.size = (uint64_t)sb.st_size;
            mine.have = 1;
        }
        const char *base = strrchr(mine.path, '/');
        snprintf(mine.name, sizeof(mine.name), "%.255s", base ? base + 1 : mine.path);
    }
    cs__node_finish(priv, my_rank, my_size);
    gather(&mine);
    struct file_info wire;
    if (wire_info(&wire) == 0)
        gather(&wire);
    PMPI_Comm_free(&priv);
    started = 0;
    return PMPI_Finalize();
}
