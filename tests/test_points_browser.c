// tests/test_points_browser.c -- renders the pages of several runs in headless Chromium: a
// sweep's sweep.html and `kvfleet compare --html` of three of its points. The browser must
// see the answer (the cheapest stable point, as the test finds it from the summaries) wholly
// inside a 1400x900 window with the chart starting in it, one table row per point with the
// varied keys and the figures of each point's summary.json, a column of differences against
// the baseline (compare, also with --baseline), and the frontier chart (inline SVG) whose
// labels name every point once and never overlap as the browser lays them out -- also when
// every run costs the same. An unfinished point is called so, with its reason. Screenshots
// must not be blank. Exits 77 (skipped) when no Chromium is installed. KVF_TEST_KEEP=1 keeps
// the directory with the pages and their screenshots; KVF_SCREENSHOT_DIR=D copies the
// 1400x900 screenshots to D/sweep.png and D/compare.png.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "rpt.h"

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

// The probe: the boxes of the answer and the chart, the window, and the chart's point labels
// (text anchored at its start whose text is row numbers) with how many pairs of them overlap.
static const char PROBE[] =
    "<script>(function(){var b=document.body;function box(q){var e=document.querySelector(q);"
    "if(!e)return 'none';var r=e.getBoundingClientRect();return r.top+','+r.bottom+','+r.left+"
    "','+r.right;}b.setAttribute('data-probe-viewport',innerWidth+'x'+innerHeight);"
    "b.setAttribute('data-probe-answer',box('#answer'));"
    "b.setAttribute('data-probe-chart',box('#frontier-chart'));var ls=[],rs=[];"
    "document.querySelectorAll('#frontier-chart text').forEach(function(t){var g=t.parentNode;"
    "if(/^[0-9]+(, [0-9]+)*( [+][0-9]+)?$/.test(t.textContent)&&g.getAttribute('text-anchor')"
    "=='start'){ls.push(t.textContent);rs.push(t.getBoundingClientRect());}});var ov=0;"
    "for(var i=0;i<rs.length;i++)for(var j=i+1;j<rs.length;j++){var a=rs[i],c=rs[j];"
    "if(a.left<c.right&&c.left<a.right&&a.top<c.bottom&&c.top<a.bottom)ov++;}"
    "b.setAttribute('data-probe-labels',ls.join('|'));b.setAttribute('data-probe-overlaps',ov);"
    "})();</script>";

// Renders a copy of page with the probe at 1400x900; returns the DOM.
static char *probe_dom(const char *page) {
    char *html = kvt_slurp(page);
    char *end = strstr(html, "</body>");
    ck_assert_ptr_nonnull(end);
    char probe[400], out[400];
    snprintf(probe, sizeof probe, "%s.probe.html", page);
    FILE *f = fopen(probe, "w");
    ck_assert_ptr_nonnull(f);
    fwrite(html, 1, (size_t)(end - html), f);
    fputs(PROBE, f);
    fputs(end, f);
    fclose(f);
    free(html);
    snprintf(out, sizeof out, "%s/probe_dom.html", kvt_tmp);
    int rc = kvt_browser_run(probe, "--window-size=1400,900 --dump-dom", out, kvt_tmp);
    ck_assert_msg(rc == 0, "probe exited %d (see %s/browser.log)", rc, kvt_tmp);
    return kvt_slurp(out);
}

// The answer wholly in the window, the chart starting in it; the chart's labels name rows
// 1..npoints once each and no two overlap.
static void check_layout(const char *dom, int npoints, const char *what) {
    char vp[64], box[128], labels[1024], ov[16];
    kvt_dom_attr(dom, "data-probe-viewport", vp, sizeof vp);
    int vw = 0, vh = 0;
    ck_assert_msg(sscanf(vp, "%dx%d", &vw, &vh) == 2 && vw == 1400 && vh >= 700, "%s", vp);
    kvt_dom_attr(dom, "data-probe-answer", box, sizeof box);
    double top, bottom, ctop = -1;
    ck_assert_msg(sscanf(box, "%lf,%lf", &top, &bottom) == 2, "%s: answer box '%s'", what, box);
    kvt_dom_attr(dom, "data-probe-chart", box, sizeof box);
    sscanf(box, "%lf", &ctop);
    fprintf(stderr, "%s at %s: answer %.0f..%.0f px, chart from %.0f px\n", what, vp, top, bottom,
            ctop);
    ck_assert_msg(top >= 0 && bottom <= vh, "%s: answer at %.0f..%.0f px", what, top, bottom);
    ck_assert_msg(ctop > bottom && ctop < vh - 100, "%s: chart at %.0f px", what, ctop);
    kvt_dom_attr(dom, "data-probe-labels", labels, sizeof labels);
    kvt_dom_attr(dom, "data-probe-overlaps", ov, sizeof ov);
    ck_assert_msg(!strcmp(ov, "0"), "%s: %s pairs of labels overlap (%s)", what, ov, labels);
    int seen[64] = {0};
    for (char *tok = labels; *tok;) {
        int row = (int)strtol(tok, &tok, 10);
        ck_assert_msg(row >= 1 && row <= npoints, "%s: label row %d", what, row);
        seen[row]++;
        while (*tok == ',' || *tok == ' ' || *tok == '|')
            tok++;
    }
    for (int i = 1; i <= npoints; i++)
        ck_assert_msg(seen[i] == 1, "%s: row %d in %d labels (%s)", what, i, seen[i], labels);
}

// The cheapest stable point of summaries s (0-based; -1 when none), found here.
static int cheapest_stable(json_t **s, int n) {
    int b = -1;
    for (int i = 0; i < n; i++) {
        const char *st =
            json_string_value(json_object_get(json_object_get(s[i], "saturation"), "state"));
        if (!st || strcmp(st, "stable")) continue;
        double c = kvt_num(s[i], "economics.cost_per_day_usd");
        double a = kvt_num(s[i], "slo.attainment");
        if (b < 0 || c < kvt_num(s[b], "economics.cost_per_day_usd") ||
            (c == kvt_num(s[b], "economics.cost_per_day_usd") &&
             a > kvt_num(s[b], "slo.attainment")))
            b = i;
    }
    return b;
}

// The answer's cheapest stable point is the one found here, with its figures.
static void check_answer(const char *dom, json_t **s, int n) {
    int b = cheapest_stable(s, n);
    const char *card = strstr(dom, "id=\"hl-cheapest\"");
    ck_assert_msg(card, "no cheapest-point card");
    if (b < 0) {
        ck_assert_msg(strncmp(card + 16, " data-row", 9) && strstr(card, ">none<"),
                      "a cheapest stable point where there is none");
        return;
    }
    char want[48];
    snprintf(want, sizeof want, "data-row=\"%d\"", b + 1);
    ck_assert_msg(!strncmp(card + 17, want, strlen(want)), "cheapest stable: %.40s, want %s",
                  card + 17, want);
    const char *v = strstr(card, "data-key=\"economics.cost_per_day_usd\" data-value=\"");
    ck_assert_ptr_nonnull(v);
    double x = strtod(strchr(v + 40, '"') + 1, NULL);
    ck_assert_msg(x == kvt_num(s[b], "economics.cost_per_day_usd"), "cost %.17g", x);
    int stable = 0;
    for (int i = 0; i < n; i++) {
        const char *st =
            json_string_value(json_object_get(json_object_get(s[i], "saturation"), "state"));
        stable += st && !strcmp(st, "stable");
    }
    snprintf(want, sizeof want, "data-stable=\"%d\"", stable);
    ck_assert_msg(strstr(dom, want), "states card lacks %s", want);
}

static void keep_png(const char *png, const char *name) {
    const char *d = getenv("KVF_SCREENSHOT_DIR");
    if (d) ck_assert_int_eq(kvt_sh("cp %s %s/%s", png, d, name), 0);
}

static void page_probe_three(const char *page, json_t **sums) {
    char *dom = probe_dom(page);
    check_layout(dom, 3, "compare.html");
    json_t *three[3] = {sums[0], sums[3], sums[5]};
    check_answer(dom, three, 3);
    free(dom);
}

START_TEST(test_sweep_and_compare_pages) {
    kvt_tmp_make("kvf_points_browser");
    int rc =
        kvt_sh("%s sweep scenarios/quickstart.yaml --vary cluster.prefill.instances=1,2,4 "
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
        snprintf(p, sizeof p,
                 "%s/sw/points/%04d_cluster.prefill.instances=%d_cluster.decode."
                 "instances=%d/summary.json",
                 kvt_tmp, i, (int[]){1, 1, 2, 2, 4, 4}[i], 1 + i % 2);
        json_error_t je;
        json_t *s = json_load_file(p, 0, &je);
        ck_assert_msg(s, "%s: %s", p, je.text);
        cell_of(dom, i + 1, "economics.cost_per_day_usd", cost, sizeof cost);
        cell_of(dom, i + 1, "slo.attainment", att, sizeof att);
        // "$1,234" or "$291.3": dollars, thousands separated, 3-4 significant digits
        ck_assert_msg(cost[0] == '$', "row %d: cost cell '%s' without its unit", i + 1, cost);
        char digits[64];
        size_t nd = 0;
        for (const char *c = cost + 1; *c && nd + 1 < sizeof digits; c++)
            if (*c != ',') digits[nd++] = *c;
        digits[nd] = 0;
        double shown = strtod(digits, NULL), want = kvt_num(s, "economics.cost_per_day_usd");
        ck_assert_msg(shown > 0 && fabs(shown - want) < 0.005 * want,
                      "row %d: cost cell '%s', summary %.6g", i + 1, cost, want);
        ck_assert_msg(strstr(att, " %"), "row %d: attainment '%s' not in percent", i + 1, att);
        ck_assert_msg(fabs(strtod(att, NULL) - 100 * kvt_num(s, "slo.attainment")) < 0.051,
                      "row %d: attainment cell '%s', summary %.4f", i + 1, att,
                      kvt_num(s, "slo.attainment"));
        json_decref(s);
    }
    free(dom);
    json_t *sums[6];
    for (int i = 0; i < 6; i++) {
        char p[400];
        snprintf(p, sizeof p,
                 "%s/sw/points/%04d_cluster.prefill.instances=%d_cluster.decode."
                 "instances=%d/summary.json",
                 kvt_tmp, i, (int[]){1, 1, 2, 2, 4, 4}[i], 1 + i % 2);
        json_error_t je;
        sums[i] = json_load_file(p, 0, &je);
        ck_assert_msg(sums[i], "%s: %s", p, je.text);
    }
    dom = probe_dom(page);
    check_layout(dom, 6, "sweep.html");
    check_answer(dom, sums, 6);
    ck_assert_msg(!strstr(dom, ">failed<"), "a point called failed");
    free(dom);
    char png[300];
    snprintf(png, sizeof png, "%s/sweep.png", kvt_tmp);
    kvt_browser_screenshot(page, png, 1400, 900, 30000, kvt_tmp);
    keep_png(png, "sweep.png");

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
    // the difference column against run 1: cost in percent of the baseline's
    ck_assert(strstr(dom, "<th>against #1</th>"));
    const char *row3 = strstr(dom, "<tr class=\"point\"");
    for (int i = 0; i < 2 && row3; i++)
        row3 = strstr(row3 + 1, "<tr class=\"point\"");
    ck_assert_ptr_nonnull(row3);
    const char *dc = strstr(row3, "data-diff-key=\"economics.cost_per_day_usd\" data-diff=\"");
    ck_assert_msg(dc, "row 3 has no cost difference");
    double d = strtod(strchr(dc + 50, '"') + 1, NULL);
    double c5 = kvt_num(sums[5], "economics.cost_per_day_usd"),
           c0 = kvt_num(sums[0], "economics.cost_per_day_usd");
    ck_assert_msg(fabs(d - 100 * (c5 - c0) / c0) < 1e-9, "difference %.6g %%, want %.6g", d,
                  100 * (c5 - c0) / c0);
    free(dom);
    page_probe_three(page, sums);
    snprintf(png, sizeof png, "%s/compare.png", kvt_tmp);
    kvt_browser_screenshot(page, png, 1400, 900, 30000, kvt_tmp);
    keep_png(png, "compare.png");

    // --baseline by name: the column is against that run, which is marked baseline
    rc = kvt_sh("%s compare %s/sw/points/0000_* %s/sw/points/0003_* %s/sw/points/0005_* "
                "--baseline 0003_cluster.prefill.instances=2_cluster.decode.instances=2 "
                "--html %s/cmp/base.html",
                kvt_bin(), kvt_tmp, kvt_tmp, kvt_tmp, kvt_tmp);
    ck_assert_msg(rc == 0, "compare --baseline exited %d: %s", rc, kvt_err);
    ck_assert_msg(strstr(kvt_out, "against run 2"), "%s", kvt_out);
    snprintf(page, sizeof page, "%s/cmp/base.html", kvt_tmp);
    char *bh = kvt_slurp(page);
    ck_assert(strstr(bh, "<th>against #2</th>"));
    const char *r2 = strstr(strstr(bh, "<tr class=\"point\"") + 1, "<tr class=\"point\"");
    ck_assert_msg(r2 && !strncmp(r2, "<tr class=\"point\" data-baseline=\"1\">", 36),
                  "row 2 not the baseline");
    free(bh);
    rc = kvt_sh("%s compare %s/sw/points/0000_* --baseline nosuch", kvt_bin(), kvt_tmp);
    ck_assert_int_eq(rc, 2);

    // every run costs the same: one column of points, labels still apart
    rc = kvt_sh("%s compare %s/sw/points/0005_* %s/sw/points/0005_* %s/sw/points/0005_* "
                "%s/sw/points/0004_* --html %s/cmp/same.html",
                kvt_bin(), kvt_tmp, kvt_tmp, kvt_tmp, kvt_tmp, kvt_tmp);
    ck_assert_int_eq(rc, 0);
    snprintf(page, sizeof page, "%s/cmp/same.html", kvt_tmp);
    dom = probe_dom(page);
    check_layout(dom, 4, "compare.html, equal costs");
    free(dom);

    // an unfinished point: called so, with its reason; never "failed", never drawn
    json_t *pts = json_array();
    for (int i = 0; i < 3; i++)
        json_array_append_new(pts, json_pack("{s:s, s:{s:s}, s:O}", "label", "p", "keys", "k",
                                             i ? "b" : "a", "summary", sums[i + 3]));
    json_array_append_new(pts, json_pack("{s:s, s:{s:s}, s:n, s:s, s:s}", "label", "q", "keys", "k",
                                         "c", "summary", "status", "unfinished", "reason",
                                         "interrupted at 40 % of arrivals"));
    snprintf(page, sizeof page, "%s/cmp/unfinished.html", kvt_tmp);
    kvf_err err = {0};
    ck_assert_msg(rpt_points_html(page, "four points", pts, &err) == KVF_OK, "%s", err.msg);
    json_decref(pts);
    dom = dom_of(page);
    ck_assert_msg(strstr(dom, "data-status=\"unfinished\">unfinished: interrupted at 40 % of "
                              "arrivals<"),
                  "no unfinished row with its reason");
    ck_assert(strstr(dom, "data-unfinished=\"1\""));
    ck_assert(!strstr(dom, "failed"));
    free(dom);
    for (int i = 0; i < 6; i++)
        json_decref(sums[i]);

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
