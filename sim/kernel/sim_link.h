// sim/sim_link.h -- a shared transfer resource (network link, PCIe path, SSD channel) whose
// bandwidth is shared fairly by the transfers in flight (processor sharing, fluid model).
//
// Trick: with n flows each gets bw/n, so all flows receive the same "service" S(t). A flow of
// b bytes started when S = s0 ends when S = s0 + b. Flows sit in a min-heap by that target, so
// an arrival or departure costs O(log n) and only the earliest completion needs an event.
// The caller owns event scheduling: after any change it asks sim_link_next_ns() and
// keeps one completion timer (seq in ev_seq, time in ev_t): re-armed, not cancelled, when the
// next completion moves later (it fires, finds nothing done and re-arms), replaced only when
// it moves earlier.
#ifndef SIM_LINK_H
#define SIM_LINK_H

#include "sim_queue.h"

typedef struct sim_flow {
    double target;   // service level at which this flow completes (bytes)
    uint64_t tag;    // caller's id for the transfer
} sim_flow;

typedef struct sim_link {
    double Bps;            // bandwidth, bytes/s (> 0)
    double flow_cap_Bps;   // > 0: no flow faster than this (each client's own path), 0 = none
    sim_time latency_ns;   // added to every transfer by the caller
    double service;        // S at time `last`
    sim_time last;         // time service was last advanced
    sim_flow *flows;       // min-heap by target
    size_t n, cap;
    uint64_t ev_seq;      // pending completion event, 0 = none
    int64_t ev_t;         // its time
    double bytes_total;   // bytes carried (completed or in progress), for utilisation
    double busy_ns;       // time with at least one flow
} sim_link;

void sim_link_init(sim_link *l, double Bps, sim_time latency_ns);
void sim_link_free(sim_link *l);
// Starts a transfer of bytes at time now.
void sim_link_add(sim_link *l, sim_time now, double bytes, uint64_t tag);
// Time of the next completion, or -1 when idle.
sim_time sim_link_next_ns(sim_link *l, sim_time now);
// Pops one flow that is complete at time now (its target reached); false when none is.
bool sim_link_pop_done(sim_link *l, sim_time now, uint64_t *tag);
// Each flow's rate with n in flight: the fair share, at most flow_cap_Bps.
static inline double sim_link_flow_rate(const sim_link *l, size_t n) {
    double r = l->Bps / (double)(n ? n : 1);
    return l->flow_cap_Bps > 0 && l->flow_cap_Bps < r ? l->flow_cap_Bps : r;
}
// Time a new transfer of bytes would take if it started now (estimate for routers).
double sim_link_estimate_s(const sim_link *l, double bytes);

#endif
