// engine/eng_int.h -- internals shared by the engine's files (not part of the public API).
//
// A forward pass is described by one eng_batch, built by eng_engine.c and run by a backend
// (cpu/eng_cpu.c or, through the plain-C eng_cuda.h, cuda/eng_cuda.cu). Sequence i owns
// tokens [start[i], start[i] + nnew[i]) of the batch, at positions ctx[i] .. ctx[i]+nnew[i]-1;
// its block table is table[i * table_stride ...].
#ifndef ENG_INT_H
#define ENG_INT_H

#include "eng.h"
#include "eng_cuda.h"   // plain C: eng_batch and the CUDA backend's entry points

typedef struct eng_block {
    uint32_t refs;                 // sequences holding it
    uint32_t hnext;                // next block in the same hash bucket (UINT32_MAX = end)
    uint32_t lru_prev, lru_next;   // evictable list (refs == 0 and hashed)
    uint64_t hash;                 // chained hash when registered
    bool hashed;                   // findable in the prefix table
} eng_block;

struct eng_seq {
    uint32_t slot;      // index in the engine's sequence table
    uint32_t len;       // tokens in KV
    uint32_t nblocks;   // blocks in the table
    uint32_t *table;    // [max_blocks] block ids
    int32_t *tok;       // [max_context] token ids (for hashing full blocks)
    uint64_t *bhash;    // [max_blocks] chained hash of each full block
};

typedef struct eng_cpu eng_cpu;

struct eng_engine {
    eng_model_desc m;
    eng_options o;
    eng_layout lay;
    char hw[ENG_NAME_MAX];
    // KV block manager
    uint32_t nblocks, bt, max_blocks;   // arena blocks, tokens/block, blocks per sequence
    size_t block_elems;                 // elements of one block (all layers, K and V)
    eng_block *blocks;
    uint32_t *free_stack, nfree;
    uint32_t lru_head, lru_tail, ncached;
    uint32_t *buckets, bucket_mask;
    uint64_t hit_blocks, evictions;
    // sequences
    eng_seq **seqs;   // [max_seqs], NULL = free slot
    uint32_t nseqs_open;
    // batch scratch
    int32_t *b_tokens, *b_pos, *b_table;
    uint32_t *b_start, *b_new, *b_ctx;
    // MoE routing of the last pass, per layer: idx/w [layers][max_step_tokens * k]
    int32_t *route_idx;
    float *route_w;
    uint32_t route_ntok;
    float *router_bias;   // [experts] or NULL
    int64_t last_forward_ns;
    double bytes_w, bytes_kv, bytes_act;
    eng_cpu *cpu;
    void *cuda;   // eng_cuda_ctx *
};

// ---- eng_model.c --------------------------------------------------------------------------
// Fills the layout (the sizes table) of model m; lay->layer is allocated (eng_layout_free).
void eng_layout_build(eng_layout *lay, const eng_model_desc *m);
void eng_layout_free(eng_layout *lay);
// Number of tensors in the layout and tensor i's (offset, elements, kind): kind 0 = matrix
// (uniform, variance 1/cols), 1 = norm gain (1 + 0.1 u), 2 = embedding (uniform [-1, 1)).
uint32_t eng_layout_tensors(const eng_layout *lay, const eng_model_desc *m);
void eng_layout_tensor(const eng_layout *lay, const eng_model_desc *m, uint32_t i, size_t *off,
                       size_t *n, uint32_t *kind, uint32_t *cols);
// Value of element j of tensor i (the definition of the weights; the CUDA init mirrors it).
static inline uint64_t eng_mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static inline float eng_weight_value(uint64_t seed, uint32_t tensor, uint64_t j, uint32_t kind,
                                     uint32_t cols) {
    uint64_t h = eng_mix64(eng_mix64(seed * 0x100000001b3ULL + tensor) + j);
    float u = (float)(h >> 40) * (1.0f / 8388608.0f) - 1.0f;   // [-1, 1)
    if (kind == 1) return 1.0f + 0.1f * u;
    if (kind == 2) return u;
    return u * (1.7320508f / __builtin_sqrtf((float)cols));
}
// Synthetic KV value (profiling fills): small uniform values.
static inline float eng_kv_value(uint64_t seed, uint64_t j) {
    return (float)(eng_mix64(seed + j) >> 40) * (1.0f / 8388608.0f) - 1.0f;
}
// Physical memory of the machine in bytes.
double eng_phys_mem_bytes(void);
// Fills out (cap bytes) with "cpu-<model name>" sanitised.
void eng_cpu_hardware_id(char *out, size_t cap);
// Lower-cases and maps anything outside [a-z0-9] to '-', squeezing repeats.
void eng_sanitize_id(char *s);

// ---- eng_kv.c -------------------------------------------------------------------------------
kvf_status eng_kv_init(eng_engine *e, kvf_err *err);
void eng_kv_free(eng_engine *e);
// Takes blocks so that s can hold len + n tokens; false (nothing taken) when they run out.
bool eng_seq_reserve(eng_engine *e, eng_seq *s, uint32_t n);
// After a pass appended n tokens (ids tok) to s: updates len, registers blocks that filled.
void eng_seq_commit(eng_engine *e, eng_seq *s, const int32_t *tok, uint32_t n);

// ---- eng_engine.c -------------------------------------------------------------------------
// Writes synthetic K and V on the engine's backend into nseg segments: slots
// [slot0[i], slot0[i] + n[i]) of block block[i], every layer.
void eng_backend_fill_kv(eng_engine *e, const uint32_t *block, const uint32_t *slot0,
                         const uint32_t *n, uint32_t nseg, uint64_t seed);

// ---- cpu/eng_cpu.c ------------------------------------------------------------------------
kvf_status eng_cpu_create(eng_engine *e, kvf_err *err);
void eng_cpu_destroy(eng_engine *e);
// Runs the pass; logits (nseq, vocab) may be NULL; next[nseq] argmax (may be NULL).
void eng_cpu_forward(eng_engine *e, const eng_batch *b, float *logits, int32_t *next);
// Writes synthetic K and V for slots [slot0, slot0+n) of block `block`, every layer.
void eng_cpu_fill_kv(eng_engine *e, uint32_t block, uint32_t slot0, uint32_t n, uint64_t seed);
// Bytes of the CPU activation arena for these options.
double eng_cpu_act_bytes(const eng_model_desc *m, const eng_options *o);
// C(M,N) = alpha A(M,K) B(N,K)^T + beta C, row-major with leading dims (BLAS or blocked loop).
void eng_sgemm_nt(uint32_t M, uint32_t N, uint32_t K, float alpha, const float *A, size_t lda,
                  const float *B, size_t ldb, float beta, float *C, size_t ldc);
// Loads OpenBLAS (once, on first use; built with KVF_HAVE_BLAS) before any GEMM: KVF_ERUN
// naming the library when it cannot be loaded. KVF_OK without BLAS (the blocked loop).
kvf_status eng_cpu_blas_load(kvf_err *err);
// Sets the GEMM thread count (0 = all cores). After eng_cpu_blas_load.
void eng_cpu_set_threads(uint32_t n);

// ---- eng_serve.c --------------------------------------------------------------------------
// The serving loop on an existing engine (the profiler uses it to measure host overhead).
kvf_status eng_serve_on(eng_engine *e, const eng_serve_config *c, const eng_request *reqs, size_t n,
                        eng_serve_result *out, kvf_err *err);

#endif
