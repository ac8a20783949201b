// engine/cuda/eng_cuda.cu -- the CUDA backend: bf16 storage, fp32 accumulation; cuBLAS for
// every matrix product, own kernels for embedding, RMSNorm, RoPE + KV write, paged attention
// (prefill: one warp per query head with an online softmax; decode: split-K over the context,
// one block per (sequence, kv head, split) reading each K/V row once for the whole query
// group, then a merge), SwiGLU, MoE top-k / gather / combine, argmax.
//
// It mirrors cpu/eng_cpu.c step by step (that file is the specification); the residual stream
// stays fp32, GEMM inputs are bf16, GEMM outputs fp32 (the residual adds use beta = 1).
//
// Arenas (one cudaMalloc each): weights (bf16, eng_layout offsets), KV (bf16, same block
// layout as the CPU: block b, layer l: K (bt, kv_heads, head_dim) then V), activations.
// Batch metadata goes up in one copy from a pinned staging buffer. MoE routing comes back to
// the host once per MoE layer (to size the per-expert GEMMs), which is a synchronisation point.
//
// Errors: CUDA_CHECK / CUBLAS_CHECK abort with the statement and file:line; every launch is
// followed by cudaGetLastError(). eng_cuda_create returns a status instead.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "eng_cuda.h"

#define CUDA_CHECK(x)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "kvfleet: CUDA error '%s' at %s:%d: %s\n", cudaGetErrorString(e_),     \
                    __FILE__, __LINE__, #x);                                                       \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#define CUBLAS_CHECK(x)                                                                            \
    do {                                                                                           \
        cublasStatus_t s_ = (x);                                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "kvfleet: cuBLAS error %d at %s:%d: %s\n", (int)s_, __FILE__,          \
                    __LINE__, #x);                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

typedef __nv_bfloat16 bf16;

static const size_t NONE = (size_t)-1;
enum { SPLIT_KEYS = 256, DEC_WARPS = 4 };

// ---- the weight definition (mirrors eng_weight_value / eng_kv_value in eng_int.h) --------
__host__ __device__ static inline uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

__device__ static inline float weight_value(uint64_t seed, uint32_t tensor, uint64_t j,
                                            uint32_t kind, uint32_t cols) {
    uint64_t h = mix64(mix64(seed * 0x100000001b3ULL + tensor) + j);
    float u = (float)(h >> 40) * (1.0f / 8388608.0f) - 1.0f;
    if (kind == 1) return 1.0f + 0.1f * u;
    if (kind == 2) return u;
    return u * (1.7320508f / sqrtf((float)cols));
}

__device__ static inline float kv_value(uint64_t seed, uint64_t j) {
    return (float)(mix64(seed + j) >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

// ---- context ------------------------------------------------------------------------------
struct eng_cuda_ctx {
    eng_cuda_spec s;
    std::vector<eng_cuda_layer> layer;
    uint32_t qd, kvd, qkvd, G, F, K;   // derived sizes; F = widest FFN; K = top-k (>= 1)
    size_t block_elems;
    bf16 *w, *kv;
    char *act;
    // activation views
    float *x, *qkv, *gu, *rl, *rw, *gug, *yg, *lg, *inv_freq, *part_o, *part_ml;
    bf16 *xn, *att, *h, *xg, *hg, *xl;
    int *ridx, *gtok, *slot_of, *amax, *meta;
    float *bias;
    size_t meta_ints;
    int *h_meta;                      // pinned staging for the batch metadata
    uint32_t *seg, *h_seg, seg_cap;   // synthetic-fill segments (device, pinned host)
    std::vector<int> h_ridx, h_gtok, h_slot, h_cnt;
    std::vector<float> h_rw;
    cudaStream_t st;
    cublasHandle_t cb;
    cudaEvent_t ev0, ev1;
    double bytes_w, bytes_kv, bytes_act;
};

static void gemm(eng_cuda_ctx *c, int M, int N, int K, const bf16 *A, int lda, const bf16 *W,
                 int ldw, void *C, cudaDataType ct, int ldc, float beta) {
    // row-major C(M,N) = A(M,K) W(N,K)^T  ==  column-major C^T(N,M) = W^T... (see README)
    if (M <= 0 || N <= 0) return;
    float alpha = 1.0f;
    CUBLAS_CHECK(cublasGemmEx(c->cb, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, W, CUDA_R_16BF, ldw,
                              A, CUDA_R_16BF, lda, &beta, C, ct, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
}

// ---- kernels ------------------------------------------------------------------------------
__global__ void k_init(bf16 *w, size_t n, uint64_t seed, uint32_t tensor, uint32_t kind,
                       uint32_t cols) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n;
         j += (size_t)gridDim.x * blockDim.x)
        w[j] = __float2bfloat16(weight_value(seed, tensor, j, kind, cols));
}

__global__ void k_fill(bf16 *p, size_t n, uint64_t seed) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n;
         j += (size_t)gridDim.x * blockDim.x)
        p[j] = __float2bfloat16(kv_value(seed, j));
}

// x(t, :) = embed(tok[t], :)
__global__ void k_embed(float *x, const bf16 *emb, const int *tok, int d) {
    int t = blockIdx.x;
    const bf16 *e = emb + (size_t)tok[t] * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x)
        x[(size_t)t * d + i] = __bfloat162float(e[i]);
}

__device__ static inline float block_sum(float v) {
    __shared__ float sh[32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    __syncthreads();
    if (l == 0) sh[w] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) / 32;
    v = l < nw ? sh[l] : 0.0f;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// out(r, :) = x(rows ? rows[r] : r, :) / rms * g, as bf16
__global__ void k_rmsnorm(bf16 *out, const float *x, const bf16 *g, const int *rows, int d,
                          float eps) {
    int r = blockIdx.x;
    const float *a = x + (size_t)(rows ? rows[r] : r) * d;
    float ss = 0;
    for (int i = threadIdx.x; i < d; i += blockDim.x)
        ss += a[i] * a[i];
    ss = block_sum(ss);
    float inv = rsqrtf(ss / d + eps);
    for (int i = threadIdx.x; i < d; i += blockDim.x)
        out[(size_t)r * d + i] = __float2bfloat16(a[i] * inv * __bfloat162float(g[i]));
}

// RoPE on q and k of token t (in place in qkv), then K and V into their page slots.
__global__ void k_rope_store(float *qkv, bf16 *kv, const int *pos, const int *tokseq,
                             const int *table, int stride, const float *inv_freq, int H, int KVH,
                             int hd, int bt, size_t block_elems, size_t layer_off) {
    int t = blockIdx.x, half = hd / 2;
    int qd = H * hd, kvd = KVH * hd;
    float *row = qkv + (size_t)t * (qd + 2 * kvd);
    int p = pos[t];
    int blk = table[tokseq[t] * stride + p / bt], slot = p % bt;
    bf16 *kd = kv + (size_t)blk * block_elems + layer_off + (size_t)slot * kvd;
    bf16 *vd = kd + (size_t)bt * kvd;
    for (int k = threadIdx.x; k < (H + KVH) * half; k += blockDim.x) {
        int h = k / half, i = k % half;
        float s, co;
        sincosf((float)p * inv_freq[i], &s, &co);
        float *v = row + (size_t)h * hd;   // q heads then k heads (contiguous)
        float x0 = v[i], x1 = v[i + half];
        float y0 = x0 * co - x1 * s, y1 = x0 * s + x1 * co;
        v[i] = y0;
        v[i + half] = y1;
        if (h >= H) {
            kd[(h - H) * hd + i] = __float2bfloat16(y0);
            kd[(h - H) * hd + i + half] = __float2bfloat16(y1);
        }
    }
    for (int i = threadIdx.x; i < kvd; i += blockDim.x)
        vd[i] = __float2bfloat16(row[qd + kvd + i]);
}

__device__ static inline float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Lane slice of a bf16 row -> DPL floats, with one vector load (the slice is DPL*2-byte
// aligned: rows start at multiples of head_dim elements).
template <int DPL> __device__ static inline void load_slice(const bf16 *p, float *f) {
    if constexpr (DPL == 1) {
        f[0] = __bfloat162float(p[0]);
    } else if constexpr (DPL == 2) {
        float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p));
        f[0] = v.x, f[1] = v.y;
    } else if constexpr (DPL == 4) {
        uint2 u = *reinterpret_cast<const uint2 *>(p);
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
        for (int k = 0; k < 2; k++) {
            float2 v = __bfloat1622float2(h[k]);
            f[2 * k] = v.x, f[2 * k + 1] = v.y;
        }
    } else {
        uint4 u = *reinterpret_cast<const uint4 *>(p);
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float2 v = __bfloat1622float2(h[k]);
            f[2 * k] = v.x, f[2 * k + 1] = v.y;
        }
    }
}

// Prefill (and fallback) attention: one warp per (token, query head), online softmax over
// the keys [first, pos] read from the pages; lane i holds dims [i*DPL, (i+1)*DPL).
template <int DPL>
__global__ void k_attn_prefill(bf16 *out, const float *qkv, const bf16 *kv, const int *pos,
                               const int *tokseq, const int *table, int stride, int ntok, int H,
                               int KVH, int bt, size_t block_elems, size_t layer_off, int window,
                               float scale) {
    int wid = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (wid >= ntok * H) return;
    const int hd = DPL * 32;
    int t = wid / H, h = wid % H, g = h / (H / KVH);
    int qd = H * hd, kvd = KVH * hd;
    const float *q = qkv + (size_t)t * (qd + 2 * kvd) + (size_t)h * hd + lane * DPL;
    float qr[DPL], o[DPL];
    for (int i = 0; i < DPL; i++)
        qr[i] = q[i] * scale, o[i] = 0;
    int p = pos[t];
    int first = window > 0 && p + 1 > window ? p + 1 - window : 0;
    const int *tab = table + tokseq[t] * stride;
    float m = -INFINITY, l = 0;
    for (int j = first; j <= p; j++) {
        const bf16 *kr = kv + (size_t)tab[j / bt] * block_elems + layer_off +
                         (size_t)(j % bt) * kvd + (size_t)g * hd + lane * DPL;
        float kf[DPL], vf[DPL];
        load_slice<DPL>(kr, kf);
        load_slice<DPL>(kr + (size_t)bt * kvd, vf);
        float s = 0;
#pragma unroll
        for (int i = 0; i < DPL; i++)
            s += qr[i] * kf[i];
        s = warp_sum(s);
        float mn = fmaxf(m, s), corr = __expf(m - mn), e = __expf(s - mn);
        l = l * corr + e;
#pragma unroll
        for (int i = 0; i < DPL; i++)
            o[i] = o[i] * corr + e * vf[i];
        m = mn;
    }
    bf16 *dst = out + (size_t)t * qd + (size_t)h * hd + lane * DPL;
    for (int i = 0; i < DPL; i++)
        dst[i] = __float2bfloat16(o[i] / l);
}

// Decode attention, split-K: block (seq, kv head, split) of DEC_WARPS warps; warp w takes keys
// start + w, start + w + DEC_WARPS, ...; every K/V row is read once for the G query heads.
// Writes un-normalised partials (o, m, l) per (seq, head, split).
template <int DPL, int G>
__global__ void k_attn_decode(float *part_o, float *part_ml, const float *qkv, const bf16 *kv,
                              const int *pos, const int *table, int stride, int H, int KVH, int bt,
                              size_t block_elems, size_t layer_off, int window, float scale,
                              int nsplit) {
    const int hd = DPL * 32;
    int s = blockIdx.x, g = blockIdx.y, sp = blockIdx.z;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int qd = H * hd, kvd = KVH * hd;
    int p = pos[s];   // decode: token s belongs to sequence s
    int first = window > 0 && p + 1 > window ? p + 1 - window : 0;
    int k0 = first + sp * SPLIT_KEYS, k1 = min(p + 1, k0 + SPLIT_KEYS);
    float qr[G][DPL], o[G][DPL], m[G], l[G];
    const float *q = qkv + (size_t)s * (qd + 2 * kvd) + (size_t)g * G * hd + lane * DPL;
#pragma unroll
    for (int h = 0; h < G; h++) {
        m[h] = -INFINITY, l[h] = 0;
        for (int i = 0; i < DPL; i++)
            qr[h][i] = q[h * hd + i] * scale, o[h][i] = 0;
    }
    const int *tab = table + s * stride;
    for (int j = k0 + warp; j < k1; j += DEC_WARPS) {
        const bf16 *kr = kv + (size_t)tab[j / bt] * block_elems + layer_off +
                         (size_t)(j % bt) * kvd + (size_t)g * hd + lane * DPL;
        const bf16 *vr = kr + (size_t)bt * kvd;
        float kf[DPL], vf[DPL];
        load_slice<DPL>(kr, kf);
        load_slice<DPL>(vr, vf);
#pragma unroll
        for (int h = 0; h < G; h++) {
            float d = 0;
            for (int i = 0; i < DPL; i++)
                d += qr[h][i] * kf[i];
            d = warp_sum(d);
            float mn = fmaxf(m[h], d), corr = __expf(m[h] - mn), e = __expf(d - mn);
            l[h] = l[h] * corr + e;
            for (int i = 0; i < DPL; i++)
                o[h][i] = o[h][i] * corr + e * vf[i];
            m[h] = mn;
        }
    }
    // merge the warps through shared memory
    __shared__ float sm[DEC_WARPS][G][2];
    __shared__ float so[DEC_WARPS][G][DPL * 32];
#pragma unroll
    for (int h = 0; h < G; h++) {
        if (lane == 0) sm[warp][h][0] = m[h], sm[warp][h][1] = l[h];
        for (int i = 0; i < DPL; i++)
            so[warp][h][lane * DPL + i] = o[h][i];
    }
    __syncthreads();
    for (int k = threadIdx.x; k < G * hd; k += blockDim.x) {
        int h = k / hd, i = k % hd;
        float M = -INFINITY;
        for (int w = 0; w < DEC_WARPS; w++)
            M = fmaxf(M, sm[w][h][0]);
        float L = 0, O = 0;
        if (M > -INFINITY)
            for (int w = 0; w < DEC_WARPS; w++) {
                float f = sm[w][h][0] > -INFINITY ? __expf(sm[w][h][0] - M) : 0.0f;
                L += f * sm[w][h][1];
                O += f * so[w][h][i];
            }
        size_t idx = ((size_t)s * H + g * G + h) * nsplit + sp;
        part_o[idx * hd + i] = O;
        if (i == 0) part_ml[idx * 2] = M, part_ml[idx * 2 + 1] = L;
    }
}

// Merges the splits of (seq, head) into att (bf16).
__global__ void k_attn_merge(bf16 *out, const float *part_o, const float *part_ml, int H, int hd,
                             int nsplit) {
    int sh = blockIdx.x;   // seq * H + head
    float M = -INFINITY;
    for (int k = 0; k < nsplit; k++)
        M = fmaxf(M, part_ml[((size_t)sh * nsplit + k) * 2]);
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        float L = 0, O = 0;
        for (int k = 0; k < nsplit; k++) {
            size_t idx = (size_t)sh * nsplit + k;
            float m = part_ml[idx * 2];
            if (m == -INFINITY) continue;
            float f = __expf(m - M);
            L += f * part_ml[idx * 2 + 1];
            O += f * part_o[idx * hd + i];
        }
        out[(size_t)sh * hd + i] = __float2bfloat16(O / L);
    }
}

// h(t, i) = silu(gu(t, i)) * gu(t, F + i)
__global__ void k_swiglu(bf16 *h, const float *gu, int n, int F) {
    size_t total = (size_t)n * F;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total;
         k += (size_t)gridDim.x * blockDim.x) {
        size_t t = k / F, i = k % F;
        float g = gu[t * 2 * F + i], u = gu[t * 2 * F + F + i];
        h[k] = __float2bfloat16(g / (1.0f + __expf(-g)) * u);
    }
}

// Top-k of each token's router logits (lowest index wins ties), weights = softmax over the k.
__global__ void k_topk(int *idx, float *w, float *logits, const float *bias, int n, int E, int K) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    float *z = logits + (size_t)t * E;
    if (bias)
        for (int i = 0; i < E; i++)
            z[i] += bias[i];
    float top = 0, sum = 0;
    for (int j = 0; j < K; j++) {
        int best = -1;
        for (int i = 0; i < E; i++) {
            bool taken = false;
            for (int q = 0; q < j; q++)
                taken |= idx[t * K + q] == i;
            if (!taken && (best < 0 || z[i] > z[best])) best = i;
        }
        idx[t * K + j] = best;
        if (j == 0) top = z[best];
        w[t * K + j] = __expf(z[best] - top);
        sum += w[t * K + j];
    }
    for (int j = 0; j < K; j++)
        w[t * K + j] /= sum;
}

// xg(slot, :) = xn(gtok[slot], :)
__global__ void k_gather(bf16 *xg, const bf16 *xn, const int *gtok, int d) {
    int s = blockIdx.x;
    const bf16 *src = xn + (size_t)gtok[s] * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x)
        xg[(size_t)s * d + i] = src[i];
}

// x(t, :) += sum_j w(t, j) yg(slot_of(t, j), :)
__global__ void k_combine(float *x, const float *yg, const int *slot_of, const float *w, int d,
                          int K) {
    int t = blockIdx.x;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float acc = 0;
        for (int j = 0; j < K; j++)
            acc += w[t * K + j] * yg[(size_t)slot_of[t * K + j] * d + i];
        x[(size_t)t * d + i] += acc;
    }
}

// amax[r] = argmax of row r (lowest index on ties)
__global__ void k_argmax(int *amax, const float *lg, int V) {
    int r = blockIdx.x;
    const float *row = lg + (size_t)r * V;
    float best = -INFINITY;
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        if (row[i] > best) best = row[i], bi = i;
    __shared__ float sv[256];
    __shared__ int si[256];
    sv[threadIdx.x] = best, si[threadIdx.x] = bi;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) {
            float v2 = sv[threadIdx.x + o];
            int i2 = si[threadIdx.x + o];
            if (v2 > sv[threadIdx.x] || (v2 == sv[threadIdx.x] && i2 < si[threadIdx.x]))
                sv[threadIdx.x] = v2, si[threadIdx.x] = i2;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) amax[r] = si[0];
}

// ---- launch helpers -------------------------------------------------------------------------
static int grid_for(size_t n, int threads) {
    size_t g = (n + threads - 1) / threads;
    return (int)std::min<size_t>(std::max<size_t>(g, 1), 65535 * 16);
}

template <int DPL>
static void launch_prefill(eng_cuda_ctx *c, cudaStream_t st, bf16 *out, const float *qkv,
                           const bf16 *kv, const int *pos, const int *tokseq, const int *table,
                           int stride, int ntok, int H, int KVH, int bt, size_t be, size_t loff,
                           int window, float scale) {
    int warps = ntok * H, threads = 128;
    int blocks = (warps * 32 + threads - 1) / threads;
    k_attn_prefill<DPL><<<blocks, threads, 0, st>>>(out, qkv, kv, pos, tokseq, table, stride, ntok,
                                                    H, KVH, bt, be, loff, window, scale);
    LAUNCH_CHECK();
}

template <int DPL, int G>
static void launch_decode(cudaStream_t st, bf16 *out, float *po, float *pml, const float *qkv,
                          const bf16 *kv, const int *pos, const int *table, int stride, int nseq,
                          int H, int KVH, int bt, size_t be, size_t loff, int window, float scale,
                          int nsplit) {
    dim3 grid(nseq, KVH, nsplit);
    k_attn_decode<DPL, G><<<grid, DEC_WARPS * 32, 0, st>>>(
        po, pml, qkv, kv, pos, table, stride, H, KVH, bt, be, loff, window, scale, nsplit);
    LAUNCH_CHECK();
    k_attn_merge<<<nseq * H, 128, 0, st>>>(out, po, pml, H, DPL * 32, nsplit);
    LAUNCH_CHECK();
}

// Query heads per kv head that the split-K decode kernel is instantiated for.
static bool decode_supported(uint32_t G) {
    return G == 1 || G == 2 || G == 4 || G == 8;
}

static void attention_prefill(eng_cuda_ctx *c, int dpl, bf16 *out, const float *qkv, const bf16 *kv,
                              const int *pos, const int *tokseq, const int *table, int stride,
                              int ntok, size_t loff, int window) {
    const eng_cuda_spec &s = c->s;
    float scale = 1.0f / sqrtf((float)s.head_dim);
    int H = s.heads, KVH = s.kv_heads, bt = s.block_tokens;
    size_t be = c->block_elems;
#define PRE(D)                                                                                     \
    launch_prefill<D>(c, c->st, out, qkv, kv, pos, tokseq, table, stride, ntok, H, KVH, bt, be,    \
                      loff, window, scale)
    switch (dpl) {
    case 1:
        PRE(1);
        break;
    case 2:
        PRE(2);
        break;
    case 4:
        PRE(4);
        break;
    default:
        PRE(8);
        break;
    }
#undef PRE
}

static void attention_decode(cudaStream_t st, int dpl, bf16 *out, float *po, float *pml,
                             const float *qkv, const bf16 *kv, const int *pos, const int *table,
                             int stride, int nseq, int H, int KVH, int bt, size_t be, size_t loff,
                             int window, float scale, int nsplit) {
#define DEC(D, G_)                                                                                 \
    launch_decode<D, G_>(st, out, po, pml, qkv, kv, pos, table, stride, nseq, H, KVH, bt, be,      \
                         loff, window, scale, nsplit)
#define DEC_G(D)                                                                                   \
    switch (H / KVH) {                                                                             \
    case 1:                                                                                        \
        DEC(D, 1);                                                                                 \
        break;                                                                                     \
    case 2:                                                                                        \
        DEC(D, 2);                                                                                 \
        break;                                                                                     \
    case 4:                                                                                        \
        DEC(D, 4);                                                                                 \
        break;                                                                                     \
    default:                                                                                       \
        DEC(D, 8);                                                                                 \
        break;                                                                                     \
    }
    switch (dpl) {
    case 1:
        DEC_G(1);
        break;
    case 2:
        DEC_G(2);
        break;
    case 4:
        DEC_G(4);
        break;
    default:
        DEC_G(8);
        break;
    }
#undef DEC_G
#undef DEC
}

// ---- public entry points --------------------------------------------------------------------
extern "C" int eng_cuda_abi(void) {
    return ENG_CUDA_ABI;
}

extern "C" int eng_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();   // clear the sticky "no driver" error
        return 0;
    }
    return n;
}

extern "C" int eng_cuda_device_name(char *out, size_t cap) {
    cudaDeviceProp p;
    if (eng_cuda_device_count() <= 0 || cudaGetDeviceProperties(&p, 0) != cudaSuccess) return 1;
    snprintf(out, cap, "%s", p.name);
    return 0;
}

static size_t align256(size_t n) {
    return (n + 255) & ~(size_t)255;
}

extern "C" int eng_cuda_create(eng_cuda_ctx **out, const eng_cuda_spec *sp, char *msg, size_t cap) {
    *out = NULL;
    if (eng_cuda_device_count() <= 0) {
        snprintf(msg, cap, "no CUDA device is visible");
        return ENG_CUDA_NODEV;
    }
    if (sp->head_dim % 32 || sp->head_dim > 256) {
        snprintf(msg, cap, "head_dim %u: the CUDA kernels need a multiple of 32 up to 256",
                 sp->head_dim);
        return ENG_CUDA_FAIL;
    }
    eng_cuda_ctx *c = new eng_cuda_ctx();
    c->s = *sp;
    c->layer.assign(sp->layer, sp->layer + sp->layers);
    c->s.layer = NULL;
    const eng_cuda_spec &s = c->s;
    c->qd = s.heads * s.head_dim;
    c->kvd = s.kv_heads * s.head_dim;
    c->qkvd = c->qd + 2 * c->kvd;
    c->G = s.heads / s.kv_heads;
    c->F = std::max(std::max(s.ffn, s.shared_ffn), s.expert_ffn);
    c->K = std::max(s.experts_active, 1u);
    c->block_elems = (size_t)s.layers * 2 * s.block_tokens * c->kvd;
    size_t T = s.max_step_tokens, S = s.max_seqs, d = s.hidden, E = std::max(s.experts, 1u);
    size_t TK = T * c->K;
    size_t nsplit_max = (s.max_context + SPLIT_KEYS - 1) / SPLIT_KEYS + 1;
    c->meta_ints = 3 * T + 3 * S + S * (size_t)s.max_blocks + 16;
    // activation arena: sizes in bytes, in view order
    size_t sz[] = {
        T * d * 4,                                         // x
        T * c->qkvd * 4,                                   // qkv
        T * 2 * c->F * 4,                                  // gu
        T * E * 4,                                         // rl
        TK * 4,                                            // rw
        TK * 2 * (size_t)std::max(s.expert_ffn, 1u) * 4,   // gug
        TK * d * 4,                                        // yg
        S * s.vocab * 4,                                   // lg
        (size_t)s.head_dim / 2 * 4,                        // inv_freq
        S * s.heads * nsplit_max * s.head_dim * 4,         // part_o
        S * s.heads * nsplit_max * 2 * 4,                  // part_ml
        T * d * 2,                                         // xn
        T * c->qd * 2,                                     // att
        T * c->F * 2,                                      // h
        TK * d * 2,                                        // xg
        TK * (size_t)std::max(s.expert_ffn, 1u) * 2,       // hg
        S * d * 2,                                         // xl
        TK * 4,
        TK * 4,
        TK * 4,
        S * 4,              // ridx, gtok, slot_of, amax
        c->meta_ints * 4,   // meta
        E * 4,              // bias
    };
    size_t nsz = sizeof sz / sizeof sz[0], act = 0;
    for (size_t i = 0; i < nsz; i++)
        act += align256(sz[i]);
    c->bytes_w = (double)s.total * 2;
    c->bytes_kv = (double)s.nblocks * c->block_elems * 2;
    c->bytes_act = (double)act;
    size_t fr = 0, tot = 0;
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    double limit = s.mem_limit_bytes > 0 ? s.mem_limit_bytes : 0.95 * (double)fr;
    double need = c->bytes_w + c->bytes_kv + c->bytes_act + 512.0 * (1 << 20);   // + cuBLAS
    if (need > limit) {
        snprintf(msg, cap,
                 "the model needs %.2f GiB on the device (weights %.2f, KV %.2f for "
                 "%u blocks, activations %.2f, workspace 0.5) but %.2f GiB are available",
                 need / (1 << 30), c->bytes_w / (1 << 30), c->bytes_kv / (1 << 30), s.nblocks,
                 c->bytes_act / (1 << 30), limit / (1 << 30));
        delete c;
        return ENG_CUDA_NOMEM;
    }
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&c->cb));
    CUBLAS_CHECK(cublasSetStream(c->cb, c->st));
    CUBLAS_CHECK(cublasSetMathMode(c->cb, CUBLAS_DEFAULT_MATH));
    CUDA_CHECK(cudaEventCreate(&c->ev0));
    CUDA_CHECK(cudaEventCreate(&c->ev1));
    CUDA_CHECK(cudaMalloc(&c->w, (size_t)s.total * 2));
    CUDA_CHECK(cudaMalloc(&c->kv, std::max<size_t>((size_t)s.nblocks * c->block_elems * 2, 256)));
    CUDA_CHECK(cudaMalloc(&c->act, act));
    CUDA_CHECK(cudaMemsetAsync(c->kv, 0, (size_t)s.nblocks * c->block_elems * 2, c->st));
    char *p = c->act;
    void **views[] = {
        (void **)&c->x,        (void **)&c->qkv,    (void **)&c->gu,      (void **)&c->rl,
        (void **)&c->rw,       (void **)&c->gug,    (void **)&c->yg,      (void **)&c->lg,
        (void **)&c->inv_freq, (void **)&c->part_o, (void **)&c->part_ml, (void **)&c->xn,
        (void **)&c->att,      (void **)&c->h,      (void **)&c->xg,      (void **)&c->hg,
        (void **)&c->xl,       (void **)&c->ridx,   (void **)&c->gtok,    (void **)&c->slot_of,
        (void **)&c->amax,     (void **)&c->meta,   (void **)&c->bias};
    for (size_t i = 0; i < nsz; i++) {
        *views[i] = p;
        p += align256(sz[i]);
    }
    CUDA_CHECK(cudaMallocHost(&c->h_meta, c->meta_ints * 4));
    c->seg_cap = 4096;
    CUDA_CHECK(cudaMalloc(&c->seg, (size_t)c->seg_cap * 12));
    CUDA_CHECK(cudaMallocHost(&c->h_seg, (size_t)c->seg_cap * 12));
    std::vector<float> inv(s.head_dim / 2);
    for (uint32_t i = 0; i < s.head_dim / 2; i++)
        inv[i] = powf(s.rope_theta, -2.0f * (float)i / (float)s.head_dim);
    CUDA_CHECK(
        cudaMemcpyAsync(c->inv_freq, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice, c->st));
    for (uint32_t t = 0; t < sp->n_tensors; t++) {
        if (!sp->t_n[t] || sp->t_off[t] == NONE) continue;
        k_init<<<grid_for(sp->t_n[t], 256), 256, 0, c->st>>>(
            c->w + sp->t_off[t], sp->t_n[t], s.seed, t, sp->t_kind[t], sp->t_cols[t]);
        LAUNCH_CHECK();
    }
    CUDA_CHECK(cudaStreamSynchronize(c->st));
    c->h_ridx.resize(TK);
    c->h_rw.resize(TK);
    c->h_gtok.resize(TK);
    c->h_slot.resize(TK);
    c->h_cnt.resize(E + 1);
    *out = c;
    return ENG_CUDA_OK;
}

extern "C" void eng_cuda_destroy(eng_cuda_ctx *c) {
    if (!c) return;
    CUDA_CHECK(cudaStreamSynchronize(c->st));
    CUDA_CHECK(cudaFree(c->w));
    CUDA_CHECK(cudaFree(c->kv));
    CUDA_CHECK(cudaFree(c->act));
    CUDA_CHECK(cudaFreeHost(c->h_meta));
    CUDA_CHECK(cudaFree(c->seg));
    CUDA_CHECK(cudaFreeHost(c->h_seg));
    CUDA_CHECK(cudaEventDestroy(c->ev0));
    CUDA_CHECK(cudaEventDestroy(c->ev1));
    CUBLAS_CHECK(cublasDestroy(c->cb));
    CUDA_CHECK(cudaStreamDestroy(c->st));
    delete c;
}

extern "C" void eng_cuda_arena_bytes(const eng_cuda_ctx *c, double *w, double *kv, double *act) {
    *w = c->bytes_w, *kv = c->bytes_kv, *act = c->bytes_act;
}

// Segment i = blockIdx.x, layer and K/V = blockIdx.y: seg = (block, slot0, n) triples.
__global__ void k_fill_segments(bf16 *kv, const uint32_t *seg, size_t block_elems, int bt, int kvd,
                                uint64_t seed) {
    uint32_t b = seg[blockIdx.x * 3], s0 = seg[blockIdx.x * 3 + 1], n = seg[blockIdx.x * 3 + 2];
    bf16 *p = kv + (size_t)b * block_elems + (size_t)blockIdx.y * bt * kvd + (size_t)s0 * kvd;
    uint64_t sd = seed + blockIdx.x * 131 + blockIdx.y;
    for (size_t j = threadIdx.x; j < (size_t)n * kvd; j += blockDim.x)
        p[j] = __float2bfloat16(kv_value(sd, j));
}

extern "C" void eng_cuda_fill_kv(eng_cuda_ctx *c, const uint32_t *block, const uint32_t *slot0,
                                 const uint32_t *n, uint32_t nseg, uint64_t seed) {
    for (uint32_t i0 = 0; i0 < nseg; i0 += c->seg_cap) {
        uint32_t k = std::min(c->seg_cap, nseg - i0);
        for (uint32_t i = 0; i < k; i++) {
            c->h_seg[3 * i] = block[i0 + i];
            c->h_seg[3 * i + 1] = slot0[i0 + i];
            c->h_seg[3 * i + 2] = n[i0 + i];
        }
        CUDA_CHECK(
            cudaMemcpyAsync(c->seg, c->h_seg, (size_t)k * 12, cudaMemcpyHostToDevice, c->st));
        dim3 grid(k, c->s.layers * 2);
        k_fill_segments<<<grid, 256, 0, c->st>>>(c->kv, c->seg, c->block_elems, c->s.block_tokens,
                                                 c->kvd, seed + i0);
        LAUNCH_CHECK();
        CUDA_CHECK(cudaStreamSynchronize(c->st));   // h_seg is reused
    }
}

// FFN: x += down(silu(gate xn) * up xn), widths F; rows n.
static void ffn(eng_cuda_ctx *c, int n, const bf16 *xn, const bf16 *wgu, const bf16 *wd, int F,
                float *x) {
    int d = c->s.hidden;
    gemm(c, n, 2 * F, d, xn, d, wgu, d, c->gu, CUDA_R_32F, 2 * F, 0.0f);
    k_swiglu<<<grid_for((size_t)n * F, 256), 256, 0, c->st>>>(c->h, c->gu, n, F);
    LAUNCH_CHECK();
    gemm(c, n, d, F, c->h, F, wd, F, x, CUDA_R_32F, d, 1.0f);
}

static void moe(eng_cuda_ctx *c, const eng_cuda_layer &L, int n, bool has_bias, int32_t *ridx,
                float *rw) {
    const eng_cuda_spec &s = c->s;
    int d = s.hidden, E = s.experts, K = c->K, f = s.expert_ffn;
    gemm(c, n, E, d, c->xn, d, c->w + L.router, d, c->rl, CUDA_R_32F, E, 0.0f);
    k_topk<<<(n + 127) / 128, 128, 0, c->st>>>(c->ridx, c->rw, c->rl, has_bias ? c->bias : NULL, n,
                                               E, K);
    LAUNCH_CHECK();
    int nk = n * K;
    CUDA_CHECK(cudaMemcpyAsync(c->h_ridx.data(), c->ridx, nk * 4, cudaMemcpyDeviceToHost, c->st));
    CUDA_CHECK(cudaMemcpyAsync(c->h_rw.data(), c->rw, nk * 4, cudaMemcpyDeviceToHost, c->st));
    CUDA_CHECK(cudaStreamSynchronize(c->st));
    if (ridx) memcpy(ridx, c->h_ridx.data(), nk * 4), memcpy(rw, c->h_rw.data(), nk * 4);
    std::fill(c->h_cnt.begin(), c->h_cnt.end(), 0);
    for (int k = 0; k < nk; k++)
        c->h_cnt[c->h_ridx[k] + 1]++;
    for (int e = 0; e < E; e++)
        c->h_cnt[e + 1] += c->h_cnt[e];
    std::vector<int> fill(c->h_cnt.begin(), c->h_cnt.end() - 1);
    for (int k = 0; k < nk; k++) {
        int slot = fill[c->h_ridx[k]]++;
        c->h_gtok[slot] = k / K;
        c->h_slot[k] = slot;
    }
    CUDA_CHECK(cudaMemcpyAsync(c->gtok, c->h_gtok.data(), nk * 4, cudaMemcpyHostToDevice, c->st));
    CUDA_CHECK(
        cudaMemcpyAsync(c->slot_of, c->h_slot.data(), nk * 4, cudaMemcpyHostToDevice, c->st));
    k_gather<<<nk, 128, 0, c->st>>>(c->xg, c->xn, c->gtok, d);
    LAUNCH_CHECK();
    for (int e = 0; e < E; e++) {
        int a = c->h_cnt[e], cnt = c->h_cnt[e + 1] - a;
        if (!cnt) continue;
        const bf16 *wgu = c->w + L.exp_gu + (size_t)e * 2 * f * d;
        const bf16 *wd = c->w + L.exp_down + (size_t)e * d * f;
        gemm(c, cnt, 2 * f, d, c->xg + (size_t)a * d, d, wgu, d, c->gug, CUDA_R_32F, 2 * f, 0.0f);
        k_swiglu<<<grid_for((size_t)cnt * f, 256), 256, 0, c->st>>>(c->hg, c->gug, cnt, f);
        LAUNCH_CHECK();
        gemm(c, cnt, d, f, c->hg, f, wd, f, c->yg + (size_t)a * d, CUDA_R_32F, d, 0.0f);
    }
    k_combine<<<n, 128, 0, c->st>>>(c->x, c->yg, c->slot_of, c->rw, d, K);
    LAUNCH_CHECK();
}

extern "C" void eng_cuda_forward(eng_cuda_ctx *c, const eng_batch *b, const float *router_bias,
                                 float *logits, int32_t *next, int32_t *route_idx, float *route_w,
                                 float *device_ms) {
    const eng_cuda_spec &s = c->s;
    int n = (int)b->ntok, ns = (int)b->nseq, d = s.hidden, stride = (int)b->table_stride;
    // metadata: tokens | pos | tokseq | last | table
    int *m = c->h_meta;
    size_t o_tok = 0, o_pos = n, o_seq = 2 * (size_t)n, o_last = 3 * (size_t)n, o_tab = o_last + ns;
    for (int i = 0; i < n; i++)
        m[o_tok + i] = b->tokens[i], m[o_pos + i] = b->pos[i];
    bool decode = true;
    int maxpos = 0;
    for (int q = 0; q < ns; q++) {
        for (uint32_t j = 0; j < b->nnew[q]; j++)
            m[o_seq + b->start[q] + j] = q;
        m[o_last + q] = (int)(b->start[q] + b->nnew[q] - 1);
        decode &= b->nnew[q] == 1 && b->start[q] == (uint32_t)q;
        maxpos = std::max(maxpos, (int)(b->ctx[q] + b->nnew[q]));
        uint32_t nb = (b->ctx[q] + b->nnew[q] + s.block_tokens - 1) / s.block_tokens;
        memcpy(m + o_tab + (size_t)q * stride, b->table + (size_t)q * stride, nb * 4);
    }
    size_t nmeta = o_tab + (size_t)ns * stride;
    CUDA_CHECK(cudaEventRecord(c->ev0, c->st));
    CUDA_CHECK(cudaMemcpyAsync(c->meta, m, nmeta * 4, cudaMemcpyHostToDevice, c->st));
    const int *d_tok = c->meta + o_tok, *d_pos = c->meta + o_pos, *d_seq = c->meta + o_seq;
    const int *d_last = c->meta + o_last, *d_tab = c->meta + o_tab;
    bool has_bias = router_bias && s.experts;
    if (has_bias)
        CUDA_CHECK(
            cudaMemcpyAsync(c->bias, router_bias, s.experts * 4, cudaMemcpyHostToDevice, c->st));
    int dpl = s.head_dim / 32;
    float scale = 1.0f / sqrtf((float)s.head_dim);
    k_embed<<<n, 128, 0, c->st>>>(c->x, c->w + s.embed, d_tok, d);
    LAUNCH_CHECK();
    for (uint32_t l = 0; l < s.layers; l++) {
        const eng_cuda_layer &L = c->layer[l];
        size_t loff = (size_t)l * 2 * s.block_tokens * c->kvd;
        int win = L.windowed ? (int)s.window : 0;
        k_rmsnorm<<<n, 256, 0, c->st>>>(c->xn, c->x, c->w + L.attn_norm, NULL, d, s.norm_eps);
        LAUNCH_CHECK();
        gemm(c, n, c->qkvd, d, c->xn, d, c->w + L.wqkv, d, c->qkv, CUDA_R_32F, c->qkvd, 0.0f);
        k_rope_store<<<n, 128, 0, c->st>>>(c->qkv, c->kv, d_pos, d_seq, d_tab, stride, c->inv_freq,
                                           s.heads, s.kv_heads, s.head_dim, s.block_tokens,
                                           c->block_elems, loff);
        LAUNCH_CHECK();
        if (decode && decode_supported(c->G)) {
            int keys = win ? std::min(win, maxpos) : maxpos;
            int lsplit = std::max(1, (keys + SPLIT_KEYS - 1) / SPLIT_KEYS);
            attention_decode(c->st, dpl, c->att, c->part_o, c->part_ml, c->qkv, c->kv, d_pos, d_tab,
                             stride, ns, s.heads, s.kv_heads, s.block_tokens, c->block_elems, loff,
                             win, scale, lsplit);
        } else {
            attention_prefill(c, dpl, c->att, c->qkv, c->kv, d_pos, d_seq, d_tab, stride, n, loff,
                              win);
        }
        gemm(c, n, d, c->qd, c->att, c->qd, c->w + L.wo, c->qd, c->x, CUDA_R_32F, d, 1.0f);
        k_rmsnorm<<<n, 256, 0, c->st>>>(c->xn, c->x, c->w + L.ffn_norm, NULL, d, s.norm_eps);
        LAUNCH_CHECK();
        if (!L.moe) {
            ffn(c, n, c->xn, c->w + L.w_gu, c->w + L.w_down, s.ffn, c->x);
        } else {
            size_t roff = (size_t)l * s.max_step_tokens * c->K;
            moe(c, L, n, has_bias, route_idx ? route_idx + roff : NULL,
                route_w ? route_w + roff : NULL);
            if (L.sh_gu != NONE)
                ffn(c, n, c->xn, c->w + L.sh_gu, c->w + L.sh_down, s.shared_ffn, c->x);
        }
    }
    k_rmsnorm<<<ns, 256, 0, c->st>>>(c->xl, c->x, c->w + s.final_norm, d_last, d, s.norm_eps);
    LAUNCH_CHECK();
    gemm(c, ns, s.vocab, d, c->xl, d, c->w + s.lm_head, d, c->lg, CUDA_R_32F, s.vocab, 0.0f);
    k_argmax<<<ns, 256, 0, c->st>>>(c->amax, c->lg, s.vocab);
    LAUNCH_CHECK();
    CUDA_CHECK(cudaEventRecord(c->ev1, c->st));
    if (logits)
        CUDA_CHECK(cudaMemcpyAsync(logits, c->lg, (size_t)ns * s.vocab * 4, cudaMemcpyDeviceToHost,
                                   c->st));
    if (next) CUDA_CHECK(cudaMemcpyAsync(next, c->amax, ns * 4, cudaMemcpyDeviceToHost, c->st));
    CUDA_CHECK(cudaStreamSynchronize(c->st));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, c->ev0, c->ev1));
    if (device_ms) *device_ms = ms;
}

// ---- microbenchmarks ------------------------------------------------------------------------
static double median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

extern "C" double eng_cuda_bench_gemm(int M, int N, int K, int iters) {
    if (eng_cuda_device_count() <= 0) return -1;
    eng_cuda_ctx c;
    CUDA_CHECK(cudaStreamCreate(&c.st));
    CUBLAS_CHECK(cublasCreate(&c.cb));
    CUBLAS_CHECK(cublasSetStream(c.cb, c.st));
    bf16 *A, *B, *C;
    CUDA_CHECK(cudaMalloc(&A, (size_t)M * K * 2));
    CUDA_CHECK(cudaMalloc(&B, (size_t)N * K * 2));
    CUDA_CHECK(cudaMalloc(&C, (size_t)M * N * 2));
    k_fill<<<grid_for((size_t)M * K, 256), 256, 0, c.st>>>(A, (size_t)M * K, 1);
    LAUNCH_CHECK();
    k_fill<<<grid_for((size_t)N * K, 256), 256, 0, c.st>>>(B, (size_t)N * K, 2);
    LAUNCH_CHECK();
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int i = -3; i < iters; i++) {
        CUDA_CHECK(cudaEventRecord(e0, c.st));
        gemm(&c, M, N, K, A, K, B, K, C, CUDA_R_16BF, N, 0.0f);
        CUDA_CHECK(cudaEventRecord(e1, c.st));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 0) t.push_back(ms);
    }
    double ms = median(t);
    CUDA_CHECK(cudaFree(A));
    CUDA_CHECK(cudaFree(B));
    CUDA_CHECK(cudaFree(C));
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUBLAS_CHECK(cublasDestroy(c.cb));
    CUDA_CHECK(cudaStreamDestroy(c.st));
    return 2.0 * M * N * K / (ms * 1e-3) / 1e12;
}

extern "C" double eng_cuda_bench_decode_attn(int batch, int context, int heads, int kv_heads,
                                             int head_dim, int bt, int iters) {
    if (eng_cuda_device_count() <= 0 || head_dim % 32 || head_dim > 256 ||
        !decode_supported(heads / kv_heads))
        return -1;
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreate(&st));
    int kvd = kv_heads * head_dim, qd = heads * head_dim;
    int nb = (context + bt - 1) / bt, stride = nb;
    size_t be = (size_t)2 * bt * kvd;   // one layer: K then V
    size_t nblocks = (size_t)batch * nb;
    bf16 *kv, *out;
    float *qkv, *po, *pml;
    int *pos, *table;
    CUDA_CHECK(cudaMalloc(&kv, nblocks * be * 2));
    CUDA_CHECK(cudaMalloc(&qkv, (size_t)batch * (qd + 2 * kvd) * 4));
    CUDA_CHECK(cudaMalloc(&out, (size_t)batch * qd * 2));
    int nsplit = (context + SPLIT_KEYS - 1) / SPLIT_KEYS;
    CUDA_CHECK(cudaMalloc(&po, (size_t)batch * heads * nsplit * head_dim * 4));
    CUDA_CHECK(cudaMalloc(&pml, (size_t)batch * heads * nsplit * 2 * 4));
    CUDA_CHECK(cudaMalloc(&pos, batch * 4));
    CUDA_CHECK(cudaMalloc(&table, nblocks * 4));
    k_fill<<<grid_for(nblocks * be, 256), 256, 0, st>>>(kv, nblocks * be, 3);
    LAUNCH_CHECK();
    CUDA_CHECK(cudaMemsetAsync(qkv, 0, (size_t)batch * (qd + 2 * kvd) * 4, st));
    // scattered block tables: a fixed permutation of the arena
    std::vector<int> hp(batch, context - 1), ht(nblocks);
    for (size_t i = 0; i < nblocks; i++)
        ht[i] = (int)((i * 2654435761ULL) % nblocks);
    std::vector<char> used(nblocks, 0);
    for (size_t i = 0; i < nblocks; i++) {   // make it a permutation
        size_t k = ht[i];
        while (used[k])
            k = (k + 1) % nblocks;
        used[k] = 1;
        ht[i] = (int)k;
    }
    CUDA_CHECK(cudaMemcpyAsync(pos, hp.data(), batch * 4, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(table, ht.data(), nblocks * 4, cudaMemcpyHostToDevice, st));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<float> t;
    float scale = 1.0f / sqrtf((float)head_dim);
    for (int i = -3; i < iters; i++) {
        CUDA_CHECK(cudaEventRecord(e0, st));
        attention_decode(st, head_dim / 32, out, po, pml, qkv, kv, pos, table, stride, batch, heads,
                         kv_heads, bt, be, 0, 0, scale, nsplit);
        CUDA_CHECK(cudaEventRecord(e1, st));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 0) t.push_back(ms);
    }
    double ms = median(t);
    double bytes = (double)batch * context * 2 * kvd * 2;
    CUDA_CHECK(cudaFree(kv));
    CUDA_CHECK(cudaFree(qkv));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaFree(po));
    CUDA_CHECK(cudaFree(pml));
    CUDA_CHECK(cudaFree(pos));
    CUDA_CHECK(cudaFree(table));
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaStreamDestroy(st));
    return bytes / (ms * 1e-3) / 1e9;
}
