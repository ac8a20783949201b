// cli/cli_assess.c -- `kvfleet assess TRACE`: what a shared KV store would do for one's own
// traffic. Three parts, each named in the output by what it rests on:
//   1. ideal_hit_rate: an unbounded prefix cache kept forever (trc_stats_compute, the figure
//      `kvfleet trace stats` prints);
//   2. the hit rate a shared store reaches by size and retention: the trace's prefix blocks
//      replayed in arrival order through an LRU store of that size whose entries expire that
//      long after their last use (trc_replay_grid: every cell in one pass, the same figures as
//      replaying each store, trc_replay_hit_rate) -- simulated, not multiplied out. Sizes
//      are shares of the trace's distinct blocks, in bytes through the reference model's KV
//      bytes per token;
//   3. cost per million tokens: the trace run on the reference design (a scenario, default
//      scenarios/deepseek-reference.yaml, its generator replaced by the trace) and on the same
//      cluster without a shared store (kv_cache.ssd.capacity_tb = 0). Two figures each: as
//      provisioned (the fleet's cost per day over the day's tokens) and at busy GPU-hours (each
//      pool's GPU cost times its busy share, as if the fleet were sized to the traffic), the
//      latter being what a light trace would cost on a fleet it shares.
// Writes DIR/assess.json and DIR/assess.html (one page), DIR/with_store/ and DIR/no_store/
// (the two runs). Exit 0, 1 when a run fails, 2 on bad usage or input.
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpt.h"
#include "rpt_util.h"
#include "sim.h"
#include "cli.h"
#include "cli_opts.h"
#include "trc.h"

#define N_SIZES 5
#define N_TTLS 6
static const double SIZE_SHARE[N_SIZES] = {0.01, 0.05, 0.2, 0.5, 0};              // 0 = unbounded
static const double TTL_S[N_TTLS] = {300, 1800, 3 * 3600, 86400, 3 * 86400, 0};   // 0 = never

static int usage_assess(FILE *f, int rc) {
    fprintf(f,
            "usage: kvfleet assess TRACE [--json] [-o DIR] [--force] [--format F]\n"
            "                      [--scenario FILE] [--set K=V]... [-q]\n"
            "  For TRACE (any format `kvfleet trace stats` reads): the ideal hit rate, the hit\n"
            "  rate a shared store reaches by size and retention (the trace replayed through an\n"
            "  LRU store with expiry), and cost per million tokens on the reference design with\n"
            "  and without a shared store.\n"
            "  -o DIR          where assess.json, assess.html and the two runs go\n"
            "                  (default out/assess-<trace name>); an earlier result there is\n"
            "                  kept unless --force\n"
            "  --json          print assess.json on stdout instead of the text summary\n"
            "  --format F      trace format (default: detected)\n"
            "  --scenario FILE the reference design (default scenarios/deepseek-reference.yaml)\n"
            "  --set K=V       scenario key for both runs, e.g. workload.time_scale=0.1 to\n"
            "                  bring a light trace up to the design's load (not the trace's\n"
            "                  keys: workload.trace, .format, .generate are TRACE's)\n"
            "  -q              print nothing but errors\n");
    return rc;
}

static void fmt_bytes(double b, char *out, size_t n) {
    static const char *const u[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
    int i = 0;
    while (b >= 1000 && i < 6) {
        b /= 1000;
        i++;
    }
    snprintf(out, n, "%.3g %s", b, u[i]);
}

static void fmt_ttl(double s, char *out, size_t n) {
    if (s <= 0)
        snprintf(out, n, "never");
    else if (s >= 86400)
        snprintf(out, n, "%g d", s / 86400);
    else if (s >= 3600)
        snprintf(out, n, "%g h", s / 3600);
    else
        snprintf(out, n, "%g min", s / 60);
}

// One run of the trace on the scenario; store_off removes the shared store. The summary's
// figures that the page shows are copied into a new object.
// The design's configuration: the scenario on TRACE with the --set keys (the workload's shaping
// among them), the store off if asked.
static kvf_status design_config(sim_config *cfg, const char *scenario, const char *trace,
                                const char *format, const char *const *sets, int nsets,
                                bool store_off, kvf_err *err) {
    sim_config_default(cfg);
    kvf_status st = sim_config_load(cfg, scenario, err);
    if (!st) st = sim_config_set(cfg, "workload.generate=null", err);
    if (!st) st = cli_set_literal(cfg, "workload.trace", trace, err);
    if (!st && format) st = cli_set_literal(cfg, "workload.format", format, err);
    for (int i = 0; !st && i < nsets; i++)
        st = sim_config_set(cfg, sets[i], err);
    if (!st && store_off) st = sim_config_set(cfg, "kv_cache.ssd.capacity_tb=0", err);
    if (!st) st = sim_config_validate(cfg, err);
    return st;
}

static kvf_status run_design(const char *scenario, const char *trace, const char *format,
                             const char *const *sets, int nsets, bool store_off,
                             const char *out_dir, json_t **fig, double *bytes_per_token,
                             kvf_err *err) {
    static sim_config cfg;
    kvf_status st = design_config(&cfg, scenario, trace, format, sets, nsets, store_off, err);
    if (st) return st;
    sim_run_opts o = {.out_dir = out_dir, .quiet = true, .write_db = true};
    void *sj = NULL;
    st = sim_run(&cfg, &o, &sj, err);
    if (st) return st;
    json_t *s = sj;
    json_t *f = json_object();
    double gh = rpt_json_num(s, "gpu_hours");
    double gp = rpt_json_num(s, "gpus.prefill"), gd = rpt_json_num(s, "gpus.decode"),
           gv = rpt_json_num(s, "gpus.vision");
    double up = rpt_json_num(s, "utilization.prefill"), ud = rpt_json_num(s, "utilization.decode"),
           uv = rpt_json_num(s, "utilization.vision");
    bool coloc = !strcmp(json_string_value(json_object_get(s, "mode"))
                             ? json_string_value(json_object_get(s, "mode"))
                             : "",
                         "colocated");
    double g_all = gp + (coloc ? 0 : gd) + gv;
    double busy =
        g_all > 0 ? (up * gp + (coloc ? 0 : ud * gd) + (isfinite(uv) ? uv * gv : 0)) / g_all : NAN;
    double cost_day = rpt_json_num(s, "economics.cost_per_day_usd");
    double gpu_parts = rpt_json_num(s, "economics.cost_per_day_usd_by_part.gpu") +
                       rpt_json_num(s, "economics.cost_per_day_usd_by_part.power") +
                       rpt_json_num(s, "economics.cost_per_day_usd_by_part.network");
    double store_parts = rpt_json_num(s, "economics.cost_per_day_usd_by_part.ssd") +
                         rpt_json_num(s, "economics.cost_per_day_usd_by_part.dram");
    double mtok_day = (rpt_json_num(s, "economics.input_tokens_per_day") +
                       rpt_json_num(s, "economics.output_tokens_per_day")) /
                      1e6;
    struct {
        const char *k;
        double v;
    } rows[] = {
        {"hit_rate", rpt_json_num(s, "cache.hit_rate")},
        {"ttft_ms_mean", rpt_json_num(s, "ttft_ms.mean")},
        {"ttft_ms_p90", rpt_json_num(s, "ttft_ms.p90")},
        {"tpot_ms_p90", rpt_json_num(s, "tpot_ms.p90")},
        {"requests_completed", rpt_json_num(s, "requests.completed")},
        {"gpus", g_all},
        {"gpu_hours", gh},
        {"busy_share", busy},
        {"utilization_prefill", up},
        {"utilization_decode", ud},
        {"ssd_tb_billed", rpt_json_num(s, "economics.ssd_tb_billed")},
        {"cost_per_day_usd", cost_day},
        {"cost_per_gpu_hour_usd", rpt_json_num(s, "economics.cost_per_gpu_hour_usd")},
        {"cost_per_mtok_input_usd", rpt_json_num(s, "economics.cost_per_mtok_usd.input")},
        {"cost_per_mtok_output_usd", rpt_json_num(s, "economics.cost_per_mtok_usd.output")},
        {"cost_per_mtok_usd_provisioned", mtok_day > 0 ? cost_day / mtok_day : NAN},
        {"cost_per_mtok_usd_busy",
         mtok_day > 0 && isfinite(busy) ? (gpu_parts * busy + store_parts) / mtok_day : NAN},
        {"prefill_flops", rpt_json_num(s, "cache.prefill_flops.actual")},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        json_object_set_new(f, rows[i].k, isfinite(rows[i].v) ? json_real(rows[i].v) : json_null());
    json_t *sat = rpt_json_path(s, "saturation.state");
    json_object_set_new(f, "saturation",
                        json_string(json_is_string(sat) ? json_string_value(sat) : "n/a"));
    json_t *m = json_object_get(s, "model"), *hw = json_object_get(s, "hardware");
    json_object_set_new(f, "model", json_string(json_is_string(m) ? json_string_value(m) : ""));
    json_object_set_new(f, "hardware",
                        json_string(json_is_string(hw) ? json_string_value(hw) : ""));
    if (bytes_per_token)
        *bytes_per_token = rpt_json_num(s, "cache.block_bytes") / (double)cfg.kv.block_tokens;
    json_decref(s);
    *fig = f;
    return KVF_OK;
}

// The command line of assess, as given.
typedef struct assess_args {
    const char *trace, *format, *scenario;   // scenario: the reference design's file
    char scen_buf[SIM_PATH_MAX];
    char dir[SIM_PATH_MAX];   // -o, or out/assess-<trace stem>
    const char *work;         // where the files go: dir's temporary directory
    cli_common c;
} assess_args;

static int assess_parse(int argc, char **argv, assess_args *a) {
    memset(a, 0, sizeof *a);
    const cli_opt opts[] = {
        CLI_OPT_STR("--format", &a->format),
        CLI_OPT_STR("--scenario", &a->scenario),
    };
    const cli_spec spec = {.cmd = "assess",
                           .usage = usage_assess,
                           .first = 1,
                           .opts = opts,
                           .nopts = (int)(sizeof opts / sizeof opts[0]),
                           .pos = &a->trace,
                           .npos = 1,
                           .common = CLI_OUT | CLI_SET | CLI_JSON | CLI_QUIET | CLI_FORCE};
    int rc = cli_parse(&spec, argc, argv, &a->c);
    if (rc != CLI_GO) return rc;
    if (!a->trace) return usage_assess(stderr, 2);
    if (!a->scenario) {
        snprintf(a->scen_buf, sizeof a->scen_buf, "%s/scenarios/deepseek-reference.yaml",
                 KVF_SOURCE_DIR);
        a->scenario = a->scen_buf;
    }
    if (!a->c.out) {
        const char *base = strrchr(a->trace, '/');
        base = base ? base + 1 : a->trace;
        char stem[256];
        snprintf(stem, sizeof stem, "%s", base);
        char *dot = strchr(stem, '.');
        if (dot && dot != stem) *dot = '\0';
        snprintf(a->dir, sizeof a->dir, "out/assess-%s", stem);
    } else {
        snprintf(a->dir, sizeof a->dir, "%s", a->c.out);
    }
    return CLI_GO;
}

// Part 3, run first (it gives the KV bytes per token for the sizes): the trace on the design
// with and without the shared store, into DIR/with_store and DIR/no_store.
static kvf_status assess_runs(const assess_args *a, json_t **with, json_t **without, double *bpt,
                              kvf_err *err) {
    char sub[SIM_PATH_MAX + 32];
    snprintf(sub, sizeof sub, "%s/with_store", a->work);
    kvf_status s = run_design(a->scenario, a->trace, a->format, a->c.sets, a->c.nsets, false, sub,
                              with, bpt, err);
    if (!s) {
        snprintf(sub, sizeof sub, "%s/no_store", a->work);
        s = run_design(a->scenario, a->trace, a->format, a->c.sets, a->c.nsets, true, sub, without,
                       NULL, err);
    }
    return s;
}

// Part 2: the store grid replayed (sizes as shares of the trace's distinct blocks, in bytes at
// bpt bytes per token), as rows of store_grid; *rp is the replay (the caller frees it).
static kvf_status assess_grid(const assess_args *a, const trc_options *opt, const trc_stats *st,
                              double bpt, trc_replay **rp, json_t *grid, double *distinct,
                              kvf_err *err) {
    trc_reader *rd = NULL;
    kvf_status s = trc_reader_open(&rd, a->trace, opt, err);
    if (!s) s = trc_replay_load(rd, rp, err);
    trc_reader_close(rd);
    *distinct = *rp ? (double)trc_replay_distinct_blocks(*rp) : 0;
    uint64_t caps[N_SIZES];
    double cells[N_SIZES * N_TTLS];
    for (int z = 0; z < N_SIZES; z++)
        caps[z] = SIZE_SHARE[z] > 0 ? (uint64_t)ceil(SIZE_SHARE[z] * *distinct) : 0;
    if (!s) s = trc_replay_grid(*rp, caps, N_SIZES, TTL_S, N_TTLS, cells, err);
    for (int z = 0; !s && z < N_SIZES; z++) {
        uint64_t cap = caps[z];
        json_t *row = json_object(), *hr = json_array();
        json_object_set_new(row, "size_share", json_real(SIZE_SHARE[z]));
        json_object_set_new(row, "size_blocks", json_real(cap ? (double)cap : *distinct));
        json_object_set_new(row, "size_bytes",
                            json_real((cap ? (double)cap : *distinct) * st->block_tokens * bpt));
        for (int t = 0; t < N_TTLS; t++)
            json_array_append_new(hr, json_real(cells[z * N_TTLS + t]));
        json_object_set_new(row, "hit_rate", hr);
        json_array_append_new(grid, row);
    }
    return s;
}

// Writes DIR/assess.json (text: *txt, the caller frees it) and DIR/assess.html.
static kvf_status assess_write(const char *dir, json_t *j, char **txt, kvf_err *err) {
    char path[SIM_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/assess.json", dir);
    *txt = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    kvf_status s = rpt_write_text(path, *txt, strlen(*txt), err);
    if (!s) {
        snprintf(path, sizeof path, "%s/assess.html", dir);
        s = rpt_assess_html(path, j, err);
    }
    return s;
}

// The text answer on stdout: ideal hit rate, the store grid, the design's figures.
static void assess_print(const assess_args *a, const trc_stats *st, json_t *j) {
    printf("trace %s: %.0f requests, %.4g h, ideal hit rate %.4f\n", a->trace, (double)st->requests,
           rpt_json_num(j, "span_s") / 3600, st->ideal_hit_rate);
    printf("shared store hit rate (rows: size; columns: retention)\n%-22s", "");
    for (int t = 0; t < N_TTLS; t++) {
        char tl[32];
        fmt_ttl(TTL_S[t], tl, sizeof tl);
        printf(" %9s", tl);
    }
    printf("\n");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(j, "store_grid"), i, v) {
        char lab[64], by[32];
        fmt_bytes(rpt_json_num(v, "size_bytes"), by, sizeof by);
        double sh = rpt_json_num(v, "size_share");
        if (sh > 0)
            snprintf(lab, sizeof lab, "%g %% (%s)", sh * 100, by);
        else
            snprintf(lab, sizeof lab, "unbounded (%s)", by);
        printf("%-22s", lab);
        size_t k;
        json_t *h;
        json_array_foreach(json_object_get(v, "hit_rate"), k, h)
            printf(" %8.2f%%", 100 * json_number_value(h));
        printf("\n");
    }
    printf("reference design (%s): with store | without\n", a->scenario);
    printf("  hit rate               %8.4f | %8.4f\n", rpt_json_num(j, "with_store.hit_rate"),
           rpt_json_num(j, "no_store.hit_rate"));
    printf("  TTFT mean (ms)         %8.4g | %8.4g\n", rpt_json_num(j, "with_store.ttft_ms_mean"),
           rpt_json_num(j, "no_store.ttft_ms_mean"));
    printf("  USD/Mtok provisioned   %8.4g | %8.4g\n",
           rpt_json_num(j, "with_store.cost_per_mtok_usd_provisioned"),
           rpt_json_num(j, "no_store.cost_per_mtok_usd_provisioned"));
    printf("  USD/Mtok busy GPU-h    %8.4g | %8.4g\n",
           rpt_json_num(j, "with_store.cost_per_mtok_usd_busy"),
           rpt_json_num(j, "no_store.cost_per_mtok_usd_busy"));
    size_t wi;
    json_t *wv;
    json_array_foreach(json_object_get(j, "warnings"), wi, wv)
        printf("warning: %s\n", json_string_value(wv));
    printf("results in %s/ (assess.json, assess.html)\n", a->dir);
}

static sim_outdir g_od = {.lock_fd = -1};   // the result directory being written

static int assess_fail(const kvf_err *err, kvf_status s) {
    sim_outdir_abort(&g_od);
    fprintf(stderr, "kvfleet assess: %s\n", err->msg);
    return kvf_exit_code(s);
}

// A --set key that would change what is read as the trace (the report names TRACE, so the
// runs must replay TRACE): the key, else NULL.
static const char *trace_key(const assess_args *a) {
    // the section itself (a mapping that may hold any of them), or a key at or below one
    static const char *const keys[] = {"workload.trace", "workload.format", "workload.generate"};
    for (int i = 0; i < a->c.nsets; i++) {
        const char *v = a->c.sets[i], *eq = strchr(v, '=');
        while (*v == ' ' || *v == '\t')
            v++;
        size_t n = eq ? (size_t)(eq - v) : strlen(v);
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        if (n == 8 && !strncmp(v, "workload", 8)) return a->c.sets[i];
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            size_t kl = strlen(keys[k]);
            if (n >= kl && !strncmp(v, keys[k], kl) && (n == kl || v[kl] == '.'))
                return a->c.sets[i];
        }
    }
    return NULL;
}

// Takes DIR (kept when it holds a result, unless --force) and checks the inputs are not in
// it; a->work names where the files go. 0 or the exit code.
static int assess_begin(assess_args *a) {
    kvf_err err = {0};
    const char *k = trace_key(a);
    if (k) {
        fprintf(stderr,
                "kvfleet assess: --set %s: changes the trace; assess replays TRACE (%s): "
                "give the trace as TRACE and its format with --format\n",
                k, a->trace);
        return 2;
    }
    kvf_status s = sim_path_check_file("trace", a->trace, &err);
    if (!s) s = sim_path_check_file("--scenario", a->scenario, &err);
    if (s) return assess_fail(&err, s);
    s = sim_outdir_begin(&g_od, a->dir, a->c.force, &err);
    if (!s) s = sim_outdir_check_input(&g_od, "trace", a->trace, &err);
    if (!s) s = sim_outdir_check_input(&g_od, "scenario", a->scenario, &err);
    if (s) return assess_fail(&err, s);
    a->work = g_od.tmp;
    return 0;
}

int cli_assess(int argc, char **argv) {
    static assess_args a;
    int rc = assess_parse(argc, argv, &a);
    if (rc != CLI_GO) return rc;
    kvf_err err = {0};
    trc_options opt;
    trc_options_default(&opt);
    if (a.format && !trc_format_parse(a.format, &opt.format)) {
        fprintf(stderr, "kvfleet assess: --format: unknown format '%s'\n", a.format);
        return 2;
    }
    if ((rc = assess_begin(&a))) return rc;
    {
        // the ideal and the store grid read the trace as the runs do: the scenario's and the
        // --set keys' shaping (a limit, a window, scales) applies to all three
        static sim_config cfg;
        kvf_status s0 =
            design_config(&cfg, a.scenario, a.trace, a.format, a.c.sets, a.c.nsets, false, &err);
        // a sampled run simulates part of the trace; the ideal and the grid read all of it,
        // so the runs' hit rates would be set beside figures of other traffic
        if (!s0 && cfg.workload.sample_rate != 1) {
            char where[SIM_PATH_MAX + 128];
            sim_config_where(&cfg, "workload.sample_rate", where, sizeof where);
            s0 = kvf_fail(&err, KVF_EINVAL,
                          "%s: %g: assess sets its runs beside the whole trace's ideal hit rate "
                          "and store grid; give workload.sample_rate 1 (the default)",
                          where, cfg.workload.sample_rate);
        }
        if (s0) return assess_fail(&err, s0);
        opt = cfg.workload.opt;
    }
    // 1. ideal hit rate, as `trace stats`
    trc_stats st;
    kvf_status s = trc_stats_file(a.trace, &opt, &st, &err);
    if (!s && st.requests == 0)
        s = kvf_fail(&err, KVF_EINVAL, "%s: the trace holds no requests", a.trace);
    if (s) return assess_fail(&err, s);
    // 3. the two runs, then 2. the store grid
    json_t *with = NULL, *without = NULL;
    double bpt = NAN, distinct = 0;
    if ((s = assess_runs(&a, &with, &without, &bpt, &err))) {
        json_decref(with);
        return assess_fail(&err, s);
    }
    trc_replay *rp = NULL;
    json_t *grid = json_array();
    s = assess_grid(&a, &opt, &st, bpt, &rp, grid, &distinct, &err);
    if (s) {
        trc_replay_free(rp);
        json_decref(grid);
        json_decref(with);
        json_decref(without);
        return assess_fail(&err, s);
    }
    json_t *j = json_object(), *ttls = json_array();
    for (int t = 0; t < N_TTLS; t++)
        json_array_append_new(ttls, json_real(TTL_S[t]));
    json_object_set_new(j, "trace", json_string(a.trace));
    json_object_set_new(j, "format", json_string(trc_format_name(st.format)));
    json_object_set_new(j, "reader_notes", json_string(st.notes));
    json_object_set_new(j, "scenario", json_string(a.scenario));
    json_t *sj = json_array();
    for (int i = 0; i < a.c.nsets; i++)
        json_array_append_new(sj, json_string(a.c.sets[i]));
    json_object_set_new(j, "set", sj);
    json_object_set_new(j, "requests", json_real((double)st.requests));
    json_object_set_new(j, "span_s", json_real(trc_replay_span_s(rp)));
    json_object_set_new(j, "block_tokens", json_integer(st.block_tokens));
    json_object_set_new(j, "distinct_blocks", json_real(distinct));
    json_object_set_new(j, "kv_bytes_per_token", isfinite(bpt) ? json_real(bpt) : json_null());
    json_object_set_new(j, "ideal_hit_rate", json_real(st.ideal_hit_rate));
    json_object_set_new(j, "retention_s", ttls);
    json_object_set_new(j, "store_grid", grid);
    json_object_set_new(j, "with_store", with);
    json_object_set_new(j, "no_store", without);
    json_object_set_new(j, "warnings", rpt_assess_warnings(j));
    trc_replay_free(rp);
    char *txt = NULL;
    s = assess_write(a.work, j, &txt, &err);
    if (!s) s = sim_outdir_commit(&g_od, &err);
    if (s) {
        free(txt);
        json_decref(j);
        return assess_fail(&err, s);
    }
    if (a.c.json)
        printf("%s\n", txt);
    else if (!a.c.quiet)
        assess_print(&a, &st, j);
    free(txt);
    json_decref(j);
    return 0;
}
