// tests/test_saturation.c -- the saturation verdict (sim/sim_saturation.c) on known runs of the
// Mooncake conversation trace: quickstart is stable; the trace replayed five times faster is
// overloaded; capacity-plan at 4 + 4 instances (TTFT p90 ~12 s, prefill queue 40-100) and a
// night that shrinks decode to one instance (its queue climbing to ~128) are not stable; the
// saturation.* thresholds move the verdict and are range-checked.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers/kvt.h"

static const char *state(json_t *s) {
    return json_string_value(json_object_get(json_object_get(s, "saturation"), "state"));
}

static json_t *quick(const char *const *sets, int n) {
    return kvt_run("quickstart.yaml", kvt_shared_trace("mooncake_conversation.jsonl"), sets, n, NULL);
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
    snprintf(set, sizeof set, "saturation.max_wait_s=%.6f", kvt_num(s, "saturation.wait_mean_s") / 2);
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
    ck_assert_msg(kvt_num(s, "saturation.queue_growth") > 100 && kvt_num(s, "saturation.wait_growth_s") > 60,
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
    s = kvt_run("capacity-plan.yaml", kvt_shared_trace("mooncake_conversation.jsonl"), sets, 5, NULL);
    ck_assert_msg(!strcmp(state(s), "stable"), "thresholds out of reach: %s", state(s));
    json_decref(s);
}
END_TEST

START_TEST(test_night_shrink_not_stable) {
    // decode shrinks from two instances to one half an hour in: its queue climbs to ~128
    const char *sets[] = {"cluster.schedule=[{from_h: 0.5, decode: 1}]"};
    json_t *s = quick(sets, 1);
    json_t *d = json_object_get(json_object_get(json_object_get(s, "saturation"), "by_pool"), "decode");
    double g = json_number_value(json_object_get(d, "queue_growth"));
    ck_assert_msg(g > 64, "decode queue grew by %.1f", g);
    ck_assert_msg(strcmp(state(s), "stable"), "night shrink called stable");
    json_decref(s);
    // the same hour without the shrink is stable
    s = quick(NULL, 0);
    d = json_object_get(json_object_get(json_object_get(s, "saturation"), "by_pool"), "decode");
    ck_assert_msg(json_number_value(json_object_get(d, "queue_growth")) < 8, "decode queue grows unshrunk");
    json_decref(s);
}
END_TEST

START_TEST(test_thresholds_range_checked) {
    static const char *bad[] = {"saturation.drain_frac=1.5", "saturation.queue_growth=-1",
                                "saturation.wait_growth_s=x", "saturation.reject_frac=-0.1",
                                "saturation.max_wait_s=-2", "saturation.unknown=1"};
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
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return kvt_main(suite()); }
