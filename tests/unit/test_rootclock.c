/*
 * Ranks without MPI aligned through different clock references: some through the root service
 * (CS_FLAG_CLOCK_ROOT), some through their own host's CLOCK_REALTIME.  On two hosts the analysis
 * says their times compare only as well as the hosts' clocks; on one host (one CLOCK_REALTIME)
 * or with a single reference it says nothing.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cs_test.h"
#include "internal.h"
#include "tw.h"

#define T0 1000000000ull

static int count_problems(const struct cs_report *rep, const char *needle)
{
    int n = 0;
    for (size_t i = 0; i < rep->nproblems; i++)
        n += strstr(rep->problems[i], needle) != NULL;
    return n;
}

/* Two ranks; root[r] sets CLOCK_ROOT on rank r; host of rank 1 is hosts[1]. */
static int run_case(const char *root, const char *name, const int via_root[2], const char *host1)
{
    char dir[512], p[600], err[512];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    mkdir(dir, 0700);
    for (int r = 0; r < 2; r++) {
        struct tw *w = tw_new_gpu_rank(r, 2, 0x99, 10 + (uint64_t)r, T0, T0 + 1000000);
        struct cs_file_header *h = tw_header(w);
        snprintf(h->host, sizeof h->host, "%s", r ? host1 : "node-a");
        if (via_root[r])
            h->flags |= CS_FLAG_CLOCK_ROOT;
        for (int i = 0; i < 2; i++) {
            h->clock[i] = (struct cs_clock_sample){.local_ns = T0 + (uint64_t)i * 500000,
                                                   .offset_ns = 1000,
                                                   .rtt_ns = 100,
                                                   .rounds = 16,
                                                   .valid = 1};
        }
        snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, r);
        CHECK(tw_write(w, p, NULL) > 0);
        tw_free(w);
    }
    struct cs__run run;
    struct cs_report rep;
    int rc = cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL);
    CHECK_INT(rc, ==, 0);
    if (rc)
        return -1;
    int n = count_problems(&rep, "could not reach the root service");
    cs__report_free(&rep);
    cs__run_free(&run);
    return n;
}

int main(void)
{
    char root[] = "/tmp/cs-test-rootclock-XXXXXX";
    if (tw_tmpdir(root) != 0)
        return 1;
    CHECK_INT(run_case(root, "mixed-two-hosts", (const int[]){1, 0}, "node-b"), ==, 1);
    CHECK_INT(run_case(root, "mixed-one-host", (const int[]){1, 0}, "node-a"), ==, 0);
    CHECK_INT(run_case(root, "all-root", (const int[]){1, 1}, "node-b"), ==, 0);
    CHECK_INT(run_case(root, "all-host", (const int[]){0, 0}, "node-b"), ==, 0);
    tw_rmtree(root);
    return cs_test_result();
}
