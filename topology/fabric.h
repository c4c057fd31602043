/*
 * `commscope fabric` results: what cs_fabric measured (its "@cs-fabric" lines), the verdict on
 * every node and link against the capacity model and the median of their peers, and the ranked
 * suspects.  No MPI here: the launcher parses the benchmark's output and tests feed lines
 * directly.
 */
#ifndef COMMSCOPE_FABRIC_H
#define COMMSCOPE_FABRIC_H

#include <stddef.h>
#include <stdio.h>

#define CS_FABRIC_SCHEMA "commscope-fabric/1"

struct cs_fabric_node {
    char host[256];
    char nic[64];
    double nic_gbps; /* capacity of the NIC its ranks use, 0 unknown */
    int ranks;
    int measured;      /* links with a result */
    double gbps;       /* median bandwidth of its links */
    double latency_us; /* median latency of its links */
    char status[12];   /* "ok", "slow", "failed" (no result though others have), "unmeasured",
                          "errors" (bandwidth ok, but its ports counted errors or went down) */
    double ratio;      /* gbps / reference */
    char evidence[400];
    char failure[200];     /* the launcher's account of this node's failure, "" none */
    char port_errors[200]; /* error counters that moved during the benchmark, "" none */
};

/*
 * Wire evidence for one link (commscope fabric --capture; docs/wire.md): what the two nodes'
 * captures saw between them during the link's pair test.  Filled by the launcher
 * (topology/fabric_wire.c) before cs_fabric_judge; have = 0 without capture.
 */
#define CS_FABRIC_WIRE_WARN 4
struct cs_fabric_wire {
    int have;                      /* at least one of the two nodes captured */
    int views;                     /* bit 0: node a's capture used, bit 1: node b's */
    double sent_bytes;             /* what the pair test sent between them, both directions */
    double bytes_ab, bytes_ba;     /* frame bytes on the wire each way */
    double pkts_ab, pkts_ba;       /* frames each way */
    double retrans_ab, retrans_ba; /* TCP retransmissions each way (sender's view if captured) */
    double ratio;                  /* (bytes_ab + bytes_ba) / sent_bytes */
    double gbps_ab, gbps_ba;       /* mean rate over the busy buckets each way, 0 none */
    int busy_ab, busy_ba;          /* buckets with at least half the fullest one's bytes */
    char ifaces[128];              /* interfaces that carried it, comma-separated */
    int expected;                  /* 1 all expected data interfaces, 0 some not, -1 unknown */
    char warn[CS_FABRIC_WIRE_WARN][256];
    int nwarn;
};

struct cs_fabric_link {
    int a, b;                      /* node indexes */
    double ab_gbps, ba_gbps, gbps; /* gbps: the slower direction */
    double latency_us;             /* the lowest of the round's and any re-test's */
    double latency_ref_us;         /* median latency of the other links of its two nodes */
    int latency_retests;           /* bursts of the re-test ("latency" lines), 0 none */
    double expected_gbps;          /* capacity model: the slower NIC of the two, 0 unknown */
    char status[12];               /* "ok", "slow" */
    double ratio;                  /* gbps / median of all links */
    char evidence[512];
    long long t0_ns, t1_ns; /* CLOCK_REALTIME (node a) around the pair test, 0 unknown */
    double sent_bytes;      /* bytes the pair test sent both ways, 0 unknown */
    struct cs_fabric_wire wire;
};

struct cs_fabric_coll {
    char op[24];
    char transport[8]; /* "mpi" or "nccl" (lines without transport= are MPI) */
    size_t bytes;
    double time_us, algbw_gbps, busbw_gbps;
};

/* One port's counter differences over the benchmark ("port" lines; -1: went backwards). */
struct cs_fabric_port {
    int node;
    char nic[64];
    int port, valid;
    long long xmit_bytes, rcv_bytes, symbol_errors, rcv_errors, link_downed, xmit_discards;
};

struct cs_fabric_suspect {
    char kind[8]; /* "node" or "link" */
    char name[520];
    double ratio;
    char evidence[512];
};

struct cs_fabric {
    int ranks, nodes_expected, rounds, rounds_total;
    int complete; /* the benchmark printed "done" */
    struct cs_fabric_node *nodes;
    size_t n_nodes;
    struct cs_fabric_link *links;
    size_t n_links;
    struct cs_fabric_coll *colls;
    size_t n_colls;
    struct cs_fabric_suspect *suspects;
    size_t n_suspects;
    struct cs_fabric_port *ports;
    size_t n_ports;
    double link_median_gbps, link_median_latency_us, node_reference_gbps;
    double node_reference_latency_us; /* median of the nodes' latency figures */
    char **notes; /* problems met: malformed lines, a missing node, an incomplete run */
    size_t n_notes;
    /* Where the run was (fabric.c) and which rank the launcher said failed (fabric_fail.c). */
    int *rank_node; /* node of each rank from the "rank" lines, -1 unknown */
    size_t n_rank_node;
    int rounds_done, last_round, in_collectives;
    int failed_rank;        /* first rank the launcher reported as failed, -1 none */
    char failed_host[256];  /* its host when the launcher names one, "" */
    char failed_what[96];   /* "exited with status 1", "was killed by signal 9 (Killed)" */
    char failed_source[16]; /* "mpirun", "srun" */
    int fail_pending;       /* Open MPI: a "Process name:" line waits for its "Exit code:" */
    /* The NCCL sweep ("nccl" lines): -1 not reported (no sweep, or an older benchmark), 0 not
     * measured (nccl_reason says why), 1 measured on nccl_devices (one GPU per rank). */
    int nccl_available;
    int nccl_version;
    char nccl_reason[400]; /* why not, or the error that stopped the sweep */
    int nccl_failed;       /* the sweep started and stopped at an NCCL/CUDA error */
    int *nccl_devices;
    size_t n_nccl_devices;
};

/* Verdict thresholds (docs/user-guide.md, "commscope fabric"). */
struct cs_fabric_limits {
    double peer_fraction;     /* slow below this fraction of the peers' median (0.75) */
    double capacity_fraction; /* slow below this fraction of the capacity model (0.5) */
    double latency_factor;    /* slow above this multiple of the median latency (4) */
};
void cs_fabric_default_limits(struct cs_fabric_limits *l);

void cs_fabric_init(struct cs_fabric *f);
/*
 * Feed one line of the benchmark's output (with or without the "@cs-fabric " prefix; other
 * lines are ignored and return 0).  Returns 1 for a result line, 0 for others, -1 for a
 * malformed result line (noted in f->notes).
 */
int cs_fabric_feed(struct cs_fabric *f, const char *line);
/*
 * Feed one line of the launcher's stderr (fabric_fail.c).  Recognises how mpirun (Open MPI) and
 * srun (Slurm) name the process that failed first; other lines return 0.  Returns 1 when the line
 * named (or prepared to name) a failed rank.
 */
int cs_fabric_launcher_line(struct cs_fabric *f, const char *line);
/* Derive per-node figures, verdicts and suspects; call once after the last line. */
void cs_fabric_judge(struct cs_fabric *f, const struct cs_fabric_limits *l);
void cs_fabric_free(struct cs_fabric *f);
/* Add a note (a problem met) to the report. */
void cs_fabric_add_note(struct cs_fabric *f, const char *text);

void cs_fabric_print(const struct cs_fabric *f, FILE *out);
void cs_fabric_write_json(const struct cs_fabric *f, FILE *out);

/* fabric_wire.c: fill every link's wire evidence (struct cs_fabric_wire) from RUN_DIR's
 * wire-HOST.csw files, and note what is missing; call before cs_fabric_judge.  Returns 0, -1 when
 * out of memory. */
int cs__fabric_wire(struct cs_fabric *f, const char *run_dir);

#endif
