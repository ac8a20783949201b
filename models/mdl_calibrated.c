// models/mdl_calibrated.c -- engine profiles (CSV from `kvfleet engine profile`), the
// calibrated step-time model that interpolates them, and the fit of the roofline's efficiency
// factors to a profile.
//
// Tables. Prefill rows form columns of equal new_tokens, decode rows columns of equal batch;
// inside a column points are sorted by context:
//
//   new_tokens / batch ->   x0        x1        x2
//                          (y,v)     (y,v)     (y,v)      y = context, v = median ns
//                          (y,v)     (y,v)     ...
//
// A query (x, y) interpolates linearly in y inside the two columns around x, then linearly in
// x. Columns need not share their contexts (profiles skip shapes that do not fit memory), and
// a measured point comes back exactly. Step costs that are linear in tokens, batch or context
// (weight streaming, KV reads, GEMMs) are reproduced exactly between grid points, which a
// log-space interpolation would not do.
//
// Above the table (x beyond the last column, y above a column's last point) the answer is the
// roofline of the same batch times the measured/roofline ratio of the nearest measured point,
// and the step is flagged extrapolated: that is where real costs bend (compute saturation,
// cache and memory limits). Below the table (fewer tokens or less context than the smallest
// measured) the first two points are extended linearly, never below half the first one, and
// not flagged: costs only shrink toward zero work, the fixed part stays, and short chunks
// (cache hits leave few tokens to compute) and folded multi-chunk batches land there often.
#include "mdl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char PROFILE_HEADER[] =
    "model,hardware,backend,op,batch,new_tokens,context,median_ns,p10_ns,p90_ns,repeats,flops,"
    "bytes";

// ---- profile CSV -----------------------------------------------------------------------

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = 0;
    return s;
}

static bool parse_num(const char *s, double *out) {
    char *end;
    if (!*s) return false;
    double d = strtod(s, &end);
    if (*end || !isfinite(d)) return false;
    *out = d;
    return true;
}

static bool parse_uint(const char *s, uint32_t *out) {
    double d;
    if (!parse_num(s, &d) || d < 0 || d != floor(d) || d > 4294967295.0) return false;
    *out = (uint32_t)d;
    return true;
}

static void copy_name(char *dst, const char *src) {
    snprintf(dst, MDL_NAME_MAX, "%s", src);
}

static int row_key_cmp(const void *a, const void *b) {
    const mdl_profile_row *x = *(const mdl_profile_row *const *)a;
    const mdl_profile_row *y = *(const mdl_profile_row *const *)b;
    int c = strcmp(x->model, y->model);
    if (c) return c;
    if (x->op != y->op) return x->op < y->op ? -1 : 1;
    if (x->batch != y->batch) return x->batch < y->batch ? -1 : 1;
    if (x->new_tokens != y->new_tokens) return x->new_tokens < y->new_tokens ? -1 : 1;
    if (x->context != y->context) return x->context < y->context ? -1 : 1;
    return x->line - y->line;
}

void mdl_profile_free(mdl_profile *p) {
    if (!p) return;
    free(p->rows);
    p->rows = NULL;
    p->n = 0;
}

// Parses one data line (already split into 13 fields) into *r.
static kvf_status parse_row(mdl_profile_row *r, char **f, const char *path, int line,
                            kvf_err *err) {
#define BADF(name, what)                                                                           \
    kvf_fail(err, KVF_EPARSE, "%s:%d: field '%s': expected %s, got '%s'", path, line, #name, what, \
             f[idx_##name])
    enum {
        idx_model,
        idx_hardware,
        idx_backend,
        idx_op,
        idx_batch,
        idx_new_tokens,
        idx_context,
        idx_median_ns,
        idx_p10_ns,
        idx_p90_ns,
        idx_repeats,
        idx_flops,
        idx_bytes
    };
    memset(r, 0, sizeof *r);
    r->line = line;
    if (!*f[idx_model] || strlen(f[idx_model]) >= MDL_NAME_MAX)
        return BADF(model, "a model name of 1 to 63 characters");
    copy_name(r->model, f[idx_model]);
    if (kvf_streq(f[idx_op], "prefill"))
        r->op = MDL_OP_PREFILL;
    else if (kvf_streq(f[idx_op], "decode"))
        r->op = MDL_OP_DECODE;
    else if (kvf_streq(f[idx_op], "host_overhead"))
        r->op = MDL_OP_HOST;
    else
        return BADF(op, "prefill, decode or host_overhead");
    if (!parse_uint(f[idx_batch], &r->batch)) return BADF(batch, "a non-negative integer");
    if (!parse_uint(f[idx_new_tokens], &r->new_tokens))
        return BADF(new_tokens, "a non-negative integer");
    if (!parse_num(f[idx_context], &r->context) || r->context < 0)
        return BADF(context, "a non-negative number");
    if (!parse_num(f[idx_median_ns], &r->median_ns) || r->median_ns <= 0)
        return BADF(median_ns, "a positive number");
    double d;
    if (*f[idx_p10_ns] && (!parse_num(f[idx_p10_ns], &r->p10_ns) || r->p10_ns < 0))
        return BADF(p10_ns, "a non-negative number");
    if (*f[idx_p90_ns] && (!parse_num(f[idx_p90_ns], &r->p90_ns) || r->p90_ns < 0))
        return BADF(p90_ns, "a non-negative number");
    if (*f[idx_repeats] && !parse_uint(f[idx_repeats], &r->repeats))
        return BADF(repeats, "a non-negative integer");
    if (*f[idx_flops] && (!parse_num(f[idx_flops], &d) || d < 0))
        return BADF(flops, "a non-negative number");
    r->flops = *f[idx_flops] ? d : 0;
    if (*f[idx_bytes] && (!parse_num(f[idx_bytes], &d) || d < 0))
        return BADF(bytes, "a non-negative number");
    r->bytes = *f[idx_bytes] ? d : 0;
    if (r->op == MDL_OP_PREFILL && (r->batch != 1 || r->new_tokens == 0))
        return kvf_fail(err, KVF_EPARSE,
                        "%s:%d: field 'batch': a prefill row has batch 1 and new_tokens > 0", path,
                        line);
    if (r->op == MDL_OP_DECODE && (r->batch == 0 || r->new_tokens != 1))
        return kvf_fail(err, KVF_EPARSE,
                        "%s:%d: field 'new_tokens': a decode row has new_tokens 1 and batch > 0",
                        path, line);
    if (r->op == MDL_OP_HOST && r->batch == 0)
        return BADF(batch, "a positive batch for host_overhead");
#undef BADF
    return KVF_OK;
}

kvf_status mdl_profile_load(mdl_profile *p, const char *path, kvf_err *err) {
    memset(p, 0, sizeof *p);
    snprintf(p->path, sizeof p->path, "%s", path);
    char *buf = NULL;
    kvf_status st = kvf_read_file(path, &buf, NULL, err);
    if (st) return st == KVF_ENOENT ? kvf_fail(err, KVF_ENOENT, "%s: no such profile", path) : st;
    size_t cap = 0;
    bool header = false;
    int line = 0;
    mdl_profile_row **idx = NULL;
    char *save = NULL;
    for (char *raw = buf; raw; raw = save) {
        char *nl = strchr(raw, '\n');
        save = nl ? nl + 1 : NULL;
        if (nl) *nl = 0;
        line++;
        char *s = trim(raw);
        if (!*s) continue;
        if (*s == '#') {
            char *k = trim(s + 1), *colon = strchr(k, ':');
            if (!colon) continue;
            *colon = 0;
            char *v = trim(colon + 1);
            k = trim(k);
            if (kvf_streq(k, "model")) copy_name(p->model, v);
            if (kvf_streq(k, "hardware")) copy_name(p->hardware, v);
            if (kvf_streq(k, "backend")) copy_name(p->backend, v);
            continue;
        }
        if (!header) {
            if (!kvf_streq(s, PROFILE_HEADER)) {
                st = kvf_fail(err, KVF_EPARSE, "%s:%d: expected the header '%s'", path, line,
                              PROFILE_HEADER);
                goto fail;
            }
            header = true;
            continue;
        }
        char *f[13];
        int nf = 0;
        for (char *q = s;;) {
            char *c = strchr(q, ',');
            if (nf < 13) f[nf] = trim(q);
            nf++;
            if (!c) break;
            *c = 0;
            q = c + 1;
        }
        if (nf != 13) {
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: expected 13 comma-separated fields, got %d",
                          path, line, nf);
            goto fail;
        }
        kvf_grow((void **)&p->rows, &cap, p->n + 1, sizeof *p->rows);
        if ((st = parse_row(&p->rows[p->n], f, path, line, err))) goto fail;
        mdl_profile_row *r = &p->rows[p->n];
        if (!p->hardware[0]) copy_name(p->hardware, f[1]);
        if (!p->backend[0]) copy_name(p->backend, f[2]);
        if (!p->model[0]) copy_name(p->model, r->model);
        p->n++;
    }
    if (!header) {
        st = kvf_fail(err, KVF_EPARSE, "%s:%d: no header line '%s'", path, line, PROFILE_HEADER);
        goto fail;
    }
    // Each shape once.
    idx = kvf_malloc((p->n ? p->n : 1) * sizeof *idx);
    for (size_t i = 0; i < p->n; i++)
        idx[i] = &p->rows[i];
    qsort(idx, p->n, sizeof *idx, row_key_cmp);
    for (size_t i = 1; i < p->n; i++) {
        mdl_profile_row *a = idx[i - 1], *b = idx[i];
        if (kvf_streq(a->model, b->model) && a->op == b->op && a->batch == b->batch &&
            a->new_tokens == b->new_tokens && a->context == b->context) {
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: shape repeats the row on line %d", path, b->line,
                          a->line);
            goto fail;
        }
    }
    free(idx);
    free(buf);
    return KVF_OK;
fail:
    free(idx);
    free(buf);
    mdl_profile_free(p);
    return st;
}

// ---- tables ----------------------------------------------------------------------------

typedef struct pt {
    double y;       // context
    double v;       // median ns
    double ratio;   // measured / roofline
} pt;

typedef struct column {
    double x;   // new_tokens (prefill) or batch (decode)
    pt *p;
    size_t n;
} column;

typedef struct grid {
    column *c;
    size_t n;
} grid;

typedef struct cal {
    mdl_stepper base;   // first: the stepper handed out
    grid pre, dec;
    double *host_x, *host_v;
    size_t nhost;
    double *shape_x, *shape_v;   // decode batch -> measured minus the grid's interpolation
    size_t nshape;               //   (0 at the grid's own columns); none: no shape rows
} cal;

static void grid_free(grid *g) {
    for (size_t i = 0; i < g->n; i++)
        free(g->c[i].p);
    free(g->c);
    g->c = NULL;
    g->n = 0;
}

// Column value at y. Above the last point: *oor. Below the first: linear extension from the
// first two points, not less than half the first value.
static double col_eval(const column *c, double y, bool *oor) {
    const pt *p = c->p;
    size_t n = c->n;
    if (y > p[n - 1].y) {
        *oor = true;
        return p[n - 1].v;
    }
    if (y == p[n - 1].y) return p[n - 1].v;
    if (y < p[0].y) {
        if (n == 1) return p[0].v;
        double slope = (p[1].v - p[0].v) / (p[1].y - p[0].y);
        return KVF_MAX(p[0].v + (y - p[0].y) * slope, 0.5 * p[0].v);
    }
    size_t j = 0;
    while (j + 1 < n && p[j + 1].y <= y)
        j++;
    if (p[j].y == y) return p[j].v;
    double t = (y - p[j].y) / (p[j + 1].y - p[j].y);
    return p[j].v + t * (p[j + 1].v - p[j].v);
}

static double grid_eval(const grid *g, double x, double y, bool *oor) {
    if (g->n == 0 || x > g->c[g->n - 1].x) {
        *oor = true;
        return 0;
    }
    if (x < g->c[0].x) {
        // Fewer tokens (or sequences) than the smallest measured: extend the first two columns
        // linearly toward zero, never below half the first column.
        double a = col_eval(&g->c[0], y, oor);
        if (g->n == 1) return a;
        double b = col_eval(&g->c[1], y, oor);
        double t = (x - g->c[0].x) / (g->c[1].x - g->c[0].x);
        return KVF_MAX(a + t * (b - a), 0.5 * a);
    }
    size_t i = 0;
    while (i + 1 < g->n && g->c[i + 1].x <= x)
        i++;
    if (g->c[i].x == x) return col_eval(&g->c[i], y, oor);
    double a = col_eval(&g->c[i], y, oor), b = col_eval(&g->c[i + 1], y, oor);
    double t = (x - g->c[i].x) / (g->c[i + 1].x - g->c[i].x);
    return a + t * (b - a);
}

// Ratio of the measured point nearest to (x, y) in log space; -1 when the grid is empty.
static double grid_nearest_ratio(const grid *g, double x, double y) {
    double best = INFINITY, r = -1;
    for (size_t i = 0; i < g->n; i++)
        for (size_t j = 0; j < g->c[i].n; j++) {
            double dx = log2(KVF_MAX(x, 1e-9) / g->c[i].x);
            double dy = log2((1 + y) / (1 + g->c[i].p[j].y));
            double d = dx * dx + dy * dy;
            if (d < best) {
                best = d;
                r = g->c[i].p[j].ratio;
            }
        }
    return r;
}

static int row_xy_cmp(const void *a, const void *b) {
    const double *x = a, *y = b;   // (x, y, v, ratio) quadruples
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    if (x[1] != y[1]) return x[1] < y[1] ? -1 : 1;
    return 0;
}

// Builds a grid from quadruples (x, y, v, ratio), n of them.
static void grid_build(grid *g, double *q, size_t n) {
    qsort(q, n, 4 * sizeof *q, row_xy_cmp);
    g->c = kvf_calloc(n ? n : 1, sizeof *g->c);
    g->n = 0;
    for (size_t i = 0; i < n; i++) {
        double *r = q + 4 * i;
        if (g->n == 0 || g->c[g->n - 1].x != r[0]) {
            g->c[g->n].x = r[0];
            g->c[g->n].p = kvf_calloc(n, sizeof(pt));
            g->n++;
        }
        column *c = &g->c[g->n - 1];
        c->p[c->n++] = (pt){r[1], r[2], r[3]};
    }
}

// The roofline batch a profile row stands for: prefill = one sequence (T, C); decode = B
// sequences of one new token over C cached tokens.
static void row_batch(const mdl_profile_row *r, mdl_batch *b, mdl_seq **seqs) {
    uint32_t n = r->op == MDL_OP_DECODE ? r->batch : 1;
    *seqs = kvf_malloc(n * sizeof **seqs);
    for (uint32_t i = 0; i < n; i++) {
        (*seqs)[i].new_tokens = r->op == MDL_OP_DECODE ? 1 : r->new_tokens;
        (*seqs)[i].cached_tokens = (uint32_t)llround(r->context);
    }
    memset(b, 0, sizeof *b);
    b->phase = r->op == MDL_OP_DECODE ? MDL_DECODE : MDL_PREFILL;
    b->seqs = *seqs;
    b->n = n;
}

// ---- the calibrated stepper ------------------------------------------------------------

static double host_eval(const cal *c, double batch) {
    if (c->nhost == 0) return 0;
    if (batch <= c->host_x[0]) return c->host_v[0];
    if (batch >= c->host_x[c->nhost - 1]) return c->host_v[c->nhost - 1];
    size_t j = 0;
    while (j + 1 < c->nhost && c->host_x[j + 1] <= batch)
        j++;
    if (c->host_x[j] == batch) return c->host_v[j];
    double t = (batch - c->host_x[j]) / (c->host_x[j + 1] - c->host_x[j]);
    return c->host_v[j] + t * (c->host_v[j + 1] - c->host_v[j]);
}

// Piecewise-linear in x through (xs, vs), n >= 2 points sorted by x, x inside their range.
static double pwl_eval(const double *xs, const double *vs, size_t n, double x) {
    size_t j = 0;
    while (j + 1 < n && xs[j + 1] <= x)
        j++;
    if (j + 1 == n || xs[j] == x) return vs[j];
    double t = (x - xs[j]) / (xs[j + 1] - xs[j]);
    return vs[j] + t * (vs[j + 1] - vs[j]);
}

// Shape columns: a decode column of one point, between two columns of several, is a batch the
// profile measured at one context only (engine/eng_profile.c: the GEMMs' cost is not smooth
// in the batch, the attention's is linear in the context). It leaves the grid; its
// difference from the grid's interpolation at its point becomes an offset by batch, 0 at the
// grid's columns, added at every context. Its own point comes back exactly.
static void shape_columns(cal *c) {
    grid *g = &c->dec;
    size_t first = g->n, last = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->c[i].n >= 2) first = KVF_MIN(first, i), last = i;
    if (first >= last) return;
    size_t nshape = 0;
    for (size_t i = first + 1; i < last; i++)
        nshape += g->c[i].n == 1;
    if (!nshape) return;
    column *keep = kvf_calloc(g->n, sizeof *keep), *one = kvf_calloc(nshape, sizeof *one);
    size_t nk = 0, no = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (i > first && i < last && g->c[i].n == 1)
            one[no++] = g->c[i];
        else
            keep[nk++] = g->c[i];
    }
    free(g->c);
    g->c = keep, g->n = nk;
    c->shape_x = kvf_malloc((nk + no) * sizeof *c->shape_x);
    c->shape_v = kvf_malloc((nk + no) * sizeof *c->shape_v);
    for (size_t i = 0, k = 0; i < nk || k < no;) {
        bool take_one = k < no && (i >= nk || one[k].x < keep[i].x);
        double x = take_one ? one[k].x : keep[i].x, v = 0;
        if (take_one) {
            bool oor = false;
            v = one[k].p[0].v - grid_eval(g, x, one[k].p[0].y, &oor);
            free(one[k++].p);
        } else {
            i++;
        }
        c->shape_x[c->nshape] = x;
        c->shape_v[c->nshape++] = v;
    }
    free(one);
}

static void cal_cost(mdl_stepper *s, const mdl_batch *b, mdl_step_cost *out) {
    cal *c = (cal *)s;
    mdl_step_cost roof;
    mdl_roofline_eval(&s->model, &s->hw, &s->par, &s->eff, b, &roof);
    memset(out, 0, sizeof *out);
    if (roof.ns == 0) return;   // empty batch
    out->flops = roof.flops;
    out->bytes = roof.bytes;
    out->comm_bytes = roof.comm_bytes;   // the analytic count; the table has its own time
    out->compute_bound = roof.compute_bound;

    bool oor = false;
    double fwd = 0;
    const grid *primary = &c->pre;
    double qx = 0, qy = 0;
    if (b->phase == MDL_VISION) {
        // The engine does not profile a vision encoder: roofline scaled like prefill.
        oor = true;
        qx = (double)b->images * s->model.tokens_per_image;
    } else {
        // A step costs what the engine's serving loop executes: one batched decode call for
        // the sequences that decode (count, mean context) and one prefill call per chunk
        // (tokens, context). Points measured by the profiler come back exactly.
        double Bd = 0, Td = 0, Cd = 0;
        uint32_t np = 0;
        for (uint32_t i = 0; i < b->n; i++) {
            double n = b->seqs[i].new_tokens, ctx = b->seqs[i].cached_tokens;
            if (n <= 0) continue;
            bool dec = b->phase == MDL_DECODE || (b->phase == MDL_MIXED && n <= 1);
            if (dec) {
                Bd += 1;
                Td += n;
                Cd += ctx;
            } else {
                bool o = false;
                fwd += grid_eval(&c->pre, n, ctx, &o);
                if (o && !oor) {
                    oor = true;
                    qx = n;
                    qy = ctx;
                }
                np++;
            }
        }
        if (b->dsum && b->dsum->n) {   // summed decode sequences: one token each
            Bd += b->dsum->n;
            Td += b->dsum->n;
            Cd += b->dsum->sum_ctx;
        }
        if (Bd > 0) {
            Cd /= Bd;
            bool o = false;
            fwd += grid_eval(&c->dec, Td, Cd, &o);
            if (c->nshape && Td > c->shape_x[0] && Td < c->shape_x[c->nshape - 1])
                fwd += pwl_eval(c->shape_x, c->shape_v, c->nshape, Td);
            if (o && !oor) {
                oor = true;
                qx = Td;
                qy = Cd;
                primary = &c->dec;
            }
        }
        if (!oor) {
            qx = np ? 0 : Td;
            qy = np ? 0 : Cd;
            if (!np) primary = &c->dec;
        }
    }
    if (oor) {
        double r = grid_nearest_ratio(primary, qx, KVF_MAX(qy, 0.0));
        if (r < 0)
            r = grid_nearest_ratio(primary == &c->pre ? &c->dec : &c->pre, qx, KVF_MAX(qy, 0.0));
        if (r < 0) r = 1;
        fwd = (double)roof.ns * r;
        out->extrapolated = true;
    }
    double host = host_eval(c, mdl_batch_size(b));
    out->ns = mdl_ns(fwd + host);
    if (out->ns < 1) out->ns = 1;
    out->host_ns = mdl_ns(host);
}

static void cal_destroy(mdl_stepper *s) {
    cal *c = (cal *)s;
    grid_free(&c->pre);
    grid_free(&c->dec);
    free(c->host_x);
    free(c->host_v);
    free(c->shape_x);
    free(c->shape_v);
    free(c);
}

static const mdl_stepper_vt cal_vt = {"calibrated", cal_cost, cal_destroy, true, NULL};

// A csa/hca model without profile rows: the roofline, flagged as outside the measured range.
static void cal_roof_cost(mdl_stepper *s, const mdl_batch *b, mdl_step_cost *out) {
    mdl_roofline_eval(&s->model, &s->hw, &s->par, &s->eff, b, out);
    out->extrapolated = out->ns > 0;
}
static const mdl_stepper_vt cal_roof_vt = {"calibrated", cal_roof_cost, cal_destroy, true, NULL};

kvf_status mdl_calibrated_create(mdl_stepper **out, const mdl_model *m, const mdl_hardware *hw,
                                 const mdl_parallel *par, const mdl_efficiency *eff,
                                 const char *profile_path, kvf_err *err) {
    KVF_ASSERT(out && m && hw && profile_path);
    *out = NULL;
    mdl_profile p;
    kvf_status st = mdl_profile_load(&p, profile_path, err);
    if (st) return st;
    // The roofline used for ratios and fallbacks.
    mdl_stepper *roof = mdl_roofline_create(m, hw, par, eff);
    cal *c = kvf_calloc(1, sizeof *c);
    c->base = *roof;
    c->base.vt = &cal_vt;
    mdl_stepper_destroy(roof);
    size_t npre = 0, ndec = 0, nhost = 0;
    double *qp = kvf_malloc((p.n + 1) * 4 * sizeof *qp),
           *qd = kvf_malloc((p.n + 1) * 4 * sizeof *qd);
    c->host_x = kvf_malloc((p.n + 1) * sizeof *c->host_x);
    c->host_v = kvf_malloc((p.n + 1) * sizeof *c->host_v);
    for (size_t i = 0; i < p.n; i++) {
        const mdl_profile_row *r = &p.rows[i];
        if (!kvf_streq(r->model, m->name)) continue;
        if (r->op == MDL_OP_HOST) {
            c->host_x[nhost] = r->batch;
            c->host_v[nhost++] = r->median_ns;
            continue;
        }
        mdl_batch b;
        mdl_seq *seqs;
        row_batch(r, &b, &seqs);
        mdl_step_cost rc;
        mdl_roofline_eval(&c->base.model, &c->base.hw, &c->base.par, &c->base.eff, &b, &rc);
        free(seqs);
        double ratio = rc.ns > 0 ? r->median_ns / (double)rc.ns : 1;
        double *q = r->op == MDL_OP_PREFILL ? qp + 4 * npre++ : qd + 4 * ndec++;
        q[0] = r->op == MDL_OP_PREFILL ? r->new_tokens : r->batch;
        q[1] = r->context;
        q[2] = r->median_ns;
        q[3] = ratio;
    }
    if (npre + ndec == 0 && mdl_attn_compressed(m->attention)) {
        // The engine cannot run csa/hca models, so no profile measures one: the roofline
        // answers, every step flagged extrapolated (the run says so in its summary).
        free(qp);
        free(qd);
        mdl_profile_free(&p);
        c->base.vt = &cal_roof_vt;
        *out = &c->base;
        return KVF_OK;
    }
    if (npre + ndec == 0) {
        if (p.n && p.model[0])
            st = kvf_fail(err, KVF_EINVAL,
                          "%s: no prefill or decode rows for model '%s' (the profile is for '%s')",
                          profile_path, m->name, p.model);
        else
            st = kvf_fail(err, KVF_EINVAL, "%s: no prefill or decode rows for model '%s'",
                          profile_path, m->name);
        free(qp);
        free(qd);
        mdl_stepper_destroy(&c->base);
        mdl_profile_free(&p);
        return st;
    }
    grid_build(&c->pre, qp, npre);
    grid_build(&c->dec, qd, ndec);
    shape_columns(c);
    free(qp);
    free(qd);
    // host rows by batch (duplicates are rejected by the loader)
    for (size_t i = 1; i < nhost; i++)
        for (size_t j = i; j > 0 && c->host_x[j - 1] > c->host_x[j]; j--) {
            double tx = c->host_x[j], tv = c->host_v[j];
            c->host_x[j] = c->host_x[j - 1];
            c->host_v[j] = c->host_v[j - 1];
            c->host_x[j - 1] = tx;
            c->host_v[j - 1] = tv;
        }
    c->nhost = nhost;
    mdl_profile_free(&p);
    *out = &c->base;
    return KVF_OK;
}

// ---- efficiency fit --------------------------------------------------------------------

typedef struct fit_ctx {
    const mdl_model *m;
    const mdl_hardware *hw;
    const mdl_parallel *par;
    mdl_efficiency eff;   // comm fields fixed; compute/memory varied; overheads 0
    mdl_work *w;
    double *y;   // measured ns
    double *v;   // scratch: variable part per row
    size_t n;
} fit_ctx;

static void fit_variable(fit_ctx *f, const double x[3]) {
    f->eff.compute = x[0];
    f->eff.memory = x[1];
    f->eff.attention = x[2];
    for (size_t i = 0; i < f->n; i++) {
        mdl_step_cost c;
        mdl_roofline_eval_work(f->m, f->hw, f->par, &f->eff, &f->w[i], &c);
        f->v[i] = (double)c.ns;
    }
}

static double fit_loss(const fit_ctx *f, double o) {
    double s = 0;
    for (size_t i = 0; i < f->n; i++) {
        double e = log((o + f->v[i]) / f->y[i]);
        s += e * e;
    }
    return s;
}

// Best overhead in [0, hi] for the current variable parts (golden section; the loss is
// convex in o for positive terms).
static double fit_overhead(const fit_ctx *f, double hi, double *loss) {
    const double g = 0.6180339887498949;
    double a = 0, b = hi;
    double c = b - g * (b - a), d = a + g * (b - a);
    double fc = fit_loss(f, c), fd = fit_loss(f, d);
    for (int it = 0; it < 60 && b - a > 1e-3; it++) {
        if (fc < fd) {
            b = d;
            d = c;
            fd = fc;
            c = b - g * (b - a);
            fc = fit_loss(f, c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + g * (b - a);
            fd = fit_loss(f, d);
        }
    }
    double o = (a + b) / 2, lo = fit_loss(f, o), l0 = fit_loss(f, 0);
    if (l0 <= lo) {
        o = 0;
        lo = l0;
    }
    *loss = lo;
    return o;
}

kvf_status mdl_fit_efficiency(const mdl_profile_row *rows, size_t n, const mdl_model *m,
                              const mdl_hardware *hw, const mdl_parallel *par, mdl_efficiency *eff,
                              double *err_rms, kvf_err *err) {
    fit_ctx f = {.m = m, .hw = hw, .par = par};
    mdl_efficiency def;
    mdl_efficiency_default(&def);
    f.eff = def;
    if (eff && eff->comm > 0) f.eff.comm = eff->comm;
    if (eff && eff->comm_latency_ns > 0) f.eff.comm_latency_ns = eff->comm_latency_ns;
    f.eff.step_overhead_ns = 0;
    f.eff.layer_overhead_ns = 0;
    f.w = kvf_malloc((n + 1) * sizeof *f.w);
    f.y = kvf_malloc((n + 1) * sizeof *f.y);
    f.v = kvf_malloc((n + 1) * sizeof *f.v);
    double host_sum = 0, ymin = INFINITY;
    size_t nhost = 0;
    for (size_t i = 0; i < n; i++) {
        const mdl_profile_row *r = &rows[i];
        if (r->model[0] && !kvf_streq(r->model, m->name)) continue;
        if (r->op == MDL_OP_HOST) {
            host_sum += r->median_ns;
            nhost++;
            continue;
        }
        mdl_batch b;
        mdl_seq *seqs;
        row_batch(r, &b, &seqs);
        mdl_batch_work_detail(m, &b, &f.w[f.n]);
        free(seqs);
        f.y[f.n++] = r->median_ns;
        ymin = KVF_MIN(ymin, r->median_ns);
    }
    if (f.n < 3) {
        free(f.w);
        free(f.y);
        free(f.v);
        return kvf_fail(
            err, KVF_EINVAL,
            "efficiency fit: need at least 3 prefill/decode rows for model '%s', got %zu", m->name,
            f.n);
    }
    // Grid over the compute, memory and attention factors (log-spaced 1e-4 .. 10), the best
    // overhead for each; ties keep the smallest factors (the least efficiency the data
    // support when a factor does not bind).
    double best_x[3] = {1, 1, 1}, bo = 0, best = INFINITY;
    const int K = 21;
    for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++)
            for (int k = 0; k < K; k++) {
                double x[3] = {1e-4 * pow(1e5, (double)i / (K - 1)),
                               1e-4 * pow(1e5, (double)j / (K - 1)),
                               1e-4 * pow(1e5, (double)k / (K - 1))};
                fit_variable(&f, x);
                double l, o = fit_overhead(&f, ymin, &l);
                if (l < best) {
                    best = l;
                    memcpy(best_x, x, sizeof x);
                    bo = o;
                }
            }
    // Coordinate refinement with shrinking multiplicative steps.
    for (double step = 0.5; step > 1e-5;) {
        bool improved = false;
        for (int k = 0; k < 6; k++) {
            double x[3] = {best_x[0], best_x[1], best_x[2]};
            if (k % 2 == 0)
                x[k / 2] *= 1 + step;
            else
                x[k / 2] /= 1 + step;
            fit_variable(&f, x);
            double l, o = fit_overhead(&f, ymin, &l);
            if (l < best - 1e-15) {
                best = l;
                memcpy(best_x, x, sizeof x);
                bo = o;
                improved = true;
            }
        }
        if (!improved) step /= 2;
    }
    fit_variable(&f, best_x);
    double se = 0;
    for (size_t i = 0; i < f.n; i++) {
        double e = (bo + f.v[i] - f.y[i]) / f.y[i];
        se += e * e;
    }
    if (err_rms) *err_rms = sqrt(se / f.n);
    if (eff) {
        *eff = f.eff;
        eff->compute = best_x[0];
        eff->memory = best_x[1];
        eff->attention = best_x[2];
        eff->step_overhead_ns = bo + (nhost ? host_sum / nhost : 0);
        eff->layer_overhead_ns = 0;
    }
    free(f.w);
    free(f.y);
    free(f.v);
    return KVF_OK;
}

kvf_status mdl_fit_profile(mdl_fit *fit, const mdl_profile *p, const mdl_model *m,
                           const mdl_hardware *hw, const mdl_parallel *par, kvf_err *err) {
    memset(fit, 0, sizeof *fit);
    copy_name(fit->model, m->name);
    copy_name(fit->hardware, p->hardware[0] ? p->hardware : hw->name);
    copy_name(fit->backend, p->backend);
    kvf_status st = mdl_fit_efficiency(p->rows, p->n, m, hw, par, &fit->eff, &fit->err_rms, err);
    if (st) return st;
    // Count the rows and the largest error with the overhead the fit settled on, without
    // the host share (the rows are forward passes).
    double host_sum = 0;
    size_t nhost = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->rows[i].op == MDL_OP_HOST && kvf_streq(p->rows[i].model, m->name)) {
            host_sum += p->rows[i].median_ns;
            nhost++;
        }
    mdl_efficiency fwd = fit->eff;
    fwd.step_overhead_ns -= nhost ? host_sum / nhost : 0;
    for (size_t i = 0; i < p->n; i++) {
        const mdl_profile_row *r = &p->rows[i];
        if (r->op == MDL_OP_HOST || !kvf_streq(r->model, m->name)) continue;
        mdl_batch b;
        mdl_seq *seqs;
        row_batch(r, &b, &seqs);
        mdl_step_cost c;
        mdl_roofline_eval(m, hw, par, &fwd, &b, &c);
        free(seqs);
        double e = fabs((double)c.ns - r->median_ns) / r->median_ns;
        fit->err_max = KVF_MAX(fit->err_max, e);
        fit->rows++;
    }
    return KVF_OK;
}
