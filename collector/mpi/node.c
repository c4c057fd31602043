/*
 * One snapshot per node: the first rank of each host (by host name, the name the trace headers
 * carry) starts a helper process, `commscope node-snapshot PREFIX`, which records the node's port
 * counters, saves its topology (hwloc XML, or a copy of COMMSCOPE_TOPOLOGY) and, when the job ends,
 * records the counters again.  At MPI_Finalize rank 0 collects each node's files into
 * RUN_DIR/topology/HOST.xml and HOST.ports.
 *
 * The helper is a separate process so hwloc discovery (which may load CUDA or NVML plugins) never
 * runs inside the program, and it works while the program runs.  Every wait on it is bounded
 * (COMMSCOPE_NODE_TIMEOUT seconds at the end, default 10; 3 s for its first counters at the
 * start); a helper that is missing, fails or is late costs a warning and the node's snapshot,
 * nothing else.  COMMSCOPE_NODE_SNAPSHOT=0 turns the whole thing off.
 *
 * Protocol: the helper's stdin is a pipe the rank closes at MPI_Finalize (end of job); the helper
 * writes "ready\n" on stdout once the counters before the run are saved and "done\n" when
 * everything is written.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

extern char **environ;

#define TAG_NODE 3
#define READY_TIMEOUT_MS 3000
#define DEFAULT_TIMEOUT_S 10
#define MAX_FILE (64u << 20)

static const char *const suffix[2] = {".xml", ".ports"};

static pid_t helper = -1;
static int to_helper = -1, from_helper = -1; /* pipe ends: the helper's stdin and stdout */
static char prefix[PATH_MAX];
static char my_host[CS_HOST_MAX];
static int leader;

static uint64_t host_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int enabled(void)
{
    const char *v = getenv("COMMSCOPE_NODE_SNAPSHOT");
    return !(v && (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") ||
                   !strcasecmp(v, "off")));
}

/* The helper: $COMMSCOPE_NODE_HELPER, else ../bin/commscope beside libcommscope.so (the core
 * library: this one may be a family's build in a folder of its own, lib/mpich/). */
static int helper_path(char *out, size_t cap)
{
    const char *e = getenv("COMMSCOPE_NODE_HELPER");
    if (e && *e) {
        snprintf(out, cap, "%s", e);
        return 0;
    }
    Dl_info info;
    if (!dladdr((void *)&cs_now, &info) || !info.dli_fname)
        return -1;
    char lib[PATH_MAX];
    snprintf(lib, sizeof lib, "%s", info.dli_fname);
    char *slash = strrchr(lib, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    if ((size_t)snprintf(out, cap, "%s/../bin/commscope", lib) >= cap)
        return -1;
    return 0;
}

/* Read one line ("ready" / "done") from the helper within ms milliseconds.  1 got it, 0 not. */
static int await(const char *word, int ms)
{
    char buf[16];
    size_t n = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = from_helper, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        ssize_t k = read(from_helper, buf + n, 1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return 0; /* the helper closed its stdout: it ended without saying it */
        if (buf[n] == '\n') {
            buf[n] = '\0';
            if (!strcmp(buf, word))
                return 1;
            n = 0;
        } else if (++n >= sizeof buf - 1) {
            n = 0;
        }
    }
}

static void spawn_helper(void)
{
    char path[PATH_MAX];
    const char *trace = cs_trace_path();
    if (helper_path(path, sizeof path) != 0 || !trace || !trace[0]) {
        cs_warn("cannot locate the commscope helper for the node snapshot; set "
                "COMMSCOPE_NODE_HELPER to the commscope executable");
        return;
    }
    if (access(path, X_OK) != 0) {
        cs_warn("node snapshot helper %s: %s; this node's topology is not recorded", path,
                strerror(errno));
        return;
    }
    char dir[PATH_MAX - 32];
    snprintf(dir, sizeof dir, "%s", trace);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    snprintf(prefix, sizeof prefix, "%s/.node-%ld", dir, (long)getpid());
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0)
        return;
    if (pipe2(out, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        return;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    char *argv[] = {path, "node-snapshot", prefix, NULL};
    /* The helper is not an MPI program: no preloaded collector in it. */
    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **env = calloc(ne + 1, sizeof *env);
    pid_t pid = -1;
    int rc = ENOMEM;
    if (env) {
        size_t k = 0;
        for (size_t i = 0; i < ne; i++)
            if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
                env[k++] = environ[i];
        /* Its own process group, so a late helper is killed with anything it started (which
         * would otherwise hold the job's stderr open and keep the launcher waiting). */
        posix_spawnattr_t at;
        posix_spawnattr_init(&at);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&at, 0);
        rc = posix_spawn(&pid, path, &fa, &at, argv, env);
        posix_spawnattr_destroy(&at);
    }
    free(env);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
        cs_warn("cannot start the node snapshot helper %s: %s", path, strerror(rc));
        close(in[1]);
        close(out[0]);
        return;
    }
    helper = pid;
    to_helper = in[1];
    from_helper = out[0];
    /* The counters before the run must be read before the program's traffic starts. */
    if (!await("ready", READY_TIMEOUT_MS))
        cs_warn("node snapshot helper did not record the port counters within %d ms; going on",
                READY_TIMEOUT_MS);
}

void cs__node_start(MPI_Comm priv, int rank, int size, int opened)
{
    if (gethostname(my_host, sizeof my_host - 1) != 0)
        snprintf(my_host, sizeof my_host, "unknown-host");
    uint64_t mine = host_hash(my_host);
    uint64_t *all = calloc((size_t)size, sizeof *all);
    uint64_t dummy[1];
    /* Every rank takes part, whatever happened locally, so nobody hangs. */
    int rc =
        PMPI_Allgather(&mine, 1, MPI_UINT64_T, all ? all : dummy, all ? 1 : 0, MPI_UINT64_T, priv);
    leader = 0;
    if (rc == MPI_SUCCESS && all) {
        leader = 1;
        for (int r = 0; r < rank; r++)
            if (all[r] == mine)
                leader = 0;
    }
    free(all);
    (void)size;
    if (leader && opened && enabled())
        spawn_helper();
}

/* Stop the helper (bounded wait) and read its files.  Returns lengths in len, data in buf. */
static void stop_helper(char *buf[2], int64_t len[2])
{
    if (helper < 0)
        return;
    close(to_helper);
    int limit = DEFAULT_TIMEOUT_S;
    const char *e = getenv("COMMSCOPE_NODE_TIMEOUT");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end == '\0' && v >= 0 && v <= 3600)
            limit = (int)v;
        else
            cs_warn("COMMSCOPE_NODE_TIMEOUT=%s is not a number of seconds in 0..3600; using %d", e,
                    DEFAULT_TIMEOUT_S);
    }
    int done = await("done", limit * 1000);
    close(from_helper);
    if (!done) {
        kill(-helper, SIGKILL);
        cs_warn("node snapshot of %s did not finish within %d s (COMMSCOPE_NODE_TIMEOUT); its "
                "topology and port counters are not recorded",
                my_host, limit);
    }
    /* The program may have reaped the helper itself (waitpid(-1)); ECHILD is fine then. */
    while (waitpid(helper, NULL, 0) < 0 && errno == EINTR)
        ;
    helper = -1;
    for (int i = 0; i < 2; i++) {
        char path[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s%s", prefix, suffix[i]);
        if (done) {
            FILE *f = fopen(path, "rbe");
            struct stat sb;
            if (f && fstat(fileno(f), &sb) == 0 && sb.st_size > 0 &&
                (uint64_t)sb.st_size <= MAX_FILE && (buf[i] = malloc((size_t)sb.st_size))) {
                if (fread(buf[i], 1, (size_t)sb.st_size, f) == (size_t)sb.st_size)
                    len[i] = sb.st_size;
                else {
                    free(buf[i]);
                    buf[i] = NULL;
                }
            }
            if (f)
                fclose(f);
        }
        unlink(path);
    }
}

/* Rank 0: open RUN_DIR/topology/.HOST.SUFFIX.tmp; path gets the final name.  -1 on failure. */
static int open_node_file(const char *host, int i, char *path, char *tmp, size_t cap)
{
    char dir[PATH_MAX], safe[CS_HOST_MAX];
    /* Host names are [A-Za-z0-9.-]; anything else would not make a safe file name. */
    size_t k = 0;
    for (const char *p = host; *p && k + 1 < sizeof safe; p++, k++)
        safe[k] = (char)((*p == '/' || (*p == '.' && k == 0)) ? '_' : *p);
    safe[k] = '\0';
    snprintf(dir, sizeof dir, "%s/topology", cs_run_dir());
    mkdir(cs_run_dir(), 0755);
    mkdir(dir, 0755);
    snprintf(path, cap, "%s/%s%s", dir, safe, suffix[i]);
    snprintf(tmp, cap, "%s/.%s%s.tmp", dir, safe, suffix[i]);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        cs_warn("could not write %s: %s", tmp, strerror(errno));
    return fd;
}

static void close_node_file(int fd, int ok, const char *path, const char *tmp)
{
    if (fd < 0)
        return;
    if (close(fd) != 0)
        ok = 0;
    if (ok && rename(tmp, path) == 0)
        return;
    unlink(tmp);
    cs_warn("could not write %s", path);
}

struct node_msg {
    int64_t len[2];
    char host[CS_HOST_MAX];
};

/*
 * Collective over priv: every node's files go to rank 0 in chunks of CHUNK bytes (so rank 0
 * needs one chunk of memory however large a file is), and rank 0 writes them.
 */
void cs__node_finish(MPI_Comm priv, int rank, int size)
{
    enum { CHUNK = 1 << 20 };
    struct node_msg m;
    memset(&m, 0, sizeof m);
    snprintf(m.host, sizeof m.host, "%s", my_host);
    char *buf[2] = {NULL, NULL};
    if (leader)
        stop_helper(buf, m.len);
    struct node_msg *all = rank == 0 ? calloc((size_t)size, sizeof *all) : NULL;
    char *chunk = rank == 0 ? malloc(CHUNK) : NULL;
    int rc = PMPI_Gather(&m, (int)sizeof m, MPI_BYTE, all, (int)sizeof m, MPI_BYTE, 0, priv);
    if (rank == 0 && (!all || !chunk || rc != MPI_SUCCESS))
        cs_warn("could not gather the node snapshots; the run has no topology");
    /* Rank 0 says whether it can take the files, so nobody sends into the void. */
    int go = rank == 0 ? (all && chunk && rc == MPI_SUCCESS) : 0;
    if (PMPI_Bcast(&go, 1, MPI_INT, 0, priv) != MPI_SUCCESS)
        go = 0;
    if (go && rank == 0) {
        for (int r = 0; r < size; r++) {
            for (int i = 0; i < 2; i++) {
                int64_t n = all[r].len[i];
                if (n <= 0)
                    continue;
                all[r].host[CS_HOST_MAX - 1] = '\0';
                char path[PATH_MAX + 128], tmp[PATH_MAX + 128];
                int fd = open_node_file(all[r].host, i, path, tmp, sizeof path);
                int ok = fd >= 0;
                for (int64_t off = 0; off < n; off += CHUNK) {
                    int len = (int)(n - off < CHUNK ? n - off : CHUNK);
                    const char *src = r == 0 ? buf[i] + off : chunk;
                    if (r != 0 && PMPI_Recv(chunk, len, MPI_BYTE, r, TAG_NODE, priv,
                                            MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                        ok = 0;
                        break;
                    }
                    /* cs_write_all: a file-size limit fails the write, not the rank. */
                    if (ok && cs_write_all(fd, src, (size_t)len) != 0)
                        ok = 0;
                }
                close_node_file(fd, ok, path, tmp);
            }
        }
    } else if (go) {
        for (int i = 0; i < 2; i++)
            for (int64_t off = 0; off < m.len[i]; off += CHUNK) {
                int len = (int)(m.len[i] - off < CHUNK ? m.len[i] - off : CHUNK);
                if (PMPI_Send(buf[i] + off, len, MPI_BYTE, 0, TAG_NODE, priv) != MPI_SUCCESS)
                    break;
            }
    }
    free(chunk);
    free(all);
    free(buf[0]);
    free(buf[1]);
}
