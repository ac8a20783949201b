// engine/eng_cli.c -- placeholder until the engine commands land.
#include <stdio.h>

#include "eng.h"

int eng_cli_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvfleet engine: not available in this build\n");
    return 1;
}
