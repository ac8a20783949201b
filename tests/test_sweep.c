// tests/test_sweep.c -- `kvfleet sweep`: every point equals a plain run of the same
// configuration (made here through sim_run, not through the sweep), whether the sweep ran in
// one process, in two forked workers (-j 2) or on two MPI ranks; sweep.db and sweep.csv hold
// one row per point; an interrupted sweep resumes without rerunning finished points; a
// malformed --vary or an unknown key exits 2 naming it.
//
// Points are tiny (quickstart's first 300 requests, ~0.1 s a run) so the suite stays short.
// The MPI case runs as a CTest test of its own (test_sweep_mpi), skipped (exit 77, with the
// reason) without an MPI build or mpirun.
#include <check.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "sim.h"

static void setup(void) {
    kvt_tmp_make("kvf_sweep");
}
static void teardown(void) {
    kvt_tmp_remove();
}

#define BASE "scenarios/quickstart.yaml --set workload.limit_requests=300"
#define VARY "--vary cluster.prefill.instances=1,3 --vary cluster.decode.instances=1,2"
static const int k_prefill[] = {1, 3}, k_decode[] = {1, 2};
enum { NPOINTS = 4 };

// Summary as it appears in a summary.json file (10 significant digits), without "sim".
static json_t *as_written(json_t *s) {
    char *t = json_dumps(s, JSON_REAL_PRECISION(10));
    json_error_t je;
    json_t *r = json_loads(t, 0, &je);
    free(t);
    json_object_del(r, "sim");
    return r;
}

// Plain runs of the four points, in the sweep's row-major order (decode varies fastest).
static json_t *plain[NPOINTS];

static json_t *plain_run(int p, int d) {
    sim_config *c = malloc(sizeof *c);
    kvf_err err = {0};
    char path[1024], a[128];
    snprintf(path, sizeof path, "%s/scenarios/quickstart.yaml", kvt_src());
    sim_config_default(c);
    ck_assert_msg(sim_config_load(c, path, &err) == KVF_OK, "%s", err.msg);
    ck_assert(sim_config_set(c, "workload.limit_requests=300", &err) == KVF_OK);
    snprintf(a, sizeof a, "cluster.prefill.instances=%d", p);
    ck_assert(sim_config_set(c, a, &err) == KVF_OK);
    snprintf(a, sizeof a, "cluster.decode.instances=%d", d);
    ck_assert(sim_config_set(c, a, &err) == KVF_OK);
    ck_assert_msg(sim_config_validate(c, &err) == KVF_OK, "%s", err.msg);
    void *sj = NULL;
    sim_run_opts o = {.quiet = true};
    ck_assert_msg(sim_run(c, &o, &sj, &err) == KVF_OK, "%s", err.msg);
    free(c);
    json_t *r = as_written(sj);
    json_decref(sj);
    return r;
}

static void ensure_plain(void) {
    for (int i = 0; i < NPOINTS; i++)
        if (!plain[i]) plain[i] = plain_run(k_prefill[i / 2], k_decode[i % 2]);
}

// Checks a `sweep --json` output against the plain runs: same points, same order, same
// figures (all but "sim"), varied keys as given.
static void check_json_points(const char *what) {
    ensure_plain();
    json_error_t je;
    json_t *arr = json_loads(kvt_out, 0, &je);
    ck_assert_msg(json_is_array(arr), "%s: stdout is not a JSON list: %s", what, je.text);
    ck_assert_int_eq(json_array_size(arr), NPOINTS);
    for (int i = 0; i < NPOINTS; i++) {
        json_t *pt = json_deep_copy(json_array_get(arr, i));
        json_t *v = json_object_get(pt, "vary");
        ck_assert_int_eq(json_integer_value(json_object_get(v, "cluster.prefill.instances")),
                         k_prefill[i / 2]);
        ck_assert_int_eq(json_integer_value(json_object_get(v, "cluster.decode.instances")),
                         k_decode[i % 2]);
        // the configuration keys that differ between points are exactly the varied ones
        json_t *cd = json_object_get(pt, "config_differs");
        ck_assert_msg(json_object_size(cd) == 2 &&
                          json_integer_value(json_object_get(cd, "cluster.prefill.instances")) ==
                              k_prefill[i / 2] &&
                          json_integer_value(json_object_get(cd, "cluster.decode.instances")) ==
                              k_decode[i % 2],
                      "%s: point %d config_differs %s", what, i, json_dumps(cd, JSON_COMPACT));
        ck_assert_msg(json_is_object(json_object_get(pt, "ttft_ms")), "%s: point %d lacks ttft_ms",
                      what, i);
        static const char *extra[] = {"sim", "vary",         "idx",
                                      "dir", "point_status", "config_differs"};
        for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++)
            json_object_del(pt, extra[k]);
        if (!json_equal(pt, plain[i])) {
            char *a = json_dumps(pt, JSON_SORT_KEYS | JSON_COMPACT);
            char *b = json_dumps(plain[i], JSON_SORT_KEYS | JSON_COMPACT);
            ck_abort_msg("%s: point %d differs from a plain run:\nsweep %.400s\nplain %.400s", what,
                         i, a, b);
        }
        json_decref(pt);
    }
    json_decref(arr);
}

START_TEST(test_sweep_points_equal_plain_runs) {
    ck_assert_msg(kvt_sh("%s sweep " BASE " " VARY " -o %s/a --json", kvt_bin(), kvt_tmp) == 0,
                  "%.2000s", kvt_err);
    check_json_points("-j 1");
    // each point directory holds its own run
    ensure_plain();
    char p[512];
    snprintf(p, sizeof p,
             "%s/a/points/0003_cluster.prefill.instances=3_cluster.decode.instances=2/summary.json",
             kvt_tmp);
    json_error_t je;
    json_t *s = json_load_file(p, 0, &je);
    ck_assert_msg(s, "%s: %s", p, je.text);
    json_object_del(s, "sim");
    ck_assert(json_equal(s, plain[3]));
    json_decref(s);
    snprintf(p, sizeof p,
             "%s/a/points/0003_cluster.prefill.instances=3_cluster.decode.instances=2/results.db",
             kvt_tmp);
    ck_assert(access(p, R_OK) == 0);
}
END_TEST

START_TEST(test_sweep_j2_equals_j1) {
    ck_assert_msg(kvt_sh("%s sweep " BASE " " VARY " -j 2 -o %s/b --json", kvt_bin(), kvt_tmp) == 0,
                  "%.2000s", kvt_err);
    check_json_points("-j 2");
    ck_assert_msg(strstr(kvt_err, "4 run now"), "stderr: %.2000s", kvt_err);
}
END_TEST

// Needs an MPI build and mpirun on PATH: main() skips the "mpi" case (exit 77) without them.
START_TEST(test_sweep_mpi_equals_plain) {
    // Open MPI's own allocations are reported as leaks by LeakSanitizer; not ours to judge.
    int rc = kvt_sh(
        "ASAN_OPTIONS=detect_leaks=0 mpirun --allow-run-as-root --oversubscribe -n 2 %s sweep " BASE
        " " VARY " -o %s/m --json",
        kvt_bin(), kvt_tmp);
    ck_assert_msg(rc == 0, "mpirun exit %d: %.2000s", rc, kvt_err);
    ck_assert_msg(strstr(kvt_err, "gathered over MPI ranks"), "not gathered over ranks: %.2000s",
                  kvt_err);
    check_json_points("mpirun -n 2");
}
END_TEST

// A point where no request was served has no latency: n/a in the table (it printed "nan"),
// NULL in sweep.db, as null in its summary.
START_TEST(test_sweep_point_nothing_served) {
    ck_assert_msg(kvt_sh("%s sweep scenarios/quickstart.yaml --set workload.limit_requests=100 "
                         "--set cluster.mode=colocated --set cluster.prefill.kv_tokens=1 "
                         "--set cluster.decode.kv_tokens=1 --vary seed=1,2 -j 1 -o %s/ns",
                         kvt_bin(), kvt_tmp) == 0,
                  "%.2000s", kvt_err);
    ck_assert_msg(strstr(kvt_out, "n/a") && !strstr(kvt_out, "nan"), "%s", kvt_out);
    // the sqlite3 shell, as test_autoscale reads a results database
    ck_assert_int_eq(kvt_sh("sqlite3 %s/ns/sweep.db 'SELECT count(*) FROM point WHERE "
                            "ttft_p90_ms IS NULL'",
                            kvt_tmp),
                     0);
    ck_assert_msg(atoi(kvt_out) == 2, "points without a TTFT in sweep.db: %s", kvt_out);
}
END_TEST

START_TEST(test_sweep_db_and_csv) {
    ck_assert_msg(kvt_sh("%s sweep " BASE " " VARY " -o %s/d", kvt_bin(), kvt_tmp) == 0, "%.2000s",
                  kvt_err);
    ensure_plain();
    char p[256];
    snprintf(p, sizeof p, "%s/d/sweep.db", kvt_tmp);
    sqlite3 *db = NULL;
    ck_assert(sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(
        db,
        "SELECT idx, \"cluster.prefill.instances\", \"cluster.decode.instances\","
        " status, ttft_p90_ms, tpot_p90_ms, hit_rate, gpus, cost_usd,"
        " slo_attainment, saturation FROM point ORDER BY idx",
        -1, &q, NULL);
    ck_assert_msg(rc == SQLITE_OK, "%s", sqlite3_errmsg(db));
    int n = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        int i = sqlite3_column_int(q, 0);
        ck_assert_int_eq(i, n);
        ck_assert_int_eq(sqlite3_column_int(q, 1), k_prefill[i / 2]);
        ck_assert_int_eq(sqlite3_column_int(q, 2), k_decode[i % 2]);
        ck_assert_str_eq((const char *)sqlite3_column_text(q, 3), "completed");
        json_t *s = plain[i];
        double t90 = json_real_value(json_object_get(json_object_get(s, "ttft_ms"), "p90"));
        double p90 = json_real_value(json_object_get(json_object_get(s, "tpot_ms"), "p90"));
        double hr = json_real_value(json_object_get(json_object_get(s, "cache"), "hit_rate"));
        double att = json_real_value(json_object_get(json_object_get(s, "slo"), "attainment"));
        ck_assert_msg(sqlite3_column_double(q, 4) == t90, "point %d ttft %g vs %g", i,
                      sqlite3_column_double(q, 4), t90);
        ck_assert(sqlite3_column_double(q, 5) == p90);
        ck_assert(sqlite3_column_double(q, 6) == hr);
        ck_assert(sqlite3_column_double(q, 7) == k_prefill[i / 2] + k_decode[i % 2]);
        ck_assert(sqlite3_column_double(q, 8) > 0);
        ck_assert(sqlite3_column_double(q, 9) == att);
        const char *sat =
            json_string_value(json_object_get(json_object_get(s, "saturation"), "state"));
        ck_assert_str_eq((const char *)sqlite3_column_text(q, 10), sat);
        n++;
    }
    ck_assert_int_eq(n, NPOINTS);
    sqlite3_finalize(q);
    sqlite3_close(db);
    // CSV: a header and one line per point
    snprintf(p, sizeof p, "%s/d/sweep.csv", kvt_tmp);
    FILE *f = fopen(p, "r");
    ck_assert(f);
    char line[8192];
    int lines = 0;
    ck_assert(fgets(line, sizeof line, f));
    ck_assert_msg(strstr(line, "cluster.prefill.instances") && strstr(line, "ttft_p90_ms"), "%s",
                  line);
    while (fgets(line, sizeof line, f))
        lines++;
    fclose(f);
    ck_assert_int_eq(lines, NPOINTS);
}
END_TEST

static int64_t mtime_ns(const char *p) {
    struct stat sb;
    if (stat(p, &sb)) return -1;
    return (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
}

START_TEST(test_sweep_resume_reruns_only_missing) {
    ck_assert_msg(kvt_sh("%s sweep " BASE " " VARY " -o %s/r", kvt_bin(), kvt_tmp) == 0, "%.2000s",
                  kvt_err);
    ck_assert_msg(strstr(kvt_err, "4 run now, 0 already done"), "%.2000s", kvt_err);
    char sum[NPOINTS][512];
    int64_t before[NPOINTS];
    for (int i = 0; i < NPOINTS; i++) {
        snprintf(sum[i], sizeof sum[i],
                 "%s/r/points/%04d_cluster.prefill.instances=%d_cluster.decode.instances=%d/"
                 "summary.json",
                 kvt_tmp, i, k_prefill[i / 2], k_decode[i % 2]);
        before[i] = mtime_ns(sum[i]);
        ck_assert_msg(before[i] > 0, "missing %s", sum[i]);
    }
    // an interrupted sweep: one point never finished
    ck_assert(unlink(sum[2]) == 0);
    ck_assert_msg(kvt_sh("%s sweep " BASE " " VARY " -o %s/r --json", kvt_bin(), kvt_tmp) == 0,
                  "%.2000s", kvt_err);
    ck_assert_msg(strstr(kvt_err, "1 run now, 3 already done"), "%.2000s", kvt_err);
    for (int i = 0; i < NPOINTS; i++) {
        int64_t t = mtime_ns(sum[i]);
        ck_assert_msg(t > 0, "missing %s after resume", sum[i]);
        if (i != 2) ck_assert_msg(t == before[i], "point %d was run again", i);
    }
    check_json_points("resumed");
    // a different sweep into the same directory is refused
    ck_assert_int_eq(kvt_sh("%s sweep " BASE " --vary cluster.prefill.instances=1,2 -o %s/r",
                            kvt_bin(), kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "another sweep"), "%.2000s", kvt_err);
}
END_TEST

// A point that ran before the scenario file changed is not done: sweep.json records the
// command line only, so each point's run is checked against the configuration it resolves to
// now. Before, an edited seed came back with the old seed's figures as "already done".
START_TEST(test_sweep_resume_reruns_changed_scenario) {
    ck_assert(kvt_sh("sed 's#traces/data/#%s/traces/data/#' scenarios/quickstart.yaml > %s/s.yaml",
                     kvt_src(), kvt_tmp) == 0);
#define SW2                                                                                        \
    "%s sweep %s/s.yaml --set workload.limit_requests=300 --vary cluster.decode.instances=1,2 -o " \
    "%s/c"
    ck_assert_msg(kvt_sh(SW2, kvt_bin(), kvt_tmp, kvt_tmp) == 0, "%.2000s", kvt_err);
    ck_assert_msg(strstr(kvt_err, "2 run now, 0 already done"), "%.2000s", kvt_err);
    ck_assert(kvt_sh("sed -i 's/^seed: .*/seed: 7/' %s/s.yaml", kvt_tmp) == 0);
    ck_assert_msg(kvt_sh(SW2, kvt_bin(), kvt_tmp, kvt_tmp) == 0, "%.2000s", kvt_err);
    ck_assert_msg(strstr(kvt_err, "2 run now, 0 already done") &&
                      kvt_count(kvt_err, "ran another configuration") == 2,
                  "%.2000s", kvt_err);
    for (int i = 0; i < 2; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/c/points/%04d_cluster.decode.instances=%d/summary.json", kvt_tmp,
                 i, i + 1);
        json_error_t je;
        json_t *j = json_load_file(p, 0, &je);
        ck_assert_msg(j, "%s: %s", p, je.text);
        ck_assert_msg(kvt_num(j, "seed") == 7, "point %d kept seed %g", i, kvt_num(j, "seed"));
        json_decref(j);
    }
    // unchanged since: nothing runs again
    ck_assert_msg(kvt_sh(SW2, kvt_bin(), kvt_tmp, kvt_tmp) == 0, "%.2000s", kvt_err);
    ck_assert_msg(strstr(kvt_err, "0 run now, 2 already done"), "%.2000s", kvt_err);
#undef SW2
}
END_TEST

START_TEST(test_sweep_bad_vary) {
    static const struct {
        const char *args, *want;
    } cases[] = {
        {"--vary cluster.prefill.instances", "cluster.prefill.instances"},
        {"--vary cluster.prefill.instances=", "cluster.prefill.instances"},
        {"--vary cluster.prefill.instances=1,,2", "cluster.prefill.instances"},
        {"--vary =1,2", "=1,2"},
        {"--vary cluster.prefil.instances=1,2", "cluster.prefil.instances"},
        {"--vary cluster.prefill.instances=1,two", "two"},
        {"--vary cluster.prefill.instances=1 --vary cluster.prefill.instances=2", "twice"},
        {"--vary cluster.decode.instances=1 --set cluster.nope=3", "cluster.nope"},
        {"--vary cluster.prefill.instances=-1,1", "cluster.prefill.instances"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = kvt_sh("%s sweep " BASE " %s -o %s/bad", kvt_bin(), cases[i].args, kvt_tmp);
        ck_assert_msg(rc == 2, "'%s': exit %d, want 2 (%.2000s)", cases[i].args, rc, kvt_err);
        ck_assert_msg(strstr(kvt_err, cases[i].want), "'%s': message lacks '%s': %.2000s",
                      cases[i].args, cases[i].want, kvt_err);
    }
    char p[256];
    snprintf(p, sizeof p, "%s/bad/points", kvt_tmp);
    ck_assert_msg(access(p, F_OK) != 0, "a bad sweep created %s", p);
    ck_assert_int_eq(kvt_sh("%s sweep " BASE, kvt_bin()), 2);   // no --vary
}
END_TEST

// A point whose run fails (a trace window past the trace's end: no requests) is "unfinished"
// with the run's message as its reason in sweep.db, sweep.csv, --json, the table and
// sweep.html, never "failed"; with -j 2 the reason comes back from the worker; the sweep
// exits 2, as run does on that window (bad input).
START_TEST(test_sweep_unfinished_reason) {
    const char *why = "no requests to simulate";
    for (int jobs = 1; jobs <= 2; jobs++) {
        int rc = kvt_sh("%s sweep " BASE " --vary workload.start_s=0,9e8 -j %d -o %s/u%d",
                        kvt_bin(), jobs, kvt_tmp, jobs);
        ck_assert_msg(rc == 2, "-j %d: exit %d: %.2000s", jobs, rc, kvt_err);
        ck_assert_msg(strstr(kvt_out, "differ between points: (one point finished)"), "%.2000s",
                      kvt_out);
        ck_assert_msg(strstr(kvt_out, "unfinished: ") && strstr(kvt_out, why) &&
                          !strstr(kvt_out, "failed"),
                      "table: %.2000s", kvt_out);
        ck_assert_msg(strstr(kvt_err, "1 unfinished"), "%.2000s", kvt_err);
        char p[256];
        snprintf(p, sizeof p, "%s/u%d/sweep.db", kvt_tmp, jobs);
        sqlite3 *db = NULL;
        ck_assert(sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
        sqlite3_stmt *q = NULL;
        ck_assert(sqlite3_prepare_v2(db, "SELECT status, reason FROM point ORDER BY idx", -1, &q,
                                     NULL) == SQLITE_OK);
        ck_assert(sqlite3_step(q) == SQLITE_ROW);
        ck_assert_str_eq((const char *)sqlite3_column_text(q, 0), "completed");
        ck_assert(sqlite3_column_type(q, 1) == SQLITE_NULL);
        ck_assert(sqlite3_step(q) == SQLITE_ROW);
        ck_assert_str_eq((const char *)sqlite3_column_text(q, 0), "unfinished");
        ck_assert_msg(strstr((const char *)sqlite3_column_text(q, 1), why), "reason '%s'",
                      sqlite3_column_text(q, 1));
        sqlite3_finalize(q);
        sqlite3_close(db);
        snprintf(p, sizeof p, "%s/u%d/sweep.csv", kvt_tmp, jobs);
        char *csv = kvt_slurp(p);
        ck_assert_msg(strstr(csv, ",status,reason,") && strstr(csv, ",unfinished,") &&
                          strstr(csv, why) && !strstr(csv, "failed"),
                      "%s", csv);
        free(csv);
        snprintf(p, sizeof p, "%s/u%d/sweep.html", kvt_tmp, jobs);
        char *html = kvt_slurp(p);
        ck_assert_msg(strstr(html, why) && !strstr(html, ">failed"), "sweep.html lacks the reason");
        free(html);
    }
    // --json (a rerun: the complete point is kept, the other runs again)
    int rc = kvt_sh("%s sweep " BASE " --vary workload.start_s=0,9e8 -o %s/u1 --json", kvt_bin(),
                    kvt_tmp);
    ck_assert_int_eq(rc, 2);
    json_error_t je;
    json_t *a = json_loads(kvt_out, 0, &je);
    ck_assert_msg(json_is_array(a) && json_array_size(a) == 2, "--json: %s", je.text);
    json_t *p1 = json_array_get(a, 1);
    ck_assert_str_eq(json_string_value(json_object_get(p1, "point_status")), "unfinished");
    ck_assert(strstr(json_string_value(json_object_get(p1, "reason")), why));
    ck_assert(!json_object_get(json_array_get(a, 0), "reason"));
    json_decref(a);
}
END_TEST

// Why the MPI case cannot run here, or NULL when it can.
static const char *mpi_missing(void) {
#ifndef KVF_HAVE_MPI
    return "kvfleet built without MPI (KVFLEET_MPI found no MPI)";
#else
    return system("command -v mpirun >/dev/null 2>&1") == 0 ? NULL : "no mpirun on PATH";
#endif
}

// Two cases: "sweep" (no precondition) and "mpi" (an MPI build and mpirun), each its own CTest
// test (CK_RUN_CASE); the "mpi" one exits 77 (skipped), saying why, when it cannot run.
int main(void) {
    const char *only = getenv("CK_RUN_CASE"), *why = mpi_missing();
    if (only && !strcmp(only, "mpi") && why) {
        fprintf(stderr, "test_sweep_mpi_equals_plain: skipped: %s\n", why);
        return 77;
    }
    Suite *s = suite_create("sweep");
    TCase *t = tcase_create("sweep");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_sweep_points_equal_plain_runs);
    tcase_add_test(t, test_sweep_j2_equals_j1);
    tcase_add_test(t, test_sweep_db_and_csv);
    tcase_add_test(t, test_sweep_point_nothing_served);
    tcase_add_test(t, test_sweep_resume_reruns_only_missing);
    tcase_add_test(t, test_sweep_resume_reruns_changed_scenario);
    tcase_add_test(t, test_sweep_bad_vary);
    tcase_add_test(t, test_sweep_unfinished_reason);
    suite_add_tcase(s, t);
    if (!why) {
        t = tcase_create("mpi");
        tcase_add_checked_fixture(t, setup, teardown);
        tcase_set_timeout(t, 300);
        tcase_add_test(t, test_sweep_mpi_equals_plain);
        suite_add_tcase(s, t);
    } else if (!only) {
        fprintf(stderr, "test_sweep_mpi_equals_plain: not run: %s\n", why);
    }
    SRunner *r = srunner_create(s);
    srunner_set_fork_status(r, CK_NOFORK);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
