// tests/test_autoscale.c -- load-driven instance counts (cluster.<pool>.autoscale) on a day of
// diurnal traffic: beside a fixed cluster of the same maximum size the autoscaled one uses fewer
// GPU-hours and still meets the SLO; it never serves with fewer than min or more than max
// instances (the time series says so sample by sample); starting instances are billed, and
// draining ones until they hold nothing (a prefill instance's KV sent to decode included); keys
// that cannot apply are refused; two runs agree.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers/kvt.h"

#define DAY                                                                                        \
    "workload.generate.profile=chatbot", "workload.generate.days=1",                               \
        "workload.generate.rate_rps=0.4", "workload.generate.diurnal_amplitude=0.8",               \
        "cluster.prefill.instances=2", "cluster.decode.instances=5"
#define SCALE                                                                                      \
    "cluster.decode.autoscale.metric=utilization", "cluster.decode.autoscale.up=0.85",             \
        "cluster.decode.autoscale.down=0.4", "cluster.decode.autoscale.min=1",                     \
        "cluster.decode.autoscale.max=4", "cluster.decode.autoscale.cooldown_s=600",               \
        "cluster.decode.autoscale.startup_s=180"

START_TEST(test_autoscale_saves_gpu_hours_on_a_day) {
    kvt_tmp_make("kvf_as");
    const char *fixed[] = {DAY};
    const char *scaled[] = {DAY, SCALE};
    json_t *a = kvt_run("quickstart.yaml", NULL, fixed, 6, NULL);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/s", kvt_tmp);
    json_t *b = kvt_run("quickstart.yaml", NULL, scaled, 13, dir);
    double ga = kvt_num(a, "gpu_hours"), gb = kvt_num(b, "gpu_hours");
    ck_assert_msg(gb < 0.8 * ga, "autoscaled %g GPU-hours, fixed %g", gb, ga);
    ck_assert_msg(kvt_num(b, "slo.attainment") >= kvt_num(a, "slo.attainment") - 0.02,
                  "attainment %g autoscaled, %g fixed", kvt_num(b, "slo.attainment"),
                  kvt_num(a, "slo.attainment"));
    ck_assert_msg(kvt_num(b, "scaling.decode.ups") > 0 && kvt_num(b, "scaling.decode.downs") > 0,
                  "no scaling over a diurnal day");
    ck_assert_msg(kvt_num(b, "scaling.decode.instances_min") >= 1 &&
                      kvt_num(b, "scaling.decode.instances_max") <= 4,
                  "instances %g..%g outside [1, 4]", kvt_num(b, "scaling.decode.instances_min"),
                  kvt_num(b, "scaling.decode.instances_max"));
    // the decode pool's GPU-hours: never more than its maximum all day, and what the summary
    // bills is what the scaling section says
    ck_assert_msg(kvt_num(b, "scaling.decode.gpu_hours") <= 4 * 24 * 1.0001, "decode %g GPU-hours",
                  kvt_num(b, "scaling.decode.gpu_hours"));
    // sample by sample, the serving instances stay within [min, max]
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "sqlite3 %s/results.db \"select min(value), max(value), count(distinct value) "
             "from timeseries where pool='decode' and metric='instances'\"",
             dir);
    ck_assert_int_eq(kvt_sh("%s", cmd), 0);
    double lo = -1, hi = -1, nd = -1;
    ck_assert_msg(sscanf(kvt_out, "%lf|%lf|%lf", &lo, &hi, &nd) == 3, "%s", kvt_out);
    ck_assert_msg(lo >= 1 && hi <= 4 && nd >= 2, "instances over the day %g..%g (%g counts)", lo,
                  hi, nd);
    // deterministic
    json_t *c = kvt_run("quickstart.yaml", NULL, scaled, 13, NULL);
    ck_assert_msg(kvt_num(c, "gpu_hours") == gb &&
                      kvt_num(c, "ttft_ms.p90") == kvt_num(b, "ttft_ms.p90"),
                  "two runs differ: %g / %g GPU-hours", kvt_num(c, "gpu_hours"), gb);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    kvt_tmp_remove();
}
END_TEST

START_TEST(test_autoscale_keys_that_cannot_apply) {
    struct {
        const char *sets, *key;
    } bad[] = {
        {"--set cluster.decode.autoscale.up=0.9", "cluster.decode.autoscale.up"},
        {"--set cluster.vision.autoscale.metric=queue", "cluster.vision.autoscale.metric"},
        {"--set cluster.decode.autoscale.metric=queue --set cluster.decode.autoscale.up=1 "
         "--set cluster.decode.autoscale.down=2 --set cluster.decode.autoscale.min=1",
         "autoscale.down"},
        {"--set cluster.decode.autoscale.metric=kv --set cluster.decode.autoscale.up=0.9 "
         "--set cluster.decode.autoscale.min=1 --set cluster.decode.autoscale.max=99",
         "autoscale.max"},
        {"--set cluster.decode.autoscale.metric=nonsense", "autoscale.metric"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc =
            kvt_sh("%s run scenarios/quickstart.yaml %s -q --no-report -o /tmp/kvf_as_bad --force",
                   kvt_bin(), bad[i].sets);
        ck_assert_msg(rc == 2, "%s: exit %d", bad[i].sets, rc);
        ck_assert_msg(strstr(kvt_err, bad[i].key), "%s: message without %s: %s", bad[i].sets,
                      bad[i].key, kvt_err);
    }
}
END_TEST

// autoscale.min left out is 1 (scenarios/README.md: `min` 0 = 1): the run is the one with
// min=1 given, figure for figure. Before, validation refused it ("must be in [1, max] ... got 0")
// naming a key the scenario did not set. A min over max is still refused.
START_TEST(test_autoscale_min_left_out_is_one) {
    const char *bare[] = {"workload.limit_requests=2000", "cluster.decode.autoscale.metric=queue",
                          "cluster.decode.autoscale.up=2"};
    const char *one[] = {"workload.limit_requests=2000", "cluster.decode.autoscale.metric=queue",
                         "cluster.decode.autoscale.up=2", "cluster.decode.autoscale.min=1"};
    json_t *a = kvt_run("quickstart.yaml", NULL, bare, 3, NULL);
    json_t *b = kvt_run("quickstart.yaml", NULL, one, 4, NULL);
    ck_assert_msg(kvt_num(a, "scaling.decode.instances_min") == 1, "starts at %g instances",
                  kvt_num(a, "scaling.decode.instances_min"));
    ck_assert_msg(kvt_num(a, "gpu_hours") == kvt_num(b, "gpu_hours") &&
                      kvt_num(a, "ttft_ms.p90") == kvt_num(b, "ttft_ms.p90") &&
                      kvt_num(a, "scaling.decode.ups") == kvt_num(b, "scaling.decode.ups"),
                  "min left out: %g GPU-hours, min=1: %g", kvt_num(a, "gpu_hours"),
                  kvt_num(b, "gpu_hours"));
    json_decref(a);
    json_decref(b);
    int rc = kvt_sh("%s run scenarios/quickstart.yaml --set cluster.decode.autoscale.metric=queue "
                    "--set cluster.decode.autoscale.up=2 --set cluster.decode.autoscale.min=3 "
                    "--set cluster.decode.autoscale.max=2 -q --no-report -o /tmp/kvf_as_bad "
                    "--force",
                    kvt_bin());
    ck_assert_msg(rc == 2 && strstr(kvt_err, "cluster.decode.autoscale.min"), "exit %d: %s", rc,
                  kvt_err);
}
END_TEST

// An instance scaled down finishes what runs there, and its GPUs are billed until it is idle:
// before, billing stopped at once while its steps went on, and the decode pool was busy 1.098
// of its billed time (the economics' utilisation above its own capacity figure).
START_TEST(test_autoscale_drain_billed) {
    const char *sets[] = {"workload.limit_requests=2000", "cluster.decode.instances=4",
                          "cluster.decode.autoscale.metric=queue", "cluster.decode.autoscale.up=2",
                          "cluster.decode.autoscale.down=0.5"};
    json_t *s = kvt_run("quickstart.yaml", NULL, sets, 5, NULL);
    ck_assert_msg(kvt_num(s, "scaling.decode.downs") > 0, "no scale-down");
    const char *pools[] = {"utilization.prefill", "utilization.decode"};
    for (int i = 0; i < 2; i++)
        ck_assert_msg(kvt_num(s, pools[i]) <= 1 + 1e-9, "%s %g", pools[i], kvt_num(s, pools[i]));
    ck_assert_msg(kvt_num(s, "economics.utilization") <=
                      kvt_num(s, "economics.capacity_utilization") + 1e-9,
                  "utilisation %g above capacity %g", kvt_num(s, "economics.utilization"),
                  kvt_num(s, "economics.capacity_utilization"));
    json_decref(s);
}
END_TEST

// A prefill instance taken out of service holds its prompts' KV until decode has it: it is billed
// until its last transfer ends, not its last step. Two 1,024-token prompts at 0 s, one on each
// of two prefill instances (round robin); the schedule then keeps one instance, and the second
// drains. Its prompt's KV, 1,024 x 131,072 B (Llama-3.1-8B) = 134,217,728 B, crosses a 0.1 GB/s
// link from the prefill's end (the first token) in 1.34217728 s + 20 us latency. The run's
// GPU-seconds are 2 x its length (prefill instance 0 and the decode instance, 1 GPU each, all
// run) + the drained instance's billed time, which must be that transfer's end, 1.3676 s.
// Billing stopped at the step's end when the drain began mid-step (0.0254 s) and at once when
// it began mid-transfer (0.36 s).
START_TEST(test_drained_prefill_billed_until_kv_sent) {
    kvt_tmp_make("kvf_as");
    const char *trace = kvt_tmp_path("two.jsonl");
    kvt_write(trace, "{\"id\":1,\"arrival_ns\":0,\"input_tokens\":1024,\"output_tokens\":2}\n"
                     "{\"id\":2,\"arrival_ns\":0,\"input_tokens\":1024,\"output_tokens\":2}\n");
    const double at_s[2] = {0.01, 0.36};   // mid-step, mid-transfer
    for (int k = 0; k < 2; k++) {
        char sched[128], dir[200];
        snprintf(sched, sizeof sched, "cluster.schedule=[{from_h: %.12g, prefill: 1}]",
                 at_s[k] / 3600);
        snprintf(dir, sizeof dir, "%s/d%d", kvt_tmp, k);
        const char *sets[] = {"workload.format=kvfleet",
                              "cluster.prefill.instances=2",
                              "cluster.decode.instances=1",
                              "cluster.prefill.gpus_per_instance=1",
                              "cluster.decode.gpus_per_instance=1",
                              "router.prefill=round_robin",
                              "cluster.network.kv_transfer_GBps=0.1",
                              "cluster.network.latency_us=20",
                              sched};
        json_t *s = kvt_run("quickstart.yaml", trace, sets, 9, dir);
        ck_assert(kvt_sh("sqlite3 %s/results.db 'select prefill_instance, ttft_s from request "
                         "where id = 1'",
                         dir) == 0);
        int inst = -1;
        double first = 0;
        ck_assert_msg(sscanf(kvt_out, "%d|%lf", &inst, &first) == 2, "%s", kvt_out);
        double sent = first + 20e-6 + 1024.0 * 131072 / 0.1e9;
        ck_assert_msg(inst == 1 && (k ? first < at_s[k] && sent > at_s[k] : first > at_s[k]),
                      "drain at %g s: request 1 on prefill instance %d, its prefill ends at %.6f s",
                      at_s[k], inst, first);
        double billed = kvt_num(s, "gpu_hours") * 3600 - 2 * kvt_num(s, "sim.simulated_s");
        ck_assert_msg(fabs(billed - sent) < 1e-6,
                      "drain at %g s: the drained instance billed %.9f s, its KV sent at %.9f s",
                      at_s[k], billed, sent);
        json_decref(s);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("autoscale");
    TCase *tc = tcase_create("autoscale");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_autoscale_saves_gpu_hours_on_a_day);
    tcase_add_test(tc, test_autoscale_keys_that_cannot_apply);
    tcase_add_test(tc, test_autoscale_min_left_out_is_one);
    tcase_add_test(tc, test_autoscale_drain_billed);
    tcase_add_test(tc, test_drained_prefill_billed_until_kv_sent);
    suite_add_tcase(s, tc);
    return kvt_main(s);
}
