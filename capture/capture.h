/*
 * Wire capture: what crossed the network, aggregated on the node (docs/wire.md).
 *
 *   agg.c       packet headers -> time buckets of bytes/packets per (interface, local address,
 *               peer address), TCP retransmissions and duplicate ACKs per flow, RoCEv2; written
 *               as a commscope-wire/1 text file
 *   pcapfile.c  pcap/pcapng files (ours or other tools') fed through the same aggregation
 *   live.c      the live capture on a node's interfaces (libpcap), stopped by a signal
 *   wirefile.c  the reader of commscope-wire/1 files (used by the analyzer)
 *
 * Only headers are parsed; payload bytes are never looked at or stored.
 */
#ifndef COMMSCOPE_CAPTURE_CAPTURE_H
#define COMMSCOPE_CAPTURE_CAPTURE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "commscope/trace.h"

#define CS_WIRE_MAGIC "commscope-wire"
#define CS_WIRE_VERSION 1
#define CS_WIRE_BUCKET_NS_DEFAULT 10000000ull /* 10 ms */
#define CS_WIRE_SNAPLEN_DEFAULT 128           /* Ethernet + VLAN + IPv6 + TCP with options */
#define CS_WIRE_MAX_IFACES 32
#define CS_WIRE_ROCE_PORT 4791
/* Times in wire files (CLOCK_REALTIME and CLOCK_MONOTONIC ns, bucket ends) stay below the trace
 * times' limit, 2^62 ns (year 2116): the analysis adds and subtracts them. */
#define CS_WIRE_TIME_LIMIT CS_TIME_LIMIT
#define CS_WIRE_BUCKET_NS_MAX 3600000000000ull /* an hour */

/* An address as 16 bytes: IPv4 as ::ffff:a.b.c.d (IPv4-mapped), IPv6 as is. */
struct cs_wire_addr {
    uint8_t b[16];
};
/* Parse "a.b.c.d" or an IPv6 text address.  Returns 0 or -1. */
int cs_wire_addr_parse(const char *s, struct cs_wire_addr *a);
/* Text form into buf (at least 46 bytes); returns buf. */
const char *cs_wire_addr_str(const struct cs_wire_addr *a, char *buf, size_t n);

/* The counters of one (bucket, interface, local address, peer address). */
struct cs_wire_counts {
    uint64_t tx_bytes, tx_pkts, rx_bytes, rx_pkts;
    uint64_t tx_retrans, rx_retrans; /* TCP data segments seen again (sent by local / by peer) */
    uint64_t tx_dupack, rx_dupack;   /* duplicate ACKs sent by local / by peer */
    uint64_t roce_bytes, roce_pkts;  /* RoCEv2 (UDP 4791), both directions (also in tx/rx) */
};

/* The aggregation state of one capture (opaque). */
struct cs_wire_agg;

/*
 * A new aggregation writing commscope-wire/1 records to out (not owned; the header lines are the
 * caller's, see cs_wire_write_header).  bucket_ns: bucket width (0: the default).  Returns NULL
 * when out of memory.  Free with cs_wire_agg_free.
 */
struct cs_wire_agg *cs_wire_agg_new(FILE *out, uint64_t bucket_ns);
void cs_wire_agg_free(struct cs_wire_agg *a);

/*
 * Add an address of this node: packets from it are "tx", to it "rx".  With no local address
 * (a foreign pcap file), every packet counts as tx from its source to its destination.
 * Returns 0, -1 when the table is full.
 */
int cs_wire_agg_add_local(struct cs_wire_agg *a, const struct cs_wire_addr *addr);

/* Name a peer address (host name); the name goes into the file's addr line. */
int cs_wire_agg_name_addr(struct cs_wire_agg *a, const struct cs_wire_addr *addr, const char *host);

/* Register an interface by name and pcap link type (DLT_*).  Returns its index, or -1 (message
 * in err) for a link type commscope cannot parse or too many interfaces. */
int cs_wire_agg_iface(struct cs_wire_agg *a, const char *name, int linktype, char *err,
                      size_t errlen);

/*
 * One packet seen on interface iface at ts_ns (CLOCK_REALTIME ns): caplen bytes of its headers in
 * data, len its length on the wire.  Non-IP packets are counted in the totals only.
 */
void cs_wire_agg_packet(struct cs_wire_agg *a, int iface, uint64_t ts_ns, const uint8_t *data,
                        uint32_t caplen, uint32_t len);

/* Write every open bucket and the totals ("end" line).  Returns 0, or -1 when writing failed
 * (errno kept). */
int cs_wire_agg_finish(struct cs_wire_agg *a);

/* Totals so far. */
struct cs_wire_totals {
    uint64_t packets, bytes, ip_packets, non_ip, short_headers, flows, untracked;
    uint64_t retrans, dupacks, roce_pkts;
    uint64_t bad_time; /* timestamps past 2^62 ns (year 2116): in packets and bytes only */
};
void cs_wire_agg_totals(const struct cs_wire_agg *a, struct cs_wire_totals *t);
/* Nonzero once writing to out failed (disk full...); the aggregation then stops writing. */
int cs_wire_agg_write_failed(const struct cs_wire_agg *a);

/*
 * The file's first lines: magic/version, host, source, bucket width, snap length, filter, and the
 * (CLOCK_REALTIME, CLOCK_MONOTONIC) pair sampled together so the analyzer can put buckets on the
 * trace clock.  Strings must not hold newlines (they are replaced).
 */
void cs_wire_write_header(FILE *out, const char *host, const char *source, uint64_t bucket_ns,
                          int snaplen, const char *filter);

/* ---- pcapfile.c ---- */

/*
 * Feed a pcap or pcapng file through a (fresh) aggregation writing to out, with header lines.
 * Checks the file before libpcap sees it (empty, truncated header, not a capture file: the
 * magic, byte order and version) and says exactly what is wrong.  A file cut short in the middle
 * of a packet keeps the packets before the cut and says so in warn (and the return is 1).
 * Returns 0, 1 (read with a warning, message in warn), or -1 (unreadable, message in err).
 */
int cs_wire_read_pcap(const char *path, FILE *out, uint64_t bucket_ns, char *err, size_t errlen);

/* ---- live.c ---- */

struct cs_wire_live_opts {
    const char *out_path; /* commscope-wire/1 file */
    const char *host;     /* this node's name */
    const char *ifaces[CS_WIRE_MAX_IFACES];
    int nifaces;
    const char *filter; /* BPF filter text, or NULL for all IP */
    uint64_t bucket_ns;
    int snaplen;
    const char *raw_prefix; /* non-NULL: also dump raw packets to RAW_PREFIX-IFACE.pcap */
    uint64_t raw_max_bytes; /* cap over all raw files of this node */
    struct cs_wire_addr locals[64];
    int nlocals;
    struct cs_wire_addr peers[1024];
    char peer_host[1024][64];
    int npeers;
    char expected[CS_WIRE_MAX_IFACES]; /* per ifaces[i]: 1 expected data interface */
    long speed_mbps[CS_WIRE_MAX_IFACES];
    int ready_fd; /* -1, or where "ok\n" / "error: ...\n" goes once capturing */
};

/* Set by a signal handler: the capture loop ends and finishes the file. */
extern volatile int cs_wire_live_stop;

/*
 * Open every interface, say "ok" (or why not) on ready_fd, capture until cs_wire_live_stop is
 * set, write the file.  Interfaces that cannot be opened are named in err and in the file (a
 * "note" line); capture goes on on the others.  Returns 0, 1 when some interfaces failed, or -1
 * when nothing could be captured (err says why: "no permission to capture on eth0 (needs
 * CAP_NET_RAW)...").
 */
int cs_wire_live_run(const struct cs_wire_live_opts *o, char *err, size_t errlen);

/* ---- wirefile.c ---- */

struct cs_wire_iface {
    char name[64];
    int linktype;
    long speed_mbps; /* -1 unknown */
    int expected;    /* 1 expected data interface, 0 not, -1 unknown */
    uint64_t bytes, pkts;
    uint64_t recv, drop; /* libpcap's statistics at the end (drop: kernel buffer overflow) */
    uint64_t seen;       /* packets the capture read (recv - seen: left unread at the end) */
};
struct cs_wire_peer {
    int iface;
    struct cs_wire_addr local, peer;
    struct cs_wire_counts c;
};
/* One bucket record as read. */
struct cs_wire_rec {
    uint64_t bucket;        /* CLOCK_REALTIME ns / bucket_ns */
    int iface, local, peer; /* indices: iface into ifaces, local/peer into addrs */
    struct cs_wire_counts c;
};
struct cs_wire_file {
    char path[1024];
    char host[64];
    char source[1100];
    uint64_t bucket_ns;
    int snaplen;
    int64_t realtime_ns, monotonic_ns; /* sampled together at start; 0 unknown */
    struct cs_wire_iface ifaces[CS_WIRE_MAX_IFACES];
    int nifaces;
    struct cs_wire_addr *addrs;
    char (*addr_host)[64]; /* "" unknown */
    size_t naddrs;
    struct cs_wire_addr locals[64];
    int nlocals;
    struct cs_wire_rec *recs;
    size_t nrecs;
    char **notes; /* "note" lines: capture problems the node reported */
    size_t nnotes;
    int complete;          /* the "end" line was present */
    int status_no_capture; /* "status no-capture": the node captured nothing (see notes) */
    uint64_t total_packets, total_bytes, non_ip, untracked;
    uint64_t bad_time; /* packets left out of the buckets: timestamps past 2^62 ns */
    uint64_t ip_packets, short_headers; /* the end line's "ip" and "short" */
};
/*
 * Read a commscope-wire/1 file.  Returns 0 (*f filled; free with cs_wire_file_free), or -1 with a
 * specific message in err (not a commscope wire file, unsupported version, malformed line N).
 * A file without its "end" line is read (complete = 0).
 */
int cs_wire_file_read(const char *path, struct cs_wire_file *f, char *err, size_t errlen);
/* The same on an open stream (name for messages). */
int cs_wire_file_read_stream(FILE *in, const char *name, struct cs_wire_file *f, char *err,
                             size_t errlen);
void cs_wire_file_free(struct cs_wire_file *f);
/* Index of addr in f->addrs, -1 if absent. */
int cs_wire_file_addr(const struct cs_wire_file *f, const struct cs_wire_addr *addr);

#endif
