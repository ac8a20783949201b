// cli/main.c -- the kvfleet command: dispatches to the commands of cli/ (cli.h) and of the
// other libraries (trace, report, compare) by name.
// Exit codes: 0 ok; 1 the run failed; 2 bad usage or bad input.
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "eng.h"
#include "kvf.h"
#include "rpt.h"
#include "cli.h"
#include "trc.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "kvfleet %s -- discrete-event simulator of LLM serving clusters\n"
        "\n"
        "usage:\n"
        "  kvfleet run SCENARIO [-o DIR] [--set K=V]... [--trace FILE] [--seed N] [--json]\n"
        "              [-q|--quiet] [--no-report] [--force] [--engine cpu|cuda]\n"
        "              [--trace-out FILE [--trace-window FROM_S:TO_S]]\n"
        "  kvfleet run SCENARIO --explain-step [--step-phase decode|prefill] [--step-seqs N]\n"
        "              [--step-context C] [--step-prompt T] [--step-chunks N] [--set K=V]...\n"
        "  kvfleet sweep SCENARIO --vary K=V1,V2,... [--vary ...] [--set K=V]... [-j N]\n"
        "                [-o DIR] [--json]        (also under mpirun -n N)\n"
        "  kvfleet plan SCENARIO [--slo ttft_p90_ms=X] [--slo tpot_p90_ms=Y] [--max-gpus N]\n"
        "               [--vary-ratio] [--gpus-per-instance LIST] [--find max-rate] [--tol X]\n"
        "               [--prefill-par SHAPES] [--decode-par SHAPES] [--html FILE]\n"
        "               [--set K=V]... [--json]   (exit 3: nothing feasible)\n"
        "  kvfleet compare DIR... [--json] [--all] [--html FILE] [--baseline NAME]\n"
        "  kvfleet report DIR [--format html|md|both]\n"
        "  kvfleet assess TRACE [--json] [-o DIR] [--format F] [--scenario FILE] [--set K=V]...\n"
        "                 [-q|--quiet]\n"
        "  kvfleet trace stats FILE [--format F] [--block-tokens N] [--json] [SHAPING]\n"
        "                [--cache-tokens N,N,...]\n"
        "  kvfleet trace gen --profile chatbot|agent|coding|mixed [--rate R] [--duration S]\n"
        "                [--arrival poisson|gamma|diurnal] [--cv X] [--input-len N]\n"
        "                [--output-len N] [--lengths FILE] [--images P] [--turns X]\n"
        "                [--system-tokens N] [--max-requests N] [--block-tokens N] [--seed N]\n"
        "                [-o FILE] [--days D [--amplitude A] [--peak-hour H]\n"
        "                [--weekend-ratio X] [--start-weekday 0-6] [--warmup-days D]\n"
        "                [--return CLASS=P,MEDIAN_H,SIGMA]...]\n"
        "  kvfleet trace convert FILE -o OUT.jsonl [--format F] [--block-tokens N] [SHAPING]\n"
        "  kvfleet engine profile [--model M] [--backend cpu|cuda] [--quick] [--cpu-clock]\n"
        "                 [-o FILE] [--threads N] [--seed N]\n"
        "  kvfleet engine profile --check PROFILE [--bound-ms X] [--max-ratio R]\n"
        "  kvfleet engine info [--model M] [--backend cpu|cuda]\n"
        "  kvfleet engine bench gemm|attn [--backend cpu|cuda] [--threads N]\n"
        "  kvfleet engine serve --trace FILE [--model M] [--backend B] [SERVING] [-o DIR]\n"
        "                 [--json]\n"
        "  kvfleet engine fit PROFILE [--hardware H] [-o FILE]\n"
        "  kvfleet validate --trace FILE [--model M] [--backend B] [--profile P] [--strict]\n"
        "                   [SERVING] [-o DIR] [--json]\n"
        "  kvfleet validate --measured RUN [--format vllm|inference-perf|sglang] [--run N]\n"
        "                   [--model M] [--hardware H] [--scenario S] [--fit FILE]\n"
        "                   [--set K=V]... [-o DIR] [--force] [--json]\n"
        "  kvfleet fit (--manifest CSV | --measured RUN... --hardware H) -o FILE\n"
        "              [--term KEY:LO:HI:START]... [--max-evals N] [--no-loo]\n"
        "  kvfleet hw check FILE... [-q]\n"
        "  kvfleet version\n"
        "  kvfleet help | --help\n"
        "\n"
        "  SHAPING: [--limit N] [--time-scale X] [--length-scale X] [--rate R] [--start S]\n"
        "           [--end S] [--bucket as_recorded|spread] [--seed N] [--skip-bad]\n"
        "           [--session-rate R] [--session-users N] [--source-block-tokens N]\n"
        "  SERVING: [--format F] [--start S] [--end S] [--limit N] [--time-scale X]\n"
        "           [--length-scale X] [--rate R]\n"
        "           [--skip-bad] [--max-batch-tokens N] [--max-batch-requests N]\n"
        "           [--kv-blocks N] [--block-tokens N] [--threads N]\n"
        "  every command prints its own usage with --help (exit 0); exit codes: 0 ok,\n"
        "  1 the run failed, 2 bad usage or input, 3 plan: nothing feasible\n",
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
    // one row per command: its name and its entry point (argv[0] = the name)
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {
        {"run", cli_run},
        {"trace", trc_cli_main},
        {"engine", cli_engine},
        {"validate", cli_validate_any},
        {"fit", cli_fit},
        {"sweep", cli_sweep},
        {"plan", cli_plan},
        {"assess", cli_assess},
        {"report", rpt_report_cli_main},
        {"compare", rpt_compare_cli_main},
        {"hw", cli_hw},
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
