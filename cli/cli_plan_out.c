// cli/cli_plan_out.c -- what `kvfleet plan` prints (cli_plan.h): the chosen configuration,
// its runner-up and "one instance fewer" neighbours, or the max rate, as text or as JSON.
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_plan.h"

static json_t *config_json(const planner *pl, const plan_eval *e) {
    json_t *c = json_object();
    json_object_set_new(c, "prefill_instances", json_integer(e->p));
    json_object_set_new(c, "decode_instances", json_integer(pl->colocated ? 0 : e->d));
    json_object_set_new(c, "gpus_per_instance", json_integer(e->gp));
    json_object_set_new(c, "prefill_gpus_per_instance", json_integer(e->gp));
    json_object_set_new(c, "decode_gpus_per_instance", json_integer(e->gd));
    // TP and EP as run: the shape's, else the scenario's (0 there = all the instance's GPUs)
    const sim_config *b = pl->base;
    int tp[2] = {e->tpp ? e->tpp : b->cluster.prefill.tp, e->tpd ? e->tpd : b->cluster.decode.tp};
    int ep[2] = {e->tpp ? e->epp : b->cluster.prefill.ep, e->tpd ? e->epd : b->cluster.decode.ep};
    int g[2] = {e->gp, e->gd};
    const char *const pk[2] = {"prefill_parallel", "decode_parallel"};
    for (int k = 0; k < 2; k++) {
        int t = tp[k] > 0 ? tp[k] : g[k], x = ep[k] > 0 ? ep[k] : g[k];
        json_object_set_new(c, pk[k],
                            json_pack("{s:i, s:i, s:i}", "tp", t, "dp", g[k] / t, "ep", x));
    }
    json_object_set_new(c, "vision_instances", json_integer(pl->base->cluster.vision.instances));
    json_object_set_new(c, "mode", json_string(pl->colocated ? "colocated" : "disaggregated"));
    json_object_set_new(c, "gpus", json_real(e->gpus));
    if (e->rate > 0) json_object_set_new(c, "rate_rps", json_real(e->rate));
    return c;
}

static json_t *num(double v) {
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *slo_json(const planner *pl, const plan_eval *e) {
    json_t *s = json_object();
    json_object_set_new(s, "ttft_p90_ms", num(e->ttft_p90));
    json_object_set_new(s, "tpot_p90_ms", num(e->tpot_p90));
    json_object_set_new(s, "ttft_p90_bound_ms", json_real(pl->slo_ttft));
    json_object_set_new(s, "tpot_p90_bound_ms", json_real(pl->slo_tpot));
    json_object_set_new(s, "ttft_ratio", num(e->ttft_p90 / pl->slo_ttft));
    json_object_set_new(s, "tpot_ratio", num(e->tpot_p90 / pl->slo_tpot));
    json_object_set_new(s, "attainment", num(e->attainment));
    json_object_set_new(s, "saturation", json_string(e->sat));
    json_object_set_new(s, "met", json_boolean(e->ok));
    return s;
}

static json_t *eval_json(const planner *pl, const plan_eval *e) {
    json_t *o = json_object();
    json_object_set_new(o, "config", config_json(pl, e));
    json_object_set_new(o, "cost_per_day_usd", num(e->cost_day));
    json_object_set_new(o, "goodput_rps", num(e->goodput_rps));
    json_object_set_new(o, "feasible", json_boolean(e->ok));
    json_object_set_new(o, "slo", slo_json(pl, e));
    return o;
}

static void why_not(const planner *pl, const plan_eval *e, char *out, size_t n) {
    if (!e) {
        snprintf(out, n, "not run");
        return;
    }
    if (!e->ran) {
        snprintf(out, n, "over --max-gpus");
        return;
    }
    size_t k = 0;
    out[0] = '\0';
    if (e->class_miss[0]) {   // SLOs by class
        snprintf(out, n, "%s; %s", e->class_miss, e->sat);
        return;
    }
    if (!e->ttft_ok)
        k += (size_t)snprintf(out + k, n - k, "TTFT p90 %.1f ms > %.0f; ", e->ttft_p90,
                              pl->slo_ttft);
    if (!e->tpot_ok && k < n)
        k += (size_t)snprintf(out + k, n - k, "TPOT p90 %.2f ms > %.0f; ", e->tpot_p90,
                              pl->slo_tpot);
    if (k < n) snprintf(out + k, n - k, "%s", e->sat);
}

// " (TP 4, DP 2, EP 8)" of a pool's instances when the search set it, else "".
static void par_text(int g, int tp, int ep, char *out, size_t n) {
    out[0] = '\0';
    if (!tp) return;
    snprintf(out, n, " (TP %d%s%.0d, EP %d)", tp, g / tp > 1 ? ", DP " : "",
             g / tp > 1 ? g / tp : 0, ep ? ep : g);
}

static void print_eval(const planner *pl, const char *label, const plan_eval *e) {
    char a[48], b[48];
    par_text(e->gp, e->tpp, e->epp, a, sizeof a);
    par_text(e->gd, e->tpd, e->epd, b, sizeof b);
    if (e->tpp || e->tpd) {
        if (pl->colocated)
            printf("  %-10s %d colocated instance%s x %d GPU%s%s = %.0f GPUs, $%.2f/day\n", label,
                   e->p, e->p == 1 ? "" : "s", e->gp, e->gp == 1 ? "" : "s", a, e->gpus,
                   e->cost_day);
        else
            printf("  %-10s prefill %d x %d GPU%s + decode %d x %d GPU%s = %.0f GPUs, $%.2f/day\n",
                   label, e->p, e->gp, a, e->d, e->gd, b, e->gpus, e->cost_day);
    } else if (pl->colocated)
        printf("  %-10s %d colocated instance%s x %d GPU%s = %.0f GPUs, $%.2f/day\n", label, e->p,
               e->p == 1 ? "" : "s", e->gp, e->gp == 1 ? "" : "s", e->gpus, e->cost_day);
    else
        printf("  %-10s prefill %d x %d GPU + decode %d x %d GPU = %.0f GPUs, $%.2f/day\n", label,
               e->p, e->gp, e->d, e->gd, e->gpus, e->cost_day);
    printf("  %-10s TTFT p90 %.1f ms = %.2f of bound, TPOT p90 %.2f ms = %.2f of bound, "
           "attainment %.1f %%, goodput %.4g req/s, %s\n",
           "", e->ttft_p90, e->ttft_p90 / pl->slo_ttft, e->tpot_p90, e->tpot_p90 / pl->slo_tpot,
           100 * e->attainment, e->goodput_rps, e->sat);
}

// The cost-goodput frontier as JSON (every point with its configuration).
static json_t *frontier_json(const planner *pl) {
    const plan_eval *f[256];
    size_t n = cli_plan_frontier(pl, f, 256);
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, eval_json(pl, f[i]));
    return a;
}

void cli_plan_print_json(const planner *pl, const plan_answer *r, bool vary_ratio) {
    KVF_ASSERT(pl && pl->base && r);
    json_t *o = json_object();
    json_object_set_new(o, "feasible", json_boolean(r->best != NULL));
    json_object_set_new(o, "scenario", json_string(pl->base->name));
    if (r->best) {
        json_object_set_new(o, "config", config_json(pl, r->best));
        json_object_set_new(o, "cost_per_day_usd", num(r->best->cost_day));
        json_object_set_new(o, "slo", slo_json(pl, r->best));
    }
    json_object_set_new(o, "runs", json_integer(pl->runs));
    json_object_set_new(o, "shapes", json_integer(pl->shapes));
    json_object_set_new(o, "shapes_pruned", json_integer(pl->pruned));
    json_object_set_new(o, "shapes_unfit", json_integer(pl->unfit));
    json_object_set_new(o, "frontier", frontier_json(pl));
    if (!r->best || pl->why[0]) json_object_set_new(o, "why", json_string(pl->why));
    json_object_set_new(o, "runner_up", r->second ? eval_json(pl, r->second) : json_null());
    json_t *nb = json_array();
    if (r->fewer_p) json_array_append_new(nb, eval_json(pl, r->fewer_p));
    if (r->fewer_d) json_array_append_new(nb, eval_json(pl, r->fewer_d));
    json_object_set_new(o, "one_fewer", nb);
    json_object_set_new(o, "search", json_string(vary_ratio ? "frontier" : "bisect+walk-down"));
    json_t *all = json_array();
    for (size_t i = 0; i < pl->n; i++)
        json_array_append_new(all, eval_json(pl, &pl->ev[i]));
    json_object_set_new(o, "evaluated", all);
    char *t = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    printf("%s\n", t);
    free(t);
    json_decref(o);
}

void cli_plan_print_text(const planner *pl, const plan_answer *r, bool vary_ratio) {
    KVF_ASSERT(pl && pl->base && r);
    printf("kvfleet plan: scenario %s, SLO TTFT p90 <= %g ms, TPOT p90 <= %g ms, stable runs "
           "only%s\n",
           pl->base->name, pl->slo_ttft, pl->slo_tpot, pl->max_gpus ? "" : "");
    if (!r->best) {
        printf("  no configuration meets the SLOs%s\n",
               pl->max_gpus ? " within --max-gpus" : " within the search limits");
        if (pl->why[0]) printf("  %-10s %s\n", "why", pl->why);
    } else {
        print_eval(pl, "chosen", r->best);
        if (r->second) print_eval(pl, "runner-up", r->second);
        char why[256];
        const plan_eval *fp = r->fewer_p, *fd = r->fewer_d;
        if (fp) {
            why_not(pl, fp, why, sizeof why);
            if (pl->colocated)
                printf("  %-10s %d colocated instances: %s\n", "one fewer", fp->p, why);
            else
                printf("  %-10s prefill %d, decode %d: %s\n", "one fewer", fp->p, fp->d, why);
        }
        if (fd) {
            why_not(pl, fd, why, sizeof why);
            printf("  %-10s prefill %d, decode %d: %s\n", fp ? "" : "one fewer", fd->p, fd->d, why);
        }
    }
    if (r->best && pl->why[0]) printf("  %-10s %s\n", "notes", pl->why);
    if (pl->shapes > 1) {
        const plan_eval *f[256];
        size_t n = cli_plan_frontier(pl, f, 256);
        printf("  frontier   %zu point%s of cost against goodput (feasible, none cheaper with as "
               "much goodput):\n",
               n, n == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++)
            print_eval(pl, "", f[i]);
    }
    char shapes[160] = "", left[96] = "";
    if (pl->shapes > 1) {
        snprintf(shapes, sizeof shapes, " over %d instance shapes", pl->shapes);
        snprintf(left, sizeof left, "%d left out by the cost bound, %d that do not fit; ",
                 pl->pruned, pl->unfit);
    }
    printf("  search     %d runs%s (%s%s)\n", pl->runs, shapes, left,
           vary_ratio ? "bisection, then the prefill:decode frontier"
                      : "bisection per pool, joint check, walk-down, ratio neighbours");
}

void cli_plan_rate_json(const planner *pl, const plan_rate *r) {
    KVF_ASSERT(pl && pl->base && r);
    const plan_eval *best = r->best;
    double lo = r->lo, hi = r->hi, r0 = r->r0, tol = r->tol;
    char why[256];
    why_not(pl, r->fail, why, sizeof why);
    json_t *o = json_object();
    json_object_set_new(o, "feasible", json_boolean(best != NULL));
    json_object_set_new(o, "max_rate_rps", best ? json_real(lo) : json_null());
    json_object_set_new(o, "scenario_rate_rps", json_real(r0));
    json_object_set_new(o, "rate_key", json_string(pl->rate_key));
    json_object_set_new(o, "first_failing_rate_rps", json_real(hi));
    json_object_set_new(o, "first_failing_reason", json_string(why));
    json_object_set_new(o, "tolerance", json_real(tol));
    json_object_set_new(o, "runs", json_integer(pl->runs));
    if (best) {
        json_object_set_new(o, "config", config_json(pl, best));
        json_object_set_new(o, "cost_per_day_usd", num(best->cost_day));
        json_object_set_new(o, "slo", slo_json(pl, best));
    }
    char *t = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    printf("%s\n", t);
    free(t);
    json_decref(o);
}

void cli_plan_rate_text(const planner *pl, const plan_rate *r) {
    KVF_ASSERT(pl && pl->base && r);
    const sim_config *b = pl->base;
    int p = r->p, d = r->d, gp = r->gp, gd = r->gd;
    const plan_eval *best = r->best;
    double lo = r->lo, hi = r->hi, r0 = r->r0, tol = r->tol;
    char why[256];
    why_not(pl, r->fail, why, sizeof why);
    printf("kvfleet plan --find max-rate: scenario %s, SLO TTFT p90 <= %g ms, TPOT p90 <= %g ms\n",
           b->name, pl->slo_ttft, pl->slo_tpot);
    printf("  cluster    prefill %d x %d GPU + decode %d x %d GPU\n", p, gp, d, gd);
    if (!best) {
        printf("  no rate down to %.4g req/s meets the SLOs (%s)\n", hi, why);
    } else {
        printf("  max rate   %.4g req/s (%.2f x the scenario's %.4g req/s); at %.4g req/s: %s\n",
               lo, lo / r0, r0, hi, why);
        print_eval(pl, "at max", best);
    }
    printf("  search     %d runs (bracket by doubling, then bisection to %.1f %%)\n", pl->runs,
           100 * tol);
}

void cli_plan_goodput_json(const planner *pl, const plan_goodput *g) {
    KVF_ASSERT(pl && pl->base && g);
    json_t *o = json_object();
    const plan_eval *b = g->best;
    json_object_set_new(o, "feasible", json_boolean(b && b->goodput_rps > 0));
    json_object_set_new(o, "max_goodput_rps", b ? num(b->goodput_rps) : json_null());
    json_object_set_new(o, "max_goodput_tok_s", b ? num(b->goodput_tok_s) : json_null());
    json_object_set_new(o, "at_rate_rps", b ? json_real(b->rate) : json_null());
    json_object_set_new(o, "scenario_rate_rps", json_real(g->r0));
    json_object_set_new(o, "rate_key", json_string(pl->rate_key));
    json_object_set_new(o, "tolerance", json_real(g->tol));
    json_object_set_new(o, "runs", json_integer(pl->runs));
    if (b) {
        json_object_set_new(o, "config", config_json(pl, b));
        json_object_set_new(o, "cost_per_day_usd", num(b->cost_day));
        json_object_set_new(o, "slo", slo_json(pl, b));
    }
    json_t *all = json_array();
    for (size_t i = 0; i < pl->n; i++)
        if (pl->ev[i].ran)
            json_array_append_new(all, json_pack("{s:f, s:o, s:o}", "rate_rps", pl->ev[i].rate,
                                                 "goodput_rps", num(pl->ev[i].goodput_rps),
                                                 "attainment", num(pl->ev[i].attainment)));
    json_object_set_new(o, "evaluated", all);
    char *t = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    printf("%s\n", t);
    free(t);
    json_decref(o);
}

void cli_plan_goodput_text(const planner *pl, const plan_goodput *g) {
    KVF_ASSERT(pl && pl->base && g);
    const plan_eval *b = g->best;
    printf("kvfleet plan --find max-goodput: scenario %s, SLO TTFT p90 <= %g ms, TPOT p90 <= "
           "%g ms\n",
           pl->base->name, pl->slo_ttft, pl->slo_tpot);
    printf("  cluster    prefill %d x %d GPU + decode %d x %d GPU\n", g->p, g->gp, g->d, g->gd);
    if (!b || !(b->goodput_rps > 0)) {
        printf("  no rate gives any goodput: no request meets its SLOs\n");
    } else {
        printf("  max goodput %.4g req/s (%.4g output tok/s) within the SLOs, offered %.4g req/s "
               "(%.2f x the scenario's %.4g req/s)\n",
               b->goodput_rps, b->goodput_tok_s, b->rate, b->rate / g->r0, g->r0);
        print_eval(pl, "at best", b);
    }
    printf("  search     %d runs (bracket the peak by doubling, then golden sections to %.1f %%)\n",
           pl->runs, 100 * g->tol);
}
