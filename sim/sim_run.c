// sim/sim_run.c -- `kvfleet run`: opens the trace, builds the cluster, runs the event loop and
// turns the outcome into summary.json (design.md §5), the results database and the report.
//
// Determinism: the summary is a function of (scenario, trace, seed) apart from the figures
// under "sim" that measure wall time; nothing here reads the clock except for those.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"
#include "sim_cli.h"
#include "sim_run.h"
#include "sim_sample.h"
#include "rpt_util.h"

// ---- step models ----------------------------------------------------------------------------
kvf_status sim_make_stepper(const sim_config *cfg, const mdl_model *m, const mdl_hardware *hw,
                            const mdl_parallel *par, const sim_run_opts *o, mdl_stepper **out,
                            kvf_err *err) {
    if (o && o->engine_backend) return sim_engine_stepper_create(cfg, m, hw, par, o, out, err);
    mdl_parallel p = par ? *par : (mdl_parallel){0};
    if (!par) mdl_parallel_default(&p);
    p.route_nodes = cfg->ep_route_nodes;
    p.two_batch = cfg->ep_two_batch;
    par = &p;
    kvf_status st = KVF_OK;
    if (!strcmp(cfg->step_model, "calibrated")) {
        char prof[SIM_PATH_MAX];
        sim_config_resolve(cfg, cfg->profile, prof, sizeof prof);
        st = mdl_calibrated_create(out, m, hw, par, &cfg->eff, prof, err);
    } else {
        *out = !strcmp(cfg->step_model, "table") ? mdl_table_create(m, hw, par, &cfg->eff)
                                                 : mdl_roofline_create(m, hw, par, &cfg->eff);
        if (!*out) st = kvf_fail(err, KVF_ENOMEM, "cannot create the %s step model", cfg->step_model);
    }
    if (!st && o && (o->replay || o->step_scale > 0)) *out = sim_replay_stepper_wrap(*out, o);
    return st;
}

// ---- progress ----------------------------------------------------------------------------------
void sim_run_progress(sim_cluster *c) {
    if (c->show_progress) rpt_progress_update(&c->progress, (double)c->completed + (double)c->rejected);
}

// A progress bar over the requests the run will serve, when stderr is a terminal: the total
// comes from a counting pass over the trace (progress never changes results).
static void progress_start(sim_cluster *c, const sim_config *cfg, const sim_run_opts *o,
                           const char *trace) {
    if (o->quiet || !isatty(2)) return;
    uint64_t total = 0;
    trc_options opt = cfg->trace_opt;
    opt.block_tokens = cfg->block_tokens;
    if (cfg->generate_profile[0]) total = (uint64_t)(cfg->generate_rate_rps * cfg->generate_duration_s);
    else if (trc_count(trace, &opt, &total, NULL) != KVF_OK) return;
    total = (uint64_t)((double)total * cfg->sample_rate);   // sampled runs serve ~R of it
    if (!total) return;
    rpt_progress_init(&c->progress, "run", (double)total);
    c->show_progress = true;
}

// ---- summary -------------------------------------------------------------------------------------
static json_t *stats_obj(sim_samples *s) {
    json_t *o = json_object();
    double sum = 0;
    for (size_t i = 0; i < s->n; i++) sum += s->v[i];
    kvf_sort_doubles(s->v, s->n);
    json_object_set_new(o, "mean", json_real(s->n ? sum / (double)s->n : 0));
    json_object_set_new(o, "p50", json_real(kvf_percentile_sorted(s->v, s->n, 50)));
    json_object_set_new(o, "p90", json_real(kvf_percentile_sorted(s->v, s->n, 90)));
    json_object_set_new(o, "p99", json_real(kvf_percentile_sorted(s->v, s->n, 99)));
    return o;
}

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static double pool_gpu_s(const sim_cluster *c, int k) { return c->pool[k].gpu_ns * 1e-9; }

static double pool_util(const sim_cluster *c, int k) {
    const sim_pool *p = &c->pool[k];
    double busy = 0, avail = 0;
    for (uint32_t i = 0; i < p->n; i++) busy += c->inst[p->first + i].busy_ns;
    avail = p->cfg && p->cfg->gpus_per_instance ? p->gpu_ns / p->cfg->gpus_per_instance : 0;
    return avail > 0 ? busy / avail : 0;
}

// A sampled run (workload.sample_rate < 1): the plan that scaled the cluster and the filter.
typedef struct run_sampling {
    sim_sample_plan plan;
    sim_sampler sampler;
} run_sampling;

static json_t *build_summary(sim_cluster *c, const char *trace_path, trc_reader *rd,
                             double wall_s, const run_sampling *smp, rpt_econ_result *econ_out,
                             kvf_err *err) {
    const sim_config *cfg = c->cfg;
    sim_metrics *m = &c->m;
    json_t *s = json_object();
    double sim_s = (double)c->now * 1e-9;
    json_object_set_new(s, "scenario", json_string(cfg->name));
    json_object_set_new(s, "seed", json_integer((json_int_t)cfg->seed));
    json_object_set_new(s, "kvfleet_version", json_string(KVF_VERSION));
    json_object_set_new(s, "step_model", json_string(c->opts && c->opts->engine_backend
                                                         ? "engine"
                                                         : cfg->step_model));
    if (!strcmp(cfg->step_model, "calibrated")) json_object_set_new(s, "profile", json_string(cfg->profile));
    json_object_set_new(s, "model", json_string(c->model.name));
    json_object_set_new(s, "hardware", json_string(c->hw.name));
    json_object_set_new(s, "mode", json_string(c->colocated ? "colocated" : "disaggregated"));

    json_t *rq = json_object();
    json_object_set_new(rq, "arrived", json_integer((json_int_t)c->arrived));
    json_object_set_new(rq, "completed", json_integer((json_int_t)c->completed));
    json_object_set_new(rq, "rejected", json_integer((json_int_t)c->rejected));
    json_t *why = json_object();
    json_object_set_new(why, "queue", json_integer((json_int_t)m->rejected_queue));
    json_object_set_new(why, "slo", json_integer((json_int_t)m->rejected_slo));
    json_object_set_new(why, "capacity", json_integer((json_int_t)m->rejected_fit));
    json_object_set_new(rq, "rejected_by_reason", why);
    // arrived and neither completed nor rejected (in_flight also counts requests read ahead
    // of their arrival)
    json_object_set_new(rq, "unfinished",
                        json_integer((json_int_t)(c->arrived - c->completed - c->rejected)));
    json_object_set_new(s, "requests", rq);

    json_object_set_new(s, "ttft_ms", stats_obj(&m->ttft_ms));
    json_object_set_new(s, "tpot_ms", stats_obj(&m->tpot_ms));
    json_t *itl = json_object();
    json_object_set_new(itl, "mean", json_real(sim_hist_mean(&m->itl_ms)));
    json_object_set_new(itl, "p50", json_real(sim_hist_percentile(&m->itl_ms, 50)));
    json_object_set_new(itl, "p90", json_real(sim_hist_percentile(&m->itl_ms, 90)));
    json_object_set_new(itl, "p99", json_real(sim_hist_percentile(&m->itl_ms, 99)));
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
        json_object_set_new(o, "ttft_ms_mean", json_real(m->cls_ttft_ms[k] / (double)m->cls_done[k]));
        json_object_set_new(o, "gen_tok_s_mean",
                            m->cls_gen_n[k] ? json_real(m->cls_gen_tok_s[k] / (double)m->cls_gen_n[k])
                                            : json_null());
        json_object_set_new(bc, trc_class_name(k), o);
    }
    json_object_set_new(s, "by_class", bc);

    int ppool = SIM_POOL_PREFILL, dpool = c->colocated ? SIM_POOL_PREFILL : SIM_POOL_DECODE;
    json_t *tp = json_object();
    json_object_set_new(tp, "input_tok_s", json_real(sim_s > 0 ? (double)m->prompt_tokens / sim_s : 0));
    json_object_set_new(tp, "output_tok_s", json_real(sim_s > 0 ? (double)m->output_tokens / sim_s : 0));
    double pgs = pool_gpu_s(c, ppool), dgs = pool_gpu_s(c, dpool);
    json_object_set_new(tp, "prefill_input_tok_s_per_gpu", json_real(pgs > 0 ? (double)m->prompt_tokens / pgs : 0));
    json_object_set_new(tp, "decode_output_tok_s_per_gpu", json_real(dgs > 0 ? (double)m->output_tokens / dgs : 0));
    json_object_set_new(tp, "tokens_per_decode_step_per_request",
                        json_real(m->decode_step_seqs ? (double)m->decode_step_tokens / (double)m->decode_step_seqs : 0));
    json_object_set_new(s, "throughput", tp);

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
    // by traffic class: hit rate, what the class writes to the store, what the store holds of
    // it (steady: mean occupancy once the run has lasted the class's retention; null before)
    json_t *bycls = json_object();
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        if (!m->cls_prompt[k] && !m->cls_store_writes[k] && !m->cls_store_peak[k]) continue;
        json_t *o = json_object();
        json_object_set_new(o, "prompt_tokens", json_integer((json_int_t)m->cls_prompt[k]));
        json_object_set_new(o, "hit_rate", json_real(m->cls_prompt[k] ? (double)m->cls_hit[k] / (double)m->cls_prompt[k] : 0));
        json_object_set_new(o, "retention_s", num_or_null(cfg->retention_ns[k] > 0 ? (double)cfg->retention_ns[k] * 1e-9 : NAN));
        json_object_set_new(o, "store_write_Bps", json_real(sim_s > 0 ? (double)m->cls_store_writes[k] * c->block_bytes / sim_s : 0));
        json_object_set_new(o, "stored_bytes_peak", json_real((double)m->cls_store_peak[k] * c->block_bytes));
        json_object_set_new(o, "stored_bytes_end", json_real((double)c->ssd.used_cls[k] * c->block_bytes));
        json_object_set_new(o, "stored_bytes_steady",
                            num_or_null(m->cls_store_steady_n[k] ? m->cls_store_steady_sum[k] / (double)m->cls_store_steady_n[k] * c->block_bytes : NAN));
        json_object_set_new(o, "stored_bytes_steady_peak",
                            num_or_null(m->cls_store_steady_n[k] ? (double)m->cls_store_steady_peak[k] * c->block_bytes : NAN));
        json_object_set_new(bycls, trc_class_name(k), o);
    }
    json_object_set_new(ca, "by_class", bycls);
    json_object_set_new(ca, "by_tier_tokens", btt);
    double peak = (double)c->ssd.peak * c->block_bytes;
    if (peak < m->store_bytes_peak) peak = m->store_bytes_peak;
    json_object_set_new(ca, "stored_bytes_peak", json_real(peak));
    json_object_set_new(ca, "stored_bytes_end", json_real((double)c->ssd.used * c->block_bytes));
    json_object_set_new(ca, "block_bytes", json_real(c->block_bytes));
    json_object_set_new(ca, "ssd_capacity_bytes", num_or_null(cfg->ssd.capacity_bytes < 0 ? INFINITY : cfg->ssd.capacity_bytes));
    // steady state of a store that keeps everything for its retention: per class, the class's
    // write rate x its retention (filled below from the economics input)
    double wr = sim_s > 0 ? (double)c->ssd.inserted * c->block_bytes / sim_s : 0;
    json_object_set_new(ca, "ssd_write_Bps", json_real(wr));
    json_object_set_new(ca, "evicted_blocks", json_integer((json_int_t)c->ssd.evicted));
    json_object_set_new(ca, "expired_blocks", json_integer((json_int_t)c->ssd.expired));
    // the store's block index in memory (tables and run queues) per block at its peak
    json_object_set_new(ca, "index_bytes_per_block",
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
    json_object_set_new(s, "cache", ca);

    json_t *g = json_object();
    json_object_set_new(g, "vision", json_integer(c->pool[SIM_POOL_VISION].n * (json_int_t)cfg->vision.gpus_per_instance));
    json_object_set_new(g, "prefill", json_integer(c->pool[SIM_POOL_PREFILL].n * (json_int_t)cfg->prefill.gpus_per_instance));
    json_object_set_new(g, "decode", json_integer(c->pool[SIM_POOL_DECODE].n * (json_int_t)cfg->decode.gpus_per_instance));
    json_object_set_new(s, "gpus", g);
    double gh = (pool_gpu_s(c, 0) + pool_gpu_s(c, 1) + pool_gpu_s(c, 2)) / 3600.0;
    json_object_set_new(s, "gpu_hours", json_real(gh));
    json_t *u = json_object();
    json_object_set_new(u, "vision", json_real(pool_util(c, SIM_POOL_VISION)));
    json_object_set_new(u, "prefill", json_real(pool_util(c, SIM_POOL_PREFILL)));
    json_object_set_new(u, "decode", json_real(pool_util(c, dpool)));
    json_object_set_new(s, "utilization", u);

    json_t *slo = json_object();
    json_object_set_new(slo, "ttft_p90_ms", json_real(cfg->slo_ttft_p90_ms));
    json_object_set_new(slo, "tpot_p90_ms", json_real(cfg->slo_tpot_p90_ms));
    json_object_set_new(slo, "attainment", json_real(c->arrived ? (double)m->slo_ok / (double)c->arrived : 0));
    json_object_set_new(slo, "goodput_req_s", json_real(sim_s > 0 ? (double)m->slo_ok / sim_s : 0));
    double t90 = kvf_percentile_sorted(m->ttft_ms.v, m->ttft_ms.n, 90);
    double p90 = kvf_percentile_sorted(m->tpot_ms.v, m->tpot_ms.n, 90);
    json_object_set_new(slo, "met", json_boolean(c->completed && t90 <= cfg->slo_ttft_p90_ms &&
                                                 p90 <= cfg->slo_tpot_p90_ms));
    json_object_set_new(s, "slo", slo);

    // economics: GPU-hours by pool, tokens by class (added per request as they finished)
    rpt_econ_input *ei = &c->econ_in;
    ei->simulated_s = sim_s;
    if (c->colocated) {
        ei->gpu_hours[RPT_POOL_COLOCATED] = pool_gpu_s(c, SIM_POOL_PREFILL) / 3600;
        ei->gpus[RPT_POOL_COLOCATED] = c->pool[SIM_POOL_PREFILL].n * (double)cfg->prefill.gpus_per_instance;
        ei->utilization[RPT_POOL_COLOCATED] = pool_util(c, SIM_POOL_PREFILL);
    } else {
        ei->gpu_hours[RPT_POOL_PREFILL] = pool_gpu_s(c, SIM_POOL_PREFILL) / 3600;
        ei->gpu_hours[RPT_POOL_DECODE] = pool_gpu_s(c, SIM_POOL_DECODE) / 3600;
        ei->gpus[RPT_POOL_PREFILL] = c->pool[SIM_POOL_PREFILL].n * (double)cfg->prefill.gpus_per_instance;
        ei->gpus[RPT_POOL_DECODE] = c->pool[SIM_POOL_DECODE].n * (double)cfg->decode.gpus_per_instance;
        ei->utilization[RPT_POOL_PREFILL] = pool_util(c, SIM_POOL_PREFILL);
        ei->utilization[RPT_POOL_DECODE] = pool_util(c, SIM_POOL_DECODE);
    }
    ei->gpu_hours[RPT_POOL_VISION] = pool_gpu_s(c, SIM_POOL_VISION) / 3600;
    ei->gpus[RPT_POOL_VISION] = c->pool[SIM_POOL_VISION].n * (double)cfg->vision.gpus_per_instance;
    ei->utilization[RPT_POOL_VISION] = pool_util(c, SIM_POOL_VISION);
    ei->ssd_tb = (cfg->ssd.capacity_bytes < 0 ? peak : cfg->ssd.capacity_bytes) / 1e12;
    ei->ssd_unbounded = cfg->ssd.capacity_bytes < 0;
    ei->ssd_write_Bps = wr;
    ei->prefill_flops = m->prefill_flops;
    ei->prefill_flops_no_reuse = m->prefill_flops_no_reuse;
    for (int k = 0; k < ei->n_cls; k++)
        for (int t = 0; t < TRC_CLASS_COUNT; t++)
            if (!strcmp(ei->cls[k].cls, trc_class_name(t))) {
                ei->cls[k].retention_s = (double)cfg->retention_ns[t] * 1e-9;
                ei->cls[k].write_known = sim_s > 0;
                ei->cls[k].write_Bps = sim_s > 0 ? (double)m->cls_store_writes[t] * c->block_bytes / sim_s : 0;
                ei->cls[k].steady_known = m->cls_store_steady_n[t] > 0;
                // the store a retention needs: the most the class held once the run had
                // lasted its retention (the daily cycle's peak, not its mean)
                ei->cls[k].steady_tb = (double)m->cls_store_steady_peak[t] * c->block_bytes / 1e12;
            }
    ei->dram_tb = cfg->dram.capacity_bytes > 0
                      ? cfg->dram.capacity_bytes * c->pool[SIM_POOL_PREFILL].n / 1e12
                      : 0;
    rpt_econ_result econ_raw;
    bool have_raw = false;
    if (smp && sim_s > 0) {   // the sampled fleet's own figures, then the full fleet's
        have_raw = rpt_econ_compute(&cfg->econ, ei, &econ_raw, err) == KVF_OK;
        sim_sample_scale_econ(ei, &smp->plan, c->colocated);
    }
    json_t *ss = json_object();
    if (sim_s > 0 && rpt_econ_compute(&cfg->econ, ei, econ_out, err) == KVF_OK) {
        json_object_set_new(s, "economics", rpt_econ_to_json(&cfg->econ, econ_out));
        for (int k = 0; k < ei->n_cls; k++)
            if (isfinite(econ_out->ssd_tb_by_class[k]))
                json_object_set_new(ss, ei->cls[k].cls, json_real(econ_out->ssd_tb_by_class[k] * 1e12));
    } else {
        json_object_set_new(s, "economics", json_null());
    }
    json_object_set_new(ca, "steady_state_bytes_by_retention", ss);

    json_object_set_new(s, "saturation", sim_saturation_json(c));

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
    json_object_set_new(sm, "decode_mean_batch",
                        json_real(m->decode_steps ? (double)m->decode_step_seqs / (double)m->decode_steps : 0));
    json_object_set_new(s, "steps", sm);

    json_t *tr = json_object();
    json_object_set_new(tr, "path", json_string(trace_path));
    json_object_set_new(tr, "format", json_string(trc_format_name(trc_reader_format(rd))));
    json_object_set_new(tr, "notes", json_string(trc_reader_notes(rd)));
    json_object_set_new(tr, "skipped_lines", json_integer((json_int_t)trc_reader_skipped(rd)));
    json_object_set_new(s, "trace", tr);

    // conservation checks, read by the tests: all zero or equal on a correct run
    json_t *inv = json_object();
    double kv_held = 0;
    uint64_t cached_blocks_over = 0;
    for (uint32_t i = 0; i < c->n_inst; i++) {
        kv_held += c->inst[i].kv_used;
        if (c->inst[i].hbm.peak > c->inst[i].hbm.capacity) cached_blocks_over++;
        if (c->inst[i].dram.peak > c->inst[i].dram.capacity) cached_blocks_over++;
    }
    if (c->ssd.peak > c->ssd.capacity) cached_blocks_over++;
    json_object_set_new(inv, "kv_tokens_held_end", json_real(kv_held));
    json_object_set_new(inv, "in_flight_end", json_integer((json_int_t)c->in_flight));
    json_object_set_new(inv, "output_tokens_requested", json_integer((json_int_t)m->output_requested));
    json_object_set_new(inv, "output_tokens_produced", json_integer((json_int_t)m->output_tokens));
    json_object_set_new(inv, "output_tokens_rejected", json_integer((json_int_t)m->output_rejected));
    json_object_set_new(inv, "tiers_over_capacity", json_integer((json_int_t)cached_blocks_over));
    json_object_set_new(s, "invariants", inv);

    uint64_t events = sim_queue_popped(c->q);
    json_t *si = json_object();
    json_object_set_new(si, "events", json_integer((json_int_t)events));
    json_object_set_new(si, "wall_s", json_real(wall_s));
    json_object_set_new(si, "events_per_s", json_real(wall_s > 0 ? (double)events / wall_s : 0));
    json_object_set_new(si, "simulated_s", json_real(sim_s));
    json_object_set_new(s, "sim", si);

    if (smp) {
        double gh_full = 0;
        for (int k = 0; k < SIM_POOLS; k++)
            gh_full += pool_gpu_s(c, k) / 3600.0 * sim_sample_pool_factor(&smp->plan, k, c->colocated);
        sim_sample_summary(s, &smp->plan, &smp->sampler, c->colocated, gh_full);
        json_t *raw = json_object_get(json_object_get(s, "sampling"), "sampled");
        if (have_raw) {
            json_object_set_new(raw, "economics.cost_usd", json_real(econ_raw.cost_usd));
            json_object_set_new(raw, "economics.revenue_usd", json_real(econ_raw.revenue_usd));
        }
    }
    // published figures beside the run's: the gap is against the nearer end of a range
    if (cfg->n_published) {
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
            json_object_set_new(o, "gap_pct", isfinite(x) && ref != 0
                                                  ? json_real(100.0 * (x - ref) / fabs(ref))
                                                  : json_null());
            json_object_set_new(o, "rests_on", json_string(p->rests_on));
            json_array_append_new(pa, o);
        }
        json_object_set_new(s, "published", pa);
    }
    return s;
}

// Writes every number and string of the summary as summary(key, value) rows.
static kvf_status summary_to_db(rpt_db *db, json_t *o, const char *prefix, kvf_err *err) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (!*prefix && !strcmp(k, "config")) continue;   // in run(config) as YAML
        char key[256];
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", k);
        kvf_status st = KVF_OK;
        if (json_is_object(v)) st = summary_to_db(db, v, key, err);
        else if (json_is_number(v)) st = rpt_db_summary_set(db, key, json_number_value(v), err);
        else if (json_is_string(v)) st = rpt_db_summary_set_text(db, key, json_string_value(v), err);
        else if (json_is_boolean(v)) st = rpt_db_summary_set(db, key, json_is_true(v) ? 1 : 0, err);
        if (st) return st;
    }
    return KVF_OK;
}

static kvf_status write_run_table(rpt_db *db, const sim_config *cfg, const char *trace,
                                  trc_reader *rd, kvf_err *err) {
    char buf[64];
    const char *kv[][2] = {
        {"scenario", cfg->name},
        {"scenario_file", cfg->path},
        {"kvfleet_version", KVF_VERSION},
        {"model", cfg->model},
        {"hardware", cfg->hardware},
        {"step_model", cfg->step_model},
        {"profile", cfg->profile},
        {"trace", trace},
        {"trace_format", trc_format_name(trc_reader_format(rd))},
        {"trace_notes", trc_reader_notes(rd)},
        {"mode", cfg->mode == SIM_COLOCATED ? "colocated" : "disaggregated"},
        {"router_prefill", cfg->router_prefill},
        {"router_decode", cfg->router_decode},
        {"status", "running"},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        kvf_status st = rpt_db_run_set(db, kv[i][0], kv[i][1], err);
        if (st) return st;
    }
    snprintf(buf, sizeof buf, "%.17g", cfg->sample_rate);
    kvf_status st = rpt_db_run_set(db, "sample_rate", buf, err);
    if (st) return st;
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)cfg->seed);
    return rpt_db_run_set(db, "seed", buf, err);
}

// run(key = 'config'): the resolved scenario as YAML (the same as summary.json's "config").
static kvf_status write_run_config(rpt_db *db, const sim_config *cfg, kvf_err *err) {
    char *yaml = sim_config_to_yaml(cfg);
    if (!yaml) return kvf_fail(err, KVF_ENOMEM, "cannot write the configuration as YAML");
    kvf_status st = rpt_db_run_set(db, "config", yaml, err);
    free(yaml);
    return st;
}

static kvf_status open_workload(const sim_config *cfg, trc_reader **rd, char *trace, size_t n,
                                kvf_err *err) {
    if (cfg->generate_profile[0]) {
        snprintf(trace, n, "generate:%s", cfg->generate_profile);
        return sim_open_generator(cfg, rd, err);
    }
    sim_config_resolve(cfg, cfg->trace, trace, n);
    trc_options o = cfg->trace_opt;
    o.block_tokens = cfg->block_tokens;
    o.seed = cfg->seed;
    return trc_reader_open(rd, trace, &o, err);
}

kvf_status sim_run(const sim_config *cfg, const sim_run_opts *o, void **summary_json,
                   kvf_err *err) {
    sim_run_opts defaults = {0};
    if (!o) o = &defaults;
    *summary_json = NULL;
    sim_cluster c;
    trc_reader *rd = NULL;
    char trace[SIM_PATH_MAX], path[SIM_PATH_MAX + 32];
    // sampling: the cluster is built from a copy scaled by R; the summary states both
    run_sampling *smp = NULL;
    sim_config *scaled = NULL;
    kvf_status st;
    const sim_config *given = cfg;   // the scenario as resolved, before any sampling scales it
    if (cfg->sample_rate < 1) {
        smp = calloc(1, sizeof *smp);
        scaled = malloc(sizeof *scaled);
        if (!smp || !scaled) {
            free(smp);
            free(scaled);
            return kvf_fail(err, KVF_ENOMEM, "no memory for the sampled scenario");
        }
        st = sim_sample_plan_make(cfg, &smp->plan, err);
        // a generated workload is drawn at R x its rate: the filter keeps all it is given
        if (!st) st = sim_sampler_init(&smp->sampler, smp->plan.generated ? 1.0 : cfg->sample_rate, err);
        if (st) {
            free(smp);
            free(scaled);
            return st;
        }
        *scaled = *cfg;
        sim_sample_apply(&smp->plan, scaled);
        cfg = scaled;
    }
    st = sim_cluster_init(&c, cfg, o, err);
    if (smp) c.sampler = &smp->sampler;
    if (st) goto done;
    st = open_workload(cfg, &rd, trace, sizeof trace, err);
    if (st) goto done;
    if (o->out_dir) {
        st = kvf_mkdirs(o->out_dir, err);
        if (st) goto done;
        snprintf(path, sizeof path, "%s/results.db", o->out_dir);
        st = rpt_db_create(&c.db, path, err);
        if (st) goto done;
        st = write_run_table(c.db, cfg, trace, rd, err);
        if (!st) st = write_run_config(c.db, given, err);
        if (st) goto done;
    }
    progress_start(&c, cfg, o, trace);
    int64_t t0 = kvf_wall_ns();
    st = sim_cluster_open_trace(&c, rd);
    if (st == KVF_OK) st = sim_cluster_loop(&c);
    double wall_s = (double)(kvf_wall_ns() - t0) * 1e-9;
    if (o->interrupt && *o->interrupt) st = KVF_EINTR;
    if (c.show_progress) rpt_progress_done(&c.progress);
    if (st && st != KVF_EINTR) goto done;
    if (!st && c.arrived == 0) {
        st = kvf_fail(err, KVF_EPARSE,
                      "%s: no requests to simulate (the trace, or its window/limit, is empty)",
                      trace);
        goto done;
    }
    kvf_status run_st = st;
    rpt_econ_result econ;
    memset(&econ, 0, sizeof econ);
    json_t *s = build_summary(&c, trace, rd, wall_s, smp, &econ, err);
    if (run_st == KVF_EINTR) json_object_set_new(s, "status", json_string("interrupted"));
    json_object_set_new(s, "config", sim_config_to_json(given));
    if (o->out_dir) {
        snprintf(path, sizeof path, "%s/summary.json", o->out_dir);
        if (json_dump_file(s, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10))) {
            json_decref(s);
            st = kvf_fail(err, KVF_EIO, "%s: cannot write", path);
            goto done;
        }
        st = summary_to_db(c.db, s, "", err);
        if (!st && json_is_object(json_object_get(s, "economics")))
            st = rpt_econ_write_db(c.db, &econ, err);
        if (!st) st = rpt_db_run_set(c.db, "status", run_st == KVF_EINTR ? "interrupted" : "completed", err);
        if (st) {
            json_decref(s);
            goto done;
        }
    }
    *summary_json = s;
    st = run_st;
    if (st == KVF_EINTR) kvf_fail(err, KVF_EINTR, "interrupted; partial results kept");
done:
    if (c.db) {
        if (st && st != KVF_EINTR) rpt_db_run_set(c.db, "status", "failed", NULL);
        kvf_err e2 = {0};
        if (rpt_db_close(c.db, &e2) && !st) st = kvf_fail(err, e2.code, "%s", e2.msg);
        c.db = NULL;
    }
    trc_reader_close(rd);
    sim_cluster_free(&c);
    if (smp) sim_sampler_free(&smp->sampler);
    free(smp);
    free(scaled);
    return st;
}

// ---- result directories ------------------------------------------------------------------------
static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p) ? 0 : 0;   // best effort: keep going
}

void sim_remove_tree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (!S_ISDIR(sb.st_mode)) {
        unlink(path);
        return;
    }
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

kvf_status sim_lock_file(const char *path, int *fd, kvf_err *err) {
    *fd = -1;
    for (int tries = 0; tries < 8; tries++) {
        int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (f < 0) return kvf_fail(err, KVF_EIO, "%s: cannot create the lock: %s", path, strerror(errno));
        if (flock(f, LOCK_EX | LOCK_NB) != 0) {
            close(f);
            if (errno == EWOULDBLOCK)
                return kvf_fail(err, KVF_EINVAL,
                                "%s: another kvfleet process is writing this result; wait for "
                                "it or choose another -o", path);
            return kvf_fail(err, KVF_EIO, "%s: cannot lock: %s", path, strerror(errno));
        }
        // The holder before us may have unlinked the file after we opened it: the lock must
        // be on the file the path names now.
        struct stat a, b;
        if (fstat(f, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
            char pid[32];
            int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
            if (ftruncate(f, 0) == 0 && write(f, pid, (size_t)n) < 0) { /* informative only */ }
            *fd = f;
            return KVF_OK;
        }
        close(f);
    }
    return kvf_fail(err, KVF_EIO, "%s: cannot take the lock", path);
}

static bool dir_is_empty(const char *path) {
    DIR *d = opendir(path);
    if (!d) return false;
    struct dirent *e;
    bool empty = true;
    while (empty && (e = readdir(d)))
        empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    return empty;
}

// Removes DIR.tmp.* and DIR.old.* beside DIR: what a killed run left (we hold the lock).
static void remove_leftovers(const char *final) {
    char parent[SIM_PATH_MAX];
    snprintf(parent, sizeof parent, "%s", final);
    char *slash = strrchr(parent, '/');
    const char *base = slash ? slash + 1 : final;
    if (slash) *slash = '\0';
    DIR *d = opendir(slash ? (parent[0] ? parent : "/") : ".");
    if (!d) return;
    size_t bl = strlen(base);
    struct dirent *e;
    char p[SIM_PATH_MAX + 300];
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, base, bl) ||
            (strncmp(e->d_name + bl, ".tmp.", 5) && strncmp(e->d_name + bl, ".old.", 5)))
            continue;
        snprintf(p, sizeof p, "%s%s%s", slash ? (parent[0] ? parent : "") : "", slash ? "/" : "",
                 e->d_name);
        sim_remove_tree(p);
    }
    closedir(d);
}

kvf_status sim_outdir_begin(sim_outdir *d, const char *dir, bool force, kvf_err *err) {
    memset(d, 0, sizeof *d);
    d->lock_fd = -1;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (n == 0 || n >= sizeof d->final - 1)
        return kvf_fail(err, KVF_EINVAL, "-o '%s': not a usable directory name", dir);
    snprintf(d->final, sizeof d->final, "%.*s", (int)n, dir);
    const char *base = strrchr(d->final, '/');
    base = base ? base + 1 : d->final;
    if (!strcmp(base, ".") || !strcmp(base, "..") || !strcmp(d->final, "/"))
        return kvf_fail(err, KVF_EINVAL, "-o '%s': name a result directory, not '%s'", dir, base);
    char parent[SIM_PATH_MAX];
    snprintf(parent, sizeof parent, "%s", d->final);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        kvf_status st = kvf_mkdirs(parent, err);
        if (st) return st;
    }
    snprintf(d->lock, sizeof d->lock, "%s.lock", d->final);
    kvf_status st = sim_lock_file(d->lock, &d->lock_fd, err);
    if (st) return st;
    struct stat sb;
    if (stat(d->final, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) {
            sim_outdir_abort(d);
            return kvf_fail(err, KVF_EINVAL, "-o %s: exists and is not a directory", d->final);
        }
        if (!force && !dir_is_empty(d->final)) {
            sim_outdir_abort(d);
            return kvf_fail(err, KVF_EINVAL,
                            "-o %s: holds an earlier result, kept; give --force to replace it "
                            "or choose another directory", d->final);
        }
    }
    remove_leftovers(d->final);
    snprintf(d->tmp, sizeof d->tmp, "%s.tmp.%d", d->final, (int)getpid());
    if (mkdir(d->tmp, 0755) != 0) {
        kvf_fail(err, KVF_EIO, "%s: cannot create: %s", d->tmp, strerror(errno));
        d->tmp[0] = '\0';
        sim_outdir_abort(d);
        return KVF_EIO;
    }
    return KVF_OK;
}

static void release_lock(sim_outdir *d) {
    if (d->lock_fd < 0) return;
    unlink(d->lock);   // before the close: a waiter re-checks the inode (sim_lock_file)
    close(d->lock_fd);
    d->lock_fd = -1;
}

void sim_outdir_abort(sim_outdir *d) {
    if (d->tmp[0]) sim_remove_tree(d->tmp);
    d->tmp[0] = '\0';
    release_lock(d);
}

kvf_status sim_outdir_commit(sim_outdir *d, kvf_err *err) {
    char old[SIM_PATH_MAX + 32];
    snprintf(old, sizeof old, "%s.old.%d", d->final, (int)getpid());
    struct stat sb;
    bool had = stat(d->final, &sb) == 0;
    if (had && rename(d->final, old) != 0) {
        kvf_status st = kvf_fail(err, KVF_EIO, "%s: cannot move the earlier result aside: %s",
                                 d->final, strerror(errno));
        sim_outdir_abort(d);
        return st;
    }
    if (rename(d->tmp, d->final) != 0) {
        kvf_status st = kvf_fail(err, KVF_EIO, "%s: cannot rename to %s: %s", d->tmp, d->final,
                                 strerror(errno));
        if (had) rename(old, d->final);
        sim_outdir_abort(d);
        return st;
    }
    d->tmp[0] = '\0';
    if (had) sim_remove_tree(old);
    release_lock(d);
    return KVF_OK;
}

// ---- command line ----------------------------------------------------------------------------
static volatile int g_interrupt;

static void on_signal(int sig) {
    (void)sig;
    g_interrupt = 1;
}

static double jget(json_t *s, const char *a, const char *b) {
    json_t *o = json_object_get(s, a);
    if (b) o = json_object_get(o, b);
    return json_is_number(o) ? json_number_value(o) : NAN;
}

static void print_headline(json_t *s, const char *out_dir, bool report) {
    json_t *rq = json_object_get(s, "requests");
    printf("scenario %s  (%s on %s, %s, %s step model)\n", json_string_value(json_object_get(s, "scenario")),
           json_string_value(json_object_get(s, "model")), json_string_value(json_object_get(s, "hardware")),
           json_string_value(json_object_get(s, "mode")), json_string_value(json_object_get(s, "step_model")));
    printf("  requests     %lld arrived, %lld completed, %lld rejected over %.1f simulated s\n",
           (long long)json_integer_value(json_object_get(rq, "arrived")),
           (long long)json_integer_value(json_object_get(rq, "completed")),
           (long long)json_integer_value(json_object_get(rq, "rejected")), jget(s, "sim", "simulated_s"));
    printf("  TTFT ms      mean %.1f  p50 %.1f  p90 %.1f  p99 %.1f\n", jget(s, "ttft_ms", "mean"),
           jget(s, "ttft_ms", "p50"), jget(s, "ttft_ms", "p90"), jget(s, "ttft_ms", "p99"));
    printf("  TPOT ms      mean %.2f  p50 %.2f  p90 %.2f  p99 %.2f\n", jget(s, "tpot_ms", "mean"),
           jget(s, "tpot_ms", "p50"), jget(s, "tpot_ms", "p90"), jget(s, "tpot_ms", "p99"));
    printf("  throughput   %.0f input tok/s, %.0f output tok/s; per GPU: prefill %.0f in tok/s, "
           "decode %.0f out tok/s\n",
           jget(s, "throughput", "input_tok_s"), jget(s, "throughput", "output_tok_s"),
           jget(s, "throughput", "prefill_input_tok_s_per_gpu"),
           jget(s, "throughput", "decode_output_tok_s_per_gpu"));
    json_t *bt = json_object_get(json_object_get(s, "cache"), "by_tier");
    printf("  cache        hit rate %.1f %% (hbm %.1f, dram %.1f, ssd %.1f)\n",
           100 * jget(s, "cache", "hit_rate"), 100 * json_number_value(json_object_get(bt, "hbm")),
           100 * json_number_value(json_object_get(bt, "dram")),
           100 * json_number_value(json_object_get(bt, "ssd")));
    long long vis = (long long)json_integer_value(json_object_get(json_object_get(s, "gpus"), "vision"));
    char vgpus[48] = "", vutil[48] = "";
    if (vis > 0) {
        snprintf(vgpus, sizeof vgpus, "vision %lld, ", vis);
        snprintf(vutil, sizeof vutil, "vision %.0f %%, ", 100 * jget(s, "utilization", "vision"));
    }
    printf("  GPUs         %sprefill %lld, decode %lld; %.1f GPU-hours; utilisation %sprefill %.0f %%, decode %.0f %%\n",
           vgpus, (long long)json_integer_value(json_object_get(json_object_get(s, "gpus"), "prefill")),
           (long long)json_integer_value(json_object_get(json_object_get(s, "gpus"), "decode")),
           jget(s, "gpu_hours", NULL), vutil, 100 * jget(s, "utilization", "prefill"),
           100 * jget(s, "utilization", "decode"));
    printf("  SLO          attainment %.1f %% (TTFT p90 <= %.0f ms, TPOT p90 <= %.0f ms)\n",
           100 * jget(s, "slo", "attainment"), jget(s, "slo", "ttft_p90_ms"), jget(s, "slo", "tpot_p90_ms"));
    json_t *e = json_object_get(s, "economics");
    if (json_is_object(e))
        printf("  economics    cost $%.2f, revenue $%.2f, margin %.1f %%, $%.2f per GPU-hour\n",
               jget(e, "cost_usd", NULL), jget(e, "revenue_usd", NULL), 100 * jget(e, "margin", NULL),
               jget(e, "cost_per_gpu_hour_usd", NULL));
    printf("  saturation   %s\n", json_string_value(json_object_get(json_object_get(s, "saturation"), "state")));
    if (json_is_true(json_object_get(json_object_get(s, "steps"), "extrapolated")))
        printf("  note         the calibrated step model extrapolated outside its profile in %lld steps\n",
               (long long)json_integer_value(json_object_get(json_object_get(s, "steps"), "extrapolated_steps")));
    printf("  simulator    %.0f events in %.2f s wall (%.2f M events/s)\n", jget(s, "sim", "events"),
           jget(s, "sim", "wall_s"), jget(s, "sim", "events_per_s") / 1e6);
    if (out_dir)
        printf("results in %s/ (summary.json, results.db%s)\n", out_dir, report ? ", report.html" : "");
}

// "FROM:TO" in seconds, both finite, 0 <= FROM < TO.
static bool parse_window(const char *s, double *from, double *to) {
    char *end;
    errno = 0;
    double a = strtod(s, &end);
    if (end == s || *end != ':' || errno) return false;
    const char *b0 = end + 1;
    double b = strtod(b0, &end);
    if (end == b0 || *end || errno) return false;
    if (!isfinite(a) || !isfinite(b) || a < 0 || b <= a || b > 9e9) return false;
    *from = a;
    *to = b;
    return true;
}

// Options of `run` that take a value (a missing one is named as missing, not as unknown).
static const char RUN_VALUED[] = "-o --set --trace --seed --engine --trace-out --trace-window "
                                 "--step-phase --step-seqs --step-context --step-prompt --step-chunks";

static int usage_run(FILE *f, int rc) {
    fprintf(f,
            "usage: kvfleet run SCENARIO [-o DIR] [--set K=V]... [--trace FILE] [--seed N]\n"
            "                   [--json] [--quiet] [--no-report] [--force] [--engine cpu|cuda]\n"
            "                   [--trace-out FILE [--trace-window FROM_S:TO_S]]\n"
            "       kvfleet run SCENARIO --explain-step [--step-phase decode|prefill]\n"
            "                   [--step-seqs N_PER_GPU] [--step-context C] [--step-prompt T]\n"
            "                   [--step-chunks N_PER_GPU]\n"
            "                   [--set K=V]...\n"
            "  -q, --quiet     print nothing but errors (no progress, no summary, no JSON)\n"
            "  --no-report     write summary.json and results.db only, no report.html\n"
            "  --json          print summary.json on stdout instead of the summary lines\n"
            "  --trace-out F   write a Chrome/Perfetto trace (steps, KV transfers, storage I/O,\n"
            "                  queue depth per instance) of the --trace-window span\n");
    return rc;
}

int sim_cli_run(int argc, char **argv) {
    const char *scenario = NULL, *out = NULL, *trace = NULL, *seed = NULL, *engine = NULL;
    const char *timeline = NULL, *window = NULL;
    bool json_out = false, quiet = false, report = true, explain = false, force = false;
    const char *step_phase = "decode";
    double step_seqs = 0, step_ctx = 0, step_prompt = 0, step_chunks = 0;
    const char *sets[256];
    int nsets = 0;
    if (kvf_cli_help(argc, argv)) return usage_run(stdout, 0);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool more = i + 1 < argc;
        if (kvf_cli_missing_value(a, !more, RUN_VALUED)) {
            fprintf(stderr, "kvfleet run: option '%s' needs a value\n", a);
            return usage_run(stderr, 2);
        }
        if (!strcmp(a, "-o") && more) out = argv[++i];
        else if (!strcmp(a, "--set") && more && nsets < 256) sets[nsets++] = argv[++i];
        else if (!strcmp(a, "--trace") && more) trace = argv[++i];
        else if (!strcmp(a, "--seed") && more) seed = argv[++i];
        else if (!strcmp(a, "--engine") && more) engine = argv[++i];
        else if (!strcmp(a, "--trace-out") && more) timeline = argv[++i];
        else if (!strcmp(a, "--trace-window") && more) window = argv[++i];
        else if (!strcmp(a, "--json")) json_out = true;
        else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) quiet = true;
        else if (!strcmp(a, "--no-report")) report = false;
        else if (!strcmp(a, "--force")) force = true;
        else if (!strcmp(a, "--explain-step")) explain = true;
        else if (!strcmp(a, "--step-phase") && more) step_phase = argv[++i];
        else if ((!strcmp(a, "--step-seqs") || !strcmp(a, "--step-context") ||
                  !strcmp(a, "--step-prompt") || !strcmp(a, "--step-chunks")) && more) {
            char *end;
            double v = strtod(argv[++i], &end);
            if (*end || !(v > 0) || v > 1e9) {
                fprintf(stderr, "kvfleet run: %s wants a number in (0, 1e9], not '%s'\n", a, argv[i]);
                return 2;
            }
            if (!strcmp(a, "--step-seqs")) step_seqs = v;
            else if (!strcmp(a, "--step-context")) step_ctx = v;
            else if (!strcmp(a, "--step-chunks")) step_chunks = v;
            else step_prompt = v;
        }
        else if (a[0] == '-' ) {
            fprintf(stderr, "kvfleet run: unknown option '%s'\n", a);
            return usage_run(stderr, 2);
        } else if (!scenario) scenario = a;
        else {
            fprintf(stderr, "kvfleet run: unexpected argument '%s'\n", a);
            return usage_run(stderr, 2);
        }
    }
    if (!scenario) return usage_run(stderr, 2);
    static sim_config cfg;
    kvf_err err = {0};
    sim_config_default(&cfg);
    kvf_status st = sim_config_load(&cfg, scenario, &err);
    for (int i = 0; !st && i < nsets; i++) st = sim_config_set(&cfg, sets[i], &err);
    if (!st && trace) {
        char a[SIM_PATH_MAX + 32];
        snprintf(a, sizeof a, "workload.trace=%s", trace);
        st = sim_config_set(&cfg, a, &err);
    }
    if (!st && seed) {
        char a[64];
        snprintf(a, sizeof a, "seed=%s", seed);
        st = sim_config_set(&cfg, a, &err);
    }
    if (!st) st = sim_config_validate(&cfg, &err);
    if (st) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(st);
    }
    if (explain)
        return sim_explain_step(&cfg, step_phase, step_seqs, step_ctx, step_prompt, step_chunks);
    if (engine && strcmp(engine, "cpu") && strcmp(engine, "cuda")) {
        fprintf(stderr, "kvfleet run: --engine must be cpu or cuda, not '%s'\n", engine);
        return 2;
    }
    char outbuf[SIM_PATH_MAX];
    if (!out) {
        snprintf(outbuf, sizeof outbuf, "out/%s", cfg.name[0] ? cfg.name : "run");
        out = outbuf;
    }
    sim_run_opts o = {.out_dir = out, .quiet = quiet || json_out, .write_db = true,
                      .engine_backend = engine, .timeline_path = timeline, .interrupt = &g_interrupt};
    if (window && !parse_window(window, &o.timeline_from_s, &o.timeline_to_s)) {
        fprintf(stderr,
                "kvfleet run: --trace-window wants FROM_S:TO_S with 0 <= FROM_S < TO_S "
                "(seconds), not '%s'\n", window);
        return 2;
    }
    if (window && !timeline) {
        fprintf(stderr, "kvfleet run: --trace-window needs --trace-out FILE\n");
        return 2;
    }
    sim_outdir od;
    st = sim_outdir_begin(&od, out, force, &err);
    if (st) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(st);
    }
    o.out_dir = od.tmp;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    void *sj = NULL;
    st = sim_run(&cfg, &o, &sj, &err);
    json_t *s = sj;
    if (st && st != KVF_EINTR) {
        sim_outdir_abort(&od);
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(st);
    }
    if (report && st == KVF_OK) {
        kvf_err e2 = {0};
        if (rpt_report_write(od.tmp, true, true, &e2)) {
            sim_outdir_abort(&od);
            json_decref(s);
            fprintf(stderr, "kvfleet: report not written: %s; nothing written to %s\n", e2.msg,
                    od.final);
            return 1;
        }
    }
    kvf_status cst = sim_outdir_commit(&od, &err);
    if (cst) {
        json_decref(s);
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(cst);
    }
    if (json_out && !quiet) {
        char *txt = json_dumps(s, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        printf("%s\n", txt);
        free(txt);
    } else if (!quiet) {
        print_headline(s, out, report);
    }
    json_decref(s);
    if (st == KVF_EINTR) {
        fprintf(stderr, "kvfleet: interrupted; partial results in %s\n", out);
        return 1;
    }
    return 0;
}
