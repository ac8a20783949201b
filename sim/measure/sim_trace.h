// sim/sim_trace.h -- the Chrome / Perfetto trace of a run (`kvfleet run --trace-out FILE`):
// JSON Trace Event Format, one object {"displayTimeUnit": "ms", "traceEvents": [...]}.
//
// Layout: one process per pool (pid = pool: 0 vision, 1 prefill, 2 decode; named by
// process_name metadata), and per instance of a pool
//   - a thread (tid = instance index, thread_name "<pool> <i> compute") with one complete
//     ("X") event per batch step: args batch, tokens, flops, bytes;
//   - async spans ("b"/"e", cat "kv_transfer" or "storage") named "<pool> <i> <what>"
//     (what: "KV transfer out", "DRAM read", "SSD read", "SSD write"), one per transfer,
//     args bytes; Perfetto draws each name as its own track under the pool;
//   - a counter ("C") "<pool> <i> queue" with args {"queued": n} at every sample.
// Timestamps are simulated time in microseconds. Only events starting inside the window
// [from_s, to_s] are written (to_s <= 0: no end); a span's end is written when its begin was
// (also past the window), so a "b" lacks its "e" only for a transfer still running when the
// run stops. Thread names are written on first use.
#ifndef SIM_TRACE_H
#define SIM_TRACE_H

#include <stdint.h>

#include "kvf.h"
#include "sim_queue.h"

typedef struct sim_trace sim_trace;

// Creates path and writes the header and the pools' process names (pool_names[0..npools)).
kvf_status sim_trace_open(sim_trace **out, const char *path, double from_s, double to_s,
                          const char *const *pool_names, int npools, kvf_err *err);
// One batch step of instance (pool, inst) from t lasting dur_ns.
void sim_trace_step(sim_trace *t, sim_time now, sim_time dur_ns, int pool, uint32_t inst,
                    const char *what, uint32_t batch, uint64_t tokens, double flops, double bytes);
// A transfer of bytes starts (flow_begin) or ends (flow_end) on instance (pool, inst); id
// tells concurrent transfers of one track apart and is free again after its end.
void sim_trace_flow_begin(sim_trace *t, sim_time now, int pool, uint32_t inst, const char *what,
                          uint64_t id, double bytes);
void sim_trace_flow_end(sim_trace *t, sim_time now, int pool, uint32_t inst, const char *what,
                        uint64_t id);
// A transfer whose end is known when it starts (SSD write-down): begin and end at once.
void sim_trace_flow(sim_trace *t, sim_time start, sim_time end, int pool, uint32_t inst,
                    const char *what, double bytes);
// Counter "<pool> <inst> <what>" takes value v at now.
void sim_trace_counter(sim_trace *t, sim_time now, int pool, uint32_t inst, const char *what,
                       double v);
// Closes the event list and the file; KVF_EIO when a write failed. Accepts NULL.
kvf_status sim_trace_close(sim_trace *t, kvf_err *err);

#endif
