// sim/main.c -- the kvfleet command: dispatches to the subcommands of each library.
// Exit codes: 0 ok; 1 the run failed; 2 bad usage or bad input.
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "eng.h"
#include "kvf.h"
#include "rpt.h"
#include "sim_cli.h"
#include "trc.h"

static void usage(FILE *f) {
    fprintf(f,
            "kvfleet %s -- discrete-event simulator of LLM serving clusters\n"
            "\n"
            "usage:\n"
            "  kvfleet run SCENARIO [-o DIR] [--set K=V]... [--trace FILE] [--seed N] [--json]\n"
            "  kvfleet run SCENARIO --explain-step [--step-phase decode|prefill] [--step-seqs N]\n"
            "              [--step-context C] [--step-prompt T] [--step-chunks N] [--set K=V]...\n"
            "  kvfleet hw check FILE\n"
            "  kvfleet trace stats|gen|convert ...\n"
            "  kvfleet engine profile [--model M] [--backend cpu|cuda] [--quick] [-o FILE]\n"
            "                 [--check PROFILE]\n"
            "  kvfleet engine serve --trace FILE [--model M] [--backend B] [TRACE-SHAPING] [-o DIR]\n"
            "  kvfleet validate --trace FILE [--model M] [--backend B] [--profile P] [TRACE-SHAPING]\n"
            "                   [-o DIR] [--json]\n"
            "     TRACE-SHAPING: [--limit N] [--time-scale X] [--length-scale X] [--rate R]\n"
            "  kvfleet sweep SCENARIO --vary K=V1,V2,... [--vary ...] [--set K=V]... [-j N]\n"
            "                [-o DIR] [--json]        (also under mpirun -n N)\n"
            "  kvfleet plan SCENARIO [--slo ttft_p90_ms=X] [--slo tpot_p90_ms=Y] [--max-gpus N]\n"
            "               [--vary-ratio] [--gpus-per-instance LIST] [--find max-rate] [--tol X]\n"
            "               [--set K=V]... [--json]\n"
            "  kvfleet assess TRACE [--json] [-o DIR] [--format F] [--scenario FILE] [--set K=V]...\n"
            "  kvfleet report DIR [--format html|md]\n"
            "  kvfleet compare DIR... [--json]\n"
            "  kvfleet version\n",
            KVF_VERSION);
}

int main(int argc, char **argv) {
    // jansson through the checked allocator: out of memory while building a summary ends
    // the run with a message (exit 1) instead of a summary with keys silently missing
    json_set_alloc_funcs(kvf_malloc, free);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {
        {"run", sim_cli_run},         {"trace", trc_cli_main},
        {"engine", sim_cli_engine},   {"validate", sim_cli_validate},
        {"sweep", sim_cli_sweep},     {"plan", sim_cli_plan},
        {"assess", sim_cli_assess},
        {"report", rpt_report_cli_main}, {"compare", rpt_compare_cli_main},
        {"hw", sim_cli_hw},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(cmd, cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("kvfleet %s\n", KVF_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "kvfleet: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
