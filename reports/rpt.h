// reports/rpt.h -- results database (SQLite), economics, and the report writer.
//
// The database holds the tables of design.md §5: run(key, value), request(...),
// timeseries(t_s, pool, instance, metric, value), summary(key, value). Rows are written in
// transactions of many rows; rpt_db_close commits what is pending, so an interrupted run
// leaves a readable database (the caller sets run.status = interrupted first).
#ifndef RPT_H
#define RPT_H

#include <stdio.h>

#include "kvf.h"

typedef struct rpt_db rpt_db;

// Creates (replacing) the database at path with the schema. KVF_ERUN with SQLite's message.
kvf_status rpt_db_create(rpt_db **out, const char *path, kvf_err *err);
// Commits pending rows and closes. Accepts NULL.
kvf_status rpt_db_close(rpt_db *db, kvf_err *err);
// Commits pending rows now (keeps the database open).
kvf_status rpt_db_flush(rpt_db *db, kvf_err *err);
// Upserts run(key, value).
kvf_status rpt_db_run_set(rpt_db *db, const char *key, const char *value, kvf_err *err);
// Upserts summary(key, value); key is a dotted path into summary.json ("ttft_ms.p90").
// NaN is stored as NULL (also in request and timeseries rows).
kvf_status rpt_db_summary_set(rpt_db *db, const char *key, double value, kvf_err *err);
kvf_status rpt_db_summary_set_text(rpt_db *db, const char *key, const char *value, kvf_err *err);

typedef struct rpt_request_row {
    uint64_t id;
    const char *cls;   // class name
    uint64_t session;
    double arrival_s;
    uint32_t input_tokens;
    uint32_t cached_tokens;     // prompt tokens served from cache (hit)
    uint32_t output_tokens;     // tokens produced
    int32_t vision_instance;    // -1 = none
    int32_t prefill_instance;   // -1 = none (rejected before prefill)
    int32_t decode_instance;    // -1 = none
    double ttft_s;              // NaN when no first token
    double tpot_s;              // NaN when < 2 output tokens
    double e2e_s;               // NaN when not completed
    double queue_s;             // time waiting in queues (prefill + decode admission)
    const char *status;         // "completed", "rejected:<reason>", "unfinished"
    // extensions (extra columns)
    uint32_t hit_hbm, hit_dram, hit_ssd;   // cached tokens by tier
    uint32_t preemptions;
} rpt_request_row;

kvf_status rpt_db_request(rpt_db *db, const rpt_request_row *r, kvf_err *err);
// The database's own copy of text t, kept until it is closed (t itself when its table of texts
// is full): a row naming a text by that copy is held without a string compare.
const char *rpt_db_text(rpt_db *db, const char *t);
// pool: "prefill", "decode", "vision", "cluster", "kv"; instance -1 for pool-wide figures.
kvf_status rpt_db_timeseries(rpt_db *db, double t_s, const char *pool, int32_t instance,
                             const char *metric, double value, kvf_err *err);
// Raw handle for modules that add their own tables (sqlite3 *); every row held is written
// first, and the handle is the caller's until the next request or time-series row.
void *rpt_db_handle(rpt_db *db);
// Request and time-series rows written by a writer thread, a batch at a time, while the caller
// goes on (the default), or in the call (off): the same tables either way.
void rpt_db_background(rpt_db *db, bool on);

// ---- economics (reports/rpt_econ.c) -----------------------------------------------------
// Money figures of a run from the scenario's `economics` keys and the run's GPU-hours and
// token counts. Model, in short:
//   a day        the run's rate of traffic is placed in a day: trace t = 0 falls at
//                trace_start_utc, and each hour of the day carries day_profile[h] (shares, default
//                flat) of the day's traffic. The day's tokens are the run's tokens x 86400 / E,
//                E = integral over the run of d(t) (d = 24 x the hour's share, mean 1; E = the
//                run's length for a flat profile), and the off-peak share of the day's tokens is
//                the profile's share inside the window -- never where a short run happens to
//                fall. Without day_profile, a run of a day or more keeps its own schedule: its
//                requests are billed peak/off-peak by arrival and scaled by 86400 / run length.
//                Costs: the fleet's GPU-hours per run second x 86400 (provisioned all day).
//   GPU part     rent: gpu_hour_usd per GPU-hour; own: capex/(depreciation_years*8760 h)
//   power part   own only: W/1000 * pue * kwh_usd per GPU-hour (rent includes it), W the run's
//                board power + host_w_per_gpu (else power_w_per_gpu)
//   network      network_usd_per_gpu_hour per GPU-hour
//   SSD          bounded store: its capacity. Unbounded store: the store the retention needs in
//                steady state, sum over classes of (class write rate x class retention), the
//                class write rate being the store's write rate split by the class's cache-miss
//                input tokens (the blocks written are the computed ones); never less than the
//                run's peak; a class kept forever is billed at its share of the peak. Billed
//                TB x ssd_tb_month_usd / (365/12) per day.
//   DRAM         TB provisioned * dram_tb_month_usd / (365/12) per day
//   revenue      (1 - free_share) * sum over class of (hit*p_hit + miss*p_miss + out*p_out) / 1e6
//                x (1 - s_off + s_off * offpeak.price_factor), s_off the day's off-peak share
//   payback      capex_per_gpu_usd * GPUs / (revenue/day - cash opex/day), cash opex = power
//                (always from the power keys, as if owned) + SSD + DRAM + network; +inf when the
//                denominator is not positive (JSON null)
//   break-even   price factor: cost / revenue. Output price with input prices kept: (cost -
//                input revenue) / billable output Mtok, clamped at 0 with break_even_note saying
//                that input revenue alone covers the cost.
//   cost/Mtok    GPU-proportional parts split by GPU-hours: vision + prefill -> input, decode ->
//                output, colocated by colocated_input_share (else by computed tokens: miss
//                input vs output); SSD and DRAM -> input. Divided by all input (hit + miss) or
//                output tokens, billed or free.
//   sensitivity  hit rate h: every class gets hit rate h; prefill GPU-hours (and GPUs) scale by
//                w(h)/w(h0), w(h) = 1 - s*h, s the share of prefill FLOPs a unit of hit rate
//                saves, from the run's own prefill FLOPs (1 - actual/no_reuse) / h0; only a run
//                without FLOPs falls back to s = 1 - hit_cost_ratio; revenue re-billed.
//                Utilisation u (GPU-hour weighted busy share): same fleet, traffic scaled by
//                u/u0, up to the point where the busiest pool is fully busy (capacity; rows
//                beyond it are not drawn). Price: all prices times a factor.
//   per GW       copies of this cluster filling a gigawatt: 1e9 / (W * pue) GPUs (W as above),
//                every per-day figure scaled by that over the cluster's GPUs (JSON per_gigawatt)
//   units        margin is a fraction in JSON and the database; the report shows it in percent
//                in every table and chart.

struct json_t;   // jansson's object type

#define RPT_ECON_MAX_CLASSES 16
#define RPT_ECON_NAME_LEN 32
#define RPT_ECON_MAX_SENS 32

typedef enum rpt_econ_pool {
    RPT_POOL_VISION = 0,
    RPT_POOL_PREFILL,
    RPT_POOL_DECODE,
    RPT_POOL_COLOCATED,   // mixed prefill+decode instances (colocated mode)
    RPT_POOL_N
} rpt_econ_pool;

typedef enum rpt_econ_part {
    RPT_COST_GPU = 0,   // rent, or depreciation of capex
    RPT_COST_POWER,     // electricity incl. PUE (own mode)
    RPT_COST_SSD,
    RPT_COST_DRAM,
    RPT_COST_NETWORK,
    RPT_COST_N
} rpt_econ_part;

typedef struct rpt_econ_prices {
    double input_hit;    // USD per million cache-hit input tokens
    double input_miss;   // USD per million cache-miss input tokens
    double output;       // USD per million output tokens
} rpt_econ_prices;

typedef struct rpt_econ_class_prices {
    char cls[RPT_ECON_NAME_LEN];   // traffic class name
    rpt_econ_prices p;             // NaN field = use the default price
} rpt_econ_class_prices;

typedef struct rpt_econ_config {
    bool own;                    // cost_model: false = rent, true = own (capex + power)
    double gpu_hour_usd;         // rent per GPU-hour (USD)
    double capex_per_gpu_usd;    // purchase price per GPU, all-in (USD)
    double depreciation_years;   // straight-line depreciation period (years)
    double power_w_per_gpu;      // wall power per GPU incl. host share (W), when the run gives
                                 // none (a hardware file without power_w)
    double host_w_per_gpu;       // host, network and cooling-fan share per GPU (W) added to the
                                 // run's board power
    double kwh_usd;              // electricity price (USD/kWh)
    double pue;                  // power usage effectiveness (>= 1)
    double ssd_tb_month_usd;     // KV store SSD (USD per TB-month)
    double dram_tb_month_usd;    // KV store DRAM (USD per TB-month)
    double network_usd_per_gpu_hour;   // fabric/egress per GPU-hour (USD)
    bool offpeak_on;                   // false: no off-peak window
    double offpeak_start_s;            // window start, seconds after 00:00 UTC
    double offpeak_end_s;              // window end (may be < start: wraps midnight)
    double offpeak_price_factor;       // price multiplier inside the window
    rpt_econ_prices prices;            // default prices
    rpt_econ_class_prices cls[RPT_ECON_MAX_CLASSES];   // per-class overrides
    int n_cls;
    double free_share;              // fraction of traffic not billed, [0, 1]
    double trace_start_s;           // time of day (s after 00:00 UTC) at trace t = 0
    double hit_cost_ratio;          // cost of a hit token relative to a computed one; used only
                                    // when the run reports no prefill FLOPs (sensitivity)
    double day_profile[24];         // share of a day's traffic in each UTC hour (normalised)
    bool day_profile_set;           // false: flat (or the run's own schedule when >= 1 day)
    double day_profile_given[24];   // the shares as the scenario gave them (written back as such)
    double gpu_hour_range[2];       // all-in USD per GPU-hour, low and high (0, 0 = none): the
                                    // cost and margin are also given at both ends, as if rented
    // per pool (RPT_POOL_*): its own rent and purchase price (pools of different hardware),
    // < 0 = the scenario-wide gpu_hour_usd / capex_per_gpu_usd
    double pool_gpu_hour_usd[RPT_POOL_N];
    double pool_capex_usd[RPT_POOL_N];
} rpt_econ_config;

// Scenario keys below `economics.` (rpt_econ_config_set), type and default:
//   cost_model                rent | own                          rent
//   gpu_hour_usd              number >= 0 (null selects own)      2.0
//   capex_per_gpu_usd         number >= 0                         30000
//   depreciation_years        number > 0                          4
//   power_w_per_gpu           number >= 0                         1000
//   host_w_per_gpu            number in [0, 1e5]                  0
//   kwh_usd                   number >= 0                         0.08
//   pue                       number in [1, 10]                   1.3
//   ssd_tb_month_usd          number >= 0                         10
//   dram_tb_month_usd         number >= 0                         0
//   network_usd_per_gpu_hour  number >= 0                         0
//   offpeak                   mapping, or null (no window)        {16:30, 00:30, 0.5}
//   offpeak.start_utc         "HH:MM" or "HH:MM:SS", 00:00-24:00  "16:30"
//   offpeak.end_utc           same; before start = wraps midnight "00:30"
//   offpeak.price_factor      number >= 0                         0.5
//   prices_per_mtok.input_hit / .input_miss / .output  USD >= 0   0.028 / 0.28 / 0.42
//   prices_per_mtok.CLASS.input_hit|input_miss|output  per-class override (<= 16 classes)
//   free_share                number in [0, 1]                    0
//   trace_start_utc           "HH:MM"                             "00:00"
//   day_profile               24 numbers >= 0, not all 0          flat
//   gpu_hour_usd_range        [low, high], 0 <= low <= high       none
//   hit_cost_ratio            number in [0, 1]                    0.05 (runs without FLOPs)
//   pools.POOL.gpu_hour_usd   number >= 0, POOL vision|prefill|decode|colocated: that pool's
//   pools.POOL.capex_per_gpu_usd   GPUs at their own price        the scenario-wide price
// Fills *c with the defaults above.
void rpt_econ_config_default(rpt_econ_config *c);
// Sets one key below `economics.` from its text, e.g. ("offpeak.start_utc", "16:30"),
// ("prices_per_mtok.output", "0.42"), ("prices_per_mtok.agent.output", "0.5"),
// ("cost_model", "own"), ("offpeak", "null"). KVF_EINVAL naming the key for an unknown key
// or a bad value (the caller prefixes file:line).
kvf_status rpt_econ_config_set(rpt_econ_config *c, const char *key, const char *value,
                               kvf_err *err);
// Adds every key of a run's resolved scenario (summary.json "config", or any mapping o below
// dotted prefix) to out as dotted key -> text (lists as compact flow text), so configurations
// compare key by key (compare, sweep).
void rpt_config_keys(struct json_t *out, struct json_t *o, const char *prefix);
// The configuration as the mapping below `economics.` of a scenario (every key with its value;
// rpt_econ_config_set of each gives *c back). New reference.
struct json_t *rpt_econ_config_to_json(const rpt_econ_config *c);
// Whether the pool (RPT_POOL_*) has a price of its own (economics.pools.POOL.*).
bool rpt_econ_pool_priced(const rpt_econ_config *c, int pool);
// Whether simulated time t_s (seconds from the trace start) falls in the off-peak window.
bool rpt_econ_is_offpeak(const rpt_econ_config *c, double t_s);

typedef struct rpt_econ_class_usage {
    char cls[RPT_ECON_NAME_LEN];   // class name
    double hit[2];                 // cache-hit input tokens, [0] peak, [1] off-peak
    double miss[2];                // cache-miss input tokens
    double output[2];              // output tokens
    double retention_s;            // SSD retention of the class (s); <= 0 = kept until evicted
    bool write_known;              // write_Bps was counted by the run (else: split by misses)
    double write_Bps;              // the class's bytes written to the store per run second
    bool steady_known;             // the run outlasted the retention and measured the store:
    double steady_tb;              // the class's mean occupancy from then on (TB)
} rpt_econ_class_usage;

typedef struct rpt_econ_input {
    double simulated_s;               // length of the period the figures cover (s)
    double gpu_hours[RPT_POOL_N];     // GPU-hours per pool over the period
    double gpus[RPT_POOL_N];          // GPUs per pool (peak count; capex and payback use it)
    double utilization[RPT_POOL_N];   // busy fraction per pool; NaN = unknown
    double colocated_input_share;     // share of colocated GPU time that is prefill; NaN = tokens
    double ssd_tb;          // SSD provisioned for the KV store (TB; peak stored if unbounded)
    double dram_tb;         // DRAM for the KV tier (TB)
    bool ssd_unbounded;     // the store has no capacity: bill the store retention needs
    double ssd_write_Bps;   // bytes written to the store per run second
    double prefill_flops;   // prefill FLOPs spent (with reuse); 0 = unknown
    double prefill_flops_no_reuse;   // the same prompts computed without any reuse
    double board_w_per_gpu;          // the run's mean board power per GPU (W: idle plus load by
                                     // each instance's busy share, hardware power_w); NaN = unknown
    rpt_econ_class_usage cls[RPT_ECON_MAX_CLASSES];
    int n_cls;   // classes beyond the limit are added to the last slot ("other")
} rpt_econ_input;

// Zeroes *in (utilisations and colocated_input_share to NaN).
void rpt_econ_input_init(rpt_econ_input *in);
// Adds one request's tokens to its class, in the peak or off-peak bucket by its arrival time.
void rpt_econ_input_add(rpt_econ_input *in, const rpt_econ_config *c, const char *cls,
                        double arrival_s, double hit_tokens, double miss_tokens,
                        double output_tokens);
// The slot rpt_econ_input_add adds class cls to (taken the first time the class is seen), and
// the add itself on a slot: a caller with a few classes looks each up once. A class keeps its
// slot: a name is only ever matched to the first slot that has it, and the last slot, renamed
// "other" when the classes overflow, takes every class not found before it either way.
int rpt_econ_input_class(rpt_econ_input *in, const char *cls);
void rpt_econ_input_add_to(rpt_econ_input *in, const rpt_econ_config *c, int k, double arrival_s,
                           double hit_tokens, double miss_tokens, double output_tokens);

typedef struct rpt_econ_sens_row {
    double x;   // the varied input (hit rate, utilisation, or price factor)
    double cost_per_day_usd;
    double revenue_per_day_usd;
    double margin;                 // (revenue - cost) / revenue; NaN when no revenue
    double margin_fixed_revenue;   // hit-rate table: margin with revenue held at the actual
    double payback_days;           // +inf when never
    double prefill_gpus;           // hit-rate table: re-derived prefill (+colocated) GPUs
    bool capped;                   // utilisation table: the row at capacity (busiest pool full)
} rpt_econ_sens_row;

typedef struct rpt_econ_sens {
    rpt_econ_sens_row row[RPT_ECON_MAX_SENS];
    int n;
} rpt_econ_sens;

typedef struct rpt_econ_result {
    double power_w_per_gpu;   // the power per GPU the power cost and per-GW figures use (W,
                              // before PUE): the run's board power + host share, else the
                              // configured power_w_per_gpu
    bool power_from_run;      // it is the run's
    double days;              // simulated_s / 86400
    double gpus;              // all GPUs
    double gpu_hours;         // over the period
    double gpu_hours_per_day;
    double cost_per_day_by_part[RPT_COST_N];        // USD/day
    double cost_per_gpu_hour_by_part[RPT_COST_N];   // USD per GPU-hour (all-in, by part)
    double cost_per_day_usd;
    double cost_per_gpu_hour_usd;
    double revenue_per_day_usd;
    double revenue_input_per_day_usd;
    double revenue_output_per_day_usd;
    double revenue_per_day_by_class[RPT_ECON_MAX_CLASSES];   // same order as input cls
    double cost_usd;                                         // over the period
    double revenue_usd;                                      // over the period
    double margin;                                           // NaN when no revenue
    double input_cost_share;   // share of cost attributed to input tokens
    double cost_per_mtok_input_usd;
    double cost_per_mtok_output_usd;
    double gpu_cost_per_day_by_pool[RPT_POOL_N];   // the GPU part (rent, or depreciation) by
                                                   // pool, each at its own price (USD/day)
    double capex_usd;   // capex_per_gpu_usd * gpus (each pool at its own price)
    double cash_opex_per_day_usd;
    double payback_days;                     // +inf when never
    double break_even_price_factor;          // prices x this -> margin 0
    double break_even_output_usd_per_mtok;   // output price (input prices kept) -> margin 0
    double hit_rate;                         // hit / (hit + miss), all classes
    double utilization;                      // GPU-hour weighted; NaN when unknown
    double input_tokens_per_day, output_tokens_per_day;
    const char *day_basis;   // "day_profile", "flat day profile", "the run's own schedule"
    double offpeak_share;    // share of the day's tokens billed off-peak
    double day_scale;        // the day's tokens / the run's tokens
    double ssd_tb_billed;    // SSD billed (TB)
    const char *ssd_basis;   // "capacity", "retention steady state", "peak stored"
    double ssd_tb_by_class[RPT_ECON_MAX_CLASSES];   // steady-state store by class (TB); NaN: none
    double hit_saving;             // s: share of prefill work saved per unit of hit rate
    const char *hit_basis;         // "prefill FLOPs of this run" or "hit_cost_ratio"
    double capacity_utilization;   // fleet utilisation at which the busiest pool is fully busy
    char break_even_note[200];     // why the output break-even is clamped or missing; "" if not
    double range_cost_per_day_usd[2];   // at gpu_hour_range low/high (NaN without a range)
    double range_margin[2];
    rpt_econ_sens by_hit_rate;
    rpt_econ_sens by_utilization;   // empty when utilisation is unknown
    rpt_econ_sens by_price;
} rpt_econ_result;

// E of the model above for a run of simulated_s from trace_start_utc: its length weighted by
// 24 x the day profile's share of each hour it covers (the length itself when flat). 0 when
// every hour the run covers has share 0: a day of such a run's traffic is undefined.
double rpt_econ_day_weight_s(const rpt_econ_config *c, double simulated_s);

// Computes *out. KVF_EINVAL when simulated_s <= 0 or an input is negative or not finite.
kvf_status rpt_econ_compute(const rpt_econ_config *c, const rpt_econ_input *in,
                            rpt_econ_result *out, kvf_err *err);
// The "economics" object of summary.json (a jansson json_t *, new reference): the §5 keys
// cost_usd, revenue_usd, margin, cost_per_gpu_hour_usd, cost_per_mtok_usd{input,output},
// payback_days, plus per-day figures, parts, break-even, and the sensitivity tables.
// Non-finite numbers become null.
struct json_t *rpt_econ_to_json(const rpt_econ_config *c, const rpt_econ_result *r);
// Writes summary rows "economics.*" and the table econ_sensitivity(kind, x, cost_per_day_usd,
// revenue_per_day_usd, margin, margin_fixed_revenue, payback_days, prefill_gpus).
kvf_status rpt_econ_write_db(rpt_db *db, const rpt_econ_result *r, kvf_err *err);

// ---- progress of long commands (reports/rpt_progress.c) ----------------------------------
// On stderr. On a terminal: "label [####....]  42.0% what  elapsed  ETA", redrawn in place at
// most ten times a second. Anywhere else: one line every interval_s seconds of wall-clock time
// (rpt_progress_interval_s: KVF_PROGRESS_S, default 10, 0 = no lines), the first interval_s
// after the start, e.g.
//   run: 12.5% done, simulated 3.00 h of 24.0 h, 45210 arrivals, elapsed 10.0 s, 2.41 M
//   events/s, ETA 1.17 min
// Two kinds of work: counted (rpt_progress_init + rpt_progress_update: points of a sweep) and
// simulated (rpt_progress_init_sim + rpt_progress_sim: the fraction is simulated time over the
// span when the span is known, else arrivals over the expected arrivals; clamped to 100 %,
// and a count past its expected total is shown as a count). Caller-owned, no allocation; a
// zeroed struct is disabled. Display only: nothing here reaches a result.
typedef struct rpt_progress_state {
    double sim_s;      // simulated time reached (s from the trace start)
    double arrived;    // requests arrived so far
    double finished;   // requests completed or rejected so far
    double events;     // events handled so far
} rpt_progress_state;

typedef struct rpt_progress {
    const char *label;         // borrowed, shown first
    double total;              // counted: units of work (points)
    bool sim;                  // simulated kind (rpt_progress_init_sim)
    double span_s;             // simulated: the span the run covers (s); 0 = unknown
    double arrivals;           // simulated: expected arrivals; 0 = unknown
    rpt_progress_state last;   // simulated: the latest state given
    double interval_s;         // seconds between lines off a terminal; 0 = none
    int64_t start_ns;          // wall clock at init (display only)
    int64_t last_ns;           // last draw (0 = none yet)
    int64_t rate_ns;           // events/s is measured since this draw ...
    double rate_events;        // ... and this many events
    bool tty;                  // stderr is a terminal: the bar; else lines
    bool enabled;              // drawing at all (tty, or interval_s > 0), and not done
    bool drawn;                // something was drawn
    int lines;                 // lines printed off a terminal
} rpt_progress;

// Seconds between progress lines off a terminal: KVF_PROGRESS_S (>= 0), else 10.
double rpt_progress_interval_s(void);
// Counted work of total units (<= 0: unknown, counts shown alone).
void rpt_progress_init(rpt_progress *p, const char *label, double total);
// A simulation covering span_s simulated seconds (<= 0: unknown) with about arrivals requests
// (<= 0: unknown). Prefer the span: it is what a multi-day run is measured by.
void rpt_progress_init_sim(rpt_progress *p, const char *label, double span_s, double arrivals);
// Lines every interval_s (>= 0; 0 = none) off a terminal, instead of KVF_PROGRESS_S.
void rpt_progress_set_interval(rpt_progress *p, double interval_s);
// Nothing more is drawn (-q). Accepts NULL.
void rpt_progress_disable(rpt_progress *p);
// Counted: done units finished (rate-limited; cheap to call often). Accepts NULL.
void rpt_progress_update(rpt_progress *p, double done);
// Simulated: the run's state now (rate-limited: one clock read per call; call it every few
// thousand events). p from rpt_progress_init_sim. Accepts NULL p.
void rpt_progress_sim(rpt_progress *p, const rpt_progress_state *st);
// Ends: on a terminal draws the end and ends the line; off a terminal prints a last line
// when it printed any. Accepts NULL.
void rpt_progress_done(rpt_progress *p);
// Simulated: rpt_progress_done with the run's final state (the last line says where the run
// ended, not where the last rate-limited update was). Accepts NULL p.
void rpt_progress_sim_done(rpt_progress *p, const rpt_progress_state *st);

// Command line: `kvfleet report DIR [--format html|md]`, argv[0] = "report".
int rpt_report_cli_main(int argc, char **argv);
// Writes report.html (self-contained, SVG charts inlined) and/or report.md (linking
// report_files/*.svg) into dir from dir/summary.json, dir/results.db (optional: without it the
// page has no run table or charts from the tables) and dir/validation.json (optional). Chart
// data go to dir/report_files/*.dat with the gnuplot script charts.gp; gnuplot draws them when
// on PATH and KVF_NO_GNUPLOT is unset or "0", otherwise the pages say why and keep the data.
// Headline and economics cells carry data-key (summary.json path) and data-value (exact).
// KVF_ENOENT without summary.json, KVF_EPARSE (file:line) for bad JSON, KVF_EIO/KVF_ERUN.
// The page opens with the answer (#answer: saturation verdict, cost per million tokens,
// margin, SLO attainment, GPUs per pool, each figure a data-key/data-value span), then the
// charts, the economics and validation tables, the inputs, and every figure last. The pages
// name the result directory as rpt_report_final_dir(dir) gives it.
kvf_status rpt_report_write(const char *dir, bool html, bool md, kvf_err *err);
// As rpt_report_write, the pages naming final_dir as the result directory (a run writes into
// a temporary directory renamed to final_dir afterwards). final_dir NULL or "": derived from
// dir by rpt_report_final_dir. dir non-empty.
kvf_status rpt_report_write_as(const char *dir, const char *final_dir, bool html, bool md,
                               kvf_err *err);
// The final name of a results directory written under a temporary one: "out/ref.tmp.28517"
// -> "out/ref" (the ".tmp.<pid>" suffix a run's writer adds); other names unchanged.
void rpt_report_final_dir(const char *dir, char *out, size_t n);
// `kvfleet compare DIR... [--json] [--all] [--html FILE] [--baseline NAME]`, argv[0] =
// "compare". --baseline: a 1-based number, a directory as given, or its last part.
int rpt_compare_cli_main(int argc, char **argv);
// Writes the comparison of the runs in dirs (each DIR/summary.json, or a .json path) to out:
// a text table with differences in percent against dirs[0], or with json a list of points,
// each the run's summary object plus "dir", "varied" (run-table keys that differ between the
// runs) and "diff_pct" (dotted key -> percent against the first). all: every figure.
kvf_status rpt_compare_write(FILE *out, const char *const *dirs, int n, bool json, bool all,
                             kvf_err *err);
// As rpt_compare_write, differences against dirs[baseline] (0 <= baseline < n) instead of the
// first. Text too long for a column (a break-even sentence) is marked [k] in its cell and
// printed whole below the table.
kvf_status rpt_compare_write_base(FILE *out, const char *const *dirs, int n, bool json, bool all,
                                  int baseline, kvf_err *err);
// Writes the comparison as an HTML page at path (rpt_points_html): one row per run, the
// run-table keys that differ between the runs, and the cost / SLO attainment frontier chart.
kvf_status rpt_compare_html(const char *path, const char *const *dirs, int n, kvf_err *err);
// As rpt_compare_html with a column of differences against dirs[baseline] (0 <= baseline < n).
kvf_status rpt_compare_page(const char *path, const char *const *dirs, int n, int baseline,
                            kvf_err *err);

// ---- the assessment page (reports/rpt_assess.c) -------------------------------------------
// Writes assess.html at path from the object `kvfleet assess` writes to assess.json: the
// answer first (#answer: #hl-saturation the reference run's verdict, #hl-hit the hit rate
// with a shared store, #hl-ideal the ideal hit rate, #hl-cost and #hl-busy the cost per
// million tokens with and without the store; each figure a data-key (its assess.json path) /
// data-value span), then the store grid, the cost table and the ideal hit rate.
// KVF_EINVAL when assess is not an object, KVF_EIO naming path.
kvf_status rpt_assess_html(const char *path, const struct json_t *assess, kvf_err *err);
// Below this busy share of GPU time a reference run is "mostly idle": its cost per million
// tokens as provisioned bills an idle fleet.
#define RPT_ASSESS_IDLE_BUSY 0.25
// The warnings of an assessment (assess.json's "warnings", a new array of sentences): a run of
// the reference design busy less than RPT_ASSESS_IDLE_BUSY of its GPU time, with its idle
// share and its cost per output Mtok. rpt_assess_html shows assess's "warnings" under the
// verdict (#hl-warnings).
struct json_t *rpt_assess_warnings(const struct json_t *assess);

// ---- pages of several runs (reports/rpt_points.c) -----------------------------------------
// An HTML page of runs side by side (compare --html, a sweep's sweep.html) at path. It opens
// with the answer (#answer: #hl-cheapest the cheapest stable point, #hl-best-slo the highest
// SLO attainment among stable points, #hl-states the count of stable, backlogged or
// overloaded, and unfinished points; figures in data-key/data-value spans), then the chart of
// cost per day against SLO attainment (frontier through stable points only; nearby points
// share one label, so labels never overlap), drawn by gnuplot into <path stem>_files/ and
// inlined as SVG (the page says why when there is none), then a table with one row per point
// (#, run, the keys that tell the points apart, status -- the saturation verdict, or
// "unfinished: reason" --, with opts->diffs a column against the baseline, then the figures;
// cells carry data-key and data-value), and the text figures (break-even notes) whole.
// points: a JSON array of {"label": text, "keys": {key: text}, "summary": object or null,
// optional "status": "completed" or why not (e.g. "unfinished"), optional "reason": text}.
// A point without a summary, or with a status other than "completed", is unfinished.
typedef struct rpt_points_opts {
    bool diffs;     // a column of differences against the baseline
    int baseline;   // 0-based index of the baseline point
} rpt_points_opts;
kvf_status rpt_points_page(const char *path, const char *title, const struct json_t *points,
                           const rpt_points_opts *opts, kvf_err *err);
// rpt_points_page without differences (a sweep's page).
kvf_status rpt_points_html(const char *path, const char *title, const struct json_t *points,
                           kvf_err *err);

#endif
