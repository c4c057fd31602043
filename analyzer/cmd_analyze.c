/* `commscope analyze RUN_DIR [--json FILE] [--quiet]`: the command line around the pipeline. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "internal.h"
#include "wire.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: commscope analyze RUN_DIR [--json FILE] [--events FILE] [--quiet]\n"
               "                         [--pcap FILE...]\n"
               "       commscope analyze --pcap FILE... [--json FILE] [--quiet]\n"
               "  RUN_DIR      directory holding rank-NNNNN.cst trace files (and wire-HOST.csw\n"
               "               capture files, read into the wire section)\n"
               "  --pcap FILE...  also read these pcap/pcapng files (from any tool) into the\n"
               "               wire section; without RUN_DIR, report the wire section only\n"
               "  --json FILE  also write the JSON report to FILE ('-' for stdout)\n"
               "  --events FILE  write every event as CSV, times on rank 0's clock (ns)\n"
               "  --quiet      do not print the text summary\n"
               "exit status: 0 all input analysed, 1 analysed with problems (missing or invalid\n"
               "input), 2 usage error, 3 nothing could be analysed\n");
}

int cs_cmd_analyze(int argc, char **argv)
{
    const char *dir = NULL, *json = NULL, *events = NULL;
    int quiet = 0;
    char **pcaps = NULL;
    int npcaps = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--pcap") == 0) {
            if (i + 1 >= argc || argv[i + 1][0] == '-') {
                fprintf(stderr, "commscope analyze: --pcap needs one or more files\n");
                usage(stderr);
                return 2;
            }
            /* The files up to the next option; a directory among them is the RUN_DIR.  The
             * list reuses argv's slots (no allocation): the files move to its front. */
            pcaps = argv + i + 1;
            while (i + 1 < argc && argv[i + 1][0] != '-') {
                char *x = argv[++i];
                if (!dir && cs__is_dir(x))
                    dir = x;
                else
                    pcaps[npcaps++] = x;
            }
        } else if (strcmp(a, "--json") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "commscope analyze: --json needs a file name\n");
                usage(stderr);
                return 2;
            }
            json = argv[++i];
        } else if (strcmp(a, "--events") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "commscope analyze: --events needs a file name\n");
                usage(stderr);
                return 2;
            }
            events = argv[++i];
        } else if (strncmp(a, "--json=", 7) == 0 && a[7]) {
            json = a + 7;
        } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
            quiet = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "commscope analyze: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!dir) {
            dir = a;
        } else {
            fprintf(stderr, "commscope analyze: more than one run directory ('%s' and '%s')\n",
                    dir, a);
            usage(stderr);
            return 2;
        }
    }
    cs__wire_set_pcaps(pcaps, npcaps);
    if (!dir && npcaps)
        return cs__analyze_wire_only(json, quiet);
    if (!dir) {
        fprintf(stderr, "commscope analyze: no run directory given\n");
        usage(stderr);
        return 2;
    }

    struct cs__run run;
    struct cs_report rep;
    char err[1024] = "";
    FILE *ev = NULL;
    if (events && !(ev = fopen(events, "w"))) {
        fprintf(stderr, "commscope analyze: cannot write events to %s: %s\n", events,
                strerror(errno));
        return 3;
    }
    int rc = cs__analyze_dir(dir, &run, &rep, err, sizeof err, ev);
    if (ev && fclose(ev) != 0) {
        fprintf(stderr, "commscope analyze: error writing %s\n", events);
        rc = rc ? rc : CS_EIO;
    }
    if (rc == CS_ENOENT || rc == CS_EIO || (rc && !run.ranks)) {
        fprintf(stderr, "commscope analyze: %s\n", err[0] ? err : cs_strerror(rc));
        cs__report_free(&rep);
        cs__run_free(&run);
        return 3;
    }
    for (size_t i = 0; i < run.nproblems; i++)
        fprintf(stderr, "commscope analyze: %s\n", run.problems[i]);
    int status = rep.ranks_found == 0 ? 3 : (rc || run.nproblems) ? 1 : 0;
    if (status == 3) {
        fprintf(stderr, "commscope analyze: nothing to analyse in %s\n", dir);
    } else {
        if (!quiet)
            cs__report_text(&rep, stdout);
        if (json) {
            FILE *f = strcmp(json, "-") == 0 ? stdout : fopen(json, "w");
            if (!f) {
                perror(json);
                fprintf(stderr, "commscope analyze: cannot write the JSON report to %s\n", json);
                status = status ? status : 1;
            } else {
                int wr = cs__report_json(&rep, f);
                if ((f != stdout && fclose(f) != 0) || wr) {
                    fprintf(stderr, "commscope analyze: error writing %s\n", json);
                    status = status ? status : 1;
                }
            }
        }
        fflush(stdout);
    }
    cs__report_free(&rep);
    cs__run_free(&run);
    return status;
}
