/*
 * `commscope node-snapshot PREFIX`: the helper the MPI collector starts on each node's first rank
 * (collector/mpi/node.c); not meant to be run by hand.
 *
 *   1. port counters of every RDMA port (sysfs under $COMMSCOPE_SYSFS_ROOT or /sys) into
 *      PREFIX.ports as "counters before ..." lines, then "ready" on stdout;
 *   2. the node's topology into PREFIX.xml: a copy of $COMMSCOPE_TOPOLOGY when set, else hwloc's
 *      live export; for a live machine the ports as verbs/sysfs report them ("port ..." lines,
 *      which hwloc's XML does not carry);
 *   3. waits for end of input on stdin (the job ended), appends "counters after ..." lines and
 *      says "done".
 *
 * PREFIX.ports is line-oriented text, one record per line, fields separated by spaces:
 *   host NAME
 *   port NIC PORT state=S gbps=G width=W link_layer=L rate_source=R
 *   counters before|after NIC PORT xmit_bytes=N rcv_bytes=N symbol_errors=N rcv_errors=N
 *            link_downed=N xmit_discards=N
 *   error TEXT
 * Problems are written as "error" lines and on stderr; the exit status is 0 unless PREFIX is
 * unusable.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "topology.h"

static void counters(FILE *f, const char *when)
{
    const char *root = getenv("COMMSCOPE_SYSFS_ROOT");
    struct cs_topo_counters *c = NULL;
    size_t n = 0;
    char err[512] = "";
    if (cs_topo_read_counters(root && *root ? root : "/sys", &c, &n, err, sizeof err) < 0) {
        fprintf(f, "error counters %s: %s\n", when, err);
        fprintf(stderr, "commscope node-snapshot: %s\n", err);
    }
    for (size_t i = 0; i < n; i++) {
        if (!c[i].valid)
            continue;
        fprintf(f,
                "counters %s %s %d xmit_bytes=%" PRIu64 " rcv_bytes=%" PRIu64
                " symbol_errors=%" PRIu64 " rcv_errors=%" PRIu64 " link_downed=%" PRIu64
                " xmit_discards=%" PRIu64 "\n",
                when, c[i].nic, c[i].port, c[i].xmit_bytes, c[i].rcv_bytes, c[i].symbol_errors,
                c[i].rcv_errors, c[i].link_downed, c[i].xmit_discards);
    }
    free(c);
    fflush(f);
}

static int write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

/* Step 2: PREFIX.xml and the "port" lines. */
static void topology(FILE *ports, const char *xml_path)
{
    char err[512] = "";
    const char *file = getenv("COMMSCOPE_TOPOLOGY");
    if (file && *file) {
        /* Copied as it is (hwloc or NCCL XML); the analyzer reads and checks it. */
        FILE *in = fopen(file, "rb");
        char *buf = NULL;
        size_t len = 0, cap = 0;
        int ok = in != NULL;
        while (ok) {
            if (len == cap) {
                char *nb = realloc(buf, cap = cap ? 2 * cap : 65536);
                if (!nb) {
                    ok = 0;
                    break;
                }
                buf = nb;
            }
            size_t k = fread(buf + len, 1, cap - len, in);
            len += k;
            if (k == 0)
                break;
        }
        if (in)
            fclose(in);
        if (!ok || write_file(xml_path, buf, len) != 0) {
            snprintf(err, sizeof err, "cannot copy COMMSCOPE_TOPOLOGY=%s: %s", file,
                     strerror(errno));
            fprintf(ports, "error %s\n", err);
            fprintf(stderr, "commscope node-snapshot: %s\n", err);
        }
        free(buf);
        return;
    }
    size_t len = 0;
    char *xml = cs_topo_export_live_xml(&len, err, sizeof err);
    if (!xml || write_file(xml_path, xml, len) != 0) {
        if (xml)
            snprintf(err, sizeof err, "cannot write %.400s: %s", xml_path, strerror(errno));
        fprintf(ports, "error %s\n", err);
        fprintf(stderr, "commscope node-snapshot: %s\n", err);
        free(xml);
        return;
    }
    struct cs_topo *t = NULL;
    if (cs_topo_load_buffer(xml, len, "hwloc export", &t, err, sizeof err) == 0) {
        int have = 0;
        char e2[512];
        if (cs_topo_apply_verbs(t, &have, e2, sizeof e2) < 0)
            fprintf(ports, "error %s\n", e2);
        const char *root = getenv("COMMSCOPE_SYSFS_ROOT");
        if (cs_topo_apply_sysfs(t, root && *root ? root : "/sys", e2, sizeof e2) < 0)
            fprintf(ports, "error %s\n", e2);
        for (size_t i = 0; i < t->n_nics; i++) {
            const struct cs_topo_nic *n = &t->nics[i];
            if (!n->gbps && !strcmp(n->state, "unknown"))
                continue;
            fprintf(ports, "port %s %d state=%s gbps=%g width=%d link_layer=%s rate_source=%s\n",
                    n->name, n->port, n->state[0] ? n->state : "unknown", n->gbps, n->width,
                    n->link_layer[0] ? n->link_layer : "unknown",
                    n->rate_source[0] ? n->rate_source : "none");
        }
        cs_topo_free(t);
    } else {
        fprintf(ports, "error %s\n", err);
    }
    free(xml);
}

int cs__cmd_node_snapshot(int argc, char **argv)
{
    if (argc != 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fprintf(argc == 2 ? stdout : stderr,
                "usage: commscope node-snapshot PREFIX\n\nInternal: started by the MPI "
                "collector on each node's first rank;\nwrites PREFIX.xml and PREFIX.ports.\n\n"
                "example:\n"
                "  commscope node-snapshot RUN_DIR/topology/node1\n\n"
                "exit status: 0 (problems are written into PREFIX.ports as error lines), 1 when\n"
                "PREFIX.ports cannot be written, 2 usage error.\n");
        return argc == 2 ? 0 : CS__EXIT_USAGE;
    }
    char xml[4096], ports_path[4096];
    snprintf(xml, sizeof xml, "%s.xml", argv[1]);
    snprintf(ports_path, sizeof ports_path, "%s.ports", argv[1]);
    FILE *ports = fopen(ports_path, "w");
    if (!ports) {
        fprintf(stderr, "commscope node-snapshot: cannot write %s: %s\n", ports_path,
                strerror(errno));
        return 1;
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    fprintf(ports, "host %s\n", host);
    counters(ports, "before");
    printf("ready\n");
    fflush(stdout);
    topology(ports, xml);
    fflush(ports);
    /* The job's end: the rank closes our stdin at MPI_Finalize (or dies). */
    char buf[256];
    while (fread(buf, 1, sizeof buf, stdin) > 0)
        ;
    counters(ports, "after");
    int rc = fclose(ports) == 0 ? 0 : 1;
    printf("done\n");
    fflush(stdout);
    return rc;
}
