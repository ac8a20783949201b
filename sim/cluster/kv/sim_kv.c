// sim/sim_kv.c -- LRU + TTL block cache (see sim_kv.h for both layouts).
#include "sim_kv.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(sim_bgroup) == 64, "a group bucket is one cache line");

#define SUB_ABSENT 7u                         // class bits of an empty sub-block
#define SUB_TOUCHED_MAX ((sim_time)1 << 53)   // touched ns must stay below
#define NEVER INT64_MAX                       // expiry of a block that never expires

static int64_t retention(const sim_bcache *c, int cls) {
    return c->retention_ns ? c->retention_ns[cls] : 0;
}

// ---- LRU layout: the group hash and records ----------------------------------------------------
_Static_assert(sizeof(sim_brec) == 128, "a group record is two cache lines");

// Hash position of group key: where it sits, or the empty entry ending its probe run.
static size_t hfind(const sim_bcache *c, uint64_t key) {
    size_t mask = c->hcap - 1, i = (size_t)kvf_hash64(key) & mask;
    while (c->h[i].val != SIM_BC_NONE && c->h[i].key != key)
        i = (i + 1) & mask;
    return i;
}

// How many entries ahead a rehash prefetches the new table's bucket (a DRAM miss each).
enum { REHASH_AHEAD = 8 };

static void halloc(sim_bcache *c, size_t hcap) {
    c->hcap = hcap;
    c->h = kvf_aligned_malloc(64, c->hcap * sizeof *c->h);
    memset(c->h, 0xff, c->hcap * sizeof *c->h);
}

static void hrehash(sim_bcache *c) {
    struct sim_bentry *old = c->h;
    size_t oc = c->hcap;
    halloc(c, oc * 2);
    size_t mask = c->hcap - 1;
    for (size_t i = 0; i < oc; i++) {
        // the new table is far larger than the caches: fetch a later entry's home meanwhile
        if (i + REHASH_AHEAD < oc && old[i + REHASH_AHEAD].val != SIM_BC_NONE)
            __builtin_prefetch(&c->h[(size_t)kvf_hash64(old[i + REHASH_AHEAD].key) & mask], 1);
        if (old[i].val != SIM_BC_NONE) c->h[hfind(c, old[i].key)] = old[i];
    }
    free(old);
}

// True when an entry at j whose home is h may move back to the hole at i (h is not
// cyclically within (i, j]): the backward-shift rule of linear probing.
static bool may_shift(size_t i, size_t j, size_t h, size_t mask) {
    return ((j - h) & mask) >= ((j - i) & mask);
}

// Backward-shift deletion at hash position i.
static void hdel(sim_bcache *c, size_t i) {
    size_t mask = c->hcap - 1;
    c->h[i].val = SIM_BC_NONE;
    for (size_t j = (i + 1) & mask; c->h[j].val != SIM_BC_NONE; j = (j + 1) & mask)
        if (may_shift(i, j, (size_t)kvf_hash64(c->h[j].key) & mask, mask)) {
            c->h[i] = c->h[j];
            c->h[j].val = SIM_BC_NONE;
            i = j;
        }
}

// Record of group key, SIM_BC_NONE when the group holds no block. A prefix walk asks for the
// same group up to 8 times in a row, and a block missed is often put next: the last group
// asked for answers without a probe (an absent one with the hash position it would take).
static uint32_t grec(sim_bcache *c, uint64_t key) {
    if (key == c->memo_key) return c->memo_rec;
    size_t i = hfind(c, key);
    c->memo_key = key;
    c->memo_rec = c->h[i].val;
    c->memo_pos = i;
    return c->memo_rec;
}

static void recs_grow(sim_bcache *c, size_t need) {
    size_t cap = KVF_MAX(need, c->recs_cap * 2);
    sim_brec *r = kvf_aligned_malloc(128, cap * sizeof *r);
    if (c->nrecs) memcpy(r, c->recs, c->nrecs * sizeof *r);
    free(c->recs);
    c->recs = r;
    c->recs_cap = cap;
}

// A record for group key (just asked for by grec and absent), entered in the hash with no
// block held.
static uint32_t group_new(sim_bcache *c, uint64_t key) {
    KVF_ASSERT(c->memo_key == key && c->memo_rec == SIM_BC_NONE);
    size_t i = c->memo_pos;
    uint32_t r = c->free_rec;
    if (r != SIM_BC_NONE) {
        c->free_rec = (uint32_t)c->recs[r].key;
    } else {
        KVF_ASSERT(c->nrecs < (size_t)1 << 29);   // an entry is record << 3 | sub in 32 bits
        if (c->nrecs == c->recs_cap) recs_grow(c, c->nrecs + 1);
        r = (uint32_t)c->nrecs++;
    }
    sim_brec *g = &c->recs[r];
    g->key = key;
    g->n = 0;
    memset(g->cls, SIM_BC_ABSENT, sizeof g->cls);
    c->h[i].key = key;
    c->h[i].val = r;
    c->memo_rec = r;
    if (++c->hused * 2 > c->hcap) hrehash(c);
    return r;
}

// Group record r holds no block any more: out of the hash, onto the free list.
static void group_free(sim_bcache *c, uint32_t r) {
    uint64_t key = c->recs[r].key;
    hdel(c, hfind(c, key));
    c->hused--;
    // entries may have shifted: an absent group's position is stale, and this group is gone
    if (c->memo_key == key || c->memo_rec == SIM_BC_NONE) c->memo_key = UINT64_MAX;
    c->recs[r].key = c->free_rec;
    c->free_rec = r;
}

// ---- LRU layout: the class queues -------------------------------------------------------------
static bool q_is_live(const sim_bqueue *q, size_t p) {
    return q->live[p >> 6] >> (p & 63) & 1;
}

// Makes room at the tail of full queue k: drops the dead entries when they are at least half
// (renumbering the live ones' records), else slides the entries down past a dead head or
// doubles the buffer.
static void q_make_room(sim_bcache *c, int k) {
    sim_bqueue *q = &c->q[k];
    size_t len = q->tail - q->head;
    if (len && q->nlive <= len / 2) {
        size_t w = 0;
        for (size_t p = q->head; p < q->tail; p++)
            if (q_is_live(q, p)) {
                uint32_t e = q->e[p];
                q->e[w] = e;
                c->recs[e >> 3].seq[e & 7] = q->base + (uint32_t)w;
                w++;
            }
        memset(q->live, 0, (q->tail + 63) / 64 * sizeof *q->live);
        for (size_t p = 0; p < w; p++)
            q->live[p >> 6] |= (uint64_t)1 << (p & 63);
        q->head = 0;
        q->tail = w;
    } else if (q->head >= 64 && q->head >= q->cap / 4) {
        size_t s = q->head & ~(size_t)63;   // whole live-bit words
        memmove(q->e, q->e + s, (q->tail - s) * sizeof *q->e);
        memmove(q->live, q->live + s / 64, (q->cap - s) / 64 * sizeof *q->live);
        memset(q->live + (q->cap - s) / 64, 0, s / 64 * sizeof *q->live);
        q->base += (uint32_t)s;
        q->head -= s;
        q->tail -= s;
    } else {
        size_t cap = q->cap ? q->cap * 2 : 64;
        KVF_ASSERT(cap <= UINT32_MAX);   // seq - base names an entry in 32 bits
        q->e = kvf_realloc(q->e, cap * sizeof *q->e);
        q->live = kvf_realloc(q->live, cap / 64 * sizeof *q->live);
        memset(q->live + q->cap / 64, 0, (cap - q->cap) / 64 * sizeof *q->live);
        q->cap = cap;
    }
}

// Appends entry e (record << 3 | sub) to class k's queue; returns its seq.
static uint32_t q_push(sim_bcache *c, int k, uint32_t e) {
    sim_bqueue *q = &c->q[k];
    if (q->tail == q->cap) q_make_room(c, k);
    size_t p = q->tail++;
    q->e[p] = e;
    q->live[p >> 6] |= (uint64_t)1 << (p & 63);
    q->nlive++;
    return q->base + (uint32_t)p;
}

// The entry at seq of class k's queue is no longer its block's.
static void q_kill(sim_bcache *c, int k, uint32_t seq) {
    sim_bqueue *q = &c->q[k];
    size_t p = (size_t)(uint32_t)(seq - q->base);
    KVF_ASSERT(p >= q->head && p < q->tail && q_is_live(q, p));
    q->live[p >> 6] &= ~((uint64_t)1 << (p & 63));
    q->nlive--;
}

// Oldest live entry of class k (the dead ones before it are popped), SIM_BC_NONE when the
// class holds nothing (the queue then restarts at the front of its buffer).
static uint32_t q_front(sim_bcache *c, int k) {
    sim_bqueue *q = &c->q[k];
    while (q->head < q->tail) {
        uint64_t w = q->live[q->head >> 6] >> (q->head & 63);
        if (w) {
            q->head += (size_t)__builtin_ctzll(w);
            return q->e[q->head];
        }
        q->head = (q->head | 63) + 1;   // the rest of this word is dead
    }
    q->base += (uint32_t)q->tail;
    q->head = q->tail = 0;
    return SIM_BC_NONE;
}

// ---- LRU layout: blocks ----------------------------------------------------------------------
static bool expired_at(const sim_bcache *c, int cls, sim_time touched, sim_time now) {
    int64_t r = retention(c, cls);
    return r > 0 && now - touched >= r;
}

// Drops block (record r, sub j): its queue entry dies, the record goes when it empties.
static void block_drop(sim_bcache *c, uint32_t r, unsigned j) {
    sim_brec *g = &c->recs[r];
    int k = g->cls[j];
    q_kill(c, k, g->seq[j]);
    g->cls[j] = SIM_BC_ABSENT;
    c->used--;
    c->used_cls[k]--;
    if (--g->n == 0) group_free(c, r);
}

// Record of id when present and alive at now, else SIM_BC_NONE (an expired block is dropped
// on the way).
static uint32_t find_live(sim_bcache *c, uint64_t id, sim_time now) {
    if (!c->used) return SIM_BC_NONE;
    uint32_t r = grec(c, SIM_BC_GROUP_KEY(id));
    unsigned j = (unsigned)(id & (SIM_BC_GROUP - 1));
    if (r == SIM_BC_NONE || c->recs[r].cls[j] == SIM_BC_ABSENT) return SIM_BC_NONE;
    if (expired_at(c, c->recs[r].cls[j], c->recs[r].touched[j], now)) {
        block_drop(c, r, j);
        c->expired++;
        return SIM_BC_NONE;
    }
    return r;
}

// When a block of class cls touched at t expires (NEVER: it does not).
static sim_time expiry(const sim_bcache *c, int cls, sim_time t) {
    int64_t r = retention(c, cls);
    return r > 0 && r < NEVER - t ? t + r : NEVER;
}

// A block of class cls was inserted or touched at now: the expiry bound takes its expiry.
static void bound_exp(sim_bcache *c, int cls, sim_time now) {
    sim_time e = expiry(c, cls, now);
    if (e < c->next_exp) c->next_exp = e;
}

// The longest-lived class that touched a block keeps it.
static int keep_cls(const sim_bcache *c, int old, int cls) {
    if (!c->retention_ns || cls == old) return old;
    int64_t a = c->retention_ns[cls], b = c->retention_ns[old];
    return a <= 0 || (b > 0 && a > b) ? cls : old;
}

// Touch: the block's entry moves to the tail of its (kept) class's queue, as the linked list
// moved it to the head of its class's list.
static void touch_block(sim_bcache *c, uint32_t r, unsigned j, sim_time now, int cls) {
    sim_brec *g = &c->recs[r];
    int old = g->cls[j], k = keep_cls(c, old, cls);
    g->touched[j] = now;
    const sim_bqueue *q = &c->q[old];
    if (k == old && g->seq[j] == q->base + (uint32_t)(q->tail - 1)) return;   // already last
    q_kill(c, old, g->seq[j]);
    if (k != old) {
        c->used_cls[old]--;
        c->used_cls[k]++;
        g->cls[j] = (uint8_t)k;
    }
    g->seq[j] = q_push(c, k, r << 3 | j);
    bound_exp(c, k, now);
}

// Drops the blocks expired at now. The class heads are only visited when now reaches the
// bound on the earliest expiry (a touch or a drop only makes the true earliest later), which
// each visit renews from the heads it stops at.
static uint64_t lru_expire(sim_bcache *c, sim_time now) {
    if (now < c->next_exp) return 0;
    uint64_t n = 0;
    sim_time next = NEVER;
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        if (!c->q[k].nlive || retention(c, k) <= 0) continue;
        for (uint32_t e; (e = q_front(c, k)) != SIM_BC_NONE; n++) {
            sim_time t = c->recs[e >> 3].touched[e & 7];
            if (!expired_at(c, k, t, now)) {
                sim_time x = expiry(c, k, t);
                if (x < next) next = x;
                break;
            }
            block_drop(c, e >> 3, e & 7);
        }
    }
    c->next_exp = next;
    c->expired += n;
    return n;
}

// The LRU victim's entry: the least recently touched of the class heads (the lower class on
// a tie); SIM_BC_NONE when empty.
static uint32_t lru_victim(sim_bcache *c) {
    uint32_t v = SIM_BC_NONE;
    sim_time vt = 0;
    int vk = 0;
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        if (!c->q[k].nlive) continue;
        uint32_t e = q_front(c, k);
        sim_time t = c->recs[e >> 3].touched[e & 7];
        if (v == SIM_BC_NONE || t < vt) {
            v = e;
            vt = t;
            vk = k;
        }
    }
    // victims leave a class in its queue's order: fetch the record of one a few entries on,
    // which a later eviction reads (a hint only)
    const sim_bqueue *q = &c->q[vk];
    if (v != SIM_BC_NONE && q->head + 8 < q->tail) {
        const sim_brec *g = &c->recs[q->e[q->head + 8] >> 3];
        __builtin_prefetch(g);
        __builtin_prefetch((const char *)g + 64);
    }
    return v;
}

static bool lru_put(sim_bcache *c, uint64_t id, sim_time now, int cls, uint64_t *evicted) {
    uint64_t key = SIM_BC_GROUP_KEY(id);
    unsigned j = (unsigned)(id & (SIM_BC_GROUP - 1));
    uint32_t r = grec(c, key);
    if (r != SIM_BC_NONE && c->recs[r].cls[j] != SIM_BC_ABSENT) {
        touch_block(c, r, j, now, cls);
        return false;
    }
    bool ev = false;
    if (c->used >= c->capacity) {
        lru_expire(c, now);
        if (c->used >= c->capacity) {
            uint32_t v = lru_victim(c);
            KVF_ASSERT(v != SIM_BC_NONE);
            if (evicted) *evicted = c->recs[v >> 3].key | (v & 7);
            block_drop(c, v >> 3, v & 7);
            c->evicted++;
            ev = true;
            // a group is evicted block after block: when one is left, the next eviction frees
            // the record and probes for its hash entry, fetched now (a hint)
            const sim_brec *g = &c->recs[v >> 3];
            if (g->n == 1) __builtin_prefetch(&c->h[(size_t)kvf_hash64(g->key) & (c->hcap - 1)]);
        }
        r = grec(c, key);   // the drops may have emptied id's group
    }
    if (r == SIM_BC_NONE) r = group_new(c, key);
    sim_brec *g = &c->recs[r];
    g->cls[j] = (uint8_t)cls;
    g->touched[j] = now;
    g->seq[j] = q_push(c, cls, r << 3 | j);
    bound_exp(c, cls, now);
    g->n++;
    c->used++;
    c->used_cls[cls]++;
    c->inserted++;
    if (c->used > c->peak) c->peak = c->used;
    return ev;
}

// ---- compact layout: run queues ---------------------------------------------------------------
static void runs_push(sim_bcache *c, int cls, sim_time exp) {
    struct sim_bruns *q = &c->runs[cls];
    if (q->tail > q->head && q->r[q->tail - 1].exp == exp) {
        q->r[q->tail - 1].n++;
        return;
    }
    KVF_ASSERT(q->tail == q->head || q->r[q->tail - 1].exp < exp);
    if (q->tail == q->cap) {
        if (q->head > 0 && q->head >= q->cap / 2) {   // slide the live runs down rather than grow
            memmove(q->r, q->r + q->head, (q->tail - q->head) * sizeof *q->r);
            q->tail -= q->head;
            q->memo = q->memo >= q->head ? q->memo - q->head : 0;
            q->head = 0;
        } else {
            kvf_grow((void **)&q->r, &q->cap, q->tail + 1, sizeof *q->r);
        }
    }
    q->r[q->tail++] = (sim_brun){.exp = exp, .n = 1};
}

// One block of class cls with expiry exp leaves (touched again, or dropped).
static void runs_take(sim_bcache *c, int cls, sim_time exp) {
    struct sim_bruns *q = &c->runs[cls];
    size_t i = q->memo;
    if (i < q->head || i >= q->tail || q->r[i].exp != exp) {
        size_t lo = q->head, hi = q->tail;   // first run with r.exp >= exp
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (q->r[mid].exp < exp)
                lo = mid + 1;
            else
                hi = mid;
        }
        i = lo;
        q->memo = i;
    }
    KVF_ASSERT(i < q->tail && q->r[i].exp == exp && q->r[i].n > 0);
    q->r[i].n--;
}

// ---- compact layout: buckets ---------------------------------------------------------------
static uint64_t sub_get(const sim_bgroup *g, unsigned j) {
    const uint8_t *p = g->sub[j];
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48;
}

static void sub_set(sim_bgroup *g, unsigned j, uint64_t v) {
    uint8_t *p = g->sub[j];
    for (int b = 0; b < 7; b++)
        p[b] = (uint8_t)(v >> (8 * b));
}

static const uint64_t SUB_EMPTY = ((uint64_t)1 << 56) - 1;   // class bits 7

static sim_time sub_exp(const sim_bcache *c, uint64_t v) {
    int64_t r = retention(c, (int)(v & 7));
    sim_time t = (sim_time)(v >> 3);
    return r > 0 && r < NEVER - t ? t + r : NEVER;
}

// Present: in its bucket and not gone with a popped run.
static bool sub_held(const sim_bcache *c, uint64_t v) {
    return (v & 7) != SUB_ABSENT && sub_exp(c, v) > c->purged;
}

// A table of n buckets, all empty, in c->g: a mapped table from KVF_HUGE_MIN bytes up, which
// later doublings grow in place. The caller frees the table it replaces.
static void gtable_new(sim_bcache *c, size_t n) {
    size_t b = n * sizeof *c->g;
    c->gmapped = b >= KVF_HUGE_MIN;
    c->g = c->gmapped ? kvf_table_map(b) : kvf_aligned_malloc(64, b);
    memset(c->g, 0xff, b);
    c->gcap = n;
}

static void gtable_free(sim_bgroup *g, size_t n, bool mapped) {
    if (mapped)
        kvf_table_free(g, n * sizeof *g);
    else
        free(g);
}

static size_t gfind(const sim_bcache *c, uint64_t key) {
    size_t mask = c->gcap - 1, i = (size_t)kvf_hash64(key) & mask;
    while (c->g[i].key != UINT64_MAX && c->g[i].key != key)
        i = (i + 1) & mask;
    return i;
}

// gfind for a walk: the bucket last found answers again while it still holds key (a key sits
// in one bucket only, so the check is the whole proof), as a prefix walk asks for the same
// group once per block.
static size_t gfind_at(sim_bcache *c, uint64_t key) {
    if (c->ghint < c->gcap && c->g[c->ghint].key == key) return c->ghint;
    return c->ghint = gfind(c, key);
}

// Doubles a mapped table in place (kvf_table_grow keeps the pages already written: only the
// new half is fresh memory) and moves every bucket of the old half to its place under the new
// mask. p: a bucket that was empty before the rebuild's drops, so no old probe run crosses it.
// Buckets are taken in old probe order from p + 1: a bucket whose new home h is in the old
// half has h at or before its old place, and its probe meets only buckets already moved, or
// its own emptied place; one whose home is in the new half probes buckets moved there. Only a
// probe that runs off the end of the table could meet a bucket not yet moved: those are held
// back and placed when every other bucket has been (a rare case, and always safe).
static void ggrow_in_place(sim_bcache *c, size_t oc, size_t p) {
    size_t nc = 2 * oc, mask = nc - 1;
    c->g = kvf_table_grow(c->g, oc * sizeof *c->g, nc * sizeof *c->g);
    c->gcap = nc;
    sim_bgroup *g = c->g, *held = NULL;
    memset(g + oc, 0xff, oc * sizeof *g);
    size_t nheld = 0, held_cap = 0;
    for (size_t s = 1; s < oc; s++) {
        size_t i = (p + s) & (oc - 1);
        if (g[i].key == UINT64_MAX) {
            memset(&g[i], 0xff, sizeof g[i]);   // dropped by the rebuild: wholly empty
            continue;
        }
        sim_bgroup e = g[i];
        memset(&g[i], 0xff, sizeof g[i]);
        size_t j = (size_t)kvf_hash64(e.key) & mask;
        bool wrapped = false;
        while (g[j].key != UINT64_MAX) {
            j = (j + 1) & mask;
            wrapped |= j == 0;
        }
        if (!wrapped) {
            g[j] = e;
            continue;
        }
        kvf_grow((void **)&held, &held_cap, nheld + 1, sizeof *held);
        held[nheld++] = e;
    }
    c->gheld += nheld;
    for (size_t k = 0; k < nheld; k++)
        g[gfind(c, held[k].key)] = held[k];
    free(held);
}

// Rebuilds the table without the buckets that hold no present block, doubling it only when
// the live buckets need the room (load <= 1/2 after the rebuild).
static void grebuild(sim_bcache *c) {
    sim_bgroup *old = c->g;
    size_t oc = c->gcap, live = 0, p = SIZE_MAX;
    for (size_t i = 0; i < oc; i++) {
        if (old[i].key == UINT64_MAX) {
            if (p == SIZE_MAX) p = i;   // empty before any drop (drops are behind i)
            continue;
        }
        bool any = false;
        for (unsigned j = 0; j < SIM_BC_GROUP; j++) {
            uint64_t v = sub_get(&old[i], j);
            if (sub_held(c, v))
                any = true;
            else if ((v & 7) != SUB_ABSENT)
                sub_set(&old[i], j, SUB_EMPTY);
        }
        if (any)
            live++;
        else
            old[i].key = UINT64_MAX;
    }
    size_t nc = oc;
    while (live * 2 > nc)
        nc *= 2;
    c->gused = live;
    if (c->gmapped && nc == 2 * oc && p != SIZE_MAX) {
        ggrow_in_place(c, oc, p);
        return;
    }
    bool was_mapped = c->gmapped;
    gtable_new(c, nc);
    size_t mask = nc - 1;
    for (size_t i = 0; i < oc; i++) {
        if (i + REHASH_AHEAD < oc && old[i + REHASH_AHEAD].key != UINT64_MAX)
            __builtin_prefetch(&c->g[(size_t)kvf_hash64(old[i + REHASH_AHEAD].key) & mask], 1);
        if (old[i].key != UINT64_MAX) c->g[gfind(c, old[i].key)] = old[i];
    }
    gtable_free(old, oc, was_mapped);
}

// Frees bucket i (no block left in it): backward-shift deletion.
static void gdel(sim_bcache *c, size_t i) {
    size_t mask = c->gcap - 1;
    memset(&c->g[i], 0xff, sizeof c->g[i]);
    c->gused--;
    for (size_t j = (i + 1) & mask; c->g[j].key != UINT64_MAX; j = (j + 1) & mask)
        if (may_shift(i, j, (size_t)kvf_hash64(c->g[j].key) & mask, mask)) {
            c->g[i] = c->g[j];
            memset(&c->g[j], 0xff, sizeof c->g[j]);
            i = j;
        }
}

// Empties sub-block j of bucket i (present, expired at a lookup): the run loses it.
static void gdrop(sim_bcache *c, size_t i, unsigned j, uint64_t v) {
    int cls = (int)(v & 7);
    sim_time exp = sub_exp(c, v);
    if (exp != NEVER) runs_take(c, cls, exp);
    sub_set(&c->g[i], j, SUB_EMPTY);
    c->used--;
    c->used_cls[cls]--;
    for (unsigned k = 0; k < SIM_BC_GROUP; k++)
        if (sub_held(c, sub_get(&c->g[i], k))) return;
    gdel(c, i);
}

static void gtouch(sim_bcache *c, sim_bgroup *g, unsigned j, uint64_t v, sim_time now, int cls) {
    KVF_ASSERT(now >= 0 && now < SUB_TOUCHED_MAX);
    int old = (int)(v & 7), k = keep_cls(c, old, cls);
    sim_time exp = sub_exp(c, v);
    if (exp != NEVER) runs_take(c, old, exp);
    if (k != old) {
        c->used_cls[old]--;
        c->used_cls[k]++;
    }
    uint64_t nv = (uint64_t)now << 3 | (uint64_t)k;
    sub_set(g, j, nv);
    if ((exp = sub_exp(c, nv)) != NEVER) runs_push(c, k, exp);
}

// Bucket index and sub-block value of id when present and alive at now (an expired block is
// dropped on the way); SIZE_MAX when not.
static size_t gfind_live(sim_bcache *c, uint64_t id, sim_time now, uint64_t *v) {
    if (!c->used) return SIZE_MAX;
    size_t i = gfind_at(c, SIM_BC_GROUP_KEY(id));
    if (c->g[i].key == UINT64_MAX) return SIZE_MAX;
    unsigned j = (unsigned)(id & (SIM_BC_GROUP - 1));
    *v = sub_get(&c->g[i], j);
    if (!sub_held(c, *v)) return SIZE_MAX;
    if (sub_exp(c, *v) <= now) {
        gdrop(c, i, j, *v);
        c->expired++;
        return SIZE_MAX;
    }
    return i;
}

static void gput(sim_bcache *c, uint64_t id, sim_time now, int cls) {
    KVF_ASSERT(now >= 0 && now < SUB_TOUCHED_MAX);
    size_t i = gfind_at(c, SIM_BC_GROUP_KEY(id));
    unsigned j = (unsigned)(id & (SIM_BC_GROUP - 1));
    sim_bgroup *g = &c->g[i];
    if (g->key != UINT64_MAX) {
        uint64_t v = sub_get(g, j);
        if (sub_held(c, v)) {
            gtouch(c, g, j, v, now, cls);
            return;
        }
    } else {
        memset(g, 0xff, sizeof *g);
        g->key = SIM_BC_GROUP_KEY(id);
        c->gused++;
    }
    uint64_t nv = (uint64_t)now << 3 | (uint64_t)cls;
    sub_set(g, j, nv);
    sim_time exp = sub_exp(c, nv);
    if (exp != NEVER) runs_push(c, cls, exp);
    c->used++;
    c->used_cls[cls]++;
    c->inserted++;
    if (c->used > c->peak) c->peak = c->used;
    if (c->gused * 4 > c->gcap * 3) grebuild(c);
}

static uint64_t gexpire(sim_bcache *c, sim_time now) {
    uint64_t n = 0;
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        struct sim_bruns *q = &c->runs[k];
        uint64_t m = 0;
        while (q->head < q->tail && q->r[q->head].exp <= now)
            m += q->r[q->head++].n;
        c->used_cls[k] -= m;
        n += m;
    }
    c->used -= n;
    c->expired += n;
    if (now > c->purged) c->purged = now;
    return n;
}

// ---- the tier ------------------------------------------------------------------------------
void sim_bcache_init(sim_bcache *c, uint64_t capacity, const int64_t *retention_ns) {
    memset(c, 0, sizeof *c);
    c->capacity = capacity;
    c->retention_ns = retention_ns;
    c->free_rec = SIM_BC_NONE;
    c->memo_key = UINT64_MAX;
    c->next_exp = NEVER;
    if (capacity == UINT64_MAX) {
        c->compact = true;
        c->purged = INT64_MIN;
        gtable_new(c, 1024);
        return;
    }
    // sized up front from the capacity, up to 2^20 blocks (36 MiB): the hash at load <= 1/2
    // for full groups (a trace block's 8 sub-blocks), records for groups of 4 on average
    // (some partly evicted); smaller groups, or a larger capacity (a sized SSD store), grow
    // the tables as they fill, so a short run does not pay for a store it never fills
    uint64_t want = KVF_MIN(capacity, (uint64_t)1 << 20);
    size_t hcap = 16;
    while (hcap < want / 4)
        hcap *= 2;
    halloc(c, hcap);
    recs_grow(c, (size_t)KVF_MAX(want / 4, 1));
}

void sim_bcache_free(sim_bcache *c) {
    if (!c) return;
    free(c->h);
    free(c->recs);
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        free(c->q[k].e);
        free(c->q[k].live);
    }
    gtable_free(c->g, c->gcap, c->gmapped);
    for (int k = 0; k < TRC_CLASS_COUNT; k++)
        free(c->runs[k].r);
    memset(c, 0, sizeof *c);
}

bool sim_bcache_has(sim_bcache *c, uint64_t id, sim_time now) {
    uint64_t v;
    if (c->compact) return gfind_live(c, id, now, &v) != SIZE_MAX;
    return find_live(c, id, now) != SIM_BC_NONE;
}

bool sim_bcache_hit(sim_bcache *c, uint64_t id, sim_time now, int cls) {
    if (c->compact) {
        uint64_t v;
        size_t i = gfind_live(c, id, now, &v);
        if (i == SIZE_MAX) return false;
        gtouch(c, &c->g[i], (unsigned)(id & (SIM_BC_GROUP - 1)), v, now, cls);
        return true;
    }
    uint32_t r = find_live(c, id, now);
    if (r == SIM_BC_NONE) return false;
    touch_block(c, r, (unsigned)(id & (SIM_BC_GROUP - 1)), now, cls);
    return true;
}

void sim_bcache_touch(sim_bcache *c, uint64_t id, sim_time now, int cls) {
    if (!c->used) return;
    if (c->compact) {
        sim_bgroup *g = &c->g[gfind_at(c, SIM_BC_GROUP_KEY(id))];
        unsigned j = (unsigned)(id & (SIM_BC_GROUP - 1));
        if (g->key == UINT64_MAX) return;
        uint64_t v = sub_get(g, j);
        if (sub_held(c, v)) gtouch(c, g, j, v, now, cls);
        return;
    }
    uint32_t r = grec(c, SIM_BC_GROUP_KEY(id));
    unsigned j = (unsigned)(id & (SIM_BC_GROUP - 1));
    if (r != SIM_BC_NONE && c->recs[r].cls[j] != SIM_BC_ABSENT) touch_block(c, r, j, now, cls);
}

bool sim_bcache_put(sim_bcache *c, uint64_t id, sim_time now, int cls, uint64_t *evicted) {
    if (c->capacity == 0) return false;
    KVF_ASSERT(cls >= 0 && cls < TRC_CLASS_COUNT);
    if (c->compact) {
        gput(c, id, now, cls);
        return false;
    }
    return lru_put(c, id, now, cls, evicted);
}

bool sim_bcache_evict_lru(sim_bcache *c, sim_time now, uint64_t *id, int *cls) {
    KVF_ASSERT(!c->compact);
    if (!c->used) return false;
    lru_expire(c, now);
    if (!c->used) return false;
    uint32_t v = lru_victim(c);
    KVF_ASSERT(v != SIM_BC_NONE);
    *id = c->recs[v >> 3].key | (v & 7);
    *cls = c->recs[v >> 3].cls[v & 7];
    block_drop(c, v >> 3, v & 7);
    c->evicted++;
    return true;
}

uint64_t sim_bcache_expire(sim_bcache *c, sim_time now) {
    return c->compact ? gexpire(c, now) : lru_expire(c, now);
}

void sim_bcache_used_at(const sim_bcache *c, sim_time t, uint64_t out[TRC_CLASS_COUNT]) {
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        uint64_t gone = 0;
        if (c->compact) {
            const struct sim_bruns *q = &c->runs[k];
            for (size_t i = q->head; i < q->tail && q->r[i].exp <= t; i++)
                gone += q->r[i].n;
        } else {
            const sim_bqueue *q = &c->q[k];
            for (size_t p = q->head; p < q->tail; p++) {
                if (!q_is_live(q, p)) continue;
                uint32_t e = q->e[p];
                if (!expired_at(c, k, c->recs[e >> 3].touched[e & 7], t)) break;
                gone++;
            }
        }
        out[k] = c->used_cls[k] - gone;
    }
}

size_t sim_bcache_index_bytes(const sim_bcache *c) {
    size_t b = c->hcap * sizeof *c->h + c->recs_cap * sizeof *c->recs + c->gcap * sizeof *c->g;
    for (int k = 0; k < TRC_CLASS_COUNT; k++)
        b += c->q[k].cap * sizeof *c->q[k].e + c->q[k].cap / 64 * sizeof *c->q[k].live +
             c->runs[k].cap * sizeof(sim_brun);
    return b;
}
