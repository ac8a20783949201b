// sim/sim_metrics.h -- what a run measures: per-request latency samples, an ITL histogram
// (one entry per token gap would be too many), token and cache counters, work counters and
// the queue samples the saturation check reads.
#ifndef SIM_METRICS_H
#define SIM_METRICS_H

#include "kvf.h"
#include "trc.h"

// Log-linear histogram of non-negative values with < 0.8 % relative resolution; exact mean.
typedef struct sim_hist {
    uint64_t *count;   // bins; bin 0 holds exact zeros
    size_t nbins;
    uint64_t total;
    double sum;
    __int128 sum_ns;        // exact sum of values added in ns (sim_hist_add_ns)
    int64_t (*gap_ns)[2];   // sim_hist_add_gaps_ns: bin b's gaps in ns [lo, hi), formed once
    size_t ngap;            // per bin ({0, 0} not yet, lo -1: none)
} sim_hist;

void sim_hist_init(sim_hist *h);
void sim_hist_free(sim_hist *h);
void sim_hist_add(sim_hist *h, double v, uint64_t weight);
// Adds weight values of ns nanoseconds, binned in ms; their sum is kept exactly, so one
// weighted add equals weight single adds to the last bit (sim_hist_mean).
void sim_hist_add_ns(sim_hist *h, int64_t ns, uint64_t weight);
// The gaps between consecutive ends[0 .. m-1] (m - 1 of them), each weight times: the same
// histogram as sim_hist_add_ns on each gap in turn. rising: the caller knows the gaps never
// decrease, so a bin's stretch of them is found by bisection instead of gap by gap.
void sim_hist_add_gaps_ns(sim_hist *h, const int64_t *ends, uint32_t m, uint64_t weight,
                          bool rising);
// Mean of everything added (ms).
double sim_hist_mean(const sim_hist *h);
double sim_hist_percentile(const sim_hist *h, double p);

typedef struct sim_samples {   // growable array of doubles
    double *v;
    size_t n, cap;
} sim_samples;

// Room for one more value (sim_samples_add, inline: a request's end adds four).
void sim_samples_grow(sim_samples *s);
static inline void sim_samples_add(sim_samples *s, double v) {
    if (s->n == s->cap) sim_samples_grow(s);
    s->v[s->n++] = v;
}
void sim_samples_free(sim_samples *s);

#define SIM_WAIT_BINS 4096

typedef struct sim_metrics {
    sim_samples ttft_ms, tpot_ms, e2e_ms, gen_tok_s, queue_len;
    sim_samples backlog;   // per sample: queued requests + transfers in flight on the
                           // links (KV moving, tier loads): what a drain waits for
    sim_hist itl_ms;
    uint64_t prompt_tokens, hit_tokens, miss_tokens, hit_tier[3];
    uint64_t output_tokens;
    uint64_t output_requested;   // output tokens asked for by requests that arrived
    uint64_t output_rejected;    // of those, owed by requests that were rejected
    uint64_t slo_ok;             // completed requests within both SLOs
    uint64_t rejected_queue, rejected_slo, rejected_fit, rejected_timeout, rejected_context;
    uint64_t truncated;              // requests cut to the model's max_context
    uint64_t rejected_failure;       // rejected because their instance failed
    uint64_t rejected_no_instance;   // no active instance in a pool they need (all down or off)
    // the steady window (output.steady_*): completed requests arriving in it, their latencies
    // and generation speed (by class too); the sampled intervals inside it, their span and
    // tokens, and per pool their busy and serving instance time and running requests
    uint64_t st_requests;
    sim_samples st_ttft_ms, st_tpot_ms, st_gen_tok_s;
    double st_cls_gen[TRC_CLASS_COUNT];
    uint64_t st_cls_gen_n[TRC_CLASS_COUNT];
    double st_span_s, st_in, st_out, st_running[3], st_busy_ns[3], st_inst_ns[3], st_gpu_s[3];
    uint64_t failures, retried;   // instance failures; requests retried after one
    double lost_kv_tokens;        // KV of running requests (prefill: of the prompts it holds)
                                  // lost with their instance
    // a retried request's prompt and output tokens of the tries that failed: work done again,
    // taken out of the totals above (each request's tokens are counted once, as delivered)
    uint64_t redone_prompt_tokens, redone_output_tokens;
    // the same of the tries a failure ended for good (failures.requests reject): taken out of
    // the totals too, as a request never served
    uint64_t rejected_prompt_tokens, rejected_output_tokens;
    double down_ns;   // instance time spent failed
    uint64_t preemptions, decode_steps, decode_step_tokens, decode_step_seqs;
    double prefill_flops, prefill_flops_no_reuse, prefill_flops_window_full;
    double load_bytes[3];   // bytes loaded from each tier
    double ssd_write_bytes, kv_transfer_bytes;
    double ssd_write_backlog_s_peak;   // longest queue of write-downs on an instance's SSD link (s)
    double store_bytes_peak;
    // per traffic class (trc_class): completed requests, sums of TTFT (ms) and of generation
    // speed (tok/s, requests with >= 2 output tokens) and their count
    uint64_t cls_done[TRC_CLASS_COUNT], cls_gen_n[TRC_CLASS_COUNT];
    uint64_t cls_arrived[TRC_CLASS_COUNT];     // arrivals by class
    uint64_t cls_good[TRC_CLASS_COUNT];        // completed within their class's SLO
    uint64_t cls_good_tok[TRC_CLASS_COUNT];    // output tokens of those
    sim_samples cls_lat[TRC_CLASS_COUNT][3];   // per-class SLOs set: TTFT, TPOT, E2E (ms)
    double cls_ttft_ms[TRC_CLASS_COUNT], cls_gen_tok_s[TRC_CLASS_COUNT];
    uint64_t extrapolated_steps, steps;
    uint64_t table_fallbacks;   // steps with a term the kernel tables do not cover
    // by traffic class (trc_class): prompt and hit tokens, blocks written to the shared store,
    // and the store's occupancy in blocks sampled once the run is longer than the class's
    // retention (its steady state: sum and count of samples, peak)
    uint64_t cls_prompt[TRC_CLASS_COUNT], cls_hit[TRC_CLASS_COUNT];
    uint64_t cls_store_writes[TRC_CLASS_COUNT];
    double cls_store_steady_sum[TRC_CLASS_COUNT];
    uint64_t cls_store_steady_n[TRC_CLASS_COUNT], cls_store_peak[TRC_CLASS_COUNT];
    uint64_t cls_store_steady_peak[TRC_CLASS_COUNT];
    // the saturation check's inputs (sim_saturation.c): each sample's time (s) and queue
    // length per pool (vision, prefill, decode), and the queueing time of completed requests
    // summed per arrival bin: wait_bins bins of wait_bin_s (one sample interval, doubled as
    // often as needed to keep within SIM_WAIT_BINS)
    sim_samples sample_t, pool_queue[3];
    double *wait_sum;
    uint64_t *wait_n;
    size_t wait_bins;
    double wait_bin_s;
    // interval accumulators for the time series (reset at each sample)
    uint64_t iv_in, iv_out, iv_prompt, iv_hit, iv_hit_tier[3];
} sim_metrics;

// Adds one completed request's queueing time (s) to the bin of its arrival (s).
void sim_metrics_wait_add(sim_metrics *m, double arrival_s, double queue_s, double interval_s);
void sim_metrics_init(sim_metrics *m);
void sim_metrics_free(sim_metrics *m);

#endif
