// models/mdl_roofline.c -- the work of a batch step (FLOPs and HBM bytes per work group) and
// the analytic roofline step-time model built on it, plus KV capacity of an instance.
//
// Work groups are bounded separately, because one step can be compute-bound in its GEMMs and
// memory-bound in its attention at the same time (a large decode batch over long contexts):
//
//   dense   attention projections, dense FFNs, routers, output projection (and the vision
//           encoder in the vision phase); weights read once per step
//   expert  routed + shared experts of the MoE layers; the weights of the experts the batch
//           touches are read; multiplied by the EP skew (the hottest GPU sets the pace)
//   attn    QK^T and PV over the KV cache, full-attention and sliding-window layers apart
//
// step = sum over groups of max(compute time, memory time) + collectives + fixed overheads.
// Collectives are not overlapped with compute (a conservative choice: engines that overlap
// micro-batches hide part of them).
#include "mdl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mdl_efficiency_default(mdl_efficiency *e) {
    // compute 0.6: cuBLAS reaches ~70 % of dense BF16 peak on large GEMMs (H100: ~700 of 989
    //   TFLOP/s); whole prefill steps with norms, RoPE and attention kernels land near 50-60 %.
    // memory 0.8: GEMV and paged-attention kernels stream at ~80-90 % of HBM peak.
    // comm 0.7: NCCL bus bandwidth on NVLink for MB-sized all-reduces is ~70 % of peak.
    // step 500 us: scheduler, input preparation and sampling of a continuous-batching server
    //   with CUDA graphs take 0.3-1 ms per step.
    // layer 10 us: launch gaps between a block's kernels that CUDA graphs do not remove.
    // collective 8 us: a small all-reduce on NVLink costs 5-20 us.
    // attention 0: FlashAttention-class kernels on Hopper reach GEMM-like fractions of peak,
    //   so attention shares the compute factor unless a fit says otherwise (CPU engines'
    //   attention loops run far below their BLAS GEMMs).
    // comm_overlap 0: collectives add to the step; engines that overlap two micro-batches
    //   (DeepSeek's EP serving) hide most of them, a scenario sets that explicitly.
    e->compute = 0.6;
    e->memory = 0.8;
    e->comm = 0.7;
    e->step_overhead_ns = 500e3;
    e->layer_overhead_ns = 10e3;
    e->comm_latency_ns = 8e3;
    e->attention = 0;
    e->attention_memory = 0;
    e->comm_overlap = 0;
    // in_system_decode 1: the kernel tables' unit measurements as they stand; a fit of
    //   in-system kernel times (models/fits/) sets it for the deployments it was fitted for.
    e->in_system_decode = 1;
    // token_overhead_ns 0: the same fit measures the small kernels in the system.
    e->token_overhead_ns = 0;
}

void mdl_parallel_default(mdl_parallel *p) {
    p->gpus = 1;
    p->tp = 1;
    p->ep = 1;
    p->ep_skew = 1.0;
    p->route_nodes = 0;
    p->two_batch = false;
    p->comm_sms = 0;
    p->single_batch = false;
    p->routing = MDL_ROUTE_BALANCED;
}

// Normalised copy: gpus >= 1, 1 <= tp, ep <= gpus, skew >= 1.
static mdl_parallel par_norm(const mdl_parallel *in) {
    mdl_parallel p;
    mdl_parallel_default(&p);
    if (!in) return p;
    p.gpus = in->gpus ? in->gpus : 1;
    p.tp = in->tp ? KVF_MIN(in->tp, p.gpus) : 1;
    p.ep = in->ep ? KVF_MIN(in->ep, p.gpus) : 1;
    p.ep_skew = in->ep_skew > 1.0 ? in->ep_skew : 1.0;
    p.route_nodes = in->route_nodes;
    p.two_batch = in->two_batch;
    p.comm_sms = in->comm_sms;
    p.single_batch = in->single_batch;
    p.routing = in->routing;
    return p;
}

static mdl_efficiency eff_or_default(const mdl_efficiency *in) {
    mdl_efficiency e;
    if (in)
        e = *in;
    else
        mdl_efficiency_default(&e);
    return e;
}

// Sum over key counts min(p, w) for p = c+1 .. c+n: the (query, key) pairs of a chunk of n new
// tokens after c cached ones, causal inside the chunk, each query seeing at most w keys
// (w = 0: no window).
static double pairs(double n, double c, double w) {
    if (n <= 0) return 0;
    double lo = c + 1, hi = c + n;
    if (w <= 0 || hi <= w) return n * c + n * (n + 1) / 2;
    if (lo >= w) return n * w;
    // p from lo..w grows, then (hi - w) queries see w keys
    return (w * (w + 1) - c * (c + 1)) / 2 + (hi - w) * w;
}

uint32_t mdl_model_sparse_ratios(const mdl_model *m, uint32_t ratios[2]) {
    KVF_ASSERT(m);
    uint32_t n = 0;
    ratios[0] = ratios[1] = 0;
    if (!mdl_attn_compressed(m->attention)) return 0;
    for (uint32_t c = 0; c < m->nlclass; c++) {
        const mdl_lclass *k = &m->lclass[c];
        if (k->kind == MDL_LK_SWA || k->kind == MDL_LK_HCA) continue;
        if ((n > 0 && ratios[0] == k->ratio) || (n > 1 && ratios[1] == k->ratio)) continue;
        KVF_ASSERT(n < 2);   // the loader refuses more
        ratios[n++] = k->ratio;
    }
    return n;
}

// csa/hca: the ratio of the pool-capped indexers (the loader's pattern gives them one: the
// candidate source's), 0 when none is capped.
static uint32_t pool_ratio(const mdl_model *m) {
    for (uint32_t c = 0; c < m->nlclass; c++)
        if (m->lclass[c].pool_capped) return m->lclass[c].ratio;
    return 0;
}

static double pool_entries(const mdl_model *m) {
    return (double)m->candidate_blocks * m->candidate_block_tokens;
}

void mdl_model_caps(const mdl_model *m, uint32_t caps[MDL_CAPS]) {
    KVF_ASSERT(m && caps);
    for (int j = 0; j < MDL_CAPS; j++)
        caps[j] = 0;
    caps[MDL_CAP_WINDOW] = m->window;
    if (m->attention == MDL_ATTN_DSA) caps[MDL_CAP_TOPK] = m->index_topk;
    if (mdl_attn_compressed(m->attention)) {
        uint32_t rr[2];
        uint32_t n = mdl_model_sparse_ratios(m, rr);
        if (n > 0) caps[MDL_CAP_TOPK] = rr[0] * m->index_topk;
        if (n > 1) caps[MDL_CAP_TOPK2] = rr[1] * m->index_topk;
        uint32_t pr = pool_ratio(m);
        if (pr) caps[MDL_CAP_POOL] = (uint32_t)KVF_MIN(pr * pool_entries(m), 4294967295.0);
    }
}

void mdl_decode_sum_add(mdl_decode_sum *d, const uint32_t caps[MDL_CAPS], double ctx) {
    d->n++;
    d->sum_ctx += ctx;
    for (int j = 0; j < MDL_CAPS; j++)
        if (caps[j]) d->sum_min[j] += KVF_MIN(ctx + 1, (double)caps[j]);
}

uint32_t mdl_batch_size(const mdl_batch *b) {
    return b->n + (b->dsum && b->phase != MDL_VISION ? b->dsum->n : 0);
}

// MLA attention FLOPs per (query, key) pair and layer for a chunk of n tokens over c cached:
// the absorbed form, or the expanded form plus up-projecting the cached latents, whichever is
// cheaper. *fixed gets the per-layer extra of the expanded form.
static double mla_fpp(const mdl_model *m, double pf, double c, double *fixed) {
    double heads = m->heads, hd = m->head_dim;
    // Absorbed form: scores over the latent (kv_lora + rope) and values in the latent.
    double absorbed = 2.0 * heads * (m->kv_lora_rank + m->rope_dim) + 2.0 * heads * m->kv_lora_rank;
    // Expanded form: per-head q.k over (head_dim + rope) and p.v over head_dim, after
    // up-projecting the c cached latents to keys and values.
    double expanded = 2.0 * heads * (hd + m->rope_dim) + 2.0 * heads * hd;
    double up = 2.0 * c * m->kv_lora_rank * heads * 2.0 * hd;
    *fixed = 0;
    if (pf * absorbed <= pf * expanded + up) return absorbed;
    *fixed = up;
    return expanded;
}

// One-token sequences over c >= 1 cached tokens are summed before the attention terms are
// formed, so a batch listed per sequence and the same batch given as sums (mdl_decode_sum)
// cost the same to the last bit. For them pairs(1, c, w) = min(c + 1, w) and MLA always takes
// the absorbed form (checked: its condition is weakest at c = 1).
// DSA always runs in the absorbed (MQA) form: the selected keys differ per query, so there is
// no shared set of latents to up-project.
static bool one_token_summable(const mdl_model *m, double n, double c) {
    if (n != 1 || c < 1) return false;
    if (m->attention != MDL_ATTN_MLA) return true;
    double fixed;
    mla_fpp(m, 2, 1, &fixed);
    return fixed == 0;
}

// ---- csa / hca attention ---------------------------------------------------------------
// Per layer class (mdl_lclass), for a chunk of n' new tokens after c' cached (bounded decoder
// layers: the last min(n, R) tokens of the chunk, the rest counted as context):
//   window     pairs(n', c', W) at 4 heads head_dim FLOPs; reads min(c' + n', W) entries once,
//              writes n'
//   compressed a query at position p sees p / r entries (continuous; the loader's exact
//              floor matters for memory only): dense (hca) all of them, sparse the top-k, so
//              pairs(n', c', 0) / r or pairs(n', c', r topk) / r; reads the entries once per
//              sequence (sparse: at most n' topk of them); owners write n' / r entries
//   indexer    csa owners and reindex layers score every visible entry (or the candidate
//              pool's) at 2 index_heads index_head_dim + 2 index_heads FLOPs, reading the
//              index keys once
// One-token sequences are summed first (mdl_decode_sum), so listed and summed decode batches
// cost the same to the bit: min(c + 1, r cap) / r is a cap of the sums.

typedef struct cwork {
    double fpp, ifpp, topk, pool;
    uint32_t rr[2], nr;
} cwork;

static void comp_chunk(const mdl_model *m, const cwork *cw, const mdl_lclass *k, double n, double c,
                       mdl_work *w) {
    double L = k->count, W = m->window, r = k->ratio;
    if (k->bounded && m->decoder_replay_tokens && n > m->decoder_replay_tokens) {
        c += n - m->decoder_replay_tokens;
        n = m->decoder_replay_tokens;
    }
    w->flops[MDL_WG_ATTN_WINDOW] += L * pairs(n, c, W) * cw->fpp;
    w->bytes[MDL_WG_ATTN_WINDOW] += L * m->swa_entry_bytes * (KVF_MIN(c + n, W) + n);
    if (k->kind == MDL_LK_SWA) return;
    bool dense = k->kind == MDL_LK_HCA;
    double pc = dense ? pairs(n, c, 0) / r : pairs(n, c, r * cw->topk) / r;
    double vis = (c + n) / r, rd = dense ? vis : KVF_MIN(vis, n * cw->topk);
    w->flops[MDL_WG_ATTN_FULL] += L * pc * cw->fpp;
    w->bytes[MDL_WG_ATTN_FULL] += L * m->kv_entry_bytes * rd;
    if (k->kind == MDL_LK_CSA || k->kind == MDL_LK_HCA)
        w->bytes[MDL_WG_ATTN_FULL] += L * m->kv_entry_bytes * n / r;
    if (k->kind == MDL_LK_CSA) w->bytes[MDL_WG_ATTN_INDEX] += L * m->index_entry_bytes * n / r;
    if (k->kind != MDL_LK_CSA && k->kind != MDL_LK_REINDEX) return;
    double ps = k->pool_capped ? pairs(n, c, r * cw->pool) / r : pairs(n, c, 0) / r;
    w->flops[MDL_WG_ATTN_INDEX] += L * ps * cw->ifpp;
    w->bytes[MDL_WG_ATTN_INDEX] +=
        L * m->index_entry_bytes * (k->pool_capped ? KVF_MIN(vis, cw->pool) : vis);
}

// The same for the summed one-token sequences (n' = 1 on every layer).
static void comp_sums(const mdl_model *m, const cwork *cw, const mdl_lclass *k,
                      const mdl_decode_sum *d, mdl_work *w) {
    double L = k->count, r = k->ratio, N = d->n, all = d->sum_ctx + N;
    double pw = m->window ? d->sum_min[MDL_CAP_WINDOW] : all;
    w->flops[MDL_WG_ATTN_WINDOW] += L * pw * cw->fpp;
    w->bytes[MDL_WG_ATTN_WINDOW] += L * m->swa_entry_bytes * (pw + N);
    if (k->kind == MDL_LK_SWA) return;
    bool dense = k->kind == MDL_LK_HCA;
    int cap = k->ratio == cw->rr[0] ? MDL_CAP_TOPK : MDL_CAP_TOPK2;
    double pc = dense ? all / r : d->sum_min[cap] / r;
    w->flops[MDL_WG_ATTN_FULL] += L * pc * cw->fpp;
    w->bytes[MDL_WG_ATTN_FULL] += L * m->kv_entry_bytes * pc;
    if (k->kind == MDL_LK_CSA || k->kind == MDL_LK_HCA)
        w->bytes[MDL_WG_ATTN_FULL] += L * m->kv_entry_bytes * N / r;
    if (k->kind == MDL_LK_CSA) w->bytes[MDL_WG_ATTN_INDEX] += L * m->index_entry_bytes * N / r;
    if (k->kind != MDL_LK_CSA && k->kind != MDL_LK_REINDEX) return;
    double ps = k->pool_capped ? d->sum_min[MDL_CAP_POOL] / r : all / r;
    w->flops[MDL_WG_ATTN_INDEX] += L * ps * cw->ifpp;
    w->bytes[MDL_WG_ATTN_INDEX] += L * m->index_entry_bytes * ps;
}

static void compressed_attn_work(const mdl_model *m, const mdl_batch *b, mdl_work *w) {
    cwork cw = {.fpp = 4.0 * m->heads * m->head_dim,
                .ifpp = 2.0 * m->index_heads * m->index_head_dim + 2.0 * m->index_heads,
                .topk = m->index_topk,
                .pool = pool_entries(m)};
    cw.nr = mdl_model_sparse_ratios(m, cw.rr);
    uint32_t caps[MDL_CAPS];
    mdl_model_caps(m, caps);
    mdl_decode_sum one = {0};
    if (b->dsum) one = *b->dsum;
    for (uint32_t i = 0; i < b->n; i++) {
        double n = b->seqs[i].new_tokens, c = b->seqs[i].cached_tokens;
        if (n <= 0) continue;
        if (n == 1 && c >= 1) {
            mdl_decode_sum_add(&one, caps, c);
            continue;
        }
        for (uint32_t k = 0; k < m->nlclass; k++)
            comp_chunk(m, &cw, &m->lclass[k], n, c, w);
    }
    if (one.n)
        for (uint32_t k = 0; k < m->nlclass; k++)
            comp_sums(m, &cw, &m->lclass[k], &one, w);
}

// Dense and expert groups of a csa/hca model: T tokens through the layers before the bounded
// decoder, Tb through the bounded ones (each chunk's last R tokens); Engram lookups are
// memory traffic, its tables never count as weights read (a token reads its rows only);
// mHC widens the residual stream hc_mult times (4 (hc - 1) more hidden-sized reads and
// writes per block).
static void compressed_work(const mdl_model *m, double T, double Tb, double rows, mdl_work *w) {
    double h = m->hidden, wbpp = m->weight_bytes_per_param, head = m->embedding_params;
    double ebpp = m->expert_weight_bytes_per_param > 0 ? m->expert_weight_bytes_per_param : wbpp;
    double per_tok_experts = (double)m->experts_active + m->shared_experts;
    double block_dense =
        m->active_params - head - m->moe_layers * per_tok_experts * m->expert_params;
    double bd = m->bounded_dense_params, Lb = m->layers - m->replay_start_layer;
    w->flops[MDL_WG_DENSE] = 2.0 * (T * (block_dense - bd) + Tb * bd) + 2.0 * rows * head;
    double engram_b =
        m->engram_params * (m->engram_bytes_per_param > 0 ? m->engram_bytes_per_param : wbpp);
    double wd = m->dense_weight_bytes - engram_b - m->vision_params * wbpp;
    if (!m->tied_embeddings) wd -= m->embedding_params * wbpp;
    w->weight_bytes[MDL_WG_DENSE] = wd;
    double per_block = 12.0 + (m->hc_mult > 1 ? 4.0 * (m->hc_mult - 1) : 0);
    double act = (T * (m->layers - Lb) + Tb * Lb) * per_block * h * 2.0 + T * h * wbpp +
                 T * m->engram_bytes_per_token;
    w->bytes[MDL_WG_DENSE] = wd + act;
    if (!m->moe_layers) return;
    double E = m->experts, k = m->experts_active, mb = m->bounded_moe_layers;
    double touched = E * (1.0 - pow(1.0 - k / E, T)), tb = E * (1.0 - pow(1.0 - k / E, Tb));
    w->experts_touched = touched;
    w->flops[MDL_WG_EXPERT] =
        2.0 * (T * (m->moe_layers - mb) + Tb * mb) * per_tok_experts * m->expert_params;
    double we = ((m->moe_layers - mb) * touched + mb * tb + m->moe_layers * m->shared_experts) *
                m->expert_params * ebpp;
    w->weight_bytes[MDL_WG_EXPERT] = we;
    w->bytes[MDL_WG_EXPERT] = we;
}

// The per-layer figures attn_sums forms its terms from (the model's alone).
typedef struct attn_k {
    double fl, wl, kvl;   // full and window layers; KV bytes per token and layer
    double fpp;           // gqa/mla: FLOPs per (query, key) pair and layer (mla: absorbed)
    double ifpp, dfpp;    // dsa: indexer and selected-key FLOPs per pair and layer
    double ikl, lkl;      // dsa: index-key and latent bytes per token and layer
    bool dsa;
} attn_k;

static attn_k attn_consts(const mdl_model *m) {
    attn_k k = {.wl = m->window ? m->window_layers : 0, .kvl = m->kv_bytes_per_token_layer};
    k.fl = m->layers - k.wl;
    k.dsa = m->attention == MDL_ATTN_DSA;
    if (k.dsa) {
        k.ifpp = 2.0 * m->index_heads * m->index_head_dim + 2.0 * m->index_heads;
        k.dfpp =
            2.0 * m->heads * (m->kv_lora_rank + m->rope_dim) + 2.0 * m->heads * m->kv_lora_rank;
        k.ikl = m->index_bytes_per_token_layer;
        k.lkl = k.kvl - k.ikl;
    } else {
        double fixed;
        k.fpp =
            m->attention == MDL_ATTN_MLA ? mla_fpp(m, 2, 1, &fixed) : 4.0 * m->heads * m->head_dim;
    }
    return k;
}

// The attention groups' work of one-token sequences given as sums (gqa/mla/dsa), added to w;
// k from attn_consts.
static void attn_sums(const attn_k *k, const mdl_model *m, const mdl_decode_sum *one, mdl_work *w) {
    if (!one->n) return;
    if (k->dsa) {
        // indexer: c + 1 keys scored; attention: min(c + 1, topk) keys; one token written
        double pf = one->sum_ctx + one->n, pk = one->sum_min[MDL_CAP_TOPK];
        w->flops[MDL_WG_ATTN_INDEX] += k->fl * pf * k->ifpp;
        w->bytes[MDL_WG_ATTN_INDEX] += k->fl * k->ikl * (pf + one->n);
        w->flops[MDL_WG_ATTN_FULL] += k->fl * pk * k->dfpp;
        w->bytes[MDL_WG_ATTN_FULL] += k->fl * k->lkl * (pk + one->n);
        return;
    }
    // pairs(1, c, 0) = c + 1 keys read; window layers min(c + 1, window); one token written
    double pf = one->sum_ctx + one->n;
    double pw = m->window ? one->sum_min[MDL_CAP_WINDOW] : pf;
    w->flops[MDL_WG_ATTN_FULL] += k->fl * (pf * k->fpp);
    w->flops[MDL_WG_ATTN_WINDOW] += k->wl * (pw * k->fpp);
    w->bytes[MDL_WG_ATTN_FULL] += k->fl * k->kvl * (pf + one->n);
    w->bytes[MDL_WG_ATTN_WINDOW] += k->wl * k->kvl * (pw + one->n);
}

// Attention groups of a gqa/mla/dsa model (full and window layers, DSA's indexer); k: the
// model's attn_consts where the caller keeps them (a stepper), NULL to form them here.
static void attn_work(const mdl_model *m, const attn_k *k, const mdl_batch *b, mdl_work *w) {
    const mdl_decode_sum *ds = b->dsum;
    // the model's per-layer figures (DSA: the indexer's FP8 dot products and ReLU-weighted sum
    // over heads per pair, attention in the absorbed form over the selected keys, index keys
    // and latents read apart)
    attn_k own;
    if (!k) {
        own = attn_consts(m);
        k = &own;
    }
    double fl = k->fl, wl = k->wl, kvl = k->kvl;
    uint32_t caps[MDL_CAPS];
    bool have_caps = false;     // formed for the first one-token sequence (a prefill has none)
    mdl_decode_sum one = {0};   // the batch's one-token sequences, summed
    if (ds) one = *ds;
    for (uint32_t i = 0; i < b->n; i++) {
        double n = b->seqs[i].new_tokens, c = b->seqs[i].cached_tokens;
        if (n <= 0) continue;
        if (one_token_summable(m, n, c)) {
            if (!have_caps) mdl_model_caps(m, caps);
            have_caps = true;
            mdl_decode_sum_add(&one, caps, c);
            continue;
        }
        double pf = pairs(n, c, 0), pw = pairs(n, c, m->window);
        if (k->dsa) {
            // The indexer scores every (query, key) pair; attention sees the top-k of each.
            double pk = pairs(n, c, m->index_topk);
            w->flops[MDL_WG_ATTN_INDEX] += fl * pf * k->ifpp;
            w->bytes[MDL_WG_ATTN_INDEX] += fl * k->ikl * (c + n + n);
            w->flops[MDL_WG_ATTN_FULL] += fl * pk * k->dfpp;
            w->bytes[MDL_WG_ATTN_FULL] += fl * k->lkl * (KVF_MIN(c + n, (double)m->index_topk) + n);
            continue;
        }
        double fpp = k->fpp, fixed = 0;   // FLOPs per (query, key) pair and layer; per-layer extra
        if (m->attention == MDL_ATTN_MLA) fpp = mla_fpp(m, pf, c, &fixed);
        w->flops[MDL_WG_ATTN_FULL] += fl * (pf * fpp + fixed);
        w->flops[MDL_WG_ATTN_WINDOW] += wl * (pw * fpp + fixed);
        // KV read once per step per sequence and layer (the chunk's own keys included), and
        // the new tokens' KV written.
        double rd_full = c + n, rd_win = m->window ? KVF_MIN(c + n, (double)m->window) : c + n;
        w->bytes[MDL_WG_ATTN_FULL] += fl * kvl * (rd_full + n);
        w->bytes[MDL_WG_ATTN_WINDOW] += wl * kvl * (rd_win + n);
    }
    attn_sums(k, m, &one, w);
}

// mdl_batch_work_detail; ak: the model's attn_consts, or NULL (attn_work).
static void batch_work(const mdl_model *m, const attn_k *ak, const mdl_batch *b, mdl_work *w) {
    KVF_ASSERT(m && b && w && (b->n == 0 || b->seqs));
    memset(w, 0, sizeof *w);
    w->decode = b->phase == MDL_DECODE;
    double act_elem = 2.0;   // the residual stream and its collectives move in bf16
    if (b->phase == MDL_VISION) {
        // The vision encoder as 2 FLOPs per parameter per image token; its attention over the
        // tokens of one image (a few hundred) is small beside the GEMMs and is left out.
        double tok = (double)b->images * m->tokens_per_image;
        if (tok <= 0 || m->vision_params <= 0) return;
        w->tokens = tok;
        w->flops[MDL_WG_DENSE] = 2.0 * m->vision_params * tok;
        w->weight_bytes[MDL_WG_DENSE] = m->vision_params * m->weight_bytes_per_param;
        w->bytes[MDL_WG_DENSE] = w->weight_bytes[MDL_WG_DENSE];
        return;
    }
    const mdl_decode_sum *ds = b->dsum;
    double T = 0, rows = 0, Tb = 0;   // Tb: tokens through the bounded decoder layers
    double R = m->decoder_replay_tokens;
    for (uint32_t i = 0; i < b->n; i++) {
        double n = b->seqs[i].new_tokens;
        if (n <= 0) continue;
        T += n;
        Tb += R > 0 ? KVF_MIN(n, R) : n;
        rows += b->phase == MDL_DECODE ? n : 1;   // prefill: logits of the last token only
    }
    if (ds && ds->n) {
        T += ds->n;
        Tb += ds->n;
        rows += ds->n;
    }
    if (T <= 0) return;
    w->tokens = T;
    w->logit_rows = rows;
    double h = m->hidden, wbpp = m->weight_bytes_per_param;
    double ebpp = m->expert_weight_bytes_per_param > 0 ? m->expert_weight_bytes_per_param : wbpp;
    double per_tok_experts = (double)m->experts_active + m->shared_experts;
    double head = m->embedding_params;
    // Non-expert parameters a token passes through inside the blocks.
    double block_dense =
        m->active_params - head - m->moe_layers * per_tok_experts * m->expert_params;

    if (mdl_attn_compressed(m->attention)) {
        compressed_work(m, T, Tb, rows, w);
        compressed_attn_work(m, b, w);
        return;
    }

    // dense group
    w->flops[MDL_WG_DENSE] = 2.0 * T * block_dense + 2.0 * rows * head;
    double wd = m->dense_weight_bytes - m->vision_params * wbpp;
    if (!m->tied_embeddings) wd -= m->embedding_params * wbpp;   // input table: rows only
    w->weight_bytes[MDL_WG_DENSE] = wd;
    // ~12 hidden-sized reads/writes per token and block (norms, projections, residual adds)
    double act = T * m->layers * 12.0 * h * act_elem + T * h * wbpp;
    w->bytes[MDL_WG_DENSE] = wd + act;

    // expert group
    if (m->moe_layers) {
        double E = m->experts, k = m->experts_active;
        // Expected distinct experts hit by T tokens each picking k of E (uniform routing).
        double touched = E * (1.0 - pow(1.0 - k / E, T));
        w->experts_touched = touched;
        w->flops[MDL_WG_EXPERT] = 2.0 * T * m->moe_layers * per_tok_experts * m->expert_params;
        double we = m->moe_layers * (touched + m->shared_experts) * m->expert_params * ebpp;
        w->weight_bytes[MDL_WG_EXPERT] = we;
        w->bytes[MDL_WG_EXPERT] = we;
    }

    attn_work(m, ak, b, w);
}

void mdl_batch_work_detail(const mdl_model *m, const mdl_batch *b, mdl_work *w) {
    batch_work(m, NULL, b, w);
}

void mdl_batch_work(const mdl_model *m, const mdl_batch *b, double *flops, double *bytes) {
    mdl_work w;
    mdl_batch_work_detail(m, b, &w);
    double f = 0, y = 0;
    for (int g = 0; g < MDL_WG_COUNT; g++) {
        f += w.flops[g];
        y += w.bytes[g];
    }
    if (flops) *flops = f;
    if (bytes) *bytes = y;
}

double mdl_prompt_flops(const mdl_model *m, uint32_t new_tokens, uint32_t cached_tokens) {
    double n = new_tokens, c = cached_tokens;
    if (n <= 1 || mdl_attn_compressed(m->attention) || m->attention == MDL_ATTN_DSA) {
        mdl_seq s = {new_tokens, cached_tokens};
        mdl_batch b = {.phase = MDL_PREFILL, .seqs = &s, .n = 1};
        double f;
        mdl_batch_work(m, &b, &f, NULL);
        return f;
    }
    // mdl_batch_work_detail's FLOPs for this batch (T = n tokens, one logit row), summed in
    // group order as mdl_batch_work sums them; a group without work adds +0, which leaves a
    // sum begun at +0 as it was, so it is left out
    double T = n, rows = 1;
    double per_tok_experts = (double)m->experts_active + m->shared_experts;
    double head = m->embedding_params;
    double block_dense =
        m->active_params - head - m->moe_layers * per_tok_experts * m->expert_params;
    double f = 0;
    f += 2.0 * T * block_dense + 2.0 * rows * head;
    if (m->moe_layers) f += 2.0 * T * m->moe_layers * per_tok_experts * m->expert_params;
    // attn_work for a sequence that is not one token (n >= 2)
    attn_k k = attn_consts(m);
    double pf = pairs(n, c, 0), pw = pairs(n, c, m->window);
    double fpp = k.fpp, fixed = 0;
    if (m->attention == MDL_ATTN_MLA) fpp = mla_fpp(m, pf, c, &fixed);
    f += k.fl * (pf * fpp + fixed);
    f += k.wl * (pw * fpp + fixed);
    return f;
}

// KV replication across the TP ranks of one group: MLA keeps one latent per token that
// every rank needs; GQA replicates a KV head when there are more ranks than KV heads.
static double kv_repl(const mdl_model *m, const mdl_parallel *p) {
    if (p->tp <= 1) return 1;
    if (m->attention != MDL_ATTN_GQA) return p->tp;
    return p->tp > m->kv_heads ? (double)p->tp / m->kv_heads : 1;
}

static double expert_shards(const mdl_parallel *p) {
    return KVF_MIN((double)p->gpus, (double)KVF_MAX(p->tp, p->ep));
}

// Unidirectional per-GPU bandwidth for a collective spanning `span` GPUs.
static double link_Bps(const mdl_hardware *hw, uint32_t span) {
    double up = hw->scaleup_Bps / 2;
    if (up > 0 && span <= (hw->scaleup_domain ? hw->scaleup_domain : MDL_SCALEUP_DOMAIN_DEFAULT))
        return up;
    return hw->nic_Bps > 0 ? hw->nic_Bps : up;
}

double mdl_ep_distinct(double domains, uint32_t route_nodes, double k) {
    double S = route_nodes ? KVF_MIN(domains, (double)route_nodes) : domains;
    return S * (1 - pow(1 - 1 / S, k));
}

double mdl_ep_dispatch_elem(const mdl_model *m) {
    double ebpp = m->expert_weight_bytes_per_param > 0 ? m->expert_weight_bytes_per_param
                                                       : m->weight_bytes_per_param;
    return KVF_MIN(mdl_prec_bytes(mdl_model_gemm_precision(m, ebpp)), 2.0);
}

double mdl_ep_comm_time(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                        const mdl_efficiency *eff_in, double tok, mdl_ep_comm *o) {
    KVF_ASSERT(m && hw && o && tok >= 0);
    memset(o, 0, sizeof *o);
    mdl_parallel p = par_norm(par);
    mdl_efficiency eff = eff_or_default(eff_in);
    if (p.ep <= 1 || !m->moe_layers || tok <= 0) return 0;
    double ce = eff.comm > 0 ? eff.comm : 0.7;
    double domain = hw->scaleup_domain ? hw->scaleup_domain : MDL_SCALEUP_DOMAIN_DEFAULT,
           k = m->experts_active;
    double act_elem = 2.0;   // combine in bf16
    // dispatch in the precision the expert GEMMs take their inputs (DeepEP FP8 for W8A8)
    double disp_elem = mdl_ep_dispatch_elem(m);
    o->bytes_per_copy = m->hidden * (disp_elem + act_elem);
    o->disp_share = disp_elem / (disp_elem + act_elem);
    double fabric = hw->scaleup_Bps / 2 * ce;   // unidirectional, achieved
    double nic = (hw->nic_Bps > 0 ? hw->nic_Bps : hw->scaleup_Bps / 2) * ce;
    if (p.ep <= domain) {
        o->fabric_copies = k * (p.ep - 1) / p.ep;
    } else {
        double D = ceil(p.ep / domain);
        o->nic_copies = mdl_ep_distinct(D, p.route_nodes, k) * (D - 1) / D;
        o->fabric_copies = k * (domain - 1) / domain;
    }
    o->nic_bytes = tok * o->nic_copies * o->bytes_per_copy;
    o->fabric_bytes = tok * o->fabric_copies * o->bytes_per_copy;
    o->nic_s = nic > 0 ? o->nic_bytes / nic : 0;
    o->fabric_s = fabric > 0 ? o->fabric_bytes / fabric : 0;
    return 2 * eff.comm_latency_ns * 1e-9 + KVF_MAX(o->nic_s, o->fabric_s);
}

int mdl_dense_gemms(const mdl_model *m, double tp, mdl_gemm_shape *sh) {
    int n = 0;
    double h = m->hidden, L = m->layers, hd = m->head_dim, H = m->heads;
    if (m->attention == MDL_ATTN_MLA || m->attention == MDL_ATTN_DSA) {
        double qk = hd + m->rope_dim;
        if (m->q_lora_rank) {
            // the down projections are replicated under TP (every rank needs the latents)
            sh[n++] = (mdl_gemm_shape){m->q_lora_rank + m->kv_lora_rank + m->rope_dim, h, L,
                                       "q_a+kv_a projection", MDL_GEMM_PRE};
            sh[n++] =
                (mdl_gemm_shape){H * qk / tp, m->q_lora_rank, L, "q_b projection", MDL_GEMM_PRE};
        }
        sh[n++] = (mdl_gemm_shape){H * 2 * hd / tp, m->kv_lora_rank, L,
                                   "kv_b projection (absorbed)", MDL_GEMM_PRE};
        sh[n++] = (mdl_gemm_shape){h, H * hd / tp, L, "o projection", MDL_GEMM_POST};
    } else if (m->attention == MDL_ATTN_GQA) {
        double kv = KVF_MAX(m->kv_heads / tp, 1.0);   // KV heads replicated past tp = kv_heads
        sh[n++] = (mdl_gemm_shape){(H / tp + 2 * kv) * hd, h, L, "qkv projection", MDL_GEMM_PRE};
        sh[n++] = (mdl_gemm_shape){h, H * hd / tp, L, "o projection", MDL_GEMM_POST};
    }
    double dl = (double)m->layers - m->moe_layers;
    if (m->ffn && dl > 0) {
        sh[n++] = (mdl_gemm_shape){2.0 * m->ffn / tp, h, dl, "dense FFN gate+up", MDL_GEMM_FFN};
        sh[n++] = (mdl_gemm_shape){h, m->ffn / tp, dl, "dense FFN down", MDL_GEMM_FFN};
    }
    return n;
}

// One work group's max(compute, memory) seconds from the terms mdl_roofline_parts set in pp
// (the expert group times ep_skew); a group without work keeps 0.
static void group_term(mdl_parts *pp, const mdl_work *w, int g) {
    pp->tc[g] = pp->tm[g] = pp->group_s[g] = 0;
    if (w->flops[g] <= 0 && w->bytes[g] <= 0) return;
    double tc = w->flops[g] / (pp->G * pp->peak[g]);
    double other = w->bytes[g] - w->weight_bytes[g];
    if (g >= MDL_WG_ATTN_FULL) other *= pp->repl;   // attention groups
    double tm = (pp->launches * w->weight_bytes[g] / pp->wshard[g] + other / pp->G) /
                (g >= MDL_WG_ATTN_FULL ? pp->bw_attn : pp->bw);
    double t = KVF_MAX(tc, tm);
    if (g == MDL_WG_EXPERT) t *= pp->ep_skew;
    pp->tc[g] = tc;
    pp->tm[g] = tm;
    pp->group_s[g] = t;
}

// The shared experts' seconds in the expert group: their share of the experts a token passes.
static double shared_seconds(const mdl_model *m, const mdl_parts *pp) {
    double per_tok = (double)m->experts_active + m->shared_experts;
    return per_tok > 0 ? pp->group_s[MDL_WG_EXPERT] * m->shared_experts / per_tok : 0;
}

// The terms two micro-batches are scheduled by (mdl_tbo_stages_of), from the roofline's
// groups: the dense group split by FLOPs into the pre-attention projections and the dense
// layers' FFN, the expert group's shared experts by their share of the experts a token
// passes, and the SMs compute keeps beside prefill's all-to-alls.
static void tbo_split(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *p,
                      const mdl_work *w, mdl_parts *pp) {
    mdl_gemm_shape sh[MDL_DENSE_GEMMS];
    int ns = mdl_dense_gemms(m, p->tp, sh);
    double pre_f = 0, ffn_f = 0, df = w->flops[MDL_WG_DENSE];
    for (int i = 0; i < ns; i++) {
        double f = 2.0 * w->tokens * p->tp * sh[i].n * sh[i].k * sh[i].layers;
        if (sh[i].role == MDL_GEMM_PRE) pre_f += f;
        if (sh[i].role == MDL_GEMM_FFN) ffn_f += f;
    }
    if (df > 0) {
        double fp = KVF_MIN(pre_f / df, 1.0), ff = KVF_MIN(ffn_f / df, 1.0 - fp);
        pp->pre_s = pp->group_s[MDL_WG_DENSE] * fp;
        pp->dense_ffn_s = pp->group_s[MDL_WG_DENSE] * ff;
    }
    pp->shared_s = shared_seconds(m, pp);
    if (!w->decode && hw->sms > 0 && p->comm_sms > 0 && p->comm_sms < hw->sms)
        pp->sm_share = (double)(hw->sms - p->comm_sms) / hw->sms;
}

static double pos(double x) {
    return x > 0 ? x : 0;
}

void mdl_sbo_apply(mdl_parts *pp) {
    KVF_ASSERT(pp);
    if (pp->tbo || !(pp->ep_comm_s > 0)) return;
    double d = KVF_MIN(pp->ep_disp_s, pp->ep_comm_s), c = pp->ep_comm_s - d;
    double s = pp->shared_s, down = pos(pp->group_s[MDL_WG_EXPERT] - s) / 3;
    double exposed = d + pos(c - down - s);
    pp->sbo_hidden_s = pp->ep_comm_s - exposed;
    pp->ep_comm_s = exposed;
}

void mdl_sbo_undo(mdl_parts *pp) {
    KVF_ASSERT(pp);
    pp->ep_comm_s += pp->sbo_hidden_s;
    pp->sbo_hidden_s = 0;
}

double mdl_tbo_stages_of(const mdl_parts *pp, double total, mdl_tbo_stages *o) {
    KVF_ASSERT(pp && o);
    memset(o, 0, sizeof *o);
    double k = pp->sm_share > 0 && pp->sm_share < 1 ? 1 / pp->sm_share : 1;
    double dense = pp->group_s[MDL_WG_DENSE], exp = pp->group_s[MDL_WG_EXPERT];
    double attn = pos(total - dense - exp), r = pp->moe_share;
    o->compute_s = total * k;
    o->s = pp->shared_s * k;
    o->e = pos(exp - pp->shared_s) * k;
    o->a0 = r * pp->pre_s * k;
    o->a1 = r * pos(attn + dense - pp->pre_s - pp->dense_ffn_s) * k;
    o->d = pp->ep_disp_s;
    o->c = pos(pp->ep_comm_s - pp->ep_disp_s) + pp->tp_comm_s;
    double a = o->a0 + o->a1;
    if (pp->decode)
        o->exposed_s = pos(o->d - o->s - o->a0) + pos(o->c - o->a1);
    else
        o->exposed_s =
            (pos(o->c - a - o->s) + pos(o->d - a) + pos(o->d - o->e) + pos(o->c - o->e - o->s)) / 2;
    return o->compute_s + o->exposed_s;
}

// mdl_roofline_parts' figures of the model, hardware, parallelism and efficiency alone, not
// of the batch: a stepper forms them once for as long as its parallelism and efficiency stay.
typedef struct parts_k {
    mdl_parallel p;   // normalised (par_norm)
    mdl_efficiency eff;
    double bw, bw_attn, peak[MDL_WG_COUNT], wshard[MDL_WG_COUNT], repl;
    double up;   // the TP group's link bandwidth (tp > 1)
} parts_k;

static void parts_consts(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par_in,
                         const mdl_efficiency *eff_in, parts_k *k) {
    KVF_ASSERT(m && hw && hw->bf16_flops > 0 && hw->hbm_Bps > 0);
    mdl_parallel p = par_norm(par_in);
    mdl_efficiency eff = eff_or_default(eff_in);
    double bw = hw->hbm_Bps * eff.memory;
    double bw_attn = hw->hbm_Bps * (eff.attention_memory > 0 ? eff.attention_memory : eff.memory);
    double ebpp = m->expert_weight_bytes_per_param > 0 ? m->expert_weight_bytes_per_param
                                                       : m->weight_bytes_per_param;
    // GEMMs at the wider of the weights' and the activations' precision (W8A8 at the FP8
    // rate, W4A16 at the BF16 rate, W4A4 at the FP4 rate where the device has one)
    double peak_d =
        mdl_hw_peak(hw, mdl_model_gemm_precision(m, m->weight_bytes_per_param)) * eff.compute;
    double peak_e = mdl_hw_peak(hw, mdl_model_gemm_precision(m, ebpp)) * eff.compute;
    double attn = hw->bf16_flops * (eff.attention > 0 ? eff.attention : eff.compute);
    double index_peak = hw->fp8_flops > 0 ? hw->fp8_flops * eff.compute : attn;   // FP8 indexer
    if (mdl_attn_compressed(m->attention) && m->index_entry_bytes > 0) {
        double ib = m->index_bytes_per_elem > 0 ? m->index_bytes_per_elem : m->kv_bytes_per_elem;
        if (mdl_prec_of_bytes(ib) == MDL_PREC_FP4 && hw->fp4_flops > 0)
            index_peak = hw->fp4_flops * eff.compute;   // FP4 index keys score at the FP4 rate
    }
    double peak[MDL_WG_COUNT] = {peak_d, peak_e, attn, attn, index_peak};
    double wshard[MDL_WG_COUNT] = {p.tp, expert_shards(&p), 1, 1, 1};
    k->p = p;
    k->eff = eff;
    k->bw = bw;
    k->bw_attn = bw_attn;
    for (int g = 0; g < MDL_WG_COUNT; g++) {
        k->peak[g] = peak[g];
        k->wshard[g] = wshard[g];
    }
    k->repl = kv_repl(m, &p);
    k->up = p.tp > 1 ? link_Bps(hw, p.tp) : 0;
}

// mdl_roofline_parts on the figures of parts_consts.
static void parts_of(const mdl_model *m, const mdl_hardware *hw, const parts_k *k,
                     const mdl_work *w, mdl_parts *pp) {
    memset(pp, 0, sizeof *pp);
    if (w->tokens <= 0) return;
    const mdl_parallel *p = &k->p;
    const mdl_efficiency *eff = &k->eff;
    double G = p->gpus;
    bool text = w->logit_rows > 0;
    // two micro-batches each stream the weights they use and launch their own kernels
    pp->tbo = p->two_batch && text && w->tokens >= 2;
    double launches = pp->tbo ? 2 : 1;
    pp->G = G;
    pp->ep_skew = p->ep_skew;
    pp->repl = k->repl;
    pp->launches = launches;
    pp->bw = k->bw;
    pp->bw_attn = k->bw_attn;
    for (int g = 0; g < MDL_WG_COUNT; g++) {
        pp->peak[g] = k->peak[g];
        pp->wshard[g] = k->wshard[g];
        group_term(pp, w, g);
    }
    // Collectives (not in the vision phase: the encoder runs on one GPU in practice).
    double act_elem = 2.0, ce = eff->comm > 0 ? eff->comm : 0.7;   // bf16 residual stream
    if (text && p->tp > 1) {
        double up = k->up;
        double tok_group = w->tokens / (G / p->tp);   // data-parallel replicas split the batch
        double msg = tok_group * m->hidden * act_elem;
        double per = 2.0 * (p->tp - 1) / p->tp * msg;   // ring all-reduce, bytes per rank
        double n_ar = m->layers + (m->layers - (p->ep > 1 ? m->moe_layers : 0));
        if (up > 0) pp->tp_comm_s = n_ar * (eff->comm_latency_ns * 1e-9 + per / (up * ce));
        pp->comm_bytes += n_ar * per * G;
        pp->allreduces = n_ar;
    }
    if (text && p->ep > 1 && m->moe_layers) {
        double t1 = mdl_ep_comm_time(m, hw, p, eff, w->tokens / G, &pp->ep);
        pp->ep_comm_s = m->moe_layers * t1 * p->ep_skew;
        // dispatch: one collective latency and its share of the bytes
        pp->ep_disp_s = m->moe_layers * p->ep_skew *
                        (eff->comm_latency_ns * 1e-9 +
                         KVF_MAX(pp->ep.nic_s, pp->ep.fabric_s) * pp->ep.disp_share);
        pp->comm_bytes += m->moe_layers * (pp->ep.nic_bytes + pp->ep.fabric_bytes) * G;
    }
    // Collectives hidden under compute (two micro-batches, as DeepSeek's serving does): at
    // most the overlap share of them, and never more than the compute there is.
    pp->overlap = eff->comm_overlap > 0 ? KVF_MIN(eff->comm_overlap, 1.0) : 0;
    pp->decode = w->decode;
    pp->moe_share = m->layers ? (double)m->moe_layers / m->layers : 0;
    pp->sm_share = 1;
    if (pp->tbo) tbo_split(m, hw, p, w, pp);   // overlap unread: the stages say what hides
    if (p->single_batch && !pp->tbo && text) {
        pp->shared_s = shared_seconds(m, pp);
        mdl_sbo_apply(pp);
    }
    pp->fixed_s = eff->step_overhead_ns * 1e-9 +
                  (text ? launches * m->layers * eff->layer_overhead_ns * 1e-9 : 0);
    pp->host_ns = eff->step_overhead_ns;
    pp->valid = true;
}

void mdl_roofline_parts(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par_in,
                        const mdl_efficiency *eff_in, const mdl_work *w, mdl_parts *pp) {
    KVF_ASSERT(m && hw && w && pp && hw->bf16_flops > 0 && hw->hbm_Bps > 0);
    if (w->tokens <= 0) {
        memset(pp, 0, sizeof *pp);
        return;
    }
    parts_k k;
    parts_consts(m, hw, par_in, eff_in, &k);
    parts_of(m, hw, &k, w, pp);
}

// mdl_parts_finish in two halves, so a memo can keep the first groups' sums: the groups
// [g0, g1) added to the running sums in a (in group order), then the step cost from them.
typedef struct parts_acc {
    double total, worst, flops, bytes;
    bool compute_bound;
} parts_acc;

static const parts_acc ACC_START = {.worst = -1};

static void acc_groups(const mdl_parts *pp, const mdl_work *w, int g0, int g1, parts_acc *a) {
    for (int g = g0; g < g1; g++) {
        if (w->flops[g] <= 0 && w->bytes[g] <= 0) continue;
        double t = pp->group_s[g];
        a->total += t;
        if (t > a->worst) {
            a->worst = t;
            a->compute_bound = pp->tc[g] >= pp->tm[g];
        }
        a->flops += w->flops[g];
        a->bytes += w->bytes[g];
    }
}

// The step from its compute and exposed communication (seconds) into *out.
static void acc_close(const mdl_parts *pp, double s, double comm_s, mdl_step_cost *out) {
    out->ns = mdl_ns(s * 1e9);
    if (out->ns < 1) out->ns = 1;
    out->comm_ns = comm_s != 0 ? mdl_ns(comm_s * 1e9) : 0;
    out->comm_bytes = pp->comm_bytes;
    out->host_ns = pp->host_ns != 0 ? mdl_ns(pp->host_ns) : 0;
}

// Two micro-batches: the schedule's stages (kept out of the common path's way).
static __attribute__((noinline)) void acc_finish_tbo(const mdl_parts *pp, const parts_acc *a,
                                                     mdl_step_cost *out) {
    mdl_tbo_stages st;
    double s = mdl_tbo_stages_of(pp, a->total, &st) + pp->fixed_s;
    acc_close(pp, s, st.exposed_s, out);
}

static void acc_finish(const mdl_parts *pp, const parts_acc *a, mdl_step_cost *out) {
    out->compute_bound = a->compute_bound;
    out->flops = a->flops;
    out->bytes = a->bytes;
    if (pp->tbo) {
        acc_finish_tbo(pp, a, out);
        return;
    }
    double comm_s = 0;
    comm_s += pp->tp_comm_s;
    comm_s += pp->ep_comm_s;
    comm_s -= KVF_MIN(comm_s * pp->overlap, a->total);
    acc_close(pp, a->total + comm_s + pp->fixed_s, comm_s, out);
}

void mdl_parts_finish(const mdl_parts *pp, const mdl_work *w, mdl_step_cost *out) {
    memset(out, 0, sizeof *out);
    if (!pp->valid) return;
    parts_acc a = ACC_START;
    acc_groups(pp, w, 0, MDL_WG_COUNT, &a);
    acc_finish(pp, &a, out);
}

void mdl_roofline_eval_work(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par_in,
                            const mdl_efficiency *eff_in, const mdl_work *w, mdl_step_cost *out) {
    mdl_parts pp;
    mdl_roofline_parts(m, hw, par_in, eff_in, w, &pp);
    mdl_parts_finish(&pp, w, out);
}

void mdl_roofline_eval(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                       const mdl_efficiency *eff, const mdl_batch *b, mdl_step_cost *out) {
    mdl_work w;
    mdl_batch_work_detail(m, b, &w);
    mdl_roofline_eval_work(m, hw, par, eff, &w, out);
}

// ---- the stepper -----------------------------------------------------------------------

// The roofline stepper keeps the terms of decode batches given only as sums: a decode step's
// GEMM, expert and collective terms depend on its sequence count alone, so a batch of a count
// seen before (the next step of a run, one token each, or a later batch of as many sequences)
// recomputes only the attention groups, with the same functions on the same inputs (the answer
// is the same to the bit as mdl_roofline_eval's, which test_models checks on every attention
// kind). One memo per count modulo RL_MEMOS (a decode pool's batches change by a few
// sequences at a time, so their counts recur).
#define RL_MEMOS 256

typedef struct rl_memo {
    bool valid;    // w and pp hold a decode batch of n sequences
    uint32_t n;    // its sequence count
    double skew;   // the ep_skew it was costed under
    mdl_work w;
    mdl_parts pp;
    parts_acc acc;                    // the GEMM and expert groups' sums (acc_groups)
    int attn[MDL_WG_COUNT], n_attn;   // attention groups with work, in group order
} rl_memo;

typedef struct rl_stepper {
    mdl_stepper base;
    attn_k ak;   // the model's attention figures (attn_consts), formed with the stepper
    // parts_consts of the model and hardware under pk_par and pk_eff, while base.par and
    // base.eff hold the same bytes (a pool sets base.par.ep_skew step by step)
    bool pk_valid;
    parts_k pk;
    mdl_parallel pk_par;
    mdl_efficiency pk_eff;
    rl_memo memo[RL_MEMOS];
} rl_stepper;

static const parts_k *rl_consts(rl_stepper *r) {
    const mdl_stepper *s = &r->base;
    if (!r->pk_valid || memcmp(&r->pk_par, &s->par, sizeof s->par) ||
        memcmp(&r->pk_eff, &s->eff, sizeof s->eff)) {
        parts_consts(&s->model, &s->hw, &s->par, &s->eff, &r->pk);
        memcpy(&r->pk_par, &s->par, sizeof s->par);
        memcpy(&r->pk_eff, &s->eff, sizeof s->eff);
        r->pk_valid = true;
    }
    return &r->pk;
}

// A decode batch the memo can answer: sums only, and an attention kind whose work splits into
// GEMM groups (by sequence count) and attention groups (by context): gqa, mla, dsa.
static bool sums_only(const mdl_stepper *s, const mdl_batch *b) {
    return b->phase == MDL_DECODE && b->n == 0 && b->dsum && b->dsum->n &&
           !mdl_attn_compressed(s->model.attention);
}

// A decode batch of sums on its memo: the GEMM and expert terms kept, the attention groups
// recomputed in place.
// Only the attention groups that had work when the memo was made are visited: their work is a
// model figure times the batch's sums, so the others stay without work (and their terms 0).
static void memo_step(const rl_stepper *r, rl_memo *mm, const mdl_decode_sum *ds,
                      mdl_step_cost *out) {
    for (int i = 0; i < mm->n_attn; i++)
        mm->w.flops[mm->attn[i]] = mm->w.bytes[mm->attn[i]] = 0;
    attn_sums(&r->ak, &r->base.model, ds, &mm->w);
    parts_acc a = mm->acc;
    for (int i = 0; i < mm->n_attn; i++) {
        group_term(&mm->pp, &mm->w, mm->attn[i]);
        acc_groups(&mm->pp, &mm->w, mm->attn[i], mm->attn[i] + 1, &a);
    }
    out->extrapolated = out->table_fallback = false;
    acc_finish(&mm->pp, &a, out);
}

// The memo of a sums-only decode batch, made (and the step costed into *out, *made set) when
// its slot holds another count or skew.
static rl_memo *memo_of(rl_stepper *r, const mdl_batch *b, mdl_step_cost *out, bool *made) {
    mdl_stepper *s = &r->base;
    uint32_t n = b->dsum->n;
    rl_memo *mm = &r->memo[n % RL_MEMOS];
    *made = false;
    if (mm->valid && mm->n == n && mm->skew == s->par.ep_skew) return mm;
    batch_work(&s->model, &r->ak, b, &mm->w);
    parts_of(&s->model, &s->hw, rl_consts(r), &mm->w, &mm->pp);
    mm->valid = mm->pp.valid;
    mm->n = n;
    mm->skew = s->par.ep_skew;
    mm->acc = ACC_START;
    acc_groups(&mm->pp, &mm->w, 0, MDL_WG_ATTN_FULL, &mm->acc);
    mm->n_attn = 0;
    for (int g = MDL_WG_ATTN_FULL; g < MDL_WG_COUNT; g++)
        if (mm->w.flops[g] > 0 || mm->w.bytes[g] > 0) mm->attn[mm->n_attn++] = g;
    mdl_parts_finish(&mm->pp, &mm->w, out);
    *made = true;
    return mm;
}

static void roofline_cost(mdl_stepper *s, const mdl_batch *b, mdl_step_cost *out) {
    rl_stepper *r = (rl_stepper *)s;
    if (!sums_only(s, b)) {
        // mdl_roofline_eval with the stepper's constant figures formed once
        mdl_work w;
        batch_work(&s->model, &r->ak, b, &w);
        mdl_parts pp;
        parts_of(&s->model, &s->hw, rl_consts(r), &w, &pp);
        mdl_parts_finish(&pp, &w, out);
        return;
    }
    bool made;
    rl_memo *mm = memo_of(r, b, out, &made);
    if (!made) memo_step(r, mm, b->dsum, out);
}

// 1 / x when x is a power of two from 1 to 2^62 (then y * (1 / x) and y / x are the same
// correctly rounded quotient), else 0.
static double pow2_recip(double x) {
    if (!(x >= 1 && x <= 0x1p62)) return 0;
    uint64_t u = (uint64_t)x;
    return (double)u == x && !(u & (u - 1)) ? 1 / x : 0;
}

// Two lanes of doubles (SSE2 on x86-64, NEON on arm64; GCC and Clang vector extensions): each
// lane takes the same IEEE operations, in the same order, as the scalar code it stands for.
typedef double v2d __attribute__((vector_size(16)));

// run_full_memory's figures for the loop below.
typedef struct lanes_k {
    double n, s0, gs, fkv, wb, repl, inv_g, wpart, bw, acc, comm0, fixed;
} lanes_k;

// Steps 1 .. m-1 of run_full_memory's loop where every step's x (its time in ns before
// rounding) is in [0.5, MDL_MAX_STEP_NS]: two steps at once, each lane the scalar operations
// in the same order, the odd last one alone; mdl_ns and its clamp to 1 ns are then
// (int64_t)(x + 0.5) (x + 0.5 floors to the integer that rounds x half away from zero, for
// 0.5 <= x < 2^52). Durations into ns; with fuse, the ends summed from e->t0 instead (ns[0],
// step 0's duration, becoming its end), steps 1 .. m-1 never decreasing (run_full_memory), so
// the longest is step 0 or m - 1 and they rise where step 1 is not below step 0. Inlined with
// fuse a constant, each caller has a loop of its own.
static inline __attribute__((always_inline)) void
run_lanes(const lanes_k *q, uint32_t m, int64_t *ns, mdl_run_ends *e, bool fuse) {
    const v2d n2 = {q->n, q->n}, fkv2 = {q->fkv, q->fkv}, wb2 = {q->wb, q->wb},
              repl2 = {q->repl, q->repl}, ig2 = {q->inv_g, q->inv_g}, wp2 = {q->wpart, q->wpart},
              bw2 = {q->bw, q->bw}, acc2 = {q->acc, q->acc}, c02 = {q->comm0, q->comm0},
              fx2 = {q->fixed, q->fixed}, g9 = {1e9, 1e9}, half = {0.5, 0.5},
              gs2 = {2 * q->gs, 2 * q->gs};
    v2d sj2 = {q->s0 + q->gs, q->s0 + 2 * q->gs};   // integers below 2^53, as summed one by one
    int64_t add = fuse ? e->add : 0, first = ns[0], end = fuse ? e->t0 + first + add : 0,
            last = first;
    if (fuse) ns[0] = end;
    uint32_t j = 1;
    for (; j + 1 < m; j += 2, sj2 += gs2) {
        v2d other = fkv2 * ((sj2 + n2) + n2) - wb2;
        other *= repl2;
        v2d total = acc2 + (wp2 + other * ig2) / bw2;
        v2d y = ((total + c02) + fx2) * g9 + half;
        int64_t a = (int64_t)y[0];
        last = (int64_t)y[1];
        if (fuse) {
            end += a + add;
            ns[j] = end;
            end += last + add;
            ns[j + 1] = end;
        } else {
            ns[j] = a;
            ns[j + 1] = last;
        }
    }
    if (j < m) {
        double sj = q->s0 + (double)j * q->gs;
        double other = q->fkv * ((sj + q->n) + q->n) - q->wb;
        other *= q->repl;
        double total = q->acc + (q->wpart + other * q->inv_g) / q->bw;
        last = (int64_t)(((total + q->comm0) + q->fixed) * 1e9 + 0.5);
        ns[j] = fuse ? (end += last + add) : last;
    }
    if (fuse) {
        e->rising = m < 2 || ns[1] - ns[0] - add >= first;
        e->hi = KVF_MAX(first, last);
    }
}

// run_plain's loop for one group of full-attention layers when the group is memory-bound at
// every step of the run, so max(tc, tm) is tm and tc's division can go, and a division by a
// power-of-two GPU count is a multiplication: the same operands, the same bits. Memory-bound
// throughout is proven, not assumed: pf is exact and affine in j, so the exact tc and tm are
// affine in j and so is tm - tc; it is positive at both ends by a margin (1e-9 of the terms'
// size) some 10^5 times the rounding a computed figure carries, hence positive between.
// With j0 = 0 the proof and the loop take in step 0 too (memo_step's arithmetic for it is the
// same, group by group, with j = 0: s0 + 0 * gs is s0), so a run on a memo made earlier needs
// no memo_step; with j0 = 1 step 0 is ns[0] already. Returns false (nothing written) when the
// proof fails.
static bool run_full_memory(const attn_k *k, const mdl_parts *pp, const mdl_decode_sum *d0,
                            const mdl_decode_sum *grow, uint32_t m, uint32_t j0, double comm0,
                            double acc, double peak, double wpart, double wb, int64_t *ns,
                            mdl_run_ends *e, bool *fused) {
    double n = d0->n, s0 = d0->sum_ctx, gs = grow->sum_ctx;
    double G = pp->G, inv_g = pow2_recip(G), repl = pp->repl, bw = pp->bw_attn;
    double scale[2];
    uint32_t ends[2] = {j0, m - 1};
    for (int x = 0; x < 2; x++) {
        double pf = (s0 + (double)ends[x] * gs) + n;
        double fg = k->fl * (pf * k->fpp), bg = k->fl * k->kvl * (pf + n);
        if (!(pf > 0 && fg > 0 && isfinite(fg) && isfinite(bg))) return false;
        double tc = fg / peak, tm = (wpart + (bg - wb) * repl / G) / bw;
        scale[x] = (fabs(wpart) + (fabs(bg) + fabs(wb)) * fabs(repl) / G) / bw + fabs(tc);
        if (!(isfinite(scale[x]) && tm - tc > 1e-9 * scale[x])) return false;
    }
    // the margin at either end covers the rounding anywhere between
    if (scale[0] > 1e3 * scale[1] || scale[1] > 1e3 * scale[0]) return false;
    // s0 + j * gs summed step by step below is exact only for integers below 2^53; total > 0
    // (so the collective's min below takes comm_s * overlap) needs acc >= 0 and tc > 0
    if (!(fabs(s0) + m * fabs(gs) < 0x1p53 && (double)(int64_t)s0 == s0 &&
          (double)(int64_t)gs == gs && acc >= 0 && peak > 0 && isfinite(pp->overlap)))
        return false;
    double fkv = k->fl * k->kvl, ov = pp->overlap, fixed = pp->fixed_s;
    // s0 + j * gs by adding gs once a step: integers below 2^53, so exact either way
    double sj = s0 + (double)j0 * gs;
    if ((comm0 == 0 || ov == 0) && isfinite(comm0) && inv_g > 0) {
        // comm_s * overlap is 0 (no collective, or none overlapped), so with total > 0 comm_s
        // stays comm0: 0 - min(0, total) = +0, comm0 - 0 = comm0
        // the step's time in ns before rounding, x(j): every operation is monotone (gs >= 0,
        // fkv, repl, inv_g >= 0, bw > 0), so x(j0) <= x(j) <= x(m - 1); where both ends are in
        // [0.5, MDL_MAX_STEP_NS], so is every step's (run_lanes)
        double xf = (acc + (wpart + (fkv * ((sj + n) + n) - wb) * repl * inv_g) / bw + comm0 +
                     fixed) *
                    1e9,
               sl = s0 + (double)(m - 1) * gs,
               xl = (acc + (wpart + (fkv * ((sl + n) + n) - wb) * repl * inv_g) / bw + comm0 +
                     fixed) *
                    1e9;
        if (gs >= 0 && fkv >= 0 && repl >= 0 && bw > 0 && xf >= 0.5 && xl <= MDL_MAX_STEP_NS) {
            const lanes_k q = {n, s0, gs, fkv, wb, repl, inv_g, wpart, bw, acc, comm0, fixed};
            if (j0 == 0)   // run_lanes' odd last step with j = 0
                ns[0] = (int64_t)(xf + 0.5);
            if (e)
                run_lanes(&q, m, ns, e, true);
            else
                run_lanes(&q, m, ns, NULL, false);
            *fused = e != NULL;
            return true;
        }
        for (uint32_t j = j0; j < m; j++, sj += gs) {
            double other = fkv * ((sj + n) + n) - wb;
            other *= repl;
            double total = acc + (wpart + other * inv_g) / bw;
            int64_t v = mdl_ns((total + comm0 + fixed) * 1e9);
            ns[j] = v < 1 ? 1 : v;
        }
        return true;
    }
    for (uint32_t j = j0; j < m; j++, sj += gs) {
        double pf = sj + n;
        double other = fkv * (pf + n) - wb;
        other *= repl;
        double tm = (wpart + (inv_g > 0 ? other * inv_g : other / G)) / bw;
        double total = acc + tm;
        double comm_s = comm0;
        comm_s -= KVF_MIN(comm_s * ov, total);
        int64_t v = mdl_ns((total + comm_s + fixed) * 1e9);
        ns[j] = v < 1 ? 1 : v;
    }
    return true;
}

// Steps 1 .. m-1 of a run on the memo of step 0, for attention without DSA's indexer (full
// and window groups): memo_step's arithmetic written out, the same operations on the same
// operands in the same order (so the same bits: test_models compares every step with
// mdl_roofline_eval), keeping only the step time a run needs. Step 0 is ns[0] already when
// the memo was made for it; otherwise it is costed here, by run_full_memory where that holds
// (a memo_step per run is most of a short run's cost), else by memo_step.
static void run_plain(rl_stepper *r, rl_memo *mm, const mdl_decode_sum *d0,
                      const mdl_decode_sum *grow, uint32_t m, bool made, int64_t *ns,
                      mdl_run_ends *e, bool *fused) {
    const attn_k *k = &r->ak;
    const mdl_parts *pp = &mm->pp;
    const mdl_work *w = &mm->w;
    bool win = r->base.model.window != 0;
    double n = d0->n, comm0 = 0;
    comm0 += pp->tp_comm_s;
    comm0 += pp->ep_comm_s;
    // group_term's factors that do not change along the run, formed as it forms them
    double peak[2], wpart[2], wb[2];
    for (int i = 0; i < mm->n_attn; i++) {
        int g = mm->attn[i];
        peak[i] = pp->G * pp->peak[g];
        wb[i] = w->weight_bytes[g];
        wpart[i] = pp->launches * w->weight_bytes[g] / pp->wshard[g];
    }
    bool full = mm->n_attn == 1 && mm->attn[0] == MDL_WG_ATTN_FULL;
    if (full && !made &&
        run_full_memory(k, pp, d0, grow, m, 0, comm0, mm->acc.total, peak[0], wpart[0], wb[0], ns,
                        e, fused))
        return;
    if (!made) {
        mdl_step_cost c;
        memo_step(r, mm, d0, &c);
        ns[0] = c.ns;
    }
    if (full && run_full_memory(k, pp, d0, grow, m, 1, comm0, mm->acc.total, peak[0], wpart[0],
                                wb[0], ns, e, fused))
        return;
    for (uint32_t j = 1; j < m; j++) {
        // attn_sums: pairs(1, c, 0) = c + 1 keys read; window layers min(c + 1, window)
        double pf = (d0->sum_ctx + (double)j * grow->sum_ctx) + n;
        double pw =
            win ? d0->sum_min[MDL_CAP_WINDOW] + (double)j * grow->sum_min[MDL_CAP_WINDOW] : pf;
        double f[2] = {0, 0}, b[2] = {0, 0};
        f[0] += k->fl * (pf * k->fpp);
        f[1] += k->wl * (pw * k->fpp);
        b[0] += k->fl * k->kvl * (pf + n);
        b[1] += k->wl * k->kvl * (pw + n);
        // group_term and acc_groups over the memo's attention groups, then acc_finish
        double total = mm->acc.total;
        for (int i = 0; i < mm->n_attn; i++) {
            int g = mm->attn[i];
            double fg = f[g - MDL_WG_ATTN_FULL], bg = b[g - MDL_WG_ATTN_FULL];
            if (fg <= 0 && bg <= 0) continue;
            double tc = fg / peak[i];
            double other = bg - wb[i];
            other *= pp->repl;
            double tm = (wpart[i] + other / pp->G) / pp->bw_attn;
            total += KVF_MAX(tc, tm);
        }
        double comm_s = comm0;
        comm_s -= KVF_MIN(comm_s * pp->overlap, total);
        int64_t v = mdl_ns((total + comm_s + pp->fixed_s) * 1e9);
        ns[j] = v < 1 ? 1 : v;
    }
}

// Step j of the run: d0 + j * grow, every figure an integer below 2^53 (exact in doubles, as
// the simulator's own sums are).
static bool roofline_cost_run(mdl_stepper *s, const mdl_decode_sum *d0, const mdl_decode_sum *grow,
                              uint32_t m, int64_t *ns, mdl_run_ends *e, bool *fused) {
    mdl_batch b = {.phase = MDL_DECODE, .dsum = d0};
    if (!m || !sums_only(s, &b)) return false;
    rl_stepper *r = (rl_stepper *)s;
    mdl_step_cost k;
    bool made;
    rl_memo *mm = memo_of(r, &b, &k, &made);   // the memo for this sequence count
    if (made) ns[0] = k.ns;
    // two micro-batches: the schedule's stages (mdl_tbo_stages_of), step by step
    bool plain = mm->valid && !r->ak.dsa && !mm->pp.tbo;
    for (int i = 0; plain && i < mm->n_attn; i++)
        plain = mm->attn[i] == MDL_WG_ATTN_FULL || mm->attn[i] == MDL_WG_ATTN_WINDOW;
    if (plain) {
        run_plain(r, mm, d0, grow, m, made, ns, e, fused);
        return true;
    }
    if (!made) memo_step(r, mm, d0, &k);
    ns[0] = k.ns;
    mdl_decode_sum ds = *d0;
    for (uint32_t j = 1; j < m; j++) {
        ds.sum_ctx = d0->sum_ctx + (double)j * grow->sum_ctx;
        for (int c = 0; c < MDL_CAPS; c++)
            ds.sum_min[c] = d0->sum_min[c] + (double)j * grow->sum_min[c];
        memo_step(r, mm, &ds, &k);
        ns[j] = k.ns;
    }
    return true;
}

static void roofline_destroy(mdl_stepper *s) {
    free(s);
}

static const mdl_stepper_vt roofline_vt = {"roofline", roofline_cost, roofline_destroy, true,
                                           roofline_cost_run};

mdl_stepper *mdl_roofline_create(const mdl_model *m, const mdl_hardware *hw,
                                 const mdl_parallel *par, const mdl_efficiency *eff) {
    rl_stepper *r = kvf_calloc(1, sizeof *r);
    mdl_stepper *s = &r->base;
    s->vt = &roofline_vt;
    s->model = *m;
    r->ak = attn_consts(m);
    s->hw = *hw;
    s->par = par_norm(par);
    if (eff)
        s->eff = *eff;
    else
        mdl_efficiency_default(&s->eff);
    return s;
}

void mdl_stepper_cost(mdl_stepper *s, const mdl_batch *b, mdl_step_cost *out) {
    memset(out, 0, sizeof *out);
    s->vt->cost(s, b, out);
    s->calls++;
    if (out->extrapolated) s->extrapolations++;
    if (out->table_fallback) s->table_fallbacks++;
}

bool mdl_stepper_cost_run(mdl_stepper *s, const mdl_decode_sum *d0, const mdl_decode_sum *grow,
                          uint32_t m, int64_t *ns) {
    bool fused = false;
    if (!s->vt->cost_run || !s->vt->cost_run(s, d0, grow, m, ns, NULL, &fused)) return false;
    s->calls += m;
    return true;
}

bool mdl_stepper_cost_run_ends(mdl_stepper *s, const mdl_decode_sum *d0, const mdl_decode_sum *grow,
                               uint32_t m, mdl_run_ends *e, int64_t *ends) {
    KVF_ASSERT(e && e->add >= 0);
    bool fused = false;
    if (!s->vt->cost_run || !s->vt->cost_run(s, d0, grow, m, ends, e, &fused)) return false;
    s->calls += m;
    if (fused) return true;
    int64_t hi = 0, end = e->t0;
    bool rising = true;
    for (uint32_t j = 0; j < m; j++) {
        int64_t t = ends[j];
        rising &= t >= hi;   // hi: the longest step so far
        hi = t > hi ? t : hi;
        end += t + e->add;
        ends[j] = end;
    }
    e->hi = hi;
    e->rising = rising;
    return true;
}

void mdl_stepper_destroy(mdl_stepper *s) {
    if (s) s->vt->destroy(s);
}

// ---- capacity --------------------------------------------------------------------------

double mdl_kv_capacity_bytes(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                             double activation_reserve_frac) {
    mdl_parallel p = par_norm(par);
    double G = p.gpus;
    double frac = activation_reserve_frac > 0 ? KVF_MIN(activation_reserve_frac, 1.0) : 0;
    double weights =
        m->dense_weight_bytes * (G / p.tp) + m->expert_weight_bytes * (G / expert_shards(&p));
    return G * hw->hbm_bytes * (1.0 - frac) - weights;
}

double mdl_kv_capacity_tokens(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                              double activation_reserve_frac) {
    double bytes = mdl_kv_capacity_bytes(m, hw, par, activation_reserve_frac);
    mdl_parallel p = par_norm(par);
    double per_tok = m->kv_bytes_per_token * kv_repl(m, &p);
    if (bytes <= 0 || per_tok <= 0) return 0;
    return floor(bytes / per_tok);
}

// ---- block speculative decoding (DSpark) -------------------------------------------------
// The draft stack is a model of its own (mdl_spec_prepare): the target's geometry with
// `layers` window-only layers and the draft MoE, its extra GEMMs (main_proj, the Markov
// bias) as aux_params; the embedding and head are the target's (aliased), so they count in
// its FLOPs but not in mdl_spec_weight_bytes.

void mdl_spec_prepare(mdl_spec *s, const mdl_model *m) {
    KVF_ASSERT(s && m && s->layers > 0 && s->layers <= MDL_LAYERS_MAX && s->block >= 2);
    mdl_model *d = &s->draft;
    *d = *m;
    snprintf(d->name, sizeof d->name, "%.50s-draft", m->name);
    d->layers = s->layers;
    d->dense_layers = 0;
    if (s->experts) d->experts = s->experts;
    if (s->experts_active) d->experts_active = KVF_MIN(s->experts_active, d->experts);
    if (mdl_attn_compressed(m->attention)) {
        // window-capped draft attention (ratio 0 on the draft layers of the target config)
        for (uint32_t l = 0; l < d->layers; l++) {
            d->layer_kind[l] = MDL_LK_SWA;
            d->layer_ratio[l] = 0;
        }
        d->pattern_layers = d->layers;
    } else if (d->window_layers > d->layers) {
        d->window_layers = d->layers;
    }
    d->encoder_layers = d->decoder_replay_tokens = 0;
    d->candidate_blocks = 0;
    d->engram_params = d->engram_bytes_per_token = 0;
    d->vision_params = 0;
    d->dspark_layers = 0;
    d->aux_params =
        (double)KVF_MAX(s->taps, 1u) * m->hidden * m->hidden + (double)s->markov_rank * m->vocab;
    mdl_model_derive(d);
}

kvf_status mdl_spec_from_model(mdl_spec *s, const mdl_model *m, kvf_err *err) {
    KVF_ASSERT(s && m);
    memset(s, 0, sizeof *s);
    if (!m->dspark_layers)
        return kvf_fail(err, KVF_EINVAL, "model %s has no DSpark draft stack (key 'dspark_layers')",
                        m->name);
    if (m->dspark_block < 2 || !m->dspark_naccept)
        return kvf_fail(err, KVF_EINVAL,
                        "model %s: keys 'dspark_block' (>= 2) and 'dspark_accept' "
                        "are needed with dspark_layers",
                        m->name);
    s->layers = m->dspark_layers;
    s->block = m->dspark_block;
    s->experts = m->dspark_experts;
    s->experts_active = m->dspark_experts_active;
    s->markov_rank = m->dspark_markov_rank;
    s->taps = m->dspark_taps ? m->dspark_taps : 1;
    s->naccept = m->dspark_naccept;
    memcpy(s->accept, m->dspark_accept, sizeof s->accept);
    mdl_spec_prepare(s, m);
    return KVF_OK;
}

double mdl_spec_tokens_per_step(const mdl_spec *s) {
    KVF_ASSERT(s && s->block >= 2 && s->naccept >= 1 && s->naccept <= MDL_ACCEPT_MAX);
    double e = 1, p = 1;
    for (uint32_t i = 0; i + 1 < s->block; i++) {
        double a = s->accept[KVF_MIN(i, s->naccept - 1)];
        KVF_ASSERT(a >= 0 && a <= 1);
        p *= a;
        e += p;
    }
    return e;
}

double mdl_spec_weight_bytes(const mdl_spec *s) {
    KVF_ASSERT(s && s->layers > 0);
    const mdl_model *d = &s->draft;
    double aliased = d->embedding_params * (d->tied_embeddings ? 1 : 2);
    return d->weight_bytes - aliased * d->weight_bytes_per_param;
}

void mdl_spec_step_cost(mdl_stepper *st, const mdl_spec *s, const mdl_batch *verify,
                        mdl_step_cost *out, mdl_step_cost *draft) {
    KVF_ASSERT(st && s && verify && out && s->layers > 0 && s->block >= 2);
    KVF_ASSERT(verify->phase == MDL_DECODE && (!verify->dsum || verify->dsum->n == 0));
    for (uint32_t i = 0; i < verify->n; i++)
        KVF_ASSERT(verify->seqs[i].new_tokens == s->block);
    mdl_step_cost v, d;
    mdl_stepper_cost(st, verify, &v);
    mdl_work w;
    mdl_batch_work_detail(&s->draft, verify, &w);   // `block` positions of every sequence
    mdl_parts pp;
    mdl_roofline_parts(&s->draft, &st->hw, &st->par, &st->eff, &w, &pp);
    if (pp.valid) {
        // same engine step: no second host overhead; the Markov bias runs block sequential
        // small steps (a launch each)
        pp.fixed_s += (s->block * st->eff.layer_overhead_ns - st->eff.step_overhead_ns) * 1e-9;
        pp.fixed_s = KVF_MAX(pp.fixed_s, 0.0);
        pp.host_ns = 0;
    }
    mdl_parts_finish(&pp, &w, &d);
    if (!pp.valid) d.ns = 0;
    *out = v;
    out->ns = v.ns + d.ns;
    out->flops += d.flops;
    out->bytes += d.bytes;
    out->comm_bytes += d.comm_bytes;
    out->comm_ns += d.comm_ns;
    if (draft) *draft = d;
}
