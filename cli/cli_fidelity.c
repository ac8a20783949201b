// cli/cli_fidelity.c -- the comparisons of `kvfleet validate` (cli_fidelity.h): error tables
// with their noise bands, verdicts, per-request correlation and the step-time fidelity of the
// calibrated step model. Pure functions of the two sides' figures: no files, no runs.
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_fidelity.h"

double cli_fid_pearson(const double *x, const double *y, size_t n) {
    if (n < 2) return NAN;
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++)
        mx += x[i], my += y[i];
    mx /= (double)n, my /= (double)n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}

const char *const CLI_METRICS[3] = {"ttft_ms", "tpot_ms", "e2e_ms"};

void cli_side_alloc(cli_side *s, size_t n) {
    KVF_ASSERT(s);
    for (int k = 0; k < 3; k++)
        s->v[k] = kvf_calloc(n + 1, sizeof(double));
}
void cli_side_free(cli_side *s) {
    for (int k = 0; k < 3; k++)
        free(s->v[k]);
}

// p-th percentile of v over the requests both real and v completed.
static double pct_common(const double *real, const double *v, size_t n, double p, double *buf) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(real[i]) && isfinite(v[i])) buf[m++] = v[i];
    if (!m) return NAN;
    if (p < 0) {   // mean
        double sum = 0;
        for (size_t i = 0; i < m; i++)
            sum += buf[i];
        return sum / (double)m;
    }
    kvf_sort_doubles(buf, m);
    return kvf_percentile_sorted(buf, m, p);
}

json_t *cli_fid_error_table(const cli_side *real, const cli_side *sim, const cli_side *lo,
                            const cli_side *hi, double fixed_band, size_t n, double *worst,
                            double *band, double *worst_pos) {
    KVF_ASSERT(real && sim && worst && band && worst_pos && (!lo == !hi));
    json_t *t = json_object();
    double *buf = kvf_malloc((n + 1) * sizeof *buf);
    const char *keys[] = {"mean", "p50", "p90", "p99"};
    const double ps[] = {-1, 50, 90, 99};
    *worst = *band = *worst_pos = 0;
    for (int m = 0; m < 3; m++) {
        json_t *o = json_object();
        size_t cnt = 0;
        for (size_t i = 0; i < n; i++)
            cnt += isfinite(real->v[m][i]) && isfinite(sim->v[m][i]);
        for (int k = 0; k < 4; k++) {
            double r = pct_common(sim->v[m], real->v[m], n, ps[k], buf);
            double sv = pct_common(real->v[m], sim->v[m], n, ps[k], buf);
            double e = r > 0 ? 100 * (sv - r) / r : NAN;
            double b = fixed_band;
            // the side of the noise that could explain the error: a simulation above the serve
            // against the run with faster steps, one below against the run with slower steps
            if (lo && hi && r > 0 && isfinite(e))
                b +=
                    100 *
                    fabs(sv - pct_common(real->v[m], e >= 0 ? lo->v[m] : hi->v[m], n, ps[k], buf)) /
                    r;
            json_t *x = json_object();
            json_object_set_new(x, "real", json_real(isfinite(r) ? r : 0));
            json_object_set_new(x, "sim", json_real(isfinite(sv) ? sv : 0));
            json_object_set_new(x, "error_pct", isfinite(e) ? json_real(e) : json_null());
            json_object_set_new(x, "band_pct", json_real(isfinite(b) ? b : 0));
            json_object_set_new(o, keys[k], x);
            if ((k == 1 || k == 2) && isfinite(e)) {
                *worst = fmax(*worst, fabs(e));
                *worst_pos = fmax(*worst_pos, e);
                if (isfinite(b)) *band = fmax(*band, b);
            }
        }
        json_object_set_new(o, "n", json_integer((json_int_t)cnt));
        json_object_set_new(t, CLI_METRICS[m], o);
    }
    free(buf);
    return t;
}

void cli_fid_level_band(const uint8_t *phase, const uint8_t *shape, const double *v, size_t n,
                        int nphase, int nshape, double *band, double *spread) {
    KVF_ASSERT((phase && shape && v) || !n);
    KVF_ASSERT(band && spread && nphase > 0 && nshape > 0);
    double *w = kvf_malloc((n + 1) * sizeof *w), *ref = kvf_malloc((size_t)nshape * sizeof *ref);
    double *sp = kvf_malloc((size_t)nshape * sizeof *sp);
    size_t nsp = 0;
    for (int s = 0; s < nshape; s++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (shape[i] == s && phase[i] < nphase && v[i] > 0) w[m++] = v[i];
        ref[s] = NAN;
        if (!m) continue;
        kvf_sort_doubles(w, m);
        ref[s] = kvf_percentile_sorted(w, m, 50);
        if (m >= 2)
            sp[nsp++] =
                (kvf_percentile_sorted(w, m, 90) - kvf_percentile_sorted(w, m, 10)) / (2 * ref[s]);
    }
    double lo = INFINITY, hi = -INFINITY;
    for (int ph = 0; ph < nphase; ph++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (phase[i] == ph && shape[i] < nshape && v[i] > 0 && isfinite(ref[shape[i]]))
                w[m++] = v[i] / ref[shape[i]];
        if (!m) continue;
        kvf_sort_doubles(w, m);
        double med = kvf_percentile_sorted(w, m, 50);
        lo = fmin(lo, med), hi = fmax(hi, med);
    }
    *band = hi > lo ? (hi - lo) / 2 : 0;
    kvf_sort_doubles(sp, nsp);
    *spread = nsp ? kvf_percentile_sorted(sp, nsp, 50) : 0;
    free(w), free(ref), free(sp);
}

const char *cli_fid_verdict(double worst, double band, double tol) {
    if (worst - band > tol) return "fail";
    if (band > tol) return "inconclusive";
    if (worst <= tol) return "pass";
    return "inconclusive";
}

void cli_fid_verdict_obj(json_t *o, double worst, double band, double tol) {
    json_object_set_new(o, "tolerance_pct", json_real(tol));
    json_object_set_new(o, "worst_error_pct", json_real(worst));
    json_object_set_new(o, "band_pct", json_real(band));
    json_object_set_new(o, "verdict", json_string(cli_fid_verdict(worst, band, tol)));
}

void cli_fid_real_side(const eng_serve_result *res, cli_side *s) {
    for (size_t i = 0; i < res->n_requests; i++) {
        const eng_request_result *q = &res->requests[i];
        bool ok = q->status == ENG_REQ_DONE;
        s->v[0][i] = ok ? (double)(q->first_token_ns - q->arrival_ns) * 1e-6 : NAN;
        s->v[1][i] = ok && q->output_tokens > 1 ? (double)(q->last_token_ns - q->first_token_ns) *
                                                      1e-6 / (q->output_tokens - 1)
                                                : NAN;
        s->v[2][i] = ok ? (double)(q->completion_ns - q->arrival_ns) * 1e-6 : NAN;
    }
}

uint32_t cli_fid_step_batch(const eng_serve_result *r, const eng_step_record *k, mdl_seq *seqs,
                            mdl_phase *phase) {
    KVF_ASSERT(r && k && seqs && phase);
    uint32_t n = 0;
    for (uint32_t i = 0; i < k->decode_seqs; i++)
        seqs[n++] = (mdl_seq){1, k->decode_context / k->decode_seqs +
                                     (i < k->decode_context % k->decode_seqs)};
    for (uint32_t j = 0; j < k->n_chunks; j++)
        seqs[n++] = (mdl_seq){r->chunks[k->chunk0 + j].tokens, r->chunks[k->chunk0 + j].context};
    *phase = k->decode_seqs && k->n_chunks ? MDL_MIXED : k->decode_seqs ? MDL_DECODE : MDL_PREFILL;
    return n;
}

const char *const CLI_STEP_KINDS[3] = {"prefill", "decode", "mixed"};

json_t *cli_fid_step_time(const eng_serve_result *r, mdl_stepper *stp, const cli_grid_floor *gf,
                          bool cpu_clock, double level, double band, double tol, double *pred,
                          double *resid, const char **flag, uint64_t *flagged, double *worst_out) {
    KVF_ASSERT(r && stp && gf && pred && resid && flag && flagged && worst_out);
    size_t ns = r->n_steps;
    double *v[3], *av[3];
    size_t nv[3] = {0, 0, 0};
    uint64_t nflag[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
        v[k] = kvf_malloc((ns + 1) * sizeof(double)), av[k] = kvf_malloc((ns + 1) * sizeof(double));
    // by shape: kind x size bucket (decodes: batch 1, 2-4, 5-8, 9-16, 17+; prefill tokens
    // < 32, 32-127, 128-511, 512+)
    enum { NB = 5 };
    double *bv[3][NB];
    size_t bn[3][NB] = {{0}};
    for (int k = 0; k < 3; k++)
        for (int b = 0; b < NB; b++)
            bv[k][b] = kvf_malloc((ns + 1) * sizeof(double));
    mdl_seq *seqs = NULL;
    size_t cap = 0;
    *flagged = 0;
    for (size_t i = 0; i < ns; i++) {
        const eng_step_record *k = &r->steps[i];
        kvf_grow((void **)&seqs, &cap, k->decode_seqs + k->n_chunks + 1, sizeof *seqs);
        mdl_phase ph;
        uint32_t n = cli_fid_step_batch(r, k, seqs, &ph);
        mdl_batch b = {.phase = ph, .seqs = seqs, .n = n};
        mdl_step_cost c;
        stp->vt->cost(stp, &b, &c);
        double meas = cpu_clock ? (double)k->cpu_ns : (double)k->duration_ns;
        pred[i] = (double)c.ns * level;
        resid[i] = meas > 0 ? pred[i] / meas - 1 : 0;
        bool below = false;
        for (uint32_t j = 0; j < k->n_chunks; j++)
            below |= r->chunks[k->chunk0 + j].tokens < gf->min_chunk;
        if (k->decode_seqs && (double)k->decode_context / k->decode_seqs < gf->min_dctx)
            below = true;
        flag[i] = c.extrapolated ? "extrapolated" : below ? "below_grid" : NULL;
        int kind = ph == MDL_MIXED ? 2 : ph == MDL_DECODE ? 1 : 0;
        if (flag[i]) (*flagged)++, nflag[kind]++;
        v[kind][nv[kind]] = resid[i];
        av[kind][nv[kind]++] = fabs(resid[i]);
        uint32_t sz = kind == 1 ? k->decode_seqs : k->prefill_tokens;
        int bk = kind == 1 ? (sz <= 1    ? 0
                              : sz <= 4  ? 1
                              : sz <= 8  ? 2
                              : sz <= 16 ? 3
                                         : 4)
                           : (sz < 32    ? 0
                              : sz < 128 ? 1
                              : sz < 512 ? 2
                                         : 3);
        bv[kind][bk][bn[kind][bk]++] = resid[i];
    }
    free(seqs);
    json_t *o = json_object(), *kinds = json_object(), *shapes = json_array();
    double worst = 0, se_max = 0;
    for (int k = 0; k < 3; k++) {
        json_t *x = json_object();
        json_object_set_new(x, "steps", json_integer((json_int_t)nv[k]));
        json_object_set_new(x, "flagged", json_integer((json_int_t)nflag[k]));
        if (nv[k]) {
            kvf_sort_doubles(v[k], nv[k]);
            kvf_sort_doubles(av[k], nv[k]);
            double med = 100 * kvf_percentile_sorted(v[k], nv[k], 50);
            double mabs = 100 * kvf_percentile_sorted(av[k], nv[k], 50);
            json_object_set_new(x, "median_residual_pct", json_real(med));
            json_object_set_new(x, "median_abs_residual_pct", json_real(mabs));
            json_object_set_new(x, "p90_abs_residual_pct",
                                json_real(100 * kvf_percentile_sorted(av[k], nv[k], 90)));
            // the median's standard error from the kind's own scatter (interquartile range
            // over 1.349, a normal's sigma; the median's error 1.2533 sigma / sqrt(n))
            double iqr = 100 * (kvf_percentile_sorted(v[k], nv[k], 75) -
                                kvf_percentile_sorted(v[k], nv[k], 25));
            double se = 1.2533 * (iqr / 1.349) / sqrt((double)nv[k]);
            json_object_set_new(x, "median_se_pct", json_real(se));
            // kinds with too few steps to have a median worth judging are reported only
            if (nv[k] >= 10) worst = fmax(worst, mabs), se_max = fmax(se_max, se);
        }
        json_object_set_new(kinds, CLI_STEP_KINDS[k], x);
        static const char *dl[] = {"batch 1", "batch 2-4", "batch 5-8", "batch 9-16", "batch 17+"};
        static const char *pl[] = {"tokens <32", "tokens 32-127", "tokens 128-511", "tokens 512+",
                                   ""};
        for (int b = 0; b < NB; b++) {
            if (!bn[k][b]) continue;
            kvf_sort_doubles(bv[k][b], bn[k][b]);
            json_t *y = json_object();
            json_object_set_new(y, "kind", json_string(CLI_STEP_KINDS[k]));
            json_object_set_new(y, "shape", json_string(k == 1 ? dl[b] : pl[b]));
            json_object_set_new(y, "steps", json_integer((json_int_t)bn[k][b]));
            json_object_set_new(y, "median_residual_pct",
                                json_real(100 * kvf_percentile_sorted(bv[k][b], bn[k][b], 50)));
            json_object_set_new(y, "p10_residual_pct",
                                json_real(100 * kvf_percentile_sorted(bv[k][b], bn[k][b], 10)));
            json_object_set_new(y, "p90_residual_pct",
                                json_real(100 * kvf_percentile_sorted(bv[k][b], bn[k][b], 90)));
            json_array_append_new(shapes, y);
        }
    }
    for (int k = 0; k < 3; k++) {
        free(v[k]), free(av[k]);
        for (int b = 0; b < NB; b++)
            free(bv[k][b]);
    }
    json_object_set_new(o, "clock", json_string(cpu_clock ? "thread_cpu" : "wall"));
    json_object_set_new(o, "profile_level", json_real(level));
    json_object_set_new(o, "kinds", kinds);
    json_object_set_new(o, "shapes", shapes);
    json_object_set_new(o, "flagged_steps", json_integer((json_int_t)*flagged));
    json_object_set_new(o, "level_band_pct", json_real(band));
    json_object_set_new(o, "median_se_pct", json_real(se_max));
    cli_fid_verdict_obj(o, worst, band + se_max, tol);
    *worst_out = worst;
    return o;
}
