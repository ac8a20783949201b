// engine/eng_kv.c -- the paged KV cache's bookkeeping: block allocation, reference counts,
// the prefix table (chained block hash -> block) and per-sequence block tables. The KV values
// themselves live in the backend's arena; this file only hands out block ids.
//
// Block states:
//   free    refs == 0, not hashed: on free_stack
//   cached  refs == 0, hashed:     on the LRU list, findable; reclaimed oldest-first
//   used    refs >= 1:             in one or more block tables (hashed or not)
// A block is hashed once it is full and its tokens are known; the hash chains the previous
// block's hash with this block's token ids, so it names the whole prefix, not just the block.
// Only the last block of a sequence is ever written, and it is never shared (shared blocks
// are full), so no copy-on-write is needed.
#include <stdlib.h>
#include <string.h>

#include "eng_int.h"

#define NIL UINT32_MAX

kvf_status eng_kv_init(eng_engine *e, kvf_err *err) {
    uint32_t n = e->nblocks;
    e->blocks = kvf_try_calloc(n, sizeof *e->blocks, err);
    e->free_stack = kvf_try_malloc((size_t)n * sizeof *e->free_stack, err);
    uint32_t nb = 16;
    while (nb < 2 * n)
        nb *= 2;
    e->buckets = kvf_try_malloc((size_t)nb * sizeof *e->buckets, err);
    e->seqs = kvf_try_calloc(e->o.max_seqs, sizeof *e->seqs, err);
    if (!e->blocks || !e->free_stack || !e->buckets || !e->seqs) return KVF_ENOMEM;
    e->bucket_mask = nb - 1;
    for (uint32_t i = 0; i < nb; i++)
        e->buckets[i] = NIL;
    for (uint32_t i = 0; i < n; i++) {
        e->blocks[i].hnext = e->blocks[i].lru_prev = e->blocks[i].lru_next = NIL;
        e->free_stack[i] = n - 1 - i;   // pop gives block 0 first
    }
    e->nfree = n;
    e->lru_head = e->lru_tail = NIL;
    return KVF_OK;
}

void eng_kv_free(eng_engine *e) {
    if (e->seqs)
        for (uint32_t i = 0; i < e->o.max_seqs; i++)
            if (e->seqs[i]) eng_seq_close(e, e->seqs[i]);
    free(e->seqs);
    free(e->blocks);
    free(e->free_stack);
    free(e->buckets);
}

// ---- prefix table and LRU -----------------------------------------------------------------
static uint32_t table_find(const eng_engine *e, uint64_t h) {
    for (uint32_t b = e->buckets[h & e->bucket_mask]; b != NIL; b = e->blocks[b].hnext)
        if (e->blocks[b].hash == h) return b;
    return NIL;
}

static void table_remove(eng_engine *e, uint32_t b) {
    uint32_t *p = &e->buckets[e->blocks[b].hash & e->bucket_mask];
    while (*p != b) {
        KVF_ASSERT(*p != NIL);
        p = &e->blocks[*p].hnext;
    }
    *p = e->blocks[b].hnext;
    e->blocks[b].hnext = NIL;
    e->blocks[b].hashed = false;
}

static void lru_unlink(eng_engine *e, uint32_t b) {
    eng_block *k = &e->blocks[b];
    if (k->lru_prev != NIL)
        e->blocks[k->lru_prev].lru_next = k->lru_next;
    else
        e->lru_head = k->lru_next;
    if (k->lru_next != NIL)
        e->blocks[k->lru_next].lru_prev = k->lru_prev;
    else
        e->lru_tail = k->lru_prev;
    k->lru_prev = k->lru_next = NIL;
    e->ncached--;
}

static void lru_push(eng_engine *e, uint32_t b) {   // newest at the tail
    eng_block *k = &e->blocks[b];
    k->lru_prev = e->lru_tail;
    k->lru_next = NIL;
    if (e->lru_tail != NIL)
        e->blocks[e->lru_tail].lru_next = b;
    else
        e->lru_head = b;
    e->lru_tail = b;
    e->ncached++;
}

static uint32_t block_take(eng_engine *e) {
    uint32_t b;
    if (e->nfree) {
        b = e->free_stack[--e->nfree];
    } else {
        b = e->lru_head;
        KVF_ASSERT(b != NIL);
        lru_unlink(e, b);
        table_remove(e, b);
        e->evictions++;
    }
    e->blocks[b].refs = 1;
    return b;
}

static void block_release(eng_engine *e, uint32_t b) {
    eng_block *k = &e->blocks[b];
    KVF_ASSERT(k->refs > 0);
    if (--k->refs) return;
    if (k->hashed)
        lru_push(e, b);
    else
        e->free_stack[e->nfree++] = b;
}

static uint64_t block_hash(uint64_t prev, const int32_t *tok, uint32_t n) {
    uint64_t h = kvf_hash_combine(prev, 0x6b766665u);   // "kvfe": chain start marker
    for (uint32_t i = 0; i < n; i++)
        h = kvf_hash_combine(h, (uint64_t)(uint32_t)tok[i]);
    return h;
}

// ---- sequences ----------------------------------------------------------------------------
uint32_t eng_kv_blocks_available(const eng_engine *e) {
    return e->nfree + e->ncached;
}

uint32_t eng_kv_blocks_needed(const eng_engine *e, const eng_seq *s, uint32_t n) {
    uint64_t need = ((uint64_t)s->len + n + e->bt - 1) / e->bt;
    return need > s->nblocks ? (uint32_t)(need - s->nblocks) : 0;
}

void eng_kv_stats_get(const eng_engine *e, eng_kv_stats *st) {
    memset(st, 0, sizeof *st);
    st->blocks = e->nblocks;
    st->free = e->nfree;
    st->cached = e->ncached;
    for (uint32_t b = 0; b < e->nblocks; b++) {
        if (e->blocks[b].refs) st->used++;
        if (e->blocks[b].refs > 1) st->shared++;
    }
    st->hit_blocks = e->hit_blocks;
    st->evictions = e->evictions;
}

kvf_status eng_seq_open(eng_engine *e, const int32_t *tokens, uint32_t n, eng_seq **out,
                        uint32_t *cached, kvf_err *err) {
    *out = NULL;
    if (cached) *cached = 0;
    if (n == 0 || n > e->o.max_context)
        return kvf_fail(err, KVF_EINVAL, "sequence of %u tokens: must be 1..max_context (%u)", n,
                        e->o.max_context);
    uint32_t slot = 0;
    while (slot < e->o.max_seqs && e->seqs[slot])
        slot++;
    if (slot == e->o.max_seqs)
        return kvf_fail(err, KVF_ENOMEM, "all %u sequence slots are in use", e->o.max_seqs);
    for (uint32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= e->m.vocab)
            return kvf_fail(err, KVF_EINVAL, "token %u: id %d outside the vocabulary (%u)", i,
                            tokens[i], e->m.vocab);
    eng_seq *s = kvf_calloc(1, sizeof *s);
    s->slot = slot;
    s->table = kvf_malloc((size_t)e->max_blocks * sizeof *s->table);
    s->bhash = kvf_malloc((size_t)e->max_blocks * sizeof *s->bhash);
    s->tok = kvf_malloc((size_t)e->o.max_context * sizeof *s->tok);
    e->seqs[slot] = s;
    e->nseqs_open++;
    // Attach cached full blocks, keeping at least one token to compute.
    uint32_t full = (n - 1) / e->bt;
    uint64_t h = 0;
    for (uint32_t i = 0; i < full; i++) {
        h = block_hash(h, tokens + (size_t)i * e->bt, e->bt);
        uint32_t b = table_find(e, h);
        if (b == NIL) break;
        if (e->blocks[b].refs == 0) lru_unlink(e, b);
        e->blocks[b].refs++;
        s->table[s->nblocks] = b;
        s->bhash[s->nblocks] = h;
        s->nblocks++;
        e->hit_blocks++;
    }
    s->len = s->nblocks * e->bt;
    memcpy(s->tok, tokens, (size_t)s->len * sizeof *tokens);
    if (cached) *cached = s->len;
    *out = s;
    return KVF_OK;
}

void eng_seq_close(eng_engine *e, eng_seq *s) {
    if (!s) return;
    // Release back to front so that the LRU evicts a prefix's tail before its head.
    for (uint32_t i = s->nblocks; i-- > 0;)
        block_release(e, s->table[i]);
    KVF_ASSERT(e->seqs[s->slot] == s);
    e->seqs[s->slot] = NULL;
    e->nseqs_open--;
    free(s->table);
    free(s->bhash);
    free(s->tok);
    free(s);
}

uint32_t eng_seq_len(const eng_seq *s) {
    return s->len;
}

uint32_t eng_seq_block_refs(const eng_engine *e, const eng_seq *s, uint32_t i) {
    return i < s->nblocks ? e->blocks[s->table[i]].refs : 0;
}

uint32_t eng_seq_block_id(const eng_seq *s, uint32_t i) {
    return i < s->nblocks ? s->table[i] : NIL;
}

bool eng_seq_reserve(eng_engine *e, eng_seq *s, uint32_t n) {
    if ((uint64_t)s->len + n > e->o.max_context) return false;
    uint32_t need = eng_kv_blocks_needed(e, s, n);
    if (need > eng_kv_blocks_available(e)) return false;
    for (uint32_t i = 0; i < need; i++) {
        s->table[s->nblocks] = block_take(e);
        s->bhash[s->nblocks] = 0;
        s->nblocks++;
    }
    return true;
}

void eng_seq_commit(eng_engine *e, eng_seq *s, const int32_t *tok, uint32_t n) {
    uint32_t old_full = s->len / e->bt;
    memcpy(s->tok + s->len, tok, (size_t)n * sizeof *tok);
    s->len += n;
    KVF_ASSERT(s->len <= s->nblocks * e->bt);
    uint32_t now_full = s->len / e->bt;
    for (uint32_t i = old_full; i < now_full; i++) {
        uint64_t prev = i ? s->bhash[i - 1] : 0;
        uint64_t h = block_hash(prev, s->tok + (size_t)i * e->bt, e->bt);
        s->bhash[i] = h;
        uint32_t b = s->table[i];
        // The same prefix computed twice at once: keep the first copy findable.
        if (!e->blocks[b].hashed && table_find(e, h) == NIL) {
            e->blocks[b].hash = h;
            e->blocks[b].hashed = true;
            uint32_t *head = &e->buckets[h & e->bucket_mask];
            e->blocks[b].hnext = *head;
            *head = b;
        }
    }
}

void eng_seq_forget(eng_engine *e, eng_seq *s) {
    for (uint32_t i = 0; i < s->nblocks; i++) {
        uint32_t b = s->table[i];
        if (e->blocks[b].hashed && e->blocks[b].refs == 1) table_remove(e, b);
    }
}

void eng_seq_truncate(eng_engine *e, eng_seq *s, uint32_t n) {
    KVF_ASSERT(n <= s->len);
    uint32_t keep = (n + e->bt - 1) / e->bt;
    while (s->nblocks > keep)
        block_release(e, s->table[--s->nblocks]);
    if (n % e->bt && keep) {
        // The last kept block will be rewritten: it must be private and unhashed.
        uint32_t b = s->table[keep - 1];
        KVF_ASSERT(e->blocks[b].refs == 1);
        if (e->blocks[b].hashed) table_remove(e, b);
    }
    s->len = n;
}

kvf_status eng_seq_extend_synthetic(eng_engine *e, eng_seq *s, uint32_t n, uint64_t seed,
                                    kvf_err *err) {
    if (!eng_seq_reserve(e, s, n))
        return kvf_fail(err, KVF_ENOMEM,
                        "KV cache: no room for %u more tokens (%u blocks "
                        "available)",
                        n, eng_kv_blocks_available(e));
    int32_t *tok = kvf_malloc((size_t)(n ? n : 1) * sizeof *tok);
    for (uint32_t i = 0; i < n; i++)
        tok[i] = (int32_t)(eng_mix64(seed * 7919 + s->len + i) % e->m.vocab);
    uint32_t nseg = 0, cap = n / e->bt + 2;
    uint32_t *blk = kvf_malloc(cap * sizeof *blk), *slot = kvf_malloc(cap * sizeof *slot);
    uint32_t *cnt = kvf_malloc(cap * sizeof *cnt);
    for (uint32_t pos = s->len; pos < s->len + n; nseg++) {
        KVF_ASSERT(nseg < cap);
        blk[nseg] = s->table[pos / e->bt];
        slot[nseg] = pos % e->bt;
        cnt[nseg] = KVF_MIN(e->bt - slot[nseg], s->len + n - pos);
        pos += cnt[nseg];
    }
    eng_backend_fill_kv(e, blk, slot, cnt, nseg, seed * 1000003 + s->len);
    free(blk), free(slot), free(cnt);
    eng_seq_commit(e, s, tok, n);
    free(tok);
    return KVF_OK;
}
