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

// gqa: grouped-query attention; mla: multi-head latent attention (absorbed in decode);
// dsa: DeepSeek Sparse Attention, MLA whose queries attend to the index_topk keys a
// lightning indexer selects after scoring the whole context (FP8 index keys).
// csa / hca: DeepSeek-V4's compressed attention (one head_dim-wide KV head shared by keys and
// values). Every layer keeps a sliding window; the layers of `layer_pattern` also attend a
// global KV compressed `ratio` tokens to one entry: sparsely (csa: the index_topk entries an
// indexer picks) or densely (hca: every entry). `hca` names a model whose compressed layers
// are all dense; the pattern decides per layer either way.
typedef enum mdl_attn {
    MDL_ATTN_GQA = 0,
    MDL_ATTN_MLA,
    MDL_ATTN_DSA,
    MDL_ATTN_CSA,
    MDL_ATTN_HCA
} mdl_attn;
// True for the compressed-attention family (csa, hca).
static inline bool mdl_attn_compressed(mdl_attn a) {
    return a == MDL_ATTN_CSA || a == MDL_ATTN_HCA;
}

// Numeric precision of weights, KV or GEMM inputs. AUTO: as the model file says (activations:
// fp8 when the (dense) weights are FP8 or narrower, whose GEMMs quantize their inputs (W8A8,
// W4A8), bf16 otherwise).
typedef enum mdl_prec { MDL_PREC_AUTO = 0, MDL_PREC_BF16, MDL_PREC_FP8, MDL_PREC_FP4 } mdl_prec;
// Bytes per element: bf16 2, fp8 1, fp4 0.5 (block scales counted apart); AUTO 0.
double mdl_prec_bytes(mdl_prec p);
// The precision whose tensor-core rate a tensor of `bytes` per element runs at (>= 2 bf16,
// >= 1 fp8, else fp4: MXFP4's 0.53125 is fp4).
mdl_prec mdl_prec_of_bytes(double bytes);
const char *mdl_prec_name(mdl_prec p);
// "bf16", "fp8" or "fp4" (and "auto"); false for anything else.
bool mdl_prec_parse(const char *s, mdl_prec *out);

// Per-layer roles of a csa/hca model (`layer_pattern`, models/README.md):
//   swa      window only
//   csa      owns a compressed KV pool (ratio R) and an indexer; attends its top-k entries
//   hca      owns a compressed KV pool (ratio R); attends every entry (no indexer)
//   reindex  scores the last owner's pool with its own indexer queries, attends the top-k
//   reuse    attends the selection of the last layer that scored (no KV, no indexer)
typedef enum mdl_lkind {
    MDL_LK_SWA = 0,
    MDL_LK_CSA,
    MDL_LK_HCA,
    MDL_LK_REINDEX,
    MDL_LK_REUSE
} mdl_lkind;
enum { MDL_LAYERS_MAX = 128, MDL_LCLASS_MAX = 24, MDL_ACCEPT_MAX = 16 };
// Layers of one kind that cost the same per token (derived): same kind and ratio, same side
// of the bounded-replay boundary, same candidate-pool cap.
typedef struct mdl_lclass {
    uint8_t kind;       // MDL_LK_*
    bool bounded;       // decoder layer past the last KV owner: bounded prefill replay
    bool pool_capped;   // its indexer scores only the candidate pool
    uint16_t ratio;     // compression of the KV it attends (0: swa)
    uint32_t count;     // layers
} mdl_lclass;

// A model, as read from models/<name>.yaml (flat scalar keys; see models/README.md).
typedef struct mdl_model {
    char name[MDL_NAME_MAX];
    uint32_t layers;                 // transformer blocks
    uint32_t hidden;                 // d_model
    uint32_t heads;                  // query heads
    uint32_t kv_heads;               // key/value heads (GQA)
    uint32_t head_dim;               // per-head dimension
    uint32_t ffn;                    // dense FFN inner size (SwiGLU: 3 matrices)
    uint32_t vocab;                  // vocabulary size
    mdl_attn attention;              // gqa, mla or dsa
    uint32_t kv_lora_rank;           // MLA: compressed KV rank (0 otherwise)
    uint32_t rope_dim;               // MLA: decoupled rope dims stored per token
    uint32_t q_lora_rank;            // MLA: query compression rank
    uint32_t index_heads;            // DSA: indexer heads (index_n_heads)
    uint32_t index_head_dim;         // DSA: indexer head dimension (index_head_dim)
    uint32_t index_topk;             // DSA: keys each query attends to (index_topk)
    uint32_t experts;                // routed experts, 0 = dense
    uint32_t experts_active;         // top-k
    uint32_t shared_experts;         // always-on experts
    uint32_t expert_ffn;             // inner size of one expert
    uint32_t dense_layers;           // MoE: leading layers with a dense FFN
    uint32_t window;                 // sliding window in tokens, 0 = none
    uint32_t window_layers;          // how many layers use the window (the rest are full attention)
    double weight_bytes_per_param;   // 2 = bf16, 1 = fp8, 0.5 = fp4 (may be fractional)
    double kv_bytes_per_elem;        // 2 = bf16 KV, 1 = fp8, 0.5 = fp4 (csa/hca: compressed KV)
    double vision_params;            // vision encoder parameters, 0 = text only
    uint32_t tokens_per_image;       // prompt tokens one image becomes
    uint32_t max_context;            // longest sequence (prompt + answer) it serves, tokens; 0 = no
                                     // limit given (max_position_embeddings of its config.json)
    bool tied_embeddings;            // output projection shares the input embedding matrix
    double expert_weight_bytes_per_param;   // routed/shared expert weights; 0 = as the rest
                                            // (gpt-oss MXFP4: 4.25 bits = 0.53125)
    mdl_prec
        act_precision;   // GEMM inputs (the A of WxAy); AUTO: fp8 for <= fp8 weights, else bf16
    // csa / hca (DeepSeek-V4 family; models/README.md "Compressed attention"):
    uint8_t layer_kind[MDL_LAYERS_MAX];     // MDL_LK_* per layer (layer_pattern)
    uint16_t layer_ratio[MDL_LAYERS_MAX];   // compression ratio of the KV layer l attends (0: swa)
    uint32_t pattern_layers;                // layers layer_pattern names (must equal layers)
    uint32_t o_lora_rank;        // grouped low-rank output projection rank (0 = plain o_proj)
    uint32_t o_groups;           // output projection groups
    uint32_t compress_overlap;   // csa owners' compressor windows overlap this many blocks (>= 1)
    bool index_compressor;       // csa owners compress index keys with a compressor of their own
    uint32_t candidate_source_layer;   // layer whose selection forms the candidate pool
    uint32_t candidate_blocks;         // candidate pool: blocks kept ...
    uint32_t candidate_block_tokens;   // ... of this many compressed entries (0 = no pool)
    bool candidate_caps_scoring;       // later indexers score only the pool (else: all entries)
    uint32_t encoder_layers;   // encoder-decoder: layers [0, encoder_layers) encode (0 = none)
    uint32_t decoder_replay_tokens;   // prefill: decoder layers past the last KV owner compute
                                      // only the last R tokens of each chunk (0 = every token)
    double swa_bytes_per_elem;        // window entry element size (0 = max(kv_bytes_per_elem, 1))
    double index_bytes_per_elem;      // index key element size (csa; 0 = kv_bytes_per_elem)
    uint32_t kv_scale_block;      // sub-byte KV: one scale byte per this many elements (0 = none)
    uint32_t index_scale_block;   // sub-byte index keys: one scale byte per this many (0 = none)
    bool kv_layout_physical;      // KV entries at an engine's physical layout (phys_*), not logical
    double phys_kv_entry_bytes, phys_swa_entry_bytes, phys_index_entry_bytes;   // bytes per entry
    double swa_lifetime_s;   // how long a sequence's SWA state is kept (0 = as the global KV)
    double kv_lifetime_s;    // how long the global (compressed) KV is persisted (0 = scenario)
    uint32_t hc_mult;        // mHC residual streams (0 or 1 = plain residual)
    double engram_params;    // Engram hash-table parameters: memory, no FLOPs
    double engram_bytes_per_param;   // their bytes per parameter (0 = weight_bytes_per_param)
    double engram_bytes_per_token;   // bytes a token reads from the tables (all Engram layers)
    double aux_params;   // GEMM parameters outside the blocks every token passes through
    // DSpark block speculative decoding (mdl_spec_from_model; 0 layers = none)
    uint32_t dspark_layers, dspark_block, dspark_experts, dspark_experts_active;
    uint32_t dspark_markov_rank, dspark_taps;
    uint32_t dspark_naccept;                // entries of dspark_accept
    double dspark_accept[MDL_ACCEPT_MAX];   // P(draft i accepted | drafts before it accepted)
    // derived by mdl_model_derive():
    double params;                      // total parameters
    double active_params;               // parameters touched per token
    double weight_bytes;                // bytes of all weights (experts at their own precision)
    double kv_bytes_per_token;          // all layers that store KV (what HBM holds)
    double kv_bytes_per_token_full;     // full-attention layers only (what SWA persists)
    double kv_bytes_per_token_window;   // sliding-window layers only
    uint32_t moe_layers;                // layers with routed experts (layers - dense_layers, or 0)
    double embedding_params;            // input embedding table (a lookup, not a GEMM)
    double expert_params;               // parameters of one routed expert (3 * hidden * expert_ffn)
    double dense_weight_bytes;    // weights outside the experts (attention, dense FFN, embeddings)
    double expert_weight_bytes;   // routed + shared expert weights
    double kv_bytes_per_token_layer;   // one layer's KV bytes per token (DSA: latent + index key)
    double index_bytes_per_token_layer;   // DSA: the FP8 index key + its fp32 scale (0 otherwise)
    // csa / hca (derived; 0 otherwise):
    double kv_entry_bytes;          // one compressed KV entry (logical or physical layout)
    double swa_entry_bytes;         // one sliding-window entry
    double index_entry_bytes;       // one compressed index key
    double swa_state_bytes;         // fixed per-sequence compressor state (FP32 partial groups)
    uint32_t replay_start_layer;    // first bounded decoder layer (layers = none)
    double active_params_prefill;   // per prompt token past the last R of its chunk (no
                                    // bounded layers, no output projection)
    double bounded_dense_params;    // non-expert block parameters of the bounded layers
    uint32_t bounded_moe_layers;    // MoE layers among the bounded layers
    uint32_t nlclass;
    mdl_lclass lclass[MDL_LCLASS_MAX];
} mdl_model;

// GPUs per scale-up (NVLink) domain when a hardware file does not say: an HGX 8-GPU board.
#define MDL_SCALEUP_DOMAIN_DEFAULT 8

// Kernel tables (`kernels:` in a hardware file): measured figures of one kernel family, each
// row with its source. Kinds and their columns (models/README.md):
//   gemm_fp8, gemm_bf16   m, n, k -> tflops (achieved; D = A[m,k] B[n,k]^T)
//   grouped_fp8, grouped_bf16  groups, m (per group), n, k -> tflops (MoE expert GEMMs alone)
//   decode_attn           attention (mla|gqa), head_dim -> GBps (memory-bound), tflops
//                         (compute-bound)
//   prefill_attn          attention, head_dim, seqlen -> tflops (causal)
//   ep_dispatch, ep_combine  mode (low_latency|normal), ep, tokens (per GPU) -> GBps
//                         (logical: tokens x top-k x hidden x element bytes / time), us
//   allreduce             gpus, bytes -> GBps (bus bandwidth)
//   decode_gqa            heads, kv_heads, head_dim (per GPU), kv_bytes, batch, context -> us
//                         (one layer's decode attention), GBps (KV bytes / time)
//   prefill_gqa           heads, kv_heads, head_dim (per GPU), batch, seqlen -> tflops (causal)
//   moe_bf16, moe_fp8     experts, topk, hidden, inter, tp, ep, tokens (entering the op on one
//                         GPU) -> tflops (the GPU's expert FLOPs / time), us: one fused MoE
//                         layer (routing, token permutation, grouped GEMMs, un-permutation);
//                         with `mode` (normal | low_latency) the MoE work between a DeepEP
//                         dispatch and combine of that mode (permutation into per-expert
//                         layout, grouped GEMMs, activation, un-permutation; no routing)
//   moe_routing           experts, topk, tokens -> us (router top-k selection)
//   moe_permute           hidden, topk, tokens -> us (permute + un-permute of the tokens)
//   decode_mla            heads (per GPU), kv_bytes (latent element bytes), batch, context ->
//                         us (one layer's absorbed MLA decode attention), GBps (optional)
//   prefill_mla           heads (per GPU), batch, seqlen -> tflops (causal pairs x 2 heads x
//                         (qk + v head dims) / time: the expanded-form attention kernel), us
typedef enum mdl_kkind {
    MDL_K_GEMM_FP8 = 0,
    MDL_K_GEMM_BF16,
    MDL_K_GROUPED_FP8,
    MDL_K_DECODE_ATTN,
    MDL_K_PREFILL_ATTN,
    MDL_K_EP_DISPATCH,
    MDL_K_EP_COMBINE,
    MDL_K_ALLREDUCE,
    MDL_K_GROUPED_BF16,
    MDL_K_DECODE_GQA,
    MDL_K_PREFILL_GQA,
    MDL_K_MOE_BF16,
    MDL_K_MOE_FP8,
    MDL_K_MOE_ROUTING,
    MDL_K_MOE_PERMUTE,
    MDL_K_DECODE_MLA,
    MDL_K_PREFILL_MLA,
    MDL_K_KINDS
} mdl_kkind;
// Rows per file; distinct `source` strings per file (rows share them by index). The rows live
// inside mdl_hardware (about 220 KB at 1024 rows), which the cluster, each pool and each stepper
// hold by value: sim_run's cluster, on its stack, is about 0.9 MB. order[] and kind_at[] are
// uint16_t, so the bound stays below 65,536.
enum { MDL_KROWS_MAX = 1024, MDL_KSRC_MAX = 200, MDL_KSRCS_MAX = 32 };
// How a fused-MoE row's tokens were spread over the experts when it was measured (`kernels.
// routing`): evenly (balanced, the default), or a power law over the experts as the database
// draws it for the model family (AIConfigurator's default workload: alpha 1.2 for generic MoE
// models such as Qwen3 and Mixtral, 1.01 for DeepSeek's), the hot experts' GPU setting the pace.
enum { MDL_ROUTE_BALANCED = 0, MDL_ROUTE_POWER_LAW = 1 };
// Which all-to-all kernels a moe_* row's op sits between (`kernels.mode`): none (the fused op
// of one expert group or an engine's own EP path), DeepEP's normal kernels (prefill), or its
// low-latency kernels (decode).
enum { MDL_A2A_NONE = 0, MDL_A2A_NORMAL = 1, MDL_A2A_LOW_LATENCY = 2 };
typedef struct mdl_krow {
    mdl_kkind kind;
    double m, n, k, groups;     // GEMM shape
    double head_dim, seqlen;    // attention
    mdl_attn attention;         // attention kind the row was measured for
    bool low_latency;           // EP: low-latency (decode) kernels, else normal (prefill)
    double ep, tokens;          // EP size; tokens per GPU per batch
    double gpus, bytes;         // all-reduce
    double heads, kv_heads;     // attention heads per GPU (decode_gqa, prefill_gqa)
    double batch, context;      // sequences per GPU; cached tokens per sequence (decode)
    double experts, topk;       // MoE: routed experts of the model, experts per token
    double hidden, inter, tp;   // MoE: hidden size, expert inner size, expert TP degree
    double kv_bytes;            // decode_gqa, decode_mla: bytes per cached element (2 bf16, 1 fp8)
    double routing;             // moe_*: tokens over experts as measured (MDL_ROUTE_*)
    double a2a;                 // moe_*: the all-to-all kernels around the op (MDL_A2A_*)
    double tflops, GBps, us;    // the measured figures (0 = not given)
    int line;                   // line in the hardware file
    uint16_t src;               // index into mdl_hardware.sources
} mdl_krow;
const char *mdl_kkind_name(mdl_kkind k);

typedef struct mdl_hardware {
    char name[MDL_NAME_MAX];
    double bf16_flops;         // dense peak FLOP/s per GPU
    double fp8_flops;          // dense peak FLOP/s per GPU
    double fp4_flops;          // dense peak FP4 FLOP/s per GPU (0 = no FP4 tensor path)
    double hbm_bytes;          // bytes of HBM per GPU
    double hbm_Bps;            // HBM bandwidth, bytes/s
    double scaleup_Bps;        // NVLink-class bandwidth per GPU, bidirectional bytes/s
    double pcie_Bps;           // host-device bandwidth per direction, bytes/s
    double nic_Bps;            // effective network bandwidth per GPU, bytes/s
    double power_idle_w;       // board power idle (powered, no work), W (`power_w.idle`)
    double power_peak_w;       // board power at full load (TDP), W (`power_w.peak`)
    uint32_t scaleup_domain;   // GPUs joined by the scale-up fabric (8 for HGX, 72 for NVL72)
    uint32_t sms;              // streaming multiprocessors per GPU (0 = not stated)
    char path[1024];           // file it was read from (for messages)
    uint32_t nkrows;           // kernel table rows, in file order
    mdl_krow krows[MDL_KROWS_MAX];
    // the rows sorted once at load (mdl_hardware_index): by kind, then the columns naming a
    // series (GEMM n, k; attention heads; MoE shape and layout; EP mode; all-reduce GPUs),
    // then the axes the figure varies along (m, batch, context, seqlen, tokens, ep, bytes)
    uint16_t order[MDL_KROWS_MAX];
    uint16_t kind_at[MDL_K_KINDS + 1];   // order[kind_at[k] .. kind_at[k + 1]) are kind k
    bool indexed;                        // order and kind_at describe krows
    uint32_t nsources;
    char sources[MDL_KSRCS_MAX][MDL_KSRC_MAX];   // repository + file + commit, or paper + table
} mdl_hardware;

// The source string of row r of h.
static inline const char *mdl_krow_source(const mdl_hardware *h, const mdl_krow *r) {
    return r->src < h->nsources ? h->sources[r->src] : "";
}
// Sorts h's rows into h->order (see there) and sets h->indexed. mdl_hardware_load calls it;
// call it again after changing krows by hand. Never fails.
void mdl_hardware_index(mdl_hardware *h);

// `kvfleet hw check`: the kernel tables are physically sane. Each rule names file:line of the
// first bad row and why (KVF_EINVAL):
//   peaks      no tflops above the dtype's datasheet peak (bf16_flops, fp8_flops), no
//              attention GBps above hbm_Bps, no EP GBps above scale-up (one direction) + NIC,
//              no all-reduce bus bandwidth above the scale-up fabric's two directions (in-switch
//              reduction lets it pass one direction's rate) -- mdl_hardware_check_peaks;
//   duplicates two rows of one kind with the same shape (every column but the figures);
//   monotone   GEMM, grouped and fused-MoE tflops never fall as m / tokens grow for one shape;
//              prefill_attn tflops never fall as seqlen grows; all-reduce bus bandwidth never
//              falls as the message grows; decode_gqa / prefill_gqa / routing / permutation
//              time never falls as batch, context, seqlen or tokens grow.
// Unknown kinds and columns are refused by the loader (KVF_EPARSE naming file:line).
// h must be indexed (as mdl_hardware_load leaves it) or have no rows.
kvf_status mdl_hardware_check(const mdl_hardware *h, kvf_err *err);
// The peaks rule alone, with the same messages: what `run` under `step_model: table` refuses
// before it starts (mdl_table_open).
kvf_status mdl_hardware_check_peaks(const mdl_hardware *h, kvf_err *err);
// `kvfleet hw check FILE...`: loads one hardware file (a name or a path, as mdl_hardware_load)
// and checks it. *rows (may be NULL) gets its kernel rows, counted by kind (MDL_K_KINDS
// entries). KVF_ENOENT / KVF_EPARSE / KVF_EINVAL from the load, KVF_EINVAL from the check,
// each naming file:line; KVF_ENOMEM when the hardware struct cannot be allocated.
kvf_status mdl_hardware_check_file(const char *name_or_path, const char *models_dir,
                                   unsigned rows[MDL_K_KINDS], kvf_err *err);

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
// llround for 0 <= x < 2^53: truncation, then the fraction (x - i is exact there) rounds half
// away from zero. The same answer as llround, without its library call (every step pays one).
static inline int64_t mdl_round_pos(double x) {
    int64_t i = (int64_t)x;
    return i + (x - (double)i >= 0.5);
}

static inline int64_t mdl_ns(double ns) {
    return ns >= 0 && ns <= MDL_MAX_STEP_NS ? mdl_round_pos(ns)
           : ns >= 0 || ns != ns            ? (int64_t)(MDL_MAX_STEP_NS + 1)
                                            : 0;
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
// hbm_Bps (> 0); the other figures default to 0 (scaleup_domain to 8). `power_w` is a mapping
// `{idle: W, peak: W}` (both required, idle <= peak); the old scalar form is refused naming
// file:line and the key. The kernel rows are indexed (mdl_hardware_index) before it returns.
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
// csa/hca models (others: see each): bytes of one sequence of `tokens` context, split by
// lifetime. The global KV is what a prefix cache persists (kv_lifetime_s) and what SWA
// bounded replay loads back: every owner layer's compressed entries, floor(tokens / ratio)
// of them (an incomplete group is not published), main entry + index key. The SWA state is
// what replaying the last window of tokens rebuilds and what a host pool keeps for
// swa_lifetime_s: every layer's window, min(tokens, window) entries, plus the owners'
// compressor state (fixed, FP32). mdl_kv_seq_bytes is their sum for csa/hca models.
// Other models: kv = the full-attention layers' KV, swa = the window layers'. tokens >= 0.
double mdl_model_kv_bytes_seq(const mdl_model *m, double tokens);
double mdl_model_swa_bytes_seq(const mdl_model *m, double tokens);
// Overrides the precision of weights (dense and experts alike), the KV cache and the GEMM
// inputs of a loaded model and re-derives every figure (weight bytes, KV bytes, peaks the
// roofline picks). MDL_PREC_AUTO leaves that part as loaded. csa/hca: kv sets the compressed
// entries' element size; windows stay at least FP8 (max(kv, 1 byte)); index keys keep their
// own precision; a physical layout (kv_layout_physical) keeps its fixed entry sizes.
void mdl_model_apply_precision(mdl_model *m, mdl_prec weights, mdl_prec kv, mdl_prec activations);
// The precision GEMMs of weights stored at `weight_bytes` per parameter run at: the wider of
// the weights' and the model's activations' (act_precision resolved).
mdl_prec mdl_model_gemm_precision(const mdl_model *m, double weight_bytes);
// Peak FLOP/s of hw at precision p, falling back to the next wider precision the device has
// (fp4 -> fp8 -> bf16).
double mdl_hw_peak(const mdl_hardware *hw, mdl_prec p);

// Parallelism inside one instance.
typedef struct mdl_parallel {
    uint32_t gpus;          // GPUs per instance (tp * ep layout folded in)
    uint32_t tp;            // tensor-parallel degree (attention/dense FFN split)
    uint32_t ep;            // expert-parallel degree (MoE experts spread)
    double ep_skew;         // >= 1: load of the hottest GPU over the mean (MoE layers)
    uint32_t route_nodes;   // node-limited routing: a token's experts lie on at most this
                            // many scale-up domains (DeepSeek-V3: 4); 0 = unlimited
    bool two_batch;         // two micro-batches overlap EP/TP communication with compute
    uint32_t comm_sms;      // two_batch prefill: SMs the all-to-all kernels hold while compute
                            // runs beside them (DeepSeek's prefill profile: 24 of 132)
    uint8_t routing;        // MDL_ROUTE_*: the fused-MoE rows the table model reads
    bool single_batch;      // one batch hides the EP combine beside the routed experts' down
                            // GEMMs and the shared experts (mdl_sbo_apply)
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
    double attention_memory;    // achieved / peak HBM bandwidth reading KV in attention (decode
                                // attention streams long contiguous pages); 0 = memory
    double comm_overlap;        // share (0..1) of collective time hidden under compute
    double in_system_decode;    // table model, decode steps: in-system / unit-measured time of
                                // the compute terms (GEMMs, experts, attention); 0 or 1 = none
    double token_overhead_ns;   // table model: the small kernels no table lists (norms, rotary,
                                // quantisation, top-k), ns per token a GPU per layer, in-system
} mdl_efficiency;

// Datasheet-level defaults for a tuned GPU server (values and reasons in mdl_roofline.c):
// compute 0.6, memory 0.8, comm 0.7, step 500 us, layer 10 us, collective 8 us,
// attention 0 (= compute), comm_overlap 0, in_system_decode 1, token_overhead_ns 0.
void mdl_efficiency_default(mdl_efficiency *e);

// One sequence in a batch step: compute new_tokens over cached_tokens of context already in KV.
// A decode step has new_tokens = 1 (+ draft tokens under speculative decoding).
typedef struct mdl_seq {
    uint32_t new_tokens;
    uint32_t cached_tokens;
} mdl_seq;

typedef enum mdl_phase { MDL_PREFILL = 0, MDL_DECODE, MDL_MIXED, MDL_VISION } mdl_phase;

// Context caps of a model's attention: a query of a capped layer kind sees at most `cap` keys.
// Cap 0 is the sliding window (window layers); cap 1 is sparse attention's top-k (DSA).
// csa/hca: a query at position p sees p / r compressed entries (continuous in the step
// models), so min(p / r, topk) = min(p, r topk) / r: cap 1 is r topk for the first sparse
// ratio, cap 2 for the second, cap 3 r pool for indexers capped by the candidate pool.
// A cap of 0 means that kind is absent.
enum { MDL_CAP_WINDOW = 0, MDL_CAP_TOPK, MDL_CAP_TOPK2, MDL_CAP_POOL, MDL_CAPS };

// Decode sequences given by running sums instead of entries: n sequences, each computing one
// new token over its own cached context c_i >= 1. A step model answers exactly what it answers
// for the same sequences listed in mdl_batch.seqs (bit for bit: sums of integers are exact in
// doubles up to 2^53), so a simulator can keep these sums per instance and pay O(1) per step
// instead of O(batch).
typedef struct mdl_decode_sum {
    uint32_t n;                 // sequences
    double sum_ctx;             // sum of c_i
    double sum_min[MDL_CAPS];   // sum of min(c_i + 1, cap_j) for each cap the model has
                                // (mdl_model_caps); ignored where the cap is 0
} mdl_decode_sum;

typedef struct mdl_batch {
    mdl_phase phase;
    const mdl_seq *seqs;   // n entries
    uint32_t n;
    uint32_t images;              // vision phase: images to encode
    const mdl_decode_sum *dsum;   // more decode sequences as sums (NULL = none); they count as
                                  // sequences of the batch in every phase but vision
} mdl_batch;

// The model's context caps (MDL_CAPS entries, 0 = none): caps[MDL_CAP_WINDOW] = window,
// caps[MDL_CAP_TOPK] = index_topk for dsa; csa/hca as above (mdl_model_sparse_ratios).
void mdl_model_caps(const mdl_model *m, uint32_t caps[MDL_CAPS]);
// csa/hca: the distinct compression ratios of the sparse layers (csa, reindex, reuse), in
// layer order, at most 2 (the loader refuses more); returns how many.
uint32_t mdl_model_sparse_ratios(const mdl_model *m, uint32_t ratios[2]);
// Adds a sequence of cached context ctx (>= 1) to a decode sum.
void mdl_decode_sum_add(mdl_decode_sum *d, const uint32_t caps[MDL_CAPS], double ctx);
// Sequences in the batch: n plus those of dsum.
uint32_t mdl_batch_size(const mdl_batch *b);

typedef struct mdl_step_cost {
    int64_t ns;            // step duration
    double flops;          // FLOPs executed by the instance
    double bytes;          // HBM bytes moved
    double comm_bytes;     // scale-up bytes
    bool extrapolated;     // calibrated model left its measured range
    int64_t comm_ns;       // part of ns spent in TP/EP collectives (roofline term)
    int64_t host_ns;       // part of ns spent by the host outside the forward pass
                           // (calibrated: the profile's host_overhead; roofline: the
                           // step overhead)
    bool compute_bound;    // the largest work group was limited by FLOP/s, not bytes
    bool table_fallback;   // table model: an applicable term came from the roofline
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
//   csa/hca: per layer class (mdl_lclass), window + compressed pairs and the indexer
//          (models/mdl_roofline.c); bounded decoder layers see each chunk's last
//          decoder_replay_tokens tokens, their GEMMs too.
void mdl_batch_work(const mdl_model *m, const mdl_batch *b, double *flops, double *bytes);
// mdl_batch_work's FLOPs for a prefill batch of one sequence (new_tokens over cached_tokens),
// to the bit, without forming the bytes (the simulator counts every prompt's FLOPs once).
double mdl_prompt_flops(const mdl_model *m, uint32_t new_tokens, uint32_t cached_tokens);

// The same work split into the groups the roofline bounds separately.
// attn_index: DSA's lightning indexer (FP8 scores of every query against every cached index
// key); attn_full then holds the attention over the selected top-k keys only.
enum {
    MDL_WG_DENSE = 0,
    MDL_WG_EXPERT,
    MDL_WG_ATTN_FULL,
    MDL_WG_ATTN_WINDOW,
    MDL_WG_ATTN_INDEX,
    MDL_WG_COUNT
};
typedef struct mdl_work {
    double flops[MDL_WG_COUNT];          // FLOPs per group (dense: non-expert GEMMs incl. vision)
    double bytes[MDL_WG_COUNT];          // HBM bytes per group (dense: weights + activations)
    double weight_bytes[MDL_WG_COUNT];   // the weight share of bytes[] (replicated under DP)
    double tokens;                       // tokens through the GEMMs
    double logit_rows;                   // rows of the output projection
    double experts_touched;              // expected distinct routed experts per MoE layer
    bool decode;                         // a decode batch (one new token per sequence)
} mdl_work;
void mdl_batch_work_detail(const mdl_model *m, const mdl_batch *b, mdl_work *w);

typedef struct mdl_stepper mdl_stepper;
// mdl_stepper_cost_run_ends: the run starts at t0 and every step takes add ns on top of the
// step model's (in); the longest of the step model's durations and whether they never
// decrease (out).
typedef struct mdl_run_ends {
    int64_t t0, add;
    int64_t hi;
    bool rising;
} mdl_run_ends;
typedef struct mdl_stepper_vt {
    const char *name;   // "roofline", "calibrated"
    void (*cost)(mdl_stepper *s, const mdl_batch *b, mdl_step_cost *out);
    void (*destroy)(mdl_stepper *s);
    bool decode_sums;   // cost() accepts mdl_batch.dsum (else: list every sequence)
    // optional (NULL: none): mdl_stepper_cost_run, and mdl_stepper_cost_run_ends with e set
    // (it may write the ends as it goes, or leave durations and *fused false)
    bool (*cost_run)(mdl_stepper *s, const mdl_decode_sum *d0, const mdl_decode_sum *grow,
                     uint32_t m, int64_t *ns, struct mdl_run_ends *e, bool *fused);
} mdl_stepper_vt;
struct mdl_stepper {
    const mdl_stepper_vt *vt;
    mdl_model model;
    mdl_hardware hw;
    mdl_parallel par;
    mdl_efficiency eff;
    uint64_t calls;             // cost() calls
    uint64_t extrapolations;    // calls answered outside the measured range
    uint64_t table_fallbacks;   // table model: calls with a term answered by the roofline
};

// Step cost of a batch (dispatches through the vtable; counts extrapolations and table
// fallbacks).
void mdl_stepper_cost(mdl_stepper *s, const mdl_batch *b, mdl_step_cost *out);
// The durations of m decode steps of one batch given as sums that changes only by its
// members' contexts growing: step j (from 0) is d0 with sum_ctx + j * grow->sum_ctx and each
// sum_min[c] + j * grow->sum_min[c] (n, and grow's n, unused). ns[j] gets what
// mdl_stepper_cost answers for that batch, to the bit; such a batch is never extrapolated nor
// falls back to the roofline. Returns false, writing nothing, where the step model has no such
// path (cost the steps one by one then). Counts m calls.
bool mdl_stepper_cost_run(mdl_stepper *s, const mdl_decode_sum *d0, const mdl_decode_sum *grow,
                          uint32_t m, int64_t *ns);
// As mdl_stepper_cost_run, but ends[j] gets e->t0 + the sum over i <= j of (ns[i] + e->add),
// e->hi the greatest ns[i] and e->rising whether ns[i] never decreases: the same integers as
// that scan over mdl_stepper_cost_run's durations (the memory-bound full-attention path sums
// as it costs). e->add >= 0.
bool mdl_stepper_cost_run_ends(mdl_stepper *s, const mdl_decode_sum *d0, const mdl_decode_sum *grow,
                               uint32_t m, mdl_run_ends *e, int64_t *ends);
void mdl_stepper_destroy(mdl_stepper *s);

// Expected distinct destinations among a token's k experts spread evenly over `domains`
// (nodes or GPUs), at most route_nodes of them when > 0: S (1 - (1 - 1/S)^k).
double mdl_ep_distinct(double domains, uint32_t route_nodes, double k);
// Bytes of one element an EP dispatch moves: the expert GEMMs' input precision, at most bf16.
double mdl_ep_dispatch_elem(const mdl_model *m);

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
// all-to-alls per MoE layer under ep > 1 (mdl_ep_comm), less the comm_overlap share hidden
// under compute (two_batch: all of it, up to the compute there is, while every micro-batch
// reads the weights again and launches its own kernels), plus step_overhead_ns +
// layers * layer_overhead_ns.
// An empty batch costs 0.
void mdl_roofline_eval(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                       const mdl_efficiency *eff, const mdl_batch *b, mdl_step_cost *out);
// Dispatch + combine of one MoE layer for `tokens_per_gpu` tokens on each GPU (FP8 dispatch
// for FP8 models, combine in the activation precision). Inside one scale-up domain each token
// goes to its k experts' GPUs over the fabric: k (ep-1)/ep copies. When EP spans D domains a
// token crosses the NIC once per remote domain holding one of its experts -- expected
// distinct domains among k experts, S (1 - (1 - 1/S)^k) with S = min(D, route_nodes), times
// (D-1)/D remote -- and fans out over the fabric there (k (g-1)/g copies, g GPUs per domain);
// NIC and fabric run at once, the slower sets the time. Sets the bytes each GPU sends per
// layer over each link; returns seconds per layer (with two collective latencies), before
// ep_skew. comm is the achieved fraction of the link peaks.
typedef struct mdl_ep_comm {
    double nic_copies, fabric_copies;   // hidden-sized copies per token over each link
    double nic_bytes, fabric_bytes;     // bytes per GPU per layer (dispatch + combine)
    double nic_s, fabric_s;             // seconds per layer on each link
    double bytes_per_copy;              // hidden x (dispatch + combine element bytes)
    double disp_share;                  // dispatch's share of those bytes
} mdl_ep_comm;
double mdl_ep_comm_time(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                        const mdl_efficiency *eff, double tokens_per_gpu, mdl_ep_comm *out);
// The GEMMs outside the routed experts, per GPU: n, k after tensor parallelism, the layers
// each runs in, and its place in a layer: before attention (q/kv projections), after it (o
// projection), or the dense layers' FFN. FLOPs per GPU are 2 x rows x n x k x layers.
// Writes at most MDL_DENSE_GEMMS shapes; returns how many.
enum { MDL_GEMM_PRE = 0, MDL_GEMM_POST, MDL_GEMM_FFN, MDL_DENSE_GEMMS = 8 };
typedef struct mdl_gemm_shape {
    double n, k, layers;
    const char *what;
    int role;   // MDL_GEMM_PRE, _POST or _FFN
} mdl_gemm_shape;
int mdl_dense_gemms(const mdl_model *m, double tp, mdl_gemm_shape *sh);
// The roofline's terms before they are summed: per work group max(compute, memory) seconds
// (the expert group times ep_skew), TP all-reduces and EP dispatch/combine seconds, the share
// of collectives hidden under compute, fixed overheads. mdl_parts_finish sums them into a
// step cost exactly as mdl_roofline_eval_work does; the table model replaces terms between.
typedef struct mdl_parts {
    bool valid;   // the batch has work
    double group_s[MDL_WG_COUNT], tc[MDL_WG_COUNT], tm[MDL_WG_COUNT];
    double peak[MDL_WG_COUNT];   // achieved FLOP/s per GPU assumed for each group
    double tp_comm_s, ep_comm_s, allreduces;
    mdl_ep_comm ep;   // one MoE layer's dispatch + combine (roofline)
    double overlap;   // share of collectives hidden under compute
    bool tbo;         // two micro-batches
    // two micro-batches (mdl_tbo_stages): the split the published schedules overlap by --
    // EP dispatch's share of ep_comm_s, the pre-attention projections' share of the dense
    // group and the dense layers' FFN share of it, the shared experts' seconds in the
    // expert group, and the share of SMs compute keeps while the all-to-alls run (prefill)
    double ep_disp_s, pre_s, dense_ffn_s, shared_s, sm_share;
    double moe_share;      // MoE layers / layers: the share of per-layer work beside all-to-alls
    double sbo_hidden_s;   // single-batch overlap: EP seconds hidden (ep_comm_s is what is left)
    bool decode;           // a decode batch: low-latency all-to-alls (mdl_tbo_stages_of)
    double fixed_s, host_ns, comm_bytes, ep_skew;
    // the per-GPU terms each group's time is formed from (GPUs, KV replication across TP
    // ranks, weight passes, weight shards per group, achieved HBM bytes/s for weights and KV)
    double G, repl, launches, wshard[MDL_WG_COUNT], bw, bw_attn;
} mdl_parts;
void mdl_roofline_parts(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                        const mdl_efficiency *eff, const mdl_work *w, mdl_parts *pp);
void mdl_parts_finish(const mdl_parts *pp, const mdl_work *w, mdl_step_cost *out);
// Two micro-batches as DeepSeek's published profiles schedule one MoE layer
// (deepseek-ai/profile-data, README and assets/decode.jpg, assets/prefill.jpg @ 4496024):
// with A0 the pre-attention projections, A1 core attention, o projection and the rest of the
// layer's dense work, S shared experts, E routed experts, D dispatch and C combine (TP
// all-reduces counted with C), each as the step's total over both micro-batches --
//   decode (low-latency all-to-alls hold no SMs): [S + A0] beside D, then E alone, then A1
//     beside C, per micro-batch: exposed = max(0, D - S - A0) + max(0, C - A1);
//   prefill (normal all-to-alls hold comm_sms of the device's SMs, so every compute kernel
//     runs on the rest: compute / sm_share): [A + S] beside C, A beside D, E beside D, E + S
//     beside C over the two micro-batches: exposed = (max(0, C - A - S) + max(0, D - A) +
//     max(0, D - E) + max(0, C - E - S)) / 2, A = A0 + A1.
// A0 and A1 count the MoE layers' share only (moe_share): the dense layers' attention and FFN
// have no all-to-all beside them. `total` is the step's compute (the groups' sum). Returns
// the seconds of compute and exposed communication: the step less its fixed term.
typedef struct mdl_tbo_stages {
    double compute_s;            // total / sm_share
    double a0, a1, s, e, d, c;   // the schedule's terms (seconds, after the SM share)
    double exposed_s;            // communication no compute hides
} mdl_tbo_stages;
double mdl_tbo_stages_of(const mdl_parts *pp, double total, mdl_tbo_stages *o);
// Single-batch overlap as SGLang runs it on GB200 NVL72 (lmsys.org/blog/2025-09-25-gb200-part-2:
// instead of two micro-batches, "a fine-grained overlapping approach", the combine beside the
// down GEMM and the shared experts; kernels: sgl-project/DeepGEMM#14): within one batch the
// combine's sends run beside the routed experts' down GEMMs, a third of their FLOPs (E / 3),
// and the shared experts (S); the dispatch stays exposed: exposed = D + max(0, C - E/3 - S).
// Moves the hidden seconds from ep_comm_s into sbo_hidden_s; mdl_sbo_undo puts them back (a
// model that replaces the terms first). Nothing without EP communication or under two
// micro-batches. In prefill the SMs DeepEP's normal kernels hold are not priced here (only
// two micro-batches' schedule prices them, moe.comm_sms).
void mdl_sbo_apply(mdl_parts *pp);
void mdl_sbo_undo(mdl_parts *pp);
// Same from precomputed work (fits evaluate one batch under many efficiency factors).
void mdl_roofline_eval_work(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                            const mdl_efficiency *eff, const mdl_work *w, mdl_step_cost *out);
// Table: the roofline's terms (mdl_roofline_parts), each replaced by the hardware file's
// kernel tables where they cover it (models/mdl_table.c lists the terms and rules); counts
// in table_fallbacks the calls where an applicable term fell back to the roofline. A batch
// given as sums costs exactly what it costs listed. Never fails.
mdl_stepper *mdl_table_create(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                              const mdl_efficiency *eff);
// mdl_table_create after the hardware file's rows passed mdl_hardware_check_peaks: a row
// above the datasheet peak is refused (KVF_EINVAL naming file:line, as `hw check` words it)
// and *out is NULL. What `run` with `step_model: table` calls.
kvf_status mdl_table_open(mdl_stepper **out, const mdl_model *m, const mdl_hardware *hw,
                          const mdl_parallel *par, const mdl_efficiency *eff, kvf_err *err);
// One term of a step's time, traced to its origin: table rows (file lines row_lo..row_hi and
// the first row's source) or, with row_lo = 0, the roofline term named in `how`.
enum { MDL_EXPLAIN_MAX = 32 };
typedef struct mdl_term {
    char name[32];
    double s;             // seconds (negative: time hidden, e.g. by overlap)
    int row_lo, row_hi;   // hardware file lines of the rows used (0 = roofline)
    char source[MDL_KSRC_MAX];
    char how[240];
} mdl_term;
typedef struct mdl_explain {
    mdl_term t[MDL_EXPLAIN_MAX];
    int n;
    double total_s;   // the step time (as out->ns)
    double tokens, seqs, gpus;
} mdl_explain;
// The table model's answer for one batch (use_tables = false: the roofline's, term by term;
// its step time equals mdl_roofline_eval's). ex (may be NULL) gets the terms, indented names
// ("  gemm") being parts of the term that follows; *fell_back (may be NULL) whether an
// applicable term used the roofline. m, hw, b, out non-NULL; hw indexed (as loaded) or without
// rows. The stepper of mdl_table_create answers the same, keeping a memo of its lookups.
void mdl_table_eval(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                    const mdl_efficiency *eff, const mdl_batch *b, bool use_tables,
                    mdl_step_cost *out, mdl_explain *ex, bool *fell_back);
// Calibrated: engine profile (CSV written by `kvfleet engine profile`) for this model.
// Errors name the profile path and line. (Implemented in models/mdl_calibrated.c.)
// Uses the profile's rows whose model column equals m->name (KVF_EINVAL when there are none;
// a csa/hca model, which the engine cannot run, gets the roofline instead, every step
// flagged extrapolated).
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
double mdl_kv_capacity_tokens(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                              double activation_reserve_frac);
// The bytes behind mdl_kv_capacity_tokens (<= 0 when the weights do not fit).
double mdl_kv_capacity_bytes(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                             double activation_reserve_frac);

// ---- block speculative decoding (DSpark) -------------------------------------------------
// A draft stack of `layers` decoder layers (window attention, an own MoE) drafts block - 1
// tokens per sequence in one parallel pass over `block` positions (the last accepted token
// and block - 1 noise tokens), from the hidden states of `taps` target layers (main_proj,
// taps x hidden -> hidden), its logits through the target's head, each position then biased
// by a rank-`markov_rank` Markov term. The target verifies the block in one step: every
// decoding sequence computes `block` tokens. accept[i] is the probability draft i + 1 is
// accepted given drafts 1..i were (the confidence schedule lowers it along the block).
typedef struct mdl_spec {
    uint32_t layers;           // draft decoder layers (0 = no speculative decoding)
    uint32_t block;            // tokens per sequence in a verify step (>= 2)
    uint32_t experts;          // draft MoE routed experts (0 = the target's)
    uint32_t experts_active;   // draft top-k (0 = the target's)
    uint32_t markov_rank;      // Markov bias rank (0 = none)
    uint32_t taps;             // target layers feeding main_proj (>= 1)
    uint32_t naccept;          // entries of accept (block - 1; missing ones repeat the last)
    double accept[MDL_ACCEPT_MAX];
    mdl_model draft;   // the draft stack as a model (mdl_spec_prepare)
} mdl_spec;
// From the model file's dspark_* keys; KVF_EINVAL naming the key when the model has no
// DSpark stack or its figures are inconsistent. Calls mdl_spec_prepare.
kvf_status mdl_spec_from_model(mdl_spec *s, const mdl_model *m, kvf_err *err);
// Builds s->draft from the target m (after the scenario changed any field of s).
void mdl_spec_prepare(mdl_spec *s, const mdl_model *m);
// Expected tokens a sequence emits per verify step: 1 + sum_i prod_{j<=i} accept[j] over the
// block - 1 drafts (the target's own token at the first rejection, or after the last draft).
double mdl_spec_tokens_per_step(const mdl_spec *s);
// Bytes of the draft stack's own weights (head and embedding are the target's).
double mdl_spec_weight_bytes(const mdl_spec *s);
// One speculative decode step: drafting (the roofline of s->draft on the stepper's hardware,
// parallelism and efficiency) plus verifying (the stepper's answer for `verify`: a decode
// batch, every sequence listed with new_tokens == s->block over its cached context; no decode
// sums; prefill chunks go in a step of their own). *out gets the sum; *draft (may be NULL)
// the drafting part alone. Counts one call of the stepper.
void mdl_spec_step_cost(mdl_stepper *st, const mdl_spec *s, const mdl_batch *verify,
                        mdl_step_cost *out, mdl_step_cost *draft);

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
    uint32_t batch;          // sequences in the step
    uint32_t new_tokens;     // tokens per sequence computed in the step
    double context;          // cached tokens per sequence before the step (decode: mean)
    double median_ns;        // measured step time, > 0
    double p10_ns, p90_ns;   // spread (0 when not given)
    uint32_t repeats;        // timed repetitions
    double flops, bytes;     // the engine's own count (0 when not given)
    int line;                // line in the profile file
} mdl_profile_row;

typedef struct mdl_profile {
    char path[1024];
    char model[MDL_NAME_MAX];   // from `# model:` (or the first row)
    char hardware[MDL_NAME_MAX];
    char backend[MDL_NAME_MAX];
    mdl_profile_row *rows;   // n rows, owned
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
                              const mdl_hardware *hw, const mdl_parallel *par, mdl_efficiency *eff,
                              double *err_rms, kvf_err *err);

// A stored fit (models/profiles/<name>.fit, flat YAML).
typedef struct mdl_fit {
    char model[MDL_NAME_MAX];
    char hardware[MDL_NAME_MAX];
    char backend[MDL_NAME_MAX];
    uint32_t rows;    // profile rows fitted
    double err_rms;   // relative RMS error over those rows
    double err_max;   // largest relative error
    mdl_efficiency eff;
} mdl_fit;
// Fits profile p for model m on hardware hw (one GPU unless par says otherwise).
kvf_status mdl_fit_profile(mdl_fit *f, const mdl_profile *p, const mdl_model *m,
                           const mdl_hardware *hw, const mdl_parallel *par, kvf_err *err);
// Writes / reads a fit file. Reading validates keys like the model files.
kvf_status mdl_fit_write(const mdl_fit *f, const char *path, kvf_err *err);
kvf_status mdl_fit_load(mdl_fit *f, const char *path, kvf_err *err);

#endif
