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
#include "cli.h"

typedef struct shaping {
    int64_t limit;
    double time_scale, length_scale, rate;
    trc_format format;
    bool skip_bad;
} shaping;

typedef struct serve_args {
    const char *trace, *model, *backend, *out, *profile;
    shaping sh;
    bool json, strict;
    double start_s, end_s; // window on the trace's own time axis (end 0 = none)
    char out_abs[2048];    // out made absolute (relative: against the working directory)
    void (*idle_hook)(void *ctx, int64_t idle_ns); // engine: probes in idle gaps
    void *idle_ctx;
    uint32_t max_batch_tokens, max_batch_requests, kv_blocks, block_tokens, threads;
} serve_args;

static int usage(FILE *f, const char *cmd, int rc) {
    fprintf(f,
            "usage: kvfleet %s --trace FILE [--model M] [--backend cpu|cuda] [--format F]\n"
            "          [--start S] [--end S] [--limit N] [--time-scale X] [--length-scale X]\n"
            "          [--rate R] [--skip-bad] [--max-batch-tokens N] [--max-batch-requests N]\n"
            "          [--kv-blocks N] [--block-tokens N] [--threads N]%s [-o DIR] [--json]\n",
            cmd, strcmp(cmd, "validate") ? "" : " [--profile P] [--strict]");
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
    "--max-batch-tokens --max-batch-requests --kv-blocks --block-tokens --threads --start --end";

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
        else if (!strcmp(o, "--strict") && !strcmp(cmd, "validate")) a->strict = true;
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
                else if (!strcmp(o, "--start") && x < 1e9) a->start_s = x;
                else if (!strcmp(o, "--end") && x > 0 && x < 1e9) a->end_s = x;
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
    if (a->end_s > 0 && a->end_s <= a->start_s) {
        fprintf(stderr, "kvfleet %s: --end (%g s) must be after --start (%g s)\n", cmd, a->end_s,
                a->start_s);
        return 2;
    }
    // -o is the caller's: relative to the working directory, whatever later resolves paths
    // against the scenario's or the source's folder
    const char *out = a->out ? a->out : !strcmp(cmd, "validate") ? "out/validate" : "out/engine-serve";
    char cwd[1024];
    if (out[0] != '/' && getcwd(cwd, sizeof cwd))
        snprintf(a->out_abs, sizeof a->out_abs, "%s/%s", cwd, out);
    else
        snprintf(a->out_abs, sizeof a->out_abs, "%s", out);
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
    o.start_ns = (int64_t)(a->start_s * 1e9);
    o.end_ns = (int64_t)(a->end_s * 1e9);
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
    char path[2200];
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

// out/steps.csv: every served step, its shape and its measured wall and thread CPU time; with
// pred (ns per step) the step model's prediction and its residual, with flag a mark per step.
static kvf_status write_steps_csv(const char *dir, const eng_serve_result *r, const double *pred,
                                  const double *resid, const char *const *flag, kvf_err *err) {
    char path[2100];
    snprintf(path, sizeof path, "%s/steps.csv", dir);
    FILE *f = fopen(path, "w");
    if (!f) return kvf_fail(err, KVF_EIO, "%s: cannot write", path);
    fprintf(f, "step,kind,start_ms,wall_ms,cpu_ms,decode_seqs,decode_context,prefill_chunks,"
               "prefill_tokens,prefill_context%s\n",
            pred ? ",pred_ms,residual_pct,flag" : "");
    static const char *kinds[] = {"prefill", "decode", "mixed"};
    for (size_t i = 0; i < r->n_steps; i++) {
        const eng_step_record *k = &r->steps[i];
        uint64_t pc = 0;
        for (uint32_t j = 0; j < k->n_chunks; j++) pc += r->chunks[k->chunk0 + j].context;
        fprintf(f, "%zu,%s,%.3f,%.4f,%.4f,%u,%u,%u,%u,%llu", i, kinds[k->phase % 3],
                (double)k->start_ns * 1e-6, (double)k->duration_ns * 1e-6, (double)k->cpu_ns * 1e-6,
                k->decode_seqs, k->decode_context, k->n_chunks, k->prefill_tokens,
                (unsigned long long)pc);
        if (pred)
            fprintf(f, ",%.4f,%.2f,%s", pred[i] * 1e-6,
                    resid ? 100 * resid[i] : 0.0,
                    flag && flag[i] ? flag[i] : "");
        fputc('\n', f);
    }
    if (fclose(f)) return kvf_fail(err, KVF_EIO, "%s: write failed", path);
    return KVF_OK;
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
    c->idle_hook = a->idle_hook;
    c->idle_ctx = a->idle_ctx;
    c->idle_min_ns = 20000000;
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

int cli_engine(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "fit")) return engine_fit(argc, argv);
    if (argc < 2 || strcmp(argv[1], "serve")) return eng_cli_main(argc, argv);
    if (kvf_cli_help(argc - 1, argv + 1)) return usage(stdout, "engine serve", 0);
    serve_args a;
    int rc = parse_args(argc - 1, argv + 1, "engine serve", &a);
    if (rc) return rc;
    kvf_err err = {0};
    const char *out = a.out_abs;
    char shaped[2200], notes[256];
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
    if (!st) st = write_steps_csv(out, &res, NULL, NULL, NULL, &err);
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

// The shaped trace again with each request arriving when the serving loop saw it (later than
// its arrival by the loop's wake-up latency when it was waiting): what the scheduling replay
// reads, so that the machine's wake-up latency is not counted against the scheduler.
static kvf_status write_seen_trace(const char *shaped, const char *path, uint32_t bt,
                                   const eng_serve_result *res, kvf_err *err) {
    trc_options o;
    trc_options_default(&o);
    o.format = TRC_FMT_KVFLEET;
    o.block_tokens = bt;
    trc_reader *rd = NULL;
    trc_writer *w = NULL;
    kvf_status st = trc_reader_open(&rd, shaped, &o, err);
    if (st) return st;
    mem_trace t;
    st = mem_trace_read(rd, &t, err);
    trc_reader_close(rd);
    if (!st) st = trc_writer_open(&w, path, bt, err);
    for (size_t i = 0; i < t.n && !st; i++) {
        trc_request q = t.r[i];
        if (i < res->n_requests && res->requests[i].status == ENG_REQ_DONE && res->requests[i].seen_ns > q.arrival_ns)
            q.arrival_ns = res->requests[i].seen_ns;
        st = trc_writer_put(w, &q, err);
    }
    if (w) {
        kvf_err e2 = {0};
        kvf_status s2 = trc_writer_close(w, &e2);
        if (!st && s2) st = kvf_fail(err, s2, "%s", e2.msg);
    }
    mem_trace_free(&t);
    return st;
}

// ---- validate: probes -----------------------------------------------------------------
// Probe steps before the serve, in its idle gaps and after it (phase 0, 1, 2), and before the
// profile when it is measured here (phase 3).
typedef struct probe_val {
    uint8_t phase, shape;
    double wall, cpu;
} probe_val;

typedef struct probe_log {
    eng_prober *p;
    uint32_t next;
    double est[ENG_PROBE_SHAPES]; // last wall time per shape
    probe_val *v;
    size_t n, cap;
    kvf_status st;
    kvf_err err;
} probe_log;

static void probe_once(probe_log *L, int phase) {
    uint32_t s = L->next++ % ENG_PROBE_SHAPES;
    double w, c;
    if (L->st || (L->st = eng_prober_run(L->p, s, &w, &c, &L->err))) return;
    if (L->n == L->cap) kvf_grow((void **)&L->v, &L->cap, L->n + 1, sizeof *L->v);
    L->v[L->n++] = (probe_val){(uint8_t)phase, (uint8_t)s, w, c};
    L->est[s] = w;
}

// Idle hook of the serving loop: probes while at least twice the next probe's time (+2 ms) of
// the gap is left, at most two per gap, so no arrival waits for a probe.
static void idle_probe(void *ctx, int64_t idle_ns) {
    probe_log *L = ctx;
    int64_t t0 = kvf_wall_ns();
    for (int k = 0; k < 2; k++) {
        double left = (double)(idle_ns - (kvf_wall_ns() - t0));
        if (left < 2 * L->est[L->next % ENG_PROBE_SHAPES] + 2e6) return;
        probe_once(L, 1);
    }
}

typedef struct noise {
    double band_cpu, band_wall;   // relative half-widths of the probes' spread (incl. drift)
    double drift_cpu, drift_wall; // after/before - 1, median over shapes
    double drift_profile;         // a given profile: its rows re-measured now, median ratio - 1
    double profile_unstable;      // half the relative change of that ratio over the serve
    double steal;                 // served steps: median wall/cpu - 1
    double loop;                  // serve wall not in steps nor waiting, per busy ns
    size_t probes[4];
} noise;

// Band of one clock: per shape, the larger of half the spread of its phase medians (drift)
// and its own (p90 - p10) / 2 over the median; then the largest over shapes.
static void probe_band(const probe_log *L, bool cpu, double *band, double *drift) {
    double bs[ENG_PROBE_SHAPES], ds[ENG_PROBE_SHAPES];
    uint32_t nb = 0, ndr = 0;
    double *v = kvf_malloc((L->n + 1) * sizeof *v), *w = kvf_malloc((L->n + 1) * sizeof *w);
    for (uint32_t s = 0; s < ENG_PROBE_SHAPES; s++) {
        size_t n = 0;
        double med[4] = {NAN, NAN, NAN, NAN};
        for (int ph = 0; ph < 4; ph++) {
            size_t m = 0;
            for (size_t i = 0; i < L->n; i++)
                if (L->v[i].shape == s && L->v[i].phase == ph) w[m++] = cpu ? L->v[i].cpu : L->v[i].wall;
            memcpy(v + n, w, m * sizeof *w);
            n += m;
            if (m) {
                kvf_sort_doubles(w, m);
                med[ph] = kvf_percentile_sorted(w, m, 50);
            }
        }
        if (n < 2) continue;
        kvf_sort_doubles(v, n);
        double p50 = kvf_percentile_sorted(v, n, 50);
        double spread = (kvf_percentile_sorted(v, n, 90) - kvf_percentile_sorted(v, n, 10)) / (2 * p50);
        double lo = INFINITY, hi = 0;
        for (int ph = 0; ph < 4; ph++)
            if (isfinite(med[ph])) lo = fmin(lo, med[ph]), hi = fmax(hi, med[ph]);
        bs[nb++] = fmax(spread, hi > lo ? (hi - lo) / (2 * p50) : 0);
        double first = isfinite(med[3]) ? med[3] : med[0]; // the earliest probes
        if (isfinite(first) && isfinite(med[2])) ds[ndr++] = med[2] / first - 1;
    }
    kvf_sort_doubles(bs, nb);
    kvf_sort_doubles(ds, ndr);
    *band = nb ? bs[nb - 1] : 0;
    *drift = ndr ? kvf_percentile_sorted(ds, ndr, 50) : 0;
    free(v), free(w);
}

// ---- validate: comparisons ---------------------------------------------------------------
// Per-request (ttft, tpot, e2e) of one side, ms, NaN where not completed.
typedef struct side {
    double *v[3];
} side;
static const char *const METRICS[3] = {"ttft_ms", "tpot_ms", "e2e_ms"};

static void side_alloc(side *s, size_t n) {
    for (int k = 0; k < 3; k++) s->v[k] = kvf_calloc(n + 1, sizeof(double));
}
static void side_free(side *s) {
    for (int k = 0; k < 3; k++) free(s->v[k]);
}

// p-th percentile of v over the requests both real and v completed.
static double pct_common(const double *real, const double *v, size_t n, double p, double *buf) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(real[i]) && isfinite(v[i])) buf[m++] = v[i];
    if (!m) return NAN;
    if (p < 0) { // mean
        double sum = 0;
        for (size_t i = 0; i < m; i++) sum += buf[i];
        return sum / (double)m;
    }
    kvf_sort_doubles(buf, m);
    return kvf_percentile_sorted(buf, m, p);
}

// One error table: mean/p50/p90/p99 of each metric, real and sim, error and noise band
// (how far the sim moves, toward the serve, when every step is faster (lo) or slower (hi) by
// the step-time noise, over real;
// lo/hi NULL: fixed_band for every figure). *worst and *band get the largest |error| and band over p50/p90.
static json_t *error_table(const side *real, const side *sim, const side *lo, const side *hi,
                           double fixed_band, size_t n, double *worst, double *band,
                           double *worst_pos) {
    json_t *t = json_object();
    double *buf = kvf_malloc((n + 1) * sizeof *buf);
    const char *keys[] = {"mean", "p50", "p90", "p99"};
    const double ps[] = {-1, 50, 90, 99};
    *worst = *band = *worst_pos = 0;
    for (int m = 0; m < 3; m++) {
        json_t *o = json_object();
        size_t cnt = 0;
        for (size_t i = 0; i < n; i++) cnt += isfinite(real->v[m][i]) && isfinite(sim->v[m][i]);
        for (int k = 0; k < 4; k++) {
            double r = pct_common(sim->v[m], real->v[m], n, ps[k], buf);
            double sv = pct_common(real->v[m], sim->v[m], n, ps[k], buf);
            double e = r > 0 ? 100 * (sv - r) / r : NAN;
            double b = fixed_band;
            // the side of the noise that could explain the error: a simulation above the serve
            // against the run with faster steps, one below against the run with slower steps
            if (lo && hi && r > 0 && isfinite(e))
                b = 100 * fabs(sv - pct_common(real->v[m], e >= 0 ? lo->v[m] : hi->v[m], n, ps[k], buf)) / r;
            json_t *x = json_object();
            json_object_set_new(x, "real", json_real(isfinite(r) ? r : 0));
            json_object_set_new(x, "sim", json_real(isfinite(sv) ? sv : 0));
            json_object_set_new(x, "error_pct", isfinite(e) ? json_real(e) : json_null());
            json_object_set_new(x, "band_pct", json_real(isfinite(b) ? b : 0));
            json_object_set_new(o, keys[k], x);
            if ((k == 1 || k == 2) && isfinite(e)) {
                *worst = fmax(*worst, fabs(e));
                *worst_pos = fmax(*worst_pos, e);
                if (isfinite(b)) *band = fmax(*band, b);
            }
        }
        json_object_set_new(o, "n", json_integer((json_int_t)cnt));
        json_object_set_new(t, METRICS[m], o);
    }
    free(buf);
    return t;
}

// The verdict of one fidelity: the band wider than the tolerance says nothing either way.
// An error beyond the tolerance by more than the band fails whatever the band.
static const char *verdict(double worst, double band, double tol) {
    if (worst - band > tol) return "fail";
    if (band > tol) return "inconclusive";
    if (worst <= tol) return "pass";
    return "inconclusive";
}

static void verdict_obj(json_t *o, double worst, double band, double tol) {
    json_object_set_new(o, "tolerance_pct", json_real(tol));
    json_object_set_new(o, "worst_error_pct", json_real(worst));
    json_object_set_new(o, "band_pct", json_real(band));
    json_object_set_new(o, "verdict", json_string(verdict(worst, band, tol)));
}

// One simulator run of the served requests: calibrated from profile, and with replay
// (measured durations) and/or scale when given. Per-request results into *out.
static kvf_status sim_side(const serve_args *a, const eng_serve_config *ec, const char *profile,
                           const char *shaped, const char *dir, sim_step_replay *replay,
                           double scale, size_t n, side *out, void **summary, kvf_err *err) {
    static sim_config cfg;
    sim_config_default(&cfg);
    char set[2300];
    kvf_status st = KVF_OK;
    const char *sets[] = {"name=validate", "hardware=cpu", "step_model=calibrated",
                          "cluster.mode=colocated", "cluster.prefill.instances=1",
                          "cluster.decode.instances=0", "cluster.prefill.gpus_per_instance=1",
                          "workload.format=kvfleet", "kv_cache.ssd.capacity_tb=0",
                          "kv_cache.hbm_cache_frac=1", "kv_cache.persist_decode=false",
                          "router.prefill=round_robin", "kv_cache.step_sequential=true"};
    for (size_t i = 0; !st && i < sizeof sets / sizeof sets[0]; i++) st = sim_config_set(&cfg, sets[i], err);
    snprintf(cfg.dir, sizeof cfg.dir, "%s", KVF_SOURCE_DIR);
    snprintf(set, sizeof set, "model=%s", a->model);
    if (!st) st = sim_config_set(&cfg, set, err);
    snprintf(set, sizeof set, "profile=%s", profile);
    if (!st) st = sim_config_set(&cfg, set, err);
    snprintf(set, sizeof set, "workload.trace=%s", shaped);
    if (!st) st = sim_config_set(&cfg, set, err);
    snprintf(set, sizeof set, "kv_cache.block_tokens=%u", ec->block_tokens);
    if (!st) st = sim_config_set(&cfg, set, err);
    snprintf(set, sizeof set, "cluster.prefill.max_batch_tokens=%u", ec->max_batch_tokens);
    if (!st) st = sim_config_set(&cfg, set, err);
    snprintf(set, sizeof set, "cluster.prefill.max_batch_requests=%u", ec->max_batch_requests);
    if (!st) st = sim_config_set(&cfg, set, err);
    snprintf(set, sizeof set, "cluster.prefill.kv_tokens=%llu",
             (unsigned long long)ec->kv_blocks * ec->block_tokens);
    if (!st) st = sim_config_set(&cfg, set, err);
    if (!st) st = sim_config_validate(&cfg, err);
    sim_run_opts o = {.out_dir = dir, .quiet = true, .replay = replay, .step_scale = scale};
    void *sj = NULL;
    if (!st) st = sim_run(&cfg, &o, &sj, err);
    if (!st) st = read_sim_requests(dir, n, out->v[0], out->v[1], out->v[2], err);
    if (summary) *summary = sj;
    else json_decref(sj);
    return st;
}

static void real_side(const eng_serve_result *res, side *s) {
    for (size_t i = 0; i < res->n_requests; i++) {
        const eng_request_result *q = &res->requests[i];
        bool ok = q->status == ENG_REQ_DONE;
        s->v[0][i] = ok ? (double)(q->first_token_ns - q->arrival_ns) * 1e-6 : NAN;
        s->v[1][i] = ok && q->output_tokens > 1
                         ? (double)(q->last_token_ns - q->first_token_ns) * 1e-6 / (q->output_tokens - 1)
                         : NAN;
        s->v[2][i] = ok ? (double)(q->completion_ns - q->arrival_ns) * 1e-6 : NAN;
    }
}

// A served step as the batch the step model is asked about: decodes (mean context, the
// remainder spread) then its prefill chunks.
static uint32_t step_batch(const eng_serve_result *r, const eng_step_record *k, mdl_seq *seqs,
                           mdl_phase *phase) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < k->decode_seqs; i++)
        seqs[n++] = (mdl_seq){1, k->decode_context / k->decode_seqs + (i < k->decode_context % k->decode_seqs)};
    for (uint32_t j = 0; j < k->n_chunks; j++)
        seqs[n++] = (mdl_seq){r->chunks[k->chunk0 + j].tokens, r->chunks[k->chunk0 + j].context};
    *phase = k->decode_seqs && k->n_chunks ? MDL_MIXED : k->decode_seqs ? MDL_DECODE : MDL_PREFILL;
    return n;
}

// Where a profile was measured: smallest prefill chunk and decode context of its grid.
typedef struct grid_floor {
    uint32_t min_chunk;
    double min_dctx;
} grid_floor;

static const char *const KINDS[3] = {"prefill", "decode", "mixed"};

// Step-time fidelity: the calibrated step model's prediction for every served step against
// its measured time (thread CPU when the profile was timed by it, else wall).
static json_t *step_fidelity(const eng_serve_result *r, mdl_stepper *stp, const grid_floor *gf,
                             bool cpu_clock, double band, double tol, double *pred, double *resid,
                             const char **flag, uint64_t *flagged, double *worst_out) {
    size_t ns = r->n_steps;
    double *v[3], *av[3];
    size_t nv[3] = {0, 0, 0};
    uint64_t nflag[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) v[k] = kvf_malloc((ns + 1) * sizeof(double)), av[k] = kvf_malloc((ns + 1) * sizeof(double));
    // by shape: kind x size bucket (decodes: batch 1, 2-4, 5-8, 9-16, 17+; prefill tokens
    // < 32, 32-127, 128-511, 512+)
    enum { NB = 5 };
    double *bv[3][NB];
    size_t bn[3][NB] = {{0}};
    for (int k = 0; k < 3; k++)
        for (int b = 0; b < NB; b++) bv[k][b] = kvf_malloc((ns + 1) * sizeof(double));
    mdl_seq *seqs = NULL;
    size_t cap = 0;
    *flagged = 0;
    for (size_t i = 0; i < ns; i++) {
        const eng_step_record *k = &r->steps[i];
        kvf_grow((void **)&seqs, &cap, k->decode_seqs + k->n_chunks + 1, sizeof *seqs);
        mdl_phase ph;
        uint32_t n = step_batch(r, k, seqs, &ph);
        mdl_batch b = {.phase = ph, .seqs = seqs, .n = n};
        mdl_step_cost c;
        stp->vt->cost(stp, &b, &c);
        double meas = cpu_clock ? (double)k->cpu_ns : (double)k->duration_ns;
        pred[i] = (double)c.ns;
        resid[i] = meas > 0 ? pred[i] / meas - 1 : 0;
        bool below = false;
        for (uint32_t j = 0; j < k->n_chunks; j++) below |= r->chunks[k->chunk0 + j].tokens < gf->min_chunk;
        if (k->decode_seqs && (double)k->decode_context / k->decode_seqs < gf->min_dctx) below = true;
        flag[i] = c.extrapolated ? "extrapolated" : below ? "below_grid" : NULL;
        int kind = ph == MDL_MIXED ? 2 : ph == MDL_DECODE ? 1 : 0;
        if (flag[i]) (*flagged)++, nflag[kind]++;
        v[kind][nv[kind]] = resid[i];
        av[kind][nv[kind]++] = fabs(resid[i]);
        uint32_t sz = kind == 1 ? k->decode_seqs : k->prefill_tokens;
        int bk = kind == 1 ? (sz <= 1 ? 0 : sz <= 4 ? 1 : sz <= 8 ? 2 : sz <= 16 ? 3 : 4)
                           : (sz < 32 ? 0 : sz < 128 ? 1 : sz < 512 ? 2 : 3);
        bv[kind][bk][bn[kind][bk]++] = resid[i];
    }
    free(seqs);
    json_t *o = json_object(), *kinds = json_object(), *shapes = json_array();
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        json_t *x = json_object();
        json_object_set_new(x, "steps", json_integer((json_int_t)nv[k]));
        json_object_set_new(x, "flagged", json_integer((json_int_t)nflag[k]));
        if (nv[k]) {
            kvf_sort_doubles(v[k], nv[k]);
            kvf_sort_doubles(av[k], nv[k]);
            double med = 100 * kvf_percentile_sorted(v[k], nv[k], 50);
            double mabs = 100 * kvf_percentile_sorted(av[k], nv[k], 50);
            json_object_set_new(x, "median_residual_pct", json_real(med));
            json_object_set_new(x, "median_abs_residual_pct", json_real(mabs));
            json_object_set_new(x, "p90_abs_residual_pct", json_real(100 * kvf_percentile_sorted(av[k], nv[k], 90)));
            // kinds with too few steps to have a median worth judging are reported only
            if (nv[k] >= 10) worst = fmax(worst, mabs);
        }
        json_object_set_new(kinds, KINDS[k], x);
        static const char *dl[] = {"batch 1", "batch 2-4", "batch 5-8", "batch 9-16", "batch 17+"};
        static const char *pl[] = {"tokens <32", "tokens 32-127", "tokens 128-511", "tokens 512+", ""};
        for (int b = 0; b < NB; b++) {
            if (!bn[k][b]) continue;
            kvf_sort_doubles(bv[k][b], bn[k][b]);
            json_t *y = json_object();
            json_object_set_new(y, "kind", json_string(KINDS[k]));
            json_object_set_new(y, "shape", json_string(k == 1 ? dl[b] : pl[b]));
            json_object_set_new(y, "steps", json_integer((json_int_t)bn[k][b]));
            json_object_set_new(y, "median_residual_pct", json_real(100 * kvf_percentile_sorted(bv[k][b], bn[k][b], 50)));
            json_object_set_new(y, "p10_residual_pct", json_real(100 * kvf_percentile_sorted(bv[k][b], bn[k][b], 10)));
            json_object_set_new(y, "p90_residual_pct", json_real(100 * kvf_percentile_sorted(bv[k][b], bn[k][b], 90)));
            json_array_append_new(shapes, y);
        }
    }
    for (int k = 0; k < 3; k++) {
        free(v[k]), free(av[k]);
        for (int b = 0; b < NB; b++) free(bv[k][b]);
    }
    json_object_set_new(o, "clock", json_string(cpu_clock ? "thread_cpu" : "wall"));
    json_object_set_new(o, "kinds", kinds);
    json_object_set_new(o, "shapes", shapes);
    json_object_set_new(o, "flagged_steps", json_integer((json_int_t)*flagged));
    verdict_obj(o, worst, band, tol);
    *worst_out = worst;
    return o;
}

static bool file_has(const char *path, const char *needle) {
    char *text = NULL;
    size_t len = 0;
    kvf_err e = {0};
    if (kvf_read_file(path, &text, &len, &e)) return false;
    bool has = strstr(text, needle) != NULL;
    free(text);
    return has;
}

// Tolerances (percent): scheduling and step time 5, end to end 10 (and whether within 5).
#define TOL_SCHED 5.0
#define TOL_STEP 5.0
#define TOL_E2E 10.0

int cli_validate(int argc, char **argv) {
    serve_args a;
    if (kvf_cli_help(argc, argv)) return usage(stdout, "validate", 0);
    int rc = parse_args(argc, argv, "validate", &a);
    if (rc) return rc;
    kvf_err err = {0};
    eng_backend b;
    kvf_status st = eng_backend_parse(a.backend, &b, &err);
    if (st) return fail(&err, st);
    const char *out = a.out_abs;
    char shaped[2200], notes[256], prof[2200], profabs[2048], path[4096], cwd[1024];
    size_t n = 0;
    // 0. the shaped trace, and the longest request (the profile's context axes cover it)
    if ((st = kvf_mkdirs(out, &err))) return fail(&err, st);
    snprintf(shaped, sizeof shaped, "%s/trace.jsonl", out);
    if ((st = shape_trace(&a, shaped, &n, notes, sizeof notes, &err))) return fail(&err, st);
    // 1. probes before the serve (also: this machine's hardware id)
    probe_log pl = {0};
    if ((st = eng_prober_create(&pl.p, a.model, NULL, b, a.threads, &err))) return fail(&err, st);
    const char *hw = eng_prober_hardware(pl.p);
    // 2. the profile the simulator is calibrated from: given (its hardware compared with
    //    this machine's), or measured now, before the serve, by the thread CPU clock
    const char *profile = a.profile;
    mdl_profile mp = {0};
    if (profile) {
        if (profile[0] != '/' && getcwd(cwd, sizeof cwd)) {
            snprintf(profabs, sizeof profabs, "%s/%s", cwd, profile);
            profile = profabs;
        }
        if ((st = mdl_profile_load(&mp, profile, &err))) goto early;
        if (mp.hardware[0] && strcmp(mp.hardware, hw)) {
            if (a.strict) {
                st = kvf_fail(&err, KVF_EINVAL,
                              "%s: profile measured on '%s', this machine is '%s' (--strict)",
                              profile, mp.hardware, hw);
                goto early;
            }
            fprintf(stderr, "kvfleet validate: warning: %s was measured on '%s', this machine is '%s'\n",
                    profile, mp.hardware, hw);
        }
    } else {
        eng_request *rq0 = NULL;
        uint64_t *bl0 = NULL;
        size_t n0 = 0;
        if ((st = load_requests(shaped, a.block_tokens, &rq0, &bl0, &n0, &err))) goto early;
        uint32_t maxctx = 0;
        for (size_t i = 0; i < n0; i++)
            maxctx = KVF_MAX(maxctx, rq0[i].input_tokens + rq0[i].output_tokens);
        free(rq0), free(bl0);
        snprintf(prof, sizeof prof, "%s/profile.csv", out);
        FILE *f = fopen(prof, "w");
        if (!f) {
            st = kvf_fail(&err, KVF_EIO, "%s: cannot write", prof);
            goto early;
        }
        eng_profile_config pc = {.model = a.model, .backend = b, .threads = a.threads, .quick = true,
                                 .seed = 1, .max_context = maxctx,
                                 .cpu_clock = b == ENG_BACKEND_CPU};
        if (!a.json) fprintf(stderr, "kvfleet validate: profiling %s on %s (--quick)\n", a.model, hw);
        for (int r = 0; r < 2 * ENG_PROBE_SHAPES; r++) probe_once(&pl, 3);
        st = eng_profile_run(&pc, f, NULL, &err);
        fclose(f);
        profile = prof;
        if (!st) st = mdl_profile_load(&mp, profile, &err);
        if (st) goto early;
    }
    // a given profile: a few of its rows re-measured now and after the serve (its drift)
    double pr[2] = {NAN, NAN};
    eng_profile_config cc = {.model = a.model, .backend = b, .threads = a.threads, .seed = 1,
                             .check_bound_ms = 150};
    if (a.profile) {
        snprintf(path, sizeof path, "%s/profile_check.txt", out);
        FILE *f = fopen(path, "w");
        if (!f) {
            st = kvf_fail(&err, KVF_EIO, "%s: cannot write", path);
            goto early;
        }
        st = eng_profile_check_ratio(&cc, profile, f, &pr[0], &err);
        fclose(f);
        if (st) goto early;
    }
    for (int r = 0; r < 2 * ENG_PROBE_SHAPES; r++) probe_once(&pl, 0);
    if (pl.st) {
        st = pl.st;
        err = pl.err;
        goto early;
    }
    // 3. the engine serves the trace, probes in its idle gaps; then probes after it
    eng_serve_config ec;
    eng_serve_result res;
    eng_request *reqs = NULL;
    uint64_t *blocks = NULL;
    a.idle_hook = idle_probe;
    a.idle_ctx = &pl;
    memset(&res, 0, sizeof res);
    if (!a.json) fprintf(stderr, "kvfleet validate: serving %zu requests\n", n);
    st = serve(&a, shaped, &ec, &res, &reqs, &blocks, &n, &err);
    if (st) goto early;
    for (int r = 0; r < 2 * ENG_PROBE_SHAPES; r++) probe_once(&pl, 2);
    if (pl.st && !st) st = pl.st, err = pl.err;
    if (a.profile && !st) {
        snprintf(path, sizeof path, "%s/profile_check.txt", out);
        FILE *f = fopen(path, "a");
        if (f) {
            st = eng_profile_check_ratio(&cc, profile, f, &pr[1], &err);
            fclose(f);
        }
    }
    // 4. noise: probe bands, steal (wall over CPU of the served steps), loop time unaccounted
    noise nz = {0};
    // a given profile's level against this machine is part of the error it makes; how much
    // that level moved from before to after the serve is noise
    if (isfinite(pr[0])) nz.drift_profile = (isfinite(pr[1]) ? (pr[0] + pr[1]) / 2 : pr[0]) - 1;
    if (isfinite(pr[0]) && isfinite(pr[1])) nz.profile_unstable = fabs(pr[1] - pr[0]) / (pr[0] + pr[1]);
    probe_band(&pl, true, &nz.band_cpu, &nz.drift_cpu);
    probe_band(&pl, false, &nz.band_wall, &nz.drift_wall);
    for (size_t i = 0; i < pl.n; i++) nz.probes[pl.v[i].phase]++;
    double busy = 0;
    {
        double *ratio = kvf_malloc((res.n_steps + 1) * sizeof *ratio);
        size_t nr = 0;
        for (size_t i = 0; i < res.n_steps; i++) {
            busy += (double)(res.steps[i].duration_ns + res.steps[i].after_ns);
            if (res.steps[i].cpu_ns > 0) ratio[nr++] = (double)res.steps[i].duration_ns / (double)res.steps[i].cpu_ns;
        }
        kvf_sort_doubles(ratio, nr);
        nz.steal = nr ? kvf_percentile_sorted(ratio, nr, 50) - 1 : 0;
        free(ratio);
        double other = (double)res.wall_ns - busy - (double)(res.idle_ns - res.late_ns);
        nz.loop = busy > 0 ? fmax(0, other) / busy : 0;
    }
    // 5. step-time fidelity
    mdl_model mm;
    mdl_hardware mh;
    mdl_stepper *stp = NULL;
    char mdir[1100];
    snprintf(mdir, sizeof mdir, "%s/models", KVF_SOURCE_DIR);
    bool cpu_clock = file_has(profile, "# timing: thread cpu clock");
    double *pred = kvf_calloc(res.n_steps + 1, sizeof *pred), *resid = kvf_calloc(res.n_steps + 1, sizeof *resid);
    const char **flag = kvf_calloc(res.n_steps + 1, sizeof *flag);
    grid_floor gf = {UINT32_MAX, INFINITY};
    for (size_t i = 0; i < mp.n; i++) {
        if (mp.rows[i].op == MDL_OP_PREFILL) gf.min_chunk = KVF_MIN(gf.min_chunk, mp.rows[i].new_tokens);
        if (mp.rows[i].op == MDL_OP_DECODE) gf.min_dctx = fmin(gf.min_dctx, mp.rows[i].context);
    }
    if (!st) st = mdl_model_load(&mm, a.model, mdir, &err);
    if (!st) st = mdl_hardware_load(&mh, "cpu", mdir, &err);
    if (!st) st = mdl_calibrated_create(&stp, &mm, &mh, NULL, NULL, profile, &err);
    json_t *v = json_object(), *stepj = NULL;
    double step_worst = 0;
    uint64_t flagged = 0;
    if (!st) {
        // the step band: the probes' spread by the profile's clock (wall: plus steal), plus how
        // far a given profile has drifted from this machine now
        double bs = cpu_clock ? nz.band_cpu + nz.profile_unstable
                              : nz.band_wall + fmax(0, nz.steal) + nz.profile_unstable;
        stepj = step_fidelity(&res, stp, &gf, cpu_clock, 100 * bs, TOL_STEP, pred, resid,
                              flag, &flagged, &step_worst);
        st = write_steps_csv(out, &res, pred, resid, flag, &err);
    }
    mdl_stepper_destroy(stp);
    // 6. the simulator: end to end (calibrated) and scheduling (measured durations replayed),
    //    each also at the low and high ends of its step-time noise for the bands
    side real, e2e, e2e_lo, e2e_hi, sch;
    side *all[] = {&real, &e2e, &e2e_lo, &e2e_hi, &sch};
    for (int i = 0; i < 5; i++) side_alloc(all[i], n);
    real_side(&res, &real);
    size_t nseq = 0;
    for (size_t i = 0; i < res.n_steps; i++) nseq += res.steps[i].decode_seqs + res.steps[i].n_chunks;
    mdl_seq *rseqs = kvf_malloc((nseq + 1) * sizeof *rseqs);
    sim_replay_step *rsteps = kvf_malloc((res.n_steps + 1) * sizeof *rsteps);
    size_t used = 0;
    for (size_t i = 0; i < res.n_steps; i++) {
        mdl_phase ph;
        uint32_t k = step_batch(&res, &res.steps[i], rseqs + used, &ph);
        // the step and the loop's own time after it: what the next step waited for
        rsteps[i] = (sim_replay_step){rseqs + used, k, res.steps[i].duration_ns + res.steps[i].after_ns};
        used += k;
    }
    sim_step_replay rp = {.steps = rsteps, .n = res.n_steps};
    // end to end: the model's clock against the serve's wall clock, so the band covers the
    // probes' wall spread and the time other processes took from the engine (steal)
    // (steal only ever slows the serve: it widens the slower side alone)
    double b_e2e = nz.band_wall + fmax(0, nz.steal) + nz.profile_unstable;
    double b_e2e_lo = nz.band_wall + nz.profile_unstable;
    // scheduling: the step times are the measured ones; what remains unmeasured is the loop's
    // unaccounted time, whose effect on latencies queueing amplifies by 1 / (1 - utilisation)
    double util = res.wall_ns > res.probe_ns ? busy / (double)(res.wall_ns - res.probe_ns) : 0;
    double b_sch = nz.loop / (1 - fmin(util, 0.95));
    void *sj = NULL;
    char simdir[2200], d2[2300];
    snprintf(simdir, sizeof simdir, "%s/sim", out);
    if (!st) st = sim_side(&a, &ec, profile, shaped, simdir, NULL, 0, n, &e2e, &sj, &err);
    snprintf(d2, sizeof d2, "%s/bands/e2e-lo", out);
    if (!st) st = sim_side(&a, &ec, profile, shaped, d2, NULL, 1 / (1 + b_e2e_lo), n, &e2e_lo, NULL, &err);
    snprintf(d2, sizeof d2, "%s/bands/e2e-hi", out);
    if (!st) st = sim_side(&a, &ec, profile, shaped, d2, NULL, 1 + b_e2e, n, &e2e_hi, NULL, &err);
    char seen[2300];
    snprintf(seen, sizeof seen, "%s/trace-seen.jsonl", out);
    if (!st) st = write_seen_trace(shaped, seen, ec.block_tokens, &res, &err);
    snprintf(d2, sizeof d2, "%s/replay_misses.txt", out);
    rp.misses = fopen(d2, "w");
    snprintf(d2, sizeof d2, "%s/sim-replay", out);
    if (!st) st = sim_side(&a, &ec, profile, seen, d2, &rp, 0, n, &sch, NULL, &err);
    if (rp.misses) fclose(rp.misses);
    rp.misses = NULL;
    uint64_t matched = rp.matched, fallback = rp.fallback;
    // replayed times count from the recorded arrival, as the real ones do
    double *wake = kvf_calloc(n + 1, sizeof *wake);
    for (size_t i = 0; i < n && i < res.n_requests; i++) {
        const eng_request_result *q = &res.requests[i];
        wake[i] = q->status == ENG_REQ_DONE && q->seen_ns > q->arrival_ns ? (double)(q->seen_ns - q->arrival_ns) * 1e-6 : 0;
        sch.v[0][i] += wake[i], sch.v[2][i] += wake[i];
    }
    kvf_sort_doubles(wake, n);
    double wake_p50 = kvf_percentile_sorted(wake, n, 50), wake_p90 = kvf_percentile_sorted(wake, n, 90);
    free(wake);
    // 7. the tables and the verdicts
    const char *overall = "pass";
    if (!st) {
        double w_e, bd_e, w_s, bd_s, wp_e, wp_s;
        json_t *te = error_table(&real, &e2e, &e2e_lo, &e2e_hi, 0, n, &w_e, &bd_e, &wp_e);
        json_t *ts = error_table(&real, &sch, NULL, NULL, 100 * b_sch, n, &w_s, &bd_s, &wp_s);
        // end to end: when other processes took more of the engine's time than the tolerance
        // (steal), a simulation faster than the serve is explained by it, whatever the band
        // says (queueing makes bursty slowdowns worse than a uniform one): only a simulation
        // slower than the serve beyond tolerance and band fails
        const char *ve = verdict(w_e, bd_e, TOL_E2E);
        if (100 * nz.steal > TOL_E2E) ve = wp_e - bd_e > TOL_E2E ? "fail" : "inconclusive";
        json_object_set_new(v, "trace", json_string(a.trace));
        json_object_set_new(v, "requests", json_integer((json_int_t)n));
        json_object_set_new(v, "model", json_string(res.model));
        json_object_set_new(v, "backend", json_string(res.backend));
        json_object_set_new(v, "hardware", json_string(res.hardware));
        json_object_set_new(v, "profile", json_string(profile));
        json_object_set_new(v, "profile_hardware", json_string(mp.hardware));
        json_t *win = json_object();
        json_object_set_new(win, "start_s", json_real(a.start_s));
        json_object_set_new(win, "end_s", a.end_s > 0 ? json_real(a.end_s) : json_null());
        json_object_set_new(v, "window", win);
        // the end-to-end table keeps the top-level keys of earlier versions
        for (int m = 0; m < 3; m++) json_object_set(v, METRICS[m], json_object_get(te, METRICS[m]));
        size_t m = 0;
        double *x = kvf_malloc((n + 1) * sizeof *x), *y = kvf_malloc((n + 1) * sizeof *y);
        double *x2 = kvf_malloc((n + 1) * sizeof *x2), *y2 = kvf_malloc((n + 1) * sizeof *y2);
        for (size_t i = 0; i < n; i++)
            if (isfinite(real.v[0][i]) && isfinite(e2e.v[0][i]) && isfinite(real.v[2][i]) && isfinite(e2e.v[2][i]))
                x[m] = real.v[0][i], y[m] = e2e.v[0][i], x2[m] = real.v[2][i], y2[m] = e2e.v[2][i], m++;
        json_t *corr = json_object();
        double c1 = pearson(x, y, m), c2 = pearson(x2, y2, m);
        json_object_set_new(corr, "ttft", isfinite(c1) ? json_real(c1) : json_null());
        json_object_set_new(corr, "e2e", isfinite(c2) ? json_real(c2) : json_null());
        json_object_set_new(v, "per_request_corr", corr);
        free(x), free(y), free(x2), free(y2);
        double w_tt = 0;
        for (int mm2 = 0; mm2 < 2; mm2++)
            for (int k = 1; k <= 2; k++) {
                json_t *e = json_object_get(json_object_get(te, METRICS[mm2]), k == 1 ? "p50" : "p90");
                double ev = json_number_value(json_object_get(e, "error_pct"));
                if (json_is_number(json_object_get(e, "error_pct"))) w_tt = fmax(w_tt, fabs(ev));
            }
        json_object_set_new(v, "max_abs_error_pct_p50_p90", json_real(w_tt));
        json_t *sst = json_object_get(sj, "steps");
        json_object_set_new(v, "extrapolated_steps",
                            json_object_get(sst, "extrapolated_steps")
                                ? json_incref(json_object_get(sst, "extrapolated_steps"))
                                : json_integer(0));
        json_object_set_new(v, "flagged_served_steps", json_integer((json_int_t)flagged));
        json_object_set_new(v, "trace_notes", json_string(notes));
        // load and noise
        json_t *ld = json_object();
        json_object_set_new(ld, "wall_s", json_real((double)res.wall_ns * 1e-9));
        json_object_set_new(ld, "steps", json_integer((json_int_t)res.n_steps));
        json_object_set_new(ld, "utilisation", json_real(util));
        json_object_set_new(ld, "hit_rate", json_real(res.prompt_tokens ? (double)res.cached_tokens / (double)res.prompt_tokens : 0));
        json_object_set_new(ld, "preemptions", json_integer((json_int_t)res.preemptions));
        json_object_set_new(v, "serve", ld);
        json_t *nj = json_object();
        json_object_set_new(nj, "probe_cpu_band_pct", json_real(100 * nz.band_cpu));
        json_object_set_new(nj, "probe_wall_band_pct", json_real(100 * nz.band_wall));
        json_object_set_new(nj, "drift_cpu_pct", json_real(100 * nz.drift_cpu));
        json_object_set_new(nj, "drift_wall_pct", json_real(100 * nz.drift_wall));
        json_object_set_new(nj, "steal_pct", json_real(100 * nz.steal));
        json_object_set_new(nj, "profile_drift_pct", json_real(100 * nz.drift_profile));
        json_object_set_new(nj, "profile_unstable_pct", json_real(100 * nz.profile_unstable));
        json_object_set_new(nj, "loop_unaccounted_pct", json_real(100 * nz.loop));
        json_object_set_new(nj, "probes_before", json_integer((json_int_t)nz.probes[0]));
        json_object_set_new(nj, "probes_during", json_integer((json_int_t)nz.probes[1]));
        json_object_set_new(nj, "probes_after", json_integer((json_int_t)nz.probes[2]));
        json_object_set_new(nj, "probes_before_profile", json_integer((json_int_t)nz.probes[3]));
        json_object_set_new(nj, "e2e_step_noise_pct", json_real(100 * b_e2e));
        json_object_set_new(nj, "wakeup_latency_ms_p50", json_real(wake_p50));
        json_object_set_new(nj, "wakeup_latency_ms_p90", json_real(wake_p90));
        json_object_set_new(nj, "scheduling_step_noise_pct", json_real(100 * b_sch));
        json_object_set_new(v, "noise", nj);
        json_t *fe = json_object(), *fs = json_object();
        for (int k = 0; k < 3; k++) {
            json_object_set(fe, METRICS[k], json_object_get(te, METRICS[k]));
            json_object_set(fs, METRICS[k], json_object_get(ts, METRICS[k]));
        }
        verdict_obj(fe, w_e, bd_e, TOL_E2E);
        json_object_set_new(fe, "verdict", json_string(ve));
        json_object_set_new(fe, "steal_limited", json_boolean(100 * nz.steal > TOL_E2E));
        json_object_set_new(fe, "within_5pct", json_boolean(w_e <= 5 && bd_e <= 5));
        verdict_obj(fs, w_s, bd_s, TOL_SCHED);
        json_object_set_new(fs, "replayed_steps", json_integer((json_int_t)matched));
        json_object_set_new(fs, "fallback_steps", json_integer((json_int_t)fallback));
        json_object_set_new(v, "end_to_end", fe);
        json_object_set_new(v, "scheduling", fs);
        json_object_set_new(v, "step_time", stepj);
        stepj = NULL;
        json_decref(te), json_decref(ts);
        const char *vs[] = {ve, verdict(w_s, bd_s, TOL_SCHED),
                            json_string_value(json_object_get(json_object_get(v, "step_time"), "verdict"))};
        for (int k = 0; k < 3; k++) {
            if (!strcmp(vs[k], "fail")) overall = "fail";
            else if (!strcmp(vs[k], "inconclusive") && strcmp(overall, "fail")) overall = "inconclusive";
        }
        json_object_set_new(v, "verdict", json_string(overall));
        snprintf(path, sizeof path, "%s/validation.json", out);
        json_dump_file(v, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        // the simulator's run directory carries the tables into its report
        snprintf(path, sizeof path, "%s/validation.json", simdir);
        json_dump_file(v, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        snprintf(path, sizeof path, "%s/steps.csv", simdir);
        char src[2300];
        snprintf(src, sizeof src, "%s/steps.csv", out);
        kvf_err e3 = {0};
        char *text = NULL;
        size_t len = 0;
        if (kvf_read_file(src, &text, &len, &e3) == KVF_OK) {
            FILE *f = fopen(path, "w");
            if (f) fwrite(text, 1, len, f), fclose(f);
            free(text);
        }
        // real against simulated TTFT per request, for the report's scatter
        snprintf(path, sizeof path, "%s/requests_compare.csv", simdir);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "id,real_ttft_ms,sim_ttft_ms,replay_ttft_ms,real_e2e_ms,sim_e2e_ms,replay_e2e_ms\n");
            for (size_t i = 0; i < n; i++)
                fprintf(f, "%zu,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", i, real.v[0][i], e2e.v[0][i], sch.v[0][i],
                        real.v[2][i], e2e.v[2][i], sch.v[2][i]);
            fclose(f);
        }
        kvf_err e2 = {0};
        rpt_report_write(simdir, true, true, &e2);
    }
    json_decref(stepj);
    if (!st && a.json) {
        char *t = json_dumps(v, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        printf("%s\n", t);
        free(t);
    } else if (!st) {
        json_t *ld = json_object_get(v, "serve");
        printf("validate: %zu requests of %s on %s (%s), trace %s\n", n, res.model, res.hardware,
               res.backend, a.trace);
        printf("  serve: %.1f s, utilisation %.2f, hit rate %.1f %%, %zu steps; noise: probes "
               "cpu +-%.1f %% wall +-%.1f %% (drift %+.1f %%), steal %.1f %%\n",
               json_number_value(json_object_get(ld, "wall_s")),
               json_number_value(json_object_get(ld, "utilisation")),
               100 * json_number_value(json_object_get(ld, "hit_rate")), res.n_steps,
               100 * nz.band_cpu, 100 * nz.band_wall, 100 * nz.drift_wall, 100 * nz.steal);
        const char *sec[] = {"scheduling", "end_to_end"};
        const char *title[] = {"scheduling fidelity (measured step times replayed)",
                               "end to end (calibrated step model)"};
        for (int q = 0; q < 2; q++) {
            json_t *fo = json_object_get(v, sec[q]);
            printf("  %s: %s (worst %.1f %%, band +-%.1f %%, tolerance %.0f %%)\n", title[q],
                   json_string_value(json_object_get(fo, "verdict")),
                   json_number_value(json_object_get(fo, "worst_error_pct")),
                   json_number_value(json_object_get(fo, "band_pct")),
                   json_number_value(json_object_get(fo, "tolerance_pct")));
            printf("    %-6s %-5s %12s %12s %9s %8s\n", "metric", "stat", "real ms", "sim ms", "error %", "band %");
            const char *ks[] = {"mean", "p50", "p90", "p99"};
            for (int i = 0; i < 3; i++)
                for (int k = 0; k < 4; k++) {
                    json_t *x = json_object_get(json_object_get(fo, METRICS[i]), ks[k]);
                    printf("    %-6.4s %-5s %12.2f %12.2f %+9.1f %8.1f\n", METRICS[i], ks[k],
                           json_number_value(json_object_get(x, "real")),
                           json_number_value(json_object_get(x, "sim")),
                           json_number_value(json_object_get(x, "error_pct")),
                           json_number_value(json_object_get(x, "band_pct")));
                }
        }
        json_t *sf = json_object_get(v, "step_time");
        printf("  step-time fidelity (%s clock): %s (worst median |residual| %.1f %%, band +-%.1f %%)\n",
               json_string_value(json_object_get(sf, "clock")),
               json_string_value(json_object_get(sf, "verdict")),
               json_number_value(json_object_get(sf, "worst_error_pct")),
               json_number_value(json_object_get(sf, "band_pct")));
        printf("    %-8s %6s %11s %11s %11s %8s\n", "kind", "steps", "median %", "med |r| %", "p90 |r| %", "flagged");
        for (int k = 0; k < 3; k++) {
            json_t *x = json_object_get(json_object_get(sf, "kinds"), KINDS[k]);
            printf("    %-8s %6lld %+11.1f %11.1f %11.1f %8lld\n", KINDS[k],
                   (long long)json_integer_value(json_object_get(x, "steps")),
                   json_number_value(json_object_get(x, "median_residual_pct")),
                   json_number_value(json_object_get(x, "median_abs_residual_pct")),
                   json_number_value(json_object_get(x, "p90_abs_residual_pct")),
                   (long long)json_integer_value(json_object_get(x, "flagged")));
        }
        json_t *c = json_object_get(v, "per_request_corr");
        printf("  per-request correlation (end to end): TTFT %.3f, E2E %.3f; extrapolated_steps %lld "
               "(simulated), flagged served steps %llu; replayed %llu steps, %llu by fallback\n",
               json_number_value(json_object_get(c, "ttft")), json_number_value(json_object_get(c, "e2e")),
               (long long)json_integer_value(json_object_get(v, "extrapolated_steps")),
               (unsigned long long)flagged, (unsigned long long)matched, (unsigned long long)fallback);
        printf("verdict: %s; results in %s/ (validation.json, steps.csv; simulator runs in sim/, "
               "sim-replay/)\n", overall, out);
    }
    json_decref(v);
    json_decref(sj);
    for (int i = 0; i < 5; i++) side_free(all[i]);
    free(rseqs), free(rsteps), free(pred), free(resid), free(flag);
    eng_serve_result_free(&res);
    free(reqs), free(blocks);
    eng_prober_destroy(pl.p);
    free(pl.v);
    mdl_profile_free(&mp);
    if (st) return fail(&err, st);
    return !strcmp(overall, "pass") ? 0 : !strcmp(overall, "inconclusive") ? 3 : 4;
early:
    eng_prober_destroy(pl.p);
    free(pl.v);
    mdl_profile_free(&mp);
    return fail(&err, st);
}
