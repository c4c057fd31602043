/*
 * Writing files without hurting the program: every byte the collector puts on disk goes through
 * here, so a full disk, a file-size limit (RLIMIT_FSIZE, `ulimit -f`) or an I/O error comes back
 * as an error code the caller turns into "stop recording", never as SIGXFSZ (which the kernel
 * sends to a thread writing past the limit, killing the program by default) or as SIGBUS (which
 * a store into a file mapping gets when the page behind it has no disk space).
 *
 * The rules: a file is never extended past the current soft RLIMIT_FSIZE (read again at every
 * extension, since the program may lower it); the pages of the trace mapping are backed by
 * allocated blocks before anyone stores into them (fallocate, or written zeros where the
 * filesystem has no fallocate); other files are written with plain write calls that stop at the
 * limit with EFBIG.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.h"

uint64_t cs__fsize_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return UINT64_MAX;
    return (uint64_t)rl.rlim_cur;
}

/* Write zeros over [from, to) of fd: blocks really allocated, so ENOSPC shows here. */
static int write_zeros(int fd, uint64_t from, uint64_t to)
{
    static const char zero[64 * 1024];
    while (from < to) {
        size_t n = to - from < sizeof zero ? (size_t)(to - from) : sizeof zero;
        ssize_t w = pwrite(fd, zero, n, (off_t)from);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        from += (uint64_t)w;
    }
    return 0;
}

int cs__extend(int fd, uint64_t from, uint64_t to, int *fallocate_works)
{
    if (to <= from)
        return 0;
    /* Stop short of the limit ourselves: the kernel would answer EFBIG only after SIGXFSZ. */
    if (to > cs__fsize_limit())
        return EFBIG;
    if (*fallocate_works) {
        if (fallocate(fd, 0, (off_t)from, (off_t)(to - from)) == 0)
            return 0;
        if (errno != EOPNOTSUPP && errno != ENOSYS)
            return errno;
        *fallocate_works = 0;
    }
    /* No fallocate (some network and FUSE filesystems): a sparse ftruncate would leave holes
     * whose first store faults with SIGBUS on a full disk, so the zeros are written instead. */
    return write_zeros(fd, from, to);
}

int cs_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    off_t at = lseek(fd, 0, SEEK_CUR);
    uint64_t limit = cs__fsize_limit();
    /* Pipes and sockets have no offset and no file-size limit. */
    if (at >= 0 && limit != UINT64_MAX && (uint64_t)at + n > limit)
        return EFBIG;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}
