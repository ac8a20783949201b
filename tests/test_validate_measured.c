// tests/test_validate_measured.c -- `kvfleet validate --measured` and `kvfleet fit` on real
// input: one run of each supported format (the vLLM and SGLang format fixtures of
// tests/data/measured, an inference-perf run of validation/training) goes import -> scenario
// -> run -> error table, and the table is checked against its own two sides; bad runs get
// their message and exit 2; a fit on three training runs writes a file whose term a scenario
// applies (serving.frontend_ms moves TTFT by that much), with leave-one-out errors; the
// serving keys do what they say (frontend, admission that reserves, client time-outs).
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers/kvt.h"

#define TRAIN "validation/training/"
#define RUN_7B_CODEGEN TRAIN "20260217-155451-llama-2-7b-tp1-codegen"
#define RUN_7B_ROLEPLAY TRAIN "20260217-162547-llama-2-7b-tp1-roleplay"
#define RUN_34B_CODEGEN TRAIN "20260218-150956-codellama-34b-tp2-codegen"
#define RUN_7B_GENERAL TRAIN "20260217-231439-llama-2-7b-tp1-general"

static json_t *load_json(const char *path) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    ck_assert_msg(j, "%s: %s", path, e.text);
    return j;
}

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

// Every compared metric's error is computed from its two sides, and the MAPE is the mean
// |error| of the headline metrics the table names. Returns how many metrics had both sides.
static int check_table(json_t *meas, const char *what) {
    int both = 0;
    const char *sec;
    json_t *s;
    json_object_foreach(meas, sec, s) {
        if (!json_is_object(s)) continue;
        const char *stat;
        json_t *e;
        json_object_foreach(s, stat, e) {
            json_t *jr = json_object_get(e, "real"), *js = json_object_get(e, "sim"),
                   *je = json_object_get(e, "error_pct");
            if (!json_is_number(jr) || !json_is_number(js)) continue;
            double real = json_number_value(jr), sim = json_number_value(js);
            if (real <= 0) continue;
            both++;
            ck_assert_msg(json_is_number(je), "%s %s.%s: no error beside real %g sim %g", what, sec,
                          stat, real, sim);
            double want = 100 * (sim - real) / real;
            ck_assert_msg(fabs(json_number_value(je) - want) < 1e-6 * (1 + fabs(want)),
                          "%s %s.%s: error %g, sides give %g", what, sec, stat,
                          json_number_value(je), want);
        }
    }
    json_t *mm = json_object_get(meas, "mape_metrics");
    ck_assert_int_eq(json_array_size(mm), 4);
    double sum = 0;
    int n = 0;
    for (size_t i = 0; i < json_array_size(mm); i++) {
        const char *name = json_string_value(json_array_get(mm, i));
        char sec2[32];
        const char *dot = strchr(name, '.');
        snprintf(sec2, sizeof sec2, "%.*s", (int)(dot - name), name);
        json_t *e =
            json_object_get(json_object_get(json_object_get(meas, sec2), dot + 1), "error_pct");
        if (json_is_number(e)) sum += fabs(json_number_value(e)), n++;
    }
    ck_assert_msg(n > 0, "%s: no headline metric compared", what);
    ck_assert_msg(fabs(json_number_value(json_object_get(meas, "mape_pct")) - sum / n) < 1e-6,
                  "%s: mape %g, its metrics give %g", what,
                  json_number_value(json_object_get(meas, "mape_pct")), sum / n);
    return both;
}

// One run through validate --measured into a result directory; returns measured.json.
static json_t *validate(const char *run, const char *extra, const char *dir) {
    int rc =
        kvt_sh("%s validate --measured %s --hardware h100 %s -o %s -q", kvt_bin(), run, extra, dir);
    ck_assert_msg(rc == 0, "validate --measured %s: exit %d: %s", run, rc, kvt_err);
    char p[512];
    const char *files[] = {"measured.json", "measured.html", "summary.json", "results.db",
                           "trace.jsonl"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        ck_assert_msg(exists(p), "%s: no %s", run, files[i]);
    }
    snprintf(p, sizeof p, "%s/measured.json", dir);
    return load_json(p);
}

static int lines_of(const char *path) {
    char *t = kvt_slurp(path);
    int n = kvt_count(t, "\n");
    free(t);
    return n;
}

START_TEST(test_measured_each_format_round_trips) {
    kvt_tmp_make("kvf_vm");
    struct {
        const char *run, *extra;
        int requests;   // requests the run holds (its own count)
    } runs[] = {
        {"tests/data/measured/vllm_small.json", "", 12},
        {"tests/data/measured/sglang_small.jsonl", "--model llama-3.1-8b", -1},
        {RUN_7B_CODEGEN, "", 9000},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char dir[128], p[512];
        snprintf(dir, sizeof dir, "%s/r%zu", kvt_tmp + 0, i);
        // kvt_tmp is absolute; -o takes it as given
        json_t *v = validate(runs[i].run, runs[i].extra, dir + 0);
        json_t *meas = json_object_get(v, "measured");
        int both = check_table(meas, runs[i].run);
        ck_assert_msg(both >= 8, "%s: only %d metrics compared", runs[i].run, both);
        snprintf(p, sizeof p, "%s/trace.jsonl", dir);
        if (runs[i].requests > 0)
            ck_assert_msg(lines_of(p) == runs[i].requests, "%s: trace has %d requests, run %d",
                          runs[i].run, lines_of(p), runs[i].requests);
        // the simulated side is the run's own summary.json
        snprintf(p, sizeof p, "%s/summary.json", dir);
        json_t *s = load_json(p);
        double t = json_number_value(
            json_object_get(json_object_get(json_object_get(meas, "ttft_ms"), "mean"), "sim"));
        ck_assert_msg(fabs(t - kvt_num(s, "ttft_ms.mean")) < 1e-9, "%s: table sim %g, summary %g",
                      runs[i].run, t, kvt_num(s, "ttft_ms.mean"));
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(s, "config"), "name")) +
                             0,
                         json_string_value(json_object_get(json_object_get(v, "config"), "name")));
        // the run's server shape became the scenario's
        ck_assert_str_eq(json_string_value(json_object_get(
                             json_object_get(json_object_get(s, "config"), "cluster"), "mode")),
                         "colocated");
        json_decref(s);
        json_decref(v);
    }
    kvt_tmp_remove();
}
END_TEST

START_TEST(test_measured_bad_runs_refused) {
    kvt_tmp_make("kvf_vmb");
    // no model named and none given
    int rc =
        kvt_sh("%s validate --measured tests/data/measured/sglang_small.jsonl --hardware h100 -q",
               kvt_bin());
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(kvt_err, "--model") && strstr(kvt_err, "sglang_small.jsonl"), "%s",
                  kvt_err);
    // a GPU no hardware file names
    rc = kvt_sh("%s validate --measured " RUN_7B_CODEGEN " --hardware no-such-gpu -q", kvt_bin());
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(kvt_err, "no-such-gpu"), "%s", kvt_err);
    // an unreadable run: its file named
    FILE *f = fopen("/tmp/kvf_vmb_bad.json", "w");
    ck_assert(f);
    fputs("{\"ttfts\": [0.1, 0.2], \"itls\": [[0.01]], \"input_lens\": [5]}\n", f);
    fclose(f);
    rc = kvt_sh("%s validate --measured /tmp/kvf_vmb_bad.json --format vllm --hardware h100 -q",
                kvt_bin());
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(kvt_err, "kvf_vmb_bad.json"), "%s", kvt_err);
    remove("/tmp/kvf_vmb_bad.json");
    // a missing run
    rc = kvt_sh("%s validate --measured /nonexistent/run.json --hardware h100 -q", kvt_bin());
    ck_assert_int_eq(rc, 2);
    // an existing result is kept without --force
    rc = kvt_sh(
        "%s validate --measured tests/data/measured/vllm_small.json --hardware h100 -o %s/o -q",
        kvt_bin(), kvt_tmp);
    ck_assert_int_eq(rc, 0);
    rc = kvt_sh(
        "%s validate --measured tests/data/measured/vllm_small.json --hardware h100 -o %s/o -q",
        kvt_bin(), kvt_tmp);
    ck_assert_int_eq(rc, 2);
    kvt_tmp_remove();
}
END_TEST

START_TEST(test_fit_writes_terms_a_scenario_applies) {
    kvt_tmp_make("kvf_fit");
    char fitf[256];
    snprintf(fitf, sizeof fitf, "%s/fit.yaml", kvt_tmp);
    int rc =
        kvt_sh("%s fit --measured " RUN_7B_CODEGEN " --measured " RUN_7B_ROLEPLAY
               " --measured " RUN_34B_CODEGEN " --hardware h100 --term serving.frontend_ms:0:60:5"
               " --max-evals 12 -o %s -q",
               kvt_bin(), fitf);
    ck_assert_msg(rc == 0, "fit: exit %d: %s", rc, kvt_err);
    char *y = kvt_slurp(fitf);
    double fe = NAN;
    const char *t = strstr(y, "terms:\n  serving.frontend_ms: ");
    ck_assert_msg(t, "fit file without its term: %s", y);
    fe = atof(t + strlen("terms:\n  serving.frontend_ms: "));
    ck_assert_msg(fe >= 0 && fe <= 60, "frontend_ms %g outside its bounds", fe);
    ck_assert_msg(strstr(y, "loo_error_pct:") && kvt_count(y, "role: training") == 3, "%s", y);
    // the left-out fits in child processes write the same file (but its wall-clock seconds)
    char fit2[256];
    snprintf(fit2, sizeof fit2, "%s/fit2.yaml", kvt_tmp);
    rc = kvt_sh("%s fit --measured " RUN_7B_CODEGEN " --measured " RUN_7B_ROLEPLAY
                " --measured " RUN_34B_CODEGEN " --hardware h100 --term serving.frontend_ms:0:60:5"
                " --max-evals 12 --jobs 3 -o %s -q",
                kvt_bin(), fit2);
    ck_assert_msg(rc == 0, "fit --jobs 3: exit %d: %s", rc, kvt_err);
    char *y2 = kvt_slurp(fit2);
    const char *a = strstr(y, "\nseconds: "), *b = strstr(y2, "\nseconds: ");
    ck_assert(a && b);
    ck_assert_msg(!strncmp(y, y2, (size_t)(a - y)) &&
                      !strcmp(strchr(a + 1, '\n'), strchr(b + 1, '\n')),
                  "--jobs 3 wrote another file:\n%s\n--- against ---\n%s", y2, y);
    free(y2);
    ck_assert_int_eq(kvt_sh("%s fit --measured " RUN_7B_CODEGEN " --hardware h100 --jobs 0 -o %s "
                            "--force -q",
                            kvt_bin(), fit2),
                     2);
    ck_assert_msg(strstr(kvt_err, "--jobs 0"), "%s", kvt_err);
    free(y);
    // the fit's frontend latency is what a scenario naming the file adds to every TTFT
    char d0[128], d1[128], p[256];
    snprintf(d0, sizeof d0, "%s/v0", kvt_tmp);
    snprintf(d1, sizeof d1, "%s/v1", kvt_tmp);
    json_t *v0 = validate(RUN_7B_CODEGEN, "", d0);
    char extra[300];
    snprintf(extra, sizeof extra, "--fit %s", fitf);
    json_t *v1 = validate(RUN_7B_CODEGEN, extra, d1);
    snprintf(p, sizeof p, "%s/summary.json", d0);
    json_t *s0 = load_json(p);
    snprintf(p, sizeof p, "%s/summary.json", d1);
    json_t *s1 = load_json(p);
    double shift = kvt_num(s1, "ttft_ms.mean") - kvt_num(s0, "ttft_ms.mean");
    ck_assert_msg(fabs(shift - fe) < 0.05 * fe + 0.5, "TTFT moved %g ms with frontend_ms %g", shift,
                  fe);
    ck_assert_msg(fabs(kvt_num(s1, "config.serving.frontend_ms") - fe) < 1e-3 * (1 + fe),
                  "config records frontend_ms %g, fit %g",
                  kvt_num(s1, "config.serving.frontend_ms"), fe);
    json_decref(v0);
    json_decref(v1);
    json_decref(s0);
    json_decref(s1);
    // the shipped fits load, and their terms are what the run records
    const char *fits[] = {"models/fits/vllm-h100-roofline.yaml",
                          "models/fits/vllm-h100-table.yaml"};
    for (int i = 0; i < 2; i++) {
        char fp[512];
        snprintf(fp, sizeof fp, "%s/%s", kvt_src(), fits[i]);
        char *txt = kvt_slurp(fp);
        const char *t0 = strstr(txt, "\n  serving.frontend_ms: ");
        ck_assert_msg(t0, "%s: no frontend term", fits[i]);
        double want = atof(t0 + strlen("\n  serving.frontend_ms: "));
        free(txt);
        char set[600];
        snprintf(set, sizeof set, "serving.fit=%s", fp);
        const char *sets[] = {"workload.limit_requests=20", set};
        json_t *s = kvt_run("quickstart.yaml", NULL, sets, 2, NULL);
        ck_assert_msg(fabs(kvt_num(s, "config.serving.frontend_ms") - want) < 1e-3 * want,
                      "%s: frontend %g, the file says %g", fits[i],
                      kvt_num(s, "config.serving.frontend_ms"), want);
        json_decref(s);
    }
    // a bad fit file: named with its line
    FILE *f = fopen("/tmp/kvf_fit_bad.yaml", "w");
    ck_assert(f);
    fputs("terms:\n  serving.frontend_ms: 5\n  no.such.key: 3\n", f);
    fclose(f);
    rc = kvt_sh(
        "%s run scenarios/quickstart.yaml --set serving.fit=/tmp/kvf_fit_bad.yaml -q --no-report",
        kvt_bin());
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(kvt_err, "kvf_fit_bad.yaml:3") && strstr(kvt_err, "no.such.key"), "%s",
                  kvt_err);
    remove("/tmp/kvf_fit_bad.yaml");
    kvt_tmp_remove();
}
END_TEST

// A fit named by the scenario and then replaced with --set (by null, or by another file) leaves
// none of its terms behind; a key set by hand keeps its own value throughout.
START_TEST(test_fit_replaced_leaves_no_terms) {
    kvt_tmp_make("kvf_fit_undo");
    char fa[256], fb[256], scn[256];
    snprintf(fa, sizeof fa, "%s/a.yaml", kvt_tmp);
    snprintf(fb, sizeof fb, "%s/b.yaml", kvt_tmp);
    snprintf(scn, sizeof scn, "%s/s.yaml", kvt_tmp);
    kvt_write(fa, "terms:\n  efficiency.compute: 0.31\n  efficiency.memory: 0.42\n"
                  "  serving.frontend_ms: 7\n");
    kvt_write(fb, "terms:\n  efficiency.memory: 0.55\n");
    char text[1200];
    snprintf(text, sizeof text,
             "name: undo\nmodel: llama-3.1-8b\nhardware: h100\nserving: {fit: %s}\n"
             "workload: {generate: {profile: chatbot, rate_rps: 2, duration_s: 5}}\n"
             "cluster: {mode: colocated, prefill: {instances: 1}, decode: {instances: 0}}\n",
             fa);
    kvt_write(scn, text);
    struct {
        const char *sets;
        double compute, memory, frontend;
    } cases[] = {
        {"", 0.31, 0.42, 7},                       // the file's terms
        {"--set serving.fit=null", 0.6, 0.8, 0},   // the defaults again
        {"--set serving.fit=B", 0.6, 0.55, 0},     // only the other file's
        {"--set efficiency.compute=0.5 --set serving.fit=null", 0.5, 0.8, 0},   // by hand stays
        {"--set serving.fit=null --set serving.fit=A", 0.31, 0.42, 7},          // and back
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char sets[700] = "", out[300];
        const char *b = strstr(cases[k].sets, "fit=B"), *a = strstr(cases[k].sets, "fit=A");
        if (b)
            snprintf(sets, sizeof sets, "%.*sfit=%s", (int)(b - cases[k].sets), cases[k].sets, fb);
        else if (a)
            snprintf(sets, sizeof sets, "%.*sfit=%s", (int)(a - cases[k].sets), cases[k].sets, fa);
        else
            snprintf(sets, sizeof sets, "%s", cases[k].sets);
        snprintf(out, sizeof out, "%s/o%zu", kvt_tmp, k);
        int rc = kvt_sh("%s run %s %s -o %s -q --no-report", kvt_bin(), scn, sets, out);
        ck_assert_msg(rc == 0, "case %zu: exit %d: %s", k, rc, kvt_err);
        char p[400];
        snprintf(p, sizeof p, "%s/summary.json", out);
        json_t *s = load_json(p);
        ck_assert_msg(fabs(kvt_num(s, "config.efficiency.compute") - cases[k].compute) < 1e-9 &&
                          fabs(kvt_num(s, "config.efficiency.memory") - cases[k].memory) < 1e-9 &&
                          fabs(kvt_num(s, "config.serving.frontend_ms") - cases[k].frontend) < 1e-9,
                      "case %zu (%s): compute %g memory %g frontend %g", k, cases[k].sets,
                      kvt_num(s, "config.efficiency.compute"),
                      kvt_num(s, "config.efficiency.memory"),
                      kvt_num(s, "config.serving.frontend_ms"));
        json_decref(s);
    }
    kvt_tmp_remove();
}
END_TEST

// serving.*: the frontend delays the first token by its latency at low load; an admission that
// reserves the whole context never preempts where preempt-and-recompute does; a client
// time-out aborts what runs past it and counts it.
START_TEST(test_serving_keys_do_what_they_say) {
    const char *base[] = {"workload.limit_requests=600", "cluster.decode.kv_tokens=60000",
                          "cluster.prefill.instances=2"};
    json_t *a = kvt_run("quickstart.yaml", NULL, base, 3, NULL);
    const char *fe[] = {base[0], base[1], base[2], "serving.frontend_ms=40"};
    json_t *b = kvt_run("quickstart.yaml", NULL, fe, 4, NULL);
    double d = kvt_num(b, "ttft_ms.p50") - kvt_num(a, "ttft_ms.p50");
    ck_assert_msg(d > 30 && d < 50, "frontend 40 ms moved TTFT p50 by %g ms", d);
    ck_assert_msg(kvt_num(a, "steps.preemptions") > 0,
                  "the base run must preempt (KV 60k tokens): %g", kvt_num(a, "steps.preemptions"));
    const char *rs[] = {base[0], base[1], base[2], "serving.admission=reserve"};
    json_t *c = kvt_run("quickstart.yaml", NULL, rs, 4, NULL);
    ck_assert_msg(kvt_num(c, "steps.preemptions") == 0, "reserve preempted %g times",
                  kvt_num(c, "steps.preemptions"));
    // what it cannot reserve (prompt + answer over the 60k tokens) it refuses up front
    ck_assert_msg(
        kvt_num(c, "requests.completed") + kvt_num(c, "requests.rejected_by_reason.capacity") ==
            600,
        "reserve: %g completed, %g refused for capacity", kvt_num(c, "requests.completed"),
        kvt_num(c, "requests.rejected_by_reason.capacity"));
    const char *to[] = {base[0], base[1], base[2], "serving.client_timeout_s=3"};
    json_t *e = kvt_run("quickstart.yaml", NULL, to, 4, NULL);
    double n_to = kvt_num(e, "requests.rejected_by_reason.timeout");
    ck_assert_msg(n_to > 0, "no request timed out at 3 s (base e2e p90 %g ms)",
                  kvt_num(a, "e2e_ms.p90"));
    ck_assert_msg(kvt_num(e, "requests.completed") + kvt_num(e, "requests.rejected") == 600,
                  "completed %g + rejected %g", kvt_num(e, "requests.completed"),
                  kvt_num(e, "requests.rejected"));
    ck_assert_msg(kvt_num(e, "e2e_ms.p99") <= 3000 + 1e-6,
                  "a completed request ran %g ms past a 3 s time-out", kvt_num(e, "e2e_ms.p99"));
    ck_assert_msg(kvt_num(e, "invariants.kv_tokens_held_end") == 0, "KV left held: %g",
                  kvt_num(e, "invariants.kv_tokens_held_end"));
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(e);
}
END_TEST

// The engine's prefix cache is its whole KV pool, blocks in use or free (vLLM's preset,
// serving.prefix_cache free_blocks): the 7B general run's 100 prompts (3,550 blocks) fit beside
// its running requests, so after each prompt's first send nearly every prompt token hits
// (98.1 % with an unbounded cache). Sizing the cache to the blocks running requests leave free,
// without their own prompt blocks, counted those blocks twice and hit 81 %.
START_TEST(test_measured_prefix_cache_is_the_kv_pool) {
    kvt_tmp_make("kvf_vm_pool");
    char dir[300], p[400];
    snprintf(dir, sizeof dir, "%s/g", kvt_tmp);
    json_t *v = validate(RUN_7B_GENERAL, "--fit models/fits/vllm-h100-roofline.yaml", dir);
    snprintf(p, sizeof p, "%s/summary.json", dir);
    json_t *s = load_json(p);
    double hit = kvt_num(s, "cache.hit_rate");
    ck_assert_msg(hit > 0.95 && hit < 0.982,
                  "prefix cache hit %g: the 100 prompts do not stay cached", hit);
    // set by hand, a separate slice too small for the 100 prompts holds fewer of them
    snprintf(dir, sizeof dir, "%s/f", kvt_tmp);
    json_t *v2 = validate(RUN_7B_GENERAL,
                          "--fit models/fits/vllm-h100-roofline.yaml --set "
                          "serving.prefix_cache=slice --set kv_cache.hbm_cache_frac=0.02",
                          dir);
    snprintf(p, sizeof p, "%s/summary.json", dir);
    json_t *s2 = load_json(p);
    ck_assert_msg(kvt_num(s2, "cache.hit_rate") < hit - 0.1, "2 %% slice hit %g, pool %g",
                  kvt_num(s2, "cache.hit_rate"), hit);
    json_decref(v);
    json_decref(s);
    json_decref(v2);
    json_decref(s2);
    kvt_tmp_remove();
}
END_TEST

int main(void) {
    Suite *s = suite_create("validate_measured");
    TCase *tc = tcase_create("measured");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_measured_each_format_round_trips);
    tcase_add_test(tc, test_measured_bad_runs_refused);
    tcase_add_test(tc, test_fit_writes_terms_a_scenario_applies);
    tcase_add_test(tc, test_fit_replaced_leaves_no_terms);
    tcase_add_test(tc, test_serving_keys_do_what_they_say);
    tcase_add_test(tc, test_measured_prefix_cache_is_the_kv_pool);
    suite_add_tcase(s, tc);
    return kvt_main(s);
}
