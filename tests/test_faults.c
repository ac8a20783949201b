// tests/test_faults.c -- fault injection in SQLite's discipline. Allocation failures go through
// the allocator hook (kvf_alloc_hook, which this test also installs under SQLite's allocator;
// jansson allocates through kvf_malloc, as main() sets it); I/O failures through a SQLite VFS shim
// that fails the Nth read, write, sync or truncate with SQLITE_IOERR or SQLITE_FULL. Each injection
// runs in a child process:
//  - a whole `kvfleet run` (cli_run in the child): it must exit 0, or 1/2 with a
//    "kvfleet:" message, never die by a signal; when it fails, the result directory must not
//    exist (nothing that looks complete) and any database a run left must pass
//    `pragma integrity_check`;
//  - the results database alone (rpt_db_*): every error is returned with a message, and the
//    file, reopened without faults, passes `pragma integrity_check`.
// The test prints how many injections it made and how they ended.
#include <check.h>
#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "rpt.h"
#include "sim.h"
#include "cli.h"

// ---- allocation failures ---------------------------------------------------------------------
static long alloc_count, alloc_fail_at;   // fail the alloc_fail_at-th allocation (0 = never)

static bool alloc_hook(size_t n) {
    (void)n;
    return ++alloc_count != alloc_fail_at;
}

// SQLite's allocator through the hook: a size header in front of each block.
static void *sq_malloc(int n) {
    size_t *p = kvf_hooked_malloc((size_t)n + 16);
    if (!p) return NULL;
    *p = (size_t)n;
    return (char *)p + 16;
}
static void sq_free(void *p) {
    if (p) free((char *)p - 16);
}
static void *sq_realloc(void *p, int n) {
    if (!p) return sq_malloc(n);
    size_t *q = kvf_hooked_realloc((char *)p - 16, (size_t)n + 16);
    if (!q) return NULL;
    *q = (size_t)n;
    return (char *)q + 16;
}
static int sq_size(void *p) {
    return p ? (int)*(size_t *)((char *)p - 16) : 0;
}
static int sq_roundup(int n) {
    return (n + 7) & ~7;
}
static int sq_init(void *a) {
    (void)a;
    return SQLITE_OK;
}
static void sq_shutdown(void *a) {
    (void)a;
}

// ---- I/O failures: a VFS shim over the default one ---------------------------------------------
static long io_count, io_fail_at;   // fail the io_fail_at-th read/write/sync/truncate
static int io_fail_code = SQLITE_IOERR_WRITE;
static sqlite3_vfs *base_vfs;
static sqlite3_vfs shim_vfs;

typedef struct sfile {
    sqlite3_file f;
    sqlite3_file *real;
} sfile;

static bool io_fails(void) {
    return ++io_count == io_fail_at;
}

#define REAL(x) (((sfile *)(x))->real)
static int s_close(sqlite3_file *f) {
    return REAL(f)->pMethods->xClose(REAL(f));
}
static int s_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) {
    if (io_fails()) return SQLITE_IOERR_READ;
    return REAL(f)->pMethods->xRead(REAL(f), b, n, o);
}
static int s_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
    if (io_fails()) return io_fail_code;
    return REAL(f)->pMethods->xWrite(REAL(f), b, n, o);
}
static int s_truncate(sqlite3_file *f, sqlite3_int64 n) {
    if (io_fails()) return SQLITE_IOERR_TRUNCATE;
    return REAL(f)->pMethods->xTruncate(REAL(f), n);
}
static int s_sync(sqlite3_file *f, int fl) {
    if (io_fails()) return SQLITE_IOERR_FSYNC;
    return REAL(f)->pMethods->xSync(REAL(f), fl);
}
static int s_size(sqlite3_file *f, sqlite3_int64 *n) {
    return REAL(f)->pMethods->xFileSize(REAL(f), n);
}
static int s_lock(sqlite3_file *f, int l) {
    return REAL(f)->pMethods->xLock(REAL(f), l);
}
static int s_unlock(sqlite3_file *f, int l) {
    return REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int s_check(sqlite3_file *f, int *o) {
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), o);
}
static int s_fcntl(sqlite3_file *f, int op, void *a) {
    return REAL(f)->pMethods->xFileControl(REAL(f), op, a);
}
static int s_sector(sqlite3_file *f) {
    return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int s_chars(sqlite3_file *f) {
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

static const sqlite3_io_methods shim_io = {
    1,       s_close,  s_read,  s_write, s_truncate, s_sync, s_size, s_lock, s_unlock, s_check,
    s_fcntl, s_sector, s_chars, NULL,    NULL,       NULL,   NULL,   NULL,   NULL};

static int s_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out) {
    (void)v;
    sfile *s = (sfile *)f;
    s->real = (sqlite3_file *)(s + 1);
    int rc = base_vfs->xOpen(base_vfs, name, s->real, flags, out);
    s->f.pMethods = rc == SQLITE_OK && s->real->pMethods ? &shim_io : NULL;
    return rc;
}

static void install_faults(void) {
    static const sqlite3_mem_methods mem = {sq_malloc,  sq_free, sq_realloc,  sq_size,
                                            sq_roundup, sq_init, sq_shutdown, NULL};
    sqlite3_shutdown();
    ck_assert_int_eq(sqlite3_config(SQLITE_CONFIG_MALLOC, &mem), SQLITE_OK);
    ck_assert_int_eq(sqlite3_initialize(), SQLITE_OK);
    json_set_alloc_funcs(kvf_malloc, free);   // as main() sets it
    base_vfs = sqlite3_vfs_find(NULL);
    shim_vfs = *base_vfs;
    shim_vfs.iVersion = 1;
    shim_vfs.zName = "kvf_faulty";
    shim_vfs.szOsFile = (int)sizeof(sfile) + base_vfs->szOsFile;
    shim_vfs.xOpen = s_open;
    ck_assert_int_eq(sqlite3_vfs_register(&shim_vfs, 1), SQLITE_OK);
    kvf_alloc_hook = alloc_hook;
}

// ---- checks
// --------------------------------------------------------------------------------------- "ok" when
// the database at path passes integrity_check (opened with the plain VFS, which rolls back a hot
// journal first); else the reason.
static const char *integrity(const char *path, char *why, size_t n) {
    sqlite3 *h;
    if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, "unix") != SQLITE_OK) {
        snprintf(why, n, "cannot open: %s", sqlite3_errmsg(h));
        sqlite3_close(h);
        return why;
    }
    sqlite3_stmt *st;
    snprintf(why, n, "ok");
    if (sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK)
        snprintf(why, n, "prepare: %s", sqlite3_errmsg(h));
    else {
        if (sqlite3_step(st) != SQLITE_ROW)
            snprintf(why, n, "step: %s", sqlite3_errmsg(h));
        else
            snprintf(why, n, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return why;
}

enum { END_OK, END_CLEAN_ERROR, END_BAD, N_END };
static json_t *reference;   // the dry run's summary without "sim" (wall-clock figures)

static json_t *load_summary(const char *dir) {
    char p[256];
    snprintf(p, sizeof p, "%s/summary.json", dir);
    json_error_t je;
    json_set_alloc_funcs(malloc, free);
    json_t *s = json_load_file(p, 0, &je);
    json_set_alloc_funcs(kvf_malloc, free);
    if (s) json_object_del(s, "sim");
    return s;
}
static int ends[2][N_END];   // [alloc, io]

typedef struct outcome {
    int code;        // exit code, or -signal
    char msg[512];   // first line of stderr
} outcome;

// Runs fn(arg) in a child with the fault armed at n; stderr goes to a file.
static outcome in_child(int (*fn)(void *), void *arg, bool io, long n) {
    char errp[128];
    snprintf(errp, sizeof errp, "%s/stderr.txt", kvt_tmp);
    fflush(NULL);
    pid_t p = fork();
    ck_assert(p >= 0);
    if (p == 0) {
        int fd = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        close(fd);
        int out = open("/dev/null", O_WRONLY);
        dup2(out, 1);
        close(out);
        alloc_count = io_count = 0;
        if (io)
            io_fail_at = n;
        else
            alloc_fail_at = n;
        int rc = fn(arg);
        printf("counts %ld %ld\n", alloc_count, io_count);
        fprintf(stderr, "\ncounts %ld %ld\n", alloc_count, io_count);
        fflush(NULL);
        _exit(rc);
    }
    int st;
    ck_assert(waitpid(p, &st, 0) == p);
    outcome o = {.code = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st)};
    FILE *f = fopen(errp, "r");
    if (f) {
        if (!fgets(o.msg, sizeof o.msg, f)) o.msg[0] = 0;
        fclose(f);
    }
    return o;
}

// counts from the child's stderr (a dry run with no fault)
static void dry_counts(long *allocs, long *ios) {
    char errp[128];
    snprintf(errp, sizeof errp, "%s/stderr.txt", kvt_tmp);
    char *t = kvt_slurp(errp);
    const char *c = strstr(t, "counts ");
    ck_assert_msg(c, "no counts in %s", t);
    ck_assert_int_eq(sscanf(c, "counts %ld %ld", allocs, ios), 2);
    free(t);
}

// ---- a whole run --------------------------------------------------------------------------------
static char run_out[160];

static int run_cli(void *arg) {
    (void)arg;
    char trace[200];
    snprintf(trace, sizeof trace, "%s/t.jsonl", kvt_tmp);
    char *argv[] = {"run",     "scenarios/quickstart.yaml",
                    "--trace", trace,
                    "-o",      run_out,
                    "-q",      "--no-report",
                    "--set",   "output.sample_interval_s=0.05",
                    NULL};
    return cli_run(10, argv);
}

static void check_run_end(int kind, long n, const outcome *o) {
    char why[256], pat[256];
    struct stat sb;
    bool dir = stat(run_out, &sb) == 0;
    if (o->code == 0) {
        char db[200];
        snprintf(db, sizeof db, "%s/results.db", run_out);
        ck_assert_msg(dir, "fault %ld: exit 0 without %s", n, run_out);
        ck_assert_msg(!strcmp(integrity(db, why, sizeof why), "ok"), "fault %ld: %s: %s", n, db,
                      why);
        // a run that completes despite the fault gives the same answer as without it
        json_t *sj = load_summary(run_out);
        if (!reference)
            reference = sj;
        else {
            ck_assert_msg(json_equal(sj, reference),
                          "fault %d/%ld: completed with a different summary", kind, n);
            json_decref(sj);
        }
        ends[kind][END_OK]++;
    } else {
        ck_assert_msg(o->code == 1 || o->code == 2, "fault %d/%ld: ended by %d (%s)", kind, n,
                      o->code, o->msg);
        ck_assert_msg(strstr(o->msg, "kvfleet"), "fault %d/%ld: exit %d without a message: '%s'",
                      kind, n, o->code, o->msg);
        ck_assert_msg(!dir, "fault %d/%ld: a failed run left %s", kind, n, run_out);
        ends[kind][END_CLEAN_ERROR]++;
    }
    // a run stopped by an out-of-memory exit leaves its temporary directory: its database is
    // still sound (the next run on this -o removes it)
    snprintf(pat, sizeof pat, "%s.tmp.*/results.db", run_out);
    glob_t g;
    if (glob(pat, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++)
            ck_assert_msg(!strcmp(integrity(g.gl_pathv[i], why, sizeof why), "ok"),
                          "fault %d/%ld: %s: %s", kind, n, g.gl_pathv[i], why);
        globfree(&g);
    }
    char rm[512];
    snprintf(rm, sizeof rm, "rm -rf %s %s.*", run_out, run_out);
    (void)!system(rm);
}

// Injection points: all of the first `dense`, then `sparse` more spread over the rest.
static void sweep_points(int kind, long total, long dense, long sparse,
                         void (*one)(int kind, long n)) {
    const char *only = getenv("KVF_FAULT_ONLY");   // "KIND:N": reproduce one injection
    if (only) {
        int k;
        long n;
        if (sscanf(only, "%d:%ld", &k, &n) == 2 && k == kind) one(kind, n);
        return;
    }
    for (long n = 1; n <= total && n <= dense; n++)
        one(kind, n);
    if (total > dense)
        for (long i = 1; i <= sparse; i++)
            one(kind, dense + (total - dense) * i / sparse);
}

static void one_run(int kind, long n) {
    outcome o = in_child(run_cli, NULL, kind == 1, n);
    check_run_end(kind, n, &o);
}

static void write_trace(void) {
    char p[200];
    snprintf(p, sizeof p, "%s/t.jsonl", kvt_tmp);
    FILE *f = fopen(p, "w");
    ck_assert(f);
    for (int i = 0; i < 40; i++)
        fprintf(f,
                "{\"timestamp\": %d, \"input_length\": %d, \"output_length\": 20, \"hash_ids\": "
                "[%d, %d]}\n",
                i * 50, 600 + 10 * i, i % 3, i);
    fclose(f);
}

// A dry run (no fault) counts allocations and I/O calls; then allocation failures (the first
// a_dense, then a_sparse spread over the rest), I/O errors (io_dense + io_sparse) and full-disk
// errors (full_sparse), each in a child through one(); prints what happened.
static void inject(const char *what, int (*work)(void *), void (*one)(int, long), long a_dense,
                   long a_sparse, long io_dense, long io_sparse, long full_sparse,
                   void (*dry)(const outcome *)) {
    memset(ends, 0, sizeof ends);
    io_fail_code = SQLITE_IOERR_WRITE;
    outcome o = in_child(work, NULL, false, 0);
    ck_assert_msg(o.code == 0, "dry run failed: %d %s", o.code, o.msg);
    long allocs, ios;
    dry_counts(&allocs, &ios);
    if (dry) dry(&o);
    memset(ends, 0, sizeof ends);
    sweep_points(0, allocs, a_dense, a_sparse, one);
    sweep_points(1, ios, io_dense, io_sparse, one);
    io_fail_code = SQLITE_FULL;
    sweep_points(1, ios, 0, full_sparse, one);
    printf("fault injection, %s: %ld allocations, %ld I/O calls per run\n", what, allocs, ios);
    static const char *const kind[2] = {"allocation failures", "I/O failures"};
    for (int k = 0; k < 2; k++)
        printf("  %-20s %d injected: %d completed, %d clean errors; "
               "integrity_check ok on every database\n",
               kind[k], ends[k][END_OK] + ends[k][END_CLEAN_ERROR], ends[k][END_OK],
               ends[k][END_CLEAN_ERROR]);
}

static void reference_run(const outcome *o) {
    check_run_end(0, 0, o);
}

START_TEST(test_faults_whole_run) {
    kvt_tmp_make("kvf_faults");
    write_trace();
    snprintf(run_out, sizeof run_out, "%s/o", kvt_tmp);
    install_faults();
    inject("whole run", run_cli, one_run, 60, 140, 400, 100, 60, reference_run);
    ck_assert_int_gt(ends[0][END_CLEAN_ERROR], 50);
    ck_assert_int_gt(ends[1][END_CLEAN_ERROR], 50);
    kvt_tmp_remove();
}
END_TEST

// ---- the results database alone
// ------------------------------------------------------------------
static char db_path[200];

static int db_work(void *arg) {
    (void)arg;
    kvf_err err = {0};
    rpt_db *db;
    kvf_status st = rpt_db_create(&db, db_path, &err);
    if (st) goto out;
    st = rpt_db_run_set(db, "status", "running", &err);
    for (int i = 0; !st && i < 12000; i++) {
        rpt_request_row r = {.id = (uint64_t)i,
                             .cls = "chatbot",
                             .arrival_s = i * 0.1,
                             .input_tokens = 100 + i,
                             .output_tokens = 5,
                             .ttft_s = 0.2,
                             .tpot_s = 0.01,
                             .e2e_s = 1,
                             .queue_s = 0,
                             .status = "completed"};
        st = rpt_db_request(db, &r, &err);
        if (!st && i % 10 == 0)
            st = rpt_db_timeseries(db, i * 0.1, "prefill", -1, "queue", i, &err);
    }
    if (!st) st = rpt_db_summary_set(db, "requests.arrived", 12000, &err);
    kvf_err e2 = {0};
    kvf_status cst = rpt_db_close(db, &e2);
    if (!st && cst) {
        st = cst;
        err = e2;
    }
out:
    if (st) {
        if (!err.msg[0]) return 3;   // an error without a message
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return 1;
    }
    return 0;
}

static void one_db(int kind, long n) {
    unlink(db_path);
    outcome o = in_child(db_work, NULL, kind == 1, n);
    char why[256];
    ck_assert_msg(o.code == 0 || (o.code == 1 && strstr(o.msg, "kvfleet:")),
                  "db fault %d/%ld: ended by %d (%s)", kind, n, o.code, o.msg);
    struct stat sb;
    if (stat(db_path, &sb) == 0)
        ck_assert_msg(!strcmp(integrity(db_path, why, sizeof why), "ok"), "db fault %d/%ld: %s",
                      kind, n, why);
    ends[kind][o.code == 0 ? END_OK : END_CLEAN_ERROR]++;
}

START_TEST(test_faults_results_db) {
    kvt_tmp_make("kvf_faultdb");
    snprintf(db_path, sizeof db_path, "%s/r.db", kvt_tmp);
    install_faults();
    inject("results database", db_work, one_db, 50, 100, 150, 100, 50, NULL);
    ck_assert_int_gt(ends[1][END_CLEAN_ERROR], 100);
    kvt_tmp_remove();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("faults");
    TCase *t = tcase_create("faults");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_faults_whole_run);
    tcase_add_test(t, test_faults_results_db);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
