// cli/cli_points.h -- helpers shared by `kvfleet sweep` (cli_sweep.c) and `kvfleet plan`
// (cli_plan.c), in cli_points.c: loading a scenario with overrides, and reading figures out
// of a run's summary (the jansson object sim_run returns, design.md §5).
#ifndef CLI_POINTS_H
#define CLI_POINTS_H

#include "sim.h"

// Loads the scenario over the defaults into *c and applies the "K=V" overrides in order.
// Errors name the file:line or the --set key (sim_config_load / sim_config_set messages).
// Does not validate (callers validate after their own overrides).
kvf_status sim_points_load(sim_config *c, const char *scenario, const char *const *sets, int nsets,
                           kvf_err *err);
// The number at a dotted path of a summary ("ttft_ms.p90"); NaN when absent or not a number.
double sim_points_num(const void *summary, const char *path);
// The string at a dotted path of a summary; "" when absent.
const char *sim_points_str(const void *summary, const char *path);
// GPUs of a run: gpus.vision + gpus.prefill + gpus.decode.
double sim_points_gpus(const void *summary);
// Cost per day of the run's cluster: economics.cost_per_day_usd, or, when economics is null,
// GPUs x economics.gpu_hour_usd x 24.
double sim_points_cost_per_day(const sim_config *c, const void *summary);

#endif
