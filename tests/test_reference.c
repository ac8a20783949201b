// tests/test_reference.c -- the reference scenario as a reader meets it: every published
// figure is marked input or output and sits beside the run's in the report's first section;
// the hit rate comes from the traffic mix (three classes in the run), not from a chosen turn
// count; the all-in cost range gives a margin at each end; the same run placed at 00:00 and at
// 09:00 gives the same per-day revenue (flat day profile). Each output figure is pinned beside
// its published figure: the test fails when the gap between them grows past the gap stated
// here (and in the scenario's comments), so a change that moves the reference away from the
// seed is seen; a change that brings it closer tightens the bound. Rates and latencies are the
// operating point's: the summary's steady window, where arrivals hold at the scenario's load
// (its published table runs as test_reference_table). The run is DeepSeek-V4.1-
// Flash: DSpark emits mdl_spec_tokens_per_step tokens per verify step, and the SSD store holds
// the model's global KV only (890 B a token; the layout itself: test_models.c,
// test_v41_kv_layout). Also: the generator's mix shares.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/kvt.h"
#include "mdl.h"
#include "trc.h"

static json_t *load_summary(const char *dir) {
    char p[200];
    snprintf(p, sizeof p, "%s/summary.json", dir);
    json_error_t je;
    json_t *s = json_load_file(p, 0, &je);
    ck_assert_msg(s, "%s: %s", p, je.text);
    return s;
}

START_TEST(test_reference_published_table) {
    kvt_tmp_make("kvf_ref");
    int rc = kvt_sh("%s run scenarios/deepseek-reference.yaml -q -o %s/a", kvt_bin(), kvt_tmp);
    ck_assert_msg(rc == 0, "run exited %d: %s", rc, kvt_err);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/a", kvt_tmp);
    json_t *s = load_summary(dir);
    json_t *pub = json_object_get(s, "published");
    size_t n = json_array_size(pub);
    ck_assert_msg(n >= 10, "%zu published rows", n);
    int inputs = 0, outputs = 0;
    size_t i;
    json_t *o;
    json_array_foreach(pub, i, o) {
        const char *role = json_string_value(json_object_get(o, "role"));
        ck_assert_ptr_nonnull(role);
        if (!strcmp(role, "input"))
            inputs++;
        else if (!strcmp(role, "output")) {
            outputs++;
            ck_assert_msg(json_is_number(json_object_get(o, "simulated")), "row %zu: no figure", i);
        } else
            ck_abort_msg("row %zu: role '%s'", i, role);
        // the hit rate is an output of the traffic, compared with the run's own figure
        if (!strcmp(json_string_value(json_object_get(o, "name")), "cache hit rate")) {
            ck_assert_str_eq(role, "output");
            ck_assert_double_eq_tol(kvt_num(o, "simulated"),
                                    kvt_num(s, "steady.economics.hit_rate"), 1e-12);
        }
    }
    ck_assert(inputs >= 3 && outputs >= 6);
    // the rates and latencies are the operating point's: the steady window, where arrivals
    // hold at the scenario's load (within 1 %), not the means over the climb and the drain
    double from = kvt_num(s, "steady.from_s"), to = kvt_num(s, "steady.to_s");
    double rate = kvt_num(s, "config.workload.generate.rate_rps");
    ck_assert_msg(fabs(kvt_num(s, "steady.requests") / (to - from) / rate - 1) < 0.01,
                  "%g requests in %g-%g s at %g rps", kvt_num(s, "steady.requests"), from, to,
                  rate);
    // and the economics are the operating point's as a day (steady.economics)
    static const struct {
        const char *row, *key;
        double scale;
    } at_steady[] = {
        {"mean TTFT", "steady.ttft_ms.mean", 1},
        {"generation speed per request", "steady.gen_tok_s_per_request.mean", 1},
        {"output tok/s per decode GPU", "steady.decode_output_tok_s_per_gpu", 1},
        {"margin", "steady.economics.margin", 100},
        {"payback", "steady.economics.payback_days", 1},
    };
    for (size_t k = 0; k < sizeof at_steady / sizeof *at_steady; k++) {
        json_t *row = NULL;
        json_array_foreach(pub, i, o) if (!strcmp(json_string_value(json_object_get(o, "name")),
                                                  at_steady[k].row)) row = o;
        ck_assert_msg(row, "no published row '%s'", at_steady[k].row);
        ck_assert_double_eq_tol(kvt_num(row, "simulated"),
                                kvt_num(s, at_steady[k].key) * at_steady[k].scale, 1e-9);
    }
    // the traffic is a mix of three classes, each with its generation speed
    const char *cls[] = {"chatbot", "agent", "coding"};
    for (int k = 0; k < 3; k++) {
        char key[64];
        snprintf(key, sizeof key, "by_class.%s.gen_tok_s_mean", cls[k]);
        ck_assert(kvt_num(s, key) > 0);
    }
    // the all-in cost range: a margin at each end, lower at the higher price
    ck_assert(kvt_num(s, "economics.gpu_hour_range.margin_at_low") >
              kvt_num(s, "economics.gpu_hour_range.margin_at_high"));
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(s, "economics"), "ssd_basis")),
        "retention steady state (class write rate x retention)");
    // the report opens with the table, one input/output cell per row
    char p[200];
    snprintf(p, sizeof p, "%s/report.html", dir);
    char *html = kvt_slurp(p);
    const char *h2 = strstr(html, "<h2");
    ck_assert_ptr_nonnull(h2);
    ck_assert_msg(!strncmp(h2, "<h2 id=\"published\"", 18), "first section: %.60s", h2);
    ck_assert(strstr(html, "id=\"published-table\"") != NULL);
    ck_assert_int_eq(kvt_count(html, "<td>input</td>"), inputs);
    ck_assert_int_eq(kvt_count(html, "<td>output</td>"), outputs);
    free(html);

    // each output figure within its stated gap of the published one (gap_pct, in percent of
    // the published figure; these are the gaps the scenario's comments explain)
    static const struct {
        const char *name;
        double max_gap_pct;
    } pinned[] = {
        {"cache hit rate", 10},
        {"mean TTFT", 96},
        {"generation speed per request", 12},
        {"generation speed, coding", 17},
        {"input tok/s per prefill GPU", 86},
        {"output tok/s per decode GPU", 60},
        {"SSD per daily token", 30},
        {"margin", 3},
        {"margin at 8 USD per GPU-hour", 4},
        {"payback", 20},
    };
    for (size_t k = 0; k < sizeof pinned / sizeof *pinned; k++) {
        json_t *row = NULL;
        json_array_foreach(pub, i, o) if (!strcmp(json_string_value(json_object_get(o, "name")),
                                                  pinned[k].name)) row = o;
        ck_assert_msg(row, "no published row '%s'", pinned[k].name);
        double gap = kvt_num(row, "gap_pct");
        ck_assert_msg(fabs(gap) <= pinned[k].max_gap_pct,
                      "%s: published %g, simulated %g, gap %.1f %% past the stated %.0f %%",
                      pinned[k].name, kvt_num(row, "value"), kvt_num(row, "simulated"), gap,
                      pinned[k].max_gap_pct);
    }
    // DSpark: tokens per verify step as the acceptance curve gives them (answers ending inside
    // a block emit fewer), and the store holds 64-token blocks of the global KV only
    mdl_model m;
    kvf_err err = {0};
    ck_assert_msg(mdl_model_load(&m, "deepseek-v4.1-flash", "models", &err) == KVF_OK, "%s",
                  err.msg);
    mdl_spec sp;
    ck_assert_msg(mdl_spec_from_model(&sp, &m, &err) == KVF_OK, "%s", err.msg);
    double tps = kvt_num(s, "throughput.tokens_per_decode_step_per_request");
    ck_assert_msg(tps <= mdl_spec_tokens_per_step(&sp) &&
                      tps > 0.99 * mdl_spec_tokens_per_step(&sp),
                  "tokens per step %.4f, curve %.4f", tps, mdl_spec_tokens_per_step(&sp));
    ck_assert_double_eq_tol(kvt_num(s, "cache.block_bytes"), mdl_model_kv_bytes_seq(&m, 64), 1e-6);
    ck_assert_double_eq_tol(m.kv_bytes_per_token_full, 890, 1e-9);
    json_decref(s);

    // a short run placed at 00:00 and at 09:00: a flat day, the same per-day revenue and cost
    rc = kvt_sh("%s run scenarios/deepseek-reference.yaml -q -o %s/c --no-report "
                "--set workload.generate.duration_s=10 --set workload.generate.rate_rps=400",
                kvt_bin(), kvt_tmp);
    ck_assert_int_eq(rc, 0);
    rc = kvt_sh("%s run scenarios/deepseek-reference.yaml -q -o %s/b --no-report "
                "--set workload.generate.duration_s=10 --set workload.generate.rate_rps=400 "
                "--set economics.trace_start_utc=09:00",
                kvt_bin(), kvt_tmp);
    ck_assert_int_eq(rc, 0);
    snprintf(dir, sizeof dir, "%s/c", kvt_tmp);
    json_t *s0 = load_summary(dir);
    snprintf(dir, sizeof dir, "%s/b", kvt_tmp);
    json_t *s9 = load_summary(dir);
    ck_assert_double_eq_tol(kvt_num(s9, "economics.revenue_per_day_usd"),
                            kvt_num(s0, "economics.revenue_per_day_usd"), 1e-9);
    ck_assert_double_eq_tol(kvt_num(s9, "economics.offpeak_share"), 1.0 / 3.0, 1e-9);
    json_decref(s9);
    json_decref(s0);
    kvt_tmp_remove();
}
END_TEST

// Shares of classes among generated sessions follow workload.generate.mix.
static void class_counts(const double mix[3], uint64_t n[TRC_CLASS_COUNT]) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.profile = TRC_GEN_MIXED;
    g.rate_rps = 20;
    g.duration_s = 300;
    g.mean_turns = 1;   // every arrival a new session: classes count sessions
    for (int k = 0; k < 3; k++)
        g.mix[k] = mix[k];
    trc_reader *r;
    kvf_err err = {0};
    ck_assert_msg(trc_gen_open(&r, &g, NULL, &err) == KVF_OK, "%s", err.msg);
    memset(n, 0, TRC_CLASS_COUNT * sizeof *n);
    trc_request q;
    int rc;
    while ((rc = trc_reader_next(r, &q, &err)) == 1)
        n[q.cls]++;
    ck_assert_int_eq(rc, 0);
    trc_reader_close(r);
}

START_TEST(test_generator_mix) {
    uint64_t n[TRC_CLASS_COUNT];
    class_counts((const double[3]){0, 1, 0}, n);
    ck_assert(n[TRC_CLASS_AGENT] > 1000);
    ck_assert(n[TRC_CLASS_CHATBOT] == 0 && n[TRC_CLASS_CODING] == 0);
    class_counts((const double[3]){1, 1, 2}, n);   // normalised: 25 / 25 / 50 %
    double tot = (double)(n[0] + n[1] + n[2]);
    ck_assert_msg(fabs(n[TRC_CLASS_CODING] / tot - 0.5) < 0.04, "coding %.3f", n[2] / tot);
    ck_assert_msg(fabs(n[TRC_CLASS_CHATBOT] / tot - 0.25) < 0.04, "chat %.3f", n[0] / tot);
    // all zero: the default 50 / 30 / 20
    class_counts((const double[3]){0, 0, 0}, n);
    tot = (double)(n[0] + n[1] + n[2]);
    ck_assert_msg(fabs(n[TRC_CLASS_CHATBOT] / tot - 0.5) < 0.04, "chat %.3f", n[0] / tot);
    // negative shares are refused
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.profile = TRC_GEN_MIXED;
    g.mix[1] = -1;
    trc_reader *r = NULL;
    kvf_err err = {0};
    ck_assert_int_eq(trc_gen_open(&r, &g, NULL, &err), KVF_EINVAL);
}
END_TEST

// speculative.method: dspark where the model has no DSpark stack, draft without draft tokens
// and none with them are refused naming the key; two runs of the DSpark reference agree.
START_TEST(test_reference_spec_method) {
    kvt_tmp_make("kvf_refspec");
    const char *base = "scenarios/deepseek-reference.yaml -q --no-report "
                       "--set workload.generate.duration_s=5 --set workload.generate.rate_rps=200";
    int rc = kvt_sh("%s run %s -o %s/x --set model=deepseek-v3 --set cluster.prefill.tp=8",
                    kvt_bin(), base, kvt_tmp);
    ck_assert_msg(rc == 2 && strstr(kvt_err, "speculative.method") && strstr(kvt_err, "DSpark"),
                  "rc %d: %s", rc, kvt_err);
    rc = kvt_sh("%s run %s -o %s/x --set speculative.method=draft", kvt_bin(), base, kvt_tmp);
    ck_assert_msg(rc == 2 && strstr(kvt_err, "draft_tokens"), "rc %d: %s", rc, kvt_err);
    rc = kvt_sh("%s run %s -o %s/x --set speculative.method=none --set speculative.draft_tokens=2",
                kvt_bin(), base, kvt_tmp);
    ck_assert_msg(rc == 2 && strstr(kvt_err, "speculative.method"), "rc %d: %s", rc, kvt_err);
    rc = kvt_sh("%s run %s -o %s/d1", kvt_bin(), base, kvt_tmp);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, kvt_err);
    rc = kvt_sh("%s run %s -o %s/d2", kvt_bin(), base, kvt_tmp);
    ck_assert_int_eq(rc, 0);
    rc = kvt_sh("%s run %s -o %s/n1 --set speculative.method=none", kvt_bin(), base, kvt_tmp);
    ck_assert_int_eq(rc, 0);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/d1", kvt_tmp);
    json_t *a = load_summary(dir);
    snprintf(dir, sizeof dir, "%s/d2", kvt_tmp);
    json_t *b = load_summary(dir);
    snprintf(dir, sizeof dir, "%s/n1", kvt_tmp);
    json_t *n = load_summary(dir);
    ck_assert_double_eq(kvt_num(a, "tpot_ms.mean"), kvt_num(b, "tpot_ms.mean"));
    ck_assert_double_eq(kvt_num(a, "itl_ms.p90"), kvt_num(b, "itl_ms.p90"));
    ck_assert_double_eq(kvt_num(n, "throughput.tokens_per_decode_step_per_request"), 1);
    ck_assert_msg(kvt_num(a, "throughput.tokens_per_decode_step_per_request") > 3, "%g",
                  kvt_num(a, "throughput.tokens_per_decode_step_per_request"));
    json_decref(a);
    json_decref(b);
    json_decref(n);
    kvt_tmp_remove();
}
END_TEST

int main(void) {
    Suite *s = suite_create("reference");
    TCase *t = tcase_create("reference");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_generator_mix);
    tcase_add_test(t, test_reference_spec_method);
    suite_add_tcase(s, t);
    // the full reference run (five minutes of sessions at 4,000 rps, a minute or more to run):
    // a ctest of its own, test_reference_table
    TCase *tt = tcase_create("table");
    tcase_set_timeout(tt, 600);
    tcase_add_test(tt, test_reference_published_table);
    suite_add_tcase(s, tt);
    return kvt_main(s);
}
