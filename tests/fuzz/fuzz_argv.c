// tests/fuzz/fuzz_argv.c -- libFuzzer target for the command-line parser (cli/cli_opts.c) and
// the literal shorthands. The input is an argument vector, NUL-separated (at most 64 words),
// parsed against a spec with every shared option and one own option of each kind, the way
// `kvfleet run` declares its own. Checked: the parser never reads past argv, a value it hands
// back is one of the words, an exit code is 0 (--help) or 2; --trace and --seed, when given,
// go through cli_set_literal and a trace path that fits comes back exactly as given (no YAML:
// '#', ': ', quotes, "null" are text). Any crash, sanitizer report or hang is a bug.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_opts.h"
#include "sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { WORDS_MAX = 64 };

static int quiet_usage(FILE *f, int rc) {
    (void)f;
    return rc;
}

static int take_number(const cli_spec *s, const char *opt, const char *val, void *dst) {
    (void)s;
    (void)opt;
    char *end;
    double v = strtod(val, &end);
    if (*end || !(v > 0)) return 2;
    *(double *)dst = v;
    return 0;
}

static bool is_word(char *const *argv, int argc, const char *p) {
    if (!p) return true;
    for (int i = 0; i < argc; i++) {
        size_t n = strlen(argv[i]);
        if (p >= argv[i] && p <= argv[i] + n) return true;   // a word or its attached tail
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[WORDS_MAX + 2];
    int argc = 0;
    argv[argc++] = "run";
    for (size_t i = 0; i <= size && argc < WORDS_MAX + 1;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    const char *pos = NULL, *str = NULL, *jobs = NULL;
    bool flag = false;
    double num = 0;
    const cli_opt opts[] = {
        CLI_OPT_STR("--engine", &str),
        CLI_OPT_FLAG("--no-report", &flag),
        CLI_OPT_CALL("--step-seqs", &num, take_number),
        {.name = "-j", .kind = CLI_STR, .dst = &jobs, .attached = true},
    };
    const cli_spec spec = {.cmd = "run",
                           .usage = quiet_usage,
                           .first = 1,
                           .opts = opts,
                           .nopts = (int)(sizeof opts / sizeof opts[0]),
                           .pos = &pos,
                           .npos = 1,
                           .common = CLI_OUT | CLI_SET | CLI_TRACE | CLI_SEED | CLI_JSON |
                                     CLI_QUIET | CLI_FORCE};
    cli_common c;
    int rc = cli_parse(&spec, argc, argv, &c);
    if (rc != CLI_GO && rc != 0 && rc != 2) abort();
    if (rc == CLI_GO) {
        if (!is_word(argv, argc, pos) || !is_word(argv, argc, str) || !is_word(argv, argc, jobs) ||
            !is_word(argv, argc, c.out) || !is_word(argv, argc, c.trace) ||
            !is_word(argv, argc, c.seed))
            abort();
        if (c.nsets < 0 || c.nsets > CLI_SETS_MAX) abort();
        for (int i = 0; i < c.nsets; i++)
            if (!is_word(argv, argc, c.sets[i])) abort();
        static sim_config cfg;
        kvf_err err = {0};
        if (c.trace) {
            sim_config_default(&cfg);
            kvf_status st = cli_set_literal(&cfg, "workload.trace", c.trace, &err);
            if (st && !err.msg[0]) abort();   // every failure carries a message
            if (!st && strcmp(cfg.workload.trace, c.trace)) abort();   // literal, whole
        }
        if (c.seed) {
            sim_config_default(&cfg);
            memset(&err, 0, sizeof err);
            kvf_status st = cli_set_literal(&cfg, "seed", c.seed, &err);
            if (st && !err.msg[0]) abort();
        }
    }
    free(buf);
    return 0;
}
