/*
 * The rank's trace file: open (create, size, map, header), the communicator table, and close
 * (seal, count, header CRC, trim).  The hot path is in buffer.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "front.h"
#include "internal.h"

volatile int cs_active;
uint32_t cs_trace_generation;
void (*cs__trace_open_hook)(void);
void (*cs__trace_close_hook)(void);

struct cs__trace cs__t = {
    .fd = -1,
    .wake_at = UINT64_MAX,
    .grow_mu = PTHREAD_MUTEX_INITIALIZER,
    .comm_mu = PTHREAD_MUTEX_INITIALIZER,
};

/* Set in a child forked while a trace was open: that child never traces (it is not the rank). */
static int inherited;

/* The address range of the last closed trace, kept mapped (anonymous) so a thread still holding
 * a slot pointer when the trace closed writes into harmless memory; freed at the next open. */
static void *stale_base;
static size_t stale_bytes;

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* Replace the file mapping by anonymous memory at the same address: the file stops changing,
 * and late or stray writes through old pointers neither crash nor reach the file. */
static void detach_mapping(void)
{
    void *p = mmap(cs__t.base, cs__t.map_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        munmap(cs__t.base, cs__t.map_bytes);
        return;
    }
    stale_base = p;
    stale_bytes = cs__t.map_bytes;
}

/*
 * A dataloader worker or other child forked from a traced rank shares the parent's file mapping
 * (MAP_SHARED): the child must never write into it.  Only the forking thread exists in the child,
 * so plain stores are safe here.
 */
static void atfork_child(void)
{
    if (cs__t.open) {
        inherited = 1;
        __atomic_store_n(&cs_active, 0, __ATOMIC_RELAXED);
        cs__helper_forget(); /* threads do not survive fork */
        cs__watch_forget();
        cs__ring_forget();
        detach_mapping();
        close(cs__t.fd);
        cs__t.fd = -1;
        cs__t.open = 0;
        cs__t.hdr = NULL;
        __atomic_fetch_add(&cs_trace_generation, 1, __ATOMIC_SEQ_CST);
    }
    /* Another parent thread may have held these at fork time. */
    pthread_mutex_init(&cs__t.grow_mu, NULL);
    pthread_mutex_init(&cs__t.comm_mu, NULL);
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, atfork_child);
}

/* mkdir -p.  Returns 0 or an errno value. */
static int mkdir_p(const char *dir)
{
    char buf[PATH_MAX];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf)
        return ENAMETOOLONG;
    memcpy(buf, dir, n + 1);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return errno;
            *p = c;
            if (c == '\0')
                break;
        }
    }
    struct stat st;
    if (stat(buf, &st) != 0)
        return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

static uint64_t random_nonce(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v && v)
        return v;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t r = read(fd, &v, sizeof v);
        close(fd);
        if (r == (ssize_t)sizeof v && v)
            return v;
    }
    /* No entropy source: still tell files apart by time, pid and address. */
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    v = (uint64_t)t.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)t.tv_sec << 20 ^
        (uint64_t)getpid() << 40 ^ (uint64_t)(uintptr_t)&v;
    return v ? v : 1;
}

/* The boot id "54480203-303f-45a9-b780-c3ffc09a8320" as 16 bytes; zero when unreadable. */
static void read_boot_id(uint8_t out[16])
{
    memset(out, 0, 16);
    char text[64] = "";
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    uint8_t id[16];
    int k = 0;
    for (ssize_t i = 0; i < n && k < 32; i++) {
        char c = text[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            continue;
        if (k % 2 == 0)
            id[k / 2] = (uint8_t)(v << 4);
        else
            id[k / 2] |= (uint8_t)v;
        k++;
    }
    if (k == 32)
        memcpy(out, id, 16);
}

static void fill_header(struct cs_file_header *h, const struct cs_trace_params *p, uint64_t t_init,
                        int skewed)
{
    memcpy(h->magic, CS_TRACE_MAGIC, sizeof h->magic);
    h->version = CS_TRACE_VERSION;
    h->header_size = CS_HEADER_SIZE;
    h->block_size = CS_BLOCK_SIZE;
    h->event_size = CS_EVENT_SIZE;
    /* MPI_THREAD_MULTIPLE is 3 in Open MPI and MPICH alike (the standard orders the levels). */
    h->flags = CS_FLAG_PARTIAL | CS_FLAG_CHECKED | (skewed ? CS_FLAG_CLOCK_SKEW : 0) |
               (p->thread_level >= 3 ? CS_FLAG_THREADS : 0);
    h->rank = p->rank;
    h->world_size = p->world_size;
    h->pid = (int32_t)getpid();
    h->thread_level = p->thread_level;
    h->run_id = p->run_id;
    h->nonce = random_nonce();
    h->t_init = t_init;
    if (gethostname(h->host, sizeof h->host) != 0)
        strcpy(h->host, "unknown-host");
    h->host[sizeof h->host - 1] = '\0';
    ssize_t n = readlink("/proc/self/exe", h->program, sizeof h->program - 1);
    h->program[n > 0 ? n : 0] = '\0';
    read_boot_id(h->boot_id);
    /* The counters start at 0: their complements at ~0. */
    for (int i = 0; i < 4; i++)
        h->counter_check[i] = ~0ull;
}

int cs_trace_open(const struct cs_trace_params *p)
{
    if (!p || inherited)
        return -1;
    if (cs__t.open) {
        cs_warn("cs_trace_open: a trace is already open (%s); keeping it", cs__t.path);
        return -1;
    }
    /* cs_disable before open: already warned, stay off. */
    if (cs__disable_requested())
        return -1;
    cs__rank = p->rank;
    pthread_once(&atfork_once, register_atfork);
    cs__skew_report();

    struct cs__config *cfg = &cs__t.cfg;
    if (cs__config_load(cfg, p->rank, p->run_id) != 0)
        return -1;
    if (cfg->disabled)
        return -1;
    if (p->rank < 0 || p->world_size < 1 || p->rank >= p->world_size) {
        cs_warn("cs_trace_open: rank %d of world size %d is not valid; not tracing", p->rank,
                p->world_size);
        return -1;
    }

    int err = mkdir_p(cfg->local_dir);
    if (err) {
        cs_warn("cannot create trace directory %s: %s; not tracing", cfg->local_dir, strerror(err));
        return -1;
    }
    if (p->rank == 0 && strcmp(cfg->run_dir, cfg->local_dir) != 0 &&
        (err = mkdir_p(cfg->run_dir)) != 0)
        cs_warn("cannot create run directory %s: %s (traces will not be gathered there)",
                cfg->run_dir, strerror(err));

    snprintf(cs__t.path, sizeof cs__t.path, "%s/rank-%05d.cst", cfg->local_dir, p->rank);
    int fd =
        open(cs__t.path, O_RDWR | O_CREAT | (p->exclusive ? O_EXCL : O_TRUNC) | O_CLOEXEC, 0644);
    if (fd < 0 && p->exclusive && errno == EEXIST)
        return -1; /* another process of this rank left its trace: keep it */
    if (fd < 0) {
        cs_warn("cannot create trace file %s: %s; not tracing", cs__t.path, strerror(errno));
        return -1;
    }

    /* The trace stays below the file-size limit (ulimit -f): the kernel answers a write past it
     * with SIGXFSZ, which would kill the program. */
    uint64_t cap = cfg->max_bytes, limit = cs__fsize_limit();
    if (limit < cap) {
        cap = limit;
        if (cap >= CS_HEADER_SIZE + CS_BLOCK_SIZE)
            cs_warn("trace file capped at %llu KiB by the file-size limit (ulimit -f), below "
                    "COMMSCOPE_MAX_MB",
                    (unsigned long long)(cap >> 10));
    }
    if (cap < CS_HEADER_SIZE + CS_BLOCK_SIZE) {
        cs_warn("the file-size limit (ulimit -f) of %llu bytes leaves no room for a trace file "
                "(at least %u bytes); not tracing",
                (unsigned long long)cap, CS_HEADER_SIZE + CS_BLOCK_SIZE);
        close(fd);
        unlink(cs__t.path);
        return -1;
    }
    uint64_t max_blocks = (cap - CS_HEADER_SIZE) / CS_BLOCK_SIZE;
    /* The file starts with the helper's whole reserve, populated below, so writers find their
     * pages ready from the first event on (see CS__AHEAD_BLOCKS); on a disk with less room it
     * starts smaller. */
    uint64_t initial = max_blocks < CS__AHEAD_BLOCKS ? max_blocks : CS__AHEAD_BLOCKS;
    cs__t.fallocate_works = 1;
    for (;;) {
        err = cs__extend(fd, 0, CS_HEADER_SIZE + initial * CS_BLOCK_SIZE, &cs__t.fallocate_works);
        if (!err || initial <= 1)
            break;
        initial /= 16;
    }
    if (err) {
        cs_warn("cannot size trace file %s: %s; not tracing", cs__t.path, strerror(err));
        close(fd);
        unlink(cs__t.path);
        return -1;
    }
    if (stale_base) {
        munmap(stale_base, stale_bytes);
        stale_base = NULL;
    }
    size_t map_bytes = CS_HEADER_SIZE + max_blocks * CS_BLOCK_SIZE;
    /* The whole cap is mapped up front so the mapping never moves; the file behind it grows. */
    void *base = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        cs_warn("cannot map trace file %s (%zu bytes): %s; not tracing", cs__t.path, map_bytes,
                strerror(errno));
        close(fd);
        return -1;
    }

    uint64_t t_init = p->t_init;
    int skewed = cs__skew_confirm(p->rank, &t_init);

    cs__t.base = base;
    cs__t.hdr = base;
    cs__t.map_bytes = map_bytes;
    cs__t.max_blocks = max_blocks;
    cs__t.fd = fd;
    atomic_store(&cs__t.next_block, 0);
    atomic_store(&cs__t.file_blocks, initial);
    atomic_store(&cs__t.ready_blocks, initial);
    atomic_store(&cs__t.next_thread, 0);
    atomic_store(&cs__t.storage_failed, 0);
    cs__t.comm_blk = NULL;
    cs__t.comm_seq = 0;
    cs__t.comm_full_warned = 0;
    fill_header(cs__t.hdr, p, t_init, skewed);
    cs__hdr_seal();
    cs__prefault(cs__t.base + CS_HEADER_SIZE, (size_t)initial * CS_BLOCK_SIZE);
    __atomic_fetch_add(&cs_trace_generation, 1, __ATOMIC_SEQ_CST);
    cs__t.open = 1;
    atomic_store(&cs__t.ring_folds, 0);
    cs__ring_open();
    if (cs__trace_open_hook)
        cs__trace_open_hook();
    cs__helper_start();
    cs__watch_start();
    cs__fate_watch();
    __atomic_store_n(&cs_active, 1, __ATOMIC_RELEASE);
    return 0;
}

int cs_trace_add_comm(const struct cs_comm_record *rec)
{
    if (!rec || !__atomic_load_n(&cs_active, __ATOMIC_ACQUIRE))
        return -1;
    /* Sizes beyond a 1 GiB record are a caller's bug, not a communicator. */
    if (rec->size < 0 || rec->size > (1 << 28))
        return -1;
    size_t body = sizeof *rec + (size_t)rec->size * sizeof rec->members[0];
    size_t len = (body + 7) & ~(size_t)7;
    /* A record may carry a kind-specific trailer after its members (NCCL: struct cs_comm_gpu);
     * the caller says so with a larger record_bytes. */
    if (rec->record_bytes > len && rec->record_bytes <= len + 256) {
        len = ((size_t)rec->record_bytes + 7) & ~(size_t)7;
        body = rec->record_bytes;
    }
    int rc = -1;

    pthread_mutex_lock(&cs__t.comm_mu);
    if (!cs__t.open || !__atomic_load_n(&cs_active, __ATOMIC_RELAXED))
        goto out;
    uint16_t thread;
    uint32_t ostid;
    cs__thread_ident(&thread, &ostid);

    struct cs_block_header *b = cs__t.comm_blk;
    uint32_t used = b ? __atomic_load_n(&b->used, __ATOMIC_RELAXED) : 0;
    if (!b || used + len > CS__BLOCK_PAYLOAD) {
        /* Leave the current block (it is complete): seal it so its CRC covers final bytes.
         * A large record also starts after it, so comm block seq order is record order. */
        if (b)
            cs__block_seal(b);
        cs__t.comm_blk = NULL;
        uint64_t span =
            len <= CS__BLOCK_PAYLOAD ? 1 : (len + sizeof *b + CS_BLOCK_SIZE - 1) / CS_BLOCK_SIZE;
        int64_t i = cs__claim_blocks(span);
        if (i < 0) {
            if (!cs__t.comm_full_warned && __atomic_load_n(&cs_active, __ATOMIC_RELAXED) &&
                !atomic_load(&cs__t.storage_failed)) {
                cs__t.comm_full_warned = 1;
                cs_warn("trace file %s is at its cap (COMMSCOPE_MAX_MB): communicator %llu "
                        "(and later ones) not recorded",
                        cs__t.path, (unsigned long long)rec->id);
            }
            goto out;
        }
        b = cs__block((uint64_t)i);
        cs__block_init(b, CS_BLOCK_COMMS, thread, ostid, cs__t.comm_seq++, (uint32_t)span);
        used = 0;
        if (span == 1)
            cs__t.comm_blk = b;
    }
    char *dst = (char *)b + sizeof *b + used;
    memcpy(dst, rec, body);
    ((struct cs_comm_record *)dst)->record_bytes = (uint32_t)len;
    /* Readers trust `used`: publish it only once the bytes are in place, together with the CRC
     * that covers them, so a crashed rank's communicator table is checked too (trace.h). */
    cs__block_seal_used(b, (uint32_t)(used + len));
    rc = 0;
out:
    pthread_mutex_unlock(&cs__t.comm_mu);
    return rc;
}

void cs_trace_set_t_init(uint64_t t_init)
{
    if (cs__t.open) {
        cs__t.hdr->t_init = t_init;
        cs__hdr_seal();
    }
}

void cs_trace_set_clock(int idx, const struct cs_clock_sample *s)
{
    if (!s || idx < 0 || idx > 1 || !cs__t.open)
        return;
    cs__t.hdr->clock[idx] = *s;
    cs__hdr_seal();
}

void cs_trace_count_test(uint64_t ns)
{
    if (!__atomic_load_n(&cs_active, __ATOMIC_RELAXED))
        return;
    cs__counter_add(&cs__t.hdr->unrecorded_tests, CS_COUNTER_TESTS, 1);
    cs__counter_add(&cs__t.hdr->unrecorded_test_ns, CS_COUNTER_TEST_NS, ns);
}

void cs_trace_close(uint64_t t_finalize)
{
    if (!cs__t.open)
        return;
    cs__watch_stop(); /* its last report, while the blocks are still mapped */
    if (cs__trace_close_hook)
        cs__trace_close_hook();
    __atomic_store_n(&cs_active, 0, __ATOMIC_RELEASE);
    /* Before the locks: the helper may be waiting for grow_mu. */
    cs__helper_stop();
    cs__ring_close();
    pthread_mutex_lock(&cs__t.comm_mu);
    pthread_mutex_lock(&cs__t.grow_mu);

    struct cs_file_header *h = cs__t.hdr;
    h->t_finalize = t_finalize;
    cs__hdr_seal(); /* the partial header stays checkable until the closed one replaces it */
    uint64_t nb = atomic_load(&cs__t.next_block);
    uint64_t events = 0;
    for (uint64_t i = 0; i < nb;) {
        struct cs_block_header *b = cs__block(i);
        if (__atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) != CS_BLOCK_MAGIC) {
            i++; /* claimed by a thread that had not written its header yet */
            continue;
        }
        uint64_t span = b->span >= 1 && b->span <= nb - i ? b->span : 1;
        if (b->kind == CS_BLOCK_EVENTS)
            events += __atomic_load_n(&b->used, __ATOMIC_ACQUIRE);
        /* Threads seal the blocks they leave; their current blocks are sealed here. */
        if (__atomic_load_n(&b->crc, __ATOMIC_ACQUIRE) == 0)
            cs__block_seal(b);
        i += span;
    }
    /*
     * The closed header is written last, through the file, after the file was trimmed: a reader
     * (a live analysis) sees either the partial header of a file that may still shrink, which it
     * reads by copy, or the closed header of a file that will not change again.
     */
    union {
        struct cs_file_header h;
        unsigned char page[CS_HEADER_SIZE];
    } fin;
    memcpy(fin.page, h, CS_HEADER_SIZE);
    fin.h.blocks = nb;
    fin.h.events = events;
    fin.h.flags &= ~(uint32_t)CS_FLAG_PARTIAL;
    fin.h.header_crc = 0;
    fin.h.header_crc = cs_crc32(0, fin.page, CS_HEADER_SIZE);
    size_t bytes = CS_HEADER_SIZE + nb * CS_BLOCK_SIZE;
    /* MS_SYNC so rank 0 on another node of a shared filesystem reads the final bytes. */
    if (msync(cs__t.base, bytes, MS_SYNC) != 0)
        cs_warn("msync of trace file %s failed: %s", cs__t.path, strerror(errno));
    detach_mapping();
    if (ftruncate(cs__t.fd, (off_t)bytes) != 0)
        cs_warn("cannot trim trace file %s to %zu bytes: %s", cs__t.path, bytes, strerror(errno));
    if (pwrite(cs__t.fd, fin.page, CS_HEADER_SIZE, 0) != (ssize_t)CS_HEADER_SIZE)
        cs_warn("cannot write the closed header of trace file %s: %s; it stays marked partial",
                cs__t.path, strerror(errno));
    if (close(cs__t.fd) != 0)
        cs_warn("closing trace file %s: %s", cs__t.path, strerror(errno));
    cs__t.fd = -1;
    cs__t.open = 0;
    cs__t.hdr = NULL;
    cs__t.comm_blk = NULL;
    __atomic_fetch_add(&cs_trace_generation, 1, __ATOMIC_SEQ_CST);

    pthread_mutex_unlock(&cs__t.grow_mu);
    pthread_mutex_unlock(&cs__t.comm_mu);
    cs__disable_reset();
}

const char *cs_trace_path(void)
{
    return cs__t.path;
}

const char *cs_run_dir(void)
{
    if (cs__t.cfg.run_dir[0])
        return cs__t.cfg.run_dir;
    const char *v = getenv("COMMSCOPE_DIR");
    return v ? v : "";
}

int cs_gather_traces(int world)
{
    int g = cs__t.cfg.gather;
    return g == 1 || (g == 0 && world <= CS_GATHER_AUTO_MAX);
}

const char *cs_local_dir(void)
{
    return cs__t.cfg.local_dir[0] ? cs__t.cfg.local_dir : cs_run_dir();
}

const struct cs_file_header *cs_trace_header(void)
{
    return cs__t.open ? cs__t.hdr : NULL;
}
