// sim/cluster/pools/pool_colocated.c -- colocated instances: one pool runs both phases; a step
// takes the decode tokens of the running batch first and fills the rest of the token budget
// with prefill chunks (KV claimed when a request's first chunk is scheduled); a finished
// prefill joins the running batch where its KV already is.
#include "sim_cluster.h"

static void colocated_enqueue(sim_cluster *c, sim_inst *in, uint32_t slot) {
    sim_prefill_admit(c, in, slot);
}

static void colocated_form_step(sim_cluster *c, sim_inst *in) {
    sim_step_form_batch(c, in, true, true);
}

static void colocated_step_done(sim_cluster *c, sim_inst *in) {
    sim_step_settle_batch(c, in, true);
}

const sim_pool_ops sim_pool_colocated_ops = {"colocated", colocated_enqueue, colocated_form_step,
                                             colocated_step_done, sim_inst_kv_used};
