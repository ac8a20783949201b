// reports/rpt_cli.c -- placeholder until the report commands land.
#include <stdio.h>

#include "rpt.h"

int rpt_report_cli_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvfleet report: not available in this build\n");
    return 1;
}

int rpt_compare_cli_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvfleet compare: not available in this build\n");
    return 1;
}
