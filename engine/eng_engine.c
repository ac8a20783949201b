// engine/eng_engine.c -- the engine object: option checks, memory budget, backend choice, and
// the two step entry points (prefill chunk, batched decode), which reserve KV blocks, build
// one eng_batch and hand it to the backend.
//
// A step either runs completely or changes nothing: blocks for every sequence are reserved
// before the pass, and released again if any reservation fails.
#include <stdlib.h>
#include <string.h>

#include "eng_int.h"

void eng_options_default(eng_options *o) {
    memset(o, 0, sizeof *o);
    o->backend = ENG_BACKEND_CPU;
    o->block_tokens = 16;
    o->max_step_tokens = 2048;
    o->max_seqs = 64;
    o->max_context = 8192;
    o->seed = 1;
}

const eng_model_desc *eng_model(const eng_engine *e) {
    return &e->m;
}
const eng_options *eng_opts(const eng_engine *e) {
    return &e->o;
}
const eng_layout *eng_layout_get(const eng_engine *e) {
    return &e->lay;
}
const char *eng_hardware_id(const eng_engine *e) {
    return e->hw;
}
int64_t eng_last_forward_ns(const eng_engine *e) {
    return e->last_forward_ns;
}

void eng_arena_bytes(const eng_engine *e, double *w, double *kv, double *act) {
    if (w) *w = e->bytes_w;
    if (kv) *kv = e->bytes_kv;
    if (act) *act = e->bytes_act;
}

void eng_set_router_bias(eng_engine *e, const float *bias) {
    if (!e->m.experts) return;
    if (!bias) {
        free(e->router_bias);
        e->router_bias = NULL;
        return;
    }
    if (!e->router_bias) e->router_bias = kvf_malloc(e->m.experts * sizeof(float));
    memcpy(e->router_bias, bias, e->m.experts * sizeof(float));
}

uint32_t eng_last_routing(const eng_engine *e, uint32_t layer, const int32_t **idx,
                          const float **weight) {
    if (layer >= e->m.layers || !eng_layer_moe(&e->m, layer) || !e->route_ntok) return 0;
    size_t off = (size_t)layer * e->o.max_step_tokens * e->m.experts_active;
    if (idx) *idx = e->route_idx + off;
    if (weight) *weight = e->route_w + off;
    return e->route_ntok;
}

#ifdef KVF_HAVE_CUDA
static kvf_status cuda_create(eng_engine *e, kvf_err *err) {
    const eng_model_desc *m = &e->m;
    eng_cuda_layer *cl = kvf_calloc(m->layers, sizeof *cl);
    for (uint32_t l = 0; l < m->layers; l++) {
        const eng_layer_layout *L = &e->lay.layer[l];
        cl[l] = (eng_cuda_layer){L->attn_norm,       L->wqkv,    L->wo,
                                 L->ffn_norm,        L->w_gu,    L->w_down,
                                 L->router,          L->exp_gu,  L->exp_down,
                                 L->sh_gu,           L->sh_down, eng_layer_windowed(m, l),
                                 eng_layer_moe(m, l)};
    }
    uint32_t nt = eng_layout_tensors(&e->lay, m);
    size_t *toff = kvf_malloc(nt * sizeof *toff), *tn = kvf_malloc(nt * sizeof *tn);
    uint32_t *tk = kvf_malloc(nt * sizeof *tk), *tc = kvf_malloc(nt * sizeof *tc);
    for (uint32_t t = 0; t < nt; t++)
        eng_layout_tensor(&e->lay, m, t, &toff[t], &tn[t], &tk[t], &tc[t]);
    eng_cuda_spec s = {
        .layers = m->layers,
        .hidden = m->hidden,
        .heads = m->heads,
        .kv_heads = m->kv_heads,
        .head_dim = m->head_dim,
        .ffn = m->ffn,
        .vocab = m->vocab,
        .experts = m->experts,
        .experts_active = m->experts_active,
        .expert_ffn = m->expert_ffn,
        .shared_ffn = m->shared_experts * m->expert_ffn,
        .window = m->window,
        .rope_theta = m->rope_theta,
        .norm_eps = m->norm_eps,
        .seed = e->o.seed,
        .embed = e->lay.embed,
        .final_norm = e->lay.final_norm,
        .lm_head = e->lay.lm_head,
        .total = e->lay.total,
        .layer = cl,
        .n_tensors = nt,
        .t_off = toff,
        .t_n = tn,
        .t_kind = tk,
        .t_cols = tc,
        .nblocks = e->nblocks,
        .block_tokens = e->bt,
        .max_step_tokens = e->o.max_step_tokens,
        .max_seqs = e->o.max_seqs,
        .max_context = e->o.max_context,
        .max_blocks = e->max_blocks,
        .mem_limit_bytes = e->o.mem_limit_bytes,
    };
    char msg[512] = "";
    eng_cuda_ctx *ctx = NULL;
    int rc = eng_cuda_create(&ctx, &s, msg, sizeof msg);
    free(cl), free(toff), free(tn), free(tk), free(tc);
    if (rc == ENG_CUDA_NODEV) return kvf_fail(err, KVF_ENODEV, "backend cuda: %s", msg);
    if (rc == ENG_CUDA_NOMEM) return kvf_fail(err, KVF_ENOMEM, "backend cuda: %s", msg);
    if (rc) return kvf_fail(err, KVF_ERUN, "backend cuda: %s", msg);
    e->cuda = ctx;
    eng_cuda_arena_bytes(ctx, &e->bytes_w, &e->bytes_kv, &e->bytes_act);
    char name[ENG_NAME_MAX] = "cuda";
    eng_cuda_device_name(name, sizeof name);
    eng_sanitize_id(name);
    snprintf(e->hw, sizeof e->hw, "%s", name);
    return KVF_OK;
}
#endif

void eng_backend_fill_kv(eng_engine *e, const uint32_t *block, const uint32_t *slot0,
                         const uint32_t *n, uint32_t nseg, uint64_t seed) {
#ifdef KVF_HAVE_CUDA
    if (e->cuda) {
        eng_cuda_fill_kv(e->cuda, block, slot0, n, nseg, seed);
        return;
    }
#endif
    for (uint32_t i = 0; i < nseg; i++)
        eng_cpu_fill_kv(e, block[i], slot0[i], n[i], seed + i);
}

kvf_status eng_create(eng_engine **out, const eng_model_desc *m, const eng_options *o,
                      kvf_err *err) {
    *out = NULL;
    eng_options opt = *o;
    if (!opt.block_tokens) opt.block_tokens = 16;
    if (!opt.max_step_tokens) opt.max_step_tokens = 2048;
    if (!opt.max_seqs) opt.max_seqs = 64;
    if (!opt.max_context) opt.max_context = 8192;
    if (opt.block_tokens > 4096)
        return kvf_fail(err, KVF_EINVAL, "block_tokens (%u) must be 1..4096", opt.block_tokens);
    if (opt.max_step_tokens < opt.max_seqs) opt.max_step_tokens = opt.max_seqs;
    if (opt.max_context > (1u << 24))
        return kvf_fail(err, KVF_EINVAL, "max_context (%u) too large", opt.max_context);
    eng_engine *e = kvf_calloc(1, sizeof *e);
    e->m = *m;
    e->o = opt;
    e->bt = opt.block_tokens;
    e->max_blocks = (opt.max_context + e->bt - 1) / e->bt;
    uint64_t nb = opt.kv_blocks;
    if (!nb) {   // default: every sequence at max_context, within a KV budget
        double budget = opt.backend == ENG_BACKEND_CUDA ? 16.0 * (1 << 30) : 1.0 * (1 << 30);
        double per_block = (double)m->layers * 2 * e->bt * m->kv_heads * m->head_dim *
                           (opt.backend == ENG_BACKEND_CUDA ? 2 : 4);
        nb = (uint64_t)opt.max_seqs * e->max_blocks;
        if (nb * per_block > budget) nb = KVF_MAX((uint64_t)(budget / per_block), e->max_blocks);
    }
    if (nb >= UINT32_MAX / 2) {
        eng_destroy(e);
        return kvf_fail(err, KVF_EINVAL, "kv_blocks (%llu) too large", (unsigned long long)nb);
    }
    e->nblocks = (uint32_t)nb;
    e->o.kv_blocks = e->nblocks;
    e->block_elems = (size_t)m->layers * 2 * e->bt * m->kv_heads * m->head_dim;
    eng_layout_build(&e->lay, m);
    kvf_status st = KVF_OK;
    uint32_t k = KVF_MAX(m->experts_active, 1);
    size_t rn = (size_t)m->layers * opt.max_step_tokens * k;
    e->route_idx = kvf_malloc(rn * sizeof *e->route_idx);
    e->route_w = kvf_malloc(rn * sizeof *e->route_w);
    size_t T = opt.max_step_tokens, S = opt.max_seqs;
    e->b_tokens = kvf_malloc(T * sizeof(int32_t));
    e->b_pos = kvf_malloc(T * sizeof(int32_t));
    e->b_table = kvf_malloc(S * e->max_blocks * sizeof(int32_t));
    e->b_start = kvf_malloc(S * sizeof(uint32_t));
    e->b_new = kvf_malloc(S * sizeof(uint32_t));
    e->b_ctx = kvf_malloc(S * sizeof(uint32_t));
    if ((st = eng_kv_init(e, err))) goto fail;
    if (opt.backend == ENG_BACKEND_CUDA) {
#ifdef KVF_HAVE_CUDA
        char why[512];
        if (eng_cuda_load(why, sizeof why)) {
            st = kvf_fail(err, KVF_ENODEV,
                          "backend cuda: %s; use the cpu backend (--backend cpu; kvfleet run: "
                          "--engine cpu)",
                          why);
            goto fail;
        }
        if (eng_cuda_device_count() <= 0) {
            st = kvf_fail(err, KVF_ENODEV,
                          "backend cuda: no CUDA device is visible (driver "
                          "missing or no GPU); use the cpu backend (--backend cpu; kvfleet "
                          "run: --engine cpu)");
            goto fail;
        }
        if ((st = cuda_create(e, err))) goto fail;
#else
        st = kvf_fail(err, KVF_ENODEV,
                      "backend cuda: this kvfleet was built without CUDA "
                      "(configure with -DKVFLEET_CUDA=ON on a host with the CUDA toolkit)");
        goto fail;
#endif
    } else {
        e->bytes_w = (double)e->lay.total * 4;
        e->bytes_kv = (double)e->nblocks * e->block_elems * 4;
        e->bytes_act = eng_cpu_act_bytes(m, &opt);
        double limit = opt.mem_limit_bytes > 0 ? opt.mem_limit_bytes : eng_phys_mem_bytes() * 0.9;
        double need = e->bytes_w + e->bytes_kv + e->bytes_act;
        if (need > limit) {
            st =
                kvf_fail(err, KVF_ENOMEM,
                         "model %s does not fit in memory on the cpu backend: "
                         "needs %.2f GiB (weights %.2f, KV %.2f for %u blocks, activations "
                         "%.2f) but the limit is %.2f GiB",
                         m->name, need / (1 << 30), e->bytes_w / (1 << 30), e->bytes_kv / (1 << 30),
                         e->nblocks, e->bytes_act / (1 << 30), limit / (1 << 30));
            goto fail;
        }
        eng_cpu_hardware_id(e->hw, sizeof e->hw);
        if ((st = eng_cpu_create(e, err))) goto fail;
    }
    *out = e;
    return KVF_OK;
fail:
    eng_destroy(e);
    return st;
}

void eng_destroy(eng_engine *e) {
    if (!e) return;
    eng_kv_free(e);
    eng_cpu_destroy(e);
#ifdef KVF_HAVE_CUDA
    if (e->cuda) eng_cuda_destroy(e->cuda);
#endif
    eng_layout_free(&e->lay);
    free(e->route_idx);
    free(e->route_w);
    free(e->router_bias);
    free(e->b_tokens);
    free(e->b_pos);
    free(e->b_table);
    free(e->b_start);
    free(e->b_new);
    free(e->b_ctx);
    free(e);
}

// ---- steps --------------------------------------------------------------------------------
static void run_pass(eng_engine *e, const eng_batch *b, float *logits, int32_t *next) {
#ifdef KVF_HAVE_CUDA
    if (e->cuda) {
        float ms = 0;
        eng_cuda_forward(e->cuda, b, e->router_bias, logits, next, e->route_idx, e->route_w, &ms);
        e->last_forward_ns = (int64_t)(ms * 1e6);
        e->route_ntok = b->ntok;
        return;
    }
#endif
    int64_t t0 = kvf_wall_ns();
    eng_cpu_forward(e, b, logits, next);
    e->last_forward_ns = kvf_wall_ns() - t0;
}

static void table_copy(eng_engine *e, uint32_t i, const eng_seq *s) {
    for (uint32_t j = 0; j < s->nblocks; j++)
        e->b_table[(size_t)i * e->max_blocks + j] = (int32_t)s->table[j];
}

static kvf_status check_tokens(const eng_engine *e, const int32_t *t, uint32_t n, kvf_err *err) {
    for (uint32_t i = 0; i < n; i++)
        if (t[i] < 0 || (uint32_t)t[i] >= e->m.vocab)
            return kvf_fail(err, KVF_EINVAL, "token %u: id %d outside the vocabulary (%u)", i, t[i],
                            e->m.vocab);
    return KVF_OK;
}

kvf_status eng_prefill(eng_engine *e, eng_seq *s, const int32_t *tokens, uint32_t n, float *logits,
                       int32_t *next, kvf_err *err) {
    if (n == 0 || n > e->o.max_step_tokens)
        return kvf_fail(err, KVF_EINVAL,
                        "prefill of %u tokens: must be 1..max_step_tokens "
                        "(%u)",
                        n, e->o.max_step_tokens);
    if ((uint64_t)s->len + n > e->o.max_context)
        return kvf_fail(err, KVF_EINVAL, "prefill: %u + %u tokens exceed max_context (%u)", s->len,
                        n, e->o.max_context);
    kvf_status st = check_tokens(e, tokens, n, err);
    if (st) return st;
    if (!eng_seq_reserve(e, s, n))
        return kvf_fail(err, KVF_ENOMEM, "KV cache full: %u more blocks needed, %u available",
                        eng_kv_blocks_needed(e, s, n), eng_kv_blocks_available(e));
    for (uint32_t i = 0; i < n; i++) {
        e->b_tokens[i] = tokens[i];
        e->b_pos[i] = (int32_t)(s->len + i);
    }
    e->b_start[0] = 0, e->b_new[0] = n, e->b_ctx[0] = s->len;
    table_copy(e, 0, s);
    eng_batch b = {1,        n,        e->b_tokens, e->b_pos,     e->b_start,
                   e->b_new, e->b_ctx, e->b_table,  e->max_blocks};
    run_pass(e, &b, logits, next);
    eng_seq_commit(e, s, tokens, n);
    return KVF_OK;
}

kvf_status eng_decode(eng_engine *e, eng_seq *const *seqs, const int32_t *tokens, uint32_t n,
                      float *logits, int32_t *next, kvf_err *err) {
    if (n == 0 || n > e->o.max_seqs || n > e->o.max_step_tokens)
        return kvf_fail(err, KVF_EINVAL, "decode batch of %u: must be 1..max_seqs (%u)", n,
                        e->o.max_seqs);
    kvf_status st = check_tokens(e, tokens, n, err);
    if (st) return st;
    uint32_t need = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (seqs[i]->len + 1 > e->o.max_context)
            return kvf_fail(err, KVF_EINVAL, "decode: sequence %u is at max_context (%u)", i,
                            e->o.max_context);
        need += eng_kv_blocks_needed(e, seqs[i], 1);
        for (uint32_t j = 0; j < i; j++)
            KVF_ASSERT(seqs[j] != seqs[i]);
    }
    if (need > eng_kv_blocks_available(e))
        return kvf_fail(err, KVF_ENOMEM, "KV cache full: %u more blocks needed, %u available", need,
                        eng_kv_blocks_available(e));
    for (uint32_t i = 0; i < n; i++) {
        bool ok = eng_seq_reserve(e, seqs[i], 1);
        KVF_ASSERT(ok);
        e->b_tokens[i] = tokens[i];
        e->b_pos[i] = (int32_t)seqs[i]->len;
        e->b_start[i] = i, e->b_new[i] = 1, e->b_ctx[i] = seqs[i]->len;
        table_copy(e, i, seqs[i]);
    }
    eng_batch b = {n,        n,        e->b_tokens, e->b_pos,     e->b_start,
                   e->b_new, e->b_ctx, e->b_table,  e->max_blocks};
    run_pass(e, &b, logits, next);
    for (uint32_t i = 0; i < n; i++)
        eng_seq_commit(e, seqs[i], &tokens[i], 1);
    return KVF_OK;
}
