// sim/sim_cluster.c -- the event handlers of a run: trace reading, routing, prefill with
// prefix-cache lookups and tier loads, KV transfer, decode with continuous batching and
// KV-capacity admission, colocated mixed batches, completion, sampling.
//
// Invariants:
// - one STEP_DONE event per batch step; tokens advance by arithmetic, never one event per token;
// - a request slot is never freed while an event or a link flow refers to it;
// - sim_req pointers are not held across read_trace(), the only place the slot array grows;
// - every prompt token is either a hit (cached) or a miss, and at least one is computed.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cluster.h"
#include "sim_trace.h"
#include "sim_run.h"
#include "sim_sample.h"

#define LINK_DRAM 0
#define LINK_SSD 1
#define LINK_XFER 3
#define LINK_SSDW 4
// what a link carries, as the trace names its track (sim_trace.h)
static const char *const LINK_WHAT[] = {"DRAM read", "SSD read", "link", "KV transfer out", "SSD write"};

// ---- the request state machine ----------------------------------------------------------------
// Every transition a request makes, asserted (a bug, not an input error, breaks it):
//   FREE -> WAITING_PREV | PENDING;  WAITING_PREV -> PENDING;  PENDING -> VISION | LOADING |
//   PREFILL;  VISION -> LOADING | PREFILL;  LOADING -> PREFILL;  PREFILL -> TRANSFER | DECODE
//   (colocated);  TRANSFER -> DECODE_WAIT;  DECODE_WAIT -> DECODE;  DECODE -> DECODE_WAIT
//   (preempted, recompute) | SWAPPED;  SWAPPED -> DECODE_WAIT;  any -> FREE (finished/rejected)
#define RS(x) (1u << SIM_RS_##x)
static const uint32_t rs_from[] = {
    [SIM_RS_FREE] = ~RS(FREE),
    [SIM_RS_WAITING_PREV] = RS(FREE),
    [SIM_RS_PENDING] = RS(FREE) | RS(WAITING_PREV),
    [SIM_RS_VISION] = RS(PENDING),
    [SIM_RS_LOADING] = RS(PENDING) | RS(VISION),
    [SIM_RS_PREFILL] = RS(PENDING) | RS(VISION) | RS(LOADING),
    [SIM_RS_TRANSFER] = RS(PREFILL),
    [SIM_RS_DECODE_WAIT] = RS(TRANSFER) | RS(DECODE) | RS(SWAPPED),
    [SIM_RS_DECODE] = RS(DECODE_WAIT) | RS(PREFILL),
    [SIM_RS_SWAPPED] = RS(DECODE),
};
#undef RS

static void set_state(sim_req *r, sim_req_state to) {
    KVF_ASSERT(rs_from[to] & (1u << r->state));
    r->state = (uint8_t)to;
}

// ---- request heap -------------------------------------------------------------------------
void sim_rheap_push(sim_rheap *h, uint64_t key, uint32_t slot) {
    if (h->n == h->cap) {
        size_t c1 = h->cap, c2 = h->cap;
        kvf_grow((void **)&h->key, &c1, h->n + 1, sizeof *h->key);
        kvf_grow((void **)&h->slot, &c2, h->n + 1, sizeof *h->slot);
        h->cap = c1;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h->key[p] <= key) break;
        h->key[i] = h->key[p];
        h->slot[i] = h->slot[p];
        i = p;
    }
    h->key[i] = key;
    h->slot[i] = slot;
}

bool sim_rheap_pop(sim_rheap *h, uint32_t *slot) {
    if (!h->n) return false;
    *slot = h->slot[0];
    uint64_t k = h->key[--h->n];
    uint32_t s = h->slot[h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->key[c + 1] < h->key[c]) c++;
        if (h->key[c] >= k) break;
        h->key[i] = h->key[c];
        h->slot[i] = h->slot[c];
        i = c;
    }
    if (h->n) {
        h->key[i] = k;
        h->slot[i] = s;
    }
    return true;
}

void sim_rheap_free(sim_rheap *h) {
    free(h->key);
    free(h->slot);
    memset(h, 0, sizeof *h);
}

static uint64_t queue_key(const sim_cluster *c, const sim_pool_cfg *pc, const sim_req *r) {
    uint64_t seq = r->seq & 0xffffffffffULL;   // 40 bits of arrival order
    (void)c;
    switch (pc->scheduler) {
    case SIM_SCHED_SPF: {
        uint64_t len = r->compute_tokens ? r->compute_tokens : r->input;
        if (len > 0xffffff) len = 0xffffff;
        return len << 40 | seq;
    }
    case SIM_SCHED_PRIORITY: {
        // interactive classes first: coding, chatbot, agent, other, batch
        static const uint64_t prio[TRC_CLASS_COUNT] = {1, 2, 0, 4, 3};
        return prio[r->cls < TRC_CLASS_COUNT ? r->cls : TRC_CLASS_OTHER] << 56 | seq;
    }
    default: return seq;
    }
}

// ---- small helpers ------------------------------------------------------------------------
static inline sim_req *REQ(sim_cluster *c, uint32_t slot) { return &c->req[slot]; }

static void push_ev(sim_cluster *c, sim_time t, uint16_t kind, uint32_t dst, uint64_t a0,
                    uint64_t *seq_out) {
    sim_event ev = {.t = t, .dst = dst, .kind = kind, .arg = {a0, 0}};
    uint64_t s = sim_queue_push(c->q, &ev);
    if (seq_out) *seq_out = s;
}

static void fail_run(sim_cluster *c, kvf_status st) {
    if (c->status == KVF_OK) c->status = st;
}

static void reschedule_link(sim_cluster *c, uint32_t id) {
    sim_link *l = &c->links[id].link;
    sim_time t = sim_link_next_ns(l, c->now);
    // One timer per link: a pending one that fires no later than the next completion stays
    // (adding a flow only delays the others; the early firing re-arms); an earlier completion
    // replaces it.
    if (l->ev_seq && t >= 0 && l->ev_t <= t) return;
    if (l->ev_seq) sim_queue_cancel(c->q, l->ev_seq);
    l->ev_seq = 0;
    if (t >= 0) {
        push_ev(c, t, SIM_EV_LINK, 0, id, &l->ev_seq);
        l->ev_t = t;
    }
}

static void link_send(sim_cluster *c, uint32_t id, double bytes, uint64_t tag) {
    sim_link_ref *lr = &c->links[id];
    sim_link *l = &lr->link;
    if (lr->kind == LINK_SSDW) {
        // Nobody waits for a write-down: no flow and no event, only the backlog it builds
        // (the link busy until busy_until at full rate), whose peak the summary reports.
        sim_time start = lr->busy_until > c->now ? lr->busy_until : c->now;
        lr->busy_until = start + (sim_time)llround(bytes / l->Bps * 1e9);
        if (c->timeline) sim_trace_flow(c->timeline, start, lr->busy_until, c->inst[lr->inst].pool, c->inst[lr->inst].idx, LINK_WHAT[lr->kind], bytes);
        double backlog = (double)(lr->busy_until - c->now) * 1e-9;
        if (backlog > c->m.ssd_write_backlog_s_peak) c->m.ssd_write_backlog_s_peak = backlog;
        return;
    }
    // latency is charged as bytes at line rate so it shares the one completion event
    sim_link_add(l, c->now, bytes + (double)l->latency_ns * 1e-9 * l->Bps, tag);
    if (c->timeline) sim_trace_flow_begin(c->timeline, c->now, c->inst[lr->inst].pool, c->inst[lr->inst].idx, LINK_WHAT[lr->kind], (uint64_t)id << 32 | tag, bytes);
    reschedule_link(c, id);
}

static uint32_t add_link(sim_cluster *c, double Bps, sim_time lat, uint32_t inst, uint8_t kind) {
    if (Bps <= 0) return SIM_NONE;
    kvf_grow((void **)&c->links, &c->links_cap, c->n_links + 1, sizeof *c->links);
    sim_link_ref *r = &c->links[c->n_links];
    sim_link_init(&r->link, Bps, lat);
    r->inst = inst;
    r->kind = kind;
    r->busy_until = 0;
    return (uint32_t)c->n_links++;
}

static sim_pool *pool_of(sim_cluster *c, const sim_inst *in) { return &c->pool[in->pool]; }

static void seqs_reserve(sim_cluster *c, size_t n) {
    if (n > c->seqs_cap) kvf_grow((void **)&c->seqs, &c->seqs_cap, n, sizeof *c->seqs);
}

static void batch_reserve(sim_inst *in, uint32_t n) {
    if (n <= in->batch_cap) return;
    size_t c1 = in->batch_cap, c2 = in->batch_cap;
    kvf_grow((void **)&in->batch, &c1, n, sizeof *in->batch);
    kvf_grow((void **)&in->chunk, &c2, n, sizeof *in->chunk);
    in->batch_cap = (uint32_t)c1;
}

static void step_cost(sim_cluster *c, sim_pool *p, mdl_phase phase, uint32_t n, uint32_t images,
                      const mdl_decode_sum *ds, mdl_step_cost *out) {
    if (c->cfg->ep_skew_sd > 0 && c->model.experts) {
        // the hottest GPU's load varies step to step; the step waits for it
        double sk = c->ep_skew_base + c->cfg->ep_skew_sd * kvf_rng_normal(&c->rng);
        p->stepper->par.ep_skew = sk > 1 ? sk : 1;
    }
    mdl_batch b = {.phase = phase, .seqs = c->seqs, .n = n, .images = images,
                   .dsum = ds && ds->n ? ds : NULL};
    mdl_stepper_cost(p->stepper, &b, out);
    if (out->ns > (int64_t)MDL_MAX_STEP_NS && c->status == KVF_OK) {
        kvf_fail(c->err, KVF_EINVAL,
                 "one batch step would take over an hour of simulated time: the model is far "
                 "too large for the hardware and efficiency factors (keys model, hardware, "
                 "efficiency.*)");
        fail_run(c, KVF_EINVAL);
    }
    if (out->ns < 1) out->ns = 1;
    c->m.steps++;
    if (out->extrapolated) c->m.extrapolated_steps++;
    if (out->table_fallback) c->m.table_fallbacks++;
}

double sim_cluster_prefill_s(sim_cluster *c, sim_pool *p, uint32_t tokens, uint32_t cached) {
    mdl_seq s = {.new_tokens = tokens ? tokens : 1, .cached_tokens = cached};
    mdl_batch b = {.phase = MDL_PREFILL, .seqs = &s, .n = 1};
    mdl_step_cost k;
    // direct vtable call: router estimates are not steps and are not counted
    p->stepper->vt->cost(p->stepper, &b, &k);
    return (double)k.ns * 1e-9;
}

// ---- closed-loop bookkeeping --------------------------------------------------------------
static size_t done_find(const sim_donemap *d, uint64_t id) {
    size_t mask = d->cap - 1, i = (size_t)kvf_hash64(id) & mask;
    while (d->key[i] != UINT64_MAX && d->key[i] != id) i = (i + 1) & mask;
    return i;
}

static void done_grow(sim_donemap *d) {
    sim_donemap o = *d;
    d->cap = o.cap ? o.cap * 2 : 1024;
    d->key = kvf_malloc(d->cap * sizeof *d->key);
    memset(d->key, 0xff, d->cap * sizeof *d->key);
    d->done_ns = kvf_malloc(d->cap * sizeof *d->done_ns);
    d->tokens = kvf_malloc(d->cap * sizeof *d->tokens);
    d->last_block = kvf_malloc(d->cap * sizeof *d->last_block);
    d->n_blocks = kvf_malloc(d->cap * sizeof *d->n_blocks);
    for (size_t i = 0; i < o.cap; i++)
        if (o.key[i] != UINT64_MAX) {
            size_t j = done_find(d, o.key[i]);
            d->key[j] = o.key[i];
            d->done_ns[j] = o.done_ns[i];
            d->tokens[j] = o.tokens[i];
            d->last_block[j] = o.last_block[i];
            d->n_blocks[j] = o.n_blocks[i];
        }
    free(o.key);
    free(o.done_ns);
    free(o.tokens);
    free(o.last_block);
    free(o.n_blocks);
}

static size_t done_slot(sim_donemap *d, uint64_t id, bool insert) {
    if (insert && (d->n + 1) * 2 > d->cap) done_grow(d);
    if (!d->cap) return SIZE_MAX;
    size_t i = done_find(d, id);
    if (d->key[i] == UINT64_MAX) {
        if (!insert) return SIZE_MAX;
        d->key[i] = id;
        d->done_ns[i] = 0;
        d->tokens[i] = 0;
        d->last_block[i] = 0;
        d->n_blocks[i] = 0;
        d->n++;
    }
    return i;
}

static void done_free(sim_donemap *d) {
    free(d->key);
    free(d->done_ns);
    free(d->tokens);
    free(d->last_block);
    free(d->n_blocks);
    memset(d, 0, sizeof *d);
}

// ---- trace reading ------------------------------------------------------------------------
static uint32_t req_alloc(sim_cluster *c) {
    uint32_t s;
    if (c->free_req != SIM_NONE) {
        s = c->free_req;
        c->free_req = c->req[s].next_waiter;
    } else {
        if (c->n_req == c->req_cap) {
            size_t cap = c->req_cap;
            kvf_grow((void **)&c->req, &cap, c->n_req + 1, sizeof *c->req);
            memset(c->req + c->req_cap, 0, (cap - c->req_cap) * sizeof *c->req);
            c->req_cap = (uint32_t)cap;
        }
        s = c->n_req++;
    }
    return s;
}

static void req_free(sim_cluster *c, uint32_t slot) {
    sim_req *r = REQ(c, slot);
    set_state(r, SIM_RS_FREE);
    r->next_waiter = c->free_req;
    c->free_req = slot;
}

static uint32_t req_from_trace(sim_cluster *c, const trc_request *t) {
    uint32_t slot = req_alloc(c);
    sim_req *r = REQ(c, slot);
    uint64_t *blocks = r->blocks;
    uint32_t cap = r->blocks_cap;
    memset(r, 0, sizeof *r);
    r->blocks = blocks;
    r->blocks_cap = cap;
    if (t->n_blocks > r->blocks_cap) {
        size_t nc = r->blocks_cap;
        kvf_grow((void **)&r->blocks, &nc, t->n_blocks, sizeof *r->blocks);
        r->blocks_cap = (uint32_t)nc;
    }
    if (t->n_blocks) memcpy(r->blocks, t->blocks, t->n_blocks * sizeof *r->blocks);
    r->n_blocks = t->n_blocks;
    r->id = t->id;
    r->recorded_ns = t->arrival_ns;
    r->arrival_ns = r->first_ns = r->last_ns = -1;
    r->input = t->input_tokens ? t->input_tokens : 1;
    r->output = t->output_tokens ? t->output_tokens : 1;
    r->cls = t->cls < TRC_CLASS_COUNT ? t->cls : TRC_CLASS_OTHER;
    r->flags = t->flags;
    r->images = t->images;
    r->session = t->session;
    r->prev_id = t->prev_id;
    r->think_ns = t->think_ns > 0 ? t->think_ns : 0;
    r->vinst = r->pinst = r->dinst = SIM_NONE;
    r->waiters = r->next_waiter = SIM_NONE;
    c->in_flight++;
    return slot;
}

// Reads requests until one open-loop arrival is scheduled ahead (its ARRIVAL triggers the
// next read) or the trace ends. Closed-loop turns are parked on the request they wait for.
static void read_trace(sim_cluster *c) {
    c->read_pending = false;
    while (!c->reader_done && c->status == KVF_OK) {
        trc_request t;
        int rc = trc_reader_next(c->reader, &t, c->err);
        if (rc < 0) {
            fail_run(c, c->err->code ? c->err->code : KVF_EPARSE);
            return;
        }
        if (rc == 0) {
            c->reader_done = true;
            return;
        }
        if (c->sampler && !sim_sample_keep(c->sampler, &t)) continue;
        uint32_t slot = req_from_trace(c, &t);
        sim_req *r = REQ(c, slot);
        if (c->closed_loop) {
            size_t i = done_slot(&c->done, r->id, true);
            c->done.done_ns[i] = -(int64_t)slot - 1;
        }
        if (c->closed_loop && r->prev_id >= 0) {
            size_t i = done_slot(&c->done, (uint64_t)r->prev_id, false);
            if (i != SIZE_MAX && c->done.done_ns[i] < 0) {
                // previous turn still in flight: wait for it
                sim_req *p = REQ(c, (uint32_t)(-c->done.done_ns[i] - 1));
                set_state(r, SIM_RS_WAITING_PREV);
                r->next_waiter = p->waiters;
                p->waiters = slot;
            } else {
                sim_time t0 = i != SIZE_MAX ? c->done.done_ns[i] + r->think_ns : r->recorded_ns;
                set_state(r, SIM_RS_PENDING);
                push_ev(c, t0 > c->now ? t0 : c->now, SIM_EV_ARRIVAL, 0, slot, NULL);
            }
            continue;
        }
        set_state(r, SIM_RS_PENDING);
        sim_time at = r->recorded_ns > c->now ? r->recorded_ns : c->now;
        push_ev(c, at, SIM_EV_ARRIVAL, 1, slot, NULL);   // dst 1: triggers the next read
        c->read_pending = true;
        return;
    }
}

// ---- KV store -------------------------------------------------------------------------------
static void hbm_put(sim_cluster *c, sim_inst *in, uint64_t id, int cls);

uint32_t sim_cluster_prefix(sim_cluster *c, sim_inst *in, const sim_req *r, uint32_t hit[SIM_TIERS],
                            bool touch, bool local_only) {
    for (int t = 0; t < SIM_TIERS; t++) hit[t] = 0;
    if (!c->cfg->prefix_cache) return 0;
    uint32_t k = 0;
    for (; k < r->n_blocks; k++) {
        uint64_t b = r->blocks[k];
        // two-stage prefetch: buckets 8 blocks ahead, the slots they point to 4 ahead
        if (k + 8 < r->n_blocks) {
            if (in) sim_bcache_prefetch(&in->hbm, r->blocks[k + 8]);
            if (!local_only) sim_bcache_prefetch(&c->ssd, r->blocks[k + 8]);
        }
        if (k + 4 < r->n_blocks && !local_only) sim_bcache_prefetch_slot(&c->ssd, r->blocks[k + 4]);
        // with touch, a found block is refreshed in the same probe (LRU position, retention)
        int tier;
        if (in && (touch ? sim_bcache_hit(&in->hbm, b, c->now, r->cls) : sim_bcache_has(&in->hbm, b, c->now)))
            tier = SIM_TIER_HBM;
        else if (in && (touch ? sim_bcache_hit(&in->dram, b, c->now, r->cls) : sim_bcache_has(&in->dram, b, c->now)))
            tier = SIM_TIER_DRAM;
        else if (!local_only &&
                 (touch ? sim_bcache_hit(&c->ssd, b, c->now, r->cls) : sim_bcache_has(&c->ssd, b, c->now)))
            tier = SIM_TIER_SSD;
        else break;
        hit[tier]++;
        // a hit is loaded into this instance's HBM: promote it there now, so the prefill only
        // has to write the blocks it computes
        if (touch && tier != SIM_TIER_HBM) hbm_put(c, in, b, r->cls);
    }
    return k;
}

static void ssd_write(sim_cluster *c, sim_inst *in, uint64_t new_blocks) {
    if (!new_blocks) return;
    double bytes = (double)new_blocks * c->block_bytes;
    c->m.ssd_write_bytes += bytes;
    if (in && in->link_ssd_write != SIM_NONE) link_send(c, in->link_ssd_write, bytes, 0);
}

static void ssd_put(sim_cluster *c, sim_inst *in, uint64_t id, int cls) {
    uint64_t before = c->ssd.inserted;
    sim_bcache_put(&c->ssd, id, c->now, cls, NULL);
    c->m.cls_store_writes[cls] += c->ssd.inserted - before;
    ssd_write(c, in, c->ssd.inserted - before);
}

// Inserts a block into the instance's HBM prefix cache; evictions cascade HBM -> DRAM -> SSD
// (SSD only in write-back mode: with write-through it already holds them).
static void hbm_put(sim_cluster *c, sim_inst *in, uint64_t id, int cls) {
    uint64_t ev;
    if (!sim_bcache_put(&in->hbm, id, c->now, cls, &ev)) return;
    uint64_t ev2;
    if (in->dram.capacity) {
        if (sim_bcache_put(&in->dram, ev, c->now, cls, &ev2) && !c->cfg->write_through &&
            c->ssd.capacity)
            ssd_put(c, in, ev2, cls);
    } else if (!c->cfg->write_through && c->ssd.capacity) {
        ssd_put(c, in, ev, cls);
    }
}

// A finished turn's answer is persisted with the prompt: the next turn of the session names
// those blocks with its own ids, so they are written when that turn is looked up, stamped
// with the time the answer finished (no later than now).
static void persist_answer(sim_cluster *c, sim_inst *in, const sim_req *r) {
    if (!c->cfg->persist_decode || !c->closed_loop || r->prev_id < 0 || !c->ssd.capacity) return;
    size_t i = done_slot(&c->done, (uint64_t)r->prev_id, false);
    if (i == SIZE_MAX || c->done.done_ns[i] < 0) return;
    uint32_t pn = c->done.n_blocks[i];
    if (!pn || r->n_blocks < pn || r->blocks[pn - 1] != c->done.last_block[i]) return;
    uint32_t upto = KVF_MIN(r->n_blocks, c->done.tokens[i] / c->cfg->block_tokens);
    for (uint32_t k = pn; k < upto; k++) ssd_put(c, in, r->blocks[k], r->cls);
}

// ---- completion -----------------------------------------------------------------------------
static void write_request_row(sim_cluster *c, const sim_req *r, const char *status) {
    if (!c->db || !c->cfg->write_requests) return;
    rpt_request_row row = {
        .id = r->id,
        .cls = trc_class_name(r->cls),
        .session = r->session,
        .arrival_s = r->arrival_ns >= 0 ? (double)r->arrival_ns * 1e-9 : (double)r->recorded_ns * 1e-9,
        .input_tokens = r->input,
        .cached_tokens = r->cached,
        .output_tokens = r->produced,
        .vision_instance = r->vinst == SIM_NONE ? -1 : (int32_t)c->inst[r->vinst].idx,
        .prefill_instance = r->pinst == SIM_NONE ? -1 : (int32_t)c->inst[r->pinst].idx,
        .decode_instance = r->dinst == SIM_NONE ? -1 : (int32_t)c->inst[r->dinst].idx,
        .ttft_s = r->first_ns >= 0 ? (double)(r->first_ns - r->arrival_ns) * 1e-9 : NAN,
        .tpot_s = r->produced > 1 ? (double)(r->last_ns - r->first_ns) * 1e-9 / (r->produced - 1)
                                  : NAN,
        .e2e_s = !strcmp(status, "completed") ? (double)(c->now - r->arrival_ns) * 1e-9 : NAN,
        .queue_s = (double)r->queue_ns * 1e-9,
        .status = status,
        .hit_hbm = r->hit[SIM_TIER_HBM],
        .hit_dram = r->hit[SIM_TIER_DRAM],
        .hit_ssd = r->hit[SIM_TIER_SSD],
        .preemptions = r->preemptions,
    };
    if (rpt_db_request(c->db, &row, c->err) != KVF_OK) fail_run(c, KVF_ERUN);
}

static void finish(sim_cluster *c, uint32_t slot, const char *status) {
    sim_req *r = REQ(c, slot);
    bool ok = !strcmp(status, "completed");
    if (ok) {
        c->completed++;
        double ttft = (double)(r->first_ns - r->arrival_ns) * 1e-6;
        double e2e = (double)(c->now - r->arrival_ns) * 1e-6;
        sim_samples_add(&c->m.ttft_ms, ttft);
        sim_samples_add(&c->m.e2e_ms, e2e);
        if (r->cls < 8) c->m.cls_done[r->cls]++, c->m.cls_ttft_ms[r->cls] += ttft;
        bool tpot_ok = true;
        if (r->produced > 1) {
            double tpot = (double)(r->last_ns - r->first_ns) * 1e-6 / (r->produced - 1);
            sim_samples_add(&c->m.tpot_ms, tpot);
            if (tpot > 0) sim_samples_add(&c->m.gen_tok_s, 1000.0 / tpot);
            if (tpot > 0 && r->cls < 8) c->m.cls_gen_tok_s[r->cls] += 1000.0 / tpot, c->m.cls_gen_n[r->cls]++;
            tpot_ok = tpot <= c->cfg->slo_tpot_p90_ms;
        }
        if (ttft <= c->cfg->slo_ttft_p90_ms && tpot_ok) c->m.slo_ok++;
        sim_metrics_wait_add(&c->m, (double)r->arrival_ns * 1e-9, (double)r->queue_ns * 1e-9,
                             c->cfg->sample_interval_s);
    } else {
        c->rejected++;
        c->m.output_rejected += r->output - r->produced;
    }
    write_request_row(c, r, status);
    if (r->pinst != SIM_NONE)
        rpt_econ_input_add(&c->econ_in, &c->cfg->econ, trc_class_name(r->cls),
                           (double)r->arrival_ns * 1e-9, r->cached, r->input - r->cached,
                           r->produced);
    if (c->closed_loop) {
        size_t i = done_slot(&c->done, r->id, true);
        c->done.done_ns[i] = c->now;
        c->done.tokens[i] = r->input + r->produced;
        c->done.n_blocks[i] = r->n_blocks;
        c->done.last_block[i] = r->n_blocks ? r->blocks[r->n_blocks - 1] : 0;
    }
    for (uint32_t w = r->waiters; w != SIM_NONE;) {
        sim_req *x = REQ(c, w);
        uint32_t next = x->next_waiter;
        set_state(x, SIM_RS_PENDING);
        push_ev(c, c->now + x->think_ns, SIM_EV_ARRIVAL, 0, w, NULL);
        w = next;
    }
    c->in_flight--;
    req_free(c, slot);
}

static void reject(sim_cluster *c, uint32_t slot, const char *why) {
    char st[64];
    snprintf(st, sizeof st, "rejected:%s", why);
    if (!strcmp(why, "queue")) c->m.rejected_queue++;
    else if (!strcmp(why, "slo")) c->m.rejected_slo++;
    else c->m.rejected_fit++;
    finish(c, slot, st);
}

// ---- prefill ---------------------------------------------------------------------------------
static void try_start(sim_cluster *c, sim_inst *in);
static void running_add(sim_inst *in, sim_req *r, uint32_t slot);
static void dsum_join(sim_cluster *c, sim_inst *in, uint32_t slot);

static void count_prefill_work(sim_cluster *c, const sim_req *r, uint32_t replay) {
    mdl_seq s[1];
    mdl_batch b = {.phase = MDL_PREFILL, .seqs = s, .n = 1};
    double f, by;
    s[0] = (mdl_seq){r->compute_tokens, r->cached - replay};
    mdl_batch_work(&c->model, &b, &f, &by);
    c->m.prefill_flops += f;
    double f_actual = f;
    s[0] = (mdl_seq){r->input, 0};
    mdl_batch_work(&c->model, &b, &f, &by);
    c->m.prefill_flops_no_reuse += f;
    // without bounded replay, a hit would recompute the window layers over the whole prefix
    double wfrac = c->model.layers ? (double)c->model.window_layers / c->model.layers : 0;
    c->m.prefill_flops_window_full += f_actual + (c->swa_replay ? wfrac * (f - f_actual) : 0);
}

// Sets r's hit prefix to nb blocks (tiers[] of them by tier) and derives the tokens to compute.
static void set_prefix(sim_cluster *c, sim_req *r, uint32_t nb, const uint32_t tiers[SIM_TIERS]) {
    uint32_t bt = c->cfg->block_tokens;
    uint64_t hit = (uint64_t)nb * bt;
    // at least one prompt token is computed; a paged cache attaches whole blocks only, so a
    // fully cached prompt recomputes its last block (as the engine and vLLM do)
    if (hit > r->input - 1) hit = (uint64_t)(r->input - 1) / bt * bt;
    // tokens by tier follow the prefix order HBM/DRAM/SSD block by block; the cap trims the last
    uint64_t left = hit;
    for (int t = 0; t < SIM_TIERS; t++) {
        uint64_t tok = KVF_MIN((uint64_t)tiers[t] * bt, left);
        r->hit[t] = (uint32_t)tok;
        left -= tok;
    }
    r->hit_blocks = nb;
    r->cached = (uint32_t)hit;
    uint32_t replay = c->swa_replay ? KVF_MIN(c->cfg->swa_replay_tokens, r->cached) : 0;
    r->compute_tokens = r->input - r->cached + replay;
}

// A request reaches its prefill instance: look up its prefix in every tier and start the loads
// of what sits in DRAM or the SSD store (they proceed while it queues).
static void prefill_admit(sim_cluster *c, sim_inst *in, uint32_t slot) {
    sim_req *r = REQ(c, slot);
    const sim_config *cfg = c->cfg;
    r->pinst = in->id;
    persist_answer(c, in, r);
    uint32_t tiers[SIM_TIERS];
    uint32_t nb = sim_cluster_prefix(c, in, r, tiers, true, false);
    set_prefix(c, r, nb, tiers);
    r->computed = 0;
    r->blocks_written = nb;
    // loads from DRAM (PCIe) and SSD (storage network) run in parallel on their own links
    r->pending_loads = 0;
    double by[SIM_TIERS] = {0, (double)tiers[SIM_TIER_DRAM] * c->block_bytes,
                            (double)tiers[SIM_TIER_SSD] * c->block_bytes};
    uint32_t lk[SIM_TIERS] = {SIM_NONE, in->link_dram, in->link_ssd};
    for (int t = SIM_TIER_DRAM; t < SIM_TIERS; t++) {
        if (by[t] <= 0) continue;
        c->m.load_bytes[t] += by[t];
        if (lk[t] == SIM_NONE) continue;
        r->pending_loads++;
        link_send(c, lk[t], by[t], slot);
    }
    in->queued_tokens += r->compute_tokens;
    r->work_s = sim_cluster_prefill_s(c, pool_of(c, in), r->compute_tokens, r->input - r->compute_tokens);
    in->queued_work_s += r->work_s;
    r->enq_ns = c->now;
    if (r->pending_loads && !cfg->overlap_load) {
        set_state(r, SIM_RS_LOADING);
        in->n_loading++;
    } else {
        set_state(r, SIM_RS_PREFILL);
        sim_rheap_push(&in->ready, queue_key(c, in->pcfg, r), slot);
    }
    try_start(c, in);
}

// The request's first chunk is being scheduled: blocks that requests ahead of it computed
// while it queued are in this instance's HBM now and extend its hit prefix (a server looks
// the prefix up when it schedules, not only when the request arrives). The prompt's hit/miss
// accounting is final from here on.
static void prefill_first_schedule(sim_cluster *c, sim_inst *in, sim_req *r) {
    if (c->cfg->prefix_cache) {
        uint32_t k = r->hit_blocks, extra = 0;
        while (k < r->n_blocks && sim_bcache_hit(&in->hbm, r->blocks[k], c->now, r->cls)) k++, extra++;
        if (extra) {
            uint32_t tiers[SIM_TIERS], before = r->compute_tokens;
            // tier counts in blocks, from the tokens set at admission
            uint32_t bt = c->cfg->block_tokens;
            for (int t = 0; t < SIM_TIERS; t++) tiers[t] = (r->hit[t] + bt - 1) / bt;
            tiers[SIM_TIER_HBM] += extra;
            set_prefix(c, r, k, tiers);
            if (r->blocks_written < k) r->blocks_written = k;
            in->queued_tokens -= (double)before - r->compute_tokens;
            in->queued_work_s -= r->work_s;
            r->work_s = sim_cluster_prefill_s(c, pool_of(c, in), r->compute_tokens,
                                              r->input - r->compute_tokens);
            in->queued_work_s += r->work_s;
        }
    }
    sim_metrics *m = &c->m;
    m->prompt_tokens += r->input;
    m->iv_prompt += r->input;
    m->hit_tokens += r->cached;
    m->iv_hit += r->cached;
    m->miss_tokens += r->input - r->cached;
    m->cls_prompt[r->cls] += r->input;
    m->cls_hit[r->cls] += r->cached;
    for (int t = 0; t < SIM_TIERS; t++) {
        m->hit_tier[t] += r->hit[t];
        m->iv_hit_tier[t] += r->hit[t];
    }
    count_prefill_work(c, r, r->compute_tokens + r->cached - r->input);
}

// Blocks of the prompt whose KV now exists (computed or loaded) enter the instance's HBM
// prefix cache as chunks complete, so a request scheduled behind this one can reuse them.
static void write_blocks(sim_cluster *c, sim_inst *in, sim_req *r, uint32_t upto) {
    if (!c->cfg->prefix_cache) return;
    for (uint32_t k = r->blocks_written; k < upto && k < r->n_blocks; k++) {
        if (k + 4 < upto) {
            sim_bcache_prefetch(&in->hbm, r->blocks[k + 4]);
            sim_bcache_prefetch(&c->ssd, r->blocks[k + 4]);
        }
        hbm_put(c, in, r->blocks[k], r->cls);
        if (c->cfg->write_through && c->ssd.capacity) ssd_put(c, in, r->blocks[k], r->cls);
    }
    if (upto > r->blocks_written) r->blocks_written = KVF_MIN(upto, r->n_blocks);
}

static uint32_t queue_len(const sim_inst *in) {
    return (uint32_t)(in->ready.n + in->n_loading + in->dwait.n);
}

static void route_prefill(sim_cluster *c, uint32_t slot) {
    sim_pool *p = &c->pool[SIM_POOL_PREFILL];
    sim_req *r = REQ(c, slot);
    if (p->n_active == 0) {
        reject(c, slot, "no_instance");
        return;
    }
    uint32_t id = p->route(c, p, r);
    if (id == SIM_NONE) {
        reject(c, slot, "slo");
        return;
    }
    const sim_pool_cfg *ipc = c->inst[id].pcfg;
    if (ipc->queue_limit > 0 && (int64_t)queue_len(&c->inst[id]) >= ipc->queue_limit) {
        reject(c, slot, "queue");
        return;
    }
    prefill_admit(c, &c->inst[id], slot);
}

static void start_decode_transfer(sim_cluster *c, sim_inst *pin, uint32_t slot) {
    sim_req *r = REQ(c, slot);
    sim_pool *dp = &c->pool[SIM_POOL_DECODE];
    if (dp->n_active == 0) {
        reject(c, slot, "no_instance");
        return;
    }
    uint32_t id = dp->route(c, dp, r);
    r->dinst = id;
    set_state(r, SIM_RS_TRANSFER);
    double bytes = mdl_kv_seq_bytes(&c->model, r->input);   // window layers send their window
    c->m.kv_transfer_bytes += bytes;

    // the decode pool's admission control: a full wait queue refuses the request (its prefill
    // is spent; a real router would hold or drop it, the simulator counts it rejected)
    if (c->inst[id].pcfg->queue_limit > 0 && (int64_t)c->inst[id].dwait.n >= c->inst[id].pcfg->queue_limit) {
        reject(c, slot, "queue");
        return;
    }
    if (pin->link_xfer == SIM_NONE) {
        set_state(r, SIM_RS_DECODE_WAIT);
        r->enq_ns = c->now;
        sim_rheap_push(&c->inst[id].dwait, queue_key(c, c->inst[id].pcfg, r), slot);
        try_start(c, &c->inst[id]);
    } else {
        link_send(c, pin->link_xfer, bytes, slot);
    }
}

static void prefill_finish(sim_cluster *c, sim_inst *in, uint32_t slot) {
    sim_req *r = REQ(c, slot);
    r->first_ns = r->last_ns = c->now;
    r->produced = 1;
    c->m.output_tokens++;
    c->m.iv_out++;
    c->m.iv_in += r->input;
    write_blocks(c, in, r, r->n_blocks);
    if (r->produced >= r->output) {
        if (c->colocated) {   // release the KV claimed when its prefill started
            in->n_prefilling--;
            in->kv_used -= r->input;
        }
        finish(c, slot, "completed");
        return;
    }
    if (c->colocated) {
        // KV is already here (claimed when its prefill started): join the running batch
        in->n_prefilling--;
        set_state(r, SIM_RS_DECODE);
        r->dinst = in->id;
        running_add(in, r, slot);
        if (in->dsum_on) dsum_join(c, in, slot);
        return;
    }
    start_decode_transfer(c, in, slot);
}

// ---- decode ----------------------------------------------------------------------------------
static void running_add(sim_inst *in, sim_req *r, uint32_t slot) {
    if (r->flags & TRC_F_STRUCTURED) in->n_structured++;
    if (in->n_running + 1 > in->running_cap) {
        size_t cap = in->running_cap;
        kvf_grow((void **)&in->running, &cap, in->n_running + 1, sizeof *in->running);
        in->running_cap = (uint32_t)cap;
    }
    r->qpos = in->n_running;
    in->running[in->n_running++] = slot;
}

static void running_remove(sim_cluster *c, sim_inst *in, uint32_t pos) {
    if (REQ(c, in->running[pos])->flags & TRC_F_STRUCTURED) in->n_structured--;
    uint32_t last = in->running[--in->n_running];
    if (pos < in->n_running) {
        in->running[pos] = last;
        REQ(c, last)->qpos = pos;
    }
}

static uint32_t ctx_tokens(const sim_req *r) { return r->input + r->produced - 1; }

// ---- decode sums -----------------------------------------------------------------------------
// A decode instance keeps its batch as running sums (sim_dsum) so a step costs O(1) in the
// batch size, not O(batch): the step model takes (n, sum of contexts, sums capped by the
// window), a heap of finish steps retires requests, and the ITL histogram takes one weighted
// add per step. Every member emits one token per step (no draft tokens: speculative steps
// draw acceptance per sequence and take the listed path), so member i's context during step
// k + 1 is dctx0_i + k, and its produced count and last token time are brought up to date
// (dsum_sync) only when something reads them. Requests that rebuild their KV after a
// preemption are listed for that one step (recomp), then join.
//
// The listed path (sim_run_opts.decode_listed, and any instance whose step model needs every
// sequence) is kept as the reference: both give the same runs (tests/test_sim.c compares),
// because step models cost summed and listed one-token sequences to the bit and finishing
// requests leave the running array in the order the listed path visits them.
static void gheap_push(sim_gheap *h, uint64_t key, uint32_t slot, uint32_t gen) {
    if (h->n == h->cap) kvf_grow((void **)&h->e, &h->cap, h->n + 1, sizeof *h->e);
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h->e[p].key <= key) break;
        h->e[i] = h->e[p];
        i = p;
    }
    h->e[i] = (struct sim_gentry){key, slot, gen};
}

static struct sim_gentry gheap_pop(sim_gheap *h) {
    KVF_ASSERT(h->n > 0);
    struct sim_gentry top = h->e[0], last = h->e[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->e[c + 1].key < h->e[c].key) c++;
        if (h->e[c].key >= last.key) break;
        h->e[i] = h->e[c];
        i = c;
    }
    if (h->n) h->e[i] = last;
    return top;
}

static void gheap_free(sim_gheap *h) {
    free(h->e);
    memset(h, 0, sizeof *h);
}

static void u32_append(uint32_t **a, uint32_t *n, uint32_t *cap, uint32_t v) {
    if (*n == *cap) {
        size_t c2 = *cap;
        kvf_grow((void **)a, &c2, *n + 1, sizeof **a);
        *cap = (uint32_t)c2;
    }
    (*a)[(*n)++] = v;
}

static bool u32_remove(uint32_t *a, uint32_t *n, uint32_t v) {
    for (uint32_t i = 0; i < *n; i++)
        if (a[i] == v) {
            memmove(a + i, a + i + 1, (*n - i - 1) * sizeof *a);
            (*n)--;
            return true;
        }
    return false;
}

static void dsum_free(sim_dsum *d) {
    for (int j = 0; j < MDL_CAPS; j++) gheap_free(&d->below[j]);
    gheap_free(&d->fin);
    free(d->fresh);
    free(d->recomp);
    sim_rheap_free(&d->fin_pos);
    memset(d, 0, sizeof *d);
}

// Brings a member's produced count and last token time up to the instance's step count.
static void dsum_sync(sim_inst *in, sim_req *r) {
    if (!in->dsum_on || !r->dgen || in->ds.k <= r->dk0) return;
    r->produced += (uint32_t)(in->ds.k - r->dk0);
    r->last_ns = in->ds.last_end;
    r->dk0 = in->ds.k;
}

// r (running on in, produced and last_ns current) becomes a member from the next step on.
static void dsum_join(sim_cluster *c, sim_inst *in, uint32_t slot) {
    sim_dsum *d = &in->ds;
    sim_req *r = REQ(c, slot);
    KVF_ASSERT(!r->dgen && !r->recompute && r->produced < r->output);
    if (++c->dgen == 0) c->dgen = 1;
    r->dgen = c->dgen;
    r->dk0 = d->k;
    r->dctx0 = (int64_t)ctx_tokens(r) - (int64_t)d->k;
    d->n++;
    d->a += r->dctx0;
    for (int j = 0; j < MDL_CAPS; j++) {
        if (!d->caps[j]) continue;
        int64_t at = (int64_t)d->caps[j] - 1 - r->dctx0;   // step count reaching the cap
        if ((int64_t)d->k < at) {
            d->n_below[j]++;
            d->a_below[j] += r->dctx0;
            gheap_push(&d->below[j], (uint64_t)at, slot, r->dgen);
        }
    }
    gheap_push(&d->fin, d->k + (r->output - r->produced), slot, r->dgen);
    u32_append(&d->fresh, &d->n_fresh, &d->fresh_cap, slot);
}

// r (a member, synced) leaves the sums; its heap entries go stale.
static void dsum_leave(sim_cluster *c, sim_inst *in, uint32_t slot) {
    sim_dsum *d = &in->ds;
    sim_req *r = REQ(c, slot);
    KVF_ASSERT(r->dgen && d->n > 0);
    d->n--;
    d->a -= r->dctx0;
    for (int j = 0; j < MDL_CAPS; j++) {
        if (!d->caps[j]) continue;
        if ((int64_t)d->k < (int64_t)d->caps[j] - 1 - r->dctx0) {
            d->n_below[j]--;
            d->a_below[j] -= r->dctx0;
        }
    }
    r->dgen = 0;
    if (r->dk0 == d->k) u32_remove(d->fresh, &d->n_fresh, slot);
}

// The batch's decode members as the step model's sums at step count k (>= d->k, and no
// member reaching a cap in between).
static mdl_decode_sum dsum_batch_at(const sim_dsum *d, uint64_t k) {
    mdl_decode_sum b = {.n = d->n, .sum_ctx = (double)(d->a + (int64_t)d->n * (int64_t)k)};
    for (int j = 0; j < MDL_CAPS; j++) {
        if (!d->caps[j]) continue;
        int64_t below = d->a_below[j] + (int64_t)d->n_below[j] * (int64_t)(k + 1);
        b.sum_min[j] = (double)(below + (int64_t)(d->n - d->n_below[j]) * d->caps[j]);
    }
    return b;
}

static mdl_decode_sum dsum_batch(const sim_dsum *d) { return dsum_batch_at(d, d->k); }

// ---- runs of decode steps --------------------------------------------------------------------
// Between two changes of a decode batch (an admission, a finish, a member reaching a window,
// a preemption) its steps differ only by each member's context growing by one. Such a stretch
// is one event: the steps' durations are computed one by one (the same step-model calls as
// single steps), only the last step's end is scheduled, and the steps before it are settled
// when it fires (dsum_run_settle). A request arriving for the instance meanwhile (its decode
// queue or, colocated, its prefill queue) cuts the run at the first step end not before it,
// where a single-step instance would admit it. Runs are taken only where nothing reads the
// instance between steps except the sampler (which settles what has passed): not under a
// router that balances decode KV over several instances, not with per-step random skew, not
// with a step timeline.
enum { RUN_MAX = 4096 };

// Steps of the run in flight whose ends lie strictly before t (the last one excluded: its
// event settles it).
static uint32_t run_passed(const sim_inst *in, sim_time t) {
    uint32_t lo = 0, hi = in->run_m ? in->run_m - 1 : 0;   // first j with run_end[j] >= t
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (in->run_end[mid] < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// Settles steps [0, upto) of the run in flight: their tokens, ITL gaps and KV.
static void dsum_run_settle(sim_cluster *c, sim_inst *in, uint32_t upto) {
    sim_dsum *d = &in->ds;
    uint32_t n = d->n;
    for (uint32_t j = 0; j < upto; j++) {
        sim_time end = in->run_end[j];
        uint32_t steady = n - d->n_fresh;
        if (steady) sim_hist_add_ns(&c->m.itl_ms, end - d->last_end, steady);
        for (uint32_t i = 0; i < d->n_fresh; i++)
            sim_hist_add_ns(&c->m.itl_ms, end - REQ(c, d->fresh[i])->last_ns, 1);
        d->n_fresh = 0;
        in->kv_used += n;
        c->m.output_tokens += n;
        if (j >= in->run_attr) c->m.iv_out += n;
        c->m.decode_step_tokens += n;
        c->m.decode_step_seqs += n;
        c->m.decode_steps++;
        d->k++;
        d->last_end = end;
    }
}

// KV held by the instance at now, with the steps of its run that have passed.
static double inst_kv_used(const sim_inst *in, sim_time now) {
    if (in->run_m <= 1 || !in->busy) return in->kv_used;
    return in->kv_used + (double)in->ds.n * run_passed(in, now);
}

// The end of a decode step on an instance keeping sums: every member emits one token; those
// whose last token it was finish, in the order the listed path would finish them.
static void dsum_step_done(sim_cluster *c, sim_inst *in) {
    sim_dsum *d = &in->ds;
    uint32_t n = d->n;
    if (n) {
        uint32_t steady = n - d->n_fresh;
        if (steady) sim_hist_add_ns(&c->m.itl_ms, c->now - d->last_end, steady);
        for (uint32_t i = 0; i < d->n_fresh; i++)
            sim_hist_add_ns(&c->m.itl_ms, c->now - REQ(c, d->fresh[i])->last_ns, 1);
        d->n_fresh = 0;
        in->kv_used += n;
        c->m.output_tokens += n;
        c->m.iv_out += n;
        c->m.decode_step_tokens += n;
        c->m.decode_step_seqs += n;
    }
    d->k++;
    d->last_end = c->now;
    for (uint32_t i = 0; i < d->n_recomp; i++) {   // their KV is rebuilt: they decode from now
        sim_req *r = REQ(c, d->recomp[i]);
        r->recompute = 0;
        dsum_join(c, in, d->recomp[i]);
    }
    d->n_recomp = 0;
    for (int j = 0; j < MDL_CAPS; j++) {
        sim_gheap *h = &d->below[j];
        while (h->n && h->e[0].key <= d->k) {
            struct sim_gentry e = gheap_pop(h);
            sim_req *r = REQ(c, e.slot);
            if (r->dgen != e.gen) continue;   // left since
            d->n_below[j]--;
            d->a_below[j] -= r->dctx0;
        }
    }
    // finishing members, by running-array position
    while (d->fin.n && d->fin.e[0].key <= d->k) {
        struct sim_gentry e = gheap_pop(&d->fin);
        sim_req *r = REQ(c, e.slot);
        if (r->dgen != e.gen) continue;
        KVF_ASSERT(e.key == d->k);
        dsum_sync(in, r);
        KVF_ASSERT(r->produced == r->output);
        r->dfin = true;
        sim_rheap_push(&d->fin_pos, r->qpos, r->qpos);
    }
    // The listed path walks the array upwards; a finished request's place is taken by the
    // last one, visited next. Stale positions (past the end) are skipped.
    uint32_t p;
    while (sim_rheap_pop(&d->fin_pos, &p)) {
        if (p >= in->n_running) continue;
        uint32_t slot = in->running[p];
        sim_req *r = REQ(c, slot);
        if (!r->dfin) continue;
        r->dfin = false;
        dsum_leave(c, in, slot);
        in->kv_used -= ctx_tokens(r);
        running_remove(c, in, p);
        if (p < in->n_running && REQ(c, in->running[p])->dfin) sim_rheap_push(&d->fin_pos, p, p);
        finish(c, slot, "completed");
    }
}

// Admits waiting requests while batch slots and KV capacity allow. A request that could never
// fit in an empty instance is rejected.
static void decode_admit(sim_cluster *c, sim_inst *in) {
    const sim_pool_cfg *pc = in->pcfg;
    uint32_t maxb = pc->max_batch_requests > 0 ? (uint32_t)pc->max_batch_requests : UINT32_MAX;
    // a decode pool's token budget caps its batch too (one token per sequence, plus drafts);
    // colocated, the budget is shared with prefill chunks when the step forms
    if (!c->colocated && pc->max_batch_tokens > 0)
        maxb = (uint32_t)KVF_MIN((int64_t)maxb, KVF_MAX(pc->max_batch_tokens / (1 + (int64_t)c->cfg->draft_tokens), 1));
    while (in->dwait.n && in->n_running + in->n_prefilling < maxb) {
        uint32_t slot = in->dwait.slot[0];
        sim_req *r = REQ(c, slot);
        double need = (double)ctx_tokens(r) + 1;
        if (need > in->kv_cap) {
            uint32_t s2;
            sim_rheap_pop(&in->dwait, &s2);
            reject(c, slot, "kv_capacity");
            continue;
        }
        if (in->kv_used + need > in->kv_cap) break;
        uint32_t s2;
        sim_rheap_pop(&in->dwait, &s2);
        r->queue_ns += c->now - r->enq_ns;
        set_state(r, SIM_RS_DECODE);
        in->kv_used += ctx_tokens(r);   // KV held = tokens whose KV exists; steps add theirs
        running_add(in, r, slot);
        if (in->dsum_on) {
            if (r->recompute) u32_append(&in->ds.recomp, &in->ds.n_recomp, &in->ds.recomp_cap, slot);
            else dsum_join(c, in, slot);
        }
    }
}

// Preempts the most recently admitted requests until the KV held fits the capacity.
static void decode_preempt(sim_cluster *c, sim_inst *in) {
    while (in->kv_used > in->kv_cap && in->n_running > 1) {
        uint32_t slot = in->running[in->n_running - 1];
        sim_req *r = REQ(c, slot);
        if (in->dsum_on) {
            if (r->dgen) {
                dsum_sync(in, r);
                dsum_leave(c, in, slot);
            } else {
                u32_remove(in->ds.recomp, &in->ds.n_recomp, slot);
            }
        }
        running_remove(c, in, in->n_running - 1);
        in->kv_used -= ctx_tokens(r);
        r->preemptions++;
        c->m.preemptions++;
        r->enq_ns = c->now;
        if (c->cfg->preemption == SIM_PREEMPT_SWAP && c->hw.pcie_Bps > 0) {
            // out and back in over PCIe
            set_state(r, SIM_RS_SWAPPED);
            double s = 2.0 * mdl_kv_seq_bytes(&c->model, ctx_tokens(r)) / c->hw.pcie_Bps;
            push_ev(c, c->now + (sim_time)(s * 1e9), SIM_EV_SWAPIN, 0, slot, NULL);
        } else {
            r->recompute = ctx_tokens(r);
            set_state(r, SIM_RS_DECODE_WAIT);
            sim_rheap_push(&in->dwait, queue_key(c, in->pcfg, r), slot);
        }
    }
}

// Emits the tokens of one decode step for running request at pos; returns true if it finished.
static bool decode_emit(sim_cluster *c, sim_inst *in, uint32_t pos) {
    uint32_t slot = in->running[pos];
    sim_req *r = REQ(c, slot);
    if (r->recompute) {   // this step rebuilt its KV; no token
        r->recompute = 0;
        return false;
    }
    uint32_t k = 1;
    for (uint32_t d = 0; d < c->cfg->draft_tokens; d++) {
        if (kvf_rng_uniform(&in->rng) >= c->cfg->acceptance) break;
        k++;
    }
    if (k > r->output - r->produced) k = r->output - r->produced;
    sim_hist_add_ns(&c->m.itl_ms, c->now - r->last_ns, 1);
    sim_hist_add_ns(&c->m.itl_ms, 0, k - 1);
    r->produced += k;
    r->last_ns = c->now;
    in->kv_used += k;
    c->m.output_tokens += k;
    c->m.iv_out += k;
    c->m.decode_step_tokens += k;
    c->m.decode_step_seqs++;
    if (r->produced < r->output) return false;
    in->kv_used -= ctx_tokens(r);
    running_remove(c, in, pos);
    finish(c, slot, "completed");
    return true;
}

// ---- step formation --------------------------------------------------------------------------
// n sequences computing tokens new tokens in all (timeline only).
static void begin_step(sim_cluster *c, sim_inst *in, const mdl_step_cost *k, uint32_t n,
                       uint64_t tokens) {
    if (c->timeline) {
        static const char *names[] = {"prefill", "decode", "mixed", "vision"};
        int ph = in->pool == SIM_POOL_VISION ? 3 : in->n_running && in->n_batch ? 2 : in->n_running ? 1 : 0;
        sim_trace_step(c->timeline, c->now, k->ns, in->pool, in->idx, names[ph], n, tokens, k->flops, k->bytes);
    }
    in->busy = true;
    in->step_start = c->now;
    in->step_end = c->now + k->ns;
    in->steps++;
    push_ev(c, in->step_end, SIM_EV_STEP_DONE, in->id, 0, &in->step_seq);
}

// Fills the batch with prefill chunks from the ready queue within budget tokens. Colocated
// instances claim KV for a request when its first chunk is scheduled.
static uint32_t take_prefill_chunks(sim_cluster *c, sim_inst *in, int64_t budget, uint32_t n) {
    const sim_pool_cfg *pc = in->pcfg;
    int64_t lim = pc->chunk_tokens > 0 ? pc->chunk_tokens : budget;
    uint32_t maxb = pc->max_batch_requests > 0 ? (uint32_t)pc->max_batch_requests : UINT32_MAX;
    while (budget > 0 && in->ready.n) {
        if (!c->colocated && n >= maxb) break;   // requests per prefill step
        uint32_t slot = in->ready.slot[0];
        sim_req *r = REQ(c, slot);
        if (c->colocated && r->computed == 0) {
            double need = (double)r->input + 1;
            if (need > in->kv_cap) {
                uint32_t s2;
                sim_rheap_pop(&in->ready, &s2);
                in->queued_tokens -= r->compute_tokens;
                in->queued_work_s -= r->work_s;
                reject(c, slot, "kv_capacity");
                continue;
            }
            if (in->kv_used + need > in->kv_cap || in->n_running + in->n_prefilling >= maxb) break;
            in->kv_used += r->input;
            in->n_prefilling++;
        }
        uint32_t s2;
        sim_rheap_pop(&in->ready, &s2);
        if (r->computed == 0 && !r->scheduled) {
            r->scheduled = true;
            prefill_first_schedule(c, in, r);
        }
        uint32_t rem = r->compute_tokens - r->computed;
        uint32_t ch = (uint32_t)KVF_MIN((int64_t)rem, KVF_MIN(budget, lim));
        if (r->computed == 0) r->queue_ns += c->now - r->enq_ns;
        batch_reserve(in, n + 1);
        seqs_reserve(c, n + 1);
        in->batch[n] = slot;
        in->chunk[n] = ch;
        c->seqs[n] = (mdl_seq){ch, r->input - r->compute_tokens + r->computed};
        r->in_batch = true;
        if (c->cfg->step_sequential)   // later chunks of this step see this chunk's blocks
            write_blocks(c, in, r, (r->input - r->compute_tokens + r->computed + ch) / c->cfg->block_tokens);
        budget -= ch;
        n++;
    }
    return n;
}

static void try_start_step(sim_cluster *c, sim_inst *in);

// Starts a step if the instance can; every change of an instance's load ends here (admission,
// step ends, arrivals in its queues), so its router index is brought up to date here.
static void try_start(sim_cluster *c, sim_inst *in) {
    if (in->busy && in->run_m > 1 && (in->dwait.n || in->ready.n)) {
        // a request for this instance: the run ends at the first step end not before now
        uint32_t j = run_passed(in, c->now);
        if (j + 1 < in->run_m) {
            // the steps cut off were costed but never run
            for (uint32_t i = j + 1; i < in->run_m; i++) {
                c->m.steps--;
                if (in->run_ext[i] & 1) c->m.extrapolated_steps--;
                if (in->run_ext[i] & 2) c->m.table_fallbacks--;
            }
            in->run_m = j + 1;
            sim_queue_cancel(c->q, in->step_seq);
            in->step_end = in->run_end[j];
            push_ev(c, in->step_end, SIM_EV_STEP_DONE, in->id, 0, &in->step_seq);
        }
    }
    try_start_step(c, in);
    sim_router_touch(c, in);
}

static void try_start_step(sim_cluster *c, sim_inst *in) {
    if (in->busy || c->status != KVF_OK) return;
    sim_pool *p = pool_of(c, in);
    mdl_step_cost k;
    if (in->pool == SIM_POOL_VISION) {
        uint32_t n = 0, images = 0;
        uint32_t slot;
        uint32_t maxb = (uint32_t)in->pcfg->max_batch_requests;
        while (in->ready.n && n < maxb) {
            sim_rheap_pop(&in->ready, &slot);
            sim_req *r = REQ(c, slot);
            r->queue_ns += c->now - r->enq_ns;
            batch_reserve(in, n + 1);
            in->batch[n++] = slot;
            images += r->images;
        }
        if (!n) return;
        in->n_batch = n;
        step_cost(c, p, MDL_VISION, 0, images, NULL, &k);
        begin_step(c, in, &k, n, images);
        return;
    }
    uint32_t n = 0;        // sequences listed in c->seqs
    uint32_t ndec = 0;     // decoding sequences, listed or summed
    mdl_phase phase = MDL_PREFILL;
    mdl_decode_sum ds = {0};
    uint64_t tokens = 0;
    if (in->pool == SIM_POOL_DECODE || c->colocated) {
        decode_admit(c, in);
        if (in->dsum_on) {
            // members as sums; requests rebuilding their KV listed
            seqs_reserve(c, in->ds.n_recomp);
            for (uint32_t i = 0; i < in->ds.n_recomp; i++) {
                c->seqs[i] = (mdl_seq){REQ(c, in->ds.recomp[i])->recompute, 0};
                tokens += c->seqs[i].new_tokens;
            }
            n = in->ds.n_recomp;
            ds = dsum_batch(&in->ds);
            tokens += ds.n;
        } else {
            seqs_reserve(c, in->n_running);
            for (uint32_t i = 0; i < in->n_running; i++) {
                sim_req *r = REQ(c, in->running[i]);
                c->seqs[i] = r->recompute ? (mdl_seq){r->recompute, 0}
                                          : (mdl_seq){1 + c->cfg->draft_tokens, ctx_tokens(r)};
                tokens += c->seqs[i].new_tokens;
            }
            n = in->n_running;
        }
        ndec = in->n_running;
        phase = MDL_DECODE;
    }
    in->n_batch = 0;
    if (in->pool == SIM_POOL_PREFILL) {
        int64_t budget = in->pcfg->max_batch_tokens - (int64_t)ndec * (1 + c->cfg->draft_tokens);
        uint32_t n2 = take_prefill_chunks(c, in, budget > 0 ? budget : 0, n);
        in->n_batch = n2 - n;
        // batch[] holds prefill chunks at [n, n2): shift them to the front
        if (n && in->n_batch) {
            memmove(in->batch, in->batch + n, in->n_batch * sizeof *in->batch);
            memmove(in->chunk, in->chunk + n, in->n_batch * sizeof *in->chunk);
        }
        for (uint32_t i = 0; i < in->n_batch; i++) tokens += in->chunk[i];
        if (ndec && in->n_batch) phase = MDL_MIXED;
        else if (in->n_batch) phase = MDL_PREFILL;
        n = n2;
    }
    if (!ndec && !in->n_batch) return;
    step_cost(c, p, phase, n, 0, &ds, &k);
    if (in->n_structured) k.ns += (sim_time)(in->n_structured * c->cfg->structured_mask_ns);
    in->run_m = 0;
    in->run_attr = 0;
    if (in->runs_on && phase == MDL_DECODE && !n && ds.n && !in->dwait.n && !in->ready.n) {
        sim_dsum *d = &in->ds;
        uint64_t m = RUN_MAX;
        if (d->fin.n) m = KVF_MIN(m, d->fin.e[0].key - d->k);
        for (int j = 0; j < MDL_CAPS; j++)
            if (d->caps[j] && d->below[j].n) m = KVF_MIN(m, d->below[j].e[0].key - d->k);
        double room = in->kv_cap - in->kv_used;   // the step after which KV overflows is the last
        m = room < 0 ? 1 : KVF_MIN(m, (uint64_t)floor(room / ds.n) + 1);
        if (m > 1) {
            if (m > in->run_cap) {
                size_t cap = in->run_cap, cap2 = in->run_cap;
                kvf_grow((void **)&in->run_end, &cap, m, sizeof *in->run_end);
                kvf_grow((void **)&in->run_ext, &cap2, m, sizeof *in->run_ext);
                in->run_cap = (uint32_t)cap;
            }
            in->run_end[0] = c->now + k.ns;
            in->run_ext[0] = (uint8_t)(k.extrapolated | k.table_fallback << 1);
            for (uint32_t j = 1; j < m; j++) {
                mdl_decode_sum dj = dsum_batch_at(d, d->k + j);
                mdl_step_cost kj;
                step_cost(c, p, MDL_DECODE, 0, 0, &dj, &kj);
                if (in->n_structured) kj.ns += (sim_time)(in->n_structured * c->cfg->structured_mask_ns);
                in->run_end[j] = in->run_end[j - 1] + kj.ns;
                in->run_ext[j] = (uint8_t)(kj.extrapolated | kj.table_fallback << 1);
            }
            in->run_m = (uint32_t)m;
            k.ns = in->run_end[m - 1] - c->now;
        }
    }
    begin_step(c, in, &k, ndec + in->n_batch, tokens);
}

static void on_step_done(sim_cluster *c, sim_inst *in) {
    // an overlapped load that is still running holds the step (its layers wait for the KV)
    for (uint32_t i = 0; i < in->n_batch; i++)
        if (REQ(c, in->batch[i])->pending_loads) {
            in->waiting_loads = true;
            return;
        }
    in->waiting_loads = false;
    in->busy = false;
    in->busy_ns += (double)(c->now - in->step_start);
    if (in->pool == SIM_POOL_VISION) {
        for (uint32_t i = 0; i < in->n_batch; i++) route_prefill(c, in->batch[i]);
        in->n_batch = 0;
        try_start(c, in);
        return;
    }
    // decode tokens first (requests that were running when the step began)
    if (in->pool == SIM_POOL_DECODE || c->colocated) {
        c->m.decode_steps++;
        if (in->dsum_on) {
            if (in->run_m > 1) {
                dsum_run_settle(c, in, in->run_m - 1);
                in->run_m = 0;
            }
            dsum_step_done(c, in);
        } else {
            for (uint32_t i = 0; i < in->n_running;)
                if (!decode_emit(c, in, i)) i++;
        }
    }
    for (uint32_t i = 0; i < in->n_batch; i++) {
        uint32_t slot = in->batch[i];
        sim_req *r = REQ(c, slot);
        r->in_batch = false;
        r->computed += in->chunk[i];
        in->queued_tokens -= in->chunk[i];
        // the request's estimated work drains in proportion to its computed tokens
        double done_s = r->compute_tokens ? r->work_s * in->chunk[i] / r->compute_tokens : 0;
        in->queued_work_s -= done_s;
        if (in->queued_work_s < 0) in->queued_work_s = 0;
        // prompt tokens whose KV exists: the hit prefix (minus replayed tokens) + computed
        write_blocks(c, in, r, (r->input - r->compute_tokens + r->computed) / c->cfg->block_tokens);
        if (r->computed >= r->compute_tokens) prefill_finish(c, in, slot);
        else sim_rheap_push(&in->ready, queue_key(c, in->pcfg, r), slot);
    }
    in->n_batch = 0;
    if (in->pool == SIM_POOL_DECODE || c->colocated) decode_preempt(c, in);
    try_start(c, in);
}

static void on_link(sim_cluster *c, uint32_t id) {
    sim_link_ref *lr = &c->links[id];
    lr->link.ev_seq = 0;
    uint64_t tag;
    while (sim_link_pop_done(&lr->link, c->now, &tag)) {
        sim_inst *in = &c->inst[lr->inst];
        uint32_t slot = (uint32_t)tag;
        sim_req *r = REQ(c, slot);
        if (c->timeline) sim_trace_flow_end(c->timeline, c->now, in->pool, in->idx, LINK_WHAT[lr->kind], (uint64_t)id << 32 | tag);
        if (lr->kind == LINK_XFER) {
            sim_inst *d = &c->inst[r->dinst];
            set_state(r, SIM_RS_DECODE_WAIT);
            r->enq_ns = c->now;
            sim_rheap_push(&d->dwait, queue_key(c, d->pcfg, r), slot);
            try_start(c, d);
            continue;
        }
        KVF_ASSERT(r->pending_loads > 0);
        if (--r->pending_loads) continue;
        if (r->state == SIM_RS_LOADING) {
            in->n_loading--;
            set_state(r, SIM_RS_PREFILL);
            sim_rheap_push(&in->ready, queue_key(c, in->pcfg, r), slot);
            try_start(c, in);
        } else if (r->in_batch && in->waiting_loads) {
            on_step_done(c, in);
        }
    }
    reschedule_link(c, id);
}

static void on_arrival(sim_cluster *c, uint32_t slot) {
    sim_req *r = REQ(c, slot);
    r->arrival_ns = c->now;
    r->seq = c->seq++;
    c->arrived++;
    if (c->cfg->structured_share > 0 && kvf_rng_uniform(&c->rng) < c->cfg->structured_share)
        r->flags |= TRC_F_STRUCTURED;
    c->m.output_requested += r->output;
    if (c->arrived == 1) c->first_arrival_ns = c->now;
    c->last_arrival_ns = c->now;
    sim_pool *vp = &c->pool[SIM_POOL_VISION];
    if (r->images && vp->n_active) {
        sim_inst *best = NULL;
        for (uint32_t i = 0; i < vp->n; i++) {
            sim_inst *in = &c->inst[vp->first + i];
            if (in->active && (!best || in->ready.n < best->ready.n)) best = in;
        }
        if (best->pcfg->queue_limit > 0 && (int64_t)best->ready.n >= best->pcfg->queue_limit) {
            reject(c, slot, "queue");
            return;
        }
        r->vinst = best->id;
        set_state(r, SIM_RS_VISION);
        r->enq_ns = c->now;
        sim_rheap_push(&best->ready, queue_key(c, best->pcfg, r), slot);
        try_start(c, best);
        return;
    }
    route_prefill(c, slot);
}

// ---- sampling ----------------------------------------------------------------------------------
static void ts(sim_cluster *c, const char *pool, int32_t inst, const char *metric, double v) {
    if (!c->db || c->status != KVF_OK) return;
    if (rpt_db_timeseries(c->db, (double)c->now * 1e-9, pool, inst, metric, v, c->err) != KVF_OK)
        fail_run(c, KVF_ERUN);
}

static void pool_gpu_account(sim_cluster *c) {
    for (int k = 0; k < SIM_POOLS; k++) {
        sim_pool *p = &c->pool[k];
        p->gpu_ns += (double)(c->now - p->gpu_last) * p->n_active *
                     (p->cfg ? p->cfg->gpus_per_instance : 0);
        p->gpu_last = c->now;
    }
}

static void on_sample(sim_cluster *c, double interval_s) {
    sim_metrics *m = &c->m;
    // expire entries whose retention ran out, so occupancy is honest
    sim_bcache_expire(&c->ssd, c->now);
    uint64_t hbm_blocks = 0, qlen = 0;
    for (uint32_t i = 0; i < c->n_inst; i++) {
        sim_bcache_expire(&c->inst[i].hbm, c->now);
        sim_bcache_expire(&c->inst[i].dram, c->now);
        hbm_blocks += c->inst[i].hbm.used;
    }
    static const char *names[SIM_POOLS] = {"vision", "prefill", "decode"};
    sim_samples_add(&m->sample_t, (double)c->now * 1e-9);
    for (int k = 0; k < SIM_POOLS; k++) {
        sim_pool *p = &c->pool[k];
        if (!p->n) {
            sim_samples_add(&m->pool_queue[k], 0);
            continue;
        }
        double busy = 0, q = 0, run = 0, kvu = 0, kvc = 0;
        for (uint32_t i = 0; i < p->n; i++) {
            sim_inst *in = &c->inst[p->first + i];
            double b = in->busy_ns + (in->busy ? (double)(c->now - in->step_start) : 0);
            busy += b - in->busy_ns_sampled;
            in->busy_ns_sampled = b;
            q += queue_len(in);
            if (c->timeline) sim_trace_counter(c->timeline, c->now, in->pool, in->idx, "queue", queue_len(in));
            run += in->n_running + in->n_batch;
            kvu += inst_kv_used(in, c->now);
            if (in->busy && in->run_m > 1) {   // tokens of the run's steps that have passed
                uint32_t passed = run_passed(in, c->now);
                m->iv_out += (uint64_t)in->ds.n * (passed - in->run_attr);
                in->run_attr = passed;
            }
            kvc += in->kv_cap;
        }
        qlen += (uint64_t)q;
        sim_samples_add(&m->pool_queue[k], q);
        double util = p->n_active ? busy / (interval_s * 1e9 * p->n_active) : 0;
        ts(c, names[k], -1, "utilization", util > 1 ? 1 : util);
        ts(c, names[k], -1, "queue_len", q);
        ts(c, names[k], -1, "running_requests", run);
        ts(c, names[k], -1, "instances", p->n_active);
        if (kvc > 0) ts(c, names[k], -1, "kv_used_frac", kvu / kvc);
    }
    sim_samples_add(&m->queue_len, (double)qlen);
    ts(c, "cluster", -1, "input_tok_s", (double)m->iv_in / interval_s);
    ts(c, "cluster", -1, "output_tok_s", (double)m->iv_out / interval_s);
    ts(c, "cluster", -1, "in_flight", (double)c->in_flight);
    if (m->iv_prompt) {
        double pr = (double)m->iv_prompt;
        ts(c, "cluster", -1, "hit_rate", (double)m->iv_hit / pr);
        ts(c, "cluster", -1, "hit_rate_hbm", (double)m->iv_hit_tier[0] / pr);
        ts(c, "cluster", -1, "hit_rate_dram", (double)m->iv_hit_tier[1] / pr);
        ts(c, "cluster", -1, "hit_rate_ssd", (double)m->iv_hit_tier[2] / pr);
    }
    double store = (double)c->ssd.used * c->block_bytes;
    if (store > m->store_bytes_peak) m->store_bytes_peak = store;
    ts(c, "kv", -1, "kv_store_bytes", store);
    // the store by class; a class's steady state is what it holds once the run has lasted its
    // retention (before that the store is still filling)
    for (int k = 0; k < TRC_CLASS_COUNT; k++) {
        uint64_t u = c->ssd.used_cls[k];
        if (!u && !m->cls_store_peak[k] && !m->cls_store_writes[k]) continue;
        char name[48];
        snprintf(name, sizeof name, "kv_store_bytes_%s", trc_class_name(k));
        ts(c, "kv", -1, name, (double)u * c->block_bytes);
        if (u > m->cls_store_peak[k]) m->cls_store_peak[k] = u;
        int64_t ret = c->cfg->retention_ns[k];
        if (ret > 0 && c->now >= ret) {
            m->cls_store_steady_sum[k] += (double)u;
            m->cls_store_steady_n[k]++;
            if (u > m->cls_store_steady_peak[k]) m->cls_store_steady_peak[k] = u;
        }
    }
    ts(c, "kv", -1, "hbm_cache_bytes", (double)hbm_blocks * c->block_bytes);
    m->iv_in = m->iv_out = m->iv_prompt = m->iv_hit = 0;
    memset(m->iv_hit_tier, 0, sizeof m->iv_hit_tier);
}

static void on_schedule(sim_cluster *c, uint32_t e) {
    const sim_schedule_entry *s = &c->cfg->schedule[e];
    pool_gpu_account(c);
    int32_t want[SIM_POOLS] = {-1, s->prefill, s->decode};
    for (int k = SIM_POOL_PREFILL; k < SIM_POOLS; k++) {
        sim_pool *p = &c->pool[k];
        if (want[k] < 0 || !p->n) continue;
        uint32_t w = (uint32_t)KVF_MIN((uint32_t)want[k], p->n);
        if (w < 1) w = 1;
        p->n_active = w;
        for (uint32_t i = 0; i < p->n; i++) {
            c->inst[p->first + i].active = i < w;
            sim_router_touch(c, &c->inst[p->first + i]);
        }
    }
}

// ---- setup and the loop ------------------------------------------------------------------------
// Parallelism of one instance of the pool: TP and EP default to all its GPUs.
static mdl_parallel pool_parallel(const sim_cluster *c, const sim_pool_cfg *pc) {
    const sim_config *cfg = c->cfg;
    mdl_parallel par = {.gpus = (uint32_t)pc->gpus_per_instance,
                        .tp = (uint32_t)(pc->tp > 0 ? pc->tp : pc->gpus_per_instance),
                        .ep = (uint32_t)(pc->ep > 0 ? pc->ep : pc->gpus_per_instance),
                        .ep_skew = cfg->ep_skew > 1 ? cfg->ep_skew : 1.0};
    if (c->model.experts && cfg->ep_redundant_experts > 0) {
        // redundant copies of hot experts spread the hottest GPU's load
        par.ep_skew = 1.0 + (par.ep_skew - 1.0) * (1.0 - KVF_MIN(cfg->ep_redundant_experts, 1.0));
    }
    return par;
}

static kvf_status make_stepper(sim_cluster *c, sim_pool *p, kvf_err *err) {
    mdl_parallel par = pool_parallel(c, p->cfg);
    c->ep_skew_base = par.ep_skew;
    return sim_make_stepper(c->cfg, &c->model, &c->hw, &par, c->opts, &p->stepper, err);
}

kvf_status sim_cluster_init(sim_cluster *c, const sim_config *cfg, const sim_run_opts *o,
                            kvf_err *err) {
    memset(c, 0, sizeof *c);
    c->cfg = cfg;
    c->opts = o;
    c->err = err;
    c->free_req = SIM_NONE;
    c->colocated = cfg->mode == SIM_COLOCATED;
    kvf_rng_init(&c->rng, cfg->seed, 0xC1u);
    sim_metrics_init(&c->m);
    rpt_econ_input_init(&c->econ_in);
    char path[SIM_PATH_MAX], dir[SIM_PATH_MAX];
    sim_config_resolve(cfg, "models", dir, sizeof dir);
    sim_config_model_path(cfg, path, sizeof path);
    kvf_status st = mdl_model_load(&c->model, path, dir, err);
    if (st) return st;
    sim_config_hardware_path(cfg, path, sizeof path);
    st = mdl_hardware_load(&c->hw, path, dir, err);
    if (st) return st;
    c->swa_replay = c->model.window > 0 && c->model.window_layers > 0 && cfg->swa_replay_tokens > 0;
    double stored_tok = c->swa_replay ? c->model.kv_bytes_per_token_full : c->model.kv_bytes_per_token;
    c->block_bytes = stored_tok * cfg->block_tokens;
    c->kv_bytes_token = c->model.kv_bytes_per_token;
    // pools: colocated folds prefill + decode instances into one pool (same GPU count)
    const sim_pool_cfg *pcfg[SIM_POOLS] = {&cfg->vision, &cfg->prefill, &cfg->decode};
    uint32_t counts[SIM_POOLS] = {(uint32_t)cfg->vision.instances, (uint32_t)cfg->prefill.instances,
                                  (uint32_t)cfg->decode.instances};
    if (c->colocated) {
        counts[SIM_POOL_PREFILL] += counts[SIM_POOL_DECODE];
        counts[SIM_POOL_DECODE] = 0;
    }
    c->n_inst = counts[0] + counts[1] + counts[2];
    c->inst = kvf_calloc(c->n_inst ? c->n_inst : 1, sizeof *c->inst);
    uint32_t id = 0;
    for (int k = 0; k < SIM_POOLS; k++) {
        sim_pool *p = &c->pool[k];
        p->kind = (sim_pool_kind)k;
        p->cfg = pcfg[k];
        p->first = id;
        p->n = p->n_active = counts[k];
        if (p->n) {
            st = make_stepper(c, p, err);
            if (st) return st;
        }
        mdl_parallel par = pool_parallel(c, p->cfg);
        double kvcap = mdl_kv_capacity_tokens(&c->model, &c->hw, &par, cfg->activation_reserve);
        // sliding-window layers hold only their window per sequence, not the whole context:
        // count capacity in full-layer tokens (the window part is a small constant per request)
        if (c->model.window && c->model.window_layers && c->model.kv_bytes_per_token_full > 0)
            kvcap *= c->model.kv_bytes_per_token / c->model.kv_bytes_per_token_full;
        if (p->cfg->kv_tokens > 0) kvcap = (double)p->cfg->kv_tokens;
        if (p->n && k != SIM_POOL_VISION && kvcap < 1) {
            char key[64], where[SIM_PATH_MAX + 128];
            snprintf(key, sizeof key, "cluster.%s.gpus_per_instance",
                     k == SIM_POOL_PREFILL ? "prefill" : "decode");
            sim_config_where(cfg, key, where, sizeof where);
            return kvf_fail(err, KVF_EINVAL,
                            "%s: model %s (%.1f GB of weights, key 'model') does not fit %d x %s "
                            "GPU(s) (key 'hardware') with room for KV; give more GPUs per "
                            "instance", where, c->model.name, c->model.weight_bytes / 1e9,
                            p->cfg->gpus_per_instance, c->hw.name);
        }
        for (uint32_t i = 0; i < p->n; i++, id++) {
            sim_inst *in = &c->inst[id];
            in->id = id;
            in->pool = (sim_pool_kind)k;
            in->idx = i;
            in->active = true;
            // colocated: the instances counted under cluster.decode keep its queue policy and KV
            in->pcfg = c->colocated && k == SIM_POOL_PREFILL && i >= (uint32_t)cfg->prefill.instances
                           ? &cfg->decode : p->cfg;
            in->kv_cap = in->pcfg->kv_tokens > 0 ? (double)in->pcfg->kv_tokens : kvcap;
            // decode by running sums where the step model takes them and every sequence
            // emits one token per step
            in->dsum_on = (k == SIM_POOL_DECODE || (c->colocated && k == SIM_POOL_PREFILL)) &&
                          p->stepper && p->stepper->vt->decode_sums && cfg->draft_tokens == 0 &&
                          !(o && o->decode_listed);
            if (in->dsum_on) mdl_model_caps(&c->model, in->ds.caps);
            // runs of steps where no decode router reads this instance's KV between steps
            in->runs_on = in->dsum_on && !(o && o->decode_single) && !(o && o->timeline_path) &&
                          !(cfg->ep_skew_sd > 0 && c->model.experts) &&
                          (c->colocated || counts[SIM_POOL_DECODE] == 1 ||
                           strcmp(cfg->router_decode, "least_kv") != 0);
            kvf_rng_init(&in->rng, cfg->seed, 0x1000u + id);
            in->link_dram = in->link_ssd = in->link_xfer = in->link_ssd_write = SIM_NONE;
            uint64_t hbm_blocks = 0, dram_blocks = 0;
            if (k == SIM_POOL_PREFILL && cfg->prefix_cache) {
                hbm_blocks = (uint64_t)(kvcap * cfg->hbm_cache_frac *
                                        (c->kv_bytes_token / stored_tok) / cfg->block_tokens);
                if (cfg->dram.capacity_bytes < 0) dram_blocks = UINT64_MAX;
                else dram_blocks = (uint64_t)(cfg->dram.capacity_bytes / c->block_bytes);
                in->link_dram = add_link(c, cfg->dram.read_Bps, (sim_time)cfg->dram.latency_ns, id, LINK_DRAM);
                if (cfg->ssd.capacity_bytes != 0) {
                    in->link_ssd = add_link(c, cfg->ssd.read_Bps, (sim_time)cfg->ssd.latency_ns, id, LINK_SSD);
                    in->link_ssd_write = add_link(c, cfg->ssd.write_Bps, 0, id, LINK_SSDW);
                }
                if (!c->colocated)
                    in->link_xfer = add_link(c, cfg->kv_transfer_Bps, (sim_time)cfg->net_latency_ns, id, LINK_XFER);
            }
            sim_bcache_init(&in->hbm, hbm_blocks, cfg->retention_ns);
            sim_bcache_init(&in->dram, dram_blocks, cfg->retention_ns);
        }
    }
    uint64_t ssd_blocks = 0;
    if (cfg->prefix_cache && cfg->ssd.capacity_bytes < 0) ssd_blocks = UINT64_MAX;
    else if (cfg->prefix_cache && cfg->ssd.capacity_bytes > 0)
        ssd_blocks = (uint64_t)(cfg->ssd.capacity_bytes / c->block_bytes);
    sim_bcache_init(&c->ssd, ssd_blocks, cfg->retention_ns);
    sim_router_init(c, &c->pool[SIM_POOL_PREFILL], true);
    sim_router_init(c, &c->pool[SIM_POOL_DECODE], false);
    c->q = sim_queue_create(1024);
    if (o && o->timeline_path) {
        static const char *pools[SIM_POOLS] = {"vision", "prefill", "decode"};
        const char *names[SIM_POOLS] = {pools[0], c->colocated ? "colocated" : pools[1], pools[2]};
        kvf_status tst = sim_trace_open(&c->timeline, o->timeline_path, o->timeline_from_s, o->timeline_to_s, names, SIM_POOLS, err);
        if (tst) return tst;
    }
    return KVF_OK;
}

kvf_status sim_cluster_open_trace(sim_cluster *c, trc_reader *rd) {
    c->reader = rd;
    trc_format f = trc_reader_format(rd);
    c->closed_loop = f == TRC_FMT_SESSIONS || f == TRC_FMT_KVFLEET;
    read_trace(c);
    return c->status;
}

kvf_status sim_cluster_loop(sim_cluster *c) {
    const sim_config *cfg = c->cfg;
    double interval = cfg->sample_interval_s > 0 ? cfg->sample_interval_s : 10;
    push_ev(c, (sim_time)(interval * 1e9), SIM_EV_SAMPLE, 0, 0, NULL);
    for (int32_t e = 0; e < cfg->n_schedule; e++) {
        // time-of-day entries repeat daily from the trace start at 00:00 UTC
        push_ev(c, (sim_time)(cfg->schedule[e].from_h * 3600e9), SIM_EV_SCHEDULE, 0, (uint64_t)e, NULL);
    }
    sim_event ev;
    uint64_t n = 0;
    while (c->status == KVF_OK && sim_queue_pop(c->q, &ev)) {
        KVF_ASSERT(ev.t >= c->now);
        // periodic events alone do not keep a finished run going
        if ((ev.kind == SIM_EV_SAMPLE || ev.kind == SIM_EV_SCHEDULE) && c->reader_done && !c->in_flight)
            break;
        c->now = ev.t;
        switch (ev.kind) {
        case SIM_EV_ARRIVAL:
            on_arrival(c, (uint32_t)ev.arg[0]);
            if (ev.dst == 1) read_trace(c);
            break;
        case SIM_EV_STEP_DONE: on_step_done(c, &c->inst[ev.dst]); break;
        case SIM_EV_LINK: on_link(c, (uint32_t)ev.arg[0]); break;
        case SIM_EV_SWAPIN: {
            sim_req *r = REQ(c, (uint32_t)ev.arg[0]);
            sim_inst *in = &c->inst[r->dinst];
            set_state(r, SIM_RS_DECODE_WAIT);
            sim_rheap_push(&in->dwait, queue_key(c, in->pcfg, r), (uint32_t)ev.arg[0]);
            try_start(c, in);
            break;
        }
        case SIM_EV_SAMPLE: {
            on_sample(c, interval);
            // Work bounded by events, not simulated time: across an idle gap (no request
            // between arrival and end, e.g. before an outlier timestamp) the samples would all
            // read zero, so the next one goes to the last interval boundary before the next
            // event.
            sim_time step = (sim_time)(interval * 1e9), next = c->now + step, t_ev;
            if (c->arrived == c->completed + c->rejected && sim_queue_peek_time(c->q, &t_ev) &&
                t_ev > next)
                next += (t_ev - next) / step * step;
            push_ev(c, next, SIM_EV_SAMPLE, 0, 0, NULL);
            break;
        }
        case SIM_EV_SCHEDULE:
            on_schedule(c, (uint32_t)ev.arg[0]);
            push_ev(c, c->now + 86400 * KVF_NS_PER_S, SIM_EV_SCHEDULE, 0, ev.arg[0], NULL);
            break;
        default: KVF_ASSERT(!"unknown event kind");
        }
        if ((++n & 0xffff) == 0) {
            if (c->opts && c->opts->interrupt && *c->opts->interrupt) {
                pool_gpu_account(c);   // GPU-hours up to the interruption
                return KVF_EINTR;
            }
            sim_run_progress(c);
        }
    }
    pool_gpu_account(c);
    return c->status;
}

void sim_cluster_free(sim_cluster *c) {
    sim_trace_close(c->timeline, NULL);
    for (uint32_t i = 0; i < c->n_inst; i++) {
        sim_inst *in = &c->inst[i];
        sim_rheap_free(&in->ready);
        sim_rheap_free(&in->dwait);
        free(in->batch);
        free(in->chunk);
        free(in->running);
        free(in->run_end);
        free(in->run_ext);
        dsum_free(&in->ds);
        sim_bcache_free(&in->hbm);
        sim_bcache_free(&in->dram);
    }
    free(c->inst);
    for (uint32_t i = 0; i < c->n_links; i++) sim_link_free(&c->links[i].link);
    free(c->links);
    for (int k = 0; k < SIM_POOLS; k++) {
        mdl_stepper_destroy(c->pool[k].stepper);
        sim_router_free(&c->pool[k]);
    }
    for (uint32_t i = 0; i < c->req_cap; i++) free(c->req[i].blocks);
    free(c->req);
    free(c->seqs);
    sim_bcache_free(&c->ssd);
    done_free(&c->done);
    sim_queue_destroy(c->q);
    sim_metrics_free(&c->m);
}
