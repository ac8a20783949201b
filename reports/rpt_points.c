// reports/rpt_points.c -- the HTML page of several runs (compare, sweep): one table row per
// point and the frontier chart of cost per day against SLO attainment (rpt.h).
//
// The chart's data and gnuplot script go to <page stem>_files/ (frontier.dat, frontier.gp);
// gnuplot draws frontier.svg, which the page inlines so it opens offline. Without gnuplot (not
// on PATH, or KVF_NO_GNUPLOT set) the page carries the table and says why there is no chart.
// Frontier: the points no other point beats on both axes (cheaper or as cheap, and at least
// as high an attainment), joined in order of cost.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rpt.h"
#include "rpt_util.h"

// Figures of a point's row: summary.json path and column heading.
static const struct {
    const char *key, *head;
    bool pct;                    // a fraction shown in percent
} FIGS[] = {
    {"economics.cost_per_day_usd", "cost per day (USD)", false},
    {"slo.attainment", "SLO attainment", true},
    {"ttft_ms.p90", "TTFT p90 (ms)", false},
    {"tpot_ms.p90", "TPOT p90 (ms)", false},
    {"throughput.output_tok_s", "output tok/s", false},
    {"cache.hit_rate", "hit rate", true},
    {"cache.stored_bytes_peak", "KV store peak", false},
    {"gpu_hours", "GPU-hours", false},
    {"saturation.state", "saturation", false},
};
enum { N_FIGS = sizeof FIGS / sizeof FIGS[0] };

typedef struct pt {
    double cost, att;            // cost per day, attainment in percent
    int idx;                     // row number (1-based)
} pt;

static int cmp_pt(const void *a, const void *b) {
    const pt *x = a, *y = b;
    if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
    return x->att > y->att ? -1 : x->att < y->att;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    rpt_buf b = {0};
    char tmp[8192];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) rpt_buf_putn(&b, tmp, n);
    fclose(f);
    return b.p;
}

// Writes the chart's data and script into files/; returns the number of points drawn and
// sets *why when none can be.
static int frontier_files(const char *files, const json_t *points, const char **why,
                          kvf_err *err) {
    size_t n = json_array_size(points);
    pt *p = kvf_calloc(n ? n : 1, sizeof *p);
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_object_get(json_array_get(points, i), "summary");
        double c = rpt_json_num(s, "economics.cost_per_day_usd");
        double a = rpt_json_num(s, "slo.attainment");
        if (isfinite(c) && isfinite(a)) p[k++] = (pt){c, 100 * a, (int)i + 1};
    }
    if (k == 0) {
        *why = "no point has both a cost per day and an SLO attainment";
        free(p);
        return 0;
    }
    qsort(p, (size_t)k, sizeof *p, cmp_pt);
    char path[4200];
    snprintf(path, sizeof path, "%s/frontier.dat", files);
    FILE *f = fopen(path, "w");
    if (!f) {
        free(p);
        kvf_fail(err, KVF_EIO, "%s: cannot write", path);
        return -1;
    }
    fprintf(f, "# cost per day (USD), SLO attainment (%%), row; block 0 all points, block 1 "
               "the frontier\n");
    for (int i = 0; i < k; i++) fprintf(f, "%.10g %.10g %d\n", p[i].cost, p[i].att, p[i].idx);
    fprintf(f, "\n\n");
    double best = -1;
    for (int i = 0; i < k; i++)
        if (p[i].att > best) {
            fprintf(f, "%.10g %.10g %d\n", p[i].cost, p[i].att, p[i].idx);
            best = p[i].att;
        }
    fclose(f);
    free(p);
    snprintf(path, sizeof path, "%s/frontier.gp", files);
    static const char GP[] =
        "# kvfleet frontier chart: run `gnuplot frontier.gp` in this folder\n"
        "set terminal svg size 820,420 font \"Helvetica,12\" background rgb \"white\"\n"
        "set output \"frontier.svg\"\n"
        "set termoption noenhanced\n"
        "set grid lc rgb \"#dddddd\"\nset border 3\nset tics nomirror\n"
        "set key outside right top vertical Left reverse noenhanced\n"
        "set xlabel \"cost per day (USD)\"\nset ylabel \"SLO attainment (%)\"\n"
        "set yrange [0:105]\nset offsets graph 0.05, graph 0.05, 0, 0\n"
        "plot \"frontier.dat\" index 1 using 1:2 with lines lw 2 lc rgb \"#4e79a7\" "
        "title \"frontier\", \\\n"
        "     \"frontier.dat\" index 0 using 1:2 with points pt 7 ps 1.2 lc rgb \"#e15759\" "
        "title \"point\", \\\n"
        "     \"frontier.dat\" index 0 using 1:2:3 with labels offset 0.9,0.9 notitle\n";
    kvf_status st = rpt_write_text(path, GP, sizeof GP - 1, err);
    return st ? -1 : k;
}

static void cell(rpt_buf *h, const char *key, json_t *v, bool pct) {
    char s[64];
    if (json_is_number(v)) {
        double x = json_number_value(v);
        if (pct)
            snprintf(s, sizeof s, "%.1f %%", 100 * x);
        else
            rpt_fmt_keyed(key, x, s, sizeof s);
        rpt_buf_printf(h, "<td class=\"num\" data-key=\"%s\" data-value=\"%.17g\">%s</td>", key,
                       x, s);
    } else {
        rpt_buf_printf(h, "<td data-key=\"%s\">", key);
        rpt_buf_html(h, json_is_string(v) ? json_string_value(v) : "-");
        rpt_buf_puts(h, "</td>");
    }
}

kvf_status rpt_points_html(const char *path, const char *title, const struct json_t *points_,
                           kvf_err *err) {
    const json_t *points = points_;
    if (!json_is_array(points)) return kvf_fail(err, KVF_EINVAL, "%s: no points", path);
    // the keys that tell the points apart, in first-seen order
    json_t *keys = json_array(), *seen = json_object();
    size_t i, n = json_array_size(points);
    for (i = 0; i < n; i++) {
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(json_array_get(points, i), "keys"), k, v) {
            if (json_object_get(seen, k)) continue;
            json_object_set(seen, k, json_true());
            json_array_append_new(keys, json_string(k));
        }
    }
    json_decref(seen);

    // chart files next to the page: <stem>_files/
    char files[4200];
    snprintf(files, sizeof files, "%s", path);
    char *dot = strrchr(files, '.'), *slash = strrchr(files, '/');
    if (dot && (!slash || dot > slash)) *dot = '\0';
    strncat(files, "_files", sizeof files - strlen(files) - 1);
    if (kvf_mkdirs(files, err)) {   // and the page's folder
        json_decref(keys);
        return err->code;
    }
    const char *why = NULL;
    int drawn = frontier_files(files, points, &why, err);
    if (drawn < 0) {
        json_decref(keys);
        return err->code;
    }
    char *svg = NULL;
    char note[600] = "";
    const char *off = getenv("KVF_NO_GNUPLOT");
    if (drawn > 0) {
        if (off && *off && strcmp(off, "0"))
            snprintf(note, sizeof note, "gnuplot disabled (KVF_NO_GNUPLOT=%s)", off);
        else if (!rpt_on_path("gnuplot"))
            snprintf(note, sizeof note, "gnuplot is not installed (not on PATH)");
        else if (rpt_gnuplot(files, "frontier.gp") != 0)
            snprintf(note, sizeof note, "gnuplot failed; see gnuplot.log beside the chart data");
        else {
            char sp[4300];
            snprintf(sp, sizeof sp, "%s/frontier.svg", files);
            svg = slurp(sp);
            if (!svg) snprintf(note, sizeof note, "gnuplot wrote no frontier.svg");
        }
    } else {
        snprintf(note, sizeof note, "%s", why);
    }

    rpt_buf h = {0};
    rpt_buf_puts(&h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
    rpt_buf_html(&h, title);
    rpt_buf_puts(&h, "</title><style>body{font-family:Helvetica,Arial,sans-serif;margin:24px;"
                     "color:#222}table{border-collapse:collapse;font-size:13px}td,th{border:1px "
                     "solid #ccc;padding:3px 8px}th{background:#f3f3f3;text-align:left}"
                     "td.num{text-align:right;font-variant-numeric:tabular-nums}"
                     "p.note{color:#555;font-size:13px}td.label{font-size:11px;word-break:break-all;"
                     "max-width:22em}</style></head><body>\n<h1>");
    rpt_buf_html(&h, title);
    rpt_buf_printf(&h, "</h1>\n<h2 id=\"points\">Points</h2>\n<p class=\"note\">%zu point%s. "
                       "Inputs: the keys in the middle columns (what tells the points apart); "
                       "outputs: every figure after them, from each point's summary.json.</p>\n"
                       "<table id=\"points-table\"><thead><tr><th>#</th><th>run</th>",
                   n, n == 1 ? "" : "s");
    json_t *e;
    json_array_foreach(keys, i, e) {
        rpt_buf_puts(&h, "<th class=\"key\">");
        rpt_buf_html(&h, json_string_value(e));
        rpt_buf_puts(&h, "</th>");
    }
    for (int f = 0; f < N_FIGS; f++) rpt_buf_printf(&h, "<th>%s</th>", FIGS[f].head);
    rpt_buf_puts(&h, "</tr></thead><tbody>\n");
    json_t *p;
    json_array_foreach(points, i, p) {
        rpt_buf_printf(&h, "<tr class=\"point\"><td class=\"num\">%zu</td><td class=\"label\">",
                       i + 1);
        rpt_buf_html(&h, json_string_value(json_object_get(p, "label")));
        rpt_buf_puts(&h, "</td>");
        size_t j;
        json_array_foreach(keys, j, e) {
            json_t *v = json_object_get(json_object_get(p, "keys"), json_string_value(e));
            rpt_buf_puts(&h, "<td>");
            rpt_buf_html(&h, json_is_string(v) ? json_string_value(v) : "-");
            rpt_buf_puts(&h, "</td>");
        }
        json_t *s = json_object_get(p, "summary");
        for (int f = 0; f < N_FIGS; f++)
            cell(&h, FIGS[f].key, s ? rpt_json_path(s, FIGS[f].key) : NULL, FIGS[f].pct);
        rpt_buf_puts(&h, "</tr>\n");
    }
    rpt_buf_puts(&h, "</tbody></table>\n<h2 id=\"frontier\">Cost against SLO attainment</h2>\n"
                     "<p class=\"note\">One marker per point, labelled with its row number; the "
                     "line joins the frontier, the points that no other point beats on both cost "
                     "per day and SLO attainment. Data: ");
    rpt_buf_html(&h, files);
    rpt_buf_puts(&h, "/frontier.dat.</p>\n");
    if (svg) {
        const char *start = strstr(svg, "<svg");
        rpt_buf_puts(&h, "<div class=\"chart\" id=\"frontier-chart\">");
        rpt_buf_puts(&h, start ? start : svg);
        rpt_buf_puts(&h, "</div>\n");
    } else {
        rpt_buf_puts(&h, "<p class=\"note\">No chart: ");
        rpt_buf_html(&h, note);
        rpt_buf_puts(&h, ".</p>\n");
    }
    rpt_buf_puts(&h, "</body></html>\n");
    kvf_status st = rpt_write_text(path, h.p, h.n, err);
    rpt_buf_free(&h);
    free(svg);
    json_decref(keys);
    return st;
}
