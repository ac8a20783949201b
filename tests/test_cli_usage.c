// tests/test_cli_usage.c -- the kvfleet command's usage as a newcomer meets it: --help on every
// command and subcommand (usage on stdout, exit 0), -q printing nothing, --no-report not
// naming the report, an option without its value named as such, a top-level usage that lists
// every option of the commands, a plan with nothing feasible exiting 3, and compare naming
// sweep points and keys in full.
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "kvf.h"

static const char *const COMMANDS[] = {
    "run",
    "plan",
    "sweep",
    "validate",
    "compare",
    "report",
    "assess",
    "trace",
    "trace stats",
    "trace gen",
    "trace convert",
    "engine",
    "engine profile",
    "engine serve",
    "engine fit",
    "engine info",
    "engine bench",
    "hw",
    "hw check",
};

START_TEST(test_help_on_every_command) {
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++) {
        for (int form = 0; form < 2; form++) {
            int rc = kvt_sh("%s %s %s", kvt_bin(), COMMANDS[i], form ? "-h" : "--help");
            ck_assert_msg(rc == 0, "kvfleet %s %s exited %d: %s", COMMANDS[i],
                          form ? "-h" : "--help", rc, kvt_err);
            ck_assert_msg(strstr(kvt_out, "usage"), "kvfleet %s --help: no usage on stdout: '%s'",
                          COMMANDS[i], kvt_out);
            ck_assert_msg(!kvt_err[0], "kvfleet %s --help wrote to stderr: %s", COMMANDS[i],
                          kvt_err);
        }
    }
    // help after other arguments too, and the top level
    ck_assert_int_eq(kvt_sh("%s run scenarios/quickstart.yaml --help", kvt_bin()), 0);
    ck_assert(strstr(kvt_out, "usage: kvfleet run"));
    ck_assert_int_eq(kvt_sh("%s --help", kvt_bin()), 0);
    ck_assert(strstr(kvt_out, "usage:"));
    // a bare command still wants its arguments
    ck_assert_int_eq(kvt_sh("%s run", kvt_bin()), 2);
    ck_assert(strstr(kvt_err, "usage"));
}
END_TEST

// Every "--option" a command's own usage names appears in the top-level usage.
START_TEST(test_top_usage_lists_every_option) {
    ck_assert_int_eq(kvt_sh("%s --help", kvt_bin()), 0);
    char *top = kvf_strdup(kvt_out);
    static const char *const cmds[] = {"run",    "plan",         "sweep",      "compare",
                                       "assess", "report",       "engine fit", "validate",
                                       "trace",  "engine serve", "engine",     "hw"};
    int checked = 0;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        ck_assert_int_eq(kvt_sh("%s %s --help", kvt_bin(), cmds[i]), 0);
        for (char *p = kvt_out; (p = strstr(p, "--"));) {
            char opt[64];
            size_t n = 0;
            while (n < sizeof opt - 1 && (p[n] == '-' || (p[n] >= 'a' && p[n] <= 'z')))
                opt[n] = p[n], n++;
            opt[n] = 0;
            p += n ? n : 2;
            if (n < 4 || !strcmp(opt, "--help")) continue;
            // an option is listed as a whole word, not as the start of a longer one
            bool found = false;
            for (char *q = top; (q = strstr(q, opt)); q += n)
                if (!((q[n] >= 'a' && q[n] <= 'z') || q[n] == '-')) found = true;
            ck_assert_msg(found, "top-level usage lacks %s (from kvfleet %s --help)", opt, cmds[i]);
            checked++;
        }
    }
    ck_assert_msg(checked > 40, "only %d options checked", checked);
    static const char *const named[] = {
        "--quiet", "--no-report", "--engine",      "--trace-out", "--force",     "--all",
        "--html",  "exit 3",      "trace convert", "hw check",    "engine serve"};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        ck_assert_msg(strstr(top, named[i]), "top-level usage lacks '%s'", named[i]);
    free(top);
}
END_TEST

START_TEST(test_quiet_prints_nothing) {
    kvt_tmp_make("kvf_cli_quiet");
    int rc = kvt_sh("%s run scenarios/quickstart.yaml --set workload.limit_requests=150 -q "
                    "--no-report -o %s/q",
                    kvt_bin(), kvt_tmp);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, kvt_err);
    ck_assert_msg(!kvt_out[0], "-q printed on stdout: %s", kvt_out);
    ck_assert_msg(!kvt_err[0], "-q printed on stderr: %s", kvt_err);
    char p[256];
    snprintf(p, sizeof p, "%s/q/summary.json", kvt_tmp);
    ck_assert_msg(access(p, R_OK) == 0, "-q wrote no summary.json");
    // --json with -q: still nothing; an error still shows under -q
    rc = kvt_sh("%s run scenarios/quickstart.yaml --set workload.limit_requests=150 -q --json "
                "--no-report -o %s/q2",
                kvt_bin(), kvt_tmp);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(!kvt_out[0], "-q --json printed: %.200s", kvt_out);
    rc = kvt_sh("%s run scenarios/quickstart.yaml --set cluster.prefill.instances=-1 -q -o %s/q3",
                kvt_bin(), kvt_tmp);
    ck_assert_int_eq(rc, 2);
    ck_assert(strstr(kvt_err, "cluster.prefill.instances"));
    // without -q the summary is printed
    rc = kvt_sh("%s run scenarios/quickstart.yaml --set workload.limit_requests=150 --no-report "
                "-o %s/q4",
                kvt_bin(), kvt_tmp);
    ck_assert_int_eq(rc, 0);
    ck_assert(strstr(kvt_out, "SLO"));
    kvt_tmp_remove();
}
END_TEST

START_TEST(test_no_report_does_not_name_it) {
    kvt_tmp_make("kvf_cli_norep");
    int rc = kvt_sh("%s run scenarios/quickstart.yaml --set workload.limit_requests=150 "
                    "--no-report -o %s/n",
                    kvt_bin(), kvt_tmp);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, kvt_err);
    ck_assert_msg(strstr(kvt_out, "summary.json, results.db)"), "%s", kvt_out);
    ck_assert_msg(!strstr(kvt_out, "report.html"), "--no-report names the report: %s", kvt_out);
    char p[256];
    snprintf(p, sizeof p, "%s/n/report.html", kvt_tmp);
    ck_assert(access(p, F_OK) != 0);
    rc = kvt_sh("KVF_NO_GNUPLOT=1 %s run scenarios/quickstart.yaml --set "
                "workload.limit_requests=150 -o %s/r",
                kvt_bin(), kvt_tmp);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(kvt_out, "report.html"), "the report is not named: %s", kvt_out);
    snprintf(p, sizeof p, "%s/r/report.html", kvt_tmp);
    ck_assert(access(p, R_OK) == 0);
    kvt_tmp_remove();
}
END_TEST

START_TEST(test_missing_value_is_named) {
    static const char *const lines[][2] = {
        {"run scenarios/quickstart.yaml -o", "-o"},
        {"run scenarios/quickstart.yaml --set", "--set"},
        {"run scenarios/quickstart.yaml --trace-out", "--trace-out"},
        {"plan scenarios/quickstart.yaml --max-gpus", "--max-gpus"},
        {"sweep scenarios/quickstart.yaml --vary", "--vary"},
        {"sweep scenarios/quickstart.yaml --vary seed=1,2 -o", "-o"},
        {"assess traces/data/mooncake_conversation.jsonl -o", "-o"},
        {"trace convert traces/data/mooncake_conversation.jsonl -o", "-o"},
        {"trace gen --profile chatbot -o", "-o"},
        {"engine profile -o", "-o"},
        {"engine fit x.csv -o", "-o"},
        {"compare out/a --html", "--html"},
        {"validate --trace traces/data/mooncake_conversation.jsonl -o", "-o"},
        {"engine serve --trace traces/data/mooncake_conversation.jsonl --limit", "--limit"},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        int rc = kvt_sh("%s %s", kvt_bin(), lines[i][0]);
        ck_assert_msg(rc == 2, "'%s' exited %d", lines[i][0], rc);
        ck_assert_msg(strstr(kvt_err, "needs a value"), "'%s': %s", lines[i][0], kvt_err);
        ck_assert_msg(strstr(kvt_err, lines[i][1]), "'%s' does not name %s: %s", lines[i][0],
                      lines[i][1], kvt_err);
        ck_assert_msg(!strstr(kvt_err, "unknown option"), "'%s': %s", lines[i][0], kvt_err);
    }
    // an option that does not exist is still called unknown
    ck_assert_int_eq(kvt_sh("%s run scenarios/quickstart.yaml --frob", kvt_bin()), 2);
    ck_assert(strstr(kvt_err, "unknown option '--frob'"));
}
END_TEST

START_TEST(test_plan_nothing_feasible_exits_3) {
    // a TTFT bound of 1 ms cannot be met by any split of 3 GPUs
    int rc = kvt_sh("%s plan scenarios/quickstart.yaml --slo ttft_p90_ms=1 --max-gpus 3 "
                    "--set workload.limit_requests=100",
                    kvt_bin());
    ck_assert_msg(rc == 3, "infeasible plan exited %d: %s%s", rc, kvt_out, kvt_err);
    ck_assert(strstr(kvt_out, "no configuration meets the SLOs"));
    rc = kvt_sh("%s plan scenarios/quickstart.yaml --slo ttft_p90_ms=1 --max-gpus 3 "
                "--set workload.limit_requests=100 --json",
                kvt_bin());
    ck_assert_int_eq(rc, 3);
    ck_assert(strstr(kvt_out, "\"feasible\": false"));
    // a bound the scenario meets: exit 0
    rc = kvt_sh("%s plan scenarios/quickstart.yaml --slo ttft_p90_ms=60000 --slo tpot_p90_ms=500 "
                "--max-gpus 4 --set workload.limit_requests=100",
                kvt_bin());
    ck_assert_msg(rc == 0, "feasible plan exited %d: %s%s", rc, kvt_out, kvt_err);
    ck_assert(strstr(kvt_out, "chosen"));
}
END_TEST

START_TEST(test_compare_sweep_points_in_full) {
    kvt_tmp_make("kvf_cli_cmp");
    int rc = kvt_sh("%s sweep scenarios/quickstart.yaml --vary cluster.prefill.instances=1,2 "
                    "--set workload.limit_requests=100 -o %s/sw",
                    kvt_bin(), kvt_tmp);
    ck_assert_msg(rc == 0, "sweep exited %d: %s", rc, kvt_err);
    rc = kvt_sh("%s compare %s/sw/points/*", kvt_bin(), kvt_tmp);
    ck_assert_msg(rc == 0, "compare exited %d: %s", rc, kvt_err);
    // each point named in full, columns "run N", no header cut inside a key name
    ck_assert_msg(strstr(kvt_out, "points/0000_cluster.prefill.instances=1 "), "%s", kvt_out);
    ck_assert_msg(strstr(kvt_out, "points/0001_cluster.prefill.instances=2 "), "%s", kvt_out);
    ck_assert(strstr(kvt_out, "run 1") && strstr(kvt_out, "run 2"));
    ck_assert_msg(!strstr(kvt_out, "cluster.prefill  ") && !strstr(kvt_out, "_cluster.prefill\n"),
                  "a cut name: %s", kvt_out);
    // byte counts in units
    ck_assert_msg(strstr(kvt_out, " GB") || strstr(kvt_out, " TB") || strstr(kvt_out, " MB"),
                  "KV store peak not in byte units: %s", kvt_out);
    kvt_tmp_remove();
}
END_TEST

int main(void) {
    Suite *s = suite_create("cli_usage");
    TCase *t = tcase_create("usage");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_help_on_every_command);
    tcase_add_test(t, test_top_usage_lists_every_option);
    tcase_add_test(t, test_quiet_prints_nothing);
    tcase_add_test(t, test_no_report_does_not_name_it);
    tcase_add_test(t, test_missing_value_is_named);
    tcase_add_test(t, test_plan_nothing_feasible_exits_3);
    tcase_add_test(t, test_compare_sweep_points_in_full);
    suite_add_tcase(s, t);
    return kvt_main(s);
}
