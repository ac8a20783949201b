// sim/run/sim_run.c -- one run: opens the trace, builds the cluster, runs the event loop and
// turns the outcome into summary.json (design.md §5, sim/measure/sim_summary.c), the results
// database and the report. The command line is cli/cli_run.c; result directories sim_outdir.c.
//
// Determinism: the summary is a function of (scenario, trace, seed) apart from the figures
// under "sim" that measure wall time; nothing here reads the clock except for those.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"
#include "sim_run.h"
#include "sim_sample.h"
#include "rpt_util.h"

// ---- step models ----------------------------------------------------------------------------
mdl_parallel sim_pool_parallel(const sim_config *cfg, const mdl_model *m, const sim_pool_cfg *pc) {
    mdl_parallel par;
    mdl_parallel_default(&par);
    par.gpus = (uint32_t)pc->gpus_per_instance;
    par.tp = (uint32_t)(pc->tp > 0 ? pc->tp : pc->gpus_per_instance);
    par.ep = (uint32_t)(pc->ep > 0 ? pc->ep : pc->gpus_per_instance);
    par.ep_skew = cfg->moe.skew > 1 ? cfg->moe.skew : 1.0;
    if (m->experts && cfg->moe.redundant_experts > 0)
        // redundant copies of hot experts spread the hottest GPU's load
        par.ep_skew = 1.0 + (par.ep_skew - 1.0) * (1.0 - KVF_MIN(cfg->moe.redundant_experts, 1.0));
    par.route_nodes = cfg->moe.route_nodes;
    par.two_batch = cfg->moe.two_batch;
    par.single_batch = cfg->moe.single_batch;
    par.comm_sms = cfg->moe.comm_sms;
    par.routing = (uint8_t)cfg->moe.routing;
    return par;
}

kvf_status sim_make_stepper(const sim_config *cfg, const mdl_model *m, const mdl_hardware *hw,
                            const mdl_parallel *par, const sim_run_opts *o, mdl_stepper **out,
                            kvf_err *err) {
    if (o && o->engine_backend) return sim_engine_stepper_create(cfg, m, hw, par, o, out, err);
    mdl_parallel p = par ? *par : (mdl_parallel){0};
    if (!par) mdl_parallel_default(&p);
    p.route_nodes = cfg->moe.route_nodes;
    p.two_batch = cfg->moe.two_batch;
    p.single_batch = cfg->moe.single_batch;
    p.comm_sms = cfg->moe.comm_sms;
    p.routing = (uint8_t)cfg->moe.routing;
    par = &p;
    kvf_status st = KVF_OK;
    if (!strcmp(cfg->step_model, "calibrated")) {
        char prof[SIM_PATH_MAX];
        sim_config_resolve(cfg, cfg->profile, prof, sizeof prof);
        st = mdl_calibrated_create(out, m, hw, par, &cfg->eff, prof, err);
    } else if (!strcmp(cfg->step_model, "table")) {
        // refuses kernel rows hw check refuses (above the datasheet peak, ...), naming file:line
        st = mdl_table_open(out, m, hw, par, &cfg->eff, err);
    } else {
        *out = mdl_roofline_create(m, hw, par, &cfg->eff);
        if (!*out)
            st = kvf_fail(err, KVF_ENOMEM, "cannot create the %s step model", cfg->step_model);
    }
    if (!st && o && (o->replay || o->step_scale > 0)) *out = sim_replay_stepper_wrap(*out, o);
    return st;
}

// ---- progress ----------------------------------------------------------------------------------
static rpt_progress_state progress_state(const sim_cluster *c) {
    return (rpt_progress_state){.sim_s = (double)c->now * 1e-9,
                                .arrived = (double)c->arrived,
                                .finished = (double)c->completed + (double)c->rejected,
                                .events = (double)sim_queue_popped(c->q)};
}

void sim_run_progress(sim_cluster *c) {
    if (!c->show_progress) return;
    rpt_progress_state st = progress_state(c);
    rpt_progress_sim(&c->progress, &st);
}

// A progress bar over the requests the run will serve, when stderr is a terminal: the total
// comes from a counting pass over the trace (progress never changes results).
static void progress_start(sim_cluster *c, const sim_config *cfg, const sim_run_opts *o,
                           const char *trace, const trc_reader *rd) {
    if (o->quiet) return;
    // Off a terminal: a line every KVF_PROGRESS_S seconds. The span is known for generated
    // traffic (days or duration); a trace's arrivals come from the reader's first pass when it
    // made one (parsed once, replayed from its spool), else they are counted only for a
    // terminal's bar (a second read of the trace is not worth it for a log line).
    const trc_pass *pass = rd ? trc_reader_pass(rd) : NULL;
    const sim_generate_cfg *g = &cfg->workload.gen;
    double span = g->profile[0] ? (g->days > 0 ? g->days * 86400 : g->duration_s) : 0;
    uint64_t total = 0;
    if (g->profile[0] && !(g->days > 0))
        total = (uint64_t)(g->rate_rps * g->duration_s);
    else if (!g->profile[0] && pass)
        total = pass->requests;
    else if (!g->profile[0] && isatty(2)) {
        trc_options opt = cfg->workload.opt;
        opt.block_tokens = cfg->kv.block_tokens;
        if (trc_count(trace, &opt, &total, NULL) != KVF_OK) total = 0;
    }
    total = (uint64_t)((double)total * cfg->workload.sample_rate);   // sampled runs serve ~R of it
    rpt_progress_init_sim(&c->progress, "run", span, (double)total);
    c->show_progress = c->progress.enabled;
}

// Writes every number and string of the summary as summary(key, value) rows.
static kvf_status summary_to_db(rpt_db *db, json_t *o, const char *prefix, kvf_err *err) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (!*prefix && !strcmp(k, "config")) continue;   // in run(config) as YAML
        char key[256];
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", k);
        kvf_status st = KVF_OK;
        if (json_is_object(v))
            st = summary_to_db(db, v, key, err);
        else if (json_is_number(v))
            st = rpt_db_summary_set(db, key, json_number_value(v), err);
        else if (json_is_string(v))
            st = rpt_db_summary_set_text(db, key, json_string_value(v), err);
        else if (json_is_boolean(v))
            st = rpt_db_summary_set(db, key, json_is_true(v) ? 1 : 0, err);
        if (st) return st;
    }
    return KVF_OK;
}

static kvf_status write_run_table(rpt_db *db, const sim_config *cfg, const char *trace,
                                  trc_reader *rd, kvf_err *err) {
    char buf[64];
    const char *kv[][2] = {
        {"scenario", cfg->name},
        {"scenario_file", cfg->path},
        {"kvfleet_version", KVF_VERSION},
        {"model", cfg->model},
        {"hardware", cfg->hardware},
        {"step_model", cfg->step_model},
        {"profile", cfg->profile},
        {"trace", trace},
        {"trace_format", trc_format_name(trc_reader_format(rd))},
        {"trace_notes", trc_reader_notes(rd)},
        {"mode", cfg->cluster.mode == SIM_COLOCATED ? "colocated" : "disaggregated"},
        {"router_prefill", cfg->router.prefill},
        {"router_decode", cfg->router.decode},
        {"status", "running"},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        kvf_status st = rpt_db_run_set(db, kv[i][0], kv[i][1], err);
        if (st) return st;
    }
    snprintf(buf, sizeof buf, "%.17g", cfg->workload.sample_rate);
    kvf_status st = rpt_db_run_set(db, "sample_rate", buf, err);
    if (st) return st;
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)cfg->seed);
    return rpt_db_run_set(db, "seed", buf, err);
}

// run(key = 'config'): the resolved scenario as YAML (the same as summary.json's "config").
static kvf_status write_run_config(rpt_db *db, const sim_config *cfg, kvf_err *err) {
    char *yaml = sim_config_to_yaml(cfg);
    if (!yaml) return kvf_fail(err, KVF_ENOMEM, "cannot write the configuration as YAML");
    kvf_status st = rpt_db_run_set(db, "config", yaml, err);
    free(yaml);
    return st;
}

static kvf_status open_workload(const sim_config *cfg, trc_reader **rd, char *trace, size_t n,
                                kvf_err *err) {
    if (cfg->workload.gen.profile[0]) {
        snprintf(trace, n, "generate:%s", cfg->workload.gen.profile);
        return sim_open_generator(cfg, rd, err);
    }
    sim_config_resolve(cfg, cfg->workload.trace, trace, n);
    trc_options o = cfg->workload.opt;
    o.block_tokens = cfg->kv.block_tokens;
    o.seed = cfg->seed;
    kvf_status st = trc_reader_open(rd, trace, &o, err);
    if (st) return st;
    // a finished answer is persisted for the session's next turn: only closed-loop sources
    // (sessions, kvfleet) have one (sim_cluster_open_trace). Given for a format the file turns
    // out not to be, the reader's note on the format covers it.
    trc_format f = trc_reader_format(*rd);
    if (!cfg->kv.persist_decode && f != TRC_FMT_SESSIONS && f != TRC_FMT_KVFLEET &&
        (o.format == TRC_FMT_AUTO || o.format == f)) {
        trc_reader_close(*rd);
        *rd = NULL;
        char where[SIM_PATH_MAX + 128];
        sim_config_where(cfg, "kv_cache.persist_decode", where, sizeof where);
        return kvf_fail(err, KVF_EINVAL,
                        "%s: applies to closed-loop sessions (sessions or kvfleet traces, or a "
                        "generated workload); %s is a %s trace, whose turns are not chained",
                        where, trace, trc_format_name(f));
    }
    return KVF_OK;
}

kvf_status sim_run(const sim_config *cfg, const sim_run_opts *o, void **summary_json,
                   kvf_err *err) {
    sim_run_opts defaults = {0};
    if (!o) o = &defaults;
    *summary_json = NULL;
    sim_cluster c;
    trc_reader *rd = NULL;
    char trace[SIM_PATH_MAX], path[SIM_PATH_MAX + 32];
    // sampling: the cluster is built from a copy scaled by R; the summary states both
    sim_run_sampling *smp = NULL;
    sim_config *scaled = NULL;
    kvf_status st;
    const sim_config *given = cfg;   // the scenario as resolved, before any sampling scales it
    if (cfg->workload.sample_rate < 1) {
        smp = kvf_calloc(1, sizeof *smp);
        scaled = kvf_malloc(sizeof *scaled);
        if (!smp || !scaled) {
            free(smp);
            free(scaled);
            return kvf_fail(err, KVF_ENOMEM, "no memory for the sampled scenario");
        }
        st = sim_sample_plan_make(cfg, &smp->plan, err);
        if (!st) st = sim_sample_plan_check(cfg, &smp->plan, err);
        // a generated workload is drawn at R x its rate: the filter keeps all it is given
        if (!st)
            st = sim_sampler_init(&smp->sampler, smp->plan.generated ? 1.0 : smp->plan.rate, err);
        if (st) {
            free(smp);
            free(scaled);
            return st;
        }
        *scaled = *cfg;
        sim_sample_apply(&smp->plan, scaled);
        cfg = scaled;
    }
    st = sim_cluster_init(&c, cfg, o, err);
    if (smp) c.sampler = &smp->sampler;
    if (st) goto done;
    st = open_workload(cfg, &rd, trace, sizeof trace, err);
    if (st) goto done;
    if (o->out_dir) {
        st = kvf_mkdirs(o->out_dir, err);
        if (st) goto done;
        snprintf(path, sizeof path, "%s/results.db", o->out_dir);
        st = rpt_db_create(&c.db, path, err);
        if (st) goto done;
        st = write_run_table(c.db, cfg, trace, rd, err);
        if (!st) st = write_run_config(c.db, given, err);
        if (st) goto done;
    }
    progress_start(&c, cfg, o, trace, rd);
    int64_t t0 = kvf_wall_ns();
    st = sim_cluster_open_trace(&c, rd);
    if (st == KVF_OK) st = sim_cluster_loop(&c);
    double wall_s = (double)(kvf_wall_ns() - t0) * 1e-9;
    if (o->interrupt && *o->interrupt) st = KVF_EINTR;
    if (c.show_progress) {
        rpt_progress_state fin = progress_state(&c);
        rpt_progress_sim_done(&c.progress, &fin);
    }
    if (st && st != KVF_EINTR) goto done;
    if (!st && c.arrived == 0) {
        st = kvf_fail(err, KVF_EPARSE,
                      "%s: no requests to simulate (the trace, or its window/limit, is empty)",
                      trace);
        goto done;
    }
    // a day profile with no share in any hour the run covers cannot place the run's traffic in
    // a day (its per-day figures would read 0 revenue beside the run's)
    double sim_s = (double)c.now * 1e-9;
    if (!st && cfg->econ.day_profile_set && sim_s > 0 &&
        !(rpt_econ_day_weight_s(&cfg->econ, sim_s) > 0)) {
        char where[SIM_PATH_MAX + 128];
        sim_config_where(cfg, "economics.day_profile", where, sizeof where);
        int h0 = (int)fmod(floor(cfg->econ.trace_start_s / 3600), 24),
            h1 = (int)fmod(floor((cfg->econ.trace_start_s + sim_s) / 3600), 24);
        char hours[32];
        if (h1 == h0)
            snprintf(hours, sizeof hours, "hour %02d", h0);
        else
            snprintf(hours, sizeof hours, "hours %02d-%02d", h0, h1);
        st = kvf_fail(
            err, KVF_EINVAL,
            "%s: the run (%.0f s of traffic from %02d:%02d UTC, economics.trace_start_utc) "
            "falls in UTC %s, whose share is 0: a day of its traffic is undefined; give "
            "those hours a share or move economics.trace_start_utc",
            where, sim_s, (int)(cfg->econ.trace_start_s / 3600),
            (int)fmod(cfg->econ.trace_start_s / 60, 60), hours);
        goto done;
    }
    // the same for the steady window, which steady.economics places in the day at its start
    const sim_output_cfg *oc = &cfg->output;
    double sw = fmin(oc->steady_to_s, sim_s) - oc->steady_from_s;
    if (!st && cfg->econ.day_profile_set && oc->steady_to_s > 0 && sw > 0) {
        rpt_econ_config ew = cfg->econ;
        ew.trace_start_s = fmod(ew.trace_start_s + oc->steady_from_s, 86400.0);
        if (!(rpt_econ_day_weight_s(&ew, sw) > 0)) {
            char where[SIM_PATH_MAX + 128];
            sim_config_where(cfg, "output.steady_from_s", where, sizeof where);
            st = kvf_fail(err, KVF_EINVAL,
                          "%s: the steady window (%g-%g s of the run, from %02d:%02d UTC) falls "
                          "in hours whose economics.day_profile share is 0: a day at it is "
                          "undefined; move the window or give those hours a share",
                          where, oc->steady_from_s, oc->steady_from_s + sw,
                          (int)(ew.trace_start_s / 3600), (int)fmod(ew.trace_start_s / 60, 60));
            goto done;
        }
    }
    kvf_status run_st = st;
    rpt_econ_result econ;
    memset(&econ, 0, sizeof econ);
    json_t *s = sim_summary_build(&c, trace, rd, wall_s, smp, &econ, err);
    if (run_st == KVF_EINTR) json_object_set_new(s, "status", json_string("interrupted"));
    json_object_set_new(s, "config", sim_config_to_json(given));
    if (o->out_dir) {
        snprintf(path, sizeof path, "%s/summary.json", o->out_dir);
        if (json_dump_file(s, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10))) {
            json_decref(s);
            st = kvf_fail(err, KVF_EIO, "%s: cannot write", path);
            goto done;
        }
        st = summary_to_db(c.db, s, "", err);
        if (!st && json_is_object(json_object_get(s, "economics")))
            st = rpt_econ_write_db(c.db, &econ, err);
        if (!st)
            st = rpt_db_run_set(c.db, "status", run_st == KVF_EINTR ? "interrupted" : "completed",
                                err);
        if (st) {
            json_decref(s);
            goto done;
        }
    }
    *summary_json = s;
    st = run_st;
    if (st == KVF_EINTR) kvf_fail(err, KVF_EINTR, "interrupted; partial results kept");
done:
    if (c.db) {
        if (st && st != KVF_EINTR) rpt_db_run_set(c.db, "status", "failed", NULL);
        kvf_err e2 = {0};
        if (rpt_db_close(c.db, &e2) && !st) st = kvf_fail(err, e2.code, "%s", e2.msg);
        c.db = NULL;
    }
    trc_reader_close(rd);
    sim_cluster_free(&c);
    if (smp) sim_sampler_free(&smp->sampler);
    free(smp);
    free(scaled);
    return st;
}
