// tests/test_validate.c -- fidelity: `kvfleet validate` serves a shrunk real trace on the CPU
// engine and simulates it calibrated from a profile of this machine; the errors it reports
// must stay within a bound loose enough for a shared machine (25 %), so a broken calibration
// fails. Also: a calibrated run far outside its profile says it extrapolated.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/kvt.h"

static json_t *validate(const char *trace, const char *shaping) {
    char dir[] = "/tmp/kvf_val_XXXXXX";
    ck_assert(mkdtemp(dir));
    char cmd[4096];
    const char *bin = getenv("KVF_BIN") ? getenv("KVF_BIN") : "build/kvfleet";
    snprintf(cmd, sizeof cmd, "cd %s && %s validate --trace %s %s -o %s --json > %s/v.json 2>%s/err.txt",
             kvt_src(), bin, trace, shaping, dir, dir, dir);
    int st = system(cmd);
    char path[256];
    snprintf(path, sizeof path, "%s/err.txt", dir);
    char msg[2048] = "";
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(msg, 1, sizeof msg - 1, f);
        msg[n] = 0;
        fclose(f);
    }
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "validate failed: %s", msg);
    snprintf(path, sizeof path, "%s/validation.json", dir);
    json_error_t e;
    json_t *v = json_load_file(path, 0, &e);
    ck_assert_msg(v, "validation.json: %s", e.text);
    return v;
}

static void check_errors(json_t *v, const char *what, double bound_pct) {
    const char *metrics[] = {"ttft_ms", "tpot_ms"}, *stats[] = {"p50", "p90"};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            json_t *x = json_object_get(json_object_get(v, metrics[i]), stats[k]);
            double real = json_number_value(json_object_get(x, "real"));
            double sim = json_number_value(json_object_get(x, "sim"));
            double e = json_number_value(json_object_get(x, "error_pct"));
            ck_assert_msg(real > 0 && sim > 0, "%s %s.%s: real %.2f sim %.2f", what, metrics[i], stats[k], real, sim);
            // the table's error is computed from the two runs, not supplied
            ck_assert_msg(fabs(e - 100 * (sim - real) / real) < 1e-6, "%s: error_pct inconsistent", what);
            ck_assert_msg(fabs(e) <= bound_pct, "%s %s %s: real %.1f ms, sim %.1f ms, error %+.1f %%",
                          what, metrics[i], stats[k], real, sim, e);
        }
    double corr = json_number_value(json_object_get(json_object_get(v, "per_request_corr"), "e2e"));
    ck_assert_msg(corr > 0.8, "%s: per-request E2E correlation %.3f", what, corr);
}

START_TEST(test_validate_chat_trace) {
    json_t *v = validate(kvt_shared_trace("mooncake_conversation.jsonl"),
                         "--limit 40 --length-scale 0.02 --time-scale 0.02");
    ck_assert_int_eq(json_integer_value(json_object_get(v, "requests")), 40);
    check_errors(v, "mooncake", 25);
    json_decref(v);
}
END_TEST

START_TEST(test_validate_azure_trace) {
    json_t *v = validate(kvt_shared_trace("azure2023_conv.csv"),
                         "--limit 40 --length-scale 0.3 --time-scale 0.3");
    check_errors(v, "azure", 25);
    json_decref(v);
}
END_TEST

START_TEST(test_extrapolation_is_flagged) {
    // tiny-dense calibrated from its CPU profile (prompts up to ~2k tokens of context) asked
    // about 12k-token Mooncake prompts: the step model must say it left the profile
    char prof[1200];
    snprintf(prof, sizeof prof, "profile=%s/models/profiles/cpu-tiny-dense.csv", kvt_src());
    const char *sets[] = {"model=tiny-dense", "hardware=cpu", "step_model=calibrated", prof,
                          "cluster.prefill.gpus_per_instance=1", "cluster.decode.gpus_per_instance=1",
                          "cluster.prefill.kv_tokens=1000000", "cluster.decode.kv_tokens=1000000",
                          "workload.limit_requests=20"};
    json_t *s = kvt_run("quickstart.yaml", kvt_shared_trace("mooncake_conversation.jsonl"), sets, 9, NULL);
    json_t *st = json_object_get(s, "steps");
    ck_assert_msg(json_is_true(json_object_get(st, "extrapolated")), "no extrapolation flagged");
    ck_assert_msg(kvt_num(s, "steps.extrapolated_steps") > 0, "no extrapolated steps counted");
    json_decref(s);
    // inside the profile's range nothing is flagged
    const char *inside[] = {"model=tiny-dense", "hardware=cpu", "step_model=calibrated", prof,
                            "cluster.prefill.gpus_per_instance=1", "cluster.decode.gpus_per_instance=1",
                            "cluster.prefill.kv_tokens=1000000", "cluster.decode.kv_tokens=1000000",
                            "workload.limit_requests=20", "workload.length_scale=0.02",
                            "cluster.prefill.max_batch_tokens=512", "cluster.decode.max_batch_requests=16"};
    s = kvt_run("quickstart.yaml", kvt_shared_trace("mooncake_conversation.jsonl"), inside, 12, NULL);
    ck_assert_msg(kvt_num(s, "steps.extrapolated_steps") == 0, "%g steps flagged inside the profile",
                  kvt_num(s, "steps.extrapolated_steps"));
    json_decref(s);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("validate");
    TCase *t = tcase_create("validate");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_extrapolation_is_flagged);
    tcase_add_test(t, test_validate_chat_trace);
    tcase_add_test(t, test_validate_azure_trace);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return kvt_main(suite()); }
