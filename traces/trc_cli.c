// traces/trc_cli.c -- placeholder until the trace commands land.
#include <stdio.h>

#include "trc.h"

int trc_cli_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvfleet trace: not available in this build\n");
    return 1;
}
