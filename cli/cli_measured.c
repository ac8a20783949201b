// cli/cli_measured.c -- `kvfleet validate --measured RUN`: a real benchmark run (vLLM's
// `vllm bench serve` JSON, inference-perf's lifecycle metrics, SGLang's bench_serving JSONL;
// traces/trc_measured.c reads them) rebuilt as a scenario -- its requests as they were sent,
// its engine's batch limits and serving behaviour -- simulated, and compared metric by metric
// (real, simulated, error) with the MAPE of the headline metrics, in text, JSON
// (measured.json) and HTML (measured.html) beside the run's own results.
//
// What is compared is what the benchmark measured: TTFT from send to first token, E2E from
// send to last token, ITL the gap between tokens. A client that recorded several timestamps
// per generated token (trc_measured.token_times_per_token, 2 in inference-perf runs with
// ignore_eos) reports gaps that are that fraction of a decode step: its ITL and TPOT are
// scaled back to one gap per token before comparing, and its ITL percentiles (a mix of real
// gaps and zeros) are not compared.
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_measured.h"
#include "cli_opts.h"

// ---- the run as a scenario ------------------------------------------------------------------
static void note(char *notes, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(char *notes, size_t n, const char *fmt, ...) {
    size_t len = strlen(notes);
    if (len + 3 >= n) return;
    if (len) {
        strcat(notes, "; ");
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes + len, n - len, fmt, ap);
    va_end(ap);
}

static bool file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

// A model id as a run names it ("meta-llama/Llama-2-7b-hf", "mistralai/Mixtral-8x7B-v0.1")
// as the name of a model file: the part after the organisation, lower case, without the
// release suffixes (-hf, -instruct, -v0.1, -v0-1). *out "" when nothing is left.
static void model_file_name(const char *id, char *out, size_t n) {
    const char *s = strrchr(id, '/');
    s = s ? s + 1 : id;
    size_t k = 0;
    for (; s[k] && k + 1 < n; k++)
        out[k] = (char)((s[k] >= 'A' && s[k] <= 'Z') ? s[k] + 32 : s[k]);
    out[k] = '\0';
    static const char *const suffix[] = {"-hf", "-instruct", "-v0.1", "-v0-1", "-chat"};
    for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++)
            if (kvf_endswith(out, suffix[i])) {
                out[strlen(out) - strlen(suffix[i])] = '\0';
                again = true;
            }
    }
}

// The hardware file of a name such as "h100-sxm", "H100 80GB HBM3": the first bundled file
// whose name the text starts with.
static bool hardware_file_name(const char *hw, char *out, size_t n) {
    static const char *const known[] = {"h100", "h200", "h800", "b200", "gb200", "mi300x"};
    char low[64];
    size_t k = 0;
    for (; hw[k] && k + 1 < sizeof low; k++)
        low[k] = (char)((hw[k] >= 'A' && hw[k] <= 'Z') ? hw[k] + 32 : hw[k]);
    low[k] = '\0';
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strncmp(low, known[i], strlen(known[i]))) {
            snprintf(out, n, "%s", known[i]);
            return true;
        }
    return false;
}

static kvf_status set_kv(sim_config *c, kvf_err *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static kvf_status set_kv(sim_config *c, kvf_err *err, const char *fmt, ...) {
    char a[SIM_PATH_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a, sizeof a, fmt, ap);
    va_end(ap);
    return sim_config_set(c, a, err);
}

kvf_status cli_meas_scenario(const trc_measured *m, const cli_meas_setup *s, const char *trace_path,
                             sim_config *cfg, char *notes, size_t n, kvf_err *err) {
    KVF_ASSERT(m && s && trace_path && cfg && notes);
    const trc_measured_config *mc = &m->config;
    kvf_status st = s->scenario ? sim_config_load(cfg, s->scenario, err) : KVF_OK;
    if (st) return st;
    if (!s->scenario) sim_config_default(cfg);
    // the model: --model, else the run's model id as a bundled model file
    char model[160] = "";
    if (s->model)
        snprintf(model, sizeof model, "%s", s->model);
    else if (mc->model[0])
        model_file_name(mc->model, model, sizeof model);
    if (!model[0])
        return kvf_fail(err, KVF_EINVAL, "%s: the run does not name its model; give --model",
                        m->path);
    snprintf(cfg->model, sizeof cfg->model, "%s", model);
    char path[SIM_PATH_MAX + 160];
    sim_config_model_path(cfg, path, sizeof path);
    if (!s->model && !file_exists(path))
        return kvf_fail(err, KVF_EINVAL,
                        "%s: model '%s' has no model file (looked for %s); give --model NAME or a "
                        "path to a model YAML",
                        m->path, mc->model, path);
    char hw[64] = "";
    if (s->hardware)
        snprintf(hw, sizeof hw, "%s", s->hardware);
    else if (!mc->hardware[0] || !hardware_file_name(mc->hardware, hw, sizeof hw))
        return kvf_fail(err, KVF_EINVAL,
                        "%s: the run does not say which GPU it ran on%s%s%s; give --hardware "
                        "(e.g. h100)",
                        m->path, mc->hardware[0] ? " ('" : "", mc->hardware,
                        mc->hardware[0] ? "' is not a bundled hardware file)" : "");
    int tp = mc->tp > 0 ? mc->tp : 1;
    if (mc->tp <= 0) note(notes, n, "tensor parallel size not recorded: 1");
    int seqs = mc->max_num_seqs > 0 ? mc->max_num_seqs : 256;
    int toks = mc->max_num_batched_tokens > 0 ? mc->max_num_batched_tokens : 8192;
    if (mc->max_num_seqs <= 0) note(notes, n, "max_num_seqs not recorded: vLLM's 256");
    if (mc->max_num_batched_tokens <= 0)
        note(notes, n, "max_num_batched_tokens not recorded: vLLM's 8192");
    const char *preset = "vllm";
    if (strstr(mc->backend, "sglang"))
        preset = "sglang";
    else if (strstr(mc->backend, "trt"))
        preset = "trtllm";
    // one colocated instance of TP GPUs, as a single server ran it; no SSD or DRAM tier
    const char *fixed[] = {"cluster.mode=colocated",      "cluster.decode.instances=0",
                           "cluster.prefill.instances=1", "kv_cache.ssd.capacity_tb=0",
                           "kv_cache.block_tokens=16",    "workload.format=kvfleet"};
    for (size_t i = 0; !st && i < sizeof fixed / sizeof fixed[0]; i++)
        st = sim_config_set(cfg, fixed[i], err);
    if (!st) st = cli_set_literal(cfg, "model", model, err);
    if (!st) st = cli_set_literal(cfg, "hardware", hw, err);
    if (!st) st = set_kv(cfg, err, "cluster.prefill.gpus_per_instance=%d", tp);
    if (!st) st = set_kv(cfg, err, "cluster.prefill.tp=%d", tp);
    if (!st) st = set_kv(cfg, err, "cluster.prefill.max_batch_requests=%d", seqs);
    if (!st) st = set_kv(cfg, err, "cluster.prefill.max_batch_tokens=%d", toks);
    if (!st)
        st = set_kv(cfg, err, "kv_cache.prefix_cache=%s",
                    mc->prefix_caching == 0 ? "false" : "true");
    if (!st) st = set_kv(cfg, err, "serving.preset=%s", preset);
    if (!st && isfinite(mc->client_timeout_s) && mc->client_timeout_s > 0)
        st = set_kv(cfg, err, "serving.client_timeout_s=%.17g", mc->client_timeout_s);
    if (!st) st = cli_set_literal(cfg, "workload.trace", trace_path, err);
    if (!st) st = set_kv(cfg, err, "seed=%llu", (unsigned long long)s->seed);
    if (!st && s->fit) st = cli_set_literal(cfg, "serving.fit", s->fit, err);
    for (int i = 0; !st && i < s->n_sets; i++)
        st = sim_config_set(cfg, s->sets[i], err);
    if (st) return st;
    if (mc->prefix_caching < 0) note(notes, n, "prefix caching not recorded: on (vLLM's default)");
    snprintf(cfg->name, sizeof cfg->name, "measured-%.60s", model);
    return sim_config_validate(cfg, err);
}

// ---- the comparison ---------------------------------------------------------------------------
static double jnum(const json_t *o, const char *a, const char *b) {
    const json_t *x = json_object_get(json_object_get(o, a), b);
    return json_is_number(x) ? json_number_value(x) : NAN;
}

void cli_meas_compare(const trc_measured *m, const json_t *sm, cli_meas_table *t) {
    KVF_ASSERT(m && sm && t);
    const trc_measured_summary *r = &m->summary;
    double tt = m->token_times_per_token;
    // several timestamps per token: the recorded gaps are that fraction of a decode step
    double gs = isfinite(tt) && tt > 1.5 ? tt : 1;
    struct {
        const char *name, *sec, *key;
        double real;
    } row[CLI_MEAS_METRICS] = {
        {"ttft_ms.mean", "ttft_ms", "mean", r->ttft_s.mean * 1e3},
        {"ttft_ms.p90", "ttft_ms", "p90", r->ttft_s.p90 * 1e3},
        {"itl_ms.mean", "itl_ms", "mean", r->itl_s.mean * 1e3 * gs},
        {"e2e_ms.mean", "e2e_ms", "mean", r->e2e_s.mean * 1e3},
        {"ttft_ms.p50", "ttft_ms", "p50", r->ttft_s.p50 * 1e3},
        {"ttft_ms.p99", "ttft_ms", "p99", r->ttft_s.p99 * 1e3},
        {"itl_ms.p90", "itl_ms", "p90", gs == 1 ? r->itl_s.p90 * 1e3 : NAN},
        {"tpot_ms.mean", "tpot_ms", "mean", r->tpot_s.mean * 1e3 * gs},
        {"tpot_ms.p50", "tpot_ms", "p50", r->tpot_s.p50 * 1e3 * gs},
        {"tpot_ms.p90", "tpot_ms", "p90", r->tpot_s.p90 * 1e3 * gs},
        {"e2e_ms.p50", "e2e_ms", "p50", r->e2e_s.p50 * 1e3},
        {"e2e_ms.p90", "e2e_ms", "p90", r->e2e_s.p90 * 1e3},
        {"e2e_ms.p99", "e2e_ms", "p99", r->e2e_s.p99 * 1e3},
        {"throughput.output_tok_s", "throughput", "output_tok_s", r->output_tok_s},
    };
    double sum = 0;
    int k = 0;
    for (int i = 0; i < CLI_MEAS_METRICS; i++) {
        cli_meas_metric *x = &t->m[i];
        x->name = row[i].name;
        x->real = row[i].real;
        x->sim = jnum(sm, row[i].sec, row[i].key);
        x->error_pct = isfinite(x->real) && x->real > 0 && isfinite(x->sim)
                           ? 100 * (x->sim - x->real) / x->real
                           : NAN;
        if (i < CLI_MEAS_PRIMARY && isfinite(x->error_pct)) sum += fabs(x->error_pct), k++;
    }
    t->n_mape = k;
    t->mape_pct = k ? sum / k : NAN;
}

static json_t *num_or_null(double v) {
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *cli_meas_table_json(const cli_meas_table *t) {
    json_t *o = json_object();
    for (int i = 0; i < CLI_MEAS_METRICS; i++) {
        const cli_meas_metric *x = &t->m[i];
        char sec[48];
        const char *dot = strrchr(x->name, '.');
        snprintf(sec, sizeof sec, "%.*s", (int)(dot - x->name), x->name);
        json_t *s = json_object_get(o, sec);
        if (!s) json_object_set_new(o, sec, s = json_object());
        json_t *e = json_object();
        json_object_set_new(e, "real", num_or_null(x->real));
        json_object_set_new(e, "sim", num_or_null(x->sim));
        json_object_set_new(e, "error_pct", num_or_null(x->error_pct));
        json_object_set_new(s, dot + 1, e);
    }
    json_object_set_new(o, "mape_pct", num_or_null(t->mape_pct));
    json_t *mm = json_array();
    for (int i = 0; i < CLI_MEAS_PRIMARY; i++)
        json_array_append_new(mm, json_string(t->m[i].name));
    json_object_set_new(o, "mape_metrics", mm);
    return o;
}

// ---- the command ------------------------------------------------------------------------------
static volatile int g_interrupt;
static void on_signal(int sig) {
    (void)sig;
    g_interrupt = 1;
}

static int usage(FILE *f, int rc) {
    fprintf(f,
            "usage: kvfleet validate --measured RUN [--format vllm|inference-perf|sglang]\n"
            "                        [--run N] [--model M] [--hardware H] [--scenario S]\n"
            "                        [--fit FILE] [--set K=V]... [--seed N] [-o DIR] [--force]\n"
            "                        [--json] [-q]\n"
            "  RUN is a vllm bench serve result JSON, an inference-perf run folder (or its\n"
            "  summary file) or SGLang bench_serving JSONL. Rebuilds its workload and server as\n"
            "  a scenario, simulates it and prints real | simulated | error per metric and the\n"
            "  MAPE of TTFT mean, TTFT p90, ITL mean and E2E mean. -o DIR keeps measured.json,\n"
            "  measured.html, the trace, summary.json, results.db and report.html.\n");
    return rc;
}

static void print_table(const trc_measured *m, const cli_meas_table *t, const char *notes) {
    printf("measured run %s (%s, %s", m->path, trc_measured_format_name(m->format),
           m->config.model[0] ? m->config.model : "model ?");
    if (m->config.tp > 0) printf(", TP %d", m->config.tp);
    printf(")\n  %-26s %12s %12s %9s\n", "metric", "real", "simulated", "error");
    for (int i = 0; i < CLI_MEAS_METRICS; i++) {
        const cli_meas_metric *x = &t->m[i];
        if (!isfinite(x->real) && !isfinite(x->sim)) continue;
        if (isfinite(x->error_pct))
            printf("  %-26s %12.4g %12.4g %+8.1f%%\n", x->name, x->real, x->sim, x->error_pct);
        else
            printf("  %-26s %12.4g %12.4g %9s\n", x->name, x->real, x->sim, "-");
    }
    printf("  MAPE (%s, %s, %s, %s): %.1f %% over %d metrics\n", t->m[0].name, t->m[1].name,
           t->m[2].name, t->m[3].name, t->mape_pct, t->n_mape);
    if (notes[0]) printf("  assumed: %s\n", notes);
}

static void html_escape(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

static kvf_status write_html(const char *dir, const trc_measured *m, const cli_meas_table *t,
                             const char *notes, kvf_err *err) {
    char path[SIM_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/measured.html", dir);
    FILE *f = fopen(path, "w");
    if (!f) return kvf_fail(err, KVF_EIO, "%s: %s", path, strerror(errno));
    fprintf(f,
            "<!doctype html><meta charset=utf-8><title>measured run vs simulation</title>\n"
            "<style>body{font:14px sans-serif;margin:2em}td,th{padding:2px 10px;text-align:right}"
            "td:first-child,th:first-child{text-align:left}.bad{color:#b00}</style>\n"
            "<h1>Measured run against the simulation</h1>\n<p>Run <code>");
    html_escape(f, m->path);
    fprintf(f,
            "</code> (%s). MAPE of the headline metrics: <b id=mape>%.1f %%</b>.</p>\n"
            "<p>Inputs: the run's requests (arrivals and lengths as sent) and its server "
            "configuration; outputs: the simulated column.</p>\n<table><tr><th>metric<th>real"
            "<th>simulated<th>error\n",
            trc_measured_format_name(m->format), t->mape_pct);
    for (int i = 0; i < CLI_MEAS_METRICS; i++) {
        const cli_meas_metric *x = &t->m[i];
        if (!isfinite(x->real) && !isfinite(x->sim)) continue;
        fprintf(f, "<tr><td>%s<td>%.4g<td>%.4g<td%s>", x->name, x->real, x->sim,
                isfinite(x->error_pct) && fabs(x->error_pct) > 10 ? " class=bad" : "");
        if (isfinite(x->error_pct))
            fprintf(f, "%+.1f %%\n", x->error_pct);
        else
            fprintf(f, "&ndash;\n");
    }
    fprintf(f, "</table>\n");
    if (notes[0]) {
        fprintf(f, "<p>Assumed: ");
        html_escape(f, notes);
        fprintf(f, "</p>\n");
    }
    return fclose(f) ? kvf_fail(err, KVF_EIO, "%s: %s", path, strerror(errno)) : KVF_OK;
}

typedef struct meas_args {
    const char *run, *out;
    trc_measured_format fmt;
    int run_idx;
    cli_meas_setup setup;
    const char *sets[64];
    bool json, quiet, force;
} meas_args;

static int parse(int argc, char **argv, meas_args *a) {
    memset(a, 0, sizeof *a);
    a->run_idx = -1;
    a->setup.seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        bool valued = !strcmp(o, "--measured") || !strcmp(o, "--format") || !strcmp(o, "--run") ||
                      !strcmp(o, "--model") || !strcmp(o, "--hardware") ||
                      !strcmp(o, "--scenario") || !strcmp(o, "--fit") || !strcmp(o, "--set") ||
                      !strcmp(o, "--seed") || !strcmp(o, "-o");
        if (valued && i + 1 >= argc) {
            fprintf(stderr, "kvfleet validate: option %s needs a value\n", o);
            return 2;
        }
        const char *v = valued ? argv[++i] : NULL;
        if (!strcmp(o, "--measured"))
            a->run = v;
        else if (!strcmp(o, "--format")) {
            if (!trc_measured_format_parse(v, &a->fmt)) {
                fprintf(stderr,
                        "kvfleet validate: --format %s: expected vllm, inference-perf or sglang\n",
                        v);
                return 2;
            }
        } else if (!strcmp(o, "--run") || !strcmp(o, "--seed")) {
            char *end;
            errno = 0;
            long long x = strtoll(v, &end, 10);
            if (*end || end == v || errno || x < (strcmp(o, "--run") ? 0 : -1) || x > 1000000000) {
                fprintf(stderr, "kvfleet validate: %s %s: expected a whole number\n", o, v);
                return 2;
            }
            if (!strcmp(o, "--run"))
                a->run_idx = (int)x;
            else
                a->setup.seed = (uint64_t)x;
        } else if (!strcmp(o, "--model"))
            a->setup.model = v;
        else if (!strcmp(o, "--hardware"))
            a->setup.hardware = v;
        else if (!strcmp(o, "--scenario"))
            a->setup.scenario = v;
        else if (!strcmp(o, "--fit"))
            a->setup.fit = v;
        else if (!strcmp(o, "--set")) {
            if (a->setup.n_sets >= 64) {
                fprintf(stderr, "kvfleet validate: at most 64 --set\n");
                return 2;
            }
            a->sets[a->setup.n_sets++] = v;
        } else if (!strcmp(o, "-o"))
            a->out = v;
        else if (!strcmp(o, "--json"))
            a->json = true;
        else if (!strcmp(o, "-q") || !strcmp(o, "--quiet"))
            a->quiet = true;
        else if (!strcmp(o, "--force"))
            a->force = true;
        else if (!strcmp(o, "--help") || !strcmp(o, "-h"))
            return usage(stdout, 0) - 1;
        else {
            fprintf(stderr, "kvfleet validate --measured: unknown option '%s'\n", o);
            return 2;
        }
    }
    a->setup.sets = a->sets;
    if (!a->run) {
        fprintf(stderr, "kvfleet validate: --measured needs a run\n");
        return 2;
    }
    return 0;
}

static int fail(kvf_err *err, kvf_status st) {
    fprintf(stderr, "kvfleet: %s\n", err->msg);
    return st == KVF_ERUN || st == KVF_ENOMEM || st == KVF_EIO ? 1 : 2;
}

int cli_validate_measured(int argc, char **argv) {
    meas_args a;
    int rc = parse(argc, argv, &a);
    if (rc == -1) return 0;
    if (rc) return usage(stderr, rc);
    kvf_err err = {0};
    trc_measured m;
    kvf_status st = trc_measured_read(a.run, a.fmt, a.run_idx, &m, &err);
    if (st) return fail(&err, st);
    sim_outdir od = {.lock_fd = -1};
    char dir[SIM_PATH_MAX + 64] = "", trace[SIM_PATH_MAX + 96], notes[1024] = "";
    bool began = false;
    if (a.out) {
        if ((st = sim_outdir_begin(&od, a.out, a.force, &err))) goto out;
        began = true;
        if ((st = sim_outdir_check_input(&od, "measured run", a.run, &err))) goto out;
        if ((st = sim_outdir_check_input(&od, "fit file", a.setup.fit, &err))) goto out;
        snprintf(dir, sizeof dir, "%s", od.tmp);
    } else {
        snprintf(dir, sizeof dir, "/tmp/kvfleet-measured.XXXXXX");
        if (!mkdtemp(dir)) {
            st =
                kvf_fail(&err, KVF_EIO, "cannot create a temporary directory: %s", strerror(errno));
            dir[0] = '\0';
            goto out;
        }
    }
    snprintf(trace, sizeof trace, "%s/trace.jsonl", dir);
    if ((st = trc_measured_write_trace(&m, trace, 16, a.setup.seed, NULL, &err))) goto out;
    sim_config *cfg = kvf_malloc(sizeof *cfg);
    st = cli_meas_scenario(&m, &a.setup, trace, cfg, notes, sizeof notes, &err);
    if (!st) {
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        sim_run_opts o = {.out_dir = dir,
                          .quiet = a.quiet || a.json,
                          .write_db = true,
                          .interrupt = &g_interrupt};
        void *sj = NULL;
        st = sim_run(cfg, &o, &sj, &err);
        if (!st) {
            cli_meas_table t;
            cli_meas_compare(&m, sj, &t);
            json_t *v = json_object();
            json_object_set_new(v, "run", json_string(m.path));
            json_object_set_new(v, "format", json_string(trc_measured_format_name(m.format)));
            json_object_set_new(v, "run_notes", json_string(m.notes));
            json_object_set_new(v, "assumed", json_string(notes));
            json_object_set_new(v, "measured", cli_meas_table_json(&t));
            json_object_set_new(v, "config", sim_config_to_json(cfg));
            char p[SIM_PATH_MAX + 32];
            snprintf(p, sizeof p, "%s/measured.json", dir);
            if (json_dump_file(v, p, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(10)))
                st = kvf_fail(&err, KVF_EIO, "%s: cannot write", p);
            if (!st) st = write_html(dir, &m, &t, notes, &err);
            if (!st && a.json) {
                json_dumpf(v, stdout, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(10));
                printf("\n");
            } else if (!st && !a.quiet) {
                print_table(&m, &t, notes);
            }
            json_decref(v);
        }
        json_decref(sj);
    }
    free(cfg);
    if (!st && a.out) {
        st = sim_outdir_commit(&od, &err);
        began = false;
        if (!st && !a.quiet && !a.json)
            printf("results in %s/ (measured.json, measured.html, summary.json)\n", a.out);
    }
out:
    if (began) sim_outdir_abort(&od);
    if (!a.out && dir[0] == '/') sim_remove_tree(dir);
    trc_measured_free(&m);
    if (g_interrupt && !st) st = KVF_EINTR;
    return st ? fail(&err, st) : 0;
}

int cli_validate_any(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--measured")) return cli_validate_measured(argc, argv);
    return cli_validate(argc, argv);
}
