/*
 * The report's per-communicator tables, bounded (report.h CS_REPORT_COMMS_LISTED; docs/metrics.md
 * "Communicators listed").  A program that makes a communicator per solve or per step (ScaLAPACK's
 * eigensolver test makes 6,000 in a second) would otherwise grow the per-op table, the topology's
 * op rows, the communicator names, the groups and the overlap table without bound.
 *
 * The last pass: its report hook runs after every other pass has read the full tables.  It lists
 * world, self, "unattributed" and the communicators of a hung collective, then the busiest others
 * by call time (then bytes, calls, label) up to CS_REPORT_COMMS_LISTED; each op's rows on the rest
 * become one row, CS_REPORT_COMMS_OTHER, with their calls, bytes and time summed.  Of the listed
 * communicators' rows, beyond CS_REPORT_OPS_LISTED the least busy (the kept communicators' last)
 * are folded the same way.  The rows before the fold stay in rep->ops_all (and the topology's in
 * nodes->ops_all) for --ops-csv.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bound.h"
#include "nodes.h"
#include "steps.h"

struct cload {
    const char *label;
    double time_s, bytes;
    uint64_t calls;
    int keep;   /* listed whatever its load */
    int listed; /* the outcome */
};

static int by_label(const void *x, const void *y)
{
    return strcmp(((const struct cload *)x)->label, ((const struct cload *)y)->label);
}

/* Kept first, then the busiest; the label settles ties, so the choice is the same every time. */
static int by_load(const void *x, const void *y)
{
    const struct cload *a = *(const struct cload *const *)x, *b = *(const struct cload *const *)y;
    if (a->keep != b->keep)
        return b->keep - a->keep;
    if (a->time_s != b->time_s)
        return a->time_s > b->time_s ? -1 : 1;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->calls != b->calls)
        return a->calls > b->calls ? -1 : 1;
    return strcmp(a->label, b->label);
}

static struct cload *find(struct cload *c, size_t n, const char *label)
{
    struct cload key = {.label = label};
    return bsearch(&key, c, n, sizeof *c, by_label);
}

/* The distinct labels of the op rows and the named communicators, sorted, with their load. */
static struct cload *loads(const struct cs_report *rep, size_t *n)
{
    struct cload *c = calloc(rep->nops + rep->ncomms + 1, sizeof *c);
    if (!c)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < rep->nops; i++)
        c[k++] = (struct cload){.label = rep->ops[i].comm,
                                .time_s = rep->ops[i].time_s,
                                .bytes = (double)rep->ops[i].bytes,
                                .calls = rep->ops[i].calls};
    for (size_t i = 0; i < rep->ncomms; i++)
        c[k++] = (struct cload){.label = rep->comms[i].comm};
    qsort(c, k, sizeof *c, by_label);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && strcmp(c[m - 1].label, c[i].label) == 0) {
            c[m - 1].time_s += c[i].time_s;
            c[m - 1].bytes += c[i].bytes;
            c[m - 1].calls += c[i].calls;
        } else {
            c[m++] = c[i];
        }
    }
    *n = m;
    return c;
}

/* Marks the listed labels (all unless `comms`: there are too many); returns 0, or -1 out of
 * memory. */
static int choose(const struct cs_report *rep, struct cload *c, size_t n, int comms)
{
    for (size_t i = 0; i < n; i++)
        c[i].keep = strcmp(c[i].label, "world") == 0 || strcmp(c[i].label, "self") == 0 ||
                    strcmp(c[i].label, "unattributed") == 0;
    for (size_t i = 0; rep->hang && i < rep->hang->ncolls; i++) {
        char b[40];
        struct cload *x = find(c, n, cs_comm_label(rep->hang->colls[i].comm, b, sizeof b));
        if (x)
            x->keep = 1;
    }
    struct cload **order = malloc((n + 1) * sizeof *order);
    if (!order)
        return -1;
    for (size_t i = 0; i < n; i++)
        order[i] = &c[i];
    qsort(order, n, sizeof *order, by_load);
    for (size_t i = 0; i < n && (!comms || i < CS_REPORT_COMMS_LISTED); i++)
        order[i]->listed = 1;
    free(order);
    return 0;
}

/* Two topology rows' word (scope, path) for a folded row: theirs when they agree, else "mixed". */
static void merge_word(char *dst, size_t n, const char *src, int first)
{
    if (first)
        snprintf(dst, n, "%s", src);
    else if (strcmp(dst, src) != 0)
        snprintf(dst, n, "mixed");
}

static int listed(struct cload *c, size_t n, const char *label)
{
    const struct cload *x = find(c, n, label);
    return !x || x->listed;
}

struct rowkey {
    size_t i;
    int keep;
    double time_s;
};

static int row_by_load(const void *x, const void *y)
{
    const struct rowkey *a = x, *b = y;
    if (a->keep != b->keep)
        return b->keep - a->keep;
    if (a->time_s != b->time_s)
        return a->time_s > b->time_s ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* [nops] whether each op row is listed: its communicator is, and it is among the
 * CS_REPORT_OPS_LISTED busiest such rows (the kept communicators' first).  NULL out of memory. */
static unsigned char *rows_listed(const struct cs_report *rep, struct cload *c, size_t n)
{
    unsigned char *in = calloc(rep->nops + 1, 1);
    struct rowkey *k = calloc(rep->nops + 1, sizeof *k);
    if (!in || !k) {
        free(in);
        free(k);
        return NULL;
    }
    size_t m = 0;
    for (size_t i = 0; i < rep->nops; i++) {
        const struct cload *x = find(c, n, rep->ops[i].comm);
        if (!x || x->listed)
            k[m++] = (struct rowkey){.i = i, .keep = x && x->keep, .time_s = rep->ops[i].time_s};
    }
    if (m > CS_REPORT_OPS_LISTED) {
        qsort(k, m, sizeof *k, row_by_load);
        m = CS_REPORT_OPS_LISTED;
    }
    for (size_t j = 0; j < m; j++)
        in[k[j].i] = 1;
    free(k);
    return in;
}

/* The op rows (and the topology's, parallel to them): the listed ones, and after each op's an
 * "others" row.  Returns -1 out of memory (nothing changed). */
static int fold_ops(struct cs_report *rep, struct cload *c, size_t n)
{
    struct cs_report_nodes *nd = rep->nodes;
    struct cs_report_op *ops = calloc(rep->nops + 1, sizeof *ops);
    struct cs_report_optopo *topo = nd && nd->ops ? calloc(rep->nops + 1, sizeof *topo) : NULL;
    unsigned char *in = rows_listed(rep, c, n);
    if (!ops || (nd && nd->ops && !topo) || !in) {
        free(ops);
        free(topo);
        free(in);
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < rep->nops;) {
        /* one op's rows (consecutive: metrics sorts them by op): the listed, then the others */
        struct cs_report_op x = {.algbw_gbps = NAN, .busbw_gbps = NAN};
        struct cs_report_optopo xt = {
            .capacity_gbps = NAN, .pct_of_capacity = NAN, .p2p_gbps = {NAN, NAN}};
        size_t j = i;
        for (; j < rep->nops && strcmp(rep->ops[j].op, rep->ops[i].op) == 0; j++) {
            const struct cs_report_op *o = &rep->ops[j];
            if (in[j]) {
                if (topo)
                    topo[k] = nd->ops[j];
                ops[k++] = *o;
                continue;
            }
            if (topo) {
                merge_word(xt.scope, sizeof xt.scope, nd->ops[j].scope, !x.folded_comms);
                merge_word(xt.path, sizeof xt.path, nd->ops[j].path, !x.folded_comms);
            }
            x.calls += o->calls;
            x.bytes += o->bytes;
            x.time_s += o->time_s;
            x.folded_comms++;
        }
        if (x.folded_comms) {
            snprintf(x.op, sizeof x.op, "%s", rep->ops[i].op);
            snprintf(x.comm, sizeof x.comm, CS_REPORT_COMMS_OTHER);
            if (topo)
                topo[k] = xt;
            ops[k++] = x;
        }
        i = j;
    }
    free(in);
    rep->ops_all = rep->ops;
    rep->nops_all = rep->nops;
    rep->ops = ops;
    rep->nops = k;
    if (topo) {
        nd->ops_all = nd->ops;
        nd->ops = topo;
    }
    return 0;
}

static int fold_comms(struct cs_report *rep, struct cload *c, size_t n)
{
    struct cs_report_comm *kept = calloc(rep->ncomms + 2, sizeof *kept);
    if (!kept)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < rep->ncomms; i++)
        if (listed(c, n, rep->comms[i].comm))
            kept[k++] = rep->comms[i];
    rep->ncomms_listed = k;
    struct cs_report_comm *o = &kept[k++];
    snprintf(o->comm, sizeof o->comm, CS_REPORT_COMMS_OTHER);
    snprintf(o->name, sizeof o->name, "the other %zu communicators (ops.csv lists each)",
             rep->ncomms - rep->ncomms_listed);
    rep->comms_all = rep->comms;
    rep->ncomms_all = rep->ncomms;
    rep->comms = kept;
    rep->ncomms = k;
    return 0;
}

/* The step model's groups and overlap rows of the listed communicators (the dimensions' totals
 * keep every communicator). */
static void fold_steps(struct cs_report_steps *s, struct cload *c, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < s->ngroups; i++) {
        if (listed(c, n, s->groups[i].comm))
            s->groups[k++] = s->groups[i];
        else
            free(s->groups[i].ranks);
    }
    s->ngroups = k;
    k = 0;
    for (size_t i = 0; i < s->noverlap; i++)
        if (listed(c, n, s->overlap[i].comm))
            s->overlap[k++] = s->overlap[i];
    s->noverlap = k;
}

void cs__bound_report(struct cs__run *run, struct cs_report *rep)
{
    rep->ncomms_listed = rep->ncomms;
    size_t n = 0;
    struct cload *c = loads(rep, &n);
    if (!c) {
        cs__problem(run, "out of memory bounding the per-communicator tables");
        return;
    }
    int comms = n > CS_REPORT_COMMS_LISTED;
    if (comms || rep->nops > CS_REPORT_OPS_LISTED) {
        if (choose(rep, c, n, comms) || fold_ops(rep, c, n) || (comms && fold_comms(rep, c, n)))
            cs__problem(run, "out of memory bounding the per-communicator tables");
        else if (comms && rep->steps)
            fold_steps(rep->steps, c, n);
    }
    free(c);
}

void cs__bound_report_free(struct cs_report *rep)
{
    free(rep->ops_all);
    free(rep->comms_all);
    rep->ops_all = NULL;
    rep->comms_all = NULL;
    rep->nops_all = rep->ncomms_all = rep->ncomms_listed = 0;
    if (rep->nodes) {
        free(rep->nodes->ops_all);
        rep->nodes->ops_all = NULL;
    }
}
