/*
 * The live capture on one node: every requested interface opened with libpcap (headers only,
 * not promiscuous, a BPF filter for the job's peers), read with poll() until stopped, aggregated
 * into buckets (agg.c) and written as a commscope-wire/1 file.
 */
#include <errno.h>
#include <poll.h>
#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"

volatile int cs_wire_live_stop;

/* libpcap hands packets over in blocks, at the latest after this timeout; at the end the capture
 * keeps reading for a little longer than that so the last block is not lost. */
#define BLOCK_TIMEOUT_MS 50
#define DRAIN_MS (3 * BLOCK_TIMEOUT_MS)

struct live_if {
    pcap_t *p;
    int idx; /* in the aggregation */
    int fd;
    uint64_t seen; /* packets read */
    pcap_dumper_t *dump;
};

static void say_ready(int fd, const char *msg)
{
    if (fd < 0)
        return;
    size_t n = strlen(msg);
    ssize_t w = write(fd, msg, n);
    (void)w;
}

/* Open one interface.  Returns the handle, or NULL with err filled; *perm set when the reason
 * is missing privileges. */
static pcap_t *open_iface(const struct cs_wire_live_opts *o, const char *name, int *perm, char *err,
                          size_t errlen)
{
    char perr[PCAP_ERRBUF_SIZE] = "";
    pcap_t *p = pcap_create(name, perr);
    if (!p) {
        snprintf(err, errlen, "cannot capture on %s: %s", name, perr);
        return NULL;
    }
    pcap_set_snaplen(p, o->snaplen);
    pcap_set_promisc(p, 0);
    pcap_set_timeout(p, BLOCK_TIMEOUT_MS);
    pcap_set_buffer_size(p, 8 << 20);
    pcap_set_tstamp_precision(p, PCAP_TSTAMP_PRECISION_NANO);
    int rc = pcap_activate(p);
    if (rc < 0) {
        if (rc == PCAP_ERROR_PERM_DENIED) {
            *perm = 1;
            snprintf(err, errlen,
                     "no permission to capture on %s (capturing needs CAP_NET_RAW: run as root or "
                     "give cs_capture the capability with `setcap cap_net_raw+ep cs_capture`)",
                     name);
        } else if (rc == PCAP_ERROR_NO_SUCH_DEVICE) {
            snprintf(err, errlen, "no interface named %s on this node", name);
        } else {
            snprintf(err, errlen, "cannot capture on %s: %s", name, pcap_geterr(p));
        }
        pcap_close(p);
        return NULL;
    }
    if (o->filter && *o->filter) {
        struct bpf_program prog;
        if (pcap_compile(p, &prog, o->filter, 1, PCAP_NETMASK_UNKNOWN) != 0 ||
            pcap_setfilter(p, &prog) != 0) {
            snprintf(err, errlen, "BPF filter on %s not accepted: %s", name, pcap_geterr(p));
            pcap_close(p);
            return NULL;
        }
        pcap_freecode(&prog);
    }
    if (pcap_setnonblock(p, 1, perr) != 0) {
        snprintf(err, errlen, "cannot capture on %s: %s", name, perr);
        pcap_close(p);
        return NULL;
    }
    return p;
}

struct cb_ctx {
    struct cs_wire_agg *a;
    struct live_if *li;
    uint64_t *raw_bytes, raw_max;
    int raw_full;
};

static void on_packet(u_char *user, const struct pcap_pkthdr *h, const u_char *d)
{
    struct cb_ctx *c = (struct cb_ctx *)(void *)user;
    uint64_t ts = (uint64_t)h->ts.tv_sec * 1000000000ull + (uint64_t)h->ts.tv_usec;
    cs_wire_agg_packet(c->a, c->li->idx, ts, d, h->caplen, h->len);
    c->li->seen++;
    if (c->li->dump && !c->raw_full) {
        if (*c->raw_bytes + 16 + h->caplen > c->raw_max) {
            c->raw_full = 1;
            return;
        }
        pcap_dump((u_char *)c->li->dump, h, d);
        *c->raw_bytes += 16 + h->caplen;
    }
}

int cs_wire_live_run(const struct cs_wire_live_opts *o, char *err, size_t errlen)
{
    err[0] = '\0';
    FILE *out = fopen(o->out_path, "we");
    if (!out) {
        snprintf(err, errlen, "cannot write %s: %s", o->out_path, strerror(errno));
        char msg[1200];
        snprintf(msg, sizeof msg, "error: %s\n", err);
        say_ready(o->ready_fd, msg);
        return -1;
    }
    char src[64];
    snprintf(src, sizeof src, "live");
    cs_wire_write_header(out, o->host, src, o->bucket_ns, o->snaplen, o->filter);
    struct cs_wire_agg *a = cs_wire_agg_new(out, o->bucket_ns);
    struct live_if li[CS_WIRE_MAX_IFACES];
    int nli = 0, failed = 0, perm = 0;
    char first_err[512] = "";
    for (int i = 0; a && i < o->nlocals; i++)
        cs_wire_agg_add_local(a, &o->locals[i]);
    for (int i = 0; a && i < o->npeers; i++)
        cs_wire_agg_name_addr(a, &o->peers[i], o->peer_host[i]);
    for (int i = 0; a && i < o->nifaces; i++) {
        char e[512];
        int pm = 0;
        pcap_t *p = open_iface(o, o->ifaces[i], &pm, e, sizeof e);
        if (!p) {
            fprintf(out, "note %s\n", e);
            if (!first_err[0])
                snprintf(first_err, sizeof first_err, "%s", e);
            perm |= pm;
            failed++;
            continue;
        }
        int idx = cs_wire_agg_iface(a, o->ifaces[i], pcap_datalink(p), e, sizeof e);
        if (idx < 0) {
            fprintf(out, "note %s\n", e);
            if (!first_err[0])
                snprintf(first_err, sizeof first_err, "%s", e);
            pcap_close(p);
            failed++;
            continue;
        }
        fprintf(out, "ifinfo %d speed_mbps %ld expected %d\n", idx, o->speed_mbps[i],
                o->expected[i]);
        li[nli] = (struct live_if){.p = p, .idx = idx, .fd = pcap_get_selectable_fd(p)};
        if (o->raw_prefix) {
            char path[1200];
            snprintf(path, sizeof path, "%s-%s.pcap", o->raw_prefix, o->ifaces[i]);
            li[nli].dump = pcap_dump_open(p, path);
            if (!li[nli].dump)
                fprintf(out, "note raw capture %s not written: %s\n", path, pcap_geterr(p));
        }
        nli++;
    }
    if (!a || nli == 0) {
        if (!a)
            snprintf(first_err, sizeof first_err, "out of memory");
        fprintf(out, "status no-capture\n");
        snprintf(err, errlen, "%s", first_err[0] ? first_err : "no interface to capture on");
        fclose(out);
        cs_wire_agg_free(a);
        char msg[700];
        snprintf(msg, sizeof msg, "error: %s\n", err);
        say_ready(o->ready_fd, msg);
        (void)perm;
        return -1;
    }
    fflush(out);
    if (failed)
        snprintf(err, errlen, "%s", first_err);
    char msg[700];
    if (failed)
        snprintf(msg, sizeof msg, "partial: %s\n", first_err);
    else
        snprintf(msg, sizeof msg, "ok\n");
    say_ready(o->ready_fd, msg);

    uint64_t raw_bytes = 24ull * (uint64_t)nli;
    struct cb_ctx ctx[CS_WIRE_MAX_IFACES];
    struct pollfd pf[CS_WIRE_MAX_IFACES];
    for (int i = 0; i < nli; i++) {
        ctx[i] = (struct cb_ctx){
            .a = a, .li = &li[i], .raw_bytes = &raw_bytes, .raw_max = o->raw_max_bytes};
        pf[i] = (struct pollfd){.fd = li[i].fd, .events = POLLIN};
    }
    int raw_noted = 0;
    while (!cs_wire_live_stop && !cs_wire_agg_write_failed(a)) {
        int r = poll(pf, (nfds_t)nli, 50);
        if (r < 0 && errno != EINTR)
            break;
        for (int i = 0; i < nli; i++) {
            int n = pcap_dispatch(li[i].p, -1, on_packet, (u_char *)&ctx[i]);
            if (n == PCAP_ERROR) {
                fprintf(out, "note capture on %s stopped: %s\n", o->ifaces[i],
                        pcap_geterr(li[i].p));
                pf[i].fd = -1;
            }
            if (ctx[i].raw_full && !raw_noted) {
                raw_noted = 1;
                fprintf(out,
                        "note raw capture reached its cap of %llu bytes; later packets are "
                        "only aggregated\n",
                        (unsigned long long)o->raw_max_bytes);
                for (int k = 0; k < nli; k++)
                    ctx[k].raw_full = 1;
            }
        }
    }
    /* Drain what the kernel still holds, including the block still being filled. */
    for (int waited = 0; waited < DRAIN_MS; waited += 10) {
        poll(pf, (nfds_t)nli, 10);
        for (int i = 0; i < nli; i++)
            if (pf[i].fd >= 0)
                pcap_dispatch(li[i].p, -1, on_packet, (u_char *)&ctx[i]);
    }
    for (int i = 0; i < nli; i++) {
        struct pcap_stat st;
        if (pcap_stats(li[i].p, &st) == 0)
            fprintf(out, "ifstats %d recv %u drop %u seen %llu\n", li[i].idx, st.ps_recv,
                    st.ps_drop, (unsigned long long)li[i].seen);
        if (li[i].dump)
            pcap_dump_close(li[i].dump);
        pcap_close(li[i].p);
    }
    int wf = cs_wire_agg_write_failed(a);
    int fin = cs_wire_agg_finish(a);
    int fe = errno;
    cs_wire_agg_free(a);
    if (fclose(out) != 0 && !wf && fin == 0) {
        fin = -1;
        fe = errno;
    }
    if (fin != 0 || wf) {
        snprintf(err, errlen,
                 "writing %s failed: %s; capture stopped there and the file ends early",
                 o->out_path, strerror(wf ? wf : fe));
        /* The starter reads this line at the stop and says it once (collector/mpi/capture.c). */
        char end_msg[1200];
        snprintf(end_msg, sizeof end_msg, "error: %s\n", err);
        say_ready(o->ready_fd, end_msg);
        return -1;
    }
    return failed ? 1 : 0;
}
