/*
 * The packet aggregation and the pcap reader against damaged traffic: a structure-aware fuzzer.
 *
 * The capture parses headers of whatever crosses the wire, so a malformed or hostile packet must
 * never make it read past what was captured, crash, or write a file its own reader refuses.  Each
 * iteration builds a few hundred frames of every kind the aggregation reads (Ethernet with up to
 * two VLAN tags, Linux cooked SLL/SLL2, BSD loopback, raw IPv4/IPv6; IPv4 with options and
 * fragments, IPv6 with extension headers; TCP with options over a few flows, UDP, RoCEv2, ARP),
 * damages about half of them (bytes changed, header fields set to edge values, captured length
 * cut, wire length below the captured one, timestamps jumping back, far ahead or past 2^62 ns,
 * interface indices out of range) and hands each to cs_wire_agg_packet in a buffer of exactly its
 * captured length, so AddressSanitizer catches any read past it.  Then:
 *
 *   - the file written must read back (cs_wire_file_read_stream), complete;
 *   - its totals must be the packets and bytes handed in, and bad_time the packets whose bucket
 *     ends past 2^62 ns;
 *   - the records must add up to the aggregation's totals (IP packets, retransmissions,
 *     duplicate ACKs, RoCE packets), every record's bucket must be one a packet was in, and
 *     their bytes cannot exceed the bytes handed in;
 *   - every undamaged IP frame counts as IP, every undamaged ARP frame as non-IP.
 *
 * The same frames are also written as a pcap file (libpcap's dump API), a few bytes of it
 * damaged (file header, record headers, anywhere), and read with cs_wire_read_pcap: it returns 0,
 * 1 (read with a warning) or -1 with a message, and what it writes reads back.
 *
 * usage: test_wire_fuzz [-n ITERATIONS] [-s SEED]   (CS_FUZZ_ITERATIONS, CS_FUZZ_SEED)
 */
#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cs_test.h"
#include "fuzz.h"
#include "capture.h"

/* What the campaign reached (printed at the end: a fuzzer that never reaches a path is no test
 * of it). */
static struct {
    uint64_t packets, damaged, ip, non_ip, short_headers, bad_time, retrans, dupacks, roce;
    uint64_t pcap_rc[3]; /* -1, 0, 1 */
} seen;

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8),
    p[3] = (uint8_t)v;
}

static const int linktypes[] = {DLT_EN10MB,     DLT_LINUX_SLL,
#ifdef DLT_LINUX_SLL2
                                DLT_LINUX_SLL2,
#endif
                                DLT_NULL,       DLT_LOOP,      DLT_RAW, DLT_IPV4, DLT_IPV6};
#define NLINK ((int)(sizeof linktypes / sizeof linktypes[0]))

/* A few hosts, so flows repeat and the TCP analysis sees sequences, repeats and ACKs. */
static const uint8_t v4[4][4] = {{10, 0, 0, 1}, {10, 0, 0, 2}, {10, 0, 0, 3}, {192, 168, 1, 9}};
static const uint8_t v6[2][16] = {{0xfd, 0, [15] = 1}, {0xfd, 0, [15] = 2}};

struct frame {
    uint8_t d[256];
    uint32_t caplen, len;
    uint64_t ts;
    int iface;
    int kind; /* 0 IP, 1 non-IP (ARP), 2 either (the link type cannot tell) */
    int damaged;
};

/* TCP state per (src, dst) host pair, so segments continue each other. */
static uint32_t seqs[8][8];

/* The link header for linktype lt and the network protocol (4, 6 or 0 for ARP) at f->d. */
static uint32_t link_header(struct frame *f, int lt, int ipv)
{
    uint16_t et = ipv == 4 ? 0x0800 : ipv == 6 ? 0x86dd : 0x0806;
    uint8_t *d = f->d;
    switch (lt) {
    case DLT_EN10MB: {
        memset(d, 0, 12);
        d[0] = 2, d[6] = 4;
        uint32_t n = 12;
        for (int v = (int)below(3); v > 0; v--) { /* VLAN tags */
            put16(d + n, below(2) ? 0x8100 : 0x88a8);
            put16(d + n + 2, (unsigned)below(4096));
            n += 4;
        }
        put16(d + n, et);
        return n + 2;
    }
    case DLT_LINUX_SLL:
        memset(d, 0, 16);
        put16(d + 14, et);
        return 16;
#ifdef DLT_LINUX_SLL2
    case DLT_LINUX_SLL2:
        memset(d, 0, 20);
        put16(d, et);
        return 20;
#endif
    case DLT_NULL:
    case DLT_LOOP:
        memset(d, 0, 4);
        d[lt == DLT_LOOP ? 3 : 0] = ipv == 6 ? 30 : 2;
        return 4;
    default:
        return 0;
    }
}

/* One frame of a plausible kind for link type lt. */
static void build(struct frame *f, int lt)
{
    int arp = lt == DLT_EN10MB || lt == DLT_LINUX_SLL;
    int ipv = lt == DLT_IPV4 ? 4 : lt == DLT_IPV6 ? 6 : below(3) ? 4 : 6;
    if (arp && below(10) == 0)
        ipv = 0;
    uint32_t n = link_header(f, lt, ipv);
    uint8_t *d = f->d;
    f->kind = ipv ? 0 : 1;
    if (!ipv) {
        memset(d + n, 0, 28);
        n += 28;
        f->caplen = f->len = n;
        return;
    }
    int s = (int)below(ipv == 4 ? 4 : 2), t = (int)below(ipv == 4 ? 4 : 2);
    int proto = below(4) == 0 ? 17 : below(8) == 0 ? 1 : 6;
    uint32_t ip = n, l4;
    uint32_t payload = below(3) ? (uint32_t)below(9000) : 0;
    if (ipv == 4) {
        uint32_t opt = below(4) == 0 ? 4 * (uint32_t)below(11) : 0;
        memset(d + ip, 0, 20 + opt);
        d[ip] = (uint8_t)(0x40 | (5 + opt / 4));
        d[ip + 8] = 64;
        d[ip + 9] = (uint8_t)proto;
        if (below(10) == 0)
            put16(d + ip + 6, (unsigned)below(0x2000)); /* a fragment (maybe not the first) */
        memcpy(d + ip + 12, v4[s], 4);
        memcpy(d + ip + 16, v4[t], 4);
        l4 = ip + 20 + opt;
    } else {
        memset(d + ip, 0, 40);
        d[ip] = 0x60;
        d[ip + 7] = 64;
        memcpy(d + ip + 8, v6[s], 16);
        memcpy(d + ip + 24, v6[t], 16);
        l4 = ip + 40;
        int next = proto;
        uint8_t *nh = d + ip + 6;
        for (int e = (int)below(3); e > 0; e--) { /* extension headers */
            static const uint8_t ext[] = {0, 43, 60, 44};
            uint8_t x = ext[below(4)];
            *nh = x;
            memset(d + l4, 0, 8);
            if (x == 44 && below(3) == 0)
                put16(d + l4 + 2, (unsigned)(8 * (1 + below(100)))); /* not the first fragment */
            nh = d + l4;
            l4 += 8; /* hdr ext len 0: 8 bytes; fragment header: 8 */
        }
        *nh = (uint8_t)next;
    }
    uint32_t l4h;
    if (proto == 6) {
        uint32_t opt = below(3) == 0 ? 4 * (uint32_t)below(11) : 0;
        l4h = 20 + opt;
        memset(d + l4, 0, l4h);
        put16(d + l4, 40000 + (unsigned)s);
        put16(d + l4 + 2, 5000 + (unsigned)t);
        uint32_t *sq = &seqs[s + (ipv == 6 ? 4 : 0)][t + (ipv == 6 ? 4 : 0)];
        uint32_t seq = below(8) == 0 ? *sq - (uint32_t)below(5000) : *sq; /* a repeat */
        put32(d + l4 + 4, seq);
        *sq = seq + payload;
        put32(d + l4 + 8, (uint32_t)below(4) * 1000); /* ack: repeats make duplicate ACKs */
        d[l4 + 12] = (uint8_t)((l4h / 4) << 4);
        static const uint8_t fl[] = {0x02, 0x12, 0x10, 0x18, 0x11, 0x04};
        d[l4 + 13] = fl[below(6)];
        put16(d + l4 + 14, below(2) ? 500 : 700);
    } else if (proto == 17) {
        l4h = 8;
        memset(d + l4, 0, 8);
        put16(d + l4, 49152);
        put16(d + l4 + 2, below(2) ? CS_WIRE_ROCE_PORT : 53);
        put16(d + l4 + 4, 8 + payload);
    } else {
        l4h = 8;
        memset(d + l4, 0, 8);
    }
    uint32_t l4len = l4h + payload;
    if (ipv == 4)
        put16(d + ip + 2, (unsigned)(l4 - ip + l4len));
    else
        put16(d + ip + 4, (unsigned)(l4 - ip - 40 + l4len));
    f->caplen = l4 + l4h;
    f->len = f->caplen + payload;
}

/* Damage f: 1 to 4 changes. */
static void damage(struct frame *f, int nifaces, uint64_t bucket_ns)
{
    f->damaged = 1;
    for (int m = 1 + (int)below(4); m > 0; m--) {
        switch (below(9)) {
        case 0:
        case 1: /* a byte (headers only: the payload is not captured) */
            if (f->caplen)
                f->d[below(f->caplen)] = (uint8_t)rnd();
            break;
        case 2: /* a 16-bit field set to an edge value */
            if (f->caplen >= 2) {
                static const unsigned edge[] = {0, 1, 0x7fff, 0x8000, 0xffff, 20, 40, 0x8100};
                put16(f->d + below(f->caplen - 1), edge[below(8)]);
            }
            break;
        case 3: /* a nibble of a length field: IHL, TCP data offset */
            if (f->caplen)
                f->d[below(f->caplen)] = (uint8_t)(below(16) << 4 | below(16));
            break;
        case 4: /* captured length cut */
            f->caplen = (uint32_t)below(f->caplen + 1);
            if (f->len < f->caplen)
                f->len = f->caplen;
            break;
        case 5: /* the wire length below the captured one, or huge */
            f->len = below(2) ? (uint32_t)below(f->caplen + 1) : UINT32_MAX - (uint32_t)below(9);
            break;
        case 6: { /* a timestamp back, far ahead, at the limit, or absurd */
            static const uint64_t far[] = {0, 1, CS_WIRE_TIME_LIMIT, CS_WIRE_TIME_LIMIT - 1,
                                           UINT64_MAX};
            switch (below(4)) {
            case 0:
                f->ts -= below(f->ts / 4 + 1);
                break;
            case 1:
                f->ts += below(1ull << 40);
                break;
            case 2:
                f->ts = (CS_WIRE_TIME_LIMIT / bucket_ns - below(3)) * bucket_ns + below(bucket_ns);
                break;
            default:
                f->ts = far[below(5)];
                break;
            }
            break;
        }
        case 7: /* an interface that does not exist */
            f->iface = below(2) ? -1 - (int)below(3) : nifaces + (int)below(3);
            break;
        default: /* a whole header's worth of random bytes */
            for (uint32_t i = (uint32_t)below(f->caplen + 1); i < f->caplen && i < 64; i++)
                f->d[i] = (uint8_t)rnd();
            break;
        }
    }
}

static int has_bucket(const uint64_t *b, size_t n, uint64_t x)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] == x)
            return 1;
    return 0;
}

/* Write frames fr[0..n) of interface 0 (link type lt) as a pcap file at path; 0 or -1. */
static int write_pcap(const char *path, int lt, const struct frame *fr, int n)
{
    pcap_t *dead = pcap_open_dead_with_tstamp_precision(lt, 65535, PCAP_TSTAMP_PRECISION_NANO);
    pcap_dumper_t *d = dead ? pcap_dump_open(dead, path) : NULL;
    if (!d) {
        if (dead)
            pcap_close(dead);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (fr[i].iface != 0)
            continue;
        struct pcap_pkthdr h = {.caplen = fr[i].caplen, .len = fr[i].len};
        h.ts.tv_sec = (time_t)(fr[i].ts / 1000000000ull % (1ull << 32));
        h.ts.tv_usec = (suseconds_t)(fr[i].ts % 1000000000ull);
        pcap_dump((u_char *)d, &h, fr[i].d);
    }
    pcap_dump_close(d);
    pcap_close(dead);
    return 0;
}

/* Damage 1..3 bytes of the file at path: in the file header, a record header, or anywhere. */
static void damage_file(const char *path)
{
    FILE *f = fopen(path, "r+b");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    for (int m = 1 + (int)below(3); n > 0 && m > 0; m--) {
        long at = below(3) == 0 ? (long)below(24)
                  : below(2)    ? 24 + (long)below(16)
                                : (long)below((uint64_t)n);
        if (at >= n)
            continue;
        fseek(f, at, SEEK_SET);
        fputc((int)(below(4) == 0 ? 0xff : rnd() & 0xff), f);
    }
    if (below(4) == 0 && n > 1) /* cut */
        if (ftruncate(fileno(f), (off_t)below((uint64_t)n)) != 0)
            perror("ftruncate");
    fclose(f);
}

static void iteration(long it, const char *dir)
{
    uint64_t bucket_ns = below(2) ? CS_WIRE_BUCKET_NS_DEFAULT : 1 + below(100000000);
    FILE *out = tmpfile();
    if (!out) {
        CHECK(out != NULL);
        return;
    }
    cs_wire_write_header(out, "h1", "fuzz", bucket_ns, 128, NULL);
    struct cs_wire_agg *a = cs_wire_agg_new(out, bucket_ns);
    CHECK(a != NULL);
    if (!a) {
        fclose(out);
        return;
    }
    /* With local addresses (a live capture) or without (a foreign pcap file). */
    for (int l = (int)below(3); l > 0; l--) {
        struct cs_wire_addr ad = {{0}};
        if (below(2)) {
            ad.b[10] = ad.b[11] = 0xff;
            memcpy(ad.b + 12, v4[below(4)], 4);
        } else {
            memcpy(ad.b, v6[below(2)], 16);
        }
        cs_wire_agg_add_local(a, &ad);
    }
    int nif = 1 + (int)below(3), lt[3];
    char err[512];
    for (int i = 0; i < nif; i++) {
        lt[i] = linktypes[below(NLINK)];
        char name[16];
        snprintf(name, sizeof name, "eth%d", i);
        CHECK_INT(cs_wire_agg_iface(a, name, lt[i], err, sizeof err), ==, i);
    }
    int n = 50 + (int)below(300);
    struct frame *fr = calloc((size_t)n, sizeof *fr);
    uint64_t *buckets = calloc((size_t)n, sizeof *buckets);
    if (!fr || !buckets) {
        CHECK(fr && buckets);
        free(fr);
        free(buckets);
        cs_wire_agg_free(a);
        fclose(out);
        return;
    }
    memset(seqs, 0, sizeof seqs);
    uint64_t ts = 1700000000000000000ull + below(1000000000ull);
    uint64_t want_packets = 0, want_bytes = 0, want_bad_time = 0, clean_ip = 0, clean_arp = 0;
    size_t nb = 0;
    for (int i = 0; i < n; i++) {
        struct frame *f = &fr[i];
        f->iface = (int)below((uint64_t)nif);
        build(f, lt[f->iface]);
        ts += below(3 * bucket_ns / 2 + 1);
        f->ts = ts;
        if (below(2))
            damage(f, nif, bucket_ns);
        /* Exactly the captured bytes: a read past them is an ASan report. */
        uint8_t *buf = malloc(f->caplen ? f->caplen : 1);
        if (!buf)
            continue;
        memcpy(buf, f->d, f->caplen);
        cs_wire_agg_packet(a, f->iface, f->ts, buf, f->caplen, f->len);
        free(buf);
        if (f->iface < 0 || f->iface >= nif)
            continue;
        want_packets++;
        want_bytes += f->len;
        seen.damaged += (uint64_t)f->damaged;
        uint64_t b = f->ts / bucket_ns;
        if (b >= CS_WIRE_TIME_LIMIT / bucket_ns) {
            want_bad_time++;
            continue;
        }
        buckets[nb++] = b;
        if (!f->damaged && f->kind == 0)
            clean_ip++;
        if (!f->damaged && f->kind == 1)
            clean_arp++;
    }
    CHECK_INT(cs_wire_agg_finish(a), ==, 0);
    struct cs_wire_totals t;
    cs_wire_agg_totals(a, &t);
    cs_wire_agg_free(a);
    seen.packets += t.packets, seen.ip += t.ip_packets, seen.non_ip += t.non_ip;
    seen.short_headers += t.short_headers, seen.bad_time += t.bad_time;
    seen.retrans += t.retrans, seen.dupacks += t.dupacks, seen.roce += t.roce_pkts;
    CHECK_INT(t.packets, ==, want_packets);
    CHECK_INT(t.bytes, ==, want_bytes);
    CHECK_INT(t.bad_time, ==, want_bad_time);
    CHECK_INT(t.ip_packets, >=, clean_ip);
    CHECK_INT(t.non_ip, >=, clean_arp);
    rewind(out);
    struct cs_wire_file wf;
    int rc = cs_wire_file_read_stream(out, "fuzz.csw", &wf, err, sizeof err);
    CHECK_INT(rc, ==, 0);
    if (rc) {
        fprintf(stderr, "iteration %ld: the aggregation's file does not read back: %s\n", it, err);
    } else {
        CHECK(wf.complete);
        CHECK_INT(wf.total_packets, ==, t.packets);
        CHECK_INT(wf.total_bytes, ==, t.bytes);
        uint64_t pk = 0, by = 0, re = 0, du = 0, ro = 0;
        int bad_bucket = 0;
        for (size_t i = 0; i < wf.nrecs; i++) {
            const struct cs_wire_counts *c = &wf.recs[i].c;
            pk += c->tx_pkts + c->rx_pkts;
            by += c->tx_bytes + c->rx_bytes;
            re += c->tx_retrans + c->rx_retrans;
            du += c->tx_dupack + c->rx_dupack;
            ro += c->roce_pkts;
            bad_bucket += !has_bucket(buckets, nb, wf.recs[i].bucket);
        }
        CHECK_INT(pk, ==, t.ip_packets);
        CHECK_INT(by, <=, t.bytes);
        CHECK_INT(re, ==, t.retrans);
        CHECK_INT(du, ==, t.dupacks);
        CHECK_INT(ro, ==, t.roce_pkts);
        CHECK_INT(bad_bucket, ==, 0);
        cs_wire_file_free(&wf);
    }
    fclose(out);

    /* The same frames through a (damaged) pcap file. */
    char path[300];
    snprintf(path, sizeof path, "%s/f.pcap", dir);
    if (write_pcap(path, lt[0], fr, n) == 0) {
        if (below(4))
            damage_file(path);
        FILE *o2 = tmpfile();
        if (o2) {
            err[0] = '\0';
            rc = cs_wire_read_pcap(path, o2, 0, err, sizeof err);
            CHECK(rc == 0 || rc == 1 || rc == -1);
            if (rc >= -1 && rc <= 1)
                seen.pcap_rc[rc + 1]++;
            if (rc != 0 && !err[0])
                fprintf(stderr, "iteration %ld: cs_wire_read_pcap returned %d without a message\n",
                        it, rc);
            CHECK(rc == 0 || err[0]);
            if (rc >= 0) {
                rewind(o2);
                char e2[512];
                int r2 = cs_wire_file_read_stream(o2, "pcap.csw", &wf, e2, sizeof e2);
                CHECK_INT(r2, ==, 0);
                if (r2)
                    fprintf(stderr,
                            "iteration %ld: the pcap's aggregation does not read back: %s\n", it,
                            e2);
                else
                    cs_wire_file_free(&wf);
            }
            fclose(o2);
        }
    }
    free(fr);
    free(buckets);
}

int main(int argc, char **argv)
{
    long iters = 300;
    uint64_t seed;
    if (fuzz_args(argc, argv, &iters, &seed, "test_wire_fuzz [-n ITERATIONS] [-s SEED]") < 0)
        return 2;
    char dir[] = "/tmp/cs_wire_fuzz.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    rng = seed;
    printf("test_wire_fuzz: %ld iterations, seed %llu\n", iters, (unsigned long long)seed);
    for (long it = 0; it < iters; it++) {
        int before = cs_test_failures;
        iteration(it, dir);
        if (cs_test_failures != before)
            printf("FAIL iteration %ld (rerun with -s %llu -n %ld)\n", it, (unsigned long long)seed,
                   it + 1);
    }
    printf("test_wire_fuzz: %llu packets (%llu damaged): %llu IP, %llu non-IP, %llu short headers, "
           "%llu past 2^62 ns; %llu retransmissions, %llu duplicate ACKs, %llu RoCE; pcap files: "
           "%llu refused, %llu read, %llu read with a warning\n",
           (unsigned long long)seen.packets, (unsigned long long)seen.damaged,
           (unsigned long long)seen.ip, (unsigned long long)seen.non_ip,
           (unsigned long long)seen.short_headers, (unsigned long long)seen.bad_time,
           (unsigned long long)seen.retrans, (unsigned long long)seen.dupacks,
           (unsigned long long)seen.roce, (unsigned long long)seen.pcap_rc[0],
           (unsigned long long)seen.pcap_rc[1], (unsigned long long)seen.pcap_rc[2]);
    char p[300];
    snprintf(p, sizeof p, "%s/f.pcap", dir);
    unlink(p);
    rmdir(dir);
    return cs_test_result();
}
