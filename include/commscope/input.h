/*
 * Opening an input file of the analysis (a trace's neighbours: run files, topology snapshots,
 * wire captures, Kineto traces) without blocking and only when it is a regular file.  fopen on a
 * FIFO named like an input waits forever for a writer; on a device it may read forever.  Header
 * only, shared by the analyzer, topology and capture libraries.
 */
#ifndef COMMSCOPE_INPUT_H
#define COMMSCOPE_INPUT_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Open path for reading.  Returns a file descriptor (blocking mode, close-on-exec) of a regular
 * file, or -1 with errno set: EINVAL for anything that is not a regular file (FIFO, directory,
 * socket, device), else open's or fstat's error.
 */
static inline int cs_input_open(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = fstat(fd, &st) != 0 ? errno : EINVAL;
        close(fd);
        errno = e;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* cs_input_open as a stdio stream ("r"); NULL with errno set. */
static inline FILE *cs_input_fopen(const char *path)
{
    int fd = cs_input_open(path);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

/* A sentence fragment for errno after cs_input_open/cs_input_fopen failed. */
static inline const char *cs_input_strerror(int e)
{
    return e == EINVAL ? "not a regular file" : strerror(e);
}

#endif
