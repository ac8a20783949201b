// sim/config/sim_defaults.c -- the defaults of design.md §7, published figures, and where each
// key was set (file line or --set), so later checks can name file:line and key.
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include <yaml.h>

#include "sim.h"
#include "sim_keys.h"
#include "sim_sample.h"

// ---- defaults -----------------------------------------------------------------------------

// published.NAME.FIELD = text: one field of a published figure (see sim_published).
kvf_status sim_key_set_published(sim_config *c, const char *key, const char *text, char *why,
                                 size_t wn) {
    const char *name = key + 10, *dot = strchr(name, '.');
    if (!dot || dot == name || (size_t)(dot - name) >= sizeof c->published[0].name ||
        strchr(dot + 1, '.')) {
        snprintf(why, wn, "expected published.NAME.FIELD");
        return KVF_EINVAL;
    }
    size_t nl = (size_t)(dot - name);
    const char *field = dot + 1;
    int k;
    for (k = 0; k < c->n_published; k++)
        if (strlen(c->published[k].name) == nl && !strncmp(c->published[k].name, name, nl)) break;
    if (k == c->n_published) {
        if (k == SIM_PUBLISHED_MAX) {
            snprintf(why, wn, "more than %d published figures", SIM_PUBLISHED_MAX);
            return KVF_EINVAL;
        }
        sim_published *p = &c->published[k];
        memset(p, 0, sizeof *p);
        memcpy(p->name, name, nl);
        p->value = NAN;
        p->high = NAN;
        p->scale = 1;
        p->output = true;
        c->n_published++;
    }
    sim_published *p = &c->published[k];
    char *end;
    if (!strcmp(field, "value") || !strcmp(field, "high") || !strcmp(field, "scale")) {
        double v = strtod(text, &end);
        if (end == text || *end || !isfinite(v)) {
            snprintf(why, wn, "'%.60s' is not a number", text);
            return KVF_EINVAL;
        }
        if (!strcmp(field, "scale") && !(v != 0)) {
            snprintf(why, wn, "must not be 0");
            return KVF_EINVAL;
        }
        *(!strcmp(field, "value") ? &p->value : !strcmp(field, "high") ? &p->high : &p->scale) = v;
    } else if (!strcmp(field, "role")) {
        if (strcmp(text, "input") && strcmp(text, "output")) {
            snprintf(why, wn, "unknown value '%.60s' (allowed: input|output)", text);
            return KVF_EINVAL;
        }
        p->output = !strcmp(text, "output");
    } else if (!strcmp(field, "summary_key") || !strcmp(field, "unit") ||
               !strcmp(field, "rests_on")) {
        char *dst = !strcmp(field, "unit")       ? p->unit
                    : !strcmp(field, "rests_on") ? p->rests_on
                                                 : p->summary_key;
        size_t cap = !strcmp(field, "unit")       ? sizeof p->unit
                     : !strcmp(field, "rests_on") ? sizeof p->rests_on
                                                  : sizeof p->summary_key;
        size_t len = strlen(text);
        if (len >= cap) {
            snprintf(why, wn, "longer than %zu characters", cap - 1);
            return KVF_EINVAL;
        }
        memcpy(dst, text, len + 1);
    } else {
        snprintf(why, wn,
                 "unknown field (known: value, high, role, summary_key, scale, unit, "
                 "rests_on)");
        return KVF_EINVAL;
    }
    return KVF_OK;
}

static void pool_default(sim_pool_cfg *p, int32_t instances, int32_t gpus) {
    p->instances = instances;
    p->gpus_per_instance = gpus;
    p->tp = 0;
    p->ep = 0;
    p->max_batch_tokens = 16384;
    p->chunk_tokens = 0;
    p->max_batch_requests = 256;
    p->scheduler = SIM_SCHED_FCFS;
    p->queue_limit = 0;
}

void sim_config_default(sim_config *c) {
    memset(c, 0, sizeof *c);
    copy_str(c->name, sizeof c->name, "quickstart");
    copy_str(c->dir, sizeof c->dir, ".");
    c->seed = 1;
    copy_str(c->model, sizeof c->model, "llama-3.1-8b");
    copy_str(c->hardware, sizeof c->hardware, "h100");
    copy_str(c->step_model, sizeof c->step_model, "roofline");
    mdl_efficiency_default(&c->eff);
    c->moe.skew = 1.0;
    c->moe.redundant_experts = 0.0;
    c->moe.comm_sms = SIM_COMM_SMS_DEFAULT;

    copy_str(c->workload.trace, sizeof c->workload.trace, "traces/data/azure2023_conv.csv");
    trc_options_default(&c->workload.opt);
    c->workload.opt.format = TRC_FMT_AUTO;
    c->workload.opt.time_scale = 1.0;
    c->workload.opt.rate_rps = 0;
    c->workload.opt.length_scale = 1.0;
    c->workload.opt.limit_requests = 0;
    c->workload.sample_rate = 1.0;
    c->workload.gen.rate_rps = 1.0;
    c->workload.gen.duration_s = 600.0;
    copy_str(c->workload.gen.arrival, sizeof c->workload.gen.arrival, "poisson");
    c->workload.gen.system_tokens = -1;
    {
        trc_gen_options g;   // days mode defaults: the generator's (sources in trc_gen.c)
        trc_gen_options_default(&g);
        c->workload.gen.diurnal_amplitude = g.diurnal_amplitude;
        c->workload.gen.peak_hour = g.peak_hour;
        c->workload.gen.weekend_ratio = g.weekend_ratio;
        c->workload.gen.start_weekday = g.start_weekday;
        c->workload.gen.warmup_days = g.warmup_days;
        memcpy(c->workload.gen.ret, g.ret, sizeof c->workload.gen.ret);
    }

    c->cluster.mode = SIM_DISAGGREGATED;
    pool_default(&c->cluster.vision, 0, 1);
    c->cluster.vision.max_batch_requests = 64;   // requests (their images) encoded per vision step
    pool_default(&c->cluster.prefill, 2, 8);
    pool_default(&c->cluster.decode, 2, 8);
    c->cluster.kv_transfer_Bps = 50e9;
    c->cluster.net_latency_ns = 20e3;
    c->cluster.preemption = SIM_PREEMPT_RECOMPUTE;

    copy_str(c->router.prefill, sizeof c->router.prefill, "cache_aware");
    copy_str(c->router.decode, sizeof c->router.decode, "least_kv");
    c->router.stale_ns = 0;
    c->router.reject_slo = false;

    c->kv.block_tokens = 64;
    c->kv.hbm_cache_frac = 0.8;
    c->kv.activation_reserve = 0.1;
    c->kv.dram =
        (sim_tier_cfg){.capacity_bytes = 0, .read_Bps = 64e9, .write_Bps = 64e9, .latency_ns = 1e3};
    c->kv.ssd = (sim_tier_cfg){
        .capacity_bytes = 0, .read_Bps = 40e9, .write_Bps = 20e9, .latency_ns = 100e3};
    const int64_t day = 86400 * KVF_NS_PER_S;
    c->kv.retention_ns[TRC_CLASS_CHATBOT] = 7 * day;
    c->kv.retention_ns[TRC_CLASS_AGENT] = 3 * day;
    c->kv.retention_ns[TRC_CLASS_CODING] = 3 * day;
    c->kv.retention_ns[TRC_CLASS_BATCH] = 1 * day;
    c->kv.retention_ns[TRC_CLASS_OTHER] = 7 * day;
    c->kv.write_through = true;
    c->kv.overlap_load = true;
    c->kv.persist_decode = true;
    c->kv.swa_replay_tokens = 128;
    c->kv.prefix_cache = true;

    c->decoding.draft_tokens = 0;
    c->decoding.acceptance = 0.0;
    c->decoding.structured_mask_ns = 0;
    c->slo.ttft_p90_ms = 2000;
    c->slo.tpot_p90_ms = 50;
    c->sat = (sim_saturation_cfg){.queue_growth = 8,
                                  .queue_growth_frac = 0.25,
                                  .wait_growth_s = 1,
                                  .max_wait_s = 0,
                                  .drain_frac = 0.05,
                                  .drain_s = 30,
                                  .reject_frac = 0.01};
    rpt_econ_config_default(&c->econ);
    c->output.sample_interval_s = 10;
    c->output.write_requests = true;

    c->workload.opt.block_tokens = c->kv.block_tokens;
    c->workload.opt.seed = c->seed;
}

// Keys that mirror others: the reader's block size and seed follow the scenario's.
void sim_config_sync_derived(sim_config *c) {
    c->workload.opt.block_tokens = c->kv.block_tokens;
    c->workload.opt.seed = c->seed;
}

// ---- where keys were set ------------------------------------------------------------------

void sim_key_record_line(sim_config *c, const char *key, int line) {
    for (int32_t i = 0; i < c->n_key_lines; i++)
        if (!strcmp(c->key_lines[i].key, key)) {
            c->key_lines[i].line = line;
            return;
        }
    if (c->n_key_lines >= SIM_KEY_LINES_MAX || strlen(key) >= SIM_KEY_MAX) return;   // cosmetic
    sim_key_line *k = &c->key_lines[c->n_key_lines++];
    copy_str(k->key, sizeof k->key, key);
    k->line = line;
}

int sim_config_key_line(const sim_config *c, const char *key) {
    char k[SIM_KEY_MAX];
    copy_str(k, sizeof k, key);
    for (;;) {
        for (int32_t i = 0; i < c->n_key_lines; i++)
            if (!strcmp(c->key_lines[i].key, k)) return c->key_lines[i].line;
        char *dot = strrchr(k, '.');
        if (!dot) return 0;
        *dot = '\0';
    }
}

bool sim_config_key_given(const sim_config *c, const char *key) {
    for (int32_t i = 0; i < c->n_key_lines; i++)
        if (!strcmp(c->key_lines[i].key, key)) return true;
    return false;
}

void sim_config_where(const sim_config *c, const char *key, char *out, size_t n) {
    int line = sim_config_key_line(c, key);
    bool by_fit = false;   // a term of the fit file, the scenario not setting the key itself
    for (uint32_t i = 0; !line && i < c->serving.n_fit_undo; i++)
        by_fit |= !strcmp(c->serving.fit_undo[i].key, key);
    if (by_fit)
        snprintf(out, n, "%s%skey '%s' (a term of serving.fit %s)", c->path, c->path[0] ? ": " : "",
                 key, c->serving.fit);
    else if (line < 0)
        snprintf(out, n, "--set %s", key);
    else if (c->path[0] && line > 0)
        snprintf(out, n, "%s:%d: key '%s'", c->path, line, key);
    else if (c->path[0])
        snprintf(out, n, "%s: key '%s' (default)", c->path, key);
    else
        snprintf(out, n, "key '%s' (default)", key);
}
