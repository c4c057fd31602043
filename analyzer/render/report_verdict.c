/*
 * The verdict in words: each finding of the model (views.h) as one plain sentence with its
 * numbers.  Shared by the text and HTML renderers; formatting only, the numbers and the choice
 * of findings come from views.c.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hang.h"
#include "internal.h"
#include "wire.h"

const char *cs__finding_sentence(const struct cs_report_finding *f, char *buf, size_t n)
{
    double pct = f->total ? 100.0 * (double)f->count / (double)f->total : 0;
    switch (f->kind) {
    case CS_FIND_STRAGGLER:
        if (isfinite(f->v[2])) {
            snprintf(buf, n,
                     "Rank %d on %s arrives last at %" PRIu64 " of its %" PRIu64
                     " collective instances (%.0f %%); the other ranks wait %.1f %% of each step "
                     "for it (%.6f s in total, %.1f %% of their wall time).",
                     f->rank, f->host, f->count, f->total, pct, f->v[2], f->v[0], f->v[1]);
            break;
        }
        snprintf(buf, n,
                 "Rank %d on %s arrives last at %" PRIu64 " of its %" PRIu64
                 " collective instances (%.0f %%); the other ranks wait %.6f s for it in total, "
                 "%.1f %% of their wall time.",
                 f->rank, f->host, f->count, f->total, pct, f->v[0], f->v[1]);
        break;
    case CS_FIND_NO_STRAGGLER:
        if (f->rank < 0)
            snprintf(buf, n,
                     "No rank arrives last at any collective by more than the clock "
                     "uncertainty.");
        else
            snprintf(buf, n,
                     "No single rank holds the others up: the most frequent last arrival, rank %d "
                     "on %s, is last at %" PRIu64 " of its %" PRIu64
                     " collective instances (%.0f %%), costing the others %.1f %% of their wall "
                     "time.",
                     f->rank, f->host, f->count, f->total, pct, f->v[1]);
        break;
    case CS_FIND_COMM_SHARE:
        if (!isfinite(f->v[2])) {
            snprintf(buf, n,
                     "Communication takes %.1f %% of the ranks' wall time (most: rank %d on %s, "
                     "%.1f %%); how much of it is waiting for other ranks is unknown: no "
                     "collective instance is complete.",
                     f->v[0], f->rank, f->host, f->v[1]);
            break;
        }
        snprintf(buf, n,
                 "Communication takes %.1f %% of the ranks' wall time (most: rank %d on %s, "
                 "%.1f %%); %.1f %% of the communication time is waiting for other ranks to "
                 "arrive at collectives%s.",
                 f->v[0], f->rank, f->host, f->v[1], f->v[2],
                 f->count ? " and for point-to-point partners" : "");
        break;
    case CS_FIND_IMBALANCE:
        snprintf(buf, n,
                 "Compute is imbalanced: load balance %.4f; rank %d on %s computes %.6f s "
                 "against a mean of %.6f s per rank.",
                 f->v[0], f->rank, f->host, f->v[2], f->v[1]);
        break;
    case CS_FIND_BALANCED:
        snprintf(buf, n, "Compute is balanced across ranks: load balance %.4f.", f->v[0]);
        break;
    case CS_FIND_INCOMPLETE:
        snprintf(buf, n,
                 "The trace is incomplete: %" PRIu64 " of %" PRIu64
                 " ranks missing, %.0f partial, %.0f events dropped, %.0f collective instances "
                 "incomplete; the numbers cover what was recorded.",
                 f->count, f->total, f->v[0], f->v[1], f->v[2]);
        break;
    case CS_FIND_NO_COMM:
        snprintf(buf, n, "No communication call was recorded.");
        break;
    case CS_FIND_NO_CALLS:
        snprintf(buf, n,
                 "%" PRIu64 " of the %" PRIu64 " ranks made no MPI or NCCL call: the job "
                 "communicated through something commscope does not intercept%s%s%s; only their "
                 "wall time is known.",
                 f->count, f->total, f->note[0] ? " (" : "", f->note, f->note[0] ? ")" : "");
        break;
    case CS_FIND_GRAD_SYNC:
        snprintf(buf, n,
                 "Gradient synchronisation keeps the ranks in communication calls for %.1f %% of "
                 "each step: %.6f s of a mean step of %.6f s.",
                 f->v[0], f->v[1], f->v[2]);
        break;
    case CS_FIND_GPU_COMM:
        snprintf(buf, n,
                 "NCCL communication takes %.6f s on the GPU, %.1f %% of it hidden behind "
                 "compute kernels; %.6f s of it is exposed.",
                 f->v[0], f->v[1], f->v[2]);
        break;
    case CS_FIND_P2P_WAIT: {
        int k =
            snprintf(buf, n,
                     "At point-to-point calls the ranks wait for their partners %.1f %% of each "
                     "step (%.6f s; most: rank %d on %s, %.1f %%): receives posted before their "
                     "sends, sends held until their receives%s.",
                     f->v[0], f->v[2], f->rank, f->host, f->v[1],
                     strcmp(f->note, "pp") == 0 ? " (in the pipeline, its bubbles)" : "");
        if (f->count && k > 0 && (size_t)k < n)
            snprintf(buf + k, n - (size_t)k,
                     " The partners waited longest for rank %" PRIu64 ": %.6f s over the run.",
                     f->count - 1, f->v[3]);
        break;
    }
    case CS_FIND_RES_CPU: {
        int k = snprintf(buf, n,
                         "Rank %d's process kept %.2f cores busy (%.6f s of CPU time over its "
                         "samples; the other ranks' median %.2f)",
                         f->rank, f->v[0], f->v[2], f->v[1]);
        /* Computing a share c of its wall time at u cores, its compute ran at most at u / c of a
         * core (the rest of its CPU time is in communication calls). */
        double per = f->v[0] / f->v[3];
        if (k > 0 && (size_t)k < n && isfinite(f->v[3]) && f->v[3] < CS_VIEW_COMPUTE_MATERIAL)
            /* Little compute: the CPU time is the MPI library's (progress, polling while it
             * waits), and says nothing of the compute. */
            snprintf(buf + k, n - (size_t)k,
                     " while it computes %.1f %% of its wall time: that CPU time is spent "
                     "mostly inside its MPI calls (progress and polling while it waits), not in "
                     "compute.",
                     100 * f->v[3]);
        else if (k > 0 && (size_t)k < n && isfinite(per) && f->v[3] > 0)
            snprintf(buf + k, n - (size_t)k,
                     per < 0.9 ? " while it computes %.0f %% of its wall time: its compute ran at "
                                 "most at %.2f of a core, so it shares its CPU or waits (I/O, "
                                 "paging) while computing."
                               : " while it computes %.0f %% of its wall time: its compute keeps "
                                 "%.2f of a core busy, so the extra time is its own work.",
                     100 * f->v[3], per > 1 ? 1.0 : per);
        else if (k > 0 && (size_t)k < n)
            snprintf(buf + k, n - (size_t)k, ".");
        break;
    }
    case CS_FIND_RES_GPU: {
        int k = snprintf(buf, n, "GPU %" PRIu64 " on %s (rank %d) is %.0f %% busy on average",
                         f->count, f->host, f->rank, f->v[0]);
        if (k > 0 && (size_t)k < n && isfinite(f->v[1]) && f->v[1] >= 1)
            k += snprintf(buf + k, n - (size_t)k, " while rank %d loads data %.1f %% of each step",
                          f->rank, f->v[1]);
        if (k > 0 && (size_t)k < n && isfinite(f->v[2]))
            k +=
                snprintf(buf + k, n - (size_t)k, "%s waits at collectives %.1f %% of its wall time",
                         isfinite(f->v[1]) && f->v[1] >= 1 ? " and" : "; the rank", f->v[2]);
        if (k > 0 && (size_t)k < n)
            snprintf(buf + k, n - (size_t)k, ".");
        break;
    }
    }
    return buf;
}

void cs__report_text_verdict(const struct cs_report *rep, FILE *out)
{
    char buf[512];
    fprintf(out, "\n@--- Verdict %s\n", "---------------------------------------------------");
    static char hs[CS__HANG_MAX][CS__HANG_N];
    size_t nh = cs__hang_sentences(rep, &hs[0][0], CS__HANG_N, CS__HANG_MAX);
    for (size_t i = 0; i < nh; i++)
        fprintf(out, "- %s\n", hs[i]);
    if (nh && (!rep->views || !rep->views->nfindings))
        return;
    if (!rep->views || !rep->views->nfindings) {
        fprintf(out, "not available: %s\n",
                rep->nranks ? "the report's views could not be computed" : "no rank analysed");
        return;
    }
    for (size_t i = 0; i < rep->views->nfindings; i++)
        fprintf(out, "- %s\n", cs__finding_sentence(&rep->views->findings[i], buf, sizeof buf));
    char wb[CS__WIRE_SENTENCE];
    for (size_t i = 0; rep->wire && i < rep->wire->nwarnings; i++)
        if (cs__wire_verdict_sentence(rep, i, wb, sizeof wb))
            fprintf(out, "- %s\n", wb);
}

const char *cs__wire_verdict_sentence(const struct cs_report *rep, size_t i, char *buf, size_t n)
{
    const struct cs_wire_report *w = rep->wire;
    if (!w || i >= w->nwarnings || !w->verdict || !w->verdict[i])
        return NULL;
    snprintf(buf, n, "On the wire: %s", w->warnings[i]);
    return buf;
}
