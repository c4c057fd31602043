/*
 * TEST DOUBLE: a CPU NCCL for machines without a GPU.  It implements the NCCL 2.28 C ABI subset
 * commscope intercepts, with the same symbol layout as the real libnccl.so.2 (pncclX is the
 * implementation, ncclX an alias of it), and really moves data: "device" buffers are host memory
 * and the members of a communicator are processes that meet in a shared-memory file named after
 * the unique id (FAKE_NCCL_DIR, default /dev/shm).  Streams are ignored (every call completes
 * before it returns).  Supported: every collective for every type (sum only), send/recv inside
 * or outside groups, split and shrink, blocking and (reported as) non-blocking communicators,
 * ncclCommInitAll (several "devices" of one process, each driven by its own thread).
 *
 * Limits, all answered with ncclInvalidArgument: at most FAKE_MAX_RANKS members and FAKE_SLOT
 * bytes per member per call.
 *
 * FAKE_NCCL_ASYNC=1 (with the fake CUDA runtime) makes collectives outside groups behave as NCCL's
 * do on a GPU: the call enqueues a kernel whose end is not known (fakeCudaLaunchOpen) and returns
 * at once; a progress thread moves the data, one collective after the other in the order they
 * were called, and completes the kernel when the collective completed.  A member that never
 * calls a collective leaves the others' kernels running for ever, and their
 * cudaStreamSynchronize waiting, as on a GPU.  Argument errors are then not returned (the call
 * has returned already); ncclCommDestroy first waits for the communicator's queued collectives.
 *
 * FAKE_NCCL_LOG=PATH appends one line per collective, send and receive call ("call NAME rank R
 * nranks N count C type T bytes B peer P", B = count x the type's size, P = -1 for collectives):
 * the ground truth tests compare a program's NCCL traffic with.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../collector/nccl/api.h"

/* Prototypes of everything the double defines, from the collector's own tables. */
#define CS_NCCL(fam, name, op, params, args)                                                       \
    ncclResult_t nccl##name params;                                                                \
    ncclResult_t pnccl##name params;
#define CS_NCCL_Q(name, params, args)                                                              \
    ncclResult_t nccl##name params;                                                                \
    ncclResult_t pnccl##name params;
#include "../../collector/nccl/calls.def"
#include "../../collector/nccl/queries.def"
#undef CS_NCCL
#undef CS_NCCL_Q

#define FAKE_MAX_RANKS 16
#define FAKE_SLOT (1u << 20)
#define FAKE_VERSION 22809

#define API __attribute__((visibility("default")))
#define ALIAS(name) __attribute__((visibility("default"), alias("p" #name)))

struct shm {
    _Atomic uint32_t arrived; /* barrier count */
    _Atomic uint32_t sense;   /* barrier generation */
    int32_t color[FAKE_MAX_RANKS], key[FAKE_MAX_RANKS];
    /* mailbox[src][dst] state: 0 empty, else bytes + 1 */
    _Atomic uint64_t mbox[FAKE_MAX_RANKS][FAKE_MAX_RANKS];
};

struct ncclComm {
    int rank, nranks, dev, blocking_pending;
    uint32_t sense, children;
    char name[200];
    struct shm *s;
    unsigned char *slots; /* nranks x FAKE_SLOT */
    unsigned char *mail;  /* nranks x nranks x FAKE_SLOT / nranks... see mail_at */
};

/* Deferred point-to-point calls of a group. */
struct p2p {
    int send;
    void *buf;
    size_t bytes;
    int peer;
    struct ncclComm *comm;
};
static __thread int group_depth;
static __thread struct p2p pend[256];
static __thread int npend;

static const size_t tsize[12] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

static void log_call(const char *name, const struct ncclComm *c, size_t count, int t, int peer)
{
    const char *path = getenv("FAKE_NCCL_LOG");
    if (!path || !*path || !c || t < 0 || t >= 12)
        return;
    char line[256];
    int n = snprintf(line, sizeof line,
                     "call %s rank %d nranks %d count %zu type %d bytes %zu "
                     "peer %d\n",
                     name, c->rank, c->nranks, count, t, count * tsize[t], peer);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0)
        return;
    /* One write per line with O_APPEND: lines of concurrent ranks do not interleave. */
    if (write(fd, line, (size_t)n) != n) {
        /* A test double: a short log makes the test that reads it fail. */
    }
    close(fd);
}

/*
 * GPU work: when the program runs on the fake CUDA runtime (fake_cudart.c), every launch (a call,
 * or a group at its outermost ncclGroupEnd) first puts one "ncclDevKernel_*" kernel on the
 * (first) call's stream, lasting what the program scripted with fakeCudaNextDuration, as NCCL
 * enqueues one kernel per launch and device before it returns; then the data moves on the host.
 * Without the fake runtime, streams are ignored.
 */
static __thread cudaStream_t group_stream;
static __thread const char *group_kernel;

static void gpu_launch(const char *kernel, cudaStream_t st)
{
    if (group_depth > 0) {
        if (!group_kernel) {
            group_kernel = kernel;
            group_stream = st;
        }
        return;
    }
    static int (*launch)(const char *, uint64_t, cudaStream_t);
    static int looked;
    if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
        *(void **)&launch = dlsym(RTLD_DEFAULT, "fakeCudaLaunchNamed");
        __atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
    }
    if (launch)
        launch(kernel, 0, st);
}

/*
 * FAKE_NCCL_ASYNC: the queue of enqueued collectives and the progress thread that runs them.
 */
struct job {
    int kind, t, root;
    const void *send;
    void *recv;
    size_t count;
    ncclComm_t c;
    uint32_t kernel; /* the fake runtime's unfinished work */
};
#define JOBS 1024
static struct job jobs[JOBS];
static uint32_t jhead, jtail; /* [jhead, jtail) queued */
static pthread_mutex_t jmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jcv = PTHREAD_COND_INITIALIZER;
static int jstarted;
static uint32_t (*open_launch)(const char *, cudaStream_t);
static void (*complete)(uint32_t);

static ncclResult_t coll(int kind, const void *send, void *recv, size_t count, int t, int root,
                         ncclComm_t c);
static __thread int on_progress_thread; /* its collectives were logged when enqueued */

static void log_coll(int kind, const struct ncclComm *c, size_t count, int t)
{
    static const char *const names[8] = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                                         "ReduceScatter", "AlltoAll",  "Gather", "Scatter"};
    if (kind >= 0 && kind < 8)
        log_call(names[kind], c, count, t, -1);
}

static void *progress(void *arg)
{
    (void)arg;
    on_progress_thread = 1;
    pthread_mutex_lock(&jmu);
    for (;;) {
        while (jhead == jtail)
            pthread_cond_wait(&jcv, &jmu);
        struct job j = jobs[jhead % JOBS];
        pthread_mutex_unlock(&jmu);
        coll(j.kind, j.send, j.recv, j.count, j.t, j.root, j.c);
        complete(j.kernel);
        pthread_mutex_lock(&jmu);
        jhead++;
        pthread_cond_broadcast(&jcv);
    }
    return NULL;
}

/* Enqueue a collective (FAKE_NCCL_ASYNC, outside groups, on the fake runtime): 1 when queued. */
static int enqueue(int kind, const char *kernel, const void *send, void *recv, size_t count, int t,
                   int root, ncclComm_t c, cudaStream_t st)
{
    const char *v = getenv("FAKE_NCCL_ASYNC");
    if (!v || strcmp(v, "1") || group_depth > 0 || !c)
        return 0;
    pthread_mutex_lock(&jmu);
    if (!jstarted) {
        *(void **)&open_launch = dlsym(RTLD_DEFAULT, "fakeCudaLaunchOpen");
        *(void **)&complete = dlsym(RTLD_DEFAULT, "fakeCudaComplete");
        pthread_t th;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        if (open_launch && complete && pthread_create(&th, NULL, progress, NULL) == 0) {
            pthread_detach(th);
            jstarted = 1;
        } else {
            jstarted = -1;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    while (jstarted > 0 && jtail - jhead == JOBS)
        pthread_cond_wait(&jcv, &jmu);
    uint32_t k = jstarted > 0 ? open_launch(kernel, st) : 0;
    if (k) {
        jobs[jtail % JOBS] = (struct job){kind, t, root, send, recv, count, c, k};
        jtail++;
        pthread_cond_broadcast(&jcv);
    }
    pthread_mutex_unlock(&jmu);
    return k != 0;
}

/* Wait until the queued collectives have run (before a communicator goes away). */
static void drain_jobs(void)
{
    pthread_mutex_lock(&jmu);
    while (jhead != jtail)
        pthread_cond_wait(&jcv, &jmu);
    pthread_mutex_unlock(&jmu);
}

static size_t mail_slot(void)
{
    return FAKE_SLOT / 4;
}

static unsigned char *mail_at(struct ncclComm *c, int src, int dst)
{
    return c->mail + ((size_t)src * FAKE_MAX_RANKS + (size_t)dst) * mail_slot();
}

static const char *dir(void)
{
    const char *d = getenv("FAKE_NCCL_DIR");
    return d && *d ? d : "/dev/shm";
}

static int attach(struct ncclComm *c)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir(), c->name);
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0)
        return -1;
    size_t bytes = sizeof(struct shm) + (size_t)c->nranks * FAKE_SLOT +
                   (size_t)FAKE_MAX_RANKS * FAKE_MAX_RANKS * mail_slot();
    if (ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        return -1;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return -1;
    c->s = p;
    c->slots = (unsigned char *)p + sizeof(struct shm);
    c->mail = c->slots + (size_t)c->nranks * FAKE_SLOT;
    return 0;
}

static void barrier(struct ncclComm *c)
{
    uint32_t my = c->sense ^ 1u;
    c->sense = my;
    if (atomic_fetch_add(&c->s->arrived, 1) + 1 == (uint32_t)c->nranks) {
        atomic_store(&c->s->arrived, 0);
        atomic_store(&c->s->sense, my);
    } else {
        while (atomic_load(&c->s->sense) != my)
            sched_yield();
    }
}

static void sum_into(void *dst, const void *src, size_t count, int t)
{
#define SUM(T)                                                                                     \
    for (size_t i = 0; i < count; i++)                                                             \
        ((T *)dst)[i] += ((const T *)src)[i];                                                      \
    break;
    switch (t) {
    case 0:
        SUM(int8_t)
    case 1:
        SUM(uint8_t)
    case 2:
        SUM(int32_t)
    case 3:
        SUM(uint32_t)
    case 4:
        SUM(int64_t)
    case 5:
        SUM(uint64_t)
    case 7:
        SUM(float)
    case 8:
        SUM(double)
    default: /* half, bfloat16, fp8: not summed by the double (first contribution wins) */
        break;
    }
#undef SUM
}

API ncclResult_t pncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = FAKE_VERSION;
    return ncclSuccess;
}
API ncclResult_t ncclGetVersion(int *version) ALIAS(ncclGetVersion);

API ncclResult_t pncclGetUniqueId(ncclUniqueId *id)
{
    if (!id)
        return ncclInvalidArgument;
    memset(id, 0, sizeof *id);
    uint64_t r[2] = {0, 0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        r[0] = (uint64_t)getpid() << 20 ^ (uint64_t)time(NULL);
    snprintf(id->internal, sizeof id->internal, "fake-nccl-%016llx%016llx",
             (unsigned long long)r[0], (unsigned long long)r[1]);
    return ncclSuccess;
}
API ncclResult_t ncclGetUniqueId(ncclUniqueId *id) ALIAS(ncclGetUniqueId);

static ncclResult_t make(ncclComm_t *out, int nranks, const char *name, int rank)
{
    if (!out || nranks < 1 || nranks > FAKE_MAX_RANKS || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    c->rank = rank;
    c->nranks = nranks;
    const char *lr = getenv("LOCAL_RANK");
    c->dev = lr ? atoi(lr) : 0;
    snprintf(c->name, sizeof c->name, "%s", name);
    if (attach(c) != 0) {
        free(c);
        return ncclSystemError;
    }
    barrier(c);
    *out = c;
    return ncclSuccess;
}

API ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    char name[160];
    snprintf(name, sizeof name, "%.128s-n%d", id.internal, nranks);
    return make(comm, nranks, name, rank);
}
API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
    ALIAS(ncclCommInitRank);

/* The double reads `blocking` from ncclConfig_t (after size_t size and two unsigned ints). */
static int nonblocking(const ncclConfig_t *config)
{
    if (!config)
        return 0;
    int b;
    memcpy(&b, (const char *)config + sizeof(size_t) + 2 * sizeof(unsigned), sizeof b);
    return b == 0;
}

API ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                         ncclConfig_t *config)
{
    ncclResult_t rc = pncclCommInitRank(comm, nranks, id, rank);
    if (rc == ncclSuccess && nonblocking(config)) {
        (*comm)->blocking_pending = 1;
        return ncclInProgress;
    }
    return rc;
}
API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                        ncclConfig_t *config) ALIAS(ncclCommInitRankConfig);

API ncclResult_t pncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nId,
                                           ncclUniqueId *ids, ncclConfig_t *config)
{
    if (nId < 1 || !ids)
        return ncclInvalidArgument;
    return pncclCommInitRankConfig(comm, nranks, ids[0], rank, config);
}
API ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nId,
                                          ncclUniqueId *ids, ncclConfig_t *config)
    ALIAS(ncclCommInitRankScalable);

/*
 * ndev "devices" of this process as the members of one communicator (device devlist[i], or i).
 * Nobody else joins, so nobody waits at creation.  Their collectives meet in barriers like any
 * others, so each member must be driven by its own thread (one thread per GPU, as with NCCL
 * without groups).
 */
API ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    static _Atomic uint32_t calls;
    if (!comm || ndev < 1 || ndev > FAKE_MAX_RANKS)
        return ncclInvalidArgument;
    char name[160];
    snprintf(name, sizeof name, "fake-nccl-all-%d-%u-n%d", (int)getpid(),
             (unsigned)atomic_fetch_add(&calls, 1), ndev);
    for (int i = 0; i < ndev; i++) {
        struct ncclComm *c = calloc(1, sizeof *c);
        if (c) {
            c->rank = i;
            c->nranks = ndev;
            snprintf(c->name, sizeof c->name, "%s", name);
        }
        if (!c || attach(c) != 0) {
            free(c);
            for (int k = 0; k < i; k++)
                free(comm[k]);
            return ncclSystemError;
        }
        c->dev = devlist ? devlist[i] : i;
        comm[i] = c;
    }
    return ncclSuccess;
}
API ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
    ALIAS(ncclCommInitAll);

/* Collective over the parent: every member publishes (color, key); members of a color are
 * ordered by key, then parent rank. */
static ncclResult_t child(ncclComm_t comm, int color, int key, const int *exclude, int nexclude,
                          ncclComm_t *newcomm, const char *what)
{
    if (!comm || !newcomm)
        return ncclInvalidArgument;
    for (int i = 0; exclude && i < nexclude; i++)
        if (exclude[i] == comm->rank)
            color = -1;
    comm->s->color[comm->rank] = color;
    comm->s->key[comm->rank] = key;
    barrier(comm);
    int n = 0, me = 0;
    for (int r = 0; r < comm->nranks; r++) {
        if (color < 0 || comm->s->color[r] != color)
            continue;
        if (comm->s->key[r] < key || (comm->s->key[r] == key && r < comm->rank))
            me++;
        n++;
    }
    uint32_t idx = comm->children++;
    barrier(comm); /* everyone has read the table before it is reused */
    if (color < 0) {
        *newcomm = NULL;
        return ncclSuccess;
    }
    char name[200];
    snprintf(name, sizeof name, "%.120s.%s%u.%d", comm->name, what, idx, color);
    return make(newcomm, n, name, me);
}

API ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                ncclConfig_t *config)
{
    (void)config;
    return child(comm, color, key, NULL, 0, newcomm, "s");
}
API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                               ncclConfig_t *config) ALIAS(ncclCommSplit);

API ncclResult_t pncclCommShrink(ncclComm_t comm, int *excl, int nexcl, ncclComm_t *newcomm,
                                 ncclConfig_t *config, int flags)
{
    (void)config;
    (void)flags;
    return child(comm, 0, comm ? comm->rank : 0, excl, nexcl, newcomm, "k");
}
API ncclResult_t ncclCommShrink(ncclComm_t comm, int *excl, int nexcl, ncclComm_t *newcomm,
                                ncclConfig_t *config, int flags) ALIAS(ncclCommShrink);

static ncclResult_t release(ncclComm_t comm)
{
    if (!comm)
        return ncclInvalidArgument;
    drain_jobs();
    size_t bytes = sizeof(struct shm) + (size_t)comm->nranks * FAKE_SLOT +
                   (size_t)FAKE_MAX_RANKS * FAKE_MAX_RANKS * mail_slot();
    barrier(comm);
    if (comm->rank == 0) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir(), comm->name);
        unlink(path);
    }
    munmap(comm->s, bytes);
    free(comm);
    return ncclSuccess;
}

API ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    return comm ? ncclSuccess : ncclInvalidArgument;
}
API ncclResult_t ncclCommFinalize(ncclComm_t comm) ALIAS(ncclCommFinalize);
API ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    return release(comm);
}
API ncclResult_t ncclCommDestroy(ncclComm_t comm) ALIAS(ncclCommDestroy);
API ncclResult_t pncclCommAbort(ncclComm_t comm)
{
    return release(comm);
}
API ncclResult_t ncclCommAbort(ncclComm_t comm) ALIAS(ncclCommAbort);

API ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
    if (!comm || !err)
        return ncclInvalidArgument;
    /* A non-blocking communicator is "initialising" until asked once. */
    *err = comm->blocking_pending ? ncclInProgress : ncclSuccess;
    comm->blocking_pending = 0;
    if (getenv("FAKE_NCCL_ASYNC_ERROR"))
        *err = ncclRemoteError;
    return ncclSuccess;
}
API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
    ALIAS(ncclCommGetAsyncError);

API ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
    if (!comm || !count)
        return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}
API ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) ALIAS(ncclCommCount);
API ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!comm || !rank)
        return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}
API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) ALIAS(ncclCommUserRank);
API ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *dev)
{
    if (!comm || !dev)
        return ncclInvalidArgument;
    *dev = comm->dev;
    return ncclSuccess;
}
API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *dev) ALIAS(ncclCommCuDevice);

/*
 * The generic collective: every member deposits `in` bytes into its slot, then builds its output
 * from the slots.  kind: 0 allreduce, 1 broadcast, 2 reduce, 3 allgather, 4 reduce-scatter,
 * 5 alltoall, 6 gather, 7 scatter.  count as nccl.h defines it for each.
 */
static ncclResult_t coll(int kind, const void *send, void *recv, size_t count, int t, int root,
                         ncclComm_t c)
{
    if (!on_progress_thread)
        log_coll(kind, c, count, t);
    if (!c || t < 0 || t >= 12 || (root < 0 && (kind == 1 || kind == 2 || kind >= 6)) ||
        root >= c->nranks)
        return ncclInvalidArgument;
    size_t n = (size_t)c->nranks, e = count * tsize[t];
    size_t in = (kind == 4 || kind == 5 || (kind == 7 && c->rank == root)) ? e * n : e;
    if (in > FAKE_SLOT || ((kind == 3 || kind == 6) && e * n > FAKE_SLOT))
        return ncclInvalidArgument;
    unsigned char *mine = c->slots + (size_t)c->rank * FAKE_SLOT;
    if (in && send)
        memcpy(mine, send, in);
    barrier(c);
    unsigned char *out = recv;
    switch (kind) {
    case 0: /* allreduce */
    case 2: /* reduce */
        if (kind == 2 && c->rank != root)
            break;
        memcpy(out, c->slots, e);
        for (size_t r = 1; r < n; r++)
            sum_into(out, c->slots + r * FAKE_SLOT, count, t);
        break;
    case 1:
        memcpy(out, c->slots + (size_t)root * FAKE_SLOT, e);
        break;
    case 3:
    case 6:
        if (kind == 6 && c->rank != root)
            break;
        for (size_t r = 0; r < n; r++)
            memcpy(out + r * e, c->slots + r * FAKE_SLOT, e);
        break;
    case 4:
        memcpy(out, c->slots + (size_t)c->rank * e, e);
        for (size_t r = 1; r < n; r++)
            sum_into(out, c->slots + r * FAKE_SLOT + (size_t)c->rank * e, count, t);
        break;
    case 5:
        for (size_t r = 0; r < n; r++)
            memcpy(out + r * e, c->slots + r * FAKE_SLOT + (size_t)c->rank * e, e);
        break;
    case 7:
        memcpy(out, c->slots + (size_t)root * FAKE_SLOT + (size_t)c->rank * e, e);
        break;
    }
    barrier(c);
    return ncclSuccess;
}

#define COLL(Name, kind_, params, send_, recv_, n_, t_, root_, call)                               \
    API ncclResult_t pnccl##Name params                                                            \
    {                                                                                              \
        static const char kernel_[] = "_Z24ncclDevKernel_" #Name "P11ncclDevComm";                 \
        if (enqueue(kind_, kernel_, send_, recv_, n_, (int)(t_), root_, c, st)) {                  \
            log_coll(kind_, c, n_, (int)(t_));                                                     \
            return ncclSuccess;                                                                    \
        }                                                                                          \
        gpu_launch(kernel_, st);                                                                   \
        return call;                                                                               \
    }                                                                                              \
    API ncclResult_t nccl##Name params ALIAS(nccl##Name);

COLL(AllReduce, 0,
     (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
      cudaStream_t st),
     s, r, n, t, 0, ((void)op, coll(0, s, r, n, (int)t, 0, c)))
COLL(Broadcast, 1,
     (const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st),
     s, r, n, t, root, (coll(1, s, r, n, (int)t, root, c)))
COLL(Bcast, 1, (void *b, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st), b, b,
     n, t, root, (coll(1, b, b, n, (int)t, root, c)))
COLL(Reduce, 2,
     (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c,
      cudaStream_t st),
     s, r, n, t, root, ((void)op, coll(2, s, r, n, (int)t, root, c)))
COLL(AllGather, 3,
     (const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st), s, r, n,
     t, 0, (coll(3, s, r, n, (int)t, 0, c)))
COLL(ReduceScatter, 4,
     (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
      cudaStream_t st),
     s, r, n, t, 0, ((void)op, coll(4, s, r, n, (int)t, 0, c)))
COLL(AlltoAll, 5,
     (const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st), s, r, n,
     t, 0, (coll(5, s, r, n, (int)t, 0, c)))
COLL(Gather, 6,
     (const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st),
     s, r, n, t, root, (coll(6, s, r, n, (int)t, root, c)))
COLL(Scatter, 7,
     (const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st),
     s, r, n, t, root, (coll(7, s, r, n, (int)t, root, c)))

/* Point-to-point through mailboxes: a send waits until its mailbox is empty, deposits and goes
 * on; a receive waits for its mailbox to fill, copies and empties it. */
static ncclResult_t do_p2p(const struct p2p *p)
{
    struct ncclComm *c = p->comm;
    if (p->bytes > mail_slot())
        return ncclInvalidArgument;
    if (p->send) {
        _Atomic uint64_t *m = &c->s->mbox[c->rank][p->peer];
        while (atomic_load(m) != 0)
            sched_yield();
        memcpy(mail_at(c, c->rank, p->peer), p->buf, p->bytes);
        atomic_store(m, p->bytes + 1);
    } else {
        _Atomic uint64_t *m = &c->s->mbox[p->peer][c->rank];
        while (atomic_load(m) == 0)
            sched_yield();
        memcpy(p->buf, mail_at(c, p->peer, c->rank), p->bytes);
        atomic_store(m, 0);
    }
    return ncclSuccess;
}

static ncclResult_t p2p(int send, void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c)
{
    if (!c || (int)t < 0 || (int)t >= 12 || peer < 0 || peer >= c->nranks)
        return ncclInvalidArgument;
    log_call(send ? "Send" : "Recv", c, count, (int)t, peer);
    struct p2p p = {send, buf, count * tsize[t], peer, c};
    if (group_depth == 0)
        return do_p2p(&p);
    if (npend == (int)(sizeof pend / sizeof pend[0]))
        return ncclInvalidUsage;
    pend[npend++] = p;
    return ncclSuccess;
}

API ncclResult_t pncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                           cudaStream_t st)
{
    gpu_launch("_Z24ncclDevKernel_SendRecvP11ncclDevComm", st);
    return p2p(1, (void *)s, n, t, peer, c);
}
API ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                          cudaStream_t st) ALIAS(ncclSend);
API ncclResult_t pncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                           cudaStream_t st)
{
    gpu_launch("_Z24ncclDevKernel_SendRecvP11ncclDevComm", st);
    return p2p(0, r, n, t, peer, c);
}
API ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                          cudaStream_t st) ALIAS(ncclRecv);

API ncclResult_t pncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}
API ncclResult_t ncclGroupStart(void) ALIAS(ncclGroupStart);

/* Sends first (they never wait for a receive), then receives. */
API ncclResult_t pncclGroupEnd(void)
{
    if (group_depth == 0)
        return ncclInvalidUsage;
    if (--group_depth)
        return ncclSuccess;
    const char *k = group_kernel;
    group_kernel = NULL;
    if (k)
        gpu_launch(k, group_stream);
    ncclResult_t rc = ncclSuccess;
    for (int pass = 1; pass >= 0; pass--)
        for (int i = 0; i < npend; i++)
            if (pend[i].send == pass && rc == ncclSuccess)
                rc = do_p2p(&pend[i]);
    npend = 0;
    return rc;
}
API ncclResult_t ncclGroupEnd(void) ALIAS(ncclGroupEnd);
