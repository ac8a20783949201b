// tests/test_assess.c -- the shared-store replay (hit rates worked by hand on a three-request
// trace) and `kvfleet assess` on the bundled Mooncake trace and the agentic sessions: the
// ideal hit rate equals `trace stats`, the store grid is simulated (monotone in size and
// retention, reaching the ideal only unbounded and kept long enough), both runs of the
// reference design are there, the request counts are the trace's, and bad input exits 2.
// A separate regression case pins the figures traces/data/README.md quotes.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "trc.h"

// Three requests on 64-token blocks: r0 at 0 s [1,2,3] (192 tokens), r1 at 10 s [1,2,3,4]
// (256), r2 at 1000 s [1,2,5] (192). 640 input tokens.
static void hand_trace(const char *path) {
    trc_writer *w;
    kvf_err err = {0};
    ck_assert_msg(trc_writer_open(&w, path, 64, &err) == KVF_OK, "%s", err.msg);
    static const uint64_t b0[] = {1, 2, 3}, b1[] = {1, 2, 3, 4}, b2[] = {1, 2, 5};
    const struct {
        int64_t t_s;
        uint32_t in;
        const uint64_t *b;
        uint32_t n;
    } rq[] = {{0, 192, b0, 3}, {10, 256, b1, 4}, {1000, 192, b2, 3}};
    for (int i = 0; i < 3; i++) {
        trc_request q = {.id = (uint64_t)i,
                         .arrival_ns = rq[i].t_s * 1000000000LL,
                         .input_tokens = rq[i].in,
                         .output_tokens = 10,
                         .prev_id = -1,
                         .n_blocks = rq[i].n,
                         .blocks = rq[i].b};
        ck_assert_msg(trc_writer_put(w, &q, &err) == KVF_OK, "%s", err.msg);
    }
    ck_assert_msg(trc_writer_close(w, &err) == KVF_OK, "%s", err.msg);
}

static double replay(const trc_replay *p, uint64_t cap, double ttl) {
    double h = NAN;
    kvf_err err = {0};
    ck_assert_msg(trc_replay_hit_rate(p, cap, ttl, &h, &err) == KVF_OK, "%s", err.msg);
    return h;
}

START_TEST(test_replay_hand_worked) {
    kvt_tmp_make("kvf_assess");
    char path[128];
    snprintf(path, sizeof path, "%s/hand.jsonl", kvt_tmp);
    hand_trace(path);
    trc_options o;
    trc_options_default(&o);
    o.block_tokens = 64;
    trc_reader *r;
    kvf_err err = {0};
    ck_assert_msg(trc_reader_open(&r, path, &o, &err) == KVF_OK, "%s", err.msg);
    trc_replay *p;
    ck_assert_msg(trc_replay_load(r, &p, &err) == KVF_OK, "%s", err.msg);
    trc_reader_close(r);
    ck_assert_uint_eq(trc_replay_requests(p), 3);
    ck_assert_uint_eq(trc_replay_distinct_blocks(p), 5);
    // unbounded, never: r1 hits 3 blocks (192), r2 hits 2 (128): 320 / 640
    ck_assert_double_eq_tol(replay(p, 0, 0), 0.5, 1e-12);
    // retention 100 s: r2 comes 990 s after the last use of [1,2]: nothing left -> 192 / 640
    ck_assert_double_eq_tol(replay(p, 0, 100), 0.3, 1e-12);
    // retention 990 s exactly has expired: an entry whose age reaches its retention is gone,
    // the rule the simulator's store keeps too (sim/cluster/kv/sim_kv.c), so assess and run agree
    ck_assert_double_eq_tol(replay(p, 0, 990), 0.3, 1e-12);
    // one nanosecond longer keeps it
    ck_assert_double_eq_tol(replay(p, 0, 990.000000001), 0.5, 1e-12);
    // 3 blocks: r1 hits 3; its touches 4,3,2,1 cycle the store back to [1,2,3]; r2 hits 2
    ck_assert_double_eq_tol(replay(p, 3, 0), 0.5, 1e-12);
    // 2 blocks: after r0 the store holds [1,2]; r1 hits 2 (128) and ends with [1,2]; r2 hits
    // 2 (128): 256 / 640
    ck_assert_double_eq_tol(replay(p, 2, 0), 0.4, 1e-12);
    // 1 block: [1] after r0; r1 hits 1 (64); r2 hits 1 (64): 128 / 640
    ck_assert_double_eq_tol(replay(p, 1, 0), 0.2, 1e-12);
    // the one-pass grid gives the same figures
    const uint64_t caps[] = {1, 2, 3, 0};
    const double ttls[] = {100, 990, 0};
    double g[12];
    ck_assert_int_eq(trc_replay_grid(p, caps, 4, ttls, 3, g, &err), KVF_OK);
    for (int c = 0; c < 4; c++)
        for (int t = 0; t < 3; t++)
            ck_assert_double_eq_tol(g[c * 3 + t], replay(p, caps[c], ttls[t]), 1e-15);
    trc_replay_free(p);
    // the unbounded store kept forever is trace stats' ideal
    trc_stats st;
    ck_assert_msg(trc_stats_file(path, &o, &st, &err) == KVF_OK, "%s", err.msg);
    ck_assert_double_eq_tol(st.ideal_hit_rate, 0.5, 1e-12);
    kvt_tmp_remove();
}
END_TEST

// The one-pass grid equals a replay of each store, cell by cell, on real traffic (the first
// 3,000 Mooncake requests: bursts of equal timestamps, 512-token blocks split in eight).
START_TEST(test_replay_grid_equals_lru) {
    trc_options o;
    trc_options_default(&o);
    o.limit_requests = 3000;
    trc_reader *r;
    kvf_err err = {0};
    ck_assert_msg(trc_reader_open(&r, kvt_shared_trace("mooncake_conversation.jsonl"), &o, &err) ==
                      KVF_OK,
                  "%s", err.msg);
    trc_replay *p;
    ck_assert_msg(trc_replay_load(r, &p, &err) == KVF_OK, "%s", err.msg);
    trc_reader_close(r);
    uint64_t d = trc_replay_distinct_blocks(p);
    const uint64_t caps[] = {d / 100, d / 20, d / 3, 0};
    const double ttls[] = {30, 300, 1800, 0};
    double g[16];
    ck_assert_int_eq(trc_replay_grid(p, caps, 4, ttls, 4, g, &err), KVF_OK);
    for (int c = 0; c < 4; c++)
        for (int t = 0; t < 4; t++) {
            double h = replay(p, caps[c], ttls[t]);
            ck_assert_msg(fabs(g[c * 4 + t] - h) < 1e-12, "cap %llu ttl %g: grid %.9f, LRU %.9f",
                          (unsigned long long)caps[c], ttls[t], g[c * 4 + t], h);
        }
    ck_assert(g[0] < g[3 * 4 + 3]);   // not all equal: the grid separates its cells
    trc_replay_free(p);
}
END_TEST

START_TEST(test_assess_bad_input) {
    kvt_tmp_make("kvf_assess");
    ck_assert_int_eq(kvt_sh("%s assess", kvt_bin()), 2);
    ck_assert_int_eq(kvt_sh("%s assess --help", kvt_bin()), 0);
    ck_assert_msg(strstr(kvt_out, "usage: kvfleet assess TRACE") != NULL, "%s", kvt_out);
    ck_assert_int_eq(kvt_sh("%s assess %s/missing.jsonl -o %s/o", kvt_bin(), kvt_tmp, kvt_tmp), 2);
    ck_assert_msg(strstr(kvt_err, "missing.jsonl") != NULL, "%s", kvt_err);
    // a Mooncake line with a bad field: named by file and line
    char path[128];
    snprintf(path, sizeof path, "%s/bad.jsonl", kvt_tmp);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 5, \"hash_ids\": [1]}\n"
          "{\"timestamp\": 10, \"input_length\": -4, \"output_length\": 5, \"hash_ids\": [1]}\n",
          f);
    fclose(f);
    ck_assert_int_eq(kvt_sh("%s assess %s -o %s/o", kvt_bin(), path, kvt_tmp), 2);
    ck_assert_msg(strstr(kvt_err, "bad.jsonl:2") != NULL, "%s", kvt_err);
    ck_assert_int_eq(kvt_sh("%s assess %s --bogus", kvt_bin(), path), 2);
    ck_assert_int_eq(kvt_sh("%s assess %s --set kv_cache.nonsense=1 -o %s/o", kvt_bin(),
                            kvt_shared_trace("mooncake_conversation.jsonl"), kvt_tmp),
                     2);
    ck_assert_msg(strstr(kvt_err, "kv_cache.nonsense") != NULL, "%s", kvt_err);
    kvt_tmp_remove();
}
END_TEST

// Runs assess on trace, checks what holds for any trace, returns the parsed assess.json.
static json_t *assess(const char *trace) {
    ck_assert_msg(access(trace, R_OK) == 0, "%s not readable", trace);
    kvt_tmp_make("kvf_assess");
    int rc = kvt_sh("%s assess %s --json -o %s/a", kvt_bin(), trace, kvt_tmp);
    ck_assert_msg(rc == 0, "assess exited %d: %s", rc, kvt_err);
    json_error_t je;
    json_t *j = json_loads(kvt_out, 0, &je);
    ck_assert_msg(j, "stdout is not JSON: %s", je.text);
    // the ideal hit rate is the one `trace stats` prints
    rc = kvt_sh("%s trace stats %s --json", kvt_bin(), trace);
    ck_assert_int_eq(rc, 0);
    json_t *ts = json_loads(kvt_out, 0, &je);
    ck_assert_msg(ts, "trace stats --json: %s", je.text);
    double ideal = kvt_num(j, "ideal_hit_rate");
    ck_assert_double_eq_tol(ideal, kvt_num(ts, "ideal_hit_rate"), 1e-6);
    json_decref(ts);
    // the grid: rows by size (last unbounded), columns by retention (last never)
    json_t *grid = json_object_get(j, "store_grid");
    size_t nz = json_array_size(grid), nt = json_array_size(json_object_get(j, "retention_s"));
    ck_assert(nz >= 4 && nt >= 4);
    double prev_row[16];
    for (size_t z = 0; z < nz; z++) {
        json_t *row = json_array_get(grid, z);
        json_t *hr = json_object_get(row, "hit_rate");
        ck_assert_uint_eq(json_array_size(hr), nt);
        ck_assert(kvt_num(row, "size_bytes") > 0);
        for (size_t t = 0; t < nt; t++) {
            double h = json_number_value(json_array_get(hr, t));
            ck_assert(h >= 0 && h <= ideal + 1e-12);
            if (t)
                ck_assert_msg(h >= json_number_value(json_array_get(hr, t - 1)) - 1e-12,
                              "size %zu: hit rate falls with longer retention", z);
            if (z) ck_assert_msg(h >= prev_row[t] - 1e-12, "retention %zu: falls with size", t);
            prev_row[t] = h;
        }
    }
    // unbounded and kept forever reaches the ideal; the smallest store does not
    ck_assert_double_eq_tol(prev_row[nt - 1], ideal, 1e-12);
    double smallest = json_number_value(
        json_array_get(json_object_get(json_array_get(grid, 0), "hit_rate"), nt - 1));
    ck_assert_msg(smallest < ideal - 0.01, "1 %% store %.4f vs ideal %.4f", smallest, ideal);
    // both runs of the reference design, with costs
    const char *runs[] = {"with_store", "no_store"};
    for (int i = 0; i < 2; i++) {
        json_t *r = json_object_get(j, runs[i]);
        ck_assert_ptr_nonnull(r);
        ck_assert(kvt_num(r, "requests_completed") > 0);
        ck_assert(kvt_num(r, "cost_per_mtok_usd_provisioned") > 0);
        ck_assert(kvt_num(r, "cost_per_mtok_usd_busy") > 0);
        ck_assert(kvt_num(r, "cost_per_mtok_usd_busy") <=
                  kvt_num(r, "cost_per_mtok_usd_provisioned") + 1e-12);
    }
    ck_assert_double_eq_tol(kvt_num(json_object_get(j, "no_store"), "ssd_tb_billed"), 0, 1e-12);
    ck_assert(kvt_num(json_object_get(j, "with_store"), "ssd_tb_billed") > 0);
    ck_assert(kvt_num(json_object_get(j, "with_store"), "hit_rate") >=
              kvt_num(json_object_get(j, "no_store"), "hit_rate") - 1e-9);
    // the page and the two runs are written
    char p[200];
    snprintf(p, sizeof p, "%s/a/assess.html", kvt_tmp);
    char *html = kvt_slurp(p);
    ck_assert(strstr(html, "id=\"assess-store-grid\"") && strstr(html, "id=\"assess-cost\"") &&
              strstr(html, "id=\"assess-ideal\""));
    free(html);
    snprintf(p, sizeof p, "%s/a/no_store/summary.json", kvt_tmp);
    ck_assert_int_eq(access(p, R_OK), 0);
    kvt_tmp_remove();
    return j;
}

// Correctness: what the trace itself says, derived apart from assess. Mooncake's format is one
// JSON request per line, so its request count is the file's line count; the agentic sessions
// nest requests in sessions (and subagents), so there the count is `trace stats`'s.
static long lines_of(const char *path) {
    char *txt = kvt_slurp(path);
    long n = kvt_count(txt, "\n");
    free(txt);
    return n;
}

static double stats_requests(const char *trace) {
    kvt_tmp_make("kvf_assess_stats");   // kvt_sh keeps stderr there
    int rc = kvt_sh("%s trace stats %s --json", kvt_bin(), trace);
    ck_assert_msg(rc == 0, "trace stats exited %d: %s", rc, kvt_err);
    json_error_t je;
    json_t *ts = json_loads(kvt_out, 0, &je);
    ck_assert_msg(ts, "trace stats --json: %s", je.text);
    double n = kvt_num(ts, "requests");
    json_decref(ts);
    kvt_tmp_remove();
    return n;
}

START_TEST(test_assess_mooncake) {
    const char *trace = kvt_shared_trace("mooncake_conversation.jsonl");
    json_t *j = assess(trace);
    long n = lines_of(trace);
    ck_assert_msg(kvt_num(j, "requests") == n, "assess counts %.0f requests, the file has %ld",
                  kvt_num(j, "requests"), n);
    json_decref(j);
}
END_TEST

// assess reads the trace for its ideal and its store grid as its runs read it: shaped by the
// --set keys. With the first 2,000 of the Mooncake trace's 12,031 requests the ideal is
// `trace stats --limit 2000`'s (0.2941), beside runs of those 2,000; it was the whole trace's
// (0.3736), so the store seemed to reach 79 % of an ideal it in fact reached.
START_TEST(test_assess_shaped_workload) {
    const char *trace = kvt_shared_trace("mooncake_conversation.jsonl");
    kvt_tmp_make("kvf_assess_shaped");
    int rc = kvt_sh("%s assess %s --set workload.limit_requests=2000 --json -o %s/a", kvt_bin(),
                    trace, kvt_tmp);
    ck_assert_msg(rc == 0, "assess exited %d: %s", rc, kvt_err);
    json_error_t je;
    json_t *j = json_loads(kvt_out, 0, &je);
    ck_assert_msg(j, "stdout is not JSON: %s", je.text);
    ck_assert_int_eq(kvt_sh("%s trace stats %s --limit 2000 --json", kvt_bin(), trace), 0);
    json_t *ts = json_loads(kvt_out, 0, &je);
    ck_assert_msg(ts, "trace stats --json: %s", je.text);
    ck_assert_msg(kvt_num(j, "requests") == 2000 &&
                      kvt_num(json_object_get(j, "with_store"), "requests_completed") == 2000,
                  "assess %g requests, its run %g", kvt_num(j, "requests"),
                  kvt_num(json_object_get(j, "with_store"), "requests_completed"));
    ck_assert_msg(fabs(kvt_num(j, "ideal_hit_rate") - kvt_num(ts, "ideal_hit_rate")) < 1e-6,
                  "ideal %.6f, trace stats --limit 2000 %.6f", kvt_num(j, "ideal_hit_rate"),
                  kvt_num(ts, "ideal_hit_rate"));
    json_decref(ts);
    json_decref(j);
    kvt_tmp_remove();
}
END_TEST

// A sampled run (workload.sample_rate below 1) simulates part of the trace, while the ideal and
// the store grid read all of it: the first 300 Mooncake requests at R = 0.5 printed an ideal of
// 0.0810 beside a run hitting 0.1009. assess refuses the key (exit 2, naming it and where it was
// set, by --set or by the scenario), writes nothing, and runs at R = 1.
START_TEST(test_assess_refuses_sampling) {
    kvt_tmp_make("kvf_assess_sampled");
    const char *trace = kvt_shared_trace("mooncake_conversation.jsonl");
    int rc = kvt_sh("%s assess %s --scenario scenarios/quickstart.yaml --set "
                    "workload.limit_requests=300 --set workload.sample_rate=0.5 --json -o %s/a",
                    kvt_bin(), trace, kvt_tmp);
    ck_assert_msg(rc == 2 && strstr(kvt_err, "--set workload.sample_rate"),
                  "sample_rate 0.5: exit %d: %s", rc, kvt_err);
    char p[200];
    snprintf(p, sizeof p, "%s/a/assess.json", kvt_tmp);
    ck_assert_msg(access(p, F_OK) != 0, "a refused assess wrote %s", p);
    // a scenario sampling its own workload: named by file and line
    rc = kvt_sh("%s assess %s --scenario scenarios/fleet-day-v41.yaml --set "
                "workload.limit_requests=300 --json -o %s/b",
                kvt_bin(), trace, kvt_tmp);
    ck_assert_msg(rc == 2 && strstr(kvt_err, "fleet-day-v41.yaml:") &&
                      strstr(kvt_err, "workload.sample_rate"),
                  "sampled scenario: exit %d: %s", rc, kvt_err);
    rc = kvt_sh("%s assess %s --scenario scenarios/quickstart.yaml --set "
                "workload.limit_requests=300 --set workload.sample_rate=1 --json -o %s/c",
                kvt_bin(), trace, kvt_tmp);
    ck_assert_msg(rc == 0, "sample_rate 1: exit %d: %s", rc, kvt_err);
    kvt_tmp_remove();
}
END_TEST

START_TEST(test_assess_agentic) {
    const char *trace = kvt_shared_trace("weka_agentic_dev.jsonl");
    json_t *j = assess(trace);
    double n = stats_requests(trace);
    ck_assert_msg(kvt_num(j, "requests") == n, "assess counts %.0f requests, trace stats %.0f",
                  kvt_num(j, "requests"), n);
    // sessions last hours: a 5-minute retention loses reuse an unbounded store keeps
    json_t *grid = json_object_get(j, "store_grid");
    json_t *last = json_object_get(json_array_get(grid, json_array_size(grid) - 1), "hit_rate");
    ck_assert(json_number_value(json_array_get(last, 0)) <
              json_number_value(json_array_get(last, json_array_size(last) - 1)) - 0.01);
    json_decref(j);
}
END_TEST

// Regression (change detector, CTest label `regression`): the figures traces/data/README.md
// quotes (ideal hit rate 37.4 % and 97.1 %, 12,031 and 2,641 requests), pinned because they are
// what the code printed when the README was written, not derived here. A failure means the
// README is out of date or the trace reader changed; the correctness checks are the cases
// above (ideal equals `trace stats`, the grid's bounds, the counts from the file).
START_TEST(test_assess_readme_figures) {
    static const struct {
        const char *trace;
        double ideal, requests;
    } pin[] = {{"mooncake_conversation.jsonl", 0.374, 12031},
               {"weka_agentic_dev.jsonl", 0.971, 2641}};
    kvt_tmp_make("kvf_assess_pins");   // kvt_sh keeps stderr there
    for (int i = 0; i < 2; i++) {
        const char *trace = kvt_shared_trace(pin[i].trace);
        ck_assert_msg(access(trace, R_OK) == 0, "%s not readable (KVF_SHARED)", trace);
        ck_assert_int_eq(kvt_sh("%s trace stats %s --json", kvt_bin(), trace), 0);
        json_error_t je;
        json_t *ts = json_loads(kvt_out, 0, &je);
        ck_assert_msg(ts, "trace stats --json: %s", je.text);
        double ideal = kvt_num(ts, "ideal_hit_rate"), n = kvt_num(ts, "requests");
        ck_assert_msg(fabs(ideal - pin[i].ideal) <= 0.001 && n == pin[i].requests,
                      "%s: ideal %.4f, %.0f requests; the README says %.3f, %.0f", pin[i].trace,
                      ideal, n, pin[i].ideal, pin[i].requests);
        json_decref(ts);
    }
    kvt_tmp_remove();
}
END_TEST

// On every bundled trace (traces/data/, $KVF_SHARED/traces/; files `trace stats` cannot read,
// such as a lengths table, are skipped and named), the reference design's simulated hit rate,
// with and without the store, never exceeds the ideal (one definition: an unbounded store kept
// forever, a closed-loop turn's answer blocks included), which equals `trace stats`; a design
// busy less than a quarter of its GPU time says so in "warnings" and on the page.
START_TEST(test_assess_simulated_within_ideal) {
    kvt_tmp_make("kvf_assess_ideal");
    const char *names[] = {"mooncake_conversation.jsonl", "azure2023_conv.csv",
                           "sarathi_sharegpt8k_lengths.csv", "weka_agentic_dev.jsonl"};
    int checked = 0;
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            char trace[1024];
            if (d == 0)
                snprintf(trace, sizeof trace, "%s/traces/data/%s", kvt_src(), names[i]);
            else {   // the shared copy of a trace bundled here is the same file
                snprintf(trace, sizeof trace, "%s/traces/data/%s", kvt_src(), names[i]);
                if (access(trace, R_OK) == 0) continue;
                snprintf(trace, sizeof trace, "%s", kvt_shared_trace(names[i]));
            }
            if (access(trace, R_OK) != 0) continue;
            if (kvt_sh("%s trace stats %s --json", kvt_bin(), trace) != 0) {
                fprintf(stderr, "test_assess_simulated_within_ideal: %s is not a trace: skipped\n",
                        trace);
                continue;
            }
            json_error_t je;
            json_t *ts = json_loads(kvt_out, 0, &je);
            ck_assert_msg(ts, "trace stats --json: %s", je.text);
            int rc = kvt_sh("%s assess %s --json --force -o %s/a", kvt_bin(), trace, kvt_tmp);
            ck_assert_msg(rc == 0, "assess %s: exit %d: %.2000s", trace, rc, kvt_err);
            json_t *j = json_loads(kvt_out, 0, &je);
            ck_assert_msg(j, "assess --json: %s", je.text);
            double ideal = kvt_num(j, "ideal_hit_rate");
            ck_assert_msg(fabs(ideal - kvt_num(ts, "ideal_hit_rate")) <= 1e-6,
                          "%s: assess ideal %.6f, trace stats %.6f", trace, ideal,
                          kvt_num(ts, "ideal_hit_rate"));
            static const char *const runs[] = {"with_store", "no_store"};
            for (int r = 0; r < 2; r++) {
                double h = kvt_num(json_object_get(j, runs[r]), "hit_rate");
                ck_assert_msg(h <= ideal + 1e-6,
                              "%s: %s simulated hit rate %.6f above the ideal %.6f", trace, runs[r],
                              h, ideal);
            }
            double busy = kvt_num(json_object_get(j, "with_store"), "busy_share");
            json_t *w = json_object_get(j, "warnings");
            ck_assert_msg(json_is_array(w), "%s: no warnings array", trace);
            bool warned = json_array_size(w) > 0 &&
                          strstr(json_string_value(json_array_get(w, 0)), "idle") != NULL;
            ck_assert_msg(warned == (busy < 0.25), "%s: busy %.4f, %zu warnings", trace, busy,
                          json_array_size(w));
            char p[300];
            snprintf(p, sizeof p, "%s/a/assess.html", kvt_tmp);
            char *html = kvt_slurp(p);
            ck_assert_msg((strstr(html, "id=\"hl-warnings\"") != NULL) == warned,
                          "%s: page and JSON disagree on the warning", trace);
            free(html);
            json_decref(j);
            json_decref(ts);
            checked++;
        }
    ck_assert_msg(checked >= 3, "only %d bundled traces checked", checked);
    kvt_tmp_remove();
}
END_TEST

// A closed-loop turn's answer: r0 [1,2] (128 input + 64 output tokens: its answer fills block
// 3), r1 waits for r0 with [1,2,3,4] (256 tokens). The simulator's store holds block 3 when r1
// is looked up, so r1 hits 3 blocks (192 of 384 tokens in all) in the replay, the grid and
// `trace stats`' ideal alike; r2, open loop with the same blocks, gets no answer credit.
START_TEST(test_replay_answer_blocks) {
    kvt_tmp_make("kvf_assess_ans");
    char path[128];
    snprintf(path, sizeof path, "%s/turns.jsonl", kvt_tmp);
    trc_writer *w;
    kvf_err err = {0};
    ck_assert_msg(trc_writer_open(&w, path, 64, &err) == KVF_OK, "%s", err.msg);
    static const uint64_t b0[] = {1, 2}, b1[] = {1, 2, 3, 4};
    trc_request q0 = {.id = 0,
                      .arrival_ns = 0,
                      .input_tokens = 128,
                      .output_tokens = 64,
                      .session = 1,
                      .prev_id = -1,
                      .n_blocks = 2,
                      .blocks = b0};
    trc_request q1 = {.id = 1,
                      .arrival_ns = 5000000000LL,
                      .input_tokens = 256,
                      .output_tokens = 8,
                      .session = 1,
                      .turn = 1,
                      .prev_id = 0,
                      .n_blocks = 4,
                      .blocks = b1};
    ck_assert_msg(trc_writer_put(w, &q0, &err) == KVF_OK, "%s", err.msg);
    ck_assert_msg(trc_writer_put(w, &q1, &err) == KVF_OK, "%s", err.msg);
    ck_assert_msg(trc_writer_close(w, &err) == KVF_OK, "%s", err.msg);
    trc_options o;
    trc_options_default(&o);
    o.block_tokens = 64;
    trc_reader *r;
    ck_assert_msg(trc_reader_open(&r, path, &o, &err) == KVF_OK, "%s", err.msg);
    trc_replay *p;
    ck_assert_msg(trc_replay_load(r, &p, &err) == KVF_OK, "%s", err.msg);
    trc_reader_close(r);
    ck_assert_uint_eq(trc_replay_requests(p), 2);
    ck_assert_double_eq_tol(replay(p, 0, 0), 0.5, 1e-12);
    uint64_t cap = 0;
    double ttl = 0, cell = NAN;
    ck_assert_msg(trc_replay_grid(p, &cap, 1, &ttl, 1, &cell, &err) == KVF_OK, "%s", err.msg);
    ck_assert_double_eq_tol(cell, 0.5, 1e-12);
    trc_replay_free(p);
    trc_stats st;
    ck_assert_msg(trc_stats_file(path, &o, &st, &err) == KVF_OK, "%s", err.msg);
    ck_assert_double_eq_tol(st.ideal_hit_rate, 0.5, 1e-12);
    kvt_tmp_remove();
}
END_TEST

// Two cases, each its own CTest test (CK_RUN_CASE): "assess" (correctness) and "regression"
// (the README's figures, labelled regression). Both traces are always there (the agentic one in
// $KVF_SHARED/traces): a missing one fails, it is not skipped.
int main(void) {
    Suite *s = suite_create("assess");
    TCase *t = tcase_create("assess");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_replay_hand_worked);
    tcase_add_test(t, test_replay_grid_equals_lru);
    tcase_add_test(t, test_replay_answer_blocks);
    tcase_add_test(t, test_assess_bad_input);
    tcase_add_test(t, test_assess_mooncake);
    tcase_add_test(t, test_assess_shaped_workload);
    tcase_add_test(t, test_assess_refuses_sampling);
    tcase_add_test(t, test_assess_agentic);
    tcase_add_test(t, test_assess_simulated_within_ideal);
    suite_add_tcase(s, t);
    t = tcase_create("regression");
    tcase_add_test(t, test_assess_readme_figures);
    suite_add_tcase(s, t);
    return kvt_main(s);
}
