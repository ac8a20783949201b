// tests/helpers/kv_ref.c -- the reference block index (see kv_ref.h).
#include "kv_ref.h"

#include <stdlib.h>
#include <string.h>

void kvt_refcache_init(kvt_refcache *c, uint64_t capacity, const int64_t *retention_ns) {
    memset(c, 0, sizeof *c);
    c->capacity = capacity;
    c->retention_ns = retention_ns;
    c->hcap = 1024;
    c->h = kvf_malloc(c->hcap * sizeof *c->h);
    memset(c->h, 0xff, c->hcap * sizeof *c->h);
    c->free_head = KVT_REF_NONE;
    for (int k = 0; k < TRC_CLASS_COUNT; k++)
        c->head[k] = c->tail[k] = KVT_REF_NONE;
}

void kvt_refcache_free(kvt_refcache *c) {
    if (!c) return;
    free(c->h);
    free(c->slots);
    memset(c, 0, sizeof *c);
}

static size_t hfind(const kvt_refcache *c, uint64_t id) {
    size_t mask = c->hcap - 1, i = (size_t)kvf_hash64(id) & mask;
    while (c->h[i].val != KVT_REF_NONE && c->h[i].key != id)
        i = (i + 1) & mask;
    return i;
}

static void hrehash(kvt_refcache *c) {
    struct kvt_refentry *old = c->h;
    size_t oc = c->hcap;
    c->hcap *= 2;
    c->h = kvf_malloc(c->hcap * sizeof *c->h);
    memset(c->h, 0xff, c->hcap * sizeof *c->h);
    for (size_t i = 0; i < oc; i++)
        if (old[i].val != KVT_REF_NONE) c->h[hfind(c, old[i].key)] = old[i];
    free(old);
}

// Backward-shift deletion at hash position i.
static void hdel(kvt_refcache *c, size_t i) {
    size_t mask = c->hcap - 1;
    c->h[i].val = KVT_REF_NONE;
    for (size_t j = (i + 1) & mask; c->h[j].val != KVT_REF_NONE; j = (j + 1) & mask) {
        struct kvt_refentry e = c->h[j];
        c->h[j].val = KVT_REF_NONE;
        c->h[hfind(c, e.key)] = e;
    }
}

static void unlink_slot(kvt_refcache *c, uint32_t s) {
    kvt_refslot *e = &c->slots[s];
    if (e->prev != KVT_REF_NONE)
        c->slots[e->prev].next = e->next;
    else
        c->head[e->cls] = e->next;
    if (e->next != KVT_REF_NONE)
        c->slots[e->next].prev = e->prev;
    else
        c->tail[e->cls] = e->prev;
}

static void push_head(kvt_refcache *c, uint32_t s) {
    kvt_refslot *e = &c->slots[s];
    e->prev = KVT_REF_NONE;
    e->next = c->head[e->cls];
    if (e->next != KVT_REF_NONE)
        c->slots[e->next].prev = s;
    else
        c->tail[e->cls] = s;
    c->head[e->cls] = s;
}

static void drop(kvt_refcache *c, uint32_t s) {
    unlink_slot(c, s);
    hdel(c, hfind(c, c->slots[s].id));
    c->slots[s].next = c->free_head;
    c->free_head = s;
    c->used--;
}

static bool expired_at(const kvt_refcache *c, const kvt_refslot *e, sim_time now) {
    if (!c->retention_ns) return false;
    int64_t r = c->retention_ns[e->cls];
    return r > 0 && now - e->touched >= r;
}

// The slot holding id when present and alive at now, else KVT_REF_NONE (an expired entry is
// dropped on the way).
static uint32_t find_live(kvt_refcache *c, uint64_t id, sim_time now) {
    if (!c->used) return KVT_REF_NONE;
    uint32_t s = c->h[hfind(c, id)].val;
    if (s != KVT_REF_NONE && expired_at(c, &c->slots[s], now)) {
        drop(c, s);
        c->expired++;
        return KVT_REF_NONE;
    }
    return s;
}

bool kvt_refcache_has(kvt_refcache *c, uint64_t id, sim_time now) {
    return find_live(c, id, now) != KVT_REF_NONE;
}

static void touch_slot(kvt_refcache *c, uint32_t s, sim_time now, int cls) {
    unlink_slot(c, s);
    c->slots[s].touched = now;
    // the longest-lived class that touched a block keeps it
    if (c->retention_ns && cls != c->slots[s].cls) {
        int64_t a = c->retention_ns[cls], b = c->retention_ns[c->slots[s].cls];
        if (a <= 0 || (b > 0 && a > b)) c->slots[s].cls = (uint8_t)cls;
    }
    push_head(c, s);
}

void kvt_refcache_touch(kvt_refcache *c, uint64_t id, sim_time now, int cls) {
    if (!c->used) return;
    size_t i = hfind(c, id);
    if (c->h[i].val != KVT_REF_NONE) touch_slot(c, c->h[i].val, now, cls);
}

bool kvt_refcache_hit(kvt_refcache *c, uint64_t id, sim_time now, int cls) {
    uint32_t s = find_live(c, id, now);
    if (s == KVT_REF_NONE) return false;
    touch_slot(c, s, now, cls);
    return true;
}

uint64_t kvt_refcache_expire(kvt_refcache *c, sim_time now) {
    uint64_t n = 0;
    for (int k = 0; k < TRC_CLASS_COUNT; k++)
        while (c->tail[k] != KVT_REF_NONE && expired_at(c, &c->slots[c->tail[k]], now)) {
            drop(c, c->tail[k]);
            n++;
        }
    c->expired += n;
    return n;
}

// The LRU victim: the least recently touched of the class tails (the lower class on ties).
static uint32_t lru_victim(const kvt_refcache *c) {
    uint32_t victim = KVT_REF_NONE;
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        uint32_t t = c->tail[k];
        if (t != KVT_REF_NONE &&
            (victim == KVT_REF_NONE || c->slots[t].touched < c->slots[victim].touched))
            victim = t;
    }
    KVF_ASSERT(victim != KVT_REF_NONE);
    return victim;
}

bool kvt_refcache_put(kvt_refcache *c, uint64_t id, sim_time now, int cls, uint64_t *evicted) {
    if (c->capacity == 0) return false;
    size_t i = hfind(c, id);
    if (c->h[i].val != KVT_REF_NONE) {
        kvt_refcache_touch(c, id, now, cls);
        return false;
    }
    bool ev = false;
    if (c->used >= c->capacity) {
        kvt_refcache_expire(c, now);
        if (c->used >= c->capacity) {
            uint32_t victim = lru_victim(c);
            if (evicted) *evicted = c->slots[victim].id;
            drop(c, victim);
            c->evicted++;
            ev = true;
        }
        i = hfind(c, id);
    }
    uint32_t s;
    if (c->free_head != KVT_REF_NONE) {
        s = c->free_head;
        c->free_head = c->slots[s].next;
    } else {
        kvf_grow((void **)&c->slots, &c->slots_cap, c->nslots + 1, sizeof *c->slots);
        s = (uint32_t)c->nslots++;
    }
    c->slots[s] = (kvt_refslot){.id = id, .touched = now, .cls = (uint8_t)cls};
    push_head(c, s);
    c->h[i].key = id;
    c->h[i].val = s;
    c->used++;
    c->inserted++;
    if (c->used > c->peak) c->peak = c->used;
    if (c->used * 2 > c->hcap) hrehash(c);
    return ev;
}

bool kvt_refcache_evict_lru(kvt_refcache *c, sim_time now, uint64_t *id, int *cls) {
    if (!c->used) return false;
    kvt_refcache_expire(c, now);
    if (!c->used) return false;
    uint32_t victim = lru_victim(c);
    *id = c->slots[victim].id;
    *cls = c->slots[victim].cls;
    drop(c, victim);
    c->evicted++;
    return true;
}
