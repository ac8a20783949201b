// tests/test_reports.c -- the reports module on a small fake results directory written
// through the reports API itself: the results database (rows, NULLs, flushes, a bad path
// named); the economics against hand calculations (rent and own, class prices, off-peak, day
// placement, payback, break-even) and its monotonicity; the report's pages (every keyed cell
// equal to summary.json, the answer first, charts drawn or the reason they are not); compare;
// the `kvfleet report` and `compare` command lines of the built binary; progress lines off a
// terminal.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "rpt.h"
#include "rpt_util.h"

static bool near(double a, double b) {
    return fabs(a - b) <= 1e-9 * (1 + fabs(b));
}
#define NEAR(a, b) near((a), (b))

static char tmpdir[256];

static void mk_tmp(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kvf_test_reports_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    kvt_tmp_register(tmpdir);
}

// KVF_TEST_KEEP=1 keeps the directories (their paths go to stderr) to look at the pages.
static void rm_tmp(void) {
    if (getenv("KVF_TEST_KEEP")) {
        fprintf(stderr, "kept %s\n", tmpdir);
        return;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static long long q_int(sqlite3 *h, const char *sql) {
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static double q_real(sqlite3 *h, const char *sql) {
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    double v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return v;
}

// A fresh results database r.db in a new temporary directory; its path in path.
static rpt_db *tmp_db(char *path, size_t n) {
    mk_tmp();
    snprintf(path, n, "%s/r.db", tmpdir);
    kvf_err err = {0};
    rpt_db *db = NULL;
    ck_assert_msg(rpt_db_create(&db, path, &err) == KVF_OK, "%s", err.msg);
    return db;
}

// ---- database ---------------------------------------------------------------------------

START_TEST(test_db_rows_and_nulls) {
    mk_tmp();
    char path[512];
    snprintf(path, sizeof path, "%s/results.db", tmpdir);
    FILE *f = fopen(path, "w");   // an existing file is replaced
    fputs("not a database", f);
    fclose(f);
    kvf_err err = {0};
    rpt_db *db;
    ck_assert_int_eq(rpt_db_create(&db, path, &err), KVF_OK);
    ck_assert_int_eq(rpt_db_run_set(db, "status", "running", &err), KVF_OK);
    ck_assert_int_eq(rpt_db_run_set(db, "status", "completed", &err), KVF_OK);
    ck_assert_int_eq(rpt_db_summary_set(db, "ttft_ms.p90", 12.5, &err), KVF_OK);
    ck_assert_int_eq(rpt_db_summary_set(db, "margin", NAN, &err), KVF_OK);
    ck_assert_int_eq(rpt_db_summary_set_text(db, "scenario", "tiny", &err), KVF_OK);
    const int n = 25000;   // more than one batch
    for (int i = 0; i < n; i++) {
        rpt_request_row r = {.id = (uint64_t)i,
                             .cls = i % 2 ? "agent" : "chatbot",
                             .session = (uint64_t)i / 4,
                             .arrival_s = i * 0.5,
                             .input_tokens = 100,
                             .cached_tokens = 60,
                             .output_tokens = 7,
                             .vision_instance = -1,
                             .prefill_instance = i % 3,
                             .decode_instance = i % 5,
                             .ttft_s = 0.2,
                             .tpot_s = i % 10 ? 0.02 : NAN,
                             .e2e_s = 1.0,
                             .queue_s = 0.01,
                             .status = "completed",
                             .hit_hbm = 10,
                             .hit_dram = 20,
                             .hit_ssd = 30,
                             .preemptions = (uint32_t)(i % 2)};
        ck_assert_int_eq(rpt_db_request(db, &r, &err), KVF_OK);
        ck_assert_int_eq(rpt_db_timeseries(db, i, "cluster", -1, "queue_len", i % 7, &err), KVF_OK);
    }
    ck_assert_ptr_nonnull(rpt_db_handle(db));
    ck_assert_int_eq(rpt_db_close(db, &err), KVF_OK);

    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM request"), n);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM timeseries"), n);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM request WHERE tpot_s IS NULL"), n / 10);
    ck_assert_int_eq(q_int(h, "SELECT sum(hit_hbm + hit_dram + hit_ssd) FROM request"), 60LL * n);
    ck_assert_int_eq(q_int(h, "SELECT sum(preemptions) FROM request"), n / 2);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM request WHERE vision_instance = -1"), n);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM run"), 1);
    ck_assert_int_eq(q_int(h, "SELECT value = 'completed' FROM run WHERE key = 'status'"), 1);
    ck_assert(NEAR(q_real(h, "SELECT value FROM summary WHERE key = 'ttft_ms.p90'"), 12.5));
    ck_assert_int_eq(q_int(h, "SELECT value IS NULL FROM summary WHERE key = 'margin'"), 1);
    ck_assert_int_eq(q_int(h, "SELECT typeof(value) = 'text' FROM summary WHERE key = 'scenario'"),
                     1);
    sqlite3_close(h);
    rm_tmp();
}
END_TEST

// Request rows are held back and inserted by id: written in any order (here scattered, as
// requests finish), from a caller's buffer reused after each call, some ids twice, and then
// more distinct class texts than the database keeps (the rest go straight in), the table
// holds every row with its own texts and values, the later row of an id replacing the earlier;
// a flush makes the held rows visible to a second connection.
START_TEST(test_db_request_rows_any_order) {
    char path[512];
    kvf_err err = {0};
    rpt_db *db = tmp_db(path, sizeof path);
    const uint64_t n = 25000;   // two and a half batches
    char cls[32], status[32];
    for (uint64_t k = 0; k < n + n / 10; k++) {
        // ids scattered: a permutation of 0..n-1 (7919 is prime to n), then every tenth again
        uint64_t id = k < n ? (k * 7919) % n : (k - n) * 10;
        bool again = k >= n;
        snprintf(cls, sizeof cls, "class%02d", (int)(id % 20));
        snprintf(status, sizeof status, again ? "rejected:queue" : "completed");
        rpt_request_row r = {.id = id,
                             .cls = cls,
                             .session = id * 3,
                             .arrival_s = (double)id * 0.5,
                             .input_tokens = (uint32_t)(id % 1000),
                             .output_tokens = again ? 1 : 7,
                             .vision_instance = -1,
                             .ttft_s = again ? NAN : 0.25,
                             .tpot_s = NAN,
                             .e2e_s = 1.0,
                             .status = status};
        ck_assert_int_eq(rpt_db_request(db, &r, &err), KVF_OK);
        memset(cls, 'x', sizeof cls - 1);   // the caller's buffers change after the call
        memset(status, 'y', sizeof status - 1);
    }
    for (uint64_t id = n; id < n + 40; id++) {   // 40 more texts, ids n+39 down to n
        snprintf(cls, sizeof cls, "extra%02d", (int)(id - n));
        rpt_request_row r = {.id = 2 * n + 39 - id, .cls = cls, .status = "completed"};
        ck_assert_int_eq(rpt_db_request(db, &r, &err), KVF_OK);
        memset(cls, 'x', sizeof cls - 1);
    }
    ck_assert_int_eq(rpt_db_flush(db, &err), KVF_OK);
    sqlite3 *h;   // a second connection, before the database is closed
    ck_assert_int_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM request"), (long long)n + 40);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM request WHERE id < 25000 AND ("
                              " class <> printf('class%02d', id % 20) OR session <> id * 3"
                              " OR input_tokens <> id % 1000 OR arrival_s <> id * 0.5)"),
                     0);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM request WHERE id >= 25000"
                              " AND class = printf('extra%02d', 25039 - id)"),
                     40);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM request WHERE status = 'rejected:queue'"
                              " AND output_tokens = 1 AND ttft_s IS NULL AND id % 10 = 0"),
                     (long long)(n / 10));
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM request WHERE status = 'completed'"
                              " AND output_tokens = 7 AND ttft_s = 0.25 AND id % 10 <> 0"),
                     (long long)(n - n / 10));
    ck_assert_int_eq(q_int(h, "SELECT max(id) - min(id) + 1 FROM request"), (long long)n + 40);
    sqlite3_close(h);
    ck_assert_int_eq(rpt_db_close(db, &err), KVF_OK);
    rm_tmp();
}
END_TEST

// Rows written by the writer thread (the default) and in the call leave the same tables: the
// same request rows (scattered ids, some twice, the later kept), time-series rows with the
// same rowids, run and summary keys set between batches, a flush in the middle, and more
// distinct texts than the database keeps (the rest written in the call, after what is held).
static void fill_db(rpt_db *db) {
    kvf_err err = {0};
    const uint64_t n = 50000;
    char pool[16], metric[16], cls[16];
    for (uint64_t k = 0; k < n + n / 7; k++) {
        uint64_t id = k < n ? (k * 7919) % n : (k - n) * 7;
        snprintf(cls, sizeof cls, "c%d", (int)(id % 9));
        rpt_request_row r = {.id = id,
                             .cls = cls,
                             .session = id / 3,
                             .arrival_s = (double)id * 0.25,
                             .input_tokens = (uint32_t)(k % 997),
                             .output_tokens = k < n ? 5 : 2,
                             .decode_instance = (int32_t)(k % 13),
                             .ttft_s = k % 5 ? 0.125 * (double)(k % 11) : NAN,
                             .status = k < n ? "completed" : "unfinished"};
        ck_assert_int_eq(rpt_db_request(db, &r, &err), KVF_OK);
        if (k % 3 == 0) {
            // 70 distinct metrics at the end: past the kept texts
            snprintf(pool, sizeof pool, "p%d", (int)(k % 5));
            snprintf(metric, sizeof metric, "m%02d", k > n ? (int)(k % 70) : (int)(k % 12));
            ck_assert_int_eq(rpt_db_timeseries(db, (double)k * 0.1, pool, (int32_t)(k % 4) - 1,
                                               metric, k % 17 ? (double)k : NAN, &err),
                             KVF_OK);
            memset(metric, 'z', sizeof metric - 1);
        }
        if (k == 23456) ck_assert_int_eq(rpt_db_summary_set(db, "half", 0.5, &err), KVF_OK);
        if (k == 34567) ck_assert_int_eq(rpt_db_run_set(db, "at", "34567", &err), KVF_OK);
        if (k == 45678) ck_assert_int_eq(rpt_db_flush(db, &err), KVF_OK);
    }
    ck_assert_int_eq(rpt_db_close(db, &err), KVF_OK);
}

START_TEST(test_db_background_same_rows) {
    char path[512], path2[600];
    rpt_db *db = tmp_db(path, sizeof path);   // rows by the writer thread
    fill_db(db);
    snprintf(path2, sizeof path2, "%s/sync.db", tmpdir);
    kvf_err err = {0};
    ck_assert_int_eq(rpt_db_create(&db, path2, &err), KVF_OK);
    rpt_db_background(db, false);   // rows in the call
    fill_db(db);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    char sql[800];
    snprintf(sql, sizeof sql, "ATTACH '%s' AS s", path2);
    ck_assert_int_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM request"), 50000);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM timeseries"), (50000 + 50000 / 7 + 2) / 3);
    ck_assert_int_eq(q_int(h, "SELECT count(DISTINCT metric) FROM timeseries"), 70);
    // time-series rows in the order they were written (t_s grows with it)
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM timeseries a JOIN timeseries b"
                              " ON b.rowid = a.rowid + 1 WHERE b.t_s <= a.t_s"),
                     0);
    const char *tables[] = {"request", "timeseries", "summary", "run"};
    for (int i = 0; i < 4; i++) {
        // both ways, timeseries with its rowids (the order rows went in)
        snprintf(sql, sizeof sql,
                 "SELECT (SELECT count(*) FROM s.%s) - (SELECT count(*) FROM main.%s)"
                 " + (SELECT count(*) FROM (SELECT rowid, * FROM main.%s EXCEPT"
                 " SELECT rowid, * FROM s.%s))",
                 tables[i], tables[i], tables[i], tables[i]);
        ck_assert_msg(q_int(h, sql) == 0, "%s differs", tables[i]);
    }
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM request WHERE status = 'unfinished'"),
                     50000 / 7);
    sqlite3_close(h);
    rm_tmp();
}
END_TEST

START_TEST(test_db_bad_path_names_it) {
    kvf_err err = {0};
    rpt_db *db = (rpt_db *)1;
    kvf_status s = rpt_db_create(&db, "/nonexistent-dir/x/results.db", &err);
    ck_assert_int_eq(s, KVF_ERUN);
    ck_assert_ptr_null(db);
    ck_assert_msg(strstr(err.msg, "/nonexistent-dir/x/results.db") != NULL, "msg: %s", err.msg);
    ck_assert_int_eq(rpt_db_close(NULL, &err), KVF_OK);
}
END_TEST

START_TEST(test_db_flush_makes_rows_visible) {
    char path[512];
    kvf_err err = {0};
    rpt_db *db = tmp_db(path, sizeof path);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(rpt_db_timeseries(db, i, "kv", -1, "kv_store_bytes", i, &err), KVF_OK);
    ck_assert_int_eq(rpt_db_flush(db, &err), KVF_OK);
    sqlite3 *h;   // a second connection sees committed rows
    ck_assert_int_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM timeseries"), 10);
    sqlite3_close(h);
    ck_assert_int_eq(rpt_db_close(db, &err), KVF_OK);
    rm_tmp();
}
END_TEST

// ---- economics --------------------------------------------------------------------------

static void set_ok(rpt_econ_config *c, const char *k, const char *v) {
    kvf_err err = {0};
    kvf_status s = rpt_econ_config_set(c, k, v, &err);
    ck_assert_msg(s == KVF_OK, "%s=%s: %s", k, v, err.msg);
}

// One hour of a tiny cluster: 2 prefill GPUs, 4 decode GPUs, 3 TB of SSD. The trace starts
// at 16:00 UTC; the off-peak window is 16:30-00:30, so the first request is peak and the
// second (at 16:31) off-peak.
static void tiny_case(rpt_econ_config *c, rpt_econ_input *in) {
    rpt_econ_config_default(c);
    set_ok(c, "gpu_hour_usd", "2");
    set_ok(c, "ssd_tb_month_usd", "10");
    set_ok(c, "dram_tb_month_usd", "0");
    set_ok(c, "network_usd_per_gpu_hour", "0.5");
    set_ok(c, "offpeak.start_utc", "16:30");
    set_ok(c, "offpeak.end_utc", "00:30");
    set_ok(c, "offpeak.price_factor", "0.5");
    set_ok(c, "prices_per_mtok.input_hit", "1");
    set_ok(c, "prices_per_mtok.input_miss", "10");
    set_ok(c, "prices_per_mtok.output", "20");
    set_ok(c, "free_share", "0.25");
    set_ok(c, "trace_start_utc", "16:00");
    set_ok(c, "capex_per_gpu_usd", "30000");
    set_ok(c, "power_w_per_gpu", "1000");
    set_ok(c, "pue", "1.3");
    set_ok(c, "kwh_usd", "0.08");
    rpt_econ_input_init(in);
    in->simulated_s = 3600;
    in->gpu_hours[RPT_POOL_PREFILL] = 2;
    in->gpu_hours[RPT_POOL_DECODE] = 4;
    in->gpus[RPT_POOL_PREFILL] = 2;
    in->gpus[RPT_POOL_DECODE] = 4;
    in->ssd_tb = 3;
    rpt_econ_input_add(in, c, "chatbot", 0.0, 1e6, 1e6, 1e6);
    rpt_econ_input_add(in, c, "chatbot", 1860.0, 2e6, 0, 1e6);
}

START_TEST(test_econ_hand_calculation_rent) {
    rpt_econ_config c;
    rpt_econ_input in;
    tiny_case(&c, &in);
    ck_assert_int_eq(in.n_cls, 1);
    ck_assert(NEAR(in.cls[0].hit[0], 1e6) && NEAR(in.cls[0].hit[1], 2e6));
    rpt_econ_result r;
    kvf_err err = {0};
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_OK);

    // by hand: 6 GPU-hours in one hour -> 144 GPU-hours a day
    double gpu = 2.0 * 144, net = 0.5 * 144, ssd = 3 * 10 * 12.0 / 365.0;
    double cost = gpu + net + ssd;
    // revenue: the one-hour run is placed in a flat day; the window 16:30-00:30 holds 8 of
    // 24 hours, so a third of the day's tokens pay half: factor 1 - (1/3)(1 - 0.5) = 5/6.
    // Tokens 3e6 hit, 1e6 miss, 2e6 output an hour: 3*1 + 1*10 + 2*20 = 53 USD at full
    // price, x 0.75 billed x 5/6 = 33.125 an hour, 795 a day -- where the run falls in the
    // day does not matter.
    double rev = 0.75 * (5.0 / 6.0) * 53 * 24;
    ck_assert(NEAR(rev, 795));
    ck_assert(NEAR(r.offpeak_share, 1.0 / 3.0));
    ck_assert_msg(NEAR(r.cost_per_day_by_part[RPT_COST_GPU], gpu), "%g",
                  r.cost_per_day_by_part[RPT_COST_GPU]);
    ck_assert(NEAR(r.cost_per_day_by_part[RPT_COST_NETWORK], net));
    ck_assert(NEAR(r.cost_per_day_by_part[RPT_COST_SSD], ssd));
    ck_assert(NEAR(r.cost_per_day_by_part[RPT_COST_POWER], 0));
    ck_assert(NEAR(r.cost_per_day_usd, cost));
    ck_assert_msg(NEAR(r.revenue_per_day_usd, rev), "rev %g want %g", r.revenue_per_day_usd, rev);
    ck_assert(NEAR(r.cost_usd, cost / 24));
    ck_assert(NEAR(r.revenue_usd, 33.125));
    ck_assert(NEAR(r.margin, (rev - cost) / rev));
    ck_assert(NEAR(r.cost_per_gpu_hour_usd, cost / 144));
    ck_assert(NEAR(r.cost_per_gpu_hour_by_part[RPT_COST_GPU], 2.0));
    ck_assert(NEAR(r.hit_rate, 3.0 / 4.0));
    // cost per Mtok: GPU parts split 2/6 input, 4/6 output; SSD to input
    double cin = (gpu + net) * 2 / 6 + ssd, cout = (gpu + net) * 4 / 6;
    ck_assert(NEAR(r.cost_per_mtok_input_usd, cin / (4 * 24)));
    ck_assert(NEAR(r.cost_per_mtok_output_usd, cout / (2 * 24)));
    // payback: capex 6 x 30000 over revenue minus cash opex (power as if owned + SSD + net)
    double opex = 1.0 * 1.3 * 0.08 * 144 + ssd + net;
    ck_assert(NEAR(r.cash_opex_per_day_usd, opex));
    ck_assert(NEAR(r.payback_days, 180000 / (rev - opex)));
    // break-even: all prices x cost/rev; output price with input prices kept
    ck_assert(NEAR(r.break_even_price_factor, cost / rev));
    double rev_in = 0.75 * (5.0 / 6.0) * 13 * 24, out_w = 0.75 * (5.0 / 6.0) * 2 * 24;
    ck_assert(NEAR(r.revenue_input_per_day_usd, rev_in));
    ck_assert(NEAR(r.break_even_output_usd_per_mtok, (cost - rev_in) / out_w));
    // the price table holds the break-even factor, where margin is 0
    bool seen = false;
    for (int i = 0; i < r.by_price.n; i++)
        if (NEAR(r.by_price.row[i].x, cost / rev)) {
            seen = true;
            ck_assert(fabs(r.by_price.row[i].margin) < 1e-9);
        }
    ck_assert(seen);
}
END_TEST

// Each pool at its own price (economics.pools.*): the tiny case with prefill GPUs at $3 and
// decode at $1 an hour, prefill bought at $40,000; the all-in range bills every pool at its
// ends whatever the pools' own prices.
START_TEST(test_econ_hand_calculation_pools) {
    rpt_econ_config c;
    rpt_econ_input in;
    tiny_case(&c, &in);
    set_ok(&c, "pools.prefill.gpu_hour_usd", "3");
    set_ok(&c, "pools.decode.gpu_hour_usd", "1");
    set_ok(&c, "pools.prefill.capex_per_gpu_usd", "40000");
    set_ok(&c, "gpu_hour_usd_range", "[1, 5]");
    rpt_econ_result r;
    kvf_err err = {0};
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_OK);
    double gp = 2 * 24 * 3.0, gd = 4 * 24 * 1.0, net = 0.5 * 144, ssd = 3 * 10 * 12.0 / 365.0;
    ck_assert_msg(NEAR(r.gpu_cost_per_day_by_pool[RPT_POOL_PREFILL], gp), "%g",
                  r.gpu_cost_per_day_by_pool[RPT_POOL_PREFILL]);
    ck_assert(NEAR(r.gpu_cost_per_day_by_pool[RPT_POOL_DECODE], gd));
    ck_assert(NEAR(r.cost_per_day_by_part[RPT_COST_GPU], gp + gd));
    ck_assert(NEAR(r.cost_per_day_usd, gp + gd + net + ssd));
    // input's share of the GPU part by cost (prefill's $144 of $240), the rest by GPU-hours
    ck_assert(NEAR(r.cost_per_mtok_input_usd, (gp + net * 2 / 6 + ssd) / (4 * 24)));
    ck_assert(NEAR(r.capex_usd, 2 * 40000.0 + 4 * 30000.0));
    double opex = 1.0 * 1.3 * 0.08 * 144 + ssd + net;
    ck_assert(NEAR(r.payback_days, 200000 / (r.revenue_per_day_usd - opex)));
    ck_assert_msg(NEAR(r.range_cost_per_day_usd[0], 144 * 1.0 + net + ssd), "range low %g",
                  r.range_cost_per_day_usd[0]);
    ck_assert(NEAR(r.range_cost_per_day_usd[1], 144 * 5.0 + net + ssd));
    // bad pool keys name the key
    const char *bad[][2] = {
        {"pools.prefil.gpu_hour_usd", "1"},         {"pools.prefill.rent", "1"},
        {"pools.decode.gpu_hour_usd", "-1"},        {"pools.decode.gpu_hour_usd", "nan"},
        {"pools.decode.capex_per_gpu_usd", "1e13"}, {"pools.decode", "1"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(rpt_econ_config_set(&c, bad[i][0], bad[i][1], &err), KVF_EINVAL);
        ck_assert_msg(strstr(err.msg, bad[i][0]), "%s=%s: %s", bad[i][0], bad[i][1], err.msg);
    }
}
END_TEST

START_TEST(test_econ_hand_calculation_own) {
    rpt_econ_config c;
    rpt_econ_input in;
    tiny_case(&c, &in);
    set_ok(&c, "cost_model", "own");
    set_ok(&c, "depreciation_years", "4");
    rpt_econ_result r;
    kvf_err err = {0};
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_OK);
    ck_assert(NEAR(r.cost_per_gpu_hour_by_part[RPT_COST_GPU], 30000.0 / (4 * 365 * 24)));
    ck_assert(NEAR(r.cost_per_gpu_hour_by_part[RPT_COST_POWER], 1.0 * 1.3 * 0.08));
    double cost = 144 * (30000.0 / 35040 + 0.104 + 0.5) + 30 * 12.0 / 365;
    ck_assert_msg(NEAR(r.cost_per_day_usd, cost), "%g vs %g", r.cost_per_day_usd, cost);
    // gpu_hour_usd: null also selects ownership
    rpt_econ_config c2;
    rpt_econ_config_default(&c2);
    set_ok(&c2, "gpu_hour_usd", "null");
    ck_assert(c2.own);
}
END_TEST

START_TEST(test_econ_class_prices_and_free_share) {
    rpt_econ_config c;
    rpt_econ_input in;
    tiny_case(&c, &in);
    set_ok(&c, "prices_per_mtok.agent.output", "40");
    set_ok(&c, "free_share", "0");
    set_ok(&c, "offpeak", "null");
    rpt_econ_input_add(&in, &c, "agent", 10, 0, 1e6, 1e6);
    rpt_econ_result r;
    kvf_err err = {0};
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_OK);
    ck_assert_int_eq(in.n_cls, 2);
    // no discount now: every token at its full price
    double chat = (1 * 1 + 1 * 10 + 1 * 20) + (2 * 1 + 1 * 20);
    double agent = 1 * 10 + 1 * 40;
    ck_assert_msg(NEAR(r.revenue_per_day_by_class[0], chat * 24), "%g",
                  r.revenue_per_day_by_class[0]);
    ck_assert(NEAR(r.revenue_per_day_by_class[1], agent * 24));
    ck_assert(NEAR(r.revenue_per_day_usd, (chat + agent) * 24));
}
END_TEST

START_TEST(test_econ_offpeak_window) {
    rpt_econ_config c;
    rpt_econ_config_default(&c);
    set_ok(&c, "offpeak.start_utc", "16:30");
    set_ok(&c, "offpeak.end_utc", "00:30");
    set_ok(&c, "trace_start_utc", "16:00");
    ck_assert(!rpt_econ_is_offpeak(&c, 0));
    ck_assert(!rpt_econ_is_offpeak(&c, 1799));
    ck_assert(rpt_econ_is_offpeak(&c, 1800));               // 16:30
    ck_assert(rpt_econ_is_offpeak(&c, 8 * 3600 + 1799));    // 00:29:59
    ck_assert(!rpt_econ_is_offpeak(&c, 8 * 3600 + 1800));   // 00:30
    ck_assert(rpt_econ_is_offpeak(&c, 86400 + 1800));       // next day 16:30
    set_ok(&c, "offpeak.start_utc", "01:00");
    set_ok(&c, "offpeak.end_utc", "05:00");
    set_ok(&c, "trace_start_utc", "00:00");
    ck_assert(!rpt_econ_is_offpeak(&c, 3599));
    ck_assert(rpt_econ_is_offpeak(&c, 3600));
    ck_assert(rpt_econ_is_offpeak(&c, 4.5 * 3600));
    ck_assert(!rpt_econ_is_offpeak(&c, 5 * 3600));
    set_ok(&c, "offpeak", "null");
    ck_assert(!rpt_econ_is_offpeak(&c, 3600));
}
END_TEST

START_TEST(test_econ_config_bad_keys) {
    rpt_econ_config c;
    rpt_econ_config_default(&c);
    kvf_err err = {0};
    ck_assert_int_eq(rpt_econ_config_set(&c, "gpu_hours_usd", "2", &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "gpu_hours_usd") != NULL, "%s", err.msg);
    ck_assert_int_eq(rpt_econ_config_set(&c, "offpeak.start_utc", "25:00", &err), KVF_EINVAL);
    ck_assert_int_eq(rpt_econ_config_set(&c, "offpeak.start_utc", "4pm", &err), KVF_EINVAL);
    ck_assert_int_eq(rpt_econ_config_set(&c, "free_share", "1.5", &err), KVF_EINVAL);
    ck_assert_int_eq(rpt_econ_config_set(&c, "pue", "0.5", &err), KVF_EINVAL);
    ck_assert_int_eq(rpt_econ_config_set(&c, "gpu_hour_usd", "abc", &err), KVF_EINVAL);
    ck_assert_int_eq(rpt_econ_config_set(&c, "prices_per_mtok.agent.price", "1", &err), KVF_EINVAL);
    ck_assert_int_eq(rpt_econ_config_set(&c, "prices_per_mtok.bogus", "1", &err), KVF_EINVAL);
    ck_assert_int_eq(rpt_econ_config_set(&c, "cost_model", "lease", &err), KVF_EINVAL);
    ck_assert_int_eq(rpt_econ_config_set(&c, "offpeak.start_utc", "16:30:15", &err), KVF_OK);
    ck_assert(NEAR(c.offpeak_start_s, 16 * 3600 + 30 * 60 + 15));
    rpt_econ_input in;
    rpt_econ_input_init(&in);
    rpt_econ_result r;
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_EINVAL);   // no simulated time
}
END_TEST

// Checks that margin is monotone in the hit rate and that its direction is the one the
// linear-fractional form predicts: up iff the relative cost saved per unit of hit rate
// exceeds the relative revenue lost.
static int margin_direction(const rpt_econ_result *r) {
    int up = 0, down = 0;
    const rpt_econ_sens *s = &r->by_hit_rate;
    for (int i = 1; i < s->n; i++) {
        ck_assert(s->row[i].x > s->row[i - 1].x);
        double d = s->row[i].margin - s->row[i - 1].margin;
        if (d > 1e-12) up++;
        if (d < -1e-12) down++;
        // cost and prefill GPUs always fall as the hit rate rises (hit_cost_ratio < 1)
        ck_assert_msg(s->row[i].cost_per_day_usd < s->row[i - 1].cost_per_day_usd,
                      "cost at h=%g: %g, at h=%g: %g", s->row[i].x, s->row[i].cost_per_day_usd,
                      s->row[i - 1].x, s->row[i - 1].cost_per_day_usd);
        ck_assert(s->row[i].prefill_gpus < s->row[i - 1].prefill_gpus);
        ck_assert(s->row[i].margin_fixed_revenue > s->row[i - 1].margin_fixed_revenue);
    }
    ck_assert_msg(!(up && down), "margin not monotone: %d up, %d down", up, down);
    return up ? 1 : down ? -1 : 0;
}

START_TEST(test_econ_margin_monotone_in_hit_rate) {
    rpt_econ_config c;
    rpt_econ_input in;
    tiny_case(&c, &in);
    set_ok(&c, "hit_cost_ratio", "0.1");
    kvf_err err = {0};
    rpt_econ_result r;
    // 1) hits billed like misses: caching only saves cost, margin must rise with hit rate
    set_ok(&c, "prices_per_mtok.input_hit", "10");
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_OK);
    ck_assert_int_eq(margin_direction(&r), 1);
    // the observed point sits in the table with the actual figures
    bool seen = false;
    for (int i = 0; i < r.by_hit_rate.n; i++)
        if (NEAR(r.by_hit_rate.row[i].x, r.hit_rate)) {
            seen = true;
            ck_assert(NEAR(r.by_hit_rate.row[i].margin, r.margin));
            ck_assert(NEAR(r.by_hit_rate.row[i].cost_per_day_usd, r.cost_per_day_usd));
            ck_assert(NEAR(r.by_hit_rate.row[i].prefill_gpus, 2));
        }
    ck_assert(seen);
    // 2) a prefill-heavy cluster at a tenfold hit discount: the GPUs saved outweigh the
    //    discount -> margin rises; with almost no prefill cost it falls. The direction is
    //    predicted independently from dC/dh * R vs C * dR/dh.
    for (int k = 0; k < 2; k++) {
        set_ok(&c, "prices_per_mtok.input_hit", "1");
        in.gpu_hours[RPT_POOL_PREFILL] = k == 0 ? 200 : 0.01;
        in.gpus[RPT_POOL_PREFILL] = in.gpu_hours[RPT_POOL_PREFILL];
        ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_OK);
        double h0 = r.hit_rate, w0 = (1 - h0) + h0 * 0.1;
        double dC = -(1 - 0.1) / w0 * in.gpu_hours[RPT_POOL_PREFILL] * 24 * (2 + 0.5);
        // revenue slope: 4e6 input tokens an hour re-billed at the day's mean factor 5/6
        double dR = -(10 - 1) / 1e6 * 0.75 * 4e6 * 24 * (5.0 / 6.0);
        int want = dC * r.revenue_per_day_usd < r.cost_per_day_usd * dR ? 1 : -1;
        int got = margin_direction(&r);
        ck_assert_msg(got == want, "case %d: direction %d, predicted %d", k, got, want);
        ck_assert_int_eq(got, k == 0 ? 1 : -1);
    }
}
END_TEST

START_TEST(test_econ_utilization_and_price_tables) {
    rpt_econ_config c;
    rpt_econ_input in;
    tiny_case(&c, &in);
    in.utilization[RPT_POOL_PREFILL] = 0.5;
    in.utilization[RPT_POOL_DECODE] = 0.2;
    rpt_econ_result r;
    kvf_err err = {0};
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_OK);
    ck_assert(NEAR(r.utilization, (0.5 * 2 + 0.2 * 4) / 6));
    // capacity: the busiest pool (prefill, 50 % busy) is full at twice the traffic, i.e. a
    // fleet utilisation of 2 x 0.3 = 0.6; the table stops there and marks that row
    const rpt_econ_sens *su = &r.by_utilization;
    ck_assert(NEAR(r.capacity_utilization, 0.6));
    ck_assert_int_eq(su->n, 6);   // 0.1 .. 0.5 and 0.6
    ck_assert(NEAR(su->row[su->n - 1].x, 0.6) && su->row[su->n - 1].capped);
    ck_assert(NEAR(su->row[su->n - 1].revenue_per_day_usd, 2 * r.revenue_per_day_usd));
    for (int i = 0; i < su->n - 1; i++)
        ck_assert(!su->row[i].capped && su->row[i].x < 0.6);
    for (int i = 1; i < r.by_utilization.n; i++) {
        const rpt_econ_sens_row *a = &r.by_utilization.row[i - 1], *b = &r.by_utilization.row[i];
        ck_assert(b->margin > a->margin);
        ck_assert(b->payback_days <= a->payback_days);
        ck_assert(NEAR(b->revenue_per_day_usd / b->x, r.revenue_per_day_usd / r.utilization));
    }
    for (int i = 1; i < r.by_price.n; i++)
        ck_assert(r.by_price.row[i].margin > r.by_price.row[i - 1].margin);
    // JSON carries the §5 keys
    json_t *j = rpt_econ_to_json(&c, &r);
    const char *keys[] = {"cost_usd", "revenue_usd", "margin", "cost_per_gpu_hour_usd",
                          "payback_days"};
    for (size_t i = 0; i < 5; i++)
        ck_assert_ptr_nonnull(json_object_get(j, keys[i]));
    ck_assert(NEAR(json_real_value(json_object_get(j, "cost_usd")), r.cost_usd));
    json_t *mt = json_object_get(j, "cost_per_mtok_usd");
    ck_assert(NEAR(json_real_value(json_object_get(mt, "output")), r.cost_per_mtok_output_usd));
    json_decref(j);
    // a price so low that revenue never covers opex: payback is infinite (null in JSON)
    set_ok(&c, "prices_per_mtok.input_hit", "0");
    set_ok(&c, "prices_per_mtok.input_miss", "0");
    set_ok(&c, "prices_per_mtok.output", "0.001");
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_OK);
    ck_assert(isinf(r.payback_days));
    j = rpt_econ_to_json(&c, &r);
    ck_assert(json_is_null(json_object_get(j, "payback_days")));
    json_decref(j);
}
END_TEST

// A 15-minute run: 1e6 hit, 1e6 miss and 1e6 output tokens at the default prices
// (0.028 / 0.28 / 0.42 USD per Mtok) and the default off-peak window 16:30-00:30 at half price.
static double day_revenue_at(const char *start, const char *profile, rpt_econ_result *r) {
    rpt_econ_config c;
    rpt_econ_config_default(&c);
    set_ok(&c, "trace_start_utc", start);
    if (profile) set_ok(&c, "day_profile", profile);
    rpt_econ_input in;
    rpt_econ_input_init(&in);
    in.simulated_s = 900;
    in.gpu_hours[RPT_POOL_PREFILL] = 1;
    in.gpus[RPT_POOL_PREFILL] = 4;
    // both requests in the run's first minutes: at 00:00 they fall in the off-peak window,
    // at 09:00 in the peak -- the day's revenue must not follow them
    rpt_econ_input_add(&in, &c, "chatbot", 10, 1e6, 0, 5e5);
    rpt_econ_input_add(&in, &c, "chatbot", 20, 0, 1e6, 5e5);
    kvf_err err = {0};
    ck_assert_int_eq(rpt_econ_compute(&c, &in, r, &err), KVF_OK);
    return r->revenue_per_day_usd;
}

START_TEST(test_econ_day_placement) {
    rpt_econ_result r0, r9;
    double at0 = day_revenue_at("00:00", NULL, &r0);
    double at9 = day_revenue_at("09:00", NULL, &r9);
    // by hand: 0.028 + 0.28 + 0.42 = 0.728 USD a run, 96 runs a day = 69.888 USD at full
    // price; a flat day has 8 of 24 hours off-peak at half price -> x 5/6 = 58.24 USD a day
    ck_assert_msg(NEAR(at0, 58.24), "00:00: %.6f USD/day", at0);
    ck_assert_msg(NEAR(at9, 58.24), "09:00: %.6f USD/day", at9);
    ck_assert(NEAR(r0.offpeak_share, 1.0 / 3.0) && NEAR(r9.offpeak_share, 1.0 / 3.0));
    ck_assert(NEAR(r0.input_tokens_per_day, 2e6 * 96));
    ck_assert_str_eq(r0.day_basis, "flat day profile");
    // an explicit flat profile is the same day
    double flat = day_revenue_at("09:00", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]", &r9);
    ck_assert(NEAR(flat, 58.24));
    // a day whose 09:00 hour carries 10 % of the traffic (the rest spread evenly): a run at
    // 09:00-09:15 sees 2.4 x the day's mean rate, so the day holds 96 / 2.4 = 40 runs' worth
    char prof[1000];
    size_t u = 0;
    u += (size_t)snprintf(prof + u, sizeof prof - u, "[");
    for (int h = 0; h < 24; h++)
        u += (size_t)snprintf(prof + u, sizeof prof - u, "%s%.17g", h ? ", " : "",
                              h == 9 ? 0.1 : 0.9 / 23);
    snprintf(prof + u, sizeof prof - u, "]");
    double peaky = day_revenue_at("09:00", prof, &r9);
    ck_assert_msg(NEAR(r9.day_scale, 40), "scale %g", r9.day_scale);
    // off-peak hours 16:30-00:30: half of hour 16, hours 17-23, half of hour 0: 8 x 0.9/23
    double s_off = 8 * 0.9 / 23;
    ck_assert(NEAR(r9.offpeak_share, s_off));
    ck_assert(NEAR(peaky, 0.728 * 40 * (1 - 0.5 * s_off)));
    // the run's own revenue stays the run's tokens at the day's price mix, beside its own cost:
    // the profile scales the day, not the run (it was the day's revenue x 900 s / 86400 s,
    // 40/96 of the run's)
    ck_assert_msg(NEAR(r9.revenue_usd, 0.728 * (1 - 0.5 * s_off)), "run revenue %.6f USD",
                  r9.revenue_usd);
    ck_assert_msg(NEAR(r9.cost_usd, r9.cost_per_day_usd * 900 / 86400.0), "run cost %.6f USD",
                  r9.cost_usd);
    day_revenue_at("09:00", NULL, &r9);
    ck_assert_msg(NEAR(r9.revenue_usd, 0.728 * 5 / 6), "flat: run revenue %.6f USD",
                  r9.revenue_usd);
    // the same profile read from a run at 00:00 (share 0.9/23 of a flat 1/24): more runs a day
    day_revenue_at("00:00", prof, &r0);
    ck_assert(NEAR(r0.day_scale, 96 * (1.0 / 24) / (0.9 / 23)));
    // bad profiles are refused, naming the key
    rpt_econ_config c;
    rpt_econ_config_default(&c);
    kvf_err err = {0};
    ck_assert_int_eq(rpt_econ_config_set(&c, "day_profile", "[1, 2, 3]", &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "day_profile") != NULL, "%s", err.msg);
    ck_assert_int_eq(rpt_econ_config_set(&c, "day_profile",
                                         "[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]", &err),
                     KVF_EINVAL);
    ck_assert_int_eq(rpt_econ_config_set(&c, "day_profile",
                                         "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,-1]",
                                         &err),
                     KVF_EINVAL);
    ck_assert_int_eq(rpt_econ_config_set(&c, "day_profile", "flat", &err), KVF_EINVAL);
}
END_TEST

// A day profile with no share in the hours a run covers cannot place the run's traffic in a
// day: E (the run's length weighted by 24 x its hours' shares) is 0. Worked by hand: a profile
// of 0 at 00:00 and 1 elsewhere (1/23 each, normalised) over 900 s from 00:55 weighs 300 s x 0
// + 600 s x 24/23; from 00:00 it weighs 0. A run there was accepted and read 0 revenue a day,
// margin null ("no revenue"), though it served traffic: now refused (exit 2) naming the key
// and the hour, while the run that reaches 01:00 goes on with revenue.
START_TEST(test_econ_run_in_hours_without_share) {
    const char *zero0 = "[0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]";
    rpt_econ_config c;
    rpt_econ_config_default(&c);
    set_ok(&c, "day_profile", zero0);
    set_ok(&c, "trace_start_utc", "00:55");
    ck_assert_msg(NEAR(rpt_econ_day_weight_s(&c, 900), 600 * 24.0 / 23), "from 00:55: E %.6f s",
                  rpt_econ_day_weight_s(&c, 900));
    set_ok(&c, "trace_start_utc", "00:00");
    ck_assert_msg(rpt_econ_day_weight_s(&c, 900) == 0, "from 00:00: E %.6f s",
                  rpt_econ_day_weight_s(&c, 900));
    kvt_tmp_make("kvf_econ_zero");
    int rc = kvt_sh("%s run scenarios/quickstart.yaml --set workload.limit_requests=300 --set "
                    "'economics.day_profile=%s' -q --no-report -o %s/a",
                    kvt_bin(), zero0, kvt_tmp);
    ck_assert_msg(rc == 2 && strstr(kvt_err, "economics.day_profile") && strstr(kvt_err, "hour 00"),
                  "a run in an hour of share 0: exit %d: %s", rc, kvt_err);
    char p[300];
    snprintf(p, sizeof p, "%s/a/summary.json", kvt_tmp);
    ck_assert_msg(access(p, F_OK) != 0, "a refused run wrote %s", p);
    // the same 120 s run from 00:59 reaches hour 01: placed by its minute there
    rc = kvt_sh("%s run scenarios/quickstart.yaml --set workload.limit_requests=300 --set "
                "'economics.day_profile=%s' --set economics.trace_start_utc=00:59 -q --no-report "
                "-o %s/b",
                kvt_bin(), zero0, kvt_tmp);
    ck_assert_msg(rc == 0, "from 00:59: exit %d: %s", rc, kvt_err);
    snprintf(p, sizeof p, "%s/b/summary.json", kvt_tmp);
    json_error_t je;
    json_t *sum = json_load_file(p, 0, &je);
    ck_assert_msg(sum, "%s: %s", p, je.text);
    ck_assert_msg(kvt_num(sum, "economics.revenue_per_day_usd") > 0 &&
                      json_is_number(json_object_get(json_object_get(sum, "economics"), "margin")),
                  "from 00:59: revenue %g a day", kvt_num(sum, "economics.revenue_per_day_usd"));
    json_decref(sum);
    kvt_tmp_remove();
}
END_TEST

// Payback from numbers worked by hand: an owned 8-GPU cluster, two classes with their own
// retention on an unbounded store, revenue from output only.
START_TEST(test_econ_payback_hand_worked) {
    rpt_econ_config c;
    rpt_econ_config_default(&c);
    set_ok(&c, "cost_model", "own");
    set_ok(&c, "capex_per_gpu_usd", "30000");
    set_ok(&c, "power_w_per_gpu", "1000");
    set_ok(&c, "pue", "1.25");
    set_ok(&c, "kwh_usd", "0.1");
    set_ok(&c, "ssd_tb_month_usd", "8");
    set_ok(&c, "offpeak", "null");
    set_ok(&c, "prices_per_mtok.input_hit", "0");
    set_ok(&c, "prices_per_mtok.input_miss", "0");
    set_ok(&c, "prices_per_mtok.output", "1");
    rpt_econ_input in;
    rpt_econ_input_init(&in);
    in.simulated_s = 900;
    in.gpu_hours[RPT_POOL_PREFILL] = 1;   // 4 GPUs for a quarter hour
    in.gpu_hours[RPT_POOL_DECODE] = 1;
    in.gpus[RPT_POOL_PREFILL] = 4;
    in.gpus[RPT_POOL_DECODE] = 4;
    in.ssd_unbounded = true;
    in.ssd_tb = 5;   // peak stored during the short run
    in.ssd_write_Bps = 1e9;
    rpt_econ_input_add(&in, &c, "agent", 100, 0, 3e6, 6e6);
    rpt_econ_input_add(&in, &c, "chatbot", 200, 0, 1e6, 4e6);
    in.cls[0].retention_s = 3 * 86400.0;
    in.cls[1].retention_s = 7 * 86400.0;
    rpt_econ_result r;
    kvf_err err = {0};
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_OK);
    // revenue: 10 Mtok output a quarter hour x 96 x 1 USD = 960 USD/day
    ck_assert(NEAR(r.revenue_per_day_usd, 960));
    // store: writes split by miss tokens 3:1 -> agent 0.75 GB/s x 3 d = 194.4 TB, chatbot
    // 0.25 GB/s x 7 d = 151.2 TB; 345.6 TB x 8 USD / (365/12) = 90.8975 USD/day
    ck_assert(NEAR(r.ssd_tb_by_class[0], 194.4) && NEAR(r.ssd_tb_by_class[1], 151.2));
    ck_assert(NEAR(r.ssd_tb_billed, 345.6));
    ck_assert(fabs(r.cost_per_day_by_part[RPT_COST_SSD] - 90.8975) < 1e-3);
    // cash opex: power 1 kW x 1.25 x 0.1 = 0.125 USD per GPU-hour x 192 GPU-hours = 24 USD/day
    ck_assert(fabs(r.cash_opex_per_day_usd - 114.8975) < 1e-3);
    // payback: 8 x 30000 / (960 - 114.8975) = 283.99 days
    ck_assert_msg(fabs(r.payback_days - 283.99) < 0.01, "payback %.4f", r.payback_days);
    // a bounded store is billed at its capacity
    in.ssd_unbounded = false;
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_OK);
    ck_assert(NEAR(r.ssd_tb_billed, 5));
    ck_assert_str_eq(r.ssd_basis, "capacity");
}
END_TEST

// The break-even output price is never negative: when input revenue alone covers the cost it
// is 0 with a note saying so. The hit-rate sensitivity uses the run's own prefill FLOPs.
START_TEST(test_econ_break_even_and_flops_sensitivity) {
    rpt_econ_config c;
    rpt_econ_input in;
    tiny_case(&c, &in);
    set_ok(&c, "prices_per_mtok.input_miss", "1000");
    rpt_econ_result r;
    kvf_err err = {0};
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_OK);
    ck_assert(r.revenue_input_per_day_usd > r.cost_per_day_usd);
    ck_assert(r.break_even_output_usd_per_mtok == 0);
    ck_assert_msg(strstr(r.break_even_note, "input revenue alone") != NULL, "%s",
                  r.break_even_note);
    ck_assert_str_eq(r.hit_basis, "hit_cost_ratio");
    // FLOPs: reuse cut prefill work from 100 to 40 at a 75 % hit rate -> each unit of hit
    // rate saves 0.8 of the work; at h = 0 the prefill pool needs 1 / 0.4 = 2.5 x the GPUs
    in.prefill_flops = 40;
    in.prefill_flops_no_reuse = 100;
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_OK);
    ck_assert_str_eq(r.hit_basis, "prefill FLOPs of this run");
    ck_assert(NEAR(r.hit_saving, 0.8));
    ck_assert(NEAR(r.by_hit_rate.row[0].x, 0));
    ck_assert_msg(NEAR(r.by_hit_rate.row[0].prefill_gpus, 2 * 2.5), "%g",
                  r.by_hit_rate.row[0].prefill_gpus);
    // h = 1: 1 - 0.8 = 0.2 of the no-reuse work, / 0.4 -> half the prefill GPUs
    ck_assert(NEAR(r.by_hit_rate.row[r.by_hit_rate.n - 1].prefill_gpus, 1));
}
END_TEST

START_TEST(test_econ_write_db) {
    mk_tmp();
    char path[512];
    snprintf(path, sizeof path, "%s/e.db", tmpdir);
    rpt_econ_config c;
    rpt_econ_input in;
    tiny_case(&c, &in);
    rpt_econ_result r;
    kvf_err err = {0};
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &r, &err), KVF_OK);
    rpt_db *db;
    ck_assert_int_eq(rpt_db_create(&db, path, &err), KVF_OK);
    ck_assert_int_eq(rpt_db_run_set(db, "k", "v", &err), KVF_OK);
    ck_assert_int_eq(rpt_econ_write_db(db, &r, &err), KVF_OK);
    ck_assert_int_eq(rpt_db_close(db, &err), KVF_OK);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert(NEAR(q_real(h, "SELECT value FROM summary WHERE key='economics.margin'"), r.margin));
    ck_assert_int_eq(q_int(h, "SELECT count(*) FROM econ_sensitivity WHERE kind='hit_rate'"),
                     r.by_hit_rate.n);
    sqlite3_close(h);
    rm_tmp();
}
END_TEST

// ---- a fake results directory -----------------------------------------------------------

// Writes dir/summary.json and dir/results.db the way a run does, with n requests over
// duration_s and every timeseries metric the report charts. vary shifts the figures so two
// runs differ; router names the run's prefill router (a run-table key).
static json_t *fake_run(const char *dir, int n, double duration_s, double vary,
                        const char *router) {
    kvf_err err = {0};
    char path[600];
    snprintf(path, sizeof path, "%s/results.db", dir);
    rpt_db *db;
    ck_assert_msg(rpt_db_create(&db, path, &err) == KVF_OK, "%s", err.msg);
    ck_assert_int_eq(rpt_db_run_set(db, "scenario", "tiny <b>&</b>", &err), KVF_OK);
    ck_assert_int_eq(rpt_db_run_set(db, "router.prefill", router, &err), KVF_OK);
    ck_assert_int_eq(rpt_db_run_set(db, "scenario_yaml",
                                    "name: tiny\n# <script>alert(1)</script>\nseed: 1\n", &err),
                     KVF_OK);
    ck_assert_int_eq(rpt_db_run_set(db, "status", "completed", &err), KVF_OK);
    kvf_rng rng;
    kvf_rng_init(&rng, 7, 1);
    rpt_econ_config c;
    rpt_econ_config_default(&c);
    rpt_econ_input in;
    rpt_econ_input_init(&in);
    double *ttft = kvf_malloc((size_t)n * sizeof *ttft);
    static const char *const cls[] = {"chatbot", "agent", "coding"};
    double hit = 0, miss = 0;
    for (int i = 0; i < n; i++) {
        double t = duration_s * i / n;
        uint32_t inp = 200 + kvf_rng_below(&rng, 2000), cached = kvf_rng_below(&rng, inp);
        ttft[i] = (0.05 + kvf_rng_exp(&rng, 0.3)) * (1 + vary);
        rpt_request_row r = {.id = (uint64_t)i,
                             .cls = cls[i % 3],
                             .session = (uint64_t)i / 5,
                             .arrival_s = t,
                             .input_tokens = inp,
                             .cached_tokens = cached,
                             .output_tokens = 1 + kvf_rng_below(&rng, 300),
                             .vision_instance = -1,
                             .prefill_instance = i % 2,
                             .decode_instance = i % 3,
                             .ttft_s = ttft[i],
                             .tpot_s = 0.02 + kvf_rng_exp(&rng, 0.01),
                             .e2e_s = ttft[i] + 3,
                             .queue_s = 0.01,
                             .status = "completed",
                             .hit_hbm = cached / 2,
                             .hit_dram = cached / 4,
                             .hit_ssd = cached - cached / 2 - cached / 4};
        ck_assert_int_eq(rpt_db_request(db, &r, &err), KVF_OK);
        rpt_econ_input_add(&in, &c, r.cls, t, cached, inp - cached, r.output_tokens);
        hit += cached;
        miss += inp - cached;
    }
    for (double t = 0; t < duration_s; t += 5) {
        double w = 1 + 0.5 * sin(t / 100);
        rpt_db_timeseries(db, t, "cluster", -1, "input_tok_s", 5000 * w, &err);
        rpt_db_timeseries(db, t, "cluster", -1, "output_tok_s", 800 * w, &err);
        rpt_db_timeseries(db, t, "prefill", -1, "queue_len", 3 * w, &err);
        rpt_db_timeseries(db, t, "decode", -1, "queue_len", 1 * w, &err);
        rpt_db_timeseries(db, t, "cluster", -1, "hit_rate", 0.6, &err);
        rpt_db_timeseries(db, t, "cluster", -1, "hit_rate_hbm", 0.3, &err);
        rpt_db_timeseries(db, t, "cluster", -1, "hit_rate_dram", 0.15, &err);
        rpt_db_timeseries(db, t, "cluster", -1, "hit_rate_ssd", 0.15, &err);
        rpt_db_timeseries(db, t, "kv", -1, "kv_store_bytes", 1e9 * t, &err);
        rpt_db_timeseries(db, t, "prefill", -1, "utilization", 0.5 * w, &err);
        rpt_db_timeseries(db, t, "decode", -1, "utilization", 0.7, &err);
        rpt_db_timeseries(db, t, "decode", -1, "running_requests", 40 * w, &err);
        for (int k = 0; k < 3; k++)   // per-instance only: the report averages them
            rpt_db_timeseries(db, t, "decode", k, "kv_used_frac", 0.2 * (k + 1), &err);
    }
    ck_assert_int_eq(rpt_db_close(db, &err), KVF_OK);

    kvf_sort_doubles(ttft, (size_t)n);
    json_t *s = json_object();
    json_object_set_new(s, "scenario", json_string("tiny"));
    json_object_set_new(s, "seed", json_integer(1));
    json_object_set_new(s, "kvfleet_version", json_string(KVF_VERSION));
    json_object_set_new(s, "step_model", json_string("roofline"));
    json_t *o = json_object();
    json_object_set_new(o, "arrived", json_integer(n));
    json_object_set_new(o, "completed", json_integer(n));
    json_object_set_new(o, "rejected", json_integer(0));
    json_object_set_new(s, "requests", o);
    o = json_object();
    json_object_set_new(o, "mean", json_real(ttft[n / 2] * 1100 + 0.123));
    json_object_set_new(o, "p50", json_real(kvf_percentile_sorted(ttft, (size_t)n, 50) * 1000));
    json_object_set_new(o, "p90", json_real(kvf_percentile_sorted(ttft, (size_t)n, 90) * 1000));
    json_object_set_new(o, "p99", json_real(kvf_percentile_sorted(ttft, (size_t)n, 99) * 1000));
    json_object_set_new(s, "ttft_ms", o);
    o = json_object();
    json_object_set_new(o, "mean", json_real(31.41592653589793 * (1 + vary)));
    json_object_set_new(o, "p90", json_real(45.6789 * (1 + vary)));
    json_object_set_new(s, "tpot_ms", o);
    o = json_object();
    json_object_set_new(o, "input_tok_s", json_real(5012.5 * (1 - vary)));
    json_object_set_new(o, "output_tok_s", json_real(801.25));
    json_object_set_new(s, "throughput", o);
    o = json_object();
    json_object_set_new(o, "hit_rate", json_real(hit / (hit + miss)));
    json_t *bt = json_object();
    json_object_set_new(bt, "hbm", json_real(0.5));
    json_object_set_new(bt, "dram", json_real(0.25));
    json_object_set_new(bt, "ssd", json_real(0.25));
    json_object_set_new(o, "by_tier", bt);
    json_object_set_new(s, "cache", o);
    o = json_object();
    json_object_set_new(o, "prefill", json_integer(2));
    json_object_set_new(o, "decode", json_integer(3));
    json_object_set_new(s, "gpus", o);
    json_object_set_new(s, "gpu_hours", json_real(5 * duration_s / 3600));
    json_object_set_new(s, "saturation",
                        json_pack("{s:s, s:f}", "state", "stable", "drain_s", 1.5));
    in.simulated_s = duration_s;
    in.gpu_hours[RPT_POOL_PREFILL] = 2 * duration_s / 3600;
    in.gpu_hours[RPT_POOL_DECODE] = 3 * duration_s / 3600;
    in.gpus[RPT_POOL_PREFILL] = 2;
    in.gpus[RPT_POOL_DECODE] = 3;
    in.utilization[RPT_POOL_PREFILL] = 0.5;
    in.utilization[RPT_POOL_DECODE] = 0.7;
    in.ssd_tb = 1.5;
    rpt_econ_result er;
    ck_assert_int_eq(rpt_econ_compute(&c, &in, &er, &err), KVF_OK);
    json_object_set_new(s, "economics", rpt_econ_to_json(&c, &er));
    snprintf(path, sizeof path, "%s/summary.json", dir);
    ck_assert_int_eq(json_dump_file(s, path, JSON_INDENT(2) | JSON_REAL_PRECISION(17)), 0);
    free(ttft);
    return s;
}

static bool have_gnuplot(void) {
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

// Every data-key/data-value cell of the page equals the number at that key in summary.json.
static int check_cells_equal_summary(const char *html, json_t *sum) {
    int n = 0;
    for (const char *p = html; (p = strstr(p, "data-key=\"")); n++) {
        p += 10;
        const char *q = strchr(p, '"');
        ck_assert_ptr_nonnull(q);
        char key[200];
        snprintf(key, sizeof key, "%.*s", (int)(q - p), p);
        const char *dv = strstr(q, "data-value=\"");
        ck_assert_ptr_nonnull(dv);
        dv += 12;
        json_t *v = sum;
        char part[200], *save = NULL;
        snprintf(part, sizeof part, "%s", key);
        for (char *tok = strtok_r(part, ".", &save); tok && v; tok = strtok_r(NULL, ".", &save))
            v = json_object_get(v, tok);
        ck_assert_msg(v != NULL, "cell %s not in summary.json", key);
        if (!strncmp(dv, "null", 4)) {
            ck_assert_msg(json_is_null(v), "%s: page null, json not", key);
        } else {
            ck_assert_msg(json_is_number(v), "%s: not a number in summary.json", key);
            double x = strtod(dv, NULL);
            ck_assert_msg(x == json_number_value(v), "%s: page %.17g, summary %.17g", key, x,
                          json_number_value(v));
        }
    }
    return n;
}

// A validation's noise line: a probe's own scatter where the validation reports it; one
// written before it was reported (no probe_cpu_spread_pct) leaves it out, not "nan".
START_TEST(test_report_validation_noise_line) {
    for (int with = 0; with < 2; with++) {
        mk_tmp();
        json_t *sum = fake_run(tmpdir, 300, 600, 0, "cache_aware");
        json_decref(sum);
        char vpath[600];
        snprintf(vpath, sizeof vpath, "%s/validation.json", tmpdir);
        FILE *f = fopen(vpath, "w");
        fprintf(f,
                "{\"trace\": \"t.jsonl\", \"requests\": 40, \"verdict\": \"pass\", "
                "\"serve\": {\"wall_s\": 47.1, \"utilisation\": 0.92, \"hit_rate\": 0}, "
                "\"noise\": {\"probe_cpu_band_pct\": 1.53, \"probe_wall_band_pct\": 1.54, "
                "%s\"drift_wall_pct\": 0.96, \"steal_pct\": 0, \"wakeup_latency_ms_p90\": 0}}",
                with ? "\"probe_cpu_spread_pct\": 4.57, " : "");
        fclose(f);
        setenv("KVF_NO_GNUPLOT", "1", 1);
        kvf_err err = {0};
        ck_assert_msg(rpt_report_write(tmpdir, false, true, &err) == KVF_OK, "%s", err.msg);
        unsetenv("KVF_NO_GNUPLOT");
        char path[600];
        snprintf(path, sizeof path, "%s/report.md", tmpdir);
        char *md = kvt_slurp(path);
        ck_assert_ptr_nonnull(md);
        const char *line = strstr(md, "Noise: the machine's level moved +-1.53 %");
        ck_assert_msg(line, "no noise line");
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[600];
        snprintf(buf, sizeof buf, "%.*s", (int)KVF_MIN(len, sizeof buf - 1), line);
        ck_assert_msg(!strstr(buf, "nan"), "%s", buf);
        ck_assert_msg(!strstr(buf, "a probe's own scatter +-4.57 %") == !with, "%s", buf);
        free(md);
    }
}
END_TEST

START_TEST(test_report_html_and_md) {
    mk_tmp();
    json_t *sum = fake_run(tmpdir, 3000, 1800, 0, "cache_aware");
    char vpath[600];
    snprintf(vpath, sizeof vpath, "%s/validation.json", tmpdir);
    FILE *f = fopen(vpath, "w");
    fputs("{\"trace\": \"t.jsonl\", \"requests\": 50, \"ttft_ms\": {\"p50\": {\"real\": 100, "
          "\"sim\": 104, \"error_pct\": 4}, \"p90\": {\"real\": 200, \"sim\": 190, "
          "\"error_pct\": -5}}, \"per_request_corr\": {\"ttft\": 0.93, \"e2e\": 0.97}}",
          f);
    fclose(f);
    unsetenv("KVF_NO_GNUPLOT");
    kvf_err err = {0};
    ck_assert_msg(rpt_report_write(tmpdir, true, true, &err) == KVF_OK, "%s", err.msg);
    char path[600];
    snprintf(path, sizeof path, "%s/report.html", tmpdir);
    char *html = kvt_slurp(path);
    snprintf(path, sizeof path, "%s/report.md", tmpdir);
    char *md = kvt_slurp(path);

    // sections and tables
    const char *ids[] = {
        "id=\"run-table\"",        "id=\"answer\"",           "id=\"economics-table\"",
        "id=\"cost-parts-table\"", "id=\"sens-hit-table\"",   "id=\"sens-util-table\"",
        "id=\"sens-price-table\"", "id=\"validation-table\"", "id=\"all-table\""};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        ck_assert_msg(strstr(html, ids[i]) != NULL, "missing %s", ids[i]);
    // headline and every keyed cell equal summary.json
    int cells = check_cells_equal_summary(html, sum);
    ck_assert_msg(cells > 40, "only %d keyed cells", cells);
    ck_assert(strstr(html, "data-key=\"ttft_ms.p90\"") != NULL);
    ck_assert(strstr(html, "data-key=\"economics.margin\"") != NULL);
    ck_assert(strstr(html, "data-key=\"economics.payback_days\"") != NULL);
    // element ids are unique on the page (several inline SVGs)
    {
        json_t *ids_seen = json_object();
        for (const char *q = html; (q = strstr(q, " id=")); q += 4) {
            char quote = q[4];
            const char *e = strchr(q + 5, quote);
            ck_assert_ptr_nonnull(e);
            char id[160];
            snprintf(id, sizeof id, "%.*s", (int)(e - q - 5), q + 5);
            ck_assert_msg(!json_object_get(ids_seen, id), "duplicate id '%s'", id);
            json_object_set_new(ids_seen, id, json_true());
        }
        json_decref(ids_seen);
    }
    // escaped user text
    ck_assert(strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt;") != NULL);
    ck_assert(strstr(html, "<script>") == NULL);
    ck_assert(strstr(html, "tiny &lt;b&gt;&amp;&lt;/b&gt;") != NULL);
    // charts: every chart has its data file; with gnuplot each is an inline SVG
    const char *charts[] = {"ttft_cdf",       "tpot_cdf",       "throughput",    "queue_len",
                            "running",        "hit_rate",       "kv_store",      "kv_used",
                            "utilization",    "cost_breakdown", "margin_vs_hit", "margin_vs_util",
                            "margin_vs_price"};
    size_t nch = sizeof charts / sizeof charts[0];
    for (size_t i = 0; i < nch; i++) {
        char id[80];
        snprintf(id, sizeof id, "id=\"chart-%s\"", charts[i]);
        ck_assert_msg(strstr(html, id) != NULL, "no chart %s", charts[i]);
        snprintf(path, sizeof path, "%s/report_files/%s.dat", tmpdir, charts[i]);
        ck_assert_msg(access(path, R_OK) == 0, "no %s", path);
    }
    // with gnuplot each chart is drawn; without it the page says so (either way a check runs)
    if (have_gnuplot()) {
        ck_assert_int_eq(kvt_count(html, "<svg"), (int)nch);
        ck_assert_int_eq(kvt_count(md, "](report_files/"), (int)nch);
        ck_assert(strstr(html, "Charts not drawn") == NULL);
    } else {
        fprintf(stderr, "test_report_html_and_md: no gnuplot: the drawn charts are not checked\n");
        ck_assert_msg(strstr(html, "Charts not drawn") != NULL, "no gnuplot, and no note why");
    }
    // the TTFT CDF: sorted, ends at 1, 800 quantiles of 3000 requests
    snprintf(path, sizeof path, "%s/report_files/ttft_cdf.dat", tmpdir);
    char *dat = kvt_slurp(path);
    char *line = strchr(dat, '\n') + 1;
    double prev = -1, y = 0;
    int pts = 0;
    while (*line && *line != '\n') {
        double x;
        ck_assert_int_eq(sscanf(line, "%lf %lf", &x, &y), 2);
        ck_assert(x >= prev);
        prev = x;
        pts++;
        line = strchr(line, '\n') + 1;
    }
    ck_assert_int_eq(pts, 800);
    ck_assert(NEAR(y, 100.0));   // percent of requests
    free(dat);
    // markdown: the same headline figure, in words and its unit
    char want[96], ms[32];
    snprintf(want, sizeof want, "| TTFT p90 | %s |",
             rpt_fmt_duration(kvt_num(sum, "ttft_ms.p90") / 1000, ms, sizeof ms));
    ck_assert_msg(strstr(md, want) != NULL, "no '%s' in report.md", want);
    ck_assert(strstr(md, "## Economics") != NULL);
    ck_assert(strstr(md, "## Validation against the real engine") != NULL);
    free(html);
    free(md);

    // without gnuplot: the page says so and keeps the data
    setenv("KVF_NO_GNUPLOT", "1", 1);
    ck_assert_int_eq(rpt_report_write(tmpdir, true, false, &err), KVF_OK);
    unsetenv("KVF_NO_GNUPLOT");
    snprintf(path, sizeof path, "%s/report.html", tmpdir);
    html = kvt_slurp(path);
    ck_assert_int_eq(kvt_count(html, "<svg"), 0);
    ck_assert(strstr(html, "Charts not drawn") != NULL);
    ck_assert(strstr(html, "report_files/ttft_cdf.dat") != NULL);
    snprintf(path, sizeof path, "%s/report_files/charts.gp", tmpdir);
    ck_assert_int_eq(access(path, R_OK), 0);
    free(html);
    // gnuplot not on PATH: same, with the reason
    const char *old_path = getenv("PATH");
    char *saved = kvf_strdup(old_path ? old_path : "/usr/bin:/bin");
    setenv("PATH", "/nonexistent-kvfleet-bin", 1);
    kvf_status st = rpt_report_write(tmpdir, true, false, &err);
    setenv("PATH", saved, 1);
    free(saved);
    ck_assert_int_eq(st, KVF_OK);
    snprintf(path, sizeof path, "%s/report.html", tmpdir);
    html = kvt_slurp(path);
    ck_assert(strstr(html, "gnuplot is not installed") != NULL);
    ck_assert_int_eq(kvt_count(html, "<svg"), 0);
    free(html);
    json_decref(sum);
    rm_tmp();
}
END_TEST

// The text of the element holding data-key="key" inside the answer block, or "".
static void answer_value(const char *html, const char *key, char *out, size_t n) {
    out[0] = 0;
    const char *a = strstr(html, "id=\"answer\"");
    const char *end = a ? strstr(a, "</section>") : NULL;
    char pat[160];
    snprintf(pat, sizeof pat, "data-key=\"%s\"", key);
    const char *c = a ? strstr(a, pat) : NULL;
    if (!c || c > end) return;
    c = strchr(c, '>');
    const char *e = c ? strchr(c, '<') : NULL;
    if (!e) return;
    snprintf(out, n, "%.*s", (int)(e - c - 1), c + 1);
}

// The page opens with the answer, in one unit system, and names the final directory.
START_TEST(test_report_answer_first) {
    mk_tmp();
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/ref.tmp.28517", tmpdir);
    kvf_err err = {0};
    ck_assert_int_eq(kvf_mkdirs(dir, &err), KVF_OK);
    json_t *sum = fake_run(dir, 500, 900, 0, "cache_aware");
    ck_assert_msg(rpt_report_write(dir, true, true, &err) == KVF_OK, "%s", err.msg);
    snprintf(path, sizeof path, "%s/report.html", dir);
    char *html = kvt_slurp(path);
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = kvt_slurp(path);
    char want[700];
    snprintf(want, sizeof want, "Results directory: `%s/ref`", tmpdir);
    ck_assert_msg(strstr(md, want), "report.md does not name %s/ref", tmpdir);
    ck_assert_msg(!strstr(md, ".tmp.28517") && !strstr(html, ".tmp.28517"),
                  "a page names the temporary directory");
    // order: answer, charts, economics, inputs, every figure
    const char *ans = strstr(html, "id=\"answer\""), *ch = strstr(html, "id=\"charts\""),
               *ec = strstr(html, "id=\"economics\""), *in = strstr(html, "id=\"scenario\""),
               *all = strstr(html, "id=\"all\"");
    ck_assert_msg(ans && ch && ec && in && all && ans < ch && ch < ec && ec < in && in < all,
                  "sections out of order");
    ck_assert_msg(!strstr(html, "<table") || strstr(html, "<table") > ch,
                  "a table before the charts");
    // the figures of the answer, each formatted in its unit
    char got[64], exp[64];
    answer_value(html, "economics.margin", got, sizeof got);
    rpt_fmt_pct(kvt_num(sum, "economics.margin"), exp, sizeof exp);
    ck_assert_msg(!strcmp(got, exp) && strchr(got, '%'), "margin '%s', want '%s'", got, exp);
    answer_value(html, "economics.cost_per_mtok_usd.input", got, sizeof got);
    ck_assert_msg(got[0] == '$' && fabs(strtod(got + 1, NULL) -
                                        kvt_num(sum, "economics.cost_per_mtok_usd.input")) <
                                       0.006 * kvt_num(sum, "economics.cost_per_mtok_usd.input"),
                  "input cost '%s', summary %g", got,
                  kvt_num(sum, "economics.cost_per_mtok_usd.input"));
    answer_value(html, "gpus.prefill", got, sizeof got);
    ck_assert_str_eq(got, "2");
    answer_value(html, "gpus.decode", got, sizeof got);
    ck_assert_str_eq(got, "3");
    ck_assert(strstr(html, "id=\"hl-saturation\" data-state=\"stable\""));
    ck_assert(strstr(md, "**Stable**"));
    // no fraction shown as a bare fraction: the margin row of every figure is in percent
    snprintf(want, sizeof want, "| margin | %s |", exp);
    ck_assert_msg(strstr(md, want), "no '%s' in report.md", want);
    free(html);
    free(md);

    // colocated: one pool, "colocated N"
    json_object_set_new(sum, "mode", json_string("colocated"));
    json_object_set_new(sum, "gpus",
                        json_pack("{s:i, s:i, s:i}", "vision", 0, "prefill", 6, "decode", 0));
    snprintf(path, sizeof path, "%s/summary.json", dir);
    ck_assert_int_eq(json_dump_file(sum, path, JSON_REAL_PRECISION(17)), 0);
    ck_assert_int_eq(rpt_report_write_as(dir, "final/name", true, true, &err), KVF_OK);
    snprintf(path, sizeof path, "%s/report.html", dir);
    html = kvt_slurp(path);
    const char *g = strstr(html, "id=\"hl-gpus\"");
    ck_assert(g);
    ck_assert_msg(strstr(g, "colocated <span class=\"v\" data-key=\"gpus.prefill\" "
                            "data-value=\"6\">6</span>"),
                  "%.300s", g);
    ck_assert_msg(!strstr(g, "decode <span") ||
                      strstr(g, "decode <span") > strstr(g, "</div></div>"),
                  "a colocated run shows a decode pool");
    ck_assert(strstr(html, "data-dir=\"final/name\""));
    ck_assert(!strstr(html, "id=\"hl-status\""));
    free(html);
    // an interrupted run says so first
    json_object_set_new(sum, "status", json_string("interrupted"));
    snprintf(path, sizeof path, "%s/summary.json", dir);
    ck_assert_int_eq(json_dump_file(sum, path, JSON_REAL_PRECISION(17)), 0);
    ck_assert_int_eq(rpt_report_write(dir, true, false, &err), KVF_OK);
    snprintf(path, sizeof path, "%s/report.html", dir);
    html = kvt_slurp(path);
    const char *st = strstr(html, "id=\"hl-status\" data-status=\"interrupted\"");
    ck_assert_msg(st && st < strstr(html, "id=\"hl-saturation\""), "no unfinished verdict first");
    free(html);
    json_decref(sum);
    rm_tmp();
}
END_TEST

START_TEST(test_report_final_dir_names) {
    char out[256];
    rpt_report_final_dir("out/ref.tmp.28517", out, sizeof out);
    ck_assert_str_eq(out, "out/ref");
    rpt_report_final_dir("out/ref.tmp.28517/", out, sizeof out);
    ck_assert_str_eq(out, "out/ref");
    rpt_report_final_dir("out/ref", out, sizeof out);
    ck_assert_str_eq(out, "out/ref");
    rpt_report_final_dir("out/a.tmp.x1", out, sizeof out);   // not a pid
    ck_assert_str_eq(out, "out/a.tmp.x1");
    rpt_report_final_dir("out/x.tmp.1/sim.tmp.22", out, sizeof out);
    ck_assert_str_eq(out, "out/x.tmp.1/sim");
}
END_TEST

START_TEST(test_report_bad_dirs) {
    mk_tmp();
    kvf_err err = {0};
    ck_assert_int_eq(rpt_report_write(tmpdir, true, true, &err), KVF_ENOENT);
    ck_assert_msg(strstr(err.msg, "summary.json") != NULL, "%s", err.msg);
    char path[600];
    snprintf(path, sizeof path, "%s/summary.json", tmpdir);
    FILE *f = fopen(path, "w");
    fputs("{\"scenario\": \"x\",\n \"ttft_ms\": {\"p90\": }\n}", f);
    fclose(f);
    ck_assert_int_eq(rpt_report_write(tmpdir, true, true, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "summary.json:2") != NULL, "%s", err.msg);
    // summary only, no database: the report is still written and says so
    f = fopen(path, "w");
    fputs("{\"scenario\": \"x\", \"ttft_ms\": {\"p90\": 12.5}}", f);
    fclose(f);
    ck_assert_int_eq(rpt_report_write(tmpdir, true, true, &err), KVF_OK);
    snprintf(path, sizeof path, "%s/report.html", tmpdir);
    char *html = kvt_slurp(path);
    ck_assert(strstr(html, "No results.db") != NULL);
    ck_assert(strstr(html, "data-value=\"12.5\"") != NULL);
    free(html);
    rm_tmp();
}
END_TEST

START_TEST(test_compare_json_and_table) {
    mk_tmp();
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/a", tmpdir);
    snprintf(b, sizeof b, "%s/b", tmpdir);
    kvf_err err = {0};
    ck_assert_int_eq(kvf_mkdirs(a, &err), KVF_OK);
    ck_assert_int_eq(kvf_mkdirs(b, &err), KVF_OK);
    json_t *sa = fake_run(a, 300, 600, 0, "round_robin");
    json_t *sb = fake_run(b, 300, 600, 0.2, "cache_aware");
    const char *dirs[] = {a, b};
    char out[600];
    snprintf(out, sizeof out, "%s/cmp.json", tmpdir);
    FILE *f = fopen(out, "w");
    ck_assert_int_eq(rpt_compare_write(f, dirs, 2, true, false, &err), KVF_OK);
    fclose(f);
    json_error_t je;
    json_t *pts = json_load_file(out, 0, &je);
    ck_assert_msg(json_is_array(pts), "%s", je.text);
    ck_assert_int_eq(json_array_size(pts), 2);
    json_t *p1 = json_array_get(pts, 1);
    double v0 = json_number_value(json_object_get(json_object_get(sa, "tpot_ms"), "p90"));
    double v1 = json_number_value(json_object_get(json_object_get(sb, "tpot_ms"), "p90"));
    ck_assert(NEAR(json_number_value(json_object_get(json_object_get(p1, "tpot_ms"), "p90")), v1));
    double d = json_number_value(json_object_get(json_object_get(p1, "diff_pct"), "tpot_ms.p90"));
    ck_assert_msg(fabs(d - 20.0) < 1e-9 && fabs(d - 100 * (v1 - v0) / v0) < 1e-9, "diff %g", d);
    json_t *var = json_object_get(p1, "varied");
    ck_assert_str_eq(json_string_value(json_object_get(var, "router.prefill")), "cache_aware");
    ck_assert_ptr_null(json_object_get(var, "scenario"));   // same in both runs
    ck_assert_ptr_nonnull(json_object_get(p1, "economics"));
    json_decref(pts);
    // text table
    f = fopen(out, "w");
    ck_assert_int_eq(rpt_compare_write(f, dirs, 2, false, false, &err), KVF_OK);
    fclose(f);
    char *txt = kvt_slurp(out);
    ck_assert(strstr(txt, "TPOT p90") != NULL);
    ck_assert(strstr(txt, "(+20.0%)") != NULL);
    ck_assert(strstr(txt, "router.prefill") != NULL);
    ck_assert(strstr(txt, "round_robin") != NULL);
    free(txt);
    // against the second run: the first's differences are relative to it, shares in points
    f = fopen(out, "w");
    ck_assert_int_eq(rpt_compare_write_base(f, dirs, 2, true, false, 1, &err), KVF_OK);
    fclose(f);
    pts = json_load_file(out, 0, &je);
    ck_assert(json_is_array(pts));
    d = json_number_value(
        json_object_get(json_object_get(json_array_get(pts, 0), "diff_pct"), "tpot_ms.p90"));
    ck_assert_msg(fabs(d - 100 * (v0 - v1) / v1) < 1e-9, "diff against run 2: %g", d);
    json_decref(pts);
    f = fopen(out, "w");
    ck_assert_int_eq(rpt_compare_write_base(f, dirs, 2, false, false, 1, &err), KVF_OK);
    fclose(f);
    txt = kvt_slurp(out);
    ck_assert_msg(strstr(txt, "against run 2"), "%s", txt);
    ck_assert_msg(strstr(txt, " pt)"), "no share difference in points: %s", txt);
    free(txt);
    // a directory without summary.json
    const char *bad[] = {a, tmpdir};
    f = fopen(out, "w");
    ck_assert_int_eq(rpt_compare_write(f, bad, 2, false, false, &err), KVF_ENOENT);
    fclose(f);
    json_decref(sa);
    json_decref(sb);
    rm_tmp();
}
END_TEST

// The command lines of the built kvfleet binary (CTest builds it first and names it in KVF_BIN):
// a missing binary fails the test, it does not pass unrun.
START_TEST(test_cli_report_and_compare) {
    const char *bin = kvt_bin();
    ck_assert_msg(access(bin, X_OK) == 0, "%s is not an executable kvfleet (KVF_BIN)", bin);
    mk_tmp();
    json_t *s = fake_run(tmpdir, 200, 300, 0, "p2c");
    json_decref(s);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "KVF_NO_GNUPLOT=1 '%s' report '%s' --format md >/dev/null", bin,
             tmpdir);
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/report.md", tmpdir);
    ck_assert_int_eq(access(path, R_OK), 0);
    snprintf(cmd, sizeof cmd, "'%s' report '%s' --format pdf 2>/dev/null", bin, tmpdir);
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof cmd, "'%s' report '%s/nothing' 2>/dev/null", bin, tmpdir);
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof cmd, "'%s' compare '%s' '%s' --json >/dev/null", bin, tmpdir, tmpdir);
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 0);
    snprintf(cmd, sizeof cmd, "'%s' compare 2>/dev/null", bin);
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 2);
    rm_tmp();
}
END_TEST

// Runs fn with stderr going to a file (not a terminal); returns what it printed.
static char *stderr_of(void (*fn)(void)) {
    char path[300];
    snprintf(path, sizeof path, "/tmp/kvf_progress_XXXXXX");
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    char *txt = kvt_slurp(path);
    unlink(path);
    return txt;
}

static void sleep_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

// Off a terminal with the default interval: nothing within the first seconds.
static void progress_short(void) {
    unsetenv("KVF_PROGRESS_S");
    rpt_progress p;
    rpt_progress_init(&p, "sweep", 100);
    ck_assert(!p.tty && p.enabled && p.interval_s == 10);
    for (int i = 0; i <= 100; i++)
        rpt_progress_update(&p, i);
    rpt_progress_done(&p);
    ck_assert(!p.drawn);
    rpt_progress_done(NULL);
    setenv("KVF_PROGRESS_S", "0", 1);   // 0: no lines at all
    rpt_progress_init(&p, "sweep", 100);
    ck_assert(!p.enabled);
    unsetenv("KVF_PROGRESS_S");
}

// A multi-day run: 3 simulated days, far more arrivals than a rate x duration guess of 120.
static void progress_days(void) {
    rpt_progress p;
    rpt_progress_init_sim(&p, "run", 3 * 86400.0, 120);
    rpt_progress_set_interval(&p, 0.002);
    for (int i = 1; i <= 30; i++) {
        rpt_progress_state st = {.sim_s = 86400.0 * 3 * i / 40,
                                 .arrived = 400.0 * i,
                                 .finished = 390.0 * i,
                                 .events = 1e5 * i};
        rpt_progress_sim(&p, &st);
        sleep_ms(3);
    }
    rpt_progress_state end = {
        .sim_s = 86400.0 * 3, .arrived = 16000, .finished = 16000, .events = 4e6};
    rpt_progress_sim_done(&p, &end);
}

// A trace of known size and unknown span: by arrivals.
static void progress_trace(void) {
    rpt_progress p;
    rpt_progress_init_sim(&p, "validate", 0, 1000);
    rpt_progress_set_interval(&p, 0.002);
    for (int i = 1; i <= 10; i++) {
        rpt_progress_state st = {
            .sim_s = 6.0 * i, .arrived = 50.0 * i, .finished = 40.0 * i, .events = 1e4 * i};
        rpt_progress_sim(&p, &st);
        sleep_ms(3);
    }
    rpt_progress_done(&p);
}

START_TEST(test_progress_lines_off_terminal) {
    char *out = stderr_of(progress_short);
    ck_assert_msg(out[0] == '\0', "a short command printed: %s", out);
    free(out);
    out = stderr_of(progress_days);
    int lines = kvt_count(out, "\n");
    ck_assert_msg(lines >= 5, "%d lines: %s", lines, out);
    ck_assert_msg(!strchr(out, '\r') && !strstr(out, "\033"), "bar control codes in a log");
    // by simulated time: every percentage is sim_s / span, below 100 % until the end
    double prev = -1;
    for (const char *l = out; *l; l = strchr(l, '\n') + 1) {
        ck_assert_msg(!strncmp(l, "run: ", 5), "line '%.60s'", l);
        double pct = strtod(l + 5, NULL);
        bool last = !strchr(l, '\n') || !strchr(l, '\n')[1];
        ck_assert_msg(pct >= prev && pct <= (last ? 100.0 : 75.0) + 1e-9,
                      "percentage %.1f after %.1f", pct, prev);
        if (last) ck_assert_msg(pct == 100.0 && strstr(l, "16000 arrivals"), "last line '%s'", l);
        prev = pct;
        ck_assert_msg(strstr(l, "simulated ") && strstr(l, " of 3.00 d") && strstr(l, "events/s") &&
                          strstr(l, "elapsed "),
                      "line '%.120s'", l);
        ck_assert_msg(!strstr(l, "/120") && !strstr(l, "of 120"), "arrivals against 120: %.120s",
                      l);
        if (!strchr(l, '\n')) break;
    }
    ck_assert_msg(prev == 100, "last percentage %.1f", prev);
    free(out);
    out = stderr_of(progress_trace);
    ck_assert_msg(strstr(out, "validate: ") && strstr(out, " of 1000 arrivals ("), "%s", out);
    ck_assert_msg(!strstr(out, "100.0%"), "%s", out);
    free(out);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("reports");
    TCase *t = tcase_create("db");
    tcase_add_test(t, test_db_rows_and_nulls);
    tcase_add_test(t, test_db_request_rows_any_order);
    tcase_add_test(t, test_db_background_same_rows);
    tcase_add_test(t, test_db_bad_path_names_it);
    tcase_add_test(t, test_db_flush_makes_rows_visible);
    suite_add_tcase(s, t);
    t = tcase_create("econ");
    tcase_add_test(t, test_econ_hand_calculation_rent);
    tcase_add_test(t, test_econ_hand_calculation_pools);
    tcase_add_test(t, test_econ_hand_calculation_own);
    tcase_add_test(t, test_econ_class_prices_and_free_share);
    tcase_add_test(t, test_econ_offpeak_window);
    tcase_add_test(t, test_econ_config_bad_keys);
    tcase_add_test(t, test_econ_margin_monotone_in_hit_rate);
    tcase_add_test(t, test_econ_utilization_and_price_tables);
    tcase_add_test(t, test_econ_day_placement);
    tcase_add_test(t, test_econ_run_in_hours_without_share);
    tcase_add_test(t, test_econ_payback_hand_worked);
    tcase_add_test(t, test_econ_break_even_and_flops_sensitivity);
    tcase_add_test(t, test_econ_write_db);
    suite_add_tcase(s, t);
    t = tcase_create("report");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_report_html_and_md);
    tcase_add_test(t, test_report_validation_noise_line);
    tcase_add_test(t, test_report_bad_dirs);
    tcase_add_test(t, test_report_answer_first);
    tcase_add_test(t, test_report_final_dir_names);
    tcase_add_test(t, test_compare_json_and_table);
    tcase_add_test(t, test_cli_report_and_compare);
    tcase_add_test(t, test_progress_lines_off_terminal);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
