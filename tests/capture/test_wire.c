/*
 * Wire aggregation on pcap files this test writes itself with libpcap's dump API (and one pcapng
 * file written by hand): exact byte/packet counts per peer and bucket, TCP retransmissions and
 * duplicate ACKs, RoCEv2, IPv6, and the messages for empty, truncated and foreign files.
 */
#include <arpa/inet.h>
#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cs_test.h"
#include "capture.h"

static char dir[256];

/* ---- frame builders ---- */

static size_t eth(uint8_t *f, uint16_t type)
{
    memset(f, 0, 14);
    f[0] = 2, f[6] = 4; /* any MACs */
    f[12] = (uint8_t)(type >> 8), f[13] = (uint8_t)type;
    return 14;
}

static size_t ipv4(uint8_t *p, const char *src, const char *dst, uint8_t proto, uint16_t l4len)
{
    memset(p, 0, 20);
    p[0] = 0x45;
    uint16_t tot = (uint16_t)(20 + l4len);
    p[2] = (uint8_t)(tot >> 8), p[3] = (uint8_t)tot;
    p[8] = 64;
    p[9] = proto;
    inet_pton(AF_INET, src, p + 12);
    inet_pton(AF_INET, dst, p + 16);
    return 20;
}

static size_t tcp(uint8_t *t, uint16_t sp, uint16_t dp, uint32_t seq, uint32_t ack, uint8_t flags,
                  uint16_t win)
{
    memset(t, 0, 20);
    t[0] = (uint8_t)(sp >> 8), t[1] = (uint8_t)sp, t[2] = (uint8_t)(dp >> 8), t[3] = (uint8_t)dp;
    t[4] = (uint8_t)(seq >> 24), t[5] = (uint8_t)(seq >> 16), t[6] = (uint8_t)(seq >> 8),
    t[7] = (uint8_t)seq;
    t[8] = (uint8_t)(ack >> 24), t[9] = (uint8_t)(ack >> 16), t[10] = (uint8_t)(ack >> 8),
    t[11] = (uint8_t)ack;
    t[12] = 5 << 4;
    t[13] = flags;
    t[14] = (uint8_t)(win >> 8), t[15] = (uint8_t)win;
    return 20;
}

struct pk {
    uint64_t ts;
    uint8_t d[128];
    uint32_t caplen, len;
};

static struct pk pks[256];
static int npk;

/* A TCP segment of plen payload bytes (payload not captured: headers only, like commscope). */
static void seg(uint64_t ts, const char *s, const char *d, uint16_t sp, uint16_t dp, uint32_t seq,
                uint32_t ack, uint8_t fl, uint16_t win, uint32_t plen)
{
    struct pk *p = &pks[npk++];
    size_t n = eth(p->d, 0x0800);
    n += ipv4(p->d + n, s, d, 6, (uint16_t)(20 + plen));
    n += tcp(p->d + n, sp, dp, seq, ack, fl, win);
    p->ts = ts;
    p->caplen = (uint32_t)n;
    p->len = (uint32_t)n + plen;
}

static void roce(uint64_t ts, const char *s, const char *d, uint32_t plen)
{
    struct pk *p = &pks[npk++];
    size_t n = eth(p->d, 0x0800);
    n += ipv4(p->d + n, s, d, 17, (uint16_t)(8 + plen));
    memset(p->d + n, 0, 8);
    p->d[n + 0] = 0xc0, p->d[n + 1] = 0x00; /* source port 49152 */
    p->d[n + 2] = CS_WIRE_ROCE_PORT >> 8, p->d[n + 3] = CS_WIRE_ROCE_PORT & 0xff;
    n += 8;
    p->ts = ts;
    p->caplen = (uint32_t)n;
    p->len = (uint32_t)n + plen;
}

static void arp(uint64_t ts)
{
    struct pk *p = &pks[npk++];
    size_t n = eth(p->d, 0x0806);
    memset(p->d + n, 0, 28);
    p->ts = ts;
    p->caplen = p->len = (uint32_t)n + 28;
}

static void tcp6(uint64_t ts, uint32_t plen)
{
    struct pk *p = &pks[npk++];
    size_t n = eth(p->d, 0x86dd);
    uint8_t *ip = p->d + n;
    memset(ip, 0, 40);
    ip[0] = 0x60;
    ip[4] = (uint8_t)((20 + plen) >> 8), ip[5] = (uint8_t)(20 + plen);
    ip[6] = 6, ip[7] = 64;
    inet_pton(AF_INET6, "fd00::1", ip + 8);
    inet_pton(AF_INET6, "fd00::2", ip + 24);
    n += 40;
    n += tcp(p->d + n, 5000, 6000, 1, 1, 0x18, 100);
    p->ts = ts;
    p->caplen = (uint32_t)n;
    p->len = (uint32_t)n + plen;
}

static const uint64_t T0 = 1700000000000000000ull; /* a multiple of 10 ms */
#define MS 1000000ull

/*
 * The scenario: A (10.0.0.1) sends 10 segments of 1000 bytes to B (10.0.0.2) in bucket 0, B
 * acknowledges the first three, then sends 3 duplicate ACKs (bucket 1); A retransmits segments 4
 * and 5 (bucket 1).  A sends 5 RoCEv2 packets of 1000 bytes to C (10.0.0.3) in bucket 2; one ARP;
 * one IPv6 segment.  A sequence number wrap (no retransmission) on a second flow.
 */
static void scenario(void)
{
    npk = 0;
    const char *A = "10.0.0.1", *B = "10.0.0.2", *C = "10.0.0.3";
    seg(T0 + 0 * MS, A, B, 40000, 1024, 0, 0, 0x02, 65535, 0); /* SYN */
    seg(T0 + 0 * MS, B, A, 1024, 40000, 0, 1, 0x12, 65535, 0); /* SYN-ACK */
    for (uint32_t i = 0; i < 10; i++)
        seg(T0 + 1 * MS + i * 100000, A, B, 40000, 1024, 1 + 1000 * i, 1, 0x18, 500, 1000);
    seg(T0 + 3 * MS, B, A, 1024, 40000, 1, 3001, 0x10, 700, 0); /* ack of 3 segments */
    for (int k = 0; k < 3; k++)
        seg(T0 + 12 * MS + (uint64_t)k * MS, B, A, 1024, 40000, 1, 3001, 0x10, 700, 0); /* dup */
    seg(T0 + 16 * MS, A, B, 40000, 1024, 3001, 1, 0x18, 500, 1000); /* retransmission */
    seg(T0 + 17 * MS, A, B, 40000, 1024, 4001, 1, 0x18, 500, 1000); /* retransmission */
    seg(T0 + 18 * MS, B, A, 1024, 40000, 1, 10001, 0x10, 800, 0);   /* new ack, new window */
    /* Sequence numbers wrap past 2^32 on another flow: not a retransmission. */
    seg(T0 + 19 * MS, A, B, 40001, 1025, 0xfffffc00u, 1, 0x18, 500, 1024);
    seg(T0 + 19 * MS, A, B, 40001, 1025, 0x00000000u, 1, 0x18, 500, 1024);
    for (int k = 0; k < 5; k++)
        roce(T0 + 25 * MS + (uint64_t)k * 10000, A, C, 1000);
    arp(T0 + 26 * MS);
    tcp6(T0 + 27 * MS, 300);
}

static void write_pcap(const char *path, int linktype)
{
    pcap_t *dead = pcap_open_dead_with_tstamp_precision(linktype, 128, PCAP_TSTAMP_PRECISION_NANO);
    pcap_dumper_t *d = pcap_dump_open(dead, path);
    CHECK(d != NULL);
    for (int i = 0; d && i < npk; i++) {
        struct pcap_pkthdr h = {.caplen = pks[i].caplen, .len = pks[i].len};
        h.ts.tv_sec = (time_t)(pks[i].ts / 1000000000ull);
        h.ts.tv_usec = (suseconds_t)(pks[i].ts % 1000000000ull); /* nanoseconds in this file */
        pcap_dump((u_char *)d, &h, pks[i].d);
    }
    if (d)
        pcap_dump_close(d);
    pcap_close(dead);
}

/* Totals over the records of (local, peer) given as text. */
static struct cs_wire_counts sum(const struct cs_wire_file *f, const char *l, const char *p,
                                 int64_t bucket)
{
    struct cs_wire_counts s = {0};
    struct cs_wire_addr la, pa;
    cs_wire_addr_parse(l, &la);
    cs_wire_addr_parse(p, &pa);
    int li = cs_wire_file_addr(f, &la), pi = cs_wire_file_addr(f, &pa);
    for (size_t i = 0; i < f->nrecs; i++) {
        const struct cs_wire_rec *r = &f->recs[i];
        if (r->local != li || r->peer != pi)
            continue;
        if (bucket >= 0 && r->bucket != T0 / (10 * MS) + (uint64_t)bucket)
            continue;
        s.tx_bytes += r->c.tx_bytes, s.tx_pkts += r->c.tx_pkts;
        s.rx_bytes += r->c.rx_bytes, s.rx_pkts += r->c.rx_pkts;
        s.tx_retrans += r->c.tx_retrans, s.rx_retrans += r->c.rx_retrans;
        s.tx_dupack += r->c.tx_dupack, s.rx_dupack += r->c.rx_dupack;
        s.roce_bytes += r->c.roce_bytes, s.roce_pkts += r->c.roce_pkts;
    }
    return s;
}

static int read_pcap_into(const char *pcap, struct cs_wire_file *f, char *err, size_t n)
{
    FILE *tmp = tmpfile();
    int rc = cs_wire_read_pcap(pcap, tmp, 0, err, n);
    if (rc < 0) {
        fclose(tmp);
        return rc;
    }
    rewind(tmp);
    char e2[512];
    int r2 = cs_wire_file_read_stream(tmp, "tmp", f, e2, sizeof e2);
    fclose(tmp);
    if (r2 != 0)
        fprintf(stderr, "reading the aggregation: %s\n", e2);
    return r2 ? -1 : rc;
}

static void test_pcap_counts(void)
{
    scenario();
    char path[512];
    snprintf(path, sizeof path, "%s/a.pcap", dir);
    write_pcap(path, DLT_EN10MB);
    struct cs_wire_file f;
    char err[512] = "";
    int rc = read_pcap_into(path, &f, err, sizeof err);
    CHECK_INT(rc, ==, 0);
    if (rc != 0) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    CHECK(f.complete);
    CHECK_INT(f.total_packets, ==, npk);
    CHECK_INT(f.non_ip, ==, 1);
    /* A -> B data: SYN (54) + 10 x 1054 + 2 retransmissions x 1054 + wrap flow 2 x 1078. */
    struct cs_wire_counts ab = sum(&f, "10.0.0.1", "10.0.0.2", -1);
    CHECK_INT(ab.tx_pkts, ==, 1 + 10 + 2 + 2);
    CHECK_INT(ab.tx_bytes, ==, 54 + 12 * 1054 + 2 * 1078);
    CHECK_INT(ab.tx_retrans, ==, 2);
    CHECK_INT(ab.tx_dupack, ==, 0);
    /* No local address in a foreign file: B's packets are B's tx to A. */
    struct cs_wire_counts ba = sum(&f, "10.0.0.2", "10.0.0.1", -1);
    CHECK_INT(ba.tx_pkts, ==, 1 + 1 + 3 + 1);
    CHECK_INT(ba.tx_bytes, ==, 6 * 54);
    CHECK_INT(ba.tx_dupack, ==, 3);
    CHECK_INT(ba.tx_retrans, ==, 0);
    /* Buckets: A's data in bucket 0 (SYN + 10 segments), retransmissions and wrap in bucket 1. */
    struct cs_wire_counts b0 = sum(&f, "10.0.0.1", "10.0.0.2", 0);
    CHECK_INT(b0.tx_pkts, ==, 11);
    CHECK_INT(b0.tx_retrans, ==, 0);
    struct cs_wire_counts b1 = sum(&f, "10.0.0.1", "10.0.0.2", 1);
    CHECK_INT(b1.tx_pkts, ==, 4);
    CHECK_INT(b1.tx_retrans, ==, 2);
    /* RoCEv2 to C in bucket 2. */
    struct cs_wire_counts ac = sum(&f, "10.0.0.1", "10.0.0.3", 2);
    CHECK_INT(ac.roce_pkts, ==, 5);
    CHECK_INT(ac.roce_bytes, ==, 5 * (14 + 20 + 8 + 1000));
    CHECK_INT(ac.tx_bytes, ==, ac.roce_bytes);
    struct cs_wire_counts v6 = sum(&f, "fd00::1", "fd00::2", 2);
    CHECK_INT(v6.tx_pkts, ==, 1);
    CHECK_INT(v6.tx_bytes, ==, 14 + 40 + 20 + 300);
    CHECK_INT(f.nifaces, ==, 1);
    CHECK_STR(f.ifaces[0].name, "a.pcap");
    CHECK_INT(f.ifaces[0].bytes, ==, f.total_bytes - 42); /* everything but the ARP frame */
    cs_wire_file_free(&f);
}

/* With this node's address known, packets are split into tx and rx from its point of view. */
static void test_local_direction(void)
{
    scenario();
    FILE *tmp = tmpfile();
    struct cs_wire_agg *a = cs_wire_agg_new(tmp, 0);
    cs_wire_write_header(tmp, "hA", "test", 0, 128, NULL);
    struct cs_wire_addr me, b;
    cs_wire_addr_parse("10.0.0.1", &me);
    cs_wire_addr_parse("10.0.0.2", &b);
    CHECK_INT(cs_wire_agg_add_local(a, &me), ==, 0);
    CHECK_INT(cs_wire_agg_name_addr(a, &b, "hB"), ==, 0);
    char err[256];
    int i = cs_wire_agg_iface(a, "eth0", DLT_EN10MB, err, sizeof err);
    CHECK_INT(i, ==, 0);
    for (int k = 0; k < npk; k++)
        cs_wire_agg_packet(a, i, pks[k].ts, pks[k].d, pks[k].caplen, pks[k].len);
    CHECK_INT(cs_wire_agg_finish(a), ==, 0);
    cs_wire_agg_free(a);
    rewind(tmp);
    struct cs_wire_file f;
    CHECK_INT(cs_wire_file_read_stream(tmp, "tmp", &f, err, sizeof err), ==, 0);
    fclose(tmp);
    struct cs_wire_counts ab = sum(&f, "10.0.0.1", "10.0.0.2", -1);
    CHECK_INT(ab.tx_bytes, ==, 54 + 12 * 1054 + 2 * 1078);
    CHECK_INT(ab.rx_bytes, ==, 6 * 54);
    CHECK_INT(ab.rx_pkts, ==, 6);
    CHECK_INT(ab.tx_retrans, ==, 2);
    CHECK_INT(ab.rx_dupack, ==, 3);
    CHECK_INT(ab.tx_dupack, ==, 0);
    struct cs_wire_addr bb;
    cs_wire_addr_parse("10.0.0.2", &bb);
    int bi = cs_wire_file_addr(&f, &bb);
    CHECK(bi >= 0);
    if (bi >= 0)
        CHECK_STR(f.addr_host[bi], "hB");
    CHECK_STR(f.host, "hA");
    CHECK_INT(f.nlocals, ==, 1);
    /* An unsupported link type is refused by name. */
    struct cs_wire_agg *a2 = cs_wire_agg_new(NULL, 0);
    CHECK_INT(cs_wire_agg_iface(a2, "wlan0", DLT_IEEE802_11, err, sizeof err), ==, -1);
    CHECK_CONTAINS(err, "link type 105");
    cs_wire_agg_free(a2);
    cs_wire_file_free(&f);
}

static void put_u32(FILE *f, uint32_t v)
{
    fwrite(&v, 4, 1, f);
}

/* A minimal pcapng file (section header, one Ethernet interface, enhanced packet blocks). */
static void write_pcapng(const char *path)
{
    FILE *f = fopen(path, "wb");
    put_u32(f, 0x0a0d0d0a), put_u32(f, 28), put_u32(f, 0x1a2b3c4d);
    uint16_t ver[2] = {1, 0};
    fwrite(ver, 2, 2, f);
    uint64_t len = UINT64_MAX;
    fwrite(&len, 8, 1, f);
    put_u32(f, 28);
    put_u32(f, 1), put_u32(f, 20);
    uint16_t lt[2] = {DLT_EN10MB, 0};
    fwrite(lt, 2, 2, f);
    put_u32(f, 128), put_u32(f, 20);
    for (int i = 0; i < npk; i++) {
        uint32_t pad = (4 - pks[i].caplen % 4) % 4, bl = 32 + pks[i].caplen + pad;
        uint64_t us = pks[i].ts / 1000; /* default resolution: microseconds */
        put_u32(f, 6), put_u32(f, bl), put_u32(f, 0);
        put_u32(f, (uint32_t)(us >> 32)), put_u32(f, (uint32_t)us);
        put_u32(f, pks[i].caplen), put_u32(f, pks[i].len);
        fwrite(pks[i].d, 1, pks[i].caplen, f);
        uint8_t z[4] = {0};
        fwrite(z, 1, pad, f);
        put_u32(f, bl);
    }
    fclose(f);
}

static void test_pcapng(void)
{
    scenario();
    char path[512];
    snprintf(path, sizeof path, "%s/b.pcapng", dir);
    write_pcapng(path);
    struct cs_wire_file f;
    char err[512] = "";
    int rc = read_pcap_into(path, &f, err, sizeof err);
    CHECK_INT(rc, ==, 0);
    if (rc != 0) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    struct cs_wire_counts ab = sum(&f, "10.0.0.1", "10.0.0.2", -1);
    CHECK_INT(ab.tx_bytes, ==, 54 + 12 * 1054 + 2 * 1078);
    CHECK_INT(ab.tx_retrans, ==, 2);
    CHECK_INT(sum(&f, "10.0.0.2", "10.0.0.1", -1).tx_dupack, ==, 3);
    cs_wire_file_free(&f);
}

static void write_bytes(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

static void test_bad_files(void)
{
    char path[512], err[512];
    struct cs_wire_file f;
    snprintf(path, sizeof path, "%s/empty.pcap", dir);
    write_bytes(path, "", 0);
    CHECK_INT(read_pcap_into(path, &f, err, sizeof err), ==, -1);
    CHECK_CONTAINS(err, "empty file");

    snprintf(path, sizeof path, "%s/foreign.pcap", dir);
    write_bytes(path, "GET / HTTP/1.1\r\n\r\nhello world of text", 37);
    CHECK_INT(read_pcap_into(path, &f, err, sizeof err), ==, -1);
    CHECK_CONTAINS(err, "not a pcap or pcapng file (it starts with 47 45 54 20");

    const uint8_t hdr10[10] = {0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0};
    snprintf(path, sizeof path, "%s/short.pcap", dir);
    write_bytes(path, hdr10, sizeof hdr10);
    CHECK_INT(read_pcap_into(path, &f, err, sizeof err), ==, -1);
    CHECK_CONTAINS(err, "truncated pcap file: 10 bytes, its file header needs 24");

    uint8_t v3[24] = {0xd4, 0xc3, 0xb2, 0xa1, 3, 0, 4, 0};
    snprintf(path, sizeof path, "%s/v3.pcap", dir);
    write_bytes(path, v3, sizeof v3);
    CHECK_INT(read_pcap_into(path, &f, err, sizeof err), ==, -1);
    CHECK_CONTAINS(err, "pcap version 3");

    /* Cut in the middle of the fifth packet: the four before are kept, with a warning. */
    scenario();
    snprintf(path, sizeof path, "%s/cut.pcap", dir);
    write_pcap(path, DLT_EN10MB);
    size_t cut = 24;
    for (int i = 0; i < 4; i++)
        cut += 16 + pks[i].caplen;
    cut += 16 + 10;
    CHECK_INT(truncate(path, (off_t)cut), ==, 0);
    int rc = read_pcap_into(path, &f, err, sizeof err);
    CHECK_INT(rc, ==, 1);
    CHECK_CONTAINS(err, "cut short after 4 packets");
    if (rc == 1) {
        CHECK_INT(f.total_packets, ==, 4);
        CHECK_INT(f.nnotes, ==, 1);
        cs_wire_file_free(&f);
    }

    snprintf(path, sizeof path, "%s/wifi.pcap", dir);
    write_pcap(path, DLT_IEEE802_11);
    CHECK_INT(read_pcap_into(path, &f, err, sizeof err), ==, -1);
    CHECK_CONTAINS(err, "wifi.pcap: link type 105");

    /* The commscope-wire reader: wrong magic, wrong version, malformed record, missing end. */
    FILE *t = tmpfile();
    fputs("hello\n", t);
    rewind(t);
    CHECK_INT(cs_wire_file_read_stream(t, "x.csw", &f, err, sizeof err), ==, -1);
    CHECK_CONTAINS(err, "x.csw: not a commscope wire file");
    fclose(t);
    t = tmpfile();
    fputs("commscope-wire 9\n", t);
    rewind(t);
    CHECK_INT(cs_wire_file_read_stream(t, "x.csw", &f, err, sizeof err), ==, -1);
    CHECK_CONTAINS(err, "version 9");
    fclose(t);
    t = tmpfile();
    fputs("commscope-wire 1\niface 0 eth0 linktype 1\naddr 0 10.0.0.1 h1\nb 1 0 0 7 1 1 0 0 0 0 "
          "0 0 0 0\n",
          t);
    rewind(t);
    CHECK_INT(cs_wire_file_read_stream(t, "x.csw", &f, err, sizeof err), ==, -1);
    CHECK_CONTAINS(err, "x.csw:4: malformed line");
    fclose(t);
    t = tmpfile();
    fputs("commscope-wire 1\niface 0 eth0 linktype 1\naddr 0 10.0.0.1 h1\naddr 1 10.0.0.2 -\n"
          "b 1 0 0 1 100 1 0 0 0 0 0 0 0 0\nb 1 0 0 1 50 1 0 0 0 0 0",
          t);
    rewind(t);
    CHECK_INT(cs_wire_file_read_stream(t, "x.csw", &f, err, sizeof err), ==, 0);
    CHECK_INT(f.complete, ==, 0);
    CHECK_INT(f.nrecs, ==, 1); /* the cut last line is dropped */
    CHECK_INT(f.ifaces[0].bytes, ==, 100);
    cs_wire_file_free(&f);
    fclose(t);

    /* Values the analysis cannot compute with are refused with the line and what is wrong (a
     * fuzzer found a bucket width of 2^63 overflowing the analysis' time arithmetic). */
    static const struct {
        const char *line, *why;
    } absurd[] = {
        {"bucket_ns 9223372036854775808\n", "x.csw:2: bucket width not 1 ns to 1 hour"},
        {"bucket_ns 0\n", "x.csw:2: bucket width not 1 ns to 1 hour"},
        {"clock realtime_ns -5 monotonic_ns 7\n", "x.csw:2: clock sample outside 0 to 2^62 ns"},
        {"clock realtime_ns 4611686018427387904 monotonic_ns 7\n", "x.csw:2: clock sample"},
        {"iface 0 eth0 linktype 1\naddr 0 10.0.0.1 h1\nb 461168601843 0 0 0 1 1 0 0 0 0 0 0 0 0\n",
         "x.csw:4: bucket past 2^62 ns"},
        {"iface 0 eth0 linktype 1\naddr 0 10.0.0.1 h1\nb 1 0 0 0 281474976710657 1 0 0 0 0 0 0 0 "
         "0\n",
         "x.csw:4: count above 2^48"},
        {"iface 0 eth0 linktype 1\naddr 0 10.0.0.1 h1\nb 1 0 0 0 1 1 0 0 0 0 0 0 0 0\nbucket_ns "
         "5\n",
         "x.csw:5: bucket width after the first bucket record"},
    };
    for (size_t i = 0; i < sizeof absurd / sizeof absurd[0]; i++) {
        t = tmpfile();
        fprintf(t, "commscope-wire 1\n%s", absurd[i].line);
        rewind(t);
        CHECK_INT(cs_wire_file_read_stream(t, "x.csw", &f, err, sizeof err), ==, -1);
        CHECK_CONTAINS(err, absurd[i].why);
        fclose(t);
    }
    /* The largest values still read: the last bucket that ends by 2^62 ns, counts of 2^48. */
    t = tmpfile();
    fputs("commscope-wire 1\nbucket_ns 3600000000000\niface 0 eth0 linktype 1\naddr 0 10.0.0.1 "
          "h1\nb 1281022 0 0 0 281474976710656 1 0 0 0 0 0 0 0 0\n",
          t);
    rewind(t);
    CHECK_INT(cs_wire_file_read_stream(t, "x.csw", &f, err, sizeof err), ==, 0);
    CHECK_INT(f.nrecs, ==, 1);
    cs_wire_file_free(&f);
    fclose(t);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/cs_wire_test.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_pcap_counts();
    test_local_direction();
    test_pcapng();
    test_bad_files();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return cs_test_result();
}
