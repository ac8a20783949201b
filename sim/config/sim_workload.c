// sim/sim_workload.c -- workload.generate: synthetic traffic from the trace generator,
// streamed to the cluster like a trace (deterministic by the scenario's seed).
#include <string.h>

#include "sim_run.h"

kvf_status sim_open_generator(const sim_config *cfg, trc_reader **out, kvf_err *err) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    if (!trc_gen_profile_parse(cfg->workload.gen.profile, &g.profile))
        return kvf_fail(err, KVF_EINVAL,
                        "%s: workload.generate.profile: unknown profile '%s' (chatbot, agent, "
                        "coding, mixed)",
                        cfg->path[0] ? cfg->path : "scenario", cfg->workload.gen.profile);
    if (cfg->workload.gen.rate_rps > 0) g.rate_rps = cfg->workload.gen.rate_rps;
    if (cfg->workload.gen.duration_s > 0) g.duration_s = cfg->workload.gen.duration_s;
    if (!trc_arrival_parse(cfg->workload.gen.arrival, &g.arrival))
        return kvf_fail(err, KVF_EINVAL, "workload.generate.arrival: unknown process '%s'",
                        cfg->workload.gen.arrival);
    if (cfg->workload.gen.cv > 0) g.cv = cfg->workload.gen.cv;
    if (cfg->workload.gen.mean_turns > 0) g.mean_turns = cfg->workload.gen.mean_turns;
    if (cfg->workload.gen.system_tokens >= 0) g.system_tokens = cfg->workload.gen.system_tokens;
    g.input_len = cfg->workload.gen.input_len;
    g.output_len = cfg->workload.gen.output_len;
    g.images_p = cfg->workload.gen.images_p;
    g.closed_loop = cfg->workload.gen.closed_loop;
    if (cfg->workload.gen.think_s > 0) g.think_s = cfg->workload.gen.think_s;
    for (int k = 0; k < 3; k++)
        g.mix[k] = cfg->workload.gen.mix[k];
    g.days = cfg->workload.gen.days;
    g.diurnal_amplitude = cfg->workload.gen.diurnal_amplitude;
    g.peak_hour = cfg->workload.gen.peak_hour;
    g.weekend_ratio = cfg->workload.gen.weekend_ratio;
    g.start_weekday = cfg->workload.gen.start_weekday;
    g.warmup_days = cfg->workload.gen.warmup_days;
    memcpy(g.ret, cfg->workload.gen.ret, sizeof g.ret);
    g.seed = cfg->seed;
    g.block_tokens = cfg->kv.block_tokens;
    trc_options o = cfg->workload.opt;
    o.block_tokens = cfg->kv.block_tokens;
    o.seed = cfg->seed;
    o.format = TRC_FMT_KVFLEET;
    return trc_gen_open(out, &g, &o, err);
}
