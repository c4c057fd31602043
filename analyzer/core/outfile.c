/*
 * Report files written whole or not at all: the text goes to a temporary file beside the
 * destination ("DIR/.NAME.XXXXXX"), which replaces the destination by rename only once every
 * byte was written and the file closed without error.  A full disk, a file-size limit (SIGXFSZ is
 * ignored by the commscope command, so the write fails with EFBIG) or an I/O error leaves the
 * previous file, if any, untouched and no half-written report behind.
 */
#include "outfile.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * The temporary files being written, for the signal handler: a signal that ends the analysis
 * (Ctrl-C, SIGTERM) must not leave them behind.  Slots are claimed and released by the main
 * thread only; the handler only reads them.
 */
#define MAX_OPEN 8
static char pending[MAX_OPEN][PATH_MAX];
static volatile sig_atomic_t used[MAX_OPEN];

static void track(const char *tmp)
{
    for (int i = 0; i < MAX_OPEN; i++)
        if (!used[i]) {
            snprintf(pending[i], sizeof pending[i], "%s", tmp);
            used[i] = 1;
            return;
        }
}

static void untrack(const char *tmp)
{
    for (int i = 0; i < MAX_OPEN; i++)
        if (used[i] && strcmp(pending[i], tmp) == 0)
            used[i] = 0;
}

static void on_signal(int sig)
{
    for (int i = 0; i < MAX_OPEN; i++)
        if (used[i])
            unlink(pending[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

void cs__out_cleanup_on_signals(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa = {.sa_handler = on_signal};
        sigemptyset(&sa.sa_mask);
        /* A signal the user's shell ignores (nohup, a background job) stays ignored. */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
            sigaction(sigs[i], &sa, NULL);
    }
}

int cs__out_open(struct cs__outfile *o, const char *path, char *err, size_t cap)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    if (strcmp(path, "-") == 0) {
        o->f = stdout;
        return 0;
    }
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    int n = snprintf(o->tmp, sizeof o->tmp, "%.*s.%s.XXXXXX", (int)dirlen, path,
                     slash ? slash + 1 : path);
    if (n < 0 || (size_t)n >= sizeof o->tmp) {
        snprintf(err, cap, "cannot write %s: the path is too long", path);
        return -1;
    }
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        snprintf(err, cap, "cannot write %s: %s", path, strerror(errno));
        o->tmp[0] = '\0';
        return -1;
    }
    /* mkstemp makes the file 0600; a report is as readable as any file the user creates (a
     * failure only leaves it more private). */
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, 0666 & ~um);
    track(o->tmp);
    o->f = fdopen(fd, "w");
    if (!o->f) {
        untrack(o->tmp);
        snprintf(err, cap, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        unlink(o->tmp);
        o->tmp[0] = '\0';
        return -1;
    }
    return 0;
}

int cs__out_commit(struct cs__outfile *o, char *err, size_t cap)
{
    if (!o->f)
        return -1;
    if (o->f == stdout) {
        o->f = NULL;
        if (fflush(stdout) != 0 || ferror(stdout)) {
            snprintf(err, cap, "error writing to standard output: %s", strerror(errno));
            return -1;
        }
        return 0;
    }
    /* fflush first so the error of the last buffered write is the one reported. */
    errno = 0;
    int bad = fflush(o->f) != 0 || ferror(o->f);
    int e = errno;
    if (fclose(o->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    o->f = NULL;
    if (!bad && rename(o->tmp, o->path) != 0) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        snprintf(err, cap, "error writing %s: %s; the file was not written", o->path,
                 e ? strerror(e) : "write error");
        unlink(o->tmp);
    }
    untrack(o->tmp);
    o->tmp[0] = '\0';
    return bad ? -1 : 0;
}

void cs__out_abort(struct cs__outfile *o)
{
    if (o->f && o->f != stdout)
        fclose(o->f);
    if (o->tmp[0]) {
        unlink(o->tmp);
        untrack(o->tmp);
    }
    o->f = NULL;
    o->tmp[0] = '\0';
}
