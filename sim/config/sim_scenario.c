// sim/sim_scenario.c -- scenario files (design.md §7) into the typed sim_config: defaults,
// loading YAML with libyaml's document API, `--set a.b.c=value` overrides, and validation.
//
// Every leaf key is one row of a table (key_table) that says where the value goes, its type,
// its allowed range in the file's unit, and the factor from the file's unit to the struct's
// (GB -> bytes, us -> ns, ...). A file and an override take the same path: the value is a YAML
// node (an override's text is parsed as a one-line YAML document) applied at a dotted key by
// apply_node(), which walks mappings down the known sections. Keys below `economics.` are
// handed to reports/ (rpt_econ_config_set) as text. Every key applied records its line in
// c->key_lines, so later checks (validate, the run) can still name file:line and key.
//
// Relative paths resolve against c->dir: for a file inside a `scenarios/` folder (at any
// depth), the folder holding that `scenarios/`; for any other file, its own folder; for a
// config built in code, the current directory.
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
#include "sim_sample.h"

// ---- the key table ------------------------------------------------------------------------

typedef enum key_kind {
    K_STR,      // any scalar, copied into char[size]
    K_NAME,     // one of names[], copied into char[size]
    K_ENUM,     // one of names[], its index stored in an enum (int-sized)
    K_NUM,      // number, range-checked in the file's unit, times scale, stored as ntype
    K_U64,      // unsigned 64-bit integer (seed), exact
    K_BOOL,     // true/false (also yes/no/on/off)
    K_DUR,      // duration "7d", "12h", "90m", "30s" (bare number = seconds) or "never" (-1)
    K_CAP,      // capacity: number times scale, "unlimited" (-1), or a byte size "100PiB"
    K_FMT,      // trace format (trc_format_parse)
    K_SCHEDULE, // cluster.schedule: null or a list of {from_h, prefill, decode}
} key_kind;

typedef enum num_type { NT_DBL = 0, NT_I32, NT_U32, NT_I64 } num_type;

enum {
    F_NULL = 1, // null accepted: numbers -> 0, strings -> ""
    F_INT = 2,  // the file value must be a whole number
    F_GT = 4,   // lo is exclusive (value > lo)
};

typedef struct keydef {
    const char *key;          // dotted key
    uint8_t kind;             // key_kind
    uint8_t ntype;            // num_type (K_NUM)
    uint8_t flags;            // F_*
    size_t off, size;         // target field in sim_config
    size_t off2;              // a second target getting the same value, 0 = none
    double lo, hi;            // allowed range in the file's unit
    double scale;             // file unit -> struct unit
    const char *const *names; // K_NAME / K_ENUM
} keydef;

#define BIG 1e300
#define OFF(f) offsetof(sim_config, f)
#define SZ(f) sizeof(((sim_config *)0)->f)
#define STR(k, f, fl)                                                                              \
    { k, K_STR, 0, fl, OFF(f), SZ(f), 0, 0, 0, 1, NULL }
#define NAME(k, f, nm)                                                                             \
    { k, K_NAME, 0, 0, OFF(f), SZ(f), 0, 0, 0, 1, nm }
#define ENUM(k, f, nm)                                                                             \
    { k, K_ENUM, 0, 0, OFF(f), SZ(f), 0, 0, 0, 1, nm }
#define NUM(k, f, nt, fl, lo, hi, sc)                                                              \
    { k, K_NUM, nt, fl, OFF(f), SZ(f), 0, lo, hi, sc, NULL }
#define NUM2(k, f, f2, nt, fl, lo, hi, sc)                                                         \
    { k, K_NUM, nt, fl, OFF(f), SZ(f), OFF(f2), lo, hi, sc, NULL }
#define BOOL(k, f)                                                                                 \
    { k, K_BOOL, 0, 0, OFF(f), SZ(f), 0, 0, 0, 1, NULL }
#define DUR(k, f)                                                                                  \
    { k, K_DUR, 0, 0, OFF(f), SZ(f), 0, 0, 0, 1, NULL }
#define CAP(k, f, sc)                                                                              \
    { k, K_CAP, 0, 0, OFF(f), SZ(f), 0, 0, BIG, sc, NULL }

static const char *const step_models[] = {"roofline", "calibrated", "table", NULL};
static const char *const modes[] = {"disaggregated", "colocated", NULL};
static const char *const schedulers[] = {"fcfs", "spf", "priority", NULL};
static const char *const preemptions[] = {"recompute", "swap", NULL};
static const char *const buckets[] = {"as_recorded", "spread", NULL};
static const char *const gen_profiles[] = {"chatbot", "agent", "coding", "mixed", NULL};
static const char *const gen_arrivals[] = {"poisson", "gamma", "diurnal", NULL};
#define prefill_routers sim_prefill_router_names   // the policy tables of sim_router.c
#define decode_routers sim_decode_router_names

#define POOL_KEYS(p, f)                                                                               \
    NUM("cluster." #p ".instances", f.instances, NT_I32, F_INT, 0, 1e5, 1),                        \
        NUM("cluster." #p ".gpus_per_instance", f.gpus_per_instance, NT_I32, F_INT, 1, 4096, 1),    \
        NUM("cluster." #p ".tp", f.tp, NT_I32, F_INT, 0, 4096, 1),                                  \
        NUM("cluster." #p ".ep", f.ep, NT_I32, F_INT, 0, 4096, 1),                                  \
        NUM("cluster." #p ".max_batch_tokens", f.max_batch_tokens, NT_I64, F_INT, 1, 1e8, 1),     \
        NUM("cluster." #p ".chunk_tokens", f.chunk_tokens, NT_I64, F_INT, 0, 1e8, 1),             \
        NUM("cluster." #p ".max_batch_requests", f.max_batch_requests, NT_I32, F_INT, 1, 1e6, 1),  \
        ENUM("cluster." #p ".scheduler", f.scheduler, schedulers),                                 \
        NUM("cluster." #p ".queue_limit", f.queue_limit, NT_I64, F_INT, 0, 1e9, 1),               \
        NUM("cluster." #p ".kv_tokens", f.kv_tokens, NT_I64, F_INT, 0, 1e12, 1)

static const keydef key_table[] = {
    STR("name", name, 0),
    {"seed", K_U64, 0, 0, OFF(seed), SZ(seed), 0, 0, 0, 1, NULL},
    STR("model", model, 0),
    STR("hardware", hardware, 0),
    NAME("step_model", step_model, step_models),
    STR("profile", profile, F_NULL),
    NUM("efficiency.compute", eff.compute, NT_DBL, 0, 1e-3, 1, 1),
    NUM("efficiency.memory", eff.memory, NT_DBL, 0, 1e-3, 1, 1),
    NUM("efficiency.comm", eff.comm, NT_DBL, 0, 1e-3, 1, 1),
    NUM("efficiency.step_overhead_us", eff.step_overhead_ns, NT_DBL, 0, 0, 1e6, 1e3),
    NUM("efficiency.layer_overhead_us", eff.layer_overhead_ns, NT_DBL, 0, 0, 1e5, 1e3),
    NUM("efficiency.comm_latency_us", eff.comm_latency_ns, NT_DBL, 0, 0, 1e6, 1e3),
    NUM("moe.ep_skew", moe.skew, NT_DBL, 0, 1, 100, 1),
    NUM("moe.redundant_experts", moe.redundant_experts, NT_DBL, 0, 0, 1, 1),
    NUM("moe.ep_skew_sd", moe.skew_sd, NT_DBL, 0, 0, 10, 1),
    NUM("moe.route_nodes", moe.route_nodes, NT_U32, F_INT, 0, 1 << 20, 1),
    BOOL("moe.two_batch_overlap", moe.two_batch),
    STR("workload.trace", workload.trace, F_NULL),
    {"workload.format", K_FMT, 0, 0, OFF(workload.opt.format), SZ(workload.opt.format), 0, 0, 0, 1, NULL},
    NUM("workload.time_scale", workload.opt.time_scale, NT_DBL, 0, 1e-6, 1e6, 1),
    NUM("workload.rate_rps", workload.opt.rate_rps, NT_DBL, F_NULL, 0, 1e6, 1),
    NUM("workload.length_scale", workload.opt.length_scale, NT_DBL, 0, 1e-3, 1e3, 1),
    NUM("workload.limit_requests", workload.opt.limit_requests, NT_I64, F_NULL | F_INT, 0, 1e12, 1),
    NUM("workload.start_s", workload.opt.start_ns, NT_I64, 0, 0, 9e9, 1e9),
    NUM("workload.end_s", workload.opt.end_ns, NT_I64, F_NULL, 0, 9e9, 1e9),
    ENUM("workload.bucket", workload.opt.bucket, buckets),
    BOOL("workload.skip_bad", workload.opt.skip_bad),
    NUM("workload.session_rate", workload.opt.session_rate, NT_DBL, 0, 0, 1e6, 1),
    NUM("workload.session_users", workload.opt.session_users, NT_U32, F_INT, 0, 1e7, 1),
    NUM("workload.sample_rate", workload.sample_rate, NT_DBL, F_GT, 0, 1, 1),
    NAME("workload.generate.profile", workload.gen.profile, gen_profiles),
    NUM("workload.generate.rate_rps", workload.gen.rate_rps, NT_DBL, F_GT, 0, 1e6, 1),
    NUM("workload.generate.duration_s", workload.gen.duration_s, NT_DBL, F_GT, 0, 3.2e7, 1),
    NAME("workload.generate.arrival", workload.gen.arrival, gen_arrivals),
    NUM("workload.generate.cv", workload.gen.cv, NT_DBL, 0, 0, 100, 1),
    NUM("workload.generate.mean_turns", workload.gen.mean_turns, NT_DBL, 0, 0, 1e4, 1),
    NUM("workload.generate.system_tokens", workload.gen.system_tokens, NT_I32, F_INT, -1, 1e7, 1),
    NUM("workload.generate.input_len", workload.gen.input_len, NT_U32, F_INT, 0, 1e7, 1),
    NUM("workload.generate.output_len", workload.gen.output_len, NT_U32, F_INT, 0, 1e7, 1),
    NUM("workload.generate.images_p", workload.gen.images_p, NT_DBL, 0, 0, 1, 1),
    BOOL("workload.generate.closed_loop", workload.gen.closed_loop),
    NUM("workload.generate.think_s", workload.gen.think_s, NT_DBL, 0, 0, 604800, 1),
    NUM("workload.generate.mix.chatbot", workload.gen.mix[0], NT_DBL, 0, 0, 1e6, 1),
    NUM("workload.generate.mix.agent", workload.gen.mix[1], NT_DBL, 0, 0, 1e6, 1),
    NUM("workload.generate.mix.coding", workload.gen.mix[2], NT_DBL, 0, 0, 1e6, 1),
    NUM("workload.generate.days", workload.gen.days, NT_DBL, 0, 0, 3660, 1),
    NUM("workload.generate.diurnal_amplitude", workload.gen.diurnal_amplitude, NT_DBL, 0, 0, 0.99, 1),
    NUM("workload.generate.peak_hour", workload.gen.peak_hour, NT_DBL, 0, 0, 23.99, 1),
    NUM("workload.generate.weekend_ratio", workload.gen.weekend_ratio, NT_DBL, F_GT, 0, 10, 1),
    NUM("workload.generate.start_weekday", workload.gen.start_weekday, NT_U32, F_INT, 0, 6, 1),
    NUM("workload.generate.warmup_days", workload.gen.warmup_days, NT_DBL, 0, 0, 365, 1),
#define RETURN_KEYS(c, i)                                                                          \
    NUM("workload.generate.return." #c ".p", workload.gen.ret[i].p, NT_DBL, 0, 0, 0.99, 1),         \
        NUM("workload.generate.return." #c ".median_h", workload.gen.ret[i].median_h, NT_DBL, F_GT, \
            0, 87840, 1),                                                                          \
        NUM("workload.generate.return." #c ".sigma", workload.gen.ret[i].sigma, NT_DBL, 0, 0, 5, 1)
    RETURN_KEYS(chatbot, TRC_GEN_CHATBOT),
    RETURN_KEYS(agent, TRC_GEN_AGENT),
    RETURN_KEYS(coding, TRC_GEN_CODING),
    ENUM("cluster.mode", cluster.mode, modes),
    POOL_KEYS(vision, cluster.vision),
    POOL_KEYS(prefill, cluster.prefill),
    POOL_KEYS(decode, cluster.decode),
    NUM("cluster.network.kv_transfer_GBps", cluster.kv_transfer_Bps, NT_DBL, 0, 1e-3, 1e6, 1e9),
    NUM("cluster.network.latency_us", cluster.net_latency_ns, NT_DBL, 0, 0, 1e7, 1e3),
    {"cluster.schedule", K_SCHEDULE, 0, F_NULL, OFF(cluster.schedule), SZ(cluster.schedule), 0, 0, 0, 1, NULL},
    ENUM("cluster.preemption", cluster.preemption, preemptions),
    NAME("router.prefill", router.prefill, prefill_routers),
    NAME("router.decode", router.decode, decode_routers),
    NUM("router.stale_ms", router.stale_ns, NT_DBL, 0, 0, 3.6e6, 1e6),
    BOOL("router.reject_over_slo", router.reject_slo),
    NUM("kv_cache.block_tokens", kv.block_tokens, NT_U32, F_INT, 1, 1 << 20, 1),
    BOOL("kv_cache.prefix_cache", kv.prefix_cache),
    BOOL("kv_cache.step_sequential", kv.step_sequential),
    NUM("kv_cache.hbm_cache_frac", kv.hbm_cache_frac, NT_DBL, 0, 0, 1, 1),
    NUM("kv_cache.activation_reserve", kv.activation_reserve, NT_DBL, 0, 0, 0.99, 1),
    CAP("kv_cache.dram.gb_per_node", kv.dram.capacity_bytes, 1e9),
    NUM2("kv_cache.dram.GBps", kv.dram.read_Bps, kv.dram.write_Bps, NT_DBL, 0, 1e-3, 1e6, 1e9),
    NUM("kv_cache.dram.read_GBps", kv.dram.read_Bps, NT_DBL, 0, 1e-3, 1e6, 1e9),
    NUM("kv_cache.dram.write_GBps", kv.dram.write_Bps, NT_DBL, 0, 1e-3, 1e6, 1e9),
    NUM("kv_cache.dram.latency_us", kv.dram.latency_ns, NT_DBL, 0, 0, 1e7, 1e3),
    CAP("kv_cache.ssd.capacity_tb", kv.ssd.capacity_bytes, 1e12),
    NUM("kv_cache.ssd.read_GBps", kv.ssd.read_Bps, NT_DBL, 0, 1e-3, 1e6, 1e9),
    NUM("kv_cache.ssd.write_GBps", kv.ssd.write_Bps, NT_DBL, 0, 1e-3, 1e6, 1e9),
    NUM("kv_cache.ssd.latency_us", kv.ssd.latency_ns, NT_DBL, 0, 0, 1e7, 1e3),
    DUR("kv_cache.ssd.retention.chatbot", kv.retention_ns[TRC_CLASS_CHATBOT]),
    DUR("kv_cache.ssd.retention.agent", kv.retention_ns[TRC_CLASS_AGENT]),
    DUR("kv_cache.ssd.retention.coding", kv.retention_ns[TRC_CLASS_CODING]),
    DUR("kv_cache.ssd.retention.batch", kv.retention_ns[TRC_CLASS_BATCH]),
    DUR("kv_cache.ssd.retention.other", kv.retention_ns[TRC_CLASS_OTHER]),
    BOOL("kv_cache.write_through", kv.write_through),
    BOOL("kv_cache.overlap_load", kv.overlap_load),
    BOOL("kv_cache.persist_decode", kv.persist_decode),
    NUM("kv_cache.swa_replay_tokens", kv.swa_replay_tokens, NT_U32, F_INT, 0, 1 << 24, 1),
    NUM("speculative.draft_tokens", decoding.draft_tokens, NT_U32, F_INT, 0, 64, 1),
    NUM("speculative.acceptance", decoding.acceptance, NT_DBL, 0, 0, 1, 1),
    NUM("structured.mask_us", decoding.structured_mask_ns, NT_DBL, 0, 0, 1e6, 1e3),
    NUM("structured.share", decoding.structured_share, NT_DBL, 0, 0, 1, 1),
    NUM("slo.ttft_p90_ms", slo.ttft_p90_ms, NT_DBL, F_GT, 0, 8.64e7, 1),
    NUM("slo.tpot_p90_ms", slo.tpot_p90_ms, NT_DBL, F_GT, 0, 6e4, 1),
    NUM("saturation.queue_growth", sat.queue_growth, NT_DBL, 0, 0, 1e9, 1),
    NUM("saturation.queue_growth_frac", sat.queue_growth_frac, NT_DBL, 0, 0, 100, 1),
    NUM("saturation.wait_growth_s", sat.wait_growth_s, NT_DBL, 0, 0, 3.2e7, 1),
    NUM("saturation.max_wait_s", sat.max_wait_s, NT_DBL, 0, 0, 3.2e7, 1),
    NUM("saturation.drain_frac", sat.drain_frac, NT_DBL, 0, 0, 1, 1),
    NUM("saturation.drain_s", sat.drain_s, NT_DBL, 0, 0, 3.2e7, 1),
    NUM("saturation.reject_frac", sat.reject_frac, NT_DBL, 0, 0, 1, 1),
    NUM("output.sample_interval_s", output.sample_interval_s, NT_DBL, 0, 1e-3, 86400, 1),
    BOOL("output.requests", output.write_requests),
};

// Mappings that hold keys. "economics" is a section whose contents reports/ checks.
static const char *const sections[] = {
    "efficiency",
    "moe",
    "workload",
    "workload.generate",
    "workload.generate.mix",
    "workload.generate.return",
    "workload.generate.return.chatbot",
    "workload.generate.return.agent",
    "workload.generate.return.coding",
    "cluster",
    "cluster.vision",
    "cluster.prefill",
    "cluster.decode",
    "cluster.network",
    "router",
    "kv_cache",
    "kv_cache.dram",
    "kv_cache.ssd",
    "kv_cache.ssd.retention",
    "speculative",
    "structured",
    "slo",
    "saturation",
    "economics",
    "output",
    "published",
};

#define N_KEYS (sizeof key_table / sizeof key_table[0])
#define N_SECTIONS (sizeof sections / sizeof sections[0])

static const keydef *find_key(const char *key) {
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(key_table[i].key, key)) return &key_table[i];
    return NULL;
}

bool sim_config_key_info(size_t i, const char **key, double *lo, double *hi, bool *integer,
                         bool *lo_open) {
    for (size_t j = 0, k = 0; j < N_KEYS; j++) {
        if (key_table[j].kind != K_NUM) continue;
        if (k++ != i) continue;
        *key = key_table[j].key;
        *lo = key_table[j].lo;
        *hi = key_table[j].hi;
        *integer = key_table[j].flags & F_INT;
        *lo_open = key_table[j].flags & F_GT;
        return true;
    }
    return false;
}

static bool is_section(const char *key) {
    for (size_t i = 0; i < N_SECTIONS; i++)
        if (!strcmp(sections[i], key)) return true;
    return false;
}

static bool under_economics(const char *key) {
    return !strncmp(key, "economics.", 10);
}

// ---- defaults -----------------------------------------------------------------------------

static void copy_str(char *dst, size_t n, const char *src) {
    snprintf(dst, n, "%s", src);
}

// published.NAME.FIELD = text: one field of a published figure (see sim_published).
static kvf_status set_published(sim_config *c, const char *key, const char *text, char *why,
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
        char *dst = !strcmp(field, "unit") ? p->unit
                    : !strcmp(field, "rests_on") ? p->rests_on : p->summary_key;
        size_t cap = !strcmp(field, "unit") ? sizeof p->unit
                     : !strcmp(field, "rests_on") ? sizeof p->rests_on : sizeof p->summary_key;
        size_t len = strlen(text);
        if (len >= cap) {
            snprintf(why, wn, "longer than %zu characters", cap - 1);
            return KVF_EINVAL;
        }
        memcpy(dst, text, len + 1);
    } else {
        snprintf(why, wn, "unknown field (known: value, high, role, summary_key, scale, unit, "
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
        trc_gen_options g; // days mode defaults: the generator's (sources in trc_gen.c)
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
    c->sat = (sim_saturation_cfg){.queue_growth = 8, .queue_growth_frac = 0.25,
                                  .wait_growth_s = 1, .max_wait_s = 0, .drain_frac = 0.05,
                                  .drain_s = 30, .reject_frac = 0.01};
    rpt_econ_config_default(&c->econ);
    c->output.sample_interval_s = 10;
    c->output.write_requests = true;

    c->workload.opt.block_tokens = c->kv.block_tokens;
    c->workload.opt.seed = c->seed;
}

// Keys that mirror others: the reader's block size and seed follow the scenario's.
static void sync_derived(sim_config *c) {
    c->workload.opt.block_tokens = c->kv.block_tokens;
    c->workload.opt.seed = c->seed;
}

// ---- where keys were set ------------------------------------------------------------------

static void record_line(sim_config *c, const char *key, int line) {
    for (int32_t i = 0; i < c->n_key_lines; i++)
        if (!strcmp(c->key_lines[i].key, key)) {
            c->key_lines[i].line = line;
            return;
        }
    if (c->n_key_lines >= SIM_KEY_LINES_MAX || strlen(key) >= SIM_KEY_MAX) return; // cosmetic
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

void sim_config_where(const sim_config *c, const char *key, char *out, size_t n) {
    int line = sim_config_key_line(c, key);
    if (line < 0)
        snprintf(out, n, "--set %s", key);
    else if (c->path[0] && line > 0)
        snprintf(out, n, "%s:%d: key '%s'", c->path, line, key);
    else if (c->path[0])
        snprintf(out, n, "%s: key '%s' (default)", c->path, key);
    else
        snprintf(out, n, "key '%s' (default)", key);
}

// ---- applying YAML nodes ------------------------------------------------------------------

typedef struct apply_ctx {
    sim_config *c;
    const char *path; // scenario file; NULL for --set
    yaml_document_t *doc;
    kvf_err *err;
} apply_ctx;

static int node_line(const yaml_node_t *n) {
    return (int)n->start_mark.line + 1;
}

// Formats "FILE:LINE: key 'KEY': what" (file) or "--set KEY: what" (override).
__attribute__((format(printf, 5, 6))) static kvf_status
fail_at(apply_ctx *x, kvf_status code, const char *key, int line, const char *fmt, ...) {
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (x->path) return kvf_fail(x->err, code, "%s:%d: key '%s': %s", x->path, line, key, what);
    return kvf_fail(x->err, code, "--set %s: %s", key, what);
}

static const char *node_kind_name(const yaml_node_t *n) {
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    default:
        return "a scalar";
    }
}

static const char *scalar(const yaml_node_t *n) {
    return (const char *)n->data.scalar.value;
}

static bool is_null(const yaml_node_t *n) {
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *s = scalar(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static bool parse_bool(const char *s, bool *out) {
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    for (int i = 0; i < 3; i++) {
        if (!strcasecmp(s, yes[i])) return *out = true, true;
        if (!strcasecmp(s, no[i])) return *out = false, true;
    }
    return false;
}

static bool parse_number(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v)) return false;
    while (isspace((unsigned char)*end))
        end++;
    if (*end) return false;
    *out = v;
    return true;
}

// "a|b|c" of a NULL-terminated name list.
static void join_names(const char *const *names, char *out, size_t n) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; names[i] && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? "|" : "", names[i]);
}

static int name_index(const char *const *names, const char *s) {
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

// The key table's ranges keep every value inside its target type; the assertion guards the
// conversion itself (a double out of an integer's range is undefined behaviour).
static void store_num(void *dst, num_type t, double v) {
    static const double lim[][2] = {
        [NT_DBL] = {-1e308, 1e308}, [NT_I32] = {-2147483648.0, 2147483647.0},
        [NT_U32] = {0, 4294967295.0}, [NT_I64] = {-9.2e18, 9.2e18}};
    KVF_ASSERT(v >= lim[t][0] && v <= lim[t][1]);
    switch (t) {
    case NT_DBL:
        *(double *)dst = v;
        break;
    case NT_I32:
        *(int32_t *)dst = (int32_t)llround(v);
        break;
    case NT_U32:
        *(uint32_t *)dst = (uint32_t)llround(v);
        break;
    case NT_I64:
        *(int64_t *)dst = (int64_t)llround(v);
        break;
    }
}

static kvf_status apply_schedule(apply_ctx *x, const char *key, const yaml_node_t *n, int line) {
    sim_config *c = x->c;
    if (is_null(n)) {
        c->cluster.n_schedule = 0;
        return KVF_OK;
    }
    if (n->type != YAML_SEQUENCE_NODE)
        return fail_at(x, KVF_EPARSE, key, line,
                       "expects null or a list of {from_h, prefill, decode}, got %s",
                       node_kind_name(n));
    int32_t count = 0;
    sim_schedule_entry tmp[SIM_SCHEDULE_MAX];
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        const yaml_node_t *e = yaml_document_get_node(x->doc, *it);
        if (e->type != YAML_MAPPING_NODE)
            return fail_at(x, KVF_EPARSE, key, node_line(e),
                           "entry %d expects a mapping {from_h, prefill, decode}, got %s", count,
                           node_kind_name(e));
        if (count >= SIM_SCHEDULE_MAX)
            return fail_at(x, KVF_EINVAL, key, node_line(e), "more than %d entries",
                           SIM_SCHEDULE_MAX);
        sim_schedule_entry s = {.from_h = -1, .prefill = -1, .decode = -1};
        for (yaml_node_pair_t *p = e->data.mapping.pairs.start; p < e->data.mapping.pairs.top;
             p++) {
            const yaml_node_t *k = yaml_document_get_node(x->doc, p->key);
            const yaml_node_t *v = yaml_document_get_node(x->doc, p->value);
            char full[SIM_KEY_MAX + 32];
            const char *kn = k->type == YAML_SCALAR_NODE ? scalar(k) : "?";
            snprintf(full, sizeof full, "%s[%d].%s", key, count, kn);
            bool is_h = !strcmp(kn, "from_h"), is_p = !strcmp(kn, "prefill"),
                 is_d = !strcmp(kn, "decode");
            if (!is_h && !is_p && !is_d)
                return fail_at(x, KVF_EPARSE, full, node_line(k),
                               "unknown key (expected from_h, prefill, decode)");
            double d;
            if (v->type != YAML_SCALAR_NODE || !parse_number(scalar(v), &d))
                return fail_at(x, KVF_EPARSE, full, node_line(v), "expects a number, got %s%s%s",
                               v->type == YAML_SCALAR_NODE ? "'" : "",
                               v->type == YAML_SCALAR_NODE ? scalar(v) : node_kind_name(v),
                               v->type == YAML_SCALAR_NODE ? "'" : "");
            if (is_h) {
                if (d < 0 || d >= 24)
                    return fail_at(x, KVF_EINVAL, full, node_line(v), "must be in [0, 24), got %g",
                                   d);
                s.from_h = d;
            } else {
                if (d < 0 || d != floor(d) || d > 1e6)
                    return fail_at(x, KVF_EINVAL, full, node_line(v),
                                   "must be a whole number >= 0, got %g", d);
                if (is_p)
                    s.prefill = (int32_t)d;
                else
                    s.decode = (int32_t)d;
            }
        }
        char full[SIM_KEY_MAX + 32];
        snprintf(full, sizeof full, "%s[%d].from_h", key, count);
        if (s.from_h < 0) return fail_at(x, KVF_EPARSE, full, node_line(e), "missing");
        if (count > 0 && s.from_h <= tmp[count - 1].from_h)
            return fail_at(x, KVF_EINVAL, full, node_line(e),
                           "entries must be in increasing from_h order (%g after %g)", s.from_h,
                           tmp[count - 1].from_h);
        tmp[count++] = s;
    }
    memcpy(c->cluster.schedule, tmp, sizeof tmp[0] * (size_t)count);
    c->cluster.n_schedule = count;
    return KVF_OK;
}

// line: where the key stands (its value may start on a later line).
static kvf_status apply_leaf(apply_ctx *x, const keydef *d, const char *key, const yaml_node_t *n,
                             int line) {
    sim_config *c = x->c;
    char *dst = (char *)c + d->off;
    char allowed[256];

    if (d->kind == K_SCHEDULE) return apply_schedule(x, key, n, line);
    if (n->type != YAML_SCALAR_NODE) {
        const char *want = "a scalar";
        switch ((key_kind)d->kind) {
        case K_NUM:
        case K_U64:
            want = d->flags & F_INT ? "a whole number" : "a number";
            break;
        case K_BOOL:
            want = "true or false";
            break;
        case K_DUR:
            want = "a duration (e.g. 7d, 12h, 30s) or never";
            break;
        case K_CAP:
            want = "a number or unlimited";
            break;
        default:
            want = "a string";
            break;
        }
        return fail_at(x, KVF_EPARSE, key, line, "expects %s, got %s", want, node_kind_name(n));
    }
    const char *s = scalar(n);
    bool null = is_null(n);
    if (null && !(d->flags & F_NULL) && d->kind != K_STR)
        return fail_at(x, KVF_EPARSE, key, line, "must not be null");
    if (!strncmp(key, "workload.generate.", 18) && !c->workload.gen.profile[0])
        copy_str(c->workload.gen.profile, sizeof c->workload.gen.profile, "chatbot");

    switch ((key_kind)d->kind) {
    case K_STR:
        if (null && !(d->flags & F_NULL))
            return fail_at(x, KVF_EPARSE, key, line, "must not be null");
        if (strlen(s) >= d->size)
            return fail_at(x, KVF_EINVAL, key, line, "longer than %zu characters", d->size - 1);
        copy_str(dst, d->size, null ? "" : s);
        break;
    case K_NAME:
    case K_ENUM: {
        int i = name_index(d->names, s);
        if (i < 0) {
            join_names(d->names, allowed, sizeof allowed);
            return fail_at(x, KVF_EINVAL, key, line, "unknown value '%s' (allowed: %s)", s,
                           allowed);
        }
        if (d->kind == K_NAME)
            copy_str(dst, d->size, s);
        else
            *(int *)dst = i;
        break;
    }
    case K_FMT: {
        trc_format f;
        if (!trc_format_parse(s, &f)) {
            size_t used = 0;
            allowed[0] = '\0';
            for (int i = TRC_FMT_AUTO; i <= TRC_FMT_KVFLEET; i++)
                used += (size_t)snprintf(allowed + used, sizeof allowed - used, "%s%s",
                                         i ? "|" : "", trc_format_name((trc_format)i));
            return fail_at(x, KVF_EINVAL, key, line, "unknown value '%s' (allowed: %s)", s,
                           allowed);
        }
        *(trc_format *)dst = f;
        break;
    }
    case K_BOOL: {
        bool b;
        if (!parse_bool(s, &b))
            return fail_at(x, KVF_EPARSE, key, line, "expects true or false, got '%s'", s);
        *(bool *)dst = b;
        break;
    }
    case K_U64: {
        char *end;
        errno = 0;
        if (*s == '-' || !isdigit((unsigned char)*s))
            return fail_at(x, KVF_EPARSE, key, line, "expects a whole number >= 0, got '%s'", s);
        unsigned long long v = strtoull(s, &end, 0);
        if (errno || *end)
            return fail_at(x, KVF_EPARSE, key, line, "expects a whole number >= 0, got '%s'", s);
        *(uint64_t *)dst = (uint64_t)v;
        break;
    }
    case K_NUM: {
        double v = 0;
        if (!null) {
            if (!parse_number(s, &v))
                return fail_at(x, KVF_EPARSE, key, line, "expects %s, got '%s'",
                               d->flags & F_INT ? "a whole number" : "a number", s);
            if (d->flags & F_INT && v != floor(v))
                return fail_at(x, KVF_EINVAL, key, line, "expects a whole number, got %s", s);
            bool low = d->flags & F_GT ? !(v > d->lo) : !(v >= d->lo);
            if (low || v > d->hi)
                return fail_at(x, KVF_EINVAL, key, line, "must be in %s%g, %g], got %s",
                               d->flags & F_GT ? "(" : "[", d->lo, d->hi, s);
        }
        store_num(dst, (num_type)d->ntype, v * d->scale);
        if (d->off2) store_num((char *)c + d->off2, (num_type)d->ntype, v * d->scale);
        break;
    }
    case K_DUR: {
        int64_t ns;
        if (!strcmp(s, "never"))
            ns = -1;
        else if (!kvf_parse_duration_ns(s, &ns))
            return fail_at(x, KVF_EPARSE, key, line,
                           "expects a duration (e.g. 7d, 12h, 90m, 30s) or never, got '%s'", s);
        *(int64_t *)dst = ns;
        break;
    }
    case K_CAP: {
        double v;
        if (!strcmp(s, "unlimited"))
            v = -1;
        else if (parse_number(s, &v)) {
            if (v < 0)
                return fail_at(x, KVF_EINVAL, key, line,
                               "must be >= 0 (0 = off) or unlimited, got %s", s);
            v *= d->scale;
        } else if (!kvf_parse_bytes(s, &v))
            return fail_at(x, KVF_EPARSE, key, line,
                           "expects a number, a size like 100PiB, or unlimited, got '%s'", s);
        if (v > 1e21)
            return fail_at(x, KVF_EINVAL, key, line,
                           "must be at most 1e21 bytes (1 ZB) or unlimited, got '%s'", s);
        *(double *)dst = v;
        break;
    }
    case K_SCHEDULE:
        break; // handled above
    }
    return KVF_OK;
}

// Writes a node as YAML flow text ("[1, 2]", "{a: 1}", or the scalar itself) for economics.
static void flow_text(yaml_document_t *doc, const yaml_node_t *n, char *out, size_t cap,
                      size_t *used) {
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (*used < cap) *used += (size_t)snprintf(out + *used, cap - *used, __VA_ARGS__);         \
    } while (0)
    if (n->type == YAML_SCALAR_NODE) {
        PUT("%s", is_null(n) ? "null" : scalar(n));
    } else if (n->type == YAML_SEQUENCE_NODE) {
        PUT("[");
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++) {
            if (it != n->data.sequence.items.start) PUT(", ");
            flow_text(doc, yaml_document_get_node(doc, *it), out, cap, used);
        }
        PUT("]");
    } else {
        PUT("{");
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
             p++) {
            if (p != n->data.mapping.pairs.start) PUT(", ");
            flow_text(doc, yaml_document_get_node(doc, p->key), out, cap, used);
            PUT(": ");
            flow_text(doc, yaml_document_get_node(doc, p->value), out, cap, used);
        }
        PUT("}");
    }
#undef PUT
}

// The keys directly below section prefix ("" = top level), for "unknown key" messages.
static void list_children(const char *prefix, char *out, size_t cap) {
    size_t plen = strlen(prefix), used = 0;
    out[0] = '\0';
    const char *seen[128];
    size_t n_seen = 0;
    for (size_t pass = 0; pass < 2; pass++) {
        size_t count = pass ? N_SECTIONS : N_KEYS;
        for (size_t i = 0; i < count; i++) {
            const char *k = pass ? sections[i] : key_table[i].key;
            if (plen && (strncmp(k, prefix, plen) || k[plen] != '.')) continue;
            const char *rest = plen ? k + plen + 1 : k;
            size_t len = strcspn(rest, ".");
            bool dup = false;
            for (size_t j = 0; j < n_seen && !dup; j++)
                dup = strlen(seen[j]) >= len && !strncmp(seen[j], rest, len) &&
                      (seen[j][len] == '\0' || seen[j][len] == '.');
            if (dup || n_seen >= 128) continue;
            seen[n_seen++] = rest;
            if (used < cap)
                used += (size_t)snprintf(out + used, cap - used, "%s%.*s", n_seen > 1 ? ", " : "",
                                         (int)len, rest);
        }
    }
}

static kvf_status apply_node(apply_ctx *x, const char *key, const yaml_node_t *n, int line);

static kvf_status apply_mapping(apply_ctx *x, const char *prefix, const yaml_node_t *n) {
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = yaml_document_get_node(x->doc, p->key);
        const yaml_node_t *v = yaml_document_get_node(x->doc, p->value);
        if (k->type != YAML_SCALAR_NODE || !*scalar(k))
            return fail_at(x, KVF_EPARSE, *prefix ? prefix : "(top level)", node_line(k),
                           "a key must be a non-empty scalar, got %s", node_kind_name(k));
        for (yaml_node_pair_t *q = n->data.mapping.pairs.start; q < p; q++) {
            const yaml_node_t *k2 = yaml_document_get_node(x->doc, q->key);
            if (k2->type == YAML_SCALAR_NODE && !strcmp(scalar(k2), scalar(k))) {
                char full[256];
                snprintf(full, sizeof full, "%s%s%s", prefix, *prefix ? "." : "", scalar(k));
                return fail_at(x, KVF_EPARSE, full, node_line(k),
                               "duplicate key (first at line %d)", node_line(k2));
            }
        }
        char full[256];
        int len = snprintf(full, sizeof full, "%s%s%s", prefix, *prefix ? "." : "", scalar(k));
        if (len < 0 || (size_t)len >= sizeof full)
            return fail_at(x, KVF_EPARSE, prefix, node_line(k), "key too long");
        kvf_status st = apply_node(x, full, v, node_line(k));
        if (st) return st;
    }
    return KVF_OK;
}

// Applies node n at dotted key; line is where the key stands in the file (ignored for --set,
// which records -1).
static kvf_status apply_node(apply_ctx *x, const char *key, const yaml_node_t *n, int kline) {
    sim_config *c = x->c;
    int line = x->path ? kline : -1;
    const keydef *d = find_key(key);
    if (d) {
        kvf_status st = apply_leaf(x, d, key, n, kline);
        if (st) return st;
        record_line(c, key, line);
        return KVF_OK;
    }
    if (under_economics(key)) {
        if (n->type == YAML_MAPPING_NODE) {
            record_line(c, key, line);
            return apply_mapping(x, key, n);
        }
        char text[1024];
        size_t used = 0;
        flow_text(x->doc, n, text, sizeof text, &used);
        kvf_err e = {0};
        kvf_status st = rpt_econ_config_set(&c->econ, key + 10, text, &e);
        if (st) {
            // reports/ may already name the key; do not say it twice.
            const char *msg = e.msg;
            size_t kl = strlen(key);
            if (!strncmp(msg, key, kl) && !strncmp(msg + kl, ": ", 2))
                msg += kl + 2;
            else if (!strncmp(msg, key + 10, kl - 10) && !strncmp(msg + kl - 10, ": ", 2))
                msg += kl - 10 + 2;
            return fail_at(x, st, key, kline, "%s", msg);
        }
        record_line(c, key, line);
        return KVF_OK;
    }
    if (!strncmp(key, "published.", 10) && n->type != YAML_MAPPING_NODE) {
        char text[1024], why[200];
        size_t used = 0;
        flow_text(x->doc, n, text, sizeof text, &used);
        if (set_published(c, key, text, why, sizeof why))
            return fail_at(x, KVF_EPARSE, key, kline, "%s", why);
        record_line(c, key, line);
        return KVF_OK;
    }
    if (!strncmp(key, "published.", 10) && !strchr(key + 10, '.')) {
        record_line(c, key, line);
        return apply_mapping(x, key, n);
    }
    if (is_section(key)) {
        if (!strcmp(key, "workload.generate") && is_null(n)) {
            c->workload.gen.profile[0] = '\0';
            record_line(c, key, line);
            return KVF_OK;
        }
        if (n->type != YAML_MAPPING_NODE)
            return fail_at(x, KVF_EPARSE, key, kline, "expects a mapping, got %s%s%s%s",
                           node_kind_name(n), n->type == YAML_SCALAR_NODE ? " '" : "",
                           n->type == YAML_SCALAR_NODE ? scalar(n) : "",
                           n->type == YAML_SCALAR_NODE ? "'" : "");
        if (!strcmp(key, "workload.generate") && !c->workload.gen.profile[0])
            copy_str(c->workload.gen.profile, sizeof c->workload.gen.profile, "chatbot");
        record_line(c, key, line);
        return apply_mapping(x, key, n);
    }
    // Unknown: name the keys that exist under the nearest known parent section.
    char parent[256], allowed[700];
    copy_str(parent, sizeof parent, key);
    for (;;) {
        char *dot = strrchr(parent, '.');
        if (!dot) {
            parent[0] = '\0';
            break;
        }
        *dot = '\0';
        if (is_section(parent)) break;
    }
    list_children(parent, allowed, sizeof allowed);
    return fail_at(x, KVF_EPARSE, key, kline, "unknown key (known %s%s%s: %s)",
                   *parent ? "under '" : "at the top level", parent, *parent ? "'" : "", allowed);
}

// ---- loading ------------------------------------------------------------------------------

// c->dir for a scenario file: the parent of the nearest enclosing `scenarios` folder, else the
// file's own folder; absolute.
static void scenario_dir(const char *path, char *out, size_t n) {
    char *real = realpath(path, NULL);
    char buf[SIM_PATH_MAX];
    copy_str(buf, sizeof buf, real ? real : path);
    free(real);
    char *slash = strrchr(buf, '/');
    if (!slash) {
        copy_str(out, n, ".");
        return;
    }
    *slash = '\0';
    if (!buf[0]) copy_str(buf, sizeof buf, "/");
    // Walk up looking for a folder named "scenarios".
    char probe[SIM_PATH_MAX];
    copy_str(probe, sizeof probe, buf);
    for (;;) {
        char *s = strrchr(probe, '/');
        if (!s) break;
        if (!strcmp(s + 1, "scenarios")) {
            *s = '\0';
            copy_str(out, n, probe[0] ? probe : "/");
            return;
        }
        if (s == probe) break;
        *s = '\0';
    }
    copy_str(out, n, buf);
}

static kvf_status yaml_problem(kvf_err *err, const char *where, const yaml_parser_t *p) {
    const char *problem = p->problem ? p->problem : "cannot parse";
    if (p->context)
        return kvf_fail(err, KVF_EPARSE, "%s:%d: malformed YAML: %s (%s at line %d)", where,
                        (int)p->problem_mark.line + 1, problem, p->context,
                        (int)p->context_mark.line + 1);
    return kvf_fail(err, KVF_EPARSE, "%s:%d: malformed YAML: %s", where,
                    (int)p->problem_mark.line + 1, problem);
}

kvf_status sim_config_load(sim_config *c, const char *path, kvf_err *err) {
    sim_config_default(c);
    char *text = NULL;
    size_t len = 0;
    kvf_status st = kvf_read_file(path, &text, &len, err);
    if (st) return st;
    if (strlen(path) >= sizeof c->path) {
        free(text);
        return kvf_fail(err, KVF_EINVAL, "%s: path too long", path);
    }
    if ((st = mdl_yaml_guard(path, text, len, err))) {
        free(text);
        return st;
    }
    copy_str(c->path, sizeof c->path, path);
    scenario_dir(path, c->dir, sizeof c->dir);
    // Default name: the file's stem.
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t stem = strcspn(base, ".");
    if (stem > 0 && stem < sizeof c->name)
        snprintf(c->name, sizeof c->name, "%.*s", (int)stem, base);

    yaml_parser_t parser;
    yaml_document_t doc;
    bool have_doc = false;
    if (!yaml_parser_initialize(&parser)) {
        free(text);
        return kvf_fail(err, KVF_ENOMEM, "%s: cannot initialise the YAML parser", path);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        st = yaml_problem(err, path, &parser);
        goto done;
    }
    have_doc = true;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root) {
        // A second document would be silently ignored otherwise.
        yaml_document_t doc2;
        if (!yaml_parser_load(&parser, &doc2)) {
            st = yaml_problem(err, path, &parser);
            goto done;
        }
        yaml_node_t *root2 = yaml_document_get_root_node(&doc2);
        int line2 = root2 ? node_line(root2) : 0;
        yaml_document_delete(&doc2);
        if (root2) {
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: a second YAML document; a scenario is one", path,
                          line2);
            goto done;
        }
        if (root->type != YAML_MAPPING_NODE && !is_null(root)) {
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: a scenario must be a mapping of keys, got %s",
                          path, node_line(root), node_kind_name(root));
            goto done;
        }
        if (root->type == YAML_MAPPING_NODE) {
            apply_ctx x = {.c = c, .path = path, .doc = &doc, .err = err};
            st = apply_mapping(&x, "", root);
            if (st) goto done;
        }
    }
    sync_derived(c);
    st = KVF_OK;
done:
    if (have_doc) yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(text);
    return st;
}

kvf_status sim_config_set(sim_config *c, const char *assignment, kvf_err *err) {
    const char *eq = strchr(assignment, '=');
    if (!eq) return kvf_fail(err, KVF_EINVAL, "--set %s: expected KEY=VALUE", assignment);
    char key[256];
    const char *k0 = assignment, *k1 = eq;
    while (k0 < k1 && isspace((unsigned char)*k0))
        k0++;
    while (k1 > k0 && isspace((unsigned char)k1[-1]))
        k1--;
    if (k1 == k0) return kvf_fail(err, KVF_EINVAL, "--set %s: empty key", assignment);
    if ((size_t)(k1 - k0) >= sizeof key)
        return kvf_fail(err, KVF_EINVAL, "--set %s: key too long", assignment);
    memcpy(key, k0, (size_t)(k1 - k0));
    key[k1 - k0] = '\0';
    const char *value = eq + 1;

    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return kvf_fail(err, KVF_ENOMEM, "--set %s: cannot initialise the YAML parser", key);
    kvf_status st = mdl_yaml_guard("--set", value, strlen(value), err);
    if (st) {
        yaml_parser_delete(&parser);
        if (err) err->code = KVF_EINVAL;
        return KVF_EINVAL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)value, strlen(value));
    if (!yaml_parser_load(&parser, &doc)) {
        st = kvf_fail(err, KVF_EINVAL, "--set %s: malformed value '%s': %s", key, value,
                      parser.problem ? parser.problem : "cannot parse");
        yaml_parser_delete(&parser);
        return st;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root) {   // a value is one document: a second one would be silently ignored
        yaml_document_t doc2;
        bool two = !yaml_parser_load(&parser, &doc2);
        if (!two) {
            two = yaml_document_get_root_node(&doc2) != NULL;
            yaml_document_delete(&doc2);
        }
        if (two) {
            yaml_document_delete(&doc);
            yaml_parser_delete(&parser);
            return kvf_fail(err, KVF_EINVAL,
                            "--set %s: the value holds more than one YAML document ('---')", key);
        }
    }
    apply_ctx x = {.c = c, .path = NULL, .doc = &doc, .err = err};
    if (!root) {
        // An empty value is null.
        yaml_document_delete(&doc);
        if (!yaml_document_initialize(&doc, NULL, NULL, NULL, 1, 1)) {
            yaml_parser_delete(&parser);
            return kvf_fail(err, KVF_ENOMEM, "--set %s: out of memory", key);
        }
        int id =
            yaml_document_add_scalar(&doc, NULL, (yaml_char_t *)"", 0, YAML_PLAIN_SCALAR_STYLE);
        root = yaml_document_get_node(&doc, id);
    }
    st = apply_node(&x, key, root, 0);
    // --set errors are usage errors: report them as such whatever the parse code.
    if (st == KVF_EPARSE) {
        st = KVF_EINVAL;
        if (err) err->code = st;
    }
    if (!st) sync_derived(c);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return st;
}

// ---- validation ---------------------------------------------------------------------------

void sim_config_resolve(const sim_config *c, const char *p, char *out, size_t n) {
    if (p[0] == '/' || !c->dir[0] || !strcmp(c->dir, "."))
        copy_str(out, n, p);
    else
        snprintf(out, n, "%s/%s", c->dir, p);
}

static bool is_file(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 && S_ISREG(s.st_mode);
}

// Why path is not a usable input file: "No such file" (missing) or what it is instead.
static const char *not_file_why(const char *path) {
    struct stat s;
    if (stat(path, &s) != 0) return "No such file";
    if (S_ISDIR(s.st_mode)) return "is a directory, not a file";
    if (S_ISFIFO(s.st_mode)) return "is a FIFO (pipe), not a regular file";
    if (S_ISCHR(s.st_mode) || S_ISBLK(s.st_mode)) return "is a device, not a regular file";
    return "is not a regular file";
}

__attribute__((format(printf, 4, 5))) static kvf_status
vfail(const sim_config *c, kvf_err *err, const char *key, const char *fmt, ...) {
    char where[SIM_PATH_MAX + 128], what[768];
    sim_config_where(c, key, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    kvf_status code = strstr(what, "No such file") ? KVF_ENOENT : KVF_EINVAL;
    return kvf_fail(err, code, "%s: %s", where, what);
}

// A model/hardware name: a path when it has a '/' or ends in .yaml/.yml, else
// <dir>/<folder>/<name>.yaml, falling back to the installed kvfleet's own models folder (so a
// scenario kept anywhere can name the bundled models).
static void resolve_named(const sim_config *c, const char *name, const char *folder, char *out,
                          size_t n) {
    if (strchr(name, '/') || kvf_endswith(name, ".yaml") || kvf_endswith(name, ".yml")) {
        sim_config_resolve(c, name, out, n);
        return;
    }
    char rel[SIM_PATH_MAX + 64];
    snprintf(rel, sizeof rel, "%s/%s.yaml", folder, name);
    sim_config_resolve(c, rel, out, n);
    struct stat sb;
    if (stat(out, &sb) != 0) {
        char alt[SIM_PATH_MAX + 128];
        snprintf(alt, sizeof alt, "%s/%s/%s.yaml", KVF_SOURCE_DIR, folder, name);
        if (stat(alt, &sb) == 0) snprintf(out, n, "%s", alt);
    }
}

void sim_config_model_path(const sim_config *c, char *out, size_t n) {
    resolve_named(c, c->model, "models", out, n);
}

void sim_config_hardware_path(const sim_config *c, char *out, size_t n) {
    resolve_named(c, c->hardware, "models/hardware", out, n);
}

void sim_config_profile_path(const sim_config *c, char *out, size_t n) {
    sim_config_resolve(c, c->profile, out, n);
}

// Every pool key applies to every pool kind that has it, as one queue policy (scheduler,
// queue_limit, max_batch_requests, and the token budget for the pools that batch tokens);
// the few that cannot apply are refused when given (and left out of sim_config_to_json):
//   vision  batches images: max_batch_tokens, chunk_tokens and kv_tokens do not apply
//   decode  steps one token per sequence: chunk_tokens does not apply
//   decode  in colocated mode: its instances join the prefill pool's step model, so their
//           shape (gpus_per_instance, tp, ep) must be the prefill pool's; they keep the decode
//           pool's queue policy and KV capacity (and in colocated mode chunk_tokens applies)
// Returns why key cannot apply to c, or NULL when it can.
static const char *pool_key_refused(const sim_config *c, const char *key) {
    static const char *const vision_no[] = {"max_batch_tokens", "chunk_tokens", "kv_tokens", NULL};
    static const char *const decode_no[] = {"chunk_tokens", NULL};
    static const struct {
        const char *pool;
        const char *const *keys;
        const char *why;
    } rules[] = {
        {"vision", vision_no, "the vision pool batches images, not tokens or KV"},
        {"decode", decode_no, "decode steps compute one token per sequence: there is nothing to chunk"},
    };
    for (size_t r = 0; r < sizeof rules / sizeof *rules; r++) {
        if (r == 1 && c->cluster.mode == SIM_COLOCATED) continue;   // colocated decode instances chunk
        for (int k = 0; rules[r].keys[k]; k++) {
            char name[96];
            snprintf(name, sizeof name, "cluster.%s.%s", rules[r].pool, rules[r].keys[k]);
            if (!strcmp(name, key)) return rules[r].why;
        }
    }
    return NULL;
}

static kvf_status check_pool_keys_apply(const sim_config *c, kvf_err *err) {
    if (c->cluster.mode == SIM_COLOCATED && c->cluster.decode.instances > 0) {
        const sim_pool_cfg *p = &c->cluster.prefill, *d = &c->cluster.decode;
        if (d->gpus_per_instance != p->gpus_per_instance || d->tp != p->tp || d->ep != p->ep)
            return vfail(c, err, "cluster.decode.gpus_per_instance",
                         "colocated instances share one shape: cluster.decode's gpus_per_instance, tp "
                         "and ep (%d, %d, %d) must equal cluster.prefill's (%d, %d, %d)",
                         d->gpus_per_instance, d->tp, d->ep, p->gpus_per_instance, p->tp, p->ep);
    }
    for (int32_t i = 0; i < c->n_key_lines; i++) {
        const char *why = pool_key_refused(c, c->key_lines[i].key);
        if (why) return vfail(c, err, c->key_lines[i].key, "does not apply: %s", why);
    }
    return KVF_OK;
}

static kvf_status check_pool(const sim_config *c, const sim_pool_cfg *p, const char *pool,
                             kvf_err *err) {
    char key[64];
    snprintf(key, sizeof key, "cluster.%s.instances", pool);
    if (p->instances < 0) return vfail(c, err, key, "must be >= 0, got %d", p->instances);
    snprintf(key, sizeof key, "cluster.%s.gpus_per_instance", pool);
    if (p->gpus_per_instance < 1)
        return vfail(c, err, key, "must be >= 1, got %d", p->gpus_per_instance);
    snprintf(key, sizeof key, "cluster.%s.tp", pool);
    if (p->tp < 0 || (p->tp > 0 && p->gpus_per_instance % p->tp))
        return vfail(c, err, key, "must divide gpus_per_instance (%d), got %d",
                     p->gpus_per_instance, p->tp);
    snprintf(key, sizeof key, "cluster.%s.ep", pool);
    if (p->ep < 0 || (p->ep > 0 && p->gpus_per_instance % p->ep))
        return vfail(c, err, key, "must divide gpus_per_instance (%d), got %d",
                     p->gpus_per_instance, p->ep);
    snprintf(key, sizeof key, "cluster.%s.max_batch_tokens", pool);
    if (p->max_batch_tokens < 1)
        return vfail(c, err, key, "must be >= 1, got %lld", (long long)p->max_batch_tokens);
    snprintf(key, sizeof key, "cluster.%s.chunk_tokens", pool);
    if (p->chunk_tokens < 0)
        return vfail(c, err, key, "must be >= 0, got %lld", (long long)p->chunk_tokens);
    snprintf(key, sizeof key, "cluster.%s.max_batch_requests", pool);
    if (p->max_batch_requests < 1)
        return vfail(c, err, key, "must be >= 1, got %d", p->max_batch_requests);
    snprintf(key, sizeof key, "cluster.%s.queue_limit", pool);
    if (p->queue_limit < 0)
        return vfail(c, err, key, "must be >= 0, got %lld", (long long)p->queue_limit);
    return KVF_OK;
}

// The large-EP keys apply only to an MoE model whose experts a pool spreads over GPUs
// (route_nodes: over more than one scale-up domain); anything else is refused.
static kvf_status check_moe_keys(const sim_config *c, kvf_err *err) {
    if (!c->moe.route_nodes && !c->moe.two_batch) return KVF_OK;
    const char *key = c->moe.route_nodes ? "moe.route_nodes" : "moe.two_batch_overlap";
    char path[SIM_PATH_MAX + 128], dir[SIM_PATH_MAX + 128];
    mdl_model m;
    mdl_hardware hw;
    kvf_err e2 = {0};
    sim_config_resolve(c, "models", dir, sizeof dir);
    sim_config_model_path(c, path, sizeof path);
    if (mdl_model_load(&m, path, dir, &e2)) return vfail(c, err, "model", "%s", e2.msg);
    sim_config_hardware_path(c, path, sizeof path);
    if (mdl_hardware_load(&hw, path, dir, &e2)) return vfail(c, err, "hardware", "%s", e2.msg);
    if (!m.experts) return vfail(c, err, key, "applies to MoE models only (%s has no experts)", m.name);
    const sim_pool_cfg *pools[] = {&c->cluster.prefill, &c->cluster.decode};
    uint32_t max_ep = 0;
    for (int i = 0; i < 2; i++) {
        if (pools[i]->instances < 1) continue;
        int ep = pools[i]->ep > 0 ? pools[i]->ep : pools[i]->gpus_per_instance;
        if ((uint32_t)ep > max_ep) max_ep = (uint32_t)ep;
    }
    if (max_ep <= 1) return vfail(c, err, key, "needs a pool with expert parallelism (ep > 1)");
    if (c->moe.route_nodes) {
        uint32_t dom = hw.scaleup_domain ? hw.scaleup_domain : 8;
        if (max_ep <= dom)
            return vfail(c, err, "moe.route_nodes",
                         "no pool spreads experts over more than one scale-up domain (largest "
                         "ep %u, %s domain %u GPUs)", max_ep, hw.name, dom);
        if (c->moe.route_nodes >= m.experts_active)
            return vfail(c, err, "moe.route_nodes",
                         "%u does not limit routing: a token has only %u experts", c->moe.route_nodes,
                         m.experts_active);
    }
    return KVF_OK;
}

kvf_status sim_config_validate(const sim_config *c, kvf_err *err) {
    char path[SIM_PATH_MAX + 128];
    kvf_status st;

    if (!c->model[0]) return vfail(c, err, "model", "must not be empty");
    sim_config_model_path(c, path, sizeof path);
    if (!is_file(path)) return vfail(c, err, "model", "%s: %s", path, not_file_why(path));
    if (!c->hardware[0]) return vfail(c, err, "hardware", "must not be empty");
    sim_config_hardware_path(c, path, sizeof path);
    if (!is_file(path)) return vfail(c, err, "hardware", "%s: %s", path, not_file_why(path));

    if (!strcmp(c->step_model, "calibrated")) {
        if (!c->profile[0])
            return vfail(c, err, "step_model", "calibrated needs a profile (key 'profile')");
        sim_config_profile_path(c, path, sizeof path);
        if (!is_file(path)) return vfail(c, err, "profile", "%s: %s", path, not_file_why(path));
    } else if (strcmp(c->step_model, "roofline") && strcmp(c->step_model, "table")) {
        return vfail(c, err, "step_model",
                     "unknown value '%s' (allowed: roofline|calibrated|table)", c->step_model);
    }
    if ((st = check_moe_keys(c, err))) return st;

    for (int k = 0; k < c->n_published; k++) {
        const sim_published *p = &c->published[k];
        char key[96];
        snprintf(key, sizeof key, "published.%s", p->name);
        if (!isfinite(p->value)) return vfail(c, err, key, "needs a value");
        if (p->output && !p->summary_key[0])
            return vfail(c, err, key, "an output needs the summary_key it compares with");
        if (!isnan(p->high) && p->high < p->value)
            return vfail(c, err, key, "high %g is below value %g", p->high, p->value);
    }
    if (c->workload.gen.profile[0]) {
        if (name_index(gen_profiles, c->workload.gen.profile) < 0)
            return vfail(c, err, "workload.generate.profile",
                         "unknown value '%s' (allowed: chatbot|agent|coding|mixed)",
                         c->workload.gen.profile);
        if (!(c->workload.gen.rate_rps > 0))
            return vfail(c, err, "workload.generate.rate_rps", "must be > 0");
        if (!(c->workload.gen.duration_s > 0))
            return vfail(c, err, "workload.generate.duration_s", "must be > 0");
        if (c->workload.gen.rate_rps * c->workload.gen.duration_s > SIM_MAX_REQUESTS)
            return vfail(c, err, "workload.generate.rate_rps",
                         "rate_rps x duration_s = %g requests, over the %g a run may hold",
                         c->workload.gen.rate_rps * c->workload.gen.duration_s, SIM_MAX_REQUESTS);
        double mix = c->workload.gen.mix[0] + c->workload.gen.mix[1] + c->workload.gen.mix[2];
        if (mix > 0 && strcmp(c->workload.gen.profile, "mixed"))
            return vfail(c, err, "workload.generate.mix",
                         "applies only to profile mixed (profile is '%s')", c->workload.gen.profile);
        if (c->workload.gen.days > 0 && c->workload.opt.time_scale != 1.0)
            return vfail(c, err, "workload.time_scale",
                         "would stretch the days of generate.days; set generate.rate_rps "
                         "(or workload.rate_rps) instead");
        if (c->workload.gen.days > 0 && c->workload.gen.mean_turns > 0 && c->workload.gen.mean_turns < 1)
            return vfail(c, err, "workload.generate.mean_turns",
                         "must be >= 1 (or 0, the profile's) with generate.days");
    } else {
        if (!c->workload.trace[0])
            return vfail(c, err, "workload.trace",
                         "no trace given (set workload.trace or workload.generate)");
        sim_config_resolve(c, c->workload.trace, path, sizeof path);
        if (!is_file(path))
            return vfail(c, err, "workload.trace", "%s: %s", path, not_file_why(path));
    }
    if (!(c->workload.opt.time_scale > 0)) return vfail(c, err, "workload.time_scale", "must be > 0");
    if (!(c->workload.opt.length_scale > 0))
        return vfail(c, err, "workload.length_scale", "must be > 0");
    if (c->workload.opt.rate_rps < 0) return vfail(c, err, "workload.rate_rps", "must be >= 0");
    if (c->workload.opt.end_ns && c->workload.opt.end_ns <= c->workload.opt.start_ns)
        return vfail(c, err, "workload.end_s", "must be after workload.start_s");

    if ((st = check_pool(c, &c->cluster.vision, "vision", err))) return st;
    if ((st = check_pool(c, &c->cluster.prefill, "prefill", err))) return st;
    if ((st = check_pool(c, &c->cluster.decode, "decode", err))) return st;
    for (int32_t e = 0; e < c->cluster.n_schedule; e++) {
        const sim_schedule_entry *s = &c->cluster.schedule[e];
        char key[64];
        const int32_t want[2] = {s->prefill, s->decode}, have[2] = {c->cluster.prefill.instances,
                                                                    c->cluster.decode.instances};
        static const char *const pn[2] = {"prefill", "decode"};
        for (int k = 0; k < 2; k++) {
            snprintf(key, sizeof key, "cluster.schedule[%d].%s", e, pn[k]);
            if (want[k] > have[k])
                return vfail(c, err, "cluster.schedule",
                             "%s asks %d instances, more than the %d of cluster.%s.instances",
                             key, want[k], have[k], pn[k]);
            if (want[k] == 0 && have[k] > 0)
                return vfail(c, err, "cluster.schedule",
                             "%s asks 0 instances; a pool keeps at least 1 running", key);
        }
    }
    if ((st = check_pool_keys_apply(c, err))) return st;
    if (c->cluster.mode == SIM_DISAGGREGATED) {
        if (c->cluster.prefill.instances < 1)
            return vfail(c, err, "cluster.prefill.instances",
                         "disaggregated mode needs at least 1 prefill instance, got %d",
                         c->cluster.prefill.instances);
        if (c->cluster.decode.instances < 1)
            return vfail(c, err, "cluster.decode.instances",
                         "disaggregated mode needs at least 1 decode instance, got %d",
                         c->cluster.decode.instances);
    } else if (c->cluster.prefill.instances + c->cluster.decode.instances < 1) {
        return vfail(c, err, "cluster.mode",
                     "colocated mode needs at least 1 instance (cluster.prefill.instances + "
                     "cluster.decode.instances)");
    }
    sim_sample_plan plan;   // workload.sample_rate: every pool keeps at least one instance
    if ((st = sim_sample_plan_make(c, &plan, err))) return st;
    if (!(c->cluster.kv_transfer_Bps > 0))
        return vfail(c, err, "cluster.network.kv_transfer_GBps", "must be > 0");
    if (name_index(prefill_routers, c->router.prefill) < 0)
        return vfail(c, err, "router.prefill", "unknown value '%s'", c->router.prefill);
    if (name_index(decode_routers, c->router.decode) < 0)
        return vfail(c, err, "router.decode", "unknown value '%s'", c->router.decode);
    if (c->kv.block_tokens < 1) return vfail(c, err, "kv_cache.block_tokens", "must be >= 1");
    if (c->kv.hbm_cache_frac < 0 || c->kv.hbm_cache_frac > 1)
        return vfail(c, err, "kv_cache.hbm_cache_frac", "must be in [0, 1]");
    if (c->kv.activation_reserve < 0 || c->kv.activation_reserve >= 1)
        return vfail(c, err, "kv_cache.activation_reserve", "must be in [0, 1)");
    if (c->kv.dram.capacity_bytes != 0 && !(c->kv.dram.read_Bps > 0 && c->kv.dram.write_Bps > 0))
        return vfail(c, err, "kv_cache.dram.GBps", "must be > 0");
    if (c->kv.ssd.capacity_bytes != 0 && !(c->kv.ssd.read_Bps > 0 && c->kv.ssd.write_Bps > 0))
        return vfail(c, err, "kv_cache.ssd.read_GBps", "read and write bandwidth must be > 0");
    if (c->decoding.acceptance < 0 || c->decoding.acceptance > 1)
        return vfail(c, err, "speculative.acceptance", "must be in [0, 1]");
    if (!(c->slo.ttft_p90_ms > 0)) return vfail(c, err, "slo.ttft_p90_ms", "must be > 0");
    if (!(c->slo.tpot_p90_ms > 0)) return vfail(c, err, "slo.tpot_p90_ms", "must be > 0");
    if (!(c->output.sample_interval_s > 0))
        return vfail(c, err, "output.sample_interval_s", "must be > 0");
    return KVF_OK;
}

// ---- the resolved scenario as data (design.md §10 `config`) --------------------------------

// Paths are written absolute (resolved as the run resolved them), so the config runs the same
// from any folder.
static const char *const path_keys[] = {"model", "hardware", "profile", "workload.trace", NULL};

// The object at dotted prefix below root, created on the way ("a.b" of "a.b.c").
static json_t *json_section(json_t *root, const char *key, const char **leaf) {
    char part[SIM_KEY_MAX];
    const char *p = key, *dot;
    json_t *o = root;
    while ((dot = strchr(p, '.'))) {
        size_t n = (size_t)(dot - p);
        snprintf(part, sizeof part, "%.*s", (int)n, p);
        json_t *sub = json_object_get(o, part);
        if (!json_is_object(sub)) {
            sub = json_object();
            json_object_set_new(o, part, sub);
        }
        o = sub;
        p = dot + 1;
    }
    *leaf = p;
    return o;
}

static double load_num(const void *src, num_type t) {
    switch (t) {
    case NT_DBL: return *(const double *)src;
    case NT_I32: return *(const int32_t *)src;
    case NT_U32: return *(const uint32_t *)src;
    case NT_I64: return (double)*(const int64_t *)src;
    }
    return 0;
}

// The file value that stores back exactly (x * scale rounds to the stored value).
static double file_value(double stored, double scale) {
    double x = stored / scale;
    if (scale == 1 || x * scale == stored) return x;
    double up = x, down = x;
    for (int i = 0; i < 4; i++) {
        up = nextafter(up, INFINITY);
        down = nextafter(down, -INFINITY);
        if (up * scale == stored) return up;
        if (down * scale == stored) return down;
    }
    return x;
}

static json_t *num_json(double x, bool whole) {
    if (whole && x == floor(x) && fabs(x) < 9e15) return json_integer((json_int_t)x);
    return json_real(x);
}

static json_t *leaf_json(const sim_config *c, const keydef *d) {
    const char *src = (const char *)c + d->off;
    switch ((key_kind)d->kind) {
    case K_STR:
        if (!*src && d->flags & F_NULL) return json_null();
        for (int i = 0; path_keys[i]; i++)
            if (!strcmp(d->key, path_keys[i]) && *src) {
                char path[SIM_PATH_MAX + 160];
                if (!strcmp(d->key, "model")) sim_config_model_path(c, path, sizeof path);
                else if (!strcmp(d->key, "hardware")) sim_config_hardware_path(c, path, sizeof path);
                else sim_config_resolve(c, src, path, sizeof path);
                if (path[0] != '/') {   // relative to the current folder: make it absolute
                    char *real = realpath(path, NULL);
                    if (real) snprintf(path, sizeof path, "%s", real);
                    free(real);
                }
                return json_string(path);
            }
        return json_string(src);
    case K_NAME:
        return *src ? json_string(src) : json_null();
    case K_ENUM: {
        int i = *(const int *)src, n = 0;
        while (d->names[n]) n++;
        return i >= 0 && i < n ? json_string(d->names[i]) : json_null();
    }
    case K_FMT:
        return json_string(trc_format_name(*(const trc_format *)src));
    case K_BOOL:
        return json_boolean(*(const bool *)src);
    case K_U64: {
        uint64_t v = *(const uint64_t *)src;
        if (v <= (uint64_t)INT64_MAX) return json_integer((json_int_t)v);
        char buf[32];
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
        return json_string(buf);
    }
    case K_NUM: {
        double x = file_value(load_num(src, (num_type)d->ntype), d->scale);
        return num_json(x, d->ntype != NT_DBL || d->flags & F_INT);
    }
    case K_DUR: {
        int64_t ns = *(const int64_t *)src;
        char buf[48];
        if (ns < 0) return json_string("never");
        if (ns % KVF_NS_PER_S == 0) snprintf(buf, sizeof buf, "%llds", (long long)(ns / KVF_NS_PER_S));
        else return json_real((double)ns * 1e-9);   // bare number = seconds
        return json_string(buf);
    }
    case K_CAP: {
        double v = *(const double *)src;
        if (v < 0) return json_string("unlimited");
        return num_json(file_value(v, d->scale), false);
    }
    case K_SCHEDULE: {
        if (!c->cluster.n_schedule) return json_null();
        json_t *a = json_array();
        for (int32_t i = 0; i < c->cluster.n_schedule; i++) {
            const sim_schedule_entry *s = &c->cluster.schedule[i];
            json_t *e = json_object();
            json_object_set_new(e, "from_h", num_json(s->from_h, true));
            if (s->prefill >= 0) json_object_set_new(e, "prefill", json_integer(s->prefill));
            if (s->decode >= 0) json_object_set_new(e, "decode", json_integer(s->decode));
            json_array_append_new(a, e);
        }
        return a;
    }
    }
    return json_null();
}

json_t *sim_config_to_json(const sim_config *c) {
    json_t *root = json_object();
    bool generate = c->workload.gen.profile[0] != '\0';
    for (size_t i = 0; i < N_KEYS; i++) {
        const keydef *d = &key_table[i];
        // setting any workload.generate key turns the generator on: write them only when on
        if (!generate && !strncmp(d->key, "workload.generate.", 18)) continue;
        if (pool_key_refused(c, d->key)) continue;   // a key that cannot apply is refused
        const char *leaf = NULL;
        json_t *sec = json_section(root, d->key, &leaf);
        json_object_set_new(sec, leaf, leaf_json(c, d));
    }
    if (!generate) {
        const char *leaf = NULL;
        json_object_set_new(json_section(root, "workload.generate", &leaf), leaf, json_null());
    }
    json_object_set_new(root, "economics", rpt_econ_config_to_json(&c->econ));
    if (c->n_published) {
        json_t *pub = json_object();
        for (int32_t k = 0; k < c->n_published; k++) {
            const sim_published *p = &c->published[k];
            json_t *o = json_object();
            json_object_set_new(o, "value", json_real(p->value));
            if (!isnan(p->high)) json_object_set_new(o, "high", json_real(p->high));
            json_object_set_new(o, "role", json_string(p->output ? "output" : "input"));
            if (p->summary_key[0]) json_object_set_new(o, "summary_key", json_string(p->summary_key));
            json_object_set_new(o, "scale", json_real(p->scale));
            if (p->unit[0]) json_object_set_new(o, "unit", json_string(p->unit));
            if (p->rests_on[0]) json_object_set_new(o, "rests_on", json_string(p->rests_on));
            json_object_set_new(pub, p->name, o);
        }
        json_object_set_new(root, "published", pub);
    }
    return root;
}

// ---- the same as YAML text (libyaml's emitter) ----------------------------------------------

static int emit_scalar(yaml_emitter_t *em, const char *text, bool quote) {
    yaml_event_t ev;
    yaml_scalar_style_t style = quote ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, (int)strlen(text),
                                      !quote, quote, style))
        return 0;
    return yaml_emitter_emit(em, &ev);
}

// A string that a plain scalar would read as something else (a number, a bool, null) or that
// YAML cannot write plain is quoted.
static bool needs_quotes(const char *s) {
    double d;
    bool b;
    return !*s || parse_number(s, &d) || parse_bool(s, &b) || !strcmp(s, "null") ||
           !strcmp(s, "~") || strpbrk(s, ":#{}[],&*!|>'\"%@`") || isspace((unsigned char)*s) ||
           *s == '-' || *s == '?';
}

static int emit_json(yaml_emitter_t *em, const json_t *v) {
    yaml_event_t ev;
    if (json_is_object(v)) {
        if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return 0;
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            if (!emit_scalar(em, k, false) || !emit_json(em, x)) return 0;
        }
        return yaml_mapping_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev);
    }
    if (json_is_array(v)) {
        bool flat = true;   // a list of numbers is written on one line
        for (size_t i = 0; i < json_array_size(v); i++)
            flat = flat && !json_is_object(json_array_get(v, i));
        if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                                  flat ? YAML_FLOW_SEQUENCE_STYLE
                                                       : YAML_BLOCK_SEQUENCE_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return 0;
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!emit_json(em, json_array_get(v, i))) return 0;
        return yaml_sequence_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev);
    }
    if (json_is_string(v)) return emit_scalar(em, json_string_value(v), needs_quotes(json_string_value(v)));
    if (json_is_real(v)) {   // the shortest text that reads back as the same double
        char buf[40];
        double x = json_real_value(v);
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, x);
            if (strtod(buf, NULL) == x) break;
        }
        if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
        return emit_scalar(em, buf, false);
    }
    char *text = json_dumps(v, JSON_ENCODE_ANY);
    int ok = text ? emit_scalar(em, text, false) : 0;
    free(text);
    return ok;
}

static int yaml_to_buffer(void *data, unsigned char *buf, size_t size) {
    FILE *f = data;
    return fwrite(buf, 1, size, f) == size;
}

char *sim_config_to_yaml(const sim_config *c) {
    json_t *j = sim_config_to_json(c);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    yaml_emitter_t em;
    yaml_event_t ev;
    int ok = f && yaml_emitter_initialize(&em);
    if (ok) {
        yaml_emitter_set_output(&em, yaml_to_buffer, f);
        yaml_emitter_set_width(&em, 100);
        yaml_emitter_set_unicode(&em, 1);
        ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) &&
             yaml_emitter_emit(&em, &ev) &&
             yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) &&
             yaml_emitter_emit(&em, &ev) && emit_json(&em, j) &&
             yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&em, &ev) &&
             yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&em, &ev);
        yaml_emitter_delete(&em);
    }
    if (f) fclose(f);
    json_decref(j);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}
