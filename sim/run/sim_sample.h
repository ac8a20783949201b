// sim/sim_sample.h -- workload.sample_rate: hash-based spatial sampling of a trace (the SHARDS
// idea, Waldspurger et al., FAST '15, applied to sessions and prefix trees) and the scaling of
// the cluster by the same rate R, so that a run beyond memory or time simulates a fraction R
// of the traffic on a fraction R of the fleet and reports totals for the full fleet.
//
// Contract:
// - A request is kept iff hash(key) < R * 2^64, the hash seed-independent, where the key is
//   its session (session != 0: closed-loop sessions are kept or dropped whole); else its prefix
//   root: the first block beyond the prefix every request read so far shares (Mooncake: the
//   first block after the shared system prompt, so a conversation's turns stay together);
//   else (no blocks, or a prompt no longer than the common prefix) its request id.
// - Instance counts of every pool and of every cluster.schedule entry are rounded to the
//   nearest integer (halves up), and a count that rounds to 0 is kept at 1. The traffic must
//   then load every simulated instance as the full fleet loads its own: when the counts stay
//   in proportion (every sampled/full the same ratio) that ratio is the rate the trace is
//   thinned at (the effective rate; R itself when every count scales exactly, more when
//   rounding or the one-instance floor grew every pool alike: 16 + 16 instances at R = 1/32 or
//   1/64 run as 1 + 1 at 1/16). Counts out of proportion are refused (KVF_EINVAL naming
//   workload.sample_rate, with the rates that fit): by sim_sample_plan_make when a pool would
//   round to 0, by sim_sample_plan_check when a pool's load per instance would be off by more
//   than SIM_SAMPLE_LOAD_TOL. The shared SSD store's capacity is multiplied by the effective
//   rate. Per-instance figures (HBM, DRAM per node, link bandwidths, batch limits, queue
//   limits) are unchanged. Arrival, session and generator rates need no change: thinning the
//   stream scales them by the rate.
// - The summary's totals are for the full fleet: traffic totals divided by R, GPU counts and
//   GPU-hours multiplied by each pool's full/sampled instance ratio; the sampled raw figures
//   are kept under sampling.sampled. Per-request figures (TTFT, TPOT, hit rate) are as measured.
#ifndef SIM_SAMPLE_H
#define SIM_SAMPLE_H

#include <jansson.h>

#include "sim.h"

enum { SIM_SAMPLE_POOLS = 3 };   // vision, prefill, decode (the order of sim_cluster's pools)

// Largest departure of a pool's load per instance from the full fleet's that a run accepts.
#define SIM_SAMPLE_LOAD_TOL 0.01

typedef struct sim_sample_plan {
    double rate;                         // effective rate: the share of traffic kept
    double requested;                    // workload.sample_rate as given
    int32_t full[SIM_SAMPLE_POOLS];      // instances of the full fleet
    int32_t sampled[SIM_SAMPLE_POOLS];   // instances simulated
    int32_t n_schedule;
    int32_t sched_full[SIM_SCHEDULE_MAX][2];   // prefill, decode per entry (-1 = unchanged)
    int32_t sched_sampled[SIM_SCHEDULE_MAX][2];
    double ssd_full_bytes, ssd_sampled_bytes;   // < 0 unlimited, 0 off
    bool generated;                             // a generated workload: its sessions are drawn
                                                // at R x the rate instead of drawn and dropped
} sim_sample_plan;

// Computes the scaled counts of c under c->sample_rate and the effective rate. KVF_EINVAL
// (exit 2) naming workload.sample_rate when a pool or schedule entry would round to 0
// instances and one instance of each would be out of proportion, or when sessions start by a
// fixed user population (workload.session_users), which sampling cannot thin.
kvf_status sim_sample_plan_make(const sim_config *c, sim_sample_plan *p, kvf_err *err);
// KVF_EINVAL naming workload.sample_rate (every pool's load and the rates that fit) when a
// pool's load per instance, rate x full / sampled, is off 1 by more than SIM_SAMPLE_LOAD_TOL.
kvf_status sim_sample_plan_check(const sim_config *c, const sim_sample_plan *p, kvf_err *err);
// Load per simulated instance relative to the full fleet's: rate x full / sampled.
double sim_sample_load_factor(const sim_sample_plan *p, int32_t full, int32_t sampled);
// Writes the plan's instance counts and store capacity into c (a copy of the scenario).
void sim_sample_apply(const sim_sample_plan *p, sim_config *c);
// Full-fleet over simulated instances of a pool (0 vision, 1 prefill, 2 decode); colocated
// folds prefill and decode into pool 1.
double sim_sample_pool_factor(const sim_sample_plan *p, int pool, bool colocated);

// Turns the economics input of a sampled run into the full fleet's: GPU-hours and GPUs by
// each pool's instance ratio, tokens divided by R, the store at its full capacity.
void sim_sample_scale_econ(rpt_econ_input *ei, const sim_sample_plan *p, bool colocated);

// The filter applied to every request read from the trace.
typedef struct sim_sampler {
    double rate;
    uint64_t threshold;   // keep iff (hash >> 11) < threshold (R * 2^53)
    uint64_t *common;     // the prefix every request with blocks shared so far
    uint32_t n_common;
    bool have_common;
    uint64_t read, kept;                                         // requests
    uint64_t read_input, kept_input, read_output, kept_output;   // tokens
    uint64_t key_session, key_root, key_request;   // requests read, by the key they drew on
    uint64_t last_group;   // hash of the last request's key: requests with equal groups are
                           // kept or dropped together (tests draw other subsets from it)
} sim_sampler;

kvf_status sim_sampler_init(sim_sampler *s, double rate, kvf_err *err);
// Whether the request is simulated; counts it either way.
bool sim_sample_keep(sim_sampler *s, const trc_request *t);
void sim_sampler_free(sim_sampler *s);

// Rewrites the summary's totals for the full fleet and adds "sampling": rate, the key rule,
// instances_scaled {pool: {full, sampled, load_factor}}, rounding, store capacity, requests
// and tokens read/kept, and "sampled" with the raw figures replaced. gpu_hours_full is the
// run's GPU-hours scaled pool by pool (sim_run computes it from the pools).
void sim_sample_summary(json_t *s, const sim_sample_plan *p, const sim_sampler *sm, bool colocated,
                        double gpu_hours_full);

#endif
