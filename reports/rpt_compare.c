// reports/rpt_compare.c -- `kvfleet compare DIR... [--json] [--all]`: headline figures of
// several runs side by side, with the difference of each in percent against the first run.
//
// Inputs are each DIR/summary.json (a path to a .json file is taken as it is). When the
// runs carry their configuration (summary.json "config"), its keys whose values differ between
// runs are shown as the runs' "varied" keys, so a table of policies names the policy of each
// column; older runs fall back to their results.db run tables.
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rpt.h"
#include "rpt_util.h"

typedef struct cmp_run {
    char dir[4096];
    char label[64];
    json_t *sum;   // summary object
    json_t *run;   // run table as an object of strings (may be empty), or the
                   // keys of summary.json's "config" when it has one
    bool has_config;
} cmp_run;

void rpt_config_keys(json_t *run, json_t *o, const char *prefix) {
    KVF_ASSERT(run && prefix);
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        char key[512];
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", k);
        if (json_is_object(v)) {
            rpt_config_keys(run, v, key);
            continue;
        }
        char *text = json_is_string(v)
                         ? NULL
                         : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15));
        json_object_set_new(run, key, json_string(text ? text : json_string_value(v)));
        free(text);
    }
}

// The summary a run argument names: the .json file itself, else DIR/summary.json.
static void summary_path(const char *arg, char *path, size_t n) {
    if (kvf_endswith(arg, ".json"))
        snprintf(path, n, "%s", arg);
    else
        snprintf(path, n, "%s/summary.json", arg);
}

static kvf_status load_run(cmp_run *c, const char *arg, kvf_err *err) {
    char path[4200];
    snprintf(c->dir, sizeof c->dir, "%s", arg);
    summary_path(arg, path, sizeof path);
    kvf_status rs = rpt_regular_or_missing("compare: summary", path, err);
    if (rs) return rs;
    if (kvf_endswith(arg, ".json")) {
        char *slash = strrchr(c->dir, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(c->dir, sizeof c->dir, ".");
    }
    if (access(path, F_OK) != 0) return kvf_fail(err, KVF_ENOENT, "%s: not found", path);
    json_error_t je;
    c->sum = json_load_file(path, 0, &je);
    if (!c->sum) return kvf_fail(err, KVF_EPARSE, "%s:%d: %s", path, je.line, je.text);
    if (!json_is_object(c->sum))
        return kvf_fail(err, KVF_EPARSE, "%s: not a JSON object (a run's summary is one)", path);
    // label: last path component of the directory
    const char *base = c->dir;
    size_t len = strlen(base);
    while (len > 1 && base[len - 1] == '/')
        len--;
    size_t start = len;
    while (start > 0 && base[start - 1] != '/')
        start--;
    size_t n = len - start < sizeof c->label - 1 ? len - start : sizeof c->label - 1;
    memcpy(c->label, base + start, n);
    c->label[n] = '\0';

    c->run = json_object();
    json_t *cfg = json_object_get(c->sum, "config");
    if (json_is_object(cfg)) {   // the run's whole configuration: its keys are what varies
        rpt_config_keys(c->run, cfg, "");
        c->has_config = true;
        return KVF_OK;
    }
    snprintf(path, sizeof path, "%s/results.db", c->dir);
    sqlite3 *db = NULL;
    if (access(path, F_OK) == 0 &&
        sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, "SELECT key, value FROM run", -1, &st, NULL) == SQLITE_OK) {
            while (sqlite3_step(st) == SQLITE_ROW) {
                const char *k = (const char *)sqlite3_column_text(st, 0);
                const char *v = (const char *)sqlite3_column_text(st, 1);
                if (k && v && strlen(v) <= 200 && !strchr(v, '\n'))
                    json_object_set_new(c->run, k, json_string(v));
            }
            sqlite3_finalize(st);
        }
    }
    if (db) sqlite3_close(db);
    return KVF_OK;
}

// Run-table keys that are not the same string in every run (output/time keys excluded).
static json_t *varied_keys(cmp_run *r, int n) {
    json_t *keys = json_array();
    for (int i = 0; i < n; i++) {
        const char *k;
        json_t *v;
        json_object_foreach(r[i].run, k, v) {
            if (!r[i].has_config &&
                (strstr(k, "wall") || strstr(k, "time_utc") || strstr(k, "started") ||
                 strstr(k, "finished") || strstr(k, "out_dir") || strstr(k, "output") ||
                 !strcmp(k, "status")))
                continue;
            bool listed = false;
            size_t j;
            json_t *e;
            json_array_foreach(keys, j, e) if (!strcmp(json_string_value(e), k)) listed = true;
            if (listed) continue;
            bool differs = false;
            for (int m = 0; m < n; m++) {
                json_t *o = json_object_get(r[m].run, k);
                if (!o || strcmp(json_string_value(o), json_string_value(v))) differs = true;
            }
            if (differs) json_array_append_new(keys, json_string(k));
        }
    }
    return keys;
}

static double pct_diff(double v, double v0) {
    if (!isfinite(v) || !isfinite(v0)) return NAN;
    if (v0 == 0) return v == 0 ? 0 : NAN;
    return 100.0 * (v - v0) / fabs(v0);
}

static const char *const SKIP[] = {"economics.sensitivity", "config", NULL};

// Keys shown: the headline list, then (with all) every other scalar leaf of any run.
static json_t *shown_keys(cmp_run *r, int n, bool all) {
    json_t *keys = json_array();
    for (size_t i = 0; i < RPT_HEADLINE_N; i++)
        for (int m = 0; m < n; m++)
            if (rpt_json_path(r[m].sum, RPT_HEADLINE[i].key)) {
                json_array_append_new(keys, json_string(RPT_HEADLINE[i].key));
                break;
            }
    json_t *seen = json_object();
    size_t j;
    json_t *e;
    json_array_foreach(keys, j, e) json_object_set(seen, json_string_value(e), json_true());
    for (int m = 0; m < n; m++) {
        rpt_leaf *l;
        size_t nl = rpt_json_leaves(r[m].sum, SKIP, &l);
        for (size_t i = 0; i < nl; i++) {
            // every figure with --all; otherwise the text figures that differ between runs
            bool take = all;
            if (!take && json_is_string(l[i].value))
                for (int o = 0; o < n; o++) {
                    json_t *ov = rpt_json_path(r[o].sum, l[i].key);
                    if (!json_is_string(ov) ||
                        strcmp(json_string_value(ov), json_string_value(l[i].value)))
                        take = true;
                }
            if (take && !json_object_get(seen, l[i].key)) {
                json_array_append_new(keys, json_string(l[i].key));
                json_object_set(seen, l[i].key, json_true());
            }
        }
        rpt_leaves_free(l, nl);
    }
    json_decref(seen);
    return keys;
}

// The key in words (the headline label when it has one). Returns out.
static const char *label_of(const char *key, char *out, size_t n) {
    rpt_key_words(key, out, n);
    return out;
}

static void cell_str(const char *key, json_t *v, char *out, size_t n) {
    if (!v)
        snprintf(out, n, "-");
    else if (json_is_number(v))
        rpt_fmt_keyed(key, json_number_value(v), out, n);
    else if (json_is_string(v))
        snprintf(out, n, "%s", json_string_value(v));
    else if (json_is_boolean(v))
        snprintf(out, n, "%s", json_is_true(v) ? "true" : "false");
    else
        snprintf(out, n, "n/a");
}

kvf_status rpt_compare_html(const char *path, const char *const *dirs, int n, kvf_err *err) {
    return rpt_compare_page(path, dirs, n, 0, err);
}

kvf_status rpt_compare_page(const char *path, const char *const *dirs, int n, int baseline,
                            kvf_err *err) {
    KVF_ASSERT(path && err && (n == 0 || dirs));
    if (n < 1) return kvf_fail(err, KVF_EINVAL, "compare: no results directories given");
    KVF_ASSERT(baseline >= 0 && baseline < n);
    cmp_run *r = kvf_calloc((size_t)n, sizeof *r);
    kvf_status s = KVF_OK;
    for (int i = 0; i < n && !s; i++)
        s = load_run(&r[i], dirs[i], err);
    if (!s) {
        json_t *varied = varied_keys(r, n), *pts = json_array();
        for (int m = 0; m < n; m++) {
            json_t *k = json_object();
            size_t j;
            json_t *e;
            json_array_foreach(varied, j, e) {
                json_t *v = json_object_get(r[m].run, json_string_value(e));
                json_object_set_new(k, json_string_value(e),
                                    json_string(v ? json_string_value(v) : "-"));
            }
            json_array_append_new(pts, json_pack("{s:s, s:o, s:O}", "label", r[m].dir, "keys", k,
                                                 "summary", r[m].sum));
        }
        rpt_points_opts po = {.diffs = true, .baseline = baseline};
        s = rpt_points_page(path, "kvfleet compare", pts, &po, err);
        json_decref(pts);
        json_decref(varied);
    }
    for (int i = 0; i < n; i++) {
        json_decref(r[i].sum);
        json_decref(r[i].run);
    }
    free(r);
    return s;
}

// Text too long for its cell, printed whole below the table.
typedef struct notes {
    rpt_buf b;
    int n;
} notes;

// A right-aligned cell of width w. Longer text: a path keeps its end ("...mooncake.jsonl");
// anything else (nt given: a sentence, a list of values) gets a mark [k] in the cell and is
// printed whole below the table, so that two values differing anywhere read apart.
static void put_cell(FILE *out, const char *s, int w, notes *nt) {
    int len = (int)strlen(s);
    if (len <= w) {
        fprintf(out, "  %*s", w, s);
    } else if (nt && (strchr(s, ' ') || !strchr(s, '/'))) {
        char mark[16];
        snprintf(mark, sizeof mark, "[%d]", ++nt->n);
        fprintf(out, "  %*s", w, mark);
        rpt_buf_printf(&nt->b, "%s %s\n", mark, s);
    } else {
        fprintf(out, "  ...%s", s + len - (w - 3));
    }
}

static void print_table(FILE *out, cmp_run *r, int n, json_t *keys, json_t *varied, int base) {
    notes nt = {0};
    int w0 = 12;
    size_t j;
    json_t *e;
    json_array_foreach(keys, j, e) {
        char w[200];
        int l = (int)strlen(label_of(json_string_value(e), w, sizeof w));
        if (l > w0) w0 = l;
    }
    json_array_foreach(varied, j, e) {
        int l = (int)strlen(json_string_value(e));
        if (l > w0) w0 = l;
    }
    int wc = 26;
    for (int m = 0; m < n; m++)
        fprintf(out, "run %d: %s (scenario %s)\n", m + 1, r[m].dir,
                json_string_value(json_object_get(r[m].sum, "scenario"))
                    ? json_string_value(json_object_get(r[m].sum, "scenario"))
                    : "?");
    fprintf(out, "\n%-*s", w0, "figure");
    for (int m = 0; m < n; m++) {
        char h[64];
        snprintf(h, sizeof h, "run %d", m + 1);
        fprintf(out, "  %*s", wc, h);
    }
    fprintf(out, "\n");
    for (int i = 0; i < w0 + n * (wc + 2); i++)
        fputc('-', out);
    fputc('\n', out);
    json_array_foreach(varied, j, e) {
        const char *k = json_string_value(e);
        fprintf(out, "%-*s", w0, k);
        for (int m = 0; m < n; m++) {
            json_t *v = json_object_get(r[m].run, k);
            char shown[4096];
            put_cell(out, v ? rpt_fmt_text_value(json_string_value(v), shown, sizeof shown) : "-",
                     wc, &nt);
        }
        fprintf(out, "\n");
    }
    json_array_foreach(keys, j, e) {
        const char *k = json_string_value(e);
        char w[200];
        fprintf(out, "%-*s", w0, label_of(k, w, sizeof w));
        double v0 = rpt_json_num(r[base].sum, k);
        for (int m = 0; m < n; m++) {
            json_t *v = rpt_json_path(r[m].sum, k);
            char s[400], cell[440];
            cell_str(k, v, s, sizeof s);
            if (m != base && json_is_number(v) && rpt_key_unit(k) == RPT_U_FRAC) {
                double d = 100 * (json_number_value(v) - v0);   // shares differ in points
                if (isfinite(d))
                    snprintf(cell, sizeof cell, "%s (%+.1f pt)", s, d);
                else
                    snprintf(cell, sizeof cell, "%s (n/a)", s);
            } else if (m != base && json_is_number(v)) {
                double d = pct_diff(json_number_value(v), v0);
                if (isfinite(d))
                    snprintf(cell, sizeof cell, "%s (%+.1f%%)", s, d);
                else
                    snprintf(cell, sizeof cell, "%s (n/a)", s);
            } else {
                snprintf(cell, sizeof cell, "%s", s);
            }
            put_cell(out, cell, wc, json_is_string(v) ? &nt : NULL);
        }
        fprintf(out, "\n");
    }
    fprintf(out, "\n(differences against run %d: in percent, shares in points)\n", base + 1);
    if (nt.b.p) fprintf(out, "\n%s", nt.b.p);
    rpt_buf_free(&nt.b);
}

static json_t *points_json(cmp_run *r, int n, json_t *keys, json_t *varied, int base) {
    json_t *a = json_array();
    for (int m = 0; m < n; m++) {
        json_t *p = json_deep_copy(r[m].sum);
        json_object_set_new(p, "dir", json_string(r[m].dir));
        json_t *vk = json_object();
        size_t j;
        json_t *e;
        json_array_foreach(varied, j, e) {
            json_t *v = json_object_get(r[m].run, json_string_value(e));
            json_object_set(vk, json_string_value(e), v ? v : json_null());
        }
        json_object_set_new(p, "varied", vk);
        json_t *dp = json_object();
        json_array_foreach(keys, j, e) {
            const char *k = json_string_value(e);
            json_t *v = rpt_json_path(r[m].sum, k);
            if (!json_is_number(v)) continue;
            double d = pct_diff(json_number_value(v), rpt_json_num(r[base].sum, k));
            json_object_set_new(dp, k, isfinite(d) ? json_real(d) : json_null());
        }
        json_object_set_new(p, "diff_pct", dp);
        json_array_append_new(a, p);
    }
    return a;
}

kvf_status rpt_compare_write(FILE *out, const char *const *dirs, int n, bool json, bool all,
                             kvf_err *err) {
    return rpt_compare_write_base(out, dirs, n, json, all, 0, err);
}

kvf_status rpt_compare_write_base(FILE *out, const char *const *dirs, int n, bool json, bool all,
                                  int baseline, kvf_err *err) {
    KVF_ASSERT(out && err && (n == 0 || dirs));
    if (n < 1) return kvf_fail(err, KVF_EINVAL, "compare: no results directories given");
    KVF_ASSERT(baseline >= 0 && baseline < n);
    cmp_run *r = kvf_calloc((size_t)n, sizeof *r);
    kvf_status s = KVF_OK;
    for (int i = 0; i < n; i++)
        if ((s = load_run(&r[i], dirs[i], err))) goto out;
    json_t *varied = varied_keys(r, n);
    json_t *keys = shown_keys(r, n, all);
    if (json) {
        json_t *a = points_json(r, n, keys, varied, baseline);
        json_dumpf(a, out, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        fputc('\n', out);
        json_decref(a);
    } else {
        print_table(out, r, n, keys, varied, baseline);
    }
    json_decref(varied);
    json_decref(keys);
out:
    for (int i = 0; i < n; i++) {
        json_decref(r[i].sum);
        json_decref(r[i].run);
    }
    free(r);
    return s;
}

// The run named by --baseline: a 1-based number, a directory as given, or its last part.
static int find_baseline(const char *name, const char *const *dirs, int n) {
    char *end = NULL;
    long k = strtol(name, &end, 10);
    if (end && end != name && !*end && k >= 1 && k <= n) return (int)k - 1;
    for (int i = 0; i < n; i++)
        if (!strcmp(dirs[i], name)) return i;
    int found = -1;
    for (int i = 0; i < n; i++) {
        const char *b = strrchr(dirs[i], '/');
        b = b && b[1] ? b + 1 : dirs[i];
        size_t len = strlen(name);
        if (!strncmp(b, name, len) && (b[len] == '\0' || b[len] == '/')) {
            if (found >= 0) return -2;   // two runs end so: the name does not say which
            found = i;
        }
    }
    return found;
}

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: kvfleet compare DIR... [--json] [--all] [--html FILE] [--baseline NAME]\n"
               "  headline figures of several runs side by side, with differences in\n"
               "  percent against the baseline (the first run unless --baseline names one);\n"
               "  --all adds every figure of summary.json;\n"
               "  --html also writes FILE: the answer, the chart of cost per day against SLO\n"
               "  attainment and a table of the runs with a column of differences against the\n"
               "  baseline (FILE's stem + _files/ holds its data);\n"
               "  --baseline NAME: the run to compare against, by its number (1 = first), its\n"
               "  directory as given, or the directory's last part\n");
    return rc;
}

// The page --html writes must be a new or regular file (not a link) and none of the runs'
// summaries (device and inode): compare never overwrites what it reads.
static kvf_status check_page(const char *html, const char *const *dirs, int n, kvf_err *err) {
    struct stat h, in;
    if (lstat(html, &h) == 0 && S_ISLNK(h.st_mode))
        return kvf_fail(err, KVF_EINVAL,
                        "compare: --html %s: a symbolic link; refused (nothing "
                        "is written through a link): name the file itself",
                        html);
    kvf_status s = rpt_regular_or_missing("compare: --html", html, err);
    if (s || stat(html, &h) != 0) return s;
    char path[4200];
    for (int i = 0; i < n; i++) {
        summary_path(dirs[i], path, sizeof path);
        if (stat(path, &in) == 0 && in.st_dev == h.st_dev && in.st_ino == h.st_ino)
            return kvf_fail(err, KVF_EINVAL,
                            "compare: --html %s: is the summary of run %s "
                            "(%s); refused, an output never overwrites an input",
                            html, dirs[i], path);
    }
    return KVF_OK;
}

int rpt_compare_cli_main(int argc, char **argv) {
    KVF_ASSERT(argc >= 1 && argv);
    bool json = false, all = false;
    const char *html = NULL, *base = NULL;
    const char **dirs = kvf_calloc((size_t)argc + 1, sizeof *dirs);
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "--html") || !strcmp(a, "--baseline")) && i + 1 >= argc) {
            fprintf(stderr, "kvfleet: compare: option '%s' needs a value (%s)\n", a,
                    a[2] == 'h' ? "the page to write" : "a run's number or directory");
            free(dirs);
            return 2;
        }
        if (!strcmp(a, "--html"))
            html = argv[++i];
        else if (!strcmp(a, "--baseline"))
            base = argv[++i];
        else if (!strcmp(a, "--json"))
            json = true;
        else if (!strcmp(a, "--all"))
            all = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            free(dirs);
            return usage(stdout, 0);
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kvfleet: compare: unknown option '%s'\n", a);
            free(dirs);
            return 2;
        } else {
            dirs[n++] = a;
        }
    }
    if (n == 0) {
        fprintf(stderr, "kvfleet: usage: kvfleet compare DIR... [--json] [--all] [--html FILE] "
                        "[--baseline NAME]\n");
        free(dirs);
        return 2;
    }
    int b = base ? find_baseline(base, dirs, n) : 0;
    if (b == -2) {
        fprintf(stderr,
                "kvfleet: compare: --baseline '%s' is the last part of more than one run's "
                "directory; name it by its number (1..%d) or its directory as given\n",
                base, n);
        free(dirs);
        return 2;
    }
    if (b < 0) {
        fprintf(stderr,
                "kvfleet: compare: --baseline '%s' is none of the %d runs given (a number "
                "1..%d, a directory as given, or its last part)\n",
                base, n, n);
        free(dirs);
        return 2;
    }
    kvf_err err = {0};
    kvf_status s = html ? check_page(html, dirs, n, &err) : KVF_OK;
    if (!s) s = rpt_compare_write_base(stdout, dirs, n, json, all, b, &err);
    if (!s && html) s = rpt_compare_page(html, dirs, n, b, &err);
    free(dirs);
    if (s) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(s);
    }
    return 0;
}
