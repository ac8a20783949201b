// tests/test_report_browser.c -- renders report.html in headless Chromium and checks that the
// browser sees the charts (inline SVG) and the tables. Exits 77 (skipped) when no Chromium is
// installed. KVF_TEST_KEEP=1 keeps the directory with the page and its screenshot.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "rpt.h"

static char tmpdir[256];
static char browser[64];

static bool on_path(const char *prog) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

// A small results directory written through the reports API.
static void fake_run(const char *dir) {
    kvf_err err = {0};
    char path[600];
    snprintf(path, sizeof path, "%s/results.db", dir);
    rpt_db *db;
    ck_assert_msg(rpt_db_create(&db, path, &err) == KVF_OK, "%s", err.msg);
    rpt_db_run_set(db, "scenario", "browser-check", &err);
    rpt_db_run_set(db, "router.prefill", "cache_aware", &err);
    kvf_rng rng;
    kvf_rng_init(&rng, 3, 9);
    rpt_econ_config c;
    rpt_econ_config_default(&c);
    rpt_econ_input in;
    rpt_econ_input_init(&in);
    const int n = 2000;
    static const char *const cls[] = {"chatbot", "agent"};
    for (int i = 0; i < n; i++) {
        uint32_t inp = 500 + kvf_rng_below(&rng, 4000), hit = kvf_rng_below(&rng, inp);
        double ttft = 0.05 + kvf_rng_exp(&rng, 0.4);
        rpt_request_row r = {.id = (uint64_t)i, .cls = cls[i % 2], .session = (uint64_t)i / 3,
                             .arrival_s = 3.6 * i / 2.0, .input_tokens = inp,
                             .cached_tokens = hit, .output_tokens = 1 + kvf_rng_below(&rng, 400),
                             .vision_instance = -1, .prefill_instance = i % 4,
                             .decode_instance = i % 4, .ttft_s = ttft,
                             .tpot_s = 0.015 + kvf_rng_exp(&rng, 0.01), .e2e_s = ttft + 5,
                             .queue_s = 0, .status = "completed"};
        ck_assert_int_eq(rpt_db_request(db, &r, &err), KVF_OK);
        rpt_econ_input_add(&in, &c, r.cls, r.arrival_s, hit, inp - hit, r.output_tokens);
    }
    for (double t = 0; t < 3600; t += 10) {
        double w = 1 + 0.4 * sin(t / 300);
        rpt_db_timeseries(db, t, "cluster", -1, "input_tok_s", 9000 * w, &err);
        rpt_db_timeseries(db, t, "cluster", -1, "output_tok_s", 1500 * w, &err);
        rpt_db_timeseries(db, t, "prefill", -1, "queue_len", 4 * w, &err);
        rpt_db_timeseries(db, t, "cluster", -1, "hit_rate", 0.5 + 0.1 * w, &err);
        rpt_db_timeseries(db, t, "cluster", -1, "hit_rate_ssd", 0.2 * w, &err);
        rpt_db_timeseries(db, t, "kv", -1, "kv_store_bytes", 2e8 * t, &err);
        rpt_db_timeseries(db, t, "prefill", -1, "utilization", 0.6 * w, &err);
        rpt_db_timeseries(db, t, "decode", -1, "utilization", 0.5 * w, &err);
    }
    ck_assert_int_eq(rpt_db_close(db, &err), KVF_OK);
    in.simulated_s = 3600;
    in.gpu_hours[RPT_POOL_PREFILL] = 4;
    in.gpu_hours[RPT_POOL_DECODE] = 4;
    in.gpus[RPT_POOL_PREFILL] = 4;
    in.gpus[RPT_POOL_DECODE] = 4;
    in.utilization[RPT_POOL_PREFILL] = 0.6;
    in.utilization[RPT_POOL_DECODE] = 0.5;
    in.ssd_tb = 2;
    rpt_econ_result er;
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &er, &err), KVF_OK);
    json_t *s = json_pack("{s:s, s:i, s:{s:i, s:i, s:i}, s:{s:f, s:f, s:f, s:f}, s:{s:f}}",
                          "scenario", "browser-check", "seed", 1, "requests", "arrived", n,
                          "completed", n, "rejected", 0, "ttft_ms", "mean", 450.5, "p50", 330.25,
                          "p90", 980.125, "p99", 1900.0625, "cache", "hit_rate", er.hit_rate);
    ck_assert_ptr_nonnull(s);
    json_object_set_new(s, "economics", rpt_econ_to_json(&c, &er));
    snprintf(path, sizeof path, "%s/summary.json", dir);
    ck_assert_int_eq(json_dump_file(s, path, JSON_INDENT(2) | JSON_REAL_PRECISION(17)), 0);
    json_decref(s);
}

static int run_browser(const char *args, const char *out) {
    char page[400];
    snprintf(page, sizeof page, "%s/report.html", tmpdir);
    return kvt_browser_run(page, args, out, tmpdir);
}

START_TEST(test_report_renders_in_chromium) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kvf_test_browser_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    fake_run(tmpdir);
    kvf_err err = {0};
    ck_assert_msg(rpt_report_write(tmpdir, true, false, &err) == KVF_OK, "%s", err.msg);
    bool gp = on_path("gnuplot") && !getenv("KVF_NO_GNUPLOT");

    // the DOM the browser built from the page
    char dom_path[600];
    snprintf(dom_path, sizeof dom_path, "%s/dom.html", tmpdir);
    int rc = run_browser("--dump-dom", dom_path);
    ck_assert_msg(rc == 0, "%s --dump-dom exited %d (see %s/browser.log)", browser, rc, tmpdir);
    char *dom = kvt_slurp(dom_path);
    ck_assert_msg(strlen(dom) > 1000, "DOM of %zu bytes", strlen(dom));
    ck_assert(strstr(dom, "Headline figures") != NULL);
    ck_assert(strstr(dom, "id=\"headline-table\"") != NULL);
    ck_assert(strstr(dom, "id=\"economics-table\"") != NULL);
    ck_assert(strstr(dom, "id=\"sens-hit-table\"") != NULL);
    ck_assert_msg(kvt_count(dom, "<table") >= 6, "%d tables", kvt_count(dom, "<table"));
    ck_assert(strstr(dom, "data-key=\"ttft_ms.p90\"") != NULL);
    int figures = kvt_count(dom, "<figure");
    ck_assert_msg(figures >= 10, "%d charts", figures);
    if (gp) {
        int svgs = kvt_count(dom, "<svg");
        ck_assert_msg(svgs == figures, "%d svg elements for %d charts", svgs, figures);
        ck_assert(kvt_count(dom, "<path") > 10 * figures);   // drawn lines, not empty frames
    } else {
        ck_assert(strstr(dom, "Charts not drawn") != NULL);
    }
    free(dom);

    // a screenshot: a PNG of the window size
    char png[600], page[600];
    snprintf(png, sizeof png, "%s/screenshot.png", tmpdir);
    snprintf(page, sizeof page, "%s/report.html", tmpdir);
    kvt_browser_screenshot(page, png, 1280, 8000, 50000, tmpdir);
    if (getenv("KVF_TEST_KEEP")) {
        fprintf(stderr, "kept %s (report.html, screenshot.png)\n", tmpdir);
    } else {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        ck_assert_int_eq(system(cmd), 0);
    }
}
END_TEST

int main(void) {
    const char *b = kvt_browser();
    if (!b) {
        fprintf(stderr, "test_report_browser: no chromium on PATH; skipped\n");
        return 77;
    }
    snprintf(browser, sizeof browser, "%s", b);
    Suite *s = suite_create("report_browser");
    TCase *t = tcase_create("chromium");
    tcase_set_timeout(t, 400);
    tcase_add_test(t, test_report_renders_in_chromium);
    suite_add_tcase(s, t);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
