/*
 * The --capture options of `commscope run` and `commscope fabric` (docs/wire.md): parsed here and
 * turned into COMMSCOPE_CAPTURE* variables, which the collector's first rank on every node reads
 * to start the capture helper cs_capture.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

const char *cs__capture_usage(void)
{
    return "  --capture IFACE[,IFACE...]|auto\n"
           "                    capture packet headers on these interfaces of every node\n"
           "                    (auto: those routing to the job's other hosts and those\n"
           "                    the MPI/NCCL configuration names); needs CAP_NET_RAW on\n"
           "                    the nodes, without it the run goes on without capture\n"
           "                    (one warning)\n"
           "  --capture-expect IFACE[,IFACE...]\n"
           "                    the data interfaces traffic should use (default:\n"
           "                    RDMA-capable ones, else the fastest captured); traffic\n"
           "                    elsewhere is flagged\n"
           "  --capture-bucket-ms N  time bucket of the aggregation (default 10)\n"
           "  --capture-raw     also keep raw pcap files, payloads included\n"
           "                    (wire-HOST-IFACE.pcap)\n"
           "  --capture-raw-max BYTES  cap on each node's raw files (default 104857600)\n";
}

static int valid_list(const char *v)
{
    if (!*v || strlen(v) > 900)
        return 0;
    for (const char *p = v; *p; p++)
        if (*p == ' ' || *p == '/' || *p == '\n')
            return 0;
    return 1;
}

static int positive(const char *v, double max)
{
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    return !errno && end != v && *end == '\0' && d > 0 && d <= max;
}

int cs__capture_arg(struct cs__capture_opts *o, int argc, char **argv, int i, const char *cmd)
{
    const char *a = argv[i];
    static const char *const names[] = {"--capture", "--capture-expect", "--capture-bucket-ms",
                                        "--capture-raw-max"};
    if (strcmp(a, "--capture-raw") == 0) {
        o->raw = 1;
        return 1;
    }
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        size_t n = strlen(names[k]);
        const char *v = NULL;
        int used;
        if (strcmp(a, names[k]) == 0) {
            /* "--capture -- mpirun ...": the next word is an option or the end of commscope's
             * options, never a value (no interface name or number starts with '-'). */
            if (i + 1 >= argc || argv[i + 1][0] == '-') {
                fprintf(stderr, "commscope %s: %s needs a value; see 'commscope %s --help'\n", cmd,
                        a, cmd);
                return -1;
            }
            v = argv[i + 1];
            used = 2;
        } else if (strncmp(a, names[k], n) == 0 && a[n] == '=') {
            v = a + n + 1;
            used = 1;
        } else {
            continue;
        }
        int ok;
        switch (k) {
        case 0:
            ok = valid_list(v);
            o->ifaces = v;
            break;
        case 1:
            ok = valid_list(v) && strcmp(v, "auto") != 0;
            o->expect = v;
            break;
        case 2:
            ok = positive(v, 60000);
            o->bucket_ms = v;
            break;
        default:
            ok = positive(v, 1e15) && strspn(v, "0123456789") == strlen(v);
            o->raw_max = v;
            break;
        }
        if (!ok) {
            fprintf(stderr, "commscope %s: %s '%s' is not valid (%s)\n", cmd, names[k], v,
                    k < 2 ? "a comma-separated list of interface names" : "a positive number");
            return -1;
        }
        return used;
    }
    fprintf(stderr, "commscope %s: unknown option '%s'; see 'commscope %s --help'\n", cmd, a, cmd);
    return -1;
}

int cs__capture_env(const struct cs__capture_opts *o, const char *cmd)
{
    if (!o->ifaces && !o->raw && !o->expect)
        return 0;
    char bin[PATH_MAX + 16];
    const char *env = getenv("COMMSCOPE_CAPTURE_BIN");
    if (env && *env) {
        snprintf(bin, sizeof bin, "%s", env);
    } else {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) {
            fprintf(stderr,
                    "commscope %s: cannot find my own executable; set "
                    "COMMSCOPE_CAPTURE_BIN to cs_capture's path; running without "
                    "capture\n",
                    cmd);
            return 0;
        }
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        snprintf(bin, sizeof bin, "%s/cs_capture", exe);
    }
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "commscope %s: capture helper %s: %s; running without capture\n", cmd, bin,
                strerror(errno));
        return 0;
    }
    int rc = setenv("COMMSCOPE_CAPTURE", o->ifaces ? o->ifaces : "auto", 1);
    rc |= setenv("COMMSCOPE_CAPTURE_BIN", bin, 1);
    if (o->expect)
        rc |= setenv("COMMSCOPE_CAPTURE_EXPECT", o->expect, 1);
    if (o->bucket_ms)
        rc |= setenv("COMMSCOPE_CAPTURE_BUCKET_MS", o->bucket_ms, 1);
    if (o->raw)
        rc |= setenv("COMMSCOPE_CAPTURE_RAW", "1", 1);
    if (o->raw_max)
        rc |= setenv("COMMSCOPE_CAPTURE_RAW_MAX", o->raw_max, 1);
    return rc ? -1 : 0;
}
