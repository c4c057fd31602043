/*
 * The public interface (include/commscope/analyzer.h) on synthetic runs whose every number is
 * known: a 2-rank run of 10 all-reduces analysed through the handle (counts, waits, problems,
 * the JSON and text renderings), a run with a rank missing, a directory that does not exist, and
 * the calls in the wrong order.  Uses nothing of the analyzer's internals.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commscope/analyzer.h"
#include "commscope/ops.h"
#include "cs_test.h"
#include "tw.h"

static void ev(struct tw *w, uint16_t op, uint64_t tb, uint64_t te, uint32_t seq, uint64_t bytes)
{
    struct cs_event e = {.t_begin = tb,
                         .t_end = te,
                         .comm = op == CS_OP_ALLREDUCE ? CS_COMM_WORLD_ID : 0,
                         .bytes = bytes,
                         .bytes_recv = bytes,
                         .seq = seq,
                         .peer = -1,
                         .op = op};
    tw_event(w, 0, &e);
}

/* Rank r of 2 in dir: Init, 10 all-reduces of 1 KiB, rank 1 arriving 3 us after rank 0 at each
 * (so rank 0 waits 3 us ten times), Finalize. */
static void write_rank(const char *dir, int r)
{
    struct tw *w = tw_new(r, 2, 42, 100 + (uint64_t)r);
    struct cs_file_header *h = tw_header(w);
    h->t_init = 1000;
    h->t_finalize = 200000;
    int32_t m[2] = {0, 1};
    tw_comm(w, CS_COMM_WORLD_ID, 0, 2, r, m);
    ev(w, CS_OP_INIT, 500, 1000, 0, 0);
    for (uint32_t k = 0; k < 10; k++) {
        uint64_t t = 10000 + 10000 * (uint64_t)k;
        ev(w, CS_OP_ALLREDUCE, t + (r ? 3000 : 0), t + 5000, k, 1024);
    }
    ev(w, CS_OP_FINALIZE, 190000, 200000, 0, 0);
    CHECK(tw_write_rank(w, dir, r) > 0);
}

static char *slurp(FILE *f)
{
    static char buf[1 << 20];
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    return buf;
}

int main(void)
{
    char dir[] = "/tmp/cs-api-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    write_rank(dir, 0);
    write_rank(dir, 1);

    /* The whole run through the handle. */
    struct cs_analysis *a = NULL;
    char err[512] = "";
    FILE *csv = tmpfile();
    struct cs_analysis_opts o = {.events_out = csv};
    CHECK_INT(cs_analysis_open(&a, dir, &o, err, sizeof err), ==, 0);
    CHECK(a != NULL);
    CHECK_INT(cs_analysis_report(a)->ranks_found, ==, 0); /* all zero before the run */
    CHECK_INT(cs_analysis_run(a), ==, 0);
    CHECK_INT(cs_analysis_run(a), ==, CS_EUSAGE); /* once */
    const struct cs_report *rep = cs_analysis_report(a);
    CHECK_INT(rep->ranks_found, ==, 2);
    CHECK_INT(rep->world_size, ==, 2);
    CHECK_INT(rep->events, ==, 24);
    CHECK_INT(rep->matched, ==, 10);
    CHECK_INT(rep->incomplete, ==, 0);
    CHECK_INT(rep->nranks, ==, 2);
    CHECK_NEAR(rep->ranks[0].wait_s, 10 * 3e-6, 1e-12);
    CHECK_NEAR(rep->ranks[1].wait_s, 0, 1e-12);
    CHECK_INT(rep->ranks[0].calls, ==, 10);
    CHECK_INT(rep->ranks[1].bytes, ==, 10 * 1024);
    CHECK_INT(cs_analysis_nproblems(a), ==, rep->nproblems);
    CHECK(cs_analysis_problem(a, cs_analysis_nproblems(a)) == NULL);
    /* the events CSV: a header and one line per event */
    const char *c = slurp(csv);
    size_t lines = 0;
    for (; *c; c++)
        lines += *c == '\n';
    CHECK_INT(lines, ==, 1 + 24);
    fclose(csv);
    /* the renderings */
    FILE *j = tmpfile();
    CHECK_INT(cs_report_write_json(rep, j), ==, 0);
    const char *js = slurp(j);
    CHECK(js[0] == '{');
    CHECK_CONTAINS(js, "\"world_size\": 2");
    fclose(j);
    FILE *t = tmpfile();
    cs_report_write_text(rep, t);
    CHECK_CONTAINS(slurp(t), "MPI_Allreduce");
    fclose(t);
    cs_analysis_free(a);

    /* A rank missing: the run still analyses, and the problem says which. */
    char p[512];
    snprintf(p, sizeof p, "%s/rank-00001.cst", dir);
    CHECK_INT(unlink(p), ==, 0);
    CHECK_INT(cs_analysis_open(&a, dir, NULL, err, sizeof err), ==, 0);
    CHECK_INT(cs_analysis_nranks(a), ==, 2);
    /* An importer's labels and problems, before the run only. */
    CHECK_INT(cs_analysis_set_origin(a, "imported", "/the/user/path", NULL), ==, 0);
    CHECK_INT(cs_analysis_add_problem(a, "the importer met something"), ==, 0);
    CHECK_INT(cs_analysis_run(a), ==, 0);
    CHECK_INT(cs_analysis_set_origin(a, "late", "/late", NULL), ==, CS_EUSAGE);
    CHECK_INT(cs_analysis_add_problem(a, "too late"), ==, CS_EUSAGE);
    rep = cs_analysis_report(a);
    CHECK_STR(rep->source, "imported");
    CHECK_STR(rep->dir, "/the/user/path");
    /* problems in the order found: the loader's (the missing rank), the importer's, the run's */
    CHECK_STR(cs_analysis_problem(a, 1), "the importer met something");
    CHECK_INT(rep->ranks_found, ==, 1);
    CHECK_INT(rep->ranks_expected, ==, 2);
    CHECK_INT(rep->nmissing, ==, 1);
    CHECK_INT(rep->missing[0], ==, 1);
    CHECK_INT(rep->incomplete, ==, 10); /* every all-reduce lacks its second member */
    CHECK(cs_analysis_nproblems(a) >= 1);
    int said = 0;
    for (size_t i = 0; i < cs_analysis_nproblems(a); i++) {
        fprintf(stderr, "problem: %s\n", cs_analysis_problem(a, i));
        said |= strstr(cs_analysis_problem(a, i), "1 of 2 ranks missing") != NULL;
    }
    CHECK(said);
    cs_analysis_free(a);
    snprintf(p, sizeof p, "%s/rank-00000.cst", dir);
    unlink(p);
    rmdir(dir);

    /* No such directory: an error with the reason, a handle to free, and no run. */
    err[0] = '\0';
    CHECK_INT(cs_analysis_open(&a, dir, NULL, err, sizeof err), ==, CS_ENOENT);
    CHECK(a != NULL);
    CHECK_CONTAINS(err, dir);
    CHECK_INT(cs_analysis_run(a), ==, CS_EUSAGE);
    CHECK_INT(cs_analysis_report(a)->ranks_found, ==, 0);
    cs_analysis_free(a);
    cs_analysis_free(NULL);
    CHECK_STR(cs_strerror(CS_ENOENT), "no such file or directory");
    return cs_test_result();
}
