/*
 * Per-peer and per-host traced vs wire (analyzer/passes/wire_expect.c, wire.c; docs/wire.md "Per
 * peer and per host"):
 *
 *  1. the collective ranges per host, on instances built here, against the formulas;
 *  2. runs of 2 ranks on hosts ha and hb whose traces (tw.c) send 3 x 1,000,000 bytes from ha to
 *     hb, with ha's wire file made the way the capture helper makes it (the capture library's
 *     aggregation, ha's address local, hb's named) from a pcap file this test writes with
 *     libpcap's dump API: TCP frames of 1514 bytes carrying 1448 payload bytes each, enough for
 *     the 3,000,000 bytes (ratio 1.0457: ok); the same plus 2,000,000 bytes of UDP between the two
 *     (above); a third of the segments only (below);
 *  3. a capture beyond its flow table, with timestamps past 2116 and frames too short for their
 *     headers: each said, with counts, and the capture's totals listed (captures[]); cut before
 *     its end line, its totals unknown.
 */
#include <arpa/inet.h>
#include <math.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cs_test.h"
#include "internal.h"
#include "tw.h"
#include "wire_expect.h"
#include "wire.h"
#include "capture.h"

static void test_ranges(void)
{
    /* 6 ranks: 0-2 on host 0, 3-4 on host 1, 5 on host 2. */
    int32_t host_of[6] = {0, 0, 0, 1, 1, 2}, members[6] = {0, 1, 2, 3, 4, 5};
    uint64_t size[6];
    struct cs__inst in;
    memset(&in, 0, sizeof in);
    in.n = 6;
    in.members = members;
    in.size = size;
    double p2p, lo, hi;

    struct cs__wire_expect *x = cs__wire_expect_new(3);
    CHECK(x != NULL);
    if (!x)
        return;
    for (int i = 0; i < 6; i++)
        size[i] = 6000;
    in.op = CS_OP_ALLREDUCE;
    cs__wire_expect_instance(x, &in, host_of, 6);
    /* Least: 2(H-1)/H x S = 4/3 x 6000 per host; most: k x max(2(n-1)/n, ceil(log2 n)) x S =
     * k x 3 x 6000. */
    cs__wire_expect_host(x, 0, &p2p, &lo, &hi);
    CHECK_NEAR(lo, 8000, 1e-6);
    CHECK_NEAR(hi, 3 * 3 * 6000, 1e-6);
    cs__wire_expect_host(x, 2, &p2p, &lo, &hi);
    CHECK_NEAR(lo, 8000, 1e-6);
    CHECK_NEAR(hi, 1 * 3 * 6000, 1e-6);
    cs__wire_expect_free(x);

    /* All-to-all of S = 6000 per rank (1000 per pair): host 0 sends exactly 3 x 3 x 1000; most:
     * Bruck, k x ceil(log2 6) / 2 x S = k x 1.5 x 6000. */
    x = cs__wire_expect_new(3);
    in.op = CS_OP_ALLTOALL;
    cs__wire_expect_instance(x, &in, host_of, 6);
    cs__wire_expect_host(x, 0, &p2p, &lo, &hi);
    CHECK_NEAR(lo, 9000, 1e-6);
    CHECK_NEAR(hi, 3 * 1.5 * 6000, 1e-6);
    cs__wire_expect_host(x, 1, &p2p, &lo, &hi);
    CHECK_NEAR(lo, 2 * 4 * 1000, 1e-6);
    cs__wire_expect_free(x);

    /* All-gather (S = the gathered 6000, 1000 per rank): host 1's own 2 blocks leave it;
     * reduce-scatter: host 1's partial sums of the 4 other blocks.  Most: (n-1)/n x S per rank. */
    x = cs__wire_expect_new(3);
    in.op = CS_OP_ALLGATHER;
    cs__wire_expect_instance(x, &in, host_of, 6);
    cs__wire_expect_host(x, 1, &p2p, &lo, &hi);
    CHECK_NEAR(lo, 2000, 1e-6);
    CHECK_NEAR(hi, 2 * 5000, 1e-6);
    cs__wire_expect_free(x);
    x = cs__wire_expect_new(3);
    in.op = CS_OP_REDUCE_SCATTER_BLOCK;
    cs__wire_expect_instance(x, &in, host_of, 6);
    cs__wire_expect_host(x, 1, &p2p, &lo, &hi);
    CHECK_NEAR(lo, 4000, 1e-6);
    CHECK_NEAR(hi, 2 * 5000, 1e-6);
    /* Point-to-point on top, exact; the pair's collective share: the most its sender could send. */
    cs__wire_expect_p2p(x, 1, 2, 12345);
    cs__wire_expect_p2p(x, 1, 1, 999); /* same host: not on the wire */
    double cm;
    CHECK_NEAR(cs__wire_expect_pair(x, 1, 2, &cm), 12345, 0);
    CHECK_NEAR(cm, 2 * 5000, 1e-6);
    cs__wire_expect_host(x, 1, &p2p, &lo, &hi);
    CHECK_NEAR(p2p, 12345, 0);
    /* An instance inside one host adds nothing. */
    int32_t h0[6] = {0, 0, 0, 0, 0, 0};
    cs__wire_expect_instance(x, &in, h0, 6);
    cs__wire_expect_host(x, 0, &p2p, &lo, &hi);
    CHECK_NEAR(lo, 3000, 1e-6); /* from the reduce-scatter above only: (6 - 3) x 1000 */
    cs__wire_expect_free(x);
}

/* ---- generated pcap files ---- */

static uint8_t frame[64];

static size_t headers(const char *src, const char *dst, int udp, uint32_t seq, uint16_t l4len)
{
    memset(frame, 0, sizeof frame);
    frame[12] = 0x08; /* IPv4 */
    uint8_t *ip = frame + 14;
    ip[0] = 0x45;
    uint16_t tot = htons((uint16_t)(20 + l4len));
    memcpy(ip + 2, &tot, 2);
    ip[8] = 64;
    ip[9] = udp ? 17 : 6;
    inet_pton(AF_INET, src, ip + 12);
    inet_pton(AF_INET, dst, ip + 16);
    uint8_t *l4 = ip + 20;
    uint16_t sp = htons(40000), dp = htons(udp ? 9999 : 1024);
    memcpy(l4, &sp, 2);
    memcpy(l4 + 2, &dp, 2);
    if (udp) {
        uint16_t ul = htons(l4len);
        memcpy(l4 + 4, &ul, 2);
        return 14 + 20 + 8;
    }
    uint32_t s = htonl(seq);
    memcpy(l4 + 4, &s, 4);
    l4[12] = 0x50; /* 20-byte header */
    l4[13] = 0x18; /* PSH ACK */
    return 14 + 20 + 20;
}

/* segs TCP frames of 1448 payload bytes from ha to hb, then udp_bytes of UDP in 1500-byte
 * frames; snap length 64 as the capture keeps headers only. */
static void write_pcap(const char *path, int segs, long udp_bytes, uint64_t t0_ns)
{
    pcap_t *dead = pcap_open_dead(DLT_EN10MB, 64);
    pcap_dumper_t *d = pcap_dump_open(dead, path);
    CHECK(d != NULL);
    if (!d)
        return;
    uint64_t t = t0_ns;
    for (int i = 0; i < segs; i++, t += 10000) {
        struct pcap_pkthdr h = {
            {(time_t)(t / 1000000000), (suseconds_t)(t % 1000000000 / 1000)}, 0, 1514};
        h.caplen = (bpf_u_int32)headers("10.0.0.1", "10.0.0.2", 0, 1 + 1448u * (uint32_t)i, 1468);
        pcap_dump((u_char *)d, &h, frame);
    }
    for (long b = 0; b < udp_bytes; b += 1500, t += 10000) {
        struct pcap_pkthdr h = {
            {(time_t)(t / 1000000000), (suseconds_t)(t % 1000000000 / 1000)}, 0, 1500};
        h.caplen = (bpf_u_int32)headers("10.0.0.1", "10.0.0.2", 1, 0, 1466);
        pcap_dump((u_char *)d, &h, frame);
    }
    pcap_dump_close(d);
    pcap_close(dead);
}

/* An aggregation into ha's wire file at path (opened into *f, header written), set up as the live
 * helper sets it up: ha's address local, hb's named, interface eth0 (*ifc).  NULL (nothing open)
 * when the file or the aggregation cannot be made. */
static struct cs_wire_agg *ha_agg(const char *path, FILE **f, int *ifc)
{
    char err[256];
    *f = fopen(path, "w");
    CHECK(*f != NULL);
    if (!*f)
        return NULL;
    cs_wire_write_header(*f, "ha", "live", 0, 64, "host 10.0.0.2");
    struct cs_wire_agg *a = cs_wire_agg_new(*f, 0);
    CHECK(a != NULL);
    if (!a) {
        fclose(*f);
        return NULL;
    }
    struct cs_wire_addr me, peer;
    CHECK_INT(cs_wire_addr_parse("10.0.0.1", &me), ==, 0);
    CHECK_INT(cs_wire_addr_parse("10.0.0.2", &peer), ==, 0);
    cs_wire_agg_add_local(a, &me);
    cs_wire_agg_name_addr(a, &peer, "hb");
    *ifc = cs_wire_agg_iface(a, "eth0", DLT_EN10MB, err, sizeof err);
    CHECK_INT(*ifc, ==, 0);
    return a;
}

/* ha's wire file from the pcap, aggregated as the live helper aggregates its packets. */
static void write_wire(const char *pcap, const char *out)
{
    FILE *f;
    int ifc;
    struct cs_wire_agg *a = ha_agg(out, &f, &ifc);
    if (!a)
        return;
    char perr[PCAP_ERRBUF_SIZE];
    pcap_t *p = pcap_open_offline(pcap, perr);
    CHECK(p != NULL);
    struct pcap_pkthdr *h;
    const u_char *data;
    while (p && pcap_next_ex(p, &h, &data) == 1)
        cs_wire_agg_packet(a, ifc,
                           (uint64_t)h->ts.tv_sec * 1000000000ull + (uint64_t)h->ts.tv_usec * 1000,
                           data, h->caplen, h->len);
    if (p)
        pcap_close(p);
    CHECK_INT(cs_wire_agg_finish(a), ==, 0);
    cs_wire_agg_free(a);
    fclose(f);
}

static void write_traces(const char *dir)
{
    char p[600];
    for (int r = 0; r < 2; r++) {
        struct tw *w = tw_new(r, 2, 0x77, 5 + (uint64_t)r);
        struct cs_file_header *h = tw_header(w);
        snprintf(h->host, sizeof h->host, "%s", r ? "hb" : "ha");
        h->t_init = 1000;
        h->t_finalize = 100000;
        int32_t m[2] = {0, 1};
        tw_comm(w, CS_COMM_WORLD_ID, 0, 2, r, m);
        struct cs_event e = {.t_begin = 500, .t_end = 1000, .op = CS_OP_INIT, .peer = -1};
        tw_event(w, 0, &e);
        for (int i = 0; i < 3; i++) {
            struct cs_event s = {.t_begin = 2000 + 1000 * (uint64_t)i,
                                 .t_end = 2500 + 1000 * (uint64_t)i,
                                 .comm = CS_COMM_WORLD_ID,
                                 .bytes = r ? 0 : 1000000,
                                 .bytes_recv = r ? 1000000 : 0,
                                 .peer = 1 - r,
                                 .op = r ? CS_OP_RECV : CS_OP_SEND};
            tw_event(w, 0, &s);
        }
        struct cs_event fin = {.t_begin = 99000, .t_end = 99500, .op = CS_OP_FINALIZE, .peer = -1};
        tw_event(w, 0, &fin);
        snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, r);
        CHECK(tw_write(w, p, NULL) > 0);
        tw_free(w);
    }
}

static const struct cs_wire_report_peer *peer_of(const struct cs_wire_report *w, const char *h,
                                                 const char *p)
{
    for (size_t i = 0; w && i < w->npeers; i++)
        if (!strcmp(w->peers[i].host, h) && !strcmp(w->peers[i].peer, p))
            return &w->peers[i];
    return NULL;
}

/* A run whose ha capture holds segs TCP segments and udp_bytes of UDP; the verdicts wanted. */
static void run_case(const char *root, const char *name, int segs, long udp_bytes,
                     const char *verdict)
{
    char dir[400], pcap[500], csw[500], err[512];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    mkdir(dir, 0755);
    write_traces(dir);
    snprintf(pcap, sizeof pcap, "%s/ha.pcap", root);
    snprintf(csw, sizeof csw, "%s/wire-ha.csw", dir);
    write_pcap(pcap, segs, udp_bytes, 1700000000000000000ull);
    write_wire(pcap, csw);
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    const struct cs_wire_report *w = rep.wire;
    CHECK(w != NULL);
    const struct cs_wire_report_peer *p = peer_of(w, "ha", "hb");
    CHECK(p != NULL);
    double wire = segs * 1514.0 + (double)((udp_bytes + 1499) / 1500) * 1500;
    if (p) {
        CHECK_NEAR((double)p->bytes_tx, wire, 0);
        CHECK_NEAR(p->traced_p2p, 3000000, 0);
        CHECK_NEAR(p->coll_max, 0, 0);
        CHECK_NEAR(p->p2p_ratio, wire / 3000000, 1e-12);
        CHECK(p->verdict && !strcmp(p->verdict, verdict));
    }
    CHECK_INT(w ? w->nhosts : 0, ==, 1); /* hb has no capture: not compared */
    if (w && w->nhosts == 1) {
        CHECK_STR(w->hosts[0].host, "ha");
        CHECK_NEAR(w->hosts[0].p2p, 3000000, 0);
        CHECK_NEAR(w->hosts[0].ratio_min, wire / 3000000, 1e-12);
        CHECK_STR(w->hosts[0].verdict, verdict);
    }
    size_t warned = 0;
    for (size_t i = 0; w && i < w->nwarnings; i++)
        warned += strstr(w->warnings[i], "ha -> hb: the wire carried") != NULL;
    CHECK_INT(warned, ==, strcmp(verdict, "ok") ? 1 : 0);
    cs__report_free(&rep);
    cs__run_free(&run);
}

/* The report's "wire" member as JSON (malloc'd), NULL when it cannot be made. */
static char *wire_json(const struct cs_wire_report *w)
{
    char *js = NULL;
    size_t jn = 0;
    FILE *m = open_memstream(&js, &jn);
    if (!m)
        return NULL;
    cs__report_wire_json(w, m);
    if (fclose(m)) {
        free(js);
        return NULL;
    }
    return js;
}

/* A capture that tracked too many TCP flows and saw packets with absurd timestamps: the report
 * says both, with the counts (docs/wire.md). */
static void test_capture_limits(const char *root)
{
    char dir[400], csw[500], err[512];
    snprintf(dir, sizeof dir, "%s/limits", root);
    mkdir(dir, 0755);
    write_traces(dir);
    snprintf(csw, sizeof csw, "%s/wire-ha.csw", dir);
    FILE *f;
    int ifc;
    struct cs_wire_agg *a = ha_agg(csw, &f, &ifc);
    if (!a)
        return;
    /* 65,536 + 7 flows (source port and address vary), one segment each: the last 7 untracked */
    for (uint32_t k = 0; k < 65536 + 7; k++) {
        size_t n = headers("10.0.0.1", "10.0.0.2", 0, 1, 1468);
        frame[14 + 20] = (uint8_t)(k >> 8), frame[14 + 21] = (uint8_t)k; /* source port */
        frame[14 + 18] = (uint8_t)(k >> 16);                             /* destination address */
        cs_wire_agg_packet(a, ifc, 1700000000000000000ull + k, frame, (uint32_t)n, 1514);
    }
    for (int k = 0; k < 3; k++) /* past 2^62 ns */
        cs_wire_agg_packet(a, ifc, (1ull << 62) + (uint64_t)k * 1000000000000ull, frame,
                           (uint32_t)headers("10.0.0.1", "10.0.0.2", 0, 1, 1468), 1514);
    /* 5 ARP frames (not IP); 700 frames cut inside the IP header and 300 inside the TCP header
     * (IP all the same): 1000 short of 66,551 packets, 1.5 %, above the 1 % said */
    for (int k = 0; k < 5; k++) {
        memset(frame, 0, sizeof frame);
        frame[12] = 0x08, frame[13] = 0x06;
        cs_wire_agg_packet(a, ifc, 1700000000100000000ull + (uint64_t)k, frame, 42, 60);
    }
    for (int k = 0; k < 1000; k++)
        cs_wire_agg_packet(
            a, ifc, 1700000000200000000ull + (uint64_t)k, frame,
            (uint32_t)headers("10.0.0.1", "10.0.0.2", 0, 1, 1468) - (k < 700 ? 30 : 10), 1514);
    struct cs_wire_totals t;
    cs_wire_agg_totals(a, &t);
    CHECK_INT(t.untracked, ==, 7);
    CHECK_INT(t.bad_time, ==, 3);
    CHECK_INT(t.non_ip, ==, 5);
    CHECK_INT(t.short_headers, ==, 1000);
    CHECK_INT(t.ip_packets, ==, 65536 + 7 + 300); /* (not those past 2116: counted only) */
    CHECK_INT(cs_wire_agg_finish(a), ==, 0);
    cs_wire_agg_free(a);
    fclose(f);
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    const struct cs_wire_report *w = rep.wire;
    CHECK(w != NULL);
    int untracked = 0, late = 0;
    for (size_t i = 0; w && i < w->nwarnings; i++) {
        untracked += strstr(w->warnings[i], "ha: 7 packets of TCP flows beyond the 65,536") != NULL;
        late += strstr(w->warnings[i], "ha: 3 packets have timestamps past the year 2116") != NULL;
    }
    CHECK_INT(untracked, ==, 1);
    CHECK_INT(late, ==, 1);
    /* the capture's own totals, as listed (captures[]) and said (short headers above 1 %) */
    int short_said = 0;
    for (size_t i = 0; w && i < w->nwarnings; i++)
        short_said += strstr(w->warnings[i], "ha: 1000 of 66551 packets (1.5 %) were captured "
                                             "too short to read their headers") != NULL;
    CHECK_INT(short_said, ==, 1);
    CHECK_INT(w ? w->ncaptures : 0, ==, 1);
    if (w && w->ncaptures == 1) {
        const struct cs_wire_report_capture *c = &w->captures[0];
        CHECK_STR(c->host, "ha");
        CHECK_INT(c->complete, ==, 1);
        CHECK_INT(c->no_capture, ==, 0);
        CHECK_INT(c->packets, ==, 66551);
        CHECK_INT(c->ip_packets, ==, 65843);
        CHECK_INT(c->non_ip, ==, 5);
        CHECK_INT(c->short_headers, ==, 1000);
        CHECK_INT(c->untracked, ==, 7);
        CHECK_INT(c->bad_time, ==, 3);
        char *js = wire_json(w);
        CHECK(js && strstr(js, "\"captures\": [\n      {\"host\": \"ha\", \"captured\": true, "
                               "\"complete\": true, \"packets\": 66551, \"bytes\": "));
        CHECK(js && strstr(js, "\"ip_packets\": 65843, \"non_ip\": 5, \"short_headers\": 1000, "
                               "\"untracked\": 7, \"bad_time\": 3}"));
        free(js);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
    /* The same file cut before its end line: listed as incomplete, its totals unknown (null). */
    char cut[600];
    snprintf(cut, sizeof cut, "sed -i '$d' '%s'", csw);
    CHECK_INT(system(cut), ==, 0);
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    w = rep.wire;
    CHECK_INT(w ? w->ncaptures : 0, ==, 1);
    if (w && w->ncaptures == 1) {
        CHECK_INT(w->captures[0].complete, ==, 0);
        char *js = wire_json(w);
        CHECK(js && strstr(js, "\"complete\": false, \"packets\": null, \"bytes\": null, "
                               "\"ip_packets\": null"));
        free(js);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
}

int main(void)
{
    test_ranges();
    char root[] = "/tmp/cs-test-wire-peers-XXXXXX";
    if (!mkdtemp(root))
        return 1;
    /* 3,000,000 bytes in 1448-byte segments: 2072 segments (the last one short on a real wire,
     * full here: 2072 x 1514 = 3,137,008 frame bytes, ratio 1.0457). */
    run_case(root, "ok", 2072, 0, "ok");
    run_case(root, "above", 2072, 2000000, "above");
    run_case(root, "below", 700, 0, "below");
    test_capture_limits(root);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK_INT(system(cmd), ==, 0);
    return cs_test_result();
}
