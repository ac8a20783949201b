// sim/cluster/policy/sim_order.c -- queue orders (scheduler: fcfs, spf, priority) as the heap key
// a request is queued under; ties go by arrival order.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cluster.h"
#include "sim_run.h"
#include "sim_sample.h"
#include "sim_trace.h"

uint64_t sim_queue_key(const sim_cluster *c, const sim_pool_cfg *pc, const sim_req *r) {
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
    default:
        return seq;
    }
}
