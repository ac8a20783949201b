// sim/config/sim_serving.c -- serving.*: the behaviour of the serving engine a pool runs
// (frontend latency, per-step CPU overhead, where the prefix cache lives, admission, CUDA-graph
// batch buckets, client time-outs). serving.preset names an engine; each of its figures is a
// default that a key set in the scenario (or with --set) overrides; the fitted terms of a
// `kvfleet fit` file named by serving.fit fill what neither sets. Sources of the preset
// figures: scenarios/README.md, "Serving behaviour".
//
// Precedence for each serving.* key (and each key a fit file names): set explicitly > fit
// file > preset > built-in default. Re-resolved after every load and --set, so a later
// `--set serving.preset=...` re-derives whatever was not set by hand.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "sim.h"
#include "sim_keys.h"

typedef struct preset {
    sim_prefix_home prefix_cache;
    sim_admission admission;
    double watermark;
    uint32_t graph_buckets;
} preset;

// What each engine does by default. The numbers that are timings (frontend, step overhead)
// are not here: they are measured, so they come from a fit file (serving.fit).
static const preset presets[] = {
    // none: kvfleet's own scheduler (a prefix-cache slice, preempt on overflow, no graphs)
    [SIM_SERVING_NONE] = {SIM_PREFIX_SLICE, SIM_ADMIT_PREEMPT, 0, 0},
    // vLLM: automatic prefix caching keeps cached blocks among the free ones (LRU); admission
    // on current need with a 1 % watermark, recompute on overflow; CUDA graphs captured up to
    // batch 512 (1, 2, 4, then steps of 8)
    [SIM_SERVING_VLLM] = {SIM_PREFIX_FREE_BLOCKS, SIM_ADMIT_PREEMPT, 0.01, 512},
    // SGLang: the radix cache lives in the KV pool's free slots; retracts on overflow; CUDA
    // graphs up to batch 160 (its default cuda_graph_max_bs for an H100 at TP 1; assumed for
    // other shapes)
    [SIM_SERVING_SGLANG] = {SIM_PREFIX_FREE_BLOCKS, SIM_ADMIT_PREEMPT, 0, 160},
    // TensorRT-LLM: the GUARANTEED_NO_EVICT capacity scheduler reserves a request's whole
    // context at admission; KV block reuse in the free blocks; no graph padding modelled
    [SIM_SERVING_TRTLLM] = {SIM_PREFIX_FREE_BLOCKS, SIM_ADMIT_RESERVE, 0, 0},
};

// The key itself was set (a `serving:` or `efficiency:` section in the file does not set the
// keys it leaves out).
static bool set_by_hand(const sim_config *c, const char *key) {
    return sim_config_key_given(c, key);
}

static void apply_preset(sim_config *c) {
    KVF_ASSERT(c->serving.preset <= SIM_SERVING_TRTLLM);
    const preset *p = &presets[c->serving.preset];
    sim_serving_cfg *s = &c->serving;
    if (!set_by_hand(c, "serving.prefix_cache")) s->prefix_cache = p->prefix_cache;
    if (!set_by_hand(c, "serving.admission")) s->admission = p->admission;
    if (!set_by_hand(c, "serving.watermark")) s->watermark = p->watermark;
    if (!set_by_hand(c, "serving.graph_buckets")) s->graph_buckets = p->graph_buckets;
    // timings default to none until a fit file gives them
    if (!set_by_hand(c, "serving.frontend_ms")) s->frontend_ns = 0;
    if (!set_by_hand(c, "serving.step_overhead_us")) s->step_overhead_ns = 0;
    if (!set_by_hand(c, "serving.step_overhead_per_seq_us")) s->step_overhead_seq_ns = 0;
    if (!set_by_hand(c, "serving.first_token_lag_steps")) s->first_token_lag_steps = 0;
}

// One term of a fit file: a numeric scenario key and its value in the file's unit.
static kvf_status apply_term(sim_config *c, const char *path, int line, const char *key,
                             const char *text, kvf_err *err) {
    const keydef *d = sim_key_find(key);
    if (!d || d->kind != K_NUM)
        return kvf_fail(err, KVF_EPARSE, "%s:%d: term '%s': not a numeric scenario key", path, line,
                        key);
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno || !isfinite(v))
        return kvf_fail(err, KVF_EPARSE, "%s:%d: term '%s': '%s' is not a number", path, line, key,
                        text);
    bool ok = (d->flags & F_GT ? v > d->lo : v >= d->lo) && v <= d->hi;
    if (!ok)
        return kvf_fail(err, KVF_EPARSE, "%s:%d: term '%s': %g outside the key's range [%g, %g]",
                        path, line, key, v, d->lo, d->hi);
    if (set_by_hand(c, key)) return KVF_OK;   // the scenario's own value wins
    sim_serving_cfg *s = &c->serving;
    if (s->n_fit_undo == SIM_FIT_UNDO_MAX)
        return kvf_fail(err, KVF_EPARSE, "%s:%d: term '%s': more than %d terms in a fit file", path,
                        line, key, SIM_FIT_UNDO_MAX);
    s->fit_undo[s->n_fit_undo++] =
        (struct sim_fit_undo){.key = d->key,
                              .off = (uint32_t)d->off,
                              .off2 = (uint32_t)d->off2,
                              .ntype = d->ntype,
                              .was = sim_key_load_num((char *)c + d->off, (num_type)d->ntype)};
    sim_key_store_num((char *)c + d->off, (num_type)d->ntype, v * d->scale);
    if (d->off2) sim_key_store_num((char *)c + d->off2, (num_type)d->ntype, v * d->scale);
    return KVF_OK;
}

// Reads a fit file (YAML: `terms:` a mapping of scenario keys to numbers, beside the fit's
// own record: training_set, loo_error_pct, ...) and applies its terms.
static kvf_status apply_fit(sim_config *c, kvf_err *err) {
    char path[SIM_PATH_MAX];
    if (!sim_config_resolve(c, c->serving.fit, path, sizeof path)) {
        char where[SIM_PATH_MAX + 128];
        sim_config_where(c, "serving.fit", where, sizeof where);
        return kvf_fail(err, KVF_EINVAL,
                        "%s: the path is over %d bytes once resolved against the scenario's "
                        "folder",
                        where, SIM_PATH_MAX - 1);
    }
    char *text = NULL;
    size_t len = 0;
    kvf_status st = kvf_read_file(path, &text, &len, err);
    if (st) return st;
    yaml_parser_t ps;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&ps)) {
        free(text);
        return kvf_fail(err, KVF_ENOMEM, "%s: cannot initialise the YAML parser", path);
    }
    yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
    if (!yaml_parser_load(&ps, &doc)) {
        st = kvf_fail(err, KVF_EPARSE, "%s:%zu: %s", path, ps.problem_mark.line + 1,
                      ps.problem ? ps.problem : "malformed YAML");
        yaml_parser_delete(&ps);
        free(text);
        return st;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    yaml_node_t *terms = NULL;
    if (root && root->type == YAML_MAPPING_NODE)
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = yaml_document_get_node(&doc, p->key);
            if (k->type == YAML_SCALAR_NODE && !strcmp((char *)k->data.scalar.value, "terms"))
                terms = yaml_document_get_node(&doc, p->value);
        }
    if (!terms || terms->type != YAML_MAPPING_NODE) {
        st = kvf_fail(err, KVF_EPARSE,
                      "%s:1: a fit file needs a mapping 'terms' of scenario keys "
                      "to numbers (written by kvfleet fit)",
                      path);
    } else {
        for (yaml_node_pair_t *p = terms->data.mapping.pairs.start;
             !st && p < terms->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(&doc, p->key);
            yaml_node_t *v = yaml_document_get_node(&doc, p->value);
            int line = (int)k->start_mark.line + 1;
            if (k->type != YAML_SCALAR_NODE || v->type != YAML_SCALAR_NODE)
                st = kvf_fail(err, KVF_EPARSE, "%s:%d: a term is 'key: number'", path, line);
            else
                st = apply_term(c, path, line, (char *)k->data.scalar.value,
                                (char *)v->data.scalar.value, err);
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&ps);
    free(text);
    return st;
}

// Puts back what the last fit's terms replaced, last term first (a key set by hand since
// keeps its own value).
static void undo_fit(sim_config *c) {
    sim_serving_cfg *s = &c->serving;
    while (s->n_fit_undo) {
        const struct sim_fit_undo *u = &s->fit_undo[--s->n_fit_undo];
        if (set_by_hand(c, u->key)) continue;
        sim_key_store_num((char *)c + u->off, (num_type)u->ntype, u->was);
        if (u->off2) sim_key_store_num((char *)c + u->off2, (num_type)u->ntype, u->was);
    }
}

kvf_status sim_serving_resolve(sim_config *c, kvf_err *err) {
    undo_fit(c);
    apply_preset(c);
    if (c->serving.fit[0]) return apply_fit(c, err);
    return KVF_OK;
}
