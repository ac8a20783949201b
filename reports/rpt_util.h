// reports/rpt_util.h -- internals shared by the report writer and compare (not public):
// a growable text buffer, HTML/Markdown escaping, number formatting for tables, and a
// flattened view of a JSON object's scalar leaves ("ttft_ms.p90").
#ifndef RPT_UTIL_H
#define RPT_UTIL_H

#include <jansson.h>
#include <stdio.h>

#include "kvf.h"

typedef struct rpt_buf {
    char *p;      // NUL-terminated text (never NULL after the first append)
    size_t n;     // length without the NUL
    size_t cap;   // allocated bytes
} rpt_buf;

// A zeroed rpt_buf is empty; the buffer owns p. Appends abort when memory runs out
// (kvf_realloc). Frees p and zeroes *b; accepts NULL.
void rpt_buf_free(rpt_buf *b);
// Appends the NUL-terminated s (not NULL).
void rpt_buf_puts(rpt_buf *b, const char *s);
// Appends n bytes of s (s may be NULL only when n is 0).
void rpt_buf_putn(rpt_buf *b, const char *s, size_t n);
// Appends printf-formatted text of any length.
void rpt_buf_printf(rpt_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Appends s with & < > " ' escaped for HTML text and attribute values (NULL: nothing).
void rpt_buf_html(rpt_buf *b, const char *s);
// Appends s for a Markdown table cell: | escaped, newlines as spaces (NULL: nothing).
void rpt_buf_md(rpt_buf *b, const char *s);

// Formats a number for a table cell: integers exactly, others to 4-6 significant digits;
// NaN/inf as "n/a"/"inf". Returns out.
char *rpt_fmt_num(double x, char *out, size_t n);
// Formats a byte count in decimal units to 3 significant digits ("9.99 TB", "512 B");
// NaN/inf as rpt_fmt_num does. Returns out.
char *rpt_fmt_bytes(double x, char *out, size_t n);
// True when the dotted key names a byte count: "bytes" is a word of its last part, not
// followed by "_per" ("cache.stored_bytes_peak" yes, "ssd_bytes_per_daily_token" no).
bool rpt_key_is_bytes(const char *key);
// A number for the table cell of key, in the unit rpt_key_unit gives it (rpt_fmt_value).
char *rpt_fmt_keyed(const char *key, double x, char *out, size_t n);

// ---- one unit system for every page -------------------------------------------------------
// What a summary.json figure measures, read off its dotted key (design.md §5 names):
typedef enum rpt_unit {
    RPT_U_NUM = 0,   // a plain number: 3-4 significant digits, k/M/G above 10,000
    RPT_U_FRAC,      // a fraction in [0, 1] (hit rates, margin, attainment, shares,
                     // utilisations): shown in percent
    RPT_U_PCT,       // already in percent (error_pct, gap_pct)
    RPT_U_BYTES,     // bytes: B, kB, MB, GB, TB, PB by magnitude
    RPT_U_BPS,       // bytes per second: kB/s ... by magnitude
    RPT_U_MS,        // a duration in milliseconds (ttft_ms.p90, ttft_p90_ms)
    RPT_U_S,         // a duration in seconds (simulated_s, drain_s)
    RPT_U_DAYS,      // a duration in days (payback_days)
    RPT_U_USD,       // money (any key with usd): "$1,234", "$0.0600", "$1.23 M"
    RPT_U_RATE,      // per second (tok_s, req_s, rps, events_per_s): SI prefix by magnitude
} rpt_unit;
// The unit of a summary.json key; RPT_U_NUM when the key says nothing. key may be NULL.
rpt_unit rpt_key_unit(const char *key);
// x in unit u as text for people; NaN as "n/a", +inf as "never" for days, else "inf".
// Durations pick ns, us, ms, s, min, h or d by magnitude; 3 significant digits.
// Returns out (n > 0).
char *rpt_fmt_unit(rpt_unit u, double x, char *out, size_t n);
// A number to sig (3 or 4) significant digits, never in exponent form: k, M, G, T, P above
// 10,000 ("37.6 k"), integers below 10,000 exactly. Returns out.
char *rpt_fmt_sig(double x, int sig, char *out, size_t n);
// A duration of s seconds: "943 ms", "5.40 s", "1.89 h", "3.00 d". Returns out.
char *rpt_fmt_duration(double s, char *out, size_t n);
// A fraction in percent to 3 significant digits ("94.8 %", "0.12 %", "100 %"). Returns out.
char *rpt_fmt_pct(double frac, char *out, size_t n);
// A summary.json key in words for a label: the headline label when the key has one, else
// its parts with words for the code names ("cache.by_tier.hbm" -> "cache, by tier, HBM").
void rpt_key_words(const char *key, char *out, size_t n);
// A value stored as text (run table, configuration): a number with more than 15 significant
// digits ("0.69999999999999996") rewritten to the shortest form that reads back the same to
// 15 digits ("0.7"); other text unchanged. Returns out.
char *rpt_fmt_text_value(const char *text, char *out, size_t n);
// Appends text with every number in it of more than 15 significant digits written to 15
// ("ratio: 0.69999999999999996" -> "ratio: 0.7"); words with digits are left alone.
void rpt_buf_text_numbers(rpt_buf *b, const char *text);

// One scalar leaf of a JSON object tree.
typedef struct rpt_leaf {
    char *key;       // dotted path
    json_t *value;   // borrowed: number, string, true/false or null
} rpt_leaf;

// Collects the scalar leaves of obj in document order; arrays are skipped, objects whose
// dotted path is in skip (NULL-terminated list) are not descended. Caller frees with
// rpt_leaves_free.
size_t rpt_json_leaves(json_t *obj, const char *const *skip, rpt_leaf **out);
void rpt_leaves_free(rpt_leaf *l, size_t n);
// The value at a dotted path, or NULL.
json_t *rpt_json_path(json_t *root, const char *dotted);
// Number at a dotted path: NaN when missing or not a number.
double rpt_json_num(json_t *root, const char *dotted);

// True when prog (a bare name, no '/') is an executable file in a folder of $PATH.
bool rpt_on_path(const char *prog);
// Runs `gnuplot script` in dir, its output into dir/gnuplot.log; returns the wait status
// (0 = exited 0), -1 when it could not fork (errno set).
int rpt_gnuplot(const char *dir, const char *script);

// Writes text to path (replacing it). KVF_EIO naming the path.
kvf_status rpt_write_text(const char *path, const char *text, size_t n, kvf_err *err);
// KVF_EINVAL "WHAT PATH: a FIFO, not a regular file; refused" when path exists and is not a
// regular file (a FIFO would block the reader; a directory or a device is no summary or page);
// missing, or a regular file (through a link too), is KVF_OK.
kvf_status rpt_regular_or_missing(const char *what, const char *path, kvf_err *err);

// Headline figures: summary.json key and the label shown beside it.
typedef struct rpt_headline {
    const char *key;
    const char *label;
} rpt_headline;
extern const rpt_headline RPT_HEADLINE[];
extern const size_t RPT_HEADLINE_N;

#endif
