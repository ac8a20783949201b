// tests/test_results_config.c -- a result carries the configuration that produced it
// (design.md §10): summary.json's "config" fed back as a scenario, from another folder,
// gives the same summary (wall-clock figures under "sim" aside) for the shipped scenarios and
// for --set overrides; results.db holds the same as YAML in run(config), which runs the same
// too; the kept config names absolute paths.
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/kvt.h"

typedef struct rt_case {
    const char *scenario;
    const char *sets;   // extra command-line arguments
} rt_case;

// the larger scenarios (tcase "large", a ctest of its own: test_results_config_large)
static const rt_case large[] = {
    // its first minute of sessions (the scenario's five take a minute and more to run)
    {"deepseek-reference", "--set workload.generate.duration_s=60 --set output.steady_from_s=40 "
                           "--set output.steady_to_s=60"},
    {"ep-decode-144", ""},
    {"fleet-days", ""},
};

static const rt_case cases[] = {
    {"quickstart", ""},
    // two micro-batches on hardware that states no SM count: moe.comm_sms recorded at its default
    {"published/sglang-gb200-decode", ""},
    {"cluster-1000gpu", ""},
    {"capacity-plan",
     "--set cluster.prefill.instances=3 --set cluster.decode.instances=2 "
     "--set 'economics.day_profile=[1,1,1,1,1,1,2,3,4,5,5,5,5,5,5,4,3,3,3,2,2,1,1,1]' "
     "--set economics.prices_per_mtok.agent.output=0.5 --set economics.offpeak=null "
     "--set kv_cache.ssd.retention.agent=90m --set router.prefill=least_loaded "
     "--set saturation.max_wait_s=4 --seed 7"},
};

static json_t *load(const char *path) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    ck_assert_msg(j, "%s: %s", path, e.text);
    return j;
}

// The summary without what measures the wall clock.
static json_t *comparable(json_t *s) {
    json_t *sim = json_object_get(s, "sim");
    json_object_del(sim, "wall_s");
    json_object_del(sim, "events_per_s");
    return s;
}

// The first dotted path where a and b differ ("" when equal).
static void first_diff(const json_t *a, const json_t *b, const char *at, char *out, size_t n) {
    if (out[0]) return;
    if (json_is_object(a) && json_is_object(b)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)a, k, v) {
            char p[512];
            snprintf(p, sizeof p, "%s.%s", at, k);
            first_diff(v, json_object_get(b, k), p, out, n);
        }
        json_object_foreach((json_t *)b, k, v) if (!json_object_get(a, k) && !out[0])
            snprintf(out, n, "%s.%s (only in the second)", at, k);
        return;
    }
    if (!json_equal((json_t *)a, (json_t *)b)) {
        char *x = a ? json_dumps(a, JSON_ENCODE_ANY) : NULL,
             *y = b ? json_dumps(b, JSON_ENCODE_ANY) : NULL;
        snprintf(out, n, "%s: %.200s vs %.200s", at, x ? x : "(none)", y ? y : "(none)");
        free(x), free(y);
    }
}

static void assert_same(json_t *a, json_t *b, const char *what) {
    char d[1024] = "";
    first_diff(comparable(a), comparable(b), "", d, sizeof d);
    ck_assert_msg(!d[0], "%s: summaries differ at %s", what, d);
}

static void roundtrip(const rt_case *c) {
    kvt_tmp_make("kvf_rtc");
    ck_assert_msg(kvt_sh("%s run scenarios/%s.yaml -o %s/a -q %s", kvt_bin(), c->scenario, kvt_tmp,
                         c->sets) == 0,
                  "%s: %s", c->scenario, kvt_err);
    char path[512];
    snprintf(path, sizeof path, "%s/a/summary.json", kvt_tmp);
    json_t *a = load(path), *cfg = json_object_get(a, "config");
    ck_assert_msg(json_is_object(cfg), "%s: summary.json has no config", c->scenario);
    // paths are kept absolute: the config runs the same from any folder
    const char *model = json_string_value(json_object_get(cfg, "model"));
    ck_assert_msg(model && model[0] == '/', "model kept as '%s'", model ? model : "(none)");
    json_t *wl = json_object_get(cfg, "workload");
    const char *trace = json_string_value(json_object_get(wl, "trace"));
    ck_assert_msg(json_is_object(json_object_get(wl, "generate")) || (trace && trace[0] == '/'),
                  "trace kept as '%s'", trace ? trace : "(none)");
    // a folder away from the repository, run with another working directory
    ck_assert_int_eq(kvt_sh("mkdir -p %s/elsewhere", kvt_tmp), 0);
    const char *base = strrchr(c->scenario, '/');   // scenarios in a subfolder
    snprintf(path, sizeof path, "%s/elsewhere/%s-config.json", kvt_tmp,
             base ? base + 1 : c->scenario);
    ck_assert_int_eq(json_dump_file(cfg, path, JSON_INDENT(1)), 0);
    ck_assert_msg(kvt_sh("cd / && %s run %s -o %s/b -q", kvt_bin(), path, kvt_tmp) == 0, "%s: %s",
                  c->scenario, kvt_err);
    snprintf(path, sizeof path, "%s/b/summary.json", kvt_tmp);
    json_t *b = load(path);
    assert_same(a, b, c->scenario);
    json_decref(a), json_decref(b);
    kvt_tmp_remove();
}

START_TEST(test_config_reproduces_summary) {
    roundtrip(&cases[_i]);
}
END_TEST

START_TEST(test_config_reproduces_summary_large) {
    roundtrip(&large[_i]);
}
END_TEST

// results.db run(config): YAML that runs as the scenario did, and the same keys as the JSON.
START_TEST(test_run_table_yaml_reproduces) {
    kvt_tmp_make("kvf_rty");
    const char *sets = "--set workload.limit_requests=3000 --set cluster.decode.instances=3 "
                       "--set 'cluster.schedule=[{from_h: 0.25, decode: 1}]'";
    ck_assert_msg(
        kvt_sh("%s run scenarios/quickstart.yaml -o %s/a -q %s", kvt_bin(), kvt_tmp, sets) == 0,
        "%s", kvt_err);
    ck_assert_int_eq(kvt_sh("mkdir -p %s/y && sqlite3 %s/a/results.db \"SELECT value FROM run "
                            "WHERE key = 'config'\" > %s/y/run-config.yaml",
                            kvt_tmp, kvt_tmp, kvt_tmp),
                     0);
    char path[512];
    snprintf(path, sizeof path, "%s/y/run-config.yaml", kvt_tmp);
    char *yaml = kvt_slurp(path);
    ck_assert_msg(strstr(yaml, "schedule:") && strstr(yaml, "from_h: 0.25") &&
                      strstr(yaml, "limit_requests: 3000"),
                  "run(config) lacks the overrides:\n%.2000s", yaml);
    free(yaml);
    ck_assert_msg(kvt_sh("cd / && %s run %s -o %s/b -q", kvt_bin(), path, kvt_tmp) == 0, "%s",
                  kvt_err);
    snprintf(path, sizeof path, "%s/a/summary.json", kvt_tmp);
    json_t *a = load(path);
    snprintf(path, sizeof path, "%s/b/summary.json", kvt_tmp);
    json_t *b = load(path);
    // the run from YAML names its scenario as the original did
    assert_same(a, b, "quickstart from run(config)");
    json_decref(a), json_decref(b);
    kvt_tmp_remove();
}
END_TEST

// The comparison can fail: a config with one value changed gives another summary.
START_TEST(test_changed_config_changes_summary) {
    kvt_tmp_make("kvf_rtx");
    ck_assert_int_eq(
        kvt_sh("%s run scenarios/quickstart.yaml -o %s/a -q --set workload.limit_requests=2000",
               kvt_bin(), kvt_tmp),
        0);
    char path[512];
    snprintf(path, sizeof path, "%s/a/summary.json", kvt_tmp);
    json_t *a = load(path);
    json_t *cfg = json_deep_copy(json_object_get(a, "config"));
    json_object_set_new(json_object_get(json_object_get(cfg, "cluster"), "prefill"), "instances",
                        json_integer(2));
    snprintf(path, sizeof path, "%s/changed.json", kvt_tmp);
    ck_assert_int_eq(json_dump_file(cfg, path, 0), 0);
    ck_assert_int_eq(kvt_sh("%s run %s -o %s/b -q", kvt_bin(), path, kvt_tmp), 0);
    snprintf(path, sizeof path, "%s/b/summary.json", kvt_tmp);
    json_t *b = load(path);
    char d[1024] = "";
    first_diff(comparable(a), comparable(b), "", d, sizeof d);
    ck_assert_msg(d[0], "two prefill instances instead of four gave the same summary");
    json_decref(a), json_decref(b), json_decref(cfg);
    kvt_tmp_remove();
}
END_TEST

// compare names the configuration keys that differ between runs, and only those.
START_TEST(test_compare_shows_differing_keys) {
    kvt_tmp_make("kvf_rtd");
    const char *base = "--set workload.limit_requests=300";
    ck_assert_int_eq(
        kvt_sh("%s run scenarios/quickstart.yaml -q -o %s/a %s", kvt_bin(), kvt_tmp, base), 0);
    ck_assert_int_eq(
        kvt_sh("%s run scenarios/quickstart.yaml -q -o %s/b %s --set router.decode=round_robin "
               "--set saturation.drain_s=60",
               kvt_bin(), kvt_tmp, base),
        0);
    ck_assert_int_eq(kvt_sh("%s compare %s/a %s/b --json", kvt_bin(), kvt_tmp, kvt_tmp), 0);
    json_error_t je;
    json_t *arr = json_loads(kvt_out, 0, &je);
    ck_assert_msg(json_is_array(arr) && json_array_size(arr) == 2, "compare --json: %s", je.text);
    json_t *v0 = json_object_get(json_array_get(arr, 0), "varied"),
           *v1 = json_object_get(json_array_get(arr, 1), "varied");
    ck_assert_msg(json_object_size(v1) == 2, "varied keys: %s", json_dumps(v1, JSON_COMPACT));
    ck_assert_str_eq(json_string_value(json_object_get(v0, "router.decode")), "least_kv");
    ck_assert_str_eq(json_string_value(json_object_get(v1, "router.decode")), "round_robin");
    ck_assert_str_eq(json_string_value(json_object_get(v1, "saturation.drain_s")), "60.0");
    json_decref(arr);
    ck_assert_int_eq(kvt_sh("%s compare %s/a %s/b", kvt_bin(), kvt_tmp, kvt_tmp), 0);
    ck_assert_msg(strstr(kvt_out, "router.decode") && !strstr(kvt_out, "cluster.prefill.instances"),
                  "%.3000s", kvt_out);
    kvt_tmp_remove();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("results_config");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 600);
    tcase_add_loop_test(t, test_config_reproduces_summary, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(t, test_run_table_yaml_reproduces);
    tcase_add_test(t, test_changed_config_changes_summary);
    tcase_add_test(t, test_compare_shows_differing_keys);
    suite_add_tcase(s, t);
    TCase *l = tcase_create("large");
    tcase_set_timeout(l, 600);
    tcase_add_loop_test(l, test_config_reproduces_summary_large, 0,
                        (int)(sizeof large / sizeof large[0]));
    suite_add_tcase(s, l);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
