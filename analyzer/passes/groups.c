/*
 * Parallelism groups: communicators are put in classes (the communicators one MPI_Comm_split,
 * dup or create call made across the ranks: same parent, creating op, creation counter and size),
 * and each class gets a role from its membership and its traffic per step.  The rules and the
 * confidence (the share of the role's criteria that hold) are in docs/metrics.md.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "steps.h"
#include "steps_internal.h"

const char *const cs__dim_names[CS_DIM_N] = {[CS_DIM_DP] = "dp",
                                             [CS_DIM_TP] = "tp",
                                             [CS_DIM_PP] = "pp",
                                             [CS_DIM_EP] = "ep",
                                             [CS_DIM_OTHER] = "other"};

struct cs__scomm *cs__groups_scomm(struct cs__steps *S, int i)
{
    return &S->groups.comms[i];
}

static int int_cmp(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* 1 contiguous, k > 1 evenly strided, 0 otherwise (or size 1). */
static int stride_of(const int32_t *members, int32_t n)
{
    if (n < 2)
        return 0;
    int32_t *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return 0;
    memcpy(s, members, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, int_cmp);
    int d = s[1] - s[0];
    for (int32_t i = 2; i < n && d > 0; i++)
        if (s[i] - s[i - 1] != d)
            d = 0;
    free(s);
    return d > 0 ? d : 0;
}

static int same_host(const struct cs__run *run, const int32_t *members, int32_t n)
{
    const char *h0 = NULL;
    for (int32_t i = 0; i < n; i++) {
        if (!cs__member_present(run, members[i]))
            continue;
        const struct cs__rank *rk = &run->ranks[members[i]];
        if (!h0)
            h0 = rk->h->host;
        else if (strcmp(h0, rk->h->host) != 0)
            return 0;
    }
    return 1;
}

static int class_of(struct cs__steps *S, uint64_t parent, uint32_t ctr, uint16_t op, int32_t size)
{
    for (size_t c = 0; c < S->groups.nclasses; c++) {
        struct cs__cclass *k = &S->groups.classes[c];
        if (k->parent == parent && k->ctr == ctr && k->op == op && k->size == size)
            return (int)c;
    }
    if (S->groups.nclasses == S->groups.capclasses) {
        size_t cap = S->groups.capclasses ? 2 * S->groups.capclasses : 8;
        void *p = realloc(S->groups.classes, cap * sizeof *S->groups.classes);
        if (!p)
            return -1;
        S->groups.classes = p;
        S->groups.capclasses = cap;
    }
    S->groups.classes[S->groups.nclasses] = (struct cs__cclass){.parent = parent,
                                                                .ctr = ctr,
                                                                .op = op,
                                                                .size = size,
                                                                .one_host = 1,
                                                                .stride = -1,
                                                                .role = CS_DIM_OTHER};
    return (int)S->groups.nclasses++;
}

static int add_comm(struct cs__run *run, struct cs__steps *S, uint64_t id, int cls, int32_t size,
                    const int32_t *members)
{
    if (S->groups.ncomms == S->groups.capcomms) {
        size_t cap = S->groups.capcomms ? 2 * S->groups.capcomms : 16;
        void *p = realloc(S->groups.comms, cap * sizeof *S->groups.comms);
        if (!p)
            return -1;
        S->groups.comms = p;
        S->groups.capcomms = cap;
    }
    uint64_t *v = cs__map_put(&S->groups.comm_idx, id, 0, NULL);
    if (!v)
        return -1;
    *v = S->groups.ncomms + 1;
    struct cs__cclass *k = &S->groups.classes[cls];
    /* Roles are final once cs__groups_infer ran (comms seen later take their class's role);
     * the ones made before it get theirs there. */
    S->groups.comms[S->groups.ncomms] =
        (struct cs__scomm){.id = id,
                           .cls = cls,
                           .dim = k->role < CS_DIM_N ? k->role : CS_DIM_OTHER,
                           .size = size,
                           .members = members};
    k->ncomms++;
    int st = stride_of(members, size);
    k->stride = k->stride < 0 ? st : (k->stride == st ? st : 0);
    k->one_host &= same_host(run, members, size);
    k->world |= size == run->world && size > 1;
    return (int)S->groups.ncomms++;
}

int cs__groups_comm(struct cs__run *run, struct cs__steps *S, uint64_t id)
{
    struct cs__ccache *e = &S->groups.comm_cache[cs__ccache_slot(id)];
    if (e->idx1 && e->id == id)
        return e->idx1 - 1;
    uint64_t *v = cs__map_get(&S->groups.comm_idx, id, 0);
    if (v) {
        e->id = id;
        e->idx1 = (int)*v;
        return (int)(*v - 1);
    }
    /* Not in any record: world or self (their members follow from the id), else unknown. */
    const struct cs__comm *c = cs__comm_get(run, id);
    if (!c)
        return -1;
    int cls = id == CS_COMM_WORLD_ID ? class_of(S, 0, 0, 0, c->size)
                                     : class_of(S, 0, UINT32_MAX, 0, c->size);
    if (cls < 0)
        return -1;
    return add_comm(run, S, id, cls, c->size, c->members);
}

int cs__groups_build(struct cs__run *run, struct cs__steps *S)
{
    for (size_t i = 0; i < run->ncomms; i++) {
        const struct cs__comm *c = run->comms[i];
        if (cs__map_get(&S->groups.comm_idx, c->id, 0))
            continue;
        /* The record of the lowest member says how the communicator was made, and the how
         * many-th communicator of that member it is (the same on every rank of a symmetric
         * program, unlike the id's counter, which counts only the ranks that are rank 0). */
        const struct cs_comm_record *rec = NULL;
        uint32_t nth = 0;
        for (int32_t m = 0; m < c->size && !rec; m++) {
            if (!cs__member_present(run, c->members[m]))
                continue;
            const struct cs__rank *rk = &run->ranks[c->members[m]];
            size_t n = cs_reader_stats(rk->rd)->comms;
            for (size_t j = 0; j < n && !rec; j++)
                if (cs_reader_comm(rk->rd, j)->id == c->id)
                    rec = cs_reader_comm(rk->rd, j);
            for (size_t j = 0; j < n && rec; j++) {
                const struct cs_comm_record *o = cs_reader_comm(rk->rd, j);
                nth +=
                    o != rec && o->op != 0 &&
                    (o->t_created < rec->t_created || (o->t_created == rec->t_created && o < rec));
            }
        }
        int cls;
        if (c->id == CS_COMM_WORLD_ID)
            cls = class_of(S, 0, 0, 0, c->size);
        else if (rec)
            cls = class_of(S, rec->parent, nth, rec->op, c->size);
        else
            cls = class_of(S, 0, UINT32_MAX, 0, c->size);
        if (cls < 0 || add_comm(run, S, c->id, cls, c->size, c->members) < 0)
            return CS_ENOMEM;
    }
    return 0;
}

/* Per-step collective calls of class k (NaN without steps). */
static double per_step(const struct cs__cclass *k)
{
    return k->steps > 0 ? (double)(k->coll + k->p2p) / k->steps : (double)NAN;
}

/* The class's role and its words: label, or NULL for the role's own ("data parallel", ...). */
static void say(struct cs__cclass *k, enum cs__dim role, const char *label, int ok, int of,
                const char *why)
{
    static const char *const words[CS_DIM_N] = {[CS_DIM_DP] = "data parallel",
                                                [CS_DIM_TP] = "tensor parallel",
                                                [CS_DIM_PP] = "pipeline stages",
                                                [CS_DIM_EP] = "expert parallel",
                                                [CS_DIM_OTHER] = "other"};
    k->label = label ? label : words[role < CS_DIM_N ? role : CS_DIM_OTHER];
    k->role = role;
    k->confidence = of > 0 ? (double)ok / of : 0;
    snprintf(k->why, sizeof k->why, "%s", why);
}

void cs__groups_infer(struct cs__run *run, struct cs__steps *S)
{
    int hosts_differ = 0;
    const char *h0 = NULL;
    for (int r = 0; r < run->world; r++) {
        if (!run->ranks[r].present)
            continue;
        if (!h0)
            h0 = run->ranks[r].h->host;
        else if (strcmp(h0, run->ranks[r].h->host) != 0)
            hosts_differ = 1;
    }
    /* Reduction classes (more than half the calls are reductions, at least one per step). */
    int nred = 0;
    double min_cps = INFINITY, max_cps = 0;
    for (size_t c = 0; c < S->groups.nclasses; c++) {
        struct cs__cclass *k = &S->groups.classes[c];
        k->role = CS_DIM_OTHER;
        k->confidence = 0;
        if (k->size < 2) {
            say(k, CS_DIM_OTHER, "one member", 1, 1, "one member: no communication between ranks");
            continue;
        }
        if (!k->observed || !k->calls) {
            say(k, CS_DIM_OTHER, "no traffic", 0, 1, "no traffic seen on a traced member");
            continue;
        }
        double cps = per_step(k);
        if (k->a2a * 2 > k->calls) {
            say(k, CS_DIM_EP, NULL, (int)(100 * k->a2a / k->calls), 100,
                "all-to-all is the majority of its calls (expert parallelism)");
            continue;
        }
        if (k->p2p * 2 > k->calls) {
            /* Pipeline stages only with their shape: steps, and the observed member (the
             * lowest, a first stage) sends to and receives from one neighbour.  A member with
             * several partners exchanges with its neighbours (a halo, a domain decomposition);
             * without steps, two ranks that talk are a point-to-point pair. */
            if (isfinite(cps) && k->npeers == 1) {
                say(k, CS_DIM_PP, NULL, (int)(100 * k->p2p / k->calls), 100,
                    "send/receive with one neighbour, repeated every step, is the majority of "
                    "its calls (pipeline stages)");
            } else if (k->npeers >= 2) {
                say(k, CS_DIM_OTHER, "neighbour exchange", 1, 1,
                    "send/receive with several neighbours is the majority of its calls "
                    "(neighbour exchange)");
            } else {
                say(k, CS_DIM_OTHER, "point-to-point", 1, 1,
                    isfinite(cps) ? "send/receive is the majority of its calls (point-to-point)"
                                  : "send/receive is the majority of its calls, and no steps to "
                                    "tell pipeline stages (point-to-point)");
            }
            continue;
        }
        /* A reduction dimension needs evidence of training steps: reductions every step, and
         * where the steps come from the call pattern, a reduction of the same size the same
         * number of times in every step (markers and NVTX step ranges are the program's word). */
        int evidence = S->detect.mode != 2 || k->observed != 1 || k->red_locked;
        if (k->red * 2 > k->calls && isfinite(cps) && cps >= 1 && !evidence) {
            say(k, CS_DIM_OTHER, "reduction group", 1, 1,
                "reductions, but none of the same size in every step (reduction group)");
            continue;
        }
        if (k->red * 2 > k->calls && isfinite(cps) && cps >= 1) {
            nred++;
            if (cps < min_cps)
                min_cps = cps;
            if (cps > max_cps)
                max_cps = cps;
            k->role = CS_DIM_N; /* decided below */
            continue;
        }
        if (k->red * 2 > k->calls) {
            say(k, CS_DIM_OTHER, "reduction group", 1, 1,
                isfinite(cps) ? "reductions, but fewer than one per step (reduction group)"
                              : "reductions, but no steps to measure them against (reduction "
                                "group)");
        } else {
            say(k, CS_DIM_OTHER, "collectives", 1, 1,
                "no pattern (reductions, all-to-all, send/receive) is the majority of its calls");
        }
    }
    for (size_t c = 0; c < S->groups.nclasses; c++) {
        struct cs__cclass *k = &S->groups.classes[c];
        if (k->role != CS_DIM_N)
            continue;
        double cps = per_step(k);
        if (nred == 1) {
            /* One reduction dimension: data parallelism, unless its groups are small contiguous
             * groups inside a node beside other ranks (then the program is tensor-parallel only,
             * which the data cannot tell apart from DP over a subset: say so by the confidence). */
            int ok = 2, of = 3; /* reductions dominate; at least one per step */
            ok += k->world || k->stride > 1;
            say(k, CS_DIM_DP, NULL, ok, of,
                k->world ? "the only reduction dimension, over all ranks: data parallel"
                         : "the only reduction dimension: read as data parallel");
            continue;
        }
        /* Several reduction dimensions: TP = contiguous groups (inside a node) with the most
         * collectives per step; DP = strided groups with the fewest (one gradient burst). */
        int contiguous = k->stride == 1 && !k->world;
        int tp = contiguous + (cps > min_cps) + (hosts_differ && k->one_host);
        int tp_of = 2 + hosts_differ;
        int dp = (k->stride > 1 || k->world) + (cps <= min_cps) + (hosts_differ && !k->one_host);
        int dp_of = 2 + hosts_differ;
        char why[160];
        if (tp > dp) {
            snprintf(why, sizeof why,
                     "%s ranks, %.3g collectives per step (most of the reduction dimensions)%s",
                     contiguous ? "contiguous" : "non-contiguous", cps,
                     hosts_differ ? (k->one_host ? ", inside one host" : ", across hosts") : "");
            say(k, CS_DIM_TP, NULL, tp, tp_of, why);
        } else {
            snprintf(why, sizeof why,
                     "%s ranks, %.3g collectives per step (fewest of the reduction dimensions)%s",
                     k->stride > 1 ? "strided"
                     : k->world    ? "all"
                                   : "irregular",
                     cps,
                     hosts_differ ? (k->one_host ? ", inside one host" : ", across hosts") : "");
            say(k, CS_DIM_DP, NULL, dp, dp_of, why);
        }
    }
    (void)max_cps;
    for (size_t i = 0; i < S->groups.ncomms; i++) {
        enum cs__dim d = S->groups.classes[S->groups.comms[i].cls].role;
        S->groups.comms[i].dim = d < CS_DIM_N ? d : CS_DIM_OTHER;
    }
}

void cs__groups_free(struct cs__steps *S)
{
    free(S->groups.classes);
    free(S->groups.comms);
    cs__map_free(&S->groups.comm_idx);
    S->groups.classes = NULL;
    S->groups.comms = NULL;
    S->groups.nclasses = S->groups.capclasses = S->groups.ncomms = S->groups.capcomms = 0;
}
