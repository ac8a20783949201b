// tests/test_stepmodels.c -- step models as a user meets them on the command line: the `table`
// model on a real trace (fallbacks counted in summary.json), `kvfleet hw check`, the large-EP
// keys refused where they cannot apply, `kvfleet run --explain-step` tracing each term to a
// table row, and the published operating points of scenarios/published/ as regression checks.
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/kvt.h"

// Runs `kvfleet ARGS` in the source tree; returns the exit code, stdout+stderr in out_buf.
#define out_buf kvt_out
static int kvf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int kvf(const char *fmt, ...) {
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return kvt_sh("{ %s %s 2>&1; }", kvt_bin(), args);
}

#define tmpdir kvt_tmp
static void setup(void) {
    kvt_tmp_make("kvf_steps");
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert(f);
    fputs(text, f);
    fclose(f);
}

static json_t *summary(const char *dir) {
    char p[256];
    snprintf(p, sizeof p, "%s/summary.json", dir);
    json_error_t e;
    json_t *s = json_load_file(p, 0, &e);
    ck_assert_msg(s, "%s: %s", p, e.text);
    return s;
}

static json_int_t steps_field(json_t *s, const char *k) {
    json_t *v = json_object_get(json_object_get(s, "steps"), k);
    ck_assert_msg(json_is_integer(v), "summary.json lacks steps.%s", k);
    return json_integer_value(v);
}

// The real Mooncake trace through the table model: on H100 a Llama-3.1-8B step has no rows for
// its bf16 GEMM shapes, so every step falls back. DeepSeek-V3 on H800 at this trace's load
// decodes a few sequences per GPU: its experts see far fewer tokens than DeepGEMM's smallest
// measured m (256 per expert), so those steps fall back too (a wide-EP instance at ~90
// sequences per GPU is covered: test_explain_step_144).
START_TEST(test_table_model_on_real_trace) {
    ck_assert_int_eq(kvf("run scenarios/quickstart.yaml --set step_model=table --set "
                         "workload.limit_requests=300 -o %s/llama --no-report -q",
                         tmpdir),
                     0);
    char d[128];
    snprintf(d, sizeof d, "%s/llama", tmpdir);
    json_t *s = summary(d);
    ck_assert_str_eq(json_string_value(json_object_get(s, "step_model")), "table");
    json_int_t steps = steps_field(s, "steps"), fb = steps_field(s, "table_fallbacks");
    ck_assert_int_gt(steps, 100);
    ck_assert_int_eq(fb, steps);
    json_decref(s);
    ck_assert_int_eq(kvf("run scenarios/quickstart.yaml --set model=deepseek-v3 --set hardware=h800 "
                         "--set step_model=table --set workload.limit_requests=200 "
                         "--set cluster.prefill.instances=1 --set cluster.prefill.gpus_per_instance=16 "
                         "--set cluster.prefill.tp=1 --set cluster.decode.instances=1 "
                         "--set cluster.decode.gpus_per_instance=32 --set cluster.decode.tp=1 "
                         "--set moe.two_batch_overlap=true --set moe.route_nodes=4 "
                         "-o %s/ds --no-report -q",
                         tmpdir),
                     0);
    snprintf(d, sizeof d, "%s/ds", tmpdir);
    s = summary(d);
    steps = steps_field(s, "steps"), fb = steps_field(s, "table_fallbacks");
    ck_assert_int_gt(steps, 100);
    ck_assert_msg(fb > 0 && fb <= steps, "fallbacks %lld of %lld steps", (long long)fb,
                  (long long)steps);
    // the resolved configuration records the keys that produced the result
    json_t *cfg = json_object_get(s, "config");
    if (cfg) {
        json_t *moe = json_object_get(cfg, "moe");
        ck_assert_msg(moe && json_is_true(json_object_get(moe, "two_batch_overlap")),
                      "config.moe.two_batch_overlap missing");
    }
    json_decref(s);
    // the roofline has no fallbacks to count
    ck_assert_int_eq(kvf("run scenarios/quickstart.yaml --set workload.limit_requests=50 -o %s/roof "
                         "--no-report -q",
                         tmpdir),
                     0);
    snprintf(d, sizeof d, "%s/roof", tmpdir);
    s = summary(d);
    ck_assert(!json_object_get(json_object_get(s, "steps"), "table_fallbacks"));
    json_decref(s);
}
END_TEST

START_TEST(test_hw_check) {
    DIR *dir;
    char p[1200];
    snprintf(p, sizeof p, "%s/models/hardware", kvt_src());
    ck_assert((dir = opendir(p)));
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dir))) {
        if (!strstr(e->d_name, ".yaml")) continue;
        ck_assert_msg(kvf("hw check models/hardware/%s", e->d_name) == 0, "%s: %s", e->d_name, out_buf);
        ck_assert(strstr(out_buf, ": ok ("));
        n++;
    }
    closedir(dir);
    ck_assert_int_ge(n, 8);
    ck_assert_int_eq(kvf("hw check models/hardware/h800.yaml"), 0);
    ck_assert_msg(strstr(out_buf, "ep_dispatch 10") && strstr(out_buf, "gemm_fp8 18"), "%s", out_buf);
    // a row above the datasheet peak, and a series that falls as m grows
    snprintf(p, sizeof p, "%s/hw.yaml", tmpdir);
    write_file(p, "name: g\nbf16_flops: 989e12\nfp8_flops: 1979e12\nhbm_bytes: 8e10\nhbm_Bps: 3.35e12\n"
                  "kernels:\n"
                  "  - {kind: grouped_fp8, groups: 4, m: 256, n: 4096, k: 7168, tflops: 932, source: \"a/b README.md @ 1234567\"}\n"
                  "  - {kind: grouped_fp8, groups: 2, m: 512, n: 4096, k: 7168, tflops: 900, source: \"a/b README.md @ 1234567\"}\n");
    ck_assert_int_eq(kvf("hw check %s", p), 2);
    ck_assert_msg(strstr(out_buf, "hw.yaml:8") && strstr(out_buf, "tflops 900"), "%s", out_buf);
    write_file(p, "name: g\nbf16_flops: 989e12\nfp8_flops: 1979e12\nhbm_bytes: 8e10\nhbm_Bps: 3.35e12\n"
                  "kernels:\n"
                  "  - {kind: gemm_fp8, m: 4096, n: 7168, k: 16384, tflops: 2000, source: \"a/b README.md @ 1234567\"}\n");
    ck_assert_int_eq(kvf("hw check %s", p), 2);
    ck_assert_msg(strstr(out_buf, "hw.yaml:7") && strstr(out_buf, "datasheet peak"), "%s", out_buf);
    write_file(p, "name: g\nbf16_flops: 989e12\nhbm_bytes: 8e10\nhbm_Bps: -3\n");
    ck_assert_int_eq(kvf("hw check %s", p), 2);
    ck_assert_msg(strstr(out_buf, "hw.yaml:4") && strstr(out_buf, "'hbm_Bps'"), "%s", out_buf);
    ck_assert_int_eq(kvf("hw check"), 2);
    ck_assert_int_eq(kvf("hw --help"), 0);
}
END_TEST

// Bad model values reach the user as exit 2 naming file, line and key.
START_TEST(test_bad_model_file_exit_2) {
    char p[256];
    snprintf(p, sizeof p, "%s/m.yaml", tmpdir);
    write_file(p, "name: m\nlayers: 4\nhidden: 64\nheads: 4\nvocab: 100\nffn: 128\nattention: dsa\n"
                  "kv_lora_rank: 16\nindex_heads: 4\nindex_head_dim: 8\nindex_topk: 0\n");
    ck_assert_int_eq(kvf("run scenarios/quickstart.yaml --set model=%s --explain-step", p), 2);
    ck_assert_msg(strstr(out_buf, "m.yaml:11") && strstr(out_buf, "'index_topk'"), "%s", out_buf);
}
END_TEST

// moe.route_nodes and moe.two_batch_overlap apply to MoE models spread over GPUs only.
START_TEST(test_large_ep_keys_refused) {
    ck_assert_int_eq(kvf("run scenarios/quickstart.yaml --set moe.two_batch_overlap=true -q"), 2);
    ck_assert_msg(strstr(out_buf, "moe.two_batch_overlap") && strstr(out_buf, "MoE models only"),
                  "%s", out_buf);
    ck_assert_int_eq(kvf("run scenarios/quickstart.yaml --set model=deepseek-v3 --set hardware=h800 "
                         "--set cluster.decode.gpus_per_instance=8 --set moe.route_nodes=4 -q"),
                     2);
    ck_assert_msg(strstr(out_buf, "moe.route_nodes") && strstr(out_buf, "more than one scale-up"),
                  "%s", out_buf);
    ck_assert_int_eq(kvf("run scenarios/quickstart.yaml --set model=deepseek-v3 --set hardware=h800 "
                         "--set cluster.decode.gpus_per_instance=32 --set moe.route_nodes=8 -q"),
                     2);
    ck_assert_msg(strstr(out_buf, "does not limit routing"), "%s", out_buf);
    ck_assert_int_eq(kvf("run scenarios/quickstart.yaml --set step_model=tables -q"), 2);
}
END_TEST

// The 144-GPU EP decode instance: each term names its table row and source.
START_TEST(test_explain_step_144) {
    ck_assert_int_eq(kvf("run scenarios/published/deepseek-v3-h800-decode.yaml --explain-step "
                         "--step-seqs 90 --step-context 5000"),
                     0);
    const char *want[] = {"144 x h800", "90.0 per GPU", "context 5000", "FlashMLA", "DeepGEMM",
                          "DeepEP", "h800.yaml:", "EP dispatch", "EP combine", "overlap",
                          "every applicable term answered by a kernel table", "roofline:"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        ck_assert_msg(strstr(out_buf, want[i]), "explain lacks '%s':\n%s", want[i], out_buf);
    ck_assert_int_eq(kvf("run scenarios/published/deepseek-v3-h800-decode.yaml --explain-step "
                         "--step-seqs -3"),
                     2);
    ck_assert_int_eq(kvf("run scenarios/published/deepseek-v3-h800-decode.yaml --explain-step "
                         "--step-phase sideways"),
                     2);
}
END_TEST

// Reads `# check: k=v ...` of a published scenario into a small map.
static double check_get(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(line, pat);
    return p ? atof(p + strlen(pat)) : -1;
}

// Each published operating point: the step model's prediction (inputs stated in the file) is
// the one recorded in its `# check:` line (table= and roofline=) and in scenarios/README.md.
// A change of either model changes these figures: the test fails until the file, the README
// table and the errors reported there are brought up to date.
START_TEST(test_published_points) {
    char dpath[1200];
    snprintf(dpath, sizeof dpath, "%s/scenarios/published", kvt_src());
    DIR *dir = opendir(dpath);
    ck_assert(dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dir))) {
        if (!strstr(e->d_name, ".yaml")) continue;
        char path[1600], line[1024] = "";
        snprintf(path, sizeof path, "%s/%s", dpath, e->d_name);
        FILE *f = fopen(path, "r");
        ck_assert(f);
        char buf[1024];
        while (fgets(buf, sizeof buf, f))
            if (!strncmp(buf, "# check:", 8)) snprintf(line, sizeof line, " %s", buf + 8);
        fclose(f);
        ck_assert_msg(line[0], "%s: no '# check:' line", e->d_name);
        ck_assert_msg(strstr(line, "phase=") && check_get(line, "published") > 0 &&
                          check_get(line, "table") > 0 && check_get(line, "roofline") > 0,
                      "%s: check line incomplete: %s", e->d_name, line);
        bool decode = strstr(line, "phase=decode") != NULL;
        int rc;
        if (decode)
            rc = kvf("run scenarios/published/%s --explain-step --step-seqs %g --step-context %g",
                     e->d_name, check_get(line, "seqs_per_gpu"), check_get(line, "context"));
        else if (check_get(line, "context") > 0)
            rc = kvf("run scenarios/published/%s --explain-step --step-phase prefill --step-prompt %g "
                     "--step-chunks %g --step-context %g",
                     e->d_name, check_get(line, "prompt"), check_get(line, "chunks"),
                     check_get(line, "context"));
        else
            rc = kvf("run scenarios/published/%s --explain-step --step-phase prefill --step-prompt %g "
                     "--step-chunks %g",
                     e->d_name, check_get(line, "prompt"), check_get(line, "chunks"));
        ck_assert_msg(rc == 0, "%s: %s", e->d_name, out_buf);
        const char *last = strstr(out_buf, "per GPU: table ");
        ck_assert_msg(last, "%s: %s", e->d_name, out_buf);
        double t = atof(last + strlen("per GPU: table "));
        const char *r = strstr(last, "roofline ");
        ck_assert(r);
        double rf = atof(r + strlen("roofline "));
        double want_t = check_get(line, "table"), want_r = check_get(line, "roofline");
        ck_assert_msg(fabs(t - want_t) <= 0.005 * want_t && fabs(rf - want_r) <= 0.005 * want_r,
                      "%s: predicted table %.0f roofline %.0f, recorded %.0f / %.0f", e->d_name, t,
                      rf, want_t, want_r);
        // the scenario itself is a valid scenario
        ck_assert_msg(kvf("run scenarios/published/%s --set workload.generate.duration_s=2 -o %s/p --force "
                          "--no-report -q",
                          e->d_name, tmpdir) == 0,
                      "%s does not run: %s", e->d_name, out_buf);
        n++;
    }
    closedir(dir);
    ck_assert_int_ge(n, 5);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("stepmodels");
    TCase *t = tcase_create("stepmodels");
    tcase_add_checked_fixture(t, setup, kvt_tmp_remove);
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_table_model_on_real_trace);
    tcase_add_test(t, test_hw_check);
    tcase_add_test(t, test_bad_model_file_exit_2);
    tcase_add_test(t, test_large_ep_keys_refused);
    tcase_add_test(t, test_explain_step_144);
    tcase_add_test(t, test_published_points);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
