/*
 * The collector's side of the root service (include/commscope/root.h): ranks started without MPI
 * measure their clock against the service that `commscope run` hosts, and stream their closed
 * trace to it at exit.  Every step has a timeout (COMMSCOPE_ROOT_TIMEOUT_MS), no signal is ever
 * raised (MSG_NOSIGNAL), and the socket is close-on-exec: the program is never held up for long,
 * and a service that is gone only costs a warning.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "commscope/root.h"
#include "front.h"
#include "internal.h"

#define TIMEOUT_MS_DEFAULT 5000
#define TIMEOUT_MS_MAX 600000
#define FILE_CHUNK (1u << 20)

static int timeout_ms(void)
{
    const char *v = getenv("COMMSCOPE_ROOT_TIMEOUT_MS");
    if (!v || !*v)
        return TIMEOUT_MS_DEFAULT;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < 1 || x > TIMEOUT_MS_MAX) {
        static int warned;
        if (!warned++)
            cs_warn("COMMSCOPE_ROOT_TIMEOUT_MS=\"%s\" is not a number of ms in 1..%d; using %d", v,
                    TIMEOUT_MS_MAX, TIMEOUT_MS_DEFAULT);
        return TIMEOUT_MS_DEFAULT;
    }
    return (int)x;
}

int cs__root_where(char *host, size_t hcap, char *port, size_t pcap, char *src, size_t scap)
{
    const char *v = getenv("COMMSCOPE_ROOT");
    if (v && *v) {
        if (strcmp(v, "off") == 0)
            return 0;
        snprintf(src, scap, "COMMSCOPE_ROOT=%s", v);
        if (cs_root_split_addr(v, 1, host, hcap, port, pcap) != 0) {
            cs_warn("COMMSCOPE_ROOT=\"%s\" is not HOST:PORT (or [ADDR]:PORT, port 1..65535)", v);
            return -1;
        }
        return 1;
    }
    const char *ma = getenv("MASTER_ADDR"), *mp = getenv("MASTER_PORT");
    if (!ma || !*ma || !mp || !*mp)
        return 0;
    char *end;
    long p = strtol(mp, &end, 10);
    snprintf(src, scap, "MASTER_ADDR=%s and MASTER_PORT=%s + 1", ma, mp);
    if (*end || p < 1 || p > 65534 || strlen(ma) >= hcap) {
        cs_warn("MASTER_ADDR=\"%s\" / MASTER_PORT=\"%s\" do not give a root service address "
                "(port MASTER_PORT+1)",
                ma, mp);
        return -1;
    }
    snprintf(host, hcap, "%s", ma);
    snprintf(port, pcap, "%ld", p + 1);
    return 1;
}

static void set_io_timeout(int fd, int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* Connect with a timeout.  Returns the socket (blocking, with I/O timeouts) or -1, errno set. */
static int dial(const char *host, const char *port, int ms)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        errno = gai == EAI_SYSTEM ? errno : EHOSTUNREACH;
        return -1;
    }
    int fd = -1, err = ECONNREFUSED;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int rc = connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int pr;
            do {
                pr = poll(&p, 1, ms);
            } while (pr < 0 && errno == EINTR);
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (pr == 0) {
                rc = -1;
                errno = ETIMEDOUT;
            } else if (pr < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0) {
                rc = -1;
            } else if (soerr) {
                rc = -1;
                errno = soerr;
            } else {
                rc = 0;
            }
        }
        if (rc != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        errno = err;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_io_timeout(fd, ms);
    return fd;
}

/* Send or receive exactly n bytes.  Returns 0, or -1 with errno set (EPIPE/ECONNRESET for a
 * closed peer, EAGAIN for a timeout). */
static int send_all(int fd, const void *buf, size_t n)
{
    return cs_root_send_all(fd, buf, n);
}

static int recv_all(int fd, void *buf, size_t n)
{
    return cs_root_recv_all(fd, buf, n) == (ssize_t)n ? 0 : -1;
}

static const char *io_error(void)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return "no answer within COMMSCOPE_ROOT_TIMEOUT_MS";
    if (errno == ECONNRESET || errno == EPIPE)
        return "the service closed the connection";
    return strerror(errno);
}

/* Read a reply.  Returns its status, or -1 with the reason in err. */
static int read_reply(int fd, struct cs_root_reply *r, char *err, size_t cap)
{
    if (recv_all(fd, r, sizeof *r) != 0) {
        snprintf(err, cap, "reading its reply: %s", io_error());
        return -1;
    }
    r->msg[sizeof r->msg - 1] = '\0';
    if (memcmp(r->magic, CS_ROOT_NO_MAGIC, 8) == 0) {
        snprintf(err, cap, "it refused: %s", r->msg[0] ? r->msg : "(no reason given)");
        return -1;
    }
    if (memcmp(r->magic, CS_ROOT_OK_MAGIC, 8) != 0) {
        snprintf(err, cap, "it is not a commscope root service (unexpected reply)");
        return -1;
    }
    return (int)r->status;
}

int cs__root_open(const char *host, const char *port, uint32_t kind, int rank, int size,
                  uint64_t run_id, const char *path, uint32_t *rounds, char *err, size_t cap)
{
    int fd = dial(host, port, timeout_ms());
    if (fd < 0) {
        snprintf(err, cap, "cannot connect to %s port %s: %s", host, port,
                 errno == ETIMEDOUT ? "no answer within COMMSCOPE_ROOT_TIMEOUT_MS"
                                    : strerror(errno));
        return -1;
    }
    struct cs_root_hello h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CS_ROOT_MAGIC, 8);
    h.version = CS_ROOT_VERSION;
    h.kind = kind;
    h.rank = rank;
    h.world_size = size;
    h.run_id = run_id;
    h.pid = (int32_t)getpid();
    gethostname(h.host, sizeof h.host - 1);
    snprintf(h.path, sizeof h.path, "%s", path ? path : "");
    struct cs_root_reply r;
    if (send_all(fd, &h, sizeof h) != 0) {
        snprintf(err, cap, "sending to %s port %s: %s", host, port, io_error());
        close(fd);
        return -1;
    }
    int st = read_reply(fd, &r, err, cap);
    if (st != CS_ROOT_STATUS_OK || r.rounds < 1 || r.rounds > CS_ROOT_ROUNDS_MAX) {
        if (st >= 0)
            snprintf(err, cap, "unexpected reply (status %d, %u rounds)", st, r.rounds);
        close(fd);
        return -1;
    }
    *rounds = r.rounds;
    return fd;
}

struct ping_ctx {
    int fd;
    uint32_t done; /* rounds completed */
};

static int exchange_root(void *ctx, uint64_t t1, uint64_t *t0)
{
    struct ping_ctx *c = ctx;
    if (send_all(c->fd, &t1, sizeof t1) != 0 || recv_all(c->fd, t0, sizeof *t0) != 0)
        return -1;
    c->done++;
    return 0;
}

int cs__root_clock(int fd, uint32_t rounds, struct cs_clock_sample *s)
{
    /* All rounds must complete: the service expects exactly `rounds` pings before the offer. */
    struct ping_ctx c = {.fd = fd, .done = 0};
    if (cs_clock_pingpong(rounds, exchange_root, &c, s) != 0 || c.done != rounds)
        return -1;
    return 0;
}

int cs__root_send_file(int fd, const char *path, uint64_t nonce, uint64_t limit, char *err,
                       size_t cap)
{
    struct stat st;
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0 || fstat(in, &st) != 0) {
        snprintf(err, cap, "cannot read %s: %s", path, strerror(errno));
        if (in >= 0)
            close(in);
        return -1;
    }
    uint64_t size = (uint64_t)st.st_size;
    struct cs_root_offer off = {.size = limit && limit < size ? limit : size, .nonce = nonce};
    struct cs_root_reply r;
    int rc = -1;
    char *buf = NULL;
    if (send_all(fd, &off, sizeof off) != 0) {
        snprintf(err, cap, "offering the trace: %s", io_error());
        goto out;
    }
    int stt = read_reply(fd, &r, err, cap);
    if (stt == CS_ROOT_STATUS_HAVE) {
        rc = 0;
        goto out;
    }
    if (stt != CS_ROOT_STATUS_SEND) {
        if (stt >= 0)
            snprintf(err, cap, "unexpected reply to the offer (status %d)", stt);
        goto out;
    }
    buf = malloc(FILE_CHUNK);
    if (!buf) {
        snprintf(err, cap, "out of memory");
        goto out;
    }
    for (uint64_t done = 0; done < off.size;) {
        size_t want = off.size - done < FILE_CHUNK ? (size_t)(off.size - done) : FILE_CHUNK;
        ssize_t n = pread(in, buf, want, (off_t)done);
        if (n <= 0) {
            snprintf(err, cap, "reading %s at byte %llu: %s", path, (unsigned long long)done,
                     n < 0 ? strerror(errno) : "unexpected end of file");
            goto out;
        }
        if (send_all(fd, buf, (size_t)n) != 0) {
            snprintf(err, cap, "sending the trace (%llu of %llu bytes sent): %s",
                     (unsigned long long)done, (unsigned long long)off.size, io_error());
            goto out;
        }
        done += (uint64_t)n;
    }
    stt = read_reply(fd, &r, err, cap);
    if (stt == CS_ROOT_STATUS_OK)
        rc = 0;
    else if (stt >= 0)
        snprintf(err, cap, "unexpected reply after the trace (status %d)", stt);
out:
    free(buf);
    close(in);
    return rc;
}
