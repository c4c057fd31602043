/* The reader of commscope-wire/1 files (format in docs/wire.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "commscope/input.h"

#include "capture.h"

void cs_wire_file_free(struct cs_wire_file *f)
{
    free(f->addrs);
    free(f->addr_host);
    free(f->recs);
    for (size_t i = 0; i < f->nnotes; i++)
        free(f->notes[i]);
    free(f->notes);
    memset(f, 0, sizeof *f);
}

int cs_wire_file_addr(const struct cs_wire_file *f, const struct cs_wire_addr *addr)
{
    for (size_t i = 0; i < f->naddrs; i++)
        if (memcmp(f->addrs[i].b, addr->b, 16) == 0)
            return (int)i;
    return -1;
}

static void rest_of_line(char *dst, size_t n, const char *s)
{
    while (*s == ' ')
        s++;
    snprintf(dst, n, "%s", s);
}

static int add_note(struct cs_wire_file *f, const char *text)
{
    void *p = realloc(f->notes, (f->nnotes + 1) * sizeof *f->notes);
    if (!p)
        return -1;
    f->notes = p;
    while (*text == ' ')
        text++;
    f->notes[f->nnotes] = strdup(text);
    if (!f->notes[f->nnotes])
        return -1;
    f->nnotes++;
    return 0;
}

/* A counter of one bucket above 2^48 (281 TB, or packets) is not a measurement: sums over a
 * file's records then stay far from wrapping. */
#define WIRE_COUNT_MAX (1ull << 48)

/* One line after the first: its key and the rest.  Returns 0; -1 malformed (*why may say more),
 * -2 out of memory.  *caprec, *capaddr: the capacities of f->recs and f->addrs. */
static int parse_line(struct cs_wire_file *f, const char *key, const char *rest, size_t *caprec,
                      size_t *capaddr, const char **why)
{
    if (strcmp(key, "b") == 0) {
        struct cs_wire_rec r;
        unsigned long long v[14];
        if (sscanf(rest, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10],
                   &v[11], &v[12], &v[13]) != 14 ||
            v[1] >= (unsigned)f->nifaces || v[2] >= f->naddrs || v[3] >= f->naddrs)
            return -1;
        uint64_t width = f->bucket_ns ? f->bucket_ns : CS_WIRE_BUCKET_NS_DEFAULT;
        if (v[0] >= CS_WIRE_TIME_LIMIT / width) { /* it must end by 2^62 */
            *why = "bucket past 2^62 ns (year 2116)";
            return -1;
        }
        for (int k = 4; k < 14; k++)
            if (v[k] > WIRE_COUNT_MAX) {
                *why = "count above 2^48 in one bucket";
                return -1;
            }
        r.bucket = v[0];
        r.iface = (int)v[1];
        r.local = (int)v[2];
        r.peer = (int)v[3];
        r.c =
            (struct cs_wire_counts){v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13]};
        if (f->nrecs == *caprec) {
            *caprec = *caprec ? 2 * *caprec : 256;
            void *p = realloc(f->recs, *caprec * sizeof *f->recs);
            if (!p)
                return -2;
            f->recs = p;
        }
        f->recs[f->nrecs++] = r;
        f->ifaces[r.iface].bytes += r.c.tx_bytes + r.c.rx_bytes;
        f->ifaces[r.iface].pkts += r.c.tx_pkts + r.c.rx_pkts;
    } else if (strcmp(key, "addr") == 0) {
        unsigned idx;
        char a[64], h[64];
        struct cs_wire_addr ad;
        if (sscanf(rest, "%u %63s %63s", &idx, a, h) != 3 || idx != f->naddrs ||
            cs_wire_addr_parse(a, &ad) != 0)
            return -1;
        if (f->naddrs == *capaddr) {
            *capaddr = *capaddr ? 2 * *capaddr : 64;
            void *p = realloc(f->addrs, *capaddr * sizeof *f->addrs);
            if (!p)
                return -2;
            f->addrs = p;
            p = realloc(f->addr_host, *capaddr * sizeof *f->addr_host);
            if (!p)
                return -2;
            f->addr_host = p;
        }
        f->addrs[f->naddrs] = ad;
        snprintf(f->addr_host[f->naddrs], 64, "%s", strcmp(h, "-") == 0 ? "" : h);
        f->naddrs++;
    } else if (strcmp(key, "iface") == 0) {
        unsigned idx;
        int lt;
        char nm[64];
        if (sscanf(rest, "%u %63s linktype %d", &idx, nm, &lt) != 3 ||
            idx != (unsigned)f->nifaces || idx >= CS_WIRE_MAX_IFACES)
            return -1;
        snprintf(f->ifaces[idx].name, sizeof f->ifaces[idx].name, "%s", nm);
        f->ifaces[idx].linktype = lt;
        f->nifaces++;
    } else if (strcmp(key, "ifinfo") == 0) {
        unsigned idx;
        long sp;
        int ex;
        if (sscanf(rest, "%u speed_mbps %ld expected %d", &idx, &sp, &ex) != 3 ||
            idx >= (unsigned)f->nifaces)
            return -1;
        f->ifaces[idx].speed_mbps = sp;
        f->ifaces[idx].expected = ex;
    } else if (strcmp(key, "ifstats") == 0) {
        unsigned idx;
        unsigned long long rv, dr;
        if (sscanf(rest, "%u recv %llu drop %llu", &idx, &rv, &dr) != 3 ||
            idx >= (unsigned)f->nifaces)
            return -1;
        f->ifaces[idx].recv = rv;
        f->ifaces[idx].drop = dr;
        const char *sn = strstr(rest, " seen ");
        f->ifaces[idx].seen = sn ? strtoull(sn + 6, NULL, 10) : rv;
    } else if (strcmp(key, "local") == 0) {
        char a[64];
        if (sscanf(rest, "%63s", a) != 1 || f->nlocals == 64 ||
            cs_wire_addr_parse(a, &f->locals[f->nlocals]) != 0)
            return -1;
        f->nlocals++;
    } else if (strcmp(key, "host") == 0) {
        rest_of_line(f->host, sizeof f->host, rest);
    } else if (strcmp(key, "source") == 0) {
        rest_of_line(f->source, sizeof f->source, rest);
    } else if (strcmp(key, "bucket_ns") == 0) {
        unsigned long long v;
        if (sscanf(rest, "%llu", &v) != 1 || v == 0 || v > CS_WIRE_BUCKET_NS_MAX) {
            *why = "bucket width not 1 ns to 1 hour";
            return -1;
        }
        if (f->nrecs) {
            *why = "bucket width after the first bucket record";
            return -1;
        }
        f->bucket_ns = v;
    } else if (strcmp(key, "snaplen") == 0) {
        if (sscanf(rest, "%d", &f->snaplen) != 1)
            return -1;
    } else if (strcmp(key, "clock") == 0) {
        long long rt, mt;
        if (sscanf(rest, " realtime_ns %lld monotonic_ns %lld", &rt, &mt) != 2)
            return -1;
        if (rt < 0 || mt < 0 || (uint64_t)rt >= CS_WIRE_TIME_LIMIT ||
            (uint64_t)mt >= CS_WIRE_TIME_LIMIT) {
            *why = "clock sample outside 0 to 2^62 ns";
            return -1;
        }
        f->realtime_ns = rt;
        f->monotonic_ns = mt;
    } else if (strcmp(key, "note") == 0) {
        if (add_note(f, rest) != 0)
            return -2;
    } else if (strcmp(key, "status") == 0) {
        if (strstr(rest, "no-capture"))
            f->status_no_capture = 1;
    } else if (strcmp(key, "end") == 0) {
        unsigned long long p = 0, b = 0;
        if (sscanf(rest, " packets %llu bytes %llu", &p, &b) != 2)
            return -1;
        f->total_packets = p;
        f->total_bytes = b;
        /* then "key count" pairs; keys this reader does not know are skipped */
        struct {
            const char *key;
            uint64_t *to;
        } const known[] = {{"ip", &f->ip_packets},
                           {"non_ip", &f->non_ip},
                           {"short", &f->short_headers},
                           {"untracked", &f->untracked},
                           {"bad_time", &f->bad_time}};
        char k[32];
        unsigned long long v;
        int used;
        for (const char *s = rest; sscanf(s, " %31s %llu%n", k, &v, &used) == 2; s += used)
            for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
                if (strcmp(k, known[i].key) == 0)
                    *known[i].to = v;
        f->complete = 1;
    }
    /* Other keys (filter, later additions) are information only. */
    return 0;
}

int cs_wire_file_read_stream(FILE *in, const char *name, struct cs_wire_file *f, char *err,
                             size_t errlen)
{
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", name);
    char line[4096];
    long ln = 0;
    const char *why = "malformed line"; /* what is wrong with a bad line */
    size_t caprec = 0, capaddr = 0;
    for (int i = 0; i < CS_WIRE_MAX_IFACES; i++)
        f->ifaces[i].speed_mbps = -1, f->ifaces[i].expected = -1;
    while (fgets(line, sizeof line, in)) {
        ln++;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n')
            line[--len] = '\0';
        else if (!feof(in))
            goto bad;
        else if (len)
            break; /* the last line was cut short (disk full or killed): keep what came before */
        if (ln == 1) {
            int v = 0;
            if (sscanf(line, CS_WIRE_MAGIC " %d", &v) != 1) {
                snprintf(err, errlen,
                         "%s: not a commscope wire file (first line is not \"" CS_WIRE_MAGIC
                         " N\")",
                         name);
                cs_wire_file_free(f);
                return -1;
            }
            if (v != CS_WIRE_VERSION) {
                snprintf(err, errlen,
                         "%s: commscope-wire version %d; this commscope reads version %d", name, v,
                         CS_WIRE_VERSION);
                cs_wire_file_free(f);
                return -1;
            }
            continue;
        }
        char key[32];
        int off = 0;
        if (sscanf(line, "%31s%n", key, &off) != 1)
            continue;
        int rc = parse_line(f, key, line + off, &caprec, &capaddr, &why);
        if (rc == -1)
            goto bad;
        if (rc == -2)
            goto oom;
    }
    if (ferror(in)) {
        snprintf(err, errlen, "%s: read error: %s", name, strerror(errno));
        cs_wire_file_free(f);
        return -1;
    }
    if (ln == 0) {
        snprintf(err, errlen, "%s: empty file, not a commscope wire file", name);
        cs_wire_file_free(f);
        return -1;
    }
    if (!f->bucket_ns)
        f->bucket_ns = CS_WIRE_BUCKET_NS_DEFAULT;
    return 0;
bad:
    snprintf(err, errlen, "%s:%ld: %s \"%.80s\"", name, ln, why, line);
    cs_wire_file_free(f);
    return -1;
oom:
    snprintf(err, errlen, "%s: out of memory", name);
    cs_wire_file_free(f);
    return -1;
}

int cs_wire_file_read(const char *path, struct cs_wire_file *f, char *err, size_t errlen)
{
    FILE *in = cs_input_fopen(path);
    if (!in) {
        memset(f, 0, sizeof *f);
        snprintf(err, errlen, "%s: %s", path, cs_input_strerror(errno));
        return -1;
    }
    int rc = cs_wire_file_read_stream(in, path, f, err, errlen);
    fclose(in);
    return rc;
}
