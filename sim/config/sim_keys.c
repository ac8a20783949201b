// sim/config/sim_keys.c -- the key table: every scenario key, where its value goes in sim_config,
// its type, its allowed range in the file's unit (the only place a range lives) and the factor
// from the file's unit to the struct's (GB -> bytes, us -> ns, ...); the known sections.
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
static const char *const failure_modes[] = {"retry", "reject", NULL};
static const char *const scale_metrics[] = {"none", "queue", "utilization", "kv", NULL};
static const char *const precisions[] = {"auto", "bf16", "fp8", "fp4", NULL};   // mdl_prec order
static const char *const spec_methods[] = {"auto", "dspark", "draft", "none",
                                           NULL};   // sim_spec_method
static const char *const serving_presets[] = {"none", "vllm", "sglang", "trtllm", NULL};
static const char *const prefix_homes[] = {"slice", "free_blocks", NULL};
static const char *const admissions[] = {"preempt", "reserve", NULL};
static const char *const overflows[] = {"reject", "truncate", NULL};
static const char *const buckets[] = {"as_recorded", "spread", NULL};
static const char *const routings[] = {"balanced", "power_law", NULL};   // MDL_ROUTE_* order
static const char *const gen_profiles[] = {"chatbot", "agent", "coding", "mixed", NULL};
static const char *const gen_arrivals[] = {"poisson", "gamma", "diurnal", NULL};
#define prefill_routers sim_prefill_router_names   // the policy tables of sim_router.c
#define decode_routers sim_decode_router_names

#define POOL_KEYS(p, f)                                                                            \
    NUM("cluster." #p ".instances", f.instances, NT_I32, F_INT, 0, 1e5, 1),                        \
        NUM("cluster." #p ".gpus_per_instance", f.gpus_per_instance, NT_I32, F_INT, 1, 4096, 1),   \
        NUM("cluster." #p ".tp", f.tp, NT_I32, F_INT, 0, 4096, 1),                                 \
        NUM("cluster." #p ".ep", f.ep, NT_I32, F_INT, 0, 4096, 1),                                 \
        NUM("cluster." #p ".max_batch_tokens", f.max_batch_tokens, NT_I64, F_INT, 1, 1e8, 1),      \
        NUM("cluster." #p ".chunk_tokens", f.chunk_tokens, NT_I64, F_INT, 0, 1e8, 1),              \
        NUM("cluster." #p ".max_batch_requests", f.max_batch_requests, NT_I32, F_INT, 1, 1e6, 1),  \
        ENUM("cluster." #p ".scheduler", f.scheduler, schedulers),                                 \
        NUM("cluster." #p ".queue_limit", f.queue_limit, NT_I64, F_INT, 0, 1e9, 1),                \
        NUM("cluster." #p ".kv_tokens", f.kv_tokens, NT_I64, F_INT, 0, 1e12, 1),                   \
        STR("cluster." #p ".hardware", f.hardware, F_NULL),                                        \
        ENUM("cluster." #p ".precision.weights", f.prec_weights, precisions),                      \
        ENUM("cluster." #p ".precision.activations", f.prec_activations, precisions),              \
        ENUM("cluster." #p ".autoscale.metric", f.autoscale.metric, scale_metrics),                \
        NUM("cluster." #p ".autoscale.up", f.autoscale.up, NT_DBL, 0, 0, 1e9, 1),                  \
        NUM("cluster." #p ".autoscale.down", f.autoscale.down, NT_DBL, 0, 0, 1e9, 1),              \
        NUM("cluster." #p ".autoscale.min", f.autoscale.min, NT_I32, F_INT, 0, 1e5, 1),            \
        NUM("cluster." #p ".autoscale.max", f.autoscale.max, NT_I32, F_INT, 0, 1e5, 1),            \
        NUM("cluster." #p ".autoscale.cooldown_s", f.autoscale.cooldown_ns, NT_DBL, 0, 0, 8.64e5,  \
            1e9),                                                                                  \
        NUM("cluster." #p ".autoscale.startup_s", f.autoscale.startup_ns, NT_DBL, 0, 0, 8.64e4,    \
            1e9),                                                                                  \
        NUM("cluster." #p ".failures.mtbf_h", f.failures.mtbf_ns, NT_DBL, 0, 0, 1e7, 3.6e12),      \
        NUM("cluster." #p ".failures.mttr_s", f.failures.mttr_ns, NT_DBL, 0, 0, 1e8, 1e9),         \
        ENUM("cluster." #p ".failures.requests", f.failures.reject, failure_modes)

// slo.classes.<class>.<metric>.<stat>: a class's bound (ms; 0 = none) on TTFT, TPOT, E2E at
// p50, p90, p99, in the order of slo.cls_ms[class][metric][stat].
#define SLO_CLASS_KEY(c, k, m, mi, q, qi)                                                          \
    NUM("slo.classes." #c "." #m "_ms." #q, slo.cls_ms[k][mi][qi], NT_DBL, 0, 0, 8.64e7, 1)
#define SLO_CLASS_METRIC(c, k, m, mi)                                                              \
    SLO_CLASS_KEY(c, k, m, mi, p50, 0), SLO_CLASS_KEY(c, k, m, mi, p90, 1),                        \
        SLO_CLASS_KEY(c, k, m, mi, p99, 2)
#define SLO_CLASS_KEYS(c, k)                                                                       \
    SLO_CLASS_METRIC(c, k, ttft, 0), SLO_CLASS_METRIC(c, k, tpot, 1), SLO_CLASS_METRIC(c, k, e2e, 2)

const keydef sim_key_table[] = {
    STR("name", name, 0),
    {"seed", K_U64, 0, 0, OFF(seed), SZ(seed), 0, 0, 0, 1, NULL},
    STR("model", model, 0),
    STR("hardware", hardware, 0),
    NAME("step_model", step_model, step_models),
    STR("profile", profile, F_NULL),
    ENUM("precision.weights", precision.weights, precisions),
    ENUM("precision.kv", precision.kv, precisions),
    ENUM("precision.activations", precision.activations, precisions),
    NUM("efficiency.compute", eff.compute, NT_DBL, 0, 1e-3, 1, 1),
    NUM("efficiency.memory", eff.memory, NT_DBL, 0, 1e-3, 1, 1),
    NUM("efficiency.comm", eff.comm, NT_DBL, 0, 1e-3, 1, 1),
    NUM("efficiency.attention_memory", eff.attention_memory, NT_DBL, 0, 0, 1, 1),
    NUM("efficiency.step_overhead_us", eff.step_overhead_ns, NT_DBL, 0, 0, 1e6, 1e3),
    NUM("efficiency.layer_overhead_us", eff.layer_overhead_ns, NT_DBL, 0, 0, 1e5, 1e3),
    NUM("efficiency.comm_latency_us", eff.comm_latency_ns, NT_DBL, 0, 0, 1e6, 1e3),
    NUM("efficiency.in_system_decode", eff.in_system_decode, NT_DBL, 0, 0.25, 4, 1),
    NUM("efficiency.token_overhead_ns", eff.token_overhead_ns, NT_DBL, 0, 0, 1e6, 1),
    NUM("moe.ep_skew", moe.skew, NT_DBL, 0, 1, 100, 1),
    NUM("moe.redundant_experts", moe.redundant_experts, NT_DBL, 0, 0, 1, 1),
    NUM("moe.ep_skew_sd", moe.skew_sd, NT_DBL, 0, 0, 10, 1),
    NUM("moe.route_nodes", moe.route_nodes, NT_U32, F_INT, 0, 1 << 20, 1),
    BOOL("moe.two_batch_overlap", moe.two_batch),
    BOOL("moe.single_batch_overlap", moe.single_batch),
    NUM("moe.comm_sms", moe.comm_sms, NT_U32, F_INT, 0, 1024, 1),
    ENUM("moe.routing", moe.routing, routings),
    STR("workload.trace", workload.trace, F_NULL),
    {"workload.format", K_FMT, 0, 0, OFF(workload.opt.format), SZ(workload.opt.format), 0, 0, 0, 1,
     NULL},
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
    NUM("workload.generate.diurnal_amplitude", workload.gen.diurnal_amplitude, NT_DBL, 0, 0, 0.99,
        1),
    NUM("workload.generate.peak_hour", workload.gen.peak_hour, NT_DBL, 0, 0, 23.99, 1),
    NUM("workload.generate.weekend_ratio", workload.gen.weekend_ratio, NT_DBL, F_GT, 0, 10, 1),
    NUM("workload.generate.start_weekday", workload.gen.start_weekday, NT_U32, F_INT, 0, 6, 1),
    NUM("workload.generate.warmup_days", workload.gen.warmup_days, NT_DBL, 0, 0, 365, 1),
#define RETURN_KEYS(c, i)                                                                          \
    NUM("workload.generate.return." #c ".p", workload.gen.ret[i].p, NT_DBL, 0, 0, 0.99, 1),        \
        NUM("workload.generate.return." #c ".median_h", workload.gen.ret[i].median_h, NT_DBL,      \
            F_GT, 0, 87840, 1),                                                                    \
        NUM("workload.generate.return." #c ".sigma", workload.gen.ret[i].sigma, NT_DBL, 0, 0, 5,   \
            1)
    RETURN_KEYS(chatbot, TRC_GEN_CHATBOT),
    RETURN_KEYS(agent, TRC_GEN_AGENT),
    RETURN_KEYS(coding, TRC_GEN_CODING),
    ENUM("cluster.mode", cluster.mode, modes),
    POOL_KEYS(vision, cluster.vision),
    POOL_KEYS(prefill, cluster.prefill),
    POOL_KEYS(decode, cluster.decode),
    NUM("cluster.network.kv_transfer_GBps", cluster.kv_transfer_Bps, NT_DBL, 0, 1e-3, 1e6, 1e9),
    NUM("cluster.network.latency_us", cluster.net_latency_ns, NT_DBL, 0, 0, 1e7, 1e3),
    {"cluster.schedule", K_SCHEDULE, 0, F_NULL, OFF(cluster.schedule), SZ(cluster.schedule), 0, 0,
     0, 1, NULL},
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
    NUM("kv_cache.ssd.store_read_GBps", kv.ssd.store_read_Bps, NT_DBL, 0, 0, 1e7, 1e9),
    NUM("kv_cache.ssd.store_write_GBps", kv.ssd.store_write_Bps, NT_DBL, 0, 0, 1e7, 1e9),
    NUM("kv_cache.ssd.store_iops", kv.ssd.store_iops, NT_DBL, 0, 0, 1e12, 1),
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
    ENUM("speculative.method", decoding.spec_method, spec_methods),
    ENUM("serving.preset", serving.preset, serving_presets),
    STR("serving.fit", serving.fit, F_NULL),
    NUM("serving.frontend_ms", serving.frontend_ns, NT_DBL, 0, 0, 6e4, 1e6),
    NUM("serving.step_overhead_us", serving.step_overhead_ns, NT_DBL, 0, 0, 1e6, 1e3),
    NUM("serving.step_overhead_per_seq_us", serving.step_overhead_seq_ns, NT_DBL, 0, 0, 1e4, 1e3),
    NUM("serving.first_token_lag_steps", serving.first_token_lag_steps, NT_DBL, 0, 0, 1, 1),
    ENUM("serving.prefix_cache", serving.prefix_cache, prefix_homes),
    ENUM("serving.admission", serving.admission, admissions),
    NUM("serving.watermark", serving.watermark, NT_DBL, 0, 0, 0.5, 1),
    NUM("serving.graph_buckets", serving.graph_buckets, NT_U32, F_INT, 0, 1 << 16, 1),
    NUM("serving.client_timeout_s", serving.client_timeout_ns, NT_DBL, 0, 0, 8.64e6, 1e9),
    ENUM("serving.context_overflow", serving.context_truncate, overflows),
    NUM("structured.mask_us", decoding.structured_mask_ns, NT_DBL, 0, 0, 1e6, 1e3),
    NUM("structured.share", decoding.structured_share, NT_DBL, 0, 0, 1, 1),
    NUM("slo.ttft_p90_ms", slo.ttft_p90_ms, NT_DBL, F_GT, 0, 8.64e7, 1),
    NUM("slo.tpot_p90_ms", slo.tpot_p90_ms, NT_DBL, F_GT, 0, 6e4, 1),
    SLO_CLASS_KEYS(chatbot, TRC_CLASS_CHATBOT),
    SLO_CLASS_KEYS(agent, TRC_CLASS_AGENT),
    SLO_CLASS_KEYS(coding, TRC_CLASS_CODING),
    SLO_CLASS_KEYS(batch, TRC_CLASS_BATCH),
    SLO_CLASS_KEYS(other, TRC_CLASS_OTHER),
    NUM("saturation.queue_growth", sat.queue_growth, NT_DBL, 0, 0, 1e9, 1),
    NUM("saturation.queue_growth_frac", sat.queue_growth_frac, NT_DBL, 0, 0, 100, 1),
    NUM("saturation.wait_growth_s", sat.wait_growth_s, NT_DBL, 0, 0, 3.2e7, 1),
    NUM("saturation.max_wait_s", sat.max_wait_s, NT_DBL, 0, 0, 3.2e7, 1),
    NUM("saturation.drain_frac", sat.drain_frac, NT_DBL, 0, 0, 1, 1),
    NUM("saturation.drain_s", sat.drain_s, NT_DBL, 0, 0, 3.2e7, 1),
    NUM("saturation.reject_frac", sat.reject_frac, NT_DBL, 0, 0, 1, 1),
    NUM("output.sample_interval_s", output.sample_interval_s, NT_DBL, 0, 1e-3, 86400, 1),
    NUM("output.steady_from_s", output.steady_from_s, NT_DBL, 0, 0, 1e9, 1),
    NUM("output.steady_to_s", output.steady_to_s, NT_DBL, 0, 0, 1e9, 1),
    BOOL("output.requests", output.write_requests),
};

// Mappings that hold keys. "economics" is a section whose contents reports/ checks.
const char *const sim_key_sections[] = {
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
    "cluster.vision.precision",
    "cluster.vision.autoscale",
    "cluster.vision.failures",
    "cluster.prefill.failures",
    "cluster.decode.failures",
    "cluster.prefill.autoscale",
    "cluster.decode.autoscale",
    "cluster.prefill.precision",
    "cluster.decode.precision",
    "precision",
    "cluster.decode",
    "cluster.network",
    "router",
    "kv_cache",
    "kv_cache.dram",
    "kv_cache.ssd",
    "kv_cache.ssd.retention",
    "serving",
    "speculative",
    "structured",
    "slo",
    "slo.classes",
    "slo.classes.chatbot",
    "slo.classes.chatbot.ttft_ms",
    "slo.classes.chatbot.tpot_ms",
    "slo.classes.chatbot.e2e_ms",
    "slo.classes.agent",
    "slo.classes.agent.ttft_ms",
    "slo.classes.agent.tpot_ms",
    "slo.classes.agent.e2e_ms",
    "slo.classes.coding",
    "slo.classes.coding.ttft_ms",
    "slo.classes.coding.tpot_ms",
    "slo.classes.coding.e2e_ms",
    "slo.classes.batch",
    "slo.classes.batch.ttft_ms",
    "slo.classes.batch.tpot_ms",
    "slo.classes.batch.e2e_ms",
    "slo.classes.other",
    "slo.classes.other.ttft_ms",
    "slo.classes.other.tpot_ms",
    "slo.classes.other.e2e_ms",
    "saturation",
    "economics",
    "output",
    "published",
};

const size_t sim_key_count = sizeof sim_key_table / sizeof sim_key_table[0];
const size_t sim_key_section_count = sizeof sim_key_sections / sizeof sim_key_sections[0];

const keydef *sim_key_find(const char *key) {
    for (size_t i = 0; i < sim_key_count; i++)
        if (!strcmp(sim_key_table[i].key, key)) return &sim_key_table[i];
    return NULL;
}

bool sim_config_key_info(size_t i, const char **key, double *lo, double *hi, bool *integer,
                         bool *lo_open) {
    for (size_t j = 0, k = 0; j < sim_key_count; j++) {
        if (sim_key_table[j].kind != K_NUM) continue;
        if (k++ != i) continue;
        *key = sim_key_table[j].key;
        *lo = sim_key_table[j].lo;
        *hi = sim_key_table[j].hi;
        *integer = sim_key_table[j].flags & F_INT;
        *lo_open = sim_key_table[j].flags & F_GT;
        return true;
    }
    return false;
}

bool sim_key_is_section(const char *key) {
    for (size_t i = 0; i < sim_key_section_count; i++)
        if (!strcmp(sim_key_sections[i], key)) return true;
    return false;
}

bool sim_key_under_economics(const char *key) {
    return !strncmp(key, "economics.", 10);
}

// ---- values against the table ----------------------------------------------------------------
double sim_key_load_num(const void *src, num_type t) {
    switch (t) {
    case NT_DBL:
        return *(const double *)src;
    case NT_I32:
        return *(const int32_t *)src;
    case NT_U32:
        return *(const uint32_t *)src;
    case NT_I64:
        return (double)*(const int64_t *)src;
    }
    return 0;
}

double sim_key_file_value(double stored, double scale) {
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

// The table's range of d, as a message ("in [a, b]", "> a", ...), for errors.
static void range_text(const keydef *d, char *out, size_t n) {
    if (d->hi >= 1e300)
        snprintf(out, n, "%s %g", d->flags & F_GT ? ">" : ">=", d->lo);
    else
        snprintf(out, n, "in %s%g, %g]", d->flags & F_GT ? "(" : "[", d->lo, d->hi);
}

kvf_status sim_key_check_ranges(const sim_config *c, kvf_err *err) {
    static sim_config def;   // the defaults are trusted: a field at its default is not checked
    static bool have_def;
    if (!have_def) {
        sim_config_default(&def);
        have_def = true;
    }
    for (size_t i = 0; i < sim_key_count; i++) {
        const keydef *d = &sim_key_table[i];
        const char *base = (const char *)c, *dbase = (const char *)&def;
        if (d->kind == K_NAME || d->kind == K_STR) {   // text: what is before the NUL counts
            if (!strcmp(base + d->off, dbase + d->off)) continue;
        } else if (!memcmp(base + d->off, dbase + d->off, d->size)) {
            continue;
        }
        char where[SIM_PATH_MAX + 160], range[64];
        if (d->kind == K_NUM) {
            double v =
                sim_key_file_value(sim_key_load_num(base + d->off, (num_type)d->ntype), d->scale);
            if ((d->flags & F_NULL) && v == 0) continue;
            bool ok = isfinite(v) && (d->flags & F_GT ? v > d->lo : v >= d->lo) && v <= d->hi &&
                      (!(d->flags & F_INT) || v == floor(v));
            if (ok) continue;
            range_text(d, range, sizeof range);
            sim_config_where(c, d->key, where, sizeof where);
            return kvf_fail(err, KVF_EINVAL, "%s: %g out of range: must be %s%s", where, v, range,
                            d->flags & F_INT ? " and whole" : "");
        }
        if (d->kind == K_NAME) {
            const char *v = base + d->off;
            bool ok = !*v && (d->flags & F_NULL);
            for (int j = 0; !ok && d->names[j]; j++)
                ok = !strcmp(d->names[j], v);
            if (ok) continue;
            sim_config_where(c, d->key, where, sizeof where);
            return kvf_fail(err, KVF_EINVAL, "%s: unknown value '%s'", where, v);
        }
    }
    return KVF_OK;
}
