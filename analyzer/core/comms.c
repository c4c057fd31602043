/*
 * The communicator table: every communicator the ranks' records name, agreed across ranks
 * (cs__comms_build, before the passes begin) and looked up by id (cs__comm_get) by every pass.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int cs__comm_register(struct cs__run *run, struct cs__comm *c)
{
    if (cs__grow((void **)&run->comms, &run->capcomms, run->ncomms + 1, sizeof *run->comms))
        return -1;
    uint64_t *v = cs__map_put(&run->comm_by_id, c->id, 0, NULL);
    if (!v)
        return -1;
    *v = (uint64_t)(uintptr_t)c;
    run->comms[run->ncomms++] = c;
    return 0;
}

int cs__comms_build(struct cs__run *run)
{
    /* Ranks without a trace are dead from the start (rundir.c); instances count them. */
    run->ndead = 0;
    for (int r = 0; r < run->world; r++)
        run->ndead += run->ranks[r].dead != 0;
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
                    cs__problem(run,
                                "rank %d disagrees on the members of communicator %s"
                                " (size %" PRId32 " vs %" PRId32 "); its first record is used",
                                r, cs__comm_label(rec->id, b, sizeof b), rec->size, c->size);
                }
                continue;
            }
            struct cs__comm *c = calloc(1, sizeof *c);
            if (!c)
                return CS_ENOMEM;
            *c = (struct cs__comm){.id = rec->id,
                                   .size = rec->size,
                                   .members = rec->members,
                                   .parent = rec->parent,
                                   .op = rec->op,
                                   .color = rec->color};
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

/* "ranks 0,2,5", "ranks 0-7" (contiguous), or "16 ranks from 3" (n bytes of buf). */
static void ranks_words(const struct cs__comm *c, char *buf, size_t n)
{
    int contiguous = c->size > 1;
    for (int32_t i = 1; i < c->size && contiguous; i++)
        contiguous = c->members[i] == c->members[i - 1] + 1;
    if (c->size <= 0 || c->members[0] < 0)
        snprintf(buf, n, "%" PRId32 " ranks", c->size);
    else if (contiguous && c->size > 2)
        snprintf(buf, n, "ranks %" PRId32 "-%" PRId32, c->members[0], c->members[c->size - 1]);
    else if (c->size <= 6) {
        int k = snprintf(buf, n, "rank%s", c->size > 1 ? "s " : " ");
        for (int32_t i = 0; i < c->size && k > 0 && (size_t)k < n; i++)
            k += snprintf(buf + k, n - (size_t)k, "%s%" PRId32, i ? "," : "", c->members[i]);
    } else
        snprintf(buf, n, "%" PRId32 " ranks from %" PRId32, c->size, c->members[0]);
}

/* How communicator c was made from its parent, as one path element ("split colour 1"). */
static void step_words(struct cs__run *run, const struct cs__comm *c, char *buf, size_t n)
{
    switch (c->op) {
    case CS_OP_COMM_SPLIT:
        snprintf(buf, n, "split colour %" PRId32, c->color);
        break;
    case CS_OP_COMM_SPLIT_TYPE:
        snprintf(buf, n, "split %s", c->color == 0 ? "by shared memory" : "by type");
        break;
    case CS_OP_COMM_DUP: {
        /* #k: the k-th dup of the same parent with the same members (in id order) */
        int k = 1;
        for (size_t i = 0; i < run->ncomms; i++) {
            const struct cs__comm *o = run->comms[i];
            k += o->op == CS_OP_COMM_DUP && o->parent == c->parent && o->id < c->id &&
                 o->size == c->size && !o->nccl &&
                 memcmp(o->members, c->members, (size_t)c->size * sizeof *c->members) == 0;
        }
        snprintf(buf, n, "dup #%d", k);
        break;
    }
    case CS_OP_COMM_CREATE:
        snprintf(buf, n, "create");
        break;
    default:
        snprintf(buf, n, "%s", c->op ? cs_op_name(c->op) : "?");
        break;
    }
}

/* The path of communicator id from world ("world / split colour 0 / dup #2"), at most 4 steps
 * (older ones: "..."); returns the length written. */
static int path_words(struct cs__run *run, uint64_t id, char *buf, size_t n, int depth)
{
    const struct cs__comm *c = cs__comm_get(run, id);
    if (id == CS_COMM_WORLD_ID || !c || c->nccl || !c->parent || depth == 4) {
        char b[40];
        return snprintf(buf, n, "%s",
                        id == CS_COMM_WORLD_ID ? "world"
                        : depth == 4           ? "..."
                                               : cs__comm_label(id, b, sizeof b));
    }
    int k = path_words(run, c->parent, buf, n, depth + 1);
    if (k < 0 || (size_t)k >= n)
        return k;
    char w[48];
    step_words(run, c, w, sizeof w);
    return k + snprintf(buf + k, n - (size_t)k, " / %s", w);
}

const char *cs__comm_name(struct cs__run *run, uint64_t id, char *buf, size_t n)
{
    if (id == CS_COMM_WORLD_ID ||
        (id >= CS_COMM_SELF_BASE && id < CS_COMM_SELF_BASE + (1ull << 32)))
        return cs__comm_label(id, buf, n);
    const struct cs__comm *c = cs__comm_get(run, id);
    if (!c)
        return cs__comm_label(id, buf, n);
    char who[64];
    ranks_words(c, who, sizeof who);
    if (c->nccl) {
        snprintf(buf, n, "NCCL comm of %s", who);
        return buf;
    }
    if (!c->parent)
        return cs__comm_label(id, buf, n);
    int k = path_words(run, id, buf, n, 0);
    if (k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, ": %s", who);
    return buf;
}
