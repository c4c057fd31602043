/*
 * The root service of `commscope run` for jobs without MPI (include/commscope/root.h): a TCP
 * listener on the launcher's node that gives the ranks' collectors a common clock (this host's
 * CLOCK_REALTIME, by ping-pong) and receives their closed traces into the run directory, as the
 * MPI gather does for MPI jobs.  One thread accepts; each connection gets a thread of its own, so
 * a slow or broken client holds up nobody.  Every read and write has a timeout.
 *
 * After the program ended, cs__root_svc_finish waits for transfers still running, then looks for
 * the ranks whose trace never arrived: a file on this host (the rank died before it could send
 * it) is copied from where the rank wrote it; otherwise a warning says where it stays.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "commscope/root.h"
#include "commscope/trace.h"
#include "internal.h"

#define IO_MS_DEFAULT 10000
#define ROUNDS_DEFAULT 16
#define CHUNK (1u << 20)
/* Ranks the service keeps track of at most (a bigger world is taken on trust, not tabled). */
#define MAX_TABLE (1 << 20)

struct rank_ent {
    int started;   /* a START session completed */
    int delivered; /* its closed trace is in the run directory */
    char host[64];
    char path[1048];
    /* Progress reports (WATCH sessions). */
    int watched;       /* it reported at least once */
    int watching;      /* its WATCH session is open */
    int bye;           /* its last report said the trace closed */
    uint64_t calls;    /* completed calls at its last report */
    double last_s;     /* CLOCK_MONOTONIC seconds of its last report */
    unsigned snap_gen; /* the snapshot request it answered last */
    int snap_ok;       /* that answer put its trace in the run directory */
    uint64_t dropped;  /* events dropped at its last report */
    int have_tot;      /* tot holds its last totals (live metrics) */
    struct cs_root_totals tot;
};

struct cs__root_svc {
    int lfd;
    int wake[2];
    pthread_t acceptor;
    int acceptor_running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int active; /* connections being served */
    int io_ms;
    uint32_t rounds;
    char run_dir[PATH_MAX];
    char myhost[256];
    char addr[300]; /* what the ranks are told (COMMSCOPE_ROOT) */
    /* The run, from the first accepted hello. */
    int have_run;
    uint64_t run_id;
    int32_t world;
    struct rank_ent *ranks; /* world entries (when world <= MAX_TABLE) */
    unsigned received, have, refused, recovered, snapshots;
    unsigned snap_gen;     /* snapshot requests made (cs__root_svc_snapshot) */
    struct cs__live *live; /* live metrics on (cs__root_svc_metrics_on), else NULL */
    double report_s;       /* the ranks' report interval (s) */
};

struct conn {
    struct cs__root_svc *s;
    int fd;
    char peer[80];
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "commscope run: root service: %s\n", buf);
}

static void reply(int fd, int ok, uint32_t status, uint32_t rounds, const char *msg)
{
    struct cs_root_reply r;
    memset(&r, 0, sizeof r);
    memcpy(r.magic, ok ? CS_ROOT_OK_MAGIC : CS_ROOT_NO_MAGIC, 8);
    r.status = status;
    r.rounds = rounds;
    snprintf(r.msg, sizeof r.msg, "%s", msg ? msg : "");
    cs_root_send_all(fd, &r, sizeof r);
}

/* Refuse: tell the client and say it on stderr, naming the peer. */
static void refuse(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(struct conn *c, const char *fmt, ...)
{
    char msg[240];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    reply(c->fd, 0, CS_ROOT_STATUS_REFUSED, 0, msg);
    pthread_mutex_lock(&c->s->mu);
    c->s->refused++;
    pthread_mutex_unlock(&c->s->mu);
    say("refused a connection from %s: %s", c->peer, msg);
}

/* Printable rendering of up to 8 bytes a foreign client sent. */
static void show_bytes(const unsigned char *b, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < cap; i++)
        k += (size_t)snprintf(out + k, cap - k,
                              b[i] >= 32 && b[i] < 127 && b[i] != '\\' ? "%c" : "\\x%02x", b[i]);
    out[k] = '\0';
}

static void dest_path(const struct cs__root_svc *s, int rank, int tmp, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%srank-%05d.cst%s", s->run_dir, tmp ? "." : "", rank, tmp ? ".tmp" : "");
}

/* Nonzero when path holds a trace with this nonce and size. */
static int same_trace(const char *path, uint64_t nonce, uint64_t size)
{
    struct stat st;
    struct cs_file_header h;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int same = fstat(fd, &st) == 0 && (uint64_t)st.st_size == size &&
               pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
               memcmp(h.magic, CS_TRACE_MAGIC, 8) == 0 && h.nonce == nonce;
    close(fd);
    return same;
}

/* Nonzero when path holds a trace of this rank and run that records calls (no CS_FLAG_NO_CALLS). */
static int holds_calls(const char *path, int rank, uint64_t run_id)
{
    struct cs_file_header h;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    int ok = pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
             memcmp(h.magic, CS_TRACE_MAGIC, 8) == 0 && h.rank == rank && h.run_id == run_id &&
             !(h.flags & CS_FLAG_NO_CALLS);
    close(fd);
    return ok;
}

/* Nonzero when path holds a trace with this nonce (a live trace: whatever its size). */
static int same_nonce(const char *path, uint64_t nonce)
{
    struct cs_file_header h;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    int same = pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
               memcmp(h.magic, CS_TRACE_MAGIC, 8) == 0 && h.nonce == nonce;
    close(fd);
    return same;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*
 * The file part of a FINISH session, or of a snapshot in a WATCH session.  The client is told the
 * outcome; returns 0 when the trace is in the run directory (received, or there already), -1
 * when not.  A snapshot never replaces the rank's live trace itself (a run directory the rank
 * writes into: same nonce), which would cut the rank off its own file.
 */
static int take_file(struct conn *c, const struct cs_root_hello *h, int snapshot)
{
    struct cs__root_svc *s = c->s;
    struct cs_root_offer off;
    if (cs_root_recv_all(c->fd, &off, sizeof off) != (ssize_t)sizeof off) {
        say("rank %d (%s) closed the connection before offering its trace", h->rank, c->peer);
        return -1;
    }
    if (off.size < CS_HEADER_SIZE || off.size > CS_ROOT_MAX_FILE) {
        refuse(c,
               "rank %d offered a trace of %llu bytes: not a commscope trace size (4096 .. "
               "2^40)",
               h->rank, (unsigned long long)off.size);
        return -1;
    }
    char dst[PATH_MAX + 32], tmp[PATH_MAX + 32];
    dest_path(s, h->rank, 0, dst, sizeof dst);
    dest_path(s, h->rank, 1, tmp, sizeof tmp);
    if (snapshot ? same_nonce(dst, off.nonce) : same_trace(dst, off.nonce, off.size)) {
        reply(c->fd, 1, CS_ROOT_STATUS_HAVE, 0, "");
        pthread_mutex_lock(&s->mu);
        if (!snapshot)
            s->have++;
        if (s->ranks && !snapshot)
            s->ranks[h->rank].delivered = 1;
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    reply(c->fd, 1, CS_ROOT_STATUS_SEND, 0, "");
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int werr = out < 0 ? errno : 0;
    char *buf = malloc(CHUNK);
    const char *bad = NULL;
    char why[200] = "";
    uint64_t got = 0;
    uint32_t flags = 0; /* the incoming trace's header flags */
    while (got < off.size && buf) {
        size_t want = off.size - got < CHUNK ? (size_t)(off.size - got) : CHUNK;
        ssize_t n = cs_root_recv_all(c->fd, buf, want);
        if (n <= 0)
            break;
        if (got == 0 && !bad) {
            const struct cs_file_header *fh = (const void *)buf;
            if (n < (ssize_t)sizeof *fh || memcmp(fh->magic, CS_TRACE_MAGIC, 8) != 0)
                bad = "it does not start with a commscope trace header";
            else if (fh->rank != h->rank || fh->run_id != h->run_id || fh->nonce != off.nonce) {
                snprintf(why, sizeof why,
                         "its header says rank %d, run %016llx, nonce %016llx; the session said "
                         "rank %d, run %016llx, nonce %016llx",
                         fh->rank, (unsigned long long)fh->run_id, (unsigned long long)fh->nonce,
                         h->rank, (unsigned long long)h->run_id, (unsigned long long)off.nonce);
                bad = why;
            }
            if (!bad)
                flags = fh->flags;
        }
        if (out >= 0 && !werr && write(out, buf, (size_t)n) != n)
            werr = errno ? errno : EIO;
        got += (uint64_t)n;
        if ((size_t)n < want)
            break;
    }
    free(buf);
    if (out >= 0 && close(out) != 0 && !werr)
        werr = errno;
    if (got < off.size) {
        unlink(tmp);
        say("rank %d (%s): the trace ended after %llu of %llu bytes (%s); looking for it in "
            "%s:%s after the run",
            h->rank, c->peer, (unsigned long long)got, (unsigned long long)off.size,
            errno == EAGAIN ? "timed out" : "connection closed", h->host, h->path);
        return -1;
    }
    if (bad || werr) {
        unlink(tmp);
        if (bad)
            refuse(c, "rank %d's trace was refused: %s", h->rank, bad);
        else
            refuse(c, "cannot write %s: %s", tmp, strerror(werr));
        return -1;
    }
    /* A process of the rank that made no MPI or NCCL call (the shell a launcher started, say)
     * never replaces the trace of the one that did. */
    if ((flags & CS_FLAG_NO_CALLS) && holds_calls(dst, h->rank, h->run_id)) {
        unlink(tmp);
        reply(c->fd, 1, CS_ROOT_STATUS_OK, 0, "");
        return 0;
    }
    if (rename(tmp, dst) != 0) {
        int e = errno;
        unlink(tmp);
        refuse(c, "cannot rename %s to %s: %s", tmp, dst, strerror(e));
        return -1;
    }
    reply(c->fd, 1, CS_ROOT_STATUS_OK, 0, "");
    pthread_mutex_lock(&s->mu);
    if (snapshot) {
        s->snapshots++;
    } else {
        s->received++;
        if (s->ranks)
            s->ranks[h->rank].delivered = 1;
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* A WATCH session: progress reports until the rank's last, answering each with an order. */
static void watch_session(struct conn *c, const struct cs_root_hello *h)
{
    struct cs__root_svc *s = c->s;
    /* Reports come at most CS_ROOT_WATCH_MS_MAX apart; a snapshot is bounded by the I/O timeout
     * of each read. */
    int ms = s->io_ms + 3 * CS_ROOT_WATCH_MS_MAX;
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct rank_ent none = {0}, *e = s->ranks ? &s->ranks[h->rank] : &none;
    pthread_mutex_lock(&s->mu);
    e->watching = 1;
    e->bye = 0;
    pthread_mutex_unlock(&s->mu);
    struct cs_root_coll *recs = NULL;
    for (;;) {
        struct cs_root_progress p;
        struct cs_root_totals t;
        if (cs_root_recv_all(c->fd, &p, sizeof p) != (ssize_t)sizeof p)
            break;
        int tot = !!(p.flags & CS_ROOT_PROGRESS_TOTALS);
        if (tot && cs_root_recv_all(c->fd, &t, sizeof t) != (ssize_t)sizeof t)
            break;
        if (tot && t.ncoll > CS_ROOT_COLLS_MAX) {
            say("rank %d (%s) sent %u collective records in one report (at most %u); session "
                "closed",
                h->rank, c->peer, t.ncoll, CS_ROOT_COLLS_MAX);
            break;
        }
        if (tot && t.ncoll) {
            struct cs_root_coll *r = realloc(recs, t.ncoll * sizeof *r);
            if (!r)
                break;
            recs = r;
            size_t want = t.ncoll * sizeof *r;
            if (cs_root_recv_all(c->fd, recs, want) != (ssize_t)want)
                break;
        }
        pthread_mutex_lock(&s->mu);
        if (tot) {
            e->tot = t;
            e->have_tot = 1;
            if (s->live && t.ncoll && s->ranks)
                cs__live_colls(s->live, h->rank, recs, t.ncoll, mono_s());
        }
        e->dropped = p.dropped;
        e->watched = 1;
        e->calls = p.calls;
        e->last_s = mono_s();
        e->bye = !!(p.flags & CS_ROOT_PROGRESS_BYE);
        unsigned gen = s->snap_gen;
        int want = !e->bye && gen != e->snap_gen;
        int bye = e->bye;
        uint32_t flags = s->live ? CS_ROOT_WANT_COLLS : 0;
        pthread_mutex_unlock(&s->mu);
        struct cs_root_order o = {.cmd = want ? CS_ROOT_CMD_SNAPSHOT : CS_ROOT_CMD_CONTINUE,
                                  .flags = flags};
        if (cs_root_send_all(c->fd, &o, sizeof o) != 0 || bye)
            break;
        if (want) {
            int ok = take_file(c, h, 1) == 0;
            pthread_mutex_lock(&s->mu);
            e->snap_gen = gen;
            e->snap_ok = ok;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
            if (!ok)
                break;
        }
    }
    free(recs);
    pthread_mutex_lock(&s->mu);
    e->watching = 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void serve(struct conn *c)
{
    struct cs__root_svc *s = c->s;
    struct cs_root_hello h;
    ssize_t n = cs_root_recv_all(c->fd, h.magic, 8);
    if (n <= 0) {
        if (n < 0)
            say("a connection from %s sent nothing within %d ms; closed", c->peer, s->io_ms);
        return; /* a port probe: connected and closed without a word */
    }
    if (n < 8 || memcmp(h.magic, CS_ROOT_MAGIC, 8) != 0) {
        char shown[48];
        show_bytes((const unsigned char *)h.magic, (size_t)n, shown, sizeof shown);
        refuse(c,
               "not a commscope collector: it sent \"%s\" where a commscope hello starts "
               "with \"CSROOT\\x00\\x01\"",
               shown);
        return;
    }
    if (cs_root_recv_all(c->fd, (char *)&h + 8, sizeof h - 8) != (ssize_t)(sizeof h - 8)) {
        refuse(c, "the hello was cut short (fewer than %zu bytes)", sizeof h);
        return;
    }
    h.host[sizeof h.host - 1] = '\0';
    h.path[sizeof h.path - 1] = '\0';
    if (h.version != CS_ROOT_VERSION) {
        refuse(c,
               "protocol version %u; this service speaks version %u (mixed commscope "
               "versions?)",
               h.version, CS_ROOT_VERSION);
        return;
    }
    if (h.kind != CS_ROOT_START && h.kind != CS_ROOT_FINISH && h.kind != CS_ROOT_WATCH) {
        refuse(c, "unknown session kind %u (1 start, 2 finish, 3 watch)", h.kind);
        return;
    }
    if (h.world_size < 1 || h.world_size > (1 << 24) || h.rank < 0 || h.rank >= h.world_size ||
        h.reserved != 0) {
        refuse(c, "rank %d of world size %d is not a rank of a job", h.rank, h.world_size);
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (!s->have_run) {
        s->have_run = 1;
        s->run_id = h.run_id;
        s->world = h.world_size;
        if (h.world_size <= MAX_TABLE)
            s->ranks = calloc((size_t)h.world_size, sizeof *s->ranks);
    }
    int mismatch = s->run_id != h.run_id || s->world != h.world_size;
    uint64_t rid = s->run_id;
    int32_t world = s->world;
    if (!mismatch && s->ranks) {
        struct rank_ent *e = &s->ranks[h.rank];
        snprintf(e->host, sizeof e->host, "%s", h.host);
        snprintf(e->path, sizeof e->path, "%s", h.path);
    }
    pthread_mutex_unlock(&s->mu);
    if (mismatch) {
        refuse(c,
               "rank %d of run %016llx (world size %d) is not of this run (%016llx, world "
               "size %d): a rank of another job?",
               h.rank, (unsigned long long)h.run_id, h.world_size, (unsigned long long)rid, world);
        return;
    }
    reply(c->fd, 1, CS_ROOT_STATUS_OK, s->rounds, "");
    for (uint32_t k = 0; k < s->rounds; k++) {
        uint64_t ping;
        if (cs_root_recv_all(c->fd, &ping, sizeof ping) != (ssize_t)sizeof ping) {
            say("rank %d (%s) stopped after %u of %u clock rounds", h.rank, c->peer, k, s->rounds);
            return;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t t0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        if (cs_root_send_all(c->fd, &t0, sizeof t0) != 0)
            return;
    }
    if (h.kind == CS_ROOT_START) {
        pthread_mutex_lock(&s->mu);
        if (s->ranks)
            s->ranks[h.rank].started = 1;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (h.kind == CS_ROOT_WATCH)
        watch_session(c, &h);
    else
        take_file(c, &h, 0);
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    serve(c);
    /* Close gracefully: a client whose bytes were left unread would otherwise get a reset that
     * can destroy the reply it has not read yet (the refusal message). */
    shutdown(c->fd, SHUT_WR);
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char sink[4096];
    for (int i = 0; i < 16 && recv(c->fd, sink, sizeof sink, 0) > 0; i++)
        ;
    close(c->fd);
    struct cs__root_svc *s = c->s;
    free(c);
    pthread_mutex_lock(&s->mu);
    s->active--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void *accept_main(void *arg)
{
    struct cs__root_svc *s = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN},
                              {.fd = s->wake[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        struct sockaddr_storage sa;
        socklen_t sl = sizeof sa;
        int fd = accept4(s->lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->s = s;
        c->fd = fd;
        char host[64] = "?", port[16] = "?";
        getnameinfo((struct sockaddr *)&sa, sl, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV);
        snprintf(c->peer, sizeof c->peer, "%s port %s", host, port);
        struct timeval tv = {.tv_sec = s->io_ms / 1000, .tv_usec = (s->io_ms % 1000) * 1000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_mutex_lock(&s->mu);
        s->active++;
        pthread_mutex_unlock(&s->mu);
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &at, conn_main, c) != 0)
            conn_main(c); /* no thread to spare: serve it here */
        pthread_attr_destroy(&at);
    }
    return NULL;
}

int cs__root_valid_spec(const char *spec)
{
    char h[256], p[16];
    return cs_root_split_addr(spec, 0, h, sizeof h, p, sizeof p) == 0;
}

static int env_num(const char *name, long lo, long hi, long def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return (int)def;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || x < lo || x > hi ? (int)def : (int)x;
}

int cs__root_svc_start(const char *spec, const char *run_dir, struct cs__root_svc **out, char *addr,
                       size_t cap)
{
    *out = NULL;
    char host[256] = "", port[16] = "0";
    if (spec && cs_root_split_addr(spec, 0, host, sizeof host, port, sizeof port) != 0) {
        fprintf(stderr, "commscope run: root service address '%s' is not HOST:PORT\n", spec);
        return -1;
    }
    struct cs__root_svc *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->lfd = -1;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->io_ms = env_num("COMMSCOPE_ROOT_TIMEOUT_MS", 1, 600000, IO_MS_DEFAULT);
    s->rounds = (uint32_t)env_num("COMMSCOPE_CLOCK_ROUNDS", 1, CS_ROOT_ROUNDS_MAX, ROUNDS_DEFAULT);
    snprintf(s->run_dir, sizeof s->run_dir, "%s", run_dir);
    gethostname(s->myhost, sizeof s->myhost - 1);

    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(spec ? host : NULL, port, &hints, &res);
    int err = 0;
    if (gai != 0) {
        fprintf(stderr, "commscope run: root service address '%s': %s\n", spec ? spec : "*",
                gai_strerror(gai));
        free(s);
        return -1;
    }
    for (struct addrinfo *a = res; a && s->lfd < 0; a = a->ai_next) {
        if (!spec && a->ai_family != AF_INET)
            continue; /* the default: every IPv4 interface */
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 512) != 0) {
            err = errno;
            close(fd);
            continue;
        }
        s->lfd = fd;
    }
    freeaddrinfo(res);
    if (s->lfd < 0) {
        free(s);
        if (spec && err == EADDRNOTAVAIL) {
            snprintf(addr, cap, "%s", spec);
            return 1; /* another node's address: its own `commscope run` hosts the service */
        }
        fprintf(stderr,
                "commscope run: cannot host the root service on %s: %s; the ranks keep their "
                "traces where they write them\n",
                spec ? spec : "a free port", strerror(err ? err : EADDRNOTAVAIL));
        return -1;
    }
    if (spec) {
        /* Port 0 asks for a free port: tell the ranks the one the system chose. */
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        char bound[16] = "";
        if (getsockname(s->lfd, (struct sockaddr *)&ss, &sl) == 0)
            getnameinfo((struct sockaddr *)&ss, sl, NULL, 0, bound, sizeof bound, NI_NUMERICSERV);
        if (strcmp(port, "0") == 0 && bound[0])
            snprintf(s->addr, sizeof s->addr, "%s%s%s:%s", strchr(host, ':') ? "[" : "", host,
                     strchr(host, ':') ? "]" : "", bound);
        else
            snprintf(s->addr, sizeof s->addr, "%s", spec);
    } else {
        struct sockaddr_in sin;
        socklen_t sl = sizeof sin;
        getsockname(s->lfd, (struct sockaddr *)&sin, &sl);
        /* Ranks on other nodes reach this one by its name; where the name does not resolve,
         * only local ranks can come, through the loopback address. */
        struct addrinfo *r2 = NULL;
        struct addrinfo h2 = {.ai_socktype = SOCK_STREAM, .ai_family = AF_INET};
        int named = s->myhost[0] && getaddrinfo(s->myhost, NULL, &h2, &r2) == 0;
        if (r2)
            freeaddrinfo(r2);
        snprintf(s->addr, sizeof s->addr, "%s:%u", named ? s->myhost : "127.0.0.1",
                 (unsigned)ntohs(sin.sin_port));
    }
    /* The service's threads (the acceptor, and the connection threads it starts, which inherit
     * its mask) take no signals: commscope run forwards SIGINT/SIGTERM from its main thread,
     * which blocks them until the program's pid is known; a thread with them unblocked would
     * take such a signal in that window and drop it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int started =
        pipe2(s->wake, O_CLOEXEC) == 0 && pthread_create(&s->acceptor, NULL, accept_main, s) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!started) {
        fprintf(stderr, "commscope run: cannot start the root service: %s\n", strerror(errno));
        close(s->lfd);
        if (s->wake[0] >= 0) {
            close(s->wake[0]);
            close(s->wake[1]);
        }
        free(s);
        return -1;
    }
    s->acceptor_running = 1;
    snprintf(addr, cap, "%s", s->addr);
    *out = s;
    return 0;
}

/* Copy src to the run directory as rank's trace (through a temporary name).  Returns 0 or -1. */
static int copy_in(const struct cs__root_svc *s, int rank, const char *src)
{
    char dst[PATH_MAX + 32], tmp[PATH_MAX + 32];
    dest_path(s, rank, 0, dst, sizeof dst);
    dest_path(s, rank, 1, tmp, sizeof tmp);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int out = in >= 0 ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    char *buf = malloc(CHUNK);
    int ok = in >= 0 && out >= 0 && buf;
    ssize_t n;
    while (ok && (n = read(in, buf, CHUNK)) != 0)
        ok = n > 0 && write(out, buf, (size_t)n) == n;
    free(buf);
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        ok = 0;
    if (ok && rename(tmp, dst) == 0)
        return 0;
    unlink(tmp);
    return -1;
}

int cs__root_svc_progress(struct cs__root_svc *s, uint64_t *calls)
{
    int n = 0;
    uint64_t sum = 0;
    pthread_mutex_lock(&s->mu);
    for (int32_t r = 0; s->ranks && r < s->world; r++)
        if (s->ranks[r].watched) {
            sum += s->ranks[r].calls;
            n += s->ranks[r].watching;
        }
    pthread_mutex_unlock(&s->mu);
    *calls = sum;
    return n;
}

/* Append "rank R (HOST, WHAT)" to a list of at most cap bytes ("..." once it is full). */
static void list_rank(char *out, size_t cap, int *n, int r, const char *host, const char *what)
{
    size_t len = strlen(out);
    if (len + 4 >= cap)
        return;
    char item[256];
    snprintf(item, sizeof item, "%srank %d (%s%s%s)", *n ? "; " : "", r, host[0] ? host : "",
             host[0] ? ", " : "", what);
    if (len + strlen(item) + 5 < cap)
        snprintf(out + len, cap - len, "%s", item);
    else
        snprintf(out + len, cap - len, "; ...");
    ++*n;
}

int cs__root_svc_snapshot(struct cs__root_svc *s, int wait_ms, double stale_s, int *copied,
                          char *silent, size_t cap)
{
    silent[0] = '\0';
    double t0 = mono_s(), until = t0 + wait_ms / 1000.0;
    pthread_mutex_lock(&s->mu);
    unsigned gen = ++s->snap_gen, before = s->snapshots;
    for (;;) {
        int pending = 0;
        for (int32_t r = 0; s->ranks && r < s->world; r++) {
            struct rank_ent *e = &s->ranks[r];
            pending += e->watching && e->snap_gen != gen && t0 - e->last_s <= stale_s;
        }
        double now = mono_s();
        if (!pending || now >= until)
            break;
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        double w = until - now < 0.2 ? until - now : 0.2;
        long ns = dl.tv_nsec + (long)(w * 1e9);
        dl.tv_sec += ns / 1000000000L;
        dl.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&s->cv, &s->mu, &dl);
    }
    int got = 0, nsil = 0;
    double now = mono_s();
    for (int32_t r = 0; s->ranks && r < s->world; r++) {
        struct rank_ent *e = &s->ranks[r];
        char what[96];
        if (e->snap_gen == gen && e->snap_ok) {
            got++;
            continue;
        }
        if (e->bye)
            continue; /* its trace closed: gathered as usual */
        if (!e->watched)
            snprintf(what, sizeof what, "never reported");
        else if (!e->watching)
            snprintf(what, sizeof what, "its reports stopped %.1f s ago: the connection closed",
                     now - e->last_s);
        else if (now - e->last_s > stale_s)
            snprintf(what, sizeof what, "no report for %.1f s", now - e->last_s);
        else
            snprintf(what, sizeof what, "its snapshot did not arrive");
        list_rank(silent, cap, &nsil, r, e->host, what);
    }
    *copied = (int)(s->snapshots - before);
    pthread_mutex_unlock(&s->mu);
    return got;
}

int cs__root_svc_metrics_on(struct cs__root_svc *s, double report_s)
{
    pthread_mutex_lock(&s->mu);
    if (!s->live)
        s->live = cs__live_new();
    s->report_s = report_s;
    int ok = s->live != NULL;
    pthread_mutex_unlock(&s->mu);
    return ok ? 0 : -1;
}

/* One metric's header. */
static void metric(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value as the exposition format wants it (backslash, quote and newline escaped). */
static void label_esc(const char *v, char *out, size_t cap)
{
    size_t k = 0;
    for (; *v && k + 3 < cap; v++) {
        if (*v == '\\' || *v == '"' || *v == '\n') {
            out[k++] = '\\';
            out[k++] = *v == '\n' ? 'n' : *v;
        } else {
            out[k++] = *v;
        }
    }
    out[k] = '\0';
}

static void write_metrics(struct cs__root_svc *s, FILE *f, const char *jl, double now)
{
    double stale = 3 * s->report_s + 1;
    uint64_t steps = UINT64_MAX;
    double step_sum = 0;
    int step_ranks = 0;
    for (int32_t r = 0; s->ranks && r < s->world; r++) {
        const struct rank_ent *e = &s->ranks[r];
        if (!e->have_tot)
            continue;
        /* A marker starts a step: the step in progress is complete only once the trace closed. */
        uint64_t done = e->bye || !e->tot.markers ? e->tot.markers : e->tot.markers - 1;
        if (done < steps)
            steps = done;
        if (e->tot.step_n) {
            step_sum += 1e-9 * (double)e->tot.step_ns / e->tot.step_n;
            step_ranks++;
        }
    }
    metric(f, "commscope_steps_total", "counter",
           "Training steps every reporting rank completed (by its step markers, MPI_Pcontrol).");
    char job[170] = "";
    if (jl[0])
        snprintf(job, sizeof job, "{%.*s}", (int)strlen(jl) - 1, jl);
    fprintf(f, "commscope_steps_total%s %" PRIu64 "\n", job, steps == UINT64_MAX ? 0 : steps);
    if (step_ranks) {
        metric(f, "commscope_step_seconds", "gauge",
               "Mean duration of the recent steps: each rank's last 8 (marker to marker), "
               "averaged over the ranks.");
        fprintf(f, "commscope_step_seconds%s %.9g\n", job, step_sum / step_ranks);
    }
    static const struct {
        const char *name, *type, *help;
        int what;
    } per[] = {
        {"commscope_comm_seconds_total", "counter",
         "Time in MPI communication calls, from the rank's trace (the report's comm_s).", 0},
        {"commscope_wait_seconds_total", "counter",
         "Time the rank waited at blocking collectives where everybody waits for the last "
         "arrival, for the last rank to arrive (cross-rank, from the ranks' reports).",
         1},
        {"commscope_caused_wait_seconds_total", "counter",
         "The others' waiting at such collectives attributed to the rank that arrived last.", 2},
        {"commscope_gpu_comm_seconds_total", "counter",
         "Time of the rank's NCCL kernels on the GPU, from its GPU records.", 7},
        {"commscope_calls_total", "counter", "MPI and NCCL communication calls the rank completed.",
         3},
        {"commscope_dropped_events_total", "counter",
         "Events the rank's trace could not record (its cap, a storage fault).", 4},
        {"commscope_rank_up", "gauge",
         "1 while the rank reports (a report within three intervals), 0 when its reports "
         "stopped or its trace closed.",
         5},
        {"commscope_rank_report_age_seconds", "gauge", "Seconds since the rank's last report.", 6},
    };
    for (size_t m = 0; m < sizeof per / sizeof per[0]; m++) {
        metric(f, per[m].name, per[m].type, per[m].help);
        for (int32_t r = 0; s->ranks && r < s->world; r++) {
            const struct rank_ent *e = &s->ranks[r];
            if (!e->watched)
                continue;
            char host[160];
            label_esc(e->host, host, sizeof host);
            double v = 0;
            switch (per[m].what) {
            case 0:
                v = 1e-9 * (double)e->tot.comm_ns;
                break;
            case 1:
                v = cs__live_wait_s(s->live, r);
                break;
            case 2:
                v = cs__live_caused_s(s->live, r);
                break;
            case 3:
                v = (double)e->tot.calls;
                break;
            case 4:
                v = (double)e->dropped;
                break;
            case 5:
                v = e->watching && !e->bye && now - e->last_s <= stale;
                break;
            case 7:
                v = 1e-9 * (double)e->tot.gpu_comm_ns;
                break;
            default:
                v = now - e->last_s;
                break;
            }
            /* commscope_dropped_events_total is labelled by rank alone. */
            if (per[m].what == 4)
                fprintf(f, "%s{%srank=\"%d\"} %.0f\n", per[m].name, jl, r, v);
            else if (per[m].what == 5 || per[m].what == 3)
                fprintf(f, "%s{%srank=\"%d\",host=\"%s\"} %.0f\n", per[m].name, jl, r, host, v);
            else
                fprintf(f, "%s{%srank=\"%d\",host=\"%s\"} %.9g\n", per[m].name, jl, r, host, v);
        }
    }
    metric(f, "commscope_busbw_gbytes_per_second", "gauge",
           "Bus bandwidth (nccl-tests factors) of the blocking collectives judged in the last "
           "interval, per communicator and operation: bytes times the factor over the time "
           "after the last arrival.");
    cs__live_write_busbw(s->live, f, jl);
}

int cs__root_svc_write_metrics(struct cs__root_svc *s, const char *path, int final)
{
    char tmp[PATH_MAX + 16];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    const char *job = getenv("SLURM_JOB_ID");
    char jl[160] = "", jv[128];
    if (job && *job) {
        label_esc(job, jv, sizeof jv);
        snprintf(jl, sizeof jl, "job=\"%s\",", jv);
    }
    pthread_mutex_lock(&s->mu);
    if (!s->live) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    double now = mono_s();
    cs__live_settle(s->live, now, final ? -1 : 3 * s->report_s);
    FILE *f = fopen(tmp, "we");
    if (f)
        write_metrics(s, f, jl, now);
    pthread_mutex_unlock(&s->mu);
    if (!f)
        return -1;
    int bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

void cs__root_svc_finish(struct cs__root_svc *s, int wait_ms, char *summary, size_t cap)
{
    if (!s)
        return;
    /* Transfers still running (every rank that exited normally finished its own before it
     * exited, so this only waits for stragglers, bounded by the I/O timeout). */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += wait_ms / 1000;
    dl.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->mu);
    while (s->active > 0)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) != 0)
            break;
    int busy = s->active;
    pthread_mutex_unlock(&s->mu);
    if (busy)
        say("%d connection(s) still busy after %d ms; going on without them", busy, wait_ms);
    if (write(s->wake[1], "x", 1) == 1 && s->acceptor_running)
        pthread_join(s->acceptor, NULL);
    close(s->lfd);
    close(s->wake[0]);
    close(s->wake[1]);

    pthread_mutex_lock(&s->mu);
    unsigned missing = 0;
    for (int32_t r = 0; s->have_run && s->ranks && r < s->world; r++) {
        struct rank_ent *e = &s->ranks[r];
        char dst[PATH_MAX + 32];
        dest_path(s, r, 0, dst, sizeof dst);
        struct stat st;
        /* A rank that only reported progress (an MPI rank) hands its trace over through MPI. */
        if (e->delivered || (e->watched && !e->started))
            continue;
        if (e->path[0] && strcmp(e->host, s->myhost) == 0 && strcmp(e->path, dst) != 0 &&
            stat(e->path, &st) == 0) {
            if (copy_in(s, r, e->path) == 0) {
                s->recovered++;
                say("rank %d did not hand its trace over (it did not exit normally?); copied it "
                    "from %s (the analysis reads what it holds)",
                    r, e->path);
                continue;
            }
        }
        if (stat(dst, &st) == 0)
            continue; /* written into the run directory itself (shared directory) */
        missing++;
        if (e->path[0])
            say("rank %d's trace did not arrive; it stays at %s:%s", r, e->host, e->path);
        else
            say("rank %d never contacted the root service: its trace is not in %s", r, s->run_dir);
    }
    if (summary)
        snprintf(summary, cap,
                 "%s, %u trace(s) received, %u already in place, %u recovered from local "
                 "files, %u missing, %u connection(s) refused",
                 s->addr, s->received, s->have, s->recovered, missing, s->refused);
    pthread_mutex_unlock(&s->mu);
    if (busy)
        return; /* their threads still use s: it lives until the process ends */
    free(s->ranks);
    cs__live_free(s->live);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
