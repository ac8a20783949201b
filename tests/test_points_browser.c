// tests/test_points_browser.c -- renders the pages of several runs in headless Chromium: a
// sweep's sweep.html and `kvfleet compare --html` of three of its points. The browser must
// see one table row per point with the varied keys and the figures of each point's
// summary.json, and the frontier chart (inline SVG, one marker label per point); screenshots
// must not be blank. Exits 77 (skipped) when no Chromium is installed. KVF_TEST_KEEP=1 keeps
// the directory with the pages and their screenshots.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/kvt.h"

// The text of the first <td data-key="key"> cell of row n (1-based) in dom, or "".
static void cell_of(const char *dom, int n, const char *key, char *out, size_t cap) {
    out[0] = 0;
    const char *p = dom;
    for (int i = 0; i < n && p; i++) {
        p = strstr(p, "<tr class=\"point\"");
        if (p && i < n - 1) p++;
    }
    if (!p) return;
    char pat[128];
    snprintf(pat, sizeof pat, "data-key=\"%s\"", key);
    const char *c = strstr(p, pat);
    const char *end = strstr(p, "</tr>");
    if (!c || (end && c > end)) return;
    c = strchr(c, '>');
    const char *e = c ? strstr(c, "</td>") : NULL;
    if (!e) return;
    size_t len = (size_t)(e - c - 1) < cap - 1 ? (size_t)(e - c - 1) : cap - 1;
    memcpy(out, c + 1, len);
    out[len] = 0;
}

static char *dom_of(const char *page) {
    char dom_path[300];
    snprintf(dom_path, sizeof dom_path, "%s/dom.html", kvt_tmp);
    int rc = kvt_browser_run(page, "--dump-dom", dom_path, kvt_tmp);
    ck_assert_msg(rc == 0, "--dump-dom exited %d (see %s/browser.log)", rc, kvt_tmp);
    return kvt_slurp(dom_path);
}

// The page's chart as the browser sees it: an inline SVG with a marker label per point.
static void check_chart(const char *dom, int npoints) {
    const char *chart = strstr(dom, "id=\"frontier-chart\"");
    ck_assert_msg(chart, "no frontier chart in the page");
    ck_assert_msg(strstr(chart, "<svg"), "the chart is not an inline SVG");
    ck_assert(strstr(chart, "cost per day (USD)") && strstr(chart, "SLO attainment (%)"));
    for (int i = 1; i <= npoints; i++) {
        char lab[32];
        snprintf(lab, sizeof lab, ">%d</text>", i);
        ck_assert_msg(strstr(chart, lab), "the chart lacks the marker label %d", i);
    }
}

START_TEST(test_sweep_and_compare_pages) {
    kvt_tmp_make("kvf_points_browser");
    int rc = kvt_sh("%s sweep scenarios/quickstart.yaml --vary cluster.prefill.instances=1,2,4 "
                    "--vary cluster.decode.instances=1,2 --set workload.limit_requests=300 -o %s/sw",
                    kvt_bin(), kvt_tmp);
    ck_assert_msg(rc == 0, "sweep exited %d: %s", rc, kvt_err);
    ck_assert_msg(strstr(kvt_out, "sweep.html"), "the sweep does not name its page: %s", kvt_out);

    // the sweep page: 6 rows, both varied keys as columns, figures from each summary
    char page[300];
    snprintf(page, sizeof page, "%s/sw/sweep.html", kvt_tmp);
    char *dom = dom_of(page);
    ck_assert_int_eq(kvt_count(dom, "<tr class=\"point\""), 6);
    ck_assert(strstr(dom, "<th class=\"key\">cluster.prefill.instances</th>"));
    ck_assert(strstr(dom, "<th class=\"key\">cluster.decode.instances</th>"));
    for (int i = 0; i < 6; i++) {
        char p[400], cost[64], att[64];
        snprintf(p, sizeof p, "%s/sw/points/%04d_cluster.prefill.instances=%d_cluster.decode."
                 "instances=%d/summary.json", kvt_tmp, i, (int[]){1, 1, 2, 2, 4, 4}[i], 1 + i % 2);
        json_error_t je;
        json_t *s = json_load_file(p, 0, &je);
        ck_assert_msg(s, "%s: %s", p, je.text);
        cell_of(dom, i + 1, "economics.cost_per_day_usd", cost, sizeof cost);
        cell_of(dom, i + 1, "slo.attainment", att, sizeof att);
        char want[64];
        snprintf(want, sizeof want, "%.4g",
                 kvt_num(s, "economics.cost_per_day_usd"));
        ck_assert_msg(strtod(cost, NULL) > 0 && fabs(strtod(cost, NULL) - strtod(want, NULL)) <
                                                   0.01 * strtod(want, NULL),
                      "row %d: cost cell '%s', summary %s", i + 1, cost, want);
        ck_assert_msg(fabs(strtod(att, NULL) - 100 * kvt_num(s, "slo.attainment")) < 0.051,
                      "row %d: attainment cell '%s', summary %.4f", i + 1, att,
                      kvt_num(s, "slo.attainment"));
        json_decref(s);
    }
    check_chart(dom, 6);
    free(dom);
    char png[300];
    snprintf(png, sizeof png, "%s/sweep.png", kvt_tmp);
    kvt_browser_screenshot(page, png, 1400, 1000, 30000, kvt_tmp);

    // compare --html of three points, into a folder that does not exist yet
    rc = kvt_sh("%s compare %s/sw/points/0000_* %s/sw/points/0003_* %s/sw/points/0005_* "
                "--html %s/cmp/compare.html",
                kvt_bin(), kvt_tmp, kvt_tmp, kvt_tmp, kvt_tmp);
    ck_assert_msg(rc == 0, "compare exited %d: %s", rc, kvt_err);
    snprintf(page, sizeof page, "%s/cmp/compare.html", kvt_tmp);
    dom = dom_of(page);
    ck_assert_int_eq(kvt_count(dom, "<tr class=\"point\""), 3);
    ck_assert(strstr(dom, "0003_cluster.prefill.instances=2_cluster.decode.instances=2"));
    ck_assert(strstr(dom, "data-key=\"saturation.state\""));
    check_chart(dom, 3);
    free(dom);
    snprintf(png, sizeof png, "%s/compare.png", kvt_tmp);
    kvt_browser_screenshot(page, png, 1400, 1000, 30000, kvt_tmp);

    // without gnuplot the page keeps its table and says why there is no chart
    rc = kvt_sh("KVF_NO_GNUPLOT=1 %s compare %s/sw/points/0000_* %s/sw/points/0001_* "
                "--html %s/cmp/plain.html",
                kvt_bin(), kvt_tmp, kvt_tmp, kvt_tmp);
    ck_assert_int_eq(rc, 0);
    snprintf(page, sizeof page, "%s/cmp/plain.html", kvt_tmp);
    char *plain = kvt_slurp(page);
    ck_assert_int_eq(kvt_count(plain, "<tr class=\"point\""), 2);
    ck_assert(strstr(plain, "No chart: gnuplot disabled") && !strstr(plain, "<svg"));
    free(plain);
    if (getenv("KVF_TEST_KEEP"))
        fprintf(stderr, "kept %s (sw/sweep.html, cmp/compare.html, sweep.png, compare.png)\n",
                kvt_tmp);
    else
        kvt_tmp_remove();
}
END_TEST

int main(void) {
    if (!kvt_browser()) {
        fprintf(stderr, "test_points_browser: no chromium on PATH; skipped\n");
        return 77;
    }
    Suite *s = suite_create("points_browser");
    TCase *t = tcase_create("chromium");
    tcase_set_timeout(t, 400);
    tcase_add_test(t, test_sweep_and_compare_pages);
    suite_add_tcase(s, t);
    return kvt_main(s);
}
