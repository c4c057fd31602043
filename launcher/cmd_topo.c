/*
 * `commscope topo [--topology FILE]... [--json FILE]`: this node's topology (or the described
 * ones): GPUs, NICs, which NIC each GPU should use and how far it is, port rates, warnings.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "topology.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: commscope topo [--topology FILE]... [--json FILE] [--quiet]\n\n"
               "Print a node's topology: GPUs, NICs, each GPU's nearest NIC and how far it is\n"
               "(pcie-switch, host-bridge, numa, socket, cross-socket), NIC port states and\n"
               "rates, NVLink bandwidth, and warnings (ports down, degraded rate, GPUs without a\n"
               "near NIC).\n\n"
               "  --topology FILE  read an hwloc XML export or an NCCL topology file instead of\n"
               "                   this machine (repeatable; default $COMMSCOPE_TOPOLOGY, else\n"
               "                   live)\n"
               "  --json FILE      also write commscope-topology/1 JSON to FILE ('-': stdout)\n"
               "  -q, --quiet      no text summary\n"
               "  -h, --help       this text\n\n"
               "examples:\n"
               "  commscope topo\n"
               "  commscope topo --json node.json --quiet\n"
               "  commscope topo --topology RUN_DIR/topology/node1.xml\n\n"
               "exit status: 0, 1 when a topology could not be read (the others are still\n"
               "shown), 2 on a usage error.\n");
}

int cs__cmd_topo(int argc, char **argv)
{
    const char **files = calloc((size_t)argc + 1, sizeof(char *));
    size_t n_files = 0;
    const char *json = NULL;
    int quiet = 0;
    if (!files)
        return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            free(files);
            return 0;
        } else if (!strcmp(a, "--topology") || !strcmp(a, "--json")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "commscope topo: %s needs a file name\n", a);
                free(files);
                return CS__EXIT_USAGE;
            }
            if (!strcmp(a, "--json"))
                json = argv[++i];
            else
                files[n_files++] = argv[++i];
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            quiet = 1;
        } else {
            fprintf(stderr,
                    "commscope topo: unexpected argument '%s'; see 'commscope topo --help'\n", a);
            free(files);
            return CS__EXIT_USAGE;
        }
    }
    const char *env = getenv("COMMSCOPE_TOPOLOGY");
    if (!n_files && env && *env)
        files[n_files++] = env;
    size_t n = n_files ? n_files : 1;
    struct cs_topo **topos = calloc(n, sizeof(*topos));
    int status = 0;
    for (size_t i = 0; topos && i < n; i++) {
        char err[512];
        if (cs_topo_load(n_files ? files[i] : NULL, &topos[i], err, sizeof(err)) < 0) {
            fprintf(stderr, "commscope topo: %s\n", err);
            status = 1;
            continue;
        }
        if (!quiet) {
            if (i)
                fputc('\n', stdout);
            cs_topo_print(topos[i], stdout);
        }
    }
    if (json && topos) {
        FILE *f = strcmp(json, "-") ? fopen(json, "w") : stdout;
        if (!f) {
            fprintf(stderr, "commscope topo: cannot write %s: %s\n", json, strerror(errno));
            status = 1;
        } else {
            fprintf(f, "{\n  \"schema\": \"%s\",\n  \"hosts\": [", CS_TOPO_SCHEMA);
            int first = 1;
            for (size_t i = 0; i < n; i++) {
                if (!topos[i])
                    continue;
                fputs(first ? "\n" : ",\n", f);
                cs_topo_write_host_json(topos[i], f, 4);
                first = 0;
            }
            fprintf(f, "\n  ],\n  \"errors\": [");
            /* Files that could not be read are listed so a JSON consumer sees them too. */
            first = 1;
            for (size_t i = 0; i < n; i++) {
                if (topos[i])
                    continue;
                fputs(first ? "\n    " : ",\n    ", f);
                cs_topo_json_string(f, n_files ? files[i] : "(live)");
                first = 0;
            }
            fprintf(f, "%s]\n}\n", first ? "" : "\n  ");
            if (f != stdout && fclose(f) != 0) {
                fprintf(stderr, "commscope topo: error writing %s\n", json);
                status = 1;
            }
        }
    }
    for (size_t i = 0; topos && i < n; i++)
        cs_topo_free(topos[i]);
    free(topos);
    free(files);
    return status;
}
