// sim/cluster/sim_request.c -- requests: the state machine (every transition asserted), slots,
// the queues' heap, reading the trace (open and closed loop), arrival, completion and rejection.
//
// Invariants: a request slot is never freed while an event or a link flow refers to it;
// sim_req pointers are not held across sim_read_trace(), the only place the slot array grows.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cluster.h"
#include "sim_run.h"
#include "sim_sample.h"
#include "sim_trace.h"

// ---- the request state machine ----------------------------------------------------------
// Every transition a request makes, asserted (a bug, not an input error, breaks it):
//   FREE -> WAITING_PREV | PENDING;  WAITING_PREV -> PENDING;  PENDING -> VISION | LOADING |
//   PREFILL;  VISION -> LOADING | PREFILL;  LOADING -> PREFILL;  PREFILL -> TRANSFER | DECODE
//   (colocated);  TRANSFER -> DECODE_WAIT;  DECODE_WAIT -> DECODE;  DECODE -> DECODE_WAIT
//   (preempted, recompute) | SWAPPED;  SWAPPED -> DECODE_WAIT;  any -> FREE (finished/rejected)
#define RS(x) (1u << SIM_RS_##x)
static const uint32_t rs_from[] = {
    [SIM_RS_FREE] = ~RS(FREE),
    [SIM_RS_WAITING_PREV] = RS(FREE),
    [SIM_RS_PENDING] = RS(FREE) | RS(WAITING_PREV) | RS(LOADING) | RS(PREFILL) | RS(TRANSFER) |
                       RS(DECODE_WAIT) | RS(DECODE) | RS(SWAPPED),   // retried after a failure
    [SIM_RS_VISION] = RS(PENDING),
    [SIM_RS_LOADING] = RS(PENDING) | RS(VISION),
    [SIM_RS_PREFILL] = RS(PENDING) | RS(VISION) | RS(LOADING),
    [SIM_RS_TRANSFER] = RS(PREFILL),
    [SIM_RS_DECODE_WAIT] = RS(TRANSFER) | RS(DECODE) | RS(SWAPPED),
    [SIM_RS_DECODE] = RS(DECODE_WAIT) | RS(PREFILL),
    [SIM_RS_SWAPPED] = RS(DECODE),
};
#undef RS

void sim_req_set_state(sim_req *r, sim_req_state to) {
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

static size_t done_find(const sim_donemap *d, uint64_t id) {
    size_t mask = d->cap - 1, i = (size_t)kvf_hash64(id) & mask;
    while (d->key[i] != UINT64_MAX && d->key[i] != id)
        i = (i + 1) & mask;
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

size_t sim_done_slot(sim_donemap *d, uint64_t id, bool insert) {
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

void sim_done_free(sim_donemap *d) {
    free(d->key);
    free(d->done_ns);
    free(d->tokens);
    free(d->last_block);
    free(d->n_blocks);
    memset(d, 0, sizeof *d);
}

static uint32_t req_alloc(sim_cluster *c) {
    uint32_t s;
    if (c->free_req != SIM_NONE) {
        s = c->free_req;
        c->free_req = c->req[s].next_waiter;
    } else {
        if (c->n_req == c->req_cap) {
            size_t cap = c->req_cap;
            kvf_grow((void **)&c->req, &cap, c->n_req + 1, sizeof *c->req);
            c->req_cap = (uint32_t)cap;
        }
        // a slot's first use: what req_from_trace keeps of a last occupant starts empty (the
        // grown part is not cleared: a page of slots is first touched when they are used)
        s = c->n_req++;
        c->req[s].blocks = NULL;
        c->req[s].blocks_cap = 0;
        c->req[s].gen = 0;
    }
    return s;
}

static void req_free(sim_cluster *c, uint32_t slot) {
    sim_req *r = sim_req_at(c, slot);
    sim_req_set_state(r, SIM_RS_FREE);
    r->next_waiter = c->free_req;
    c->free_req = slot;
}

static uint32_t req_from_trace(sim_cluster *c, const trc_request *t) {
    uint32_t slot = req_alloc(c);
    sim_req *r = sim_req_at(c, slot);
    uint64_t *blocks = r->blocks;
    uint32_t cap = r->blocks_cap,
             gen = r->gen + 1;   // flows of the slot's last occupant stay stale
    memset(r, 0, sizeof *r);
    r->gen = gen;
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
    r->first_lag_ns = 0;
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
void sim_read_trace(sim_cluster *c) {
    c->read_pending = false;
    while (!c->reader_done && c->status == KVF_OK) {
        trc_request t;
        int rc = trc_reader_next(c->reader, &t, c->err);
        if (rc < 0) {
            sim_fail_run(c, c->err->code ? c->err->code : KVF_EPARSE);
            return;
        }
        if (rc == 0) {
            c->reader_done = true;
            return;
        }
        if (c->sampler && !sim_sample_keep(c->sampler, &t)) continue;
        uint32_t slot = req_from_trace(c, &t);
        sim_req *r = sim_req_at(c, slot);
        if (c->closed_loop) {
            size_t i = sim_done_slot(&c->done, r->id, true);
            c->done.done_ns[i] = -(int64_t)slot - 1;
        }
        if (c->closed_loop && r->prev_id >= 0) {
            size_t i = sim_done_slot(&c->done, (uint64_t)r->prev_id, false);
            if (i != SIZE_MAX && c->done.done_ns[i] < 0) {
                // previous turn still in flight: wait for it
                sim_req *p = sim_req_at(c, (uint32_t)(-c->done.done_ns[i] - 1));
                sim_req_set_state(r, SIM_RS_WAITING_PREV);
                r->next_waiter = p->waiters;
                p->waiters = slot;
            } else {
                sim_time t0 = i != SIZE_MAX ? c->done.done_ns[i] + r->think_ns : r->recorded_ns;
                sim_req_set_state(r, SIM_RS_PENDING);
                sim_ev_push(c, t0 > c->now ? t0 : c->now, SIM_EV_ARRIVAL, 0, slot, NULL);
            }
            continue;
        }
        sim_req_set_state(r, SIM_RS_PENDING);
        sim_time at = r->recorded_ns > c->now ? r->recorded_ns : c->now;
        sim_ev_push(c, at, SIM_EV_ARRIVAL_READ, 0, slot, NULL);
        c->read_pending = true;
        return;
    }
}

// When the client sees the first token: first_ns plus the output pipeline's lag, never after
// the request's end (the stream delivers its tokens in order).
static sim_time first_seen_ns(const sim_req *r, sim_time end) {
    return r->first_ns + KVF_MIN(r->first_lag_ns, KVF_MAX(end - r->first_ns, 0));
}

void sim_req_write_row(sim_cluster *c, const sim_req *r, sim_outcome out) {
    if (!c->db || !c->cfg->output.write_requests) return;
    const char **cls = &c->row_cls[r->cls], **status = &c->row_status[out];
    if (!*cls) *cls = rpt_db_text(c->db, trc_class_name(r->cls));
    if (!*status) *status = rpt_db_text(c->db, sim_outcome_name[out]);
    // its prefix lookup counts (in the row as in the totals) once its first chunk is scheduled:
    // one ending before (rejected, timed out in the queue) hit nothing
    bool counted = r->scheduled;
    rpt_request_row row = {
        .id = r->id,
        .cls = *cls,
        .session = r->session,
        .arrival_s =
            r->arrival_ns >= 0 ? (double)r->arrival_ns * 1e-9 : (double)r->recorded_ns * 1e-9,
        .input_tokens = r->input,
        .cached_tokens = counted ? r->cached : 0,
        .output_tokens = r->produced,
        .vision_instance = r->vinst == SIM_NONE ? -1 : (int32_t)c->inst[r->vinst].idx,
        .prefill_instance = r->pinst == SIM_NONE ? -1 : (int32_t)c->inst[r->pinst].idx,
        .decode_instance = r->dinst == SIM_NONE ? -1 : (int32_t)c->inst[r->dinst].idx,
        .ttft_s =
            r->first_ns >= 0 ? (double)(first_seen_ns(r, c->now) - r->arrival_ns) * 1e-9 : NAN,
        .tpot_s =
            r->produced > 1 ? (double)(r->last_ns - r->first_ns) * 1e-9 / (r->produced - 1) : NAN,
        .e2e_s = out == SIM_OUT_COMPLETED ? (double)(c->now - r->arrival_ns) * 1e-9 : NAN,
        .queue_s = (double)r->queue_ns * 1e-9,
        .status = *status,
        .hit_hbm = counted ? r->hit[SIM_TIER_HBM] : 0,
        .hit_dram = counted ? r->hit[SIM_TIER_DRAM] : 0,
        .hit_ssd = counted ? r->hit[SIM_TIER_SSD] : 0,
        .preemptions = r->preemptions,
    };
    if (rpt_db_request(c->db, &row, c->err) != KVF_OK) sim_fail_run(c, KVF_ERUN);
}

const char *const sim_outcome_name[SIM_OUTCOMES] = {
    [SIM_OUT_COMPLETED] = "completed",
    [SIM_OUT_REJECT_QUEUE] = "rejected:queue",
    [SIM_OUT_REJECT_SLO] = "rejected:slo",
    [SIM_OUT_REJECT_NO_INSTANCE] = "rejected:no_instance",
    [SIM_OUT_REJECT_KV] = "rejected:kv_capacity",
    [SIM_OUT_TIMEOUT] = "rejected:timeout",
    [SIM_OUT_REJECT_CONTEXT] = "rejected:context",
    [SIM_OUT_REJECT_FAILURE] = "rejected:failure",
};

void sim_req_finish(sim_cluster *c, uint32_t slot, sim_outcome out) {
    sim_req *r = sim_req_at(c, slot);
    KVF_ASSERT(out < SIM_OUTCOMES);
    KVF_ASSERT(r->cls < TRC_CLASS_COUNT);
    // a request ending on its prefill instance (rejected, timed out, a one-token answer) or on
    // its way to decode frees the prompt KV it holds there; that instance is the one stepping
    // (kicked after its step) or a failure frees it first (pool_failures.c)
    if (r->pkv) sim_prefill_release_kv(c, r, false);
    bool ok = out == SIM_OUT_COMPLETED;
    // arriving in the steady window (output.steady_from_s/to_s): its latencies and economics
    const sim_output_cfg *oc = &c->cfg->output;
    double arr_s = (double)r->arrival_ns * 1e-9;
    bool in_window = oc->steady_to_s > 0 && arr_s >= oc->steady_from_s && arr_s < oc->steady_to_s;
    if (ok) {
        c->completed++;
        double ttft = (double)(first_seen_ns(r, c->now) - r->arrival_ns) * 1e-6;
        double e2e = (double)(c->now - r->arrival_ns) * 1e-6;
        sim_samples_add(&c->m.ttft_ms, ttft);
        sim_samples_add(&c->m.e2e_ms, e2e);
        c->m.cls_done[r->cls]++, c->m.cls_ttft_ms[r->cls] += ttft;
        double tpot = NAN;
        if (r->produced > 1) {
            tpot = (double)(r->last_ns - r->first_ns) * 1e-6 / (r->produced - 1);
            sim_samples_add(&c->m.tpot_ms, tpot);
            if (tpot > 0) sim_samples_add(&c->m.gen_tok_s, 1000.0 / tpot);
            if (tpot > 0) c->m.cls_gen_tok_s[r->cls] += 1000.0 / tpot, c->m.cls_gen_n[r->cls]++;
        }
        // its class's SLO (a single token has no TPOT: that bound holds)
        const double *lim = c->slo_req_ms[r->cls];
        bool good =
            !(ttft > lim[SIM_SLO_TTFT]) && !(tpot > lim[SIM_SLO_TPOT]) && !(e2e > lim[SIM_SLO_E2E]);
        if (good) {
            c->m.slo_ok++;
            c->m.cls_good[r->cls]++;
            c->m.cls_good_tok[r->cls] += r->produced;
        }
        if (c->slo_by_class) {
            sim_samples_add(&c->m.cls_lat[r->cls][SIM_SLO_TTFT], ttft);
            if (r->produced > 1) sim_samples_add(&c->m.cls_lat[r->cls][SIM_SLO_TPOT], tpot);
            sim_samples_add(&c->m.cls_lat[r->cls][SIM_SLO_E2E], e2e);
        }
        sim_metrics_wait_add(&c->m, (double)r->arrival_ns * 1e-9, (double)r->queue_ns * 1e-9,
                             c->cfg->output.sample_interval_s);
        if (in_window) {
            c->m.st_requests++;
            sim_samples_add(&c->m.st_ttft_ms, ttft);
            if (r->produced > 1) sim_samples_add(&c->m.st_tpot_ms, tpot);
            if (r->produced > 1 && tpot > 0) {
                sim_samples_add(&c->m.st_gen_tok_s, 1000.0 / tpot);
                c->m.st_cls_gen[r->cls] += 1000.0 / tpot, c->m.st_cls_gen_n[r->cls]++;
            }
        }
    } else {
        c->rejected++;
        c->m.output_rejected += r->output - r->produced;
    }
    sim_req_write_row(c, r, out);
    // revenue: a request is billed when it is served; one rejected or timed out is not (the
    // GPU time it took is still in the cost)
    if (ok) {
        // the class's econ slot looked up by name once (a name compare per request otherwise);
        // the steady window's input takes its slots in the same order, so the same index
        int k = r->cls < TRC_CLASS_COUNT ? c->econ_slot[r->cls] : -1;
        if (k < 0) {
            k = rpt_econ_input_class(&c->econ_in, trc_class_name(r->cls));
            int ks = rpt_econ_input_class(&c->econ_st, trc_class_name(r->cls));
            KVF_ASSERT(ks == k);
            if (r->cls < TRC_CLASS_COUNT) c->econ_slot[r->cls] = (int16_t)k;
        }
        double at = (double)r->arrival_ns * 1e-9;
        rpt_econ_input_add_to(&c->econ_in, &c->cfg->econ, k, at, r->cached, r->input - r->cached,
                              r->produced);
        // the steady window's economics bill the requests arriving in it (summary_steady)
        if (in_window)
            rpt_econ_input_add_to(&c->econ_st, &c->cfg->econ, k, at, r->cached,
                                  r->input - r->cached, r->produced);
    }
    if (c->closed_loop) {
        size_t i = sim_done_slot(&c->done, r->id, true);
        c->done.done_ns[i] = c->now;
        c->done.tokens[i] = r->input + r->produced;
        c->done.n_blocks[i] = r->n_blocks;
        c->done.last_block[i] = r->n_blocks ? r->blocks[r->n_blocks - 1] : 0;
    }
    for (uint32_t w = r->waiters; w != SIM_NONE;) {
        sim_req *x = sim_req_at(c, w);
        uint32_t next = x->next_waiter;
        sim_req_set_state(x, SIM_RS_PENDING);
        sim_ev_push(c, c->now + x->think_ns, SIM_EV_ARRIVAL, 0, w, NULL);
        w = next;
    }
    c->in_flight--;
    req_free(c, slot);
}

void sim_req_reject(sim_cluster *c, uint32_t slot, sim_outcome why) {
    KVF_ASSERT(why != SIM_OUT_COMPLETED && why < SIM_OUTCOMES);
    if (why == SIM_OUT_REJECT_QUEUE)
        c->m.rejected_queue++;
    else if (why == SIM_OUT_REJECT_SLO)
        c->m.rejected_slo++;
    else if (why == SIM_OUT_TIMEOUT)
        c->m.rejected_timeout++;
    else if (why == SIM_OUT_REJECT_CONTEXT)
        c->m.rejected_context++;
    else if (why == SIM_OUT_REJECT_FAILURE)
        c->m.rejected_failure++;
    else if (why == SIM_OUT_REJECT_NO_INSTANCE)
        c->m.rejected_no_instance++;
    else
        c->m.rejected_fit++;
    sim_req_finish(c, slot, why);
}

void sim_on_arrival(sim_cluster *c, uint32_t slot) {
    sim_req *r = sim_req_at(c, slot);
    r->arrival_ns = c->now;
    r->seq = c->seq++;
    c->arrived++;
    if (c->cfg->decoding.structured_share > 0 &&
        kvf_rng_uniform(&c->rng_structured) < c->cfg->decoding.structured_share)
        r->flags |= TRC_F_STRUCTURED;
    c->m.output_requested += r->output;
    c->m.cls_arrived[r->cls]++;
    if (c->arrived == 1) c->first_arrival_ns = c->now;
    c->last_arrival_ns = c->now;
    const sim_serving_cfg *sv = &c->cfg->serving;
    if (sv->client_timeout_ns > 0)   // the client gives up this long after it sent the request
        sim_ev_push2(c, c->now + (sim_time)llround(sv->client_timeout_ns), SIM_EV_TIMEOUT, slot,
                     r->seq);
    if (sv->frontend_ns > 0) {   // HTTP, tokenisation: the scheduler sees it later
        sim_ev_push(c, c->now + (sim_time)llround(sv->frontend_ns), SIM_EV_FRONTEND, 0, slot, NULL);
        return;
    }
    sim_req_enter(c, slot);
}

void sim_req_enter(sim_cluster *c, uint32_t slot) {
    sim_req *r = sim_req_at(c, slot);
    if (r->abandoned) {   // its client left while the frontend held it
        sim_req_reject(c, slot, SIM_OUT_TIMEOUT);
        return;
    }
    uint32_t maxc = c->model.max_context;
    if (maxc && (uint64_t)r->input + r->output > maxc) {
        // as an engine does: refused, or truncated to fit (the prompt keeps its newest
        // tokens and blocks, the answer what is left, at least one token each)
        if (!c->cfg->serving.context_truncate || maxc < 2) {
            sim_req_reject(c, slot, SIM_OUT_REJECT_CONTEXT);
            return;
        }
        c->m.truncated++;
        if (r->output > maxc - 1) {
            c->m.output_requested -= r->output - (maxc - 1);   // asked for at arrival
            r->output = maxc - 1;
        }
        if (r->input + r->output > maxc) {
            uint32_t keep = maxc - r->output, bt = c->cfg->kv.block_tokens;
            uint32_t drop = r->n_blocks > keep / bt ? r->n_blocks - keep / bt : 0;
            if (drop)
                memmove(r->blocks, r->blocks + drop, (r->n_blocks - drop) * sizeof *r->blocks);
            r->n_blocks -= drop;
            r->input = keep;
        }
    }
    sim_pool *vp = &c->pool[SIM_POOL_VISION];
    if (r->images && vp->n_active) {
        sim_inst *best = NULL;
        for (uint32_t i = 0; i < vp->n; i++) {
            sim_inst *in = &c->inst[vp->first + i];
            if (in->active && (!best || in->ready.n < best->ready.n)) best = in;
        }
        if (best->pcfg->queue_limit > 0 && (int64_t)best->ready.n >= best->pcfg->queue_limit) {
            sim_req_reject(c, slot, SIM_OUT_REJECT_QUEUE);
            return;
        }
        best->ops->enqueue(c, best, slot);
        return;
    }
    sim_prefill_route(c, slot);
}

void sim_req_timeout(sim_cluster *c, uint32_t slot, uint64_t seq) {
    if (slot >= c->n_req) return;
    sim_req *r = sim_req_at(c, slot);
    // finished since (its slot free or reused by a later request): nothing to abort
    if (r->state == SIM_RS_FREE || r->arrival_ns < 0 || r->seq != seq || r->abandoned) return;
    r->abandoned = true;   // aborted where it next stops: a queue pop, a step end, a hand-off
}
