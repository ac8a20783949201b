// models/mdl.h -- model and hardware descriptions (models/*.yaml, models/hardware/*.yaml)
// and the step-time models built on them.
//
// A step-time model answers one question for the simulator: how long does this batch step
// take on this instance? Implementations sit behind one vtable (mdl_stepper): `roofline`
// (analytic FLOPs and bytes over peaks times efficiency factors) and `calibrated` (engine
// profiles, interpolated). Callers never know which one they hold.
#ifndef MDL_H
#define MDL_H

#include <math.h>

#include "kvf.h"

enum { MDL_NAME_MAX = 64 };

typedef enum mdl_attn { MDL_ATTN_GQA = 0, MDL_ATTN_MLA } mdl_attn;

// A model, as read from models/<name>.yaml (flat scalar keys; see models/README.md).
typedef struct mdl_model {
    char name[MDL_NAME_MAX];
    uint32_t layers;            // transformer blocks
    uint32_t hidden;            // d_model
    uint32_t heads;             // query heads
    uint32_t kv_heads;          // key/value heads (GQA)
    uint32_t head_dim;          // per-head dimension
    uint32_t ffn;               // dense FFN inner size (SwiGLU: 3 matrices)
    uint32_t vocab;             // vocabulary size
    mdl_attn attention;         // gqa or mla
    uint32_t kv_lora_rank;      // MLA: compressed KV rank (0 otherwise)
    uint32_t rope_dim;          // MLA: decoupled rope dims stored per token
    uint32_t q_lora_rank;       // MLA: query compression rank
    uint32_t experts;           // routed experts, 0 = dense
    uint32_t experts_active;    // top-k
    uint32_t shared_experts;    // always-on experts
    uint32_t expert_ffn;        // inner size of one expert
    uint32_t dense_layers;      // MoE: leading layers with a dense FFN
    uint32_t window;            // sliding window in tokens, 0 = none
    uint32_t window_layers;     // how many layers use the window (the rest are full attention)
    uint32_t weight_bytes_per_param;  // 2 = bf16, 1 = fp8
    uint32_t kv_bytes_per_elem;       // 2 = bf16 KV
    double vision_params;       // vision encoder parameters, 0 = text only
    uint32_t tokens_per_image;  // prompt tokens one image becomes
    bool tied_embeddings;       // output projection shares the input embedding matrix
    double expert_weight_bytes_per_param;  // routed/shared expert weights; 0 = as the rest
                                           // (gpt-oss MXFP4: 4.25 bits = 0.53125)
    // derived by mdl_model_derive():
    double params;              // total parameters
    double active_params;       // parameters touched per token
    double weight_bytes;        // bytes of all weights (experts at their own precision)
    double kv_bytes_per_token;          // all layers that store KV (what HBM holds)
    double kv_bytes_per_token_full;     // full-attention layers only (what SWA persists)
    double kv_bytes_per_token_window;   // sliding-window layers only
    uint32_t moe_layers;        // layers with routed experts (layers - dense_layers, or 0)
    double embedding_params;    // input embedding table (a lookup, not a GEMM)
    double expert_params;       // parameters of one routed expert (3 * hidden * expert_ffn)
    double dense_weight_bytes;  // weights outside the experts (attention, dense FFN, embeddings)
    double expert_weight_bytes; // routed + shared expert weights
    double kv_bytes_per_token_layer;    // one layer's KV bytes per token
} mdl_model;

typedef struct mdl_hardware {
    char name[MDL_NAME_MAX];
    double bf16_flops;          // dense peak FLOP/s per GPU
    double fp8_flops;           // dense peak FLOP/s per GPU
    double hbm_bytes;           // bytes of HBM per GPU
    double hbm_Bps;             // HBM bandwidth, bytes/s
    double scaleup_Bps;         // NVLink-class bandwidth per GPU, bidirectional bytes/s
    double pcie_Bps;            // host-device bandwidth per direction, bytes/s
    double nic_Bps;             // effective network bandwidth per GPU, bytes/s
    double power_w;             // board power, W
    uint32_t scaleup_domain;    // GPUs joined by the scale-up fabric (8 for HGX, 72 for NVL72)
} mdl_hardware;

// Loads models/<name>.yaml (or a path: anything containing '/' or ending in .yaml/.yml) into
// *m and derives its figures. models_dir is the directory holding the model files (NULL:
// "models" under the current directory, then under the source tree). The file is a flat
// mapping of scalar keys (models/README.md). Errors name file:line and key: unknown or
// duplicate key, wrong type, negative or zero where positive is needed, inconsistent counts
// (KVF_EPARSE / KVF_EINVAL); a missing file is KVF_ENOENT and names the path tried.
// The longest batch step the models report: an hour. A longer one (a model far too large for
// its hardware, efficiency factors near zero) is saturated here, converted without overflow,
// and the simulator refuses the run naming the keys.
#define MDL_MAX_STEP_NS 3.6e12
static inline int64_t mdl_ns(double ns) {
    return ns >= 0 && ns <= MDL_MAX_STEP_NS ? (int64_t)llround(ns) : ns >= 0 || ns != ns ? (int64_t)(MDL_MAX_STEP_NS + 1) : 0;
}

// Bounds for YAML input (models/mdl_yaml_guard.c): nesting depth, and nodes once aliases are
// expanded. mdl_yaml_guard refuses deeper, larger or self-referencing (alias loop) text with
// KVF_EPARSE naming where:line; run it before yaml_parser_load.
#define MDL_YAML_MAX_DEPTH 64
#define MDL_YAML_MAX_NODES 1000000
kvf_status mdl_yaml_guard(const char *where, const char *text, size_t len, kvf_err *err);

kvf_status mdl_model_load(mdl_model *m, const char *name_or_path, const char *models_dir,
                          kvf_err *err);
// Same for models_dir/hardware/<name>.yaml (or a path). Required: bf16_flops, hbm_bytes,
// hbm_Bps (> 0); the other figures default to 0 (scaleup_domain to 8).
kvf_status mdl_hardware_load(mdl_hardware *h, const char *name_or_path, const char *models_dir,
                             kvf_err *err);
// Recomputes the derived fields of *m from its structural fields. Conventions:
// params counts everything stored (embeddings, output projection unless tied, vision
// encoder); active_params counts the parameters a text token passes through as GEMMs:
// attention, dense FFN, top-k + shared experts, routers and the output projection, but not
// the input-embedding lookup nor the vision encoder (gpt-oss-120b: 5.1 B; DeepSeek-V3: 36.6 B).
void mdl_model_derive(mdl_model *m);
// KV bytes held for one sequence of `tokens` context: full layers store every token, window
// layers at most `window` tokens.
double mdl_kv_seq_bytes(const mdl_model *m, double tokens);

// Parallelism inside one instance.
typedef struct mdl_parallel {
    uint32_t gpus;              // GPUs per instance (tp * ep layout folded in)
    uint32_t tp;                // tensor-parallel degree (attention/dense FFN split)
    uint32_t ep;                // expert-parallel degree (MoE experts spread)
    double ep_skew;             // >= 1: load of the hottest GPU over the mean (MoE layers)
} mdl_parallel;

// One GPU, tp = ep = 1, no skew.
void mdl_parallel_default(mdl_parallel *p);

// Roofline efficiency factors (fractions of peak) and fixed costs.
typedef struct mdl_efficiency {
    double compute;             // achieved / peak FLOP/s in GEMMs
    double memory;              // achieved / peak HBM bandwidth
    double comm;                // achieved / peak scale-up bandwidth
    double step_overhead_ns;    // per-step host overhead (scheduling, launches)
    double layer_overhead_ns;   // per-layer fixed cost (kernel launches), per step
    double comm_latency_ns;     // fixed cost of one collective (all-reduce, all-to-all)
    double attention;           // achieved / peak FLOP/s in attention kernels; 0 = compute
    double comm_overlap;        // share (0..1) of collective time hidden under compute
} mdl_efficiency;

// Datasheet-level defaults for a tuned GPU server (values and reasons in mdl_roofline.c):
// compute 0.6, memory 0.8, comm 0.7, step 500 us, layer 10 us, collective 8 us,
// attention 0 (= compute), comm_overlap 0.
void mdl_efficiency_default(mdl_efficiency *e);

// One sequence in a batch step: compute new_tokens over cached_tokens of context already in KV.
// A decode step has new_tokens = 1 (+ draft tokens under speculative decoding).
typedef struct mdl_seq {
    uint32_t new_tokens;
    uint32_t cached_tokens;
} mdl_seq;

typedef enum mdl_phase { MDL_PREFILL = 0, MDL_DECODE, MDL_MIXED, MDL_VISION } mdl_phase;

typedef struct mdl_batch {
    mdl_phase phase;
    const mdl_seq *seqs;        // n entries
    uint32_t n;
    uint32_t images;            // vision phase: images to encode
} mdl_batch;

typedef struct mdl_step_cost {
    int64_t ns;                 // step duration
    double flops;               // FLOPs executed by the instance
    double bytes;               // HBM bytes moved
    double comm_bytes;          // scale-up bytes
    bool extrapolated;          // calibrated model left its measured range
    int64_t comm_ns;            // part of ns spent in TP/EP collectives (roofline term)
    int64_t host_ns;            // part of ns spent by the host outside the forward pass
                                // (calibrated: the profile's host_overhead; roofline: the
                                // step overhead)
    bool compute_bound;         // the largest work group was limited by FLOP/s, not bytes
} mdl_step_cost;

// FLOPs and HBM bytes of a batch for the whole model (no parallelism), used by steppers and
// reports. Attention FLOPs respect the sliding window per layer kind.
//   GEMMs: 2 FLOPs per active parameter per token (MoE: top-k + shared experts), plus the
//          output projection once per sequence (prefill: last token only; decode: every token).
//   attention: per (query, key) pair and layer, 4 * heads * head_dim (QK^T and PV; MLA: the
//          absorbed form, 2 * heads * (2 * kv_lora_rank + rope_dim), or the expanded form plus
//          up-projecting the cached latents, whichever is cheaper for the chunk); keys of a
//          chunk are causal inside the chunk; window layers see at most `window` keys.
//   bytes: weights once per step (MoE: the expected number of distinct experts the step's
//          tokens route to), the KV the step reads and writes, and activation traffic.
void mdl_batch_work(const mdl_model *m, const mdl_batch *b, double *flops, double *bytes);

// The same work split into the groups the roofline bounds separately.
enum { MDL_WG_DENSE = 0, MDL_WG_EXPERT, MDL_WG_ATTN_FULL, MDL_WG_ATTN_WINDOW, MDL_WG_COUNT };
typedef struct mdl_work {
    double flops[MDL_WG_COUNT]; // FLOPs per group (dense: non-expert GEMMs incl. vision)
    double bytes[MDL_WG_COUNT]; // HBM bytes per group (dense: weights + activations)
    double weight_bytes[MDL_WG_COUNT];  // the weight share of bytes[] (replicated under DP)
    double tokens;              // tokens through the GEMMs
    double logit_rows;          // rows of the output projection
    double experts_touched;     // expected distinct routed experts per MoE layer
} mdl_work;
void mdl_batch_work_detail(const mdl_model *m, const mdl_batch *b, mdl_work *w);

typedef struct mdl_stepper mdl_stepper;
typedef struct mdl_stepper_vt {
    const char *name;                                              // "roofline", "calibrated"
    void (*cost)(mdl_stepper *s, const mdl_batch *b, mdl_step_cost *out);
    void (*destroy)(mdl_stepper *s);
} mdl_stepper_vt;
struct mdl_stepper {
    const mdl_stepper_vt *vt;
    mdl_model model;
    mdl_hardware hw;
    mdl_parallel par;
    mdl_efficiency eff;
    uint64_t calls;              // cost() calls
    uint64_t extrapolations;     // calls answered outside the measured range
};

// Step cost of a batch (dispatches through the vtable; counts extrapolations).
void mdl_stepper_cost(mdl_stepper *s, const mdl_batch *b, mdl_step_cost *out);
void mdl_stepper_destroy(mdl_stepper *s);

// Roofline: max(FLOPs/(peak*compute), bytes/(bw*memory)) per layer group + comm + overheads.
// par and eff may be NULL (mdl_parallel_default / mdl_efficiency_default). Never fails.
mdl_stepper *mdl_roofline_create(const mdl_model *m, const mdl_hardware *hw,
                                 const mdl_parallel *par, const mdl_efficiency *eff);
// The roofline answer without a stepper (what mdl_roofline_create's cost() returns).
// Per GPU, for each work group g: max(flops_g / (gpus * peak_g * compute),
// bytes_g / (hbm_Bps * memory)) where bytes_g per GPU divides weights by their shard count
// (dense: tp; experts: max(tp, ep)) and the rest by gpus; the expert group is multiplied
// by ep_skew; KV is replicated across TP ranks for MLA (and GQA with tp > kv_heads). Plus
// 2 all-reduces per layer under tp > 1 (1 on MoE layers when ep > 1), dispatch + combine
// all-to-alls per MoE layer under ep > 1 (across scale-up domains: one copy per remote
// domain a token's experts live in), less the comm_overlap share hidden under compute,
// plus step_overhead_ns + layers * layer_overhead_ns.
// An empty batch costs 0.
void mdl_roofline_eval(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                       const mdl_efficiency *eff, const mdl_batch *b, mdl_step_cost *out);
// Same from precomputed work (fits evaluate one batch under many efficiency factors).
void mdl_roofline_eval_work(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                            const mdl_efficiency *eff, const mdl_work *w, mdl_step_cost *out);
// Calibrated: engine profile (CSV written by `kvfleet engine profile`) for this model.
// Errors name the profile path and line. (Implemented in models/mdl_calibrated.c.)
// Uses the profile's rows whose model column equals m->name (KVF_EINVAL when there are none).
//   prefill rows: a grid new_tokens x context; decode rows: batch x context; host_overhead
//   rows: by batch. Interpolation is piecewise linear on each axis (columns of equal
//   new_tokens/batch, linear in context inside a column, then linear across columns), so
//   measured points come back exactly and linear costs (weights, KV reads) exactly between.
//   A batch of several prefill chunks is one chunk of the summed tokens at the context that
//   keeps the attention pairs equal: C = (sum t_i c_i + t_i(t_i+1)/2 - T(T+1)/2) / T.
//   A decode batch uses its size and mean context (speculative: size x tokens per sequence).
//   A mixed batch: the prefill table at (prefill tokens + decode sequences) plus the decode
//   table's context increment D(B, mean ctx) - D(B, 0).
//   Each step adds host_overhead(batch size) (clamped to the measured batch range).
//   Above the measured range (more tokens, sequences or context than any measured point of
//   the neighbouring columns): roofline(b) x (measured / roofline) of the nearest measured
//   point, out->extrapolated = true. Below it (fewer tokens or less context than the
//   smallest measured) the table is extended linearly, floored at half the smallest point,
//   unflagged. The vision phase is never profiled: roofline x nearest prefill ratio, flagged.
//   par/eff (NULL = defaults) serve the roofline fallback and out->flops/bytes only.
kvf_status mdl_calibrated_create(mdl_stepper **out, const mdl_model *m, const mdl_hardware *hw,
                                 const mdl_parallel *par, const mdl_efficiency *eff,
                                 const char *profile_path, kvf_err *err);

// KV-cache capacity of one instance in tokens: gpus*HBM - weights - activation reserve.
// Returns 0 when the weights do not fit. Counts every layer's KV per token (window layers
// included, as a paged cache that allocates all layers per token does); dense weights are
// replicated gpus/tp times, experts gpus/max(tp,ep) times; KV replicated as in the roofline.
// par may be NULL (one GPU).
double mdl_kv_capacity_tokens(const mdl_model *m, const mdl_hardware *hw,
                              const mdl_parallel *par, double activation_reserve_frac);
// The bytes behind mdl_kv_capacity_tokens (<= 0 when the weights do not fit).
double mdl_kv_capacity_bytes(const mdl_model *m, const mdl_hardware *hw,
                             const mdl_parallel *par, double activation_reserve_frac);

// ---- engine profiles and efficiency fits ------------------------------------------------
// Profile CSV (written by `kvfleet engine profile`): `# key: value` comment lines (model,
// hardware, backend, ...), then the header
//   model,hardware,backend,op,batch,new_tokens,context,median_ns,p10_ns,p90_ns,repeats,flops,bytes
// and one row per measured shape; op is prefill (batch 1, new_tokens T, context C), decode
// (batch B, new_tokens 1, context = mean context) or host_overhead (batch B).
typedef enum mdl_prof_op { MDL_OP_PREFILL = 0, MDL_OP_DECODE, MDL_OP_HOST } mdl_prof_op;

typedef struct mdl_profile_row {
    char model[MDL_NAME_MAX];
    mdl_prof_op op;
    uint32_t batch;             // sequences in the step
    uint32_t new_tokens;        // tokens per sequence computed in the step
    double context;             // cached tokens per sequence before the step (decode: mean)
    double median_ns;           // measured step time, > 0
    double p10_ns, p90_ns;      // spread (0 when not given)
    uint32_t repeats;           // timed repetitions
    double flops, bytes;        // the engine's own count (0 when not given)
    int line;                   // line in the profile file
} mdl_profile_row;

typedef struct mdl_profile {
    char path[1024];
    char model[MDL_NAME_MAX];   // from `# model:` (or the first row)
    char hardware[MDL_NAME_MAX];
    char backend[MDL_NAME_MAX];
    mdl_profile_row *rows;      // n rows, owned
    size_t n;
} mdl_profile;

// Reads a profile. Errors name path:line and the field (wrong header, bad number, unknown
// op, duplicate shape). mdl_profile_free releases the rows (accepts a zeroed profile).
kvf_status mdl_profile_load(mdl_profile *p, const char *path, kvf_err *err);
void mdl_profile_free(mdl_profile *p);

// Fits compute, memory, attention and step_overhead_ns of the roofline (layer_overhead_ns
// = 0; comm and comm_latency_ns kept from *eff on entry, or defaults when the fields are 0)
// to the prefill and decode rows whose model column is m->name (rows with an empty model
// column count too), minimising the squared log error (a grid search, then coordinate
// refinement). host_overhead rows are not fitted; their
// mean is added to step_overhead_ns so the roofline predicts whole serving steps. *err_rms
// gets the relative RMS error of the fit over those rows. KVF_EINVAL with fewer than 3 rows.
kvf_status mdl_fit_efficiency(const mdl_profile_row *rows, size_t n, const mdl_model *m,
                              const mdl_hardware *hw, const mdl_parallel *par,
                              mdl_efficiency *eff, double *err_rms, kvf_err *err);

// A stored fit (models/profiles/<name>.fit, flat YAML).
typedef struct mdl_fit {
    char model[MDL_NAME_MAX];
    char hardware[MDL_NAME_MAX];
    char backend[MDL_NAME_MAX];
    uint32_t rows;              // profile rows fitted
    double err_rms;             // relative RMS error over those rows
    double err_max;             // largest relative error
    mdl_efficiency eff;
} mdl_fit;
// Fits profile p for model m on hardware hw (one GPU unless par says otherwise).
kvf_status mdl_fit_profile(mdl_fit *f, const mdl_profile *p, const mdl_model *m,
                           const mdl_hardware *hw, const mdl_parallel *par, kvf_err *err);
// Writes / reads a fit file. Reading validates keys like the model files.
kvf_status mdl_fit_write(const mdl_fit *f, const char *path, kvf_err *err);
kvf_status mdl_fit_load(mdl_fit *f, const char *path, kvf_err *err);

#endif
