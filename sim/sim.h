// sim/sim.h -- the simulator's public interface: the typed scenario (design.md §7), loading
// it from YAML with --set overrides, and running it into a summary and a results directory.
//
// A run is a pure function of (scenario, trace, seed): same inputs give an identical summary
// (apart from the wall-clock figures under "sim") and identical database contents.
#ifndef SIM_H
#define SIM_H

#include "kvf.h"
#include "mdl.h"
#include "rpt.h"
#include "trc.h"

enum { SIM_PATH_MAX = 1024, SIM_NAME_MAX = 128, SIM_SCHEDULE_MAX = 48 };
// The most requests one generated workload may ask for (rate_rps x duration_s).
#define SIM_MAX_REQUESTS 1e8

typedef enum sim_mode { SIM_DISAGGREGATED = 0, SIM_COLOCATED } sim_mode;
typedef enum sim_sched { SIM_SCHED_FCFS = 0, SIM_SCHED_SPF, SIM_SCHED_PRIORITY } sim_sched;
typedef enum sim_preempt { SIM_PREEMPT_RECOMPUTE = 0, SIM_PREEMPT_SWAP } sim_preempt;
// The serving engine a pool's instances behave like (serving.preset, scenarios/README.md).
typedef enum sim_serving_preset {
    SIM_SERVING_NONE = 0,
    SIM_SERVING_VLLM,
    SIM_SERVING_SGLANG,
    SIM_SERVING_TRTLLM
} sim_serving_preset;
// Where the prefix cache lives: a slice of HBM of its own (hbm_cache_frac), or the free KV
// blocks (evicted as running requests need them: vLLM, SGLang, TensorRT-LLM block reuse).
typedef enum sim_prefix_home { SIM_PREFIX_SLICE = 0, SIM_PREFIX_FREE_BLOCKS } sim_prefix_home;
// Admission of a request to a running batch: on the KV it needs now, preempting when later
// tokens overflow (vLLM, SGLang), or reserving its whole context up front so nothing is ever
// preempted (TensorRT-LLM's guaranteed-no-evict).
typedef enum sim_admission { SIM_ADMIT_PREEMPT = 0, SIM_ADMIT_RESERVE } sim_admission;

// One pool (vision, prefill or decode).
// cluster.<pool>.autoscale: load-driven instance counts (pools/pool_autoscale.c).
typedef enum sim_scale_metric {
    SIM_SCALE_NONE = 0,
    SIM_SCALE_QUEUE,
    SIM_SCALE_UTILIZATION,
    SIM_SCALE_KV
} sim_scale_metric;
typedef struct sim_autoscale_cfg {
    sim_scale_metric metric;   // none | queue (waiting requests per active instance) |
                               // utilization (busy share) | kv (KV occupancy)
    double up, down;           // add an instance above up, remove one below down
    int32_t min, max;          // active instances kept within [min, max] (max 0 = instances)
    double cooldown_ns;        // no change sooner than this after the last one
    double startup_ns;         // an added instance serves this long after it is started
                               // (weights loading; billed from the start)
} sim_autoscale_cfg;

// cluster.<pool>.failures: instances fail and come back (pools/pool_failures.c).
typedef struct sim_failures_cfg {
    double mtbf_ns;   // mean time between failures of one instance (0 = never)
    double mttr_ns;   // mean time to repair (exponential)
    bool reject;      // its requests are rejected (else retried from the start)
} sim_failures_cfg;

typedef struct sim_pool_cfg {
    int32_t instances;            // instances in the pool (>= 0)
    int32_t gpus_per_instance;    // GPUs per instance (>= 1)
    int32_t tp;                   // tensor parallel degree, 0 = gpus_per_instance
    int32_t ep;                   // expert parallel degree, 0 = gpus_per_instance for MoE
    int64_t max_batch_tokens;     // prefill token budget per step
    int64_t chunk_tokens;         // chunked prefill: max tokens of one request per step, 0 = budget
    int32_t max_batch_requests;   // decode: max running requests
    sim_sched scheduler;          // fcfs | spf (shortest prompt first) | priority (by class)
    int64_t queue_limit;          // admission control: reject when this many wait, 0 = none
    int64_t kv_tokens;            // KV capacity per instance in tokens, 0 = from HBM - weights
    char hardware[SIM_PATH_MAX];   // the pool's GPUs (a name or a path), "" = the scenario's
    mdl_prec prec_weights;         // the pool's weight precision, auto = the scenario's
    mdl_prec prec_activations;     // the pool's GEMM input precision, auto = the scenario's
    sim_autoscale_cfg autoscale;
    sim_failures_cfg failures;
} sim_pool_cfg;

// precision.*: what the model runs in, over its model file's (auto keeps the file's).
typedef struct sim_precision_cfg {
    mdl_prec weights, kv, activations;
} sim_precision_cfg;

// Time-of-day instance counts (cluster.schedule): from hour `from_h` (UTC, 0..24) on.
typedef struct sim_schedule_entry {
    double from_h;
    int32_t prefill;   // -1 = unchanged
    int32_t decode;
} sim_schedule_entry;

// Where a key of the scenario was set (for messages that name file:line and key).
enum { SIM_KEY_LINES_MAX = 256, SIM_KEY_MAX = 64, SIM_PUBLISHED_MAX = 32 };
typedef struct sim_key_line {
    char key[SIM_KEY_MAX];   // dotted key, e.g. "cluster.prefill.instances"
    int32_t line;            // 1-based line in the scenario file; -1 = set by --set
} sim_key_line;

typedef struct sim_tier_cfg {
    double capacity_bytes;        // < 0 = unlimited, 0 = tier off
    double read_Bps, write_Bps;   // bandwidth per instance path, bytes/s
    double latency_ns;            // per transfer
    double store_read_Bps;        // the shared store's own bandwidth, all instances together
    double store_write_Bps;       // (SSD; 0 = no limit beyond each instance's path)
    double store_iops;            // the store's block operations per second (0 = no limit)
} sim_tier_cfg;

// One published figure (scenario section `published.NAME`): value (and high for a range),
// role input (the scenario sets it) or output (the run produces it), the summary.json key of
// the simulated figure, the factor from that key's unit to the published one, the unit, and
// what the simulated figure rests on.
typedef struct sim_published {
    char name[48];
    double value, high;     // high NaN = a single figure
    bool output;            // role: output (else input)
    char summary_key[96];   // "" = none (an input used as is)
    double scale;           // published unit per summary unit (default 1)
    char unit[24];
    char rests_on[240];
} sim_published;

// Thresholds of the saturation verdict (saturation.*; sim/sim_saturation.c, scenarios/README.md).
typedef struct sim_saturation_cfg {
    double queue_growth;          // a pool's queue grows: by more than this many requests ...
    double queue_growth_frac;     // ... and more than this share of its mean, over the 2nd half
    double wait_growth_s;         // queueing time grows by more than this over the 2nd half (s)
    double max_wait_s;            // mean queueing time over the 2nd half above this (s; 0 = the
                                  // TTFT SLO) is a standing backlog
    double drain_frac, drain_s;   // the run drains longer than both after the last arrival
    double reject_frac;           // more than this share of arrivals rejected
} sim_saturation_cfg;

// moe.comm_sms's default: DeepEP's normal kernels hold 24 of H800's 132 SMs in DeepSeek's
// prefill profile (deepseek-ai/profile-data, assets/prefill.jpg)
#define SIM_COMM_SMS_DEFAULT 24

// The areas of a scenario, one sub-struct each (the key table in sim/config/ maps every
// scenario key to its field and holds its range; nothing else checks a range).
typedef struct sim_moe_cfg {    // moe.*
    double skew;                // hottest GPU load over mean (>= 1)
    double redundant_experts;   // fraction of redundant experts the EP balancer adds (0..1)
    double skew_sd;             // > 0: skew drawn per MoE step, max(1, N(skew, sd))
    uint32_t route_nodes;       // node-limited routing: scale-up domains per token (0 = any)
    bool two_batch;             // two micro-batches overlap communication with compute
    uint32_t comm_sms;          // two_batch prefill: SMs the all-to-all kernels hold
    bool single_batch;          // one batch: the combine beside the routed experts' down GEMMs
                                // and the shared experts, the dispatch exposed (mdl_sbo_apply)
    int routing;                // MDL_ROUTE_*: which fused-MoE rows the table model reads
} sim_moe_cfg;

typedef struct sim_generate_cfg {   // workload.generate.*: synthetic traffic (trc_gen_options)
    char profile[32];               // "" = replay the trace; chatbot|agent|coding|mixed
    double rate_rps;
    double duration_s;
    char arrival[16];                 // poisson | gamma | diurnal
    double cv;                        // gamma: coefficient of variation of the gaps (0 = default)
    double mean_turns;                // turns per session (0 = the profile's)
    int32_t system_tokens;            // system prompt tokens (-1 = the profile's)
    uint32_t input_len, output_len;   // fixed new/answer tokens (0 = drawn)
    double images_p;                  // probability a request carries one image
    bool closed_loop;                 // continued turns wait for the previous turn + think time
    double think_s;                   // closed loop: mean think time (0 = the generator's 5 s)
    double days;                      // > 0: days of returning sessions (trc.h, days mode)
    double diurnal_amplitude;         // daily cycle amplitude A in [0, 1)
    double peak_hour;                 // hour of the daily peak
    double weekend_ratio;             // a weekend day's rate over a weekday's
    uint32_t start_weekday;           // weekday at t = 0, 0 = Monday
    double warmup_days;               // sessions generated this long before t = 0
    trc_gen_return ret[3];            // per class chatbot, agent, coding: p, median_h, sigma
    double mix[3];   // mixed: shares of new sessions chatbot, agent, coding (0 = default)
} sim_generate_cfg;

typedef struct sim_workload_cfg {   // workload.*
    char trace[SIM_PATH_MAX];       // trace file ("" with generate)
    trc_options opt;                // format, time_scale, rate_rps, limit, window, bucket, ...
    double sample_rate;             // R in (0, 1]: simulate sessions/prefix roots hashing below R
                                    // on a cluster scaled by R (sim/run/sim_sample.h), 1 = all
    sim_generate_cfg gen;
} sim_workload_cfg;

typedef struct sim_cluster_cfg {   // cluster.*, mode
    sim_mode mode;
    sim_pool_cfg vision, prefill, decode;
    double kv_transfer_Bps;   // prefill -> decode KV link per prefill instance
    double net_latency_ns;
    int32_t n_schedule;
    sim_schedule_entry schedule[SIM_SCHEDULE_MAX];
    sim_preempt preemption;
} sim_cluster_cfg;

typedef struct sim_router_cfg {   // router.*
    char prefill[32];             // round_robin | least_loaded | least_work | p2c | cache_aware |
                                  // ttft_estimate
    char decode[32];              // round_robin | least_kv | least_requests
    double stale_ns;              // routers see load this old
    bool reject_slo;              // ttft_estimate: reject requests whose estimate breaks the SLO
} sim_router_cfg;

typedef struct sim_kv_cfg {   // kv.*, cache.*
    uint32_t block_tokens;
    double hbm_cache_frac;       // share of a prefill instance's KV capacity kept as prefix cache
    double activation_reserve;   // share of HBM kept for activations
    sim_tier_cfg dram;           // per node
    sim_tier_cfg ssd;            // shared store
    int64_t retention_ns[TRC_CLASS_COUNT];   // per class, <= 0 = never expires
    bool write_through;                      // write new blocks to SSD at once (else on eviction)
    bool overlap_load;                       // overlap KV loads with compute layer by layer
    bool persist_decode;                     // persist prompt + answer of finished turns
    uint32_t swa_replay_tokens;              // R for hybrid models
    bool prefix_cache;                       // master switch of prefix reuse
    bool step_sequential;   // a step runs its chunks one after another (a CPU engine):
                            // a chunk's blocks are reusable by later chunks of the step
} sim_kv_cfg;

// speculative.method: which speculative decoding a decode step runs. auto = the model's
// DSpark stack (dspark_* keys) when it has one and speculative.draft_tokens is 0, else draft.
typedef enum sim_spec_method {
    SIM_SPEC_AUTO = 0,
    SIM_SPEC_DSPARK,   // block drafts verified together (mdl_spec_*), model file's
    SIM_SPEC_DRAFT,    // draft_tokens drafts, each accepted with `acceptance`
    SIM_SPEC_NONE      // one token per step
} sim_spec_method;

typedef struct sim_decoding_cfg {   // decoding.*
    uint32_t draft_tokens;
    double acceptance;
    sim_spec_method spec_method;   // speculative.method
    double structured_mask_ns;     // per-step mask cost per structured request
    double structured_share;       // share of requests flagged structured at arrival (0..1)
} sim_decoding_cfg;

#define SIM_FIT_UNDO_MAX 32   // terms one fit file may set

typedef struct sim_serving_cfg {   // serving.*: the serving engine's behaviour (presets fill what
                                   // is not set explicitly; sim/config/sim_serving.c)
    sim_serving_preset preset;
    char fit[SIM_PATH_MAX];         // a `kvfleet fit` file whose terms fill keys not set here
    double frontend_ns;             // per request: arrival -> scheduler (HTTP, tokenisation)
    double step_overhead_ns;        // per step: the engine's CPU work that does not overlap the GPU
    double step_overhead_seq_ns;    // per step and sequence in the batch
    double first_token_lag_steps;   // a prompt's first token reaches its client this share of its
                                    // instance's next step after the step that made it (the
                                    // engine's output pipeline), in [0, 1]; 0 = at once
    sim_prefix_home prefix_cache;   // slice | free_blocks
    sim_admission admission;        // preempt | reserve
    double watermark;               // share of KV kept free at admission (vLLM 0.01)
    uint32_t graph_buckets;         // > 0: decode batches up to this size padded to the next
                                    // CUDA-graph capture size (1, 2, 4, 8, 16, 24, ... step 8)
    bool context_truncate;          // context_overflow: a request over the model's max_context is
                                    // truncated (its prompt's oldest tokens, then its answer)
                                    // instead of refused (reason "context")
    double client_timeout_ns;       // > 0: a request not finished this long after arrival is
                                    // abandoned by its client and aborted (counted, "timeout")
    // the values the fit file's terms replaced (undone before the next resolve, so that
    // `--set serving.fit=...` to another file or to null leaves no term of the last one)
    struct sim_fit_undo {
        const char *key;      // the scenario key (the key table's own string)
        uint32_t off, off2;   // its place in sim_config (off2: 0 = none)
        int ntype;            // its storage type (sim_keys.h num_type)
        double was;           // its value before the term
    } fit_undo[SIM_FIT_UNDO_MAX];
    uint32_t n_fit_undo;
} sim_serving_cfg;

// The metrics and percentiles a class's SLO can bound (slo.classes.<class>.<metric>.<stat>).
enum { SIM_SLO_TTFT = 0, SIM_SLO_TPOT, SIM_SLO_E2E, SIM_SLO_METRICS };
enum { SIM_SLO_P50 = 0, SIM_SLO_P90, SIM_SLO_P99, SIM_SLO_STATS };

typedef struct sim_slo_cfg {           // slo.*
    double ttft_p90_ms, tpot_p90_ms;   // every class without bounds of its own
    // per class: bound on the metric's percentile, ms; 0 = none. A class with any bound of its
    // own is held to its own only; a request meets its class's SLO when each bounded metric is
    // within its bound (goodput counts those), a class meets it when each percentile is.
    double cls_ms[TRC_CLASS_COUNT][SIM_SLO_METRICS][SIM_SLO_STATS];
} sim_slo_cfg;

typedef struct sim_output_cfg {   // output.*
    double sample_interval_s;     // time-series sampling period
    bool write_requests;          // request table rows
    // a steady-state window, s of simulated time (to 0 = none): the summary's "steady" holds
    // the latencies of requests arriving in it and the throughput of the sampled intervals
    // inside it, apart from the whole run's warm-up and drain
    double steady_from_s, steady_to_s;
} sim_output_cfg;

typedef struct sim_config {
    char name[SIM_NAME_MAX];
    char path[SIM_PATH_MAX];   // scenario file (for messages), "" when built in code
    char dir[SIM_PATH_MAX];    // directory relative paths resolve against (the repo root)
    uint64_t seed;
    char model[SIM_PATH_MAX];      // models/<name>.yaml or a path
    char hardware[SIM_PATH_MAX];   // models/hardware/<name>.yaml or a path
    char step_model[32];           // roofline | calibrated | table
    char profile[SIM_PATH_MAX];    // calibrated: engine profile CSV
    mdl_efficiency eff;            // roofline efficiency factors (efficiency.*)
    sim_precision_cfg precision;   // precision.*
    sim_moe_cfg moe;
    sim_workload_cfg workload;
    sim_cluster_cfg cluster;
    sim_router_cfg router;
    sim_kv_cfg kv;
    sim_decoding_cfg decoding;
    sim_serving_cfg serving;
    sim_slo_cfg slo;
    sim_saturation_cfg sat;   // saturation verdict thresholds
    rpt_econ_config econ;     // economics.* (reports/rpt.h; rpt_econ_config_set)
    sim_output_cfg output;
    // published figures to set beside the run's (section `published`): checks, never inputs
    // to a fit; each names the summary.json key it compares with and what it rests on
    int32_t n_published;
    sim_published published[SIM_PUBLISHED_MAX];
    // where each key was set (filled by sim_config_load/sim_config_set; defaults have none)
    int32_t n_key_lines;
    sim_key_line key_lines[SIM_KEY_LINES_MAX];
} sim_config;

// Names of the routing policies (sim/sim_router.c), NULL-terminated: the scenario loader
// accepts exactly these.
extern const char *const sim_prefill_router_names[];
extern const char *const sim_decode_router_names[];

// Fills *c with the defaults of design.md §7.
void sim_config_default(sim_config *c);
// Loads a scenario file over the defaults. Errors (KVF_EPARSE/KVF_EINVAL/KVF_ENOENT) name
// file:line and the key: unknown key, wrong type, negative count, missing model file.
kvf_status sim_config_load(sim_config *c, const char *path, kvf_err *err);
// Applies one override "a.b.c=value" (the same keys as the file). KVF_EINVAL names the key.
kvf_status sim_config_set(sim_config *c, const char *assignment, kvf_err *err);
// Checks cross-key consistency and that model/hardware/profile files exist.
kvf_status sim_config_validate(const sim_config *c, kvf_err *err);
// Resolves a path from the scenario against c->dir (absolute paths unchanged). False, with out
// empty, when the result does not fit n bytes (a cut path could name another file).
bool sim_config_resolve(const sim_config *c, const char *p, char *out, size_t n);
// The fully resolved scenario (design.md §10 `config`): a mapping with the scenario file's keys,
// every key the loader accepts with its value (paths made absolute, so it runs the same from
// any folder). Loading it as a scenario gives the same configuration. New reference.
struct json_t *sim_config_to_json(const sim_config *c);
// The same as YAML block text (malloc'd; NULL when out of memory).
char *sim_config_to_yaml(const sim_config *c);
// Files named by the scenario, resolved against c->dir: model (a bare name is
// <dir>/models/NAME.yaml), hardware (<dir>/models/hardware/NAME.yaml), profile (a path). A value
// with a '/' or ending in .yaml/.yml is a path (relative ones against c->dir). Pass the result
// to mdl_model_load / mdl_hardware_load / mdl_calibrated_create, so that validation and the
// run look at the same file.
void sim_config_model_path(const sim_config *c, char *out, size_t n);
void sim_config_hardware_path(const sim_config *c, char *out, size_t n);
// The hardware file of a pool: its cluster.<pool>.hardware, else the scenario's.
void sim_config_pool_hardware_path(const sim_config *c, const sim_pool_cfg *p, char *out, size_t n);
void sim_config_profile_path(const sim_config *c, char *out, size_t n);
// Line where key (dotted) was set: > 0 a line of c->path, -1 set by --set, 0 never set (the
// default). A key not recorded itself answers with its nearest recorded parent section's line.
int sim_config_key_line(const sim_config *c, const char *key);
// True when key itself (not only a section above it) was set by the file or a --set.
bool sim_config_key_given(const sim_config *c, const char *key);
// Writes the place of a key for an error message into out: "FILE:LINE: key 'KEY'",
// "--set KEY", "FILE: key 'KEY' (default)" or "key 'KEY' (default)". Callers append ": what".
void sim_config_where(const sim_config *c, const char *key, char *out, size_t n);

// The outcome of a run, the figures of summary.json in typed form.
typedef struct sim_summary sim_summary;

// Measured step durations to replay (`kvfleet validate`'s scheduling fidelity): each served
// step as the batch the step model is asked about (decodes are the 1-token sequences) and the
// wall time it took. The run's step model answers a batch with the duration of the served
// step of the same shape (decodes, prefill chunks and tokens equal; nearest total context
// within 2 % + 16 tokens a sequence); a batch no served step matches gets the scenario's step
// model times the served/predicted median ratio of its kind. The stepper counts into matched
// and fallback.
typedef struct sim_replay_step {
    const mdl_seq *seqs;   // decodes and prefill chunks of the step
    uint32_t n;
    int64_t ns;   // measured duration
} sim_replay_step;
typedef struct sim_step_replay {
    const sim_replay_step *steps;
    size_t n;
    uint64_t matched, fallback;   // filled by the run
    FILE *misses;                 // optional: one line per step answered by the fallback
} sim_step_replay;

typedef struct sim_run_opts {
    const char *out_dir;          // NULL: no files written
    bool quiet;                   // no progress bar
    bool write_db;                // results.db (default true when out_dir)
    const char *engine_backend;   // "cpu"/"cuda": engine in the loop, NULL = off
    const char *timeline_path;    // Chrome trace JSON of batch steps, NULL = off
    double timeline_from_s, timeline_to_s;
    volatile int *interrupt;   // set non-zero (e.g. by SIGINT) to stop early
    bool router_check;         // min-load routers assert their index against a scan (tests)
    bool decode_single;        // no runs of decode steps in one event (tests compare)
    bool run_whole;            // runs of decode steps costed whole when formed, not in pages
                               // (tests compare)
    bool decode_listed;        // decode steps list every running sequence (the O(batch)
                               // reference path) instead of running sums; tests compare
    bool keep_blocks;          // requests keep their block ids even where nothing reads them
                               // (tests compare)
    sim_step_replay *replay;   // step durations measured on the engine, NULL = off
    double step_scale;         // > 0: every step duration multiplied by this (noise bands)
} sim_run_opts;

// The i-th numeric scenario key (0-based) with its allowed range in the file's unit (lo
// excluded when *lo_open) and whether it must be whole; false past the last. For tests that
// walk every key.
bool sim_config_key_info(size_t i, const char **key, double *lo, double *hi, bool *integer,
                         bool *lo_open);

// ---- result directories (sim_run.c) ----------------------------------------------------------
// A run never writes into its result directory DIR: it writes DIR.tmp.<pid>.kvfleet beside it
// and renames that into place when everything is written, so DIR holds a complete result or
// the previous one, never a mix. DIR.lock (flock, released by the kernel when the process
// dies, SIGKILL included; opened without following links, refused unless a plain file) keeps
// two runs apart; whoever takes it removes what a killed run left (DIR.tmp.<pid>.kvfleet,
// DIR.old.<pid>.kvfleet: only names of that form, never a user's DIR.old.backup). An existing
// non-empty DIR is kept unless force; an interrupted run over one must abort, not commit.
typedef struct sim_outdir {
    char final[SIM_PATH_MAX];
    char tmp[SIM_PATH_MAX + 40];
    char lock[SIM_PATH_MAX + 8];
    int lock_fd;       // -1 = not held
    bool had_result;   // DIR held a non-empty result when the lock was taken
} sim_outdir;
// Takes the lock, checks DIR, clears stale leftovers and creates the temporary directory.
// KVF_EINVAL (exit 2) when DIR holds a result and !force or another run holds the lock.
kvf_status sim_outdir_begin(sim_outdir *d, const char *dir, bool force, kvf_err *err);
// Renames the temporary directory to DIR (replacing an old one) and releases the lock.
kvf_status sim_outdir_commit(sim_outdir *d, kvf_err *err);
// Removes the temporary directory and releases the lock (a failed run leaves DIR as it was).
void sim_outdir_abort(sim_outdir *d);
// KVF_EINVAL naming the input when path (an input: the scenario, a trace, a model file; NULL
// or "" is fine) lies inside d->final, the directory the commit would replace.
kvf_status sim_outdir_check_input(const sim_outdir *d, const char *what, const char *path,
                                  kvf_err *err);
// KVF_EINVAL naming the output when path (a file the run writes beside its result, e.g.
// --trace-out) lies inside d->final, which the commit replaces whole. NULL or "" is fine.
kvf_status sim_outdir_check_output(const sim_outdir *d, const char *what, const char *path,
                                   kvf_err *err);
// KVF_EINVAL when path exists and is not a regular file (a FIFO, a device, a directory): what
// names it in the message ("--trace-out"). Missing is fine.
kvf_status sim_path_check_file(const char *what, const char *path, kvf_err *err);
// True when a and b both exist and are one file (device and inode).
bool sim_path_same_file(const char *a, const char *b);
enum {
    SIM_INPUTS_MAX = 12
};   // files one run reads: scenario, trace, model, hardware (x4),
     // profile, fit
// The files a run of c reads, resolved as the run resolves them, into path[0..n) with what
// each is in what[]; returns n. max >= SIM_INPUTS_MAX.
int sim_config_inputs(const sim_config *c, char (*path)[SIM_PATH_MAX], const char **what, int max);
// sim_outdir_check_input over every file a run of c reads.
kvf_status sim_outdir_check_config(const sim_outdir *d, const sim_config *c, kvf_err *err);
// KVF_EINVAL naming opt when the output file out is a symbolic link, a special file or one of
// the files a run of c reads (device and inode). out NULL or "": KVF_OK.
kvf_status sim_config_check_output(const sim_config *c, const char *opt, const char *out,
                                   kvf_err *err);
// Takes an exclusive flock on path (created if needed) without waiting: KVF_EINVAL naming
// path when another process holds it. *fd gets the descriptor to close to release it.
kvf_status sim_lock_file(const char *path, int *fd, kvf_err *err);
// Removes a directory tree (missing is fine).
void sim_remove_tree(const char *path);

// Runs the scenario. On success *summary_json holds the summary (jansson json_t *, caller
// decrefs) and, with out_dir, summary.json and results.db are written there.
kvf_status sim_run(const sim_config *c, const sim_run_opts *o, void **summary_json, kvf_err *err);

#endif
