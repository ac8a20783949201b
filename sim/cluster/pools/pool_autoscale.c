// sim/cluster/pools/pool_autoscale.c -- load-driven instance counts (cluster.<pool>.autoscale):
// at every time-series sample the pool's load over the last interval -- waiting requests per
// serving instance (queue), the busy share of its serving instances (utilization), or their
// mean KV occupancy (kv) -- is held against the thresholds. Above `up` one more instance is
// started: it is billed at once and serves after `startup_s` (weights loading); below `down`
// the last serving instance stops taking requests (its running ones finish; it is no longer
// billed). Never more than one change per `cooldown_s`, and serving + starting instances stay
// within [min, max]. Deterministic: decisions read simulated state only.
#include "sim_cluster.h"
#include "sim_trace.h"

static const sim_autoscale_cfg *as_cfg(const sim_pool *p) {
    return &p->cfg->autoscale;
}

static uint32_t as_max(const sim_pool *p) {
    const sim_autoscale_cfg *a = as_cfg(p);
    return a->max > 0 ? (uint32_t)KVF_MIN((uint32_t)a->max, p->n) : p->n;
}

static uint32_t as_initial(const sim_cluster *c, const sim_pool *p) {
    (void)c;
    uint32_t m = (uint32_t)as_cfg(p)->min;
    return m < 1 ? 1 : KVF_MIN(m, p->n);
}

// The pool's load over the last interval, in the metric's unit.
static double as_load(sim_cluster *c, sim_pool *p, double interval_s) {
    const sim_autoscale_cfg *a = as_cfg(p);
    double busy = 0, q = 0, kv = 0, n = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        sim_inst *in = &c->inst[p->first + i];
        busy += in->busy_ns + (in->busy ? (double)(c->now - in->step_start) : 0);
        if (!in->active) continue;
        n++;
        q += sim_inst_queue_len(in);
        if (in->kv_cap > 0) kv += in->ops->kv_used(in, c->now) / in->kv_cap;
    }
    double d_busy = busy - p->scale_busy_ns;
    p->scale_busy_ns = busy;
    if (n <= 0) return 0;
    switch (a->metric) {
    case SIM_SCALE_QUEUE:
        return q / n;
    case SIM_SCALE_UTILIZATION:
        return interval_s > 0 ? d_busy / (interval_s * 1e9 * n) : 0;
    case SIM_SCALE_KV:
        return kv / n;
    default:
        return 0;
    }
}

static void note_count(sim_pool *p) {
    if (p->n_active < p->active_min) p->active_min = p->n_active;
    if (p->n_active > p->active_max) p->active_max = p->n_active;
}

static void as_tick(sim_cluster *c, sim_pool *p, double interval_s) {
    const sim_autoscale_cfg *a = as_cfg(p);
    double load = as_load(c, p, interval_s);
    if (p->scale_last > 0 && (double)(c->now - p->scale_last) < a->cooldown_ns) return;
    if (load > a->up && p->n_active + p->n_starting < as_max(p)) {
        sim_pool_gpu_account(c);   // billed from the start
        p->n_starting++;
        p->scale_last = c->now;
        p->scale_ups++;
        sim_ev_push(c, c->now + (sim_time)llround(a->startup_ns), SIM_EV_SCALED, 0,
                    (uint64_t)p->kind, NULL);
    } else if (load < a->down && p->n_active > (uint32_t)KVF_MAX(a->min, 1)) {
        // the last serving instance stops taking requests; what runs there finishes
        for (uint32_t i = p->n; i-- > 0;) {
            sim_inst *in = &c->inst[p->first + i];
            if (!in->active) continue;
            sim_pool_gpu_account(c);
            in->active = false;
            p->n_active--;
            sim_router_touch(c, in);
            sim_inst_drain_check(c, in);   // billed while it finishes what runs there
            break;
        }
        p->scale_last = c->now;
        p->scale_downs++;
        note_count(p);
    }
    if (c->timeline) sim_trace_counter(c->timeline, c->now, p->kind, 0, "instances", p->n_active);
}

static void as_started(sim_cluster *c, sim_pool *p) {
    KVF_ASSERT(p->n_starting > 0);
    sim_pool_gpu_account(c);
    p->n_starting--;
    for (uint32_t i = 0; i < p->n; i++) {
        sim_inst *in = &c->inst[p->first + i];
        if (in->active || in->failed) continue;
        in->active = true;
        p->n_active++;
        sim_inst_drain_check(c, in);   // back in service: no longer draining
        sim_router_touch(c, in);
        sim_inst_kick(c, in);
        break;
    }
    note_count(p);
}

const sim_pool_scaler sim_pool_autoscaler = {"autoscale", as_initial, as_tick, as_started};
