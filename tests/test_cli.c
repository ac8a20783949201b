// tests/test_cli.c -- the kvfleet command as a user meets it: exit codes and messages for bad
// input (each names file, line and field), and a run whose summary.json carries every key of
// the contract (design.md §5).
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/kvt.h"

static const char *bin(void) {
    const char *b = getenv("KVF_BIN");
    return b ? b : "build/kvfleet";
}

static const char *src(void) {
    const char *d = getenv("KVF_SOURCE_DIR");
    return d ? d : ".";
}

static char out_buf[65536];

// Runs `kvfleet ARGS` (a shell fragment) and returns its exit code; stdout+stderr in out_buf.
static int kvf(const char *fmt, ...) {
    char args[4096], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd %s && %s %s 2>&1", src(), bin(), args);
    FILE *p = popen(cmd, "r");
    ck_assert(p);
    size_t n = fread(out_buf, 1, sizeof out_buf - 1, p);
    out_buf[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert(f);
    fputs(text, f);
    fclose(f);
}

static char tmpdir[64];

static void setup(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kvf_cli_XXXXXX");
    ck_assert(mkdtemp(tmpdir));
    kvt_tmp_register(tmpdir);
}

#define EXPECT_MSG(...)                                                                            \
    do {                                                                                           \
        const char *want_[] = {__VA_ARGS__};                                                       \
        for (size_t i_ = 0; i_ < sizeof want_ / sizeof want_[0]; i_++)                             \
            ck_assert_msg(strstr(out_buf, want_[i_]), "message lacks '%s':\n%s", want_[i_],        \
                          out_buf);                                                                \
    } while (0)

START_TEST(test_cli_missing_scenario) {
    ck_assert_int_eq(kvf("run %s/nope.yaml", tmpdir), 2);
    EXPECT_MSG("nope.yaml");
}
END_TEST

START_TEST(test_cli_malformed_yaml) {
    char p[128];
    snprintf(p, sizeof p, "%s/bad.yaml", tmpdir);
    write_file(p, "name: x\ncluster:\n  prefill: {instances: 2\n  decode: 3\n");
    ck_assert_int_eq(kvf("run %s", p), 2);
    EXPECT_MSG("bad.yaml:");
}
END_TEST

START_TEST(test_cli_unknown_key) {
    char p[128];
    snprintf(p, sizeof p, "%s/unk.yaml", tmpdir);
    write_file(p, "name: x\ncluster:\n  prefill:\n    instancez: 2\n");
    ck_assert_int_eq(kvf("run %s", p), 2);
    EXPECT_MSG("unk.yaml:4", "instancez");
}
END_TEST

START_TEST(test_cli_negative_instances) {
    char p[128];
    snprintf(p, sizeof p, "%s/neg.yaml", tmpdir);
    write_file(p, "name: x\n\ncluster:\n  decode: {instances: -3}\n");
    ck_assert_int_eq(kvf("run %s", p), 2);
    EXPECT_MSG("neg.yaml:4", "cluster.decode.instances");
}
END_TEST

START_TEST(test_cli_missing_model) {
    ck_assert_int_eq(kvf("run scenarios/quickstart.yaml --set model=no-such-model -o %s/o", tmpdir),
                     2);
    EXPECT_MSG("no-such-model");
}
END_TEST

START_TEST(test_cli_bad_set) {
    ck_assert_int_eq(kvf("run scenarios/quickstart.yaml --set cluster.prefil.instances=3"), 2);
    EXPECT_MSG("cluster.prefil");
    ck_assert_int_eq(kvf("run scenarios/quickstart.yaml --set cluster.prefill.instances=lots"), 2);
    EXPECT_MSG("cluster.prefill.instances");
}
END_TEST

START_TEST(test_cli_malformed_trace_line) {
    char t[128], good[128];
    snprintf(t, sizeof t, "%s/trace.jsonl", tmpdir);
    snprintf(good, sizeof good, "%s/good.jsonl", tmpdir);
    write_file(
        good,
        "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 5, \"hash_ids\": [1]}\n");
    write_file(
        t, "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 5, \"hash_ids\": [1]}\n"
           "{\"timestamp\": 10, \"input_length\": 100, \"output_length\": 5, \"hash_ids\": [1]}\n"
           "{\"timestamp\": 20, \"input_length\": -4, \"output_length\": 5, \"hash_ids\": [2]}\n");
    ck_assert_int_eq(
        kvf("run scenarios/quickstart.yaml --trace %s -o %s/o --no-report", good, tmpdir), 0);
    char sum[160];
    snprintf(sum, sizeof sum, "%s/o/summary.json", tmpdir);
    char *before = kvt_slurp(sum);
    ck_assert_int_eq(
        kvf("run scenarios/quickstart.yaml --trace %s -o %s/o --no-report --force", t, tmpdir), 2);
    EXPECT_MSG("trace.jsonl:3", "input_length");
    // a failed run leaves the earlier result as it was: no mix of old and new files
    char *after = kvt_slurp(sum);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    ck_assert_int_eq(
        kvf("run scenarios/quickstart.yaml --trace %s -o %s/o2 --no-report", t, tmpdir), 2);
    char o2[160];
    snprintf(o2, sizeof o2, "%s/o2", tmpdir);
    ck_assert_msg(access(o2, F_OK) != 0, "a failed run left %s", o2);
}
END_TEST

START_TEST(test_cli_usage_errors) {
    ck_assert_int_eq(kvf("frobnicate"), 2);
    ck_assert_int_eq(kvf("run"), 2);
    ck_assert_int_eq(kvf("run scenarios/quickstart.yaml --bogus"), 2);
}
END_TEST

START_TEST(test_cli_run_writes_contract_keys) {
    ck_assert_int_eq(
        kvf("run scenarios/quickstart.yaml --set workload.limit_requests=400 -o %s/run "
            "--no-report --json",
            tmpdir),
        0);
    char p[160];
    snprintf(p, sizeof p, "%s/run/summary.json", tmpdir);
    json_error_t e;
    json_t *s = json_load_file(p, 0, &e);
    ck_assert_msg(s, "summary.json unreadable: %s", e.text);
    const char *keys[] = {"scenario",
                          "seed",
                          "kvfleet_version",
                          "step_model",
                          "requests.arrived",
                          "requests.completed",
                          "requests.rejected",
                          "ttft_ms.mean",
                          "ttft_ms.p50",
                          "ttft_ms.p90",
                          "ttft_ms.p99",
                          "tpot_ms.p99",
                          "itl_ms.p50",
                          "e2e_ms.p90",
                          "gen_tok_s_per_request.mean",
                          "gen_tok_s_per_request.p50",
                          "throughput.input_tok_s",
                          "throughput.output_tok_s",
                          "throughput.prefill_input_tok_s_per_gpu",
                          "throughput.decode_output_tok_s_per_gpu",
                          "cache.hit_rate",
                          "cache.hit_tokens",
                          "cache.miss_tokens",
                          "cache.by_tier.hbm",
                          "cache.by_tier.dram",
                          "cache.by_tier.ssd",
                          "cache.stored_bytes_peak",
                          "gpus.vision",
                          "gpus.prefill",
                          "gpus.decode",
                          "gpu_hours",
                          "utilization.prefill",
                          "utilization.decode",
                          "slo.ttft_p90_ms",
                          "slo.tpot_p90_ms",
                          "slo.attainment",
                          "slo.goodput_req_s",
                          "economics.cost_usd",
                          "economics.revenue_usd",
                          "economics.margin",
                          "economics.cost_per_gpu_hour_usd",
                          "economics.cost_per_mtok_usd.input",
                          "economics.cost_per_mtok_usd.output",
                          "economics.payback_days",
                          "sim.events",
                          "sim.wall_s",
                          "sim.events_per_s",
                          "sim.simulated_s"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char k[128];
        snprintf(k, sizeof k, "%s", keys[i]);
        json_t *o = s;
        for (char *tok = strtok(k, "."); tok; tok = strtok(NULL, "."))
            o = json_object_get(o, tok);
        ck_assert_msg(o != NULL, "summary.json lacks %s", keys[i]);
    }
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(s, "requests"), "arrived")),
                     400);
    json_decref(s);
    snprintf(p, sizeof p, "%s/run/results.db", tmpdir);
    ck_assert(access(p, R_OK) == 0);
}
END_TEST

START_TEST(test_cli_interrupt_keeps_results) {
    // a long run stopped by SIGINT exits 1 and leaves a readable database marked interrupted
    char cmd[2048];
    snprintf(
        cmd, sizeof cmd,
        "cd %s && (%s run scenarios/quickstart.yaml --set 'workload.generate={profile: chatbot, "
        "rate_rps: 20, duration_s: 3600000}' -o %s/intr --no-report -q >/dev/null 2>&1 & p=$!; "
        // interrupted once its results database exists (the run is under way), not after
        // a guessed time; at most 60 s
        "i=0; until ls %s/intr.tmp.*/results.db >/dev/null 2>&1; do i=$((i+1)); "
        "if [ $i -ge 600 ]; then echo never-started; break; fi; sleep 0.1; done; "
        "kill -INT $p; wait $p; echo rc=$?)",
        src(), bin(), tmpdir, tmpdir);
    FILE *p = popen(cmd, "r");
    ck_assert(p);
    size_t n = fread(out_buf, 1, sizeof out_buf - 1, p);
    out_buf[n] = 0;
    pclose(p);
    ck_assert_msg(!strstr(out_buf, "never-started"), "no intr.tmp.*/results.db in 60 s: %s",
                  out_buf);
    ck_assert_msg(strstr(out_buf, "rc=1\n"), "interrupted run: %s", out_buf);
    snprintf(cmd, sizeof cmd,
             "sqlite3 %s/intr/results.db \"SELECT value FROM run WHERE key='status'\"", tmpdir);
    p = popen(cmd, "r");
    ck_assert(p);
    n = fread(out_buf, 1, sizeof out_buf - 1, p);
    out_buf[n] = 0;
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_msg(!strcmp(out_buf, "interrupted\n"), "run.status = '%s'", out_buf);
}
END_TEST

// The summary lines say what the run was: one mixed pool is "colocated N", the simulated span
// is in words (rpt_fmt_duration), and a sampled run states R and what it kept.
START_TEST(test_cli_headline_colocated_sampled) {
    int rc = kvf("run scenarios/quickstart.yaml --set workload.limit_requests=200 "
                 "--set cluster.mode=colocated --no-report -o %s/colo",
                 tmpdir);
    ck_assert_msg(rc == 0, "colocated run: %d\n%s", rc, out_buf);
    EXPECT_MSG("GPUs         colocated 6;", "utilisation colocated ", " simulated\n");
    ck_assert_msg(!strstr(out_buf, "decode 0") && !strstr(out_buf, "simulated s\n"), "%s", out_buf);
    rc = kvf("run scenarios/sampling-mooncake.yaml --set workload.sample_rate=0.1 "
             "--set workload.limit_requests=3000 --no-report -o %s/smp",
             tmpdir);
    ck_assert_msg(rc == 0, "sampled run: %d\n%s", rc, out_buf);
    EXPECT_MSG("  sampled      R = 0.1: ", "requests kept (",
               "(instances prefill 40 -> 4, decode 20 -> 2)", "summary.json sampling");
    rc = kvf("run scenarios/quickstart.yaml --set workload.limit_requests=200 --no-report "
             "-o %s/plain",
             tmpdir);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(!strstr(out_buf, "  sampled "), "an unsampled run says sampled:\n%s", out_buf);
}
END_TEST

// --trace with a file whose content is another format than the scenario's workload.format
// (an Azure CSV on a Mooncake scenario, Mooncake lines on a sessions scenario) is read as what
// it is, and the summary's trace notes and the summary lines say so; a file of no known format
// still fails naming the line.
START_TEST(test_cli_trace_format_from_content) {
    int rc = kvf("run scenarios/quickstart.yaml --trace traces/data/azure2023_conv.csv "
                 "--set workload.limit_requests=100 --no-report -o %s/az",
                 tmpdir);
    ck_assert_msg(rc == 0, "azure trace on a mooncake scenario: %d\n%s", rc, out_buf);
    EXPECT_MSG("note         workload.format mooncake does not fit the file, whose content is "
               "azure: read as azure");
    char p[256];
    snprintf(p, sizeof p, "%s/az/summary.json", tmpdir);
    json_error_t je;
    json_t *s = json_load_file(p, 0, &je);
    ck_assert_msg(s, "%s: %s", p, je.text);
    json_t *tr = json_object_get(s, "trace");
    ck_assert_str_eq(json_string_value(json_object_get(tr, "format")), "azure");
    ck_assert(strstr(json_string_value(json_object_get(tr, "notes")), "read as azure"));
    json_decref(s);
    // within JSON lines: a Mooncake file given to a sessions scenario (no "requests" key)
    rc = kvf("run scenarios/sampling-agentic.yaml --trace traces/data/mooncake_conversation.jsonl "
             "--set workload.limit_requests=50 --no-report -o %s/mc",
             tmpdir);
    ck_assert_msg(rc == 0, "mooncake trace on a sessions scenario: %d\n%s", rc, out_buf);
    EXPECT_MSG("workload.format sessions does not fit the file, whose content is mooncake");
    snprintf(p, sizeof p, "%s/junk.csv", tmpdir);
    write_file(p, "when,what\n1,2\n");
    rc = kvf("run scenarios/quickstart.yaml --trace %s --no-report -o %s/junk", p, tmpdir);
    ck_assert_int_eq(rc, 2);
    EXPECT_MSG("junk.csv:1:");
}
END_TEST

// engine fit warns when its efficiency factors fit the profile poorly (rms error above 20 %:
// the shipped CPU profiles are), and still writes the fit; a calibrated run whose relative
// profile is missing names the path looked for and the rule that resolved it.
START_TEST(test_cli_fit_warning_and_profile_path) {
    int rc = kvf("engine fit models/profiles/cpu-tiny-dense.csv -o %s/dense.fit", tmpdir);
    ck_assert_msg(rc == 0, "engine fit: %d\n%s", rc, out_buf);
    EXPECT_MSG("error rms ", "warning: error rms ", "fit this profile poorly");
    char p[256];
    snprintf(p, sizeof p, "%s/dense.fit", tmpdir);
    ck_assert_int_eq(access(p, R_OK), 0);
    rc = kvf("run scenarios/quickstart.yaml --set step_model=calibrated --set profile=no-such.csv "
             "--no-report -o %s/prof",
             tmpdir);
    ck_assert_int_eq(rc, 2);
    EXPECT_MSG("no-such.csv", "resolves against the scenario's folder");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("cli");
    TCase *t = tcase_create("cli");
    tcase_add_checked_fixture(t, setup, NULL);
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_cli_missing_scenario);
    tcase_add_test(t, test_cli_malformed_yaml);
    tcase_add_test(t, test_cli_unknown_key);
    tcase_add_test(t, test_cli_negative_instances);
    tcase_add_test(t, test_cli_missing_model);
    tcase_add_test(t, test_cli_bad_set);
    tcase_add_test(t, test_cli_malformed_trace_line);
    tcase_add_test(t, test_cli_usage_errors);
    tcase_add_test(t, test_cli_run_writes_contract_keys);
    tcase_add_test(t, test_cli_interrupt_keeps_results);
    tcase_add_test(t, test_cli_headline_colocated_sampled);
    tcase_add_test(t, test_cli_trace_format_from_content);
    tcase_add_test(t, test_cli_fit_warning_and_profile_path);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
