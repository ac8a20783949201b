// tests/test_policies.c -- policies and stages on the Mooncake trace: routers against round
// robin, speculative decoding's tokens per step, the saturation flag, colocated against
// disaggregated under prefill bursts, the vision stage and the time-of-day schedule.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/kvt.h"
#include "sim.h"

static json_t *run(const char *const *sets, int n) {
    return kvt_run("quickstart.yaml", kvt_shared_trace("mooncake_conversation.jsonl"), sets, n,
                   NULL);
}

static const char *sat(json_t *s) {
    return json_string_value(json_object_get(json_object_get(s, "saturation"), "state"));
}

START_TEST(test_cache_aware_and_ttft_estimate_beat_round_robin) {
    // HBM-only prefix caches: where a request lands decides whether its prefix is there
    const char *base[] = {"kv_cache.ssd.capacity_tb=0", "cluster.prefill.instances=3",
                          "workload.limit_requests=6000", NULL};
    const char *names[] = {"round_robin", "cache_aware", "ttft_estimate"};
    double hit[3], p90[3];
    for (int i = 0; i < 3; i++) {
        char r[64];
        snprintf(r, sizeof r, "router.prefill=%s", names[i]);
        base[3] = r;
        json_t *s = run(base, 4);
        hit[i] = kvt_num(s, "cache.hit_rate");
        p90[i] = kvt_num(s, "ttft_ms.p90");
        json_decref(s);
    }
    for (int i = 1; i < 3; i++) {
        ck_assert_msg(hit[i] > hit[0], "%s hit rate %.4f not above round robin %.4f", names[i],
                      hit[i], hit[0]);
        ck_assert_msg(p90[i] < p90[0], "%s TTFT p90 %.0f ms not below round robin %.0f ms",
                      names[i], p90[i], p90[0]);
    }
}
END_TEST

// Both cache-aware routers count a prompt's hit as admission serves it: whole blocks, and a
// prompt found whole recomputes its last block (trc_hit_tokens). 2,048-token blocks, HBM caches
// only. r0 (blocks 1-3) goes to instance 0; r1 (blocks 1-4) comes 1 ms later, while r0 is
// queued there, and goes to instance 1. At 10 s r2 (blocks 1-5, 9,216 tokens) goes to instance
// 1, where 4 blocks hit (8,192 tokens), and has 1,024 tokens to compute; 1 ms later r3 repeats
// r1's prompt (8,192 tokens). Instance 1 holds it whole, but serves 3 blocks of it (6,144 tokens)
// as instance 0 does, and has r2 queued: r3 belongs on instance 0, where it does not queue. The
// routers credited instance 1 with 8,192 (cache_aware) or 8,191 (ttft_estimate) hit tokens and
// sent r3 behind r2 (queue_s 31.8 ms).
START_TEST(test_routers_count_whole_prompt_hit_as_served) {
    kvt_tmp_make("kvf_route");
    const char *trace = kvt_tmp_path("four.jsonl");
    static const struct {
        long long at_ns;
        int blocks, input;
    } q[4] = {{0, 3, 6144}, {1000000, 4, 8192}, {10000000000LL, 5, 9216}, {10001000000LL, 4, 8192}};
    char text[1024];
    int n = 0;
    for (int i = 0; i < 4; i++) {
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "{\"id\":%d,\"arrival_ns\":%lld,\"input_tokens\":%d,\"output_tokens\":4,"
                      "\"block_tokens\":2048,\"blocks\":[",
                      i + 1, q[i].at_ns, q[i].input);
        for (int b = 1; b <= q[i].blocks; b++)
            n += snprintf(text + n, sizeof text - (size_t)n, "%s%d", b > 1 ? "," : "", b);
        n += snprintf(text + n, sizeof text - (size_t)n, "]}\n");
    }
    kvt_write(trace, text);
    const char *names[] = {"cache_aware", "ttft_estimate"};
    for (int k = 0; k < 2; k++) {
        char router[64], dir[200];
        snprintf(router, sizeof router, "router.prefill=%s", names[k]);
        snprintf(dir, sizeof dir, "%s/%s", kvt_tmp, names[k]);
        const char *sets[] = {"workload.format=kvfleet",    "cluster.prefill.instances=2",
                              "cluster.decode.instances=1", "kv_cache.block_tokens=2048",
                              "kv_cache.ssd.capacity_tb=0", router};
        json_decref(kvt_run("quickstart.yaml", trace, sets, 6, dir));
        ck_assert(kvt_sh("sqlite3 %s/results.db 'select prefill_instance, cached_tokens, queue_s "
                         "from request order by id'",
                         dir) == 0);
        int inst[4], cached[4];
        double queue[4];
        const char *p = kvt_out;
        for (int i = 0; i < 4; i++) {
            int used = 0;
            ck_assert_msg(sscanf(p, "%d|%d|%lf\n%n", &inst[i], &cached[i], &queue[i], &used) == 3,
                          "%s: rows %s", names[k], kvt_out);
            p += used;
        }
        ck_assert_msg(inst[0] == 0 && inst[1] == 1 && inst[2] == 1 && cached[2] == 8192,
                      "%s: r0-r2 on instances %d %d %d, r2 cached %d", names[k], inst[0], inst[1],
                      inst[2], cached[2]);
        ck_assert_msg(inst[3] == 0 && cached[3] == 6144 && queue[3] == 0,
                      "%s: r3 on instance %d, %d tokens cached, queued %.6f s", names[k], inst[3],
                      cached[3], queue[3]);
    }
}
END_TEST

START_TEST(test_p2c_beats_round_robin_on_tail_under_load) {
    const char *a[] = {"cluster.prefill.instances=3", "workload.limit_requests=6000",
                       "router.prefill=round_robin"};
    const char *b[] = {"cluster.prefill.instances=3", "workload.limit_requests=6000",
                       "router.prefill=p2c"};
    json_t *s1 = run(a, 3), *s2 = run(b, 3);
    ck_assert_msg(kvt_num(s2, "ttft_ms.p99") < kvt_num(s1, "ttft_ms.p99"),
                  "p2c p99 %.0f, rr p99 %.0f", kvt_num(s2, "ttft_ms.p99"),
                  kvt_num(s1, "ttft_ms.p99"));
    json_decref(s1), json_decref(s2);
}
END_TEST

START_TEST(test_speculative_tokens_per_step) {
    // one draft token accepted with probability a: 1 + a tokens per step (the last step of a
    // request may be cut by its length, so a little less)
    for (int k = 0; k < 2; k++) {
        double a = k ? 0.8 : 0.5;
        char acc[64];
        snprintf(acc, sizeof acc, "speculative.acceptance=%g", a);
        const char *sets[] = {"speculative.draft_tokens=1", acc, "workload.limit_requests=1500"};
        json_t *s = run(sets, 3);
        double tps = kvt_num(s, "throughput.tokens_per_decode_step_per_request");
        ck_assert_msg(fabs(tps - (1 + a)) < 0.03, "acceptance %.2f: %.4f tokens per step", a, tps);
        json_decref(s);
    }
    const char *none[] = {"workload.limit_requests=500"};
    json_t *s = run(none, 1);
    ck_assert_msg(fabs(kvt_num(s, "throughput.tokens_per_decode_step_per_request") - 1) < 1e-9,
                  "no speculation should give exactly 1 token per step");
    json_decref(s);
}
END_TEST

START_TEST(test_overload_is_flagged) {
    const char *over[] = {"cluster.prefill.instances=1", "workload.limit_requests=3000"};
    const char *ok[] = {"workload.limit_requests=3000"};
    json_t *s1 = run(over, 2), *s2 = run(ok, 1);
    ck_assert_msg(!strcmp(sat(s1), "overloaded"), "1 prefill instance: %s", sat(s1));
    ck_assert_msg(!strcmp(sat(s2), "stable"), "quickstart: %s", sat(s2));
    json_decref(s1), json_decref(s2);
}
END_TEST

START_TEST(test_disaggregation_keeps_tpot_flat) {
    // same 6 GPUs: colocated mixes prefill chunks into decode steps, so long prompts stretch
    // the decode steps of everyone else
    const char *d[] = {"workload.limit_requests=3000"};
    const char *c[] = {"workload.limit_requests=3000", "cluster.mode=colocated"};
    json_t *s1 = run(d, 1), *s2 = run(c, 2);
    ck_assert_int_eq(kvt_num(s1, "gpus.prefill") + kvt_num(s1, "gpus.decode"),
                     kvt_num(s2, "gpus.prefill"));
    ck_assert_msg(kvt_num(s1, "tpot_ms.p90") < kvt_num(s2, "tpot_ms.p90"),
                  "TPOT p90 disaggregated %.2f ms, colocated %.2f ms", kvt_num(s1, "tpot_ms.p90"),
                  kvt_num(s2, "tpot_ms.p90"));
    json_decref(s1), json_decref(s2);
}
END_TEST

START_TEST(test_schedule_changes_gpu_hours) {
    // half the decode fleet lent away for the second half of the day shows in the GPU-hours
    const char *a[] = {"workload.limit_requests=2000", "cluster.decode.instances=4"};
    const char *b[] = {"workload.limit_requests=2000", "cluster.decode.instances=4",
                       "cluster.schedule=[{from_h: 0.1, decode: 2}]"};
    json_t *s1 = run(a, 2), *s2 = run(b, 3);
    ck_assert_msg(kvt_num(s2, "gpu_hours") < kvt_num(s1, "gpu_hours"), "GPU-hours %.3f vs %.3f",
                  kvt_num(s2, "gpu_hours"), kvt_num(s1, "gpu_hours"));
    ck_assert_int_eq(kvt_num(s2, "requests.completed"), 2000);
    json_decref(s1), json_decref(s2);
}
END_TEST

// The schedule's hours are the day's, and the trace starts at economics.trace_start_utc: a run
// of about 11 minutes from 00:55 crosses 01:00 and grows to 6 prefill instances there; from
// 01:30 it has 6 from the start; from 00:00 never (before, every start was taken as 00:00 and
// the run from 00:55 kept 2 throughout, while its economics placed it at 00:55).
START_TEST(test_schedule_from_trace_start) {
    double gh[3];
    const char *starts[] = {"economics.trace_start_utc=00:00", "economics.trace_start_utc=00:55",
                            "economics.trace_start_utc=01:30"};
    for (int i = 0; i < 3; i++) {
        const char *sets[] = {"workload.limit_requests=2000", "cluster.prefill.instances=6",
                              "cluster.schedule=[{from_h: 0, prefill: 2}, {from_h: 1, prefill: 6}]",
                              starts[i]};
        json_t *s = run(sets, 4);
        gh[i] = kvt_num(s, "gpu_hours");
        json_decref(s);
    }
    ck_assert_msg(gh[0] < gh[1] && gh[1] < gh[2],
                  "GPU-hours from 00:00 %.3f, 00:55 %.3f, 01:30 %.3f", gh[0], gh[1], gh[2]);
}
END_TEST

START_TEST(test_vision_stage) {
    kvt_tmp_make("kvf_vis");
    // half the requests carry an image: they pass through the vision pool before prefill,
    // and the vision encoder's work shows as that pool's busy time
    char dir[] = "/tmp/kvf_vis_XXXXXX";
    ck_assert(mkdtemp(dir));
    kvt_tmp_register(dir);
    const char *sets[] = {
        "model=gemma-3-27b", "cluster.vision.instances=1", "cluster.prefill.gpus_per_instance=2",
        "cluster.decode.gpus_per_instance=2",
        "workload.generate={profile: chatbot, rate_rps: 4, duration_s: 120, images_p: 0.5}"};
    json_t *s = kvt_run("quickstart.yaml", NULL, sets, 5, dir);
    ck_assert_int_eq(kvt_num(s, "gpus.vision"), 1);
    ck_assert_msg(kvt_num(s, "utilization.vision") > 0, "vision pool never busy");
    json_decref(s);
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "sqlite3 %s/results.db 'SELECT COUNT(*) FROM request WHERE vision_instance >= 0'",
             dir);
    ck_assert_int_eq(kvt_sh("%s", cmd), 0);
    long with_image = atol(kvt_out);
    ck_assert_msg(with_image > 100, "only %ld requests went through the vision pool", with_image);
}
END_TEST

// One queue policy for every pool: scheduler, queue_limit and max_batch_requests change what
// each pool kind does (vision, prefill, decode), and a key that cannot apply is refused.
static double rejected_queue(json_t *s) {
    return kvt_num(s, "requests.rejected_by_reason.queue");
}

static json_t *vision_run(const char *extra) {
    const char *sets[] = {
        "model=gemma-3-27b",
        "cluster.vision.instances=1",
        "cluster.prefill.gpus_per_instance=2",
        "cluster.decode.gpus_per_instance=2",
        "workload.generate={profile: mixed, rate_rps: 3000, duration_s: 2, images_p: 1}",
        extra};
    return kvt_run("quickstart.yaml", NULL, sets, extra ? 6 : 5, NULL);
}

START_TEST(test_pool_policy_vision) {
    json_t *base = vision_run(NULL);
    json_t *b2 = vision_run("cluster.vision.max_batch_requests=1");
    json_t *spf = vision_run("cluster.vision.scheduler=spf");
    json_t *ql = vision_run("cluster.vision.queue_limit=1");
    double t0 = kvt_num(base, "ttft_ms.mean"), t1 = kvt_num(b2, "ttft_ms.mean");
    double p0 = kvt_num(base, "ttft_ms.p50"), ps = kvt_num(spf, "ttft_ms.p50");
    printf("vision: TTFT mean %.1f ms (batch 64) vs %.1f ms (batch 1); p50 fcfs %.1f vs spf %.1f; "
           "queue limit 1 rejects %g\n",
           t0, t1, p0, ps, rejected_queue(ql));
    ck_assert_msg(t1 != t0, "vision max_batch_requests changed nothing (%.3f ms)", t0);
    ck_assert_msg(ps != p0, "vision scheduler changed nothing (p50 %.3f ms)", p0);
    ck_assert_msg(rejected_queue(base) == 0 && rejected_queue(ql) > 0,
                  "vision queue_limit: %g rejected (none without it: %g)", rejected_queue(ql),
                  rejected_queue(base));
    json_decref(base), json_decref(b2), json_decref(spf), json_decref(ql);
}
END_TEST

START_TEST(test_pool_policy_prefill) {
    const char *a[] = {"workload.limit_requests=3000", "workload.time_scale=0.4",
                       "cluster.prefill.instances=2"};
    const char *b[] = {"workload.limit_requests=3000", "workload.time_scale=0.4",
                       "cluster.prefill.instances=2", "cluster.prefill.max_batch_requests=1"};
    const char *c2[] = {"workload.limit_requests=3000", "workload.time_scale=0.4",
                        "cluster.prefill.instances=2", "cluster.prefill.scheduler=spf"};
    const char *d[] = {"workload.limit_requests=3000", "workload.time_scale=0.4",
                       "cluster.prefill.instances=2", "cluster.prefill.queue_limit=2"};
    json_t *sa = run(a, 3), *sb = run(b, 4), *sc = run(c2, 4), *sd = run(d, 4);
    printf("prefill: TTFT mean %.1f ms, one request per step %.1f ms, spf p50 %.1f vs %.1f ms, "
           "queue limit 2 rejects %g\n",
           kvt_num(sa, "ttft_ms.mean"), kvt_num(sb, "ttft_ms.mean"), kvt_num(sc, "ttft_ms.p50"),
           kvt_num(sa, "ttft_ms.p50"), rejected_queue(sd));
    ck_assert_msg(kvt_num(sb, "ttft_ms.mean") > kvt_num(sa, "ttft_ms.mean"),
                  "one request per prefill step did not slow TTFT");
    ck_assert_msg(kvt_num(sc, "ttft_ms.p50") < kvt_num(sa, "ttft_ms.p50"),
                  "spf did not cut TTFT p50");
    ck_assert_msg(rejected_queue(sd) > 0, "prefill queue_limit rejected nothing");
    json_decref(sa), json_decref(sb), json_decref(sc), json_decref(sd);
}
END_TEST

START_TEST(test_pool_policy_decode) {
    // one decode instance with little KV: requests wait for decode admission
    const char *a[] = {"workload.limit_requests=2500", "workload.time_scale=0.3",
                       "cluster.decode.instances=1", "cluster.prefill.instances=4",
                       "cluster.decode.kv_tokens=400000"};
    const char *b[] = {"workload.limit_requests=2500",    "workload.time_scale=0.3",
                       "cluster.decode.instances=1",      "cluster.prefill.instances=4",
                       "cluster.decode.kv_tokens=400000", "cluster.decode.scheduler=spf"};
    const char *c2[] = {"workload.limit_requests=2500", "workload.time_scale=0.3",
                        "cluster.decode.instances=1", "cluster.prefill.instances=4",
                        "cluster.decode.max_batch_requests=16"};
    const char *c0[] = {"workload.limit_requests=2500", "workload.time_scale=0.3",
                        "cluster.decode.instances=1", "cluster.prefill.instances=4"};
    const char *d[] = {"workload.limit_requests=2500",    "workload.time_scale=0.3",
                       "cluster.decode.instances=1",      "cluster.prefill.instances=4",
                       "cluster.decode.kv_tokens=400000", "cluster.decode.queue_limit=5"};
    json_t *sa = run(a, 5), *sb = run(b, 6), *sc = run(c2, 5), *sd = run(d, 6), *s0 = run(c0, 4);
    printf("decode: E2E p50 fcfs %.0f ms, spf %.0f ms; mean batch %.1f, capped at 16 %.1f; queue "
           "limit 5 rejects %g\n",
           kvt_num(sa, "e2e_ms.p50"), kvt_num(sb, "e2e_ms.p50"),
           kvt_num(s0, "steps.decode_mean_batch"), kvt_num(sc, "steps.decode_mean_batch"),
           rejected_queue(sd));
    ck_assert_msg(kvt_num(sb, "e2e_ms.p50") != kvt_num(sa, "e2e_ms.p50"),
                  "decode scheduler changed nothing");
    ck_assert_msg(kvt_num(sc, "steps.decode_mean_batch") <= 16 &&
                      kvt_num(s0, "steps.decode_mean_batch") > 16,
                  "decode batch: %.1f capped at 16, %.1f without",
                  kvt_num(sc, "steps.decode_mean_batch"), kvt_num(s0, "steps.decode_mean_batch"));
    json_decref(s0);
    ck_assert_msg(rejected_queue(sa) == 0 && rejected_queue(sd) > 0,
                  "decode queue_limit rejected %g", rejected_queue(sd));
    json_decref(sa), json_decref(sb), json_decref(sc), json_decref(sd);
}
END_TEST

START_TEST(test_pool_keys_that_cannot_apply_are_refused) {
    const char *bad[] = {"cluster.vision.max_batch_tokens=4096", "cluster.vision.chunk_tokens=512",
                         "cluster.vision.kv_tokens=1000", "cluster.decode.chunk_tokens=512"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc =
            kvt_sh("%s run scenarios/quickstart.yaml --set %s --set workload.limit_requests=5 -q",
                   kvt_bin(), bad[i]);
        ck_assert_msg(rc == 2, "%s: exit %d", bad[i], rc);
        const char *key = strchr(bad[i], '=') ? bad[i] : bad[i];
        char k[64];
        snprintf(k, sizeof k, "%.*s", (int)(strchr(key, '=') - key), key);
        ck_assert_msg(strstr(kvt_err, k) && strstr(kvt_err, "does not apply"), "%s: %s", bad[i],
                      kvt_err);
    }
    // colocated: the decode instances join the prefill pool's step model, so its shape must match
    int rc = kvt_sh("%s run scenarios/quickstart.yaml --set cluster.mode=colocated --set "
                    "cluster.decode.gpus_per_instance=4 --set workload.limit_requests=5 -q",
                    kvt_bin());
    ck_assert_msg(rc == 2 && strstr(kvt_err, "cluster.decode.gpus_per_instance"),
                  "colocated decode shape: exit %d: %s", rc, kvt_err);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("policies");
    TCase *t = tcase_create("policies");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_cache_aware_and_ttft_estimate_beat_round_robin);
    tcase_add_test(t, test_routers_count_whole_prompt_hit_as_served);
    tcase_add_test(t, test_p2c_beats_round_robin_on_tail_under_load);
    tcase_add_test(t, test_speculative_tokens_per_step);
    tcase_add_test(t, test_overload_is_flagged);
    tcase_add_test(t, test_disaggregation_keeps_tpot_flat);
    tcase_add_test(t, test_schedule_changes_gpu_hours);
    tcase_add_test(t, test_schedule_from_trace_start);
    tcase_add_test(t, test_vision_stage);
    tcase_add_test(t, test_pool_policy_vision);
    tcase_add_test(t, test_pool_policy_prefill);
    tcase_add_test(t, test_pool_policy_decode);
    tcase_add_test(t, test_pool_keys_that_cannot_apply_are_refused);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
