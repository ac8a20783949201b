// sim/cluster/sim_cluster.c -- building the cluster (model, hardware, pools, instances, tiers,
// links, routers), the time-of-day schedule, the event loop and teardown.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cluster.h"
#include "sim_run.h"
#include "sim_sample.h"
#include "sim_trace.h"

static void on_schedule(sim_cluster *c, uint32_t e) {
    const sim_schedule_entry *s = &c->cfg->cluster.schedule[e];
    sim_pool_gpu_account(c);
    int32_t want[SIM_POOLS] = {-1, s->prefill, s->decode};
    for (int k = SIM_POOL_PREFILL; k < SIM_POOLS; k++) {
        sim_pool *p = &c->pool[k];
        if (want[k] < 0 || !p->n) continue;
        uint32_t w = (uint32_t)KVF_MIN((uint32_t)want[k], p->n);
        if (w < 1) w = 1;
        p->n_active = w;
        for (uint32_t i = 0; i < p->n; i++) {
            c->inst[p->first + i].active = i < w;
            sim_router_touch(c, &c->inst[p->first + i]);
            sim_inst_drain_check(c, &c->inst[p->first + i]);
        }
    }
}

// Parallelism of one instance of the pool (sim_pool_parallel).
static mdl_parallel pool_parallel(const sim_cluster *c, const sim_pool_cfg *pc) {
    return sim_pool_parallel(c->cfg, &c->model, pc);
}

// Each class's per-request bounds: its own (the highest percentile given per metric), else the
// scenario-wide slo.ttft_p90_ms / slo.tpot_p90_ms.
static void slo_resolve(sim_cluster *c) {
    const sim_slo_cfg *s = &c->cfg->slo;
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        bool own = false;
        for (int m = 0; m < SIM_SLO_METRICS; m++) {
            c->slo_req_ms[k][m] = NAN;
            for (int q = 0; q < SIM_SLO_STATS; q++)
                if (s->cls_ms[k][m][q] > 0) c->slo_req_ms[k][m] = s->cls_ms[k][m][q], own = true;
        }
        if (own) {
            c->slo_by_class = true;
            continue;
        }
        c->slo_req_ms[k][SIM_SLO_TTFT] = s->ttft_p90_ms;
        c->slo_req_ms[k][SIM_SLO_TPOT] = s->tpot_p90_ms;
    }
}

static kvf_status make_stepper(sim_cluster *c, sim_pool *p, kvf_err *err) {
    mdl_parallel par = pool_parallel(c, p->cfg);
    c->ep_skew_base = par.ep_skew;
    return sim_make_stepper(c->cfg, &p->model, &p->hw, &par, c->opts, &p->stepper, err);
}

// speculative.method resolved against the model: DSpark needs the model's dspark_* keys and
// takes its block from them (speculative.draft_tokens 0); draft needs draft tokens; none none.
static kvf_status resolve_spec(sim_cluster *c, const sim_config *cfg, kvf_err *err) {
    const sim_decoding_cfg *d = &cfg->decoding;
    bool has = c->model.dspark_layers > 0;
    sim_spec_method mth = d->spec_method;
    if (mth == SIM_SPEC_AUTO) mth = has && d->draft_tokens == 0 ? SIM_SPEC_DSPARK : SIM_SPEC_DRAFT;
    char where[SIM_PATH_MAX + 128];
    sim_config_where(cfg, "speculative.method", where, sizeof where);
    c->spec_seq_tokens = 1 + d->draft_tokens;
    if (mth == SIM_SPEC_DSPARK) {
        if (!has)
            return kvf_fail(err, KVF_EINVAL,
                            "%s: speculative.method dspark: model %s has no DSpark "
                            "stack (dspark_* keys in its model file)",
                            where, c->model.name);
        if (d->draft_tokens)
            return kvf_fail(err, KVF_EINVAL,
                            "%s: speculative.method dspark takes its block from the "
                            "model file; speculative.draft_tokens must be 0, not %u",
                            where, d->draft_tokens);
        kvf_status st = mdl_spec_from_model(&c->spec, &c->model, err);
        if (st) return st;
        c->dspark = true;
        c->spec_seq_tokens = c->spec.block;
    } else if (mth == SIM_SPEC_NONE && d->draft_tokens) {
        return kvf_fail(err, KVF_EINVAL,
                        "%s: speculative.method none with speculative.draft_tokens "
                        "%u",
                        where, d->draft_tokens);
    } else if (d->spec_method == SIM_SPEC_DRAFT && !d->draft_tokens) {
        return kvf_fail(err, KVF_EINVAL,
                        "%s: speculative.method draft needs "
                        "speculative.draft_tokens > 0",
                        where);
    }
    return KVF_OK;
}

// Bytes of one stored token (window models with bounded replay store only the global KV).
static double stored_tok(const sim_cluster *c) {
    return c->swa_replay ? c->model.kv_bytes_per_token_full : c->model.kv_bytes_per_token;
}

// The model and hardware files, precision over the model's, speculative decoding and the
// window/replay settings that follow from them.
static kvf_status load_model(sim_cluster *c, const sim_config *cfg, char *dir, size_t dn,
                             kvf_err *err) {
    char path[SIM_PATH_MAX];
    sim_config_resolve(cfg, "models", dir, dn);
    sim_config_model_path(cfg, path, sizeof path);
    kvf_status st = mdl_model_load(&c->model, path, dir, err);
    if (st) return st;
    sim_config_hardware_path(cfg, path, sizeof path);
    st = mdl_hardware_load(&c->hw, path, dir, err);
    if (st) return st;
    const sim_precision_cfg *pr = &cfg->precision;   // precision.*: over the model file's
    if (pr->weights || pr->kv || pr->activations)
        mdl_model_apply_precision(&c->model, pr->weights, pr->kv, pr->activations);
    // encoder-decoder models replay the last kv_cache.swa_replay_tokens of a chunk through their
    // decoder layers (0: the whole chunk)
    if (c->model.decoder_replay_tokens) c->model.decoder_replay_tokens = cfg->kv.swa_replay_tokens;
    if ((st = resolve_spec(c, cfg, err))) return st;
    c->swa_replay =
        c->model.window > 0 && c->model.window_layers > 0 && cfg->kv.swa_replay_tokens > 0;
    // a sequence's SWA state (every window layer's window, compressor state): fixed per sequence
    c->swa_seq_bytes = c->model.window && c->model.window_layers
                           ? mdl_model_swa_bytes_seq(&c->model, c->model.window)
                           : 0;
    c->block_bytes = stored_tok(c) * cfg->kv.block_tokens;
    c->kv_bytes_token = c->model.kv_bytes_per_token;
    return KVF_OK;
}

// KV capacity of one instance of pool p, in tokens of global KV (*cap_tok_bytes bytes each).
// KVF_EINVAL naming the pool's gpus_per_instance when the model leaves no room for KV.
static kvf_status pool_kv_capacity(sim_cluster *c, sim_pool *p, int k, double *kvcap_out,
                                   double *cap_tok_bytes_out, kvf_err *err) {
    const sim_config *cfg = c->cfg;
    mdl_parallel par = pool_parallel(c, p->cfg);
    double kvcap = mdl_kv_capacity_tokens(&p->model, &p->hw, &par, cfg->kv.activation_reserve);
    // sliding-window layers hold only their window per sequence, not the whole context:
    // count capacity in full-layer (global KV) tokens, after reserving the fixed SWA state
    // of as many sequences as the pool batches (cluster.<pool>.max_batch_requests), at most
    // half of the KV memory (an engine sizes its window pool to what the memory holds)
    double cap_tok_bytes = c->model.kv_bytes_per_token;   // bytes one token of kvcap holds
    if (c->model.window && c->model.window_layers && c->model.kv_bytes_per_token_full > 0) {
        kvcap *= c->model.kv_bytes_per_token / c->model.kv_bytes_per_token_full;
        cap_tok_bytes = c->model.kv_bytes_per_token_full;
        if (p->cfg->max_batch_requests > 0 && kvcap > 0)
            kvcap -=
                KVF_MIN(p->cfg->max_batch_requests * c->swa_seq_bytes / cap_tok_bytes, kvcap / 2);
    }
    if (p->cfg->kv_tokens > 0) kvcap = (double)p->cfg->kv_tokens;
    if (p->n && k != SIM_POOL_VISION && kvcap < 1) {
        char key[64], where[SIM_PATH_MAX + 128];
        snprintf(key, sizeof key, "cluster.%s.gpus_per_instance",
                 k == SIM_POOL_PREFILL ? "prefill" : "decode");
        sim_config_where(cfg, key, where, sizeof where);
        return kvf_fail(err, KVF_EINVAL,
                        "%s: model %s (%.1f GB of weights, key 'model') does not fit %d x %s "
                        "GPU(s) (key 'hardware') with room for KV; give more GPUs per "
                        "instance",
                        where, c->model.name, c->model.weight_bytes / 1e9,
                        p->cfg->gpus_per_instance, p->hw.name);
    }
    *kvcap_out = kvcap;
    *cap_tok_bytes_out = cap_tok_bytes;
    return KVF_OK;
}

// Instance i of pool p (cluster id `id`): its table, queue policy, KV capacity, decode path,
// RNG stream, prefix-cache tiers and links.
static void init_instance(sim_cluster *c, sim_pool *p, int k, uint32_t i, uint32_t id, double kvcap,
                          double cap_tok_bytes) {
    const sim_config *cfg = c->cfg;
    const sim_run_opts *o = c->opts;
    sim_inst *in = &c->inst[id];
    in->id = id;
    in->pool = (sim_pool_kind)k;
    in->ops = k == SIM_POOL_VISION   ? &sim_pool_vision_ops
              : k == SIM_POOL_DECODE ? &sim_pool_decode_ops
              : c->colocated         ? &sim_pool_colocated_ops
                                     : &sim_pool_prefill_ops;
    in->idx = i;
    in->active = !p->scaler || i < p->scaler->initial(c, p);
    // colocated: the instances counted under cluster.decode keep its queue policy and KV
    in->pcfg =
        c->colocated && k == SIM_POOL_PREFILL && i >= (uint32_t)cfg->cluster.prefill.instances
            ? &cfg->cluster.decode
            : p->cfg;
    in->kv_cap = in->pcfg->kv_tokens > 0 ? (double)in->pcfg->kv_tokens : kvcap;
    // decode by running sums where the step model takes them and every sequence
    // emits one token per step
    in->dsum_on = (k == SIM_POOL_DECODE || (c->colocated && k == SIM_POOL_PREFILL)) && p->stepper &&
                  p->stepper->vt->decode_sums && cfg->decoding.draft_tokens == 0 && !c->dspark &&
                  cfg->serving.client_timeout_ns <= 0 &&   // aborts visit every sequence
                  !(p->cfg->failures.mtbf_ns > 0) &&       // and so do failures
                  !(o && o->decode_listed);
    if (in->dsum_on) {
        mdl_model_caps(&c->model, in->ds.caps);
        for (int j = 0; j < MDL_CAPS; j++)
            if (in->ds.caps[j]) in->ds.cap_at[in->ds.ncaps++] = (uint8_t)j;
    }
    // runs of steps (a decode router balancing KV reads a run's ended steps: sim_inst_kv_used)
    in->runs_on = in->dsum_on && !(o && o->decode_single) && !(o && o->timeline_path) &&
                  !(cfg->moe.skew_sd > 0 && c->model.experts);
    in->run_hint = SIM_RUN_MIN;
    kvf_rng_init(&in->rng, cfg->seed, 0x1000u + id);
    in->link_dram = in->link_ssd = in->link_xfer = in->link_ssd_write = SIM_NONE;
    uint64_t hbm_blocks = 0, dram_blocks = 0;
    if (k == SIM_POOL_PREFILL && cfg->kv.prefix_cache) {
        c->hbm_blocks_per_token = (cap_tok_bytes / stored_tok(c)) / cfg->kv.block_tokens;
        hbm_blocks = (uint64_t)(kvcap * cfg->kv.hbm_cache_frac * c->hbm_blocks_per_token);
        if (cfg->serving.prefix_cache == SIM_PREFIX_FREE_BLOCKS) {
            // the cache is the free KV blocks: tables for all of them, the capacity
            // following what running requests leave (sim_tier_fit_free)
            hbm_blocks = (uint64_t)(in->kv_cap * c->hbm_blocks_per_token);
            in->hbm_blocks_max = hbm_blocks;
        }
        if (cfg->kv.dram.capacity_bytes < 0)
            dram_blocks = UINT64_MAX;
        else
            dram_blocks = (uint64_t)(cfg->kv.dram.capacity_bytes / c->block_bytes);
        in->link_dram = sim_link_new(c, cfg->kv.dram.read_Bps, (sim_time)cfg->kv.dram.latency_ns,
                                     id, SIM_LINK_DRAM);
        if (cfg->kv.ssd.capacity_bytes != 0) {
            in->link_ssd = c->link_store != SIM_NONE
                               ? c->link_store
                               : sim_link_new(c, cfg->kv.ssd.read_Bps,
                                              (sim_time)cfg->kv.ssd.latency_ns, id, SIM_LINK_SSD);
            in->link_ssd_write = sim_link_new(c, cfg->kv.ssd.write_Bps, 0, id, SIM_LINK_SSDW);
        }
    }
    // a prefill instance sends every prompt's KV to decode over the network, whether or not it
    // keeps a prefix cache
    if (k == SIM_POOL_PREFILL && !c->colocated)
        in->link_xfer = sim_link_new(c, cfg->cluster.kv_transfer_Bps,
                                     (sim_time)cfg->cluster.net_latency_ns, id, SIM_LINK_XFER);
    sim_bcache_init(&in->hbm, hbm_blocks, cfg->kv.retention_ns);
    sim_bcache_init(&in->dram, dram_blocks, cfg->kv.retention_ns);
}

kvf_status sim_cluster_init(sim_cluster *c, const sim_config *cfg, const sim_run_opts *o,
                            kvf_err *err) {
    memset(c, 0, sizeof *c);
    c->cfg = cfg;
    c->opts = o;
    c->err = err;
    c->free_req = SIM_NONE;
    c->colocated = cfg->cluster.mode == SIM_COLOCATED;
    kvf_rng_init_named(&c->rng_route, cfg->seed, "router.p2c");
    kvf_rng_init_named(&c->rng_structured, cfg->seed, "workload.structured");
    kvf_rng_init_named(&c->rng_skew, cfg->seed, "ep.skew");
    sim_metrics_init(&c->m);
    slo_resolve(c);
    rpt_econ_input_init(&c->econ_in);
    rpt_econ_input_init(&c->econ_st);
    for (int k = 0; k < TRC_CLASS_COUNT; k++)
        c->econ_slot[k] = -1;
    char path[SIM_PATH_MAX], dir[SIM_PATH_MAX];
    kvf_status st = load_model(c, cfg, dir, sizeof dir, err);
    if (st) return st;
    // The SSD store as one shared thing: its own read bandwidth (and block IOPS) shared by every
    // instance's loads, each load no faster than its instance's path (kv_cache.ssd.read_GBps).
    c->link_store = SIM_NONE;
    const sim_tier_cfg *ssd = &cfg->kv.ssd;
    if (cfg->kv.prefix_cache && ssd->capacity_bytes != 0 &&
        (ssd->store_read_Bps > 0 || ssd->store_iops > 0)) {
        double bw = ssd->store_read_Bps > 0 ? ssd->store_read_Bps : INFINITY;
        if (ssd->store_iops > 0) bw = KVF_MIN(bw, ssd->store_iops * c->block_bytes);
        c->link_store = sim_link_new(c, bw, (sim_time)ssd->latency_ns, 0, SIM_LINK_SSD);
        c->links[c->link_store].link.flow_cap_Bps = ssd->read_Bps;
    }
    // pools: colocated folds prefill + decode instances into one pool (same GPU count)
    const sim_pool_cfg *pcfg[SIM_POOLS] = {&cfg->cluster.vision, &cfg->cluster.prefill,
                                           &cfg->cluster.decode};
    uint32_t counts[SIM_POOLS] = {(uint32_t)cfg->cluster.vision.instances,
                                  (uint32_t)cfg->cluster.prefill.instances,
                                  (uint32_t)cfg->cluster.decode.instances};
    if (c->colocated) {
        counts[SIM_POOL_PREFILL] += counts[SIM_POOL_DECODE];
        counts[SIM_POOL_DECODE] = 0;
    }
    c->n_inst = counts[0] + counts[1] + counts[2];
    c->inst = kvf_calloc(c->n_inst ? c->n_inst : 1, sizeof *c->inst);
    uint32_t id = 0;
    for (int k = 0; k < SIM_POOLS; k++) {
        sim_pool *p = &c->pool[k];
        p->kind = (sim_pool_kind)k;
        p->cfg = pcfg[k];
        p->first = id;
        p->n = p->n_active = counts[k];
        p->scaler =
            p->cfg->autoscale.metric != SIM_SCALE_NONE && p->n ? &sim_pool_autoscaler : NULL;
        // the pool's own GPUs and precision (cluster.<pool>.hardware, .precision.*)
        p->model = c->model;
        if (p->cfg->prec_weights || p->cfg->prec_activations)
            mdl_model_apply_precision(&p->model, p->cfg->prec_weights, MDL_PREC_AUTO,
                                      p->cfg->prec_activations);
        if (p->cfg->hardware[0]) {
            sim_config_pool_hardware_path(cfg, p->cfg, path, sizeof path);
            if ((st = mdl_hardware_load(&p->hw, path, dir, err))) return st;
        } else {
            p->hw = c->hw;
        }
        if (p->n) {
            st = make_stepper(c, p, err);
            if (st) return st;
        }
        double kvcap = 0, cap_tok_bytes = 0;
        if ((st = pool_kv_capacity(c, p, k, &kvcap, &cap_tok_bytes, err))) return st;
        for (uint32_t i = 0; i < p->n; i++, id++)
            init_instance(c, p, k, i, id, kvcap, cap_tok_bytes);
    }
    uint64_t ssd_blocks = 0;
    if (cfg->kv.prefix_cache && cfg->kv.ssd.capacity_bytes < 0)
        ssd_blocks = UINT64_MAX;
    else if (cfg->kv.prefix_cache && cfg->kv.ssd.capacity_bytes > 0)
        ssd_blocks = (uint64_t)(cfg->kv.ssd.capacity_bytes / c->block_bytes);
    sim_bcache_init(&c->ssd, ssd_blocks, cfg->kv.retention_ns);
    for (int k = 0; k < SIM_POOLS; k++) {   // load-driven pools start at their minimum
        sim_pool *p = &c->pool[k];
        if (!p->scaler) continue;
        p->n_active = p->scaler->initial(c, p);
        p->active_min = p->active_max = p->n_active;
    }
    sim_router_init(c, &c->pool[SIM_POOL_PREFILL], true);
    sim_router_init(c, &c->pool[SIM_POOL_DECODE], false);
    c->q = sim_queue_create(1024);
    sim_queue_slots(c->q, c->n_inst ? c->n_inst : 1);   // each instance's step end
    if (o && o->timeline_path) {
        static const char *pools[SIM_POOLS] = {"vision", "prefill", "decode"};
        const char *names[SIM_POOLS] = {pools[0], c->colocated ? "colocated" : pools[1], pools[2]};
        kvf_status tst = sim_trace_open(&c->timeline, o->timeline_path, o->timeline_from_s,
                                        o->timeline_to_s, names, SIM_POOLS, err);
        if (tst) return tst;
    }
    return KVF_OK;
}

kvf_status sim_cluster_open_trace(sim_cluster *c, trc_reader *rd) {
    c->reader = rd;
    trc_format f = trc_reader_format(rd);
    c->closed_loop = f == TRC_FMT_SESSIONS || f == TRC_FMT_KVFLEET;
    // Block ids are read by the prefix cache and the tiers under it, by a finished answer
    // persisted to the store (closed-loop sessions) and by the sampler's session keys: a run
    // with none of these takes requests without them (the same run: test_sim checks it).
    bool persist = c->cfg->kv.persist_decode && c->closed_loop && c->ssd.capacity;
    if (!c->cfg->kv.prefix_cache && !persist && !c->sampler && !(c->opts && c->opts->keep_blocks))
        trc_reader_drop_blocks(rd);
    sim_read_trace(c);
    return c->status;
}

// ---- the events and their handlers -------------------------------------------------------
// One handler per event kind, in a table (no switch in the loop): a new kind is an enum entry
// in sim_cluster.h and a line here.
static void ev_arrival_read(sim_cluster *c, const sim_event *ev) {
    // the next request is read first: one due at this same instant is then pending, and the
    // step this arrival may start waits for it (sim_inst_kick)
    sim_read_trace(c);
    sim_on_arrival(c, (uint32_t)ev->arg[0]);
}

static void ev_arrival(sim_cluster *c, const sim_event *ev) {
    sim_on_arrival(c, (uint32_t)ev->arg[0]);
}

static void ev_step_done(sim_cluster *c, const sim_event *ev) {
    sim_inst_step_done(c, &c->inst[ev->dst]);
}

static void ev_kick(sim_cluster *c, const sim_event *ev) {
    sim_inst_kicked(c, &c->inst[ev->dst]);
}

static void ev_link(sim_cluster *c, const sim_event *ev) {
    sim_on_link(c, (uint32_t)ev->arg[0]);
}

// A swapped-out request is back in HBM: it waits for admission again (its queue time runs
// from the preemption).
static void ev_swapin(sim_cluster *c, const sim_event *ev) {
    sim_req *r = sim_req_at(c, (uint32_t)ev->arg[0]);
    if (r->state != SIM_RS_SWAPPED || r->gen != (uint32_t)ev->arg[1])
        return;   // a failure ended it
    sim_inst *in = &c->inst[r->dinst];
    sim_req_set_state(r, SIM_RS_DECODE_WAIT);
    sim_rheap_push(&in->dwait, sim_queue_key(c, in->pcfg, r), (uint32_t)ev->arg[0]);
    sim_inst_kick(c, in);
}

static void ev_sample(sim_cluster *c, const sim_event *ev) {
    (void)ev;
    double interval = c->sample_interval_s;
    sim_on_sample(c, interval, false);
    c->last_sample_ns = c->now;
    for (int k = 0; k < SIM_POOLS; k++)
        if (c->pool[k].scaler) c->pool[k].scaler->tick(c, &c->pool[k], interval);
    // Work bounded by events, not simulated time: across an idle gap (no request between
    // arrival and end, e.g. before an outlier timestamp) the samples would all read zero, so
    // the next one goes to the last interval boundary before the next event.
    // (with nothing in flight no run of decode steps is, so no early event is what is peeked)
    sim_time step = (sim_time)(interval * 1e9), next = c->now + step, t_ev;
    if (c->arrived == c->completed + c->rejected && sim_queue_peek_time(c->q, &t_ev) && t_ev > next)
        next += (t_ev - next) / step * step;
    sim_ev_push(c, next, SIM_EV_SAMPLE, 0, 0, NULL);
}

static void ev_schedule(sim_cluster *c, const sim_event *ev) {
    on_schedule(c, (uint32_t)ev->arg[0]);
    sim_ev_push(c, c->now + 86400 * KVF_NS_PER_S, SIM_EV_SCHEDULE, 0, ev->arg[0], NULL);
}

static void ev_frontend(sim_cluster *c, const sim_event *ev) {
    sim_req_enter(c, (uint32_t)ev->arg[0]);
}

static void ev_scaled(sim_cluster *c, const sim_event *ev) {
    sim_pool *p = &c->pool[ev->arg[0]];
    KVF_ASSERT(p->scaler);
    p->scaler->started(c, p);
}

static void ev_fail(sim_cluster *c, const sim_event *ev) {
    sim_failures_fail(c, &c->inst[ev->dst]);
}
static void ev_repair(sim_cluster *c, const sim_event *ev) {
    sim_failures_repair(c, &c->inst[ev->dst]);
}

static void ev_timeout(sim_cluster *c, const sim_event *ev) {
    sim_req_timeout(c, (uint32_t)ev->arg[0], ev->arg[1]);
}

typedef void (*sim_ev_fn)(sim_cluster *c, const sim_event *ev);
static const sim_ev_fn handlers[SIM_EV_KINDS] = {
    [SIM_EV_ARRIVAL_READ] = ev_arrival_read,
    [SIM_EV_ARRIVAL] = ev_arrival,
    [SIM_EV_STEP_DONE] = ev_step_done,
    [SIM_EV_LINK] = ev_link,
    [SIM_EV_SAMPLE] = ev_sample,
    [SIM_EV_SCHEDULE] = ev_schedule,
    [SIM_EV_SWAPIN] = ev_swapin,
    [SIM_EV_FRONTEND] = ev_frontend,
    [SIM_EV_TIMEOUT] = ev_timeout,
    [SIM_EV_SCALED] = ev_scaled,
    [SIM_EV_FAIL] = ev_fail,
    [SIM_EV_REPAIR] = ev_repair,
    [SIM_EV_KICK] = ev_kick,
};

// The time series' last part-interval, from the last sample to the run's end: without it the
// series would miss up to an interval of the run's tokens and busy time (all of a run shorter
// than one interval). Its rates are over the time it covers.
static void close_series(sim_cluster *c) {
    if (c->status == KVF_OK && c->now > c->last_sample_ns)
        sim_on_sample(c, (double)(c->now - c->last_sample_ns) * 1e-9, true);
}

kvf_status sim_cluster_loop(sim_cluster *c) {
    const sim_config *cfg = c->cfg;
    c->sample_interval_s = cfg->output.sample_interval_s > 0 ? cfg->output.sample_interval_s : 10;
    sim_failures_init(c);
    sim_ev_push(c, (sim_time)(c->sample_interval_s * 1e9), SIM_EV_SAMPLE, 0, 0, NULL);
    // time-of-day entries repeat daily; the trace starts at economics.trace_start_utc (00:00 by
    // default), so an entry's first time is its hour's next passing after that, and the run
    // starts with the last entry whose hour had passed by then (before any: the pools as given)
    double s0 = fmod(cfg->econ.trace_start_s, 86400);
    int32_t first = -1;
    for (int32_t e = 0; e < cfg->cluster.n_schedule; e++) {
        double at = cfg->cluster.schedule[e].from_h * 3600 - s0;
        if (at < 0) {
            first = e;   // entries increase: the last one before the start wins
            at += 86400;
        }
        sim_ev_push(c, (sim_time)(at * 1e9), SIM_EV_SCHEDULE, 0, (uint64_t)e, NULL);
    }
    if (first >= 0) on_schedule(c, (uint32_t)first);
    sim_event ev;
    uint64_t n = 0;
    while (c->status == KVF_OK && sim_queue_pop(c->q, &ev)) {
        KVF_ASSERT(ev.t >= c->now);
        // periodic events alone do not keep a finished run going
        if ((ev.kind == SIM_EV_SAMPLE || ev.kind == SIM_EV_SCHEDULE || ev.kind == SIM_EV_TIMEOUT ||
             ev.kind == SIM_EV_SCALED || ev.kind == SIM_EV_FAIL || ev.kind == SIM_EV_REPAIR) &&
            c->reader_done && !c->in_flight)
            break;
        c->now = ev.t;
        KVF_ASSERT(ev.kind > 0 && ev.kind < SIM_EV_KINDS && handlers[ev.kind]);
        handlers[ev.kind](c, &ev);
        if ((++n & 0x3fff) == 0) {   // interrupt and progress every 16k events
            if (c->opts && c->opts->interrupt && *c->opts->interrupt) {
                close_series(c);
                sim_pool_gpu_account(c);   // GPU-hours up to the interruption
                return KVF_EINTR;
            }
            sim_run_progress(c);
        }
    }
    close_series(c);
    sim_pool_gpu_account(c);
    return c->status;
}

void sim_cluster_free(sim_cluster *c) {
    sim_trace_close(c->timeline, NULL);
    for (uint32_t i = 0; i < c->n_inst; i++) {
        sim_inst *in = &c->inst[i];
        sim_rheap_free(&in->ready);
        sim_rheap_free(&in->dwait);
        free(in->batch);
        free(in->chunk);
        free(in->running);
        free(in->lag_wait);
        free(in->run_end);
        free(in->run_ext);
        sim_dsum_free(&in->ds);
        sim_bcache_free(&in->hbm);
        sim_bcache_free(&in->dram);
    }
    free(c->inst);
    for (uint32_t i = 0; i < c->n_links; i++)
        sim_link_free(&c->links[i].link);
    free(c->links);
    for (int k = 0; k < SIM_POOLS; k++) {
        mdl_stepper_destroy(c->pool[k].stepper);
        sim_router_free(&c->pool[k]);
    }
    for (uint32_t i = 0; i < c->n_req; i++)
        free(c->req[i].blocks);
    free(c->req);
    free(c->seqs);
    sim_bcache_free(&c->ssd);
    sim_done_free(&c->done);
    sim_queue_destroy(c->q);
    sim_metrics_free(&c->m);
}
