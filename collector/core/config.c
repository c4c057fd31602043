// clang-format off
/*
 * The collector's configuration: COMMSCOPE_* environment variables only, read at cs_trace_open
 * (COMMSCOPE_TEST_CLOCK_SKEW is read earlier, by a constructor in clock.c).  A bad value gets one
 * warning naming the variable and the value, and the default applies; nothing here aborts.
 *
 * | variable                  | default                 | meaning                             |
 * |---------------------------|-------------------------|-------------------------------------|
 * | COMMSCOPE_DIR             | ./commscope-run-<run_id | run directory where rank 0 gathers  |
 * |                           | as 16 hex digits>       | the traces (created with parents)   |
 * | COMMSCOPE_LOCAL_DIR       | COMMSCOPE_DIR           | where this rank writes its          |
 * |                           |                         | rank-NNNNN.cst before the gather;   |
 * |                           |                         | %r = rank (decimal), %h = host      |
 * |                           |                         | name, %% = %                        |
 * | COMMSCOPE_MAX_MB          | 1024                    | cap on this rank's trace file in    |
 * |                           |                         | MiB, 1 .. 1048576; past it events   |
 * |                           |                         | are dropped and counted             |
 * |                           |                         | (head mode) or reuse the oldest     |
 * |                           |                         | blocks (ring mode)                  |
 * | COMMSCOPE_TRACE_MODE      | ring                    | ring: at the cap, keep the newest   |
 * |                           |                         | events, fold the oldest into the    |
 * |                           |                         | totals block (CS_FLAG_RING); head:  |
 * |                           |                         | keep the first, count the rest as   |
 * |                           |                         | dropped (CS_FLAG_DROPPED)           |
 * | COMMSCOPE_GATHER          | auto                    | always: MPI_Finalize brings every   |
 * |                           |                         | trace into COMMSCOPE_DIR; never:    |
 * |                           |                         | each stays where its rank wrote it; |
 * |                           |                         | auto: always up to 256 ranks, else  |
 * |                           |                         | never.  Rank 0 writes               |
 * |                           |                         | traces.index (where each is) either |
 * |                           |                         | way                                 |
 * | COMMSCOPE_DISABLE         | 0                       | 1/yes/true/on: never open a trace;  |
 * |                           |                         | 0/no/false/off: trace               |
 * | COMMSCOPE_TEST_CLOCK_SKEW | unset (no skew)         | test only, RANK:OFFSET_NS:DRIFT_PPM |
 * |                           |                         | (integer, integer, decimal in       |
 * |                           |                         | (-1e6, 1e6)): on that rank cs_now() |
 * |                           |                         | = raw + OFFSET_NS + (raw - base) *  |
 * |                           |                         | DRIFT_PPM / 1e6, base = raw clock   |
 * |                           |                         | at library load; CS_FLAG_CLOCK_SKEW |
 *
 * An empty value counts as unset.  Relative directories are relative to the working directory
 * of the process at cs_trace_open.
 */
// clang-format on
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "internal.h"

#define DEFAULT_MAX_MB 1024ull
#define LIMIT_MAX_MB (1ull << 20)

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int parse_bool(const char *v, int *out)
{
    static const char *yes[] = {"1", "yes", "true", "on"}, *no[] = {"0", "no", "false", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

/*
 * Expand %r, %h and %% of COMMSCOPE_LOCAL_DIR into out.  Returns 0, -1 for an unknown '%'
 * sequence, -2 when the result does not fit.
 */
static int expand_local(const char *in, int rank, char *out, size_t cap)
{
    char host[CS_HOST_MAX + 1] = "";
    size_t n = 0;
    for (const char *p = in; *p; p++) {
        char tmp[32];
        const char *piece = tmp;
        if (*p != '%') {
            tmp[0] = *p;
            tmp[1] = '\0';
        } else if (p[1] == 'r') {
            snprintf(tmp, sizeof tmp, "%d", rank);
            p++;
        } else if (p[1] == 'h') {
            if (!host[0] && gethostname(host, CS_HOST_MAX) != 0)
                strcpy(host, "unknown-host");
            host[CS_HOST_MAX] = '\0';
            piece = host;
            p++;
        } else if (p[1] == '%') {
            strcpy(tmp, "%");
            p++;
        } else {
            return -1;
        }
        size_t len = strlen(piece);
        if (n + len >= cap)
            return -2;
        memcpy(out + n, piece, len);
        n += len;
    }
    out[n] = '\0';
    return 0;
}

int cs__config_load(struct cs__config *cfg, int rank, uint64_t run_id)
{
    const char *v;
    memset(cfg, 0, sizeof *cfg);

    if ((v = env("COMMSCOPE_DISABLE")) && parse_bool(v, &cfg->disabled) != 0) {
        cs_warn("COMMSCOPE_DISABLE=\"%s\" is not 0 or 1; using 0 (tracing on)", v);
        cfg->disabled = 0;
    }

    cfg->max_bytes = DEFAULT_MAX_MB << 20;
    if ((v = env("COMMSCOPE_MAX_MB"))) {
        char *end;
        errno = 0;
        unsigned long long mb = strtoull(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-' || mb < 1 || mb > LIMIT_MAX_MB)
            cs_warn("COMMSCOPE_MAX_MB=\"%s\" is not a whole number of MiB from 1 to %llu; using "
                    "%llu",
                    v, LIMIT_MAX_MB, DEFAULT_MAX_MB);
        else
            cfg->max_bytes = mb << 20;
    }

    cfg->ring = 1;
    if ((v = env("COMMSCOPE_TRACE_MODE"))) {
        if (strcasecmp(v, "head") == 0)
            cfg->ring = 0;
        else if (strcasecmp(v, "ring") != 0)
            cs_warn("COMMSCOPE_TRACE_MODE=\"%s\" is not ring or head; using ring", v);
    }

    if ((v = env("COMMSCOPE_GATHER"))) {
        if (strcasecmp(v, "always") == 0)
            cfg->gather = 1;
        else if (strcasecmp(v, "never") == 0)
            cfg->gather = 2;
        else if (strcasecmp(v, "auto") != 0)
            cs_warn("COMMSCOPE_GATHER=\"%s\" is not auto, always or never; using auto", v);
    }

    if ((v = env("COMMSCOPE_DIR"))) {
        if (strlen(v) >= sizeof cfg->run_dir - 32) {
            cs_warn("COMMSCOPE_DIR is longer than %zu bytes; cannot trace",
                    sizeof cfg->run_dir - 32);
            return -1;
        }
        strcpy(cfg->run_dir, v);
    } else {
        snprintf(cfg->run_dir, sizeof cfg->run_dir, "./commscope-run-%016llx",
                 (unsigned long long)run_id);
    }

    strcpy(cfg->local_dir, cfg->run_dir);
    if ((v = env("COMMSCOPE_LOCAL_DIR"))) {
        /* Leave room for "/rank-NNNNN.cst". */
        int rc = expand_local(v, rank, cfg->local_dir, sizeof cfg->local_dir - 32);
        if (rc == -1) {
            cs_warn("COMMSCOPE_LOCAL_DIR=\"%s\" has a '%%' not followed by r, h or %%; using "
                    "COMMSCOPE_DIR (%s)",
                    v, cfg->run_dir);
            strcpy(cfg->local_dir, cfg->run_dir);
        } else if (rc == -2) {
            cs_warn("COMMSCOPE_LOCAL_DIR=\"%s\" expands to more than %zu bytes; cannot trace", v,
                    sizeof cfg->local_dir - 32);
            return -1;
        }
    }
    return 0;
}
