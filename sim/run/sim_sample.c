// sim/sim_sample.c -- workload.sample_rate: which requests a sampled run keeps, how the
// cluster shrinks with them, and how the summary is turned back into full-fleet figures.
// See sim_sample.h for the contract.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim_sample.h"

// Salts keep the three key kinds apart (session 5 and request 5 draw different hashes).
#define SALT_SESSION 0x5e5510a5e5510a5eULL
#define SALT_ROOT 0x7007b10c7007b10cULL
#define SALT_REQUEST 0x4e9e57124e9e5712ULL

static int32_t scale_count(int32_t n, double r) {
    return n > 0 ? (int32_t)floor((double)n * r + 0.5) : n;
}

// The least rate that keeps every pool and schedule entry at one instance or more: 0.5 / the
// smallest positive count.
static double least_rate(const sim_config *c) {
    int32_t m = INT32_MAX;
    const int32_t v[3] = {c->cluster.vision.instances, c->cluster.prefill.instances,
                          c->cluster.decode.instances};
    for (int k = 0; k < 3; k++)
        if (v[k] > 0 && v[k] < m) m = v[k];
    for (int32_t e = 0; e < c->cluster.n_schedule; e++) {
        if (c->cluster.schedule[e].prefill > 0 && c->cluster.schedule[e].prefill < m)
            m = c->cluster.schedule[e].prefill;
        if (c->cluster.schedule[e].decode > 0 && c->cluster.schedule[e].decode < m)
            m = c->cluster.schedule[e].decode;
    }
    return m == INT32_MAX ? 0 : 0.5 / m;
}

static int32_t gcd32(int32_t a, int32_t b) {
    while (b) {
        int32_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

// The greatest common divisor of every positive count of the plan: rates j / g (j = 1 .. g)
// are the ones that size every pool and schedule entry in exact proportion.
static int32_t plan_gcd(const sim_sample_plan *p) {
    int32_t g = 0;
    for (int k = 0; k < SIM_SAMPLE_POOLS; k++)
        if (p->full[k] > 0) g = gcd32(p->full[k], g);
    for (int32_t e = 0; e < p->n_schedule; e++)
        for (int k = 0; k < 2; k++)
            if (p->sched_full[e][k] > 0) g = gcd32(p->sched_full[e][k], g);
    return g;
}

// Calls f(full, sampled) on every positive count of the plan; true when all return true.
static bool plan_all(const sim_sample_plan *p, bool (*f)(int32_t, int32_t, const void *),
                     const void *arg) {
    for (int k = 0; k < SIM_SAMPLE_POOLS; k++)
        if (p->full[k] > 0 && !f(p->full[k], p->sampled[k], arg)) return false;
    for (int32_t e = 0; e < p->n_schedule; e++)
        for (int k = 0; k < 2; k++)
            if (p->sched_full[e][k] > 0 && !f(p->sched_full[e][k], p->sched_sampled[e][k], arg))
                return false;
    return true;
}

// sampled / full equal to the first pair's (exact integer arithmetic)
static bool same_ratio(int32_t full, int32_t sampled, const void *arg) {
    const int32_t *first = arg;
    return (int64_t)sampled * first[0] == (int64_t)first[1] * full;
}

// The first positive (full, sampled) pair of the plan.
static bool first_pair(int32_t full, int32_t sampled, const void *arg) {
    int32_t *first = (int32_t *)arg;
    first[0] = full;
    first[1] = sampled;
    return false;
}

static bool ratios_agree(const sim_sample_plan *p, int32_t first[2]) {
    first[0] = 0;
    plan_all(p, first_pair, first);
    return !first[0] || plan_all(p, same_ratio, first);
}

static kvf_status refuse(const sim_config *c, const sim_sample_plan *p, kvf_err *err,
                         const char *what, int32_t n) {
    char where[SIM_PATH_MAX + 128];
    sim_config_where(c, "workload.sample_rate", where, sizeof where);
    int32_t g = plan_gcd(p);
    return kvf_fail(err, KVF_EINVAL,
                    "%s: %g leaves %s with 0 instances (%d x %g rounds to 0), and one instance "
                    "of each pool would not carry the full fleet's load per instance; rates "
                    ">= %g keep an instance of each, and a multiple of 1/%d (the least %g) keeps "
                    "every pool at the full fleet's load",
                    where, c->workload.sample_rate, what, n, c->workload.sample_rate, least_rate(c),
                    g, g > 0 ? 1.0 / g : 0.0);
}

kvf_status sim_sample_plan_make(const sim_config *c, sim_sample_plan *p, kvf_err *err) {
    memset(p, 0, sizeof *p);
    double r = c->workload.sample_rate;
    p->rate = p->requested = r;
    p->generated = c->workload.gen.profile[0] != 0;
    if (!(r > 0 && r <= 1)) {
        char where[SIM_PATH_MAX + 128];
        sim_config_where(c, "workload.sample_rate", where, sizeof where);
        return kvf_fail(err, KVF_EINVAL, "%s: must be in (0, 1], got %g", where, r);
    }
    if (r < 1 && c->workload.opt.session_users > 0 && !c->workload.gen.profile[0]) {
        char where[SIM_PATH_MAX + 128];
        sim_config_where(c, "workload.sample_rate", where, sizeof where);
        return kvf_fail(err, KVF_EINVAL,
                        "%s: sessions started by a fixed user population (workload.session_users "
                        "= %u) chain every session to an earlier one and cannot be sampled; use "
                        "workload.session_rate (Poisson session starts) with a sample rate",
                        where, c->workload.opt.session_users);
    }
    const sim_pool_cfg *pools[SIM_SAMPLE_POOLS] = {&c->cluster.vision, &c->cluster.prefill,
                                                   &c->cluster.decode};
    static const char *const names[SIM_SAMPLE_POOLS] = {
        "cluster.vision.instances", "cluster.prefill.instances", "cluster.decode.instances"};
    // rounded to nothing: the first such count, for the message
    const char *zero = NULL;
    int32_t zero_n = 0;
    for (int k = 0; k < SIM_SAMPLE_POOLS; k++) {
        p->full[k] = pools[k]->instances;
        p->sampled[k] = scale_count(pools[k]->instances, r);
        if (p->full[k] > 0 && p->sampled[k] < 1) {
            if (!zero) zero = names[k], zero_n = p->full[k];
            p->sampled[k] = 1;
        }
    }
    p->n_schedule = c->cluster.n_schedule;
    for (int32_t e = 0; e < c->cluster.n_schedule; e++) {
        int32_t v[2] = {c->cluster.schedule[e].prefill, c->cluster.schedule[e].decode};
        for (int k = 0; k < 2; k++) {
            p->sched_full[e][k] = v[k];
            p->sched_sampled[e][k] = v[k] < 0 ? v[k] : scale_count(v[k], r);
            if (v[k] > 0 && p->sched_sampled[e][k] < 1) {
                if (!zero)
                    zero = k ? "a cluster.schedule entry's decode"
                             : "a cluster.schedule entry's prefill",
                    zero_n = v[k];
                p->sched_sampled[e][k] = 1;
            }
        }
    }
    // Sized in proportion (every count times the same sampled/full): that ratio is the share
    // of the traffic each pool must carry, so it becomes the rate. This is R itself when every
    // count scales exactly, and larger when the one-instance floor or rounding grew the pools
    // alike (16 instances at 1/32 -> 1 of 16: the rate 1/16).
    int32_t first[2];
    if (ratios_agree(p, first)) {
        if (first[0]) {
            double e = (double)first[1] / (double)first[0];
            if (fabs(e - r) > 1e-12 * r) p->rate = e;
        }
    } else if (zero) {
        return refuse(c, p, err, zero, zero_n);
    }
    p->ssd_full_bytes = c->kv.ssd.capacity_bytes;
    p->ssd_sampled_bytes = c->kv.ssd.capacity_bytes > 0 ? c->kv.ssd.capacity_bytes * p->rate
                                                        : c->kv.ssd.capacity_bytes;
    return KVF_OK;
}

double sim_sample_load_factor(const sim_sample_plan *p, int32_t full, int32_t sampled) {
    return sampled > 0 ? p->rate * (double)full / (double)sampled : 0;
}

// The worst load factor of the plan: the one furthest from 1.
static bool worst_load(int32_t full, int32_t sampled, const void *arg) {
    const void *const *a = arg;
    const sim_sample_plan *p = a[0];
    double *w = (double *)a[1], f = sim_sample_load_factor(p, full, sampled);
    if (fabs(f - 1) > fabs(*w - 1)) *w = f;
    return true;
}

kvf_status sim_sample_plan_check(const sim_config *c, const sim_sample_plan *p, kvf_err *err) {
    double w = 1;
    const void *arg[2] = {p, &w};
    plan_all(p, worst_load, arg);
    if (fabs(w - 1) <= SIM_SAMPLE_LOAD_TOL) return KVF_OK;
    char where[SIM_PATH_MAX + 128], pools[512];
    sim_config_where(c, "workload.sample_rate", where, sizeof where);
    size_t n = 0;
    static const char *const pn[SIM_SAMPLE_POOLS] = {"vision", "prefill", "decode"};
    pools[0] = 0;
    for (int k = 0; k < SIM_SAMPLE_POOLS && n < sizeof pools; k++)
        if (p->full[k] > 0)
            n += (size_t)snprintf(pools + n, sizeof pools - n, "%s%s %d -> %d (load x %.3f)",
                                  n ? ", " : "", pn[k], p->full[k], p->sampled[k],
                                  sim_sample_load_factor(p, p->full[k], p->sampled[k]));
    for (int32_t e = 0; e < p->n_schedule && n < sizeof pools; e++)
        for (int k = 0; k < 2 && n < sizeof pools; k++)
            if (p->sched_full[e][k] > 0)
                n += (size_t)snprintf(
                    pools + n, sizeof pools - n, ", schedule[%d].%s %d -> %d (load x %.3f)", (int)e,
                    k ? "decode" : "prefill", p->sched_full[e][k], p->sched_sampled[e][k],
                    sim_sample_load_factor(p, p->sched_full[e][k], p->sched_sampled[e][k]));
    int32_t g = plan_gcd(p);
    double lo = floor(p->requested * g) / g, hi = ceil(p->requested * g) / g;
    char fit[96];
    if (lo > 0 && lo < hi)
        snprintf(fit, sizeof fit, "%g or %g here", lo, hi);
    else
        snprintf(fit, sizeof fit, "%g here", hi);
    return kvf_fail(err, KVF_EINVAL,
                    "%s: %g rounds the pools out of proportion (%s): a pool whose load per "
                    "instance is off by more than %.0f %% biases its queueing delays; use a "
                    "multiple of 1/%d (%s)",
                    where, p->requested, pools, 100 * SIM_SAMPLE_LOAD_TOL, g, fit);
}

void sim_sample_apply(const sim_sample_plan *p, sim_config *c) {
    c->cluster.vision.instances = p->sampled[0];
    c->cluster.prefill.instances = p->sampled[1];
    c->cluster.decode.instances = p->sampled[2];
    for (int32_t e = 0; e < p->n_schedule && e < c->cluster.n_schedule; e++) {
        c->cluster.schedule[e].prefill = p->sched_sampled[e][0];
        c->cluster.schedule[e].decode = p->sched_sampled[e][1];
    }
    c->kv.ssd.capacity_bytes = p->ssd_sampled_bytes;
    // Generated sessions are independent draws: R x the rate draws a sample of sessions with
    // the same distribution as hashing R of them, without generating the rest.
    if (p->generated) c->workload.gen.rate_rps *= p->rate;
}

double sim_sample_pool_factor(const sim_sample_plan *p, int pool, bool colocated) {
    double full = p->full[pool], sampled = p->sampled[pool];
    if (colocated && pool == 1) {
        full += p->full[2];
        sampled += p->sampled[2];
    }
    return sampled > 0 ? full / sampled : 1;
}

// ---- the filter ------------------------------------------------------------------------------
kvf_status sim_sampler_init(sim_sampler *s, double rate, kvf_err *err) {
    memset(s, 0, sizeof *s);
    if (!(rate > 0 && rate <= 1))
        return kvf_fail(err, KVF_EINVAL, "workload.sample_rate: must be in (0, 1], got %g", rate);
    s->rate = rate;
    s->threshold = (uint64_t)ldexp(rate, 53);
    return KVF_OK;
}

// Shrinks the common prefix to what t shares with it; the first request with blocks sets it.
static void common_update(sim_sampler *s, const trc_request *t) {
    if (!s->have_common) {
        s->common = kvf_malloc((t->n_blocks ? t->n_blocks : 1) * sizeof *s->common);
        if (!s->common) return;   // no prefix learnt: roots fall back to request ids
        memcpy(s->common, t->blocks, t->n_blocks * sizeof *s->common);
        s->n_common = t->n_blocks;
        s->have_common = true;
        return;
    }
    uint32_t n = s->n_common < t->n_blocks ? s->n_common : t->n_blocks, i = 0;
    while (i < n && s->common[i] == t->blocks[i])
        i++;
    s->n_common = i;
}

bool sim_sample_keep(sim_sampler *s, const trc_request *t) {
    uint64_t key;
    s->read++;
    s->read_input += t->input_tokens;
    s->read_output += t->output_tokens;
    if (t->session) {
        key = kvf_hash64(t->session ^ SALT_SESSION);
        s->key_session++;
    } else {
        if (t->n_blocks) common_update(s, t);
        if (t->n_blocks && s->have_common && t->n_blocks > s->n_common) {
            key = kvf_hash64(t->blocks[s->n_common] ^ SALT_ROOT);
            s->key_root++;
        } else {
            key = kvf_hash64(t->id ^ SALT_REQUEST);
            s->key_request++;
        }
    }
    s->last_group = key;
    bool keep = (key >> 11) < s->threshold;
    if (keep) {
        s->kept++;
        s->kept_input += t->input_tokens;
        s->kept_output += t->output_tokens;
    }
    return keep;
}

void sim_sampler_free(sim_sampler *s) {
    free(s->common);
    s->common = NULL;
}

void sim_sample_scale_econ(rpt_econ_input *ei, const sim_sample_plan *p, bool colocated) {
    static const int pools[RPT_POOL_N] = {[RPT_POOL_VISION] = 0,
                                          [RPT_POOL_PREFILL] = 1,
                                          [RPT_POOL_DECODE] = 2,
                                          [RPT_POOL_COLOCATED] = 1};
    for (int k = 0; k < RPT_POOL_N; k++) {
        double f = sim_sample_pool_factor(p, pools[k], colocated && k == RPT_POOL_COLOCATED);
        ei->gpu_hours[k] *= f;
        ei->gpus[k] *= f;
    }
    // the store: the full capacity when bounded, the measured peak over R when unlimited
    ei->ssd_tb = p->ssd_full_bytes > 0 ? p->ssd_full_bytes / 1e12 : ei->ssd_tb / p->rate;
    ei->dram_tb *= sim_sample_pool_factor(p, 1, colocated);
    ei->ssd_write_Bps /= p->rate;
    for (int i = 0; i < ei->n_cls; i++) {
        ei->cls[i].write_Bps /= p->rate;
        ei->cls[i].steady_tb /= p->rate;
    }
    for (int i = 0; i < ei->n_cls; i++)
        for (int j = 0; j < 2; j++) {
            ei->cls[i].hit[j] /= p->rate;
            ei->cls[i].miss[j] /= p->rate;
            ei->cls[i].output[j] /= p->rate;
        }
}

// ---- the summary -----------------------------------------------------------------------------
// Totals of traffic (divided by R). A trailing ".*" scales every number of that object; a ".*."
// inside goes through every member (by_class.*.completed: each class's count).
static const char *const traffic_totals[] = {
    "requests.arrived",
    "requests.completed",
    "requests.rejected",
    "requests.unfinished",
    "requests.truncated",
    "requests.rejected_by_reason.*",
    "by_class.*.completed",
    "throughput.input_tok_s",
    "throughput.output_tok_s",
    "steady.requests",
    "steady.input_tok_s",
    "steady.output_tok_s",
    "slo.goodput_req_s",
    "slo.goodput_rps",
    "slo.goodput_tok_s",
    "slo.by_class.*.arrived",
    "slo.by_class.*.goodput_rps",
    "slo.by_class.*.goodput_tok_s",
    "cache.by_class.*.prompt_tokens",
    "cache.by_class.*.store_write_Bps",
    "cache.by_class.*.stored_bytes_peak",
    "cache.by_class.*.stored_bytes_end",
    "cache.by_class.*.stored_bytes_steady",
    "cache.by_class.*.stored_bytes_steady_peak",
    "cache.hit_tokens",
    "cache.miss_tokens",
    "cache.by_tier_tokens.*",
    "cache.stored_bytes_peak",
    "cache.stored_bytes_end",
    "cache.ssd_write_Bps",
    "cache.steady_state_bytes_by_retention.*",
    "cache.evicted_blocks",
    "cache.expired_blocks",
    "cache.load_bytes.*",
    "cache.ssd_write_bytes",
    "cache.kv_transfer_bytes",
    "cache.prefill_flops.actual",
    "cache.prefill_flops.no_reuse",
    "cache.prefill_flops.window_full_recompute",
    NULL,
};

// The object holding the last component of a dotted path, and that component.
static json_t *parent_of(json_t *s, const char *path, char *last, size_t n) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *o = s;
    char *p = buf, *dot;
    while (o && (dot = strchr(p, '.'))) {
        *dot = 0;
        o = json_object_get(o, p);
        p = dot + 1;
    }
    snprintf(last, n, "%s", p);
    return json_is_object(o) ? o : NULL;
}

// Replaces o[key] by its value times f and keeps the raw value in raw[path].
static void scale_value(json_t *o, const char *key, const char *path, double f, json_t *raw) {
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v)) return;
    json_object_set(raw, path, v);
    if (json_is_integer(v))
        json_object_set_new(o, key,
                            json_integer((json_int_t)llround((double)json_integer_value(v) * f)));
    else
        json_object_set_new(o, key, json_real(json_real_value(v) * f));
}

static void scale_path(json_t *s, const char *path, double f, json_t *raw) {
    const char *mid = strstr(path, ".*.");
    if (mid) {   // every member of the object before it, the rest of the path in each
        char prefix[128], last[128];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(mid - path), path);
        json_t *o = parent_of(s, prefix, last, sizeof last);
        o = o ? json_object_get(o, last) : NULL;
        if (!json_is_object(o)) return;
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v) {
            char full[256];
            snprintf(full, sizeof full, "%s.%s.%s", prefix, k, mid + 3);
            scale_path(s, full, f, raw);
        }
        return;
    }
    char last[128];
    json_t *o = parent_of(s, path, last, sizeof last);
    if (!o) return;
    if (strcmp(last, "*")) {
        scale_value(o, last, path, f, raw);
        return;
    }
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%.*s", (int)(strlen(path) - 2), path);
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(o, tmp, k, v) {
        char full[192];
        snprintf(full, sizeof full, "%s.%s", prefix, k);
        scale_value(o, k, full, f, raw);
    }
}

// The energy of the full fleet: each pool's board energy times its GPU factor (as GPU-hours),
// the totals summed again from them; per-GPU means are unchanged, and energy per token moves
// with the energy against the traffic's 1 / R.
static void scale_energy(json_t *s, const sim_sample_plan *p, bool colocated, json_t *raw) {
    json_t *e = json_object_get(s, "energy"), *bp = json_object_get(e, "by_pool");
    double old = json_number_value(json_object_get(e, "board_kwh"));
    if (!json_is_object(bp) || !(old > 0)) return;
    static const char *const pn[SIM_SAMPLE_POOLS] = {"vision", "prefill", "decode"};
    double board = 0;
    for (int k = 0; k < SIM_SAMPLE_POOLS; k++) {
        const char *name = colocated && k == 1 ? "colocated" : pn[k];
        json_t *o = json_object_get(bp, name);
        if (!json_is_object(o)) continue;
        char path[64];
        snprintf(path, sizeof path, "energy.by_pool.%s.board_kwh", name);
        scale_value(o, "board_kwh", path, sim_sample_pool_factor(p, k, colocated), raw);
        board += json_number_value(json_object_get(o, "board_kwh"));
    }
    double f = board / old;
    scale_value(e, "board_kwh", "energy.board_kwh", f, raw);
    scale_value(e, "kwh", "energy.kwh", f, raw);
    scale_value(e, "mean_w", "energy.mean_w", f, raw);
    scale_value(e, "wh_per_mtok", "energy.wh_per_mtok", f * p->rate, raw);
}

void sim_sample_summary(json_t *s, const sim_sample_plan *p, const sim_sampler *sm, bool colocated,
                        double gpu_hours_full) {
    json_t *raw = json_object();
    double inv = 1.0 / p->rate;
    for (int i = 0; traffic_totals[i]; i++)
        scale_path(s, traffic_totals[i], inv, raw);
    static const char *const gpu_keys[SIM_SAMPLE_POOLS] = {"gpus.vision", "gpus.prefill",
                                                           "gpus.decode"};
    // the steady window's running requests, as the pools' counts, the full fleet's
    static const char *const run_keys[SIM_SAMPLE_POOLS] = {"steady.running_requests_mean.vision",
                                                           "steady.running_requests_mean.prefill",
                                                           "steady.running_requests_mean.decode"};
    for (int k = 0; k < SIM_SAMPLE_POOLS; k++) {
        scale_path(s, gpu_keys[k], sim_sample_pool_factor(p, k, colocated), raw);
        scale_path(s, run_keys[k], sim_sample_pool_factor(p, k, colocated), raw);
    }
    json_t *gh = json_object_get(s, "gpu_hours");
    if (json_is_number(gh)) {
        json_object_set(raw, "gpu_hours", gh);
        json_object_set_new(s, "gpu_hours", json_real(gpu_hours_full));
    }
    scale_energy(s, p, colocated, raw);
    json_t *ca = json_object_get(s, "cache");
    if (json_is_object(ca) && p->ssd_full_bytes > 0) {
        json_object_set(raw, "cache.ssd_capacity_bytes", json_object_get(ca, "ssd_capacity_bytes"));
        json_object_set_new(ca, "ssd_capacity_bytes", json_real(p->ssd_full_bytes));
    }

    json_t *o = json_object();
    json_object_set_new(o, "rate", json_real(p->rate));
    json_object_set_new(o, "requested_rate", json_real(p->requested));
    json_object_set_new(
        o, "key",
        json_string(
            p->generated
                ? "generated workload: sessions drawn at rate x workload.generate.rate_rps"
                : "session id; else the prefix root (first block beyond the prefix all requests "
                  "share); else the request id. Kept iff hash(key) < rate * 2^64 "
                  "(seed-independent)"));
    json_t *is = json_object();
    static const char *const pn[SIM_SAMPLE_POOLS] = {"vision", "prefill", "decode"};
    for (int k = 0; k < SIM_SAMPLE_POOLS; k++) {
        json_t *e = json_object();
        json_object_set_new(e, "full", json_integer(p->full[k]));
        json_object_set_new(e, "sampled", json_integer(p->sampled[k]));
        // load per simulated instance relative to the full run's: rate x full / sampled
        json_object_set_new(e, "load_factor",
                            p->sampled[k] > 0
                                ? json_real(sim_sample_load_factor(p, p->full[k], p->sampled[k]))
                                : json_null());
        // the share of the pool simulated, which is the share of its traffic kept
        json_object_set_new(e, "effective_rate",
                            p->full[k] > 0 ? json_real((double)p->sampled[k] / p->full[k])
                                           : json_null());
        json_object_set_new(is, pn[k], e);
    }
    json_object_set_new(o, "instances_scaled", is);
    if (p->n_schedule) {
        json_t *sc = json_array();
        for (int32_t e = 0; e < p->n_schedule; e++) {
            json_t *x = json_object();
            json_object_set_new(x, "prefill_full", json_integer(p->sched_full[e][0]));
            json_object_set_new(x, "prefill_sampled", json_integer(p->sched_sampled[e][0]));
            json_object_set_new(x, "decode_full", json_integer(p->sched_full[e][1]));
            json_object_set_new(x, "decode_sampled", json_integer(p->sched_sampled[e][1]));
            json_array_append_new(sc, x);
        }
        json_object_set_new(o, "schedule_scaled", sc);
    }
    json_object_set_new(o, "rounding",
                        json_string("instances: nearest integer, halves up, at least 1; when that "
                                    "grows every pool alike the traffic is kept at the same ratio "
                                    "(rate, against requested_rate), so each pool's load_factor is "
                                    "1; pools out of proportion by more than 1 % are refused"));
    json_t *st = json_object();
    json_object_set_new(st, "full",
                        p->ssd_full_bytes < 0 ? json_string("unlimited")
                                              : json_real(p->ssd_full_bytes));
    json_object_set_new(st, "sampled",
                        p->ssd_sampled_bytes < 0 ? json_string("unlimited")
                                                 : json_real(p->ssd_sampled_bytes));
    json_object_set_new(o, "ssd_capacity_bytes", st);
    json_object_set_new(
        o, "unscaled",
        json_string(
            "per-instance HBM, DRAM per node, link bandwidths, batch and queue limits; arrival, "
            "session and generator rates are thinned by the sampling itself"));
    json_t *rq = json_object();
    json_object_set_new(rq, "read", json_integer((json_int_t)sm->read));
    json_object_set_new(rq, "kept", json_integer((json_int_t)sm->kept));
    json_object_set_new(rq, "kept_share",
                        json_real(sm->read ? (double)sm->kept / (double)sm->read : 0));
    json_object_set_new(rq, "input_tokens_read", json_integer((json_int_t)sm->read_input));
    json_object_set_new(rq, "input_tokens_kept", json_integer((json_int_t)sm->kept_input));
    json_object_set_new(rq, "output_tokens_read", json_integer((json_int_t)sm->read_output));
    json_object_set_new(rq, "output_tokens_kept", json_integer((json_int_t)sm->kept_output));
    json_object_set_new(rq, "keyed_by_session", json_integer((json_int_t)sm->key_session));
    json_object_set_new(rq, "keyed_by_prefix_root", json_integer((json_int_t)sm->key_root));
    json_object_set_new(rq, "keyed_by_request", json_integer((json_int_t)sm->key_request));
    json_object_set_new(o, "requests", rq);
    json_object_set_new(
        o, "totals",
        json_string(
            "traffic totals divided by rate; GPU counts, GPU-hours and economics scaled by each "
            "pool's full/sampled instances; per-request figures as measured; raw under sampled"));
    json_object_set_new(o, "sampled", raw);
    json_object_set_new(s, "sampling", o);
}
