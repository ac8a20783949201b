// cli/cli_plan.c -- `kvfleet plan`: the cheapest cluster that serves the scenario's load
// within its SLOs, and (`--find max-rate`) the highest request rate a fixed cluster serves.
//
// A configuration is feasible when its run ends "stable" (saturation.state), completes
// requests, and its TTFT p90 and TPOT p90 are within the bounds. Cost is per day
// (economics.cost_per_day_usd; GPUs x gpu_hour_usd x 24 when economics is null).
//
// Search for the least-cost cluster (instance counts per pool), relying on monotonicity: more
// prefill instances never make TTFT worse, more decode instances never make TPOT worse.
//   1. generous point: from the scenario's counts, double the pool whose SLO fails (both when
//      the run is not stable) until a feasible (P, D) is found, within --max-gpus (when the
//      budget is full, one instance moves to the failing pool; both failing = infeasible);
//      a stable run whose failing p90 improves by less than 1 % when its pool doubles has hit a
//      floor more instances cannot lower, and the plan is infeasible (said with the reason);
//   2. prefill: bisect the smallest p in [1, P] with TTFT within bound and stable at (p, D);
//   3. decode: bisect the smallest d in [1, D] with TPOT within bound and stable at (p, d);
//   4. joint check of (p, d); while it fails, add an instance to the pool whose SLO fails;
//   5. walk down: remove one prefill instance while the result stays feasible, then one decode
//      instance, and repeat until neither can go; so the chosen point is feasible and both
//      "one instance fewer" neighbours were run and are not;
//   6. ratio neighbours: (p+1, d-1) and (p-1, d+1) are run; a feasible one is walked down too
//      and competes; the runner-up is the cheapest feasible run other than the chosen one
//      ((p+1, d) and (p, d+1) are run so there is always one).
// --vary-ratio replaces 5-6 by the whole frontier: for every prefill count from the bisected
// one up, the least decode count (bisected, non-increasing in p), stopping once a point
// cannot beat the best; it costs more runs and does not rely on the pools being separable.
// --gpus-per-instance G1,G2,... repeats the search for each size (both pools) and keeps the
// cheapest. Every distinct configuration is run once (memoised); "runs" counts them.
//
// Max rate: bracket the scenario's rate by doubling/halving until one rate is feasible and
// one is not, then bisect until (hi - lo) <= tol * lo (default 1 %); the answer is lo, the
// highest rate seen feasible. Feasibility in rate is monotone only up to the noise of a finite
// trace; the bisection returns one boundary, not necessarily the highest feasible rate.
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"
#include "cli.h"
#include "cli_opts.h"
#include "cli_plan.h"
#include "cli_points.h"
#include "rpt.h"
#include "rpt_util.h"

static void note(planner *pl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(planner *pl, const char *fmt, ...) {
    size_t n = strlen(pl->why);
    if (n + 4 >= sizeof pl->why) return;
    if (n) {
        memcpy(pl->why + n, "; ", 3);
        n += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pl->why + n, sizeof pl->why - n, fmt, ap);
    va_end(ap);
}

static double ratio_max(const planner *pl, const plan_eval *e) {
    return fmax(e->ttft_p90 / pl->slo_ttft, e->tpot_p90 / pl->slo_tpot);
}

static double est_gpus(const planner *pl, int p, int d, int gp, int gd) {
    const sim_config *b = pl->base;
    return (double)b->cluster.vision.instances * b->cluster.vision.gpus_per_instance +
           (double)p * gp + (pl->colocated ? 0 : (double)d * gd);
}

// Evaluates configuration (p, d, gp, gd, rate), running it unless already known. On a run
// failure pl->st is set and an infeasible result returned.
static void plan_class_slos(json_t *sj, plan_eval *e);

static bool same(const plan_eval *e, int p, int d, const plan_size *z, double rate) {
    return e->p == p && e->d == d && e->gp == z->gp && e->gd == z->gd && e->tpp == z->tpp &&
           e->epp == z->epp && e->tpd == z->tpd && e->epd == z->epd && e->rate == rate;
}

static plan_eval eval(planner *pl, int p, int d, const plan_size *z, double rate) {
    int gp = z->gp, gd = z->gd;
    for (size_t i = 0; i < pl->n; i++) {
        plan_eval *e = &pl->ev[i];
        if (same(e, p, d, z, rate)) return *e;
    }
    plan_eval e;
    memset(&e, 0, sizeof e);
    e.p = p;
    e.d = d;
    e.gp = gp;
    e.gd = gd;
    e.tpp = z->tpp, e.epp = z->epp, e.tpd = z->tpd, e.epd = z->epd;
    e.rate = rate;
    e.ttft_p90 = e.tpot_p90 = e.cost_day = NAN;
    snprintf(e.sat, sizeof e.sat, "-");
    if (pl->st) return e;
    if (pl->max_gpus > 0 && est_gpus(pl, p, d, gp, gd) > pl->max_gpus) {
        snprintf(e.sat, sizeof e.sat, "over-budget");
    } else {
        sim_config *c = kvf_malloc(sizeof *c);
        memcpy(c, pl->base, sizeof *c);
        kvf_status st = KVF_OK;
        const char *sets[9] = {0};
        char buf[9][160];
        snprintf(buf[0], sizeof buf[0], "cluster.prefill.instances=%d", p);
        snprintf(buf[1], sizeof buf[1], "cluster.prefill.gpus_per_instance=%d", gp);
        snprintf(buf[2], sizeof buf[2], "cluster.decode.instances=%d", d);
        snprintf(buf[3], sizeof buf[3], "cluster.decode.gpus_per_instance=%d", gd);
        int ns = 4;
        const int32_t par[4] = {z->tpp, z->epp, z->tpd, z->epd};
        const char *const par_key[4] = {"prefill.tp", "prefill.ep", "decode.tp", "decode.ep"};
        for (int k = 0; k < 4; k++)
            if (par[k] > 0) snprintf(buf[ns++], sizeof buf[0], "cluster.%s=%d", par_key[k], par[k]);
        if (rate > 0) snprintf(buf[ns++], sizeof buf[0], "%s=%.17g", pl->rate_key, rate);
        for (int i = 0; i < ns; i++)
            sets[i] = buf[i];
        for (int i = 0; i < ns && !st; i++)
            st = sim_config_set(c, sets[i], &pl->err);
        if (!st) st = sim_config_validate(c, &pl->err);
        void *sj = NULL;
        bool tty = isatty(2);
        if (!st && tty) {
            char r[48] = "";
            if (rate > 0) snprintf(r, sizeof r, ", %.4g req/s", rate);
            fprintf(stderr, "\r  plan: run %d: prefill %d x %d, decode %d x %d%s ", pl->runs + 1, p,
                    gp, d, gd, r);
            fflush(stderr);
        }
        if (!st) {
            sim_run_opts o = {.quiet = true};
            st = sim_run(c, &o, &sj, &pl->err);
            pl->runs++;
            if (tty) fprintf(stderr, "\r%72s\r", "");
        }
        if (st) {
            pl->st = st;
            kvf_err_prefix(&pl->err, "run with prefill %d x %d, decode %d x %d GPUs", p, gp, d, gd);
        } else {
            e.ran = true;
            e.ttft_p90 = sim_points_num(sj, "ttft_ms.p90");
            e.tpot_p90 = sim_points_num(sj, "tpot_ms.p90");
            e.attainment = sim_points_num(sj, "slo.attainment");
            e.cost_day = sim_points_cost_per_day(c, sj);
            e.gpus = sim_points_gpus(sj);
            e.util_p = sim_points_num(sj, "utilization.prefill");
            e.util_d = sim_points_num(sj, "utilization.decode");
            e.goodput_rps = sim_points_num(sj, "slo.goodput_rps");
            e.goodput_tok_s = sim_points_num(sj, "slo.goodput_tok_s");
            snprintf(e.sat, sizeof e.sat, "%s", sim_points_str(sj, "saturation.state"));
            double completed = sim_points_num(sj, "requests.completed");
            e.stable = !strcmp(e.sat, "stable");
            e.ttft_ok = e.ttft_p90 <= pl->slo_ttft;
            e.tpot_ok = e.tpot_p90 <= pl->slo_tpot;
            // SLOs by class (slo.classes.*): each class against its own bounds, as the
            // summary's slo.met says; else the scenario-wide p90 bounds
            bool by_class = false;
            for (int k = 0; k < TRC_CLASS_COUNT; k++)
                for (int m = 0; m < SIM_SLO_METRICS; m++)
                    for (int q = 0; q < SIM_SLO_STATS; q++)
                        by_class |= c->slo.cls_ms[k][m][q] > 0;
            if (by_class) plan_class_slos(sj, &e);
            e.ok = e.stable && e.ttft_ok && e.tpot_ok && completed > 0;
        }
        if (e.ran && pl->keep_summaries)
            e.summary = sj;
        else
            json_decref(sj);
        free(c);
    }
    kvf_grow((void **)&pl->ev, &pl->cap, pl->n + 1, sizeof *pl->ev);
    pl->ev[pl->n++] = e;
    return e;
}

// SLOs by class: which bounds of slo.by_class the run missed. A TTFT bound asks for prefill,
// a TPOT or E2E bound for decode (the search grows the pool behind the bound missed).
static void plan_class_slos(json_t *sj, plan_eval *e) {
    e->ttft_ok = e->tpot_ok = true;
    e->class_miss[0] = '\0';
    size_t k = 0;
    const char *cls;
    json_t *o;
    json_object_foreach(json_object_get(json_object_get(sj, "slo"), "by_class"), cls, o) {
        if (!json_object_get(o, "met")) continue;   // held to the scenario-wide bounds
        const char *key;
        json_t *b;
        json_object_foreach(json_object_get(o, "bounds"), key, b) {
            json_t *v = json_object_get(b, "value");
            double bound = json_number_value(json_object_get(b, "bound"));
            if (!json_is_number(v) || json_number_value(v) <= bound) continue;
            if (!strncmp(key, "ttft", 4))
                e->ttft_ok = false;
            else
                e->tpot_ok = false;
            if (k + 1 < sizeof e->class_miss)
                k += (size_t)snprintf(e->class_miss + k, sizeof e->class_miss - k,
                                      "%s%s %s %.4g > %.4g", k ? ", " : "", cls, key,
                                      json_number_value(v), bound);
        }
    }
}

static bool find_eval_const(const planner *pl, int p, int d, const plan_size *z, double rate) {
    for (size_t i = 0; i < pl->n; i++)
        if (same(&pl->ev[i], p, d, z, rate)) return true;
    return false;
}

static bool ok_at(planner *pl, int p, int d, const plan_size *z) {
    return eval(pl, p, d, z, 0).ok;
}

// Walks (p, d) down one instance at a time while it stays feasible (see step 5).
static void descend(planner *pl, int *p, int *d, const plan_size *z) {
    for (bool moved = true; moved && !pl->st;) {
        moved = false;
        while (*p > 1 && ok_at(pl, *p - 1, *d, z)) {
            (*p)--;
            moved = true;
        }
        while (!pl->colocated && *d > 1 && ok_at(pl, *p, *d - 1, z)) {
            (*d)--;
            moved = true;
        }
    }
}

// Smallest x in (lo, hi] with pred true, given pred(hi) true and pred(lo) false (or lo = 0).
static int bisect(planner *pl, int lo, int hi,
                  bool (*pred)(planner *, int, int, const plan_size *, int), int other,
                  const plan_size *z) {
    while (hi - lo > 1 && !pl->st) {
        int mid = lo + (hi - lo) / 2;
        if (pred(pl, mid, other, z, 0))
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

// Phase predicates: x is the count being searched, other the fixed count of the other pool.
static bool pred_prefill(planner *pl, int x, int other, const plan_size *z, int unused) {
    (void)unused;
    plan_eval e = eval(pl, x, other, z, 0);
    return e.ran && e.ttft_ok && e.stable;
}

static bool pred_decode(planner *pl, int x, int other, const plan_size *z, int unused) {
    (void)unused;
    plan_eval e = eval(pl, other, x, z, 0);
    return e.ran && e.tpot_ok && e.stable;
}

static bool pred_joint_decode(planner *pl, int x, int other, const plan_size *z, int unused) {
    (void)unused;
    return eval(pl, other, x, z, 0).ok;
}

static int inst_cap(const planner *pl, const plan_size *z) {
    if (pl->max_gpus <= 0) return PLAN_INST_CAP;
    int c = pl->max_gpus / KVF_MIN(z->gp, z->gd);
    return c < 1 ? 1 : (c > PLAN_INST_CAP ? PLAN_INST_CAP : c);
}

// Candidate configurations (locally minimal feasible points) found by one search.
typedef struct plan_cands {
    int p[256], d[256];
    plan_size z[256];
    int n;
} plan_cands;

static void add_cand(plan_cands *c, int p, int d, const plan_size *z) {
    for (int i = 0; i < c->n; i++)
        if (c->p[i] == p && c->d[i] == d && !memcmp(&c->z[i], z, offsetof(plan_size, label)))
            return;
    if (c->n < 256) {
        c->p[c->n] = p;
        c->d[c->n] = d;
        c->z[c->n] = *z;
        c->n++;
    }
}

// The search's starting counts: the scenario's (colocated: prefill + decode instances form
// one pool, sized as prefill.instances with decode.instances = 0), within the instance cap
// and trimmed to --max-gpus.
static void search_start(const planner *pl, const plan_size *z, int cap, int *p, int *d) {
    const sim_config *b = pl->base;
    *p = pl->colocated ? b->cluster.prefill.instances + b->cluster.decode.instances
                       : b->cluster.prefill.instances;
    *p = KVF_MAX(1, KVF_MIN(*p, cap));
    *d = pl->colocated ? 0 : KVF_MAX(1, KVF_MIN(b->cluster.decode.instances, cap));
    while (pl->max_gpus > 0 && est_gpus(pl, *p, *d, z->gp, z->gd) > pl->max_gpus &&
           (*p > 1 || *d > 1)) {
        if (*p >= *d || pl->colocated || *d == 1)
            *p = KVF_MAX(1, *p - 1);
        else
            (*d)--;
    }
}

// A stable run whose failing p90 did not improve by 1 % when its pool doubled (from prev to e)
// has hit a floor more instances cannot lower (e.g. the compute time of the longest prompts):
// more doubling would only cost runs. True (with the reason noted) when so.
static bool hit_floor(planner *pl, const plan_size *z, const plan_eval *e, const plan_eval *prev) {
    if (!e->stable || !prev->stable) return false;
    if (!e->ttft_ok && e->p >= 2 * prev->p && e->ttft_p90 >= 0.99 * prev->ttft_p90) {
        note(pl,
             "%s: TTFT p90 stays at %.1f ms (bound %.0f) from %d to "
             "%d prefill instances",
             z->label, e->ttft_p90, pl->slo_ttft, prev->p, e->p);
        return true;
    }
    bool d_doubled = pl->colocated ? e->p >= 2 * prev->p : e->d >= 2 * prev->d;
    if (!e->tpot_ok && d_doubled && e->tpot_p90 >= 0.99 * prev->tpot_p90) {
        note(pl,
             "%s: TPOT p90 stays at %.2f ms (bound %.0f) from %d to "
             "%d %s instances",
             z->label, e->tpot_p90, pl->slo_tpot, pl->colocated ? prev->p : prev->d,
             pl->colocated ? e->p : e->d, pl->colocated ? "colocated" : "decode");
        return true;
    }
    return false;
}

// The next counts after the infeasible run e at (p, d): the pool whose SLO fails doubled
// (both when unstable), trimmed to --max-gpus; when the budget is full, one instance moved to
// the failing pool. False (reason noted) when no split of the budget can succeed.
static bool search_grow(planner *pl, const plan_size *z, int cap, const plan_eval *e, int *p,
                        int *d) {
    bool gp = !e->ttft_ok || !e->stable || pl->colocated;
    bool gd = !pl->colocated && (!e->tpot_ok || !e->stable);
    int np = gp ? KVF_MIN(2 * *p, cap) : *p, nd = gd ? KVF_MIN(2 * *d, cap) : *d;
    while (pl->max_gpus > 0 && est_gpus(pl, np, nd, z->gp, z->gd) > pl->max_gpus &&
           (np > *p || nd > *d)) {
        if (np - *p >= nd - *d)
            np--;
        else
            nd--;
    }
    if (np == *p && nd == *d) {
        // The budget is full: move one instance to the pool that fails. When both fail, no
        // split of this budget can succeed (each pool's SLO is monotone in its count).
        bool wp = !e->ttft_ok || (!e->stable && e->util_p >= e->util_d);
        bool wd = !e->tpot_ok || (!e->stable && e->util_d > e->util_p);
        if (pl->max_gpus <= 0 || pl->colocated || (wp && wd) || (!wp && !wd)) {
            note(pl, "%s: no split of %s meets the SLOs", z->label,
                 pl->max_gpus > 0 ? "--max-gpus" : "the instance limit");
            return false;
        }
        np = wp ? *p + 1 : *p - 1;
        nd = wp ? *d - 1 : *d + 1;
        if (np < 1 || nd < 1 || np > cap || nd > cap || find_eval_const(pl, np, nd, z, 0)) {
            note(pl, "%s: no split of --max-gpus meets the SLOs", z->label);
            return false;
        }
    }
    *p = np;
    *d = nd;
    return true;
}

// Step 1: grows (p, d) until it is feasible. False when it never is within the limits.
static bool search_generous(planner *pl, const plan_size *z, int cap, int *p, int *d) {
    plan_eval prev;
    memset(&prev, 0, sizeof prev);
    bool have_prev = false;
    for (int it = 0;; it++) {
        plan_eval e = eval(pl, *p, *d, z, 0);
        if (pl->st) return false;
        if (e.ok) return true;
        if (!e.ran || it > 64) {
            if (!e.ran) note(pl, "%s: over --max-gpus before the SLOs are met", z->label);
            return false;
        }
        if (have_prev && hit_floor(pl, z, &e, &prev)) return false;
        prev = e;
        have_prev = true;
        if (!search_grow(pl, z, cap, &e, p, d)) return false;
    }
}

// Step 4: the joint check of (p, d), fixed up by adding an instance to the pool whose SLO
// fails (unstable: the busier pool). False when it stays infeasible within the cap.
static bool search_joint(planner *pl, const plan_size *z, int cap, int *p, int *d) {
    for (int it = 0; it < 256 && !pl->st; it++) {
        plan_eval e = eval(pl, *p, *d, z, 0);
        if (e.ok) break;
        if (!e.ran) return false;
        bool more_p = !e.ttft_ok, more_d = !e.tpot_ok;
        if (!more_p && !more_d) {   // unstable: grow the busier pool
            if (e.util_p >= e.util_d)
                more_p = true;
            else
                more_d = true;
        }
        if (more_p) (*p)++;
        if (more_d) (*d)++;
        if (*p > cap || *d > cap) return false;
    }
    return !pl->st && ok_at(pl, *p, *d, z);
}

// Steps 5 and 6 from the feasible (p, d): walk down, then the ratio neighbours, each
// feasible one walked down too; (p+1, d) and (p, d+1) are run so a runner-up always exists.
static void search_walk(planner *pl, const plan_size *z, int p, int d, plan_cands *cands) {
    descend(pl, &p, &d, z);
    add_cand(cands, p, d, z);
    const int dp[2] = {1, -1}, dd[2] = {-1, 1};
    for (int k = 0; k < 2 && !pl->st; k++) {
        int np = p + dp[k], nd = d + dd[k];
        if (np < 1 || nd < 1) continue;
        if (ok_at(pl, np, nd, z)) {
            descend(pl, &np, &nd, z);
            add_cand(cands, np, nd, z);
        }
    }
    ok_at(pl, p + 1, d, z);
    ok_at(pl, p, d + 1, z);
}

// --vary-ratio: the frontier p -> least feasible d, for p from the bisected prefill count
// minus one upwards, while a point can still beat the best.
static void search_frontier(planner *pl, const plan_size *z, int cap, int p, int d,
                            plan_cands *cands) {
    int start = KVF_MAX(1, p - 1), dhi = d;
    double best_gpus = INFINITY;
    for (int q = start; q <= cap && !pl->st; q++) {
        if (est_gpus(pl, q, 1, z->gp, z->gd) > best_gpus) break;
        int hi = KVF_MAX(dhi, 1);
        while (!pl->st && !ok_at(pl, q, hi, z) && hi < cap)
            hi = KVF_MIN(2 * hi, cap);
        if (!ok_at(pl, q, hi, z)) continue;
        int dm = bisect(pl, 0, hi, pred_joint_decode, q, z);
        int qq = q, dd2 = dm;
        descend(pl, &qq, &dd2, z);
        add_cand(cands, qq, dd2, z);
        double gg = est_gpus(pl, qq, dd2, z->gp, z->gd);
        if (gg < best_gpus) best_gpus = gg;
        dhi = dm;
        if (dm == 1) break;   // more prefill cannot lower decode further
    }
}

// Runs the search of the header comment for the instance size z, adding what it finds to
// cands. Returns false when no feasible configuration was found within the limits.
static bool search(planner *pl, const plan_size *z, bool vary_ratio, plan_cands *cands) {
    int cap = inst_cap(pl, z), p, d;
    search_start(pl, z, cap, &p, &d);
    if (!search_generous(pl, z, cap, &p, &d)) return false;
    int P = p, D = d;
    if (pl->colocated) {
        p = bisect(pl, 0, P, pred_prefill, d, z);
        while (!pl->st && !ok_at(pl, p, d, z) && p < P)
            p++;
        descend(pl, &p, &d, z);
        add_cand(cands, p, d, z);
        return !pl->st;
    }
    // 2. prefill with decode generous
    p = bisect(pl, 0, P, pred_prefill, D, z);
    // 3. decode with that prefill (widen if even D fails there)
    while (!pl->st && !pred_decode(pl, D, p, z, 0) && D < cap)
        D = KVF_MIN(2 * D, cap);
    d = bisect(pl, 0, D, pred_decode, p, z);
    if (!search_joint(pl, z, cap, &p, &d)) return false;
    if (vary_ratio)
        search_frontier(pl, z, cap, p, d, cands);
    else
        search_walk(pl, z, p, d, cands);
    return !pl->st;
}

// Costs equal to a part in 1e6 (the store's bill varies by bytes between layouts) tie.
static bool same_cost(double a, double b) {
    return fabs(a - b) <= 1e-6 * fmax(fabs(a), fabs(b));
}

// Orders feasible evaluations: cost, then GPUs, then more goodput, then the larger SLO ratio
// (more headroom first).
static bool better(const planner *pl, const plan_eval *a, const plan_eval *b) {
    if (!same_cost(a->cost_day, b->cost_day)) return a->cost_day < b->cost_day;
    if (a->gpus != b->gpus) return a->gpus < b->gpus;
    double ga = isfinite(a->goodput_rps) ? a->goodput_rps : 0;
    double gb = isfinite(b->goodput_rps) ? b->goodput_rps : 0;
    if (ga != gb) return ga > gb;
    return ratio_max(pl, a) < ratio_max(pl, b);
}

static const plan_eval *find_eval(const planner *pl, int p, int d, const plan_size *z,
                                  double rate) {
    for (size_t i = 0; i < pl->n; i++)
        if (same(&pl->ev[i], p, d, z, rate)) return &pl->ev[i];
    return NULL;
}

// The shape an evaluation ran with.
static plan_size shape_of(const plan_eval *e) {
    return (plan_size){
        .gp = e->gp, .gd = e->gd, .tpp = e->tpp, .epp = e->epp, .tpd = e->tpd, .epd = e->epd};
}

static int usage_plan(FILE *f, int rc) {
    fprintf(
        f, "usage: kvfleet plan SCENARIO [--slo ttft_p90_ms=X] [--slo tpot_p90_ms=Y]\n"
           "                    [--max-gpus N] [--vary-ratio] [--gpus-per-instance G1,G2,...]\n"
           "                    [--prefill-par SHAPES] [--decode-par SHAPES] [--html FILE]\n"
           "                    [--set K=V]... [--json]\n"
           "       kvfleet plan SCENARIO --find max-rate|max-goodput [--slo ...] [--tol FRACTION]\n"
           "                    [--json]\n"
           "  least-cost instance counts per pool meeting the SLOs on stable runs; or the\n"
           "  highest workload rate the scenario's cluster serves within them (max-rate), or\n"
           "  the offered rate at which it delivers the most goodput (max-goodput)\n"
           "  SHAPES: a list like tp8,tp4dp2,tp2dp4ep8 (TP x DP GPUs per instance, EP over\n"
           "  them): every prefill shape is searched with every decode shape\n"
           "  --html FILE: every run of the search on one page (the answer, cost per day\n"
           "  against SLO attainment with its frontier, a row per run)\n"
           "exit codes: 0 a plan was found; 3 nothing feasible meets the SLOs; 1 a run failed;\n"
           "            2 bad usage or input\n");
    return rc;
}

// "--slo NAME=X": NAME one of the scenario's SLO keys, X a positive number.
static kvf_status parse_slo(const char *arg, char *key, size_t kn, double *v, kvf_err *err) {
    const char *eq = strchr(arg, '=');
    if (!eq) return kvf_fail(err, KVF_EINVAL, "--slo '%s': expected NAME=VALUE", arg);
    size_t n = (size_t)(eq - arg);
    if (n >= kn) n = kn - 1;
    memcpy(key, arg, n);
    key[n] = '\0';
    if (strcmp(key, "ttft_p90_ms") && strcmp(key, "tpot_p90_ms"))
        return kvf_fail(err, KVF_EINVAL, "--slo %s: unknown SLO (known: ttft_p90_ms, tpot_p90_ms)",
                        key);
    char *end = NULL;
    *v = strtod(eq + 1, &end);
    if (!eq[1] || *end || !isfinite(*v) || *v <= 0)
        return kvf_fail(err, KVF_EINVAL, "--slo %s: expects a positive number of ms, got '%s'", key,
                        eq + 1);
    return KVF_OK;
}

static double natural_rate(const planner *pl, kvf_err *err, kvf_status *st) {
    const sim_config *b = pl->base;
    if (b->workload.gen.profile[0]) return b->workload.gen.rate_rps;
    if (b->workload.opt.rate_rps > 0) return b->workload.opt.rate_rps;
    char path[SIM_PATH_MAX];
    sim_config_resolve(b, b->workload.trace, path, sizeof path);
    trc_options o = b->workload.opt;
    o.block_tokens = b->kv.block_tokens;
    o.seed = b->seed;
    trc_stats ts;
    *st = trc_stats_file(path, &o, &ts, err);
    if (*st) return 0;
    if (!(ts.rate_rps > 0)) {
        *st = kvf_fail(err, KVF_EINVAL, "%s: cannot tell the trace's request rate", path);
        return 0;
    }
    return ts.rate_rps;
}

// What --find varies the rate on: the scenario's cluster as written (counts into *p, *d, the
// shape into *z) and its rate (*r0). 0, or the exit code after the message.
static int rate_start(planner *pl, int *p, int *d, plan_size *z, double *r0) {
    kvf_status st = KVF_OK;
    kvf_err err = {0};
    *r0 = natural_rate(pl, &err, &st);
    if (st) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(st);
    }
    const sim_config *b = pl->base;
    *p = b->cluster.prefill.instances, *d = b->cluster.decode.instances;
    *z = (plan_size){.gp = b->cluster.prefill.gpus_per_instance,
                     .gd = b->cluster.decode.gpus_per_instance};
    return 0;
}

static int find_max_rate(planner *pl, double tol, bool json_out) {
    int p, d, rc;
    plan_size zs, *z = &zs;
    double r0;
    if ((rc = rate_start(pl, &p, &d, z, &r0))) return rc;
    int gp = z->gp, gd = z->gd;
    double lo = 0, hi = 0;
    if (eval(pl, p, d, z, r0).ok) {
        lo = r0;
        hi = 2 * r0;
        for (int i = 0; i < 30 && !pl->st && eval(pl, p, d, z, hi).ok; i++) {
            lo = hi;
            hi *= 2;
        }
    } else {
        hi = r0;
        lo = r0 / 2;
        for (int i = 0; i < 30 && !pl->st && !eval(pl, p, d, z, lo).ok; i++) {
            hi = lo;
            lo /= 2;
        }
        if (!eval(pl, p, d, z, lo).ok) lo = 0;
    }
    while (lo > 0 && !pl->st && hi - lo > tol * lo) {
        double mid = 0.5 * (lo + hi);
        if (eval(pl, p, d, z, mid).ok)
            lo = mid;
        else
            hi = mid;
    }
    if (pl->st) {
        fprintf(stderr, "kvfleet: %s\n", pl->err.msg);
        return kvf_exit_code(pl->st);
    }
    plan_rate r = {.r0 = r0, .lo = lo, .hi = hi, .tol = tol, .p = p, .d = d, .gp = gp, .gd = gd};
    r.best = lo > 0 ? find_eval(pl, p, d, z, lo) : NULL;
    r.fail = find_eval(pl, p, d, z, hi);
    if (json_out)
        cli_plan_rate_json(pl, &r);
    else
        cli_plan_rate_text(pl, &r);
    return r.best ? 0 : PLAN_EXIT_INFEASIBLE;
}

// Goodput of the scenario's cluster at offered rate r (0 when the run failed or gave none).
static double goodput_at(planner *pl, const plan_size *z, int p, int d, double r) {
    plan_eval e = eval(pl, p, d, z, r);
    return e.ran && isfinite(e.goodput_rps) ? e.goodput_rps : 0;
}

// --find max-goodput: goodput rises with the offered rate while the cluster keeps up and falls
// once queues grow (requests miss their SLOs). Bracket the peak by doubling (or halving) the
// rate from the scenario's until goodput falls, then narrow the bracket by golden sections
// until it is within tol of the best rate. Goodput of a finite trace is not exactly unimodal in
// the rate: the answer is the best rate run, within the bracket searched.
static int find_max_goodput(planner *pl, double tol, bool json_out) {
    int p, d, rc;
    plan_size zs, *z = &zs;
    double r0;
    if ((rc = rate_start(pl, &p, &d, z, &r0))) return rc;
    double lo = r0 / 2, mid = r0, hi = 2 * r0;
    double g_lo = goodput_at(pl, z, p, d, lo), g_mid = goodput_at(pl, z, p, d, mid);
    double g_hi = goodput_at(pl, z, p, d, hi);
    for (int i = 0; i < 30 && !pl->st && g_hi > g_mid; i++) {   // still rising: go up
        lo = mid, g_lo = g_mid, mid = hi, g_mid = g_hi;
        hi = 2 * mid;
        g_hi = goodput_at(pl, z, p, d, hi);
    }
    for (int i = 0; i < 30 && !pl->st && g_lo > g_mid; i++) {   // falling from below: go down
        hi = mid, g_hi = g_mid, mid = lo, g_mid = g_lo;
        lo = mid / 2;
        g_lo = goodput_at(pl, z, p, d, lo);
    }
    // golden sections of [lo, hi] around mid
    const double w = 0.381966011250105;
    for (int i = 0; i < 60 && !pl->st && hi - lo > tol * mid; i++) {
        bool right = hi - mid > mid - lo;
        double x = right ? mid + w * (hi - mid) : mid - w * (mid - lo);
        double gx = goodput_at(pl, z, p, d, x);
        if (gx > g_mid) {
            if (right)
                lo = mid;
            else
                hi = mid;
            mid = x, g_mid = gx;
        } else if (right) {
            hi = x;
        } else {
            lo = x;
        }
    }
    if (pl->st) {
        fprintf(stderr, "kvfleet: %s\n", pl->err.msg);
        return kvf_exit_code(pl->st);
    }
    plan_goodput g = {.r0 = r0, .tol = tol, .p = p, .d = d, .gp = z->gp, .gd = z->gd};
    for (size_t i = 0; i < pl->n; i++) {   // the best rate run (ties: the lower rate)
        const plan_eval *e = &pl->ev[i];
        if (e->ran && isfinite(e->goodput_rps) &&
            (!g.best || e->goodput_rps > g.best->goodput_rps ||
             (e->goodput_rps == g.best->goodput_rps && e->rate < g.best->rate)))
            g.best = e;
    }
    if (json_out)
        cli_plan_goodput_json(pl, &g);
    else
        cli_plan_goodput_text(pl, &g);
    return g.best && g.best->goodput_rps > 0 ? 0 : PLAN_EXIT_INFEASIBLE;
}

// The command line of plan, as given (numbers checked by plan_numbers).
typedef struct plan_args {
    const char *scenario, *find, *gpi, *maxg, *tols, *html;
    const char *par_s[2];             // --prefill-par, --decode-par
    plan_size par[2][PLAN_GPI_MAX];   // their shapes (gp or gd, and tp, ep of that pool)
    int npar[2];
    bool vary_ratio;
    char slo_sets[2][96];   // --slo as "slo.NAME=X" (the first two kept)
    int nslo;
    double tol;                    // --tol, default 0.01
    int gvals[PLAN_GPI_MAX], ng;   // --gpus-per-instance
    cli_common c;
} plan_args;

// --slo NAME=X, checked where it stands: appended to the plan_args at dst.
static int slo_option(const cli_spec *s, const char *opt, const char *val, void *dst) {
    (void)s, (void)opt;
    plan_args *a = dst;
    char key[64];
    double v = 0;
    kvf_err err = {0};
    kvf_status st = parse_slo(val, key, sizeof key, &v, &err);
    if (st) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return 2;
    }
    if (a->nslo < 2)
        snprintf(a->slo_sets[a->nslo++], sizeof a->slo_sets[0], "slo.%s=%.17g", key, v);
    return 0;
}

static int plan_parse(int argc, char **argv, plan_args *a) {
    memset(a, 0, sizeof *a);
    const cli_opt opts[] = {
        CLI_OPT_CALL("--slo", a, slo_option),
        CLI_OPT_STR("--max-gpus", &a->maxg),
        CLI_OPT_STR("--gpus-per-instance", &a->gpi),
        CLI_OPT_STR("--prefill-par", &a->par_s[0]),
        CLI_OPT_STR("--html", &a->html),
        CLI_OPT_STR("--decode-par", &a->par_s[1]),
        CLI_OPT_STR("--find", &a->find),
        CLI_OPT_STR("--tol", &a->tols),
        CLI_OPT_FLAG("--vary-ratio", &a->vary_ratio),
    };
    const cli_spec spec = {.cmd = "plan",
                           .usage = usage_plan,
                           .first = 1,
                           .opts = opts,
                           .nopts = (int)(sizeof opts / sizeof opts[0]),
                           .pos = &a->scenario,
                           .npos = 1,
                           .common = CLI_SET | CLI_JSON};
    int rc = cli_parse(&spec, argc, argv, &a->c);
    if (rc == CLI_GO && !a->scenario) return usage_plan(stderr, 2);
    return rc;
}

// One parallel shape: "tpT[dpD][epE]" (GPUs per instance T x D, TP T, EP E; E defaults to the
// scenario's, i.e. all the instance's GPUs) into *z for pool k (0 prefill, 1 decode).
static bool par_item(const char *s, size_t n, int k, plan_size *z) {
    char buf[32];
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    long tp = 0, dp = 1, ep = 0;
    const char *q = buf;
    while (*q) {
        long *dst = !strncmp(q, "tp", 2)   ? &tp
                    : !strncmp(q, "dp", 2) ? &dp
                    : !strncmp(q, "ep", 2) ? &ep
                                           : NULL;
        if (!dst || (dst == &tp && q != buf)) return false;
        char *end = NULL;
        *dst = strtol(q + 2, &end, 10);
        if (end == q + 2 || *dst < 1 || *dst > 4096) return false;
        q = end;
    }
    if (tp < 1 || tp * dp > 4096 || (ep > 0 && (tp * dp) % ep)) return false;
    int32_t g = (int32_t)(tp * dp);
    if (k == 0)
        z->gp = g, z->tpp = (int32_t)tp, z->epp = (int32_t)ep;
    else
        z->gd = g, z->tpd = (int32_t)tp, z->epd = (int32_t)ep;
    return true;
}

static int parse_par(plan_args *a, int k) {
    const char *opt = k ? "--decode-par" : "--prefill-par";
    for (const char *s = a->par_s[k]; s;) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        if (a->npar[k] == PLAN_GPI_MAX || !par_item(s, n, k, &a->par[k][a->npar[k]])) {
            fprintf(stderr,
                    "kvfleet plan: %s wants a list of shapes like tp8,tp4dp2,tp2dp4ep8 (TP, "
                    "then data-parallel attention replicas and expert parallelism; GPUs per "
                    "instance = TP x DP, EP divides them; at most %d), not '%s'\n",
                    opt, PLAN_GPI_MAX, a->par_s[k]);
            return 2;
        }
        a->npar[k]++;
        s = comma ? comma + 1 : NULL;
    }
    return 0;
}

// --find, --max-gpus (into pl), --tol and --gpus-per-instance checked; 0 or 2.
static int plan_numbers(plan_args *a, planner *pl) {
    if (a->find && strcmp(a->find, "max-rate") && strcmp(a->find, "max-goodput")) {
        fprintf(stderr, "kvfleet plan: --find knows max-rate and max-goodput, not '%s'\n", a->find);
        return 2;
    }
    if (a->maxg) {
        char *end = NULL;
        long v = strtol(a->maxg, &end, 10);
        if (!*a->maxg || *end || v < 1 || v > 1000000) {
            fprintf(stderr, "kvfleet plan: --max-gpus wants a positive whole number, not '%s'\n",
                    a->maxg);
            return 2;
        }
        pl->max_gpus = (int)v;
    }
    a->tol = 0.01;
    if (a->tols) {
        char *end = NULL;
        a->tol = strtod(a->tols, &end);
        if (!*a->tols || *end || !(a->tol > 0 && a->tol < 1)) {
            fprintf(stderr, "kvfleet plan: --tol wants a fraction in (0, 1), not '%s'\n", a->tols);
            return 2;
        }
    }
    for (int k = 0; k < 2; k++)
        if (a->par_s[k] && parse_par(a, k)) return 2;
    if (a->gpi && (a->par_s[0] || a->par_s[1])) {
        fprintf(stderr, "kvfleet plan: --gpus-per-instance and --prefill-par/--decode-par both "
                        "set the instance size: give one of them\n");
        return 2;
    }
    if (a->find && a->vary_ratio) {
        fprintf(stderr, "kvfleet plan: --vary-ratio shapes the cluster search; --find varies the "
                        "rate on the scenario's cluster and does not use it\n");
        return 2;
    }
    if (a->find && (a->gpi || a->par_s[0] || a->par_s[1])) {
        fprintf(stderr, "kvfleet plan: --find runs the scenario's cluster as written: "
                        "--gpus-per-instance, --prefill-par and --decode-par do not apply\n");
        return 2;
    }
    for (const char *s = a->gpi; s;) {
        char *end = NULL;
        long v = strtol(s, &end, 10);
        if (end == s || (*end && *end != ',') || v < 1 || v > 4096 || a->ng == PLAN_GPI_MAX) {
            fprintf(stderr,
                    "kvfleet plan: --gpus-per-instance wants a list like 1,2,4,8, not '%s'\n",
                    a->gpi);
            return 2;
        }
        a->gvals[a->ng++] = (int)v;
        s = *end ? end + 1 : NULL;
    }
    return 0;
}

// The base configuration (scenario + --set + --slo, validated) and what the search reads of
// it; 0 or the exit code after the message.
static int plan_load(planner *pl, const plan_args *a) {
    kvf_err err = {0};
    pl->base = kvf_malloc(sizeof *pl->base);
    kvf_status st = sim_points_load(pl->base, a->scenario, a->c.sets, a->c.nsets, &err);
    for (int i = 0; !st && i < a->nslo; i++)
        st = sim_config_set(pl->base, a->slo_sets[i], &err);
    if (!st) st = sim_config_validate(pl->base, &err);
    if (st) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(st);
    }
    pl->slo_ttft = pl->base->slo.ttft_p90_ms;
    pl->slo_tpot = pl->base->slo.tpot_p90_ms;
    pl->colocated = pl->base->cluster.mode == SIM_COLOCATED;
    pl->rate_key =
        pl->base->workload.gen.profile[0] ? "workload.generate.rate_rps" : "workload.rate_rps";
    if (!(pl->slo_ttft > 0) || !(pl->slo_tpot > 0)) {
        fprintf(
            stderr,
            "kvfleet plan: the SLO bounds must be positive (slo.ttft_p90_ms, slo.tpot_p90_ms)\n");
        return 2;
    }
    if (pl->base->cluster.n_schedule > 0 && !a->find)
        fprintf(stderr,
                "kvfleet plan: note: cluster.schedule changes instance counts by time of day "
                "and overrides the counts the plan tries\n");
    return 0;
}

// The label of a shape for messages: "prefill 8 GPUs (TP 4, EP 8), decode 16 GPUs (TP 2)".
static void shape_label(plan_size *z, bool colocated) {
    char a[48] = "", b[48] = "";
    if (z->tpp) snprintf(a, sizeof a, " (TP %d%s%.0d)", z->tpp, z->epp ? ", EP " : "", z->epp);
    if (z->tpd) snprintf(b, sizeof b, " (TP %d%s%.0d)", z->tpd, z->epd ? ", EP " : "", z->epd);
    if (colocated)
        snprintf(z->label, sizeof z->label, "%d GPU%s per instance%s", z->gp, z->gp == 1 ? "" : "s",
                 a);
    else if (z->gp == z->gd && !z->tpp && !z->tpd)
        snprintf(z->label, sizeof z->label, "%d GPU%s per instance", z->gp, z->gp == 1 ? "" : "s");
    else
        snprintf(z->label, sizeof z->label, "prefill %d GPU%s%s, decode %d GPU%s%s", z->gp,
                 z->gp == 1 ? "" : "s", a, z->gd, z->gd == 1 ? "" : "s", b);
}

// Instance shapes to search: the scenario's own (each pool its own), each listed size for
// both pools (--gpus-per-instance), or every pairing of a --prefill-par shape with a
// --decode-par shape (a pool without a list keeps the scenario's shape; colocated: the one
// pool takes --prefill-par), cheapest pairing first. Returns how many.
static int plan_sizes(const planner *pl, const plan_args *a, plan_size *sizes) {
    const sim_config *b = pl->base;
    plan_size base = {.gp = b->cluster.prefill.gpus_per_instance,
                      .gd = b->cluster.decode.gpus_per_instance};
    int n = 0;
    if (a->npar[0] || a->npar[1]) {
        int np = a->npar[0] ? a->npar[0] : 1, nd = pl->colocated ? 1 : a->npar[1] ? a->npar[1] : 1;
        for (int i = 0; i < np; i++)
            for (int j = 0; j < nd && n < PLAN_SHAPES_MAX; j++) {
                plan_size z = base;
                if (a->npar[0]) {
                    z.gp = a->par[0][i].gp, z.tpp = a->par[0][i].tpp, z.epp = a->par[0][i].epp;
                    if (pl->colocated) z.gd = z.gp, z.tpd = z.tpp, z.epd = z.epp;
                }
                if (a->npar[1] && !pl->colocated)
                    z.gd = a->par[1][j].gd, z.tpd = a->par[1][j].tpd, z.epd = a->par[1][j].epd;
                sizes[n++] = z;
            }
        // cheapest pairing first (GPUs of one instance of each pool): the cost bound then
        // prunes the most
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && sizes[j].gp + sizes[j].gd < sizes[j - 1].gp + sizes[j - 1].gd;
                 j--) {
                plan_size t = sizes[j];
                sizes[j] = sizes[j - 1], sizes[j - 1] = t;
            }
    } else {
        n = a->ng ? a->ng : 1;
        for (int i = 0; i < n; i++) {
            sizes[i] = base;
            if (a->ng) sizes[i].gp = sizes[i].gd = a->gvals[i];
        }
    }
    for (int i = 0; i < n; i++)
        shape_label(&sizes[i], pl->colocated);
    return n;
}

// The cheapest a shape can be: one instance of each pool, priced as the cheapest run of the
// plan so far per GPU (cost scales with GPUs at one price per pool hardware). True when even
// that cannot beat the best feasible cost found: the shape is not simulated.
static bool shape_pruned(const planner *pl, const plan_size *z) {
    const plan_eval *best = NULL;
    double per_gpu = INFINITY;
    for (size_t i = 0; i < pl->n; i++) {
        const plan_eval *e = &pl->ev[i];
        if (!e->ran || !(e->gpus > 0) || !isfinite(e->cost_day)) continue;
        per_gpu = fmin(per_gpu, e->cost_day / e->gpus);
        if (e->ok && (!best || e->cost_day < best->cost_day)) best = e;
    }
    if (!best || !isfinite(per_gpu)) return false;
    double floor = est_gpus(pl, 1, 1, z->gp, z->gd) * per_gpu;
    return floor >= best->cost_day;
}

// Whether the scenario with one instance of each pool in shape z builds: it validates (TP and
// EP divide the GPUs) and a run of its first request starts (the model's weights fit the
// instance's GPUs with room for KV); when not, the reason is noted and the shape is not
// searched.
static bool shape_fits(planner *pl, const plan_size *z) {
    sim_config *c = kvf_malloc(sizeof *c);
    memcpy(c, pl->base, sizeof *c);
    kvf_err err = {0};
    char buf[8][160];
    int ns = 0;
    snprintf(buf[ns++], sizeof buf[0], "cluster.prefill.instances=1");
    snprintf(buf[ns++], sizeof buf[0], "cluster.decode.instances=%d", pl->colocated ? 0 : 1);
    snprintf(buf[ns++], sizeof buf[0], "cluster.prefill.gpus_per_instance=%d", z->gp);
    snprintf(buf[ns++], sizeof buf[0], "cluster.decode.gpus_per_instance=%d", z->gd);
    const int32_t par[4] = {z->tpp, z->epp, z->tpd, z->epd};
    const char *const par_key[4] = {"prefill.tp", "prefill.ep", "decode.tp", "decode.ep"};
    for (int k = 0; k < 4; k++)
        if (par[k] > 0) snprintf(buf[ns++], sizeof buf[0], "cluster.%s=%d", par_key[k], par[k]);
    kvf_status st = KVF_OK;
    for (int i = 0; i < ns && !st; i++)
        st = sim_config_set(c, buf[i], &err);
    if (!st) st = sim_config_set(c, "workload.limit_requests=1", &err);
    if (!st) st = sim_config_validate(c, &err);
    if (!st) {
        sim_run_opts o = {.quiet = true};
        void *sj = NULL;
        st = sim_run(c, &o, &sj, &err);
        json_decref(sj);
    }
    free(c);
    if (st) note(pl, "%s: left out (%s)", z->label, err.msg);
    return !st;
}

size_t cli_plan_frontier(const planner *pl, const plan_eval **out, size_t n) {
    // feasible runs by cost (then more goodput first); keep each that beats every cheaper one
    size_t m = 0;
    for (size_t i = 0; i < pl->n; i++) {
        const plan_eval *e = &pl->ev[i];
        if (!e->ok || !isfinite(e->cost_day)) continue;
        double g = isfinite(e->goodput_rps) ? e->goodput_rps : 0;
        bool dominated = false;
        for (size_t j = 0; j < pl->n && !dominated; j++) {
            const plan_eval *f = &pl->ev[j];
            if (f == e || !f->ok || !isfinite(f->cost_day)) continue;
            double gf = isfinite(f->goodput_rps) ? f->goodput_rps : 0;
            bool eq = same_cost(f->cost_day, e->cost_day);
            dominated = ((eq || f->cost_day < e->cost_day) && gf > g) ||
                        (!eq && f->cost_day < e->cost_day && gf >= g) || (eq && gf == g && f < e);
        }
        if (!dominated && m < n) out[m++] = e;
    }
    for (size_t i = 1; i < m; i++)
        for (size_t j = i; j > 0 && out[j]->cost_day < out[j - 1]->cost_day; j--) {
            const plan_eval *t = out[j];
            out[j] = out[j - 1], out[j - 1] = t;
        }
    return m;
}

static plan_answer plan_choose(const planner *pl, const plan_cands *cands) {
    plan_answer r = {0};
    for (int i = 0; i < cands->n; i++) {
        const plan_eval *e = find_eval(pl, cands->p[i], cands->d[i], &cands->z[i], 0);
        if (e && e->ok && (!r.best || better(pl, e, r.best))) r.best = e;
    }
    for (size_t i = 0; r.best && i < pl->n; i++) {
        const plan_eval *e = &pl->ev[i];
        if (e != r.best && e->ok && (!r.second || better(pl, e, r.second))) r.second = e;
    }
    const plan_eval *b = r.best;
    plan_size bz = b ? shape_of(b) : (plan_size){0};
    r.fewer_p = b && b->p > 1 ? find_eval(pl, b->p - 1, b->d, &bz, 0) : NULL;
    r.fewer_d = b && !pl->colocated && b->d > 1 ? find_eval(pl, b->p, b->d - 1, &bz, 0) : NULL;
    return r;
}

// The page --html names: a new or regular file, not a link, and not one of the plan's inputs
// (the scenario, the trace); 0 or 2 after the message.
static int html_check(const planner *pl, const plan_args *a) {
    struct stat h, in;
    kvf_err err = {0};
    if (lstat(a->html, &h) == 0 && S_ISLNK(h.st_mode)) {
        fprintf(stderr,
                "kvfleet plan: --html %s: a symbolic link; refused (nothing is written through a "
                "link): name the file itself\n",
                a->html);
        return 2;
    }
    if (rpt_regular_or_missing("plan: --html", a->html, &err)) {
        fprintf(stderr, "kvfleet %s\n", err.msg);
        return 2;
    }
    char trace[SIM_PATH_MAX];
    sim_config_resolve(pl->base, pl->base->workload.trace, trace, sizeof trace);
    const char *inputs[2] = {a->scenario, pl->base->workload.trace[0] ? trace : NULL};
    for (int i = 0; i < 2 && stat(a->html, &h) == 0; i++)
        if (inputs[i] && stat(inputs[i], &in) == 0 && in.st_dev == h.st_dev &&
            in.st_ino == h.st_ino) {
            fprintf(stderr,
                    "kvfleet plan: --html %s: is the plan's %s; refused, an output never "
                    "overwrites an input\n",
                    a->html, i ? "trace" : "scenario");
            return 2;
        }
    return 0;
}

// One pool's shape as a page's key: "2 x 8 GPUs (TP 2, DP 4, EP 8)".
static void pool_text(int n, int g, int tp, int ep, char *out, size_t len) {
    int k = snprintf(out, len, "%d x %d GPU%s", n, g, g == 1 ? "" : "s");
    if (tp && k > 0 && (size_t)k < len)
        snprintf(out + k, len - (size_t)k, " (TP %d, DP %d, EP %d)", tp, g / tp, ep ? ep : g);
}

// --html: every run of the plan as one page of points (reports/rpt_points.c).
static int html_write(const planner *pl, const plan_args *a) {
    json_t *pts = json_array();
    for (size_t i = 0; i < pl->n; i++) {
        const plan_eval *e = &pl->ev[i];
        if (!e->ran || !e->summary) continue;
        char pp[96], dd[96], label[32];
        pool_text(e->p, e->gp, e->tpp, e->epp, pp, sizeof pp);
        pool_text(e->d, e->gd, e->tpd, e->epd, dd, sizeof dd);
        snprintf(label, sizeof label, "run %zu", i + 1);
        json_t *k = json_object();
        json_object_set_new(k, pl->colocated ? "colocated" : "prefill", json_string(pp));
        if (!pl->colocated) json_object_set_new(k, "decode", json_string(dd));
        if (e->rate > 0) json_object_set_new(k, pl->rate_key, json_real(e->rate));
        json_object_set_new(k, "meets the SLOs", json_string(e->ok ? "yes" : "no"));
        json_array_append_new(pts,
                              json_pack("{s:s, s:o, s:O, s:s}", "label", label, "keys", k,
                                        "summary", (json_t *)e->summary, "status", "completed"));
    }
    char title[SIM_PATH_MAX + 64];
    snprintf(title, sizeof title, "kvfleet plan of %s", a->scenario);
    kvf_err err = {0};
    kvf_status st = rpt_points_html(a->html, title, pts, &err);
    json_decref(pts);
    if (st) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(st);
    }
    return 0;
}

static int plan_main(planner *pl, int argc, char **argv) {
    static plan_args a;
    int rc = plan_parse(argc, argv, &a);
    if (rc != CLI_GO) return rc;
    if ((rc = plan_numbers(&a, pl)) || (rc = plan_load(pl, &a))) return rc;
    if (a.html && (rc = html_check(pl, &a))) return rc;
    pl->keep_summaries = a.html != NULL;
    if (a.find) {
        rc = !strcmp(a.find, "max-goodput") ? find_max_goodput(pl, a.tol, a.c.json)
                                            : find_max_rate(pl, a.tol, a.c.json);
        int hr = a.html && (rc == 0 || rc == PLAN_EXIT_INFEASIBLE) ? html_write(pl, &a) : 0;
        return hr ? hr : rc;
    }
    static plan_size sizes[PLAN_SHAPES_MAX];
    int nsz = plan_sizes(pl, &a, sizes);
    static plan_cands cands;
    cands.n = 0;
    pl->shapes = nsz;
    for (int i = 0; i < nsz && !pl->st; i++) {
        if (nsz > 1 && !shape_fits(pl, &sizes[i])) {
            pl->unfit++;
            continue;
        }
        if (nsz > 1 && shape_pruned(pl, &sizes[i])) {
            pl->pruned++;
            continue;
        }
        search(pl, &sizes[i], a.vary_ratio, &cands);
    }
    if (pl->st) {
        fprintf(stderr, "kvfleet: %s\n", pl->err.msg);
        return kvf_exit_code(pl->st);
    }
    plan_answer r = plan_choose(pl, &cands);
    if (a.c.json)
        cli_plan_print_json(pl, &r, a.vary_ratio);
    else
        cli_plan_print_text(pl, &r, a.vary_ratio);
    if (a.html && (rc = html_write(pl, &a))) return rc;
    return r.best ? 0 : PLAN_EXIT_INFEASIBLE;
}

int cli_plan(int argc, char **argv) {
    planner pl;
    memset(&pl, 0, sizeof pl);
    int rc = plan_main(&pl, argc, argv);
    for (size_t i = 0; i < pl.n; i++)
        json_decref(pl.ev[i].summary);
    free(pl.ev);
    free(pl.base);
    return rc;
}
