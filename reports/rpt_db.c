// reports/rpt_db.c -- the results database (SQLite), tables of design.md §5.
//
// Invariants: every write goes through a prepared statement inside an open transaction; a
// transaction is committed every RPT_DB_BATCH rows and by rpt_db_flush / rpt_db_close, so a
// run stopped between commits loses at most the rows since the last one and the file stays
// readable (rollback journal, synchronous=OFF: fast, and crash-safe against a killed process,
// not against a power cut, which is the right trade for a results file).
// NaN doubles are stored as NULL ("no value"), text and numbers as their SQLite types.
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpt.h"

#define RPT_DB_BATCH 10000

struct rpt_db {
    sqlite3 *h;
    char *path;
    sqlite3_stmt *st_run;   // INSERT OR REPLACE INTO run
    sqlite3_stmt *st_sum;   // INSERT OR REPLACE INTO summary
    sqlite3_stmt *st_req;   // INSERT OR REPLACE INTO request
    sqlite3_stmt *st_ts;    // INSERT INTO timeseries
    size_t pending;         // rows written since BEGIN
    bool in_tx;
};

static const char *const SCHEMA =
    "CREATE TABLE run(key TEXT PRIMARY KEY, value TEXT);"
    "CREATE TABLE request(id INTEGER PRIMARY KEY, class TEXT, session INTEGER,"
    " arrival_s REAL, input_tokens INTEGER, cached_tokens INTEGER, output_tokens INTEGER,"
    " vision_instance INTEGER, prefill_instance INTEGER, decode_instance INTEGER,"
    " ttft_s REAL, tpot_s REAL, e2e_s REAL, queue_s REAL, status TEXT,"
    " hit_hbm INTEGER, hit_dram INTEGER, hit_ssd INTEGER, preemptions INTEGER);"
    "CREATE TABLE timeseries(t_s REAL, pool TEXT, instance INTEGER, metric TEXT, value REAL);"
    "CREATE TABLE summary(key TEXT PRIMARY KEY, value);";

static kvf_status db_fail(rpt_db *db, kvf_err *err, const char *what) {
    return kvf_fail(err, KVF_ERUN, "%s: %s: %s", db->path ? db->path : "(db)", what,
                    db->h ? sqlite3_errmsg(db->h) : "cannot open");
}

static kvf_status db_exec(rpt_db *db, const char *sql, kvf_err *err) {
    char *msg = NULL;
    if (sqlite3_exec(db->h, sql, NULL, NULL, &msg) != SQLITE_OK) {
        kvf_status s =
            kvf_fail(err, KVF_ERUN, "%s: %s: %s", db->path, sql, msg ? msg : sqlite3_errmsg(db->h));
        sqlite3_free(msg);
        return s;
    }
    return KVF_OK;
}

static kvf_status db_commit(rpt_db *db, kvf_err *err) {
    if (!db->in_tx) return KVF_OK;
    db->in_tx = false;
    db->pending = 0;
    return db_exec(db, "COMMIT", err);
}

// Opens a transaction when none is open; commits and reopens after RPT_DB_BATCH rows.
static kvf_status db_row(rpt_db *db, kvf_err *err) {
    if (db->in_tx && db->pending >= RPT_DB_BATCH) {
        kvf_status s = db_commit(db, err);
        if (s) return s;
    }
    if (!db->in_tx) {
        kvf_status s = db_exec(db, "BEGIN", err);
        if (s) return s;
        db->in_tx = true;
    }
    db->pending++;
    return KVF_OK;
}

// Every statement binds all its parameters before each step, so none is cleared after it;
// a text bound SQLITE_STATIC is read by this step only (the next row binds its own).
static kvf_status db_step(rpt_db *db, sqlite3_stmt *st, kvf_err *err, const char *what) {
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) return db_fail(db, err, what);
    return KVF_OK;
}

static void bind_real(sqlite3_stmt *st, int i, double v) {
    if (isnan(v))
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_double(st, i, v);
}

static void bind_text(sqlite3_stmt *st, int i, const char *s) {
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

static void remove_db_files(const char *path) {
    static const char *const sfx[] = {"", "-journal", "-wal", "-shm"};
    char buf[4096];
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", path, sfx[i]);
        unlink(buf);
    }
}

kvf_status rpt_db_create(rpt_db **out, const char *path, kvf_err *err) {
    *out = NULL;
    if (!path || !*path) return kvf_fail(err, KVF_EINVAL, "results database: empty path");
    rpt_db *db = kvf_calloc(1, sizeof *db);
    db->path = kvf_strdup(path);
    kvf_status s = KVF_OK;
    remove_db_files(path);
    // one thread owns a results database: no per-call mutex (SQLite's serialized mode locks
    // one around every bind and step)
    if (sqlite3_open_v2(path, &db->h,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        s = db_fail(db, err, "cannot create");
        goto fail;
    }
    if ((s = db_exec(db, "PRAGMA synchronous=OFF", err))) goto fail;
    if ((s = db_exec(db, SCHEMA, err))) goto fail;
    struct {
        sqlite3_stmt **st;
        const char *sql;
    } prep[] = {
        {&db->st_run, "INSERT OR REPLACE INTO run(key, value) VALUES(?,?)"},
        {&db->st_sum, "INSERT OR REPLACE INTO summary(key, value) VALUES(?,?)"},
        {&db->st_req,
         "INSERT OR REPLACE INTO request(id, class, session, arrival_s, input_tokens,"
         " cached_tokens, output_tokens, vision_instance, prefill_instance, decode_instance,"
         " ttft_s, tpot_s, e2e_s, queue_s, status, hit_hbm, hit_dram, hit_ssd, preemptions)"
         " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"},
        {&db->st_ts, "INSERT INTO timeseries(t_s, pool, instance, metric, value)"
                     " VALUES(?,?,?,?,?)"},
    };
    for (size_t i = 0; i < sizeof prep / sizeof prep[0]; i++) {
        if (sqlite3_prepare_v2(db->h, prep[i].sql, -1, prep[i].st, NULL) != SQLITE_OK) {
            s = db_fail(db, err, "prepare");
            goto fail;
        }
    }
    *out = db;
    return KVF_OK;
fail:
    rpt_db_close(db, NULL);
    return s;
}

kvf_status rpt_db_flush(rpt_db *db, kvf_err *err) {
    if (!db) return KVF_OK;
    return db_commit(db, err);
}

kvf_status rpt_db_close(rpt_db *db, kvf_err *err) {
    if (!db) return KVF_OK;
    kvf_status s = KVF_OK;
    if (db->h) s = db_commit(db, err);
    sqlite3_finalize(db->st_run);
    sqlite3_finalize(db->st_sum);
    sqlite3_finalize(db->st_req);
    sqlite3_finalize(db->st_ts);
    if (db->h && sqlite3_close(db->h) != SQLITE_OK && !s)
        s = kvf_fail(err, KVF_ERUN, "%s: close: %s", db->path, sqlite3_errmsg(db->h));
    free(db->path);
    free(db);
    return s;
}

void *rpt_db_handle(rpt_db *db) {
    return db ? db->h : NULL;
}

kvf_status rpt_db_run_set(rpt_db *db, const char *key, const char *value, kvf_err *err) {
    kvf_status s = db_row(db, err);
    if (s) return s;
    bind_text(db->st_run, 1, key);
    bind_text(db->st_run, 2, value);
    return db_step(db, db->st_run, err, "run table");
}

kvf_status rpt_db_summary_set(rpt_db *db, const char *key, double value, kvf_err *err) {
    kvf_status s = db_row(db, err);
    if (s) return s;
    bind_text(db->st_sum, 1, key);
    bind_real(db->st_sum, 2, value);
    return db_step(db, db->st_sum, err, "summary table");
}

kvf_status rpt_db_summary_set_text(rpt_db *db, const char *key, const char *value, kvf_err *err) {
    kvf_status s = db_row(db, err);
    if (s) return s;
    bind_text(db->st_sum, 1, key);
    bind_text(db->st_sum, 2, value);
    return db_step(db, db->st_sum, err, "summary table");
}

kvf_status rpt_db_request(rpt_db *db, const rpt_request_row *r, kvf_err *err) {
    kvf_status s = db_row(db, err);
    if (s) return s;
    sqlite3_stmt *st = db->st_req;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)r->id);
    bind_text(st, 2, r->cls);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)r->session);
    bind_real(st, 4, r->arrival_s);
    sqlite3_bind_int64(st, 5, r->input_tokens);
    sqlite3_bind_int64(st, 6, r->cached_tokens);
    sqlite3_bind_int64(st, 7, r->output_tokens);
    sqlite3_bind_int(st, 8, r->vision_instance);
    sqlite3_bind_int(st, 9, r->prefill_instance);
    sqlite3_bind_int(st, 10, r->decode_instance);
    bind_real(st, 11, r->ttft_s);
    bind_real(st, 12, r->tpot_s);
    bind_real(st, 13, r->e2e_s);
    bind_real(st, 14, r->queue_s);
    bind_text(st, 15, r->status);
    sqlite3_bind_int64(st, 16, r->hit_hbm);
    sqlite3_bind_int64(st, 17, r->hit_dram);
    sqlite3_bind_int64(st, 18, r->hit_ssd);
    sqlite3_bind_int64(st, 19, r->preemptions);
    return db_step(db, st, err, "request table");
}

kvf_status rpt_db_timeseries(rpt_db *db, double t_s, const char *pool, int32_t instance,
                             const char *metric, double value, kvf_err *err) {
    kvf_status s = db_row(db, err);
    if (s) return s;
    sqlite3_stmt *st = db->st_ts;
    bind_real(st, 1, t_s);
    bind_text(st, 2, pool);
    sqlite3_bind_int(st, 3, instance);
    bind_text(st, 4, metric);
    bind_real(st, 5, value);
    return db_step(db, st, err, "timeseries table");
}
