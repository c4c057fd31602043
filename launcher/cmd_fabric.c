/*
 * `commscope fabric [OPTIONS] -- LAUNCHER ARGS...`: run the built-in MPI benchmark (cs_fabric,
 * next to this executable) with the user's launcher (mpirun, srun), read its result lines from
 * the job's stdout, and judge every node and link.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fabric.h"
#include "internal.h"

enum { EXIT_INCOMPLETE = 1, EXIT_SLOW = 3 };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: commscope fabric [OPTIONS] -- LAUNCHER [LAUNCHER ARGS...]\n\n"
            "Run commscope's MPI benchmark across the allocation with LAUNCHER (mpirun -np N\n"
            "--map-by ppr:1:node ..., srun ...): node-to-node latency and bandwidth for every\n"
            "pair of nodes (sampled above 64 nodes) and a sweep of all-reduce, all-gather,\n"
            "reduce-scatter, all-to-all and send/recv; then a verdict per node and link (ok\n"
            "or slow, with measured vs expected vs median) and a ranked list of suspects.\n\n"
            "  --json FILE             write commscope-fabric/1 JSON to FILE ('-': stdout)\n"
            "  --raw FILE              keep the benchmark's result lines in FILE\n"
            "  --min-bytes N           smallest collective size (default 8)\n"
            "  --max-bytes N           largest collective size (default 64M; 0: no sweep)\n"
            "  --step-factor N         sweep step (default 2)\n"
            "  --pair-bytes N          message size of the node-to-node test (default 4M)\n"
            "  --pair-iters N          messages per direction and pair (default 8)\n"
            "  --max-rounds N          rounds of pairs above 64 nodes (default 16)\n"
            "  --nccl auto|off         also sweep the collectives over NCCL, one GPU per\n"
            "                          rank, where every rank has a GPU and libnccl\n"
            "                          (default auto)\n"
            "  --peer-fraction F       slow below F x the peers' median (default 0.75)\n"
            "  --capacity-fraction F   slow below F x the capacity model (default 0.5)\n"
            "  -q, --quiet             no text report\n"
            "  -h, --help              this text\n"
            "  -o, --output DIR        with --capture: the run directory of the benchmark's\n"
            "                          traces and wire files (default ./commscope-fabric-\n"
            "                          YYYYmmdd-HHMMSS)\n"
            "%s\n"
            "Sizes take K, M, G suffixes.  The benchmark is $COMMSCOPE_FABRIC_BENCH or\n"
            "cs_fabric next to the commscope executable; it must be reachable on every node.\n"
            "With --capture the benchmark runs under `commscope run --capture` and every\n"
            "link's verdict gets the wire evidence of its pair test (docs/wire.md).\n\n"
            "examples:\n"
            "  commscope fabric -- mpirun -np 16 --map-by ppr:1:node --hostfile hosts\n"
            "  commscope fabric --json fabric.json --max-bytes 16M -- \\\n"
            "                   srun -N 16 --ntasks-per-node 1\n"
            "  commscope fabric --capture auto -o fab -- mpirun -np 4 --map-by ppr:1:node\n\n"
            "exit status: 0 all ok, 3 a node or link is slow, 1 the job failed or did not\n"
            "finish (what it measured is still reported), 2 usage error, 127 launcher not\n"
            "found.\n",
            cs__capture_usage());
}

/* Lines of one of the job's pipes, read as they come. */
struct linebuf {
    int fd; /* -1 once closed */
    char *buf;
    size_t len, cap;
};

/*
 * Read once from b (poll said it is readable) and hand every complete line, NUL-terminated with
 * its newline, to fn; at end of file the rest too, and b->fd is closed and set to -1.
 */
static void drain(struct linebuf *b, void (*fn)(char *line, void *ctx), void *ctx)
{
    if (b->cap - b->len < 4097) {
        char *v = realloc(b->buf, b->cap * 2 + 8192);
        if (!v) {
            close(b->fd);
            b->fd = -1;
            return;
        }
        b->buf = v;
        b->cap = b->cap * 2 + 8192;
    }
    ssize_t n = read(b->fd, b->buf + b->len, b->cap - b->len - 2);
    if (n < 0 && errno == EINTR)
        return;
    int eof = n <= 0;
    if (!eof)
        b->len += (size_t)n;
    size_t start = 0;
    for (size_t i = 0; i < b->len; i++) {
        if (b->buf[i] != '\n')
            continue;
        char keep = b->buf[i + 1];
        b->buf[i + 1] = 0;
        fn(b->buf + start, ctx);
        b->buf[i + 1] = keep;
        start = i + 1;
    }
    memmove(b->buf, b->buf + start, b->len - start);
    b->len -= start;
    if (eof) {
        if (b->len) { /* a last line without newline */
            b->buf[b->len] = '\n';
            b->buf[b->len + 1] = 0;
            fn(b->buf, ctx);
            b->len = 0;
        }
        close(b->fd);
        b->fd = -1;
    }
}

struct sink {
    struct cs_fabric *fab;
    FILE *raw;
};

static void out_line(char *line, void *ctx)
{
    struct sink *k = ctx;
    int r = cs_fabric_feed(k->fab, line);
    if (r == 0)
        fputs(line, stdout);
    else if (k->raw)
        fputs(line, k->raw);
}

static void err_line(char *line, void *ctx)
{
    struct sink *k = ctx;
    fputs(line, stderr);
    cs_fabric_launcher_line(k->fab, line);
}

static int bench_path(char *out, size_t len)
{
    const char *env = getenv("COMMSCOPE_FABRIC_BENCH");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    snprintf(out, len, "%s/cs_fabric", exe);
    return access(out, X_OK);
}

/* With --capture: this executable (to run `commscope run`) and the run directory. */
static int wrap_prefix(const char *out_dir, char *self, char *dir)
{
    ssize_t n = readlink("/proc/self/exe", self, PATH_MAX - 1);
    if (n <= 0) {
        fprintf(stderr, "commscope fabric: cannot find my own executable for --capture: %s\n",
                strerror(errno));
        return -1;
    }
    self[n] = '\0';
    if (out_dir) {
        snprintf(dir, PATH_MAX, "%s", out_dir);
    } else {
        time_t t = time(NULL);
        struct tm tm;
        localtime_r(&t, &tm);
        strftime(dir, PATH_MAX, "commscope-fabric-%Y%m%d-%H%M%S", &tm);
    }
    /* `commscope run` wants an absolute directory for the nodes; make it so here as well. */
    if (dir[0] != '/') {
        char cwd[PATH_MAX], rel[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) {
            fprintf(stderr, "commscope fabric: getcwd: %s\n", strerror(errno));
            return -1;
        }
        snprintf(rel, sizeof rel, "%s", dir);
        if (snprintf(dir, PATH_MAX, "%s/%s", cwd, rel) >= PATH_MAX) {
            fprintf(stderr, "commscope fabric: run directory name too long\n");
            return -1;
        }
    }
    return 0;
}

/*
 * A value the benchmark takes: a size (digits with an optional fraction and a K, M or G suffix)
 * when `size`, else a whole number; both at most 2^40 and above zero unless zero_ok.
 */
static int valid_number(const char *v, int size, int zero_ok)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)v[0]))
        return 0;
    double d = size ? strtod(v, &end) : (double)strtol(v, &end, 10);
    if (size &&
        (*end == 'K' || *end == 'k' || *end == 'M' || *end == 'm' || *end == 'G' || *end == 'g'))
        end++;
    return !errno && *end == '\0' && d <= 1099511627776.0 && (d > 0 || (zero_ok && d == 0));
}

/* Run the benchmark job av, its results into fab (and rawf, when given), the job's own output
 * passed through.  Returns the job's exit status (128 + signal), or -1 (said on stderr). */
static int run_bench(char **av, struct cs_fabric *fab, FILE *rawf)
{
    int fd[2], efd[2];
    if (pipe(fd) < 0 || pipe(efd) < 0) {
        fprintf(stderr, "commscope fabric: pipe: %s\n", strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "commscope fabric: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        cs__restore_child_signals();
        dup2(fd[1], 1);
        dup2(efd[1], 2);
        close(fd[0]);
        close(fd[1]);
        close(efd[0]);
        close(efd[1]);
        execvp(av[0], av);
        fprintf(stderr, "commscope fabric: cannot run '%s': %s\n", av[0], strerror(errno));
        _exit(errno == ENOENT ? CS__EXIT_NOTFOUND : CS__EXIT_NOEXEC);
    }
    close(fd[1]);
    close(efd[1]);
    /* The job's own output passes through; the benchmark's result lines are ours.  Its stderr
     * passes through too, read for the launcher's word on a process that failed. */
    struct linebuf out = {fd[0], NULL, 0, 0}, err = {efd[0], NULL, 0, 0};
    struct sink sink = {fab, rawf};
    while (out.fd >= 0 || err.fd >= 0) {
        struct pollfd pf[2] = {{out.fd, POLLIN, 0}, {err.fd, POLLIN, 0}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[0].revents)
            drain(&out, out_line, &sink);
        if (pf[1].revents)
            drain(&err, err_line, &sink);
    }
    free(out.buf);
    free(err.buf);
    if (out.fd >= 0)
        close(out.fd);
    if (err.fd >= 0)
        close(err.fd);
    if (rawf)
        fclose(rawf);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The exit status of the fabric check (EXIT_SLOW, EXIT_INCOMPLETE or 0), the JSON report
 * written when asked for. */
static int fabric_status(const struct cs_fabric *fab, int job, const char *json)
{
    int status = 0;
    for (size_t k = 0; k < fab->n_nodes; k++)
        status |= !strcmp(fab->nodes[k].status, "slow") ||
                  !strcmp(fab->nodes[k].status, "failed") ||
                  !strcmp(fab->nodes[k].status, "errors");
    for (size_t k = 0; k < fab->n_links; k++)
        status |= !strcmp(fab->links[k].status, "slow");
    status = status ? EXIT_SLOW : 0;
    if (job != 0 || !fab->complete)
        status = EXIT_INCOMPLETE;
    if (json) {
        FILE *f = strcmp(json, "-") ? fopen(json, "w") : stdout;
        if (!f) {
            fprintf(stderr, "commscope fabric: cannot write %s: %s\n", json, strerror(errno));
            status = EXIT_INCOMPLETE;
        } else {
            cs_fabric_write_json(fab, f);
            if (f != stdout && fclose(f) != 0) {
                fprintf(stderr, "commscope fabric: error writing %s\n", json);
                status = EXIT_INCOMPLETE;
            }
        }
    }
    return status;
}

int cs__cmd_fabric(int argc, char **argv)
{
    const char *json = NULL, *raw = NULL;
    const char *pass_names[] = {"--min-bytes",  "--max-bytes",  "--step-factor", "--pair-bytes",
                                "--pair-iters", "--max-rounds", "--nccl"};
    enum { NPASS = sizeof(pass_names) / sizeof(pass_names[0]) };
    const char *pass[NPASS] = {0};
    struct cs_fabric_limits lim;
    cs_fabric_default_limits(&lim);
    int quiet = 0, i;
    struct cs__capture_opts cap = {0};
    const char *out_dir = NULL;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            quiet = 1;
            continue;
        }
        if (a[0] != '-')
            break; /* the launcher, without "--" */
        if (strncmp(a, "--capture", 9) == 0) {
            int used = cs__capture_arg(&cap, argc, argv, i, "fabric");
            if (used < 0)
                return CS__EXIT_USAGE;
            i += used - 1;
            continue;
        }
        int k;
        for (k = 0; k < NPASS && strcmp(a, pass_names[k]); k++)
            ;
        if (k == NPASS && strcmp(a, "--json") && strcmp(a, "--raw") && strcmp(a, "-o") &&
            strcmp(a, "--output") && strcmp(a, "--peer-fraction") &&
            strcmp(a, "--capacity-fraction")) {
            fprintf(stderr,
                    "commscope fabric: unknown option '%s'; see 'commscope fabric --help'\n", a);
            return CS__EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "commscope fabric: %s needs a value; see 'commscope fabric --help'\n",
                    a);
            return CS__EXIT_USAGE;
        }
        const char *val = argv[++i];
        if (k < NPASS)
            pass[k] = val;
        else if (!strcmp(a, "--json"))
            json = val;
        else if (!strcmp(a, "--raw"))
            raw = val;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output"))
            out_dir = val;
        else if (!strcmp(a, "--peer-fraction") || !strcmp(a, "--capacity-fraction")) {
            char *end;
            double v = strtod(val, &end);
            if (*end || !(v > 0 && v <= 1)) {
                fprintf(stderr, "commscope fabric: %s wants a fraction in (0, 1], not '%s'\n", a,
                        val);
                return CS__EXIT_USAGE;
            }
            *(a[2] == 'p' ? &lim.peer_fraction : &lim.capacity_fraction) = v;
        }
    }
    for (int k = 0; k < NPASS - 1; k++)
        if (pass[k] && !valid_number(pass[k], k < 4 && k != 2, k == 1)) {
            fprintf(stderr,
                    "commscope fabric: %s wants %s, not '%s'; see 'commscope fabric --help'\n",
                    pass_names[k],
                    k == 1 ? "a size in bytes >= 0 (K, M or G suffix allowed; 0: no sweep)"
                    : k < 4 && k != 2 ? "a size in bytes > 0 (K, M or G suffix allowed)"
                                      : "a whole number > 0",
                    pass[k]);
            return CS__EXIT_USAGE;
        }
    if (pass[2] && atoi(pass[2]) < 2) {
        fprintf(stderr, "commscope fabric: --step-factor wants a whole number >= 2, not '%s'\n",
                pass[2]);
        return CS__EXIT_USAGE;
    }
    if (pass[NPASS - 1] && strcmp(pass[NPASS - 1], "auto") && strcmp(pass[NPASS - 1], "off")) {
        fprintf(stderr, "commscope fabric: --nccl wants auto or off, not '%s'\n", pass[NPASS - 1]);
        return CS__EXIT_USAGE;
    }
    if (i >= argc) {
        fprintf(stderr, "commscope fabric: no launcher given (commscope fabric -- mpirun -np N "
                        "...); see 'commscope fabric --help'\n");
        return CS__EXIT_USAGE;
    }
    char bench[PATH_MAX + 16];
    if (bench_path(bench, sizeof(bench)) < 0) {
        fprintf(stderr,
                "commscope fabric: benchmark '%s' not found or not executable; set "
                "COMMSCOPE_FABRIC_BENCH\n",
                bench);
        return CS__EXIT_NOTFOUND;
    }
    /* [commscope run ... --] LAUNCHER ARGS... cs_fabric [--option value]... */
    int capture = cap.ifaces || cap.raw || cap.expect;
    char self[PATH_MAX], dir[PATH_MAX];
    if (capture && wrap_prefix(out_dir, self, dir) < 0)
        return 1;
    char **av = calloc((size_t)(argc - i) + 2 + 2 * NPASS + 1 + 20, sizeof(char *));
    if (!av)
        return 1;
    int n = 0;
    if (capture) {
        /* The collector starts and stops the capture on every node and gathers the wire files
         * into dir (docs/wire.md); the benchmark's stdout still comes through. */
        av[n++] = self;
        av[n++] = "run";
        av[n++] = "--no-analyze";
        av[n++] = "--quiet";
        av[n++] = "-o";
        av[n++] = dir;
        static const char *const names[] = {"--capture", "--capture-expect", "--capture-bucket-ms",
                                            "--capture-raw-max"};
        const char *vals[] = {cap.ifaces, cap.expect, cap.bucket_ms, cap.raw_max};
        for (int k = 0; k < 4; k++)
            if (vals[k]) {
                av[n++] = (char *)names[k];
                av[n++] = (char *)vals[k];
            }
        if (cap.raw)
            av[n++] = "--capture-raw";
        av[n++] = "--";
    }
    for (int k = i; k < argc; k++)
        av[n++] = argv[k];
    av[n++] = bench;
    for (int k = 0; k < NPASS; k++)
        if (pass[k]) {
            av[n++] = (char *)pass_names[k];
            av[n++] = (char *)pass[k];
        }
    av[n] = NULL;

    FILE *rawf = NULL;
    if (raw && !(rawf = fopen(raw, "w"))) {
        fprintf(stderr, "commscope fabric: cannot write %s: %s\n", raw, strerror(errno));
        free(av);
        return CS__EXIT_USAGE;
    }
    struct cs_fabric fab;
    cs_fabric_init(&fab);
    int job = run_bench(av, &fab, rawf);
    if (job < 0) {
        free(av);
        cs_fabric_free(&fab);
        return 1;
    }
    free(av);
    if (job == CS__EXIT_NOTFOUND || job == CS__EXIT_NOEXEC) {
        if (!fab.ranks) {
            cs_fabric_free(&fab);
            return job;
        }
    }
    if (capture && cs__fabric_wire(&fab, dir) < 0)
        fprintf(stderr, "commscope fabric: out of memory reading the wire files in %s\n", dir);
    cs_fabric_judge(&fab, &lim);
    if (capture && !quiet)
        fprintf(stderr, "commscope fabric: traces and wire files in %s\n", dir);
    if (job != 0)
        fprintf(stderr, "commscope fabric: the job exited with status %d%s\n", job,
                fab.complete ? "" : " before the benchmark finished; reporting what it measured");
    for (size_t k = 0; k < fab.n_nodes; k++)
        if (fab.nodes[k].failure[0])
            fprintf(stderr, "commscope fabric: node %s failed: %s\n", fab.nodes[k].host,
                    fab.nodes[k].failure);
    if (!quiet)
        cs_fabric_print(&fab, stdout);
    int status = fabric_status(&fab, job, json);
    cs_fabric_free(&fab);
    return status;
}
