// engine/eng_profile.c -- `kvfleet engine profile`: times the engine's steps over the shapes
// the simulator asks about and writes them as CSV (the format is a contract with the
// calibrated step-time model in models/; see engine/README.md).
//
// Rows: prefill (batch 1, new_tokens T over context C cached tokens), decode (batch B, one
// token each, mean context C; contexts spread evenly over [C/2, 3C/2]) and host_overhead (the
// per-step time of the serving loop outside the forward pass, decode steps of batch B).
// Timing: one warm-up, then `repeats` runs; median and p10/p90 of the forward time (CUDA
// events on GPU, wall clock on CPU). Context is synthetic KV (values do not change timing),
// and two sets of sequences in different blocks are alternated so caches do not flatter.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eng_int.h"

typedef struct grid {
    const uint32_t *pt, *pc;   // prefill new tokens x context
    uint32_t npt, npc;
    const uint32_t *db, *dc;   // decode batch x mean context
    uint32_t ndb, ndc;
    const uint32_t *hb;   // host-overhead batches
    uint32_t nhb;
    uint32_t repeats;
    bool shapes;   // and a decode row at the first context for every batch up to the last
                   //   one the axis does not have (the GEMMs' cost is not smooth in the batch)
} grid;

// Denser where serving lands: prefill chunks under 32 tokens (what is left after a cache
// hit), decode batches 2-8 and short contexts.
static const uint32_t Q_PT[] = {4, 12, 32, 128, 512}, Q_PC[] = {0, 256, 1024};
static const uint32_t Q_DB[] = {1, 2, 4, 8, 16, 32}, Q_DC[] = {32, 256, 1024};
static const uint32_t Q_HB[] = {1, 16};
static const uint32_t F_PT[] = {4, 8, 16, 32, 64, 128, 256, 512, 1024},
                      F_PC[] = {0, 128, 512, 2048};
static const uint32_t F_DB[] = {1, 2, 4, 8, 16, 32, 64}, F_DC[] = {32, 128, 512, 2048};
static const uint32_t F_HB[] = {1, 8, 32};
// On a GPU, shapes grow: larger chunks and batches.
static const uint32_t G_PT[] = {16, 64, 256, 512, 1024, 2048, 4096},
                      G_PC[] = {0, 1024, 4096, 16384};
static const uint32_t G_DB[] = {1, 4, 16, 32, 64, 128, 256}, G_DC[] = {256, 1024, 4096, 16384};
static const uint32_t G_HB[] = {1, 16, 64};

#define N(a) (uint32_t)(sizeof a / sizeof a[0])

static grid pick_grid(bool quick, bool gpu) {
    grid g;
    if (quick) {
        g = (grid){Q_PT,    Q_PC,    N(Q_PT), N(Q_PC), Q_DB, Q_DC,
                   N(Q_DB), N(Q_DC), Q_HB,    N(Q_HB), 3,    false};
    } else if (gpu) {
        g = (grid){G_PT,    G_PC,    N(G_PT), N(G_PC), G_DB, G_DC,
                   N(G_DB), N(G_DC), G_HB,    N(G_HB), 7,    false};
    } else {
        g = (grid){F_PT,    F_PC,    N(F_PT), N(F_PC), F_DB, F_DC,
                   N(F_DB), N(F_DC), F_HB,    N(F_HB), 5,    false};
    }
    // On a CPU a batch whose row count is not a multiple of the GEMM kernel's tile costs more
    // than its neighbours (OpenBLAS, tiny-dense at context 256: batch 3 16.4 ms between
    // 12.3 and 12.7 ms at 2 and 4, batch 15 28.2 ms against 26.1 ms at 16). Not measured on a GPU.
    g.shapes = !gpu;
    return g;
}

typedef struct stat3 {
    double med, p10, p90;
    uint32_t n;   // repeats measured
} stat3;

static stat3 stats(double *v, uint32_t n) {
    kvf_sort_doubles(v, n);
    return (stat3){kvf_percentile_sorted(v, n, 50), kvf_percentile_sorted(v, n, 10),
                   kvf_percentile_sorted(v, n, 90), n};
}

// Short steps get more repeats (until MIN_TOTAL_NS of measurements, at most MAX_REPS), so that
// their median is not one scheduler hiccup away from the truth.
enum { MAX_REPS = 41 };
#define MIN_TOTAL_NS 3e8

static bool more_reps(uint32_t done, uint32_t reps, double total) {
    // quick sweeps (3 repeats) settle for half the measured time
    return done < reps ||
           (total < (reps <= 3 ? MIN_TOTAL_NS / 2 : MIN_TOTAL_NS) && done < MAX_REPS);
}

static void put_row(FILE *f, FILE *prog, const eng_engine *e, const char *op, uint32_t batch,
                    uint32_t newt, uint32_t ctx, stat3 s, uint32_t reps, double fl, double by) {
    fprintf(f, "%s,%s,%s,%s,%u,%u,%u,%.0f,%.0f,%.0f,%u,%.6g,%.6g\n", e->m.name, e->hw,
            eng_backend_name(e->o.backend), op, batch, newt, ctx, s.med, s.p10, s.p90, reps, fl,
            by);
    fflush(f);
    if (prog)
        fprintf(prog, "  %-13s batch %4u new %5u ctx %6u  median %10.3f ms  (p10 %.3f, p90 %.3f)\n",
                op, batch, newt, ctx, s.med / 1e6, s.p10 / 1e6, s.p90 / 1e6);
}

static uint32_t tok_of(uint64_t i, uint32_t vocab) {
    return (uint32_t)(eng_mix64(i) % vocab);
}

// Median etc. of prefill of T tokens over C context (two sequences alternated).
static kvf_status time_prefill(eng_engine *e, uint32_t T, uint32_t C, uint32_t reps, bool cpu,
                               stat3 *out, kvf_err *err) {
    eng_seq *s[2] = {NULL, NULL};
    int32_t *tok = kvf_malloc((size_t)(T + C + 1) * sizeof *tok);
    double *v = kvf_malloc((MAX_REPS + reps + 1) * sizeof *v), total = 0;
    uint32_t done = 0;
    kvf_status st = KVF_OK;
    uint32_t nsets = 2;
    for (uint32_t k = 0; k < nsets; k++) {
        tok[0] = (int32_t)tok_of(k + 977 * C + T, e->m.vocab);
        if ((st = eng_seq_open(e, tok, 1, &s[k], NULL, err))) goto done;
        if ((st = eng_seq_extend_synthetic(e, s[k], C, 1000 + k, err))) {
            if (k == 0) goto done;
            eng_seq_close(e, s[k]);   // no room for a second set: reuse the first
            s[k] = NULL;
            nsets = 1;
            st = KVF_OK;
        }
    }
    for (uint32_t r = 0; r == 0 || more_reps(done, reps, total); r++) {   // r == 0: warm-up
        eng_seq *q = s[r % nsets];
        for (uint32_t i = 0; i < T; i++)
            tok[i] = (int32_t)tok_of((uint64_t)r * 131 + i, e->m.vocab);
        int64_t c0 = eng_thread_cpu_ns();
        if ((st = eng_prefill(e, q, tok, T, NULL, NULL, err))) goto done;
        double t = cpu ? (double)(eng_thread_cpu_ns() - c0) : (double)eng_last_forward_ns(e);
        if (r) total += v[done++] = t;
        eng_seq_truncate(e, q, C);
    }
    *out = stats(v, done);
done:
    for (uint32_t k = 0; k < 2; k++)
        eng_seq_close(e, s[k]);
    free(tok);
    free(v);
    return st;
}

static kvf_status time_decode(eng_engine *e, uint32_t B, uint32_t C, uint32_t reps, bool cpu,
                              stat3 *out, double *ctx_sum, kvf_err *err) {
    eng_seq **s = kvf_calloc(2 * (size_t)B, sizeof *s);
    int32_t *tok = kvf_malloc(B * sizeof *tok);
    uint32_t *ctx = kvf_malloc(B * sizeof *ctx);
    double *v = kvf_malloc((MAX_REPS + reps + 1) * sizeof *v), total = 0;
    uint32_t done = 0;
    kvf_status st = KVF_OK;
    uint32_t nsets = 2;
    *ctx_sum = 0;
    for (uint32_t i = 0; i < B; i++) {
        ctx[i] = B > 1 ? C / 2 + (uint32_t)((uint64_t)C * i / (B - 1)) : C;
        if (!ctx[i]) ctx[i] = 1;
        *ctx_sum += ctx[i];
    }
    for (uint32_t k = 0; k < 2 && nsets == 2; k++)
        for (uint32_t i = 0; i < B; i++) {
            eng_seq **q = &s[k * B + i];
            tok[0] = (int32_t)tok_of(k * 7777 + i, e->m.vocab);
            if ((st = eng_seq_open(e, tok, 1, q, NULL, err)) ||
                (st = eng_seq_extend_synthetic(e, *q, ctx[i], 99 * k + i, err))) {
                if (k == 0) goto done;
                nsets = 1;   // tight arena: one set only
                break;
            }
        }
    if (nsets == 2 && eng_kv_blocks_available(e) < B) nsets = 1;
    if (nsets == 1) {
        for (uint32_t i = 0; i < B; i++) {
            eng_seq_close(e, s[B + i]);
            s[B + i] = NULL;
        }
        st = KVF_OK;
    }
    for (uint32_t r = 0; r == 0 || more_reps(done, reps, total); r++) {   // r == 0: warm-up
        eng_seq **q = s + (size_t)(r % nsets) * B;
        for (uint32_t i = 0; i < B; i++)
            tok[i] = (int32_t)tok_of((uint64_t)r * 31 + i, e->m.vocab);
        int64_t c0 = eng_thread_cpu_ns();
        if ((st = eng_decode(e, q, tok, B, NULL, NULL, err))) goto done;
        double t = cpu ? (double)(eng_thread_cpu_ns() - c0) : (double)eng_last_forward_ns(e);
        if (r) total += v[done++] = t;
        for (uint32_t i = 0; i < B; i++)
            eng_seq_truncate(e, q[i], ctx[i]);
    }
    *out = stats(v, done);
done:
    for (uint32_t i = 0; i < 2 * B; i++)
        eng_seq_close(e, s[i]);
    free(s), free(tok), free(ctx), free(v);
    return st;
}

// Host overhead: the serving loop's decode steps of batch B, step time minus forward time.
static kvf_status time_host(eng_engine *e, uint32_t B, uint32_t steps, stat3 *out, double *ctx_mean,
                            kvf_err *err) {
    eng_request *r = kvf_calloc(B, sizeof *r);
    for (uint32_t i = 0; i < B; i++) {
        r[i].input_tokens = 32;
        r[i].output_tokens = steps + 1;
    }
    eng_serve_config c;
    eng_serve_config_default(&c);
    c.max_batch_requests = B;
    c.max_batch_tokens = KVF_MAX(B * 32, B);
    c.no_sleep = true;
    eng_serve_result res;
    kvf_status st = eng_serve_on(e, &c, r, B, &res, err);
    free(r);
    if (st) return st;
    double *v = kvf_malloc((res.n_steps + 1) * sizeof *v);
    uint32_t n = 0;
    double cs = 0;
    for (size_t i = 0; i < res.n_steps; i++) {
        const eng_step_record *s = &res.steps[i];
        if (s->phase != ENG_STEP_DECODE || s->batch != B) continue;
        v[n++] = (double)(s->duration_ns - s->forward_ns);
        cs += (double)s->context_tokens / B;
    }
    if (!n) v[n++] = 0;
    *out = stats(v, n);
    *ctx_mean = cs / n;
    free(v);
    eng_serve_result_free(&res);
    return KVF_OK;
}

static uint32_t max_of(const uint32_t *v, uint32_t n) {
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        m = KVF_MAX(m, v[i]);
    return m;
}

// Engine sized for a grid.
static kvf_status make_engine(eng_engine **e, const eng_model_desc *m, eng_backend be,
                              uint32_t threads, uint64_t seed, const grid *g, kvf_err *err) {
    eng_options o;
    eng_options_default(&o);
    o.backend = be;
    o.threads = threads;
    o.seed = seed ? seed : 1;
    uint32_t pt = max_of(g->pt, g->npt), pc = max_of(g->pc, g->npc);
    uint32_t db = KVF_MAX(max_of(g->db, g->ndb), max_of(g->hb, g->nhb));
    uint32_t dc = max_of(g->dc, g->ndc) * 3 / 2 + 64;
    o.max_step_tokens = KVF_MAX(pt, db * 32);
    o.max_seqs = 2 * db + 2;
    o.max_context = KVF_MAX(pt + pc + 16, dc);
    uint64_t bt = o.block_tokens;
    uint64_t need_p = 2 * ((pt + pc) / bt + 2);
    uint64_t dsum = 0;
    for (uint32_t i = 0; i < g->ndc; i++)
        dsum = KVF_MAX(dsum, (uint64_t)g->dc[i]);
    uint64_t need_d = 2 * ((uint64_t)db * (dsum / bt + 3));
    o.kv_blocks = (uint32_t)KVF_MAX(need_p, need_d);
    kvf_status st = eng_create(e, m, &o, err);
    // Too big for this machine: shrink the arena; rows that no longer fit are skipped.
    for (int i = 0; i < 16 && st == KVF_ENOMEM && o.kv_blocks > 4 * (pt + pc) / bt + 64; i++) {
        o.kv_blocks /= 2;
        st = eng_create(e, m, &o, err);
    }
    return st;
}

// Copies axis a (n points) into buf and appends doubled points until the last covers want
// (capped at 16 points). Returns the new count.
static uint32_t extend_axis(const uint32_t *a, uint32_t n, uint32_t want, uint32_t *buf) {
    memcpy(buf, a, n * sizeof *a);
    uint32_t last = n ? buf[n - 1] : 0;
    while (n < 16 && last < want) {
        last = last ? last * 2 : 1024;
        buf[n++] = last;
    }
    return n;
}

// One decode row: B sequences at mean context C (spread evenly over [C/2, 3C/2]); a shape
// that does not fit the engine's memory is skipped (said on prog).
static kvf_status decode_row(eng_engine *e, const eng_model_desc *m, const eng_profile_config *c,
                             const grid *g, uint32_t B, uint32_t C, double elem, FILE *f,
                             FILE *prog, kvf_err *err) {
    stat3 s;
    double cs;
    kvf_status st = time_decode(e, B, C, g->repeats, c->cpu_clock, &s, &cs, err);
    if (st == KVF_ENOMEM) {
        if (prog) fprintf(prog, "  decode %u at %u: skipped (%s)\n", B, C, err->msg);
        return KVF_OK;
    }
    if (st) return st;
    uint32_t *nn = kvf_malloc(B * sizeof *nn), *cc = kvf_malloc(B * sizeof *cc);
    for (uint32_t k = 0; k < B; k++) {
        nn[k] = 1;
        cc[k] = B > 1 ? C / 2 + (uint32_t)((uint64_t)C * k / (B - 1)) : C;
    }
    double fl, by;
    eng_step_work(m, B, nn, cc, elem, &fl, &by);
    free(nn), free(cc);
    put_row(f, prog, e, "decode", B, 1, (uint32_t)(cs / B + 0.5), s, s.n, fl, by);
    return KVF_OK;
}

kvf_status eng_profile_run(const eng_profile_config *c, FILE *f, FILE *prog, kvf_err *err) {
    eng_model_desc m;
    kvf_status st = eng_model_desc_load(&m, c->model ? c->model : "tiny-dense", c->models_dir, err);
    if (st) return st;
    grid g = pick_grid(c->quick, c->backend == ENG_BACKEND_CUDA);
    uint32_t pcb[16], dcb[16];
    if (c->max_context) {   // a trace with longer contexts: measure them rather than extrapolate
        g.npc = extend_axis(g.pc, g.npc, c->max_context, pcb);
        g.pc = pcb;
        g.ndc = extend_axis(g.dc, g.ndc, c->max_context, dcb);
        g.dc = dcb;
    }
    eng_engine *e = NULL;
    if ((st = make_engine(&e, &m, c->backend, c->threads, c->seed, &g, err))) return st;
    int64_t t0 = kvf_wall_ns();
    fprintf(f,
            "# kvfleet_version: %s\n# model: %s\n# hardware_id: %s\n# hardware: %s\n"
            "# backend: %s\n",
            KVF_VERSION, m.name, e->hw, e->hw, eng_backend_name(c->backend));
    fprintf(f, "# threads: %u\n", c->threads ? c->threads : 1);
#ifdef KVF_HAVE_BLAS
    fprintf(f, "# gemm: %s\n", c->backend == ENG_BACKEND_CUDA ? "cublas-bf16" : "openblas-fp32");
#else
    fprintf(f, "# gemm: %s\n", c->backend == ENG_BACKEND_CUDA ? "cublas-bf16" : "builtin-fp32");
#endif
    fprintf(f,
            "# block_tokens: %u\n# sweep: %s\n# timing: %s; median of repeats after one "
            "warm-up\n",
            e->bt, c->quick ? "quick" : "full",
            c->backend == ENG_BACKEND_CUDA ? "cuda events"
            : c->cpu_clock                 ? "thread cpu clock"
                                           : "wall clock");
    double elem = c->backend == ENG_BACKEND_CUDA ? 2 : 4;
    // MoE: how much a skewed router (Zipf-like bias) changes step time, as comment lines.
    if (m.experts) {
        float *bias = kvf_malloc(m.experts * sizeof *bias);
        for (uint32_t i = 0; i < m.experts; i++)
            bias[i] = -1.5f * logf((float)i + 1.0f);
        uint32_t T = g.pt[g.npt / 2], B = g.db[g.ndb / 2];
        stat3 a, b;
        double cs;
        if ((st = time_prefill(e, T, 0, g.repeats, c->cpu_clock, &a, err))) goto fail;
        eng_set_router_bias(e, bias);
        if ((st = time_prefill(e, T, 0, g.repeats, c->cpu_clock, &b, err))) goto fail;
        eng_set_router_bias(e, NULL);
        fprintf(f, "# moe_skew_prefill_%u_ratio: %.3f\n", T, b.med / a.med);
        if ((st = time_decode(e, B, g.dc[0], g.repeats, c->cpu_clock, &a, &cs, err))) goto fail;
        eng_set_router_bias(e, bias);
        if ((st = time_decode(e, B, g.dc[0], g.repeats, c->cpu_clock, &b, &cs, err))) goto fail;
        eng_set_router_bias(e, NULL);
        fprintf(f, "# moe_skew_decode_b%u_ratio: %.3f\n", B, b.med / a.med);
        free(bias);
    }
    fprintf(f, "model,hardware,backend,op,batch,new_tokens,context,median_ns,p10_ns,p90_ns,"
               "repeats,flops,bytes\n");
    for (uint32_t i = 0; i < g.npc; i++)
        for (uint32_t j = 0; j < g.npt; j++) {
            uint32_t T = g.pt[j], C = g.pc[i];
            if (T + C > e->o.max_context) continue;
            stat3 s;
            st = time_prefill(e, T, C, g.repeats, c->cpu_clock, &s, err);
            if (st == KVF_ENOMEM) {
                if (prog) fprintf(prog, "  prefill %u over %u: skipped (%s)\n", T, C, err->msg);
                continue;
            }
            if (st) goto fail;
            double fl, by;
            eng_step_work(&m, 1, &T, &C, elem, &fl, &by);
            put_row(f, prog, e, "prefill", 1, T, C, s, s.n, fl, by);
        }
    for (uint32_t i = 0; i < g.ndc; i++)
        for (uint32_t j = 0; j < g.ndb; j++)
            if ((st = decode_row(e, &m, c, &g, g.db[j], g.dc[i], elem, f, prog, err))) goto fail;
    // the batches between the axis' points, at its first context: the calibrated model adds
    // each one's difference from the grid's interpolation at every context (models/README.md)
    for (uint32_t B = 2, j = 0; g.shapes && g.ndb > 1 && B < g.db[g.ndb - 1]; B++) {
        while (j < g.ndb && g.db[j] < B)
            j++;
        if (g.db[j] != B && (st = decode_row(e, &m, c, &g, B, g.dc[0], elem, f, prog, err)))
            goto fail;
    }
    for (uint32_t j = 0; j < g.nhb; j++) {
        stat3 s;
        double cm;
        uint32_t steps = c->quick ? 12 : 24;
        if ((st = time_host(e, g.hb[j], steps, &s, &cm, err))) goto fail;
        put_row(f, prog, e, "host_overhead", g.hb[j], 1, (uint32_t)(cm + 0.5), s, s.n, 0, 0);
    }
    if (prog) fprintf(prog, "profile: %.1f s\n", (double)(kvf_wall_ns() - t0) / 1e9);
    eng_destroy(e);
    return KVF_OK;
fail:
    eng_destroy(e);
    return st;
}

// ---- --check --------------------------------------------------------------------------------
typedef struct crow {
    char op[32];
    uint32_t batch, newt, ctx;
    double med;
} crow;

kvf_status eng_profile_check(const eng_profile_config *c, const char *path, FILE *out,
                             kvf_err *err) {
    double r;
    return eng_profile_check_ratio(c, path, out, &r, NULL, err);
}

// What the header lines of a profile say, and its prefill/decode rows.
typedef struct check_profile {
    char model[ENG_NAME_MAX], backend[16], hardware[ENG_NAME_MAX];
    bool cpu;     // timed by the thread's CPU clock: so is the check
    crow *rows;   // nr rows, owned
    size_t nr;
} check_profile;

// Reads the profile text (changed in place: lines cut at '\n') of path into *p.
static kvf_status check_read(char *text, const char *path, check_profile *p, kvf_err *err) {
    size_t cap = 0;
    int line = 0;
    bool header = false;
    for (char *q = text, *nl; q && *q; q = nl ? nl + 1 : NULL) {
        nl = strchr(q, '\n');
        if (nl) *nl = 0;
        line++;
        if (!*q) continue;
        if (*q == '#') {
            sscanf(q, "# model: %63s", p->model);
            sscanf(q, "# backend: %15s", p->backend);
            sscanf(q, "# hardware: %63s", p->hardware);
            if (strstr(q, "# timing: thread cpu clock")) p->cpu = true;
            continue;
        }
        if (!header) {
            if (strncmp(q, "model,hardware,backend,op,batch,new_tokens,context,median_ns", 60))
                return kvf_fail(err, KVF_EPARSE, "%s:%d: expected the profile header", path, line);
            header = true;
            continue;
        }
        crow r;
        char mm[128], hw[128], be[16];
        if (sscanf(q, "%127[^,],%127[^,],%15[^,],%31[^,],%u,%u,%u,%lf", mm, hw, be, r.op, &r.batch,
                   &r.newt, &r.ctx, &r.med) != 8)
            return kvf_fail(err, KVF_EPARSE, "%s:%d: malformed row", path, line);
        if (!p->model[0]) snprintf(p->model, sizeof p->model, "%.63s", mm);
        if (!strcmp(r.op, "host_overhead")) continue;
        if (p->nr == cap) kvf_grow((void **)&p->rows, &cap, p->nr + 1, sizeof *p->rows);
        p->rows[p->nr++] = r;
    }
    if (!p->nr) return kvf_fail(err, KVF_EPARSE, "%s: no prefill/decode rows", path);
    return KVF_OK;
}

enum { CHECK_PROBES = 6 };

// Probes per op: the smallest, a middle and the largest row whose stored time is within
// bound_ns (large shapes drift differently from small ones: compute saturation, caches), so a
// profile is checked where it is used hardest; the smallest row when none is within it.
// Returns how many (at most CHECK_PROBES) into probe.
static uint32_t check_pick(const check_profile *p, double bound_ns, crow *probe) {
    uint32_t np = 0;
    const crow *rows = p->rows;
    for (int op = 0; op < 2; op++) {
        const char *want = op ? "decode" : "prefill";
        size_t idx[512], k = 0;
        size_t small = SIZE_MAX;   // the smallest row: probed when none is within the bound
        for (size_t i = 0; i < p->nr && k < 512; i++) {
            if (strcmp(rows[i].op, want)) continue;
            if (rows[i].med <= bound_ns) idx[k++] = i;
            if (small == SIZE_MAX || rows[i].med < rows[small].med) small = i;
        }
        if (!k && small != SIZE_MAX) idx[k++] = small;
        if (!k) continue;
        // order by stored time: work grows with it
        for (size_t i = 1; i < k; i++)
            for (size_t j = i; j > 0 && rows[idx[j - 1]].med > rows[idx[j]].med; j--) {
                size_t t = idx[j];
                idx[j] = idx[j - 1];
                idx[j - 1] = t;
            }
        size_t pick[3] = {0, k / 2, k - 1};
        for (int q = 0; q < 3; q++)
            if (q == 0 || pick[q] != pick[q - 1]) probe[np++] = rows[idx[pick[q]]];
    }
    KVF_ASSERT(np <= CHECK_PROBES);
    return np;
}

// An engine sized for the probes (the largest prefill and decode shape among them).
static kvf_status check_engine(eng_engine **e, const eng_model_desc *m,
                               const eng_profile_config *cc, const crow *probe, uint32_t np,
                               kvf_err *err) {
    uint32_t mt = 16, mc = 16, mb = 1, mdc = 16;
    for (uint32_t i = 0; i < np; i++) {
        if (!strcmp(probe[i].op, "prefill")) {
            mt = KVF_MAX(mt, probe[i].newt);
            mc = KVF_MAX(mc, probe[i].ctx);
        } else {
            mb = KVF_MAX(mb, probe[i].batch);
            mdc = KVF_MAX(mdc, probe[i].ctx);
        }
    }
    uint32_t pt[1] = {mt}, pc[1] = {mc}, db[1] = {mb}, dc[1] = {mdc};
    grid g = {pt, pc, 1, 1, db, dc, 1, 1, db, 1, 3, false};
    return make_engine(e, m, cc->backend, cc->threads, cc->seed, &g, err);
}

// Times each probe on e by the profile's clock, writes its line to out and its ratio
// (measured/stored) to ratios; *outside counts those beyond c->check_max_ratio.
static kvf_status check_time(eng_engine *e, const eng_profile_config *c, bool cpu,
                             const crow *probe, uint32_t np, FILE *out, double *ratios,
                             uint32_t *outside, kvf_err *err) {
    fprintf(out, "op,batch,new_tokens,context,stored_ns,measured_ns,ratio\n");
    *outside = 0;
    for (uint32_t i = 0; i < np; i++) {
        stat3 s;
        double cs;
        kvf_status st;
        if (!strcmp(probe[i].op, "prefill"))
            st = time_prefill(e, probe[i].newt, probe[i].ctx, 3, cpu, &s, err);
        else
            st = time_decode(e, probe[i].batch, probe[i].ctx, 3, cpu, &s, &cs, err);
        if (st) return st;
        ratios[i] = s.med / (probe[i].med > 0 ? probe[i].med : 1);
        if (c->check_max_ratio > 1 &&
            (ratios[i] > c->check_max_ratio || ratios[i] < 1 / c->check_max_ratio))
            (*outside)++;
        fprintf(out, "%s,%u,%u,%u,%.0f,%.0f,%.3f\n", probe[i].op, probe[i].batch, probe[i].newt,
                probe[i].ctx, probe[i].med, s.med, ratios[i]);
    }
    return KVF_OK;
}

// The check (contract in eng.h): read the profile, pick the probes, time them on an engine
// of the profile's model, report the median drift.
kvf_status eng_profile_check_ratio(const eng_profile_config *c, const char *path, FILE *out,
                                   double *ratio, double *kind, kvf_err *err) {
    KVF_ASSERT(c && path && out && ratio);
    *ratio = NAN;
    if (kind) kind[0] = kind[1] = NAN;
    char *text = NULL;
    size_t len = 0;
    kvf_status st = kvf_read_file(path, &text, &len, err);
    if (st) return st;
    check_profile p = {0};
    eng_engine *e = NULL;
    if ((st = check_read(text, path, &p, err))) goto done;
    eng_profile_config cc = *c;
    if (!cc.model) cc.model = p.model;
    if (p.backend[0] && !c->backend) eng_backend_parse(p.backend, &cc.backend, NULL);
    eng_model_desc m;
    if ((st = eng_model_desc_load(&m, cc.model, cc.models_dir, err))) goto done;
    crow probe[CHECK_PROBES];
    uint32_t np = check_pick(&p, c->check_bound_ms > 0 ? c->check_bound_ms * 1e6 : 2e9, probe);
    if ((st = check_engine(&e, &m, &cc, probe, np, err))) goto done;
    if (p.hardware[0] && strcmp(p.hardware, eng_hardware_id(e))) {
        fprintf(out, "# warning: the profile was measured on '%s', this machine is '%s'\n",
                p.hardware, eng_hardware_id(e));
        fprintf(stderr, "kvfleet: warning: %s was measured on '%s', this machine is '%s'\n", path,
                p.hardware, eng_hardware_id(e));
    }
    double ratios[CHECK_PROBES];
    uint32_t outside = 0;
    if ((st = check_time(e, c, p.cpu, probe, np, out, ratios, &outside, err))) goto done;
    // by kind first: stats() sorts what it is given
    uint32_t nkind[2] = {0, 0};
    for (int k = 0; kind && k < 2; k++) {
        double rk[CHECK_PROBES];
        for (uint32_t i = 0; i < np; i++)
            if (!strcmp(probe[i].op, k ? "decode" : "prefill")) rk[nkind[k]++] = ratios[i];
        if (nkind[k]) kind[k] = stats(rk, nkind[k]).med;
    }
    stat3 d = stats(ratios, np);
    *ratio = d.med;
    fprintf(out, "# median drift (measured/stored): %.3f over %u probes (%s clock)\n", d.med, np,
            p.cpu ? "thread cpu" : "wall");
    for (int k = 0; kind && k < 2; k++)
        if (nkind[k])
            fprintf(out, "# median drift of the %s probes: %.3f over %u\n",
                    k ? "decode" : "prefill", kind[k], nkind[k]);
    if (outside)
        st = kvf_fail(err, KVF_ERUN,
                      "%s: %u of %u probes drifted beyond x%.2f of the stored times (median "
                      "ratio %.3f): re-profile this machine",
                      path, outside, np, c->check_max_ratio, d.med);
done:
    eng_destroy(e);
    free(p.rows);
    free(text);
    return st;
}

// ---- probes -------------------------------------------------------------------------------
// Fixed shapes timed one step at a time on an engine of their own, before, between (in the
// serving loop's idle gaps) and after a serve: how much the machine's speed moved.
static const struct {
    bool decode;
    uint32_t n, ctx;   // prefill: tokens over ctx; decode: batch at ctx each
} PROBE_SHAPES[ENG_PROBE_SHAPES] = {
    {false, 12, 0}, {false, 128, 256}, {true, 4, 256}, {true, 16, 512}};

struct eng_prober {
    eng_engine *e;
    eng_seq *seq[16];
    int32_t tok[128];
    uint64_t k;
};

void eng_probe_shape(uint32_t i, char *name, size_t n) {
    if (i >= ENG_PROBE_SHAPES) {
        snprintf(name, n, "?");
        return;
    }
    snprintf(name, n, "%s %u@%u", PROBE_SHAPES[i].decode ? "decode" : "prefill", PROBE_SHAPES[i].n,
             PROBE_SHAPES[i].ctx);
}

kvf_status eng_prober_create(eng_prober **out, const char *model, const char *models_dir,
                             eng_backend b, uint32_t threads, kvf_err *err) {
    *out = NULL;
    eng_model_desc m;
    kvf_status st = eng_model_desc_load(&m, model ? model : "tiny-dense", models_dir, err);
    if (st) return st;
    eng_options o;
    eng_options_default(&o);
    o.backend = b;
    o.threads = threads;
    o.max_step_tokens = 256;
    o.max_seqs = 20;
    o.max_context = 1024;
    o.kv_blocks = 16 * (1024 / o.block_tokens) + 64;
    eng_prober *p = kvf_calloc(1, sizeof *p);
    if ((st = eng_create(&p->e, &m, &o, err))) {
        free(p);
        return st;
    }
    for (uint32_t i = 0; i < 16 && !st; i++) {
        int32_t t = (int32_t)tok_of(4242 + i, m.vocab);
        st = eng_seq_open(p->e, &t, 1, &p->seq[i], NULL, err);
    }
    if (st) {
        eng_prober_destroy(p);
        return st;
    }
    *out = p;
    return KVF_OK;
}

kvf_status eng_prober_run(eng_prober *p, uint32_t shape, double *wall_ns, double *cpu_ns,
                          kvf_err *err) {
    if (shape >= ENG_PROBE_SHAPES) return kvf_fail(err, KVF_EINVAL, "probe shape %u", shape);
    uint32_t n = PROBE_SHAPES[shape].n, ctx = PROBE_SHAPES[shape].ctx;
    uint32_t nseq = PROBE_SHAPES[shape].decode ? n : 1;
    kvf_status st = KVF_OK;
    for (uint32_t i = 0; i < nseq && !st; i++) {
        eng_seq_truncate(p->e, p->seq[i], 0);
        if (ctx) st = eng_seq_extend_synthetic(p->e, p->seq[i], ctx, 77 + i, err);
    }
    if (st) return st;
    p->k++;
    for (uint32_t i = 0; i < 128; i++)
        p->tok[i] = (int32_t)tok_of(p->k * 131 + i, p->e->m.vocab);
    int64_t w0 = kvf_wall_ns(), c0 = eng_thread_cpu_ns();
    st = PROBE_SHAPES[shape].decode ? eng_decode(p->e, p->seq, p->tok, n, NULL, NULL, err)
                                    : eng_prefill(p->e, p->seq[0], p->tok, n, NULL, NULL, err);
    *cpu_ns = (double)(eng_thread_cpu_ns() - c0);
    *wall_ns = (double)(kvf_wall_ns() - w0);
    return st;
}

const char *eng_prober_hardware(const eng_prober *p) {
    return eng_hardware_id(p->e);
}

void eng_prober_destroy(eng_prober *p) {
    if (!p) return;
    for (uint32_t i = 0; i < 16; i++)
        eng_seq_close(p->e, p->seq[i]);
    eng_destroy(p->e);
    free(p);
}
