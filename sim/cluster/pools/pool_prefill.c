// sim/cluster/pools/pool_prefill.c -- the prefill side: routing to an instance, prefix lookup and
// tier loads at admission, chunks taken into a step, the first token, and the hand-off to
// decode (KV transfer) or, colocated, to the running batch.
//
// Invariant: every prompt token is either a hit (cached) or a miss, and at least one is
// computed.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cluster.h"
#include "sim_run.h"
#include "sim_sample.h"
#include "sim_trace.h"

void sim_prefill_count_work(sim_cluster *c, const sim_req *r, uint32_t replay) {
    double f = mdl_prompt_flops(&c->model, r->compute_tokens, r->cached - replay);
    c->m.prefill_flops += f;
    double f_actual = f;
    // without reuse the prompt computes whole from position 0: the same work when nothing was
    // reused (the common no-cache case), so the second evaluation is skipped then
    if (r->compute_tokens != r->input || r->cached != replay)
        f = mdl_prompt_flops(&c->model, r->input, 0);
    c->m.prefill_flops_no_reuse += f;
    // without bounded replay, a hit would recompute the window layers over the whole prefix
    double wfrac = c->model.layers ? (double)c->model.window_layers / c->model.layers : 0;
    c->m.prefill_flops_window_full += f_actual + (c->swa_replay ? wfrac * (f - f_actual) : 0);
}

uint32_t sim_prefill_hit_tokens(const sim_cluster *c, uint32_t input, uint32_t nb,
                                const uint32_t tiers[SIM_TIERS], uint32_t tok[SIM_TIERS]) {
    uint32_t bt = c->cfg->kv.block_tokens;
    // at least one prompt token is computed; a paged cache attaches whole blocks only, so a
    // fully cached prompt recomputes its last block (as the engine and vLLM do)
    uint64_t hit = trc_hit_tokens(nb, input, bt);
    // tokens by tier follow the prefix order HBM/DRAM/SSD block by block; the cap trims the last
    uint64_t left = hit;
    for (int t = 0; t < SIM_TIERS; t++) {
        uint64_t n = KVF_MIN((uint64_t)tiers[t] * bt, left);
        tok[t] = (uint32_t)n;
        left -= n;
    }
    return (uint32_t)hit;
}

// Sets r's hit prefix to nb blocks (tiers[] of them by tier) and derives the tokens to compute.
void sim_prefill_set_prefix(sim_cluster *c, sim_req *r, uint32_t nb,
                            const uint32_t tiers[SIM_TIERS]) {
    r->cached = sim_prefill_hit_tokens(c, r->input, nb, tiers, r->hit);
    r->hit_blocks = nb;
    uint32_t replay = c->swa_replay ? KVF_MIN(c->cfg->kv.swa_replay_tokens, r->cached) : 0;
    r->compute_tokens = r->input - r->cached + replay;
}

// A request reaches its prefill instance: look up its prefix in every tier and start the loads
// of what sits in DRAM or the SSD store (they proceed while it queues).
void sim_prefill_admit(sim_cluster *c, sim_inst *in, uint32_t slot) {
    sim_req *r = sim_req_at(c, slot);
    const sim_config *cfg = c->cfg;
    r->pinst = in->id;
    sim_tier_persist_answer(c, in, r);
    uint32_t tiers[SIM_TIERS];
    uint32_t nb = sim_cluster_prefix(c, in, r, tiers, true, false);
    sim_prefill_set_prefix(c, r, nb, tiers);
    r->computed = 0;
    r->blocks_written = nb;
    // loads from DRAM (PCIe) and SSD (storage network) run in parallel on their own links
    r->pending_loads = 0;
    // the blocks each tier loads are those of the hit prefix as capped (a fully cached prompt
    // recomputes its last block, which is then not loaded): r->hit, whole blocks
    uint32_t bt = cfg->kv.block_tokens;
    double by[SIM_TIERS] = {0, (double)(r->hit[SIM_TIER_DRAM] / bt) * c->block_bytes,
                            (double)(r->hit[SIM_TIER_SSD] / bt) * c->block_bytes};
    uint32_t lk[SIM_TIERS] = {SIM_NONE, in->link_dram, in->link_ssd};
    for (int t = SIM_TIER_DRAM; t < SIM_TIERS; t++) {
        if (by[t] <= 0) continue;
        c->m.load_bytes[t] += by[t];
        if (lk[t] == SIM_NONE) continue;
        r->pending_loads++;
        c->tier_loads = true;
        sim_link_send(c, lk[t], by[t], (uint64_t)r->gen << 32 | slot);
    }
    in->queued_tokens += r->compute_tokens;
    sim_pool *pool = sim_pool_of(c, in);
    r->work_s = pool->reads_work ? sim_cluster_prefill_s(c, pool, r->compute_tokens,
                                                         r->input - r->compute_tokens)
                                 : 0;
    in->queued_work_s += r->work_s;
    r->enq_ns = c->now;
    if (r->pending_loads && !cfg->kv.overlap_load) {
        sim_req_set_state(r, SIM_RS_LOADING);
        in->n_loading++;
    } else {
        sim_req_set_state(r, SIM_RS_PREFILL);
        sim_rheap_push(&in->ready, sim_queue_key(c, in->pcfg, r), slot);
    }
    sim_inst_kick(c, in);
}

// The request's first chunk is being scheduled: blocks that requests ahead of it computed
// while it queued are in this instance's HBM now and extend its hit prefix (a server looks
// the prefix up when it schedules, not only when the request arrives). The prompt's hit/miss
// accounting is final from here on.
void sim_prefill_first_schedule(sim_cluster *c, sim_inst *in, sim_req *r) {
    if (c->cfg->kv.prefix_cache) {
        uint32_t k = r->hit_blocks, extra = 0;
        while (k < r->n_blocks && sim_bcache_hit(&in->hbm, r->blocks[k], c->now, r->cls))
            k++, extra++;
        if (extra) {
            uint32_t tiers[SIM_TIERS], before = r->compute_tokens;
            // tier counts in blocks, from the tokens set at admission
            uint32_t bt = c->cfg->kv.block_tokens;
            for (int t = 0; t < SIM_TIERS; t++)
                tiers[t] = (r->hit[t] + bt - 1) / bt;
            tiers[SIM_TIER_HBM] += extra;
            sim_prefill_set_prefix(c, r, k, tiers);
            if (r->blocks_written < k) r->blocks_written = k;
            in->queued_tokens -= (double)before - r->compute_tokens;
            sim_pool *pool = sim_pool_of(c, in);
            in->queued_work_s -= r->work_s;
            r->work_s = pool->reads_work ? sim_cluster_prefill_s(c, pool, r->compute_tokens,
                                                                 r->input - r->compute_tokens)
                                         : 0;
            in->queued_work_s += r->work_s;
        }
    }
    sim_metrics *m = &c->m;
    m->prompt_tokens += r->input;
    m->iv_prompt += r->input;
    m->hit_tokens += r->cached;
    m->iv_hit += r->cached;
    m->miss_tokens += r->input - r->cached;
    m->cls_prompt[r->cls] += r->input;
    m->cls_hit[r->cls] += r->cached;
    for (int t = 0; t < SIM_TIERS; t++) {
        m->hit_tier[t] += r->hit[t];
        m->iv_hit_tier[t] += r->hit[t];
    }
    sim_prefill_count_work(c, r, r->compute_tokens + r->cached - r->input);
}

void sim_prefill_route(sim_cluster *c, uint32_t slot) {
    sim_pool *p = &c->pool[SIM_POOL_PREFILL];
    sim_req *r = sim_req_at(c, slot);
    if (r->abandoned) {   // its client gave up while it was encoded
        sim_req_reject(c, slot, SIM_OUT_TIMEOUT);
        return;
    }
    if (p->n_active == 0) {
        sim_req_reject(c, slot, SIM_OUT_REJECT_NO_INSTANCE);
        return;
    }
    uint32_t id = p->route(c, p, r);
    if (id == SIM_NONE) {
        sim_req_reject(c, slot, SIM_OUT_REJECT_SLO);
        return;
    }
    const sim_pool_cfg *ipc = c->inst[id].pcfg;
    if (ipc->queue_limit > 0 && (int64_t)sim_inst_queue_len(&c->inst[id]) >= ipc->queue_limit) {
        sim_req_reject(c, slot, SIM_OUT_REJECT_QUEUE);
        return;
    }
    c->inst[id].ops->enqueue(c, &c->inst[id], slot);
}

void sim_decode_transfer(sim_cluster *c, sim_inst *pin, uint32_t slot) {
    sim_req *r = sim_req_at(c, slot);
    sim_pool *dp = &c->pool[SIM_POOL_DECODE];
    if (dp->n_active == 0) {
        sim_req_reject(c, slot, SIM_OUT_REJECT_NO_INSTANCE);
        return;
    }
    uint32_t id = dp->route(c, dp, r);
    r->dinst = id;
    sim_req_set_state(r, SIM_RS_TRANSFER);
    double bytes = mdl_kv_seq_bytes(&c->model, r->input);   // window layers send their window
    c->m.kv_transfer_bytes += bytes;

    // the decode pool's admission control: a full wait queue refuses the request (its prefill
    // is spent; a real router would hold or drop it, the simulator counts it rejected)
    if (c->inst[id].pcfg->queue_limit > 0 &&
        (int64_t)c->inst[id].dwait.n >= c->inst[id].pcfg->queue_limit) {
        sim_req_reject(c, slot, SIM_OUT_REJECT_QUEUE);
        return;
    }
    if (pin->link_xfer == SIM_NONE) {
        // no link: decode has the KV at once (pin is settling its step, kicked after it)
        sim_prefill_release_kv(c, r, false);
        c->inst[id].ops->enqueue(c, &c->inst[id], slot);
    } else {
        sim_link_send(c, pin->link_xfer, bytes, (uint64_t)r->gen << 32 | slot);
    }
}

void sim_prefill_finish(sim_cluster *c, sim_inst *in, uint32_t slot) {
    sim_req *r = sim_req_at(c, slot);
    r->first_ns = r->last_ns = c->now;
    r->produced = 1;
    if (c->cfg->serving.first_token_lag_steps > 0 && r->output > 1) {
        // the output pipeline delivers it after part of the instance's next step
        if (in->n_lag && in->lag_at != c->now) in->n_lag = 0;
        kvf_grow((void **)&in->lag_wait, &in->lag_cap, in->n_lag + 1, sizeof *in->lag_wait);
        in->lag_wait[in->n_lag++] = slot;
        in->lag_at = c->now;
    }
    c->m.output_tokens++;
    c->m.iv_out++;
    c->m.iv_in += r->input;
    sim_tier_write_blocks(c, in, r, r->n_blocks);
    if (r->produced >= r->output) {
        if (c->colocated) {   // release the KV claimed when its prefill started
            in->n_prefilling--;
            in->kv_prompt_held -= r->input;
            in->kv_used -= r->input;
            if (c->cfg->serving.admission == SIM_ADMIT_RESERVE) in->kv_reserved -= r->output - 1.0;
        }
        sim_req_finish(c, slot, SIM_OUT_COMPLETED);
        return;
    }
    if (c->colocated) {
        // KV is already here (claimed when its prefill started): join the running batch
        in->n_prefilling--;
        in->kv_prompt_held -= r->input;
        sim_req_set_state(r, SIM_RS_DECODE);
        r->dinst = in->id;
        sim_decode_running_add(in, r, slot);
        if (in->dsum_on) sim_dsum_join(c, in, slot);
        return;
    }
    sim_decode_transfer(c, in, slot);
}

void sim_prefill_abort(sim_cluster *c, sim_inst *in, uint32_t slot) {
    sim_req *r = sim_req_at(c, slot);
    KVF_ASSERT(r->abandoned && !r->in_batch);
    in->queued_tokens -= (double)(r->compute_tokens - r->computed);
    in->queued_work_s -=
        r->compute_tokens ? r->work_s * (r->compute_tokens - r->computed) / r->compute_tokens : 0;
    if (in->queued_work_s < 0) in->queued_work_s = 0;
    if (c->colocated &&
        (r->computed > 0 || r->scheduled)) {   // release the KV its first chunk claimed
        in->kv_used -= r->input;
        if (c->cfg->serving.admission == SIM_ADMIT_RESERVE) in->kv_reserved -= r->output - 1.0;
        in->n_prefilling--;
        in->kv_prompt_held -= r->input;
    }
    sim_req_reject(c, slot, SIM_OUT_TIMEOUT);
}

// Appends a chunk of r (popped from the ready queue) to the batch at n within *budget tokens
// (lim a chunk); returns n + 1.
static inline uint32_t take_chunk(sim_cluster *c, sim_inst *in, uint32_t slot, int64_t *budget,
                                  int64_t lim, uint32_t n) {
    sim_req *r = sim_req_at(c, slot);
    if (r->computed == 0 && !r->scheduled) {
        r->scheduled = true;
        sim_prefill_first_schedule(c, in, r);
    }
    uint32_t rem = r->compute_tokens - r->computed;
    uint32_t ch = (uint32_t)KVF_MIN((int64_t)rem, KVF_MIN(*budget, lim));
    if (r->computed == 0) r->queue_ns += c->now - r->enq_ns;
    sim_batch_reserve(in, n + 1);
    sim_seqs_reserve(c, n + 1);
    in->batch[n] = slot;
    in->chunk[n] = ch;
    c->seqs[n] = (mdl_seq){ch, r->input - r->compute_tokens + r->computed};
    r->in_batch = true;
    if (c->cfg->kv.step_sequential)   // later chunks of this step see this chunk's blocks
        sim_tier_write_blocks(
            c, in, r, (r->input - r->compute_tokens + r->computed + ch) / c->cfg->kv.block_tokens);
    *budget -= ch;
    return n + 1;
}

// The ready queue's head waits for KV (disaggregated): requests behind it that already hold
// theirs, prefilled in part, still take their chunks; else none could ever finish and free
// its KV (an older request back from its tier loads, or a shorter one under spf, queues ahead
// of them). Pops the queue down to them and pushes the others back under their keys, so the
// order stays; O(queue) only while the head waits and some request behind it holds KV. Sets
// *freed when one of them was aborted (its client gave up): the head may fit now.
static uint32_t take_held(sim_cluster *c, sim_inst *in, int64_t *budget, int64_t lim, uint32_t n,
                          uint32_t maxb, bool *freed) {
    uint32_t *keep = NULL;
    uint64_t *kkey = NULL;
    size_t nk = 0, cap = 0, cap2 = 0;
    *freed = false;
    while (*budget > 0 && n < maxb && in->n_held_ready && in->ready.n) {
        uint64_t key = in->ready.key[0];
        uint32_t slot;
        sim_rheap_pop(&in->ready, &slot);
        sim_req *r = sim_req_at(c, slot);
        if (!r->pkv) {
            kvf_grow((void **)&keep, &cap, nk + 1, sizeof *keep);
            kvf_grow((void **)&kkey, &cap2, nk + 1, sizeof *kkey);
            keep[nk] = slot;
            kkey[nk++] = key;
            continue;
        }
        in->n_held_ready--;
        if (r->abandoned) {
            sim_prefill_abort(c, in, slot);
            *freed = true;
            continue;
        }
        n = take_chunk(c, in, slot, budget, lim, n);
    }
    for (size_t i = 0; i < nk; i++)
        sim_rheap_push(&in->ready, kkey[i], keep[i]);
    free(keep);
    free(kkey);
    return n;
}

// The ready queue's head, whose KV can never fit the instance: out of the queue, rejected.
static void reject_never_fits(sim_cluster *c, sim_inst *in, uint32_t slot) {
    sim_req *r = sim_req_at(c, slot);
    uint32_t s2;
    sim_rheap_pop(&in->ready, &s2);
    in->queued_tokens -= r->compute_tokens;
    in->queued_work_s -= r->work_s;
    sim_req_reject(c, slot, SIM_OUT_REJECT_KV);
}

// Fills the batch with prefill chunks from the ready queue within budget tokens. Both kinds
// of instance claim a request's KV when its first chunk is scheduled and keep the queue's
// order: a head whose KV does not fit now waits, one that never fits is rejected. Colocated,
// the KV joins the running batch's; disaggregated, it is held (kv_inflight) until its
// transfer to decode ends.
uint32_t sim_prefill_take_chunks(sim_cluster *c, sim_inst *in, int64_t budget, uint32_t n) {
    const sim_pool_cfg *pc = in->pcfg;
    int64_t lim = pc->chunk_tokens > 0 ? pc->chunk_tokens : budget;
    uint32_t maxb = pc->max_batch_requests > 0 ? (uint32_t)pc->max_batch_requests : UINT32_MAX;
    in->kv_blocked = false;
    while (budget > 0 && in->ready.n) {
        if (!c->colocated && n >= maxb) break;   // requests per prefill step
        uint32_t slot = in->ready.slot[0];
        sim_req *r = sim_req_at(c, slot);
        if (r->abandoned) {   // its client gave up while it queued
            uint32_t s2;
            sim_rheap_pop(&in->ready, &s2);
            if (r->pkv) in->n_held_ready--;
            sim_prefill_abort(c, in, slot);
            continue;
        }
        if (c->colocated && r->computed == 0) {
            double need = (double)r->input + 1;
            double remaining = c->cfg->serving.admission == SIM_ADMIT_RESERVE ? r->output - 1.0 : 0;
            if (need + remaining > in->kv_cap) {
                reject_never_fits(c, in, slot);
                continue;
            }
            if (!sim_decode_fits(c, in, need, remaining) ||
                in->n_running + in->n_prefilling >= maxb)
                break;
            in->kv_used += r->input;
            in->kv_reserved += remaining;
            in->kv_prompt_held += r->input;
            in->n_prefilling++;
        } else if (!c->colocated) {
            if (r->pkv) {
                in->n_held_ready--;
            } else {
                // the whole prompt (its cached prefix included) is in this instance's HBM while
                // it is computed and until decode has it. The prefix cache is not shrunk by it:
                // its blocks are the cache's own (the hit prefix already, the rest as its chunks
                // complete: sim_tier_write_blocks), as colocated prompts' are (kv_prompt_held);
                // the cache only gives way, by LRU, and never holds a prompt back
                if (r->input > in->kv_cap) {
                    reject_never_fits(c, in, slot);
                    continue;
                }
                if (in->kv_inflight + r->input > in->kv_cap) {
                    in->kv_blocked = true;
                    bool freed = false;
                    if (in->n_held_ready) n = take_held(c, in, &budget, lim, n, maxb, &freed);
                    if (freed) continue;   // the head again: room was freed (progress each time)
                    break;
                }
                in->kv_inflight += r->input;
                r->pkv = true;
            }
        }
        uint32_t s2;
        sim_rheap_pop(&in->ready, &s2);
        n = take_chunk(c, in, slot, &budget, lim, n);
    }
    return n;
}

void sim_prefill_release_kv(sim_cluster *c, sim_req *r, bool kick) {
    if (!r->pkv) return;
    sim_inst *in = &c->inst[r->pinst];
    KVF_ASSERT(!c->colocated && in->kv_inflight >= r->input);
    in->kv_inflight -= r->input;
    r->pkv = false;
    if (kick && in->kv_blocked) {
        in->kv_blocked = false;
        sim_inst_kick(c, in);
    }
    // out of service, the instance is billed until its last prompt's KV has left
    if (!in->active || in->draining) sim_inst_drain_check(c, in);
}

// ---- the pool's table (sim_pool.h) ---------------------------------------------------------
static void prefill_form_step(sim_cluster *c, sim_inst *in) {
    sim_step_form_batch(c, in, false, true);
}

static void prefill_step_done(sim_cluster *c, sim_inst *in) {
    sim_step_settle_batch(c, in, false);
}

// The KV a prefill instance holds: its prompts' in flight (computed, or sending to decode),
// what its time series' kv_used_frac and a kv-scaled autoscaler read.
static double prefill_kv_used(const sim_inst *in, int64_t now) {
    return sim_inst_kv_used(in, now) + in->kv_inflight;
}

const sim_pool_ops sim_pool_prefill_ops = {"prefill", sim_prefill_admit, prefill_form_step,
                                           prefill_step_done, prefill_kv_used};
