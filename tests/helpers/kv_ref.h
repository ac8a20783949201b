// tests/helpers/kv_ref.h -- the block index as it was before the compact one (one hash entry
// per block + a slot on a per-class LRU list, 48+ bytes a block), kept as the reference the
// compact index is checked against block for block (test_kv). Same contract as sim_kv.h.
#ifndef KVT_KV_REF_H
#define KVT_KV_REF_H

#include "sim_queue.h"
#include "trc.h"

#define KVT_REF_NONE UINT32_MAX

typedef struct kvt_refslot {
    uint64_t id;           // block id
    sim_time touched;      // last insert or hit
    uint32_t prev, next;   // class list links, KVT_REF_NONE at the ends
    uint8_t cls;           // traffic class (retention)
} kvt_refslot;

typedef struct kvt_refcache {
    uint64_t capacity;             // blocks; UINT64_MAX = unlimited
    uint64_t used;                 // blocks held
    uint64_t peak;                 // most blocks ever held
    const int64_t *retention_ns;   // per class, <= 0 never expires (borrowed)
    struct kvt_refentry {          // hash entry: key and slot side by side (one cache line probe)
        uint64_t key;
        uint32_t val;   // slot index, KVT_REF_NONE = empty
        uint32_t pad;
    } * h;
    size_t hcap;   // power of two
    kvt_refslot *slots;
    size_t nslots, slots_cap;
    uint32_t free_head;   // free slot list through .next
    uint32_t head[TRC_CLASS_COUNT], tail[TRC_CLASS_COUNT];
    uint64_t inserted, evicted, expired;   // counters (blocks)
} kvt_refcache;

// capacity 0 makes a disabled tier (holds nothing). retention is borrowed, may be NULL.
void kvt_refcache_init(kvt_refcache *c, uint64_t capacity, const int64_t *retention_ns);
void kvt_refcache_free(kvt_refcache *c);
// True when id is present and not expired at now; an expired entry is dropped.
bool kvt_refcache_has(kvt_refcache *c, uint64_t id, sim_time now);
// kvt_refcache_has and, when present, kvt_refcache_touch in one probe.
bool kvt_refcache_hit(kvt_refcache *c, uint64_t id, sim_time now, int cls);
// Marks id as used at now (moves it to MRU, extends its life); no-op when absent.
void kvt_refcache_touch(kvt_refcache *c, uint64_t id, sim_time now, int cls);
// Inserts (or touches) id. When the tier is full, the LRU entry is evicted first and its id
// returned in *evicted (true returned); expired entries are purged before evicting live ones.
// A disabled tier ignores the call.
bool kvt_refcache_put(kvt_refcache *c, uint64_t id, sim_time now, int cls, uint64_t *evicted);
// Drops every entry expired at now (walks the class tails). Returns how many.
uint64_t kvt_refcache_expire(kvt_refcache *c, sim_time now);
// Evicts the least recently touched entry (expired ones purged first); false when empty. *id
// and *cls get the entry evicted.
bool kvt_refcache_evict_lru(kvt_refcache *c, sim_time now, uint64_t *id, int *cls);

#endif
