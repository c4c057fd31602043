/*
 * The representative step's GPU lanes (views.h, struct cs_report_tl_row): for a shown rank with a
 * GPU timeline, its compute kernels and, per communicator, its NCCL kernels split into the parts
 * a compute kernel overlapped and the exposed rest, all clipped to the rank's step window as the
 * step budget cuts them (steps_gpu.c: the GPU side's steps begin and end at the host's step
 * boundaries).  The row's numbers use the budget's definitions (docs/metrics.md, "Time budget per
 * step"): communication = union of the NCCL kernels, overlapped = its part under the union of the
 * compute kernels, exposed = the rest, compute = union of the compute kernels, idle = neither.
 *
 * One more read of the rank's stream (the reader rewinds): GPU records arrive in start order up
 * to the disorder of one CUPTI buffer, so the read stops once REORDER records beginning at or
 * after the step's end have been seen (the budget's reorder heap has the same depth).  Memory:
 * the records of one step of one rank.
 */
#include <stdlib.h>
#include <string.h>

#include "steps_internal.h"

#define REORDER 1024
#define MAX_RECORDS (1u << 22) /* records kept for one step of one rank */

struct iv {
    int64_t b, e;
    int lane; /* 0 compute, 1 + c communicator c */
};

struct ivs {
    struct iv *v;
    size_t n, cap;
};

static int ivs_push(struct ivs *s, int64_t b, int64_t e, int lane)
{
    if (cs__grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v))
        return -1;
    s->v[s->n++] = (struct iv){b, e, lane};
    return 0;
}

static int iv_cmp(const void *x, const void *y)
{
    const struct iv *a = x, *b = y;
    return (a->b > b->b) - (a->b < b->b);
}

/* The union of the (start-sorted) records on lane (-1: every NCCL lane) as disjoint pieces. */
static int union_of(const struct ivs *in, int lane, struct ivs *out)
{
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        const struct iv *x = &in->v[i];
        if (lane >= 0 ? x->lane != lane : x->lane == 0)
            continue;
        if (out->n && x->b <= out->v[out->n - 1].e) {
            if (x->e > out->v[out->n - 1].e)
                out->v[out->n - 1].e = x->e;
        } else if (ivs_push(out, x->b, x->e, lane)) {
            return -1;
        }
    }
    return 0;
}

static int64_t measure(const struct ivs *s)
{
    int64_t t = 0;
    for (size_t i = 0; i < s->n; i++)
        t += s->v[i].e - s->v[i].b;
    return t;
}

/* Pieces of a (disjoint, sorted) under c (inside 1) or not under it (inside 0), through emit. */
typedef int (*emit_fn)(void *ctx, int64_t b, int64_t e, int inside);
static int split(const struct ivs *a, const struct ivs *c, emit_fn emit, void *ctx)
{
    size_t j = 0;
    for (size_t i = 0; i < a->n; i++) {
        int64_t x = a->v[i].b, e = a->v[i].e;
        while (j < c->n && c->v[j].e <= x)
            j++;
        for (size_t k = j; x < e; k++) {
            if (k >= c->n || c->v[k].b >= e) {
                if (emit(ctx, x, e, 0))
                    return -1;
                break;
            }
            if (c->v[k].b > x) {
                if (emit(ctx, x, c->v[k].b, 0))
                    return -1;
                x = c->v[k].b;
            }
            int64_t y = c->v[k].e < e ? c->v[k].e : e;
            if (emit(ctx, x, y, 1))
                return -1;
            x = y;
        }
    }
    return 0;
}

struct emit_ctx {
    struct cs_report_tl_row *row;
    size_t cap;
    int64_t begin;
    double merge_s;
    int lane;
    int64_t inside; /* total emitted with inside = 1 */
};

static int gseg_add(void *p, int64_t b, int64_t e, int inside)
{
    struct emit_ctx *x = p;
    struct cs_report_tl_row *r = x->row;
    if (inside)
        x->inside += e - b;
    unsigned char kind = x->lane == 0 ? CS_TL_G_COMPUTE
                         : inside     ? CS_TL_G_OVERLAPPED
                                      : CS_TL_G_EXPOSED;
    double t0 = (double)(b - x->begin) / 1e9, t1 = (double)(e - x->begin) / 1e9;
    /* Close pieces of one kind on one lane are drawn as one (the numbers stay exact). */
    for (size_t i = r->ngseg; i-- > 0 && r->ngseg - i <= 2;) {
        struct cs_report_tl_gseg *l = &r->gseg[i];
        if (l->lane != x->lane)
            break;
        if (l->kind == kind && t0 - l->t1_s < x->merge_s && t0 >= l->t1_s) {
            l->t1_s = t1;
            return 0;
        }
    }
    if (r->ngseg == CS_VIEW_TL_SEGS) {
        r->gtruncated = 1;
        return 0;
    }
    if (cs__grow((void **)&r->gseg, &x->cap, r->ngseg + 1, sizeof *r->gseg))
        return -1;
    r->gseg[r->ngseg++] = (struct cs_report_tl_gseg){t0, t1, kind, (unsigned char)x->lane};
    return 0;
}

/* The lane of communicator id on the row (added when new; the last lane takes the rest). */
static int lane_of(struct cs_report_tl_row *row, uint64_t *ids, uint64_t id)
{
    for (size_t i = 0; i < row->nlanes; i++)
        if (ids[i] == id)
            return 1 + (int)i;
    if (row->nlanes == CS_VIEW_TL_LANES) {
        snprintf(row->lane_comm[CS_VIEW_TL_LANES - 1], sizeof *row->lane_comm, "other");
        return CS_VIEW_TL_LANES;
    }
    ids[row->nlanes] = id;
    cs__comm_label(id, row->lane_comm[row->nlanes], sizeof *row->lane_comm);
    return 1 + (int)row->nlanes++;
}

int cs__vsteps_gpu_row(struct cs__run *run, int r, int64_t begin, int64_t end, double merge_s,
                       struct cs_report_tl_row *row)
{
    const struct cs__steps *S = run->steps;
    if (!S || !S->r[r].gpu || end <= begin)
        return 0;
    struct cs__rank *rk = &run->ranks[r];
    struct cs_reader *rd = rk->rd;
    const struct cs_event *ev;
    struct ivs all = {0}, cu = {0}, nu = {0}, lu = {0};
    uint64_t ids[CS_VIEW_TL_LANES] = {0}, after = 0;
    int rc = -1;
    if (!(row->lane_comm = calloc(CS_VIEW_TL_LANES, sizeof *row->lane_comm)))
        return -1;
    row->gpu = 1;
    cs_reader_rewind(rd);
    while ((ev = cs_reader_next(rd)) && after < REORDER) {
        if (ev->op != CS_OP_GPU_KERNEL && ev->op != CS_OP_GPU_NCCL)
            continue;
        int64_t tb = cs__clock_map(&rk->clk, ev->t_begin), te = cs__clock_map(&rk->clk, ev->t_end);
        if (tb >= end)
            after++;
        if (tb < begin)
            tb = begin;
        if (te > end)
            te = end;
        if (te <= tb)
            continue;
        if (all.n == MAX_RECORDS) {
            row->gtruncated = 1;
            break;
        }
        int lane = ev->op == CS_OP_GPU_KERNEL ? 0 : lane_of(row, ids, ev->comm);
        if (ivs_push(&all, tb, te, lane))
            goto out;
    }
    cs_reader_rewind(rd);
    if (all.n)
        qsort(all.v, all.n, sizeof *all.v, iv_cmp);
    if (union_of(&all, 0, &cu) || union_of(&all, -1, &nu))
        goto out;
    struct emit_ctx x = {.row = row, .begin = begin, .merge_s = merge_s};
    /* Lane 0: the compute union; split against nothing, every piece "outside". */
    struct ivs none = {0};
    if (split(&cu, &none, gseg_add, &x))
        goto out;
    for (size_t c = 0; c < row->nlanes; c++) {
        x.lane = 1 + (int)c;
        if (union_of(&all, x.lane, &lu) || split(&lu, &cu, gseg_add, &x))
            goto out;
    }
    /* The numbers: over the union of all NCCL kernels (not the lanes' sum). */
    int64_t C = measure(&cu), N = measure(&nu), O = 0;
    size_t j = 0;
    for (size_t i = 0; i < nu.n; i++)
        for (size_t k = j; k < cu.n && cu.v[k].b < nu.v[i].e; k++) {
            int64_t b = cu.v[k].b > nu.v[i].b ? cu.v[k].b : nu.v[i].b;
            int64_t e = cu.v[k].e < nu.v[i].e ? cu.v[k].e : nu.v[i].e;
            if (e > b)
                O += e - b;
            if (cu.v[k].e <= nu.v[i].e)
                j = k + 1;
        }
    row->gpu_compute_s = (double)C / 1e9;
    row->gpu_comm_s = (double)N / 1e9;
    row->gpu_overlapped_s = (double)O / 1e9;
    row->gpu_exposed_s = (double)(N - O) / 1e9;
    row->gpu_idle_s = (double)((end - begin) - (C + N - O)) / 1e9;
    rc = 0;
out:
    cs_reader_rewind(rd);
    free(all.v);
    free(cu.v);
    free(nu.v);
    free(lu.v);
    return rc;
}
