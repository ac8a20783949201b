// sim/sim_router.c -- routing policies, one function each behind a name table. Adding a
// policy means one function here and one table entry.
//
// Prefill routers see each instance's load through a snapshot refreshed every
// router.stale_ms (real routers act on old load reports); 0 means they see the present.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cluster.h"

// Load signals, possibly stale: with router.stale_ms > 0 each pool's routers read a snapshot
// taken at most that long ago (per pool: a decode-side refresh does not stand for the prefill
// side); with 0 they read the live figures and no snapshot is kept.
static void refresh(sim_cluster *c, sim_pool *p) {
    if (c->cfg->router.stale_ns <= 0) return;
    if (p->stale_at > 0 && c->now - p->stale_at < (sim_time)c->cfg->router.stale_ns) return;
    p->stale_at = c->now;
    for (uint32_t i = 0; i < p->n; i++) {
        sim_inst *in = &c->inst[p->first + i];
        in->stale_queued = in->queued_tokens;
        in->stale_work = in->queued_work_s;
        in->stale_kv = sim_inst_kv_used(in, c->now) + (double)in->dwait.n;
        in->stale_n = in->n_running + (uint32_t)in->dwait.n;
    }
    // the index follows the snapshot
    for (uint32_t i = 0; i < p->n && p->load; i++)
        sim_router_touch(c, &c->inst[p->first + i]);
}

static double queued(const sim_cluster *c, const sim_inst *in) {
    return c->cfg->router.stale_ns > 0 ? in->stale_queued : in->queued_tokens;
}

static double queued_work(const sim_cluster *c, const sim_inst *in) {
    return c->cfg->router.stale_ns > 0 ? in->stale_work : in->queued_work_s;
}

// KV held (with the steps of a run in flight that have ended, sim_inst_kv_used) and waiting.
static double kv_load(const sim_cluster *c, const sim_inst *in) {
    double used = c->cfg->router.stale_ns > 0 ? in->stale_kv
                                              : sim_inst_kv_used(in, c->now) + (double)in->dwait.n;
    return used / (in->kv_cap > 0 ? in->kv_cap : 1);
}

static double requests(const sim_cluster *c, const sim_inst *in) {
    return c->cfg->router.stale_ns > 0 ? in->stale_n : in->n_running + (double)in->dwait.n;
}

// ---- min-load index -------------------------------------------------------------------------
// Node k from its children (ties to the left); false when it already held that. The tree's
// arrays are passed in, not read through the pool, so a walk up the tree keeps them in
// registers.
static inline bool lindex_pull(double *lv, uint32_t *la, uint32_t k) {
    // the child by index arithmetic, not a branch: which one wins is as good as random, and
    // a mispredicted branch a level cost more than the walk itself
    uint32_t l = 2 * k, w = l + !(lv[l] <= lv[l + 1]);
    double nv = lv[w];
    uint32_t na = la[w];
    if (nv == lv[k] && na == la[k]) return false;
    lv[k] = nv;
    la[k] = na;
    return true;
}

void sim_router_touch(sim_cluster *c, const sim_inst *in) {
    sim_pool *p = &c->pool[in->pool];
    double *lv = p->lval;
    if (!lv) return;
    uint32_t *la = p->larg;
    // a snapshot router sees the instance change only at the next refresh
    uint32_t k = p->lsize + in->idx;
    double v = in->active ? p->load(c, in) : INFINITY;
    if (v == lv[k]) return;
    lv[k] = v;
    // up the tree while a node's minimum changes: above one that keeps it nothing does
    for (k /= 2; k >= 1 && lindex_pull(lv, la, k);)
        k /= 2;
}

// The active instance of the pool with the least load (first one on ties).
static uint32_t argmin_scan(sim_cluster *c, sim_pool *p,
                            double (*load)(const sim_cluster *, const sim_inst *)) {
    uint32_t best = SIM_NONE;
    double bl = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        sim_inst *in = &c->inst[p->first + i];
        if (!in->active) continue;
        double l = load(c, in);
        if (best == SIM_NONE || l < bl) {
            best = in->id;
            bl = l;
        }
    }
    return best;
}

static uint32_t argmin(sim_cluster *c, sim_pool *p,
                       double (*load)(const sim_cluster *, const sim_inst *)) {
    refresh(c, p);
    if (!p->lval || p->load != load) return argmin_scan(c, p, load);
    if (load == kv_load && c->cfg->router.stale_ns <= 0)
        // An instance in a run of decode steps holds more KV with every step that ends (a run
        // stops before any member finishes) and its leaf keeps the load of its last update, a
        // lower bound. The least leaf is brought up to now until it is exact: every other
        // instance's load is then at least its leaf, so no less than the pick's, and one of a
        // lower index has a greater leaf (the tree takes the left one on ties). The pick is the
        // scan's with only the instances that could beat it brought up to date.
        while (p->lval[1] != INFINITY) {
            sim_inst *in = &c->inst[p->first + p->larg[1]];
            if (!(in->busy && in->run_m > 1 && in->run_told + 1 < in->run_m &&
                  in->run_end[in->run_told] <= c->now))
                break;
            in->run_told = sim_run_done_by(in, c->now);
            sim_router_touch(c, in);
        }
    uint32_t best = p->lval[1] == INFINITY ? SIM_NONE : p->first + p->larg[1];
    if (c->opts && c->opts->router_check) KVF_ASSERT(best == argmin_scan(c, p, load));
    return best;
}

// ---- prefill --------------------------------------------------------------------------------
static uint32_t pick_rr(sim_cluster *c, sim_pool *p, sim_req *r) {
    (void)r;
    for (uint32_t k = 0; k < p->n; k++) {
        uint32_t id = p->first + (p->rr++ % p->n);
        if (c->inst[id].active) return id;
    }
    return p->first;
}

static uint32_t pick_least_loaded(sim_cluster *c, sim_pool *p, sim_req *r) {
    (void)r;
    return argmin(c, p, queued);
}

// Balances attention compute and input tokens together: the step model's time for the work
// still queued on each instance (long contexts weigh more than their token count).
static uint32_t pick_least_work(sim_cluster *c, sim_pool *p, sim_req *r) {
    (void)r;
    return argmin(c, p, queued_work);
}

// Power of two choices: two random active instances, the less loaded wins.
static uint32_t pick_p2c(sim_cluster *c, sim_pool *p, sim_req *r) {
    (void)r;
    refresh(c, p);
    uint32_t n = p->n_active ? p->n_active : p->n;
    uint32_t a = p->first + kvf_rng_below(&c->rng_route, n),
             b = p->first + kvf_rng_below(&c->rng_route, n);
    if (!c->inst[a].active || !c->inst[b].active) return pick_least_loaded(c, p, r);
    return queued(c, &c->inst[a]) <= queued(c, &c->inst[b]) ? a : b;
}

// Longest cached prefix in the instance's own tiers (HBM, DRAM), weighted against its queue:
// score = local hit tokens - queued tokens, the hit tokens as admission serves them (whole
// blocks; a prompt found whole recomputes its last block, so holding it whole counts for no
// more than holding all but its last block). Hits in the shared SSD are reachable from every
// instance and do not steer the choice.
static uint32_t pick_cache_aware(sim_cluster *c, sim_pool *p, sim_req *r) {
    refresh(c, p);
    uint32_t best = SIM_NONE;
    double bs = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        sim_inst *in = &c->inst[p->first + i];
        if (!in->active) continue;
        uint32_t hit[SIM_TIERS], tok[SIM_TIERS];
        uint32_t nb = sim_cluster_prefix(c, in, r, hit, false, true);
        double local = sim_prefill_hit_tokens(c, r->input, nb, hit, tok);
        double s = local - queued(c, in);
        if (best == SIM_NONE || s > bs) {
            best = in->id;
            bs = s;
        }
    }
    return best;
}

// Mooncake-style: estimate TTFT on each instance as KV load + queue + compute and take the
// smallest; with router.reject_over_slo, refuse a request whose best estimate breaks the SLO.
static uint32_t pick_ttft_estimate(sim_cluster *c, sim_pool *p, sim_req *r) {
    refresh(c, p);
    uint32_t best = SIM_NONE;
    double be = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        sim_inst *in = &c->inst[p->first + i];
        if (!in->active) continue;
        uint32_t hit[SIM_TIERS], tok[SIM_TIERS];
        uint32_t nb = sim_cluster_prefix(c, in, r, hit, false, true);
        // the hit as admission will take it (whole blocks; a prompt found whole recomputes its
        // last block, which is then neither served nor loaded), not every token but one
        double cached = sim_prefill_hit_tokens(c, r->input, nb, hit, tok);
        uint32_t bt = c->cfg->kv.block_tokens;
        double load = 0;
        if (tok[SIM_TIER_DRAM] && in->link_dram != SIM_NONE)
            load =
                fmax(load, sim_link_estimate_s(&c->links[in->link_dram].link,
                                               (double)(tok[SIM_TIER_DRAM] / bt) * c->block_bytes));
        if (tok[SIM_TIER_SSD] && in->link_ssd != SIM_NONE)
            load =
                fmax(load, sim_link_estimate_s(&c->links[in->link_ssd].link,
                                               (double)(tok[SIM_TIER_SSD] / bt) * c->block_bytes));
        double q = queued_work(c, in);   // step-model time of the work queued ahead
        double comp = sim_cluster_prefill_s(c, p, (uint32_t)(r->input - cached), (uint32_t)cached);
        double e = (c->cfg->kv.overlap_load ? fmax(load, q) : load + q) + comp;
        if (best == SIM_NONE || e < be) {
            best = in->id;
            be = e;
        }
    }
    if (c->cfg->router.reject_slo && best != SIM_NONE && be * 1e3 > c->cfg->slo.ttft_p90_ms)
        return SIM_NONE;
    return best;
}

// ---- decode -------------------------------------------------------------------------------------
static uint32_t pick_least_kv(sim_cluster *c, sim_pool *p, sim_req *r) {
    (void)r;
    return argmin(c, p, kv_load);
}

static uint32_t pick_least_requests(sim_cluster *c, sim_pool *p, sim_req *r) {
    (void)r;
    return argmin(c, p, requests);
}

typedef struct {
    const char *name;
    sim_route_fn fn;
} route_entry;

static const route_entry prefill_table[] = {
    {"round_robin", pick_rr},
    {"least_loaded", pick_least_loaded},
    {"p2c", pick_p2c},
    {"cache_aware", pick_cache_aware},
    {"ttft_estimate", pick_ttft_estimate},
    {"least_work", pick_least_work},
};
static const route_entry decode_table[] = {
    {"round_robin", pick_rr},
    {"least_kv", pick_least_kv},
    {"least_requests", pick_least_requests},
};
const char *const sim_prefill_router_names[] = {
    "round_robin", "least_loaded", "p2c", "cache_aware", "ttft_estimate", "least_work", NULL};
const char *const sim_decode_router_names[] = {"round_robin", "least_kv", "least_requests", NULL};

void sim_router_init(sim_cluster *c, sim_pool *p, bool prefill) {
    p->route = prefill ? sim_router_prefill(c->cfg->router.prefill)
                       : sim_router_decode(c->cfg->router.decode);
    p->load = NULL;
    p->reads_work = p->route == pick_least_work || p->route == pick_ttft_estimate;
    if (p->route == pick_least_loaded)
        p->load = queued;
    else if (p->route == pick_least_work)
        p->load = queued_work;
    else if (p->route == pick_least_kv)
        p->load = kv_load;
    else if (p->route == pick_least_requests)
        p->load = requests;
    if (!p->load || !p->n) return;
    p->lsize = 1;
    while (p->lsize < p->n)
        p->lsize *= 2;
    p->lval = kvf_malloc(2 * p->lsize * sizeof *p->lval);
    p->larg = kvf_malloc(2 * p->lsize * sizeof *p->larg);
    for (uint32_t i = 0; i < p->lsize; i++) {
        const sim_inst *in = i < p->n ? &c->inst[p->first + i] : NULL;
        p->lval[p->lsize + i] = in && in->active ? p->load(c, in) : INFINITY;
        p->larg[p->lsize + i] = i;
    }
    for (uint32_t k = p->lsize - 1; k >= 1; k--) {
        p->lval[k] = NAN;   // never equal: every node is written
        lindex_pull(p->lval, p->larg, k);
    }
}

void sim_router_free(sim_pool *p) {
    free(p->lval);
    free(p->larg);
    p->lval = NULL;
    p->larg = NULL;
}

sim_route_fn sim_router_prefill(const char *name) {
    for (size_t i = 0; i < sizeof prefill_table / sizeof prefill_table[0]; i++)
        if (!strcmp(name, prefill_table[i].name)) return prefill_table[i].fn;
    return NULL;
}

sim_route_fn sim_router_decode(const char *name) {
    for (size_t i = 0; i < sizeof decode_table / sizeof decode_table[0]; i++)
        if (!strcmp(name, decode_table[i].name)) return decode_table[i].fn;
    return NULL;
}
