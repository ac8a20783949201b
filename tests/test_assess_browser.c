// tests/test_assess_browser.c -- renders the page of `kvfleet assess` (bundled Mooncake trace)
// in headless Chromium: the browser must see the three tables with their figures, and a
// screenshot of the page must not be blank. The page of the reports module (rpt_assess_html,
// from the run's assess.json) must open with its answer wholly inside a 1400x900 window,
// every figure in it equal to assess.json and shown in its unit. Exits 77 (skipped) when no
// Chromium is installed. KVF_TEST_KEEP=1 keeps the directory with the pages and screenshots;
// KVF_SCREENSHOT_DIR=D copies the 1400x900 screenshot to D/assess.png.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "rpt.h"
#include "rpt_util.h"

static const char PROBE[] =
    "<script>(function(){var b=document.body;var e=document.getElementById('answer');"
    "var r=e?e.getBoundingClientRect():null;b.setAttribute('data-probe-viewport',innerWidth+'x'+"
    "innerHeight);b.setAttribute('data-probe-answer',r?r.top+','+r.bottom:'none');})();"
    "</script>";

// The answer of the reports module's page: inside the window, figures equal to assess.json.
static void check_module_page(const char *dir) {
    char path[300], page[300], probe[300], out[300];
    snprintf(path, sizeof path, "%s/assess.json", dir);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    ck_assert_msg(j, "%s: %s", path, je.text);
    snprintf(page, sizeof page, "%s/assess_page.html", dir);
    kvf_err err = {0};
    ck_assert_msg(rpt_assess_html(page, j, &err) == KVF_OK, "%s", err.msg);
    char *html = kvt_slurp(page);
    char *end = strstr(html, "</body>");
    ck_assert_ptr_nonnull(end);
    snprintf(probe, sizeof probe, "%s/probe.html", dir);
    FILE *f = fopen(probe, "w");
    fwrite(html, 1, (size_t)(end - html), f);
    fputs(PROBE, f);
    fputs(end, f);
    fclose(f);
    free(html);
    snprintf(out, sizeof out, "%s/probe_dom.html", dir);
    int rc = kvt_browser_run(probe, "--window-size=1400,900 --dump-dom", out, kvt_tmp);
    ck_assert_msg(rc == 0, "probe exited %d", rc);
    char *dom = kvt_slurp(out);
    char vp[64], box[128];
    kvt_dom_attr(dom, "data-probe-viewport", vp, sizeof vp);
    kvt_dom_attr(dom, "data-probe-answer", box, sizeof box);
    int vw = 0, vh = 0;
    double top = -1, bottom = 1e9;
    ck_assert(sscanf(vp, "%dx%d", &vw, &vh) == 2 && vw == 1400 && vh >= 700);
    ck_assert_msg(sscanf(box, "%lf,%lf", &top, &bottom) == 2, "answer box '%s'", box);
    fprintf(stderr, "assess page at %s: answer %.0f..%.0f px\n", vp, top, bottom);
    ck_assert_msg(top >= 0 && bottom <= vh, "answer at %.0f..%.0f px", top, bottom);
    const char *a = strstr(dom, "id=\"answer\""), *ae = a ? strstr(a, "</section>") : NULL;
    ck_assert(a && ae);
    int n = 0;
    for (const char *p = a; (p = strstr(p, "data-key=\"")) && p < ae; n++) {
        p += 10;
        char key[128], text[64];
        snprintf(key, sizeof key, "%.*s", (int)(strchr(p, '"') - p), p);
        const char *dv = strstr(p, "data-value=\"") + 12;
        double x = kvt_num(j, key);
        ck_assert_msg(strtod(dv, NULL) == x, "%s: page %.17g, assess.json %.17g", key,
                      strtod(dv, NULL), x);
        const char *t = strchr(dv, '>') + 1;
        snprintf(text, sizeof text, "%.*s", (int)(strchr(t, '<') - t), t);
        double back = kvt_read_back(key, text);
        ck_assert_msg(fabs(back - x) <= 0.0051 * fabs(x), "%s: '%s' reads %.6g, json %.6g", key,
                      text, back, x);
    }
    ck_assert_msg(n >= 7, "%d figures in the answer", n);
    ck_assert(strstr(a, "data-key=\"with_store.hit_rate\"") &&
              strstr(a, "data-key=\"with_store.cost_per_mtok_usd_provisioned\"") &&
              strstr(a, "data-key=\"ideal_hit_rate\""));
    char want[96];
    snprintf(want, sizeof want, "data-state=\"%s\"",
             json_string_value(json_object_get(json_object_get(j, "with_store"), "saturation")));
    ck_assert_msg(strstr(a, want), "no verdict %s", want);
    ck_assert_int_eq(kvt_count(dom, "<table"), 3);
    free(dom);
    char png[300];
    snprintf(png, sizeof png, "%s/assess.png", kvt_tmp);
    kvt_browser_screenshot(page, png, 1400, 900, 30000, kvt_tmp);
    const char *keep = getenv("KVF_SCREENSHOT_DIR");
    if (keep) ck_assert_int_eq(kvt_sh("cp %s %s/assess.png", png, keep), 0);
    json_decref(j);
}

START_TEST(test_assess_page_in_chromium) {
    kvt_tmp_make("kvf_assess_browser");
    int rc = kvt_sh("%s assess %s -q -o %s/a", kvt_bin(),
                    kvt_shared_trace("mooncake_conversation.jsonl"), kvt_tmp);
    ck_assert_msg(rc == 0, "assess exited %d: %s", rc, kvt_err);
    char page[200], dom_path[200];
    snprintf(page, sizeof page, "%s/a/assess.html", kvt_tmp);
    snprintf(dom_path, sizeof dom_path, "%s/dom.html", kvt_tmp);
    rc = kvt_browser_run(page, "--dump-dom", dom_path, kvt_tmp);
    ck_assert_msg(rc == 0, "--dump-dom exited %d (see %s/browser.log)", rc, kvt_tmp);
    char *dom = kvt_slurp(dom_path);
    ck_assert(strstr(dom, "Ideal hit rate") != NULL);
    ck_assert(strstr(dom, "id=\"assess-ideal\"") != NULL);
    ck_assert(strstr(dom, "id=\"assess-store-grid\"") != NULL);
    ck_assert(strstr(dom, "id=\"assess-cost\"") != NULL);
    ck_assert_int_eq(kvt_count(dom, "<table"), 3);
    // 5 sizes x 6 retentions in the grid, each cell carrying its exact value
    ck_assert_msg(kvt_count(dom, "%</td>") >= 30, "%d percent cells", kvt_count(dom, "%</td>"));
    ck_assert(strstr(dom, "data-key=\"ideal_hit_rate\"") != NULL);
    ck_assert(strstr(dom, "data-key=\"with_store.cost_per_mtok_usd_busy\"") != NULL);
    free(dom);

    char png[200];
    snprintf(png, sizeof png, "%s/screenshot.png", kvt_tmp);
    kvt_browser_screenshot(page, png, 1280, 1600, 30000, kvt_tmp);
    char dir[200];
    snprintf(dir, sizeof dir, "%s/a", kvt_tmp);
    check_module_page(dir);
    if (getenv("KVF_TEST_KEEP"))
        fprintf(stderr, "kept %s (a/assess.html, screenshot.png)\n", kvt_tmp);
    else
        kvt_tmp_remove();
}
END_TEST

int main(void) {
    if (!kvt_browser()) {
        fprintf(stderr, "test_assess_browser: no chromium on PATH; skipped\n");
        return 77;
    }
    Suite *s = suite_create("assess_browser");
    TCase *t = tcase_create("chromium");
    tcase_set_timeout(t, 400);
    tcase_add_test(t, test_assess_page_in_chromium);
    suite_add_tcase(s, t);
    return kvt_main(s);
}
