/* Verdicts of `commscope fabric` on benchmark output written here, where the truth is known. */
#include <stdlib.h>
#include <string.h>

#include "cs_test.h"
#include "fabric.h"

static void feed_nodes(struct cs_fabric *f, int n, const double *nic)
{
    char line[256];
    snprintf(line, sizeof(line), "@cs-fabric start ranks=%d nodes=%d pair_bytes=8 pair_iters=1", n,
             n);
    CHECK_INT(cs_fabric_feed(f, line), ==, 1);
    for (int i = 0; i < n; i++) {
        snprintf(line, sizeof(line), "@cs-fabric rank rank=%d node=%d host=h%d nic=%s nic_gbps=%g",
                 i, i, i + 1, nic && nic[i] > 0 ? "mlx5_0" : "-", nic ? nic[i] : 0);
        CHECK_INT(cs_fabric_feed(f, line), ==, 1);
    }
}

static void feed_link(struct cs_fabric *f, int a, int b, double gbps, double lat)
{
    char line[256];
    snprintf(line, sizeof(line),
             "@cs-fabric pair round=0 a=%d b=%d ab_gbps=%g ba_gbps=%g latency_us=%g", a, b,
             gbps * 1.05, gbps, lat);
    CHECK_INT(cs_fabric_feed(f, line), ==, 1);
}

static const struct cs_fabric_link *link_of(const struct cs_fabric *f, int a, int b)
{
    for (size_t i = 0; i < f->n_links; i++)
        if ((f->links[i].a == a && f->links[i].b == b) ||
            (f->links[i].a == b && f->links[i].b == a))
            return &f->links[i];
    return NULL;
}

int main(void)
{
    struct cs_fabric_limits lim;
    cs_fabric_default_limits(&lim);

    /* Four nodes, node 4's link at a quarter of the others: it alone is suspect, its three
     * links slow, the other three ok. */
    struct cs_fabric f;
    cs_fabric_init(&f);
    feed_nodes(&f, 4, NULL);
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++)
            feed_link(&f, a, b, b == 3 ? 100 : 400, 50);
    CHECK_INT(cs_fabric_feed(&f, "job output line"), ==, 0);
    CHECK_INT(cs_fabric_feed(&f, "@cs-fabric coll op=allreduce bytes=1024 time_us=10 "
                                 "algbw_gbps=0.8192 busbw_gbps=1.2288"),
              ==, 1);
    CHECK_INT(cs_fabric_feed(&f, "@cs-fabric done"), ==, 1);
    cs_fabric_judge(&f, &lim);
    CHECK_INT(f.n_nodes, ==, 4);
    CHECK_NEAR(f.link_median_gbps, 250, 1e-9);    /* (100 + 400) / 2 */
    CHECK_NEAR(f.node_reference_gbps, 400, 1e-9); /* h1..h3: median of (400, 400, 100) */
    CHECK_STR(f.nodes[3].status, "slow");
    CHECK_NEAR(f.nodes[3].ratio, 0.25, 1e-9);
    for (int i = 0; i < 3; i++)
        CHECK_STR(f.nodes[i].status, "ok");
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++) {
            const struct cs_fabric_link *l = link_of(&f, a, b);
            CHECK(l != NULL);
            if (l)
                CHECK_STR(l->status, b == 3 ? "slow" : "ok");
        }
    CHECK_INT(f.n_suspects, ==, 1);
    if (f.n_suspects) {
        CHECK_STR(f.suspects[0].kind, "node");
        CHECK_STR(f.suspects[0].name, "h4");
        CHECK_CONTAINS(f.suspects[0].evidence, "100 Gb/s measured");
    }
    CHECK_INT(f.n_notes, ==, 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    cs_fabric_write_json(&f, m);
    cs_fabric_print(&f, m);
    fclose(m);
    CHECK_CONTAINS(buf, "\"schema\": \"commscope-fabric/1\"");
    CHECK_CONTAINS(buf, "{\"a\": \"h1\", \"b\": \"h4\", \"gbps\": 100,");
    CHECK_CONTAINS(buf, "\"busbw_gbps\": 1.2288");
    CHECK_CONTAINS(buf, "1. node h4:");
    free(buf);
    cs_fabric_free(&f);

    /* Five healthy nodes and one bad cable between h2 and h5: a link suspect, no node. */
    cs_fabric_init(&f);
    feed_nodes(&f, 5, NULL);
    for (int a = 0; a < 5; a++)
        for (int b = a + 1; b < 5; b++)
            feed_link(&f, a, b, a == 1 && b == 4 ? 90 : 300, 40);
    CHECK_INT(cs_fabric_feed(&f, "@cs-fabric done"), ==, 1);
    cs_fabric_judge(&f, &lim);
    for (int i = 0; i < 5; i++)
        CHECK_STR(f.nodes[i].status, "ok");
    CHECK_INT(f.n_suspects, ==, 1);
    if (f.n_suspects) {
        CHECK_STR(f.suspects[0].kind, "link");
        CHECK_STR(f.suspects[0].name, "h2 - h5");
        CHECK_NEAR(f.suspects[0].ratio, 0.3, 1e-9);
    }
    cs_fabric_free(&f);

    /* Capacity: all links equally slow against 200 Gb/s NICs: peers cannot tell, the capacity
     * model can; a link 5x the median latency is slow too. */
    cs_fabric_init(&f);
    double nic[3] = {200, 200, 200};
    feed_nodes(&f, 3, nic);
    feed_link(&f, 0, 1, 60, 2);
    feed_link(&f, 0, 2, 60, 2);
    feed_link(&f, 1, 2, 60, 10);
    cs_fabric_feed(&f, "@cs-fabric done");
    cs_fabric_judge(&f, &lim);
    for (int i = 0; i < 3; i++)
        CHECK_STR(f.nodes[i].status, "slow");
    CHECK_NEAR(f.links[0].expected_gbps, 200, 0);
    CHECK_CONTAINS(f.links[0].evidence, "60 Gb/s measured vs 200 Gb/s expected vs 60 Gb/s median");
    CHECK_STR(link_of(&f, 1, 2)->status, "slow");
    CHECK_INT(f.n_suspects, ==, 3);
    cs_fabric_free(&f);

    /* Latency, judged against peers.  A node whose every link is slow to answer (a busy host):
     * the node is slow, its links are not suspects of their own, whatever half of them the
     * median of all links would have split off.  A single slow cable: that link, both nodes ok. */
    cs_fabric_init(&f);
    feed_nodes(&f, 4, NULL);
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++)
            feed_link(&f, a, b, 400, a == 0 ? (b == 1 ? 2600 : b == 2 ? 3900 : 6000) : 20);
    cs_fabric_feed(&f, "@cs-fabric done");
    cs_fabric_judge(&f, &lim);
    CHECK_STR(f.nodes[0].status, "slow");
    CHECK_NEAR(f.nodes[0].latency_us, 3900, 1e-9);
    CHECK_NEAR(f.node_reference_latency_us, 20, 1e-9); /* h2..h4: median of (slow, 20, 20) */
    CHECK_CONTAINS(f.nodes[0].evidence, "latency 3.9e+03 us vs 20 us median of nodes");
    for (int i = 1; i < 4; i++)
        CHECK_STR(f.nodes[i].status, "ok");
    CHECK_INT(f.n_suspects, ==, 1);
    CHECK(f.n_suspects && !strcmp(f.suspects[0].name, "h1"));
    /* h1 - h2 (2600 us) against h1's and h2's other links (3900, 6000, 20, 20): median 1960. */
    CHECK_NEAR(link_of(&f, 0, 1)->latency_ref_us, 1960, 1e-9);
    CHECK_STR(link_of(&f, 0, 1)->status, "ok");
    CHECK_STR(link_of(&f, 2, 3)->status, "ok");
    cs_fabric_free(&f);

    cs_fabric_init(&f);
    feed_nodes(&f, 4, NULL);
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++)
            feed_link(&f, a, b, 400, a == 1 && b == 2 ? 200 : 20);
    cs_fabric_feed(&f, "@cs-fabric done");
    cs_fabric_judge(&f, &lim);
    for (int i = 0; i < 4; i++)
        CHECK_STR(f.nodes[i].status, "ok");
    CHECK_STR(link_of(&f, 1, 2)->status, "slow");
    CHECK_CONTAINS(link_of(&f, 1, 2)->evidence,
                   "latency 200 us vs 20 us median of the two nodes' other links");
    CHECK_INT(f.n_suspects, ==, 1);
    CHECK(f.n_suspects && !strcmp(f.suspects[0].name, "h2 - h3"));
    cs_fabric_free(&f);

    /* A re-test ("latency" line) keeps the lower figure: the same slow cable, re-measured at
     * 25 us, is fine; one re-measured slow stays slow; a re-test of a pair never measured is a
     * malformed line. */
    cs_fabric_init(&f);
    feed_nodes(&f, 4, NULL);
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++)
            feed_link(&f, a, b, 400, (a == 1 && b == 2) || (a == 0 && b == 3) ? 200 : 20);
    CHECK_INT(cs_fabric_feed(&f, "@cs-fabric latency a=1 b=2 latency_us=25 retests=5"), ==, 1);
    CHECK_INT(cs_fabric_feed(&f, "@cs-fabric latency a=0 b=3 latency_us=300 retests=5"), ==, 1);
    CHECK_INT(cs_fabric_feed(&f, "@cs-fabric latency a=0 b=7 latency_us=1 retests=5"), ==, -1);
    cs_fabric_feed(&f, "@cs-fabric done");
    cs_fabric_judge(&f, &lim);
    CHECK_NEAR(link_of(&f, 1, 2)->latency_us, 25, 1e-9);
    CHECK_INT(link_of(&f, 1, 2)->latency_retests, ==, 5);
    CHECK_STR(link_of(&f, 1, 2)->status, "ok");
    CHECK_NEAR(link_of(&f, 0, 3)->latency_us, 200, 1e-9);
    CHECK_STR(link_of(&f, 0, 3)->status, "slow");
    CHECK_CONTAINS(link_of(&f, 0, 3)->evidence, "(lowest after a re-test)");
    CHECK_INT(f.n_suspects, ==, 1);
    CHECK(f.n_suspects && !strcmp(f.suspects[0].name, "h1 - h4"));
    cs_fabric_free(&f);

    /* A node that failed mid-benchmark: no result; malformed and missing lines are noted. */
    cs_fabric_init(&f);
    feed_nodes(&f, 4, NULL);
    CHECK_INT(cs_fabric_feed(&f, "@cs-fabric pairs rounds=3 of=3"), ==, 1);
    feed_link(&f, 0, 1, 300, 40);
    feed_link(&f, 0, 2, 300, 40);
    feed_link(&f, 1, 2, 300, 40);
    CHECK_INT(cs_fabric_feed(&f, "@cs-fabric pair round=1 a=0 b=x ab_gbps=1"), ==, -1);
    CHECK_INT(cs_fabric_feed(&f, "@cs-fabric pair round=1 a=2 b=2 ab_gbps=1 ba_gbps=1 "
                                 "latency_us=1"),
              ==, -1);
    cs_fabric_judge(&f, &lim);
    CHECK_STR(f.nodes[3].status, "failed");
    CHECK_STR(f.nodes[3].host, "h4");
    CHECK_INT(f.n_suspects, ==, 1);
    CHECK(f.n_suspects && !strcmp(f.suspects[0].name, "h4"));
    CHECK_INT(f.n_notes, ==, 4);
    if (f.n_notes == 4) {
        CHECK_CONTAINS(f.notes[0], "malformed benchmark line ignored: \"pair round=1 a=0 b=x");
        CHECK_CONTAINS(f.notes[2], "3 of 6 node pairs measured");
        CHECK_CONTAINS(f.notes[3], "did not finish");
    }
    CHECK(!f.complete);
    cs_fabric_free(&f);

    /* The launcher names the failed process: mpirun's non-zero exit (the daemons' step 0 is
     * not the application; only the first failure counts), srun's line, mpirun's signal. */
    const char *mpirun[] = {"  Process name: [[36548,0],1]\n", "  Exit code:    9\n",
                            "  Process name: [[36548,1],2]\n", "  Exit code:    1\n",
                            "  Process name: [[36548,1],3]\n", "  Exit code:    7\n"};
    cs_fabric_init(&f);
    feed_nodes(&f, 4, NULL);
    CHECK_INT(cs_fabric_feed(&f, "@cs-fabric pairs rounds=3 of=3"), ==, 1);
    feed_link(&f, 0, 3, 300, 40);
    feed_link(&f, 1, 2, 300, 40);
    CHECK_INT(cs_fabric_launcher_line(&f, "[h1:21148] 1 more process has sent help message"), ==,
              0);
    CHECK_INT(cs_fabric_launcher_line(&f, mpirun[0]), ==, 0);
    CHECK_INT(cs_fabric_launcher_line(&f, mpirun[1]), ==, 0);
    for (int i = 2; i < 6; i++)
        CHECK_INT(cs_fabric_launcher_line(&f, mpirun[i]), ==, 1);
    cs_fabric_judge(&f, &lim);
    CHECK_STR(f.nodes[2].status, "failed");
    CHECK_STR(f.nodes[2].failure,
              "rank 2 exited with status 1 during node-to-node round 2 of 3 (reported by mpirun)");
    CHECK_CONTAINS(f.nodes[2].evidence, "before that the median of its 1 link(s) was 300 Gb/s");
    for (int i = 0; i < 4; i++)
        if (i != 2)
            CHECK_STR(f.nodes[i].status, "ok");
    CHECK_INT(f.n_suspects, ==, 1);
    CHECK(f.n_suspects && !strcmp(f.suspects[0].name, "h3"));
    CHECK_CONTAINS(f.notes[0], "node h3 failed mid-benchmark: rank 2 exited with status 1");
    cs_fabric_free(&f);

    cs_fabric_init(&f);
    feed_nodes(&f, 4, NULL);
    CHECK_INT(cs_fabric_feed(&f, "@cs-fabric pairs rounds=3 of=3"), ==, 1);
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++)
            feed_link(&f, a, b, 300, 40);
    CHECK_INT(cs_fabric_feed(&f, "@cs-fabric coll op=allreduce bytes=8 time_us=10 "
                                 "algbw_gbps=0.0064 busbw_gbps=0.0096"),
              ==, 1);
    CHECK_INT(cs_fabric_launcher_line(&f, "srun: error: h4: task 3: Exited with exit code 2\n"), ==,
              1);
    CHECK_INT(cs_fabric_launcher_line(&f, "srun: error: h1: task 0: Killed\n"), ==, 1);
    cs_fabric_judge(&f, &lim);
    CHECK_STR(f.nodes[3].status, "failed");
    CHECK_STR(f.nodes[3].failure,
              "rank 3 exited with status 2 during the collectives sweep (reported by srun)");
    CHECK_STR(f.nodes[0].status, "ok");
    cs_fabric_free(&f);

    cs_fabric_init(&f);
    feed_nodes(&f, 2, NULL);
    CHECK_INT(cs_fabric_launcher_line(&f, "mpirun noticed that process rank 1 with PID 4242 on "
                                          "node h2 exited on signal 9 (Killed).\n"),
              ==, 1);
    cs_fabric_judge(&f, &lim);
    CHECK_STR(f.nodes[1].status, "failed");
    CHECK_STR(f.nodes[1].failure, "rank 1 was killed by signal 9 (Killed) before the "
                                  "node-to-node test (reported by mpirun)");
    CHECK_CONTAINS(f.nodes[1].evidence, "no link measured before");
    cs_fabric_free(&f);
    return cs_test_result();
}
