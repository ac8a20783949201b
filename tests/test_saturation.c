// tests/test_saturation.c -- the saturation verdict (sim/sim_saturation.c) on known runs of the
// Mooncake conversation trace: quickstart is stable; the trace replayed five times faster is
// overloaded; capacity-plan at 4 + 4 instances (TTFT p90 ~12 s, prefill queue 40-100) and a
// night that shrinks decode to one instance (its queue climbing to ~128) are not stable; the
// saturation.* thresholds move the verdict and are range-checked.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/kvt.h"

static const char *state(json_t *s) {
    return json_string_value(json_object_get(json_object_get(s, "saturation"), "state"));
}

static json_t *quick(const char *const *sets, int n) {
    return kvt_run("quickstart.yaml", kvt_shared_trace("mooncake_conversation.jsonl"), sets, n,
                   NULL);
}

static json_t *capacity_4_4(const char *extra) {
    const char *sets[] = {"cluster.prefill.instances=4", "cluster.decode.instances=4", extra};
    return kvt_run("capacity-plan.yaml", kvt_shared_trace("mooncake_conversation.jsonl"), sets,
                   extra ? 3 : 2, NULL);
}

START_TEST(test_quickstart_stable) {
    json_t *s = quick(NULL, 0);
    ck_assert_msg(!strcmp(state(s), "stable"), "quickstart: %s (%s)", state(s),
                  json_string_value(json_object_get(json_object_get(s, "saturation"), "reason")));
    ck_assert_msg(kvt_num(s, "saturation.wait_mean_s") < kvt_num(s, "saturation.wait_limit_s"),
                  "mean wait %.3f s", kvt_num(s, "saturation.wait_mean_s"));
    // a limit below the run's own mean wait turns the same run backlogged
    char set[64];
    snprintf(set, sizeof set, "saturation.max_wait_s=%.6f",
             kvt_num(s, "saturation.wait_mean_s") / 2);
    const char *sets[] = {set};
    json_t *t = quick(sets, 1);
    ck_assert_msg(!strcmp(state(t), "backlogged"), "max_wait_s below the mean wait: %s", state(t));
    json_decref(s), json_decref(t);
}
END_TEST

START_TEST(test_far_above_capacity_overloaded) {
    const char *sets[] = {"workload.time_scale=0.2"};   // 5x the recorded rate
    json_t *s = quick(sets, 1);
    ck_assert_msg(!strcmp(state(s), "overloaded"), "5x rate: %s", state(s));
    ck_assert_msg(kvt_num(s, "saturation.queue_growth") > 100 &&
                      kvt_num(s, "saturation.wait_growth_s") > 60,
                  "queue growth %.0f, wait growth %.1f s", kvt_num(s, "saturation.queue_growth"),
                  kvt_num(s, "saturation.wait_growth_s"));
    json_decref(s);
}
END_TEST

START_TEST(test_capacity_plan_4_4_not_stable) {
    json_t *s = capacity_4_4(NULL);
    ck_assert_msg(kvt_num(s, "ttft_ms.p90") > 8000 && kvt_num(s, "slo.attainment") < 0.2,
                  "the run is not the one described: TTFT p90 %.0f ms, attainment %.3f",
                  kvt_num(s, "ttft_ms.p90"), kvt_num(s, "slo.attainment"));
    ck_assert_msg(strcmp(state(s), "stable"), "capacity-plan at 4 + 4 called stable");
    ck_assert_msg(kvt_num(s, "saturation.wait_mean_s") > kvt_num(s, "saturation.wait_limit_s"),
                  "mean wait %.2f s", kvt_num(s, "saturation.wait_mean_s"));
    // with every threshold out of reach the same run is stable: the keys decide
    json_decref(s);
    const char *sets[] = {"cluster.prefill.instances=4", "cluster.decode.instances=4",
                          "saturation.max_wait_s=1e6", "saturation.queue_growth=1e6",
                          "saturation.wait_growth_s=1e6"};
    s = kvt_run("capacity-plan.yaml", kvt_shared_trace("mooncake_conversation.jsonl"), sets, 5,
                NULL);
    ck_assert_msg(!strcmp(state(s), "stable"), "thresholds out of reach: %s", state(s));
    json_decref(s);
}
END_TEST

START_TEST(test_night_shrink_not_stable) {
    // decode shrinks from two instances to one half an hour in: its queue climbs to ~128
    const char *sets[] = {"cluster.schedule=[{from_h: 0.5, decode: 1}]"};
    json_t *s = quick(sets, 1);
    json_t *d =
        json_object_get(json_object_get(json_object_get(s, "saturation"), "by_pool"), "decode");
    double g = json_number_value(json_object_get(d, "queue_growth"));
    ck_assert_msg(g > 64, "decode queue grew by %.1f", g);
    ck_assert_msg(strcmp(state(s), "stable"), "night shrink called stable");
    json_decref(s);
    // the same hour without the shrink is stable
    s = quick(NULL, 0);
    d = json_object_get(json_object_get(json_object_get(s, "saturation"), "by_pool"), "decode");
    ck_assert_msg(json_number_value(json_object_get(d, "queue_growth")) < 8,
                  "decode queue grows unshrunk");
    json_decref(s);
}
END_TEST

// One 14,484-token answer arriving near the end of a short generated run: it decodes long after
// the last arrival, but nothing waits behind it -- service, not backlog: stable (and `plan`
// keeps the configuration feasible). The trace is generated, the long request added by hand.
START_TEST(test_one_long_late_answer_stable) {
    kvt_tmp_make("kvf_sat");
    char trace[128], big[160];
    snprintf(trace, sizeof trace, "%s/gen.jsonl", kvt_tmp);
    snprintf(big, sizeof big, "%s/late.jsonl", kvt_tmp);
    ck_assert_int_eq(kvt_sh("%s trace gen --profile chatbot --rate 2 --duration 120 --seed 3 -o %s",
                            kvt_bin(), trace),
                     0);
    // the late request arrives last (just after the generated ones), with the next id
    char *txt = kvt_slurp(trace);
    size_t len = strlen(txt);
    ck_assert(len > 2);
    char *last = txt + len - 2;
    while (last > txt && last[-1] != '\n')
        last--;
    long long id = -1, at = -1;
    const char *pi = strstr(last, "\"id\":"), *pa = strstr(last, "\"arrival_ns\":");
    ck_assert_msg(pi && pa && sscanf(pi + 5, "%lld", &id) == 1 && sscanf(pa + 13, "%lld", &at) == 1,
                  "cannot read the trace's last line: %.80s", last);
    FILE *f = fopen(big, "w");
    ck_assert(f);
    fputs(txt, f);
    fprintf(f,
            "{\"id\":%lld,\"arrival_ns\":%lld,\"input_tokens\":2000,\"output_tokens\":14484,"
            "\"class\":\"chatbot\",\"flags\":0,\"images\":0,\"session\":77,\"turn\":0,"
            "\"prev_id\":-1,\"think_ns\":0,\"block_tokens\":64,\"blocks\":[]}\n",
            id + 1, at + 1000000);
    fclose(f);
    free(txt);
    const char *sets[] = {"workload.format=kvfleet"};
    json_t *s = kvt_run("quickstart.yaml", big, sets, 1, NULL);
    ck_assert_msg(kvt_num(s, "saturation.drain_s") > 60,
                  "the long answer should outlast the arrivals: %g s",
                  kvt_num(s, "saturation.drain_s"));
    ck_assert_msg(!strcmp(state(s), "stable"), "one long late answer: %s (%s)", state(s),
                  json_string_value(json_object_get(json_object_get(s, "saturation"), "reason")));
    json_decref(s);
    kvt_tmp_remove();
}
END_TEST

// A 0.5 GB/s prefill -> decode link: the KV transfers queue on it for about an hour after the
// arrivals end, longer than the arrivals lasted: overloaded, not merely backlogged.
START_TEST(test_slow_kv_link_overloaded) {
    const char *sets[] = {"cluster.network.kv_transfer_GBps=0.5", "workload.limit_requests=3000"};
    json_t *s = quick(sets, 2);
    ck_assert_msg(kvt_num(s, "saturation.queue_drain_s") > 1000, "queue drain %g s",
                  kvt_num(s, "saturation.queue_drain_s"));
    ck_assert_msg(!strcmp(state(s), "overloaded"), "0.5 GB/s KV link: %s (%s)", state(s),
                  json_string_value(json_object_get(json_object_get(s, "saturation"), "reason")));
    json_decref(s);
}
END_TEST

START_TEST(test_thresholds_range_checked) {
    static const char *bad[] = {"saturation.drain_frac=1.5",  "saturation.queue_growth=-1",
                                "saturation.wait_growth_s=x", "saturation.reject_frac=-0.1",
                                "saturation.max_wait_s=-2",   "saturation.unknown=1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = kvt_sh("%s run scenarios/quickstart.yaml -q --set %s", kvt_bin(), bad[i]);
        ck_assert_msg(rc == 2, "--set %s: exit %d", bad[i], rc);
        ck_assert_msg(strstr(kvt_err, "saturation."), "--set %s: %s", bad[i], kvt_err);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("saturation");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_quickstart_stable);
    tcase_add_test(t, test_far_above_capacity_overloaded);
    tcase_add_test(t, test_capacity_plan_4_4_not_stable);
    tcase_add_test(t, test_night_shrink_not_stable);
    tcase_add_test(t, test_thresholds_range_checked);
    tcase_add_test(t, test_one_long_late_answer_stable);
    tcase_add_test(t, test_slow_kv_link_overloaded);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
