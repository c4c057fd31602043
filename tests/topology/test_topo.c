/*
 * The topology library on the real servers' files in the shared data directory (hwloc exports and
 * NCCL topology files), on small synthetic descriptions written here, on a saved sysfs tree, and
 * on this machine's own (empty) libibverbs device list.
 *
 * usage: test_topo DATA_DIR SYSFS_DIR   (DATA_DIR holds topologies/{hwloc,nccl}; its checks are
 * skipped when it does not exist)
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs_test.h"
#include "topology.h"

static char err[512];

static struct cs_topo *load(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    struct cs_topo *t = NULL;
    int r = cs_topo_load(path, &t, err, sizeof(err));
    if (r < 0)
        fprintf(stderr, "load %s: %s\n", path, err);
    return t;
}

static struct cs_topo *load_str(const char *xml)
{
    struct cs_topo *t = NULL;
    err[0] = 0;
    cs_topo_load_buffer(xml, strlen(xml), "synthetic.xml", &t, err, sizeof(err));
    return t;
}

static int find_nic(const struct cs_topo *t, const char *name)
{
    for (size_t i = 0; i < t->n_nics; i++)
        if (!strcmp(t->nics[i].name, name))
            return (int)i;
    return -1;
}

static const struct cs_topo_gpu *gpu_at(const struct cs_topo *t, const char *pci)
{
    for (size_t i = 0; i < t->n_gpus; i++)
        if (!strcmp(t->gpus[i].pci, pci))
            return &t->gpus[i];
    return NULL;
}

static int has_warning(const struct cs_topo *t, const char *needle)
{
    for (size_t i = 0; i < t->n_warnings; i++)
        if (strstr(t->warnings[i], needle))
            return 1;
    return 0;
}

/* Every GPU paired with a different RDMA NIC, all at the given distance. */
static void check_one_to_one(const struct cs_topo *t, enum cs_topo_dist d)
{
    for (size_t i = 0; i < t->n_gpus; i++) {
        CHECK(t->gpus[i].nic >= 0);
        if (t->gpus[i].nic < 0)
            continue;
        CHECK(t->nics[t->gpus[i].nic].rdma);
        CHECK_STR(cs_topo_dist_name(t->gpus[i].distance), cs_topo_dist_name(d));
        for (size_t j = 0; j < i; j++)
            CHECK_INT(t->gpus[i].nic, !=, t->gpus[j].nic);
    }
}

/* Properties every file must have: it loads, renders, and pairs GPUs with NICs it lists. */
static void check_every_file(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".xml"))
            continue;
        n++;
        struct cs_topo *t = load(dir, e->d_name);
        CHECK(t != NULL);
        if (!t)
            continue;
        CHECK(t->host[0] != 0);
        CHECK(t->n_gpus > 0); /* every shared file describes a GPU server */
        for (size_t i = 0; i < t->n_gpus; i++) {
            if (t->n_nics)
                CHECK(t->gpus[i].nic >= 0 && (size_t)t->gpus[i].nic < t->n_nics);
            CHECK(t->gpus[i].pci[0] != 0);
        }
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cs_topo_write_host_json(t, f, 0);
        cs_topo_print(t, f);
        fclose(f);
        CHECK_CONTAINS(buf, "\"gpus\": [");
        CHECK_CONTAINS(buf, "\"warnings\": [");
        free(buf);
        cs_topo_free(t);
    }
    closedir(d);
    CHECK(n > 0);
}

static void check_shared(const char *data)
{
    char hw[1024], nc[1024];
    snprintf(hw, sizeof(hw), "%s/topologies/hwloc", data);
    snprintf(nc, sizeof(nc), "%s/topologies/nccl", data);
    check_every_file(hw);
    check_every_file(nc);

    /* JUWELS Booster: 4 A100, each with its own HDR HCA under the same PCIe switch. */
    struct cs_topo *t = load(hw, "psmgmt_topo.jwb0004_JUWELS-Booster_4xA100_4xHDR.xml");
    CHECK(t != NULL);
    if (t) {
        CHECK_STR(t->host, "jwb0004.juwels");
        CHECK_INT(t->n_gpus, ==, 4);
        CHECK_INT(t->n_packages, ==, 2);
        CHECK_INT(t->n_numa, ==, 8);
        check_one_to_one(t, CS_DIST_PCIE_SWITCH);
        /* From the file: GPU 44:00.0 sits next to mlx5_1 (43:00.0) below switch 41:00.0. */
        const struct cs_topo_gpu *g = gpu_at(t, "0000:44:00.0");
        CHECK(g && g->nic >= 0 && !strcmp(t->nics[g->nic].name, "mlx5_1"));
        g = gpu_at(t, "0000:03:00.0");
        CHECK(g && g->nic >= 0 && !strcmp(t->nics[g->nic].name, "mlx5_0"));
        int n = find_nic(t, "mlx5_1");
        CHECK(n >= 0);
        if (n >= 0) {
            CHECK_STR(t->nics[n].link_layer, "InfiniBand");
            CHECK_STR(t->nics[n].state, "ACTIVE");
            CHECK_STR(t->nics[n].netdev, "ib1");
            CHECK_NEAR(t->nics[n].gbps, 200, 1e-9); /* ConnectX-6 HDR, by PCI id */
            CHECK_STR(t->nics[n].rate_source, "pci-id");
            CHECK_NEAR(t->nics[n].pcie_gbps, 31.507692 * 8, 1e-6);
            CHECK_INT(t->nics[n].numa, ==, 1);
        }
        CHECK_INT(t->n_warnings, ==, 0);
        /* Capacity: two GPUs of the node without NVLink go through PCIe (Gen4 x16). */
        struct cs_topo_place a = {t, 0, 0}, b = {t, 1, 1};
        struct cs_topo_path p;
        cs_topo_capacity(&a, &b, &p);
        CHECK_STR(cs_topo_path_name(p.kind), "pcie");
        CHECK_NEAR(p.gbps, 31.507692 * 8, 1e-6);
        /* Two nodes: the network, at the HCA rate (the PCIe link is faster). */
        struct cs_topo *u = load(hw, "psmgmt_topo.jwb0004_JUWELS-Booster_4xA100_4xHDR.xml");
        if (u) {
            snprintf(u->host, sizeof(u->host), "jwb0005.juwels");
            struct cs_topo_place c = {u, 2, 6};
            cs_topo_capacity(&a, &c, &p);
            CHECK_STR(cs_topo_path_name(p.kind), "network");
            CHECK_NEAR(p.gbps, 200, 1e-9);
            CHECK_CONTAINS(p.why, "mlx5_1");
            cs_topo_free(u);
        }
        struct cs_topo_place c0 = {t, -1, 4}, c1 = {t, -1, 5};
        cs_topo_capacity(&c0, &c1, &p);
        CHECK_STR(cs_topo_path_name(p.kind), "shm");
        cs_topo_free(t);
    }

    /* JURECA-DC: the same board as JUWELS Booster. */
    t = load(hw, "psmgmt_topo.jrc0323_JURECA-DC-GPU_4xA100_4xHDR.xml");
    if (t) {
        CHECK_STR(t->host, "jrc0323");
        CHECK_INT(t->n_gpus, ==, 4);
        check_one_to_one(t, CS_DIST_PCIE_SWITCH);
        cs_topo_free(t);
    }

    /* DGX-2 (hwloc 3.0 XML, which hwloc 2.9 itself refuses): 16 V100 on NVSwitches, 6 links of
     * 25 GB/s each = 150 GB/s = 1200 Gb/s between any two GPUs; the file has no NIC. */
    t = load(hw, "hwloc-tests_nvidiaDGX2.xml");
    CHECK(t != NULL);
    if (t) {
        CHECK_INT(t->n_gpus, ==, 16);
        CHECK(t->nvlink != NULL);
        if (t->nvlink) {
            CHECK_NEAR(t->nvlink[0 * 16 + 15], 1200, 1e-9);
            CHECK_NEAR(t->nvlink[7 * 16 + 8], 1200, 1e-9);
            CHECK_NEAR(t->nvlink[3 * 16 + 3], 0, 0);
        }
        CHECK(has_warning(t, "no NIC found"));
        CHECK_STR(t->gpus[0].model, "Tesla V100-SXM3-32GB-H");
        struct cs_topo_place a = {t, 0, 0}, b = {t, 9, 1};
        struct cs_topo_path p;
        cs_topo_capacity(&a, &b, &p);
        CHECK_STR(cs_topo_path_name(p.kind), "nvlink");
        CHECK_NEAR(p.gbps, 1200, 1e-9);
        cs_topo_free(t);
    }

    /* Lassen (POWER9): 4 V100 and 4 ConnectX-5 ports on two sockets' NUMA nodes. */
    t = load(hw, "mpibind_coral-lassen_POWER9_4xV100_CX5.xml");
    if (t) {
        CHECK_STR(t->host, "lassen28");
        CHECK_INT(t->n_gpus, ==, 4);
        check_one_to_one(t, CS_DIST_NUMA);
        CHECK_INT(t->gpus[2].numa, ==, 8);
        CHECK_INT(t->gpus[0].index, ==, 0);
        cs_topo_free(t);
    }

    /* Azure ND H100 v5: 8 GPU/NIC pairs, each pair behind its own switch. */
    t = load(nc, "azure_ndv5-topo.xml");
    CHECK(t != NULL);
    if (t) {
        CHECK_INT(t->n_gpus, ==, 8);
        CHECK_INT(t->n_nics, ==, 8);
        check_one_to_one(t, CS_DIST_PCIE_SWITCH);
        const struct cs_topo_gpu *g = gpu_at(t, "0001:00:00.0");
        CHECK(g && g->nic >= 0 && !strcmp(t->nics[g->nic].pci, "0101:00:00.0"));
        g = gpu_at(t, "000c:00:00.0");
        CHECK(g && g->nic >= 0 && !strcmp(t->nics[g->nic].pci, "0108:00:00.0"));
        CHECK_STR(t->nics[0].link_layer, "InfiniBand");
        CHECK_NEAR(t->gpus[0].pcie_gbps, 32 * 16 * 128.0 / 130, 1e-9);
        cs_topo_free(t);
    }

    /* AWS p4d: two GPUs share each EFA behind one switch. */
    t = load(nc, "aws_p4d-24xl-topo.xml");
    if (t) {
        CHECK_INT(t->n_gpus, ==, 8);
        CHECK_INT(t->n_nics, ==, 4);
        for (size_t i = 0; i < 8; i++) {
            CHECK_INT(t->gpus[i].nic, ==, (int)(i / 2));
            CHECK_INT(t->gpus[i].distance, ==, CS_DIST_PCIE_SWITCH);
        }
        cs_topo_free(t);
    }

    /* Alibaba 8xA100: NVLink through 6 NVSwitches, 2 links each at 20 GB/s = 1920 Gb/s; NIC
     * rates from the file (speed="200000" Mb/s). */
    t = load(nc, "alibaba-simai_topo_8A100_4CX6.xml");
    if (t) {
        CHECK_INT(t->n_gpus, ==, 8);
        CHECK_INT(t->n_nics, ==, 5);
        CHECK(t->nvlink && fabs(t->nvlink[1] - 1920) < 1e-9);
        int n = find_nic(t, "mlx5_bond_1");
        CHECK(n >= 0 && fabs(t->nics[n].gbps - 200) < 1e-9 &&
              !strcmp(t->nics[n].rate_source, "nccl"));
        CHECK(t->gpus[0].nic == n && t->gpus[1].nic == n);
        cs_topo_free(t);
    }
}

static void check_synthetic(void)
{
    /* Malformed input: a specific message with file and line; no topology. */
    struct cs_topo *t = load_str("<system version=\"1\">\n  <cpu numaid=\"0\">\n</system>\n");
    CHECK(t == NULL);
    CHECK_CONTAINS(err, "synthetic.xml:3:");
    CHECK_CONTAINS(err, "</system> does not match <cpu>");
    t = load_str("<topology version=\"2.0\">\n<object type=\"Machine\" os_index=\"0\"");
    CHECK(t == NULL);
    CHECK_CONTAINS(err, "inside the start tag of <object>");
    /* Two top-level elements: the message names the first (it read freed memory before). */
    t = load_str("<system version=\"1\"></system>\n<cpu numaid=\"0\"/>");
    CHECK(t == NULL);
    CHECK_CONTAINS(err, "synthetic.xml:2: a second top-level element after </system>");
    t = load_str("<html><body/></html>");
    CHECK(t == NULL);
    CHECK_CONTAINS(err, "neither hwloc's <topology> nor NCCL's <system>");
    t = load_str("");
    CHECK(t == NULL);
    CHECK_CONTAINS(err, "no XML element");
    t = load_str("<topology version=\"1.0\"><object type=\"Machine\"/></topology>");
    CHECK(t == NULL);
    CHECK_CONTAINS(err, "version 1.0 is not supported");
    struct cs_topo *none = NULL;
    CHECK(cs_topo_load("/nonexistent/topo.xml", &none, err, sizeof(err)) < 0);
    CHECK_CONTAINS(err, "cannot open topology file /nonexistent/topo.xml");

    /* NCCL file: GPU 0's only NIC is on the other socket: warned; GPU 1 shares a host bridge
     * (a top-level <pci> of its CPU) with nothing but reaches the NIC through the CPU. */
    t = load_str("<system version=\"1\">\n"
                 " <cpu numaid=\"0\">\n"
                 "  <pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"16 GT/s\" "
                 "link_width=\"16\"/>\n"
                 " </cpu>\n"
                 " <cpu numaid=\"1\">\n"
                 "  <pci busid=\"0000:81:00.0\" class=\"0x060400\">\n"
                 "   <pci busid=\"0000:82:00.0\" class=\"0x030200\"/>\n"
                 "   <pci busid=\"0000:83:00.0\" class=\"0x020700\" vendor=\"0x15b3\" "
                 "device=\"0x1021\"/>\n"
                 "  </pci>\n"
                 " </cpu>\n"
                 "</system>\n");
    CHECK(t != NULL);
    if (t) {
        CHECK_INT(t->n_gpus, ==, 2);
        CHECK_INT(t->gpus[0].distance, ==, CS_DIST_CROSS_SOCKET);
        CHECK_INT(t->gpus[1].distance, ==, CS_DIST_PCIE_SWITCH);
        CHECK(has_warning(t, "GPU 0 (0000:01:00.0) has no near NIC"));
        CHECK_NEAR(t->nics[0].gbps, 400, 1e-9);
        CHECK_NEAR(t->gpus[0].pcie_gbps, 16 * 16 * 128.0 / 130, 1e-9);
        cs_topo_free(t);
    }

    /* hwloc XML: a GPU and a NIC under different root ports of one host bridge; NUMA from the
     * memory child; a port that is down. */
    t = load_str("<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n"
                 "<object type=\"Machine\" os_index=\"0\" gp_index=\"1\">\n"
                 " <info name=\"HostName\" value=\"node&amp;7\"/>\n"
                 " <object type=\"Package\" os_index=\"0\" gp_index=\"2\">\n"
                 "  <object type=\"NUMANode\" os_index=\"3\" gp_index=\"3\"/>\n"
                 "  <object type=\"Bridge\" gp_index=\"4\" bridge_type=\"0-1\" depth=\"0\">\n"
                 "   <object type=\"Bridge\" gp_index=\"5\" bridge_type=\"1-1\" depth=\"1\" "
                 "pci_busid=\"0000:00:01.0\" pci_type=\"0604 [1022:1483] [0000:0000] 00\">\n"
                 "    <object type=\"PCIDev\" gp_index=\"6\" pci_busid=\"0000:01:00.0\" "
                 "pci_type=\"0302 [10de:2330] [10de:16c1] a1\" pci_link_speed=\"63.015385\">\n"
                 "     <object type=\"OSDev\" gp_index=\"7\" name=\"cuda0\" osdev_type=\"5\">\n"
                 "      <info name=\"GPUModel\" value=\"H100\"/></object>\n"
                 "    </object>\n"
                 "   </object>\n"
                 "   <object type=\"Bridge\" gp_index=\"8\" bridge_type=\"1-1\" depth=\"1\" "
                 "pci_busid=\"0000:00:02.0\" pci_type=\"0604 [1022:1483] [0000:0000] 00\">\n"
                 "    <object type=\"PCIDev\" gp_index=\"9\" pci_busid=\"0000:02:00.0\" "
                 "pci_type=\"0207 [15b3:1021] [15b3:0041] 00\" pci_link_speed=\"63.015385\">\n"
                 "     <object type=\"OSDev\" gp_index=\"10\" name=\"mlx5_0\" osdev_type=\"3\">\n"
                 "      <info name=\"Port1State\" value=\"1\"/></object>\n"
                 "     <object type=\"OSDev\" gp_index=\"11\" name=\"ibp2s0\" osdev_type=\"2\"/>\n"
                 "    </object>\n"
                 "   </object>\n"
                 "  </object>\n"
                 " </object>\n"
                 "</object>\n</topology>\n");
    CHECK(t != NULL);
    if (t) {
        CHECK_STR(t->host, "node&7");
        CHECK_INT(t->n_gpus, ==, 1);
        CHECK_INT(t->n_nics, ==, 1);
        CHECK_STR(t->gpus[0].model, "H100");
        CHECK_INT(t->gpus[0].numa, ==, 3);
        CHECK_INT(t->gpus[0].distance, ==, CS_DIST_HOST_BRIDGE);
        CHECK_STR(t->nics[0].state, "DOWN");
        CHECK_STR(t->nics[0].netdev, "ibp2s0");
        CHECK(has_warning(t, "NIC mlx5_0 port 1 is DOWN"));
        /* A down NIC is not the one a CPU rank uses. */
        CHECK_INT(cs_topo_rank_nic(t, -1), ==, -1);
        cs_topo_free(t);
    }
}

static void check_sysfs(const char *sysfs)
{
    char root[1024];
    snprintf(root, sizeof(root), "%s/node1", sysfs);
    struct cs_topo *t = load_str("<system version=\"1\"><cpu numaid=\"0\"/></system>");
    CHECK(t != NULL);
    if (!t)
        return;
    CHECK_INT(cs_topo_apply_sysfs(t, root, err, sizeof(err)), ==, 4);
    cs_topo_finish(t);
    CHECK_INT(t->n_nics, ==, 4);
    int n0 = find_nic(t, "mlx5_0"), n1 = find_nic(t, "mlx5_1"), n2 = find_nic(t, "mlx5_2"),
        n3 = find_nic(t, "mlx5_3");
    CHECK(n0 >= 0 && n1 >= 0 && n2 >= 0 && n3 >= 0);
    if (n0 >= 0 && n1 >= 0 && n2 >= 0 && n3 >= 0) {
        CHECK_NEAR(t->nics[n0].gbps, 200, 0);
        CHECK_INT(t->nics[n0].width, ==, 4);
        CHECK_STR(t->nics[n0].state, "ACTIVE");
        CHECK_STR(t->nics[n0].phys_state, "LinkUp");
        CHECK_STR(t->nics[n0].rate_source, "sysfs");
        CHECK_STR(t->nics[n1].state, "DOWN");
        CHECK_STR(t->nics[n1].phys_state, "Disabled");
        CHECK_NEAR(t->nics[n2].gbps, 100, 0);
        CHECK_INT(t->nics[n2].width, ==, 2);
        CHECK_INT(t->nics[n2].numa, ==, 1);
        CHECK_STR(t->nics[n3].link_layer, "Ethernet");
    }
    CHECK(has_warning(t, "NIC mlx5_1 port 1 is DOWN (physical state Disabled)"));
    CHECK(has_warning(t, "NIC mlx5_2 port 1 runs at 100 Gb/s, below the 200 Gb/s"));
    CHECK(!has_warning(t, "mlx5_0"));
    CHECK(!has_warning(t, "mlx5_3"));
    CHECK_INT(t->n_warnings, ==, 2);
    /* The fastest active RDMA port is what a CPU rank uses. */
    CHECK_INT(cs_topo_rank_nic(t, -1), ==, n0);
    cs_topo_free(t);

    struct cs_topo_counters *c = NULL;
    size_t n = 0;
    CHECK_INT(cs_topo_read_counters(root, &c, &n, err, sizeof(err)), ==, 4);
    CHECK_INT(n, ==, 4);
    if (n == 4) {
        CHECK_STR(c[0].nic, "mlx5_0");
        CHECK_INT(c[0].xmit_bytes, ==, 4000);
        CHECK_INT(c[0].rcv_bytes, ==, 10000);
        CHECK_INT(c[0].rcv_errors, ==, 3);
        CHECK_INT(c[0].link_downed, ==, 1);
        CHECK(c[0].valid);
        CHECK(!c[1].valid); /* mlx5_1 has no counters directory */
        CHECK_INT(c[2].xmit_bytes, ==, 28);
    }
    free(c);

    /* An Ethernet interface the topology lists gets its speed, state and MTU from class/net. */
    t = load_str("<system version=\"1\"><cpu numaid=\"0\"><nic><net name=\"eth0\"/></nic>"
                 "<nic><net name=\"eth1\"/></nic></cpu></system>");
    CHECK(t != NULL);
    if (t) {
        CHECK_INT(cs_topo_apply_sysfs(t, root, err, sizeof(err)), ==, 4);
        CHECK_NEAR(t->nics[0].gbps, 25, 0);
        CHECK_STR(t->nics[0].state, "ACTIVE");
        CHECK_INT(t->nics[0].mtu, ==, 9000);
        CHECK_STR(t->nics[1].state, "DOWN");
        CHECK_NEAR(t->nics[1].gbps, 0, 0); /* speed -1: unknown */
        cs_topo_free(t);
    }

    /* A missing tree is no devices; a tree that cannot be read is an error that names it. */
    t = load_str("<system version=\"1\"/>");
    CHECK_INT(cs_topo_apply_sysfs(t, "/nonexistent", err, sizeof(err)), ==, 0);
    char bad[] = "/tmp/cs_sysfs_XXXXXX";
    if (mkdtemp(bad)) {
        char cls[256], ib[300];
        snprintf(cls, sizeof(cls), "%s/class", bad);
        snprintf(ib, sizeof(ib), "%s/infiniband", cls);
        mkdir(cls, 0755);
        FILE *f = fopen(ib, "w"); /* a file where the directory should be */
        if (f)
            fclose(f);
        CHECK(cs_topo_apply_sysfs(t, bad, err, sizeof(err)) < 0);
        CHECK_CONTAINS(err, "cannot read");
        CHECK_CONTAINS(err, "class/infiniband");
        unlink(ib);
        rmdir(cls);
        rmdir(bad);
    }
    cs_topo_free(t);
}

/* libibverbs lists exactly the devices sysfs shows (none on machines without RDMA). */
static void check_verbs(void)
{
    struct cs_topo *t = load_str("<system version=\"1\"/>");
    CHECK(t != NULL);
    if (!t)
        return;
    int have = 0;
    int n = cs_topo_apply_verbs(t, &have, err, sizeof(err));
    int expect = 0;
    DIR *d = opendir("/sys/class/infiniband");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            expect += e->d_name[0] != '.';
        closedir(d);
    }
    fprintf(stderr, "libibverbs %s, %d device(s), sysfs %d\n", have ? "loaded" : "absent", n,
            expect);
    CHECK(n >= 0);
    if (have)
        CHECK_INT(n, ==, expect);
    CHECK_INT(t->n_nics, ==, have ? (size_t)n : 0);
    cs_topo_free(t);
}

static void check_units(void)
{
    int lanes = 0;
    CHECK_NEAR(cs_topo_parse_rate("200 Gb/sec (4X HDR)", &lanes), 200, 0);
    CHECK_INT(lanes, ==, 4);
    CHECK_NEAR(cs_topo_parse_rate("25 Gb/sec (1X EDR)", &lanes), 25, 0);
    CHECK_INT(lanes, ==, 1);
    CHECK_NEAR(cs_topo_parse_rate("garbage", &lanes), 0, 0);
    CHECK_NEAR(cs_topo_ib_gbps(64, 2, &lanes), 200, 0); /* HDR 4X */
    CHECK_INT(lanes, ==, 4);
    CHECK_NEAR(cs_topo_ib_gbps(128, 2, NULL), 400, 0); /* NDR 4X */
    CHECK_NEAR(cs_topo_ib_gbps(32, 1, NULL), 25, 0);   /* EDR 1X */
    CHECK_NEAR(cs_topo_ib_gbps(3, 2, NULL), 0, 0);     /* not a speed code */
    CHECK_NEAR(cs_topo_pcie_gbps("8 GT/s", 16), 8 * 16 * 128.0 / 130, 1e-9);
    CHECK_NEAR(cs_topo_pcie_gbps("5.0 GT/s PCIe", 8), 5 * 8 * 0.8, 1e-9);
    CHECK_NEAR(cs_topo_pcie_gbps("x", 16), 0, 0);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_topo DATA_DIR SYSFS_DIR\n");
        return 2;
    }
    check_units();
    check_synthetic();
    check_sysfs(argv[2]);
    check_verbs();
    char probe[1024];
    snprintf(probe, sizeof(probe), "%s/topologies", argv[1]);
    struct stat st;
    if (stat(probe, &st) == 0)
        check_shared(argv[1]);
    else
        fprintf(stderr, "shared topologies not found at %s: their checks skipped\n", probe);
    return cs_test_result();
}
