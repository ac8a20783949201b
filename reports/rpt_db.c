// reports/rpt_db.c -- the results database (SQLite), tables of design.md §5.
//
// Invariants: every write goes through a prepared statement inside an open transaction; a
// transaction is committed every RPT_DB_BATCH rows and by rpt_db_flush / rpt_db_close, so a
// run stopped between commits loses at most the rows since the last one and the file stays
// readable (rollback journal, synchronous=OFF: fast, and crash-safe against a killed process,
// not against a power cut, which is the right trade for a results file).
// NaN doubles are stored as NULL ("no value"), text and numbers as their SQLite types.
// Request rows are held back, at most RPT_DB_BATCH of them, and inserted sorted by id at the
// batch's commit: a run writes them as requests finish, nearly in id order but not quite, and
// the table's B-tree (id is its rowid) takes a sorted batch at its right edge where scattered
// rows split pages in its middle. The table holds the same rows: for one id written twice the
// later row still replaces the earlier (the sort keeps write order among equal ids).
// Request and time-series rows are written in batches by a writer thread while the run goes on
// (rpt_db_background): a batch of at most RPT_DB_BATCH rows, its time-series rows in their
// order and then its request rows sorted, handed over when full; the caller fills the next. One
// thread uses the connection at a time: every other call (run and summary keys, flush, close,
// the raw handle) first waits for the batch in flight and writes the one being filled, so the
// tables hold what writing each row in the call would have left (test_db_background_same_rows).
// A writer's failure is kept and returned by every later call.
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpt.h"

#define RPT_DB_BATCH 10000
// Held request rows go in REQ_ROWS to a statement: one statement's set-up, cursor and halt for
// 64 rows, not for each (0.85 against 1.3 us a row on 19 columns here).
#define REQ_ROWS 64
#define REQ_COLS 19
#define REQ_INSERT                                                                                 \
    "INSERT OR REPLACE INTO request(id, class, session, arrival_s, input_tokens,"                  \
    " cached_tokens, output_tokens, vision_instance, prefill_instance, decode_instance,"           \
    " ttft_s, tpot_s, e2e_s, queue_s, status, hit_hbm, hit_dram, hit_ssd, preemptions) VALUES"
#define REQ_VALUES "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"

typedef struct held_row {
    rpt_request_row r;
    size_t seq;   // write order, which decides between rows of one id
} held_row;

typedef struct ts_row {
    double t_s, value;
    const char *pool, *metric;
    int32_t instance;
} ts_row;

// Rows waiting to be written: time-series rows in their order, request rows held for sorting.
typedef struct batch {
    held_row *rq;
    size_t nrq, caprq;
    ts_row *ts;
    size_t nts, capts;
} batch;

struct rpt_db {
    sqlite3 *h;
    char *path;
    sqlite3_stmt *st_run;    // INSERT OR REPLACE INTO run
    sqlite3_stmt *st_sum;    // INSERT OR REPLACE INTO summary
    sqlite3_stmt *st_req;    // INSERT OR REPLACE INTO request
    sqlite3_stmt *st_reqn;   // the same for REQ_ROWS rows in one statement
    sqlite3_stmt *st_ts;     // INSERT INTO timeseries
    size_t pending;          // rows written since BEGIN
    bool in_tx;
    batch cur;   // being filled by the caller
    batch out;   // being written by the writer thread while `writing`
    pthread_t writer;
    bool writing;
    bool background;         // batches to a writer thread (else written in the call)
    kvf_status wstatus;      // a failed write, kept: every later call returns it
    kvf_err werr;            // its message
    const char *texts[64];   // the distinct texts held rows point at (class, status, pool,
    size_t ntexts;           // metric), never freed before the database is closed
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
    db->background = true;
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
    // the request statement once with one row of values, once with REQ_ROWS
    char many[sizeof REQ_INSERT + REQ_ROWS * sizeof REQ_VALUES];
    size_t k = (size_t)snprintf(many, sizeof many, "%s", REQ_INSERT);
    for (int i = 0; i < REQ_ROWS; i++)
        k += (size_t)snprintf(many + k, sizeof many - k, "%s%s", i ? "," : "", REQ_VALUES);
    struct {
        sqlite3_stmt **st;
        const char *sql;
    } prep[] = {
        {&db->st_run, "INSERT OR REPLACE INTO run(key, value) VALUES(?,?)"},
        {&db->st_sum, "INSERT OR REPLACE INTO summary(key, value) VALUES(?,?)"},
        {&db->st_req, REQ_INSERT REQ_VALUES},
        {&db->st_reqn, many},
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

static kvf_status sync_rows(rpt_db *db, kvf_err *err);
static kvf_status join_writer(rpt_db *db, kvf_err *err);

kvf_status rpt_db_flush(rpt_db *db, kvf_err *err) {
    if (!db) return KVF_OK;
    kvf_status s = sync_rows(db, err);
    if (s) return s;
    return db_commit(db, err);
}

kvf_status rpt_db_close(rpt_db *db, kvf_err *err) {
    if (!db) return KVF_OK;
    kvf_status s = KVF_OK;
    if (db->h) {
        s = sync_rows(db, err);
        kvf_status c = db_commit(db, s ? NULL : err);   // what was written stays
        if (!s) s = c;
    }
    free(db->cur.rq);
    free(db->cur.ts);
    free(db->out.rq);
    free(db->out.ts);
    for (size_t i = 0; i < db->ntexts; i++)
        free((char *)db->texts[i]);
    sqlite3_finalize(db->st_run);
    sqlite3_finalize(db->st_sum);
    sqlite3_finalize(db->st_req);
    sqlite3_finalize(db->st_reqn);
    sqlite3_finalize(db->st_ts);
    if (db->h && sqlite3_close(db->h) != SQLITE_OK && !s)
        s = kvf_fail(err, KVF_ERUN, "%s: close: %s", db->path, sqlite3_errmsg(db->h));
    free(db->path);
    free(db);
    return s;
}

void *rpt_db_handle(rpt_db *db) {
    if (!db) return NULL;
    sync_rows(db, NULL);   // a failure stays kept for the next call
    return db->h;
}

kvf_status rpt_db_run_set(rpt_db *db, const char *key, const char *value, kvf_err *err) {
    kvf_status s = sync_rows(db, err);
    if (s) return s;
    s = db_row(db, err);
    if (s) return s;
    bind_text(db->st_run, 1, key);
    bind_text(db->st_run, 2, value);
    return db_step(db, db->st_run, err, "run table");
}

kvf_status rpt_db_summary_set(rpt_db *db, const char *key, double value, kvf_err *err) {
    kvf_status s = sync_rows(db, err);
    if (s) return s;
    s = db_row(db, err);
    if (s) return s;
    bind_text(db->st_sum, 1, key);
    bind_real(db->st_sum, 2, value);
    return db_step(db, db->st_sum, err, "summary table");
}

kvf_status rpt_db_summary_set_text(rpt_db *db, const char *key, const char *value, kvf_err *err) {
    kvf_status s = sync_rows(db, err);
    if (s) return s;
    s = db_row(db, err);
    if (s) return s;
    bind_text(db->st_sum, 1, key);
    bind_text(db->st_sum, 2, value);
    return db_step(db, db->st_sum, err, "summary table");
}

// Binds a request row's columns at parameters base+1 .. base+REQ_COLS.
static void bind_request(sqlite3_stmt *st, int base, const rpt_request_row *r) {
    sqlite3_bind_int64(st, base + 1, (sqlite3_int64)r->id);
    bind_text(st, base + 2, r->cls);
    sqlite3_bind_int64(st, base + 3, (sqlite3_int64)r->session);
    bind_real(st, base + 4, r->arrival_s);
    sqlite3_bind_int64(st, base + 5, r->input_tokens);
    sqlite3_bind_int64(st, base + 6, r->cached_tokens);
    sqlite3_bind_int64(st, base + 7, r->output_tokens);
    sqlite3_bind_int(st, base + 8, r->vision_instance);
    sqlite3_bind_int(st, base + 9, r->prefill_instance);
    sqlite3_bind_int(st, base + 10, r->decode_instance);
    bind_real(st, base + 11, r->ttft_s);
    bind_real(st, base + 12, r->tpot_s);
    bind_real(st, base + 13, r->e2e_s);
    bind_real(st, base + 14, r->queue_s);
    bind_text(st, base + 15, r->status);
    sqlite3_bind_int64(st, base + 16, r->hit_hbm);
    sqlite3_bind_int64(st, base + 17, r->hit_dram);
    sqlite3_bind_int64(st, base + 18, r->hit_ssd);
    sqlite3_bind_int64(st, base + 19, r->preemptions);
}

static kvf_status insert_request(rpt_db *db, const rpt_request_row *r, kvf_err *err) {
    kvf_status s = db_row(db, err);
    if (s) return s;
    bind_request(db->st_req, 0, r);
    return db_step(db, db->st_req, err, "request table");
}

// REQ_ROWS held rows in one statement, in their order (a later row of an id replaces the
// earlier, as row by row).
static kvf_status insert_requests(rpt_db *db, const held_row *h, kvf_err *err) {
    kvf_status s = db_row(db, err);
    if (s) return s;
    db->pending += REQ_ROWS - 1;
    for (int i = 0; i < REQ_ROWS; i++)
        bind_request(db->st_reqn, i * REQ_COLS, &h[i].r);
    return db_step(db, db->st_reqn, err, "request table");
}

// A held row's texts: the database's own copy of each distinct one (a caller's buffer may not
// outlive the call). Sets *ok false when the table is full: the row is then inserted at once.
static const char *keep_text(rpt_db *db, const char *t, bool *ok) {
    if (!t) return NULL;
    for (size_t i = 0; i < db->ntexts; i++)   // a copy rpt_db_text gave out: no compare
        if (db->texts[i] == t) return t;
    for (size_t i = 0; i < db->ntexts; i++)
        if (strcmp(db->texts[i], t) == 0) return db->texts[i];
    if (db->ntexts == sizeof db->texts / sizeof db->texts[0]) {
        *ok = false;
        return NULL;
    }
    return db->texts[db->ntexts++] = kvf_strdup(t);
}

const char *rpt_db_text(rpt_db *db, const char *t) {
    bool ok = true;
    const char *k = keep_text(db, t, &ok);
    return ok ? k : t;
}

static int cmp_held(const void *a, const void *b) {
    const held_row *x = a, *y = b;
    if (x->r.id != y->r.id) return x->r.id < y->r.id ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static kvf_status insert_timeseries(rpt_db *db, const ts_row *t, kvf_err *err) {
    kvf_status s = db_row(db, err);
    if (s) return s;
    sqlite3_stmt *st = db->st_ts;
    bind_real(st, 1, t->t_s);
    bind_text(st, 2, t->pool);
    sqlite3_bind_int(st, 3, t->instance);
    bind_text(st, 4, t->metric);
    bind_real(st, 5, t->value);
    return db_step(db, st, err, "timeseries table");
}

// A batch written in the open transaction: its time-series rows in order, then its request
// rows by id (equal ids in write order); left empty.
static kvf_status write_batch(rpt_db *db, batch *b, kvf_err *err) {
    kvf_status s = KVF_OK;
    for (size_t i = 0; i < b->nts && !s; i++)
        s = insert_timeseries(db, &b->ts[i], err);
    size_t n = b->nrq;
    bool sorted = true;
    for (size_t i = 1; i < n && sorted; i++)
        sorted = b->rq[i - 1].r.id < b->rq[i].r.id;
    if (!sorted && !s) qsort(b->rq, n, sizeof b->rq[0], cmp_held);
    size_t i = 0;
    for (; i + REQ_ROWS <= n && !s; i += REQ_ROWS)
        s = insert_requests(db, b->rq + i, err);
    for (; i < n && !s; i++)
        s = insert_request(db, &b->rq[i].r, err);
    b->nrq = b->nts = 0;
    return s;
}

// write_batch keeping its failure for every later call.
static kvf_status write_kept(rpt_db *db, batch *b, kvf_err *err) {
    kvf_status s = write_batch(db, b, &db->werr);
    if (s) {
        db->wstatus = s;
        if (err) *err = db->werr;
    }
    return s;
}

static void *writer_main(void *arg) {
    rpt_db *db = arg;
    db->wstatus = write_batch(db, &db->out, &db->werr);
    return NULL;
}

// Waits for the batch in flight; the kept failure, if any, into err.
static kvf_status join_writer(rpt_db *db, kvf_err *err) {
    if (db->writing) {
        pthread_join(db->writer, NULL);
        db->writing = false;
    }
    if (db->wstatus) {
        if (err) *err = db->werr;
        return db->wstatus;
    }
    return KVF_OK;
}

// Hands the batch being filled to a writer thread (after the one in flight), or writes it
// here when batches are written in the call or no thread can be started.
static kvf_status hand_over(rpt_db *db, kvf_err *err) {
    kvf_status s = join_writer(db, err);
    if (s) return s;
    if (!db->background) return write_kept(db, &db->cur, err);
    batch t = db->out;
    db->out = db->cur;
    db->cur = t;
    // the writer takes no signals: a run's SIGINT/SIGTERM handler runs in the caller's thread
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    db->writing = pthread_create(&db->writer, NULL, writer_main, db) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return db->writing ? KVF_OK : write_kept(db, &db->out, err);
}

// Everything held written, in this thread: the connection is the caller's after it.
static kvf_status sync_rows(rpt_db *db, kvf_err *err) {
    kvf_status s = join_writer(db, err);
    return s ? s : write_kept(db, &db->cur, err);
}

void rpt_db_background(rpt_db *db, bool on) {
    if (db) db->background = on;
}

kvf_status rpt_db_request(rpt_db *db, const rpt_request_row *r, kvf_err *err) {
    if (!db->writing && db->wstatus)
        return join_writer(db, err);   // wstatus is the writer's while writing
    bool ok = true;
    rpt_request_row row = *r;
    row.cls = keep_text(db, r->cls, &ok);
    row.status = keep_text(db, r->status, &ok);
    if (!ok) {   // more distinct texts than the table keeps: in order, then this one
        kvf_status s = sync_rows(db, err);
        return s ? s : insert_request(db, r, err);
    }
    batch *b = &db->cur;
    if (b->nrq == b->caprq) {
        // a batch holds at most RPT_DB_BATCH rows: room for all at once, not copied as it fills
        b->caprq = b->caprq ? b->caprq * 2 : RPT_DB_BATCH;
        b->rq = kvf_realloc(b->rq, b->caprq * sizeof b->rq[0]);
    }
    b->rq[b->nrq] = (held_row){row, b->nrq};
    b->nrq++;
    if (b->nrq + b->nts >= RPT_DB_BATCH) return hand_over(db, err);
    return KVF_OK;
}

kvf_status rpt_db_timeseries(rpt_db *db, double t_s, const char *pool, int32_t instance,
                             const char *metric, double value, kvf_err *err) {
    if (!db->writing && db->wstatus)
        return join_writer(db, err);   // wstatus is the writer's while writing
    bool ok = true;
    ts_row t = {t_s, value, keep_text(db, pool, &ok), keep_text(db, metric, &ok), instance};
    if (!ok) {
        kvf_status s = sync_rows(db, err);
        return s ? s : insert_timeseries(db, &(ts_row){t_s, value, pool, metric, instance}, err);
    }
    batch *b = &db->cur;
    if (b->nts == b->capts) {
        b->capts = b->capts ? b->capts * 2 : 1024;
        b->ts = kvf_realloc(b->ts, b->capts * sizeof b->ts[0]);
    }
    b->ts[b->nts++] = t;
    if (b->nrq + b->nts >= RPT_DB_BATCH) return hand_over(db, err);
    return KVF_OK;
}
