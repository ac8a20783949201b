// tests/test_assess_browser.c -- renders the page of `kvfleet assess` (bundled Mooncake trace)
// in headless Chromium: the browser must see the three tables with their figures, and a
// screenshot of the page must not be blank. Exits 77 (skipped) when no Chromium is installed.
// KVF_TEST_KEEP=1 keeps the directory with the page and its screenshot.
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/kvt.h"

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
