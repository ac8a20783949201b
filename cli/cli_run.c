// cli/cli_run.c -- `kvfleet run SCENARIO`: options, signals, the run (sim_run) and the
// headline it prints.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"
#include "sim.h"
#include "sim_run.h"
#include "rpt_util.h"

// ---- command line ----------------------------------------------------------------------------
static volatile int g_interrupt;

static void on_signal(int sig) {
    (void)sig;
    g_interrupt = 1;
}

static double jget(json_t *s, const char *a, const char *b) {
    json_t *o = json_object_get(s, a);
    if (b) o = json_object_get(o, b);
    return json_is_number(o) ? json_number_value(o) : NAN;
}

// One latency line of the headline: mean and percentiles with `digits` decimals; a latency no
// request measured is null in the summary, n/a here (why: `none`).
static void print_latency(json_t *s, const char *name, const char *key, int digits,
                          const char *none) {
    if (isnan(jget(s, key, "mean"))) {
        printf("  %s ms      n/a (%s)\n", name, none);
        return;
    }
    printf("  %s ms      mean %.*f  p50 %.*f  p90 %.*f  p99 %.*f\n", name, digits,
           jget(s, key, "mean"), digits, jget(s, key, "p50"), digits, jget(s, key, "p90"), digits,
           jget(s, key, "p99"));
}

static void print_headline(json_t *s, const char *out_dir, bool report) {
    json_t *rq = json_object_get(s, "requests");
    printf("scenario %s  (%s on %s, %s, %s step model)\n",
           json_string_value(json_object_get(s, "scenario")),
           json_string_value(json_object_get(s, "model")),
           json_string_value(json_object_get(s, "hardware")),
           json_string_value(json_object_get(s, "mode")),
           json_string_value(json_object_get(s, "step_model")));
    char span[32];
    rpt_fmt_duration(jget(s, "sim", "simulated_s"), span, sizeof span);
    printf("  requests     %lld arrived, %lld completed, %lld rejected over %s simulated\n",
           (long long)json_integer_value(json_object_get(rq, "arrived")),
           (long long)json_integer_value(json_object_get(rq, "completed")),
           (long long)json_integer_value(json_object_get(rq, "rejected")), span);
    print_latency(s, "TTFT", "ttft_ms", 1, "no request completed");
    print_latency(s, "TPOT", "tpot_ms", 2, "no completed request had a second token");
    printf("  throughput   %.0f input tok/s, %.0f output tok/s; per GPU: prefill %.0f in tok/s, "
           "decode %.0f out tok/s\n",
           jget(s, "throughput", "input_tok_s"), jget(s, "throughput", "output_tok_s"),
           jget(s, "throughput", "prefill_input_tok_s_per_gpu"),
           jget(s, "throughput", "decode_output_tok_s_per_gpu"));
    json_t *bt = json_object_get(json_object_get(s, "cache"), "by_tier");
    printf("  cache        hit rate %.1f %% (hbm %.1f, dram %.1f, ssd %.1f)\n",
           100 * jget(s, "cache", "hit_rate"), 100 * json_number_value(json_object_get(bt, "hbm")),
           100 * json_number_value(json_object_get(bt, "dram")),
           100 * json_number_value(json_object_get(bt, "ssd")));
    long long vis =
        (long long)json_integer_value(json_object_get(json_object_get(s, "gpus"), "vision"));
    char vgpus[48] = "", vutil[48] = "";
    if (vis > 0) {
        snprintf(vgpus, sizeof vgpus, "vision %lld, ", vis);
        snprintf(vutil, sizeof vutil, "vision %.0f %%, ", 100 * jget(s, "utilization", "vision"));
    }
    const char *mode = json_string_value(json_object_get(s, "mode"));
    if (mode && !strcmp(mode, "colocated"))   // one mixed pool, counted under prefill
        printf(
            "  GPUs         %scolocated %lld; %.1f GPU-hours; utilisation %scolocated %.0f %%\n",
            vgpus,
            (long long)json_integer_value(json_object_get(json_object_get(s, "gpus"), "prefill")),
            jget(s, "gpu_hours", NULL), vutil, 100 * jget(s, "utilization", "prefill"));
    else
        printf(
            "  GPUs         %sprefill %lld, decode %lld; %.1f GPU-hours; utilisation %sprefill "
            "%.0f %%, decode %.0f %%\n",
            vgpus,
            (long long)json_integer_value(json_object_get(json_object_get(s, "gpus"), "prefill")),
            (long long)json_integer_value(json_object_get(json_object_get(s, "gpus"), "decode")),
            jget(s, "gpu_hours", NULL), vutil, 100 * jget(s, "utilization", "prefill"),
            100 * jget(s, "utilization", "decode"));
    printf("  SLO          attainment %.1f %% (TTFT p90 <= %g ms, TPOT p90 <= %g ms)\n",
           100 * jget(s, "slo", "attainment"), jget(s, "slo", "ttft_p90_ms"),
           jget(s, "slo", "tpot_p90_ms"));
    json_t *e = json_object_get(s, "economics");
    if (json_is_object(e)) {
        char mg[32] = "n/a (no revenue)";
        if (!isnan(jget(e, "margin", NULL)))
            snprintf(mg, sizeof mg, "%.1f %%", 100 * jget(e, "margin", NULL));
        // under a day_profile the margin is the day's (its other hours carry other traffic on
        // the same fleet), not the run's revenue over its cost printed beside it
        const char *basis = json_string_value(json_object_get(e, "day_basis"));
        bool profiled = basis && !strncmp(basis, "day_profile", 11);
        printf("  economics    cost $%.2f, revenue $%.2f, margin %s%s, $%.2f per GPU-hour\n",
               jget(e, "cost_usd", NULL), jget(e, "revenue_usd", NULL), mg,
               profiled ? " over the profiled day" : "", jget(e, "cost_per_gpu_hour_usd", NULL));
    }
    printf("  saturation   %s\n",
           json_string_value(json_object_get(json_object_get(s, "saturation"), "state")));
    json_t *smp = json_object_get(s, "sampling");
    if (json_is_object(smp)) {
        json_t *sr = json_object_get(smp, "requests"),
               *is = json_object_get(smp, "instances_scaled");
        char fleet[160] = "";
        size_t fn = 0;
        static const char *const pools[] = {"vision", "prefill", "decode"};
        for (int k = 0; k < 3 && fn < sizeof fleet; k++) {
            json_t *pe = json_object_get(is, pools[k]);
            long long full = (long long)json_integer_value(json_object_get(pe, "full"));
            if (full <= 0) continue;
            fn += (size_t)snprintf(fleet + fn, sizeof fleet - fn, "%s%s %lld -> %lld",
                                   fn ? ", " : "", pools[k], full,
                                   (long long)json_integer_value(json_object_get(pe, "sampled")));
        }
        printf(
            "  sampled      R = %g: %lld of %lld requests kept (%.1f %%), on a fleet scaled by R "
            "(instances %s); totals are for the full fleet (summary.json sampling)\n",
            jget(smp, "rate", NULL), (long long)json_integer_value(json_object_get(sr, "kept")),
            (long long)json_integer_value(json_object_get(sr, "read")),
            100 * jget(sr, "kept_share", NULL), fleet);
    }
    const char *tn = json_string_value(json_object_get(json_object_get(s, "trace"), "notes"));
    const char *fn = tn ? strstr(tn, "workload.format ") : NULL;
    if (fn) printf("  note         %.*s\n", (int)strcspn(fn, ";"), fn);
    if (json_is_true(json_object_get(json_object_get(s, "steps"), "extrapolated")))
        printf("  note         the calibrated step model extrapolated outside its profile in %lld "
               "steps\n",
               (long long)json_integer_value(
                   json_object_get(json_object_get(s, "steps"), "extrapolated_steps")));
    printf("  simulator    %.0f events in %.2f s wall (%.2f M events/s)\n",
           jget(s, "sim", "events"), jget(s, "sim", "wall_s"),
           jget(s, "sim", "events_per_s") / 1e6);
    if (out_dir)
        printf("results in %s/ (summary.json, results.db%s)\n", out_dir,
               report ? ", report.html" : "");
}

// "FROM:TO" in seconds, both finite, 0 <= FROM < TO.
static bool parse_window(const char *s, double *from, double *to) {
    char *end;
    errno = 0;
    double a = strtod(s, &end);
    if (end == s || *end != ':' || errno) return false;
    const char *b0 = end + 1;
    double b = strtod(b0, &end);
    if (end == b0 || *end || errno) return false;
    if (!isfinite(a) || !isfinite(b) || a < 0 || b <= a || b > 9e9) return false;
    *from = a;
    *to = b;
    return true;
}

static int usage_run(FILE *f, int rc) {
    fprintf(f,
            "usage: kvfleet run SCENARIO [-o DIR] [--set K=V]... [--trace FILE] [--seed N]\n"
            "                   [--json] [--quiet] [--no-report] [--force] [--engine cpu|cuda]\n"
            "                   [--trace-out FILE [--trace-window FROM_S:TO_S]]\n"
            "       kvfleet run SCENARIO --explain-step [--step-phase decode|prefill]\n"
            "                   [--step-seqs N_PER_GPU] [--step-context C] [--step-prompt T]\n"
            "                   [--step-chunks N_PER_GPU]\n"
            "                   [--set K=V]...\n"
            "  -q, --quiet     print nothing but errors (no progress, no summary, no JSON)\n"
            "  --no-report     write summary.json and results.db only, no report.html\n"
            "  --json          print summary.json on stdout instead of the summary lines\n"
            "  --trace-out F   write a Chrome/Perfetto trace (steps, KV transfers, storage I/O,\n"
            "                  queue depth per instance) of the --trace-window span\n");
    return rc;
}

// The options of `run` beside the shared ones (cli_opts.h).
typedef struct run_args {
    const char *scenario;
    const char *engine, *timeline, *window;   // --engine, --trace-out, --trace-window
    bool no_report, explain;
    const char *step_phase;   // --explain-step's batch ...
    double step_seqs, step_ctx, step_prompt, step_chunks;
    cli_common c;
} run_args;

// --step-seqs and the like: a number in (0, 1e9] into *(double *)dst.
static int step_number(const cli_spec *s, const char *opt, const char *val, void *dst) {
    char *end;
    double v = strtod(val, &end);
    if (*end || !(v > 0) || v > 1e9) {
        fprintf(stderr, "kvfleet %s: %s wants a number in (0, 1e9], not '%s'\n", s->cmd, opt, val);
        return 2;
    }
    *(double *)dst = v;
    return 0;
}

// Parses run's command line into *a; CLI_GO or the exit code.
static int run_parse(int argc, char **argv, run_args *a) {
    memset(a, 0, sizeof *a);
    a->step_phase = "decode";
    const cli_opt opts[] = {
        CLI_OPT_STR("--engine", &a->engine),
        CLI_OPT_STR("--trace-out", &a->timeline),
        CLI_OPT_STR("--trace-window", &a->window),
        CLI_OPT_FLAG("--no-report", &a->no_report),
        CLI_OPT_FLAG("--explain-step", &a->explain),
        CLI_OPT_STR("--step-phase", &a->step_phase),
        CLI_OPT_CALL("--step-seqs", &a->step_seqs, step_number),
        CLI_OPT_CALL("--step-context", &a->step_ctx, step_number),
        CLI_OPT_CALL("--step-prompt", &a->step_prompt, step_number),
        CLI_OPT_CALL("--step-chunks", &a->step_chunks, step_number),
    };
    const cli_spec spec = {.cmd = "run",
                           .usage = usage_run,
                           .first = 1,
                           .opts = opts,
                           .nopts = (int)(sizeof opts / sizeof opts[0]),
                           .pos = &a->scenario,
                           .npos = 1,
                           .common = CLI_OUT | CLI_SET | CLI_TRACE | CLI_SEED | CLI_JSON |
                                     CLI_QUIET | CLI_FORCE};
    int rc = cli_parse(&spec, argc, argv, &a->c);
    if (rc == CLI_GO && !a->scenario) return usage_run(stderr, 2);
    return rc;
}

// The scenario over the defaults, then --set in order, --trace and --seed; validated.
static kvf_status run_config(sim_config *cfg, const run_args *a, kvf_err *err) {
    sim_config_default(cfg);
    kvf_status st = sim_config_load(cfg, a->scenario, err);
    for (int i = 0; !st && i < a->c.nsets; i++)
        st = sim_config_set(cfg, a->c.sets[i], err);
    // the shorthands set their key literally: a file named 'x #1.jsonl' is that file
    if (!st && a->c.trace) st = cli_set_literal(cfg, "workload.trace", a->c.trace, err);
    if (!st && a->c.seed) st = cli_set_literal(cfg, "seed", a->c.seed, err);
    if (!st) st = sim_config_validate(cfg, err);
    if (!st) st = sim_config_check_output(cfg, "--trace-out", a->timeline, err);
    return st;
}

// Checks --engine and --trace-window and fills the run's options but the directory; 0 or 2.
static int run_opts(const run_args *a, sim_run_opts *o) {
    if (a->engine && strcmp(a->engine, "cpu") && strcmp(a->engine, "cuda")) {
        fprintf(stderr, "kvfleet run: --engine must be cpu or cuda, not '%s'\n", a->engine);
        return 2;
    }
    *o = (sim_run_opts){.quiet = a->c.quiet || a->c.json,
                        .write_db = true,
                        .engine_backend = a->engine,
                        .timeline_path = a->timeline,
                        .interrupt = &g_interrupt};
    if (a->window && !parse_window(a->window, &o->timeline_from_s, &o->timeline_to_s)) {
        fprintf(stderr,
                "kvfleet run: --trace-window wants FROM_S:TO_S with 0 <= FROM_S < TO_S "
                "(seconds), not '%s'\n",
                a->window);
        return 2;
    }
    if (a->window && !a->timeline) {
        fprintf(stderr, "kvfleet run: --trace-window needs --trace-out FILE\n");
        return 2;
    }
    return 0;
}

// Runs cfg into out's temporary directory and, when it finished or was interrupted, writes
// the report (unless --no-report) and commits the directory. An interrupted run over an
// earlier result (--force) commits nothing: the temporary directory goes and the earlier
// result stays as it was. Returns 0 with *summary set (an interrupted run: *st KVF_EINTR),
// else the exit code after printing the message.
static int run_into(const sim_config *cfg, sim_run_opts *o, const char *out, const run_args *a,
                    json_t **summary, kvf_status *st) {
    kvf_err err = {0};
    sim_outdir od;
    // first: a signal from here on stops the run through sim_run's check, never mid-commit
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    *st = sim_outdir_begin(&od, out, a->c.force, &err);
    if (!*st) *st = sim_outdir_check_config(&od, cfg, &err);
    if (!*st) *st = sim_outdir_check_output(&od, "--trace-out", a->timeline, &err);
    if (*st) {
        sim_outdir_abort(&od);
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(*st);
    }
    o->out_dir = od.tmp;
    void *sj = NULL;
    *st = g_interrupt ? KVF_EINTR : sim_run(cfg, o, &sj, &err);
    json_t *s = sj;
    if (*st == KVF_EINTR && (od.had_result || !s)) {
        sim_outdir_abort(&od);
        json_decref(s);
        if (od.had_result)
            fprintf(stderr,
                    "kvfleet: interrupted; nothing written, the earlier result in %s is "
                    "kept as it was\n",
                    od.final);
        else
            fprintf(stderr, "kvfleet: interrupted; nothing written to %s\n", od.final);
        return 1;
    }
    if (*st && *st != KVF_EINTR) {
        sim_outdir_abort(&od);
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(*st);
    }
    if (!a->no_report && *st == KVF_OK) {
        kvf_err e2 = {0};
        if (rpt_report_write_as(od.tmp, od.final, true, true, &e2)) {
            sim_outdir_abort(&od);
            json_decref(s);
            fprintf(stderr, "kvfleet: report not written: %s; nothing written to %s\n", e2.msg,
                    od.final);
            return 1;
        }
    }
    kvf_status cst = sim_outdir_commit(&od, &err);
    if (cst) {
        json_decref(s);
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(cst);
    }
    *summary = s;
    return 0;
}

int cli_run(int argc, char **argv) {
    run_args a;
    int rc = run_parse(argc, argv, &a);
    if (rc != CLI_GO) return rc;
    static sim_config cfg;
    kvf_err err = {0};
    kvf_status st = run_config(&cfg, &a, &err);
    if (st) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(st);
    }
    if (a.explain)
        return sim_explain_step(&cfg, a.step_phase, a.step_seqs, a.step_ctx, a.step_prompt,
                                a.step_chunks);
    sim_run_opts o;
    if ((rc = run_opts(&a, &o))) return rc;
    const char *out = a.c.out;
    char outbuf[SIM_PATH_MAX];
    if (!out) {
        snprintf(outbuf, sizeof outbuf, "out/%s", cfg.name[0] ? cfg.name : "run");
        out = outbuf;
    }
    json_t *s = NULL;
    if ((rc = run_into(&cfg, &o, out, &a, &s, &st))) return rc;
    if (a.c.json && !a.c.quiet) {
        char *txt = json_dumps(s, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        printf("%s\n", txt);
        free(txt);
    } else if (!a.c.quiet) {
        print_headline(s, out, !a.no_report);
    }
    json_decref(s);
    if (st == KVF_EINTR) {
        fprintf(stderr, "kvfleet: interrupted; partial results in %s\n", out);
        return 1;
    }
    return 0;
}
