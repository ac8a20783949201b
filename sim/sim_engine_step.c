// sim/sim_engine_step.c -- engine in the loop: a step-time model (mdl_stepper) that executes
// every batch the simulator forms on the real engine and returns the measured duration.
//
// For each sequence of the batch a fresh engine sequence is opened with synthetic context of
// the batch's cached length (eng_seq_extend_synthetic writes KV without running the model), then
// decodes run in one batched call and prefill chunks one call each; the forward times are
// summed and the sequences closed. Slow but exact for the models the engine can hold (the
// tiny-* models on a CPU; any on a large GPU). Contexts beyond the arena are clamped and the
// step counted as extrapolated.
#include <stdlib.h>
#include <string.h>

#include "eng.h"
#include "sim_run.h"

typedef struct eng_stepper {
    mdl_stepper base;
    eng_engine *e;
    uint32_t max_context, block_tokens, kv_blocks;
    uint64_t counter;          // distinct token ids per sequence: no accidental prefix sharing
    eng_seq **seqs;
    int32_t *tok;              // prefill chunk tokens
    int32_t *dtok;             // one token per decoding sequence
    size_t cap;
    int64_t host_ns;           // per-step host overhead added to the forward time
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
        if ((uint64_t)ctx + nw + 1 > s->max_context || (uint64_t)ctx + nw + 1 > budget / (b->n ? b->n : 1)) {
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
            for (uint32_t k = 0; k < n; k++) s->tok[k] = (int32_t)(1 + (k * 7 + s->counter) % 1000);
            if (eng_prefill(s->e, q, s->tok, n, NULL, NULL, &err) == KVF_OK) total += eng_last_forward_ns(s->e);
            else clamped = true;
            eng_seq_close(s->e, q);
        }
    }
    if (nd) {
        if (eng_decode(s->e, s->seqs, s->dtok, nd, NULL, NULL, &err) == KVF_OK)
            total += eng_last_forward_ns(s->e);
        else
            clamped = true;
        for (uint32_t i = 0; i < nd; i++) eng_seq_close(s->e, s->seqs[i]);
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
