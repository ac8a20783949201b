// cli/cli_explain.c -- `kvfleet run SCENARIO --explain-step` (the step-time breakdown of one
// representative step of a pool, each term traced to a kernel-table row or a roofline term)
// and `kvfleet hw check FILE` (kernel tables of a hardware file are physically sane).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "cli.h"
#include "sim_run.h"

// The parallelism a pool's instances run with, as the cluster builds it (TP and EP default
// to all the instance's GPUs; redundant experts shrink the hottest GPU's excess load).
static void print_terms(FILE *f, const char *title, const mdl_explain *ex, const char *hw_path) {
    fprintf(f, "%s: %.3f ms per step\n", title, ex->total_s * 1e3);
    fprintf(f, "  %-22s %10s  %s\n", "term", "ms", "origin");
    for (int i = 0; i < ex->n; i++) {
        const mdl_term *t = &ex->t[i];
        fprintf(f, "  %-22s %10.3f  %s\n", t->name, t->s * 1e3, t->how);
        if (t->row_lo) {
            if (t->row_hi && t->row_hi != t->row_lo)
                fprintf(f, "  %-22s %10s    rows %s:%d and :%d -- %s\n", "", "", hw_path, t->row_lo,
                        t->row_hi, t->source);
            else
                fprintf(f, "  %-22s %10s    row %s:%d -- %s\n", "", "", hw_path, t->row_lo,
                        t->source);
        }
    }
}

// One representative step of a pool as --explain-step builds it: the model and hardware as
// the run costs them, the pool's parallelism and the batch.
typedef struct explain_setup {
    mdl_model m;
    mdl_hardware hw;
    mdl_parallel par;
    mdl_batch b;
    mdl_decode_sum ds;
    mdl_seq *seqs;   // owned (NULL for a decode batch given as sums)
    double nseq, per_gpu, context;
    uint32_t draft;
    bool decode;
} explain_setup;

// The largest step explained: sequences of a decode step, prompt chunks of a prefill step (each
// listed; far past what any instance holds, and the sums stay exact in 32 bits).
#define EXPLAIN_MAX_SEQS 1e7
#define EXPLAIN_MAX_CHUNKS 1e6

// Builds *x (a decode or prefill step); exit code 2 with the message in err on failure.
static int explain_build(const sim_config *cfg, bool decode, double per_gpu, double context,
                         double prompt, double chunks, explain_setup *x, kvf_err *err) {
    char path[SIM_PATH_MAX + 128], dir[SIM_PATH_MAX + 128];
    memset(x, 0, sizeof *x);
    sim_config_resolve(cfg, "models", dir, sizeof dir);
    sim_config_model_path(cfg, path, sizeof path);
    if (mdl_model_load(&x->m, path, dir, err) || (sim_config_hardware_path(cfg, path, sizeof path),
                                                  mdl_hardware_load(&x->hw, path, dir, err)))
        return 2;
    x->decode = decode;
    // the pool whose shape the step runs on: colocated, the instances counted under
    // cluster.decode where there are any (their shape equals the prefill pool's), else those
    // of cluster.prefill
    const sim_pool_cfg *pc = decode ? &cfg->cluster.decode : &cfg->cluster.prefill;
    if (cfg->cluster.mode == SIM_COLOCATED)
        pc = cfg->cluster.decode.instances > 0 ? &cfg->cluster.decode : &cfg->cluster.prefill;
    // the model as the run costs it: the scenario's precision.*, then the pool's own, and the
    // pool's own hardware (sim_cluster.c does the same)
    const sim_precision_cfg *pr = &cfg->precision;
    if (pr->weights || pr->kv || pr->activations)
        mdl_model_apply_precision(&x->m, pr->weights, pr->kv, pr->activations);
    if (pc->prec_weights || pc->prec_activations)
        mdl_model_apply_precision(&x->m, pc->prec_weights, MDL_PREC_AUTO, pc->prec_activations);
    if (pc->hardware[0]) {
        sim_config_pool_hardware_path(cfg, pc, path, sizeof path);
        if (mdl_hardware_load(&x->hw, path, dir, err)) return 2;
    }
    x->par = sim_pool_parallel(cfg, &x->m, pc);
    uint32_t draft = x->draft = cfg->decoding.draft_tokens;
    mdl_batch *b = &x->b;
    if (decode) {
        if (per_gpu <= 0) per_gpu = (double)pc->max_batch_requests / x->par.gpus;
        double nseq = per_gpu * x->par.gpus;
        if (nseq > EXPLAIN_MAX_SEQS + 0.5)
            return kvf_fail(err, KVF_EINVAL,
                            "--step-seqs: %g per GPU x %u GPUs is %.4g sequences in one step, "
                            "over the %.0g a step is costed for",
                            per_gpu, x->par.gpus, nseq, EXPLAIN_MAX_SEQS),
                   2;
        if (nseq < 1) nseq = 1;
        if (context < 1) context = 4096;
        uint32_t n = (uint32_t)(nseq + 0.5);
        b->phase = MDL_DECODE;
        if (draft == 0) {
            uint32_t caps[MDL_CAPS];
            mdl_model_caps(&x->m, caps);
            for (uint32_t i = 0; i < n; i++)
                mdl_decode_sum_add(&x->ds, caps, context);
            b->dsum = &x->ds;
        } else {
            // speculative (MTP) steps: every sequence computes 1 + draft tokens
            x->seqs = kvf_calloc(n, sizeof *x->seqs);
            for (uint32_t i = 0; i < n; i++)
                x->seqs[i] = (mdl_seq){1 + draft, (uint32_t)context};
            b->seqs = x->seqs;
            b->n = n;
        }
        x->nseq = n;
    } else {
        // `chunks` prompt chunks per TP group (default 1) of the pool's chunk size (or the
        // prompt) after `context` cached
        double chunk =
            prompt > 0 ? prompt : (pc->chunk_tokens > 0 ? (double)pc->chunk_tokens : 8192);
        uint32_t groups = x->par.gpus / x->par.tp ? x->par.gpus / x->par.tp : 1;
        double nc = (double)groups * (chunks >= 1 ? floor(chunks) : 1);
        if (nc > EXPLAIN_MAX_CHUNKS)
            return kvf_fail(err, KVF_EINVAL,
                            "--step-chunks: %g per TP group x %u groups is %.4g prompt chunks in "
                            "one step, over the %.0g a step is costed for",
                            chunks, groups, nc, EXPLAIN_MAX_CHUNKS),
                   2;
        uint32_t n = (uint32_t)nc;
        x->seqs = kvf_calloc(n, sizeof *x->seqs);
        for (uint32_t i = 0; i < n; i++)
            x->seqs[i] = (mdl_seq){(uint32_t)chunk, (uint32_t)(context > 0 ? context : 0)};
        b->phase = MDL_PREFILL;
        b->seqs = x->seqs;
        b->n = n;
        x->nseq = n;
        per_gpu = chunk;
    }
    x->per_gpu = per_gpu;
    x->context = context;
    return 0;
}

kvf_status sim_explain_terms(const sim_config *cfg, bool decode, double batch_per_gpu,
                             double length, mdl_explain *ex, sim_explain_info *info, kvf_err *err) {
    explain_setup x;
    int rc = decode ? explain_build(cfg, true, batch_per_gpu, length, 0, 0, &x, err)
                    : explain_build(cfg, false, 0, 0, length, batch_per_gpu, &x, err);
    if (rc) {
        free(x.seqs);
        return err->code ? err->code : KVF_EINVAL;
    }
    mdl_step_cost ct;
    mdl_table_eval(&x.m, &x.hw, &x.par, &cfg->eff, &x.b, true, &ct, ex, NULL);
    info->step_s = (double)ct.ns * 1e-9;
    info->layers = x.m.layers;
    info->launches = x.par.two_batch ? 2 : 1;
    info->tokens_per_gpu = ex->tokens * x.par.tp / (x.par.gpus ? x.par.gpus : 1);
    free(x.seqs);
    return KVF_OK;
}

int sim_explain_step(const sim_config *cfg, const char *phase, double per_gpu, double context,
                     double prompt, double chunks) {
    kvf_err err = {0};
    explain_setup x;
    bool dec = !strcmp(phase, "decode");
    if (!dec && strcmp(phase, "prefill")) {
        fprintf(stderr, "kvfleet run: --step-phase must be decode or prefill, not '%s'\n", phase);
        return 2;
    }
    if (explain_build(cfg, dec, per_gpu, context, prompt, chunks, &x, &err)) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        free(x.seqs);
        return 2;
    }
    const mdl_model *m = &x.m;
    const mdl_hardware *hw = &x.hw;
    const mdl_parallel par = x.par;
    bool decode = x.decode;
    uint32_t draft = x.draft;
    double nseq = x.nseq;
    per_gpu = x.per_gpu;
    context = x.context;
    double chunks_per_gpu = decode ? 0 : nseq / par.gpus;
    mdl_step_cost ct, cr;
    mdl_explain et, er;
    bool fb = false;
    mdl_table_eval(m, hw, &par, &cfg->eff, &x.b, true, &ct, &et, &fb);
    mdl_table_eval(m, hw, &par, &cfg->eff, &x.b, false, &cr, &er, NULL);
    if (ct.ns > (int64_t)MDL_MAX_STEP_NS || cr.ns > (int64_t)MDL_MAX_STEP_NS) {
        // a run refuses such a step (sim_step.c): its time is a bound, not a figure
        fprintf(stderr,
                "kvfleet: this %s step would take over an hour (%s model): a run refuses it; "
                "give a smaller batch, prompt or context\n",
                phase, ct.ns > (int64_t)MDL_MAX_STEP_NS ? "table" : "roofline");
        free(x.seqs);
        return 2;
    }
    printf("explain-step: one %s step of %s on %u x %s (tp %u, ep %u, ep_skew %.3g%s%s)\n", phase,
           m->name, par.gpus, hw->name, par.tp, par.ep, par.ep_skew,
           par.two_batch      ? ", two micro-batches"
           : par.single_batch ? ", single-batch overlap"
                              : "",
           par.route_nodes ? ", node-limited routing" : "");
    if (decode)
        printf("  batch: %.0f sequences (%.1f per GPU) x %u token%s, context %.0f; %.0f tokens\n",
               nseq, nseq / par.gpus, 1 + draft, draft ? "s (1 + MTP/draft)" : "", context,
               et.tokens);
    else
        printf("  batch: %.0f prompt chunks (%.3g per GPU) of %.0f tokens after %.0f cached; %.0f "
               "tokens\n",
               nseq, chunks_per_gpu, per_gpu, context, et.tokens);
    if (par.route_nodes)
        printf("  routing: a token's experts on at most %u scale-up domains\n", par.route_nodes);
    print_terms(stdout, "table model", &et, hw->path);
    printf("  (%s)\n", fb ? "some terms fell back to the roofline: this step counts in "
                            "steps.table_fallbacks"
                          : "every applicable term answered by a kernel table");
    print_terms(stdout, "roofline", &er, hw->path);
    double tok_s_gpu = et.tokens / ct.ns * 1e9 / par.gpus;
    double tok_s_gpu_r = er.tokens / cr.ns * 1e9 / par.gpus;
    if (decode)
        printf("per GPU: table %.0f tok/s (%.1f ms/step), roofline %.0f tok/s (%.1f ms/step)\n",
               tok_s_gpu, ct.ns / 1e6, tok_s_gpu_r, cr.ns / 1e6);
    else {
        // prompt tokens served per GPU counting the cached prefix (as published figures that
        // include cache hits do), and the tokens computed
        double whole = (per_gpu + (context > 0 ? context : 0)) / per_gpu;
        printf("per GPU: table %.0f tok/s (%.0f computed, %.1f ms/step), roofline %.0f tok/s "
               "(%.0f computed, %.1f ms/step)\n",
               tok_s_gpu * whole, tok_s_gpu, ct.ns / 1e6, tok_s_gpu_r * whole, tok_s_gpu_r,
               cr.ns / 1e6);
    }
    free(x.seqs);
    return 0;
}

int cli_hw(int argc, char **argv) {
    if (kvf_cli_help(argc, argv)) {
        printf(
            "usage: kvfleet hw check FILE... [-q]\n"
            "  checks hardware files: keys and values, and their kernel tables (no figure above\n"
            "  the datasheet peak, monotone where physics says so, no duplicate shape, no unknown\n"
            "  kind); exit 2 naming the file, the row and what is wrong.\n");
        return 0;
    }
    if (argc < 3 || strcmp(argv[1], "check")) {
        fprintf(stderr, "usage: kvfleet hw check FILE... [-q]\n");
        return 2;
    }
    bool quiet = false;
    int files = 0, rc = 0;
    for (int i = 2; i < argc; i++)
        quiet |= !strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet");
    for (int i = 2; i < argc; i++) {   // every file, each on its own: one bad file fails the check
        if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) continue;
        files++;
        static mdl_hardware h;
        kvf_err err = {0};
        kvf_status st = mdl_hardware_load(&h, argv[i], NULL, &err);
        if (!st) st = mdl_hardware_check(&h, &err);
        if (st) {
            fprintf(stderr, "kvfleet: %s\n", err.msg);
            rc = 2;
            continue;
        }
        if (quiet) continue;
        unsigned count[MDL_K_KINDS] = {0};
        for (uint32_t k = 0; k < h.nkrows; k++)
            count[h.krows[k].kind]++;
        printf("%s: ok (%s, %u kernel rows", h.path, h.name, h.nkrows);
        for (int k = 0; k < MDL_K_KINDS; k++)
            if (count[k]) printf("; %s %u", mdl_kkind_name((mdl_kkind)k), count[k]);
        printf(")\n");
    }
    if (!files) {
        fprintf(stderr, "usage: kvfleet hw check FILE... [-q]\n");
        return 2;
    }
    return rc;
}
