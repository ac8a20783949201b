// tests/test_plan.c -- `kvfleet plan` on a real trace (scenarios/capacity-plan.yaml, the
// Mooncake conversation trace): the chosen configuration meets the SLOs on a stable run while
// the one with one instance fewer in either pool does not -- all three checked here by runs
// made through sim_run, not taken from the planner's output; --find max-rate brackets a rate
// that meets the SLOs and one that does not within the tolerance; malformed --slo and unknown
// keys exit 2 naming them.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "sim.h"

static void setup(void) {
    kvt_tmp_make("kvf_plan");
}
static void teardown(void) {
    kvt_tmp_remove();
}

#define SCEN "scenarios/capacity-plan.yaml"

// Outcome of one run of the capacity-plan scenario, judged here against its SLO bounds.
typedef struct outcome {
    double ttft_p90, tpot_p90, bound_ttft, bound_tpot, cost_day;
    char state[32];
    bool meets;
} outcome;

static outcome run_config(int prefill, int decode, double rate) {
    sim_config *c = malloc(sizeof *c);
    kvf_err err = {0};
    char path[1024], a[128];
    snprintf(path, sizeof path, "%s/" SCEN, kvt_src());
    sim_config_default(c);
    ck_assert_msg(sim_config_load(c, path, &err) == KVF_OK, "%s", err.msg);
    snprintf(a, sizeof a, "cluster.prefill.instances=%d", prefill);
    ck_assert(sim_config_set(c, a, &err) == KVF_OK);
    snprintf(a, sizeof a, "cluster.decode.instances=%d", decode);
    ck_assert(sim_config_set(c, a, &err) == KVF_OK);
    if (rate > 0) {
        snprintf(a, sizeof a, "workload.rate_rps=%.17g", rate);
        ck_assert(sim_config_set(c, a, &err) == KVF_OK);
    }
    ck_assert_msg(sim_config_validate(c, &err) == KVF_OK, "%s", err.msg);
    void *sj = NULL;
    sim_run_opts o = {.quiet = true};
    ck_assert_msg(sim_run(c, &o, &sj, &err) == KVF_OK, "%s", err.msg);
    json_t *s = sj;
    outcome r;
    memset(&r, 0, sizeof r);
    r.ttft_p90 = json_number_value(json_object_get(json_object_get(s, "ttft_ms"), "p90"));
    r.tpot_p90 = json_number_value(json_object_get(json_object_get(s, "tpot_ms"), "p90"));
    r.bound_ttft = c->slo.ttft_p90_ms;
    r.bound_tpot = c->slo.tpot_p90_ms;
    r.cost_day =
        json_number_value(json_object_get(json_object_get(s, "economics"), "cost_per_day_usd"));
    snprintf(r.state, sizeof r.state, "%s",
             json_string_value(json_object_get(json_object_get(s, "saturation"), "state")));
    long long completed =
        json_integer_value(json_object_get(json_object_get(s, "requests"), "completed"));
    r.meets = !strcmp(r.state, "stable") && completed > 0 && r.ttft_p90 <= r.bound_ttft &&
              r.tpot_p90 <= r.bound_tpot;
    json_decref(s);
    free(c);
    return r;
}

static json_t *parse_out(void) {
    json_error_t je;
    json_t *o = json_loads(kvt_out, 0, &je);
    ck_assert_msg(json_is_object(o), "stdout is not JSON (%s): %.300s\nstderr: %.2000s", je.text,
                  kvt_out, kvt_err);
    return o;
}

static double jnum(json_t *o, const char *a, const char *b) {
    json_t *v = json_object_get(o, a);
    if (b) v = json_object_get(v, b);
    ck_assert_msg(json_is_number(v), "missing %s%s%s", a, b ? "." : "", b ? b : "");
    return json_number_value(v);
}

START_TEST(test_plan_choice_is_minimal) {
    int rc = kvt_sh("%s plan " SCEN " --json", kvt_bin());
    ck_assert_msg(rc == 0, "exit %d: %.2000s", rc, kvt_err);
    json_t *o = parse_out();
    ck_assert(json_is_true(json_object_get(o, "feasible")));
    int p = (int)jnum(o, "config", "prefill_instances"),
        d = (int)jnum(o, "config", "decode_instances");
    int runs = (int)jnum(o, "runs", NULL);
    ck_assert_msg(p > 1 && d > 1,
                  "the scenario should need more than one instance per pool: %d, %d", p, d);

    outcome chosen = run_config(p, d, 0);
    ck_assert_msg(chosen.meets, "chosen (%d, %d): TTFT p90 %.1f / %.0f, TPOT p90 %.2f / %.0f, %s",
                  p, d, chosen.ttft_p90, chosen.bound_ttft, chosen.tpot_p90, chosen.bound_tpot,
                  chosen.state);
    outcome fewer_p = run_config(p - 1, d, 0);
    ck_assert_msg(!fewer_p.meets, "(%d, %d) meets the SLOs too: TTFT p90 %.1f, TPOT p90 %.2f, %s",
                  p - 1, d, fewer_p.ttft_p90, fewer_p.tpot_p90, fewer_p.state);
    outcome fewer_d = run_config(p, d - 1, 0);
    ck_assert_msg(!fewer_d.meets, "(%d, %d) meets the SLOs too: TTFT p90 %.1f, TPOT p90 %.2f, %s",
                  p, d - 1, fewer_d.ttft_p90, fewer_d.tpot_p90, fewer_d.state);

    // reported figures are those of the chosen run; ratios are achieved / bound
    ck_assert_msg(fabs(jnum(o, "slo", "ttft_p90_ms") - chosen.ttft_p90) <= 1e-6 * chosen.ttft_p90,
                  "reported TTFT p90 %g, run %g", jnum(o, "slo", "ttft_p90_ms"), chosen.ttft_p90);
    ck_assert(fabs(jnum(o, "slo", "tpot_p90_ms") - chosen.tpot_p90) <= 1e-6 * chosen.tpot_p90);
    ck_assert(fabs(jnum(o, "slo", "ttft_ratio") - chosen.ttft_p90 / chosen.bound_ttft) < 1e-6);
    ck_assert(fabs(jnum(o, "cost_per_day_usd", NULL) - chosen.cost_day) <= 1e-6 * chosen.cost_day);
    // cost per day of rented GPUs: at least GPUs x $/GPU-hour x 24 (the scenario's $2)
    ck_assert(chosen.cost_day >= (p + d) * 2.0 * 24 - 1e-6);

    // the runner-up meets the SLOs and costs at least as much
    json_t *ru = json_object_get(o, "runner_up");
    ck_assert(json_is_object(ru));
    int rp = (int)jnum(json_object_get(ru, "config"), "prefill_instances", NULL);
    int rd = (int)jnum(json_object_get(ru, "config"), "decode_instances", NULL);
    ck_assert(!(rp == p && rd == d));
    outcome second = run_config(rp, rd, 0);
    ck_assert_msg(second.meets, "runner-up (%d, %d) fails", rp, rd);
    ck_assert(second.cost_day >= chosen.cost_day - 1e-9);

    // smarter than the grid up to the answer
    ck_assert_msg(runs > 0 && runs < (p + 1) * (d + 1), "%d runs for (%d, %d)", runs, p, d);
    json_decref(o);
}
END_TEST

START_TEST(test_plan_max_rate_brackets) {
    const int p = 8, d = 5;
    int rc = kvt_sh("%s plan " SCEN " --find max-rate --tol 0.02 --set cluster.prefill.instances=%d"
                    " --set cluster.decode.instances=%d --json",
                    kvt_bin(), p, d);
    ck_assert_msg(rc == 0, "exit %d: %.2000s", rc, kvt_err);
    json_t *o = parse_out();
    ck_assert(json_is_true(json_object_get(o, "feasible")));
    double lo = jnum(o, "max_rate_rps", NULL), hi = jnum(o, "first_failing_rate_rps", NULL);
    ck_assert_msg(hi > lo && hi - lo <= 0.02 * lo + 1e-12, "bracket [%g, %g]", lo, hi);
    ck_assert(jnum(o, "runs", NULL) >= 2);
    outcome at_lo = run_config(p, d, lo), at_hi = run_config(p, d, hi);
    ck_assert_msg(at_lo.meets, "at %g req/s: TTFT p90 %.1f, TPOT p90 %.2f, %s", lo, at_lo.ttft_p90,
                  at_lo.tpot_p90, at_lo.state);
    ck_assert_msg(!at_hi.meets, "at %g req/s the SLOs still hold", hi);
    json_decref(o);
}
END_TEST

START_TEST(test_plan_bad_input) {
    static const struct {
        const char *args, *want;
    } cases[] = {
        {"--slo ttft_p99_ms=500", "ttft_p99_ms"},
        {"--slo tpot_p90_ms=fast", "tpot_p90_ms"},
        {"--slo ttft_p90_ms=", "ttft_p90_ms"},
        {"--slo ttft_p90_ms=-5", "ttft_p90_ms"},
        {"--slo latency", "latency"},
        {"--set cluster.prefil.instances=2", "cluster.prefil.instances"},
        {"--set cluster.decode.instances=two", "cluster.decode.instances"},
        {"--find min-rate", "min-rate"},
        {"--max-gpus zero", "zero"},
        {"--gpus-per-instance 1,x", "1,x"},
        {"--find max-rate --vary-ratio", "--vary-ratio"},
        {"--find max-goodput --vary-ratio", "--vary-ratio"},
        {"--tol 0", "--tol"},
        {"--tol nan", "--tol"},
        {"--html /dev/null", "/dev/null"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = kvt_sh("%s plan " SCEN " %s", kvt_bin(), cases[i].args);
        ck_assert_msg(rc == 2, "'%s': exit %d, want 2 (%.2000s)", cases[i].args, rc, kvt_err);
        ck_assert_msg(strstr(kvt_err, cases[i].want), "'%s': message lacks '%s': %.2000s",
                      cases[i].args, cases[i].want, kvt_err);
    }
    ck_assert_int_eq(kvt_sh("%s plan", kvt_bin()), 2);
    ck_assert_int_eq(kvt_sh("%s plan %s/nope.yaml", kvt_bin(), kvt_tmp), 2);
    ck_assert_msg(strstr(kvt_err, "nope.yaml"), "%.2000s", kvt_err);
}
END_TEST

START_TEST(test_plan_max_gpus_infeasible) {
    // Two GPUs cannot carry this load: the planner says so instead of picking something, and
    // exits 3 (nothing feasible)
    int rc = kvt_sh("%s plan " SCEN " --max-gpus 2 --json", kvt_bin());
    ck_assert_msg(rc == 3, "exit %d: %.2000s", rc, kvt_err);
    json_t *o = parse_out();
    ck_assert(json_is_false(json_object_get(o, "feasible")));
    outcome one_one = run_config(1, 1, 0);   // the only split of 2 GPUs
    ck_assert(!one_one.meets);
    json_decref(o);
}
END_TEST

// SLOs by class (scenarios/slo-classes.yaml: chat TTFT p90 1 s, coding E2E p99 60 s, agent TPOT
// p90 30 ms): plan holds each class to its own bounds and picks another cluster than under the
// one scenario-wide bound; what a smaller cluster misses is named by class.
START_TEST(test_plan_slos_by_class) {
    int rc = kvt_sh("%s plan scenarios/slo-classes.yaml --max-gpus 24 --json", kvt_bin());
    ck_assert_msg(rc == 0, "plan by class: exit %d: %s", rc, kvt_err);
    json_error_t je;
    json_t *a = json_loads(kvt_out, 0, &je);
    ck_assert_msg(a, "plan --json: %s", je.text);
    rc = kvt_sh("%s plan scenarios/slo-classes.yaml --max-gpus 24 --json --set "
                "slo.classes.chatbot.ttft_ms.p90=0 "
                "--set slo.classes.coding.e2e_ms.p99=0 --set slo.classes.agent.tpot_ms.p90=0",
                kvt_bin());
    ck_assert_msg(rc == 0, "plan, one bound: exit %d: %s", rc, kvt_err);
    json_t *b = json_loads(kvt_out, 0, &je);
    ck_assert_msg(b, "plan --json: %s", je.text);
    double ga = json_number_value(json_object_get(json_object_get(a, "config"), "gpus"));
    double gb = json_number_value(json_object_get(json_object_get(b, "config"), "gpus"));
    ck_assert_msg(ga > 0 && gb > 0 && ga != gb, "by class %g GPUs, one bound %g GPUs", ga, gb);
    rc = kvt_sh("%s plan scenarios/slo-classes.yaml --max-gpus 24", kvt_bin());
    ck_assert_msg(rc == 0 && (strstr(kvt_out, "coding e2e_ms.p99") ||
                              strstr(kvt_out, "chatbot ttft_ms.p90") ||
                              strstr(kvt_out, "agent tpot_ms.p90")),
                  "a miss by class is not named: %s", kvt_out);
    json_decref(a);
    json_decref(b);
}
END_TEST

// Parallelism per pool (scenarios/mixed-hardware.yaml: H200 prefill, GB200 decode, each
// billed at its price): every pairing of the listed shapes is searched; the frontier holds
// feasible runs only, rises in cost and goodput, starts at the chosen one, and some point runs
// the two pools in different layouts; a frontier point re-run through sim_run has the
// layout, cost and goodput the plan reported.
START_TEST(test_plan_parallel_shapes_frontier) {
    int rc = kvt_sh("%s plan scenarios/mixed-hardware.yaml --max-gpus 48 --set "
                    "workload.limit_requests=500 --prefill-par tp8,tp2dp4ep8 --decode-par "
                    "tp4,tp2dp2 --json",
                    kvt_bin());
    ck_assert_msg(rc == 0, "exit %d: %.2000s", rc, kvt_err);
    json_t *o = parse_out();
    ck_assert_int_eq((int)jnum(o, "shapes", NULL), 4);
    json_t *fr = json_object_get(o, "frontier");
    ck_assert_msg(json_array_size(fr) >= 1, "empty frontier");
    double cost0 = jnum(o, "cost_per_day_usd", NULL), prev_c = -1, prev_g = -1;
    bool mixed = false;
    size_t i;
    json_t *pt;
    json_array_foreach(fr, i, pt) {
        ck_assert(json_is_true(json_object_get(pt, "feasible")));
        double c = jnum(pt, "cost_per_day_usd", NULL), g = jnum(pt, "goodput_rps", NULL);
        if (i == 0)
            ck_assert_msg(fabs(c - cost0) <= 1e-6 * cost0, "frontier starts at %g, chosen %g", c,
                          cost0);
        ck_assert_msg(c > prev_c && g > prev_g,
                      "frontier point %zu: cost %g goodput %g after %g %g", i, c, g, prev_c,
                      prev_g);
        prev_c = c, prev_g = g;
        json_t *cf = json_object_get(pt, "config");
        int tpp = (int)jnum(json_object_get(cf, "prefill_parallel"), "tp", NULL);
        int tpd = (int)jnum(json_object_get(cf, "decode_parallel"), "tp", NULL);
        ck_assert_msg(tpp == 8 || tpp == 2, "prefill TP %d not listed", tpp);
        ck_assert_msg(tpd == 4 || tpd == 2, "decode TP %d not listed", tpd);
        mixed |= tpp != tpd;
    }
    ck_assert_msg(mixed, "no frontier point runs the pools in different layouts");
    // the first point again, through sim_run with its layout set
    json_t *cf = json_object_get(json_array_get(fr, 0), "config");
    json_t *pp = json_object_get(cf, "prefill_parallel"),
           *dp = json_object_get(cf, "decode_parallel");
    sim_config *c = malloc(sizeof *c);
    kvf_err err = {0};
    char path[1024], a[160];
    snprintf(path, sizeof path, "%s/scenarios/mixed-hardware.yaml", kvt_src());
    sim_config_default(c);
    ck_assert_msg(sim_config_load(c, path, &err) == KVF_OK, "%s", err.msg);
    const char *keys[] = {"cluster.prefill.instances", "cluster.decode.instances",
                          "cluster.prefill.gpus_per_instance", "cluster.decode.gpus_per_instance"};
    const char *from[] = {"prefill_instances", "decode_instances", "prefill_gpus_per_instance",
                          "decode_gpus_per_instance"};
    for (int k = 0; k < 4; k++) {
        snprintf(a, sizeof a, "%s=%d", keys[k], (int)jnum(cf, from[k], NULL));
        ck_assert(sim_config_set(c, a, &err) == KVF_OK);
    }
    snprintf(a, sizeof a, "cluster.prefill.tp=%d", (int)jnum(pp, "tp", NULL));
    ck_assert(sim_config_set(c, a, &err) == KVF_OK);
    snprintf(a, sizeof a, "cluster.prefill.ep=%d", (int)jnum(pp, "ep", NULL));
    ck_assert(sim_config_set(c, a, &err) == KVF_OK);
    snprintf(a, sizeof a, "cluster.decode.tp=%d", (int)jnum(dp, "tp", NULL));
    ck_assert(sim_config_set(c, a, &err) == KVF_OK);
    snprintf(a, sizeof a, "cluster.decode.ep=%d", (int)jnum(dp, "ep", NULL));
    ck_assert(sim_config_set(c, a, &err) == KVF_OK);
    ck_assert(sim_config_set(c, "workload.limit_requests=500", &err) == KVF_OK);
    ck_assert_msg(sim_config_validate(c, &err) == KVF_OK, "%s", err.msg);
    void *sj = NULL;
    sim_run_opts ro = {.quiet = true};
    ck_assert_msg(sim_run(c, &ro, &sj, &err) == KVF_OK, "%s", err.msg);
    double cost = kvt_num(sj, "economics.cost_per_day_usd"), gp = kvt_num(sj, "slo.goodput_rps");
    json_t *p0 = json_array_get(fr, 0);
    ck_assert_msg(fabs(cost - jnum(p0, "cost_per_day_usd", NULL)) <= 1e-6 * cost,
                  "re-run cost %g, plan %g", cost, jnum(p0, "cost_per_day_usd", NULL));
    ck_assert_msg(fabs(gp - jnum(p0, "goodput_rps", NULL)) <= 1e-9 * gp,
                  "re-run goodput %g, plan %g", gp, jnum(p0, "goodput_rps", NULL));
    // each pool billed at its own price: H200 prefill at $3.59, GB200 decode at $4.54
    double gh_p = kvt_num(sj, "economics.gpu_cost_per_day_usd_by_pool.prefill");
    double gh_d = kvt_num(sj, "economics.gpu_cost_per_day_usd_by_pool.decode");
    double np = jnum(cf, "prefill_instances", NULL) * jnum(cf, "prefill_gpus_per_instance", NULL);
    double nd = jnum(cf, "decode_instances", NULL) * jnum(cf, "decode_gpus_per_instance", NULL);
    ck_assert_msg(fabs(gh_p - np * 24 * 3.59) < 1e-6 * gh_p, "prefill GPU cost %g for %g GPUs",
                  gh_p, np);
    ck_assert_msg(fabs(gh_d - nd * 24 * 4.54) < 1e-6 * gh_d, "decode GPU cost %g for %g GPUs", gh_d,
                  nd);
    json_decref(sj);
    free(c);
    // --html: one row per run of the search on the points page; never through a link or over
    // an input
    int runs = (int)jnum(o, "runs", NULL);
    rc = kvt_sh("%s plan scenarios/mixed-hardware.yaml --max-gpus 48 --set "
                "workload.limit_requests=500 --prefill-par tp8,tp2dp4ep8 --decode-par tp4,tp2dp2 "
                "--html %s",
                kvt_bin(), kvt_tmp_path("plan.html"));
    ck_assert_msg(rc == 0, "--html: exit %d: %s", rc, kvt_err);
    char *page = kvt_slurp(kvt_tmp_path("plan.html"));
    ck_assert_msg(page && strstr(page, "kvfleet plan of scenarios/mixed-hardware.yaml"), "no page");
    char last[32], past[32];
    snprintf(last, sizeof last, ">run %d<", runs);
    snprintf(past, sizeof past, ">run %d<", runs + 1);
    ck_assert_msg(strstr(page, ">run 1<") && strstr(page, last) && !strstr(page, past),
                  "the page does not hold one row per run (%d runs)", runs);
    free(page);
    ck_assert(symlink(kvt_tmp_path("plan.html"), kvt_tmp_path("link.html")) == 0);
    rc = kvt_sh("%s plan scenarios/mixed-hardware.yaml --html %s", kvt_bin(),
                kvt_tmp_path("link.html"));
    ck_assert_msg(rc == 2 && strstr(kvt_err, "symbolic link"), "--html through a link: exit %d: %s",
                  rc, kvt_err);
    rc = kvt_sh("%s plan scenarios/mixed-hardware.yaml --html scenarios/mixed-hardware.yaml",
                kvt_bin());
    ck_assert_msg(rc == 2 && strstr(kvt_err, "never overwrites an input"),
                  "--html over the scenario: exit %d: %s", rc, kvt_err);
    // a shape whose weights do not fit its GPUs is left out, named, and never searched
    rc = kvt_sh("%s plan scenarios/mixed-hardware.yaml --max-gpus 48 --set "
                "workload.limit_requests=300 --prefill-par tp1,tp8 --decode-par tp4 --json",
                kvt_bin());
    ck_assert_msg(rc == 0, "unfit shape: exit %d: %s", rc, kvt_err);
    json_t *u = parse_out();
    ck_assert_int_eq((int)jnum(u, "shapes_unfit", NULL), 1);
    ck_assert_msg(strstr(json_string_value(json_object_get(u, "why")), "does not fit"),
                  "the unfit shape is not named: %s", kvt_out);
    json_array_foreach(json_object_get(u, "evaluated"), i, pt) {
        json_t *ucf = json_object_get(pt, "config");
        ck_assert_int_eq((int)jnum(ucf, "prefill_gpus_per_instance", NULL), 8);
    }
    json_decref(u);
    // shapes that do not parse, or with another sizing option, exit 2 naming the option
    const char *bad[] = {"--prefill-par tp3ep2", "--decode-par dp2", "--prefill-par tp8,",
                         "--prefill-par tp8 --gpus-per-instance 8",
                         "--find max-rate --decode-par tp4"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        rc = kvt_sh("%s plan scenarios/mixed-hardware.yaml %s", kvt_bin(), bad[k]);
        ck_assert_msg(rc == 2 && (strstr(kvt_err, "-par") || strstr(kvt_err, "--find")),
                      "%s: exit %d: %s", bad[k], rc, kvt_err);
    }
    json_decref(o);
}
END_TEST

// --find max-goodput on the capacity-plan cluster: the answer is the best goodput of every
// rate run, runs on both sides of it give less, and a run of the scenario at that rate has the
// goodput reported.
START_TEST(test_plan_max_goodput) {
    int rc = kvt_sh("%s plan " SCEN " --find max-goodput --set cluster.prefill.instances=7 --set "
                    "cluster.decode.instances=4 --json",
                    kvt_bin());
    ck_assert_msg(rc == 0, "exit %d: %s", rc, kvt_err);
    json_t *o = parse_out();
    double g = jnum(o, "max_goodput_rps", NULL), r = jnum(o, "at_rate_rps", NULL);
    ck_assert_msg(g > 0 && r > 0, "goodput %g at %g req/s", g, r);
    bool below = false, above = false;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(o, "evaluated"), i, e) {
        double ge = jnum(e, "goodput_rps", NULL), re = jnum(e, "rate_rps", NULL);
        ck_assert_msg(ge <= g, "rate %g gives %g req/s of goodput, above the answer's %g", re, ge,
                      g);
        below |= re < r && ge<g, above |= re> r && ge < g;
    }
    ck_assert_msg(below && above, "the peak is not bracketed by runs on both sides");
    rc = kvt_sh("%s run " SCEN " --set cluster.prefill.instances=7 --set "
                "cluster.decode.instances=4 --set workload.rate_rps=%.17g --json --no-report -o %s",
                kvt_bin(), r, kvt_tmp_path("g"));
    ck_assert_msg(rc == 0, "re-run: exit %d: %s", rc, kvt_err);
    json_t *s = parse_out();
    ck_assert_msg(fabs(kvt_num(s, "slo.goodput_rps") - g) <= 1e-9 * g, "re-run goodput %g, plan %g",
                  kvt_num(s, "slo.goodput_rps"), g);
    json_decref(s);
    json_decref(o);
    rc = kvt_sh("%s plan " SCEN " --find max-goodness", kvt_bin());
    ck_assert_msg(rc == 2 && strstr(kvt_err, "max-goodput"), "--find typo: exit %d: %s", rc,
                  kvt_err);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("plan");
    TCase *t = tcase_create("plan");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_plan_choice_is_minimal);
    tcase_add_test(t, test_plan_max_rate_brackets);
    tcase_add_test(t, test_plan_bad_input);
    tcase_add_test(t, test_plan_max_gpus_infeasible);
    tcase_add_test(t, test_plan_slos_by_class);
    tcase_add_test(t, test_plan_parallel_shapes_frontier);
    tcase_add_test(t, test_plan_max_goodput);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
