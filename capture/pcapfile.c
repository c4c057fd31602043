/*
 * pcap and pcapng files (ours with --capture-raw, or other tools') through the same aggregation
 * as a live capture.  The file is checked before libpcap opens it so a wrong file gets a specific
 * message (as libpcap's sf-pcap.c does: magic, byte order, version, sizes).
 */
#include <errno.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "commscope/input.h"

#include "capture.h"

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

/* Check the file's first bytes.  Returns 0 or -1 with err filled. */
static int check_head(const char *path, char *err, size_t errlen)
{
    FILE *f = cs_input_fopen(path);
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, cs_input_strerror(errno));
        return -1;
    }
    unsigned char h[24];
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    if (n == 0) {
        snprintf(err, errlen, "%s: empty file, not a pcap or pcapng capture", path);
        return -1;
    }
    if (n >= 4 && le32(h) == 0x0a0d0d0au) {
        if (n < 12) {
            snprintf(err, errlen,
                     "%s: truncated pcapng file: %zu bytes, its section header block needs at "
                     "least 28",
                     path, n);
            return -1;
        }
        uint32_t bom = le32(h + 8);
        if (bom != 0x1a2b3c4du && bom != 0x4d3c2b1au) {
            snprintf(err, errlen,
                     "%s: pcapng section header with an unknown byte-order magic 0x%08x", path,
                     bom);
            return -1;
        }
        return 0;
    }
    uint32_t m = n >= 4 ? le32(h) : 0;
    int swapped;
    if (m == 0xa1b2c3d4u || m == 0xa1b23c4du)
        swapped = 0;
    else if (m == 0xd4c3b2a1u || m == 0x4d3cb2a1u)
        swapped = 1;
    else {
        snprintf(err, errlen,
                 "%s: not a pcap or pcapng file (it starts with %02x %02x %02x %02x; a pcap file "
                 "starts with d4 c3 b2 a1 or a1 b2 c3 d4, pcapng with 0a 0d 0d 0a)",
                 path, n > 0 ? h[0] : 0, n > 1 ? h[1] : 0, n > 2 ? h[2] : 0, n > 3 ? h[3] : 0);
        return -1;
    }
    if (n < 24) {
        snprintf(err, errlen, "%s: truncated pcap file: %zu bytes, its file header needs 24", path,
                 n);
        return -1;
    }
    uint16_t major = le16(h + 4);
    if (swapped)
        major = (uint16_t)(major >> 8 | major << 8);
    if (major != 2) {
        snprintf(err, errlen, "%s: pcap version %u, commscope reads version 2", path, major);
        return -1;
    }
    return 0;
}

int cs_wire_read_pcap(const char *path, FILE *out, uint64_t bucket_ns, char *err, size_t errlen)
{
    if (check_head(path, err, errlen) != 0)
        return -1;
    char perr[PCAP_ERRBUF_SIZE] = "";
    pcap_t *p = pcap_open_offline_with_tstamp_precision(path, PCAP_TSTAMP_PRECISION_NANO, perr);
    if (!p) {
        snprintf(err, errlen, "%s: %s", path, perr);
        return -1;
    }
    struct cs_wire_agg *a = cs_wire_agg_new(out, bucket_ns);
    if (!a) {
        pcap_close(p);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char src[1100];
    snprintf(src, sizeof src, "pcap %s", path);
    cs_wire_write_header(out, "-", src, bucket_ns, pcap_snapshot(p), NULL);
    int ifc = cs_wire_agg_iface(a, base, pcap_datalink(p), err, errlen);
    if (ifc < 0) {
        /* err already names the file and the link type. */
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", err);
        snprintf(err, errlen, "%s: %s", path, tmp);
        cs_wire_agg_free(a);
        pcap_close(p);
        return -1;
    }
    struct pcap_pkthdr *ph;
    const u_char *data;
    int r, rc = 0;
    uint64_t n = 0;
    while ((r = pcap_next_ex(p, &ph, &data)) == 1) {
        uint64_t ts = (uint64_t)ph->ts.tv_sec * 1000000000ull + (uint64_t)ph->ts.tv_usec;
        cs_wire_agg_packet(a, ifc, ts, data, ph->caplen, ph->len);
        n++;
    }
    if (r == PCAP_ERROR) {
        snprintf(err, errlen, "%s: cut short after %llu packets (%s); the packets before are used",
                 path, (unsigned long long)n, pcap_geterr(p));
        fprintf(out, "note %s\n", err);
        rc = 1;
    }
    if (cs_wire_agg_finish(a) != 0) {
        snprintf(err, errlen, "%s: writing the aggregation failed: %s", path, strerror(errno));
        rc = -1;
    }
    cs_wire_agg_free(a);
    pcap_close(p);
    return rc;
}
