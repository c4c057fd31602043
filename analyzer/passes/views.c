/*
 * The report views (views.h): per-rank time segments, the wait heat map over time, the
 * point-to-point byte matrix, bandwidth against message size and the verdict.  Accumulated from
 * the merged stream with bounded memory (a fixed number of time bins, rank blocks for big runs),
 * then turned into the report model by cs__views_build.  Numbers only; renderers format them.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commscope/input.h"

#include "internal.h"
#include "nodes.h"
#include "steps_internal.h"

struct bw_acc {
    uint16_t op;
    uint64_t comm;
    double bytes[CS_VIEW_BW_BUCKETS], ns[CS_VIEW_BW_BUCKETS];
    uint64_t n[CS_VIEW_BW_BUCKETS];
};

struct cs__views {
    int world;
    int64_t t0;             /* run start: earliest aligned t_init */
    int64_t bin_ns;         /* width of one heat-map bin; doubles when the run outgrows the bins */
    uint64_t (*kind_ns)[3]; /* [world]: collective, point-to-point, completion call time */
    uint64_t *eligible;     /* [world] */
    double *wait_nb;        /* [world] ns of wait_ns at non-blocking collectives */
    double *wait_nccl;      /* [world] ns of wait_ns at NCCL collectives (GPU arrivals) */
    uint16_t last_op;       /* cs__views_waits' op cache (0 none) */
    int last_eligible, last_nb, last_nccl;
    uint64_t cur_eligible; /* the current instance's (cs__views_waits, for cs__views_member) */
    double *cur_byk;
    double *heat; /* [world * CS_VIEW_HEAT_BINS] ns of waiting */
    int p2p_block;
    size_t p2p_n;
    uint64_t *p2p;            /* [p2p_n * p2p_n] */
    struct cs__map bw_by_key; /* (op, comm) -> index + 1 */
    /* Direct-mapped cache in front of bw_by_key: every transfer looks its curve up. */
    struct {
        uint64_t comm;
        uint32_t op, idx; /* op 0: empty */
    } bwc[64];
    struct bw_acc *bw;
    size_t nbw, capbw;
    /* Published by cs__views_build for the step views (cs__views_heat_rows): the heat map's row
     * of each report rank and the ranks in each row; NULL when there is no heat map. */
    size_t *heat_row;
    int *heat_counts;
};

int cs__views_init(struct cs__run *run)
{
    struct cs__views *v = calloc(1, sizeof *v);
    if (!v)
        return CS_ENOMEM;
    size_t w = run->world > 0 ? (size_t)run->world : 0;
    v->world = run->world;
    v->p2p_block = (int)((w + CS_VIEW_MAX_ROWS - 1) / CS_VIEW_MAX_ROWS);
    if (v->p2p_block < 1)
        v->p2p_block = 1;
    v->p2p_n = (w + (size_t)v->p2p_block - 1) / (size_t)v->p2p_block;
    v->kind_ns = calloc(w + 1, sizeof *v->kind_ns);
    v->eligible = calloc(w + 1, sizeof *v->eligible);
    v->wait_nb = calloc(w + 1, sizeof *v->wait_nb);
    v->wait_nccl = calloc(w + 1, sizeof *v->wait_nccl);
    v->heat = calloc(w * CS_VIEW_HEAT_BINS + 1, sizeof *v->heat);
    v->p2p = calloc(v->p2p_n * v->p2p_n + 1, sizeof *v->p2p);
    if (!v->kind_ns || !v->eligible || !v->wait_nb || !v->wait_nccl || !v->heat || !v->p2p) {
        run->views = v;
        cs__views_free(run);
        return CS_ENOMEM;
    }
    /* Bins sized for the expected span (ranks that reached MPI_Finalize say where it ends), so
     * a clean run is rarely re-binned; a longer run doubles the bin width as it goes. */
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    for (int r = 0; r < run->world; r++) {
        const struct cs__rank *rk = &run->ranks[r];
        if (!rk->present)
            continue;
        if (rk->t_first < t0)
            t0 = rk->t_first;
        if (rk->h->t_finalize) {
            int64_t f = cs__clock_map(&rk->clk, rk->h->t_finalize);
            if (f > t1)
                t1 = f;
        }
    }
    v->t0 = t0 == INT64_MAX ? 0 : t0;
    v->bin_ns = 1000000;
    if (t1 > v->t0)
        v->bin_ns = (t1 - v->t0) / CS_VIEW_HEAT_BINS + 1;
    run->views = v;
    return 0;
}

void cs__views_free(struct cs__run *run)
{
    struct cs__views *v = run->views;
    if (!v)
        return;
    free(v->kind_ns);
    free(v->eligible);
    free(v->wait_nb);
    free(v->wait_nccl);
    free(v->heat);
    free(v->p2p);
    cs__map_free(&v->bw_by_key);
    free(v->bw);
    free(v->heat_row);
    free(v->heat_counts);
    free(v);
    run->views = NULL;
}

void cs__heat_merge_pairs(double *heat, int world)
{
    for (int r = 0; r < world; r++) {
        double *h = &heat[(size_t)r * CS_VIEW_HEAT_BINS];
        for (size_t i = 0; i < CS_VIEW_HEAT_BINS / 2; i++)
            h[i] = h[2 * i] + h[2 * i + 1];
        for (size_t i = CS_VIEW_HEAT_BINS / 2; i < CS_VIEW_HEAT_BINS; i++)
            h[i] = 0;
    }
}

/* Merge the heat map's bin pairs (the bins double in width). */
static void heat_widen(struct cs__views *v)
{
    cs__heat_merge_pairs(v->heat, v->world);
    v->bin_ns *= 2;
}

/* The heat-map bin of aligned time t, widening the bins (pairs merged) until t fits. */
static inline size_t heat_bin(struct cs__views *v, int64_t t)
{
    if (t <= v->t0)
        return 0;
    int64_t b;
    while ((b = (t - v->t0) / v->bin_ns) >= CS_VIEW_HEAT_BINS)
        heat_widen(v);
    return (size_t)b;
}

/* cs__log2_bucket of the bytes truncated to an integer (saturated), from the double's exponent:
 * for bytes >= 2, floor(log2) of the truncation is the exponent (2^e is an integer <= bytes). */
static int size_bucket(double bytes)
{
    if (bytes < 2)
        return 0;
    uint64_t u;
    memcpy(&u, &bytes, sizeof u);
    int e = (int)((u >> 52) & 0x7ff) - 1023;
    return e < CS_VIEW_BW_BUCKETS ? e : CS_VIEW_BW_BUCKETS - 1;
}

static size_t bwc_slot(uint16_t op, uint64_t comm)
{
    return (size_t)((comm * 0x9e3779b97f4a7c15ull + op * 0x2545f4914f6cdd1dull) >> 58);
}

/* bw_curve past the cache (out of line: the cache nearly always knows the curve). */
__attribute__((noinline)) static struct bw_acc *bw_curve_slow(struct cs__views *v, uint16_t op,
                                                              uint64_t comm)
{
    size_t ci = bwc_slot(op, comm);
    int fresh;
    uint64_t *iv = cs__map_put(&v->bw_by_key, op, comm, &fresh);
    if (!iv)
        return NULL;
    if (fresh) {
        if (cs__grow((void **)&v->bw, &v->capbw, v->nbw + 1, sizeof *v->bw)) {
            cs__map_del(&v->bw_by_key, op, comm);
            return NULL;
        }
        memset(&v->bw[v->nbw], 0, sizeof *v->bw);
        v->bw[v->nbw].op = op;
        v->bw[v->nbw].comm = comm;
        *iv = ++v->nbw;
    }
    if (*iv - 1 < UINT32_MAX) {
        v->bwc[ci].op = op;
        v->bwc[ci].comm = comm;
        v->bwc[ci].idx = (uint32_t)(*iv - 1);
    }
    return &v->bw[*iv - 1];
}

/* One transfer into bucket k of curve (op, comm) when the cache does not know the curve. */
__attribute__((noinline)) static void bw_add_slow(struct cs__views *v, uint16_t op, uint64_t comm,
                                                  int k, double bytes, double ns)
{
    struct bw_acc *a = bw_curve_slow(v, op, comm);
    if (!a)
        return;
    a->bytes[k] += bytes;
    a->ns[k] += ns;
    a->n[k]++;
}

/* One transfer of `bytes` taking `ns` into bucket k of curve (op, comm), added when new.  The
 * cache probe inline, the rest a tail call: the callers need no stack frame. */
static inline void bw_add(struct cs__views *v, uint16_t op, uint64_t comm, int k, double bytes,
                          double ns)
{
    size_t ci = bwc_slot(op, comm);
    if (v->bwc[ci].op == op && v->bwc[ci].comm == comm && op) { /* op 0 marks empty slots */
        struct bw_acc *a = &v->bw[v->bwc[ci].idx];
        a->bytes[k] += bytes;
        a->ns[k] += ns;
        a->n[k]++;
        return;
    }
    bw_add_slow(v, op, comm, k, bytes, ns);
}

void cs__views_transfer(struct cs__run *run, uint16_t op, uint64_t comm, double bytes, double ns)
{
    struct cs__views *v = run->views;
    if (!v || bytes <= 0)
        return;
    bw_add(v, op, comm, size_bucket(bytes), bytes, ns);
}

/* A point-to-point call: the bytes it sent into the matrix, and a blocking one's transfer. */
__attribute__((noinline)) static void
p2p_event(struct cs__views *v, int rank, const struct cs_event *ev, enum cs_op_kind k, uint64_t dur)
{
    /* The sender's view: what this rank sent to its peer (receives send nothing). */
    if (ev->op != CS_OP_RECV && ev->op != CS_OP_IRECV && ev->bytes && ev->peer >= 0 &&
        ev->peer < v->world && !(ev->flags & CS_EV_PROC_NULL)) {
        size_t a = (size_t)rank / (size_t)v->p2p_block, b = (size_t)ev->peer / (size_t)v->p2p_block;
        v->p2p[a * v->p2p_n + b] += ev->bytes;
    }
    if (k == CS_KIND_P2P) {
        /* cs__views_transfer with the bytes still an integer (the same bucket: a double that
         * rounds is beyond the last bucket's lower bound anyway). */
        uint64_t by = ev->bytes > ev->bytes_recv ? ev->bytes : ev->bytes_recv;
        if (by)
            bw_add(v, ev->op, ev->comm, cs__log2_bucket(by, CS_VIEW_BW_BUCKETS), (double)by,
                   (double)dur);
    }
}

/* kind_ns column + 1 of each op kind (0: not counted); 4 marks point-to-point calls.  256
 * entries, so that any kind indexes it without a range test. */
static const unsigned char kind_col[256] = {[CS_KIND_COLL] = 1,
                                            [CS_KIND_ICOLL] = 1,
                                            [CS_KIND_P2P] = 2 | 4,
                                            [CS_KIND_IP2P] = 2 | 4,
                                            [CS_KIND_WAIT] = 3};

void cs__views_event(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k)
{
    unsigned c = kind_col[(unsigned char)k];
    if (!c)
        return;
    struct cs__views *v = run->views;
    uint64_t dur = ev->t_end - ev->t_begin;
    v->kind_ns[rank][(c & 3) - 1] += dur;
    if (c & 4)
        p2p_event(v, rank, ev, k, dur);
}

void cs__views_waits(struct cs__run *run, const struct cs__inst *in)
{
    struct cs__views *v = run->views;
    /* Instances of one op often come in a row: look the op up once. */
    if (in->op != v->last_op) {
        const struct cs_op_info *oi = cs_op_info(in->op);
        v->last_op = in->op;
        v->last_eligible = oi->pattern == CS_PAT_NXN || oi->pattern == CS_PAT_NTO1;
        v->last_nb = oi->kind == CS_KIND_ICOLL;
        v->last_nccl = oi->kind == CS_KIND_NCOLL;
    }
    v->cur_eligible = (uint64_t)(v->last_eligible && in->n > 1);
    v->cur_byk = v->last_nb ? v->wait_nb : v->last_nccl ? v->wait_nccl : NULL;
}

void cs__views_member(struct cs__run *run, const struct cs__inst *in, int32_t i)
{
    struct cs__views *v = run->views;
    int r = in->members[i];
    int64_t wait_ns = in->wait[i];
    v->eligible[r] += v->cur_eligible;
    if (wait_ns <= 0)
        return;
    if (v->cur_byk)
        v->cur_byk[r] += (double)wait_ns;
    v->heat[(size_t)r * CS_VIEW_HEAT_BINS + heat_bin(v, in->arr[i])] += (double)wait_ns;
}

void cs__views_wait_at(struct cs__run *run, int rank, int64_t t, double wait_ns)
{
    struct cs__views *v = run->views;
    if (!v || !(wait_ns > 0) || rank < 0 || rank >= v->world)
        return;
    v->heat[(size_t)rank * CS_VIEW_HEAT_BINS + heat_bin(v, t)] += wait_ns;
}

/* ---- the model ---- */

/*
 * Rows of a chart for the report's ranks: one per rank up to per_rank ranks, else one per host
 * when there are at most CS_VIEW_MAX_ROWS hosts, else blocks of consecutive ranks.  Fills row[i]
 * for report rank i and labels; returns the number of rows (0 out of memory) and *by.
 */
static size_t group_rows(const struct cs_report *rep, size_t per_rank, size_t *row,
                         char (**labels)[96], int **counts, const char **by)
{
    size_t n = rep->nranks, nrows = 0;
    *labels = calloc(n + 1, sizeof **labels);
    *counts = calloc(n + 1, sizeof **counts);
    if (!*labels || !*counts)
        return 0;
    if (n <= per_rank) {
        *by = "rank";
        for (size_t i = 0; i < n; i++) {
            row[i] = i;
            snprintf((*labels)[i], 96, "rank %d (%s)", rep->ranks[i].rank, rep->ranks[i].host);
            (*counts)[i] = 1;
        }
        return n;
    }
    size_t hosts = 0;
    for (size_t i = 0; i < n && hosts <= CS_VIEW_MAX_ROWS; i++) {
        size_t j = 0;
        while (j < i && strcmp(rep->ranks[j].host, rep->ranks[i].host) != 0)
            j++;
        if (j == i) {
            row[i] = hosts++;
            if (hosts <= CS_VIEW_MAX_ROWS)
                snprintf((*labels)[row[i]], 96, "%s", rep->ranks[i].host);
        } else {
            row[i] = row[j];
        }
    }
    if (hosts <= CS_VIEW_MAX_ROWS) {
        *by = "node";
        nrows = hosts;
        for (size_t i = 0; i < n; i++)
            (*counts)[row[i]]++;
        for (size_t r = 0; r < nrows; r++) {
            char tmp[96];
            snprintf(tmp, sizeof tmp, "%.60s (%d ranks)", (*labels)[r], (*counts)[r]);
            memcpy((*labels)[r], tmp, sizeof tmp);
        }
        return nrows;
    }
    *by = "rank block";
    size_t per = (n + CS_VIEW_MAX_ROWS - 1) / CS_VIEW_MAX_ROWS;
    for (size_t i = 0; i < n; i++) {
        row[i] = i / per;
        (*counts)[row[i]]++;
    }
    nrows = (n + per - 1) / per;
    for (size_t r = 0; r < nrows; r++) {
        size_t last = (r + 1) * per < n ? (r + 1) * per - 1 : n - 1;
        snprintf((*labels)[r], 96, "ranks %d-%d", rep->ranks[r * per].rank, rep->ranks[last].rank);
    }
    return nrows;
}

static void read_command(const char *dir, char *out, size_t n)
{
    char path[4200], line[2048];
    snprintf(path, sizeof path, "%s/commscope-run.txt", dir);
    FILE *f = cs_input_fopen(path);
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "command: ", 9) == 0) {
            line[strcspn(line, "\n")] = '\0';
            /* A longer command is cut at the buffer: the run file keeps all of it. */
            size_t len = strlen(line + 9);
            if (len >= n)
                len = n - 1;
            memcpy(out, line + 9, len);
            out[len] = '\0';
            break;
        }
    }
    fclose(f);
}

static void add_finding(struct cs_report_views *o, struct cs_report_finding f)
{
    o->findings[o->nfindings++] = f;
}

static void build_findings(const struct cs_report *rep, struct cs_report_views *o)
{
    if (!rep->nranks)
        return;
    size_t s_idx = SIZE_MAX;
    if (rep->nstragglers)
        for (size_t i = 0; i < rep->nranks; i++)
            if (rep->ranks[i].rank == rep->stragglers[0].rank)
                s_idx = i;
    double others_wall = 0, comm = 0, wall = 0, waiting = 0, best_share = -1, max_compute = -1,
           mean_compute = 0;
    size_t best = 0, maxc = 0;
    for (size_t i = 0; i < rep->nranks; i++) {
        const struct cs_report_rank *r = &rep->ranks[i];
        if (i != s_idx)
            others_wall += r->wall_s;
        /* Ranks with GPU records: their communication time is the GPU's (views_gpu.c). */
        comm += cs__views_gpu_comm(r);
        wall += r->wall_s;
        waiting += o->seg_s[i][CS_SEG_WAIT];
        double share = r->wall_s > 0 ? cs__views_gpu_comm(r) / r->wall_s : 0;
        if (share > best_share) {
            best_share = share;
            best = i;
        }
        if (r->compute_s > max_compute) {
            max_compute = r->compute_s;
            maxc = i;
        }
        mean_compute += r->compute_s / (double)rep->nranks;
    }
    if (s_idx != SIZE_MAX) {
        const struct cs_report_straggler *s = &rep->stragglers[0];
        uint64_t elig = o->eligible[s_idx];
        double pct = others_wall > 0 ? 100.0 * s->others_waited_s / others_wall : 0;
        /* A rank that is last at a quarter of its collectives and costs the others at least 1 %
         * of their time is worth naming; otherwise lateness is spread around. */
        struct cs_report_finding f = {.rank = s->rank,
                                      .count = s->late_arrivals,
                                      .total = elig,
                                      .v = {s->others_waited_s, pct, NAN}};
        snprintf(f.host, sizeof f.host, "%s", s->host);
        f.kind = (elig && 4 * s->late_arrivals >= elig && pct >= 1.0) ? CS_FIND_STRAGGLER
                                                                      : CS_FIND_NO_STRAGGLER;
        add_finding(o, f);
    } else if (rep->matched) {
        add_finding(o, (struct cs_report_finding){.kind = CS_FIND_NO_STRAGGLER, .rank = -1});
    }
    if (comm > 0) {
        const struct cs_report_rank *b = &rep->ranks[best];
        struct cs_report_finding f = {
            .kind = CS_FIND_COMM_SHARE,
            .rank = b->rank,
            .count = (uint64_t)(o->waits_p2p != 0),
            .v = {wall > 0 ? 100.0 * comm / wall : 0, 100.0 * best_share, 100.0 * waiting / comm}};
        /* Waits are measured at complete instances only: with none, the share is unknown. */
        if (!rep->matched && rep->incomplete)
            f.v[2] = NAN;
        snprintf(f.host, sizeof f.host, "%s", b->host);
        add_finding(o, f);
    } else if (rep->no_call_ranks) {
        struct cs_report_finding f = {.kind = CS_FIND_NO_CALLS,
                                      .rank = -1,
                                      .count = (uint64_t)rep->no_call_ranks,
                                      .total = rep->nranks};
        const char *seen = strstr(rep->no_calls_note, "; ");
        snprintf(f.note, sizeof f.note, "%s", seen ? seen + 2 : "");
        add_finding(o, f);
    } else {
        add_finding(o, (struct cs_report_finding){.kind = CS_FIND_NO_COMM, .rank = -1});
    }
    cs__views_gpu_finding(rep, o);
    /* One rank is balanced with itself: no statement then; nor when the host ranks' computing
     * is no material share of their time (a benchmark that mostly communicates): its balance
     * would explain nothing.  (A GPU rank's compute is its kernels' time, no share of the host's
     * wall time: its balance is always stated.) */
    double hcompute = 0, hwall = 0;
    for (size_t i = 0; i < rep->nranks; i++)
        if (!isfinite(rep->ranks[i].gpu_comm_s)) {
            hcompute += rep->ranks[i].compute_s;
            hwall += rep->ranks[i].wall_s;
        }
    if (isfinite(rep->load_balance) && rep->nranks > 1 &&
        !(hwall > 0 && hcompute < CS_VIEW_COMPUTE_MATERIAL * hwall)) {
        const struct cs_report_rank *m = &rep->ranks[maxc];
        struct cs_report_finding f = {.kind = rep->load_balance < 0.95 ? CS_FIND_IMBALANCE
                                                                       : CS_FIND_BALANCED,
                                      .rank = m->rank,
                                      .v = {rep->load_balance, mean_compute, m->compute_s}};
        snprintf(f.host, sizeof f.host, "%s", m->host);
        add_finding(o, f);
    }
    if (rep->nmissing || rep->npartial || rep->dropped_events || rep->incomplete)
        add_finding(
            o, (struct cs_report_finding){.kind = CS_FIND_INCOMPLETE,
                                          .rank = -1,
                                          .count = rep->nmissing,
                                          .total = (uint64_t)rep->ranks_expected,
                                          .v = {(double)rep->npartial, (double)rep->dropped_events,
                                                (double)rep->incomplete}});
}

static void build_bw(struct cs__run *run, const struct cs_report *rep, struct cs_report_views *o)
{
    const struct cs__views *v = run->views;
    /* Each curve's communicator label once: every op row is compared with every curve of its op,
     * which with hundreds of communicators formatted labels tens of thousands of times. */
    char(*lab)[40] = malloc((v->nbw ? v->nbw : 1) * sizeof *lab);
    for (size_t j = 0; lab && j < v->nbw; j++)
        cs__comm_label(v->bw[j].comm, lab[j], sizeof lab[j]);
    /* In the order of the report's op table, so the chart's legend and the table agree. */
    for (size_t i = 0; i < rep->nops && o->nbw < v->nbw; i++) {
        uint16_t op = (uint16_t)cs_op_by_name(rep->ops[i].op);
        for (size_t j = 0; j < v->nbw; j++) {
            const struct bw_acc *a = &v->bw[j];
            char label[40];
            if (a->op != op || strcmp(lab ? lab[j] : cs__comm_label(a->comm, label, sizeof label),
                                      rep->ops[i].comm) != 0)
                continue;
            struct cs_report_bw_curve *c = &o->bw[o->nbw++];
            snprintf(c->op, sizeof c->op, "%s", rep->ops[i].op);
            snprintf(c->comm, sizeof c->comm, "%s", rep->ops[i].comm);
            c->comm_size = rep->ops[i].comm_size;
            /* The bottleneck path's capacity from the hosts' topology (nodes.c, Gb/s), as the
             * bus bandwidth it allows in GB/s. */
            const struct cs_report_optopo *t = rep->nodes ? &rep->nodes->ops[i] : NULL;
            c->capacity_gbps = t && isfinite(t->capacity_gbps) ? t->capacity_gbps / 8.0 : NAN;
            if (t && isfinite(t->capacity_gbps))
                snprintf(c->capacity_source, sizeof c->capacity_source, "%s path, %.0f Gb/s",
                         t->path, t->capacity_gbps);
            double f = cs_op_busbw_factor(op, c->comm_size);
            for (int k = 0; k < CS_VIEW_BW_BUCKETS; k++) {
                if (!a->n[k] || a->ns[k] <= 0)
                    continue;
                struct cs_report_bw_point *p = &c->pt[c->npoints++];
                p->log2_size = k;
                p->samples = a->n[k];
                p->mean_bytes = a->bytes[k] / (double)a->n[k];
                p->algbw_gbps = a->bytes[k] / a->ns[k];
                p->busbw_gbps = p->algbw_gbps * f;
            }
            if (!c->npoints)
                o->nbw--;
            break;
        }
    }
    free(lab);
}

static double clamp0(double v)
{
    return isfinite(v) && v > 0 ? v : 0;
}

/* A bar's communication, the part of its wall time in no segment (on ranks with GPU records,
 * time in which neither a kernel nor an MPI call of theirs ran: docs/metrics.md), and its length
 * (its wall time, or its segments where those add up to more: ranks with several GPUs). */
static void bar_totals(struct cs_report_bar *b)
{
    b->comm_s = b->seg_s[CS_SEG_COLL] + b->seg_s[CS_SEG_P2P] + b->seg_s[CS_SEG_COMPLETION] +
                b->seg_s[CS_SEG_WAIT];
    double sum = 0;
    for (int s = 0; s < CS_SEG_N; s++)
        sum += clamp0(b->seg_s[s]);
    double r = clamp0(b->wall_s) - sum;
    b->rest_s = r > 1e-6 * clamp0(b->wall_s) ? r : 0;
    b->len_s = clamp0(b->wall_s) > sum ? b->wall_s : sum;
}

void cs__views_build(struct cs__run *run, struct cs_report *rep)
{
    struct cs__views *v = run->views;
    if (!v || !rep->ranks)
        return;
    struct cs_report_views *o = calloc(1, sizeof *o);
    size_t n = rep->nranks;
    size_t *row = calloc(n + 1, sizeof *row);
    if (o) {
        o->seg_s = calloc(n + 1, sizeof *o->seg_s);
        o->eligible = calloc(n + 1, sizeof *o->eligible);
        o->bars = calloc(n + 1, sizeof *o->bars);
        o->findings = calloc(8, sizeof *o->findings);
        o->bw = calloc(v->nbw + 1, sizeof *o->bw);
        o->p2p_bytes = calloc(v->p2p_n * v->p2p_n + 1, sizeof *o->p2p_bytes);
    }
    if (!o || !row || !o->seg_s || !o->eligible || !o->bars || !o->findings || !o->bw ||
        !o->p2p_bytes) {
        free(row);
        cs__report_views_free(o);
        cs__problem(run, "out of memory building the report's charts");
        return;
    }

    int64_t t_end = v->t0;
    for (size_t i = 0; i < n; i++) {
        const struct cs_report_rank *r = &rep->ranks[i];
        const struct cs__rank *rk = &run->ranks[r->rank];
        const uint64_t *kn = v->kind_ns[r->rank];
        double coll = (double)kn[0] / 1e9, p2p = (double)kn[1] / 1e9,
               done = (double)(kn[2] + rk->h->unrecorded_test_ns) / 1e9;
        /* Waiting at a blocking collective happens inside the call; waiting at a non-blocking
         * one is exposed only in the wait/test calls that complete it (else compute hid it).
         * Each part is taken out of those calls' time and never counts more than it. */
        double nb = v->wait_nb[r->rank] / 1e9, nccl = v->wait_nccl[r->rank] / 1e9,
               bl = r->wait_s - nb - nccl;
        double in_coll = bl < coll ? (bl > 0 ? bl : 0) : coll;
        double in_done = nb < done ? nb : done;
        /* Waiting for point-to-point partners (host ranks, when the what-if pass measured it):
         * inside the sends and receives, and inside the wait/test calls completing them. */
        double pc = 0, pd = 0;
        if (run->p2p_wait) {
            pc = run->p2p_wait[run->world + r->rank] / 1e9;
            pd = run->p2p_wait[r->rank] / 1e9 - pc;
            pc = pc < p2p ? (pc > 0 ? pc : 0) : p2p;
            pd = pd < done - in_done ? (pd > 0 ? pd : 0) : done - in_done;
        }
        o->seg_s[i][CS_SEG_COMPUTE] = r->compute_s;
        o->seg_s[i][CS_SEG_COLL] = coll - in_coll;
        o->seg_s[i][CS_SEG_P2P] = p2p - pc;
        o->seg_s[i][CS_SEG_COMPLETION] = done - in_done - pd;
        o->seg_s[i][CS_SEG_WAIT] = in_coll + in_done + pc + pd;
        o->waits_p2p |= pc + pd > 0;
        /* A rank with GPU records: its NCCL collectives are timed on the GPU, its MPI calls
         * (above) on the host (views_gpu.c). */
        if (isfinite(r->gpu_comm_s))
            cs__views_gpu_segments(r, cs__sgpu_rank_wait_s(run, r->rank), nccl, o->seg_s[i]);
        o->eligible[i] = v->eligible[r->rank];
        int64_t e = rk->t_first + (int64_t)llround(r->wall_s * 1e9);
        if (e > t_end)
            t_end = e;
        if (rk->clk.valid == 2)
            o->clock_linear++;
        else if (rk->clk.valid == 1)
            o->clock_constant++;
        else
            o->clock_none++;
        if (isfinite(r->drift_ppm) && fabs(r->drift_ppm) > o->max_drift_ppm)
            o->max_drift_ppm = fabs(r->drift_ppm);
    }
    o->span_s = (double)(t_end - v->t0) / 1e9;

    /* Bars. */
    char(*labels)[96] = NULL;
    int *counts = NULL;
    o->nbars = group_rows(rep, CS_VIEW_RANK_BARS, row, &labels, &counts, &o->bars_by);
    for (size_t b = 0; b < o->nbars; b++) {
        snprintf(o->bars[b].label, sizeof o->bars[b].label, "%s", labels[b]);
        o->bars[b].nranks = counts[b];
        o->bars[b].first_rank = -1;
    }
    for (size_t i = 0; i < n && o->nbars; i++) {
        struct cs_report_bar *b = &o->bars[row[i]];
        if (b->first_rank < 0 || rep->ranks[i].rank < b->first_rank)
            b->first_rank = rep->ranks[i].rank;
        b->wall_s += rep->ranks[i].wall_s / b->nranks;
        for (int s = 0; s < CS_SEG_N; s++)
            b->seg_s[s] += o->seg_s[i][s] / b->nranks;
    }
    for (size_t i = 0; i < o->nbars; i++)
        bar_totals(&o->bars[i]);
    free(labels);
    free(counts);

    /* Heat map rows. */
    o->heat_rows = group_rows(rep, CS_VIEW_MAX_ROWS, row, &o->heat_label, &counts, &o->heat_by);
    o->heat_bins = CS_VIEW_HEAT_BINS;
    o->heat_bin_s = (double)v->bin_ns / 1e9;
    o->heat_wait_s = calloc(o->heat_rows * o->heat_bins + 1, sizeof *o->heat_wait_s);
    if (o->heat_wait_s && o->heat_rows) {
        for (size_t i = 0; i < n; i++) {
            const double *h = &v->heat[(size_t)rep->ranks[i].rank * CS_VIEW_HEAT_BINS];
            for (size_t b = 0; b < o->heat_bins; b++)
                o->heat_wait_s[row[i] * o->heat_bins + b] += h[b] / 1e9 / counts[row[i]];
        }
        /* Bins after the run's end carry nothing: leave them out of the chart. */
        size_t used = (size_t)((t_end - v->t0) / v->bin_ns) + 1;
        if (used < o->heat_bins) {
            for (size_t r = 1; r < o->heat_rows; r++)
                memmove(&o->heat_wait_s[r * used], &o->heat_wait_s[r * o->heat_bins],
                        used * sizeof *o->heat_wait_s);
            o->heat_bins = used;
        }
        /* With steps, the step views make the columns steps instead (cs__vsteps_build). */
        v->heat_row = row;
        v->heat_counts = counts;
        row = NULL;
        counts = NULL;
    } else {
        o->heat_rows = 0;
    }
    free(counts);
    free(row);

    o->p2p_n = v->p2p_n;
    o->p2p_block = v->p2p_block;
    for (size_t i = 0; i < v->p2p_n * v->p2p_n; i++) {
        o->p2p_bytes[i] = v->p2p[i];
        o->p2p_total += v->p2p[i];
    }
    build_bw(run, rep, o);
    build_findings(rep, o);
    read_command(run->dir, o->command, sizeof o->command);
    rep->views = o;
}

int cs__views_heat_rows(const struct cs__run *run, const size_t **row, const int **counts)
{
    const struct cs__views *v = run->views;
    if (!v || !v->heat_row)
        return 0;
    *row = v->heat_row;
    *counts = v->heat_counts;
    return 1;
}

void cs__report_views_free(struct cs_report_views *o)
{
    if (!o)
        return;
    free(o->seg_s);
    free(o->eligible);
    free(o->bars);
    free(o->heat_wait_s);
    free(o->heat_label);
    free(o->p2p_bytes);
    free(o->bw);
    free(o->findings);
    if (o->timeline) {
        for (size_t i = 0; i < o->timeline->nrows; i++)
            free(o->timeline->rows[i].seg);
        for (size_t i = 0; i < o->timeline->nrows; i++) {
            free(o->timeline->rows[i].gseg);
            free(o->timeline->rows[i].lane_comm);
        }
        free(o->timeline->rows);
        free(o->timeline);
    }
    free(o);
}
