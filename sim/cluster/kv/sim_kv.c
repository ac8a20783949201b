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

// ---- LRU layout ------------------------------------------------------------------------------
static size_t hfind(const sim_bcache *c, uint64_t id) {
    size_t mask = c->hcap - 1, i = sim_bcache_home_(c, id);
    while (c->h[i].val != SIM_BC_NONE && c->h[i].key != id)
        i = (i + 1) & mask;
    return i;
}

static void halloc(sim_bcache *c, size_t hcap) {
    c->hcap = hcap;
    c->h = kvf_malloc(c->hcap * sizeof *c->h);
    memset(c->h, 0xff, c->hcap * sizeof *c->h);
}

static void hrehash(sim_bcache *c) {
    struct sim_bentry *old = c->h;
    size_t oc = c->hcap;
    halloc(c, oc * 2);
    for (size_t i = 0; i < oc; i++)
        if (old[i].val != SIM_BC_NONE) c->h[hfind(c, old[i].key)] = old[i];
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
        if (may_shift(i, j, sim_bcache_home_(c, c->h[j].key), mask)) {
            c->h[i] = c->h[j];
            c->h[j].val = SIM_BC_NONE;
            i = j;
        }
}

static void unlink_slot(sim_bcache *c, uint32_t s) {
    sim_bslot *e = &c->slots[s];
    if (e->prev != SIM_BC_NONE)
        c->slots[e->prev].next = e->next;
    else
        c->head[e->cls] = e->next;
    if (e->next != SIM_BC_NONE)
        c->slots[e->next].prev = e->prev;
    else
        c->tail[e->cls] = e->prev;
}

static void push_head(sim_bcache *c, uint32_t s) {
    sim_bslot *e = &c->slots[s];
    e->prev = SIM_BC_NONE;
    e->next = c->head[e->cls];
    if (e->next != SIM_BC_NONE)
        c->slots[e->next].prev = s;
    else
        c->tail[e->cls] = s;
    c->head[e->cls] = s;
}

static void drop(sim_bcache *c, uint32_t s) {
    unlink_slot(c, s);
    hdel(c, hfind(c, c->slots[s].id));
    c->slots[s].next = c->free_head;
    c->free_head = s;
    c->used--;
    c->used_cls[c->slots[s].cls]--;
}

static bool expired_at(const sim_bcache *c, const sim_bslot *e, sim_time now) {
    int64_t r = retention(c, e->cls);
    return r > 0 && now - e->touched >= r;
}

// The slot holding id when present and alive at now, else SIM_BC_NONE (an expired entry is
// dropped on the way).
static uint32_t find_live(sim_bcache *c, uint64_t id, sim_time now) {
    if (!c->used) return SIM_BC_NONE;
    uint32_t s = c->h[hfind(c, id)].val;
    if (s != SIM_BC_NONE && expired_at(c, &c->slots[s], now)) {
        drop(c, s);
        c->expired++;
        return SIM_BC_NONE;
    }
    return s;
}

// The longest-lived class that touched a block keeps it.
static int keep_cls(const sim_bcache *c, int old, int cls) {
    if (!c->retention_ns || cls == old) return old;
    int64_t a = c->retention_ns[cls], b = c->retention_ns[old];
    return a <= 0 || (b > 0 && a > b) ? cls : old;
}

static void touch_slot(sim_bcache *c, uint32_t s, sim_time now, int cls) {
    unlink_slot(c, s);
    sim_bslot *e = &c->slots[s];
    e->touched = now;
    int k = keep_cls(c, e->cls, cls);
    if (k != e->cls) {
        c->used_cls[e->cls]--;
        c->used_cls[k]++;
        e->cls = (uint8_t)k;
    }
    push_head(c, s);
}

static uint64_t lru_expire(sim_bcache *c, sim_time now) {
    uint64_t n = 0;
    for (int k = 0; k < TRC_CLASS_COUNT; k++)
        while (c->tail[k] != SIM_BC_NONE && expired_at(c, &c->slots[c->tail[k]], now)) {
            drop(c, c->tail[k]);
            n++;
        }
    c->expired += n;
    return n;
}

static bool lru_put(sim_bcache *c, uint64_t id, sim_time now, int cls, uint64_t *evicted) {
    size_t i = hfind(c, id);
    if (c->h[i].val != SIM_BC_NONE) {
        touch_slot(c, c->h[i].val, now, cls);
        return false;
    }
    bool ev = false;
    if (c->used >= c->capacity) {
        lru_expire(c, now);
        if (c->used >= c->capacity) {
            // LRU victim: the least recently touched of the class tails
            uint32_t victim = SIM_BC_NONE;
            for (int k = 0; k < TRC_CLASS_COUNT; k++) {
                uint32_t t = c->tail[k];
                if (t != SIM_BC_NONE &&
                    (victim == SIM_BC_NONE || c->slots[t].touched < c->slots[victim].touched))
                    victim = t;
            }
            KVF_ASSERT(victim != SIM_BC_NONE);
            if (evicted) *evicted = c->slots[victim].id;
            drop(c, victim);
            c->evicted++;
            ev = true;
        }
        i = hfind(c, id);
    }
    uint32_t s;
    if (c->free_head != SIM_BC_NONE) {
        s = c->free_head;
        c->free_head = c->slots[s].next;
    } else {
        kvf_grow((void **)&c->slots, &c->slots_cap, c->nslots + 1, sizeof *c->slots);
        s = (uint32_t)c->nslots++;
    }
    c->slots[s] = (sim_bslot){.id = id, .touched = now, .cls = (uint8_t)cls};
    push_head(c, s);
    c->h[i].key = id;
    c->h[i].val = s;
    c->used++;
    c->used_cls[cls]++;
    c->inserted++;
    if (c->used > c->peak) c->peak = c->used;
    if (c->used * 2 > c->hcap) hrehash(c);
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

static sim_bgroup *galloc(size_t n) {
    sim_bgroup *g = kvf_aligned_malloc(64, n * sizeof *g);
    memset(g, 0xff, n * sizeof *g);
    return g;
}

static size_t gfind(const sim_bcache *c, uint64_t key) {
    size_t mask = c->gcap - 1, i = (size_t)kvf_hash64(key) & mask;
    while (c->g[i].key != UINT64_MAX && c->g[i].key != key)
        i = (i + 1) & mask;
    return i;
}

// Rebuilds the table without the buckets that hold no present block, doubling it only when
// the live buckets need the room (load <= 1/2 after the rebuild).
static void grebuild(sim_bcache *c) {
    sim_bgroup *old = c->g;
    size_t oc = c->gcap, live = 0;
    for (size_t i = 0; i < oc; i++) {
        if (old[i].key == UINT64_MAX) continue;
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
    c->g = galloc(nc);
    c->gcap = nc;
    c->gused = live;
    for (size_t i = 0; i < oc; i++)
        if (old[i].key != UINT64_MAX) c->g[gfind(c, old[i].key)] = old[i];
    free(old);
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
    size_t i = gfind(c, SIM_BC_GROUP_KEY(id));
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
    size_t i = gfind(c, SIM_BC_GROUP_KEY(id));
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
    c->free_head = SIM_BC_NONE;
    for (int k = 0; k < TRC_CLASS_COUNT; k++)
        c->head[k] = c->tail[k] = SIM_BC_NONE;
    if (capacity == UINT64_MAX) {
        c->compact = true;
        c->purged = INT64_MIN;
        c->gcap = 1024;
        c->g = galloc(c->gcap);
        return;
    }
    // sized up front: a hash at load <= 1/2 and every slot the capacity can use, up to 2^20
    // blocks (64 MiB); a larger capacity (a sized SSD store) grows as it fills, so a short run
    // does not pay for a store it never fills
    uint64_t want = KVF_MIN(capacity, (uint64_t)1 << 20);
    size_t hcap = 16;
    while (hcap < 2 * want)
        hcap *= 2;
    halloc(c, hcap);
    if (want) kvf_grow((void **)&c->slots, &c->slots_cap, (size_t)want, sizeof *c->slots);
}

void sim_bcache_free(sim_bcache *c) {
    if (!c) return;
    free(c->h);
    free(c->slots);
    free(c->g);
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
    uint32_t s = find_live(c, id, now);
    if (s == SIM_BC_NONE) return false;
    touch_slot(c, s, now, cls);
    return true;
}

void sim_bcache_touch(sim_bcache *c, uint64_t id, sim_time now, int cls) {
    if (!c->used) return;
    if (c->compact) {
        sim_bgroup *g = &c->g[gfind(c, SIM_BC_GROUP_KEY(id))];
        unsigned j = (unsigned)(id & (SIM_BC_GROUP - 1));
        if (g->key == UINT64_MAX) return;
        uint64_t v = sub_get(g, j);
        if (sub_held(c, v)) gtouch(c, g, j, v, now, cls);
        return;
    }
    size_t i = hfind(c, id);
    if (c->h[i].val != SIM_BC_NONE) touch_slot(c, c->h[i].val, now, cls);
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
    uint32_t victim = SIM_BC_NONE;
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        uint32_t t = c->tail[k];
        if (t != SIM_BC_NONE &&
            (victim == SIM_BC_NONE || c->slots[t].touched < c->slots[victim].touched))
            victim = t;
    }
    KVF_ASSERT(victim != SIM_BC_NONE);
    *id = c->slots[victim].id;
    *cls = c->slots[victim].cls;
    drop(c, victim);
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
            for (uint32_t s = c->tail[k]; s != SIM_BC_NONE && expired_at(c, &c->slots[s], t);
                 s = c->slots[s].prev)
                gone++;
        }
        out[k] = c->used_cls[k] - gone;
    }
}

size_t sim_bcache_index_bytes(const sim_bcache *c) {
    size_t b = c->hcap * sizeof *c->h + c->slots_cap * sizeof *c->slots + c->gcap * sizeof *c->g;
    for (int k = 0; k < TRC_CLASS_COUNT; k++)
        b += c->runs[k].cap * sizeof(sim_brun);
    return b;
}
