// tests/test_sim.c -- the simulator end to end: event queue, links, block caches, determinism,
// conservation invariants on real traces, an analytic M/D/1 check, and the direction in which
// latency and throughput respond to load and capacity.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "sim.h"
#include "sim_cluster.h"
#include "sim_kv.h"
#include "sim_link.h"
#include "sim_metrics.h"
#include "sim_queue.h"

static const char *src_dir(void) {
    return kvt_src();
}

static json_t *run_with(const char *out_dir, const char *const *sets, int nsets) {
    return kvt_run("quickstart.yaml", kvt_shared_trace("mooncake_conversation.jsonl"), sets, nsets,
                   out_dir);
}

// ---- kernel ----------------------------------------------------------------------------------
START_TEST(test_queue_orders_by_time_then_seq) {
    sim_queue *q = sim_queue_create(4);
    kvf_rng r;
    kvf_rng_init(&r, 7, 0);
    uint64_t seqs[2000];
    for (int i = 0; i < 2000; i++) {
        sim_event ev = {.t = (sim_time)kvf_rng_below(&r, 50), .arg = {(uint64_t)i, 0}};
        seqs[i] = sim_queue_push(q, &ev);
    }
    for (int i = 0; i < 2000; i += 3)
        sim_queue_cancel(q, seqs[i]);
    sim_event ev, prev = {.t = -1};
    size_t n = 0;
    while (sim_queue_pop(q, &ev)) {
        ck_assert_msg(ev.arg[0] % 3 != 0, "cancelled event %llu fired",
                      (unsigned long long)ev.arg[0]);
        ck_assert_msg(ev.t > prev.t || (ev.t == prev.t && ev.seq > prev.seq),
                      "order broken: (%lld,%llu) after (%lld,%llu)", (long long)ev.t,
                      (unsigned long long)ev.seq, (long long)prev.t, (unsigned long long)prev.seq);
        prev = ev;
        n++;
    }
    ck_assert_uint_eq(n, 2000 - 667);
    sim_queue_destroy(q);
}
END_TEST

// Events pushed "last" pop after every plain event of their time, pushed before or after
// them, and keep their push order among themselves; a cancelled one never fires.
START_TEST(test_queue_last_events_pop_after_their_instant) {
    sim_queue *q = sim_queue_create(4);
    uint64_t c = 0;
    for (int i = 0; i < 30; i++) {
        sim_event ev = {.t = i % 3, .arg = {(uint64_t)i, i % 2}};
        uint64_t s = i % 2 ? sim_queue_push_last(q, &ev) : sim_queue_push(q, &ev);
        if (i == 7) c = s;
    }
    sim_queue_cancel(q, c);
    sim_event ev;
    int64_t t = -1;
    bool last_seen = false;
    int prev_last = -1, n = 0;
    while (sim_queue_pop(q, &ev)) {
        ck_assert_msg(ev.arg[0] != 7, "a cancelled last event fired");
        if (ev.t != t) t = ev.t, last_seen = false, prev_last = -1;
        if (ev.arg[1]) {
            ck_assert_msg((int)ev.arg[0] > prev_last, "last events out of push order");
            last_seen = true, prev_last = (int)ev.arg[0];
        } else {
            ck_assert_msg(!last_seen, "a plain event at t=%lld popped after a last one",
                          (long long)ev.t);
        }
        n++;
    }
    ck_assert_int_eq(n, 29);
    sim_queue_destroy(q);
}
END_TEST

// *ev pushed to both queues as a plain (k 0), first (1) or last (2) event: the same seq.
static void push_both(sim_queue *a, sim_queue *b, const sim_event *ev, uint32_t k) {
    uint64_t sa = k == 0   ? sim_queue_push(a, ev)
                  : k == 1 ? sim_queue_push_first(a, ev)
                           : sim_queue_push_last(a, ev);
    uint64_t sb = k == 0   ? sim_queue_push(b, ev)
                  : k == 1 ? sim_queue_push_first(b, ev)
                           : sim_queue_push_last(b, ev);
    ck_assert_uint_eq(sa, sb);
}

// Slot events (one pending per slot, a tournament tree) against the same events all in the
// heap (push, push_first, cancel): the same pops in the same order, with the same seqs, sizes
// and peeked times (a cancelled event a lower bound until a pop passes it, in both), over random
// pushes, cancels, pops and a pop's slot set again at once (the tree's deferred clearing), on slot
// counts that fill the tree and ones that leave padding.
START_TEST(test_queue_slots_match_heap) {
    for (uint32_t nslot = 1; nslot <= 37; nslot += 6) {
        sim_queue *a = sim_queue_create(4), *b = sim_queue_create(4);
        sim_queue_slots(a, nslot);
        uint64_t hseq[37];   // b's seq of each slot's pending event, 0 = none
        memset(hseq, 0, sizeof hseq);
        kvf_rng r;
        kvf_rng_init(&r, 11, nslot);
        sim_time now = 0;
        uint64_t pops = 0;
        for (int op = 0; op < 20000; op++) {
            uint32_t k = (uint32_t)kvf_rng_below(&r, 10), i = (uint32_t)kvf_rng_below(&r, nslot);
            sim_time t = now + (sim_time)kvf_rng_below(&r, 40);
            sim_event ev = {.t = t, .dst = i, .kind = 1, .arg = {(uint64_t)op, 0}};
            if (k < 3) {   // a plain, first or last heap event
                push_both(a, b, &ev, k);
            } else if (k < 6 && !hseq[i]) {   // set slot i, first or plain
                ev.kind = 2;
                bool first = k == 4;
                uint64_t sa = sim_queue_slot_push(a, i, &ev, first);
                hseq[i] = first ? sim_queue_push_first(b, &ev) : sim_queue_push(b, &ev);
                ck_assert_uint_eq(sa, hseq[i]);
            } else if (k == 6 && hseq[i]) {   // cancel slot i
                sim_queue_slot_cancel(a, i);
                sim_queue_cancel(b, hseq[i]);
                hseq[i] = 0;
            } else {   // pop; a slot event's slot is set again at once half the time
                sim_event ea, eb;
                sim_time pa = -1, pb = -1;
                bool ha = sim_queue_peek_time(a, &pa), hb = sim_queue_peek_time(b, &pb);
                ck_assert(ha == hb && (!ha || pa == pb));
                bool ga = sim_queue_pop(a, &ea), gb = sim_queue_pop(b, &eb);
                ck_assert(ga == gb);
                if (!ga) continue;
                pops++;
                ck_assert_msg(ea.seq == eb.seq && ea.t == eb.t && ea.arg[0] == eb.arg[0],
                              "nslot %u op %d: slots popped seq %llu t %lld, the heap %llu %lld",
                              nslot, op, (unsigned long long)ea.seq, (long long)ea.t,
                              (unsigned long long)eb.seq, (long long)eb.t);
                ck_assert(pa <= ea.t);   // a lower bound (the heap's may be a cancelled event)
                now = ea.t;
                if (ea.kind == 2) {
                    hseq[ea.dst] = 0;
                    sim_time pa2 = -1, pb2 = -1;   // a peek between the pop and the next push
                    ck_assert(sim_queue_peek_time(a, &pa2) == sim_queue_peek_time(b, &pb2));
                    ck_assert(pa2 == pb2);
                    if (kvf_rng_below(&r, 2)) {
                        ev.kind = 2;
                        ev.dst = ea.dst;
                        ev.t = now + (sim_time)kvf_rng_below(&r, 40);
                        hseq[ea.dst] = sim_queue_push(b, &ev);
                        ck_assert_uint_eq(sim_queue_slot_push(a, ea.dst, &ev, false), hseq[ea.dst]);
                    }
                }
            }
            ck_assert_uint_eq(sim_queue_size(a), sim_queue_size(b));
        }
        sim_event ea, eb;   // drain both
        while (sim_queue_pop(b, &eb)) {
            ck_assert(sim_queue_pop(a, &ea));
            ck_assert_uint_eq(ea.seq, eb.seq);
            pops++;
        }
        ck_assert(!sim_queue_pop(a, &ea));
        ck_assert_uint_eq(sim_queue_popped(a), pops);
        ck_assert_uint_eq(sim_queue_popped(b), pops);
        sim_queue_destroy(a);
        sim_queue_destroy(b);
    }
}
END_TEST

// A slot event costed in parts (a run of decode steps costed page by page): in queue a, its
// seq taken when it is formed (sim_queue_seq_take), an early event at each page's end and the
// taken seq on the last part (sim_queue_slot_push_seq); in queue b, the same event pushed
// whole when formed. Every other event pops from a as from b, in the same order with the same
// seqs and the same count (early ones apart); a peek after each pop finds something due at
// that time in a exactly when it does in b; early events pop before everything else of their
// time and leave no lower bound when cancelled. Random heap and slot events around them.
START_TEST(test_queue_early_events_change_nothing_else) {
    for (uint32_t nslot = 2; nslot <= 26; nslot += 8) {
        sim_queue *a = sim_queue_create(4), *b = sim_queue_create(4);
        sim_queue_slots(a, nslot);
        sim_queue_slots(b, nslot);
        struct {
            uint64_t seq;       // the event's seq (b's), 0 = none pending
            sim_time end;       // its time
            sim_time page[3];   // a's early events before it
            int npage, at;      // pages, and the next early event a pushes
        } st[26];
        memset(st, 0, sizeof st);
        kvf_rng r;
        kvf_rng_init(&r, 17, nslot);
        sim_time now = 0;
        uint64_t pops = 0, early = 0;
        for (int op = 0; op < 20000; op++) {
            uint32_t k = (uint32_t)kvf_rng_below(&r, 10), i = (uint32_t)kvf_rng_below(&r, nslot);
            sim_event ev = {.t = now + (sim_time)kvf_rng_below(&r, 40),
                            .dst = i,
                            .kind = 1,
                            .arg = {(uint64_t)op, 0}};
            if (k < 3) {   // a plain, first or last heap event, in both
                push_both(a, b, &ev, k);
            } else if (k < 7 && !st[i].seq) {   // an event in slot i, in parts in a
                bool first = k & 1;
                ev.kind = 2;
                ev.t = now + 1 + (sim_time)kvf_rng_below(&r, 120);
                st[i].end = ev.t;
                st[i].npage = (int)kvf_rng_below(&r, 4);
                st[i].at = 0;
                sim_time p = now;
                for (int j = 0; j < st[i].npage; j++) {   // page ends before the event's time
                    p += 1 + (sim_time)kvf_rng_below(&r, (uint64_t)(st[i].end - p) / 2 + 1);
                    st[i].page[j] = p < st[i].end ? p : st[i].end - 1;
                    if (st[i].page[j] <= now || (j && st[i].page[j] <= st[i].page[j - 1])) {
                        st[i].npage = j;
                        break;
                    }
                }
                st[i].seq = sim_queue_slot_push(b, i, &ev, first);
                if (st[i].npage) {
                    uint64_t sa = sim_queue_seq_take(a, first ? 0 : SIM_QUEUE_PLAIN);
                    ck_assert_uint_eq(sa, st[i].seq);
                    sim_event e = ev;
                    e.t = st[i].page[0];
                    sim_queue_slot_push_early(a, i, &e);
                } else {
                    ck_assert_uint_eq(sim_queue_slot_push(a, i, &ev, first), st[i].seq);
                }
            } else if (k == 7 && st[i].seq && st[i].at == st[i].npage) {   // cancel a whole one
                sim_queue_slot_cancel(a, i);
                sim_queue_slot_cancel(b, i);
                st[i].seq = 0;
            } else {   // pop: a's early events on the way set their slots' next part
                sim_event ea, eb;
                bool gb = sim_queue_pop(b, &eb), ga;
                while ((ga = sim_queue_pop(a, &ea)) && ea.kind == 2 &&
                       ea.seq != st[ea.dst].seq) {   // an early one
                    uint32_t s = ea.dst;
                    ck_assert(st[s].at < st[s].npage && ea.t == st[s].page[st[s].at]);
                    ck_assert(ea.seq < st[s].seq);
                    ck_assert(!gb || ea.t <= eb.t);   // never after what b pops next
                    early++;
                    sim_event e = ea;
                    if (++st[s].at < st[s].npage) {
                        e.t = st[s].page[st[s].at];
                        sim_queue_slot_push_early(a, s, &e);
                    } else {
                        e.t = st[s].end;
                        sim_queue_slot_push_seq(a, s, &e, st[s].seq);
                    }
                }
                ck_assert(ga == gb);
                if (!ga) continue;
                pops++;
                ck_assert_msg(ea.seq == eb.seq && ea.t == eb.t && ea.arg[0] == eb.arg[0],
                              "nslot %u op %d: popped seq %llu t %lld, whole %llu %lld", nslot, op,
                              (unsigned long long)ea.seq, (long long)ea.t,
                              (unsigned long long)eb.seq, (long long)eb.t);
                now = ea.t;
                if (ea.kind == 2) st[ea.dst].seq = 0;
                sim_time pa = INT64_MAX, pb = INT64_MAX;
                sim_queue_peek_time(a, &pa);
                sim_queue_peek_time(b, &pb);
                ck_assert_msg((pa <= now) == (pb <= now), "op %d: due now %d in parts, %d whole",
                              op, pa <= now, pb <= now);
            }
            ck_assert_uint_eq(sim_queue_size(a), sim_queue_size(b));
            ck_assert_uint_eq(sim_queue_popped(a), sim_queue_popped(b));
        }
        ck_assert_uint_eq(sim_queue_early_popped(a), early);
        ck_assert_msg(early > 1000 && pops > 5000, "%llu early, %llu others popped",
                      (unsigned long long)early, (unsigned long long)pops);
        // an early event cancelled leaves no lower bound; one pops before a first event of its
        // time pushed before it
        sim_queue *q = sim_queue_create(4);
        sim_queue_slots(q, 2);
        sim_event e1 = {.t = 50, .kind = 1}, e2 = {.t = 50, .dst = 1, .kind = 2};
        sim_queue_push_first(q, &e1);
        sim_queue_slot_push_early(q, 1, &e2);
        sim_event got;
        ck_assert(sim_queue_pop(q, &got) && got.kind == 2);
        sim_queue_slot_push_early(q, 1, &(sim_event){.t = 20, .dst = 1, .kind = 2});
        sim_queue_slot_cancel(q, 1);
        sim_time pt = 0;
        ck_assert(sim_queue_peek_time(q, &pt) && pt == 50);
        ck_assert(sim_queue_pop(q, &got) && got.kind == 1);
        ck_assert_uint_eq(sim_queue_popped(q), 1);
        ck_assert_uint_eq(sim_queue_early_popped(q), 1);
        sim_queue_destroy(q);
        sim_queue_destroy(a);
        sim_queue_destroy(b);
    }
}
END_TEST

START_TEST(test_link_shares_bandwidth_fairly) {
    // two flows of 1 GB and 3 GB on a 1 GB/s link: both run at 0.5 GB/s until the first ends
    // at 2 s, then the second alone: ends at 2 + 2 = 4 s.
    sim_link l;
    sim_link_init(&l, 1e9, 0);
    sim_link_add(&l, 0, 1e9, 1);
    sim_link_add(&l, 0, 3e9, 2);
    sim_time t = sim_link_next_ns(&l, 0);
    ck_assert_msg(llabs(t - 2000000000LL) <= 1, "first end %lld", (long long)t);
    uint64_t tag;
    ck_assert(sim_link_pop_done(&l, t, &tag));
    ck_assert_uint_eq(tag, 1);
    ck_assert(!sim_link_pop_done(&l, t, &tag));
    t = sim_link_next_ns(&l, t);
    ck_assert_msg(llabs(t - 4000000000LL) <= 2, "second end %lld", (long long)t);
    ck_assert(sim_link_pop_done(&l, t, &tag));
    ck_assert_uint_eq(tag, 2);
    sim_link_free(&l);
}
END_TEST

// Write-downs on an SSD write link made n at a time (sim_link_write_down) leave the link, the
// store and the backlog peak where n writes one at a time leave them: that arithmetic is
// written out here as the simulator made it, each write's time rounded on its own and the
// store's write bandwidth (when set) shared by every link. Rounding n writes' bytes at once,
// or leaving the store out, fails it.
START_TEST(test_write_downs_match_one_at_a_time) {
    static sim_config cfg;   // only kv.ssd.store_write_Bps is read
    sim_cluster *c = kvf_calloc(1, sizeof *c);
    c->cfg = &cfg;
    uint32_t ids[2] = {sim_link_new(c, 3.7e9, 0, 0, SIM_LINK_SSDW),
                       sim_link_new(c, 1.1e9, 0, 0, SIM_LINK_SSDW)};
    sim_time busy[2] = {0, 0}, store = 0;
    double peak = 0;
    kvf_rng r;
    kvf_rng_init(&r, 11, 0);
    for (int step = 0; step < 4000; step++) {
        cfg.kv.ssd.store_write_Bps = step < 2000 ? 0 : 2.9e9;
        c->now += (sim_time)kvf_rng_below(&r, 40000000);
        uint32_t k = kvf_rng_below(&r, 2), n = kvf_rng_below(&r, 40);
        double bytes = 1e5 + 3e7 * kvf_rng_uniform(&r);
        sim_link_write_down(c, ids[k], bytes, n);
        double Bps = k ? 1.1e9 : 3.7e9, sw = cfg.kv.ssd.store_write_Bps;
        for (uint32_t i = 0; i < n; i++) {
            sim_time start = busy[k] > c->now ? busy[k] : c->now;
            busy[k] = start + (sim_time)llround(bytes / Bps * 1e9);
            if (sw > 0) {
                sim_time s0 = store > c->now ? store : c->now;
                store = s0 + (sim_time)llround(bytes / sw * 1e9);
                if (store > busy[k]) busy[k] = store;
            }
            double backlog = (double)(busy[k] - c->now) * 1e-9;
            if (backlog > peak) peak = backlog;
        }
        ck_assert_msg(c->links[ids[k]].busy_until == busy[k], "step %d: link busy until %lld, %lld",
                      step, (long long)c->links[ids[k]].busy_until, (long long)busy[k]);
        ck_assert_msg(c->store_busy_until == store, "step %d: store busy until %lld, %lld", step,
                      (long long)c->store_busy_until, (long long)store);
        ck_assert_msg(c->m.ssd_write_backlog_s_peak == peak, "step %d: peak %.17g, %.17g", step,
                      c->m.ssd_write_backlog_s_peak, peak);
    }
    ck_assert_msg(peak > 0.5, "the writes never queued (peak %.3f s)", peak);
    for (size_t i = 0; i < c->n_links; i++)
        sim_link_free(&c->links[i].link);
    free(c->links);
    free(c);
}
END_TEST

START_TEST(test_bcache_lru_and_retention) {
    int64_t ret[TRC_CLASS_COUNT] = {100, 50, 0, 0, 0};   // chatbot 100 ns, agent 50 ns
    sim_bcache c;
    sim_bcache_init(&c, 3, ret);
    uint64_t ev = 0;
    ck_assert(!sim_bcache_put(&c, 1, 0, TRC_CLASS_CHATBOT, &ev));
    ck_assert(!sim_bcache_put(&c, 2, 1, TRC_CLASS_CHATBOT, &ev));
    ck_assert(!sim_bcache_put(&c, 3, 2, TRC_CLASS_AGENT, &ev));
    sim_bcache_touch(&c, 1, 3, TRC_CLASS_CHATBOT);   // 2 is now the LRU
    ck_assert(sim_bcache_put(&c, 4, 4, TRC_CLASS_CHATBOT, &ev));
    ck_assert_uint_eq(ev, 2);
    ck_assert(c.used <= c.capacity);
    ck_assert(sim_bcache_has(&c, 3, 51));         // agent entry lives 50 ns
    ck_assert(!sim_bcache_has(&c, 3, 52 + 50));   // ... and is never hit after
    ck_assert(sim_bcache_has(&c, 1, 102));
    ck_assert(!sim_bcache_has(&c, 1, 103));
    ck_assert_uint_eq(c.expired, 2);
    // many inserts keep the count within capacity and the hash consistent
    for (uint64_t i = 100; i < 5000; i++)
        sim_bcache_put(&c, i, 200 + (sim_time)i, 0, &ev);
    ck_assert_uint_eq(c.used, 3);
    ck_assert(sim_bcache_has(&c, 4999, 5199) && sim_bcache_has(&c, 4997, 5199));
    ck_assert(!sim_bcache_has(&c, 4996, 5199));
    sim_bcache_free(&c);
}
END_TEST

START_TEST(test_hist_percentiles_within_resolution) {
    // the ITL histogram against exact order statistics of the same values
    sim_hist h;
    sim_hist_init(&h);
    kvf_rng r;
    kvf_rng_init(&r, 3, 0);
    enum { N = 20000 };
    static double v[N];
    for (int i = 0; i < N; i++) {
        v[i] = i % 10 == 0 ? 0 : kvf_rng_lognormal(&r, 2.5, 1.0);   // ms, with exact zeros
        sim_hist_add(&h, v[i], 1);
    }
    kvf_sort_doubles(v, N);
    double ps[] = {50, 90, 99};
    for (int k = 0; k < 3; k++) {
        double exact = v[(size_t)(ps[k] / 100.0 * N) - 1], got = sim_hist_percentile(&h, ps[k]);
        ck_assert_msg(fabs(got - exact) <= 0.008 * exact + 1e-9,
                      "p%.0f: histogram %.4f, exact %.4f", ps[k], got, exact);
    }
    ck_assert_msg(sim_hist_percentile(&h, 5) == 0, "zeros lost");
    ck_assert_uint_eq(h.total, N);
    sim_hist_free(&h);
}
END_TEST

static int cmp_double_ref(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// kvf_sort_doubles (a radix sort from 512 values on) against qsort with the plain comparison,
// bit for bit: latencies with repeats and exact zeros, negatives, infinities, subnormals,
// values spanning every exponent, sizes on either side of the radix threshold, presorted and
// reversed input, one value repeated, and arrays with a NaN or a negative zero (which keep
// qsort's order: every such array must come back as qsort leaves it).
START_TEST(test_sort_doubles_matches_qsort) {
    kvf_rng r;
    kvf_rng_init(&r, 11, 0);
    enum { N = 5000 };
    static double v[N], w[N];
    const size_t sizes[] = {0, 1, 2, 7, 511, 512, 513, 1000, N};
    for (int kind = 0; kind < 9; kind++)
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            size_t n = sizes[si];
            for (size_t i = 0; i < n; i++) {
                double x;
                switch (kind) {
                case 0:   // latencies (ms), a tenth exact zeros
                    x = i % 10 == 0 ? 0 : kvf_rng_lognormal(&r, 2.5, 1.0);
                    break;
                case 1:   // few distinct values
                    x = (double)kvf_rng_below(&r, 5) * 0.25;
                    break;
                case 2:   // signed, with infinities and subnormals
                    x = (kvf_rng_uniform(&r) - 0.5) * 1e6;
                    if (i % 97 == 0) x = i % 2 ? INFINITY : -INFINITY;
                    if (i % 89 == 0) x = (i % 2 ? 1 : -1) * 4.9e-324 * (double)(i + 1);
                    break;
                case 3: {   // every exponent
                    uint64_t u = kvf_rng_u64(&r) & ~(0x7ffULL << 52);
                    u |= (uint64_t)kvf_rng_below(&r, 2047) << 52;
                    memcpy(&x, &u, sizeof x);
                    break;
                }
                case 4:   // presorted
                    x = (double)i * 0.5 - 100;
                    break;
                case 5:   // reversed
                    x = -(double)i * 3;
                    break;
                case 6:   // one value
                    x = 42.125;
                    break;
                case 7:   // a NaN among latencies
                    x = i == n / 2 ? NAN : kvf_rng_uniform(&r);
                    break;
                default:   // negative and positive zeros among latencies
                    x = i % 3 == 0 ? (i % 2 ? -0.0 : 0.0) : kvf_rng_uniform(&r);
                    break;
                }
                v[i] = w[i] = x;
            }
            kvf_sort_doubles(v, n);
            qsort(w, n, sizeof *w, cmp_double_ref);
            ck_assert_msg(n == 0 || !memcmp(v, w, n * sizeof *v),
                          "kind %d, %zu values: not qsort's order", kind, n);
            for (size_t i = 1; kind < 7 && i < n; i++)
                ck_assert_msg(v[i - 1] <= v[i], "kind %d, %zu values: unsorted at %zu", kind, n, i);
        }
}
END_TEST

// A run's gaps in one call (sim_hist_add_gaps_ns, which bins a gap anew only when it leaves
// the bin of the one before) against every gap added one by one: the same bins, total and
// sum, on slowly growing gaps (a decode run's), on gaps that jump about, with zero and 1 ns
// gaps (the bins below the log-linear range) and across bin edges.
START_TEST(test_hist_gaps_match_one_by_one) {
    kvf_rng r;
    kvf_rng_init(&r, 7, 0);
    for (int trial = 0; trial < 400; trial++) {
        enum { M = 600 };
        int64_t ends[M];
        ends[0] = (int64_t)kvf_rng_below(&r, 1000000);
        int64_t gap = 1 + (int64_t)kvf_rng_below(&r, trial % 4 == 0 ? 4 : 20000000);
        for (int j = 1; j < M; j++) {
            if (trial % 3 == 0)
                gap = (int64_t)kvf_rng_below(&r, 50000000);   // jumping about, zeros too
            else
                gap += (int64_t)kvf_rng_below(&r, trial % 3 == 1 ? 3 : 20000);   // growing
            ends[j] = ends[j - 1] + gap;
        }
        uint32_t m = 2 + (uint32_t)kvf_rng_below(&r, M - 1);
        uint64_t w = 1 + kvf_rng_below(&r, 5);
        // the growing trials' gaps never decrease: the bisecting path must agree too
        bool rising = trial % 3 != 0;
        for (int j = 2; rising && j < M; j++)
            ck_assert(ends[j] - ends[j - 1] >= ends[j - 1] - ends[j - 2]);
        for (int path = 0; path < 1 + rising; path++) {
            sim_hist a, b;
            sim_hist_init(&a);
            sim_hist_init(&b);
            sim_hist_add_gaps_ns(&a, ends, m, w, path == 1);
            for (uint32_t j = 1; j < m; j++)
                sim_hist_add_ns(&b, ends[j] - ends[j - 1], w);
            ck_assert_uint_eq(a.total, b.total);
            ck_assert(a.sum_ns == b.sum_ns);
            size_t nb = a.nbins > b.nbins ? a.nbins : b.nbins;
            for (size_t k = 0; k < nb; k++) {
                uint64_t ca = k < a.nbins ? a.count[k] : 0, cb = k < b.nbins ? b.count[k] : 0;
                ck_assert_msg(ca == cb, "trial %d bin %zu (%s): %llu in one call, %llu one by one",
                              trial, k, path ? "rising" : "gap by gap", (unsigned long long)ca,
                              (unsigned long long)cb);
            }
            sim_hist_free(&a);
            sim_hist_free(&b);
        }
    }
}
END_TEST

// A metric array grows from the heap into a table mapping (2 MiB on) and on by mremap: every
// value kept in order across both moves, the array freed and reused either side of the line.
START_TEST(test_samples_keep_values_across_growth) {
    for (int round = 0; round < 2; round++) {
        sim_samples s = {0};
        size_t n = round ? 1000 : 1300000;   // below the line; past it and two doublings more
        size_t moves = 0;
        double *last = NULL;
        for (size_t i = 0; i < n; i++) {
            sim_samples_add(&s, (double)i * 0.5 - 7);
            if (s.v != last) moves++, last = s.v;
            if ((i & (i + 1)) == 0 || i + 1 == n)   // at every power of two: all values so far
                for (size_t k = 0; k <= i; k++)
                    if (s.v[k] != (double)k * 0.5 - 7)   // (ck_assert per value: a pipe write each)
                        ck_abort_msg("value %zu lost at %zu added", k, i + 1);
        }
        ck_assert_uint_eq(s.n, n);
        ck_assert_uint_ge(s.cap, n);
        ck_assert_uint_ge(moves, 1);
        sim_samples_free(&s);
        ck_assert_ptr_null(s.v);
        ck_assert_uint_eq(s.n, 0);
        ck_assert_uint_eq(s.cap, 0);
        sim_samples_add(&s, 3);   // reusable after a free
        ck_assert(s.v[0] == 3);
        sim_samples_free(&s);
    }
}
END_TEST

// ---- end to end on a real trace ----------------------------------------------------------------
static char *summary_without_sim(json_t *s) {
    json_t *c = json_deep_copy(s);
    json_object_del(c, "sim");
    char *txt = json_dumps(c, JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(c);
    return txt;
}

static char *db_digest(const char *dir) {
    char path[1100];
    snprintf(path, sizeof path, "%s/results.db", dir);
    sqlite3 *db;
    ck_assert(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    const char *q[] = {"SELECT * FROM request ORDER BY id",
                       "SELECT * FROM timeseries ORDER BY t_s, pool, instance, metric",
                       "SELECT * FROM summary WHERE key NOT LIKE 'sim.%' ORDER BY key"};
    size_t cap = 1 << 20, n = 0;
    char *out = malloc(cap);
    for (int k = 0; k < 3; k++) {
        sqlite3_stmt *st;
        ck_assert(sqlite3_prepare_v2(db, q[k], -1, &st, NULL) == SQLITE_OK);
        while (sqlite3_step(st) == SQLITE_ROW)
            for (int i = 0; i < sqlite3_column_count(st); i++) {
                const unsigned char *t = sqlite3_column_text(st, i);
                size_t m = t ? strlen((const char *)t) : 4;
                if (n + m + 2 > cap) out = realloc(out, cap *= 2);
                memcpy(out + n, t ? (const char *)t : "NULL", m);
                n += m;
                out[n++] = '|';
            }
        sqlite3_finalize(st);
    }
    out[n] = 0;
    sqlite3_close(db);
    return out;
}

START_TEST(test_run_is_deterministic) {
    const char *sets[] = {"workload.limit_requests=1500"};
    char d1[] = "/tmp/kvf_det1_XXXXXX", d2[] = "/tmp/kvf_det2_XXXXXX",
         d3[] = "/tmp/kvf_det3_XXXXXX";
    ck_assert(mkdtemp(d1) && mkdtemp(d2) && mkdtemp(d3));
    kvt_tmp_register(d1), kvt_tmp_register(d2), kvt_tmp_register(d3);
    json_t *a = run_with(d1, sets, 1), *b = run_with(d2, sets, 1);
    char *ta = summary_without_sim(a), *tb = summary_without_sim(b);
    ck_assert_msg(!strcmp(ta, tb), "same seed gave different summaries");
    char *da = db_digest(d1), *db = db_digest(d2);
    ck_assert_msg(strlen(da) > 1000, "database nearly empty");
    ck_assert_msg(!strcmp(da, db), "same seed gave different databases");
    const char *sets2[] = {"workload.limit_requests=1500", "seed=2"};
    json_t *c = run_with(d3, sets2, 2);
    char *tc = summary_without_sim(c);
    ck_assert_msg(strcmp(ta, tc) != 0, "another seed gave the same summary");
    free(ta), free(tb), free(tc), free(da), free(db);
    json_decref(a), json_decref(b), json_decref(c);
}
END_TEST

// The first row of query sql on dir/results.db: its first n columns as doubles into v.
static void db_row(const char *dir, const char *sql, double *v, int n) {
    char path[1100];
    snprintf(path, sizeof path, "%s/results.db", dir);
    sqlite3 *db;
    ck_assert(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *st;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s", sql);
    ck_assert(sqlite3_step(st) == SQLITE_ROW);
    for (int i = 0; i < n; i++)
        v[i] = sqlite3_column_double(st, i);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

// The time series covers the whole run: its token rates, each over the time its row covers
// (from the row before), add up to the summary's tokens, also where the run ends mid-interval
// and where it is shorter than one interval. Without the closing part-interval a 300 s
// interval left 13 % of the output out, and a 1000 s one every row.
START_TEST(test_series_cover_the_run) {
    const char *iv[] = {"10", "300", "1000"};
    for (int k = 0; k < 3; k++) {
        char d[] = "/tmp/kvf_series_XXXXXX", set[64], path[1100];
        ck_assert(mkdtemp(d));
        kvt_tmp_register(d);
        snprintf(set, sizeof set, "output.sample_interval_s=%s", iv[k]);
        const char *sets[] = {"workload.limit_requests=2000", set};
        json_t *s = run_with(d, sets, 2);
        snprintf(path, sizeof path, "%s/results.db", d);
        sqlite3 *db;
        ck_assert(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
        const char *metric[] = {"output_tok_s", "input_tok_s"};
        double tokens[2] = {0, 0}, t_end = 0;
        long rows = 0;
        for (int m = 0; m < 2; m++) {
            sqlite3_stmt *st;
            ck_assert(sqlite3_prepare_v2(db,
                                         "SELECT t_s, value FROM timeseries WHERE metric = ? AND "
                                         "pool = 'cluster' ORDER BY t_s",
                                         -1, &st, NULL) == SQLITE_OK);
            sqlite3_bind_text(st, 1, metric[m], -1, SQLITE_STATIC);
            double prev = 0;
            while (sqlite3_step(st) == SQLITE_ROW) {
                double t = sqlite3_column_double(st, 0);
                tokens[m] += sqlite3_column_double(st, 1) * (t - prev);
                prev = t_end = t;
                rows += m == 0;
            }
            sqlite3_finalize(st);
        }
        sqlite3_close(db);
        double out = kvt_num(s, "invariants.output_tokens_produced");
        double in = kvt_num(s, "cache.hit_tokens") + kvt_num(s, "cache.miss_tokens");
        ck_assert_msg(rows > 0, "interval %s s: no time series", iv[k]);
        ck_assert_msg(fabs(tokens[0] - out) <= 1e-6 * out,
                      "interval %s s: the series holds %.1f output tokens, the run %.0f", iv[k],
                      tokens[0], out);
        ck_assert_msg(fabs(tokens[1] - in) <= 1e-6 * in,
                      "interval %s s: the series holds %.1f prompt tokens, the run %.0f", iv[k],
                      tokens[1], in);
        // the last row is at the run's end, the last event, not at a sampling instant past it
        double span = kvt_num(s, "sim.simulated_s");
        ck_assert_msg(fabs(t_end - span) <= 1e-6 * span,
                      "interval %s s: last row at %.3f s of %.3f", iv[k], t_end, span);
        json_decref(s);
    }
}
END_TEST

// The steady window (output.steady_from_s .. steady_to_s): its latencies are those of the
// completed requests arriving in it, as their rows give them, and its throughput the sampled
// intervals' inside it, as the time series gives them; a run without one has no "steady".
START_TEST(test_steady_window_matches_rows_and_series) {
    char d[] = "/tmp/kvf_steady_XXXXXX";
    ck_assert(mkdtemp(d));
    kvt_tmp_register(d);
    const char *sets[] = {"workload.limit_requests=2000", "output.steady_from_s=100",
                          "output.steady_to_s=300"};
    json_t *s = run_with(d, sets, 3);
    double r[2], ts[2];
    db_row(d,
           "SELECT count(*), avg(ttft_s) * 1000 FROM request WHERE status = 'completed' AND "
           "arrival_s >= 100 AND arrival_s < 300",
           r, 2);
    db_row(d,
           "SELECT sum(value) * 10, count(*) FROM timeseries WHERE pool = 'cluster' AND metric = "
           "'output_tok_s' AND t_s > 109.999 AND t_s < 300.001",
           ts, 2);
    double n = r[0], ttft = r[1], out = ts[0], rows = ts[1];
    ck_assert_msg(n > 100 && kvt_num(s, "steady.requests") == n, "steady requests %g, rows %g",
                  kvt_num(s, "steady.requests"), n);
    ck_assert_msg(fabs(kvt_num(s, "steady.ttft_ms.mean") - ttft) <= 1e-6 * ttft,
                  "steady TTFT mean %.6f ms, rows %.6f ms", kvt_num(s, "steady.ttft_ms.mean"),
                  ttft);
    ck_assert_msg(rows == 20 && kvt_num(s, "steady.sampled_s") == 200,
                  "%g sampled intervals inside, %g s", rows, kvt_num(s, "steady.sampled_s"));
    ck_assert_msg(fabs(kvt_num(s, "steady.output_tok_s") * 200 - out) <= 1e-6 * out,
                  "steady output %.3f tok/s over 200 s, series %.1f tokens",
                  kvt_num(s, "steady.output_tok_s"), out);
    double u = kvt_num(s, "steady.utilization.decode");
    ck_assert_msg(u > 0 && u <= 1, "steady decode utilisation %g", u);
    // prompt tokens as the series counts them (at their first token)
    double in;
    db_row(d,
           "SELECT sum(value) * 10 FROM timeseries WHERE pool = 'cluster' AND metric = "
           "'input_tok_s' AND t_s > 109.999 AND t_s < 300.001",
           &in, 1);
    ck_assert_msg(fabs(kvt_num(s, "steady.input_tok_s") * 200 - in) <= 1e-6 * in,
                  "steady input %.3f tok/s over 200 s, series %.1f tokens",
                  kvt_num(s, "steady.input_tok_s"), in);
    json_decref(s);
    // a window over a run with an idle gap (300 requests, 600 s of nothing, 300 more): its rates
    // are over the whole window, the gap the samples skipped included (they were over the
    // sampled intervals only, 420 of 1,000 s, and 2.4x too high)
    char gap[1100];
    snprintf(gap, sizeof gap, "%s/gap.jsonl", d);
    FILE *f = fopen(gap, "w");
    ck_assert(f);
    for (int i = 0; i < 600; i++) {
        double t = i < 300 ? i * 2.0 / 3 : 800 + (i - 300) * 2.0 / 3;
        fprintf(f,
                "{\"timestamp\":%d,\"input_length\":2048,\"output_length\":100,\"hash_ids\":[%d,%d,"
                "%d,%d]}\n",
                (int)(t * 1000), i * 10, i * 10 + 1, i * 10 + 2, i * 10 + 3);
    }
    fclose(f);
    const char *g[] = {"workload.bucket=as_recorded", "output.steady_from_s=0",
                       "output.steady_to_s=100000"};
    s = kvt_run("quickstart.yaml", gap, g, 3, NULL);
    double span = kvt_num(s, "sim.simulated_s"),
           produced = kvt_num(s, "invariants.output_tokens_produced");
    ck_assert_msg(fabs(kvt_num(s, "steady.sampled_s") - span) < 1e-6 * span,
                  "the window covers %.3f s of a %.3f s run", kvt_num(s, "steady.sampled_s"), span);
    ck_assert_msg(fabs(kvt_num(s, "steady.output_tok_s") * span - produced) <= 1e-6 * produced,
                  "steady output %.3f tok/s over %.1f s, the run produced %.0f",
                  kvt_num(s, "steady.output_tok_s"), span, produced);
    // a window over the whole run (past its end) bills the run's own day
    const char *ek[] = {"revenue_per_day_usd", "cost_per_day_usd", "margin", "gpu_hours"};
    for (int k = 0; k < 4; k++) {
        char a[80], b[80];
        snprintf(a, sizeof a, "steady.economics.%s", ek[k]);
        snprintf(b, sizeof b, "economics.%s", ek[k]);
        ck_assert_msg(fabs(kvt_num(s, a) - kvt_num(s, b)) <= 1e-9 * fabs(kvt_num(s, b)),
                      "%s %.9g, the run's %.9g", a, kvt_num(s, a), kvt_num(s, b));
    }
    json_decref(s);
    const char *plain[] = {"workload.limit_requests=300"};
    s = run_with(NULL, plain, 1);
    ck_assert_msg(!json_object_get(s, "steady"), "a run without a window has \"steady\"");
    json_decref(s);
}
END_TEST

// The steady window's economics, by hand from the request rows: revenue a day is the window's
// completed arrivals' tokens at the prices over the window's 200 s, the fleet (6 GPUs at
// 2 USD an hour, no store) costs the same every day, GPU-hours are the window's. The whole
// run's revenue a day is lower: its span includes the climb and the drain.
START_TEST(test_steady_economics_by_hand) {
    char d[] = "/tmp/kvf_steadyecon_XXXXXX";
    ck_assert(mkdtemp(d));
    kvt_tmp_register(d);
    const char *sets[] = {"workload.limit_requests=2000",
                          "output.steady_from_s=100",
                          "output.steady_to_s=300",
                          "economics.offpeak=null",
                          "kv_cache.ssd.capacity_tb=0",
                          "economics.cost_model=rent",
                          "economics.gpu_hour_usd=2",
                          "economics.prices_per_mtok.input_hit=0.1",
                          "economics.prices_per_mtok.input_miss=1",
                          "economics.prices_per_mtok.output=2"};
    json_t *s = run_with(d, sets, sizeof sets / sizeof *sets);
    double t[3];
    db_row(d,
           "SELECT sum(cached_tokens), sum(input_tokens - cached_tokens), sum(output_tokens) FROM "
           "request WHERE status = 'completed' AND arrival_s >= 100 AND arrival_s < 300",
           t, 3);
    double rev = (t[0] * 0.1 + t[1] * 1 + t[2] * 2) / 1e6 / 200 * 86400;
    double cost = 6 * 2.0 * 24;
    ck_assert_msg(fabs(kvt_num(s, "steady.economics.revenue_per_day_usd") - rev) <= 1e-9 * rev,
                  "steady revenue %.6f USD/day, by hand %.6f",
                  kvt_num(s, "steady.economics.revenue_per_day_usd"), rev);
    ck_assert_double_eq_tol(kvt_num(s, "steady.economics.cost_per_day_usd"), cost, 1e-9);
    ck_assert_double_eq_tol(kvt_num(s, "steady.economics.gpu_hours"), 6 * 200 / 3600.0, 1e-9);
    ck_assert_double_eq_tol(kvt_num(s, "steady.economics.margin"), 1 - cost / rev, 1e-9);
    ck_assert_double_eq_tol(kvt_num(s, "steady.economics.hit_rate"), t[0] / (t[0] + t[1]), 1e-9);
    ck_assert_msg(kvt_num(s, "economics.revenue_per_day_usd") < rev,
                  "the whole run's %.3f USD/day against the window's %.3f",
                  kvt_num(s, "economics.revenue_per_day_usd"), rev);
    // the hit-rate sensitivity saves the run's prefill work per unit of hit rate (the window's
    // hit rate differs: it divided the run's saving by it, 0.85 where the run reads 0.98)
    ck_assert_double_eq_tol(kvt_num(s, "steady.economics.hit_saving_per_unit_hit_rate"),
                            kvt_num(s, "economics.hit_saving_per_unit_hit_rate"), 1e-9);
    json_decref(s);
    // a window the run never reaches has no economics (null), not a day of no traffic
    const char *late[] = {"workload.limit_requests=300", "output.steady_from_s=1000000",
                          "output.steady_to_s=2000000"};
    s = run_with(NULL, late, 3);
    json_t *se = json_object_get(json_object_get(s, "steady"), "economics");
    ck_assert_msg(se && json_is_null(se), "a window past the run: steady.economics %s",
                  se ? "is not null" : "missing");
    json_decref(s);
    // a window in hours whose day_profile share is 0 cannot be a day: refused (exit 2)
    int rc = kvt_sh("%s run scenarios/quickstart.yaml -q --no-report -o %s/dp --trace %s "
                    "--set workload.limit_requests=2000 --set economics.trace_start_utc=00:55 "
                    "--set 'economics.day_profile=[0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
                    "1]' --set output.steady_from_s=0 --set output.steady_to_s=200",
                    kvt_bin(), d, kvt_shared_trace("mooncake_conversation.jsonl"));
    ck_assert_msg(rc == 2 && strstr(kvt_err, "output.steady_from_s") &&
                      strstr(kvt_err, "day_profile"),
                  "rc %d: %s", rc, kvt_err);
}
END_TEST

// The integral of a pool's series metric over the rows in (from_s, to_s]: each row's value
// times the time since the row before it (the first row: since 0).
static double series_integral(const char *dir, const char *pool, const char *metric, double from_s,
                              double to_s, double *lo, double *hi) {
    char path[1100];
    snprintf(path, sizeof path, "%s/results.db", dir);
    sqlite3 *db;
    ck_assert(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *st;
    ck_assert(sqlite3_prepare_v2(db,
                                 "SELECT t_s, value FROM timeseries WHERE pool = ? AND metric = ? "
                                 "ORDER BY t_s",
                                 -1, &st, NULL) == SQLITE_OK);
    sqlite3_bind_text(st, 1, pool, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, metric, -1, SQLITE_STATIC);
    double sum = 0, prev = 0;
    *lo = INFINITY, *hi = -INFINITY;
    while (sqlite3_step(st) == SQLITE_ROW) {
        double t = sqlite3_column_double(st, 0), v = sqlite3_column_double(st, 1);
        if (t > from_s + 1e-9 && t <= to_s + 1e-9) {
            sum += v * (t - prev);
            *lo = fmin(*lo, v), *hi = fmax(*hi, v);
        }
        prev = t;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return sum;
}

// The steady window's per-GPU rates and busy shares, and the series' utilisation, are over the
// instance time of the interval, a failed, starting or draining instance's included as the
// whole run's figures count it (the GPUs are held), not over the instances serving at the
// sample instant. Decode failing every 18 s (back after 20 s) on quickstart's 2 decode GPUs:
// steady decode was 708 tok/s a GPU at 1.033 busy while the cluster made 870 tok/s; prefill
// autoscaled from 1 to 4 instances read 17,050 tok/s a GPU at 0.403 busy (whole run 9,057 and
// 0.214); the series' utilisation was cut at 1.
START_TEST(test_steady_window_counts_instance_time) {
    char d[] = "/tmp/kvf_steady_XXXXXX", d2[1100];
    ck_assert(mkdtemp(d));
    kvt_tmp_register(d);
    const char *fail[] = {"workload.limit_requests=1500", "cluster.decode.failures.mtbf_h=0.005",
                          "cluster.decode.failures.mttr_s=20", "output.steady_from_s=50",
                          "output.steady_to_s=400"};
    const char *none[] = {"workload.limit_requests=1500", "output.steady_from_s=50",
                          "output.steady_to_s=400"};
    for (int run = 0; run < 2; run++) {
        snprintf(d2, sizeof d2, "%s/%s", d, run ? "none" : "fail");
        json_t *s = kvt_run("quickstart.yaml", NULL, run ? none : fail, run ? 3 : 5, d2);
        const char *what = run ? "no failures" : "decode failing";
        ck_assert_msg(run || kvt_num(s, "failures.count") >= 10, "%s: %g failures", what,
                      kvt_num(s, "failures.count"));
        // a failed instance's GPUs are held (billed): the window's GPU-seconds are its length
        // times the pool's GPUs, and tokens a GPU-second times them are the series' tokens
        double span = kvt_num(s, "steady.sampled_s"), lo, hi;
        double out = series_integral(d2, "cluster", "output_tok_s", 50, 400, &lo, &hi);
        double in = series_integral(d2, "cluster", "input_tok_s", 50, 400, &lo, &hi);
        double dg = kvt_num(s, "gpus.decode"), pg = kvt_num(s, "gpus.prefill");
        double dpg = kvt_num(s, "steady.decode_output_tok_s_per_gpu");
        double ppg = kvt_num(s, "steady.prefill_input_tok_s_per_gpu");
        ck_assert_msg(span == 350 && out > 0 && fabs(dpg * dg * span - out) <= 1e-6 * out,
                      "%s: steady decode %.3f tok/s a GPU x %g GPUs x %g s; the series made "
                      "%.1f output tokens",
                      what, dpg, dg, span, out);
        ck_assert_msg(fabs(ppg * pg * span - in) <= 1e-6 * in,
                      "%s: steady prefill %.3f tok/s a GPU x %g GPUs x %g s; the series took "
                      "%.1f prompt tokens",
                      what, ppg, pg, span, in);
        double su = kvt_num(s, "steady.utilization.decode");
        ck_assert_msg(su > 0 && su <= 1, "%s: steady decode utilisation %g", what, su);
        // the series' busy shares, each over its row's interval, add up to the whole run's
        // busy time (utilization.decode x the run x the pool's instances, all billed throughout)
        double T = kvt_num(s, "sim.simulated_s");
        double busy = series_integral(d2, "decode", "utilization", 0, T, &lo, &hi);
        double whole = kvt_num(s, "utilization.decode") * T;
        ck_assert_msg(fabs(busy - whole) <= 1e-6 * whole,
                      "%s: the series' decode utilisation integrates to %.4f s, the run's "
                      "busy share %.4f s",
                      what, busy, whole);
        ck_assert_msg(lo >= 0 && hi <= 1, "%s: series decode utilisation in [%g, %g]", what, lo,
                      hi);
        json_decref(s);
    }
    // prefill scaled by its KV use from 1 instance up to 4, each starting for 60 s (billed): a
    // window over the whole run gives the whole run's per-GPU input rate and busy share
    const char *scale[] = {
        "workload.limit_requests=1500",     "cluster.prefill.autoscale.metric=kv",
        "cluster.prefill.autoscale.up=0.3", "cluster.prefill.autoscale.down=0.05",
        "cluster.prefill.autoscale.max=4",  "cluster.prefill.autoscale.startup_s=60",
        "cluster.prefill.kv_tokens=40000",  "output.steady_from_s=0",
        "output.steady_to_s=100000"};
    json_t *s = kvt_run("quickstart.yaml", NULL, scale, 9, NULL);
    ck_assert_msg(kvt_num(s, "scaling.prefill.ups") > 0 && kvt_num(s, "scaling.prefill.downs") > 0,
                  "prefill did not scale: %g up, %g down", kvt_num(s, "scaling.prefill.ups"),
                  kvt_num(s, "scaling.prefill.downs"));
    double ppg = kvt_num(s, "steady.prefill_input_tok_s_per_gpu"),
           whole = kvt_num(s, "throughput.prefill_input_tok_s_per_gpu");
    ck_assert_msg(fabs(ppg - whole) <= 1e-6 * whole,
                  "steady over the run: prefill %.3f tok/s a GPU, the run %.3f", ppg, whole);
    double su = kvt_num(s, "steady.utilization.prefill"), wu = kvt_num(s, "utilization.prefill");
    ck_assert_msg(fabs(su - wu) <= 1e-6 * wu,
                  "steady over the run: prefill %.6f busy, the run %.6f", su, wu);
    json_decref(s);
}
END_TEST

static void check_invariants(json_t *s, const char *what) {
    json_t *rq = json_object_get(s, "requests");
    long long arrived = json_integer_value(json_object_get(rq, "arrived"));
    long long done = json_integer_value(json_object_get(rq, "completed"));
    long long rej = json_integer_value(json_object_get(rq, "rejected"));
    ck_assert_msg(arrived > 0 && arrived == done + rej,
                  "%s: arrived %lld != completed %lld + rejected %lld", what, arrived, done, rej);
    json_t *inv = json_object_get(s, "invariants");
    long long req = json_integer_value(json_object_get(inv, "output_tokens_requested"));
    long long got = json_integer_value(json_object_get(inv, "output_tokens_produced"));
    long long lost = json_integer_value(json_object_get(inv, "output_tokens_rejected"));
    ck_assert_msg(req == got + lost,
                  "%s: output tokens requested %lld, produced %lld + rejected %lld", what, req, got,
                  lost);
    ck_assert_msg(kvt_num(s, "invariants.kv_tokens_held_end") == 0,
                  "%s: KV not returned: %g tokens", what,
                  kvt_num(s, "invariants.kv_tokens_held_end"));
    ck_assert_msg(json_integer_value(json_object_get(inv, "tiers_over_capacity")) == 0,
                  "%s: a tier held more than its capacity", what);
    double hit = kvt_num(s, "cache.hit_tokens"), miss = kvt_num(s, "cache.miss_tokens");
    ck_assert_msg(hit + miss > 0 && miss >= arrived - rej, "%s: at least one token per prompt",
                  what);
}

START_TEST(test_invariants_on_real_traces) {
    // disaggregated, colocated, a starved decode pool that must preempt, and a tiny store
    const char *a[] = {"workload.limit_requests=3000"};
    json_t *s = run_with(NULL, a, 1);
    check_invariants(s, "disaggregated");
    json_decref(s);
    const char *b[] = {"workload.limit_requests=2000", "cluster.mode=colocated"};
    s = run_with(NULL, b, 2);
    check_invariants(s, "colocated");
    json_decref(s);
    // 80 GB - 30 % reserve - 16 GB of weights leaves ~40k tokens: a handful of requests
    const char *c[] = {"workload.limit_requests=2000", "cluster.decode.instances=1",
                       "kv_cache.activation_reserve=0.6"};
    s = run_with(NULL, c, 3);
    check_invariants(s, "preempting");
    ck_assert_msg(kvt_num(s, "steps.preemptions") > 0,
                  "expected preemptions on a starved decode pool");
    json_decref(s);
    const char *d[] = {"workload.limit_requests=2000", "kv_cache.ssd.capacity_tb=0.01",
                       "kv_cache.dram.gb_per_node=20", "kv_cache.write_through=false"};
    s = run_with(NULL, d, 4);
    check_invariants(s, "small store");
    json_decref(s);
}
END_TEST

// Writes an Azure-format CSV of n Poisson arrivals at rate lambda with fixed lengths.
static void write_poisson_csv(const char *path, int n, double lambda, int in, int out,
                              uint64_t seed) {
    FILE *f = fopen(path, "w");
    ck_assert(f);
    fprintf(f, "TIMESTAMP,ContextTokens,GeneratedTokens\n");
    kvf_rng r;
    kvf_rng_init(&r, seed, 1);
    double t = 0;
    for (int i = 0; i < n; i++) {
        t += kvf_rng_exp(&r, 1.0 / lambda);
        int h = (int)(t / 3600), m = (int)(t / 60) % 60;
        double s = fmod(t, 60);
        fprintf(f, "2023-11-16 %02d:%02d:%010.7f,%d,%d\n", h, m, s, in, out);
    }
    fclose(f);
}

// One in-process run of an Azure-format CSV on one prefill and one decode instance (no prefix
// cache, round-robin prefill router) with the extra keys given; returns summary.json.
static json_t *run_azure_csv(const char *csv, const char *const *extra, size_t n) {
    static sim_config cfg;
    kvf_err err = {0};
    sim_config_default(&cfg);
    const char *base[] = {"cluster.prefill.instances=1", "cluster.decode.instances=1",
                          "kv_cache.prefix_cache=false", "workload.format=azure",
                          "router.prefill=round_robin"};
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
        ck_assert_msg(sim_config_set(&cfg, base[i], &err) == KVF_OK, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(sim_config_set(&cfg, extra[i], &err) == KVF_OK, "%s", err.msg);
    char a[1200];
    snprintf(a, sizeof a, "workload.trace=%s", csv);
    ck_assert(sim_config_set(&cfg, a, &err) == KVF_OK);
    snprintf(cfg.dir, sizeof cfg.dir, "%s", src_dir());
    sim_run_opts o = {.quiet = true};
    void *sv = NULL;
    ck_assert_msg(sim_run(&cfg, &o, &sv, &err) == KVF_OK, "%s", err.msg);
    return sv;
}

// Requests arriving at the same instant at an idle instance share its first step, as a
// serving loop batches all that is queued when it forms one: their first tokens come together.
START_TEST(test_simultaneous_arrivals_share_a_step) {
    kvt_tmp_make("kvf_tie");
    const char *csv = kvt_tmp_path("tie.csv");
    FILE *f = fopen(csv, "w");
    ck_assert(f);
    fprintf(f, "TIMESTAMP,ContextTokens,GeneratedTokens\n");
    for (int i = 0; i < 4; i++)   // four at 00:00:10, one at 00:00:30
        fprintf(f, "2023-11-16 00:00:%s,%d,4\n", i < 3 ? "10.000" : "30.000", 512 + 64 * i);
    fclose(f);
    const char *sets[] = {"cluster.prefill.max_batch_tokens=8192"};
    json_t *sv = run_azure_csv(csv, sets, 1);
    ck_assert_int_eq((int)kvt_num(sv, "requests.completed"), 4);
    // three at once in one prefill step share one TTFT, the largest (sorted: the lone one's
    // own shorter step, then the three), so p50 = p99 and the mean lies below them
    double mean = kvt_num(sv, "ttft_ms.mean"), p50 = kvt_num(sv, "ttft_ms.p50");
    double p99 = kvt_num(sv, "ttft_ms.p99");
    ck_assert_msg(fabs(p50 - p99) < 1e-6 * p99,
                  "the simultaneous three differ: p50 %.4f, p99 %.4f ms", p50, p99);
    ck_assert_msg(mean < p50 * (1 - 1e-6),
                  "the lone request's step not shorter: mean %.4f, p50 %.4f", mean, p50);
    json_decref(sv);
    kvt_tmp_remove();
}
END_TEST

// serving.first_token_lag_steps: a prompt's first token reaches its client that share of its
// instance's next step later (the engine's output pipeline). One colocated instance, requests
// alone: the next step is a decode step of the same request, so TTFT grows by lag x its TPOT
// at lag 0; TPOT and the end to end do not move (the lag is in TTFT only).
START_TEST(test_first_token_lag_is_a_share_of_the_next_step) {
    kvt_tmp_make("kvf_lag");
    FILE *f = fopen(kvt_tmp_path("lag.csv"), "w");
    ck_assert(f);
    fprintf(f, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 00:00:10.000,1024,5\n"
               "2023-11-16 00:00:30.000,2048,5\n");
    fclose(f);
    double ttft[3], tpot[3], e2e[3];
    const char *lags[3] = {"0", "1", "0.5"};
    for (int i = 0; i < 3; i++) {
        int rc = kvt_sh("%s run scenarios/quickstart.yaml --trace %s --set workload.format=azure "
                        "--set cluster.mode=colocated --set cluster.decode.instances=0 --set "
                        "cluster.prefill.instances=1 --set serving.first_token_lag_steps=%s "
                        "--json --no-report -o %s --force",
                        kvt_bin(), kvt_tmp_path("lag.csv"), lags[i], kvt_tmp_path("out"));
        ck_assert_msg(rc == 0, "lag %s: exit %d: %s", lags[i], rc, kvt_err);
        json_error_t je;
        json_t *o = json_loads(kvt_out, 0, &je);
        ck_assert_msg(o, "%s", je.text);
        ttft[i] = kvt_num(o, "ttft_ms.mean"), tpot[i] = kvt_num(o, "tpot_ms.mean");
        e2e[i] = kvt_num(o, "e2e_ms.mean");
        json_decref(o);
    }
    for (int i = 1; i < 3; i++) {
        double lag = i == 1 ? 1 : 0.5;
        ck_assert_msg(fabs(ttft[i] - ttft[0] - lag * tpot[0]) < 0.01 * tpot[0],
                      "lag %g: TTFT %.4f ms, without %.4f, one decode step %.4f", lag, ttft[i],
                      ttft[0], tpot[0]);
        ck_assert_msg(fabs(e2e[i] - e2e[0]) < 1e-9 * e2e[0], "lag %g moved E2E", lag);
        ck_assert_msg(fabs(tpot[i] - tpot[0]) < 1e-9 * tpot[0], "lag %g moved TPOT: %.4f, %.4f",
                      lag, tpot[i], tpot[0]);
    }
    kvt_tmp_remove();
}
END_TEST

// A prompt's KV crosses the network from prefill to decode with or without a prefix cache:
// at 0.5 GB/s each request's E2E is its KV's bytes / 0.5 GB/s - bytes / 50 GB/s longer than at
// 50 GB/s (requests far apart: no queueing), its TTFT the same. Without the prefix cache the
// transfer took no time at all, at any bandwidth.
START_TEST(test_kv_transfer_without_prefix_cache) {
    char csv[] = "/tmp/kvf_xfer_XXXXXX.csv";
    int fd = mkstemps(csv, 4);
    ck_assert(fd >= 0);
    close(fd);
    write_poisson_csv(csv, 20, 0.05, 1024, 11, 5);
    json_t *r[2];
    const char *bw[2] = {"cluster.network.kv_transfer_GBps=50",
                         "cluster.network.kv_transfer_GBps=0.5"};
    for (int k = 0; k < 2; k++) {
        const char *sets[] = {"cluster.prefill.gpus_per_instance=1",
                              "cluster.decode.gpus_per_instance=1", bw[k]};
        r[k] = run_azure_csv(csv, sets, 3);
    }
    double n = kvt_num(r[0], "requests.completed");
    double bytes = kvt_num(r[0], "cache.kv_transfer_bytes") / n;
    double want = (bytes / 0.5e9 - bytes / 50e9) * 1e3;
    double got = kvt_num(r[1], "e2e_ms.mean") - kvt_num(r[0], "e2e_ms.mean");
    ck_assert_msg(n == 20 && bytes > 1e8, "%g requests, %g bytes each", n, bytes);
    ck_assert_msg(fabs(got - want) <= 0.01 * want, "E2E +%.3f ms at 0.5 GB/s, want +%.3f ms", got,
                  want);
    ck_assert_msg(kvt_num(r[1], "ttft_ms.mean") == kvt_num(r[0], "ttft_ms.mean"),
                  "TTFT %.3f ms vs %.3f ms", kvt_num(r[1], "ttft_ms.mean"),
                  kvt_num(r[0], "ttft_ms.mean"));
    json_decref(r[0]), json_decref(r[1]);
    unlink(csv);
}
END_TEST

START_TEST(test_md1_queueing_delay) {
    // One prefill instance serving one request per step (budget = prompt length): service time
    // D is deterministic, arrivals Poisson. M/D/1: Wq = rho * D / (2 (1 - rho)).
    char csv[] = "/tmp/kvf_md1_XXXXXX.csv";
    int fd = mkstemps(csv, 4);
    ck_assert(fd >= 0);
    close(fd);
    const int n = 40000, in = 2048;
    // first find D with a single request's TTFT
    const char *sets[] = {"cluster.prefill.gpus_per_instance=1",
                          "cluster.decode.gpus_per_instance=1",
                          "cluster.prefill.max_batch_tokens=2048"};
    write_poisson_csv(csv, 1, 1.0, in, 1, 3);
    json_t *sv = run_azure_csv(csv, sets, 3);
    double D = kvt_num(sv, "ttft_ms.mean") / 1e3;
    json_decref(sv);
    ck_assert_msg(D > 0.01 && D < 2, "service time %g s", D);
    double rho = 0.7, lambda = rho / D;
    write_poisson_csv(csv, n, lambda, in, 1, 11);
    sv = run_azure_csv(csv, sets, 3);
    double wq = kvt_num(sv, "ttft_ms.mean") / 1e3 - D;
    // the realised arrival rate (not the nominal one) sets rho
    double span = kvt_num(sv, "sim.simulated_s");
    double rho_real = (double)n / span * D;
    double want = rho_real * D / (2 * (1 - rho_real));
    printf("M/D/1: rho %.3f, D %.4f s, simulated Wq %.4f s, formula %.4f s (%+.2f %%)\n", rho_real,
           D, wq, want, 100 * (wq - want) / want);
    ck_assert_msg(fabs(wq - want) / want < 0.06,
                  "M/D/1: Wq %.4f s, formula %.4f s (rho %.3f, D %.4f s)", wq, want, rho_real, D);
    json_decref(sv);
    unlink(csv);
}
END_TEST

START_TEST(test_more_decode_instances_cut_tpot_under_overload) {
    const char *a[] = {"workload.limit_requests=2500", "workload.time_scale=0.25",
                       "cluster.prefill.instances=8", "cluster.decode.instances=1"};
    const char *b[] = {"workload.limit_requests=2500", "workload.time_scale=0.25",
                       "cluster.prefill.instances=8", "cluster.decode.instances=2"};
    json_t *s1 = run_with(NULL, a, 4), *s2 = run_with(NULL, b, 4);
    double t1 = kvt_num(s1, "tpot_ms.p90"), t2 = kvt_num(s2, "tpot_ms.p90");
    double e1 = kvt_num(s1, "e2e_ms.mean"), e2 = kvt_num(s2, "e2e_ms.mean");
    ck_assert_msg(t2 < t1, "TPOT p90: 1 decode %.2f ms, 2 decode %.2f ms", t1, t2);
    ck_assert_msg(e2 < e1, "E2E mean: 1 decode %.0f ms, 2 decode %.0f ms", e1, e2);
    json_decref(s1), json_decref(s2);
}
END_TEST

START_TEST(test_halving_load_cuts_ttft) {
    const char *a[] = {"workload.limit_requests=3000", "cluster.prefill.instances=2"};
    const char *b[] = {"workload.limit_requests=3000", "cluster.prefill.instances=2",
                       "workload.time_scale=2"};
    json_t *s1 = run_with(NULL, a, 2), *s2 = run_with(NULL, b, 3);
    double t1 = kvt_num(s1, "ttft_ms.mean"), t2 = kvt_num(s2, "ttft_ms.mean");
    ck_assert_msg(t2 < t1, "TTFT mean: full load %.1f ms, half load %.1f ms", t1, t2);
    json_decref(s1), json_decref(s2);
}
END_TEST

// Decode by running sums (O(1) per step) against the reference path that lists every sequence:
// the same runs, figure for figure, and the same request rows in the same order, on real
// traces, under overload with preemption (recompute and swap), colocated mixed batches, a
// sliding-window model, structured output and the calibrated step model.
static char *table_rows(const char *dir, const char *sql) {
    char db[1200];
    snprintf(db, sizeof db, "%s/results.db", dir);
    sqlite3 *h = NULL;
    ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    while (sqlite3_step(st) == SQLITE_ROW) {
        for (int i = 0; i < sqlite3_column_count(st); i++) {
            const char *t = (const char *)sqlite3_column_text(st, i);
            size_t l = t ? strlen(t) : 1;
            if (n + l + 2 >= cap) out = realloc(out, cap *= 2);
            memcpy(out + n, t ? t : "-", l);
            n += l;
            out[n++] = i + 1 < sqlite3_column_count(st) ? ',' : '\n';
        }
    }
    out[n] = 0;
    sqlite3_finalize(st);
    sqlite3_close(h);
    return out;
}

// Two runs' result directories made (kvt_tmp_make), for same_runs.
static void two_dirs(const char *prefix, char *d1, char *d2, size_t n) {
    char name[64];
    snprintf(name, sizeof name, "%s_a", prefix);
    kvt_tmp_make(name);
    snprintf(d1, n, "%s", kvt_tmp);
    snprintf(name, sizeof name, "%s_b", prefix);
    kvt_tmp_make(name);
    snprintf(d2, n, "%s", kvt_tmp);
}

// quickstart.yaml on a bundled trace twice, into two fresh directories d1 and d2 (prefix
// names them), the second time with *flag (one of kvt_run's switches) set.
static void run_twice(const char *prefix, const char *trace, const char *const *sets, int n,
                      bool *flag, json_t **a, json_t **b, char *d1, char *d2, size_t len) {
    two_dirs(prefix, d1, d2, len);
    const char *path = kvt_shared_trace(trace);
    *a = kvt_run("quickstart.yaml", path, sets, n, d1);
    *flag = true;
    *b = kvt_run("quickstart.yaml", path, sets, n, d2);
    *flag = false;
}

// Case k's two runs the same: summaries without the wall-clock "sim" object, request rows and
// time series in row order; then both summaries freed and both directories removed.
static void same_runs(size_t k, json_t *a, json_t *b, const char *d1, const char *d2) {
    json_object_del(a, "sim");
    json_object_del(b, "sim");
    char *ja = json_dumps(a, JSON_SORT_KEYS), *jb = json_dumps(b, JSON_SORT_KEYS);
    size_t i = 0;
    while (ja[i] && ja[i] == jb[i])
        i++;
    ck_assert_msg(!strcmp(ja, jb), "case %zu: summaries differ at ...%.120s... vs ...%.120s...", k,
                  ja + (i > 60 ? i - 60 : 0), jb + (i > 60 ? i - 60 : 0));
    free(ja), free(jb);
    const char *tables[] = {"select * from request order by rowid",
                            "select * from timeseries order by rowid"};
    for (int t = 0; t < 2; t++) {
        char *ra = table_rows(d1, tables[t]), *rb = table_rows(d2, tables[t]);
        size_t d = 0;
        while (ra[d] && ra[d] == rb[d])
            d++;
        ck_assert_msg(!strcmp(ra, rb), "case %zu: %s: rows differ at ...%.100s... vs ...%.100s...",
                      k, tables[t], ra + (d > 50 ? d - 50 : 0), rb + (d > 50 ? d - 50 : 0));
        free(ra), free(rb);
    }
    json_decref(a), json_decref(b);
    snprintf(kvt_tmp, sizeof kvt_tmp, "%s", d1);
    kvt_tmp_remove();
    snprintf(kvt_tmp, sizeof kvt_tmp, "%s", d2);
    kvt_tmp_remove();
}

// Without a prefix cache, a store's answers or sampling nothing reads a request's block ids,
// and the reader leaves them out (trc_reader_drop_blocks): the same runs as with them, summary,
// request rows and time series alike, on real traces of each format; and where something
// reads them (the prefix cache, sampling) they are kept, so the runs are the same too.
START_TEST(test_dropped_blocks_change_nothing) {
    struct {
        const char *trace, *sets[6];
        int nsets;
    } cases[] = {
        {"mooncake_conversation.jsonl",
         {"workload.limit_requests=2000", "kv_cache.prefix_cache=false",
          "cluster.decode.kv_tokens=250000"},
         3},
        {"azure2023_conv.csv",
         {"workload.limit_requests=2000", "workload.format=azure", "kv_cache.prefix_cache=false",
          "cluster.mode=colocated", "cluster.decode.instances=0"},
         5},
        {"weka_agentic_dev.jsonl",
         {"workload.limit_requests=800", "workload.format=auto", "kv_cache.prefix_cache=false"},
         3},
        // where blocks are read they are kept: the prefix cache, the sampler's session keys
        {"mooncake_conversation.jsonl", {"workload.limit_requests=2000"}, 1},
        {"mooncake_conversation.jsonl",
         {"workload.limit_requests=4000", "kv_cache.prefix_cache=false", "workload.sample_rate=0.5",
          "cluster.prefill.instances=8", "cluster.decode.instances=4"},
         5},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char d1[64], d2[64];
        json_t *drop, *keep;
        run_twice("kvf_blk", cases[k].trace, cases[k].sets, cases[k].nsets, &kvt_keep_blocks, &drop,
                  &keep, d1, d2, sizeof d1);
        ck_assert_msg(kvt_num(drop, "requests.completed") > 300, "case %zu: %g completed", k,
                      kvt_num(drop, "requests.completed"));
        same_runs(k, drop, keep, d1, d2);
    }
}
END_TEST

START_TEST(test_decode_sums_match_listed_path) {
    struct {
        const char *scenario, *trace, *sets[8];
        int nsets;
    } cases[] = {
        {"quickstart.yaml",
         "mooncake_conversation.jsonl",
         {"workload.limit_requests=3000", "workload.time_scale=0.3", "cluster.decode.instances=1",
          "cluster.decode.kv_tokens=300000"},
         4},
        {"quickstart.yaml",
         "mooncake_conversation.jsonl",
         {"workload.limit_requests=2000", "workload.time_scale=0.3", "cluster.decode.instances=1",
          "cluster.decode.kv_tokens=250000", "cluster.preemption=swap", "structured.share=0.3",
          "structured.mask_us=40"},
         7},
        {"quickstart.yaml",
         "mooncake_conversation.jsonl",
         {"workload.limit_requests=2000", "cluster.mode=colocated", "cluster.prefill.instances=3",
          "cluster.decode.instances=0", "cluster.prefill.kv_tokens=400000"},
         5},
        {"quickstart.yaml",
         "weka_agentic_dev.jsonl",
         {"workload.limit_requests=1500", "model=gpt-oss-120b", "workload.format=auto"},
         3},
        {"quickstart.yaml",
         "azure2023_conv.csv",
         {"workload.limit_requests=2000", "model=gemma-3-27b", "workload.format=azure",
          "workload.time_scale=0.5"},
         4},
        {"quickstart.yaml",
         "azure2023_conv.csv",
         {"workload.limit_requests=3000", "model=gemma-3-27b", "workload.format=azure",
          "router.decode=round_robin", "cluster.decode.instances=3", "output.sample_interval_s=1"},
         6},
        // the serving engine's per-step CPU time, CUDA-graph padding and the first-token lag
        // on runs costed at once
        {"quickstart.yaml",
         "azure2023_conv.csv",
         {"workload.limit_requests=2000", "workload.format=azure", "cluster.mode=colocated",
          "cluster.prefill.instances=2", "cluster.decode.instances=0",
          "serving.step_overhead_us=350.5", "serving.step_overhead_per_seq_us=7.25",
          "serving.graph_buckets=8"},
         8},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char d1[64], d2[64];
        two_dirs("kvf_dsum", d1, d2, sizeof d1);
        const char *trace = kvt_shared_trace(cases[k].trace);
        // sums with runs of steps (the default) against listed single steps
        kvt_decode_listed = false;
        json_t *fast = kvt_run(cases[k].scenario, trace, cases[k].sets, cases[k].nsets, d1);
        kvt_decode_listed = kvt_decode_single = true;
        json_t *slow = kvt_run(cases[k].scenario, trace, cases[k].sets, cases[k].nsets, d2);
        kvt_decode_listed = kvt_decode_single = false;
        ck_assert_msg(kvt_num(fast, "requests.completed") > 500, "case %zu: %g completed", k,
                      kvt_num(fast, "requests.completed"));
        printf("decode sums vs listed, case %zu: ttft p90 %.3f / %.3f ms, tpot p90 %.4f / %.4f ms, "
               "itl p99 %.4f / %.4f ms, preemptions %g\n",
               k, kvt_num(fast, "ttft_ms.p90"), kvt_num(slow, "ttft_ms.p90"),
               kvt_num(fast, "tpot_ms.p90"), kvt_num(slow, "tpot_ms.p90"),
               kvt_num(fast, "itl_ms.p99"), kvt_num(slow, "itl_ms.p99"),
               kvt_num(fast, "steps.preemptions"));
        printf("  events: %g with sums and runs, %g listed\n", kvt_num(fast, "sim.events"),
               kvt_num(slow, "sim.events"));
        same_runs(k, fast, slow, d1, d2);
    }
}
END_TEST

// Runs of decode steps costed page by page (SIM_RUN_PAGE steps, then three times as many as
// are costed, at early events) against each run costed whole when formed: the same summary,
// event count included, the same request rows and time series, on real traces of each
// format, under a least_kv decode router (which reads a run's ended steps between events), a
// round-robin one, the serving engine's per-step terms and with many decode instances (long
// runs, most cut by a request mid-page). Each case must have costed pages.
START_TEST(test_run_pages_match_whole_runs) {
    struct {
        const char *trace, *sets[7];
        int nsets;
    } cases[] = {
        {"mooncake_conversation.jsonl",
         {"workload.limit_requests=2000", "kv_cache.prefix_cache=false",
          "cluster.decode.instances=12", "cluster.prefill.instances=8"},
         4},
        {"azure2023_conv.csv",
         {"workload.limit_requests=2000", "model=gemma-3-27b", "workload.format=azure",
          "cluster.decode.instances=8", "router.decode=round_robin", "output.sample_interval_s=1"},
         6},
        {"weka_agentic_dev.jsonl",
         {"workload.limit_requests=1000", "model=gpt-oss-120b", "workload.format=auto",
          "cluster.decode.instances=6", "serving.step_overhead_us=350.5",
          "serving.step_overhead_per_seq_us=7.25", "serving.graph_buckets=8"},
         7},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char d1[64], d2[64];
        json_t *paged, *whole;
        run_twice("kvf_pages", cases[k].trace, cases[k].sets, cases[k].nsets, &kvt_run_whole,
                  &paged, &whole, d1, d2, sizeof d1);
        double pages = kvt_num(paged, "sim.page_events"), ev = kvt_num(paged, "sim.events");
        printf("run pages, case %zu: %g events and %g page events; %g events costed whole, "
               "%g steps\n",
               k, ev, pages, kvt_num(whole, "sim.events"), kvt_num(paged, "steps.steps"));
        ck_assert_msg(pages > 100, "case %zu: %g page events", k, pages);
        ck_assert_msg(kvt_num(whole, "sim.page_events") == 0, "case %zu: pages costed whole", k);
        ck_assert_msg(ev == kvt_num(whole, "sim.events"), "case %zu: %g events in pages, %g whole",
                      k, ev, kvt_num(whole, "sim.events"));
        same_runs(k, paged, whole, d1, d2);
    }
}
END_TEST

// Min-load routers answer from an index updated per instance (O(log n)); with router_check
// every answer is asserted against a scan of the pool, under live and stale load figures and
// a time-of-day schedule that switches instances off and on. The runs must also route: the
// chosen instances are spread (a broken index would send everything to one).
START_TEST(test_router_index_matches_scan) {
    const char *sets[][6] = {
        {"router.prefill=least_loaded", "router.decode=least_kv", "workload.limit_requests=3000",
         "cluster.prefill.instances=5", "cluster.decode.instances=4", NULL},
        {"router.prefill=least_work", "router.decode=least_requests",
         "workload.limit_requests=3000", "cluster.prefill.instances=5",
         "cluster.decode.instances=4", "router.stale_ms=200"},
        {"router.prefill=least_loaded", "router.decode=least_kv", "workload.limit_requests=3000",
         "cluster.prefill.instances=6", "cluster.decode.instances=4",
         "cluster.schedule=[{from_h: 0, prefill: 2, decode: 1}, {from_h: 0.1, prefill: 6, decode: "
         "4}, {from_h: 0.2, prefill: 3, decode: 2}]"},
    };
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
        int n = 0;
        while (n < 6 && sets[k][n])
            n++;
        kvt_router_check = true;
        kvt_tmp_make("kvf_router");
        json_t *s = kvt_run("quickstart.yaml", kvt_shared_trace("mooncake_conversation.jsonl"),
                            sets[k], n, kvt_tmp);
        kvt_router_check = false;
        ck_assert_int_eq((int)kvt_num(s, "requests.completed"), 3000);
        char db[128];
        snprintf(db, sizeof db, "%s/results.db", kvt_tmp);
        sqlite3 *h = NULL;
        ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
        sqlite3_stmt *st = NULL;
        ck_assert_int_eq(sqlite3_prepare_v2(h,
                                            "select count(distinct prefill_instance), "
                                            "count(distinct decode_instance) from request",
                                            -1, &st, NULL),
                         SQLITE_OK);
        ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
        int np = sqlite3_column_int(st, 0), nd = sqlite3_column_int(st, 1);
        sqlite3_finalize(st);
        sqlite3_close(h);
        ck_assert_msg(np >= 3 && nd >= 2, "case %zu: %d prefill and %d decode instances used", k,
                      np, nd);
        json_decref(s);
        kvt_tmp_remove();
    }
}
END_TEST

// ---- a disaggregated prefill instance's KV capacity ----------------------------------------
// The prompt lengths of the first n requests (all with n 0) of a Mooncake trace, read directly:
// how many are over `over` tokens, and the longest.
static void trace_prompts(const char *path, int n, double over, int *n_over, double *longest) {
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char line[1 << 16];
    *n_over = 0;
    *longest = 0;
    for (int i = 0; (n <= 0 || i < n) && fgets(line, sizeof line, f); i++) {
        json_t *j = json_loads(line, 0, NULL);
        ck_assert_msg(j != NULL, "%s:%d: not JSON", path, i + 1);
        double in = json_number_value(json_object_get(j, "input_length"));
        if (in > over) ++*n_over;
        if (in > *longest) *longest = in;
        json_decref(j);
    }
    fclose(f);
}

// cluster.prefill.kv_tokens bounds the KV a prefill instance holds for the prompts it computes
// (and sends to decode), as a colocated instance's bounds its prompts: a prompt over it is
// rejected (rejected:kv_capacity) and never computed, all others are served. Before, the
// capacity bounded only the instance's prefix cache: at 65,536 tokens the 254 longer prompts
// of the Mooncake hour were prefilled and completed all the same.
START_TEST(test_prefill_kv_rejects_prompts_over_capacity) {
    const char *trace = kvt_shared_trace("mooncake_conversation.jsonl");
    int n_over;
    double longest;
    trace_prompts(trace, 0, 65536, &n_over, &longest);
    ck_assert_msg(n_over > 0 && longest > 65536, "%d prompts over 65,536 tokens", n_over);
    kvt_tmp_make("kvf_pkv");
    const char *sets[] = {"cluster.prefill.kv_tokens=65536"};
    json_t *s = run_with(kvt_tmp, sets, 1);
    check_invariants(s, "prefill kv_tokens 65536");
    ck_assert_msg(kvt_num(s, "requests.rejected") == n_over &&
                      kvt_num(s, "requests.rejected_by_reason.capacity") == n_over &&
                      kvt_num(s, "requests.completed") == kvt_num(s, "requests.arrived") - n_over,
                  "%d prompts over 65,536 tokens; %g rejected (%g for capacity), %g completed "
                  "of %g",
                  n_over, kvt_num(s, "requests.rejected"),
                  kvt_num(s, "requests.rejected_by_reason.capacity"),
                  kvt_num(s, "requests.completed"), kvt_num(s, "requests.arrived"));
    // the very requests: rejected for KV exactly when the prompt is over the capacity, and
    // never prefilled then (no first token)
    char *rows = table_rows(kvt_tmp, "select count(*) from request where (status = "
                                     "'rejected:kv_capacity') <> (input_tokens > 65536) or "
                                     "(status = 'rejected:kv_capacity' and ttft_s is not null)");
    ck_assert_msg(strcmp(rows, "0\n") == 0, "%s requests rejected for KV wrongly or prefilled",
                  rows);
    free(rows);
    json_decref(s);
    kvt_tmp_remove();
}
END_TEST

// A prefill instance whose KV holds the longest prompt, and so never more than a few prompts
// at once, takes the next prompt only when those before it have sent their KV to decode:
// prefill is serialised, TTFT rises against the unbounded instance, and every request still
// completes (none waits forever for KV, none is lost). Before, the two runs' TTFT p50 and p90
// were the same (345.9 and 3,672.1 ms on the first 2,000 requests). Then the same bound,
// binding on a quarter of the prompts, with instances failing in both pools, clients giving
// up, the shortest prompt first and small chunks: requests and KV all accounted for; and on
// one instance, the shortest prompt first, where a prompt prefilled in part must go on past a
// head that waits for its KV.
START_TEST(test_prefill_kv_bound_serialises_prefill) {
    const char *trace = kvt_shared_trace("mooncake_conversation.jsonl");
    int n_over;
    double longest;
    trace_prompts(trace, 2000, 1e12, &n_over, &longest);
    char kv[64];
    snprintf(kv, sizeof kv, "cluster.prefill.kv_tokens=%.0f", longest);
    const char *a[] = {"workload.limit_requests=2000", "cluster.prefill.instances=2"};
    const char *b[] = {"workload.limit_requests=2000", "cluster.prefill.instances=2", kv};
    char dir[] = "/tmp/kvf_pkv_XXXXXX";
    ck_assert(mkdtemp(dir));
    kvt_tmp_register(dir);
    json_t *s1 = run_with(NULL, a, 2), *s2 = run_with(dir, b, 3);
    check_invariants(s2, kv);
    // the prefill pool's KV occupancy in the time series is the prompts' in flight, within the
    // bound (it read 0: prefill instances keep no decode KV)
    double occ;
    db_row(dir,
           "SELECT max(value) FROM timeseries WHERE pool = 'prefill' AND metric = 'kv_used_frac'",
           &occ, 1);
    ck_assert_msg(occ > 0.05 && occ <= 1, "prefill kv_used_frac peaks at %g", occ);
    ck_assert_msg(kvt_num(s2, "requests.completed") == 2000 &&
                      kvt_num(s2, "requests.rejected") == 0,
                  "%s: %g completed, %g rejected of 2000", kv, kvt_num(s2, "requests.completed"),
                  kvt_num(s2, "requests.rejected"));
    const char *q[] = {"ttft_ms.p50", "ttft_ms.p90", "ttft_ms.mean"};
    for (int i = 0; i < 3; i++)
        ck_assert_msg(kvt_num(s2, q[i]) > kvt_num(s1, q[i]), "%s: %s %.3f ms, unbounded %.3f ms",
                      kv, q[i], kvt_num(s2, q[i]), kvt_num(s1, q[i]));
    json_decref(s1), json_decref(s2);
    const char *c[] = {"workload.limit_requests=4000",         "cluster.prefill.kv_tokens=20000",
                       "cluster.prefill.scheduler=spf",        "cluster.prefill.chunk_tokens=4096",
                       "cluster.prefill.failures.mtbf_h=0.05", "cluster.prefill.failures.mttr_s=60",
                       "cluster.decode.failures.mtbf_h=0.05",  "cluster.decode.failures.mttr_s=60",
                       "serving.client_timeout_s=20"};
    json_t *s3 = run_with(NULL, c, 9);
    check_invariants(s3, "bound, failures, time-outs");
    ck_assert_msg(kvt_num(s3, "invariants.in_flight_end") == 0 &&
                      kvt_num(s3, "failures.count") > 0 &&
                      kvt_num(s3, "requests.rejected_by_reason.capacity") > 0,
                  "%g left in flight, %g failures, %g rejected for KV",
                  kvt_num(s3, "invariants.in_flight_end"), kvt_num(s3, "failures.count"),
                  kvt_num(s3, "requests.rejected_by_reason.capacity"));
    json_decref(s3);
    // one instance, the shortest prompt first: a shorter prompt that does not fit queues
    // ahead of a longer one prefilled in part, which still goes on (else neither ever would)
    const char *d[] = {"workload.limit_requests=4000", "cluster.prefill.instances=1",
                       "cluster.prefill.kv_tokens=20000", "cluster.prefill.scheduler=spf",
                       "cluster.prefill.chunk_tokens=4096"};
    json_t *s4 = run_with(NULL, d, 5);
    check_invariants(s4, "bound, one instance, spf");
    ck_assert_msg(kvt_num(s4, "invariants.in_flight_end") == 0, "%g left in flight",
                  kvt_num(s4, "invariants.in_flight_end"));
    json_decref(s4);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("sim");
    TCase *k = tcase_create("kernel");
    tcase_add_test(k, test_queue_orders_by_time_then_seq);
    tcase_add_test(k, test_queue_last_events_pop_after_their_instant);
    tcase_add_test(k, test_queue_slots_match_heap);
    tcase_add_test(k, test_queue_early_events_change_nothing_else);
    tcase_add_test(k, test_link_shares_bandwidth_fairly);
    tcase_add_test(k, test_write_downs_match_one_at_a_time);
    tcase_add_test(k, test_bcache_lru_and_retention);
    tcase_add_test(k, test_hist_percentiles_within_resolution);
    tcase_add_test(k, test_hist_gaps_match_one_by_one);
    tcase_add_test(k, test_sort_doubles_matches_qsort);
    tcase_add_test(k, test_samples_keep_values_across_growth);
    suite_add_tcase(s, k);
    TCase *e = tcase_create("end_to_end");
    tcase_set_timeout(e, 600);
    tcase_add_test(e, test_run_is_deterministic);
    tcase_add_test(e, test_invariants_on_real_traces);
    tcase_add_test(e, test_decode_sums_match_listed_path);
    tcase_add_test(e, test_run_pages_match_whole_runs);
    tcase_add_test(e, test_dropped_blocks_change_nothing);
    tcase_add_test(e, test_router_index_matches_scan);
    tcase_add_test(e, test_series_cover_the_run);
    tcase_add_test(e, test_steady_window_matches_rows_and_series);
    tcase_add_test(e, test_steady_economics_by_hand);
    tcase_add_test(e, test_steady_window_counts_instance_time);
    tcase_add_test(e, test_simultaneous_arrivals_share_a_step);
    tcase_add_test(e, test_first_token_lag_is_a_share_of_the_next_step);
    tcase_add_test(e, test_kv_transfer_without_prefix_cache);
    tcase_add_test(e, test_md1_queueing_delay);
    tcase_add_test(e, test_more_decode_instances_cut_tpot_under_overload);
    tcase_add_test(e, test_halving_load_cuts_ttft);
    tcase_add_test(e, test_prefill_kv_rejects_prompts_over_capacity);
    tcase_add_test(e, test_prefill_kv_bound_serialises_prefill);
    suite_add_tcase(s, e);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
