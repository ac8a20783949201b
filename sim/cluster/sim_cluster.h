// sim/sim_cluster.h -- internals of a run: requests, instances, pools and the cluster state
// the event handlers share. Not a public header (sim.h is); policies (sim_router.c) and
// metrics (sim_metrics.c) include it.
//
// Request life (disaggregated):
//   trace -> ARRIVAL -> [vision pool] -> prefill router -> prefill instance: cache lookup,
//   tier loads (links) -> ready queue -> chunked prefill steps -> first token (TTFT)
//   -> decode router -> KV transfer (link) -> decode admission (KV capacity) -> decode steps
//   (one event per batch step; tokens advance by arithmetic) -> completion.
// Colocated: one pool; a step mixes decode tokens of running requests with prefill chunks.
#ifndef SIM_CLUSTER_H
#define SIM_CLUSTER_H

#include <stdio.h>

#include "mdl.h"
#include "rpt.h"
#include "sim.h"
#include "sim_kv.h"
#include "sim_link.h"
#include "sim_metrics.h"
#include "sim_pool.h"
#include "sim_queue.h"
#include "trc.h"

#define SIM_NONE UINT32_MAX

enum {
    SIM_EV_ARRIVAL_READ = 1,   // arg0 = slot: an open-loop request reaches the frontend, and the
                               // trace is read on to the next one
    SIM_EV_ARRIVAL,            // arg0 = slot: request reaches the frontend (closed-loop turns)
    SIM_EV_STEP_DONE,          // dst = instance: batch step ends
    SIM_EV_LINK,               // arg0 = link id: earliest transfer on that link completes
    SIM_EV_SAMPLE,             // time-series sample
    SIM_EV_SCHEDULE,           // arg0 = schedule entry: instance counts change
    SIM_EV_SWAPIN,             // arg0 = slot: swapped-out request is back in HBM
    SIM_EV_FRONTEND,           // arg0 = slot: the frontend hands the request to the scheduler
    SIM_EV_TIMEOUT,            // arg0 = slot, arg1 = its arrival seq: its client gives up
    SIM_EV_SCALED,             // arg0 = pool: an instance it started is ready to serve
    SIM_EV_FAIL,               // dst = instance: it fails
    SIM_EV_REPAIR,             // dst = instance: it is back
    SIM_EV_KICK,               // dst = instance: an idle one forms its step, once all that is
                               // due at this instant has arrived (pushed last at its time)
    SIM_EV_KINDS
};

typedef enum sim_pool_kind {
    SIM_POOL_VISION = 0,
    SIM_POOL_PREFILL,
    SIM_POOL_DECODE,
    SIM_POOLS
} sim_pool_kind;
typedef enum sim_tier { SIM_TIER_HBM = 0, SIM_TIER_DRAM, SIM_TIER_SSD, SIM_TIERS } sim_tier;

// How a request leaves the run; names as the request table's status column holds them.
typedef enum sim_outcome {
    SIM_OUT_COMPLETED = 0,
    SIM_OUT_REJECT_QUEUE,         // a queue was at its queue_limit
    SIM_OUT_REJECT_SLO,           // the router predicted an SLO miss (ttft_estimate)
    SIM_OUT_REJECT_NO_INSTANCE,   // no active instance in a pool it needs
    SIM_OUT_REJECT_KV,            // its context can never fit an instance's KV
    SIM_OUT_TIMEOUT,          // its client gave up (serving.client_timeout_s) and it was aborted
    SIM_OUT_REJECT_CONTEXT,   // prompt + answer over the model's max_context
    SIM_OUT_REJECT_FAILURE,   // its instance failed (cluster.<pool>.failures.requests reject)
    SIM_OUTCOMES
} sim_outcome;
extern const char *const sim_outcome_name[SIM_OUTCOMES];

typedef enum sim_req_state {
    SIM_RS_FREE = 0,
    SIM_RS_WAITING_PREV,   // closed loop: waits for the previous turn
    SIM_RS_PENDING,        // arrival scheduled
    SIM_RS_VISION,
    SIM_RS_LOADING,       // prefill instance: KV tier loads in flight
    SIM_RS_PREFILL,       // in a prefill ready queue or batch
    SIM_RS_TRANSFER,      // KV moving to decode
    SIM_RS_DECODE_WAIT,   // waiting for decode admission
    SIM_RS_DECODE,        // running on a decode instance
    SIM_RS_SWAPPED,       // preempted to DRAM (swap)
} sim_req_state;

typedef struct sim_req {
    uint64_t id;                  // trace id
    sim_time recorded_ns;         // arrival recorded in the trace
    sim_time arrival_ns;          // actual arrival at the frontend
    sim_time first_ns, last_ns;   // first/last token times, -1 before
    sim_time first_lag_ns;        // serving.first_token_lag_steps: how much later than first_ns
                                  // the client sees the first token (TTFT only)
    sim_time enq_ns;              // when it entered its current queue
    sim_time queue_ns;            // total time spent queued
    sim_time think_ns;
    int64_t prev_id;
    uint64_t session;
    uint64_t seq;              // order of arrival, ties in queues
    uint32_t input, output;    // tokens
    uint32_t produced;         // output tokens emitted so far
    uint32_t cached;           // prompt tokens served from cache
    uint32_t hit[SIM_TIERS];   // cached tokens by tier
    uint32_t compute_tokens;   // prompt tokens to compute (miss + SWA replay)
    double work_s;             // step-model seconds of that prefill (router signal; 0 where
                               // its pool's router reads none, sim_pool.reads_work)
    uint32_t computed;         // of those, done
    uint32_t recompute;        // decode: tokens to recompute after a preemption
    uint32_t n_blocks, blocks_cap;
    uint32_t hit_blocks;            // leading blocks found in the cache at lookup
    uint32_t blocks_written;        // leading blocks already in this instance's HBM cache
    uint64_t *blocks;               // chained block ids (buffer kept across reuse of the slot)
    uint32_t pending_loads;         // tier loads in flight
    uint32_t next_waiter;           // closed loop: next request waiting on the same prev
    uint32_t waiters;               // closed loop: first request waiting on this one
    uint32_t vinst, pinst, dinst;   // instance ids, SIM_NONE = none
    uint32_t qpos;                  // decode: index in its instance's running array
    uint32_t preemptions;
    uint32_t gen;   // times it was retried after a failure: link flows and swap-ins
                    // carry it, a stale one is ignored
    uint16_t images;
    uint8_t cls, flags;
    uint8_t state;    // sim_req_state
    uint32_t dgen;    // decode sums: membership generation (stale heap entries)
    int64_t dctx0;    // decode sums: context - step count of its instance (constant
                      // while a member: both grow by one per step)
    uint64_t dk0;     // decode sums: step count when produced/last_ns were synced
    bool dfin;        // decode sums: finishes at the step being retired
    bool in_batch;    // part of the current step of its instance
    bool scheduled;   // its first prefill chunk was scheduled (prompt accounted)
    bool pkv;         // disaggregated: its prompt's KV is held on its prefill instance (pinst),
                      // from its first chunk until its transfer to decode ends (kv_inflight)
    bool abandoned;   // its client gave up: aborted where it next stops
} sim_req;

// A min-heap of request slots by (key, seq): FCFS uses key 0, SPF the prompt length,
// priority the class.
typedef struct sim_rheap {
    uint64_t *key;   // (key << 32 | low bits of seq) packed by the caller
    uint32_t *slot;
    size_t n, cap;
} sim_rheap;

// A min-heap of (key, request slot, membership generation): decode finishes and window
// saturations by step count. Entries of requests that left are skipped on pop (lazy delete).
typedef struct sim_gheap {
    struct sim_gentry {
        uint64_t key;
        uint32_t slot, gen;
    } * e;
    size_t n, cap;
} sim_gheap;

// Running sums of a decode batch (see "decode sums" in sim_cluster.c). Member i holds context
// dctx0_i + k during step k + 1, so the batch is n, sum_ctx = a + n k and, per context cap,
// the sequences below the cap (n_below, a_below) plus those at it.
typedef struct sim_dsum {
    uint64_t k;                   // decode steps completed on the instance
    uint32_t n;                   // members (each emits one token per step)
    int64_t a;                    // sum of dctx0 over members
    uint32_t caps[MDL_CAPS];      // the model's context caps (0 = none)
    uint8_t cap_at[MDL_CAPS];     // the j of those that are not 0, in order, ncaps of them: the
    uint8_t ncaps;                // loops over caps visit only these (most models have none)
    uint32_t n_below[MDL_CAPS];   // members with context + 1 < cap
    int64_t a_below[MDL_CAPS];    // sum of dctx0 over those
    sim_gheap below[MDL_CAPS];    // those by the step count at which they reach the cap
    sim_gheap fin;                // members by the step count after which they finish
    sim_time last_end;            // end of the last decode step
    uint32_t *fresh;              // members yet to emit here: their first gap is their own
    uint32_t n_fresh, fresh_cap;
    uint32_t *recomp;   // running requests whose next step rebuilds their KV
    uint32_t n_recomp, recomp_cap;
    sim_rheap fin_pos;   // finishing members by running-array position (the order the
                         // listed path visits them)
} sim_dsum;

typedef struct sim_inst {
    uint32_t id;   // index in cluster.inst
    sim_pool_kind pool;
    const sim_pool_ops *ops;    // what its steps do (sim_pool.h): vision, prefill, decode or
                                // colocated
    uint32_t idx;               // index within its pool
    const sim_pool_cfg *pcfg;   // its queue policy: the pool's (colocated: an instance counted
                                // under cluster.decode keeps cluster.decode's)
    bool active;                // receives new requests (time-of-day schedule)
    bool draining;              // not active, still serving what it holds: billed until idle
    bool busy;                  // a step is in flight
    bool kick_pending;          // idle, a SIM_EV_KICK at this instant will form its step
    // serving.first_token_lag_steps: requests whose first token the step ending at lag_at made;
    // the next step, when it starts then, delays it by the lag times its own duration
    uint32_t *lag_wait;
    uint32_t n_lag;
    size_t lag_cap;
    sim_time lag_at;
    bool waiting_loads;   // step compute ended, waits for overlapped loads
    sim_time step_start, step_end;
    sim_rheap ready;   // prefill: ready to compute
    sim_rheap dwait;   // decode: waiting for admission (KV capacity, batch slots)
    uint32_t *batch;   // slots in the current step
    uint32_t *chunk;   // prefill tokens of each in this step
    uint32_t n_batch, batch_cap;
    uint32_t *running;   // decode: admitted requests
    uint32_t n_running, running_cap;
    uint32_t n_structured;     // running requests with structured output (mask per step)
    bool dsum_on;              // decode by running sums (else every sequence is listed)
    bool runs_on;              // dsum_on, and stretches of identical steps may be one event
    sim_dsum ds;               // decode sums (dsum_on)
    sim_time *run_end;         // a run of run_m decode steps in one event: end of each step
    uint8_t *run_ext;          // each step's cost: 1 extrapolated, 2 a table fallback
    uint8_t run_ext_any;       // run_ext's flags or-ed over the run (0: run_ext not kept)
    bool run_rising;           // the run's step times never decrease (checked as costed)
    uint32_t run_m, run_cap;   // steps in the run in flight (0/1: a plain step)
    uint32_t run_hint;         // steps the next run is costed for at most (SIM_RUN_MIN..MAX)
    uint32_t run_more;         // steps of the run after its run_m costed ones, costed when the
                               // early event at the end of those pops (sim_run_extend)
    uint64_t run_seq;          // the seq the run's end takes, given out as the run was formed
    int64_t run_hi;            // the longest step costed in the run (step model's part)
    uint32_t run_told;         // steps of the run in flight the decode router's index has seen
    uint32_t run_attr;         // of those, steps whose tokens the sampler has counted
    uint32_t n_loading;        // prefill: requests loading
    uint32_t n_prefilling;     // colocated: requests holding KV while still in prefill
    uint32_t n_held_ready;     // disaggregated prefill: requests in ready holding KV (pkv:
                               // prefilled in part), served past a head that waits for KV
    double queued_tokens;      // prefill: tokens still to compute (router signal)
    double queued_work_s;      // prefill: step-model seconds of the work still to compute,
                               // attention over each request's context included
    double kv_used;            // decode/colocated: tokens of KV held
    double kv_reserved;        // serving.admission reserve: tokens still to come of the running
                               // requests, held back from admission
    double kv_cap;             // tokens of KV capacity
    double kv_inflight;        // disaggregated prefill: prompt tokens of KV held by requests
                               // being prefilled or sending their KV to decode (pkv), at most
                               // kv_cap; apart from kv_used, which prefill instances keep at 0
    bool kv_blocked;           // disaggregated prefill: its ready queue's head waits for the KV
                               // kv_inflight holds; kicked when some is freed
    double kv_prompt_held;     // colocated/decode: prompt tokens of the requests
                               // holding KV (prefilling or running); their blocks are the
                               // prefix cache's own (serving.prefix_cache free_blocks)
    double busy_ns;            // time stepping
    double busy_ns_sampled;    // busy_ns at the last sample
    double stale_queued, stale_kv, stale_work;   // router's stale view
    uint32_t stale_n;
    sim_bcache hbm, dram;      // prefix cache in HBM, DRAM of its node
    uint64_t hbm_blocks_max;   // serving.prefix_cache free_blocks: the HBM cache's tables (all
                               // of the KV capacity), its capacity following the free blocks
    uint32_t link_dram, link_ssd, link_xfer, link_ssd_write;   // link ids, SIM_NONE = none
    kvf_rng rng;
    uint64_t steps;   // batch steps run
    bool failed;      // down (cluster.<pool>.failures) until its repair
    kvf_rng frng;     // its failure and repair draws
} sim_inst;

struct sim_cluster;
struct sim_pool;
struct sim_req;
typedef uint32_t (*sim_route_fn)(struct sim_cluster *c, struct sim_pool *p, struct sim_req *r);

typedef struct sim_pool {
    sim_pool_kind kind;
    const sim_pool_cfg *cfg;
    uint32_t first, n;   // instances [first, first+n) in cluster.inst
    uint32_t n_active;
    mdl_stepper *stepper;
    mdl_model model;      // the model as this pool runs it (its precision)
    mdl_hardware hw;      // the pool's GPUs (cluster.<pool>.hardware, else the scenario's)
    uint32_t rr;          // round-robin cursor
    sim_route_fn route;   // the pool's router, resolved once
    bool reads_work;      // the router reads queued_work_s (least_work, ttft_estimate): only
                          // then is each queued prefill's step-model time estimated
    double (*load)(const struct sim_cluster *,
                   const struct sim_inst *);   // what a min-load
                                               // router minimises (NULL: the router scans or draws)
    sim_time stale_at;                         // the pool's router snapshot time (router.stale_ms)
    // Min-load index: a tournament tree over the pool's instances, leaf i = load of instance
    // first + i (+inf when inactive), node = the lower of its children (the left on ties, as
    // a scan in index order picks the first); updated per instance in O(log n).
    //   node 1 = root; children of k: 2k, 2k + 1; leaves [lsize, 2 lsize)
    double *lval;
    uint32_t *larg;
    uint32_t lsize;
    const sim_pool_scaler *scaler;   // load-driven sizing (cluster.<pool>.autoscale), NULL = none
    uint32_t n_starting;             // instances started, not yet serving (billed)
    uint32_t n_failed;               // instances down after a failure (billed: the GPUs are held)
    uint32_t n_draining;             // instances taken out of service, still serving (billed)
    sim_time scale_last;             // time of the last start or stop
    double scale_busy_ns;            // busy time of its instances at the last tick
    uint64_t scale_ups, scale_downs;
    uint32_t active_min, active_max;   // fewest and most instances serving over the run
    double gpu_ns;                     // integral of billed GPUs over time (ns x GPUs)
    sim_time gpu_last;
    double gpu_ns_sampled;   // the integral at the last sample (sim_on_sample)
} sim_pool;

typedef struct sim_link_ref {
    sim_link link;
    uint32_t inst;
    uint8_t kind;          // SIM_TIER_DRAM/SSD load, 3 = KV transfer, 4 = SSD write
    sim_time busy_until;   // SSD write links: end of the writes queued so far
} sim_link_ref;

typedef struct sim_donemap {   // closed loop: trace id -> completion (open addressing)
    uint64_t *key;
    int64_t *done_ns;       // -(slot+1) while in flight
    uint32_t *tokens;       // input + output of the finished request
    uint64_t *last_block;   // its last full prompt block id (0 = none)
    uint32_t *n_blocks;
    size_t n, cap;
} sim_donemap;

typedef struct sim_cluster {
    const sim_config *cfg;
    const sim_run_opts *opts;
    mdl_model model;
    mdl_hardware hw;
    sim_queue *q;
    sim_time now;
    trc_reader *reader;
    struct sim_sampler *sampler;   // workload.sample_rate < 1: requests it drops are skipped
    bool reader_done, read_pending;
    bool closed_loop;   // the trace may hold closed-loop turns
    trc_request peek;   // open-loop request read ahead
    bool have_peek;
    sim_req *req;   // slots
    uint32_t n_req, req_cap, free_req;
    sim_inst *inst;
    uint32_t n_inst;
    sim_pool pool[SIM_POOLS];
    bool colocated;
    bool tier_loads;   // a tier load was ever sent (sim_req.pending_loads rises nowhere else)
    sim_link_ref *links;
    size_t n_links, links_cap;
    sim_bcache ssd;
    double block_bytes;            // bytes of one stored block
    double kv_bytes_token;         // bytes per token moved prefill -> decode
    uint32_t link_store;           // the SSD store's shared read link (store_read_GBps or
                                   // store_iops set), SIM_NONE = each instance its own path
    sim_time store_busy_until;     // the store's write-downs queued so far (store_write_GBps)
    double hbm_blocks_per_token;   // HBM prefix-cache blocks one token of KV capacity holds
    bool swa_replay;               // hybrid model with bounded replay
    bool dspark;                   // decode steps verify DSpark blocks (speculative.method)
    mdl_spec spec;                 // the model's DSpark stack (dspark only)
    uint32_t spec_seq_tokens;      // tokens one decoding sequence computes per step (1 + drafts,
                                   // or the DSpark block)
    double swa_seq_bytes;          // fixed SWA state of one sequence (window + compressor state)
    sim_donemap done;
    uint64_t arrived, completed, rejected, in_flight, seq;
    sim_time last_arrival_ns, first_arrival_ns;
    mdl_seq *seqs;
    size_t seqs_cap;
    sim_metrics m;
    rpt_econ_input econ_in;               // tokens by class and peak/off-peak for the economics
    int16_t econ_slot[TRC_CLASS_COUNT];   // each trace class's slot in econ_in; -1: not yet
    rpt_econ_input econ_st;   // the same for the requests arriving in output.steady_from_s/to_s
    // the request rows' class and status texts as the results database keeps them
    // (rpt_db_text), looked up by name once; NULL: not yet
    const char *row_cls[TRC_CLASS_COUNT], *row_status[SIM_OUTCOMES];
    rpt_db *db;
    kvf_err *err;   // first error inside a handler stops the run
    kvf_status status;
    kvf_rng rng_route;            // the p2c router's draws
    kvf_rng rng_structured;       // which requests ask for structured output
    kvf_rng rng_skew;             // the hottest EP GPU's load, step to step
    double ep_skew_base;          // MoE skew after the redundant-expert balancer
    struct sim_trace *timeline;   // Chrome / Perfetto trace (--trace-out, sim_trace.h), NULL = off
    rpt_progress progress;        // bar on stderr (terminals only)
    bool show_progress;
    uint32_t dgen;              // decode-sum membership generations handed out
    double sample_interval_s;   // time-series sampling interval (sim.sample_interval_s or 10)
    sim_time last_sample_ns;    // when the time series was last sampled (0: not yet)
    // SLOs by class, resolved at init: a request meets its class's when each bounded metric is
    // within the bound of the highest percentile given for it (NaN = unbounded)
    double slo_req_ms[TRC_CLASS_COUNT][SIM_SLO_METRICS];
    bool slo_by_class;   // some class has bounds of its own (per-class samples kept)
} sim_cluster;

// ---- calls between the cluster's rooms (sim/README.md) ----------------------------------
// Most decode steps one run event stands for (pool_decode.c), and the fewest a run is first
// formed for: a run's length is set when it starts (its hint doubles when a run ends uncut
// at it), and its steps are costed in pages: SIM_RUN_PAGE first, then three times as many as
// are costed, each at an early event at the end of the last (sim_step.c), so a run cut by a
// request a few steps in has not costed its hundreds more (steps costed and cut off are waste,
// not error).
enum { SIM_RUN_MAX = 4096, SIM_RUN_MIN = 16, SIM_RUN_PAGE = 64 };
typedef enum sim_link_kind {
    SIM_LINK_DRAM = 0,
    SIM_LINK_SSD = 1,
    SIM_LINK_XFER = 3,
    SIM_LINK_SSDW = 4
} sim_link_kind;
extern const char *const sim_link_what[];   // what a link kind carries, as the timeline names it

static inline sim_req *sim_req_at(sim_cluster *c, uint32_t slot) {
    return &c->req[slot];
}

static inline void sim_ev_push(sim_cluster *c, sim_time t, uint16_t kind, uint32_t dst, uint64_t a0,
                               uint64_t *seq_out) {
    sim_event ev = {.t = t, .dst = dst, .kind = kind, .arg = {a0, 0}};
    uint64_t s = sim_queue_push(c->q, &ev);
    if (seq_out) *seq_out = s;
}

static inline void sim_ev_push2(sim_cluster *c, sim_time t, uint16_t kind, uint64_t a0,
                                uint64_t a1) {
    sim_event ev = {.t = t, .dst = 0, .kind = kind, .arg = {a0, a1}};
    sim_queue_push(c->q, &ev);
}

static inline void sim_fail_run(sim_cluster *c, kvf_status st) {
    if (c->status == KVF_OK) c->status = st;
}

static inline sim_pool *sim_pool_of(sim_cluster *c, const sim_inst *in) {
    return &c->pool[in->pool];
}

static inline uint32_t sim_inst_queue_len(const sim_inst *in) {
    return (uint32_t)(in->ready.n + in->n_loading + in->dwait.n);
}

static inline uint32_t sim_req_ctx_tokens(const sim_req *r) {
    return r->input + r->produced - 1;
}

static inline void sim_seqs_reserve(sim_cluster *c, size_t n) {
    if (n > c->seqs_cap) kvf_grow((void **)&c->seqs, &c->seqs_cap, n, sizeof *c->seqs);
}

static inline void sim_batch_reserve(sim_inst *in, uint32_t n) {
    if (n <= in->batch_cap) return;
    size_t c1 = in->batch_cap, c2 = in->batch_cap;
    kvf_grow((void **)&in->batch, &c1, n, sizeof *in->batch);
    kvf_grow((void **)&in->chunk, &c2, n, sizeof *in->chunk);
    in->batch_cap = (uint32_t)c1;
}

// cluster/sim_request.c
void sim_req_set_state(sim_req *r, sim_req_state to);
size_t sim_done_slot(sim_donemap *d, uint64_t id, bool insert);
void sim_done_free(sim_donemap *d);
void sim_read_trace(sim_cluster *c);
// The request leaves the run (completed or rejected): metrics, its row, economics, closed-loop
// successors released, slot freed.
void sim_req_finish(sim_cluster *c, uint32_t slot, sim_outcome out);
// Rejects the request (why != SIM_OUT_COMPLETED), counted by reason.
void sim_req_reject(sim_cluster *c, uint32_t slot, sim_outcome why);
void sim_req_write_row(sim_cluster *c, const sim_req *r, sim_outcome out);
void sim_on_arrival(sim_cluster *c, uint32_t slot);
// The request reaches the scheduler (after the frontend): vision pool or prefill router.
void sim_req_enter(sim_cluster *c, uint32_t slot);
// Its client gave up: aborted at once where nothing holds it mid-step, else marked and aborted
// where it next stops (sim_request.c).
void sim_req_timeout(sim_cluster *c, uint32_t slot, uint64_t seq);
// Instance failures (pools/pool_failures.c): schedule the first failure of every instance of
// a pool with failures; an instance fails (its requests retried or rejected, its KV lost) and
// is repaired.
void sim_failures_init(sim_cluster *c);
void sim_failures_fail(sim_cluster *c, sim_inst *in);
void sim_failures_repair(sim_cluster *c, sim_inst *in);

// cluster/policy/sim_order.c
uint64_t sim_queue_key(const sim_cluster *c, const sim_pool_cfg *pc, const sim_req *r);

// cluster/sim_links.c
void sim_link_rearm(sim_cluster *c, uint32_t id);
void sim_link_send(sim_cluster *c, uint32_t id, double bytes, uint64_t tag);
void sim_link_write_down(sim_cluster *c, uint32_t id, double bytes, uint64_t n);
uint32_t sim_link_new(sim_cluster *c, double Bps, sim_time lat, uint32_t inst, uint8_t kind);
void sim_on_link(sim_cluster *c, uint32_t id);

// cluster/sim_step.c
void sim_step_cost(sim_cluster *c, sim_pool *p, mdl_phase phase, uint32_t n, uint32_t images,
                   const mdl_decode_sum *ds, mdl_step_cost *out);
void sim_step_begin(sim_cluster *c, sim_inst *in, const mdl_step_cost *k, uint32_t n,
                    uint64_t tokens);
void sim_inst_kick(sim_cluster *c, sim_inst *in);
// An instance out of service (not active: scaled down or scheduled off) that still holds work,
// or (disaggregated prefill) prompt KV still on its way to decode, is draining: its GPUs are
// billed until it is idle and holds none. Call after in's activity, work or held KV changed.
void sim_inst_drain_check(sim_cluster *c, sim_inst *in);
// SIM_EV_KICK: the idle instance forms its step now.
void sim_inst_kicked(sim_cluster *c, sim_inst *in);
void sim_inst_form_step(sim_cluster *c, sim_inst *in);
void sim_step_form_batch(sim_cluster *c, sim_inst *in, bool decode, bool prefill);
void sim_step_settle_batch(sim_cluster *c, sim_inst *in, bool decode);
void sim_inst_step_done(sim_cluster *c, sim_inst *in);

// cluster/kv/sim_tiers.c
void sim_tier_ssd_put(sim_cluster *c, sim_inst *in, uint64_t id, int cls);
void sim_tier_hbm_put(sim_cluster *c, sim_inst *in, uint64_t id, int cls);
void sim_tier_persist_answer(sim_cluster *c, sim_inst *in, const sim_req *r);
// serving.prefix_cache free_blocks: the instance's HBM prefix cache shrinks to the KV blocks
// its running requests leave free (LRU blocks evicted down the cascade); no-op otherwise.
void sim_tier_fit_free(sim_cluster *c, sim_inst *in);
void sim_tier_write_blocks(sim_cluster *c, sim_inst *in, sim_req *r, uint32_t upto);
// Hints the CPU to fetch the table lines sim_tier_write_blocks(c, in, r, upto) will probe
// first, so that a batch's requests' misses overlap (changes no answer).
void sim_tier_prefetch_write(const sim_cluster *c, const sim_inst *in, const sim_req *r,
                             uint32_t upto);

// cluster/pools/pool_prefill.c
void sim_prefill_count_work(sim_cluster *c, const sim_req *r, uint32_t replay);
// The prompt tokens served from cache when the first nb of a prompt's blocks of `input` tokens
// are found, tiers[] of them by tier (HBM, DRAM, SSD, in prefix order): whole blocks, at least
// one token computed (trc_hit_tokens), so a prompt found whole recomputes its last block. Fills
// tok[] with those tokens by tier (the cap trims the last tier first) and returns their sum.
// The rule admission applies (sim_prefill_set_prefix) and routers estimate by.
uint32_t sim_prefill_hit_tokens(const sim_cluster *c, uint32_t input, uint32_t nb,
                                const uint32_t tiers[SIM_TIERS], uint32_t tok[SIM_TIERS]);
void sim_prefill_set_prefix(sim_cluster *c, sim_req *r, uint32_t nb,
                            const uint32_t tiers[SIM_TIERS]);
void sim_prefill_admit(sim_cluster *c, sim_inst *in, uint32_t slot);
void sim_prefill_first_schedule(sim_cluster *c, sim_inst *in, sim_req *r);
void sim_prefill_route(sim_cluster *c, uint32_t slot);
void sim_decode_transfer(sim_cluster *c, sim_inst *pin, uint32_t slot);
void sim_prefill_finish(sim_cluster *c, sim_inst *in, uint32_t slot);
uint32_t sim_prefill_take_chunks(sim_cluster *c, sim_inst *in, int64_t budget, uint32_t n);
// Disaggregated: r's prompt KV leaves its prefill instance (its transfer to decode ended, it
// went without a link, or the request ends); no-op unless r holds it (pkv). With kick, an
// instance whose queue waits for that room is kicked; without, the caller is that instance
// forming or settling its step (kicked after it) or the request ends there.
void sim_prefill_release_kv(sim_cluster *c, sim_req *r, bool kick);
// An abandoned request out of the instance's ready queue (not in a step): its queued work and
// (colocated) claimed KV released, rejected as a time-out.
void sim_prefill_abort(sim_cluster *c, sim_inst *in, uint32_t slot);

// cluster/pools/pool_decode.c
void sim_decode_running_add(sim_inst *in, sim_req *r, uint32_t slot);
void sim_decode_running_remove(sim_cluster *c, sim_inst *in, uint32_t pos);
void sim_dsum_free(sim_dsum *d);
void sim_dsum_sync(sim_inst *in, sim_req *r);
void sim_dsum_join(sim_cluster *c, sim_inst *in, uint32_t slot);
void sim_dsum_leave(sim_cluster *c, sim_inst *in, uint32_t slot);
mdl_decode_sum sim_dsum_batch_at(const sim_dsum *d, uint64_t k);
mdl_decode_sum sim_dsum_batch(const sim_dsum *d);
uint32_t sim_run_passed(const sim_inst *in, sim_time t);
uint32_t sim_run_done_by(const sim_inst *in, sim_time t);
void sim_dsum_run_settle(sim_cluster *c, sim_inst *in, uint32_t upto);
double sim_inst_kv_used(const sim_inst *in, sim_time now);
void sim_dsum_step_done(sim_cluster *c, sim_inst *in);
void sim_decode_admit(sim_cluster *c, sim_inst *in);
// Whether a request needing need_now tokens of KV now and remaining more as it decodes may be
// admitted to the instance (serving.admission and serving.watermark).
bool sim_decode_fits(const sim_cluster *c, const sim_inst *in, double need_now, double remaining);
void sim_decode_preempt(sim_cluster *c, sim_inst *in);
bool sim_decode_emit(sim_cluster *c, sim_inst *in, uint32_t pos);

// measure/sim_timeseries.c
void sim_ts(sim_cluster *c, const char *pool, int32_t inst, const char *metric, double v);
void sim_pool_gpu_account(sim_cluster *c);
// The periodic sample over the interval_s just ended; last: the run's closing part-interval,
// written to the time series only (the sampled statistics keep their regular instants).
void sim_on_sample(sim_cluster *c, double interval_s, bool last);

// Routers (sim_router.c): return an instance id of the pool.
sim_route_fn sim_router_prefill(const char *name);
sim_route_fn sim_router_decode(const char *name);
// Resolves the pool's router (name from the scenario) and builds its min-load index.
void sim_router_init(sim_cluster *c, sim_pool *p, bool prefill);
// The instance's load changed (or its active flag): updates its pool's min-load index.
void sim_router_touch(sim_cluster *c, const sim_inst *in);
void sim_router_free(sim_pool *p);

// Longest cached prefix of r on instance in (blocks), by tier (shared with routers). With
// local_only the shared SSD is not consulted (the prefix ends at the first non-local block).
// touch refreshes the LRU position and retention of the blocks it finds.
uint32_t sim_cluster_prefix(sim_cluster *c, sim_inst *in, const sim_req *r, uint32_t hit[SIM_TIERS],
                            bool touch, bool local_only);
// Prefill seconds the pool's step model predicts for tokens over cached context.
double sim_cluster_prefill_s(sim_cluster *c, sim_pool *p, uint32_t tokens, uint32_t cached);

void sim_rheap_push(sim_rheap *h, uint64_t key, uint32_t slot);
bool sim_rheap_pop(sim_rheap *h, uint32_t *slot);
void sim_rheap_free(sim_rheap *h);

#endif
