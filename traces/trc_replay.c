// traces/trc_replay.c -- a trace's prefix blocks replayed, in arrival order, through a shared
// store with a capacity (LRU) and a retention (TTL): the hit rate such a store reaches.
//
// The requests are loaded once (arrival, input tokens, block ids) and sorted by arrival (ties
// in stream order). A replay walks them: a request's hit is the longest run of its leading
// blocks present and not expired, as tokens, whole blocks short of the whole prompt (the rule of
// trc_stats_compute, so an unbounded store kept forever reaches ideal_hit_rate exactly). Then
// all its blocks are touched last-to-first, so a prefix outlives its tail, with the request's
// arrival as their time. Because touches come in time order, the least recently used entry is
// also the oldest: eviction for capacity and expiry by retention both take from the LRU end.
// A block found but expired is a miss (and is dropped before the touches re-insert it). An
// entry whose age equals the retention is expired (age >= ttl), the rule of the simulator's
// store (sim_kv), so `assess` and `run` agree at the boundary.
// A closed-loop turn's answer blocks (trc_answers: computed by the decode of the turn it waits
// for, part of its own prompt) enter the store as an entry of their own just before the turn,
// at its arrival; such an entry (input_tokens 0) touches blocks and counts no hit.
#include <stdlib.h>
#include <string.h>

#include "trc.h"
#include "trc_int.h"

typedef struct rq {
    int64_t t_ns;
    uint32_t input_tokens;
    uint32_t n_blocks;
    uint64_t first;   // offset into blocks
    uint64_t order;   // 2 x stream position (+1: the request; +0: its answer blocks)
} rq;

struct trc_replay {
    rq *rq;
    uint64_t n, cap_rq;   // entries: requests and answer-block entries
    uint64_t n_req;       // requests
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
    uint32_t prev, next;   // UINT32_MAX = none
} node;

#define NIL UINT32_MAX

typedef struct lru {
    node *nodes;
    uint32_t n_nodes, cap_nodes, free_head;
    uint32_t head, tail;   // head = most recent
    uint32_t *tab;         // node index + 1, 0 = empty
    size_t tcap;           // power of two
    uint64_t used;
} lru;

static bool lru_init(lru *l, uint64_t max_entries) {
    memset(l, 0, sizeof *l);
    l->cap_nodes = (uint32_t)(max_entries + 1);
    l->nodes = malloc((size_t)l->cap_nodes * sizeof *l->nodes);
    l->tcap = 16;
    while (l->tcap < 2 * (size_t)l->cap_nodes)
        l->tcap <<= 1;
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
    while (l->tab[h] && l->nodes[l->tab[h] - 1].key != key)
        h = (h + 1) & m;
    return h;
}

static void unlink_node(lru *l, uint32_t i) {
    node *n = &l->nodes[i];
    if (n->prev != NIL)
        l->nodes[n->prev].next = n->next;
    else
        l->head = n->next;
    if (n->next != NIL)
        l->nodes[n->next].prev = n->prev;
    else
        l->tail = n->prev;
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

static void lru_pop_tail(lru *l) {
    lru_remove_slot(l, lru_slot(l, l->nodes[l->tail].key));
}

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
// Room for n_rq more entries and n_blocks more block ids; false when out of memory.
static bool grow(trc_replay *p, uint64_t n_rq, uint64_t n_blocks) {
    if (p->n + n_rq > p->cap_rq) {
        uint64_t nc = p->cap_rq ? 2 * p->cap_rq : 1024;
        while (nc < p->n + n_rq)
            nc *= 2;
        rq *g = realloc(p->rq, nc * sizeof *g);
        if (!g) return false;
        p->rq = g;
        p->cap_rq = nc;
    }
    if (p->n_blocks + n_blocks > p->cap_blocks) {
        uint64_t nc = p->cap_blocks ? 2 * p->cap_blocks : 65536;
        while (nc < p->n_blocks + n_blocks)
            nc *= 2;
        uint64_t *g = realloc(p->blocks, nc * sizeof *g);
        if (!g) return false;
        p->blocks = g;
        p->cap_blocks = nc;
    }
    return true;
}

kvf_status trc_replay_load(trc_reader *r, trc_replay **out, kvf_err *err) {
    *out = NULL;
    trc_replay *p = calloc(1, sizeof *p);
    if (!p) return kvf_fail(err, KVF_ENOMEM, "trace replay: out of memory");
    p->block_tokens = trc_reader_block_tokens(r);
    trc_request q;
    int rc;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    trc_answers ans = {0};
    while ((rc = trc_reader_next(r, &q, err)) == 1) {
        uint32_t afrom = 0, aupto = 0;
        bool answer = trc_answers_span(&ans, &q, p->block_tokens, &afrom, &aupto);
        // room for the request and its answer entry
        if (!grow(p, 2, (uint64_t)q.n_blocks + (answer ? aupto - afrom : 0))) goto oom;
        if (answer) {
            memcpy(p->blocks + p->n_blocks, q.blocks + afrom, (aupto - afrom) * sizeof *q.blocks);
            p->rq[p->n++] = (rq){q.arrival_ns, 0, aupto - afrom, p->n_blocks, 2 * p->n_req};
            p->n_blocks += aupto - afrom;
        }
        if (!trc_answers_add(&ans, &q)) goto oom;
        if (q.n_blocks) memcpy(p->blocks + p->n_blocks, q.blocks, q.n_blocks * sizeof *q.blocks);
        p->rq[p->n] = (rq){q.arrival_ns, q.input_tokens, q.n_blocks, p->n_blocks, 2 * p->n_req + 1};
        p->n_req++;
        p->n_blocks += q.n_blocks;
        p->input_tokens += q.input_tokens;
        lo = KVF_MIN(lo, q.arrival_ns);
        hi = KVF_MAX(hi, q.arrival_ns);
        p->n++;
    }
    trc_answers_free(&ans);
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
        for (uint64_t i = 0; i < p->n_blocks; i++)
            lru_touch(&l, p->blocks[i], 0, 0);
        p->distinct = l.used;
        lru_free(&l);
    }
    *out = p;
    return KVF_OK;
oom:
    trc_answers_free(&ans);
    trc_replay_free(p);
    return kvf_fail(err, KVF_ENOMEM, "trace replay: out of memory");
}

void trc_replay_free(trc_replay *p) {
    if (!p) return;
    free(p->rq);
    free(p->blocks);
    free(p);
}

uint64_t trc_replay_requests(const trc_replay *p) {
    return p->n_req;
}
uint64_t trc_replay_distinct_blocks(const trc_replay *p) {
    return p->distinct;
}
uint32_t trc_replay_block_tokens(const trc_replay *p) {
    return p->block_tokens;
}
double trc_replay_span_s(const trc_replay *p) {
    return p->span_s;
}

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
            while (l.tail != NIL && q->t_ns - l.nodes[l.tail].t_ns >= ttl)
                lru_pop_tail(&l);
        uint64_t k = 0;
        while (k < q->n_blocks && l.tab[lru_slot(&l, b[k])])
            k++;
        uint64_t h = trc_hit_tokens(k, q->input_tokens, p->block_tokens);
        if (q->input_tokens) hit_tokens += h;   // an answer-block entry counts no hit
        for (uint64_t j = q->n_blocks; j-- > 0;)
            lru_touch(&l, b[j], q->t_ns, cap);
    }
    lru_free(&l);
    *hit_rate = p->input_tokens ? (double)hit_tokens / (double)p->input_tokens : 0.0;
    return KVF_OK;
}

// ---- the whole grid in one pass ---------------------------------------------------------------
// For every block reference, at its request's lookup: its age (time since its last use) and its
// LRU stack distance (distinct blocks used since its last use, from a Fenwick tree over use
// positions that marks each block's latest use). In a store of capacity C with retention T a
// block is present iff it was used before, age < T and distance < C: the blocks used after it
// are younger, so none of them has expired if it has not, and it leaves an LRU of C entries
// exactly when C others have been used since. Each cell's hit is then the leading run of
// present blocks, by the rule of trc_replay_hit_rate.
typedef struct last_use {
    uint64_t key;
    uint64_t pos;   // 1-based use position
    int64_t t_ns;
} last_use;

kvf_status trc_replay_grid(const trc_replay *p, const uint64_t *caps, int nc, const double *ttl_s,
                           int nt, double *hit_rate, kvf_err *err) {
    uint64_t nref = p->n_blocks;
    uint32_t *sd = malloc((nref ? nref : 1) * sizeof *sd);
    int64_t *age = malloc((nref ? nref : 1) * sizeof *age);
    uint32_t *bit = calloc(nref + 2, sizeof *bit);
    size_t tcap = 16;
    while (tcap < 2 * (size_t)p->distinct + 2)
        tcap <<= 1;
    last_use *tab = calloc(tcap, sizeof *tab);   // key 0 is stored with pos 0 = empty
    double *hits = calloc((size_t)nc * (size_t)nt, sizeof *hits);
    if (!sd || !age || !bit || !tab || !hits) {
        free(sd), free(age), free(bit), free(tab), free(hits);
        return kvf_fail(err, KVF_ENOMEM, "trace replay: out of memory");
    }
    uint64_t pos = 0, marked = 0;
    for (uint64_t i = 0; i < p->n; i++) {
        const rq *q = &p->rq[i];
        const uint64_t *b = p->blocks + q->first;
        uint32_t *qsd = sd + q->first;
        int64_t *qage = age + q->first;
        for (uint32_t k = 0; k < q->n_blocks; k++) {
            size_t h = kvf_hash64(b[k]) & (tcap - 1);
            while (tab[h].pos && tab[h].key != b[k])
                h = (h + 1) & (tcap - 1);
            if (!tab[h].pos) {
                qsd[k] = UINT32_MAX;
                qage[k] = INT64_MAX;
                continue;
            }
            uint64_t upto = 0;   // marks at positions <= last use
            for (uint64_t x = tab[h].pos; x; x -= x & (~x + 1))
                upto += bit[x];
            uint64_t d = marked - upto;
            qsd[k] = d >= UINT32_MAX ? UINT32_MAX - 1 : (uint32_t)d;
            qage[k] = q->t_ns - tab[h].t_ns;
        }
        for (uint32_t j = q->n_blocks; j-- > 0;) {   // touches, last block first
            size_t h = kvf_hash64(b[j]) & (tcap - 1);
            while (tab[h].pos && tab[h].key != b[j])
                h = (h + 1) & (tcap - 1);
            if (tab[h].pos) {
                for (uint64_t x = tab[h].pos; x <= nref; x += x & (~x + 1))
                    bit[x]--;
                marked--;
            }
            pos++;
            for (uint64_t x = pos; x <= nref; x += x & (~x + 1))
                bit[x]++;
            marked++;
            tab[h].key = b[j];
            tab[h].pos = pos;
            tab[h].t_ns = q->t_ns;
        }
        for (int c = 0; c < nc && q->input_tokens; c++) {   // answer entries count no hit
            uint64_t cap = caps[c] && caps[c] < p->distinct ? caps[c] : 0;
            for (int t = 0; t < nt; t++) {
                int64_t ttl = ttl_s[t] > 0 ? (int64_t)(ttl_s[t] * 1e9) : INT64_MAX;
                uint32_t k = 0;
                while (k < q->n_blocks && qage[k] != INT64_MAX && qage[k] < ttl &&
                       (!cap || qsd[k] < cap))
                    k++;
                uint64_t hh = trc_hit_tokens(k, q->input_tokens, p->block_tokens);
                hits[(size_t)c * (size_t)nt + (size_t)t] += (double)hh;
            }
        }
    }
    for (size_t z = 0; z < (size_t)nc * (size_t)nt; z++)
        hit_rate[z] = p->input_tokens ? hits[z] / (double)p->input_tokens : 0.0;
    free(sd), free(age), free(bit), free(tab), free(hits);
    return KVF_OK;
}

// ---- answer blocks of closed-loop turns (trc_int.h) ----------------------------------------
bool trc_answers_add(trc_answers *a, const trc_request *q) {
    if (q->id >= (uint64_t)SIZE_MAX / 2) return true;
    if (q->id >= a->cap) {
        size_t nc = a->cap ? a->cap : 1024;
        while (nc <= q->id)
            nc *= 2;
        uint32_t *nb = realloc(a->n_blocks, nc * sizeof *nb);
        if (!nb) return false;
        a->n_blocks = nb;
        uint64_t *l = realloc(a->last, nc * sizeof *l);
        if (!l) return false;
        a->last = l;
        uint64_t *t = realloc(a->tokens, nc * sizeof *t);
        if (!t) return false;
        a->tokens = t;
        memset(a->n_blocks + a->cap, 0, (nc - a->cap) * sizeof *nb);
        a->cap = nc;
    }
    a->n_blocks[q->id] = q->n_blocks;
    a->last[q->id] = q->n_blocks ? q->blocks[q->n_blocks - 1] : 0;
    a->tokens[q->id] = (uint64_t)q->input_tokens + q->output_tokens;
    return true;
}

bool trc_answers_span(const trc_answers *a, const trc_request *q, uint32_t block_tokens,
                      uint32_t *from, uint32_t *upto) {
    if (q->prev_id < 0 || (uint64_t)q->prev_id >= a->cap || !block_tokens) return false;
    uint32_t pn = a->n_blocks[q->prev_id];
    if (!pn || q->n_blocks < pn || q->blocks[pn - 1] != a->last[q->prev_id]) return false;
    uint64_t u = a->tokens[q->prev_id] / block_tokens;
    if (u > q->n_blocks) u = q->n_blocks;
    if (u <= pn) return false;
    *from = pn;
    *upto = (uint32_t)u;
    return true;
}

void trc_answers_free(trc_answers *a) {
    free(a->n_blocks);
    free(a->last);
    free(a->tokens);
    memset(a, 0, sizeof *a);
}
