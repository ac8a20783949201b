// traces/trc_csv.c -- the CSV sources (libcsv): Azure LLM inference traces and BurstGPT.
//
// Lines are fed to libcsv one at a time, so every record knows the line it started on and
// memory is one record. Columns are found by header name, so column order does not matter.
//   Azure 2023/2024: TIMESTAMP,ContextTokens,GeneratedTokens; TIMESTAMP is wall clock with up
//     to 7 fractional digits ("2023-11-16 18:15:46.6805900", optional "+00:00"/"Z") or a
//     number of seconds. Class chatbot, or coding when the file name contains "code".
//   BurstGPT: Timestamp (s),Model,Request tokens,Response tokens,Total tokens,Log Type
//     [,Session ID,Elapsed time]. Failed requests (Response tokens 0, or a Log Type naming a
//     failure) are flagged TRC_F_FAILED and given 1 output token. "Conversation log" is class
//     chatbot, "API log" other. Session IDs become session numbers and turns count per session
//     (a table of 12 bytes per distinct session).
// Neither format has block ids: requests carry no blocks (stated in the notes).
#include <csv.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trc_int.h"

#define MAX_FIELDS 32
#define MAX_FIELD_LEN 1024

enum { C_TS, C_IN, C_OUT, C_MODEL, C_LOG, C_SESSION, C_NCOLS };

typedef struct sess_slot {
    uint64_t key;   // hashed session id (0 = empty)
    uint32_t turns;
} sess_slot;

typedef struct csrc {
    trc_source base;
    trc_lines lines;
    char *path;
    trc_options opt;
    struct csv_parser p;
    char row[MAX_FIELDS * (MAX_FIELD_LEN + 1)];
    size_t off[MAX_FIELDS];
    int nf, nf_total;
    uint32_t nul_mask;   // fields of the row holding a NUL byte (bit i = field i)
    bool row_done;
    long row_line;   // line where the row being built started (0 = none yet)
    bool in_row;
    bool header_done;
    int col[C_NCOLS];
    const char *colname[C_NCOLS];
    uint8_t cls;
    uint64_t seq;
    sess_slot *sess;
    size_t capsess, nsess;
    bool any;
} csrc;

static void cb_field(void *s, size_t len, void *data) {
    csrc *c = data;
    if (!c->in_row) {
        c->in_row = true;
        c->row_line = c->lines.line;
    }
    if (c->nf < MAX_FIELDS) {
        size_t base = c->nf ? c->off[c->nf - 1] + strlen(c->row + c->off[c->nf - 1]) + 1 : 0;
        if (len > MAX_FIELD_LEN) len = MAX_FIELD_LEN;
        memcpy(c->row + base, s ? s : "", s ? len : 0);
        c->row[base + (s ? len : 0)] = 0;
        // a NUL byte inside a field would end it early and hide the rest: the row is refused
        if (s && len && memchr(s, 0, len)) c->nul_mask |= 1u << c->nf;
        c->off[c->nf++] = base;
    }
    c->nf_total++;
}

static void cb_row(int term, void *data) {
    (void)term;
    csrc *c = data;
    if (!c->in_row) c->row_line = c->lines.line;
    c->row_done = true;
}

static const char *field(const csrc *c, int col) {
    return col >= 0 && col < c->nf ? c->row + c->off[col] : NULL;
}

// Reads lines until one CSV record is complete. 1 = row ready, 0 = end of file, -1 = error.
static int read_row(csrc *c, kvf_err *err) {
    c->nf = c->nf_total = 0;
    c->nul_mask = 0;
    c->row_done = false;
    c->in_row = false;
    for (;;) {
        char *line;
        long len = trc_lines_next(&c->lines, &line);
        if (len < 0) {
            if (trc_lines_error(&c->lines, c->path, err)) return -1;
            csv_fini(&c->p, cb_field, cb_row, c);
            return c->row_done ? 1 : 0;
        }
        c->any = true;
        line[len] = '\n';
        size_t used = csv_parse(&c->p, line, (size_t)len + 1, cb_field, cb_row, c);
        line[len] = 0;
        if (used != (size_t)len + 1)
            return kvf_fail(err, KVF_EPARSE, "%s:%ld: CSV syntax error: %s", c->path, c->lines.line,
                            csv_strerror(csv_error(&c->p))),
                   -1;
        if (c->row_done) return 1;
    }
}

static int fail_field(csrc *c, kvf_err *err, int col, const char *fmt, const char *v) {
    char what[300];
    snprintf(what, sizeof what, fmt, v ? v : "");
    kvf_fail(err, KVF_EPARSE, "%s:%ld: field '%s': %s", c->path, c->row_line, c->colname[col],
             what);
    return -1;
}

static bool is_blank(const char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    return !*s;
}

// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

// Days in month mo (1-12) of year y, leap years by the Gregorian rule: 2023-02-30 is no date
// (it would have been read as March 2).
static int days_in_month(int y, int mo) {
    static const int dm[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return mo == 2 && leap ? 29 : dm[mo - 1];
}

// "YYYY-MM-DD HH:MM:SS" (or T between) at the start of s with every digit in place, the
// form the traces write: its fields as the sscanf in parse_time reads them, without the
// library's cost on every line. False for any other form (sscanf then reads it).
static bool civil_fixed(const char *s, int f[6]) {
    static const char pat[] = "dddd-dd-dd?dd:dd:dd";
    for (int i = 0; pat[i]; i++) {
        char c = s[i];
        bool ok = pat[i] == 'd'   ? c >= '0' && c <= '9'
                  : pat[i] == '?' ? c == ' ' || c == 'T'
                                  : c == pat[i];
        if (!ok) return false;
    }
    static const int at[6] = {0, 5, 8, 11, 14, 17}, len[6] = {4, 2, 2, 2, 2, 2};
    for (int k = 0; k < 6; k++) {
        f[k] = 0;
        for (int i = 0; i < len[k]; i++)
            f[k] = f[k] * 10 + (s[at[k] + i] - '0');
    }
    return true;
}

// "YYYY-MM-DD HH:MM:SS[.frac][Z|+hh:mm]" or seconds -> ns since the epoch.
static bool parse_time(const char *s, int64_t *out) {
    while (*s == ' ')
        s++;
    int y, mo, d, h, mi, sec, n = 0, f[6];
    if (civil_fixed(s, f)) {
        y = f[0], mo = f[1], d = f[2], h = f[3], mi = f[4], sec = f[5];
        n = 19;
    }
    if (n || (sscanf(s, "%4d-%2d-%2d%*[ T]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) == 6 &&
              n > 0)) {
        if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h < 0 || h > 23 || mi < 0 ||
            mi > 59 || sec < 0 || sec > 60 || y < 1970 || y > 2200)
            return false;   // keeps ns since 1970 (and their differences) inside int64
        const char *p = s + n;
        int64_t frac = 0, scale = 1000000000;
        if (*p == '.') {
            p++;
            if (*p < '0' || *p > '9') return false;
            while (*p >= '0' && *p <= '9') {
                if (scale > 1) {
                    scale /= 10;
                    frac += (*p - '0') * scale;
                }
                p++;
            }
        }
        int64_t tz = 0;
        if (*p == 'Z')
            p++;
        else if (*p == '+' || *p == '-') {
            int th, tm;
            int k = 0;
            if (sscanf(p + 1, "%2d:%2d%n", &th, &tm, &k) != 2 || k == 0 || th < 0 || th > 23 ||
                tm < 0 || tm > 59)
                return false;
            tz = (*p == '+' ? 1 : -1) * ((int64_t)th * 3600 + tm * 60);
            p += 1 + k;
        }
        while (*p == ' ')
            p++;
        if (*p) return false;
        int64_t secs =
            days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + sec - tz;
        *out = secs * KVF_NS_PER_S + frac;
        return true;
    }
    char *end;
    double v = strtod(s, &end);
    while (*end == ' ')
        end++;
    if (end == s || *end || !isfinite(v) || v < 0 || v > 9e9) return false;
    *out = (int64_t)llround(v * 1e9);
    return true;
}

static int tokens(csrc *c, kvf_err *err, int col, uint32_t *out, bool *was_zero) {
    const char *v = field(c, c->col[col]);
    if (!v || is_blank(v)) return fail_field(c, err, col, "missing%s", "");
    while (*v == ' ')
        v++;
    if (*v == '-') return fail_field(c, err, col, "negative length (%s)", v);
    uint64_t x;
    if (!trc_parse_u64(v, &x)) {
        // a few traces write token counts as "123.0"
        char *end;
        double d = strtod(v, &end);
        while (*end == ' ')
            end++;
        if (end == v || *end || !isfinite(d) || d != floor(d) || d < 0)
            return fail_field(c, err, col, "not a token count ('%s')", v);
        if (d > TRC_MAX_TOKENS)
            return fail_field(c, err, col, "length too large (%s; at most 10000000 tokens)", v);
        x = (uint64_t)d;
    }
    if (x > (uint64_t)TRC_MAX_TOKENS)
        return fail_field(c, err, col, "length too large (%s; at most 10000000 tokens)", v);
    if (was_zero) *was_zero = x == 0;
    *out = x ? (uint32_t)x : 1;
    return 0;
}

static uint32_t session_turn(csrc *c, uint64_t key) {
    if (c->nsess * 2 + 2 > c->capsess) {
        size_t ncap = c->capsess ? c->capsess * 2 : 1024;
        sess_slot *n = kvf_calloc(ncap, sizeof *n);
        for (size_t i = 0; i < c->capsess; i++) {
            if (!c->sess[i].key) continue;
            size_t h = kvf_hash64(c->sess[i].key) & (ncap - 1);
            while (n[h].key)
                h = (h + 1) & (ncap - 1);
            n[h] = c->sess[i];
        }
        free(c->sess);
        c->sess = n;
        c->capsess = ncap;
    }
    size_t h = kvf_hash64(key) & (c->capsess - 1);
    while (c->sess[h].key && c->sess[h].key != key)
        h = (h + 1) & (c->capsess - 1);
    if (!c->sess[h].key) {
        c->sess[h].key = key;
        c->nsess++;
    }
    return c->sess[h].turns++;
}

static int header(csrc *c, kvf_err *err) {
    static const char *names[2][C_NCOLS][3] = {
        {{"TIMESTAMP", "Timestamp", NULL},
         {"ContextTokens", NULL, NULL},
         {"GeneratedTokens", NULL, NULL},
         {NULL},
         {NULL},
         {NULL}},
        {{"Timestamp", "TIMESTAMP", NULL},
         {"Request tokens", NULL, NULL},
         {"Response tokens", NULL, NULL},
         {"Model", NULL, NULL},
         {"Log Type", NULL, NULL},
         {"Session ID", NULL, NULL}},
    };
    int k = c->base.fmt == TRC_FMT_AZURE ? 0 : 1;
    for (int j = 0; j < C_NCOLS; j++) {
        c->col[j] = -1;
        c->colname[j] = names[k][j][0] ? names[k][j][0] : "?";
    }
    if (c->nf == 1) {
        const char *h = field(c, 0);
        if (strchr(h, ';') || strchr(h, '\t') || strchr(h, '|'))
            return kvf_fail(err, KVF_EPARSE,
                            "%s:%ld: field '%s': header has one column; wrong delimiter "
                            "(expected ',')",
                            c->path, c->row_line, c->colname[C_TS]),
                   -1;
    }
    for (int i = 0; i < c->nf; i++) {
        char *h = c->row + c->off[i];
        while (*h == ' ')
            h++;
        size_t n = strlen(h);
        while (n && h[n - 1] == ' ')
            h[--n] = 0;
        for (int j = 0; j < C_NCOLS; j++)
            for (int a = 0; a < 3 && names[k][j][a]; a++)
                if (!strcmp(h, names[k][j][a]) && c->col[j] < 0) c->col[j] = i;
    }
    for (int j = 0; j < 3; j++)
        if (c->col[j] < 0)
            return kvf_fail(err, KVF_EPARSE, "%s:%ld: field '%s': missing from the header", c->path,
                            c->row_line, c->colname[j]),
                   -1;
    return 0;
}

// The header name of column i, for messages ("column N" past the header or before it).
static const char *col_name(const csrc *c, int i, char *buf, size_t n) {
    for (int j = 0; j < C_NCOLS; j++)
        if (c->col[j] == i) return c->colname[j];
    snprintf(buf, n, "column %d", i + 1);
    return buf;
}

// Fails naming field i when it holds a NUL byte (which would end it early and hide the rest).
static int nul_check(const csrc *c, int i, kvf_err *err) {
    if (i < 0 || i >= MAX_FIELDS || !(c->nul_mask >> i & 1)) return 0;
    char buf[32];
    return kvf_fail(err, KVF_EPARSE, "%s:%ld: field '%s': holds a NUL byte", c->path, c->row_line,
                    col_name(c, i, buf, sizeof buf)),
           -1;
}

static int parse_row(csrc *c, trc_rec *rec, kvf_err *err) {
    // the fields in the order they are parsed, then any other field of the row
    if (nul_check(c, c->col[C_TS], err)) return -1;
    const char *ts = field(c, c->col[C_TS]);
    if (!ts || is_blank(ts)) return fail_field(c, err, C_TS, "missing%s", "");
    int64_t t;
    if (!parse_time(ts, &t)) return fail_field(c, err, C_TS, "not a timestamp ('%s')", ts);
    bool zero_out = false, zero_in = false;
    if (nul_check(c, c->col[C_IN], err) || tokens(c, err, C_IN, &rec->in, &zero_in) ||
        nul_check(c, c->col[C_OUT], err) || tokens(c, err, C_OUT, &rec->out, &zero_out))
        return -1;
    for (int i = 0; i < c->nf && i < MAX_FIELDS; i++)
        if (nul_check(c, i, err)) return -1;
    rec->t_ns = t;
    rec->cls = c->cls;
    rec->flags = 0;
    rec->images = 0;
    rec->session = 0;
    rec->turn = 0;
    rec->prev_key = -1;
    rec->think_ns = 0;
    rec->src_bt = 0;
    rec->nb = 0;
    rec->line = c->row_line;
    if (c->base.fmt == TRC_FMT_BURSTGPT) {
        const char *lt = field(c, c->col[C_LOG]);
        if (lt && strstr(lt, "API"))
            rec->cls = TRC_CLASS_OTHER;
        else
            rec->cls = TRC_CLASS_CHATBOT;
        if (zero_out || (lt && (strstr(lt, "fail") || strstr(lt, "Fail"))))
            rec->flags |= TRC_F_FAILED;
        const char *sid = field(c, c->col[C_SESSION]);
        if (sid && !is_blank(sid)) {
            uint64_t h = 0xcbf29ce484222325ULL;
            for (const char *p = sid; *p; p++)
                h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
            h = kvf_hash64(h);
            if (!h) h = 1;
            rec->session = h;
            rec->turn = session_turn(c, h);
        }
    }
    return 0;
}

static int csv_next(trc_source *s, trc_rec *rec, kvf_err *err) {
    csrc *c = (csrc *)s;
    for (;;) {
        int rc = read_row(c, err);
        if (rc < 0) return -1;
        if (rc == 0) {
            if (!c->header_done)
                return kvf_fail(err, KVF_EPARSE, "%s:%ld: empty file (no header)", c->path,
                                c->lines.line + 1),
                       -1;
            if (!c->seq && !s->skipped)
                return kvf_fail(err, KVF_EPARSE, "%s:%ld: no requests (only a header)", c->path,
                                c->lines.line + 1),
                       -1;
            return 0;
        }
        if (!c->header_done) {
            if (c->nul_mask)
                return kvf_fail(err, KVF_EPARSE,
                                "%s:%ld: field 'column %d': header holds a NUL "
                                "byte",
                                c->path, c->row_line, __builtin_ctz(c->nul_mask) + 1),
                       -1;
            if (header(c, err)) return -1;
            c->header_done = true;
            continue;
        }
        if (parse_row(c, rec, err) == 0) {
            rec->key = c->seq++;
            return 1;
        }
        if (!c->opt.skip_bad) return -1;
        s->skipped++;
    }
}

static void csv_close(trc_source *s) {
    csrc *c = (csrc *)s;
    csv_free(&c->p);
    trc_lines_free(&c->lines);
    free(c->path);
    free(c->sess);
    free(c);
}

kvf_status trc_src_csv(trc_source **out, FILE *f, const char *path, trc_format fmt,
                       const trc_options *o, kvf_err *err) {
    csrc *c = kvf_calloc(1, sizeof *c);
    if (csv_init(&c->p, 0)) {
        free(c);
        return kvf_fail(err, KVF_ENOMEM, "%s: cannot initialise the CSV parser", path);
    }
    c->lines.f = f;
    c->path = kvf_strdup(path);
    c->opt = *o;
    c->base.next = csv_next;
    c->base.close = csv_close;
    c->base.fmt = fmt;
    c->base.sorted = true;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    c->cls = fmt == TRC_FMT_AZURE && strstr(base, "code") ? TRC_CLASS_CODING : TRC_CLASS_CHATBOT;
    snprintf(c->base.notes, sizeof c->base.notes,
             "prefix=none (trace has no block ids; no sharing assumed)");
    *out = &c->base;
    return KVF_OK;
}
