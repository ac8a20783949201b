// sim/cluster/pools/sim_pool.h -- what a pool's instances do, as one table of callbacks per pool
// kind (ROSS's LP types, Redis's ae.c): the cluster's code calls through in->ops and never
// asks which kind of pool an instance belongs to. A new behaviour (an autoscaler, failures, a
// serving engine's admission) is a table entry and its file here.
//
//   kind        file              a step holds
//   vision      pool_vision.c     image batches (encoder), then hands each request to prefill
//   prefill     pool_prefill.c    prefill chunks within the token budget
//   decode      pool_decode.c     one token per running sequence (decode sums or listed)
//   colocated   pool_colocated.c  decode tokens first, prefill chunks in the rest of the budget
#ifndef SIM_POOL_H
#define SIM_POOL_H

#include <stdint.h>

#include "kvf.h"

struct sim_cluster;
struct sim_inst;

typedef struct sim_pool_ops {
    const char *name;   // the pool's name in outputs
    // A request routed to the instance (slot; its state is the one before this pool): it
    // queues there, and the instance starts a step if it can.
    void (*enqueue)(struct sim_cluster *c, struct sim_inst *in, uint32_t slot);
    // The instance is idle (not busy, run not failed): forms its next step from its queues and
    // starts it (sim_step_begin), or leaves it idle when there is nothing to do.
    void (*form_step)(struct sim_cluster *c, struct sim_inst *in);
    // The step in flight ended and its loads are settled (busy already cleared): tokens,
    // finished requests and hand-offs. The caller kicks the instance afterwards.
    void (*step_done)(struct sim_cluster *c, struct sim_inst *in);
    // Tokens of KV the instance holds at now (a run in flight counts the steps that passed).
    double (*kv_used)(const struct sim_inst *in, int64_t now);
} sim_pool_ops;

// A pool's sizing policy besides its fixed count and the time-of-day schedule: asked at every
// time-series sample; changes which instances are active (pool_autoscale.c).
struct sim_pool;
typedef struct sim_pool_scaler {
    const char *name;
    // The pool's instances at the start (the rest inactive, not billed).
    uint32_t (*initial)(const struct sim_cluster *c, const struct sim_pool *p);
    // Every sample: the pool's load over the last interval_s; may start or stop instances.
    void (*tick)(struct sim_cluster *c, struct sim_pool *p, double interval_s);
    // A started instance finished starting (weights loaded): it serves from now.
    void (*started)(struct sim_cluster *c, struct sim_pool *p);
} sim_pool_scaler;

extern const sim_pool_scaler sim_pool_autoscaler;

extern const sim_pool_ops sim_pool_vision_ops;
extern const sim_pool_ops sim_pool_prefill_ops;
extern const sim_pool_ops sim_pool_decode_ops;
extern const sim_pool_ops sim_pool_colocated_ops;

#endif
