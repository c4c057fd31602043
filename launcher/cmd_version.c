/* `commscope version`: what a bug report needs to say which build produced a trace. */
#include <stdio.h>
#include <string.h>

#include "commscope/trace.h"
#include "internal.h"

int cs__cmd_version(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: commscope version\n\n"
                   "Print commscope's version and the trace format version it writes and reads.\n"
                   "\nexample:\n  commscope version\n\nexit status: 0, or 2 for an unexpected "
                   "argument\n");
            return 0;
        }
        fprintf(stderr,
                "commscope version: unexpected argument '%s'; see 'commscope version --help'\n",
                argv[i]);
        return CS__EXIT_USAGE;
    }
    printf("commscope %s (trace format %u)\n", CS_VERSION_STRING, CS_TRACE_VERSION);
    return 0;
}
