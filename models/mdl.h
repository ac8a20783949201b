// models/mdl.h -- model and hardware descriptions (models/*.yaml, models/hardware/*.yaml)
// and the step-time models built on them.
//
// A step-time model answers one question for the simulator: how long does this batch step
// take on this instance? Implementations sit behind one vtable (mdl_stepper): `roofline`
// (analytic FLOPs and bytes over peaks times efficiency factors) and `calibrated` (engine
// profiles, interpolated). Callers never know which one they hold.
#ifndef MDL_H
#define MDL_H

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
    // derived by mdl_model_derive():
    double params;              // total parameters
    double active_params;       // parameters touched per token
    double weight_bytes;        // params * weight_bytes_per_param
    double kv_bytes_per_token;          // all layers that store KV (what HBM holds)
    double kv_bytes_per_token_full;     // full-attention layers only (what SWA persists)
    double kv_bytes_per_token_window;   // sliding-window layers only
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
} mdl_hardware;

// Loads models/<name>.yaml (or a path ending in .yaml) into *m and derives its figures.
// models_dir is the directory holding the model files. Errors name file:line and key.
kvf_status mdl_model_load(mdl_model *m, const char *name_or_path, const char *models_dir,
                          kvf_err *err);
kvf_status mdl_hardware_load(mdl_hardware *h, const char *name_or_path, const char *models_dir,
                             kvf_err *err);
// Recomputes the derived fields of *m from its structural fields.
void mdl_model_derive(mdl_model *m);

// Parallelism inside one instance.
typedef struct mdl_parallel {
    uint32_t gpus;              // GPUs per instance (tp * ep layout folded in)
    uint32_t tp;                // tensor-parallel degree (attention/dense FFN split)
    uint32_t ep;                // expert-parallel degree (MoE experts spread)
    double ep_skew;             // >= 1: load of the hottest GPU over the mean (MoE layers)
} mdl_parallel;

// Roofline efficiency factors (fractions of peak) and fixed costs.
typedef struct mdl_efficiency {
    double compute;             // achieved / peak FLOP/s in GEMMs
    double memory;              // achieved / peak HBM bandwidth
    double comm;                // achieved / peak scale-up bandwidth
    double step_overhead_ns;    // per-step host overhead (scheduling, launches)
    double layer_overhead_ns;   // per-layer fixed cost (kernel launches), per step
} mdl_efficiency;

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
} mdl_step_cost;

// FLOPs and HBM bytes of a batch for the whole model (no parallelism), used by steppers and
// reports. Attention FLOPs respect the sliding window per layer kind.
void mdl_batch_work(const mdl_model *m, const mdl_batch *b, double *flops, double *bytes);

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
mdl_stepper *mdl_roofline_create(const mdl_model *m, const mdl_hardware *hw,
                                 const mdl_parallel *par, const mdl_efficiency *eff);
// Calibrated: engine profile (CSV written by `kvfleet engine profile`) for this model.
// Errors name the profile path and line. (Implemented in models/mdl_calibrated.c.)
kvf_status mdl_calibrated_create(mdl_stepper **out, const mdl_model *m, const mdl_hardware *hw,
                                 const mdl_parallel *par, const mdl_efficiency *eff,
                                 const char *profile_path, kvf_err *err);

// KV-cache capacity of one instance in tokens: gpus*HBM - weights - activation reserve.
// Returns 0 when the weights do not fit.
double mdl_kv_capacity_tokens(const mdl_model *m, const mdl_hardware *hw,
                              const mdl_parallel *par, double activation_reserve_frac);

#endif
