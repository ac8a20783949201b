// sim/sim_link.c -- processor-sharing link (see sim_link.h for the virtual-service trick).
#include "sim_link.h"

#include <math.h>
#include <stdlib.h>

void sim_link_init(sim_link *l, double Bps, sim_time latency_ns) {
    *l = (sim_link){0};
    KVF_ASSERT(Bps > 0);
    l->Bps = Bps;
    l->latency_ns = latency_ns;
}

void sim_link_free(sim_link *l) {
    if (!l) return;
    free(l->flows);
    l->flows = NULL;
    l->n = l->cap = 0;
}

static void advance(sim_link *l, sim_time now) {
    if (now <= l->last) return;
    if (l->n) {
        // (the uncapped form keeps its operation order: results must not move by a rounding)
        l->service += l->flow_cap_Bps > 0
                          ? (double)(now - l->last) * 1e-9 * sim_link_flow_rate(l, l->n)
                          : (double)(now - l->last) * 1e-9 * l->Bps / (double)l->n;
        l->busy_ns += (double)(now - l->last);
    }
    l->last = now;
}

static bool flow_less(const sim_flow *a, const sim_flow *b) {
    // ties by the tag's low 32 bits (the caller's id; the high bits are its generation)
    return a->target < b->target || (a->target == b->target && (uint32_t)a->tag < (uint32_t)b->tag);
}

void sim_link_add(sim_link *l, sim_time now, double bytes, uint64_t tag) {
    advance(l, now);
    if (l->n == l->cap) kvf_grow((void **)&l->flows, &l->cap, l->n + 1, sizeof *l->flows);
    sim_flow f = {.target = l->service + (bytes > 0 ? bytes : 0), .tag = tag};
    size_t i = l->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!flow_less(&f, &l->flows[p])) break;
        l->flows[i] = l->flows[p];
        i = p;
    }
    l->flows[i] = f;
    l->bytes_total += bytes;
}

sim_time sim_link_next_ns(sim_link *l, sim_time now) {
    advance(l, now);
    if (!l->n) return -1;
    double rem = l->flows[0].target - l->service;
    if (rem <= 0) return now;
    // ceil so that at the returned time the flow is complete
    if (l->flow_cap_Bps > 0) return now + (sim_time)ceil(rem / sim_link_flow_rate(l, l->n) * 1e9);
    return now + (sim_time)ceil(rem * (double)l->n / l->Bps * 1e9);
}

bool sim_link_pop_done(sim_link *l, sim_time now, uint64_t *tag) {
    advance(l, now);
    // tolerance of one byte absorbs rounding of the ns conversion
    if (!l->n || l->flows[0].target - l->service > 1.0) return false;
    *tag = l->flows[0].tag;
    sim_flow last = l->flows[--l->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= l->n) break;
        if (c + 1 < l->n && flow_less(&l->flows[c + 1], &l->flows[c])) c++;
        if (!flow_less(&l->flows[c], &last)) break;
        l->flows[i] = l->flows[c];
        i = c;
    }
    if (l->n) l->flows[i] = last;
    return true;
}

double sim_link_estimate_s(const sim_link *l, double bytes) {
    if (l->flow_cap_Bps > 0)
        return bytes / sim_link_flow_rate(l, l->n + 1) + (double)l->latency_ns * 1e-9;
    return bytes * (double)(l->n + 1) / l->Bps + (double)l->latency_ns * 1e-9;
}
