// models/mdl_files.c -- model, hardware and efficiency-fit files: flat YAML mappings of scalar
// keys read with libyaml, checked against a field table, and the derived model figures.
//
// Files are deliberately flat (`key: value`, no nesting) so the engine can read the same model
// files with a ten-line reader on GPU hosts that have no libyaml. Every key is known: an
// unknown key, a duplicate, a value of the wrong type, a negative count or a zero where a
// positive figure is needed is an error naming file:line and the key.
#include "mdl.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

// ---- field tables ----------------------------------------------------------------------

typedef enum ftype {
    F_U32,
    F_DBL,
    F_STR,
    F_BOOL,
    F_ATTN,
    F_KROWS,
    F_PREC,
    F_PATTERN,
    F_LIST,
    F_LAYOUT,
    F_POWER
} ftype;
enum { F_REQ = 1, F_POS = 2 };   // required; must be > 0

typedef struct field {
    const char *key;
    ftype type;
    size_t off;
    unsigned flags;
} field;

// clang-format off
#define MF(k, t, fl) {#k, t, offsetof(mdl_model, k), fl}
static const field model_fields[] = {
    MF(name, F_STR, 0),
    MF(layers, F_U32, F_REQ | F_POS),
    MF(hidden, F_U32, F_REQ | F_POS),
    MF(heads, F_U32, F_REQ | F_POS),
    MF(kv_heads, F_U32, F_POS),
    MF(head_dim, F_U32, F_POS),
    MF(ffn, F_U32, 0),
    MF(vocab, F_U32, F_REQ | F_POS),
    MF(attention, F_ATTN, 0),
    MF(kv_lora_rank, F_U32, 0),
    MF(rope_dim, F_U32, 0),
    MF(q_lora_rank, F_U32, 0),
    MF(index_heads, F_U32, 0),
    MF(index_head_dim, F_U32, 0),
    MF(index_topk, F_U32, 0),
    MF(experts, F_U32, 0),
    MF(experts_active, F_U32, 0),
    MF(shared_experts, F_U32, 0),
    MF(expert_ffn, F_U32, 0),
    MF(dense_layers, F_U32, 0),
    MF(window, F_U32, 0),
    MF(window_layers, F_U32, 0),
    MF(weight_bytes_per_param, F_DBL, F_POS),
    MF(kv_bytes_per_elem, F_DBL, F_POS),
    MF(vision_params, F_DBL, 0),
    MF(tokens_per_image, F_U32, 0),
    MF(max_context, F_U32, 0),
    MF(tied_embeddings, F_BOOL, 0),
    MF(expert_weight_bytes_per_param, F_DBL, 0),
    {"activations", F_PREC, offsetof(mdl_model, act_precision), 0},
    {"layer_pattern", F_PATTERN, offsetof(mdl_model, layer_kind), 0},
    MF(o_lora_rank, F_U32, 0),
    MF(o_groups, F_U32, 0),
    MF(compress_overlap, F_U32, F_POS),
    MF(index_compressor, F_BOOL, 0),
    MF(candidate_source_layer, F_U32, 0),
    MF(candidate_blocks, F_U32, 0),
    MF(candidate_block_tokens, F_U32, 0),
    MF(candidate_caps_scoring, F_BOOL, 0),
    MF(encoder_layers, F_U32, 0),
    MF(decoder_replay_tokens, F_U32, 0),
    MF(swa_bytes_per_elem, F_DBL, 0),
    MF(index_bytes_per_elem, F_DBL, 0),
    MF(kv_scale_block, F_U32, 0),
    MF(index_scale_block, F_U32, 0),
    {"kv_layout", F_LAYOUT, offsetof(mdl_model, kv_layout_physical), 0},
    MF(phys_kv_entry_bytes, F_DBL, 0),
    MF(phys_swa_entry_bytes, F_DBL, 0),
    MF(phys_index_entry_bytes, F_DBL, 0),
    MF(swa_lifetime_s, F_DBL, 0),
    MF(kv_lifetime_s, F_DBL, 0),
    MF(hc_mult, F_U32, 0),
    MF(engram_params, F_DBL, 0),
    MF(engram_bytes_per_param, F_DBL, 0),
    MF(engram_bytes_per_token, F_DBL, 0),
    MF(aux_params, F_DBL, 0),
    MF(dspark_layers, F_U32, 0),
    MF(dspark_block, F_U32, 0),
    MF(dspark_experts, F_U32, 0),
    MF(dspark_experts_active, F_U32, 0),
    MF(dspark_markov_rank, F_U32, 0),
    MF(dspark_taps, F_U32, 0),
    {"dspark_accept", F_LIST, offsetof(mdl_model, dspark_accept), 0},
};
#undef MF

#define HF(k, t, fl) {#k, t, offsetof(mdl_hardware, k), fl}
#define kernels nkrows
static const field hw_fields[] = {
    HF(name, F_STR, 0),
    HF(bf16_flops, F_DBL, F_REQ | F_POS),
    HF(fp8_flops, F_DBL, 0),
    HF(fp4_flops, F_DBL, 0),
    HF(hbm_bytes, F_DBL, F_REQ | F_POS),
    HF(hbm_Bps, F_DBL, F_REQ | F_POS),
    HF(scaleup_Bps, F_DBL, 0),
    HF(pcie_Bps, F_DBL, 0),
    HF(nic_Bps, F_DBL, 0),
    {"power_w", F_POWER, offsetof(mdl_hardware, power_idle_w), 0},
    HF(scaleup_domain, F_U32, F_POS),
    HF(sms, F_U32, 0),
    HF(kernels, F_KROWS, 0),
};
#undef HF
#undef kernels

#define FF(k, t, fl) {#k, t, offsetof(mdl_fit, k), fl}
#define FE(k, fl) {#k, F_DBL, offsetof(mdl_fit, eff) + offsetof(mdl_efficiency, k), fl}
static const field fit_fields[] = {
    FF(model, F_STR, F_REQ),
    FF(hardware, F_STR, 0),
    FF(backend, F_STR, 0),
    FF(rows, F_U32, 0),
    FF(err_rms, F_DBL, 0),
    FF(err_max, F_DBL, 0),
    FE(compute, F_REQ | F_POS),
    FE(memory, F_REQ | F_POS),
    FE(comm, F_POS),
    FE(step_overhead_ns, 0),
    FE(layer_overhead_ns, 0),
    FE(comm_latency_ns, 0),
    FE(attention, 0),
    FE(comm_overlap, 0),
};
#undef FF
#undef FE
// clang-format on

// ---- the flat reader -------------------------------------------------------------------

// clang-format off
static const char *type_word(ftype t) {
    switch (t) {
    case F_U32: return "a non-negative integer";
    case F_DBL: return "a number";
    case F_STR: return "a string";
    case F_BOOL: return "true or false";
    case F_ATTN: return "gqa, mla, dsa, csa or hca";
    case F_KROWS: return "a list of kernel rows";
    case F_PREC: return "bf16, fp8 or fp4";
    case F_PATTERN: return "layer tokens (swa, csaR, hcaR, reindex, reuse; xN, (...)*N)";
    case F_LIST: return "numbers in [0, 1] separated by spaces";
    case F_LAYOUT: return "logical or physical";
    case F_POWER: return "a mapping {idle: W, peak: W}";
    }
    return "?";
}
// clang-format on

// Smallest physically meaningful value of a positive number (a rate of 1e-300 FLOP/s is a
// typo, and turns step times into overflowing integers).
static double phys_min(const char *key) {
    if (!strcmp(key, "bf16_flops")) return 1e9;                             // 1 GFLOP/s
    if (!strcmp(key, "hbm_bytes") || !strcmp(key, "hbm_Bps")) return 1e6;   // 1 MB, 1 MB/s
    if (!strcmp(key, "compute") || !strcmp(key, "memory") || !strcmp(key, "comm")) return 1e-3;
    return 0;
}
static const char *phys_min_why(const char *key) {
    if (!strcmp(key, "bf16_flops")) return "must be >= 1e9 (FLOP/s)";
    if (!strcmp(key, "hbm_bytes")) return "must be >= 1e6 (bytes)";
    if (!strcmp(key, "hbm_Bps")) return "must be >= 1e6 (bytes/s)";
    return "must be >= 0.001";
}

// ---- per-layer pattern and lists (csa/hca, DSpark) ----------------------------------------

static _Thread_local char why_buf[200];

// One pattern token: swa | csaR | hcaR | reindex | reuse, optionally *N. Appends to m.
static bool pattern_token(const char *t, size_t n, mdl_model *m, const char **why) {
    static const struct {
        const char *w;
        mdl_lkind k;
        bool ratio;
    } kinds[] = {{"swa", MDL_LK_SWA, false},
                 {"csa", MDL_LK_CSA, true},
                 {"hca", MDL_LK_HCA, true},
                 {"reindex", MDL_LK_REINDEX, false},
                 {"reuse", MDL_LK_REUSE, false}};
    char tok[40];
    if (n >= sizeof tok) n = sizeof tok - 1;
    memcpy(tok, t, n);
    tok[n] = 0;
    unsigned long rep = 1, ratio = 0;
    char *star = strchr(tok, '*');
    if (star) {
        char *end;
        rep = strtoul(star + 1, &end, 10);
        if (*end || rep == 0 || rep > MDL_LAYERS_MAX) {
            snprintf(why_buf, sizeof why_buf, "has a bad repeat in '%s'", tok);
            return (*why = why_buf), false;
        }
        *star = 0;
    }
    size_t i = 0;
    for (; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t kl = strlen(kinds[i].w);
        if (strncmp(tok, kinds[i].w, kl)) continue;
        const char *r = tok + kl;
        if (kinds[i].ratio) {
            char *end;
            ratio = strtoul(r, &end, 10);
            if (!*r || *end || ratio == 0 || ratio > 65535) continue;
        } else if (*r) {
            continue;
        }
        break;
    }
    if (i == sizeof kinds / sizeof kinds[0]) {
        snprintf(why_buf, sizeof why_buf,
                 "has an unknown layer token '%s' (swa, csaR, hcaR, reindex, reuse)", tok);
        return (*why = why_buf), false;
    }
    for (unsigned long k = 0; k < rep; k++) {
        if (m->pattern_layers >= MDL_LAYERS_MAX) {
            snprintf(why_buf, sizeof why_buf, "names more than %d layers", MDL_LAYERS_MAX);
            return (*why = why_buf), false;
        }
        m->layer_kind[m->pattern_layers] = (uint8_t)kinds[i].k;
        m->layer_ratio[m->pattern_layers++] = (uint16_t)ratio;
    }
    return true;
}

// "swa*2 (csa4 hca128)*20 csa4": tokens separated by spaces or commas, one level of groups.
static bool parse_pattern(const char *v, mdl_model *m, const char **why) {
    m->pattern_layers = 0;
    const char *p = v;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        if (!*p) break;
        if (*p == '(') {
            const char *close = strchr(p, ')');
            if (!close || close[1] != '*') {
                snprintf(why_buf, sizeof why_buf, "has a group without ')*N'");
                return (*why = why_buf), false;
            }
            char *end;
            unsigned long rep = strtoul(close + 2, &end, 10);
            if (end == close + 2 || rep == 0 || rep > MDL_LAYERS_MAX) {
                snprintf(why_buf, sizeof why_buf, "has a bad group repeat");
                return (*why = why_buf), false;
            }
            for (unsigned long r = 0; r < rep; r++) {
                const char *q = p + 1;
                while (q < close) {
                    while (q < close && (*q == ' ' || *q == ','))
                        q++;
                    const char *e = q;
                    while (e < close && *e != ' ' && *e != ',')
                        e++;
                    if (e > q && !pattern_token(q, (size_t)(e - q), m, why)) return false;
                    q = e;
                }
            }
            p = end;
            continue;
        }
        const char *e = p;
        while (*e && *e != ' ' && *e != ',' && *e != '\t')
            e++;
        if (!pattern_token(p, (size_t)(e - p), m, why)) return false;
        p = e;
    }
    if (!m->pattern_layers) return (*why = "names no layers"), false;
    return true;
}

// "0.9 0.8 0.7": acceptance probabilities, each in [0, 1].
static bool parse_accept(const char *v, mdl_model *m, const char **why) {
    m->dspark_naccept = 0;
    const char *p = v;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p) break;
        char *end;
        errno = 0;
        double d = strtod(p, &end);
        if (end == p || errno || !(d >= 0 && d <= 1))
            return (*why = "must be numbers in [0, 1]"), false;
        if (m->dspark_naccept == MDL_ACCEPT_MAX) return (*why = "has more than 16 entries"), false;
        m->dspark_accept[m->dspark_naccept++] = d;
        p = end;
    }
    if (!m->dspark_naccept) return (*why = "is empty"), false;
    return true;
}

// Parses one scalar into the field. Returns false with *why set on failure.
static bool parse_value(const field *f, const char *v, void *obj, const char **why) {
    char *p = (char *)obj + f->off;
    char *end = NULL;
    *why = NULL;
    switch (f->type) {
    case F_U32: {
        if (!*v) return false;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (*end || errno) {
            // "1e3" style or garbage: accept an exact integral number, reject the rest.
            double d = strtod(v, &end);
            if (*end || !isfinite(d) || d != floor(d)) return false;
            if (d < 0) return (*why = "must not be negative"), false;
            if (d > 4294967295.0) return (*why = "is too large"), false;
            x = (long long)d;
        }
        if (x < 0) return (*why = "must not be negative"), false;
        if (x > 4294967295LL) return (*why = "is too large"), false;
        if ((f->flags & F_POS) && x == 0) return (*why = "must be positive"), false;
        *(uint32_t *)p = (uint32_t)x;
        return true;
    }
    case F_DBL: {
        if (!*v) return false;
        errno = 0;
        double d = strtod(v, &end);
        if (*end || !isfinite(d)) return false;
        if (d < 0) return (*why = "must not be negative"), false;
        if ((f->flags & F_POS) && d == 0) return (*why = "must be positive"), false;
        if (d > 1e30) return (*why = "is too large (over 1e30)"), false;
        if ((f->flags & F_POS) && d < phys_min(f->key)) return (*why = phys_min_why(f->key)), false;
        *(double *)p = d;
        return true;
    }
    case F_STR:
        if (!*v || strlen(v) >= MDL_NAME_MAX) return (*why = "must be 1 to 63 characters"), false;
        strcpy(p, v);
        return true;
    case F_BOOL:
        if (kvf_streq(v, "true") || kvf_streq(v, "yes") || kvf_streq(v, "1")) {
            *(bool *)p = true;
            return true;
        }
        if (kvf_streq(v, "false") || kvf_streq(v, "no") || kvf_streq(v, "0")) {
            *(bool *)p = false;
            return true;
        }
        return false;
    case F_KROWS:
    case F_POWER:
        return false;
    case F_PREC: {
        mdl_prec pr;
        if (!mdl_prec_parse(v, &pr)) return false;
        *(mdl_prec *)p = pr;
        return true;
    }
    case F_LAYOUT:
        if (!kvf_streq(v, "logical") && !kvf_streq(v, "physical")) return false;
        *(bool *)p = kvf_streq(v, "physical");
        return true;
    case F_PATTERN:
        return parse_pattern(v, (mdl_model *)obj, why);
    case F_LIST:
        return parse_accept(v, (mdl_model *)obj, why);
    case F_ATTN:
        if (kvf_streq(v, "gqa") || kvf_streq(v, "mha")) {
            *(mdl_attn *)p = MDL_ATTN_GQA;
            return true;
        }
        if (kvf_streq(v, "mla")) {
            *(mdl_attn *)p = MDL_ATTN_MLA;
            return true;
        }
        if (kvf_streq(v, "dsa")) {
            *(mdl_attn *)p = MDL_ATTN_DSA;
            return true;
        }
        if (kvf_streq(v, "csa") || kvf_streq(v, "hca")) {
            *(mdl_attn *)p = v[0] == 'c' ? MDL_ATTN_CSA : MDL_ATTN_HCA;
            return true;
        }
        return false;
    }
    return false;
}

// ---- kernel tables ---------------------------------------------------------------------

static const char *const kkind_names[MDL_K_KINDS] = {
    "gemm_fp8",   "gemm_bf16",   "grouped_fp8",  "decode_attn", "prefill_attn", "ep_dispatch",
    "ep_combine", "allreduce",   "grouped_bf16", "decode_gqa",  "prefill_gqa",  "moe_bf16",
    "moe_fp8",    "moe_routing", "moe_permute",  "decode_mla",  "prefill_mla"};

const char *mdl_kkind_name(mdl_kkind k) {
    return k < MDL_K_KINDS ? kkind_names[k] : "?";
}

// Columns a row of each kind needs (besides kind, source and its figures).
static const char *const kneeds[MDL_K_KINDS] = {"m n k tflops",
                                                "m n k tflops",
                                                "groups m n k tflops",
                                                "attention head_dim GBps tflops",
                                                "attention head_dim seqlen tflops",
                                                "mode ep tokens GBps",
                                                "mode ep tokens GBps",
                                                "gpus bytes GBps",
                                                "groups m n k tflops",
                                                "heads kv_heads head_dim kv_bytes batch context us",
                                                "heads kv_heads head_dim batch seqlen tflops",
                                                "experts topk hidden inter tp ep tokens tflops",
                                                "experts topk hidden inter tp ep tokens tflops",
                                                "experts topk tokens us",
                                                "hidden topk tokens us",
                                                "heads kv_bytes batch context us",
                                                "heads batch seqlen tflops"};

// Index of source string val in h->sources, added when new.
static int source_intern(mdl_hardware *h, const char *val) {
    for (uint32_t i = 0; i < h->nsources; i++)
        if (kvf_streq(h->sources[i], val)) return (int)i;
    if (h->nsources == MDL_KSRCS_MAX) return -1;
    snprintf(h->sources[h->nsources], MDL_KSRC_MAX, "%s", val);
    return (int)h->nsources++;
}

// One numeric column of a kernel row (`kernels.KEY: val`), positive.
static kvf_status krow_number(const char *path, int kl, const char *key, const char *val,
                              mdl_krow *r, kvf_err *err) {
    static const struct {
        const char *k;
        size_t off;
    } nums[] = {{"m", offsetof(mdl_krow, m)},
                {"n", offsetof(mdl_krow, n)},
                {"k", offsetof(mdl_krow, k)},
                {"groups", offsetof(mdl_krow, groups)},
                {"head_dim", offsetof(mdl_krow, head_dim)},
                {"seqlen", offsetof(mdl_krow, seqlen)},
                {"ep", offsetof(mdl_krow, ep)},
                {"tokens", offsetof(mdl_krow, tokens)},
                {"gpus", offsetof(mdl_krow, gpus)},
                {"bytes", offsetof(mdl_krow, bytes)},
                {"heads", offsetof(mdl_krow, heads)},
                {"kv_heads", offsetof(mdl_krow, kv_heads)},
                {"batch", offsetof(mdl_krow, batch)},
                {"context", offsetof(mdl_krow, context)},
                {"experts", offsetof(mdl_krow, experts)},
                {"topk", offsetof(mdl_krow, topk)},
                {"hidden", offsetof(mdl_krow, hidden)},
                {"inter", offsetof(mdl_krow, inter)},
                {"tp", offsetof(mdl_krow, tp)},
                {"kv_bytes", offsetof(mdl_krow, kv_bytes)},
                {"tflops", offsetof(mdl_krow, tflops)},
                {"GBps", offsetof(mdl_krow, GBps)},
                {"us", offsetof(mdl_krow, us)}};
    size_t i = 0;
    while (i < sizeof nums / sizeof nums[0] && !kvf_streq(nums[i].k, key))
        i++;
    if (i == sizeof nums / sizeof nums[0])
        return kvf_fail(err, KVF_EPARSE, "%s:%d: unknown key 'kernels.%s'", path, kl, key);
    char *end;
    errno = 0;
    double d = strtod(val, &end);
    if (!*val || *end || errno || !isfinite(d))
        return kvf_fail(err, KVF_EPARSE, "%s:%d: key 'kernels.%s': expected a number, got '%s'",
                        path, kl, key, val);
    if (!(d > 0))
        return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'kernels.%s' must be positive (got '%s')",
                        path, kl, key, val);
    *(double *)((char *)r + nums[i].off) = d;
    return KVF_OK;
}

static kvf_status krow_parse(const char *path, yaml_document_t *doc, yaml_node_t *row,
                             mdl_hardware *h, mdl_krow *r, kvf_err *err) {
    int line = (int)row->start_mark.line + 1;
    memset(r, 0, sizeof *r);
    r->line = line;
    r->kind = MDL_K_KINDS;
    bool have_source = false;
    if (row->type != YAML_MAPPING_NODE)
        return kvf_fail(err, KVF_EPARSE, "%s:%d: key 'kernels': each row must be a mapping", path,
                        line);
    char have[400] = " ";
    for (yaml_node_pair_t *pr = row->data.mapping.pairs.start; pr < row->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = yaml_document_get_node(doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(doc, pr->value);
        int kl = (int)k->start_mark.line + 1;
        if (k->type != YAML_SCALAR_NODE || v->type != YAML_SCALAR_NODE)
            return kvf_fail(err, KVF_EPARSE, "%s:%d: key 'kernels': row values must be scalars",
                            path, kl);
        const char *key = (const char *)k->data.scalar.value;
        const char *val = (const char *)v->data.scalar.value;
        char tok[40];
        snprintf(tok, sizeof tok, " %s ", key);
        if (strstr(have, tok))
            return kvf_fail(err, KVF_EPARSE, "%s:%d: key 'kernels.%s' repeated in one row", path,
                            kl, key);
        if (strlen(have) + strlen(key) + 2 < sizeof have) {
            strcat(have, key);
            strcat(have, " ");
        }
        if (kvf_streq(key, "kind")) {
            for (int i = 0; i < MDL_K_KINDS; i++)
                if (kvf_streq(val, kkind_names[i])) r->kind = (mdl_kkind)i;
            if (r->kind == MDL_K_KINDS) {
                char all[400] = "";
                for (int i = 0; i < MDL_K_KINDS; i++)
                    snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", i ? ", " : "",
                             kkind_names[i]);
                return kvf_fail(err, KVF_EPARSE,
                                "%s:%d: key 'kernels.kind': unknown kind '%s' (allowed: %s)", path,
                                kl, val, all);
            }
        } else if (kvf_streq(key, "source")) {
            if (strlen(val) < 8 || strlen(val) >= MDL_KSRC_MAX)
                return kvf_fail(err, KVF_EINVAL,
                                "%s:%d: key 'kernels.source' must name the repository, file and "
                                "commit or the paper and table (8 to %d characters)",
                                path, kl, MDL_KSRC_MAX - 1);
            int si = source_intern(h, val);
            if (si < 0)
                return kvf_fail(err, KVF_EINVAL,
                                "%s:%d: key 'kernels.source': more than %d distinct sources in "
                                "one file",
                                path, kl, MDL_KSRCS_MAX);
            r->src = (uint16_t)si;
            have_source = true;
        } else if (kvf_streq(key, "attention")) {
            if (kvf_streq(val, "gqa"))
                r->attention = MDL_ATTN_GQA;
            else if (kvf_streq(val, "mla"))
                r->attention = MDL_ATTN_MLA;
            else if (kvf_streq(val, "dsa"))
                r->attention = MDL_ATTN_DSA;
            else
                return kvf_fail(
                    err, KVF_EPARSE,
                    "%s:%d: key 'kernels.attention': expected gqa, mla or dsa, got '%s'", path, kl,
                    val);
        } else if (kvf_streq(key, "routing")) {
            if (kvf_streq(val, "power_law"))
                r->routing = MDL_ROUTE_POWER_LAW;
            else if (!kvf_streq(val, "balanced"))
                return kvf_fail(
                    err, KVF_EPARSE,
                    "%s:%d: key 'kernels.routing': expected balanced or power_law, got '%s'", path,
                    kl, val);
        } else if (kvf_streq(key, "mode")) {
            if (kvf_streq(val, "low_latency"))
                r->low_latency = true;
            else if (!kvf_streq(val, "normal"))
                return kvf_fail(
                    err, KVF_EPARSE,
                    "%s:%d: key 'kernels.mode': expected low_latency or normal, got '%s'", path, kl,
                    val);
        } else {
            kvf_status st = krow_number(path, kl, key, val, r, err);
            if (st) return st;
        }
    }
    if (r->kind == MDL_K_KINDS)
        return kvf_fail(err, KVF_EPARSE, "%s:%d: key 'kernels': row without 'kind'", path, line);
    bool moe = r->kind == MDL_K_MOE_BF16 || r->kind == MDL_K_MOE_FP8;
    if (strstr(have, " mode ")) {
        if (moe)
            r->a2a = r->low_latency ? MDL_A2A_LOW_LATENCY : MDL_A2A_NORMAL;
        else if (r->kind != MDL_K_EP_DISPATCH && r->kind != MDL_K_EP_COMBINE)
            return kvf_fail(err, KVF_EPARSE,
                            "%s:%d: key 'kernels.mode' applies to ep_dispatch, ep_combine, "
                            "moe_bf16 and moe_fp8 rows only",
                            path, line);
        r->low_latency = r->low_latency && !moe;
    }
    if (strstr(have, " routing ") && !moe)
        return kvf_fail(err, KVF_EPARSE,
                        "%s:%d: key 'kernels.routing' applies to moe_bf16 and moe_fp8 rows only",
                        path, line);
    if (!have_source)
        return kvf_fail(err, KVF_EPARSE,
                        "%s:%d: key 'kernels.source' missing: every row names "
                        "where its figures come from",
                        path, line);
    // the columns this kind needs
    char need[64];
    snprintf(need, sizeof need, "%s", kneeds[r->kind]);
    for (char *t = strtok(need, " "); t; t = strtok(NULL, " ")) {
        char tok[40];
        snprintf(tok, sizeof tok, " %s ", t);
        if (!strstr(have, tok))
            return kvf_fail(err, KVF_EPARSE, "%s:%d: key 'kernels.%s' missing (a %s row needs %s)",
                            path, line, t, kkind_names[r->kind], kneeds[r->kind]);
    }
    return KVF_OK;
}

static kvf_status krows_parse(const char *path, yaml_document_t *doc, yaml_node_t *seq,
                              mdl_hardware *h, kvf_err *err) {
    int line = (int)seq->start_mark.line + 1;
    if (seq->type != YAML_SEQUENCE_NODE)
        return kvf_fail(err, KVF_EPARSE, "%s:%d: key 'kernels': expected a list of rows", path,
                        line);
    h->nkrows = 0;
    h->nsources = 0;
    h->indexed = false;
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *row = yaml_document_get_node(doc, *it);
        if (h->nkrows == MDL_KROWS_MAX)
            return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'kernels': more than %d rows", path,
                            (int)row->start_mark.line + 1, MDL_KROWS_MAX);
        kvf_status st = krow_parse(path, doc, row, h, &h->krows[h->nkrows], err);
        if (st) return st;
        h->nkrows++;
    }
    return KVF_OK;
}

// `power_w: {idle: W, peak: W}` into p[0] (idle) and p[1] (peak). The scalar form of older
// files is refused: one figure cannot say both.
_Static_assert(offsetof(mdl_hardware, power_peak_w) ==
                   offsetof(mdl_hardware, power_idle_w) + sizeof(double),
               "power_peak_w follows power_idle_w");
static kvf_status power_parse(const char *path, yaml_document_t *doc, yaml_node_t *v, double *p,
                              kvf_err *err) {
    int line = (int)v->start_mark.line + 1;
    if (v->type != YAML_MAPPING_NODE)
        return kvf_fail(err, KVF_EPARSE,
                        "%s:%d: key 'power_w': expected a mapping {idle: W, peak: W} (board "
                        "power idle and at full load); the scalar form is not read",
                        path, line);
    int seen[2] = {0, 0};
    for (yaml_node_pair_t *pr = v->data.mapping.pairs.start; pr < v->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(doc, pr->key);
        yaml_node_t *x = yaml_document_get_node(doc, pr->value);
        int kl = (int)k->start_mark.line + 1;
        const char *key = k->type == YAML_SCALAR_NODE ? (const char *)k->data.scalar.value : "";
        int i = kvf_streq(key, "idle") ? 0 : kvf_streq(key, "peak") ? 1 : -1;
        if (i < 0)
            return kvf_fail(err, KVF_EPARSE, "%s:%d: unknown key 'power_w.%s' (idle, peak)", path,
                            kl, key);
        if (seen[i])
            return kvf_fail(err, KVF_EPARSE, "%s:%d: key 'power_w.%s' repeated", path, kl, key);
        seen[i] = kl;
        const char *val = x->type == YAML_SCALAR_NODE ? (const char *)x->data.scalar.value : "";
        char *end;
        errno = 0;
        double d = strtod(val, &end);
        if (!*val || *end || errno || !isfinite(d))
            return kvf_fail(err, KVF_EPARSE,
                            "%s:%d: key 'power_w.%s': expected a number of W, "
                            "got '%s'",
                            path, kl, key, val);
        if (!(d > 0) || d > 1e6)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: key 'power_w.%s' must be in (0, 1e6] W "
                            "(got '%s')",
                            path, kl, key, val);
        p[i] = d;
    }
    for (int i = 0; i < 2; i++)
        if (!seen[i])
            return kvf_fail(err, KVF_EPARSE, "%s:%d: key 'power_w.%s' missing", path, line,
                            i ? "peak" : "idle");
    if (p[0] > p[1])
        return kvf_fail(err, KVF_EINVAL,
                        "%s:%d: key 'power_w.idle' (%g W) is above "
                        "'power_w.peak' (%g W)",
                        path, seen[0], p[0], p[1]);
    return KVF_OK;
}

// Reads path as a flat mapping into obj through the field table. seen[i] records the line
// of key i (0 = absent). *map_line gets the line of the mapping. Required keys are checked.
static kvf_status read_flat(const char *path, const field *fields, size_t nf, void *obj, int *seen,
                            int *map_line, kvf_err *err) {
    char *text = NULL;
    size_t len = 0;
    kvf_status rst = kvf_read_file(path, &text, &len, err);
    if (rst) return rst;
    if ((rst = mdl_yaml_guard(path, text, len, err))) {
        free(text);
        return rst;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    kvf_status st = KVF_OK;
    bool have_doc = false;
    memset(seen, 0, nf * sizeof *seen);
    if (!yaml_parser_initialize(&parser)) {
        free(text);
        return kvf_fail(err, KVF_ENOMEM, "%s: cannot create a YAML parser", path);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        st = kvf_fail(err, KVF_EPARSE, "%s:%d: YAML syntax error: %s", path,
                      (int)parser.problem_mark.line + 1,
                      parser.problem ? parser.problem : "unknown");
        goto done;
    }
    have_doc = true;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        st = kvf_fail(err, KVF_EPARSE, "%s:1: empty file", path);
        goto done;
    }
    *map_line = (int)root->start_mark.line + 1;
    if (root->type != YAML_MAPPING_NODE) {
        st = kvf_fail(err, KVF_EPARSE, "%s:%d: expected a mapping of `key: value` lines", path,
                      *map_line);
        goto done;
    }
    for (yaml_node_pair_t *pr = root->data.mapping.pairs.start; pr < root->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = yaml_document_get_node(&doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
        int line = (int)k->start_mark.line + 1;
        if (k->type != YAML_SCALAR_NODE) {
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: keys must be plain names", path, line);
            goto done;
        }
        const char *key = (const char *)k->data.scalar.value;
        size_t i = 0;
        while (i < nf && !kvf_streq(fields[i].key, key))
            i++;
        if (i == nf) {
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: unknown key '%s'", path, line, key);
            goto done;
        }
        if (seen[i]) {
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: key '%s' repeated (first on line %d)", path,
                          line, key, seen[i]);
            goto done;
        }
        seen[i] = line;
        if (fields[i].type == F_KROWS) {
            if ((st = krows_parse(path, &doc, v, obj, err))) goto done;
            continue;
        }
        if (fields[i].type == F_POWER) {
            if ((st = power_parse(path, &doc, v, (double *)((char *)obj + fields[i].off), err)))
                goto done;
            continue;
        }
        if (v->type != YAML_SCALAR_NODE) {
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: key '%s': expected %s, not a nested value", path,
                          (int)v->start_mark.line + 1, key, type_word(fields[i].type));
            goto done;
        }
        const char *why = NULL;
        if (!parse_value(&fields[i], (const char *)v->data.scalar.value, obj, &why)) {
            int vline = (int)v->start_mark.line + 1;
            if (why)
                st = kvf_fail(err, KVF_EINVAL, "%s:%d: key '%s' %s (got '%s')", path, vline, key,
                              why, (const char *)v->data.scalar.value);
            else
                st =
                    kvf_fail(err, KVF_EPARSE, "%s:%d: key '%s': expected %s, got '%s'", path, vline,
                             key, type_word(fields[i].type), (const char *)v->data.scalar.value);
            goto done;
        }
    }
    for (size_t i = 0; i < nf; i++)
        if ((fields[i].flags & F_REQ) && !seen[i]) {
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: missing required key '%s'", path, *map_line,
                          fields[i].key);
            goto done;
        }
done:
    if (have_doc) yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(text);
    return st;
}

static int seen_line(const field *fields, size_t nf, const int *seen, const char *key) {
    for (size_t i = 0; i < nf; i++)
        if (kvf_streq(fields[i].key, key)) return seen[i];
    return 0;
}

// Resolves a name or path. A bare name becomes <dir>/<sub><name>.yaml where dir is models_dir,
// or "models" when that file exists under the current directory, else the source tree's.
static void resolve(char *out, size_t n, const char *name, const char *models_dir,
                    const char *sub) {
    if (strchr(name, '/') || kvf_endswith(name, ".yaml") || kvf_endswith(name, ".yml")) {
        snprintf(out, n, "%s", name);
        return;
    }
    if (models_dir) {
        snprintf(out, n, "%s/%s%s.yaml", models_dir, sub, name);
        return;
    }
    snprintf(out, n, "models/%s%s.yaml", sub, name);
    FILE *f = fopen(out, "rb");
    if (f) {
        fclose(f);
        return;
    }
#ifdef KVF_SOURCE_DIR
    snprintf(out, n, "%s/models/%s%s.yaml", KVF_SOURCE_DIR, sub, name);
#endif
}

// The file name without directory and extension, for files that omit `name:`.
static void stem(char *out, const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strcspn(b, ".");
    if (n >= MDL_NAME_MAX) n = MDL_NAME_MAX - 1;
    memcpy(out, b, n);
    out[n] = 0;
}

// ---- models ----------------------------------------------------------------------------

// ---- precision ---------------------------------------------------------------------------

double mdl_prec_bytes(mdl_prec p) {
    return p == MDL_PREC_BF16 ? 2 : p == MDL_PREC_FP8 ? 1 : p == MDL_PREC_FP4 ? 0.5 : 0;
}

mdl_prec mdl_prec_of_bytes(double bytes) {
    KVF_ASSERT(bytes > 0);
    return bytes >= 2 ? MDL_PREC_BF16 : bytes >= 1 ? MDL_PREC_FP8 : MDL_PREC_FP4;
}

const char *mdl_prec_name(mdl_prec p) {
    static const char *const n[] = {"auto", "bf16", "fp8", "fp4"};
    return (unsigned)p < 4 ? n[p] : "?";
}

bool mdl_prec_parse(const char *s, mdl_prec *out) {
    for (int i = 0; i < 4; i++)
        if (s && kvf_streq(s, mdl_prec_name((mdl_prec)i))) {
            *out = (mdl_prec)i;
            return true;
        }
    return false;
}

mdl_prec mdl_model_gemm_precision(const mdl_model *m, double weight_bytes) {
    KVF_ASSERT(m && weight_bytes > 0);
    mdl_prec w = mdl_prec_of_bytes(weight_bytes);
    mdl_prec a = m->act_precision;
    if (a == MDL_PREC_AUTO) a = m->weight_bytes_per_param <= 1 ? MDL_PREC_FP8 : MDL_PREC_BF16;
    return w < a ? w : a;   // enum order: bf16 < fp8 < fp4, the wider has the smaller value
}

double mdl_hw_peak(const mdl_hardware *hw, mdl_prec p) {
    KVF_ASSERT(hw && hw->bf16_flops > 0);
    if (p == MDL_PREC_FP4 && hw->fp4_flops > 0) return hw->fp4_flops;
    if ((p == MDL_PREC_FP4 || p == MDL_PREC_FP8) && hw->fp8_flops > 0) return hw->fp8_flops;
    return hw->bf16_flops;
}

void mdl_model_apply_precision(mdl_model *m, mdl_prec weights, mdl_prec kv, mdl_prec act) {
    KVF_ASSERT(m && m->layers > 0);
    if (weights != MDL_PREC_AUTO) {
        m->weight_bytes_per_param = mdl_prec_bytes(weights);
        m->expert_weight_bytes_per_param = 0;   // experts as the rest
    }
    if (kv != MDL_PREC_AUTO) {
        m->kv_bytes_per_elem = mdl_prec_bytes(kv);
        m->swa_bytes_per_elem = 0;   // windows: max(kv, 1 byte)
    }
    if (act != MDL_PREC_AUTO) m->act_precision = act;
    mdl_model_derive(m);
}

// ---- models ----------------------------------------------------------------------------

// Entry bytes of `dim` elements at `bpe` bytes, plus one scale byte per `block` elements when
// the elements are sub-byte (FP4 needs block scales; FP8 and wider are counted without).
static double entry_bytes(double dim, double bpe, uint32_t block) {
    return dim * bpe + (bpe < 1 && block ? ceil(dim / block) : 0);
}

// Attention parameters of layer l of a csa/hca model: q (low rank), the one shared KV head,
// the grouped low-rank output projection, attention sinks; owners add their compressor
// (wkv + wgate when pooling, ratio > 1; twice as wide when windows overlap), indexers their
// query projection and head weights, csa owners with index_compressor the index compressor.
static double compressed_layer_attn(const mdl_model *m, uint32_t l) {
    double h = m->hidden, hd = m->head_dim, nh = m->heads, q = m->q_lora_rank;
    double ih = m->index_heads, id = m->index_head_dim, r = m->layer_ratio[l];
    mdl_lkind k = (mdl_lkind)m->layer_kind[l];
    double a = q ? h * q + q + q * nh * hd : h * nh * hd;
    a += h * hd + hd;
    a += m->o_lora_rank ? nh * hd * m->o_lora_rank + (double)m->o_groups * m->o_lora_rank * h
                        : nh * hd * h;
    a += nh;
    bool owner = k == MDL_LK_CSA || k == MDL_LK_HCA;
    double coff = k == MDL_LK_CSA ? m->compress_overlap : 1, mats = r > 1 ? 2 : 1;
    if (owner) a += h * hd * mats * coff + (r > 1 ? r * coff * hd : 0);
    if (k == MDL_LK_CSA || k == MDL_LK_REINDEX) a += (q ? q : h) * ih * id + h * ih;
    if (k == MDL_LK_CSA && m->index_compressor) a += h * id * mats * coff;
    return a;
}

// csa/hca: the per-layer sums (attention parameters, bounded share, KV entries, classes).
static void derive_compressed(mdl_model *m, double norms, double router, double ffn_dense,
                              double *attn_total) {
    uint32_t last_owner = 0;
    for (uint32_t l = 0; l < m->layers; l++)
        if (m->layer_kind[l] == MDL_LK_CSA || m->layer_kind[l] == MDL_LK_HCA) last_owner = l;
    m->replay_start_layer = m->layers;
    if (m->encoder_layers && m->decoder_replay_tokens)
        m->replay_start_layer = KVF_MAX(m->encoder_layers, last_owner + 1);
    double phys = m->kv_layout_physical;
    double swa_bpe =
        m->swa_bytes_per_elem > 0 ? m->swa_bytes_per_elem : KVF_MAX(m->kv_bytes_per_elem, 1.0);
    double ibpe = m->index_bytes_per_elem > 0 ? m->index_bytes_per_elem : m->kv_bytes_per_elem;
    m->kv_entry_bytes = phys ? m->phys_kv_entry_bytes
                             : entry_bytes(m->head_dim, m->kv_bytes_per_elem, m->kv_scale_block);
    m->swa_entry_bytes =
        phys ? m->phys_swa_entry_bytes : entry_bytes(m->head_dim, swa_bpe, m->kv_scale_block);
    m->index_entry_bytes = phys ? m->phys_index_entry_bytes
                                : entry_bytes(m->index_head_dim, ibpe, m->index_scale_block);
    double global = 0, state = 0, attn = 0, bdense = 0;
    m->bounded_moe_layers = 0;
    m->nlclass = 0;
    for (uint32_t l = 0; l < m->layers; l++) {
        mdl_lkind k = (mdl_lkind)m->layer_kind[l];
        double r = m->layer_ratio[l], a = compressed_layer_attn(m, l);
        attn += a;
        bool moe = m->experts && l >= m->dense_layers, bounded = l >= m->replay_start_layer;
        if (bounded) {
            bdense += a + norms + (moe ? router : ffn_dense);
            m->bounded_moe_layers += moe;
        }
        if (k == MDL_LK_CSA || k == MDL_LK_HCA) {
            bool csa = k == MDL_LK_CSA;
            double coff = csa ? m->compress_overlap : 1;
            global += (m->kv_entry_bytes + (csa ? m->index_entry_bytes : 0)) / r;
            if (r > 1) {
                state += 2 * r * coff * m->head_dim * 4;
                if (csa && m->index_compressor) state += 2 * r * coff * m->index_head_dim * 4;
            }
        }
        bool capped = m->candidate_caps_scoring && m->candidate_blocks &&
                      m->candidate_block_tokens && l > m->candidate_source_layer &&
                      (k == MDL_LK_CSA || k == MDL_LK_REINDEX);
        uint32_t c = 0;
        while (c < m->nlclass &&
               !(m->lclass[c].kind == k && m->lclass[c].ratio == r &&
                 m->lclass[c].bounded == bounded && m->lclass[c].pool_capped == capped))
            c++;
        KVF_ASSERT(c < MDL_LCLASS_MAX);
        if (c == m->nlclass)
            m->lclass[m->nlclass++] = (mdl_lclass){(uint8_t)k, bounded, capped, (uint16_t)r, 0};
        m->lclass[c].count++;
    }
    m->bounded_dense_params = bdense;
    m->swa_state_bytes = state;
    m->window_layers = m->layers;
    m->kv_bytes_per_token_full = global;
    m->kv_bytes_per_token_window = m->layers * m->swa_entry_bytes;
    m->kv_bytes_per_token = global + m->kv_bytes_per_token_window;
    m->kv_bytes_per_token_layer = m->kv_entry_bytes;
    m->index_bytes_per_token_layer = m->index_entry_bytes;
    *attn_total = attn;
}

void mdl_model_derive(mdl_model *m) {
    KVF_ASSERT(m && m->layers > 0 && m->heads > 0 && m->hidden > 0);
    KVF_ASSERT(m->weight_bytes_per_param > 0 && m->kv_bytes_per_elem > 0);
    double h = m->hidden, hd = m->head_dim, nh = m->heads, nkv = m->kv_heads;
    double attn;
    bool latent = m->attention == MDL_ATTN_MLA || m->attention == MDL_ATTN_DSA;
    bool comp = mdl_attn_compressed(m->attention);
    if (latent) {
        // q: hidden -> q_lora (+norm) -> heads*(nope+rope); kv: hidden -> kv_lora+rope (+norm)
        // -> heads*(nope + v); o: heads*v -> hidden. nope = v = head_dim.
        double qk = hd + m->rope_dim;
        double q = m->q_lora_rank ? h * m->q_lora_rank + m->q_lora_rank + m->q_lora_rank * nh * qk
                                  : h * nh * qk;
        double kv = h * (m->kv_lora_rank + m->rope_dim) + m->kv_lora_rank +
                    (double)m->kv_lora_rank * nh * 2.0 * hd;
        attn = q + kv + nh * hd * h;
        if (m->attention == MDL_ATTN_DSA) {
            // Lightning indexer: wq_b (q_lora -> index heads x dim), wk (hidden -> dim) with
            // its LayerNorm (weight + bias), weights_proj (hidden -> index heads).
            double ih = m->index_heads, id = m->index_head_dim;
            double qin = m->q_lora_rank ? m->q_lora_rank : h;
            attn += qin * ih * id + h * id + 2.0 * id + h * ih;
        }
    } else {
        attn = h * nh * hd + 2.0 * h * nkv * hd + nh * hd * h;
    }
    double norms = 2.0 * h;   // two RMSNorms per block
    if (comp && m->hc_mult > 1) {
        // mHC: per block two mappings, hc*h -> hc^2 + 2 hc coefficients (+ bias)
        double hc = m->hc_mult, nco = hc * hc + 2 * hc;
        norms += 2.0 * (hc * h * nco + nco);
    }
    m->moe_layers = m->experts ? m->layers - m->dense_layers : 0;
    double dense_l = m->layers - m->moe_layers;
    double ffn_dense = 3.0 * h * m->ffn;
    m->expert_params = 3.0 * h * m->expert_ffn;
    double router = m->experts ? h * m->experts : 0;
    double moe_all = (m->experts + m->shared_experts) * m->expert_params + router;
    double moe_act = (m->experts_active + m->shared_experts) * m->expert_params + router;
    m->embedding_params = (double)m->vocab * h;
    double head = m->embedding_params;   // output projection
    double attn_layers = m->layers * (attn + norms);
    if (comp) {
        double total;
        derive_compressed(m, norms, router, ffn_dense, &total);
        attn_layers = total + m->layers * norms;
    }
    double blocks_common = attn_layers + dense_l * ffn_dense + h;   // + final norm
    double experts_total = m->moe_layers * (m->experts + m->shared_experts) * m->expert_params;
    m->params = blocks_common + m->moe_layers * moe_all + m->embedding_params +
                (m->tied_embeddings ? 0 : head) + m->vision_params;
    m->active_params = blocks_common + m->moe_layers * moe_act + head;
    if (comp) {
        // Engram tables are memory (a lookup per token), aux GEMMs every token passes
        m->params += m->engram_params + m->aux_params;
        m->active_params += m->aux_params;
        // a prompt token past its chunk's last R skips the bounded layers and the head
        m->active_params_prefill = m->active_params - m->bounded_dense_params -
                                   m->bounded_moe_layers * (moe_act - router) - head;
    } else {
        m->active_params_prefill = m->active_params;
        m->replay_start_layer = m->layers;
    }
    double ebpp = m->expert_weight_bytes_per_param > 0 ? m->expert_weight_bytes_per_param
                                                       : m->weight_bytes_per_param;
    m->expert_weight_bytes = experts_total * ebpp;
    double engram_b =
        m->engram_params *
        (m->engram_bytes_per_param > 0 ? m->engram_bytes_per_param : m->weight_bytes_per_param);
    m->dense_weight_bytes =
        (m->params - experts_total - m->engram_params) * m->weight_bytes_per_param + engram_b;
    m->weight_bytes = m->dense_weight_bytes + m->expert_weight_bytes;
    if (comp) return;
    double per_layer = latent ? (double)(m->kv_lora_rank + m->rope_dim) * m->kv_bytes_per_elem
                              : 2.0 * nkv * hd * m->kv_bytes_per_elem;
    // DSA index keys: index_head_dim FP8 values and one fp32 scale per token and layer
    // (DeepGEMM's fp8_mqa_logits layout: kv [seq, head_dim] e4m3 with a float scale per row).
    m->index_bytes_per_token_layer =
        m->attention == MDL_ATTN_DSA ? (double)m->index_head_dim * 1.0 + 4.0 : 0;
    per_layer += m->index_bytes_per_token_layer;
    m->kv_bytes_per_token_layer = per_layer;
    uint32_t wl = m->window ? m->window_layers : 0;
    m->kv_bytes_per_token_window = wl * per_layer;
    m->kv_bytes_per_token_full = (m->layers - wl) * per_layer;
    m->kv_bytes_per_token = m->layers * per_layer;
}

double mdl_model_kv_bytes_seq(const mdl_model *m, double tokens) {
    KVF_ASSERT(m && tokens >= 0);
    if (!mdl_attn_compressed(m->attention)) return m->kv_bytes_per_token_full * tokens;
    double b = 0;
    for (uint32_t l = 0; l < m->layers; l++) {
        mdl_lkind k = (mdl_lkind)m->layer_kind[l];
        if (k != MDL_LK_CSA && k != MDL_LK_HCA) continue;
        b += floor(tokens / m->layer_ratio[l]) *
             (m->kv_entry_bytes + (k == MDL_LK_CSA ? m->index_entry_bytes : 0));
    }
    return b;
}

double mdl_model_swa_bytes_seq(const mdl_model *m, double tokens) {
    KVF_ASSERT(m && tokens >= 0);
    double w = m->window ? KVF_MIN(tokens, (double)m->window) : tokens;
    if (!mdl_attn_compressed(m->attention)) return m->kv_bytes_per_token_window * w;
    return tokens > 0 ? m->kv_bytes_per_token_window * w + m->swa_state_bytes : 0;
}

double mdl_kv_seq_bytes(const mdl_model *m, double tokens) {
    KVF_ASSERT(m && tokens >= 0);
    if (mdl_attn_compressed(m->attention))
        return mdl_model_kv_bytes_seq(m, tokens) + mdl_model_swa_bytes_seq(m, tokens);
    double w = m->window ? KVF_MIN(tokens, (double)m->window) : tokens;
    return m->kv_bytes_per_token_full * tokens + m->kv_bytes_per_token_window * w;
}

#define LINE(k)                                                                                    \
    (seen_line(model_fields, nf, seen, k) ? seen_line(model_fields, nf, seen, k) : map_line)

// csa/hca: the layer pattern, its owners, the keys that go with it (and none of theirs
// elsewhere). Assigns reindex/reuse layers the ratio of the owner before them.
static kvf_status compressed_check(mdl_model *m, const char *path, const int *seen, int map_line,
                                   kvf_err *err) {
    const size_t nf = sizeof model_fields / sizeof model_fields[0];
    bool comp = mdl_attn_compressed(m->attention);
    if (!comp) {
        static const char *const ck[] = {
            "layer_pattern",         "o_lora_rank",   "encoder_layers",
            "decoder_replay_tokens", "kv_layout",     "candidate_blocks",
            "dspark_layers",         "engram_params", "hc_mult"};
        for (size_t i = 0; i < sizeof ck / sizeof ck[0]; i++)
            if (seen_line(model_fields, nf, seen, ck[i]))
                return kvf_fail(err, KVF_EINVAL,
                                "%s:%d: key '%s' applies to attention: csa or hca only", path,
                                LINE(ck[i]), ck[i]);
        return KVF_OK;
    }
    if (m->pattern_layers != m->layers)
        return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'layer_pattern' names %u layers, layers is %u",
                        path, LINE("layer_pattern"), m->pattern_layers, m->layers);
    if (!m->window)
        return kvf_fail(err, KVF_EINVAL,
                        "%s:%d: key 'window' must be positive for csa/hca (every "
                        "layer keeps a sliding window)",
                        path, LINE("window"));
    if (m->window_layers && m->window_layers != m->layers)
        return kvf_fail(err, KVF_EINVAL,
                        "%s:%d: key 'window_layers' must equal layers (%u) for "
                        "csa/hca",
                        path, LINE("window_layers"), m->layers);
    m->window_layers = m->layers;
    uint16_t ratio = 0;
    bool scores = false;
    for (uint32_t l = 0; l < m->layers; l++) {
        mdl_lkind k = (mdl_lkind)m->layer_kind[l];
        if (k == MDL_LK_CSA || k == MDL_LK_HCA) ratio = m->layer_ratio[l];
        if ((k == MDL_LK_REINDEX || k == MDL_LK_REUSE) && !ratio)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: key 'layer_pattern': layer %u (%s) has no "
                            "earlier csa/hca layer owning the compressed KV",
                            path, LINE("layer_pattern"), l,
                            k == MDL_LK_REUSE ? "reuse" : "reindex");
        if (k == MDL_LK_REINDEX || k == MDL_LK_REUSE) m->layer_ratio[l] = ratio;
        scores |= k == MDL_LK_CSA || k == MDL_LK_REINDEX;
    }
    uint32_t rr[2];
    uint32_t nr = 0;
    for (uint32_t l = 0; l < m->layers; l++) {
        mdl_lkind k = (mdl_lkind)m->layer_kind[l];
        if (k == MDL_LK_SWA || k == MDL_LK_HCA) continue;
        bool have = false;
        for (uint32_t i = 0; i < nr; i++)
            have |= rr[i] == m->layer_ratio[l];
        if (have) continue;
        if (nr == 2)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: key 'layer_pattern': sparse layers at more "
                            "than 2 compression ratios",
                            path, LINE("layer_pattern"));
        rr[nr++] = m->layer_ratio[l];
    }
    static const char *const ikeys[] = {"index_heads", "index_head_dim", "index_topk"};
    uint32_t iv[] = {m->index_heads, m->index_head_dim, m->index_topk};
    for (int i = 0; i < 3 && scores; i++)
        if (!iv[i])
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: key '%s' must be positive: layer_pattern "
                            "has csa or reindex layers",
                            path, LINE(ikeys[i]), ikeys[i]);
    if (m->o_lora_rank && (!m->o_groups || m->heads % m->o_groups))
        return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'o_groups' must divide heads (%u)", path,
                        LINE("o_groups"), m->heads);
    if (m->encoder_layers > m->layers)
        return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'encoder_layers' exceeds layers (%u)", path,
                        LINE("encoder_layers"), m->layers);
    if (m->candidate_blocks && (m->candidate_source_layer >= m->layers ||
                                (m->layer_kind[m->candidate_source_layer] != MDL_LK_CSA)))
        return kvf_fail(err, KVF_EINVAL,
                        "%s:%d: key 'candidate_source_layer' must name a csa "
                        "layer",
                        path, LINE("candidate_source_layer"));
    if (m->kv_layout_physical) {
        static const char *const pk[] = {"phys_kv_entry_bytes", "phys_swa_entry_bytes",
                                         "phys_index_entry_bytes"};
        double pv[] = {m->phys_kv_entry_bytes, m->phys_swa_entry_bytes, m->phys_index_entry_bytes};
        for (int i = 0; i < 3; i++)
            if (!(pv[i] > 0) && (i < 2 || scores))
                return kvf_fail(err, KVF_EINVAL,
                                "%s:%d: key '%s' must be positive with "
                                "kv_layout: physical",
                                path, LINE(pk[i]), pk[i]);
    }
    if (m->dspark_layers) {
        if (m->dspark_block < 2 || m->dspark_block - 1 > MDL_ACCEPT_MAX)
            return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'dspark_block' must be in 2..%d", path,
                            LINE("dspark_block"), MDL_ACCEPT_MAX + 1);
        if (!m->dspark_naccept || m->dspark_naccept > m->dspark_block - 1)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: key 'dspark_accept' needs 1 to dspark_block "
                            "- 1 (%u) entries",
                            path, LINE("dspark_accept"), m->dspark_block - 1);
    }
    return KVF_OK;
}

static kvf_status model_check(mdl_model *m, const char *path, const int *seen, int map_line,
                              kvf_err *err) {
    const size_t nf = sizeof model_fields / sizeof model_fields[0];
    if (m->heads % m->kv_heads)
        return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'kv_heads' (%u) must divide heads (%u)", path,
                        LINE("kv_heads"), m->kv_heads, m->heads);
    bool latent = m->attention == MDL_ATTN_MLA || m->attention == MDL_ATTN_DSA;
    if (latent && m->kv_lora_rank == 0)
        return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'kv_lora_rank' must be positive for %s", path,
                        LINE("kv_lora_rank"), m->attention == MDL_ATTN_DSA ? "dsa" : "mla");
    kvf_status cst = compressed_check(m, path, seen, map_line, err);
    if (cst) return cst;
    {
        static const char *const ikeys[] = {"index_heads", "index_head_dim", "index_topk"};
        uint32_t iv[] = {m->index_heads, m->index_head_dim, m->index_topk};
        bool comp = mdl_attn_compressed(m->attention);
        for (int i = 0; i < 3; i++) {
            if (m->attention == MDL_ATTN_DSA && iv[i] == 0)
                return kvf_fail(err, KVF_EINVAL, "%s:%d: key '%s' must be positive for dsa", path,
                                LINE(ikeys[i]), ikeys[i]);
            if (m->attention != MDL_ATTN_DSA && !comp && iv[i] != 0)
                return kvf_fail(err, KVF_EINVAL,
                                "%s:%d: key '%s' applies to attention: dsa, csa or hca only", path,
                                LINE(ikeys[i]), ikeys[i]);
        }
    }
    if (m->attention == MDL_ATTN_DSA && m->window)
        return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'window' cannot combine with attention: dsa",
                        path, LINE("window"));
    if (m->experts) {
        if (m->experts_active == 0 || m->experts_active > m->experts)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: key 'experts_active' must be in 1..experts (%u)", path,
                            LINE("experts_active"), m->experts);
        if (m->expert_ffn == 0)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: key 'expert_ffn' must be positive with experts", path,
                            LINE("expert_ffn"));
        if (m->dense_layers > m->layers)
            return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'dense_layers' exceeds layers (%u)", path,
                            LINE("dense_layers"), m->layers);
        if (m->dense_layers && m->ffn == 0)
            return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'ffn' must be positive with dense_layers",
                            path, LINE("ffn"));
    } else {
        if (m->ffn == 0)
            return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'ffn' must be positive for a dense model",
                            path, LINE("ffn"));
        if (m->experts_active || m->shared_experts || m->dense_layers)
            return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'experts' is 0 but expert keys are set",
                            path, LINE("experts"));
    }
    if (m->window_layers > m->layers)
        return kvf_fail(err, KVF_EINVAL, "%s:%d: key 'window_layers' exceeds layers (%u)", path,
                        LINE("window_layers"), m->layers);
    if ((m->window == 0) != (m->window_layers == 0))
        return kvf_fail(err, KVF_EINVAL, "%s:%d: key '%s' needs '%s' too", path,
                        LINE(m->window ? "window" : "window_layers"),
                        m->window ? "window" : "window_layers",
                        m->window ? "window_layers" : "window");
    if (m->vision_params > 0 && m->tokens_per_image == 0)
        return kvf_fail(err, KVF_EINVAL,
                        "%s:%d: key 'tokens_per_image' must be positive with "
                        "vision_params",
                        path, LINE("tokens_per_image"));
    return KVF_OK;
}
#undef LINE

kvf_status mdl_model_load(mdl_model *m, const char *name_or_path, const char *models_dir,
                          kvf_err *err) {
    char path[1024];
    if (!name_or_path || !*name_or_path) return kvf_fail(err, KVF_EINVAL, "model: empty name");
    resolve(path, sizeof path, name_or_path, models_dir, "");
    memset(m, 0, sizeof *m);
    m->attention = MDL_ATTN_GQA;
    m->weight_bytes_per_param = 2;
    m->kv_bytes_per_elem = 2;
    m->compress_overlap = 1;
    enum { NF = sizeof model_fields / sizeof model_fields[0] };
    int seen[NF], map_line = 1;
    kvf_status st = read_flat(path, model_fields, NF, m, seen, &map_line, err);
    if (st == KVF_ENOENT)
        return kvf_fail(err, KVF_ENOENT, "%s: no such model file (model '%s')", path, name_or_path);
    if (st) return st;
    if (!seen_line(model_fields, NF, seen, "name")) stem(m->name, path);
    if (!m->kv_heads) m->kv_heads = m->heads;
    if (!m->head_dim) {
        if (m->hidden % m->heads)
            return kvf_fail(err, KVF_EINVAL,
                            "%s:%d: key 'head_dim' missing and hidden %% heads != 0", path,
                            map_line);
        m->head_dim = m->hidden / m->heads;
    }
    if ((st = model_check(m, path, seen, map_line, err))) return st;
    mdl_model_derive(m);
    return KVF_OK;
}

// ---- hardware --------------------------------------------------------------------------

kvf_status mdl_hardware_load(mdl_hardware *h, const char *name_or_path, const char *models_dir,
                             kvf_err *err) {
    KVF_ASSERT(h);
    char path[1024];
    if (!name_or_path || !*name_or_path) return kvf_fail(err, KVF_EINVAL, "hardware: empty name");
    resolve(path, sizeof path, name_or_path, models_dir, "hardware/");
    memset(h, 0, sizeof *h);
    h->scaleup_domain = 8;
    enum { NF = sizeof hw_fields / sizeof hw_fields[0] };
    int seen[NF], map_line = 1;
    kvf_status st = read_flat(path, hw_fields, NF, h, seen, &map_line, err);
    if (st == KVF_ENOENT)
        return kvf_fail(err, KVF_ENOENT, "%s: no such hardware file (hardware '%s')", path,
                        name_or_path);
    if (st) return st;
    if (!seen_line(hw_fields, NF, seen, "name")) stem(h->name, path);
    snprintf(h->path, sizeof h->path, "%s", path);
    mdl_hardware_index(h);
    return KVF_OK;
}

// ---- efficiency fits -------------------------------------------------------------------

kvf_status mdl_fit_load(mdl_fit *f, const char *path, kvf_err *err) {
    memset(f, 0, sizeof *f);
    mdl_efficiency_default(&f->eff);
    f->eff.layer_overhead_ns = 0;
    enum { NF = sizeof fit_fields / sizeof fit_fields[0] };
    int seen[NF], map_line = 1;
    return read_flat(path, fit_fields, NF, f, seen, &map_line, err);
}

kvf_status mdl_fit_write(const mdl_fit *f, const char *path, kvf_err *err) {
    FILE *fp = fopen(path, "w");
    if (!fp) return kvf_fail(err, KVF_EIO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(fp,
            "# kvfleet roofline efficiency fit (models/README.md): the factors that make the\n"
            "# roofline reproduce this engine profile; apply them to other hardware's peaks.\n"
            "model: %s\n",
            f->model[0] ? f->model : "unknown");
    if (f->hardware[0]) fprintf(fp, "hardware: %s\n", f->hardware);
    if (f->backend[0]) fprintf(fp, "backend: %s\n", f->backend);
    fprintf(fp,
            "rows: %u              # profile rows fitted\n"
            "err_rms: %.6g         # relative RMS error of the fit over those rows\n"
            "err_max: %.6g         # largest relative error\n"
            "compute: %.6g         # achieved / peak FLOP/s\n"
            "memory: %.6g          # achieved / peak memory bandwidth\n"
            "comm: %.6g            # achieved / peak scale-up bandwidth (not fitted)\n"
            "step_overhead_ns: %.6g\n"
            "layer_overhead_ns: %.6g\n"
            "comm_latency_ns: %.6g\n"
            "attention: %.6g       # achieved / peak FLOP/s in attention (0 = as compute)\n"
            "comm_overlap: %.6g    # share of collective time hidden under compute\n",
            f->rows, f->err_rms, f->err_max, f->eff.compute, f->eff.memory,
            f->eff.comm > 0 ? f->eff.comm : 0.7, f->eff.step_overhead_ns, f->eff.layer_overhead_ns,
            f->eff.comm_latency_ns, f->eff.attention, f->eff.comm_overlap);
    if (fclose(fp)) return kvf_fail(err, KVF_EIO, "%s: write failed", path);
    return KVF_OK;
}
