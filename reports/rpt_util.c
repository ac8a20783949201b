// reports/rpt_util.c -- text buffer, escaping, number formatting, JSON leaves (rpt_util.h).
#define _POSIX_C_SOURCE 200809L
#include "rpt_util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void rpt_buf_free(rpt_buf *b) {
    if (!b) return;
    free(b->p);
    memset(b, 0, sizeof *b);
}

void rpt_buf_putn(rpt_buf *b, const char *s, size_t n) {
    KVF_ASSERT(b && (s || n == 0));
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1)
            cap *= 2;
        b->p = kvf_realloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void rpt_buf_puts(rpt_buf *b, const char *s) {
    KVF_ASSERT(b && s);
    rpt_buf_putn(b, s, strlen(s));
}

void rpt_buf_printf(rpt_buf *b, const char *fmt, ...) {
    KVF_ASSERT(b && fmt);
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        rpt_buf_putn(b, tmp, (size_t)n);
        return;
    }
    char *big = kvf_malloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    rpt_buf_putn(b, big, (size_t)n);
    free(big);
}

void rpt_buf_html(rpt_buf *b, const char *s) {
    KVF_ASSERT(b);
    if (!s) return;
    const char *run = s;
    for (; *s; s++) {
        const char *rep = NULL;
        switch (*s) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&#39;";
            break;
        default:
            break;
        }
        if (!rep) continue;
        rpt_buf_putn(b, run, (size_t)(s - run));
        rpt_buf_puts(b, rep);
        run = s + 1;
    }
    rpt_buf_putn(b, run, (size_t)(s - run));
}

void rpt_buf_md(rpt_buf *b, const char *s) {
    KVF_ASSERT(b);
    if (!s) return;
    for (; *s; s++) {
        if (*s == '|')
            rpt_buf_puts(b, "\\|");
        else if (*s == '\n' || *s == '\r')
            rpt_buf_putn(b, " ", 1);
        else if (*s == '<')
            rpt_buf_puts(b, "&lt;");
        else
            rpt_buf_putn(b, s, 1);
    }
}

char *rpt_fmt_num(double x, char *out, size_t n) {
    KVF_ASSERT(out && n > 0);
    if (isnan(x))
        snprintf(out, n, "n/a");
    else if (isinf(x))
        snprintf(out, n, x > 0 ? "inf" : "-inf");
    else if (x == floor(x) && fabs(x) < 1e15)
        snprintf(out, n, "%.0f", x);
    else if (fabs(x) >= 1e15 || fabs(x) < 1e-4)
        snprintf(out, n, "%.4g", x);
    else if (fabs(x) >= 1000)
        snprintf(out, n, "%.1f", x);
    else
        snprintf(out, n, "%.4g", x);
    return out;
}

static bool in_list(const char *k, const char *const *skip) {
    for (; skip && *skip; skip++)
        if (!strcmp(k, *skip)) return true;
    return false;
}

static void leaves_rec(json_t *o, const char *prefix, const char *const *skip, rpt_leaf **out,
                       size_t *n, size_t *cap) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        size_t len = strlen(prefix) + strlen(k) + 2;
        char *key = kvf_malloc(len);
        snprintf(key, len, "%s%s%s", prefix, *prefix ? "." : "", k);
        if (json_is_object(v)) {
            if (!in_list(key, skip)) leaves_rec(v, key, skip, out, n, cap);
            free(key);
        } else if (json_is_array(v)) {
            free(key);
        } else {
            kvf_grow((void **)out, cap, *n + 1, sizeof **out);
            (*out)[*n].key = key;
            (*out)[*n].value = v;
            (*n)++;
        }
    }
}

size_t rpt_json_leaves(json_t *obj, const char *const *skip, rpt_leaf **out) {
    KVF_ASSERT(out);
    size_t n = 0, cap = 0;
    *out = NULL;
    if (json_is_object(obj)) leaves_rec(obj, "", skip, out, &n, &cap);
    return n;
}

void rpt_leaves_free(rpt_leaf *l, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(l[i].key);
    free(l);
}

json_t *rpt_json_path(json_t *root, const char *dotted) {
    KVF_ASSERT(dotted);
    char part[256];
    const char *s = dotted;
    json_t *cur = root;
    while (cur && *s) {
        const char *dot = strchr(s, '.');
        size_t len = dot ? (size_t)(dot - s) : strlen(s);
        if (len >= sizeof part) return NULL;
        memcpy(part, s, len);
        part[len] = '\0';
        cur = json_is_object(cur) ? json_object_get(cur, part) : NULL;
        s += len + (dot ? 1 : 0);
    }
    return cur;
}

double rpt_json_num(json_t *root, const char *dotted) {
    json_t *v = rpt_json_path(root, dotted);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

kvf_status rpt_write_text(const char *path, const char *text, size_t n, kvf_err *err) {
    KVF_ASSERT(path && (text || n == 0) && err);
    // written beside, then renamed over path: a failed write leaves the earlier page whole,
    // and a link at path is replaced, never written through
    char tmp[4352];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return kvf_fail(err, KVF_EINVAL, "%s: path too long", path);
    FILE *f = fopen(tmp, "wbx");
    if (!f) return kvf_fail(err, KVF_EIO, "%s: cannot write: %s", tmp, strerror(errno));
    bool ok = fwrite(text, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        remove(tmp);
        return kvf_fail(err, KVF_EIO, "%s: write failed", path);
    }
    if (rename(tmp, path) != 0) {
        kvf_fail(err, KVF_EIO, "%s: cannot replace: %s", path, strerror(errno));
        remove(tmp);
        return err->code;
    }
    return KVF_OK;
}

kvf_status rpt_regular_or_missing(const char *what, const char *path, kvf_err *err) {
    struct stat sb;
    if (stat(path, &sb) != 0 || S_ISREG(sb.st_mode)) return KVF_OK;
    return kvf_fail(err, KVF_EINVAL, "%s %s: %s, not a regular file; refused", what, path,
                    S_ISDIR(sb.st_mode)                          ? "a directory"
                    : S_ISFIFO(sb.st_mode)                       ? "a FIFO"
                    : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                                                                 : "a special file");
}

// The headline figures, in the order the report and compare show them.
const rpt_headline RPT_HEADLINE[] = {
    {"requests.arrived", "requests arrived"},
    {"requests.completed", "requests completed"},
    {"requests.rejected", "requests rejected"},
    {"saturation.state", "saturation"},
    {"ttft_ms.mean", "TTFT mean"},
    {"ttft_ms.p50", "TTFT p50"},
    {"ttft_ms.p90", "TTFT p90"},
    {"ttft_ms.p99", "TTFT p99"},
    {"tpot_ms.mean", "TPOT mean"},
    {"tpot_ms.p50", "TPOT p50"},
    {"tpot_ms.p90", "TPOT p90"},
    {"tpot_ms.p99", "TPOT p99"},
    {"itl_ms.p90", "ITL p90"},
    {"e2e_ms.p50", "end-to-end p50"},
    {"e2e_ms.p90", "end-to-end p90"},
    {"gen_tok_s_per_request.mean", "generation speed per request (tokens/s)"},
    {"throughput.input_tok_s", "input tokens/s"},
    {"throughput.output_tok_s", "output tokens/s"},
    {"throughput.prefill_input_tok_s_per_gpu", "prefill input tokens/s per GPU (hits included)"},
    {"throughput.decode_output_tok_s_per_gpu", "decode output tokens/s per GPU"},
    {"cache.hit_rate", "cache hit rate"},
    {"cache.by_tier.hbm", "hits from HBM"},
    {"cache.by_tier.dram", "hits from DRAM"},
    {"cache.by_tier.ssd", "hits from SSD"},
    {"cache.stored_bytes_peak", "KV store peak"},
    {"gpus.vision", "vision GPUs"},
    {"gpus.prefill", "prefill GPUs"},
    {"gpus.decode", "decode GPUs"},
    {"gpu_hours", "GPU-hours"},
    {"utilization.prefill", "prefill utilisation"},
    {"utilization.decode", "decode utilisation"},
    {"slo.attainment", "SLO attainment"},
    {"slo.goodput_req_s", "goodput"},
    {"slo.goodput_rps", "goodput, class SLOs"},
    {"economics.cost_usd", "cost over the run"},
    {"economics.revenue_usd", "revenue over the run"},
    {"economics.margin", "margin"},
    {"economics.cost_per_gpu_hour_usd", "all-in cost per GPU-hour"},
    {"economics.cost_per_mtok_usd.input", "cost per million input tokens"},
    {"economics.cost_per_mtok_usd.output", "cost per million output tokens"},
    {"economics.payback_days", "payback of capex"},
    {"sim.simulated_s", "simulated time"},
    {"sim.events", "events"},
};
const size_t RPT_HEADLINE_N = sizeof RPT_HEADLINE / sizeof RPT_HEADLINE[0];

char *rpt_fmt_bytes(double x, char *out, size_t n) {
    KVF_ASSERT(out && n > 0);
    if (!isfinite(x)) return rpt_fmt_num(x, out, n);
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
    double a = fabs(x);
    int u = 0;
    while (a >= 999.5 && u < 6) {
        a /= 1000;
        u++;
    }
    if (u == 0)
        snprintf(out, n, "%.0f B", x);
    else
        snprintf(out, n, "%.3g %s", x < 0 ? -a : a, units[u]);
    return out;
}

bool rpt_key_is_bytes(const char *key) {
    if (!key) return false;
    const char *dot = strrchr(key, '.');
    const char *last = dot ? dot + 1 : key;
    // "bytes" as a word of the name ("stored_bytes_peak", "block_bytes"), not a rate
    // ("bytes_per_daily_token")
    for (const char *p = last; (p = strstr(p, "bytes")); p += 5)
        if ((p == last || p[-1] == '_') &&
            (p[5] == 0 || (p[5] == '_' && strncmp(p + 5, "_per", 4))))
            return true;
    return false;
}

char *rpt_fmt_keyed(const char *key, double x, char *out, size_t n) {
    KVF_ASSERT(out && n > 0);
    rpt_unit u = rpt_key_unit(key);
    if (u != RPT_U_RATE || !isfinite(x)) return rpt_fmt_unit(u, x, out, n);
    // a rate says what it counts
    char t[48];
    rpt_fmt_sig(x, 3, t, sizeof t);
    const char *what = strstr(key, "tok_s")                         ? "tokens/s"
                       : strstr(key, "req_s") || strstr(key, "rps") ? "requests/s"
                       : strstr(key, "events_per_s")                ? "events/s"
                                                                    : "/s";
    snprintf(out, n, "%s%s%s", t, what[0] == '/' ? "" : " ", what);
    return out;
}

// ---- units --------------------------------------------------------------------------------

static bool ends_with(const char *s, size_t len, const char *suf) {
    size_t m = strlen(suf);
    return len >= m && !strncmp(s + len - m, suf, m);
}

static bool has_word(const char *s, size_t len, const char *w) {
    size_t m = strlen(w);
    for (size_t i = 0; i + m <= len; i++)
        if (!strncmp(s + i, w, m) && (i == 0 || s[i - 1] == '_') &&
            (i + m == len || s[i + m] == '_'))
            return true;
    return false;
}

// The unit of one part of a key (no dots), or RPT_U_NUM.
static rpt_unit part_unit(const char *p, size_t len) {
    if (ends_with(p, len, "_pct")) return RPT_U_PCT;
    if (has_word(p, len, "usd")) return RPT_U_USD;
    if (ends_with(p, len, "Bps")) return RPT_U_BPS;
    if (ends_with(p, len, "tok_s") || ends_with(p, len, "req_s") || ends_with(p, len, "rps") ||
        ends_with(p, len, "_per_s"))
        return RPT_U_RATE;
    if (ends_with(p, len, "_ms") || has_word(p, len, "ms")) return RPT_U_MS;
    if (ends_with(p, len, "_days") || (len == 4 && !strncmp(p, "days", 4))) return RPT_U_DAYS;
    if (ends_with(p, len, "_s") && !has_word(p, len, "per")) return RPT_U_S;
    bool per = has_word(p, len, "per");
    if (!per &&
        (has_word(p, len, "rate") || has_word(p, len, "margin") || has_word(p, len, "attainment") ||
         has_word(p, len, "share") || has_word(p, len, "frac") || has_word(p, len, "utilization") ||
         has_word(p, len, "utilisation")))
        return RPT_U_FRAC;
    return RPT_U_NUM;
}

rpt_unit rpt_key_unit(const char *key) {
    if (!key || !*key) return RPT_U_NUM;
    if (rpt_key_is_bytes(key)) return RPT_U_BYTES;
    const char *dot = strrchr(key, '.');
    const char *last = dot ? dot + 1 : key;
    rpt_unit u = part_unit(last, strlen(last));
    if (u != RPT_U_NUM) return u;
    // the unit of a statistic is its parent's ("ttft_ms.p90", "utilization.prefill",
    // "cache.by_tier.hbm", "cost_per_mtok_usd.input")
    if (!dot) return RPT_U_NUM;
    const char *pe = dot, *ps = pe;
    while (ps > key && ps[-1] != '.')
        ps--;
    u = part_unit(ps, (size_t)(pe - ps));
    if (u == RPT_U_FRAC || u == RPT_U_MS || u == RPT_U_USD || u == RPT_U_S || u == RPT_U_RATE ||
        u == RPT_U_PCT)
        return u;
    size_t pl = (size_t)(pe - ps);
    if (pl == 7 && !strncmp(ps, "by_tier", 7)) return RPT_U_FRAC;   // shares of the hits
    // a byte count split by something ("load_bytes.ssd", "steady_state_bytes_by_retention.x")
    for (const char *q = ps; q + 5 <= pe; q++)
        if (!strncmp(q, "bytes", 5) && (q == ps || q[-1] == '_') &&
            (q + 5 == pe || (q[5] == '_' && strncmp(q + 5, "_per", 4))))
            return RPT_U_BYTES;
    return RPT_U_NUM;
}

char *rpt_fmt_sig(double x, int sig, char *out, size_t n) {
    KVF_ASSERT(out && n > 0 && sig >= 1 && sig <= 17);
    if (!isfinite(x)) return rpt_fmt_num(x, out, n);
    double a = fabs(x);
    if (a < 1e4) {
        if (x == floor(x)) {
            snprintf(out, n, "%.0f", x);
            return out;
        }
        int mag = a > 0 ? (int)floor(log10(a)) : 0;
        int dec = sig - 1 - mag;
        if (dec < 0) dec = 0;
        if (dec > 12) {   // tiny: keep sig digits without an exponent up to 1e-12
            dec = 12;
        }
        snprintf(out, n, "%.*f", dec, x);
        return out;
    }
    static const char *const pre[] = {"k", "M", "G", "T", "P", "E"};
    int k = -1;
    while (a >= 999.95 && k < 5) {
        a /= 1000;
        k++;
    }
    int mag = (int)floor(log10(a));
    int dec = sig - 1 - mag;
    if (dec < 0) dec = 0;
    snprintf(out, n, "%s%.*f %s", x < 0 ? "-" : "", dec, a, pre[k]);
    return out;
}

char *rpt_fmt_duration(double s, char *out, size_t n) {
    KVF_ASSERT(out && n > 0);
    if (!isfinite(s)) return rpt_fmt_num(s, out, n);
    static const struct {
        double below, div;
        const char *unit;
    } steps[] = {
        {1e-6, 1e-9, "ns"}, {1e-3, 1e-6, "us"},  {1, 1e-3, "ms"},        {120, 1, "s"},
        {3600, 60, "min"},  {172800, 3600, "h"}, {INFINITY, 86400, "d"},
    };
    double a = fabs(s);
    size_t i = 0;
    while (a >= steps[i].below)
        i++;
    if (s == 0) {
        snprintf(out, n, "0 s");
        return out;
    }
    double v = s / steps[i].div;
    double av = fabs(v);
    int dec = av >= 100 ? 0 : av >= 10 ? 1 : 2;
    snprintf(out, n, "%.*f %s", dec, v, steps[i].unit);
    return out;
}

char *rpt_fmt_pct(double frac, char *out, size_t n) {
    KVF_ASSERT(out && n > 0);
    if (!isfinite(frac)) return rpt_fmt_num(frac, out, n);
    double v = 100 * frac, a = fabs(v);
    int dec = a >= 99.95 || a == 0 ? (v == floor(v) ? 0 : 1) : a >= 10 ? 1 : a >= 1 ? 2 : 3;
    if (a >= 100 && v == floor(v)) dec = 0;
    snprintf(out, n, "%.*f %%", dec, v);
    return out;
}

static char *fmt_usd(double x, char *out, size_t n) {
    char t[48];
    double a = fabs(x);
    if (a >= 1e6) {
        rpt_fmt_sig(a, 3, t, sizeof t);
    } else if (a >= 1000) {
        long long v = (long long)llround(a);
        snprintf(t, sizeof t, "%lld,%03lld", v / 1000, v % 1000);
    } else if (a == 0) {
        snprintf(t, sizeof t, "0");
    } else {
        rpt_fmt_sig(a, a < 100 ? 3 : 4, t, sizeof t);
        if (a == floor(a)) snprintf(t, sizeof t, "%.0f", a);
    }
    snprintf(out, n, "%s$%s", x < 0 ? "-" : "", t);
    return out;
}

char *rpt_fmt_unit(rpt_unit u, double x, char *out, size_t n) {
    KVF_ASSERT(out && n > 0);
    if (isnan(x)) return rpt_fmt_num(x, out, n);
    if (isinf(x) && x > 0 && u == RPT_U_DAYS) {
        snprintf(out, n, "never");
        return out;
    }
    if (!isfinite(x)) return rpt_fmt_num(x, out, n);
    char t[48];
    switch (u) {
    case RPT_U_FRAC:
        return rpt_fmt_pct(x, out, n);
    case RPT_U_PCT:
        rpt_fmt_sig(x, 3, t, sizeof t);
        snprintf(out, n, "%s %%", t);
        return out;
    case RPT_U_BYTES:
        return rpt_fmt_bytes(x, out, n);
    case RPT_U_BPS:
        rpt_fmt_bytes(x, t, sizeof t);
        snprintf(out, n, "%s/s", t);
        return out;
    case RPT_U_MS:
        return rpt_fmt_duration(x / 1000, out, n);
    case RPT_U_S:
        return rpt_fmt_duration(x, out, n);
    case RPT_U_DAYS:
        return rpt_fmt_duration(x * 86400, out, n);
    case RPT_U_USD:
        return fmt_usd(x, out, n);
    case RPT_U_RATE:
        rpt_fmt_sig(x, 3, t, sizeof t);
        snprintf(out, n, "%s/s", t);
        return out;
    case RPT_U_NUM:
        break;
    }
    if (x == floor(x) && fabs(x) < 1e7) {
        snprintf(out, n, "%.0f", x);
        return out;
    }
    return rpt_fmt_sig(x, 4, out, n);
}

// Code names and the words shown for them.
static const struct {
    const char *code, *words;
} WORDS[] = {
    {"ttft", "TTFT"},      {"tpot", "TPOT"},
    {"itl", "ITL"},        {"e2e", "end-to-end"},
    {"slo", "SLO"},        {"kv", "KV"},
    {"hbm", "HBM"},        {"dram", "DRAM"},
    {"ssd", "SSD"},        {"gpu", "GPU"},
    {"gpus", "GPUs"},      {"mtok", "million tokens"},
    {"usd", ""},           {"ms", ""},
    {"tok", "tokens"},     {"req", "requests"},
    {"rps", "requests/s"}, {"pct", "%"},
    {"p50", "p50"},        {"p90", "p90"},
    {"p99", "p99"},        {"utilization", "utilisation"},
    {"Bps", "bytes/s"},    {"tb", "TB"},
    {"flops", "FLOPs"},    {"ep", "EP"},
    {"tp", "TP"},          {"gen", "generation"},
    {"mape", "MAPE"},      {"ttl", "retention"},
    {"kwh", "kWh"},
};

void rpt_key_words(const char *key, char *out, size_t n) {
    KVF_ASSERT(out && n > 0);
    out[0] = '\0';
    if (!key) return;
    for (size_t i = 0; i < RPT_HEADLINE_N; i++)
        if (!strcmp(RPT_HEADLINE[i].key, key)) {
            snprintf(out, n, "%s", RPT_HEADLINE[i].label);
            return;
        }
    size_t o = 0;
    const char *p = key;
    bool first_word = true;
    while (*p && o + 1 < n) {
        if (*p == '.') {
            if (o + 2 < n) {
                out[o++] = ',';
                out[o++] = ' ';
            }
            p++;
            first_word = true;
            continue;
        }
        size_t len = strcspn(p, "._");
        const char *w = NULL;
        // rates and durations: "tok_s" -> "tokens/s", "per_s" and a trailing "_s" dropped (the
        // value carries its unit)
        bool s_next = p[len] == '_' && p[len + 1] == 's' &&
                      (p[len + 2] == '\0' || p[len + 2] == '.' || p[len + 2] == '_');
        if (s_next &&
            ((len == 3 && !strncmp(p, "tok", 3)) || (len == 3 && !strncmp(p, "req", 3)))) {
            const char *rw = p[0] == 't' ? "tokens/s" : "requests/s";
            if (!first_word && o > 0 && out[o - 1] != ' ' && o + 1 < n) out[o++] = ' ';
            size_t m = strlen(rw);
            if (o + m >= n) m = n - o - 1;
            memcpy(out + o, rw, m);
            o += m;
            first_word = false;
            p += len + 2;
            if (*p == '_') p++;
            continue;
        }
        if ((len == 3 && !strncmp(p, "per", 3) && s_next) ||
            (len == 1 && p[0] == 's' && (p[1] == '\0' || p[1] == '.') && !first_word)) {
            p += len + (len == 3 ? 2 : 0);
            if (*p == '_') p++;
            continue;
        }
        for (size_t i = 0; i < sizeof WORDS / sizeof WORDS[0]; i++)
            if (strlen(WORDS[i].code) == len && !strncmp(WORDS[i].code, p, len)) w = WORDS[i].words;
        if (w && !*w) {   // a unit the value carries: dropped from the label
            p += len;
            if (*p == '_') p++;
            continue;
        }
        if (!first_word && o > 0 && out[o - 1] != ' ' && o + 1 < n) out[o++] = ' ';
        if (w) {
            size_t m = strlen(w);
            if (o + m >= n) m = n - o - 1;
            memcpy(out + o, w, m);
            o += m;
        } else {
            size_t m = len;
            if (o + m >= n) m = n - o - 1;
            memcpy(out + o, p, m);
            o += m;
        }
        first_word = false;
        p += len;
        if (*p == '_') p++;
    }
    while (o > 0 && (out[o - 1] == ' ' || out[o - 1] == ','))
        o--;
    out[o] = '\0';
}

char *rpt_fmt_text_value(const char *text, char *out, size_t n) {
    KVF_ASSERT(out && n > 0);
    if (!text) text = "";
    char *end = NULL;
    double v = strtod(text, &end);
    size_t digits = 0;
    for (const char *q = text; *q; q++)
        digits += *q >= '0' && *q <= '9';
    if (end && end != text && *end == '\0' && isfinite(v) && digits > 15) {
        snprintf(out, n, "%.15g", v);
        return out;
    }
    snprintf(out, n, "%s", text);
    return out;
}

bool rpt_on_path(const char *prog) {
    KVF_ASSERT(prog && *prog && !strchr(prog, '/'));
    const char *path = getenv("PATH");
    if (!path) return false;
    char buf[4096];
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        if (len > 0 && len + strlen(prog) + 2 < sizeof buf) {
            memcpy(buf, path, len);
            snprintf(buf + len, sizeof buf - len, "/%s", prog);
            if (access(buf, X_OK) == 0) return true;
        }
        if (!colon) break;
        path = colon + 1;
    }
    return false;
}

int rpt_gnuplot(const char *dir, const char *script) {
    KVF_ASSERT(dir && script);
    char log_path[4200];
    snprintf(log_path, sizeof log_path, "%s/gnuplot.log", dir);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (chdir(dir) != 0) _exit(127);
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

void rpt_buf_text_numbers(rpt_buf *b, const char *text) {
    KVF_ASSERT(b);
    if (!text) return;
    const char *run = text, *p = text;
    while (*p) {
        bool start = (*p >= '0' && *p <= '9') || (*p == '-' && p[1] >= '0' && p[1] <= '9');
        bool after_word =
            p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '.' || p[-1] == '_');
        if (!start || after_word) {
            p++;
            continue;
        }
        char *end = NULL;
        double v = strtod(p, &end);
        size_t digits = 0;
        for (const char *q = p; q < end; q++)
            digits += *q >= '0' && *q <= '9';
        bool word_follows = *end && (isalnum((unsigned char)*end) || *end == '_');
        if (end > p && digits > 15 && isfinite(v) && !word_follows) {
            rpt_buf_putn(b, run, (size_t)(p - run));
            rpt_buf_printf(b, "%.15g", v);
            run = end;
        }
        p = end > p ? end : p + 1;
    }
    rpt_buf_puts(b, run);
}
