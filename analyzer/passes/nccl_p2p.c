/* NCCL point-to-point matched across ranks on GPU times (see nccl_p2p.h). */
#include "nccl_p2p.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "passes.h"
#include "steps.h"

enum { S_NONE, S_WAIT, S_TIMED, S_UNTIMED };

struct side {
    int64_t a, e;
    uint64_t bytes;
    unsigned char st;
};

struct pr {
    struct side s, r;
};

struct chan {
    uint64_t comm;
    uint32_t from, to; /* comm ranks */
    int wfrom, wto;    /* world ranks, -1 unknown */
    struct pr *q;      /* pairs base + head ... base + n - 1 */
    size_t head, n, cap;
    uint64_t base; /* pair index of q[0] */
    uint64_t nsend, nrecv, bytes;
    uint64_t pairs, timed, late_s, late_r, mism;
    uint64_t late_s_ns, late_r_ns; /* sums of positive differences */
};

/* The sides one launch holds. */
struct ref {
    uint32_t chan;
    uint32_t recv;
    uint64_t k;
};
struct lref {
    size_t n, cap;
    struct ref *v;
};

struct cs__np2p {
    struct cs__map chan_by_key; /* (comm, from << 32 | to) -> index + 1 */
    struct chan *ch;
    size_t nch, capch;
    struct cs__map launches; /* (rank, launch) -> struct lref * */
    uint64_t skipped, untimed;
    int oom;
};

uint64_t cs__np2p_chan_id(struct cs__map *m, uint64_t *next, uint64_t comm, uint32_t s, uint32_t d)
{
    int fresh;
    uint64_t *v = cs__map_put(m, comm, (uint64_t)s << 32 | d, &fresh);
    if (!v)
        return 0;
    if (fresh)
        *v = ++*next;
    return *v;
}

static struct cs__np2p *state(struct cs__run *run)
{
    if (!run->np2p)
        run->np2p = calloc(1, sizeof *run->np2p);
    return run->np2p;
}

static void oom(struct cs__run *run, struct cs__np2p *P)
{
    if (!P->oom)
        cs__problem(run, "out of memory matching NCCL point-to-point calls; their pairs and waits "
                         "are left out");
    P->oom = 1;
}

static struct chan *chan_get(struct cs__run *run, struct cs__np2p *P, const struct cs__comm *c,
                             uint64_t comm, uint32_t from, uint32_t to)
{
    int fresh;
    uint64_t *v = cs__map_put(&P->chan_by_key, comm, (uint64_t)from << 32 | to, &fresh);
    if (!v)
        return NULL;
    if (!fresh)
        return &P->ch[*v - 1];
    if (cs__grow((void **)&P->ch, &P->capch, P->nch + 1, sizeof *P->ch)) {
        cs__map_del(&P->chan_by_key, comm, (uint64_t)from << 32 | to);
        return NULL;
    }
    struct chan *h = &P->ch[P->nch];
    *h = (struct chan){.comm = comm, .from = from, .to = to, .wfrom = -1, .wto = -1};
    if (!c->multi) {
        h->wfrom = c->members[from];
        h->wto = c->members[to];
    }
    (void)run;
    *v = ++P->nch;
    return h;
}

/* Account the resolved pairs at the channel's front. */
static void drain(struct chan *h)
{
    while (h->head < h->n) {
        struct pr *p = &h->q[h->head];
        if (p->s.st < S_TIMED || p->r.st < S_TIMED)
            break;
        h->pairs++;
        if (p->s.bytes != p->r.bytes)
            h->mism++;
        if (p->s.st == S_TIMED && p->r.st == S_TIMED) {
            h->timed++;
            if (p->s.a > p->r.a) {
                h->late_s++;
                h->late_s_ns += (uint64_t)(p->s.a - p->r.a);
            } else if (p->r.a > p->s.a) {
                h->late_r++;
                h->late_r_ns += (uint64_t)(p->r.a - p->s.a);
            }
        }
        h->head++;
    }
    if (h->head == h->n) {
        h->base += h->n;
        h->head = h->n = 0;
    } else if (h->head > 64 && h->head > h->n / 2) {
        memmove(h->q, h->q + h->head, (h->n - h->head) * sizeof *h->q);
        h->base += h->head;
        h->n -= h->head;
        h->head = 0;
    }
}

void cs__np2p_call(struct cs__run *run, int rank, const struct cs_event *ev)
{
    struct cs__np2p *P = state(run);
    if (!P)
        return;
    if (P->oom)
        return;
    int recv = ev->op == CS_OP_NCCL_RECV;
    if ((ev->op != CS_OP_NCCL_SEND && !recv) || (ev->flags & CS_EV_ERROR))
        return; /* a failed call enqueued nothing */
    if (!strcmp(run->source, "kineto"))
        return; /* imported Send/Recv kernels carry no peer (seq is their group's sequence) */
    const struct cs__comm *c = cs__comm_get(run, ev->comm);
    int32_t me = c ? cs__comm_rank(run, c, rank) : -1;
    if (!c || me < 0 || c->multi || ev->seq >= (uint32_t)c->size) {
        P->skipped++;
        return;
    }
    uint32_t from = recv ? ev->seq : (uint32_t)me, to = recv ? (uint32_t)me : ev->seq;
    struct chan *h = chan_get(run, P, c, ev->comm, from, to);
    uint64_t k = !h ? 0 : recv ? h->nrecv : h->nsend;
    if (!h || (k >= h->base + h->n &&
               cs__grow((void **)&h->q, &h->cap, (size_t)(k - h->base) + 1, sizeof *h->q))) {
        oom(run, P);
        return;
    }
    while (h->base + h->n <= k)
        h->q[h->n++] = (struct pr){0};
    struct side *sd = recv ? &h->q[k - h->base].r : &h->q[k - h->base].s;
    sd->bytes = recv ? ev->bytes_recv : ev->bytes;
    if (recv) {
        h->nrecv++;
    } else {
        h->nsend++;
        h->bytes += ev->bytes;
    }
    sd->st = S_UNTIMED;
    if (ev->request && run->ranks[rank].h->gpu_timing != CS_GPU_NONE &&
        !(ev->flags & CS_EV_GRAPH)) {
        int fresh;
        uint64_t *v = cs__map_put(&P->launches, (uint64_t)rank, ev->request, &fresh);
        struct lref *L = v && !fresh ? (void *)(uintptr_t)*v : v ? calloc(1, sizeof *L) : NULL;
        if (!L || cs__grow((void **)&L->v, &L->cap, L->n + 1, sizeof *L->v)) {
            if (v && fresh) {
                free(L);
                cs__map_del(&P->launches, (uint64_t)rank, ev->request);
            }
            oom(run, P);
            return;
        }
        *v = (uint64_t)(uintptr_t)L;
        L->v[L->n++] = (struct ref){.chan = (uint32_t)(h - P->ch), .recv = (uint32_t)recv, .k = k};
        sd->st = S_WAIT;
    } else {
        P->untimed++;
    }
    drain(h);
}

void cs__np2p_gpu(struct cs__run *run, int rank, uint64_t launch, int64_t tb, int64_t te)
{
    struct cs__np2p *P = run->np2p;
    if (!P || P->oom || !launch)
        return;
    uint64_t *v = cs__map_get(&P->launches, (uint64_t)rank, launch);
    if (!v)
        return;
    struct lref *L = (void *)(uintptr_t)*v;
    cs__map_del(&P->launches, (uint64_t)rank, launch);
    for (size_t i = 0; i < L->n; i++) {
        struct chan *h = &P->ch[L->v[i].chan];
        uint64_t k = L->v[i].k;
        if (k < h->base + h->head || k >= h->base + h->n)
            continue;
        struct side *sd = L->v[i].recv ? &h->q[k - h->base].r : &h->q[k - h->base].s;
        sd->a = tb;
        sd->e = te > tb ? te : tb;
        sd->st = S_TIMED;
        /* Both sides timed: the side that arrived first waited for the other, until the
         * other's arrival or its own kernel's end (step budget, ranks with a GPU timeline). */
        const struct pr *p = &h->q[k - h->base];
        if (p->s.st == S_TIMED && p->r.st == S_TIMED && p->s.a != p->r.a) {
            int send_first = p->s.a < p->r.a;
            const struct side *w = send_first ? &p->s : &p->r, *o = send_first ? &p->r : &p->s;
            int wr = send_first ? h->wfrom : h->wto;
            if (wr >= 0)
                cs__analyze_fact(run, &(struct cs__fact){.kind = CS__FACT_GPU_WAIT,
                                                         .rank = wr,
                                                         .comm = h->comm,
                                                         .t = w->a,
                                                         .e = o->a < w->e ? o->a : w->e});
        }
        drain(h);
    }
    free(L->v);
    free(L);
}

static int pair_cmp(const void *x, const void *y)
{
    const struct cs_report_np2p_pair *a = x, *b = y;
    int c = strcmp(a->comm, b->comm);
    if (c)
        return c;
    if (a->from != b->from)
        return a->from < b->from ? -1 : 1;
    return (a->to > b->to) - (a->to < b->to);
}

void cs__np2p_report(struct cs__run *run, struct cs_report *rep)
{
    struct cs__np2p *P = run->np2p;
    if (!P || P->oom || !P->nch) {
        cs__np2p_free(run);
        return;
    }
    struct cs_report_np2p *o = calloc(1, sizeof *o);
    if (o)
        o->pairs = calloc(P->nch, sizeof *o->pairs);
    if (!o || !o->pairs) {
        free(o);
        cs__problem(run, "out of memory for the NCCL point-to-point report");
        cs__np2p_free(run);
        return;
    }
    struct cs_report_views *vw = rep->views;
    uint64_t lost = 0;
    for (size_t i = 0; i < P->nch; i++) {
        struct chan *h = &P->ch[i];
        /* Sides whose GPU record never came count as untimed. */
        for (size_t j = h->head; j < h->n; j++) {
            struct pr *p = &h->q[j];
            if (p->s.st == S_WAIT) {
                p->s.st = S_UNTIMED;
                lost++;
            }
            if (p->r.st == S_WAIT) {
                p->r.st = S_UNTIMED;
                lost++;
            }
        }
        drain(h);
        for (size_t j = h->head; j < h->n; j++) {
            o->unmatched_sends += h->q[j].s.st != S_NONE;
            o->unmatched_recvs += h->q[j].r.st != S_NONE;
        }
        struct cs_report_np2p_pair *x = &o->pairs[o->npairs++];
        cs__comm_label(h->comm, x->comm, sizeof x->comm);
        x->from = h->wfrom;
        x->to = h->wto;
        x->sends = h->nsend;
        x->recvs = h->nrecv;
        x->bytes = h->bytes;
        x->pairs = h->pairs;
        x->timed = h->timed;
        x->late_sender = h->late_s;
        x->late_receiver = h->late_r;
        x->late_sender_wait_s = (double)h->late_s_ns / 1e9;
        x->late_receiver_wait_s = (double)h->late_r_ns / 1e9;
        x->mismatched_bytes = h->mism;
        o->pairs_total += h->pairs;
        o->timed += h->timed;
        o->late_sender += h->late_s;
        o->late_receiver += h->late_r;
        o->late_sender_wait_s += x->late_sender_wait_s;
        o->late_receiver_wait_s += x->late_receiver_wait_s;
        /* The point-to-point matrix: what the sender sent (the views count MPI only). */
        if (vw && vw->p2p_bytes && vw->p2p_block > 0 && h->wfrom >= 0 && h->wto >= 0 &&
            h->wfrom < run->world && h->wto < run->world) {
            size_t a = (size_t)h->wfrom / (size_t)vw->p2p_block,
                   b = (size_t)h->wto / (size_t)vw->p2p_block;
            if (a < vw->p2p_n && b < vw->p2p_n) {
                vw->p2p_bytes[a * vw->p2p_n + b] += h->bytes;
                vw->p2p_total += h->bytes;
            }
        }
    }
    o->untimed = P->untimed + lost;
    o->skipped = P->skipped;
    qsort(o->pairs, o->npairs, sizeof *o->pairs, pair_cmp);
    if (o->unmatched_sends || o->unmatched_recvs)
        cs__problem(run,
                    "%" PRIu64 " ncclSend and %" PRIu64 " ncclRecv calls have no counterpart on "
                    "their peer (per communicator and pair, in issue order); they are left out of "
                    "point-to-point waits",
                    o->unmatched_sends, o->unmatched_recvs);
    if (P->skipped)
        cs__problem(run,
                    "%" PRIu64 " ncclSend/ncclRecv calls could not be matched: their "
                    "communicator, this rank's place in it or the peer is unknown, or one process "
                    "holds several of its members",
                    P->skipped);
    /* The report borrowed the problem list before these were added. */
    rep->problems = run->problems;
    rep->nproblems = run->nproblems;
    rep->np2p = o;
    cs__np2p_free(run);
}

void cs__np2p_free(struct cs__run *run)
{
    struct cs__np2p *P = run->np2p;
    if (!P)
        return;
    for (size_t i = 0; i < P->nch; i++)
        free(P->ch[i].q);
    free(P->ch);
    for (size_t i = 0; i < P->launches.cap; i++)
        if (P->launches.slot[i].used) {
            struct lref *L = (void *)(uintptr_t)P->launches.slot[i].v;
            free(L->v);
            free(L);
        }
    cs__map_free(&P->launches);
    cs__map_free(&P->chan_by_key);
    free(P);
    run->np2p = NULL;
}

void cs__np2p_report_free(struct cs_report *rep)
{
    if (!rep->np2p)
        return;
    free(rep->np2p->pairs);
    free(rep->np2p);
    rep->np2p = NULL;
}

void cs__np2p_json(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_np2p *o = rep->np2p;
    if (!o)
        return;
    struct cs__jw w = {.f = out, .depth = 1};
    cs__jw_open(&w, "nccl_p2p", '{');
    cs__jw_u64(&w, "pairs", o->pairs_total);
    cs__jw_u64(&w, "timed_pairs", o->timed);
    cs__jw_u64(&w, "unmatched_sends", o->unmatched_sends);
    cs__jw_u64(&w, "unmatched_recvs", o->unmatched_recvs);
    cs__jw_u64(&w, "untimed_calls", o->untimed);
    cs__jw_u64(&w, "skipped_calls", o->skipped);
    cs__jw_u64(&w, "late_sender", o->late_sender);
    cs__jw_num(&w, "late_sender_wait_s", o->late_sender_wait_s);
    cs__jw_u64(&w, "late_receiver", o->late_receiver);
    cs__jw_num(&w, "late_receiver_wait_s", o->late_receiver_wait_s);
    cs__jw_open(&w, "channels", '[');
    for (size_t i = 0; i < o->npairs; i++) {
        const struct cs_report_np2p_pair *x = &o->pairs[i];
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "comm", x->comm);
        cs__jw_int(&w, "from", x->from);
        cs__jw_int(&w, "to", x->to);
        cs__jw_u64(&w, "sends", x->sends);
        cs__jw_u64(&w, "recvs", x->recvs);
        cs__jw_u64(&w, "bytes", x->bytes);
        cs__jw_u64(&w, "pairs", x->pairs);
        cs__jw_u64(&w, "timed_pairs", x->timed);
        cs__jw_u64(&w, "late_sender", x->late_sender);
        cs__jw_num(&w, "late_sender_wait_s", x->late_sender_wait_s);
        cs__jw_u64(&w, "late_receiver", x->late_receiver);
        cs__jw_num(&w, "late_receiver_wait_s", x->late_receiver_wait_s);
        cs__jw_u64(&w, "mismatched_bytes", x->mismatched_bytes);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_close(&w, '}');
}

void cs__np2p_text(const struct cs_report *rep, FILE *out)
{
    const struct cs_report_np2p *o = rep->np2p;
    if (!o)
        return;
    fprintf(out, "\n@--- NCCL point-to-point %s\n", "---------------------------------------");
    fprintf(out,
            "pairs %" PRIu64 " (timed %" PRIu64 ")  unmatched sends %" PRIu64 " recvs %" PRIu64
            "  late sender %" PRIu64 " (%.6f s)  late receiver %" PRIu64 " (%.6f s)\n",
            o->pairs_total, o->timed, o->unmatched_sends, o->unmatched_recvs, o->late_sender,
            o->late_sender_wait_s, o->late_receiver, o->late_receiver_wait_s);
    fprintf(out, "%-21s %5s %5s %8s %14s %8s %10s %12s %10s %12s\n", "Comm", "From", "To", "Pairs",
            "Bytes", "Timed", "LateSend", "LateSend_s", "LateRecv", "LateRecv_s");
    for (size_t i = 0; i < o->npairs; i++) {
        const struct cs_report_np2p_pair *x = &o->pairs[i];
        fprintf(out,
                "%-21s %5d %5d %8" PRIu64 " %14" PRIu64 " %8" PRIu64 " %10" PRIu64
                " %12.6f %10" PRIu64 " %12.6f\n",
                x->comm, x->from, x->to, x->pairs, x->bytes, x->timed, x->late_sender,
                x->late_sender_wait_s, x->late_receiver, x->late_receiver_wait_s);
    }
}
