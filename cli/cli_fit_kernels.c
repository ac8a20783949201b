// cli/cli_fit_kernels.c -- `kvfleet fit --kernels MANIFEST -o FILE`: the in-system terms of
// the table step model fitted to kernel times measured inside serving systems.
//
// A kernel table row is a unit measurement: one kernel alone on an idle GPU. In a serving
// system the same kernels run beside inter-node all-to-alls and each other, and small kernels
// no table lists (norms, rotary, quantisation, top-k) and launch gaps add to every layer. Three
// terms carry that: efficiency.in_system_decode (in-system / unit time of a decode step's
// GEMMs, experts and attention), efficiency.token_overhead_ns (the small kernels, per token a
// GPU per layer) and efficiency.layer_overhead_us (launch gaps, per layer per micro-batch).
// The manifest lists measured runs (per-layer times by kernel class) with the scenario and
// shape each ran at; training runs are fitted to, checks never:
//   in_system_decode = sum of measured / sum of the table model's class times (decode runs)
//   token_overhead_ns = sum of other kernels' time / sum of tokens a GPU (every training run)
//   layer_overhead_us = mean launch gaps / launches a layer (decode runs)
// Leave-one-out holds out one (decode run, class) time at a time and predicts it from the
// factor the others give, and one run's small kernels at a time where two or more train.
// Every run is then evaluated with the fitted terms: per-class and whole-layer errors (the
// whole layer -- the step over the layers -- is never fitted).
#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_points.h"
#include "sim.h"
#include "sim_run.h"

enum { FK_CLASSES = 3, FK_MAX_RUNS = 64, FK_MAX_SETS = 16 };
static const char *const fk_class[FK_CLASSES] = {"gemm", "moe", "attention"};
static const char *const fk_cols[] = {
    "run",     "role",   "scenario",     "set",      "phase",     "batch_per_gpu", "length",
    "gemm_ms", "moe_ms", "attention_ms", "other_ms", "launch_ms", "overall_ms"};
enum { FK_NCOL = sizeof fk_cols / sizeof fk_cols[0] };

typedef struct fk_run {
    char name[64], scenario[SIM_PATH_MAX], set[1024];
    bool training, decode;
    int line;
    double batch, length;
    double meas[FK_CLASSES], other, launch, overall;              // measured, ms a layer
    double unit[FK_CLASSES];                                      // the table model's class times
    double fit[FK_CLASSES], fit_other, fit_launch, fit_overall;   // with the fitted terms
    double loo[FK_CLASSES], loo_other;   // held out: predicted (NaN: not held out)
    double tokens;                       // tokens a GPU a step
    uint32_t layers, launches;
} fk_run;

typedef struct fk_job {
    const char *manifest, *out;
    bool force, quiet;
    fk_run run[FK_MAX_RUNS];
    int n;
    double factor, token_ns, layer_us, loo_mape;
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
    if (!r->f[2][0])
        return kvf_fail(err, KVF_EPARSE, "%s:%d: field 'scenario': empty", j->manifest, line);
    // the scenario, relative to the manifest's folder
    const char *slash = strrchr(j->manifest, '/');
    int dl = slash ? (int)(slash - j->manifest) : 0;
    if (r->f[2][0] == '/' || !slash)
        snprintf(u->scenario, sizeof u->scenario, "%s", r->f[2]);
    else if (snprintf(u->scenario, sizeof u->scenario, "%.*s/%s", dl, j->manifest, r->f[2]) >=
             (int)sizeof u->scenario)
        return kvf_fail(err, KVF_EPARSE, "%s:%d: field 'scenario': path too long", j->manifest,
                        line);
    snprintf(u->set, sizeof u->set, "%s", r->f[3]);
    if (!strcmp(r->f[4], "decode"))
        u->decode = true;
    else if (strcmp(r->f[4], "prefill"))
        return kvf_fail(err, KVF_EPARSE, "%s:%d: field 'phase': '%s' (allowed: decode|prefill)",
                        j->manifest, line, r->f[4]);
    kvf_status st;
    if ((st = fk_num(j, line, "batch_per_gpu", r->f[5], 1, 1e5, &u->batch, err)) ||
        (st = fk_num(j, line, "length", r->f[6], 1, 1e7, &u->length, err)))
        return st;
    if (!u->decode && u->batch != floor(u->batch))
        return kvf_fail(err, KVF_EPARSE,
                        "%s:%d: field 'batch_per_gpu': %g prompts a GPU (prefill: a whole number)",
                        j->manifest, line, u->batch);
    for (int c = 0; c < FK_CLASSES; c++)
        if ((st = fk_num(j, line, fk_cols[7 + c], r->f[7 + c], 1e-6, 1e4, &u->meas[c], err)))
            return st;
    if ((st = fk_num(j, line, "other_ms", r->f[10], 0, 1e4, &u->other, err)) ||
        (st = fk_num(j, line, "launch_ms", r->f[11], 0, 1e4, &u->launch, err)) ||
        (st = fk_num(j, line, "overall_ms", r->f[12], 1e-6, 1e4, &u->overall, err)))
        return st;
    // the classes are parts of the layer: their sum may pass the whole only by a chart's
    // reading error (2 %)
    double parts = u->meas[0] + u->meas[1] + u->meas[2] + u->other + u->launch;
    if (parts > u->overall * 1.02)
        return kvf_fail(err, KVF_EPARSE,
                        "%s:%d: field 'overall_ms': %g is less than its kernel classes' sum %g "
                        "(the classes are parts of the layer)",
                        j->manifest, line, u->overall, parts);
    if (u->training && u->decode && !(u->launch > 0))
        return kvf_fail(err, KVF_EPARSE,
                        "%s:%d: field 'launch_ms': a decode training run needs its launch gaps "
                        "(> 0)",
                        j->manifest, line);
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
    int dec = 0;
    for (int i = 0; i < j->n; i++)
        dec += j->run[i].training && j->run[i].decode;
    if (!dec) return kvf_fail(err, KVF_EPARSE, "%s: no decode run with role training", j->manifest);
    return KVF_OK;
}

// ---- the model's side ----------------------------------------------------------------------

static double term_s(const mdl_explain *ex, const char *name) {
    for (int i = 0; i < ex->n; i++)
        if (!strcmp(ex->t[i].name, name)) return ex->t[i].s;
    return 0;
}

// The run's scenario (without its own fit file: the terms fitted here take its place) with
// its shape and the given settings; its step's class times (ms a layer, as in the system:
// prefill's at the SM share the all-to-alls leave) and the step over the layers.
static kvf_status fk_eval(const fk_job *j, fk_run *u, const char *const *extra, int nextra,
                          double cls[FK_CLASSES], double *layer_ms, kvf_err *err) {
    const char *sets[FK_MAX_SETS + 8];
    int ns = 0;
    sets[ns++] = "serving.fit=null";
    char buf[sizeof u->set];
    snprintf(buf, sizeof buf, "%s", u->set);
    char *save = NULL;
    for (char *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        if (ns > FK_MAX_SETS)
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
                      "%s:%d: field 'scenario': %s runs step_model %s; the in-system terms are "
                      "the table model's (step_model: table)",
                      j->manifest, u->line, u->scenario, cfg->step_model);
    mdl_explain *ex = kvf_calloc(1, sizeof *ex);
    sim_explain_info in = {0};
    if (!st) st = sim_explain_terms(cfg, u->decode, u->batch, u->length, ex, &in, err);
    if (!st) {
        double L = in.layers ? in.layers : 1;
        double shared = term_s(ex, "  shared experts");
        double dense = term_s(ex, "dense GEMMs"), expert = term_s(ex, "expert GEMMs");
        double attn = term_s(ex, "attention");
        double work = dense + expert + attn + term_s(ex, "MoE routing") +
                      term_s(ex, "MoE permutation") + term_s(ex, "small kernels");
        double k = work > 0 ? 1 + term_s(ex, "SM share") / work : 1;
        cls[0] = (dense + shared) / L * 1e3 * k;
        cls[1] = (expert - shared + term_s(ex, "MoE routing") + term_s(ex, "MoE permutation")) / L *
                 1e3 * k;
        cls[2] = attn / L * 1e3 * k;
        *layer_ms = in.step_s / L * 1e3;
        u->layers = in.layers;
        u->launches = in.launches;
        u->tokens = in.tokens_per_gpu;
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

// The error in % of the measured figure; under half the last digit shown (0.005) it is 0,
// never "-0.00".
static double fk_pct(double pred, double meas) {
    double p = 100 * (pred - meas) / meas;
    return fabs(p) < 0.005 ? 0 : p;
}

static kvf_status fk_fit(fk_job *j, kvf_err *err) {
    static const char *const unit_sets[] = {"efficiency.in_system_decode=1",
                                            "efficiency.token_overhead_ns=0"};
    kvf_status st;
    double layer;
    for (int i = 0; i < j->n; i++)
        if ((st = fk_eval(j, &j->run[i], unit_sets, 2, j->run[i].unit, &layer, err))) return st;
    // the factor: time-weighted over every decode training (run, class); the small kernels
    // over every training run's tokens; launch gaps over the decode training runs
    double sm = 0, su = 0, so = 0, stok = 0, lay = 0;
    int nd = 0, nt = 0;
    for (int i = 0; i < j->n; i++) {
        fk_run *u = &j->run[i];
        for (int c = 0; c < FK_CLASSES; c++)
            u->loo[c] = NAN;
        u->loo_other = NAN;
        if (!u->training) continue;
        so += u->other;
        stok += u->tokens;
        nt++;
        if (!u->decode) continue;
        for (int c = 0; c < FK_CLASSES; c++) {
            sm += u->meas[c];
            su += u->unit[c];
        }
        lay += u->launch * 1e3 / (u->launches ? u->launches : 1);
        nd++;
    }
    if (!(su > 0) || !(stok > 0))
        return kvf_fail(err, KVF_EINVAL, "%s: the training runs' steps have no kernel terms",
                        j->manifest);
    j->factor = sm / su;
    j->token_ns = so * 1e6 / stok;
    j->layer_us = lay / nd;
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
        if (u->decode)
            for (int c = 0; c < FK_CLASSES; c++) {
                double rest_m = sm - u->meas[c], rest_u = su - u->unit[c];
                if (!(rest_u > 0)) continue;
                u->loo[c] = u->unit[c] * rest_m / rest_u;
                ape += fabs(fk_pct(u->loo[c], u->meas[c]));
                j->n_loo++;
            }
        if (nt > 1 && u->other > 0 && stok - u->tokens > 0) {
            u->loo_other = u->tokens * (so - u->other) / (stok - u->tokens);
            ape += fabs(fk_pct(u->loo_other, u->other));
            j->n_loo++;
        }
    }
    j->loo_mape = j->n_loo ? ape / j->n_loo : NAN;
    // every run with the fitted terms
    char f1[64], f2[64], f3[64];
    snprintf(f1, sizeof f1, "efficiency.in_system_decode=%.4f", j->factor);
    snprintf(f2, sizeof f2, "efficiency.token_overhead_ns=%.2f", j->token_ns);
    snprintf(f3, sizeof f3, "efficiency.layer_overhead_us=%.2f", j->layer_us);
    const char *fit_sets[] = {f1, f2, f3};
    for (int i = 0; i < j->n; i++) {
        fk_run *u = &j->run[i];
        if ((st = fk_eval(j, u, fit_sets, 3, u->fit, &u->fit_overall, err))) return st;
        // the class terms are listed as measured alone; a decode step scales them all
        for (int c = 0; c < FK_CLASSES; c++)
            u->fit[c] = u->unit[c] * (u->decode ? j->factor : 1);
        u->fit_other = j->token_ns * u->tokens * 1e-6;
        u->fit_launch = j->layer_us * u->launches / 1e3;
    }
    return KVF_OK;
}

// ---- the fit file --------------------------------------------------------------------------

static void fk_err(FILE *o, double pred, double meas, bool first, const char *name) {
    if (meas > 0)
        fprintf(o, "%s%s: %.2f", first ? "" : ", ", name, fk_pct(pred, meas));
    else
        fprintf(o, "%s%s: null", first ? "" : ", ", name);
}

// The output may not be a link, a special file or one of the fit's inputs (the manifest and
// the scenarios it names), and is replaced only with --force. Checked before the fit runs.
static kvf_status fk_check_out(const fk_job *j, kvf_err *err) {
    struct stat sb;
    if (lstat(j->out, &sb) == 0 && S_ISLNK(sb.st_mode))
        return kvf_fail(err, KVF_EINVAL,
                        "-o %s: a symbolic link; refused (nothing is written through a link)",
                        j->out);
    kvf_status st = sim_path_check_file("-o", j->out, err);
    if (st) return st;
    if (sim_path_same_file(j->out, j->manifest))
        return kvf_fail(err, KVF_EINVAL,
                        "-o %s: is the manifest; refused, an output never overwrites an input",
                        j->out);
    for (int i = 0; i < j->n; i++)
        if (sim_path_same_file(j->out, j->run[i].scenario))
            return kvf_fail(err, KVF_EINVAL,
                            "-o %s: is run %s's scenario; refused, an output never overwrites an "
                            "input",
                            j->out, j->run[i].name);
    if (!j->force && stat(j->out, &sb) == 0)
        return kvf_fail(err, KVF_EINVAL, "%s exists (--force replaces it)", j->out);
    return KVF_OK;
}

static kvf_status fk_write(const fk_job *j, kvf_err *err) {
    char tmp[SIM_PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", j->out, (int)getpid());
    FILE *o = fopen(tmp, "wx");
    if (!o) return kvf_fail(err, KVF_EIO, "%s: %s", tmp, strerror(errno));
    fprintf(o,
            "# kvfleet fit --kernels: in-system terms of the table step model fitted to kernel\n"
            "# times measured inside serving systems. Inputs: the training runs' per-layer\n"
            "# kernel times and the table model's unit-measured terms at each run's shape;\n"
            "# outputs: the terms and the errors below (ms a layer; errors in %% of the measured\n"
            "# time). A scenario applies the terms with serving.fit: FILE (keys it sets itself\n"
            "# win). Runs with role check are never fitted to; the whole layer is never fitted.\n");
    fprintf(o, "training_set: %s\n", j->manifest);
    fprintf(o, "objective: in_system_decode = sum of measured / sum of unit-measured GEMM, MoE and "
               "attention times over the decode training runs; token_overhead_ns = their other "
               "kernels over their tokens a GPU; layer_overhead_us = launch gaps per layer per "
               "micro-batch\n");
    fprintf(o,
            "terms:\n  efficiency.in_system_decode: %.4f\n  efficiency.token_overhead_ns: %.2f\n"
            "  efficiency.layer_overhead_us: %.2f\n",
            j->factor, j->token_ns, j->layer_us);
    fprintf(o, "loo_unit: one decode training run's kernel class (or one training run's small "
               "kernels) held out, predicted from what the others give\n");
    if (j->n_loo)
        fprintf(o, "loo_mape_pct: %.2f\n", j->loo_mape);
    else
        fprintf(o, "loo_mape_pct: null\n");
    fprintf(o, "runs:\n");
    for (int i = 0; i < j->n; i++) {
        const fk_run *u = &j->run[i];
        fprintf(o, "  %s:\n    role: %s\n    phase: %s\n    tokens_per_gpu: %.0f\n", u->name,
                u->training ? "training" : "check", u->decode ? "decode" : "prefill", u->tokens);
        fprintf(o, "    measured_ms: {");
        for (int c = 0; c < FK_CLASSES; c++)
            fprintf(o, "%s: %.4f, ", fk_class[c], u->meas[c]);
        fprintf(o, "other: %.4f, launch: %.4f, overall: %.4f}\n", u->other, u->launch, u->overall);
        fprintf(o, "    unit_ms: {");
        for (int c = 0; c < FK_CLASSES; c++)
            fprintf(o, "%s%s: %.4f", c ? ", " : "", fk_class[c], u->unit[c]);
        fprintf(o, "}\n    fitted_ms: {");
        for (int c = 0; c < FK_CLASSES; c++)
            fprintf(o, "%s: %.4f, ", fk_class[c], u->fit[c]);
        fprintf(o, "other: %.4f, launch: %.4f, overall: %.4f}\n", u->fit_other, u->fit_launch,
                u->fit_overall);
        fprintf(o, "    %s: {", u->training ? "in_sample_error_pct" : "error_pct");
        for (int c = 0; c < FK_CLASSES; c++)
            fk_err(o, u->fit[c], u->meas[c], c == 0, fk_class[c]);
        fk_err(o, u->fit_other, u->other, false, "other");
        fk_err(o, u->fit_launch, u->launch, false, "launch");
        fk_err(o, u->fit_overall, u->overall, false, "overall");
        fprintf(o, "}\n");
        if (u->training) {
            fprintf(o, "    loo_error_pct: {");
            for (int c = 0; c < FK_CLASSES; c++)
                if (isnan(u->loo[c]))
                    fprintf(o, "%s%s: null", c ? ", " : "", fk_class[c]);
                else
                    fk_err(o, u->loo[c], u->meas[c], c == 0, fk_class[c]);
            if (isnan(u->loo_other))
                fprintf(o, ", other: null");
            else
                fk_err(o, u->loo_other, u->other, false, "other");
            fprintf(o, "}\n");
        }
    }
    if (fclose(o) || rename(tmp, j->out)) {
        unlink(tmp);
        return kvf_fail(err, KVF_EIO, "%s: %s", j->out, strerror(errno));
    }
    return KVF_OK;
}

static void fk_print(const fk_job *j) {
    printf("in-system terms from %s (%d runs): efficiency.in_system_decode %.4f, "
           "efficiency.token_overhead_ns %.2f, efficiency.layer_overhead_us %.2f; "
           "leave-one-out MAPE %.2f %% over %d held-out times\n",
           j->manifest, j->n, j->factor, j->token_ns, j->layer_us, j->loo_mape, j->n_loo);
    printf("  %-32s %-8s %-9s %9s %9s %9s %8s\n", "run", "role", "class", "measured", "unit",
           "fitted", "error");
    for (int i = 0; i < j->n; i++) {
        const fk_run *u = &j->run[i];
        for (int c = 0; c < FK_CLASSES + 3; c++) {
            static const char *const extra[] = {"other", "launch", "overall"};
            const char *name = c < FK_CLASSES ? fk_class[c] : extra[c - FK_CLASSES];
            double m = c < FK_CLASSES        ? u->meas[c]
                       : c == FK_CLASSES     ? u->other
                       : c == FK_CLASSES + 1 ? u->launch
                                             : u->overall;
            double f = c < FK_CLASSES        ? u->fit[c]
                       : c == FK_CLASSES     ? u->fit_other
                       : c == FK_CLASSES + 1 ? u->fit_launch
                                             : u->fit_overall;
            char unit[16] = "-", e[16] = "-";
            if (c < FK_CLASSES) snprintf(unit, sizeof unit, "%.4f", u->unit[c]);
            double pct = m > 0 ? fk_pct(f, m) : 0;
            if (fabs(pct) < 0.05) pct = 0;   // no "-0.0%"
            if (m > 0) snprintf(e, sizeof e, "%+.1f%%", pct);
            printf("  %-32s %-8s %-9s %9.4f %9s %9.4f %8s\n", c ? "" : u->name,
                   c ? "" : (u->training ? "training" : "check"), name, m, unit, f, e);
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
    if (!st) st = fk_check_out(j, &err);
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
