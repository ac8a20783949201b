// engine/eng.h -- kvfleet's real inference engine: a transformer forward pass (dense GQA, MoE,
// per-layer sliding windows) with random seeded weights, a paged prefix-shared KV cache, two
// backends (cpu: fp32 reference; cuda: bf16 storage, fp32 accumulation), a profiler and a
// continuous-batching serving loop.
//
// Depends only on common/kvf.h (and optionally OpenBLAS / the CUDA toolkit); builds alone with
// -DKVFLEET_ENGINE_ONLY=ON.
//
// Invariants:
//  - every tensor of a model lives in one weight arena, cut into views by a sizes table
//    (eng_layout); the KV cache is one arena of fixed-size blocks; activations one arena.
//  - weights are a pure function of (model, seed): element j of tensor i is drawn from a
//    counter-based hash, so the CPU and CUDA backends hold the same values (CUDA rounds to bf16).
//  - a KV block holds block_tokens consecutive tokens of one sequence for every layer:
//
//      block b: [layer 0: K (bt, kv_heads, head_dim) | V (bt, kv_heads, head_dim)] [layer 1 ...]
//
//  - full blocks are keyed by the chained hash of their token ids (hash of the previous block
//    combined with this block's tokens), so two sequences with the same prefix share the same
//    physical blocks (reference-counted). A block whose count drops to 0 stays cached
//    (evictable, LRU) until its space is needed.
//  - library code never prints and never exits; errors come back as kvf_status + kvf_err.
#ifndef ENG_H
#define ENG_H

#include <stdio.h>

#include "kvf.h"

// ---- model description ------------------------------------------------------------------
enum { ENG_NAME_MAX = 64 };

// What the engine reads from models/<name>.yaml (flat `key: value` lines, `#` comments; keys
// as in models/mdl.h; keys the engine does not use are ignored).
typedef struct eng_model_desc {
    char name[ENG_NAME_MAX];
    uint32_t layers;           // transformer blocks
    uint32_t hidden;           // d_model
    uint32_t heads;            // query heads
    uint32_t kv_heads;         // key/value heads (divides heads)
    uint32_t head_dim;         // per-head dimension (even, for RoPE)
    uint32_t ffn;              // dense FFN inner size (SwiGLU)
    uint32_t vocab;            // vocabulary size
    uint32_t experts;          // routed experts, 0 = dense
    uint32_t experts_active;   // top-k (<= experts)
    uint32_t shared_experts;   // always-on experts (fused into one FFN of shared*expert_ffn)
    uint32_t expert_ffn;       // inner size of one expert
    uint32_t dense_layers;     // MoE: leading layers with a dense FFN
    uint32_t window;           // sliding window in tokens, 0 = none
    uint32_t window_layers;    // how many layers use the window: layers 0, 2, 4, ... (alternate;
                               //   beyond the even layers, odd layers 1, 3, ... from the start)
    float rope_theta;          // RoPE base (default 10000)
    float norm_eps;            // RMSNorm epsilon (default 1e-5)
} eng_model_desc;

// Parses model text (path is used in messages only). Errors: KVF_EPARSE naming path:line and
// key (malformed line, bad number), KVF_EINVAL for inconsistent shapes or unsupported
// attention (mla).
kvf_status eng_model_desc_parse(eng_model_desc *m, const char *text, const char *path,
                                kvf_err *err);
// Loads a model by name (models_dir/<name>.yaml) or by path (contains '/' or ends in .yaml).
// models_dir NULL means $KVF_MODELS_DIR, else <source>/models. KVF_ENOENT if missing.
kvf_status eng_model_desc_load(eng_model_desc *m, const char *name_or_path, const char *models_dir,
                               kvf_err *err);
// True when layer i uses the sliding window: i even and i/2 < window_layers; when
// window_layers exceeds the even layers, also odd i with i/2 < window_layers - even layers.
bool eng_layer_windowed(const eng_model_desc *m, uint32_t layer);
// True when layer i has a routed-expert FFN.
bool eng_layer_moe(const eng_model_desc *m, uint32_t layer);

// ---- weight layout (the sizes table) ----------------------------------------------------
// Offsets are in elements from the start of the weight arena; ENG_NONE when absent.
// Every matrix is row-major (out, in) and applied as y = x W^T.
#define ENG_NONE ((size_t)-1)
typedef struct eng_layer_layout {
    size_t attn_norm;   // (hidden)
    size_t wqkv;        // ((heads + 2 kv_heads) head_dim, hidden): rows Q | K | V
    size_t wo;          // (hidden, heads head_dim)
    size_t ffn_norm;    // (hidden)
    size_t w_gu;        // dense: (2 ffn, hidden): rows gate | up
    size_t w_down;      // dense: (hidden, ffn)
    size_t router;      // moe: (experts, hidden)
    size_t exp_gu;      // moe: (experts, 2 expert_ffn, hidden), expert e at + e*2*effn*hidden
    size_t exp_down;    // moe: (experts, hidden, expert_ffn)
    size_t sh_gu;       // moe with shared experts: (2 S, hidden), S = shared*expert_ffn
    size_t sh_down;     // (hidden, S)
} eng_layer_layout;

typedef struct eng_layout {
    size_t embed;        // (vocab, hidden)
    size_t final_norm;   // (hidden)
    size_t lm_head;      // (vocab, hidden)
    size_t total;        // elements in the arena
    uint32_t n_layers;
    eng_layer_layout *layer;   // [n_layers]
} eng_layout;

// ---- engine -----------------------------------------------------------------------------
typedef enum eng_backend { ENG_BACKEND_CPU = 0, ENG_BACKEND_CUDA = 1 } eng_backend;

// "cpu" or "cuda"; KVF_EINVAL otherwise.
kvf_status eng_backend_parse(const char *s, eng_backend *out, kvf_err *err);
const char *eng_backend_name(eng_backend b);

typedef struct eng_options {
    eng_backend backend;
    uint32_t threads;           // CPU GEMM threads, 0 = 1 (stable timings on shared hosts)
    uint32_t block_tokens;      // tokens per KV block (default 16)
    uint32_t kv_blocks;         // KV arena blocks; 0 = max_seqs full-length sequences, within
                                //   1 GiB (cpu) / 16 GiB (cuda) of KV and never below one
    uint32_t max_step_tokens;   // most tokens in one step (prefill chunk + decodes), default 2048
    uint32_t max_seqs;          // most sequences in one step, default 64
    uint32_t max_context;       // longest sequence in tokens, default 8192
    uint64_t seed;              // weight seed (default 1)
    double mem_limit_bytes;     // 0 = 90 % of physical memory (cpu), 95 % of free device memory
} eng_options;

void eng_options_default(eng_options *o);

typedef struct eng_engine eng_engine;   // opaque: model, weights, KV arena, backend state
typedef struct eng_seq eng_seq;         // opaque: one sequence (block table + token ids)

// Builds an engine: lays out and initialises the weights, allocates the KV and activation
// arenas on the chosen backend. Errors: KVF_EINVAL (bad options), KVF_ENOMEM (the arenas do
// not fit mem_limit_bytes / device memory; the message gives the sizes), KVF_ENODEV (cuda
// asked for but not built or no device: the caller may fall back to cpu), KVF_ERUN.
kvf_status eng_create(eng_engine **out, const eng_model_desc *m, const eng_options *o,
                      kvf_err *err);
void eng_destroy(eng_engine *e);

const eng_model_desc *eng_model(const eng_engine *e);
const eng_options *eng_opts(const eng_engine *e);
const eng_layout *eng_layout_get(const eng_engine *e);
// CPU backend: the fp32 weight arena (eng_layout offsets index it). NULL for cuda.
const float *eng_weights_cpu(const eng_engine *e);
// Bytes of the weight, KV and activation arenas on the backend.
void eng_arena_bytes(const eng_engine *e, double *weights, double *kv, double *act);
// A short id of the machine: "cpu-<cpu model>" or the GPU name, lower case, [a-z0-9-].
const char *eng_hardware_id(const eng_engine *e);
// Device-timed (cuda events) or wall-timed (cpu) duration of the last forward pass, ns.
int64_t eng_last_forward_ns(const eng_engine *e);

// ---- sequences and the paged KV cache ---------------------------------------------------
// Opens a sequence whose prompt is tokens[0..n) (n >= 1). The longest prefix of full blocks
// already cached (by chained hash) is attached, never all of the prompt: *cached (a multiple
// of block_tokens, < n) tokens are in KV and the caller prefills tokens[*cached..n).
// KVF_EINVAL if n exceeds max_context; KVF_ENOMEM when no sequence slot is free.
kvf_status eng_seq_open(eng_engine *e, const int32_t *tokens, uint32_t n, eng_seq **out,
                        uint32_t *cached, kvf_err *err);
// Releases the sequence: its blocks' counts drop; full blocks stay cached (evictable).
void eng_seq_close(eng_engine *e, eng_seq *s);
// Takes s's blocks out of the prefix table where s alone holds them, so that closing s frees
// them instead of leaving them findable (the serving loop's warm-up leaves nothing cached).
void eng_seq_forget(eng_engine *e, eng_seq *s);
uint32_t eng_seq_len(const eng_seq *s);   // tokens held in KV
// Shortens the sequence to n tokens (n <= len), releasing blocks past it.
void eng_seq_truncate(eng_engine *e, eng_seq *s, uint32_t n);
// Profiling hook: appends n tokens of synthetic context (seeded random token ids and KV
// values) without running the model. KVF_ENOMEM when the arena is full.
kvf_status eng_seq_extend_synthetic(eng_engine *e, eng_seq *s, uint32_t n, uint64_t seed,
                                    kvf_err *err);
// Blocks that must be newly taken to append n tokens to s.
uint32_t eng_kv_blocks_needed(const eng_engine *e, const eng_seq *s, uint32_t n);
// Blocks that can be taken now (free + cached-but-unreferenced).
uint32_t eng_kv_blocks_available(const eng_engine *e);

typedef struct eng_kv_stats {
    uint32_t blocks;       // arena size
    uint32_t free;         // never used or released without a hash
    uint32_t cached;       // unreferenced but still findable by hash (evictable)
    uint32_t used;         // referenced by at least one sequence
    uint32_t shared;       // referenced by two or more sequences
    uint64_t hit_blocks;   // blocks attached from the cache by eng_seq_open
    uint64_t evictions;    // cached blocks reclaimed for new data
} eng_kv_stats;
void eng_kv_stats_get(const eng_engine *e, eng_kv_stats *st);
// Reference count of the i-th block of s's block table (tests).
uint32_t eng_seq_block_refs(const eng_engine *e, const eng_seq *s, uint32_t i);
// Physical block id of the i-th block of s's block table (tests).
uint32_t eng_seq_block_id(const eng_seq *s, uint32_t i);

// ---- steps ------------------------------------------------------------------------------
// Prefill chunk: runs tokens[0..n) at positions len..len+n of s over its cached context and
// appends their KV. logits (vocab floats, may be NULL) and *next (may be NULL) get the last
// token's logits and their argmax. KVF_ENOMEM (no KV blocks; s unchanged), KVF_EINVAL (n
// exceeds max_step_tokens or max_context).
kvf_status eng_prefill(eng_engine *e, eng_seq *s, const int32_t *tokens, uint32_t n, float *logits,
                       int32_t *next, kvf_err *err);
// Batched decode: sequence i gets token tokens[i] appended at its own position. logits
// ((n, vocab), may be NULL) and next[n] (may be NULL). The sequences must be distinct.
// KVF_ENOMEM when blocks run out (no sequence changed).
kvf_status eng_decode(eng_engine *e, eng_seq *const *seqs, const int32_t *tokens, uint32_t n,
                      float *logits, int32_t *next, kvf_err *err);
// Optional router bias added to every MoE layer's router logits (experts floats; NULL
// clears). The profiler uses it to skew expert load.
void eng_set_router_bias(eng_engine *e, const float *bias);
// Experts chosen for each token of the last step in MoE layer `layer` (tests): idx[t*k + j].
// Returns the number of tokens, 0 when the layer is not MoE or nothing ran.
uint32_t eng_last_routing(const eng_engine *e, uint32_t layer, const int32_t **idx,
                          const float **weight);

// FLOPs and bytes of a step for the whole model as this engine runs it: nseq sequences, each
// with new_tokens[i] tokens over context[i] cached tokens; elem_bytes per stored element.
void eng_step_work(const eng_model_desc *m, uint32_t nseq, const uint32_t *new_tokens,
                   const uint32_t *context, double elem_bytes, double *flops, double *bytes);

// ---- profiler ---------------------------------------------------------------------------
typedef struct eng_profile_config {
    const char *model;        // name or path (default tiny-dense)
    const char *models_dir;   // NULL = default
    eng_backend backend;
    uint32_t threads;   // CPU GEMM threads, 0 = 1
    bool quick;         // small sweep (about a minute on a 2-core CPU)
    uint64_t seed;
    uint32_t max_context;     // > 0: extend the context axes (doubling) to cover this many tokens
    bool cpu_clock;           // cpu backend: time steps by the thread's CPU clock (robust to other
                              //   processes taking the core) instead of the wall clock
    double check_bound_ms;    // --check: probe rows whose stored time is at most this (0 = 2000)
    double check_max_ratio;   // --check: > 1 fails (KVF_ERUN) when a probe's measured/stored
                              //   ratio leaves [1/r, r]; 0 = report only
} eng_profile_config;

// Runs the sweep and writes the profile CSV to f (format in engine/README.md: `# key: value`
// comment lines, then the header
// model,hardware,backend,op,batch,new_tokens,context,median_ns,p10_ns,p90_ns,repeats,flops,bytes).
// progress (may be NULL) gets one line per row.
kvf_status eng_profile_run(const eng_profile_config *c, FILE *f, FILE *progress, kvf_err *err);
// Re-measures a probe subset of the profile at path on this machine: per op (prefill, decode)
// the smallest, a middle and the largest row whose stored time is within c->check_bound_ms
// (the smallest row alone when none is; by the profile's own clock; model from the profile unless
// c->model is set; backend c->backend) and writes
// `op,batch,new_tokens,context,stored_ns,measured_ns,ratio` lines and the median drift to out.
// KVF_ENOENT / KVF_EPARSE (path:line) for a bad profile; KVF_ERUN when c->check_max_ratio > 1 and a
// probe's ratio falls outside [1/r, r].
kvf_status eng_profile_check(const eng_profile_config *c, const char *path, FILE *out,
                             kvf_err *err);
// The same, and *ratio = the median measured/stored ratio over the probes; kind (NULL allowed)
// gets that median over the prefill probes ([0]) and over the decode probes ([1]), NAN for a
// kind without one, each also written to out as a `# median drift of the ... probes` line.
kvf_status eng_profile_check_ratio(const eng_profile_config *c, const char *path, FILE *out,
                                   double *ratio, double *kind, kvf_err *err);

// Timing probes: ENG_PROBE_SHAPES fixed small steps (prefill 12@0 and 128@256, decode 4@256 and
// 16@512 as new tokens or batch @ context) on an engine of their own (~1 MB of KV next to the
// weights), timed one step at a time by wall and thread CPU clocks. Measured before, during
// (in idle gaps) and after a serve, their spread is how much this machine's speed moved.
enum { ENG_PROBE_SHAPES = 4 };
typedef struct eng_prober eng_prober;
kvf_status eng_prober_create(eng_prober **out, const char *model, const char *models_dir,
                             eng_backend b, uint32_t threads, kvf_err *err);
// One timed step of probe shape i (< ENG_PROBE_SHAPES).
kvf_status eng_prober_run(eng_prober *p, uint32_t shape, double *wall_ns, double *cpu_ns,
                          kvf_err *err);
void eng_prober_destroy(eng_prober *p);
const char *eng_prober_hardware(const eng_prober *p);   // the hardware id the engine reports
// "prefill 12@0" etc.
void eng_probe_shape(uint32_t i, char *name, size_t n);

// ---- serving loop -----------------------------------------------------------------------
// One request of a (time-scaled) trace.
typedef struct eng_request {
    int64_t arrival_ns;       // since the start of the run (already time-scaled)
    uint32_t input_tokens;    // prompt length, >= 1
    uint32_t output_tokens;   // tokens to generate, >= 1 (the first comes from prefill)
    uint32_t n_blocks;        // chained block ids of the prompt, block_tokens each (last may
    const uint64_t *blocks;   //   be partial); equal ids = equal tokens; may be NULL/0
    uint64_t session;         // session id (informational)
} eng_request;

typedef struct eng_serve_config {
    const char *model;        // name or path
    const char *models_dir;   // NULL = default
    eng_backend backend;
    uint32_t max_batch_tokens;   // token budget of one step (decodes + prefill chunks), default 512
    uint32_t max_batch_requests;   // most requests running at once (so per step), default 32
    uint32_t kv_blocks;            // KV arena size in blocks; 0 = max_batch_requests requests of
                                   //   the longest length, within 1 GiB (cpu) / 16 GiB (cuda)
    uint32_t block_tokens;         // tokens per block = the trace's block size, default 16
    uint32_t threads;              // CPU GEMM threads, 0 = 1
    uint64_t seed;                 // weight seed
    bool no_sleep;                 // tests: admit requests as if time jumped to their arrival
    // Optional: called when the loop is idle and the next arrival is at least idle_min_ns
    // away, before it sleeps; gets the idle time left (ns). Used to run timing probes in the
    // gaps (on another engine) without delaying any request. Its time is counted in probe_ns.
    void (*idle_hook)(void *ctx, int64_t idle_ns);
    void *idle_ctx;
    int64_t idle_min_ns;
    // Optional: called between two steps, after a step ended at least busy_every_ns of the
    // run's clock since its last call, with the clock's time. The clock stops while it runs
    // (its time is taken off the clock and counted in busy_probe_ns), so no arrival, step or
    // wait moves: probes of the machine's speed while the loop is busy.
    void (*busy_hook)(void *ctx, int64_t now_ns);
    void *busy_ctx;
    int64_t busy_every_ns;
} eng_serve_config;

void eng_serve_config_default(eng_serve_config *c);
// CPU time consumed by the calling thread (CLOCK_THREAD_CPUTIME_ID), ns.
int64_t eng_thread_cpu_ns(void);

enum { ENG_REQ_DONE = 0, ENG_REQ_REJECTED = 1 };   // eng_request_result.status

// Per request, wall clock ns since the start of the run.
typedef struct eng_request_result {
    int64_t arrival_ns;       // when it was due (== request arrival_ns)
    int64_t admitted_ns;      // first time it was scheduled
    int64_t seen_ns;          // when the loop took it into its queue (arrival + wake-up latency)
    int64_t first_token_ns;   // end of the step that produced its first token
    int64_t last_token_ns;    // end of the step that produced its last token
    int64_t completion_ns;    // when it left the server (== last_token_ns), -1 if rejected
    uint32_t input_tokens;
    uint32_t output_tokens;   // generated
    uint32_t cached_tokens;   // prompt tokens found in the prefix cache at first admission
    uint32_t preemptions;     // times it was evicted and recomputed
    uint32_t status;          // ENG_REQ_DONE or ENG_REQ_REJECTED (longer than the arena)
} eng_request_result;

enum { ENG_STEP_PREFILL = 0, ENG_STEP_DECODE = 1, ENG_STEP_MIXED = 2 };

typedef struct eng_step_record {
    int64_t start_ns;          // wall clock since start of run
    int64_t duration_ns;       // whole step: scheduling + forward passes + bookkeeping
    int64_t forward_ns;        // forward passes as eng_last_forward_ns times them (device
                               //   events on cuda); duration - forward = host overhead
    uint32_t phase;            // ENG_STEP_*
    uint32_t batch;            // sequences in the step
    uint32_t tokens;           // tokens computed (prefill chunk tokens + decodes)
    uint32_t prefill_tokens;   // of which prefill
    uint32_t context_tokens;   // sum of the cached context the step attended over
    int64_t after_ns;          // the loop's own time after the step until the next step began,
                               //   waits for arrivals (and probes in them) excluded
    int64_t cpu_ns;            // thread CPU time of the whole step (CLOCK_THREAD_CPUTIME_ID):
                               //   what the step cost this thread, whatever else ran beside it
    uint32_t decode_seqs;      // sequences that decoded one token
    uint32_t decode_context;   // sum of their contexts
    uint32_t chunk0;           // its prefill chunks: chunks[chunk0 .. chunk0 + n_chunks)
    uint32_t n_chunks;
} eng_step_record;

// One prefill chunk of a step: tokens computed over context already in KV.
typedef struct eng_chunk {
    uint32_t tokens, context;
} eng_chunk;

typedef struct eng_serve_result {
    eng_request_result *requests;   // [n_requests], same order as the input
    size_t n_requests;
    eng_step_record *steps;   // [n_steps]
    size_t n_steps;
    eng_chunk *chunks;   // [n_chunks], referenced by steps
    size_t n_chunks;
    int64_t idle_ns;         // time the loop waited for arrivals (sleeping or in idle_hook)
    int64_t probe_ns;        // of which spent in idle_hook
    int64_t busy_probe_ns;   // wall time in busy_hook, off the run's clock
    int64_t late_ns;   // sum over waits of how late the loop woke after the arrival it awaited
    uint64_t preemptions;
    uint64_t prompt_tokens;    // sum of input tokens (first admissions)
    uint64_t cached_tokens;    // of which served from the prefix cache
    uint64_t prefill_tokens;   // prefill tokens computed (recomputes included)
    uint64_t decode_tokens;
    int64_t wall_ns;   // run length
    char hardware[ENG_NAME_MAX];
    char model[ENG_NAME_MAX];
    char backend[8];
} eng_serve_result;

// Serves reqs[0..n) (sorted by arrival_ns or not; they are admitted when due) on this machine
// with continuous batching:
//  - arrivals in wall-clock time: the loop sleeps until the next arrival when idle;
//  - each step: every running sequence decodes one token (up to max_batch_requests), then the
//    remaining token budget (max_batch_tokens) goes to prefill chunks, oldest request first;
//  - prompts are token ids derived from the block ids (equal ids, equal tokens), so prefixes
//    are reused through the paged cache (full blocks only);
//  - when KV blocks run out, the newest running request is preempted (its blocks released)
//    and later recomputed from its prompt plus the tokens it had generated;
//  - a request longer than the whole arena is rejected (status ENG_REQ_REJECTED).
// Fills *out (caller frees with eng_serve_result_free). Errors: model file problems
// (KVF_EPARSE/ENOENT/EINVAL), KVF_ENOMEM, KVF_ENODEV (cuda unavailable), bad requests
// (KVF_EINVAL naming the request index).
kvf_status eng_serve_run(const eng_serve_config *c, const eng_request *reqs, size_t n,
                         eng_serve_result *out, kvf_err *err);
void eng_serve_result_free(eng_serve_result *r);

// `kvfleet engine profile|info|bench ...` (argv[1] is the subcommand). Returns the exit code.
int eng_cli_main(int argc, char **argv);

#endif
