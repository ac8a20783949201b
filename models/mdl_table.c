// models/mdl_table.c -- the `table` step model: the roofline's terms, each replaced by the
// hardware file's kernel tables (measured, published figures with their sources) where a
// table covers it, and `kvfleet hw check`'s sanity rules for those tables.
//
// Terms and the tables that answer them (models/README.md):
//   dense GEMMs     gemm_fp8 / gemm_bf16 rows of the model's projection shapes (n, k), by m =
//                   tokens per TP group; the rest of the dense group (output projection,
//                   router, shapes without rows) stays on the roofline
//   expert GEMMs    grouped_fp8 rows of the expert shapes (gate+up: n = 2 ffn, k = hidden;
//                   down: n = hidden, k = ffn) by tokens per local expert; shared experts by
//                   gemm_fp8 rows of the same shapes at m = tokens per GPU
//   attention       decode: the decode_attn row of the model's attention kind, max(bytes /
//                   GBps, FLOPs / tflops) per GPU; prefill: prefill_attn rows by sequence length
//   dispatch/combine ep_dispatch / ep_combine rows of the mode the phase uses (decode:
//                   low_latency, else normal), interpolated in ep, within 4x of the measured
//                   tokens per GPU
// Interpolation is linear in log(m), log(seqlen) or log(ep) between the two nearest rows;
// outside the measured range the term is the roofline's (a fallback). Every step with at
// least one applicable term answered by the roofline counts in table_fallbacks.
#include "mdl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Interpolated figure at x from rows (xs ascending, unique) -- log-linear in x. Returns false
// outside [xs[0], xs[n-1]]. *lo / *hi get the bracketing rows.
static bool interp(const double *xs, const double *ys, const int *idx, int n, double x, double *y,
                   int *lo, int *hi) {
    if (n <= 0 || x < xs[0] * (1 - 1e-9) || x > xs[n - 1] * (1 + 1e-9)) return false;
    for (int i = 0; i < n; i++) {
        if (fabs(xs[i] - x) <= 1e-9 * x) {
            *y = ys[i];
            *lo = *hi = idx[i];
            return true;
        }
        if (i + 1 < n && xs[i] < x && x < xs[i + 1]) {
            double f = log(x / xs[i]) / log(xs[i + 1] / xs[i]);
            *y = ys[i] + f * (ys[i + 1] - ys[i]);
            *lo = idx[i];
            *hi = idx[i + 1];
            return true;
        }
    }
    return false;
}

// Rows of one kind selected by a predicate, sorted by their x.
typedef bool (*row_pred)(const mdl_krow *r, const void *ctx);
typedef double (*row_x)(const mdl_krow *r);
typedef double (*row_y)(const mdl_krow *r);

static bool lookup(const mdl_hardware *hw, mdl_kkind kind, row_pred pred, const void *ctx,
                   row_x fx, row_y fy, double x, double *y, int *lo, int *hi) {
    double xs[MDL_KROWS_MAX], ys[MDL_KROWS_MAX];
    int idx[MDL_KROWS_MAX], n = 0;
    for (uint32_t i = 0; i < hw->nkrows; i++) {
        const mdl_krow *r = &hw->krows[i];
        if (r->kind != kind || (pred && !pred(r, ctx))) continue;
        // insertion by x; a repeated x keeps the first row
        double rx = fx(r);
        int j = n;
        bool dup = false;
        for (int q = 0; q < n; q++)
            if (xs[q] == rx) dup = true;
        if (dup) continue;
        while (j > 0 && xs[j - 1] > rx) {
            xs[j] = xs[j - 1];
            ys[j] = ys[j - 1];
            idx[j] = idx[j - 1];
            j--;
        }
        xs[j] = rx;
        ys[j] = fy(r);
        idx[j] = (int)i;
        n++;
    }
    return interp(xs, ys, idx, n, x, y, lo, hi);
}

typedef struct shape_ctx {
    double n, k;
    mdl_attn attention;
    double head_dim;
    bool low_latency;
} shape_ctx;

static bool pred_shape(const mdl_krow *r, const void *c) {
    const shape_ctx *s = c;
    return r->n == s->n && r->k == s->k;
}
static bool pred_attn(const mdl_krow *r, const void *c) {
    const shape_ctx *s = c;
    return r->attention == s->attention && r->head_dim == s->head_dim;
}
static bool pred_mode(const mdl_krow *r, const void *c) {
    const shape_ctx *s = c;
    return r->low_latency == s->low_latency;
}
static double x_m(const mdl_krow *r) { return r->m; }
static double x_seqlen(const mdl_krow *r) { return r->seqlen; }
static double x_ep(const mdl_krow *r) { return r->ep; }
static double y_tflops(const mdl_krow *r) { return r->tflops; }
static double y_GBps(const mdl_krow *r) { return r->GBps; }
static double y_tokens(const mdl_krow *r) { return r->tokens; }

static void term_add(mdl_explain *ex, const char *name, double s, const mdl_hardware *hw, int lo,
                     int hi, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static void term_add(mdl_explain *ex, const char *name, double s, const mdl_hardware *hw, int lo,
                     int hi, const char *fmt, ...) {
    if (!ex || ex->n >= MDL_EXPLAIN_MAX) return;
    mdl_term *t = &ex->t[ex->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->s = s;
    int a = lo >= 0 ? hw->krows[lo].line : 0, b = hi >= 0 ? hw->krows[hi].line : 0;
    t->row_lo = a && b ? KVF_MIN(a, b) : a;
    t->row_hi = a && b ? KVF_MAX(a, b) : b;
    if (lo >= 0) snprintf(t->source, sizeof t->source, "%s", hw->krows[lo].source);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->how, sizeof t->how, fmt, ap);
    va_end(ap);
}

// The model's GEMM shapes outside the experts (n, k, FLOPs per token per layer count): the
// projections of one block. Only shapes whose FLOPs are in the dense group.
typedef struct gemm_shape {
    double n, k, layers;
    const char *what;
} gemm_shape;

static int dense_shapes(const mdl_model *m, gemm_shape *sh) {
    int n = 0;
    double h = m->hidden, L = m->layers, hd = m->head_dim, H = m->heads;
    if (m->attention != MDL_ATTN_GQA) {
        double qk = hd + m->rope_dim;
        if (m->q_lora_rank) {
            sh[n++] = (gemm_shape){m->q_lora_rank + m->kv_lora_rank + m->rope_dim, h, L,
                                   "q_a+kv_a projection"};
            sh[n++] = (gemm_shape){H * qk, m->q_lora_rank, L, "q_b projection"};
        }
        sh[n++] = (gemm_shape){H * 2 * hd, m->kv_lora_rank, L, "kv_b projection (absorbed)"};
        sh[n++] = (gemm_shape){h, H * hd, L, "o projection"};
    } else {
        sh[n++] = (gemm_shape){(H + 2.0 * m->kv_heads) * hd, h, L, "qkv projection"};
        sh[n++] = (gemm_shape){h, H * hd, L, "o projection"};
    }
    double dl = m->layers - m->moe_layers;
    if (m->ffn && dl > 0) {
        sh[n++] = (gemm_shape){2.0 * m->ffn, h, dl, "dense FFN gate+up"};
        sh[n++] = (gemm_shape){h, m->ffn, dl, "dense FFN down"};
    }
    return n;
}

void mdl_table_eval(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par_in,
                    const mdl_efficiency *eff, const mdl_batch *b, bool use_tables,
                    mdl_step_cost *out, mdl_explain *ex, bool *fell_back) {
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
    mdl_parallel p;
    mdl_parallel_default(&p);
    if (par_in) {
        p = *par_in;
        if (!p.gpus) p.gpus = 1;
        if (!p.tp || p.tp > p.gpus) p.tp = p.tp ? p.gpus : 1;
        if (!p.ep || p.ep > p.gpus) p.ep = p.ep ? p.gpus : 1;
        if (p.ep_skew < 1) p.ep_skew = 1;
    }
    double G = p.gpus, T = w.tokens;
    bool decode = b->phase == MDL_DECODE;
    bool fb = false;
    uint32_t bs = mdl_batch_size(b);
    if (ex) {
        ex->tokens = T;
        ex->seqs = bs;
        ex->gpus = G;
    }
    bool fp8 = m->weight_bytes_per_param == 1;
    mdl_kkind gk = fp8 ? MDL_K_GEMM_FP8 : MDL_K_GEMM_BF16;
    int lo, hi;
    double y;

    // ---- dense GEMMs
    if (w.flops[MDL_WG_DENSE] > 0) {
        double roof = pp.group_s[MDL_WG_DENSE];
        gemm_shape sh[8];
        int ns = dense_shapes(m, sh);
        double mt = T / (G / p.tp); // rows of one TP group's GEMMs
        double covered_f = 0, covered_s = 0;
        for (int i = 0; use_tables && i < ns; i++) {
            shape_ctx c = {.n = sh[i].n, .k = sh[i].k};
            if (!lookup(hw, gk, pred_shape, &c, x_m, y_tflops, mt, &y, &lo, &hi)) continue;
            double f = 2.0 * T * sh[i].n * sh[i].k * sh[i].layers; // all GPUs
            double s = f / p.tp / (G / p.tp) / (y * 1e12);
            covered_f += f;
            covered_s += s;
            term_add(ex, "  gemm", s, hw, lo, hi, "%s n=%.0f k=%.0f m=%.0f: %.0f TFLOPS (%s)",
                     sh[i].what, sh[i].n, sh[i].k, mt, y, mdl_kkind_name(gk));
        }
        if (covered_f > 0) {
            double rest = w.flops[MDL_WG_DENSE] - covered_f;
            double frac = rest / w.flops[MDL_WG_DENSE];
            double rs = roof * frac; // the roofline's time for what no row covers
            pp.group_s[MDL_WG_DENSE] = covered_s + rs;
            term_add(ex, "  rest", rs, hw, -1, -1,
                     "roofline: %.0f%% of dense FLOPs (output projection, router, shapes "
                     "without rows) at the roofline's share", 100 * frac);
            if (frac > 0.25) fb = true;
        } else {
            fb = fb || use_tables;
        }
        term_add(ex, "dense GEMMs", pp.group_s[MDL_WG_DENSE], hw, -1, -1, "%s",
                 covered_f > 0 ? "the gemm rows above + the roofline rest"
                               : "roofline: max(FLOPs / (peak x compute), bytes / (HBM x memory))");
    }

    // ---- expert GEMMs
    if (w.flops[MDL_WG_EXPERT] > 0) {
        bool ok = use_tables && fp8;
        double routed_f = 2.0 * T * m->moe_layers * m->experts_active * m->expert_params;
        double shared_f = w.flops[MDL_WG_EXPERT] - routed_f;
        double per_exp = T * m->experts_active / m->experts; // tokens per expert (instance)
        double mg = T / G;
        double s = 0;
        int l1 = -1, h1 = -1;
        char how[200] = "";
        if (ok) {
            shape_ctx gu = {.n = 2.0 * m->expert_ffn, .k = m->hidden};
            shape_ctx dn = {.n = m->hidden, .k = m->expert_ffn};
            double y1, y2;
            int a, bb, c2, d;
            ok = lookup(hw, MDL_K_GROUPED_FP8, pred_shape, &gu, x_m, y_tflops, per_exp, &y1, &a, &bb) &&
                 lookup(hw, MDL_K_GROUPED_FP8, pred_shape, &dn, x_m, y_tflops, per_exp, &y2, &c2, &d);
            if (ok) {
                // gate+up is 2/3 of an expert's FLOPs, down 1/3; the hottest GPU sets the pace
                s = (routed_f * 2 / 3 / (y1 * 1e12) + routed_f / 3 / (y2 * 1e12)) / G;
                l1 = a;
                h1 = d;
                snprintf(how, sizeof how,
                         "grouped_fp8 m=%.0f tokens/expert: gate+up %.0f, down %.0f TFLOPS", per_exp,
                         y1, y2);
            }
            if (ok && shared_f > 0) {
                double z1, z2;
                int e1, e2, e3, e4;
                ok = lookup(hw, gk, pred_shape, &gu, x_m, y_tflops, mg, &z1, &e1, &e2) &&
                     lookup(hw, gk, pred_shape, &dn, x_m, y_tflops, mg, &z2, &e3, &e4);
                if (ok) {
                    s += (shared_f * 2 / 3 / (z1 * 1e12) + shared_f / 3 / (z2 * 1e12)) / G;
                    size_t used = strlen(how);
                    snprintf(how + used, sizeof how - used, "; shared m=%.0f: %.0f, %.0f", mg, z1, z2);
                }
            }
        }
        if (ok) {
            pp.group_s[MDL_WG_EXPERT] = s * p.ep_skew;
            term_add(ex, "expert GEMMs", pp.group_s[MDL_WG_EXPERT], hw, l1, h1, "%s; x ep_skew %.3g",
                     how, p.ep_skew);
        } else {
            fb = fb || use_tables;
            term_add(ex, "expert GEMMs", pp.group_s[MDL_WG_EXPERT], hw, -1, -1,
                     "roofline: max(%.3g ms compute, %.3g ms weights+activations) x ep_skew %.3g",
                     pp.tc[MDL_WG_EXPERT] * 1e3, pp.tm[MDL_WG_EXPERT] * 1e3, p.ep_skew);
        }
    }

    // ---- attention
    static const char *const gname[MDL_WG_COUNT] = {"", "", "attention", "attention (window)",
                                                    "indexer"};
    for (int g = MDL_WG_ATTN_FULL; g < MDL_WG_COUNT; g++) {
        if (w.flops[g] <= 0 && w.bytes[g] <= 0) continue;
        bool ok = false;
        if (use_tables && g == MDL_WG_ATTN_FULL) {
            double hd = m->attention == MDL_ATTN_GQA ? m->head_dim : m->kv_lora_rank + m->rope_dim;
            shape_ctx c = {.attention = m->attention, .head_dim = hd};
            if (decode) {
                for (uint32_t i = 0; i < hw->nkrows && !ok; i++) {
                    const mdl_krow *r = &hw->krows[i];
                    if (r->kind != MDL_K_DECODE_ATTN || !pred_attn(r, &c)) continue;
                    // KV replicated across TP ranks as in the roofline
                    double repl = p.tp <= 1                       ? 1
                                  : m->attention != MDL_ATTN_GQA  ? p.tp
                                  : p.tp > m->kv_heads            ? (double)p.tp / m->kv_heads
                                                                  : 1;
                    double bytes = w.bytes[g] / G * repl, fl = w.flops[g] / G;
                    double tb = bytes / (r->GBps * 1e9), tf = fl / (r->tflops * 1e12);
                    pp.group_s[g] = KVF_MAX(tb, tf);
                    ok = true;
                    term_add(ex, gname[g], pp.group_s[g], hw, (int)i, (int)i,
                             "decode_attn: max(%.3g GB / %.0f GB/s, %.3g TFLOP / %.0f TFLOPS) per GPU",
                             bytes / 1e9, r->GBps, fl / 1e12, r->tflops);
                }
            } else if (b->phase == MDL_PREFILL) {
                // sequence length: token-weighted end of the chunks
                double num = 0, den = 0;
                for (uint32_t i = 0; i < b->n; i++) {
                    num += (double)b->seqs[i].new_tokens *
                           ((double)b->seqs[i].cached_tokens + b->seqs[i].new_tokens);
                    den += b->seqs[i].new_tokens;
                }
                double sl = den > 0 ? num / den : 0;
                if (sl > 0 && lookup(hw, MDL_K_PREFILL_ATTN, pred_attn, &c, x_seqlen, y_tflops, sl,
                                     &y, &lo, &hi)) {
                    pp.group_s[g] = w.flops[g] / G / (y * 1e12);
                    ok = true;
                    term_add(ex, gname[g], pp.group_s[g], hw, lo, hi,
                             "prefill_attn seqlen %.0f: %.0f TFLOPS", sl, y);
                }
            }
        }
        if (!ok) {
            fb = fb || use_tables;
            term_add(ex, gname[g], pp.group_s[g], hw, -1, -1,
                     "roofline: max(%.3g ms compute, %.3g ms KV bytes)", pp.tc[g] * 1e3,
                     pp.tm[g] * 1e3);
        }
    }

    // ---- TP all-reduce (no tables yet: roofline)
    if (pp.tp_comm_s > 0) {
        fb = fb || use_tables;
        term_add(ex, "TP all-reduce", pp.tp_comm_s, hw, -1, -1,
                 "roofline: %.0f ring all-reduces over the scale-up fabric", pp.allreduces);
    }

    // ---- EP dispatch + combine
    if (pp.ep_comm_s > 0) {
        bool ok = false;
        double tok = T / G;
        if (use_tables) {
            shape_ctx c = {.low_latency = decode};
            double gd, gc, t0d, t0c;
            int a, bb, c2, d, u1, u2, u3, u4;
            if (lookup(hw, MDL_K_EP_DISPATCH, pred_mode, &c, x_ep, y_GBps, p.ep, &gd, &a, &bb) &&
                lookup(hw, MDL_K_EP_COMBINE, pred_mode, &c, x_ep, y_GBps, p.ep, &gc, &c2, &d) &&
                lookup(hw, MDL_K_EP_DISPATCH, pred_mode, &c, x_ep, y_tokens, p.ep, &t0d, &u1, &u2) &&
                lookup(hw, MDL_K_EP_COMBINE, pred_mode, &c, x_ep, y_tokens, p.ep, &t0c, &u3, &u4) &&
                tok >= t0d / 4 && tok <= t0d * 4) {
                double k = m->experts_active, h = m->hidden;
                double de = fp8 ? 1 : m->kv_bytes_per_elem, ce = m->kv_bytes_per_elem;
                double bd, bc;
                if (decode) {
                    // low-latency kernels: logical bytes = tokens x top-k x hidden x element
                    bd = tok * k * h * de;
                    bc = tok * k * h * ce;
                } else {
                    // normal kernels: the bottleneck link's bytes (NIC across domains)
                    double copies = pp.ep.nic_copies > 0 ? pp.ep.nic_copies : pp.ep.fabric_copies;
                    bd = tok * copies * h * de;
                    bc = tok * copies * h * ce;
                }
                double td = bd / (gd * 1e9), tc = bc / (gc * 1e9);
                pp.ep_comm_s = m->moe_layers * (td + tc) * p.ep_skew;
                ok = true;
                term_add(ex, "EP dispatch", m->moe_layers * td * p.ep_skew, hw, a, bb,
                         "ep_dispatch %s ep=%u: %.3g MB/GPU/layer at %.0f GB/s x %u MoE layers",
                         decode ? "low_latency" : "normal", p.ep, bd / 1e6, gd, m->moe_layers);
                term_add(ex, "EP combine", m->moe_layers * tc * p.ep_skew, hw, c2, d,
                         "ep_combine %s ep=%u: %.3g MB/GPU/layer at %.0f GB/s x %u MoE layers",
                         decode ? "low_latency" : "normal", p.ep, bc / 1e6, gc, m->moe_layers);
            }
        }
        if (!ok) {
            fb = fb || use_tables;
            term_add(ex, "EP dispatch+combine", pp.ep_comm_s, hw, -1, -1,
                     "roofline: NIC %.3g copies/token, fabric %.3g copies/token, %.3g KB per "
                     "copy; max(NIC %.3g us, fabric %.3g us) + 2 latencies per layer x %u layers",
                     pp.ep.nic_copies, pp.ep.fabric_copies, pp.ep.bytes_per_copy / 1e3,
                     pp.ep.nic_s * 1e6, pp.ep.fabric_s * 1e6, m->moe_layers);
        }
    }

    mdl_parts_finish(&pp, &w, out);
    if (ex) {
        double total = 0;
        for (int g = 0; g < MDL_WG_COUNT; g++) total += pp.group_s[g];
        double comm = pp.tp_comm_s + pp.ep_comm_s;
        double hidden = KVF_MIN(comm * pp.overlap, total);
        term_add(ex, "overlap", -hidden, hw, -1, -1,
                 "%s: hides min(%.0f%% of communication, compute)",
                 pp.tbo ? "two micro-batches" : "efficiency.comm_overlap", 100 * pp.overlap);
        term_add(ex, "fixed", pp.fixed_s, hw, -1, -1,
                 "step overhead + layers x layer overhead%s", pp.tbo ? " x 2 micro-batches" : "");
        ex->total_s = (double)out->ns * 1e-9;
    }
    if (fell_back) *fell_back = fb;
}

// ---- the stepper -----------------------------------------------------------------------

static void table_cost(mdl_stepper *s, const mdl_batch *b, mdl_step_cost *out) {
    bool fb = false;
    mdl_table_eval(&s->model, &s->hw, &s->par, &s->eff, b, true, out, NULL, &fb);
    out->table_fallback = fb;
}

static void table_destroy(mdl_stepper *s) {
    free(s);
}

static const mdl_stepper_vt table_vt = {"table", table_cost, table_destroy, true};

mdl_stepper *mdl_table_create(const mdl_model *m, const mdl_hardware *hw, const mdl_parallel *par,
                              const mdl_efficiency *eff) {
    mdl_stepper *s = mdl_roofline_create(m, hw, par, eff);
    s->vt = &table_vt;
    return s;
}

// ---- hw check ----------------------------------------------------------------------------

kvf_status mdl_hardware_check(const mdl_hardware *h, kvf_err *err) {
    const char *path = h->path[0] ? h->path : h->name;
    for (uint32_t i = 0; i < h->nkrows; i++) {
        const mdl_krow *r = &h->krows[i];
        double peak = 0;
        const char *what = NULL;
        switch (r->kind) {
        case MDL_K_GEMM_FP8:
        case MDL_K_GROUPED_FP8:
            peak = h->fp8_flops > 0 ? h->fp8_flops : h->bf16_flops;
            what = "fp8_flops";
            break;
        case MDL_K_GEMM_BF16:
        case MDL_K_PREFILL_ATTN:
        case MDL_K_DECODE_ATTN:
            peak = h->bf16_flops;
            what = "bf16_flops";
            break;
        default:
            break;
        }
        if (what && r->tflops * 1e12 > peak)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: kernels row (%s): tflops %.6g is above the datasheet peak "
                            "%s = %.6g TFLOP/s",
                            path, r->line, mdl_kkind_name(r->kind), r->tflops, what, peak / 1e12);
        if (r->kind == MDL_K_DECODE_ATTN && r->GBps * 1e9 > h->hbm_Bps)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: kernels row (decode_attn): GBps %.6g is above hbm_Bps %.6g GB/s",
                            path, r->line, r->GBps, h->hbm_Bps / 1e9);
        if ((r->kind == MDL_K_EP_DISPATCH || r->kind == MDL_K_EP_COMBINE) &&
            r->GBps * 1e9 > h->scaleup_Bps / 2 + h->nic_Bps)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: kernels row (%s): GBps %.6g is above what the scale-up fabric "
                            "and the NIC carry together (%.6g GB/s per direction)",
                            path, r->line, mdl_kkind_name(r->kind), r->GBps,
                            (h->scaleup_Bps / 2 + h->nic_Bps) / 1e9);
        // bus bandwidth can exceed one direction's link rate with in-switch reduction (NVLS:
        // ~470 GB/s on 8 x H100 with 450 GB/s per direction), never both directions together
        if (r->kind == MDL_K_ALLREDUCE && r->GBps * 1e9 > h->scaleup_Bps)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: kernels row (allreduce): bus bandwidth %.6g GB/s is above the "
                            "scale-up fabric's %.6g GB/s (both directions)",
                            path, r->line, r->GBps, h->scaleup_Bps / 1e9);
        // monotone: a later row of the same series with a larger x must not be slower
        for (uint32_t j = 0; j < h->nkrows; j++) {
            const mdl_krow *q = &h->krows[j];
            if (q->kind != r->kind || j == i) continue;
            bool same = false;
            double xr = 0, xq = 0, yr = 0, yq = 0;
            const char *xn = "", *yn = "";
            switch (r->kind) {
            case MDL_K_GEMM_FP8:
            case MDL_K_GEMM_BF16:
            case MDL_K_GROUPED_FP8:
                same = q->n == r->n && q->k == r->k;
                xr = r->m, xq = q->m, yr = r->tflops, yq = q->tflops, xn = "m", yn = "tflops";
                break;
            case MDL_K_PREFILL_ATTN:
                same = q->attention == r->attention && q->head_dim == r->head_dim;
                xr = r->seqlen, xq = q->seqlen, yr = r->tflops, yq = q->tflops;
                xn = "seqlen", yn = "tflops";
                break;
            case MDL_K_ALLREDUCE:
                same = q->gpus == r->gpus;
                xr = r->bytes, xq = q->bytes, yr = r->GBps, yq = q->GBps, xn = "bytes", yn = "GBps";
                break;
            default:
                break;
            }
            if (same && xq < xr && yq > yr)
                return kvf_fail(err, KVF_EINVAL,
                                "%s:%d: kernels row (%s): %s %.6g at %s %.6g is below %.6g at the "
                                "smaller %s %.6g (line %d); it must not fall as %s grows",
                                path, r->line, mdl_kkind_name(r->kind), yn, yr, xn, xr, yq, xn, xq,
                                q->line, xn);
        }
    }
    return KVF_OK;
}
