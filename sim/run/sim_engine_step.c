// sim/sim_engine_step.c -- engine in the loop: a step-time model (mdl_stepper) that executes
// every batch the simulator forms on the real engine and returns the measured duration.
//
// For each sequence of the batch a fresh engine sequence is opened with synthetic context of
// the batch's cached length (eng_seq_extend_synthetic writes KV without running the model), then
// decodes run in one batched call and prefill chunks one call each; the forward times are
// summed and the sequences closed. Slow but exact for the models the engine can hold (the
// tiny-* models on a CPU; any on a large GPU). Contexts beyond the arena are clamped and the
// step counted as extrapolated.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng.h"
#include "sim_run.h"

typedef struct eng_stepper {
    mdl_stepper base;
    eng_engine *e;
    uint32_t max_context, block_tokens, kv_blocks;
    uint64_t counter;   // distinct token ids per sequence: no accidental prefix sharing
    eng_seq **seqs;
    int32_t *tok;    // prefill chunk tokens
    int32_t *dtok;   // one token per decoding sequence
    size_t cap;
    int64_t host_ns;   // per-step host overhead added to the forward time
} eng_stepper;

static void es_cost(mdl_stepper *sb, const mdl_batch *b, mdl_step_cost *out) {
    eng_stepper *s = (eng_stepper *)sb;
    kvf_err err = {0};
    if (b->n > s->cap) {
        size_t c = s->cap;
        kvf_grow((void **)&s->seqs, &c, b->n, sizeof *s->seqs);
        c = s->cap;
        kvf_grow((void **)&s->dtok, &c, b->n, sizeof *s->dtok);
        s->cap = b->n;
    }
    if (!s->tok) s->tok = kvf_malloc(4096 * sizeof *s->tok);
    int64_t total = 0;
    uint32_t nd = 0;
    bool clamped = false;
    uint64_t budget = (uint64_t)s->kv_blocks * s->block_tokens * 9 / 10;
    for (uint32_t i = 0; i < b->n; i++) {
        uint32_t ctx = b->seqs[i].cached_tokens, nw = b->seqs[i].new_tokens;
        if ((uint64_t)ctx + nw + 1 > s->max_context ||
            (uint64_t)ctx + nw + 1 > budget / (b->n ? b->n : 1)) {
            ctx = (uint32_t)KVF_MIN((uint64_t)s->max_context, budget / (b->n ? b->n : 1));
            ctx = ctx > nw + 1 ? ctx - nw - 1 : 0;
            clamped = true;
        }
        int32_t t0 = (int32_t)(1 + (s->counter++ % 1000));
        eng_seq *q = NULL;
        uint32_t cached = 0;
        if (eng_seq_open(s->e, &t0, 1, &q, &cached, &err)) {
            clamped = true;
            continue;
        }
        // the first token is the sequence's own; synthetic context makes up the rest
        if (ctx > 1 && eng_seq_extend_synthetic(s->e, q, ctx - 1, s->counter, &err)) {
            eng_seq_close(s->e, q);
            clamped = true;
            continue;
        }
        if (nw == 1) {
            s->dtok[nd] = t0;
            s->seqs[nd++] = q;   // decodes are batched below
        } else {
            uint32_t n = KVF_MIN(nw, (uint32_t)4096);
            for (uint32_t k = 0; k < n; k++)
                s->tok[k] = (int32_t)(1 + (k * 7 + s->counter) % 1000);
            if (eng_prefill(s->e, q, s->tok, n, NULL, NULL, &err) == KVF_OK)
                total += eng_last_forward_ns(s->e);
            else
                clamped = true;
            eng_seq_close(s->e, q);
        }
    }
    if (nd) {
        if (eng_decode(s->e, s->seqs, s->dtok, nd, NULL, NULL, &err) == KVF_OK)
            total += eng_last_forward_ns(s->e);
        else
            clamped = true;
        for (uint32_t i = 0; i < nd; i++)
            eng_seq_close(s->e, s->seqs[i]);
    }
    double flops = 0, bytes = 0;
    mdl_batch_work(&sb->model, b, &flops, &bytes);
    out->ns = total + s->host_ns;
    out->flops = flops;
    out->bytes = bytes;
    out->extrapolated = clamped;
}

static void es_destroy(mdl_stepper *sb) {
    eng_stepper *s = (eng_stepper *)sb;
    eng_destroy(s->e);
    free(s->seqs);
    free(s->tok);
    free(s->dtok);
    free(s);
}

static const mdl_stepper_vt es_vt = {.name = "engine", .cost = es_cost, .destroy = es_destroy};

kvf_status sim_engine_stepper_create(const sim_config *cfg, const mdl_model *m,
                                     const mdl_hardware *hw, const mdl_parallel *par,
                                     const sim_run_opts *o, mdl_stepper **out, kvf_err *err) {
    *out = NULL;
    eng_model_desc d;
    char path[SIM_PATH_MAX];
    sim_config_model_path(cfg, path, sizeof path);
    kvf_status st = eng_model_desc_load(&d, path, NULL, err);
    if (st) return st;
    eng_options eo;
    eng_options_default(&eo);
    if ((st = eng_backend_parse(o->engine_backend, &eo.backend, err))) return st;
    eo.max_context = 16384;
    eo.max_seqs = 256;
    eo.max_step_tokens = 4096;
    eo.block_tokens = 16;
    eo.kv_blocks = 8192;
    eng_stepper *s = kvf_calloc(1, sizeof *s);
    if ((st = eng_create(&s->e, &d, &eo, err))) {
        free(s);
        return st;
    }
    s->base.vt = &es_vt;
    s->base.model = *m;
    s->base.hw = *hw;
    s->base.par = *par;
    s->base.eff = cfg->eff;
    s->max_context = eo.max_context;
    s->block_tokens = eo.block_tokens;
    s->kv_blocks = eo.kv_blocks;
    s->host_ns = (int64_t)cfg->eff.step_overhead_ns;
    *out = &s->base;
    return KVF_OK;
}

// ---- replay of measured step durations ------------------------------------------------------
// Served steps indexed by shape key (decodes, prefill chunks, prefill tokens) then total
// context; a batch takes the duration of the served step with its key and the nearest context.
typedef struct rp_entry {
    uint32_t nd, np, ptok;
    uint64_t ctx;
    int64_t ns;
    size_t idx;   // position in the serve
} rp_entry;

typedef struct replay_stepper {
    mdl_stepper base;
    mdl_stepper *inner;
    sim_step_replay *r;
    rp_entry *e;
    size_t n;
    double ratio[3];   // served / inner prediction, median by kind: prefill, decode, mixed
    double scale;
    // the previous answer, counted once mdl_stepper_cost has counted it as a step (router
    // estimates call the vtable directly and are not steps)
    uint64_t seen_calls;
    int pending;     // 0 none, 1 matched, 2 fallback
    size_t cursor;   // serve position of the last step replayed
    size_t pending_cursor;
} replay_stepper;

static void rp_commit(replay_stepper *s) {
    if (s->base.calls != s->seen_calls && s->pending && s->r) {
        if (s->pending == 1)
            s->r->matched++, s->cursor = s->pending_cursor;
        else
            s->r->fallback++;
    }
    s->seen_calls = s->base.calls;
    s->pending = 0;
}

static rp_entry rp_key(const mdl_seq *s, uint32_t n) {
    rp_entry k = {0};
    for (uint32_t i = 0; i < n; i++) {
        if (s[i].new_tokens == 1)
            k.nd++;
        else
            k.np++, k.ptok += s[i].new_tokens;
        k.ctx += s[i].cached_tokens;
    }
    return k;
}

static int rp_cmp(const void *a, const void *b) {
    const rp_entry *x = a, *y = b;
    if (x->nd != y->nd) return x->nd < y->nd ? -1 : 1;
    if (x->np != y->np) return x->np < y->np ? -1 : 1;
    if (x->ptok != y->ptok) return x->ptok < y->ptok ? -1 : 1;
    if (x->ctx != y->ctx) return x->ctx < y->ctx ? -1 : 1;
    return 0;
}

static int rp_kind(const rp_entry *k) {
    return k->nd && k->np ? 2 : k->nd ? 1 : 0;
}

static void rp_cost(mdl_stepper *sb, const mdl_batch *b, mdl_step_cost *out) {
    replay_stepper *s = (replay_stepper *)sb;
    rp_commit(s);
    s->inner->vt->cost(s->inner, b, out);   // flops, bytes and the fallback
    if (s->r && b->phase != MDL_VISION) {
        rp_entry k = rp_key(b->seqs, b->n);
        // the served steps with this key and a context within tolerance (a contiguous run of
        // the sorted table); of those the one nearest in serve order to the step after the
        // last one replayed (durations drift over a serve), then nearest in context
        uint64_t tol = (uint64_t)(0.02 * (double)k.ctx + 16.0 * b->n);
        rp_entry q = k;
        q.ctx = k.ctx > tol ? k.ctx - tol : 0;
        size_t lo = 0, hi = s->n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (rp_cmp(&s->e[mid], &q) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        const rp_entry *best = NULL;
        size_t want = s->cursor + 1, bd = SIZE_MAX;
        uint64_t bc = UINT64_MAX;
        for (size_t i = lo; i < s->n && s->e[i].nd == k.nd && s->e[i].np == k.np &&
                            s->e[i].ptok == k.ptok && s->e[i].ctx <= k.ctx + tol;
             i++) {
            size_t d = s->e[i].idx > want ? s->e[i].idx - want : want - s->e[i].idx;
            uint64_t dc = s->e[i].ctx > k.ctx ? s->e[i].ctx - k.ctx : k.ctx - s->e[i].ctx;
            if (d < bd || (d == bd && dc < bc)) bd = d, bc = dc, best = &s->e[i];
        }
        if (best) {
            out->ns = best->ns;
            s->pending_cursor = best->idx;
            s->pending = 1;
        } else {
            out->ns = (int64_t)((double)out->ns * s->ratio[rp_kind(&k)]);
            s->pending = 2;
            if (s->r->misses) {   // a step to inspect (router estimates land here too: no "step")
                fprintf(s->r->misses, "after served step %zu: decodes %u, chunks", s->cursor, k.nd);
                for (uint32_t i = 0; i < b->n; i++)
                    if (b->seqs[i].new_tokens != 1)
                        fprintf(s->r->misses, " %u@%u", b->seqs[i].new_tokens,
                                b->seqs[i].cached_tokens);
                fprintf(s->r->misses, ", context %llu\n", (unsigned long long)k.ctx);
            }
        }
        out->extrapolated = false;
    }
    if (s->scale > 0) out->ns = (int64_t)((double)out->ns * s->scale);
    if (out->ns < 1) out->ns = 1;
}

static void rp_destroy(mdl_stepper *sb) {
    replay_stepper *s = (replay_stepper *)sb;
    rp_commit(s);
    mdl_stepper_destroy(s->inner);
    free(s->e);
    free(s);
}

static const mdl_stepper_vt rp_vt = {.name = "replay", .cost = rp_cost, .destroy = rp_destroy};

mdl_stepper *sim_replay_stepper_wrap(mdl_stepper *inner, const sim_run_opts *o) {
    replay_stepper *s = kvf_calloc(1, sizeof *s);
    s->base = *inner;
    s->base.vt = &rp_vt;
    s->inner = inner;
    s->r = o->replay;
    s->scale = o->step_scale;
    s->ratio[0] = s->ratio[1] = s->ratio[2] = 1;
    if (s->r && s->r->n) {
        s->e = kvf_malloc(s->r->n * sizeof *s->e);
        double *rt[3];
        size_t nr[3] = {0, 0, 0};
        for (int k = 0; k < 3; k++)
            rt[k] = kvf_malloc(s->r->n * sizeof(double));
        for (size_t i = 0; i < s->r->n; i++) {
            const sim_replay_step *p = &s->r->steps[i];
            rp_entry k = rp_key(p->seqs, p->n);
            k.ns = p->ns;
            k.idx = i;
            s->e[s->n++] = k;
            mdl_batch b = {.phase = k.nd && k.np ? MDL_MIXED
                                    : k.nd       ? MDL_DECODE
                                                 : MDL_PREFILL,
                           .seqs = p->seqs,
                           .n = p->n};
            mdl_step_cost c;
            inner->vt->cost(inner, &b, &c);
            if (c.ns > 0) rt[rp_kind(&k)][nr[rp_kind(&k)]++] = (double)p->ns / (double)c.ns;
        }
        qsort(s->e, s->n, sizeof *s->e, rp_cmp);
        for (int k = 0; k < 3; k++) {
            if (nr[k]) {
                kvf_sort_doubles(rt[k], nr[k]);
                s->ratio[k] = kvf_percentile_sorted(rt[k], nr[k], 50);
            }
            free(rt[k]);
        }
    }
    return &s->base;
}
