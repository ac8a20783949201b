// sim/sim_serve.c -- `kvfleet engine serve` (the real engine serving a trace on this machine)
// and `kvfleet validate` (the same trace through the engine and through the simulator,
// calibrated from a profile of this machine, and the error table between them).
//
// Both commands shape the trace the same way (design.md §8 TRACE-SHAPING) and write the shaped
// requests to one canonical JSONL file, open loop, that the engine and the simulator both read:
// whatever differs between the two runs is the model, never the input.
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng.h"
#include "sim.h"
#include "sim_cli.h"

typedef struct shaping {
    int64_t limit;
    double time_scale, length_scale, rate;
    trc_format format;
    bool skip_bad;
} shaping;

typedef struct serve_args {
    const char *trace, *model, *backend, *out, *profile;
    shaping sh;
    bool json;
    uint32_t max_batch_tokens, max_batch_requests, kv_blocks, block_tokens, threads;
} serve_args;

static int usage(FILE *f, const char *cmd, int rc) {
    fprintf(f,
            "usage: kvfleet %s --trace FILE [--model M] [--backend cpu|cuda] [--format F]\n"
            "          [--limit N] [--time-scale X] [--length-scale X] [--rate R] [--skip-bad]\n"
            "          [--max-batch-tokens N] [--max-batch-requests N] [--kv-blocks N]\n"
            "          [--block-tokens N] [--threads N]%s [-o DIR] [--json]\n",
            cmd, strcmp(cmd, "validate") ? "" : " [--profile P]");
    return rc;
}

static bool parse_num(const char *s, double *v) {
    char *e;
    *v = strtod(s, &e);
    return e != s && !*e && isfinite(*v) && *v >= 0;
}

// The options of serve and validate that take a value.
static const char SERVE_VALUED[] =
    "--trace --model --backend -o --profile --format --limit --time-scale --length-scale --rate "
    "--max-batch-tokens --max-batch-requests --kv-blocks --block-tokens --threads";

// Parses the shared options from argv[first..); returns 0 or an exit code.
static int parse_args(int argc, char **argv, const char *cmd, serve_args *a) {
    memset(a, 0, sizeof *a);
    a->model = "tiny-dense";
    a->backend = "cpu";
    a->sh.time_scale = a->sh.length_scale = 1;
    a->max_batch_tokens = 512;
    a->max_batch_requests = 32;
    a->block_tokens = 16;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
        if (!strcmp(o, "--json")) a->json = true;
        else if (!strcmp(o, "--skip-bad")) a->sh.skip_bad = true;
        else if (!v) {
            if (kvf_cli_missing_value(o, true, SERVE_VALUED))
                fprintf(stderr, "kvfleet %s: option '%s' needs a value\n", cmd, o);
            else
                fprintf(stderr, "kvfleet %s: unknown option '%s'\n", cmd, o);
            return usage(stderr, cmd, 2);
        } else if (!kvf_cli_missing_value(o, true, SERVE_VALUED)) {
            fprintf(stderr, "kvfleet %s: unknown option '%s'\n", cmd, o);
            return usage(stderr, cmd, 2);
        } else {
            i++;
            if (!strcmp(o, "--trace")) a->trace = v;
            else if (!strcmp(o, "--model")) a->model = v;
            else if (!strcmp(o, "--backend")) a->backend = v;
            else if (!strcmp(o, "-o")) a->out = v;
            else if (!strcmp(o, "--profile")) a->profile = v;
            else if (!strcmp(o, "--format")) {
                if (!trc_format_parse(v, &a->sh.format)) {
                    fprintf(stderr, "kvfleet %s: --format: unknown format '%s'\n", cmd, v);
                    return 2;
                }
            } else {
                if (!parse_num(v, &x)) {
                    fprintf(stderr, "kvfleet %s: %s: expects a number >= 0, got '%s'\n", cmd, o, v);
                    return 2;
                }
                if (!strcmp(o, "--limit")) a->sh.limit = (int64_t)x;
                else if (!strcmp(o, "--time-scale") && x > 0) a->sh.time_scale = x;
                else if (!strcmp(o, "--length-scale") && x > 0) a->sh.length_scale = x;
                else if (!strcmp(o, "--rate")) a->sh.rate = x;
                else if (!strcmp(o, "--max-batch-tokens") && x >= 1) a->max_batch_tokens = (uint32_t)x;
                else if (!strcmp(o, "--max-batch-requests") && x >= 1) a->max_batch_requests = (uint32_t)x;
                else if (!strcmp(o, "--kv-blocks") && x >= 1) a->kv_blocks = (uint32_t)x;
                else if (!strcmp(o, "--block-tokens") && x >= 1) a->block_tokens = (uint32_t)x;
                else if (!strcmp(o, "--threads")) a->threads = (uint32_t)x;
                else {
                    fprintf(stderr, "kvfleet %s: unknown option or bad value '%s %s'\n", cmd, o, v);
                    return usage(stderr, cmd, 2);
                }
            }
        }
    }
    if (!a->trace) {
        fprintf(stderr, "kvfleet %s: --trace is required\n", cmd);
        return usage(stderr, cmd, 2);
    }
    return 0;
}

// A whole (small) trace in memory: requests with their blocks in one array.
typedef struct mem_trace {
    trc_request *r;     // n requests; r[i].blocks points into blocks once loaded
    uint64_t *blocks;
    size_t n;
} mem_trace;

// Reads rd to its end into *t. Returns the reader's error on a malformed line.
static kvf_status mem_trace_read(trc_reader *rd, mem_trace *t, kvf_err *err) {
    size_t cap = 0, bcap = 0, nb = 0, c0;
    size_t *boff = NULL;
    memset(t, 0, sizeof *t);
    trc_request r;
    int rc;
    while ((rc = trc_reader_next(rd, &r, err)) > 0) {
        c0 = cap;
        kvf_grow((void **)&t->r, &cap, t->n + 1, sizeof *t->r);
        kvf_grow((void **)&boff, &c0, t->n + 1, sizeof *boff);
        kvf_grow((void **)&t->blocks, &bcap, nb + r.n_blocks + 1, sizeof *t->blocks);
        memcpy(t->blocks + nb, r.blocks, r.n_blocks * sizeof *t->blocks);
        t->r[t->n] = r;
        boff[t->n++] = nb;
        nb += r.n_blocks;
    }
    for (size_t i = 0; i < t->n; i++) t->r[i].blocks = t->blocks + boff[i];
    free(boff);
    return rc < 0 ? (err->code ? err->code : KVF_EPARSE) : KVF_OK;
}

static void mem_trace_free(mem_trace *t) {
    free(t->r);
    free(t->blocks);
    memset(t, 0, sizeof *t);
}

// Shapes the trace and writes it, open loop, to path in canonical JSONL at block_tokens.
static kvf_status shape_trace(const serve_args *a, const char *path, size_t *n, char *notes,
                              size_t nn, kvf_err *err) {
    trc_options o;
    trc_options_default(&o);
    o.format = a->sh.format;
    o.block_tokens = a->block_tokens;
    o.time_scale = a->sh.time_scale;
    o.length_scale = a->sh.length_scale;
    o.rate_rps = a->sh.rate;
    o.limit_requests = a->sh.limit;
    o.skip_bad = a->sh.skip_bad;
    o.bucket = TRC_BUCKET_SPREAD;
    trc_reader *rd = NULL;
    trc_writer *w = NULL;
    kvf_status st = trc_reader_open(&rd, a->trace, &o, err);
    if (st) return st;
    st = trc_writer_open(&w, path, a->block_tokens, err);
    if (st) goto done;
    // read all (shaped traces are small), then write in arrival order with ids 0..n-1:
    // closed-loop turns are replayed open loop at their recorded times on both sides
    mem_trace t;
    st = mem_trace_read(rd, &t, err);
    *n = t.n;
    // stable insertion sort by arrival (traces are short and mostly ordered already)
    size_t *order = kvf_malloc((t.n + 1) * sizeof *order);
    for (size_t i = 0; i < t.n; i++) {
        size_t j = i;
        while (j > 0 && t.r[order[j - 1]].arrival_ns > t.r[i].arrival_ns) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (size_t i = 0; i < t.n && !st; i++) {
        trc_request q = t.r[order[i]];
        q.id = i;
        q.prev_id = -1;
        q.think_ns = 0;
        st = trc_writer_put(w, &q, err);
    }
    free(order);
    mem_trace_free(&t);
    snprintf(notes, nn, "%s", trc_reader_notes(rd));
done:
    if (w) {
        kvf_err e2 = {0};
        kvf_status s2 = trc_writer_close(w, &e2);
        if (!st && s2) st = kvf_fail(err, s2, "%s", e2.msg);
    }
    trc_reader_close(rd);
    if (!st && *n == 0) st = kvf_fail(err, KVF_EPARSE, "%s: no requests after shaping", a->trace);
    return st;
}

// Reads the shaped canonical file back into engine requests (blocks copied into one array).
static kvf_status load_requests(const char *path, uint32_t block_tokens, eng_request **out,
                                uint64_t **blocks, size_t *n, kvf_err *err) {
    trc_options o;
    trc_options_default(&o);
    o.format = TRC_FMT_KVFLEET;
    o.block_tokens = block_tokens;
    trc_reader *rd = NULL;
    kvf_status st = trc_reader_open(&rd, path, &o, err);
    if (st) return st;
    mem_trace t;
    st = mem_trace_read(rd, &t, err);
    trc_reader_close(rd);
    if (st) {
        mem_trace_free(&t);
        return st;
    }
    eng_request *rq = kvf_calloc(t.n + 1, sizeof *rq);
    for (size_t i = 0; i < t.n; i++)
        rq[i] = (eng_request){.arrival_ns = t.r[i].arrival_ns, .input_tokens = t.r[i].input_tokens,
                              .output_tokens = t.r[i].output_tokens, .n_blocks = t.r[i].n_blocks,
                              .blocks = t.r[i].n_blocks ? t.r[i].blocks : NULL,
                              .session = t.r[i].session};
    free(t.r);
    *out = rq;
    *blocks = t.blocks;
    *n = t.n;
    return KVF_OK;
}

static json_t *stats(double *v, size_t n) {
    json_t *o = json_object();
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    kvf_sort_doubles(v, n);
    json_object_set_new(o, "mean", json_real(n ? sum / (double)n : 0));
    json_object_set_new(o, "p50", json_real(kvf_percentile_sorted(v, n, 50)));
    json_object_set_new(o, "p90", json_real(kvf_percentile_sorted(v, n, 90)));
    json_object_set_new(o, "p99", json_real(kvf_percentile_sorted(v, n, 99)));
    return o;
}

// Engine results as the summary shape of `kvfleet run` (the keys it can measure).
static json_t *serve_summary(const serve_args *a, const eng_serve_result *r) {
    size_t n = r->n_requests, nt = 0, ok = 0;
    double *ttft = kvf_calloc(n, sizeof *ttft), *tpot = kvf_calloc(n, sizeof *tpot);
    double *e2e = kvf_calloc(n, sizeof *e2e);
    uint64_t out_tok = 0;
    for (size_t i = 0; i < n; i++) {
        const eng_request_result *q = &r->requests[i];
        if (q->status != ENG_REQ_DONE) continue;
        ttft[ok] = (double)(q->first_token_ns - q->arrival_ns) * 1e-6;
        e2e[ok] = (double)(q->completion_ns - q->arrival_ns) * 1e-6;
        ok++;
        out_tok += q->output_tokens;
        if (q->output_tokens > 1)
            tpot[nt++] = (double)(q->last_token_ns - q->first_token_ns) * 1e-6 / (q->output_tokens - 1);
    }
    double wall_s = (double)r->wall_ns * 1e-9, fwd = 0, host = 0;
    for (size_t i = 0; i < r->n_steps; i++) {
        fwd += (double)r->steps[i].forward_ns;
        host += (double)(r->steps[i].duration_ns - r->steps[i].forward_ns);
    }
    json_t *s = json_object();
    json_object_set_new(s, "scenario", json_string("engine-serve"));
    json_object_set_new(s, "kvfleet_version", json_string(KVF_VERSION));
    json_object_set_new(s, "step_model", json_string("engine"));
    json_object_set_new(s, "model", json_string(r->model));
    json_object_set_new(s, "hardware", json_string(r->hardware));
    json_object_set_new(s, "backend", json_string(r->backend));
    json_object_set_new(s, "trace", json_string(a->trace));
    json_t *rq = json_object();
    json_object_set_new(rq, "arrived", json_integer((json_int_t)n));
    json_object_set_new(rq, "completed", json_integer((json_int_t)ok));
    json_object_set_new(rq, "rejected", json_integer((json_int_t)(n - ok)));
    json_object_set_new(s, "requests", rq);
    json_object_set_new(s, "ttft_ms", stats(ttft, ok));
    json_object_set_new(s, "tpot_ms", stats(tpot, nt));
    json_object_set_new(s, "e2e_ms", stats(e2e, ok));
    json_t *tp = json_object();
    json_object_set_new(tp, "input_tok_s", json_real(wall_s > 0 ? (double)r->prompt_tokens / wall_s : 0));
    json_object_set_new(tp, "output_tok_s", json_real(wall_s > 0 ? (double)out_tok / wall_s : 0));
    json_object_set_new(s, "throughput", tp);
    json_t *ca = json_object();
    json_object_set_new(ca, "hit_rate", json_real(r->prompt_tokens ? (double)r->cached_tokens / (double)r->prompt_tokens : 0));
    json_object_set_new(ca, "hit_tokens", json_integer((json_int_t)r->cached_tokens));
    json_object_set_new(ca, "miss_tokens", json_integer((json_int_t)(r->prompt_tokens - r->cached_tokens)));
    json_object_set_new(s, "cache", ca);
    json_t *st = json_object();
    json_object_set_new(st, "steps", json_integer((json_int_t)r->n_steps));
    json_object_set_new(st, "forward_s", json_real(fwd * 1e-9));
    json_object_set_new(st, "host_overhead_ms_per_step", json_real(r->n_steps ? host * 1e-6 / (double)r->n_steps : 0));
    json_object_set_new(st, "preemptions", json_integer((json_int_t)r->preemptions));
    json_object_set_new(s, "steps", st);
    json_t *si = json_object();
    json_object_set_new(si, "wall_s", json_real(wall_s));
    json_object_set_new(si, "simulated_s", json_real(wall_s));
    json_object_set_new(s, "sim", si);
    free(ttft), free(tpot), free(e2e);
    return s;
}

static kvf_status write_serve_db(const char *dir, const serve_args *a, const eng_serve_result *r,
                                 const eng_request *reqs, kvf_err *err) {
    char path[2048];
    snprintf(path, sizeof path, "%s/results.db", dir);
    rpt_db *db = NULL;
    kvf_status st = rpt_db_create(&db, path, err);
    if (st) return st;
    rpt_db_run_set(db, "command", "engine serve", err);
    rpt_db_run_set(db, "trace", a->trace, err);
    rpt_db_run_set(db, "model", r->model, err);
    rpt_db_run_set(db, "backend", r->backend, err);
    rpt_db_run_set(db, "hardware", r->hardware, err);
    for (size_t i = 0; i < r->n_requests && !st; i++) {
        const eng_request_result *q = &r->requests[i];
        bool ok = q->status == ENG_REQ_DONE;
        rpt_request_row row = {
            .id = i, .cls = "chatbot", .session = reqs[i].session,
            .arrival_s = (double)q->arrival_ns * 1e-9, .input_tokens = q->input_tokens,
            .cached_tokens = q->cached_tokens, .output_tokens = q->output_tokens,
            .vision_instance = -1, .prefill_instance = 0, .decode_instance = 0,
            .ttft_s = ok ? (double)(q->first_token_ns - q->arrival_ns) * 1e-9 : NAN,
            .tpot_s = ok && q->output_tokens > 1
                          ? (double)(q->last_token_ns - q->first_token_ns) * 1e-9 / (q->output_tokens - 1)
                          : NAN,
            .e2e_s = ok ? (double)(q->completion_ns - q->arrival_ns) * 1e-9 : NAN,
            .queue_s = (double)(q->admitted_ns - q->arrival_ns) * 1e-9,
            .status = ok ? "completed" : "rejected:kv_capacity",
            .hit_hbm = q->cached_tokens, .preemptions = q->preemptions};
        st = rpt_db_request(db, &row, err);
    }
    for (size_t i = 0; i < r->n_steps && !st; i++) {
        const eng_step_record *k = &r->steps[i];
        double t = (double)(k->start_ns + k->duration_ns) * 1e-9;
        st = rpt_db_timeseries(db, t, "engine", 0, "step_ms", (double)k->duration_ns * 1e-6, err);
        if (!st) st = rpt_db_timeseries(db, t, "engine", 0, "step_tokens", k->tokens, err);
    }
    kvf_err e2 = {0};
    kvf_status s2 = rpt_db_close(db, &e2);
    if (!st && s2) st = kvf_fail(err, s2, "%s", e2.msg);
    return st;
}

static void serve_config(const serve_args *a, eng_serve_config *c) {
    eng_serve_config_default(c);
    c->model = a->model;
    eng_backend_parse(a->backend, &c->backend, NULL);
    c->max_batch_tokens = a->max_batch_tokens;
    c->max_batch_requests = a->max_batch_requests;
    if (a->kv_blocks) c->kv_blocks = a->kv_blocks;
    c->block_tokens = a->block_tokens;
    c->threads = a->threads;
}

// Runs the engine on the shaped trace. *reqs/*blocks are the requests it served.
static kvf_status serve(const serve_args *a, const char *shaped, eng_serve_config *ec,
                        eng_serve_result *res, eng_request **reqs, uint64_t **blocks, size_t *n,
                        kvf_err *err) {
    kvf_status st = load_requests(shaped, a->block_tokens, reqs, blocks, n, err);
    if (st) return st;
    serve_config(a, ec);
    if (!ec->kv_blocks) {
        // the engine's default arena (room for max_batch_requests of the longest request),
        // made explicit so the simulator is given the same capacity
        uint64_t maxlen = 1;
        for (size_t i = 0; i < *n; i++)
            maxlen = KVF_MAX(maxlen, (uint64_t)(*reqs)[i].input_tokens + (*reqs)[i].output_tokens);
        uint64_t per = (maxlen + ec->block_tokens - 1) / ec->block_tokens;
        ec->kv_blocks = (uint32_t)KVF_MIN(per * ec->max_batch_requests, 1u << 20);
    }
    return eng_serve_run(ec, *reqs, *n, res, err);
}

static int fail(kvf_err *err, kvf_status st) {
    fprintf(stderr, "kvfleet: %s\n", err->msg);
    return kvf_exit_code(st);
}

// `kvfleet engine fit PROFILE [--hardware H] [-o FILE]`: fits the roofline's efficiency
// factors (compute, memory, attention, per-step overhead) to a profile and writes them with
// their error, so hardware that was never measured can be predicted from datasheet peaks.
static int engine_fit(int argc, char **argv) {
    const char *path = NULL, *hwname = NULL, *out = NULL;
    if (kvf_cli_help(argc - 1, argv + 1)) {
        printf("usage: kvfleet engine fit PROFILE [--hardware H] [-o FILE]\n"
               "  fits the kernel tables of hardware H (default: the profile's backend) to a\n"
               "  profile from `kvfleet engine profile`; writes FILE, else PROFILE.fit (less .csv)\n");
        return 0;
    }
    for (int i = 2; i < argc; i++) {
        if (kvf_cli_missing_value(argv[i], i + 1 == argc, "--hardware -o")) {
            fprintf(stderr, "kvfleet engine fit: option '%s' needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--hardware") && i + 1 < argc) hwname = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else {
            fprintf(stderr, "usage: kvfleet engine fit PROFILE [--hardware H] [-o FILE]\n");
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: kvfleet engine fit PROFILE [--hardware H] [-o FILE]\n");
        return 2;
    }
    kvf_err err = {0};
    mdl_profile p = {0};
    mdl_model m;
    mdl_hardware hw;
    mdl_fit f;
    char dir[SIM_PATH_MAX], fit_path[SIM_PATH_MAX + 8];
    snprintf(dir, sizeof dir, "%s/models", KVF_SOURCE_DIR);
    kvf_status st = mdl_profile_load(&p, path, &err);
    if (!st) st = mdl_model_load(&m, p.model, dir, &err);
    // the profile's own hardware when a file describes it, else the CPU/GPU named
    if (!st) st = mdl_hardware_load(&hw, hwname ? hwname : (!strcmp(p.backend, "cpu") ? "cpu" : "h200"), dir, &err);
    if (!st) st = mdl_fit_profile(&f, &p, &m, &hw, NULL, &err);
    if (!out) {
        snprintf(fit_path, sizeof fit_path, "%s", path);
        char *dot = strrchr(fit_path, '.');
        if (dot && !strcmp(dot, ".csv")) *dot = 0;
        strcat(fit_path, ".fit");
        out = fit_path;
    }
    if (!st) st = mdl_fit_write(&f, out, &err);
    mdl_profile_free(&p);
    if (st) return fail(&err, st);
    printf("fit of %s (%u rows, %s on %s): compute %.3f, memory %.3f, attention %.3f, step "
           "overhead %.1f us; error rms %.1f %%, max %.1f %%\nwritten to %s\n",
           path, f.rows, f.model, f.hardware, f.eff.compute, f.eff.memory, f.eff.attention,
           f.eff.step_overhead_ns / 1e3, 100 * f.err_rms, 100 * f.err_max, out);
    return 0;
}

// The first half of `engine serve` and `validate`: makes out/, shapes the trace into
// out/trace.jsonl (shaped, notes) and serves it on the engine. On failure nothing is left to
// free and *err says why.
static kvf_status shape_and_serve(const serve_args *a, const char *out, char *shaped, size_t ns,
                                  char *notes, size_t nn, eng_serve_config *ec,
                                  eng_serve_result *res, eng_request **reqs, uint64_t **blocks,
                                  size_t *n, kvf_err *err) {
    eng_backend b;
    kvf_status st = eng_backend_parse(a->backend, &b, err);
    if (!st) st = kvf_mkdirs(out, err);
    if (st) return st;
    snprintf(shaped, ns, "%s/trace.jsonl", out);
    if ((st = shape_trace(a, shaped, n, notes, nn, err))) return st;
    *reqs = NULL;
    *blocks = NULL;
    memset(res, 0, sizeof *res);
    if ((st = serve(a, shaped, ec, res, reqs, blocks, n, err))) {
        free(*reqs), free(*blocks);
        *reqs = NULL, *blocks = NULL;
    }
    return st;
}

int sim_cli_engine(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "fit")) return engine_fit(argc, argv);
    if (argc < 2 || strcmp(argv[1], "serve")) return eng_cli_main(argc, argv);
    if (kvf_cli_help(argc - 1, argv + 1)) return usage(stdout, "engine serve", 0);
    serve_args a;
    int rc = parse_args(argc - 1, argv + 1, "engine serve", &a);
    if (rc) return rc;
    kvf_err err = {0};
    const char *out = a.out ? a.out : "out/engine-serve";
    char shaped[2048], notes[256];
    size_t n;
    eng_serve_config ec;
    eng_serve_result res;
    eng_request *reqs;
    uint64_t *blocks;
    kvf_status st = shape_and_serve(&a, out, shaped, sizeof shaped, notes, sizeof notes, &ec, &res,
                                    &reqs, &blocks, &n, &err);
    if (st) return fail(&err, st);
    json_t *s = serve_summary(&a, &res);
    char path[2100];
    snprintf(path, sizeof path, "%s/summary.json", out);
    json_dump_file(s, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    st = write_serve_db(out, &a, &res, reqs, &err);
    if (a.json) {
        char *t = json_dumps(s, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        printf("%s\n", t);
        free(t);
    } else {
        json_t *tt = json_object_get(s, "ttft_ms"), *tp = json_object_get(s, "tpot_ms");
        printf("engine serve: %zu requests of %s on %s (%s) in %.1f s wall\n", n, res.model,
               res.hardware, res.backend, (double)res.wall_ns * 1e-9);
        printf("  TTFT ms  p50 %.1f  p90 %.1f;  TPOT ms  p50 %.2f  p90 %.2f;  hit rate %.1f %%\n",
               json_number_value(json_object_get(tt, "p50")), json_number_value(json_object_get(tt, "p90")),
               json_number_value(json_object_get(tp, "p50")), json_number_value(json_object_get(tp, "p90")),
               100 * json_number_value(json_object_get(json_object_get(s, "cache"), "hit_rate")));
        printf("results in %s/\n", out);
    }
    json_decref(s);
    eng_serve_result_free(&res);
    free(reqs), free(blocks);
    return st ? fail(&err, st) : 0;
}

// ---- validate ----------------------------------------------------------------------------
static double pearson(const double *x, const double *y, size_t n) {
    if (n < 2) return NAN;
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++) mx += x[i], my += y[i];
    mx /= (double)n, my /= (double)n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}

// Per-request (ttft, tpot, e2e) in ms from a results database, indexed by request id.
static kvf_status read_sim_requests(const char *dir, size_t n, double *ttft, double *tpot, double *e2e,
                                    kvf_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/results.db", dir);
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return kvf_fail(err, KVF_ERUN, "%s: cannot open", path);
    }
    for (size_t i = 0; i < n; i++) ttft[i] = tpot[i] = e2e[i] = NAN;
    sqlite3_stmt *q;
    kvf_status st = KVF_OK;
    if (sqlite3_prepare_v2(db, "SELECT id, ttft_s, tpot_s, e2e_s FROM request", -1, &q, NULL) != SQLITE_OK) {
        st = kvf_fail(err, KVF_ERUN, "%s: %s", path, sqlite3_errmsg(db));
    } else {
        while (sqlite3_step(q) == SQLITE_ROW) {
            sqlite3_int64 id = sqlite3_column_int64(q, 0);
            if (id < 0 || (size_t)id >= n) continue;
            double *dst[3] = {ttft, tpot, e2e};
            for (int k = 0; k < 3; k++)
                dst[k][id] = sqlite3_column_type(q, k + 1) == SQLITE_NULL ? NAN : 1e3 * sqlite3_column_double(q, k + 1);
        }
        sqlite3_finalize(q);
    }
    sqlite3_close(db);
    return st;
}

static json_t *metric_errors(const double *real, const double *sim, size_t n, double *worst_p50_p90) {
    double *a = kvf_malloc((n + 1) * sizeof *a), *b = kvf_malloc((n + 1) * sizeof *b);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(real[i]) && isfinite(sim[i])) a[m] = real[i], b[m] = sim[i], m++;
    json_t *sa = stats(a, m), *sb = stats(b, m), *o = json_object();
    const char *keys[] = {"mean", "p50", "p90", "p99"};
    for (int k = 0; k < 4; k++) {
        double r = json_number_value(json_object_get(sa, keys[k]));
        double s = json_number_value(json_object_get(sb, keys[k]));
        double e = r != 0 ? 100 * (s - r) / r : NAN;
        json_t *x = json_object();
        json_object_set_new(x, "real", json_real(r));
        json_object_set_new(x, "sim", json_real(s));
        json_object_set_new(x, "error_pct", isfinite(e) ? json_real(e) : json_null());
        json_object_set_new(o, keys[k], x);
        if ((k == 1 || k == 2) && isfinite(e) && fabs(e) > *worst_p50_p90) *worst_p50_p90 = fabs(e);
    }
    json_object_set_new(o, "n", json_integer((json_int_t)m));
    json_decref(sa), json_decref(sb);
    free(a), free(b);
    return o;
}

int sim_cli_validate(int argc, char **argv) {
    serve_args a;
    if (kvf_cli_help(argc, argv)) return usage(stdout, "validate", 0);
    int rc = parse_args(argc, argv, "validate", &a);
    if (rc) return rc;
    kvf_err err = {0};
    eng_backend b;
    eng_backend_parse(a.backend, &b, NULL);   // checked by shape_and_serve
    const char *out = a.out ? a.out : "out/validate";
    char shaped[2048], notes[256], prof[2048], path[4096];
    size_t n;
    // 1. the real engine
    eng_serve_config ec;
    eng_serve_result res;
    eng_request *reqs;
    uint64_t *blocks;
    kvf_status st = shape_and_serve(&a, out, shaped, sizeof shaped, notes, sizeof notes, &ec, &res,
                                    &reqs, &blocks, &n, &err);
    if (st) return fail(&err, st);
    // 2. the profile the simulator is calibrated from: given, or measured now on this machine
    //    and backend, right after the engine's run, under the same conditions (a stored profile
    //    drifts with the machine's load and clock; see `kvfleet engine profile --check`)
    const char *profile = a.profile;
    if (!profile) {
        snprintf(prof, sizeof prof, "%s/profile.csv", out);
        FILE *f = fopen(prof, "w");
        if (!f) st = kvf_fail(&err, KVF_EIO, "%s: cannot write", prof);
        // the quick grid, its context axes stretched to the longest request of this trace
        uint32_t maxctx = 0;
        for (size_t i = 0; i < n; i++)
            maxctx = KVF_MAX(maxctx, reqs[i].input_tokens + reqs[i].output_tokens);
        eng_profile_config pc = {.model = a.model, .backend = b, .threads = a.threads, .quick = true,
                                 .seed = 1, .max_context = maxctx};
        if (!st && !a.json)
            fprintf(stderr, "kvfleet validate: profiling %s on %s (--quick)\n", a.model,
                    res.hardware);
        if (!st) st = eng_profile_run(&pc, f, NULL, &err);
        if (f) fclose(f);
        if (st) {
            eng_serve_result_free(&res);
            free(reqs), free(blocks);
            return fail(&err, st);
        }
        profile = prof;
    }
    // 3. the simulator on the same requests and configuration, calibrated from the profile
    static sim_config cfg;
    sim_config_default(&cfg);
    char set[2300];
    const char *sets[] = {"name=validate", "hardware=cpu", "step_model=calibrated",
                          "cluster.mode=colocated", "cluster.prefill.instances=1",
                          "cluster.decode.instances=0", "cluster.prefill.gpus_per_instance=1",
                          "workload.format=kvfleet", "kv_cache.ssd.capacity_tb=0",
                          "kv_cache.hbm_cache_frac=1", "kv_cache.persist_decode=false",
                          "router.prefill=round_robin", "kv_cache.step_sequential=true"};
    for (size_t i = 0; !st && i < sizeof sets / sizeof sets[0]; i++) st = sim_config_set(&cfg, sets[i], &err);
    snprintf(cfg.dir, sizeof cfg.dir, "%s", KVF_SOURCE_DIR);
    snprintf(set, sizeof set, "model=%s", a.model);
    if (!st) st = sim_config_set(&cfg, set, &err);
    snprintf(set, sizeof set, "profile=%s", profile);
    if (!st) st = sim_config_set(&cfg, set, &err);
    snprintf(set, sizeof set, "workload.trace=%s", shaped);
    if (!st) st = sim_config_set(&cfg, set, &err);
    snprintf(set, sizeof set, "kv_cache.block_tokens=%u", ec.block_tokens);
    if (!st) st = sim_config_set(&cfg, set, &err);
    snprintf(set, sizeof set, "cluster.prefill.max_batch_tokens=%u", ec.max_batch_tokens);
    if (!st) st = sim_config_set(&cfg, set, &err);
    snprintf(set, sizeof set, "cluster.prefill.max_batch_requests=%u", ec.max_batch_requests);
    if (!st) st = sim_config_set(&cfg, set, &err);
    snprintf(set, sizeof set, "cluster.prefill.kv_tokens=%llu",
             (unsigned long long)ec.kv_blocks * ec.block_tokens);
    if (!st) st = sim_config_set(&cfg, set, &err);
    if (!st) st = sim_config_validate(&cfg, &err);
    char simdir[2100];
    snprintf(simdir, sizeof simdir, "%s/sim", out);
    sim_run_opts o = {.out_dir = simdir, .quiet = true};
    void *sj = NULL;
    if (!st) st = sim_run(&cfg, &o, &sj, &err);
    if (st) {
        eng_serve_result_free(&res);
        free(reqs), free(blocks);
        return fail(&err, st);
    }
    // 4. the error table
    double *rt = kvf_calloc(n, sizeof(double)), *rp = kvf_calloc(n, sizeof(double)), *re = kvf_calloc(n, sizeof(double));
    double *st_ = kvf_calloc(n, sizeof(double)), *sp = kvf_calloc(n, sizeof(double)), *se = kvf_calloc(n, sizeof(double));
    for (size_t i = 0; i < n; i++) {
        const eng_request_result *q = &res.requests[i];
        bool ok = q->status == ENG_REQ_DONE;
        rt[i] = ok ? (double)(q->first_token_ns - q->arrival_ns) * 1e-6 : NAN;
        re[i] = ok ? (double)(q->completion_ns - q->arrival_ns) * 1e-6 : NAN;
        rp[i] = ok && q->output_tokens > 1 ? (double)(q->last_token_ns - q->first_token_ns) * 1e-6 / (q->output_tokens - 1) : NAN;
    }
    st = read_sim_requests(simdir, n, st_, sp, se, &err);
    json_t *v = json_object();
    double worst = 0;
    if (!st) {
        json_object_set_new(v, "trace", json_string(a.trace));
        json_object_set_new(v, "requests", json_integer((json_int_t)n));
        json_object_set_new(v, "model", json_string(res.model));
        json_object_set_new(v, "backend", json_string(res.backend));
        json_object_set_new(v, "hardware", json_string(res.hardware));
        json_object_set_new(v, "profile", json_string(profile));
        json_object_set_new(v, "ttft_ms", metric_errors(rt, st_, n, &worst));
        json_object_set_new(v, "tpot_ms", metric_errors(rp, sp, n, &worst));
        double w2 = 0;
        json_object_set_new(v, "e2e_ms", metric_errors(re, se, n, &w2));
        // correlation over requests both sides completed
        size_t m = 0;
        double *x = kvf_malloc((n + 1) * sizeof *x), *y = kvf_malloc((n + 1) * sizeof *y);
        double *x2 = kvf_malloc((n + 1) * sizeof *x2), *y2 = kvf_malloc((n + 1) * sizeof *y2);
        for (size_t i = 0; i < n; i++)
            if (isfinite(rt[i]) && isfinite(st_[i]) && isfinite(re[i]) && isfinite(se[i]))
                x[m] = rt[i], y[m] = st_[i], x2[m] = re[i], y2[m] = se[i], m++;
        json_t *corr = json_object();
        double c1 = pearson(x, y, m), c2 = pearson(x2, y2, m);
        json_object_set_new(corr, "ttft", isfinite(c1) ? json_real(c1) : json_null());
        json_object_set_new(corr, "e2e", isfinite(c2) ? json_real(c2) : json_null());
        json_object_set_new(v, "per_request_corr", corr);
        json_object_set_new(v, "max_abs_error_pct_p50_p90", json_real(worst));
        json_object_set_new(v, "extrapolated_steps",
                            json_object_get(json_object_get(sj, "steps"), "extrapolated_steps")
                                ? json_incref(json_object_get(json_object_get(sj, "steps"), "extrapolated_steps"))
                                : json_integer(0));
        json_object_set_new(v, "trace_notes", json_string(notes));
        free(x), free(y), free(x2), free(y2);
        snprintf(path, sizeof path, "%s/validation.json", out);
        json_dump_file(v, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        // the simulator's run directory carries the table into its report
        snprintf(path, sizeof path, "%s/validation.json", simdir);
        json_dump_file(v, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        kvf_err e2 = {0};
        rpt_report_write(simdir, true, true, &e2);
    }
    if (!st && a.json) {
        char *t = json_dumps(v, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        printf("%s\n", t);
        free(t);
    } else if (!st) {
        printf("validate: %zu requests of %s on %s (%s), trace %s\n", n, res.model, res.hardware,
               res.backend, a.trace);
        printf("  %-6s %-5s %12s %12s %9s\n", "metric", "stat", "real ms", "sim ms", "error %");
        const char *ms[] = {"ttft_ms", "tpot_ms", "e2e_ms"}, *ks[] = {"mean", "p50", "p90", "p99"};
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 4; k++) {
                json_t *x = json_object_get(json_object_get(v, ms[i]), ks[k]);
                printf("  %-6.4s %-5s %12.2f %12.2f %+9.1f\n", ms[i], ks[k],
                       json_number_value(json_object_get(x, "real")),
                       json_number_value(json_object_get(x, "sim")),
                       json_number_value(json_object_get(x, "error_pct")));
            }
        json_t *c = json_object_get(v, "per_request_corr");
        printf("  per-request correlation: TTFT %.3f, E2E %.3f\n", json_number_value(json_object_get(c, "ttft")),
               json_number_value(json_object_get(c, "e2e")));
        printf("results in %s/ (validation.json; simulator run in %s/)\n", out, simdir);
    }
    json_decref(v);
    json_decref(sj);
    free(rt), free(rp), free(re), free(st_), free(sp), free(se);
    eng_serve_result_free(&res);
    free(reqs), free(blocks);
    return st ? fail(&err, st) : 0;
}
