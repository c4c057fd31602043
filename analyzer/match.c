/*
 * Matching: communicators agreed across ranks, and collective instances (communicator id,
 * sequence number) collected from every member as the merged event stream goes by.  An instance
 * is handed to the metrics once every member's end is known (complete), or once every member
 * still missing can send nothing more (incomplete: a rank is missing or died).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int cs__comm_register(struct cs__run *run, struct cs__comm *c)
{
    if (run->ncomms == run->capcomms) {
        size_t cap = run->capcomms ? 2 * run->capcomms : 16;
        void *p = realloc(run->comms, cap * sizeof *run->comms);
        if (!p)
            return -1;
        run->comms = p;
        run->capcomms = cap;
    }
    uint64_t *v = cs__map_put(&run->comm_by_id, c->id, 0, NULL);
    if (!v)
        return -1;
    *v = (uint64_t)(uintptr_t)c;
    run->comms[run->ncomms++] = c;
    return 0;
}

const char *cs__comm_label(uint64_t id, char *buf, size_t n)
{
    if (id == CS_COMM_WORLD_ID)
        snprintf(buf, n, "world");
    else if (id >= CS_COMM_SELF_BASE && id < CS_COMM_SELF_BASE + (1ull << 32))
        snprintf(buf, n, "self");
    else
        snprintf(buf, n, "comm-%016" PRIx64, id);
    return buf;
}

int cs__comms_build(struct cs__run *run)
{
    for (int r = 0; r < run->world; r++) {
        struct cs__rank *rk = &run->ranks[r];
        if (!rk->present)
            continue;
        size_t n = cs_reader_stats(rk->rd)->comms;
        for (size_t i = 0; i < n; i++) {
            const struct cs_comm_record *rec = cs_reader_comm(rk->rd, i);
            uint64_t *mr = cs__map_put(&run->my_rank, rec->id, (uint64_t)r, NULL);
            if (!mr)
                return CS_ENOMEM;
            *mr = (uint64_t)rec->my_rank + 1;
            if (rec->kind == CS_COMM_NCCL) {
                if (cs__nccl_comm_add(run, r, rec))
                    return CS_ENOMEM;
                continue;
            }
            uint64_t *v = cs__map_get(&run->comm_by_id, rec->id, 0);
            if (v) {
                const struct cs__comm *c = (const void *)(uintptr_t)*v;
                if (c->size != rec->size ||
                    memcmp(c->members, rec->members, (size_t)c->size * sizeof(int32_t)) != 0) {
                    char b[40];
                    cs__problem(run, "rank %d disagrees on the members of communicator %s"
                                " (size %" PRId32 " vs %" PRId32 "); its first record is used", r,
                                cs__comm_label(rec->id, b, sizeof b), rec->size, c->size);
                }
                continue;
            }
            struct cs__comm *c = calloc(1, sizeof *c);
            if (!c)
                return CS_ENOMEM;
            *c = (struct cs__comm){.id = rec->id, .size = rec->size, .members = rec->members};
            if (cs__comm_register(run, c)) {
                free(c);
                return CS_ENOMEM;
            }
        }
    }
    return cs__nccl_comms_complete(run);
}

const struct cs__comm *cs__comm_get(struct cs__run *run, uint64_t id)
{
    uint64_t *v = cs__map_get(&run->comm_by_id, id, 0);
    if (v)
        return (const void *)(uintptr_t)*v;
    /* World and self need no record: their members follow from the ids. */
    struct cs__comm c = {.id = id};
    if (id == CS_COMM_WORLD_ID) {
        c.size = run->world;
        c.members = run->ident;
    } else if (id >= CS_COMM_SELF_BASE && id - CS_COMM_SELF_BASE < (uint64_t)run->world) {
        c.size = 1;
        c.members = &run->ident[id - CS_COMM_SELF_BASE];
    } else {
        return NULL;
    }
    struct cs__comm *p = malloc(sizeof *p);
    if (!p)
        return NULL;
    *p = c;
    if (cs__comm_register(run, p)) {
        free(p);
        return NULL;
    }
    return p;
}

/*
 * The communicator with id `id` and world rank `rank`'s rank in it (-1 not a member), through the
 * rank's small cache of recently used communicators: a rank's collectives cycle over a few
 * communicators, and both answers are fixed once found.  NULL: unknown communicator.
 */
static struct cs__comm *comm_of(struct cs__run *run, int rank, uint64_t id, int32_t *idx)
{
    struct cs__rank_comm *e = &run->ranks[rank].cc[(id ^ (id >> 32)) & 3];
    if (e->c && e->id == id) {
        *idx = e->idx;
        return e->c;
    }
    struct cs__comm *c = (struct cs__comm *)cs__comm_get(run, id);
    if (!c)
        return NULL;
    *idx = cs__comm_rank(run, c, rank);
    *e = (struct cs__rank_comm){.id = id, .c = c, .idx = *idx};
    return c;
}

static struct cs__inst *inst_new(struct cs__run *run, struct cs__comm *c, uint64_t comm,
                                 uint32_t seq, uint16_t op, size_t row)
{
    size_t n = (size_t)c->size;
    size_t bytes = sizeof(struct cs__inst) + n * (4 * sizeof(int64_t) + 1);
    /* Instances of one communicator all have its size, so closed ones are reused from its spare
     * list rather than freed: no allocation per instance once the open window is reached, and
     * memory stays at the most instances that were ever open at once. */
    struct cs__inst *in = c->spare;
    if (in) {
        c->spare = in->next;
        memset(in, 0, bytes);
    } else {
        in = calloc(1, bytes);
        if (!in)
            return NULL;
    }
    in->comm = comm;
    in->seq = seq;
    in->op = op;
    in->c = c;
    in->row = row;
    in->n = c->size;
    in->root = -1;
    in->members = c->members;
    in->arr = (int64_t *)(in + 1);
    in->end = in->arr + n;
    in->size = (uint64_t *)(in->end + n);
    in->wait = (int64_t *)(in->size + n);
    in->state = (unsigned char *)(in->wait + n);
    for (size_t i = 0; i < n; i++)
        in->dead_unended += run->ranks[c->members[i]].dead;
    return in;
}

static void inst_check(struct cs__run *run, struct cs__inst *in)
{
    int complete = in->ended == in->n;
    if (!complete && in->ended + in->dead_unended < in->n)
        return;
    cs__map_del(&run->open, in->comm, in->seq);
    if (in->c->recent[in->seq & 7] == in)
        in->c->recent[in->seq & 7] = NULL;
    cs__metrics_instance(run, in, complete);
    in->next = in->c->spare;
    in->c->spare = in;
}

/* A pending-request record, from the spare list when it has one.  NULL: out of memory. */
static struct cs__pending *pending_new(struct cs__run *run)
{
    struct cs__pending *p = run->spare_pending;
    if (p) {
        run->spare_pending = p->next;
        return p;
    }
    return malloc(sizeof *p);
}

static void pending_free(struct cs__run *run, struct cs__pending *p)
{
    if (!p)
        return;
    p->next = run->spare_pending;
    run->spare_pending = p;
}

static void coll_event(struct cs__run *run, int rank, const struct cs_event *ev,
                       enum cs_op_kind k, size_t row, int64_t tb, int64_t te)
{
    int32_t idx = -1;
    struct cs__comm *c = comm_of(run, rank, ev->comm, &idx);
    if (!c || idx < 0) {
        run->unmatched_events++;
        return;
    }
    int fresh;
    struct cs__inst *in = c->recent[ev->seq & 7];
    if (!in || in->seq != ev->seq) {
        uint64_t *v = cs__map_put(&run->open, ev->comm, ev->seq, &fresh);
        if (!v) {
            run->unmatched_events++;
            return;
        }
        if (fresh) {
            in = inst_new(run, c, ev->comm, ev->seq, ev->op, row);
            if (!in) {
                cs__map_del(&run->open, ev->comm, ev->seq);
                run->unmatched_events++;
                return;
            }
            *v = (uint64_t)(uintptr_t)in;
        }
        in = (void *)(uintptr_t)*v;
        c->recent[ev->seq & 7] = in;
    }
    /* A communicator of ncclCommInitAll (GPU records): this rank is several members, which take
     * its records of one instance in turn (which device is which member is not kept). */
    for (int32_t j = 0; c->multi && (in->state[idx] & 1) && j < in->n; j++)
        if (in->members[j] == rank && !(in->state[j] & 1))
            idx = j;
    if (in->state[idx] & 1) {
        /* The same rank twice in one instance: the sequence numbers are broken. */
        in->mixed = 1;
        run->unmatched_events++;
        return;
    }
    if (ev->op != in->op)
        in->mixed = 1;
    in->arr[idx] = tb;
    in->size[idx] = ev->bytes > ev->bytes_recv ? ev->bytes : ev->bytes_recv;
    in->state[idx] |= 1;
    in->arrived++;
    if (ev->flags & CS_EV_ROOT)
        in->root = idx;
    else if (in->root < 0 && ev->peer >= 0 && cs_op_info(ev->op)->pattern != CS_PAT_NXN)
        in->root = cs__comm_rank(run, c, ev->peer);
    if (k == CS_KIND_COLL) {
        in->end[idx] = te;
        in->state[idx] |= 2;
        in->ended++;
        inst_check(run, in);
        return;
    }
    struct cs__pending *p = pending_new(run);
    uint64_t *pv = p ? cs__map_put(&run->pending, (uint64_t)rank, ev->request, &fresh) : NULL;
    if (!pv) {
        pending_free(run, p);
        return;
    }
    if (!fresh) /* a reused request id replaces the forgotten one */
        pending_free(run, (struct cs__pending *)(uintptr_t)*pv);
    *p = (struct cs__pending){.op = ev->op, .is_coll = 1, .comm = ev->comm, .seq = ev->seq,
                              .idx = idx, .t_begin = in->arr[idx], .bytes = ev->bytes, .row = row};
    *pv = (uint64_t)(uintptr_t)p;
}

void cs__match_event(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k,
                     size_t row, int64_t tb, int64_t te)
{
    if (k == CS_KIND_COLL || k == CS_KIND_ICOLL) {
        coll_event(run, rank, ev, k, row, tb, te);
    } else if (k == CS_KIND_IP2P) {
        int fresh;
        struct cs__pending *p = pending_new(run);
        uint64_t *pv = p ? cs__map_put(&run->pending, (uint64_t)rank, ev->request, &fresh) : NULL;
        if (!pv) {
            pending_free(run, p);
            return;
        }
        if (!fresh)
            pending_free(run, (struct cs__pending *)(uintptr_t)*pv);
        uint64_t b = ev->op == CS_OP_IRECV ? ev->bytes_recv : ev->bytes;
        *p = (struct cs__pending){.op = ev->op, .t_begin = tb, .bytes = b, .row = row,
                                  .scope = cs__peer_scope(run, rank, ev->peer)};
        *pv = (uint64_t)(uintptr_t)p;
    } else if (k == CS_KIND_DONE) {
        uint64_t *pv = cs__map_get(&run->pending, (uint64_t)rank, ev->request);
        if (!pv)
            return;
        struct cs__pending *p = (void *)(uintptr_t)*pv;
        cs__map_del_at(&run->pending, pv);
        int64_t t_end = te;
        if (p->is_coll) {
            uint64_t *iv = cs__map_get(&run->open, p->comm, p->seq);
            struct cs__inst *in = iv ? (void *)(uintptr_t)*iv : NULL;
            if (in && !(in->state[p->idx] & 2)) {
                in->end[p->idx] = t_end;
                in->state[p->idx] |= 2;
                in->ended++;
                inst_check(run, in);
            }
        } else if (!(ev->flags & CS_EV_CANCELLED)) {
            cs__metrics_request_done(run, p, t_end);
        }
        pending_free(run, p);
    }
}

void cs__match_rank_done(struct cs__run *run, int rank)
{
    run->ranks[rank].dead = 1;
    /* Instances still waiting for this rank can now only end incomplete. */
    size_t n = 0;
    struct cs__inst **hit = malloc((run->open.n + 1) * sizeof *hit);
    if (!hit)
        return;
    for (size_t i = 0; i < run->open.cap; i++) {
        if (!run->open.slot[i].used)
            continue;
        struct cs__inst *in = (void *)(uintptr_t)run->open.slot[i].v;
        int32_t idx = cs__comm_rank(run, in->c, rank);
        if (idx >= 0 && !(in->state[idx] & 2)) {
            in->dead_unended++;
            hit[n++] = in;
        }
    }
    for (size_t i = 0; i < n; i++)
        inst_check(run, hit[i]);
    free(hit);
}

void cs__match_finish(struct cs__run *run)
{
    size_t n = 0;
    struct cs__inst **left = malloc((run->open.n + 1) * sizeof *left);
    if (left) {
        for (size_t i = 0; i < run->open.cap; i++)
            if (run->open.slot[i].used)
                left[n++] = (void *)(uintptr_t)run->open.slot[i].v;
        for (size_t i = 0; i < n; i++) {
            cs__map_del(&run->open, left[i]->comm, left[i]->seq);
            cs__metrics_instance(run, left[i], 0);
            left[i]->next = left[i]->c->spare;
            left[i]->c->spare = left[i];
        }
        free(left);
    }
    if (run->unmatched_events)
        cs__problem(run,
                    "%" PRIu64 " collective events could not be matched (communicator without a"
                    " record, rank not a member, or a sequence number seen twice)",
                    run->unmatched_events);
    if (run->incomplete)
        cs__problem(run, "%" PRIu64 " collective instances incomplete (a member's events are"
                    " missing); they are left out of waits and bandwidths", run->incomplete);
}
