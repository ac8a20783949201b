// traces/trc_stats.c -- trace statistics in one pass in arrival order: counts, span, rate,
// burstiness, length percentiles, and prefix reuse (unbounded and LRU caches of given sizes).
//
// Memory: a reader not in arrival order (sessions, canonical) is held whole and sorted.
// Lengths go into a fixed sketch (exact values for the first 65,536 requests, a log-linear
// histogram always; percentiles come from the exact values while they suffice).
// The ideal cache is an open-addressing set of distinct block ids (grows with distinct
// blocks, the one thing an exact answer must remember); the LRU sizes share one recency
// stack bounded by the largest capacity (24 bytes per cached block).
//
// Histogram layout (values v < 2^32): v < 2048 -> bucket v (exact); otherwise with
// e = floor(log2 v) >= 11 -> bucket 2048 + (e - 11) * 1024 + (v >> (e - 10) & 1023), i.e.
// 1024 buckets per power of two, relative width < 0.1 %; a bucket reports its midpoint.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trc_int.h"

#define EXACT_MAX 65536
#define HIST_N (2048 + 21 * 1024)

typedef struct sketch {
    uint32_t *exact;
    size_t n_exact;
    uint64_t *hist;
    uint64_t n, max;
    double sum;
} sketch;

static size_t hist_bucket(uint32_t v) {
    if (v < 2048) return v;
    int e = 31 - __builtin_clz(v);
    return 2048 + (size_t)(e - 11) * 1024 + ((v >> (e - 10)) & 1023);
}

static double hist_value(size_t b) {
    if (b < 2048) return (double)b;
    size_t e = (b - 2048) / 1024 + 11, sub = (b - 2048) % 1024;
    double lo = (double)((1024 + sub) << (e - 10)), w = (double)(1ULL << (e - 10));
    return lo + (w - 1) / 2;
}

static void sketch_add(sketch *s, uint32_t v) {
    if (s->n_exact < EXACT_MAX && s->n == s->n_exact) s->exact[s->n_exact++] = v;
    s->hist[hist_bucket(v)]++;
    s->n++;
    s->sum += v;
    if (v > s->max) s->max = v;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

// k-th order statistic (0-based) from the histogram.
static double hist_order(const sketch *s, uint64_t k) {
    uint64_t c = 0;
    for (size_t b = 0; b < HIST_N; b++) {
        c += s->hist[b];
        if (c > k) return hist_value(b);
    }
    return (double)s->max;
}

// Percentiles as kvf_percentile_sorted defines them (linear between order statistics).
static void sketch_finish(sketch *s, trc_len_stats *o) {
    memset(o, 0, sizeof *o);
    if (!s->n) return;
    o->mean = s->sum / (double)s->n;
    o->max = s->max;
    o->total = (uint64_t)s->sum;
    const double ps[3] = {50, 90, 99};
    double *dst[3] = {&o->p50, &o->p90, &o->p99};
    bool exact = s->n == s->n_exact;
    if (exact) qsort(s->exact, s->n_exact, sizeof *s->exact, cmp_u32);
    for (int i = 0; i < 3; i++) {
        double pos = ps[i] / 100.0 * (double)(s->n - 1);
        uint64_t k = (uint64_t)pos;
        double f = pos - (double)k;
        double a, b;
        if (exact) {
            a = s->exact[k];
            b = k + 1 < s->n ? s->exact[k + 1] : a;
        } else {
            a = hist_order(s, k);
            b = k + 1 < s->n ? hist_order(s, k + 1) : a;
        }
        *dst[i] = a * (1 - f) + b * f;
    }
}

// ---- block id set (ideal cache) -----------------------------------------------------------
typedef struct idset {
    uint64_t *keys;   // 0 = empty; id 0 is tracked by has_zero
    size_t cap, n;
    bool has_zero;
} idset;

static bool idset_has(const idset *s, uint64_t k) {
    if (!k) return s->has_zero;
    if (!s->cap) return false;
    size_t h = kvf_hash64(k) & (s->cap - 1);
    while (s->keys[h]) {
        if (s->keys[h] == k) return true;
        h = (h + 1) & (s->cap - 1);
    }
    return false;
}

static void idset_add(idset *s, uint64_t k) {
    if (!k) {
        s->n += !s->has_zero;
        s->has_zero = true;
        return;
    }
    if ((s->n + 1) * 2 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 1 << 16;
        uint64_t *nk = kvf_calloc(nc, sizeof *nk);
        for (size_t i = 0; i < s->cap; i++) {
            uint64_t x = s->keys[i];
            if (!x) continue;
            size_t h = kvf_hash64(x) & (nc - 1);
            while (nk[h])
                h = (h + 1) & (nc - 1);
            nk[h] = x;
        }
        free(s->keys);
        s->keys = nk;
        s->cap = nc;
    }
    size_t h = kvf_hash64(k) & (s->cap - 1);
    while (s->keys[h]) {
        if (s->keys[h] == k) return;
        h = (h + 1) & (s->cap - 1);
    }
    s->keys[h] = k;
    s->n++;
}

// ---- LRU caches of several sizes in one stack -------------------------------------------
// LRU has the inclusion property: a cache of C blocks holds exactly the C most recent
// distinct blocks. So one recency list serves every size: it is cut into segments
// (segment j holds ranks [C_{j-1}, C_j) for the sizes sorted ascending) and every entry
// knows its segment. A block is in cache j iff its segment <= j. Moving an entry to the
// front pushes the tail entry of each segment above it one segment down (O(sizes)); the
// last segment's overflow is evicted. Entries live in a dense array; a linear-probing table
// of (id, entry) slots (backward-shift deletion, no tombstones) maps ids to entries.
//
//   head                                                           tail
//   [ seg 0: C_0 ][ seg 1: C_1 - C_0 ][ ... ][ seg S-1 ]  -> evicted
#define NIL UINT32_MAX

typedef struct lru_ent {
    uint64_t key;
    uint32_t prev, next;   // towards the head (more recent) / the tail
    uint32_t seg;
} lru_ent;

typedef struct lru_slot {
    uint64_t key;   // the id beside its entry index: a probe reads one line, not two
    uint32_t idx;   // entry index, NIL = empty
} lru_slot;

typedef struct lru {
    uint32_t nseg;
    uint64_t segcap[TRC_STATS_MAX_SIZES];    // entries per segment
    uint64_t segn[TRC_STATS_MAX_SIZES];      // entries now
    uint32_t segtail[TRC_STATS_MAX_SIZES];   // tail-most entry of the segment, NIL if empty
    uint64_t capacity;                       // sum of segcap
    lru_ent *e;
    size_t n, cap_ent;
    uint32_t head, tail;
    lru_slot *tab;
    size_t tcap;
} lru;

static size_t lru_find_slot(const lru *c, uint64_t k) {
    size_t h = kvf_hash64(k) & (c->tcap - 1);
    while (c->tab[h].idx != NIL && c->tab[h].key != k)
        h = (h + 1) & (c->tcap - 1);
    return h;
}

static void lru_rehash(lru *c, size_t ncap) {
    free(c->tab);
    c->tab = kvf_malloc(ncap * sizeof *c->tab);
    memset(c->tab, 0xff, ncap * sizeof *c->tab);
    c->tcap = ncap;
    for (uint32_t i = c->head; i != NIL; i = c->e[i].next)
        c->tab[lru_find_slot(c, c->e[i].key)] = (lru_slot){c->e[i].key, i};
}

static void lru_table_delete(lru *c, size_t slot) {
    size_t i = slot, m = c->tcap - 1;
    c->tab[i].idx = NIL;
    for (size_t j = (i + 1) & m; c->tab[j].idx != NIL; j = (j + 1) & m) {
        size_t h = kvf_hash64(c->tab[j].key) & m;
        // move j back into the hole at i unless its home h lies in (i, j]
        bool between = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (!between) {
            c->tab[i] = c->tab[j];
            c->tab[j].idx = NIL;
            i = j;
        }
    }
}

// Unlinks entry i from the list and from its segment's count.
static void lru_unlink(lru *c, uint32_t i) {
    lru_ent *x = &c->e[i];
    uint32_t sg = x->seg;
    if (c->segtail[sg] == i)
        c->segtail[sg] = x->prev != NIL && c->e[x->prev].seg == sg ? x->prev : NIL;
    c->segn[sg]--;
    if (x->prev != NIL)
        c->e[x->prev].next = x->next;
    else
        c->head = x->next;
    if (x->next != NIL)
        c->e[x->next].prev = x->prev;
    else
        c->tail = x->prev;
}

// Puts entry i at the head (segment 0) and pushes overflow down the segments; an overflow of
// the last segment is evicted.
static void lru_push_front(lru *c, uint32_t i) {
    lru_ent *x = &c->e[i];
    x->prev = NIL;
    x->next = c->head;
    if (c->head != NIL) c->e[c->head].prev = i;
    c->head = i;
    if (c->tail == NIL) c->tail = i;
    x->seg = 0;
    if (c->segtail[0] == NIL) c->segtail[0] = i;
    c->segn[0]++;
    for (uint32_t j = 0; j < c->nseg && c->segn[j] > c->segcap[j]; j++) {
        uint32_t t = c->segtail[j];   // moves from segment j to j + 1 (or out)
        c->segtail[j] = c->segn[j] > 1 ? c->e[t].prev : NIL;
        c->segn[j]--;
        if (j + 1 == c->nseg) {
            // evict: t is the list tail
            lru_ent *y = &c->e[t];
            if (y->prev != NIL)
                c->e[y->prev].next = NIL;
            else
                c->head = NIL;
            c->tail = y->prev;
            lru_table_delete(c, lru_find_slot(c, y->key));
            y->key = 0;
            y->seg = UINT32_MAX;   // free; lru_touch hands it to the next insert
            y->next = y->prev = NIL;
            c->n--;
            break;
        }
        c->e[t].seg = j + 1;
        if (c->segtail[j + 1] == NIL) c->segtail[j + 1] = t;
        c->segn[j + 1]++;
    }
}

static uint32_t lru_get(const lru *c, uint64_t k) {
    return c->tcap ? c->tab[lru_find_slot(c, k)].idx : NIL;
}

// Makes k the most recent entry; idx is a hint from lru_get (NIL = unknown).
static void lru_touch(lru *c, uint64_t k, uint32_t *free_slot, uint32_t idx) {
    if (!c->capacity) return;
    if (idx == NIL || idx >= c->cap_ent || c->e[idx].seg == UINT32_MAX || c->e[idx].key != k) {
        idx = lru_get(c, k);
    }
    if (idx != NIL) {
        if (c->head != idx) {
            lru_unlink(c, idx);
            lru_push_front(c, idx);
        }
        return;
    }
    if ((c->n + 1) * 2 > c->tcap) lru_rehash(c, c->tcap ? c->tcap * 2 : 1024);
    uint32_t i;
    if (*free_slot != NIL) {
        i = *free_slot;
        *free_slot = NIL;
    } else {
        if (c->n + 1 > c->cap_ent) kvf_grow((void **)&c->e, &c->cap_ent, c->n + 1, sizeof *c->e);
        i = (uint32_t)c->n;
    }
    c->n++;
    c->e[i].key = k;
    c->tab[lru_find_slot(c, k)] = (lru_slot){k, i};
    uint32_t before_tail = c->tail;
    lru_push_front(c, i);
    // an eviction frees the old tail's entry (at most one per insert)
    if (before_tail != NIL && before_tail != i && c->e[before_tail].seg == UINT32_MAX)
        *free_slot = before_tail;
}

static void lru_free(lru *c) {
    free(c->e);
    free(c->tab);
}

// ---- arrival order ---------------------------------------------------------------------------
// The requests in arrival order as recorded: the reader's own order where it is sorted; else
// (a sessions trace, one session after another, or a canonical file, which trace convert
// writes in the same order) every request read first and sorted by arrival time, ties in file
// order, so that the LRU sizes see the sessions interleaved as they arrive, not each one alone.
typedef struct ordered {
    trc_reader *r;
    bool buffered;
    trc_request *q;   // buffered requests (blocks as offsets into blk)
    size_t *off;
    uint64_t *blk;
    uint32_t *idx;   // their arrival order
    size_t n, next;
} ordered;

static const trc_request *cmp_base;
static int cmp_arrival(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    int64_t tx = cmp_base[x].arrival_ns, ty = cmp_base[y].arrival_ns;
    return tx < ty ? -1 : tx > ty ? 1 : (x > y) - (x < y);
}

static int ordered_open(ordered *o, trc_reader *r, kvf_err *err) {
    memset(o, 0, sizeof *o);
    o->r = r;
    if (trc_reader_in_arrival_order(r)) return 1;
    o->buffered = true;
    size_t cap = 0, capb = 0, nb = 0;
    trc_request q;
    int rc;
    while ((rc = trc_reader_next(r, &q, err)) == 1) {
        if (o->n == cap) {
            size_t c2 = cap;
            kvf_grow((void **)&o->q, &cap, o->n + 1, sizeof *o->q);
            kvf_grow((void **)&o->off, &c2, o->n + 1, sizeof *o->off);
        }
        if (nb + q.n_blocks > capb)
            kvf_grow((void **)&o->blk, &capb, nb + q.n_blocks, sizeof *o->blk);
        if (q.n_blocks) memcpy(o->blk + nb, q.blocks, q.n_blocks * sizeof *o->blk);
        o->off[o->n] = nb;
        nb += q.n_blocks;
        q.blocks = NULL;
        o->q[o->n++] = q;
    }
    if (rc < 0) return rc;
    o->idx = kvf_malloc((o->n ? o->n : 1) * sizeof *o->idx);
    for (size_t i = 0; i < o->n; i++)
        o->idx[i] = (uint32_t)i;
    cmp_base = o->q;
    qsort(o->idx, o->n, sizeof *o->idx, cmp_arrival);
    return 1;
}

static int ordered_next(ordered *o, trc_request *q, kvf_err *err) {
    if (!o->buffered) return trc_reader_next(o->r, q, err);
    if (o->next == o->n) return 0;
    uint32_t i = o->idx[o->next++];
    *q = o->q[i];
    q->blocks = o->blk ? o->blk + o->off[i] : NULL;   // no request had blocks: none held
    return 1;
}

static void ordered_free(ordered *o) {
    free(o->q);
    free(o->off);
    free(o->blk);
    free(o->idx);
}

// ---- the pass -------------------------------------------------------------------------------
kvf_status trc_stats_compute(trc_reader *r, const double *cache_tokens, uint32_t n_sizes,
                             trc_stats *out, kvf_err *err) {
    static const double defaults[] = {1e6, 4e6, 16e6, 64e6, 256e6};
    if (!cache_tokens) {
        cache_tokens = defaults;
        n_sizes = 5;
    }
    if (n_sizes > TRC_STATS_MAX_SIZES) n_sizes = TRC_STATS_MAX_SIZES;
    memset(out, 0, sizeof *out);
    sketch sk[2] = {{0}};
    for (int i = 0; i < 2; i++) {
        sk[i].exact = kvf_malloc(EXACT_MAX * sizeof *sk[i].exact);
        sk[i].hist = kvf_calloc(HIST_N, sizeof *sk[i].hist);
    }
    idset seen = {0}, sess = {0};   // block ids; session ids (0, no session, left out)
    const uint64_t BT = trc_reader_block_tokens(r);
    uint32_t *hint = NULL;   // entry indices found while measuring the LRU's leading runs
    size_t caphint = 0;
    // sizes sorted ascending -> segments of one LRU stack
    uint32_t order[TRC_STATS_MAX_SIZES];
    for (uint32_t i = 0; i < n_sizes; i++)
        order[i] = i;
    for (uint32_t i = 1; i < n_sizes; i++)
        for (uint32_t j = i; j > 0 && cache_tokens[order[j]] < cache_tokens[order[j - 1]]; j--) {
            uint32_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    lru L;
    memset(&L, 0, sizeof L);
    L.head = L.tail = NIL;
    L.nseg = n_sizes;
    uint64_t prev_blocks = 0, lru_hits[TRC_STATS_MAX_SIZES] = {0};
    for (uint32_t j = 0; j < n_sizes; j++) {
        double cb = cache_tokens[order[j]] / (double)(BT ? BT : 1);
        uint64_t blocks = cb >= 1 && cb < 4e9 ? (uint64_t)cb : cb >= 4e9 ? 4000000000ULL : 0;
        if (blocks < prev_blocks) blocks = prev_blocks;
        L.segcap[j] = blocks - prev_blocks;
        L.segtail[j] = NIL;
        prev_blocks = blocks;
    }
    L.capacity = prev_blocks;
    uint32_t free_slot = NIL;
    trc_answers ans = {0};
    trc_request q;
    int rc;
    int64_t first = 0, last = 0, prev_open = 0;
    bool have_open = false;
    double gmean = 0, gm2 = 0;   // Welford over open-loop gaps
    uint64_t ngaps = 0;
    ordered src;
    rc = ordered_open(&src, r, err);
    while (rc == 1 && (rc = ordered_next(&src, &q, err)) == 1) {
        if (!out->requests) first = last = q.arrival_ns;
        out->requests++;
        first = KVF_MIN(first, q.arrival_ns);
        last = KVF_MAX(last, q.arrival_ns);
        if (q.prev_id < 0) {
            if (have_open) {
                double g = (double)(q.arrival_ns - prev_open) / 1e9;
                ngaps++;
                double d = g - gmean;
                gmean += d / (double)ngaps;
                gm2 += d * (g - gmean);
            }
            have_open = true;
            prev_open = q.arrival_ns;
        } else
            out->closed_loop++;
        // sessions the requests read belong to: a window or a limit may start mid-session
        if (q.session) idset_add(&sess, q.session);
        if (q.flags & TRC_F_FAILED) out->failed++;
        if (q.images) out->with_images++;
        out->classes[q.cls < TRC_CLASS_COUNT ? q.cls : TRC_CLASS_OTHER]++;
        sketch_add(&sk[0], q.input_tokens);
        sketch_add(&sk[1], q.output_tokens);
        out->block_refs += q.n_blocks;
        // The tables outgrow the caches: a request's lookups are independent misses, so all
        // its home slots are fetched together before the walks below (results do not change).
        if (L.tcap || seen.cap)
            for (uint32_t i = 0; i < q.n_blocks; i++) {
                uint64_t h = kvf_hash64(q.blocks[i]);
                if (L.tcap) __builtin_prefetch(&L.tab[h & (L.tcap - 1)]);
                if (seen.cap) __builtin_prefetch(&seen.keys[h & (seen.cap - 1)]);
            }
        // a closed-loop turn's answer blocks were computed by the turn it waits for
        // (trc_answers): present before its lookup, in both caches
        uint32_t afrom, aupto;
        if (trc_answers_span(&ans, &q, (uint32_t)BT, &afrom, &aupto)) {
            for (uint32_t i = afrom; i < aupto; i++)
                idset_add(&seen, q.blocks[i]);
            if (n_sizes && L.capacity)
                for (uint32_t i = aupto; i-- > afrom;)
                    lru_touch(&L, q.blocks[i], &free_slot, NIL);
        }
        if (!trc_answers_add(&ans, &q)) {
            rc = -1;
            kvf_fail(err, KVF_ENOMEM, "trace stats: out of memory");
            break;
        }
        // unbounded cache
        uint64_t run = 0;
        while (run < q.n_blocks && idset_has(&seen, q.blocks[run]))
            run++;
        out->hit_tokens += trc_hit_tokens(run, q.input_tokens, (uint32_t)BT);
        for (uint32_t i = (uint32_t)run; i < q.n_blocks; i++)
            idset_add(&seen, q.blocks[i]);
        if (q.n_blocks > caphint) kvf_grow((void **)&hint, &caphint, q.n_blocks, sizeof *hint);
        // LRU sizes: the leading run of each size ends at the first block that is absent or
        // sits in a deeper segment
        if (n_sizes && L.capacity) {
            uint32_t k = 0, worst = 0;
            uint32_t runs[TRC_STATS_MAX_SIZES];
            for (uint32_t j = 0; j < n_sizes; j++)
                runs[j] = 0;
            while (k < q.n_blocks && (hint[k] = lru_get(&L, q.blocks[k])) != NIL) {
                uint32_t sg = L.e[hint[k]].seg;
                if (sg > worst) worst = sg;
                // block k counts for every size j >= worst (all earlier blocks are in those)
                for (uint32_t j = worst; j < n_sizes; j++)
                    runs[j] = k + 1;
                k++;
            }
            for (uint32_t j = 0; j < n_sizes; j++)
                lru_hits[j] += trc_hit_tokens(runs[j], q.input_tokens, (uint32_t)BT);
            // last to first, so a prefix stays more recent than its tail
            for (uint32_t i = q.n_blocks; i-- > 0;)
                lru_touch(&L, q.blocks[i], &free_slot, i < k ? hint[i] : NIL);
        }
    }
    kvf_status st = KVF_OK;
    if (rc < 0)
        st = err && err->code ? err->code : KVF_EPARSE;
    else {
        out->format = trc_reader_format(r);
        out->skipped = trc_reader_skipped(r);
        out->block_tokens = (uint32_t)BT;
        out->span_s = out->requests ? (double)(last - first) / 1e9 : 0;
        out->rate_rps =
            out->requests > 1 && out->span_s > 0 ? (double)(out->requests - 1) / out->span_s : 0;
        out->interarrival_cv = ngaps > 1 && gmean > 0 ? sqrt(gm2 / (double)ngaps) / gmean : 0;
        sketch_finish(&sk[0], &out->input_tokens);
        sketch_finish(&sk[1], &out->output_tokens);
        out->distinct_blocks = seen.n;
        out->sessions = sess.n;
        out->ideal_hit_rate =
            out->input_tokens.total ? (double)out->hit_tokens / (double)out->input_tokens.total : 0;
        out->n_sizes = n_sizes;
        for (uint32_t j = 0; j < n_sizes; j++) {
            uint32_t c = order[j];
            out->cache_tokens[c] = cache_tokens[c];
            out->cache_hit_rate[c] =
                out->input_tokens.total ? (double)lru_hits[j] / (double)out->input_tokens.total : 0;
        }
        snprintf(out->notes, sizeof out->notes, "%s", trc_reader_notes(r));
    }
    for (int i = 0; i < 2; i++) {
        free(sk[i].exact);
        free(sk[i].hist);
    }
    free(seen.keys);
    free(sess.keys);
    free(hint);
    trc_answers_free(&ans);
    lru_free(&L);
    ordered_free(&src);
    return st;
}

kvf_status trc_stats_file(const char *path, const trc_options *opt, trc_stats *out, kvf_err *err) {
    trc_reader *r;
    kvf_status st = trc_reader_open(&r, path, opt, err);
    if (st) return st;
    st = trc_stats_compute(r, NULL, 0, out, err);
    trc_reader_close(r);
    return st;
}

static void jlen(char **p, size_t *left, const char *name, const trc_len_stats *l) {
    int n = snprintf(*p, *left,
                     "\"%s\": {\"mean\": %.6g, \"p50\": %.6g, \"p90\": %.6g, \"p99\": %.6g, "
                     "\"max\": %llu, \"total\": %llu}, ",
                     name, l->mean, l->p50, l->p90, l->p99, (unsigned long long)l->max,
                     (unsigned long long)l->total);
    if (n > 0 && (size_t)n < *left) {
        *p += n;
        *left -= (size_t)n;
    }
}

char *trc_stats_json(const trc_stats *s) {
    size_t cap = 8192, left = cap;
    char *buf = kvf_malloc(cap), *p = buf;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int n_ = snprintf(p, left, __VA_ARGS__);                                                   \
        if (n_ > 0 && (size_t)n_ < left) {                                                         \
            p += n_;                                                                               \
            left -= (size_t)n_;                                                                    \
        }                                                                                          \
    } while (0)
    PUT("{\"format\": \"%s\", \"requests\": %llu, \"sessions\": %llu, \"span_s\": %.6f, "
        "\"rate_rps\": %.6g, \"interarrival_cv\": %.6g, ",
        trc_format_name(s->format), (unsigned long long)s->requests,
        (unsigned long long)s->sessions, s->span_s, s->rate_rps, s->interarrival_cv);
    jlen(&p, &left, "input_tokens", &s->input_tokens);
    jlen(&p, &left, "output_tokens", &s->output_tokens);
    PUT("\"block_tokens\": %u, \"ideal_hit_rate\": %.6f, \"hit_tokens\": %llu, "
        "\"block_refs\": %llu, \"distinct_blocks\": %llu, ",
        s->block_tokens, s->ideal_hit_rate, (unsigned long long)s->hit_tokens,
        (unsigned long long)s->block_refs, (unsigned long long)s->distinct_blocks);
    PUT("\"hit_rate_by_cache\": [");
    for (uint32_t i = 0; i < s->n_sizes; i++)
        PUT("%s{\"cache_tokens\": %.0f, \"hit_rate\": %.6f}", i ? ", " : "", s->cache_tokens[i],
            s->cache_hit_rate[i]);
    PUT("], \"classes\": {");
    bool first = true;
    for (int c = 0; c < TRC_CLASS_COUNT; c++) {
        if (!s->classes[c]) continue;
        PUT("%s\"%s\": %llu", first ? "" : ", ", trc_class_name(c),
            (unsigned long long)s->classes[c]);
        first = false;
    }
    PUT("}, \"closed_loop\": %llu, \"failed\": %llu, \"with_images\": %llu, \"skipped\": %llu, ",
        (unsigned long long)s->closed_loop, (unsigned long long)s->failed,
        (unsigned long long)s->with_images, (unsigned long long)s->skipped);
    PUT("\"notes\": \"");
    for (const char *c = s->notes; *c && left > 8; c++) {
        if (*c == '"' || *c == '\\')
            PUT("\\%c", *c);
        else if ((unsigned char)*c < 0x20)
            PUT(" ");
        else
            PUT("%c", *c);
    }
    PUT("\"}");
#undef PUT
    return buf;
}
