// cli/cli_fit_kernels.c -- `kvfleet fit --kernels MANIFEST -o FILE`: the in-system terms of
// decode steps fitted to kernel times measured inside serving systems.
//
// A kernel table row is a unit measurement: one kernel alone on an idle GPU. In a serving
// system the same kernels run beside inter-node all-to-alls and each other, and small kernels
// no table lists (norms, rotary, quantisation, top-k) and launch gaps add to every layer. Two
// terms carry that: efficiency.in_system_decode (in-system / unit time of a decode step's
// GEMMs, experts and attention) and efficiency.layer_overhead_us (the rest, per layer per
// micro-batch). The manifest lists measured runs (per-layer times by kernel class) with the
// scenario and shape each ran at; training runs are fitted to, checks never:
//   in_system_decode = sum of measured / sum of the table model's class times (training)
//   layer_overhead_us = mean over training runs of other_ms / launches per layer
// Leave-one-out holds out one (run, class) time at a time and predicts it from the factor the
// others give. Every run is then evaluated with the fitted terms: per-class and whole-layer
// errors (the whole layer -- the step over the layers -- is never fitted).
#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_points.h"
#include "sim.h"
#include "sim_run.h"

enum { FK_CLASSES = 3, FK_MAX_RUNS = 64, FK_MAX_SETS = 16 };
static const char *const fk_class[FK_CLASSES] = {"gemm", "moe", "attention"};
static const char *const fk_cols[] = {"run",          "role",     "scenario",  "set",
                                      "seqs_per_gpu", "context",  "gemm_ms",   "moe_ms",
                                      "attention_ms", "other_ms", "overall_ms"};
enum { FK_NCOL = sizeof fk_cols / sizeof fk_cols[0] };

typedef struct fk_run {
    char name[64], scenario[SIM_PATH_MAX], set[1024];
    bool training;
    int line;
    double seqs, ctx;
    double meas[FK_CLASSES], other, overall;          // measured, ms a layer
    double unit[FK_CLASSES];                          // the table model's class times, ms a layer
    double fit[FK_CLASSES], fit_other, fit_overall;   // with the fitted terms
    double loo[FK_CLASSES];                           // held out: predicted (NaN: not held out)
    uint32_t layers, launches;
} fk_run;

typedef struct fk_job {
    const char *manifest, *out;
    bool force, quiet;
    fk_run run[FK_MAX_RUNS];
    int n;
    double factor, layer_us, loo_mape;
    int n_loo;
} fk_job;

// ---- the manifest --------------------------------------------------------------------------

typedef struct fk_row {
    char f[FK_NCOL + 1][SIM_PATH_MAX];
    int n;
    bool overflow;
} fk_row;

static void fk_field(void *s, size_t len, void *data) {
    fk_row *r = data;
    if (r->n >= FK_NCOL + 1 || len >= sizeof r->f[0]) {
        r->overflow = true;
        r->n++;
        return;
    }
    memcpy(r->f[r->n], s, len);
    r->f[r->n][len] = '\0';
    r->n++;
}

static kvf_status fk_num(const fk_job *j, int line, const char *col, const char *s, double lo,
                         double hi, double *v, kvf_err *err) {
    char *end = NULL;
    errno = 0;
    double x = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(x) || x < lo || x > hi)
        return kvf_fail(err, KVF_EPARSE, "%s:%d: field '%s': '%s' is not a number in [%g, %g]",
                        j->manifest, line, col, s, lo, hi);
    *v = x;
    return KVF_OK;
}

static kvf_status fk_row_take(fk_job *j, const fk_row *r, int line, kvf_err *err) {
    if (j->n >= FK_MAX_RUNS)
        return kvf_fail(err, KVF_EPARSE, "%s:%d: more than %d runs", j->manifest, line,
                        FK_MAX_RUNS);
    fk_run *u = &j->run[j->n];
    memset(u, 0, sizeof *u);
    u->line = line;
    if (!r->f[0][0] || strlen(r->f[0]) >= sizeof u->name)
        return kvf_fail(err, KVF_EPARSE, "%s:%d: field 'run': a name of 1 to %zu characters",
                        j->manifest, line, sizeof u->name - 1);
    snprintf(u->name, sizeof u->name, "%s", r->f[0]);
    for (int i = 0; i < j->n; i++)
        if (!strcmp(j->run[i].name, u->name))
            return kvf_fail(err, KVF_EPARSE, "%s:%d: field 'run': '%s' is listed twice (line %d)",
                            j->manifest, line, u->name, j->run[i].line);
    if (!strcmp(r->f[1], "training"))
        u->training = true;
    else if (strcmp(r->f[1], "check"))
        return kvf_fail(err, KVF_EPARSE, "%s:%d: field 'role': '%s' (allowed: training|check)",
                        j->manifest, line, r->f[1]);
    // the scenario, relative to the manifest's folder
    const char *slash = strrchr(j->manifest, '/');
    int dl = slash ? (int)(slash - j->manifest) : 0;
    if (r->f[2][0] == '/' || !slash)
        snprintf(u->scenario, sizeof u->scenario, "%s", r->f[2]);
    else if (snprintf(u->scenario, sizeof u->scenario, "%.*s/%s", dl, j->manifest, r->f[2]) >=
             (int)sizeof u->scenario)
        return kvf_fail(err, KVF_EPARSE, "%s:%d: field 'scenario': path too long", j->manifest,
                        line);
    if (!r->f[2][0])
        return kvf_fail(err, KVF_EPARSE, "%s:%d: field 'scenario': empty", j->manifest, line);
    snprintf(u->set, sizeof u->set, "%s", r->f[3]);
    kvf_status st;
    if ((st = fk_num(j, line, "seqs_per_gpu", r->f[4], 1, 1e5, &u->seqs, err)) ||
        (st = fk_num(j, line, "context", r->f[5], 1, 1e7, &u->ctx, err)))
        return st;
    for (int c = 0; c < FK_CLASSES; c++)
        if ((st = fk_num(j, line, fk_cols[6 + c], r->f[6 + c], 1e-6, 1e4, &u->meas[c], err)))
            return st;
    if ((st = fk_num(j, line, "other_ms", r->f[9], 0, 1e4, &u->other, err)) ||
        (st = fk_num(j, line, "overall_ms", r->f[10], 1e-6, 1e4, &u->overall, err)))
        return st;
    double parts = u->meas[0] + u->meas[1] + u->meas[2] + u->other;
    if (parts > u->overall * 1.5)
        return kvf_fail(err, KVF_EPARSE,
                        "%s:%d: field 'overall_ms': %g is less than its kernel classes' %g "
                        "(the classes are parts of the layer)",
                        j->manifest, line, u->overall, parts);
    j->n++;
    return KVF_OK;
}

static kvf_status fk_read(fk_job *j, kvf_err *err) {
    char *text = NULL;
    size_t len = 0;
    kvf_status st = kvf_read_file(j->manifest, &text, &len, err);
    if (st) return st;
    struct csv_parser p;
    if (csv_init(&p, CSV_APPEND_NULL)) {
        free(text);
        return kvf_fail(err, KVF_ENOMEM, "%s: cannot initialise the CSV parser", j->manifest);
    }
    bool header = false;
    int line = 0;
    for (char *s = text, *nl; !st && s && *s; s = nl ? nl + 1 : NULL) {
        nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        line++;
        if (n && s[n - 1] == '\r') n--;
        if (!n || s[0] == '#') continue;
        fk_row *r = kvf_calloc(1, sizeof *r);
        if (csv_parse(&p, s, n, fk_field, NULL, r) != n)
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: malformed CSV (%s)", j->manifest, line,
                          csv_strerror(csv_error(&p)));
        csv_fini(&p, fk_field, NULL, r);
        if (!st && (r->n != FK_NCOL || r->overflow))
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: %d fields (expected %d: %s, ...)", j->manifest,
                          line, r->n, FK_NCOL, fk_cols[0]);
        if (!st && !header) {
            for (int c = 0; !st && c < FK_NCOL; c++)
                if (strcmp(r->f[c], fk_cols[c]))
                    st = kvf_fail(err, KVF_EPARSE, "%s:%d: column %d is '%s', expected '%s'",
                                  j->manifest, line, c + 1, r->f[c], fk_cols[c]);
            header = true;
        } else if (!st) {
            st = fk_row_take(j, r, line, err);
        }
        free(r);
    }
    csv_free(&p);
    free(text);
    if (st) return st;
    int train = 0;
    for (int i = 0; i < j->n; i++)
        train += j->run[i].training;
    if (!train) return kvf_fail(err, KVF_EPARSE, "%s: no run with role training", j->manifest);
    return KVF_OK;
}

// ---- the model's side ----------------------------------------------------------------------

static double term_s(const mdl_explain *ex, const char *name) {
    for (int i = 0; i < ex->n; i++)
        if (!strcmp(ex->t[i].name, name)) return ex->t[i].s;
    return 0;
}

// The run's scenario with its shape and the given extra settings; its decode step's class
// times (ms a layer) and the step over the layers.
static kvf_status fk_eval(const fk_job *j, fk_run *u, const char *const *extra, int nextra,
                          double cls[FK_CLASSES], double *layer_ms, kvf_err *err) {
    const char *sets[FK_MAX_SETS + 4];
    int ns = 0;
    char buf[sizeof u->set];
    snprintf(buf, sizeof buf, "%s", u->set);
    char *save = NULL;
    for (char *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        if (ns >= FK_MAX_SETS)
            return kvf_fail(err, KVF_EPARSE, "%s:%d: field 'set': more than %d settings",
                            j->manifest, u->line, FK_MAX_SETS);
        sets[ns++] = t;
    }
    for (int i = 0; i < nextra; i++)
        sets[ns++] = extra[i];
    sim_config *cfg = kvf_calloc(1, sizeof *cfg);
    kvf_status st = sim_points_load(cfg, u->scenario, sets, ns, err);
    if (!st) st = sim_config_validate(cfg, err);
    if (!st && strcmp(cfg->step_model, "table"))
        st = kvf_fail(err, KVF_EINVAL,
                      "%s:%d: field 'scenario': %s runs step_model %s; the in-system terms scale "
                      "the table model's (step_model: table)",
                      j->manifest, u->line, u->scenario, cfg->step_model);
    mdl_explain *ex = kvf_calloc(1, sizeof *ex);
    double step_s = 0;
    if (!st)
        st = sim_explain_decode_terms(cfg, u->seqs, u->ctx, ex, &step_s, &u->layers, &u->launches,
                                      err);
    if (!st) {
        double L = u->layers ? u->layers : 1;
        double shared = term_s(ex, "  shared experts");
        cls[0] = (term_s(ex, "dense GEMMs") + shared) / L * 1e3;
        cls[1] = (term_s(ex, "expert GEMMs") - shared + term_s(ex, "MoE routing") +
                  term_s(ex, "MoE permutation")) /
                 L * 1e3;
        cls[2] = term_s(ex, "attention") / L * 1e3;
        *layer_ms = step_s / L * 1e3;
    }
    free(ex);
    free(cfg);
    if (st && !strstr(err->msg, j->manifest)) {
        char m[sizeof err->msg - 128];
        memcpy(m, err->msg, sizeof m - 1);
        m[sizeof m - 1] = '\0';
        snprintf(err->msg, sizeof err->msg, "%.60s:%d: run %.40s: %s", j->manifest, u->line,
                 u->name, m);
    }
    return st;
}

static double fk_pct(double pred, double meas) {
    return 100 * (pred - meas) / meas;
}

static kvf_status fk_fit(fk_job *j, kvf_err *err) {
    // a run's scenario without its own fit file (the terms fitted here take its place)
    static const char *const unit_sets[] = {"serving.fit=null", "efficiency.in_system_decode=1"};
    kvf_status st;
    double layer;
    for (int i = 0; i < j->n; i++)
        if ((st = fk_eval(j, &j->run[i], unit_sets, 2, j->run[i].unit, &layer, err))) return st;
    // the factor: time-weighted over every training (run, class); its leave-one-out
    double sm = 0, su = 0, lay = 0;
    int nt = 0;
    for (int i = 0; i < j->n; i++) {
        fk_run *u = &j->run[i];
        for (int c = 0; c < FK_CLASSES; c++)
            u->loo[c] = NAN;
        if (!u->training) continue;
        for (int c = 0; c < FK_CLASSES; c++) {
            sm += u->meas[c];
            su += u->unit[c];
        }
        lay += u->other * 1e3 / (u->launches ? u->launches : 1);
        nt++;
    }
    if (!(su > 0))
        return kvf_fail(err, KVF_EINVAL, "%s: the training runs' steps have no kernel terms",
                        j->manifest);
    j->factor = sm / su;
    j->layer_us = lay / nt;
    if (!(j->factor >= 0.25 && j->factor <= 4))
        return kvf_fail(err, KVF_EINVAL,
                        "%s: the fitted efficiency.in_system_decode %g is outside [0.25, 4]: the "
                        "measured and modelled steps are not the same work",
                        j->manifest, j->factor);
    double ape = 0;
    j->n_loo = 0;
    for (int i = 0; i < j->n; i++) {
        fk_run *u = &j->run[i];
        if (!u->training) continue;
        for (int c = 0; c < FK_CLASSES; c++) {
            double rest_m = sm - u->meas[c], rest_u = su - u->unit[c];
            if (!(rest_u > 0)) continue;
            u->loo[c] = u->unit[c] * rest_m / rest_u;
            ape += fabs(fk_pct(u->loo[c], u->meas[c]));
            j->n_loo++;
        }
    }
    j->loo_mape = j->n_loo ? ape / j->n_loo : NAN;
    // every run with the fitted terms
    char f1[64], f2[64];
    snprintf(f1, sizeof f1, "efficiency.in_system_decode=%.4f", j->factor);
    snprintf(f2, sizeof f2, "efficiency.layer_overhead_us=%.2f", j->layer_us);
    const char *fit_sets[] = {"serving.fit=null", f1, f2};
    for (int i = 0; i < j->n; i++) {
        fk_run *u = &j->run[i];
        if ((st = fk_eval(j, u, fit_sets, 3, u->fit, &u->fit_overall, err))) return st;
        // the class terms are listed as measured alone; the step scales them all by the factor
        for (int c = 0; c < FK_CLASSES; c++)
            u->fit[c] *= j->factor;
        u->fit_other = j->layer_us * u->launches / 1e3;
    }
    return KVF_OK;
}

// ---- the fit file --------------------------------------------------------------------------

static void fk_classes(FILE *o, const char *key, const double *v, double other, double overall) {
    fprintf(o, "    %s: {", key);
    for (int c = 0; c < FK_CLASSES; c++)
        fprintf(o, "%s: %.4f, ", fk_class[c], v[c]);
    fprintf(o, "other: %.4f, overall: %.4f}\n", other, overall);
}

static kvf_status fk_write(const fk_job *j, kvf_err *err) {
    if (!j->force) {
        FILE *t = fopen(j->out, "r");
        if (t) {
            fclose(t);
            return kvf_fail(err, KVF_EINVAL, "%s exists (--force replaces it)", j->out);
        }
    }
    char tmp[SIM_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", j->out);
    FILE *o = fopen(tmp, "w");
    if (!o) return kvf_fail(err, KVF_EIO, "%s: %s", tmp, strerror(errno));
    fprintf(o,
            "# kvfleet fit --kernels: in-system terms of decode steps fitted to kernel times\n"
            "# measured inside serving systems. Inputs: the training runs' per-layer kernel\n"
            "# times and the table model's unit-measured terms at each run's shape; outputs: the\n"
            "# terms and the errors below (ms a layer; errors in %% of the measured time). A\n"
            "# scenario applies the terms with serving.fit: FILE (keys it sets itself win).\n"
            "# Runs with role check are never fitted to; the whole layer is never fitted.\n");
    fprintf(o, "training_set: %s\n", j->manifest);
    fprintf(o,
            "objective: in_system_decode = sum of measured / sum of unit-measured GEMM, MoE and "
            "attention times over the training runs; layer_overhead_us = their other kernels and "
            "launch gaps per layer per micro-batch\n");
    fprintf(o,
            "terms:\n  efficiency.in_system_decode: %.4f\n  efficiency.layer_overhead_us: %.2f\n",
            j->factor, j->layer_us);
    fprintf(o, "loo_unit: one training (run, kernel class) time held out, predicted from the "
               "factor the others give\n");
    if (j->n_loo)
        fprintf(o, "loo_mape_pct: %.2f\n", j->loo_mape);
    else
        fprintf(o, "loo_mape_pct: null\n");
    fprintf(o, "runs:\n");
    for (int i = 0; i < j->n; i++) {
        const fk_run *u = &j->run[i];
        fprintf(o, "  %s:\n    role: %s\n", u->name, u->training ? "training" : "check");
        fk_classes(o, "measured_ms", u->meas, u->other, u->overall);
        fprintf(o, "    unit_ms: {");
        for (int c = 0; c < FK_CLASSES; c++)
            fprintf(o, "%s%s: %.4f", c ? ", " : "", fk_class[c], u->unit[c]);
        fprintf(o, "}\n");
        fk_classes(o, "fitted_ms", u->fit, u->fit_other, u->fit_overall);
        fprintf(o, "    %s: {", u->training ? "in_sample_error_pct" : "error_pct");
        for (int c = 0; c < FK_CLASSES; c++)
            fprintf(o, "%s: %.2f, ", fk_class[c], fk_pct(u->fit[c], u->meas[c]));
        fprintf(o, "other: %.2f, overall: %.2f}\n", fk_pct(u->fit_other, u->other),
                fk_pct(u->fit_overall, u->overall));
        if (u->training) {
            fprintf(o, "    loo_error_pct: {");
            for (int c = 0; c < FK_CLASSES; c++)
                if (isnan(u->loo[c]))
                    fprintf(o, "%s%s: null", c ? ", " : "", fk_class[c]);
                else
                    fprintf(o, "%s%s: %.2f", c ? ", " : "", fk_class[c],
                            fk_pct(u->loo[c], u->meas[c]));
            fprintf(o, "}\n");
        }
    }
    if (fclose(o) || rename(tmp, j->out)) {
        remove(tmp);
        return kvf_fail(err, KVF_EIO, "%s: %s", j->out, strerror(errno));
    }
    return KVF_OK;
}

static void fk_print(const fk_job *j) {
    printf("in-system terms from %s (%d runs): efficiency.in_system_decode %.4f, "
           "efficiency.layer_overhead_us %.2f; leave-one-out MAPE %.2f %% over %d held-out "
           "class times\n",
           j->manifest, j->n, j->factor, j->layer_us, j->loo_mape, j->n_loo);
    printf("  %-26s %-8s %-9s %8s %8s %8s %8s\n", "run", "role", "class", "measured", "unit",
           "fitted", "error");
    for (int i = 0; i < j->n; i++) {
        const fk_run *u = &j->run[i];
        for (int c = 0; c < FK_CLASSES + 2; c++) {
            const char *name = c < FK_CLASSES ? fk_class[c] : c == FK_CLASSES ? "other" : "overall";
            double m = c < FK_CLASSES ? u->meas[c] : c == FK_CLASSES ? u->other : u->overall;
            double f = c < FK_CLASSES ? u->fit[c] : c == FK_CLASSES ? u->fit_other : u->fit_overall;
            char unit[16] = "-";
            if (c < FK_CLASSES) snprintf(unit, sizeof unit, "%.4f", u->unit[c]);
            printf("  %-26s %-8s %-9s %8.4f %8s %8.4f %+7.1f%%\n", c ? "" : u->name,
                   c ? "" : (u->training ? "training" : "check"), name, m, unit, f, fk_pct(f, m));
        }
    }
    printf("wrote %s\n", j->out);
}

int cli_fit_kernels(int argc, char **argv) {
    fk_job *j = kvf_calloc(1, sizeof *j);
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--kernels") && i + 1 < argc)
            j->manifest = argv[++i];
        else if ((!strcmp(a, "-o") || !strcmp(a, "--out")) && i + 1 < argc)
            j->out = argv[++i];
        else if (!strcmp(a, "--force"))
            j->force = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
            j->quiet = true;
        else {
            fprintf(stderr,
                    "kvfleet fit: '%s': --kernels takes MANIFEST -o FILE [--force] [-q] only\n", a);
            rc = 2;
            goto done;
        }
    }
    if (!j->manifest || !j->out) {
        fprintf(stderr, "usage: kvfleet fit --kernels MANIFEST -o FILE [--force] [-q]\n");
        rc = 2;
        goto done;
    }
    kvf_err err = {0};
    kvf_status st = fk_read(j, &err);
    if (!st) st = fk_fit(j, &err);
    if (!st) st = fk_write(j, &err);
    if (st) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        rc = st == KVF_EIO || st == KVF_ENOMEM ? 1 : 2;
    } else if (!j->quiet) {
        fk_print(j);
    }
done:
    free(j);
    return rc;
}
