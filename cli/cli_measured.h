// cli/cli_measured.h -- a real benchmark run (traces/trc_measured.c) as a scenario, simulated
// and compared metric by metric: shared by `kvfleet validate --measured` (cli_measured.c)
// and `kvfleet fit` (cli_fit.c).
#ifndef CLI_MEASURED_H
#define CLI_MEASURED_H

#include <jansson.h>

#include "sim.h"
#include "trc.h"

// The metrics compared, in output order; the first CLI_MEAS_PRIMARY of them make the MAPE
// (TTFT mean and p90, ITL mean, E2E mean: what a serving benchmark's headline reports).
enum { CLI_MEAS_METRICS = 14, CLI_MEAS_PRIMARY = 4 };

typedef struct cli_meas_metric {
    const char *name;   // "ttft_ms.mean"
    double real, sim;   // NAN where a side has none
    double error_pct;   // 100 (sim - real) / real; NAN when not comparable
} cli_meas_metric;

typedef struct cli_meas_table {
    cli_meas_metric m[CLI_MEAS_METRICS];
    double mape_pct;   // mean |error_pct| over the primary metrics both sides have
    int n_mape;        // how many of them
} cli_meas_table;

// How a run becomes a scenario: the model and hardware files (NULL = from the run's own
// configuration), a base scenario (NULL = the defaults), overrides in order, a fit file.
typedef struct cli_meas_setup {
    const char *model, *hardware, *scenario, *fit;
    const char *const *sets;
    int n_sets;
    uint64_t seed;
} cli_meas_setup;

// Builds the scenario that replays run m as it ran: one colocated instance of TP GPUs with the
// engine's batch limits, its prefix caching, the serving engine's preset (vLLM unless the run
// names another), the client time-out, and the run's requests written as a trace to
// trace_path. Errors name the run file and the missing piece (model, hardware) with the option
// that supplies it. *notes gets what was assumed (appended, NUL-terminated, within n).
kvf_status cli_meas_scenario(const trc_measured *m, const cli_meas_setup *s, const char *trace_path,
                             sim_config *cfg, char *notes, size_t n, kvf_err *err);
// Compares a run's own summary with a simulated summary.json (jansson object).
void cli_meas_compare(const trc_measured *m, const json_t *summary, cli_meas_table *t);
// The table as JSON: {"<metric>": {"<stat>": {real, sim, error_pct}}, "mape_pct", ...}.
json_t *cli_meas_table_json(const cli_meas_table *t);

#endif
