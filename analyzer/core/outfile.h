/* Report files written whole or not at all (outfile.c). */
#ifndef COMMSCOPE_ANALYZER_OUTFILE_H
#define COMMSCOPE_ANALYZER_OUTFILE_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

struct cs__outfile {
    FILE *f;            /* write here between open and commit */
    const char *path;   /* the destination ("-": standard output); not owned */
    char tmp[PATH_MAX]; /* the temporary file, "" when none */
};

/*
 * Start writing path ("-" for standard output) through a temporary file in its directory.
 * Returns 0 with o->f open, or -1 with the reason (naming the file) in err.
 */
int cs__out_open(struct cs__outfile *o, const char *path, char *err, size_t cap);
/*
 * Finish: flush, close, and rename the temporary file over the destination.  Returns 0, or -1
 * with the reason in err after removing the temporary file (the destination is untouched).
 */
int cs__out_commit(struct cs__outfile *o, char *err, size_t cap);
/* Give up: close and remove the temporary file (no-op after commit). */
void cs__out_abort(struct cs__outfile *o);
/* Remove the temporary files of unfinished reports when SIGINT, SIGTERM or SIGHUP ends the
 * process (signals the caller's environment ignores stay ignored). */
void cs__out_cleanup_on_signals(void);

#endif
