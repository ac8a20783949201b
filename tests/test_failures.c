// tests/test_failures.c -- instance failures (cluster.<pool>.failures.{mtbf_h,mttr_s,requests})
// on the quickstart's real traffic: instances fail and come back, what they held is retried
// (or rejected, counted under failure), no request is lost or counted twice, no KV is left
// held, the lost KV and the down time show in the summary, the GPUs stay billed while down,
// two runs agree, and keys that cannot apply are refused.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/kvt.h"

#define FAIL_DECODE "cluster.decode.failures.mtbf_h=0.1", "cluster.decode.failures.mttr_s=120"

static void conserved(json_t *s, const char *what) {
    double arrived = kvt_num(s, "requests.arrived");
    ck_assert_msg(kvt_num(s, "requests.completed") + kvt_num(s, "requests.rejected") == arrived,
                  "%s: %g completed + %g rejected of %g", what, kvt_num(s, "requests.completed"),
                  kvt_num(s, "requests.rejected"), arrived);
    ck_assert_msg(kvt_num(s, "invariants.kv_tokens_held_end") == 0 &&
                      kvt_num(s, "invariants.in_flight_end") == 0,
                  "%s: KV %g and %g requests left", what,
                  kvt_num(s, "invariants.kv_tokens_held_end"),
                  kvt_num(s, "invariants.in_flight_end"));
    // each request's tokens counted once: a retried try's output leaves the totals (it was
    // counted again, 713,184 produced of 704,602 requested with nothing rejected), shown apart
    ck_assert_msg(kvt_num(s, "invariants.output_tokens_requested") ==
                      kvt_num(s, "invariants.output_tokens_produced") +
                          kvt_num(s, "invariants.output_tokens_rejected"),
                  "%s: %g requested, %g produced + %g rejected", what,
                  kvt_num(s, "invariants.output_tokens_requested"),
                  kvt_num(s, "invariants.output_tokens_produced"),
                  kvt_num(s, "invariants.output_tokens_rejected"));
}

// Requests turned away because no instance of a pool was up (every decode instance down)
// are rejected_by_reason.no_instance, as their rows say (rejected:no_instance); they were
// counted as capacity rejections, which the run had none of.
START_TEST(test_no_instance_rejections_named) {
    kvt_tmp_make("kvf_fail");
    const char *sets[] = {"workload.limit_requests=2000", "cluster.decode.failures.mtbf_h=0.02",
                          "cluster.decode.failures.mttr_s=60"};
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/ni", kvt_tmp);
    json_t *s = kvt_run("quickstart.yaml", NULL, sets, 3, dir);
    conserved(s, "no instance");
    ck_assert(kvt_sh("sqlite3 %s/results.db \"select count(*) from request where status = "
                     "'rejected:no_instance'\"",
                     dir) == 0);
    double rows = atof(kvt_out);
    double sum = 0;
    const char *why[] = {"queue",   "slo",     "capacity",   "timeout",
                         "context", "failure", "no_instance"};
    for (int i = 0; i < 7; i++) {
        char k[64];
        snprintf(k, sizeof k, "requests.rejected_by_reason.%s", why[i]);
        sum += kvt_num(s, k);
    }
    ck_assert_msg(rows > 0 && kvt_num(s, "requests.rejected_by_reason.no_instance") == rows &&
                      kvt_num(s, "requests.rejected_by_reason.capacity") == 0 &&
                      sum == kvt_num(s, "requests.rejected"),
                  "%g rows rejected:no_instance; summary no_instance %g, capacity %g; reasons "
                  "sum to %g of %g",
                  rows, kvt_num(s, "requests.rejected_by_reason.no_instance"),
                  kvt_num(s, "requests.rejected_by_reason.capacity"), sum,
                  kvt_num(s, "requests.rejected"));
    json_decref(s);
}
END_TEST

// A prefill instance that fails while its step has ended and waits for a tier load (a slow SSD
// read): that step's end was taken off the queue already, and cancelling it again stopped the
// run on an internal assertion (exit 134). The run now goes on, and every request ends.
START_TEST(test_prefill_failure_while_step_waits_for_load) {
    const char *sets[] = {"workload.limit_requests=1000", "cluster.prefill.failures.mtbf_h=0.02",
                          "cluster.prefill.failures.mttr_s=30", "kv_cache.ssd.read_GBps=1"};
    json_t *s = kvt_run("quickstart.yaml", NULL, sets, 4, NULL);
    conserved(s, "prefill failing beside slow loads");
    ck_assert_msg(kvt_num(s, "failures.count") > 0, "no failure");
    json_decref(s);
}
END_TEST

START_TEST(test_failures_retry_and_reject) {
    const char *none[] = {"workload.limit_requests=6000"};
    const char *retry[] = {"workload.limit_requests=6000", FAIL_DECODE};
    const char *reject[] = {"workload.limit_requests=6000", FAIL_DECODE,
                            "cluster.decode.failures.requests=reject"};
    json_t *a = kvt_run("quickstart.yaml", NULL, none, 1, NULL);
    json_t *b = kvt_run("quickstart.yaml", NULL, retry, 3, NULL);
    json_t *c = kvt_run("quickstart.yaml", NULL, reject, 4, NULL);
    conserved(b, "retry");
    conserved(c, "reject");
    ck_assert_msg(kvt_num(b, "failures.count") > 0 && kvt_num(b, "failures.retried") > 0,
                  "no failure or no retry: %g / %g", kvt_num(b, "failures.count"),
                  kvt_num(b, "failures.retried"));
    ck_assert_msg(kvt_num(b, "failures.lost_kv_tokens") > 0 && kvt_num(b, "failures.down_s") > 0,
                  "lost KV %g, down %g s", kvt_num(b, "failures.lost_kv_tokens"),
                  kvt_num(b, "failures.down_s"));
    // the retries' prompts are counted once in the hit and miss totals: the same prompt tokens
    // as the run without failures (the same requests), the work done again shown apart
    ck_assert_msg(kvt_num(b, "cache.hit_tokens") + kvt_num(b, "cache.miss_tokens") ==
                      kvt_num(a, "cache.hit_tokens") + kvt_num(a, "cache.miss_tokens"),
                  "prompt tokens %g with retries, %g without",
                  kvt_num(b, "cache.hit_tokens") + kvt_num(b, "cache.miss_tokens"),
                  kvt_num(a, "cache.hit_tokens") + kvt_num(a, "cache.miss_tokens"));
    ck_assert_msg(kvt_num(b, "failures.redone_prompt_tokens") > 0 ||
                      kvt_num(b, "failures.redone_output_tokens") > 0,
                  "retries but no work done again");
    ck_assert_msg(kvt_num(c, "requests.rejected_by_reason.failure") > 0 &&
                      kvt_num(c, "failures.retried") == 0,
                  "reject: %g rejected for failure, %g retried",
                  kvt_num(c, "requests.rejected_by_reason.failure"),
                  kvt_num(c, "failures.retried"));
    // retries redo work: TTFT's tail is no better than without failures
    ck_assert_msg(kvt_num(b, "ttft_ms.p99") >= kvt_num(a, "ttft_ms.p99") * 0.99,
                  "TTFT p99 %g with failures, %g without", kvt_num(b, "ttft_ms.p99"),
                  kvt_num(a, "ttft_ms.p99"));
    // a failed instance's GPUs are still held: the same GPU-hours
    ck_assert_msg(
        fabs(kvt_num(b, "gpu_hours") - kvt_num(a, "gpu_hours")) <= 0.02 * kvt_num(a, "gpu_hours"),
        "GPU-hours %g with failures, %g without", kvt_num(b, "gpu_hours"), kvt_num(a, "gpu_hours"));
    json_t *d = kvt_run("quickstart.yaml", NULL, retry, 3, NULL);
    ck_assert_msg(kvt_num(d, "ttft_ms.p90") == kvt_num(b, "ttft_ms.p90") &&
                      kvt_num(d, "failures.count") == kvt_num(b, "failures.count"),
                  "two runs differ");
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
}
END_TEST

// Revenue is billed for requests served, not for ones rejected (the GPU time a rejected one
// took stays in the cost). With decode KV for one token, 398 of quickstart's first 400 requests
// are rejected after their prefill: revenue falls with the served share (before, every request
// that reached a prefill instance was billed: 1.168 against 1.219 USD). Colocated with no KV,
// all are rejected: no revenue and no billed tokens at all.
START_TEST(test_rejected_requests_not_billed) {
    const char *all[] = {"workload.limit_requests=400"};
    const char *few[] = {"workload.limit_requests=400", "cluster.decode.kv_tokens=1"};
    const char *none[] = {"workload.limit_requests=400", "cluster.mode=colocated",
                          "cluster.prefill.kv_tokens=1", "cluster.decode.kv_tokens=1"};
    json_t *a = kvt_run("quickstart.yaml", NULL, all, 1, NULL);
    json_t *b = kvt_run("quickstart.yaml", NULL, few, 2, NULL);
    json_t *c = kvt_run("quickstart.yaml", NULL, none, 4, NULL);
    double served = kvt_num(b, "requests.completed") / kvt_num(a, "requests.completed");
    ck_assert_msg(served > 0 && served < 0.05 && kvt_num(b, "requests.rejected") > 300,
                  "served share %g", served);
    double billed = kvt_num(b, "economics.revenue_usd") / kvt_num(a, "economics.revenue_usd");
    ck_assert_msg(billed > 0 && billed < 5 * served, "revenue share %g for a served share %g",
                  billed, served);
    ck_assert_msg(kvt_num(c, "requests.completed") == 0 && kvt_num(c, "requests.rejected") == 400,
                  "colocated: %g completed", kvt_num(c, "requests.completed"));
    ck_assert_msg(kvt_num(c, "economics.revenue_usd") == 0 &&
                      kvt_num(c, "economics.input_tokens_per_day") == 0,
                  "nothing served, revenue %g, input tokens a day %g",
                  kvt_num(c, "economics.revenue_usd"),
                  kvt_num(c, "economics.input_tokens_per_day"));
    // and no latency was measured: null, not 0 (which read as instant)
    const char *lat[] = {"ttft_ms", "tpot_ms", "e2e_ms", "itl_ms"};
    for (int i = 0; i < 4; i++)
        ck_assert_msg(json_is_null(json_object_get(json_object_get(c, lat[i]), "p90")) &&
                          json_is_null(json_object_get(json_object_get(c, lat[i]), "mean")),
                      "%s with nothing served is not null", lat[i]);
    ck_assert_msg(kvt_num(b, "ttft_ms.p90") > 0, "two served: TTFT p90 %g",
                  kvt_num(b, "ttft_ms.p90"));
    json_decref(a);
    json_decref(b);
    json_decref(c);
}
END_TEST

// Sums over the request rows where cond holds: input, cached, output tokens and the hit tokens
// by tier, read with sqlite3.
static void row_sums(const char *dir, const char *cond, double v[4]) {
    int rc = kvt_sh("sqlite3 -separator ' ' %s/results.db \"select total(input_tokens), "
                    "total(cached_tokens), total(output_tokens), total(hit_hbm + hit_dram + "
                    "hit_ssd) from request where %s\"",
                    dir, cond);
    ck_assert_msg(rc == 0, "sqlite3: %s", kvt_err);
    ck_assert(sscanf(kvt_out, "%lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3]) == 4);
}

// Under failures.requests=reject a request's failed try leaves the served totals, as a retried
// one's does: with quickstart's one prefill instance failing every 72 s (1,500 requests, 407
// rejected for the failures), the summary's prompt tokens were 13,342,743 against 13,121,473
// in the completed rows (the rejected tries' 221,270 scheduled tokens), and the rejected rows
// carried 1,525,312 cached tokens of lookups the totals never counted. Now the totals are the
// completed rows' and a rejected try's row carries none; with decode failing (rejects after
// prefill; a request rejected as no decode instance is up was prefilled and stays counted) the
// totals are those of every row but the failures' rejects.
START_TEST(test_failure_rejects_leave_the_totals) {
    kvt_tmp_make("kvf_fail_rej");
    const char *pre[] = {"workload.limit_requests=1500", "cluster.prefill.instances=1",
                         "cluster.prefill.failures.mtbf_h=0.02",
                         "cluster.prefill.failures.mttr_s=30",
                         "cluster.prefill.failures.requests=reject"};
    const char *dec[] = {"workload.limit_requests=1500", "cluster.decode.failures.mtbf_h=0.02",
                         "cluster.decode.failures.mttr_s=30",
                         "cluster.decode.failures.requests=reject"};
    for (int k = 0; k < 2; k++) {
        char dir[1100];
        snprintf(dir, sizeof dir, "%s/%s", kvt_tmp, k ? "decode" : "prefill");
        json_t *s = kvt_run("quickstart.yaml", NULL, k ? dec : pre, k ? 4 : 5, dir);
        const char *what = k ? "decode failing" : "prefill failing";
        conserved(s, what);
        ck_assert_msg(kvt_num(s, "requests.rejected_by_reason.failure") > 0,
                      "%s: no request rejected for a failure", what);
        double rows[4], rej[4];
        // decode failing: requests rejected for no decode instance up were prefilled, and count
        row_sums(dir, k ? "status != 'rejected:failure'" : "status = 'completed'", rows);
        row_sums(dir, "status = 'rejected:failure'", rej);
        double prompt = kvt_num(s, "cache.hit_tokens") + kvt_num(s, "cache.miss_tokens");
        double tiers = kvt_num(s, "cache.by_tier_tokens.hbm") +
                       kvt_num(s, "cache.by_tier_tokens.dram") +
                       kvt_num(s, "cache.by_tier_tokens.ssd");
        ck_assert_msg(
            prompt == rows[0] && kvt_num(s, "cache.hit_tokens") == rows[1] && tiers == rows[3],
            "%s: summary prompt %.0f, hit %.0f, by tier %.0f; rows %.0f, %.0f, %.0f", what, prompt,
            kvt_num(s, "cache.hit_tokens"), tiers, rows[0], rows[1], rows[3]);
        ck_assert_msg(kvt_num(s, "invariants.output_tokens_produced") == rows[2],
                      "%s: summary output %.0f, rows %.0f", what,
                      kvt_num(s, "invariants.output_tokens_produced"), rows[2]);
        ck_assert_msg(rej[1] == 0 && rej[2] == 0 && rej[3] == 0,
                      "%s: rejected:failure rows carry %.0f cached, %.0f output, %.0f hit tokens",
                      what, rej[1], rej[2], rej[3]);
        // throughput follows: input tokens over the run are the rows' prompt tokens
        double T = kvt_num(s, "sim.simulated_s");
        ck_assert_msg(fabs(kvt_num(s, "throughput.input_tok_s") * T - rows[0]) <= 1e-6 * rows[0],
                      "%s: input %.3f tok/s over %.3f s, rows %.0f", what,
                      kvt_num(s, "throughput.input_tok_s"), T, rows[0]);
        ck_assert_msg(kvt_num(s, "failures.rejected_prompt_tokens") > 0,
                      "%s: no prompt tokens of rejected tries", what);
        json_decref(s);
    }
    // the same holds for a request whose client gives up while it queues for prefill: its
    // lookup never counted, so its row carries no cached tokens (one prefill instance, clients
    // leaving after 5 s: the rows carried 500,224 cached tokens more than the summary's hits)
    const char *to[] = {"workload.limit_requests=1500", "cluster.prefill.instances=1",
                        "serving.client_timeout_s=5"};
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/timeout", kvt_tmp);
    json_t *s = kvt_run("quickstart.yaml", NULL, to, 3, dir);
    double rows[4];
    row_sums(dir, "1", rows);
    double tiers = kvt_num(s, "cache.by_tier_tokens.hbm") +
                   kvt_num(s, "cache.by_tier_tokens.dram") + kvt_num(s, "cache.by_tier_tokens.ssd");
    ck_assert_msg(kvt_num(s, "requests.rejected_by_reason.timeout") > 0 &&
                      kvt_num(s, "cache.hit_tokens") == rows[1] && tiers == rows[3],
                  "timeouts %g: summary hit %.0f, by tier %.0f; rows %.0f, %.0f",
                  kvt_num(s, "requests.rejected_by_reason.timeout"), kvt_num(s, "cache.hit_tokens"),
                  tiers, rows[1], rows[3]);
    json_decref(s);
    kvt_tmp_remove();
}
END_TEST

START_TEST(test_failures_keys_that_cannot_apply) {
    const char *bad[][2] = {
        {"--set cluster.decode.failures.mttr_s=60", "failures.mttr_s"},
        {"--set cluster.decode.failures.mtbf_h=1", "failures.mttr_s"},
        {"--set cluster.decode.failures.requests=reject", "failures.requests"},
        {"--set cluster.vision.failures.mtbf_h=1 --set cluster.vision.failures.mttr_s=1", "vision"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc =
            kvt_sh("%s run scenarios/quickstart.yaml %s -q --no-report -o /tmp/kvf_fl_bad --force",
                   kvt_bin(), bad[i][0]);
        ck_assert_msg(rc == 2, "%s: exit %d", bad[i][0], rc);
        ck_assert_msg(strstr(kvt_err, bad[i][1]), "%s: %s", bad[i][0], kvt_err);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("failures");
    TCase *tc = tcase_create("failures");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_failures_retry_and_reject);
    tcase_add_test(tc, test_prefill_failure_while_step_waits_for_load);
    tcase_add_test(tc, test_no_instance_rejections_named);
    tcase_add_test(tc, test_failures_keys_that_cannot_apply);
    tcase_add_test(tc, test_rejected_requests_not_billed);
    tcase_add_test(tc, test_failure_rejects_leave_the_totals);
    suite_add_tcase(s, tc);
    return kvt_main(s);
}
