// cli/cli_fidelity.h -- inside cli/: how `kvfleet validate` compares the engine's serve with
// the simulator's runs of it (cli_fidelity.c). A side is one run's per-request figures; an
// error table sets a simulated side against the real one, each figure with the noise band
// that could explain its error; a verdict weighs the worst error against band and tolerance.
#ifndef CLI_FIDELITY_H
#define CLI_FIDELITY_H

#include <jansson.h>

#include "eng.h"
#include "sim.h"

// Tolerances (percent): scheduling and step time 5, end to end 10 (and whether within 5).
#define CLI_TOL_SCHED 5.0
#define CLI_TOL_STEP 5.0
#define CLI_TOL_E2E 10.0

// Per-request (ttft, tpot, e2e) of one side, ms, NaN where not completed; v[k][i] for request i.
typedef struct cli_side {
    double *v[3];
} cli_side;

extern const char *const CLI_METRICS[3];      // "ttft_ms", "tpot_ms", "e2e_ms": the v[k] of a side
extern const char *const CLI_STEP_KINDS[3];   // "prefill", "decode", "mixed": a step's kind

// Allocates s for n requests (zeros); cli_side_free frees it.
void cli_side_alloc(cli_side *s, size_t n);
void cli_side_free(cli_side *s);

// The real side: res's requests, NaN where one did not complete.
void cli_fid_real_side(const eng_serve_result *res, cli_side *s);

// Pearson correlation of x and y (n each); NaN below 2 points or with a constant side.
double cli_fid_pearson(const double *x, const double *y, size_t n);

// One error table over the n requests both sides completed: mean/p50/p90/p99 of each metric,
// real and sim, error and noise band in percent of real. The band is fixed_band plus how far
// the sim moves, toward the serve, in the run with faster steps (lo: for a sim above the serve)
// or slower ones (hi: below it); lo and hi NULL: fixed_band alone. *worst, *band and *worst_pos get
// the largest |error|, band and signed error over p50/p90. A new object the caller owns.
json_t *cli_fid_error_table(const cli_side *real, const cli_side *sim, const cli_side *lo,
                            const cli_side *hi, double fixed_band, size_t n, double *worst,
                            double *band, double *worst_pos);

// The machine's level over a serve, from n timed probes (fixed steps of nshape shapes, each
// taken in a phase < nphase: before, during, after the serve): each probe over its shape's
// median over all phases, the median of those ratios in each phase, and half the range of the
// phases' medians. That is how far the speed common to every step moved while the serve ran.
// A probe's own scatter is not in it (one cold or preempted probe once set a whole band): the
// served steps have that scatter too, it widens their residuals around their median and is
// counted there (cli_fid_step_time). *spread gets it: the median over shapes of
// (p90 - p10) / 2 over the shape's median. Probes with phase >= nphase are ignored. Fractions.
void cli_fid_level_band(const uint8_t *phase, const uint8_t *shape, const double *v, size_t n,
                        int nphase, int nshape, double *band, double *spread);

// The verdict of one fidelity ("pass", "inconclusive", "fail"): a band wider than the
// tolerance says nothing either way; an error beyond the tolerance by more than the band fails
// whatever the band.
const char *cli_fid_verdict(double worst, double band, double tol);
// Sets tolerance_pct, worst_error_pct, band_pct and verdict in o.
void cli_fid_verdict_obj(json_t *o, double worst, double band, double tol);

// A served step as the batch the step model is asked about: decodes (mean context, the
// remainder spread) then its prefill chunks, into seqs (room for decode_seqs + n_chunks);
// returns how many and the phase.
uint32_t cli_fid_step_batch(const eng_serve_result *r, const eng_step_record *k, mdl_seq *seqs,
                            mdl_phase *phase);

// Where a profile was measured: smallest prefill chunk and decode context of its grid.
typedef struct cli_grid_floor {
    uint32_t min_chunk;
    double min_dctx;
} cli_grid_floor;

// Step-time fidelity: the calibrated step model's prediction (stp, its times multiplied by
// level) for every served step of r against its measured time (thread CPU when cpu_clock, else
// wall), by kind and by shape, with the verdict at tol (percent) and a band of band (percent:
// the machine's level, cli_fid_level_band, and the profile's) plus the standard error of the
// judged kinds' median residual (the served steps' own scatter; a kind's median |residual| is
// at least its bias for noise symmetric about it, so the scatter counts once, here). pred, resid
// and flag (r->n_steps each) get each step's prediction (ns), residual and mark ("extrapolated",
// "below_grid" of gf, or NULL); *flagged the marked steps, *worst_out the worst median |residual|
// (percent) of a kind with 10 steps or more. A new object the caller owns.
json_t *cli_fid_step_time(const eng_serve_result *r, mdl_stepper *stp, const cli_grid_floor *gf,
                          bool cpu_clock, double level, double band, double tol, double *pred,
                          double *resid, const char **flag, uint64_t *flagged, double *worst_out);

#endif
