// sim/measure/sim_timeseries.c -- the periodic sample: pool utilisation, queues, KV occupancy,
// throughput and hit rates into the time series, store occupancy by class, GPU time.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cluster.h"
#include "sim_run.h"
#include "sim_sample.h"
#include "sim_trace.h"

void sim_ts(sim_cluster *c, const char *pool, int32_t inst, const char *metric, double v) {
    if (!c->db || c->status != KVF_OK) return;
    if (rpt_db_timeseries(c->db, (double)c->now * 1e-9, pool, inst, metric, v, c->err) != KVF_OK)
        sim_fail_run(c, KVF_ERUN);
}

// The pool's GPU time since it was last accounted: the GPUs it is billed for (instances
// serving, starting, down after a failure, draining) over the time since.
static double pool_gpu_ns_pending(const sim_cluster *c, const sim_pool *p) {
    return (double)(c->now - p->gpu_last) *
           (p->n_active + p->n_starting + p->n_failed + p->n_draining) *
           (p->cfg ? p->cfg->gpus_per_instance : 0);
}

void sim_pool_gpu_account(sim_cluster *c) {
    for (int k = 0; k < SIM_POOLS; k++) {
        sim_pool *p = &c->pool[k];
        p->gpu_ns += pool_gpu_ns_pending(c, p);
        p->gpu_last = c->now;
    }
}

void sim_on_sample(sim_cluster *c, double interval_s, bool last) {
    sim_metrics *m = &c->m;
    // expire entries whose retention ran out, so occupancy is honest
    sim_bcache_expire(&c->ssd, c->now);
    uint64_t hbm_blocks = 0, qlen = 0;
    for (uint32_t i = 0; i < c->n_inst; i++) {
        sim_bcache_expire(&c->inst[i].hbm, c->now);
        sim_bcache_expire(&c->inst[i].dram, c->now);
        hbm_blocks += c->inst[i].hbm.used;
    }
    static const char *names[SIM_POOLS] = {"vision", "prefill", "decode"};
    // the time since the last sample counts towards "steady" where it lies inside the steady
    // window (output.steady_*): usually one interval, longer after an idle gap the samples
    // skipped (nothing ran in it, but it is time the window's rates are over)
    const sim_output_cfg *oc = &c->cfg->output;
    double t1 = (double)c->now * 1e-9, t0 = (double)c->last_sample_ns * 1e-9, span = t1 - t0;
    bool in_win = oc->steady_to_s > 0 && span > 0 && t0 >= oc->steady_from_s - 1e-9 &&
                  t1 <= oc->steady_to_s + 1e-9;
    if (!last) sim_samples_add(&m->sample_t, (double)c->now * 1e-9);
    for (int k = 0; k < SIM_POOLS; k++) {
        sim_pool *p = &c->pool[k];
        if (!p->n) {
            if (!last) sim_samples_add(&m->pool_queue[k], 0);
            continue;
        }
        double busy = 0, q = 0, run = 0, kvu = 0, kvc = 0;
        for (uint32_t i = 0; i < p->n; i++) {
            sim_inst *in = &c->inst[p->first + i];
            double b = in->busy_ns + (in->busy ? (double)(c->now - in->step_start) : 0);
            busy += b - in->busy_ns_sampled;
            in->busy_ns_sampled = b;
            q += sim_inst_queue_len(in);
            if (c->timeline)
                sim_trace_counter(c->timeline, c->now, in->pool, in->idx, "queue",
                                  sim_inst_queue_len(in));
            run += in->n_running + in->n_batch;
            kvu += in->ops->kv_used(in, c->now);
            if (in->busy && in->run_m > 1) {   // tokens of the run's steps that have ended
                uint32_t passed = sim_run_done_by(in, c->now);
                m->iv_out += (uint64_t)in->ds.n * (passed - in->run_attr);
                in->run_attr = passed;
            }
            kvc += in->kv_cap;
        }
        qlen += (uint64_t)q;
        if (!last) sim_samples_add(&m->pool_queue[k], q);
        // the instance time since the last sample, as the whole run's utilisation and per-GPU
        // rates count it (p->gpu_ns): serving, starting, down after a failure and draining,
        // each for the part of the interval it spent so, not the count at this instant (read
        // without accounting it: gpu_ns split at every sample would round differently)
        double gnow = p->gpu_ns + pool_gpu_ns_pending(c, p), gpu_ns = gnow - p->gpu_ns_sampled;
        double inst_ns =
            p->cfg && p->cfg->gpus_per_instance ? gpu_ns / p->cfg->gpus_per_instance : 0;
        p->gpu_ns_sampled = gnow;
        if (in_win) {
            m->st_busy_ns[k] += busy;
            m->st_inst_ns[k] += inst_ns;
            m->st_gpu_s[k] += gpu_ns * 1e-9;
            m->st_running[k] += run * span;   // weighted by the time it stands for
        }
        sim_ts(c, names[k], -1, "utilization", inst_ns > 0 ? busy / inst_ns : 0);
        sim_ts(c, names[k], -1, "queue_len", q);
        sim_ts(c, names[k], -1, "running_requests", run);
        sim_ts(c, names[k], -1, "instances", p->n_active);
        if (kvc > 0) sim_ts(c, names[k], -1, "kv_used_frac", kvu / kvc);
    }
    double flows = 0;   // transfers waiting on links (a slow KV link is a queue too)
    for (size_t i = 0; i < c->n_links; i++)
        flows += (double)c->links[i].link.n;
    if (!last) {
        sim_samples_add(&m->queue_len, (double)qlen);
        sim_samples_add(&m->backlog, (double)qlen + flows);
    }
    if (in_win) {
        m->st_span_s += span;
        m->st_in += (double)m->iv_in;   // as the series' input_tok_s: prompts at their first token
        m->st_out += (double)m->iv_out;
    }
    sim_ts(c, "cluster", -1, "input_tok_s", (double)m->iv_in / interval_s);
    sim_ts(c, "cluster", -1, "output_tok_s", (double)m->iv_out / interval_s);
    sim_ts(c, "cluster", -1, "in_flight", (double)c->in_flight);
    if (m->iv_prompt) {
        double pr = (double)m->iv_prompt;
        sim_ts(c, "cluster", -1, "hit_rate", (double)m->iv_hit / pr);
        sim_ts(c, "cluster", -1, "hit_rate_hbm", (double)m->iv_hit_tier[0] / pr);
        sim_ts(c, "cluster", -1, "hit_rate_dram", (double)m->iv_hit_tier[1] / pr);
        sim_ts(c, "cluster", -1, "hit_rate_ssd", (double)m->iv_hit_tier[2] / pr);
    }
    double store = (double)c->ssd.used * c->block_bytes;
    if (!last && store > m->store_bytes_peak) m->store_bytes_peak = store;
    sim_ts(c, "kv", -1, "kv_store_bytes", store);
    // the store by class; a class's steady state is what it holds once the run has lasted its
    // retention (before that the store is still filling)
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        uint64_t u = c->ssd.used_cls[k];
        if (!u && !m->cls_store_peak[k] && !m->cls_store_writes[k]) continue;
        char name[48];
        snprintf(name, sizeof name, "kv_store_bytes_%s", trc_class_name(k));
        sim_ts(c, "kv", -1, name, (double)u * c->block_bytes);
        if (last) continue;
        if (u > m->cls_store_peak[k]) m->cls_store_peak[k] = u;
        int64_t ret = c->cfg->kv.retention_ns[k];
        if (ret > 0 && c->now >= ret) {
            m->cls_store_steady_sum[k] += (double)u;
            m->cls_store_steady_n[k]++;
            if (u > m->cls_store_steady_peak[k]) m->cls_store_steady_peak[k] = u;
        }
    }
    sim_ts(c, "kv", -1, "hbm_cache_bytes", (double)hbm_blocks * c->block_bytes);
    m->iv_in = m->iv_out = m->iv_prompt = m->iv_hit = 0;
    memset(m->iv_hit_tier, 0, sizeof m->iv_hit_tier);
}
