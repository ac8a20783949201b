// reports/rpt_report.c -- report.html and report.md from DIR/summary.json and DIR/results.db.
//
// Every figure in the tables is read from summary.json (the headline cells carry the exact
// value in data-value, so a reader or a test can compare them with the JSON); charts are drawn
// from the database's request and timeseries tables and the economics object's sensitivity
// tables. Chart data go to DIR/report_files/<chart>.dat and one gnuplot script
// (report_files/charts.gp) draws them all as SVG in a single gnuplot process; the HTML page
// inlines the SVGs (it opens offline), the Markdown page links them. Without gnuplot (not on
// PATH, or KVF_NO_GNUPLOT=1) both pages say so and the .dat and .gp files stay.
//
// Speed: one scan of the timeseries table and one sorted read per CDF; series longer than
// RPT_MAX_POINTS are averaged into that many buckets, CDFs keep RPT_MAX_CDF quantiles.
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rpt.h"
#include "rpt_util.h"

#define RPT_MAX_POINTS 1500
#define RPT_MAX_CDF 800
#define RPT_MAX_CHARTS 24
#define RPT_MAX_SERIES 8
#define RPT_MAX_CLASSES_CDF 5

typedef struct ts_series {
    char metric[48];
    char pool[24];
    bool per_instance;   // built from instance >= 0 rows (mean over instances)
    double *t, *v;       // (n) time s, value
    size_t n, cap;
} ts_series;

typedef struct chart {
    char name[40];   // file stem
    char title[160];
    char xlabel[80], ylabel[80];
    char caption[400];
    int n_series;
    char label[RPT_MAX_SERIES][64];
    bool bars;   // boxes with text x labels
    bool logx;
    bool points_last;   // last series drawn as points (a marker)
    bool zero_y;        // non-negative series: y from 0 with headroom above the top
    bool scatter;       // every series as points, with the line y = x
    int y2_from;        // series from this index on the right axis (0 = none)
    char y2label[80];   // the right axis's label
    bool svg_ok;        // SVG produced
} chart;

typedef struct rep {
    const char *dir;
    char files[4096];   // DIR/report_files
    json_t *summary;
    json_t *validation;   // may be NULL
    sqlite3 *db;          // may be NULL
    char db_note[512];
    ts_series *ts;
    size_t nts;
    chart ch[RPT_MAX_CHARTS];
    int nch;
    rpt_buf gp;   // the gnuplot script
    bool gnuplot;
    bool write_failed;   // a chart data file could not be written whole
    char gnuplot_note[512];
} rep;

// ---- small helpers ----------------------------------------------------------------------

static void copy_str(char *dst, size_t n, const char *src) {
    size_t len = src ? strlen(src) : 0;
    if (len >= n) len = n - 1;   // truncates long names
    if (len) memcpy(dst, src, len);
    dst[len] = '\0';
}

// A label safe inside a double-quoted gnuplot string.
static void gp_label(rpt_buf *b, const char *s) {
    rpt_buf_putn(b, "\"", 1);
    for (; s && *s; s++) {
        char c = *s;
        if (c == '"' || c == '\\' || c == '\n' || c == '@' || c == '^' || c == '_' || c == '&' ||
            c == '{' || c == '}' || c == '~')
            c = c == '_' ? '_' : c == '\n' ? ' ' : '-';   // labels are set noenhanced
        rpt_buf_putn(b, &c, 1);
    }
    rpt_buf_putn(b, "\"", 1);
}

// ---- timeseries -------------------------------------------------------------------------

static ts_series *ts_get(rep *r, const char *metric, const char *pool, bool per_inst, bool create) {
    for (size_t i = 0; i < r->nts; i++)
        if (r->ts[i].per_instance == per_inst && !strcmp(r->ts[i].metric, metric) &&
            !strcmp(r->ts[i].pool, pool))
            return &r->ts[i];
    if (!create) return NULL;
    r->ts = kvf_realloc(r->ts, (r->nts + 1) * sizeof *r->ts);
    ts_series *s = &r->ts[r->nts++];
    memset(s, 0, sizeof *s);
    copy_str(s->metric, sizeof s->metric, metric);
    copy_str(s->pool, sizeof s->pool, pool);
    s->per_instance = per_inst;
    return s;
}

static void ts_push(ts_series *s, double t, double v) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->t = kvf_realloc(s->t, s->cap * sizeof *s->t);
        s->v = kvf_realloc(s->v, s->cap * sizeof *s->v);
    }
    s->t[s->n] = t;
    s->v[s->n] = v;
    s->n++;
}

typedef struct tv {
    double t, v;
} tv;

static int cmp_tv(const void *a, const void *b) {
    const tv *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

// Sorts by time and merges equal times into their mean (instances sampled together).
static void ts_normalise(ts_series *s) {
    if (s->n == 0) return;
    bool sorted = true;
    for (size_t i = 1; i < s->n; i++)
        if (s->t[i] <= s->t[i - 1]) sorted = false;
    if (sorted) return;
    tv *a = kvf_malloc(s->n * sizeof *a);
    for (size_t i = 0; i < s->n; i++)
        a[i] = (tv){s->t[i], s->v[i]};
    qsort(a, s->n, sizeof *a, cmp_tv);
    size_t m = 0;
    for (size_t i = 0; i < s->n;) {
        size_t j = i;
        double sum = 0;
        while (j < s->n && a[j].t == a[i].t)
            sum += a[j++].v;
        s->t[m] = a[i].t;
        s->v[m] = sum / (double)(j - i);
        m++;
        i = j;
    }
    s->n = m;
    free(a);
}

// A failed read of results.db: a damaged file (corrupt pages, not a database) is bad input
// (exit 2), anything else a failure of the read itself.
static kvf_status db_fail(const rep *r, const char *what, kvf_err *err) {
    int ec = sqlite3_errcode(r->db) & 0xff;
    bool bad = ec == SQLITE_CORRUPT || ec == SQLITE_NOTADB;
    return kvf_fail(err, bad ? KVF_EPARSE : KVF_ERUN, "%s/results.db: %s: %s%s", r->dir, what,
                    sqlite3_errmsg(r->db),
                    bad ? " (the file is damaged; a run writes it again)" : "");
}

// A statement that did not prepare for want of its table (an older or partial results
// database: the part is left out) rather than a damaged file.
static bool db_no_table(const rep *r) {
    int ec = sqlite3_errcode(r->db) & 0xff;
    return ec != SQLITE_CORRUPT && ec != SQLITE_NOTADB;
}

static kvf_status load_timeseries(rep *r, kvf_err *err) {
    if (!r->db) return KVF_OK;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(r->db, "SELECT metric, pool, instance, t_s, value FROM timeseries", -1,
                           &st, NULL) != SQLITE_OK)
        // no timeseries table: charts say "no data"
        return db_no_table(r) ? KVF_OK : db_fail(r, "timeseries", err);
    ts_series *last = NULL;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *m = (const char *)sqlite3_column_text(st, 0);
        const char *p = (const char *)sqlite3_column_text(st, 1);
        if (!m || !p || sqlite3_column_type(st, 3) == SQLITE_NULL ||
            sqlite3_column_type(st, 4) == SQLITE_NULL)
            continue;
        bool per = sqlite3_column_int(st, 2) >= 0;
        ts_series *s = last;
        if (!s || s->per_instance != per || strcmp(s->metric, m) || strcmp(s->pool, p))
            s = ts_get(r, m, p, per, true);
        ts_push(s, sqlite3_column_double(st, 3), sqlite3_column_double(st, 4));
        last = s;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return db_fail(r, "timeseries", err);
    for (size_t i = 0; i < r->nts; i++)
        ts_normalise(&r->ts[i]);
    return KVF_OK;
}

// The pool-wide series of metric in pool: instance -1 rows, else the mean over instances.
static ts_series *ts_find(rep *r, const char *metric, const char *pool) {
    ts_series *s = ts_get(r, metric, pool, false, false);
    if (s && s->n) return s;
    s = ts_get(r, metric, pool, true, false);
    return s && s->n ? s : NULL;
}

// The series of metric in the first pool of prefs that has it, else in any pool.
static ts_series *ts_find_any(rep *r, const char *metric) {
    static const char *const prefs[] = {"cluster", "kv", "prefill", "decode", "vision"};
    for (size_t i = 0; i < sizeof prefs / sizeof prefs[0]; i++) {
        ts_series *s = ts_find(r, metric, prefs[i]);
        if (s) return s;
    }
    for (size_t i = 0; i < r->nts; i++)
        if (!strcmp(r->ts[i].metric, metric) && r->ts[i].n) return &r->ts[i];
    return NULL;
}

// Writes one data block (time, value*scale), averaged into at most RPT_MAX_POINTS buckets.
static void write_series_block(FILE *f, const ts_series *s, double tdiv, double scale) {
    size_t n = s->n, buckets = n > RPT_MAX_POINTS ? RPT_MAX_POINTS : n;
    for (size_t b = 0; b < buckets; b++) {
        size_t lo = b * n / buckets, hi = (b + 1) * n / buckets;
        double st = 0, sv = 0;
        for (size_t i = lo; i < hi; i++) {
            st += s->t[i];
            sv += s->v[i];
        }
        double k = (double)(hi - lo);
        fprintf(f, "%.9g %.9g\n", st / k / tdiv, sv / k * scale);
    }
    fprintf(f, "\n\n");
}

// ---- charts -----------------------------------------------------------------------------

static chart *chart_new(rep *r, const char *name, const char *title, const char *xl,
                        const char *yl) {
    if (r->nch == RPT_MAX_CHARTS) return NULL;
    chart *c = &r->ch[r->nch++];
    memset(c, 0, sizeof *c);
    copy_str(c->name, sizeof c->name, name);
    copy_str(c->title, sizeof c->title, title);
    copy_str(c->xlabel, sizeof c->xlabel, xl);
    copy_str(c->ylabel, sizeof c->ylabel, yl);
    return c;
}

static FILE *chart_data(rep *r, const chart *c, kvf_err *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.dat", r->files, c->name);
    FILE *f = fopen(path, "w");
    if (!f) kvf_fail(err, KVF_EIO, "%s: cannot write", path);
    return f;
}

// Appends the gnuplot commands drawing chart c from its .dat file.
static void chart_script(rep *r, const chart *c) {
    rpt_buf *g = &r->gp;
    rpt_buf_printf(g, "reset\nset output \"%s.svg\"\n", c->name);
    rpt_buf_puts(g, "set grid lc rgb \"#dddddd\"\nset border 3\nset tics nomirror\n"
                    "set key outside right top vertical Left reverse noenhanced\n"
                    "set termoption noenhanced\n");
    rpt_buf_puts(g, "# ");
    rpt_buf_puts(g, c->title);   // the page's heading carries the title
    rpt_buf_puts(g, "\nset xlabel ");
    gp_label(g, c->xlabel);
    rpt_buf_puts(g, "\nset ylabel ");
    gp_label(g, c->ylabel);
    rpt_buf_puts(g, "\n");
    if (c->logx) rpt_buf_puts(g, "set logscale x\n");
    // a flat series sits inside the plot, never on the x axis or the top border; lines that
    // coincide stay told apart by their dash
    if (c->zero_y) rpt_buf_puts(g, "set yrange [0:*]\nset offsets 0, 0, graph 0.12, 0\n");
    if (c->bars) {
        rpt_buf_printf(g,
                       "set style fill solid 0.8 border -1\nset boxwidth 0.6\nset yrange [0:*]\n"
                       "set xtics rotate by -20\n"
                       "plot \"%s.dat\" using 0:2:xtic(1) with boxes lc rgb \"#4e79a7\" notitle\n",
                       c->name);
        return;
    }
    if (c->scatter) {
        rpt_buf_puts(g, "set size ratio -1\nplot ");
        for (int i = 0; i < c->n_series; i++) {
            rpt_buf_printf(g, "%s\"%s.dat\" index %d using 1:2 with points pt %d ps 0.6 title ",
                           i ? ", " : "", c->name, i, 7 - 2 * i);
            gp_label(g, c->label[i]);
        }
        rpt_buf_puts(g, ", x with lines lc rgb \"#999999\" dt 2 title \"y = x\"\n");
        return;
    }
    if (c->y2_from > 0) {
        // a figure of another size on its own axis, never drawn against the left one
        rpt_buf_puts(g, "set y2tics\nset y2range [0:*]\nset border 11\nset y2label ");
        gp_label(g, c->y2label);
        rpt_buf_puts(g, "\n");
    }
    rpt_buf_puts(g, "plot ");
    for (int i = 0; i < c->n_series; i++) {
        bool pts = c->points_last && i == c->n_series - 1;
        rpt_buf_printf(g, "%s\"%s.dat\" index %d using 1:2%s with %s", i ? ", " : "", c->name, i,
                       c->y2_from > 0 && i >= c->y2_from ? " axes x1y2" : "",
                       pts ? "points pt 7 ps 1.5 lc rgb \"#e15759\"" : "lines lw 2");
        if (!pts && i > 0) rpt_buf_printf(g, " dt %d", i + 1);
        rpt_buf_puts(g, " title ");
        gp_label(g, c->label[i]);
    }
    rpt_buf_puts(g, "\n");
}

static void cdf_block(FILE *f, double *v, size_t n) {
    kvf_sort_doubles(v, n);
    size_t k = n > RPT_MAX_CDF ? RPT_MAX_CDF : n;
    for (size_t i = 0; i < k; i++) {
        size_t idx = k == n ? i : (size_t)((double)i * (double)(n - 1) / (double)(k - 1));
        fprintf(f, "%.9g %.9g\n", v[idx], 100.0 * (double)(idx + 1) / (double)n);
    }
    fprintf(f, "\n\n");
}

// CDF of a request column (seconds, drawn in ms): all requests and the largest classes.
static kvf_status chart_cdf(rep *r, const char *col, const char *name, const char *title,
                            const char *xl, kvf_err *err) {
    if (!r->db) return KVF_OK;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s, class FROM request WHERE %s IS NOT NULL", col, col);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_no_table(r) ? KVF_OK : db_fail(r, "request", err);
    double *all = NULL;
    size_t n = 0, cap = 0;
    char cls[RPT_MAX_CLASSES_CDF][48];
    double *cv[RPT_MAX_CLASSES_CDF] = {0};
    size_t cn[RPT_MAX_CLASSES_CDF] = {0}, ccap[RPT_MAX_CLASSES_CDF] = {0};
    int ncls = 0;
    bool too_many = false;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        double x = sqlite3_column_double(st, 0) * 1000.0;
        const char *c = (const char *)sqlite3_column_text(st, 1);
        kvf_grow((void **)&all, &cap, n + 1, sizeof *all);
        all[n++] = x;
        if (!c) continue;
        int k;
        for (k = 0; k < ncls; k++)
            if (!strcmp(cls[k], c)) break;
        if (k == ncls) {
            if (ncls == RPT_MAX_CLASSES_CDF) {
                too_many = true;
                continue;
            }
            copy_str(cls[ncls++], sizeof cls[0], c);
        }
        kvf_grow((void **)&cv[k], &ccap[k], cn[k] + 1, sizeof *cv[k]);
        cv[k][cn[k]++] = x;
    }
    kvf_status s = rc == SQLITE_DONE ? KVF_OK : db_fail(r, "request", err);
    sqlite3_finalize(st);
    if (s || n == 0) goto done;
    double vmax = 0;
    for (size_t i = 0; i < n; i++)
        vmax = KVF_MAX(vmax, all[i]);
    char xlab[80];
    snprintf(xlab, sizeof xlab, "%s", xl);
    if (vmax > 20000) {   // tens of seconds and more: the axis in seconds
        for (size_t i = 0; i < n; i++)
            all[i] /= 1000;
        for (int k = 0; k < ncls; k++)
            for (size_t i = 0; i < cn[k]; i++)
                cv[k][i] /= 1000;
        char *u = strstr(xlab, "(ms)");
        if (u) memcpy(u, "(s) ", 4);
    }
    chart *c = chart_new(r, name, title, xlab, "share of requests (%)");
    if (!c) goto done;
    FILE *f = chart_data(r, c, err);
    if (!f) {
        s = KVF_EIO;
        goto done;
    }
    fprintf(f, "# %s (ms) vs cumulative fraction; block 0 all requests, then per class\n", col);
    cdf_block(f, all, n);
    copy_str(c->label[c->n_series++], sizeof c->label[0], "all requests");
    if (ncls > 1)
        for (int k = 0; k < ncls && c->n_series < RPT_MAX_SERIES; k++) {
            cdf_block(f, cv[k], cn[k]);
            copy_str(c->label[c->n_series++], sizeof c->label[0], cls[k]);
        }
    if (ferror(f) | fclose(f)) r->write_failed = true;
    double lo = all[0] > 0 ? all[0] : 0, hi = all[n - 1];
    c->logx = lo > 0 && hi / lo > 100;
    double ms = vmax > 20000 ? 1000 : 1;
    char d50[32], d90[32], d99[32];
    rpt_fmt_duration(kvf_percentile_sorted(all, n, 50) * ms / 1000, d50, sizeof d50);
    rpt_fmt_duration(kvf_percentile_sorted(all, n, 90) * ms / 1000, d90, sizeof d90);
    rpt_fmt_duration(kvf_percentile_sorted(all, n, 99) * ms / 1000, d99, sizeof d99);
    snprintf(c->caption, sizeof c->caption,
             "%zu requests: p50 %s, p90 %s, p99 %s (from the request table)%s.", n, d50, d90, d99,
             too_many ? "; classes beyond the first five only in 'all'" : "");
    chart_script(r, c);
done:
    free(all);
    for (int k = 0; k < RPT_MAX_CLASSES_CDF; k++)
        free(cv[k]);
    return s;
}

typedef struct ts_spec {
    const char *name, *title, *ylabel;
    const char *metrics[5];   // one series per metric (pool preference order) ...
    bool by_pool;             // ... or one per pool of metrics[0]
    double scale;             // multiply values
    bool bytes;               // values in bytes: the axis in B, kB ... PB by the largest
    bool y2_last;             // the second metric on the right axis, labelled y2label
    const char *y2label;
} ts_spec;

// Words for a series in a legend (never the metric's code name).
static const char *series_words(const char *metric) {
    static const struct {
        const char *metric, *words;
    } W[] = {
        {"input_tok_s", "input tokens/s"},
        {"output_tok_s", "output tokens/s"},
        {"hit_rate", "all tiers"},
        {"hit_rate_hbm", "from HBM"},
        {"hit_rate_dram", "from DRAM"},
        {"hit_rate_ssd", "from SSD"},
        {"kv_store_bytes", "shared KV store"},
        {"hbm_cache_bytes", "HBM prefix cache"},
        {"dram_cache_bytes", "DRAM cache"},
        {"queue_len", "queued requests"},
        {"running_requests", "running requests"},
        {"utilization", "busy share"},
        {"kv_used_frac", "KV capacity in use"},
        {"instances", "instances"},
    };
    for (size_t i = 0; i < sizeof W / sizeof W[0]; i++)
        if (!strcmp(W[i].metric, metric)) return W[i].words;
    return metric;
}

// The unit a byte axis is drawn in for values up to max: divisor and name.
static double bytes_axis(double max, const char **unit) {
    static const char *const u[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
    int k = 0;
    double d = 1;
    while (max / d >= 1000 && k < 6) {
        d *= 1000;
        k++;
    }
    *unit = u[k];
    return d;
}

static kvf_status chart_ts(rep *r, const ts_spec *sp, kvf_err *err) {
    ts_series *sel[RPT_MAX_SERIES];
    char lab[RPT_MAX_SERIES][64];
    int k = 0;
    if (sp->by_pool) {
        static const char *const pools[] = {"cluster", "vision", "prefill", "decode", "kv"};
        for (size_t i = 0; i < sizeof pools / sizeof pools[0] && k < RPT_MAX_SERIES; i++) {
            ts_series *s = ts_find(r, sp->metrics[0], pools[i]);
            if (!s) continue;
            sel[k] = s;
            snprintf(lab[k++], sizeof lab[0], "%s%s", pools[i],
                     s->per_instance ? ", mean of instances" : "");
        }
        for (size_t i = 0; i < r->nts && k < RPT_MAX_SERIES; i++) {   // other pool names
            ts_series *s = &r->ts[i];
            if (strcmp(s->metric, sp->metrics[0]) || !s->n) continue;
            bool known = false;
            for (size_t j = 0; j < sizeof pools / sizeof pools[0]; j++)
                if (!strcmp(s->pool, pools[j])) known = true;
            if (known || ts_find(r, s->metric, s->pool) != s) continue;
            sel[k] = s;
            snprintf(lab[k++], sizeof lab[0], "%s", s->pool);
        }
    } else {
        for (int i = 0; i < 5 && sp->metrics[i] && k < RPT_MAX_SERIES; i++) {
            ts_series *s = ts_find_any(r, sp->metrics[i]);
            if (!s) continue;
            sel[k] = s;
            snprintf(lab[k++], sizeof lab[0], "%s", series_words(sp->metrics[i]));
        }
    }
    if (k == 0) return KVF_OK;
    double tmax = 0;
    for (int i = 0; i < k; i++)
        if (sel[i]->n) tmax = KVF_MAX(tmax, sel[i]->t[sel[i]->n - 1]);
    // the time axis in s, min, h or d, and a byte axis in the unit of its largest value
    double tdiv = tmax > 3 * 86400 ? 86400 : tmax > 7200 ? 3600 : tmax > 600 ? 60 : 1;
    const char *tunit = tdiv == 86400 ? "d" : tdiv == 3600 ? "h" : tdiv == 60 ? "min" : "s";
    char xl[32], yl[96];
    snprintf(xl, sizeof xl, "simulated time (%s)", tunit);
    double scale = sp->scale;
    snprintf(yl, sizeof yl, "%s", sp->ylabel);
    if (sp->bytes) {
        double vmax = 0;
        for (int i = 0; i < k; i++)
            for (size_t j = 0; j < sel[i]->n; j++)
                vmax = KVF_MAX(vmax, sel[i]->v[j]);
        const char *unit;
        scale = 1 / bytes_axis(vmax, &unit);
        snprintf(yl, sizeof yl, "%s (%s)", sp->ylabel, unit);
    }
    chart *c = chart_new(r, sp->name, sp->title, xl, yl);
    if (!c) return KVF_OK;
    c->zero_y = true;
    if (sp->y2_last && k == 2 && !strcmp(sel[1]->metric, sp->metrics[1])) {
        c->y2_from = 1;
        copy_str(c->y2label, sizeof c->y2label, sp->y2label);
        snprintf(yl, sizeof yl, "%s", series_words(sel[0]->metric));
        copy_str(c->ylabel, sizeof c->ylabel, yl);
    }
    FILE *f = chart_data(r, c, err);
    if (!f) return KVF_EIO;
    fprintf(f, "# time (%s) vs value; one block per series\n", tunit);
    for (int i = 0; i < k; i++) {
        fprintf(f, "# %s / %s\n", sel[i]->metric, sel[i]->pool);
        write_series_block(f, sel[i], tdiv, scale);
        copy_str(c->label[c->n_series++], sizeof c->label[0], lab[i]);
    }
    if (ferror(f) | fclose(f)) r->write_failed = true;
    rpt_buf cap = {0};
    rpt_buf_puts(&cap, "From the timeseries table: ");
    for (int i = 0; i < k; i++)
        rpt_buf_printf(&cap, "%s%s (%s pool%s)", i ? ", " : "", series_words(sel[i]->metric),
                       sel[i]->pool, sel[i]->per_instance ? ", mean over instances" : "");
    rpt_buf_puts(&cap, c->y2_from ? "; the second on the right axis." : ".");
    copy_str(c->caption, sizeof c->caption, cap.p);
    rpt_buf_free(&cap);
    chart_script(r, c);
    return KVF_OK;
}

static const char *const PARTS[] = {"gpu", "power", "ssd", "dram", "network"};
static const char *const PART_WORDS[] = {"GPUs", "power", "SSD", "DRAM", "network"};

static kvf_status chart_cost(rep *r, kvf_err *err) {
    json_t *e = json_object_get(r->summary, "economics");
    json_t *byh = json_object_get(e, "cost_per_gpu_hour_usd_by_part");
    if (!json_is_object(byh)) return KVF_OK;
    chart *c =
        chart_new(r, "cost_breakdown", "All-in cost per GPU-hour by part", "", "USD per GPU-hour");
    if (!c) return KVF_OK;
    c->bars = true;
    FILE *f = chart_data(r, c, err);
    if (!f) return KVF_EIO;
    double tot = 0;
    for (size_t i = 0; i < 5; i++) {
        double v = json_number_value(json_object_get(byh, PARTS[i]));
        fprintf(f, "\"%s\" %.9g\n", PART_WORDS[i], v);
        tot += v;
    }
    if (ferror(f) | fclose(f)) r->write_failed = true;
    char tt[32];
    rpt_fmt_unit(RPT_U_USD, tot, tt, sizeof tt);
    snprintf(c->caption, sizeof c->caption, "Total %s per GPU-hour, all in.", tt);
    chart_script(r, c);
    return KVF_OK;
}

// Validation (a `kvfleet validate` run): real against simulated TTFT per request, end to end
// and with the measured step times replayed (from requests_compare.csv), and the step-time
// residuals by shape (validation.json).
static kvf_status chart_validation(rep *r, kvf_err *err) {
    if (!r->validation) return KVF_OK;
    char path[4200];
    snprintf(path, sizeof path, "%s/requests_compare.csv", r->dir);
    char *text = NULL;
    size_t len = 0;
    kvf_err e2 = {0};
    if (kvf_read_file(path, &text, &len, &e2) == KVF_OK) {
        chart *c =
            chart_new(r, "validation_ttft", "Validation: real against simulated TTFT per request",
                      "real TTFT (ms)", "simulated TTFT (ms)");
        if (c) {
            c->scatter = true;
            c->n_series = 2;
            copy_str(c->label[0], sizeof c->label[0], "end to end (calibrated)");
            copy_str(c->label[1], sizeof c->label[1], "scheduling (measured steps replayed)");
            FILE *f = chart_data(r, c, err);
            if (!f) {
                free(text);
                return KVF_EIO;
            }
            for (int k = 0; k < 2; k++) {
                const char *l = strchr(text, '\n');
                while (l && l[1]) {
                    double id, real, sim, rep_;
                    if (sscanf(l + 1, "%lf,%lf,%lf,%lf", &id, &real, &sim, &rep_) == 4 &&
                        isfinite(real)) {
                        double y = k ? rep_ : sim;
                        if (isfinite(y)) fprintf(f, "%.9g %.9g\n", real, y);
                    }
                    l = strchr(l + 1, '\n');
                }
                fprintf(f, "\n\n");
            }
            fclose(f);
            snprintf(
                c->caption, sizeof c->caption,
                "One point per request: x measured on the engine, y simulated (inputs: the "
                "served trace; outputs: both TTFTs). On the dashed line the simulator is exact.");
            chart_script(r, c);
        }
        free(text);
    }
    json_t *shapes = json_object_get(json_object_get(r->validation, "step_time"), "shapes");
    if (json_array_size(shapes)) {
        chart *c = chart_new(r, "validation_residuals",
                             "Validation: step-time residual by step shape (median)", "",
                             "predicted / measured - 1 (%)");
        if (!c) return KVF_OK;
        c->bars = true;
        FILE *f = chart_data(r, c, err);
        if (!f) return KVF_EIO;
        for (size_t i = 0; i < json_array_size(shapes); i++) {
            json_t *x = json_array_get(shapes, i);
            fprintf(f, "\"%s %s (%lld)\" %.9g\n", json_string_value(json_object_get(x, "kind")),
                    json_string_value(json_object_get(x, "shape")),
                    (long long)json_integer_value(json_object_get(x, "steps")),
                    rpt_json_num(x, "median_residual_pct"));
        }
        fclose(f);
        snprintf(c->caption, sizeof c->caption,
                 "Served steps grouped by kind and size (steps in brackets): the calibrated step "
                 "model's prediction against the measured time (clock: %s).",
                 json_string_value(
                     json_object_get(json_object_get(r->validation, "step_time"), "clock")));
        chart_script(r, c);
    }
    return KVF_OK;
}

// A sensitivity chart: margin (%) against x, plus the run's own point.
static kvf_status chart_sens(rep *r, const char *kind, const char *name, const char *title,
                             const char *xl, double xscale, double actual, kvf_err *err) {
    json_t *a = rpt_json_path(r->summary, "economics.sensitivity");
    a = json_object_get(a, kind);
    if (!json_is_array(a) || json_array_size(a) == 0) return KVF_OK;
    chart *c = chart_new(r, name, title, xl, "margin (%)");
    if (!c) return KVF_OK;
    FILE *f = chart_data(r, c, err);
    if (!f) return KVF_EIO;
    fprintf(f, "# x, margin %% at these prices\n");
    size_t i;
    json_t *row;
    bool fixed = false;
    json_array_foreach(a, i, row) {
        double m = json_number_value(json_object_get(row, "margin"));
        if (!json_is_number(json_object_get(row, "margin"))) m = NAN;
        fprintf(f, "%.9g %.9g\n", json_number_value(json_object_get(row, "x")) * xscale, m * 100);
        if (json_is_number(json_object_get(row, "margin_fixed_revenue"))) fixed = true;
    }
    fprintf(f, "\n\n");
    copy_str(c->label[c->n_series++], sizeof c->label[0], "margin at these prices");
    if (fixed) {
        fprintf(f, "# x, margin %% with revenue held at this run's\n");
        json_array_foreach(a, i, row) {
            json_t *m = json_object_get(row, "margin_fixed_revenue");
            fprintf(f, "%.9g %.9g\n", json_number_value(json_object_get(row, "x")) * xscale,
                    json_is_number(m) ? json_number_value(m) * 100 : NAN);
        }
        fprintf(f, "\n\n");
        copy_str(c->label[c->n_series++], sizeof c->label[0], "margin, revenue held");
    }
    double m0 = rpt_json_num(r->summary, "economics.margin");
    if (isfinite(actual) && isfinite(m0)) {
        fprintf(f, "# this run\n%.9g %.9g\n\n\n", actual * xscale, m0 * 100);
        copy_str(c->label[c->n_series++], sizeof c->label[0], "this run");
        c->points_last = true;
    }
    if (ferror(f) | fclose(f)) r->write_failed = true;
    snprintf(c->caption, sizeof c->caption,
             "The run's economics recomputed along the axis; the red dot is this run.");
    chart_script(r, c);
    return KVF_OK;
}

static void run_gnuplot(rep *r) {
    char gp_path[4200];
    snprintf(gp_path, sizeof gp_path, "%s/charts.gp", r->files);
    rpt_buf all = {0};
    rpt_buf_puts(&all, "# kvfleet report charts: run `gnuplot charts.gp` in this folder\n"
                       "set terminal svg size 820,380 font \"Helvetica,12\" "
                       "background rgb \"white\"\n");
    if (r->gp.p) rpt_buf_puts(&all, r->gp.p);
    kvf_err e2 = {0};
    rpt_write_text(gp_path, all.p, all.n, &e2);
    rpt_buf_free(&all);
    if (!r->gnuplot || r->nch == 0) return;
    int status = rpt_gnuplot(r->files, "charts.gp");
    if (status < 0) {
        snprintf(r->gnuplot_note, sizeof r->gnuplot_note, "could not start gnuplot: %s",
                 strerror(errno));
        return;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        snprintf(r->gnuplot_note, sizeof r->gnuplot_note,
                 "gnuplot failed (status %d); see report_files/gnuplot.log", status);
    for (int i = 0; i < r->nch; i++) {
        char p[4200];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s.svg", r->files, r->ch[i].name);
        r->ch[i].svg_ok = stat(p, &sb) == 0 && sb.st_size > 0;
    }
}

// ---- page content -----------------------------------------------------------------------

typedef struct page {
    rpt_buf h;   // HTML
    rpt_buf m;   // Markdown
} page;

static void both_heading(page *p, int level, const char *id, const char *text) {
    rpt_buf_printf(&p->h, "<h%d id=\"%s\">", level, id);
    rpt_buf_html(&p->h, text);
    rpt_buf_printf(&p->h, "</h%d>\n", level);
    rpt_buf_printf(&p->m, "\n%s ", level == 1 ? "#" : level == 2 ? "##" : "###");
    rpt_buf_puts(&p->m, text);
    rpt_buf_puts(&p->m, "\n\n");
}

static void both_para(page *p, const char *cls, const char *text) {
    rpt_buf_printf(&p->h, "<p class=\"%s\">", cls);
    rpt_buf_html(&p->h, text);
    rpt_buf_puts(&p->h, "</p>\n");
    rpt_buf_puts(&p->m, text);
    rpt_buf_puts(&p->m, "\n\n");
}

// Table helpers: a header row, then rows of cells.
// align: one letter per column for Markdown, 'l' or 'r' (NULL: first left, others right).
static void tab_open(page *p, const char *id, const char *const *heads, int n, const char *align) {
    rpt_buf_printf(&p->h, "<table id=\"%s\"><thead><tr>", id);
    for (int i = 0; i < n; i++) {
        rpt_buf_puts(&p->h, "<th>");
        rpt_buf_html(&p->h, heads[i]);
        rpt_buf_puts(&p->h, "</th>");
    }
    rpt_buf_puts(&p->h, "</tr></thead><tbody>\n");
    rpt_buf_puts(&p->m, "|");
    for (int i = 0; i < n; i++) {
        rpt_buf_puts(&p->m, " ");
        rpt_buf_md(&p->m, heads[i]);
        rpt_buf_puts(&p->m, " |");
    }
    rpt_buf_puts(&p->m, "\n|");
    for (int i = 0; i < n; i++) {
        bool right = align && (int)strlen(align) > i ? align[i] == 'r' : i > 0;
        rpt_buf_puts(&p->m, right ? "---:|" : "---|");
    }
    rpt_buf_puts(&p->m, "\n");
}

static void tab_close(page *p) {
    rpt_buf_puts(&p->h, "</tbody></table>\n");
    rpt_buf_puts(&p->m, "\n");
}

static void row_open(page *p) {
    rpt_buf_puts(&p->h, "<tr>");
    rpt_buf_puts(&p->m, "|");
}

static void row_close(page *p) {
    rpt_buf_puts(&p->h, "</tr>\n");
    rpt_buf_puts(&p->m, "\n");
}

static void cell_text(page *p, const char *s);

// A cell naming a summary.json key (kept for reference beside the words).
static void cell_code(page *p, const char *key) {
    rpt_buf_puts(&p->h, "<td class=\"key\">");
    rpt_buf_html(&p->h, key);
    rpt_buf_puts(&p->h, "</td>");
    rpt_buf_puts(&p->m, " `");
    rpt_buf_md(&p->m, key);
    rpt_buf_puts(&p->m, "` |");
}

static void cell_text(page *p, const char *s) {
    rpt_buf_puts(&p->h, "<td>");
    rpt_buf_html(&p->h, s);
    rpt_buf_puts(&p->h, "</td>");
    rpt_buf_puts(&p->m, " ");
    rpt_buf_md(&p->m, s);
    rpt_buf_puts(&p->m, " |");
}

// A number cell showing text s; key (may be NULL) names its summary.json path, and the exact
// value x is kept in data-value.
static void cell_keyed(page *p, const char *key, double x, const char *s) {
    rpt_buf_puts(&p->h, "<td class=\"num\"");
    if (key) {
        rpt_buf_puts(&p->h, " data-key=\"");
        rpt_buf_html(&p->h, key);
        rpt_buf_puts(&p->h, "\"");
        if (isfinite(x))
            rpt_buf_printf(&p->h, " data-value=\"%.17g\"", x);
        else
            rpt_buf_puts(&p->h, " data-value=\"null\"");
    }
    rpt_buf_printf(&p->h, ">%s</td>", s);
    rpt_buf_printf(&p->m, " %s |", s);
}

static void cell_num(page *p, const char *key, double x) {
    char s[64];
    rpt_fmt_keyed(key, x, s, sizeof s);
    cell_keyed(p, key, x, s);
}

// A fraction shown in percent (data-value keeps the fraction).
static void cell_pct_key(page *p, const char *key, double x) {
    char s[64];
    rpt_fmt_pct(x, s, sizeof s);
    cell_keyed(p, key, x, s);
}

static void cell_pct(page *p, double x) {
    cell_pct_key(p, NULL, x);
}

static void cell_json(page *p, const char *key, json_t *v) {
    if (json_is_number(v))
        cell_num(p, key, json_number_value(v));
    else if (json_is_string(v))
        cell_text(p, json_string_value(v));
    else if (json_is_true(v))
        cell_text(p, "true");
    else if (json_is_false(v))
        cell_text(p, "false");
    else if (key)
        cell_num(p, key, NAN);
    else
        cell_text(p, "n/a");
}

static void sec_run(rep *r, page *p) {
    both_heading(p, 2, "scenario", "Scenario and inputs");
    json_t *s = r->summary;
    const char *name = json_string_value(json_object_get(s, "scenario"));
    char line[600], seed[32] = "n/a";
    json_t *sj = json_object_get(s, "seed");
    if (json_is_number(sj)) snprintf(seed, sizeof seed, "%.0f", json_number_value(sj));
    const char *stepm = json_string_value(json_object_get(s, "step_model"));
    const char *ver = json_string_value(json_object_get(s, "kvfleet_version"));
    snprintf(line, sizeof line, "Scenario %s, seed %s, step model %s, kvfleet %s.",
             name ? name : "(unnamed)", seed, stepm ? stepm : "n/a", ver ? ver : "n/a");
    both_para(p, "meta", line);
    if (!r->db) {
        both_para(p, "note", r->db_note);
        return;
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(r->db, "SELECT key, value FROM run ORDER BY rowid", -1, &st, NULL) !=
        SQLITE_OK) {
        both_para(p, "note", "The results database has no run table.");
        return;
    }
    static const char *const heads[] = {"key", "value"};
    tab_open(p, "run-table", heads, 2, "ll");
    rpt_buf longs = {0};   // long values go below the Markdown table
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        const char *v = (const char *)sqlite3_column_text(st, 1);
        if (!k) continue;
        if (!v) v = "";
        rpt_buf vb = {0};   // numbers of 17 digits (%.17g of 0.7) in 15
        rpt_buf_text_numbers(&vb, v);
        v = vb.p ? vb.p : "";
        bool lng = strchr(v, '\n') || strlen(v) > 160;
        row_open(p);
        cell_text(p, k);
        if (lng) {
            rpt_buf_puts(&p->h, "<td><details><summary>show</summary><pre>");
            rpt_buf_html(&p->h, v);
            rpt_buf_puts(&p->h, "</pre></details></td>");
            rpt_buf_puts(&p->m, " (below) |");
            rpt_buf_printf(&longs, "\n`%s`:\n\n```\n%s\n```\n", k, v);
        } else {
            cell_text(p, v);
        }
        row_close(p);
        rpt_buf_free(&vb);
    }
    sqlite3_finalize(st);
    tab_close(p);
    if (longs.p) rpt_buf_puts(&p->m, longs.p);
    rpt_buf_free(&longs);
}

// ---- the answer block ---------------------------------------------------------------------
// The first thing on the page: cost per million tokens, margin, SLO attainment (and goodput),
// the saturation verdict with its reason, and the GPUs per pool. Every figure is a
// <span class="v" data-key=KEY data-value=EXACT> inside an element with a fixed id
// (hl-saturation, hl-cost, hl-margin, hl-slo, hl-gpus, hl-more), so a reader or a browser
// test finds each one and compares it with summary.json.

static void ans_text(page *p, const char *t) {
    rpt_buf_html(&p->h, t);
    rpt_buf_puts(&p->m, t);
}

// One figure at key (NaN when missing), formatted in the key's unit.
static void ans_value(page *p, json_t *sum, const char *key) {
    if (!rpt_json_path(sum, key)) {   // not in summary.json: nothing to point at
        rpt_buf_puts(&p->h, "<span class=\"v na\">n/a</span>");
        rpt_buf_puts(&p->m, "n/a");
        return;
    }
    double x = rpt_json_num(sum, key);
    char t[64];
    rpt_fmt_keyed(key, x, t, sizeof t);
    rpt_buf_puts(&p->h, "<span class=\"v\" data-key=\"");
    rpt_buf_html(&p->h, key);
    if (isfinite(x))
        rpt_buf_printf(&p->h, "\" data-value=\"%.17g\">", x);
    else
        rpt_buf_puts(&p->h, "\" data-value=\"null\">");
    rpt_buf_html(&p->h, t);
    rpt_buf_puts(&p->h, "</span>");
    rpt_buf_printf(&p->m, "**%s**", t);
}

static void ans_card_open(page *p, const char *id, const char *label) {
    rpt_buf_printf(&p->h, "<div class=\"card\" id=\"%s\"><div class=\"lab\">", id);
    rpt_buf_html(&p->h, label);
    rpt_buf_puts(&p->h, "</div><div class=\"big\">");
    rpt_buf_printf(&p->m, "- %s: ", label);
}

static void ans_card_sub(page *p) {
    rpt_buf_puts(&p->h, "</div><div class=\"sub\">");
    rpt_buf_puts(&p->m, " (");
}

static void ans_card_close(page *p, bool had_sub) {
    rpt_buf_puts(&p->h, "</div></div>\n");
    rpt_buf_puts(&p->m, had_sub ? ")\n" : "\n");
}

static void ans_saturation(rep *r, page *p) {
    const char *state = json_string_value(rpt_json_path(r->summary, "saturation.state"));
    const char *why = json_string_value(rpt_json_path(r->summary, "saturation.reason"));
    const char *cls = !state                         ? "unknown"
                      : !strcmp(state, "stable")     ? "stable"
                      : !strcmp(state, "overloaded") ? "overloaded"
                                                     : "backlogged";
    rpt_buf_printf(&p->h, "<div class=\"verdict verdict-%s\" id=\"hl-saturation\" data-state=\"",
                   cls);
    rpt_buf_html(&p->h, state ? state : "unknown");
    rpt_buf_puts(&p->h, "\"><b>");
    rpt_buf_puts(&p->m, "**");
    char head[64];
    snprintf(head, sizeof head, "%s", state ? state : "Saturation not checked");
    head[0] = (char)(head[0] >= 'a' && head[0] <= 'z' ? head[0] - 32 : head[0]);
    ans_text(p, head);
    rpt_buf_puts(&p->h, "</b>");
    rpt_buf_puts(&p->m, "**");
    if (state && !strcmp(state, "stable"))
        ans_text(p, ": the cluster keeps up with this traffic");
    else if (state)
        ans_text(p, ": the cluster does not keep up; figures grow with the run's length");
    else
        ans_text(p, ": summary.json has no saturation verdict");
    if (why) {
        rpt_buf_puts(&p->h, " <span class=\"why\">(");
        rpt_buf_puts(&p->m, " (");
        ans_text(p, why);
        rpt_buf_puts(&p->h, ")</span>");
        rpt_buf_puts(&p->m, ")");
    }
    rpt_buf_puts(&p->h, ".</div>\n");
    rpt_buf_puts(&p->m, ".\n\n");
}

static void ans_money(rep *r, page *p) {
    json_t *s = r->summary;
    bool econ = json_is_object(json_object_get(s, "economics"));
    ans_card_open(p, "hl-cost", "cost per million tokens");
    if (econ) {
        ans_value(p, s, "economics.cost_per_mtok_usd.input");
        ans_text(p, " input, ");
        ans_value(p, s, "economics.cost_per_mtok_usd.output");
        ans_text(p, " output");
        ans_card_sub(p);
        char t[48];
        rpt_fmt_unit(RPT_U_USD, rpt_json_num(s, "economics.cost_per_gpu_hour_usd"), t, sizeof t);
        ans_text(p, "all-in ");
        ans_text(p, t);
        ans_text(p, " per GPU-hour");
        ans_card_close(p, true);
    } else {
        ans_text(p, "n/a (no economics in summary.json)");
        ans_card_close(p, false);
    }
    ans_card_open(p, "hl-margin", "margin");
    if (econ) {
        ans_value(p, s, "economics.margin");
        ans_card_sub(p);
        char a[48], b[48];
        rpt_fmt_unit(RPT_U_USD, rpt_json_num(s, "economics.revenue_per_day_usd"), a, sizeof a);
        rpt_fmt_unit(RPT_U_USD, rpt_json_num(s, "economics.cost_per_day_usd"), b, sizeof b);
        ans_text(p, "revenue ");
        ans_text(p, a);
        ans_text(p, " against cost ");
        ans_text(p, b);
        ans_text(p, " per day");
        ans_card_close(p, true);
    } else {
        ans_text(p, "n/a");
        ans_card_close(p, false);
    }
}

static void ans_slo(rep *r, page *p) {
    json_t *s = r->summary;
    ans_card_open(p, "hl-slo", "SLO attainment");
    ans_value(p, s, "slo.attainment");
    if (rpt_json_path(s, "slo.goodput_rps")) {
        ans_text(p, ", goodput ");
        ans_value(p, s, "slo.goodput_rps");
    }
    ans_card_sub(p);
    char a[32], b[32];
    rpt_fmt_unit(RPT_U_MS, rpt_json_num(s, "slo.ttft_p90_ms"), a, sizeof a);
    rpt_fmt_unit(RPT_U_MS, rpt_json_num(s, "slo.tpot_p90_ms"), b, sizeof b);
    char line[160];
    snprintf(line, sizeof line, "requests within TTFT %s and TPOT %s (p90 targets)", a, b);
    ans_text(p, line);
    ans_card_close(p, true);
}

static void ans_gpus(rep *r, page *p) {
    json_t *s = r->summary;
    const char *mode = json_string_value(json_object_get(s, "mode"));
    bool coloc = mode && !strcmp(mode, "colocated");
    double gv = rpt_json_num(s, "gpus.vision"), gp = rpt_json_num(s, "gpus.prefill"),
           gd = rpt_json_num(s, "gpus.decode");
    ans_card_open(p, "hl-gpus", "GPUs per pool");
    bool any = false;
    if (isfinite(gv) && gv > 0) {
        ans_text(p, "vision ");
        ans_value(p, s, "gpus.vision");
        any = true;
    }
    if (coloc) {   // one pool serves both phases: its GPUs are counted under prefill
        ans_text(p, any ? ", colocated " : "colocated ");
        if (isfinite(gd) && gd > 0) {
            char t[32];
            snprintf(t, sizeof t, "%.0f", gp + gd);
            rpt_buf_printf(&p->h, "<span class=\"v\" data-gpus=\"%.0f\">%s</span>", gp + gd, t);
            rpt_buf_printf(&p->m, "**%s**", t);
        } else {
            ans_value(p, s, "gpus.prefill");
        }
    } else if (isfinite(gp) || isfinite(gd)) {
        ans_text(p, any ? ", prefill " : "prefill ");
        ans_value(p, s, "gpus.prefill");
        ans_text(p, ", decode ");
        ans_value(p, s, "gpus.decode");
    } else if (!any) {
        ans_text(p, "n/a");
    }
    ans_card_sub(p);
    char u1[32], u2[32], line[200];
    rpt_fmt_pct(rpt_json_num(s, "utilization.prefill"), u1, sizeof u1);
    rpt_fmt_pct(rpt_json_num(s, "utilization.decode"), u2, sizeof u2);
    if (coloc)
        snprintf(line, sizeof line, "busy %s of the time", u1);
    else
        snprintf(line, sizeof line, "busy: prefill %s, decode %s", u1, u2);
    ans_text(p, line);
    ans_card_close(p, true);
}

// The line under the cards: latency, throughput, cache and the run's extent.
static void ans_more(rep *r, page *p) {
    json_t *s = r->summary;
    static const struct {
        const char *key, *label;
    } F[] = {
        {"ttft_ms.p90", "TTFT p90 "},
        {"tpot_ms.p90", "TPOT p90 "},
        {"throughput.output_tok_s", "output "},
        {"cache.hit_rate", "cache hit rate "},
        {"requests.completed", "requests completed "},
        {"sim.simulated_s", "simulated "},
    };
    rpt_buf_puts(&p->h, "<p class=\"keyline\" id=\"hl-more\">");
    int k = 0;
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
        if (!rpt_json_path(s, F[i].key)) continue;
        if (k++) ans_text(p, " · ");
        ans_text(p, F[i].label);
        ans_value(p, s, F[i].key);
        if (!strcmp(F[i].key, "requests.completed") && rpt_json_path(s, "requests.arrived")) {
            ans_text(p, " of ");
            ans_value(p, s, "requests.arrived");
        }
    }
    rpt_buf_puts(&p->h, "</p>\n");
    rpt_buf_puts(&p->m, "\n\n");
}

static void sec_answer(rep *r, page *p) {
    rpt_buf_puts(&p->h, "<section id=\"answer\" class=\"answer\">\n");
    rpt_buf_puts(&p->m, "\n");
    const char *status = json_string_value(json_object_get(r->summary, "status"));
    if (status && strcmp(status, "completed")) {   // an interrupted run: say so first
        rpt_buf_puts(&p->h, "<div class=\"verdict verdict-overloaded\" id=\"hl-status\" "
                            "data-status=\"");
        rpt_buf_html(&p->h, status);
        rpt_buf_puts(&p->h, "\"><b>");
        rpt_buf_puts(&p->m, "**");
        ans_text(p, "Unfinished");
        rpt_buf_puts(&p->h, "</b>");
        rpt_buf_puts(&p->m, "**");
        ans_text(p, " (");
        ans_text(p, status);
        ans_text(p, "): every figure covers only the part of the trace that ran.");
        rpt_buf_puts(&p->h, "</div>\n");
        rpt_buf_puts(&p->m, "\n\n");
    }
    ans_saturation(r, p);
    rpt_buf_puts(&p->h, "<div class=\"cards\">\n");
    ans_money(r, p);
    ans_slo(r, p);
    ans_gpus(r, p);
    rpt_buf_puts(&p->h, "</div>\n");
    rpt_buf_puts(&p->m, "\n");
    ans_more(r, p);
    rpt_buf_puts(&p->h, "</section>\n");
}

// Appends a gnuplot SVG with its element ids prefixed by the chart name, so several charts
// on one page keep unique ids (gnuplot names its markers gpPt0.. in every file; its
// single-quoted ids are all definitions, referenced by href='#...').
static void svg_inline(rpt_buf *b, const char *svg, const char *prefix) {
    static const char *const pats[] = {"id='", "href='#", "id=\"gnuplot_"};
    const char *run = svg;
    for (const char *q = svg; *q; q++) {
        for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
            size_t n = strlen(pats[i]);
            if (strncmp(q, pats[i], n)) continue;
            size_t head = i == 2 ? 4 : n;   // up to the quote (and '#')
            rpt_buf_putn(b, run, (size_t)(q - run) + head);
            rpt_buf_printf(b, "%s_", prefix);
            q += head - 1;
            run = q + 1;
            break;
        }
    }
    rpt_buf_puts(b, run);
}

static void sec_charts(rep *r, page *p) {
    both_heading(p, 2, "charts", "Charts");
    if (r->gnuplot_note[0]) {
        char line[800];
        snprintf(line, sizeof line,
                 "Charts not drawn: %s. Their data are kept in report_files/*.dat, with the "
                 "gnuplot script report_files/charts.gp to draw them.",
                 r->gnuplot_note);
        both_para(p, "warn", line);
    }
    if (r->nch == 0)
        both_para(p, "note", "No chart data: the database has no requests or timeseries.");
    rpt_buf_puts(&p->h, "<div class=\"charts\">\n");
    for (int i = 0; i < r->nch; i++) {
        const chart *c = &r->ch[i];
        rpt_buf_printf(&p->h, "<figure id=\"chart-%s\"><h3>", c->name);
        rpt_buf_html(&p->h, c->title);
        rpt_buf_puts(&p->h, "</h3>\n");
        rpt_buf_printf(&p->m, "\n### %s\n\n", c->title);
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.svg", r->files, c->name);
        char *svg = NULL;
        size_t len = 0;
        kvf_err e2 = {0};
        if (c->svg_ok && kvf_read_file(path, &svg, &len, &e2) == KVF_OK) {
            char *start = strstr(svg, "<svg");
            svg_inline(&p->h, start ? start : "", c->name);
            rpt_buf_printf(&p->m, "![%s](report_files/%s.svg)\n\n", c->title, c->name);
        } else {
            rpt_buf_printf(&p->h, "<p class=\"note\">Not drawn; data in report_files/%s.dat</p>",
                           c->name);
            rpt_buf_printf(&p->m, "Not drawn; data in `report_files/%s.dat`.\n\n", c->name);
        }
        free(svg);
        rpt_buf_puts(&p->h, "<figcaption>");
        rpt_buf_html(&p->h, c->caption);
        rpt_buf_printf(&p->h, " Data: <code>report_files/%s.dat</code>.</figcaption></figure>\n",
                       c->name);
        rpt_buf_printf(&p->m, "%s Data: `report_files/%s.dat`.\n\n", c->caption, c->name);
    }
    rpt_buf_puts(&p->h, "</div>\n");
}

static void sens_table(page *p, json_t *e, const char *kind, const char *id, const char *xname,
                       bool with_fixed) {
    json_t *a = json_object_get(json_object_get(e, "sensitivity"), kind);
    if (!json_is_array(a) || !json_array_size(a)) return;
    const char *heads[7] = {xname,     "cost per day", "revenue per day",     "margin",
                            "payback", "prefill GPUs", "margin, revenue held"};
    tab_open(p, id, heads, with_fixed ? 7 : 6, NULL);
    size_t i;
    json_t *row;
    bool frac_x = strcmp(kind, "price") != 0;   // hit rate and utilisation are shares
    json_array_foreach(a, i, row) {
        row_open(p);
        double x = json_number_value(json_object_get(row, "x"));
        char t[48];
        if (frac_x)
            rpt_fmt_pct(x, t, sizeof t);
        else
            snprintf(t, sizeof t, "%.3g x", x);
        cell_keyed(p, NULL, x, t);
        double c = rpt_json_num(row, "cost_per_day_usd"),
               rv = rpt_json_num(row, "revenue_per_day_usd");
        cell_keyed(p, NULL, c, rpt_fmt_unit(RPT_U_USD, c, t, sizeof t));
        cell_keyed(p, NULL, rv, rpt_fmt_unit(RPT_U_USD, rv, t, sizeof t));
        json_t *m = json_object_get(row, "margin");
        cell_pct(p, json_is_number(m) ? json_number_value(m) : NAN);
        json_t *pb = json_object_get(row, "payback_days");
        if (json_is_number(pb))
            cell_keyed(p, NULL, json_number_value(pb),
                       rpt_fmt_unit(RPT_U_DAYS, json_number_value(pb), t, sizeof t));
        else
            cell_text(p, "never");
        cell_json(p, NULL, json_object_get(row, "prefill_gpus"));
        if (with_fixed) {
            json_t *mf = json_object_get(row, "margin_fixed_revenue");
            cell_pct(p, json_is_number(mf) ? json_number_value(mf) : NAN);
        }
        row_close(p);
    }
    tab_close(p);
}

// One sentence on which way the margin moves with the hit rate, and why, read off the table.
static void hit_story(page *p, json_t *e) {
    json_t *a = json_object_get(json_object_get(e, "sensitivity"), "hit_rate");
    size_t n = json_array_size(a);
    if (n < 2) return;
    json_t *lo = json_array_get(a, 0), *hi = json_array_get(a, n - 1);
    double m0 = rpt_json_num(lo, "margin"), m1 = rpt_json_num(hi, "margin");
    double c0 = rpt_json_num(lo, "cost_per_day_usd"), c1 = rpt_json_num(hi, "cost_per_day_usd");
    double r0 = rpt_json_num(lo, "revenue_per_day_usd"),
           r1 = rpt_json_num(hi, "revenue_per_day_usd");
    double g0 = rpt_json_num(lo, "prefill_gpus"), g1 = rpt_json_num(hi, "prefill_gpus");
    double x0 = rpt_json_num(lo, "x"), x1 = rpt_json_num(hi, "x");
    if (!isfinite(m0) || !isfinite(m1)) return;
    char line[900];
    snprintf(
        line, sizeof line,
        "At these prices a higher cache-hit rate %s the margin: %.1f %% at a %.0f %% hit rate, "
        "%.1f %% at %.0f %%. Cost per day goes from %.4g to %.4g USD (prefill GPUs %.3g to "
        "%.3g) while revenue goes from %.4g to %.4g USD, because hit tokens are billed at "
        "the hit price. The margin rises with the hit rate only when the share of cost the "
        "cache saves exceeds the share of revenue its discount gives away.",
        m1 > m0   ? "raises"
        : m1 < m0 ? "lowers"
                  : "does not change",
        m0 * 100, x0 * 100, m1 * 100, x1 * 100, c0, c1, g0, g1, r0, r1);
    both_para(p, "meta", line);
}

// Published figures beside the run's (summary.json "published", from the scenario's
// `published` section): the first section when present, every row marked input or output.
static void sec_published(rep *r, page *p) {
    json_t *a = json_object_get(r->summary, "published");
    if (!json_is_array(a) || !json_array_size(a)) return;
    both_heading(p, 2, "published", "Published against simulated");
    both_para(p, "meta",
              "Each published figure beside the run's. 'input' rows are set by the scenario (the "
              "simulated column shows the value the run used, where the summary holds it); "
              "'output' rows are produced by the run and are checks, never fitted. The gap is "
              "against the nearer end of a published range; 'rests on' names what the simulated "
              "figure depends on.");
    static const char *const heads[] = {"figure", "published",    "simulated",
                                        "gap",    "input/output", "what it rests on"};
    tab_open(p, "published-table", heads, 6, "lrrrll");
    size_t i;
    json_t *o;
    json_array_foreach(a, i, o) {
        const char *name = json_string_value(json_object_get(o, "name"));
        const char *unit = json_string_value(json_object_get(o, "unit"));
        const char *role = json_string_value(json_object_get(o, "role"));
        const char *key = json_string_value(json_object_get(o, "summary_key"));
        const char *rests = json_string_value(json_object_get(o, "rests_on"));
        char lab[160], pub[128], v1[48], v2[48];
        snprintf(lab, sizeof lab, "%s%s%s%s", name ? name : "?", unit && *unit ? " (" : "",
                 unit && *unit ? unit : "", unit && *unit ? ")" : "");
        rpt_fmt_num(rpt_json_num(o, "value"), v1, sizeof v1);
        if (json_is_number(json_object_get(o, "high"))) {
            rpt_fmt_num(rpt_json_num(o, "high"), v2, sizeof v2);
            snprintf(pub, sizeof pub, "%s - %s", v1, v2);
        } else {
            snprintf(pub, sizeof pub, "%s", v1);
        }
        row_open(p);
        cell_text(p, lab);
        cell_text(p, pub);
        json_t *sim = json_object_get(o, "simulated");
        char dk[160];
        snprintf(dk, sizeof dk, "published.%s", name ? name : "?");
        if (json_is_number(sim))
            cell_num(p, dk, json_number_value(sim));
        else
            cell_text(p, role && !strcmp(role, "input") ? "used as published" : "n/a");
        json_t *g = json_object_get(o, "gap_pct");
        if (json_is_number(g)) {
            char gs[48];
            snprintf(gs, sizeof gs, "%+.1f %%", json_number_value(g));
            cell_text(p, gs);
        } else {
            cell_text(p, "-");
        }
        cell_text(p, role ? role : "?");
        char rs[400];
        snprintf(rs, sizeof rs, "%s%s%s%s", rests ? rests : "", key && *key ? " [" : "",
                 key && *key ? key : "", key && *key ? "]" : "");
        cell_text(p, rs);
        row_close(p);
    }
    tab_close(p);
}

static void sec_economics(rep *r, page *p) {
    both_heading(p, 2, "economics", "Economics");
    json_t *e = json_object_get(r->summary, "economics");
    if (!json_is_object(e)) {
        both_para(p, "note", "summary.json has no economics object.");
        return;
    }
    static const struct {
        const char *key, *label;
    } rows[] = {
        {"cost_model", "cost model (rent or own)"},
        {"gpus", "GPUs"},
        {"gpu_hours_per_day", "GPU-hours per day"},
        {"cost_per_day_usd", "cost per day"},
        {"revenue_per_day_usd", "revenue per day"},
        {"revenue_input_per_day_usd", "  of which input tokens"},
        {"revenue_output_per_day_usd", "  of which output tokens"},
        {"margin", "margin, (revenue - cost) / revenue"},
        {"cost_per_gpu_hour_usd", "all-in cost per GPU-hour"},
        {"cost_per_mtok_usd.input", "cost per million input tokens"},
        {"cost_per_mtok_usd.output", "cost per million output tokens"},
        {"input_cost_share", "share of cost attributed to input"},
        {"capex_usd", "capex"},
        {"cash_opex_per_day_usd", "cash opex per day"},
        {"payback_days", "payback of capex"},
        {"break_even_price_factor", "break-even price factor (all prices x)"},
        {"break_even_output_usd_per_mtok",
         "break-even output price per million tokens (input prices kept)"},
        {"break_even_note", "  why it is 0 or missing"},
        {"day_basis", "how the run is placed in a day"},
        {"offpeak_share", "share of the day's tokens billed off-peak"},
        {"ssd_tb_billed", "SSD billed (TB)"},
        {"ssd_basis", "  what the SSD figure rests on"},
        {"hit_rate", "cache hit rate (billing)"},
        {"hit_sensitivity_basis", "hit-rate sensitivity rests on"},
        {"utilization", "utilisation (GPU-hour weighted)"},
        {"capacity_utilization", "utilisation at capacity (busiest pool full)"},
        {"cost_usd", "cost over the run"},
        {"revenue_usd", "revenue over the run"},
    };
    static const char *const heads[] = {"figure", "value", "summary.json key"};
    tab_open(p, "economics-table", heads, 3, "lrl");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_t *v = rpt_json_path(e, rows[i].key);
        if (!v) continue;
        char key[128];
        snprintf(key, sizeof key, "economics.%s", rows[i].key);
        row_open(p);
        cell_text(p, rows[i].label);
        if (!strcmp(rows[i].key, "payback_days") && json_is_null(v))
            cell_text(p, "never (revenue does not cover cash opex)");
        else
            cell_json(p, key, v);
        cell_code(p, key);
        row_close(p);
    }
    tab_close(p);

    json_t *pd = json_object_get(e, "cost_per_day_usd_by_part");
    json_t *ph = json_object_get(e, "cost_per_gpu_hour_usd_by_part");
    if (json_is_object(pd)) {
        both_heading(p, 3, "cost-parts", "Cost by part");
        static const char *const h2[] = {"part", "per day", "per GPU-hour", "share"};
        tab_open(p, "cost-parts-table", h2, 4, NULL);
        double tot = 0;
        for (size_t i = 0; i < 5; i++)
            tot += json_number_value(json_object_get(pd, PARTS[i]));
        for (size_t i = 0; i < 5; i++) {
            double d = json_number_value(json_object_get(pd, PARTS[i]));
            char k1[96], k2[96];
            snprintf(k1, sizeof k1, "economics.cost_per_day_usd_by_part.%s", PARTS[i]);
            snprintf(k2, sizeof k2, "economics.cost_per_gpu_hour_usd_by_part.%s", PARTS[i]);
            row_open(p);
            cell_text(p, PART_WORDS[i]);
            cell_json(p, k1, json_object_get(pd, PARTS[i]));
            cell_json(p, k2, json_object_get(ph, PARTS[i]));
            cell_pct(p, tot > 0 ? d / tot : NAN);
            row_close(p);
        }
        tab_close(p);
    }
    json_t *sens = json_object_get(e, "sensitivity");
    if (json_is_object(sens)) {
        both_heading(p, 3, "sens-hit", "Margin and payback against the cache-hit rate");
        both_para(p, "meta",
                  "Each row gives every class this hit rate and re-bills it; prefill GPUs scale "
                  "with 1 - s x h relative to this run, s (economics.hit_saving_per_unit_hit_rate) "
                  "the share of prefill work a unit of hit rate saves, taken from this run's "
                  "prefill FLOPs with and without reuse (economics.hit_sensitivity_basis). "
                  "'Margin, revenue held' keeps this run's revenue and shows the cost side alone.");
        sens_table(p, e, "hit_rate", "sens-hit-table", "hit rate", true);
        hit_story(p, e);
        if (json_array_size(json_object_get(sens, "utilization"))) {
            both_heading(p, 3, "sens-util", "Against utilisation");
            both_para(p, "meta",
                      "Same fleet; traffic, and so revenue, scaled to the utilisation, "
                      "up to capacity: the last row is where the busiest pool is fully "
                      "busy; no row goes past it.");
            sens_table(p, e, "utilization", "sens-util-table", "utilisation", false);
        }
        both_heading(p, 3, "sens-price", "Against price");
        both_para(p, "meta",
                  "All prices multiplied by the factor; the break-even factor is a row.");
        sens_table(p, e, "price", "sens-price-table", "price factor", false);
    }
}

// A table row: one or two text cells, then x's values under keys.
static void json_row(page *p, const char *a, const char *b, json_t *x, const char *const *keys,
                     int n) {
    row_open(p);
    cell_text(p, a);
    if (b) cell_text(p, b);
    for (int i = 0; i < n; i++)
        cell_json(p, NULL, json_object_get(x, keys[i]));
    row_close(p);
}

// One error table of validation.json (real, sim, error and its noise band per figure).
static void validation_table(page *p, json_t *t, const char *id) {
    static const char *const heads[] = {"figure", "real", "sim", "error %", "band +-%"};
    tab_open(p, id, heads, 5, NULL);
    static const char *const metrics[] = {"ttft_ms", "tpot_ms", "e2e_ms", "itl_ms"};
    static const char *const stats[] = {"mean", "p50", "p90", "p99"};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 4; j++) {
            json_t *c = json_object_get(json_object_get(t, metrics[i]), stats[j]);
            if (!json_is_object(c)) continue;
            char lab[64];
            snprintf(lab, sizeof lab, "%s %s", metrics[i], stats[j]);
            static const char *const keys[] = {"real", "sim", "error_pct", "band_pct"};
            json_row(p, lab, NULL, c, keys, 4);
        }
    tab_close(p);
}

static void verdict_line(page *p, json_t *f, const char *what) {
    char line[400];
    snprintf(line, sizeof line, "%s: %s (worst %.3g %%, noise band +-%.3g %%, tolerance %.3g %%).",
             what,
             json_string_value(json_object_get(f, "verdict"))
                 ? json_string_value(json_object_get(f, "verdict"))
                 : "n/a",
             rpt_json_num(f, "worst_error_pct"), rpt_json_num(f, "band_pct"),
             rpt_json_num(f, "tolerance_pct"));
    both_para(p, "meta", line);
}

static void sec_validation(rep *r, page *p) {
    if (!r->validation) return;
    both_heading(p, 2, "validation", "Validation against the real engine");
    json_t *v = r->validation;
    char line[900], nreq[32] = "n/a";
    const char *trace = json_string_value(json_object_get(v, "trace"));
    if (json_is_number(json_object_get(v, "requests")))
        snprintf(nreq, sizeof nreq, "%.0f", json_number_value(json_object_get(v, "requests")));
    snprintf(
        line, sizeof line,
        "Trace %s, %s requests; error = 100 x (sim - real) / real. Inputs: the served trace and "
        "the profile; outputs: every figure below. Band: how far the simulated figure moves "
        "when every step is slower or faster by the measured step-time noise.",
        trace ? trace : "n/a", nreq);
    both_para(p, "meta", line);
    json_t *ld = json_object_get(v, "serve"), *nz = json_object_get(v, "noise");
    if (json_is_object(ld) && json_is_object(nz)) {
        // a probe's own scatter: validations from before it was reported lack it
        double sc = rpt_json_num(nz, "probe_cpu_spread_pct");
        char scat[64] = "";
        if (isfinite(sc)) snprintf(scat, sizeof scat, ", a probe's own scatter +-%.3g %%", sc);
        snprintf(line, sizeof line,
                 "Serve: %.3g s, utilisation %.2f, hit rate %.1f %%. Noise: the machine's level "
                 "moved +-%.3g %% (thread CPU) and +-%.3g %% (wall) over the serve%s, drift "
                 "%+.3g %%, steal %.3g %%, wake-up latency p90 %.3g ms; overall verdict %s.",
                 rpt_json_num(ld, "wall_s"), rpt_json_num(ld, "utilisation"),
                 100 * rpt_json_num(ld, "hit_rate"), rpt_json_num(nz, "probe_cpu_band_pct"),
                 rpt_json_num(nz, "probe_wall_band_pct"), scat, rpt_json_num(nz, "drift_wall_pct"),
                 rpt_json_num(nz, "steal_pct"), rpt_json_num(nz, "wakeup_latency_ms_p90"),
                 json_string_value(json_object_get(v, "verdict"))
                     ? json_string_value(json_object_get(v, "verdict"))
                     : "n/a");
        both_para(p, "meta", line);
    }
    json_t *sch = json_object_get(v, "scheduling");
    if (json_is_object(sch)) {
        both_heading(p, 3, "validation-scheduling",
                     "Scheduling fidelity (measured step times replayed)");
        verdict_line(p, sch, "Scheduling");
        validation_table(p, sch, "validation-scheduling-table");
    }
    both_heading(p, 3, "validation-e2e", "End to end (calibrated step model)");
    json_t *e2e = json_object_get(v, "end_to_end");
    if (json_is_object(e2e)) verdict_line(p, e2e, "End to end");
    validation_table(p, json_is_object(e2e) ? e2e : v, "validation-table");
    json_t *corr = json_object_get(v, "per_request_corr");
    if (json_is_object(corr)) {
        snprintf(line, sizeof line, "Per-request correlation: TTFT %.4g, end-to-end %.4g.",
                 rpt_json_num(corr, "ttft"), rpt_json_num(corr, "e2e"));
        both_para(p, "meta", line);
    }
    json_t *stf = json_object_get(v, "step_time");
    if (json_is_object(stf)) {
        both_heading(p, 3, "validation-steps", "Step-time fidelity (every served step)");
        verdict_line(p, stf, "Step time (median |residual| per kind)");
        static const char *const heads[] = {
            "kind",   "steps", "median residual %", "median |residual| %", "p90 |residual| %",
            "flagged"};
        tab_open(p, "validation-steps-table", heads, 6, NULL);
        static const char *const kinds[] = {"prefill", "decode", "mixed"};
        for (int k = 0; k < 3; k++) {
            json_t *x = json_object_get(json_object_get(stf, "kinds"), kinds[k]);
            if (!json_is_object(x)) continue;
            static const char *const keys[] = {"steps", "median_residual_pct",
                                               "median_abs_residual_pct", "p90_abs_residual_pct",
                                               "flagged"};
            json_row(p, kinds[k], NULL, x, keys, 5);
        }
        tab_close(p);
        static const char *const h2[] = {"kind",  "shape", "steps", "median residual %",
                                         "p10 %", "p90 %"};
        tab_open(p, "validation-shapes-table", h2, 6, NULL);
        json_t *sh = json_object_get(stf, "shapes");
        for (size_t i = 0; i < json_array_size(sh); i++) {
            json_t *x = json_array_get(sh, i);
            static const char *const keys[] = {"steps", "median_residual_pct", "p10_residual_pct",
                                               "p90_residual_pct"};
            json_row(p, json_string_value(json_object_get(x, "kind")),
                     json_string_value(json_object_get(x, "shape")), x, keys, 4);
        }
        tab_close(p);
        snprintf(
            line, sizeof line,
            "Flagged: %.0f served steps outside the profile (extrapolated above it or below its "
            "grid); every step with its prediction and flag is in steps.csv. Charts "
            "validation_ttft and validation_residuals draw them.",
            rpt_json_num(stf, "flagged_steps"));
        both_para(p, "meta", line);
    }
}

static void sec_all(rep *r, page *p) {
    both_heading(p, 2, "all", "All summary figures");
    static const char *const skip[] = {"economics.sensitivity", "config",
                                       NULL};   // config: the inputs, not figures
    rpt_leaf *l;
    size_t n = rpt_json_leaves(r->summary, skip, &l);
    static const char *const heads[] = {"figure", "value", "summary.json key"};
    tab_open(p, "all-table", heads, 3, "lrl");
    for (size_t i = 0; i < n; i++) {
        char words[200];
        rpt_key_words(l[i].key, words, sizeof words);
        row_open(p);
        cell_text(p, words);
        cell_json(p, l[i].key, l[i].value);
        cell_code(p, l[i].key);
        row_close(p);
    }
    tab_close(p);
    rpt_leaves_free(l, n);
}

static void sec_defs(page *p) {
    both_heading(p, 2, "definitions", "Definitions");
    both_para(p, "meta",
              "TTFT: arrival at the frontend to the first output token leaving prefill. TPOT: "
              "(last token - first token) / (output tokens - 1). Cache hit rate: hit tokens / "
              "prompt tokens. Prefill input tok/s per GPU counts hit and miss tokens. Per-day "
              "money figures scale the run's rates to 86,400 s. Payback: capex / (revenue per "
              "day - cash opex per day), cash opex = power + SSD + DRAM + network.");
}

static const char CSS[] =
    "body{font-family:Helvetica,Arial,sans-serif;max-width:1320px;margin:0 auto;padding:12px 20px;"
    "color:#222}h1{font-size:1.45em;margin:.2em 0}h2{border-bottom:1px solid #ccc;"
    "padding-bottom:.2em;margin-top:1.6em}table{border-collapse:collapse;margin:.6em 0;"
    "font-size:.92em}th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left;"
    "vertical-align:top}th{background:#f3f3f3}td.num{text-align:right;"
    "font-variant-numeric:tabular-nums}td.key{color:#777;font-family:monospace;font-size:.85em}"
    "figure{margin:0}figure svg{width:100%;height:auto}figure h3{font-size:1em;margin:.4em 0}"
    "figcaption{font-size:.82em;color:#555}.charts{display:grid;"
    "grid-template-columns:repeat(auto-fill,minmax(600px,1fr));gap:18px 24px}"
    ".warn{background:#fff4e0;border-left:4px solid #e0a000;padding:.4em .8em}"
    ".note{color:#777}.meta{color:#444;margin:.2em 0}nav{margin:.6em 0;font-size:.9em}"
    "nav a{margin-right:1em}pre{white-space:pre-wrap;font-size:.85em}"
    ".answer{margin:.5em 0 .8em}.verdict{padding:.5em .9em;border-radius:4px;margin:.4em 0;"
    "font-size:1.05em}.verdict-stable{background:#e6f4ea;border-left:6px solid #2e7d32}"
    ".verdict-backlogged{background:#fff4e0;border-left:6px solid #e0a000}"
    ".verdict-overloaded{background:#fde8e8;border-left:6px solid #c62828}"
    ".verdict-unknown{background:#f3f3f3;border-left:6px solid #999}.why{color:#555}"
    ".cards{display:grid;grid-template-columns:1.5fr 1fr 1.2fr 1.1fr;gap:12px;margin:.6em 0}"
    ".card{border:1px solid #ddd;border-radius:6px;padding:.6em .8em;background:#fafafa}"
    ".card .lab{font-size:.8em;color:#666;text-transform:uppercase;letter-spacing:.04em}"
    ".card .big{font-size:1.35em;margin:.25em 0}.card .big .v{font-weight:bold}"
    ".card .sub{font-size:.82em;color:#555}.keyline{font-size:.95em;color:#333}"
    ".keyline .v{font-weight:bold}";

// ---- entry ------------------------------------------------------------------------------

static void rep_free(rep *r) {
    json_decref(r->summary);
    json_decref(r->validation);
    if (r->db) sqlite3_close(r->db);
    for (size_t i = 0; i < r->nts; i++) {
        free(r->ts[i].t);
        free(r->ts[i].v);
    }
    free(r->ts);
    rpt_buf_free(&r->gp);
}

void rpt_report_final_dir(const char *dir, char *out, size_t n) {
    KVF_ASSERT(dir && out && n > 0);
    snprintf(out, n, "%s", dir);
    // DIR.tmp.PID: the directory a run writes before it is renamed to DIR
    char *t = strstr(out, ".tmp.");
    while (t) {
        char *next = strstr(t + 1, ".tmp.");
        if (!next) break;
        t = next;
    }
    if (!t || t == out || !t[5]) return;
    for (const char *q = t + 5; *q; q++)
        if ((*q < '0' || *q > '9') && !(*q == '/' && !q[1])) return;
    *t = '\0';
}

// Reads summary.json, validation.json and opens results.db; decides whether gnuplot draws.
static kvf_status rep_load(rep *r, kvf_err *err) {
    char path[4200];
    const char *dir = r->dir;
    snprintf(path, sizeof path, "%s/summary.json", dir);
    json_error_t je;
    if (access(path, F_OK) != 0)
        return kvf_fail(err, KVF_ENOENT, "%s: not found (is %s a results directory?)", path, dir);
    kvf_status s;
    static const char *const inputs[] = {"summary.json", "validation.json", "results.db"};
    for (size_t k = 0; k < sizeof inputs / sizeof *inputs; k++) {   // a FIFO would hang us
        char in[4200];
        snprintf(in, sizeof in, "%s/%s", dir, inputs[k]);
        if ((s = rpt_regular_or_missing("report: input", in, err))) return s;
    }
    r->summary = json_load_file(path, 0, &je);
    if (!r->summary) return kvf_fail(err, KVF_EPARSE, "%s:%d: %s", path, je.line, je.text);
    if (!json_is_object(r->summary))
        return kvf_fail(err, KVF_EPARSE, "%s: not a JSON object (a run's summary is one)", path);
    snprintf(path, sizeof path, "%s/validation.json", dir);
    if (access(path, F_OK) == 0) {
        r->validation = json_load_file(path, 0, &je);
        if (!r->validation) return kvf_fail(err, KVF_EPARSE, "%s:%d: %s", path, je.line, je.text);
    }
    snprintf(path, sizeof path, "%s/results.db", dir);
    if (access(path, F_OK) != 0) {
        snprintf(r->db_note, sizeof r->db_note,
                 "No results.db in this directory: no run table, CDFs or time series.");
    } else if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        return kvf_fail(err, KVF_ERUN, "%s: %s", path,
                        r->db ? sqlite3_errmsg(r->db) : "cannot open");
    } else if (sqlite3_exec(r->db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) !=
               SQLITE_OK) {
        return db_fail(r, "schema", err);   // not a database, or its first pages damaged
    } else if (sqlite3_exec(r->db, "SELECT count(*), total(length(key) + length(value)) FROM run",
                            NULL, NULL, NULL) != SQLITE_OK &&
               !db_no_table(r)) {
        // the run table is read whole here (it is small): its section, written later, would
        // otherwise stop at a damaged page in silence; the request and timeseries tables are
        // checked as they are read
        return db_fail(r, "run", err);
    }
    snprintf(r->files, sizeof r->files, "%s/report_files", dir);
    struct stat lsb;   // the chart files are written inside: never through a link elsewhere
    if (lstat(r->files, &lsb) == 0 && !S_ISDIR(lsb.st_mode))
        return kvf_fail(err, KVF_EINVAL,
                        "report: %s: %s, not the report's own directory; "
                        "refused (remove it to let the report write its charts)",
                        r->files, S_ISLNK(lsb.st_mode) ? "a symbolic link" : "not a directory");
    s = kvf_mkdirs(r->files, err);
    if (s) return s;
    const char *nog = getenv("KVF_NO_GNUPLOT");
    if (nog && *nog && strcmp(nog, "0"))
        snprintf(r->gnuplot_note, sizeof r->gnuplot_note, "gnuplot disabled (KVF_NO_GNUPLOT=%s)",
                 nog);
    else if (!rpt_on_path("gnuplot"))
        snprintf(r->gnuplot_note, sizeof r->gnuplot_note, "gnuplot is not installed (not on PATH)");
    else
        r->gnuplot = true;
    return KVF_OK;
}

// Every chart's data and script, then one gnuplot process for them all.
static kvf_status rep_charts(rep *r, kvf_err *err) {
    kvf_status s;
    if ((s = load_timeseries(r, err))) return s;
    if ((s = chart_cdf(r, "ttft_s", "ttft_cdf", "TTFT distribution (CDF)", "TTFT (ms)", err)))
        return s;
    if ((s = chart_cdf(r, "tpot_s", "tpot_cdf", "TPOT distribution (CDF)", "TPOT (ms)", err)))
        return s;
    static const ts_spec specs[] = {
        {"throughput",
         "Throughput over time",
         "tokens/s",
         {"input_tok_s", "output_tok_s"},
         false,
         1,
         false,
         true,
         "output tokens/s"},
        {"queue_len",
         "Queue length over time",
         "queued requests",
         {"queue_len"},
         true,
         1,
         false,
         false,
         NULL},
        {"running",
         "Running requests over time",
         "requests",
         {"running_requests"},
         true,
         1,
         false,
         false,
         NULL},
        {"hit_rate",
         "Cache hit rate over time, by tier",
         "hit rate (%)",
         {"hit_rate", "hit_rate_hbm", "hit_rate_dram", "hit_rate_ssd"},
         false,
         100,
         false,
         false,
         NULL},
        {"kv_store",
         "KV store occupancy",
         "stored KV",
         {"kv_store_bytes", "hbm_cache_bytes", "dram_cache_bytes"},
         false,
         1,
         true,
         false,
         NULL},
        {"kv_used",
         "HBM KV cache in use",
         "share of KV capacity (%)",
         {"kv_used_frac"},
         true,
         100,
         false,
         false,
         NULL},
        {"utilization",
         "Utilisation per pool",
         "busy share (%)",
         {"utilization"},
         true,
         100,
         false,
         false,
         NULL},
        {"instances",
         "Instances per pool over time",
         "instances",
         {"instances"},
         true,
         1,
         false,
         false,
         NULL},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        if ((s = chart_ts(r, &specs[i], err))) return s;
    if ((s = chart_cost(r, err))) return s;
    if ((s = chart_validation(r, err))) return s;
    if ((s = chart_sens(r, "hit_rate", "margin_vs_hit", "Margin against cache-hit rate",
                        "cache hit rate (%)", 100, rpt_json_num(r->summary, "economics.hit_rate"),
                        err)))
        return s;
    if ((s = chart_sens(r, "utilization", "margin_vs_util", "Margin against utilisation",
                        "utilisation (%)", 100, rpt_json_num(r->summary, "economics.utilization"),
                        err)))
        return s;
    if ((s = chart_sens(r, "price", "margin_vs_price", "Margin against price",
                        "price factor (x configured prices)", 1, 1.0, err)))
        return s;
    run_gnuplot(r);
    return KVF_OK;
}

// The page: title and the run's identity, the answer, then charts, tables, figures.
static void rep_page(rep *r, page *pg, const char *shown) {
    json_t *s = r->summary;
    const char *name = json_string_value(json_object_get(s, "scenario"));
    char title[4200];
    snprintf(title, sizeof title, "kvfleet report: %s", name ? name : shown);
    rpt_buf_puts(&pg->h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                         "<meta name=\"viewport\" content=\"width=device-width\">\n<title>");
    rpt_buf_html(&pg->h, title);
    rpt_buf_printf(&pg->h, "</title>\n<style>%s</style></head><body>\n<h1>", CSS);
    rpt_buf_html(&pg->h, title);
    rpt_buf_puts(&pg->h, "</h1>\n");
    rpt_buf_printf(&pg->m, "# %s\n\n", title);
    char line[5000], seed[32] = "n/a";
    if (json_is_number(json_object_get(s, "seed")))
        snprintf(seed, sizeof seed, "%.0f", json_number_value(json_object_get(s, "seed")));
    const char *model = json_string_value(json_object_get(s, "model"));
    const char *hw = json_string_value(json_object_get(s, "hardware"));
    const char *stepm = json_string_value(json_object_get(s, "step_model"));
    snprintf(line, sizeof line, "Results in %s. Model %s on %s, %s step model, seed %s.", shown,
             model ? model : "n/a", hw ? hw : "n/a", stepm ? stepm : "n/a", seed);
    rpt_buf_puts(&pg->h, "<p class=\"meta\" id=\"results-dir\" data-dir=\"");
    rpt_buf_html(&pg->h, shown);
    rpt_buf_puts(&pg->h, "\">");
    rpt_buf_html(&pg->h, line);
    rpt_buf_puts(&pg->h, "</p>\n");
    rpt_buf_printf(&pg->m,
                   "Results directory: `%s` (summary.json, results.db). Model %s on %s, "
                   "%s step model, seed %s.\n",
                   shown, model ? model : "n/a", hw ? hw : "n/a", stepm ? stepm : "n/a", seed);
    sec_answer(r, pg);
    rpt_buf_puts(&pg->h, "<nav>");
    if (json_array_size(json_object_get(s, "published")))
        rpt_buf_puts(&pg->h, "<a href=\"#published\">published</a>");
    rpt_buf_puts(&pg->h, "<a href=\"#charts\">charts</a><a href=\"#economics\">economics</a>");
    if (r->validation) rpt_buf_puts(&pg->h, "<a href=\"#validation\">validation</a>");
    rpt_buf_puts(&pg->h, "<a href=\"#scenario\">scenario and inputs</a><a href=\"#all\">all "
                         "figures</a></nav>\n");
    sec_published(r, pg);
    sec_charts(r, pg);
    sec_economics(r, pg);
    sec_validation(r, pg);
    sec_run(r, pg);
    sec_all(r, pg);
    sec_defs(pg);
    rpt_buf_puts(&pg->h, "</body></html>\n");
}

kvf_status rpt_report_write_as(const char *dir, const char *final_dir, bool html, bool md,
                               kvf_err *err) {
    KVF_ASSERT(dir && *dir && err);
    rep R;
    memset(&R, 0, sizeof R);
    rep *r = &R;
    r->dir = dir;
    page pg;
    memset(&pg, 0, sizeof pg);
    char shown[4096], path[4200];
    if (final_dir && *final_dir)
        snprintf(shown, sizeof shown, "%s", final_dir);
    else
        rpt_report_final_dir(dir, shown, sizeof shown);
    kvf_status s = rep_load(r, err);
    if (!s) s = rep_charts(r, err);
    if (s) goto out;
    rep_page(r, &pg, shown);
    if (html) {
        snprintf(path, sizeof path, "%s/report.html", dir);
        if ((s = rpt_write_text(path, pg.h.p, pg.h.n, err))) goto out;
    }
    if (md) {
        snprintf(path, sizeof path, "%s/report.md", dir);
        if ((s = rpt_write_text(path, pg.m.p, pg.m.n, err))) goto out;
    }
    if (r->write_failed)
        s = kvf_fail(err, KVF_EIO, "%s/report_files: chart data could not be written (disk full?)",
                     dir);
out:
    rpt_buf_free(&pg.h);
    rpt_buf_free(&pg.m);
    rep_free(r);
    return s;
}

kvf_status rpt_report_write(const char *dir, bool html, bool md, kvf_err *err) {
    return rpt_report_write_as(dir, NULL, html, md, err);
}
