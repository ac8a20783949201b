// tests/test_report_browser.c -- renders report.html in headless Chromium and checks that the
// browser sees the charts (inline SVG) and the tables, and that a quickstart run's page opens
// with its answer: at 1400x900 the answer block (#answer) lies wholly inside the window
// (measured by the browser: a copy of the page with a probe script that writes the block's
// box into the DOM), and every figure in it equals summary.json, formatted in its unit.
// Exits 77 (skipped) when no Chromium is installed. KVF_TEST_KEEP=1 keeps the directories
// with the pages and their screenshots; KVF_SCREENSHOT_DIR=D copies the 1400x900 screenshot
// to D/report.png.
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
#include "rpt_util.h"

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
        rpt_request_row r = {.id = (uint64_t)i,
                             .cls = cls[i % 2],
                             .session = (uint64_t)i / 3,
                             .arrival_s = 3.6 * i / 2.0,
                             .input_tokens = inp,
                             .cached_tokens = hit,
                             .output_tokens = 1 + kvf_rng_below(&rng, 400),
                             .vision_instance = -1,
                             .prefill_instance = i % 4,
                             .decode_instance = i % 4,
                             .ttft_s = ttft,
                             .tpot_s = 0.015 + kvf_rng_exp(&rng, 0.01),
                             .e2e_s = ttft + 5,
                             .queue_s = 0,
                             .status = "completed"};
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
    kvt_tmp_register(tmpdir);
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
    ck_assert(strstr(dom, "id=\"answer\"") != NULL);
    ck_assert(strstr(dom, "id=\"all-table\"") != NULL);
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

// The probe: the boxes of the answer block and the first chart, and the window, as the
// browser laid them out, written into <body> attributes for --dump-dom.
static const char PROBE[] =
    "<script>(function(){var b=document.body;function box(q){var e=document.querySelector(q);"
    "if(!e)return 'none';var r=e.getBoundingClientRect();return r.top+','+r.bottom+','+r.left+"
    "','+r.right;}b.setAttribute('data-probe-viewport',innerWidth+'x'+innerHeight);"
    "b.setAttribute('data-probe-answer',box('#answer'));"
    "b.setAttribute('data-probe-chart',box('figure'));})();</script>";

// Renders a copy of page with the probe at w x h; returns the DOM (caller frees).
static char *probe_dom(const char *page, const char *dir, unsigned w, unsigned h) {
    char *html = kvt_slurp(page);
    char *end = strstr(html, "</body>");
    ck_assert_ptr_nonnull(end);
    char probe[600], out[600], args[128];
    snprintf(probe, sizeof probe, "%s/probe.html", dir);
    FILE *f = fopen(probe, "w");
    ck_assert_ptr_nonnull(f);
    fwrite(html, 1, (size_t)(end - html), f);
    fputs(PROBE, f);
    fputs(end, f);
    fclose(f);
    free(html);
    snprintf(out, sizeof out, "%s/probe_dom.html", dir);
    snprintf(args, sizeof args, "--window-size=%u,%u --dump-dom", w, h);
    int rc = kvt_browser_run(probe, args, out, dir);
    ck_assert_msg(rc == 0, "probe exited %d (see %s/browser.log)", rc, dir);
    return kvt_slurp(out);
}

// Every data-key figure inside the answer block: value equal to summary.json, text formatted
// in the key's unit and, read back, within 3 significant digits of the value. Returns how
// many.
static int check_answer_figures(const char *dom, json_t *sum) {
    const char *a = strstr(dom, "id=\"answer\"");
    ck_assert_msg(a, "no answer block");
    const char *end = strstr(a, "</section>");
    ck_assert_ptr_nonnull(end);
    int n = 0;
    for (const char *p = a; (p = strstr(p, "data-key=\"")) && p < end; n++) {
        p += 10;
        const char *q = strchr(p, '"');
        char key[160], want[64], text[96];
        snprintf(key, sizeof key, "%.*s", (int)(q - p), p);
        const char *dv = strstr(q, "data-value=\"");
        ck_assert_msg(dv && dv < strchr(q, '>'), "%s: no data-value", key);
        double page = strtod(dv + 12, NULL);
        double x = kvt_num(sum, key);
        ck_assert_msg(page == x, "%s: page %.17g, summary.json %.17g", key, page, x);
        const char *t = strchr(dv, '>') + 1;
        snprintf(text, sizeof text, "%.*s", (int)(strchr(t, '<') - t), t);
        rpt_fmt_keyed(key, x, want, sizeof want);
        ck_assert_msg(!strcmp(text, want), "%s: shown '%s', want '%s'", key, text, want);
        double back = kvt_read_back(key, text);
        ck_assert_msg(fabs(back - x) <= 0.0051 * fabs(x) + 1e-12,
                      "%s: shown '%s' reads %.6g, summary.json %.6g", key, text, back, x);
        ck_assert_msg(!strstr(text, "e+") && !strstr(text, "e-"), "%s: '%s'", key, text);
    }
    return n;
}

// A quickstart run's report: the answer is the first thing, wholly visible at 1400x900.
START_TEST(test_report_answer_above_the_fold) {
    kvt_tmp_make("kvf_report_fold");
    int rc = kvt_sh("%s run scenarios/quickstart.yaml --set workload.limit_requests=400 -q -o %s/r",
                    kvt_bin(), kvt_tmp);
    ck_assert_msg(rc == 0, "run exited %d: %s", rc, kvt_err);
    char dir[200], page[300], path[300];
    snprintf(dir, sizeof dir, "%s/r", kvt_tmp);
    snprintf(page, sizeof page, "%s/report.html", dir);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    json_error_t je;
    json_t *sum = json_load_file(path, 0, &je);
    ck_assert_msg(sum, "%s: %s", path, je.text);
    char *dom = probe_dom(page, dir, 1400, 900);
    char vp[64], box[128];
    kvt_dom_attr(dom, "data-probe-viewport", vp, sizeof vp);
    // a 1400x900 window: headless Chromium lays the page out in what is left of it once its
    // frame is taken off (757 px high), stricter than the 900 px of a screenshot
    int vw = 0, vh = 0;
    ck_assert_msg(sscanf(vp, "%dx%d", &vw, &vh) == 2 && vw == 1400 && vh >= 700 && vh <= 900,
                  "viewport %s", vp);
    kvt_dom_attr(dom, "data-probe-answer", box, sizeof box);
    double top, bottom, left, right;
    ck_assert_msg(sscanf(box, "%lf,%lf,%lf,%lf", &top, &bottom, &left, &right) == 4,
                  "answer box '%s'", box);
    ck_assert_msg(top >= 0 && bottom <= vh && left >= 0 && right <= vw,
                  "answer block at %.0f..%.0f px (viewport %d px high)", top, bottom, vh);
    kvt_dom_attr(dom, "data-probe-chart", box, sizeof box);
    double ctop = 0;
    sscanf(box, "%lf", &ctop);
    fprintf(stderr, "report.html at %s: answer %.0f..%.0f px, first chart from %.0f px\n", vp, top,
            bottom, ctop);
    ck_assert_msg(ctop > bottom && ctop < vh, "first chart at %.0f px", ctop);
    // the figures: cost per Mtok, margin, attainment, GPUs, the line below
    int n = check_answer_figures(dom, sum);
    ck_assert_msg(n >= 8, "%d figures in the answer", n);
    static const char *const must[] = {"economics.cost_per_mtok_usd.input", "economics.margin",
                                       "slo.attainment", "gpus.prefill", "gpus.decode"};
    const char *a = strstr(dom, "id=\"answer\"");
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
        char pat[128];
        snprintf(pat, sizeof pat, "data-key=\"%s\"", must[i]);
        ck_assert_msg(strstr(a, pat), "the answer lacks %s", must[i]);
    }
    const char *state =
        json_string_value(json_object_get(json_object_get(sum, "saturation"), "state"));
    char want[96];
    snprintf(want, sizeof want, "id=\"hl-saturation\" data-state=\"%s\"", state);
    ck_assert_msg(strstr(dom, want), "no verdict %s", state);
    const char *reason =
        json_string_value(json_object_get(json_object_get(sum, "saturation"), "reason"));
    ck_assert_msg(reason && strstr(a, reason), "the verdict lacks its reason");
    // the page names the final directory, and the full figures table comes last
    ck_assert(strstr(dom, "data-dir=\"") && !strstr(dom, ".tmp."));
    ck_assert(strstr(dom, "id=\"all-table\"") > strstr(dom, "id=\"charts\""));
    free(dom);
    char png[300];
    snprintf(png, sizeof png, "%s/report.png", kvt_tmp);
    kvt_browser_screenshot(page, png, 1400, 900, 30000, kvt_tmp);
    const char *keep = getenv("KVF_SCREENSHOT_DIR");
    if (keep) ck_assert_int_eq(kvt_sh("cp %s %s/report.png", png, keep), 0);
    json_decref(sum);
    if (getenv("KVF_TEST_KEEP"))
        fprintf(stderr, "kept %s (r/report.html, report.png)\n", kvt_tmp);
    else
        kvt_tmp_remove();
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
    tcase_add_test(t, test_report_answer_above_the_fold);
    suite_add_tcase(s, t);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
