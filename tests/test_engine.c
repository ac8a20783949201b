// tests/test_engine.c -- the engine's CPU backend: model files, the paged prefix cache, the
// equivalence of prefill / cached-prefix prefill / decode, sliding windows, MoE routing, a
// naive reference forward written here with plain loops, and the serving loop's preemption.
//
// Tolerance: logits are compared as |a - b| <= 1e-4 + 1e-4 |b| (fp32, different summation
// orders: BLAS GEMMs vs loops, chunked vs one-shot attention).
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "eng.h"

#define RTOL 1e-4f
#define ATOL 1e-4f

// Small shapes so that the naive reference stays fast.
static eng_model_desc small_model(uint32_t experts, uint32_t window, uint32_t window_layers) {
    eng_model_desc m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "test");
    m.layers = 3;
    m.hidden = 64;
    m.heads = 4;
    m.kv_heads = 2;
    m.head_dim = 16;
    m.ffn = 96;
    m.vocab = 211;
    m.rope_theta = 10000.0f;
    m.norm_eps = 1e-5f;
    if (experts) {
        m.experts = experts;
        m.experts_active = 2;
        m.shared_experts = 1;
        m.expert_ffn = 32;
        m.dense_layers = 1;
    }
    m.window = window;
    m.window_layers = window_layers;
    return m;
}

static eng_engine *make_engine(const eng_model_desc *m, uint32_t bt, uint32_t kv_blocks) {
    eng_options o;
    eng_options_default(&o);
    o.block_tokens = bt;
    o.kv_blocks = kv_blocks;
    o.max_context = 256;
    o.max_step_tokens = 256;
    o.max_seqs = 8;
    o.threads = 1;
    o.seed = 7;
    eng_engine *e = NULL;
    kvf_err err = {0};
    kvf_status st = eng_create(&e, m, &o, &err);
    ck_assert_msg(st == KVF_OK, "eng_create: %s", err.msg);
    return e;
}

static void tokens_fill(int32_t *t, uint32_t n, uint32_t vocab, uint32_t salt) {
    for (uint32_t i = 0; i < n; i++)
        t[i] = (int32_t)((i * 2654435761u + salt * 40503u) % vocab);
}

static void assert_close(const float *a, const float *b, uint32_t n, const char *what) {
    for (uint32_t i = 0; i < n; i++) {
        float tol = ATOL + RTOL * fabsf(b[i]);
        ck_assert_msg(fabsf(a[i] - b[i]) <= tol, "%s: logit %u: %.7g vs %.7g", what, i,
                      (double)a[i], (double)b[i]);
    }
}

// ---- naive reference: plain loops over the weight arena, every position ------------------
static void ref_rmsnorm(float *o, const float *x, const float *g, uint32_t d, float eps) {
    double ss = 0;
    for (uint32_t i = 0; i < d; i++)
        ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / d + eps));
    for (uint32_t i = 0; i < d; i++)
        o[i] = x[i] * r * g[i];
}

// y(rows) = W(rows, cols) x
static void ref_matvec(float *y, const float *W, const float *x, uint32_t rows, uint32_t cols) {
    for (uint32_t r = 0; r < rows; r++) {
        double s = 0;
        for (uint32_t c = 0; c < cols; c++)
            s += (double)W[(size_t)r * cols + c] * x[c];
        y[r] = (float)s;
    }
}

static void ref_rope(float *v, uint32_t hd, uint32_t pos, float theta) {
    for (uint32_t i = 0; i < hd / 2; i++) {
        double f = pow(theta, -2.0 * i / hd);
        double a = pos * (float)f;
        double c = cos(a), s = sin(a);
        double x0 = v[i], x1 = v[i + hd / 2];
        v[i] = (float)(x0 * c - x1 * s);
        v[i + hd / 2] = (float)(x0 * s + x1 * c);
    }
}

// FFN with SwiGLU: out += down(silu(gate x) * up x); gu is (2f, d), dn is (d, f).
static void ref_ffn(float *out, const float *x, const float *gu, const float *dn, uint32_t d,
                    uint32_t f, float scale) {
    float *g = malloc(2 * f * sizeof *g), *h = malloc(f * sizeof *h), *y = malloc(d * sizeof *y);
    ref_matvec(g, gu, x, 2 * f, d);
    for (uint32_t i = 0; i < f; i++)
        h[i] = g[i] / (1.0f + expf(-g[i])) * g[f + i];
    ref_matvec(y, dn, h, d, f);
    for (uint32_t i = 0; i < d; i++)
        out[i] += scale * y[i];
    free(g), free(h), free(y);
}

// Logits (n, vocab) of every position of tokens[0..n); routing of layer rl into rsel (n, k).
static void ref_forward(const eng_engine *e, const int32_t *tok, uint32_t n, float *logits,
                        uint32_t rl, int32_t *rsel, const float *bias) {
    const eng_model_desc *m = eng_model(e);
    const eng_layout *L = eng_layout_get(e);
    const float *W = eng_weights_cpu(e);
    uint32_t d = m->hidden, H = m->heads, KV = m->kv_heads, hd = m->head_dim;
    uint32_t qd = H * hd, kvd = KV * hd;
    float *x = calloc((size_t)n * d, 4), *xn = malloc(d * 4), *q = malloc((size_t)n * qd * 4);
    float *k = malloc((size_t)n * kvd * 4), *v = malloc((size_t)n * kvd * 4);
    float *att = malloc(qd * 4), *tmp = malloc((qd + 2 * kvd) * 4), *p = malloc(n * 4);
    for (uint32_t t = 0; t < n; t++)
        memcpy(x + (size_t)t * d, W + L->embed + (size_t)tok[t] * d, d * 4);
    for (uint32_t l = 0; l < m->layers; l++) {
        const eng_layer_layout *ly = &L->layer[l];
        bool win = m->window && (l % 2 == 0) && l / 2 < m->window_layers;
        for (uint32_t t = 0; t < n; t++) {
            ref_rmsnorm(xn, x + (size_t)t * d, W + ly->attn_norm, d, m->norm_eps);
            ref_matvec(tmp, W + ly->wqkv, xn, qd + 2 * kvd, d);
            for (uint32_t h = 0; h < H; h++)
                ref_rope(tmp + h * hd, hd, t, m->rope_theta);
            for (uint32_t h = 0; h < KV; h++)
                ref_rope(tmp + qd + h * hd, hd, t, m->rope_theta);
            memcpy(q + (size_t)t * qd, tmp, qd * 4);
            memcpy(k + (size_t)t * kvd, tmp + qd, kvd * 4);
            memcpy(v + (size_t)t * kvd, tmp + qd + kvd, kvd * 4);
        }
        for (uint32_t t = 0; t < n; t++) {
            for (uint32_t h = 0; h < H; h++) {
                uint32_t g = h / (H / KV);
                double mx = -1e30, sum = 0;
                for (uint32_t j = 0; j <= t; j++) {
                    if (win && t - j >= m->window) {
                        p[j] = -INFINITY;
                        continue;
                    }
                    double s = 0;
                    for (uint32_t i = 0; i < hd; i++)
                        s += (double)q[(size_t)t * qd + h * hd + i] *
                             k[(size_t)j * kvd + g * hd + i];
                    p[j] = (float)(s / sqrt((double)hd));
                    if (p[j] > mx) mx = p[j];
                }
                for (uint32_t j = 0; j <= t; j++)
                    sum += (p[j] = isinf(p[j]) ? 0 : expf(p[j] - (float)mx));
                for (uint32_t i = 0; i < hd; i++) {
                    double o = 0;
                    for (uint32_t j = 0; j <= t; j++)
                        o += p[j] / sum * v[(size_t)j * kvd + g * hd + i];
                    att[h * hd + i] = (float)o;
                }
            }
            float *y = tmp;
            ref_matvec(y, W + ly->wo, att, d, qd);
            for (uint32_t i = 0; i < d; i++)
                x[(size_t)t * d + i] += y[i];
        }
        for (uint32_t t = 0; t < n; t++) {
            float *xt = x + (size_t)t * d;
            ref_rmsnorm(xn, xt, W + ly->ffn_norm, d, m->norm_eps);
            bool moe = m->experts && l >= m->dense_layers;
            if (!moe) {
                ref_ffn(xt, xn, W + ly->w_gu, W + ly->w_down, d, m->ffn, 1.0f);
                continue;
            }
            uint32_t E = m->experts, K = m->experts_active, f = m->expert_ffn;
            float z[64];
            ref_matvec(z, W + ly->router, xn, E, d);
            if (bias)
                for (uint32_t i = 0; i < E; i++)
                    z[i] += bias[i];
            // top-k: sort indices by logit (descending, lower index first on ties)
            uint32_t order[64];
            for (uint32_t i = 0; i < E; i++)
                order[i] = i;
            for (uint32_t i = 0; i < E; i++)
                for (uint32_t j = i + 1; j < E; j++)
                    if (z[order[j]] > z[order[i]] ||
                        (z[order[j]] == z[order[i]] && order[j] < order[i])) {
                        uint32_t s = order[i];
                        order[i] = order[j];
                        order[j] = s;
                    }
            double den = 0;
            for (uint32_t j = 0; j < K; j++)
                den += exp(z[order[j]] - z[order[0]]);
            for (uint32_t j = 0; j < K; j++) {
                uint32_t ex = order[j];
                if (l == rl && rsel) rsel[t * K + j] = (int32_t)ex;
                float wgt = (float)(exp(z[ex] - z[order[0]]) / den);
                ref_ffn(xt, xn, W + ly->exp_gu + (size_t)ex * 2 * f * d,
                        W + ly->exp_down + (size_t)ex * d * f, d, f, wgt);
            }
            if (m->shared_experts)
                ref_ffn(xt, xn, W + ly->sh_gu, W + ly->sh_down, d, m->shared_experts * f, 1.0f);
        }
    }
    for (uint32_t t = 0; t < n; t++) {
        ref_rmsnorm(xn, x + (size_t)t * d, W + L->final_norm, d, m->norm_eps);
        ref_matvec(logits + (size_t)t * m->vocab, W + L->lm_head, xn, m->vocab, d);
    }
    free(x), free(xn), free(q), free(k), free(v), free(att), free(tmp), free(p);
}

// ---- model files --------------------------------------------------------------------------
START_TEST(test_model_files_load) {
    const char *names[] = {"tiny-dense", "tiny-moe", "tiny-swa"};
    for (int i = 0; i < 3; i++) {
        eng_model_desc m;
        kvf_err err = {0};
        kvf_status st = eng_model_desc_load(&m, names[i], NULL, &err);
        ck_assert_msg(st == KVF_OK, "%s: %s", names[i], err.msg);
        ck_assert_str_eq(m.name, names[i]);
        ck_assert_uint_eq(m.hidden, 512);
        ck_assert_uint_eq(m.layers, 8);
    }
    eng_model_desc m;
    kvf_err err = {0};
    ck_assert_int_eq(eng_model_desc_load(&m, "tiny-swa", NULL, &err), KVF_OK);
    // alternate layers windowed: 0, 2, 4, 6
    for (uint32_t l = 0; l < 8; l++)
        ck_assert_int_eq(eng_layer_windowed(&m, l), l % 2 == 0);
    ck_assert_int_eq(eng_model_desc_load(&m, "tiny-moe", NULL, &err), KVF_OK);
    ck_assert(!eng_layer_moe(&m, 0));
    ck_assert(eng_layer_moe(&m, 1));
}
END_TEST

START_TEST(test_model_bad_input) {
    eng_model_desc m;
    kvf_err err = {0};
    const char *base = "layers: 2\nhidden: 64\nheads: 4\nkv_heads: 2\nhead_dim: 16\nffn: 64\n"
                       "vocab: 100\n";
    ck_assert_int_eq(eng_model_desc_parse(&m, base, "x.yaml", &err), KVF_OK);
    char buf[1024];
    snprintf(buf, sizeof buf, "%sfuture_key: 3  # ignored\n", base);
    ck_assert_int_eq(eng_model_desc_parse(&m, buf, "x.yaml", &err), KVF_OK);

    snprintf(buf, sizeof buf, "%shidden: lots\n", base);
    ck_assert_int_eq(eng_model_desc_parse(&m, buf, "x.yaml", &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "x.yaml:8") && strstr(err.msg, "hidden"), "%s", err.msg);

    snprintf(buf, sizeof buf, "%sjust words\n", base);
    ck_assert_int_eq(eng_model_desc_parse(&m, buf, "x.yaml", &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "x.yaml:8"), "%s", err.msg);

    snprintf(buf, sizeof buf, "%sexperts:\n  count: 8\n", base);
    ck_assert_int_eq(eng_model_desc_parse(&m, buf, "x.yaml", &err), KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "x.yaml:8") && strstr(err.msg, "experts"), "%s", err.msg);

    ck_assert_int_eq(eng_model_desc_parse(&m, "layers: 2\nhidden: 64\n", "y.yaml", &err),
                     KVF_EPARSE);
    ck_assert_msg(strstr(err.msg, "missing required key 'heads'"), "%s", err.msg);

    snprintf(buf, sizeof buf, "%skv_heads: 3\n", base);
    ck_assert_int_eq(eng_model_desc_parse(&m, buf, "x.yaml", &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "kv_heads"), "%s", err.msg);

    snprintf(buf, sizeof buf, "%sexperts: 4\nexperts_active: 5\nexpert_ffn: 8\n", base);
    ck_assert_int_eq(eng_model_desc_parse(&m, buf, "x.yaml", &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "experts_active"), "%s", err.msg);

    // more windowed layers than even ones: even layers first, then odd ones from the start
    snprintf(buf, sizeof buf, "%swindow: 16\nwindow_layers: 2\n", base);
    ck_assert_int_eq(eng_model_desc_parse(&m, buf, "x.yaml", &err), KVF_OK);
    ck_assert(eng_layer_windowed(&m, 0) && eng_layer_windowed(&m, 1));
    m.layers = 6, m.window_layers = 4;
    for (uint32_t l = 0; l < 6; l++)
        ck_assert_msg(eng_layer_windowed(&m, l) == (l % 2 == 0 || l == 1), "layer %u", l);
    snprintf(buf, sizeof buf, "%swindow: 16\nwindow_layers: 3\n", base);
    ck_assert_int_eq(eng_model_desc_parse(&m, buf, "x.yaml", &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "window_layers"), "%s", err.msg);

    snprintf(buf, sizeof buf, "%sattention: mla\n", base);
    ck_assert_int_eq(eng_model_desc_parse(&m, buf, "x.yaml", &err), KVF_EINVAL);

    ck_assert_int_eq(eng_model_desc_load(&m, "no-such-model", NULL, &err), KVF_ENOENT);
    ck_assert_msg(strstr(err.msg, "no-such-model"), "%s", err.msg);
}
END_TEST

START_TEST(test_engine_too_big_and_no_device) {
    eng_model_desc m = small_model(0, 0, 0);
    eng_options o;
    eng_options_default(&o);
    o.mem_limit_bytes = 1 << 20;   // 1 MiB: the weights alone are larger
    eng_engine *e = NULL;
    kvf_err err = {0};
    ck_assert_int_eq(eng_create(&e, &m, &o, &err), KVF_ENOMEM);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(err.msg, "does not fit"), "%s", err.msg);
    // an 8B-class model on a machine with 1 GiB
    m.layers = 32, m.hidden = 4096, m.heads = 32, m.kv_heads = 8, m.head_dim = 128;
    m.ffn = 14336, m.vocab = 128256;
    o.mem_limit_bytes = (double)(1 << 30);
    ck_assert_int_eq(eng_create(&e, &m, &o, &err), KVF_ENOMEM);
    ck_assert_msg(strstr(err.msg, "GiB"), "%s", err.msg);
    // bad options
    m = small_model(0, 0, 0);
    eng_options_default(&o);
    o.block_tokens = 100000;
    ck_assert_int_eq(eng_create(&e, &m, &o, &err), KVF_EINVAL);
    // cuda is refused cleanly where there is no device (or no CUDA build); head_dim 32 so
    // that a host with a GPU builds it
    m.head_dim = 32;
    eng_options_default(&o);
    o.backend = ENG_BACKEND_CUDA;
    o.max_context = 64;
    kvf_status st = eng_create(&e, &m, &o, &err);
    if (st != KVF_OK) {
        ck_assert_int_eq(st, KVF_ENODEV);
        ck_assert_msg(strstr(err.msg, "cuda"), "%s", err.msg);
    }
    eng_destroy(e);
}
END_TEST

// ---- equivalences -------------------------------------------------------------------------
START_TEST(test_prefill_cached_prefix_equals_full) {
    eng_model_desc m = small_model(0, 0, 0);
    uint32_t N = 37, P = 24, V = m.vocab;
    int32_t tok[64];
    tokens_fill(tok, N, V, 1);
    float *full = malloc(V * 4), *part = malloc(V * 4);
    eng_engine *a = make_engine(&m, 4, 64);
    eng_seq *s = NULL;
    uint32_t cached = 99;
    kvf_err err = {0};
    ck_assert_int_eq(eng_seq_open(a, tok, N, &s, &cached, &err), KVF_OK);
    ck_assert_uint_eq(cached, 0);
    ck_assert_int_eq(eng_prefill(a, s, tok, N, full, NULL, &err), KVF_OK);
    eng_destroy(a);

    eng_engine *b = make_engine(&m, 4, 64);
    eng_seq *p = NULL, *q = NULL;
    ck_assert_int_eq(eng_seq_open(b, tok, P, &p, &cached, &err), KVF_OK);
    ck_assert_int_eq(eng_prefill(b, p, tok, P, NULL, NULL, &err), KVF_OK);
    ck_assert_int_eq(eng_seq_open(b, tok, N, &q, &cached, &err), KVF_OK);
    ck_assert_uint_eq(cached, P);   // 6 full blocks of 4 found by hash
    for (uint32_t i = 0; i < P / 4; i++) {
        ck_assert_uint_eq(eng_seq_block_id(q, i), eng_seq_block_id(p, i));
        ck_assert_uint_eq(eng_seq_block_refs(b, q, i), 2);
    }
    // only the new tokens run
    ck_assert_int_eq(eng_prefill(b, q, tok + P, N - P, part, NULL, &err), KVF_OK);
    ck_assert_uint_eq(eng_seq_len(q), N);
    assert_close(part, full, V, "cached prefix + suffix vs full prefill");
    // and in two uneven chunks
    eng_seq *r = NULL;
    eng_seq_close(b, p);
    ck_assert_int_eq(eng_seq_open(b, tok, 5, &r, &cached, &err), KVF_OK);
    ck_assert_uint_eq(cached, 4);
    ck_assert_int_eq(eng_prefill(b, r, tok + 4, 9, NULL, NULL, &err), KVF_OK);
    ck_assert_int_eq(eng_prefill(b, r, tok + 13, N - 13, part, NULL, &err), KVF_OK);
    assert_close(part, full, V, "chunked prefill vs full prefill");
    eng_destroy(b);
    free(full), free(part);
}
END_TEST

static void check_decode_vs_reference(const eng_model_desc *m) {
    uint32_t V = m->vocab, N = 30, K = 11;
    eng_engine *e = make_engine(m, 4, 128);
    int32_t tok[3][64];
    uint32_t start[3] = {K, 5, 17};   // different context lengths in one decode batch
    float *ref = malloc((size_t)N * V * 4), *lg = malloc((size_t)3 * V * 4);
    float *refs[3];
    eng_seq *s[3];
    kvf_err err = {0};
    for (int i = 0; i < 3; i++) {
        tokens_fill(tok[i], N, V, 10 + i);
        refs[i] = malloc((size_t)N * V * 4);
        ref_forward(e, tok[i], N, refs[i], 0, NULL, NULL);
        uint32_t cached;
        ck_assert_int_eq(eng_seq_open(e, tok[i], start[i], &s[i], &cached, &err), KVF_OK);
        ck_assert_int_eq(eng_prefill(e, s[i], tok[i], start[i], lg, NULL, &err), KVF_OK);
        assert_close(lg, refs[i] + (size_t)(start[i] - 1) * V, V, "prefill vs reference");
    }
    // step by step: batch of three sequences at different positions
    for (uint32_t step = 0; step + 17 < N; step++) {
        int32_t in[3];
        for (int i = 0; i < 3; i++)
            in[i] = tok[i][start[i] + step];
        ck_assert_int_eq(eng_decode(e, s, in, 3, lg, NULL, &err), KVF_OK);
        for (int i = 0; i < 3; i++) {
            char what[64];
            snprintf(what, sizeof what, "decode seq %d step %u vs reference", i, step);
            assert_close(lg + (size_t)i * V, refs[i] + (size_t)(start[i] + step) * V, V, what);
        }
    }
    // a full prefill equals prefill + decode at the same position
    eng_seq *f = NULL;
    uint32_t cached;
    int32_t tok2[64];
    memcpy(tok2, tok[0], sizeof tok2);
    tok2[0] = (tok2[0] + 1) % (int32_t)V;   // no prefix hit
    ref_forward(e, tok2, N, ref, 0, NULL, NULL);
    ck_assert_int_eq(eng_seq_open(e, tok2, N, &f, &cached, &err), KVF_OK);
    ck_assert_int_eq(eng_prefill(e, f, tok2, N, lg, NULL, &err), KVF_OK);
    assert_close(lg, ref + (size_t)(N - 1) * V, V, "full prefill vs reference");
    for (int i = 0; i < 3; i++)
        free(refs[i]);
    free(ref), free(lg);
    eng_destroy(e);
}

START_TEST(test_decode_matches_reference_dense) {
    eng_model_desc m = small_model(0, 0, 0);
    check_decode_vs_reference(&m);
}
END_TEST

START_TEST(test_decode_matches_reference_moe) {
    eng_model_desc m = small_model(6, 0, 0);
    check_decode_vs_reference(&m);
}
END_TEST

START_TEST(test_decode_matches_reference_swa) {
    eng_model_desc m = small_model(0, 8, 1);   // layer 0 windowed (8 tokens), layers 1-2 full
    check_decode_vs_reference(&m);
}
END_TEST

// Only layer 0, windowed: the last token's logits cannot depend on a token outside the window.
START_TEST(test_window_ignores_outside_tokens) {
    eng_model_desc m = small_model(0, 8, 1);
    m.layers = 1;
    uint32_t N = 20, V = m.vocab;
    int32_t tok[32], pert[32];
    tokens_fill(tok, N, V, 3);
    float *a = malloc(V * 4), *b = malloc(V * 4), *c = malloc(V * 4);
    kvf_err err = {0};
    for (int mode = 0; mode < 2; mode++) {   // 0: prefill, 1: prefill + decode of the last
        float *outs[3] = {a, b, c};
        for (int v = 0; v < 3; v++) {
            memcpy(pert, tok, sizeof pert);
            if (v == 1) pert[N - 9] = (pert[N - 9] + 7) % (int32_t)V;   // just outside
            if (v == 2) pert[N - 8] = (pert[N - 8] + 7) % (int32_t)V;   // just inside
            eng_engine *e = make_engine(&m, 4, 64);
            eng_seq *s;
            uint32_t cached;
            ck_assert_int_eq(eng_seq_open(e, pert, N, &s, &cached, &err), KVF_OK);
            if (mode == 0) {
                ck_assert_int_eq(eng_prefill(e, s, pert, N, outs[v], NULL, &err), KVF_OK);
            } else {
                ck_assert_int_eq(eng_prefill(e, s, pert, N - 1, NULL, NULL, &err), KVF_OK);
                ck_assert_int_eq(eng_decode(e, &s, &pert[N - 1], 1, outs[v], NULL, &err), KVF_OK);
            }
            eng_destroy(e);
        }
        for (uint32_t i = 0; i < V; i++)
            ck_assert_msg(a[i] == b[i],
                          "mode %d: logit %u moved (%g vs %g) after changing a "
                          "token outside the window",
                          mode, i, (double)a[i], (double)b[i]);
        float diff = 0;
        for (uint32_t i = 0; i < V; i++)
            diff = fmaxf(diff, fabsf(a[i] - c[i]));
        ck_assert_msg(diff > 1e-4f, "mode %d: a token inside the window had no effect", mode);
    }
    free(a), free(b), free(c);
}
END_TEST

START_TEST(test_moe_routing_top_k) {
    eng_model_desc m = small_model(6, 0, 0);
    uint32_t N = 19, V = m.vocab, k = m.experts_active;
    int32_t tok[32], sel[64];
    tokens_fill(tok, N, V, 5);
    float *ref = malloc((size_t)N * V * 4);
    eng_engine *e = make_engine(&m, 4, 64);
    kvf_err err = {0};
    for (int biased = 0; biased < 2; biased++) {
        float bias[6] = {0, 0, 0, 0, 0, 0};
        if (biased) bias[3] = 50, bias[5] = 40;   // every token must pick experts 3 then 5
        eng_set_router_bias(e, biased ? bias : NULL);
        for (uint32_t layer = 1; layer < m.layers; layer++) {
            eng_seq *s;
            uint32_t cached;
            tok[0] = (int32_t)(layer + 3 * biased);   // fresh prefix each time
            ref_forward(e, tok, N, ref, layer, sel, biased ? bias : NULL);
            ck_assert_int_eq(eng_seq_open(e, tok, N, &s, &cached, &err), KVF_OK);
            ck_assert_int_eq(eng_prefill(e, s, tok, N, NULL, NULL, &err), KVF_OK);
            const int32_t *idx;
            const float *w;
            ck_assert_uint_eq(eng_last_routing(e, layer, &idx, &w), N);
            for (uint32_t t = 0; t < N; t++) {
                float sum = 0;
                for (uint32_t j = 0; j < k; j++) {
                    ck_assert_msg(idx[t * k + j] == sel[t * k + j],
                                  "layer %u token %u slot %u: "
                                  "expert %d, reference %d",
                                  layer, t, j, idx[t * k + j], sel[t * k + j]);
                    sum += w[t * k + j];
                }
                ck_assert_msg(fabsf(sum - 1) < 1e-5f, "weights sum to %g", (double)sum);
                if (biased) ck_assert(idx[t * k] == 3 && idx[t * k + 1] == 5);
            }
            eng_seq_close(e, s);
        }
    }
    ck_assert_uint_eq(eng_last_routing(e, 0, NULL, NULL), 0);   // dense layer
    eng_destroy(e);
    free(ref);
}
END_TEST

// ---- paged cache --------------------------------------------------------------------------
START_TEST(test_prefix_blocks_shared_and_freed) {
    eng_model_desc m = small_model(0, 0, 0);
    eng_engine *e = make_engine(&m, 4, 24);
    int32_t a[40], b[40];
    tokens_fill(a, 40, m.vocab, 9);
    memcpy(b, a, sizeof b);
    b[35] = (b[35] + 1) % (int32_t)m.vocab;   // differs in block 8
    kvf_err err = {0};
    eng_seq *sa, *sb;
    uint32_t cached;
    eng_kv_stats st;
    ck_assert_int_eq(eng_seq_open(e, a, 40, &sa, &cached, &err), KVF_OK);
    ck_assert_int_eq(eng_prefill(e, sa, a, 40, NULL, NULL, &err), KVF_OK);
    eng_kv_stats_get(e, &st);
    ck_assert_uint_eq(st.used, 10);
    ck_assert_int_eq(eng_seq_open(e, b, 40, &sb, &cached, &err), KVF_OK);
    ck_assert_uint_eq(cached, 32);   // blocks 0..7 equal, block 8 differs
    ck_assert_int_eq(eng_prefill(e, sb, b + 32, 8, NULL, NULL, &err), KVF_OK);
    eng_kv_stats_get(e, &st);
    ck_assert_uint_eq(st.used, 12);
    ck_assert_uint_eq(st.shared, 8);
    for (uint32_t i = 0; i < 8; i++)
        ck_assert_uint_eq(eng_seq_block_refs(e, sb, i), 2);
    ck_assert_uint_eq(eng_seq_block_refs(e, sb, 8), 1);
    eng_seq_close(e, sa);
    for (uint32_t i = 0; i < 8; i++)
        ck_assert_uint_eq(eng_seq_block_refs(e, sb, i), 1);
    eng_seq_close(e, sb);
    eng_kv_stats_get(e, &st);
    ck_assert_uint_eq(st.used, 0);
    ck_assert_uint_eq(st.free + st.cached, 24);
    ck_assert_uint_eq(st.cached, 12);   // all full blocks stay findable
    // a later sequence with the same prefix finds them again
    eng_seq *sc;
    ck_assert_int_eq(eng_seq_open(e, a, 40, &sc, &cached, &err), KVF_OK);
    ck_assert_uint_eq(cached, 36);
    eng_seq_close(e, sc);
    // pressure: a long unrelated sequence evicts cached blocks instead of failing
    int32_t c[96];
    tokens_fill(c, 96, m.vocab, 77);
    eng_seq *sd;
    ck_assert_int_eq(eng_seq_open(e, c, 90, &sd, &cached, &err), KVF_OK);
    ck_assert_int_eq(eng_prefill(e, sd, c, 90, NULL, NULL, &err), KVF_OK);
    eng_kv_stats_get(e, &st);
    ck_assert_uint_eq(st.used, 23);
    ck_assert_uint_gt(st.evictions, 0);
    // arena exhausted: a clear error, nothing changed
    eng_seq *se;
    ck_assert_int_eq(eng_seq_open(e, a, 40, &se, &cached, &err), KVF_OK);
    ck_assert_int_eq(eng_prefill(e, se, a + cached, 40 - cached, NULL, NULL, &err), KVF_ENOMEM);
    ck_assert_msg(strstr(err.msg, "KV cache full"), "%s", err.msg);
    eng_seq_close(e, se);
    eng_seq_close(e, sd);
    eng_kv_stats_get(e, &st);
    ck_assert_uint_eq(st.used, 0);
    // forgotten before closing: its own blocks are freed, not cached; a block another
    // sequence shares stays findable
    uint32_t cached0 = st.cached;
    int32_t f[40];
    tokens_fill(f, 40, m.vocab, 123);
    eng_seq *sf, *sg;
    ck_assert_int_eq(eng_seq_open(e, f, 40, &sf, &cached, &err), KVF_OK);
    ck_assert_int_eq(eng_prefill(e, sf, f, 40, NULL, NULL, &err), KVF_OK);
    ck_assert_int_eq(eng_seq_open(e, f, 16, &sg, &cached, &err), KVF_OK);
    ck_assert_uint_eq(cached, 12);   // blocks 0-2 attached (the last block is recomputed)
    eng_seq_forget(e, sf);
    eng_seq_close(e, sf);
    eng_seq_close(e, sg);
    eng_kv_stats_get(e, &st);
    ck_assert_uint_eq(st.used, 0);
    ck_assert_uint_le(st.cached, cached0 + 3);
    ck_assert_int_eq(eng_seq_open(e, f, 40, &sf, &cached, &err), KVF_OK);
    ck_assert_uint_eq(cached, 12);   // blocks 0-2 only: blocks 3-9 were forgotten
    eng_seq_close(e, sf);
    eng_destroy(e);
}
END_TEST

// ---- serving loop -------------------------------------------------------------------------
// A serving loop's defaults on tiny-dense (path: room for the model file's path).
static void tiny_serve_config(eng_serve_config *c, char *path, size_t n) {
    const char *src = getenv("KVF_SOURCE_DIR");
    snprintf(path, n, "%s/models/tiny-dense.yaml", src ? src : ".");
    eng_serve_config_default(c);
    c->model = path;
}

START_TEST(test_serve_preempts_when_kv_runs_out) {
    char path[4096];
    eng_serve_config c;
    tiny_serve_config(&c, path, sizeof path);
    c.block_tokens = 4;
    c.kv_blocks = 16;   // 64 tokens for everyone
    c.max_batch_tokens = 32;
    c.max_batch_requests = 8;
    c.threads = 1;
    c.no_sleep = true;
    uint64_t shared[3] = {11, 12, 13};
    eng_request r[6];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 5; i++) {
        r[i].arrival_ns = i * 1000;
        r[i].input_tokens = 12;
        r[i].output_tokens = 14;   // 4 x 26 tokens > 64: someone must be preempted
        r[i].n_blocks = 3;
        r[i].blocks = shared;   // same prompt: prefix reuse too
    }
    r[5].arrival_ns = 5000;   // longer than the whole arena: rejected, no crash
    r[5].input_tokens = 60;
    r[5].output_tokens = 20;
    eng_serve_result res;
    kvf_err err = {0};
    kvf_status st = eng_serve_run(&c, r, 6, &res, &err);
    ck_assert_msg(st == KVF_OK, "%s", err.msg);
    ck_assert_uint_eq(res.n_requests, 6);
    ck_assert_msg(res.preemptions > 0, "no preemption with a 64-token arena");
    for (int i = 0; i < 5; i++) {
        eng_request_result *q = &res.requests[i];
        ck_assert_uint_eq(q->status, ENG_REQ_DONE);
        ck_assert_uint_eq(q->output_tokens, 14);
        ck_assert(q->first_token_ns >= q->arrival_ns);
        ck_assert(q->last_token_ns >= q->first_token_ns);
        ck_assert(q->completion_ns == q->last_token_ns);
    }
    ck_assert_uint_eq(res.requests[5].status, ENG_REQ_REJECTED);
    ck_assert_msg(res.cached_tokens > 0, "no prefix reuse across identical prompts");
    uint64_t dec = 0;
    for (size_t i = 0; i < res.n_steps; i++)
        dec += res.steps[i].tokens - res.steps[i].prefill_tokens;
    ck_assert_uint_eq(dec, res.decode_tokens);
    ck_assert_uint_ge(res.decode_tokens, 5 * 13);
    // every step's shape: its decodes and prefill chunks add up to its tokens; its thread CPU
    // time is measured
    size_t chunks = 0;
    for (size_t i = 0; i < res.n_steps; i++) {
        const eng_step_record *k = &res.steps[i];
        ck_assert_uint_eq(k->chunk0, chunks);
        ck_assert(k->chunk0 + k->n_chunks <= res.n_chunks);
        uint32_t pt = 0;
        for (uint32_t j = 0; j < k->n_chunks; j++)
            pt += res.chunks[k->chunk0 + j].tokens;
        ck_assert_uint_eq(pt, k->prefill_tokens);
        ck_assert_uint_eq(k->decode_seqs + k->prefill_tokens, k->tokens);
        ck_assert_uint_eq(k->decode_seqs + k->n_chunks, k->batch);
        ck_assert_msg(k->cpu_ns > 0 && k->duration_ns > 0, "step %zu: cpu %lld wall %lld", i,
                      (long long)k->cpu_ns, (long long)k->duration_ns);
        ck_assert(k->after_ns >= 0);
        chunks += k->n_chunks;
    }
    ck_assert_uint_eq(chunks, res.n_chunks);
    eng_serve_result_free(&res);
    // a bad request is named
    r[0].input_tokens = 0;
    ck_assert_int_eq(eng_serve_run(&c, r, 1, &res, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "request 0"), "%s", err.msg);
}
END_TEST

// The busy hook runs between steps with the serve's clock stopped: a hook that sleeps 200 ms
// moves no step (the next one starts where the clock stood when it was called, within 100 ms
// however loaded the machine), and its time is counted apart.
typedef struct busy_log {
    int64_t at[256];
    int n;
} busy_log;
static void busy_sleep(void *ctx, int64_t now_ns) {
    busy_log *b = ctx;
    if (b->n < 256) b->at[b->n++] = now_ns;
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
}

START_TEST(test_serve_busy_hook_stops_clock) {
    char path[4096];
    eng_serve_config c;
    tiny_serve_config(&c, path, sizeof path);
    c.threads = 1;
    c.no_sleep = true;
    busy_log b = {.n = 0};
    c.busy_hook = busy_sleep;
    c.busy_ctx = &b;
    c.busy_every_ns = 1;   // after every step
    eng_request r[3];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 3; i++) {
        r[i].arrival_ns = i * 1000000;
        r[i].input_tokens = 24;
        r[i].output_tokens = 6;
    }
    eng_serve_result res;
    kvf_err err = {0};
    ck_assert_msg(eng_serve_run(&c, r, 3, &res, &err) == KVF_OK, "%s", err.msg);
    ck_assert_msg(b.n >= 3, "busy hook called %d times", b.n);
    ck_assert_msg(res.busy_probe_ns >= (int64_t)b.n * 200000000, "busy_probe_ns %lld for %d calls",
                  (long long)res.busy_probe_ns, b.n);
    for (int k = 0; k < b.n; k++) {
        // the step before the call ended by then; the next one starts within 100 ms of it
        size_t j = 0;
        while (j < res.n_steps && res.steps[j].start_ns < b.at[k])
            j++;
        ck_assert_msg(j > 0, "a call before any step");
        ck_assert(res.steps[j - 1].start_ns + res.steps[j - 1].duration_ns <= b.at[k]);
        if (j < res.n_steps)
            ck_assert_msg(res.steps[j].start_ns - b.at[k] < 100000000,
                          "call %d at %lld ns, next step at %lld ns: the clock ran on", k,
                          (long long)b.at[k], (long long)res.steps[j].start_ns);
    }
    eng_serve_result_free(&res);
}
END_TEST

// ---- profiler -----------------------------------------------------------------------------
static int kvt_count_lines(const char *t) {
    int n = 0;
    for (; *t; t++)
        n += *t == '\n';
    return n;
}

START_TEST(test_profile_csv_contract) {
    char dir[] = "/tmp/kvf_engtest_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char model[256], csv[256];
    snprintf(model, sizeof model, "%s/pico.yaml", dir);
    snprintf(csv, sizeof csv, "%s/profile.csv", dir);
    FILE *f = fopen(model, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "# a tiny model\nname: pico\nlayers: 2\nhidden: 64\nheads: 4\nkv_heads: 2\n"
               "head_dim: 16\nffn: 128\nvocab: 256\nattention: gqa\n");
    fclose(f);
    eng_profile_config c = {.model = model, .quick = true, .seed = 3};
    kvf_err err = {0};
    f = fopen(csv, "w");
    ck_assert_int_eq(eng_profile_run(&c, f, NULL, &err), KVF_OK);
    fclose(f);
    char *text = NULL;
    size_t len;
    ck_assert_int_eq(kvf_read_file(csv, &text, &len, &err), KVF_OK);
    const char *keys[] = {"# kvfleet_version: ", "# model: pico\n",
                          "# hardware_id: ", "# backend: cpu\n", "# threads: "};
    for (int i = 0; i < 5; i++)
        ck_assert_msg(strstr(text, keys[i]), "missing '%s'", keys[i]);
    ck_assert_ptr_null(strstr(text, "date"));
    const char *hdr = "\nmodel,hardware,backend,op,batch,new_tokens,context,median_ns,p10_ns,"
                      "p90_ns,repeats,flops,bytes\n";
    char *rows = strstr(text, hdr);
    ck_assert_ptr_nonnull(rows);
    rows += strlen(hdr);
    int n[3] = {0, 0, 0};
    uint64_t dec_batches = 0;   // bit b: a decode row of batch b
    double last_flops = 0;
    for (char *line = strtok(rows, "\n"); line; line = strtok(NULL, "\n")) {
        char mm[64], hw[64], be[16], op[32];
        unsigned b, t, ctx, reps;
        double med, p10, p90, fl, by;
        int got = sscanf(line, "%63[^,],%63[^,],%15[^,],%31[^,],%u,%u,%u,%lf,%lf,%lf,%u,%lf,%lf",
                         mm, hw, be, op, &b, &t, &ctx, &med, &p10, &p90, &reps, &fl, &by);
        ck_assert_msg(got == 13, "row '%s': %d fields", line, got);
        ck_assert_str_eq(mm, "pico");
        ck_assert_str_eq(be, "cpu");
        ck_assert_msg(p10 <= med && med <= p90 && med > 0, "row '%s'", line);
        ck_assert_uint_ge(reps, 3);
        if (!strcmp(op, "prefill")) {
            n[0]++;
            ck_assert_uint_eq(b, 1);
            // independent count: GEMMs 2 T params + causal attention + LM head (last token)
            double params =
                2 * (64.0 * (4 + 2 * 2) * 16 + 64.0 * 64 + 3 * 64.0 * 128);   // 2 layers
            double keys_seen = (double)t * ctx + (double)t * (t + 1) / 2;
            double expect = 2.0 * t * params + 2 * 4 * 4 * 16 * keys_seen + 2.0 * 64 * 256;
            ck_assert_msg(fabs(fl - expect) <= 1e-5 * expect,   // CSV keeps 6 digits
                          "prefill %u/%u flops %g, expected %g", t, ctx, fl, expect);
            if (ctx == 0) {
                ck_assert(fl > last_flops);
                last_flops = fl;
            }
        } else if (!strcmp(op, "decode")) {
            n[1]++;
            if (b < 64) dec_batches |= 1ull << b;
            ck_assert_uint_eq(t, 1);
            ck_assert(fl > 0 && by > 0);
        } else {
            ck_assert_str_eq(op, "host_overhead");
            n[2]++;
        }
    }
    ck_assert_msg(n[0] >= 6 && n[1] >= 8 && n[2] >= 2, "rows: %d prefill %d decode %d host", n[0],
                  n[1], n[2]);
    // a CPU sweep measures every decode batch from 1 to its largest (32 in the quick sweep)
    ck_assert_msg(dec_batches == (((1ull << 32) - 1) << 1), "decode batches %#llx",
                  (unsigned long long)dec_batches);
    free(text);
    // --check re-measures against the file
    char out[256];
    snprintf(out, sizeof out, "%s/check.txt", dir);
    f = fopen(out, "w");
    ck_assert_int_eq(eng_profile_check(&c, csv, f, &err), KVF_OK);
    fclose(f);
    ck_assert_int_eq(kvf_read_file(out, &text, &len, &err), KVF_OK);
    ck_assert_msg(strstr(text, "median drift"), "%s", text);
    // the probes reach the largest shapes of the file (the pico model's are far within the
    // default bound): the biggest decode batch and prefill chunk, each with a finite ratio
    ck_assert_msg(strstr(text, "decode,32,1,"), "largest decode batch not probed:\n%s", text);
    ck_assert_msg(strstr(text, "prefill,1,512,"), "largest prefill chunk not probed:\n%s", text);
    int probes = 0;
    for (char *l = strstr(text, "\n") + 1; *l && *l != '#'; l = strchr(l, '\n') + 1) {
        double ratio = 0;
        ck_assert(sscanf(l, "%*[^,],%*u,%*u,%*u,%*f,%*f,%lf", &ratio) == 1);
        ck_assert_msg(ratio > 0 && isfinite(ratio), "%s", l);
        probes++;
    }
    ck_assert_int_ge(probes, 4);
    free(text);
    // a bound keeps the large shapes out: below every row, only each op's smallest is probed
    c.check_bound_ms = 1e-3;
    f = fopen(out, "w");
    ck_assert_int_eq(eng_profile_check(&c, csv, f, &err), KVF_OK);
    fclose(f);
    ck_assert_int_eq(kvf_read_file(out, &text, &len, &err), KVF_OK);
    ck_assert_msg(kvt_count_lines(text) == 1 + 2 + 1, "expected 2 probes:\n%s", text);
    ck_assert_msg(!strstr(text, "decode,32,1,") && !strstr(text, "prefill,1,512,"), "%s", text);
    free(text);
    c.check_bound_ms = 0;
    // a profile 100 times too fast is caught by --max-ratio
    char fast[300];
    snprintf(fast, sizeof fast, "%s/fast.csv", dir);
    ck_assert_int_eq(kvf_read_file(csv, &text, &len, &err), KVF_OK);
    f = fopen(fast, "w");
    for (char *l = text, *nl; l && *l; l = nl ? nl + 1 : NULL) {
        nl = strchr(l, '\n');
        if (nl) *nl = 0;
        char mm[64], hw[64], be[16], op[32];
        unsigned b, t, ctx, reps;
        double med, p10, p90, fl, by;
        if (sscanf(l, "%63[^,],%63[^,],%15[^,],%31[^,],%u,%u,%u,%lf,%lf,%lf,%u,%lf,%lf", mm, hw, be,
                   op, &b, &t, &ctx, &med, &p10, &p90, &reps, &fl, &by) == 13)
            fprintf(f, "%s,%s,%s,%s,%u,%u,%u,%.0f,%.0f,%.0f,%u,%g,%g\n", mm, hw, be, op, b, t, ctx,
                    med / 100 + 1, p10 / 100 + 1, p90 / 100 + 1, reps, fl, by);
        else
            fprintf(f, "%s\n", l);
    }
    fclose(f);
    free(text);
    c.check_max_ratio = 3;
    FILE *o2 = fopen(out, "w");
    ck_assert_int_eq(eng_profile_check(&c, fast, o2, &err), KVF_ERUN);
    fclose(o2);
    ck_assert_msg(strstr(err.msg, "drifted"), "%s", err.msg);
    remove(fast);
    remove(out);
    remove(csv);
    remove(model);
    rmdir(dir);
}
END_TEST

static Suite *engine_suite(void) {
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_model_files_load);
    tcase_add_test(tc, test_model_bad_input);
    tcase_add_test(tc, test_engine_too_big_and_no_device);
    tcase_add_test(tc, test_prefill_cached_prefix_equals_full);
    tcase_add_test(tc, test_decode_matches_reference_dense);
    tcase_add_test(tc, test_decode_matches_reference_moe);
    tcase_add_test(tc, test_decode_matches_reference_swa);
    tcase_add_test(tc, test_window_ignores_outside_tokens);
    tcase_add_test(tc, test_moe_routing_top_k);
    tcase_add_test(tc, test_prefix_blocks_shared_and_freed);
    tcase_add_test(tc, test_serve_preempts_when_kv_runs_out);
    tcase_add_test(tc, test_serve_busy_hook_stops_clock);
    tcase_add_test(tc, test_profile_csv_contract);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(engine_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
