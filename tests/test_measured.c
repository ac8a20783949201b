// tests/test_measured.c -- measured benchmark runs (traces/trc_measured.c): the 16 training
// runs of validation/training parse and agree with their own reports; the format fixtures of
// tests/data/measured (format fixtures, not measurements) parse and their summaries recompute
// from their per-request data; every malformed variant gets its file, line and field; the
// trace conversion round-trips through the canonical reader.
//
// Expected values come from the files themselves, read here with jansson and plain line scans
// (never from the library's output), or from relations the run's own figures must satisfy
// (a summary mean is the count-weighted mean of its stage means; throughput x span = count).
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "trc.h"

// ---- helpers ------------------------------------------------------------------------------
static const char *src_path(const char *rel) {
    static char buf[8][1024];
    static int k;
    char *p = buf[k++ % 8];
    const char *src = getenv("KVF_SOURCE_DIR");
    snprintf(p, 1024, "%s/%s", src ? src : ".", rel);
    return p;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    ck_assert(fread(b, 1, (size_t)n, f) == (size_t)n);
    b[n] = 0;
    fclose(f);
    return b;
}

static void spit(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static json_t *load_json(const char *path) {
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    ck_assert_msg(o != NULL, "%s:%d: %s", path, je.line, je.text);
    return o;
}

static double jget(json_t *o, const char *dotted) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", dotted);
    json_t *v = o;
    for (char *t = strtok(buf, "."); t && v; t = strtok(NULL, "."))
        v = json_object_get(v, t);
    ck_assert_msg(v && json_is_number(v), "no number at %s", dotted);
    return json_number_value(v);
}

static bool close_rel(double a, double b, double rel) {
    if (isnan(a) || isnan(b)) return false;
    return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-12;
}

#define CLOSE(a, b, rel, what)                                                                     \
    ck_assert_msg(close_rel((a), (b), (rel)), "%s: %s %.12g vs %.12g", ctx, what, (double)(a),     \
                  (double)(b))

// A top-level "key: value" line of a small YAML file (exp-config.yaml), "" when absent.
static void yaml_scalar(const char *path, const char *key, char *out, size_t n) {
    char *t = slurp(path);
    out[0] = 0;
    size_t kl = strlen(key);
    for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n"))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            const char *v = line + kl + 1;
            while (*v == ' ')
                v++;
            snprintf(out, n, "%s", v);
            break;
        }
    free(t);
}

// ---- the training set -----------------------------------------------------------------------
typedef struct man_row {
    char exp[160], model[160], workload[32];
    int tp;
    bool overloaded;
} man_row;

// The manifest read by a plain split on commas (independent of the library's reader).
static int manifest_rows(man_row *rows, int cap) {
    char *t = slurp(src_path("validation/training/manifest.csv"));
    int n = 0, icol[5] = {-1, -1, -1, -1, -1};
    bool header = true;
    for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
        char *cols[64];
        int nc = 0;
        for (char *p = line; nc < 64;) {
            cols[nc++] = p;
            char *c = strchr(p, ',');
            if (!c) break;
            *c = 0;
            p = c + 1;
        }
        if (header) {
            static const char *want[5] = {"experiment", "model", "tp", "workload", "overloaded"};
            for (int i = 0; i < nc; i++)
                for (int k = 0; k < 5; k++)
                    if (!strcmp(cols[i], want[k])) icol[k] = i;
            for (int k = 0; k < 5; k++)
                ck_assert_msg(icol[k] >= 0, "manifest lacks %s", want[k]);
            header = false;
            continue;
        }
        ck_assert(n < cap);
        man_row *r = &rows[n++];
        snprintf(r->exp, sizeof r->exp, "%s", cols[icol[0]]);
        snprintf(r->model, sizeof r->model, "%s", cols[icol[1]]);
        r->tp = atoi(cols[icol[2]]);
        snprintf(r->workload, sizeof r->workload, "%s", cols[icol[3]]);
        r->overloaded = !strcmp(cols[icol[4]], "yes");
    }
    free(t);
    return n;
}

START_TEST(test_training_runs_parse_and_agree) {
    man_row rows[32];
    int n = manifest_rows(rows, 32);
    ck_assert_int_eq(n, 16);
    // the library's manifest reader sees the same rows
    trc_measured_entry *ent;
    size_t ne;
    kvf_err err = {0};
    ck_assert_msg(
        !trc_measured_manifest_read(src_path("validation/training/manifest.csv"), &ent, &ne, &err),
        "%s", err.msg);
    ck_assert_uint_eq(ne, 16);
    int overloaded = 0;
    for (int i = 0; i < n; i++) {
        const man_row *r = &rows[i];
        const char *ctx = r->exp;
        ck_assert_str_eq(ent[i].experiment, r->exp);
        ck_assert_str_eq(ent[i].model, r->model);
        ck_assert_int_eq(ent[i].tp, r->tp);
        ck_assert(ent[i].overloaded == r->overloaded);
        char dir[1024], f[1200];
        snprintf(dir, sizeof dir, "%s", ent[i].dir);
        trc_measured m;
        ck_assert_msg(!trc_measured_read(dir, TRC_MEAS_AUTO, -1, &m, &err), "%s", err.msg);
        ck_assert_int_eq(m.format, TRC_MEAS_INFERENCE_PERF);
        // the summary figures equal the report's own
        snprintf(f, sizeof f, "%s/results/summary_lifecycle_metrics.json", dir);
        json_t *s = load_json(f);
        CLOSE(m.summary.ttft_s.mean, jget(s, "successes.latency.time_to_first_token.mean"), 1e-12,
              "ttft mean");
        CLOSE(m.summary.ttft_s.p90, jget(s, "successes.latency.time_to_first_token.p90"), 1e-12,
              "ttft p90");
        CLOSE(m.summary.ttft_s.p99, jget(s, "successes.latency.time_to_first_token.p99"), 1e-12,
              "ttft p99");
        CLOSE(m.summary.itl_s.mean, jget(s, "successes.latency.inter_token_latency.mean"), 1e-12,
              "itl mean");
        CLOSE(m.summary.tpot_s.mean, jget(s, "successes.latency.time_per_output_token.mean"), 1e-12,
              "tpot mean");
        CLOSE(m.summary.e2e_s.mean, jget(s, "successes.latency.request_latency.mean"), 1e-12,
              "e2e mean");
        CLOSE(m.summary.e2e_s.p90, jget(s, "successes.latency.request_latency.p90"), 1e-12,
              "e2e p90");
        ck_assert_uint_eq(m.summary.completed, (uint64_t)jget(s, "successes.count"));
        ck_assert_uint_eq(m.summary.failed, (uint64_t)jget(s, "failures.count"));
        double sent = jget(s, "load_summary.count");
        // relations the run's own figures satisfy: span x request rate = completed requests,
        // input throughput x span / completed = mean prompt length
        CLOSE(m.summary.duration_s * jget(s, "successes.throughput.requests_per_sec"),
              (double)m.summary.completed, 1e-9, "span x rps");
        CLOSE(m.summary.input_tok_s * m.summary.duration_s / (double)m.summary.completed,
              jget(s, "successes.prompt_len.mean"), 1e-6, "input tok/s x span / n");
        // the summary's means are the count-weighted means of its stages'
        double wt = 0, we = 0, nstage = 0, sent_stages = 0;
        for (int k = 0;; k++) {
            snprintf(f, sizeof f, "%s/results/stage_%d_lifecycle_metrics.json", dir, k);
            struct stat sb;
            if (stat(f, &sb)) break;
            json_t *st = load_json(f);
            double c = jget(st, "successes.count");
            if (c > 0) {
                wt += c * jget(st, "successes.latency.time_to_first_token.mean");
                we += c * jget(st, "successes.latency.request_latency.mean");
            }
            nstage += c;
            sent_stages += jget(st, "load_summary.count");
            ck_assert(k < (int)m.config.n_stages);
            ck_assert_uint_eq(m.config.stages[k].requests,
                              (uint64_t)jget(st, "load_summary.count"));
            json_decref(st);
        }
        ck_assert_msg(nstage == (double)m.summary.completed && sent_stages == sent,
                      "%s: stages %g/%g vs %llu/%g", ctx, nstage, sent_stages,
                      (unsigned long long)m.summary.completed, sent);
        CLOSE(wt / nstage, m.summary.ttft_s.mean, 1e-9, "stage-weighted ttft mean");
        CLOSE(we / nstage, m.summary.e2e_s.mean, 1e-9, "stage-weighted e2e mean");
        json_decref(s);
        // configuration as the run says it
        char v[256];
        snprintf(f, sizeof f, "%s/exp-config.yaml", dir);
        yaml_scalar(f, "model", v, sizeof v);
        ck_assert_str_eq(m.config.model, v);
        ck_assert_str_eq(m.config.model, r->model);
        yaml_scalar(f, "tensor_parallelism", v, sizeof v);
        ck_assert_int_eq(m.config.tp, atoi(v));
        ck_assert_int_eq(m.config.tp, r->tp);
        yaml_scalar(f, "max_num_seqs", v, sizeof v);
        ck_assert_int_eq(m.config.max_num_seqs, atoi(v));
        yaml_scalar(f, "max_num_batched_tokens", v, sizeof v);
        ck_assert_int_eq(m.config.max_num_batched_tokens, atoi(v));
        ck_assert_int_eq(m.config.prefix_caching, 1);
        ck_assert(m.config.client_timeout_s == 300);
        ck_assert_uint_eq(m.config.prompts, 100);   // 10 groups x 10 prompts, as really sent
        ck_assert_uint_eq(m.config.prompt_groups, 10);
        ck_assert_uint_eq(m.n_req, 0);   // per-request reports were not published
        // two client timestamps per generated token (see validation/training/README.md)
        ck_assert_msg(fabs(m.token_times_per_token - 2.0) < 0.05, "%s: %g token times per token",
                      ctx, m.token_times_per_token);
        // overloaded: client time-outs or a mean TTFT above 10 s
        bool ov = m.summary.failed > 0 || m.summary.ttft_s.mean > 10;
        ck_assert_msg(ov == r->overloaded, "%s: overloaded %d vs manifest %d", ctx, ov,
                      r->overloaded);
        if (ov) {
            overloaded++;
            ck_assert_str_eq(r->workload, "reasoning");
        }
        trc_measured_free(&m);
    }
    ck_assert_int_eq(overloaded, 4);
    free(ent);
}
END_TEST

// Reads a canonical trace written by trc_measured_write_trace back with the trace reader.
typedef struct rd {
    uint64_t n;
    int64_t *t;
    uint32_t *in, *out;
    uint8_t *flags;
    uint32_t *nb;
    uint64_t *b0, *blast;   // first and last block id
} rd;

static void read_back(const char *path, uint32_t bt, rd *o) {
    trc_options opt;
    trc_options_default(&opt);
    opt.format = TRC_FMT_KVFLEET;
    opt.block_tokens = bt;
    kvf_err err = {0};
    uint64_t n;
    ck_assert_msg(!trc_count(path, &opt, &n, &err), "%s", err.msg);
    memset(o, 0, sizeof *o);
    o->t = calloc(n + 1, sizeof *o->t);
    o->in = calloc(n + 1, sizeof *o->in);
    o->out = calloc(n + 1, sizeof *o->out);
    o->flags = calloc(n + 1, 1);
    o->nb = calloc(n + 1, sizeof *o->nb);
    o->b0 = calloc(n + 1, sizeof *o->b0);
    o->blast = calloc(n + 1, sizeof *o->blast);
    trc_reader *r;
    ck_assert_msg(!trc_reader_open(&r, path, &opt, &err), "%s", err.msg);
    trc_request q;
    int rc;
    while ((rc = trc_reader_next(r, &q, &err)) == 1) {
        uint64_t i = o->n++;
        o->t[i] = q.arrival_ns;
        o->in[i] = q.input_tokens;
        o->out[i] = q.output_tokens;
        o->flags[i] = q.flags;
        o->nb[i] = q.n_blocks;
        o->b0[i] = q.n_blocks ? q.blocks[0] : 0;
        o->blast[i] = q.n_blocks ? q.blocks[q.n_blocks - 1] : 0;
    }
    ck_assert_msg(rc == 0, "%s", err.msg);
    trc_reader_close(r);
}

static void rd_free(rd *o) {
    free(o->t), free(o->in), free(o->out), free(o->flags), free(o->nb), free(o->b0), free(o->blast);
}

START_TEST(test_training_trace_as_it_ran) {
    trc_measured_entry *ent;
    size_t ne;
    kvf_err err = {0};
    ck_assert(
        !trc_measured_manifest_read(src_path("validation/training/manifest.csv"), &ent, &ne, &err));
    for (size_t e = 0; e < ne; e++) {
        const char *ctx = ent[e].experiment;
        trc_measured m;
        ck_assert_msg(!trc_measured_read(ent[e].dir, TRC_MEAS_AUTO, -1, &m, &err), "%s", err.msg);
        const char *out = kvt_tmp_path("train.jsonl");
        uint64_t nw;
        ck_assert_msg(!trc_measured_write_trace(&m, out, 16, 1, &nw, &err), "%s", err.msg);
        char f[1200];
        snprintf(f, sizeof f, "%s/results/summary_lifecycle_metrics.json", ent[e].dir);
        json_t *s = load_json(f);
        double sent = jget(s, "load_summary.count"), plen = jget(s, "successes.prompt_len.mean");
        json_decref(s);
        rd o;
        read_back(out, 16, &o);
        ck_assert_msg((double)o.n == sent && nw == o.n, "%s: %llu requests, run sent %g", ctx,
                      (unsigned long long)o.n, sent);
        double sum_in = 0;
        for (uint64_t i = 0; i < o.n; i++) {
            ck_assert(i == 0 || o.t[i] >= o.t[i - 1]);
            sum_in += o.in[i];
            ck_assert_uint_eq(o.out[i], m.config.output_len);
        }
        CLOSE(sum_in / (double)o.n, plen, 0.01, "mean prompt length");
        // each stage's requests lie in its window at its rate
        uint64_t i = 0;
        for (uint32_t k = 0; k < m.config.n_stages; k++) {
            const trc_measured_stage *st = &m.config.stages[k];
            int64_t lo = o.t[i], hi = o.t[i + st->requests - 1];
            double span = (double)(hi - lo) / 1e9;
            ck_assert_msg(span <= st->duration_s + 1e-6 && span > 0.9 * st->duration_s,
                          "%s stage %u: span %g s, window %g s", ctx, k, span, st->duration_s);
            // prompts in turn: request j and j + 100 of a stage send the same prompt
            for (uint64_t j = 0; j + 100 < st->requests; j += 37) {
                ck_assert_uint_eq(o.in[i + j], o.in[i + j + 100]);
                ck_assert_uint_eq(o.blast[i + j], o.blast[i + j + 100]);
                // requests 10 apart share their group's system prompt, not the question
                if (o.nb[i + j] && o.nb[i + j + 10]) {
                    ck_assert(o.b0[i + j] == o.b0[i + j + 10]);
                    ck_assert(o.blast[i + j] != o.blast[i + j + 10]);
                }
            }
            i += st->requests;
        }
        rd_free(&o);
        // every prompt repeats many times: an unbounded cache serves nearly all of it
        trc_stats ts;
        trc_options opt;
        trc_options_default(&opt);
        opt.block_tokens = 16;
        ck_assert_msg(!trc_stats_file(out, &opt, &ts, &err), "%s", err.msg);
        ck_assert_msg(ts.ideal_hit_rate > 0.9, "%s: ideal hit rate %g", ctx, ts.ideal_hit_rate);
        trc_measured_free(&m);
    }
    free(ent);
}
END_TEST

// ---- format fixtures ------------------------------------------------------------------------
static void stat_eq_file(const char *ctx, json_t *o, const char *metric, const char *e2e_name,
                         const trc_measured_stat *s, bool has_p90) {
    char k[64];
    const char *name = e2e_name ? e2e_name : metric;
    snprintf(k, sizeof k, "mean_%s_ms", name);
    CLOSE(s->mean, jget(o, k) / 1000, 1e-9, k);
    snprintf(k, sizeof k, "median_%s_ms", name);
    CLOSE(s->p50, jget(o, k) / 1000, 1e-9, k);
    if (has_p90) {
        snprintf(k, sizeof k, "p90_%s_ms", name);
        CLOSE(s->p90, jget(o, k) / 1000, 1e-9, k);
    }
    snprintf(k, sizeof k, "p99_%s_ms", name);
    CLOSE(s->p99, jget(o, k) / 1000, 1e-9, k);
}

START_TEST(test_vllm_fixture) {
    const char *path = src_path("tests/data/measured/vllm_small.json");
    trc_measured m;
    kvf_err err = {0};
    ck_assert_msg(!trc_measured_read(path, TRC_MEAS_AUTO, -1, &m, &err), "%s", err.msg);
    ck_assert_int_eq(m.format, TRC_MEAS_VLLM);
    json_t *o = load_json(path);
    const char *ctx = "vllm";
    size_t n = json_array_size(json_object_get(o, "ttfts"));
    ck_assert_uint_eq(m.n_req, n);
    ck_assert_uint_eq(m.summary.completed, (uint64_t)jget(o, "completed"));
    ck_assert_uint_eq(m.summary.failed, (uint64_t)jget(o, "failed"));
    ck_assert_str_eq(m.config.model, json_string_value(json_object_get(o, "model_id")));
    ck_assert_int_eq(m.config.tp,
                     atoi(json_string_value(json_object_get(o, "tensor_parallel_size"))));
    ck_assert_int_eq(m.config.max_num_seqs,
                     atoi(json_string_value(json_object_get(o, "max_num_seqs"))));
    ck_assert_int_eq(m.config.prefix_caching, 0);
    ck_assert_str_eq(m.config.hardware, "h100-sxm");
    ck_assert(m.config.request_rate_rps == jget(o, "request_rate"));
    ck_assert_int_eq(m.config.max_concurrency, (int)jget(o, "max_concurrency"));
    // the file's summary, as the reader took it
    stat_eq_file(ctx, o, "ttft", NULL, &m.summary.ttft_s, true);
    stat_eq_file(ctx, o, "e2el", NULL, &m.summary.e2e_s, true);
    // recomputed from the per-request arrays, equal to the file's own summary
    trc_measured_summary r;
    ck_assert_msg(!trc_measured_summarize(&m, &r, &err), "%s", err.msg);
    stat_eq_file(ctx, o, "ttft", NULL, &r.ttft_s, true);
    stat_eq_file(ctx, o, "tpot", NULL, &r.tpot_s, true);
    stat_eq_file(ctx, o, "itl", NULL, &r.itl_s, true);
    stat_eq_file(ctx, o, "e2el", NULL, &r.e2e_s, true);
    CLOSE(r.request_rps, jget(o, "request_throughput"), 1e-9, "request throughput");
    CLOSE(r.output_tok_s, jget(o, "output_throughput"), 1e-9, "output throughput");
    ck_assert_uint_eq(r.completed, m.summary.completed);
    // per request against the arrays
    json_t *lat = json_object_get(o, "latencies"), *st = json_object_get(o, "start_times");
    double t0 = INFINITY;
    for (size_t i = 0; i < n; i++)
        t0 = fmin(t0, json_number_value(json_array_get(st, i)));
    for (size_t i = 0; i < n; i++) {
        const trc_measured_req *q = &m.req[i];
        ck_assert_uint_eq(q->input_tokens,
                          json_integer_value(json_array_get(json_object_get(o, "input_lens"), i)));
        ck_assert(fabs(q->arrival_s - (json_number_value(json_array_get(st, i)) - t0)) < 1e-9);
        if (q->ok)
            CLOSE(q->e2e_s, json_number_value(json_array_get(lat, i)), 1e-12, "latency");
        else
            ck_assert(isnan(q->ttft_s));
    }
    json_decref(o);
    trc_measured_free(&m);
    // the older benchmark_serving.py layout: no failed, latencies or start_times; E2E is then
    // TTFT + the gaps, arrivals are drawn at the run's rate (n / rate for the last)
    o = load_json(path);
    json_object_del(o, "failed");
    json_object_del(o, "latencies");
    json_object_del(o, "start_times");
    char *txt = json_dumps(o, JSON_REAL_PRECISION(17));
    const char *p2 = kvt_tmp_path("vllm_old.json");
    FILE *f = fopen(p2, "w");
    fputs(txt, f);
    fclose(f);
    free(txt);
    ck_assert_msg(!trc_measured_read(p2, TRC_MEAS_AUTO, -1, &m, &err), "%s", err.msg);
    ck_assert_int_eq(m.format, TRC_MEAS_VLLM);
    ck_assert(isnan(m.req[0].arrival_s));
    ck_assert_msg(!trc_measured_summarize(&m, &r, &err), "%s", err.msg);
    stat_eq_file("vllm old layout", o, "e2el", NULL, &r.e2e_s, true);
    const char *out = kvt_tmp_path("vllm_old.jsonl");
    uint64_t nw;
    ck_assert(!trc_measured_write_trace(&m, out, 64, 9, &nw, &err));
    ck_assert_uint_eq(nw, n);
    json_decref(o);
    trc_measured_free(&m);
}
END_TEST

START_TEST(test_sglang_fixture) {
    const char *path = src_path("tests/data/measured/sglang_small.jsonl");
    trc_measured m;
    kvf_err err = {0};
    ck_assert_msg(!trc_measured_read(path, TRC_MEAS_AUTO, -1, &m, &err), "%s", err.msg);
    ck_assert_int_eq(m.format, TRC_MEAS_SGLANG);
    ck_assert_uint_eq(m.runs, 2);
    ck_assert_uint_eq(m.run, 1);
    // line 2 is plain JSON (its rate is finite): the test's own view of it
    char *text = slurp(path);
    char *l2 = strchr(text, '\n') + 1;
    json_error_t je;
    json_t *o = json_loadb(l2, strcspn(l2, "\n"), 0, &je);
    ck_assert_msg(o != NULL, "%s", je.text);
    const char *ctx = "sglang run 2";
    ck_assert_uint_eq(m.n_req, json_array_size(json_object_get(o, "ttfts")));
    ck_assert(m.config.request_rate_rps == jget(o, "request_rate"));
    trc_measured_summary r;
    ck_assert_msg(!trc_measured_summarize(&m, &r, &err), "%s", err.msg);
    stat_eq_file(ctx, o, "ttft", NULL, &r.ttft_s, false);
    stat_eq_file(ctx, o, "tpot", NULL, &r.tpot_s, false);
    stat_eq_file(ctx, o, "itl", NULL, &r.itl_s, false);
    stat_eq_file(ctx, o, "e2e_latency", NULL, &r.e2e_s, false);
    stat_eq_file(ctx, o, "e2e_latency", NULL, &m.summary.e2e_s, false);
    CLOSE(r.input_tok_s, jget(o, "input_throughput"), 1e-9, "input throughput");
    ck_assert_uint_eq(r.completed, (uint64_t)jget(o, "completed"));
    ck_assert_uint_eq(m.summary.failed, m.n_req - r.completed);
    json_decref(o);
    free(text);
    trc_measured_free(&m);
    // run 1: summary only, all requests at once (request_rate Infinity)
    ck_assert_msg(!trc_measured_read(path, TRC_MEAS_SGLANG, 0, &m, &err), "%s", err.msg);
    ck_assert(isinf(m.config.request_rate_rps));
    ck_assert_uint_eq(m.n_req, 0);
    ck_assert(!isnan(m.summary.ttft_s.mean) && isnan(m.summary.ttft_s.p90));
    ck_assert_int_eq(trc_measured_summarize(&m, &r, &err), KVF_EINVAL);
    trc_measured_free(&m);
    ck_assert_int_eq(trc_measured_read(path, TRC_MEAS_SGLANG, 5, &m, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "sglang_small.jsonl"), "%s", err.msg);
}
END_TEST

START_TEST(test_inference_perf_per_request) {
    const char *dir = src_path("tests/data/measured/ip_small");
    trc_measured m;
    kvf_err err = {0};
    ck_assert_msg(!trc_measured_read(dir, TRC_MEAS_AUTO, -1, &m, &err), "%s", err.msg);
    json_t *s =
        load_json(src_path("tests/data/measured/ip_small/results/summary_lifecycle_metrics.json"));
    json_t *pr = load_json(
        src_path("tests/data/measured/ip_small/results/per_request_lifecycle_metrics.json"));
    const char *ctx = "inference-perf fixture";
    ck_assert_uint_eq(m.n_req, json_array_size(pr));
    trc_measured_summary r;
    ck_assert_msg(!trc_measured_summarize(&m, &r, &err), "%s", err.msg);
    static const char *k[4] = {"time_to_first_token", "inter_token_latency",
                               "time_per_output_token", "request_latency"};
    const trc_measured_stat *st[4] = {&r.ttft_s, &r.itl_s, &r.tpot_s, &r.e2e_s};
    for (int i = 0; i < 4; i++) {
        char key[128];
        snprintf(key, sizeof key, "successes.latency.%s.mean", k[i]);
        CLOSE(st[i]->mean, jget(s, key), 1e-9, key);
        snprintf(key, sizeof key, "successes.latency.%s.p90", k[i]);
        CLOSE(st[i]->p90, jget(s, key), 1e-9, key);
        snprintf(key, sizeof key, "successes.latency.%s.median", k[i]);
        CLOSE(st[i]->p50, jget(s, key), 1e-9, key);
    }
    CLOSE(r.request_rps, jget(s, "successes.throughput.requests_per_sec"), 1e-9, "rps");
    ck_assert_uint_eq(r.failed, (uint64_t)jget(s, "failures.count"));
    ck_assert_uint_eq(m.config.prompts, 6);
    ck_assert_int_eq(m.config.max_num_seqs, 256);
    ck_assert_int_eq(m.config.prefix_caching, 1);
    // the trace: arrivals and lengths as recorded, prompts in turn share blocks
    const char *out = kvt_tmp_path("ip.jsonl");
    uint64_t nw;
    ck_assert_msg(!trc_measured_write_trace(&m, out, 16, 3, &nw, &err), "%s", err.msg);
    rd o;
    read_back(out, 16, &o);
    ck_assert_uint_eq(o.n, m.n_req);
    double t0 = INFINITY;
    for (size_t i = 0; i < json_array_size(pr); i++)
        t0 = fmin(t0, jget(json_array_get(pr, i), "start_time"));
    for (uint64_t i = 0; i < o.n; i++) {   // the fixture is in send order
        json_t *q = json_array_get(pr, i);
        double want = jget(q, "start_time") - t0;
        ck_assert_msg(llabs(o.t[i] - llround(want * 1e9)) <= 1, "req %llu: %lld vs %.9f",
                      (unsigned long long)i, (long long)o.t[i], want);
        ck_assert_uint_eq(o.in[i], (uint32_t)jget(q, "info.input_tokens"));
        bool failed = !json_is_null(json_object_get(q, "error"));
        ck_assert(!!(o.flags[i] & TRC_F_FAILED) == failed);
        if (!failed) ck_assert_uint_eq(o.out[i], (uint32_t)jget(q, "info.output_tokens"));
        if (i >= 6) ck_assert(o.blast[i] == o.blast[i - 6] || o.nb[i] != o.nb[i - 6]);
        if (i >= 2 && o.nb[i] && o.nb[i - 2]) ck_assert(o.b0[i] == o.b0[i - 2]);   // same group
    }
    rd_free(&o);
    trc_measured_free(&m);
    // the later per-request layout (info.request_metrics / info.response_metrics) reads the same
    char d[600], f[700];
    snprintf(d, sizeof d, "%s", kvt_tmp_path("ip_later"));
    mkdir(d, 0755);
    snprintf(f, sizeof f, "%s/results", d);
    mkdir(f, 0755);
    static const char *copy[] = {"summary_lifecycle_metrics.json", "config.yaml"};
    for (int i = 0; i < 2; i++) {
        char from[300];
        snprintf(from, sizeof from, "tests/data/measured/ip_small/results/%s", copy[i]);
        char *t = slurp(src_path(from));
        snprintf(f, sizeof f, "%s/results/%s", d, copy[i]);
        spit(f, t);
        free(t);
    }
    for (size_t i = 0; i < json_array_size(pr); i++) {
        json_t *q = json_array_get(pr, i), *info = json_object_get(q, "info");
        json_t *later =
            json_pack("{s:{s:{s:O}},s:{s:O,s:O}}", "request_metrics", "text", "input_tokens",
                      json_object_get(info, "input_tokens"), "response_metrics", "output_tokens",
                      json_object_get(info, "output_tokens"), "output_token_times",
                      json_object_get(info, "output_token_times"));
        ck_assert(later != NULL);
        json_object_set_new(q, "info", later);
    }
    snprintf(f, sizeof f, "%s/results/per_request_lifecycle_metrics.json", d);
    ck_assert(!json_dump_file(pr, f, JSON_INDENT(2) | JSON_REAL_PRECISION(17)));
    ck_assert_msg(!trc_measured_read(d, TRC_MEAS_INFERENCE_PERF, -1, &m, &err), "%s", err.msg);
    trc_measured_summary r2;
    ck_assert_msg(!trc_measured_summarize(&m, &r2, &err), "%s", err.msg);
    CLOSE(r2.ttft_s.mean, r.ttft_s.mean, 1e-12, "later layout ttft");
    CLOSE(r2.itl_s.p90, r.itl_s.p90, 1e-12, "later layout itl p90");
    CLOSE(r2.tpot_s.mean, r.tpot_s.mean, 1e-12, "later layout tpot");
    CLOSE(r2.input_tok_s, r.input_tok_s, 1e-12, "later layout input tok/s");
    trc_measured_free(&m);
    json_decref(s);
    json_decref(pr);
}
END_TEST

START_TEST(test_trace_roundtrip_vllm) {
    const char *path = src_path("tests/data/measured/vllm_small.json");
    trc_measured m;
    kvf_err err = {0};
    ck_assert(!trc_measured_read(path, TRC_MEAS_VLLM, 0, &m, &err));
    const char *out = kvt_tmp_path("vllm.jsonl");
    uint64_t nw;
    ck_assert_msg(!trc_measured_write_trace(&m, out, 64, 1, &nw, &err), "%s", err.msg);
    json_t *o = load_json(path);
    json_t *st = json_object_get(o, "start_times"), *in = json_object_get(o, "input_lens"),
           *ou = json_object_get(o, "output_lens"), *er = json_object_get(o, "errors");
    rd r;
    read_back(out, 64, &r);
    size_t n = json_array_size(st);
    ck_assert_uint_eq(r.n, n);
    ck_assert_uint_eq(nw, n);
    double t0 = INFINITY;
    for (size_t i = 0; i < n; i++)
        t0 = fmin(t0, json_number_value(json_array_get(st, i)));
    for (size_t i = 0; i < n; i++) {   // start_times increase in the fixture
        double want = json_number_value(json_array_get(st, i)) - t0;
        ck_assert_msg(llabs(r.t[i] - llround(want * 1e9)) <= 1, "req %zu", i);
        ck_assert_uint_eq(r.in[i], (uint32_t)json_integer_value(json_array_get(in, i)));
        bool failed = json_string_value(json_array_get(er, i))[0] != 0;
        ck_assert(!!(r.flags[i] & TRC_F_FAILED) == failed);
        if (!failed)
            ck_assert_uint_eq(r.out[i], (uint32_t)json_integer_value(json_array_get(ou, i)));
        ck_assert_uint_eq(r.nb[i], 0);   // a random dataset shares nothing the run states
    }
    rd_free(&r);
    json_decref(o);
    trc_measured_free(&m);
    // without send times: drawn at the run's rate, the same count
    ck_assert(!trc_measured_read(src_path("tests/data/measured/sglang_small.jsonl"), TRC_MEAS_AUTO,
                                 -1, &m, &err));
    ck_assert(!trc_measured_write_trace(&m, out, 64, 1, &nw, &err));
    read_back(out, 64, &r);
    ck_assert_uint_eq(r.n, m.n_req);
    for (uint64_t i = 0; i < r.n; i++)
        ck_assert_uint_eq(r.in[i], m.req[i].input_tokens);
    rd_free(&r);
    trc_measured_free(&m);
}
END_TEST

// ---- malformed runs -------------------------------------------------------------------------
static void expect_bad(const char *path, trc_measured_format fmt, int run, const char *want1,
                       const char *want2) {
    trc_measured m;
    kvf_err err = {0};
    kvf_status st = trc_measured_read(path, fmt, run, &m, &err);
    ck_assert_msg(st == KVF_EPARSE, "%s: expected an error with '%s', got status %d (%s)", path,
                  want1, st, err.msg);
    const char *base = strrchr(path, '/');
    ck_assert_msg(strstr(err.msg, base ? base + 1 : path), "message '%s' lacks the file", err.msg);
    ck_assert_msg(strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)),
                  "message '%s' lacks '%s' / '%s'", err.msg, want1, want2 ? want2 : "");
    ck_assert_uint_eq(m.n_req, 0);   // nothing left owned on failure
}

// The vLLM fixture with one change, written compact (one line) under name.
static const char *vllm_variant(const char *name, void (*edit)(json_t *)) {
    json_t *o = load_json(src_path("tests/data/measured/vllm_small.json"));
    edit(o);
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    const char *p = kvt_tmp_path(name);
    spit(p, s);
    free(s);
    json_decref(o);
    return p;
}

static void e_no_completed(json_t *o) {
    json_object_del(o, "completed");
}
static void e_short_ttfts(json_t *o) {
    json_array_remove(json_object_get(o, "ttfts"), 0);
}
static void e_neg_ttft(json_t *o) {
    json_array_set_new(json_object_get(o, "ttfts"), 2, json_real(-0.5));
}
static void e_ttft_gt_e2e(json_t *o) {
    double lat = json_number_value(json_array_get(json_object_get(o, "latencies"), 3));
    json_array_set_new(json_object_get(o, "ttfts"), 3, json_real(lat + 1.0));
}
static void e_nan(json_t *o) {
    json_object_set_new(o, "mean_ttft_ms", json_real(123456.789));
}
static void e_completed(json_t *o) {
    json_object_set_new(o, "completed", json_integer(12));
}
static void e_order(json_t *o) {
    json_object_set_new(o, "p90_ttft_ms", json_real(jget(o, "p99_ttft_ms") + 100));
}
static void e_itl_neg(json_t *o) {
    json_array_set_new(json_array_get(json_object_get(o, "itls"), 1), 0, json_real(-0.001));
}

START_TEST(test_malformed_runs) {
    expect_bad(vllm_variant("no_completed.json", e_no_completed), TRC_MEAS_AUTO, -1,
               "no_completed.json:1: field 'completed': missing", NULL);
    expect_bad(vllm_variant("short.json", e_short_ttfts), TRC_MEAS_AUTO, -1, ":1: field '",
               "entries but");
    expect_bad(vllm_variant("neg.json", e_neg_ttft), TRC_MEAS_AUTO, -1,
               "neg.json:1: field 'ttfts[2]': negative", NULL);
    expect_bad(vllm_variant("gt.json", e_ttft_gt_e2e), TRC_MEAS_AUTO, -1,
               "gt.json:1: field 'ttfts[3]': ttft", "exceeds the e2e latency");
    expect_bad(vllm_variant("completed.json", e_completed), TRC_MEAS_AUTO, -1,
               "field 'completed': 12, but 11", NULL);
    expect_bad(vllm_variant("order.json", e_order), TRC_MEAS_AUTO, -1,
               "field 'mean_ttft_ms': percentiles out of order", NULL);
    expect_bad(vllm_variant("itl.json", e_itl_neg), TRC_MEAS_AUTO, -1,
               "field 'itls[1]': entry 0 is negative", NULL);
    {   // a bare NaN, as Python writes it
        const char *p = vllm_variant("nan.json", e_nan);
        char *t = slurp(p);
        char *at = strstr(t, "123456.789");
        ck_assert(at != NULL);
        size_t len = strspn(at, "0123456789.e+-");
        memmove(at + 3, at + len, strlen(at + len) + 1);
        memcpy(at, "NaN", 3);
        spit(p, t);
        free(t);
        expect_bad(p, TRC_MEAS_AUTO, -1, "nan.json:1: field 'mean_ttft_ms': NaN", NULL);
    }
    {   // SGLang: the second run lacks its duration -> line 2
        char *t = slurp(src_path("tests/data/measured/sglang_small.jsonl"));
        char *l2 = strchr(t, '\n') + 1;
        char *d = strstr(l2, "\"duration\"");
        ck_assert(d != NULL);
        memcpy(d + 1, "duraXion", 8);
        const char *p = kvt_tmp_path("sg_bad.jsonl");
        spit(p, t);
        free(t);
        expect_bad(p, TRC_MEAS_SGLANG, -1, "sg_bad.jsonl:2: field 'duration': missing", NULL);
        // the first run is fine
        trc_measured m;
        kvf_err err = {0};
        ck_assert_msg(!trc_measured_read(p, TRC_MEAS_SGLANG, 0, &m, &err), "%s", err.msg);
        trc_measured_free(&m);
    }
    {   // inference-perf: counts that disagree, and a NaN on its own line
        const char *train = "validation/training/20260217-155451-llama-2-7b-tp1-codegen/results/";
        char src[512];
        snprintf(src, sizeof src, "%ssummary_lifecycle_metrics.json", train);
        char *t = slurp(src_path(src));
        char *c = strstr(t, "\"successes\": {\n    \"count\": 9000");
        ck_assert(c != NULL);
        memcpy(strstr(c, "9000"), "8999", 4);
        mkdir(kvt_tmp_path("ip_bad"), 0755);
        const char *p = kvt_tmp_path("ip_bad/summary_lifecycle_metrics.json");
        spit(p, t);
        expect_bad(p, TRC_MEAS_AUTO, -1,
                   "summary_lifecycle_metrics.json:3: field "
                   "'load_summary.count': 9000 sent, but 8999 succeeded",
                   NULL);
        memcpy(strstr(c, "8999"), "9000", 4);
        char *ttft = strstr(t, "\"time_to_first_token\": {\n        \"mean\": ");
        ck_assert(ttft != NULL);
        char *v = strstr(ttft, "\"mean\": ") + 8;
        size_t len = strspn(v, "0123456789.e+-");
        memmove(v + 3, v + len, strlen(v + len) + 1);
        memcpy(v, "NaN", 3);
        long want_line = 1;
        for (char *q = t; q < v; q++)
            want_line += *q == '\n';
        spit(p, t);
        free(t);
        char want[160];
        snprintf(want, sizeof want, ":%ld: field 'successes.latency.time_to_first_token.mean': NaN",
                 want_line);
        expect_bad(p, TRC_MEAS_INFERENCE_PERF, -1, want, NULL);
    }
    {   // inference-perf per-request report: request 3 ends before it starts
        char d[600], f[700];
        snprintf(d, sizeof d, "%s", kvt_tmp_path("ip_req"));
        mkdir(d, 0755);
        snprintf(f, sizeof f, "%s/results", d);
        mkdir(f, 0755);
        static const char *copy[] = {"summary_lifecycle_metrics.json", "config.yaml"};
        for (int i = 0; i < 2; i++) {
            char from[300];
            snprintf(from, sizeof from, "tests/data/measured/ip_small/results/%s", copy[i]);
            char *t = slurp(src_path(from));
            snprintf(f, sizeof f, "%s/results/%s", d, copy[i]);
            spit(f, t);
            free(t);
        }
        json_t *a = load_json(
            src_path("tests/data/measured/ip_small/results/per_request_lifecycle_metrics.json"));
        json_t *q = json_array_get(a, 3);
        json_object_set_new(q, "end_time", json_real(jget(q, "start_time") - 1));
        char *t = json_dumps(a, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        long want_line = 1, seen = 0;
        for (char *c = t; *c; c++) {
            if (*c == '\n') want_line++;
            if (!strncmp(c, "\"end_time\"", 10) && ++seen == 4) break;
        }
        snprintf(f, sizeof f, "%s/results/per_request_lifecycle_metrics.json", d);
        spit(f, t);
        free(t);
        json_decref(a);
        char want[96];
        snprintf(want, sizeof want, "per_request_lifecycle_metrics.json:%ld: field '[3].end_time'",
                 want_line);
        expect_bad(d, TRC_MEAS_AUTO, -1, want, "before start_time");
    }
    {   // not a benchmark result at all
        const char *p = kvt_tmp_path("other.json");
        spit(p, "{\"foo\": 1}\n");
        expect_bad(p, TRC_MEAS_AUTO, -1, "other.json:1: cannot detect", NULL);
        expect_bad(p, TRC_MEAS_VLLM, -1, "other.json:1: field 'completed': missing", NULL);
    }
    {   // a manifest without its overloaded column
        const char *p = kvt_tmp_path("manifest.csv");
        spit(p, "experiment,model,hardware,tp,workload\nx,m,h100,1,general\n");
        trc_measured_entry *e;
        size_t n;
        kvf_err err = {0};
        ck_assert_int_eq(trc_measured_manifest_read(p, &e, &n, &err), KVF_EPARSE);
        ck_assert_msg(strstr(err.msg, "manifest.csv:1: field 'overloaded': missing column"), "%s",
                      err.msg);
        spit(p, "experiment,model,hardware,tp,workload,overloaded\nx,m,h100,zero,general,no\n");
        ck_assert_int_eq(trc_measured_manifest_read(p, &e, &n, &err), KVF_EPARSE);
        ck_assert_msg(strstr(err.msg, "manifest.csv:2: field 'tp'"), "%s", err.msg);
    }
    trc_measured m;
    kvf_err err = {0};
    ck_assert_int_eq(trc_measured_read(kvt_tmp_path("nope.json"), TRC_MEAS_AUTO, -1, &m, &err),
                     KVF_ENOENT);
}
END_TEST

// each test in a fresh temporary directory, removed after it
static void mk_tmp(void) {
    kvt_tmp_make("kvf_meas");
}

static Suite *suite(void) {
    Suite *s = suite_create("measured");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, mk_tmp, kvt_tmp_remove);
    tcase_add_test(tc, test_training_runs_parse_and_agree);
    tcase_add_test(tc, test_training_trace_as_it_ran);
    tcase_add_test(tc, test_vllm_fixture);
    tcase_add_test(tc, test_sglang_fixture);
    tcase_add_test(tc, test_inference_perf_per_request);
    tcase_add_test(tc, test_trace_roundtrip_vllm);
    tcase_add_test(tc, test_malformed_runs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
