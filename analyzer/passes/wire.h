/*
 * The wire section of the report (analyzer/passes/wire.c builds it, analyzer/render/report_wire.c
 * renders it): what the capture saw on each node's interfaces, joined with the traced
 * communication.  Numbers only; definitions in docs/metrics.md ("Wire").
 */
#ifndef COMMSCOPE_ANALYZER_WIRE_H
#define COMMSCOPE_ANALYZER_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct cs_wire_report_iface {
    char host[64], name[64];
    uint64_t bytes, pkts;
    int expected;    /* 1, 0, -1 unknown */
    long speed_mbps; /* -1 unknown */
    double share;    /* of the host's captured bytes */
};
struct cs_wire_report_peer {
    char host[64], peer[64];
    uint64_t bytes_tx, bytes_rx, pkts_tx, pkts_rx;
    uint64_t retransmits, dupacks_rx, roce_bytes;
    double retransmit_rate; /* retransmits / pkts_tx, NaN without packets */
    double peak_gbps;       /* fullest bucket, tx */
    double collective_gbps; /* tx rate in buckets inside collectives, NaN none */
    /* Against the trace (wire_expect.c): exact point-to-point bytes from host to peer, whether
     * a collective also crossed between them, and bytes_tx / traced_p2p when none did. */
    double traced_p2p;   /* NaN: no trace (pcap-only analysis) */
    double coll_max;     /* the most collectives with members on both could have added */
    double p2p_ratio;    /* NaN when not exact (coll_max above 1 % of traced_p2p, or nothing) */
    const char *verdict; /* "ok", "above", "below", or NULL (not compared) */
};
/* One host's sends to the job's other hosts: the wire against the trace's range. */
struct cs_wire_report_host {
    char host[64];
    uint64_t wire_tx;               /* frame bytes its capture saw it send to the job's hosts */
    double p2p, coll_min, coll_max; /* expected: exact p2p, collectives' least and most */
    double ratio_min, ratio_max;    /* wire_tx / (p2p + coll_max), wire_tx / (p2p + coll_min) */
    const char *verdict;            /* "ok", "above", "below" */
};
/* One capture file: what it saw (the end line's totals; 0 when the file ends early). */
struct cs_wire_report_capture {
    char host[1024]; /* the capturing node, or the file's path when it names none */
    uint64_t packets, bytes, ip_packets, non_ip, short_headers, untracked, bad_time;
    int complete;   /* the end line was there (else the totals are unknown) */
    int no_capture; /* the node captured nothing (status no-capture) */
};
struct cs_wire_report_series {
    char host[64], peer[64];
    double t0_s;   /* start, on rank 0's trace clock when known, else CLOCK_REALTIME s */
    double step_s; /* width of one point */
    uint64_t *tx;  /* bytes per point */
    size_t n;
};
struct cs_wire_report {
    char **sources; /* files read */
    size_t nsources;
    struct cs_wire_report_iface *ifaces;
    size_t nifaces;
    struct cs_wire_report_peer *peers;
    size_t npeers;
    struct cs_wire_report_series *series;
    size_t nseries;
    struct cs_wire_report_capture *captures; /* one per capture file, in file order */
    size_t ncaptures;
    struct cs_wire_report_host *hosts; /* hosts with a capture and a trace */
    size_t nhosts;
    uint64_t traced_bytes;  /* bytes the traced communication implies between hosts */
    uint64_t wire_bytes;    /* bytes on the wire between the job's hosts */
    double ratio;           /* wire / traced, NaN without traced bytes */
    double collective_gbps; /* all links, in buckets inside collectives */
    uint64_t retransmits;
    char **warnings;
    unsigned char *verdict; /* per warning: 1 about the job's traffic, repeated in the verdict */
    size_t nwarnings;
    size_t input_problems; /* capture files not read, or read only in part (said in warnings) */
};

void cs__wire_report_free(struct cs_wire_report *w);
void cs__report_wire_text(const struct cs_wire_report *w, FILE *out);
/* The "wire" member (key and value) at JSON depth 1, preceded by a comma. */
void cs__report_wire_json(const struct cs_wire_report *w, FILE *out);

/* pcap/pcapng files given with `commscope analyze --pcap` (read with the run's wire files). */
void cs__wire_set_pcaps(char **paths, int n);
/* The wire report from the pcap files alone (no run directory).  NULL when out of memory. */
struct cs_wire_report *cs__wire_only(void);

/* `commscope analyze --pcap FILE...` without a run directory: print/write (JSON, HTML) the wire
 * section of the files set with cs__wire_set_pcaps.  Returns the command's exit status. */
int cs__analyze_wire_only(const char *json, const char *html, int quiet);
/* report_html.c: an HTML page of the wire section alone.  Returns 0, or nonzero on a write
 * error. */
int cs__report_wire_page(const struct cs_wire_report *w, FILE *f);
/* 1 when path is a directory. */
int cs__is_dir(const char *path);

#endif
