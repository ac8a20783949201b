// engine/eng_cuda.h -- the CUDA backend's entry points, in plain C (no CUDA header here; the
// implementation is engine/cuda/eng_cuda.cu). Also defines eng_batch, the description of one
// forward pass shared by both backends. Without KVF_HAVE_CUDA only eng_batch is used.
//
// Error convention: creation returns a status (0 ok, ENG_CUDA_NODEV, ENG_CUDA_NOMEM,
// ENG_CUDA_FAIL) with a message so the caller can fall back to the CPU; after creation every
// CUDA/cuBLAS call is checked and a failure aborts with the statement and file:line.
#ifndef ENG_CUDA_H
#define ENG_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// One forward pass. Sequence i owns tokens [start[i], start[i] + nnew[i]) of the batch, at
// positions ctx[i] .. ctx[i] + nnew[i] - 1; its block table is table[i * table_stride ...].
typedef struct eng_batch {
    uint32_t nseq;           // sequences
    uint32_t ntok;           // new tokens, all sequences
    const int32_t *tokens;   // [ntok] token ids
    const int32_t *pos;      // [ntok] absolute positions
    const uint32_t *start;   // [nseq] first token of sequence i in the batch
    const uint32_t *nnew;    // [nseq] new tokens of sequence i
    const uint32_t *ctx;     // [nseq] tokens already in KV before this pass
    const int32_t *table;    // [nseq * table_stride] physical block ids
    uint32_t table_stride;   // entries per sequence (max blocks of a sequence)
} eng_batch;

enum { ENG_CUDA_OK = 0, ENG_CUDA_NODEV = 1, ENG_CUDA_NOMEM = 2, ENG_CUDA_FAIL = 3 };

// Weight offsets of one layer (elements; (size_t)-1 = absent), as in eng_layer_layout.
typedef struct eng_cuda_layer {
    size_t attn_norm, wqkv, wo, ffn_norm, w_gu, w_down, router, exp_gu, exp_down, sh_gu, sh_down;
    uint32_t windowed;   // layer uses the sliding window
    uint32_t moe;        // layer has routed experts
} eng_cuda_layer;

typedef struct eng_cuda_spec {
    uint32_t layers, hidden, heads, kv_heads, head_dim, ffn, vocab;
    uint32_t experts, experts_active, expert_ffn, shared_ffn;   // shared_ffn = shared*expert_ffn
    uint32_t window;
    float rope_theta, norm_eps;
    uint64_t seed;
    size_t embed, final_norm, lm_head, total;   // weight arena (elements)
    const eng_cuda_layer *layer;                // [layers]
    uint32_t n_tensors;                         // weight init table (see eng_layout_tensor)
    const size_t *t_off, *t_n;
    const uint32_t *t_kind, *t_cols;
    uint32_t nblocks, block_tokens;   // KV arena
    uint32_t max_step_tokens, max_seqs, max_context, max_blocks;
    double mem_limit_bytes;   // 0 = free device memory
} eng_cuda_spec;

typedef struct eng_cuda_ctx eng_cuda_ctx;

// The backend is a shared object (libkvfleet-cuda.so, linked with cudart and cuBLAS) that the
// engine loads on first use (engine/eng_cuda_load.c), so nothing that stays on the CPU maps
// CUDA. The C side defines the functions below as calls into the module; the module defines
// them for real, plus eng_cuda_abi, which must return ENG_CUDA_ABI (bump it when a signature
// or struct here changes, so a stale module is refused rather than called wrongly).
#define ENG_CUDA_ABI 1
#define ENG_CUDA_MODULE "libkvfleet-cuda.so"
int eng_cuda_abi(void);
// Loads the module once (thread-safe). 0 when it is loaded; otherwise ENG_CUDA_NODEV with the
// reason (where it was looked for, dlopen's message) in msg. Without the module
// eng_cuda_device_count is 0, eng_cuda_create fails with ENG_CUDA_NODEV and the benches
// return < 0; the calls taking a context are never reached.
int eng_cuda_load(char *msg, size_t cap);

// Devices visible (0 when the driver or device is missing).
int eng_cuda_device_count(void);
// Name of device 0 into out; 0 on success.
int eng_cuda_device_name(char *out, size_t cap);
// Allocates the bf16 weight arena (initialised on the device from the counter-based
// definition), the bf16 KV arena and the activations; creates the cuBLAS handle and stream.
// Returns ENG_CUDA_* with a message in msg; *out is NULL unless ENG_CUDA_OK.
int eng_cuda_create(eng_cuda_ctx **out, const eng_cuda_spec *s, char *msg, size_t cap);
void eng_cuda_destroy(eng_cuda_ctx *c);
// Device bytes of the three arenas.
void eng_cuda_arena_bytes(const eng_cuda_ctx *c, double *w, double *kv, double *act);
// Runs one pass (synchronous). router_bias [experts] or NULL; logits (nseq, vocab) or NULL;
// next [nseq] or NULL; route_idx/route_w [layers][max_step_tokens*k] (host) get the routing;
// *device_ms the pass's time from CUDA events.
void eng_cuda_forward(eng_cuda_ctx *c, const eng_batch *b, const float *router_bias, float *logits,
                      int32_t *next, int32_t *route_idx, float *route_w, float *device_ms);
// Synthetic K and V for nseg segments (slots [slot0[i], slot0[i]+n[i]) of block block[i]),
// every layer, in one launch.
void eng_cuda_fill_kv(eng_cuda_ctx *c, const uint32_t *block, const uint32_t *slot0,
                      const uint32_t *n, uint32_t nseg, uint64_t seed);
// cuBLAS bf16 GEMM (M,N,K), fp32 accumulate: achieved TFLOP/s (median of iters); < 0 without
// a device.
double eng_cuda_bench_gemm(int M, int N, int K, int iters);
// Paged decode attention alone (batch seqs x context tokens, heads/kv_heads/head_dim): achieved
// GB/s of KV read (median of iters); < 0 without a device.
double eng_cuda_bench_decode_attn(int batch, int context, int heads, int kv_heads, int head_dim,
                                  int block_tokens, int iters);

#ifdef __cplusplus
}
#endif
#endif
