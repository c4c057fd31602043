/*
 * `commscope run [-o DIR] [--no-analyze] [--quiet] [--] PROGRAM ARGS...`
 *
 * Sets up the collector for an unchanged program and gets out of its way: creates the run
 * directory, preloads the collector libraries, passes the configuration on through COMMSCOPE_*
 * environment variables (through `mpirun -x` for Open MPI, whose remote daemons would not see them
 * otherwise), runs the program, hands its exit status back, and analyses the run directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "commscope/analyzer.h"
#include "internal.h"

extern char **environ;

#define RUN_FILE "commscope-run.txt"
#define REPORT_FILE "report.json"
#define HTML_FILE "report.html"
#define RANKS_CSV "ranks.csv"
#define OPS_CSV "ops.csv"
#define HANG_TEXT "hang.txt"
#define HANG_JSON "hang.json"
#define LIB_CORE "libcommscope.so"
#define LIB_MPI "libcommscope_mpi.so"

/* Exit status for setup failures other than usage: the program was never started. */
#define EXIT_SETUP 1

struct run_opts {
    const char *dir; /* -o DIR, or NULL for the dated default */
    int no_analyze;
    int quiet;
    int mpi;             /* --mpi 1, --no-mpi -1, else 0 (decided from the command) */
    const char *root;    /* --root HOST:PORT, or NULL */
    double hang_timeout; /* --hang-timeout / COMMSCOPE_HANG_TIMEOUT seconds; 0 off */
    int hang_keep;       /* --hang-keep: diagnose but let the job run on */
    const char *metrics; /* --metrics FILE / COMMSCOPE_METRICS, or NULL */
    int prog_argc;
    char **prog_argv;            /* PROGRAM ARGS..., a suffix of the caller's argv */
    struct cs__capture_opts cap; /* --capture* (capture_opts.c) */
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: commscope run [-o DIR] [--no-analyze] [--quiet] [--mpi|--no-mpi]\n"
            "                     [--root HOST:PORT] [--hang-timeout SECONDS [--hang-keep]]\n"
            "                     [--metrics FILE] [--] PROGRAM [ARGS...]\n"
            "\n"
            "Run PROGRAM with the commscope collector preloaded, then analyse the traces.\n"
            "PROGRAM is usually a launcher (mpirun, mpiexec, srun, torchrun) or a single MPI\n"
            "program.  For Open MPI's mpirun/mpiexec/orterun, `-x LD_PRELOAD\n"
            "-x COMMSCOPE_DIR` and `-x` for every other COMMSCOPE_* variable are inserted\n"
            "after the launcher name; other programs inherit the environment.\n"
            "\n"
            "options:\n"
            "  -o, --output DIR  run directory (default: ./commscope-YYYYmmdd-HHMMSS);\n"
            "                    created if missing, refused if it exists and is not empty\n"
            "  --no-analyze      do not run `commscope analyze` after the program\n"
            "  -q, --quiet       no progress messages; passes --quiet to the analysis\n"
            "  --mpi, --no-mpi   preload the MPI collector (libcommscope_mpi.so) or not; by\n"
            "                    default it is preloaded for mpirun/mpiexec/orterun and for\n"
            "                    programs on the command line that link libmpi, not for\n"
            "                    torchrun, python or other programs\n"
            "  --hang-timeout SECONDS  when no rank completes a call for SECONDS (also\n"
            "                    COMMSCOPE_HANG_TIMEOUT), print the hang diagnosis, write\n"
            "                    it to hang.txt and hang.json in the run directory, and\n"
            "                    end the job (SIGTERM to PROGRAM, SIGKILL 30 s later);\n"
            "                    choose it above the longest compute between two calls\n"
            "  --hang-keep       with --hang-timeout: diagnose, but let the job run on\n"
            "  --metrics FILE    keep FILE a Prometheus text exposition of the live job\n"
            "                    (steps, communication and waiting per rank, who caused\n"
            "                    the waiting, bus bandwidth), rewritten every second (also\n"
            "                    COMMSCOPE_METRICS)\n"
            "  --root HOST:PORT  host the clock/gather service for ranks without MPI (and\n"
            "                    the progress reports of --hang-timeout and --metrics) on\n"
            "                    HOST:PORT (default: this host, a free port); ranks find it\n"
            "                    through COMMSCOPE_ROOT\n"
            "%s"
            "  -h, --help        this text\n"
            "\n"
            "The run directory receives the traces (rank-NNNNN.cst), " RUN_FILE "\n"
            "(the effective configuration and the exit status), " REPORT_FILE " and " HTML_FILE
            ".\n"
            "Collector libraries: <dir of this executable>/../lib, or $COMMSCOPE_LIBDIR.\n"
            "\n"
            "exit status: the program's status when non-zero (128+N if killed by signal N),\n"
            "else the analysis' (0 ok, 1 analysed with problems, 3 nothing analysable);\n"
            "2 usage error or refused run directory, 1 other setup failure, 126/127 PROGRAM\n"
            "could not be executed / was not found.\n"
            "\n"
            "examples:\n"
            "  commscope run -- mpirun -np 64 ./train --steps 100\n"
            "  commscope run -o runs/baseline --quiet -- srun -N 8 ./train\n"
            "  commscope run --capture auto -- mpirun -np 8 --hostfile hosts ./train\n"
            "  commscope run --no-analyze -- mpirun -np 4 ./app && commscope analyze RUN_DIR\n",
            cs__capture_usage());
}

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "commscope run: %s '%s'; see 'commscope run --help'\n", what, arg);
    return CS__EXIT_USAGE;
}

/* Seconds in (0, 1e6]: 0, or -1. */
static int parse_seconds(const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !(x > 0 && x <= 1e6))
        return -1;
    *out = x;
    return 0;
}

/* Returns 0 with *o filled, 1 when --help was answered, or -1 after a usage message. */
static int parse_args(int argc, char **argv, struct run_opts *o)
{
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (i + 1 >= argc) {
                usage_error("option needs a directory", a);
                return -1;
            }
            o->dir = argv[++i];
        } else if (strncmp(a, "--output=", 9) == 0) {
            o->dir = a + 9;
        } else if (strcmp(a, "--no-analyze") == 0) {
            o->no_analyze = 1;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            o->quiet = 1;
        } else if (strncmp(a, "--capture", 9) == 0) {
            int used = cs__capture_arg(&o->cap, argc, argv, i, "run");
            if (used < 0)
                return -1;
            i += used - 1;
        } else if (strcmp(a, "--root") == 0 || strncmp(a, "--root=", 7) == 0) {
            if (a[6] == '\0' && i + 1 >= argc) {
                usage_error("option needs HOST:PORT", a);
                return -1;
            }
            o->root = a[6] == '=' ? a + 7 : argv[++i];
            if (!cs__root_valid_spec(o->root)) {
                usage_error("--root needs HOST:PORT (or [ADDR]:PORT), not", o->root);
                return -1;
            }
        } else if (strcmp(a, "--hang-timeout") == 0 || strncmp(a, "--hang-timeout=", 15) == 0) {
            if (a[14] == '\0' && i + 1 >= argc) {
                usage_error("option needs a number of seconds", a);
                return -1;
            }
            const char *v = a[14] == '=' ? a + 15 : argv[++i];
            if (parse_seconds(v, &o->hang_timeout) != 0) {
                usage_error("--hang-timeout needs seconds in (0, 1e6], not", v);
                return -1;
            }
        } else if (strcmp(a, "--hang-keep") == 0) {
            o->hang_keep = 1;
        } else if (strcmp(a, "--metrics") == 0 || strncmp(a, "--metrics=", 10) == 0) {
            if (a[9] == '\0' && i + 1 >= argc) {
                usage_error("option needs a file name", a);
                return -1;
            }
            o->metrics = a[9] == '=' ? a + 10 : argv[++i];
            if (!o->metrics[0]) {
                usage_error("--metrics needs a file name", "");
                return -1;
            }
        } else if (strcmp(a, "--mpi") == 0) {
            o->mpi = 1;
        } else if (strcmp(a, "--no-mpi") == 0) {
            o->mpi = -1;
        } else {
            usage_error("unknown option", a);
            return -1;
        }
    }
    const char *ht = getenv("COMMSCOPE_HANG_TIMEOUT");
    if (!o->hang_timeout && ht && *ht && parse_seconds(ht, &o->hang_timeout) != 0) {
        usage_error("COMMSCOPE_HANG_TIMEOUT needs seconds in (0, 1e6], not", ht);
        return -1;
    }
    const char *me = getenv("COMMSCOPE_METRICS");
    if (!o->metrics && me && *me)
        o->metrics = me;
    if (o->hang_keep && !o->hang_timeout) {
        usage_error("--hang-keep needs --hang-timeout", "--hang-keep");
        return -1;
    }
    if (o->dir && o->dir[0] == '\0') {
        usage_error("empty run directory name", "");
        return -1;
    }
    if (i >= argc) {
        fprintf(stderr, "commscope run: no PROGRAM given; see 'commscope run --help'\n");
        return -1;
    }
    o->prog_argc = argc - i;
    o->prog_argv = argv + i;
    return 0;
}

/* mkdir -p.  Returns 0 or -1 with errno set. */
static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* 1 if DIR holds anything besides . and .., 0 if empty, -1 if it cannot be read. */
static int dir_has_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            found = 1;
    closedir(d);
    return found;
}

/*
 * Create (or accept an existing empty) run directory and store its absolute path in abs.
 * Returns 0, or an exit status after saying why on stderr.
 */
static int prepare_run_dir(const char *dir, char abs[PATH_MAX])
{
    char def[64];
    if (!dir) {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(def, sizeof(def), "commscope-%Y%m%d-%H%M%S", &tm);
        dir = def;
    }
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            fprintf(stderr,
                    "commscope run: '%s' exists and is not a directory; choose another "
                    "run directory with -o DIR\n",
                    dir);
            return CS__EXIT_USAGE;
        }
        int has = dir_has_entries(dir);
        if (has < 0) {
            fprintf(stderr, "commscope run: cannot read run directory '%s': %s\n", dir,
                    strerror(errno));
            return EXIT_SETUP;
        }
        if (has) {
            fprintf(stderr,
                    "commscope run: run directory '%s' already exists and is not empty; "
                    "traces of two runs must not mix: remove it or choose another with "
                    "-o DIR\n",
                    dir);
            return CS__EXIT_USAGE;
        }
    } else if (make_dirs(dir) != 0) {
        fprintf(stderr, "commscope run: cannot create run directory '%s': %s\n", dir,
                strerror(errno));
        return EXIT_SETUP;
    }
    if (!realpath(dir, abs)) {
        fprintf(stderr, "commscope run: cannot resolve run directory '%s': %s\n", dir,
                strerror(errno));
        return EXIT_SETUP;
    }
    return 0;
}

/*
 * Find the directory holding both collector libraries: $COMMSCOPE_LIBDIR, else ../lib relative to
 * this executable (the same layout in the build tree and when installed).  Stores an absolute path
 * because the program may change directory before the dynamic loader reads LD_PRELOAD.
 * Returns 0, or an exit status after saying why on stderr.
 */
static int find_libdir(char out[PATH_MAX])
{
    char want[PATH_MAX + 16];
    const char *env = getenv("COMMSCOPE_LIBDIR");
    const char *source;
    if (env && env[0]) {
        snprintf(want, sizeof(want), "%s", env);
        source = "COMMSCOPE_LIBDIR";
    } else {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n <= 0) {
            fprintf(stderr,
                    "commscope run: cannot find my own executable (/proc/self/exe: %s); "
                    "set COMMSCOPE_LIBDIR to the directory holding " LIB_CORE "\n",
                    strerror(errno));
            return EXIT_SETUP;
        }
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        snprintf(want, sizeof(want), "%s/../lib", exe);
        source = "the directory next to the commscope executable";
    }
    if (!realpath(want, out)) {
        fprintf(stderr,
                "commscope run: collector library directory '%s' (%s): %s; set "
                "COMMSCOPE_LIBDIR to the directory holding " LIB_CORE " and " LIB_MPI "\n",
                want, source, strerror(errno));
        return EXIT_SETUP;
    }
    /* libcommscope_mpi.so is optional: builds without MPI (NCCL-only machines) have none. */
    static const char *const libs[] = {LIB_CORE};
    for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
        char p[PATH_MAX + 64];
        snprintf(p, sizeof(p), "%s/%s", out, libs[i]);
        if (access(p, R_OK) != 0) {
            fprintf(stderr,
                    "commscope run: collector library %s: %s (looked in %s); build the "
                    "targets commscope and commscope_mpi, or set COMMSCOPE_LIBDIR\n",
                    p, strerror(errno), source);
            return EXIT_SETUP;
        }
    }
    return 0;
}

/* Open MPI's launchers need `-x NAME` to pass a variable on to ranks on other nodes. */
static int is_openmpi_launcher(const char *prog)
{
    const char *base = strrchr(prog, '/');
    base = base ? base + 1 : prog;
    static const char *const names[] = {"mpirun",         "mpiexec",         "orterun",
                                        "mpirun.openmpi", "mpiexec.openmpi", "orterun.openmpi"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(base, names[i]) == 0)
            return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The COMMSCOPE_* entries of the environment ("NAME=value"), sorted so the run file is stable.
 * Returns a malloc'ed array of pointers into environ (caller frees the array only), *n set.
 */
static char **commscope_env(size_t *n)
{
    size_t cap = 0;
    for (char **e = environ; *e; e++)
        cap++;
    char **v = malloc((cap + 1) * sizeof(*v));
    *n = 0;
    if (!v)
        return NULL;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "COMMSCOPE_", 10) == 0)
            v[(*n)++] = *e;
    qsort(v, *n, sizeof(*v), cmp_str);
    return v;
}

/*
 * argv for the child: PROGRAM ARGS, with Open MPI's `-x` options inserted after the launcher name.
 * Returns a malloc'ed NULL-terminated array, or NULL when out of memory; *owned is set to the
 * number of variable names it allocated (av[6], av[8], ...): release it with free_child_argv().
 */
static void free_child_argv(char **av, size_t owned)
{
    for (size_t j = 0; j < owned; j++)
        free(av[6 + 2 * j]);
    free(av);
}

static char **child_argv(const struct run_opts *o, size_t *owned)
{
    *owned = 0;
    size_t nenv = 0;
    char **env = commscope_env(&nenv);
    if (!env)
        return NULL;
    int mpi = is_openmpi_launcher(o->prog_argv[0]);
    size_t extra = mpi ? 2 * (2 + nenv) : 0;
    char **av = calloc((size_t)o->prog_argc + extra + 1, sizeof(*av));
    if (!av) {
        free(env);
        return NULL;
    }
    size_t k = 0;
    av[k++] = o->prog_argv[0];
    if (mpi) {
        av[k++] = "-x";
        av[k++] = "LD_PRELOAD";
        av[k++] = "-x";
        av[k++] = "COMMSCOPE_DIR";
        for (size_t i = 0; i < nenv; i++) {
            size_t len = strcspn(env[i], "=");
            if (len == 13 && strncmp(env[i], "COMMSCOPE_DIR", 13) == 0)
                continue;
            char *name = strndup(env[i], len);
            if (!name) {
                free(env);
                free_child_argv(av, *owned);
                return NULL;
            }
            av[k++] = "-x";
            av[k++] = name;
            ++*owned;
        }
        /* NVTX's injection library (set by cs__cmd_run unless the user chose one). */
        if (getenv("NVTX_INJECTION64_PATH")) {
            av[k++] = "-x";
            av[k++] = "NVTX_INJECTION64_PATH";
        }
    }
    for (int i = 1; i < o->prog_argc; i++)
        av[k++] = o->prog_argv[i];
    av[k] = NULL;
    free(env);
    return av;
}

/* Print one argument so that a shell would read it back unchanged. */
static void put_quoted(FILE *f, const char *s)
{
    if (*s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                        "@%_+=:,./-") == strlen(s)) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

static void put_argv(FILE *f, char *const *av, int n)
{
    for (int i = 0; i < n; i++) {
        if (i)
            fputc(' ', f);
        put_quoted(f, av[i]);
    }
}

static void put_time(FILE *f, const char *key, time_t t)
{
    struct tm tm;
    char buf[64];
    localtime_r(&t, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S%z", &tm);
    fprintf(f, "%s: %s\n", key, buf);
}

/* Write the effective configuration.  Returns 0, or an exit status after saying why. */
static int write_run_file(const char *path, int argc, char **argv, char *const *cav,
                          const char *run_dir, const char *libdir, time_t start)
{
    FILE *f = fopen(path, "we");
    if (!f) {
        fprintf(stderr, "commscope run: cannot write %s: %s\n", path, strerror(errno));
        return EXIT_SETUP;
    }
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    char cwd[PATH_MAX] = "";
    if (!getcwd(cwd, sizeof(cwd)))
        snprintf(cwd, sizeof(cwd), "(unknown: %s)", strerror(errno));
    int cn = 0;
    while (cav[cn])
        cn++;

    fprintf(f, "# commscope run: effective configuration (one \"key: value\" per line)\n");
    fprintf(f, "version: %s\n", CS_VERSION_STRING);
    put_time(f, "start", start);
    fprintf(f, "start_epoch: %lld\n", (long long)start);
    fprintf(f, "host: %s\n", host);
    fprintf(f, "cwd: %s\n", cwd);
    fprintf(f, "run_dir: %s\n", run_dir);
    fprintf(f, "libdir: %s\n", libdir);
    fprintf(f, "command: commscope ");
    put_argv(f, argv, argc);
    fprintf(f, "\nexec: ");
    put_argv(f, cav, cn);
    fputc('\n', f);
    const char *pre = getenv("LD_PRELOAD");
    fprintf(f, "env: LD_PRELOAD=%s\n", pre ? pre : "");
    size_t n = 0;
    char **env = commscope_env(&n);
    for (size_t i = 0; env && i < n; i++)
        fprintf(f, "env: %s\n", env[i]);
    free(env);
    /* Which NICs NCCL may use: the analysis places each rank's GPU against them (affinity). */
    const char *hca = getenv("NCCL_IB_HCA");
    if (hca)
        fprintf(f, "env: NCCL_IB_HCA=%s\n", hca);
    if (fclose(f) != 0) {
        fprintf(stderr, "commscope run: cannot write %s: %s\n", path, strerror(errno));
        return EXIT_SETUP;
    }
    return 0;
}

/* Append "key: value" lines after the program (and the analysis) ended; best effort. */
static void append_run_file(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void append_run_file(const char *path, const char *fmt, ...)
{
    FILE *f = fopen(path, "ae");
    if (!f) {
        fprintf(stderr, "commscope run: cannot append to %s: %s\n", path, strerror(errno));
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

/* The child's pid while it runs; read by the signal handler. */
static volatile sig_atomic_t child_pid;

/*
 * Forward SIGINT/SIGTERM to the program.  A terminal's Ctrl-C (si_code SI_KERNEL) already went to
 * the whole foreground process group, child included; sending it again would make mpirun think
 * the user pressed Ctrl-C twice and kill the job without cleanup.
 */
static void forward_signal(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    if (child_pid > 0 && (!info || info->si_code != SI_KERNEL))
        kill((pid_t)child_pid, sig);
}

static const int forwarded[] = {SIGINT, SIGTERM};

static void set_forwarding(int on)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    if (on) {
        sa.sa_sigaction = forward_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
    } else {
        sa.sa_handler = SIG_DFL;
    }
    for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
        sigaction(forwarded[i], &sa, NULL);
}

/* --hang-timeout: what the wait loop needs. */
struct hang_ctx {
    double timeout_s;
    int keep;
    const char *run_dir, *run_file;
    int fired; /* the diagnosis was made */
    /* The root service the ranks report progress to (COMMSCOPE_WATCH_MS), or NULL. */
    struct cs__root_svc *svc;
    int watch_ms;
    uint64_t calls;      /* the completed calls the ranks reported at the last poll */
    int reported;        /* some rank reported */
    const char *metrics; /* --metrics FILE (with svc), or NULL */
    int metrics_warned;
};

/* --metrics: rewrite the file (final: the job ended, judge everything still open). */
static void put_metrics(struct hang_ctx *hc, int final)
{
    if (!hc->metrics || !hc->svc)
        return;
    if (cs__root_svc_write_metrics(hc->svc, hc->metrics, final) != 0 && !hc->metrics_warned++)
        fprintf(stderr, "commscope: cannot write the metrics file %s: %s\n", hc->metrics,
                strerror(errno));
}

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Write the report through PATH.tmp renamed to PATH; 0 or -1. */
static int write_hang_file(const char *path, const struct cs_report *rep, int json)
{
    char tmp[PATH_MAX + 16];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    FILE *f = fopen(tmp, "we");
    if (!f)
        return -1;
    int bad = 0;
    if (json)
        bad = cs_report_write_json(rep, f) != 0;
    else
        cs_report_write_text(rep, f);
    bad |= ferror(f) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The live job made no progress for the timeout: analyse its traces as they are, as a hung job,
 * print the report on stderr and keep it in the run directory. */
static void diagnose_hang(struct hang_ctx *hc, double quiet_s)
{
    fprintf(stderr,
            "commscope: no rank completed a call for %.1f s (--hang-timeout %g); diagnosing the "
            "live job\n",
            quiet_s, hc->timeout_s);
    /* Ranks report their progress to the root service: their traces, wherever they are kept,
     * come over as snapshots into the run directory. */
    char silent[1024] = "";
    if (hc->svc) {
        int wait_ms = 4 * hc->watch_ms + 5000;
        int copied = 0;
        int got = cs__root_svc_snapshot(hc->svc, wait_ms, 3.0 * hc->watch_ms / 1000 + 1, &copied,
                                        silent, sizeof silent);
        fprintf(stderr,
                "commscope: %d rank(s) answered through the root service: %d live trace(s) "
                "copied into the run directory, %d there already\n",
                got, copied, got - copied);
        if (silent[0]) {
            fprintf(stderr, "commscope: no snapshot from %s\n", silent);
            append_run_file(hc->run_file, "hang_silent: %s\n", silent);
        }
    }
    struct cs_analysis_opts ao = {.hung = 1};
    struct cs_analysis *an = NULL;
    char err[1024] = "";
    int rc = cs_analysis_open(&an, hc->run_dir, &ao, err, sizeof err);
    if (!rc)
        rc = cs_analysis_run(an);
    const struct cs_report *rep = an ? cs_analysis_report(an) : NULL;
    if (!rep || !rep->ranks_found) {
        fprintf(stderr, "commscope: the hang diagnosis failed: %s\n",
                err[0] ? err : cs_strerror(rc));
        append_run_file(hc->run_file,
                        "hang: no rank completed a call for %.1f s; no diagnosis (%s)\n", quiet_s,
                        err[0] ? err : cs_strerror(rc));
        cs_analysis_free(an);
        return;
    }
    char txt[PATH_MAX + 16], json[PATH_MAX + 16];
    snprintf(txt, sizeof txt, "%s/" HANG_TEXT, hc->run_dir);
    snprintf(json, sizeof json, "%s/" HANG_JSON, hc->run_dir);
    int wt = write_hang_file(txt, rep, 0), wj = write_hang_file(json, rep, 1);
    if (!wt && silent[0]) {
        FILE *f = fopen(txt, "ae");
        if (f) {
            fprintf(f, "\nRanks without a live snapshot (progress reports): %s\n", silent);
            fclose(f);
        }
    }
    cs_report_write_text(rep, stderr);
    if (wt || wj)
        fprintf(stderr, "commscope: could not write %s: %s\n", wt ? txt : json, strerror(errno));
    append_run_file(hc->run_file, "hang: no rank completed a call for %.1f s; diagnosis in %s\n",
                    quiet_s, wt ? "(not written)" : HANG_TEXT " and " HANG_JSON);
    cs_analysis_free(an);
}

/* Wait for pid, watching the traces for progress when hc is set.  Returns waitpid's result. */
static pid_t wait_child(pid_t pid, int *status, struct hang_ctx *hc)
{
    pid_t w;
    if (!hc) {
        do {
            w = waitpid(pid, status, 0);
        } while (w < 0 && errno == EINTR);
        return w;
    }
    struct cs__hang_watch *hw = hc->timeout_s ? cs__hang_watch_new(hc->run_dir) : NULL;
    double poll_s = hc->timeout_s / 4 < 0.5 ? hc->timeout_s / 4 : 0.5;
    double last = mono_s(), next = last + poll_s, killed = 0, next_metrics = last + 1;
    for (;;) {
        w = waitpid(pid, status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR))
            break;
        struct timespec nap = {0, 50000000};
        nanosleep(&nap, NULL);
        double t = mono_s();
        if (killed && t - killed >= 30) {
            fprintf(stderr, "commscope: the job did not end 30 s after SIGTERM; sending SIGKILL\n");
            kill(pid, SIGKILL);
            killed = INFINITY;
        }
        if (t >= next_metrics) {
            put_metrics(hc, 0);
            next_metrics = t + 1;
        }
        if (!hw || hc->fired || t < next)
            continue;
        next = t + poll_s;
        /* Progress: a visible trace changed, or the ranks' reports to the root service did; no
         * trace and no report yet is a job still starting. */
        int fp = cs__hang_watch_poll(hw);
        uint64_t calls = 0;
        int reporting = hc->svc ? cs__root_svc_progress(hc->svc, &calls) : 0;
        int moved = hc->reported && calls != hc->calls;
        hc->reported |= reporting > 0 || calls > 0;
        hc->calls = calls;
        if (fp == 1 || moved || (fp < 0 && !hc->reported)) {
            last = t;
            continue;
        }
        if (t - last < hc->timeout_s)
            continue;
        hc->fired = 1;
        diagnose_hang(hc, t - last);
        if (!hc->keep) {
            fprintf(stderr, "commscope: ending the job (SIGTERM to %d; --hang-keep lets it run)\n",
                    (int)pid);
            append_run_file(hc->run_file, "hang_action: SIGTERM to the program\n");
            kill(pid, SIGTERM);
            killed = mono_s();
        }
    }
    cs__hang_watch_free(hw);
    put_metrics(hc, 1);
    return w;
}

/*
 * Start cav, wait for it, and return its exit status (128+N when killed by signal N), or
 * 126/127 when it could not be executed (said on stderr).  *sig gets the signal, or 0;
 * *not_started is set when the program never ran (exec or fork failed).
 */
static int run_program(char *const *cav, int *sig, int *not_started, struct hang_ctx *hc)
{
    *sig = 0;
    *not_started = 1;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        fprintf(stderr, "commscope run: pipe: %s\n", strerror(errno));
        return EXIT_SETUP;
    }
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
        sigaddset(&block, forwarded[i]);
    /* Blocked across fork so a signal arriving now is forwarded once the child's pid is known. */
    sigprocmask(SIG_BLOCK, &block, &old);
    set_forwarding(1);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        set_forwarding(0);
        close(pfd[0]);
        close(pfd[1]);
        fprintf(stderr, "commscope run: fork: %s\n", strerror(e));
        return EXIT_SETUP;
    }
    if (pid == 0) {
        set_forwarding(0);
        cs__restore_child_signals();
        sigprocmask(SIG_SETMASK, &old, NULL);
        close(pfd[0]);
        execvp(cav[0], cav);
        int e = errno;
        ssize_t w = write(pfd[1], &e, sizeof(e));
        (void)w;
        _exit(e == ENOENT ? CS__EXIT_NOTFOUND : CS__EXIT_NOEXEC);
    }
    child_pid = pid;
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(pfd[1]);
    int exec_errno = 0;
    ssize_t r;
    do {
        r = read(pfd[0], &exec_errno, sizeof(exec_errno));
    } while (r < 0 && errno == EINTR);
    close(pfd[0]);

    int status = 0;
    pid_t w = wait_child(pid, &status, r == (ssize_t)sizeof(exec_errno) ? NULL : hc);
    child_pid = 0;
    set_forwarding(0);
    if (w < 0) {
        fprintf(stderr, "commscope run: waitpid: %s\n", strerror(errno));
        return EXIT_SETUP;
    }
    if (r == (ssize_t)sizeof(exec_errno)) {
        fprintf(stderr, "commscope run: cannot execute '%s': %s\n", cav[0], strerror(exec_errno));
        return exec_errno == ENOENT ? CS__EXIT_NOTFOUND : CS__EXIT_NOEXEC;
    }
    *not_started = 0;
    if (WIFSIGNALED(status)) {
        *sig = WTERMSIG(status);
        return 128 + *sig;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_SETUP;
}

/* Prepend the collector libraries to LD_PRELOAD: mpi_lib (the MPI family's build, "" none)
 * before the core library.  Returns 0 or -1 (out of memory). */
static int set_preload(const char *libdir, const char *mpi_lib)
{
    const char *old = getenv("LD_PRELOAD");
    size_t n = strlen(mpi_lib) + strlen(libdir) + strlen(LIB_CORE) + 8 + (old ? strlen(old) : 0);
    char *v = malloc(n);
    if (!v)
        return -1;
    /* The MPI front end first: its PMPI wrappers must come before libmpi's MPI_* symbols. */
    snprintf(v, n, "%s%s%s/" LIB_CORE "%s%s", mpi_lib, mpi_lib[0] ? ":" : "", libdir,
             old && old[0] ? ":" : "", old && old[0] ? old : "");
    int rc = setenv("LD_PRELOAD", v, 1);
    free(v);
    return rc;
}

int cs__cmd_run(int argc, char **argv)
{
    struct run_opts o = {0};
    int pr = parse_args(argc, argv, &o);
    if (pr == 1)
        return 0;
    if (pr < 0)
        return CS__EXIT_USAGE;

    char libdir[PATH_MAX];
    int rc = find_libdir(libdir);
    if (rc)
        return rc;
    char run_dir[PATH_MAX];
    rc = prepare_run_dir(o.dir, run_dir);
    if (rc)
        return rc;

    char why[3 * PATH_MAX], mpi_lib[PATH_MAX + 64];
    int choice = cs__choose_mpi_preload(o.mpi, o.prog_argc, o.prog_argv, libdir, mpi_lib,
                                        sizeof mpi_lib, why, sizeof why);
    /* An MPI job without a collector of its family runs untraced for MPI: said once, here. */
    if (choice < 0)
        fprintf(stderr, "commscope run: %s\n", why);
    int mpi = choice != 0;
    /* NVTX ranges: libcommscope.so is an NVTX injection library (collector/nvtx/inject.c).  A
     * value the user set (Nsight Systems sets its own) wins: NVTX loads one injection only. */
    char nvtx[PATH_MAX + 32];
    snprintf(nvtx, sizeof nvtx, "%s/" LIB_CORE, libdir);
    int nvtx_set = !getenv("NVTX_INJECTION64_PATH");
    if (setenv("COMMSCOPE_DIR", run_dir, 1) != 0 || set_preload(libdir, mpi_lib) != 0 ||
        (nvtx_set && setenv("NVTX_INJECTION64_PATH", nvtx, 1) != 0) ||
        cs__capture_env(&o.cap, "run") != 0) {
        fprintf(stderr, "commscope run: cannot set the environment: %s\n", strerror(errno));
        return EXIT_SETUP;
    }
    /* Jobs without MPI (and any job given --root or COMMSCOPE_ROOT): the root service. */
    /* With --hang-timeout every rank reports its progress to it (COMMSCOPE_WATCH_MS), MPI or
     * not, so ranks whose traces stay on other nodes are watched too. */
    struct cs__root_svc *svc = NULL;
    const char *spec = o.root ? o.root : getenv("COMMSCOPE_ROOT");
    int watch_ms = 0;
    if (spec && (!*spec || strcmp(spec, "off") == 0))
        spec = NULL;
    else if (spec || !mpi || o.hang_timeout || o.metrics) {
        char addr[320];
        int sr = cs__root_svc_start(spec, run_dir, &svc, addr, sizeof addr);
        if (sr == 0 && (o.hang_timeout || o.metrics)) {
            double ms = o.hang_timeout ? o.hang_timeout * 1000 / 4 : 1000;
            watch_ms = ms < 100 ? 100 : ms > 1000 ? 1000 : (int)ms;
        }
        if (sr == 0 && o.metrics && cs__root_svc_metrics_on(svc, watch_ms / 1000.0) != 0) {
            fprintf(stderr, "commscope run: out of memory\n");
            return EXIT_SETUP;
        }
        if (sr != 0 && o.metrics)
            fprintf(stderr, "commscope run: no root service here: no metrics file\n");
        char wms[16];
        snprintf(wms, sizeof wms, "%d", watch_ms);
        if (setenv("COMMSCOPE_ROOT", sr >= 0 ? addr : "off", 1) != 0 ||
            (watch_ms && setenv("COMMSCOPE_WATCH_MS", wms, 1) != 0)) {
            fprintf(stderr, "commscope run: cannot set the environment: %s\n", strerror(errno));
            return EXIT_SETUP;
        }
    }
    size_t owned;
    char **cav = child_argv(&o, &owned);
    if (!cav) {
        fprintf(stderr, "commscope run: out of memory\n");
        return EXIT_SETUP;
    }
    char run_file[PATH_MAX + 32];
    snprintf(run_file, sizeof(run_file), "%s/" RUN_FILE, run_dir);
    time_t start = time(NULL);
    rc = write_run_file(run_file, argc, argv, cav, run_dir, libdir, start);
    if (rc) {
        free_child_argv(cav, owned);
        return rc;
    }
    append_run_file(run_file, "mpi_preload: %s (%s)\n", choice > 0 ? "yes" : "no", why);
    if (nvtx_set)
        append_run_file(run_file, "nvtx: NVTX_INJECTION64_PATH=%s (NVTX ranges recorded)\n", nvtx);
    else
        append_run_file(run_file,
                        "nvtx: NVTX_INJECTION64_PATH was already set (%s): NVTX ranges are not"
                        " recorded\n",
                        getenv("NVTX_INJECTION64_PATH"));
    if (!o.quiet)
        fprintf(stderr, "commscope: run directory %s\n", run_dir);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int sig = 0, not_started = 0;
    struct hang_ctx hc = {.timeout_s = o.hang_timeout,
                          .keep = o.hang_keep,
                          .run_dir = run_dir,
                          .run_file = run_file,
                          .svc = watch_ms ? svc : NULL,
                          .watch_ms = watch_ms,
                          .metrics = o.metrics};
    if (o.hang_timeout)
        append_run_file(run_file, "hang_timeout_s: %g%s\n", o.hang_timeout,
                        o.hang_keep ? " (keep)" : "");
    if (o.metrics)
        append_run_file(run_file, "metrics: %s\n", o.metrics);
    int prog_status =
        run_program(cav, &sig, &not_started, o.hang_timeout || hc.metrics ? &hc : NULL);
    char prog_name[256];
    snprintf(prog_name, sizeof prog_name, "%s", cav[0]);
    free_child_argv(cav, owned);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double elapsed = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    time_t end = time(NULL);
    {
        FILE *f = fopen(run_file, "ae");
        if (f) {
            put_time(f, "end", end);
            fclose(f);
        }
    }
    append_run_file(run_file, "elapsed_s: %.3f\n", elapsed);
    if (sig)
        append_run_file(run_file, "exit_signal: %d (%s)\n", sig, strsignal(sig));
    append_run_file(run_file, "exit_status: %d\n", prog_status);
    if (svc) {
        char summary[600];
        cs__root_svc_finish(svc, 30000, summary, sizeof summary);
        append_run_file(run_file, "root_service: %s\n", summary);
    }
    if (!o.quiet && !not_started) {
        if (sig)
            fprintf(stderr, "commscope: %s killed by signal %d (%s); exit status %d\n", prog_name,
                    sig, strsignal(sig), prog_status);
        else
            fprintf(stderr, "commscope: %s exited with status %d after %.2f s\n", prog_name,
                    prog_status, elapsed);
    }
    /* A program that never ran left nothing to analyse. */
    if (o.no_analyze || not_started)
        return prog_status;

    char json[PATH_MAX + 32], html[PATH_MAX + 32], rcsv[PATH_MAX + 32], ocsv[PATH_MAX + 32];
    snprintf(json, sizeof(json), "%s/" REPORT_FILE, run_dir);
    snprintf(html, sizeof(html), "%s/" HTML_FILE, run_dir);
    snprintf(rcsv, sizeof(rcsv), "%s/" RANKS_CSV, run_dir);
    snprintf(ocsv, sizeof(ocsv), "%s/" OPS_CSV, run_dir);
    /* A job found hung is analysed as one, whatever ended it.  Every rank's figures go to
     * ranks.csv when report.json lists only some (CS_REPORT_RANKS_LISTED), every (op,
     * communicator) row to ops.csv when the reports fold some (CS_REPORT_COMMS_LISTED). */
    char *aav[13] = {
        "analyze",          run_dir, "--json", json, "--html", html, "--ranks-csv-capped", rcsv,
        "--ops-csv-capped", ocsv};
    int aac = 10;
    if (o.quiet)
        aav[aac++] = "--quiet";
    if (hc.fired)
        aav[aac++] = "--hung";
    aav[aac] = NULL;
    if (!o.quiet)
        fprintf(stderr, "commscope: analysing %s\n", run_dir);
    fflush(NULL);
    int an_status = cs_cmd_analyze(aac, aav);
    append_run_file(run_file, "analysis_status: %d\n", an_status);
    return prog_status ? prog_status : an_status;
}
