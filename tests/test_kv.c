// tests/test_kv.c -- the shared KV store on real traces: the simulated hit rate against the
// trace's ideal prefix reuse (computed by the trace statistics, an independent pass), growth
// with capacity and retention, the shared SSD's effect on agentic sessions, and SWA bounded
// replay cutting prefill FLOPs; the compact block index against the reference one
// (tests/helpers/kv_ref.c), operation for operation on a real trace, for both layouts.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/kv_ref.h"
#include "helpers/kvt.h"
#include "sim.h"
#include "sim_kv.h"
#include "trc.h"

static const char *shared(const char *name) {
    return kvt_shared_trace(name);
}

static json_t *run(const char *trace, const char *const *sets, int n) {
    return kvt_run("quickstart.yaml", trace, sets, n, NULL);
}

static double ideal_hit_rate(const char *trace, const char *format, int64_t limit) {
    trc_options o;
    trc_options_default(&o);
    ck_assert(trc_format_parse(format, &o.format));
    o.block_tokens = 64;
    o.bucket = TRC_BUCKET_SPREAD;
    o.seed = 1;
    o.limit_requests = limit;
    trc_stats st;
    kvf_err err = {0};
    ck_assert_msg(trc_stats_file(trace, &o, &st, &err) == KVF_OK, "%s", err.msg);
    return st.ideal_hit_rate;
}

START_TEST(test_unbounded_store_reaches_ideal_reuse) {
    const char *t = shared("mooncake_conversation.jsonl");
    double ideal = ideal_hit_rate(t, "mooncake", 0);
    const char *sets[] = {"kv_cache.ssd.capacity_tb=unlimited",
                          "kv_cache.ssd.retention={chatbot: never, agent: never, coding: never, "
                          "batch: never, other: never}",
                          "workload.bucket=spread"};
    json_t *s = run(t, sets, 3);
    double hit = kvt_num(s, "cache.hit_rate");
    ck_assert_msg(hit <= ideal + 1e-9, "simulated hit rate %.5f above the ideal %.5f", hit, ideal);
    ck_assert_msg(ideal - hit < 0.01,
                  "simulated hit rate %.5f more than 1 point below the ideal %.5f", hit, ideal);
    ck_assert_msg(ideal > 0.33 && ideal < 0.42, "ideal reuse %.4f far from the trace's ~37 %%",
                  ideal);
    json_decref(s);
}
END_TEST

START_TEST(test_hit_rate_grows_with_capacity_and_retention) {
    const char *t = shared("mooncake_conversation.jsonl");
    const char *caps[] = {"kv_cache.ssd.capacity_tb=0", "kv_cache.ssd.capacity_tb=0.5",
                          "kv_cache.ssd.capacity_tb=2", "kv_cache.ssd.capacity_tb=unlimited"};
    double prev = -1;
    for (int i = 0; i < 4; i++) {
        const char *sets[] = {caps[i], "workload.limit_requests=4000"};
        json_t *s = run(t, sets, 2);
        double h = kvt_num(s, "cache.hit_rate");
        ck_assert_msg(h >= prev - 1e-9, "hit rate fell from %.4f to %.4f at %s", prev, h, caps[i]);
        ck_assert_msg(kvt_num(s, "invariants.tiers_over_capacity") == 0, "over capacity at %s",
                      caps[i]);
        if (i == 3) ck_assert_msg(h > prev + 1e-3 || prev > 0.3, "no growth up to unlimited");
        prev = h;
        json_decref(s);
    }
    // retention: entries that expire after 60 s are never hit later; 7 days keeps them
    const char *r1[] = {"kv_cache.ssd.capacity_tb=unlimited", "workload.limit_requests=4000",
                        "kv_cache.ssd.retention={chatbot: 60s}"};
    const char *r2[] = {"kv_cache.ssd.capacity_tb=unlimited", "workload.limit_requests=4000",
                        "kv_cache.ssd.retention={chatbot: 7d}"};
    json_t *a = run(t, r1, 3), *b = run(t, r2, 3);
    double ha = kvt_num(a, "cache.hit_rate"), hb = kvt_num(b, "cache.hit_rate");
    ck_assert_msg(ha < hb, "60 s retention %.4f not below 7 d %.4f", ha, hb);
    ck_assert_msg(kvt_num(a, "cache.expired_blocks") > 0, "nothing expired with 60 s retention");
    json_decref(a);
    json_decref(b);
}
END_TEST

START_TEST(test_shared_ssd_on_agentic_sessions) {
    const char *t = shared("weka_agentic_dev.jsonl");
    // the agentic trace lives only in the shared folder ($KVF_SHARED/traces, which CTest
    // sets): without it the test fails rather than pass unrun
    ck_assert_msg(access(t, R_OK) == 0,
                  "%s missing: the agentic trace is not bundled; set "
                  "KVF_SHARED to the folder holding traces/weka_agentic_dev.jsonl",
                  t);
    // HBM holds a tenth of its KV as prefix cache: agentic contexts (~100k tokens) outgrow it,
    // so what the store keeps is what hits (with the default 0.8 the HBM alone keeps 0.944)
    const char *on[] = {"workload.format=sessions", "kv_cache.ssd.capacity_tb=unlimited",
                        "workload.limit_requests=800", "kv_cache.hbm_cache_frac=0.1"};
    const char *off[] = {"workload.format=sessions", "kv_cache.ssd.capacity_tb=0",
                         "workload.limit_requests=800", "kv_cache.hbm_cache_frac=0.1"};
    json_t *a = run(t, on, 4), *b = run(t, off, 4);
    double ha = kvt_num(a, "cache.hit_rate"), hb = kvt_num(b, "cache.hit_rate");
    ck_assert_msg(ha > hb + 0.05, "hit rate with SSD %.3f, HBM only %.3f", ha, hb);
    ck_assert_msg(kvt_num(a, "ttft_ms.mean") < kvt_num(b, "ttft_ms.mean"),
                  "TTFT with SSD %.0f ms not below HBM only %.0f ms", kvt_num(a, "ttft_ms.mean"),
                  kvt_num(b, "ttft_ms.mean"));
    json_decref(a);
    json_decref(b);
}
END_TEST

START_TEST(test_swa_bounded_replay_cuts_prefill_flops) {
    const char *t = shared("mooncake_conversation.jsonl");
    const char *sets[] = {"model=gpt-oss-120b", "workload.limit_requests=3000",
                          "kv_cache.ssd.capacity_tb=unlimited"};
    json_t *s = run(t, sets, 3);
    json_t *pf = json_object_get(json_object_get(s, "cache"), "prefill_flops");
    double actual = json_number_value(json_object_get(pf, "actual"));
    double full = json_number_value(json_object_get(pf, "window_full_recompute"));
    double none = json_number_value(json_object_get(pf, "no_reuse"));
    ck_assert_msg(json_is_true(json_object_get(pf, "swa_replay")), "gpt-oss-120b not hybrid");
    ck_assert_msg(actual < full && full < none,
                  "flops: replay %.3g, full window %.3g, no reuse %.3g", actual, full, none);
    json_decref(s);
}
END_TEST

// ---- the block index against the reference, operation for operation --------------------------
// One tier under test (sim_bcache) and the reference (kvt_refcache) fed the same calls; every
// answer and counter must agree after each call.
typedef struct kv_pair {
    sim_bcache n;
    kvt_refcache r;
} kv_pair;

static void pair_check(const kv_pair *p, const char *what, uint64_t op) {
    ck_assert_msg(
        p->n.used == p->r.used && p->n.inserted == p->r.inserted && p->n.expired == p->r.expired &&
            p->n.evicted == p->r.evicted && p->n.peak == p->r.peak,
        "%s, op %llu: used %llu/%llu inserted %llu/%llu expired %llu/%llu evicted "
        "%llu/%llu peak %llu/%llu (index/reference)",
        what, (unsigned long long)op, (unsigned long long)p->n.used, (unsigned long long)p->r.used,
        (unsigned long long)p->n.inserted, (unsigned long long)p->r.inserted,
        (unsigned long long)p->n.expired, (unsigned long long)p->r.expired,
        (unsigned long long)p->n.evicted, (unsigned long long)p->r.evicted,
        (unsigned long long)p->n.peak, (unsigned long long)p->r.peak);
}

static bool pair_hit(kv_pair *p, uint64_t id, sim_time now, int cls, bool touch, uint64_t op) {
    bool a = touch ? sim_bcache_hit(&p->n, id, now, cls) : sim_bcache_has(&p->n, id, now);
    bool b = touch ? kvt_refcache_hit(&p->r, id, now, cls) : kvt_refcache_has(&p->r, id, now);
    ck_assert_msg(a == b, "op %llu: lookup answers %d, reference %d", (unsigned long long)op, a, b);
    pair_check(p, "lookup", op);
    return a;
}

static bool pair_put(kv_pair *p, uint64_t id, sim_time now, int cls, uint64_t *ev, uint64_t op) {
    uint64_t e1 = 0, e2 = 0;
    bool a = sim_bcache_put(&p->n, id, now, cls, &e1),
         b = kvt_refcache_put(&p->r, id, now, cls, &e2);
    ck_assert_msg(a == b && (!a || e1 == e2), "op %llu: put evicts %d %llx, reference %d %llx",
                  (unsigned long long)op, a, (unsigned long long)e1, b, (unsigned long long)e2);
    pair_check(p, "put", op);
    if (a && ev) *ev = e1;
    return a;
}

// The reference's blocks by class, counted on its class lists.
static void ref_by_class(const kvt_refcache *r, uint64_t out[TRC_CLASS_COUNT]) {
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        out[k] = 0;
        for (uint32_t s = r->head[k]; s != KVT_REF_NONE; s = r->slots[s].next)
            out[k]++;
    }
}

// Purge at t: occupancy by class predicted before it (sim_bcache_used_at) equals what the
// reference holds after it.
static void pair_expire(kv_pair *p, sim_time t, uint64_t op) {
    uint64_t pred[TRC_CLASS_COUNT], got[TRC_CLASS_COUNT];
    sim_bcache_used_at(&p->n, t, pred);
    uint64_t a = sim_bcache_expire(&p->n, t), b = kvt_refcache_expire(&p->r, t);
    ck_assert_msg(a == b, "op %llu: expire drops %llu, reference %llu", (unsigned long long)op,
                  (unsigned long long)a, (unsigned long long)b);
    pair_check(p, "expire", op);
    ref_by_class(&p->r, got);
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        ck_assert_msg(pred[k] == got[k] && p->n.used_cls[k] == got[k],
                      "op %llu class %d: occupancy %llu predicted, %llu held, reference %llu",
                      (unsigned long long)op, k, (unsigned long long)pred[k],
                      (unsigned long long)p->n.used_cls[k], (unsigned long long)got[k]);
    }
}

// Evicts the LRU block of both (sim_tier_fit_free's call): same answer, block and class.
static bool pair_evict(kv_pair *p, sim_time now, uint64_t *id, int *cls, uint64_t op) {
    uint64_t i1 = 0, i2 = 0;
    int c1 = -1, c2 = -1;
    bool a = sim_bcache_evict_lru(&p->n, now, &i1, &c1),
         b = kvt_refcache_evict_lru(&p->r, now, &i2, &c2);
    ck_assert_msg(a == b && (!a || (i1 == i2 && c1 == c2)),
                  "op %llu: evict_lru %d %llx class %d, reference %d %llx class %d",
                  (unsigned long long)op, a, (unsigned long long)i1, c1, b, (unsigned long long)i2,
                  c2);
    pair_check(p, "evict_lru", op);
    *id = i1;
    *cls = c1;
    return a;
}

typedef struct replay_opts {
    uint64_t hbm_blocks, ssd_blocks;   // tier sizes; ssd UINT64_MAX = no limit
    const int64_t *ret;                // per class retention (NULL: nothing expires)
    int64_t limit;                     // requests
    bool fit;   // the HBM limit moves with free memory (sim_tier_fit_free): evict_lru down to it
} replay_opts;

typedef struct replay_seen {           // what a replay exercised in the HBM (LRU) tier
    uint64_t ops;                      // calls compared
    uint64_t hbm_expired, hbm_moves;   // blocks expired; class changes seen on a hit
    uint64_t hbm_lru_evicted;          // blocks sim_bcache_evict_lru evicted
    double bytes_per_block;            // the store's index bytes per block at its peak
    size_t hbm_index_bytes;
} replay_seen;

// One lookup in the HBM; a class change shows as the class counts moving with used unchanged.
static bool hbm_hit(kv_pair *p, uint64_t id, sim_time now, int cls, uint64_t op, replay_seen *s) {
    uint64_t before = p->n.used_cls[cls], used = p->n.used;
    bool hit = pair_hit(p, id, now, cls, true, op);
    if (hit && p->n.used == used && p->n.used_cls[cls] != before) s->hbm_moves++;
    return hit;
}

// Replays the Mooncake trace through an HBM tier (LRU, hbm_blocks) in front of a shared store
// (ssd_blocks; UINT64_MAX = no limit) the way the cluster does: a prefix walk across both
// tiers that stops at the first miss, SSD hits promoted into HBM with HBM evictions written
// back to the store, a router probe (no touch) before the walk, the missing blocks written to
// both after a delay, and purges every 7.3 s (not a multiple of any retention). Classes are
// spread over the requests so blocks change class. With fit, each request first moves the
// HBM limit (half to all of hbm_blocks) and evicts down to it, and touches its last block
// again under another class after the write.
static void replay_side_by_side(const replay_opts *ro, replay_seen *seen) {
    trc_options o;
    trc_options_default(&o);
    ck_assert(trc_format_parse("mooncake", &o.format));
    o.bucket = TRC_BUCKET_SPREAD;
    o.limit_requests = ro->limit;
    o.time_scale = 0.25;   // four times the recorded rate: more sharing within a retention
    trc_reader *rd;
    kvf_err err = {0};
    ck_assert_msg(!trc_reader_open(&rd, shared("mooncake_conversation.jsonl"), &o, &err), "%s",
                  err.msg);
    kv_pair hbm, ssd;
    sim_bcache_init(&hbm.n, ro->hbm_blocks, ro->ret);
    kvt_refcache_init(&hbm.r, ro->hbm_blocks, ro->ret);
    sim_bcache_init(&ssd.n, ro->ssd_blocks, ro->ret);
    kvt_refcache_init(&ssd.r, ro->ssd_blocks, ro->ret);
    ck_assert(ssd.n.compact == (ro->ssd_blocks == UINT64_MAX) && !hbm.n.compact);
    replay_seen s = {0};
    trc_request q;
    uint64_t op = 0, hits = 0, looked = 0, expired_lookups = 0;
    sim_time next_purge = 7300000000LL, last = 0;
    int rc;
    while ((rc = trc_reader_next(rd, &q, &err)) == 1) {
        sim_time now = q.arrival_ns < last ? last : q.arrival_ns;   // calls never go back in time
        while (next_purge <= now) {
            pair_expire(&hbm, next_purge, op);
            pair_expire(&ssd, next_purge, op++);
            next_purge += 7300000000LL;
        }
        int cls = (int)(kvf_hash64((uint64_t)op) % TRC_CLASS_COUNT);
        if (ro->fit) {
            uint64_t lim =
                ro->hbm_blocks / 2 + kvf_hash64(op ^ 0x66697400ULL) % (ro->hbm_blocks / 2 + 1);
            hbm.n.capacity = hbm.r.capacity = lim;
            uint64_t id;
            int ecls;
            while (hbm.n.used > lim && pair_evict(&hbm, now, &id, &ecls, op++)) {
                s.hbm_lru_evicted++;
                pair_put(&ssd, id, now, ecls, NULL, op++);
            }
        }
        if (q.n_blocks) pair_hit(&ssd, q.blocks[0], now, cls, false, op++);
        uint32_t k = 0;
        for (; k < q.n_blocks; k++, op++) {
            looked++;
            if (hbm_hit(&hbm, q.blocks[k], now, cls, op, &s)) continue;
            if (!pair_hit(&ssd, q.blocks[k], now, cls, true, op)) break;
            uint64_t ev;
            if (pair_put(&hbm, q.blocks[k], now, cls, &ev, op))
                pair_put(&ssd, ev, now, cls, NULL, op);
        }
        hits += k;
        // the prompt's computed blocks land a millisecond later
        sim_time later = now + 1000000;
        for (uint32_t j = k; j < q.n_blocks; j++, op++) {
            uint64_t ev;
            if (pair_put(&hbm, q.blocks[j], later, cls, &ev, op))
                pair_put(&ssd, ev, later, cls, NULL, op);
            pair_put(&ssd, q.blocks[j], later, cls, NULL, op);
        }
        if (ro->fit && q.n_blocks) {   // touch (no lookup): revives an expired block too
            int c2 = (cls + 1) % TRC_CLASS_COUNT;
            sim_bcache_touch(&hbm.n, q.blocks[q.n_blocks - 1], later, c2);
            kvt_refcache_touch(&hbm.r, q.blocks[q.n_blocks - 1], later, c2);
            pair_check(&hbm, "touch", op++);
        }
        last = later;
        expired_lookups = ssd.r.expired;
    }
    ck_assert_msg(rc == 0, "%s", err.msg);
    pair_expire(&hbm, next_purge, op);
    pair_expire(&ssd, next_purge, op);
    // the replay exercised what it compares
    ck_assert_msg(hits > looked / 10 && hits < looked, "%llu hits of %llu lookups",
                  (unsigned long long)hits, (unsigned long long)looked);
    ck_assert_msg(hbm.r.evicted > 0, "HBM never evicted");
    if (ro->ret) ck_assert_msg(expired_lookups > 0, "nothing expired in the store");
    if (ro->ssd_blocks != UINT64_MAX) ck_assert_msg(ssd.r.evicted > 0, "the store never evicted");
    s.ops = op;
    s.hbm_expired = hbm.r.expired;
    s.bytes_per_block = (double)sim_bcache_index_bytes(&ssd.n) / (double)ssd.n.peak;
    s.hbm_index_bytes = sim_bcache_index_bytes(&hbm.n);
    fprintf(stderr,
            "replay: %llu calls compared (HBM %llu blocks: %llu evicted, %llu of them by "
            "evict_lru, %llu expired, %llu class changes on hits)\n",
            (unsigned long long)op, (unsigned long long)ro->hbm_blocks,
            (unsigned long long)hbm.r.evicted, (unsigned long long)s.hbm_lru_evicted,
            (unsigned long long)hbm.r.expired, (unsigned long long)s.hbm_moves);
    if (seen) *seen = s;
    trc_reader_close(rd);
    sim_bcache_free(&hbm.n);
    kvt_refcache_free(&hbm.r);
    sim_bcache_free(&ssd.n);
    kvt_refcache_free(&ssd.r);
}

START_TEST(test_compact_index_matches_reference_on_trace) {
    // retention from 30 s to never, so blocks expire, revive and change class
    static const int64_t ret[TRC_CLASS_COUNT] = {120 * 1000000000LL, 45 * 1000000000LL,
                                                 30 * 1000000000LL, 0, 600 * 1000000000LL};
    replay_seen seen;
    replay_side_by_side(&(replay_opts){3000, UINT64_MAX, ret, 6000, false}, &seen);
    // the compact store's index, per stored block (tables and run queues at the peak)
    ck_assert_msg(seen.bytes_per_block > 0 && seen.bytes_per_block <= 16,
                  "%.1f index bytes per stored block", seen.bytes_per_block);
    replay_side_by_side(&(replay_opts){3000, 200000, ret, 4000, false}, NULL);        // sized store
    replay_side_by_side(&(replay_opts){3000, UINT64_MAX, NULL, 3000, false}, NULL);   // no expiry
}
END_TEST

// The LRU layout (HBM) on its own terms: a small tier whose blocks expire before they are
// evicted (retentions of a second or two, all different, so a hit moves a block to a
// longer-lived class and into that class's LRU order), a limit that moves with
// sim_bcache_evict_lru evicting down to it, and touches that revive expired blocks.
START_TEST(test_lru_index_matches_reference_on_trace) {
    static const int64_t ret[TRC_CLASS_COUNT] = {2000000000LL, 700000000LL, 1300000000LL, 0,
                                                 3100000000LL};
    replay_seen seen;
    replay_side_by_side(&(replay_opts){300, UINT64_MAX, ret, 4000, true}, &seen);
    ck_assert_msg(seen.hbm_expired > 100 && seen.hbm_moves > 100 && seen.hbm_lru_evicted > 1000,
                  "HBM: %llu expired, %llu class changes, %llu evicted by evict_lru",
                  (unsigned long long)seen.hbm_expired, (unsigned long long)seen.hbm_moves,
                  (unsigned long long)seen.hbm_lru_evicted);
    replay_side_by_side(&(replay_opts){300, 20000, ret, 3000, false}, &seen);
    ck_assert_msg(seen.hbm_expired > 100 && seen.hbm_moves > 100,
                  "HBM: %llu expired, %llu class changes", (unsigned long long)seen.hbm_expired,
                  (unsigned long long)seen.hbm_moves);
    // the class queues stay bounded by the blocks held, not by the touches made
    ck_assert_msg(seen.hbm_index_bytes < 300 * 256, "%zu index bytes for 300 blocks",
                  seen.hbm_index_bytes);
}
END_TEST

// A few hot blocks touched a million times beside cold ones that stay put: the class queues
// drop their dead entries (renumbering the live ones) rather than grow, and eviction still
// takes the exact LRU block, ties on equal times in touch order, compared with the reference.
START_TEST(test_lru_queues_stay_bounded) {
    static const int64_t ret[TRC_CLASS_COUNT] = {0, 50000, 0, 20000, 0};
    kv_pair p;
    sim_bcache_init(&p.n, 2000, ret);
    kvt_refcache_init(&p.r, 2000, ret);
    uint64_t op = 0, ev;
    for (uint64_t i = 0; i < 2000; i++, op++)   // groups of 5 blocks (of 8 ids)
        pair_put(&p, (i / 5) << 3 | (i % 5), (sim_time)(i / 7), (int)(i % TRC_CLASS_COUNT), &ev,
                 op);
    for (uint64_t t = 0; t < 1000000; t++, op++) {
        uint64_t r = kvf_hash64(t), i = r % 200;    // the hot ones: the first 200 put
        sim_time now = 1000 + (sim_time)(t / 16);   // 16 calls per time step: ties
        int cls = (int)((r >> 32) % TRC_CLASS_COUNT);
        if (t % 64 == 63) {   // now and then a new block evicts one
            pair_put(&p, (1000000 + t) << 3, now, cls, &ev, op);
        } else if (t % 4096 == 0) {
            uint64_t id;
            int ec;
            pair_evict(&p, now, &id, &ec, op);
        } else {
            pair_hit(&p, (i / 5) << 3 | (i % 5), now, cls, true, op);
        }
    }
    pair_expire(&p, 1000 + 1000000 / 16 + 100000, op);
    size_t entries = 0;
    for (int k = 0; k < TRC_CLASS_COUNT; k++)
        entries += p.n.q[k].cap;
    ck_assert_msg(entries <= 8 * 2000 + TRC_CLASS_COUNT * 64,
                  "%zu queue entries for 2000 blocks after a million touches", entries);
    sim_bcache_free(&p.n);
    kvt_refcache_free(&p.r);
}
END_TEST

// A retention-only store's occupancy falls when its blocks expire, though nothing looks them
// up again; buckets of expired groups are reclaimed as the table fills, so it stays sized by
// the live blocks.
START_TEST(test_compact_store_occupancy_by_class) {
    static const int64_t ret[TRC_CLASS_COUNT] = {10 * 1000000000LL, 0, 3 * 1000000000LL, 0, 0};
    sim_bcache c;
    sim_bcache_init(&c, UINT64_MAX, ret);
    const sim_time s = 1000000000LL;
    for (uint64_t i = 0; i < 800; i++)
        sim_bcache_put(&c, i << 3 | 1, 0, TRC_CLASS_CHATBOT, NULL);
    for (uint64_t i = 0; i < 300; i++)
        sim_bcache_put(&c, (1000 + i) << 3, s, TRC_CLASS_AGENT, NULL);
    for (uint64_t i = 0; i < 200; i++)
        sim_bcache_put(&c, (5000 + i) << 3, 2 * s, TRC_CLASS_CODING, NULL);
    uint64_t u[TRC_CLASS_COUNT];
    sim_bcache_used_at(&c, 4 * s, u);
    ck_assert(u[TRC_CLASS_CHATBOT] == 800 && u[TRC_CLASS_AGENT] == 300 &&
              u[TRC_CLASS_CODING] == 200);
    sim_bcache_used_at(&c, 5 * s, u);   // coding expired at 2 s + 3 s
    ck_assert(u[TRC_CLASS_CHATBOT] == 800 && u[TRC_CLASS_CODING] == 0);
    sim_bcache_used_at(&c, 10 * s, u);
    ck_assert(u[TRC_CLASS_CHATBOT] == 0 && u[TRC_CLASS_AGENT] == 300);
    ck_assert_uint_eq(sim_bcache_expire(&c, 10 * s), 1000);
    ck_assert(c.used == 300 && c.used_cls[TRC_CLASS_CHATBOT] == 0 && c.expired == 1000);
    ck_assert(!sim_bcache_has(&c, 5 << 3 | 1, 10 * s));
    ck_assert(sim_bcache_has(&c, 1000 << 3, 10 * s));
    // a block put again after it expired is stored anew; a live one is only touched
    sim_bcache_put(&c, 5 << 3 | 1, 11 * s, TRC_CLASS_CHATBOT, NULL);
    sim_bcache_put(&c, 1000 << 3, 11 * s, TRC_CLASS_AGENT, NULL);
    ck_assert(c.inserted == 1301 && c.used == 301);
    // 100 k more groups expiring 10 s after their insert: the table follows the live ones
    for (uint64_t i = 0; i < 100000; i++) {
        sim_time t = 12 * s + (sim_time)i * (s / 1000);
        if (i % 1000 == 0) sim_bcache_expire(&c, t);
        sim_bcache_put(&c, (100000 + i) << 3, t, TRC_CLASS_CHATBOT, NULL);
    }
    ck_assert_msg(c.used < 12000, "%llu held", (unsigned long long)c.used);
    ck_assert_msg(c.gcap <= 32768, "%zu buckets for %llu live groups", c.gcap,
                  (unsigned long long)c.used);
    sim_bcache_free(&c);
}
END_TEST

// The compact table past KVF_HUGE_MIN bytes doubles in place (ggrow_in_place): 400 k groups
// take it from 65,536 to 1,048,576 buckets in four such doublings, with a third of the groups
// expired and dropped on the way. Every live group must still be found, no expired or absent
// one, and the buckets a probe off the table's end held back (40 groups made to hash to the
// table's last bucket) must have been placed too.
START_TEST(test_compact_table_grows_in_place) {
    static const int64_t ret[TRC_CLASS_COUNT] = {0, 1000000000LL, 0, 0, 0};
    const sim_time s = 1000000000LL;
    sim_bcache c;
    sim_bcache_init(&c, UINT64_MAX, ret);
    enum { N = 400000 };
    kvf_rng r;
    kvf_rng_init(&r, 11, 0);
    uint64_t *key = kvf_malloc(N * sizeof *key);
    // the first 40 groups hash to the last bucket of every table up to 2^20 buckets: at each
    // doubling all but one of them probe off the end of the table
    uint32_t ends = 0;
    for (uint64_t g = 8; ends < 40; g += 8)
        if ((kvf_hash64(g) & ((1u << 20) - 1)) == (1u << 20) - 1) key[ends++] = g | 3;
    for (uint32_t i = 0; i < N; i++) {
        if (i >= ends) key[i] = (kvf_rng_u64(&r) >> 8) << 3 | (i % 8);   // group in high bits
        // every third group in the class that expires 1 s after its insert
        int cls = i % 3 == 0 ? TRC_CLASS_AGENT : TRC_CLASS_CHATBOT;
        sim_time t = i < N / 2 ? 0 : 2 * s;
        if (i == N / 2) sim_bcache_expire(&c, 2 * s);
        sim_bcache_put(&c, key[i], t, cls, NULL);
    }
    ck_assert(c.gmapped);
    ck_assert_uint_ge(c.gcap, 1u << 20);
    ck_assert_msg(c.gheld > 0, "no probe ran off the end: the held-back path was not exercised");
    uint64_t live = 0;
    for (uint32_t i = 0; i < N; i++) {
        bool expired = i % 3 == 0 && i < N / 2;   // inserted at 0, expired by 2 s
        ck_assert_msg(sim_bcache_has(&c, key[i], 2 * s) == !expired, "group %u (%s)", i,
                      expired ? "expired" : "live");
        live += !expired;
    }
    ck_assert_uint_eq(c.used, live);
    for (uint32_t i = 0; i < 20000; i++)
        ck_assert(!sim_bcache_has(&c, ((kvf_rng_u64(&r) >> 8) << 3) | 7, 2 * s));
    free(key);
    sim_bcache_free(&c);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("kv");
    TCase *t = tcase_create("kv");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_unbounded_store_reaches_ideal_reuse);
    tcase_add_test(t, test_hit_rate_grows_with_capacity_and_retention);
    tcase_add_test(t, test_shared_ssd_on_agentic_sessions);
    tcase_add_test(t, test_swa_bounded_replay_cuts_prefill_flops);
    tcase_add_test(t, test_compact_index_matches_reference_on_trace);
    tcase_add_test(t, test_lru_index_matches_reference_on_trace);
    tcase_add_test(t, test_lru_queues_stay_bounded);
    tcase_add_test(t, test_compact_store_occupancy_by_class);
    tcase_add_test(t, test_compact_table_grows_in_place);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
