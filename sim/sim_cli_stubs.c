// sim/sim_cli_stubs.c -- subcommands not built yet.
#include <stdio.h>

#include "eng.h"
#include "sim_cli.h"

int sim_cli_engine(int argc, char **argv) { return eng_cli_main(argc, argv); }

int sim_cli_validate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvfleet validate: not available in this build\n");
    return 1;
}

int sim_cli_sweep(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvfleet sweep: not available in this build\n");
    return 1;
}

int sim_cli_plan(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvfleet plan: not available in this build\n");
    return 1;
}

