/* What every part of the analyzer may call on the run: its problems, its communicators' names.
 * (It calls nothing of the passes.) */
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"

void cs__problem(struct cs__run *run, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* (out of memory: the problem is lost, but the analysis goes on) */
    cs__msg_vadd(&run->problems, &run->nproblems, &run->capproblems, fmt, ap);
    va_end(ap);
}

const char *cs__comm_label(uint64_t id, char *buf, size_t n)
{
    return cs_comm_label(id, buf, n);
}
