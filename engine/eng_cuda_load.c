// engine/eng_cuda_load.c -- the C side of the CUDA backend: loads libkvfleet-cuda.so on first
// use and forwards each eng_cuda_* call to it (see eng_cuda.h). Built only with KVF_HAVE_CUDA.
// Loading happens once per process (pthread_once); the function table is filled completely
// or not at all, and the module's ABI number must equal ENG_CUDA_ABI.
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "eng_int.h"

#ifdef KVF_HAVE_CUDA
static struct {
    int (*abi)(void);
    int (*device_count)(void);
    int (*device_name)(char *, size_t);
    int (*create)(eng_cuda_ctx **, const eng_cuda_spec *, char *, size_t);
    void (*destroy)(eng_cuda_ctx *);
    void (*arena_bytes)(const eng_cuda_ctx *, double *, double *, double *);
    void (*forward)(eng_cuda_ctx *, const eng_batch *, const float *, float *, int32_t *, int32_t *,
                    float *, float *);
    void (*fill_kv)(eng_cuda_ctx *, const uint32_t *, const uint32_t *, const uint32_t *, uint32_t,
                    uint64_t);
    double (*bench_gemm)(int, int, int, int);
    double (*bench_decode_attn)(int, int, int, int, int, int, int);
} g_cu;
static bool g_loaded;
static char g_why[sizeof(((kvf_err *)0)->msg)];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void load_once(void) {
    kvf_err err = {0};
    void *h = kvf_module_open(ENG_CUDA_MODULE, false, &err);
    if (!h) {
        snprintf(g_why, sizeof g_why, "%s", err.msg);
        return;
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"eng_cuda_abi", (void **)&g_cu.abi},
        {"eng_cuda_device_count", (void **)&g_cu.device_count},
        {"eng_cuda_device_name", (void **)&g_cu.device_name},
        {"eng_cuda_create", (void **)&g_cu.create},
        {"eng_cuda_destroy", (void **)&g_cu.destroy},
        {"eng_cuda_arena_bytes", (void **)&g_cu.arena_bytes},
        {"eng_cuda_forward", (void **)&g_cu.forward},
        {"eng_cuda_fill_kv", (void **)&g_cu.fill_kv},
        {"eng_cuda_bench_gemm", (void **)&g_cu.bench_gemm},
        {"eng_cuda_bench_decode_attn", (void **)&g_cu.bench_decode_attn},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        // POSIX guarantees a data pointer from dlsym converts to a function pointer.
        void *p = kvf_module_sym(h, ENG_CUDA_MODULE, syms[i].name, &err);
        if (!p) {
            snprintf(g_why, sizeof g_why, "%s", err.msg);
            return;
        }
        memcpy(syms[i].slot, &p, sizeof p);
    }
    if (g_cu.abi() != ENG_CUDA_ABI) {
        snprintf(g_why, sizeof g_why, "%s has interface %d, this kvfleet wants %d: rebuild it",
                 ENG_CUDA_MODULE, g_cu.abi(), ENG_CUDA_ABI);
        return;
    }
    g_loaded = true;
}

int eng_cuda_load(char *msg, size_t cap) {
    pthread_once(&g_once, load_once);
    if (g_loaded) return ENG_CUDA_OK;
    if (msg && cap) snprintf(msg, cap, "%s", g_why);
    return ENG_CUDA_NODEV;
}

int eng_cuda_device_count(void) {
    return eng_cuda_load(NULL, 0) ? 0 : g_cu.device_count();
}
int eng_cuda_device_name(char *out, size_t cap) {
    return eng_cuda_load(NULL, 0) ? -1 : g_cu.device_name(out, cap);
}
int eng_cuda_create(eng_cuda_ctx **out, const eng_cuda_spec *s, char *msg, size_t cap) {
    *out = NULL;
    int rc = eng_cuda_load(msg, cap);
    return rc ? rc : g_cu.create(out, s, msg, cap);
}
void eng_cuda_destroy(eng_cuda_ctx *c) {
    if (!c) return;
    KVF_ASSERT(g_loaded);
    g_cu.destroy(c);
}
void eng_cuda_arena_bytes(const eng_cuda_ctx *c, double *w, double *kv, double *act) {
    KVF_ASSERT(g_loaded && c);
    g_cu.arena_bytes(c, w, kv, act);
}
void eng_cuda_forward(eng_cuda_ctx *c, const eng_batch *b, const float *router_bias, float *logits,
                      int32_t *next, int32_t *route_idx, float *route_w, float *device_ms) {
    KVF_ASSERT(g_loaded && c);
    g_cu.forward(c, b, router_bias, logits, next, route_idx, route_w, device_ms);
}
void eng_cuda_fill_kv(eng_cuda_ctx *c, const uint32_t *block, const uint32_t *slot0,
                      const uint32_t *n, uint32_t nseg, uint64_t seed) {
    KVF_ASSERT(g_loaded && c);
    g_cu.fill_kv(c, block, slot0, n, nseg, seed);
}
double eng_cuda_bench_gemm(int M, int N, int K, int iters) {
    return eng_cuda_load(NULL, 0) ? -1 : g_cu.bench_gemm(M, N, K, iters);
}
double eng_cuda_bench_decode_attn(int batch, int context, int heads, int kv_heads, int head_dim,
                                  int block_tokens, int iters) {
    return eng_cuda_load(NULL, 0) ? -1
                                  : g_cu.bench_decode_attn(batch, context, heads, kv_heads,
                                                           head_dim, block_tokens, iters);
}
#else
typedef int eng_cuda_load_unused;   // ISO C: a translation unit is not empty
#endif
