// reports/rpt_points.c -- the HTML page of several runs (compare --html, a sweep's
// sweep.html): the answer first (the cheapest stable point, the best attainment among stable
// points, how many points are stable, backlogged, overloaded or unfinished), then the chart of
// cost per day against SLO attainment, then one table row per point (rpt.h).
//
// Frontier: among stable points only (saturation.state "stable"; a point whose queues grow
// has figures that depend on the run's length, so it is drawn but never joined), the points no
// other stable point beats on both axes, joined in order of cost. When no point carries a
// saturation verdict every point counts as stable, and the page says so.
// Labels: points close on the chart (within 7 % of the x range and 6 points of attainment)
// share one label listing their rows ("1, 2, 5"), so labels never sit on each other -- also
// when every point costs the same and the chart is one column.
// The chart's data and gnuplot script go to <page stem>_files/ (frontier.dat, frontier.gp);
// gnuplot draws frontier.svg, inlined so the page opens offline. Without gnuplot (not on
// PATH, or KVF_NO_GNUPLOT set) the page keeps its table and says why there is no chart.
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

// Figures of a point's row: summary.json path and column heading (units in the cells).
static const struct {
    const char *key, *head;
} FIGS[] = {
    {"economics.cost_per_day_usd", "cost per day"},
    {"slo.attainment", "SLO attainment"},
    {"economics.cost_per_mtok_usd.input", "per M input tokens"},
    {"economics.cost_per_mtok_usd.output", "per M output tokens"},
    {"ttft_ms.p90", "TTFT p90"},
    {"tpot_ms.p90", "TPOT p90"},
    {"throughput.output_tok_s", "output"},
    {"cache.hit_rate", "hit rate"},
    {"cache.stored_bytes_peak", "KV store peak"},
    {"gpu_hours", "GPU-hours"},
};
enum { N_FIGS = sizeof FIGS / sizeof FIGS[0] };

#define LABEL_DX 0.07   // points closer than this share of the x range ...
#define LABEL_DY 6.0    // ... and this many points of attainment share a label

typedef enum pt_state { PT_STABLE = 0, PT_UNSTABLE, PT_UNFINISHED } pt_state;

typedef struct pt {
    double cost, att;   // cost per day (USD), attainment in percent
    int idx;            // row number (1-based)
    pt_state state;
    const char *sat;   // saturation.state, or NULL
} pt;

typedef struct pts {
    pt *p;   // (n) one per point, in row order
    int n;
    int n_stable, n_unstable, n_unfinished, n_drawn;
    bool verdicts;   // some point carries a saturation verdict
    int baseline;    // 0-based row of the baseline, -1 = none
} pts;

static int cmp_pt(const void *a, const void *b) {
    const pt *x = a, *y = b;
    if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
    if (x->att != y->att) return x->att > y->att ? -1 : 1;
    return x->idx - y->idx;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    rpt_buf b = {0};
    char tmp[8192];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        rpt_buf_putn(&b, tmp, n);
    fclose(f);
    return b.p;
}

// Whether the point ran to the end: a summary, and no status other than "completed".
static bool finished(json_t *p, const char **why) {
    const char *st = json_string_value(json_object_get(p, "status"));
    const char *reason = json_string_value(json_object_get(p, "reason"));
    json_t *s = json_object_get(p, "summary");
    if (st && strcmp(st, "completed")) {
        *why = reason && *reason ? reason : st;
        return false;
    }
    if (!json_is_object(s)) {
        *why = reason && *reason ? reason
                                 : "no summary.json: the run was interrupted or stopped with an "
                                   "error before it wrote its figures";
        return false;
    }
    return true;
}

static void pts_load(pts *P, const json_t *points, int baseline) {
    size_t n = json_array_size(points);
    memset(P, 0, sizeof *P);
    P->p = kvf_calloc(n ? n : 1, sizeof *P->p);
    P->n = (int)n;
    P->baseline = baseline >= 0 && baseline < (int)n ? baseline : -1;
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_object_get(json_array_get(points, i), "summary");
        const char *sat = json_string_value(rpt_json_path(s, "saturation.state"));
        if (sat) P->verdicts = true;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *pj = json_array_get(points, i);
        json_t *s = json_object_get(pj, "summary");
        pt *q = &P->p[i];
        q->idx = (int)i + 1;
        q->cost = rpt_json_num(s, "economics.cost_per_day_usd");
        q->att = 100 * rpt_json_num(s, "slo.attainment");
        q->sat = json_string_value(rpt_json_path(s, "saturation.state"));
        const char *why;
        if (!finished(pj, &why))
            q->state = PT_UNFINISHED;
        else if (P->verdicts && (!q->sat || strcmp(q->sat, "stable")))
            q->state = PT_UNSTABLE;
        else
            q->state = PT_STABLE;
        P->n_stable += q->state == PT_STABLE;
        P->n_unstable += q->state == PT_UNSTABLE;
        P->n_unfinished += q->state == PT_UNFINISHED;
    }
}

// The drawable points (finished, both figures), sorted by cost; returns their number.
static int drawable(const pts *P, pt *out) {
    int k = 0;
    for (int i = 0; i < P->n; i++)
        if (P->p[i].state != PT_UNFINISHED && isfinite(P->p[i].cost) && isfinite(P->p[i].att))
            out[k++] = P->p[i];
    qsort(out, (size_t)k, sizeof *out, cmp_pt);
    return k;
}

// One label per cluster of nearby points: "x y text" lines, text the rows joined by ", ".
static void write_labels(FILE *f, const pt *d, int k, double xspan) {
    bool *done = kvf_calloc((size_t)k + 1, sizeof *done);
    for (int i = 0; i < k; i++) {
        if (done[i]) continue;
        char text[160];
        int len = snprintf(text, sizeof text, "%d", d[i].idx), more = 0;
        done[i] = true;
        for (int j = i + 1; j < k; j++) {
            if (done[j] || fabs(d[j].cost - d[i].cost) > LABEL_DX * xspan ||
                fabs(d[j].att - d[i].att) > LABEL_DY)
                continue;
            done[j] = true;
            if (len < 40)
                len += snprintf(text + len, sizeof text - (size_t)len, ", %d", d[j].idx);
            else
                more++;
        }
        if (more) snprintf(text + len, sizeof text - (size_t)len, " +%d", more);
        fprintf(f, "%.10g %.10g \"%s\"\n", d[i].cost, d[i].att, text);
    }
    fprintf(f, "\n\n");
    free(done);
}

static const char GP_HEAD[] =
    "# kvfleet frontier chart: run `gnuplot frontier.gp` in this folder\n"
    "set terminal svg size 900,380 font \"Helvetica,12\" background rgb \"white\"\n"
    "set output \"frontier.svg\"\nset termoption noenhanced\n"
    "set grid lc rgb \"#dddddd\"\nset border 3\nset tics nomirror\n"
    "set key outside right top vertical Left reverse noenhanced\n"
    "set xlabel \"cost per day (USD)\"\nset ylabel \"SLO attainment (%)\"\n"
    "set yrange [0:108]\n";

// Writes the chart's data and script into files/; returns the number of points drawn (0 and
// *why when none can be), -1 on a write error.
static int frontier_files(const char *files, const pts *P, const char **why, kvf_err *err) {
    pt *d = kvf_calloc((size_t)P->n + 1, sizeof *d);
    int k = drawable(P, d);
    if (k == 0) {
        *why = "no finished point has both a cost per day and an SLO attainment";
        free(d);
        return 0;
    }
    double lo = d[0].cost, hi = d[k - 1].cost, span = hi - lo;
    bool flat = span <= 1e-9 * KVF_MAX(1.0, fabs(hi));
    if (flat) span = KVF_MAX(fabs(hi) * 0.2, 1.0);
    char path[4200];
    snprintf(path, sizeof path, "%s/frontier.dat", files);
    FILE *f = fopen(path, "w");
    if (!f) {
        free(d);
        kvf_fail(err, KVF_EIO, "%s: cannot write", path);
        return -1;
    }
    fprintf(f, "# cost per day (USD), SLO attainment (%%), row; block 0 stable points, 1 the "
               "others, 2 the frontier (stable only), 3 labels (rows sharing a place)\n");
    for (int s = 0; s < 2; s++) {
        int m = 0;
        for (int i = 0; i < k; i++)
            if ((d[i].state == PT_STABLE) == (s == 0)) {
                fprintf(f, "%.10g %.10g %d\n", d[i].cost, d[i].att, d[i].idx);
                m++;
            }
        if (!m) fprintf(f, "NaN NaN 0\n");   // an empty block would end the file for gnuplot
        fprintf(f, "\n\n");
    }
    double best = -1;
    int nf = 0;
    for (int i = 0; i < k; i++)
        if (d[i].state == PT_STABLE && d[i].att > best) {
            fprintf(f, "%.10g %.10g %d\n", d[i].cost, d[i].att, d[i].idx);
            best = d[i].att;
            nf++;
        }
    if (!nf) fprintf(f, "NaN NaN 0\n");
    fprintf(f, "\n\n");
    write_labels(f, d, k, span);
    bool ok = !ferror(f);
    ok = fclose(f) == 0 && ok;
    free(d);
    if (!ok) {
        kvf_fail(err, KVF_EIO, "%s: write failed", path);
        return -1;
    }
    rpt_buf g = {0};
    rpt_buf_puts(&g, GP_HEAD);
    if (flat)
        rpt_buf_printf(&g, "set xrange [%.10g:%.10g]\n", lo - span / 2, hi + span / 2);
    else
        rpt_buf_puts(&g, "set offsets graph 0.06, graph 0.1, 0, 0\n");
    rpt_buf_puts(&g, "plot \"frontier.dat\" index 2 using 1:2 with lines lw 2 lc rgb \"#4e79a7\" "
                     "title \"frontier (stable points)\", \\\n"
                     "     \"frontier.dat\" index 0 using 1:2 with points pt 7 ps 1.2 lc rgb "
                     "\"#e15759\" title \"stable point\", \\\n"
                     "     \"frontier.dat\" index 1 using 1:2 with points pt 6 ps 1.2 lc rgb "
                     "\"#888888\" title \"backlogged or overloaded\", \\\n"
                     "     \"frontier.dat\" index 3 using 1:2:3 with labels left offset 1,0.6 "
                     "notitle\n");
    snprintf(path, sizeof path, "%s/frontier.gp", files);
    kvf_status st = rpt_write_text(path, g.p, g.n, err);
    rpt_buf_free(&g);
    return st ? -1 : k;
}

// The chart as inline SVG, or *note saying why there is none. Returns the SVG (caller frees).
static char *frontier_svg(const char *files, int drawn, const char *why, char *note, size_t nn) {
    const char *off = getenv("KVF_NO_GNUPLOT");
    if (drawn <= 0) {
        snprintf(note, nn, "%s", why ? why : "nothing to draw");
        return NULL;
    }
    if (off && *off && strcmp(off, "0")) {
        snprintf(note, nn, "gnuplot disabled (KVF_NO_GNUPLOT=%s)", off);
        return NULL;
    }
    if (!rpt_on_path("gnuplot")) {
        snprintf(note, nn, "gnuplot is not installed (not on PATH)");
        return NULL;
    }
    if (rpt_gnuplot(files, "frontier.gp") != 0) {
        snprintf(note, nn, "gnuplot failed; see gnuplot.log beside the chart data");
        return NULL;
    }
    char sp[4300];
    snprintf(sp, sizeof sp, "%s/frontier.svg", files);
    char *svg = slurp(sp);
    if (!svg) snprintf(note, nn, "gnuplot wrote no frontier.svg");
    return svg;
}

// ---- the page -----------------------------------------------------------------------------

static const char CSS[] =
    "body{font-family:Helvetica,Arial,sans-serif;margin:0 auto;max-width:1360px;padding:12px "
    "20px;color:#222}h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.15em;margin:1.2em 0 .4em}"
    "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;"
    "vertical-align:top}th{background:#f3f3f3;text-align:left;font-weight:600}td.num{text-align:"
    "right;"
    "font-variant-numeric:tabular-nums;white-space:nowrap}p.note{color:#555;font-size:13px;"
    "margin:.3em 0}td.label{white-space:nowrap;max-width:15em;overflow:hidden;"
    "text-overflow:ellipsis;font-size:12px}td.diff{font-size:12px;white-space:nowrap}"
    ".chart svg{width:100%;max-width:900px;height:auto}.cards{display:grid;"
    "grid-template-columns:repeat(3,1fr);gap:12px;margin:.5em 0}.card{border:1px solid #ddd;"
    "border-radius:6px;padding:.5em .8em;background:#fafafa}.card .lab{font-size:.8em;"
    "color:#666;text-transform:uppercase;letter-spacing:.04em}.card .big{font-size:1.25em;"
    "margin:.2em 0}.card .sub{font-size:.82em;color:#555}.v{font-weight:bold}"
    "tr[data-unfinished] td{color:#888}tr[data-baseline] "
    "td{background:#f4f8ff}.st-stable{color:#2e7d32}"
    ".st-backlogged{color:#b07000}.st-overloaded{color:#c62828}.tablewrap{overflow-x:auto}";

static void span_value(rpt_buf *h, const char *key, json_t *s) {
    double x = rpt_json_num(s, key);
    char t[48];
    rpt_fmt_keyed(key, x, t, sizeof t);
    rpt_buf_printf(h, "<span class=\"v\" data-key=\"%s\" data-value=\"%.17g\">%s</span>", key, x,
                   t);
}

// The best point of a kind: the cheapest stable one, or the stable one with the highest
// attainment (cheaper on ties); -1 when there is none.
static int best_point(const pts *P, bool by_attainment) {
    int b = -1;
    for (int i = 0; i < P->n; i++) {
        const pt *q = &P->p[i];
        if (q->state != PT_STABLE || !isfinite(q->cost) || !isfinite(q->att)) continue;
        if (b < 0) {
            b = i;
            continue;
        }
        const pt *c = &P->p[b];
        bool better = by_attainment ? q->att > c->att || (q->att == c->att && q->cost < c->cost)
                                    : q->cost < c->cost || (q->cost == c->cost && q->att > c->att);
        if (better) b = i;
    }
    return b;
}

static void card_point(rpt_buf *h, const char *id, const char *lab, const json_t *points, int b) {
    rpt_buf_printf(h, "<div class=\"card\" id=\"%s\"", id);
    if (b >= 0) rpt_buf_printf(h, " data-row=\"%d\"", b + 1);
    rpt_buf_puts(h, "><div class=\"lab\">");
    rpt_buf_html(h, lab);
    rpt_buf_puts(h, "</div><div class=\"big\">");
    if (b < 0) {
        rpt_buf_puts(h, "none</div><div class=\"sub\">no stable point with a cost and an SLO "
                        "attainment</div></div>\n");
        return;
    }
    json_t *p = json_array_get(points, (size_t)b), *s = json_object_get(p, "summary");
    rpt_buf_printf(h, "#%d: ", b + 1);
    span_value(h, "economics.cost_per_day_usd", s);
    rpt_buf_puts(h, " per day, ");
    span_value(h, "slo.attainment", s);
    rpt_buf_puts(h, " within SLO</div><div class=\"sub\">");
    const char *k;
    json_t *v;
    int n = 0;
    json_object_foreach(json_object_get(p, "keys"), k, v) {
        if (n++) rpt_buf_puts(h, ", ");
        rpt_buf_html(h, k);
        rpt_buf_puts(h, " = ");
        rpt_buf_html(h, json_is_string(v) ? json_string_value(v) : "-");
    }
    if (!n) rpt_buf_html(h, json_string_value(json_object_get(p, "label")));
    rpt_buf_puts(h, "</div></div>\n");
}

static void sec_answer(rpt_buf *h, const pts *P, const json_t *points) {
    rpt_buf_puts(h, "<section id=\"answer\">\n<div class=\"cards\">\n");
    card_point(h, "hl-cheapest", "cheapest stable point", points, best_point(P, false));
    card_point(h, "hl-best-slo", "highest SLO attainment among stable points", points,
               best_point(P, true));
    rpt_buf_printf(h,
                   "<div class=\"card\" id=\"hl-states\" data-stable=\"%d\" data-unstable=\"%d\" "
                   "data-unfinished=\"%d\"><div class=\"lab\">points</div><div class=\"big\">"
                   "<span class=\"v\">%d</span> stable, <span class=\"v\">%d</span> "
                   "backlogged or overloaded, <span class=\"v\">%d</span> unfinished</div>"
                   "<div class=\"sub\">",
                   P->n_stable, P->n_unstable, P->n_unfinished, P->n_stable, P->n_unstable,
                   P->n_unfinished);
    if (!P->verdicts)
        rpt_buf_puts(h, "no point carries a saturation verdict: all finished points count as "
                        "stable");
    else
        rpt_buf_puts(h, "only stable points make the frontier: a point whose queues grow has "
                        "figures that depend on how long it ran");
    if (P->baseline >= 0) rpt_buf_printf(h, "; differences against #%d", P->baseline + 1);
    rpt_buf_puts(h, "</div></div>\n</div>\n</section>\n");
}

static void fig_cell(rpt_buf *h, const char *key, json_t *v) {
    char s[64];
    if (json_is_number(v)) {
        double x = json_number_value(v);
        rpt_fmt_keyed(key, x, s, sizeof s);
        rpt_buf_printf(h, "<td class=\"num\" data-key=\"%s\" data-value=\"%.17g\">%s</td>", key, x,
                       s);
    } else {
        rpt_buf_printf(h, "<td data-key=\"%s\">", key);
        rpt_buf_html(h, json_is_string(v) ? json_string_value(v) : "-");
        rpt_buf_puts(h, "</td>");
    }
}

// The difference cell of row p against the baseline b: cost and latency in percent,
// attainment in points; each with its exact figure in a data attribute.
static void diff_cell(rpt_buf *h, json_t *s, json_t *b, bool is_base, bool unfinished) {
    rpt_buf_puts(h, "<td class=\"diff\">");
    if (is_base) {
        rpt_buf_puts(h, "baseline</td>");
        return;
    }
    if (unfinished || !s || !b) {
        rpt_buf_puts(h, "-</td>");
        return;
    }
    static const struct {
        const char *key, *what;
        bool points;
    } D[] = {
        {"economics.cost_per_day_usd", "cost", false},
        {"slo.attainment", "SLO", true},
        {"ttft_ms.p90", "TTFT p90", false},
        {"tpot_ms.p90", "TPOT p90", false},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof D / sizeof D[0]; i++) {
        double x = rpt_json_num(s, D[i].key), x0 = rpt_json_num(b, D[i].key);
        if (!isfinite(x) || !isfinite(x0)) continue;
        double d = D[i].points ? 100 * (x - x0) : x0 != 0 ? 100 * (x - x0) / fabs(x0) : NAN;
        if (!isfinite(d)) continue;
        rpt_buf_printf(h, "%s<span data-diff-key=\"%s\" data-diff=\"%.17g\">%s %+.1f %s</span>",
                       n++ ? "<br>" : "", D[i].key, d, D[i].what, d, D[i].points ? "pt" : "%");
    }
    rpt_buf_puts(h, n ? "</td>" : "-</td>");
}

// The status cell: the saturation verdict, or "unfinished" with its reason.
static void status_cell(rpt_buf *h, json_t *p, const pt *q) {
    const char *why = NULL;
    if (q->state == PT_UNFINISHED) {
        finished(p, &why);
        rpt_buf_puts(h, "<td class=\"status\" data-status=\"unfinished\">unfinished: ");
        rpt_buf_html(h, why);
        rpt_buf_puts(h, "</td>");
        return;
    }
    const char *sat = q->sat ? q->sat : "not checked";
    rpt_buf_printf(h,
                   "<td class=\"status st-%s\" data-key=\"saturation.state\" "
                   "data-status=\"%s\">",
                   q->sat ? q->sat : "none", q->sat ? q->sat : "none");
    rpt_buf_html(h, sat);
    rpt_buf_puts(h, "</td>");
}

// The last part of a path: a run's name without the folders above it.
static const char *base_name(const char *s) {
    if (!s) return "";
    size_t len = strlen(s);
    while (len > 1 && s[len - 1] == '/')
        len--;
    const char *b = s + len;
    while (b > s && b[-1] != '/')
        b--;
    return b;
}

static void sec_table(rpt_buf *h, const pts *P, const json_t *points, json_t *keys) {
    size_t i, j;
    json_t *e, *p;
    rpt_buf_puts(h, "<h2 id=\"points\">Points</h2>\n<p class=\"note\">Inputs: the keys after the "
                    "run's name (what tells the points apart); outputs: every figure after them, "
                    "from each point's summary.json.</p>\n<div class=\"tablewrap\"><table "
                    "id=\"points-table\"><thead><tr>"
                    "<th>#</th><th>run</th>");
    json_array_foreach(keys, i, e) {
        rpt_buf_puts(h, "<th class=\"key\">");
        rpt_buf_html(h, json_string_value(e));
        rpt_buf_puts(h, "</th>");
    }
    rpt_buf_puts(h, "<th>status</th>");
    if (P->baseline >= 0) rpt_buf_printf(h, "<th>against #%d</th>", P->baseline + 1);
    for (int f = 0; f < N_FIGS; f++)
        rpt_buf_printf(h, "<th>%s</th>", FIGS[f].head);
    rpt_buf_puts(h, "</tr></thead><tbody>\n");
    json_t *bs = P->baseline >= 0
                     ? json_object_get(json_array_get(points, (size_t)P->baseline), "summary")
                     : NULL;
    json_array_foreach(points, i, p) {
        const pt *q = &P->p[i];
        const char *label = json_string_value(json_object_get(p, "label"));
        rpt_buf_printf(h,
                       "<tr class=\"point\"%s%s><td class=\"num\">%zu</td><td class=\"label\" "
                       "title=\"",
                       q->state == PT_UNFINISHED ? " data-unfinished=\"1\"" : "",
                       (int)i == P->baseline ? " data-baseline=\"1\"" : "", i + 1);
        rpt_buf_html(h, label);
        rpt_buf_puts(h, "\">");
        rpt_buf_html(h, base_name(label));
        rpt_buf_puts(h, "</td>");
        json_array_foreach(keys, j, e) {
            json_t *v = json_object_get(json_object_get(p, "keys"), json_string_value(e));
            rpt_buf_puts(h, "<td>");
            rpt_buf_html(h, json_is_string(v) ? json_string_value(v) : "-");
            rpt_buf_puts(h, "</td>");
        }
        status_cell(h, p, q);
        json_t *s = json_object_get(p, "summary");
        if (P->baseline >= 0) diff_cell(h, s, bs, (int)i == P->baseline, q->state == PT_UNFINISHED);
        for (int f = 0; f < N_FIGS; f++)
            fig_cell(h, FIGS[f].key, json_is_object(s) ? rpt_json_path(s, FIGS[f].key) : NULL);
        rpt_buf_puts(h, "</tr>\n");
    }
    rpt_buf_puts(h, "</tbody></table></div>\n");
}

// Text figures that tell the points apart (break-even notes, the basis of a figure), each
// sentence whole, below the table.
static void sec_notes(rpt_buf *h, const json_t *points) {
    static const char *const KEYS[] = {"economics.break_even_note", "economics.day_basis",
                                       "economics.ssd_basis", "saturation.reason"};
    rpt_buf n = {0};
    for (size_t k = 0; k < sizeof KEYS / sizeof KEYS[0]; k++) {
        size_t i;
        json_t *p;
        json_array_foreach(points, i, p) {
            const char *t =
                json_string_value(rpt_json_path(json_object_get(p, "summary"), KEYS[k]));
            if (!t || !*t) continue;
            char words[128];
            rpt_key_words(KEYS[k], words, sizeof words);
            rpt_buf_printf(&n, "<li data-key=\"%s\" data-row=\"%zu\">#%zu, ", KEYS[k], i + 1,
                           i + 1);
            rpt_buf_html(&n, words);
            rpt_buf_puts(&n, ": ");
            rpt_buf_html(&n, t);
            rpt_buf_puts(&n, "</li>\n");
        }
    }
    if (n.p) {
        rpt_buf_puts(h, "<h2 id=\"notes\">Notes</h2>\n<ul class=\"notes\">\n");
        rpt_buf_puts(h, n.p);
        rpt_buf_puts(h, "</ul>\n");
    }
    rpt_buf_free(&n);
}

// The keys that tell the points apart, in first-seen order.
static json_t *point_keys(const json_t *points) {
    json_t *keys = json_array(), *seen = json_object();
    size_t i;
    json_t *p;
    json_array_foreach(points, i, p) {
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(p, "keys"), k, v) {
            if (json_object_get(seen, k)) continue;
            json_object_set(seen, k, json_true());
            json_array_append_new(keys, json_string(k));
        }
    }
    json_decref(seen);
    return keys;
}

kvf_status rpt_points_page(const char *path, const char *title, const struct json_t *points_,
                           const rpt_points_opts *o, kvf_err *err) {
    KVF_ASSERT(path && title && err);
    const json_t *points = points_;
    if (!json_is_array(points)) return kvf_fail(err, KVF_EINVAL, "%s: no points", path);
    char files[4200];   // chart files next to the page: <stem>_files/
    snprintf(files, sizeof files, "%s", path);
    char *dot = strrchr(files, '.'), *slash = strrchr(files, '/');
    if (dot && (!slash || dot > slash)) *dot = '\0';
    strncat(files, "_files", sizeof files - strlen(files) - 1);
    kvf_status st = kvf_mkdirs(files, err);   // and the page's folder
    if (st) return st;
    pts P;
    pts_load(&P, points, o && o->diffs ? o->baseline : -1);
    const char *why = NULL;
    int drawn = frontier_files(files, &P, &why, err);
    if (drawn < 0) {
        free(P.p);
        return err->code;
    }
    char note[600] = "";
    char *svg = frontier_svg(files, drawn, why, note, sizeof note);
    json_t *keys = point_keys(points);

    rpt_buf h = {0};
    rpt_buf_puts(&h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
    rpt_buf_html(&h, title);
    rpt_buf_printf(&h, "</title><style>%s</style></head><body>\n<h1>", CSS);
    rpt_buf_html(&h, title);
    rpt_buf_printf(&h, "</h1>\n<p class=\"note\">%d point%s.</p>\n", P.n, P.n == 1 ? "" : "s");
    sec_answer(&h, &P, points);
    rpt_buf_puts(&h, "<h2 id=\"frontier\">Cost against SLO attainment</h2>\n");
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
    rpt_buf_puts(&h, "<p class=\"note\">One marker per finished point, labelled with its row "
                     "number (points that sit together share a label); the line joins the "
                     "frontier, the stable points no other stable point beats on both cost per "
                     "day and SLO attainment. Unfinished points are not drawn. Data: ");
    rpt_buf_html(&h, files);
    rpt_buf_puts(&h, "/frontier.dat.</p>\n");
    sec_table(&h, &P, points, keys);
    sec_notes(&h, points);
    rpt_buf_puts(&h, "</body></html>\n");
    st = rpt_write_text(path, h.p, h.n, err);
    rpt_buf_free(&h);
    free(svg);
    free(P.p);
    json_decref(keys);
    return st;
}

kvf_status rpt_points_html(const char *path, const char *title, const struct json_t *points,
                           kvf_err *err) {
    return rpt_points_page(path, title, points, NULL, err);
}
