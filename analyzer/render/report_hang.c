/*
 * The hang diagnosis in words (hang.h: cs__hang_sentences) and its text section.  Formatting
 * only: the numbers and the choice of instances, waits and cycles come from passes/hang.c.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hang.h"
#include "json.h"

/* A list of world ranks "0, 2 and 3" (at most 8 named, then "and N more"). */
static void ranks_list(const int32_t *r, int32_t n, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < n && k + 32 < cap; i++) {
        if (i == 8) {
            k += (size_t)snprintf(buf + k, cap - k, " and %d more", (int)(n - i));
            break;
        }
        const char *sep = i == 0 ? "" : (i == n - 1 ? " and " : ", ");
        k += (size_t)snprintf(buf + k, cap - k, "%s%d", sep, (int)r[i]);
    }
}

/* " (every rank of host h2 in it: ...)" when whole hosts are missing, else "". */
static void hosts_words(const struct cs_report_hang_coll *c, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!c->nmissing_hosts)
        return;
    size_t k =
        (size_t)snprintf(buf, cap, " (every rank of host%s ", c->nmissing_hosts > 1 ? "s" : "");
    for (int32_t i = 0; i < c->nmissing_hosts && i < 4 && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%.64s",
                              i == 0 ? "" : (i == c->nmissing_hosts - 1 || i == 3 ? " and " : ", "),
                              c->missing_hosts[i]);
    if (c->nmissing_hosts > 4 && k < cap)
        k += (size_t)snprintf(buf + k, cap - k, " and %d more", (int)c->nmissing_hosts - 4);
    if (k < cap)
        snprintf(buf + k, cap - k, " in it: the node%s stopped or lost %s network)",
                 c->nmissing_hosts > 1 ? "s" : "", c->nmissing_hosts > 1 ? "their" : "its");
}

static const struct cs_report_hang_rank *rank_of(const struct cs_report_hang *g, int r)
{
    for (size_t i = 0; i < g->nranks; i++)
        if (g->ranks[i].rank == r)
            return &g->ranks[i];
    return NULL;
}

static const char *signame(int sig)
{
    switch (sig) {
    case 1:
        return "SIGHUP";
    case 2:
        return "SIGINT";
    case 3:
        return "SIGQUIT";
    case 4:
        return "SIGILL";
    case 6:
        return "SIGABRT";
    case 7:
        return "SIGBUS";
    case 8:
        return "SIGFPE";
    case 11:
        return "SIGSEGV";
    case 15:
        return "SIGTERM";
    default:
        return "a signal";
    }
}

/* "MPI_Allreduce #3 on comm-..." / "MPI_Recv from rank 1 (tag 7) on world". */
static void call_words(const struct cs_report_hang_call *c, char *buf, size_t cap)
{
    char cl[48];
    cs__comm_label(c->comm, cl, sizeof cl);
    enum cs_op_kind k = cs_op_info(c->op)->kind;
    const char *name = cs_op_name(c->op);
    if (k == CS_KIND_COLL || k == CS_KIND_ICOLL)
        snprintf(buf, cap, "%s #%" PRIu32 " on %s", name, c->seq, cl);
    else if (k == CS_KIND_P2P && c->op == CS_OP_RECV)
        c->peer >= 0
            ? snprintf(buf, cap, "%s from rank %d (tag %d) on %s", name, (int)c->peer, (int)c->tag,
                       cl)
            : snprintf(buf, cap, "%s from any source (tag %d) on %s", name, (int)c->tag, cl);
    else if (k == CS_KIND_P2P)
        snprintf(buf, cap, "%s to rank %d (tag %d) on %s", name, (int)c->peer, (int)c->tag, cl);
    else if (k == CS_KIND_WAIT && c->comm)
        snprintf(buf, cap, "%s on a request with rank %d on %s", name, (int)c->peer, cl);
    else if (k == CS_KIND_WAIT)
        snprintf(buf, cap, "%s on %d requests", name, (int)c->tag);
    else
        snprintf(buf, cap, "%s", name);
}

/* What rank r does instead: "is in MPI_Barrier #0 on world since 1.2 s", "exited with status 0
 * at 1.3 s without MPI_Finalize", ... */
static void doing(const struct cs_report_hang *g, int r, char *buf, size_t cap)
{
    const struct cs_report_hang_rank *x = rank_of(g, r);
    char w[160] = "";
    if (!x) {
        snprintf(buf, cap, "finished (MPI_Finalize)");
        return;
    }
    size_t k = 0;
    if (x->in_call) {
        call_words(&x->call, w, sizeof w);
        double upto = isfinite(x->exit_s) ? x->exit_s : g->end_s;
        k += (size_t)snprintf(buf + k, cap - k,
                              "is in %s since %.3f s (%.3f s until its trace ends)", w, x->call.t_s,
                              upto - x->call.t_s);
    } else if (x->has_last) {
        call_words(&x->last, w, sizeof w);
        k += (size_t)snprintf(buf + k, cap - k, "is in no MPI call (last: %s, ended %.3f s)", w,
                              x->last.t_s);
    } else {
        k += (size_t)snprintf(buf + k, cap - k, "made no call");
    }
    if (k >= cap)
        return;
    switch (x->fate) {
    case CS_FATE_EXITED:
        snprintf(buf + k, cap - k, "; it exited with status %d at %.3f s without MPI_Finalize",
                 x->code, x->exit_s);
        break;
    case CS_FATE_SIGNALLED:
        snprintf(buf + k, cap - k, "; it received %s at %.3f s", signame(x->code), x->exit_s);
        break;
    case CS_FATE_VANISHED:
        snprintf(buf + k, cap - k, "; its process ended without warning");
        break;
    case CS_FATE_MISSING:
        snprintf(buf + k, cap - k, "; it left no trace");
        break;
    default:
        break;
    }
}

/* Whether every rank that entered collective i is missing from one listed before it: it is the
 * consequence of that one (rank 1 skipped the all-reduce the others wait in, and waits in a
 * barrier they never reach), named there. */
static int explained(const struct cs_report_hang *g, size_t i)
{
    const struct cs_report_hang_coll *c = &g->colls[i];
    for (size_t j = 0; j < i; j++) {
        const struct cs_report_hang_coll *p = &g->colls[j];
        int all = c->nentered > 0;
        for (int32_t a = 0; a < c->nentered && all; a++) {
            int found = 0;
            for (int32_t b = 0; b < p->nmissing && !found; b++)
                found = p->missing[b] == c->entered[a];
            all = found;
        }
        if (all)
            return 1;
    }
    return 0;
}

/* A row of the rank tables: the call in flight, else the last call, into w ("-" none); returns
 * its time (NaN none). */
static double row_call(const struct cs_report_hang_rank *x, char *w, size_t n)
{
    snprintf(w, n, "-");
    if (x->in_call)
        call_words(&x->call, w, n);
    else if (x->has_last)
        call_words(&x->last, w, n);
    return x->in_call ? x->call.t_s : x->has_last ? x->last.t_s : NAN;
}

/*
 * Ranks that crashed (crashed: a fault signal) or ended without warning (!crashed), as sentences
 * from out[k].  A crash leads the verdict: nothing but the rank itself raises SIGSEGV.  A rank gone
 * without warning may have been killed first, or by the launcher after the others (Open MPI and
 * MPICH end jobs with SIGKILL too), so it follows the sentences that say where everyone stood.
 */
static size_t gone(const struct cs_report_hang *g, int crashed, char *out, size_t n, size_t k,
                   size_t max)
{
    for (size_t i = 0; i < g->nranks && k < max; i++) {
        const struct cs_report_hang_rank *x = &g->ranks[i];
        int fault = x->fate == CS_FATE_SIGNALLED && x->code != 15 && x->code != 2 && x->code != 1;
        if (crashed ? !fault : x->fate != CS_FATE_VANISHED)
            continue;
        char *s = out + n * k++;
        char w[160];
        double t = row_call(x, w, sizeof w);
        if (fault)
            snprintf(s, n, "Rank %d on %s crashed (%s at %.3f s) %s %s.", x->rank, x->host,
                     signame(x->code), x->exit_s, x->in_call ? "inside" : "after", w);
        else
            snprintf(s, n,
                     "Rank %d on %s ended without warning (SIGKILL, the OOM killer, a lost node, "
                     "or an abort that skips exit handlers) %s %s (%s %.3f s).",
                     x->rank, x->host, x->in_call ? "inside" : "after", w,
                     x->in_call ? "entered" : "ended", t);
    }
    return k;
}

static const char *coll_name(const struct cs_report_hang_coll *c)
{
    return c->op ? cs_op_name(c->op) : "an NCCL collective";
}

/* What the GPU records say of the kernels of an NCCL collective its entered members enqueued. */
static void kernel_words(const struct cs_report_hang_coll *c, char *w, size_t n)
{
    if (!c->kernels_open)
        snprintf(w, n, "their GPU work was not timed");
    else if (c->kernels_open == c->nentered)
        snprintf(w, n, "no completion of its kernel was recorded on any of them");
    else
        snprintf(w, n,
                 "no completion of its kernel was recorded on %d of them (the others' GPU "
                 "work was not timed)",
                 (int)c->kernels_open);
}

/* An NCCL collective the job stopped at: who enqueued it, its kernels, who never enqueued it. */
static void nccl_sentence(const struct cs_report_hang *g, const struct cs_report_hang_coll *c,
                          const char *cl, char *s, size_t n)
{
    char kw[160], who[160];
    kernel_words(c, kw, sizeof kw);
    if (!c->nmissing) {
        snprintf(s, n,
                 "Hung in %s #%" PRIu32 " on %s: all %d ranks enqueued it (by %.3f s) and %s: the "
                 "GPUs wait in it, or in work queued before it.",
                 coll_name(c), c->seq, cl, (int)c->size,
                 c->nentered ? c->since_s[c->nentered - 1] : NAN, kw);
        return;
    }
    char hw[400];
    hosts_words(c, hw, sizeof hw);
    ranks_list(c->missing, c->nmissing, who, sizeof who);
    size_t m = (size_t)snprintf(s, n,
                                "Hung in %s #%" PRIu32 " on %s: %d of %d ranks enqueued it (from "
                                "%.3f s) and %s; rank%s %s never enqueued it%s",
                                coll_name(c), c->seq, cl, (int)c->nentered, (int)c->size,
                                c->nentered ? c->since_s[0] : NAN, kw, c->nmissing > 1 ? "s" : "",
                                who, hw);
    for (int32_t j = 0; j < c->nmissing && j < 4 && m < n; j++) {
        char d[320];
        doing(g, c->missing[j], d, sizeof d);
        m += (size_t)snprintf(s + m, n - m, "%s rank %d %s", j ? ";" : ":", (int)c->missing[j], d);
    }
    if (m < n)
        snprintf(s + m, n - m, ".");
}

size_t cs__hang_sentences(const struct cs_report *rep, char *out, size_t n, size_t max)
{
    const struct cs_report_hang *g = rep->hang;
    size_t k = 0;
    if (!g || !max)
        return 0;
#define NEXT (k < max ? out + n * k++ : NULL)
    k = gone(g, 1, out, n, k, max);
    /* Deadlocks first: nobody in them can move. */
    size_t at = 0;
    for (size_t c = 0; c < g->ncycles; c++) {
        char *s = NEXT;
        if (!s)
            return k;
        size_t m = (size_t)snprintf(s, n, "Deadlock: ");
        for (size_t i = 0; i < g->cycle_len[c] && m < n; i++) {
            int r = g->cycle_ranks[at + i];
            const struct cs_report_hang_rank *x = rank_of(g, r);
            char w[160] = "";
            if (x)
                call_words(&x->call, w, sizeof w);
            m += (size_t)snprintf(s + m, n - m, "%srank %d waits in %s since %.3f s", i ? "; " : "",
                                  r, w, x ? x->call.t_s : NAN);
        }
        if (m < n)
            snprintf(s + m, n - m, "; none of them can go on.");
        at += g->cycle_len[c];
    }
    for (size_t i = 0; i < g->ncolls; i++) {
        const struct cs_report_hang_coll *c = &g->colls[i];
        if (explained(g, i))
            continue;
        char *s = NEXT;
        if (!s)
            return k;
        char cl[48], who[160];
        cs__comm_label(c->comm, cl, sizeof cl);
        char hw[400];
        hosts_words(c, hw, sizeof hw);
        if (c->nccl) {
            nccl_sentence(g, c, cl, s, n);
        } else if (c->nmissing) {
            ranks_list(c->missing, c->nmissing, who, sizeof who);
            size_t m = (size_t)snprintf(
                s, n,
                "%s %s #%" PRIu32 " on %s: %d of %d ranks entered it (from %.3f s); "
                "rank%s %s never did%s",
                g->hung ? "Hung in" : "Never completed:", cs_op_name(c->op), c->seq, cl,
                (int)c->nentered, (int)c->size, c->nentered ? c->since_s[0] : NAN,
                c->nmissing > 1 ? "s" : "", who, hw);
            for (int32_t j = 0; j < c->nmissing && j < 4 && m < n; j++) {
                char d[320];
                doing(g, c->missing[j], d, sizeof d);
                m += (size_t)snprintf(s + m, n - m, "%s rank %d %s", j ? ";" : ":",
                                      (int)c->missing[j], d);
            }
            if (m < n)
                snprintf(s + m, n - m, ".");
        } else {
            size_t m = (size_t)snprintf(
                s, n, "Hung in %s #%" PRIu32 " on %s: all %d ranks entered it (by %.3f s) and %s",
                cs_op_name(c->op), c->seq, cl, (int)c->size,
                c->nentered ? c->since_s[c->nentered - 1] : NAN,
                c->inside == c->nentered ? "none finished" : "some are still inside it");
            if (c->bytes_differ && m < n) {
                m += (size_t)snprintf(s + m, n - m, "; the ranks disagree on its size:");
                for (int32_t j = 0; j < c->nentered && j < 8 && m < n; j++)
                    m += (size_t)snprintf(s + m, n - m, "%s rank %d %" PRIu64 " B", j ? "," : "",
                                          (int)c->entered[j], c->bytes[j]);
                if (m < n)
                    m += (size_t)snprintf(s + m, n - m, " (mismatched counts)");
            }
            if (m < n)
                snprintf(s + m, n - m, ".");
        }
    }
    k = gone(g, 0, out, n, k, max);
    /* Blocked point-to-point calls outside cycles, with what their partner does. */
    for (size_t i = 0; i < g->nwaits; i++) {
        const struct cs_report_hang_wait *w = &g->waits[i];
        if (w->cycle)
            continue;
        const struct cs_report_hang_rank *x = rank_of(g, w->rank);
        if (!x)
            continue;
        char *s = NEXT;
        if (!s)
            return k;
        char c[160], d[320];
        call_words(&x->call, c, sizeof c);
        if (w->peer >= 0) {
            doing(g, w->peer, d, sizeof d);
            snprintf(s, n, "Rank %d waits in %s since %.3f s; rank %d %s.", w->rank, c, w->since_s,
                     (int)w->peer, d);
        } else {
            snprintf(s, n, "Rank %d waits in %s since %.3f s.", w->rank, c, w->since_s);
        }
    }
    /* Ranks gone early that no sentence above named. */
    for (size_t i = 0; i < g->nranks; i++) {
        const struct cs_report_hang_rank *x = &g->ranks[i];
        if (x->fate < CS_FATE_EXITED || x->in_call || x->fate == CS_FATE_VANISHED ||
            x->fate == CS_FATE_MISSING ||
            (x->fate == CS_FATE_SIGNALLED && x->code != 15 && x->code != 2 && x->code != 1))
            continue;
        int named = 0;
        for (size_t j = 0; j < g->ncolls && !named; j++)
            for (int32_t q = 0; q < g->colls[j].nmissing && q < 4; q++)
                named |= g->colls[j].missing[q] == x->rank;
        for (size_t j = 0; j < g->nwaits && !named; j++)
            named |= g->waits[j].peer == x->rank && !g->waits[j].cycle;
        if (named)
            continue;
        char *s = NEXT;
        if (!s)
            return k;
        char d[320];
        doing(g, x->rank, d, sizeof d);
        snprintf(s, n, "Rank %d %s.", x->rank, d);
    }
    if (g->hung) {
        char *s = NEXT;
        if (s)
            snprintf(s, n,
                     "The job hung: the trace ends at %.3f s with ranks inside calls; step, "
                     "straggler and overlap findings are left out (they would describe a step "
                     "that never ended).",
                     g->end_s);
    }
#undef NEXT
    return k;
}

static const char *fate_word(enum cs_hang_fate f)
{
    static const char *const w[] = {"finalized", "running",  "exited",
                                    "signalled", "vanished", "missing"};
    return (unsigned)f < sizeof w / sizeof w[0] ? w[f] : "?";
}

const char *cs__hang_fate_name(enum cs_hang_fate f)
{
    return fate_word(f);
}

void cs__hang_text(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_hang *g = rep->hang;
    if (!g)
        return;
    fprintf(f, "\nHang diagnosis (%s; the trace ends at %.3f s)\n",
            g->hung ? "ranks were inside calls" : "ranks stopped before MPI_Finalize", g->end_s);
    fprintf(f, "  %-6s %-16s %-10s %s\n", "rank", "host", "end", "in call / last call");
    for (size_t i = 0; i < g->nranks && i < 64; i++) {
        const struct cs_report_hang_rank *x = &g->ranks[i];
        char w[160];
        double t = row_call(x, w, sizeof w);
        char end[32];
        if (x->fate == CS_FATE_EXITED)
            snprintf(end, sizeof end, "exit %d", x->code);
        else if (x->fate == CS_FATE_SIGNALLED)
            snprintf(end, sizeof end, "%s", signame(x->code));
        else
            snprintf(end, sizeof end, "%s", fate_word(x->fate));
        if (x->in_call || x->has_last)
            fprintf(f, "  %-6d %-16.16s %-10s %s %s %.3f s\n", x->rank, x->host, end,
                    x->in_call ? "in" : "last", w, t);
        else
            fprintf(f, "  %-6d %-16.16s %-10s -\n", x->rank, x->host[0] ? x->host : "-", end);
    }
    if (g->nranks > 64)
        fprintf(f, "  ... %zu more ranks\n", g->nranks - 64);
    for (size_t i = 0; i < g->ncolls; i++) {
        const struct cs_report_hang_coll *c = &g->colls[i];
        char cl[48], who[160];
        cs__comm_label(c->comm, cl, sizeof cl);
        ranks_list(c->missing, c->nmissing, who, sizeof who);
        if (c->nccl)
            fprintf(f,
                    "  stuck: %s #%" PRIu32 " on %s (size %d): %d enqueued (%d kernels without "
                    "a recorded completion), missing: %s\n",
                    coll_name(c), c->seq, cl, (int)c->size, (int)c->nentered, (int)c->kernels_open,
                    c->nmissing ? who : "none");
        else
            fprintf(f,
                    "  stuck: %s #%" PRIu32 " on %s (size %d): %d entered (%d inside), missing: "
                    "%s\n",
                    cs_op_name(c->op), c->seq, cl, (int)c->size, (int)c->nentered, (int)c->inside,
                    c->nmissing ? who : "none");
    }
    for (size_t c = 0, at = 0; c < g->ncycles; at += g->cycle_len[c], c++) {
        fprintf(f, "  deadlock:");
        for (size_t i = 0; i < g->cycle_len[c]; i++)
            fprintf(f, " %d ->", (int)g->cycle_ranks[at + i]);
        fprintf(f, " %d\n", (int)g->cycle_ranks[at]);
    }
}

static void call_json(struct cs__jw *w, const char *key, const struct cs_report_hang_call *c,
                      const char *tkey)
{
    char cl[48];
    cs__jw_open(w, key, '{');
    cs__jw_str(w, "op", cs_op_name(c->op));
    cs__jw_str(w, "comm", c->comm ? cs__comm_label(c->comm, cl, sizeof cl) : "");
    cs__jw_u64(w, "seq", c->seq);
    cs__jw_int(w, "peer", c->peer);
    cs__jw_int(w, "from", c->from);
    cs__jw_int(w, "tag", c->tag);
    cs__jw_u64(w, "bytes", c->bytes);
    cs__jw_num(w, tkey, c->t_s);
    cs__jw_close(w, '}');
}

void cs__hang_json(const struct cs_report *rep, FILE *out, int depth)
{
    const struct cs_report_hang *g = rep->hang;
    if (!g)
        return;
    struct cs__jw w = {.f = out, .depth = depth};
    char cl[48];
    cs__jw_open(&w, "hang", '{');
    cs__jw_bool(&w, "hung", g->hung);
    cs__jw_num(&w, "end_s", g->end_s);
    cs__jw_open(&w, "ranks", '[');
    for (size_t i = 0; i < g->nranks; i++) {
        const struct cs_report_hang_rank *x = &g->ranks[i];
        cs__jw_open(&w, NULL, '{');
        cs__jw_int(&w, "rank", x->rank);
        cs__jw_str(&w, "host", x->host);
        cs__jw_str(&w, "end", fate_word(x->fate));
        cs__jw_int(&w, "code", x->code);
        cs__jw_num(&w, "exit_s", x->exit_s);
        if (x->in_call)
            call_json(&w, "in_call", &x->call, "since_s");
        else
            cs__jw_str_or_null(&w, "in_call", "");
        if (x->has_last)
            call_json(&w, "last_call", &x->last, "end_s");
        else
            cs__jw_str_or_null(&w, "last_call", "");
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_open(&w, "collectives", '[');
    for (size_t i = 0; i < g->ncolls; i++) {
        const struct cs_report_hang_coll *c = &g->colls[i];
        cs__jw_open(&w, NULL, '{');
        cs__jw_str(&w, "comm", cs__comm_label(c->comm, cl, sizeof cl));
        cs__jw_int(&w, "size", c->size);
        cs__jw_str_or_null(&w, "op", c->op ? cs_op_name(c->op) : "");
        cs__jw_u64(&w, "seq", c->seq);
        cs__jw_bool(&w, "nccl", c->nccl);
        cs__jw_int(&w, "inside", c->inside);
        cs__jw_int(&w, "kernels_open", c->kernels_open);
        cs__jw_bool(&w, "mismatched_bytes", c->bytes_differ);
        cs__jw_open(&w, "entered", '[');
        for (int32_t j = 0; j < c->nentered; j++) {
            cs__jw_open(&w, NULL, '{');
            cs__jw_int(&w, "rank", c->entered[j]);
            cs__jw_num(&w, "since_s", c->since_s[j]);
            cs__jw_u64(&w, "bytes", c->bytes[j]);
            if (c->nccl)
                cs__jw_str(&w, "kernel",
                           c->kernel[j] == CS_KERNEL_NOT_DONE ? "not_completed" : "untimed");
            cs__jw_close(&w, '}');
        }
        cs__jw_close(&w, ']');
        cs__jw_open(&w, "missing", '[');
        for (int32_t j = 0; j < c->nmissing; j++)
            cs__jw_int(&w, NULL, c->missing[j]);
        cs__jw_close(&w, ']');
        cs__jw_open(&w, "missing_hosts", '[');
        for (int32_t j = 0; j < c->nmissing_hosts; j++)
            cs__jw_str(&w, NULL, c->missing_hosts[j]);
        cs__jw_close(&w, ']');
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_open(&w, "waits", '[');
    for (size_t i = 0; i < g->nwaits; i++) {
        const struct cs_report_hang_wait *x = &g->waits[i];
        cs__jw_open(&w, NULL, '{');
        cs__jw_int(&w, "rank", x->rank);
        cs__jw_str(&w, "op", cs_op_name(x->op));
        cs__jw_str(&w, "comm", x->comm ? cs__comm_label(x->comm, cl, sizeof cl) : "");
        cs__jw_int(&w, "waits_for", x->peer);
        cs__jw_int(&w, "tag", x->tag);
        cs__jw_num(&w, "since_s", x->since_s);
        cs__jw_int(&w, "deadlock", x->cycle - 1);
        cs__jw_close(&w, '}');
    }
    cs__jw_close(&w, ']');
    cs__jw_open(&w, "deadlocks", '[');
    for (size_t c = 0, at = 0; c < g->ncycles; at += g->cycle_len[c], c++) {
        cs__jw_open(&w, NULL, '[');
        for (size_t i = 0; i < g->cycle_len[c]; i++)
            cs__jw_int(&w, NULL, g->cycle_ranks[at + i]);
        cs__jw_close(&w, ']');
    }
    cs__jw_close(&w, ']');
    cs__jw_close(&w, '}');
}

void cs__hang_html(const struct cs_report *rep, FILE *f)
{
    const struct cs_report_hang *g = rep->hang;
    if (!g)
        return;
    fprintf(f, "<p>%s; the trace ends at %.3f s.</p>\n",
            g->hung ? "Ranks were inside calls when their traces end"
                    : "Ranks stopped before MPI_Finalize",
            g->end_s);
    fputs("<table><tr><th>rank</th><th>host</th><th>end</th><th>in call / last call</th>"
          "<th>since / ended (s)</th></tr>\n",
          f);
    for (size_t i = 0; i < g->nranks && i < 256; i++) {
        const struct cs_report_hang_rank *x = &g->ranks[i];
        char w[160];
        double t = row_call(x, w, sizeof w);
        fprintf(f, "<tr><td>%d</td><td>", x->rank);
        cs__html_esc(f, x->host);
        fprintf(f, "</td><td>%s", fate_word(x->fate));
        if (x->fate == CS_FATE_EXITED || x->fate == CS_FATE_SIGNALLED)
            fprintf(f, " (%s %d)", x->fate == CS_FATE_EXITED ? "status" : "signal", x->code);
        if (!x->in_call && !x->has_last) {
            fputs("</td><td>-</td><td>-</td></tr>\n", f);
            continue;
        }
        fprintf(f, "</td><td>%s ", x->in_call ? "in" : "last");
        cs__html_esc(f, w);
        fprintf(f, "</td><td>%.3f</td></tr>\n", t);
    }
    fputs("</table>\n", f);
    if (!g->ncolls)
        return;
    fputs("<table><tr><th>collective</th><th>communicator</th><th>size</th>"
          "<th>entered (NCCL: enqueued)</th><th>never entered</th><th>NCCL kernels without a "
          "recorded completion</th></tr>\n",
          f);
    for (size_t i = 0; i < g->ncolls && i < 256; i++) {
        const struct cs_report_hang_coll *c = &g->colls[i];
        char cl[48], in[160], who[160];
        cs__comm_label(c->comm, cl, sizeof cl);
        ranks_list(c->entered, c->nentered, in, sizeof in);
        ranks_list(c->missing, c->nmissing, who, sizeof who);
        fprintf(f, "<tr><td>%s #%" PRIu32 "</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td>",
                coll_name(c), c->seq, cl, (int)c->size, c->nentered ? in : "-",
                c->nmissing ? who : "-");
        if (c->nccl)
            fprintf(f, "<td>%d</td></tr>\n", (int)c->kernels_open);
        else
            fputs("<td>-</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}
