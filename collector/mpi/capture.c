/*
 * Wire capture during a run (COMMSCOPE_CAPTURE, docs/wire.md): the first rank of every node
 * starts the capture helper cs_capture, which records packet headers on the node's interfaces
 * into RUN_DIR/wire-HOST.csw until MPI_Finalize stops it.
 *
 * Start-up is collective over the collector's private communicator: every rank contributes its
 * host name and addresses (one allgather), so each node's helper knows the job's hosts and keeps
 * only their traffic (a BPF filter).  The helper is a separate process (posix_spawn, low
 * priority): whatever happens to it, the program's results and progress are unchanged.  Capture
 * problems (no CAP_NET_RAW, unknown interface) are gathered and said once, by rank 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

extern char **environ;

#define INFO 512   /* "HOST ADDR ADDR ..." per rank */
#define STATUS 256 /* what each node leader reports */
#define READY_TIMEOUT_MS 5000
#define STOP_TIMEOUT_MS 10000

static pid_t helper = -1;
static char late[STATUS];    /* what the helper said after its first line */
static int active;           /* capture configured: every rank takes part in start and stop */
static int configured;       /* the same, kept after the stop for the gather of the wire files */
static char wire_path[4200]; /* the helper's output file, "" when this rank started none */
static int ready_rd = -1;    /* the helper's stdout: "ok" at the start, "error: ..." at the end */
static char node_name[CS_HOST_MAX];

/* "HOST ADDR..." of this rank's node: non-loopback, non-link-local addresses. */
static void my_info(char *out)
{
    char host[CS_HOST_MAX] = "";
    gethostname(host, sizeof host - 1);
    for (char *p = host; *p; p++)
        if (*p == ' ')
            *p = '_';
    size_t n = (size_t)snprintf(out, INFO, "%s", host);
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr)
            continue;
        char a[INET6_ADDRSTRLEN] = "";
        if (i->ifa_addr->sa_family == AF_INET) {
            const struct in_addr *v4 = &((const struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr;
            if ((ntohl(v4->s_addr) >> 24) == 127)
                continue;
            inet_ntop(AF_INET, v4, a, sizeof a);
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            const struct in6_addr *v6 =
                &((const struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr;
            if (IN6_IS_ADDR_LOOPBACK(v6) || IN6_IS_ADDR_LINKLOCAL(v6))
                continue;
            inet_ntop(AF_INET6, v6, a, sizeof a);
        } else {
            continue;
        }
        if (n + strlen(a) + 2 >= INFO)
            break;
        n += (size_t)snprintf(out + n, INFO - n, " %s", a);
    }
    freeifaddrs(ifs);
}

static int host_len(const char *info)
{
    return (int)strcspn(info, " ");
}

/* Start the helper; returns 0 or -1 with status filled. */
static int spawn_helper(const char *all, int size, const char *mine, char *status)
{
    const char *bin = getenv("COMMSCOPE_CAPTURE_BIN");
    /* This rank's local directory (the run directory unless COMMSCOPE_LOCAL_DIR says
     * otherwise): MPI_Finalize gathers the file to rank 0 when that one cannot see it. */
    const char *dir = cs_local_dir();
    const char *ifaces = getenv("COMMSCOPE_CAPTURE");
    if (!bin || !*bin || !dir || !*dir) {
        snprintf(status, STATUS, "COMMSCOPE_CAPTURE_BIN or COMMSCOPE_DIR not set; no capture");
        return -1;
    }
    mkdir(dir, 0755);
    char host[CS_HOST_MAX];
    snprintf(host, sizeof host, "%.*s", host_len(mine), mine);
    char out[4200], raw[4200], parent[32];
    snprintf(out, sizeof out, "%s/wire-%s.csw", dir, host);
    snprintf(raw, sizeof raw, "%s/wire-%s", dir, host);
    snprintf(parent, sizeof parent, "%ld", (long)getpid());
    const char *av[32];
    int k = 0;
    av[k++] = bin;
    av[k++] = "--out", av[k++] = out;
    av[k++] = "--ifaces", av[k++] = ifaces;
    av[k++] = "--host", av[k++] = host;
    av[k++] = "--peers-stdin";
    av[k++] = "--ready-fd", av[k++] = "1";
    av[k++] = "--parent", av[k++] = parent;
    static const struct {
        const char *env, *opt;
    } pass[] = {{"COMMSCOPE_CAPTURE_EXPECT", "--expect"},
                {"COMMSCOPE_CAPTURE_BUCKET_MS", "--bucket-ms"},
                {"COMMSCOPE_CAPTURE_SNAPLEN", "--snaplen"},
                {"COMMSCOPE_CAPTURE_RAW_MAX", "--raw-max"}};
    for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++) {
        const char *v = getenv(pass[i].env);
        if (v && *v)
            av[k++] = pass[i].opt, av[k++] = v;
    }
    const char *rv = getenv("COMMSCOPE_CAPTURE_RAW");
    if (rv && *rv && strcmp(rv, "0") != 0)
        av[k++] = "--raw", av[k++] = raw;
    av[k] = NULL;

    int in[2], rd[2];
    if (pipe2(in, O_CLOEXEC) != 0) {
        snprintf(status, STATUS, "pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(rd, O_CLOEXEC) != 0) {
        close(in[0]), close(in[1]);
        snprintf(status, STATUS, "pipe: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, rd[1], 1);
    pid_t pid;
    int rc = posix_spawn(&pid, bin, &fa, NULL, (char *const *)av, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(rd[1]);
    if (rc != 0) {
        close(in[1]);
        close(rd[0]);
        snprintf(status, STATUS, "cannot start %s: %s", bin, strerror(rc));
        return -1;
    }
    helper = pid;
    snprintf(wire_path, sizeof wire_path, "%s", out);
    /* The job's hosts, one line each (the first rank's line for every host). */
    signal(SIGPIPE, SIG_IGN);
    for (int r = 0; r < size; r++) {
        const char *inf = all + (size_t)r * INFO;
        int dup = 0;
        for (int q = 0; q < r && !dup; q++) {
            const char *o = all + (size_t)q * INFO;
            dup = host_len(o) == host_len(inf) && strncmp(o, inf, (size_t)host_len(inf)) == 0;
        }
        if (dup)
            continue;
        size_t n = strnlen(inf, INFO);
        if (write(in[1], inf, n) != (ssize_t)n || write(in[1], "\n", 1) != 1)
            break;
    }
    close(in[1]);
    /* Wait (bounded) until it captures, so the program's first messages are seen. */
    char line[STATUS] = "";
    size_t got = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long left = READY_TIMEOUT_MS -
                    ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0) {
            snprintf(line, sizeof line, "error: the capture helper did not start within %d s",
                     READY_TIMEOUT_MS / 1000);
            break;
        }
        struct pollfd pf = {.fd = rd[0], .events = POLLIN};
        int pr = poll(&pf, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        ssize_t n = read(rd[0], line + got, sizeof line - 1 - got);
        if (n <= 0) {
            if (!got)
                snprintf(line, sizeof line, "error: the capture helper exited before capturing");
            break;
        }
        got += (size_t)n;
        line[got] = '\0';
        if (strchr(line, '\n') || got == sizeof line - 1)
            break;
    }
    /* Kept open: a helper that fails while capturing (disk full) says why on it. */
    ready_rd = rd[0];
    snprintf(node_name, sizeof node_name, "%s", host);
    {
        /* Anything after the first line belongs to the end (a quick failure). */
        char *nl = strchr(line, '\n');
        if (nl && nl[1])
            snprintf(late, sizeof late, "%s", nl + 1);
    }
    line[strcspn(line, "\n")] = '\0';
    if (strncmp(line, "ok", 2) == 0) {
        status[0] = '\0';
        return 0;
    }
    /* A leading '+': the node captures on its other interfaces (a partial start). */
    snprintf(status, STATUS, "%s%.60s: %.180s", strncmp(line, "partial: ", 9) == 0 ? "+" : "", host,
             strncmp(line, "error: ", 7) == 0     ? line + 7
             : strncmp(line, "partial: ", 9) == 0 ? line + 9
                                                  : line);
    return strncmp(line, "partial: ", 9) == 0 ? 0 : -1;
}

void cs__capture_start(MPI_Comm priv, int rank, int size)
{
    const char *want = getenv("COMMSCOPE_CAPTURE");
    if (!want || !*want || priv == MPI_COMM_NULL)
        return;
    active = 1;
    configured = 1;
    char mine[INFO];
    memset(mine, 0, sizeof mine);
    my_info(mine);
    char *all = calloc((size_t)size, INFO);
    char *stat_all = rank == 0 ? calloc((size_t)size, STATUS) : NULL;
    char status[STATUS] = "";
    /* Everyone takes part even without memory, so nobody hangs. */
    int rc = PMPI_Allgather(mine, INFO, MPI_CHAR, all, all ? INFO : 0, MPI_CHAR, priv);
    if (rc == MPI_SUCCESS && all) {
        int leader = rank;
        for (int r = 0; r < rank; r++) {
            const char *o = all + (size_t)r * INFO;
            if (host_len(o) == host_len(mine) && strncmp(o, mine, (size_t)host_len(mine)) == 0) {
                leader = r;
                break;
            }
        }
        if (leader == rank)
            spawn_helper(all, size, mine, status);
    } else if (rank == 0) {
        snprintf(status, STATUS, "could not exchange the job's host addresses; no capture");
    }
    PMPI_Gather(status, STATUS, MPI_CHAR, stat_all, stat_all ? STATUS : 0, MPI_CHAR, 0, priv);
    if (rank == 0 && stat_all) {
        /* Failed nodes and partial ones (some interfaces missing), each said once. */
        for (int partial = 0; partial < 2; partial++) {
            int bad = 0, first = -1;
            for (int r = 0; r < size; r++) {
                const char *st = stat_all + (size_t)r * STATUS;
                if (st[0] && (st[0] == '+') == partial) {
                    bad++;
                    if (first < 0)
                        first = r;
                }
            }
            if (!bad)
                continue;
            char *st = stat_all + (size_t)first * STATUS;
            st[STATUS - 1] = '\0';
            if (partial)
                cs_warn("wire capture: %s; %d of the job's nodes capture on their other "
                        "interfaces only",
                        st + 1, bad);
            else
                cs_warn("wire capture: %s; %d of the job's nodes could not capture; the run goes "
                        "on without capture there",
                        st, bad);
        }
    }
    free(stat_all);
    free(all);
}

/* Rank 0 says once what went wrong on the nodes while capturing (collective over priv). */
static void say_end(MPI_Comm priv)
{
    char status[STATUS] = "";
    if (ready_rd >= 0) {
        /* The helper has exited: read to the end of what it wrote, without waiting. */
        size_t got = strlen(late);
        ssize_t n;
        fcntl(ready_rd, F_SETFL, O_NONBLOCK);
        while (got < sizeof late - 1 && (n = read(ready_rd, late + got, sizeof late - 1 - got)) > 0)
            got += (size_t)n;
        late[got] = '\0';
        close(ready_rd);
        ready_rd = -1;
        char *e = strstr(late, "error: ");
        if (e) {
            e[strcspn(e, "\n")] = '\0';
            snprintf(status, sizeof status, "%.60s: %.180s", node_name, e + 7);
        }
    }
    if (priv == MPI_COMM_NULL)
        return;
    int rank = 0, size = 0;
    PMPI_Comm_rank(priv, &rank);
    PMPI_Comm_size(priv, &size);
    char *all = rank == 0 ? calloc((size_t)size, STATUS) : NULL;
    PMPI_Gather(status, STATUS, MPI_CHAR, all, all ? STATUS : 0, MPI_CHAR, 0, priv);
    if (!all)
        return;
    int bad = 0, first = -1;
    for (int r = 0; r < size; r++)
        if (all[(size_t)r * STATUS]) {
            bad++;
            first = first < 0 ? r : first;
        }
    if (bad) {
        all[(size_t)first * STATUS + STATUS - 1] = '\0';
        cs_warn("wire capture: %s; %d of the job's nodes stopped capturing early; the job is "
                "not affected, and the analysis reads each file up to where it ends",
                all + (size_t)first * STATUS, bad);
    }
    free(all);
}

void cs__capture_stop(MPI_Comm priv)
{
    if (!active)
        return;
    active = 0;
    /* Everybody's last message has arrived before any node stops capturing. */
    if (priv != MPI_COMM_NULL)
        PMPI_Barrier(priv);
    if (helper > 0) {
        kill(helper, SIGTERM);
        struct timespec d = {0, 10 * 1000 * 1000};
        for (int waited = 0;; waited += 10) {
            pid_t w = waitpid(helper, NULL, WNOHANG);
            if (w == helper || (w < 0 && errno != EINTR))
                break;
            if (waited >= STOP_TIMEOUT_MS) {
                kill(helper, SIGKILL);
                waitpid(helper, NULL, 0);
                cs_warn("wire capture: the helper did not finish within %d s and was killed; "
                        "its file ends early",
                        STOP_TIMEOUT_MS / 1000);
                break;
            }
            nanosleep(&d, NULL);
        }
        helper = -1;
    }
    say_end(priv); /* every rank: it gathers */
}

int cs__capture_file(char *path, size_t len)
{
    if (!configured)
        return -1;
    if (!wire_path[0])
        return 0;
    snprintf(path, len, "%s", wire_path);
    return 1;
}
