/*
 * Packet headers into time buckets (commscope-wire/1, docs/wire.md).  Only the link, IP and
 * TCP/UDP headers are read; the payload is never looked at.
 *
 * Buckets stay open for two bucket widths after the newest packet seen, because packets of several
 * interfaces arrive slightly out of order; a packet later than that still counts (its record is
 * written again, and readers add records with the same key).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture.h"

#define OPEN_WINDOW 2
#define MAX_FLOWS (1u << 16)
#define MAX_LOCALS 64

int cs_wire_addr_parse(const char *s, struct cs_wire_addr *a)
{
    struct in_addr v4;
    memset(a, 0, sizeof *a);
    if (inet_pton(AF_INET, s, &v4) == 1) {
        a->b[10] = a->b[11] = 0xff;
        memcpy(a->b + 12, &v4, 4);
        return 0;
    }
    return inet_pton(AF_INET6, s, a->b) == 1 ? 0 : -1;
}

static int is_v4(const struct cs_wire_addr *a)
{
    static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(a->b, pre, 12) == 0;
}

const char *cs_wire_addr_str(const struct cs_wire_addr *a, char *buf, size_t n)
{
    if (!inet_ntop(is_v4(a) ? AF_INET : AF_INET6, is_v4(a) ? a->b + 12 : a->b, buf, (socklen_t)n))
        snprintf(buf, n, "?");
    return buf;
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return h;
}

static uint64_t hash_bytes(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return mix(h);
}

/* ---- addresses: address -> index, names ---- */

struct addr_tab {
    struct cs_wire_addr *a;
    char (*host)[64];
    unsigned char *written; /* its "a" line is in the file */
    size_t n, cap;
    int32_t *slot; /* open addressing, index + 1 */
    size_t nslot;
};

static int addr_grow(struct addr_tab *t)
{
    size_t cap = t->cap ? 2 * t->cap : 64;
    void *a = realloc(t->a, cap * sizeof *t->a);
    if (!a)
        return -1;
    t->a = a;
    void *h = realloc(t->host, cap * sizeof *t->host);
    if (!h)
        return -1;
    t->host = h;
    void *w = realloc(t->written, cap);
    if (!w)
        return -1;
    t->written = w;
    t->cap = cap;
    int32_t *slot = calloc(2 * cap, sizeof *slot);
    if (!slot)
        return -1;
    free(t->slot);
    t->slot = slot;
    t->nslot = 2 * cap;
    for (size_t i = 0; i < t->n; i++) {
        size_t j = hash_bytes(t->a[i].b, 16) & (t->nslot - 1);
        while (t->slot[j])
            j = (j + 1) & (t->nslot - 1);
        t->slot[j] = (int32_t)i + 1;
    }
    return 0;
}

/* Index of addr, added when absent; -1 out of memory. */
static int addr_index(struct addr_tab *t, const struct cs_wire_addr *addr)
{
    if (t->nslot) {
        for (size_t j = hash_bytes(addr->b, 16) & (t->nslot - 1); t->slot[j];
             j = (j + 1) & (t->nslot - 1))
            if (memcmp(t->a[t->slot[j] - 1].b, addr->b, 16) == 0)
                return t->slot[j] - 1;
    }
    if (t->n == t->cap && addr_grow(t) != 0)
        return -1;
    size_t i = t->n++;
    t->a[i] = *addr;
    t->host[i][0] = '\0';
    t->written[i] = 0;
    size_t j = hash_bytes(addr->b, 16) & (t->nslot - 1);
    while (t->slot[j])
        j = (j + 1) & (t->nslot - 1);
    t->slot[j] = (int32_t)i + 1;
    return (int)i;
}

/* ---- open bucket records ---- */

struct rec {
    uint64_t bucket;
    int32_t iface, local, peer; /* local, peer: address indices */
    int used;
    struct cs_wire_counts c;
};

/* ---- TCP flows ---- */

struct flow {
    uint8_t key[36]; /* src, dst, sport, dport */
    int used;
    int have_seq, have_ack;
    uint32_t seq_next; /* highest sequence number sent so far + 1 */
    uint32_t ack, win;
};

struct iface_info {
    char name[64];
    int linktype;
};

struct cs_wire_agg {
    FILE *out;
    uint64_t bucket_ns;
    int write_failed;
    struct iface_info ifaces[CS_WIRE_MAX_IFACES];
    int nifaces;
    struct cs_wire_addr locals[MAX_LOCALS];
    int nlocals;
    struct addr_tab addrs;
    struct rec *recs;
    size_t nrec, caprec; /* caprec a power of two */
    uint64_t newest;     /* newest bucket seen */
    struct flow *flows;
    size_t nflows, capflows;
    struct cs_wire_totals tot;
};

struct cs_wire_agg *cs_wire_agg_new(FILE *out, uint64_t bucket_ns)
{
    struct cs_wire_agg *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->out = out;
    a->bucket_ns = bucket_ns ? bucket_ns : CS_WIRE_BUCKET_NS_DEFAULT;
    a->caprec = 256;
    a->recs = calloc(a->caprec, sizeof *a->recs);
    a->capflows = 1024;
    a->flows = calloc(a->capflows, sizeof *a->flows);
    if (!a->recs || !a->flows || addr_grow(&a->addrs) != 0) {
        cs_wire_agg_free(a);
        return NULL;
    }
    return a;
}

void cs_wire_agg_free(struct cs_wire_agg *a)
{
    if (!a)
        return;
    free(a->addrs.a);
    free(a->addrs.host);
    free(a->addrs.written);
    free(a->addrs.slot);
    free(a->recs);
    free(a->flows);
    free(a);
}

static void put(struct cs_wire_agg *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct cs_wire_agg *a, const char *fmt, ...)
{
    if (a->write_failed || !a->out)
        return;
    va_list ap;
    va_start(ap, fmt);
    int r = vfprintf(a->out, fmt, ap);
    va_end(ap);
    if (r < 0 || ferror(a->out))
        a->write_failed = errno ? errno : EIO;
}

int cs_wire_agg_write_failed(const struct cs_wire_agg *a)
{
    return a->write_failed;
}

int cs_wire_agg_add_local(struct cs_wire_agg *a, const struct cs_wire_addr *addr)
{
    for (int i = 0; i < a->nlocals; i++)
        if (memcmp(a->locals[i].b, addr->b, 16) == 0)
            return 0;
    if (a->nlocals == MAX_LOCALS)
        return -1;
    a->locals[a->nlocals++] = *addr;
    char buf[64];
    put(a, "local %s\n", cs_wire_addr_str(addr, buf, sizeof buf));
    return 0;
}

int cs_wire_agg_name_addr(struct cs_wire_agg *a, const struct cs_wire_addr *addr, const char *host)
{
    int i = addr_index(&a->addrs, addr);
    if (i < 0)
        return -1;
    snprintf(a->addrs.host[i], sizeof a->addrs.host[i], "%s", host);
    /* Host names are single words in the file. */
    for (char *p = a->addrs.host[i]; *p; p++)
        if (*p == ' ' || *p == '\n' || *p == '\t')
            *p = '_';
    return 0;
}

static const char *linktype_text(int lt)
{
    const char *n = pcap_datalink_val_to_name(lt);
    return n ? n : "unknown";
}

int cs_wire_agg_iface(struct cs_wire_agg *a, const char *name, int linktype, char *err,
                      size_t errlen)
{
    switch (linktype) {
    case DLT_EN10MB:
    case DLT_RAW:
    case DLT_IPV4:
    case DLT_IPV6:
    case DLT_LINUX_SLL:
#ifdef DLT_LINUX_SLL2
    case DLT_LINUX_SLL2:
#endif
    case DLT_NULL:
    case DLT_LOOP:
        break;
    default:
        snprintf(err, errlen,
                 "%s: link type %d (%s) is not one commscope reads (Ethernet, Linux cooked "
                 "SLL/SLL2, raw IP, BSD loopback)",
                 name, linktype, linktype_text(linktype));
        return -1;
    }
    if (a->nifaces == CS_WIRE_MAX_IFACES) {
        snprintf(err, errlen, "%s: more than %d interfaces in one capture", name,
                 CS_WIRE_MAX_IFACES);
        return -1;
    }
    int i = a->nifaces++;
    snprintf(a->ifaces[i].name, sizeof a->ifaces[i].name, "%s", name);
    for (char *p = a->ifaces[i].name; *p; p++)
        if (*p == ' ' || *p == '\n' || *p == '\t')
            *p = '_';
    a->ifaces[i].linktype = linktype;
    put(a, "iface %d %s linktype %d\n", i, a->ifaces[i].name, linktype);
    return i;
}

/* ---- records ---- */

static uint64_t rec_hash(uint64_t bucket, int iface, int local, int peer)
{
    return mix(bucket * 0x9e3779b97f4a7c15ull ^ ((uint64_t)(uint32_t)iface << 48) ^
               ((uint64_t)(uint32_t)local << 24) ^ (uint64_t)(uint32_t)peer);
}

/* Address lines go out in index order (readers take them in order), up to and including i. */
static void write_addr(struct cs_wire_agg *a, int i)
{
    if (a->addrs.written[i])
        return;
    for (int k = 0; k <= i; k++) {
        if (a->addrs.written[k])
            continue;
        char buf[64];
        put(a, "addr %d %s %s\n", k, cs_wire_addr_str(&a->addrs.a[k], buf, sizeof buf),
            a->addrs.host[k][0] ? a->addrs.host[k] : "-");
        a->addrs.written[k] = 1;
    }
}

static void write_rec(struct cs_wire_agg *a, const struct rec *r)
{
    write_addr(a, r->local);
    write_addr(a, r->peer);
    const struct cs_wire_counts *c = &r->c;
    put(a, "b %llu %d %d %d %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu\n",
        (unsigned long long)r->bucket, r->iface, r->local, r->peer, (unsigned long long)c->tx_bytes,
        (unsigned long long)c->tx_pkts, (unsigned long long)c->rx_bytes,
        (unsigned long long)c->rx_pkts, (unsigned long long)c->tx_retrans,
        (unsigned long long)c->rx_retrans, (unsigned long long)c->tx_dupack,
        (unsigned long long)c->rx_dupack, (unsigned long long)c->roce_bytes,
        (unsigned long long)c->roce_pkts);
}

/* Write and drop every record of a bucket older than limit (all when limit is UINT64_MAX). */
static void flush_before(struct cs_wire_agg *a, uint64_t limit)
{
    size_t kept = 0;
    struct rec *keep = NULL;
    /* Records in bucket order keep the file sorted in time within each flush. */
    struct rec *tmp = malloc((a->nrec ? a->nrec : 1) * sizeof *tmp);
    size_t nt = 0;
    for (size_t i = 0; i < a->caprec; i++) {
        struct rec *r = &a->recs[i];
        if (!r->used)
            continue;
        if (r->bucket < limit) {
            if (tmp)
                tmp[nt++] = *r;
            else
                write_rec(a, r);
        } else {
            kept++;
        }
    }
    if (tmp) {
        /* Insertion sort by bucket: a flush holds a few buckets' records. */
        for (size_t i = 1; i < nt; i++) {
            struct rec x = tmp[i];
            size_t j = i;
            while (j > 0 && tmp[j - 1].bucket > x.bucket) {
                tmp[j] = tmp[j - 1];
                j--;
            }
            tmp[j] = x;
        }
        for (size_t i = 0; i < nt; i++)
            write_rec(a, &tmp[i]);
        free(tmp);
    }
    if (kept == a->nrec)
        return;
    /* Rebuild the table with the records still open. */
    keep = malloc((kept ? kept : 1) * sizeof *keep);
    size_t nk = 0;
    for (size_t i = 0; i < a->caprec; i++)
        if (a->recs[i].used && a->recs[i].bucket >= limit && keep)
            keep[nk++] = a->recs[i];
    memset(a->recs, 0, a->caprec * sizeof *a->recs);
    a->nrec = 0;
    for (size_t k = 0; k < nk; k++) {
        struct rec *r = &keep[k];
        size_t j = rec_hash(r->bucket, r->iface, r->local, r->peer) & (a->caprec - 1);
        while (a->recs[j].used)
            j = (j + 1) & (a->caprec - 1);
        a->recs[j] = *r;
        a->nrec++;
    }
    free(keep);
}

static struct rec *rec_get(struct cs_wire_agg *a, uint64_t bucket, int iface, int local, int peer)
{
    if (2 * (a->nrec + 1) > a->caprec) {
        size_t cap = 2 * a->caprec;
        struct rec *n = calloc(cap, sizeof *n);
        if (!n)
            return NULL;
        for (size_t i = 0; i < a->caprec; i++) {
            if (!a->recs[i].used)
                continue;
            struct rec *r = &a->recs[i];
            size_t j = rec_hash(r->bucket, r->iface, r->local, r->peer) & (cap - 1);
            while (n[j].used)
                j = (j + 1) & (cap - 1);
            n[j] = *r;
        }
        free(a->recs);
        a->recs = n;
        a->caprec = cap;
    }
    size_t j = rec_hash(bucket, iface, local, peer) & (a->caprec - 1);
    for (;; j = (j + 1) & (a->caprec - 1)) {
        struct rec *r = &a->recs[j];
        if (!r->used) {
            *r = (struct rec){
                .bucket = bucket, .iface = iface, .local = local, .peer = peer, .used = 1};
            a->nrec++;
            return r;
        }
        if (r->bucket == bucket && r->iface == iface && r->local == local && r->peer == peer)
            return r;
    }
}

/* ---- flows ---- */

static struct flow *flow_get(struct cs_wire_agg *a, const uint8_t key[36])
{
    if (2 * (a->nflows + 1) > a->capflows) {
        if (a->nflows >= MAX_FLOWS)
            goto lookup_only;
        size_t cap = 2 * a->capflows;
        struct flow *n = calloc(cap, sizeof *n);
        if (!n)
            goto lookup_only;
        for (size_t i = 0; i < a->capflows; i++) {
            if (!a->flows[i].used)
                continue;
            size_t j = hash_bytes(a->flows[i].key, 36) & (cap - 1);
            while (n[j].used)
                j = (j + 1) & (cap - 1);
            n[j] = a->flows[i];
        }
        free(a->flows);
        a->flows = n;
        a->capflows = cap;
    }
    for (size_t j = hash_bytes(key, 36) & (a->capflows - 1);; j = (j + 1) & (a->capflows - 1)) {
        struct flow *f = &a->flows[j];
        if (!f->used) {
            memset(f, 0, sizeof *f);
            memcpy(f->key, key, 36);
            f->used = 1;
            a->nflows++;
            a->tot.flows++;
            return f;
        }
        if (memcmp(f->key, key, 36) == 0)
            return f;
    }
lookup_only:
    for (size_t j = hash_bytes(key, 36) & (a->capflows - 1);; j = (j + 1) & (a->capflows - 1)) {
        struct flow *f = &a->flows[j];
        if (!f->used) {
            a->tot.untracked++;
            return NULL;
        }
        if (memcmp(f->key, key, 36) == 0)
            return f;
    }
}

static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The TCP header at t (avail bytes captured), plen payload bytes by the IP length. */
static void tcp_seen(struct cs_wire_agg *a, struct cs_wire_counts *c, int tx,
                     const struct cs_wire_addr *src, const struct cs_wire_addr *dst,
                     const uint8_t *t, uint32_t avail, uint32_t l4len)
{
    if (avail < 20) {
        a->tot.short_headers++;
        return;
    }
    uint32_t hlen = (uint32_t)(t[12] >> 4) * 4u;
    if (hlen < 20 || hlen > l4len)
        return;
    uint32_t plen = l4len - hlen;
    uint8_t fl = t[13];
    int syn = fl & 0x02, fin = fl & 0x01, rst = fl & 0x04, ack = fl & 0x10;
    uint32_t seq = be32(t + 4), ackn = be32(t + 8), win = be16(t + 14);
    uint8_t key[36];
    memcpy(key, src->b, 16);
    memcpy(key + 16, dst->b, 16);
    memcpy(key + 32, t, 4); /* ports */
    struct flow *f = flow_get(a, key);
    if (!f)
        return;
    uint32_t seg = plen + (syn ? 1u : 0u) + (fin ? 1u : 0u);
    if (seg > 0) {
        /* A segment starting before the highest sequence number already sent carries data the
         * sender had sent before: a retransmission (as Wireshark's tcp.analysis.retransmission,
         * without its keep-alive and out-of-order refinements). */
        if (f->have_seq && plen > 0 && (int32_t)(seq - f->seq_next) < 0) {
            if (tx)
                c->tx_retrans++;
            else
                c->rx_retrans++;
            a->tot.retrans++;
        }
        if (!f->have_seq || (int32_t)(seq + seg - f->seq_next) > 0)
            f->seq_next = seq + seg;
        f->have_seq = 1;
    }
    if (ack) {
        /* A pure ACK repeating the previous acknowledgement and window: the receiver saw a
         * segment out of order (a loss, usually). */
        if (plen == 0 && !syn && !fin && !rst && f->have_ack && ackn == f->ack && win == f->win) {
            if (tx)
                c->tx_dupack++;
            else
                c->rx_dupack++;
            a->tot.dupacks++;
        }
        f->ack = ackn;
        f->win = win;
        f->have_ack = 1;
    }
}

static int is_local(const struct cs_wire_agg *a, const struct cs_wire_addr *x)
{
    for (int i = 0; i < a->nlocals; i++)
        if (memcmp(a->locals[i].b, x->b, 16) == 0)
            return 1;
    return 0;
}

/* An IP packet at p (avail bytes captured), len bytes on the wire. */
static void ip_packet(struct cs_wire_agg *a, int iface, uint64_t bucket, const uint8_t *p,
                      uint32_t avail, uint32_t len)
{
    struct cs_wire_addr src = {{0}}, dst = {{0}};
    int proto;
    uint32_t l4off, l4len;
    int first_fragment = 1;
    if (avail < 1) {
        a->tot.short_headers++;
        return;
    }
    int ver = p[0] >> 4;
    if (ver == 4) {
        if (avail < 20) {
            a->tot.short_headers++;
            return;
        }
        uint32_t ihl = (uint32_t)(p[0] & 15) * 4u, tot = be16(p + 2);
        if (ihl < 20 || tot < ihl) {
            a->tot.non_ip++;
            return;
        }
        src.b[10] = src.b[11] = dst.b[10] = dst.b[11] = 0xff;
        memcpy(src.b + 12, p + 12, 4);
        memcpy(dst.b + 12, p + 16, 4);
        proto = p[9];
        first_fragment = (be16(p + 6) & 0x1fff) == 0;
        l4off = ihl;
        l4len = tot - ihl;
    } else if (ver == 6) {
        if (avail < 40) {
            a->tot.short_headers++;
            return;
        }
        memcpy(src.b, p + 8, 16);
        memcpy(dst.b, p + 24, 16);
        proto = p[6];
        l4off = 40;
        l4len = be16(p + 4);
        /* Skip the extension headers commonly found before TCP/UDP. */
        for (int k = 0; k < 4 && (proto == 0 || proto == 43 || proto == 60 || proto == 44); k++) {
            if (avail < l4off + 8)
                break;
            uint32_t el = proto == 44 ? 8u : ((uint32_t)p[l4off + 1] + 1u) * 8u;
            if (proto == 44 && (be16(p + l4off + 2) & 0xfff8) != 0)
                first_fragment = 0;
            proto = p[l4off];
            if (el > l4len)
                break;
            l4off += el;
            l4len -= el;
        }
    } else {
        a->tot.non_ip++;
        return;
    }
    a->tot.ip_packets++;
    int tx;
    const struct cs_wire_addr *local, *peer;
    if (is_local(a, &dst) && !is_local(a, &src)) {
        tx = 0;
        local = &dst;
        peer = &src;
    } else {
        tx = 1;
        local = &src;
        peer = &dst;
    }
    int li = addr_index(&a->addrs, local), pi = addr_index(&a->addrs, peer);
    if (li < 0 || pi < 0)
        return;
    struct rec *r = rec_get(a, bucket, iface, li, pi);
    if (!r)
        return;
    struct cs_wire_counts *c = &r->c;
    if (tx) {
        c->tx_bytes += len;
        c->tx_pkts++;
    } else {
        c->rx_bytes += len;
        c->rx_pkts++;
    }
    if (!first_fragment || avail <= l4off)
        return;
    const uint8_t *l4 = p + l4off;
    uint32_t l4avail = avail - l4off;
    if (proto == 6) {
        tcp_seen(a, c, tx, &src, &dst, l4, l4avail, l4len);
    } else if (proto == 17 && l4avail >= 8) {
        if (be16(l4 + 2) == CS_WIRE_ROCE_PORT) {
            c->roce_bytes += len;
            c->roce_pkts++;
            a->tot.roce_pkts++;
        }
    }
}

void cs_wire_agg_packet(struct cs_wire_agg *a, int iface, uint64_t ts_ns, const uint8_t *d,
                        uint32_t caplen, uint32_t len)
{
    if (iface < 0 || iface >= a->nifaces)
        return;
    a->tot.packets++;
    a->tot.bytes += len;
    uint64_t bucket = ts_ns / a->bucket_ns;
    if (bucket >= CS_WIRE_TIME_LIMIT / a->bucket_ns) {
        /* A bucket ending past 2^62 ns, which readers refuse (a pcap's bogus timestamp): the
         * packet is left out of the buckets, and counted. */
        a->tot.bad_time++;
        return;
    }
    if (bucket > a->newest) {
        int first = a->newest == 0;
        a->newest = bucket;
        if (!first && a->nrec)
            flush_before(a, bucket - OPEN_WINDOW);
    }
    uint32_t off = 0;
    int ethertype = -1;
    switch (a->ifaces[iface].linktype) {
    case DLT_EN10MB:
        if (caplen < 14)
            goto short_hdr;
        ethertype = be16(d + 12);
        off = 14;
        for (int k = 0; k < 2 && (ethertype == 0x8100 || ethertype == 0x88a8); k++) {
            if (caplen < off + 4)
                goto short_hdr;
            ethertype = be16(d + off + 2);
            off += 4;
        }
        break;
    case DLT_LINUX_SLL:
        if (caplen < 16)
            goto short_hdr;
        ethertype = be16(d + 14);
        off = 16;
        break;
#ifdef DLT_LINUX_SLL2
    case DLT_LINUX_SLL2:
        if (caplen < 20)
            goto short_hdr;
        ethertype = be16(d);
        off = 20;
        break;
#endif
    case DLT_NULL:
    case DLT_LOOP:
        if (caplen < 4)
            goto short_hdr;
        off = 4;
        ethertype = 0; /* the version nibble decides */
        break;
    default: /* raw IP */
        ethertype = 0;
        break;
    }
    if (ethertype != 0 && ethertype != 0x0800 && ethertype != 0x86dd) {
        a->tot.non_ip++;
        return;
    }
    /* Bytes on the wire above the link header (len - off) are not what is counted: the frame
     * length is, so counts include link headers as the NIC sends them (without the FCS). */
    ip_packet(a, iface, bucket, d + off, caplen - off, len);
    return;
short_hdr:
    a->tot.short_headers++;
}

int cs_wire_agg_finish(struct cs_wire_agg *a)
{
    flush_before(a, UINT64_MAX);
    struct cs_wire_totals *t = &a->tot;
    put(a,
        "end packets %llu bytes %llu ip %llu non_ip %llu short %llu flows %llu untracked %llu "
        "retrans %llu dupacks %llu roce %llu bad_time %llu\n",
        (unsigned long long)t->packets, (unsigned long long)t->bytes,
        (unsigned long long)t->ip_packets, (unsigned long long)t->non_ip,
        (unsigned long long)t->short_headers, (unsigned long long)t->flows,
        (unsigned long long)t->untracked, (unsigned long long)t->retrans,
        (unsigned long long)t->dupacks, (unsigned long long)t->roce_pkts,
        (unsigned long long)t->bad_time);
    if (!a->write_failed && a->out && fflush(a->out) != 0)
        a->write_failed = errno ? errno : EIO;
    return a->write_failed ? -1 : 0;
}

void cs_wire_agg_totals(const struct cs_wire_agg *a, struct cs_wire_totals *t)
{
    *t = a->tot;
}

static void put_word(FILE *out, const char *key, const char *s)
{
    fprintf(out, "%s ", key);
    for (; s && *s; s++)
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, out);
    fputc('\n', out);
}

void cs_wire_write_header(FILE *out, const char *host, const char *source, uint64_t bucket_ns,
                          int snaplen, const char *filter)
{
    struct timespec rt, mt;
    clock_gettime(CLOCK_MONOTONIC, &mt);
    clock_gettime(CLOCK_REALTIME, &rt);
    fprintf(out, "%s %d\n", CS_WIRE_MAGIC, CS_WIRE_VERSION);
    put_word(out, "host", host);
    put_word(out, "source", source);
    fprintf(out, "bucket_ns %llu\n",
            (unsigned long long)(bucket_ns ? bucket_ns : CS_WIRE_BUCKET_NS_DEFAULT));
    fprintf(out, "snaplen %d\n", snaplen);
    fprintf(out, "clock realtime_ns %lld monotonic_ns %lld\n",
            (long long)rt.tv_sec * 1000000000ll + rt.tv_nsec,
            (long long)mt.tv_sec * 1000000000ll + mt.tv_nsec);
    put_word(out, "filter", filter && *filter ? filter : "(none)");
}
