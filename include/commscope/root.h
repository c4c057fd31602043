/*
 * The root service protocol: how the collector of a rank started without MPI talks to the TCP
 * service that `commscope run` hosts (docs/trace-format.md, "Root service protocol").  Shared by
 * the collector (collector/core/root.c) and the service (launcher/root_service.c).
 *
 * Every integer is little-endian; every message has a fixed size.  One connection is one session:
 *
 *   client: hello (struct cs_root_hello, kind START or FINISH)
 *   service: reply (struct cs_root_reply): "CSROOTOK" with the number of clock rounds, or
 *            "CSROOTNO" with the reason, then the service closes
 *   rounds x { client: u64 its clock (ns);  service: u64 its CLOCK_REALTIME (ns) }
 *   FINISH only:
 *     client: offer (struct cs_root_offer): the closed trace's size and header nonce
 *     service: reply, status SEND (send it), HAVE (the run directory holds this very file already)
 *              or REFUSED (reason in msg)
 *     SEND:  client: `size` bytes of the file;  service: reply, status OK or REFUSED (reason)
 *   WATCH only (while the trace is open, every COMMSCOPE_WATCH_MS):
 *     client: progress (struct cs_root_progress);  service: order (struct cs_root_order)
 *     order SNAPSHOT: client: offer and file as in FINISH (the live trace up to its last claimed
 *     block), the service answering as there; then the next progress
 *     progress with CS_ROOT_PROGRESS_BYE (the trace closes): the service answers and closes
 */
#ifndef COMMSCOPE_ROOT_H
#define COMMSCOPE_ROOT_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#define CS_ROOT_MAGIC "CSROOT\0\1"  /* hello: 8 bytes */
#define CS_ROOT_OK_MAGIC "CSROOTOK" /* reply accepted: 8 bytes */
#define CS_ROOT_NO_MAGIC "CSROOTNO" /* reply refused: 8 bytes, reason in msg */
#define CS_ROOT_VERSION 1u
#define CS_ROOT_ROUNDS_MAX 1000u
/* The largest trace the service accepts (the collector's cap, COMMSCOPE_MAX_MB, is 1 TiB). */
#define CS_ROOT_MAX_FILE (1ull << 40)

enum cs_root_kind {
    CS_ROOT_START = 1,  /* at trace open: clock sample 0 */
    CS_ROOT_FINISH = 2, /* at exit: clock sample 1, then the closed trace */
    CS_ROOT_WATCH = 3,  /* while the trace is open: progress reports, snapshots on request */
};

enum cs_root_status {
    CS_ROOT_STATUS_OK = 0,      /* hello accepted / file written */
    CS_ROOT_STATUS_SEND = 1,    /* offer: send the file */
    CS_ROOT_STATUS_HAVE = 2,    /* offer: already in the run directory (same nonce and size) */
    CS_ROOT_STATUS_REFUSED = 3, /* refused: msg says why */
};

struct cs_root_hello { /* 1152 bytes */
    char magic[8];     /* CS_ROOT_MAGIC */
    uint32_t version;  /* CS_ROOT_VERSION */
    uint32_t kind;     /* enum cs_root_kind */
    int32_t rank;      /* 0 <= rank < world_size */
    int32_t world_size;
    uint64_t run_id;
    int32_t pid;
    uint32_t reserved; /* 0 */
    char host[64];     /* NUL-terminated */
    char path[1048];   /* the rank's local trace file, NUL-terminated (for recovery) */
};

struct cs_root_reply { /* 256 bytes */
    char magic[8];     /* CS_ROOT_OK_MAGIC or CS_ROOT_NO_MAGIC */
    uint32_t status;   /* enum cs_root_status */
    uint32_t rounds;   /* hello accepted: clock rounds to run (1..CS_ROOT_ROUNDS_MAX) */
    char msg[240];     /* NUL-terminated sentence: why refused, or "" */
};

/* The longest interval between two progress reports (COMMSCOPE_WATCH_MS): below the service's
 * default read timeout, so a reporting rank is never taken for a silent one. */
#define CS_ROOT_WATCH_MS_MAX 5000
#define CS_ROOT_PROGRESS_BYE 1u    /* the last report: the trace is closing */
#define CS_ROOT_PROGRESS_TOTALS 2u /* a struct cs_root_totals and its records follow */
/* Collective records one report carries at most (the rest are counted in lost_colls). */
#define CS_ROOT_COLLS_MAX 65536u

struct cs_root_progress { /* 32 bytes */
    uint64_t calls;       /* events committed to the trace so far (completed calls) */
    uint64_t dropped;     /* the header's dropped count */
    uint64_t nonce;       /* the trace's header nonce */
    uint32_t flags;       /* CS_ROOT_PROGRESS_BYE */
    uint32_t reserved;    /* 0 */
};

enum cs_root_cmd {
    CS_ROOT_CMD_CONTINUE = 0, /* report again after the interval */
    CS_ROOT_CMD_SNAPSHOT = 1, /* offer and send the live trace now */
};

#define CS_ROOT_WANT_COLLS 1u /* order flags: send the blocking collectives completed since */

struct cs_root_order { /* 8 bytes */
    uint32_t cmd;      /* enum cs_root_cmd */
    uint32_t flags;    /* CS_ROOT_WANT_COLLS */
};

/* Live metrics (commscope run --metrics): the rank's totals since its trace opened, after a
 * progress report with CS_ROOT_PROGRESS_TOTALS. Times are ns. */
struct cs_root_totals {   /* 64 bytes */
    uint64_t comm_ns;     /* time in MPI communication calls (collectives, point-to-point,
                           * completions, the unrecorded tests), as the analysis' comm_s */
    uint64_t calls;       /* those calls and the NCCL communication calls, as its calls */
    uint64_t markers;     /* step markers (MPI_Pcontrol with a level other than 0) */
    uint64_t step_ns;     /* the summed durations of the last step_n steps (marker to marker) */
    uint32_t step_n;      /* 0 .. 8 */
    uint32_t ncoll;       /* struct cs_root_coll records that follow (<= CS_ROOT_COLLS_MAX) */
    uint64_t lost_colls;  /* records not sent (more than one report carries) */
    uint64_t wall_ns;     /* since the trace opened */
    uint64_t gpu_comm_ns; /* NCCL kernels' time on the GPU (GPU records) */
};

/* One blocking collective the rank completed, in the service's clock (the WATCH session's clock
 * rounds measure the offset). */
struct cs_root_coll { /* 40 bytes */
    uint64_t comm;    /* communicator id */
    uint64_t bytes;   /* max(bytes, bytes_recv) of the event */
    uint64_t t_enter; /* ns, the service's CLOCK_REALTIME */
    uint64_t t_exit;
    uint32_t seq;
    uint16_t op;
    uint16_t reserved; /* 0 */
};

struct cs_root_offer { /* 16 bytes */
    uint64_t size;     /* bytes of the closed trace file */
    uint64_t nonce;    /* its header's nonce */
};

/* Send exactly n bytes on a socket, never raising SIGPIPE.  0, or -1 with errno set (EPIPE or
 * ECONNRESET for a closed peer, EAGAIN for a timeout). */
static inline int cs_root_send_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read n bytes from a socket: the count read (n, or less when the peer closed first, errno then
 * ECONNRESET), or -1 with errno set (EAGAIN for a timeout). */
static inline ssize_t cs_root_recv_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, p + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {
            errno = ECONNRESET;
            break;
        }
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/*
 * Split a root service address "HOST:PORT" or "[IPV6ADDR]:PORT" into host and port (decimal,
 * 0 .. 65535; min_port is the smallest accepted).  Returns 0, or -1 when it is not such an address
 * or the host does not fit hcap.  Used by the collector and the service alike.
 */
static inline int cs_root_split_addr(const char *v, long min_port, char *host, size_t hcap,
                                     char *port, size_t pcap)
{
    const char *h = v, *colon;
    size_t hl;
    if (v[0] == '[') {
        const char *rb = strchr(v, ']');
        if (!rb || rb[1] != ':')
            return -1;
        h = v + 1;
        hl = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = strrchr(v, ':');
        if (!colon)
            return -1;
        hl = (size_t)(colon - v);
    }
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (hl == 0 || hl >= hcap || colon[1] == '\0' || *end || p < min_port || p > 65535)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, pcap, "%ld", p);
    return 0;
}

_Static_assert(sizeof(struct cs_root_hello) == 1152, "hello layout");
_Static_assert(sizeof(struct cs_root_reply) == 256, "reply layout");
_Static_assert(sizeof(struct cs_root_offer) == 16, "offer layout");

#endif
