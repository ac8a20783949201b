// traces/trc_json.c -- the JSON-lines sources: Mooncake, agentic sessions (weka format) and
// the canonical kvfleet JSONL. One line is parsed at a time with jansson, so memory is one
// line (for sessions: one session, which holds all its requests).
//
// Agentic sessions (closed loop). Per session line, the requests and the nested subagents'
// requests are flattened and ordered by recorded time (session t; subagent t + nested t):
//   - the session's first request is open loop and arrives at the session start;
//   - a later request waits for the previous request of its own agent (prev_id) and arrives
//     think_time after it completes (think_ns; when think_time is missing, the recorded gap
//     t - prev.t - prev.api_time, at least 0);
//   - a subagent's first request waits for the parent request listed just before the
//     subagent (the one that spawned it), with the recorded gap after its reply; its later
//     requests chain among themselves. Parent and subagent thus run concurrently.
// Session starts: opt.session_users = N > 0: N users; users start sessions 0..N-1 at time 0
// and session k >= N waits (prev_id, think 0) for the last request of session k - N.
// Otherwise Poisson starts at opt.session_rate per second (default 1/60 s), from opt.seed,
// in file order. arrival_ns of a closed-loop request is its recorded time from its session's
// start (an estimate). "local" block-id scope: ids are hashed with the session number so two
// sessions never share a block; "global" keeps them.
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trc_int.h"

// ---- field helpers ------------------------------------------------------------------------
typedef struct jctx {
    const char *path;
    long line;
    kvf_err *err;
} jctx;

static int jbad(const jctx *c, const char *field, const char *what) {
    kvf_fail(c->err, KVF_EPARSE, "%s:%ld: field '%s': %s", c->path, c->line, field, what);
    return -1;
}

// Number field -> double; missing: -1 if required (error), 0 and *present=false otherwise.
static int jnum(const jctx *c, json_t *o, const char *name, bool required, double *out,
                bool *present) {
    json_t *v = json_object_get(o, name);
    if (present) *present = v != NULL && !json_is_null(v);
    if (!v || json_is_null(v)) {
        if (required) return jbad(c, name, "missing");
        *out = 0;
        return 0;
    }
    if (!json_is_number(v)) return jbad(c, name, "not a number");
    double d = json_number_value(v);
    if (!isfinite(d)) return jbad(c, name, "not finite");
    *out = d;
    return 0;
}

// Non-negative integer field (exact for JSON integers; reals must be integral), < 2^62.
static int jint(const jctx *c, json_t *o, const char *name, bool required, int64_t *out,
                bool *present) {
    json_t *v = json_object_get(o, name);
    if (present) *present = v != NULL && !json_is_null(v);
    *out = 0;
    if (!v || json_is_null(v)) return required ? jbad(c, name, "missing") : 0;
    if (json_is_integer(v)) {
        json_int_t k = json_integer_value(v);
        if (k < 0) return jbad(c, name, "negative");
        if (k > (json_int_t)4611686018427387903LL) return jbad(c, name, "too large");
        *out = (int64_t)k;
        return 0;
    }
    if (!json_is_number(v)) return jbad(c, name, "not a number");
    double d = json_number_value(v);
    if (!isfinite(d) || d != floor(d)) return jbad(c, name, "not an integer");
    if (d < 0) return jbad(c, name, "negative");
    if (d > 4.6e18) return jbad(c, name, "too large");
    *out = (int64_t)d;
    return 0;
}

// Token count: integer >= 0 (0 becomes 1: every request has a prompt and an answer).
static int jtokens(const jctx *c, json_t *o, const char *name, uint32_t *out) {
    double d;
    if (jnum(c, o, name, true, &d, NULL)) return -1;
    if (d < 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "negative length (%.0f)", d);
        return jbad(c, name, msg);
    }
    if (d > TRC_MAX_TOKENS) return jbad(c, name, "length too large (at most 10000000 tokens)");
    if (d != floor(d)) return jbad(c, name, "not an integer");
    *out = d < 1 ? 1 : (uint32_t)d;
    return 0;
}

// Integer array of block ids (signed 64-bit values reinterpreted as unsigned).
static int jblocks(const jctx *c, json_t *o, const char *name, trc_rec *rec, uint64_t salt,
                   bool hash) {
    rec->nb = 0;
    json_t *a = json_object_get(o, name);
    if (!a || json_is_null(a)) return 0;
    if (!json_is_array(a)) return jbad(c, name, "not an array");
    size_t n = json_array_size(a);
    if (n > TRC_MAX_BLOCKS) return jbad(c, name, "more than 1048576 entries");
    trc_rec_reserve(rec, n);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v)) {
            char msg[96];
            snprintf(msg, sizeof msg, "entry %zu is not an integer", i);
            return jbad(c, name, msg);
        }
        uint64_t id = (uint64_t)json_integer_value(v);
        rec->blocks[i] = hash ? kvf_hash_combine(salt, id) : id;
    }
    rec->nb = (uint32_t)n;
    return 0;
}

// The object key whose value stands at byte pos of line (the last "key": before it).
static bool key_before(const char *line, int pos, char *out, size_t n) {
    int i = pos;
    while (i > 0 && line[i - 1] != ':')
        i--;
    if (i <= 0) return false;
    i--;   // at ':'
    while (i > 0 && (line[i - 1] == ' ' || line[i - 1] == '\t'))
        i--;
    if (i <= 0 || line[i - 1] != '"') return false;
    int end = --i;
    while (i > 0 && line[i - 1] != '"')
        i--;
    if (i <= 0) return false;
    snprintf(out, n, "%.*s", end - i, line + i);
    return true;
}

static json_t *jparse_line(const jctx *c, const char *line, long len) {
    json_error_t je;
    json_t *o = json_loadb(line, (size_t)len, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        char field[64];
        if (json_error_code(&je) == json_error_numeric_overflow &&
            key_before(line, je.position, field, sizeof field))
            kvf_fail(c->err, KVF_EPARSE, "%s:%ld: field '%s': integer too large (at column %d)",
                     c->path, c->line, field, je.column);
        else
            kvf_fail(c->err, KVF_EPARSE, "%s:%ld: bad JSON at column %d: %s", c->path, c->line,
                     je.column, je.text);
        return NULL;
    }
    if (!json_is_object(o)) {
        json_decref(o);
        kvf_fail(c->err, KVF_EPARSE, "%s:%ld: bad JSON: line is not an object", c->path, c->line);
        return NULL;
    }
    return o;
}

// ---- the fast path ----------------------------------------------------------------------------
// Mooncake and canonical lines are flat objects of integers, a few plain strings and one
// integer array. This scanner reads exactly that shape into fixed slots without building a
// tree, and gives up (the line then goes to jansson, the reference) on anything else: escapes,
// non-ASCII or control bytes, reals or exponents, true/false, nesting, unknown or repeated
// keys, integers of 19 digits or more, leading zeros, trailing commas, junk after the object.
// It also gives up on any value jansson's path would refuse, so that path writes every error
// message: the fast path only ever accepts, and accepts exactly what jansson accepts, with
// the same values (test_traces compares both on every bundled trace).
bool trc_json_fast = true;

enum { FV_ABSENT = 0, FV_INT, FV_STR, FV_NULL, FV_ARR };

typedef struct fval {
    int type;
    int64_t i;
    const char *s;   // FV_STR: bytes (no escapes), not terminated
    size_t n;        // FV_STR: length; FV_ARR: entries (in rec->blocks)
} fval;

static inline const char *fs_ws(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    return p;
}

// A JSON integer that fits int64 as jansson reads it (no leading zeros, no fraction or
// exponent; [-2^63, 2^63 - 1], beyond which jansson reports an overflow).
static inline const char *fs_int(const char *p, const char *e, int64_t *out) {
    bool neg = false;
    if (p < e && *p == '-') {
        neg = true;
        p++;
    }
    const char *d = p;
    uint64_t v = 0;
    while (p < e && *p >= '0' && *p <= '9' && p - d < 18)
        v = v * 10 + (uint64_t)(*p++ - '0');
    if (p < e && *p >= '0' && *p <= '9') {   // a 19th digit: checked against the range
        uint64_t dig = (uint64_t)(*p++ - '0');
        uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        if (v > (lim - dig) / 10) return NULL;
        v = v * 10 + dig;
        if (p < e && *p >= '0' && *p <= '9') return NULL;
    }
    size_t nd = (size_t)(p - d);
    if (nd == 0 || (nd > 1 && *d == '0')) return NULL;
    if (p < e && (*p == '.' || *p == 'e' || *p == 'E')) return NULL;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return p;
}

// Scans a flat object whose keys are among names[0..nk) into v[]; integer arrays go into
// rec->blocks. False when the line is not of that shape (the caller falls back to jansson).
static bool fs_object(const char *p, const char *e, const char *const *names, int nk, fval *v,
                      trc_rec *rec) {
    for (int k = 0; k < nk; k++)
        v[k].type = FV_ABSENT;
    p = fs_ws(p, e);
    if (p >= e || *p++ != '{') return false;
    p = fs_ws(p, e);
    if (p < e && *p == '}') return fs_ws(p + 1, e) == e;
    for (;;) {
        if (p >= e || *p++ != '"') return false;
        const char *ks = p;
        while (p < e && *p != '"') {
            if (*p == '\\' || (unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) return false;
            p++;
        }
        if (p >= e) return false;
        size_t kn = (size_t)(p - ks);
        p++;
        int k = 0;
        while (k < nk && !(strlen(names[k]) == kn && !memcmp(names[k], ks, kn)))
            k++;
        if (k == nk || v[k].type != FV_ABSENT) return false;   // unknown or repeated key
        p = fs_ws(p, e);
        if (p >= e || *p++ != ':') return false;
        p = fs_ws(p, e);
        if (p >= e) return false;
        fval *x = &v[k];
        if (*p == '-' || (*p >= '0' && *p <= '9')) {
            if (!(p = fs_int(p, e, &x->i))) return false;
            x->type = FV_INT;
        } else if (*p == '"') {
            x->s = ++p;
            while (p < e && *p != '"') {
                if (*p == '\\' || (unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
                    return false;
                p++;
            }
            if (p >= e) return false;
            x->n = (size_t)(p - x->s);
            p++;
            x->type = FV_STR;
        } else if (*p == 'n') {
            if (e - p < 4 || memcmp(p, "null", 4)) return false;
            p += 4;
            x->type = FV_NULL;
        } else if (*p == '[') {
            size_t n = 0;
            p = fs_ws(p + 1, e);
            if (p < e && *p == ']')
                p++;
            else
                for (;;) {
                    int64_t id;
                    if (!(p = fs_int(p, e, &id))) return false;
                    if (n >= TRC_MAX_BLOCKS) return false;
                    if (n >= rec->cap) trc_rec_reserve(rec, n < 64 ? 64 : 2 * n);
                    rec->blocks[n++] = (uint64_t)id;
                    p = fs_ws(p, e);
                    if (p < e && *p == ',') {
                        p = fs_ws(p + 1, e);
                        continue;
                    }
                    if (p < e && *p == ']') {
                        p++;
                        break;
                    }
                    return false;
                }
            x->n = n;
            x->type = FV_ARR;
        } else
            return false;
        p = fs_ws(p, e);
        if (p < e && *p == ',') {
            p = fs_ws(p + 1, e);
            continue;
        }
        if (p < e && *p == '}') return fs_ws(p + 1, e) == e;
        return false;
    }
}

// A token count as jtokens reads it: an integer in [0, TRC_MAX_TOKENS], 0 -> 1.
static bool fs_tokens(const fval *x, uint32_t *out) {
    if (x->type != FV_INT || x->i < 0 || x->i > (int64_t)TRC_MAX_TOKENS) return false;
    *out = x->i < 1 ? 1 : (uint32_t)x->i;
    return true;
}

// An optional integer in [lo, hi] (absent or null = 0).
static bool fs_opt(const fval *x, int64_t lo, int64_t hi, int64_t *out) {
    *out = 0;
    if (x->type == FV_ABSENT || x->type == FV_NULL) return true;
    if (x->type != FV_INT || x->i < lo || x->i > hi) return false;
    *out = x->i;
    return true;
}

#define JINT_MAX 4611686018427387903LL

static const char *const mk_names[] = {"timestamp", "input_length", "output_length", "hash_ids"};

// The fast path of mooncake_parse: true with *rec filled, false to fall back.
static bool mooncake_fast(const char *line, long len, uint32_t src_bt, trc_rec *rec) {
    fval v[4];
    if (!fs_object(line, line + len, mk_names, 4, v, rec)) return false;
    if (v[0].type != FV_INT || v[0].i < 0 || v[0].i > 9000000000000LL) return false;
    if (!fs_tokens(&v[1], &rec->in) || !fs_tokens(&v[2], &rec->out)) return false;
    if (v[3].type == FV_ARR)
        rec->nb = (uint32_t)v[3].n;
    else if (v[3].type == FV_ABSENT || v[3].type == FV_NULL)
        rec->nb = 0;
    else
        return false;
    rec->t_ns = (int64_t)llround((double)v[0].i * 1e6);   // as jnum + llround compute it
    rec->cls = TRC_CLASS_CHATBOT;
    rec->flags = 0;
    rec->images = 0;
    rec->session = 0;
    rec->turn = 0;
    rec->prev_key = -1;
    rec->think_ns = 0;
    rec->src_bt = src_bt;
    return true;
}

enum {
    KV_ID,
    KV_ARR,
    KV_IN,
    KV_OUT,
    KV_CLASS,
    KV_FLAGS,
    KV_IMAGES,
    KV_SESSION,
    KV_TURN,
    KV_PREV,
    KV_THINK,
    KV_BT,
    KV_BLOCKS,
    KV_N
};
static const char *const kv_names[KV_N] = {
    "id",      "arrival_ns", "input_tokens", "output_tokens", "class",        "flags", "images",
    "session", "turn",       "prev_id",      "think_ns",      "block_tokens", "blocks"};

// The fast path of kvfleet_parse (seq: the key when "id" is absent).
static bool kvfleet_fast(const char *line, long len, uint32_t src_bt_opt, uint64_t seq,
                         trc_rec *rec) {
    fval v[KV_N];
    int64_t x;
    if (!fs_object(line, line + len, kv_names, KV_N, v, rec)) return false;
    if (v[KV_ARR].type != FV_INT || v[KV_ARR].i < 0 || v[KV_ARR].i > JINT_MAX) return false;
    rec->t_ns = v[KV_ARR].i;
    if (!fs_tokens(&v[KV_IN], &rec->in) || !fs_tokens(&v[KV_OUT], &rec->out)) return false;
    if (v[KV_ID].type == FV_INT)
        rec->key = (uint64_t)v[KV_ID].i;
    else if (v[KV_ID].type == FV_ABSENT)
        rec->key = seq;
    else
        return false;
    rec->cls = TRC_CLASS_CHATBOT;
    if (v[KV_CLASS].type == FV_STR) {
        char name[16];
        int k;
        if (v[KV_CLASS].n >= sizeof name) return false;
        memcpy(name, v[KV_CLASS].s, v[KV_CLASS].n);
        name[v[KV_CLASS].n] = 0;
        if (!trc_class_parse(name, &k)) return false;
        rec->cls = (uint8_t)k;
    } else if (v[KV_CLASS].type == FV_INT) {
        if (v[KV_CLASS].i < 0 || v[KV_CLASS].i >= TRC_CLASS_COUNT) return false;
        rec->cls = (uint8_t)v[KV_CLASS].i;
    } else if (v[KV_CLASS].type != FV_ABSENT && v[KV_CLASS].type != FV_NULL)
        return false;
    if (!fs_opt(&v[KV_FLAGS], 0, 255, &x)) return false;
    rec->flags = (uint8_t)x;
    if (!fs_opt(&v[KV_IMAGES], 0, 65535, &x)) return false;
    rec->images = (uint16_t)x;
    if (v[KV_SESSION].type == FV_INT)
        rec->session = (uint64_t)v[KV_SESSION].i;
    else if (v[KV_SESSION].type == FV_ABSENT || v[KV_SESSION].type == FV_NULL)
        rec->session = 0;
    else
        return false;
    if (!fs_opt(&v[KV_TURN], 0, 4000000000LL, &x)) return false;
    rec->turn = (uint32_t)x;
    if (v[KV_PREV].type == FV_INT && v[KV_PREV].i < 0)
        rec->prev_key = -1;
    else if (v[KV_PREV].type == FV_INT && v[KV_PREV].i <= JINT_MAX)
        rec->prev_key = v[KV_PREV].i;
    else if (v[KV_PREV].type == FV_ABSENT || v[KV_PREV].type == FV_NULL)
        rec->prev_key = -1;
    else
        return false;
    if (rec->prev_key >= 0 && (uint64_t)rec->prev_key >= rec->key) return false;
    if (!fs_opt(&v[KV_THINK], 0, JINT_MAX, &x)) return false;
    rec->think_ns = x;
    uint32_t bt = 64;
    if (v[KV_BT].type == FV_INT) {
        if (v[KV_BT].i < 1 || v[KV_BT].i > 1 << 24) return false;
        bt = (uint32_t)v[KV_BT].i;
    } else if (v[KV_BT].type != FV_ABSENT && v[KV_BT].type != FV_NULL)
        return false;
    rec->src_bt = src_bt_opt ? src_bt_opt : bt;
    if (v[KV_BLOCKS].type == FV_ARR)
        rec->nb = (uint32_t)v[KV_BLOCKS].n;
    else if (v[KV_BLOCKS].type == FV_ABSENT || v[KV_BLOCKS].type == FV_NULL)
        rec->nb = 0;
    else
        return false;
    return true;
}

// ---- Mooncake -----------------------------------------------------------------------------
typedef struct jsrc {
    trc_source base;
    trc_lines lines;
    char *path;
    trc_options opt;
    uint64_t seq;
    bool any;   // saw a non-blank line
} jsrc;

static void jsrc_close(trc_source *s) {
    jsrc *j = (jsrc *)s;
    trc_lines_free(&j->lines);
    free(j->path);
    free(j);
}

static int mooncake_parse(jsrc *j, const char *line, long len, trc_rec *rec, kvf_err *err) {
    if (trc_json_fast &&
        mooncake_fast(line, len, j->opt.source_block_tokens ? j->opt.source_block_tokens : 512,
                      rec)) {
        rec->line = j->lines.line;
        return 0;
    }
    jctx c = {j->path, j->lines.line, err};
    json_t *o = jparse_line(&c, line, len);
    if (!o) return -1;
    double ts;
    int rc = -1;
    if (jnum(&c, o, "timestamp", true, &ts, NULL)) goto done;
    if (ts < 0) {
        jbad(&c, "timestamp", "negative");
        goto done;
    }
    if (ts > 9e12) {
        jbad(&c, "timestamp", "too large (ms since the trace start)");
        goto done;
    }
    if (jtokens(&c, o, "input_length", &rec->in) || jtokens(&c, o, "output_length", &rec->out))
        goto done;
    if (jblocks(&c, o, "hash_ids", rec, 0, false)) goto done;
    rec->t_ns = (int64_t)llround(ts * 1e6);
    rec->cls = TRC_CLASS_CHATBOT;
    rec->flags = 0;
    rec->images = 0;
    rec->session = 0;
    rec->turn = 0;
    rec->prev_key = -1;
    rec->think_ns = 0;
    rec->src_bt = j->opt.source_block_tokens ? j->opt.source_block_tokens : 512;
    rec->line = j->lines.line;
    rc = 0;
done:
    json_decref(o);
    return rc;
}

static int kvfleet_parse(jsrc *j, const char *line, long len, trc_rec *rec, kvf_err *err) {
    if (trc_json_fast && kvfleet_fast(line, len, j->opt.source_block_tokens, j->seq, rec)) {
        rec->line = j->lines.line;
        return 0;
    }
    jctx c = {j->path, j->lines.line, err};
    json_t *o = jparse_line(&c, line, len);
    if (!o) return -1;
    int rc = -1;
    double d;
    bool has;
    int64_t iv;
    if (jint(&c, o, "arrival_ns", true, &iv, NULL)) goto done;
    rec->t_ns = iv;
    if (jtokens(&c, o, "input_tokens", &rec->in) || jtokens(&c, o, "output_tokens", &rec->out))
        goto done;
    json_t *id = json_object_get(o, "id");
    if (id && !json_is_integer(id)) {
        jbad(&c, "id", "not an integer");
        goto done;
    }
    rec->key = id ? (uint64_t)json_integer_value(id) : j->seq;
    json_t *cl = json_object_get(o, "class");
    rec->cls = TRC_CLASS_CHATBOT;
    if (cl && json_is_string(cl)) {
        int k;
        if (!trc_class_parse(json_string_value(cl), &k)) {
            jbad(&c, "class", "unknown class");
            goto done;
        }
        rec->cls = (uint8_t)k;
    } else if (cl && json_is_integer(cl)) {
        json_int_t k = json_integer_value(cl);
        if (k < 0 || k >= TRC_CLASS_COUNT) {
            jbad(&c, "class", "out of range");
            goto done;
        }
        rec->cls = (uint8_t)k;
    } else if (cl && !json_is_null(cl)) {
        jbad(&c, "class", "not a string");
        goto done;
    }
    if (jnum(&c, o, "flags", false, &d, NULL)) goto done;
    if (d < 0 || d > 255) {
        jbad(&c, "flags", "out of range");
        goto done;
    }
    rec->flags = (uint8_t)d;
    if (jnum(&c, o, "images", false, &d, NULL)) goto done;
    if (d < 0 || d > 65535) {
        jbad(&c, "images", "out of range");
        goto done;
    }
    rec->images = (uint16_t)d;
    json_t *se = json_object_get(o, "session");
    if (se && !json_is_integer(se) && !json_is_null(se)) {
        jbad(&c, "session", "not an integer");
        goto done;
    }
    rec->session = se && json_is_integer(se) ? (uint64_t)json_integer_value(se) : 0;
    if (jnum(&c, o, "turn", false, &d, NULL)) goto done;
    if (d < 0 || d > 4e9) {
        jbad(&c, "turn", "out of range");
        goto done;
    }
    rec->turn = (uint32_t)d;
    json_t *pv = json_object_get(o, "prev_id");
    if (pv && json_is_integer(pv) && json_integer_value(pv) < 0)
        rec->prev_key = -1;
    else {
        if (jint(&c, o, "prev_id", false, &iv, &has)) goto done;
        rec->prev_key = has ? iv : -1;
    }
    if (rec->prev_key >= 0 && (uint64_t)rec->prev_key >= rec->key) {
        jbad(&c, "prev_id", "must name an earlier request");
        goto done;
    }
    if (jint(&c, o, "think_ns", false, &iv, NULL)) goto done;
    rec->think_ns = iv;
    if (jnum(&c, o, "block_tokens", false, &d, &has)) goto done;
    if (has && (d < 1 || d > 1 << 24 || d != floor(d))) {
        jbad(&c, "block_tokens", "must be a positive integer");
        goto done;
    }
    rec->src_bt = j->opt.source_block_tokens ? j->opt.source_block_tokens : has ? (uint32_t)d : 64;
    if (jblocks(&c, o, "blocks", rec, 0, false)) goto done;
    rec->line = j->lines.line;
    rc = 0;
done:
    json_decref(o);
    return rc;
}

typedef int (*line_parser)(jsrc *, const char *, long, trc_rec *, kvf_err *);

static int jsrc_next_with(jsrc *j, line_parser parse, bool own_key, trc_rec *rec, kvf_err *err) {
    for (;;) {
        char *line;
        long len = trc_lines_next(&j->lines, &line);
        if (len < 0) {
            if (trc_lines_error(&j->lines, j->path, err)) return -1;
            if (!j->any)
                return kvf_fail(err, KVF_EPARSE, "%s:%ld: empty file (no requests)", j->path,
                                j->lines.line + 1),
                       -1;
            return 0;
        }
        j->any = true;
        if (parse(j, line, len, rec, err) == 0) {
            if (!own_key) rec->key = j->seq;
            j->seq++;
            return 1;
        }
        if (!j->opt.skip_bad) return -1;
        j->base.skipped++;
    }
}

static int mooncake_next(trc_source *s, trc_rec *rec, kvf_err *err) {
    return jsrc_next_with((jsrc *)s, mooncake_parse, false, rec, err);
}
static int kvfleet_next(trc_source *s, trc_rec *rec, kvf_err *err) {
    return jsrc_next_with((jsrc *)s, kvfleet_parse, true, rec, err);
}

static jsrc *jsrc_new(FILE *f, const char *path, const trc_options *o, size_t size) {
    jsrc *j = kvf_calloc(1, size);
    j->lines.f = f;
    j->path = kvf_strdup(path);
    j->opt = *o;
    j->base.close = jsrc_close;
    j->base.sorted = true;
    return j;
}

kvf_status trc_src_mooncake(trc_source **out, FILE *f, const char *path, const trc_options *o,
                            kvf_err *err) {
    jsrc *j = jsrc_new(f, path, o, sizeof *j);
    j->base.next = mooncake_next;
    j->base.fmt = TRC_FMT_MOONCAKE;
    j->base.bucket_ns = 3 * KVF_NS_PER_S;
    snprintf(j->base.notes, sizeof j->base.notes, "source blocks %u tokens",
             o->source_block_tokens ? o->source_block_tokens : 512);
    *out = &j->base;
    return KVF_OK;
}

kvf_status trc_src_kvfleet(trc_source **out, FILE *f, const char *path, const trc_options *o,
                           kvf_err *err) {
    jsrc *j = jsrc_new(f, path, o, sizeof *j);
    j->base.next = kvfleet_next;
    j->base.fmt = TRC_FMT_KVFLEET;
    j->base.origin_zero = true;   // arrival_ns is already on the replay axis
    *out = &j->base;
    return KVF_OK;
}

// ---- agentic sessions -----------------------------------------------------------------------
typedef struct flat_req {
    double abs_t;     // s from session start
    double api_s;     // recorded server time
    double think_s;   // gap after prev completes
    int64_t prev;     // index into the flat list, -1 = none
    uint32_t in, out;
    size_t pos;    // position in emission order
    trc_rec rec;   // blocks (hashed) live here
} flat_req;

typedef struct user_slot {
    int64_t last_key;   // last request of the user's current session, -1 = none
    double end_s;       // its estimated end on the trace axis
} user_slot;

typedef struct ssrc {
    jsrc j;
    flat_req *fr;
    size_t nfr, capfr, next;
    size_t *order;   // emission order: indices into fr
    size_t caporder;
    uint64_t session_no;   // sessions read so far (good ones)
    double start_s;        // current session's start
    double next_start_s;   // Poisson: next session's start
    int64_t first_key_of_session;
    user_slot *users;
    uint32_t bt;   // current session's block size
    bool local;
    int64_t cur_prev_key;   // users mode: the first request's prev
    double cur_think_s;
    kvf_rng rng;
} ssrc;

static void ssrc_close(trc_source *s) {
    ssrc *x = (ssrc *)s;
    for (size_t i = 0; i < x->capfr; i++)
        free(x->fr[i].rec.blocks);
    free(x->fr);
    free(x->order);
    free(x->users);
    jsrc_close(s);
}

static flat_req *fr_push(ssrc *x) {
    size_t old = x->capfr;
    kvf_grow((void **)&x->fr, &x->capfr, x->nfr + 1, sizeof *x->fr);
    if (x->capfr > old) memset(x->fr + old, 0, (x->capfr - old) * sizeof *x->fr);
    flat_req *f = &x->fr[x->nfr++];
    f->rec.nb = 0;
    return f;
}

// Flattens one level of requests (recursing into subagents). spawner: flat index of the
// request that started this level (-1 = none); base_t: the level's start on the session axis.
static int flatten(ssrc *x, jctx *c, json_t *reqs, double base_t, int64_t spawner, uint64_t salt,
                   int depth) {
    if (!json_is_array(reqs)) return jbad(c, "requests", "not an array");
    if (depth > 16) return jbad(c, "requests", "subagents nested too deep");
    int64_t last = -1;   // last request at this level
    size_t n = json_array_size(reqs);
    for (size_t i = 0; i < n; i++) {
        json_t *q = json_array_get(reqs, i);
        if (!json_is_object(q)) return jbad(c, "requests", "entry is not an object");
        double t;
        if (jnum(c, q, "t", true, &t, NULL)) return -1;
        if (t < 0) return jbad(c, "t", "negative");
        if (t > 1e9) return jbad(c, "t", "too large (s)");
        json_t *ty = json_object_get(q, "type");
        const char *type = ty && json_is_string(ty) ? json_string_value(ty) : "n";
        if (!strcmp(type, "subagent")) {
            json_t *sub = json_object_get(q, "requests");
            if (!sub) return jbad(c, "requests", "subagent without requests");
            if (flatten(x, c, sub, base_t + t, last >= 0 ? last : spawner, salt, depth + 1))
                return -1;
            continue;
        }
        uint32_t in, out;
        if (jtokens(c, q, "in", &in) || jtokens(c, q, "out", &out)) return -1;
        double api, think;
        bool has_think;
        if (jnum(c, q, "api_time", false, &api, NULL)) return -1;
        if (jnum(c, q, "think_time", false, &think, &has_think)) return -1;
        if (api < 0) return jbad(c, "api_time", "negative");
        if (api > 1e9) return jbad(c, "api_time", "too large (s)");
        if (has_think && think < 0) return jbad(c, "think_time", "negative");
        if (has_think && think > 1e9) return jbad(c, "think_time", "too large (s)");
        flat_req *f = fr_push(x);
        size_t me = x->nfr - 1;
        f->abs_t = base_t + t;
        f->api_s = api;
        f->in = in;
        f->out = out;
        if (jblocks(c, q, "hash_ids", &f->rec, salt, x->local)) return -1;
        int64_t prev = last >= 0 ? last : spawner;
        f->prev = prev;
        if (prev >= 0) {
            const flat_req *p = &x->fr[prev];
            double gap = f->abs_t - p->abs_t - p->api_s;
            if (last >= 0 && has_think && think >= 0)
                f->think_s = think;
            else
                f->think_s = gap > 0 ? gap : 0;
        } else
            f->think_s = 0;
        last = (int64_t)me;
    }
    return 0;
}

static int cmp_flat(const void *a, const void *b, void *ctx) {
    const flat_req *fr = ctx;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (fr[i].abs_t != fr[j].abs_t) return fr[i].abs_t < fr[j].abs_t ? -1 : 1;
    return (i > j) - (i < j);
}

static int session_parse(ssrc *x, const char *line, long len, kvf_err *err) {
    jctx c = {x->j.path, x->j.lines.line, err};
    json_t *o = jparse_line(&c, line, len);
    if (!o) return -1;
    int rc = -1;
    x->nfr = 0;
    double bs;
    bool has_bs;
    if (jnum(&c, o, "block_size", false, &bs, &has_bs)) goto done;
    if (has_bs && (bs < 1 || bs != floor(bs) || bs > 1 << 24)) {
        jbad(&c, "block_size", "must be a positive integer");
        goto done;
    }
    x->bt = x->j.opt.source_block_tokens ? x->j.opt.source_block_tokens
            : has_bs                     ? (uint32_t)bs
                                         : 64;
    json_t *sc = json_object_get(o, "hash_id_scope");
    x->local = !(sc && json_is_string(sc) && !strcmp(json_string_value(sc), "global"));
    json_t *reqs = json_object_get(o, "requests");
    if (!reqs) {
        jbad(&c, "requests", "missing");
        goto done;
    }
    uint64_t salt = kvf_hash_combine(0x5e5510115ULL, x->session_no + 1);
    if (flatten(x, &c, reqs, 0, -1, salt, 0)) goto done;
    if (x->nfr == 0) {
        jbad(&c, "requests", "session without requests");
        goto done;
    }
    kvf_grow((void **)&x->order, &x->caporder, x->nfr, sizeof *x->order);
    for (size_t i = 0; i < x->nfr; i++)
        x->order[i] = i;
    qsort_r(x->order, x->nfr, sizeof *x->order, cmp_flat, x->fr);
    for (size_t i = 0; i < x->nfr; i++)
        x->fr[x->order[i]].pos = i;
    bool ok = true;
    for (size_t i = 0; i < x->nfr && ok; i++)
        if (x->fr[i].prev >= 0 && x->fr[x->fr[i].prev].pos >= x->fr[i].pos) ok = false;
    if (!ok)   // recorded times disagree with dependencies: keep the listed (DFS) order
        for (size_t i = 0; i < x->nfr; i++)
            x->order[i] = i, x->fr[i].pos = i;
    rc = 0;
done:
    json_decref(o);
    return rc;
}

static int sessions_next(trc_source *s, trc_rec *rec, kvf_err *err) {
    ssrc *x = (ssrc *)s;
    while (x->next >= x->nfr) {
        // the next session
        char *line;
        long len = trc_lines_next(&x->j.lines, &line);
        if (len < 0) {
            if (trc_lines_error(&x->j.lines, x->j.path, err)) return -1;
            if (!x->j.any)
                return kvf_fail(err, KVF_EPARSE, "%s:%ld: empty file (no sessions)", x->j.path,
                                x->j.lines.line + 1),
                       -1;
            return 0;
        }
        x->j.any = true;
        x->nfr = x->next = 0;
        if (session_parse(x, line, len, err)) {
            x->nfr = 0;
            if (!x->j.opt.skip_bad) return -1;
            s->skipped++;
            continue;
        }
        uint64_t k = x->session_no++;
        x->first_key_of_session = (int64_t)x->j.seq;
        uint32_t U = x->j.opt.session_users;
        x->cur_prev_key = -1;
        x->cur_think_s = 0;
        if (U > 0) {
            user_slot *u = &x->users[k % U];
            x->start_s = k < U ? 0 : u->end_s;
            x->cur_prev_key = k < U ? -1 : u->last_key;
            // this session's last request and end, for the user's next session
            size_t last = x->order[x->nfr - 1];
            u->last_key = (int64_t)(x->j.seq + x->nfr - 1);
            u->end_s = x->start_s + x->fr[last].abs_t + x->fr[last].api_s;
        } else {
            x->start_s = x->next_start_s;
            double rate = x->j.opt.session_rate > 0 ? x->j.opt.session_rate : 1.0 / 60;
            x->next_start_s += kvf_rng_exp(&x->rng, 1.0 / rate);
        }
    }
    size_t idx = x->order[x->next];
    flat_req *f = &x->fr[idx];
    // hand the blocks over by swapping buffers (the record keeps its capacity)
    trc_rec tmp = *rec;
    rec->blocks = f->rec.blocks;
    rec->cap = f->rec.cap;
    rec->nb = f->rec.nb;
    f->rec.blocks = tmp.blocks;
    f->rec.cap = tmp.cap;
    f->rec.nb = 0;
    double ts = x->start_s + f->abs_t;   // both bounded, but users' chains can add up
    rec->t_ns = (int64_t)llround((ts < 4e9 ? ts : 4e9) * 1e9);
    rec->in = f->in;
    rec->out = f->out;
    rec->cls = TRC_CLASS_AGENT;
    rec->flags = 0;
    rec->images = 0;
    rec->session = x->session_no;   // 1-based session number
    rec->turn = (uint32_t)x->next;
    rec->key = x->j.seq++;
    if (f->prev >= 0) {
        rec->prev_key = x->first_key_of_session + (int64_t)x->fr[f->prev].pos;
        rec->think_ns = (int64_t)llround((f->think_s < 4e9 ? f->think_s : 4e9) * 1e9);
    } else if (x->next == 0 && x->cur_prev_key >= 0) {
        rec->prev_key = x->cur_prev_key;
        rec->think_ns = 0;
    } else {
        rec->prev_key = -1;
        rec->think_ns = 0;
    }
    rec->src_bt = x->bt;
    rec->line = x->j.lines.line;
    x->next++;
    return 1;
}

kvf_status trc_src_sessions(trc_source **out, FILE *f, const char *path, const trc_options *o,
                            kvf_err *err) {
    ssrc *x = (ssrc *)jsrc_new(f, path, o, sizeof *x);
    x->j.base.next = sessions_next;
    x->j.base.close = ssrc_close;
    x->j.base.fmt = TRC_FMT_SESSIONS;
    x->j.base.origin_zero = true;   // times are on the session-start axis, which starts at 0
    kvf_rng_init(&x->rng, o->seed, 0x5e55);
    if (o->session_users > 0) {
        x->users = kvf_calloc(o->session_users, sizeof *x->users);
        for (uint32_t i = 0; i < o->session_users; i++)
            x->users[i].last_key = -1;
        snprintf(x->j.base.notes, sizeof x->j.base.notes,
                 "closed loop; %u concurrent users start sessions in file order; "
                 "per-session block ids",
                 o->session_users);
    } else {
        snprintf(x->j.base.notes, sizeof x->j.base.notes,
                 "closed loop; Poisson session starts at %g/s (seed %llu); per-session block ids",
                 o->session_rate > 0 ? o->session_rate : 1.0 / 60, (unsigned long long)o->seed);
    }
    *out = &x->j.base;
    return KVF_OK;
}
