// reports/rpt_util.c -- text buffer, escaping, number formatting, JSON leaves (rpt_util.h).
#define _POSIX_C_SOURCE 200809L
#include "rpt_util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void rpt_buf_free(rpt_buf *b) {
    if (!b) return;
    free(b->p);
    memset(b, 0, sizeof *b);
}

void rpt_buf_putn(rpt_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        b->p = kvf_realloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void rpt_buf_puts(rpt_buf *b, const char *s) { rpt_buf_putn(b, s, strlen(s)); }

void rpt_buf_printf(rpt_buf *b, const char *fmt, ...) {
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
    if (!s) return;
    const char *run = s;
    for (; *s; s++) {
        const char *rep = NULL;
        switch (*s) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        default: break;
        }
        if (!rep) continue;
        rpt_buf_putn(b, run, (size_t)(s - run));
        rpt_buf_puts(b, rep);
        run = s + 1;
    }
    rpt_buf_putn(b, run, (size_t)(s - run));
}

void rpt_buf_md(rpt_buf *b, const char *s) {
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
    size_t n = 0, cap = 0;
    *out = NULL;
    if (json_is_object(obj)) leaves_rec(obj, "", skip, out, &n, &cap);
    return n;
}

void rpt_leaves_free(rpt_leaf *l, size_t n) {
    for (size_t i = 0; i < n; i++) free(l[i].key);
    free(l);
}

json_t *rpt_json_path(json_t *root, const char *dotted) {
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
    FILE *f = fopen(path, "wb");
    if (!f) return kvf_fail(err, KVF_EIO, "%s: cannot write", path);
    bool ok = fwrite(text, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok) return kvf_fail(err, KVF_EIO, "%s: write failed", path);
    return KVF_OK;
}

// The headline figures, in the order the report and compare show them.
const rpt_headline RPT_HEADLINE[] = {
    {"requests.arrived", "requests arrived"},
    {"requests.completed", "requests completed"},
    {"requests.rejected", "requests rejected"},
    {"saturation.state", "saturation (stable / backlogged / overloaded)"},
    {"ttft_ms.mean", "TTFT mean (ms)"},
    {"ttft_ms.p50", "TTFT p50 (ms)"},
    {"ttft_ms.p90", "TTFT p90 (ms)"},
    {"ttft_ms.p99", "TTFT p99 (ms)"},
    {"tpot_ms.mean", "TPOT mean (ms)"},
    {"tpot_ms.p50", "TPOT p50 (ms)"},
    {"tpot_ms.p90", "TPOT p90 (ms)"},
    {"tpot_ms.p99", "TPOT p99 (ms)"},
    {"itl_ms.p90", "ITL p90 (ms)"},
    {"e2e_ms.p50", "end-to-end p50 (ms)"},
    {"e2e_ms.p90", "end-to-end p90 (ms)"},
    {"gen_tok_s_per_request.mean", "generation speed per request (tok/s)"},
    {"throughput.input_tok_s", "input tokens/s"},
    {"throughput.output_tok_s", "output tokens/s"},
    {"throughput.prefill_input_tok_s_per_gpu", "prefill input tok/s per GPU (cache-inclusive)"},
    {"throughput.decode_output_tok_s_per_gpu", "decode output tok/s per GPU"},
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
    {"slo.goodput_req_s", "goodput (req/s)"},
    {"economics.cost_usd", "cost (USD, run period)"},
    {"economics.revenue_usd", "revenue (USD, run period)"},
    {"economics.margin", "margin (fraction of revenue)"},
    {"economics.cost_per_gpu_hour_usd", "all-in cost per GPU-hour (USD)"},
    {"economics.cost_per_mtok_usd.input", "cost per M input tokens (USD)"},
    {"economics.cost_per_mtok_usd.output", "cost per M output tokens (USD)"},
    {"economics.payback_days", "payback (days)"},
    {"sim.simulated_s", "simulated time (s)"},
    {"sim.events", "events"},
};
const size_t RPT_HEADLINE_N = sizeof RPT_HEADLINE / sizeof RPT_HEADLINE[0];

char *rpt_fmt_bytes(double x, char *out, size_t n) {
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
        if ((p == last || p[-1] == '_') && (p[5] == 0 || (p[5] == '_' && strncmp(p + 5, "_per", 4))))
            return true;
    return false;
}

char *rpt_fmt_keyed(const char *key, double x, char *out, size_t n) {
    return rpt_key_is_bytes(key) ? rpt_fmt_bytes(x, out, n) : rpt_fmt_num(x, out, n);
}

bool rpt_on_path(const char *prog) {
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
