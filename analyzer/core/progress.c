/*
 * Progress of a long analysis, for a person at a terminal: one line rewritten in place on
 * run->progress_out (the command line sets it only when stderr is a terminal and --quiet is not
 * given), erased when the merge is done so the report starts on a clean line.
 */
#include <inttypes.h>

#include "internal.h"

void cs__progress(struct cs__run *run, uint64_t done, int last)
{
    FILE *f = run->progress_out;
    if (last) {
        fputs("\r\033[K", f);
        fflush(f);
        return;
    }
    uint64_t total = 0;
    for (int r = 0; r < run->world; r++)
        if (run->ranks[r].present)
            total += cs_reader_stats(run->ranks[r].rd)->events;
    unsigned pct = total ? (unsigned)(done * 100 / total) : 0;
    fprintf(f, "\rcommscope analyze: %3u%% (%" PRIu64 " of %" PRIu64 " events)",
            pct > 100 ? 100 : pct, done, total);
    fflush(f);
}
