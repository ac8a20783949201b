// cli/cli_sweep.h -- inside cli/: the state of one `kvfleet sweep` (cli_sweep.c runs its
// points, cli_sweep_out.c writes and prints what they gave).
#ifndef CLI_SWEEP_H
#define CLI_SWEEP_H

#include <jansson.h>

#include "sim.h"
#include "sim_mpi.h"

enum { SW_KEYS_MAX = 16, SW_POINTS_MAX = 100000 };

typedef struct sw_key {
    char key[SIM_KEY_MAX + 64];   // dotted scenario key
    char **vals;                  // values as given (owned)
    int n;
} sw_key;

typedef struct cli_sweep_state {
    const char *scenario;
    const char *const *sets;   // --set, in order (into the command line's cli_common)
    int nsets;
    sw_key keys[SW_KEYS_MAX];
    int nkeys;
    int npoints;
    const char *out;   // DIR
    int jobs;
    bool json;
    sim_config *base;         // scenario + --set
    char **names;             // per point: directory name under points/
    json_t **summary;         // per point: gathered summary, NULL = failed / not run
    bool *ran;                // per point: run by this invocation
    bool bad_input;           // a point failed on bad input (exit 2, as run would)
    char **reason;            // per point without a summary: why it is unfinished (owned), NULL =
                              // not known yet (cli_sweep_reason fills it)
    int rank, size;           // MPI rank and size (0, 1 without MPI)
    const sim_mpi_api *mpi;   // loaded MPI module (under mpirun), else NULL
} cli_sweep_state;

// Why point idx has no summary (sweep_report records it before the outputs are written):
// "interrupted", the run's error message (also left in points/<name>.error, so a later
// sweep or another MPI rank reads it), "not run: the sweep was interrupted" or "not run".
const char *cli_sweep_reason(const cli_sweep_state *s, int idx);
// Value index of key k at point idx (row-major, last key fastest).
int cli_sweep_point_val(const cli_sweep_state *s, int idx, int k);
// The sweep's definition (scenario, --set, --vary) as DIR/sweep.json holds it; a new object.
json_t *cli_sweep_definition(const cli_sweep_state *s);

// A point with a summary is "completed"; one without is "unfinished", with its reason
// (cli_sweep_reason) in every output, never "failed".
// DIR/sweep.db: point(idx, <varied keys>..., dir, status, reason, figures..., saturation) and
// sweep(key, value), written to a temporary file and renamed, so readers never see half.
kvf_status cli_sweep_write_db(const cli_sweep_state *s, kvf_err *err);
// DIR/sweep.csv: the point table of sweep.db as CSV (written and renamed the same way).
kvf_status cli_sweep_write_csv(const cli_sweep_state *s, kvf_err *err);
// DIR/sweep.html: a row per point (its varied keys, headline figures) and the cost / SLO
// attainment frontier chart.
kvf_status cli_sweep_write_html(const cli_sweep_state *s, kvf_err *err);
// The points on stdout as a JSON array: each summary with idx, vary, dir, point_status
// ("completed" or "unfinished"; an unfinished one also "reason") and config_differs (its
// values of the configuration keys that differ between points).
void cli_sweep_print_json(const cli_sweep_state *s);
// The points on stdout as a table ("unfinished: reason" for a point without a summary), then
// the configuration keys that differ between them.
void cli_sweep_print_table(const cli_sweep_state *s);

#endif
