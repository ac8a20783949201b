// sim/sim_run.h -- internal glue between the run driver (sim_run.c) and the cluster
// (sim_cluster.c): setup, the event loop, step-model construction and progress.
#ifndef SIM_RUN_H
#define SIM_RUN_H

#include "sim_cluster.h"
#include "sim_sample.h"

// A sampled run (workload.sample_rate < 1): the plan that scaled the cluster and the filter.
typedef struct sim_run_sampling {
    sim_sample_plan plan;
    sim_sampler sampler;
} sim_run_sampling;

// summary.json of a finished run (sim/measure/sim_summary.c): a new reference the caller owns;
// econ_out gets the economics it was computed from. NULL with err set on failure.
struct json_t *sim_summary_build(sim_cluster *c, const char *trace_path, trc_reader *rd,
                                 double wall_s, const sim_run_sampling *smp,
                                 rpt_econ_result *econ_out, kvf_err *err);

// The parallel layout of one instance of pool pc running model m: TP and EP default to all its
// GPUs, the MoE skew (less the share redundant experts take), routing and two-batch overlap
// from cfg. The simulator, --explain-step and the bench all cost steps on it.
mdl_parallel sim_pool_parallel(const sim_config *cfg, const mdl_model *m, const sim_pool_cfg *pc);
// Builds the step-time model a pool uses (roofline, calibrated, or the engine in the loop).
kvf_status sim_make_stepper(const sim_config *cfg, const mdl_model *m, const mdl_hardware *hw,
                            const mdl_parallel *par, const sim_run_opts *o, mdl_stepper **out,
                            kvf_err *err);
// Loads model and hardware, builds pools, instances, tiers and links.
kvf_status sim_cluster_init(sim_cluster *c, const sim_config *cfg, const sim_run_opts *o,
                            kvf_err *err);
// Hands the trace to the cluster and schedules the first arrival.
kvf_status sim_cluster_open_trace(sim_cluster *c, trc_reader *rd);
// Runs events until none is left, an error occurs or the run is interrupted (KVF_EINTR).
kvf_status sim_cluster_loop(sim_cluster *c);
void sim_cluster_free(sim_cluster *c);
// Engine in the loop: a step model that runs every batch on the real engine and returns the
// measured time (sim_engine_step.c).
kvf_status sim_engine_stepper_create(const sim_config *cfg, const mdl_model *m,
                                     const mdl_hardware *hw, const mdl_parallel *par,
                                     const sim_run_opts *o, mdl_stepper **out, kvf_err *err);
// Wraps base (owned from then on) to answer with o->replay's measured durations and/or scale
// every answer by o->step_scale (sim_engine_step.c).
mdl_stepper *sim_replay_stepper_wrap(mdl_stepper *base, const sim_run_opts *o);
// workload.generate: synthetic traffic as a trace stream (sim_workload.c).
kvf_status sim_open_generator(const sim_config *cfg, trc_reader **out, kvf_err *err);
// `kvfleet run SCENARIO --explain-step`: prints the table model's and the roofline's terms for
// one representative step of a pool (decode: per_gpu sequences per GPU at `context`; prefill:
// `chunks` chunks of `prompt` tokens per TP group after `context` cached). Returns the exit
// code.
int sim_explain_step(const sim_config *cfg, const char *phase, double per_gpu, double context,
                     double prompt, double chunks);
// The table model's terms (*ex) for the step --explain-step builds: decode, batch_per_gpu
// sequences a GPU at `length` tokens of context; prefill, batch_per_gpu chunks a TP group of
// `length` prompt tokens. *info: its time, the model's layers, the kernel launches a layer
// (2 under two micro-batches) and the tokens a GPU computes. Errors (model, hardware) in err.
typedef struct sim_explain_info {
    double step_s, tokens_per_gpu;
    uint32_t layers, launches;
} sim_explain_info;
kvf_status sim_explain_terms(const sim_config *cfg, bool decode, double batch_per_gpu,
                             double length, struct mdl_explain *ex, sim_explain_info *info,
                             kvf_err *err);
// The saturation verdict of a finished run (design.md §10, sim_saturation.c): the object
// summary.json holds under "saturation" (state stable | backlogged | overloaded, the reason,
// and the trends it was decided from). New reference.
struct json_t *sim_saturation_json(const sim_cluster *c);
// Redraws the progress bar (stderr, terminals only).
void sim_run_progress(sim_cluster *c);

#endif
