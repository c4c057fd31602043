/*
 * cs_fabric: the MPI benchmark `commscope fabric` appends to the user's launch command.
 *
 * One rank per node (local rank 0, from MPI_COMM_TYPE_SHARED) measures node-to-node latency and
 * bandwidth in rounds that pair every node with every other (round-robin schedule; above 64 nodes
 * a sample of rounds), concurrently within a round and one round at a time.  Then all ranks run a
 * sweep of all-reduce, all-gather, reduce-scatter, all-to-all and a send/recv ring over MPI, and
 * the same over NCCL where every rank has a GPU and libnccl (fabric_nccl.c).  Rank 0
 * prints each result as soon as it has it, as "@cs-fabric ..." lines on stdout (mpirun forwards
 * them from wherever rank 0 runs), so a job that dies midway still leaves what it measured.
 * The format is read by topology/fabric.c.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "commscope/ops.h"
#include "fabric_bench.h"
#include "topology.h"

struct opts {
    size_t min_bytes, max_bytes, pair_bytes;
    int pair_iters, lat_iters, max_rounds;
    int factor;       /* sweep step: sizes min, min*factor, ... max */
    int fail_node;    /* testing: this node's leader exits after the first round */
    const char *nccl; /* --nccl auto|off */
};

static size_t parse_size(const char *s)
{
    char *e;
    double v = strtod(s, &e);
    if (*e == 'K' || *e == 'k')
        v *= 1024;
    else if (*e == 'M' || *e == 'm')
        v *= 1024 * 1024;
    else if (*e == 'G' || *e == 'g')
        v *= 1024.0 * 1024 * 1024;
    return v > 0 ? (size_t)v : 0;
}

static int rank0;

/* One line of the result stream (rank 0 only), flushed so a dying job keeps it. */
void cs__fabric_emit(const char *fmt, ...)
{
    if (!rank0)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("@cs-fabric ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fflush(stdout);
}

/* Partner of node i in round r of a round-robin over m nodes (circle method); -1: sits out. */
static int partner(int i, int r, int m)
{
    int n = m % 2 ? m + 1 : m; /* an odd count gets a phantom node n-1 */
    int p;
    if (i == n - 1)
        p = r;
    else if (i == r)
        p = n - 1;
    else
        p = ((2 * r - i) % (n - 1) + (n - 1)) % (n - 1);
    return p >= m ? -1 : p;
}

struct pair_result {
    double gbps_ab, gbps_ba, lat_us;
    int64_t t0_ns, t1_ns; /* CLOCK_REALTIME of node a around the pair's test (wire capture) */
    int64_t sent;         /* bytes the pair test sent between the two, both directions */
    int a, b;             /* node indexes, a < b; a = -1 none */
};

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Time iters messages of bytes from `from` to `to` as the sender sees it (ack at the end). */
static double stream(MPI_Comm c, int me, int from, int to, char *buf, size_t bytes, int iters)
{
    char ack = 0;
    MPI_Barrier(MPI_COMM_SELF);
    double t0 = MPI_Wtime();
    if (me == from) {
        for (int i = 0; i < iters; i++)
            MPI_Send(buf, (int)bytes, MPI_BYTE, to, 1, c);
        MPI_Recv(&ack, 1, MPI_BYTE, to, 2, c, MPI_STATUS_IGNORE);
    } else {
        for (int i = 0; i < iters; i++)
            MPI_Recv(buf, (int)bytes, MPI_BYTE, from, 1, c, MPI_STATUS_IGNORE);
        MPI_Send(&ack, 1, MPI_BYTE, from, 2, c);
    }
    double dt = MPI_Wtime() - t0;
    return dt > 0 ? (double)bytes * iters * 8 / dt / 1e9 : 0;
}

/*
 * Wait until every member of c has arrived without spinning: ranks that are not measuring must
 * not take the CPU from the ones that are (MPI's blocking waits poll), which on a shared or
 * oversubscribed node turns a latency test into a test of the scheduler.
 */
static void quiet_barrier(MPI_Comm c)
{
    MPI_Request rq;
    int done = 0;
    MPI_Ibarrier(c, &rq);
    for (;;) {
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        if (done)
            break;
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

/* Latency between a and b (me is one of them): half the fastest of iters 8-byte round trips,
 * after two warm-up exchanges, in microseconds. */
static double ping_pong(MPI_Comm c, int me, int a, int b, int iters)
{
    char x[8] = {0};
    double best = 0;
    for (int i = -2; i < iters; i++) {
        double t0 = MPI_Wtime();
        if (me == a) {
            MPI_Send(x, 8, MPI_BYTE, b, 3, c);
            MPI_Recv(x, 8, MPI_BYTE, b, 3, c, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(x, 8, MPI_BYTE, a, 3, c, MPI_STATUS_IGNORE);
            MPI_Send(x, 8, MPI_BYTE, a, 3, c);
        }
        double rt = MPI_Wtime() - t0;
        /* The fastest round trip is what the link allows; slower ones measure the scheduler on
         * a shared or oversubscribed node. */
        if (i >= 0 && (best == 0 || rt < best))
            best = rt;
    }
    return best / 2 * 1e6;
}

static void measure_pair(MPI_Comm c, int me, int peer, const struct opts *o, char *buf,
                         struct pair_result *r)
{
    int a = me < peer ? me : peer, b = me < peer ? peer : me;
    r->t0_ns = realtime_ns();
    double lat = ping_pong(c, me, a, b, o->lat_iters);
    stream(c, me, a, b, buf, o->pair_bytes, 1); /* warm-up: connection set-up */
    double ab = stream(c, me, a, b, buf, o->pair_bytes, o->pair_iters);
    double ba = stream(c, me, b, a, buf, o->pair_bytes, o->pair_iters);
    r->t1_ns = realtime_ns();
    /* Ping-pongs (2 warm-up + lat_iters, 8 bytes each way), the warm-up stream, the two timed
     * streams, and a 1-byte acknowledgement after each stream. */
    r->sent =
        (int64_t)(o->lat_iters + 2) * 16 + (int64_t)o->pair_bytes * (2 * o->pair_iters + 1) + 3;
    r->a = a;
    r->b = b;
    r->gbps_ab = ab;
    r->gbps_ba = ba;
    r->lat_us = lat;
}

struct lat_pair {
    int a, b;
    double lat;
};

static int cmp_lat_desc(const void *x, const void *y)
{
    double a = ((const struct lat_pair *)x)->lat, b = ((const struct lat_pair *)y)->lat;
    return a > b ? -1 : a < b;
}

/*
 * Re-test the pairs whose latency stood out: above RETEST_FACTOR x the lowest of all links (at
 * most RETEST_MAX, the highest first), RETEST_TRIES bursts each, one pair at a time
 * while every other node waits without spinning, the passes spread over time (each pair's next
 * burst comes after every other pair's and a 5 ms pause).  One burst of round trips taken while the
 * node was busy (concurrent pairs of its round, other jobs, a rank that polls) can be slow from
 * start to end; a link or node that is really slow is slow every time.  Rank 0 prints the lowest
 * figure of the re-test as a "latency" line; the verdict keeps the lower of it and the
 * round's.  seen/n: node 0's pair results (NULL, 0 elsewhere).
 */
enum { RETEST_MAX = 64, RETEST_TRIES = 5 };
#define RETEST_FACTOR 2.0

static void retest_latency(MPI_Comm leaders, int node, const struct opts *o, struct lat_pair *seen,
                           size_t n)
{
    int cnt = 0;
    struct lat_pair pick[RETEST_MAX];
    if (node == 0 && n > 0) {
        qsort(seen, n, sizeof(*seen), cmp_lat_desc);
        double low = seen[n - 1].lat; /* sorted high to low */
        for (size_t i = 0; i < n && cnt < RETEST_MAX; i++)
            if (seen[i].lat > RETEST_FACTOR * low)
                pick[cnt++] = seen[i];
    }
    MPI_Bcast(&cnt, 1, MPI_INT, 0, leaders);
    if (!cnt)
        return;
    MPI_Bcast(pick, cnt * (int)sizeof(pick[0]), MPI_BYTE, 0, leaders);
    double best[RETEST_MAX], got[RETEST_MAX];
    for (int k = 0; k < cnt; k++)
        best[k] = 1e300; /* not in the pair: contributes nothing to the minimum */
    for (int t = 0; t < RETEST_TRIES; t++) {
        struct timespec pause = {0, 5000000};
        nanosleep(&pause, NULL);
        for (int k = 0; k < cnt; k++) {
            if (node == pick[k].a || node == pick[k].b) {
                double lat = ping_pong(leaders, node, pick[k].a, pick[k].b, o->lat_iters);
                if (lat > 0 && lat < best[k])
                    best[k] = lat;
            }
            quiet_barrier(leaders);
        }
    }
    MPI_Reduce(best, got, cnt, MPI_DOUBLE, MPI_MIN, 0, leaders);
    for (int k = 0; node == 0 && k < cnt; k++)
        if (got[k] < 1e299)
            cs__fabric_emit("latency a=%d b=%d latency_us=%.6g retests=%d", pick[k].a, pick[k].b,
                            got[k], RETEST_TRIES);
}

static void run_pairs(MPI_Comm leaders, int node, int m, const struct opts *o)
{
    char *buf = calloc(1, o->pair_bytes);
    if (!buf)
        MPI_Abort(MPI_COMM_WORLD, 1);
    int rounds = m % 2 ? m : m - 1;
    int use = rounds;
    if (m > 64 && o->max_rounds < rounds)
        use = o->max_rounds; /* sampled: evenly spaced rounds */
    cs__fabric_emit("pairs rounds=%d of=%d", use, rounds);
    struct pair_result *all = node == 0 ? calloc((size_t)m, sizeof(*all)) : NULL;
    size_t cap_seen = node == 0 ? (size_t)use * (size_t)(m / 2 + 1) : 0, nseen = 0;
    struct lat_pair *seen = cap_seen ? calloc(cap_seen, sizeof(*seen)) : NULL;
    if (!seen)
        cap_seen = 0;
    for (int k = 0; k < use; k++) {
        int r = use == rounds ? k : (int)((long)k * rounds / use);
        int p = partner(node, r, m);
        struct pair_result res = {0, 0, 0, 0, 0, 0, -1, -1};
        if (p >= 0)
            measure_pair(leaders, node, p, o, buf, &res);
        if (node != res.a)
            res.a = -1;         /* the lower node of a pair reports it */
        quiet_barrier(leaders); /* pairs that finish early let the others measure */
        MPI_Gather(&res, (int)sizeof(res), MPI_BYTE, all, (int)sizeof(res), MPI_BYTE, 0, leaders);
        for (int i = 0; all && i < m; i++)
            if (all[i].a >= 0 && nseen < cap_seen) {
                seen[nseen].a = all[i].a;
                seen[nseen].b = all[i].b;
                seen[nseen++].lat = all[i].lat_us;
            }
        for (int i = 0; all && i < m; i++)
            if (all[i].a >= 0)
                cs__fabric_emit("pair round=%d a=%d b=%d ab_gbps=%.6g ba_gbps=%.6g latency_us=%.6g "
                                "t0_ns=%lld t1_ns=%lld sent_bytes=%lld",
                                r, all[i].a, all[i].b, all[i].gbps_ab, all[i].gbps_ba,
                                all[i].lat_us, (long long)all[i].t0_ns, (long long)all[i].t1_ns,
                                (long long)all[i].sent);
        if (o->fail_node == node && node != 0) {
            fprintf(stderr, "cs_fabric: node %d exits on purpose (COMMSCOPE_FABRIC_FAIL_NODE)\n",
                    node);
            exit(1);
        }
    }
    free(all);
    free(buf);
    retest_latency(leaders, node, o, seen, nseen);
    free(seen);
}

static const struct {
    const char *name;
    enum cs_op op;
} colls[] = {
    {"allreduce", CS_OP_ALLREDUCE},
    {"allgather", CS_OP_ALLGATHER},
    {"reducescatter", CS_OP_REDUCE_SCATTER_BLOCK},
    {"alltoall", CS_OP_ALLTOALL},
    {"sendrecv", CS_OP_SENDRECV},
};

/* One call of collective k on `bytes` (the nccl-tests size convention for each). */
static void coll_once(int k, void *s, void *r, size_t bytes, int n, int me)
{
    size_t per = bytes / (size_t)n;
    switch (k) {
    case 0:
        MPI_Allreduce(s, r, (int)(bytes / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case 1:
        MPI_Allgather(s, (int)per, MPI_BYTE, r, (int)per, MPI_BYTE, MPI_COMM_WORLD);
        break;
    case 2:
        MPI_Reduce_scatter_block(s, r, (int)(per / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case 3:
        MPI_Alltoall(s, (int)per, MPI_BYTE, r, (int)per, MPI_BYTE, MPI_COMM_WORLD);
        break;
    default:
        MPI_Sendrecv(s, (int)bytes, MPI_BYTE, (me + 1) % n, 4, r, (int)bytes, MPI_BYTE,
                     (me + n - 1) % n, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
    }
}

void cs__fabric_emit_coll(const char *transport, const char *name, int op, size_t bytes, int n,
                          double worst)
{
    if (worst <= 0)
        return;
    double alg = (double)bytes * 8 / worst / 1e9;
    cs__fabric_emit("coll op=%s transport=%s bytes=%zu time_us=%.6g algbw_gbps=%.6g "
                    "busbw_gbps=%.6g",
                    name, transport, bytes, worst * 1e6, alg, alg * cs_op_busbw_factor(op, n));
}

int cs__fabric_iters(size_t bytes)
{
    return bytes <= 65536 ? 20 : bytes <= (1u << 22) ? 5 : 2;
}

static void run_collectives(int me, int n, const struct opts *o)
{
    float *s = calloc(1, o->max_bytes + 64), *r = calloc(1, o->max_bytes + 64);
    if (!s || !r)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t k = 0; k < sizeof(colls) / sizeof(colls[0]); k++) {
        for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= (size_t)o->factor) {
            /* Sizes that do not divide into whole floats per rank are skipped, as in
             * nccl-tests. */
            /* Per-rank chunks are whole floats; the size reported is what was moved. */
            size_t size = bytes;
            if (k >= 1 && k <= 3) {
                size = bytes / (size_t)n / 4 * 4 * (size_t)n;
                if (!size)
                    continue;
            }
            int iters = cs__fabric_iters(size);
            coll_once((int)k, s, r, size, n, me); /* warm-up */
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++)
                coll_once((int)k, s, r, size, n, me);
            double dt = (MPI_Wtime() - t0) / iters, worst;
            MPI_Reduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (me == 0)
                cs__fabric_emit_coll("mpi", colls[k].name, colls[k].op, size, n, worst);
        }
    }
    free(s);
    free(r);
}

/* Port counters of this node's RDMA ports, sysfs under $COMMSCOPE_SYSFS_ROOT or /sys. */
#define MAX_PORTS 16
struct port_snap {
    char nic[64];
    int port, valid;
    unsigned long long v[6]; /* xmit_bytes, rcv_bytes, symbol_errors, rcv_errors, link_downed,
                                xmit_discards */
};

static int read_ports(struct port_snap *out)
{
    const char *root = getenv("COMMSCOPE_SYSFS_ROOT");
    struct cs_topo_counters *c = NULL;
    size_t n = 0;
    char err[256];
    memset(out, 0, MAX_PORTS * sizeof(*out));
    if (cs_topo_read_counters(root && *root ? root : "/sys", &c, &n, err, sizeof(err)) < 0) {
        fprintf(stderr, "cs_fabric: port counters: %s\n", err);
        return 0;
    }
    int k = 0;
    for (size_t i = 0; i < n && k < MAX_PORTS; i++, k++) {
        snprintf(out[k].nic, sizeof(out[k].nic), "%s", c[i].nic);
        out[k].port = c[i].port;
        out[k].valid = c[i].valid;
        unsigned long long v[6] = {c[i].xmit_bytes, c[i].rcv_bytes,   c[i].symbol_errors,
                                   c[i].rcv_errors, c[i].link_downed, c[i].xmit_discards};
        memcpy(out[k].v, v, sizeof(v));
    }
    free(c);
    return k;
}

/* Each node's counter differences over the benchmark, printed by rank 0 as "port" lines. */
static void report_ports(MPI_Comm leaders, int m, const struct port_snap *before)
{
    struct port_snap after[MAX_PORTS], *all = NULL, *allb = NULL;
    read_ports(after);
    if (rank0) {
        all = calloc((size_t)m * MAX_PORTS, sizeof(*all));
        allb = calloc((size_t)m * MAX_PORTS, sizeof(*allb));
    }
    int sz = (int)(MAX_PORTS * sizeof(*after));
    MPI_Gather(before, sz, MPI_BYTE, allb, sz, MPI_BYTE, 0, leaders);
    MPI_Gather(after, sz, MPI_BYTE, all, sz, MPI_BYTE, 0, leaders);
    for (int k = 0; all && allb && k < m; k++)
        for (int i = 0; i < MAX_PORTS; i++) {
            const struct port_snap *a = &all[k * MAX_PORTS + i], *b = NULL;
            if (!a->nic[0])
                continue;
            for (int j = 0; j < MAX_PORTS && !b; j++)
                if (!strcmp(allb[k * MAX_PORTS + j].nic, a->nic) &&
                    allb[k * MAX_PORTS + j].port == a->port)
                    b = &allb[k * MAX_PORTS + j];
            if (!b || !a->valid || !b->valid) {
                cs__fabric_emit("port node=%d nic=%s port=%d valid=0", k, a->nic, a->port);
                continue;
            }
            long long d[6];
            for (int x = 0; x < 6; x++)
                d[x] = a->v[x] >= b->v[x] ? (long long)(a->v[x] - b->v[x]) : -1;
            cs__fabric_emit(
                "port node=%d nic=%s port=%d valid=1 xmit_bytes=%lld rcv_bytes=%lld "
                "symbol_errors=%lld rcv_errors=%lld link_downed=%lld xmit_discards=%lld",
                k, a->nic, a->port, d[0], d[1], d[2], d[3], d[4], d[5]);
        }
    free(all);
    free(allb);
}

int main(int argc, char **argv)
{
    struct opts o = {8, 64u << 20, 4u << 20, 8, 50, 16, 2, -1, "auto"};
    const char *fail = getenv("COMMSCOPE_FABRIC_FAIL_NODE");
    if (fail)
        o.fail_node = atoi(fail);
    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--max-bytes"))
            o.max_bytes = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "--min-bytes"))
            o.min_bytes = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "--pair-bytes"))
            o.pair_bytes = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "--pair-iters"))
            o.pair_iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--step-factor"))
            o.factor = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-rounds"))
            o.max_rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--nccl"))
            o.nccl = argv[i + 1];
    }
    if (o.min_bytes < 8)
        o.min_bytes = 8;
    if (o.pair_bytes < 8)
        o.pair_bytes = 8;
    if (o.factor < 2)
        o.factor = 2;
    if (o.pair_iters < 1)
        o.pair_iters = 1;
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    rank0 = me == 0;

    MPI_Comm local, leaders;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &local);
    int lrank;
    MPI_Comm_rank(local, &lrank);
    MPI_Comm_split(MPI_COMM_WORLD, lrank == 0 ? 0 : MPI_UNDEFINED, me, &leaders);
    int node = 0, m = 0;
    if (lrank == 0) {
        MPI_Comm_rank(leaders, &node);
        MPI_Comm_size(leaders, &m);
    }
    MPI_Bcast(&node, 1, MPI_INT, 0, local);
    MPI_Bcast(&m, 1, MPI_INT, 0, MPI_COMM_WORLD);

    /* Each node's name and the rate of the NIC a CPU rank would use (its topology). */
    struct {
        char host[256];
        char nic[64];
        double gbps;
        int node;
    } mine, *all = NULL;
    memset(&mine, 0, sizeof(mine));
    gethostname(mine.host, sizeof(mine.host) - 1);
    mine.node = node;
    if (lrank == 0) {
        struct cs_topo *t = NULL;
        char err[256];
        if (cs_topo_load(NULL, &t, err, sizeof(err)) == 0) {
            int k = cs_topo_rank_nic(t, -1);
            if (k >= 0) {
                snprintf(mine.nic, sizeof(mine.nic), "%s", t->nics[k].name);
                mine.gbps = t->nics[k].gbps;
            }
            cs_topo_free(t);
        }
    }
    if (me == 0)
        all = calloc((size_t)n, sizeof(*all));
    MPI_Gather(&mine, (int)sizeof(mine), MPI_BYTE, all, (int)sizeof(mine), MPI_BYTE, 0,
               MPI_COMM_WORLD);
    cs__fabric_emit("start ranks=%d nodes=%d pair_bytes=%zu pair_iters=%d max_bytes=%zu", n, m,
                    o.pair_bytes, o.pair_iters, o.max_bytes);
    for (int i = 0; all && i < n; i++)
        cs__fabric_emit("rank rank=%d node=%d host=%s nic=%s nic_gbps=%.6g", i, all[i].node,
                        all[i].host, all[i].nic[0] ? all[i].nic : "-", all[i].gbps);
    free(all);

    struct port_snap before[MAX_PORTS];
    if (lrank == 0)
        read_ports(before);
    if (lrank == 0 && m > 1)
        run_pairs(leaders, node, m, &o);
    quiet_barrier(MPI_COMM_WORLD); /* the other ranks of each node wait without spinning */
    if (o.max_bytes >= o.min_bytes) {
        run_collectives(me, n, &o);
        struct cs__fabric_sweep sw = {o.min_bytes, o.max_bytes, o.factor};
        cs__fabric_nccl(MPI_COMM_WORLD, lrank, &sw, o.nccl);
    }
    if (lrank == 0)
        report_ports(leaders, m, before);
    cs__fabric_emit("done");
    if (leaders != MPI_COMM_NULL)
        MPI_Comm_free(&leaders);
    MPI_Comm_free(&local);
    MPI_Finalize();
    return 0;
}
