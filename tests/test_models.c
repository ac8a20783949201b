// tests/test_models.c -- model and hardware files, derived figures, the roofline and
// calibrated step-time models, and the efficiency fit. Expected figures come from the public
// model cards and datasheets (design.md §1) or are recomputed here by hand, never copied from
// the code's output.
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mdl.h"

static char models_dir[1024];
static char tmp_dir[1024];

static void setup_dirs(void) {
    const char *src = getenv("KVF_SOURCE_DIR");
    snprintf(models_dir, sizeof models_dir, "%s/models", src ? src : ".");
    if (!tmp_dir[0]) {
        snprintf(tmp_dir, sizeof tmp_dir, "/tmp/kvf_test_models_XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
    }
}

static void cleanup_dirs(void) {
    if (!tmp_dir[0]) return;
    DIR *d = opendir(tmp_dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[1400];
            snprintf(p, sizeof p, "%s/%s", tmp_dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(tmp_dir);
    tmp_dir[0] = 0;
}

static mdl_model load_model(const char *name) {
    mdl_model m;
    kvf_err err = {0};
    kvf_status st = mdl_model_load(&m, name, models_dir, &err);
    ck_assert_msg(st == KVF_OK, "%s: %s", name, err.msg);
    return m;
}

static mdl_hardware load_hw(const char *name) {
    mdl_hardware h;
    kvf_err err = {0};
    kvf_status st = mdl_hardware_load(&h, name, models_dir, &err);
    ck_assert_msg(st == KVF_OK, "%s: %s", name, err.msg);
    return h;
}

static bool near(double a, double b, double rel) {
    return fabs(a - b) <= rel * fabs(b);
}

// Writes text into tmp_dir/name and returns the path (static buffer per call site copy).
static const char *write_tmp(const char *name, const char *text) {
    static char path[8][1100];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 1100, "%s/%s", tmp_dir, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return p;
}

// ---- files and derived figures ---------------------------------------------------------

START_TEST(test_model_kv_bytes_reference) {
    // design.md §1: KV bytes per token (bf16).
    ck_assert_double_eq(load_model("llama-3.1-8b").kv_bytes_per_token, 131072);
    ck_assert_double_eq(load_model("llama-3.1-70b").kv_bytes_per_token, 327680);
    mdl_model ds = load_model("deepseek-v3");
    ck_assert_double_eq(ds.kv_bytes_per_token, 70272);
    ck_assert_double_eq(ds.kv_bytes_per_token_full, 70272);
    mdl_model oss = load_model("gpt-oss-120b");
    ck_assert_double_eq(oss.kv_bytes_per_token_full, 36864);
    ck_assert_double_eq(oss.kv_bytes_per_token_window, 36864);
    mdl_model g = load_model("gemma-3-27b");
    ck_assert_double_eq(g.kv_bytes_per_token_full, 81920);
    ck_assert_double_eq(g.kv_bytes_per_token_window, 52.0 * 2 * 16 * 128 * 2);
    // A sequence holds full layers for every token, window layers for at most the window.
    ck_assert_double_eq(mdl_kv_seq_bytes(&oss, 1000), 36864.0 * 1000 + 36864.0 * 128);
    ck_assert_double_eq(mdl_kv_seq_bytes(&oss, 100), 73728.0 * 100);
}
END_TEST

START_TEST(test_model_params_public_figures) {
    mdl_model m8 = load_model("llama-3.1-8b");
    ck_assert_msg(near(m8.params, 8.03e9, 0.01), "8b params %.4g", m8.params);
    ck_assert_msg(near(m8.weight_bytes, 2 * 8.03e9, 0.01), "8b bytes %.4g", m8.weight_bytes);
    mdl_model m70 = load_model("llama-3.1-70b");
    ck_assert_msg(near(m70.params, 70.6e9, 0.01), "70b params %.4g", m70.params);
    mdl_model ds = load_model("deepseek-v3");
    ck_assert_msg(near(ds.params, 671e9, 0.02), "ds params %.4g", ds.params);
    ck_assert_msg(near(ds.active_params, 37e9, 0.03), "ds active %.4g", ds.active_params);
    ck_assert_msg(near(ds.weight_bytes, 671e9, 0.02), "ds fp8 bytes %.4g", ds.weight_bytes);
    mdl_model oss = load_model("gpt-oss-120b");
    ck_assert_msg(near(oss.params, 117e9, 0.02), "oss params %.4g", oss.params);
    ck_assert_msg(near(oss.active_params, 5.1e9, 0.03), "oss active %.4g", oss.active_params);
    // MXFP4 experts: the released checkpoint is about 61-65 GB.
    ck_assert_msg(oss.weight_bytes > 60e9 && oss.weight_bytes < 68e9, "oss bytes %.4g",
                  oss.weight_bytes);
    mdl_model g = load_model("gemma-3-27b");
    ck_assert_msg(near(g.params, 27.4e9, 0.03), "gemma params %.4g", g.params);
    ck_assert_double_eq(g.vision_params, 417e6);
    // Hand count for Llama-3.1-8B: blocks + embeddings + head.
    double h = 4096, blk = h * 4096 * 2 + 2 * h * 1024 + 3 * h * 14336 + 2 * h;
    double exact = 32 * blk + h + 2 * 128256 * h;
    ck_assert_msg(near(m8.params, exact, 1e-12), "8b %.10g vs %.10g", m8.params, exact);
}
END_TEST

START_TEST(test_files_all_load) {
    const char *sub[] = {"", "hardware/"};
    int count[2] = {0, 0};
    for (int s = 0; s < 2; s++) {
        char dir[1100];
        snprintf(dir, sizeof dir, "%s/%s", models_dir, sub[s]);
        DIR *d = opendir(dir);
        ck_assert_ptr_nonnull(d);
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!kvf_endswith(e->d_name, ".yaml")) continue;
            char path[1400];
            snprintf(path, sizeof path, "%s%s", dir, e->d_name);
            kvf_err err = {0};
            kvf_status st;
            if (s == 0) {
                mdl_model m;
                st = mdl_model_load(&m, path, NULL, &err);
            } else {
                mdl_hardware hw;
                st = mdl_hardware_load(&hw, path, NULL, &err);
            }
            ck_assert_msg(st == KVF_OK, "%s: %s", path, err.msg);
            count[s]++;
        }
        closedir(d);
    }
    ck_assert_int_ge(count[0], 5);
    ck_assert_int_ge(count[1], 8);
    mdl_hardware h = load_hw("h100");
    ck_assert_double_eq(h.bf16_flops, 989e12);
    ck_assert_double_eq(h.hbm_Bps, 3.35e12);
    ck_assert_double_eq(h.hbm_bytes, 80e9);
    ck_assert_double_eq(load_hw("gb200").scaleup_domain, 72);
    ck_assert_double_eq(load_hw("h800").scaleup_Bps, 400e9);
}
END_TEST

// Loads text as a model file and expects failure with each needle in the message.
static void expect_model_error(const char *text, kvf_status code, const char *n1, const char *n2) {
    const char *p = write_tmp("bad.yaml", text);
    mdl_model m;
    kvf_err err = {0};
    kvf_status st = mdl_model_load(&m, p, NULL, &err);
    ck_assert_msg(st == code, "status %d (%s) for:\n%s", st, err.msg, text);
    ck_assert_msg(strstr(err.msg, n1), "'%s' not in '%s'", n1, err.msg);
    if (n2) ck_assert_msg(strstr(err.msg, n2), "'%s' not in '%s'", n2, err.msg);
}

#define GOOD "name: x\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nffn: 128\n"

START_TEST(test_files_bad_input) {
    char loc[1200];
    // the good base loads
    const char *p = write_tmp("good.yaml", GOOD);
    mdl_model m;
    kvf_err err = {0};
    ck_assert_int_eq(mdl_model_load(&m, p, NULL, &err), KVF_OK);
    ck_assert_uint_eq(m.head_dim, 16);
    ck_assert_uint_eq(m.kv_heads, 4);
    snprintf(loc, sizeof loc, "%s/bad.yaml:7", tmp_dir);
    expect_model_error(GOOD "colour: red\n", KVF_EPARSE, loc, "unknown key 'colour'");
    snprintf(loc, sizeof loc, "%s/bad.yaml:2", tmp_dir);
    expect_model_error("name: x\nlayers: many\nhidden: 64\nheads: 4\nvocab: 100\nffn: 1\n",
                       KVF_EPARSE, loc, "'layers'");
    snprintf(loc, sizeof loc, "%s/bad.yaml:3", tmp_dir);
    expect_model_error("name: x\nlayers: 2\nhidden: -64\nheads: 4\nvocab: 100\nffn: 1\n",
                       KVF_EINVAL, loc, "'hidden' must not be negative");
    expect_model_error("name: x\nlayers: 2\nhidden: 64\nheads: 0\nvocab: 100\nffn: 1\n", KVF_EINVAL,
                       "bad.yaml:4", "'heads' must be positive");
    expect_model_error("name: x\nlayers: 2\nhidden: 64\nheads: 4\nffn: 1\n", KVF_EPARSE,
                       "bad.yaml:1", "missing required key 'vocab'");
    expect_model_error(GOOD "layers: 3\n", KVF_EPARSE, "bad.yaml:7", "repeated");
    expect_model_error(GOOD "window: {a: 1}\n", KVF_EPARSE, "bad.yaml:7", "'window'");
    expect_model_error(GOOD "attention: linear\n", KVF_EPARSE, "bad.yaml:7",
                       "gqa, mla, dsa, csa or hca");
    // DSA needs the latent and the indexer figures; index keys on other kinds are refused
    expect_model_error(GOOD "attention: dsa\nkv_lora_rank: 16\nindex_heads: 4\nindex_topk: 8\n",
                       KVF_EINVAL, "bad.yaml:1", "'index_head_dim' must be positive for dsa");
    expect_model_error(GOOD "index_topk: 2048\n", KVF_EINVAL, "bad.yaml:7",
                       "'index_topk' applies to attention: dsa, csa or hca only");
    expect_model_error(GOOD "attention: dsa\nkv_lora_rank: 16\nindex_heads: 4\n"
                            "index_head_dim: 8\nindex_topk: -1\n",
                       KVF_EINVAL, "bad.yaml:11", "'index_topk' must not be negative");
    expect_model_error(GOOD "window: 128\n", KVF_EINVAL, "bad.yaml:7", "window_layers");
    expect_model_error(GOOD "experts: 8\nexperts_active: 9\nexpert_ffn: 16\n", KVF_EINVAL,
                       "bad.yaml:8", "experts_active");
    expect_model_error(GOOD "kv_heads: 3\n", KVF_EINVAL, "bad.yaml:7", "kv_heads");
    expect_model_error("layers: [1, 2\n", KVF_EPARSE, "bad.yaml", "syntax");
    expect_model_error("", KVF_EPARSE, "bad.yaml:1", "empty");
    // missing files name the path tried
    kvf_status st = mdl_model_load(&m, "no-such-model", models_dir, &err);
    ck_assert_int_eq(st, KVF_ENOENT);
    ck_assert_msg(strstr(err.msg, "no-such-model.yaml"), "%s", err.msg);
    mdl_hardware h;
    st = mdl_hardware_load(&h, "no-such-gpu", models_dir, &err);
    ck_assert_int_eq(st, KVF_ENOENT);
    ck_assert_msg(strstr(err.msg, "hardware/no-such-gpu.yaml"), "%s", err.msg);
    // hardware: unknown key, zero bandwidth, wrong type
    p = write_tmp("hw.yaml", "name: g\nbf16_flops: 1e15\nhbm_bytes: 8e10\nhbm_Bps: 0\n");
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "hw.yaml:4") && strstr(err.msg, "'hbm_Bps' must be positive"),
                  "%s", err.msg);
    p = write_tmp("hw.yaml", "name: g\nbf16_flops: fast\nhbm_bytes: 8e10\nhbm_Bps: 1e12\n");
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "hw.yaml:2") && strstr(err.msg, "'bf16_flops'"), "%s", err.msg);
    p = write_tmp("hw.yaml", "bf16_flops: 1e15\nhbm_bytes: 8e10\nhbm_Bps: 1e12\nclock: 2\n");
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "hw.yaml:4") && strstr(err.msg, "unknown key 'clock'"), "%s",
                  err.msg);
    p = write_tmp("hw.yaml", "bf16_flops: 1e15\nhbm_bytes: 8e10\nhbm_Bps: 1e12\n");
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_OK);
    ck_assert_str_eq(h.name, "hw");   // from the file name
}
END_TEST

// ---- work and roofline -----------------------------------------------------------------

static mdl_batch one(mdl_phase ph, mdl_seq *s, uint32_t new_tokens, uint32_t cached) {
    s->new_tokens = new_tokens;
    s->cached_tokens = cached;
    mdl_batch b = {ph, s, 1, 0, NULL};
    return b;
}

START_TEST(test_work_attention_window) {
    // tiny-swa: 8 layers, 4 of them with a 128-token window; 8 heads x 64.
    mdl_model m = load_model("tiny-swa");
    mdl_seq s;
    mdl_batch b = one(MDL_PREFILL, &s, 10, 1000);
    mdl_work w;
    mdl_batch_work_detail(&m, &b, &w);
    double fpp = 4.0 * 8 * 64;
    // full layers: every new token sees 1000 + its causal prefix
    double full_pairs = 10.0 * 1000 + 10.0 * 11 / 2;
    ck_assert_double_eq_tol(w.flops[MDL_WG_ATTN_FULL], 4 * full_pairs * fpp, 1e-6);
    // window layers: each new token sees 128 keys
    ck_assert_double_eq_tol(w.flops[MDL_WG_ATTN_WINDOW], 4 * 10.0 * 128 * fpp, 1e-6);
    // window layers read at most the window of KV (+ write 10 tokens); full layers all of it
    double kvl = 2.0 * 2 * 64 * 2;
    ck_assert_double_eq_tol(w.bytes[MDL_WG_ATTN_WINDOW], 4 * kvl * (128 + 10), 1e-6);
    ck_assert_double_eq_tol(w.bytes[MDL_WG_ATTN_FULL], 4 * kvl * (1010 + 10), 1e-6);
    // a chunk straddling the window edge: c = 100, n = 50 -> keys 101..150 clipped at 128
    b = one(MDL_PREFILL, &s, 50, 100);
    mdl_batch_work_detail(&m, &b, &w);
    double pw = 0;
    for (int p = 101; p <= 150; p++)
        pw += p < 128 ? p : 128;
    ck_assert_double_eq_tol(w.flops[MDL_WG_ATTN_WINDOW], 4 * pw * fpp, 1e-6);
    // GEMMs: 2 FLOPs per block parameter per token + the head for one row
    double head = 4096.0 * 512;
    ck_assert_double_eq_tol(w.flops[MDL_WG_DENSE], 2.0 * 50 * (m.active_params - head) + 2.0 * head,
                            1e-3);
}
END_TEST

START_TEST(test_work_moe_and_vision) {
    mdl_model ds = load_model("deepseek-v3");
    mdl_seq s;
    mdl_batch b = one(MDL_DECODE, &s, 1, 100);
    mdl_work w;
    mdl_batch_work_detail(&ds, &b, &w);
    ck_assert_double_eq_tol(w.experts_touched, 8, 1e-9);   // one token: its 8 experts
    double expert = 3.0 * 7168 * 2048;
    ck_assert_double_eq_tol(w.flops[MDL_WG_EXPERT], 2.0 * 58 * 9 * expert, 1);
    ck_assert_double_eq_tol(w.weight_bytes[MDL_WG_EXPERT], 58 * 9 * expert * 1, 1);
    // a large batch touches nearly every expert
    mdl_seq many[512];
    for (int i = 0; i < 512; i++)
        many[i] = (mdl_seq){1, 100};
    mdl_batch big = {MDL_DECODE, many, 512, 0, NULL};
    mdl_batch_work_detail(&ds, &big, &w);
    ck_assert_msg(w.experts_touched > 255 && w.experts_touched <= 256, "%g", w.experts_touched);
    // vision: 2 FLOPs per encoder parameter per image token
    mdl_model g = load_model("gemma-3-27b");
    mdl_batch v = {MDL_VISION, NULL, 0, 3, NULL};
    double f, y;
    mdl_batch_work(&g, &v, &f, &y);
    ck_assert_double_eq_tol(f, 2.0 * 417e6 * 3 * 256, 1);
    ck_assert_double_eq_tol(y, 417e6 * 2, 1);
}
END_TEST

// A prompt's FLOPs counted alone (mdl_prompt_flops) are mdl_batch_work's for the batch of that
// one prompt, to the bit, on every attention kind: one-token chunks, cached prefixes inside and
// past a window, MLA's two forms.
START_TEST(test_prompt_flops_match_batch_work) {
    const char *models[] = {"llama-3.1-8b", "deepseek-v3",       "gpt-oss-120b",
                            "gemma-3-27b",  "qwen3-235b-a22b",   "deepseek-v3.2-exp",
                            "mixtral-8x7b", "deepseek-v4-flash", "tiny-swa"};
    const uint32_t lens[] = {0, 1, 2, 3, 127, 1000, 4096, 70001, 131072};
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        mdl_model m = load_model(models[k]);
        for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
            for (size_t j = 0; j < sizeof lens / sizeof *lens; j++) {
                mdl_seq s = {lens[i], lens[j]};
                mdl_batch b = {MDL_PREFILL, &s, 1, 0, NULL};
                double f, y;
                mdl_batch_work(&m, &b, &f, &y);
                double g = mdl_prompt_flops(&m, lens[i], lens[j]);
                ck_assert_msg(memcmp(&f, &g, sizeof f) == 0, "%s %u over %u: %a vs %a", models[k],
                              lens[i], lens[j], f, g);
            }
    }
}
END_TEST

START_TEST(test_roofline_decode_memory_bound) {
    mdl_model m = load_model("llama-3.1-8b");
    mdl_hardware h = load_hw("h100");
    mdl_efficiency e;
    mdl_efficiency_default(&e);
    mdl_seq s;
    mdl_batch b = one(MDL_DECODE, &s, 1, 1000);
    mdl_step_cost c;
    mdl_roofline_eval(&m, &h, NULL, &e, &b, &c);
    ck_assert(!c.compute_bound);
    double fixed = e.step_overhead_ns + 32 * e.layer_overhead_ns;
    // Weights streamed once, except the input-embedding table (only the batch's rows are
    // looked up): (8.03 B - 128256 x 4096) x 2 B over 3.35 TB/s x memory efficiency.
    double expect = 2 * (8.03e9 - 128256.0 * 4096) / (3.35e12 * e.memory) * 1e9;
    ck_assert_msg(near((double)c.ns - fixed, expect, 0.03), "decode %lld ns vs %.0f",
                  (long long)c.ns, expect + fixed);
    // and within 10 % of all weight bytes over the bandwidth
    ck_assert(near((double)c.ns - fixed, m.weight_bytes / (3.35e12 * e.memory) * 1e9, 0.10));
    // the stepper gives the same answer and counts calls
    mdl_stepper *st = mdl_roofline_create(&m, &h, NULL, &e);
    mdl_step_cost c2;
    mdl_stepper_cost(st, &b, &c2);
    ck_assert_int_eq(c2.ns, c.ns);
    ck_assert_str_eq(st->vt->name, "roofline");
    ck_assert_uint_eq(st->calls, 1);
    ck_assert_uint_eq(st->extrapolations, 0);
    mdl_stepper_destroy(st);
    // empty batch costs nothing
    mdl_batch empty = {MDL_DECODE, NULL, 0, 0, NULL};
    mdl_roofline_eval(&m, &h, NULL, &e, &empty, &c);
    ck_assert_int_eq(c.ns, 0);
}
END_TEST

START_TEST(test_roofline_prefill_compute_bound) {
    mdl_model m = load_model("llama-3.1-8b");
    mdl_hardware h = load_hw("h100");
    mdl_efficiency e;
    mdl_efficiency_default(&e);
    mdl_seq s;
    mdl_batch b = one(MDL_PREFILL, &s, 8192, 0);
    mdl_step_cost c;
    mdl_roofline_eval(&m, &h, NULL, &e, &b, &c);
    ck_assert(c.compute_bound);
    // GEMMs (2 x 7.0 B block params x 8192 tokens; the output projection only for the last
    // token) + causal attention (32 layers x 4 x 32 heads x 128 x 8192 x 8193 / 2) over
    // 989 TFLOP/s x compute efficiency.
    double gemm = 2.0 * (8.03e9 - 2 * 128256.0 * 4096) * 8192;
    double attn = 32.0 * 4 * 32 * 128 * 8192.0 * 8193 / 2;
    double expect = (gemm + attn) / (989e12 * e.compute) * 1e9;
    double fixed = e.step_overhead_ns + 32 * e.layer_overhead_ns;
    ck_assert_msg(near((double)c.ns - fixed, expect, 0.03), "prefill %lld vs %.0f", (long long)c.ns,
                  expect);
}
END_TEST

START_TEST(test_roofline_monotone) {
    const char *models[] = {"llama-3.1-8b", "deepseek-v3", "gpt-oss-120b", "gemma-3-27b"};
    mdl_hardware h = load_hw("h200");
    mdl_parallel par = {8, 8, 1, 1.0, 0, false, 0, 0, false};
    for (int k = 0; k < 4; k++) {
        mdl_model m = load_model(models[k]);
        int64_t prev = 0;
        for (uint32_t t = 1; t <= 32768; t *= 2) {   // prefill tokens
            mdl_seq s;
            mdl_batch b = one(MDL_PREFILL, &s, t, 512);
            mdl_step_cost c;
            mdl_roofline_eval(&m, &h, &par, NULL, &b, &c);
            ck_assert_msg(c.ns > prev, "%s prefill %u: %lld <= %lld", models[k], t, (long long)c.ns,
                          (long long)prev);
            prev = c.ns;
        }
        prev = 0;
        for (uint32_t ctx = 0; ctx <= 262144; ctx = ctx ? ctx * 4 : 256) {   // decode context
            mdl_seq s[16];
            for (int i = 0; i < 16; i++)
                s[i] = (mdl_seq){1, ctx};
            mdl_batch b = {MDL_DECODE, s, 16, 0, NULL};
            mdl_step_cost c;
            mdl_roofline_eval(&m, &h, &par, NULL, &b, &c);
            // window-only growth can be flat once the window is full; never decreasing
            ck_assert_msg(c.ns >= prev, "%s decode ctx %u", models[k], ctx);
            if (k != 2 && k != 3) ck_assert_msg(c.ns > prev, "%s decode ctx %u", models[k], ctx);
            prev = c.ns;
        }
        prev = 0;
        mdl_seq s[1024];
        for (int i = 0; i < 1024; i++)
            s[i] = (mdl_seq){1, 2048};
        for (uint32_t n = 1; n <= 1024; n *= 2) {   // decode batch
            mdl_batch b = {MDL_DECODE, s, n, 0, NULL};
            mdl_step_cost c;
            mdl_roofline_eval(&m, &h, &par, NULL, &b, &c);
            ck_assert_msg(c.ns > prev, "%s decode batch %u", models[k], n);
            prev = c.ns;
        }
    }
}
END_TEST

START_TEST(test_roofline_tp_halves_compute) {
    mdl_model m = load_model("llama-3.1-70b");
    mdl_hardware h = load_hw("h100");
    mdl_efficiency e;
    mdl_efficiency_default(&e);
    mdl_seq s;
    mdl_batch b = one(MDL_PREFILL, &s, 8192, 0);
    mdl_parallel p4 = {4, 4, 1, 1, 0, false, 0, 0, false}, p8 = {8, 8, 1, 1, 0, false, 0, 0, false};
    mdl_step_cost c4, c8;
    mdl_roofline_eval(&m, &h, &p4, &e, &b, &c4);
    mdl_roofline_eval(&m, &h, &p8, &e, &b, &c8);
    double fixed = e.step_overhead_ns + 80 * e.layer_overhead_ns;
    double w4 = (double)c4.ns - c4.comm_ns - fixed, w8 = (double)c8.ns - c8.comm_ns - fixed;
    ck_assert_msg(near(w4 / w8, 2.0, 0.05), "tp4 %.0f tp8 %.0f", w4, w8);
    ck_assert(c8.comm_ns > 0 && c8.comm_bytes > 0);
    // fully overlapped collectives disappear under this compute-heavy step
    mdl_efficiency ov = e;
    ov.comm_overlap = 1;
    mdl_step_cost c8o;
    mdl_roofline_eval(&m, &h, &p8, &ov, &b, &c8o);
    ck_assert_msg(llabs(c8o.ns - (c8.ns - c8.comm_ns)) <= 1, "overlap %lld vs %lld - %lld",
                  (long long)c8o.ns, (long long)c8.ns, (long long)c8.comm_ns);
    // 1 GPU has no collectives
    mdl_parallel p1 = {1, 1, 1, 1, 0, false, 0, 0, false};
    mdl_step_cost c1;
    mdl_roofline_eval(&m, &h, &p1, &e, &b, &c1);
    ck_assert_int_eq(c1.comm_ns, 0);
    // EP skew slows MoE steps
    mdl_model ds = load_model("deepseek-v3");
    mdl_seq many[256];
    for (int i = 0; i < 256; i++)
        many[i] = (mdl_seq){1, 4096};
    mdl_batch d = {MDL_DECODE, many, 256, 0, NULL};
    mdl_parallel even = {16, 1, 16, 1.0, 0, false, 0, 0, false},
                 skew = {16, 1, 16, 1.5, 0, false, 0, 0, false};
    mdl_roofline_eval(&ds, &h, &even, &e, &d, &c1);
    mdl_roofline_eval(&ds, &h, &skew, &e, &d, &c4);
    ck_assert_msg(c4.ns > c1.ns, "skew %lld even %lld", (long long)c4.ns, (long long)c1.ns);
}
END_TEST

START_TEST(test_kv_capacity) {
    mdl_model m = load_model("llama-3.1-8b");
    mdl_hardware h = load_hw("h100");
    double cap = mdl_kv_capacity_tokens(&m, &h, NULL, 0.1);
    double expect = (80e9 * 0.9 - 2 * 8.03e9) / 131072;
    ck_assert_msg(near(cap, expect, 0.01), "cap %.0f vs %.0f", cap, expect);
    mdl_model m70 = load_model("llama-3.1-70b");
    ck_assert_double_eq(mdl_kv_capacity_tokens(&m70, &h, NULL, 0.1), 0);   // 141 GB > 80 GB
    mdl_parallel p8 = {8, 8, 1, 1, 0, false, 0, 0, false};
    expect = (8 * 80e9 * 0.9 - 2 * 70.6e9) / 327680;
    cap = mdl_kv_capacity_tokens(&m70, &h, &p8, 0.1);
    ck_assert_msg(near(cap, expect, 0.01), "70b tp8 cap %.0f vs %.0f", cap, expect);
    // MLA under TP 8: every rank keeps the whole latent, 8x the bytes per token
    mdl_model ds = load_model("deepseek-v3");
    mdl_hardware h200 = load_hw("h200");
    double bytes = mdl_kv_capacity_bytes(&ds, &h200, &p8, 0.1);
    cap = mdl_kv_capacity_tokens(&ds, &h200, &p8, 0.1);
    ck_assert_msg(near(cap, floor(bytes / (70272.0 * 8)), 1e-9), "ds cap %.0f", cap);
    ck_assert_msg(near(bytes, 8 * 141e9 * 0.9 - 671e9, 0.02), "ds bytes %.4g", bytes);
}
END_TEST

// ---- calibrated ------------------------------------------------------------------------

// Synthetic engine: bilinear costs, so piecewise-linear interpolation must be exact.
static double t_pre(double T, double C) {
    return 1e5 + 300 * T + 0.05 * T * C;
}
static double t_dec(double B, double C) {
    return 2e6 + 1e4 * B + 2 * B * C;
}
static double t_host(double B) {
    return 50000 + (B - 1) * 1000;
}   // rows at 1 and 64

static const char *write_profile(const char *model) {
    static char buf[65536];
    int n = snprintf(buf, sizeof buf,
                     "# model: %s\n# hardware: cpu\n# backend: cpu\n# repeats: 5\n"
                     "model,hardware,backend,op,batch,new_tokens,context,median_ns,p10_ns,p90_ns,"
                     "repeats,flops,bytes\n",
                     model);
    double Ts[] = {16, 64, 256, 1024}, Cp[] = {0, 512, 2048};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            n += snprintf(buf + n, sizeof buf - n,
                          "%s,cpu,cpu,prefill,1,%.0f,%.0f,%.0f,%.0f,%.0f,5,0,0\n", model, Ts[i],
                          Cp[j], t_pre(Ts[i], Cp[j]), t_pre(Ts[i], Cp[j]) * 0.95,
                          t_pre(Ts[i], Cp[j]) * 1.05);
    double Bs[] = {1, 4, 16, 64}, Cd[] = {0, 1024, 4096};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            n += snprintf(buf + n, sizeof buf - n, "%s,cpu,cpu,decode,%.0f,1,%.0f,%.0f,,,5,,\n",
                          model, Bs[i], Cd[j], t_dec(Bs[i], Cd[j]));
    n += snprintf(buf + n, sizeof buf - n, "%s,cpu,cpu,host_overhead,1,0,0,%.0f,,,5,,\n", model,
                  t_host(1));
    snprintf(buf + n, sizeof buf - n, "%s,cpu,cpu,host_overhead,64,0,0,%.0f,,,5,,\n", model,
             t_host(64));
    return write_tmp("profile.csv", buf);
}

static mdl_stepper *make_cal(const mdl_model *m, const mdl_hardware *h, const char *path) {
    mdl_stepper *s = NULL;
    kvf_err err = {0};
    kvf_status st = mdl_calibrated_create(&s, m, h, NULL, NULL, path, &err);
    ck_assert_msg(st == KVF_OK, "%s", err.msg);
    ck_assert_str_eq(s->vt->name, "calibrated");
    return s;
}

static int64_t cost_of(mdl_stepper *s, mdl_phase ph, const mdl_seq *seqs, uint32_t n, bool *ex) {
    mdl_batch b = {ph, seqs, n, 0, NULL};
    mdl_step_cost c;
    mdl_stepper_cost(s, &b, &c);
    if (ex) *ex = c.extrapolated;
    return c.ns;
}

START_TEST(test_calibrated_exact_and_interpolated) {
    mdl_model m = load_model("tiny-dense");
    mdl_hardware h = load_hw("cpu");
    mdl_stepper *s = make_cal(&m, &h, write_profile("tiny-dense"));
    bool ex;
    // measured points come back exactly (plus the host overhead of the batch)
    mdl_seq one_seq = {256, 512};
    ck_assert_int_eq(cost_of(s, MDL_PREFILL, &one_seq, 1, &ex),
                     llround(t_pre(256, 512) + t_host(1)));
    ck_assert(!ex);
    mdl_seq d[64];
    for (int i = 0; i < 64; i++)
        d[i] = (mdl_seq){1, 1024};
    ck_assert_int_eq(cost_of(s, MDL_DECODE, d, 16, &ex), llround(t_dec(16, 1024) + t_host(16)));
    ck_assert(!ex);
    // corners of the tables too
    one_seq = (mdl_seq){1024, 2048};
    ck_assert_int_eq(cost_of(s, MDL_PREFILL, &one_seq, 1, &ex),
                     llround(t_pre(1024, 2048) + t_host(1)));
    ck_assert(!ex);
    for (int i = 0; i < 64; i++)
        d[i] = (mdl_seq){1, 4096};
    ck_assert_int_eq(cost_of(s, MDL_DECODE, d, 64, &ex), llround(t_dec(64, 4096) + t_host(64)));
    ck_assert(!ex);
    for (int i = 0; i < 64; i++)
        d[i] = (mdl_seq){1, 0};
    ck_assert_int_eq(cost_of(s, MDL_DECODE, d, 1, &ex), llround(t_dec(1, 0) + t_host(1)));
    ck_assert(!ex);
    // between grid points (bilinear truth: exact up to rounding)
    one_seq = (mdl_seq){100, 1000};
    ck_assert_int_eq(cost_of(s, MDL_PREFILL, &one_seq, 1, &ex),
                     llround(t_pre(100, 1000) + t_host(1)));
    ck_assert(!ex);
    // decode batch of mixed lengths: batch size and mean context
    for (int i = 0; i < 8; i++)
        d[i] = (mdl_seq){1, (uint32_t)(1000 + 250 * i)};
    double mean = 1000 + 250 * 3.5;
    int64_t got = cost_of(s, MDL_DECODE, d, 8, &ex);
    ck_assert_msg(llabs(got - llround(t_dec(8, mean) + t_host(8))) <= 1, "decode mix %lld",
                  (long long)got);
    ck_assert(!ex);
    // two prefill chunks = two prefill calls, as the engine's serving loop runs them
    mdl_seq two[2] = {{50, 1000}, {50, 1000}};
    got = cost_of(s, MDL_PREFILL, two, 2, &ex);
    ck_assert_msg(llabs(got - llround(2 * t_pre(50, 1000) + t_host(2))) <= 1, "chunks %lld vs %.0f",
                  (long long)got, 2 * t_pre(50, 1000) + t_host(2));
    // mixed: one prefill call for the chunk plus one batched decode call for the others
    mdl_seq mix[5] = {{100, 1000}, {1, 2048}, {1, 2048}, {1, 2048}, {1, 2048}};
    double expect = t_pre(100, 1000) + t_dec(4, 2048) + t_host(5);
    got = cost_of(s, MDL_MIXED, mix, 5, &ex);
    ck_assert_msg(llabs(got - llround(expect)) <= 1, "mixed %lld vs %.0f", (long long)got, expect);
    ck_assert(!ex);
    // monotone in tokens within the table
    int64_t prev = 0;
    for (uint32_t t = 16; t <= 1024; t += 16) {
        mdl_seq q = {t, 300};
        int64_t v = cost_of(s, MDL_PREFILL, &q, 1, NULL);
        ck_assert(v > prev);
        prev = v;
    }
    ck_assert_uint_eq(s->extrapolations, 0);
    mdl_stepper_destroy(s);
}
END_TEST

// Shape rows: batches the profile measured at its first context only, between the grid's
// batches (a GEMM whose row count is not a multiple of its tile costs more than its
// neighbours). Each adds its difference from the grid's interpolation at every context; the
// grid's own batches and profiles without shape rows answer as before.
START_TEST(test_calibrated_shape_columns) {
    mdl_model m = load_model("tiny-dense");
    mdl_hardware h = load_hw("cpu");
    const char *plain = write_profile("tiny-dense");
    static char buf[70000];
    char *text = NULL;
    size_t len = 0;
    kvf_err err = {0};
    ck_assert_int_eq(kvf_read_file(plain, &text, &len, &err), KVF_OK);
    // batch 2 (between 1 and 4) 3 ms over the bilinear truth, 8 at 1 ms under it
    int n = snprintf(buf, sizeof buf,
                     "%stiny-dense,cpu,cpu,decode,2,1,0,%.0f,,,5,,\n"
                     "tiny-dense,cpu,cpu,decode,8,1,0,%.0f,,,5,,\n",
                     text, t_dec(2, 0) + 3e6, t_dec(8, 0) - 1e6);
    ck_assert(n > 0 && (size_t)n < sizeof buf);
    free(text);
    mdl_stepper *s = make_cal(&m, &h, write_tmp("profile-shapes.csv", buf));
    mdl_stepper *s0 = make_cal(&m, &h, plain);
    mdl_seq d[64];
    bool ex;
    double C[] = {0, 300, 1024, 3000, 4096};
    for (int j = 0; j < 5; j++) {
        for (int i = 0; i < 64; i++)
            d[i] = (mdl_seq){1, (uint32_t)C[j]};
        // the shape rows' batches: their offset at every context (their own point exactly)
        ck_assert_int_eq(cost_of(s, MDL_DECODE, d, 2, &ex),
                         llround(t_dec(2, C[j]) + 3e6 + t_host(2)));
        ck_assert(!ex);
        ck_assert_int_eq(cost_of(s, MDL_DECODE, d, 8, &ex),
                         llround(t_dec(8, C[j]) - 1e6 + t_host(8)));
        ck_assert(!ex);
        // between a shape batch and a grid batch: the offset interpolated (3 ms at 2, 0 at 4)
        ck_assert_int_eq(cost_of(s, MDL_DECODE, d, 3, &ex),
                         llround(t_dec(3, C[j]) + 1.5e6 + t_host(3)));
        ck_assert_int_eq(cost_of(s, MDL_DECODE, d, 6, &ex),
                         llround(t_dec(6, C[j]) - 0.5e6 + t_host(6)));
        // the grid's batches and those past the shape rows: as without them
        ck_assert_int_eq(cost_of(s, MDL_DECODE, d, 12, &ex),
                         llround(t_dec(12, C[j]) - 0.5e6 + t_host(12)));
        uint32_t same[] = {1, 4, 16, 40, 64};
        for (int k = 0; k < 5; k++)
            ck_assert_int_eq(cost_of(s, MDL_DECODE, d, same[k], NULL),
                             cost_of(s0, MDL_DECODE, d, same[k], NULL));
    }
    // a mixed step's decode call carries the offset too
    mdl_seq mix[3] = {{100, 1000}, {1, 2048}, {1, 2048}};
    ck_assert_int_eq(cost_of(s, MDL_MIXED, mix, 3, &ex),
                     llround(t_pre(100, 1000) + t_dec(2, 2048) + 3e6 + t_host(3)));
    ck_assert_uint_eq(s->extrapolations, 0);
    mdl_stepper_destroy(s);
    mdl_stepper_destroy(s0);
}
END_TEST

START_TEST(test_calibrated_extrapolation_flagged) {
    mdl_model m = load_model("tiny-dense");
    mdl_hardware h = load_hw("cpu");
    mdl_stepper *s = make_cal(&m, &h, write_profile("tiny-dense"));
    bool ex;
    static mdl_seq d[4096];
    for (int i = 0; i < 4096; i++)
        d[i] = (mdl_seq){1, 1024};
    // far outside: batch 4096 (measured up to 64)
    int64_t v = cost_of(s, MDL_DECODE, d, 4096, &ex);
    ck_assert(ex);
    ck_assert(v > 0);
    ck_assert_uint_eq(s->extrapolations, 1);
    // just outside: roofline x the measured/roofline ratio of the nearest point (64, 1024)
    mdl_efficiency e;
    mdl_efficiency_default(&e);
    mdl_step_cost r128, r64;
    mdl_batch b128 = {MDL_DECODE, d, 128, 0, NULL}, b64 = {MDL_DECODE, d, 64, 0, NULL};
    mdl_roofline_eval(&m, &h, NULL, &e, &b128, &r128);
    mdl_roofline_eval(&m, &h, NULL, &e, &b64, &r64);
    double expect = (double)r128.ns * (t_dec(64, 1024) / (double)r64.ns) + t_host(64);
    v = cost_of(s, MDL_DECODE, d, 128, &ex);
    ck_assert(ex);
    ck_assert_msg(llabs(v - llround(expect)) <= 1, "fallback %lld vs %.0f", (long long)v, expect);
    // long context beyond the table
    mdl_seq q = {256, 100000};
    cost_of(s, MDL_PREFILL, &q, 1, &ex);
    ck_assert(ex);
    q = (mdl_seq){200000, 0};
    cost_of(s, MDL_PREFILL, &q, 1, &ex);
    ck_assert(ex);
    ck_assert_uint_eq(s->extrapolations, 4);
    ck_assert_uint_eq(s->calls, 4);
    // back inside: not flagged
    q = (mdl_seq){64, 0};
    cost_of(s, MDL_PREFILL, &q, 1, &ex);
    ck_assert(!ex);
    // below the smallest chunk: the first two columns extended linearly, not flagged
    q = (mdl_seq){8, 512};
    int64_t small = cost_of(s, MDL_PREFILL, &q, 1, &ex);
    ck_assert(!ex);
    ck_assert_int_eq(small, llround(t_pre(8, 512) + t_host(1)));
    ck_assert_uint_eq(s->extrapolations, 4);
    mdl_stepper_destroy(s);
}
END_TEST

START_TEST(test_calibrated_bad_profiles) {
    mdl_model m = load_model("tiny-dense");
    mdl_hardware h = load_hw("cpu");
    mdl_stepper *s = NULL;
    kvf_err err = {0};
    const char *hdr = "model,hardware,backend,op,batch,new_tokens,context,median_ns,p10_ns,"
                      "p90_ns,repeats,flops,bytes\n";
    char text[2048], loc[1200];
    // wrong model
    kvf_status st = mdl_calibrated_create(&s, &m, &h, NULL, NULL, write_profile("other"), &err);
    ck_assert_int_eq(st, KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "tiny-dense") && strstr(err.msg, "other"), "%s", err.msg);
    ck_assert_ptr_null(s);
    // bad header
    const char *p = write_tmp("p.csv", "# model: tiny-dense\nmodel,op,batch\n");
    st = mdl_calibrated_create(&s, &m, &h, NULL, NULL, p, &err);
    snprintf(loc, sizeof loc, "%s:2", p);
    ck_assert_int_eq(st, KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, loc) && strstr(err.msg, "header"), "%s", err.msg);
    // bad number on line 4
    snprintf(text, sizeof text,
             "# model: tiny-dense\n%stiny-dense,cpu,cpu,decode,1,1,0,100,,,1,,\n"
             "tiny-dense,cpu,cpu,decode,2,1,0,fast,,,1,,\n",
             hdr);
    p = write_tmp("p.csv", text);
    st = mdl_calibrated_create(&s, &m, &h, NULL, NULL, p, &err);
    snprintf(loc, sizeof loc, "%s:4", p);
    ck_assert_int_eq(st, KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, loc) && strstr(err.msg, "'median_ns'"), "%s", err.msg);
    // unknown op, wrong field count, duplicate shape, missing file
    snprintf(text, sizeof text, "%stiny-dense,cpu,cpu,train,1,1,0,100,,,1,,\n", hdr);
    p = write_tmp("p.csv", text);
    ck_assert_int_eq(mdl_calibrated_create(&s, &m, &h, NULL, NULL, p, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "p.csv:2") && strstr(err.msg, "'op'"), "%s", err.msg);
    snprintf(text, sizeof text, "%stiny-dense,cpu,cpu,decode,1,1,0,100\n", hdr);
    p = write_tmp("p.csv", text);
    ck_assert_int_eq(mdl_calibrated_create(&s, &m, &h, NULL, NULL, p, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "p.csv:2") && strstr(err.msg, "13"), "%s", err.msg);
    snprintf(
        text, sizeof text,
        "%stiny-dense,cpu,cpu,decode,1,1,0,100,,,1,,\ntiny-dense,cpu,cpu,decode,1,1,0,90,,,1,,\n",
        hdr);
    p = write_tmp("p.csv", text);
    ck_assert_int_eq(mdl_calibrated_create(&s, &m, &h, NULL, NULL, p, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "p.csv:3") && strstr(err.msg, "line 2"), "%s", err.msg);
    st = mdl_calibrated_create(&s, &m, &h, NULL, NULL, "/nonexistent/profile.csv", &err);
    ck_assert_int_eq(st, KVF_ENOENT);
    ck_assert_msg(strstr(err.msg, "/nonexistent/profile.csv"), "%s", err.msg);
}
END_TEST

// ---- efficiency fit --------------------------------------------------------------------

START_TEST(test_fit_recovers_efficiency) {
    // A profile generated by the roofline itself under known factors must be fitted back.
    mdl_model m = load_model("tiny-dense");
    mdl_hardware h = load_hw("cpu");
    mdl_efficiency truth;
    mdl_efficiency_default(&truth);
    truth.compute = 0.3;
    truth.memory = 0.5;
    truth.attention = 0.1;
    truth.step_overhead_ns = 2e5;
    truth.layer_overhead_ns = 0;
    static char buf[65536];
    int n = snprintf(buf, sizeof buf,
                     "# model: tiny-dense\nmodel,hardware,backend,op,batch,new_tokens,context,"
                     "median_ns,p10_ns,p90_ns,repeats,flops,bytes\n");
    uint32_t Ts[] = {1, 8, 64, 256, 1024, 4096}, Cs[] = {0, 1024, 8192};
    static mdl_seq seqs[256];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 3; j++) {
            mdl_seq s = {Ts[i], Cs[j]};
            mdl_batch b = {MDL_PREFILL, &s, 1, 0, NULL};
            mdl_step_cost c;
            mdl_roofline_eval(&m, &h, NULL, &truth, &b, &c);
            n +=
                snprintf(buf + n, sizeof buf - n, "tiny-dense,cpu,cpu,prefill,1,%u,%u,%lld,,,3,,\n",
                         Ts[i], Cs[j], (long long)c.ns);
        }
    uint32_t Bs[] = {1, 16, 256};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            for (uint32_t k = 0; k < Bs[i]; k++)
                seqs[k] = (mdl_seq){1, Cs[j]};
            mdl_batch b = {MDL_DECODE, seqs, Bs[i], 0, NULL};
            mdl_step_cost c;
            mdl_roofline_eval(&m, &h, NULL, &truth, &b, &c);
            n += snprintf(buf + n, sizeof buf - n, "tiny-dense,cpu,cpu,decode,%u,1,%u,%lld,,,3,,\n",
                          Bs[i], Cs[j], (long long)c.ns);
        }
    n += snprintf(buf + n, sizeof buf - n, "tiny-dense,cpu,cpu,host_overhead,1,0,0,30000,,,3,,\n");
    snprintf(buf + n, sizeof buf - n, "tiny-dense,cpu,cpu,host_overhead,64,0,0,50000,,,3,,\n");
    const char *path = write_tmp("fit.csv", buf);
    mdl_profile p;
    kvf_err err = {0};
    ck_assert_msg(mdl_profile_load(&p, path, &err) == KVF_OK, "%s", err.msg);
    ck_assert_uint_eq(p.n, 18 + 9 + 2);
    ck_assert_str_eq(p.model, "tiny-dense");
    mdl_efficiency fit = {0};
    double rms = -1;
    ck_assert_int_eq(mdl_fit_efficiency(p.rows, p.n, &m, &h, NULL, &fit, &rms, &err), KVF_OK);
    ck_assert_msg(near(fit.compute, 0.3, 0.03), "compute %g", fit.compute);
    ck_assert_msg(near(fit.memory, 0.5, 0.03), "memory %g", fit.memory);
    ck_assert_msg(near(fit.attention, 0.1, 0.03), "attention %g", fit.attention);
    ck_assert_msg(near(fit.step_overhead_ns, 2e5 + 40000, 0.05), "overhead %g",
                  fit.step_overhead_ns);
    ck_assert_msg(rms >= 0 && rms < 0.01, "rms %g", rms);
    // stored with its error, read back
    mdl_fit f;
    ck_assert_int_eq(mdl_fit_profile(&f, &p, &m, &h, NULL, &err), KVF_OK);
    ck_assert_uint_eq(f.rows, 27);
    ck_assert(f.err_max < 0.03);
    char fpath[1200];
    snprintf(fpath, sizeof fpath, "%s/tiny-dense.fit", tmp_dir);
    ck_assert_int_eq(mdl_fit_write(&f, fpath, &err), KVF_OK);
    mdl_fit g;
    ck_assert_msg(mdl_fit_load(&g, fpath, &err) == KVF_OK, "%s", err.msg);
    ck_assert_str_eq(g.model, "tiny-dense");
    ck_assert(near(g.eff.compute, f.eff.compute, 1e-5));
    ck_assert(near(g.eff.memory, f.eff.memory, 1e-5));
    ck_assert(near(g.eff.attention, f.eff.attention, 1e-5));
    ck_assert(near(g.err_rms + 1, f.err_rms + 1, 1e-5));
    ck_assert_uint_eq(g.rows, 27);
    // too few rows
    ck_assert_int_eq(mdl_fit_efficiency(p.rows, 2, &m, &h, NULL, &fit, &rms, &err), KVF_EINVAL);
    mdl_profile_free(&p);
}
END_TEST

// A decode batch given as running sums costs exactly (bit for bit) what the same sequences
// listed one by one cost, under the roofline and the calibrated model, for dense, MoE, MLA and
// sliding-window models, alone and beside prefill chunks (mixed steps).
// DeepSeek Sparse Attention against dense MLA (DeepSeek-V3.2-Exp against DeepSeek-V3, the same
// structure but for the indexer), by hand from the public description: 61 layers, 128 heads,
// kv_lora_rank 512, rope 64, head dim 128; indexer 64 heads x 128 dims in FP8, top-k 2048.
START_TEST(test_dsa_against_mla) {
    mdl_model mla = load_model("deepseek-v3"), dsa = load_model("deepseek-v3.2-exp");
    uint32_t caps[MDL_CAPS];
    mdl_model_caps(&dsa, caps);
    ck_assert_uint_eq(caps[MDL_CAP_TOPK], 2048);
    mdl_model_caps(&mla, caps);
    ck_assert_uint_eq(caps[MDL_CAP_TOPK], 0);
    const double L = 61, H = 128, R = 512, RO = 64, HD = 128, IH = 64, ID = 128, K = 2048;
    // KV per token and layer: latent 576 x 2 B; index key 128 FP8 + one fp32 scale
    ck_assert_double_eq(mla.kv_bytes_per_token_layer, 1152);
    ck_assert_double_eq(dsa.kv_bytes_per_token_layer, 1152 + 132);
    // Indexer weights: q_lora x 64 x 128 + hidden x 128 + LayerNorm + hidden x 64 per layer
    ck_assert_double_eq(dsa.params - mla.params,
                        L * (1536 * IH * ID + 7168 * ID + 2 * ID + 7168 * IH));
    const double ctxs[2] = {32768, 131072};
    for (int i = 0; i < 2; i++) {
        double n = ctxs[i];
        // Prefill of an n-token prompt. Dense MLA: every causal pair, in the expanded form
        // (cheaper with no cached latents): QK over 128 + 64 dims and PV over 128, per head.
        double pairs = n * (n + 1) / 2;
        double mla_f = L * pairs * (2 * H * (HD + RO) + 2 * H * HD);
        // DSA: query p sees min(p, 2048) keys, in the absorbed form (QK over 576, PV over 512);
        // the indexer scores every pair: 2 x 64 x 128 FLOPs + 2 x 64 for the weighted sum.
        double sel = K * (K + 1) / 2 + (n - K) * K;
        double dsa_f = L * sel * (2 * H * (R + RO) + 2 * H * R);
        double idx_f = L * pairs * (2 * IH * ID + 2 * IH);
        mdl_seq s = {(uint32_t)n, 0};
        mdl_batch b = {.phase = MDL_PREFILL, .seqs = &s, .n = 1};
        mdl_work wm, wd;
        mdl_batch_work_detail(&mla, &b, &wm);
        mdl_batch_work_detail(&dsa, &b, &wd);
        ck_assert_msg(near(wm.flops[MDL_WG_ATTN_FULL], mla_f, 1e-12), "mla prefill %.6g vs %.6g",
                      wm.flops[MDL_WG_ATTN_FULL], mla_f);
        ck_assert_msg(near(wd.flops[MDL_WG_ATTN_FULL], dsa_f, 1e-12), "dsa prefill %.6g vs %.6g",
                      wd.flops[MDL_WG_ATTN_FULL], dsa_f);
        ck_assert_msg(near(wd.flops[MDL_WG_ATTN_INDEX], idx_f, 1e-12), "indexer %.6g vs %.6g",
                      wd.flops[MDL_WG_ATTN_INDEX], idx_f);
        ck_assert_double_eq(wm.flops[MDL_WG_ATTN_INDEX], 0);
        // 32k: 1.65e15 vs 2.68e15 per prompt; 128k: 1.32e16 vs 4.29e16 -- sparse is cheaper
        // and the gap widens with the context
        ck_assert(dsa_f + idx_f < mla_f);
        printf("prefill %6.0f tokens: MLA %.4g FLOPs, DSA %.4g (attention %.4g + indexer %.4g)\n",
               n, mla_f, dsa_f + idx_f, dsa_f, idx_f);
        // Decode of one token over n cached: MLA reads n + 1 latents and writes one; DSA
        // reads 2048 latents and n + 1 index keys, writes one of each.
        mdl_seq d = {1, (uint32_t)n};
        mdl_batch bd = {.phase = MDL_DECODE, .seqs = &d, .n = 1};
        mdl_batch_work_detail(&mla, &bd, &wm);
        mdl_batch_work_detail(&dsa, &bd, &wd);
        double mla_b = L * 1152 * (n + 1 + 1);
        double dsa_b = L * 1152 * (K + 1) + L * 132 * (n + 1 + 1);
        ck_assert_double_eq(wm.bytes[MDL_WG_ATTN_FULL], mla_b);
        ck_assert_double_eq(wd.bytes[MDL_WG_ATTN_FULL] + wd.bytes[MDL_WG_ATTN_INDEX], dsa_b);
        ck_assert_double_eq(wd.flops[MDL_WG_ATTN_FULL], L * K * (2 * H * (R + RO) + 2 * H * R));
        ck_assert_double_eq(wd.flops[MDL_WG_ATTN_INDEX], L * (n + 1) * (2 * IH * ID + 2 * IH));
        printf("decode over %6.0f: MLA reads %.4g B, DSA %.4g B (%.3gx)\n", n, mla_b, dsa_b,
               mla_b / dsa_b);
    }
}
END_TEST

// Two micro-batches on DeepSeek's published schedules (mdl_tbo_stages_of), by hand: in
// decode dispatch hides under shared experts + pre-attention projections only, combine under
// attention + o projection, and the routed experts hide nothing; in prefill each of the four
// pairs of the schedule hides what its compute covers, on the SMs the all-to-alls leave.
START_TEST(test_tbo_stages) {
    mdl_parts pp;
    memset(&pp, 0, sizeof pp);
    pp.tbo = true;
    pp.group_s[MDL_WG_DENSE] = 4.0;    // of which pre-attention 1.0, dense layers' FFN 0.5
    pp.group_s[MDL_WG_EXPERT] = 5.0;   // of which shared experts 1.0
    pp.pre_s = 1.0, pp.dense_ffn_s = 0.5, pp.shared_s = 1.0;
    pp.moe_share = 0.9;   // MoE layers / layers
    pp.ep_comm_s = 9.0, pp.ep_disp_s = 3.0, pp.tp_comm_s = 0.5;
    pp.sm_share = 1, pp.decode = true;
    double total = 15.0;   // 4 + 5 + 6 of attention
    mdl_tbo_stages st;
    // A0 = 0.9; A1 = 0.9 x (6 + 4 - 1 - 0.5) = 7.65; S = 1; E = 4; D = 3; C = 6 + 0.5
    // exposed = (3 - 1.9) + max(0, 6.5 - 7.65) = 1.1
    ck_assert_msg(near(mdl_tbo_stages_of(&pp, total, &st), 16.1, 1e-12), "decode %.9g",
                  st.compute_s + st.exposed_s);
    ck_assert(near(st.a0, 0.9, 1e-12) && near(st.a1, 7.65, 1e-12) && near(st.e, 4, 1e-12));
    ck_assert(near(st.c, 6.5, 1e-12) && near(st.exposed_s, 1.1, 1e-12));
    // a combine past its attention shows too: C = 9.5 -> (3 - 1.9) + (9.5 - 7.65) = 2.95
    pp.tp_comm_s = 3.5;
    mdl_tbo_stages_of(&pp, total, &st);
    ck_assert_msg(near(st.exposed_s, 2.95, 1e-12), "decode exposed %.9g", st.exposed_s);
    // prefill on 108 of 132 SMs: every compute term x 132 / 108
    pp.tp_comm_s = 0.5, pp.decode = false, pp.sm_share = 108.0 / 132;
    double k = 132.0 / 108;
    mdl_tbo_stages_of(&pp, total, &st);
    double A = (0.9 + 7.65) * k, S = 1 * k, E = 4 * k, D = 3, C = 6.5;
    double want = (fmax(0, C - A - S) + fmax(0, D - A) + fmax(0, D - E) + fmax(0, C - E - S)) / 2;
    ck_assert(near(st.compute_s, 15 * k, 1e-12));
    // only the last pair shows: C - E - S = 6.5 - 6.11
    ck_assert_msg(near(st.exposed_s, want, 1e-12) && near(want, (6.5 - 5 * k) / 2, 1e-12),
                  "prefill %.9g", st.exposed_s);
    // communication-heavy prefill: D = 30, C = 40 -> (40 - A - S) + (30 - A) + (30 - E) +
    // (40 - E - S), halved
    pp.ep_comm_s = 69.5, pp.ep_disp_s = 30;
    mdl_tbo_stages_of(&pp, total, &st);
    want = ((40 - A - S) + (30 - A) + (30 - E) + (40 - E - S)) / 2;
    ck_assert_msg(near(st.exposed_s, want, 1e-12), "prefill %.9g vs %.9g", st.exposed_s, want);
    // = D + C and the work beside no all-to-all (the dense layers' 10 % and FFN: 1.45 x k)
    ck_assert(near(st.compute_s + st.exposed_s, 70 + 1.45 * k, 1e-12));
}
END_TEST

// The fused-MoE rows a step reads follow the routing asked for (moe.routing): Qwen3-235B-A22B
// FP8 at EP8 on H100, 128 sequences per GPU = 1,024 tokens entering the op on each GPU, a
// measured point of both series: the expert term is 94 layers x the row's time.
START_TEST(test_moe_routing_rows) {
    mdl_model q = load_model("qwen3-235b-a22b");
    mdl_hardware h = load_hw("h100");
    mdl_model_apply_precision(&q, MDL_PREC_FP8, MDL_PREC_FP8, MDL_PREC_FP8);
    uint32_t caps[MDL_CAPS];
    mdl_model_caps(&q, caps);
    mdl_decode_sum d = {0};
    for (int i = 0; i < 8 * 128; i++)
        mdl_decode_sum_add(&d, caps, 1000);
    mdl_batch b = {.phase = MDL_DECODE, .dsum = &d};
    double want[2] = {0, 0}, got[2] = {0, 0};
    for (uint8_t route = MDL_ROUTE_BALANCED; route <= MDL_ROUTE_POWER_LAW; route++) {
        for (uint32_t i = 0; i < h.nkrows; i++) {
            const mdl_krow *r = &h.krows[i];
            if (r->kind == MDL_K_MOE_FP8 && r->experts == 128 && r->tp == 1 && r->ep == 8 &&
                r->tokens == 1024 && r->routing == route)
                want[route] = 94 * r->us * 1e-6;
        }
        mdl_parallel par = {.gpus = 8, .tp = 1, .ep = 8, .ep_skew = 1, .routing = route};
        mdl_step_cost c;
        mdl_explain ex;
        bool fb;
        mdl_table_eval(&q, &h, &par, NULL, &b, true, &c, &ex, &fb);
        for (int i = 0; i < ex.n; i++)
            if (!strcmp(ex.t[i].name, "expert GEMMs")) {
                got[route] = ex.t[i].s;
                ck_assert_msg(strstr(ex.t[i].source, route ? "power_law_1.2" : "balanced"), "%s",
                              ex.t[i].source);
            }
        ck_assert_msg(want[route] > 0 && near(got[route], want[route], 1e-3),
                      "routing %d: expert term %.6g s, row %.6g s", route, got[route], want[route]);
    }
    // the hot experts' GPU is slower: 1.31x at this point of the database
    ck_assert_msg(got[1] > 1.2 * got[0], "power law %.6g vs balanced %.6g", got[1], got[0]);
}
END_TEST

// The table model without tables is the roofline, term for term (to the nanosecond); with the
// hardware file's tables each term comes from the rows, as recomputed here by hand from the
// published figures (DeepEP, DeepGEMM, FlashMLA rows of h800.yaml).
// The EP64 low-latency curve's GBps at t tokens (log-log between its rows at lo and hi) over
// its GBps at 128 tokens.
static double ep_curve_ratio(const mdl_hardware *h, mdl_kkind kind, double t, double lo,
                             double hi) {
    double y[3] = {0, 0, 0}, at[3] = {lo, hi, 128};
    for (uint32_t i = 0; i < h->nkrows; i++)
        for (int j = 0; j < 3; j++)
            if (h->krows[i].kind == kind && h->krows[i].low_latency && h->krows[i].ep == 64 &&
                h->krows[i].tokens == at[j])
                y[j] = h->krows[i].GBps;
    ck_assert(y[0] > 0 && y[1] > 0 && y[2] > 0);
    double f = log(t / lo) / log(hi / lo);
    return exp(log(y[0]) + f * (log(y[1]) - log(y[0]))) / y[2];
}

START_TEST(test_table_model_terms) {
    mdl_model ds = load_model("deepseek-v3");
    mdl_hardware h800 = load_hw("h800"), b200;
    // the DeepGEMM grouped rows under test: the MoE rows measured between DeepEP's all-to-alls
    // (read first under EP; test_stepmodels' test_moe_normal_rows reads them) set aside
    uint32_t kept = 0;
    for (uint32_t i = 0; i < h800.nkrows; i++)
        if (h800.krows[i].a2a == MDL_A2A_NONE) h800.krows[kept++] = h800.krows[i];
    ck_assert_uint_lt(kept, h800.nkrows);
    h800.nkrows = kept;
    mdl_hardware_index(&h800);
    {
        // B200's datasheet figures without kernel tables (design.md §1)
        const char *p =
            write_tmp("b200-bare.yaml", "name: b200-bare\nbf16_flops: 2250e12\nfp8_flops: 4500e12\n"
                                        "hbm_bytes: 180e9\nhbm_Bps: 8e12\nscaleup_Bps: 1800e9\n"
                                        "nic_Bps: 40e9\n");
        kvf_err err = {0};
        ck_assert_msg(mdl_hardware_load(&b200, p, NULL, &err) == KVF_OK, "%s", err.msg);
        ck_assert_uint_eq(b200.nkrows, 0);
    }
    mdl_parallel par = {
        .gpus = 144, .tp = 1, .ep = 144, .ep_skew = 1.0, .route_nodes = 4, .two_batch = true};
    uint32_t caps[MDL_CAPS];
    mdl_model_caps(&ds, caps);
    mdl_decode_sum d = {0};
    for (int i = 0; i < 144 * 90; i++)
        mdl_decode_sum_add(&d, caps, 5000);
    mdl_batch b = {.phase = MDL_DECODE, .dsum = &d};
    mdl_step_cost roof, t0, t1;
    mdl_explain ex;
    bool fb = true;
    mdl_roofline_eval(&ds, &h800, &par, NULL, &b, &roof);
    mdl_table_eval(&ds, &h800, &par, NULL, &b, false, &t0, &ex, &fb);
    ck_assert_int_eq(t0.ns, roof.ns);
    ck_assert(!fb);
    mdl_table_eval(&ds, &h800, &par, NULL, &b, true, &t1, &ex, &fb);
    ck_assert(!fb);   // every applicable term has rows on H800
    const mdl_term *disp = NULL, *comb = NULL, *attn = NULL, *exp = NULL;
    for (int i = 0; i < ex.n; i++) {
        if (!strcmp(ex.t[i].name, "EP dispatch")) disp = &ex.t[i];
        if (!strcmp(ex.t[i].name, "EP combine")) comb = &ex.t[i];
        if (!strcmp(ex.t[i].name, "attention")) attn = &ex.t[i];
        if (!strcmp(ex.t[i].name, "expert GEMMs")) exp = &ex.t[i];
    }
    ck_assert(disp && comb && attn && exp);
    // DeepEP low-latency rows: 39 GB/s at EP128 and EP256 for dispatch; 39 and 40 for combine,
    // measured at 128 tokens a call; two micro-batches call with 45 tokens each, so both scale
    // by the EP64 curve's bandwidth at 45 tokens (log-log between its 32 and 48) over its 128.
    // 90 tokens x top-8 x 7168 x 1 B (FP8, and a 4 B scale per 128) per GPU and layer, 58 MoE
    // layers; the combine in bf16.
    double rd = ep_curve_ratio(&h800, MDL_K_EP_DISPATCH, 45, 32, 48),
           rc = ep_curve_ratio(&h800, MDL_K_EP_COMBINE, 45, 32, 48);
    ck_assert(rd > 0.5 && rd < 1 && rc > 0.5 && rc < 1);
    double bd = 90.0 * 8 * 7168, gc = 39 + log(144.0 / 128) / log(2.0) * (40 - 39);
    ck_assert_msg(near(disp->s, 58 * bd * (1 + 4.0 / 128) / (39e9 * rd), 1e-9), "dispatch %.6g",
                  disp->s);
    ck_assert_msg(near(comb->s, 58 * 2 * bd / (gc * 1e9 * rc), 1e-9), "combine %.6g", comb->s);
    ck_assert_msg(strstr(disp->how, "ep=64 token curve"), "%s", disp->how);
    ck_assert(disp->row_lo > 0 && strstr(disp->source, "DeepEP"));
    // FlashMLA row: max(KV bytes / 3000 GB/s, FLOPs / 660 TFLOPS) per GPU; KV read and written
    // per GPU = 90 x (5001 + 1) latents x 61 layers x 1152 B; absorbed FLOPs per key and layer
    // 2 x 128 x 576 + 2 x 128 x 512 -- compute-bound here (11.6 ms against 10.5 ms)
    double kv = 90.0 * (5001 + 1) * 61 * 1152,
           fl = 90.0 * 5001 * 61 * (2 * 128 * 576 + 2 * 128 * 512);
    double want = KVF_MAX(kv / 3000e9, fl / 660e12);
    ck_assert_msg(near(attn->s, want, 1e-9), "attention %.6g vs %.6g", attn->s, want);
    ck_assert(fl / 660e12 > kv / 3000e9);
    ck_assert(strstr(attn->source, "FlashMLA"));
    // DeepGEMM masked rows by tokens per expert of one micro-batch: 12960 x 8 / 256 / 2 = 202.5
    // per expert, below the smallest row (m = 256: gate+up 932, down 815 TFLOPS), so each call
    // costs that row's time: TFLOPS x 202.5 / 256
    double f = 202.5 / 256;
    double gu = 932 * f, dn = 815 * f;
    double routed = 2.0 * 12960 * 58 * 8 * ds.expert_params;
    double shared_part = exp->s - (routed * 2 / 3 / (gu * 1e12) + routed / 3 / (dn * 1e12)) / 144;
    // the shared experts at 45 rows a micro-batch (below DeepGEMM's m = 64): weight-bound, read
    // twice, about a third of the term
    ck_assert_msg(shared_part > 0.15 * exp->s && shared_part < 0.4 * exp->s,
                  "expert term %.6g, shared %.6g", exp->s, shared_part);
    // two micro-batches on the decode schedule: the terms add up to the step, the overlap
    // leaves exposed what its stages do not cover: at least the dispatch past the shared
    // experts and pre-attention projections (q_a+kv_a, q_b, kv_b rows), at most all of it
    double comm = disp->s + comb->s, sum = 0, pre = 0, shared = 0;
    const mdl_term *ov = NULL;
    for (int i = 0; i < ex.n; i++) {
        if (ex.t[i].name[0] != ' ') sum += ex.t[i].s;
        if (!strcmp(ex.t[i].name, "overlap")) ov = &ex.t[i];
        if (!strcmp(ex.t[i].name, "  shared experts")) shared = ex.t[i].s;
        if (!strcmp(ex.t[i].name, "  gemm") && strstr(ex.t[i].how, "o projection") == NULL)
            pre += ex.t[i].s;
    }
    ck_assert(ov && strstr(ov->how, "decode schedule") && pre > 0 && shared > 0);
    ck_assert_msg(near(ex.total_s, sum, 1e-6), "total %.6g vs terms %.6g", ex.total_s, sum);
    double exposed = comm + ov->s, moe_share = 58.0 / 61;
    ck_assert_msg(exposed >= disp->s - shared - moe_share * pre - 1e-9 && exposed <= comm,
                  "exposed %.6g of dispatch %.6g, combine %.6g", exposed, disp->s, comb->s);
    // the same wide batch with varied contexts, listed and as sums, through the table rows
    // (FlashMLA, DeepGEMM, DeepEP): the same nanosecond and no fallback either way; DSA too
    const char *names[] = {"deepseek-v3", "deepseek-v3.2-exp"};
    for (int k = 0; k < 2; k++) {
        mdl_model mk = load_model(names[k]);
        mdl_model_caps(&mk, caps);
        enum { NS = 144 * 90 };
        static mdl_seq all[NS];
        mdl_decode_sum dv = {0};
        for (int i = 0; i < NS; i++) {
            all[i] = (mdl_seq){1, (uint32_t)(1 + (i * 7919) % 12000)};
            mdl_decode_sum_add(&dv, caps, all[i].cached_tokens);
        }
        mdl_batch bl = {.phase = MDL_DECODE, .seqs = all, .n = NS},
                  bs = {.phase = MDL_DECODE, .dsum = &dv};
        mdl_step_cost ca, cb;
        bool fa, fb2;
        mdl_table_eval(&mk, &h800, &par, NULL, &bl, true, &ca, NULL, &fa);
        mdl_table_eval(&mk, &h800, &par, NULL, &bs, true, &cb, NULL, &fb2);
        ck_assert_msg(ca.ns == cb.ns && fa == fb2, "%s: %lld vs %lld", names[k], (long long)ca.ns,
                      (long long)cb.ns);
        // with the in-system terms (models/fits/ep-decode-in-system.yaml) too, longer
        mdl_efficiency fe;
        mdl_efficiency_default(&fe);
        fe.in_system_decode = 1.191;
        fe.token_overhead_ns = 324;
        mdl_step_cost il, is;
        mdl_table_eval(&mk, &h800, &par, &fe, &bl, true, &il, NULL, NULL);
        mdl_table_eval(&mk, &h800, &par, &fe, &bs, true, &is, NULL, NULL);
        ck_assert_msg(il.ns == is.ns && il.ns > ca.ns, "%s in-system: %lld vs %lld (plain %lld)",
                      names[k], (long long)il.ns, (long long)is.ns, (long long)ca.ns);
        ck_assert(k == 1 || !fa);   // DSA has no decode_attn row: its attention falls back
        ck_assert(k == 0 || fa);
    }
    // no tables: every step is a fallback, counted by the stepper
    mdl_stepper *s = mdl_table_create(&ds, &b200, &par, NULL);
    mdl_step_cost c;
    for (int i = 0; i < 3; i++)
        mdl_stepper_cost(s, &b, &c);
    ck_assert_uint_eq(s->table_fallbacks, 3);
    mdl_roofline_eval(&ds, &b200, &par, NULL, &b, &roof);
    ck_assert_int_eq(c.ns, roof.ns);
    mdl_stepper_destroy(s);
    // node-limited routing: fewer NIC copies than unlimited routing over 18 nodes
    mdl_ep_comm e4, eall;
    mdl_parallel unl = par;
    unl.route_nodes = 0;
    mdl_ep_comm_time(&ds, &h800, &par, NULL, 90, &e4);
    mdl_ep_comm_time(&ds, &h800, &unl, NULL, 90, &eall);
    // 4 nodes: 4 (1 - (3/4)^8) = 3.60 distinct, 17/18 remote; 18 nodes: 18 (1 - (17/18)^8) = 6.65
    ck_assert_msg(near(e4.nic_copies, 4 * (1 - pow(0.75, 8)) * 17 / 18, 1e-12), "%.6g",
                  e4.nic_copies);
    ck_assert_msg(near(eall.nic_copies, 18 * (1 - pow(17.0 / 18, 8)) * 17 / 18, 1e-12), "%.6g",
                  eall.nic_copies);
    ck_assert_double_eq(e4.fabric_copies, 8.0 * 7 / 8);
    // FP8 dispatch (1 B) + BF16 combine (2 B) per hidden element
    ck_assert_double_eq(e4.bytes_per_copy, 7168.0 * 3);
}
END_TEST

// Kernel tables in hardware files: rows parse with their sources; bad rows are refused naming
// file:line and key; `hw check` rules (peaks, monotone series) name the offending row.
START_TEST(test_hardware_kernel_tables) {
    mdl_hardware h = load_hw("h800");
    kvf_err err = {0};
    ck_assert_uint_ge(h.nkrows, 40);
    ck_assert_int_eq(mdl_hardware_check(&h, &err), KVF_OK);
    ck_assert_int_eq(mdl_hardware_check(&(mdl_hardware){0}, &err), KVF_OK);
#define HWB                                                                                        \
    "name: g\nbf16_flops: 1e15\nfp8_flops: 2e15\nhbm_bytes: 8e10\nhbm_Bps: 3e12\n"                 \
    "scaleup_Bps: 4e11\nnic_Bps: 4e10\nkernels:\n"
#define SRC ", source: \"repo/x README.md @ 0123abcd\"}\n"
    const char *p =
        write_tmp("k.yaml", HWB "  - {kind: gemm_fp8, m: 64, n: 8, k: 8, tflops: 200" SRC
                                "  - {kind: gemm_fp8, m: 128, n: 8, k: 8, tflops: 150" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_OK);
    ck_assert_int_eq(mdl_hardware_check(&h, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "k.yaml:10") && strstr(err.msg, "must not fall"), "%s", err.msg);
    p = write_tmp("k.yaml", HWB "  - {kind: gemm_fp8, m: 64, n: 8, k: 8, tflops: 2500" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_OK);
    ck_assert_int_eq(mdl_hardware_check(&h, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "k.yaml:9") && strstr(err.msg, "datasheet peak"), "%s", err.msg);
    p = write_tmp("k.yaml",
                  HWB "  - {kind: decode_attn, attention: mla, head_dim: 576, GBps: 3100, "
                      "tflops: 600" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_OK);
    ck_assert_int_eq(mdl_hardware_check(&h, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "hbm_Bps"), "%s", err.msg);
    // all-reduce bus bandwidth: above one direction (200 GB/s here) is possible with in-switch
    // reduction, above both (400) is not; it must not fall as messages grow
    p = write_tmp("k.yaml", HWB "  - {kind: allreduce, gpus: 8, bytes: 1e6, GBps: 150" SRC
                                "  - {kind: allreduce, gpus: 8, bytes: 1e8, GBps: 380" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_OK);
    ck_assert_int_eq(mdl_hardware_check(&h, &err), KVF_OK);
    p = write_tmp("k.yaml", HWB "  - {kind: allreduce, gpus: 8, bytes: 1e6, GBps: 150" SRC
                                "  - {kind: allreduce, gpus: 8, bytes: 1e8, GBps: 420" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_OK);
    ck_assert_int_eq(mdl_hardware_check(&h, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "k.yaml:10") && strstr(err.msg, "both directions"), "%s",
                  err.msg);
    p = write_tmp("k.yaml", HWB "  - {kind: allreduce, gpus: 8, bytes: 1e6, GBps: 150" SRC
                                "  - {kind: allreduce, gpus: 8, bytes: 1e8, GBps: 120" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_OK);
    ck_assert_int_eq(mdl_hardware_check(&h, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "k.yaml:10") && strstr(err.msg, "as bytes grows"), "%s", err.msg);
    // parse errors
    p = write_tmp("k.yaml", HWB "  - {kind: gemm_fp8, m: 64, n: 8, k: 8, tflops: 200}\n");
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "k.yaml:9") && strstr(err.msg, "'kernels.source' missing"), "%s",
                  err.msg);
    p = write_tmp("k.yaml", HWB "  - {kind: gemm_fp8, m: -64, n: 8, k: 8, tflops: 200" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "k.yaml:9") && strstr(err.msg, "'kernels.m' must be positive"),
                  "%s", err.msg);
    p = write_tmp("k.yaml", HWB "  - {kind: gemm_fp9, m: 64" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "unknown kind 'gemm_fp9'"), "%s", err.msg);
    p = write_tmp("k.yaml", HWB "  - {kind: ep_dispatch, mode: low_latency, ep: 8, GBps: 90" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "'kernels.tokens' missing"), "%s", err.msg);
    p = write_tmp("k.yaml",
                  HWB "  - {kind: allreduce, gpus: 8, bytes: 1e6, GBps: 90, colour: 1" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "unknown key 'kernels.colour'"), "%s", err.msg);
    p = write_tmp("k.yaml", HWB "  - {kind: gemm_fp8, m: 64, n: 8, k: 8, tflops: fast" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "'kernels.tflops': expected a number"), "%s", err.msg);
    // routing: balanced or power_law, on fused-MoE rows only
    p = write_tmp("k.yaml", HWB "  - {kind: gemm_fp8, m: 64, n: 8, k: 8, tflops: 200, "
                                "routing: power_law" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "k.yaml:9") && strstr(err.msg, "moe_bf16 and moe_fp8 rows only"),
                  "%s", err.msg);
    p = write_tmp("k.yaml", HWB "  - {kind: moe_fp8, experts: 8, topk: 2, hidden: 64, inter: 64, "
                                "tp: 1, ep: 8, tokens: 64, tflops: 20, routing: zipf" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "'kernels.routing': expected balanced or power_law"), "%s",
                  err.msg);
    // mode: the all-to-all kernels of EP rows and of the MoE rows measured between them only
    p = write_tmp("k.yaml", HWB "  - {kind: gemm_fp8, m: 64, n: 8, k: 8, tflops: 200, "
                                "mode: normal" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "k.yaml:9") &&
                      strstr(err.msg, "'kernels.mode' applies to ep_dispatch, ep_combine, "
                                      "moe_bf16 and moe_fp8 rows only"),
                  "%s", err.msg);
    p = write_tmp("k.yaml", HWB "  - {kind: moe_fp8, experts: 8, topk: 2, hidden: 64, inter: 64, "
                                "tp: 1, ep: 8, tokens: 64, tflops: 20, mode: fast" SRC);
    ck_assert_int_eq(mdl_hardware_load(&h, p, NULL, &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "'kernels.mode': expected low_latency or normal"), "%s", err.msg);
#undef HWB
#undef SRC
}
END_TEST

// ---- compressed attention (DeepSeek-V4 family), precision, DSpark ----------------------

// DeepSeek-V4.1-Flash's KV: the published figures (design brief; aisimulate docs/deepseek-v41.md
// and docs/deepseek-v41-storage.md) against what the loader derives from the file's pattern,
// precision and layout keys, and against a hand count from the same keys.
START_TEST(test_v41_kv_layout) {
    mdl_model m = load_model("deepseek-v4.1-flash");
    ck_assert_int_eq(m.attention, MDL_ATTN_CSA);
    // hand count: owners are layers 2, 8, 14 (ratio 2) and 20 (ratio 1); FP4 entries carry a
    // scale byte per 16 (main) or 32 (index) elements
    double main_e = m.head_dim * 0.5 + m.head_dim / 16.0, idx_e = m.index_head_dim * 0.5 + 4;
    double by_hand = (main_e + idx_e) * (1.0 + 3.0 / 2.0);
    ck_assert_msg(fabs(m.kv_bytes_per_token_full - by_hand) < 1e-9, "%.3f vs %.3f",
                  m.kv_bytes_per_token_full, by_hand);
    ck_assert_msg(fabs(m.kv_bytes_per_token_full - 890) < 1, "logical %.2f B/token",
                  m.kv_bytes_per_token_full);
    ck_assert_double_eq(m.swa_entry_bytes, 512);   // FP8 window entries
    // SGLang's physical layout from the phys_* keys
    m.kv_layout_physical = true;
    mdl_model_derive(&m);
    ck_assert_msg(fabs(m.kv_bytes_per_token_full - 1630) < 1, "physical %.2f B/token",
                  m.kv_bytes_per_token_full);
    double T = 131072, kv = mdl_model_kv_bytes_seq(&m, T), swa = mdl_model_swa_bytes_seq(&m, T);
    double mib = (kv + swa) / 1048576.0;
    ck_assert_msg(fabs(mib - 206.6) < 0.05, "131072 tokens: %.4f MiB (kv %.0f + swa %.0f)", mib, kv,
                  swa);
    ck_assert_double_eq(mdl_kv_seq_bytes(&m, T), kv + swa);
    // the window part is bounded, the global part grows with the sequence
    ck_assert_double_eq(mdl_model_swa_bytes_seq(&m, 2 * T), swa);
    ck_assert_msg(mdl_model_kv_bytes_seq(&m, 2 * T) == 2 * kv, "global KV linear in tokens");
    ck_assert_double_eq(mdl_model_swa_bytes_seq(&m, 0), 0);
    // an incomplete ratio-2 group is not published: 1 token has only the ratio-1 owner's entry
    ck_assert_double_eq(mdl_model_kv_bytes_seq(&m, 1), 584 + 68);
    ck_assert_msg(m.swa_lifetime_s > 0 && m.kv_lifetime_s > 100 * m.swa_lifetime_s,
                  "lifetimes %g / %g", m.swa_lifetime_s, m.kv_lifetime_s);
}
END_TEST

START_TEST(test_v4_params_and_pattern) {
    mdl_model f = load_model("deepseek-v4-flash");
    ck_assert_msg(near(f.params, 284e9, 0.01), "v4 flash params %.4g", f.params);
    ck_assert_msg(near(f.active_params, 13e9, 0.04), "v4 flash active %.4g", f.active_params);
    int n[5] = {0};
    for (uint32_t l = 0; l < f.layers; l++)
        n[f.layer_kind[l]]++;
    ck_assert_msg(n[MDL_LK_SWA] == 2 && n[MDL_LK_CSA] == 21 && n[MDL_LK_HCA] == 20,
                  "swa %d csa %d hca %d", n[MDL_LK_SWA], n[MDL_LK_CSA], n[MDL_LK_HCA]);
    ck_assert_uint_eq(f.layer_ratio[42], 4);
    ck_assert_uint_eq(f.layer_ratio[41], 128);
    // global KV: 21 x (512 + 64) / 4 + 20 x 512 / 128 at FP8 entries and FP4 index keys
    ck_assert_double_eq(f.kv_bytes_per_token_full, 21 * 576 / 4.0 + 20 * 512 / 128.0);
    mdl_model v = load_model("deepseek-v4.1-flash");
    double backbone = v.params - v.engram_params;
    ck_assert_msg(near(backbone, 552e9, 0.01), "v4.1 backbone %.4g", backbone);
    ck_assert_msg(near(v.active_params, 16e9, 0.04), "v4.1 decode active %.4g", v.active_params);
    ck_assert_msg(near(v.active_params_prefill, 8e9, 0.05), "v4.1 prefill active %.4g",
                  v.active_params_prefill);
    ck_assert_uint_eq(v.replay_start_layer, 21);   // layer 20 owns the decoder's KV
    int k[5] = {0};
    for (uint32_t l = 0; l < v.layers; l++)
        k[v.layer_kind[l]]++;
    ck_assert_msg(k[MDL_LK_SWA] == 2 && k[MDL_LK_CSA] == 4 && k[MDL_LK_REINDEX] == 4 &&
                      k[MDL_LK_REUSE] == 30,
                  "swa %d full %d reindex %d reuse %d", k[0], k[1], k[3], k[4]);
    ck_assert_uint_eq(v.layer_ratio[19], 2);   // reuse layers take their owner's ratio
    ck_assert_uint_eq(v.layer_ratio[39], 1);
    // Engram tables are weights in memory (~203 GB) but no FLOPs: active excludes them
    ck_assert_msg(v.weight_bytes > 190e9 + v.engram_params && v.engram_params > 190e9, "%.4g",
                  v.weight_bytes);
}
END_TEST

// Decode memory-bound and growing with the batch; bounded decoder replay cuts a long prefill
// chunk's GEMM FLOPs to the encoder's share.
START_TEST(test_compressed_roofline) {
    mdl_model m = load_model("deepseek-v4.1-flash");
    mdl_hardware hw = load_hw("b200");
    mdl_parallel par = {.gpus = 8, .tp = 8, .ep = 8, .ep_skew = 1};
    double prev = 0;
    for (uint32_t B = 1; B <= 256; B *= 4) {
        mdl_seq s[256];
        for (uint32_t i = 0; i < B; i++)
            s[i] = (mdl_seq){1, 8192};
        mdl_batch b = {.phase = MDL_DECODE, .seqs = s, .n = B};
        mdl_step_cost c;
        mdl_roofline_eval(&m, &hw, &par, NULL, &b, &c);
        ck_assert_msg(c.ns > prev, "batch %u: %lld ns after %.0f", B, (long long)c.ns, prev);
        if (B == 1) ck_assert_msg(!c.compute_bound, "batch 1 decode compute-bound");
        prev = (double)c.ns;
    }
    mdl_seq p = {8192, 0};
    mdl_batch pb = {.phase = MDL_PREFILL, .seqs = &p, .n = 1};
    mdl_work bounded, full;
    mdl_batch_work_detail(&m, &pb, &bounded);
    mdl_model nf = m;
    nf.decoder_replay_tokens = 0;
    mdl_model_derive(&nf);
    mdl_batch_work_detail(&nf, &pb, &full);
    double g_b = bounded.flops[MDL_WG_DENSE] + bounded.flops[MDL_WG_EXPERT];
    double g_f = full.flops[MDL_WG_DENSE] + full.flops[MDL_WG_EXPERT];
    double want = (m.active_params_prefill * (8192 - 128) + m.active_params * 128) /
                  (nf.active_params * 8192 - (8192 - 1) * m.embedding_params);
    ck_assert_msg(fabs(g_b / g_f - want) < 0.01, "bounded / full GEMM FLOPs %.4f, want %.4f",
                  g_b / g_f, want);
    ck_assert_msg(bounded.flops[MDL_WG_ATTN_WINDOW] < full.flops[MDL_WG_ATTN_WINDOW], "window");
    // sparse attention: per query at most topk compressed + window keys, so 128k context
    // costs about as much per decode token as 32k in attention FLOPs, while HCA-free V4.1's
    // indexer grows with the context
    mdl_seq d32 = {1, 32768}, d128 = {1, 131072};
    mdl_batch b32 = {.phase = MDL_DECODE, .seqs = &d32, .n = 1};
    mdl_batch b128 = {.phase = MDL_DECODE, .seqs = &d128, .n = 1};
    mdl_work w32, w128;
    mdl_batch_work_detail(&m, &b32, &w32);
    mdl_batch_work_detail(&m, &b128, &w128);
    ck_assert_double_eq(w32.flops[MDL_WG_ATTN_FULL], w128.flops[MDL_WG_ATTN_FULL]);
    ck_assert_msg(w128.flops[MDL_WG_ATTN_INDEX] > 3.9 * w32.flops[MDL_WG_ATTN_INDEX], "indexer");
    // the candidate pool, when it caps scoring, bounds the later indexers' work; sums stay
    // exact with its cap
    mdl_model cp = m;
    cp.candidate_caps_scoring = true;
    mdl_model_derive(&cp);
    uint32_t caps[MDL_CAPS];
    mdl_model_caps(&cp, caps);
    ck_assert_uint_eq(caps[MDL_CAP_POOL], 2048 * 8);   // ratio-1 owner (layer 20)'s group
    mdl_work wc;
    mdl_batch_work_detail(&cp, &b128, &wc);
    ck_assert_msg(wc.flops[MDL_WG_ATTN_INDEX] < 0.8 * w128.flops[MDL_WG_ATTN_INDEX],
                  "pool-capped indexer %.4g vs %.4g", wc.flops[MDL_WG_ATTN_INDEX],
                  w128.flops[MDL_WG_ATTN_INDEX]);
    mdl_seq few[3] = {{1, 100}, {1, 20000}, {1, 131072}};
    mdl_decode_sum ds = {0};
    for (int i = 0; i < 3; i++)
        mdl_decode_sum_add(&ds, caps, few[i].cached_tokens);
    mdl_batch listed = {.phase = MDL_DECODE, .seqs = few, .n = 3};
    mdl_batch summed = {.phase = MDL_DECODE, .dsum = &ds};
    mdl_work wl, wsum;
    mdl_batch_work_detail(&cp, &listed, &wl);
    mdl_batch_work_detail(&cp, &summed, &wsum);
    for (int g = 0; g < MDL_WG_COUNT; g++)
        ck_assert_msg(wl.flops[g] == wsum.flops[g] && wl.bytes[g] == wsum.bytes[g], "group %d", g);
    // V4-Flash's HCA layers attend every compressed entry: they grow with the context
    mdl_model f = load_model("deepseek-v4-flash");
    mdl_batch_work_detail(&f, &b32, &w32);
    mdl_batch_work_detail(&f, &b128, &w128);
    ck_assert_msg(w128.flops[MDL_WG_ATTN_FULL] > w32.flops[MDL_WG_ATTN_FULL], "hca");
}
END_TEST

START_TEST(test_precision_override) {
    mdl_model m = load_model("llama-3.1-8b");
    mdl_hardware hw = load_hw("b200");
    double wb = m.weight_bytes, kv = m.kv_bytes_per_token;
    mdl_seq p = {8192, 0};
    mdl_batch b = {.phase = MDL_PREFILL, .seqs = &p, .n = 1};
    mdl_step_cost c16, c8, c4a16, c4;
    mdl_roofline_eval(&m, &hw, NULL, NULL, &b, &c16);
    mdl_model m8 = m;
    mdl_model_apply_precision(&m8, MDL_PREC_FP8, MDL_PREC_FP8, MDL_PREC_AUTO);
    ck_assert_double_eq(m8.weight_bytes, wb / 2);
    ck_assert_double_eq(m8.kv_bytes_per_token, kv / 2);
    mdl_roofline_eval(&m8, &hw, NULL, NULL, &b, &c8);
    ck_assert_msg(c8.ns < 0.7 * c16.ns, "fp8 prefill %lld vs bf16 %lld", (long long)c8.ns,
                  (long long)c16.ns);
    // fp4 weights with bf16 GEMM inputs run at the bf16 rate (W4A16) ...
    mdl_model m4 = m;
    mdl_model_apply_precision(&m4, MDL_PREC_FP4, MDL_PREC_AUTO, MDL_PREC_BF16);
    ck_assert_double_eq(m4.weight_bytes, wb / 4);
    ck_assert_int_eq(mdl_model_gemm_precision(&m4, m4.weight_bytes_per_param), MDL_PREC_BF16);
    mdl_roofline_eval(&m4, &hw, NULL, NULL, &b, &c4a16);
    ck_assert_msg(llabs(c4a16.ns - c16.ns) < c16.ns / 20, "W4A16 %lld vs bf16 %lld",
                  (long long)c4a16.ns, (long long)c16.ns);
    // ... and W4A4 at the FP4 peak where the device has one (else the FP8 one)
    mdl_model_apply_precision(&m4, MDL_PREC_AUTO, MDL_PREC_AUTO, MDL_PREC_FP4);
    hw.fp4_flops = 2 * hw.fp8_flops;
    mdl_roofline_eval(&m4, &hw, NULL, NULL, &b, &c4);
    ck_assert_msg(c4.ns < 0.7 * c8.ns, "W4A4 %lld vs fp8 %lld", (long long)c4.ns, (long long)c8.ns);
    hw.fp4_flops = 0;
    ck_assert_double_eq(mdl_hw_peak(&hw, MDL_PREC_FP4), hw.fp8_flops);
    // FP8 model files keep their FP8 GEMMs; gpt-oss's MXFP4 experts (0.53125 B) theirs at bf16
    mdl_model ds = load_model("deepseek-v3");
    ck_assert_int_eq(mdl_model_gemm_precision(&ds, 1), MDL_PREC_FP8);
    mdl_model oss = load_model("gpt-oss-120b");
    ck_assert_double_eq(oss.expert_weight_bytes_per_param, 0.53125);
    ck_assert_int_eq(mdl_model_gemm_precision(&oss, 0.53125), MDL_PREC_BF16);
    // csa: bf16 KV re-derives the entries; the FP4 index keys stay
    mdl_model v = load_model("deepseek-v4.1-flash");
    mdl_model_apply_precision(&v, MDL_PREC_AUTO, MDL_PREC_BF16, MDL_PREC_AUTO);
    ck_assert_double_eq(v.kv_bytes_per_token_full, (1024 + 68) * 2.5);
    ck_assert_double_eq(v.swa_entry_bytes, 1024);
    mdl_prec pr;
    ck_assert(mdl_prec_parse("fp4", &pr) && pr == MDL_PREC_FP4 && !mdl_prec_parse("int4", &pr));
    ck_assert_double_eq(mdl_prec_bytes(MDL_PREC_FP4), 0.5);
}
END_TEST

START_TEST(test_dspark_block) {
    mdl_model m = load_model("deepseek-v4.1-flash");
    mdl_spec sp;
    kvf_err err = {0};
    ck_assert_int_eq(mdl_spec_from_model(&sp, &m, &err), KVF_OK);
    ck_assert_uint_eq(sp.block, 5);
    // expected tokens per verify step from the file's acceptance curve, by hand
    double e = 1, pr = 1;
    for (uint32_t i = 0; i < sp.block - 1; i++)
        e += (pr *= m.dspark_accept[i]);
    ck_assert_double_eq_tol(mdl_spec_tokens_per_step(&sp), e, 1e-12);
    ck_assert_msg(e > 1 && e < sp.block, "tokens per step %.3f", e);
    mdl_spec all = sp;
    all.naccept = 1;
    all.accept[0] = 1;
    ck_assert_double_eq(mdl_spec_tokens_per_step(&all), sp.block);
    all.accept[0] = 0;
    ck_assert_double_eq(mdl_spec_tokens_per_step(&all), 1);
    // draft + verify: more than verifying alone, the draft a small share of it
    mdl_hardware hw = load_hw("gb200");
    mdl_parallel par = {.gpus = 8, .tp = 1, .ep = 8, .ep_skew = 1};
    mdl_stepper *st = mdl_roofline_create(&m, &hw, &par, NULL);
    mdl_seq s[64];
    for (int i = 0; i < 64; i++)
        s[i] = (mdl_seq){sp.block, 4096};
    mdl_batch b = {.phase = MDL_DECODE, .seqs = s, .n = 64};
    mdl_step_cost v, tot, dr;
    mdl_stepper_cost(st, &b, &v);
    mdl_spec_step_cost(st, &sp, &b, &tot, &dr);
    ck_assert_msg(dr.ns > 0 && tot.ns == v.ns + dr.ns && dr.ns < v.ns / 2,
                  "verify %lld draft %lld total %lld", (long long)v.ns, (long long)dr.ns,
                  (long long)tot.ns);
    ck_assert_msg(mdl_spec_weight_bytes(&sp) > 1e9 &&
                      mdl_spec_weight_bytes(&sp) < 0.1 * m.weight_bytes,
                  "draft weights %.4g", mdl_spec_weight_bytes(&sp));
    mdl_stepper_destroy(st);
    mdl_model l = load_model("llama-3.1-8b");
    ck_assert_int_eq(mdl_spec_from_model(&sp, &l, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "dspark_layers"), "%s", err.msg);
}
END_TEST

#define CSA                                                                                        \
    "name: c\nlayers: 3\nhidden: 64\nheads: 4\nkv_heads: 1\nhead_dim: 32\nvocab: 100\n"            \
    "ffn: 128\nattention: csa\nwindow: 8\nindex_heads: 2\nindex_head_dim: 8\nindex_topk: 4\n"

START_TEST(test_compressed_bad_input) {
    mdl_model m;
    kvf_err err = {0};
    ck_assert_int_eq(
        mdl_model_load(&m, write_tmp("c.yaml", CSA "layer_pattern: swa csa4 reuse\n"), NULL, &err),
        KVF_OK);
    ck_assert_uint_eq(m.layer_ratio[2], 4);
    expect_model_error(CSA "layer_pattern: swa csa4 mla\n", KVF_EINVAL, "bad.yaml:14",
                       "unknown layer token 'mla'");
    expect_model_error(CSA "layer_pattern: swa*2\n", KVF_EINVAL, "bad.yaml:14",
                       "names 2 layers, layers is 3");
    expect_model_error(CSA "layer_pattern: reuse csa2 swa\n", KVF_EINVAL, "bad.yaml:14",
                       "layer 0 (reuse) has no earlier csa/hca layer");
    expect_model_error(CSA "layer_pattern: csa1 csa2 csa4\n", KVF_EINVAL, "bad.yaml:14",
                       "more than 2 compression ratios");
    expect_model_error(CSA "layer_pattern: (swa csa2\n", KVF_EINVAL, "bad.yaml:14", "group");
    expect_model_error(CSA "layer_pattern: swa csa2 swa\nkv_layout: physical\n", KVF_EINVAL,
                       "bad.yaml:1", "'phys_kv_entry_bytes' must be positive");
    expect_model_error(CSA "layer_pattern: swa csa2 swa\nkv_layout: packed\n", KVF_EPARSE,
                       "bad.yaml:15", "logical or physical");
    expect_model_error(CSA "layer_pattern: swa csa2 swa\nactivations: int8\n", KVF_EPARSE,
                       "bad.yaml:15", "bf16, fp8 or fp4");
    expect_model_error(CSA "layer_pattern: swa csa2 swa\ndspark_layers: 1\ndspark_block: 3\n"
                           "dspark_accept: 0.9 1.5\n",
                       KVF_EINVAL, "bad.yaml:17", "'dspark_accept' must be numbers in [0, 1]");
    expect_model_error(GOOD "layer_pattern: swa swa\n", KVF_EINVAL, "bad.yaml:7",
                       "'layer_pattern' applies to attention: csa or hca only");
    // fractional weight bytes are accepted, negative ones refused
    ck_assert_int_eq(
        mdl_model_load(&m, write_tmp("f.yaml", GOOD "weight_bytes_per_param: 0.5\n"), NULL, &err),
        KVF_OK);
    ck_assert_double_eq(m.weight_bytes_per_param, 0.5);
    expect_model_error(GOOD "weight_bytes_per_param: -1\n", KVF_EINVAL, "bad.yaml:7",
                       "must not be negative");
}
END_TEST

// The calibrated model accepts csa/hca models without profile rows: roofline, flagged.
START_TEST(test_calibrated_compressed_fallback) {
    mdl_model m = load_model("deepseek-v4-flash");
    mdl_hardware h = load_hw("b200");
    mdl_stepper *s = NULL;
    kvf_err err = {0};
    ck_assert_int_eq(
        mdl_calibrated_create(&s, &m, &h, NULL, NULL, write_profile("tiny-dense"), &err), KVF_OK);
    mdl_seq q = {1, 1000};
    mdl_batch b = {.phase = MDL_DECODE, .seqs = &q, .n = 1};
    mdl_step_cost c, r;
    mdl_stepper_cost(s, &b, &c);
    mdl_roofline_eval(&m, &h, NULL, NULL, &b, &r);
    ck_assert(c.extrapolated && c.ns == r.ns);
    ck_assert_uint_eq(s->extrapolations, 1);
    mdl_stepper_destroy(s);
}
END_TEST

// mdl_ns rounds as llround does on the whole range of step times, halves and their
// neighbours included.
START_TEST(test_ns_rounding_is_llround) {
    uint64_t x = 12345;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double v;
        switch (i % 4) {
        case 0:
            v = (double)(x % 4000000000000ULL) + 0.5;
            break;   // exact halves
        case 1:
            v = nextafter((double)(x % 1000000) + 0.5, 0);
            break;
        case 2:
            v = nextafter((double)(x % 1000000000) + 0.5, 1e300);
            break;
        default:
            v = (double)(x % (1ULL << 52)) / 1024.0 * ((x >> 60) ? 1 : 1e-3);
        }
        if (v > MDL_MAX_STEP_NS) continue;
        ck_assert_msg(mdl_ns(v) == (int64_t)llround(v), "%.17g: %lld vs %lld", v,
                      (long long)mdl_ns(v), (long long)llround(v));
    }
    ck_assert_int_eq(mdl_ns(0.49999999999999994), 0);
    ck_assert_int_eq(mdl_ns(2.5), 3);
    ck_assert_int_eq(mdl_ns(MDL_MAX_STEP_NS), (int64_t)MDL_MAX_STEP_NS);
}
END_TEST

// The roofline stepper answers a decode batch of sums from its memo of the last one of as many
// sequences (only the attention groups recomputed): the same answer, to the bit, as the
// stateless mdl_roofline_eval, over runs of steps whose context grows, sequence counts that
// change and come back, a changed ep_skew and listed batches in between.
START_TEST(test_roofline_memo_matches_eval) {
    const char *models[] = {"llama-3.1-8b", "deepseek-v3",     "gpt-oss-120b",
                            "gemma-3-27b",  "qwen3-235b-a22b", "deepseek-v3.2-exp"};
    mdl_hardware hw = load_hw("h100");
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    uint64_t memo_hits = 0;
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        mdl_model m = load_model(models[k]);
        uint32_t caps[MDL_CAPS];
        mdl_model_caps(&m, caps);
        mdl_parallel par = {.gpus = 16, .tp = 2, .ep = m.experts ? 16 : 1, .ep_skew = 1.1};
        mdl_stepper *s = mdl_roofline_create(&m, &hw, &par, NULL);
        for (int run = 0; run < 30; run++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            // small counts recur (a run's first step then takes the memo of that count), and
            // every fifth run's count shares a memo slot with a small one (256 apart)
            uint32_t n = 1 + (uint32_t)(x % (run % 3 ? 64 : 4)) + (run % 5 == 4 ? 256 : 0);
            mdl_decode_sum ds = {0};
            for (uint32_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                mdl_decode_sum_add(&ds, caps, 1 + (double)(x % 40000));
            }
            for (int j = 0; j < 50; j++) {
                if (run == 10 && j == 25)   // a drawn skew changes in the middle of a run
                    s->par.ep_skew = par.ep_skew = 1.3;
                mdl_batch b = {.phase = MDL_DECODE, .dsum = &ds};
                mdl_step_cost a, e;
                mdl_stepper_cost(s, &b, &a);
                mdl_roofline_eval(&m, &hw, &par, NULL, &b, &e);
                ck_assert_msg(a.ns == e.ns && a.flops == e.flops && a.bytes == e.bytes &&
                                  a.comm_ns == e.comm_ns && a.comm_bytes == e.comm_bytes &&
                                  a.compute_bound == e.compute_bound && a.host_ns == e.host_ns,
                              "%s run %d step %d: %lld vs %lld ns", models[k], run, j,
                              (long long)a.ns, (long long)e.ns);
                memo_hits += j > 0;
                // one token more for every sequence (the window and top-k sums follow it
                // while below their caps, as sim_dsum_batch_at has them)
                for (int c = 0; c < MDL_CAPS; c++)
                    if (caps[c])
                        ds.sum_min[c] = KVF_MIN(ds.sum_min[c] + ds.n, (double)caps[c] * ds.n);
                ds.sum_ctx += ds.n;
            }
            // a listed prefill step between runs leaves the memo as it was
            mdl_seq pre = {512, 1024};
            mdl_batch lb = {.phase = MDL_PREFILL, .seqs = &pre, .n = 1};
            mdl_step_cost a, e;
            mdl_stepper_cost(s, &lb, &a);
            mdl_roofline_eval(&m, &hw, &par, NULL, &lb, &e);
            ck_assert_int_eq(a.ns, e.ns);
        }
        mdl_stepper_destroy(s);
    }
    ck_assert_uint_gt(memo_hits, 6 * 30 * 40);
}
END_TEST

// moe.single_batch_overlap through the library, as a scenario cannot reach every mix: on
// DeepSeek-V3 at EP48 (H800's rows) in decode and prefill, with and without
// efficiency.comm_overlap on top, the table model's terms add up to its step, its overlap term
// names the single batch, the table model without rows is the roofline to the nanosecond, and
// the step is shorter than without the overlap by at most the all-to-alls.
START_TEST(test_single_batch_terms) {
    mdl_model ds = load_model("deepseek-v3");
    mdl_hardware h = load_hw("h800");
    uint32_t caps[MDL_CAPS];
    mdl_model_caps(&ds, caps);
    mdl_decode_sum d = {0};
    for (int i = 0; i < 48 * 128; i++)
        mdl_decode_sum_add(&d, caps, 2000);
    mdl_seq pre[48];
    for (int i = 0; i < 48; i++)
        pre[i] = (mdl_seq){4096, 0};
    mdl_batch batches[2] = {{.phase = MDL_DECODE, .dsum = &d},
                            {.phase = MDL_PREFILL, .seqs = pre, .n = 48}};
    for (int bi = 0; bi < 2; bi++)
        for (int ov = 0; ov < 2; ov++) {
            mdl_efficiency eff;
            mdl_efficiency_default(&eff);
            eff.comm_overlap = ov ? 0.5 : 0;
            mdl_parallel par = {.gpus = 48, .tp = 1, .ep = 48, .ep_skew = 1.2, .route_nodes = 4};
            mdl_step_cost base, sbo, roof, bare;
            mdl_explain ex;
            mdl_table_eval(&ds, &h, &par, &eff, &batches[bi], true, &base, &ex, NULL);
            double comm = 0;
            for (int i = 0; i < ex.n; i++)
                if (!strncmp(ex.t[i].name, "EP ", 3)) comm += ex.t[i].s;
            par.single_batch = true;
            mdl_table_eval(&ds, &h, &par, &eff, &batches[bi], true, &sbo, &ex, NULL);
            double sum = 0;
            const mdl_term *o = NULL;
            for (int i = 0; i < ex.n; i++) {
                if (ex.t[i].name[0] != ' ') sum += ex.t[i].s;
                if (!strcmp(ex.t[i].name, "overlap")) o = &ex.t[i];
            }
            ck_assert_msg(o && strstr(o->how, "single batch"), "batch %d overlap %d", bi, ov);
            ck_assert_msg(near(ex.total_s, sum, 1e-6),
                          "batch %d overlap %d: total %.6g, terms %.6g", bi, ov, ex.total_s, sum);
            ck_assert_msg(comm > 0 && sbo.ns < base.ns && base.ns - sbo.ns <= comm * 1e9 + 1,
                          "batch %d overlap %d: %lld -> %lld ns, all-to-alls %.6g s", bi, ov,
                          (long long)base.ns, (long long)sbo.ns, comm);
            mdl_roofline_eval(&ds, &h, &par, &eff, &batches[bi], &roof);
            mdl_table_eval(&ds, &h, &par, &eff, &batches[bi], false, &bare, NULL, NULL);
            ck_assert_int_eq(bare.ns, roof.ns);
        }
}
END_TEST

// A run costed in one call (mdl_stepper_cost_run) answers every step as mdl_roofline_eval
// does for that step's batch, to the nanosecond: full attention, windows, MLA, DSA (the
// general path), with overheads and collectives, the memo made by the run or before it; on
// power-of-two and other GPU counts, on one GPU (no collectives), and on a device so short of
// FLOPs that attention turns compute-bound within runs (where the memory-bound loop must not
// be taken). mdl_stepper_cost_run_ends gives those durations' ends, longest and rise.
START_TEST(test_roofline_run_matches_eval) {
    const char *models[] = {"llama-3.1-8b", "deepseek-v3",     "gpt-oss-120b",
                            "gemma-3-27b",  "qwen3-235b-a22b", "deepseek-v3.2-exp"};
    uint64_t x = 0x2545f4914f6cdd1dULL;
    uint64_t steps = 0;
    // setup 4: two micro-batches (MoE models), whose steps go one by one through the memo;
    // setup 5: single-batch overlap (MoE models), its hidden all-to-all time in the memo
    for (size_t kk = 0; kk < 6 * sizeof models / sizeof *models; kk++) {
        size_t k = kk % (sizeof models / sizeof *models),
               setup = kk / (sizeof models / sizeof *models);
        mdl_hardware hw = load_hw("h100");
        if (setup == 2) hw.bf16_flops /= 3e3, hw.fp8_flops /= 3e3;
        mdl_model m = load_model(models[k]);
        uint32_t caps[MDL_CAPS];
        mdl_model_caps(&m, caps);
        uint32_t gpus = setup == 1 ? 6 : setup == 3 ? 1 : 16;
        mdl_parallel par = {.gpus = gpus,
                            .tp = gpus > 1 ? 2 : 1,
                            .ep = m.experts ? gpus : 1,
                            .ep_skew = 1.1,
                            .two_batch = setup == 4 && m.experts,
                            .single_batch = setup == 5 && m.experts};
        mdl_efficiency eff;
        mdl_efficiency_default(&eff);
        eff.step_overhead_ns = 350e3;   // fixed terms and collectives in every step
        eff.comm_overlap = k % 2 ? 0.5 : 0;
        mdl_stepper *s = mdl_roofline_create(&m, &hw, &par, &eff);
        for (int run = 0; run < 40; run++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint32_t n = 1 + (uint32_t)(x % (run % 3 ? 200 : 4));
            mdl_decode_sum d0 = {0}, grow = {.sum_ctx = n};
            for (uint32_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                // contexts below the caps, so every capped sum grows by n a step
                double c = 1 + (double)(x % 300);
                mdl_decode_sum_add(&d0, caps, c);
            }
            for (int c = 0; c < MDL_CAPS; c++)
                if (caps[c]) grow.sum_min[c] = n;
            if (run % 4 == 1) {   // the memo made before the run, by a single step
                mdl_batch b = {.phase = MDL_DECODE, .dsum = &d0};
                mdl_step_cost one;
                mdl_stepper_cost(s, &b, &one);
            }
            enum { M = 64 };
            int64_t ns[M];
            uint32_t len = 2 + (uint32_t)(x % (M - 1));
            ck_assert(mdl_stepper_cost_run(s, &d0, &grow, len, ns));
            for (uint32_t j = 0; j < len; j++) {
                mdl_decode_sum dj = d0;
                dj.sum_ctx = d0.sum_ctx + (double)j * grow.sum_ctx;
                for (int c = 0; c < MDL_CAPS; c++)
                    dj.sum_min[c] = d0.sum_min[c] + (double)j * grow.sum_min[c];
                mdl_batch b = {.phase = MDL_DECODE, .dsum = &dj};
                mdl_step_cost e;
                mdl_roofline_eval(&m, &hw, &par, &eff, &b, &e);
                ck_assert_msg(ns[j] == e.ns, "%s setup %zu run %d step %u: %lld vs %lld ns",
                              models[k], setup, run, j, (long long)ns[j], (long long)e.ns);
                steps++;
            }
            // the ends summed as costed: those durations summed from a start, each with a
            // serving term on top, their longest and whether they never decrease
            int64_t ends[M], t0 = (int64_t)(x % 1000000000), hi = 0, end = t0;
            mdl_run_ends re = {.t0 = t0, .add = (int64_t)(x % 3 ? x % 400000 : 0)};
            ck_assert(mdl_stepper_cost_run_ends(s, &d0, &grow, len, &re, ends));
            bool rising = true;
            for (uint32_t j = 0; j < len; j++) {
                rising &= ns[j] >= hi;
                hi = ns[j] > hi ? ns[j] : hi;
                end += ns[j] + re.add;
                ck_assert_msg(ends[j] == end, "%s setup %zu run %d step %u: ends at %lld, not %lld",
                              models[k], setup, run, j, (long long)ends[j], (long long)end);
            }
            ck_assert_msg(re.hi == hi && re.rising == rising,
                          "%s setup %zu run %d: longest %lld rising %d, not %lld %d", models[k],
                          setup, run, (long long)re.hi, re.rising, (long long)hi, rising);
        }
        mdl_stepper_destroy(s);
    }
    ck_assert_uint_gt(steps, 4 * 6 * 40 * 2);
}
END_TEST

START_TEST(test_decode_sums_match_listed) {
    const char *models[] = {"llama-3.1-8b",    "deepseek-v3",       "gpt-oss-120b",
                            "gemma-3-27b",     "tiny-dense",        "deepseek-v3.2-exp",
                            "qwen3-235b-a22b", "deepseek-v4-flash", "deepseek-v4.1-flash"};
    mdl_hardware hw = load_hw("h100");
    uint64_t x = 88172645463325252ULL;
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        mdl_model m = load_model(models[k]);
        uint32_t caps[MDL_CAPS];
        mdl_model_caps(&m, caps);
        mdl_parallel par = {.gpus = 8, .tp = 8, .ep = m.experts ? 8 : 1, .ep_skew = 1.2};
        mdl_stepper *roof = mdl_roofline_create(&m, &hw, &par, NULL);
        // the table model on the hardware with the most tables, wide EP with DP attention and
        // two micro-batches when the model has experts
        mdl_parallel wide = {.gpus = 144,
                             .tp = m.experts ? 1 : 8,
                             .ep = m.experts ? 144 : 1,
                             .ep_skew = 1.1,
                             .route_nodes = m.experts ? 4 : 0,
                             .two_batch = m.experts > 0};
        mdl_hardware h800 = load_hw("h800");
        mdl_stepper *tab = mdl_table_create(&m, &h800, &wide, NULL);
        for (int trial = 0; trial < 40; trial++) {
            enum { N = 300 };
            mdl_seq all[N + 2];
            mdl_decode_sum ds = {0};
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint32_t n = 1 + (uint32_t)(x % N);
            for (uint32_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                uint32_t ctx = 1 + (uint32_t)(x % (trial < 20 ? 9000 : 200000));
                all[i] = (mdl_seq){1, ctx};
                mdl_decode_sum_add(&ds, caps, ctx);
            }
            // two prefill chunks in the mixed trials, listed in both forms
            uint32_t np = trial % 2 ? 2 : 0;
            mdl_seq pre[2] = {{777, 4096}, {2048, 0}};
            for (uint32_t i = 0; i < np; i++)
                all[n + i] = pre[i];
            mdl_phase ph = np ? MDL_MIXED : MDL_DECODE;
            mdl_batch listed = {.phase = ph, .seqs = all, .n = n + np};
            mdl_batch summed = {.phase = ph, .seqs = pre, .n = np, .dsum = &ds};
            ck_assert_uint_eq(mdl_batch_size(&listed), mdl_batch_size(&summed));
            mdl_work a, b;
            mdl_batch_work_detail(&m, &listed, &a);
            mdl_batch_work_detail(&m, &summed, &b);
            for (int g = 0; g < MDL_WG_COUNT; g++) {
                ck_assert_msg(a.flops[g] == b.flops[g],
                              "%s trial %d group %d: flops %.17g vs %.17g", models[k], trial, g,
                              a.flops[g], b.flops[g]);
                ck_assert_msg(a.bytes[g] == b.bytes[g],
                              "%s trial %d group %d: bytes %.17g vs %.17g", models[k], trial, g,
                              a.bytes[g], b.bytes[g]);
            }
            mdl_step_cost ca, cb;
            mdl_stepper_cost(roof, &listed, &ca);
            mdl_stepper_cost(roof, &summed, &cb);
            ck_assert_msg(ca.ns == cb.ns, "%s trial %d: %lld vs %lld ns", models[k], trial,
                          (long long)ca.ns, (long long)cb.ns);
            ck_assert_int_gt(ca.ns, 0);
            mdl_stepper_cost(tab, &listed, &ca);
            mdl_stepper_cost(tab, &summed, &cb);
            ck_assert_msg(ca.ns == cb.ns && ca.table_fallback == cb.table_fallback,
                          "%s trial %d: table %lld vs %lld ns", models[k], trial, (long long)ca.ns,
                          (long long)cb.ns);
            // the stepper's memo (series, brackets, EP lookups by their inputs: 40 batch sizes
            // through a ring of 8) answers as the lookups without one
            mdl_step_cost cm;
            bool fb = false;
            mdl_table_eval(&m, &h800, &wide, NULL, &listed, true, &cm, NULL, &fb);
            ck_assert_msg(cm.ns == ca.ns && fb == ca.table_fallback,
                          "%s trial %d: table stepper %lld vs eval %lld ns", models[k], trial,
                          (long long)ca.ns, (long long)cm.ns);
        }
        mdl_stepper_destroy(roof);
        mdl_stepper_destroy(tab);
    }
    // calibrated: the decode table at (batch, mean context) and the host overhead by batch size
    mdl_model m = load_model("tiny-dense");
    mdl_hardware cpu = load_hw("cpu");
    char prof[1200];
    snprintf(prof, sizeof prof, "%s/profiles/cpu-tiny-dense.csv", models_dir);
    mdl_stepper *cal = NULL;
    kvf_err err = {0};
    ck_assert_msg(mdl_calibrated_create(&cal, &m, &cpu, NULL, NULL, prof, &err) == KVF_OK, "%s",
                  err.msg);
    uint32_t caps[MDL_CAPS];
    mdl_model_caps(&m, caps);
    for (uint32_t n = 1; n <= 64; n += 7) {
        mdl_seq all[64];
        mdl_decode_sum ds = {0};
        for (uint32_t i = 0; i < n; i++) {
            all[i] = (mdl_seq){1, 3 + 37 * i};
            mdl_decode_sum_add(&ds, caps, 3 + 37 * i);
        }
        mdl_batch listed = {.phase = MDL_DECODE, .seqs = all, .n = n};
        mdl_batch summed = {.phase = MDL_DECODE, .dsum = &ds};
        mdl_step_cost ca, cb;
        mdl_stepper_cost(cal, &listed, &ca);
        mdl_stepper_cost(cal, &summed, &cb);
        ck_assert_msg(ca.ns == cb.ns, "calibrated n %u: %lld vs %lld ns", n, (long long)ca.ns,
                      (long long)cb.ns);
    }
    mdl_stepper_destroy(cal);
}
END_TEST

static Suite *models_suite(void) {
    Suite *s = suite_create("models");
    TCase *t = tcase_create("files");
    tcase_add_checked_fixture(t, setup_dirs, cleanup_dirs);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_model_kv_bytes_reference);
    tcase_add_test(t, test_model_params_public_figures);
    tcase_add_test(t, test_files_all_load);
    tcase_add_test(t, test_tbo_stages);
    tcase_add_test(t, test_single_batch_terms);
    tcase_add_test(t, test_moe_routing_rows);
    tcase_add_test(t, test_files_bad_input);
    suite_add_tcase(s, t);
    t = tcase_create("roofline");
    tcase_add_checked_fixture(t, setup_dirs, cleanup_dirs);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_work_attention_window);
    tcase_add_test(t, test_work_moe_and_vision);
    tcase_add_test(t, test_prompt_flops_match_batch_work);
    tcase_add_test(t, test_roofline_decode_memory_bound);
    tcase_add_test(t, test_roofline_prefill_compute_bound);
    tcase_add_test(t, test_roofline_monotone);
    tcase_add_test(t, test_roofline_tp_halves_compute);
    tcase_add_test(t, test_kv_capacity);
    tcase_add_test(t, test_decode_sums_match_listed);
    tcase_add_test(t, test_roofline_memo_matches_eval);
    tcase_add_test(t, test_roofline_run_matches_eval);
    tcase_add_test(t, test_ns_rounding_is_llround);
    tcase_add_test(t, test_dsa_against_mla);
    tcase_add_test(t, test_table_model_terms);
    tcase_add_test(t, test_hardware_kernel_tables);
    tcase_add_test(t, test_v41_kv_layout);
    tcase_add_test(t, test_v4_params_and_pattern);
    tcase_add_test(t, test_compressed_roofline);
    tcase_add_test(t, test_precision_override);
    tcase_add_test(t, test_dspark_block);
    tcase_add_test(t, test_compressed_bad_input);
    suite_add_tcase(s, t);
    t = tcase_create("calibrated");
    tcase_add_checked_fixture(t, setup_dirs, cleanup_dirs);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_calibrated_exact_and_interpolated);
    tcase_add_test(t, test_calibrated_shape_columns);
    tcase_add_test(t, test_calibrated_extrapolation_flagged);
    tcase_add_test(t, test_calibrated_bad_profiles);
    tcase_add_test(t, test_fit_recovers_efficiency);
    tcase_add_test(t, test_calibrated_compressed_fallback);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    SRunner *r = srunner_create(models_suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
