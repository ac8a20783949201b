// tests/test_kv.c -- the shared KV store on real traces: the simulated hit rate against the
// trace's ideal prefix reuse (computed by the trace statistics, an independent pass), growth
// with capacity and retention, the shared SSD's effect on agentic sessions, and SWA bounded
// replay cutting prefill FLOPs.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "sim.h"
#include "trc.h"

static const char *shared(const char *name) { return kvt_shared_trace(name); }

static json_t *run(const char *trace, const char *const *sets, int n) {
    return kvt_run("quickstart.yaml", trace, sets, n, NULL);
}

static double ideal_hit_rate(const char *trace, const char *format, int64_t limit) {
    trc_options o;
    trc_options_default(&o);
    ck_assert(trc_format_parse(format, &o.format));
    o.block_tokens = 64;
    o.bucket = TRC_BUCKET_SPREAD;
    o.seed = 1;
    o.limit_requests = limit;
    trc_stats st;
    kvf_err err = {0};
    ck_assert_msg(trc_stats_file(trace, &o, &st, &err) == KVF_OK, "%s", err.msg);
    return st.ideal_hit_rate;
}

START_TEST(test_unbounded_store_reaches_ideal_reuse) {
    const char *t = shared("mooncake_conversation.jsonl");
    double ideal = ideal_hit_rate(t, "mooncake", 0);
    const char *sets[] = {"kv_cache.ssd.capacity_tb=unlimited",
                          "kv_cache.ssd.retention={chatbot: never, agent: never, coding: never, "
                          "batch: never, other: never}",
                          "workload.bucket=spread"};
    json_t *s = run(t, sets, 3);
    double hit = kvt_num(s, "cache.hit_rate");
    ck_assert_msg(hit <= ideal + 1e-9, "simulated hit rate %.5f above the ideal %.5f", hit, ideal);
    ck_assert_msg(ideal - hit < 0.01, "simulated hit rate %.5f more than 1 point below the ideal %.5f",
                  hit, ideal);
    ck_assert_msg(ideal > 0.33 && ideal < 0.42, "ideal reuse %.4f far from the trace's ~37 %%", ideal);
    json_decref(s);
}
END_TEST

START_TEST(test_hit_rate_grows_with_capacity_and_retention) {
    const char *t = shared("mooncake_conversation.jsonl");
    const char *caps[] = {"kv_cache.ssd.capacity_tb=0", "kv_cache.ssd.capacity_tb=0.5",
                          "kv_cache.ssd.capacity_tb=2", "kv_cache.ssd.capacity_tb=unlimited"};
    double prev = -1;
    for (int i = 0; i < 4; i++) {
        const char *sets[] = {caps[i], "workload.limit_requests=4000"};
        json_t *s = run(t, sets, 2);
        double h = kvt_num(s, "cache.hit_rate");
        ck_assert_msg(h >= prev - 1e-9, "hit rate fell from %.4f to %.4f at %s", prev, h, caps[i]);
        ck_assert_msg(kvt_num(s, "invariants.tiers_over_capacity") == 0, "over capacity at %s", caps[i]);
        if (i == 3) ck_assert_msg(h > prev + 1e-3 || prev > 0.3, "no growth up to unlimited");
        prev = h;
        json_decref(s);
    }
    // retention: entries that expire after 60 s are never hit later; 7 days keeps them
    const char *r1[] = {"kv_cache.ssd.capacity_tb=unlimited", "workload.limit_requests=4000",
                        "kv_cache.ssd.retention={chatbot: 60s}"};
    const char *r2[] = {"kv_cache.ssd.capacity_tb=unlimited", "workload.limit_requests=4000",
                        "kv_cache.ssd.retention={chatbot: 7d}"};
    json_t *a = run(t, r1, 3), *b = run(t, r2, 3);
    double ha = kvt_num(a, "cache.hit_rate"), hb = kvt_num(b, "cache.hit_rate");
    ck_assert_msg(ha < hb, "60 s retention %.4f not below 7 d %.4f", ha, hb);
    ck_assert_msg(kvt_num(a, "cache.expired_blocks") > 0, "nothing expired with 60 s retention");
    json_decref(a);
    json_decref(b);
}
END_TEST

START_TEST(test_shared_ssd_on_agentic_sessions) {
    const char *t = shared("weka_agentic_dev.jsonl");
    if (access(t, R_OK) != 0) {   // the agentic trace lives only in the shared folder
        fprintf(stderr, "test_shared_ssd_on_agentic_sessions: %s missing, not run\n", t);
        return;
    }
    const char *on[] = {"workload.format=sessions", "kv_cache.ssd.capacity_tb=unlimited",
                        "workload.limit_requests=800"};
    const char *off[] = {"workload.format=sessions", "kv_cache.ssd.capacity_tb=0",
                         "workload.limit_requests=800"};
    json_t *a = run(t, on, 3), *b = run(t, off, 3);
    double ha = kvt_num(a, "cache.hit_rate"), hb = kvt_num(b, "cache.hit_rate");
    ck_assert_msg(ha > hb + 0.05, "hit rate with SSD %.3f, HBM only %.3f", ha, hb);
    ck_assert_msg(kvt_num(a, "ttft_ms.mean") < kvt_num(b, "ttft_ms.mean"),
                  "TTFT with SSD %.0f ms not below HBM only %.0f ms", kvt_num(a, "ttft_ms.mean"),
                  kvt_num(b, "ttft_ms.mean"));
    json_decref(a);
    json_decref(b);
}
END_TEST

START_TEST(test_swa_bounded_replay_cuts_prefill_flops) {
    const char *t = shared("mooncake_conversation.jsonl");
    const char *sets[] = {"model=gpt-oss-120b", "workload.limit_requests=3000",
                          "kv_cache.ssd.capacity_tb=unlimited"};
    json_t *s = run(t, sets, 3);
    json_t *pf = json_object_get(json_object_get(s, "cache"), "prefill_flops");
    double actual = json_number_value(json_object_get(pf, "actual"));
    double full = json_number_value(json_object_get(pf, "window_full_recompute"));
    double none = json_number_value(json_object_get(pf, "no_reuse"));
    ck_assert_msg(json_is_true(json_object_get(pf, "swa_replay")), "gpt-oss-120b not hybrid");
    ck_assert_msg(actual < full && full < none, "flops: replay %.3g, full window %.3g, no reuse %.3g",
                  actual, full, none);
    json_decref(s);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("kv");
    TCase *t = tcase_create("kv");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_unbounded_store_reaches_ideal_reuse);
    tcase_add_test(t, test_hit_rate_grows_with_capacity_and_retention);
    tcase_add_test(t, test_shared_ssd_on_agentic_sessions);
    tcase_add_test(t, test_swa_bounded_replay_cuts_prefill_flops);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return kvt_main(suite()); }
