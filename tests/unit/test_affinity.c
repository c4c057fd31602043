/*
 * GPU-NIC affinity per rank (analyzer/passes/affinity.c) on synthetic traces whose NCCL
 * communicator records name each rank's GPU, with the JUWELS Booster node's saved hwloc topology as
 * the host's snapshot (4 A100s, each below the same PCIe switch as its own HDR HCA; GPUs 0 and 1
 * with mlx5_1 and mlx5_0 on socket 0, GPUs 2 and 3 with mlx5_3 and mlx5_2 on socket 1).
 *
 * Run 1, NCCL_IB_HCA=mlx5_0 recorded: rank 0 on GPU 1 (mlx5_0 is its own: pcie-switch), rank 1
 * on GPU 0 (mlx5_0 is on its socket, another NUMA node: "socket", not a mismatch), rank 2 on GPU
 * 2 (socket 1: mlx5_0 is across the sockets: the one mismatch), rank 3 with a bus id the node
 * does not have (not checked, said why).  Run 2, no NCCL_IB_HCA: every rank uses its GPU's
 * paired NIC, no mismatch.  Usage: test_affinity SHARED_DATA (skips, 77, when the file is absent).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cs_test.h"
#include "internal.h"
#include "nodes.h"
#include "tw.h"

#define NCCL_ID 0x8000000012345678ull

static char root[256];

static void write_run(const char *dir, const char *xml, const char *hca)
{
    static const char *bus[4] = {"00000000:03:00.0", "0000:44:00.0", "0000:C4:00.0",
                                 "0000:99:00.0"};
    static const int dev[4] = {1, 0, 2, 3};
    char p[600];
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/topology", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "cp '%s' '%s/topology/jwb0004.xml'", xml, dir);
    CHECK_INT(system(p), ==, 0);
    if (hca) {
        snprintf(p, sizeof p, "%s/commscope-run.txt", dir);
        FILE *f = fopen(p, "w");
        CHECK(f != NULL);
        if (f) {
            fprintf(f, "version: test\nenv: COMMSCOPE_DIR=x\nenv: NCCL_IB_HCA=%s\n", hca);
            fclose(f);
        }
    }
    for (int r = 0; r < 4; r++) {
        struct tw *w = tw_new(r, 4, 0x5151, 77 + (uint64_t)r);
        struct cs_file_header *h = tw_header(w);
        snprintf(h->host, sizeof h->host, "jwb0004");
        h->t_init = 1000;
        h->t_finalize = 100000;
        int32_t m[4] = {0, 1, 2, 3};
        tw_comm(w, CS_COMM_WORLD_ID, 0, 4, r, m);
        tw_comm_nccl(w, NCCL_ID, 4, r, r, dev[r], bus[r]);
        struct cs_event e = {.t_begin = 500, .t_end = 1000, .op = CS_OP_INIT, .peer = -1};
        tw_event(w, 0, &e);
        struct cs_event fin = {.t_begin = 99000, .t_end = 99500, .op = CS_OP_FINALIZE, .peer = -1};
        tw_event(w, 0, &fin);
        snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, r);
        CHECK(tw_write(w, p, NULL) > 0);
        tw_free(w);
    }
}

/* json: 0 the text section, 1 the JSON member, 2 the HTML section. */
static char *render(const struct cs_report *rep, int json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (json == 2)
        cs__report_nodes_html(rep, m);
    else if (json)
        cs__nodes_json(rep, m, 0);
    else
        cs__nodes_text(rep, m);
    fclose(m);
    return buf;
}

int main(int argc, char **argv)
{
    char xml[512];
    snprintf(xml, sizeof xml,
             "%s/topologies/hwloc/psmgmt_topo.jwb0004_JUWELS-Booster_4xA100_4xHDR.xml",
             argc > 1 ? argv[1] : "../shared/data");
    FILE *probe = fopen(xml, "r");
    if (!probe) {
        fprintf(stderr, "SKIP: %s not found\n", xml);
        return 77;
    }
    fclose(probe);
    snprintf(root, sizeof root, "/tmp/cs-test-affinity-XXXXXX");
    if (!mkdtemp(root))
        return 1;
    char dir[300], err[512];

    snprintf(dir, sizeof dir, "%s/hca", root);
    write_run(dir, xml, "mlx5_0");
    struct cs__run run;
    struct cs_report rep;
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    const struct cs_report_nodes *nd = rep.nodes;
    CHECK(nd != NULL);
    if (nd) {
        CHECK_INT(nd->naff, ==, 4);
        CHECK_INT(nd->aff_checked, ==, 3);
        CHECK_INT(nd->aff_mismatches, ==, 1);
    }
    if (nd && nd->naff == 4) {
        const struct cs_report_affinity *a = nd->aff;
        CHECK_INT(a[0].gpu, ==, 1);
        CHECK_STR(a[0].nic, "mlx5_0");
        CHECK_STR(a[0].distance, "pcie-switch");
        CHECK_INT(a[0].mismatch, ==, 0);
        CHECK_INT(a[1].gpu, ==, 0);
        CHECK_STR(a[1].nearest, "mlx5_1");
        CHECK_STR(a[1].nic, "mlx5_0");
        CHECK_STR(a[1].distance, "socket");
        CHECK_INT(a[1].mismatch, ==, 0);
        CHECK_INT(a[2].gpu, ==, 2);
        CHECK_STR(a[2].gpu_pci, "0000:c4:00.0");
        CHECK_STR(a[2].nic, "mlx5_0");
        CHECK_STR(a[2].nic_from, "NCCL_IB_HCA=mlx5_0");
        CHECK_STR(a[2].distance, "cross-socket");
        CHECK_INT(a[2].gpu_package, ==, 1);
        CHECK_INT(a[2].nic_package, ==, 0);
        CHECK_STR(a[2].nearest, "mlx5_3");
        CHECK_INT(a[2].mismatch, ==, 1);
        CHECK_INT(a[3].checked, ==, 0);
        CHECK_STR(a[3].note, "GPU 0000:99:00.0 (CUDA device 3) is not in jwb0004's topology");
    }
    char *t = render(&rep, 0);
    CHECK_CONTAINS(t, "gpu_nic_affinity: 3 of 4 rank(s) with a GPU checked, 1 mismatch(es)\n");
    CHECK_CONTAINS(t, "  MISMATCH rank 2 (jwb0004) GPU 2 0000:c4:00.0 socket 1 uses mlx5_0 "
                      "(NCCL_IB_HCA=mlx5_0) socket 0: cross-socket; nearest NIC mlx5_3 "
                      "(pcie-switch)\n");
    CHECK_CONTAINS(t, "  rank 1 (jwb0004) GPU 0 0000:44:00.0 socket 0 uses mlx5_0");
    free(t);
    char *j = render(&rep, 1);
    CHECK_CONTAINS(j, "\"mismatches\": [2]}");
    CHECK_CONTAINS(j, "\"checked\": true");
    free(j);
    /* The HTML section: the mismatch marked, the unchecked rank's reason, the counts. */
    char *h = render(&rep, 2);
    CHECK_CONTAINS(h, "<p>3 of 4 rank(s) with a GPU checked, 1 on another socket than the NIC");
    CHECK_CONTAINS(h, "<tr class=\"bad\"><td>2</td><td>jwb0004</td><td>2</td><td>0000:c4:00.0"
                      "</td><td>1</td><td>mlx5_0</td><td>NCCL_IB_HCA=mlx5_0</td><td>0</td><td>"
                      "cross-socket</td><td>mlx5_3 (pcie-switch)</td><td>MISMATCH: cross-socket"
                      "</td></tr>");
    CHECK_CONTAINS(h, "<tr><td>3</td><td>jwb0004</td><td colspan=\"9\" class=\"l\">not checked: "
                      "GPU 0000:99:00.0 (CUDA device 3) is not in jwb0004&#39;s topology</td>");
    CHECK_CONTAINS(h, "<tr><td>jwb0004</td><td>4</td><td>hwloc-xml</td>");
    free(h);
    cs__report_free(&rep);
    cs__run_free(&run);

    snprintf(dir, sizeof dir, "%s/paired", root);
    write_run(dir, xml, NULL);
    CHECK_INT(cs__analyze_dir(dir, &run, &rep, err, sizeof err, NULL), ==, 0);
    nd = rep.nodes;
    CHECK(nd && nd->aff_checked == 3 && nd->aff_mismatches == 0);
    if (nd && nd->naff == 4) {
        CHECK_STR(nd->aff[2].nic, "mlx5_3");
        CHECK_STR(nd->aff[2].nic_from, "paired");
        CHECK_STR(nd->aff[2].distance, "pcie-switch");
        CHECK_STR(nd->aff[1].nic, "mlx5_1");
    }
    cs__report_free(&rep);
    cs__run_free(&run);

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (getenv("CS_TEST_KEEP"))
        fprintf(stderr, "kept %s\n", root);
    else if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return cs_test_result();
}
