/* `commscope analyze`: first cut, replaced by the full pipeline in the next commits. */
#include <stdio.h>

#include "cmd.h"

int cs_cmd_analyze(int argc, char **argv)
{
    (void)argv;
    if (argc < 2) {
        fprintf(stderr, "usage: commscope analyze RUN_DIR [--json FILE] [--quiet]\n");
        return 2;
    }
    fprintf(stderr, "commscope analyze: not implemented yet\n");
    return 3;
}
