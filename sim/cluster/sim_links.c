// sim/cluster/sim_links.c -- the cluster's links (DRAM and SSD reads, KV transfer, SSD write-down)
// over the fair-share link model (sim/kernel/sim_link.c): one timer per link, re-armed rather
// than cancelled; write-downs build a backlog and no event.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cluster.h"
#include "sim_run.h"
#include "sim_sample.h"
#include "sim_trace.h"

void sim_link_rearm(sim_cluster *c, uint32_t id) {
    sim_link *l = &c->links[id].link;
    sim_time t = sim_link_next_ns(l, c->now);
    // One timer per link: a pending one that fires no later than the next completion stays
    // (adding a flow only delays the others; the early firing re-arms); an earlier completion
    // replaces it.
    if (l->ev_seq && t >= 0 && l->ev_t <= t) return;
    if (l->ev_seq) sim_queue_cancel(c->q, l->ev_seq);
    l->ev_seq = 0;
    if (t >= 0) {
        sim_ev_push(c, t, SIM_EV_LINK, 0, id, &l->ev_seq);
        l->ev_t = t;
    }
}

// llround of a duration in ns (>= 0): without the library call below 2^53, where
// mdl_round_pos is exact (a write-down pays one per block written).
static sim_time round_ns(double ns) {
    return ns >= 0 && ns < 0x1p53 ? (sim_time)mdl_round_pos(ns) : (sim_time)llround(ns);
}

// n write-downs of `bytes` each on an SSD write link, one after the other at this instant, as
// n calls of sim_link_send make them: nobody waits for a write-down, so there is no flow and
// no event, only the backlog it builds (the link busy until busy_until at full rate), whose
// peak the summary reports. Each write's time is rounded to ns on its own, as one call
// rounds it; the divisions are made once.
void sim_link_write_down(sim_cluster *c, uint32_t id, double bytes, uint64_t n) {
    sim_link_ref *lr = &c->links[id];
    KVF_ASSERT(lr->kind == SIM_LINK_SSDW);
    if (!n) return;
    sim_time d = round_ns(bytes / lr->link.Bps * 1e9), a = lr->busy_until;
    double sw = c->cfg->kv.ssd.store_write_Bps;   // the store's own bandwidth, shared by all
    sim_time ds = sw > 0 ? round_ns(bytes / sw * 1e9) : 0, s = c->store_busy_until;
    if (!(sw > 0) && !c->timeline && d >= 0) {
        // each write starts where the one before ended (no earlier than now): integers, exact
        a = (a > c->now ? a : c->now) + (sim_time)n * d;
        n = 0;
    }
    for (uint64_t i = 0; i < n; i++) {
        sim_time start = a > c->now ? a : c->now;
        a = start + d;
        if (sw > 0) {
            s = (s > c->now ? s : c->now) + ds;
            if (s > a) a = s;
        }
        if (c->timeline)
            sim_trace_flow(c->timeline, start, a, c->inst[lr->inst].pool, c->inst[lr->inst].idx,
                           sim_link_what[lr->kind], bytes);
    }
    lr->busy_until = a;
    if (sw > 0) c->store_busy_until = s;
    // a write ends no earlier than the one before: the last is the backlog's peak
    double backlog = (double)(a - c->now) * 1e-9;
    if (backlog > c->m.ssd_write_backlog_s_peak) c->m.ssd_write_backlog_s_peak = backlog;
}

void sim_link_send(sim_cluster *c, uint32_t id, double bytes, uint64_t tag) {
    sim_link_ref *lr = &c->links[id];
    sim_link *l = &lr->link;
    if (lr->kind == SIM_LINK_SSDW) {
        sim_link_write_down(c, id, bytes, 1);
        return;
    }
    // latency is charged as bytes at line rate so it shares the one completion event
    double rate1 = l->flow_cap_Bps > 0 ? sim_link_flow_rate(l, 1) : l->Bps;   // one flow alone
    sim_link_add(l, c->now, bytes + (double)l->latency_ns * 1e-9 * rate1, tag);
    if (c->timeline)
        sim_trace_flow_begin(c->timeline, c->now, c->inst[lr->inst].pool, c->inst[lr->inst].idx,
                             sim_link_what[lr->kind], (uint64_t)id << 32 | tag, bytes);
    sim_link_rearm(c, id);
}

uint32_t sim_link_new(sim_cluster *c, double Bps, sim_time lat, uint32_t inst, uint8_t kind) {
    if (Bps <= 0) return SIM_NONE;
    kvf_grow((void **)&c->links, &c->links_cap, c->n_links + 1, sizeof *c->links);
    sim_link_ref *r = &c->links[c->n_links];
    sim_link_init(&r->link, Bps, lat);
    r->inst = inst;
    r->kind = kind;
    r->busy_until = 0;
    return (uint32_t)c->n_links++;
}

void sim_on_link(sim_cluster *c, uint32_t id) {
    sim_link_ref *lr = &c->links[id];
    lr->link.ev_seq = 0;
    uint64_t tag;
    while (sim_link_pop_done(&lr->link, c->now, &tag)) {
        sim_inst *in = &c->inst[lr->inst];
        uint32_t slot = (uint32_t)tag;
        sim_req *r = sim_req_at(c, slot);
        if ((uint32_t)(tag >> 32) != r->gen) continue;   // for a try that a failure ended
        if (c->timeline)
            sim_trace_flow_end(c->timeline, c->now, in->pool, in->idx, sim_link_what[lr->kind],
                               (uint64_t)id << 32 | tag);
        if (lr->kind == SIM_LINK_XFER) {
            // decode has the KV: the prefill instance frees it (before the hand-off, which may
            // end the request)
            sim_prefill_release_kv(c, r, true);
            sim_inst *d = &c->inst[r->dinst];
            d->ops->enqueue(c, d, slot);
            continue;
        }
        KVF_ASSERT(r->pending_loads > 0);
        in = &c->inst[r->pinst];   // the store's link is shared: the load is the request's
        if (--r->pending_loads) continue;
        if (r->state == SIM_RS_LOADING) {
            in->n_loading--;
            sim_req_set_state(r, SIM_RS_PREFILL);
            r->enq_ns = c->now;   // it queues from here: the load before is not queueing
            sim_rheap_push(&in->ready, sim_queue_key(c, in->pcfg, r), slot);
            sim_inst_kick(c, in);
        } else if (r->in_batch && in->waiting_loads) {
            sim_inst_step_done(c, in);
        }
    }
    sim_link_rearm(c, id);
}

// what a link carries, as the trace names its track (sim_trace.h)
const char *const sim_link_what[] = {"DRAM read", "SSD read", "link", "KV transfer out",
                                     "SSD write"};
