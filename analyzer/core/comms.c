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
