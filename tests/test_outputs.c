// tests/test_outputs.c -- no result is lost: a run writes its directory whole or not at all.
// An existing result is kept unless --force; a run killed with SIGKILL leaves the earlier
// result as it was and a rerun recovers (stale lock and temporary directory); a full disk
// (RLIMIT_FSIZE) ends non-zero with nothing that looks complete; an interrupted run's
// request counts add up; a sweep reruns a point whose summary.json is truncated and its
// workers do not outlive a killed parent.
#include <check.h>
#include <glob.h>
#include <stdbool.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers/kvt.h"

static void setup(void) {
    kvt_tmp_make("kvf_out");
}
static void teardown(void) {
    kvt_tmp_remove();
}

#define SMALL "scenarios/quickstart.yaml --set workload.limit_requests=200 -q --no-report"
// a run that takes seconds: generated traffic, stopped by the test
#define LONG                                                                                       \
    "scenarios/quickstart.yaml --set 'workload.generate={profile: chatbot, rate_rps: 20, "         \
    "duration_s: 3600000}' -q --no-report"

static bool exists(const char *fmt, const char *a) {
    char p[512];
    snprintf(p, sizeof p, fmt, kvt_tmp, a);
    struct stat sb;
    return stat(p, &sb) == 0;
}

static long arrived(const char *dir) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s/summary.json", kvt_tmp, dir);
    json_error_t je;
    json_t *s = json_load_file(p, 0, &je);
    ck_assert_msg(s, "%s: %s", p, je.text);
    long n = (long)json_integer_value(json_object_get(json_object_get(s, "requests"), "arrived"));
    json_decref(s);
    return n;
}

// A shell function for the command lines below: `until_ok N COND` evaluates COND every 0.1 s
// until it holds, at most N times, and fails (status 1, a line on stderr) when it never did.
// The tests wait on what a run creates (its temporary directory and results database), never
// on a guess of how long the run takes to get there. Each line is one { ...; } group, so
// kvt_err holds the stderr of all of it.
#define UNTIL_OK                                                                                   \
    "until_ok() { i=0; while ! eval \"$2\"; do i=$((i+1)); "                                       \
    "if [ $i -ge $1 ]; then echo \"waited $1 x 0.1 s: never $2\" >&2; return 1; fi; "              \
    "sleep 0.1; done; }; "
// Up to 60 s for a run to get going on a loaded machine.
#define TRIES "600"

// Entries of kvt_tmp whose name starts with prefix.
static int leftovers(const char *prefix) {
    kvt_sh("ls -a %s", kvt_tmp);
    int n = 0;
    for (char *l = strtok(kvt_out, "\n"); l; l = strtok(NULL, "\n"))
        if (!strncmp(l, prefix, strlen(prefix))) n++;
    return n;
}

START_TEST(test_existing_result_kept_unless_force) {
    ck_assert_int_eq(kvt_sh("%s run " SMALL " -o %s/r", kvt_bin(), kvt_tmp), 0);
    ck_assert_int_eq(arrived("r"), 200);
    ck_assert_int_eq(
        kvt_sh("%s run " SMALL " --set workload.limit_requests=100 -o %s/r", kvt_bin(), kvt_tmp),
        2);
    ck_assert_msg(strstr(kvt_err, "earlier result") && strstr(kvt_err, "--force"), "%s", kvt_err);
    ck_assert_int_eq(arrived("r"), 200);
    ck_assert_int_eq(kvt_sh("%s run " SMALL " --set workload.limit_requests=100 -o %s/r/ --force",
                            kvt_bin(), kvt_tmp),
                     0);
    ck_assert_int_eq(arrived("r"), 100);
    ck_assert_int_eq(leftovers("r."), 0);   // no r.tmp.*, r.old.*, r.lock
}
END_TEST

START_TEST(test_sigkill_keeps_old_result_and_rerun_recovers) {
    ck_assert_int_eq(kvt_sh("%s run " SMALL " -o %s/k", kvt_bin(), kvt_tmp), 0);
    // a --force rerun killed mid-run
    // (killed once its temporary directory holds the results database: mid-run)
    int rc = kvt_sh("{ " UNTIL_OK "%s run " LONG " --force -o %s/k & p=$!; "
                    "until_ok " TRIES " 'ls %s/k.tmp.*/results.db >/dev/null 2>&1' || echo never; "
                    "kill -9 $p; wait $p; echo rc=$?; }",
                    kvt_bin(), kvt_tmp, kvt_tmp);
    (void)rc;
    ck_assert_msg(!strstr(kvt_out, "never"), "the run made no k.tmp.*/results.db: %s", kvt_err);
    ck_assert_msg(strstr(kvt_out, "rc=137"), "not killed: %s %s", kvt_out, kvt_err);
    ck_assert_int_eq(arrived("k"), 200);        // the earlier result, whole
    ck_assert_int_ge(leftovers("k.tmp."), 1);   // what the killed run left
    // a fresh run into a directory a killed run never finished
    kvt_sh("{ " UNTIL_OK "%s run " LONG " -o %s/n & p=$!; "
           "until_ok " TRIES " 'ls %s/n.tmp.*/results.db >/dev/null 2>&1' || echo never; "
           "kill -9 $p; wait $p; echo rc=$?; }",
           kvt_bin(), kvt_tmp, kvt_tmp);
    ck_assert_msg(!strstr(kvt_out, "never"), "the run made no n.tmp.*/results.db: %s", kvt_err);
    ck_assert_msg(strstr(kvt_out, "rc=137"), "not killed: %s %s", kvt_out, kvt_err);
    ck_assert_int_ge(leftovers("n.tmp."), 1);
    ck_assert(!exists("%s/%s", "n"));
    ck_assert_int_eq(kvt_sh("%s run " SMALL " -o %s/n", kvt_bin(), kvt_tmp), 0);
    ck_assert_int_eq(arrived("n"), 200);
    ck_assert_int_eq(kvt_sh("%s run " SMALL " --set workload.limit_requests=50 --force -o %s/k",
                            kvt_bin(), kvt_tmp),
                     0);
    ck_assert_int_eq(arrived("k"), 50);
    ck_assert_int_eq(leftovers("k."), 0);
    ck_assert_int_eq(leftovers("n."), 0);
}
END_TEST

START_TEST(test_disk_full_leaves_nothing_complete) {
    // 40 KiB per file: the results database cannot be written
    for (int kb = 40; kb <= 400; kb *= 10) {
        char d[16];
        snprintf(d, sizeof d, "full%d", kb);
        int rc = kvt_sh("sh -c \"trap '' XFSZ; ulimit -f %d; exec %s run scenarios/quickstart.yaml "
                        "-q -o %s/%s\"",
                        kb * 2, kvt_bin(), kvt_tmp, d);
        ck_assert_msg(rc == 1, "limit %d KiB: exit %d: %s", kb, rc, kvt_err);
        ck_assert_msg(strstr(kvt_err, "kvfleet:"), "no message: %s", kvt_err);
        ck_assert_msg(!exists("%s/%s", d), "limit %d KiB left %s", kb, d);
        char pre[32];
        snprintf(pre, sizeof pre, "%s.", d);
        ck_assert_int_eq(leftovers(pre), 0);
    }
}
END_TEST

START_TEST(test_interrupted_counts_add_up) {
    // interrupted once the run's results database exists: its SIGINT handler is in place
    // (set before the simulation opens the database) and the simulation is under way
    int rc = kvt_sh("{ " UNTIL_OK "%s run " LONG " -o %s/i & p=$!; "
                    "until_ok " TRIES " 'ls %s/i.tmp.*/results.db >/dev/null 2>&1' || echo never; "
                    "kill -INT $p; wait $p; echo rc=$?; }",
                    kvt_bin(), kvt_tmp, kvt_tmp);
    (void)rc;
    ck_assert_msg(!strstr(kvt_out, "never"), "the run made no i.tmp.*/results.db: %s", kvt_err);
    ck_assert_msg(strstr(kvt_out, "rc=1\n"), "%s %s", kvt_out, kvt_err);
    char p[512];
    snprintf(p, sizeof p, "%s/i/summary.json", kvt_tmp);
    json_error_t je;
    json_t *s = json_load_file(p, 0, &je);
    ck_assert_msg(s, "%s: %s", p, je.text);
    json_t *rq = json_object_get(s, "requests");
    long a = (long)json_integer_value(json_object_get(rq, "arrived"));
    long c = (long)json_integer_value(json_object_get(rq, "completed"));
    long r = (long)json_integer_value(json_object_get(rq, "rejected"));
    long u = (long)json_integer_value(json_object_get(rq, "unfinished"));
    ck_assert_int_gt(a, 0);
    ck_assert_int_gt(u, 0);
    ck_assert_int_eq(c + r + u, a);
    json_decref(s);
}
END_TEST

#define SWEEP                                                                                      \
    "%s sweep scenarios/quickstart.yaml --set workload.limit_requests=100 --vary seed=1,2,3"

START_TEST(test_sweep_reruns_truncated_point) {
    ck_assert_int_eq(kvt_sh(SWEEP " -o %s/s", kvt_bin(), kvt_tmp), 0);
    // truncate one point's summary.json
    ck_assert_int_eq(
        kvt_sh(
            "f=$(ls -d %s/s/points/*/ | head -1)summary.json; head -c 100 $f > $f.x && mv $f.x $f",
            kvt_tmp),
        0);
    ck_assert_int_eq(kvt_sh(SWEEP " -o %s/s", kvt_bin(), kvt_tmp), 0);
    ck_assert_msg(strstr(kvt_err, "1 run now, 2 already done"), "%s", kvt_err);
    char pat[256];
    snprintf(pat, sizeof pat, "%s/s/points/*/summary.json", kvt_tmp);
    glob_t g;
    ck_assert_int_eq(glob(pat, 0, NULL, &g), 0);
    ck_assert_int_eq((int)g.gl_pathc, 3);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        json_error_t je;
        json_t *j = json_load_file(g.gl_pathv[i], 0, &je);
        ck_assert_msg(json_is_object(j), "%s: %s", g.gl_pathv[i], je.text);
        json_decref(j);
    }
    globfree(&g);
}
END_TEST

START_TEST(test_sweep_workers_die_with_parent) {
    // the parent is killed once both workers are running a point (two point databases in
    // their NNNN_*.partial directories); then the workers must be gone within the bounded wait
    kvt_sh("{ " UNTIL_OK
           "%s sweep scenarios/quickstart.yaml --set 'workload.generate={profile: chatbot, "
           "rate_rps: 20, duration_s: 3600000}' --vary seed=1,2 -j 2 -o %s/w & p=$!; "
           "until_ok " TRIES
           " '[ $(ls -d %s/w/points/*.partial/results.db 2>/dev/null | wc -l) -ge 2 ]'"
           " || echo never-started; kill -9 $p; wait $p; "
           "until_ok " TRIES " '! pgrep -f \"^%s sweep .*-o %s/w$\" >/dev/null' || echo outlived; "
           "pgrep -f '^%s sweep .*-o %s/w$' | wc -l; }",
           kvt_bin(), kvt_tmp, kvt_tmp, kvt_bin(), kvt_tmp, kvt_bin(), kvt_tmp);
    ck_assert_msg(!strstr(kvt_out, "never-started"), "two workers never ran a point: %s %s",
                  kvt_out, kvt_err);
    ck_assert_msg(!strstr(kvt_out, "outlived"), "workers outlived their parent by 60 s: %s",
                  kvt_out);
    // the rerun is not blocked by a stale lock
    ck_assert_int_eq(kvt_sh("%s sweep scenarios/quickstart.yaml --set workload.limit_requests=50 "
                            "--vary seed=1,2 -o %s/w2",
                            kvt_bin(), kvt_tmp),
                     0);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("outputs");
    TCase *t = tcase_create("outputs");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_existing_result_kept_unless_force);
    tcase_add_test(t, test_sigkill_keeps_old_result_and_rerun_recovers);
    tcase_add_test(t, test_disk_full_leaves_nothing_complete);
    tcase_add_test(t, test_interrupted_counts_add_up);
    tcase_add_test(t, test_sweep_reruns_truncated_point);
    tcase_add_test(t, test_sweep_workers_die_with_parent);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
