// sim/sim_workload.c -- workload.generate: synthetic traffic from the trace generator,
// streamed to the cluster like a trace (deterministic by the scenario's seed).
#include <string.h>

#include "sim_run.h"

kvf_status sim_open_generator(const sim_config *cfg, trc_reader **out, kvf_err *err) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    if (!trc_gen_profile_parse(cfg->generate_profile, &g.profile))
        return kvf_fail(err, KVF_EINVAL,
                        "%s: workload.generate.profile: unknown profile '%s' (chatbot, agent, "
                        "coding, mixed)",
                        cfg->path[0] ? cfg->path : "scenario", cfg->generate_profile);
    if (cfg->generate_rate_rps > 0) g.rate_rps = cfg->generate_rate_rps;
    if (cfg->generate_duration_s > 0) g.duration_s = cfg->generate_duration_s;
    if (!trc_arrival_parse(cfg->generate_arrival, &g.arrival))
        return kvf_fail(err, KVF_EINVAL, "workload.generate.arrival: unknown process '%s'",
                        cfg->generate_arrival);
    if (cfg->generate_cv > 0) g.cv = cfg->generate_cv;
    if (cfg->generate_mean_turns > 0) g.mean_turns = cfg->generate_mean_turns;
    if (cfg->generate_system_tokens >= 0) g.system_tokens = cfg->generate_system_tokens;
    g.input_len = cfg->generate_input_len;
    g.output_len = cfg->generate_output_len;
    g.images_p = cfg->generate_images_p;
    g.closed_loop = cfg->generate_closed_loop;
    if (cfg->generate_think_s > 0) g.think_s = cfg->generate_think_s;
    for (int k = 0; k < 3; k++) g.mix[k] = cfg->generate_mix[k];
    g.days = cfg->generate_days;
    g.diurnal_amplitude = cfg->generate_diurnal_amplitude;
    g.peak_hour = cfg->generate_peak_hour;
    g.weekend_ratio = cfg->generate_weekend_ratio;
    g.start_weekday = cfg->generate_start_weekday;
    g.warmup_days = cfg->generate_warmup_days;
    memcpy(g.ret, cfg->generate_return, sizeof g.ret);
    g.seed = cfg->seed;
    g.block_tokens = cfg->block_tokens;
    trc_options o = cfg->trace_opt;
    o.block_tokens = cfg->block_tokens;
    o.seed = cfg->seed;
    o.format = TRC_FMT_KVFLEET;
    return trc_gen_open(out, &g, &o, err);
}
