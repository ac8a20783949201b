// sim/sim_kv.h -- one tier of the KV store: a set of blocks with LRU eviction on capacity and
// expiry after a per-class retention (sim_bcache). The cluster holds one per prefill instance
// for HBM, one per node for DRAM and one shared SSD store.
//
// Layout: an open-addressing hash (block id -> slot) over a slot array; slots are threaded
// on one doubly linked list per traffic class, most recently touched at the head. Because
// every entry of a class has the same retention, each class list is ordered by expiry as well
// as by recency, so expired entries are found at the tails and the LRU victim is the oldest of
// the class tails.
//
//   hash[i] -> slot --prev/next--> slot ...   (class 0 list: head = MRU ... tail = LRU)
#ifndef SIM_KV_H
#define SIM_KV_H

#include "sim_queue.h"
#include "trc.h"

#define SIM_BC_NONE UINT32_MAX

typedef struct sim_bslot {
    uint64_t id;            // block id
    sim_time touched;       // last insert or hit
    uint32_t prev, next;    // class list links, SIM_BC_NONE at the ends
    uint8_t cls;            // traffic class (retention)
} sim_bslot;

typedef struct sim_bcache {
    uint64_t capacity;      // blocks; UINT64_MAX = unlimited
    uint64_t used;          // blocks held
    uint64_t peak;          // most blocks ever held
    const int64_t *retention_ns;  // per class, <= 0 never expires (borrowed)
    struct sim_bentry {     // hash entry: key and slot side by side (one cache line probe)
        uint64_t key;
        uint32_t val;       // slot index, SIM_BC_NONE = empty
        uint32_t pad;
    } *h;
    size_t hcap;            // power of two
    sim_bslot *slots;
    size_t nslots, slots_cap;
    uint32_t free_head;     // free slot list through .next
    uint32_t head[TRC_CLASS_COUNT], tail[TRC_CLASS_COUNT];
    uint64_t inserted, evicted, expired;   // counters (blocks)
} sim_bcache;

// capacity 0 makes a disabled tier (holds nothing). retention is borrowed, may be NULL.
void sim_bcache_init(sim_bcache *c, uint64_t capacity, const int64_t *retention_ns);
void sim_bcache_free(sim_bcache *c);
// True when id is present and not expired at now; an expired entry is dropped.
bool sim_bcache_has(sim_bcache *c, uint64_t id, sim_time now);
// sim_bcache_has and, when present, sim_bcache_touch in one probe.
bool sim_bcache_hit(sim_bcache *c, uint64_t id, sim_time now, int cls);
// Marks id as used at now (moves it to MRU, extends its life); no-op when absent.
void sim_bcache_touch(sim_bcache *c, uint64_t id, sim_time now, int cls);
// Inserts (or touches) id. When the tier is full, the LRU entry is evicted first and its id
// returned in *evicted (true returned); expired entries are purged before evicting live ones.
// A disabled tier ignores the call.
bool sim_bcache_put(sim_bcache *c, uint64_t id, sim_time now, int cls, uint64_t *evicted);
// Hints the CPU to fetch id's hash bucket: call a few blocks ahead in a loop over a prompt's
// blocks, so the (large, random-access) tables of the shared store are not one DRAM miss per
// block.
static inline void sim_bcache_prefetch(const sim_bcache *c, uint64_t id) {
    if (c->used) __builtin_prefetch(&c->h[(size_t)kvf_hash64(id) & (c->hcap - 1)]);
}
// Second stage of the prefetch pipeline: once id's bucket is in cache (prefetched a few
// blocks earlier), fetch the slot it points to, which a hit will touch.
static inline void sim_bcache_prefetch_slot(const sim_bcache *c, uint64_t id) {
    if (!c->used) return;
    const struct sim_bentry *e = &c->h[(size_t)kvf_hash64(id) & (c->hcap - 1)];
    if (e->val != SIM_BC_NONE && e->key == id) __builtin_prefetch(&c->slots[e->val]);
}
// Drops every entry expired at now (walks the class tails). Returns how many.
uint64_t sim_bcache_expire(sim_bcache *c, sim_time now);

#endif
