// sim/config/sim_validate.c -- cross-key checks of a loaded scenario (keys that cannot apply are
// refused, files named exist); ranges are the key table's, not checked again here.
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

// ---- validation ---------------------------------------------------------------------------

bool sim_config_resolve(const sim_config *c, const char *p, char *out, size_t n) {
    KVF_ASSERT(n > 0);
    int k = p[0] == '/' || !c->dir[0] || !strcmp(c->dir, ".")
                ? snprintf(out, n, "%s", p)
                : snprintf(out, n, "%s/%s", c->dir, p);
    if (k >= 0 && (size_t)k < n) return true;
    // a path cut short could name another file that exists: the empty path names none, so
    // whatever opens it fails (validation says why: file_fail)
    out[0] = '\0';
    return false;
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
    return kvf_fail(err, KVF_EINVAL, "%s: %s", where, what);
}

// The file a key names is not a usable input: KVF_ENOENT when it is missing, KVF_EINVAL when
// it is something else (a directory, a FIFO, ...); the message names the key and the path.
static kvf_status file_fail(const sim_config *c, kvf_err *err, const char *key, const char *path) {
    char where[SIM_PATH_MAX + 128];
    sim_config_where(c, key, where, sizeof where);
    if (!path[0])   // sim_config_resolve: longer than the paths a run opens
        return kvf_fail(err, KVF_EINVAL,
                        "%s: the path is over %d bytes once resolved against the scenario's "
                        "folder",
                        where, SIM_PATH_MAX - 1);
    struct stat sb;
    kvf_status code = stat(path, &sb) != 0 ? KVF_ENOENT : KVF_EINVAL;
    return kvf_fail(err, code, "%s: %s: %s", where, path, not_file_why(path));
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
        if (stat(alt, &sb) == 0 && strlen(alt) < n) copy_str(out, n, alt);
    }
}

void sim_config_model_path(const sim_config *c, char *out, size_t n) {
    resolve_named(c, c->model, "models", out, n);
}

void sim_config_hardware_path(const sim_config *c, char *out, size_t n) {
    resolve_named(c, c->hardware, "models/hardware", out, n);
}

void sim_config_pool_hardware_path(const sim_config *c, const sim_pool_cfg *p, char *out,
                                   size_t n) {
    KVF_ASSERT(c && p && out);
    if (!p->hardware[0])
        sim_config_hardware_path(c, out, n);
    else
        resolve_named(c, p->hardware, "models/hardware", out, n);
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
const char *sim_key_refused_for_pool(const sim_config *c, const char *key) {
    static const char *const vision_no[] = {"max_batch_tokens", "chunk_tokens", "kv_tokens", NULL};
    static const char *const decode_no[] = {"chunk_tokens", NULL};
    static const struct {
        const char *pool;
        const char *const *keys;
        const char *why;
    } rules[] = {
        {"vision", vision_no, "the vision pool batches images, not tokens or KV"},
        {"decode", decode_no,
         "decode steps compute one token per sequence: there is nothing to chunk"},
    };
    for (size_t r = 0; r < sizeof rules / sizeof *rules; r++) {
        if (r == 1 && c->cluster.mode == SIM_COLOCATED)
            continue;   // colocated decode instances chunk
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
            return vfail(
                c, err, "cluster.decode.gpus_per_instance",
                "colocated instances share one shape: cluster.decode's gpus_per_instance, tp "
                "and ep (%d, %d, %d) must equal cluster.prefill's (%d, %d, %d)",
                d->gpus_per_instance, d->tp, d->ep, p->gpus_per_instance, p->tp, p->ep);
    }
    for (int32_t i = 0; i < c->n_key_lines; i++) {
        const char *why = sim_key_refused_for_pool(c, c->key_lines[i].key);
        if (why) return vfail(c, err, c->key_lines[i].key, "does not apply: %s", why);
    }
    return KVF_OK;
}

static kvf_status check_pool(const sim_config *c, const sim_pool_cfg *p, const char *pool,
                             kvf_err *err) {
    char key[64];   // ranges are the key table's (sim_key_check_ranges); here what joins keys
    const sim_failures_cfg *fl = &p->failures;
    if (fl->mtbf_ns > 0) {
        snprintf(key, sizeof key, "cluster.%s.failures.mtbf_h", pool);
        if (!strcmp(pool, "vision"))
            return vfail(c, err, key, "the vision pool does not fail here (prefill and decode do)");
        snprintf(key, sizeof key, "cluster.%s.failures.mttr_s", pool);
        if (!(fl->mttr_ns > 0))
            return vfail(c, err, key, "a pool that fails needs a repair time > 0");
    } else if (fl->mttr_ns > 0 || fl->reject) {
        snprintf(key, sizeof key, "cluster.%s.failures.%s", pool,
                 fl->mttr_ns > 0 ? "mttr_s" : "requests");
        return vfail(c, err, key, "does nothing without cluster.%s.failures.mtbf_h", pool);
    }
    const sim_autoscale_cfg *as = &p->autoscale;
    if (as->metric != SIM_SCALE_NONE) {
        snprintf(key, sizeof key, "cluster.%s.autoscale.metric", pool);
        if (!strcmp(pool, "vision"))
            return vfail(c, err, key,
                         "the vision pool is sized by hand (prefill and decode scale)");
        if (c->cluster.n_schedule > 0)
            return vfail(c, err, key, "cannot apply beside cluster.schedule (one sizes the pool)");
        if (c->cluster.mode == SIM_COLOCATED && !strcmp(pool, "decode"))
            return vfail(c, err, key, "colocated: cluster.prefill.autoscale sizes the one pool");
        int32_t mx = as->max > 0 ? as->max : p->instances;
        snprintf(key, sizeof key, "cluster.%s.autoscale.max", pool);
        if (mx > p->instances)
            return vfail(c, err, key,
                         "%d exceeds cluster.%s.instances (%d, the instances provisioned)", mx,
                         pool, p->instances);
        // min 0 (not given) is 1, as the pool runs it (pool_autoscale.c)
        snprintf(key, sizeof key, "cluster.%s.autoscale.min", pool);
        if (as->min > mx)
            return vfail(c, err, key, "must be in [1, max] (max %d), got %d", mx, as->min);
        snprintf(key, sizeof key, "cluster.%s.autoscale.down", pool);
        if (!(as->down < as->up))
            return vfail(c, err, key, "must be below autoscale.up (%g), got %g", as->up, as->down);
    } else {
        static const char *const sub_keys[] = {"up",  "down",       "min",
                                               "max", "cooldown_s", "startup_s"};
        const double vals[] = {as->up, as->down, as->min, as->max, as->cooldown_ns, as->startup_ns};
        for (size_t i = 0; i < sizeof sub_keys / sizeof sub_keys[0]; i++) {
            if (vals[i] == 0) continue;   // the defaults
            snprintf(key, sizeof key, "cluster.%s.autoscale.%s", pool, sub_keys[i]);
            return vfail(c, err, key, "does nothing without cluster.%s.autoscale.metric", pool);
        }
    }
    snprintf(key, sizeof key, "cluster.%s.tp", pool);
    if (p->tp < 0 || (p->tp > 0 && p->gpus_per_instance % p->tp))
        return vfail(c, err, key, "must divide gpus_per_instance (%d), got %d",
                     p->gpus_per_instance, p->tp);
    snprintf(key, sizeof key, "cluster.%s.ep", pool);
    if (p->ep < 0 || (p->ep > 0 && p->gpus_per_instance % p->ep))
        return vfail(c, err, key, "must divide gpus_per_instance (%d), got %d",
                     p->gpus_per_instance, p->ep);
    return KVF_OK;
}

// The large-EP keys apply only to an MoE model whose experts a pool spreads over GPUs
// (route_nodes: over more than one scale-up domain); anything else is refused.
static kvf_status check_moe_keys(const sim_config *c, kvf_err *err) {
    if (!c->moe.two_batch && sim_config_key_given(c, "moe.comm_sms"))
        return vfail(c, err, "moe.comm_sms",
                     "applies with moe.two_batch_overlap only (compute beside the all-to-alls)");
    if (c->moe.single_batch && c->moe.two_batch)
        return vfail(c, err, "moe.single_batch_overlap",
                     "overlaps within one batch; moe.two_batch_overlap splits it in two (choose "
                     "one)");
    bool routing = c->moe.routing != MDL_ROUTE_BALANCED;
    // the expert-parallel load terms: the hottest GPU's share and its spread, hot-expert copies
    const char *skew = c->moe.skew != 1                ? "moe.ep_skew"
                       : c->moe.skew_sd != 0           ? "moe.ep_skew_sd"
                       : c->moe.redundant_experts != 0 ? "moe.redundant_experts"
                                                       : NULL;
    if (!c->moe.route_nodes && !c->moe.two_batch && !c->moe.single_batch && !routing && !skew)
        return KVF_OK;
    const char *key = c->moe.route_nodes    ? "moe.route_nodes"
                      : c->moe.two_batch    ? "moe.two_batch_overlap"
                      : c->moe.single_batch ? "moe.single_batch_overlap"
                      : routing             ? "moe.routing"
                                            : skew;
    char path[SIM_PATH_MAX + 128], dir[SIM_PATH_MAX + 128];
    mdl_model m;
    mdl_hardware hw;
    kvf_err e2 = {0};
    sim_config_resolve(c, "models", dir, sizeof dir);
    sim_config_model_path(c, path, sizeof path);
    if (mdl_model_load(&m, path, dir, &e2)) return vfail(c, err, "model", "%s", e2.msg);
    sim_config_hardware_path(c, path, sizeof path);
    if (mdl_hardware_load(&hw, path, dir, &e2)) return vfail(c, err, "hardware", "%s", e2.msg);
    if (!m.experts)
        return vfail(c, err, key, "applies to MoE models only (%s has no experts)", m.name);
    if (routing && strcmp(c->step_model, "table"))
        return vfail(c, err, "moe.routing",
                     "picks the table step model's fused-MoE rows; step_model %s reads none "
                     "(step_model: table, or moe.routing: balanced)",
                     c->step_model);
    const sim_pool_cfg *pools[] = {&c->cluster.prefill, &c->cluster.decode};
    uint32_t max_ep = 0;
    for (int i = 0; i < 2; i++) {
        if (pools[i]->instances < 1) continue;
        int ep = pools[i]->ep > 0 ? pools[i]->ep : pools[i]->gpus_per_instance;
        if ((uint32_t)ep > max_ep) max_ep = (uint32_t)ep;
    }
    if (max_ep <= 1 && (c->moe.route_nodes || c->moe.two_batch || c->moe.single_batch))
        return vfail(c, err, key, "needs a pool with expert parallelism (ep > 1)");
    // (the default restated, as a recorded configuration does, is no request)
    if (c->moe.two_batch && !hw.sms && sim_config_key_given(c, "moe.comm_sms") &&
        c->moe.comm_sms != SIM_COMM_SMS_DEFAULT)
        return vfail(c, err, "moe.comm_sms",
                     "%s states no SM count (hardware key sms): no SMs can be held for the "
                     "all-to-alls",
                     hw.name);
    if (c->moe.two_batch && hw.sms > 0 && c->moe.comm_sms >= hw.sms)
        return vfail(c, err, "moe.comm_sms", "%u leaves no SM for compute: %s has %u",
                     c->moe.comm_sms, hw.name, hw.sms);
    if (c->moe.route_nodes) {
        uint32_t dom = hw.scaleup_domain ? hw.scaleup_domain : MDL_SCALEUP_DOMAIN_DEFAULT;
        if (max_ep <= dom)
            return vfail(c, err, "moe.route_nodes",
                         "no pool spreads experts over more than one scale-up domain (largest "
                         "ep %u, %s domain %u GPUs)",
                         max_ep, hw.name, dom);
        if (c->moe.route_nodes >= m.experts_active)
            return vfail(c, err, "moe.route_nodes",
                         "%u does not limit routing: a token has only %u experts",
                         c->moe.route_nodes, m.experts_active);
    }
    return KVF_OK;
}

// Keys that cannot apply, refused rather than silently kept: the vision pool beside a model
// without a vision encoder (its GPUs would be billed idle), and the generator keys days mode
// does not read (arrivals come from the day and week rhythm; the span is days x 24 h).
// A key counts when its value is not the default's: a resolved configuration written back
// (summary.json "config") names every key, these at their defaults among them.
static bool differs_from_default(const sim_config *c, const sim_config *def, const keydef *d) {
    const char *a = (const char *)c + d->off, *b = (const char *)def + d->off;
    bool text = d->kind == K_STR || d->kind == K_NAME;
    return text ? strncmp(a, b, d->size) != 0 : memcmp(a, b, d->size) != 0;
}

// Whether key (a scalar of the key table) is not at its default.
static bool key_differs(const sim_config *c, const sim_config *def, const char *key) {
    for (size_t k = 0; k < sim_key_count; k++)
        if (!strcmp(sim_key_table[k].key, key))
            return differs_from_default(c, def, &sim_key_table[k]);
    KVF_ASSERT(!"key_differs: not a key");
    return false;
}

// The generator's keys for one mode, refused in the other: without workload.generate.days the
// day and week rhythm, the warm-up and the returns are not drawn, cv shapes gamma arrivals only,
// diurnal_amplitude diurnal ones, and think_s is the pause before a closed-loop session's next
// turn (days mode draws it between every session's turns).
static kvf_status check_generator_mode_keys(const sim_config *c, const sim_config *def,
                                            kvf_err *err) {
    const sim_workload_cfg *w = &c->workload;
    if (w->gen.profile[0] && (w->opt.session_rate > 0 || w->opt.session_users > 0))
        return vfail(c, err,
                     w->opt.session_rate > 0 ? "workload.session_rate" : "workload.session_users",
                     "starts the sessions of a sessions trace; a generated workload starts its "
                     "own (workload.generate.rate_rps)");
    if (!w->gen.profile[0] || w->gen.days > 0) return KVF_OK;
    static const char *const days_only[] = {
        "workload.generate.peak_hour",
        "workload.generate.weekend_ratio",
        "workload.generate.start_weekday",
        "workload.generate.warmup_days",
        "workload.generate.return.chatbot.p",
        "workload.generate.return.chatbot.median_h",
        "workload.generate.return.chatbot.sigma",
        "workload.generate.return.agent.p",
        "workload.generate.return.agent.median_h",
        "workload.generate.return.agent.sigma",
        "workload.generate.return.coding.p",
        "workload.generate.return.coding.median_h",
        "workload.generate.return.coding.sigma",
    };
    for (size_t i = 0; i < sizeof days_only / sizeof days_only[0]; i++)
        if (key_differs(c, def, days_only[i]))
            return vfail(c, err, days_only[i],
                         "applies in days mode only (workload.generate.days > 0); this workload "
                         "runs for duration_s with arrival %s",
                         w->gen.arrival);
    if (strcmp(w->gen.arrival, "gamma") && key_differs(c, def, "workload.generate.cv"))
        return vfail(c, err, "workload.generate.cv",
                     "shapes gamma arrivals only (workload.generate.arrival: gamma); arrival is "
                     "%s",
                     w->gen.arrival);
    if (strcmp(w->gen.arrival, "diurnal") &&
        key_differs(c, def, "workload.generate.diurnal_amplitude"))
        return vfail(c, err, "workload.generate.diurnal_amplitude",
                     "applies to diurnal arrivals (workload.generate.arrival: diurnal) or days "
                     "mode; arrival is %s",
                     w->gen.arrival);
    if (!w->gen.closed_loop && key_differs(c, def, "workload.generate.think_s"))
        return vfail(c, err, "workload.generate.think_s",
                     "is the pause before a session's next turn when the loop is closed "
                     "(workload.generate.closed_loop: true, or days mode); open-loop turns arrive "
                     "on their own");
    return KVF_OK;
}

static kvf_status check_keys_that_cannot_apply(const sim_config *c, kvf_err *err) {
    const char *vkey = c->cluster.vision.instances > 0 ? "cluster.vision.instances" : NULL;
    static sim_config def;
    sim_config_default(&def);
    for (size_t i = 0; !vkey && i < sim_key_count; i++)
        if (!strncmp(sim_key_table[i].key, "cluster.vision.", 15) &&
            differs_from_default(c, &def, &sim_key_table[i]))
            vkey = sim_key_table[i].key;
    if (vkey) {
        char path[SIM_PATH_MAX + 128], dir[SIM_PATH_MAX + 128];
        mdl_model m;
        kvf_err e2 = {0};
        sim_config_resolve(c, "models", dir, sizeof dir);
        sim_config_model_path(c, path, sizeof path);
        if (mdl_model_load(&m, path, dir, &e2)) return vfail(c, err, "model", "%s", e2.msg);
        if (!(m.vision_params > 0))
            return vfail(c, err, vkey,
                         "does not apply: %s is text only (no vision encoder), so a "
                         "vision pool would serve nothing",
                         m.name);
    }
    // a pool's own GPU price bills a pool the cluster has in its mode
    static const char *const econ_pools[RPT_POOL_N] = {"vision", "prefill", "decode", "colocated"};
    bool coloc = c->cluster.mode == SIM_COLOCATED;
    for (int p = 0; p < RPT_POOL_N; p++) {
        if (!rpt_econ_pool_priced(&c->econ, p)) continue;
        if (c->econ.own && c->econ.pool_gpu_hour_usd[p] >= 0) {
            char key[64];
            snprintf(key, sizeof key, "economics.pools.%s.gpu_hour_usd", econ_pools[p]);
            return vfail(c, err, key,
                         "does not apply with economics.cost_model own (owned GPUs are billed "
                         "by capex_per_gpu_usd; set economics.pools.%s.capex_per_gpu_usd)",
                         econ_pools[p]);
        }
        bool has = p == RPT_POOL_VISION
                       ? c->cluster.vision.instances > 0 || c->cluster.vision.autoscale.max > 0
                   : p == RPT_POOL_COLOCATED ? coloc
                                             : !coloc;
        if (has) continue;
        char key[64];
        snprintf(key, sizeof key, "economics.pools.%s.%s", econ_pools[p],
                 c->econ.pool_gpu_hour_usd[p] >= 0 ? "gpu_hour_usd" : "capex_per_gpu_usd");
        return vfail(c, err, key, "does not apply: the cluster has no %s pool (it is %s%s)",
                     econ_pools[p], coloc ? "colocated" : "disaggregated",
                     p == RPT_POOL_VISION ? ", with no vision instances" : "");
    }
    if (c->eff.in_system_decode != 1 && strcmp(c->step_model, "table"))
        return vfail(c, err, "efficiency.in_system_decode",
                     "scales the table step model's kernel terms; step_model %s reads no "
                     "kernel tables (step_model: table, or leave it at 1)",
                     c->step_model);
    if (c->eff.token_overhead_ns != 0 && strcmp(c->step_model, "table"))
        return vfail(c, err, "efficiency.token_overhead_ns",
                     "adds to the table step model's kernel terms what its tables do not list; "
                     "step_model %s reads no kernel tables (step_model: table, or leave it at 0)",
                     c->step_model);
    if (c->workload.gen.profile[0] && c->workload.gen.days > 0) {
        static const char *const ignored[] = {"workload.generate.arrival", "workload.generate.cv",
                                              "workload.generate.duration_s"};
        for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
            for (size_t k = 0; k < sim_key_count; k++)   // given, and not as the default
                if (!strcmp(sim_key_table[k].key, ignored[i]) &&
                    differs_from_default(c, &def, &sim_key_table[k]))
                    return vfail(c, err, ignored[i],
                                 "does not apply with workload.generate.days "
                                 "(days mode draws arrivals from the day and week rhythm over "
                                 "days x 24 h)");
    }
    kvf_status st = check_generator_mode_keys(c, &def, err);
    if (st) return st;
    if (c->router.reject_slo && strcmp(c->router.prefill, "ttft_estimate"))
        return vfail(c, err, "router.reject_over_slo",
                     "applies to router.prefill ttft_estimate only (the estimate it rejects on); "
                     "router.prefill is %s",
                     c->router.prefill);
    if (c->decoding.draft_tokens == 0 && key_differs(c, &def, "speculative.acceptance"))
        return vfail(c, err, "speculative.acceptance",
                     "applies to draft tokens (speculative.draft_tokens > 0, method draft); with "
                     "none it accepts nothing (a model's DSpark drafts follow its own acceptance "
                     "curve)");
    return KVF_OK;
}

// the model, hardware and step model's files exist and the step model is a known one
static kvf_status check_files(const sim_config *c, kvf_err *err) {
    char path[SIM_PATH_MAX];   // the size a run resolves into: what fits here fits there
    if (!c->model[0]) return vfail(c, err, "model", "must not be empty");
    sim_config_model_path(c, path, sizeof path);
    if (!is_file(path)) return file_fail(c, err, "model", path);
    if (!c->hardware[0]) return vfail(c, err, "hardware", "must not be empty");
    sim_config_hardware_path(c, path, sizeof path);
    if (!is_file(path)) return file_fail(c, err, "hardware", path);

    if (!strcmp(c->step_model, "calibrated")) {
        if (!c->profile[0])
            return vfail(c, err, "step_model", "calibrated needs a profile (key 'profile')");
        sim_config_profile_path(c, path, sizeof path);
        if (!is_file(path)) {
            kvf_status fs = file_fail(c, err, "profile", path);
            size_t m = err ? strlen(err->msg) : 0;
            if (err && c->profile[0] != '/' && m < sizeof err->msg)   // where it was looked for
                snprintf(err->msg + m, sizeof err->msg - m,
                         " (a relative profile: path resolves against the scenario's folder, "
                         "scenarios/README.md)");
            return fs;
        }
    } else if (strcmp(c->step_model, "roofline") && strcmp(c->step_model, "table")) {
        return vfail(c, err, "step_model",
                     "unknown value '%s' (allowed: roofline|calibrated|table)", c->step_model);
    }
    return KVF_OK;
}

// every published.<name> figure has a value, an output its summary key, high not below value
static kvf_status check_published(const sim_config *c, kvf_err *err) {
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
    return KVF_OK;
}

// the workload: a generator's rate, length and request cap, or a trace file that exists
static kvf_status check_workload(const sim_config *c, kvf_err *err) {
    char path[SIM_PATH_MAX];   // the size a run resolves the trace into (sim_run)
    if (c->workload.gen.profile[0]) {
        if (!(c->workload.gen.rate_rps > 0))
            return vfail(c, err, "workload.generate.rate_rps", "must be > 0");
        if (!(c->workload.gen.duration_s > 0))
            return vfail(c, err, "workload.generate.duration_s", "must be > 0");
        // what the generator makes: a sampled run generates at rate_rps x sample_rate
        const sim_generate_cfg *g = &c->workload.gen;
        double R = c->workload.sample_rate > 0 ? c->workload.sample_rate : 1;
        if (g->days > 0 && g->rate_rps * R * g->days * 86400 > SIM_MAX_REQUESTS)
            return vfail(c, err, "workload.generate.days",
                         "rate_rps x sample_rate x days x 86400 = %g requests (workload.generate."
                         "rate_rps %g), over the %g a run may hold",
                         g->rate_rps * R * g->days * 86400, g->rate_rps, SIM_MAX_REQUESTS);
        if (!(g->days > 0) && g->rate_rps * R * g->duration_s > SIM_MAX_REQUESTS)
            return vfail(
                c, err, "workload.generate.rate_rps",
                "rate_rps x sample_rate x duration_s = %g requests, over the %g a run may hold",
                g->rate_rps * R * g->duration_s, SIM_MAX_REQUESTS);
        double mix = c->workload.gen.mix[0] + c->workload.gen.mix[1] + c->workload.gen.mix[2];
        if (mix > 0 && strcmp(c->workload.gen.profile, "mixed"))
            return vfail(c, err, "workload.generate.mix",
                         "applies only to profile mixed (profile is '%s')",
                         c->workload.gen.profile);
        if (c->workload.gen.days > 0 && c->workload.opt.time_scale != 1.0)
            return vfail(c, err, "workload.time_scale",
                         "would stretch the days of generate.days; set generate.rate_rps "
                         "(or workload.rate_rps) instead");
        if (c->workload.gen.days > 0 && c->workload.gen.mean_turns > 0 &&
            c->workload.gen.mean_turns < 1)
            return vfail(c, err, "workload.generate.mean_turns",
                         "must be >= 1 (or 0, the profile's) with generate.days");
    } else {
        if (!c->workload.trace[0])
            return vfail(c, err, "workload.trace",
                         "no trace given (set workload.trace or workload.generate)");
        sim_config_resolve(c, c->workload.trace, path, sizeof path);
        if (!is_file(path)) return file_fail(c, err, "workload.trace", path);
    }
    if (c->workload.opt.end_ns && c->workload.opt.end_ns <= c->workload.opt.start_ns)
        return vfail(c, err, "workload.end_s", "must be after workload.start_s");

    return KVF_OK;
}

// the pools: their hardware files, keys, schedule and the instances the mode needs
static kvf_status check_cluster(const sim_config *c, kvf_err *err) {
    char path[SIM_PATH_MAX];
    kvf_status st;
    const sim_pool_cfg *pools[] = {&c->cluster.vision, &c->cluster.prefill, &c->cluster.decode};
    static const char *const pool_names[] = {"vision", "prefill", "decode"};
    for (int k = 0; k < 3; k++) {
        if (!pools[k]->hardware[0]) continue;
        char key[64];
        snprintf(key, sizeof key, "cluster.%s.hardware", pool_names[k]);
        sim_config_pool_hardware_path(c, pools[k], path, sizeof path);
        if (!is_file(path)) return file_fail(c, err, key, path);
    }
    if ((st = check_pool(c, &c->cluster.vision, "vision", err))) return st;
    if ((st = check_pool(c, &c->cluster.prefill, "prefill", err))) return st;
    if ((st = check_pool(c, &c->cluster.decode, "decode", err))) return st;
    for (int32_t e = 0; e < c->cluster.n_schedule; e++) {
        const sim_schedule_entry *s = &c->cluster.schedule[e];
        char key[64];
        const int32_t want[2] = {s->prefill, s->decode},
                      have[2] = {c->cluster.prefill.instances, c->cluster.decode.instances};
        static const char *const pn[2] = {"prefill", "decode"};
        for (int k = 0; k < 2; k++) {
            snprintf(key, sizeof key, "cluster.schedule[%d].%s", e, pn[k]);
            if (want[k] > have[k])
                return vfail(c, err, "cluster.schedule",
                             "%s asks %d instances, more than the %d of cluster.%s.instances", key,
                             want[k], have[k], pn[k]);
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
    return KVF_OK;
}

kvf_status sim_config_validate(const sim_config *c, kvf_err *err) {
    kvf_status st;
    if ((st = sim_key_check_ranges(c, err))) return st;
    if ((st = check_files(c, err))) return st;
    if ((st = check_moe_keys(c, err))) return st;
    if ((st = check_keys_that_cannot_apply(c, err))) return st;
    if ((st = check_published(c, err))) return st;
    if ((st = check_workload(c, err))) return st;
    if ((st = check_cluster(c, err))) return st;
    sim_sample_plan plan;   // workload.sample_rate: every pool keeps at least one instance
    if ((st = sim_sample_plan_make(c, &plan, err))) return st;
    if (!(c->cluster.kv_transfer_Bps > 0))
        return vfail(c, err, "cluster.network.kv_transfer_GBps", "must be > 0");
    // a steady window is [from, to) with to above from; a from alone would measure nothing
    const sim_output_cfg *oc = &c->output;
    if (oc->steady_from_s > 0 && !(oc->steady_to_s > 0))
        return vfail(c, err, "output.steady_from_s",
                     "needs output.steady_to_s (the window's end) above it");
    if (oc->steady_to_s > 0 && !(oc->steady_to_s > oc->steady_from_s))
        return vfail(c, err, "output.steady_to_s",
                     "must be above output.steady_from_s (%g s), got %g s", oc->steady_from_s,
                     oc->steady_to_s);
    if (c->kv.dram.capacity_bytes != 0 && !(c->kv.dram.read_Bps > 0 && c->kv.dram.write_Bps > 0))
        return vfail(c, err, "kv_cache.dram.GBps", "must be > 0");
    if (c->kv.ssd.capacity_bytes != 0 && !(c->kv.ssd.read_Bps > 0 && c->kv.ssd.write_Bps > 0))
        return vfail(c, err, "kv_cache.ssd.read_GBps", "read and write bandwidth must be > 0");
    return KVF_OK;
}
