// sim/cluster/pools/pool_failures.c -- instance failures (cluster.<pool>.failures.{mtbf_h,
// mttr_s,requests}): every instance of such a pool fails after an exponential time of mean
// mtbf_h (its own RNG stream) and is repaired after one of mean mttr_s. A failed instance
// takes no requests; everything it held is lost: its prefix cache, its queues, the step in
// flight, the KV of its running requests. Those requests are retried from the start through
// the routers (the default) or rejected (reason failure), counted either way. A retried
// request gets a new generation: link flows and swap-ins of its ended try are ignored when
// they complete. Decode on such pools lists its sequences (the abort visits each one).
#include <math.h>
#include <stdlib.h>

#include "sim_cluster.h"

static void schedule(sim_cluster *c, sim_inst *in, double mean_ns, uint16_t kind) {
    double t = kvf_rng_exp(&in->frng, mean_ns);
    if (t > 9e18 - (double)c->now) return;   // beyond any run
    sim_event ev = {.t = c->now + (sim_time)llround(t), .dst = in->id, .kind = kind};
    sim_queue_push(c->q, &ev);
}

void sim_failures_init(sim_cluster *c) {
    for (uint32_t i = 0; i < c->n_inst; i++) {
        sim_inst *in = &c->inst[i];
        const sim_failures_cfg *f = &in->pcfg->failures;
        if (!(f->mtbf_ns > 0)) continue;
        kvf_rng_init_named(&in->frng, c->cfg->seed ^ kvf_hash64(i + 1), "failures");
        schedule(c, in, f->mtbf_ns, SIM_EV_FAIL);
    }
}

// Whether request r is held by instance id (queued, loading, in a step, running, swapped, or
// sending its KV from there).
static bool held_by(const sim_cluster *c, const sim_req *r, uint32_t id) {
    switch (r->state) {
    case SIM_RS_LOADING:
    case SIM_RS_PREFILL:
        return r->pinst == id;
    case SIM_RS_TRANSFER:
        return r->pinst == id || r->dinst == id;
    case SIM_RS_DECODE_WAIT:
    case SIM_RS_DECODE:
    case SIM_RS_SWAPPED:
        return r->dinst == id || (c->colocated && r->pinst == id);
    default:
        return false;
    }
}

// r's ended try leaves the totals: its prompt (counted when its first chunk was scheduled) and
// its output as produced; redo: it is tried again (the next try counts them again), else it
// is rejected (never served). Failure pools list their decode sequences, so produced is
// current. What the try looked up and produced is cleared: a rejected request's row carries
// none of it, as the totals do not.
static void undo_try(sim_cluster *c, sim_req *r, bool redo) {
    sim_metrics *m = &c->m;
    if (r->scheduled) {
        m->prompt_tokens -= r->input;
        m->hit_tokens -= r->cached;
        m->miss_tokens -= r->input - r->cached;
        m->cls_prompt[r->cls] -= r->input;
        m->cls_hit[r->cls] -= r->cached;
        for (int t = 0; t < SIM_TIERS; t++)
            m->hit_tier[t] -= r->hit[t];
        *(redo ? &m->redone_prompt_tokens : &m->rejected_prompt_tokens) += r->input;
    }
    m->output_tokens -= r->produced;
    *(redo ? &m->redone_output_tokens : &m->rejected_output_tokens) += r->produced;
    r->produced = r->computed = r->cached = r->compute_tokens = r->recompute = 0;
    for (int t = 0; t < SIM_TIERS; t++)
        r->hit[t] = 0;
}

// r starts over: a fresh try through the routers, everything of the ended one undone.
static void retry(sim_cluster *c, uint32_t slot) {
    sim_req *r = sim_req_at(c, slot);
    KVF_ASSERT(!r->pkv);   // its prompt KV was freed or lost first (sim_failures_fail)
    undo_try(c, r, true);
    r->gen++;
    r->hit_blocks = r->blocks_written = r->pending_loads = 0;
    r->first_ns = r->last_ns = -1;
    r->first_lag_ns = 0;
    r->in_batch = r->scheduled = false;
    r->work_s = 0;
    r->pinst = r->dinst = SIM_NONE;
    sim_req_set_state(r, SIM_RS_PENDING);
    c->m.retried++;
    sim_req_enter(c, slot);
}

void sim_failures_fail(sim_cluster *c, sim_inst *in) {
    KVF_ASSERT(!in->failed);
    sim_pool *p = sim_pool_of(c, in);
    sim_pool_gpu_account(c);
    in->failed = true;
    p->n_failed++;
    c->m.failures++;
    c->m.lost_kv_tokens += in->kv_used + in->kv_inflight;
    if (in->active) {
        in->active = false;
        p->n_active--;
    }
    sim_inst_drain_check(c, in);   // a draining one is down now: billed as failed
    // the step in flight never ends: its end is cancelled, unless it ended already and waits
    // for a tier load (its event was taken then: sim_inst_step_done)
    if (in->busy && !in->waiting_loads) sim_queue_slot_cancel(c->q, in->id);
    in->busy = in->waiting_loads = false;
    in->run_m = in->run_more = 0;
    in->run_seq = 0;
    // its state, empty: queues, batch, running set, KV, the prefix cache
    in->ready.n = in->dwait.n = 0;
    in->n_batch = in->n_running = in->n_loading = in->n_prefilling = in->n_structured = 0;
    in->n_lag = 0;
    in->queued_tokens = in->queued_work_s = in->kv_used = in->kv_reserved = in->kv_prompt_held = 0;
    in->kv_inflight = 0;
    in->n_held_ready = 0;
    in->kv_blocked = false;
    uint64_t hcap = in->hbm.capacity;
    sim_bcache_free(&in->hbm);
    sim_bcache_init(&in->hbm, hcap, c->cfg->kv.retention_ns);
    sim_router_touch(c, in);
    // the requests it held: retried elsewhere or rejected (slots collected first: a retry
    // may route to another instance and change states as it goes)
    uint32_t *held = NULL;
    size_t n = 0, cap = 0;
    for (uint32_t s = 0; s < c->n_req; s++)
        if (held_by(c, sim_req_at(c, s), in->id)) {
            kvf_grow((void **)&held, &cap, n + 1, sizeof *held);
            held[n++] = s;
        }
    // prompt KV on a prefill instance: lost with this one (counted above), or, for a request
    // sending it to this decode instance, freed on the prefill instance it leaves (whose queue
    // may wait for it) before the request starts over or ends
    for (size_t i = 0; i < n; i++) {
        sim_req *r = sim_req_at(c, held[i]);
        if (r->pkv && r->pinst == in->id)
            r->pkv = false;
        else
            sim_prefill_release_kv(c, r, true);
    }
    bool reject = in->pcfg->failures.reject;
    for (size_t i = 0; i < n; i++) {
        if (reject) {
            sim_req *r = sim_req_at(c, held[i]);
            r->gen++;   // its link flows and swap-ins are stale now
            undo_try(c, r, false);
            sim_req_reject(c, held[i], SIM_OUT_REJECT_FAILURE);
        } else
            retry(c, held[i]);
    }
    free(held);
    in->step_start = c->now;   // down from now (for down time)
    schedule(c, in, in->pcfg->failures.mttr_ns, SIM_EV_REPAIR);
}

void sim_failures_repair(sim_cluster *c, sim_inst *in) {
    KVF_ASSERT(in->failed);
    sim_pool *p = sim_pool_of(c, in);
    sim_pool_gpu_account(c);
    c->m.down_ns += (double)(c->now - in->step_start);
    in->failed = false;
    p->n_failed--;
    in->active = true;
    p->n_active++;
    sim_router_touch(c, in);
    sim_inst_kick(c, in);
    schedule(c, in, in->pcfg->failures.mtbf_ns, SIM_EV_FAIL);
}
