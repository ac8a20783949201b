// reports/rpt_cli.c -- `kvfleet report DIR [--format html|md|both]`.
#include <stdio.h>
#include <string.h>

#include "rpt.h"

int rpt_report_cli_main(int argc, char **argv) {
    KVF_ASSERT(argc >= 1 && argv);
    const char *dir = NULL;
    bool html = true, md = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *fmt = NULL;
        if (!strcmp(a, "--format") || !strcmp(a, "-f")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kvfleet: report: --format needs html, md or both\n");
                return 2;
            }
            fmt = argv[++i];
        } else if (!strncmp(a, "--format=", 9)) {
            fmt = a + 9;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: kvfleet report DIR [--format html|md|both]\n"
                   "  writes DIR/report.html and DIR/report.md (default: both) from\n"
                   "  DIR/summary.json and DIR/results.db: the answer first (cost per\n"
                   "  million tokens, margin, SLO attainment, saturation, GPUs per pool),\n"
                   "  then the charts (by gnuplot when installed), the tables, every figure\n");
            return 0;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kvfleet: report: unknown option '%s'\n", a);
            return 2;
        } else if (!dir) {
            dir = a;
            continue;
        } else {
            fprintf(stderr, "kvfleet: report: one results directory only ('%s')\n", a);
            return 2;
        }
        if (fmt) {
            if (!strcmp(fmt, "html")) {
                html = true;
                md = false;
            } else if (!strcmp(fmt, "md") || !strcmp(fmt, "markdown")) {
                html = false;
                md = true;
            } else if (!strcmp(fmt, "both")) {
                html = md = true;
            } else {
                fprintf(stderr, "kvfleet: report: --format '%s': want html, md or both\n", fmt);
                return 2;
            }
        }
    }
    if (!dir) {
        fprintf(stderr, "kvfleet: usage: kvfleet report DIR [--format html|md|both]\n");
        return 2;
    }
    kvf_err err = {0};
    kvf_status s = rpt_report_write(dir, html, md, &err);
    if (s) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(s);
    }
    if (html) printf("%s/report.html\n", dir);
    if (md) printf("%s/report.md\n", dir);
    return 0;
}
