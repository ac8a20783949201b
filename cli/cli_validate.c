// cli/cli_validate.c -- `kvfleet validate`: the same shaped trace through the real engine on
// this machine and through the simulator, calibrated from a profile of this machine, and the
// error tables between them (cli_fidelity.c), each figure with the noise band that could
// explain it, measured around the serve by probe steps.
//
// Phases (one function each): 0 shape the trace, 1 probes before, 2 the profile (given, or
// measured now), 3 the serve (probes in its idle gaps, then after it), 4 the noise, 5 step-time
// fidelity, 6 the simulator runs (end to end, its two noise bands, the scheduling replay),
// 7 validation.json, the files the report reads, and the answer.
// Exit codes: 0 pass, 3 inconclusive, 4 fail; 1 a run failed, 2 bad usage or input.
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_fidelity.h"
#include "cli_opts.h"
#include "cli_serve.h"
#include "eng.h"
#include "sim.h"

// ---- the simulator side and the serve as the loop saw it --------------------------------
// Per-request (ttft, tpot, e2e) in ms from a results database, indexed by request id.
static kvf_status read_sim_requests(const char *dir, size_t n, double *ttft, double *tpot,
                                    double *e2e, kvf_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/results.db", dir);
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return kvf_fail(err, KVF_ERUN, "%s: cannot open", path);
    }
    for (size_t i = 0; i < n; i++)
        ttft[i] = tpot[i] = e2e[i] = NAN;
    sqlite3_stmt *q;
    kvf_status st = KVF_OK;
    if (sqlite3_prepare_v2(db, "SELECT id, ttft_s, tpot_s, e2e_s FROM request", -1, &q, NULL) !=
        SQLITE_OK) {
        st = kvf_fail(err, KVF_ERUN, "%s: %s", path, sqlite3_errmsg(db));
    } else {
        while (sqlite3_step(q) == SQLITE_ROW) {
            sqlite3_int64 id = sqlite3_column_int64(q, 0);
            if (id < 0 || (size_t)id >= n) continue;
            double *dst[3] = {ttft, tpot, e2e};
            for (int k = 0; k < 3; k++)
                dst[k][id] = sqlite3_column_type(q, k + 1) == SQLITE_NULL
                                 ? NAN
                                 : 1e3 * sqlite3_column_double(q, k + 1);
        }
        sqlite3_finalize(q);
    }
    sqlite3_close(db);
    return st;
}

// The shaped trace again with each request arriving when the serving loop saw it (later than
// its arrival by the loop's wake-up latency when it was waiting): what the scheduling replay
// reads, so that the machine's wake-up latency is not counted against the scheduler.
static kvf_status write_seen_trace(const char *shaped, const char *path, uint32_t bt,
                                   const eng_serve_result *res, kvf_err *err) {
    trc_options o;
    trc_options_default(&o);
    o.format = TRC_FMT_KVFLEET;
    o.block_tokens = bt;
    trc_reader *rd = NULL;
    trc_writer *w = NULL;
    kvf_status st = trc_reader_open(&rd, shaped, &o, err);
    if (st) return st;
    cli_mem_trace t;
    st = cli_mem_trace_read(rd, &t, err);
    trc_reader_close(rd);
    if (!st) st = trc_writer_open(&w, path, bt, err);
    for (size_t i = 0; i < t.n && !st; i++) {
        trc_request q = t.r[i];
        if (i < res->n_requests && res->requests[i].status == ENG_REQ_DONE &&
            res->requests[i].seen_ns > q.arrival_ns)
            q.arrival_ns = res->requests[i].seen_ns;
        st = trc_writer_put(w, &q, err);
    }
    if (w) {
        kvf_err e2 = {0};
        kvf_status s2 = trc_writer_close(w, &e2);
        if (!st && s2) st = kvf_fail(err, s2, "%s", e2.msg);
    }
    cli_mem_trace_free(&t);
    return st;
}

// ---- probes -------------------------------------------------------------------------------
// Probe steps before the serve, in its idle gaps and after it (phase 0, 1, 2), and before the
// profile when it is measured here (phase 3).
typedef struct probe_val {
    uint8_t phase, shape;
    int64_t t;   // taken between served steps (the serve's clock stopped): that clock; else -1
    double wall, cpu;
} probe_val;

typedef struct probe_log {
    eng_prober *p;
    uint32_t next;
    double est[ENG_PROBE_SHAPES];   // last wall time per shape
    probe_val *v;
    size_t n, cap;
    kvf_status st;
    kvf_err err;
} probe_log;

static void probe_at(probe_log *L, int phase, int64_t t) {
    uint32_t s = L->next++ % ENG_PROBE_SHAPES;
    double w, c;
    if (L->st || (L->st = eng_prober_run(L->p, s, &w, &c, &L->err))) return;
    if (L->n == L->cap) kvf_grow((void **)&L->v, &L->cap, L->n + 1, sizeof *L->v);
    L->v[L->n++] = (probe_val){(uint8_t)phase, (uint8_t)s, t, w, c};
    L->est[s] = w;
}

static void probe_once(probe_log *L, int phase) {
    probe_at(L, phase, -1);
}

// A burst of probes (before the profile, before and after the serve): one untimed step of
// every shape first, so the timed ones find the probe engine in cache. The first step after
// the other engines ran was measured 1.1-2.8x its shape's median (a cold cache, not this
// machine's speed), and one such probe set the whole band. Idle-gap probes have no room for
// this and stay as they are.
static void probe_burst(probe_log *L, int phase) {
    for (uint32_t s = 0; s < ENG_PROBE_SHAPES && !L->st; s++) {
        double w, c;
        L->st = eng_prober_run(L->p, s, &w, &c, &L->err);
    }
    for (int r = 0; r < 2 * ENG_PROBE_SHAPES; r++)
        probe_once(L, phase);
}

// Idle hook of the serving loop: probes while at least twice the next probe's time (+2 ms) of
// the gap is left, at most two per gap, so no arrival waits for a probe.
static void idle_probe(void *ctx, int64_t idle_ns) {
    probe_log *L = ctx;
    int64_t t0 = kvf_wall_ns();
    for (int k = 0; k < 2; k++) {
        double left = (double)(idle_ns - (kvf_wall_ns() - t0));
        if (left < 2 * L->est[L->next % ENG_PROBE_SHAPES] + 2e6) return;
        probe_once(L, 1);
    }
}

// Busy hook of the serving loop (every VAL_BUSY_EVERY_NS of its clock, which stands still
// meanwhile): one probe, timed at the clock's time, so the machine's level is known while the
// steps ran (the band), not only before and after them and in the idle gaps, which a loaded
// serve has few of.
#define VAL_BUSY_EVERY_NS 500000000
static void busy_probe(void *ctx, int64_t now_ns) {
    probe_at(ctx, 1, now_ns);
}

typedef struct noise {
    double band_cpu, band_wall;       // how far the machine's level moved over the serve (half)
    double spread_cpu, spread_wall;   // a probe's own scatter: (p90 - p10) / 2, median over shapes
    double drift_cpu, drift_wall;     // after/before - 1, median over shapes
    double drift_profile;             // the profile's rows re-measured now, median ratio - 1
    double profile_unstable;          // half the relative change of that ratio over the serve
    double drift_kind[2];             // the prefill / decode rows' median ratio - 1 (NAN: none)
    double profile_kinds;             // half the relative difference of those two ratios: how
                                      //   wrong the one level may be for either kind (applied
                                      //   level only; 0 for a given profile)
    double level;                     // applied to the profile's times: 1 + drift_profile for a
                                      //   profile measured in this run, 1 for a given one
    double steal;                     // served steps: median wall/cpu - 1
    double loop;                      // serve wall not in steps nor waiting, per busy ns
    size_t probes[4];
    size_t probes_busy;   // of phase 1: between steps (the others in idle gaps)
} noise;

// Band of one clock: how far the machine's level moved over the serve's three phases (0-2;
// cli_fid_level_band), the probes' own scatter (*spread, reported: the served steps have it
// too) and the drift, after over before, the median over shapes of their phase medians. The
// probes before a profile measured here are listed (probes.csv) but its rows re-measured
// around the serve give its level (measure_noise).
static void probe_band(const probe_log *L, bool cpu, double *band, double *spread, double *drift) {
    uint8_t *ph = kvf_malloc(L->n + 1), *sh = kvf_malloc(L->n + 1);
    double *v = kvf_malloc((L->n + 1) * sizeof *v), *w = kvf_malloc((L->n + 1) * sizeof *w);
    for (size_t i = 0; i < L->n; i++)
        ph[i] = L->v[i].phase, sh[i] = L->v[i].shape, v[i] = cpu ? L->v[i].cpu : L->v[i].wall;
    cli_fid_level_band(ph, sh, v, L->n, 3, ENG_PROBE_SHAPES, band, spread);
    double ds[ENG_PROBE_SHAPES];
    uint32_t ndr = 0;
    for (uint32_t s = 0; s < ENG_PROBE_SHAPES; s++) {
        double med[3] = {NAN, NAN, NAN};
        for (int p = 0; p < 3; p += 2) {
            size_t m = 0;
            for (size_t i = 0; i < L->n; i++)
                if (sh[i] == s && ph[i] == p) w[m++] = v[i];
            if (!m) continue;
            kvf_sort_doubles(w, m);
            med[p] = kvf_percentile_sorted(w, m, 50);
        }
        if (isfinite(med[0]) && isfinite(med[2])) ds[ndr++] = med[2] / med[0] - 1;
    }
    kvf_sort_doubles(ds, ndr);
    *drift = ndr ? kvf_percentile_sorted(ds, ndr, 50) : 0;
    free(ph), free(sh), free(v), free(w);
}

// One simulator run of the served requests: calibrated from profile, and with replay
// (measured durations) and/or scale when given. Per-request results into *out.
static kvf_status sim_side(const cli_serve_args *a, const eng_serve_config *ec, const char *profile,
                           const char *shaped, const char *dir, sim_step_replay *replay,
                           double scale, size_t n, cli_side *out, void **summary, kvf_err *err) {
    static sim_config cfg;
    sim_config_default(&cfg);
    char set[2300];
    kvf_status st = KVF_OK;
    const char *sets[] = {"name=validate",
                          "hardware=cpu",
                          "step_model=calibrated",
                          "cluster.mode=colocated",
                          "cluster.prefill.instances=1",
                          "cluster.decode.instances=0",
                          "cluster.prefill.gpus_per_instance=1",
                          "workload.format=kvfleet",
                          "kv_cache.ssd.capacity_tb=0",
                          "kv_cache.hbm_cache_frac=1",
                          "kv_cache.persist_decode=false",
                          "router.prefill=round_robin",
                          "kv_cache.step_sequential=true"};
    for (size_t i = 0; !st && i < sizeof sets / sizeof sets[0]; i++)
        st = sim_config_set(&cfg, sets[i], err);
    snprintf(cfg.dir, sizeof cfg.dir, "%s", KVF_SOURCE_DIR);
    // paths and names from the command line as text, never YAML ('out #1/trace.jsonl')
    if (!st) st = cli_set_literal(&cfg, "model", a->model, err);
    if (!st) st = cli_set_literal(&cfg, "profile", profile, err);
    if (!st) st = cli_set_literal(&cfg, "workload.trace", shaped, err);
    snprintf(set, sizeof set, "kv_cache.block_tokens=%u", ec->block_tokens);
    if (!st) st = sim_config_set(&cfg, set, err);
    snprintf(set, sizeof set, "cluster.prefill.max_batch_tokens=%u", ec->max_batch_tokens);
    if (!st) st = sim_config_set(&cfg, set, err);
    snprintf(set, sizeof set, "cluster.prefill.max_batch_requests=%u", ec->max_batch_requests);
    if (!st) st = sim_config_set(&cfg, set, err);
    snprintf(set, sizeof set, "cluster.prefill.kv_tokens=%llu",
             (unsigned long long)ec->kv_blocks * ec->block_tokens);
    if (!st) st = sim_config_set(&cfg, set, err);
    if (!st) st = sim_config_validate(&cfg, err);
    sim_run_opts o = {.out_dir = dir, .quiet = true, .replay = replay, .step_scale = scale};
    void *sj = NULL;
    if (!st) st = sim_run(&cfg, &o, &sj, err);
    if (!st) st = read_sim_requests(dir, n, out->v[0], out->v[1], out->v[2], err);
    if (summary)
        *summary = sj;
    else
        json_decref(sj);
    return st;
}

static bool file_has(const char *path, const char *needle) {
    char *text = NULL;
    size_t len = 0;
    kvf_err e = {0};
    if (kvf_read_file(path, &text, &len, &e)) return false;
    bool has = strstr(text, needle) != NULL;
    free(text);
    return has;
}

// ---- validate: the command, phase by phase -----------------------------------------------
// Everything one validation holds between its phases.
typedef struct validation {
    cli_serve_args a;
    const char *out;   // a.out_abs
    eng_backend b;
    char shaped[2200], notes[256], prof[2200], profabs[2048];
    size_t n;   // requests after shaping (then: served)
    probe_log pl;
    const char *hw;        // this machine, as the prober names it
    const char *profile;   // the profile the simulator is calibrated from
    mdl_profile mp;
    double pr[2];            // a given profile re-measured now, before and after (ratio)
    double prk[2][2];        // the same by kind: [when][prefill, decode]
    eng_profile_config cc;   // how it is re-measured
    eng_serve_config ec;
    eng_serve_result res;
    eng_request *reqs;
    uint64_t *blocks;
    noise nz;
    double busy;            // ns of the serve in steps and the loop's time after them
    bool cpu_clock;         // the profile was timed by the thread CPU clock
    double *pred, *resid;   // per served step: predicted ns, residual
    const char **flag;      // per served step: mark or NULL
    json_t *stepj;          // the step-time fidelity
    uint64_t flagged;
    cli_side real, e2e, e2e_lo, e2e_hi, sch, sch_alt;
    mdl_seq *rseqs;                         // the served steps' batches, for the replay
    sim_replay_step *rsteps, *rsteps_alt;   // that time after each step; before the next
    double b_e2e, b_sch, util;
    void *sj;   // the end-to-end simulation's summary
    char simdir[2200];
    uint64_t matched, fallback;
    double wake_p50, wake_p90;
} validation;

// Phase 2, no profile given: one measured now on the shaped requests' context axes, before
// the serve, by the thread CPU clock (probes before it: phase 3).
static kvf_status measure_profile(validation *V, kvf_err *err) {
    const cli_serve_args *a = &V->a;
    eng_request *rq0 = NULL;
    uint64_t *bl0 = NULL;
    size_t n0 = 0;
    kvf_status st = cli_serve_load(V->shaped, a->block_tokens, &rq0, &bl0, &n0, err);
    if (st) return st;
    uint32_t maxctx = 0;
    for (size_t i = 0; i < n0; i++)
        maxctx = KVF_MAX(maxctx, rq0[i].input_tokens + rq0[i].output_tokens);
    free(rq0), free(bl0);
    snprintf(V->prof, sizeof V->prof, "%s/profile.csv", V->out);
    FILE *f = fopen(V->prof, "w");
    if (!f) return kvf_fail(err, KVF_EIO, "%s: cannot write", V->prof);
    eng_profile_config pc = {.model = a->model,
                             .backend = V->b,
                             .threads = a->threads,
                             .quick = true,
                             .seed = 1,
                             .max_context = maxctx,
                             .cpu_clock = V->b == ENG_BACKEND_CPU};
    if (!a->json)
        fprintf(stderr, "kvfleet validate: profiling %s on %s (--quick)\n", a->model, V->hw);
    probe_burst(&V->pl, 3);
    st = eng_profile_run(&pc, f, NULL, err);
    fclose(f);
    V->profile = V->prof;
    if (!st) st = mdl_profile_load(&V->mp, V->profile, err);
    return st;
}

// Phase 2: the profile the simulator is calibrated from: given (its hardware compared with
// this machine's; --strict refuses another), or measured now.
static kvf_status choose_profile(validation *V, kvf_err *err) {
    const cli_serve_args *a = &V->a;
    if (!a->profile) return measure_profile(V, err);
    char cwd[1024];
    V->profile = a->profile;
    if (V->profile[0] != '/' && getcwd(cwd, sizeof cwd)) {
        snprintf(V->profabs, sizeof V->profabs, "%s/%s", cwd, V->profile);
        V->profile = V->profabs;
    }
    kvf_status st = mdl_profile_load(&V->mp, V->profile, err);
    if (st) return st;
    if (V->mp.hardware[0] && strcmp(V->mp.hardware, V->hw)) {
        if (a->strict)
            return kvf_fail(err, KVF_EINVAL,
                            "%s: profile measured on '%s', this machine is '%s' (--strict)",
                            V->profile, V->mp.hardware, V->hw);
        fprintf(stderr,
                "kvfleet validate: warning: %s was measured on '%s', this machine is '%s'\n",
                V->profile, V->mp.hardware, V->hw);
    }
    return KVF_OK;
}

// The profile, given or measured in this run: a few of its rows re-measured now (when 0,
// before the serve; 1, after it), into pr[when], the log appended to out/profile_check.txt. A
// file that cannot be opened after the serve is skipped.
static kvf_status check_profile(validation *V, int when, kvf_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/profile_check.txt", V->out);
    FILE *f = fopen(path, when ? "a" : "w");
    if (!f) return when ? KVF_OK : kvf_fail(err, KVF_EIO, "%s: cannot write", path);
    kvf_status st = eng_profile_check_ratio(&V->cc, V->profile, f, &V->pr[when], V->prk[when], err);
    fclose(f);
    return st;
}

// Phases 0 to 2 and the probes before the serve; on failure nothing of the serve exists.
static kvf_status before_serve(validation *V, kvf_err *err) {
    const cli_serve_args *a = &V->a;
    // 0. the shaped trace
    kvf_status st = kvf_mkdirs(V->out, err);
    if (st) return st;
    snprintf(V->shaped, sizeof V->shaped, "%s/trace.jsonl", V->out);
    if ((st = cli_serve_shape(a, V->shaped, &V->n, V->notes, sizeof V->notes, err))) return st;
    // 1. probes before the serve (also: this machine's hardware id)
    if ((st = eng_prober_create(&V->pl.p, a->model, NULL, V->b, a->threads, err))) return st;
    V->hw = eng_prober_hardware(V->pl.p);
    // 2. the profile, and a given one's level now
    if ((st = choose_profile(V, err))) return st;
    V->pr[0] = V->pr[1] = NAN;
    V->prk[0][0] = V->prk[0][1] = V->prk[1][0] = V->prk[1][1] = NAN;
    V->cc = (eng_profile_config){.model = a->model,
                                 .backend = V->b,
                                 .threads = a->threads,
                                 .seed = 1,
                                 .check_bound_ms = 150};
    if ((st = check_profile(V, 0, err))) return st;
    probe_burst(&V->pl, 0);
    if (V->pl.st) {
        *err = V->pl.err;
        return V->pl.st;
    }
    return KVF_OK;
}

// Phase 3: the engine serves the trace, probing in its idle gaps; then probes after it and a
// given profile re-measured. Returns the serve's failure; *after gets that of what follows.
static kvf_status serve_trace(validation *V, kvf_status *after, kvf_err *err) {
    kvf_status *st = after;
    *st = KVF_OK;
    V->a.idle_hook = idle_probe;
    V->a.idle_ctx = &V->pl;
    V->a.busy_hook = busy_probe;
    V->a.busy_ctx = &V->pl;
    V->a.busy_every_ns = VAL_BUSY_EVERY_NS;
    memset(&V->res, 0, sizeof V->res);
    if (!V->a.json) fprintf(stderr, "kvfleet validate: serving %zu requests\n", V->n);
    kvf_status s =
        cli_serve_run(&V->a, V->shaped, &V->ec, &V->res, &V->reqs, &V->blocks, &V->n, err);
    if (s) return s;
    probe_burst(&V->pl, 2);
    if (V->pl.st && !*st) *st = V->pl.st, *err = V->pl.err;
    if (!*st) *st = check_profile(V, 1, err);
    return KVF_OK;
}

// Phase 4: noise: probe bands, steal (wall over CPU of the served steps), the loop's time
// unaccounted. The profile's level against this machine, its rows re-measured around the
// serve: a given profile's is part of the error it makes; one measured in this run stands
// for this machine, so the level its rows have now (another process took the core while it
// was measured, or took it during the serve) is applied to its times, and the probes before
// the profile, whose difference it measures, leave the band. How much that level moved from
// before to after the serve is noise either way.
// A re-measured ratio before (a) and after (b) the serve as a drift: their mean - 1, a alone
// when b is missing, NAN when a is.
static double drift_of(double a, double b) {
    return isfinite(a) ? (isfinite(b) ? (a + b) / 2 : a) - 1 : NAN;
}

static void measure_noise(validation *V) {
    noise *nz = &V->nz;
    const double *pr = V->pr;
    const eng_serve_result *res = &V->res;
    memset(nz, 0, sizeof *nz);
    if (isfinite(pr[0])) nz->drift_profile = drift_of(pr[0], pr[1]);
    if (isfinite(pr[0]) && isfinite(pr[1]))
        nz->profile_unstable = fabs(pr[1] - pr[0]) / (pr[0] + pr[1]);
    nz->level = V->a.profile ? 1 : 1 + nz->drift_profile;
    // by kind: one level is applied to every row, so when the prefill and the decode rows
    // moved apart (the machine slowed memory-bound shapes and not compute-bound ones, or the
    // other way) half their difference is how far that level may be from either kind's
    for (int k = 0; k < 2; k++)
        nz->drift_kind[k] = drift_of(V->prk[0][k], V->prk[1][k]);
    double sum =
        2 + nz->drift_kind[0] + nz->drift_kind[1];   // the two ratios' sum (NAN: one missing)
    if (!V->a.profile && sum > 0)
        nz->profile_kinds = fabs(nz->drift_kind[1] - nz->drift_kind[0]) / sum;
    probe_band(&V->pl, true, &nz->band_cpu, &nz->spread_cpu, &nz->drift_cpu);
    probe_band(&V->pl, false, &nz->band_wall, &nz->spread_wall, &nz->drift_wall);
    for (size_t i = 0; i < V->pl.n; i++) {
        if (V->pl.v[i].t >= 0)
            nz->probes_busy++;
        else
            nz->probes[V->pl.v[i].phase]++;
    }
    V->busy = 0;
    double *ratio = kvf_malloc((res->n_steps + 1) * sizeof *ratio);
    size_t nr = 0;
    for (size_t i = 0; i < res->n_steps; i++) {
        V->busy += (double)(res->steps[i].duration_ns + res->steps[i].after_ns);
        if (res->steps[i].cpu_ns > 0)
            ratio[nr++] = (double)res->steps[i].duration_ns / (double)res->steps[i].cpu_ns;
    }
    kvf_sort_doubles(ratio, nr);
    nz->steal = nr ? kvf_percentile_sorted(ratio, nr, 50) - 1 : 0;
    free(ratio);
    double other = (double)res->wall_ns - V->busy - (double)(res->idle_ns - res->late_ns);
    nz->loop = V->busy > 0 ? fmax(0, other) / V->busy : 0;
}

// Phase 5: step-time fidelity of the calibrated step model against the served steps, and
// out/steps.csv with its predictions (when st is clear).
static void step_time(validation *V, kvf_status *st, kvf_err *err) {
    const eng_serve_result *res = &V->res;
    mdl_model mm;
    mdl_hardware mh;
    mdl_stepper *stp = NULL;
    char mdir[1100];
    snprintf(mdir, sizeof mdir, "%s/models", KVF_SOURCE_DIR);
    V->cpu_clock = file_has(V->profile, "# timing: thread cpu clock");
    V->pred = kvf_calloc(res->n_steps + 1, sizeof *V->pred);
    V->resid = kvf_calloc(res->n_steps + 1, sizeof *V->resid);
    V->flag = kvf_calloc(res->n_steps + 1, sizeof *V->flag);
    cli_grid_floor gf = {UINT32_MAX, INFINITY};
    for (size_t i = 0; i < V->mp.n; i++) {
        const mdl_profile_row *row = &V->mp.rows[i];
        if (row->op == MDL_OP_PREFILL) gf.min_chunk = KVF_MIN(gf.min_chunk, row->new_tokens);
        if (row->op == MDL_OP_DECODE) gf.min_dctx = fmin(gf.min_dctx, row->context);
    }
    if (!*st) *st = mdl_model_load(&mm, V->a.model, mdir, err);
    if (!*st) *st = mdl_hardware_load(&mh, "cpu", mdir, err);
    if (!*st) *st = mdl_calibrated_create(&stp, &mm, &mh, NULL, NULL, V->profile, err);
    if (!*st) {
        // the step band: how far the machine's level moved over the serve by the profile's
        // clock (wall: plus steal), plus how far the profile's rows moved over it
        const noise *nz = &V->nz;
        double bs = (V->cpu_clock ? nz->band_cpu : nz->band_wall + fmax(0, nz->steal)) +
                    nz->profile_unstable + nz->profile_kinds;
        double worst = 0;
        V->stepj = cli_fid_step_time(res, stp, &gf, V->cpu_clock, nz->level, 100 * bs, CLI_TOL_STEP,
                                     V->pred, V->resid, V->flag, &V->flagged, &worst);
        *st = cli_serve_steps_csv(V->out, res, V->pred, V->resid, V->flag, err);
    }
    mdl_stepper_destroy(stp);
}

// The served steps as a replay: each step's batch and its duration with the loop's own time
// after it (what the next step waited for). That time follows the step's tokens, which were out
// at its end, so this replay makes them late by it; a replay cannot put it both after the
// tokens and before the arrivals the next step admitted. *alt puts it at the front of the next
// step instead (dropped when the loop waited for arrivals between): tokens on time, arrivals in
// that time one step late. How far the two replays' latencies differ is the first part of the
// scheduling band: on a loaded machine a core taken for 8.9 ms between two steps made TTFT p50
// 7.2 % later in the replay than in the serve, where the loop's share of time put the band at
// 0.6 %; on a quiet machine that time is microseconds and the two replays agree.
static sim_step_replay replay_of(validation *V, sim_step_replay *alt) {
    const eng_serve_result *res = &V->res;
    size_t nseq = 0;
    for (size_t i = 0; i < res->n_steps; i++)
        nseq += res->steps[i].decode_seqs + res->steps[i].n_chunks;
    V->rseqs = kvf_malloc((nseq + 1) * sizeof *V->rseqs);
    V->rsteps = kvf_malloc((res->n_steps + 1) * sizeof *V->rsteps);
    V->rsteps_alt = kvf_malloc((res->n_steps + 1) * sizeof *V->rsteps_alt);
    size_t used = 0;
    for (size_t i = 0; i < res->n_steps; i++) {
        mdl_phase ph;
        uint32_t k = cli_fid_step_batch(res, &res->steps[i], V->rseqs + used, &ph);
        V->rsteps[i] = (sim_replay_step){V->rseqs + used, k,
                                         res->steps[i].duration_ns + res->steps[i].after_ns};
        // the serve's clock makes a next start less the end and the time after it the wait
        const eng_step_record *p = i ? &res->steps[i - 1] : NULL;
        bool waited =
            p && res->steps[i].start_ns - (p->start_ns + p->duration_ns) - p->after_ns > 0;
        V->rsteps_alt[i] = (sim_replay_step){
            V->rseqs + used, k, res->steps[i].duration_ns + (p && !waited ? p->after_ns : 0)};
        used += k;
    }
    *alt = (sim_step_replay){.steps = V->rsteps_alt, .n = res->n_steps};
    return (sim_step_replay){.steps = V->rsteps, .n = res->n_steps};
}

// Phase 6: the simulator: end to end (calibrated) and scheduling (measured durations replayed
// on the trace as the loop saw it), each also at the low and high ends of its step-time noise
// for the bands; the replayed latencies then count from the recorded arrival, as the real ones.
static void simulate(validation *V, kvf_status *st, kvf_err *err) {
    const noise *nz = &V->nz;
    const cli_serve_args *a = &V->a;
    size_t n = V->n;
    cli_side *all[] = {&V->real, &V->e2e, &V->e2e_lo, &V->e2e_hi, &V->sch, &V->sch_alt};
    for (int i = 0; i < 6; i++)
        cli_side_alloc(all[i], n);
    cli_fid_real_side(&V->res, &V->real);
    sim_step_replay rp_alt, rp = replay_of(V, &rp_alt);
    // end to end: the model's clock against the serve's wall clock, so the band covers the
    // probes' wall spread and the time other processes took from the engine (steal)
    // (steal only ever slows the serve: it widens the slower side alone)
    V->b_e2e = nz->band_wall + fmax(0, nz->steal) + nz->profile_unstable + nz->profile_kinds;
    double b_e2e_lo = nz->band_wall + nz->profile_unstable + nz->profile_kinds;
    // scheduling: the step times are the measured ones; what remains unmeasured is the loop's
    // unaccounted time, whose effect on latencies queueing amplifies by 1 / (1 - utilisation)
    const eng_serve_result *res = &V->res;
    V->util = res->wall_ns > res->probe_ns ? V->busy / (double)(res->wall_ns - res->probe_ns) : 0;
    V->b_sch = nz->loop / (1 - fmin(V->util, 0.95));
    char d2[2300], seen[2300];
    snprintf(V->simdir, sizeof V->simdir, "%s/sim", V->out);
    if (!*st)
        *st = sim_side(a, &V->ec, V->profile, V->shaped, V->simdir, NULL,
                       nz->level != 1 ? nz->level : 0, n, &V->e2e, &V->sj, err);
    snprintf(d2, sizeof d2, "%s/bands/e2e-lo", V->out);
    if (!*st)
        *st = sim_side(a, &V->ec, V->profile, V->shaped, d2, NULL, nz->level / (1 + b_e2e_lo), n,
                       &V->e2e_lo, NULL, err);
    snprintf(d2, sizeof d2, "%s/bands/e2e-hi", V->out);
    if (!*st)
        *st = sim_side(a, &V->ec, V->profile, V->shaped, d2, NULL, nz->level * (1 + V->b_e2e), n,
                       &V->e2e_hi, NULL, err);
    snprintf(seen, sizeof seen, "%s/trace-seen.jsonl", V->out);
    if (!*st) *st = write_seen_trace(V->shaped, seen, V->ec.block_tokens, res, err);
    snprintf(d2, sizeof d2, "%s/replay_misses.txt", V->out);
    rp.misses = fopen(d2, "w");
    snprintf(d2, sizeof d2, "%s/sim-replay", V->out);
    if (!*st) *st = sim_side(a, &V->ec, V->profile, seen, d2, &rp, 0, n, &V->sch, NULL, err);
    if (rp.misses) fclose(rp.misses);
    V->matched = rp.matched, V->fallback = rp.fallback;
    snprintf(d2, sizeof d2, "%s/bands/replay-alt", V->out);
    if (!*st)
        *st = sim_side(a, &V->ec, V->profile, seen, d2, &rp_alt, 0, n, &V->sch_alt, NULL, err);
    double *wake = kvf_calloc(n + 1, sizeof *wake);
    for (size_t i = 0; i < n && i < res->n_requests; i++) {
        const eng_request_result *q = &res->requests[i];
        wake[i] = q->status == ENG_REQ_DONE && q->seen_ns > q->arrival_ns
                      ? (double)(q->seen_ns - q->arrival_ns) * 1e-6
                      : 0;
        V->sch.v[0][i] += wake[i], V->sch.v[2][i] += wake[i];
        V->sch_alt.v[0][i] += wake[i], V->sch_alt.v[2][i] += wake[i];
    }
    kvf_sort_doubles(wake, n);
    V->wake_p50 = kvf_percentile_sorted(wake, n, 50);
    V->wake_p90 = kvf_percentile_sorted(wake, n, 90);
    free(wake);
}

// per_request_corr: TTFT and E2E of the real serve against the end-to-end simulation, over
// the requests both completed.
static json_t *request_corr(const validation *V) {
    size_t n = V->n, m = 0;
    const cli_side *real = &V->real, *e2e = &V->e2e;
    double *x = kvf_malloc((n + 1) * sizeof *x), *y = kvf_malloc((n + 1) * sizeof *y);
    double *x2 = kvf_malloc((n + 1) * sizeof *x2), *y2 = kvf_malloc((n + 1) * sizeof *y2);
    for (size_t i = 0; i < n; i++)
        if (isfinite(real->v[0][i]) && isfinite(e2e->v[0][i]) && isfinite(real->v[2][i]) &&
            isfinite(e2e->v[2][i]))
            x[m] = real->v[0][i], y[m] = e2e->v[0][i], x2[m] = real->v[2][i], y2[m] = e2e->v[2][i],
            m++;
    json_t *corr = json_object();
    double c1 = cli_fid_pearson(x, y, m), c2 = cli_fid_pearson(x2, y2, m);
    json_object_set_new(corr, "ttft", isfinite(c1) ? json_real(c1) : json_null());
    json_object_set_new(corr, "e2e", isfinite(c2) ? json_real(c2) : json_null());
    free(x), free(y), free(x2), free(y2);
    return corr;
}

// "serve": the serve's load; "noise": what the bands rest on.
static json_t *serve_load(const validation *V) {
    const eng_serve_result *res = &V->res;
    json_t *ld = json_object();
    json_object_set_new(ld, "wall_s", json_real((double)res->wall_ns * 1e-9));
    json_object_set_new(ld, "steps", json_integer((json_int_t)res->n_steps));
    json_object_set_new(ld, "utilisation", json_real(V->util));
    json_object_set_new(ld, "hit_rate",
                        json_real(res->prompt_tokens
                                      ? (double)res->cached_tokens / (double)res->prompt_tokens
                                      : 0));
    json_object_set_new(ld, "preemptions", json_integer((json_int_t)res->preemptions));
    return ld;
}

static json_t *noise_json(const validation *V) {
    const noise *nz = &V->nz;
    json_t *nj = json_object();
    json_object_set_new(nj, "probe_cpu_band_pct", json_real(100 * nz->band_cpu));
    json_object_set_new(nj, "probe_wall_band_pct", json_real(100 * nz->band_wall));
    json_object_set_new(nj, "probe_cpu_spread_pct", json_real(100 * nz->spread_cpu));
    json_object_set_new(nj, "probe_wall_spread_pct", json_real(100 * nz->spread_wall));
    json_object_set_new(nj, "drift_cpu_pct", json_real(100 * nz->drift_cpu));
    json_object_set_new(nj, "drift_wall_pct", json_real(100 * nz->drift_wall));
    json_object_set_new(nj, "steal_pct", json_real(100 * nz->steal));
    json_object_set_new(nj, "profile_drift_pct", json_real(100 * nz->drift_profile));
    json_object_set_new(nj, "profile_unstable_pct", json_real(100 * nz->profile_unstable));
    json_object_set_new(nj, "profile_level_applied", json_real(nz->level));
    const char *kd[2] = {"profile_drift_prefill_pct", "profile_drift_decode_pct"};
    for (int k = 0; k < 2; k++)
        json_object_set_new(nj, kd[k],
                            isfinite(nz->drift_kind[k]) ? json_real(100 * nz->drift_kind[k])
                                                        : json_null());
    json_object_set_new(nj, "profile_kinds_pct", json_real(100 * nz->profile_kinds));
    json_object_set_new(nj, "loop_unaccounted_pct", json_real(100 * nz->loop));
    json_object_set_new(nj, "probes_before", json_integer((json_int_t)nz->probes[0]));
    json_object_set_new(nj, "probes_during", json_integer((json_int_t)nz->probes[1]));
    json_object_set_new(nj, "probes_after", json_integer((json_int_t)nz->probes[2]));
    json_object_set_new(nj, "probes_between_steps", json_integer((json_int_t)nz->probes_busy));
    json_object_set_new(nj, "probes_before_profile", json_integer((json_int_t)nz->probes[3]));
    json_object_set_new(nj, "e2e_step_noise_pct", json_real(100 * V->b_e2e));
    json_object_set_new(nj, "wakeup_latency_ms_p50", json_real(V->wake_p50));
    json_object_set_new(nj, "wakeup_latency_ms_p90", json_real(V->wake_p90));
    json_object_set_new(nj, "scheduling_step_noise_pct", json_real(100 * V->b_sch));
    return nj;
}

// The largest |error| of TTFT and TPOT at p50 and p90 in the end-to-end table te.
static double worst_p50_p90(json_t *te) {
    double w = 0;
    for (int m = 0; m < 2; m++)
        for (int k = 1; k <= 2; k++) {
            json_t *e =
                json_object_get(json_object_get(te, CLI_METRICS[m]), k == 1 ? "p50" : "p90");
            double ev = json_number_value(json_object_get(e, "error_pct"));
            if (json_is_number(json_object_get(e, "error_pct"))) w = fmax(w, fabs(ev));
        }
    return w;
}

// True when the profile's own step times do not pass against this serve's and every kind with
// ten or more steps ran slower here than the profile says by more than the end-to-end
// tolerance (the profile is another machine's, or this one is slower today): a simulation
// faster than the serve is then explained by the calibration, as by steal, and says nothing
// of the simulator; one slower than the serve still fails.
static bool profile_slower(const json_t *stepj) {
    const char *sv = json_string_value(json_object_get(stepj, "verdict"));
    if (!sv || !strcmp(sv, "pass")) return false;
    int kinds = 0;
    for (int k = 0; k < 3; k++) {
        json_t *x = json_object_get(json_object_get(stepj, "kinds"), CLI_STEP_KINDS[k]);
        if (json_integer_value(json_object_get(x, "steps")) < 10) continue;
        if (!(json_number_value(json_object_get(x, "median_residual_pct")) < -CLI_TOL_E2E))
            return false;
        kinds++;
    }
    return kinds > 0;
}

// The worst of three verdicts: any fail fails, else any inconclusive is inconclusive.
static const char *overall_verdict(const char *const vs[3]) {
    const char *overall = "pass";
    for (int k = 0; k < 3; k++) {
        if (!strcmp(vs[k], "fail"))
            overall = "fail";
        else if (!strcmp(vs[k], "inconclusive") && strcmp(overall, "fail"))
            overall = "inconclusive";
    }
    return overall;
}

// Phase 7: validation.json: the error tables of both fidelities (end to end: when other
// processes took more of the engine's time than the tolerance (steal), a simulation faster
// than the serve is explained by it, whatever the band says (queueing makes bursty slowdowns
// worse than a uniform one): only a simulation slower than the serve beyond tolerance and band
// fails), the step-time fidelity (taken from V), the load, the noise and the verdicts.
static json_t *validation_json(validation *V, const char **overall) {
    const cli_serve_args *a = &V->a;
    const eng_serve_result *res = &V->res;
    size_t n = V->n;
    double w_e, bd_e, w_s, bd_s, wp_e, wp_s;
    json_t *te =
        cli_fid_error_table(&V->real, &V->e2e, &V->e2e_lo, &V->e2e_hi, 0, n, &w_e, &bd_e, &wp_e);
    json_t *ts = cli_fid_error_table(&V->real, &V->sch, &V->sch_alt, &V->sch_alt, 100 * V->b_sch, n,
                                     &w_s, &bd_s, &wp_s);
    const char *ve = cli_fid_verdict(w_e, bd_e, CLI_TOL_E2E);
    bool steal_limited = 100 * V->nz.steal > CLI_TOL_E2E;
    bool profile_limited = profile_slower(V->stepj);
    if (steal_limited || profile_limited) ve = wp_e - bd_e > CLI_TOL_E2E ? "fail" : "inconclusive";
    json_t *v = json_object();
    json_object_set_new(v, "trace", json_string(a->trace));
    json_object_set_new(v, "requests", json_integer((json_int_t)n));
    json_object_set_new(v, "model", json_string(res->model));
    json_object_set_new(v, "backend", json_string(res->backend));
    json_object_set_new(v, "hardware", json_string(res->hardware));
    json_object_set_new(v, "profile", json_string(V->profile));
    json_object_set_new(v, "profile_hardware", json_string(V->mp.hardware));
    json_t *win = json_object();
    json_object_set_new(win, "start_s", json_real(a->start_s));
    json_object_set_new(win, "end_s", a->end_s > 0 ? json_real(a->end_s) : json_null());
    json_object_set_new(v, "window", win);
    // the end-to-end table keeps the top-level keys of earlier versions
    for (int m = 0; m < 3; m++)
        json_object_set(v, CLI_METRICS[m], json_object_get(te, CLI_METRICS[m]));
    json_object_set_new(v, "per_request_corr", request_corr(V));
    json_object_set_new(v, "max_abs_error_pct_p50_p90", json_real(worst_p50_p90(te)));
    json_t *sst = json_object_get(V->sj, "steps");
    json_object_set_new(v, "extrapolated_steps",
                        json_object_get(sst, "extrapolated_steps")
                            ? json_incref(json_object_get(sst, "extrapolated_steps"))
                            : json_integer(0));
    json_object_set_new(v, "flagged_served_steps", json_integer((json_int_t)V->flagged));
    json_object_set_new(v, "trace_notes", json_string(V->notes));
    json_object_set_new(v, "serve", serve_load(V));
    json_object_set_new(v, "noise", noise_json(V));
    json_t *fe = json_object(), *fs = json_object();
    for (int k = 0; k < 3; k++) {
        json_object_set(fe, CLI_METRICS[k], json_object_get(te, CLI_METRICS[k]));
        json_object_set(fs, CLI_METRICS[k], json_object_get(ts, CLI_METRICS[k]));
    }
    cli_fid_verdict_obj(fe, w_e, bd_e, CLI_TOL_E2E);
    json_object_set_new(fe, "verdict", json_string(ve));
    json_object_set_new(fe, "steal_limited", json_boolean(steal_limited));
    json_object_set_new(fe, "profile_limited", json_boolean(profile_limited));
    json_object_set_new(fe, "within_5pct", json_boolean(w_e <= 5 && bd_e <= 5));
    cli_fid_verdict_obj(fs, w_s, bd_s, CLI_TOL_SCHED);
    json_object_set_new(fs, "replayed_steps", json_integer((json_int_t)V->matched));
    json_object_set_new(fs, "fallback_steps", json_integer((json_int_t)V->fallback));
    json_object_set_new(v, "end_to_end", fe);
    json_object_set_new(v, "scheduling", fs);
    json_object_set_new(v, "step_time", V->stepj);
    V->stepj = NULL;
    json_decref(te), json_decref(ts);
    const char *vs[] = {
        ve, cli_fid_verdict(w_s, bd_s, CLI_TOL_SCHED),
        json_string_value(json_object_get(json_object_get(v, "step_time"), "verdict"))};
    *overall = overall_verdict(vs);
    json_object_set_new(v, "verdict", json_string(*overall));
    return v;
}

// validation.json into out/ and into the simulator's run directory (which carries the tables,
// steps.csv and requests_compare.csv, real against simulated latencies per request, into its
// report); then that report.
static void write_outputs(const validation *V, json_t *v) {
    char path[4096], src[2300];
    snprintf(path, sizeof path, "%s/validation.json", V->out);
    json_dump_file(v, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    // every timed probe, in the order taken: what the bands rest on
    snprintf(path, sizeof path, "%s/probes.csv", V->out);
    FILE *pf = fopen(path, "w");
    if (pf) {
        static const char *const phase[4] = {"before_serve", "idle_gap", "after_serve",
                                             "before_profile"};
        fprintf(pf, "probe,phase,shape,wall_ms,cpu_ms,serve_ms\n");
        for (size_t i = 0; i < V->pl.n; i++) {
            const probe_val *q = &V->pl.v[i];
            char shape[32], at[32] = "";
            eng_probe_shape(q->shape, shape, sizeof shape);
            if (q->t >= 0) snprintf(at, sizeof at, "%.3f", (double)q->t / 1e6);
            fprintf(pf, "%zu,%s,%s,%.4f,%.4f,%s\n", i,
                    q->t >= 0 ? "between_steps" : phase[q->phase & 3], shape, q->wall / 1e6,
                    q->cpu / 1e6, at);
        }
        fclose(pf);
    }
    snprintf(path, sizeof path, "%s/validation.json", V->simdir);
    json_dump_file(v, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    snprintf(path, sizeof path, "%s/steps.csv", V->simdir);
    snprintf(src, sizeof src, "%s/steps.csv", V->out);
    kvf_err e3 = {0};
    char *text = NULL;
    size_t len = 0;
    if (kvf_read_file(src, &text, &len, &e3) == KVF_OK) {
        FILE *f = fopen(path, "w");
        if (f) fwrite(text, 1, len, f), fclose(f);
        free(text);
    }
    snprintf(path, sizeof path, "%s/requests_compare.csv", V->simdir);
    FILE *f = fopen(path, "w");
    if (f) {
        const cli_side *real = &V->real, *e2e = &V->e2e, *sch = &V->sch;
        fprintf(
            f, "id,real_ttft_ms,sim_ttft_ms,replay_ttft_ms,real_e2e_ms,sim_e2e_ms,replay_e2e_ms\n");
        for (size_t i = 0; i < V->n; i++)
            fprintf(f, "%zu,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", i, real->v[0][i], e2e->v[0][i],
                    sch->v[0][i], real->v[2][i], e2e->v[2][i], sch->v[2][i]);
        fclose(f);
    }
    kvf_err e2 = {0};
    rpt_report_write(V->simdir, true, true, &e2);
}

// The text answer, part 1: the serve, its noise and the two latency fidelities' tables.
static void print_latency(const validation *V, json_t *v) {
    const eng_serve_result *res = &V->res;
    const noise *nz = &V->nz;
    json_t *ld = json_object_get(v, "serve");
    printf("validate: %zu requests of %s on %s (%s), trace %s\n", V->n, res->model, res->hardware,
           res->backend, V->a.trace);
    printf("  serve: %.1f s, utilisation %.2f, hit rate %.1f %%, %zu steps; noise: level over "
           "the serve cpu +-%.1f %% wall +-%.1f %% (drift %+.1f %%), a probe's scatter cpu "
           "+-%.1f %% wall +-%.1f %%, steal %.1f %%\n",
           json_number_value(json_object_get(ld, "wall_s")),
           json_number_value(json_object_get(ld, "utilisation")),
           100 * json_number_value(json_object_get(ld, "hit_rate")), res->n_steps,
           100 * nz->band_cpu, 100 * nz->band_wall, 100 * nz->drift_wall, 100 * nz->spread_cpu,
           100 * nz->spread_wall, 100 * nz->steal);
    if (V->a.profile)
        printf("  profile (given): its rows re-measured here %+.1f %% (part of its error), moved "
               "+-%.1f %% over the serve\n",
               100 * nz->drift_profile, 100 * nz->profile_unstable);
    else {
        char kinds[128] = "";
        if (isfinite(nz->drift_kind[0]) && isfinite(nz->drift_kind[1]))
            snprintf(kinds, sizeof kinds,
                     " (prefill rows %+.1f %%, decode rows %+.1f %%: +-%.1f %% between kinds)",
                     100 * nz->drift_kind[0], 100 * nz->drift_kind[1], 100 * nz->profile_kinds);
        printf("  profile (measured in this run): its rows re-measured around the serve %+.1f "
               "%%%s, applied to its times (x%.3f); moved +-%.1f %% over the serve\n",
               100 * nz->drift_profile, kinds, nz->level, 100 * nz->profile_unstable);
    }
    const char *sec[] = {"scheduling", "end_to_end"};
    const char *title[] = {"scheduling fidelity (measured step times replayed)",
                           "end to end (calibrated step model)"};
    for (int q = 0; q < 2; q++) {
        json_t *fo = json_object_get(v, sec[q]);
        printf("  %s: %s (worst %.1f %%, band +-%.1f %%, tolerance %.0f %%)%s\n", title[q],
               json_string_value(json_object_get(fo, "verdict")),
               json_number_value(json_object_get(fo, "worst_error_pct")),
               json_number_value(json_object_get(fo, "band_pct")),
               json_number_value(json_object_get(fo, "tolerance_pct")),
               json_is_true(json_object_get(fo, "profile_limited"))
                   ? "; the profile's steps run slower on this machine (step-time fidelity): "
                     "only a simulation slower than the serve fails"
                   : "");
        printf("    %-6s %-5s %12s %12s %9s %8s\n", "metric", "stat", "real ms", "sim ms",
               "error %", "band %");
        const char *ks[] = {"mean", "p50", "p90", "p99"};
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 4; k++) {
                json_t *x = json_object_get(json_object_get(fo, CLI_METRICS[i]), ks[k]);
                printf("    %-6.4s %-5s %12.2f %12.2f %+9.1f %8.1f\n", CLI_METRICS[i], ks[k],
                       json_number_value(json_object_get(x, "real")),
                       json_number_value(json_object_get(x, "sim")),
                       json_number_value(json_object_get(x, "error_pct")),
                       json_number_value(json_object_get(x, "band_pct")));
            }
    }
}

// The text answer, part 2: step-time fidelity by kind, correlation, the verdict.
static void print_steps(const validation *V, json_t *v, const char *overall) {
    json_t *sf = json_object_get(v, "step_time");
    printf("  step-time fidelity (%s clock): %s (worst median |residual| %.1f %%, band +-%.1f %%: "
           "level +-%.1f %%, the medians' error +-%.1f %%)\n",
           json_string_value(json_object_get(sf, "clock")),
           json_string_value(json_object_get(sf, "verdict")),
           json_number_value(json_object_get(sf, "worst_error_pct")),
           json_number_value(json_object_get(sf, "band_pct")),
           json_number_value(json_object_get(sf, "level_band_pct")),
           json_number_value(json_object_get(sf, "median_se_pct")));
    printf("    %-8s %6s %11s %11s %11s %8s\n", "kind", "steps", "median %", "med |r| %",
           "p90 |r| %", "flagged");
    for (int k = 0; k < 3; k++) {
        json_t *x = json_object_get(json_object_get(sf, "kinds"), CLI_STEP_KINDS[k]);
        printf("    %-8s %6lld %+11.1f %11.1f %11.1f %8lld\n", CLI_STEP_KINDS[k],
               (long long)json_integer_value(json_object_get(x, "steps")),
               json_number_value(json_object_get(x, "median_residual_pct")),
               json_number_value(json_object_get(x, "median_abs_residual_pct")),
               json_number_value(json_object_get(x, "p90_abs_residual_pct")),
               (long long)json_integer_value(json_object_get(x, "flagged")));
    }
    json_t *c = json_object_get(v, "per_request_corr");
    printf("  per-request correlation (end to end): TTFT %.3f, E2E %.3f; extrapolated_steps %lld "
           "(simulated), flagged served steps %llu; replayed %llu steps, %llu by fallback\n",
           json_number_value(json_object_get(c, "ttft")),
           json_number_value(json_object_get(c, "e2e")),
           (long long)json_integer_value(json_object_get(v, "extrapolated_steps")),
           (unsigned long long)V->flagged, (unsigned long long)V->matched,
           (unsigned long long)V->fallback);
    printf("verdict: %s; results in %s/ (validation.json, steps.csv; simulator runs in sim/, "
           "sim-replay/)\n",
           overall, V->out);
}

// Frees what V holds; the serve's results only when served.
static void validation_free(validation *V, bool served) {
    json_decref(V->stepj);
    json_decref(V->sj);
    cli_side *all[] = {&V->real, &V->e2e, &V->e2e_lo, &V->e2e_hi, &V->sch, &V->sch_alt};
    for (int i = 0; i < 6; i++)
        cli_side_free(all[i]);
    free(V->rseqs), free(V->rsteps), free(V->rsteps_alt), free(V->pred), free(V->resid),
        free(V->flag);
    if (served) eng_serve_result_free(&V->res);
    free(V->reqs), free(V->blocks);
    eng_prober_destroy(V->pl.p);
    free(V->pl.v);
    mdl_profile_free(&V->mp);
}

int cli_validate(int argc, char **argv) {
    static validation V;
    memset(&V, 0, sizeof V);
    int rc = cli_serve_parse(argc, argv, true, &V.a);
    if (rc != CLI_GO) return rc;
    V.out = V.a.out_abs;
    kvf_err err = {0};
    kvf_status st = eng_backend_parse(V.a.backend, &V.b, &err);
    if (st) return cli_serve_fail(&err, st);
    // -o as for run (kept unless --force, one writer at a time); the files are written in
    // place, under the lock, since the simulator's configuration names them by their paths
    static sim_outdir od;
    if ((st = cli_serve_outdir(&V.a, &od, &err))) return cli_serve_fail(&err, st);
    sim_remove_tree(od.tmp);
    od.tmp[0] = '\0';
    if (od.had_result) sim_remove_tree(od.final);
    kvf_status after = KVF_OK;
    st = before_serve(&V, &err);
    if (!st) st = serve_trace(&V, &after, &err);
    if (st) {   // nothing served: no tables
        validation_free(&V, false);
        sim_outdir_abort(&od);
        return cli_serve_fail(&err, st);
    }
    st = after;
    measure_noise(&V);
    step_time(&V, &st, &err);
    simulate(&V, &st, &err);
    const char *overall = "pass";
    json_t *v = NULL;
    if (!st) {
        v = validation_json(&V, &overall);
        write_outputs(&V, v);
        if (V.a.json) {
            char *t = json_dumps(v, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
            printf("%s\n", t);
            free(t);
        } else {
            print_latency(&V, v);
            print_steps(&V, v, overall);
        }
    }
    json_decref(v);
    validation_free(&V, true);
    sim_outdir_abort(&od);   // the lock
    if (st) return cli_serve_fail(&err, st);
    return !strcmp(overall, "pass") ? 0 : !strcmp(overall, "inconclusive") ? 3 : 4;
}
