// cli/cli_fit.c -- `kvfleet fit`: the few system-level terms that kernel tables do not give
// (frontend latency, per-step host overhead, achieved memory bandwidth, the fixed cost of a
// collective) fitted to a named training set of measured runs, written as a file a scenario
// names (serving.fit), with the leave-one-out error of every headline metric.
//
// The objective is the mean over the training runs of each run's MAPE (TTFT mean, TTFT p90,
// ITL mean, E2E mean; cli_measured.c). The search is Nelder-Mead over the terms scaled to
// [0, 1] within their bounds (clamped), from fixed starting points, deterministic. Leave one
// out: for each training run the terms are fitted again on the others (the same search from
// the same start) and the run is predicted with them; its errors are out of sample. Runs the
// manifest marks overloaded (client time-outs censor what was measured) are left out of the
// training set and named as such; they stay checks. The left-out fits are independent: with
// --jobs N they run in N child processes at a time, each sending its result back through a
// pipe, and the file is the same as with one (each fit is the same deterministic search).
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_measured.h"

enum { FIT_MAX_RUNS = 64, FIT_MAX_TERMS = 8 };

typedef struct fit_term {
    const char *key;        // scenario key
    double lo, hi, start;   // bounds and starting value, in the key's file unit
} fit_term;

// The terms fitted by default; each is a system term no kernel table gives.
static const fit_term default_terms[] = {
    {"serving.frontend_ms", 0, 100, 10},              // HTTP, tokenisation, first-token return
    {"efficiency.step_overhead_us", 0, 4000, 500},    // host work per step (scheduler, launches)
    {"efficiency.memory", 0.4, 1.0, 0.8},             // achieved share of HBM bandwidth (weights)
    {"efficiency.attention_memory", 0.4, 1.0, 0.8},   // the same, reading KV in attention
    {"efficiency.comm_latency_us", 0, 100, 8},        // fixed cost of one collective (TP > 1)
    {"efficiency.compute", 0.2, 1.0, 0.6},            // achieved share of peak FLOP/s
    {"serving.first_token_lag_steps", 0, 1, 0.5},     // output pipeline: share of the next step
};

typedef struct fit_run {
    char name[128];
    char hardware[64];
    trc_measured m;
    char trace[SIM_PATH_MAX + 64];
    bool overloaded;
} fit_run;

typedef struct fit_ctx {
    fit_run run[FIT_MAX_RUNS];
    int n_run;
    const fit_term *term;
    int n_term;
    const char *model;      // --model for every run (NULL: from the run)
    const char *base[32];   // --set K=V for every run, before the terms
    int n_base;
    char tmp[64];
    long evals;
    bool quiet;
} fit_ctx;

// Simulates run i with the terms at x (file units); t gets the comparison. false when the run
// failed (its message in err).
static bool eval_run(fit_ctx *f, int i, const double *x, cli_meas_table *t, kvf_err *err) {
    char sets[FIT_MAX_TERMS][128];
    const char *sp[32 + FIT_MAX_TERMS];
    for (int k = 0; k < f->n_base; k++)
        sp[k] = f->base[k];
    for (int k = 0; k < f->n_term; k++) {
        snprintf(sets[k], sizeof sets[k], "%s=%.9g", f->term[k].key, x[k]);
        sp[f->n_base + k] = sets[k];
    }
    cli_meas_setup s = {.model = f->model,
                        .hardware = f->run[i].hardware,
                        .sets = sp,
                        .n_sets = f->n_base + f->n_term,
                        .seed = 1};
    sim_config *cfg = kvf_malloc(sizeof *cfg);
    char notes[1024] = "";
    kvf_status st =
        cli_meas_scenario(&f->run[i].m, &s, f->run[i].trace, cfg, notes, sizeof notes, err);
    void *sj = NULL;
    if (!st) {
        sim_run_opts o = {.quiet = true};
        st = sim_run(cfg, &o, &sj, err);
    }
    if (!st) cli_meas_compare(&f->run[i].m, sj, t);
    json_decref(sj);
    free(cfg);
    f->evals++;
    return !st && isfinite(t->mape_pct);
}

// Mean MAPE over the runs with use[i], the terms at x.
static double objective(fit_ctx *f, const bool *use, const double *x) {
    double sum = 0;
    int n = 0;
    for (int i = 0; i < f->n_run; i++) {
        if (!use[i]) continue;
        cli_meas_table t;
        kvf_err e = {0};
        // a run's MAPE counts at most 100 %: a configuration that overloads one run (its
        // latencies thousands of per cent off) must not hide what it does to the others
        sum += eval_run(f, i, x, &t, &e) ? KVF_MIN(t.mape_pct, 100.0) : 100.0;
        n++;
    }
    return n ? sum / n : 1e6;
}

static void to_x(const fit_ctx *f, const double *u, double *x) {
    for (int k = 0; k < f->n_term; k++) {
        double v = u[k] < 0 ? 0 : u[k] > 1 ? 1 : u[k];
        x[k] = f->term[k].lo + v * (f->term[k].hi - f->term[k].lo);
    }
}

static double obj_u(fit_ctx *f, const bool *use, const double *u) {
    double x[FIT_MAX_TERMS];
    to_x(f, u, x);
    return objective(f, use, x);
}

// Nelder-Mead in the unit cube from u0 (step: the initial simplex's edge), at most max_evals
// objective evaluations; u0 gets the best point, the return is its objective.
static double nelder_mead(fit_ctx *f, const bool *use, double *u0, double step, int max_evals) {
    int d = f->n_term, np = d + 1;
    double p[FIT_MAX_TERMS + 1][FIT_MAX_TERMS], y[FIT_MAX_TERMS + 1];
    for (int i = 0; i < np; i++) {
        for (int k = 0; k < d; k++)
            p[i][k] = u0[k];
        if (i) p[i][i - 1] += p[i][i - 1] + step <= 1 ? step : -step;
        y[i] = obj_u(f, use, p[i]);
    }
    int evals = np;
    while (evals < max_evals) {
        int hi = 0, lo = 0;
        for (int i = 1; i < np; i++) {
            if (y[i] > y[hi]) hi = i;
            if (y[i] < y[lo]) lo = i;
        }
        int nh = lo;
        for (int i = 0; i < np; i++)
            if (i != hi && y[i] > y[nh]) nh = i;
        if (fabs(y[hi] - y[lo]) < 0.02) break;   // 0.02 percentage points of MAPE
        double c[FIT_MAX_TERMS] = {0}, r[FIT_MAX_TERMS], e[FIT_MAX_TERMS], k2[FIT_MAX_TERMS];
        for (int i = 0; i < np; i++)
            if (i != hi)
                for (int k = 0; k < d; k++)
                    c[k] += p[i][k] / d;
        for (int k = 0; k < d; k++)
            r[k] = c[k] + (c[k] - p[hi][k]);
        double yr = obj_u(f, use, r);
        evals++;
        if (yr < y[lo]) {
            for (int k = 0; k < d; k++)
                e[k] = c[k] + 2 * (c[k] - p[hi][k]);
            double ye = obj_u(f, use, e);
            evals++;
            if (ye < yr)
                memcpy(p[hi], e, sizeof e), y[hi] = ye;
            else
                memcpy(p[hi], r, sizeof r), y[hi] = yr;
        } else if (yr < y[nh]) {
            memcpy(p[hi], r, sizeof r), y[hi] = yr;
        } else {
            for (int k = 0; k < d; k++)
                k2[k] = c[k] + 0.5 * (p[hi][k] - c[k]);
            double yk = obj_u(f, use, k2);
            evals++;
            if (yk < y[hi]) {
                memcpy(p[hi], k2, sizeof k2), y[hi] = yk;
            } else {   // shrink towards the best
                for (int i = 0; i < np; i++) {
                    if (i == lo) continue;
                    for (int k = 0; k < d; k++)
                        p[i][k] = p[lo][k] + 0.5 * (p[i][k] - p[lo][k]);
                    y[i] = obj_u(f, use, p[i]);
                    evals++;
                }
            }
        }
    }
    int lo = 0;
    for (int i = 1; i < np; i++)
        if (y[i] < y[lo]) lo = i;
    for (int k = 0; k < d; k++)
        u0[k] = p[lo][k] < 0 ? 0 : p[lo][k] > 1 ? 1 : p[lo][k];
    return y[lo];
}

// ---- inputs ---------------------------------------------------------------------------------
static kvf_status add_run(fit_ctx *f, const char *dir, const char *name, const char *hw,
                          bool overloaded, kvf_err *err) {
    if (f->n_run >= FIT_MAX_RUNS)
        return kvf_fail(err, KVF_EINVAL, "at most %d measured runs", FIT_MAX_RUNS);
    fit_run *r = &f->run[f->n_run];
    memset(r, 0, sizeof *r);
    kvf_status st = trc_measured_read(dir, TRC_MEAS_AUTO, -1, &r->m, err);
    if (st) return st;
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->hardware, sizeof r->hardware, "%s", hw);
    r->overloaded = overloaded;
    snprintf(r->trace, sizeof r->trace, "%s/run%d.jsonl", f->tmp, f->n_run);
    st = trc_measured_write_trace(&r->m, r->trace, 16, 1, NULL, err);
    if (st) {
        trc_measured_free(&r->m);
        return st;
    }
    f->n_run++;
    return KVF_OK;
}

// The manifest's hardware names a bundled file by its first letters ("h100-sxm" -> h100).
static void hw_name(const char *s, char *out, size_t n) {
    size_t k = 0;
    while (s[k] && s[k] != '-' && s[k] != ' ' && k + 1 < n) {
        out[k] = (char)(s[k] >= 'A' && s[k] <= 'Z' ? s[k] + 32 : s[k]);
        k++;
    }
    out[k] = '\0';
}

// ---- output ---------------------------------------------------------------------------------
typedef struct errs {
    double e[CLI_MEAS_PRIMARY];   // mean |error| per headline metric, %
    double mape;
} errs;

static void errs_add(errs *a, const cli_meas_table *t, int *n) {
    for (int k = 0; k < CLI_MEAS_PRIMARY; k++)
        a->e[k] += fabs(t->m[k].error_pct);
    a->mape += t->mape_pct;
    (*n)++;
}

static void errs_div(errs *a, int n) {
    for (int k = 0; k < CLI_MEAS_PRIMARY; k++)
        a->e[k] = n ? a->e[k] / n : NAN;
    a->mape = n ? a->mape / n : NAN;
}

static void write_errs(FILE *o, const char *indent, const errs *a, const cli_meas_table *names) {
    for (int k = 0; k < CLI_MEAS_PRIMARY; k++)
        fprintf(o, "%s%s: %.2f\n", indent, names->m[k].name, a->e[k]);
    fprintf(o, "%smape: %.2f\n", indent, a->mape);
}

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: kvfleet fit (--manifest CSV | --measured RUN --hardware H ...) -o FILE\n"
               "                   [--term KEY:LO:HI:START]... [--max-evals N] [--no-loo]\n"
               "                   [--include-overloaded] [--model M] [--set K=V]... [--jobs N]\n"
               "                   [--force] [-q]\n"
               "  Fits system terms (default serving.frontend_ms, efficiency.step_overhead_us,\n"
               "  efficiency.memory, efficiency.attention_memory, efficiency.comm_latency_us,\n"
               "  efficiency.compute, serving.first_token_lag_steps) to measured runs, writes\n"
               "  them as a file a scenario names with serving.fit, and reports the in-sample and\n"
               "  leave-one-out error of TTFT mean, TTFT p90, ITL mean and E2E mean.\n"
               "  --jobs N runs N left-out fits at a time in child processes (default 1; the file\n"
               "  is the same).\n"
               "       kvfleet fit --kernels MANIFEST -o FILE [--force] [-q]\n"
               "  Fits the table step model's in-system terms (efficiency.in_system_decode,\n"
               "  efficiency.token_overhead_ns, efficiency.layer_overhead_us) to per-layer kernel\n"
               "  times measured inside serving systems (validation/in-system/manifest.csv), with\n"
               "  leave-one-out error.\n");
    return rc;
}

static bool parse_num(const char *s, double *v) {
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return end != s && !*end && !errno && isfinite(*v);
}

// One `kvfleet fit` invocation: its options, its runs (in ctx) and what it found.
typedef struct fit_job {
    fit_ctx *f;
    const char *manifest, *out, *hw;
    const char *runs[FIT_MAX_RUNS];
    int n_runs, max_evals, jobs;
    bool loo, force, include_over;
    fit_term terms[FIT_MAX_TERMS];
    int n_terms;
    bool train[FIT_MAX_RUNS];
    int n_train;
    time_t t0;
    double u[FIT_MAX_TERMS], x[FIT_MAX_TERMS];   // the fit, in the unit cube and in key units
    cli_meas_table tab[FIT_MAX_RUNS];            // every run at the fitted terms
    cli_meas_table loo_tab[FIT_MAX_RUNS];        // each training run by terms fitted without it
    double loo_x[FIT_MAX_RUNS][FIT_MAX_TERMS];
    errs ins, lo_e;
} fit_job;

// --term KEY:LO:HI:START into j->terms; false (message printed) when malformed.
static bool parse_term(fit_job *j, const char *v) {
    char buf[160];
    snprintf(buf, sizeof buf, "%s", v);
    char *a = strtok(buf, ":"), *b = strtok(NULL, ":"), *c = strtok(NULL, ":"),
         *d = strtok(NULL, ":");
    double lo, hi, s0;
    if (j->n_terms >= FIT_MAX_TERMS || !a || !b || !c || !d || !parse_num(b, &lo) ||
        !parse_num(c, &hi) || !parse_num(d, &s0) || !(lo < hi) || s0 < lo || s0 > hi) {
        fprintf(stderr,
                "kvfleet fit: --term %s: expected KEY:LO:HI:START with LO < HI and "
                "START between (at most %d terms)\n",
                v, FIT_MAX_TERMS);
        return false;
    }
    j->terms[j->n_terms++] = (fit_term){kvf_strdup(a), lo, hi, s0};
    return true;
}

// The command line into *j. Returns -1 to go on, else the exit code (0 after --help).
static int parse_args(fit_job *j, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        bool valued = !strcmp(o, "--manifest") || !strcmp(o, "--measured") || !strcmp(o, "-o") ||
                      !strcmp(o, "--hardware") || !strcmp(o, "--term") ||
                      !strcmp(o, "--max-evals") || !strcmp(o, "--model") || !strcmp(o, "--set") ||
                      !strcmp(o, "--jobs");
        if (valued && i + 1 >= argc) {
            fprintf(stderr, "kvfleet fit: option %s needs a value\n", o);
            return 2;
        }
        const char *v = valued ? argv[++i] : NULL;
        double x;
        if (!strcmp(o, "--manifest"))
            j->manifest = v;
        else if (!strcmp(o, "-o"))
            j->out = v;
        else if (!strcmp(o, "--hardware"))
            j->hw = v;
        else if (!strcmp(o, "--model"))
            j->f->model = v;
        else if (!strcmp(o, "--measured") || !strcmp(o, "--set")) {
            bool m = o[2] == 'm';
            if ((m && j->n_runs >= FIT_MAX_RUNS) || (!m && j->f->n_base >= 32)) {
                fprintf(stderr, "kvfleet fit: at most %d %s\n", m ? FIT_MAX_RUNS : 32, o);
                return 2;
            }
            if (m)
                j->runs[j->n_runs++] = v;
            else
                j->f->base[j->f->n_base++] = v;
        } else if (!strcmp(o, "--max-evals")) {
            if (!parse_num(v, &x) || x < 4 || x > 100000 || x != floor(x)) {
                fprintf(stderr,
                        "kvfleet fit: --max-evals %s: expected a whole number in [4, 100000]\n", v);
                return 2;
            }
            j->max_evals = (int)x;
        } else if (!strcmp(o, "--jobs")) {
            if (!parse_num(v, &x) || x < 1 || x > FIT_MAX_RUNS || x != floor(x)) {
                fprintf(stderr, "kvfleet fit: --jobs %s: expected a whole number in [1, %d]\n", v,
                        FIT_MAX_RUNS);
                return 2;
            }
            j->jobs = (int)x;
        } else if (!strcmp(o, "--term")) {
            if (!parse_term(j, v)) return 2;
        } else if (!strcmp(o, "--no-loo"))
            j->loo = false;
        else if (!strcmp(o, "--include-overloaded"))
            j->include_over = true;
        else if (!strcmp(o, "--force"))
            j->force = true;
        else if (!strcmp(o, "-q") || !strcmp(o, "--quiet"))
            j->f->quiet = true;
        else if (!strcmp(o, "--help") || !strcmp(o, "-h"))
            return usage(stdout, 0);
        else {
            fprintf(stderr, "kvfleet fit: unknown option '%s'\n", o);
            return usage(stderr, 2);
        }
    }
    if (!j->out || (!j->manifest && !j->n_runs) || (j->n_runs && !j->hw)) {
        fprintf(stderr, "kvfleet fit: needs -o FILE and --manifest CSV, or --measured RUN... with "
                        "--hardware\n");
        return usage(stderr, 2);
    }
    struct stat sb;
    if (!j->force && stat(j->out, &sb) == 0) {
        fprintf(stderr, "kvfleet fit: %s exists; --force replaces it\n", j->out);
        return 2;
    }
    return -1;
}

// The manifest's runs and the --measured ones, each written as a trace once; the training set
// (all but the overloaded, unless --include-overloaded).
static kvf_status load_runs(fit_job *j, kvf_err *err) {
    fit_ctx *f = j->f;
    kvf_status st = KVF_OK;
    if (j->manifest) {
        trc_measured_entry *e = NULL;
        size_t ne = 0;
        if ((st = trc_measured_manifest_read(j->manifest, &e, &ne, err))) return st;
        for (size_t i = 0; !st && i < ne; i++) {
            char h[64];
            hw_name(j->hw ? j->hw : e[i].hardware, h, sizeof h);
            st = add_run(f, e[i].dir, e[i].experiment, h, e[i].overloaded, err);
        }
        free(e);
        if (st) return st;
    }
    for (int i = 0; i < j->n_runs; i++) {
        const char *b = strrchr(j->runs[i], '/');
        if ((st = add_run(f, j->runs[i], b && b[1] ? b + 1 : j->runs[i], j->hw, false, err)))
            return st;
    }
    for (int i = 0; i < f->n_run; i++) {
        j->train[i] = j->include_over || !f->run[i].overloaded;
        j->n_train += j->train[i];
    }
    if (j->n_train < 1)
        return kvf_fail(err, KVF_EINVAL, "no training run left (every run is marked overloaded)");
    if (j->loo && j->n_train < 3) j->loo = false;   // one held out of two leaves one run: not a fit
    return KVF_OK;
}

// The fit on the whole training set, and every run's table at it (in-sample errors).
static kvf_status fit_all(fit_job *j, kvf_err *err) {
    fit_ctx *f = j->f;
    for (int k = 0; k < f->n_term; k++)
        j->u[k] = (f->term[k].start - f->term[k].lo) / (f->term[k].hi - f->term[k].lo);
    double best = nelder_mead(f, j->train, j->u, 0.25, j->max_evals);
    to_x(f, j->u, j->x);
    if (!f->quiet) {
        fprintf(stderr,
                "fit: %d training runs, objective %.2f %% after %ld simulations:", j->n_train, best,
                f->evals);
        for (int k = 0; k < f->n_term; k++)
            fprintf(stderr, " %s=%.4g", f->term[k].key, j->x[k]);
        fprintf(stderr, "\n");
    }
    int n_in = 0;
    for (int i = 0; i < f->n_run; i++) {
        kvf_err e2 = {0};
        if (!eval_run(f, i, j->x, &j->tab[i], &e2))
            return kvf_fail(err, KVF_ERUN, "%s: %s", f->run[i].name, e2.msg);
        if (j->train[i]) errs_add(&j->ins, &j->tab[i], &n_in);
    }
    errs_div(&j->ins, n_in);
    return KVF_OK;
}

// One left-out fit's result, as a child process sends it back (plain data: the metric names
// are the program's own strings, at the same addresses in parent and child).
typedef struct loo_result {
    bool ok;
    long evals;   // simulations it made
    double x[FIT_MAX_TERMS];
    cli_meas_table tab;
    char msg[1024];   // why the run failed, when !ok
} loo_result;
// a child writes its result and exits before the parent reads: it must fit in the pipe
_Static_assert(sizeof(loo_result) <= 4096, "a left-out fit's result fits a pipe's buffer");

// Training run i predicted by terms fitted on the other training runs by the same search as
// the full fit (the same starting point and budget; never started from the full fit, which
// has seen the run).
static void loo_one(fit_job *j, int i, loo_result *r) {
    fit_ctx *f = j->f;
    bool use[FIT_MAX_RUNS];
    memcpy(use, j->train, sizeof use);
    use[i] = false;
    double ui[FIT_MAX_TERMS];
    for (int k = 0; k < f->n_term; k++)
        ui[k] = (f->term[k].start - f->term[k].lo) / (f->term[k].hi - f->term[k].lo);
    long e0 = f->evals;
    nelder_mead(f, use, ui, 0.25, j->max_evals);
    memset(r, 0, sizeof *r);
    to_x(f, ui, r->x);
    kvf_err e2 = {0};
    r->ok = eval_run(f, i, r->x, &r->tab, &e2);
    r->evals = f->evals - e0;
    f->evals = e0;   // counted by fit_loo from the result, in this process or another
    if (!r->ok) snprintf(r->msg, sizeof r->msg, "%s", e2.msg[0] ? e2.msg : "no comparable metric");
    if (r->ok && !f->quiet)
        fprintf(stderr, "fit: left out %-48s MAPE %.1f %%\n", f->run[i].name, r->tab.mape_pct);
}

// All n bytes of p to (out) or from fd; false on an error or an early end.
static bool pipe_io(int fd, void *p, size_t n, bool out) {
    for (char *c = p; n;) {
        ssize_t k = out ? write(fd, c, n) : read(fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        c += k;
        n -= (size_t)k;
    }
    return true;
}

// The left-out fits of the training runs, j->jobs at a time (each in a child process when
// more than one); res[i] for every training run i. Children that fail to start or to report
// are errors; a run the simulation fails is reported in its result.
static kvf_status loo_run_all(fit_job *j, loo_result *res, kvf_err *err) {
    fit_ctx *f = j->f;
    if (j->jobs <= 1) {
        for (int i = 0; i < f->n_run; i++)
            if (j->train[i]) loo_one(j, i, &res[i]);
        return KVF_OK;
    }
    fflush(NULL);   // nothing buffered is written twice by a child
    pid_t parent = getpid();
    pid_t pid[FIT_MAX_RUNS] = {0};
    int fd[FIT_MAX_RUNS], running = 0, next = 0;
    kvf_status st = KVF_OK;
    for (;;) {
        while (!st && running < j->jobs && next < f->n_run) {
            int i = next++;
            if (!j->train[i]) continue;
            int p[2];
            if (pipe(p)) {
                st = kvf_fail(err, KVF_ERUN, "fit: pipe: %s", strerror(errno));
                break;
            }
            pid_t c = fork();
            if (c < 0) {
                close(p[0]);
                close(p[1]);
                st = kvf_fail(err, KVF_ERUN, "fit: fork: %s", strerror(errno));
                break;
            }
            if (c == 0) {
                // a worker does not outlive the fit (killed, say, by SIGTERM or SIGKILL)
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) _exit(1);
                close(p[0]);
                loo_result r;
                loo_one(j, i, &r);
                _exit(pipe_io(p[1], &r, sizeof r, true) ? 0 : 1);
            }
            close(p[1]);
            pid[i] = c;
            fd[i] = p[0];
            running++;
        }
        if (!running) break;
        int status;
        pid_t c = waitpid(-1, &status, 0);
        if (c < 0) {
            if (errno == EINTR) continue;
            st = st ? st : kvf_fail(err, KVF_ERUN, "fit: waitpid: %s", strerror(errno));
            break;
        }
        int i = 0;
        while (i < f->n_run && pid[i] != c)
            i++;
        if (i == f->n_run) continue;   // not one of ours
        pid[i] = 0;
        running--;
        bool got = WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                   pipe_io(fd[i], &res[i], sizeof res[i], false);
        close(fd[i]);
        if (!got && !st)
            st = kvf_fail(err, KVF_ERUN, "%s: the left-out fit's process ended without its result",
                          f->run[i].name);
    }
    for (int i = 0; i < f->n_run; i++)   // after an error: the others are not waited for
        if (pid[i]) {
            kill(pid[i], SIGKILL);
            waitpid(pid[i], NULL, 0);
            close(fd[i]);
        }
    return st;
}

// Leave one out: every training run's left-out fit (loo_run_all), its terms and errors kept in
// run order, so the file does not depend on --jobs.
static kvf_status fit_loo(fit_job *j, kvf_err *err) {
    fit_ctx *f = j->f;
    loo_result *res = kvf_calloc((size_t)f->n_run, sizeof *res);
    kvf_status st = loo_run_all(j, res, err);
    int n_lo = 0;
    for (int i = 0; !st && i < f->n_run; i++) {
        if (!j->train[i]) continue;
        if (!res[i].ok) {
            st = kvf_fail(err, KVF_ERUN, "%s: %s", f->run[i].name, res[i].msg);
            break;
        }
        f->evals += res[i].evals;
        memcpy(j->loo_x[i], res[i].x, sizeof j->loo_x[i]);
        j->loo_tab[i] = res[i].tab;
        errs_add(&j->lo_e, &j->loo_tab[i], &n_lo);
    }
    free(res);
    if (st) return st;
    errs_div(&j->lo_e, n_lo);
    return KVF_OK;
}

static void write_table_row(FILE *o, const char *label, const cli_meas_table *t) {
    fprintf(o, "    %s: {", label);
    for (int k = 0; k < CLI_MEAS_PRIMARY; k++)
        fprintf(o, "%s%s: %.2f", k ? ", " : "", t->m[k].name, t->m[k].error_pct);
    fprintf(o, "}\n");
}

// The fit file (YAML a scenario names with serving.fit), written beside and renamed into place.
static kvf_status write_fit(const fit_job *j, kvf_err *err) {
    const fit_ctx *f = j->f;
    char tmp[SIM_PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", j->out, (int)getpid());
    FILE *o = fopen(tmp, "wx");
    if (!o) return kvf_fail(err, KVF_EIO, "%s: %s", tmp, strerror(errno));
    fprintf(o, "# kvfleet fit: system terms fitted to measured runs. Inputs: the training runs'\n"
               "# requests, server configurations and measured latencies; outputs: the terms and\n"
               "# the errors below. A scenario applies the terms with serving.fit: FILE (keys it\n"
               "# sets itself win). Runs outside the training set are checks, never fitted to.\n");
    fprintf(o, "training_set: %s\n", j->manifest ? j->manifest : "--measured runs");
    if (f->n_base) {
        fprintf(o, "settings:   # applied to every run before the terms (a scenario using this fit "
                   "sets them too)\n");
        for (int k = 0; k < f->n_base; k++)
            fprintf(o, "  - \"%s\"\n", f->base[k]);
    }
    fprintf(o, "objective: mean over the training runs of the MAPE of ttft_ms.mean, ttft_ms.p90, "
               "itl_ms.mean, e2e_ms.mean\n");
    fprintf(o, "simulations: %ld\nseconds: %ld\n", f->evals, (long)(time(NULL) - j->t0));
    fprintf(o, "terms:\n");
    for (int k = 0; k < f->n_term; k++)
        fprintf(o, "  %s: %.6g\n", f->term[k].key, j->x[k]);
    fprintf(o, "bounds:\n");
    for (int k = 0; k < f->n_term; k++)
        fprintf(o, "  %s: [%g, %g]\n", f->term[k].key, f->term[k].lo, f->term[k].hi);
    fprintf(o, "runs:\n");
    for (int i = 0; i < f->n_run; i++) {
        fprintf(o, "  %s:\n    role: %s\n", f->run[i].name,
                j->train[i] ? "training"
                            : "\"check (overloaded: client time-outs censor the measured "
                              "latencies; not fitted to)\"");
        write_table_row(o, "in_sample_error_pct", &j->tab[i]);
        if (j->loo && j->train[i]) {
            write_table_row(o, "loo_error_pct", &j->loo_tab[i]);
            fprintf(o, "    loo_terms: {");
            for (int k = 0; k < f->n_term; k++)
                fprintf(o, "%s%s: %.4g", k ? ", " : "", f->term[k].key, j->loo_x[i][k]);
            fprintf(o, "}\n");
        }
    }
    fprintf(o, "in_sample_abs_error_pct:   # mean |error| over the training runs\n");
    write_errs(o, "  ", &j->ins, &j->tab[0]);
    if (j->loo) {
        fprintf(o, "loo_error_pct:   # mean |error| of each training run predicted without it\n");
        write_errs(o, "  ", &j->lo_e, &j->tab[0]);
    }
    if (fclose(o) || rename(tmp, j->out)) {
        kvf_status st = kvf_fail(err, KVF_EIO, "%s: %s", j->out, strerror(errno));
        unlink(tmp);
        return st;
    }
    return KVF_OK;
}

static void print_fit(const fit_job *j) {
    const fit_ctx *f = j->f;
    printf("terms fitted to %d runs (%ld simulations) -> %s\n", j->n_train, f->evals, j->out);
    for (int k = 0; k < f->n_term; k++)
        printf("  %-30s %.4g\n", f->term[k].key, j->x[k]);
    printf("  %-16s %10s %10s\n", "mean |error| %", "in sample", j->loo ? "left out" : "");
    for (int k = 0; k < CLI_MEAS_PRIMARY; k++) {
        char lo_s[32] = "";
        if (j->loo) snprintf(lo_s, sizeof lo_s, "%.1f", j->lo_e.e[k]);
        printf("  %-16s %10.1f %10s\n", j->tab[0].m[k].name, j->ins.e[k], lo_s);
    }
}

int cli_fit(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--kernels")) return cli_fit_kernels(argc, argv);
    fit_job *j = kvf_calloc(1, sizeof *j);
    j->f = kvf_calloc(1, sizeof *j->f);
    j->max_evals = 60;
    j->jobs = 1;
    j->loo = true;
    kvf_err err = {0};
    kvf_status st = KVF_OK;
    int rc = parse_args(j, argc, argv);
    if (rc >= 0) goto done;
    rc = 0;
    fit_ctx *f = j->f;
    f->term = j->n_terms ? j->terms : default_terms;
    f->n_term = j->n_terms ? j->n_terms : (int)(sizeof default_terms / sizeof default_terms[0]);
    snprintf(f->tmp, sizeof f->tmp, "/tmp/kvfleet-fit.XXXXXX");
    if (!mkdtemp(f->tmp)) {
        fprintf(stderr, "kvfleet fit: cannot create a temporary directory: %s\n", strerror(errno));
        f->tmp[0] = '\0';
        rc = 1;
        goto done;
    }
    j->t0 = time(NULL);
    if (!(st = load_runs(j, &err)) && !(st = fit_all(j, &err)) &&
        (!j->loo || !(st = fit_loo(j, &err))))
        st = write_fit(j, &err);
    if (st) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        rc = st == KVF_ERUN || st == KVF_EIO || st == KVF_ENOMEM ? 1 : 2;
    } else if (!f->quiet) {
        print_fit(j);
    }
done:
    for (int i = 0; i < j->f->n_run; i++)
        trc_measured_free(&j->f->run[i].m);
    if (j->f->tmp[0]) sim_remove_tree(j->f->tmp);
    for (int k = 0; k < j->n_terms; k++)
        free((char *)j->terms[k].key);
    free(j->f);
    free(j);
    return rc;
}
