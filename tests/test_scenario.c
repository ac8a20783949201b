// tests/test_scenario.c -- scenario loading (sim/sim_scenario.c): the defaults of design.md §7,
// the bundled quickstart, --set overrides of every value type, where relative paths resolve,
// and each kind of bad input giving its status and a message with file, line and key.
//
// Expected values are written out from design.md §7 and the fixture files, never copied from
// the loader's own output.
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"

static char g_src[PATH_MAX];   // repository root

// snprintf that fails the test instead of truncating.
#define SNP(buf, n, ...)                                                                           \
    do {                                                                                           \
        int k_ = snprintf(buf, n, __VA_ARGS__);                                                    \
        ck_assert_msg(k_ >= 0 && (size_t)k_ < (size_t)(n), "path too long");                       \
    } while (0)

// Path of a file of the repository, for loading.
static const char *src(const char *rel, char *buf, size_t n) {
    SNP(buf, n, "%s/%s", g_src, rel);
    return buf;
}

static sim_config *cfg_new(void) {
    sim_config *c = malloc(sizeof *c);
    ck_assert_ptr_nonnull(c);
    sim_config_default(c);
    return c;
}

#define ASSERT_NEAR(a, b)                                                                          \
    ck_assert_msg(fabs((double)(a) - (double)(b)) <= 1e-9 * fabs((double)(b)) + 1e-12,             \
                  "%s = %.17g, expected %.17g", #a, (double)(a), (double)(b))

// ---- defaults -----------------------------------------------------------------------------

START_TEST(test_config_defaults) {
    sim_config *c = cfg_new();
    ck_assert_str_eq(c->name, "quickstart");
    ck_assert_uint_eq(c->seed, 1);
    ck_assert_str_eq(c->model, "llama-3.1-8b");
    ck_assert_str_eq(c->hardware, "h100");
    ck_assert_str_eq(c->step_model, "roofline");
    ck_assert_str_eq(c->workload.trace, "traces/data/azure2023_conv.csv");
    ck_assert_int_eq(c->workload.opt.format, TRC_FMT_AUTO);
    ASSERT_NEAR(c->workload.opt.time_scale, 1.0);
    ASSERT_NEAR(c->workload.opt.rate_rps, 0.0);
    ck_assert_int_eq(c->workload.opt.limit_requests, 0);
    ck_assert_str_eq(c->workload.gen.profile, "");
    ck_assert_int_eq(c->cluster.mode, SIM_DISAGGREGATED);
    ck_assert_int_eq(c->cluster.vision.instances, 0);
    ck_assert_int_eq(c->cluster.vision.gpus_per_instance, 1);
    ck_assert_int_eq(c->cluster.prefill.instances, 2);
    ck_assert_int_eq(c->cluster.prefill.gpus_per_instance, 8);
    ck_assert_int_eq(c->cluster.prefill.max_batch_tokens, 16384);
    ck_assert_int_eq(c->cluster.prefill.scheduler, SIM_SCHED_FCFS);
    ck_assert_int_eq(c->cluster.decode.instances, 2);
    ck_assert_int_eq(c->cluster.decode.gpus_per_instance, 8);
    ck_assert_int_eq(c->cluster.decode.max_batch_requests, 256);
    ck_assert_int_eq(c->cluster.decode.scheduler, SIM_SCHED_FCFS);
    ASSERT_NEAR(c->cluster.kv_transfer_Bps, 50e9);
    ASSERT_NEAR(c->cluster.net_latency_ns, 20e3);
    ck_assert_int_eq(c->cluster.n_schedule, 0);
    ck_assert_str_eq(c->router.prefill, "cache_aware");
    ck_assert_str_eq(c->router.decode, "least_kv");
    ck_assert_uint_eq(c->kv.block_tokens, 64);
    ck_assert_uint_eq(c->workload.opt.block_tokens, 64);
    ASSERT_NEAR(c->kv.dram.capacity_bytes, 0);
    ASSERT_NEAR(c->kv.dram.read_Bps, 64e9);
    ASSERT_NEAR(c->kv.ssd.capacity_bytes, 0);
    ASSERT_NEAR(c->kv.ssd.read_Bps, 40e9);
    ASSERT_NEAR(c->kv.ssd.write_Bps, 20e9);
    ck_assert_int_eq(c->kv.retention_ns[TRC_CLASS_CHATBOT], 7LL * 86400 * 1000000000LL);
    ck_assert_int_eq(c->kv.retention_ns[TRC_CLASS_AGENT], 3LL * 86400 * 1000000000LL);
    ck_assert_uint_eq(c->kv.swa_replay_tokens, 128);
    ck_assert_uint_eq(c->decoding.draft_tokens, 0);
    ASSERT_NEAR(c->decoding.acceptance, 0.0);
    ASSERT_NEAR(c->slo.ttft_p90_ms, 2000);
    ASSERT_NEAR(c->slo.tpot_p90_ms, 50);
    // Defaults stated outside §7 (scenarios/README.md).
    ASSERT_NEAR(c->kv.hbm_cache_frac, 0.8);
    ASSERT_NEAR(c->kv.activation_reserve, 0.1);
    ck_assert(c->kv.write_through && c->kv.overlap_load && c->kv.persist_decode &&
              c->kv.prefix_cache);
    ASSERT_NEAR(c->output.sample_interval_s, 10);
    ck_assert(c->output.write_requests);
    ck_assert_int_eq(c->cluster.preemption, SIM_PREEMPT_RECOMPUTE);
    // efficiency defaults are models/'s.
    mdl_efficiency eff;
    mdl_efficiency_default(&eff);
    ASSERT_NEAR(c->eff.compute, eff.compute);
    ASSERT_NEAR(c->eff.memory, eff.memory);
    ASSERT_NEAR(c->eff.step_overhead_ns, eff.step_overhead_ns);
    // economics defaults are reports/'s: §7 figures.
    ASSERT_NEAR(c->econ.gpu_hour_usd, 2.0);
    ASSERT_NEAR(c->econ.prices.output, 0.42);
    ASSERT_NEAR(c->econ.ssd_tb_month_usd, 10);
    ASSERT_NEAR(c->econ.capex_per_gpu_usd, 30000);
    ck_assert_str_eq(c->path, "");
    ck_assert_int_eq(sim_config_key_line(c, "seed"), 0);
    free(c);
}
END_TEST

// ---- quickstart ---------------------------------------------------------------------------

START_TEST(test_config_quickstart_loads) {
    sim_config *c = cfg_new();
    kvf_err e = {0};
    char p[PATH_MAX];
    ck_assert_msg(sim_config_load(c, src("scenarios/quickstart.yaml", p, sizeof p), &e) == KVF_OK,
                  "%s", e.msg);
    ck_assert_str_eq(c->name, "quickstart");
    ck_assert_str_eq(c->workload.trace, "traces/data/mooncake_conversation.jsonl");
    ck_assert_int_eq(c->workload.opt.format, TRC_FMT_MOONCAKE);
    ck_assert_int_eq(c->workload.opt.bucket, TRC_BUCKET_SPREAD);
    ck_assert_int_eq(c->cluster.prefill.instances, 4);
    ck_assert_int_eq(c->cluster.prefill.gpus_per_instance, 1);
    ck_assert_int_eq(c->cluster.decode.instances, 2);
    ck_assert_int_eq(c->cluster.decode.gpus_per_instance, 1);
    ASSERT_NEAR(c->kv.ssd.capacity_bytes, 10e12);
    // scenarios/ lives in the repository root: relative paths resolve there.
    char root[PATH_MAX], dir[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(g_src, root));
    ck_assert_ptr_nonnull(realpath(c->dir, dir));
    ck_assert_str_eq(dir, root);
    char tr[PATH_MAX], want[PATH_MAX + 64];
    sim_config_resolve(c, c->workload.trace, tr, sizeof tr);
    SNP(want, sizeof want, "%s/traces/data/mooncake_conversation.jsonl", root);
    ck_assert_str_eq(tr, want);
    // The model, hardware and trace files it names are part of the repository.
    ck_assert_msg(sim_config_validate(c, &e) == KVF_OK, "%s", e.msg);
    free(c);
}
END_TEST

// The same settings written as flow and as block mappings give the same config.
START_TEST(test_config_flow_equals_block) {
    char dir[] = "/tmp/kvf_scen_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char a[PATH_MAX], b[PATH_MAX];
    SNP(a, sizeof a, "%s/a.yaml", dir);
    SNP(b, sizeof b, "%s/b.yaml", dir);
    FILE *f = fopen(a, "w");
    fputs("cluster:\n  prefill: {instances: 3, gpus_per_instance: 2, tp: 2}\n"
          "kv_cache: {ssd: {capacity_tb: unlimited, retention: {agent: never}}}\n",
          f);
    fclose(f);
    f = fopen(b, "w");
    fputs("cluster:\n  prefill:\n    instances: 3\n    gpus_per_instance: 2\n    tp: 2\n"
          "kv_cache:\n  ssd:\n    capacity_tb: unlimited\n    retention:\n      agent: never\n",
          f);
    fclose(f);
    sim_config *ca = cfg_new(), *cb = cfg_new();
    kvf_err e = {0};
    ck_assert_msg(sim_config_load(ca, a, &e) == KVF_OK, "%s", e.msg);
    ck_assert_msg(sim_config_load(cb, b, &e) == KVF_OK, "%s", e.msg);
    ck_assert_int_eq(ca->cluster.prefill.instances, 3);
    ck_assert_int_eq(cb->cluster.prefill.instances, 3);
    ck_assert_int_eq(ca->cluster.prefill.tp, 2);
    ck_assert_int_eq(cb->cluster.prefill.gpus_per_instance, 2);
    ck_assert(ca->kv.ssd.capacity_bytes < 0 && cb->kv.ssd.capacity_bytes < 0);
    ck_assert(ca->kv.retention_ns[TRC_CLASS_AGENT] <= 0 &&
              cb->kv.retention_ns[TRC_CLASS_AGENT] <= 0);
    // Untouched keys keep their defaults.
    ck_assert_int_eq(ca->cluster.decode.instances, 2);
    ck_assert_int_eq(cb->kv.retention_ns[TRC_CLASS_CHATBOT], 7LL * 86400 * 1000000000LL);
    // Name from the file stem; dir = the file's own folder (not under scenarios/).
    ck_assert_str_eq(ca->name, "a");
    char real[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(dir, real));
    ck_assert_str_eq(ca->dir, real);
    // Lines: block file, "instances" is on line 3, "agent" on line 10.
    ck_assert_int_eq(sim_config_key_line(cb, "cluster.prefill.instances"), 3);
    ck_assert_int_eq(sim_config_key_line(cb, "kv_cache.ssd.retention.agent"), 10);
    ck_assert_int_eq(sim_config_key_line(ca, "cluster.prefill.tp"), 2);
    // A key never set answers with its nearest recorded section, else 0.
    ck_assert_int_eq(sim_config_key_line(cb, "cluster.prefill.max_batch_tokens"), 2);
    ck_assert_int_eq(sim_config_key_line(cb, "slo.ttft_p90_ms"), 0);
    char where[PATH_MAX + 128];
    sim_config_where(cb, "cluster.prefill.instances", where, sizeof where);
    char want[PATH_MAX + 128];
    SNP(want, sizeof want, "%s:3: key 'cluster.prefill.instances'", b);
    ck_assert_str_eq(where, want);
    unlink(a);
    unlink(b);
    rmdir(dir);
    free(ca);
    free(cb);
}
END_TEST

// An economics list value of any length reaches its parser whole: 24 shares written with 60
// digits each are some 1,500 characters, and a fixed 1,024-character buffer cut them and
// refused the list as malformed.
START_TEST(test_config_long_economics_value) {
    char dir[] = "/tmp/kvf_scen_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char a[PATH_MAX];
    SNP(a, sizeof a, "%s/long.yaml", dir);
    FILE *f = fopen(a, "w");
    ck_assert_ptr_nonnull(f);
    fputs("economics:\n  day_profile: [", f);
    for (int h = 0; h < 24; h++)
        fprintf(f, "%s%d.%059d", h ? ", " : "", h == 0 ? 3 : 1, 0);
    fputs("]\n", f);
    long len = ftell(f);
    fclose(f);
    ck_assert_msg(len > 1400, "the value is only %ld characters", len);
    sim_config *c = cfg_new();
    kvf_err e = {0};
    ck_assert_msg(sim_config_load(c, a, &e) == KVF_OK, "%s", e.msg);
    ck_assert(c->econ.day_profile_set);
    ck_assert_msg(c->econ.day_profile_given[0] == 3 && c->econ.day_profile_given[23] == 1,
                  "shares %g ... %g", c->econ.day_profile_given[0], c->econ.day_profile_given[23]);
    unlink(a);
    rmdir(dir);
    free(c);
}
END_TEST

// A file anywhere below a scenarios/ folder resolves relative paths against its parent.
START_TEST(test_config_dir_scenarios_parent) {
    char dir[] = "/tmp/kvf_scen_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char sub[PATH_MAX], sub2[PATH_MAX], file[PATH_MAX];
    SNP(sub, sizeof sub, "%s/scenarios", dir);
    SNP(sub2, sizeof sub2, "%s/scenarios/policies", dir);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    ck_assert_int_eq(mkdir(sub2, 0755), 0);
    SNP(file, sizeof file, "%s/x.yaml", sub2);
    FILE *f = fopen(file, "w");
    fputs("name: nested\n", f);
    fclose(f);
    sim_config *c = cfg_new();
    kvf_err e = {0};
    ck_assert_msg(sim_config_load(c, file, &e) == KVF_OK, "%s", e.msg);
    char real[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(dir, real));
    ck_assert_str_eq(c->dir, real);
    ck_assert_str_eq(c->name, "nested");
    char out[PATH_MAX + 64], want[PATH_MAX + 64];
    sim_config_resolve(c, "traces/data/t.jsonl", out, sizeof out);
    SNP(want, sizeof want, "%s/traces/data/t.jsonl", real);
    ck_assert_str_eq(out, want);
    sim_config_resolve(c, "/abs/t.jsonl", out, sizeof out);
    ck_assert_str_eq(out, "/abs/t.jsonl");
    unlink(file);
    rmdir(sub2);
    rmdir(sub);
    rmdir(dir);
    free(c);
}
END_TEST

// A relative path whose resolution does not fit the buffer a run opens it from is never cut:
// cut, "<dir>/././.../a.jsonlb" would name a.jsonl, another trace that exists, and a run
// would replay it in silence (validation looked at the whole path in a larger buffer).
START_TEST(test_config_resolve_never_cuts) {
    char dir[] = "/tmp/kvf_resolve_XXXXXX", a[128], b[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    SNP(a, sizeof a, "%s/a.jsonl", dir);
    SNP(b, sizeof b, "%s/a.jsonlb", dir);
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(i ? b : a, "w");
        ck_assert_ptr_nonnull(f);
        fputs("{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 2}\n", f);
        fclose(f);
    }
    sim_config *c = cfg_new();
    SNP(c->dir, sizeof c->dir, "%s", dir);
    // "<dir>/" + k x "./" + "a.jsonl" is SIM_PATH_MAX - 1 bytes: the cut that names a.jsonl
    size_t k = (SIM_PATH_MAX - 1 - strlen(dir) - 1 - strlen("a.jsonl")) / 2;
    ck_assert_uint_eq(strlen(dir) + 1 + 2 * k + strlen("a.jsonl"), SIM_PATH_MAX - 1);
    char out[SIM_PATH_MAX];
    kvf_err e = {0};
    for (size_t kk = k - 1; kk <= k; kk++) {
        size_t u = 0;
        for (size_t i = 0; i < kk; i++)
            c->workload.trace[u++] = '.', c->workload.trace[u++] = '/';
        SNP(c->workload.trace + u, sizeof c->workload.trace - u, "a.jsonlb");
        bool fits = sim_config_resolve(c, c->workload.trace, out, sizeof out);
        kvf_status st = sim_config_validate(c, &e);
        if (kk < k) {   // SIM_PATH_MAX - 2 bytes: fits, and is the file named
            ck_assert(fits);
            ck_assert(kvf_endswith(out, "/a.jsonlb"));
            ck_assert_msg(st == KVF_OK, "%s", e.msg);
        } else {   // one byte over: refused, and no path is given out
            ck_assert(!fits);
            ck_assert_str_eq(out, "");
            ck_assert_int_eq(st, KVF_EINVAL);
            ck_assert_msg(strstr(e.msg, "workload.trace") &&
                              strstr(e.msg, "the path is over 1023 bytes"),
                          "%s", e.msg);
        }
    }
    unlink(a);
    unlink(b);
    rmdir(dir);
    free(c);
}
END_TEST

// ---- overrides ----------------------------------------------------------------------------

static void set_ok(sim_config *c, const char *a) {
    kvf_err e = {0};
    kvf_status st = sim_config_set(c, a, &e);
    ck_assert_msg(st == KVF_OK, "--set %s: %s", a, e.msg);
}

START_TEST(test_config_set_each_type) {
    sim_config *c = cfg_new();
    set_ok(c, "cluster.prefill.instances=5");   // int
    ck_assert_int_eq(c->cluster.prefill.instances, 5);
    set_ok(c, "seed=18446744073709551615");   // u64, exact
    ck_assert_uint_eq(c->seed, UINT64_MAX);
    ck_assert_uint_eq(c->workload.opt.seed, UINT64_MAX);
    set_ok(c, "cluster.network.kv_transfer_GBps=12.5");   // GB/s -> bytes/s
    ASSERT_NEAR(c->cluster.kv_transfer_Bps, 12.5e9);
    set_ok(c, "cluster.network.latency_us=7");   // us -> ns
    ASSERT_NEAR(c->cluster.net_latency_ns, 7000);
    set_ok(c, "router.stale_ms=3");   // ms -> ns
    ASSERT_NEAR(c->router.stale_ns, 3e6);
    set_ok(c, "kv_cache.dram.gb_per_node=512");   // GB -> bytes
    ASSERT_NEAR(c->kv.dram.capacity_bytes, 512e9);
    set_ok(c, "kv_cache.dram.GBps=100");   // one key, both directions
    ASSERT_NEAR(c->kv.dram.read_Bps, 100e9);
    ASSERT_NEAR(c->kv.dram.write_Bps, 100e9);
    set_ok(c, "kv_cache.ssd.capacity_tb=unlimited");   // capacity keyword
    ck_assert(c->kv.ssd.capacity_bytes < 0);
    set_ok(c, "kv_cache.ssd.capacity_tb=2.5");
    ASSERT_NEAR(c->kv.ssd.capacity_bytes, 2.5e12);
    set_ok(c, "kv_cache.ssd.capacity_tb=1PiB");   // explicit byte size
    ASSERT_NEAR(c->kv.ssd.capacity_bytes, 1125899906842624.0);
    set_ok(c, "kv_cache.write_through=false");   // bool
    ck_assert(!c->kv.write_through);
    set_ok(c, "kv_cache.prefix_cache=no");
    ck_assert(!c->kv.prefix_cache);
    set_ok(c, "cluster.mode=colocated");   // enum
    ck_assert_int_eq(c->cluster.mode, SIM_COLOCATED);
    set_ok(c, "cluster.decode.scheduler=spf");
    ck_assert_int_eq(c->cluster.decode.scheduler, SIM_SCHED_SPF);
    set_ok(c, "cluster.preemption=swap");
    ck_assert_int_eq(c->cluster.preemption, SIM_PREEMPT_SWAP);
    set_ok(c, "workload.bucket=spread");
    ck_assert_int_eq(c->workload.opt.bucket, TRC_BUCKET_SPREAD);
    set_ok(c, "workload.format=azure");   // trace format
    ck_assert_int_eq(c->workload.opt.format, TRC_FMT_AZURE);
    set_ok(c, "router.prefill=ttft_estimate");   // name
    ck_assert_str_eq(c->router.prefill, "ttft_estimate");
    set_ok(c, "model=models/custom.yaml");   // string
    ck_assert_str_eq(c->model, "models/custom.yaml");
    set_ok(c, "kv_cache.ssd.retention.coding=36h");   // duration
    ck_assert_int_eq(c->kv.retention_ns[TRC_CLASS_CODING], 36LL * 3600 * 1000000000LL);
    set_ok(c, "kv_cache.ssd.retention.batch=never");
    ck_assert(c->kv.retention_ns[TRC_CLASS_BATCH] <= 0);
    set_ok(c, "workload.rate_rps=20");   // nullable number
    ASSERT_NEAR(c->workload.opt.rate_rps, 20);
    set_ok(c, "workload.rate_rps=null");
    ASSERT_NEAR(c->workload.opt.rate_rps, 0);
    set_ok(c, "workload.limit_requests=1000");
    ck_assert_int_eq(c->workload.opt.limit_requests, 1000);
    set_ok(c, "workload.limit_requests=");   // empty = null
    ck_assert_int_eq(c->workload.opt.limit_requests, 0);
    set_ok(c, "workload.start_s=1.5");   // s -> ns
    ck_assert_int_eq(c->workload.opt.start_ns, 1500000000LL);
    set_ok(c, "kv_cache.block_tokens=16");   // reader block size follows
    ck_assert_uint_eq(c->kv.block_tokens, 16);
    ck_assert_uint_eq(c->workload.opt.block_tokens, 16);
    set_ok(c, "efficiency.step_overhead_us=250");
    ASSERT_NEAR(c->eff.step_overhead_ns, 250e3);
    set_ok(c, "efficiency.comm_latency_us=12");
    ASSERT_NEAR(c->eff.comm_latency_ns, 12e3);
    set_ok(c, "efficiency.compute=0.45");
    ASSERT_NEAR(c->eff.compute, 0.45);
    set_ok(c, "structured.mask_us=40");
    ASSERT_NEAR(c->decoding.structured_mask_ns, 40e3);
    set_ok(c, "cluster.decode={instances: 6, max_batch_requests: 64}");   // flow mapping
    ck_assert_int_eq(c->cluster.decode.instances, 6);
    ck_assert_int_eq(c->cluster.decode.max_batch_requests, 64);
    ck_assert_int_eq(c->cluster.decode.gpus_per_instance, 8);   // untouched
    set_ok(c, "cluster.schedule=[{from_h: 0, prefill: 2, decode: 3}, {from_h: 8.5, decode: 6}]");
    ck_assert_int_eq(c->cluster.n_schedule, 2);
    ASSERT_NEAR(c->cluster.schedule[1].from_h, 8.5);
    ck_assert_int_eq(c->cluster.schedule[0].prefill, 2);
    ck_assert_int_eq(c->cluster.schedule[1].prefill, -1);
    ck_assert_int_eq(c->cluster.schedule[1].decode, 6);
    set_ok(c, "cluster.schedule=null");
    ck_assert_int_eq(c->cluster.n_schedule, 0);
    set_ok(c, "workload.generate={profile: agent, rate_rps: 4}");   // generate on
    ck_assert_str_eq(c->workload.gen.profile, "agent");
    ASSERT_NEAR(c->workload.gen.rate_rps, 4);
    set_ok(c, "workload.generate=null");   // and off
    ck_assert_str_eq(c->workload.gen.profile, "");
    set_ok(c, "economics.gpu_hour_usd=3.5");   // delegated to reports/
    ASSERT_NEAR(c->econ.gpu_hour_usd, 3.5);
    set_ok(c, "economics.prices_per_mtok.output=1.1");
    ASSERT_NEAR(c->econ.prices.output, 1.1);
    // Overrides are recorded as such.
    ck_assert_int_eq(sim_config_key_line(c, "cluster.prefill.instances"), -1);
    char where[256];
    sim_config_where(c, "cluster.prefill.instances", where, sizeof where);
    ck_assert_str_eq(where, "--set cluster.prefill.instances");
    free(c);
}
END_TEST

// An override after loading wins over the file.
START_TEST(test_config_set_after_load) {
    sim_config *c = cfg_new();
    kvf_err e = {0};
    char p[PATH_MAX];
    ck_assert_msg(sim_config_load(c, src("scenarios/quickstart.yaml", p, sizeof p), &e) == KVF_OK,
                  "%s", e.msg);
    ck_assert_int_eq(c->cluster.prefill.instances, 4);
    set_ok(c, "cluster.prefill.instances=9");
    ck_assert_int_eq(c->cluster.prefill.instances, 9);
    ck_assert_int_eq(c->cluster.decode.instances, 2);
    free(c);
}
END_TEST

static void set_bad(const char *a, kvf_status want, const char *needle1, const char *needle2) {
    sim_config *c = cfg_new();
    kvf_err e = {0};
    kvf_status st = sim_config_set(c, a, &e);
    ck_assert_msg(st == want, "--set %s: status %s (%s), expected %s", a, kvf_status_name(st),
                  e.msg, kvf_status_name(want));
    ck_assert_msg(strstr(e.msg, needle1), "--set %s: '%s' lacks '%s'", a, e.msg, needle1);
    if (needle2)
        ck_assert_msg(strstr(e.msg, needle2), "--set %s: '%s' lacks '%s'", a, e.msg, needle2);
    free(c);
}

START_TEST(test_config_set_errors) {
    set_bad("cluster.prefil.instances=4", KVF_EINVAL, "--set cluster.prefil.instances: unknown key",
            NULL);
    set_bad("cluster.prefill.instances=-2", KVF_EINVAL, "--set cluster.prefill.instances",
            "must be in [0, ");
    set_bad("cluster.prefill.instances=lots", KVF_EINVAL, "--set cluster.prefill.instances",
            "lots");
    set_bad("cluster.prefill.instances=2.5", KVF_EINVAL, "--set cluster.prefill.instances",
            "whole number");
    set_bad("router.decode=random", KVF_EINVAL, "--set router.decode",
            "round_robin|least_kv|least_requests");
    set_bad("workload.format=parquet", KVF_EINVAL, "--set workload.format", "mooncake");
    set_bad("cluster.prefill=4", KVF_EINVAL, "--set cluster.prefill", "mapping");
    set_bad("seed={a: 1}", KVF_EINVAL, "--set seed", "mapping");
    set_bad("kv_cache.write_through=maybe", KVF_EINVAL, "--set kv_cache.write_through", "maybe");
    set_bad("cluster.decode={instances: [1", KVF_EINVAL, "--set cluster.decode", "malformed");
    set_bad("no_equals_sign", KVF_EINVAL, "KEY=VALUE", NULL);
    set_bad("economics.gpu_hour_usd=free", KVF_EINVAL, "--set economics.gpu_hour_usd", NULL);
}
END_TEST

// ---- bad files ----------------------------------------------------------------------------

typedef struct bad_case {
    const char *file;   // under tests/data/bad/
    bool at_validate;   // loads fine; sim_config_validate fails
    kvf_status status;
    const char *line;    // ":N:" expected in the message
    const char *key;     // key named in the message
    const char *extra;   // another substring, or NULL
} bad_case;

static const bad_case bad_cases[] = {
    {"unknown_key.yaml", false, KVF_EPARSE, ":7:", "cluster.prefill.instancez", "unknown key"},
    {"wrong_type.yaml", false, KVF_EPARSE, ":5:", "cluster.decode.instances", "two"},
    {"negative_instances.yaml", false, KVF_EINVAL, ":6:", "cluster.decode.instances", "-1"},
    {"malformed.yaml", false, KVF_EPARSE, ":5:", "line 4", "malformed YAML"},
    {"missing_model.yaml", true, KVF_ENOENT, ":3:", "'model'", "no-such-model-7b"},
    {"bad_enum.yaml", false, KVF_EINVAL, ":6:", "cluster.prefill.scheduler", "fcfs|spf|priority"},
    {"mapping_for_scalar.yaml", false, KVF_EPARSE, ":4:", "kv_cache.block_tokens", "mapping"},
    {"scalar_for_mapping.yaml", false, KVF_EPARSE, ":3:", "'router'", "mapping"},
    {"duplicate_key.yaml", false, KVF_EPARSE, ":5:", "'seed'", "line 3"},
    {"negative_bandwidth.yaml", false, KVF_EINVAL, ":5:", "kv_cache.ssd.read_GBps",
     "must be in [0.001, "},
    {"bad_duration.yaml", false, KVF_EPARSE, ":6:", "kv_cache.ssd.retention.agent", "three"},
    {"missing_trace.yaml", true, KVF_ENOENT, ":6:", "workload.trace", "no_such_trace"},
    {"colocated_empty.yaml", true, KVF_EINVAL, ":6:", "cluster.mode", "at least 1"},
    {"bad_economics.yaml", false, KVF_EINVAL, ":4:", "economics.gpu_hour_usd", NULL},
    {"bad_day_profile.yaml", false, KVF_EINVAL, ":4:", "economics.day_profile", "24 shares"},
    {"bad_published_field.yaml", false, KVF_EPARSE, ":6:", "published.hit rate.colour",
     "unknown field"},
    {"bad_published_role.yaml", false, KVF_EPARSE, ":6:", "published.hit rate.role", "maybe"},
    {"published_output_no_key.yaml", true, KVF_EINVAL, ":11:", "published.hit rate", "summary_key"},
    {"mix_not_mixed.yaml", true, KVF_EINVAL, ":9:", "workload.generate.mix", "mixed"},
};

START_TEST(test_config_bad_file) {
    const bad_case *b = &bad_cases[_i];
    char rel[256], p[PATH_MAX];
    SNP(rel, sizeof rel, "tests/data/bad/%s", b->file);
    src(rel, p, sizeof p);
    sim_config *c = cfg_new();
    kvf_err e = {0};
    kvf_status st = sim_config_load(c, p, &e);
    if (b->at_validate) {
        ck_assert_msg(st == KVF_OK, "%s: load failed: %s", b->file, e.msg);
        st = sim_config_validate(c, &e);
    }
    ck_assert_msg(st == b->status, "%s: status %s (%s), expected %s", b->file, kvf_status_name(st),
                  e.msg, kvf_status_name(b->status));
    ck_assert_msg(strstr(e.msg, b->file), "%s: message '%s' lacks the file", b->file, e.msg);
    ck_assert_msg(strstr(e.msg, b->line), "%s: message '%s' lacks '%s'", b->file, e.msg, b->line);
    ck_assert_msg(strstr(e.msg, b->key), "%s: message '%s' lacks '%s'", b->file, e.msg, b->key);
    if (b->extra)
        ck_assert_msg(strstr(e.msg, b->extra), "%s: message '%s' lacks '%s'", b->file, e.msg,
                      b->extra);
    ck_assert_int_eq(kvf_exit_code(st), 2);
    free(c);
}
END_TEST

START_TEST(test_config_missing_file) {
    sim_config *c = cfg_new();
    kvf_err e = {0};
    kvf_status st = sim_config_load(c, "tests/data/bad/does_not_exist.yaml", &e);
    ck_assert_int_eq(st, KVF_ENOENT);
    ck_assert_msg(strstr(e.msg, "tests/data/bad/does_not_exist.yaml: No such file"), "%s", e.msg);
    ck_assert_int_eq(kvf_exit_code(st), 2);
    free(c);
}
END_TEST

// Validation of configs built in code (no file): messages name the key alone.
START_TEST(test_config_validate_in_code) {
    sim_config *c = cfg_new();
    kvf_err e = {0};
    SNP(c->dir, sizeof c->dir, "%s", g_src);
    c->workload.gen.profile[0] = '\0';
    SNP(c->workload.trace, sizeof c->workload.trace, "traces/data/mooncake_conversation.jsonl");
    c->cluster.decode.instances = 0;
    ck_assert_int_eq(sim_config_validate(c, &e), KVF_EINVAL);
    ck_assert_msg(strstr(e.msg, "key 'cluster.decode.instances'"), "%s", e.msg);
    c->cluster.decode.instances = 1;
    SNP(c->step_model, sizeof c->step_model, "calibrated");
    ck_assert_int_eq(sim_config_validate(c, &e), KVF_EINVAL);
    ck_assert_msg(strstr(e.msg, "profile"), "%s", e.msg);
    SNP(c->profile, sizeof c->profile, "no_such_profile.csv");
    ck_assert_int_eq(sim_config_validate(c, &e), KVF_ENOENT);
    ck_assert_msg(strstr(e.msg, "no_such_profile.csv"), "%s", e.msg);
    SNP(c->step_model, sizeof c->step_model, "roofline");
    c->cluster.prefill.tp = 3;   // does not divide 8 GPUs
    ck_assert_int_eq(sim_config_validate(c, &e), KVF_EINVAL);
    ck_assert_msg(strstr(e.msg, "cluster.prefill.tp"), "%s", e.msg);
    free(c);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("scenario");
    TCase *t = tcase_create("config");
    tcase_add_test(t, test_config_defaults);
    tcase_add_test(t, test_config_quickstart_loads);
    tcase_add_test(t, test_config_flow_equals_block);
    tcase_add_test(t, test_config_long_economics_value);
    tcase_add_test(t, test_config_dir_scenarios_parent);
    tcase_add_test(t, test_config_resolve_never_cuts);
    tcase_add_test(t, test_config_set_each_type);
    tcase_add_test(t, test_config_set_after_load);
    tcase_add_test(t, test_config_set_errors);
    tcase_add_loop_test(t, test_config_bad_file, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_test(t, test_config_missing_file);
    tcase_add_test(t, test_config_validate_in_code);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    const char *root = getenv("KVF_SOURCE_DIR");
    snprintf(g_src, sizeof g_src, "%s", root && *root ? root : KVF_SOURCE_DIR);
    if (chdir(g_src) != 0) return 1;   // relative fixture paths are from the repository root
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
