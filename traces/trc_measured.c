// traces/trc_measured.c -- measured benchmark runs (vLLM result JSON, inference-perf lifecycle
// reports, SGLang bench_serving JSONL) read into one trc_measured, recomputed into summary
// figures, and written out as a kvfleet trace (see trc.h for the contract).
//
// Every input goes through jansson: YAML (inference-perf config.yaml, exp-config.yaml) is
// loaded with libyaml and converted to a jansson tree first, so one set of accessors names the
// field of any error. Python's json module writes NaN, Infinity and -Infinity as bare words,
// which JSON forbids: they are turned into the strings "NaN", "Infinity", "-Infinity" before
// parsing, so a NaN reaches the accessors and is reported with its field, and SGLang's
// request_rate Infinity reads as an unbounded rate.
//
// Line numbers: a field's line is found by searching the file's text, from the run's first
// byte, for the components of its dotted name in turn ("successes", then "latency", ...), so a
// pretty-printed file gets the field's own line and a one-line JSON run its line.
//
// Trace writing without per-request send times redraws arrivals the way the load generator
// drew them (documented in trc.h); results must record the notes, which say so.
#include <ctype.h>
#include <csv.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "trc_int.h"

// ---- names --------------------------------------------------------------------------------
static const char *meas_names[] = {"auto", "vllm", "inference-perf", "sglang"};

const char *trc_measured_format_name(trc_measured_format f) {
    return (unsigned)f < sizeof meas_names / sizeof meas_names[0] ? meas_names[f] : "unknown";
}

bool trc_measured_format_parse(const char *s, trc_measured_format *out) {
    if (!s) return false;
    for (unsigned i = 0; i < sizeof meas_names / sizeof meas_names[0]; i++)
        if (!strcmp(s, meas_names[i])) {
            *out = (trc_measured_format)i;
            return true;
        }
    if (!strcmp(s, "inference_perf") || !strcmp(s, "inferenceperf")) {
        *out = TRC_MEAS_INFERENCE_PERF;
        return true;
    }
    return false;
}

static void stat_nan(trc_measured_stat *s) {
    s->mean = s->p50 = s->p90 = s->p99 = NAN;
}

static void summary_init(trc_measured_summary *s) {
    memset(s, 0, sizeof *s);
    stat_nan(&s->ttft_s);
    stat_nan(&s->itl_s);
    stat_nan(&s->tpot_s);
    stat_nan(&s->e2e_s);
    s->duration_s = s->request_rps = s->input_tok_s = s->output_tok_s = NAN;
    s->input_tokens_mean = s->output_tokens_mean = NAN;
}

void trc_measured_init(trc_measured *m) {
    KVF_ASSERT(m);
    memset(m, 0, sizeof *m);
    summary_init(&m->summary);
    m->config.prefix_caching = -1;
    m->config.request_rate_rps = NAN;
    m->config.burstiness = NAN;
    m->config.client_timeout_s = NAN;
    m->token_times_per_token = NAN;
}

void trc_measured_free(trc_measured *m) {
    if (!m) return;
    free(m->req);
    free(m->itl_s);
    trc_measured_init(m);
}

static void note(trc_measured *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(trc_measured *m, const char *fmt, ...) {
    size_t n = strlen(m->notes);
    if (n + 3 >= sizeof m->notes) return;
    if (n) {
        memcpy(m->notes + n, "; ", 3);
        n += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->notes + n, sizeof m->notes - n, fmt, ap);
    va_end(ap);
}

// Copies src into dst[n], cutting it to fit.
static void scopy(char *dst, size_t n, const char *src) {
    size_t l = strlen(src);
    if (l >= n) l = n - 1;
    memcpy(dst, src, l);
    dst[l] = 0;
}

// ---- text helpers -------------------------------------------------------------------------
// Copy of text[0..n) with bare NaN / Infinity / -Infinity outside strings quoted.
static char *quote_nonfinite(const char *text, size_t n, size_t *out_n) {
    char *o = kvf_malloc(n * 2 + 16);
    size_t k = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        char ch = text[i];
        if (in_str) {
            o[k++] = ch;
            if (ch == '\\' && i + 1 < n)
                o[k++] = text[++i];
            else if (ch == '"')
                in_str = false;
            continue;
        }
        if (ch == '"') {
            in_str = true;
            o[k++] = ch;
            continue;
        }
        const char *w = NULL;
        size_t wl = 0;
        if (!strncmp(text + i, "NaN", 3))
            w = "NaN", wl = 3;
        else if (!strncmp(text + i, "-Infinity", 9))
            w = "-Infinity", wl = 9;
        else if (!strncmp(text + i, "Infinity", 8))
            w = "Infinity", wl = 8;
        if (w && i + wl <= n) {
            o[k++] = '"';
            memcpy(o + k, w, wl);
            k += wl;
            o[k++] = '"';
            i += wl - 1;
            continue;
        }
        o[k++] = ch;
    }
    o[k] = 0;
    *out_n = k;
    return o;
}

static long line_at(const char *text, size_t pos) {
    long line = 1;
    for (size_t i = 0; i < pos && text[i]; i++)
        if (text[i] == '\n') line++;
    return line;
}

// Offset of key (as "key" in JSON or key: in YAML) at or after from; -1 when absent.
static long find_key(const char *text, size_t from, const char *key, size_t kl) {
    const char *p = text + from;
    while ((p = strstr(p, key)) != NULL) {
        bool left = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        const char *q = p + kl;
        bool right = !(isalnum((unsigned char)*q) || *q == '_');
        if (left && right) {
            if (*q == '"') q++;
            while (*q == ' ' || *q == '\t')
                q++;
            if (*q == ':') return (long)(p - text);
        }
        p += kl;
    }
    return -1;
}

// Line of a dotted field ("a.b[3].c") in text from base: the components searched in turn.
static long field_line(const char *text, size_t base, long fallback, const char *field) {
    if (!text) return fallback;
    size_t pos = base;
    bool found = false;
    const char *s = field;
    long skip = 0;   // "[k].key" (an entry of a top-level list): the (k + 1)-th "key"
    if (*s == '[') {
        skip = strtol(s + 1, NULL, 10);
        s += strcspn(s, "]");
        if (*s) s++;
        if (*s == '.') s++;
    }
    while (*s) {
        size_t n = strcspn(s, ".[");
        if (n) {
            char key[96];
            if (n >= sizeof key) n = sizeof key - 1;
            memcpy(key, s, n);
            key[n] = 0;
            long at = find_key(text, pos, key, n);
            while (at >= 0 && skip > 0) {
                at = find_key(text, (size_t)at + n, key, n);
                skip--;
            }
            if (at < 0) break;
            pos = (size_t)at;
            found = true;
        }
        s += n;
        if (*s == '[') s += strcspn(s, "]");
        if (*s) s++;
    }
    return found ? line_at(text, pos) : fallback;
}

// ---- field access with messages -------------------------------------------------------------
typedef struct mctx {
    const char *path;   // file named in messages
    const char *text;   // its text (line lookups), may be NULL
    size_t base;        // offset of the run in text
    long line0;         // line of the run's start
    kvf_err *err;
} mctx;

static int mfail(const mctx *c, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int mfail(const mctx *c, const char *field, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    long line = field_line(c->text, c->base, c->line0, field);
    kvf_fail(c->err, KVF_EPARSE, "%s:%ld: field '%s': %s", c->path, line, field, what);
    return -1;
}

// The value at a dotted path under o (NULL when a component is missing).
static json_t *jpath(json_t *o, const char *path) {
    char buf[256];
    scopy(buf, sizeof buf, path);
    json_t *v = o;
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
        v = json_is_object(v) ? json_object_get(v, tok) : NULL;
    return v;
}

enum { REQ = 1, NONNEG = 2, POS = 4, INF_OK = 8 };

// Number v named field: NAN when missing or null unless REQ; numeric strings (metadata)
// accepted; "NaN" and non-finite values rejected unless INF_OK (then "inf"/"Infinity" give
// INFINITY).
static int num_value(const mctx *c, json_t *v, const char *field, int flags, double *out) {
    *out = NAN;
    if (!v || json_is_null(v)) return flags & REQ ? mfail(c, field, "missing") : 0;
    double d;
    if (json_is_number(v))
        d = json_number_value(v);
    else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!strcmp(s, "NaN") || !strcasecmp(s, "nan")) return mfail(c, field, "NaN");
        if (!strcmp(s, "Infinity") || !strcasecmp(s, "inf")) {
            if (!(flags & INF_OK)) return mfail(c, field, "infinite");
            *out = INFINITY;
            return 0;
        }
        char *end;
        errno = 0;
        d = strtod(s, &end);
        while (*end == ' ')
            end++;
        if (end == s || *end || errno) return mfail(c, field, "not a number ('%.40s')", s);
    } else
        return mfail(c, field, "not a number");
    if (!isfinite(d)) return mfail(c, field, "not finite");
    if ((flags & NONNEG) && d < 0) return mfail(c, field, "negative (%g)", d);
    if ((flags & POS) && !(d > 0)) return mfail(c, field, "must be positive (%g)", d);
    *out = d;
    return 0;
}

// Number at a dotted path under o; prefix + path names it in messages.
static int jnumber(const mctx *c, json_t *o, const char *prefix, const char *path, int flags,
                   double *out) {
    char field[256];
    snprintf(field, sizeof field, "%s%s", prefix, path);
    return num_value(c, jpath(o, path), field, flags, out);
}

// Non-negative integer (a count or token length), < 2^32 unless big.
static int jcount(const mctx *c, json_t *o, const char *prefix, const char *path, int flags,
                  uint64_t *out, bool *present) {
    double d;
    if (jnumber(c, o, prefix, path, flags | NONNEG, &d)) return -1;
    if (present) *present = !isnan(d);
    *out = 0;
    if (isnan(d)) return 0;
    char field[256];
    snprintf(field, sizeof field, "%s%s", prefix, path);
    if (d != floor(d)) return mfail(c, field, "not an integer (%g)", d);
    if (d > 4.0e18) return mfail(c, field, "too large");
    *out = (uint64_t)d;
    return 0;
}

static void jstring(json_t *o, const char *path, char *out, size_t n) {
    json_t *v = jpath(o, path);
    if (v && json_is_string(v) && !out[0]) snprintf(out, n, "%s", json_string_value(v));
}

// An integer setting that may come as a number or a string (metadata); 0 when absent.
static int jsetting(const mctx *c, json_t *o, const char *prefix, const char *path, int *out) {
    uint64_t v;
    bool has;
    if (jcount(c, o, prefix, path, 0, &v, &has)) return -1;
    if (has && !*out) {
        if (v > 100000000) {
            char field[256];
            snprintf(field, sizeof field, "%s%s", prefix, path);
            return mfail(c, field, "out of range (%llu)", (unsigned long long)v);
        }
        *out = (int)v;
    }
    return 0;
}

// true/false/"true"/"on"/1: 1; false-like: 0; absent: -1.
static int jbool(json_t *o, const char *path) {
    json_t *v = jpath(o, path);
    if (!v || json_is_null(v)) return -1;
    if (json_is_boolean(v)) return json_is_true(v);
    if (json_is_integer(v)) return json_integer_value(v) != 0;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!strcasecmp(s, "true") || !strcasecmp(s, "on") || !strcasecmp(s, "yes") ||
            !strcmp(s, "1"))
            return 1;
        if (!strcasecmp(s, "false") || !strcasecmp(s, "off") || !strcasecmp(s, "no") ||
            !strcmp(s, "0"))
            return 0;
    }
    return -1;
}

// ---- files --------------------------------------------------------------------------------
static bool is_dir(const char *p) {
    struct stat st;
    return !stat(p, &st) && S_ISDIR(st.st_mode);
}
static bool is_file(const char *p) {
    struct stat st;
    return !stat(p, &st) && S_ISREG(st.st_mode);
}

// Reads path and quotes bare non-finite words; caller frees.
static kvf_status load_text(const char *path, char **out, size_t *n, kvf_err *err) {
    char *raw;
    size_t len;
    kvf_status st = kvf_read_file(path, &raw, &len, err);
    if (st) return st;
    *out = quote_nonfinite(raw, len, n);
    free(raw);
    return KVF_OK;
}

static json_t *parse_json(const char *path, const char *text, size_t n, size_t *used,
                          kvf_err *err) {
    json_error_t je;
    json_t *o = json_loadb(text, n, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &je);
    if (!o) {
        kvf_fail(err, KVF_EPARSE, "%s:%d: bad JSON at column %d: %s", path, je.line, je.column,
                 je.text);
        return NULL;
    }
    if (used) *used = (size_t)je.position;
    return o;
}

// YAML -> jansson (plain scalars: null, booleans and numbers typed; the rest strings).
static json_t *yaml_node_json(yaml_document_t *d, yaml_node_t *nd, int depth) {
    if (!nd || depth > 64) return json_null();
    switch (nd->type) {
    case YAML_SCALAR_NODE: {
        const char *s = (const char *)nd->data.scalar.value;
        if (nd->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return json_string(s);
        if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
            !strcmp(s, "NULL"))
            return json_null();
        if (!strcmp(s, "true") || !strcmp(s, "True")) return json_true();
        if (!strcmp(s, "false") || !strcmp(s, "False")) return json_false();
        if (!strcmp(s, ".nan") || !strcmp(s, ".NaN")) return json_string("NaN");
        if (!strcmp(s, ".inf") || !strcmp(s, ".Inf")) return json_string("Infinity");
        char *end;
        errno = 0;
        long long k = strtoll(s, &end, 10);
        if (!*end && !errno) return json_integer(k);
        double v = strtod(s, &end);
        if (!*end && !errno && end != s) return json_real(v);
        return json_string(s);
    }
    case YAML_SEQUENCE_NODE: {
        json_t *a = json_array();
        for (yaml_node_item_t *it = nd->data.sequence.items.start; it < nd->data.sequence.items.top;
             it++)
            json_array_append_new(a, yaml_node_json(d, yaml_document_get_node(d, *it), depth + 1));
        return a;
    }
    case YAML_MAPPING_NODE: {
        json_t *o = json_object();
        for (yaml_node_pair_t *p = nd->data.mapping.pairs.start; p < nd->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = yaml_document_get_node(d, p->key);
            if (!k || k->type != YAML_SCALAR_NODE) continue;
            json_object_set_new(o, (const char *)k->data.scalar.value,
                                yaml_node_json(d, yaml_document_get_node(d, p->value), depth + 1));
        }
        return o;
    }
    default:
        return json_null();
    }
}

static kvf_status load_yaml(const char *path, json_t **out, char **text, kvf_err *err) {
    size_t n;
    *out = NULL;
    kvf_status st = kvf_read_file(path, text, &n, err);
    if (st) return st;
    yaml_parser_t p;
    yaml_document_t d;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_string(&p, (const unsigned char *)*text, n);
    if (!yaml_parser_load(&p, &d)) {
        st = kvf_fail(err, KVF_EPARSE, "%s:%zu: bad YAML: %s", path, p.problem_mark.line + 1,
                      p.problem ? p.problem : "syntax error");
        yaml_parser_delete(&p);
        return st;
    }
    yaml_node_t *root = yaml_document_get_root_node(&d);
    json_t *j = root ? yaml_node_json(&d, root, 0) : json_object();
    yaml_document_delete(&d);
    yaml_parser_delete(&p);
    if (!json_is_object(j)) {
        json_decref(j);
        return kvf_fail(err, KVF_EPARSE, "%s:1: bad YAML: not a mapping", path);
    }
    *out = j;
    return KVF_OK;
}

// ---- per-request arrays (vLLM, SGLang) ------------------------------------------------------
static void req_init(trc_measured_req *q) {
    memset(q, 0, sizeof *q);
    q->arrival_s = q->ttft_s = q->itl_mean_s = q->e2e_s = NAN;
}

// Length of array field name, or -1 when absent; error when present but not an array.
static int array_len(const mctx *c, json_t *o, const char *name, long *n) {
    json_t *a = json_object_get(o, name);
    *n = -1;
    if (!a || json_is_null(a)) return 0;
    if (!json_is_array(a)) return mfail(c, name, "not an array");
    *n = (long)json_array_size(a);
    return 0;
}

static int elem_num(const mctx *c, json_t *a, const char *name, long i, int flags, double *out) {
    char field[96];
    snprintf(field, sizeof field, "%s[%ld]", name, i);
    return num_value(c, json_array_get(a, (size_t)i), field, flags, out);
}

// Per-request arrays of a vLLM / SGLang run: input_lens, output_lens, ttfts, itls, errors,
// latencies and start_times when present; all present arrays must have one length.
static int read_arrays(const mctx *c, json_t *o, trc_measured *m) {
    static const char *names[] = {"input_lens", "output_lens", "ttfts",      "itls",
                                  "errors",     "latencies",   "start_times"};
    long len[7], n = -1;
    int first = -1;
    for (int k = 0; k < 7; k++) {
        if (array_len(c, o, names[k], &len[k])) return -1;
        if (len[k] < 0) continue;
        if (n < 0) {
            n = len[k];
            first = k;
        } else if (len[k] != n)
            return mfail(c, names[k], "%ld entries but '%s' has %ld", len[k], names[first], n);
    }
    if (n < 0) return 0;   // summary only
    if (len[2] < 0) return mfail(c, "ttfts", "missing (per-request arrays without it)");
    if (len[0] < 0) return mfail(c, "input_lens", "missing (per-request arrays without it)");
    json_t *ain = json_object_get(o, "input_lens"), *aout = json_object_get(o, "output_lens"),
           *attft = json_object_get(o, "ttfts"), *aitl = json_object_get(o, "itls"),
           *aerr = json_object_get(o, "errors"), *alat = json_object_get(o, "latencies"),
           *ast = json_object_get(o, "start_times");
    if (aout && json_is_null(aout)) aout = NULL;
    if (aitl && json_is_null(aitl)) aitl = NULL;
    if (aerr && json_is_null(aerr)) aerr = NULL;
    if (alat && json_is_null(alat)) alat = NULL;
    if (ast && json_is_null(ast)) ast = NULL;
    m->n_req = (uint64_t)n;
    m->req = kvf_calloc((size_t)n + 1, sizeof *m->req);
    size_t cap_itl = 0;
    double t0 = INFINITY;
    for (long i = 0; i < n; i++) {
        trc_measured_req *q = &m->req[i];
        req_init(q);
        double v;
        if (elem_num(c, ain, "input_lens", i, REQ | NONNEG, &v)) return -1;
        if (v != floor(v) || v > TRC_MAX_TOKENS) {
            char f[64];
            snprintf(f, sizeof f, "input_lens[%ld]", i);
            return mfail(c, f, "not a token count (%g)", v);
        }
        q->input_tokens = (uint32_t)v;
        if (aout) {
            if (elem_num(c, aout, "output_lens", i, REQ | NONNEG, &v)) return -1;
            if (v != floor(v) || v > TRC_MAX_TOKENS) {
                char f[64];
                snprintf(f, sizeof f, "output_lens[%ld]", i);
                return mfail(c, f, "not a token count (%g)", v);
            }
            q->output_tokens = (uint32_t)v;
        }
        bool ok = true;
        if (aerr) {
            json_t *e = json_array_get(aerr, (size_t)i);
            ok = !e || json_is_null(e) || (json_is_string(e) && !json_string_value(e)[0]);
        } else if (aout)
            ok = q->output_tokens > 0;
        q->ok = ok;
        double ttft;
        if (elem_num(c, attft, "ttfts", i, NONNEG, &ttft)) return -1;
        if (ok) q->ttft_s = ttft;
        double sum = 0;
        if (aitl) {
            json_t *g = json_array_get(aitl, (size_t)i);
            char f[64];
            snprintf(f, sizeof f, "itls[%ld]", i);
            if (!g || json_is_null(g))
                g = NULL;
            else if (!json_is_array(g))
                return mfail(c, f, "not an array");
            size_t k = g ? json_array_size(g) : 0;
            if (ok && k) {
                kvf_grow((void **)&m->itl_s, &cap_itl, m->n_itl + k, sizeof *m->itl_s);
                q->itl_first = m->n_itl;
                for (size_t j = 0; j < k; j++) {
                    json_t *x = json_array_get(g, j);
                    if (!json_is_number(x)) {
                        if (json_is_string(x) && !strcmp(json_string_value(x), "NaN"))
                            return mfail(c, f, "entry %zu is NaN", j);
                        return mfail(c, f, "entry %zu is not a number", j);
                    }
                    double d = json_number_value(x);
                    if (!isfinite(d) || d < 0)
                        return mfail(c, f, "entry %zu is negative or not finite (%g)", j, d);
                    m->itl_s[m->n_itl++] = d;
                    sum += d;
                }
                q->n_itl = (uint32_t)k;
                q->itl_mean_s = sum / (double)k;
            }
        }
        if (alat) {
            double lat;
            if (elem_num(c, alat, "latencies", i, NONNEG, &lat)) return -1;
            q->e2e_s = ok ? lat : (lat > 0 ? lat : NAN);
            if (ok && !isnan(lat) && !isnan(q->ttft_s) && q->ttft_s > lat * (1 + 1e-9) + 1e-9) {
                char f[64];
                snprintf(f, sizeof f, "ttfts[%ld]", i);
                return mfail(c, f, "ttft %.6g s exceeds the e2e latency %.6g s (latencies[%ld])",
                             q->ttft_s, lat, i);
            }
        } else if (ok)
            q->e2e_s = q->ttft_s + sum;   // as the tools' own timeline does
        if (ast) {
            if (elem_num(c, ast, "start_times", i, REQ | NONNEG, &v)) return -1;
            q->arrival_s = v;
            if (v < t0) t0 = v;
        }
        if (ok && q->n_itl == 0 && q->output_tokens > 1 && !isnan(q->e2e_s) && !isnan(q->ttft_s))
            q->itl_mean_s = (q->e2e_s - q->ttft_s) / (q->output_tokens - 1);
    }
    if (ast)
        for (long i = 0; i < n; i++)
            m->req[i].arrival_s -= t0;
    return 0;
}

// Summary figures of a vLLM / SGLang run: <stat>_<metric>_ms keys.
static int read_ms_stats(const mctx *c, json_t *o, const char *metric, trc_measured_stat *s) {
    static const char *stat[] = {"mean", "median", "p90", "p99"};
    double v[4];
    for (int k = 0; k < 4; k++) {
        char key[64];
        snprintf(key, sizeof key, "%s_%s_ms", stat[k], metric);
        if (jnumber(c, o, "", key, NONNEG, &v[k])) return -1;
        v[k] /= 1000.0;
    }
    s->mean = v[0], s->p50 = v[1], s->p90 = v[2], s->p99 = v[3];
    return 0;
}

// Percentiles must not decrease (within rounding).
static int check_order(const mctx *c, const char *field, const trc_measured_stat *s) {
    double a[3] = {s->p50, s->p90, s->p99};
    for (int i = 0; i < 2; i++)
        if (!isnan(a[i]) && !isnan(a[i + 1]) && a[i + 1] < a[i] * (1 - 1e-9) - 1e-12)
            return mfail(c, field, "percentiles out of order (p%d %.6g s > p%d %.6g s)",
                         i ? 90 : 50, a[i], i ? 99 : 90, a[i + 1]);
    return 0;
}

static int check_summary(const mctx *c, const trc_measured_summary *s, const char *ttft,
                         const char *e2e) {
    if (check_order(c, ttft, &s->ttft_s) || check_order(c, e2e, &s->e2e_s)) return -1;
    if (!isnan(s->ttft_s.mean) && !isnan(s->e2e_s.mean) &&
        s->ttft_s.mean > s->e2e_s.mean * (1 + 1e-9) + 1e-9)
        return mfail(c, ttft, "mean ttft %.6g s exceeds the mean e2e latency %.6g s",
                     s->ttft_s.mean, s->e2e_s.mean);
    return 0;
}

static int read_bench_json(const mctx *c, json_t *o, trc_measured *m, bool sglang) {
    trc_measured_config *cf = &m->config;
    trc_measured_summary *s = &m->summary;
    jstring(o, "model_id", cf->model, sizeof cf->model);
    jstring(o, "model", cf->model, sizeof cf->model);
    jstring(o, "tokenizer_id", cf->model, sizeof cf->model);
    jstring(o, "backend", cf->backend, sizeof cf->backend);
    jstring(o, "endpoint_type", cf->backend, sizeof cf->backend);
    jstring(o, "date", cf->date, sizeof cf->date);
    // --metadata KEY=VALUE pairs land at the top level as strings
    if (jsetting(c, o, "", "tensor_parallel_size", &cf->tp) || jsetting(c, o, "", "tp", &cf->tp) ||
        jsetting(c, o, "", "max_num_seqs", &cf->max_num_seqs) ||
        jsetting(c, o, "", "max_num_batched_tokens", &cf->max_num_batched_tokens) ||
        jsetting(c, o, "", "max_model_len", &cf->max_model_len))
        return -1;
    int pc = jbool(o, "enable_prefix_caching");
    if (pc < 0) pc = jbool(o, "prefix_caching");
    cf->prefix_caching = pc;
    jstring(o, "hardware", cf->hardware, sizeof cf->hardware);
    jstring(o, "gpu", cf->hardware, sizeof cf->hardware);
    if (jnumber(c, o, "", "request_rate", NONNEG | INF_OK, &cf->request_rate_rps)) return -1;
    if (jnumber(c, o, "", "burstiness", POS | INF_OK, &cf->burstiness)) return -1;
    if (isnan(cf->burstiness)) cf->burstiness = 1.0;
    double mc;
    if (jnumber(c, o, "", "max_concurrency", NONNEG, &mc)) return -1;
    cf->max_concurrency = isnan(mc) ? 0 : (int)mc;
    cf->client_timeout_s = 6 * 3600.0;
    cf->ignore_eos = jbool(o, "ignore_eos") == 1;
    note(m, "client timeout 6 h (the tool's aiohttp session)");
    uint64_t completed;
    bool has_failed;
    uint64_t failed;
    if (jcount(c, o, "", "completed", REQ, &completed, NULL)) return -1;
    if (jcount(c, o, "", "failed", 0, &failed, &has_failed)) return -1;
    if (jnumber(c, o, "", "duration", REQ | POS, &s->duration_s)) return -1;
    double tin, tout;
    if (jnumber(c, o, "", "total_input_tokens", NONNEG, &tin) ||
        jnumber(c, o, "", "total_output_tokens", NONNEG, &tout) ||
        jnumber(c, o, "", "request_throughput", NONNEG, &s->request_rps) ||
        jnumber(c, o, "", "output_throughput", NONNEG, &s->output_tok_s))
        return -1;
    if (sglang && jnumber(c, o, "", "input_throughput", NONNEG, &s->input_tok_s)) return -1;
    if (isnan(s->input_tok_s) && !isnan(tin)) s->input_tok_s = tin / s->duration_s;
    if (isnan(s->request_rps)) s->request_rps = (double)completed / s->duration_s;
    s->completed = completed;
    if (completed) {
        s->input_tokens_mean = tin / (double)completed;
        s->output_tokens_mean = tout / (double)completed;
    }
    if (read_ms_stats(c, o, "ttft", &s->ttft_s) || read_ms_stats(c, o, "tpot", &s->tpot_s) ||
        read_ms_stats(c, o, "itl", &s->itl_s) ||
        read_ms_stats(c, o, sglang ? "e2e_latency" : "e2el", &s->e2e_s))
        return -1;
    if (check_summary(c, s, "mean_ttft_ms", sglang ? "mean_e2e_latency_ms" : "mean_e2el_ms"))
        return -1;
    if (read_arrays(c, o, m)) return -1;
    if (m->n_req) {
        uint64_t ok = 0;
        for (uint64_t i = 0; i < m->n_req; i++)
            ok += m->req[i].ok;
        if (ok != completed)
            return mfail(c, "completed", "%llu, but %llu of the %llu requests succeeded",
                         (unsigned long long)completed, (unsigned long long)ok,
                         (unsigned long long)m->n_req);
        if (has_failed && failed != m->n_req - ok)
            return mfail(c, "failed", "%llu, but %llu of the %llu requests failed",
                         (unsigned long long)failed, (unsigned long long)(m->n_req - ok),
                         (unsigned long long)m->n_req);
        failed = m->n_req - ok;
        if (isnan(m->req[0].arrival_s)) note(m, "no per-request send times (start_times)");
    } else
        note(m, "summary only (no per-request arrays)");
    if (!cf->model[0]) note(m, "model not recorded in the run");
    s->failed = failed;
    return 0;
}

// Splits text into top-level JSON values; reads run `run` (-1 = last) into *out.
static int pick_run(const char *path, const char *text, size_t n, int run, json_t **out,
                    size_t *base, uint32_t *runs, uint32_t *picked, kvf_err *err) {
    size_t pos = 0;
    uint32_t k = 0;
    json_t *keep = NULL;
    size_t keep_at = 0;
    *out = NULL;
    for (;;) {
        while (pos < n && isspace((unsigned char)text[pos]))
            pos++;
        if (pos >= n) break;
        size_t used;
        json_t *o = parse_json(path, text + pos, n - pos, &used, err);
        if (!o) {
            // the message counts lines from this run's start: make it the file's line
            long l0 = line_at(text, pos) - 1;
            char *colon = strchr(err->msg + strlen(path), ':');
            if (colon && l0 > 0) {
                long line = strtol(colon + 1, NULL, 10);
                char rest[900];
                char *after = strchr(colon + 1, ':');
                scopy(rest, sizeof rest, after ? after : "");
                snprintf(err->msg, sizeof err->msg, "%s:%ld%s", path, line + l0, rest);
            }
            json_decref(keep);
            return -1;
        }
        if (!json_is_object(o)) {
            json_decref(o);
            json_decref(keep);
            kvf_fail(err, KVF_EPARSE, "%s:%ld: bad JSON: run is not an object", path,
                     line_at(text, pos));
            return -1;
        }
        if (run < 0 || (uint32_t)run == k) {
            json_decref(keep);
            keep = o;
            keep_at = pos;
            *picked = k;
        } else
            json_decref(o);
        k++;
        pos += used;
    }
    *runs = k;
    if (!k) {
        kvf_fail(err, KVF_EPARSE, "%s:1: empty file (no run)", path);
        return -1;
    }
    if (!keep) {
        kvf_fail(err, KVF_EINVAL, "%s: run %d asked for, the file holds %u", path, run, k);
        return -1;
    }
    *out = keep;
    *base = keep_at;
    return 0;
}

static kvf_status read_bench_file(const char *path, int run, bool sglang, trc_measured *m,
                                  kvf_err *err) {
    char *text;
    size_t n;
    kvf_status st = load_text(path, &text, &n, err);
    if (st) return st;
    json_t *o;
    size_t base;
    if (pick_run(path, text, n, run, &o, &base, &m->runs, &m->run, err)) {
        free(text);
        return err->code ? err->code : KVF_EPARSE;
    }
    mctx c = {path, text, base, line_at(text, base), err};
    int rc = read_bench_json(&c, o, m, sglang);
    json_decref(o);
    free(text);
    if (m->runs > 1) note(m, "run %u of %u in the file", m->run + 1, m->runs);
    return rc ? KVF_EPARSE : KVF_OK;
}

// ---- inference-perf -------------------------------------------------------------------------
static const char *lat_keys[4] = {"time_to_first_token", "inter_token_latency",
                                  "time_per_output_token", "request_latency"};

static int read_stat_obj(const mctx *c, json_t *o, const char *prefix, trc_measured_stat *s) {
    double v[4];
    static const char *k[4] = {"mean", "median", "p90", "p99"};
    for (int i = 0; i < 4; i++) {
        char p[64];
        scopy(p, sizeof p, k[i]);
        if (jnumber(c, o, prefix, p, NONNEG, &v[i])) return -1;
    }
    s->mean = v[0], s->p50 = v[1], s->p90 = v[2], s->p99 = v[3];
    return 0;
}

// One lifecycle report (summary or stage): the figures into *s; load_summary count too.
static int read_lifecycle(const mctx *c, json_t *o, trc_measured_summary *s, uint64_t *sent,
                          trc_measured *m) {
    uint64_t ok, failed;
    if (jcount(c, o, "", "load_summary.count", REQ, sent, NULL)) return -1;
    if (jcount(c, o, "", "successes.count", REQ, &ok, NULL)) return -1;
    if (jcount(c, o, "", "failures.count", REQ, &failed, NULL)) return -1;
    if (ok + failed != *sent)
        return mfail(c, "load_summary.count", "%llu sent, but %llu succeeded and %llu failed",
                     (unsigned long long)*sent, (unsigned long long)ok, (unsigned long long)failed);
    s->completed = ok;
    s->failed = failed;
    trc_measured_stat *dst[4] = {&s->ttft_s, &s->itl_s, &s->tpot_s, &s->e2e_s};
    json_t *lat = jpath(o, "successes.latency");
    if (ok && (!lat || !json_is_object(lat))) return mfail(c, "successes.latency", "missing");
    for (int i = 0; i < 4 && lat; i++) {
        char prefix[96];
        snprintf(prefix, sizeof prefix, "successes.latency.%s.", lat_keys[i]);
        json_t *so = json_object_get(lat, lat_keys[i]);
        if (so && !json_is_null(so) && !json_is_object(so)) {
            prefix[strlen(prefix) - 1] = 0;
            return mfail(c, prefix, "not an object");
        }
        if (so && read_stat_obj(c, so, prefix, dst[i])) return -1;
    }
    double rps, in_s, out_s;
    if (jnumber(c, o, "", "successes.throughput.requests_per_sec", NONNEG, &rps) ||
        jnumber(c, o, "", "successes.throughput.input_tokens_per_sec", NONNEG, &in_s) ||
        jnumber(c, o, "", "successes.throughput.output_tokens_per_sec", NONNEG, &out_s) ||
        jnumber(c, o, "", "successes.prompt_len.mean", NONNEG, &s->input_tokens_mean) ||
        jnumber(c, o, "", "successes.output_len.mean", NONNEG, &s->output_tokens_mean))
        return -1;
    s->request_rps = rps;
    s->input_tok_s = in_s;
    s->output_tok_s = out_s;
    // total_time = max(end) - min(start) of the report's requests; the throughputs divide by it
    s->duration_s = rps > 0 ? (double)ok / rps : NAN;
    if (check_summary(c, s, "successes.latency.time_to_first_token.mean",
                      "successes.latency.request_latency.mean"))
        return -1;
    if (m) {   // the prompt-length distribution, as reported
        json_t *pl = jpath(o, "successes.prompt_len");
        static const char *qk[] = {"min", "p0.1", "p1",  "p5",  "p10",   "p25", "median",
                                   "p75", "p90",  "p95", "p99", "p99.9", "max"};
        static const double qv[] = {0,   0.001, 0.01, 0.05, 0.10,  0.25, 0.5,
                                    .75, 0.90,  0.95, 0.99, 0.999, 1};
        m->n_len_q = 0;
        for (unsigned i = 0; pl && json_is_object(pl) && i < sizeof qk / sizeof qk[0]; i++) {
            json_t *v = json_object_get(pl, qk[i]);
            if (!v || !json_is_number(v)) continue;
            double d = json_number_value(v);
            if (!isfinite(d) || d < 0) {
                char f[96];
                snprintf(f, sizeof f, "successes.prompt_len.%s", qk[i]);
                return mfail(c, f, "negative or not finite");
            }
            m->len_q[m->n_len_q] = qv[i];
            m->len_q_tokens[m->n_len_q++] = d;
        }
    }
    return 0;
}

static int read_ip_config(const mctx *c, json_t *y, trc_measured *m) {
    trc_measured_config *cf = &m->config;
    json_t *stages = jpath(y, "load.stages");
    jstring(y, "server.model_name", cf->model, sizeof cf->model);
    jstring(y, "server.type", cf->backend, sizeof cf->backend);
    cf->ignore_eos = jbool(y, "server.ignore_eos") == 1;
    json_t *lt = jpath(y, "load.type");
    const char *type = lt && json_is_string(lt) ? json_string_value(lt) : "constant";
    if (stages && !json_is_array(stages)) return mfail(c, "load.stages", "not a list");
    size_t ns = stages ? json_array_size(stages) : 0;
    if (ns > TRC_MEAS_MAX_STAGES)
        return mfail(c, "load.stages", "more than %d stages", TRC_MEAS_MAX_STAGES);
    cf->n_stages = (uint32_t)ns;
    for (size_t i = 0; i < ns; i++) {
        json_t *st = json_array_get(stages, i);
        char prefix[48];
        snprintf(prefix, sizeof prefix, "load.stages[%zu].", i);
        double rate, dur;
        if (jnumber(c, st, prefix, "rate", REQ | POS, &rate) ||
            jnumber(c, st, prefix, "duration", REQ | POS, &dur))
            return -1;
        cf->stages[i].rate_rps = rate;
        cf->stages[i].duration_s = dur;
        cf->stages[i].requests = (uint64_t)(rate * dur);   // int(rate * duration) requests
    }
    if (ns == 1) cf->request_rate_rps = cf->stages[0].rate_rps;
    cf->burstiness = 1.0;   // constant and poisson both draw exponential gaps
    if (strcmp(type, "constant") && strcmp(type, "poisson"))
        note(m, "load type %s: arrivals drawn as for constant", type);
    double to;
    if (jnumber(c, y, "", "load.request_timeout", POS, &to)) return -1;
    if (isnan(to)) {
        to = 300;
        note(m, "client timeout 300 s (request_timeout null: aiohttp's default total timeout)");
    }
    cf->client_timeout_s = to;
    double workers, per;
    if (jnumber(c, y, "", "load.num_workers", NONNEG, &workers) ||
        jnumber(c, y, "", "load.worker_max_concurrency", NONNEG, &per))
        return -1;
    if (!isnan(workers) && !isnan(per) && workers * per < 1e9)
        cf->max_concurrency = (int)(workers * per);
    json_t *dt = jpath(y, "data.type");
    if (dt && json_is_string(dt) && !strcmp(json_string_value(dt), "shared_prefix")) {
        uint64_t g, pg, sl, ql, ol;
        const char *pre = "data.shared_prefix.";
        json_t *sp = jpath(y, "data.shared_prefix");
        if (!sp || !json_is_object(sp)) return mfail(c, "data.shared_prefix", "missing");
        if (jcount(c, sp, pre, "num_groups", REQ, &g, NULL) ||
            jcount(c, sp, pre, "num_prompts_per_group", REQ, &pg, NULL) ||
            jcount(c, sp, pre, "system_prompt_len", REQ, &sl, NULL) ||
            jcount(c, sp, pre, "question_len", REQ, &ql, NULL) ||
            jcount(c, sp, pre, "output_len", REQ, &ol, NULL))
            return -1;
        if (!g || !pg || g * pg > 10000000)
            return mfail(c, "data.shared_prefix.num_groups",
                         "groups x prompts must be in [1, 1e7]");
        if (sl > TRC_MAX_TOKENS || ql > TRC_MAX_TOKENS || ol > TRC_MAX_TOKENS || !ol)
            return mfail(c, "data.shared_prefix.output_len", "lengths must be in [1, 1e7]");
        cf->prompt_groups = (uint32_t)g;
        cf->prompts = (uint32_t)(g * pg);
        cf->system_prompt_len = (uint32_t)sl;
        cf->question_len = (uint32_t)ql;
        cf->output_len = (uint32_t)ol;
        if (json_object_get(sp, "enable_multi_turn_chat") == NULL)
            note(m, "shared_prefix: %u prompts (%u groups) sent in turn", cf->prompts,
                 cf->prompt_groups);
    }
    return 0;
}

static int read_exp_config(const mctx *c, json_t *y, trc_measured *m) {
    trc_measured_config *cf = &m->config;
    char model[160] = "";
    jstring(y, "model", model, sizeof model);
    if (model[0]) scopy(cf->model, sizeof cf->model, model);
    if (jsetting(c, y, "", "tensor_parallelism", &cf->tp) ||
        jsetting(c, y, "", "tensor_parallel_size", &cf->tp) ||
        jsetting(c, y, "", "max_num_seqs", &cf->max_num_seqs) ||
        jsetting(c, y, "", "max_num_batched_tokens", &cf->max_num_batched_tokens) ||
        jsetting(c, y, "", "max_model_len", &cf->max_model_len))
        return -1;
    int pc = jbool(y, "enable_prefix_caching");
    if (pc < 0 && jbool(y, "no_enable_prefix_caching") == 1) pc = 0;
    if (pc >= 0) cf->prefix_caching = pc;
    jstring(y, "hardware", cf->hardware, sizeof cf->hardware);
    jstring(y, "gpu", cf->hardware, sizeof cf->hardware);
    return 0;
}

// per_request_lifecycle_metrics.json: [{start_time, end_time, info: {input_tokens,
// output_tokens, output_token_times}, error}, ...]; sorted into send order.
static int cmp_req_arrival(const void *a, const void *b) {
    const trc_measured_req *x = a, *y = b;
    return (x->arrival_s > y->arrival_s) - (x->arrival_s < y->arrival_s);
}

static int read_ip_requests(const char *path, trc_measured *m, kvf_err *err) {
    char *text;
    size_t n;
    kvf_status st = load_text(path, &text, &n, err);
    if (st) return -1;
    json_t *a = parse_json(path, text, n, NULL, err);
    mctx c = {path, text, 0, 1, err};
    int rc = -1;
    if (!a) goto done;
    if (!json_is_array(a)) {
        mfail(&c, "(top level)", "not a list of requests");
        goto done;
    }
    size_t nr = json_array_size(a), cap = 0;
    m->req = kvf_calloc(nr + 1, sizeof *m->req);
    m->n_req = nr;
    double t0 = INFINITY;
    for (size_t i = 0; i < nr; i++) {
        json_t *r = json_array_get(a, i);
        trc_measured_req *q = &m->req[i];
        req_init(q);
        char pre[48];
        snprintf(pre, sizeof pre, "[%zu].", i);
        if (!json_is_object(r)) {
            mfail(&c, pre, "not an object");
            goto done;
        }
        double t_start, t_end, in, out;
        uint64_t u;
        // info.{input_tokens, output_tokens, output_token_times} (2025-26 layout) or
        // info.request_metrics.text.input_tokens, info.response_metrics.{output_tokens,
        // output_token_times} (later releases)
        bool newer = jpath(r, "info.response_metrics") != NULL;
        const char *k_in = jpath(r, "info.input_tokens") || !newer
                               ? "info.input_tokens"
                               : "info.request_metrics.text.input_tokens";
        const char *k_out = newer ? "info.response_metrics.output_tokens" : "info.output_tokens";
        if (jnumber(&c, r, pre, "start_time", REQ | NONNEG, &t_start) ||
            jnumber(&c, r, pre, "end_time", REQ | NONNEG, &t_end) ||
            jcount(&c, r, pre, k_in, 0, &u, NULL))
            goto done;
        in = (double)u;
        if (jcount(&c, r, pre, k_out, 0, &u, NULL)) goto done;
        out = (double)u;
        if (t_end < t_start) {
            char f[48];
            snprintf(f, sizeof f, "[%zu].end_time", i);
            mfail(&c, f, "before start_time (%.6f < %.6f)", t_end, t_start);
            goto done;
        }
        json_t *e = json_object_get(r, "error");
        q->ok = !e || json_is_null(e);
        q->arrival_s = t_start;
        if (t_start < t0) t0 = t_start;
        q->input_tokens = in > TRC_MAX_TOKENS ? (uint32_t)TRC_MAX_TOKENS : (uint32_t)in;
        q->output_tokens =
            q->ok ? (out > TRC_MAX_TOKENS ? (uint32_t)TRC_MAX_TOKENS : (uint32_t)out) : 0;
        q->e2e_s = t_end - t_start;
        json_t *tt = jpath(r, newer ? "info.response_metrics.output_token_times"
                                    : "info.output_token_times");
        size_t k = tt && json_is_array(tt) ? json_array_size(tt) : 0;
        if (q->ok && k > 1) {
            double prev = NAN;
            kvf_grow((void **)&m->itl_s, &cap, m->n_itl + k, sizeof *m->itl_s);
            q->itl_first = m->n_itl;
            for (size_t j = 0; j < k; j++) {
                json_t *x = json_array_get(tt, j);
                double d = json_is_number(x) ? json_number_value(x) : NAN;
                if (!isfinite(d) || d < t_start - 1e-9 || (j && d < prev)) {
                    char f[64];
                    snprintf(f, sizeof f, "[%zu].info.output_token_times", i);
                    mfail(&c, f, "entry %zu is not a time after the previous one", j);
                    goto done;
                }
                if (j == 0)
                    q->ttft_s = d - t_start;
                else
                    m->itl_s[m->n_itl++] = d - prev;
                prev = d;
            }
            q->n_itl = (uint32_t)(k - 1);
            q->itl_mean_s = (prev - (q->ttft_s + t_start)) / (double)(k - 1);
            if (q->ttft_s > q->e2e_s + 1e-9) {
                char f[48];
                snprintf(f, sizeof f, "[%zu].end_time", i);
                mfail(&c, f, "the first token (%.6g s) comes after the end (%.6g s)", q->ttft_s,
                      q->e2e_s);
                goto done;
            }
        }
    }
    for (size_t i = 0; i < nr; i++)
        m->req[i].arrival_s -= t0;
    // itl_first indices follow file order; sorting moves whole records, which keep them
    qsort(m->req, nr, sizeof *m->req, cmp_req_arrival);
    rc = 0;
done:
    json_decref(a);
    free(text);
    return rc;
}

// inference-perf's stage reports (stage_<k>_lifecycle_metrics.json in res): each stage's sent
// count, rate and window, and its start (the previous stage's span + 2 s); without them the
// stages as configured. The stages' counts must add up to the summary's sent.
static kvf_status read_ip_stages(const char *res, const char *summ, uint64_t sent, trc_measured *m,
                                 kvf_err *err) {
    char buf[760];
    char *text = NULL;
    size_t n;
    kvf_status st;
    int rc;
    json_t *o;
    trc_measured_config *cf = &m->config;
    uint64_t stage_sum = 0;
    double start = 0;
    for (uint32_t k = 0; k < TRC_MEAS_MAX_STAGES; k++) {
        snprintf(buf, sizeof buf, "%s/stage_%u_lifecycle_metrics.json", res, k);
        if (!is_file(buf)) break;
        if ((st = load_text(buf, &text, &n, err))) return st;
        o = parse_json(buf, text, n, NULL, err);
        if (!o) {
            free(text);
            return KVF_EPARSE;
        }
        mctx cs = {buf, text, 0, 1, err};
        trc_measured_summary ss;
        summary_init(&ss);
        uint64_t sk;
        double rate, window;
        rc = read_lifecycle(&cs, o, &ss, &sk, NULL);
        if (!rc) rc = jnumber(&cs, o, "", "load_summary.requested_rate", NONNEG, &rate);
        if (!rc) rc = jnumber(&cs, o, "", "load_summary.send_duration", NONNEG, &window);
        json_decref(o);
        free(text);
        if (rc) return KVF_EPARSE;
        if (k >= cf->n_stages) {   // a stage the config does not list: take the report's
            cf->n_stages = k + 1;
            cf->stages[k].rate_rps = rate;
            cf->stages[k].duration_s = window;
        }
        cf->stages[k].requests = sk;
        cf->stages[k].start_s = start;
        // the next stage starts once every request of this one has finished (its span),
        // after load.interval (1 s) and the generator's 1 s lead
        double span = ss.duration_s;
        if (isnan(span)) span = cf->stages[k].duration_s + 300;
        start += span + 2.0;
        stage_sum += sk;
    }
    if (stage_sum && stage_sum != sent) {
        mctx cs = {summ, NULL, 0, 1, err};
        mfail(&cs, "load_summary.count", "%llu, but the stage reports sent %llu",
              (unsigned long long)sent, (unsigned long long)stage_sum);
        return KVF_EPARSE;
    }
    if (!stage_sum) {   // no stage reports: the stages as configured, one after another
        for (uint32_t k = 0; k < cf->n_stages; k++) {
            cf->stages[k].start_s = start;
            start += cf->stages[k].duration_s + 2.0;
            stage_sum += cf->stages[k].requests;
        }
        if (cf->n_stages && stage_sum != sent) {
            mctx cs = {summ, NULL, 0, 1, err};
            mfail(&cs, "load_summary.count", "%llu, but the configured stages send %llu",
                  (unsigned long long)sent, (unsigned long long)stage_sum);
            return KVF_EPARSE;
        }
    }
    return KVF_OK;
}

static kvf_status read_inference_perf(const char *path, trc_measured *m, kvf_err *err) {
    char res[600], summ[700], buf[760];
    if (is_dir(path)) {
        snprintf(buf, sizeof buf, "%s/results/summary_lifecycle_metrics.json", path);
        if (is_file(buf))
            snprintf(res, sizeof res, "%s/results", path);
        else
            scopy(res, sizeof res, path);
    } else {
        scopy(res, sizeof res, path);
        char *sl = strrchr(res, '/');
        if (sl)
            *sl = 0;
        else
            snprintf(res, sizeof res, ".");
    }
    if (is_dir(path))
        snprintf(summ, sizeof summ, "%s/summary_lifecycle_metrics.json", res);
    else
        scopy(summ, sizeof summ, path);
    if (!is_file(summ))
        return kvf_fail(err, KVF_ENOENT, "%s: no summary_lifecycle_metrics.json (inference-perf)",
                        summ);
    scopy(m->path, sizeof m->path, summ);
    char *text = NULL;
    size_t n;
    kvf_status st = load_text(summ, &text, &n, err);
    if (st) return st;
    json_t *o = parse_json(summ, text, n, NULL, err);
    if (!o) {
        free(text);
        return KVF_EPARSE;
    }
    mctx c = {summ, text, 0, 1, err};
    uint64_t sent;
    int rc = json_is_object(o) ? read_lifecycle(&c, o, &m->summary, &sent, m)
                               : mfail(&c, "load_summary", "missing (not a lifecycle report)");
    json_decref(o);
    free(text);
    if (rc) return KVF_EPARSE;
    m->runs = 1;
    // config.yaml beside the reports (the configuration inference-perf really ran with)
    snprintf(buf, sizeof buf, "%s/config.yaml", res);
    if (is_file(buf)) {
        json_t *y;
        if ((st = load_yaml(buf, &y, &text, err))) return st;
        mctx cy = {buf, text, 0, 1, err};
        rc = read_ip_config(&cy, y, m);
        json_decref(y);
        free(text);
        if (rc) return KVF_EPARSE;
    } else
        note(m, "no config.yaml beside the reports");
    // the serving side: exp-config.yaml next to results/ (or in it)
    char exp[700];
    snprintf(exp, sizeof exp, "%s/../exp-config.yaml", res);
    if (!is_file(exp)) snprintf(exp, sizeof exp, "%s/exp-config.yaml", res);
    if (is_file(exp)) {
        json_t *y;
        if ((st = load_yaml(exp, &y, &text, err))) return st;
        mctx cy = {exp, text, 0, 1, err};
        rc = read_exp_config(&cy, y, m);
        json_decref(y);
        free(text);
        if (rc) return KVF_EPARSE;
    }
    trc_measured_config *cf = &m->config;
    if (cf->prefix_caching < 0 && !strcmp(cf->backend, "vllm")) {
        cf->prefix_caching = 1;
        note(m, "prefix caching on (vLLM's default; the run does not turn it off)");
    }
    if ((st = read_ip_stages(res, summ, sent, m, err))) return st;
    const trc_measured_summary *sm = &m->summary;
    if (cf->ignore_eos && cf->output_len && sm->itl_s.mean > 0 &&
        sm->e2e_s.mean > sm->ttft_s.mean) {
        m->token_times_per_token =
            (sm->e2e_s.mean - sm->ttft_s.mean) / cf->output_len / sm->itl_s.mean;
        note(m, "%.2f token times per generated token (ITL mean = per-token time / %.2f)",
             m->token_times_per_token, m->token_times_per_token);
    }
    if (cf->n_stages > 1)
        note(m, "stage starts estimated: previous stage's span + 2 s (inference-perf waits "
                "for a stage's requests, load.interval and a 1 s lead)");
    snprintf(buf, sizeof buf, "%s/per_request_lifecycle_metrics.json", res);
    if (is_file(buf)) {
        if (read_ip_requests(buf, m, err)) return err->code ? err->code : KVF_EPARSE;
        if (m->n_req != sent) {
            mctx cs = {buf, NULL, 0, 1, err};
            mfail(&cs, "(top level)", "%llu requests, but the summary counts %llu",
                  (unsigned long long)m->n_req, (unsigned long long)sent);
            return KVF_EPARSE;
        }
        // stages ran one after another: the first stages[0].requests sends are stage 0, ...
        uint64_t i = 0;
        for (uint32_t k = 0; k < cf->n_stages && i < m->n_req; k++)
            for (uint64_t j = 0; j < cf->stages[k].requests && i < m->n_req; j++)
                m->req[i++].stage = k;
        if (i < m->n_req && cf->n_stages)
            while (i < m->n_req)
                m->req[i++].stage = cf->n_stages - 1;
    } else
        note(m, "no per-request report (per_request_lifecycle_metrics.json)");
    return KVF_OK;
}

// ---- detection and the entry point ----------------------------------------------------------
static kvf_status detect(const char *path, trc_measured_format *out, kvf_err *err) {
    if (is_dir(path)) {
        *out = TRC_MEAS_INFERENCE_PERF;
        return KVF_OK;
    }
    FILE *f = kvf_open_input(path, err);
    if (!f) return err ? err->code : KVF_ENOENT;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (strstr(buf, "\"load_summary\"") || strstr(buf, "\"successes\""))
        *out = TRC_MEAS_INFERENCE_PERF;
    else if (strstr(buf, "\"mean_e2e_latency_ms\"") ||
             strstr(buf, "\"total_output_tokens_retokenized\"") || strstr(buf, "\"accept_length\""))
        *out = TRC_MEAS_SGLANG;
    else if (strstr(buf, "\"mean_e2el_ms\"") || strstr(buf, "\"model_id\"") ||
             strstr(buf, "\"endpoint_type\"") || strstr(buf, "\"mean_ttft_ms\"") ||
             strstr(buf, "\"ttfts\""))
        *out = TRC_MEAS_VLLM;
    else
        return kvf_fail(err, KVF_EPARSE,
                        "%s:1: cannot detect the measured-run format (no 'load_summary', "
                        "'mean_ttft_ms' or 'ttfts'); give the format",
                        path);
    return KVF_OK;
}

kvf_status trc_measured_read(const char *path, trc_measured_format fmt, int run, trc_measured *out,
                             kvf_err *err) {
    KVF_ASSERT(path && out);
    KVF_ASSERT((unsigned)fmt <= TRC_MEAS_SGLANG);
    trc_measured_init(out);
    struct stat sb;
    if (stat(path, &sb)) return kvf_fail(err, KVF_ENOENT, "%s: no such file or folder", path);
    kvf_status st;
    if (fmt == TRC_MEAS_AUTO && (st = detect(path, &fmt, err))) return st;
    out->format = fmt;
    scopy(out->path, sizeof out->path, path);
    switch (fmt) {
    case TRC_MEAS_VLLM:
        st = read_bench_file(path, run, false, out, err);
        break;
    case TRC_MEAS_SGLANG:
        st = read_bench_file(path, run, true, out, err);
        break;
    default:
        if (run > 0)
            st = kvf_fail(err, KVF_EINVAL, "%s: an inference-perf run holds one run", path);
        else
            st = read_inference_perf(path, out, err);
    }
    if (st)
        trc_measured_free(out);
    else
        out->format = fmt;
    return st;
}

// ---- recomputing the summary ----------------------------------------------------------------
static void stat_of(double *v, size_t n, trc_measured_stat *s) {
    if (!n) {
        stat_nan(s);
        return;
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    kvf_sort_doubles(v, n);
    s->mean = sum / (double)n;
    s->p50 = kvf_percentile_sorted(v, n, 50);
    s->p90 = kvf_percentile_sorted(v, n, 90);
    s->p99 = kvf_percentile_sorted(v, n, 99);
}

kvf_status trc_measured_summarize(const trc_measured *m, trc_measured_summary *out, kvf_err *err) {
    KVF_ASSERT(m && out);
    if (!m->n_req)
        return kvf_fail(err, KVF_EINVAL, "%s: the run saved no per-request data", m->path);
    summary_init(out);
    size_t n = (size_t)m->n_req;
    double *ttft = kvf_try_malloc((n + 1) * sizeof *ttft, err);
    double *tpot = kvf_try_malloc((n + 1) * sizeof *tpot, err);
    double *e2e = kvf_try_malloc((n + 1) * sizeof *e2e, err);
    double *itl = kvf_try_malloc((n + m->n_itl + 1) * sizeof *itl, err);
    if (!ttft || !tpot || !e2e || !itl) {
        free(ttft), free(tpot), free(e2e), free(itl);
        return KVF_ENOMEM;
    }
    size_t nt = 0, np = 0, ne = 0, ni = 0;
    double tin = 0, tout = 0;
    for (size_t i = 0; i < n; i++) {
        const trc_measured_req *q = &m->req[i];
        if (!q->ok) {
            out->failed++;
            continue;
        }
        out->completed++;
        tin += q->input_tokens;
        tout += q->output_tokens;
        if (!isnan(q->ttft_s)) ttft[nt++] = q->ttft_s;
        if (!isnan(q->e2e_s)) e2e[ne++] = q->e2e_s;
        if (m->format == TRC_MEAS_INFERENCE_PERF) {
            // inference-perf: (last token - first token) / (token times - 1)
            if (q->n_itl) tpot[np++] = q->itl_mean_s;
        } else if (q->output_tokens > 1 && !isnan(q->e2e_s) && !isnan(q->ttft_s))
            tpot[np++] = (q->e2e_s - q->ttft_s) / (double)(q->output_tokens - 1);
        if (!m->n_itl && !isnan(q->itl_mean_s)) itl[ni++] = q->itl_mean_s;
    }
    if (m->n_itl) {
        memcpy(itl, m->itl_s, m->n_itl * sizeof *itl);
        ni = m->n_itl;
    }
    stat_of(ttft, nt, &out->ttft_s);
    stat_of(tpot, np, &out->tpot_s);
    stat_of(e2e, ne, &out->e2e_s);
    stat_of(itl, ni, &out->itl_s);
    free(ttft), free(tpot), free(e2e), free(itl);
    out->duration_s = m->summary.duration_s;
    if (out->duration_s > 0) {
        out->request_rps = (double)out->completed / out->duration_s;
        out->input_tok_s = tin / out->duration_s;
        out->output_tok_s = tout / out->duration_s;
    }
    if (out->completed) {
        out->input_tokens_mean = tin / (double)out->completed;
        out->output_tokens_mean = tout / (double)out->completed;
    }
    return KVF_OK;
}

// ---- the trace ------------------------------------------------------------------------------
// Prompt length at quantile u of the reported distribution (piecewise linear).
static double len_quantile(const trc_measured *m, double u) {
    if (!m->n_len_q) return 0;
    if (u <= m->len_q[0]) return m->len_q_tokens[0];
    for (uint32_t i = 1; i < m->n_len_q; i++)
        if (u <= m->len_q[i]) {
            double f = (u - m->len_q[i - 1]) / (m->len_q[i] - m->len_q[i - 1]);
            return m->len_q_tokens[i - 1] + f * (m->len_q_tokens[i] - m->len_q_tokens[i - 1]);
        }
    return m->len_q_tokens[m->n_len_q - 1];
}

static uint32_t clamp_tokens(double v) {
    if (!(v >= 1)) return 1;
    if (v > TRC_MAX_TOKENS) return (uint32_t)TRC_MAX_TOKENS;
    return (uint32_t)llround(v);
}

// Block ids of prompt p (chained: equal id at j means equal tokens [0, (j + 1) B)).
static uint32_t prompt_blocks(const trc_measured_config *cf, uint64_t salt, uint32_t p,
                              uint32_t input, uint32_t B, uint64_t **buf, size_t *cap) {
    uint32_t nb = input / B;
    kvf_grow((void **)buf, cap, (size_t)nb + 1, sizeof **buf);
    uint32_t g = p % cf->prompt_groups;
    for (uint32_t j = 0; j < nb; j++) {
        bool shared = (uint64_t)(j + 1) * B <= cf->system_prompt_len;
        uint64_t who = shared ? 1 + (uint64_t)g : 0x100000000ULL + p;
        (*buf)[j] = kvf_hash_combine(kvf_hash_combine(salt, who), j);
    }
    return nb;
}

typedef struct out_req {
    double t;
    uint32_t in, out, prompt;
    uint8_t flags;
    bool has_prompt;
} out_req;

static int cmp_out(const void *a, const void *b) {
    const out_req *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

kvf_status trc_measured_write_trace(const trc_measured *m, const char *path, uint32_t block_tokens,
                                    uint64_t seed, uint64_t *n_written, kvf_err *err) {
    KVF_ASSERT(m && path);
    KVF_ASSERT(block_tokens >= 1);
    const trc_measured_config *cf = &m->config;
    kvf_rng rng;
    kvf_rng_init(&rng, seed, 0x3ea5u);
    uint64_t total = m->n_req;
    if (!total)
        for (uint32_t k = 0; k < cf->n_stages; k++)
            total += cf->stages[k].requests;
    if (!total)
        return kvf_fail(err, KVF_EINVAL,
                        "%s: no requests to write (no per-request data and "
                        "no load stages)",
                        m->path);
    if (total > 100000000ULL)
        return kvf_fail(err, KVF_EINVAL, "%s: %llu requests, at most 1e8", m->path,
                        (unsigned long long)total);
    out_req *r = kvf_try_calloc((size_t)total, sizeof *r, err);
    if (!r) return KVF_ENOMEM;
    double fail_out = cf->output_len                      ? cf->output_len
                      : m->summary.output_tokens_mean > 0 ? m->summary.output_tokens_mean
                                                          : 1;
    if (m->n_req) {
        bool have_t = !isnan(m->req[0].arrival_s);
        double rate = cf->request_rate_rps, shape = cf->burstiness;
        if (!(shape > 0)) shape = 1;
        double t = 0, sum = 0;
        for (uint64_t i = 0; i < total; i++) {
            const trc_measured_req *q = &m->req[i];
            if (have_t)
                r[i].t = q->arrival_s;
            else if (rate > 0 && isfinite(rate)) {
                // vLLM: request i waits the sum of i + 1 gamma(shape, 1 / (rate shape)) gaps,
                // the sum rescaled so the last waits n / rate; SGLang: the first goes at once,
                // then an exponential gap after each
                bool gap = m->format == TRC_MEAS_VLLM || i > 0;
                if (gap)
                    t += isinf(shape) ? 1.0 / rate
                                      : kvf_rng_gamma(&rng, shape, 1.0 / (rate * shape));
                r[i].t = t;
                sum = t;
            } else
                r[i].t = 0;
            r[i].in = q->input_tokens ? q->input_tokens : 1;
            r[i].out = q->ok ? (q->output_tokens ? q->output_tokens : 1) : clamp_tokens(fail_out);
            r[i].flags = q->ok ? 0 : TRC_F_FAILED;
        }
        if (!have_t && m->format == TRC_MEAS_VLLM && sum > 0 && rate > 0 && isfinite(rate)) {
            double f = ((double)total / rate) / sum;
            for (uint64_t i = 0; i < total; i++)
                r[i].t *= f;
        }
        if (cf->prompts) {   // prompts in turn, starting again with each stage
            uint64_t k = 0;
            for (uint64_t i = 0; i < total; i++, k++) {
                if (i && m->req[i].stage != m->req[i - 1].stage) k = 0;
                r[i].prompt = (uint32_t)(k % cf->prompts);
                r[i].has_prompt = true;
            }
        }
    } else {
        // inference-perf without per-request data: every stage sends int(rate x duration)
        // requests at exponential gaps scaled so they fill its window, prompts in turn
        uint64_t i = 0;
        for (uint32_t k = 0; k < cf->n_stages; k++) {
            const trc_measured_stage *st = &cf->stages[k];
            uint64_t nk = st->requests;
            double sum = 0;
            uint64_t i0 = i;
            for (uint64_t j = 0; j < nk; j++) {
                sum += kvf_rng_exp(&rng, 1.0 / st->rate_rps);
                r[i0 + j].t = sum;
            }
            double f = sum > 0 ? st->duration_s / sum : 0;
            for (uint64_t j = 0; j < nk; j++, i++) {
                r[i].t = st->start_s + r[i].t * f;
                uint32_t p = cf->prompts ? (uint32_t)(j % cf->prompts) : 0;
                r[i].prompt = p;
                r[i].has_prompt = cf->prompts > 0;
                double len = m->n_len_q && cf->prompts
                                 ? len_quantile(m, ((double)p + 0.5) / cf->prompts)
                             : cf->prompts ? (double)cf->system_prompt_len + cf->question_len
                                           : m->summary.input_tokens_mean;
                r[i].in = clamp_tokens(len);
                r[i].out =
                    clamp_tokens(cf->output_len ? cf->output_len : m->summary.output_tokens_mean);
            }
        }
        KVF_ASSERT(i == total);
    }
    qsort(r, (size_t)total, sizeof *r, cmp_out);   // stable enough: ties keep no order promise
    trc_writer *w;
    kvf_status st = trc_writer_open(&w, path, block_tokens, err);
    if (st) {
        free(r);
        return st;
    }
    uint64_t salt = kvf_hash_combine(0x6d6561737572ULL, kvf_hash64(seed));
    uint64_t *blocks = NULL;
    size_t capb = 0;
    double t0 = total ? r[0].t : 0;
    for (uint64_t i = 0; i < total && !st; i++) {
        trc_request q;
        memset(&q, 0, sizeof q);
        q.id = i;
        q.arrival_ns = (int64_t)llround((r[i].t - t0) * 1e9);
        q.input_tokens = r[i].in;
        q.output_tokens = r[i].out;
        q.cls = TRC_CLASS_CHATBOT;
        q.flags = r[i].flags;
        q.prev_id = -1;
        if (r[i].has_prompt && cf->prompt_groups) {
            q.n_blocks =
                prompt_blocks(cf, salt, r[i].prompt, q.input_tokens, block_tokens, &blocks, &capb);
            q.blocks = blocks;
        }
        st = trc_writer_put(w, &q, err);
    }
    kvf_status st2 = trc_writer_close(w, st ? NULL : err);
    free(blocks);
    free(r);
    if (!st) st = st2;
    if (!st && n_written) *n_written = total;
    return st;
}

// ---- manifest -------------------------------------------------------------------------------
typedef struct man_ctx {
    const char *path;
    char dirpart[512];
    long line;   // current record (1-based, header = 1)
    int col;
    int idx[7];   // column index of each wanted field, -1 = absent
    trc_measured_entry *rows;
    size_t n, cap;
    trc_measured_entry cur;
    bool bad;
    kvf_err *err;
} man_ctx;

static const char *man_cols[7] = {"experiment", "model",      "hardware", "tp",
                                  "workload",   "overloaded", NULL};

static void man_field(void *s, size_t len, void *data) {
    man_ctx *c = data;
    char v[256];
    snprintf(v, sizeof v, "%.*s", (int)KVF_MIN(len, sizeof v - 1), (const char *)s);
    int col = c->col++;
    if (c->bad) return;
    if (c->line == 1) {
        for (int k = 0; k < 6; k++)
            if (!strcmp(v, man_cols[k])) c->idx[k] = col;
        return;
    }
    for (int k = 0; k < 6; k++) {
        if (c->idx[k] != col) continue;
        trc_measured_entry *e = &c->cur;
        switch (k) {
        case 0:
            scopy(e->experiment, sizeof e->experiment, v);
            break;
        case 1:
            scopy(e->model, sizeof e->model, v);
            break;
        case 2:
            scopy(e->hardware, sizeof e->hardware, v);
            break;
        case 3: {
            uint64_t tp;
            if (!trc_parse_u64(v, &tp) || tp < 1 || tp > 1024) {
                kvf_fail(c->err, KVF_EPARSE, "%s:%ld: field 'tp': not a positive integer ('%s')",
                         c->path, c->line, v);
                c->bad = true;
            } else
                e->tp = (int)tp;
            break;
        }
        case 4:
            scopy(e->workload, sizeof e->workload, v);
            break;
        case 5:
            if (!strcmp(v, "yes") || !strcmp(v, "true"))
                e->overloaded = true;
            else if (!strcmp(v, "no") || !strcmp(v, "false"))
                e->overloaded = false;
            else {
                kvf_fail(c->err, KVF_EPARSE, "%s:%ld: field 'overloaded': not yes/no ('%s')",
                         c->path, c->line, v);
                c->bad = true;
            }
            break;
        }
    }
}

static void man_row(int ch, void *data) {
    man_ctx *c = data;
    (void)ch;
    if (!c->bad && c->line == 1) {
        for (int k = 0; k < 6; k++)
            if (c->idx[k] < 0) {
                kvf_fail(c->err, KVF_EPARSE, "%s:1: field '%s': missing column", c->path,
                         man_cols[k]);
                c->bad = true;
                break;
            }
    } else if (!c->bad) {
        if (!c->cur.experiment[0]) {
            kvf_fail(c->err, KVF_EPARSE, "%s:%ld: field 'experiment': empty", c->path, c->line);
            c->bad = true;
        } else {
            snprintf(c->cur.dir, sizeof c->cur.dir, "%s/%s", c->dirpart, c->cur.experiment);
            kvf_grow((void **)&c->rows, &c->cap, c->n + 1, sizeof *c->rows);
            c->rows[c->n++] = c->cur;
        }
    }
    memset(&c->cur, 0, sizeof c->cur);
    c->col = 0;
    c->line++;
}

kvf_status trc_measured_manifest_read(const char *path, trc_measured_entry **out, size_t *n,
                                      kvf_err *err) {
    KVF_ASSERT(path && out && n);
    *out = NULL;
    *n = 0;
    char *text;
    size_t len;
    kvf_status st = kvf_read_file(path, &text, &len, err);
    if (st) return st;
    man_ctx c;
    memset(&c, 0, sizeof c);
    c.path = path;
    c.line = 1;
    c.err = err;
    for (int k = 0; k < 7; k++)
        c.idx[k] = -1;
    scopy(c.dirpart, sizeof c.dirpart, path);
    char *sl = strrchr(c.dirpart, '/');
    if (sl)
        *sl = 0;
    else
        snprintf(c.dirpart, sizeof c.dirpart, ".");
    struct csv_parser p;
    csv_init(&p, CSV_APPEND_NULL);
    if (csv_parse(&p, text, len, man_field, man_row, &c) != len && !c.bad) {
        kvf_fail(err, KVF_EPARSE, "%s:%ld: bad CSV: %s", path, c.line, csv_strerror(csv_error(&p)));
        c.bad = true;
    }
    csv_fini(&p, man_field, man_row, &c);
    csv_free(&p);
    free(text);
    if (!c.bad && c.n == 0) {
        kvf_fail(err, KVF_EPARSE, "%s:2: no rows", path);
        c.bad = true;
    }
    if (c.bad) {
        free(c.rows);
        return KVF_EPARSE;
    }
    *out = c.rows;
    *n = c.n;
    return KVF_OK;
}
