/*
 * Start-up of the NCCL front end: find the real NCCL functions, start tracing in processes
 * without MPI (rank from the environment, core/ident.c), close the trace at exit, and detect an
 * NCCL that cannot be interposed (statically linked into the program or into another library).
 *
 * Tracing starts at the first NCCL call (or at load time when NCCL cannot be interposed), never
 * in processes that make none: shells, launchers, dataloader workers stay untouched.  In an MPI
 * program MPI_Init usually comes first and opens the trace; the NCCL calls then go into it.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commscope/root.h"

#include "../core/front.h"
#include "../core/hot.h"
#include "../cuda/gpu.h"
#include "internal.h"

struct cs__nccl_real cs__nreal;
int cs__nccl_inited;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int opened_here;      /* this front end opened the trace (close it at exit) */
static char static_obj[256]; /* object holding a non-interposable ncclAllReduce, or "" */
static uint32_t nccl_version;

/* Nonzero when address a lies in libcommscope.so itself. */
static int ours(const void *a)
{
    Dl_info mine, it;
    if (!dladdr((const void *)&cs__nccl_init, &mine) || !dladdr(a, &it))
        return 0;
    return mine.dli_fbase == it.dli_fbase;
}

/* The real function: pncclName, else ncclName, after us in the search order or in an already
 * loaded libnccl.so.2 (a library opened with RTLD_LOCAL is not in the global scope). */
static void *find(const char *name)
{
    char p[96];
    snprintf(p, sizeof p, "p%s", name);
    void *f = dlsym(RTLD_NEXT, p);
    if (!f || ours(f))
        f = dlsym(RTLD_NEXT, name);
    if (!f || ours(f)) {
        f = NULL;
        void *lib = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
        if (lib) {
            f = dlsym(lib, p);
            if (!f || ours(f))
                f = dlsym(lib, name);
            if (f && ours(f))
                f = NULL;
            dlclose(lib);
        }
    }
    return f;
}

static void resolve(void)
{
#define CS_NCCL(fam, name, op, params, args) *(void **)&cs__nreal.name = find("nccl" #name);
#define CS_NCCL_Q(name, params, args) *(void **)&cs__nreal.name = find("nccl" #name);
#include "calls.def"
#include "queries.def"
#undef CS_NCCL
#undef CS_NCCL_Q
    int v = 0;
    if (cs__nreal.GetVersion && cs__nreal.GetVersion(&v) == ncclSuccess && v > 0)
        nccl_version = (uint32_t)v;
}

ncclResult_t cs__nccl_missing(const char *name)
{
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
        cs_warn("%s was called but no NCCL library provides it (neither p%s nor %s after "
                "libcommscope.so); returning ncclSystemError",
                name, name, name);
        cs__trace_gpu_note("%s: no real NCCL function found", name);
    }
    return ncclSystemError;
}

/* The root service (collector/core/root.c): where, and whether the start-up session worked. */
static struct {
    int ok; /* clock sample 0 came from the service: use it at exit too */
    char host[256], port[16];
    struct cs__ident id;
    uint64_t run_id;
} root;

/* Clock sample 0: against the root service when one is configured and answers, else against the
 * host's CLOCK_REALTIME, with one warning that says what that means. */
static void root_start(const struct cs__ident *id, uint64_t run_id)
{
    struct cs_clock_sample s;
    char src[320] = "", err[512] = "";
    root.id = *id;
    root.run_id = run_id;
    int where =
        cs__root_where(root.host, sizeof root.host, root.port, sizeof root.port, src, sizeof src);
    if (where == 1) {
        uint32_t rounds = 0;
        int fd = cs__root_open(root.host, root.port, CS_ROOT_START, id->rank, id->size, run_id,
                               cs_trace_path(), &rounds, err, sizeof err);
        if (fd >= 0) {
            if (cs__root_clock(fd, rounds, &s) == 0)
                root.ok = 1;
            else
                snprintf(err, sizeof err, "the clock rounds with %s port %s failed", root.host,
                         root.port);
            close(fd);
        }
    }
    if (root.ok) {
        cs__trace_set_flags(CS_FLAG_CLOCK_ROOT);
    } else {
        cs__clock_sample_realtime(&s);
        if (where == 1)
            cs_warn("root service (%s) unreachable: %s; this rank's trace stays at %s and its "
                    "clock is aligned through this host's CLOCK_REALTIME (analyse a directory "
                    "holding every rank's trace)",
                    src, err, cs_trace_path());
        else if (where == 0 && strcmp(cs_local_dir(), cs_run_dir()) != 0)
            cs_warn("no root service (COMMSCOPE_ROOT unset, no MASTER_ADDR/MASTER_PORT): this "
                    "rank's trace stays at %s; clocks are aligned through CLOCK_REALTIME",
                    cs_trace_path());
    }
    cs_trace_set_clock(0, &s);
}

/* Close the trace this front end opened and hand it to the root service; with second_sample,
 * measure the clock again first (not when the first sample was just taken). */
static void finish(int second_sample)
{
    cs__gpu_shutdown();
    if (!opened_here || !cs_trace_header())
        return;
    uint64_t t_fin = cs_now();
    struct cs_clock_sample s;
    char err[512] = "";
    int fd = -1;
    if (root.ok) {
        uint32_t rounds = 0;
        fd = cs__root_open(root.host, root.port, CS_ROOT_FINISH, root.id.rank, root.id.size,
                           root.run_id, cs_trace_path(), &rounds, err, sizeof err);
        /* The service serves its clock rounds before it takes the file. */
        if (fd >= 0 && cs__root_clock(fd, rounds, &s) != 0) {
            snprintf(err, sizeof err, "the clock rounds with %s port %s failed", root.host,
                     root.port);
            close(fd);
            fd = -1;
        }
        /* Sample 0 was taken against the service: a sample against anything else would not
         * compare, so the exit sample is left out (the analysis uses the start offset alone). */
        if (fd < 0)
            memset(&s, 0, sizeof s);
    } else {
        cs__clock_sample_realtime(&s);
    }
    if (!second_sample)
        memset(&s, 0, sizeof s);
    cs_trace_set_clock(1, &s);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s", cs_trace_path());
    uint64_t nonce = cs_trace_header()->nonce;
    cs_trace_close(t_fin);
    if (fd >= 0 && cs__root_send_file(fd, path, nonce, 0, err, sizeof err) != 0) {
        close(fd);
        fd = -1;
    } else if (fd >= 0) {
        close(fd);
        return;
    }
    if (root.ok)
        cs_warn("could not hand the trace to the root service (%s port %s) at exit: %s; it "
                "stays at %s",
                root.host, root.port, err, path);
}

static void at_exit(void)
{
    finish(1);
}

/* Called by the core whenever a trace opens (MPI_Init or here): what this front end knows. */
static void on_open(void)
{
    if (nccl_version)
        cs__trace_set_nccl_version(nccl_version);
    if (static_obj[0]) {
        cs__trace_set_flags(CS_FLAG_NCCL_STATIC);
        cs__trace_gpu_note("NCCL in %s cannot be interposed (statically linked): NCCL "
                           "communication is NOT recorded",
                           static_obj);
    }
}

/* Open a trace for a process without MPI.  Returns 1 when a trace is open afterwards. */
static int start_without_mpi(void)
{
    if (__atomic_load_n(&cs_active, __ATOMIC_ACQUIRE) || cs_trace_header())
        return 1;
    struct cs__ident id;
    cs__ident_from_env(&id);
    struct cs_trace_params p = {.rank = id.rank,
                                .world_size = id.size,
                                .thread_level = 0,
                                .run_id = cs__ident_run_id(id.size),
                                .t_init = cs_now()};
    if (cs_trace_open(&p) != 0)
        return 0;
    opened_here = 1;
    cs__trace_set_flags(CS_FLAG_NO_MPI);
    cs__trace_set_identity(id.source, id.local_rank);
    /* After the open, so a test clock skew of this rank (confirmed by the open) applies. */
    root_start(&id, p.run_id);
    /* The program's time starts now: the clock session is the collector's. */
    cs_trace_set_t_init(cs_now());
    atexit(at_exit);
    return 1;
}

/* ---- processes that made no MPI or NCCL call ---------------------------------------------- */

static uint64_t t_loaded; /* this library's load, close to the program's start */

/* 1 when the parent process's environment holds name=value (then this process is a worker the
 * rank started, a shell's child, a dataloader: the rank is its parent). */
static int parent_has(const char *name, const char *value)
{
    char path[64], want[256];
    snprintf(path, sizeof path, "/proc/%ld/environ", (long)getppid());
    int n = snprintf(want, sizeof want, "%s=%s", name, value);
    if (n <= 0 || (size_t)n >= sizeof want)
        return 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char entry[4096];
    int found = 0;
    size_t k = 0;
    for (int c; !found && (c = getc(f)) != EOF;) {
        if (c) {
            if (k + 1 < sizeof entry)
                entry[k++] = (char)c;
            continue;
        }
        entry[k] = '\0';
        found = strcmp(entry, want) == 0;
        k = 0;
    }
    fclose(f);
    return found;
}

/* What the process shows of communication libraries commscope does not intercept (its loaded
 * libraries), as a sentence into out. */
static void seen_libraries(char *out, size_t cap)
{
    static const struct {
        const char *lib, *what;
    } known[] = {
        {"libgloo", "gloo (torch.distributed's CPU backend) is loaded"},
        {"libtorch_cpu.so", "torch is loaded"},
        {"libucc.so", "UCC is loaded"},
        {"libmpi", "an MPI library is loaded, but no MPI_Init was traced"},
    };
    int hit[sizeof known / sizeof known[0]] = {0};
    FILE *f = fopen("/proc/self/maps", "re");
    char line[1024];
    while (f && fgets(line, sizeof line, f))
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strstr(line, known[i].lib))
                hit[i] = 1;
    if (f)
        fclose(f);
    size_t k = (size_t)snprintf(out, cap, "the process made no MPI or NCCL call");
    const char *sep = "; ";
    for (size_t i = 0; i < sizeof known / sizeof known[0] && k < cap; i++)
        if (hit[i]) {
            k += (size_t)snprintf(out + k, cap - k, "%s%s", sep, known[i].what);
            sep = ", ";
        }
}

/*
 * At exit of a rank of a job without MPI (torchrun, srun) that never opened a trace: leave one
 * that says so, with the rank's wall time, so the analysis can tell the job communicated through
 * something it does not see (DESIGN: inert elsewhere, so only processes that are ranks by their
 * launcher's variables and whose parent is not the same rank, and never over another trace).
 */
static void no_calls_at_exit(void)
{
    if (__atomic_load_n(&cs_trace_generation, __ATOMIC_ACQUIRE) != 0 || cs_trace_header())
        return; /* a trace was opened (and maybe closed) in this process */
    struct cs__ident id;
    cs__ident_from_env(&id);
    if (id.source != CS_RANKSRC_TORCH && id.source != CS_RANKSRC_SLURM)
        return;
    const char *v = getenv(id.rank_var);
    if (!v || parent_has(id.rank_var, v))
        return;
    struct cs_trace_params p = {.rank = id.rank,
                                .world_size = id.size,
                                .run_id = cs__ident_run_id(id.size),
                                .t_init = t_loaded,
                                .exclusive = 1};
    if (cs_trace_open(&p) != 0)
        return;
    opened_here = 1;
    char note[256];
    seen_libraries(note, sizeof note);
    cs__trace_set_note(note);
    cs__trace_set_flags(CS_FLAG_NO_MPI | CS_FLAG_NO_CALLS);
    cs__trace_set_identity(id.source, id.local_rank);
    root_start(&id, p.run_id);
    cs_trace_set_t_init(t_loaded);
    finish(0); /* the start sample was just taken: a second one would say nothing */
}

__attribute__((constructor)) static void watch_for_no_calls(void)
{
    /* Only under commscope run (or a user who set up the run directory): never elsewhere. */
    const char *d = getenv("COMMSCOPE_DIR");
    if (!d || !*d)
        return;
    t_loaded = cs_now();
    atexit(no_calls_at_exit);
}

static void init_once(void)
{
    resolve();
    cs__trace_open_hook = on_open;
    cs__trace_close_hook = cs__gpu_shutdown;
    if (cs_trace_header())
        on_open();
    else
        start_without_mpi();
    cs__gpu_init();
    __atomic_store_n(&cs__nccl_inited, 1, __ATOMIC_RELEASE);
}

void cs__nccl_init(void)
{
    pthread_once(&once, init_once);
}

/*
 * At load: is there an ncclAllReduce that is not ours, and not in a libnccl we forward to?  Then
 * the program's NCCL calls never reach the wrappers (NCCL linked into the executable or bundled
 * in another library).  Say so once, and make sure a trace exists that says so too: without MPI
 * (no MPI_Init to open one later) open it now.
 */
__attribute__((constructor)) static void detect_static(void)
{
    void *def = dlsym(RTLD_DEFAULT, "ncclAllReduce");
    Dl_info it;
    if (!def || ours(def) || !dladdr(def, &it))
        return;
    const char *obj = it.dli_fname && it.dli_fname[0] ? it.dli_fname : "the executable";
    const char *base = strrchr(obj, '/');
    base = base ? base + 1 : obj;
    if (strncmp(base, "libnccl", 7) == 0)
        return; /* loaded before us (not preloaded): not interposed, but the real library */
    snprintf(static_obj, sizeof static_obj, "%s", obj);
    cs_warn("the program's NCCL (ncclAllReduce in %s) is linked in statically and cannot be "
            "intercepted: its NCCL communication will NOT be recorded; link NCCL dynamically "
            "(libnccl.so.2) to trace it",
            static_obj);
    if (dlsym(RTLD_DEFAULT, "MPI_Init"))
        return; /* MPI_Init opens the trace; on_open marks it */
    cs__nccl_init();
}
