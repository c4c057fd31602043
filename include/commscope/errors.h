/*
 * The error codes of commscope's analysis, their names and messages, from one table (libuv style).
 * Functions return 0 or one of these (negative); the specific sentence goes into the caller's
 * buffer.  The analyzer's exit statuses and messages derive from them (docs/user-guide.md).
 */
#ifndef COMMSCOPE_ERRORS_H
#define COMMSCOPE_ERRORS_H

#define CS_ERROR_MAP(X)                                                                            \
    X(EIO, -1, "input/output error")                                                               \
    X(ENOMEM, -2, "out of memory")                                                                 \
    X(ENOENT, -3, "no such file or directory")                                                     \
    X(EEMPTY, -4, "empty file")                                                                    \
    X(EFORMAT, -5, "not a commscope trace")                                                        \
    X(EVERSION, -6, "unsupported trace format version")                                            \
    X(ESIZE, -7, "unexpected record or block size")                                                \
    X(ETRUNC, -8, "truncated trace")                                                               \
    X(ECRC, -9, "checksum mismatch")                                                               \
    X(EHEADER, -10, "invalid file header")                                                         \
    X(EBLOCK, -11, "invalid block")                                                                \
    X(EEVENT, -12, "invalid event record")                                                         \
    X(ECOMM, -13, "invalid communicator record")                                                   \
    X(ERUN, -14, "file belongs to another run")                                                    \
    X(EDUP, -15, "duplicate rank")                                                                 \
    X(EUSAGE, -16, "usage error")

enum cs_error {
#define X(name, value, msg) CS_##name = value,
    CS_ERROR_MAP(X)
#undef X
};

/* Static message for error code `err` ("unknown error" for others).  Never NULL. */
const char *cs_strerror(int err);
/* Static name of error code `err` ("CS_ETRUNC"), "CS_OK" for 0, "CS_E?" for others. */
const char *cs_err_name(int err);

#endif
