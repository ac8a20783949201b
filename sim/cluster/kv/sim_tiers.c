// sim/cluster/kv/sim_tiers.c -- the KV tier cascade over the block caches (sim_kv.c): prefix
// lookup through HBM, DRAM and the shared SSD store, inserts with evictions cascading HBM ->
// DRAM -> SSD, write-through/write-back, and persisting finished answers.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cluster.h"
#include "sim_run.h"
#include "sim_sample.h"
#include "sim_trace.h"

// True when block k of r starts a group (the tables hold a group where one block of the
// trace has several: sim_kv.h), so a prompt's walk asks the tables once per group.
static bool group_starts(const sim_req *r, uint32_t k) {
    return k == 0 || SIM_BC_GROUP_KEY(r->blocks[k]) != SIM_BC_GROUP_KEY(r->blocks[k - 1]);
}

// Two-stage prefetch for a walk over r's blocks [k, end): the hash buckets of the group two
// groups ahead, the records of the group one ahead (LRU layout: the bucket names it by then).
// Only hints: which lines are fetched early never changes an answer.
static void prefetch_ahead(const sim_cluster *c, const sim_inst *in, const sim_req *r, uint32_t k,
                           uint32_t end, bool ssd) {
    uint32_t a = k + 2 * SIM_BC_GROUP, b = k + SIM_BC_GROUP;
    if (a < end && group_starts(r, a)) {
        if (in) sim_bcache_prefetch(&in->hbm, r->blocks[a]);
        if (ssd) sim_bcache_prefetch(&c->ssd, r->blocks[a]);
    }
    if (b < end && group_starts(r, b)) {
        if (in) sim_bcache_prefetch_slot(&in->hbm, r->blocks[b]);
        if (ssd) sim_bcache_prefetch_slot(&c->ssd, r->blocks[b]);
    }
}

uint32_t sim_cluster_prefix(sim_cluster *c, sim_inst *in, const sim_req *r, uint32_t hit[SIM_TIERS],
                            bool touch, bool local_only) {
    for (int t = 0; t < SIM_TIERS; t++)
        hit[t] = 0;
    if (!c->cfg->kv.prefix_cache) return 0;
    uint32_t k = 0;
    for (; k < r->n_blocks; k++) {
        uint64_t b = r->blocks[k];
        prefetch_ahead(c, in, r, k, r->n_blocks, !local_only);
        // with touch, a found block is refreshed in the same probe (LRU position, retention)
        int tier;
        if (in && (touch ? sim_bcache_hit(&in->hbm, b, c->now, r->cls)
                         : sim_bcache_has(&in->hbm, b, c->now)))
            tier = SIM_TIER_HBM;
        else if (in && (touch ? sim_bcache_hit(&in->dram, b, c->now, r->cls)
                              : sim_bcache_has(&in->dram, b, c->now)))
            tier = SIM_TIER_DRAM;
        else if (!local_only && (touch ? sim_bcache_hit(&c->ssd, b, c->now, r->cls)
                                       : sim_bcache_has(&c->ssd, b, c->now)))
            tier = SIM_TIER_SSD;
        else
            break;
        hit[tier]++;
        // a hit is loaded into this instance's HBM: promote it there now, so the prefill only
        // has to write the blocks it computes
        if (touch && tier != SIM_TIER_HBM) sim_tier_hbm_put(c, in, b, r->cls);
    }
    return k;
}

// new_blocks blocks written down to the store, one write each (as one block at a time).
static void ssd_write(sim_cluster *c, sim_inst *in, uint64_t new_blocks) {
    for (uint64_t i = 0; i < new_blocks; i++)
        c->m.ssd_write_bytes += c->block_bytes;
    if (new_blocks && in && in->link_ssd_write != SIM_NONE)
        sim_link_write_down(c, in->link_ssd_write, c->block_bytes, new_blocks);
}

// Puts one block into the SSD store; returns whether it was new there (its write-down still
// to make: ssd_write).
static uint64_t ssd_put_only(sim_cluster *c, uint64_t id, int cls) {
    uint64_t before = c->ssd.inserted;
    sim_bcache_put(&c->ssd, id, c->now, cls, NULL);
    uint64_t added = c->ssd.inserted - before;
    KVF_ASSERT(added <= 1);
    c->m.cls_store_writes[cls] += added;
    return added;
}

void sim_tier_ssd_put(sim_cluster *c, sim_inst *in, uint64_t id, int cls) {
    ssd_write(c, in, ssd_put_only(c, id, cls));
}

// A block evicted from an instance's HBM goes down the cascade: to its DRAM, whose own victim
// goes to the SSD store in write-back mode (write-through: the store already holds it).
static void cascade_down(sim_cluster *c, sim_inst *in, uint64_t ev, int cls) {
    uint64_t ev2;
    if (in->dram.capacity) {
        if (sim_bcache_put(&in->dram, ev, c->now, cls, &ev2) && !c->cfg->kv.write_through &&
            c->ssd.capacity)
            sim_tier_ssd_put(c, in, ev2, cls);
    } else if (!c->cfg->kv.write_through && c->ssd.capacity) {
        sim_tier_ssd_put(c, in, ev, cls);
    }
}

void sim_tier_fit_free(sim_cluster *c, sim_inst *in) {
    if (c->cfg->serving.prefix_cache != SIM_PREFIX_FREE_BLOCKS || !in->hbm_blocks_max) return;
    // the engine's cache is every block, held or free: the full prompt blocks of the
    // requests holding KV are cached blocks too, not room taken from the cache
    double free_tok = in->kv_cap - in->kv_used - in->kv_reserved + in->kv_prompt_held;
    uint64_t lim = free_tok > 0 ? (uint64_t)(free_tok * c->hbm_blocks_per_token) : 0;
    if (lim > in->hbm_blocks_max) lim = in->hbm_blocks_max;
    in->hbm.capacity = lim;
    uint64_t id;
    int cls;
    while (in->hbm.used > lim && sim_bcache_evict_lru(&in->hbm, c->now, &id, &cls))
        cascade_down(c, in, id, cls);
}

// Inserts a block into the instance's HBM prefix cache; evictions cascade HBM -> DRAM -> SSD
// (SSD only in write-back mode: with write-through it already holds them).
void sim_tier_hbm_put(sim_cluster *c, sim_inst *in, uint64_t id, int cls) {
    uint64_t ev;
    if (!sim_bcache_put(&in->hbm, id, c->now, cls, &ev)) return;
    cascade_down(c, in, ev, cls);
}

// A finished turn's answer is persisted with the prompt: the next turn of the session names
// those blocks with its own ids, so they are written when that turn is looked up, stamped
// with the time the answer finished (no later than now).
void sim_tier_persist_answer(sim_cluster *c, sim_inst *in, const sim_req *r) {
    if (!c->cfg->kv.persist_decode || !c->closed_loop || r->prev_id < 0 || !c->ssd.capacity) return;
    size_t i = sim_done_slot(&c->done, (uint64_t)r->prev_id, false);
    if (i == SIZE_MAX || c->done.done_ns[i] < 0) return;
    uint32_t pn = c->done.n_blocks[i];
    if (!pn || r->n_blocks < pn || r->blocks[pn - 1] != c->done.last_block[i]) return;
    uint32_t upto = KVF_MIN(r->n_blocks, c->done.tokens[i] / c->cfg->kv.block_tokens);
    uint64_t down = 0;
    for (uint32_t k = pn; k < upto; k++)
        down += ssd_put_only(c, r->blocks[k], r->cls);
    ssd_write(c, in, down);
}

void sim_tier_prefetch_write(const sim_cluster *c, const sim_inst *in, const sim_req *r,
                             uint32_t upto) {
    if (!c->cfg->kv.prefix_cache) return;
    uint32_t end = KVF_MIN(upto, r->n_blocks), k = r->blocks_written;
    for (int g = 0; k < end && g < 2; k++)
        if (k == r->blocks_written || group_starts(r, k)) {
            sim_bcache_prefetch(&in->hbm, r->blocks[k]);
            if (c->cfg->kv.write_through) sim_bcache_prefetch(&c->ssd, r->blocks[k]);
            g++;
        }
}

// Blocks of the prompt whose KV now exists (computed or loaded) enter the instance's HBM
// prefix cache as chunks complete, so a request scheduled behind this one can reuse them.
void sim_tier_write_blocks(sim_cluster *c, sim_inst *in, sim_req *r, uint32_t upto) {
    if (!c->cfg->kv.prefix_cache) return;
    // write-through: the blocks new to the store are written down after the walk, together
    // (sim_link_write_down makes them one by one); an HBM eviction then writes nothing down
    // (cascade_down), so no other write-down comes between
    bool wt = c->cfg->kv.write_through && c->ssd.capacity;
    uint64_t down = 0;
    for (uint32_t k = r->blocks_written; k < upto && k < r->n_blocks; k++) {
        prefetch_ahead(c, in, r, k, upto, true);
        sim_tier_hbm_put(c, in, r->blocks[k], r->cls);
        if (wt) down += ssd_put_only(c, r->blocks[k], r->cls);
    }
    ssd_write(c, in, down);
    if (upto > r->blocks_written) r->blocks_written = KVF_MIN(upto, r->n_blocks);
}
