// tests/test_assess_browser.c -- renders the page of `kvfleet assess` (bundled Mooncake trace)
// in headless Chromium: the browser must see the three tables with their figures, and a
// screenshot of the page must not be blank. Exits 77 (skipped) when no Chromium is installed.
// KVF_TEST_KEEP=1 keeps the directory with the page and its screenshot.
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/kvt.h"

static char browser[64];

static bool on_path(const char *prog) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

static int run_browser(const char *page, const char *args, const char *out) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "u=$(mktemp -d) && timeout 180 %s --headless --no-sandbox --disable-gpu "
             "--disable-quic --no-first-run --disable-background-networking "
             "--disable-component-update --disable-sync --user-data-dir=\"$u\" %s "
             "'file://%s' > '%s' 2>'%s/browser.log'; rc=$?; rm -rf \"$u\"; exit $rc",
             browser, args, page, out, kvt_tmp);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(test_assess_page_in_chromium) {
    kvt_tmp_make("kvf_assess_browser");
    int rc = kvt_sh("%s assess %s -q -o %s/a", kvt_bin(),
                    kvt_shared_trace("mooncake_conversation.jsonl"), kvt_tmp);
    ck_assert_msg(rc == 0, "assess exited %d: %s", rc, kvt_err);
    char page[200], dom_path[200];
    snprintf(page, sizeof page, "%s/a/assess.html", kvt_tmp);
    snprintf(dom_path, sizeof dom_path, "%s/dom.html", kvt_tmp);
    rc = run_browser(page, "--dump-dom", dom_path);
    ck_assert_msg(rc == 0, "%s --dump-dom exited %d (see %s/browser.log)", browser, rc, kvt_tmp);
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

    char png[200], args[400], out[200];
    snprintf(png, sizeof png, "%s/screenshot.png", kvt_tmp);
    snprintf(args, sizeof args, "--window-size=1280,1600 --hide-scrollbars --screenshot='%s'", png);
    snprintf(out, sizeof out, "%s/screenshot.log", kvt_tmp);
    rc = run_browser(page, args, out);
    ck_assert_msg(rc == 0, "screenshot exited %d", rc);
    FILE *f = fopen(png, "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char h[24];
    ck_assert_int_eq(fread(h, 1, 24, f), 24);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    ck_assert(!memcmp(h, "\x89PNG", 4));
    unsigned w = (unsigned)h[16] << 24 | (unsigned)h[17] << 16 | (unsigned)h[18] << 8 | h[19];
    unsigned hh = (unsigned)h[20] << 24 | (unsigned)h[21] << 16 | (unsigned)h[22] << 8 | h[23];
    ck_assert_msg(w == 1280 && hh == 1600, "screenshot %ux%u", w, hh);
    ck_assert_msg(size > 30000, "screenshot of %ld bytes: blank page?", size);
    if (getenv("KVF_TEST_KEEP"))
        fprintf(stderr, "kept %s (a/assess.html, screenshot.png)\n", kvt_tmp);
    else
        kvt_tmp_remove();
}
END_TEST

int main(void) {
    static const char *const names[] = {"chromium", "chromium-browser", "google-chrome"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !browser[0]; i++)
        if (on_path(names[i])) snprintf(browser, sizeof browser, "%s", names[i]);
    if (!browser[0]) {
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
