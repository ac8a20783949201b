// reports/rpt_assess.c -- the page of `kvfleet assess` (assess.html) from its assess.json.
//
// The answer first: what a shared KV store does for this traffic (the hit rate it reaches on
// the reference design, against the ideal), what it does to the cost per million tokens, and
// whether the run of the design kept up (its saturation verdict); then the store grid (the
// hit rate by store size and retention, coloured by value: the page's chart), then the cost
// table with and without the store. Every figure carries data-key (its path in assess.json)
// and data-value (exact), so a reader or a test compares the page with the JSON.
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rpt.h"
#include "rpt_util.h"

static const char CSS[] =
    "body{font-family:Helvetica,Arial,sans-serif;max-width:1320px;margin:0 auto;padding:12px "
    "20px;color:#222}h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.15em;margin:1.2em 0 .4em;"
    "border-bottom:1px solid #ccc}table{border-collapse:collapse;margin:.5em 0;font-size:.92em}"
    "th,td{border:1px solid #ccc;padding:.25em .6em}th{background:#f3f3f3;text-align:left}"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}.meta{color:#444;font-size:.9em;"
    "margin:.3em 0}.cards{display:grid;grid-template-columns:repeat(4,1fr);gap:12px;"
    "margin:.6em 0}.card{border:1px solid #ddd;border-radius:6px;padding:.6em .8em;"
    "background:#fafafa}.card .lab{font-size:.8em;color:#666;text-transform:uppercase;"
    "letter-spacing:.04em}.card .big{font-size:1.3em;margin:.25em 0}.card .sub{font-size:.82em;"
    "color:#555}.v{font-weight:bold}.verdict{padding:.5em .9em;border-radius:4px;margin:.4em 0}"
    ".verdict-stable{background:#e6f4ea;border-left:6px solid #2e7d32}.verdict-other{"
    "background:#fff4e0;border-left:6px solid #e0a000}td .v{font-weight:normal}";

// A figure of assess.json at key, formatted in its unit.
static void value(rpt_buf *b, json_t *j, const char *key) {
    double x = rpt_json_num(j, key);
    char t[48];
    rpt_fmt_keyed(key, x, t, sizeof t);
    rpt_buf_printf(b, "<span class=\"v\" data-key=\"%s\" ", key);
    if (isfinite(x))
        rpt_buf_printf(b, "data-value=\"%.17g\">", x);
    else
        rpt_buf_puts(b, "data-value=\"null\">");
    rpt_buf_html(b, t);
    rpt_buf_puts(b, "</span>");
}

static void td_value(rpt_buf *b, json_t *j, const char *key) {
    rpt_buf_puts(b, "<td class=\"num\">");
    value(b, j, key);
    rpt_buf_puts(b, "</td>");
}

static void fmt_ttl(double s, char *out, size_t n) {
    if (s <= 0)
        snprintf(out, n, "never");
    else
        rpt_fmt_duration(s, out, n);
}

json_t *rpt_assess_warnings(const json_t *assess) {
    json_t *w = json_array(), *j = (json_t *)assess;
    static const char *const runs[] = {"with_store", "no_store"};
    for (int i = 0; i < 2; i++) {
        char k[64];
        snprintf(k, sizeof k, "%s.busy_share", runs[i]);
        double busy = rpt_json_num(j, k);
        if (!(isfinite(busy) && busy < RPT_ASSESS_IDLE_BUSY)) continue;
        snprintf(k, sizeof k, "%s.cost_per_mtok_output_usd", runs[i]);
        char pct[32], usd[48], t[600];
        rpt_fmt_pct(1 - busy, pct, sizeof pct);
        rpt_fmt_unit(RPT_U_USD, rpt_json_num(j, k), usd, sizeof usd);
        snprintf(t, sizeof t,
                 "the reference design%s is %s idle with this trace: its cost per million "
                 "tokens as provisioned (%s per output Mtok) bills an idle fleet; read the cost "
                 "at busy GPU-hours, or bring the trace up to the design's load with --set "
                 "workload.time_scale=X (X < 1)",
                 i ? " without the store" : "", pct, usd);
        json_array_append_new(w, json_string(t));
        if (i == 0) {
            // both runs share the fleet: say it once unless only the second is idle
            snprintf(k, sizeof k, "no_store.busy_share");
            double b2 = rpt_json_num(j, k);
            if (isfinite(b2) && b2 < RPT_ASSESS_IDLE_BUSY) break;
        }
    }
    return w;
}

static void sec_warnings(rpt_buf *b, json_t *j) {
    json_t *w = json_object_get(j, "warnings");
    if (!json_array_size(w)) return;
    rpt_buf_puts(b, "<div class=\"verdict verdict-other\" id=\"hl-warnings\">");
    size_t i;
    json_t *v;
    json_array_foreach(w, i, v) {
        rpt_buf_puts(b, i ? "<br><b>Warning</b>: " : "<b>Warning</b>: ");
        rpt_buf_html(b, json_string_value(v) ? json_string_value(v) : "");
    }
    rpt_buf_puts(b, "</div>\n");
}

static void sec_answer(rpt_buf *b, json_t *j) {
    const char *sat = json_string_value(rpt_json_path(j, "with_store.saturation"));
    bool stable = sat && !strcmp(sat, "stable");
    rpt_buf_printf(b,
                   "<section id=\"answer\">\n<div class=\"verdict verdict-%s\" "
                   "id=\"hl-saturation\" data-state=\"",
                   stable ? "stable" : "other");
    rpt_buf_html(b, sat ? sat : "n/a");
    rpt_buf_puts(b, "\">");
    if (stable)
        rpt_buf_puts(b, "<b>Stable</b>: the reference design keeps up with this traffic, so the "
                        "figures below hold for it.");
    else {
        rpt_buf_puts(b, "<b>");
        rpt_buf_html(b, sat ? sat : "Not checked");
        rpt_buf_puts(b, "</b>: the reference design does not keep up with this traffic as "
                        "given; latencies and costs depend on how long it runs (scale the "
                        "trace with --set workload.time_scale).");
    }
    rpt_buf_puts(b, "</div>\n");
    sec_warnings(b, j);
    rpt_buf_puts(b, "<div class=\"cards\">\n<div class=\"card\" id=\"hl-hit\"><div "
                    "class=\"lab\">hit rate with a shared store</div><div class=\"big\">");
    value(b, j, "with_store.hit_rate");
    rpt_buf_puts(b, " of input tokens</div><div class=\"sub\">without the store ");
    value(b, j, "no_store.hit_rate");
    rpt_buf_puts(b, "</div></div>\n<div class=\"card\" id=\"hl-ideal\"><div class=\"lab\">ideal "
                    "hit rate</div><div class=\"big\">");
    value(b, j, "ideal_hit_rate");
    rpt_buf_puts(b, "</div><div class=\"sub\">an unbounded store that keeps every prefix "
                    "forever</div></div>\n<div class=\"card\" id=\"hl-cost\"><div class=\"lab\">"
                    "cost per million tokens</div><div class=\"big\">");
    value(b, j, "with_store.cost_per_mtok_usd_provisioned");
    rpt_buf_puts(b, " with the store</div><div class=\"sub\">");
    value(b, j, "no_store.cost_per_mtok_usd_provisioned");
    double a = rpt_json_num(j, "with_store.cost_per_mtok_usd_provisioned"),
           c = rpt_json_num(j, "no_store.cost_per_mtok_usd_provisioned");
    char ch[48] = "";
    if (isfinite(a) && isfinite(c) && c != 0)
        snprintf(ch, sizeof ch, " (%+.1f %% with it)", 100 * (a - c) / c);
    rpt_buf_printf(b, " without%s; as provisioned</div></div>\n", ch);
    rpt_buf_puts(b, "<div class=\"card\" id=\"hl-busy\"><div class=\"lab\">at busy GPU-hours"
                    "</div><div class=\"big\">");
    value(b, j, "with_store.cost_per_mtok_usd_busy");
    rpt_buf_puts(b, " with the store</div><div class=\"sub\">");
    value(b, j, "no_store.cost_per_mtok_usd_busy");
    rpt_buf_puts(b, " without; a fleet sized to, or shared with, this traffic</div></div>\n"
                    "</div>\n</section>\n");
}

static void sec_grid(rpt_buf *b, json_t *j) {
    rpt_buf_puts(b, "<h2 id=\"store\">Hit rate a shared store reaches, by size and retention"
                    "</h2>\n<p class=\"meta\">The trace's prefix blocks replayed in arrival order "
                    "through an LRU store of that size whose entries expire that long after their "
                    "last use. Size as a share of the trace's distinct blocks and in bytes of the "
                    "reference model's KV cache. A retention longer than the trace's span acts as "
                    "'never' for this trace.</p>\n<table id=\"assess-store-grid\"><tr><th>store "
                    "size</th>");
    size_t i, k;
    json_t *v, *h;
    json_array_foreach(json_object_get(j, "retention_s"), i, v) {
        char t[32];
        fmt_ttl(json_number_value(v), t, sizeof t);
        rpt_buf_printf(b, "<th>retention %s</th>", t);
    }
    rpt_buf_puts(b, "</tr>\n");
    json_array_foreach(json_object_get(j, "store_grid"), i, v) {
        double share = rpt_json_num(v, "size_share");
        char bytes[32], line[96], pct[32];
        rpt_fmt_bytes(rpt_json_num(v, "size_bytes"), bytes, sizeof bytes);
        if (share > 0)
            snprintf(line, sizeof line, "%s (%s)", rpt_fmt_pct(share, pct, sizeof pct), bytes);
        else
            snprintf(line, sizeof line, "unbounded (%s)", bytes);
        rpt_buf_puts(b, "<tr><td>");
        rpt_buf_html(b, line);
        rpt_buf_puts(b, "</td>");
        json_array_foreach(json_object_get(v, "hit_rate"), k, h) {
            double x = json_number_value(h);
            rpt_buf_printf(b,
                           "<td class=\"num\" style=\"background:rgba(40,120,200,%.2f)\" "
                           "data-value=\"%.17g\">%s</td>",
                           0.05 + 0.5 * x, x, rpt_fmt_pct(x, pct, sizeof pct));
        }
        rpt_buf_puts(b, "</tr>\n");
    }
    rpt_buf_puts(b, "</table>\n");
}

static void sec_cost(rpt_buf *b, json_t *j) {
    rpt_buf_puts(b, "<h2 id=\"cost\">Cost per million tokens on the reference design</h2>\n"
                    "<p class=\"meta\">The trace run on the reference design and on the same "
                    "cluster without a shared store (<code>kv_cache.ssd.capacity_tb = 0</code>). "
                    "'As provisioned' divides the fleet's cost per day by the day's tokens; 'at "
                    "busy GPU-hours' bills each pool only for its busy share (a fleet sized to, or "
                    "shared with, this traffic) plus the store. The store is billed at what its "
                    "retention needs.</p>\n<table id=\"assess-cost\"><tr><th>figure</th><th>with "
                    "shared store</th><th>without</th><th>change</th></tr>\n");
    static const struct {
        const char *k, *label;
    } rows[] = {
        {"hit_rate", "cache hit rate (simulated)"},
        {"ttft_ms_mean", "TTFT mean"},
        {"ttft_ms_p90", "TTFT p90"},
        {"tpot_ms_p90", "TPOT p90"},
        {"busy_share", "busy share of GPU time"},
        {"ssd_tb_billed", "SSD billed (TB)"},
        {"cost_per_day_usd", "cost per day"},
        {"cost_per_mtok_usd_provisioned", "cost per million tokens, as provisioned"},
        {"cost_per_mtok_usd_busy", "cost per million tokens, at busy GPU-hours"},
        {"cost_per_mtok_input_usd", "cost per million input tokens, as provisioned"},
        {"cost_per_mtok_output_usd", "cost per million output tokens, as provisioned"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char kw[96], kn[96];
        snprintf(kw, sizeof kw, "with_store.%s", rows[i].k);
        snprintf(kn, sizeof kn, "no_store.%s", rows[i].k);
        double a = rpt_json_num(j, kw), c = rpt_json_num(j, kn);
        rpt_buf_puts(b, "<tr><td>");
        rpt_buf_html(b, rows[i].label);
        rpt_buf_puts(b, "</td>");
        td_value(b, j, kw);
        td_value(b, j, kn);
        if (rpt_key_unit(kw) == RPT_U_FRAC && isfinite(a) && isfinite(c))
            rpt_buf_printf(b, "<td class=\"num\">%+.2f pt</td>", 100 * (a - c));
        else if (c != 0 && isfinite(a) && isfinite(c))
            rpt_buf_printf(b, "<td class=\"num\">%+.1f %%</td>", 100 * (a - c) / c);
        else
            rpt_buf_puts(b, "<td>n/a</td>");
        rpt_buf_puts(b, "</tr>\n");
    }
    rpt_buf_puts(b, "</table>\n<p class=\"meta\">Runs: <code>with_store/</code> and "
                    "<code>no_store/</code> beside this page (summary.json, report.html).</p>\n");
}

kvf_status rpt_assess_html(const char *path, const struct json_t *assess, kvf_err *err) {
    KVF_ASSERT(path && err);
    json_t *j = (json_t *)assess;
    if (!json_is_object(j)) return kvf_fail(err, KVF_EINVAL, "%s: no assessment", path);
    const char *trace = json_string_value(json_object_get(j, "trace"));
    rpt_buf b = {0};
    rpt_buf_printf(&b,
                   "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<title>kvfleet assess</title><style>%s</style></head><body>\n<h1>"
                   "Assessment of ",
                   CSS);
    rpt_buf_html(&b, trace ? trace : "trace");
    rpt_buf_puts(&b, "</h1>\n<p class=\"meta\">");
    char line[900], span[32];
    rpt_fmt_duration(rpt_json_num(j, "span_s"), span, sizeof span);
    snprintf(line, sizeof line,
             "%.0f requests over %s (format %s); %.0f distinct %.0f-token blocks. Reference "
             "design: %s (%s on %s). Every figure is an output for this trace; the inputs are the "
             "trace, the scenario and the grid.",
             rpt_json_num(j, "requests"), span, json_string_value(json_object_get(j, "format")),
             rpt_json_num(j, "distinct_blocks"), rpt_json_num(j, "block_tokens"),
             json_string_value(json_object_get(j, "scenario")),
             json_string_value(rpt_json_path(j, "with_store.model")),
             json_string_value(rpt_json_path(j, "with_store.hardware")));
    rpt_buf_html(&b, line);
    rpt_buf_puts(&b, "</p>\n");
    sec_answer(&b, j);
    sec_grid(&b, j);
    sec_cost(&b, j);
    rpt_buf_puts(&b, "<h2 id=\"ideal\">Ideal hit rate</h2>\n<table id=\"assess-ideal\"><tr><th>"
                     "figure</th><th>value</th><th>rests on</th></tr><tr><td>ideal hit rate "
                     "(unbounded store, kept forever)</td><td class=\"num\">");
    value(&b, j, "ideal_hit_rate");
    rpt_buf_puts(&b, "</td><td>prefix blocks of the trace; as <code>kvfleet trace stats</code>"
                     "</td></tr></table>\n</body></html>\n");
    kvf_status s = rpt_write_text(path, b.p, b.n, err);
    rpt_buf_free(&b);
    return s;
}
