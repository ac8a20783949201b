// models/mdl_table.c -- the `table` step model: the roofline's terms, each replaced by the
// hardware file's kernel tables (measured, published figures with their sources) where a
// table covers it, and `kvfleet hw check`'s sanity rules for those tables.
//
// Terms and the tables that answer them (models/README.md):
//   dense GEMMs     gemm_fp8 / gemm_bf16 rows at the model's per-GPU projection shapes (TP
//                   splits n of column-parallel projections, k of row-parallel ones), by m =
//                   tokens per TP group; log-bilinear between the (n, k) grid points that
//                   bracket a shape; the rest of the dense group (output projection, router,
//                   shapes without rows) stays on the roofline
//   expert GEMMs    moe_bf16 / moe_fp8 rows (one fused MoE layer, balanced routing) of the
//                   model's expert shape and (tp, ep) layout by tokens entering the op on a
//                   GPU (an ep between two measured: linear in log(ep)), or grouped_fp8 /
//                   grouped_bf16 rows of the expert shapes (gate+up: n = 2 ffn, k = hidden;
//                   down: n = hidden, k = ffn) by tokens per expert; under EP the rows
//                   measured between DeepEP all-to-alls of the step's mode first, then the
//                   grouped rows, then the fused rows; without EP fused, then grouped. Shared
//                   experts by gemm rows at m = tokens per GPU, the roofline's share of the
//                   expert FLOPs where those rows stop.
//   MoE routing     moe_routing rows; inside the fused rows; otherwise not a term of its own
//                   (the router GEMM is in the dense group)
//   MoE permutation moe_permute rows; inside the fused rows; beside grouped GEMM rows (which
//                   time the GEMMs alone): under EP the dispatch/combine kernels' work, else the
//                   permute + un-permute HBM traffic at the roofline's memory factor
//   attention       decode: GQA by decode_gqa rows (per-GPU heads, by batch and mean context,
//                   log-log between rows), MLA by decode_mla rows the same way, else by the
//                   decode_attn row, max(bytes / GBps, FLOPs / tflops); prefill: prefill_gqa
//                   (prefill_mla) rows by chunks and token-weighted sequence length, else
//                   prefill_attn rows by sequence length
//   TP all-reduce   allreduce rows of tp GPUs by message bytes (bus bandwidth)
//   dispatch/combine ep_dispatch / ep_combine rows of the mode the phase uses (decode:
//                   low_latency, else normal) at the tokens one call carries (a GPU's, halved
//                   under two micro-batches), linear in log(ep) between the bracketing ep;
//                   at one ep log-log in tokens where its rows bracket them, else its nearest
//                   measured point scaled by the token curve of the nearest ep that has one
//                   (the kernels' latency floor), else that point's bandwidth within 4x
// Under two micro-batches each row is read at one micro-batch's shape (half the tokens) and
// its time counted twice. Interpolation is linear in log(x) between the two nearest rows
// (times: log-log); below a GEMM series' smallest m the call costs that m's time; elsewhere
// outside the measured range the term is the roofline's (a fallback). Every step with at least one
// applicable term answered by the roofline counts in table_fallbacks. Rows are found through
// the index mdl_hardware_index builds once at load: per kind, series sorted by their shape
// columns, each sorted along its axis; a lookup scans one kind's rows, never sorts.
#include "mdl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- row index ---------------------------------------------------------------------------

enum { KEY_MAX = 8 };

// The columns naming the series a row belongs to; returns how many.
static int row_key(const mdl_krow *r, double *key) {
    switch (r->kind) {
    case MDL_K_GEMM_FP8:
    case MDL_K_GEMM_BF16:
    case MDL_K_GROUPED_FP8:
    case MDL_K_GROUPED_BF16:
        key[0] = r->n, key[1] = r->k;
        return 2;
    case MDL_K_DECODE_ATTN:
    case MDL_K_PREFILL_ATTN:
        key[0] = r->attention, key[1] = r->head_dim;
        return 2;
    case MDL_K_EP_DISPATCH:
    case MDL_K_EP_COMBINE:
        key[0] = r->low_latency;
        return 1;
    case MDL_K_ALLREDUCE:
        key[0] = r->gpus;
        return 1;
    case MDL_K_DECODE_GQA:
        key[0] = r->heads, key[1] = r->kv_heads, key[2] = r->head_dim, key[3] = r->kv_bytes;
        return 4;
    case MDL_K_PREFILL_GQA:
        key[0] = r->heads, key[1] = r->kv_heads, key[2] = r->head_dim;
        return 3;
    case MDL_K_MOE_BF16:
    case MDL_K_MOE_FP8:
        key[0] = r->experts, key[1] = r->topk, key[2] = r->hidden, key[3] = r->inter;
        key[4] = r->tp, key[5] = r->routing, key[6] = r->a2a, key[7] = r->ep;
        return 8;
    case MDL_K_MOE_ROUTING:
        key[0] = r->experts, key[1] = r->topk;
        return 2;
    case MDL_K_MOE_PERMUTE:
        key[0] = r->hidden, key[1] = r->topk;
        return 2;
    case MDL_K_DECODE_MLA:
        key[0] = r->heads, key[1] = r->kv_bytes;
        return 2;
    case MDL_K_PREFILL_MLA:
        key[0] = r->heads;
        return 1;
    case MDL_K_KINDS:
        break;
    }
    KVF_ASSERT(!"row kind");
    return 0;
}

// The axis a series is sorted along (2-D kinds: the outer one).
static double row_x(const mdl_krow *r) {
    switch (r->kind) {
    case MDL_K_GEMM_FP8:
    case MDL_K_GEMM_BF16:
    case MDL_K_GROUPED_FP8:
    case MDL_K_GROUPED_BF16:
        return r->m;
    case MDL_K_PREFILL_ATTN:
        return r->seqlen;
    case MDL_K_EP_DISPATCH:
    case MDL_K_EP_COMBINE:
        return r->ep;
    case MDL_K_ALLREDUCE:
        return r->bytes;
    case MDL_K_DECODE_GQA:
    case MDL_K_DECODE_MLA:
    case MDL_K_PREFILL_GQA:
    case MDL_K_PREFILL_MLA:
        return r->batch;
    case MDL_K_MOE_BF16:
    case MDL_K_MOE_FP8:
    case MDL_K_MOE_ROUTING:
    case MDL_K_MOE_PERMUTE:
        return r->tokens;
    default:
        return 0;
    }
}

// The inner axis of 2-D kinds (0 otherwise).
static double row_x2(const mdl_krow *r) {
    if (r->kind == MDL_K_DECODE_GQA || r->kind == MDL_K_DECODE_MLA) return r->context;
    if (r->kind == MDL_K_EP_DISPATCH || r->kind == MDL_K_EP_COMBINE) return r->tokens;
    return r->kind == MDL_K_PREFILL_GQA || r->kind == MDL_K_PREFILL_MLA ? r->seqlen : 0;
}

// A shape column outside key and axes (grouped: groups): rows differing in it are not
// duplicates, but lookups treat them as one point (the first in order).
static double row_extra(const mdl_krow *r) {
    if (r->kind == MDL_K_GROUPED_FP8 || r->kind == MDL_K_GROUPED_BF16) return r->groups;
    return 0;
}

static int dcmp(double a, double b) {
    return a < b ? -1 : a > b ? 1 : 0;
}

// Orders rows by (kind, key, x, x2, extra, line).
static int row_cmp(const mdl_krow *a, const mdl_krow *b) {
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    double ka[KEY_MAX], kb[KEY_MAX];
    int n = row_key(a, ka);
    row_key(b, kb);
    for (int i = 0; i < n; i++)
        if (dcmp(ka[i], kb[i])) return dcmp(ka[i], kb[i]);
    int c = dcmp(row_x(a), row_x(b));
    if (!c) c = dcmp(row_x2(a), row_x2(b));
    if (!c) c = dcmp(row_extra(a), row_extra(b));
    return c ? c : dcmp(a->line, b->line);
}

static bool same_key(const mdl_krow *a, const mdl_krow *b) {
    if (a->kind != b->kind) return false;
    double ka[KEY_MAX], kb[KEY_MAX];
    int n = row_key(a, ka);
    row_key(b, kb);
    for (int i = 0; i < n; i++)
        if (ka[i] != kb[i]) return false;
    return true;
}

_Static_assert(MDL_KROWS_MAX <= UINT16_MAX, "mdl_hardware.order and kind_at are uint16_t");

void mdl_hardware_index(mdl_hardware *h) {
    KVF_ASSERT(h && h->nkrows <= MDL_KROWS_MAX);
    // insertion sort: a few hundred rows, once per load, stable on equal rows
    for (uint32_t i = 0; i < h->nkrows; i++) {
        KVF_ASSERT(h->krows[i].kind < MDL_K_KINDS);
        uint32_t j = i;
        while (j > 0 && row_cmp(&h->krows[h->order[j - 1]], &h->krows[i]) > 0) {
            h->order[j] = h->order[j - 1];
            j--;
        }
        h->order[j] = (uint16_t)i;
    }
    uint32_t at = 0;
    for (int k = 0; k <= MDL_K_KINDS; k++) {
        while (at < h->nkrows && (int)h->krows[h->order[at]].kind < k)
            at++;
        h->kind_at[k] = (uint16_t)at;
    }
    h->indexed = true;
}

static const mdl_krow *row_at(const mdl_hardware *hw, int i) {
    return &hw->krows[hw->order[i]];
}

// Lookups of one stepper repeat: its model, layout and hardware are fixed, so the series a
// term uses and the grid points bracketing a shape are the same every step. A stepper keeps
// them here (a memo of answers, never of figures); the explanation path runs without one.
enum { TC_FIND = 64, TC_BRACKET = 32 };
typedef struct tc_find {
    mdl_kkind kind;
    int nkey, a, b;
    double key[KEY_MAX];
    bool ok;
} tc_find;
typedef struct tc_bracket {
    mdl_kkind kind;
    double q[KEY_MAX];     // what was asked (GEMM: n, k; MoE: experts .. tp, routing, ep)
    double lo[2], hi[2];   // the bracketing values found (GEMM: n, k; MoE: ep)
    bool ok;
} tc_bracket;
// EP all-to-all lookups by their exact inputs (a step's tokens per call recur from step to
// step): the figure and the rows it came from, a ring of the last TC_EP.
enum { TC_EP = 8 };
typedef struct tc_ep {
    int kind;
    double mode, ep, q;   // what was asked
    bool ok;
    double y, t0, shape;    // the answer: GBps, and how it was found (ep_how)
    int lo, hi, slo, shi;   // the rows used, and the curve's
} tc_ep;
typedef struct tcache {
    int nf, nb, ne, enext;   // ne: EP entries held (<= TC_EP); enext: the slot written next
    tc_find f[TC_FIND];
    tc_bracket br[TC_BRACKET];
    tc_ep ep[TC_EP];
} tcache;

// Where lookups go: the hardware's rows and the stepper's memo (tc may be NULL).
typedef struct lk {
    const mdl_hardware *hw;
    tcache *tc;
} lk;

static tc_bracket *bracket_memo(const lk *L, mdl_kkind kind, const double *q, int nq, bool *hit) {
    *hit = false;
    if (!L->tc) return NULL;
    for (int i = 0; i < L->tc->nb; i++) {
        tc_bracket *e = &L->tc->br[i];
        if (e->kind == kind && !memcmp(e->q, q, (size_t)nq * sizeof *q)) return (*hit = true), e;
    }
    if (L->tc->nb == TC_BRACKET) return NULL;
    tc_bracket *e = &L->tc->br[L->tc->nb++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    memcpy(e->q, q, (size_t)nq * sizeof *q);
    return e;
}

static bool series_scan(const mdl_hardware *hw, mdl_kkind kind, const double *key, int nkey, int *a,
                        int *b);

// The run [*a, *b) of index positions holding the series of `kind` with key `key`.
static bool series_find(const lk *L, mdl_kkind kind, const double *key, int nkey, int *a, int *b) {
    KVF_ASSERT(kind < MDL_K_KINDS && nkey <= KEY_MAX);
    tcache *tc = L->tc;
    if (tc)
        for (int i = 0; i < tc->nf; i++) {
            const tc_find *e = &tc->f[i];
            if (e->kind == kind && e->nkey == nkey &&
                !memcmp(e->key, key, (size_t)nkey * sizeof *key)) {
                *a = e->a, *b = e->b;
                return e->ok;
            }
        }
    bool ok = series_scan(L->hw, kind, key, nkey, a, b);
    if (tc && tc->nf < TC_FIND) {
        tc_find *e = &tc->f[tc->nf++];
        memset(e, 0, sizeof *e);
        e->kind = kind, e->nkey = nkey, e->ok = ok;
        memcpy(e->key, key, (size_t)nkey * sizeof *key);
        e->a = ok ? *a : 0, e->b = ok ? *b : 0;
    }
    return ok;
}

static bool series_scan(const mdl_hardware *hw, mdl_kkind kind, const double *key, int nkey, int *a,
                        int *b) {
    KVF_ASSERT(kind < MDL_K_KINDS && nkey <= KEY_MAX);
    KVF_ASSERT(hw->indexed || hw->nkrows == 0);
    if (!hw->indexed) return false;
    for (int i = hw->kind_at[kind]; i < hw->kind_at[kind + 1]; i++) {
        double k[KEY_MAX];
        int n = row_key(row_at(hw, i), k);
        KVF_ASSERT(n == nkey);
        bool eq = true;
        for (int j = 0; j < n && eq; j++)
            eq = k[j] == key[j];
        if (!eq) continue;
        *a = i;
        while (i < hw->kind_at[kind + 1] && same_key(row_at(hw, i), row_at(hw, *a)))
            i++;
        *b = i;
        return true;
    }
    return false;
}

typedef enum fig { FIG_TFLOPS, FIG_GBPS, FIG_US, FIG_TOKENS } fig;
static double fig_of(const mdl_krow *r, fig f) {
    return f == FIG_TFLOPS ? r->tflops : f == FIG_GBPS ? r->GBps : f == FIG_US ? r->us : r->tokens;
}

// Where a lookup landed: the rows used (krows indices, -1 none) for the explanation.
typedef struct hit {
    int lo, hi;
} hit;
static void hit_join(hit *h, const hit *o) {
    if (o->lo >= 0 && (h->lo < 0 || o->lo < h->lo)) h->lo = o->lo;
    if (o->hi >= 0 && (h->hi < 0 || o->hi > h->hi)) h->hi = o->hi;
}

// The figure at x along the run [a, b) of index positions sorted by `axis` (0: row_x, 1:
// row_x2), linear in log(x) (log_y: log-log). Rows repeating an x count once (the first).
// False outside the run's range.
static bool run_interp(const mdl_hardware *hw, int a, int b, int axis, double x, fig f, bool log_y,
                       double *y, hit *h) {
    int prev = -1;
    double px = 0;
    for (int i = a; i < b; i++) {
        const mdl_krow *r = row_at(hw, i);
        double rx = axis ? row_x2(r) : row_x(r);
        if (prev >= 0 && rx == px) continue;
        if (fabs(rx - x) <= 1e-9 * x) {
            *y = fig_of(r, f);
            h->lo = h->hi = hw->order[i];
            return *y > 0;
        }
        if (rx > x) {
            if (prev < 0) return false;
            const mdl_krow *q = row_at(hw, prev);
            double y0 = fig_of(q, f), y1 = fig_of(r, f);
            if (!(y0 > 0 && y1 > 0)) return false;
            double t = log(x / px) / log(rx / px);
            *y = log_y ? exp(log(y0) + t * (log(y1) - log(y0))) : y0 + t * (y1 - y0);
            h->lo = hw->order[prev];
            h->hi = hw->order[i];
            return true;
        }
        prev = i;
        px = rx;
    }
    return false;
}

// 1-D lookup: the series of kind with key, at x.
static bool look1(const lk *L, mdl_kkind kind, const double *key, int nkey, double x, fig f,
                  bool log_y, double *y, hit *h) {
    int a, b;
    h->lo = h->hi = -1;
    return x > 0 && series_find(L, kind, key, nkey, &a, &b) &&
           run_interp(L->hw, a, b, 0, x, f, log_y, y, h);
}

// A run of a series' rows sharing one value x of the outer axis (2-D kinds: batch; EP: ep).
typedef struct outer_run {
    int a, b;   // index positions of its rows
    double x;
} outer_run;

// The run of the rows [i, end) that starts at index position i (i < end).
static outer_run outer_run_at(const mdl_hardware *hw, int i, int end) {
    outer_run g = {i, i, row_x(row_at(hw, i))};
    while (g.b < end && row_x(row_at(hw, g.b)) == g.x)
        g.b++;
    return g;
}

// The runs of the series [a, b) whose outer values bracket x (the same run when one holds x);
// false outside their range.
static bool outer_bracket(const mdl_hardware *hw, int a, int b, double x, outer_run *lo,
                          outer_run *hi) {
    lo->a = hi->a = -1;
    for (int i = a; i < b;) {
        outer_run g = outer_run_at(hw, i, b);
        i = g.b;
        if (g.x <= x * (1 + 1e-9)) *lo = g;
        if (g.x >= x * (1 - 1e-9)) {
            *hi = g;
            break;
        }
    }
    return lo->a >= 0 && hi->a >= 0;
}

// 2-D lookup (decode_gqa, prefill_gqa): bracket x among the series' outer values, interpolate
// each bracketing sub-run at x2, then across x.
static bool look2(const lk *L, mdl_kkind kind, const double *key, int nkey, double x, double x2,
                  fig f, bool log_y, double *y, hit *h) {
    const mdl_hardware *hw = L->hw;
    int a, b;
    h->lo = h->hi = -1;
    outer_run lo, hi;
    if (!(x > 0 && x2 > 0) || !series_find(L, kind, key, nkey, &a, &b) ||
        !outer_bracket(hw, a, b, x, &lo, &hi))
        return false;
    double y0, y1;
    hit h0, h1;
    if (!run_interp(hw, lo.a, lo.b, 1, x2, f, log_y, &y0, &h0) ||
        !run_interp(hw, hi.a, hi.b, 1, x2, f, log_y, &y1, &h1))
        return false;
    *h = h0;
    hit_join(h, &h1);
    double xa = lo.x, xb = hi.x;
    if (xa == xb) {
        *y = y0;
        return true;
    }
    double t = log(x / xa) / log(xb / xa);
    *y = log_y ? exp(log(y0) + t * (log(y1) - log(y0))) : y0 + t * (y1 - y0);
    return true;
}

// The grid points bracketing (n, k) among the rows of kind: k among all rows, n among those
// measured at both bracketing k.
static bool gemm_bracket(const mdl_hardware *hw, mdl_kkind kind, double n, double k, double *nlo_,
                         double *nhi_, double *klo_, double *khi_) {
    double klo = 0, khi = 0;
    for (int i = hw->kind_at[kind]; i < hw->kind_at[kind + 1]; i++) {
        double rk = row_at(hw, i)->k;
        if (rk <= k && rk > klo) klo = rk;
        if (rk >= k && (khi == 0 || rk < khi)) khi = rk;
    }
    if (klo == 0 || khi == 0) return false;
    // rows sorted by (n, k): one pass over the runs of equal n
    double nlo = 0, nhi = 0;
    for (int i = hw->kind_at[kind], end = hw->kind_at[kind + 1]; i < end;) {
        double rn = row_at(hw, i)->n;
        bool has_lo = false, has_hi = false;
        for (; i < end && row_at(hw, i)->n == rn; i++) {
            has_lo = has_lo || row_at(hw, i)->k == klo;
            has_hi = has_hi || row_at(hw, i)->k == khi;
        }
        if (!has_lo || !has_hi) continue;
        if (rn <= n && rn > nlo) nlo = rn;
        if (rn >= n && (nhi == 0 || rn < nhi)) nhi = rn;
    }
    if (nlo == 0 || nhi == 0) return false;
    *nlo_ = nlo, *nhi_ = nhi, *klo_ = klo, *khi_ = khi;
    return true;
}

// A GEMM series at m rows; below its smallest measured m, that m's time (TFLOPS scaled by
// m / m0): a kernel tiles the rows in blocks of 64-128 and reads the same weights, so a call of
// fewer rows than the smallest measured one costs no less.
static bool look1_gemm(const lk *L, mdl_kkind kind, const double *key, double m, double *y,
                       hit *h) {
    if (look1(L, kind, key, 2, m, FIG_TFLOPS, false, y, h)) return true;
    int a, b;
    if (!(m > 0) || !series_find(L, kind, key, 2, &a, &b)) return false;
    const mdl_krow *r = row_at(L->hw, a);
    double m0 = row_x(r);
    if (!(m < m0) || !(r->tflops > 0)) return false;
    *y = r->tflops * m / m0;
    h->lo = h->hi = L->hw->order[a];
    return true;
}

// GEMM lookup at (m, n, k): the series (n_i, k_j) of the grid points bracketing n and k
// (n among those measured at both bracketing k), each read at m (look1_gemm), then
// log-bilinear in n and k. Exact shapes use their own series alone.
static bool look_gemm(const lk *L, mdl_kkind kind, double m, double n, double k, double *y,
                      hit *h) {
    KVF_ASSERT(kind == MDL_K_GEMM_FP8 || kind == MDL_K_GEMM_BF16 || kind == MDL_K_GROUPED_FP8 ||
               kind == MDL_K_GROUPED_BF16);
    const mdl_hardware *hw = L->hw;
    h->lo = h->hi = -1;
    if (!(m > 0 && n > 0 && k > 0) || !hw->indexed) return false;
    double q[2] = {n, k};
    bool known;
    tc_bracket *e = bracket_memo(L, kind, q, 2, &known);
    double nlo = 0, nhi = 0, klo = 0, khi = 0;
    if (known) {
        if (!e->ok) return false;
        nlo = e->lo[0], nhi = e->hi[0], klo = e->lo[1], khi = e->hi[1];
    } else {
        bool ok = gemm_bracket(hw, kind, n, k, &nlo, &nhi, &klo, &khi);
        if (e) {
            e->ok = ok;
            e->lo[0] = nlo, e->hi[0] = nhi, e->lo[1] = klo, e->hi[1] = khi;
        }
        if (!ok) return false;
    }
    double ns[2] = {nlo, nhi}, ks[2] = {klo, khi}, v[2][2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double key[2] = {ns[i], ks[j]};
            hit c;
            if (!look1_gemm(L, kind, key, m, &v[i][j], &c)) return false;
            hit_join(h, &c);
        }
    double tn = nhi > nlo ? log(n / nlo) / log(nhi / nlo) : 0;
    double tk = khi > klo ? log(k / klo) / log(khi / klo) : 0;
    double a0 = v[0][0] + tk * (v[0][1] - v[0][0]), a1 = v[1][0] + tk * (v[1][1] - v[1][0]);
    *y = a0 + tn * (a1 - a0);
    return *y > 0;
}

// Fused-MoE lookup: the series of the model's experts at expert layout (tp, ep) and key7's
// routing and all-to-all mode, at X tokens an EP group of ep GPUs; an ep between two measured
// ones is linear in log(ep) between them, at the same X (the fused op sees the group's tokens),
// or for the rows measured between all-to-alls (key7[6] != MDL_A2A_NONE: a GPU computes what
// it received) at the same tokens a GPU, X x ep' / ep.
static bool look_moe(const lk *L, mdl_kkind kind, const double *key7, double ep, double X,
                     double *y, hit *h) {
    const mdl_hardware *hw = L->hw;
    double key[8] = {key7[0], key7[1], key7[2], key7[3], key7[4], key7[5], key7[6], ep};
    if (look1(L, kind, key, 8, X, FIG_TFLOPS, false, y, h)) return true;
    h->lo = h->hi = -1;
    if (!hw->indexed) return false;
    bool known;
    tc_bracket *e = bracket_memo(L, kind, key, 8, &known);
    double elo = 0, ehi = 0;
    if (known) {
        elo = e->lo[0], ehi = e->hi[0];
    } else {
        for (int i = hw->kind_at[kind]; i < hw->kind_at[kind + 1]; i++) {
            const mdl_krow *r = row_at(hw, i);
            if (r->experts != key7[0] || r->topk != key7[1] || r->hidden != key7[2] ||
                r->inter != key7[3] || r->tp != key7[4] || r->routing != key7[5] ||
                r->a2a != key7[6])
                continue;
            if (r->ep < ep && r->ep > elo) elo = r->ep;
            if (r->ep > ep && (ehi == 0 || r->ep < ehi)) ehi = r->ep;
        }
        if (e) e->lo[0] = elo, e->hi[0] = ehi, e->ok = elo > 0 && ehi > 0;
    }
    if (elo == 0 || ehi == 0) return false;
    double y0, y1;
    hit h0, h1;
    bool per_gpu = key7[6] != MDL_A2A_NONE;
    key[7] = elo;
    if (!look1(L, kind, key, 8, per_gpu ? X * elo / ep : X, FIG_TFLOPS, false, &y0, &h0))
        return false;
    key[7] = ehi;
    if (!look1(L, kind, key, 8, per_gpu ? X * ehi / ep : X, FIG_TFLOPS, false, &y1, &h1))
        return false;
    *h = h0;
    hit_join(h, &h1);
    *y = y0 + log(ep / elo) / log(ehi / elo) * (y1 - y0);
    return *y > 0;
}

// ---- explanation -------------------------------------------------------------------------

static void term_add(mdl_explain *ex, const char *name, double s, const mdl_hardware *hw, hit h,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void term_add(mdl_explain *ex, const char *name, double s, const mdl_hardware *hw, hit h,
                     const char *fmt, ...) {
    if (!ex || ex->n >= MDL_EXPLAIN_MAX) return;
    mdl_term *t = &ex->t[ex->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->s = s;
    int a = h.lo >= 0 ? hw->krows[h.lo].line : 0, b = h.hi >= 0 ? hw->krows[h.hi].line : 0;
    t->row_lo = a && b ? KVF_MIN(a, b) : a;
    t->row_hi = a && b ? KVF_MAX(a, b) : b;
    if (h.lo >= 0)
        snprintf(t->source, sizeof t->source, "%s", mdl_krow_source(hw, &hw->krows[h.lo]));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->how, sizeof t->how, fmt, ap);
    va_end(ap);
}

static const hit NOHIT = {-1, -1};

// ---- the model's shapes and kinds ----------------------------------------------------------

typedef mdl_gemm_shape gemm_shape;

// The GEMM, grouped-GEMM and fused-MoE kinds for weights of `wbytes` per parameter: a table
// answers only the precision it measured -- bf16 rows bf16 weights and inputs, fp8 rows
// (block-scaled) fp8 weights and inputs (mdl_model_gemm_precision); MDL_K_KINDS: none (W8A16,
// MXFP4 experts, ...).
static void gemm_kinds(const mdl_model *m, double wbytes, mdl_kkind *gemm, mdl_kkind *grouped,
                       mdl_kkind *moe) {
    *gemm = *grouped = *moe = MDL_K_KINDS;
    if (!(wbytes > 0)) return;
    mdl_prec p = mdl_model_gemm_precision(m, wbytes);
    if (p == MDL_PREC_BF16 && wbytes == 2)
        *gemm = MDL_K_GEMM_BF16, *grouped = MDL_K_GROUPED_BF16, *moe = MDL_K_MOE_BF16;
    if (p == MDL_PREC_FP8 && wbytes == 1)
        *gemm = MDL_K_GEMM_FP8, *grouped = MDL_K_GROUPED_FP8, *moe = MDL_K_MOE_FP8;
}

// ---- one evaluation --------------------------------------------------------------------------

typedef struct tab {
    const mdl_model *m;
    const mdl_hardware *hw;
    lk L;   // lookups: hw and the stepper's memo
    const mdl_batch *b;
    const mdl_work *w;
    mdl_parts *pp;
    mdl_parallel p;
    mdl_efficiency eff;
    double G, T;        // GPUs; tokens through the GEMMs
    double mb;          // kernel calls per step: 2 under two micro-batches (each half the tokens)
    bool use, decode;   // tables on; decode phase
    mdl_kkind gemm, e_gemm, e_grouped, e_moe;   // kinds for dense and expert weights
    mdl_explain *ex;
    bool fb;   // an applicable term came from the roofline
} tab;

// What the explanation adds to a row's shape under two micro-batches (each call is one
// micro-batch's: half the tokens, twice per step).
static const char *mb_note(const tab *c) {
    return c->mb > 1 ? " a micro-batch, x2" : "";
}

// Marks a term answered by the roofline although tables were asked for.
static void fallback(tab *c) {
    if (c->use) c->fb = true;
}

// Seconds of one GEMM shape on one GPU at `rows` rows, from the table; false: no rows.
static bool gemm_time(const tab *c, mdl_kkind kind, const gemm_shape *s, double rows, double *sec,
                      double *tflops, hit *h) {
    if (kind == MDL_K_KINDS || !look_gemm(&c->L, kind, rows / c->mb, s->n, s->k, tflops, h))
        return false;
    *sec = 2.0 * rows * s->n * s->k * s->layers / (*tflops * 1e12);
    return true;
}

static void table_dense(tab *c) {
    const mdl_work *w = c->w;
    if (w->flops[MDL_WG_DENSE] <= 0) return;
    double roof = c->pp->group_s[MDL_WG_DENSE];
    gemm_shape sh[MDL_DENSE_GEMMS];
    int ns = mdl_dense_gemms(c->m, c->p.tp, sh);
    double mt = c->T / (c->G / c->p.tp);   // rows of one TP group's GEMMs
    double covered_f = 0, covered_s = 0;
    // two micro-batches: the pre-attention projections' and dense FFN's seconds (rows where
    // they have rows, the roofline's share by FLOPs where not)
    double role_s[3] = {0, 0, 0}, role_uncov_f[3] = {0, 0, 0};
    for (int i = 0; c->use && i < ns; i++) {
        double s, y;
        hit h;
        double f = 2.0 * mt * sh[i].n * sh[i].k * sh[i].layers * c->G;   // all GPUs
        if (!gemm_time(c, c->gemm, &sh[i], mt, &s, &y, &h)) {
            role_uncov_f[sh[i].role] += f;
            continue;
        }
        role_s[sh[i].role] += s;
        covered_f += f;
        covered_s += s;
        term_add(c->ex, "  gemm", s, c->hw, h, "%s n=%.0f k=%.0f m=%.0f%s: %.0f TFLOPS (%s)",
                 sh[i].what, sh[i].n, sh[i].k, mt / c->mb, mb_note(c), y, mdl_kkind_name(c->gemm));
    }
    if (covered_f > 0) {
        double frac = KVF_MAX(0.0, 1 - covered_f / w->flops[MDL_WG_DENSE]);
        double rs = roof * frac;   // the roofline's time for what no row covers
        c->pp->group_s[MDL_WG_DENSE] = covered_s + rs;
        if (c->pp->tbo) {
            double df = w->flops[MDL_WG_DENSE];
            c->pp->pre_s =
                role_s[MDL_GEMM_PRE] + roof * KVF_MIN(role_uncov_f[MDL_GEMM_PRE] / df, 1.0);
            c->pp->dense_ffn_s =
                role_s[MDL_GEMM_FFN] + roof * KVF_MIN(role_uncov_f[MDL_GEMM_FFN] / df, 1.0);
        }
        term_add(c->ex, "  rest", rs, c->hw, NOHIT,
                 "roofline: %.0f%% of dense FLOPs (output projection, router, shapes "
                 "without rows) at the roofline's share",
                 100 * frac);
        if (frac > 0.25) fallback(c);
    } else {
        fallback(c);
    }
    term_add(c->ex, "dense GEMMs", c->pp->group_s[MDL_WG_DENSE], c->hw, NOHIT, "%s",
             covered_f > 0 ? "the gemm rows above + the roofline rest"
                           : "roofline: max(FLOPs / (peak x compute), bytes / (HBM x memory))");
}

// The expert layout a fused-MoE row is measured in: (tp, ep) of the expert weights.
static void moe_layout(const mdl_parallel *p, double *tp, double *ep) {
    if (p->ep > 1 && p->tp <= p->ep)
        *tp = 1, *ep = p->ep;
    else
        *tp = p->tp, *ep = 1;
}

// Shared experts by gemm rows at m = tokens per GPU: seconds into sh->s (0 without shared
// experts); false when a shape has no rows.
typedef struct shared_part {
    double s, m, gu, dn;   // seconds; rows; gate+up and down TFLOPS
    bool roof;             // no gemm rows at m: the roofline's share
    hit h;
} shared_part;
static bool shared_time(tab *c, double shared_f, shared_part *sh) {
    memset(sh, 0, sizeof *sh);
    sh->h = NOHIT;
    if (shared_f <= 0) return true;
    const mdl_model *m = c->m;
    double f = (double)m->expert_ffn * m->shared_experts;
    gemm_shape gu = {2.0 * f, m->hidden, m->moe_layers, "shared gate+up", MDL_GEMM_POST};
    gemm_shape dn = {m->hidden, f, m->moe_layers, "shared down", MDL_GEMM_POST};
    double s1, s2;
    hit h2;
    sh->m = c->T / c->G;
    if (!gemm_time(c, c->e_gemm, &gu, sh->m, &s1, &sh->gu, &sh->h) ||
        !gemm_time(c, c->e_gemm, &dn, sh->m, &s2, &sh->dn, &h2)) {
        // no rows at this m: the roofline's time for the shared experts' share of the group's
        // FLOPs (the step counts as a fallback), so the routed experts keep their rows
        const mdl_parts *pp = c->pp;
        double ef = c->w->flops[MDL_WG_EXPERT];
        sh->s = ef > 0 ? KVF_MAX(pp->tc[MDL_WG_EXPERT], pp->tm[MDL_WG_EXPERT]) * shared_f / ef : 0;
        sh->h = NOHIT;
        sh->roof = true;
        fallback(c);
        return true;
    }
    sh->s = s1 + s2;
    hit_join(&sh->h, &h2);
    return true;
}
static void shared_term(tab *c, const shared_part *sh) {
    if (sh->s > 0 && sh->roof)
        term_add(c->ex, "  shared experts", sh->s, c->hw, NOHIT,
                 "roofline: no %s rows at m=%.0f%s; the roofline's time for their share of the "
                 "expert FLOPs",
                 mdl_kkind_name(c->e_gemm), sh->m / c->mb, mb_note(c));
    else if (sh->s > 0)
        term_add(c->ex, "  shared experts", sh->s, c->hw, sh->h,
                 "%s m=%.0f%s: gate+up %.0f, down %.0f TFLOPS", mdl_kkind_name(c->e_gemm),
                 sh->m / c->mb, mb_note(c), sh->gu, sh->dn);
}

// Routing and permutation terms beside GEMM-only (grouped) rows: their own rows when the
// file has them. Permutation otherwise: under expert parallelism the dispatch and combine
// kernels place tokens in per-expert buffers and reduce them back (DeepEP with masked grouped
// GEMMs), so it is theirs; on one expert group it is HBM traffic (permute and un-permute each
// read and write every (token, expert) copy of the hidden state). Seconds into *route, *perm.
static void moe_side_terms(tab *c, double *route, double *perm, hit *hr, hit *hp, bool *r_rows,
                           bool *p_rows) {
    const mdl_model *m = c->m;
    double tok = c->T / c->G, L = m->moe_layers, y;
    double kr[2] = {m->experts, m->experts_active}, kp[2] = {m->hidden, m->experts_active};
    *route = *perm = 0;
    *r_rows = look1(&c->L, MDL_K_MOE_ROUTING, kr, 2, tok / c->mb, FIG_US, true, &y, hr);
    if (*r_rows) *route = L * c->mb * y * 1e-6;
    *p_rows = look1(&c->L, MDL_K_MOE_PERMUTE, kp, 2, tok / c->mb, FIG_US, true, &y, hp);
    if (*p_rows) {
        *perm = L * c->mb * y * 1e-6 * c->p.ep_skew;
    } else if (c->p.ep > 1) {
        *perm = 0;
    } else {
        double bytes = 4.0 * tok * m->experts_active * m->hidden * 2;   // bf16 activations
        *perm = L * bytes / (c->hw->hbm_Bps * c->eff.memory) * c->p.ep_skew;
    }
}

// The fused-MoE rows of all-to-all mode a2a (MDL_A2A_NONE: routing, permutation and expert
// GEMMs in one measured op; a DeepEP mode: the op between that mode's dispatch and combine,
// which permutes and un-permutes but does not route). False when no series covers the model's
// shape and layout at its tokens.
static bool experts_fused(tab *c, double shared_f, double a2a) {
    const mdl_model *m = c->m;
    if (c->e_moe == MDL_K_KINDS) return false;
    double tp, ep, y = 0;
    moe_layout(&c->p, &tp, &ep);
    double key[7] = {m->experts, m->experts_active, m->hidden, m->expert_ffn, tp, c->p.routing};
    key[6] = a2a;
    double X = c->T * tp * ep / c->G;   // tokens entering the op on each GPU of an expert group
    hit h;
    if (!look_moe(&c->L, c->e_moe, key, ep, X / c->mb, &y, &h)) return false;
    double fl = 2.0 * 3 * m->hidden * m->expert_ffn / tp * X * m->experts_active / ep;
    double s = m->moe_layers * fl / (y * 1e12);
    shared_part sh;
    if (!shared_time(c, shared_f, &sh)) return false;
    int line = c->hw->krows[h.lo].line;
    const char *kn = mdl_kkind_name(c->e_moe);
    const char *mode = a2a == MDL_A2A_LOW_LATENCY ? "low_latency" : "normal";
    if (a2a == MDL_A2A_NONE)
        term_add(c->ex, "MoE routing", 0, c->hw, h, "inside the fused %s row (line %d)", kn, line);
    else
        term_add(c->ex, "MoE routing", 0, c->hw, NOHIT,
                 "not in the %s %s rows (they start after the dispatch): the router GEMM is in "
                 "the dense rest, top-k selection not timed",
                 kn, mode);
    if (a2a == MDL_A2A_LOW_LATENCY)
        term_add(c->ex, "MoE permutation", 0, c->hw, NOHIT,
                 "done by the low_latency dispatch and combine (tokens land in per-expert "
                 "buffers; the %s low_latency rows run the masked layout)",
                 kn);
    else
        term_add(c->ex, "MoE permutation", 0, c->hw, h, "inside the %s%s%s row (line %d)", kn,
                 a2a == MDL_A2A_NONE ? " fused" : " ", a2a == MDL_A2A_NONE ? "" : mode, line);
    shared_term(c, &sh);
    c->pp->group_s[MDL_WG_EXPERT] = (s + sh.s) * c->p.ep_skew;
    c->pp->shared_s = sh.s * c->p.ep_skew;
    if (a2a == MDL_A2A_NONE)
        term_add(c->ex, "expert GEMMs", c->pp->group_s[MDL_WG_EXPERT], c->hw, h,
                 "%s tp=%.0f ep=%.0f, %.0f tokens in/GPU (%.3g per expert)%s: %.3g TFLOPS "
                 "(routing, permutation and grouped GEMMs in one op)%s; x ep_skew %.3g",
                 kn, tp, ep, X / c->mb, X / c->mb * m->experts_active / m->experts, mb_note(c), y,
                 sh.s > 0 ? " + shared" : "", c->p.ep_skew);
    else
        term_add(c->ex, "expert GEMMs", c->pp->group_s[MDL_WG_EXPERT], c->hw, h,
                 "%s %s tp=%.0f ep=%.0f, %.0f tokens in the EP group (%.3g per expert)%s: %.3g "
                 "TFLOPS (%s between the %s dispatch and combine)%s; x ep_skew %.3g",
                 kn, mode, tp, ep, X / c->mb, X / c->mb * m->experts_active / m->experts,
                 mb_note(c), y,
                 a2a == MDL_A2A_LOW_LATENCY
                     ? "masked grouped GEMMs and activation"
                     : "permutation, grouped GEMMs, activation and un-permutation",
                 mode, sh.s > 0 ? " + shared" : "", c->p.ep_skew);
    return true;
}

// Grouped GEMM rows by tokens per expert, plus routing and permutation.
static bool experts_grouped(tab *c, double routed_f, double shared_f) {
    const mdl_model *m = c->m;
    if (c->e_grouped == MDL_K_KINDS) return false;
    double per_exp = c->T * m->experts_active / m->experts;   // tokens per expert (instance)
    double y1, y2;
    hit h1, h2;
    if (!look_gemm(&c->L, c->e_grouped, per_exp / c->mb, 2.0 * m->expert_ffn, m->hidden, &y1,
                   &h1) ||
        !look_gemm(&c->L, c->e_grouped, per_exp / c->mb, m->hidden, m->expert_ffn, &y2, &h2))
        return false;
    // gate+up is 2/3 of an expert's FLOPs, down 1/3; the hottest GPU sets the pace
    double s = (routed_f * 2 / 3 / (y1 * 1e12) + routed_f / 3 / (y2 * 1e12)) / c->G;
    shared_part sh;
    if (!shared_time(c, shared_f, &sh)) return false;
    double route, perm;
    hit hr, hp;
    bool rr, pr;
    moe_side_terms(c, &route, &perm, &hr, &hp, &rr, &pr);
    if (rr)
        term_add(c->ex, "MoE routing", route, c->hw, hr,
                 "moe_routing %.0f tokens/GPU x %u MoE "
                 "layers",
                 c->T / c->G, m->moe_layers);
    else
        term_add(c->ex, "MoE routing", 0, c->hw, NOHIT,
                 "no moe_routing rows: the router GEMM is "
                 "in the dense rest, top-k selection not timed");
    if (pr)
        term_add(c->ex, "MoE permutation", perm, c->hw, hp,
                 "moe_permute %.0f tokens/GPU x %u MoE "
                 "layers x ep_skew",
                 c->T / c->G, m->moe_layers);
    else if (c->p.ep > 1)
        term_add(c->ex, "MoE permutation", 0, c->hw, NOHIT,
                 "done by the EP dispatch and combine "
                 "kernels (tokens land in per-expert buffers)");
    else
        term_add(c->ex, "MoE permutation", perm, c->hw, NOHIT,
                 "roofline: permute + un-permute "
                 "read and write %.3g MB/GPU/layer at %.0f%% of HBM x %u MoE layers x ep_skew "
                 "(grouped rows time the GEMMs alone)",
                 4.0 * c->T / c->G * m->experts_active * m->hidden * 2 / 1e6, 100 * c->eff.memory,
                 m->moe_layers);
    hit_join(&h1, &h2);
    shared_term(c, &sh);
    c->pp->group_s[MDL_WG_EXPERT] = (s + sh.s) * c->p.ep_skew + route + perm;
    c->pp->shared_s = sh.s * c->p.ep_skew;
    term_add(c->ex, "expert GEMMs", (s + sh.s) * c->p.ep_skew, c->hw, h1,
             "%s m=%.0f tokens/expert%s: gate+up %.0f, down %.0f TFLOPS%s; x ep_skew %.3g",
             mdl_kkind_name(c->e_grouped), per_exp / c->mb, mb_note(c), y1, y2,
             sh.s > 0 ? " + shared" : "", c->p.ep_skew);
    return true;
}

static void table_experts(tab *c) {
    const mdl_model *m = c->m;
    const mdl_work *w = c->w;
    if (w->flops[MDL_WG_EXPERT] <= 0) return;
    double routed_f = 2.0 * c->T * m->moe_layers * m->experts_active * m->expert_params;
    double shared_f = w->flops[MDL_WG_EXPERT] - routed_f;
    int n0 = c->ex ? c->ex->n : 0;
    // Under expert parallelism the all-to-alls are DeepEP's (table_ep): first the rows measured
    // between its kernels of the step's mode, then the grouped GEMMs its path runs, then an
    // engine's own fused op; on one expert group the fused op, then the grouped GEMMs.
    double tp, ep;
    moe_layout(&c->p, &tp, &ep);
    bool ok = false;
    if (c->use && ep > 1)
        ok = experts_fused(c, shared_f, c->decode ? MDL_A2A_LOW_LATENCY : MDL_A2A_NORMAL) ||
             experts_grouped(c, routed_f, shared_f) || experts_fused(c, shared_f, MDL_A2A_NONE);
    else if (c->use)
        ok = experts_fused(c, shared_f, MDL_A2A_NONE) || experts_grouped(c, routed_f, shared_f);
    if (ok) return;
    if (c->ex) c->ex->n = n0;   // drop the parts of a half-covered attempt
    fallback(c);
    term_add(c->ex, "MoE routing", 0, c->hw, NOHIT,
             "roofline: the router GEMM is in the dense "
             "group");
    term_add(c->ex, "MoE permutation", 0, c->hw, NOHIT,
             "roofline: in the expert group's "
             "activation bytes");
    term_add(c->ex, "expert GEMMs", c->pp->group_s[MDL_WG_EXPERT], c->hw, NOHIT,
             "roofline: max(%.3g ms compute, %.3g ms weights+activations) x ep_skew %.3g",
             c->pp->tc[MDL_WG_EXPERT] * 1e3, c->pp->tm[MDL_WG_EXPERT] * 1e3, c->p.ep_skew);
}

// Decode sequences' mean cached context (cap > 0: of min(c + 1, cap) - 1, the keys a window
// layer reads beyond the new one), from the listed sequences and the sums alike (sums of
// integers: exact, so listed and summed batches agree). False when a listed sequence computes
// more than one token (the rows time one query per sequence).
static bool decode_context(const tab *c, uint32_t cap, double *ctx) {
    const mdl_batch *b = c->b;
    double n = 0, sum = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        if (b->seqs[i].new_tokens != 1) return false;
        double cc = b->seqs[i].cached_tokens;
        sum += cap ? KVF_MIN(cc + 1, (double)cap) : cc;
        n++;
    }
    if (b->dsum) {
        uint32_t caps[MDL_CAPS];
        mdl_model_caps(c->m, caps);
        if (cap && caps[MDL_CAP_WINDOW] != cap) return false;
        sum += cap ? b->dsum->sum_min[MDL_CAP_WINDOW] : b->dsum->sum_ctx;
        n += b->dsum->n;
    }
    if (n <= 0) return false;
    *ctx = cap ? sum / n - 1 : sum / n;
    return *ctx >= 1;
}

static bool attn_decode_gqa(tab *c, int g) {
    const mdl_model *m = c->m;
    if (m->attention != MDL_ATTN_GQA) return false;
    double tp = c->p.tp, ctx, y;
    double layers = g == MDL_WG_ATTN_FULL ? (double)m->layers - m->window_layers : m->window_layers;
    if (!decode_context(c, g == MDL_WG_ATTN_WINDOW ? m->window : 0, &ctx) || layers <= 0)
        return false;
    double key[4] = {m->heads / tp, KVF_MAX(m->kv_heads / tp, 1.0), m->head_dim,
                     m->kv_bytes_per_elem};
    double batch = mdl_batch_size(c->b) / (c->G / tp);   // sequences per TP group
    hit h;
    if (!look2(&c->L, MDL_K_DECODE_GQA, key, 4, batch / c->mb, ctx, FIG_US, true, &y, &h))
        return false;
    c->pp->group_s[g] = layers * c->mb * y * 1e-6;
    term_add(c->ex, g == MDL_WG_ATTN_FULL ? "attention" : "attention (window)", c->pp->group_s[g],
             c->hw, h,
             "decode_gqa heads %.0f/%.0f per GPU, batch %.0f%s, context %.0f: %.3g us x "
             "%.0f layers",
             key[0], key[1], batch / c->mb, mb_note(c), ctx, y, layers);
    return true;
}

// MLA decode by the decode_mla rows: heads per GPU, sequences per TP group, mean context.
static bool attn_decode_mla_rows(tab *c, int g) {
    const mdl_model *m = c->m;
    double ctx, y;
    if (g != MDL_WG_ATTN_FULL || m->attention != MDL_ATTN_MLA || !decode_context(c, 0, &ctx))
        return false;
    double tp = c->p.tp, key[2] = {m->heads / tp, m->kv_bytes_per_elem};
    double batch = mdl_batch_size(c->b) / (c->G / tp);
    hit h;
    if (!look2(&c->L, MDL_K_DECODE_MLA, key, 2, batch / c->mb, ctx, FIG_US, true, &y, &h))
        return false;
    c->pp->group_s[g] = m->layers * c->mb * y * 1e-6;
    term_add(c->ex, "attention", c->pp->group_s[g], c->hw, h,
             "decode_mla %.0f heads per GPU, batch %.0f%s, context %.0f: %.3g us x %u layers",
             key[0], batch / c->mb, mb_note(c), ctx, y, m->layers);
    return true;
}

static bool attn_decode_mla(tab *c, int g) {
    const mdl_model *m = c->m;
    if (g != MDL_WG_ATTN_FULL) return false;
    double hd = m->attention == MDL_ATTN_GQA ? m->head_dim : (double)m->kv_lora_rank + m->rope_dim;
    double key[2] = {m->attention, hd};
    int a, b;
    if (!series_find(&c->L, MDL_K_DECODE_ATTN, key, 2, &a, &b)) return false;
    const mdl_krow *r = row_at(c->hw, a);
    // KV replicated across TP ranks as in the roofline
    double tp = c->p.tp;
    double repl = tp <= 1                        ? 1
                  : m->attention != MDL_ATTN_GQA ? tp
                  : tp > m->kv_heads             ? tp / m->kv_heads
                                                 : 1;
    double bytes = c->w->bytes[g] / c->G * repl, fl = c->w->flops[g] / c->G;
    double tb = bytes / (r->GBps * 1e9), tf = fl / (r->tflops * 1e12);
    c->pp->group_s[g] = KVF_MAX(tb, tf);
    hit h = {c->hw->order[a], c->hw->order[a]};
    term_add(c->ex, "attention", c->pp->group_s[g], c->hw, h,
             "decode_attn: max(%.3g GB / %.0f GB/s, %.3g TFLOP / %.0f TFLOPS) per GPU", bytes / 1e9,
             r->GBps, fl / 1e12, r->tflops);
    return true;
}

static bool attn_prefill(tab *c, int g) {
    const mdl_model *m = c->m;
    const mdl_batch *b = c->b;
    if (g != MDL_WG_ATTN_FULL || b->phase != MDL_PREFILL) return false;
    // sequence length: token-weighted end of the chunks
    double num = 0, den = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        num += (double)b->seqs[i].new_tokens *
               ((double)b->seqs[i].cached_tokens + b->seqs[i].new_tokens);
        den += b->seqs[i].new_tokens;
    }
    double sl = den > 0 ? num / den : 0, y;
    if (sl <= 0) return false;
    // chunks of one micro-batch: whole sequences each while there are two a GPU or more; one
    // sequence is split by its queries, each micro-batch running one chunk of it
    double tp = c->p.tp, all = b->n / (c->G / tp);
    double cm = all / c->mb < 1 && all >= 1 ? 1 : all / c->mb;
    hit h;
    if (m->attention == MDL_ATTN_GQA) {
        double key[3] = {m->heads / tp, KVF_MAX(m->kv_heads / tp, 1.0), m->head_dim};
        if (look2(&c->L, MDL_K_PREFILL_GQA, key, 3, cm, sl, FIG_TFLOPS, false, &y, &h)) {
            c->pp->group_s[g] = c->w->flops[g] / c->G / (y * 1e12);
            term_add(c->ex, "attention", c->pp->group_s[g], c->hw, h,
                     "prefill_gqa heads %.0f/%.0f per GPU, %.3g chunks%s, seqlen %.0f: %.0f "
                     "TFLOPS",
                     key[0], key[1], cm, mb_note(c), sl, y);
            return true;
        }
    }
    if (m->attention == MDL_ATTN_MLA) {
        // the expanded-form kernel the rows time: 2 heads (qk + v) FLOPs per causal pair
        double key[1] = {m->heads / tp}, pairs = 0;
        for (uint32_t i = 0; i < b->n; i++) {
            double t = b->seqs[i].new_tokens;
            pairs += t * b->seqs[i].cached_tokens + t * (t + 1) / 2;
        }
        double fl = pairs * m->layers * 2.0 * m->heads * (2.0 * m->head_dim + m->rope_dim);
        if (look2(&c->L, MDL_K_PREFILL_MLA, key, 1, cm, sl, FIG_TFLOPS, false, &y, &h)) {
            c->pp->group_s[g] = fl / c->G / (y * 1e12);
            term_add(c->ex, "attention", c->pp->group_s[g], c->hw, h,
                     "prefill_mla %.0f heads per GPU, %.3g chunks%s, seqlen %.0f: %.3g TFLOP at "
                     "%.0f TFLOPS",
                     key[0], cm, mb_note(c), sl, fl / c->G / 1e12, y);
            return true;
        }
    }
    double hd = m->attention == MDL_ATTN_GQA ? m->head_dim : (double)m->kv_lora_rank + m->rope_dim;
    double key[2] = {m->attention, hd};
    if (!look1(&c->L, MDL_K_PREFILL_ATTN, key, 2, sl, FIG_TFLOPS, false, &y, &h)) return false;
    c->pp->group_s[g] = c->w->flops[g] / c->G / (y * 1e12);
    term_add(c->ex, "attention", c->pp->group_s[g], c->hw, h,
             "prefill_attn seqlen %.0f: %.0f TFLOPS", sl, y);
    return true;
}

static void table_attention(tab *c) {
    static const char *const gname[MDL_WG_COUNT] = {"", "", "attention", "attention (window)",
                                                    "indexer"};
    for (int g = MDL_WG_ATTN_FULL; g < MDL_WG_COUNT; g++) {
        if (c->w->flops[g] <= 0 && c->w->bytes[g] <= 0) continue;
        bool ok = false;
        if (c->use && g != MDL_WG_ATTN_INDEX)
            ok = c->decode
                     ? attn_decode_gqa(c, g) || attn_decode_mla_rows(c, g) || attn_decode_mla(c, g)
                     : attn_prefill(c, g);
        if (ok) continue;
        fallback(c);
        term_add(c->ex, gname[g], c->pp->group_s[g], c->hw, NOHIT,
                 "roofline: max(%.3g ms compute, %.3g ms KV bytes)", c->pp->tc[g] * 1e3,
                 c->pp->tm[g] * 1e3);
    }
}

static void table_allreduce(tab *c) {
    if (c->pp->tp_comm_s <= 0) return;
    double tp = c->p.tp, y;
    double msg = c->T / (c->G / tp) * c->m->hidden * 2;   // bf16 activations of a TP group
    double key[1] = {tp};
    hit h;
    if (c->use && look1(&c->L, MDL_K_ALLREDUCE, key, 1, msg / c->mb, FIG_GBPS, false, &y, &h)) {
        double t = msg * 2 * (tp - 1) / tp / (y * 1e9);   // mb calls of msg / mb each
        c->pp->tp_comm_s = c->pp->allreduces * t;
        term_add(c->ex, "TP all-reduce", c->pp->tp_comm_s, c->hw, h,
                 "allreduce %.0f GPUs, %.3g MB: %.0f GB/s bus bandwidth x %.0f all-reduces", tp,
                 msg / 1e6, y, c->pp->allreduces);
        return;
    }
    fallback(c);
    term_add(c->ex, "TP all-reduce", c->pp->tp_comm_s, c->hw, NOHIT,
             "roofline: %.0f ring all-reduces over the scale-up fabric", c->pp->allreduces);
}

// EP all-to-all rows: series by mode, sorted by ep (the outer runs), each ep's rows by tokens
// per call. An ep's run is a "curve" where it measures several token counts (the kernels'
// latency floor: at few tokens a call takes longer than its bytes at the large-call bandwidth).

// How the figure of one ep was found: directly on its rows (shape < 0), or at its nearest
// measured token count t0 scaled by the curve of ep `shape` (0: constant bandwidth).
typedef struct ep_how {
    double t0, shape;
    hit sh;   // the curve's rows used for the scaling
} ep_how;

// GBps of group k of the series [a, b) at q tokens per call: interpolated (log-log) on its
// own rows where they bracket q; else its measured point t0 nearest q (in log) times the ratio
// a curve gives between q and t0, the curve of the ep nearest k's (in log) whose rows bracket
// both and which lies on the same side of the scale-up domain (both across nodes, or both
// within one: the transport differs); else t0's bandwidth when q is within 4x of t0. False
// otherwise.
static bool ep_group_gbps(const mdl_hardware *hw, int a, int b, const outer_run *k, double q,
                          double *y, hit *h, ep_how *how) {
    how->t0 = 0, how->shape = -1, how->sh = NOHIT;
    if (run_interp(hw, k->a, k->b, 1, q, FIG_GBPS, true, y, h)) return true;
    int near = k->a;
    for (int i = k->a + 1; i < k->b; i++)
        if (fabs(log(row_x2(row_at(hw, i)) / q)) < fabs(log(row_x2(row_at(hw, near)) / q)))
            near = i;
    const mdl_krow *r0 = row_at(hw, near);
    double t0 = row_x2(r0);
    if (!(r0->GBps > 0)) return false;
    h->lo = h->hi = hw->order[near];
    how->t0 = t0;
    double best = -1, yq = 0, yt = 0, dom = hw->scaleup_domain;
    for (int i = a; i < b;) {
        outer_run g = outer_run_at(hw, i, b);
        i = g.b;
        double ya, yb;
        hit ha, hb;
        if (g.a == k->a || (g.x > dom) != (k->x > dom) ||
            !run_interp(hw, g.a, g.b, 1, q, FIG_GBPS, true, &ya, &ha) ||
            !run_interp(hw, g.a, g.b, 1, t0, FIG_GBPS, true, &yb, &hb))
            continue;
        if (best < 0 || fabs(log(g.x / k->x)) < fabs(log(best / k->x))) {
            best = g.x, yq = ya, yt = yb;
            how->sh = ha;
            hit_join(&how->sh, &hb);
        }
    }
    if (best > 0) {
        *y = r0->GBps * yq / yt;
        how->shape = best;
        return true;
    }
    if (q < t0 / 4 || q > t0 * 4) return false;
    *y = r0->GBps;
    how->shape = 0;
    return true;
}

// GBps of an EP all-to-all (kind, mode) at ep and q tokens per call: each bracketing ep's
// figure (ep_group_gbps), linear in log(ep) between them. `how` describes the lower ep's, or
// the upper's where only that one was not read on its own rows.
static bool look_ep_rows(const lk *L, mdl_kkind kind, double mode, double ep, double q, double *y,
                         hit *h, ep_how *how) {
    const mdl_hardware *hw = L->hw;
    int a, b;
    outer_run lo, hi;
    h->lo = h->hi = -1;
    if (!(ep > 0 && q > 0) || !series_find(L, kind, &mode, 1, &a, &b) ||
        !outer_bracket(hw, a, b, ep, &lo, &hi))
        return false;
    double y0, y1;
    hit h0, h1;
    ep_how w1;
    if (!ep_group_gbps(hw, a, b, &lo, q, &y0, &h0, how)) return false;
    *h = h0;
    if (hi.a == lo.a) return (*y = y0), true;
    if (!ep_group_gbps(hw, a, b, &hi, q, &y1, &h1, &w1)) return false;
    hit_join(h, &h1);
    if (how->shape < 0) {
        *how = w1;
    } else {
        hit_join(&how->sh, &w1.sh);
    }
    double t = log(ep / lo.x) / log(hi.x / lo.x);
    *y = y0 + t * (y1 - y0);
    return true;
}

// look_ep_rows through the stepper's memo (the same inputs give the same answer).
static bool look_ep(const lk *L, mdl_kkind kind, double mode, double ep, double q, double *y,
                    hit *h, ep_how *how) {
    tcache *tc = L->tc;
    if (tc)
        for (int i = 0; i < tc->ne; i++) {
            const tc_ep *e = &tc->ep[i];
            if (e->kind == (int)kind && e->mode == mode && e->ep == ep && e->q == q) {
                *y = e->y;
                h->lo = e->lo, h->hi = e->hi;
                how->t0 = e->t0, how->shape = e->shape;
                how->sh.lo = e->slo, how->sh.hi = e->shi;
                return e->ok;
            }
        }
    bool ok = look_ep_rows(L, kind, mode, ep, q, y, h, how);
    if (tc) {
        tc_ep *e = &tc->ep[tc->enext];
        tc->enext = (tc->enext + 1) % TC_EP;
        if (tc->ne < TC_EP) tc->ne++;
        *e = (tc_ep){.kind = (int)kind,
                     .mode = mode,
                     .ep = ep,
                     .q = q,
                     .ok = ok,
                     .y = ok ? *y : 0,
                     .t0 = how->t0,
                     .shape = how->shape,
                     .lo = h->lo,
                     .hi = h->hi,
                     .slo = how->sh.lo,
                     .shi = how->sh.hi};
    }
    return ok;
}

// Words for how an EP figure was found (the explanation).
static const char *ep_how_text(const tab *c, const ep_how *w, char *buf, size_t n) {
    if (w->shape > 0) {
        int lo = w->sh.lo >= 0 ? c->hw->krows[w->sh.lo].line : 0;
        int hi = w->sh.hi >= 0 ? c->hw->krows[w->sh.hi].line : 0;
        snprintf(buf, n,
                 "; measured at %.0f tokens, scaled by the ep=%.0f token curve (rows %d-%d)", w->t0,
                 w->shape, KVF_MIN(lo, hi), KVF_MAX(lo, hi));
    } else if (w->shape == 0)
        snprintf(buf, n, "; bandwidth measured at %.0f tokens", w->t0);
    else
        buf[0] = 0;
    return buf;
}

// The bytes an EP row's GBps counts, as DeepEP's benchmarks (the rows' sources) count them:
// copies of a token a call moves and the bytes of one hidden element, dispatch and combine.
// Low-latency kernels: one copy per selected expert (top-k). Normal kernels: one per
// destination the token reaches, its own included -- across scale-up domains the distinct
// domains among its k experts (S (1 - (1 - 1/S)^k), S = min(domains, route_nodes), the
// benchmark's node-limited routing), within one the distinct GPUs (ep (1 - (1 - 1/ep)^k)).
// Dispatch moves the expert GEMMs' input precision, FP8 with a float scale per 128 elements;
// combine bf16 activations. (The low-latency benchmark also counts 16 bytes a copy of
// header: 0.2 % at DeepSeek's hidden size, left out.)
static void ep_row_bytes(const tab *c, double *copies, double *de, double *ce) {
    const mdl_model *m = c->m;
    double k = m->experts_active, ep = c->p.ep;
    double dom = c->hw->scaleup_domain ? c->hw->scaleup_domain : MDL_SCALEUP_DOMAIN_DEFAULT;
    if (c->decode) {
        *copies = k;
    } else if (ep > dom) {
        *copies = mdl_ep_distinct(ceil(ep / dom), c->p.route_nodes, k);
    } else {
        *copies = mdl_ep_distinct(ep, 0, k);
    }
    double pe = mdl_ep_dispatch_elem(m);
    *de = pe == 1 ? 1 + 4.0 / 128 : pe;   // other precisions as their element bytes
    *ce = 2;
}

// Dispatch and combine from the rows of the phase's kernels (decode: low_latency, else normal),
// looked up at the tokens one call carries: a GPU's tokens, split between two micro-batches
// when they run.
static void table_ep(tab *c) {
    const mdl_model *m = c->m;
    mdl_parts *pp = c->pp;
    if (pp->ep_comm_s <= 0) return;
    double tok = c->T / c->G, ep = c->p.ep;
    double q = tok / c->mb;
    double gd, gc;
    hit hd, hc;
    ep_how wd, wc;
    if (c->use && look_ep(&c->L, MDL_K_EP_DISPATCH, c->decode, ep, q, &gd, &hd, &wd) &&
        look_ep(&c->L, MDL_K_EP_COMBINE, c->decode, ep, q, &gc, &hc, &wc)) {
        double h = m->hidden, copies, de, ce;
        ep_row_bytes(c, &copies, &de, &ce);
        double bd = tok * copies * h * de, bc = tok * copies * h * ce;
        double td = bd / (gd * 1e9), tc = bc / (gc * 1e9);
        pp->ep_comm_s = m->moe_layers * (td + tc) * c->p.ep_skew;
        pp->ep_disp_s = m->moe_layers * td * c->p.ep_skew;
        if (!c->ex) return;
        const char *mode = c->decode ? "low_latency" : "normal";
        char bufd[160], bufc[160];
        term_add(c->ex, "EP dispatch", m->moe_layers * td * c->p.ep_skew, c->hw, hd,
                 "ep_dispatch %s ep=%u, %.4g tokens a call, %.3g copies a token: %.3g "
                 "MB/GPU/layer at %.0f GB/s x %u MoE layers%s",
                 mode, c->p.ep, q, copies, bd / 1e6, gd, m->moe_layers,
                 ep_how_text(c, &wd, bufd, sizeof bufd));
        term_add(c->ex, "EP combine", m->moe_layers * tc * c->p.ep_skew, c->hw, hc,
                 "ep_combine %s ep=%u, %.4g tokens a call, %.3g copies a token: %.3g "
                 "MB/GPU/layer at %.0f GB/s x %u MoE layers%s",
                 mode, c->p.ep, q, copies, bc / 1e6, gc, m->moe_layers,
                 ep_how_text(c, &wc, bufc, sizeof bufc));
        return;
    }
    fallback(c);
    term_add(c->ex, "EP dispatch+combine", pp->ep_comm_s, c->hw, NOHIT,
             "roofline: NIC %.3g copies/token, fabric %.3g copies/token, %.3g KB per "
             "copy; max(NIC %.3g us, fabric %.3g us) + 2 latencies per layer x %u layers",
             pp->ep.nic_copies, pp->ep.fabric_copies, pp->ep.bytes_per_copy / 1e3,
             pp->ep.nic_s * 1e6, pp->ep.fabric_s * 1e6, m->moe_layers);
}

// The overlap and fixed terms, and the total (as out->ns).
static void table_close(tab *c, const mdl_step_cost *out) {
    if (!c->ex) return;
    mdl_parts *pp = c->pp;
    double total = 0;
    for (int g = 0; g < MDL_WG_COUNT; g++)
        total += pp->group_s[g];
    double comm = pp->tp_comm_s + pp->ep_comm_s;
    if (pp->tbo) {
        mdl_tbo_stages st;
        mdl_tbo_stages_of(pp, total, &st);
        if (st.compute_s > total)
            term_add(c->ex, "SM share", st.compute_s - total, c->hw, NOHIT,
                     "compute on %u of %u SMs beside the all-to-alls (moe.comm_sms %u): x %.3g",
                     c->hw->sms - c->p.comm_sms, c->hw->sms, c->p.comm_sms, 1 / pp->sm_share);
        if (pp->decode)
            term_add(c->ex, "overlap", st.exposed_s - comm, c->hw, NOHIT,
                     "two micro-batches (decode schedule): dispatch %.3g ms beside shared + "
                     "pre-attention %.3g ms, combine %.3g beside attention + o proj %.3g; routed "
                     "experts %.3g alone; %.3g ms exposed",
                     st.d * 1e3, (st.s + st.a0) * 1e3, st.c * 1e3, st.a1 * 1e3, st.e * 1e3,
                     st.exposed_s * 1e3);
        else
            term_add(c->ex, "overlap", st.exposed_s - comm, c->hw, NOHIT,
                     "two micro-batches (prefill schedule): dispatch %.3g ms, combine %.3g beside "
                     "attention %.3g, shared %.3g, routed experts %.3g; %.3g ms exposed",
                     st.d * 1e3, st.c * 1e3, (st.a0 + st.a1) * 1e3, st.s * 1e3, st.e * 1e3,
                     st.exposed_s * 1e3);
    } else if (pp->sbo_hidden_s > 0) {
        double hidden = KVF_MIN(comm * pp->overlap, total);
        double d = KVF_MIN(pp->ep_disp_s, pp->ep_comm_s + pp->sbo_hidden_s);
        term_add(c->ex, "overlap", -hidden - pp->sbo_hidden_s, c->hw, NOHIT,
                 "single batch (moe.single_batch_overlap): combine %.3g ms beside the routed "
                 "experts' down GEMMs %.3g and the shared experts %.3g, dispatch %.3g alone; "
                 "%.3g ms exposed%s",
                 (pp->ep_comm_s + pp->sbo_hidden_s - d) * 1e3,
                 (pp->group_s[MDL_WG_EXPERT] - pp->shared_s) / 3 * 1e3, pp->shared_s * 1e3, d * 1e3,
                 pp->ep_comm_s * 1e3,
                 pp->overlap > 0 ? "; efficiency.comm_overlap hides its share of the rest" : "");
    } else {
        double hidden = KVF_MIN(comm * pp->overlap, total);
        term_add(c->ex, "overlap", -hidden, c->hw, NOHIT,
                 "efficiency.comm_overlap: hides min(%.0f%% of communication, compute)",
                 100 * pp->overlap);
    }
    term_add(c->ex, "fixed", pp->fixed_s, c->hw, NOHIT, "step overhead + layers x layer overhead%s",
             pp->tbo ? " x 2 micro-batches" : "");
    c->ex->total_s = (double)out->ns * 1e-9;
}

// A decode step's compute terms as they run in the serving system rather than alone: the
// dense GEMMs, the experts and attention (every group, tables or roofline rest) times
// efficiency.in_system_decode, with the two micro-batches' split of them. Only where tables
// are read: the roofline column stays the roofline's. A fit of in-system kernel times
// (models/fits/) sets the factor for the deployments it was fitted for.
static void table_in_system(tab *c) {
    double f = c->eff.in_system_decode;
    if (!c->use || !c->decode || !(f > 0) || f == 1) return;
    mdl_parts *pp = c->pp;
    double before = 0;
    for (int g = 0; g < MDL_WG_COUNT; g++) {
        before += pp->group_s[g];
        pp->group_s[g] *= f;
        pp->tc[g] *= f;
        pp->tm[g] *= f;
    }
    pp->pre_s *= f;
    pp->dense_ffn_s *= f;
    pp->shared_s *= f;
    term_add(c->ex, "in-system", (f - 1) * before, c->hw, NOHIT,
             "efficiency.in_system_decode %.3g: the %.3g ms of GEMMs, experts and attention "
             "above as kernels run in the serving system",
             f, before * 1e3);
}

// The small kernels no table lists (norms, rotary, quantisation, top-k), measured in the
// serving system: efficiency.token_overhead_ns per token a GPU (a TP rank runs its group's
// tokens) per layer, on the compute stream with the attention-side work. Measured beside the
// prefill all-to-alls, so it enters the dense group at the SM share the step divides by.
static void table_small_kernels(tab *c) {
    double ns = c->eff.token_overhead_ns;
    if (!c->use || !(ns > 0)) return;
    mdl_parts *pp = c->pp;
    double tok = c->T * c->p.tp / c->G, s = ns * 1e-9 * tok * c->m->layers;
    double share = pp->tbo && pp->sm_share > 0 && pp->sm_share < 1 ? pp->sm_share : 1;
    pp->group_s[MDL_WG_DENSE] += s * share;
    term_add(c->ex, "small kernels", s * share, c->hw, NOHIT,
             "efficiency.token_overhead_ns %.3g x %.4g tokens a GPU x %u layers (norms, rotary, "
             "quantisation, top-k: no table lists them)%s",
             ns, tok, c->m->layers,
             share < 1 ? "; measured beside the all-to-alls: the SM share below restores it" : "");
}

static mdl_parallel par_norm(const mdl_parallel *par_in) {
    mdl_parallel p;
    mdl_parallel_default(&p);
    if (par_in) {
        p = *par_in;
        if (!p.gpus) p.gpus = 1;
        if (!p.tp || p.tp > p.gpus) p.tp = p.tp ? p.gpus : 1;
        if (!p.ep || p.ep > p.gpus) p.ep = p.ep ? p.gpus : 1;
        if (p.ep_skew < 1) p.ep_skew = 1;
    }
    return p;
}

// mdl_table_eval with the stepper's memo of lookups (tc may be NULL).
static void table_eval(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par_in,
                       const mdl_efficiency *eff, const mdl_batch *b, bool use_tables,
                       mdl_step_cost *out, mdl_explain *ex, bool *fell_back, tcache *tc) {
    KVF_ASSERT(m && hw && b && out);
    KVF_ASSERT(hw->indexed || hw->nkrows == 0);
    mdl_work w;
    mdl_batch_work_detail(m, b, &w);
    mdl_parts pp;
    mdl_roofline_parts(m, hw, par_in, eff, &w, &pp);
    if (ex) memset(ex, 0, sizeof *ex);
    if (fell_back) *fell_back = false;
    if (!pp.valid) {
        mdl_parts_finish(&pp, &w, out);
        return;
    }
    mdl_sbo_undo(&pp);   // the all-to-alls as the roofline gave them, replaced below
    tab c = {.m = m,
             .hw = hw,
             .b = b,
             .w = &w,
             .pp = &pp,
             .p = par_norm(par_in),
             .use = use_tables,
             .decode = b->phase == MDL_DECODE,
             .ex = ex};
    c.L = (lk){hw, tc};
    if (eff)
        c.eff = *eff;
    else
        mdl_efficiency_default(&c.eff);
    if (!(c.eff.memory > 0)) c.eff.memory = 0.8;
    c.G = c.p.gpus;
    c.T = w.tokens;
    c.mb = pp.tbo ? 2 : 1;
    mdl_kkind dense_grouped, dense_moe;   // dense weights use the GEMM kind only
    gemm_kinds(m, m->weight_bytes_per_param, &c.gemm, &dense_grouped, &dense_moe);
    double ebpp = m->expert_weight_bytes_per_param > 0 ? m->expert_weight_bytes_per_param
                                                       : m->weight_bytes_per_param;
    gemm_kinds(m, ebpp, &c.e_gemm, &c.e_grouped, &c.e_moe);
    if (ex) {
        ex->tokens = c.T;
        ex->seqs = mdl_batch_size(b);
        ex->gpus = c.G;
    }
    table_dense(&c);
    table_experts(&c);
    table_attention(&c);
    table_in_system(&c);
    table_small_kernels(&c);
    table_allreduce(&c);
    table_ep(&c);
    if (c.p.single_batch) mdl_sbo_apply(&pp);   // on the terms as replaced
    mdl_parts_finish(&pp, &w, out);
    table_close(&c, out);
    if (fell_back) *fell_back = c.fb;
}

void mdl_table_eval(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par_in,
                    const mdl_efficiency *eff, const mdl_batch *b, bool use_tables,
                    mdl_step_cost *out, mdl_explain *ex, bool *fell_back) {
    table_eval(m, hw, par_in, eff, b, use_tables, out, ex, fell_back, NULL);
}

// ---- the stepper -----------------------------------------------------------------------

// The stepper and its memo of lookups (base first: freed as one block).
typedef struct table_stepper {
    mdl_stepper base;
    tcache tc;
} table_stepper;

static void table_cost(mdl_stepper *s, const mdl_batch *b, mdl_step_cost *out) {
    bool fb = false;
    table_eval(&s->model, &s->hw, &s->par, &s->eff, b, true, out, NULL, &fb,
               &((table_stepper *)s)->tc);
    out->table_fallback = fb;
}

static void table_destroy(mdl_stepper *s) {
    free(s);
}

static const mdl_stepper_vt table_vt = {"table", table_cost, table_destroy, true, NULL};

mdl_stepper *mdl_table_create(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                              const mdl_efficiency *eff) {
    KVF_ASSERT(m && hw);
    mdl_stepper *r = mdl_roofline_create(m, hw, par, eff);
    table_stepper *t = kvf_calloc(1, sizeof *t);
    t->base = *r;
    mdl_stepper_destroy(r);
    if (!t->base.hw.indexed) mdl_hardware_index(&t->base.hw);
    t->base.vt = &table_vt;
    return &t->base;
}

kvf_status mdl_table_open(mdl_stepper **out, const mdl_model *m, const mdl_hardware *hw,
                          const mdl_parallel *par, const mdl_efficiency *eff, kvf_err *err) {
    KVF_ASSERT(out && m && hw);
    *out = NULL;
    kvf_status st = mdl_hardware_check_peaks(hw, err);
    if (st) return st;
    *out = mdl_table_create(m, hw, par, eff);
    return KVF_OK;
}

// ---- hw check ----------------------------------------------------------------------------

static const char *hw_path(const mdl_hardware *h) {
    return h->path[0] ? h->path : h->name;
}

// The datasheet peak a row's tflops is bounded by, and its key; 0 when the kind has none.
static double tflops_peak(const mdl_hardware *h, mdl_kkind k, const char **what) {
    switch (k) {
    case MDL_K_GEMM_FP8:
    case MDL_K_GROUPED_FP8:
    case MDL_K_MOE_FP8:
        *what = "fp8_flops";
        return h->fp8_flops > 0 ? h->fp8_flops : h->bf16_flops;
    case MDL_K_GEMM_BF16:
    case MDL_K_GROUPED_BF16:
    case MDL_K_MOE_BF16:
    case MDL_K_PREFILL_ATTN:
    case MDL_K_DECODE_ATTN:
    case MDL_K_PREFILL_GQA:
    case MDL_K_DECODE_GQA:
    case MDL_K_DECODE_MLA:
    case MDL_K_PREFILL_MLA:
        *what = "bf16_flops";
        return h->bf16_flops;
    default:
        *what = NULL;
        return 0;
    }
}

kvf_status mdl_hardware_check_peaks(const mdl_hardware *h, kvf_err *err) {
    KVF_ASSERT(h && h->nkrows <= MDL_KROWS_MAX);
    const char *path = hw_path(h);
    for (uint32_t i = 0; i < h->nkrows; i++) {
        const mdl_krow *r = &h->krows[i];
        const char *what = NULL, *kn = mdl_kkind_name(r->kind);
        double peak = tflops_peak(h, r->kind, &what);
        if (what && r->tflops * 1e12 > peak)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: kernels row (%s): tflops %.6g is above the datasheet peak "
                            "%s = %.6g TFLOP/s",
                            path, r->line, kn, r->tflops, what, peak / 1e12);
        if ((r->kind == MDL_K_DECODE_ATTN || r->kind == MDL_K_DECODE_GQA ||
             r->kind == MDL_K_DECODE_MLA) &&
            r->GBps * 1e9 > h->hbm_Bps)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: kernels row (%s): GBps %.6g is above hbm_Bps %.6g GB/s", path,
                            r->line, kn, r->GBps, h->hbm_Bps / 1e9);
        if ((r->kind == MDL_K_EP_DISPATCH || r->kind == MDL_K_EP_COMBINE) &&
            r->GBps * 1e9 > h->scaleup_Bps / 2 + h->nic_Bps)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: kernels row (%s): GBps %.6g is above what the scale-up fabric "
                            "and the NIC carry together (%.6g GB/s per direction)",
                            path, r->line, kn, r->GBps, (h->scaleup_Bps / 2 + h->nic_Bps) / 1e9);
        // bus bandwidth can exceed one direction's link rate with in-switch reduction (NVLS:
        // ~470 GB/s on 8 x H100 with 450 GB/s per direction), never both directions together
        if (r->kind == MDL_K_ALLREDUCE && r->GBps * 1e9 > h->scaleup_Bps)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: kernels row (allreduce): bus bandwidth %.6g GB/s is above the "
                            "scale-up fabric's %.6g GB/s (both directions)",
                            path, r->line, r->GBps, h->scaleup_Bps / 1e9);
    }
    return KVF_OK;
}

// The monotone rule of a kind: the figure that must not fall as an axis grows (FIG_TOKENS:
// none), and its name.
static fig mono_fig(mdl_kkind k, const char **yn) {
    switch (k) {
    case MDL_K_GEMM_FP8:
    case MDL_K_GEMM_BF16:
    case MDL_K_GROUPED_FP8:
    case MDL_K_GROUPED_BF16:
    case MDL_K_MOE_BF16:
    case MDL_K_MOE_FP8:
    case MDL_K_PREFILL_ATTN:
        *yn = "tflops";
        return FIG_TFLOPS;
    case MDL_K_ALLREDUCE:
        *yn = "GBps";
        return FIG_GBPS;
    case MDL_K_DECODE_GQA:
    case MDL_K_DECODE_MLA:
    case MDL_K_PREFILL_GQA:
    case MDL_K_PREFILL_MLA:
    case MDL_K_MOE_ROUTING:
    case MDL_K_MOE_PERMUTE:
        *yn = "us";
        return FIG_US;
    default:
        *yn = "";
        return FIG_TOKENS;
    }
}

static const char *axis_name(mdl_kkind k, int axis) {
    switch (k) {
    case MDL_K_PREFILL_ATTN:
        return "seqlen";
    case MDL_K_ALLREDUCE:
        return "bytes";
    case MDL_K_DECODE_GQA:
    case MDL_K_DECODE_MLA:
        return axis ? "context" : "batch";
    case MDL_K_PREFILL_GQA:
    case MDL_K_PREFILL_MLA:
        return axis ? "seqlen" : "batch";
    case MDL_K_MOE_BF16:
    case MDL_K_MOE_FP8:
    case MDL_K_MOE_ROUTING:
    case MDL_K_MOE_PERMUTE:
        return "tokens";
    default:
        return "m";
    }
}

// Duplicates and monotone series within the run [a, b) of one series.
static kvf_status check_series(const mdl_hardware *h, int a, int b, kvf_err *err) {
    const char *path = hw_path(h), *yn;
    for (int i = a; i < b; i++) {
        const mdl_krow *r = row_at(h, i);
        fig f = mono_fig(r->kind, &yn);
        for (int j = a; j < b; j++) {
            const mdl_krow *q = row_at(h, j);
            if (j == i) continue;
            bool sx = row_x(q) == row_x(r), sx2 = row_x2(q) == row_x2(r);
            if (sx && sx2 && row_extra(q) == row_extra(r) && q->line < r->line)
                return kvf_fail(err, KVF_EINVAL,
                                "%s:%d: kernels row (%s): the same shape as line %d (a duplicate "
                                "row of one series)",
                                path, r->line, mdl_kkind_name(r->kind), q->line);
            // EP all-to-alls: at one ep, a call's time (tokens / GBps: the bytes are in
            // proportion to the tokens) must not fall as the tokens grow
            if ((r->kind == MDL_K_EP_DISPATCH || r->kind == MDL_K_EP_COMBINE) && sx &&
                q->tokens < r->tokens && q->GBps > 0 && r->GBps > 0 &&
                q->tokens / q->GBps > r->tokens / r->GBps)
                return kvf_fail(err, KVF_EINVAL,
                                "%s:%d: kernels row (%s): %.6g tokens at %.6g GB/s take less time "
                                "than %.6g tokens at %.6g GB/s (line %d) at the same ep; a call's "
                                "time must not fall as tokens grows",
                                path, r->line, mdl_kkind_name(r->kind), r->tokens, r->GBps,
                                q->tokens, q->GBps, q->line);
            if (f == FIG_TOKENS) continue;
            // along one axis at a time: the other axis equal
            int axis = -1;
            if (sx2 && row_x(q) < row_x(r)) axis = 0;
            if (sx && row_x2(q) < row_x2(r)) axis = 1;
            if (axis < 0) continue;
            double yr = fig_of(r, f), yq = fig_of(q, f);
            if (yr > 0 && yq > yr) {
                const char *xn = axis_name(r->kind, axis);
                double xr = axis ? row_x2(r) : row_x(r), xq = axis ? row_x2(q) : row_x(q);
                return kvf_fail(err, KVF_EINVAL,
                                "%s:%d: kernels row (%s): %s %.6g at %s %.6g is below %.6g at the "
                                "smaller %s %.6g (line %d); it must not fall as %s grows",
                                path, r->line, mdl_kkind_name(r->kind), yn, yr, xn, xr, yq, xn, xq,
                                q->line, xn);
            }
        }
    }
    return KVF_OK;
}

kvf_status mdl_hardware_check(const mdl_hardware *h, kvf_err *err) {
    KVF_ASSERT(h && (h->indexed || h->nkrows == 0));
    kvf_status st = mdl_hardware_check_peaks(h, err);
    if (st || !h->nkrows) return st;
    for (uint32_t i = 0; i < h->nkrows;) {
        uint32_t j = i;
        while (j < h->nkrows && same_key(row_at(h, (int)j), row_at(h, (int)i)))
            j++;
        if ((st = check_series(h, (int)i, (int)j, err))) return st;
        i = j;
    }
    return KVF_OK;
}

kvf_status mdl_hardware_check_file(const char *name_or_path, const char *models_dir,
                                   unsigned rows[MDL_K_KINDS], kvf_err *err) {
    KVF_ASSERT(name_or_path);
    mdl_hardware *h = malloc(sizeof *h);
    if (!h)
        return kvf_fail(err, KVF_ENOMEM, "%s: cannot allocate a hardware description",
                        name_or_path);
    kvf_status st = mdl_hardware_load(h, name_or_path, models_dir, err);
    if (!st) st = mdl_hardware_check(h, err);
    if (!st && rows) {
        memset(rows, 0, MDL_K_KINDS * sizeof *rows);
        for (uint32_t i = 0; i < h->nkrows; i++)
            rows[h->krows[i].kind]++;
    }
    free(h);
    return st;
}
