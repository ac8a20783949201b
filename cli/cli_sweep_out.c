// cli/cli_sweep_out.c -- what `kvfleet sweep` writes and prints from its points' summaries
// (cli_sweep.h): sweep.db, sweep.csv, sweep.html, the table and the JSON on stdout. A point
// that failed, was interrupted or did not run has no summary: its figures are NULL / empty, its
// status "unfinished" and its reason (cli_sweep_reason) beside it.
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_points.h"
#include "cli_sweep.h"

// Headline figures of a point: column name and dotted path in the summary.
static const struct {
    const char *col, *path;
} k_figs[] = {
    {"ttft_p50_ms", "ttft_ms.p50"},
    {"ttft_p90_ms", "ttft_ms.p90"},
    {"ttft_p99_ms", "ttft_ms.p99"},
    {"tpot_p50_ms", "tpot_ms.p50"},
    {"tpot_p90_ms", "tpot_ms.p90"},
    {"e2e_p90_ms", "e2e_ms.p90"},
    {"hit_rate", "cache.hit_rate"},
    {"input_tok_s", "throughput.input_tok_s"},
    {"output_tok_s", "throughput.output_tok_s"},
    {"prefill_tok_s_per_gpu", "throughput.prefill_input_tok_s_per_gpu"},
    {"decode_tok_s_per_gpu", "throughput.decode_output_tok_s_per_gpu"},
    {"gpus", NULL},   // vision + prefill + decode
    {"gpu_hours", "gpu_hours"},
    {"cost_usd", "economics.cost_usd"},
    {"cost_per_day_usd", "economics.cost_per_day_usd"},
    {"margin", "economics.margin"},
    {"slo_attainment", "slo.attainment"},
    {"completed", "requests.completed"},
    {"rejected", "requests.rejected"},
};
enum { N_FIGS = sizeof k_figs / sizeof k_figs[0] };

static double fig(const json_t *sm, int f) {
    if (!sm) return NAN;
    return k_figs[f].path ? sim_points_num(sm, k_figs[f].path) : sim_points_gpus(sm);
}

static const char *point_status(const cli_sweep_state *s, int i) {
    return s->summary[i] ? "completed" : "unfinished";
}

// The reason of an unfinished point; NULL for a completed one.
static const char *point_reason(const cli_sweep_state *s, int i) {
    return s->summary[i] ? NULL : cli_sweep_reason(s, i);
}

static void sql_quote_ident(char *out, size_t n, const char *id) {
    size_t j = 0;
    if (j < n - 1) out[j++] = '"';
    for (const char *p = id; *p && j < n - 3; p++) {
        if (*p == '"') out[j++] = '"';
        out[j++] = *p;
    }
    out[j++] = '"';
    out[j] = '\0';
}

static kvf_status sql_exec(sqlite3 *db, const char *sql, const char *path, kvf_err *err) {
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        kvf_status st = kvf_fail(err, KVF_ERUN, "%s: %s", path, msg ? msg : "sqlite error");
        sqlite3_free(msg);
        return st;
    }
    return KVF_OK;
}

kvf_status cli_sweep_write_db(const cli_sweep_state *s, kvf_err *err) {
    KVF_ASSERT(s && s->out && s->names && s->summary);
    char path[SIM_PATH_MAX + 64], tmp[SIM_PATH_MAX + 100];
    snprintf(path, sizeof path, "%s/sweep.db", s->out);
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    unlink(tmp);
    sqlite3 *db = NULL;
    sqlite3_stmt *ins = NULL;
    kvf_status st = KVF_OK;
    if (sqlite3_open(tmp, &db) != SQLITE_OK) {
        st = kvf_fail(err, KVF_ERUN, "%s: %s", tmp, db ? sqlite3_errmsg(db) : "cannot open");
        goto done;
    }
    size_t cap = 8192;
    char *sql = kvf_malloc(cap), *q = kvf_malloc(cap);
    size_t n = (size_t)snprintf(sql, cap, "CREATE TABLE point(idx INTEGER PRIMARY KEY");
    size_t qn = (size_t)snprintf(q, cap, "INSERT INTO point VALUES(?");
    char id[SIM_KEY_MAX * 2 + 200];
    for (int k = 0; k < s->nkeys; k++) {
        sql_quote_ident(id, sizeof id, s->keys[k].key);
        n += (size_t)snprintf(sql + n, cap - n, ", %s NUMERIC", id);
        qn += (size_t)snprintf(q + qn, cap - qn, ",?");
    }
    n += (size_t)snprintf(sql + n, cap - n, ", dir TEXT, status TEXT, reason TEXT");
    qn += (size_t)snprintf(q + qn, cap - qn, ",?,?,?");
    for (int f = 0; f < N_FIGS; f++) {
        n += (size_t)snprintf(sql + n, cap - n, ", %s REAL", k_figs[f].col);
        qn += (size_t)snprintf(q + qn, cap - qn, ",?");
    }
    snprintf(sql + n, cap - n, ", saturation TEXT);");
    snprintf(q + qn, cap - qn, ",?)");
    st = sql_exec(db, "BEGIN; CREATE TABLE sweep(key TEXT PRIMARY KEY, value TEXT);", tmp, err);
    if (!st) st = sql_exec(db, sql, tmp, err);
    if (!st && sqlite3_prepare_v2(db, q, -1, &ins, NULL) != SQLITE_OK)
        st = kvf_fail(err, KVF_ERUN, "%s: %s", tmp, sqlite3_errmsg(db));
    free(sql);
    free(q);
    if (st) goto done;
    for (int i = 0; i < s->npoints; i++) {
        int c = 1;
        sqlite3_reset(ins);
        sqlite3_bind_int(ins, c++, i);
        for (int k = 0; k < s->nkeys; k++)
            sqlite3_bind_text(ins, c++, s->keys[k].vals[cli_sweep_point_val(s, i, k)], -1,
                              SQLITE_STATIC);
        sqlite3_bind_text(ins, c++, s->names[i], -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, c++, point_status(s, i), -1, SQLITE_STATIC);
        if (point_reason(s, i))
            sqlite3_bind_text(ins, c++, point_reason(s, i), -1, SQLITE_TRANSIENT);
        else
            sqlite3_bind_null(ins, c++);
        for (int f = 0; f < N_FIGS; f++) {
            double v = fig(s->summary[i], f);
            if (isfinite(v))
                sqlite3_bind_double(ins, c++, v);
            else
                sqlite3_bind_null(ins, c++);
        }
        if (s->summary[i])
            sqlite3_bind_text(ins, c++, sim_points_str(s->summary[i], "saturation.state"), -1,
                              SQLITE_TRANSIENT);
        else
            sqlite3_bind_null(ins, c++);
        if (sqlite3_step(ins) != SQLITE_DONE) {
            st = kvf_fail(err, KVF_ERUN, "%s: %s", tmp, sqlite3_errmsg(db));
            goto done;
        }
    }
    {
        json_t *d = cli_sweep_definition(s);
        char *dtxt = json_dumps(d, JSON_COMPACT);
        json_decref(d);
        char *mq = sqlite3_mprintf("INSERT INTO sweep VALUES('scenario', %Q), ('definition', %Q),"
                                   " ('points', '%d'), ('kvfleet_version', %Q);",
                                   s->scenario, dtxt, s->npoints, KVF_VERSION);
        free(dtxt);
        st = sql_exec(db, mq, tmp, err);
        sqlite3_free(mq);
    }
    if (!st) st = sql_exec(db, "COMMIT;", tmp, err);
done:
    sqlite3_finalize(ins);
    if (db && sqlite3_close(db) != SQLITE_OK && !st)
        st = kvf_fail(err, KVF_ERUN, "%s: cannot close", tmp);
    if (!st && rename(tmp, path))
        st = kvf_fail(err, KVF_EIO, "%s: cannot write: %s", path, strerror(errno));
    if (st) unlink(tmp);
    return st;
}

static void csv_field(FILE *f, const char *v) {
    if (!strpbrk(v, ",\"\n")) {
        fputs(v, f);
        return;
    }
    fputc('"', f);
    for (const char *p = v; *p; p++) {
        if (*p == '"') fputc('"', f);
        fputc(*p, f);
    }
    fputc('"', f);
}

kvf_status cli_sweep_write_csv(const cli_sweep_state *s, kvf_err *err) {
    KVF_ASSERT(s && s->names && s->summary);
    char path[SIM_PATH_MAX + 64], tmp[SIM_PATH_MAX + 100];
    snprintf(path, sizeof path, "%s/sweep.csv", s->out);
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return kvf_fail(err, KVF_EIO, "%s: cannot write: %s", tmp, strerror(errno));
    fputs("idx", f);
    for (int k = 0; k < s->nkeys; k++) {
        fputc(',', f);
        csv_field(f, s->keys[k].key);
    }
    fputs(",dir,status,reason", f);
    for (int fi = 0; fi < N_FIGS; fi++)
        fprintf(f, ",%s", k_figs[fi].col);
    fputs(",saturation\n", f);
    for (int i = 0; i < s->npoints; i++) {
        fprintf(f, "%d", i);
        for (int k = 0; k < s->nkeys; k++) {
            fputc(',', f);
            csv_field(f, s->keys[k].vals[cli_sweep_point_val(s, i, k)]);
        }
        fputc(',', f);
        csv_field(f, s->names[i]);
        fprintf(f, ",%s,", point_status(s, i));
        if (point_reason(s, i)) csv_field(f, point_reason(s, i));
        for (int fi = 0; fi < N_FIGS; fi++) {
            double v = fig(s->summary[i], fi);
            if (isfinite(v))
                fprintf(f, ",%.10g", v);
            else
                fputc(',', f);
        }
        fprintf(f, ",%s\n", s->summary[i] ? sim_points_str(s->summary[i], "saturation.state") : "");
    }
    bool bad = ferror(f) != 0;
    if (fclose(f) || bad || rename(tmp, path)) {
        unlink(tmp);
        return kvf_fail(err, KVF_EIO, "%s: cannot write", path);
    }
    return KVF_OK;
}

// A varied value as JSON: a number when the whole text is one, else the string.
static json_t *typed_value(const char *v) {
    char *end = NULL;
    errno = 0;
    long long iv = strtoll(v, &end, 10);
    if (*v && !*end && !errno) return json_integer((json_int_t)iv);
    double d = strtod(v, &end);
    if (*v && !*end && isfinite(d)) return json_real(d);
    if (!strcmp(v, "true")) return json_true();
    if (!strcmp(v, "false")) return json_false();
    if (!strcmp(v, "null")) return json_null();
    return json_string(v);
}

// The configuration keys (summary.json "config") whose values differ between the points that
// ran: the varied keys, and whatever else they set.
static json_t *config_differs(const cli_sweep_state *s, json_t **flat) {
    json_t *keys = json_array();
    int first = -1;
    for (int i = 0; i < s->npoints; i++) {
        flat[i] = json_object();
        const json_t *cfg = s->summary[i] ? json_object_get(s->summary[i], "config") : NULL;
        if (json_is_object(cfg)) {
            rpt_config_keys(flat[i], (json_t *)cfg, "");
            if (first < 0) first = i;
        }
    }
    if (first < 0) return keys;
    const char *k;
    json_t *v;
    json_object_foreach(flat[first], k, v) {
        for (int i = 0; i < s->npoints; i++) {
            if (!json_object_size(flat[i])) continue;
            json_t *o = json_object_get(flat[i], k);
            if (!o || !json_equal(o, v)) {
                json_array_append_new(keys, json_string(k));
                break;
            }
        }
    }
    return keys;
}

void cli_sweep_print_json(const cli_sweep_state *s) {
    KVF_ASSERT(s && s->names && s->summary);
    json_t *arr = json_array();
    json_t **flat = kvf_calloc((size_t)s->npoints, sizeof *flat);
    json_t *differs = config_differs(s, flat);
    for (int i = 0; i < s->npoints; i++) {
        json_t *p = s->summary[i] ? json_deep_copy(s->summary[i]) : json_object();
        json_t *d = json_object();   // this point's values of the keys that differ
        size_t j;
        json_t *e;
        json_array_foreach(differs, j, e) {
            json_t *x = json_object_get(flat[i], json_string_value(e));
            json_object_set_new(d, json_string_value(e),
                                x ? typed_value(json_string_value(x)) : json_null());
        }
        json_object_set_new(p, "config_differs", d);
        json_decref(flat[i]);
        json_t *v = json_object();
        for (int k = 0; k < s->nkeys; k++)
            json_object_set_new(v, s->keys[k].key,
                                typed_value(s->keys[k].vals[cli_sweep_point_val(s, i, k)]));
        json_object_set_new(p, "idx", json_integer(i));
        json_object_set_new(p, "vary", v);
        json_object_set_new(p, "dir", json_string(s->names[i]));
        json_object_set_new(p, "point_status", json_string(point_status(s, i)));
        if (point_reason(s, i)) json_object_set_new(p, "reason", json_string(point_reason(s, i)));
        json_array_append_new(arr, p);
    }
    char *txt = json_dumps(arr, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    printf("%s\n", txt);
    free(txt);
    json_decref(arr);
    json_decref(differs);
    free(flat);
}

kvf_status cli_sweep_write_html(const cli_sweep_state *s, kvf_err *err) {
    KVF_ASSERT(s && s->names && s->summary);
    json_t *pts = json_array();
    for (int i = 0; i < s->npoints; i++) {
        json_t *k = json_object();
        for (int j = 0; j < s->nkeys; j++)
            json_object_set_new(k, s->keys[j].key,
                                json_string(s->keys[j].vals[cli_sweep_point_val(s, i, j)]));
        json_t *pt =
            json_pack("{s:s, s:o, s:O, s:s}", "label", s->names[i], "keys", k, "summary",
                      s->summary[i] ? s->summary[i] : json_null(), "status", point_status(s, i));
        if (point_reason(s, i)) json_object_set_new(pt, "reason", json_string(point_reason(s, i)));
        json_array_append_new(pts, pt);
    }
    char path[SIM_PATH_MAX + 16], title[SIM_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/sweep.html", s->out);
    snprintf(title, sizeof title, "kvfleet sweep of %s", s->scenario);
    kvf_status st = rpt_points_html(path, title, pts, err);
    json_decref(pts);
    return st;
}

// One figure of the table, n/a where the summary has none (a latency no request measured).
static void table_cell(double v, int width, int prec) {
    if (isnan(v))
        printf(" %*s", width, "n/a");
    else
        printf(" %*.*f", width, prec, v);
}

void cli_sweep_print_table(const cli_sweep_state *s) {
    KVF_ASSERT(s && s->names && s->summary);
    printf("%5s", "idx");
    for (int k = 0; k < s->nkeys; k++)
        printf("  %14s", s->keys[k].key);
    printf("  %10s %10s %8s %10s %6s %10s  %s\n", "ttft_p90", "tpot_p90", "hit_rate", "out_tok/s",
           "gpus", "$/day", "saturation");
    for (int i = 0; i < s->npoints; i++) {
        printf("%5d", i);
        for (int k = 0; k < s->nkeys; k++)
            printf("  %14s", s->keys[k].vals[cli_sweep_point_val(s, i, k)]);
        const json_t *m = s->summary[i];
        if (!m) {
            printf("  unfinished: %s\n", point_reason(s, i));
            continue;
        }
        printf(" ");
        table_cell(sim_points_num(m, "ttft_ms.p90"), 10, 1);
        table_cell(sim_points_num(m, "tpot_ms.p90"), 10, 2);
        table_cell(sim_points_num(m, "cache.hit_rate"), 8, 3);
        table_cell(sim_points_num(m, "throughput.output_tok_s"), 10, 0);
        table_cell(sim_points_gpus(m), 6, 0);
        table_cell(sim_points_num(m, "economics.cost_per_day_usd"), 10, 2);
        printf("  %s\n", sim_points_str(m, "saturation.state"));
    }
    json_t **flat = kvf_calloc((size_t)s->npoints, sizeof *flat);
    json_t *differs = config_differs(s, flat);
    int finished = 0;
    for (int i = 0; i < s->npoints; i++)
        finished += s->summary[i] != NULL;
    if (finished < 2) {   // nothing to compare: "none" would read as the points being the same
        printf("configuration keys that differ between points: (%s finished)\n",
               finished ? "one point" : "no point");
    } else {
        printf("configuration keys that differ between points:");
        size_t j;
        json_t *e;
        json_array_foreach(differs, j, e) printf("%s %s", j ? "," : "", json_string_value(e));
        printf("%s\n", json_array_size(differs) ? "" : " none");
    }
    for (int i = 0; i < s->npoints; i++)
        json_decref(flat[i]);
    json_decref(differs);
    free(flat);
    printf("results in %s/ (sweep.db, sweep.csv, sweep.html, points/)\n", s->out);
}
