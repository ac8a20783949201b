// engine/cpu/eng_cpu.c -- the CPU backend: fp32 everything, OpenBLAS sgemm for the matrix
// products (or a blocked loop without it). This file is the specification of the forward pass;
// the CUDA backend is an optimisation checked against it.
//
// Three arenas, each one allocation cut into views:
//   weights  eng_layout (the sizes table), fp32
//   kv       nblocks * block_elems fp32; block b, layer l: K at b*be + l*2*bt*kvd,
//            V right after it; token slot s at + s*kvd; kvd = kv_heads*head_dim
//   act      the views below, sized for max_step_tokens (T) and max_context (L)
//
// Attention: a chunk of n > 1 new tokens gathers its sequence's K and V (positions lo..end)
// from the pages into contiguous scratch and uses two GEMMs per head (scores, then P V); a
// single new token (decode) reads the pages directly.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_int.h"

#ifdef KVF_HAVE_BLAS
#include <cblas.h>   // the CBLAS enums only: the library itself is loaded on first use
#include <dlfcn.h>
#include <pthread.h>
#endif

enum { QCHUNK = 128 };   // query rows per score block in chunked attention

struct eng_cpu {
    float *w;     // weight arena
    float *kv;    // KV arena
    float *act;   // activation arena
    // views into act
    float *x;          // (T, d) residual stream
    float *xn;         // (T, d) normed
    float *qkv;        // (T, qkvd)
    float *att;        // (T, qd)
    float *gu;         // (T, 2 F)
    float *h;          // (T, F)
    float *rl;         // (T, E) router logits
    float *xg, *yg;    // (T, d) rows gathered for one expert, its output
    float *kc, *vc;    // (L, kvd) gathered K and V
    float *sc;         // (QCHUNK, L) scores
    float *xl;         // (S, d) last rows, normed
    float *lg;         // (S, V) logits
    float *inv_freq;   // (head_dim / 2)
    int32_t *ecnt;     // (E + 1) tokens per expert, then offsets
    int32_t *etok;     // (T k) token of each routed slot, grouped by expert
    float *ew;         // (T k) weight of each routed slot
};

// ---- GEMM ---------------------------------------------------------------------------------
// OpenBLAS is opened with dlopen when the first CPU engine (or GEMM bench) needs it, not linked:
// loading it starts its thread pool and maps ~3 MB, which every simulator command would pay.
#ifdef KVF_HAVE_BLAS
typedef void (*blas_sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint,
                              blasint, blasint, float, const float *, blasint, const float *,
                              blasint, float, float *, blasint);
static struct {
    blas_sgemm_fn sgemm;
    void (*set_threads)(int);
    char why[512];   // why loading failed
} g_blas;
static pthread_once_t g_blas_once = PTHREAD_ONCE_INIT;

static void blas_load_once(void) {
    void *h = dlopen(KVF_BLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    void *f = h ? dlsym(h, "cblas_sgemm") : NULL,
         *t = h ? dlsym(h, "openblas_set_num_threads") : NULL;
    if (!f || !t) {
        const char *e = dlerror();
        snprintf(g_blas.why, sizeof g_blas.why, "cannot load %s: %s", KVF_BLAS_SONAME,
                 e ? e : "cblas_sgemm or openblas_set_num_threads missing");
        return;
    }
    memcpy(&g_blas.set_threads, &t, sizeof t);   // POSIX: dlsym's pointer converts
    memcpy(&g_blas.sgemm, &f, sizeof f);
}
#endif

kvf_status eng_cpu_blas_load(kvf_err *err) {
#ifdef KVF_HAVE_BLAS
    pthread_once(&g_blas_once, blas_load_once);
    if (!g_blas.sgemm)
        return kvf_fail(err, KVF_ERUN, "backend cpu: %s (install OpenBLAS or rebuild without it)",
                        g_blas.why);
#else
    (void)err;
#endif
    return KVF_OK;
}

void eng_cpu_set_threads(uint32_t n) {
#ifdef KVF_HAVE_BLAS
    KVF_ASSERT(g_blas.set_threads);   // eng_cpu_blas_load succeeded
    g_blas.set_threads(n ? (int)n : 1);
#else
    (void)n;
#endif
}

void eng_sgemm_nt(uint32_t M, uint32_t N, uint32_t K, float alpha, const float *A, size_t lda,
                  const float *B, size_t ldb, float beta, float *C, size_t ldc) {
    if (!M || !N) return;
#ifdef KVF_HAVE_BLAS
    KVF_ASSERT(g_blas.sgemm);
    g_blas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, alpha, A,
                 (int)lda, B, (int)ldb, beta, C, (int)ldc);
#else
    enum { BI = 16, BJ = 64 };
    for (uint32_t i0 = 0; i0 < M; i0 += BI)
        for (uint32_t j0 = 0; j0 < N; j0 += BJ)
            for (uint32_t i = i0; i < KVF_MIN(M, i0 + BI); i++) {
                const float *a = A + (size_t)i * lda;
                for (uint32_t j = j0; j < KVF_MIN(N, j0 + BJ); j++) {
                    const float *b = B + (size_t)j * ldb;
                    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                    uint32_t k = 0;
                    for (; k + 4 <= K; k += 4) {
                        s0 += a[k] * b[k];
                        s1 += a[k + 1] * b[k + 1];
                        s2 += a[k + 2] * b[k + 2];
                        s3 += a[k + 3] * b[k + 3];
                    }
                    for (; k < K; k++)
                        s0 += a[k] * b[k];
                    float *c = &C[(size_t)i * ldc + j];
                    *c = alpha * ((s0 + s1) + (s2 + s3)) + (beta != 0 ? beta * *c : 0);
                }
            }
#endif
}

// C(M,N) = A(M,K) B(K,N) (beta 0), row-major.
static void sgemm_nn(uint32_t M, uint32_t N, uint32_t K, const float *A, size_t lda, const float *B,
                     size_t ldb, float *C, size_t ldc) {
#ifdef KVF_HAVE_BLAS
    KVF_ASSERT(g_blas.sgemm);
    g_blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, A,
                 (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
#else
    for (uint32_t i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        memset(c, 0, N * sizeof *c);
        for (uint32_t k = 0; k < K; k++) {
            float a = A[(size_t)i * lda + k];
            if (a == 0) continue;
            const float *b = B + (size_t)k * ldb;
            for (uint32_t j = 0; j < N; j++)
                c[j] += a * b[j];
        }
    }
#endif
}

// ---- arenas -------------------------------------------------------------------------------
static size_t ffn_max(const eng_model_desc *m) {
    size_t f = m->ffn;
    size_t s = (size_t)m->shared_experts * m->expert_ffn;
    if (s > f) f = s;
    if (m->expert_ffn > f) f = m->expert_ffn;
    return f;
}

// Sizes of the activation views, in floats (order = layout order).
static void act_sizes(const eng_model_desc *m, const eng_options *o, size_t *sz, int *n) {
    size_t T = o->max_step_tokens, L = o->max_context, S = o->max_seqs, d = m->hidden;
    size_t qd = (size_t)m->heads * m->head_dim, kvd = (size_t)m->kv_heads * m->head_dim;
    size_t F = ffn_max(m), E = m->experts ? m->experts : 1, k = KVF_MAX(m->experts_active, 1);
    size_t i = 0;
    sz[i++] = T * d;                                   // x
    sz[i++] = T * d;                                   // xn
    sz[i++] = T * (qd + 2 * kvd);                      // qkv
    sz[i++] = T * qd;                                  // att
    sz[i++] = T * 2 * F;                               // gu
    sz[i++] = T * F;                                   // h
    sz[i++] = T * E;                                   // rl
    sz[i++] = T * d;                                   // xg
    sz[i++] = T * d;                                   // yg
    sz[i++] = L * kvd;                                 // kc
    sz[i++] = L * kvd;                                 // vc
    sz[i++] = (size_t)KVF_MAX(QCHUNK, m->heads) * L;   // sc
    sz[i++] = S * d;                                   // xl
    sz[i++] = S * m->vocab;                            // lg
    sz[i++] = m->head_dim / 2;                         // inv_freq
    sz[i++] = E + 1;                                   // ecnt (int32)
    sz[i++] = T * k;                                   // etok (int32)
    sz[i++] = T * k;                                   // ew
    *n = (int)i;
}

double eng_cpu_act_bytes(const eng_model_desc *m, const eng_options *o) {
    size_t sz[32];
    int n;
    act_sizes(m, o, sz, &n);
    double t = 0;
    for (int i = 0; i < n; i++)
        t += (double)sz[i] * 4;
    return t;
}

kvf_status eng_cpu_create(eng_engine *e, kvf_err *err) {
    const eng_model_desc *m = &e->m;
    kvf_status st = eng_cpu_blas_load(err);
    if (st) return st;
    eng_cpu *c = kvf_calloc(1, sizeof *c);
    e->cpu = c;
    c->w = kvf_try_malloc(e->lay.total * sizeof(float), err);
    if (!c->w)
        return kvf_fail(err, KVF_ENOMEM, "weights: cannot allocate %.2f GiB",
                        e->bytes_w / (1 << 30));
    c->kv = kvf_try_malloc((size_t)e->nblocks * e->block_elems * sizeof(float), err);
    if (!c->kv)
        return kvf_fail(err, KVF_ENOMEM, "KV cache: cannot allocate %.2f GiB",
                        e->bytes_kv / (1 << 30));
    size_t sz[32], tot = 0;
    int n;
    act_sizes(m, &e->o, sz, &n);
    for (int i = 0; i < n; i++)
        tot += (sz[i] + 15) & ~(size_t)15;
    c->act = kvf_try_calloc(tot, sizeof(float), err);
    if (!c->act)
        return kvf_fail(err, KVF_ENOMEM, "activations: cannot allocate %.2f GiB",
                        (double)tot * 4 / (1 << 30));
    float **views[] = {&c->x,  &c->xn, &c->qkv, &c->att, &c->gu, &c->h,  &c->rl,      &c->xg,
                       &c->yg, &c->kc, &c->vc,  &c->sc,  &c->xl, &c->lg, &c->inv_freq};
    size_t off = 0;
    int vi = 0;
    for (; vi < (int)(sizeof views / sizeof views[0]); vi++) {
        *views[vi] = c->act + off;
        off += (sz[vi] + 15) & ~(size_t)15;
    }
    c->ecnt = (int32_t *)(c->act + off), off += (sz[vi++] + 15) & ~(size_t)15;
    c->etok = (int32_t *)(c->act + off), off += (sz[vi++] + 15) & ~(size_t)15;
    c->ew = c->act + off;
    for (uint32_t i = 0; i < m->head_dim / 2; i++)
        c->inv_freq[i] = powf(m->rope_theta, -2.0f * (float)i / (float)m->head_dim);
    // Weights: the counter-based definition, tensor by tensor.
    uint32_t nt = eng_layout_tensors(&e->lay, m);
    for (uint32_t t = 0; t < nt; t++) {
        size_t o, cnt;
        uint32_t kind, cols;
        eng_layout_tensor(&e->lay, m, t, &o, &cnt, &kind, &cols);
        for (size_t j = 0; j < cnt; j++)
            c->w[o + j] = eng_weight_value(e->o.seed, t, j, kind, cols);
    }
    memset(c->kv, 0, (size_t)e->nblocks * e->block_elems * sizeof(float));
    eng_cpu_set_threads(e->o.threads);
    return KVF_OK;
}

const float *eng_weights_cpu(const eng_engine *e) {
    return e->cpu ? e->cpu->w : NULL;
}

void eng_cpu_destroy(eng_engine *e) {
    eng_cpu *c = e->cpu;
    if (!c) return;
    free(c->w);
    free(c->kv);
    free(c->act);
    free(c);
    e->cpu = NULL;
}

void eng_cpu_fill_kv(eng_engine *e, uint32_t block, uint32_t slot0, uint32_t n, uint64_t seed) {
    size_t kvd = (size_t)e->m.kv_heads * e->m.head_dim;
    for (uint32_t l = 0; l < e->m.layers; l++)
        for (int kv = 0; kv < 2; kv++) {
            float *p = e->cpu->kv + block * e->block_elems + ((size_t)l * 2 + kv) * e->bt * kvd +
                       slot0 * kvd;
            for (size_t j = 0; j < n * kvd; j++)
                p[j] = eng_kv_value(seed + l * 2 + kv, j);
        }
}

// ---- pieces of the pass -------------------------------------------------------------------
// out(n, d) = x / rms(x) * g
static void rmsnorm(float *out, const float *x, const float *g, uint32_t n, uint32_t d, float eps) {
    for (uint32_t t = 0; t < n; t++) {
        const float *a = x + (size_t)t * d;
        float *o = out + (size_t)t * d;
        float ss = 0;
        for (uint32_t i = 0; i < d; i++)
            ss += a[i] * a[i];
        float r = 1.0f / sqrtf(ss / (float)d + eps);
        for (uint32_t i = 0; i < d; i++)
            o[i] = a[i] * r * g[i];
    }
}

// Rotates pairs (i, i + hd/2) of each head of v (nh heads) by pos * inv_freq[i].
static void rope(float *v, uint32_t nh, uint32_t hd, int32_t pos, const float *inv_freq) {
    uint32_t half = hd / 2;
    for (uint32_t i = 0; i < half; i++) {
        float a = (float)pos * inv_freq[i];
        float cs = cosf(a), sn = sinf(a);
        for (uint32_t h = 0; h < nh; h++) {
            float *p = v + (size_t)h * hd;
            float x0 = p[i], x1 = p[i + half];
            p[i] = x0 * cs - x1 * sn;
            p[i + half] = x0 * sn + x1 * cs;
        }
    }
}

static inline float silu(float x) {
    return x / (1.0f + expf(-x));
}

// h(n, F) = silu(gu[:, :F]) * gu[:, F:]
static void swiglu(float *h, const float *gu, uint32_t n, size_t F) {
    for (uint32_t t = 0; t < n; t++) {
        const float *g = gu + (size_t)t * 2 * F, *u = g + F;
        float *o = h + (size_t)t * F;
        for (size_t i = 0; i < F; i++)
            o[i] = silu(g[i]) * u[i];
    }
}

// x(n, d) += SwiGLU FFN of xn with gate|up weights wgu (2F, d) and down wd (d, F).
static void ffn(eng_cpu *c, float *x, const float *xn, uint32_t n, uint32_t d, size_t F,
                const float *wgu, const float *wd) {
    eng_sgemm_nt(n, (uint32_t)(2 * F), d, 1.0f, xn, d, wgu, d, 0.0f, c->gu, 2 * F);
    swiglu(c->h, c->gu, n, F);
    eng_sgemm_nt(n, d, (uint32_t)F, 1.0f, c->h, F, wd, F, 1.0f, x, d);
}

typedef float v4f __attribute__((vector_size(16)));

static inline v4f load4(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

// dot(a, b) over n floats (n a multiple of 4 for the fast part), four vector accumulators.
static inline float dotv(const float *a, const float *b, uint32_t n) {
    v4f s0 = {0, 0, 0, 0}, s1 = s0, s2 = s0, s3 = s0;
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 += load4(a + i) * load4(b + i);
        s1 += load4(a + i + 4) * load4(b + i + 4);
        s2 += load4(a + i + 8) * load4(b + i + 8);
        s3 += load4(a + i + 12) * load4(b + i + 12);
    }
    for (; i + 4 <= n; i += 4)
        s0 += load4(a + i) * load4(b + i);
    v4f t = (s0 + s1) + (s2 + s3);
    float r = (t[0] + t[1]) + (t[2] + t[3]);
    for (; i < n; i++)
        r += a[i] * b[i];
    return r;
}

// y += a x over n floats.
static inline void axpyv(float *y, float a, const float *x, uint32_t n) {
    v4f av = {a, a, a, a};
    uint32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v4f r = load4(y + i) + av * load4(x + i);
        memcpy(y + i, &r, sizeof r);
    }
    for (; i < n; i++)
        y[i] += a * x[i];
}

static float *kv_at(eng_engine *e, uint32_t layer, int v, const eng_batch *b, uint32_t s,
                    uint32_t pos) {
    size_t kvd = (size_t)e->m.kv_heads * e->m.head_dim;
    uint32_t blk = (uint32_t)b->table[(size_t)s * b->table_stride + pos / e->bt];
    return e->cpu->kv + blk * e->block_elems + ((size_t)layer * 2 + v) * e->bt * kvd +
           (pos % e->bt) * kvd;
}

// Attention of sequence s of the batch in layer l; q rows from c->qkv, output to c->att.
static void attend(eng_engine *e, const eng_batch *b, uint32_t s, uint32_t l) {
    eng_cpu *c = e->cpu;
    const eng_model_desc *m = &e->m;
    uint32_t hd = m->head_dim, H = m->heads, KVH = m->kv_heads, G = H / KVH;
    size_t qd = (size_t)H * hd, kvd = (size_t)KVH * hd, qkvd = qd + 2 * kvd;
    uint32_t n = b->nnew[s], C = b->ctx[s], t0 = b->start[s];
    bool win = eng_layer_windowed(m, l);
    uint32_t w = m->window;
    float scale = 1.0f / sqrtf((float)hd);
    uint32_t lo = (win && C + 1 > w) ? C + 1 - w : 0;   // first key the first query sees
    uint32_t L = C + n - lo;
    if (n == 1) {
        // decode: straight from the pages, one kv head group at a time so each K and V row
        // is read once for the G query heads that share it
        for (uint32_t g = 0; g < KVH; g++) {
            const float *q = c->qkv + (size_t)t0 * qkvd + (size_t)g * G * hd;
            float *sc = c->sc;   // (G, L)
            for (uint32_t j = 0; j < L;) {
                const float *kb = kv_at(e, l, 0, b, s, lo + j) + (size_t)g * hd;
                uint32_t cnt = KVF_MIN(e->bt - (lo + j) % e->bt, L - j);
                for (uint32_t r = 0; r < cnt; r++)
                    for (uint32_t h = 0; h < G; h++)
                        sc[(size_t)h * L + j + r] =
                            dotv(q + (size_t)h * hd, kb + r * kvd, hd) * scale;
                j += cnt;
            }
            for (uint32_t h = 0; h < G; h++) {
                float *row = sc + (size_t)h * L, mx = -INFINITY, sum = 0;
                for (uint32_t j = 0; j < L; j++)
                    mx = row[j] > mx ? row[j] : mx;
                for (uint32_t j = 0; j < L; j++)
                    sum += (row[j] = expf(row[j] - mx));
                float inv = 1.0f / sum;
                for (uint32_t j = 0; j < L; j++)
                    row[j] *= inv;
                memset(c->att + (size_t)t0 * qd + (size_t)(g * G + h) * hd, 0, hd * 4);
            }
            for (uint32_t j = 0; j < L;) {
                const float *vb = kv_at(e, l, 1, b, s, lo + j) + (size_t)g * hd;
                uint32_t cnt = KVF_MIN(e->bt - (lo + j) % e->bt, L - j);
                for (uint32_t r = 0; r < cnt; r++)
                    for (uint32_t h = 0; h < G; h++)
                        axpyv(c->att + (size_t)t0 * qd + (size_t)(g * G + h) * hd,
                              sc[(size_t)h * L + j + r], vb + r * kvd, hd);
                j += cnt;
            }
        }
        return;
    }
    // chunk: gather K and V of positions lo .. C+n-1 (block by block)
    for (uint32_t p = lo; p < C + n;) {
        uint32_t cnt = KVF_MIN(e->bt - p % e->bt, C + n - p);
        memcpy(c->kc + (size_t)(p - lo) * kvd, kv_at(e, l, 0, b, s, p), cnt * kvd * 4);
        memcpy(c->vc + (size_t)(p - lo) * kvd, kv_at(e, l, 1, b, s, p), cnt * kvd * 4);
        p += cnt;
    }
    for (uint32_t h = 0; h < H; h++) {
        uint32_t g = h / G;
        for (uint32_t r0 = 0; r0 < n; r0 += QCHUNK) {
            uint32_t rn = KVF_MIN(QCHUNK, n - r0);
            // keys this block of queries may see: [lo, C + r0 + rn)
            uint32_t Lk = C + r0 + rn - lo;
            const float *q = c->qkv + (size_t)(t0 + r0) * qkvd + (size_t)h * hd;
            eng_sgemm_nt(rn, Lk, hd, scale, q, qkvd, c->kc + (size_t)g * hd, kvd, 0.0f, c->sc, Lk);
            for (uint32_t r = 0; r < rn; r++) {
                uint32_t qp = C + r0 + r;   // query position
                uint32_t first = (win && qp + 1 > w) ? qp + 1 - w : 0;
                float *row = c->sc + (size_t)r * Lk;
                float mx = -INFINITY;
                for (uint32_t j = 0; j < Lk; j++) {
                    uint32_t kp = lo + j;
                    if (kp < first || kp > qp)
                        row[j] = -INFINITY;
                    else if (row[j] > mx)
                        mx = row[j];
                }
                float sum = 0;
                for (uint32_t j = 0; j < Lk; j++)
                    sum += (row[j] = expf(row[j] - mx));
                float inv = 1.0f / sum;
                for (uint32_t j = 0; j < Lk; j++)
                    row[j] *= inv;
            }
            sgemm_nn(rn, hd, Lk, c->sc, Lk, c->vc + (size_t)g * hd, kvd,
                     c->att + (size_t)(t0 + r0) * qd + (size_t)h * hd, qd);
        }
    }
}

// Routed experts of an MoE layer: x += sum_j w_j expert_j(xn) over the top-k of each token.
static void moe(eng_engine *e, uint32_t l, uint32_t n) {
    eng_cpu *c = e->cpu;
    const eng_model_desc *m = &e->m;
    const eng_layer_layout *L = &e->lay.layer[l];
    uint32_t d = m->hidden, E = m->experts, k = m->experts_active;
    size_t f = m->expert_ffn;
    eng_sgemm_nt(n, E, d, 1.0f, c->xn, d, c->w + L->router, d, 0.0f, c->rl, E);
    int32_t *ridx = e->route_idx + (size_t)l * e->o.max_step_tokens * k;
    float *rw = e->route_w + (size_t)l * e->o.max_step_tokens * k;
    for (uint32_t t = 0; t < n; t++) {
        float *z = c->rl + (size_t)t * E;
        if (e->router_bias)
            for (uint32_t i = 0; i < E; i++)
                z[i] += e->router_bias[i];
        // top-k by repeated argmax (lowest index wins ties); weights = softmax over the k
        float sum = 0, top = -INFINITY;
        for (uint32_t j = 0; j < k; j++) {
            int32_t best = -1;
            for (uint32_t i = 0; i < E; i++) {
                bool taken = false;
                for (uint32_t q = 0; q < j; q++)
                    taken |= ridx[t * k + q] == (int32_t)i;
                if (!taken && (best < 0 || z[i] > z[best])) best = (int32_t)i;
            }
            ridx[t * k + j] = best;
            if (j == 0) top = z[best];
            rw[t * k + j] = expf(z[best] - top);
            sum += rw[t * k + j];
        }
        for (uint32_t j = 0; j < k; j++)
            rw[t * k + j] /= sum;
    }
    // group slots by expert
    memset(c->ecnt, 0, (E + 1) * sizeof *c->ecnt);
    for (uint32_t s = 0; s < n * k; s++)
        c->ecnt[ridx[s] + 1]++;
    for (uint32_t i = 0; i < E; i++)
        c->ecnt[i + 1] += c->ecnt[i];
    int32_t fill[1024];
    int32_t *pos = E <= 1024 ? fill : kvf_malloc(E * sizeof *pos);
    memcpy(pos, c->ecnt, E * sizeof *pos);
    for (uint32_t s = 0; s < n * k; s++) {
        int32_t slot = pos[ridx[s]]++;
        c->etok[slot] = (int32_t)(s / k);
        c->ew[slot] = rw[s];
    }
    if (pos != fill) free(pos);
    for (uint32_t i = 0; i < E; i++) {
        uint32_t a = (uint32_t)c->ecnt[i], cnt = (uint32_t)c->ecnt[i + 1] - a;
        if (!cnt) continue;
        for (uint32_t r = 0; r < cnt; r++)
            memcpy(c->xg + (size_t)r * d, c->xn + (size_t)c->etok[a + r] * d, d * 4);
        const float *wgu = c->w + L->exp_gu + (size_t)i * 2 * f * d;
        const float *wd = c->w + L->exp_down + (size_t)i * d * f;
        eng_sgemm_nt(cnt, (uint32_t)(2 * f), d, 1.0f, c->xg, d, wgu, d, 0.0f, c->gu, 2 * f);
        swiglu(c->h, c->gu, cnt, f);
        eng_sgemm_nt(cnt, d, (uint32_t)f, 1.0f, c->h, f, wd, f, 0.0f, c->yg, d);
        for (uint32_t r = 0; r < cnt; r++) {
            float *xr = c->x + (size_t)c->etok[a + r] * d, wr = c->ew[a + r];
            const float *y = c->yg + (size_t)r * d;
            for (uint32_t j = 0; j < d; j++)
                xr[j] += wr * y[j];
        }
    }
}

void eng_cpu_forward(eng_engine *e, const eng_batch *b, float *logits, int32_t *next) {
    eng_cpu *c = e->cpu;
    const eng_model_desc *m = &e->m;
    uint32_t n = b->ntok, d = m->hidden, hd = m->head_dim;
    size_t qd = (size_t)m->heads * hd, kvd = (size_t)m->kv_heads * hd, qkvd = qd + 2 * kvd;
    for (uint32_t t = 0; t < n; t++)
        memcpy(c->x + (size_t)t * d, c->w + e->lay.embed + (size_t)b->tokens[t] * d, d * 4);
    for (uint32_t l = 0; l < m->layers; l++) {
        const eng_layer_layout *L = &e->lay.layer[l];
        rmsnorm(c->xn, c->x, c->w + L->attn_norm, n, d, m->norm_eps);
        eng_sgemm_nt(n, (uint32_t)qkvd, d, 1.0f, c->xn, d, c->w + L->wqkv, d, 0.0f, c->qkv, qkvd);
        for (uint32_t s = 0; s < b->nseq; s++)
            for (uint32_t j = 0; j < b->nnew[s]; j++) {
                uint32_t t = b->start[s] + j;
                float *row = c->qkv + (size_t)t * qkvd;
                rope(row, m->heads, hd, b->pos[t], c->inv_freq);
                rope(row + qd, m->kv_heads, hd, b->pos[t], c->inv_freq);
                memcpy(kv_at(e, l, 0, b, s, (uint32_t)b->pos[t]), row + qd, kvd * 4);
                memcpy(kv_at(e, l, 1, b, s, (uint32_t)b->pos[t]), row + qd + kvd, kvd * 4);
            }
        for (uint32_t s = 0; s < b->nseq; s++)
            attend(e, b, s, l);
        eng_sgemm_nt(n, d, (uint32_t)qd, 1.0f, c->att, qd, c->w + L->wo, qd, 1.0f, c->x, d);
        rmsnorm(c->xn, c->x, c->w + L->ffn_norm, n, d, m->norm_eps);
        if (!eng_layer_moe(m, l)) {
            ffn(c, c->x, c->xn, n, d, m->ffn, c->w + L->w_gu, c->w + L->w_down);
        } else {
            moe(e, l, n);
            if (L->sh_gu != ENG_NONE)
                ffn(c, c->x, c->xn, n, d, (size_t)m->shared_experts * m->expert_ffn,
                    c->w + L->sh_gu, c->w + L->sh_down);
        }
    }
    e->route_ntok = n;
    // last token of each sequence -> final norm -> LM head -> argmax
    for (uint32_t s = 0; s < b->nseq; s++) {
        uint32_t t = b->start[s] + b->nnew[s] - 1;
        rmsnorm(c->xl + (size_t)s * d, c->x + (size_t)t * d, c->w + e->lay.final_norm, 1, d,
                m->norm_eps);
    }
    float *lg = logits ? logits : c->lg;
    eng_sgemm_nt(b->nseq, m->vocab, d, 1.0f, c->xl, d, c->w + e->lay.lm_head, d, 0.0f, lg,
                 m->vocab);
    if (next)
        for (uint32_t s = 0; s < b->nseq; s++) {
            const float *r = lg + (size_t)s * m->vocab;
            uint32_t best = 0;
            for (uint32_t v = 1; v < m->vocab; v++)
                if (r[v] > r[best]) best = v;
            next[s] = (int32_t)best;
        }
}
