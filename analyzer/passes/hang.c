/*
 * The hang and crash diagnosis (hang.h).
 *
 * A rank's trace ends in one of three ways: closed at MPI_Finalize; cut while the rank was inside
 * a call (its in-flight record, trace.h); cut between calls.  Its header says how the process
 * ended when it did not finalize (exit handler, fatal signal, or nothing: gone without warning).
 * From these and the collective instances that never completed:
 *  - per communicator, the oldest incomplete instance: who entered it (a committed event, or the
 *    call in flight) and when, who never did;
 *  - per rank blocked in a point-to-point call or a wait, whom it waits for; cycles among them
 *    are deadlocks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hang.h"
#include "reader.h"
#include "views.h"

/* A communicator's oldest incomplete instance as matching left it. */
struct hinst {
    uint64_t comm;
    uint32_t seq;
    uint16_t op;
    int32_t n;
    unsigned char *in; /* per comm rank: 1 arrived (committed event), 2 inside (in flight) */
    int64_t *arr;      /* aligned arrival */
    uint64_t *size;
};

/*
 * NCCL: the host call enqueues a collective and returns; its kernel completes later, and only
 * when every member enqueued it.  Per communicator and member, how many collectives it enqueued
 * (its sequence numbers count from 0), how many completed on its GPU (a GPU record of the
 * communicator's seq s: kernels of one communicator complete in order, so all before it did too),
 * and the last NRING enqueues.
 */
#define NRING 8
struct nslot {
    uint32_t seq;
    uint16_t op;
    uint8_t inside; /* the host call had not returned when the trace ends */
    uint64_t bytes;
    int64_t t; /* aligned enqueue */
};
struct nmem {
    uint32_t enq, done; /* enqueued, completed on the GPU (seq + 1 of the latest) */
    uint32_t pushed;
    struct nslot ring[NRING];
};
struct ncomm {
    uint64_t comm;
    int32_t n;
    struct nmem *m;
};

struct cs__hang {
    struct hinst *v;
    size_t n, cap;
    struct ncomm *nc;
    size_t nnc, capnc;
    struct cs__map nc_by_id; /* comm id -> index into nc + 1 */
};

static struct hinst *find(struct cs__hang *H, uint64_t comm)
{
    for (size_t i = 0; i < H->n; i++)
        if (H->v[i].comm == comm)
            return &H->v[i];
    return NULL;
}

static void hinst_free(struct hinst *h)
{
    free(h->in);
    free(h->arr);
    free(h->size);
    memset(h, 0, sizeof *h);
}

/* (Re)make h an empty instance (comm, seq) of n members. */
static int hinst_init(struct hinst *h, uint64_t comm, uint32_t seq, uint16_t op, int32_t n)
{
    hinst_free(h);
    h->comm = comm;
    h->seq = seq;
    h->op = op;
    h->n = n;
    h->in = calloc((size_t)n, 1);
    h->arr = calloc((size_t)n, sizeof *h->arr);
    h->size = calloc((size_t)n, sizeof *h->size);
    return h->in && h->arr && h->size ? 0 : -1;
}

/* The entry of comm, added empty (seq UINT32_MAX) when new; NULL out of memory. */
static struct hinst *slot(struct cs__run *run, uint64_t comm)
{
    if (!run->hang && !(run->hang = calloc(1, sizeof *run->hang)))
        return NULL;
    struct cs__hang *H = run->hang;
    struct hinst *h = find(H, comm);
    if (h)
        return h;
    if (cs__grow((void **)&H->v, &H->cap, H->n + 1, sizeof *H->v))
        return NULL;
    h = &H->v[H->n++];
    memset(h, 0, sizeof *h);
    h->comm = comm;
    h->seq = UINT32_MAX;
    return h;
}

void cs__hang_instance(struct cs__run *run, const struct cs__inst *in)
{
    /* NCCL instances (made from the kernels' records, which come late or not at all when a
     * process ends) are judged by what each member enqueued instead (build_nccl). */
    if (in->ended >= in->n || in->n < 1 || cs_op_info(in->op)->kind == CS_KIND_NCOLL)
        return;
    struct hinst *h = slot(run, in->comm);
    if (!h || in->seq >= h->seq)
        return;
    if (hinst_init(h, in->comm, in->seq, in->op, in->n)) {
        hinst_free(h);
        h->seq = UINT32_MAX;
        return;
    }
    for (int32_t i = 0; i < in->n; i++) {
        if (!(in->state[i] & 1))
            continue;
        h->in[i] = 1;
        h->arr[i] = in->arr[i];
        h->size[i] = in->size[i];
    }
}

/* The NCCL state of communicator comm (made when new), NULL unknown or out of memory. */
static struct ncomm *ncomm_of(struct cs__run *run, uint64_t comm)
{
    if (!run->hang && !(run->hang = calloc(1, sizeof *run->hang)))
        return NULL;
    struct cs__hang *H = run->hang;
    uint64_t *at = cs__map_get(&H->nc_by_id, comm, 0);
    if (at)
        return *at ? &H->nc[*at - 1] : NULL;
    const struct cs__comm *c = cs__comm_get(run, comm);
    if (!(at = cs__map_put(&H->nc_by_id, comm, 0, NULL)))
        return NULL;
    if (!c || c->size < 1)
        return NULL; /* *at stays 0: unknown communicator */
    if (cs__grow((void **)&H->nc, &H->capnc, H->nnc + 1, sizeof *H->nc))
        return NULL;
    struct ncomm *nc = &H->nc[H->nnc];
    nc->comm = comm;
    nc->n = c->size;
    nc->m = calloc((size_t)c->size, sizeof *nc->m);
    if (!nc->m)
        return NULL;
    *at = ++H->nnc;
    return nc;
}

/* World rank r's state in NCCL communicator comm, NULL not a member (or out of memory). */
static struct nmem *nmem_of(struct cs__run *run, uint64_t comm, int r)
{
    struct ncomm *nc = ncomm_of(run, comm);
    const struct cs__comm *c = nc ? cs__comm_get(run, comm) : NULL;
    int32_t i = c ? cs__comm_rank(run, c, r) : -1;
    return i >= 0 && i < nc->n ? &nc->m[i] : NULL;
}

static void nccl_enqueued(struct cs__run *run, int r, const struct cs_event *ev, int64_t t,
                          int inside)
{
    struct nmem *m = nmem_of(run, ev->comm, r);
    if (!m)
        return;
    if (ev->seq + 1 > m->enq)
        m->enq = ev->seq + 1;
    m->ring[m->pushed++ % NRING] = (struct nslot){
        .seq = ev->seq, .op = ev->op, .inside = (uint8_t)inside, .bytes = ev->bytes, .t = t};
}

void cs__hang_event(struct cs__run *run, int r, const struct cs_event *ev, int64_t tb)
{
    if (!ev->comm)
        return;
    if (ev->op != CS_OP_GPU_NCCL) {
        nccl_enqueued(run, r, ev, tb, 0);
        return;
    }
    struct nmem *m = nmem_of(run, ev->comm, r);
    if (m && ev->seq + 1 > m->done)
        m->done = ev->seq + 1;
}

void cs__hang_free(struct cs__run *run)
{
    struct cs__hang *H = run->hang;
    if (!H)
        return;
    for (size_t i = 0; i < H->nnc; i++)
        free(H->nc[i].m);
    free(H->nc);
    cs__map_free(&H->nc_by_id);
    for (size_t i = 0; i < H->n; i++)
        hinst_free(&H->v[i]);
    free(H->v);
    free(H);
    run->hang = NULL;
}

/* A reported collective's member arrays for n members (kernels: the NCCL one too); 0 or -1. */
static int coll_alloc(struct cs_report_hang_coll *o, int32_t n, int kernels)
{
    o->entered = malloc((size_t)n * sizeof *o->entered);
    o->since_s = malloc((size_t)n * sizeof *o->since_s);
    o->bytes = malloc((size_t)n * sizeof *o->bytes);
    o->missing = malloc((size_t)n * sizeof *o->missing);
    if (kernels)
        o->kernel = malloc((size_t)n * sizeof *o->kernel);
    return o->entered && o->since_s && o->bytes && o->missing && (!kernels || o->kernel) ? 0 : -1;
}

static void coll_free(struct cs_report_hang_coll *o)
{
    free(o->kernel);
    free(o->missing_hosts);
    free(o->entered);
    free(o->since_s);
    free(o->bytes);
    free(o->missing);
    memset(o, 0, sizeof *o);
}

void cs__hang_report_free(struct cs_report *rep)
{
    struct cs_report_hang *g = rep->hang;
    if (!g)
        return;
    for (size_t i = 0; i < g->ncolls; i++)
        coll_free(&g->colls[i]);
    free(g->colls);
    free(g->ranks);
    free(g->waits);
    free(g->cycle_ranks);
    free(g->cycle_len);
    free(g);
    rep->hang = NULL;
}

int cs__hang_found(const struct cs_report *rep)
{
    const struct cs_report_hang *g = rep->hang;
    if (!g)
        return 0;
    if (g->hung)
        return 1;
    for (size_t i = 0; i < g->nranks; i++)
        if (g->ranks[i].fate >= CS_FATE_EXITED)
            return 1;
    return 0;
}

/* ---- per rank ---- */

struct rstate {
    const struct cs_event *inflight, *last;
    enum cs_hang_fate fate;
};

static double sec(int64_t t, int64_t origin)
{
    return (double)(t - origin) * 1e-9;
}

static void call_of(struct cs__run *run, int r, const struct cs_event *ev, int end, int64_t origin,
                    struct cs_report_hang_call *c)
{
    const struct cs__clock *clk = &run->ranks[r].clk;
    enum cs_op_kind k = cs_op_info(ev->op)->kind;
    *c = (struct cs_report_hang_call){
        .op = ev->op,
        .comm = ev->comm,
        .seq = ev->seq,
        .peer = ev->peer,
        .from = -1,
        .tag = ev->aux,
        .bytes = ev->bytes,
        .t_s = sec(cs__clock_map(clk, end ? ev->t_end : ev->t_begin), origin)};
    if (ev->op == CS_OP_SENDRECV || ev->op == CS_OP_SENDRECV_REPLACE) {
        c->from = ev->seq ? (int32_t)ev->seq - 1 : -1;
        c->seq = 0;
    } else if (k != CS_KIND_COLL && k != CS_KIND_ICOLL && k != CS_KIND_WAIT && k != CS_KIND_NCOLL) {
        c->seq = 0;
    }
}

static enum cs_hang_fate fate_of(const struct cs__rank *rk)
{
    if (!rk->present || !rk->h)
        return CS_FATE_MISSING;
    if (!(rk->h->flags & CS_FLAG_PARTIAL))
        return CS_FATE_FINALIZED;
    if (rk->h->exit_kind == CS_EXIT_EXIT)
        return CS_FATE_EXITED;
    if (rk->h->exit_kind == CS_EXIT_SIGNAL)
        return CS_FATE_SIGNALLED;
    if (rk->rd && cs_reader_stats(rk->rd)->live)
        return CS_FATE_RUNNING;
    return CS_FATE_VANISHED;
}

static void rank_state(const struct cs__rank *rk, struct rstate *s)
{
    memset(s, 0, sizeof *s);
    s->fate = fate_of(rk);
    if (!rk->present || !rk->rd)
        return;
    const struct cs_reader_tail *t;
    size_t n = cs_reader_tails(rk->rd, &t);
    for (size_t i = 0; i < n; i++) {
        if (t[i].inflight && !s->inflight)
            s->inflight = t[i].inflight;
        if (t[i].last && (!s->last || t[i].last->t_end > s->last->t_end))
            s->last = t[i].last;
    }
}

/* ---- collectives ---- */

static int is_coll(uint16_t op)
{
    enum cs_op_kind k = cs_op_info(op)->kind;
    return k == CS_KIND_COLL || k == CS_KIND_ICOLL;
}

/* Ops whose members all contribute the same bytes (a difference is a mismatch). */
static int same_bytes_op(uint16_t op)
{
    return op == CS_OP_ALLREDUCE || op == CS_OP_IALLREDUCE || op == CS_OP_BCAST ||
           op == CS_OP_IBCAST || op == CS_OP_REDUCE || op == CS_OP_IREDUCE || op == CS_OP_SCAN ||
           op == CS_OP_EXSCAN || op == CS_OP_BARRIER || op == CS_OP_IBARRIER;
}

/* Merge the collectives in flight into the kept instances: an older one than matching's replaces
 * it; one of the same instance marks its member inside. */
static void merge_inflight(struct cs__run *run, const struct rstate *st)
{
    for (int pass = 0; pass < 2; pass++)
        for (int r = 0; r < run->world; r++) {
            const struct cs_event *ev = st[r].inflight;
            if (!ev || !is_coll(ev->op))
                continue;
            const struct cs__comm *c = cs__comm_get(run, ev->comm);
            int32_t idx = c ? cs__comm_rank(run, c, r) : -1;
            if (idx < 0)
                continue;
            struct hinst *h = slot(run, ev->comm);
            if (!h)
                return;
            /* Pass 0 finds each communicator's oldest instance, pass 1 marks its members. */
            if (pass == 0 && ev->seq < h->seq) {
                if (hinst_init(h, ev->comm, ev->seq, ev->op, c->size)) {
                    hinst_free(h);
                    h->seq = UINT32_MAX;
                }
                continue;
            }
            if (pass == 1 && ev->seq == h->seq && h->in && idx < h->n) {
                h->in[idx] |= 2;
                h->arr[idx] = cs__clock_map(&run->ranks[r].clk, ev->t_begin);
                if (!h->size[idx])
                    h->size[idx] = ev->bytes;
            }
        }
}

static int coll_cmp(const void *a, const void *b)
{
    const struct cs_report_hang_coll *x = a, *y = b;
    if ((x->nmissing > 0) != (y->nmissing > 0))
        return x->nmissing > 0 ? -1 : 1;
    if (x->nentered != y->nentered)
        return x->nentered > y->nentered ? -1 : 1;
    double tx = x->nentered ? x->since_s[0] : INFINITY, ty = y->nentered ? y->since_s[0] : INFINITY;
    return tx < ty ? -1 : tx > ty;
}

/* The host of world rank r ("" unknown). */
static const char *host_of(const struct cs__run *run, int32_t r)
{
    const struct cs__rank *rk = r >= 0 && r < run->world ? &run->ranks[r] : NULL;
    return rk && rk->present && rk->h ? rk->h->host : "";
}

/* o->missing_hosts: the hosts of at least two missing members on which no member entered o, when
 * the run's ranks are on more than one host.  0, or -1 out of memory. */
static int whole_hosts(const struct cs__run *run, struct cs_report_hang_coll *o)
{
    const char *first = NULL;
    int several = 0;
    for (int r = 0; r < run->world && !several; r++) {
        const char *h = host_of(run, r);
        if (!h[0])
            continue;
        several = first && strncmp(first, h, CS_HOST_MAX) != 0;
        first = first ? first : h;
    }
    if (!several || !o->nmissing)
        return 0;
    o->missing_hosts = calloc((size_t)o->nmissing, sizeof *o->missing_hosts);
    if (!o->missing_hosts)
        return -1;
    for (int32_t i = 0; i < o->nmissing; i++) {
        const char *h = host_of(run, o->missing[i]);
        int skip = !h[0];
        for (int32_t j = 0; j < o->nentered && !skip; j++)
            skip = strncmp(host_of(run, o->entered[j]), h, CS_HOST_MAX) == 0;
        for (int32_t j = 0; j < o->nmissing_hosts && !skip; j++)
            skip = strncmp(o->missing_hosts[j], h, CS_HOST_MAX) == 0;
        /* One member on the host is that rank's story, not the host's. */
        int on = 0;
        for (int32_t j = 0; j < o->nmissing && !skip; j++)
            on += strncmp(host_of(run, o->missing[j]), h, CS_HOST_MAX) == 0;
        if (skip || on < 2)
            continue;
        snprintf(o->missing_hosts[o->nmissing_hosts++], CS_HOST_MAX, "%.*s", CS_HOST_MAX - 1, h);
    }
    return 0;
}

static int build_colls(struct cs__run *run, struct cs_report_hang *g, int64_t origin)
{
    struct cs__hang *H = run->hang;
    size_t n = 0;
    for (size_t i = 0; H && i < H->n; i++)
        n += H->v[i].in != NULL;
    g->colls = calloc(n ? n : 1, sizeof *g->colls);
    if (!g->colls)
        return -1;
    for (size_t i = 0; H && i < H->n; i++) {
        const struct hinst *h = &H->v[i];
        const struct cs__comm *c = cs__comm_get(run, h->comm);
        if (!h->in || !c || c->size != h->n)
            continue;
        struct cs_report_hang_coll *o = &g->colls[g->ncolls++];
        o->comm = h->comm;
        o->size = h->n;
        o->op = h->op;
        o->seq = h->seq;
        if (coll_alloc(o, h->n, 0))
            return -1;
        uint64_t b0 = 0;
        for (int32_t j = 0; j < h->n; j++) {
            int32_t w = c->members[j];
            if (!h->in[j]) {
                o->missing[o->nmissing++] = w;
                continue;
            }
            int32_t k = o->nentered++;
            o->entered[k] = w;
            o->since_s[k] = sec(h->arr[j], origin);
            o->bytes[k] = h->size[j];
            o->inside += (h->in[j] & 2) != 0;
            if (h->size[j] && b0 && h->size[j] != b0 && same_bytes_op(h->op))
                o->bytes_differ = 1;
            if (h->size[j] && !b0)
                b0 = h->size[j];
        }
        if (whole_hosts(run, o))
            return -1;
        /* Waiting only for ranks that left no trace: what they did is unknown (the missing files
         * are a problem of their own), so nothing here says they stopped there. */
        int traced = 0;
        for (int32_t j = 0; j < o->nmissing; j++)
            traced |= cs__member_present(run, o->missing[j]);
        if (o->nmissing && !traced) {
            coll_free(o);
            g->ncolls--;
        }
    }
    qsort(g->colls, g->ncolls, sizeof *g->colls, coll_cmp);
    return 0;
}

/* ---- NCCL ---- */

static const struct nslot *nslot_of(const struct nmem *m, uint32_t seq)
{
    uint32_t n = m->pushed < NRING ? m->pushed : NRING;
    for (uint32_t i = 0; i < n; i++)
        if (m->ring[(m->pushed - 1 - i) % NRING].seq == seq)
            return &m->ring[(m->pushed - 1 - i) % NRING];
    return NULL;
}

/*
 * Per NCCL communicator, the collective it stopped at: when its members enqueued different
 * numbers of collectives, the first one some member never enqueued (seq = the fewest); when all
 * enqueued the same (only for a job known stuck, --hung), the first whose kernel no member
 * completed.  Left out when a member that enqueued it completed it (the collective finished: a
 * record of the others is missing, not the call).
 */
static int build_nccl(struct cs__run *run, struct cs_report_hang *g, const struct rstate *st,
                      int64_t origin)
{
    for (int r = 0; r < run->world; r++) {
        const struct cs_event *ev = st[r].inflight;
        if (ev && cs_op_info(ev->op)->kind == CS_KIND_NCOLL)
            nccl_enqueued(run, r, ev, cs__clock_map(&run->ranks[r].clk, ev->t_begin), 1);
    }
    struct cs__hang *H = run->hang;
    for (size_t i = 0; H && i < H->nnc; i++) {
        const struct ncomm *nc = &H->nc[i];
        const struct cs__comm *c = cs__comm_get(run, nc->comm);
        if (!c || c->size != nc->n)
            continue;
        uint32_t emin = UINT32_MAX, emax = 0, k = UINT32_MAX;
        for (int32_t j = 0; j < nc->n; j++) {
            if (!cs__member_present(run, c->members[j]))
                continue;
            emin = nc->m[j].enq < emin ? nc->m[j].enq : emin;
            emax = nc->m[j].enq > emax ? nc->m[j].enq : emax;
        }
        if (emax == 0)
            continue;
        if (emin < emax) {
            k = emin;
        } else if (run->known_hung) {
            for (int32_t j = 0; j < nc->n; j++)
                if (cs__member_present(run, c->members[j]) && nc->m[j].done < nc->m[j].enq &&
                    nc->m[j].done < k)
                    k = nc->m[j].done;
        }
        if (k == UINT32_MAX)
            continue;
        int finished = 0;
        for (int32_t j = 0; j < nc->n; j++)
            finished |= nc->m[j].enq > k && nc->m[j].done > k;
        if (finished)
            continue;
        void *p = realloc(g->colls, (g->ncolls + 1) * sizeof *g->colls);
        if (!p)
            return -1;
        g->colls = p;
        struct cs_report_hang_coll *o = &g->colls[g->ncolls++];
        memset(o, 0, sizeof *o);
        o->comm = nc->comm;
        o->size = nc->n;
        o->seq = k;
        o->nccl = 1;
        if (coll_alloc(o, nc->n, 1))
            return -1;
        for (int32_t j = 0; j < nc->n; j++) {
            int32_t w = c->members[j];
            const struct nmem *m = &nc->m[j];
            if (m->enq <= k) {
                o->missing[o->nmissing++] = w;
                continue;
            }
            const struct nslot *sl = nslot_of(m, k);
            int32_t e = o->nentered++;
            o->entered[e] = w;
            o->since_s[e] = sl ? sec(sl->t, origin) : NAN;
            o->bytes[e] = sl ? sl->bytes : 0;
            o->inside += sl && sl->inside;
            if (sl && !o->op)
                o->op = sl->op;
            const struct cs__rank *rk = &run->ranks[w];
            o->kernel[e] =
                rk->h && rk->h->gpu_timing != CS_GPU_NONE ? CS_KERNEL_NOT_DONE : CS_KERNEL_UNTIMED;
            o->kernels_open += o->kernel[e] == CS_KERNEL_NOT_DONE;
        }
        if (whole_hosts(run, o))
            return -1;
        g->hung = 1; /* o->op stays CS_OP_NONE when no member's enqueue of it was kept */
    }
    qsort(g->colls, g->ncolls, sizeof *g->colls, coll_cmp);
    return 0;
}

/* ---- point-to-point waits ---- */

/* Whom a rank blocked in ev waits for: its receive's source, its send's destination, the peer of
 * the one request it waits on; -1 any source or unknown. */
static int32_t waits_for(const struct cs_event *ev)
{
    if (ev->op == CS_OP_SENDRECV || ev->op == CS_OP_SENDRECV_REPLACE)
        return ev->seq ? (int32_t)ev->seq - 1 : ev->peer;
    return ev->peer;
}

static int build_waits(struct cs__run *run, struct cs_report_hang *g, const struct rstate *st,
                       int64_t origin)
{
    g->waits = calloc((size_t)run->world, sizeof *g->waits);
    int32_t *at = malloc((size_t)run->world * sizeof *at);
    if (!g->waits || !at) {
        free(at);
        return -1;
    }
    for (int r = 0; r < run->world; r++) {
        at[r] = -1;
        const struct cs_event *ev = st[r].inflight;
        if (!ev)
            continue;
        enum cs_op_kind k = cs_op_info(ev->op)->kind;
        if (k != CS_KIND_P2P && k != CS_KIND_WAIT)
            continue;
        at[r] = (int32_t)g->nwaits;
        g->waits[g->nwaits++] = (struct cs_report_hang_wait){
            .rank = r,
            .op = ev->op,
            .comm = ev->comm,
            .peer = waits_for(ev),
            .tag = ev->aux,
            .since_s = sec(cs__clock_map(&run->ranks[r].clk, ev->t_begin), origin)};
    }
    /* Cycles: each blocked rank waits for at most one, so following the arrows from every rank
     * not yet visited either ends, or closes a loop among the ranks of this walk. */
    unsigned char *mark = calloc((size_t)run->world, 1); /* 1 on this walk, 2 done */
    g->cycle_ranks = malloc((size_t)run->world * sizeof *g->cycle_ranks);
    g->cycle_len = malloc((size_t)run->world * sizeof *g->cycle_len);
    if (!mark || !g->cycle_ranks || !g->cycle_len) {
        free(mark);
        free(at);
        return -1;
    }
    size_t used = 0;
    for (size_t i = 0; i < g->nwaits; i++) {
        int r = g->waits[i].rank;
        while (r >= 0 && !mark[r] && at[r] >= 0) {
            mark[r] = 1;
            r = g->waits[at[r]].peer;
        }
        if (r >= 0 && r < run->world && mark[r] == 1 && at[r] >= 0) {
            /* r is on this walk: the loop is r -> ... -> r */
            size_t len = 0;
            int q = r;
            do {
                g->cycle_ranks[used + len++] = q;
                g->waits[at[q]].cycle = (int)g->ncycles + 1;
                q = g->waits[at[q]].peer;
            } while (q != r);
            g->cycle_len[g->ncycles++] = len;
            used += len;
        }
        for (int q = g->waits[i].rank; q >= 0 && mark[q] == 1;
             q = at[q] >= 0 ? g->waits[at[q]].peer : -1)
            mark[q] = 2;
    }
    free(mark);
    free(at);
    return 0;
}

/* ---- the report ---- */

/* The views' timing findings describe whole steps and complete instances: withdrawn when the job
 * hung, since the step it stopped in never ended. */
static void withdraw_timing(struct cs_report *rep);

void cs__hang_report(struct cs__run *run, struct cs_report *rep)
{
    int stopped = 0;
    int64_t origin = INT64_MAX, end = INT64_MIN;
    for (int r = 0; r < run->world; r++) {
        const struct cs__rank *rk = &run->ranks[r];
        if (!rk->present)
            continue;
        /* A partial trace whose process still runs is a live job, not a stopped one. */
        enum cs_hang_fate fate = fate_of(rk);
        stopped |= fate == CS_FATE_EXITED || fate == CS_FATE_SIGNALLED || fate == CS_FATE_VANISHED;
        /* Unless it is known to be stuck (commscope run --hang-timeout saw no progress). */
        stopped |= fate == CS_FATE_RUNNING && run->known_hung;
        if (rk->t_first < origin)
            origin = rk->t_first;
        if (rk->t_last_end > end)
            end = rk->t_last_end;
    }
    if (!stopped)
        return;
    struct rstate *st = calloc((size_t)run->world, sizeof *st);
    struct cs_report_hang *g = calloc(1, sizeof *g);
    if (!st || !g)
        goto oom;
    g->stopped = 1;
    g->ranks = calloc((size_t)run->world, sizeof *g->ranks);
    if (!g->ranks)
        goto oom;
    for (int r = 0; r < run->world; r++) {
        const struct cs__rank *rk = &run->ranks[r];
        rank_state(rk, &st[r]);
        if (st[r].inflight) {
            g->hung = 1;
            int64_t t = cs__clock_map(&rk->clk, st[r].inflight->t_begin);
            if (t > end)
                end = t;
        }
        if (st[r].fate == CS_FATE_FINALIZED && !st[r].inflight)
            continue;
        struct cs_report_hang_rank *o = &g->ranks[g->nranks++];
        o->rank = r;
        o->fate = st[r].fate;
        o->exit_s = NAN;
        if (rk->present) {
            memcpy(o->host, rk->h->host, sizeof o->host);
            o->host[sizeof o->host - 1] = '\0';
            if (rk->h->exit_kind) {
                o->code = rk->h->exit_code;
                int64_t t = cs__clock_map(&rk->clk, rk->h->t_exit);
                o->exit_s = sec(t, origin);
                if (t > end)
                    end = t;
            }
        }
        if (st[r].inflight) {
            o->in_call = 1;
            call_of(run, r, st[r].inflight, 0, origin, &o->call);
        }
        if (st[r].last) {
            o->has_last = 1;
            call_of(run, r, st[r].last, 1, origin, &o->last);
        }
    }
    g->end_s = end > origin ? sec(end, origin) : 0;
    merge_inflight(run, st);
    if (build_colls(run, g, origin) || build_nccl(run, g, st, origin) ||
        build_waits(run, g, st, origin))
        goto oom;
    free(st);
    rep->hang = g;
    if (g->hung)
        withdraw_timing(rep);
    return;
oom:
    free(st);
    rep->hang = g;
    cs__hang_report_free(rep);
    cs__problem(run, "out of memory in the hang diagnosis; it is not reported");
}

static void withdraw_timing(struct cs_report *rep)
{
    struct cs_report_views *v = rep->views;
    if (!v)
        return;
    size_t k = 0;
    for (size_t i = 0; i < v->nfindings; i++) {
        enum cs_finding_kind f = v->findings[i].kind;
        /* (Compute balance too: a stuck rank's "compute" is the time it did not call.) */
        if (f == CS_FIND_STRAGGLER || f == CS_FIND_NO_STRAGGLER || f == CS_FIND_GRAD_SYNC ||
            f == CS_FIND_GPU_COMM || f == CS_FIND_P2P_WAIT || f == CS_FIND_IMBALANCE ||
            f == CS_FIND_BALANCED)
            continue;
        /* The instances only in flight were never seen by matching: counted here. */
        if (f == CS_FIND_INCOMPLETE)
            for (size_t j = 0; j < rep->hang->ncolls; j++)
                v->findings[i].v[2] += rep->hang->colls[j].inside == rep->hang->colls[j].nentered;
        v->findings[k++] = v->findings[i];
    }
    v->nfindings = k;
}
