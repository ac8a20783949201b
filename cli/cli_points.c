// cli/cli_points.c -- helpers shared by `kvfleet sweep` and `kvfleet plan` (cli_points.h):
// a scenario loaded with overrides, and figures read out of a run's summary by dotted path.
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli_points.h"

kvf_status sim_points_load(sim_config *c, const char *scenario, const char *const *sets, int nsets,
                           kvf_err *err) {
    KVF_ASSERT(c && scenario && (nsets == 0 || sets));
    sim_config_default(c);
    kvf_status st = sim_config_load(c, scenario, err);
    for (int i = 0; !st && i < nsets; i++)
        st = sim_config_set(c, sets[i], err);
    return st;
}

static const json_t *jpath(const void *summary, const char *path) {
    const json_t *o = summary;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *t = strtok_r(buf, ".", &save); t && o; t = strtok_r(NULL, ".", &save))
        o = json_object_get(o, t);
    return o;
}

double sim_points_num(const void *summary, const char *path) {
    const json_t *o = jpath(summary, path);
    return json_is_number(o) ? json_number_value(o) : NAN;
}

const char *sim_points_str(const void *summary, const char *path) {
    const json_t *o = jpath(summary, path);
    return json_is_string(o) ? json_string_value(o) : "";
}

double sim_points_gpus(const void *summary) {
    double g = 0;
    static const char *pools[] = {"gpus.vision", "gpus.prefill", "gpus.decode"};
    for (int i = 0; i < 3; i++) {
        double v = sim_points_num(summary, pools[i]);
        if (isfinite(v)) g += v;
    }
    return g;
}

double sim_points_cost_per_day(const sim_config *c, const void *summary) {
    double v = sim_points_num(summary, "economics.cost_per_day_usd");
    if (isfinite(v)) return v;
    return sim_points_gpus(summary) * c->econ.gpu_hour_usd * 24;
}
