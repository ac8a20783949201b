// sim/sim_kv.h -- one tier of the KV store: a set of blocks with LRU eviction on capacity and
// expiry after a per-class retention (sim_bcache). The cluster holds one per prefill instance
// for HBM, one per node for DRAM and one shared SSD store.
//
// Block ids come in groups: ids that differ only in their low 3 bits (the sub-blocks of one
// trace block, see trc_block_sub_id) share a group key id & ~7, and both layouts below place
// a group's blocks side by side, so a prefix walk pays about one cache miss per trace block
// rather than one per block. Which ids share a group never changes an answer, only where
// blocks sit in memory.
//
// Two layouts, chosen by capacity at init; both give the same answers block for block.
//
// LRU layout (a capacity limit: HBM, a sized DRAM or SSD): one 128-byte record per group
// holding its blocks' state, found through an open-addressing hash on the group key (linear
// probing, load <= 1/2), so a prefix walk pays one probe per group, not per block. Records
// never move (a free list reuses them), so the hash entry and the queues below point at them
// by index. Hash and records are sized up front from the capacity.
//
//   hash[i] {group key, record} -> record {touched[8], key, seq[8], cls[8], n}
//                                  sub j = block (key | j): touched ns, class (0xff = absent),
//                                  seq = where its entry sits in its class's queue
//
// Exact LRU without a linked list: per traffic class, an append-only queue of entries
// (record << 3 | sub), oldest first. Inserting or touching a block appends an entry to its
// (new) class's queue and kills the block's previous one (a bit per entry says which are
// live; the block's seq finds its own). A class queue's live entries are thus in touch order,
// exactly the order the class's linked list had, and every entry of a class has the same
// retention, so each queue is ordered by expiry as well as by recency: expired blocks are
// found at the heads (dead entries skipped) and the LRU victim is the oldest of the class
// heads (ties: the lower class). When a queue fills it drops its dead entries (renumbering
// the live ones' seq) if they are at least half, else slides or doubles, so it stays within
// a few entries per block held.
//
// 16 bytes a block of record for a full group, 128 for a block alone in its group, plus the
// hash (16 bytes an entry) and 4 bytes a queue entry. The group last asked for is remembered,
// so the other blocks of a group (and a put after a miss) skip the probe.
//
//   queue[cls]: head -> e e e e e e ... e <- tail     live bits: 1 0 0 1 1 0 ... 1
//               (oldest touch)     (latest touch)     (0: the block was touched again)
//
// Compact layout (no capacity limit: the retention-only store, the common production case):
// no list and no slot; one 64-byte bucket per group in an open-addressing table (linear
// probing on the group key, load <= 3/4), the block's state in the bucket itself:
//
//   byte 0        8       15      22                                      57      64
//        +--------+-------+-------+------ ... ---------------------------+-------+
//        | group  | sub 0 | sub 1 |        sub 2 .. sub 6                 | sub 7 |
//        +--------+-------+-------+------ ... ---------------------------+-------+
//   group = id & ~7 (all ones: free bucket); sub j = block (group | j), 7 bytes little endian:
//        bits 55..3: touched ns (53 bits: 104 days) | bits 2..0: class (7 = absent)
//
// 8 bytes a block for a full group; 64 for a block alone in its group. Expiry = touched +
// retention[class], checked lazily when a block is looked up. Occupancy stays exact without
// visiting entries: per class, a queue of runs {expiry, blocks} in expiry order (a class's
// expiries are appended in time order, so the queue only grows at its tail);
// sim_bcache_expire(now) pops the runs that expired by now and remembers now as the purge
// time. A block whose expiry is at or before the purge time is gone (counted when its run was
// popped) even while its bytes still sit in a bucket; buckets holding only such blocks are
// reclaimed when the table is rebuilt, so the table follows the live blocks, not all ever
// stored.
//
//   runs[cls]: head -> {exp, n} {exp, n} ... {exp, n} <- tail      (exp increasing)
#ifndef SIM_KV_H
#define SIM_KV_H

#include "sim_queue.h"
#include "trc.h"

#define SIM_BC_NONE UINT32_MAX
#define SIM_BC_ABSENT 0xff   // class of a record's sub-block that holds no block
#define SIM_BC_GROUP 8       // blocks per group (low id bits)
#define SIM_BC_GROUP_KEY(id) ((id) & ~(uint64_t)(SIM_BC_GROUP - 1))

typedef struct __attribute__((aligned(128))) sim_brec {   // LRU layout record (see above)
    sim_time touched[SIM_BC_GROUP];                       // last insert or hit
    uint64_t key;                                         // group key; next free while free
    uint32_t seq[SIM_BC_GROUP];   // the block's live entry in its class queue (wraps)
    uint8_t cls[SIM_BC_GROUP];    // traffic class (retention), SIM_BC_ABSENT = not held
    uint32_t n;                   // blocks held
} sim_brec;

typedef struct sim_bqueue {   // LRU layout: one class's entries in touch order
    uint32_t *e;              // record << 3 | sub-block
    uint64_t *live;           // bit p: e[p] is its block's current entry
    size_t head, tail, cap;   // entries [head, tail), oldest first
    size_t nlive;             // live entries (= blocks of the class)
    uint32_t base;            // seq of e[0]: a block's entry is e[seq - base]
} sim_bqueue;

typedef struct sim_bgroup {   // compact layout bucket (see the diagram above)
    uint64_t key;             // group key id & ~7; UINT64_MAX = free
    uint8_t sub[SIM_BC_GROUP][7];
} sim_bgroup;

typedef struct sim_brun {
    sim_time exp;   // expiry of these blocks
    uint64_t n;     // blocks held with this expiry (0 once all were touched again)
} sim_brun;

typedef struct sim_bcache {
    uint64_t capacity;                    // blocks; UINT64_MAX = unlimited (compact layout)
    uint64_t used;                        // blocks held
    uint64_t peak;                        // most blocks ever held
    uint64_t used_cls[TRC_CLASS_COUNT];   // blocks held by class (sums to used)
    const int64_t *retention_ns;          // per class, <= 0 never expires (borrowed)
    bool compact;                         // compact layout (no capacity limit)
    // LRU layout
    struct sim_bentry {   // hash entry: group key and its record side by side
        uint64_t key;
        uint32_t val;   // record index, SIM_BC_NONE = empty
        uint32_t pad;
    } * h;
    size_t hcap, hused;   // power of two; entries holding a group
    sim_brec *recs;       // 128-byte aligned
    size_t nrecs, recs_cap;
    uint32_t free_rec;   // free record list through .key
    uint64_t memo_key;   // group last asked for (UINT64_MAX: none), its record and hash
    uint32_t memo_rec;   // position (SIM_BC_NONE when absent: where it would go)
    size_t memo_pos;
    sim_bqueue q[TRC_CLASS_COUNT];   // per class, entries in touch order
    sim_time next_exp;               // no held block expires before (a lower bound)
    // compact layout
    sim_bgroup *g;        // gcap buckets, 64-byte aligned
    size_t gcap, gused;   // power of two; buckets holding a group
    bool gmapped;         // g is a kvf_table_map table (large: grown in place), not malloc's
    uint64_t gheld;       // buckets doublings in place held back (a probe ran off the end)
    size_t ghint;         // bucket last found (checked before use)
    sim_time purged;      // last sim_bcache_expire time: blocks expired by then are gone
    struct sim_bruns {
        sim_brun *r;
        size_t head, tail, cap, memo;   // live runs [head, tail); memo: last run found
    } runs[TRC_CLASS_COUNT];
    uint64_t inserted, evicted, expired;   // counters (blocks)
} sim_bcache;

// capacity 0 makes a disabled tier (holds nothing); UINT64_MAX the compact layout; any other
// capacity the LRU layout with its tables sized for it up front. retention is borrowed, may be
// NULL.
void sim_bcache_init(sim_bcache *c, uint64_t capacity, const int64_t *retention_ns);
void sim_bcache_free(sim_bcache *c);
// True when id is present and not expired at now; an expired entry is dropped.
bool sim_bcache_has(sim_bcache *c, uint64_t id, sim_time now);
// sim_bcache_has and, when present, sim_bcache_touch in one probe.
bool sim_bcache_hit(sim_bcache *c, uint64_t id, sim_time now, int cls);
// Marks id as used at now (moves it to MRU, extends its life); no-op when absent. An entry
// expired but not yet dropped (by a lookup or sim_bcache_expire) is revived.
void sim_bcache_touch(sim_bcache *c, uint64_t id, sim_time now, int cls);
// Inserts (or touches) id. When the tier is full, the LRU entry is evicted first and its id
// returned in *evicted (true returned); expired entries are purged before evicting live ones.
// A disabled tier ignores the call. now never decreases from call to call.
bool sim_bcache_put(sim_bcache *c, uint64_t id, sim_time now, int cls, uint64_t *evicted);
// Drops every entry expired at now. Returns how many.
uint64_t sim_bcache_expire(sim_bcache *c, sim_time now);
// LRU layout: evicts the least recently touched block (expired ones first); false when empty.
// *id and *cls get the block evicted.
bool sim_bcache_evict_lru(sim_bcache *c, sim_time now, uint64_t *id, int *cls);
// Blocks of each class alive at t (held and not expired by t): the store's occupancy by class.
// t no earlier than the last sim_bcache_expire; changes nothing.
void sim_bcache_used_at(const sim_bcache *c, sim_time t, uint64_t out[TRC_CLASS_COUNT]);
// Bytes the index holds in memory (tables, records, class queues, run queues).
size_t sim_bcache_index_bytes(const sim_bcache *c);

static inline size_t sim_bcache_home_(const sim_bcache *c, uint64_t id) {
    return (size_t)kvf_hash64(SIM_BC_GROUP_KEY(id)) & ((c->compact ? c->gcap : c->hcap) - 1);
}
// Hints the CPU to fetch id's bucket: call a few blocks ahead in a loop over a prompt's
// blocks, so the (large, random-access) tables of the shared store are not one DRAM miss per
// block.
static inline void sim_bcache_prefetch(const sim_bcache *c, uint64_t id) {
    if (!c->used) return;
    if (c->compact)
        __builtin_prefetch(&c->g[sim_bcache_home_(c, id)]);
    else
        __builtin_prefetch(&c->h[sim_bcache_home_(c, id)]);
}
// Second stage of the prefetch pipeline (LRU layout): once id's bucket is in cache
// (prefetched a few blocks earlier), fetch the group record it points to (both its lines),
// which a hit will touch. The compact layout keeps the block in its bucket: nothing to do.
static inline void sim_bcache_prefetch_slot(const sim_bcache *c, uint64_t id) {
    if (!c->used || c->compact) return;
    const struct sim_bentry *e = &c->h[sim_bcache_home_(c, id)];
    if (e->val != SIM_BC_NONE && e->key == SIM_BC_GROUP_KEY(id)) {
        __builtin_prefetch(&c->recs[e->val]);
        __builtin_prefetch((const char *)&c->recs[e->val] + 64);
    }
}

#endif
