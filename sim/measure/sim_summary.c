// sim/measure/sim_summary.c -- summary.json (design.md §5) of a finished run: the metrics, the
// cluster's GPU time, the economics, the invariants and the sampling, from the cluster state.
//
// Determinism: every figure is a function of (scenario, trace, seed) apart from those under
// "sim" that measure wall time (wall_s, events_per_s), which the caller passes in.
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "sim_run.h"
#include "sim_sample.h"
#include "rpt_util.h"

// Mean and percentiles of a latency; null each when nothing was measured (no request completed,
// or none produced a second token): a 0 would read as instant.
static json_t *stats_obj(sim_samples *s) {
    json_t *o = json_object();
    double sum = 0;
    for (size_t i = 0; i < s->n; i++)
        sum += s->v[i];
    kvf_sort_doubles(s->v, s->n);
    if (!s->n) {
        static const char *const k[] = {"mean", "p50", "p90", "p99"};
        for (int i = 0; i < 4; i++)
            json_object_set_new(o, k[i], json_null());
        return o;
    }
    json_object_set_new(o, "mean", json_real(sum / (double)s->n));
    json_object_set_new(o, "p50", json_real(kvf_percentile_sorted(s->v, s->n, 50)));
    json_object_set_new(o, "p90", json_real(kvf_percentile_sorted(s->v, s->n, 90)));
    json_object_set_new(o, "p99", json_real(kvf_percentile_sorted(s->v, s->n, 99)));
    return o;
}

static json_t *num_or_null(double v) {
    return isfinite(v) ? json_real(v) : json_null();
}

static double pool_gpu_s(const sim_cluster *c, int k) {
    return c->pool[k].gpu_ns * 1e-9;
}

static double pool_util(const sim_cluster *c, int k) {
    const sim_pool *p = &c->pool[k];
    double busy = 0, avail = 0;
    for (uint32_t i = 0; i < p->n; i++)
        busy += c->inst[p->first + i].busy_ns;
    avail = p->cfg && p->cfg->gpus_per_instance ? p->gpu_ns / p->cfg->gpus_per_instance : 0;
    return avail > 0 ? busy / avail : 0;
}

// The run's identity: scenario, seed, version, step model (and profile), model, hardware, mode.
static void summary_header(json_t *s, const sim_cluster *c) {
    const sim_config *cfg = c->cfg;
    json_object_set_new(s, "scenario", json_string(cfg->name));
    json_object_set_new(s, "seed", json_integer((json_int_t)cfg->seed));
    json_object_set_new(s, "kvfleet_version", json_string(KVF_VERSION));
    json_object_set_new(
        s, "step_model",
        json_string(c->opts && c->opts->engine_backend ? "engine" : cfg->step_model));
    if (!strcmp(cfg->step_model, "calibrated"))
        json_object_set_new(s, "profile", json_string(cfg->profile));
    json_object_set_new(s, "model", json_string(c->model.name));
    json_object_set_new(s, "hardware", json_string(c->hw.name));
    json_object_set_new(s, "mode", json_string(c->colocated ? "colocated" : "disaggregated"));
}

// "requests": arrived, completed, rejected (and why), unfinished.
static json_t *summary_requests(const sim_cluster *c) {
    const sim_metrics *m = &c->m;
    json_t *rq = json_object();
    json_object_set_new(rq, "arrived", json_integer((json_int_t)c->arrived));
    json_object_set_new(rq, "completed", json_integer((json_int_t)c->completed));
    json_object_set_new(rq, "rejected", json_integer((json_int_t)c->rejected));
    json_t *why = json_object();
    json_object_set_new(why, "queue", json_integer((json_int_t)m->rejected_queue));
    json_object_set_new(why, "slo", json_integer((json_int_t)m->rejected_slo));
    json_object_set_new(why, "capacity", json_integer((json_int_t)m->rejected_fit));
    json_object_set_new(why, "timeout", json_integer((json_int_t)m->rejected_timeout));
    json_object_set_new(why, "context", json_integer((json_int_t)m->rejected_context));
    json_object_set_new(why, "failure", json_integer((json_int_t)m->rejected_failure));
    json_object_set_new(why, "no_instance", json_integer((json_int_t)m->rejected_no_instance));
    json_object_set_new(rq, "rejected_by_reason", why);
    // arrived and neither completed nor rejected (in_flight also counts requests read ahead
    // of their arrival)
    json_object_set_new(rq, "truncated", json_integer((json_int_t)m->truncated));
    json_object_set_new(rq, "unfinished",
                        json_integer((json_int_t)(c->arrived - c->completed - c->rejected)));
    return rq;
}

// The latencies (ttft, tpot, itl, e2e), generation speed per request and by class. Sorts the
// metrics' samples in place (the SLO check reads them sorted).
static void summary_latency(json_t *s, sim_metrics *m) {
    json_object_set_new(s, "ttft_ms", stats_obj(&m->ttft_ms));
    json_object_set_new(s, "tpot_ms", stats_obj(&m->tpot_ms));
    json_t *itl = json_object();
    bool gaps = m->itl_ms.total > 0;   // null when no token followed another
    json_object_set_new(itl, "mean", gaps ? json_real(sim_hist_mean(&m->itl_ms)) : json_null());
    json_object_set_new(itl, "p50",
                        gaps ? json_real(sim_hist_percentile(&m->itl_ms, 50)) : json_null());
    json_object_set_new(itl, "p90",
                        gaps ? json_real(sim_hist_percentile(&m->itl_ms, 90)) : json_null());
    json_object_set_new(itl, "p99",
                        gaps ? json_real(sim_hist_percentile(&m->itl_ms, 99)) : json_null());
    json_object_set_new(s, "itl_ms", itl);
    json_object_set_new(s, "e2e_ms", stats_obj(&m->e2e_ms));
    json_t *gen = stats_obj(&m->gen_tok_s);
    json_object_del(gen, "p90");
    json_object_del(gen, "p99");
    json_object_set_new(s, "gen_tok_s_per_request", gen);
    json_t *bc = json_object();
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        if (!m->cls_done[k]) continue;
        json_t *o = json_object();
        json_object_set_new(o, "completed", json_integer((json_int_t)m->cls_done[k]));
        json_object_set_new(o, "ttft_ms_mean",
                            json_real(m->cls_ttft_ms[k] / (double)m->cls_done[k]));
        json_object_set_new(o, "gen_tok_s_mean",
                            m->cls_gen_n[k]
                                ? json_real(m->cls_gen_tok_s[k] / (double)m->cls_gen_n[k])
                                : json_null());
        json_object_set_new(bc, trc_class_name(k), o);
    }
    json_object_set_new(s, "by_class", bc);
}

// "steady": the window output.steady_from_s .. steady_to_s, apart from the run's warm-up and
// drain: latencies of the requests arriving in it (completed), and tokens per second, per
// GPU-second, busy share and running requests over the sampled intervals inside it (none
// inside: those are null). Absent without a window.
static void summary_steady(json_t *s, sim_cluster *c) {
    const sim_output_cfg *oc = &c->cfg->output;
    if (!(oc->steady_to_s > 0)) return;
    sim_metrics *m = &c->m;   // stats_obj sorts the samples in place
    int ppool = SIM_POOL_PREFILL, dpool = c->colocated ? SIM_POOL_PREFILL : SIM_POOL_DECODE;
    json_t *o = json_object();
    json_object_set_new(o, "from_s", json_real(oc->steady_from_s));
    json_object_set_new(o, "to_s", json_real(oc->steady_to_s));
    json_object_set_new(o, "sampled_s", json_real(m->st_span_s));
    json_object_set_new(o, "requests", json_integer((json_int_t)m->st_requests));
    json_object_set_new(o, "ttft_ms", stats_obj(&m->st_ttft_ms));
    json_object_set_new(o, "tpot_ms", stats_obj(&m->st_tpot_ms));
    json_object_set_new(o, "gen_tok_s_per_request", stats_obj(&m->st_gen_tok_s));
    json_t *bc = json_object();
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        if (!m->st_cls_gen_n[k]) continue;
        json_t *x = json_object();
        json_object_set_new(x, "gen_tok_s_mean",
                            json_real(m->st_cls_gen[k] / (double)m->st_cls_gen_n[k]));
        json_object_set_new(bc, trc_class_name(k), x);
    }
    json_object_set_new(o, "by_class", bc);
    double span = m->st_span_s;
    json_object_set_new(o, "input_tok_s", num_or_null(span > 0 ? m->st_in / span : NAN));
    json_object_set_new(o, "output_tok_s", num_or_null(span > 0 ? m->st_out / span : NAN));
    double pg = m->st_gpu_s[ppool], dg = m->st_gpu_s[dpool];
    json_object_set_new(o, "prefill_input_tok_s_per_gpu",
                        num_or_null(pg > 0 ? m->st_in / pg : NAN));
    json_object_set_new(o, "decode_output_tok_s_per_gpu",
                        num_or_null(dg > 0 ? m->st_out / dg : NAN));
    json_t *u = json_object(), *rn = json_object();
    static const char *const names[3] = {"vision", "prefill", "decode"};
    for (int k = 0; k < 3; k++) {
        if (!c->pool[k].n) continue;
        json_object_set_new(
            u, names[k],
            num_or_null(m->st_inst_ns[k] > 0 ? m->st_busy_ns[k] / m->st_inst_ns[k] : NAN));
        json_object_set_new(rn, names[k], num_or_null(span > 0 ? m->st_running[k] / span : NAN));
    }
    json_object_set_new(o, "utilization", u);
    json_object_set_new(o, "running_requests_mean", rn);
    json_object_set_new(s, "steady", o);
}

// "throughput": tokens per simulated second, and per GPU-second of the pool that made them.
static json_t *summary_throughput(const sim_cluster *c, double sim_s) {
    const sim_metrics *m = &c->m;
    int ppool = SIM_POOL_PREFILL, dpool = c->colocated ? SIM_POOL_PREFILL : SIM_POOL_DECODE;
    json_t *tp = json_object();
    json_object_set_new(tp, "input_tok_s",
                        json_real(sim_s > 0 ? (double)m->prompt_tokens / sim_s : 0));
    json_object_set_new(tp, "output_tok_s",
                        json_real(sim_s > 0 ? (double)m->output_tokens / sim_s : 0));
    double pgs = pool_gpu_s(c, ppool), dgs = pool_gpu_s(c, dpool);
    json_object_set_new(tp, "prefill_input_tok_s_per_gpu",
                        json_real(pgs > 0 ? (double)m->prompt_tokens / pgs : 0));
    json_object_set_new(tp, "decode_output_tok_s_per_gpu",
                        json_real(dgs > 0 ? (double)m->output_tokens / dgs : 0));
    json_object_set_new(tp, "tokens_per_decode_step_per_request",
                        json_real(m->decode_step_seqs
                                      ? (double)m->decode_step_tokens / (double)m->decode_step_seqs
                                      : 0));
    return tp;
}

// "cache.by_class": by traffic class, hit rate, what the class writes to the store, what the
// store holds of it (steady: mean occupancy once the run has lasted the class's retention;
// null before).
static json_t *summary_cache_by_class(const sim_cluster *c, double sim_s) {
    const sim_config *cfg = c->cfg;
    const sim_metrics *m = &c->m;
    json_t *bycls = json_object();
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        if (!m->cls_prompt[k] && !m->cls_store_writes[k] && !m->cls_store_peak[k]) continue;
        json_t *o = json_object();
        json_object_set_new(o, "prompt_tokens", json_integer((json_int_t)m->cls_prompt[k]));
        json_object_set_new(
            o, "hit_rate",
            json_real(m->cls_prompt[k] ? (double)m->cls_hit[k] / (double)m->cls_prompt[k] : 0));
        json_object_set_new(o, "retention_s",
                            num_or_null(cfg->kv.retention_ns[k] > 0
                                            ? (double)cfg->kv.retention_ns[k] * 1e-9
                                            : NAN));
        json_object_set_new(
            o, "store_write_Bps",
            json_real(sim_s > 0 ? (double)m->cls_store_writes[k] * c->block_bytes / sim_s : 0));
        json_object_set_new(o, "stored_bytes_peak",
                            json_real((double)m->cls_store_peak[k] * c->block_bytes));
        json_object_set_new(o, "stored_bytes_end",
                            json_real((double)c->ssd.used_cls[k] * c->block_bytes));
        json_object_set_new(o, "stored_bytes_steady",
                            num_or_null(m->cls_store_steady_n[k]
                                            ? m->cls_store_steady_sum[k] /
                                                  (double)m->cls_store_steady_n[k] * c->block_bytes
                                            : NAN));
        json_object_set_new(o, "stored_bytes_steady_peak",
                            num_or_null(m->cls_store_steady_n[k]
                                            ? (double)m->cls_store_steady_peak[k] * c->block_bytes
                                            : NAN));
        json_object_set_new(bycls, trc_class_name(k), o);
    }
    return bycls;
}

// "cache": hits by tier and class, the shared store's occupancy and traffic, prefill FLOPs.
// *peak gets the store's peak bytes and *wr its write rate (B/s), which the economics bill.
static json_t *summary_cache(const sim_cluster *c, double sim_s, double *peak, double *wr) {
    const sim_config *cfg = c->cfg;
    const sim_metrics *m = &c->m;
    json_t *ca = json_object();
    double pr = (double)m->prompt_tokens;
    json_object_set_new(ca, "hit_rate", json_real(pr > 0 ? (double)m->hit_tokens / pr : 0));
    json_object_set_new(ca, "hit_tokens", json_integer((json_int_t)m->hit_tokens));
    json_object_set_new(ca, "miss_tokens", json_integer((json_int_t)m->miss_tokens));
    json_t *bt = json_object(), *btt = json_object();
    static const char *tn[SIM_TIERS] = {"hbm", "dram", "ssd"};
    for (int t = 0; t < SIM_TIERS; t++) {
        json_object_set_new(bt, tn[t], json_real(pr > 0 ? (double)m->hit_tier[t] / pr : 0));
        json_object_set_new(btt, tn[t], json_integer((json_int_t)m->hit_tier[t]));
    }
    json_object_set_new(ca, "by_tier", bt);
    json_object_set_new(ca, "by_class", summary_cache_by_class(c, sim_s));
    json_object_set_new(ca, "by_tier_tokens", btt);
    *peak = (double)c->ssd.peak * c->block_bytes;
    if (*peak < m->store_bytes_peak) *peak = m->store_bytes_peak;
    json_object_set_new(ca, "stored_bytes_peak", json_real(*peak));
    json_object_set_new(ca, "stored_bytes_end", json_real((double)c->ssd.used * c->block_bytes));
    json_object_set_new(ca, "block_bytes", json_real(c->block_bytes));
    json_object_set_new(
        ca, "ssd_capacity_bytes",
        num_or_null(cfg->kv.ssd.capacity_bytes < 0 ? INFINITY : cfg->kv.ssd.capacity_bytes));
    // steady state of a store that keeps everything for its retention: per class, the class's
    // write rate x its retention (filled in later from the economics input)
    *wr = sim_s > 0 ? (double)c->ssd.inserted * c->block_bytes / sim_s : 0;
    json_object_set_new(ca, "ssd_write_Bps", json_real(*wr));
    json_object_set_new(ca, "evicted_blocks", json_integer((json_int_t)c->ssd.evicted));
    json_object_set_new(ca, "expired_blocks", json_integer((json_int_t)c->ssd.expired));
    // the store's block index in memory (tables and run queues) per block at its peak
    json_object_set_new(
        ca, "index_bytes_per_block",
        num_or_null(c->ssd.peak ? (double)sim_bcache_index_bytes(&c->ssd) / (double)c->ssd.peak
                                : NAN));
    json_t *lb = json_object();
    json_object_set_new(lb, "dram", json_real(m->load_bytes[SIM_TIER_DRAM]));
    json_object_set_new(lb, "ssd", json_real(m->load_bytes[SIM_TIER_SSD]));
    json_object_set_new(ca, "load_bytes", lb);
    json_object_set_new(ca, "ssd_write_bytes", json_real(m->ssd_write_bytes));
    json_object_set_new(ca, "ssd_write_backlog_s_peak", json_real(m->ssd_write_backlog_s_peak));
    json_object_set_new(ca, "kv_transfer_bytes", json_real(m->kv_transfer_bytes));
    json_t *pf = json_object();
    json_object_set_new(pf, "actual", json_real(m->prefill_flops));
    json_object_set_new(pf, "no_reuse", json_real(m->prefill_flops_no_reuse));
    json_object_set_new(pf, "window_full_recompute", json_real(m->prefill_flops_window_full));
    json_object_set_new(pf, "swa_replay", json_boolean(c->swa_replay));
    json_object_set_new(ca, "prefill_flops", pf);
    return ca;
}

// "gpus", "gpu_hours" and "utilization" per pool.
static void summary_gpus(json_t *s, const sim_cluster *c) {
    const sim_config *cfg = c->cfg;
    int dpool = c->colocated ? SIM_POOL_PREFILL : SIM_POOL_DECODE;
    json_t *g = json_object();
    json_object_set_new(g, "vision",
                        json_integer(c->pool[SIM_POOL_VISION].n *
                                     (json_int_t)cfg->cluster.vision.gpus_per_instance));
    json_object_set_new(g, "prefill",
                        json_integer(c->pool[SIM_POOL_PREFILL].n *
                                     (json_int_t)cfg->cluster.prefill.gpus_per_instance));
    json_object_set_new(g, "decode",
                        json_integer(c->pool[SIM_POOL_DECODE].n *
                                     (json_int_t)cfg->cluster.decode.gpus_per_instance));
    json_object_set_new(s, "gpus", g);
    double gh = (pool_gpu_s(c, 0) + pool_gpu_s(c, 1) + pool_gpu_s(c, 2)) / 3600.0;
    json_object_set_new(s, "gpu_hours", json_real(gh));
    json_t *u = json_object();
    json_object_set_new(u, "vision", json_real(pool_util(c, SIM_POOL_VISION)));
    json_object_set_new(u, "prefill", json_real(pool_util(c, SIM_POOL_PREFILL)));
    json_object_set_new(u, "decode", json_real(pool_util(c, dpool)));
    json_object_set_new(s, "utilization", u);
}

// One class under slo.by_class: arrivals, attainment and goodput (requests within its bounds),
// its bounds with the percentile it reached, and (bounds of its own) whether it met them all.
static json_t *slo_class(const sim_cluster *c, int k, double sim_s, bool *met) {
    const sim_config *cfg = c->cfg;
    const sim_metrics *m = &c->m;
    static const char *const mname[SIM_SLO_METRICS] = {"ttft_ms", "tpot_ms", "e2e_ms"};
    static const char *const qname[SIM_SLO_STATS] = {"p50", "p90", "p99"};
    static const double qv[SIM_SLO_STATS] = {50, 90, 99};
    json_t *o = json_object();
    json_object_set_new(o, "arrived", json_integer((json_int_t)m->cls_arrived[k]));
    json_object_set_new(o, "attainment",
                        json_real((double)m->cls_good[k] / (double)m->cls_arrived[k]));
    json_object_set_new(o, "goodput_rps",
                        json_real(sim_s > 0 ? (double)m->cls_good[k] / sim_s : 0));
    json_object_set_new(o, "goodput_tok_s",
                        json_real(sim_s > 0 ? (double)m->cls_good_tok[k] / sim_s : 0));
    json_t *bounds = json_object();
    bool own = false;
    *met = m->cls_done[k] > 0;
    for (int j = 0; j < SIM_SLO_METRICS; j++) {
        sim_samples *sm = (sim_samples *)&m->cls_lat[k][j];
        bool sorted = false;   // once a metric, by its first bound
        for (int q = 0; q < SIM_SLO_STATS; q++) {
            double b = cfg->slo.cls_ms[k][j][q];
            if (!(b > 0)) continue;
            own = true;
            if (!sorted) {
                kvf_sort_doubles(sm->v, sm->n);
                sorted = true;
            }
            double v = sm->n ? kvf_percentile_sorted(sm->v, sm->n, qv[q]) : NAN;
            char key[32];
            snprintf(key, sizeof key, "%s.%s", mname[j], qname[q]);
            json_t *e = json_object();
            json_object_set_new(e, "bound", json_real(b));
            json_object_set_new(e, "value", isfinite(v) ? json_real(v) : json_null());
            json_object_set_new(bounds, key, e);
            if (sm->n && !(v <= b)) *met = false;
        }
    }
    if (!own) {   // held to the scenario-wide bounds
        *met = true;
        json_t *e = json_object();
        json_object_set_new(e, "bound", json_real(cfg->slo.ttft_p90_ms));
        json_object_set_new(bounds, "ttft_ms.p90", e);
        e = json_object();
        json_object_set_new(e, "bound", json_real(cfg->slo.tpot_p90_ms));
        json_object_set_new(bounds, "tpot_ms.p90", e);
    } else {
        json_object_set_new(o, "met", json_boolean(*met));
    }
    json_object_set_new(o, "bounds", bounds);
    return o;
}

// "scaling": each load-driven pool's starts and stops, and its fewest and most serving
// instances; NULL when no pool scales.
static json_t *summary_scaling(const sim_cluster *c) {
    json_t *o = NULL;
    static const char *const pn[SIM_POOLS] = {"vision", "prefill", "decode"};
    for (int k = 0; k < SIM_POOLS; k++) {
        const sim_pool *p = &c->pool[k];
        if (!p->scaler) continue;
        if (!o) o = json_object();
        json_t *e = json_object();
        json_object_set_new(e, "ups", json_integer((json_int_t)p->scale_ups));
        json_object_set_new(e, "downs", json_integer((json_int_t)p->scale_downs));
        json_object_set_new(e, "instances_min", json_integer((json_int_t)p->active_min));
        json_object_set_new(e, "instances_max", json_integer((json_int_t)p->active_max));
        json_object_set_new(e, "instances_end", json_integer((json_int_t)p->n_active));
        json_object_set_new(e, "gpu_hours", json_real(p->gpu_ns * 1e-9 / 3600));
        json_object_set_new(o, c->colocated && k == SIM_POOL_PREFILL ? "colocated" : pn[k], e);
    }
    return o;
}

// "energy": board energy from each pool's hardware power (idle for every active GPU-second,
// idle to peak for the busy share), wall energy with PUE, per million tokens and by class (by
// its share of tokens). Sets the economics' board power per GPU. NULL when a pool's hardware
// file gives no power.
static json_t *summary_energy(sim_cluster *c, double sim_s) {
    const sim_config *cfg = c->cfg;
    double board_j = 0, gpu_s = 0;
    json_t *bp = json_object();
    static const char *const pn[SIM_POOLS] = {"vision", "prefill", "decode"};
    for (int k = 0; k < SIM_POOLS; k++) {
        const sim_pool *p = &c->pool[k];
        if (!p->n || !p->cfg) continue;
        if (!(p->hw.power_peak_w > 0)) {
            json_decref(bp);
            return NULL;
        }
        double active = p->gpu_ns * 1e-9, busy = 0;
        for (uint32_t i = 0; i < p->n; i++)
            busy += c->inst[p->first + i].busy_ns * 1e-9;
        busy *= p->cfg->gpus_per_instance;
        if (busy > active) busy = active;
        double j = p->hw.power_idle_w * active + (p->hw.power_peak_w - p->hw.power_idle_w) * busy;
        board_j += j;
        gpu_s += active;
        json_t *o = json_object();
        json_object_set_new(o, "board_kwh", json_real(j / 3.6e6));
        json_object_set_new(o, "mean_board_w_per_gpu", json_real(active > 0 ? j / active : 0));
        json_object_set_new(o, "idle_w", json_real(p->hw.power_idle_w));
        json_object_set_new(o, "peak_w", json_real(p->hw.power_peak_w));
        json_object_set_new(bp, c->colocated && k == SIM_POOL_PREFILL ? "colocated" : pn[k], o);
    }
    double pue = cfg->econ.pue > 0 ? cfg->econ.pue : 1;
    double kwh = board_j * pue / 3.6e6, tok = 0, cls_tok[TRC_CLASS_COUNT] = {0};
    const sim_metrics *m = &c->m;
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        cls_tok[k] = (double)m->cls_prompt[k];
        tok += cls_tok[k];
    }
    tok += (double)m->output_tokens;
    json_t *e = json_object();
    json_object_set_new(e, "kwh", json_real(kwh));
    json_object_set_new(e, "board_kwh", json_real(board_j / 3.6e6));
    json_object_set_new(e, "pue", json_real(pue));
    json_object_set_new(e, "mean_board_w_per_gpu", json_real(gpu_s > 0 ? board_j / gpu_s : 0));
    json_object_set_new(e, "mean_w", json_real(sim_s > 0 ? board_j * pue / sim_s : 0));
    json_object_set_new(e, "wh_per_mtok", json_real(tok > 0 ? kwh * 1e3 / (tok / 1e6) : 0));
    json_object_set_new(e, "by_pool", bp);
    c->econ_in.board_w_per_gpu = gpu_s > 0 ? board_j / gpu_s : NAN;
    return e;
}

// "slo": the bounds, attainment, goodput and whether the p90s met them (samples sorted).
static json_t *summary_slo(const sim_cluster *c, double sim_s) {
    const sim_config *cfg = c->cfg;
    const sim_metrics *m = &c->m;
    json_t *slo = json_object();
    json_object_set_new(slo, "ttft_p90_ms", json_real(cfg->slo.ttft_p90_ms));
    json_object_set_new(slo, "tpot_p90_ms", json_real(cfg->slo.tpot_p90_ms));
    json_object_set_new(slo, "attainment",
                        json_real(c->arrived ? (double)m->slo_ok / (double)c->arrived : 0));
    json_object_set_new(slo, "goodput_req_s", json_real(sim_s > 0 ? (double)m->slo_ok / sim_s : 0));
    double t90 = kvf_percentile_sorted(m->ttft_ms.v, m->ttft_ms.n, 90);
    double p90 = kvf_percentile_sorted(m->tpot_ms.v, m->tpot_ms.n, 90);
    bool met = c->completed && t90 <= cfg->slo.ttft_p90_ms && p90 <= cfg->slo.tpot_p90_ms;
    if (c->slo_by_class) met = true;   // every class against its own bounds, below
    uint64_t good_tok = 0;
    json_t *bc = json_object();
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        good_tok += m->cls_good_tok[k];
        if (!m->cls_arrived[k]) continue;
        bool cmet = true;
        json_object_set_new(bc, trc_class_name(k), slo_class(c, k, sim_s, &cmet));
        if (!cmet) met = false;
    }
    json_object_set_new(slo, "met", json_boolean(met));
    json_object_set_new(slo, "goodput_rps", json_real(sim_s > 0 ? (double)m->slo_ok / sim_s : 0));
    json_object_set_new(slo, "goodput_tok_s", json_real(sim_s > 0 ? (double)good_tok / sim_s : 0));
    json_object_set_new(slo, "by_class", bc);
    return slo;
}

// The economics' input from the run: GPU-hours, GPUs and utilisation by pool, the store's
// size and write rate, prefill FLOPs, each class's retention and store (tokens by class were
// added per request as they finished).
static void summary_econ_input(sim_cluster *c, double sim_s, double peak, double wr) {
    const sim_config *cfg = c->cfg;
    const sim_metrics *m = &c->m;
    rpt_econ_input *ei = &c->econ_in;
    ei->simulated_s = sim_s;
    if (c->colocated) {
        ei->gpu_hours[RPT_POOL_COLOCATED] = pool_gpu_s(c, SIM_POOL_PREFILL) / 3600;
        ei->gpus[RPT_POOL_COLOCATED] =
            c->pool[SIM_POOL_PREFILL].n * (double)cfg->cluster.prefill.gpus_per_instance;
        ei->utilization[RPT_POOL_COLOCATED] = pool_util(c, SIM_POOL_PREFILL);
    } else {
        ei->gpu_hours[RPT_POOL_PREFILL] = pool_gpu_s(c, SIM_POOL_PREFILL) / 3600;
        ei->gpu_hours[RPT_POOL_DECODE] = pool_gpu_s(c, SIM_POOL_DECODE) / 3600;
        ei->gpus[RPT_POOL_PREFILL] =
            c->pool[SIM_POOL_PREFILL].n * (double)cfg->cluster.prefill.gpus_per_instance;
        ei->gpus[RPT_POOL_DECODE] =
            c->pool[SIM_POOL_DECODE].n * (double)cfg->cluster.decode.gpus_per_instance;
        ei->utilization[RPT_POOL_PREFILL] = pool_util(c, SIM_POOL_PREFILL);
        ei->utilization[RPT_POOL_DECODE] = pool_util(c, SIM_POOL_DECODE);
    }
    ei->gpu_hours[RPT_POOL_VISION] = pool_gpu_s(c, SIM_POOL_VISION) / 3600;
    ei->gpus[RPT_POOL_VISION] =
        c->pool[SIM_POOL_VISION].n * (double)cfg->cluster.vision.gpus_per_instance;
    ei->utilization[RPT_POOL_VISION] = pool_util(c, SIM_POOL_VISION);
    ei->ssd_tb = (cfg->kv.ssd.capacity_bytes < 0 ? peak : cfg->kv.ssd.capacity_bytes) / 1e12;
    ei->ssd_unbounded = cfg->kv.ssd.capacity_bytes < 0;
    ei->ssd_write_Bps = wr;
    ei->prefill_flops = m->prefill_flops;
    ei->prefill_flops_no_reuse = m->prefill_flops_no_reuse;
    for (int k = 0; k < ei->n_cls; k++)
        for (int t = 0; t < TRC_CLASS_COUNT; t++)
            if (!strcmp(ei->cls[k].cls, trc_class_name(t))) {
                ei->cls[k].retention_s = (double)cfg->kv.retention_ns[t] * 1e-9;
                ei->cls[k].write_known = sim_s > 0;
                ei->cls[k].write_Bps =
                    sim_s > 0 ? (double)m->cls_store_writes[t] * c->block_bytes / sim_s : 0;
                ei->cls[k].steady_known = m->cls_store_steady_n[t] > 0;
                // the store a retention needs: the most the class held once the run had
                // lasted its retention (the daily cycle's peak, not its mean)
                ei->cls[k].steady_tb = (double)m->cls_store_steady_peak[t] * c->block_bytes / 1e12;
            }
    ei->dram_tb = cfg->kv.dram.capacity_bytes > 0
                      ? cfg->kv.dram.capacity_bytes * c->pool[SIM_POOL_PREFILL].n / 1e12
                      : 0;
}

// The steady window's economics input (false when there is none): the run's (ei, before any
// sampling scale) with the tokens of the requests arriving in the window, the window's length
// (up to the run's end) as the period, and each pool's GPU-hours and busy share over the sampled
// time inside it (summary_steady's), stretched to the whole window. The store's write rates are the
// run's scaled by how much faster the class makes new KV (computed prompt + output tokens a second)
// in the window than over the run: a run with a climb and a drain writes slower on average.
static bool steady_econ_input(const sim_cluster *c, const rpt_econ_input *ei, rpt_econ_input *st) {
    const sim_output_cfg *oc = &c->cfg->output;
    const sim_metrics *m = &c->m;
    // the window as far as the run went: a window past its end holds no traffic there
    double w = fmin(oc->steady_to_s, ei->simulated_s) - oc->steady_from_s;
    if (!(w > 0) || !(m->st_span_s > 0)) return false;   // no sampled time: null
    *st = *ei;
    st->simulated_s = w;
    double run_new[RPT_ECON_MAX_CLASSES] = {0}, all_run = 0, all_st = 0;
    for (int k = 0; k < st->n_cls; k++)
        for (int j = 0; j < 2; j++)
            run_new[k] += st->cls[k].miss[j] + st->cls[k].output[j];
    // the window's tokens, class by class: its input holds the run's slots (sim_req_finish)
    for (int k = 0; k < st->n_cls; k++)
        for (int j = 0; j < 2; j++) {
            st->cls[k].hit[j] = c->econ_st.cls[k].hit[j];
            st->cls[k].miss[j] = c->econ_st.cls[k].miss[j];
            st->cls[k].output[j] = c->econ_st.cls[k].output[j];
        }
    for (int k = 0; k < st->n_cls; k++) {
        double win = 0;
        for (int j = 0; j < 2; j++)
            win += st->cls[k].miss[j] + st->cls[k].output[j];
        all_run += run_new[k], all_st += win;
        if (run_new[k] > 0)
            st->cls[k].write_Bps *= win / st->simulated_s / (run_new[k] / ei->simulated_s);
    }
    if (all_run > 0) st->ssd_write_Bps *= all_st / st->simulated_s / (all_run / ei->simulated_s);
    // prefill FLOPs saved per unit of hit rate are the run's (the window counts no FLOPs of its
    // own): the sensitivity to the hit rate starts from the window's hit rate at that saving
    double rh = 0, rm = 0, wh = 0, wm = 0;
    for (int k = 0; k < ei->n_cls; k++)
        for (int j = 0; j < 2; j++)
            rh += ei->cls[k].hit[j], rm += ei->cls[k].miss[j];
    for (int k = 0; k < st->n_cls; k++)
        for (int j = 0; j < 2; j++)
            wh += st->cls[k].hit[j], wm += st->cls[k].miss[j];
    if (ei->prefill_flops_no_reuse > 0 && rh > 0 && wh + wm > 0) {
        double per_hit = (1 - ei->prefill_flops / ei->prefill_flops_no_reuse) / (rh / (rh + rm));
        st->prefill_flops = ei->prefill_flops_no_reuse * (1 - per_hit * wh / (wh + wm));
    }
    double stretch = st->simulated_s / m->st_span_s;
    static const int pools[RPT_POOL_N] = {[RPT_POOL_VISION] = SIM_POOL_VISION,
                                          [RPT_POOL_PREFILL] = SIM_POOL_PREFILL,
                                          [RPT_POOL_DECODE] = SIM_POOL_DECODE,
                                          [RPT_POOL_COLOCATED] = SIM_POOL_PREFILL};
    for (int k = 0; k < RPT_POOL_N; k++) {
        if (!(st->gpu_hours[k] > 0)) continue;   // a pool this layout does not bill
        int p = pools[k];
        st->gpu_hours[k] = m->st_gpu_s[p] * stretch / 3600;
        st->utilization[k] = m->st_inst_ns[p] > 0 ? m->st_busy_ns[p] / m->st_inst_ns[p] : NAN;
    }
    return true;
}

// "steady.economics": the economics of the steady window as a day (cost, revenue, margin,
// payback and their sensitivities at the operating point, with no climb or drain: the keys of
// "economics"), placed in the day at the window's start. st is scaled to the full fleet
// already when the run is sampled.
static void summary_steady_economics(json_t *s, const sim_cluster *c, const rpt_econ_input *st) {
    json_t *o = json_object_get(s, "steady");
    if (!o) return;
    rpt_econ_config ec = c->cfg->econ;
    ec.trace_start_s = fmod(ec.trace_start_s + c->cfg->output.steady_from_s, 86400.0);
    rpt_econ_result r;
    kvf_err e = {0};
    if (rpt_econ_compute(&ec, st, &r, &e) != KVF_OK) {
        json_object_set_new(o, "economics", json_null());
        return;
    }
    json_object_set_new(o, "economics", rpt_econ_to_json(&ec, &r));
}

// "economics" (null for a run of no simulated time) and cache.steady_state_bytes_by_retention.
// A sampled run: *raw gets the sampled fleet's own figures first (*have_raw when computed),
// then the input is scaled to the full fleet. econ_out gets what "economics" shows.
static void summary_economics(json_t *s, json_t *ca, sim_cluster *c, double sim_s,
                              const sim_run_sampling *smp, rpt_econ_result *econ_out,
                              rpt_econ_result *raw, bool *have_raw, kvf_err *err) {
    const sim_config *cfg = c->cfg;
    rpt_econ_input *ei = &c->econ_in;
    *have_raw = false;
    rpt_econ_input st;
    bool have_st = sim_s > 0 && steady_econ_input(c, ei, &st);
    if (have_st && smp) sim_sample_scale_econ(&st, &smp->plan, c->colocated);
    if (have_st)
        summary_steady_economics(s, c, &st);
    else if (json_object_get(s, "steady"))   // a window with no sampled time in the run
        json_object_set_new(json_object_get(s, "steady"), "economics", json_null());
    if (smp && sim_s > 0) {   // the sampled fleet's own figures, then the full fleet's
        *have_raw = rpt_econ_compute(&cfg->econ, ei, raw, err) == KVF_OK;
        sim_sample_scale_econ(ei, &smp->plan, c->colocated);
    }
    json_t *ss = json_object();
    if (sim_s > 0 && rpt_econ_compute(&cfg->econ, ei, econ_out, err) == KVF_OK) {
        json_object_set_new(s, "economics", rpt_econ_to_json(&cfg->econ, econ_out));
        for (int k = 0; k < ei->n_cls; k++)
            if (isfinite(econ_out->ssd_tb_by_class[k]))
                json_object_set_new(ss, ei->cls[k].cls,
                                    json_real(econ_out->ssd_tb_by_class[k] * 1e12));
    } else {
        json_object_set_new(s, "economics", json_null());
    }
    json_object_set_new(ca, "steady_state_bytes_by_retention", ss);
}

// "steps": counts, extrapolations, table fallbacks (table model only), preemptions, decode batch.
static json_t *summary_steps(const sim_cluster *c) {
    const sim_config *cfg = c->cfg;
    const sim_metrics *m = &c->m;
    json_t *sm = json_object();
    json_object_set_new(sm, "steps", json_integer((json_int_t)m->steps));
    json_object_set_new(sm, "extrapolated_steps", json_integer((json_int_t)m->extrapolated_steps));
    json_object_set_new(sm, "extrapolated", json_boolean(m->extrapolated_steps > 0));
    if (!strcmp(cfg->step_model, "table") && !(c->opts && c->opts->engine_backend)) {
        // steps where a term the kernel tables do not cover came from the roofline
        json_object_set_new(sm, "table_fallbacks", json_integer((json_int_t)m->table_fallbacks));
    }
    json_object_set_new(sm, "preemptions", json_integer((json_int_t)m->preemptions));
    json_object_set_new(sm, "decode_steps", json_integer((json_int_t)m->decode_steps));
    json_object_set_new(
        sm, "decode_mean_batch",
        json_real(m->decode_steps ? (double)m->decode_step_seqs / (double)m->decode_steps : 0));
    return sm;
}

// "trace": the file read, its format, the reader's notes and skipped lines.
static json_t *summary_trace(const char *trace_path, trc_reader *rd) {
    json_t *tr = json_object();
    json_object_set_new(tr, "path", json_string(trace_path));
    json_object_set_new(tr, "format", json_string(trc_format_name(trc_reader_format(rd))));
    json_object_set_new(tr, "notes", json_string(trc_reader_notes(rd)));
    json_object_set_new(tr, "skipped_lines", json_integer((json_int_t)trc_reader_skipped(rd)));
    return tr;
}

// "invariants": conservation checks, read by the tests: all zero or equal on a correct run.
static json_t *summary_invariants(const sim_cluster *c) {
    const sim_metrics *m = &c->m;
    json_t *inv = json_object();
    double kv_held = 0;
    uint64_t cached_blocks_over = 0;
    for (uint32_t i = 0; i < c->n_inst; i++) {
        kv_held += c->inst[i].kv_used + c->inst[i].kv_inflight;
        if (c->inst[i].hbm.peak > c->inst[i].hbm.capacity) cached_blocks_over++;
        if (c->inst[i].dram.peak > c->inst[i].dram.capacity) cached_blocks_over++;
    }
    if (c->ssd.peak > c->ssd.capacity) cached_blocks_over++;
    json_object_set_new(inv, "kv_tokens_held_end", json_real(kv_held));
    json_object_set_new(inv, "in_flight_end", json_integer((json_int_t)c->in_flight));
    json_object_set_new(inv, "output_tokens_requested",
                        json_integer((json_int_t)m->output_requested));
    json_object_set_new(inv, "output_tokens_produced", json_integer((json_int_t)m->output_tokens));
    json_object_set_new(inv, "output_tokens_rejected",
                        json_integer((json_int_t)m->output_rejected));
    json_object_set_new(inv, "tiers_over_capacity", json_integer((json_int_t)cached_blocks_over));
    return inv;
}

// "sim": events, wall time (the caller's measure), speed and simulated time.
static json_t *summary_sim(const sim_cluster *c, double wall_s, double sim_s) {
    uint64_t events = sim_queue_popped(c->q);
    json_t *si = json_object();
    json_object_set_new(si, "events", json_integer((json_int_t)events));
    json_object_set_new(si, "wall_s", json_real(wall_s));
    json_object_set_new(si, "events_per_s", json_real(wall_s > 0 ? (double)events / wall_s : 0));
    json_object_set_new(si, "simulated_s", json_real(sim_s));
    // runs of decode steps costed page by page: the early events between pages, not counted
    // above (no handler but the run's own sees them)
    json_object_set_new(si, "page_events", json_integer((json_int_t)sim_queue_early_popped(c->q)));
    return si;
}

// "sampling" of a sampled run: the full fleet's GPU-hours, and the sampled fleet's own cost
// and revenue when they were computed.
static void summary_sampling(json_t *s, const sim_cluster *c, const sim_run_sampling *smp,
                             bool have_raw, const rpt_econ_result *raw) {
    double gh_full = 0;
    for (int k = 0; k < SIM_POOLS; k++)
        gh_full += pool_gpu_s(c, k) / 3600.0 * sim_sample_pool_factor(&smp->plan, k, c->colocated);
    sim_sample_summary(s, &smp->plan, &smp->sampler, c->colocated, gh_full);
    json_t *sampled = json_object_get(json_object_get(s, "sampling"), "sampled");
    if (have_raw) {
        json_object_set_new(sampled, "economics.cost_usd", json_real(raw->cost_usd));
        json_object_set_new(sampled, "economics.revenue_usd", json_real(raw->revenue_usd));
    }
}

// "published": the scenario's published figures beside the run's; the gap is against the
// nearer end of a range. Reads the summary s built so far.
static json_t *summary_published(const sim_config *cfg, json_t *s) {
    json_t *pa = json_array();
    for (int k = 0; k < cfg->n_published; k++) {
        const sim_published *p = &cfg->published[k];
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(p->name));
        json_object_set_new(o, "role", json_string(p->output ? "output" : "input"));
        json_object_set_new(o, "value", json_real(p->value));
        json_object_set_new(o, "high", isnan(p->high) ? json_null() : json_real(p->high));
        json_object_set_new(o, "unit", json_string(p->unit));
        json_object_set_new(o, "summary_key", json_string(p->summary_key));
        double x = p->summary_key[0] ? rpt_json_num(s, p->summary_key) * p->scale : NAN;
        double ref = isnan(p->high) || x < p->value ? p->value : x > p->high ? p->high : x;
        json_object_set_new(o, "simulated", isfinite(x) ? json_real(x) : json_null());
        json_object_set_new(o, "gap_pct",
                            isfinite(x) && ref != 0 ? json_real(100.0 * (x - ref) / fabs(ref))
                                                    : json_null());
        json_object_set_new(o, "rests_on", json_string(p->rests_on));
        json_array_append_new(pa, o);
    }
    return pa;
}

// summary.json of the finished run on c (contract in sim_run.h): the sections in their order.
// Sorts c's latency samples and fills c->econ_in (scaled to the full fleet when sampled).
json_t *sim_summary_build(sim_cluster *c, const char *trace_path, trc_reader *rd, double wall_s,
                          const sim_run_sampling *smp, rpt_econ_result *econ_out, kvf_err *err) {
    KVF_ASSERT(c && c->cfg && rd && econ_out);
    json_t *s = json_object();
    double sim_s = (double)c->now * 1e-9;
    summary_header(s, c);
    json_object_set_new(s, "requests", summary_requests(c));
    summary_latency(s, &c->m);
    json_object_set_new(s, "throughput", summary_throughput(c, sim_s));
    summary_steady(s, c);
    double peak, wr;
    json_t *ca = summary_cache(c, sim_s, &peak, &wr);
    json_object_set_new(s, "cache", ca);
    summary_gpus(s, c);
    json_object_set_new(s, "slo", summary_slo(c, sim_s));
    summary_econ_input(c, sim_s, peak, wr);
    if (c->m.failures || c->cfg->cluster.prefill.failures.mtbf_ns > 0 ||
        c->cfg->cluster.decode.failures.mtbf_ns > 0) {
        json_t *fo = json_object();
        json_object_set_new(fo, "count", json_integer((json_int_t)c->m.failures));
        json_object_set_new(fo, "retried", json_integer((json_int_t)c->m.retried));
        json_object_set_new(fo, "rejected", json_integer((json_int_t)c->m.rejected_failure));
        json_object_set_new(fo, "lost_kv_tokens", json_real(c->m.lost_kv_tokens));
        json_object_set_new(fo, "redone_prompt_tokens",
                            json_integer((json_int_t)c->m.redone_prompt_tokens));
        json_object_set_new(fo, "redone_output_tokens",
                            json_integer((json_int_t)c->m.redone_output_tokens));
        json_object_set_new(fo, "rejected_prompt_tokens",
                            json_integer((json_int_t)c->m.rejected_prompt_tokens));
        json_object_set_new(fo, "rejected_output_tokens",
                            json_integer((json_int_t)c->m.rejected_output_tokens));
        json_object_set_new(fo, "down_s", json_real(c->m.down_ns * 1e-9));
        json_object_set_new(s, "failures", fo);
    }
    json_t *sc = summary_scaling(c);
    if (sc) json_object_set_new(s, "scaling", sc);
    json_t *en = summary_energy(c, sim_s);   // before the economics: it gives their power
    if (en) json_object_set_new(s, "energy", en);
    rpt_econ_result econ_raw;
    bool have_raw;
    summary_economics(s, ca, c, sim_s, smp, econ_out, &econ_raw, &have_raw, err);
    json_object_set_new(s, "saturation", sim_saturation_json(c));
    json_object_set_new(s, "steps", summary_steps(c));
    json_object_set_new(s, "trace", summary_trace(trace_path, rd));
    json_object_set_new(s, "invariants", summary_invariants(c));
    json_object_set_new(s, "sim", summary_sim(c, wall_s, sim_s));
    if (smp) summary_sampling(s, c, smp, have_raw, &econ_raw);
    if (c->cfg->n_published) json_object_set_new(s, "published", summary_published(c->cfg, s));
    return s;
}
