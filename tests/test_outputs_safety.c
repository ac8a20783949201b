// tests/test_outputs_safety.c -- a result directory and the files around it are as safe as a
// database's: a signal during `run --force` (SIGTERM, SIGINT, SIGKILL) leaves the earlier
// result byte-identical; a lock that is a symbolic link is refused and nothing is written
// through it; a user's own files beside -o (DIR.old.backup, DIR.tmp.notes) survive; an output
// equal to an input, or an input inside the directory --force would replace, is refused;
// assess, engine serve and validate keep an earlier result unless --force. Then the literal
// command-line values (--trace, --seed: no YAML), assess's refusal of --set keys that change
// its trace, and the keys that cannot apply (a price for an unknown class, a vision pool
// beside a text-only model, generator keys days mode does not read).
//
// Every "unchanged" is a checksum of the whole tree before and after (sha256 of every file,
// names included). A run is stopped only once its temporary directory holds its database,
// found by polling a bounded number of times: no sleep-then-kill race.
#include <check.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "rpt.h"
#include "trc.h"

static void setup(void) {
    kvt_tmp_make("kvf_safe");
}
static void teardown(void) {
    kvt_tmp_remove();
}

#define SMALL "scenarios/quickstart.yaml --set workload.limit_requests=200 -q --no-report"
// a run that takes seconds: generated traffic, stopped by the test
#define LONG                                                                                       \
    "scenarios/quickstart.yaml --set 'workload.generate={profile: chatbot, rate_rps: 20, "         \
    "duration_s: 3600000}' -q --no-report"
// `until_ok N COND`: COND every 0.1 s until it holds, at most N times (status 1 when never)
#define UNTIL_OK                                                                                   \
    "until_ok() { i=0; while ! eval \"$2\"; do i=$((i+1)); "                                       \
    "if [ $i -ge $1 ]; then echo \"waited $1 x 0.1 s: never $2\" >&2; return 1; fi; "              \
    "sleep 0.1; done; }; "
#define TRIES "600"   // up to 60 s for a run to get going on a loaded machine

// The checksum of a tree (or a file) under kvt_tmp: every file's sha256 and name, sorted.
static char *tree_sum(const char *rel) {
    int rc = kvt_sh("cd %s && find '%s' -type f -print0 | sort -z | xargs -0 -r sha256sum | "
                    "sha256sum",
                    kvt_tmp, rel);
    ck_assert_msg(rc == 0, "checksum of %s: %s", rel, kvt_err);
    return strdup(kvt_out);
}

static void assert_same(const char *rel, const char *before) {
    char *after = tree_sum(rel);
    ck_assert_msg(!strcmp(before, after), "%s changed: %s -> %s", rel, before, after);
    free(after);
}

// Entries of kvt_tmp whose name starts with prefix.
static int leftovers(const char *prefix) {
    kvt_sh("ls -a %s", kvt_tmp);
    int n = 0;
    for (char *l = strtok(kvt_out, "\n"); l; l = strtok(NULL, "\n"))
        if (!strncmp(l, prefix, strlen(prefix))) n++;
    return n;
}

// Starts a long --force run into kvt_tmp/dir, waits until its temporary directory holds the
// database, sends sig and returns the run's exit status (as the shell reports it).
static int force_run_signalled(const char *dir, const char *sig) {
    kvt_sh("{ " UNTIL_OK "%s run " LONG " --force -o %s/%s & p=$!; "
           "until_ok " TRIES " 'ls %s/%s.tmp.*.kvfleet/results.db >/dev/null 2>&1' || echo never; "
           "kill -%s $p; wait $p; echo rc=$?; }",
           kvt_bin(), kvt_tmp, dir, kvt_tmp, dir, sig);
    ck_assert_msg(!strstr(kvt_out, "never"), "the run made no %s.tmp.*/results.db: %s", dir,
                  kvt_err);
    const char *r = strstr(kvt_out, "rc=");
    ck_assert_msg(r, "no exit status: %s", kvt_out);
    return atoi(r + 3);
}

static char run_err[65536];   // the signalled run's stderr (kvt_err is the last command's)

static void signal_keeps_result(const char *dir, const char *sig, int want_rc) {
    ck_assert_int_eq(kvt_sh("%s run " SMALL " -o %s/%s", kvt_bin(), kvt_tmp, dir), 0);
    char *before = tree_sum(dir);
    int rc = force_run_signalled(dir, sig);
    snprintf(run_err, sizeof run_err, "%s", kvt_err);
    ck_assert_msg(rc == want_rc, "SIG%s: exit %d, want %d: %s", sig, rc, want_rc, kvt_err);
    assert_same(dir, before);
    free(before);
}

START_TEST(test_sigterm_during_force_keeps_result) {
    signal_keeps_result("t", "TERM", 1);
    ck_assert_msg(strstr(run_err, "earlier result") && strstr(run_err, "kept"), "%s", run_err);
    ck_assert_int_eq(leftovers("t.tmp."), 0);   // discarded, not left for the next run
    ck_assert_int_eq(leftovers("t.lock"), 0);
}
END_TEST

START_TEST(test_sigint_during_force_keeps_result) {
    signal_keeps_result("i", "INT", 1);
    ck_assert_msg(strstr(run_err, "earlier result"), "%s", run_err);
    ck_assert_int_eq(leftovers("i.tmp."), 0);
}
END_TEST

START_TEST(test_sigkill_during_force_keeps_result) {
    signal_keeps_result("k", "KILL", 137);
    ck_assert_int_ge(leftovers("k.tmp."), 1);   // what the killed run left ...
    char *before = tree_sum("k");
    // ... which the next run on k removes; the earlier result is still kept without --force
    ck_assert_int_eq(kvt_sh("%s run " SMALL " -o %s/k", kvt_bin(), kvt_tmp), 2);
    assert_same("k", before);
    free(before);
    ck_assert_int_eq(leftovers("k.tmp."), 0);
}
END_TEST

START_TEST(test_interrupt_without_earlier_result_keeps_partial) {
    int rc = force_run_signalled("p", "TERM");
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(kvt_err, "interrupted; partial results"), "%s", kvt_err);
    ck_assert_int_eq(
        kvt_sh("sqlite3 %s/p/results.db \"SELECT value FROM run WHERE key='status'\"", kvt_tmp), 0);
    ck_assert_msg(strstr(kvt_out, "interrupted"), "run.status: %s", kvt_out);
}
END_TEST

START_TEST(test_symlinked_lock_refused) {
    kvt_sh("echo precious > %s/victim; ln -s %s/victim %s/r.lock", kvt_tmp, kvt_tmp, kvt_tmp);
    char *before = tree_sum("victim");
    ck_assert_int_eq(kvt_sh("%s run " SMALL " -o %s/r", kvt_bin(), kvt_tmp), 2);
    ck_assert_msg(strstr(kvt_err, "r.lock") && strstr(kvt_err, "symbolic link"), "%s", kvt_err);
    assert_same("victim", before);
    struct stat sb;
    char p[256];
    snprintf(p, sizeof p, "%s/r.lock", kvt_tmp);
    ck_assert(lstat(p, &sb) == 0 && S_ISLNK(sb.st_mode));   // left as it was
    snprintf(p, sizeof p, "%s/r", kvt_tmp);
    ck_assert(lstat(p, &sb) != 0);   // nothing written
    // a lock that is a FIFO, or a hard link to another file, is no lock of kvfleet's either
    kvt_sh("mkfifo %s/f.lock; ln %s/victim %s/h.lock", kvt_tmp, kvt_tmp, kvt_tmp);
    ck_assert_int_eq(kvt_sh("timeout 60 %s run " SMALL " -o %s/f", kvt_bin(), kvt_tmp), 2);
    ck_assert_msg(strstr(kvt_err, "f.lock"), "%s", kvt_err);
    ck_assert_int_eq(kvt_sh("%s run " SMALL " -o %s/h", kvt_bin(), kvt_tmp), 2);
    ck_assert_msg(strstr(kvt_err, "h.lock") && strstr(kvt_err, "hard link"), "%s", kvt_err);
    assert_same("victim", before);
    free(before);
}
END_TEST

START_TEST(test_user_files_beside_output_kept) {
    kvt_sh("cd %s && mkdir -p out.old.backup out.tmp.123 out.old.77 && echo a > out.old.backup/f "
           "&& echo b > out.tmp.notes && echo c > out.tmp.123/f && echo d > out.old.77/f && "
           "echo e > out.tmp.9.kvfleetx && echo f > out.tmp.9.kvfleet",   // a file, not a run's
           kvt_tmp);
    const char *mine[] = {"out.old.backup", "out.tmp.notes",      "out.tmp.123",
                          "out.old.77",     "out.tmp.9.kvfleetx", "out.tmp.9.kvfleet"};
    char *before[6];
    for (int i = 0; i < 6; i++)
        before[i] = tree_sum(mine[i]);
    ck_assert_int_eq(kvt_sh("%s run " SMALL " -o %s/out", kvt_bin(), kvt_tmp), 0);
    ck_assert_int_eq(kvt_sh("%s run " SMALL " --set workload.limit_requests=50 -o %s/out --force",
                            kvt_bin(), kvt_tmp),
                     0);
    for (int i = 0; i < 6; i++) {
        assert_same(mine[i], before[i]);
        free(before[i]);
    }
    // what a killed run leaves is removed by the next one; the user's files still stay
    force_run_signalled("out", "KILL");
    ck_assert_int_eq(kvt_sh("ls -d %s/out.tmp.*.kvfleet | wc -l", kvt_tmp), 0);
    ck_assert_int_ge(atoi(kvt_out), 2);   // the user's out.tmp.9.kvfleet and the killed run's
    ck_assert_int_eq(kvt_sh("%s run " SMALL " -o %s/out --force", kvt_bin(), kvt_tmp), 0);
    ck_assert_int_eq(kvt_sh("cd %s && ls -d out.tmp.*.kvfleet", kvt_tmp), 0);
    ck_assert_msg(!strcmp(kvt_out, "out.tmp.9.kvfleet\n"), "left: %s", kvt_out);
}
END_TEST

START_TEST(test_output_equal_to_input_refused) {
    ck_assert_int_eq(kvt_sh("%s run " SMALL " -o %s/r", kvt_bin(), kvt_tmp), 0);
    // the scenario (its trace made absolute) and a trace inside the directory --force replaces
    kvt_sh("sed \"s#traces/data#$PWD/traces/data#\" scenarios/quickstart.yaml > %s/r/s.yaml && "
           "cp traces/data/mooncake_conversation.jsonl %s/r/t.jsonl",
           kvt_tmp, kvt_tmp);
    char *before = tree_sum("r");
    ck_assert_int_eq(kvt_sh("%s run %s/r/s.yaml --set workload.limit_requests=20 -q --no-report "
                            "-o %s/r --force",
                            kvt_bin(), kvt_tmp, kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "scenario") && strstr(kvt_err, "lies inside"), "%s", kvt_err);
    ck_assert_int_eq(kvt_sh("%s run " SMALL " --trace %s/r/t.jsonl -o %s/r --force", kvt_bin(),
                            kvt_tmp, kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "trace") && strstr(kvt_err, "lies inside"), "%s", kvt_err);
    assert_same("r", before);
    free(before);
    // --trace-out naming the scenario, the trace, a FIFO or a directory
    kvt_sh("cp %s/r/s.yaml %s/s.yaml && cp %s/r/t.jsonl %s/t.jsonl && mkfifo %s/fifo", kvt_tmp,
           kvt_tmp, kvt_tmp, kvt_tmp, kvt_tmp);
    char *s0 = tree_sum("s.yaml"), *t0 = tree_sum("t.jsonl");
    ck_assert_int_eq(kvt_sh("%s run %s/s.yaml -q --no-report -o %s/o1 --trace-out %s/s.yaml",
                            kvt_bin(), kvt_tmp, kvt_tmp, kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "--trace-out") && strstr(kvt_err, "scenario"), "%s", kvt_err);
    ck_assert_int_eq(kvt_sh("%s run %s/s.yaml -q --no-report -o %s/o1 --trace %s/t.jsonl "
                            "--trace-out %s/t.jsonl",
                            kvt_bin(), kvt_tmp, kvt_tmp, kvt_tmp, kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "--trace-out") && strstr(kvt_err, "trace"), "%s", kvt_err);
    ck_assert_int_eq(kvt_sh("timeout 60 %s run %s/s.yaml -q --no-report -o %s/o1 --trace-out "
                            "%s/fifo",
                            kvt_bin(), kvt_tmp, kvt_tmp, kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "FIFO"), "%s", kvt_err);
    ck_assert_int_eq(kvt_sh("%s run %s/s.yaml -q --no-report -o %s/o1 --trace-out %s", kvt_bin(),
                            kvt_tmp, kvt_tmp, kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "directory"), "%s", kvt_err);
    assert_same("s.yaml", s0);
    assert_same("t.jsonl", t0);
    free(s0), free(t0);
    // compare: --html over a run's summary, and a FIFO named summary.json
    ck_assert_int_eq(
        kvt_sh("%s run " SMALL " --set workload.limit_requests=50 -o %s/b", kvt_bin(), kvt_tmp), 0);
    before = tree_sum("r");
    ck_assert_int_eq(kvt_sh("%s compare %s/r %s/b --html %s/r/summary.json", kvt_bin(), kvt_tmp,
                            kvt_tmp, kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "--html") && strstr(kvt_err, "summary of run"), "%s", kvt_err);
    assert_same("r", before);
    free(before);
    kvt_sh("mkdir %s/ff && mkfifo %s/ff/summary.json", kvt_tmp, kvt_tmp);
    ck_assert_int_eq(kvt_sh("timeout 60 %s compare %s/r %s/ff", kvt_bin(), kvt_tmp, kvt_tmp), 2);
    ck_assert_msg(strstr(kvt_err, "FIFO"), "%s", kvt_err);
    ck_assert_int_eq(kvt_sh("timeout 60 %s compare %s/r %s/b --html %s/fifo", kvt_bin(), kvt_tmp,
                            kvt_tmp, kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "FIFO"), "%s", kvt_err);
    // an output inside the directory --force replaces would go with the earlier result
    before = tree_sum("r");
    ck_assert_int_eq(kvt_sh("%s run %s/s.yaml --set workload.limit_requests=5 -q --no-report -o "
                            "%s/r --force --trace-out %s/r/timeline.json",
                            kvt_bin(), kvt_tmp, kvt_tmp, kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "--trace-out") && strstr(kvt_err, "inside the result"), "%s",
                  kvt_err);
    assert_same("r", before);
    free(before);
    // an output that is a symbolic link is not written through
    kvt_sh("echo precious > %s/victim && ln -s %s/victim %s/link", kvt_tmp, kvt_tmp, kvt_tmp);
    char *v0 = tree_sum("victim");
    ck_assert_int_eq(kvt_sh("%s run %s/s.yaml --set workload.limit_requests=5 -q --no-report -o "
                            "%s/o2 --trace-out %s/link",
                            kvt_bin(), kvt_tmp, kvt_tmp, kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "--trace-out") && strstr(kvt_err, "symbolic link"), "%s",
                  kvt_err);
    ck_assert_int_eq(
        kvt_sh("%s compare %s/r %s/b --html %s/link", kvt_bin(), kvt_tmp, kvt_tmp, kvt_tmp), 2);
    ck_assert_msg(strstr(kvt_err, "--html") && strstr(kvt_err, "symbolic link"), "%s", kvt_err);
    assert_same("victim", v0);
    free(v0);
}
END_TEST

START_TEST(test_other_commands_keep_result_unless_force) {
    const char *T = "traces/data/mooncake_conversation.jsonl";
    kvt_sh("mkdir -p %s/a %s/e %s/v && for d in a e v; do echo mine > %s/$d/keep; done", kvt_tmp,
           kvt_tmp, kvt_tmp, kvt_tmp);
    char *a0 = tree_sum("a"), *e0 = tree_sum("e"), *v0 = tree_sum("v");
    ck_assert_int_eq(kvt_sh("%s assess %s -q -o %s/a", kvt_bin(), T, kvt_tmp), 2);
    ck_assert_msg(strstr(kvt_err, "earlier result") && strstr(kvt_err, "--force"), "%s", kvt_err);
    ck_assert_int_eq(kvt_sh("%s engine serve --trace %s -o %s/e", kvt_bin(), T, kvt_tmp), 2);
    ck_assert_msg(strstr(kvt_err, "earlier result") && strstr(kvt_err, "--force"), "%s", kvt_err);
    ck_assert_int_eq(kvt_sh("%s validate --trace %s -o %s/v", kvt_bin(), T, kvt_tmp), 2);
    ck_assert_msg(strstr(kvt_err, "earlier result") && strstr(kvt_err, "--force"), "%s", kvt_err);
    assert_same("a", a0);
    assert_same("e", e0);
    assert_same("v", v0);
    free(a0), free(e0), free(v0);
    // the trace inside the directory --force would replace
    kvt_sh("cp %s %s/e/t.jsonl", T, kvt_tmp);
    e0 = tree_sum("e");
    ck_assert_int_eq(
        kvt_sh("%s engine serve --trace %s/e/t.jsonl -o %s/e --force", kvt_bin(), kvt_tmp, kvt_tmp),
        2);
    ck_assert_msg(strstr(kvt_err, "lies inside"), "%s", kvt_err);
    assert_same("e", e0);
    free(e0);
    // assess with --force replaces its directory whole
    ck_assert_int_eq(kvt_sh("%s assess %s --scenario scenarios/quickstart.yaml "
                            "--set workload.limit_requests=60 -q -o %s/a --force",
                            kvt_bin(), T, kvt_tmp),
                     0);
    ck_assert_int_eq(kvt_sh("ls %s/a", kvt_tmp), 0);
    ck_assert_msg(strstr(kvt_out, "assess.json") && !strstr(kvt_out, "keep"), "%s", kvt_out);
    ck_assert_int_eq(leftovers("a."), 0);
}
END_TEST

// ---- literal values --------------------------------------------------------------------------
START_TEST(test_trace_and_seed_are_literal) {
    // a file named 'x #1.jsonl' beside one named 'x': --trace must read the first
    kvt_sh("head -n 40 traces/data/mooncake_conversation.jsonl > '%s/x #1.jsonl' && "
           "head -n 10 traces/data/mooncake_conversation.jsonl > %s/x",
           kvt_tmp, kvt_tmp);
    ck_assert_int_eq(kvt_sh("%s run scenarios/quickstart.yaml --trace '%s/x #1.jsonl' -q "
                            "--no-report -o %s/r",
                            kvt_bin(), kvt_tmp, kvt_tmp),
                     0);
    char p[256];
    snprintf(p, sizeof p, "%s/r/summary.json", kvt_tmp);
    json_error_t je;
    json_t *s = json_load_file(p, 0, &je);
    ck_assert_msg(s, "%s: %s", p, je.text);
    const char *tr = json_string_value(
        json_object_get(json_object_get(json_object_get(s, "config"), "workload"), "trace"));
    ck_assert_msg(tr && strstr(tr, "x #1.jsonl"), "trace %s", tr ? tr : "(none)");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(s, "requests"), "arrived")),
                     40);
    json_decref(s);
    // YAML syntax in the value is text: a trace named "null" or "[a]" is that file
    ck_assert_int_eq(kvt_sh("%s run scenarios/quickstart.yaml --trace '[a, b]' -q --no-report "
                            "-o %s/q",
                            kvt_bin(), kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "[a, b]") && strstr(kvt_err, "workload.trace"), "%s", kvt_err);
    ck_assert_int_eq(
        kvt_sh("%s run scenarios/quickstart.yaml --seed '5 # x' -q -o %s/q", kvt_bin(), kvt_tmp),
        2);
    ck_assert_msg(strstr(kvt_err, "seed") && strstr(kvt_err, "5 # x"), "%s", kvt_err);
    ck_assert_int_eq(
        kvt_sh("%s run scenarios/quickstart.yaml --seed '{a: 1}' -q -o %s/q", kvt_bin(), kvt_tmp),
        2);
    ck_assert_msg(strstr(kvt_err, "seed"), "%s", kvt_err);
}
END_TEST

START_TEST(test_assess_refuses_trace_keys) {
    const char *T = "traces/data/mooncake_conversation.jsonl";
    const char *keys[] = {"workload.trace=traces/data/azure2023_conv.csv", "workload.format=azure",
                          "workload.generate.profile=chatbot", "'workload={trace: x}'",
                          "' workload.trace =x'"};
    const char *named[] = {"workload.trace", "workload.format", "workload.generate.profile",
                           "workload=", "workload.trace"};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(
            kvt_sh("%s assess %s --set %s -q -o %s/a%d", kvt_bin(), T, keys[i], kvt_tmp, i), 2);
        ck_assert_msg(strstr(kvt_err, named[i]) && strstr(kvt_err, "changes the trace"), "%s: %s",
                      keys[i], kvt_err);
    }
    ck_assert_int_eq(leftovers("a"), 0);   // nothing written
}
END_TEST

// ---- keys that cannot apply --------------------------------------------------------------------
START_TEST(test_economics_class_names_checked) {
    // every class a trace names takes a price; any other name is refused
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        rpt_econ_config c;
        rpt_econ_config_default(&c);
        kvf_err err = {0};
        char key[96];
        snprintf(key, sizeof key, "prices_per_mtok.%s.output", trc_class_name(k));
        ck_assert_msg(rpt_econ_config_set(&c, key, "1.5", &err) == KVF_OK, "%s: %s", key, err.msg);
    }
    rpt_econ_config c;
    rpt_econ_config_default(&c);
    kvf_err err = {0};
    ck_assert_int_eq(rpt_econ_config_set(&c, "prices_per_mtok.chatbt.output", "1", &err),
                     KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "chatbt") && strstr(err.msg, "chatbot"), "%s", err.msg);
    // from the command line and from a file (file:line: key)
    ck_assert_int_eq(kvt_sh("%s run scenarios/quickstart.yaml --set "
                            "economics.prices_per_mtok.chatbt.output=1 -q -o %s/r",
                            kvt_bin(), kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "economics.prices_per_mtok.chatbt.output") &&
                      strstr(kvt_err, "unknown class"),
                  "%s", kvt_err);
    kvt_sh("sed \"s#traces/data#$PWD/traces/data#\" scenarios/quickstart.yaml > %s/s.yaml && "
           "printf 'economics:\\n  prices_per_mtok:\\n    codng:\\n      input: 1\\n' >> %s/s.yaml",
           kvt_tmp, kvt_tmp);
    ck_assert_int_eq(kvt_sh("%s run %s/s.yaml -q -o %s/r", kvt_bin(), kvt_tmp, kvt_tmp), 2);
    ck_assert_msg(strstr(kvt_err, "s.yaml:") && strstr(kvt_err, "prices_per_mtok.codng.input") &&
                      strstr(kvt_err, "unknown class 'codng'"),
                  "%s", kvt_err);
}
END_TEST

START_TEST(test_vision_keys_need_a_vision_model) {
    const char *sets[] = {"cluster.vision.instances=1", "cluster.vision.gpus_per_instance=2",
                          "cluster.vision.max_batch_requests=8"};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(
            kvt_sh("%s run " SMALL " --set %s -o %s/v%d", kvt_bin(), sets[i], kvt_tmp, i), 2);
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(strchr(sets[i], '=') - sets[i]), sets[i]);
        ck_assert_msg(strstr(kvt_err, key) && strstr(kvt_err, "text only"), "%s: %s", sets[i],
                      kvt_err);
    }
    // beside a model with a vision encoder the pool runs and is billed
    ck_assert_int_eq(kvt_sh("%s run " SMALL " --set model=gemma-3-27b --set "
                            "cluster.vision.instances=1 -o %s/g",
                            kvt_bin(), kvt_tmp),
                     0);
    // a resolved configuration written back names every vision key at its default: it runs
    ck_assert_int_eq(kvt_sh("%s run " SMALL " -o %s/t && python3 -c \"import json,sys; "
                            "print(json.dumps(json.load(open(sys.argv[1]))['config']))\" "
                            "%s/t/summary.json > %s/again.json && %s run %s/again.json -q "
                            "--no-report -o %s/t2",
                            kvt_bin(), kvt_tmp, kvt_tmp, kvt_tmp, kvt_bin(), kvt_tmp, kvt_tmp),
                     0);
}
END_TEST

START_TEST(test_days_mode_refuses_keys_it_ignores) {
    const char *sets[] = {"workload.generate.arrival=gamma", "workload.generate.cv=3",
                          "workload.generate.duration_s=100"};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(kvt_sh("%s run scenarios/fleet-days.yaml --set %s -q -o %s/d%d", kvt_bin(),
                                sets[i], kvt_tmp, i),
                         2);
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(strchr(sets[i], '=') - sets[i]), sets[i]);
        ck_assert_msg(strstr(kvt_err, key) && strstr(kvt_err, "does not apply") &&
                          strstr(kvt_err, "days"),
                      "%s: %s", sets[i], kvt_err);
    }
    // a days-mode configuration written back (every generator key at its value) runs
    ck_assert_int_eq(kvt_sh("%s run scenarios/quickstart.yaml --set 'workload.generate={profile: "
                            "chatbot, rate_rps: 0.002, days: 1}' -q --no-report -o %s/dd && "
                            "python3 -c \"import json,sys; print(json.dumps(json.load(open("
                            "sys.argv[1]))['config']))\" %s/dd/summary.json > %s/dd.json && "
                            "%s run %s/dd.json -q --no-report -o %s/dd2",
                            kvt_bin(), kvt_tmp, kvt_tmp, kvt_tmp, kvt_bin(), kvt_tmp, kvt_tmp),
                     0);
    // without days the same keys apply
    ck_assert_int_eq(kvt_sh("%s run " SMALL " --set 'workload.generate={profile: chatbot, "
                            "rate_rps: 2, duration_s: 30, arrival: gamma, cv: 3}' -o %s/n",
                            kvt_bin(), kvt_tmp),
                     0);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("outputs_safety");
    TCase *sig = tcase_create("signals");
    tcase_add_checked_fixture(sig, setup, teardown);
    tcase_set_timeout(sig, 600);
    tcase_add_test(sig, test_sigterm_during_force_keeps_result);
    tcase_add_test(sig, test_sigint_during_force_keeps_result);
    tcase_add_test(sig, test_sigkill_during_force_keeps_result);
    tcase_add_test(sig, test_interrupt_without_earlier_result_keeps_partial);
    suite_add_tcase(s, sig);
    TCase *files = tcase_create("files");
    tcase_add_checked_fixture(files, setup, teardown);
    tcase_set_timeout(files, 600);
    tcase_add_test(files, test_symlinked_lock_refused);
    tcase_add_test(files, test_user_files_beside_output_kept);
    tcase_add_test(files, test_output_equal_to_input_refused);
    tcase_add_test(files, test_other_commands_keep_result_unless_force);
    suite_add_tcase(s, files);
    TCase *keys = tcase_create("keys");
    tcase_add_checked_fixture(keys, setup, teardown);
    tcase_set_timeout(keys, 600);
    tcase_add_test(keys, test_trace_and_seed_are_literal);
    tcase_add_test(keys, test_assess_refuses_trace_keys);
    tcase_add_test(keys, test_economics_class_names_checked);
    tcase_add_test(keys, test_vision_keys_need_a_vision_model);
    tcase_add_test(keys, test_days_mode_refuses_keys_it_ignores);
    suite_add_tcase(s, keys);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
