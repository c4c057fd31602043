/*
 * `commscope COMMAND ...`: the user's entry point.  Subcommands come from one table, one file each
 * (perf style), so later commands (compare, topo, fabric) are one row and one file.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "internal.h"

static const struct cs__cmd commands[] = {
    {"run", cs__cmd_run, "run a job (mpirun, srun, torchrun) under the collector, analyse"},
    {"analyze", cs_cmd_analyze, "analyse a run: text summary, JSON and HTML reports, Perfetto"},
    {"version", cs__cmd_version, "the version of commscope and of its trace format"},
    {"topo", cs__cmd_topo, "a node's topology: GPUs, NICs, GPU-NIC pairing, link rates"},
    {"fabric", cs__cmd_fabric, "benchmark the fabric: a verdict per node and link, suspects"},
    {"compare", cs__cmd_compare, "compare runs: scaling efficiencies, time per step before/after"},
    {"node-snapshot", cs__cmd_node_snapshot,
     "(internal) the collector's per-node topology and port helper"},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: commscope COMMAND [ARGS...]\n"
               "       commscope COMMAND --help\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nexamples:\n"
               "  commscope run -- mpirun -np 8 ./train\n"
               "  commscope analyze RUN_DIR --html report.html --perfetto trace.json\n"
               "  commscope help analyze\n");
    fprintf(f, "\nexit status: 2 for an unknown command or option; otherwise the command's own\n"
               "(see 'commscope COMMAND --help').\n");
    fprintf(f, "\nSee docs/user-guide.md for the environment variables and exit statuses.\n");
}

/* SIGXFSZ as the user's shell left it, for the programs commscope starts. */
static struct sigaction xfsz_orig;

void cs__restore_child_signals(void)
{
    sigaction(SIGXFSZ, &xfsz_orig, NULL);
}

static const struct cs__cmd *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    /*
     * A file-size limit (ulimit -f) must make a report fail with a message, not kill commscope:
     * ignored, SIGXFSZ turns a write past the limit into the error EFBIG.  The programs it starts
     * get the disposition back (cs__restore_child_signals).
     */
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigemptyset(&ign.sa_mask);
    sigaction(SIGXFSZ, &ign, &xfsz_orig);
    if (argc < 2) {
        usage(stderr);
        return CS__EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0)
        name = "version";
    /* `commscope help CMD` is `commscope CMD --help`, as in git and perf. */
    if (strcmp(name, "help") == 0) {
        if (argc < 3) {
            usage(stdout);
            return 0;
        }
        const struct cs__cmd *c = find_command(argv[2]);
        if (!c) {
            fprintf(stderr, "commscope: unknown command '%s'; see 'commscope --help'\n", argv[2]);
            return CS__EXIT_USAGE;
        }
        char *hargv[] = {argv[2], "--help", NULL};
        return c->fn(2, hargv);
    }
    if (name[0] == '-') {
        fprintf(stderr, "commscope: unknown option '%s'; see 'commscope --help'\n", name);
        return CS__EXIT_USAGE;
    }
    const struct cs__cmd *c = find_command(name);
    if (!c) {
        fprintf(stderr, "commscope: unknown command '%s'; see 'commscope --help'\n", name);
        return CS__EXIT_USAGE;
    }
    return c->fn(argc - 1, argv + 1);
}
