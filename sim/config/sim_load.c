// sim/config/sim_load.c -- scenario files (design.md §7) into the typed sim_config: loading YAML
// with libyaml's document API and `--set a.b.c=value` overrides. A file and an override take
// the same path: the value is a YAML node (an override's text is parsed as a one-line YAML
// document) applied at a dotted key by apply_node(), which walks mappings down the known
// sections. Keys below `economics.` are handed to reports/ (rpt_econ_config_set) as text.
//
// Relative paths resolve against c->dir: for a file inside a `scenarios/` folder (at any
// depth), the folder holding that `scenarios/`; for any other file, its own folder; for a
// config built in code, the current directory.
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include <yaml.h>

#include "sim.h"
#include "sim_keys.h"
#include "sim_sample.h"

// ---- applying YAML nodes ------------------------------------------------------------------

typedef struct apply_ctx {
    sim_config *c;
    const char *path;   // scenario file; NULL for --set
    yaml_document_t *doc;
    kvf_err *err;
} apply_ctx;

static int node_line(const yaml_node_t *n) {
    return (int)n->start_mark.line + 1;
}

// Formats "FILE:LINE: key 'KEY': what" (file) or "--set KEY: what" (override).
__attribute__((format(printf, 5, 6))) static kvf_status
fail_at(apply_ctx *x, kvf_status code, const char *key, int line, const char *fmt, ...) {
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (x->path) return kvf_fail(x->err, code, "%s:%d: key '%s': %s", x->path, line, key, what);
    return kvf_fail(x->err, code, "--set %s: %s", key, what);
}

static const char *node_kind_name(const yaml_node_t *n) {
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    default:
        return "a scalar";
    }
}

static const char *scalar(const yaml_node_t *n) {
    return (const char *)n->data.scalar.value;
}

static bool is_null(const yaml_node_t *n) {
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *s = scalar(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

bool sim_key_parse_bool(const char *s, bool *out) {
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    for (int i = 0; i < 3; i++) {
        if (!strcasecmp(s, yes[i])) return *out = true, true;
        if (!strcasecmp(s, no[i])) return *out = false, true;
    }
    return false;
}

bool sim_key_parse_number(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v)) return false;
    while (isspace((unsigned char)*end))
        end++;
    if (*end) return false;
    *out = v;
    return true;
}

// "a|b|c" of a NULL-terminated name list.
static void join_names(const char *const *names, char *out, size_t n) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; names[i] && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? "|" : "", names[i]);
}

static int name_index(const char *const *names, const char *s) {
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

// The key table's ranges keep every value inside its target type; the assertion guards the
// conversion itself (a double out of an integer's range is undefined behaviour).
void sim_key_store_num(void *dst, num_type t, double v) {
    static const double lim[][2] = {[NT_DBL] = {-1e308, 1e308},
                                    [NT_I32] = {-2147483648.0, 2147483647.0},
                                    [NT_U32] = {0, 4294967295.0},
                                    [NT_I64] = {-9.2e18, 9.2e18}};
    KVF_ASSERT(v >= lim[t][0] && v <= lim[t][1]);
    switch (t) {
    case NT_DBL:
        *(double *)dst = v;
        break;
    case NT_I32:
        *(int32_t *)dst = (int32_t)llround(v);
        break;
    case NT_U32:
        *(uint32_t *)dst = (uint32_t)llround(v);
        break;
    case NT_I64:
        *(int64_t *)dst = (int64_t)llround(v);
        break;
    }
}

static kvf_status apply_schedule(apply_ctx *x, const char *key, const yaml_node_t *n, int line) {
    sim_config *c = x->c;
    if (is_null(n)) {
        c->cluster.n_schedule = 0;
        return KVF_OK;
    }
    if (n->type != YAML_SEQUENCE_NODE)
        return fail_at(x, KVF_EPARSE, key, line,
                       "expects null or a list of {from_h, prefill, decode}, got %s",
                       node_kind_name(n));
    int32_t count = 0;
    sim_schedule_entry tmp[SIM_SCHEDULE_MAX];
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        const yaml_node_t *e = yaml_document_get_node(x->doc, *it);
        if (e->type != YAML_MAPPING_NODE)
            return fail_at(x, KVF_EPARSE, key, node_line(e),
                           "entry %d expects a mapping {from_h, prefill, decode}, got %s", count,
                           node_kind_name(e));
        if (count >= SIM_SCHEDULE_MAX)
            return fail_at(x, KVF_EINVAL, key, node_line(e), "more than %d entries",
                           SIM_SCHEDULE_MAX);
        sim_schedule_entry s = {.from_h = -1, .prefill = -1, .decode = -1};
        for (yaml_node_pair_t *p = e->data.mapping.pairs.start; p < e->data.mapping.pairs.top;
             p++) {
            const yaml_node_t *k = yaml_document_get_node(x->doc, p->key);
            const yaml_node_t *v = yaml_document_get_node(x->doc, p->value);
            char full[SIM_KEY_MAX + 32];
            const char *kn = k->type == YAML_SCALAR_NODE ? scalar(k) : "?";
            snprintf(full, sizeof full, "%s[%d].%s", key, count, kn);
            bool is_h = !strcmp(kn, "from_h"), is_p = !strcmp(kn, "prefill"),
                 is_d = !strcmp(kn, "decode");
            if (!is_h && !is_p && !is_d)
                return fail_at(x, KVF_EPARSE, full, node_line(k),
                               "unknown key (expected from_h, prefill, decode)");
            for (yaml_node_pair_t *q = e->data.mapping.pairs.start; q < p; q++) {
                const yaml_node_t *k2 = yaml_document_get_node(x->doc, q->key);
                if (k2->type == YAML_SCALAR_NODE && !strcmp(scalar(k2), kn))
                    return fail_at(x, KVF_EPARSE, full, node_line(k),
                                   "duplicate key (first at line %d)", node_line(k2));
            }
            double d;
            if (v->type != YAML_SCALAR_NODE || !sim_key_parse_number(scalar(v), &d))
                return fail_at(x, KVF_EPARSE, full, node_line(v), "expects a number, got %s%s%s",
                               v->type == YAML_SCALAR_NODE ? "'" : "",
                               v->type == YAML_SCALAR_NODE ? scalar(v) : node_kind_name(v),
                               v->type == YAML_SCALAR_NODE ? "'" : "");
            if (is_h) {
                if (d < 0 || d >= 24)
                    return fail_at(x, KVF_EINVAL, full, node_line(v), "must be in [0, 24), got %g",
                                   d);
                s.from_h = d;
            } else {
                if (d < 0 || d != floor(d) || d > 1e6)
                    return fail_at(x, KVF_EINVAL, full, node_line(v),
                                   "must be a whole number >= 0, got %g", d);
                if (is_p)
                    s.prefill = (int32_t)d;
                else
                    s.decode = (int32_t)d;
            }
        }
        char full[SIM_KEY_MAX + 32];
        snprintf(full, sizeof full, "%s[%d].from_h", key, count);
        if (s.from_h < 0) return fail_at(x, KVF_EPARSE, full, node_line(e), "missing");
        if (count > 0 && s.from_h <= tmp[count - 1].from_h)
            return fail_at(x, KVF_EINVAL, full, node_line(e),
                           "entries must be in increasing from_h order (%g after %g)", s.from_h,
                           tmp[count - 1].from_h);
        tmp[count++] = s;
    }
    memcpy(c->cluster.schedule, tmp, sizeof tmp[0] * (size_t)count);
    c->cluster.n_schedule = count;
    return KVF_OK;
}

// A scalar's value for key (its keydef d, where it stands: line) into dst, the field d names;
// one setter per key kind. null: the scalar is YAML null (already refused where d forbids it,
// strings apart). Messages name the key and what it expects.
typedef struct leaf {
    apply_ctx *x;
    const keydef *d;
    const char *key;
    int line;
    const char *s;   // the scalar's text
    bool null;
    char *dst;
} leaf;

static kvf_status set_str(const leaf *l) {
    const keydef *d = l->d;
    if (l->null && !(d->flags & F_NULL))
        return fail_at(l->x, KVF_EPARSE, l->key, l->line, "must not be null");
    if (strlen(l->s) >= d->size)
        return fail_at(l->x, KVF_EINVAL, l->key, l->line, "longer than %zu characters",
                       d->size - 1);
    copy_str(l->dst, d->size, l->null ? "" : l->s);
    return KVF_OK;
}

// K_NAME (the name copied) and K_ENUM (its index stored).
static kvf_status set_name(const leaf *l) {
    const keydef *d = l->d;
    int i = name_index(d->names, l->s);
    if (i < 0) {
        char allowed[256];
        join_names(d->names, allowed, sizeof allowed);
        return fail_at(l->x, KVF_EINVAL, l->key, l->line, "unknown value '%s' (allowed: %s)", l->s,
                       allowed);
    }
    if (d->kind == K_NAME)
        copy_str(l->dst, d->size, l->s);
    else
        *(int *)l->dst = i;
    return KVF_OK;
}

static kvf_status set_fmt(const leaf *l) {
    trc_format f;
    if (!trc_format_parse(l->s, &f)) {
        char allowed[256];
        size_t used = 0;
        allowed[0] = '\0';
        for (int i = TRC_FMT_AUTO; i <= TRC_FMT_KVFLEET; i++)
            used += (size_t)snprintf(allowed + used, sizeof allowed - used, "%s%s", i ? "|" : "",
                                     trc_format_name((trc_format)i));
        return fail_at(l->x, KVF_EINVAL, l->key, l->line, "unknown value '%s' (allowed: %s)", l->s,
                       allowed);
    }
    *(trc_format *)l->dst = f;
    return KVF_OK;
}

static kvf_status set_bool(const leaf *l) {
    bool b;
    if (!sim_key_parse_bool(l->s, &b))
        return fail_at(l->x, KVF_EPARSE, l->key, l->line, "expects true or false, got '%s'", l->s);
    *(bool *)l->dst = b;
    return KVF_OK;
}

static kvf_status set_u64(const leaf *l) {
    const char *s = l->s;
    char *end;
    errno = 0;
    if (*s == '-' || !isdigit((unsigned char)*s))
        return fail_at(l->x, KVF_EPARSE, l->key, l->line, "expects a whole number >= 0, got '%s'",
                       s);
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return fail_at(l->x, KVF_EPARSE, l->key, l->line, "expects a whole number >= 0, got '%s'",
                       s);
    *(uint64_t *)l->dst = (uint64_t)v;
    return KVF_OK;
}

// A number in the key table's range, in the file's unit, stored times scale (null: 0), into
// the key's field and its second target if it has one.
static kvf_status set_num(const leaf *l) {
    const keydef *d = l->d;
    double v = 0;
    if (!l->null) {
        if (!sim_key_parse_number(l->s, &v))
            return fail_at(l->x, KVF_EPARSE, l->key, l->line, "expects %s, got '%s'",
                           d->flags & F_INT ? "a whole number" : "a number", l->s);
        if (d->flags & F_INT && v != floor(v))
            return fail_at(l->x, KVF_EINVAL, l->key, l->line, "expects a whole number, got %s",
                           l->s);
        bool low = d->flags & F_GT ? !(v > d->lo) : !(v >= d->lo);
        if (low || v > d->hi)
            return fail_at(l->x, KVF_EINVAL, l->key, l->line, "must be in %s%g, %g], got %s",
                           d->flags & F_GT ? "(" : "[", d->lo, d->hi, l->s);
    }
    sim_key_store_num(l->dst, (num_type)d->ntype, v * d->scale);
    if (d->off2) sim_key_store_num((char *)l->x->c + d->off2, (num_type)d->ntype, v * d->scale);
    return KVF_OK;
}

static kvf_status set_dur(const leaf *l) {
    int64_t ns;
    if (!strcmp(l->s, "never"))
        ns = -1;
    else if (!kvf_parse_duration_ns(l->s, &ns))
        return fail_at(l->x, KVF_EPARSE, l->key, l->line,
                       "expects a duration (e.g. 7d, 12h, 90m, 30s) or never, got '%s'", l->s);
    *(int64_t *)l->dst = ns;
    return KVF_OK;
}

static kvf_status set_cap(const leaf *l) {
    const char *s = l->s;
    double v;
    if (!strcmp(s, "unlimited"))
        v = -1;
    else if (sim_key_parse_number(s, &v)) {
        if (v < 0)
            return fail_at(l->x, KVF_EINVAL, l->key, l->line,
                           "must be >= 0 (0 = off) or unlimited, got %s", s);
        v *= l->d->scale;
    } else if (!kvf_parse_bytes(s, &v))
        return fail_at(l->x, KVF_EPARSE, l->key, l->line,
                       "expects a number, a size like 100PiB, or unlimited, got '%s'", s);
    if (v > 1e21)
        return fail_at(l->x, KVF_EINVAL, l->key, l->line,
                       "must be at most 1e21 bytes (1 ZB) or unlimited, got '%s'", s);
    *(double *)l->dst = v;
    return KVF_OK;
}

// The setter of each scalar key kind (K_SCHEDULE takes a list: apply_schedule).
static kvf_status (*const LEAF_SET[])(const leaf *) = {
    [K_STR] = set_str, [K_NAME] = set_name, [K_ENUM] = set_name,
    [K_NUM] = set_num, [K_U64] = set_u64,   [K_BOOL] = set_bool,
    [K_DUR] = set_dur, [K_CAP] = set_cap,   [K_FMT] = set_fmt,
};

// What a key of d's kind expects, for the message about a node that is not a scalar.
static const char *leaf_want(const keydef *d) {
    switch ((key_kind)d->kind) {
    case K_NUM:
    case K_U64:
        return d->flags & F_INT ? "a whole number" : "a number";
    case K_BOOL:
        return "true or false";
    case K_DUR:
        return "a duration (e.g. 7d, 12h, 30s) or never";
    case K_CAP:
        return "a number or unlimited";
    default:
        return "a string";
    }
}

// Applies node n at key (its keydef d) to x->c. line: where the key stands (its value may
// start on a later line). A key below workload.generate. turns the generator on (chatbot).
static kvf_status apply_leaf(apply_ctx *x, const keydef *d, const char *key, const yaml_node_t *n,
                             int line) {
    KVF_ASSERT(x && x->c && d && key && n);
    if (d->kind == K_SCHEDULE) return apply_schedule(x, key, n, line);
    if (n->type != YAML_SCALAR_NODE)
        return fail_at(x, KVF_EPARSE, key, line, "expects %s, got %s", leaf_want(d),
                       node_kind_name(n));
    sim_config *c = x->c;
    leaf l = {x, d, key, line, scalar(n), is_null(n), (char *)c + d->off};
    if (l.null && !(d->flags & F_NULL) && d->kind != K_STR)
        return fail_at(x, KVF_EPARSE, key, line, "must not be null");
    if (!strncmp(key, "workload.generate.", 18) && !c->workload.gen.profile[0])
        copy_str(c->workload.gen.profile, sizeof c->workload.gen.profile, "chatbot");
    KVF_ASSERT(d->kind < sizeof LEAF_SET / sizeof LEAF_SET[0] && LEAF_SET[d->kind]);
    return LEAF_SET[d->kind](&l);
}

// Writes a node as YAML flow text ("[1, 2]", "{a: 1}", or the scalar itself) for economics;
// *used grows by the whole text's length, written or not (out may be NULL with cap 0).
static void flow_text(yaml_document_t *doc, const yaml_node_t *n, char *out, size_t cap,
                      size_t *used) {
#define PUT(...)                                                                                   \
    do {                                                                                           \
        *used += (size_t)snprintf(*used < cap ? out + *used : NULL, *used < cap ? cap - *used : 0, \
                                  __VA_ARGS__);                                                    \
    } while (0)
    if (n->type == YAML_SCALAR_NODE) {
        PUT("%s", is_null(n) ? "null" : scalar(n));
    } else if (n->type == YAML_SEQUENCE_NODE) {
        PUT("[");
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++) {
            if (it != n->data.sequence.items.start) PUT(", ");
            flow_text(doc, yaml_document_get_node(doc, *it), out, cap, used);
        }
        PUT("]");
    } else {
        PUT("{");
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
             p++) {
            if (p != n->data.mapping.pairs.start) PUT(", ");
            flow_text(doc, yaml_document_get_node(doc, p->key), out, cap, used);
            PUT(": ");
            flow_text(doc, yaml_document_get_node(doc, p->value), out, cap, used);
        }
        PUT("}");
    }
#undef PUT
}

// A node's whole flow text in a buffer of its size (free it), or NULL without memory.
static char *flow_value(yaml_document_t *doc, const yaml_node_t *n) {
    size_t len = 0;
    flow_text(doc, n, NULL, 0, &len);
    char *text = malloc(len + 1);
    if (!text) return NULL;
    size_t used = 0;
    flow_text(doc, n, text, len + 1, &used);
    return text;
}

// The keys directly below section prefix ("" = top level), for "unknown key" messages.
static void list_children(const char *prefix, char *out, size_t cap) {
    size_t plen = strlen(prefix), used = 0;
    out[0] = '\0';
    const char *seen[128];
    size_t n_seen = 0;
    for (size_t pass = 0; pass < 2; pass++) {
        size_t count = pass ? sim_key_section_count : sim_key_count;
        for (size_t i = 0; i < count; i++) {
            const char *k = pass ? sim_key_sections[i] : sim_key_table[i].key;
            if (plen && (strncmp(k, prefix, plen) || k[plen] != '.')) continue;
            const char *rest = plen ? k + plen + 1 : k;
            size_t len = strcspn(rest, ".");
            bool dup = false;
            for (size_t j = 0; j < n_seen && !dup; j++)
                dup = strlen(seen[j]) >= len && !strncmp(seen[j], rest, len) &&
                      (seen[j][len] == '\0' || seen[j][len] == '.');
            if (dup || n_seen >= 128) continue;
            seen[n_seen++] = rest;
            if (used < cap)
                used += (size_t)snprintf(out + used, cap - used, "%s%.*s", n_seen > 1 ? ", " : "",
                                         (int)len, rest);
        }
    }
}

static kvf_status apply_node(apply_ctx *x, const char *key, const yaml_node_t *n, int line);

static kvf_status apply_mapping(apply_ctx *x, const char *prefix, const yaml_node_t *n) {
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = yaml_document_get_node(x->doc, p->key);
        const yaml_node_t *v = yaml_document_get_node(x->doc, p->value);
        if (k->type != YAML_SCALAR_NODE || !*scalar(k))
            return fail_at(x, KVF_EPARSE, *prefix ? prefix : "(top level)", node_line(k),
                           "a key must be a non-empty scalar, got %s", node_kind_name(k));
        for (yaml_node_pair_t *q = n->data.mapping.pairs.start; q < p; q++) {
            const yaml_node_t *k2 = yaml_document_get_node(x->doc, q->key);
            if (k2->type == YAML_SCALAR_NODE && !strcmp(scalar(k2), scalar(k))) {
                char full[256];
                snprintf(full, sizeof full, "%s%s%s", prefix, *prefix ? "." : "", scalar(k));
                return fail_at(x, KVF_EPARSE, full, node_line(k),
                               "duplicate key (first at line %d)", node_line(k2));
            }
        }
        char full[256];
        int len = snprintf(full, sizeof full, "%s%s%s", prefix, *prefix ? "." : "", scalar(k));
        if (len < 0 || (size_t)len >= sizeof full)
            return fail_at(x, KVF_EPARSE, *prefix ? prefix : "(top level)", node_line(k),
                           "key '%.40s...' is too long (%zu characters; no key is over %zu)",
                           scalar(k), strlen(scalar(k)), sizeof full - 1);
        kvf_status st = apply_node(x, full, v, node_line(k));
        if (st) return st;
    }
    return KVF_OK;
}

// A value key the file being read has set already, written another way (a dotted key beside
// its nested form, `slo.ttft_p90_ms` after `slo: {ttft_p90_ms: ...}`): refused as a duplicate,
// as the same key twice in one mapping is, rather than the later one winning unseen. --set
// overrides the file by design and is not checked.
static kvf_status refuse_set_twice(apply_ctx *x, const char *key, int kline) {
    if (!x->path) return KVF_OK;
    for (int32_t i = 0; i < x->c->n_key_lines; i++)
        if (x->c->key_lines[i].line > 0 && !strcmp(x->c->key_lines[i].key, key))
            return fail_at(x, KVF_EPARSE, key, kline, "duplicate key (first at line %d)",
                           x->c->key_lines[i].line);
    return KVF_OK;
}

// Applies node n at dotted key; line is where the key stands in the file (ignored for --set,
// which records -1).
static kvf_status apply_node(apply_ctx *x, const char *key, const yaml_node_t *n, int kline) {
    sim_config *c = x->c;
    int line = x->path ? kline : -1;
    const keydef *d = sim_key_find(key);
    if (d) {
        kvf_status dup = refuse_set_twice(x, key, kline);
        if (dup) return dup;
        kvf_status st = apply_leaf(x, d, key, n, kline);
        if (st) return st;
        sim_key_record_line(c, key, line);
        return KVF_OK;
    }
    if (sim_key_under_economics(key)) {
        if (n->type == YAML_MAPPING_NODE) {
            sim_key_record_line(c, key, line);
            return apply_mapping(x, key, n);
        }
        kvf_status dup = refuse_set_twice(x, key, kline);
        if (dup) return dup;
        char *text = flow_value(x->doc, n);
        if (!text) return fail_at(x, KVF_ENOMEM, key, kline, "no memory for the value");
        kvf_err e = {0};
        kvf_status st = rpt_econ_config_set(&c->econ, key + 10, text, &e);
        free(text);
        if (st) {
            // reports/ may already name the key; do not say it twice.
            const char *msg = e.msg;
            size_t kl = strlen(key);
            if (!strncmp(msg, key, kl) && !strncmp(msg + kl, ": ", 2))
                msg += kl + 2;
            else if (!strncmp(msg, key + 10, kl - 10) && !strncmp(msg + kl - 10, ": ", 2))
                msg += kl - 10 + 2;
            return fail_at(x, st, key, kline, "%s", msg);
        }
        sim_key_record_line(c, key, line);
        return KVF_OK;
    }
    if (!strncmp(key, "published.", 10) && n->type != YAML_MAPPING_NODE) {
        kvf_status dup = refuse_set_twice(x, key, kline);
        if (dup) return dup;
        char *text = flow_value(x->doc, n), why[200];
        if (!text) return fail_at(x, KVF_ENOMEM, key, kline, "no memory for the value");
        bool bad = sim_key_set_published(c, key, text, why, sizeof why);
        free(text);
        if (bad) return fail_at(x, KVF_EPARSE, key, kline, "%s", why);
        sim_key_record_line(c, key, line);
        return KVF_OK;
    }
    if (!strncmp(key, "published.", 10) && !strchr(key + 10, '.')) {
        sim_key_record_line(c, key, line);
        return apply_mapping(x, key, n);
    }
    if (sim_key_is_section(key)) {
        if (!strcmp(key, "workload.generate") && is_null(n)) {
            c->workload.gen.profile[0] = '\0';
            sim_key_record_line(c, key, line);
            return KVF_OK;
        }
        if (n->type != YAML_MAPPING_NODE)
            return fail_at(x, KVF_EPARSE, key, kline, "expects a mapping, got %s%s%s%s",
                           node_kind_name(n), n->type == YAML_SCALAR_NODE ? " '" : "",
                           n->type == YAML_SCALAR_NODE ? scalar(n) : "",
                           n->type == YAML_SCALAR_NODE ? "'" : "");
        if (!strcmp(key, "workload.generate") && !c->workload.gen.profile[0])
            copy_str(c->workload.gen.profile, sizeof c->workload.gen.profile, "chatbot");
        sim_key_record_line(c, key, line);
        return apply_mapping(x, key, n);
    }
    // Unknown: name the keys that exist under the nearest known parent section.
    char parent[256], allowed[700];
    copy_str(parent, sizeof parent, key);
    for (;;) {
        char *dot = strrchr(parent, '.');
        if (!dot) {
            parent[0] = '\0';
            break;
        }
        *dot = '\0';
        if (sim_key_is_section(parent)) break;
    }
    list_children(parent, allowed, sizeof allowed);
    return fail_at(x, KVF_EPARSE, key, kline, "unknown key (known %s%s%s: %s)",
                   *parent ? "under '" : "at the top level", parent, *parent ? "'" : "", allowed);
}

// ---- loading ------------------------------------------------------------------------------

// c->dir for a scenario file: the parent of the nearest enclosing `scenarios` folder, else the
// file's own folder; absolute.
static void scenario_dir(const char *path, char *out, size_t n) {
    char *real = realpath(path, NULL);
    char buf[SIM_PATH_MAX];
    copy_str(buf, sizeof buf, real ? real : path);
    free(real);
    char *slash = strrchr(buf, '/');
    if (!slash) {
        copy_str(out, n, ".");
        return;
    }
    *slash = '\0';
    if (!buf[0]) copy_str(buf, sizeof buf, "/");
    // Walk up looking for a folder named "scenarios".
    char probe[SIM_PATH_MAX];
    copy_str(probe, sizeof probe, buf);
    for (;;) {
        char *s = strrchr(probe, '/');
        if (!s) break;
        if (!strcmp(s + 1, "scenarios")) {
            *s = '\0';
            copy_str(out, n, probe[0] ? probe : "/");
            return;
        }
        if (s == probe) break;
        *s = '\0';
    }
    copy_str(out, n, buf);
}

static kvf_status yaml_problem(kvf_err *err, const char *where, const yaml_parser_t *p) {
    const char *problem = p->problem ? p->problem : "cannot parse";
    if (p->context)
        return kvf_fail(err, KVF_EPARSE, "%s:%d: malformed YAML: %s (%s at line %d)", where,
                        (int)p->problem_mark.line + 1, problem, p->context,
                        (int)p->context_mark.line + 1);
    return kvf_fail(err, KVF_EPARSE, "%s:%d: malformed YAML: %s", where,
                    (int)p->problem_mark.line + 1, problem);
}

kvf_status sim_config_load(sim_config *c, const char *path, kvf_err *err) {
    sim_config_default(c);
    char *text = NULL;
    size_t len = 0;
    kvf_status st = kvf_read_file(path, &text, &len, err);
    if (st) return st;
    if (strlen(path) >= sizeof c->path) {
        free(text);
        return kvf_fail(err, KVF_EINVAL, "%s: path too long", path);
    }
    if ((st = mdl_yaml_guard(path, text, len, err))) {
        free(text);
        return st;
    }
    copy_str(c->path, sizeof c->path, path);
    scenario_dir(path, c->dir, sizeof c->dir);
    // Default name: the file's stem.
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t stem = strcspn(base, ".");
    if (stem > 0 && stem < sizeof c->name)
        snprintf(c->name, sizeof c->name, "%.*s", (int)stem, base);

    yaml_parser_t parser;
    yaml_document_t doc;
    bool have_doc = false;
    if (!yaml_parser_initialize(&parser)) {
        free(text);
        return kvf_fail(err, KVF_ENOMEM, "%s: cannot initialise the YAML parser", path);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        st = yaml_problem(err, path, &parser);
        goto done;
    }
    have_doc = true;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root) {
        // A second document would be silently ignored otherwise.
        yaml_document_t doc2;
        if (!yaml_parser_load(&parser, &doc2)) {
            st = yaml_problem(err, path, &parser);
            goto done;
        }
        yaml_node_t *root2 = yaml_document_get_root_node(&doc2);
        int line2 = root2 ? node_line(root2) : 0;
        yaml_document_delete(&doc2);
        if (root2) {
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: a second YAML document; a scenario is one", path,
                          line2);
            goto done;
        }
        if (root->type != YAML_MAPPING_NODE && !is_null(root)) {
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: a scenario must be a mapping of keys, got %s",
                          path, node_line(root), node_kind_name(root));
            goto done;
        }
        if (root->type == YAML_MAPPING_NODE) {
            apply_ctx x = {.c = c, .path = path, .doc = &doc, .err = err};
            st = apply_mapping(&x, "", root);
            if (st) goto done;
        }
    }
    sim_config_sync_derived(c);
    st = sim_serving_resolve(c, err);
done:
    if (have_doc) yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(text);
    return st;
}

kvf_status sim_config_set(sim_config *c, const char *assignment, kvf_err *err) {
    const char *eq = strchr(assignment, '=');
    if (!eq) return kvf_fail(err, KVF_EINVAL, "--set %s: expected KEY=VALUE", assignment);
    char key[256];
    const char *k0 = assignment, *k1 = eq;
    while (k0 < k1 && isspace((unsigned char)*k0))
        k0++;
    while (k1 > k0 && isspace((unsigned char)k1[-1]))
        k1--;
    if (k1 == k0) return kvf_fail(err, KVF_EINVAL, "--set %s: empty key", assignment);
    if ((size_t)(k1 - k0) >= sizeof key)
        return kvf_fail(err, KVF_EINVAL, "--set %s: key too long", assignment);
    memcpy(key, k0, (size_t)(k1 - k0));
    key[k1 - k0] = '\0';
    const char *value = eq + 1;

    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return kvf_fail(err, KVF_ENOMEM, "--set %s: cannot initialise the YAML parser", key);
    kvf_status st = mdl_yaml_guard("--set", value, strlen(value), err);
    if (st) {
        yaml_parser_delete(&parser);
        if (err) err->code = KVF_EINVAL;
        return KVF_EINVAL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)value, strlen(value));
    if (!yaml_parser_load(&parser, &doc)) {
        st = kvf_fail(err, KVF_EINVAL, "--set %s: malformed value '%s': %s", key, value,
                      parser.problem ? parser.problem : "cannot parse");
        yaml_parser_delete(&parser);
        return st;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root) {   // a value is one document: a second one would be silently ignored
        yaml_document_t doc2;
        bool two = !yaml_parser_load(&parser, &doc2);
        if (!two) {
            two = yaml_document_get_root_node(&doc2) != NULL;
            yaml_document_delete(&doc2);
        }
        if (two) {
            yaml_document_delete(&doc);
            yaml_parser_delete(&parser);
            return kvf_fail(err, KVF_EINVAL,
                            "--set %s: the value holds more than one YAML document ('---')", key);
        }
    }
    apply_ctx x = {.c = c, .path = NULL, .doc = &doc, .err = err};
    if (!root) {
        // An empty value is null.
        yaml_document_delete(&doc);
        if (!yaml_document_initialize(&doc, NULL, NULL, NULL, 1, 1)) {
            yaml_parser_delete(&parser);
            return kvf_fail(err, KVF_ENOMEM, "--set %s: out of memory", key);
        }
        int id =
            yaml_document_add_scalar(&doc, NULL, (yaml_char_t *)"", 0, YAML_PLAIN_SCALAR_STYLE);
        root = yaml_document_get_node(&doc, id);
    }
    st = apply_node(&x, key, root, 0);
    // --set errors are usage errors: report them as such whatever the parse code.
    if (st == KVF_EPARSE) {
        st = KVF_EINVAL;
        if (err) err->code = st;
    }
    if (!st) sim_config_sync_derived(c);
    if (!st) st = sim_serving_resolve(c, err);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return st;
}
