// sim/cluster/pools/pool_vision.c -- the vision-encoder pool: requests with images queue here
// first; a step encodes up to max_batch_requests requests' images, then each goes on to the
// prefill router.
#include "sim_cluster.h"

static void vision_enqueue(sim_cluster *c, sim_inst *in, uint32_t slot) {
    sim_req *r = sim_req_at(c, slot);
    KVF_ASSERT(r->images > 0);
    r->vinst = in->id;
    sim_req_set_state(r, SIM_RS_VISION);
    r->enq_ns = c->now;
    sim_rheap_push(&in->ready, sim_queue_key(c, in->pcfg, r), slot);
    sim_inst_kick(c, in);
}

static void vision_form_step(sim_cluster *c, sim_inst *in) {
    uint32_t n = 0, images = 0;
    uint32_t slot;
    uint32_t maxb = (uint32_t)in->pcfg->max_batch_requests;
    while (in->ready.n && n < maxb) {
        sim_rheap_pop(&in->ready, &slot);
        sim_req *r = sim_req_at(c, slot);
        r->queue_ns += c->now - r->enq_ns;
        sim_batch_reserve(in, n + 1);
        in->batch[n++] = slot;
        images += r->images;
    }
    if (!n) return;
    in->n_batch = n;
    mdl_step_cost k;
    sim_step_cost(c, sim_pool_of(c, in), MDL_VISION, 0, images, NULL, &k);
    sim_step_begin(c, in, &k, n, images);
}

static void vision_step_done(sim_cluster *c, sim_inst *in) {
    for (uint32_t i = 0; i < in->n_batch; i++)
        sim_prefill_route(c, in->batch[i]);
    in->n_batch = 0;
}

static double vision_kv_used(const sim_inst *in, sim_time now) {
    (void)now;
    return in->kv_used;
}

const sim_pool_ops sim_pool_vision_ops = {"vision", vision_enqueue, vision_form_step,
                                          vision_step_done, vision_kv_used};
