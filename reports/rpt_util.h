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

void rpt_buf_free(rpt_buf *b);
void rpt_buf_puts(rpt_buf *b, const char *s);
void rpt_buf_putn(rpt_buf *b, const char *s, size_t n);
void rpt_buf_printf(rpt_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Appends s with & < > " ' escaped for HTML text and attribute values.
void rpt_buf_html(rpt_buf *b, const char *s);
// Appends s for a Markdown table cell: | escaped, newlines as spaces.
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
// A number for the table cell of key: bytes formatted as rpt_fmt_bytes, others rpt_fmt_num.
char *rpt_fmt_keyed(const char *key, double x, char *out, size_t n);

// One scalar leaf of a JSON object tree.
typedef struct rpt_leaf {
    char *key;         // dotted path
    json_t *value;     // borrowed: number, string, true/false or null
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

// True when prog is an executable file in a folder of $PATH.
bool rpt_on_path(const char *prog);
// Runs `gnuplot script` in dir, its output into dir/gnuplot.log; returns the wait status
// (0 = exited 0), -1 when it could not fork (errno set).
int rpt_gnuplot(const char *dir, const char *script);

// Writes text to path (replacing it). KVF_EIO naming the path.
kvf_status rpt_write_text(const char *path, const char *text, size_t n, kvf_err *err);

// Headline figures: summary.json key and the label shown beside it.
typedef struct rpt_headline {
    const char *key;
    const char *label;
} rpt_headline;
extern const rpt_headline RPT_HEADLINE[];
extern const size_t RPT_HEADLINE_N;

#endif
