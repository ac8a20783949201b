// engine/eng_model.c -- model descriptions (a tiny reader for the flat `key: value` subset of
// models/*.yaml, since libyaml may be missing on GPU hosts), the weight sizes table, the work
// count of a step, and small machine helpers.
//
// The reader accepts: blank lines, `# comments`, `key: value` with an optional trailing
// comment and optional quotes around the value. Keys the engine does not use are ignored (the
// simulator's loader validates the full set); a used key with a bad value is an error naming
// file:line and key.
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_int.h"

static const struct {
    const char *key;
    size_t off;
} u32_keys[] = {
    {"layers", offsetof(eng_model_desc, layers)},
    {"hidden", offsetof(eng_model_desc, hidden)},
    {"heads", offsetof(eng_model_desc, heads)},
    {"kv_heads", offsetof(eng_model_desc, kv_heads)},
    {"head_dim", offsetof(eng_model_desc, head_dim)},
    {"ffn", offsetof(eng_model_desc, ffn)},
    {"vocab", offsetof(eng_model_desc, vocab)},
    {"experts", offsetof(eng_model_desc, experts)},
    {"experts_active", offsetof(eng_model_desc, experts_active)},
    {"shared_experts", offsetof(eng_model_desc, shared_experts)},
    {"expert_ffn", offsetof(eng_model_desc, expert_ffn)},
    {"dense_layers", offsetof(eng_model_desc, dense_layers)},
    {"window", offsetof(eng_model_desc, window)},
    {"window_layers", offsetof(eng_model_desc, window_layers)},
};

static char *trim(char *s) {
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

// Value text without a trailing comment and surrounding quotes.
static char *clean_value(char *v) {
    v = trim(v);
    if (*v == '"' || *v == '\'') {
        char q = *v++;
        char *end = strchr(v, q);
        if (end) *end = 0;
        return v;
    }
    char *hash = strstr(v, " #");
    if (hash) *hash = 0;
    return trim(v);
}

static bool parse_u32(const char *s, uint32_t *out) {
    if (!*s) return false;
    char *end;
    errno = 0;
    double d = strtod(s, &end);   // accepts 4096, 4.096e3
    if (errno || *trim(end) || d < 0 || d > 4294967295.0 || d != floor(d)) return false;
    *out = (uint32_t)d;
    return true;
}

kvf_status eng_model_desc_parse(eng_model_desc *m, const char *text, const char *path,
                                kvf_err *err) {
    memset(m, 0, sizeof *m);
    m->rope_theta = 10000.0f;
    m->norm_eps = 1e-5f;
    bool seen[sizeof u32_keys / sizeof u32_keys[0]] = {0};
    const char *p = text;
    int line = 0;
    char buf[1024];
    while (*p) {
        line++;
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len >= sizeof buf) return kvf_fail(err, KVF_EPARSE, "%s:%d: line too long", path, line);
        memcpy(buf, p, len);
        buf[len] = 0;
        p = nl ? nl + 1 : p + len;
        char *s = trim(buf);
        if (!*s || *s == '#' || !strcmp(s, "---")) continue;
        char *colon = strchr(s, ':');
        if (!colon || colon == s)
            return kvf_fail(err, KVF_EPARSE, "%s:%d: expected 'key: value', got '%s'", path, line,
                            s);
        *colon = 0;
        char *key = trim(s);
        char *val = clean_value(colon + 1);
        for (char *k = key; *k; k++)
            if (!(isalnum((unsigned char)*k) || *k == '_' || *k == '-'))
                return kvf_fail(err, KVF_EPARSE,
                                "%s:%d: malformed key '%s' (nested YAML is "
                                "not supported: model files are flat)",
                                path, line, key);
        if (!*val)
            return kvf_fail(err, KVF_EPARSE,
                            "%s:%d: key '%s' has no value (model files are "
                            "flat key: value lines)",
                            path, line, key);
        bool done = false;
        for (size_t i = 0; i < sizeof u32_keys / sizeof u32_keys[0]; i++) {
            if (strcmp(key, u32_keys[i].key)) continue;
            uint32_t v;
            if (!parse_u32(val, &v))
                return kvf_fail(err, KVF_EPARSE,
                                "%s:%d: %s: expected a non-negative integer, "
                                "got '%s'",
                                path, line, key, val);
            *(uint32_t *)((char *)m + u32_keys[i].off) = v;
            seen[i] = true;
            done = true;
        }
        if (done) continue;
        if (!strcmp(key, "name")) {
            snprintf(m->name, sizeof m->name, "%s", val);
        } else if (!strcmp(key, "attention")) {
            if (!strcmp(val, "mla") || !strcmp(val, "dsa"))
                return kvf_fail(err, KVF_EINVAL,
                                "%s:%d: attention: %s is not supported by "
                                "the engine yet (gqa only)",
                                path, line, val);
            if (strcmp(val, "gqa"))
                return kvf_fail(err, KVF_EPARSE,
                                "%s:%d: attention: expected gqa or mla, got "
                                "'%s'",
                                path, line, val);
        } else if (!strcmp(key, "rope_theta") || !strcmp(key, "norm_eps")) {
            char *end;
            double d = strtod(val, &end);
            if (*trim(end) || !(d > 0))
                return kvf_fail(err, KVF_EPARSE,
                                "%s:%d: %s: expected a positive number, got "
                                "'%s'",
                                path, line, key, val);
            if (key[0] == 'r')
                m->rope_theta = (float)d;
            else
                m->norm_eps = (float)d;
        }
        // other keys (weight_bytes_per_param, vision_params, ...) are the simulator's
    }
    static const char *required[] = {"layers", "hidden", "heads", "head_dim", "vocab"};
    for (size_t r = 0; r < sizeof required / sizeof required[0]; r++)
        for (size_t i = 0; i < sizeof u32_keys / sizeof u32_keys[0]; i++)
            if (!strcmp(u32_keys[i].key, required[r]) && !seen[i])
                return kvf_fail(err, KVF_EPARSE, "%s: missing required key '%s'", path,
                                required[r]);
    if (!m->name[0]) {
        const char *b = strrchr(path, '/');
        snprintf(m->name, sizeof m->name, "%s", b ? b + 1 : path);
        char *dot = strstr(m->name, ".yaml");
        if (dot) *dot = 0;
    }
    if (!m->kv_heads) m->kv_heads = m->heads;
#define BAD(...) return kvf_fail(err, KVF_EINVAL, __VA_ARGS__)
    if (!m->layers || !m->hidden || !m->heads || !m->head_dim || !m->vocab)
        BAD("%s: layers, hidden, heads, head_dim and vocab must be positive", path);
    if (m->heads % m->kv_heads)
        BAD("%s: heads (%u) must be a multiple of kv_heads (%u)", path, m->heads, m->kv_heads);
    if (m->head_dim % 2) BAD("%s: head_dim (%u) must be even (RoPE)", path, m->head_dim);
    if (m->vocab > (1u << 30)) BAD("%s: vocab (%u) too large", path, m->vocab);
    if (m->experts) {
        if (!m->experts_active || m->experts_active > m->experts)
            BAD("%s: experts_active (%u) must be in 1..experts (%u)", path, m->experts_active,
                m->experts);
        if (!m->expert_ffn) BAD("%s: expert_ffn must be positive when experts > 0", path);
        if (m->dense_layers > m->layers)
            BAD("%s: dense_layers (%u) exceeds layers (%u)", path, m->dense_layers, m->layers);
        if (m->dense_layers && !m->ffn) BAD("%s: ffn must be positive when dense_layers > 0", path);
    } else if (!m->ffn) {
        BAD("%s: ffn must be positive for a dense model", path);
    }
    if (m->window_layers && !m->window)
        BAD("%s: window_layers (%u) set but window is 0", path, m->window_layers);
    if (m->window_layers > m->layers)
        BAD("%s: window_layers (%u) exceeds layers (%u)", path, m->window_layers, m->layers);
#undef BAD
    return KVF_OK;
}

kvf_status eng_model_desc_load(eng_model_desc *m, const char *name_or_path, const char *models_dir,
                               kvf_err *err) {
    char path[4096];
    if (!name_or_path || !*name_or_path) return kvf_fail(err, KVF_EINVAL, "model: empty name");
    if (strchr(name_or_path, '/') || kvf_endswith(name_or_path, ".yaml")) {
        snprintf(path, sizeof path, "%s", name_or_path);
    } else {
        const char *dir = models_dir ? models_dir : getenv("KVF_MODELS_DIR");
        char def[4096];
        if (!dir) {
            const char *src = getenv("KVF_SOURCE_DIR");
#ifdef KVF_SOURCE_DIR
            if (!src) src = KVF_SOURCE_DIR;
#endif
            snprintf(def, sizeof def, "%.4000s/models", src ? src : ".");
            if (access(def, R_OK) != 0) snprintf(def, sizeof def, "models");
            dir = def;
        }
        if ((size_t)snprintf(path, sizeof path, "%.2000s/%.1000s.yaml", dir, name_or_path) >=
            sizeof path)
            return kvf_fail(err, KVF_EINVAL, "model '%s': path too long", name_or_path);
    }
    char *text = NULL;
    size_t len = 0;
    kvf_status st = kvf_read_file(path, &text, &len, err);
    if (st) {
        if (st == KVF_ENOENT) kvf_err_prefix(err, "model '%s'", name_or_path);
        return st;
    }
    st = eng_model_desc_parse(m, text, path, err);
    free(text);
    return st;
}

bool eng_layer_windowed(const eng_model_desc *m, uint32_t layer) {
    if (!m->window || !m->window_layers || layer >= m->layers) return false;
    uint32_t even = (m->layers + 1) / 2;
    if (layer % 2 == 0) return layer / 2 < m->window_layers;
    // more windowed layers than even ones (Gemma-3: 52 of 62): odd layers from the start
    return m->window_layers > even && layer / 2 < m->window_layers - even;
}

bool eng_layer_moe(const eng_model_desc *m, uint32_t layer) {
    return m->experts > 0 && layer >= m->dense_layers;
}

// ---- the sizes table ----------------------------------------------------------------------
void eng_layout_build(eng_layout *lay, const eng_model_desc *m) {
    size_t d = m->hidden, hd = m->head_dim;
    size_t qkv = ((size_t)m->heads + 2 * (size_t)m->kv_heads) * hd;
    size_t off = 0;
    lay->n_layers = m->layers;
    lay->layer = kvf_calloc(m->layers, sizeof *lay->layer);
    lay->embed = off, off += (size_t)m->vocab * d;
    for (uint32_t l = 0; l < m->layers; l++) {
        eng_layer_layout *L = &lay->layer[l];
        L->attn_norm = off, off += d;
        L->wqkv = off, off += qkv * d;
        L->wo = off, off += d * m->heads * hd;
        L->ffn_norm = off, off += d;
        L->w_gu = L->w_down = L->router = L->exp_gu = L->exp_down = L->sh_gu = L->sh_down =
            ENG_NONE;
        if (!eng_layer_moe(m, l)) {
            L->w_gu = off, off += 2 * (size_t)m->ffn * d;
            L->w_down = off, off += d * m->ffn;
        } else {
            size_t E = m->experts, f = m->expert_ffn, S = (size_t)m->shared_experts * f;
            L->router = off, off += E * d;
            L->exp_gu = off, off += E * 2 * f * d;
            L->exp_down = off, off += E * d * f;
            if (S) {
                L->sh_gu = off, off += 2 * S * d;
                L->sh_down = off, off += d * S;
            }
        }
    }
    lay->final_norm = off, off += d;
    lay->lm_head = off, off += (size_t)m->vocab * d;
    lay->total = off;
}

void eng_layout_free(eng_layout *lay) {
    if (!lay) return;
    free(lay->layer);
    lay->layer = NULL;
}

// Tensors in arena order: embed, per layer (up to 11 slots), final norm, lm head. Absent
// slots have n = 0.
enum { SLOTS = 11 };

uint32_t eng_layout_tensors(const eng_layout *lay, const eng_model_desc *m) {
    return 3 + lay->n_layers * SLOTS;
}

void eng_layout_tensor(const eng_layout *lay, const eng_model_desc *m, uint32_t i, size_t *off,
                       size_t *n, uint32_t *kind, uint32_t *cols) {
    size_t d = m->hidden, hd = m->head_dim, V = m->vocab;
    size_t qkv = ((size_t)m->heads + 2 * (size_t)m->kv_heads) * hd;
    size_t E = m->experts, f = m->expert_ffn, S = (size_t)m->shared_experts * f;
    *kind = 0;
    *cols = (uint32_t)d;
    if (i == 0) {
        *off = lay->embed, *n = V * d, *kind = 2;
        return;
    }
    uint32_t last = 1 + lay->n_layers * SLOTS;
    if (i == last) {
        *off = lay->final_norm, *n = d, *kind = 1;
        return;
    }
    if (i == last + 1) {
        *off = lay->lm_head, *n = V * d;
        return;
    }
    const eng_layer_layout *L = &lay->layer[(i - 1) / SLOTS];
    switch ((i - 1) % SLOTS) {
    case 0:
        *off = L->attn_norm, *n = d, *kind = 1;
        break;
    case 1:
        *off = L->wqkv, *n = qkv * d;
        break;
    case 2:
        *off = L->wo, *n = d * m->heads * hd, *cols = (uint32_t)(m->heads * hd);
        break;
    case 3:
        *off = L->ffn_norm, *n = d, *kind = 1;
        break;
    case 4:
        *off = L->w_gu, *n = 2 * (size_t)m->ffn * d;
        break;
    case 5:
        *off = L->w_down, *n = d * m->ffn, *cols = m->ffn;
        break;
    case 6:
        *off = L->router, *n = E * d;
        break;
    case 7:
        *off = L->exp_gu, *n = E * 2 * f * d;
        break;
    case 8:
        *off = L->exp_down, *n = E * d * f, *cols = (uint32_t)f;
        break;
    case 9:
        *off = L->sh_gu, *n = 2 * S * d;
        break;
    default:
        *off = L->sh_down, *n = d * S, *cols = (uint32_t)(S ? S : 1);
        break;
    }
    if (*off == ENG_NONE) *n = 0;
}

// ---- work of a step -----------------------------------------------------------------------
void eng_step_work(const eng_model_desc *m, uint32_t nseq, const uint32_t *new_tokens,
                   const uint32_t *context, double elem_bytes, double *flops, double *bytes) {
    double d = m->hidden, hd = m->head_dim, H = m->heads, KV = m->kv_heads;
    double T = 0;
    for (uint32_t i = 0; i < nseq; i++)
        T += new_tokens[i];
    double attn_params = d * (H + 2 * KV) * hd + d * H * hd;
    double fl = 0, by = 0;
    for (uint32_t l = 0; l < m->layers; l++) {
        fl += 2 * T * attn_params;
        by += attn_params * elem_bytes;
        // attention: QK^T and PV over the keys each query sees
        double keys = 0, kv_read = 0;
        for (uint32_t i = 0; i < nseq; i++) {
            double C = context[i], n = new_tokens[i];
            for (uint32_t t = 0; t < (uint32_t)n; t++) {
                double seen = C + t + 1;
                if (eng_layer_windowed(m, l) && seen > m->window) seen = m->window;
                keys += seen;
            }
            double span = C + n;
            if (eng_layer_windowed(m, l) && span > m->window + n - 1) span = m->window + n - 1;
            kv_read += span;
        }
        fl += 4 * keys * H * hd;
        by += (kv_read + T) * 2 * KV * hd * elem_bytes;   // read K,V once per sequence + write
        if (!eng_layer_moe(m, l)) {
            fl += 2 * T * 3 * d * m->ffn;
            by += 3 * d * m->ffn * elem_bytes;
        } else {
            double f = m->expert_ffn, k = m->experts_active, E = m->experts;
            double S = (double)m->shared_experts * f;
            fl += 2 * T * d * E;   // router
            fl += 2 * T * k * 3 * d * f + 2 * T * 3 * d * S;
            double touched = E * (1 - pow(1 - k / E, T));   // expected distinct experts hit
            by += (d * E + touched * 3 * d * f + 3 * d * S) * elem_bytes;
        }
        by += 2 * T * d * 4 * 4;   // residual stream traffic (fp32)
    }
    fl += 2 * nseq * d * m->vocab;   // LM head, last token per sequence
    by += (double)m->vocab * d * elem_bytes + T * d * elem_bytes;   // head + embedding rows
    *flops = fl;
    *bytes = by;
}

// ---- machine helpers ----------------------------------------------------------------------
double eng_phys_mem_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || psz <= 0) return 8.0 * (1 << 30);
    return (double)pages * (double)psz;
}

void eng_sanitize_id(char *s) {
    char *w = s;
    for (char *r = s; *r; r++) {
        char c = (char)tolower((unsigned char)*r);
        if (!isalnum((unsigned char)c)) c = '-';
        if (c == '-' && (w == s || w[-1] == '-')) continue;
        *w++ = c;
    }
    while (w > s && w[-1] == '-')
        w--;
    *w = 0;
}

void eng_cpu_hardware_id(char *out, size_t cap) {
    char model[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10)) continue;
            char *c = strchr(line, ':');
            if (c) snprintf(model, sizeof model, "%s", trim(c + 1));
            break;
        }
        fclose(f);
    }
    char buf[300];
    snprintf(buf, sizeof buf, "cpu-%s", model);
    eng_sanitize_id(buf);
    snprintf(out, cap, "%s", buf);
}

kvf_status eng_backend_parse(const char *s, eng_backend *out, kvf_err *err) {
    if (kvf_streq(s, "cpu"))
        *out = ENG_BACKEND_CPU;
    else if (kvf_streq(s, "cuda") || kvf_streq(s, "gpu"))
        *out = ENG_BACKEND_CUDA;
    else
        return kvf_fail(err, KVF_EINVAL, "backend: expected cpu or cuda, got '%s'", s ? s : "");
    return KVF_OK;
}

const char *eng_backend_name(eng_backend b) {
    return b == ENG_BACKEND_CUDA ? "cuda" : "cpu";
}
