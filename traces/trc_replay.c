// traces/trc_replay.c -- a trace's prefix blocks replayed, in arrival order, through a shared
// store with a capacity (LRU) and a retention (TTL): the hit rate such a store reaches.
//
// The requests are loaded once (arrival, input tokens, block ids) and sorted by arrival (ties
// in stream order). A replay walks them: a request's hit is the longest run of its leading
// blocks present and not expired, as tokens, at most input_tokens - 1 (the rule of
// trc_stats_compute, so an unbounded store kept forever reaches ideal_hit_rate exactly). Then
// all its blocks are touched last-to-first, so a prefix outlives its tail, with the request's
// arrival as their time. Because touches come in time order, the least recently used entry is
// also the oldest: eviction for capacity and expiry by retention both take from the LRU end.
// A block found but expired is a miss (and is dropped before the touches re-insert it).
#include <stdlib.h>
#include <string.h>

#include "trc.h"

typedef struct rq {
    int64_t t_ns;
    uint32_t input_tokens;
    uint32_t n_blocks;
    uint64_t first;       // offset into blocks
    uint64_t order;       // stream position (tie break)
} rq;

struct trc_replay {
    rq *rq;
    uint64_t n, cap_rq;
    uint64_t *blocks;
    uint64_t n_blocks, cap_blocks;
    uint64_t distinct;
    uint64_t input_tokens;
    uint32_t block_tokens;
    double span_s;
};

static int cmp_rq(const void *a, const void *b) {
    const rq *x = a, *y = b;
    if (x->t_ns != y->t_ns) return x->t_ns < y->t_ns ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

// ---- an LRU with per-entry time: open-addressing map (linear probing, backward-shift
// deletion) onto a doubly linked list of nodes ---------------------------------------------
typedef struct node {
    uint64_t key;
    int64_t t_ns;
    uint32_t prev, next;  // UINT32_MAX = none
} node;

#define NIL UINT32_MAX

typedef struct lru {
    node *nodes;
    uint32_t n_nodes, cap_nodes, free_head;
    uint32_t head, tail;  // head = most recent
    uint32_t *tab;        // node index + 1, 0 = empty
    size_t tcap;          // power of two
    uint64_t used;
} lru;

static bool lru_init(lru *l, uint64_t max_entries) {
    memset(l, 0, sizeof *l);
    l->cap_nodes = (uint32_t)(max_entries + 1);
    l->nodes = malloc((size_t)l->cap_nodes * sizeof *l->nodes);
    l->tcap = 16;
    while (l->tcap < 2 * (size_t)l->cap_nodes) l->tcap <<= 1;
    l->tab = calloc(l->tcap, sizeof *l->tab);
    l->head = l->tail = l->free_head = NIL;
    return l->nodes && l->tab;
}

static void lru_free(lru *l) {
    free(l->nodes);
    free(l->tab);
}

static size_t lru_slot(const lru *l, uint64_t key) {
    size_t m = l->tcap - 1, h = kvf_hash64(key) & m;
    while (l->tab[h] && l->nodes[l->tab[h] - 1].key != key) h = (h + 1) & m;
    return h;
}

static void unlink_node(lru *l, uint32_t i) {
    node *n = &l->nodes[i];
    if (n->prev != NIL) l->nodes[n->prev].next = n->next; else l->head = n->next;
    if (n->next != NIL) l->nodes[n->next].prev = n->prev; else l->tail = n->prev;
}

static void push_front(lru *l, uint32_t i) {
    node *n = &l->nodes[i];
    n->prev = NIL;
    n->next = l->head;
    if (l->head != NIL) l->nodes[l->head].prev = i;
    l->head = i;
    if (l->tail == NIL) l->tail = i;
}

// Removes the entry at table slot h (backward-shift keeps probe chains intact).
static void lru_remove_slot(lru *l, size_t h) {
    uint32_t i = l->tab[h] - 1;
    unlink_node(l, i);
    l->nodes[i].next = l->free_head;
    l->free_head = i;
    l->used--;
    size_t m = l->tcap - 1, j = h;
    l->tab[h] = 0;
    for (;;) {
        j = (j + 1) & m;
        if (!l->tab[j]) break;
        size_t k = kvf_hash64(l->nodes[l->tab[j] - 1].key) & m;
        // move j back to h when its home k is not cyclically in (h, j]
        if ((j > h && (k <= h || k > j)) || (j < h && (k <= h && k > j))) {
            l->tab[h] = l->tab[j];
            l->tab[j] = 0;
            h = j;
        }
    }
}

static void lru_pop_tail(lru *l) { lru_remove_slot(l, lru_slot(l, l->nodes[l->tail].key)); }

// Inserts or refreshes key at time t, evicting from the tail past capacity.
static void lru_touch(lru *l, uint64_t key, int64_t t, uint64_t capacity) {
    size_t h = lru_slot(l, key);
    if (l->tab[h]) {
        uint32_t i = l->tab[h] - 1;
        l->nodes[i].t_ns = t;
        unlink_node(l, i);
        push_front(l, i);
        return;
    }
    if (capacity && l->used >= capacity) {
        lru_pop_tail(l);
        h = lru_slot(l, key);
    }
    uint32_t i;
    if (l->free_head != NIL) {
        i = l->free_head;
        l->free_head = l->nodes[i].next;
    } else {
        i = l->n_nodes++;
    }
    l->nodes[i].key = key;
    l->nodes[i].t_ns = t;
    push_front(l, i);
    l->tab[h] = i + 1;
    l->used++;
}

// ---- loading ------------------------------------------------------------------------------
kvf_status trc_replay_load(trc_reader *r, trc_replay **out, kvf_err *err) {
    *out = NULL;
    trc_replay *p = calloc(1, sizeof *p);
    if (!p) return kvf_fail(err, KVF_ENOMEM, "trace replay: out of memory");
    p->block_tokens = trc_reader_block_tokens(r);
    trc_request q;
    int rc;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    while ((rc = trc_reader_next(r, &q, err)) == 1) {
        if (p->n == p->cap_rq) {
            uint64_t nc = p->cap_rq ? 2 * p->cap_rq : 1024;
            rq *g = realloc(p->rq, nc * sizeof *g);
            if (!g) goto oom;
            p->rq = g;
            p->cap_rq = nc;
        }
        while (p->n_blocks + q.n_blocks > p->cap_blocks) {
            uint64_t nc = p->cap_blocks ? 2 * p->cap_blocks : 65536;
            uint64_t *g = realloc(p->blocks, nc * sizeof *g);
            if (!g) goto oom;
            p->blocks = g;
            p->cap_blocks = nc;
        }
        if (q.n_blocks) memcpy(p->blocks + p->n_blocks, q.blocks, q.n_blocks * sizeof *q.blocks);
        p->rq[p->n] = (rq){q.arrival_ns, q.input_tokens, q.n_blocks, p->n_blocks, p->n};
        p->n_blocks += q.n_blocks;
        p->input_tokens += q.input_tokens;
        lo = KVF_MIN(lo, q.arrival_ns);
        hi = KVF_MAX(hi, q.arrival_ns);
        p->n++;
    }
    if (rc < 0) {
        trc_replay_free(p);
        return err->code ? err->code : KVF_EPARSE;
    }
    if (p->n == 0) {
        trc_replay_free(p);
        return kvf_fail(err, KVF_EINVAL, "trace replay: the trace holds no requests");
    }
    qsort(p->rq, p->n, sizeof *p->rq, cmp_rq);
    p->span_s = (double)(hi - lo) * 1e-9;
    // distinct blocks: one unbounded pass counts them
    {
        lru l;
        if (!lru_init(&l, p->n_blocks)) {
            lru_free(&l);
            goto oom;
        }
        for (uint64_t i = 0; i < p->n_blocks; i++) lru_touch(&l, p->blocks[i], 0, 0);
        p->distinct = l.used;
        lru_free(&l);
    }
    *out = p;
    return KVF_OK;
oom:
    trc_replay_free(p);
    return kvf_fail(err, KVF_ENOMEM, "trace replay: out of memory");
}

void trc_replay_free(trc_replay *p) {
    if (!p) return;
    free(p->rq);
    free(p->blocks);
    free(p);
}

uint64_t trc_replay_requests(const trc_replay *p) { return p->n; }
uint64_t trc_replay_distinct_blocks(const trc_replay *p) { return p->distinct; }
uint32_t trc_replay_block_tokens(const trc_replay *p) { return p->block_tokens; }
double trc_replay_span_s(const trc_replay *p) { return p->span_s; }

kvf_status trc_replay_hit_rate(const trc_replay *p, uint64_t capacity_blocks, double ttl_s,
                               double *hit_rate, kvf_err *err) {
    uint64_t cap = capacity_blocks && capacity_blocks < p->distinct ? capacity_blocks : 0;
    lru l;
    if (!lru_init(&l, cap ? cap : p->distinct)) {
        lru_free(&l);
        return kvf_fail(err, KVF_ENOMEM, "trace replay: out of memory");
    }
    int64_t ttl = ttl_s > 0 ? (int64_t)(ttl_s * 1e9) : 0;
    uint64_t hit_tokens = 0;
    for (uint64_t i = 0; i < p->n; i++) {
        const rq *q = &p->rq[i];
        const uint64_t *b = p->blocks + q->first;
        if (ttl)   // expire what ran out of retention (the oldest entries sit at the tail)
            while (l.tail != NIL && q->t_ns - l.nodes[l.tail].t_ns > ttl) lru_pop_tail(&l);
        uint64_t k = 0;
        while (k < q->n_blocks && l.tab[lru_slot(&l, b[k])]) k++;
        uint64_t h = k * p->block_tokens;
        if (h > (uint64_t)q->input_tokens - 1) h = q->input_tokens - 1;
        hit_tokens += h;
        for (uint64_t j = q->n_blocks; j-- > 0;) lru_touch(&l, b[j], q->t_ns, cap);
    }
    lru_free(&l);
    *hit_rate = p->input_tokens ? (double)hit_tokens / (double)p->input_tokens : 0.0;
    return KVF_OK;
}
