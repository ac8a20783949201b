// cli/cli_engine.c -- `kvfleet engine serve` (the real engine serving a trace on this machine)
// and `kvfleet engine fit` (the roofline's efficiency factors fitted to a profile); the other
// engine subcommands are engine/'s (eng_cli_main). Also the pieces of serving that `kvfleet
// validate` shares (cli_serve.h): options, the shaped trace, the engine's run, steps.csv.
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"
#include "cli_serve.h"
#include "eng.h"
#include "sim.h"

int cli_serve_usage(FILE *f, const char *cmd, int rc) {
    fprintf(f,
            "usage: kvfleet %s --trace FILE [--model M] [--backend cpu|cuda] [--format F]\n"
            "          [--start S] [--end S] [--limit N] [--time-scale X] [--length-scale X]\n"
            "          [--rate R] [--skip-bad] [--max-batch-tokens N] [--max-batch-requests N]\n"
            "          [--kv-blocks N] [--block-tokens N] [--threads N]%s\n"
            "          [-o DIR [--force]] [--json]\n",
            cmd, strcmp(cmd, "validate") ? "" : " [--profile P] [--strict]");
    return rc;
}

static int usage_serve(FILE *f, int rc) {
    return cli_serve_usage(f, "engine serve", rc);
}
static int usage_validate(FILE *f, int rc) {
    return cli_serve_usage(f, "validate", rc);
}

static bool parse_num(const char *s, double *v) {
    char *e;
    *v = strtod(s, &e);
    return e != s && !*e && isfinite(*v) && *v >= 0;
}

// The numeric options into the cli_serve_args at dst: a number >= 0, then each its own range.
static int serve_number(const cli_spec *s, const char *o, const char *v, void *dst) {
    cli_serve_args *a = dst;
    double x;
    if (!parse_num(v, &x)) {
        fprintf(stderr, "kvfleet %s: %s: expects a number >= 0, got '%s'\n", s->cmd, o, v);
        return 2;
    }
    if (!strcmp(o, "--limit"))
        a->limit = (int64_t)x;
    else if (!strcmp(o, "--time-scale") && x > 0)
        a->time_scale = x;
    else if (!strcmp(o, "--length-scale") && x > 0)
        a->length_scale = x;
    else if (!strcmp(o, "--rate"))
        a->rate = x;
    else if (!strcmp(o, "--max-batch-tokens") && x >= 1)
        a->max_batch_tokens = (uint32_t)x;
    else if (!strcmp(o, "--max-batch-requests") && x >= 1)
        a->max_batch_requests = (uint32_t)x;
    else if (!strcmp(o, "--kv-blocks") && x >= 1)
        a->kv_blocks = (uint32_t)x;
    else if (!strcmp(o, "--block-tokens") && x >= 1)
        a->block_tokens = (uint32_t)x;
    else if (!strcmp(o, "--threads"))
        a->threads = (uint32_t)x;
    else if (!strcmp(o, "--start") && x < 1e9)
        a->start_s = x;
    else if (!strcmp(o, "--end") && x > 0 && x < 1e9)
        a->end_s = x;
    else {
        fprintf(stderr, "kvfleet %s: unknown option or bad value '%s %s'\n", s->cmd, o, v);
        return s->usage(stderr, 2);
    }
    return 0;
}

static int serve_format(const cli_spec *s, const char *o, const char *v, void *dst) {
    (void)o;
    if (!trc_format_parse(v, dst)) {
        fprintf(stderr, "kvfleet %s: --format: unknown format '%s'\n", s->cmd, v);
        return 2;
    }
    return 0;
}

int cli_serve_parse(int argc, char **argv, bool validate, cli_serve_args *a) {
    KVF_ASSERT(argv && a);
    memset(a, 0, sizeof *a);
    a->model = "tiny-dense";
    a->backend = "cpu";
    a->time_scale = a->length_scale = 1;
    a->max_batch_tokens = 512;
    a->max_batch_requests = 32;
    a->block_tokens = 16;
    const cli_opt opts[] = {
        CLI_OPT_STR("--model", &a->model),
        CLI_OPT_STR("--backend", &a->backend),
        CLI_OPT_STR("--profile", &a->profile),
        CLI_OPT_CALL("--format", &a->format, serve_format),
        CLI_OPT_FLAG("--skip-bad", &a->skip_bad),
        CLI_OPT_CALL("--limit", a, serve_number),
        CLI_OPT_CALL("--time-scale", a, serve_number),
        CLI_OPT_CALL("--length-scale", a, serve_number),
        CLI_OPT_CALL("--rate", a, serve_number),
        CLI_OPT_CALL("--max-batch-tokens", a, serve_number),
        CLI_OPT_CALL("--max-batch-requests", a, serve_number),
        CLI_OPT_CALL("--kv-blocks", a, serve_number),
        CLI_OPT_CALL("--block-tokens", a, serve_number),
        CLI_OPT_CALL("--threads", a, serve_number),
        CLI_OPT_CALL("--start", a, serve_number),
        CLI_OPT_CALL("--end", a, serve_number),
        CLI_OPT_FLAG("--strict", &a->strict),   // validate only: the last row
    };
    int nopts = (int)(sizeof opts / sizeof opts[0]) - !validate;
    const char *cmd = validate ? "validate" : "engine serve";
    const cli_spec spec = {.cmd = cmd,
                           .usage = validate ? usage_validate : usage_serve,
                           .common = CLI_TRACE | CLI_OUT | CLI_JSON | CLI_FORCE,
                           .opts = opts,
                           .nopts = nopts,
                           .first = validate ? 1 : 2};
    cli_common c;
    int rc = cli_parse(&spec, argc, argv, &c);
    if (rc != CLI_GO) return rc;
    a->trace = c.trace;
    a->out = c.out;
    a->json = c.json;
    a->force = c.force;
    if (!a->trace) {
        fprintf(stderr, "kvfleet %s: --trace is required\n", cmd);
        return spec.usage(stderr, 2);
    }
    if (a->end_s > 0 && a->end_s <= a->start_s) {
        fprintf(stderr, "kvfleet %s: --end (%g s) must be after --start (%g s)\n", cmd, a->end_s,
                a->start_s);
        return 2;
    }
    // -o is the caller's: relative to the working directory, whatever later resolves paths
    // against the scenario's or the source's folder
    const char *out = a->out ? a->out : validate ? "out/validate" : "out/engine-serve";
    char cwd[1024];
    if (out[0] != '/' && getcwd(cwd, sizeof cwd))
        snprintf(a->out_abs, sizeof a->out_abs, "%s/%s", cwd, out);
    else
        snprintf(a->out_abs, sizeof a->out_abs, "%s", out);
    return CLI_GO;
}

kvf_status cli_mem_trace_read(trc_reader *rd, cli_mem_trace *t, kvf_err *err) {
    KVF_ASSERT(rd && t && err);
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
    for (size_t i = 0; i < t->n; i++)
        t->r[i].blocks = t->blocks + boff[i];
    free(boff);
    return rc < 0 ? (err->code ? err->code : KVF_EPARSE) : KVF_OK;
}

void cli_mem_trace_free(cli_mem_trace *t) {
    free(t->r);
    free(t->blocks);
    memset(t, 0, sizeof *t);
}

kvf_status cli_serve_shape(const cli_serve_args *a, const char *path, size_t *n, char *notes,
                           size_t nn, kvf_err *err) {
    KVF_ASSERT(a && a->trace && path && n && notes && err);
    trc_options o;
    trc_options_default(&o);
    o.format = a->format;
    o.block_tokens = a->block_tokens;
    o.time_scale = a->time_scale;
    o.length_scale = a->length_scale;
    o.rate_rps = a->rate;
    o.limit_requests = a->limit;
    o.start_ns = (int64_t)(a->start_s * 1e9);
    o.end_ns = (int64_t)(a->end_s * 1e9);
    o.skip_bad = a->skip_bad;
    o.bucket = TRC_BUCKET_SPREAD;
    trc_reader *rd = NULL;
    trc_writer *w = NULL;
    kvf_status st = trc_reader_open(&rd, a->trace, &o, err);
    if (st) return st;
    st = trc_writer_open(&w, path, a->block_tokens, err);
    if (st) goto done;
    // read all (shaped traces are small), then write in arrival order with ids 0..n-1:
    // closed-loop turns are replayed open loop at their recorded times on both sides
    cli_mem_trace t;
    st = cli_mem_trace_read(rd, &t, err);
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
    cli_mem_trace_free(&t);
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

kvf_status cli_serve_load(const char *path, uint32_t block_tokens, eng_request **out,
                          uint64_t **blocks, size_t *n, kvf_err *err) {
    KVF_ASSERT(path && out && blocks && n && err);
    trc_options o;
    trc_options_default(&o);
    o.format = TRC_FMT_KVFLEET;
    o.block_tokens = block_tokens;
    trc_reader *rd = NULL;
    kvf_status st = trc_reader_open(&rd, path, &o, err);
    if (st) return st;
    cli_mem_trace t;
    st = cli_mem_trace_read(rd, &t, err);
    trc_reader_close(rd);
    if (st) {
        cli_mem_trace_free(&t);
        return st;
    }
    eng_request *rq = kvf_calloc(t.n + 1, sizeof *rq);
    for (size_t i = 0; i < t.n; i++)
        rq[i] = (eng_request){.arrival_ns = t.r[i].arrival_ns,
                              .input_tokens = t.r[i].input_tokens,
                              .output_tokens = t.r[i].output_tokens,
                              .n_blocks = t.r[i].n_blocks,
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
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    kvf_sort_doubles(v, n);
    json_object_set_new(o, "mean", json_real(n ? sum / (double)n : 0));
    json_object_set_new(o, "p50", json_real(kvf_percentile_sorted(v, n, 50)));
    json_object_set_new(o, "p90", json_real(kvf_percentile_sorted(v, n, 90)));
    json_object_set_new(o, "p99", json_real(kvf_percentile_sorted(v, n, 99)));
    return o;
}

// Engine results as the summary shape of `kvfleet run` (the keys it can measure).
static json_t *serve_summary(const cli_serve_args *a, const eng_serve_result *r) {
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
            tpot[nt++] =
                (double)(q->last_token_ns - q->first_token_ns) * 1e-6 / (q->output_tokens - 1);
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
    json_object_set_new(tp, "input_tok_s",
                        json_real(wall_s > 0 ? (double)r->prompt_tokens / wall_s : 0));
    json_object_set_new(tp, "output_tok_s", json_real(wall_s > 0 ? (double)out_tok / wall_s : 0));
    json_object_set_new(s, "throughput", tp);
    json_t *ca = json_object();
    json_object_set_new(
        ca, "hit_rate",
        json_real(r->prompt_tokens ? (double)r->cached_tokens / (double)r->prompt_tokens : 0));
    json_object_set_new(ca, "hit_tokens", json_integer((json_int_t)r->cached_tokens));
    json_object_set_new(ca, "miss_tokens",
                        json_integer((json_int_t)(r->prompt_tokens - r->cached_tokens)));
    json_object_set_new(s, "cache", ca);
    json_t *st = json_object();
    json_object_set_new(st, "steps", json_integer((json_int_t)r->n_steps));
    json_object_set_new(st, "forward_s", json_real(fwd * 1e-9));
    json_object_set_new(st, "host_overhead_ms_per_step",
                        json_real(r->n_steps ? host * 1e-6 / (double)r->n_steps : 0));
    json_object_set_new(st, "preemptions", json_integer((json_int_t)r->preemptions));
    json_object_set_new(s, "steps", st);
    json_t *si = json_object();
    json_object_set_new(si, "wall_s", json_real(wall_s));
    json_object_set_new(si, "simulated_s", json_real(wall_s));
    json_object_set_new(s, "sim", si);
    free(ttft), free(tpot), free(e2e);
    return s;
}

static kvf_status write_serve_db(const char *dir, const cli_serve_args *a,
                                 const eng_serve_result *r, const eng_request *reqs, kvf_err *err) {
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
            .id = i,
            .cls = "chatbot",
            .session = reqs[i].session,
            .arrival_s = (double)q->arrival_ns * 1e-9,
            .input_tokens = q->input_tokens,
            .cached_tokens = q->cached_tokens,
            .output_tokens = q->output_tokens,
            .vision_instance = -1,
            .prefill_instance = 0,
            .decode_instance = 0,
            .ttft_s = ok ? (double)(q->first_token_ns - q->arrival_ns) * 1e-9 : NAN,
            .tpot_s = ok && q->output_tokens > 1 ? (double)(q->last_token_ns - q->first_token_ns) *
                                                       1e-9 / (q->output_tokens - 1)
                                                 : NAN,
            .e2e_s = ok ? (double)(q->completion_ns - q->arrival_ns) * 1e-9 : NAN,
            .queue_s = (double)(q->admitted_ns - q->arrival_ns) * 1e-9,
            .status = ok ? "completed" : "rejected:kv_capacity",
            .hit_hbm = q->cached_tokens,
            .preemptions = q->preemptions};
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

kvf_status cli_serve_steps_csv(const char *dir, const eng_serve_result *r, const double *pred,
                               const double *resid, const char *const *flag, kvf_err *err) {
    KVF_ASSERT(dir && r && err);
    char path[2100];
    snprintf(path, sizeof path, "%s/steps.csv", dir);
    FILE *f = fopen(path, "w");
    if (!f) return kvf_fail(err, KVF_EIO, "%s: cannot write", path);
    fprintf(f,
            "step,kind,start_ms,wall_ms,cpu_ms,decode_seqs,decode_context,prefill_chunks,"
            "prefill_tokens,prefill_context%s,forward_ms\n",
            pred ? ",pred_ms,residual_pct,flag" : "");
    static const char *kinds[] = {"prefill", "decode", "mixed"};
    for (size_t i = 0; i < r->n_steps; i++) {
        const eng_step_record *k = &r->steps[i];
        uint64_t pc = 0;
        for (uint32_t j = 0; j < k->n_chunks; j++)
            pc += r->chunks[k->chunk0 + j].context;
        fprintf(f, "%zu,%s,%.3f,%.4f,%.4f,%u,%u,%u,%u,%llu", i, kinds[k->phase % 3],
                (double)k->start_ns * 1e-6, (double)k->duration_ns * 1e-6, (double)k->cpu_ns * 1e-6,
                k->decode_seqs, k->decode_context, k->n_chunks, k->prefill_tokens,
                (unsigned long long)pc);
        if (pred)
            fprintf(f, ",%.4f,%.2f,%s", pred[i] * 1e-6, resid ? 100 * resid[i] : 0.0,
                    flag && flag[i] ? flag[i] : "");
        // the model's forward passes alone (the rest of wall_ms is the serving loop's host work)
        fprintf(f, ",%.4f\n", (double)k->forward_ns * 1e-6);
    }
    if (fclose(f)) return kvf_fail(err, KVF_EIO, "%s: write failed", path);
    return KVF_OK;
}

static void serve_config(const cli_serve_args *a, eng_serve_config *c) {
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
    c->busy_hook = a->busy_hook;
    c->busy_ctx = a->busy_ctx;
    c->busy_every_ns = a->busy_every_ns;
}

kvf_status cli_serve_run(const cli_serve_args *a, const char *shaped, eng_serve_config *ec,
                         eng_serve_result *res, eng_request **reqs, uint64_t **blocks, size_t *n,
                         kvf_err *err) {
    KVF_ASSERT(a && shaped && ec && res && reqs && blocks && n && err);
    kvf_status st = cli_serve_load(shaped, a->block_tokens, reqs, blocks, n, err);
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

int cli_serve_fail(const kvf_err *err, kvf_status st) {
    fprintf(stderr, "kvfleet: %s\n", err->msg);
    return kvf_exit_code(st);
}

static int usage_fit(FILE *f, int rc) {
    fprintf(f, "usage: kvfleet engine fit PROFILE [--hardware H] [-o FILE]\n");
    if (!rc)
        fprintf(f, "  fits the kernel tables of hardware H (default: the profile's backend) to a\n"
                   "  profile from `kvfleet engine profile`; writes FILE, else PROFILE.fit (less "
                   ".csv)\n");
    return rc;
}

// `kvfleet engine fit PROFILE [--hardware H] [-o FILE]`: fits the roofline's efficiency
// factors (compute, memory, attention, per-step overhead) to a profile and writes them with
// their error, so hardware that was never measured can be predicted from datasheet peaks.
static int engine_fit(int argc, char **argv) {
    const char *path = NULL, *hwname = NULL;
    const cli_opt opts[] = {CLI_OPT_STR("--hardware", &hwname)};
    const cli_spec spec = {.cmd = "engine fit",
                           .usage = usage_fit,
                           .common = CLI_OUT,
                           .opts = opts,
                           .nopts = 1,
                           .pos = &path,
                           .npos = 1,
                           .first = 2};
    cli_common c;
    int rc = cli_parse(&spec, argc, argv, &c);
    if (rc != CLI_GO) return rc;
    if (!path) return usage_fit(stderr, 2);
    const char *out = c.out;
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
    if (!st)
        st = mdl_hardware_load(&hw, hwname ? hwname : (!strcmp(p.backend, "cpu") ? "cpu" : "h200"),
                               dir, &err);
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
    if (st) return cli_serve_fail(&err, st);
    printf("fit of %s (%u rows, %s on %s): compute %.3f, memory %.3f, attention %.3f, step "
           "overhead %.1f us; error rms %.1f %%, max %.1f %%\nwritten to %s\n",
           path, f.rows, f.model, f.hardware, f.eff.compute, f.eff.memory, f.eff.attention,
           f.eff.step_overhead_ns / 1e3, 100 * f.err_rms, 100 * f.err_max, out);
    if (f.err_rms > 0.2)   // on stderr: the fit is written, but it predicts this profile badly
        fprintf(stderr,
                "kvfleet engine fit: warning: error rms %.1f %% (above 20 %%): the efficiency "
                "factors fit this profile poorly; the roofline with them mispredicts its steps "
                "(prefer step_model: calibrated with this profile)\n",
                100 * f.err_rms);
    return 0;
}

kvf_status cli_serve_outdir(const cli_serve_args *a, sim_outdir *od, kvf_err *err) {
    KVF_ASSERT(a && od && err);
    memset(od, 0, sizeof *od);
    od->lock_fd = -1;
    kvf_status st = sim_path_check_file("--trace", a->trace, err);
    if (!st && a->profile) st = sim_path_check_file("--profile", a->profile, err);
    if (st) return st;
    st = sim_outdir_begin(od, a->out_abs, a->force, err);
    if (!st) st = sim_outdir_check_input(od, "trace", a->trace, err);
    if (!st && a->profile) st = sim_outdir_check_input(od, "profile", a->profile, err);
    if (st) sim_outdir_abort(od);
    return st;
}

// The first half of `engine serve` and `validate`: makes out/, shapes the trace into
// out/trace.jsonl (shaped, notes) and serves it on the engine. On failure nothing is left to
// free and *err says why.
static kvf_status shape_and_serve(const cli_serve_args *a, const char *out, char *shaped, size_t ns,
                                  char *notes, size_t nn, eng_serve_config *ec,
                                  eng_serve_result *res, eng_request **reqs, uint64_t **blocks,
                                  size_t *n, kvf_err *err) {
    eng_backend b;
    kvf_status st = eng_backend_parse(a->backend, &b, err);
    if (!st) st = kvf_mkdirs(out, err);
    if (st) return st;
    snprintf(shaped, ns, "%s/trace.jsonl", out);
    if ((st = cli_serve_shape(a, shaped, n, notes, nn, err))) return st;
    *reqs = NULL;
    *blocks = NULL;
    memset(res, 0, sizeof *res);
    if ((st = cli_serve_run(a, shaped, ec, res, reqs, blocks, n, err))) {
        free(*reqs), free(*blocks);
        *reqs = NULL, *blocks = NULL;
    }
    return st;
}

int cli_engine(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "fit")) return engine_fit(argc, argv);
    if (argc < 2 || strcmp(argv[1], "serve")) return eng_cli_main(argc, argv);
    cli_serve_args a;
    int rc = cli_serve_parse(argc, argv, false, &a);
    if (rc != CLI_GO) return rc;
    kvf_err err = {0};
    sim_outdir od;
    kvf_status st = cli_serve_outdir(&a, &od, &err);
    if (st) return cli_serve_fail(&err, st);
    const char *out = od.tmp;   // renamed to a.out_abs once everything is written
    char shaped[2200], notes[256];
    size_t n;
    eng_serve_config ec;
    eng_serve_result res;
    eng_request *reqs;
    uint64_t *blocks;
    st = shape_and_serve(&a, out, shaped, sizeof shaped, notes, sizeof notes, &ec, &res, &reqs,
                         &blocks, &n, &err);
    if (st) {
        sim_outdir_abort(&od);
        return cli_serve_fail(&err, st);
    }
    json_t *s = serve_summary(&a, &res);
    char path[2100];
    snprintf(path, sizeof path, "%s/summary.json", out);
    json_dump_file(s, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    st = write_serve_db(out, &a, &res, reqs, &err);
    if (!st) st = cli_serve_steps_csv(out, &res, NULL, NULL, NULL, &err);
    if (!st)
        st = sim_outdir_commit(&od, &err);
    else
        sim_outdir_abort(&od);
    if (!st && a.json) {
        char *t = json_dumps(s, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        printf("%s\n", t);
        free(t);
    } else if (!st) {
        json_t *tt = json_object_get(s, "ttft_ms"), *tp = json_object_get(s, "tpot_ms");
        printf("engine serve: %zu requests of %s on %s (%s) in %.1f s wall\n", n, res.model,
               res.hardware, res.backend, (double)res.wall_ns * 1e-9);
        printf("  TTFT ms  p50 %.1f  p90 %.1f;  TPOT ms  p50 %.2f  p90 %.2f;  hit rate %.1f %%\n",
               json_number_value(json_object_get(tt, "p50")),
               json_number_value(json_object_get(tt, "p90")),
               json_number_value(json_object_get(tp, "p50")),
               json_number_value(json_object_get(tp, "p90")),
               100 * json_number_value(json_object_get(json_object_get(s, "cache"), "hit_rate")));
        printf("results in %s/\n", a.out_abs);
    }
    json_decref(s);
    eng_serve_result_free(&res);
    free(reqs), free(blocks);
    return st ? cli_serve_fail(&err, st) : 0;
}
