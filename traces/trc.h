// traces/trc.h -- request traces: streaming readers for the public formats, the canonical
// kvfleet JSONL writer, the synthetic generator and trace statistics.
//
// Every reader yields the same trc_request. Readers stream: memory is constant in trace
// length (a rate rescale needs the mean rate first: a first pass parses the file once into a
// binary spool on disk, which the reader then replays; see trc_reader_open_pass).
// Block ids are chained prefix ids already mapped onto the simulator's block size
// (opt.block_tokens): equal id at position i means equal content of tokens [0, (i+1)*bt).
// Only full blocks get ids; a partial last block is never shared.
#ifndef TRC_H
#define TRC_H

#include "kvf.h"

// Input bounds: tokens of one request (prompt or output), and block ids of one record.
#define TRC_MAX_TOKENS 1e7
#define TRC_MAX_BLOCKS 1048576
// Arrivals and think times after time scaling or a rate rescale (s); past it a reader fails
// naming the field and the option (int64 ns holds 9.2e9 s).
#define TRC_MAX_TIME_S 9e9

typedef enum trc_format {
    TRC_FMT_AUTO = 0,
    TRC_FMT_MOONCAKE,   // {"timestamp": ms, "input_length", "output_length", "hash_ids"}
    TRC_FMT_AZURE,      // TIMESTAMP,ContextTokens,GeneratedTokens (2023 and 2024 schema)
    TRC_FMT_BURSTGPT,   // Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
    TRC_FMT_SESSIONS,   // agentic session JSONL (one session per line, closed loop)
    TRC_FMT_KVFLEET,    // canonical JSONL written by trc_writer
} trc_format;

typedef enum trc_class {
    TRC_CLASS_CHATBOT = 0,
    TRC_CLASS_AGENT,
    TRC_CLASS_CODING,
    TRC_CLASS_BATCH,
    TRC_CLASS_OTHER,
    TRC_CLASS_COUNT
} trc_class;

// Flags on a request.
#define TRC_F_FAILED 0x1u       // recorded as failed in the source trace (BurstGPT)
#define TRC_F_STRUCTURED 0x2u   // structured (constrained) output
#define TRC_F_FREE 0x4u         // not billed
#define TRC_F_RETURN                                                                               \
    0x8u   // first request of a session's returning visit (generator,
           // days mode): its prompt resends the session's history

// Bucketed timestamps (Mooncake's ~3 s buckets): replay as recorded or spread uniformly.
typedef enum trc_bucket_mode { TRC_BUCKET_AS_RECORDED = 0, TRC_BUCKET_SPREAD } trc_bucket_mode;

typedef struct trc_request {
    uint64_t id;              // 0-based position in the stream after filtering
    int64_t arrival_ns;       // arrival at the frontend, ns from trace start (open loop);
                              // for closed-loop turns (prev_id >= 0): the recorded time, used
                              // only when the previous turn's completion is unknown
    uint32_t input_tokens;    // prompt tokens (>= 1)
    uint32_t output_tokens;   // tokens to generate (>= 1)
    uint8_t cls;              // trc_class
    uint8_t flags;            // TRC_F_*
    uint16_t images;          // images attached (vision stage)
    uint64_t session;         // session id, 0 = none
    uint32_t turn;            // turn number within the session, 0-based
    int64_t prev_id;          // closed loop: id of the request this one waits for, -1 = none
    int64_t think_ns;         // closed loop: gap after prev_id completes before this arrives
    uint32_t n_blocks;        // number of entries in blocks
    const uint64_t *blocks;   // chained block ids, owned by the reader, valid until next call
} trc_request;

typedef struct trc_options {
    trc_format format;              // TRC_FMT_AUTO detects from content
    uint32_t block_tokens;          // simulator block size (default 64)
    uint32_t source_block_tokens;   // override of the trace's own block size, 0 = format default
    double time_scale;              // multiply inter-arrival gaps (default 1)
    double rate_rps;                // > 0: rescale arrivals to this mean rate
    double length_scale;            // multiply input/output lengths (>= 1 token), default 1
    int64_t limit_requests;         // > 0: stop after this many
    int64_t start_ns, end_ns;       // window on the original time axis, end 0 = none
    trc_bucket_mode bucket;         // for bucketed timestamps
    uint64_t seed;                  // for spreading and session starts
    bool skip_bad;                  // skip malformed lines (counted) instead of failing
    // sessions format: how sessions start
    double session_rate;      // > 0: Poisson session starts at this rate (per s)
    uint32_t session_users;   // > 0: N concurrent users, each starts the next session on finish
    uint8_t cache;            // TRC_CACHE_*: keep the parsed trace in a binary cache
} trc_options;
// The trace cache (trc_cache.c): a file trace parsed once is kept in binary in
// $XDG_CACHE_HOME/kvfleet (else ~/.cache/kvfleet), keyed by the trace's path, size, mtime,
// inode and the options its parse depends on; later opens replay it without parsing and give
// identical requests. Stale or corrupt files are ignored and rebuilt.
enum {
    TRC_CACHE_AUTO = 0,   // on when $KVFLEET_TRACE_CACHE is "1" or "on"
    TRC_CACHE_OFF,
    TRC_CACHE_ON
};
// Agentic sessions (TRC_FMT_SESSIONS), the choices made:
//  - stream order: sessions in file order, each session's requests together, ordered by
//    recorded time (parent and subagent requests interleaved); prev_id always names an
//    earlier request of the stream. Only open-loop requests (prev_id = -1) are in
//    non-decreasing arrival order; a closed-loop request's arrival_ns is its recorded time
//    from its session's start (an estimate for consumers that ignore prev_id).
//  - the first request of a session is open loop at the session start; every later request
//    waits for the previous request of its own agent (prev_id) plus think_ns (think_time, or
//    the recorded gap when absent); a subagent's first request waits for the parent request
//    listed just before it, so subagent and parent run concurrently.
//  - session starts: session_users = N > 0: sessions 0..N-1 start at 0 and session k >= N
//    waits (prev_id, think 0) for the last request of session k - N; otherwise Poisson starts
//    at session_rate (default 1/60 per s when 0), drawn from seed, in file order.
//  - session = 1-based session number in the file; turn = position within the session;
//    class agent; "local" block ids are hashed with the session number (never shared across
//    sessions), "global" ones are kept.
// time_scale / rate_rps scale think_ns as well as arrivals. The window, limit and skip_bad
// drop requests; a request whose prev_id was dropped becomes open loop.

// Id of sub-block j (0-based) of a source block with id `id`, when a trace's S-token blocks
// are split into S/B blocks of the simulator's B tokens: the high 61 bits
// kvf_hash64(kvf_hash64(id) + j / 8), the low 3 bits j % 8, so the sub-blocks of one source
// block share a group key (id & ~7) the KV store keeps in one bucket (sim_kv.h).
// Chained ids stay chained (id already names the whole prefix). When B is a multiple of S,
// a B-token block takes the id of the last S-token block it covers; when S == B ids pass
// unchanged. Only full B-token blocks inside input_tokens get ids.
uint64_t trc_block_sub_id(uint64_t id, uint32_t j);

// Fills *o with the defaults above.
void trc_options_default(trc_options *o);

typedef struct trc_reader trc_reader;

// Opens path for streaming. Fills *err with "path: ..." on a missing or unreadable file
// (KVF_ENOENT / KVF_EIO) or an undetectable format (KVF_EPARSE). Caller owns the reader.
kvf_status trc_reader_open(trc_reader **out, const char *path, const trc_options *opt,
                           kvf_err *err);
// What a first pass over a trace found, on its own time axis (before time_scale / rate_rps).
typedef struct trc_pass {
    uint64_t requests;   // requests the reader yields (after window, limit, skip_bad)
    double span_s;       // last arrival - first arrival
    double rate_rps;     // (requests - 1) / span_s, the trace's mean rate; 0 if undefined
} trc_pass;
// trc_reader_open that always makes the first pass and fills *pass (may be NULL): the text
// is parsed once, into a binary spool (or the cache) the reader then replays, so counting or
// measuring costs no second parse. trc_reader_open makes the same pass only for rate_rps > 0.
kvf_status trc_reader_open_pass(trc_reader **out, const char *path, const trc_options *opt,
                                trc_pass *pass, kvf_err *err);
// The reader's first pass, NULL when none was made.
const trc_pass *trc_reader_pass(const trc_reader *r);
// Reads the next request into *out. Returns 1 when a request was read, 0 at end of trace,
// -1 on error with *err naming file:line:field (KVF_EPARSE). out->blocks stays valid until the
// next call or close.
int trc_reader_next(trc_reader *r, trc_request *out, kvf_err *err);
// Lines skipped as malformed under skip_bad.
uint64_t trc_reader_skipped(const trc_reader *r);
trc_format trc_reader_format(const trc_reader *r);
// From the next request on, requests carry no block ids (n_blocks 0): for a consumer that
// reads none (the simulator without a prefix cache, a store or sampling), which then skips
// mapping each trace block to its sub-blocks. Everything else a request carries is the same.
void trc_reader_drop_blocks(trc_reader *r);
// A short description of choices the reader made that results must record
// (e.g. "bucket=spread", "prefix=none (trace has no block ids)").
const char *trc_reader_notes(const trc_reader *r);
void trc_reader_close(trc_reader *r);
// The block size (tokens) the reader maps block ids onto (opt.block_tokens).
uint32_t trc_reader_block_tokens(const trc_reader *r);
// The hit tokens of a prompt of `input` tokens whose first `blocks` blocks of bt tokens are
// cached, as a paged cache attaches them: whole blocks, and at least one token computed, so a
// prompt cached whole recomputes its last block (as vLLM does; the simulator's rule,
// sim_prefill_set_prefix). trace stats and assess count hits by it, so that an unbounded store
// reaches their ideal exactly.
static inline uint64_t trc_hit_tokens(uint64_t blocks, uint32_t input, uint32_t bt) {
    uint64_t hit = blocks * bt;
    if (input && hit > (uint64_t)input - 1) hit = (uint64_t)(input - 1) / bt * bt;
    return hit;
}

// Whether the reader gives requests in arrival order as recorded. A sessions trace gives one
// session after another, turns and all; so does a canonical file written from one (trace
// convert keeps the order, which the simulator reads a session's turns in), and a canonical
// file promises non-decreasing times for open-loop requests only: neither is in order.
bool trc_reader_in_arrival_order(const trc_reader *r);
// Opens, reads to the end and closes: the number of requests path yields under opt.
kvf_status trc_count(const char *path, const trc_options *opt, uint64_t *n, kvf_err *err);

const char *trc_format_name(trc_format f);
bool trc_format_parse(const char *s, trc_format *out);
const char *trc_class_name(int cls);
bool trc_class_parse(const char *s, int *out);

// Canonical JSONL writer (one request per line, every field kept). One line per request:
// {"id","arrival_ns","input_tokens","output_tokens","class","flags","images","session","turn",
//  "prev_id","think_ns","block_tokens","blocks"}; 64-bit ids above INT64_MAX (session, blocks)
// are written as their two's-complement signed value so any JSON reader parses them.
// path "-" writes to stdout.
// Files are written to a temporary name beside path (O_EXCL|O_NOFOLLOW) and renamed into
// place by trc_writer_close, so a reader never sees half a file and a failed run leaves the
// old one. KVF_EINVAL, naming the file, for an output that exists (without TRC_W_FORCE), is
// not a regular file, or is the same file as input (device + inode; input may be NULL).
typedef struct trc_writer trc_writer;
#define TRC_W_FORCE 0x1u   // replace an existing output
kvf_status trc_writer_create(trc_writer **out, const char *path, uint32_t block_tokens,
                             unsigned flags, const char *input, kvf_err *err);
// trc_writer_create(out, path, block_tokens, TRC_W_FORCE, NULL, err).
kvf_status trc_writer_open(trc_writer **out, const char *path, uint32_t block_tokens, kvf_err *err);
kvf_status trc_writer_put(trc_writer *w, const trc_request *r, kvf_err *err);
// Finishes the file and renames it into place (nothing is renamed after a write error).
kvf_status trc_writer_close(trc_writer *w, kvf_err *err);
// Abandons the output: the temporary file is removed, an existing output is kept.
void trc_writer_discard(trc_writer *w);

// ---- statistics -------------------------------------------------------------------------
// One pass over a reader, in arrival order. Memory is flat in trace length except for the set
// of distinct block ids the unbounded ideal cache must remember (8-16 bytes per distinct
// block); the LRU sizes share one recency stack bounded by the largest size (24 bytes per
// block). A reader not in arrival order (trc_reader_in_arrival_order: sessions, canonical) is
// read whole first and sorted, its requests and block ids held (8 bytes per block reference).
// Percentiles are exact up to 65,536 requests and come from a log-linear histogram (relative error
// < 0.1 %) beyond.
#define TRC_STATS_MAX_SIZES 8

typedef struct trc_len_stats {
    double mean, p50, p90, p99;   // tokens
    uint64_t max;                 // tokens
    uint64_t total;               // tokens, summed over requests
} trc_len_stats;

typedef struct trc_stats {
    trc_format format;        // format that was read
    uint64_t requests;        // requests read (after filtering)
    uint64_t sessions;        // distinct session ids != 0 among the requests read
    uint64_t closed_loop;     // requests with prev_id >= 0
    uint64_t failed;          // requests flagged TRC_F_FAILED
    uint64_t with_images;     // requests with images > 0
    uint64_t skipped;         // malformed lines skipped (skip_bad)
    double span_s;            // last arrival - first arrival
    double rate_rps;          // (requests - 1) / span_s, i.e. 1 / mean gap; 0 if undefined
    double interarrival_cv;   // std/mean of gaps between consecutive open-loop arrivals
    trc_len_stats input_tokens, output_tokens;
    uint64_t classes[TRC_CLASS_COUNT];   // requests per trc_class
    uint32_t block_tokens;               // block size the ids were mapped to
    uint64_t block_refs;                 // sum of n_blocks
    uint64_t distinct_blocks;            // distinct block ids seen
    uint64_t hit_tokens;                 // prompt tokens an unbounded prefix cache serves
    double ideal_hit_rate;               // hit_tokens / input_tokens.total: an unbounded store kept
                             // forever, a closed-loop turn's answer blocks included (the
                             // rule the simulator's store follows, trc_int.h trc_answers)
    uint32_t n_sizes;                             // entries in cache_tokens / cache_hit_rate
    double cache_tokens[TRC_STATS_MAX_SIZES];     // LRU capacity in tokens
    double cache_hit_rate[TRC_STATS_MAX_SIZES];   // hit rate of an LRU of that capacity
    char notes[256];                              // trc_reader_notes of the reader
} trc_stats;

// Reads r to its end and fills *out. Per request: hit = min(longest run of leading block ids
// already cached * block_tokens, input_tokens - 1); then all its blocks are inserted (the
// LRU touches them last-to-first so a prefix outlives its tail). cache_tokens (n_sizes <=
// TRC_STATS_MAX_SIZES) lists LRU capacities; NULL uses 1M, 4M, 16M, 64M and 256M tokens.
// Returns the reader's error on a malformed trace. The reader is left at its end.
kvf_status trc_stats_compute(trc_reader *r, const double *cache_tokens, uint32_t n_sizes,
                             trc_stats *out, kvf_err *err);
// Opens path with opt, computes the statistics with default cache sizes, closes.
kvf_status trc_stats_file(const char *path, const trc_options *opt, trc_stats *out, kvf_err *err);
// The statistics as JSON (keys of design.md section 8 plus extras); caller frees.
char *trc_stats_json(const trc_stats *s);

// ---- synthetic generator ----------------------------------------------------------------
// Open-loop arrivals at rate_rps from the chosen process. Each arrival either starts a new
// session (probability 1 / mean_turns) or continues one of up to 64 open sessions chosen at
// random (the oldest is retired when a 65th opens). A continued turn's prompt is the previous
// prompt + the previous answer + new tokens, so its block ids extend the previous chain; the
// first turn starts with the class's shared system prompt (same ids in every session of the
// class). Generated turns are open loop (prev_id = -1) unless closed_loop is set; session and
// turn are set.
typedef enum trc_gen_profile {
    TRC_GEN_CHATBOT = 0,   // short system prompt, ~3 turns, user messages and answers
    TRC_GEN_AGENT,         // long system+tools prompt, ~12-turn loops of tool outputs
    TRC_GEN_CODING,        // repository context on the first turn, ~6 turns
    TRC_GEN_MIXED,         // sessions drawn 50 % chatbot, 30 % agent, 20 % coding (or mix[])
} trc_gen_profile;

typedef enum trc_arrival {
    TRC_ARRIVAL_POISSON = 0,   // exponential gaps
    TRC_ARRIVAL_GAMMA,         // gamma gaps with coefficient of variation cv (bursty if > 1)
    TRC_ARRIVAL_DIURNAL,       // Poisson with rate r*(1 + A sin(2 pi t / period))
} trc_arrival;

// Days mode (days > 0): sessions come back. A session is a series of visits; a visit is a
// burst of turns (geometric, mean mean_turns of the class) think_s apart; after its last turn
// the session returns with probability p, after a lognormal time (median median_h, shape sigma)
// redrawn until the rhythm below accepts it (users come back when they are active), and its
// next prompt resends its whole history, so the return re-uses the session's prefix blocks.
// New sessions arrive at a rate shaped by a day (1 + A cos(2 pi (hour - peak_hour) / 24)) and
// a week (weekend days weekend_ratio times a weekday), normalised to mean 1, and scaled so the
// mean request rate, returns included, is rate_rps once returns have built up; generation
// starts warmup_days before t = 0 (nothing before 0 is emitted), so the stream is in that
// steady state from the start. The figures' sources are in trc_gen.c and scenarios/README.md.
typedef struct trc_gen_return {
    double p;          // probability that a visit is followed by another, [0, 0.99]
    double median_h;   // median time from a visit's last turn to the return, hours
    double sigma;      // lognormal shape: sd of ln(return time)
} trc_gen_return;

typedef struct trc_gen_options {
    trc_gen_profile profile;    // default chatbot
    double rate_rps;            // mean arrival rate, default 1
    double duration_s;          // stop at this simulated time, default 600
    int64_t max_requests;       // > 0: stop after this many
    trc_arrival arrival;        // default Poisson
    double cv;                  // gamma: coefficient of variation of gaps, default 2
    double diurnal_amplitude;   // A in [0, 1), default 0.5
    double diurnal_period_s;    // default 86400
    uint32_t input_len;         // > 0: every turn adds exactly this many new prompt tokens
    uint32_t output_len;        // > 0: every answer has exactly this many tokens
    const char *lengths_path;   // CSV num_prefill_tokens,num_decode_tokens,...: draw (new, out)
    double images_p;            // probability that a request carries one image
    uint64_t seed;              // default 1
    uint32_t block_tokens;      // block size of the ids, default 64
    double mean_turns;          // > 0 overrides the profile's mean turns per session (1 = single)
    int32_t system_tokens;      // >= 0 overrides the profile's system prompt length
    uint32_t max_context;     // a session ends before its prompt would exceed this, default 131072
    bool closed_loop;         // a continued turn waits for the previous one (prev_id) and then
                              // think_s on average (exponential); new sessions stay open loop
    double think_s;           // closed loop: mean think/tool time between turns, default 5
    double mix[3];            // mixed: shares of new sessions that are chatbot, agent, coding
                              // (normalised; all 0 = the default 0.5, 0.3, 0.2)
    double days;              // > 0: days mode over this many days (duration_s = days * 86400)
    double peak_hour;         // days mode: hour of day of the peak rate, [0, 24), default 14
    double weekend_ratio;     // days mode: a Saturday's or Sunday's rate over a weekday's, 0.7
    uint32_t start_weekday;   // days mode: weekday at t = 0, 0 = Monday .. 6 = Sunday
    double warmup_days;       // days mode: sessions generated this long before t = 0, default 7
    trc_gen_return ret[3];    // days mode: returns per class, TRC_GEN_CHATBOT..CODING
} trc_gen_options;

// Generator bounds: the expected request count of a run without max_requests (rate x
// duration, or rate x days x 86400) and the lowest rate (req/s); past them trc_gen_open fails.
#define TRC_GEN_MAX_REQUESTS 1e8
#define TRC_GEN_MIN_RATE 1e-6

void trc_gen_options_default(trc_gen_options *g);
const char *trc_gen_profile_name(trc_gen_profile p);
bool trc_gen_profile_parse(const char *s, trc_gen_profile *out);
const char *trc_arrival_name(trc_arrival a);
bool trc_arrival_parse(const char *s, trc_arrival *out);
// Opens the generator as a reader (format TRC_FMT_KVFLEET); every trc_reader_* call works on
// it. opt may be NULL; its shaping (time_scale, limit, length_scale, block_tokens mapping...)
// applies on top. KVF_EINVAL on bad options, KVF_ENOENT/KVF_EPARSE on a bad lengths file.
kvf_status trc_gen_open(trc_reader **out, const trc_gen_options *g, const trc_options *opt,
                        kvf_err *err);
// Generates into path ("-" = stdout) in canonical JSONL; *n_written may be NULL.
kvf_status trc_gen_write(const trc_gen_options *g, const char *path, uint64_t *n_written,
                         kvf_err *err);

// Command line: `kvfleet trace stats|gen|convert ...`; argv[0] is "trace". Returns exit code.
int trc_cli_main(int argc, char **argv);

// ---- shared-store replay (trc_replay.c) --------------------------------------------------
// A trace's requests loaded in arrival order (ties in stream order) and replayed through a
// store of a given capacity (LRU) and retention (TTL). Hit rule of trc_stats_compute: the
// longest run of leading blocks present and not expired, as tokens, at most input - 1; then
// all the request's blocks are touched last-to-first at its arrival time. An unbounded store
// kept forever reaches ideal_hit_rate. Memory: 8 bytes per block reference plus 24 per entry.
typedef struct trc_replay trc_replay;
// Reads r to its end. KVF_EINVAL for a trace without requests, the reader's error otherwise.
kvf_status trc_replay_load(trc_reader *r, trc_replay **out, kvf_err *err);
// Hit tokens / input tokens of a store of capacity_blocks blocks (0 = unbounded) whose
// entries expire ttl_s seconds after their last use (an entry whose age equals ttl_s is
// expired, as in the simulator's store; <= 0 = never).
kvf_status trc_replay_hit_rate(const trc_replay *p, uint64_t capacity_blocks, double ttl_s,
                               double *hit_rate, kvf_err *err);
// The same for every (capacity, retention) pair at once, in one pass (stack distances and
// ages per block reference); hit_rate[c * nt + t] for caps[c] and ttl_s[t]. Gives exactly what
// trc_replay_hit_rate gives, cell by cell.
kvf_status trc_replay_grid(const trc_replay *p, const uint64_t *caps, int nc, const double *ttl_s,
                           int nt, double *hit_rate, kvf_err *err);
uint64_t trc_replay_requests(const trc_replay *p);
uint64_t trc_replay_distinct_blocks(const trc_replay *p);
uint32_t trc_replay_block_tokens(const trc_replay *p);
double trc_replay_span_s(const trc_replay *p);   // last arrival - first arrival
void trc_replay_free(trc_replay *p);

// ---- measured benchmark runs (trc_measured.c) ----------------------------------------------
// A real serving benchmark read into one plain struct: per request what the client measured,
// the run's own summary figures, and the configuration as far as the run states it. Times are
// in seconds; a figure the run does not give is NAN. Formats (TRC_MEAS_AUTO detects them):
//   vllm            `vllm bench serve` / benchmark_serving.py result JSON; per-request arrays
//                   (ttfts, itls, input_lens, ...) only when saved (--save-detailed); one object
//                   per line with --append-result
//   inference-perf  a run folder or its results/ folder (summary_lifecycle_metrics.json,
//                   stage_N_lifecycle_metrics.json, config.yaml, per_request_lifecycle_metrics
//                   .json when saved, exp-config.yaml beside results/), or the summary file
//   sglang          bench_serving JSONL, one run per line (per request with --output-details)
// Unreadable or inconsistent runs (missing keys, array lengths that disagree, negative times,
// ttft > e2e, NaN, percentiles out of order) give KVF_EPARSE with "file:line: field 'x': ...".
typedef enum trc_measured_format {
    TRC_MEAS_AUTO = 0,
    TRC_MEAS_VLLM,
    TRC_MEAS_INFERENCE_PERF,
    TRC_MEAS_SGLANG,
} trc_measured_format;

typedef struct trc_measured_stat {
    double mean, p50, p90, p99;   // s; NAN where the run gives none
} trc_measured_stat;

typedef struct trc_measured_req {
    double arrival_s;         // send time after the first request's, s; NAN: not saved
    uint32_t input_tokens;    // prompt tokens as the client counted them
    uint32_t output_tokens;   // tokens received (0 for a failed request)
    double ttft_s;            // NAN for a failed or non-streamed request
    double itl_mean_s;        // mean gap between tokens; NAN with fewer than 2 tokens
    double e2e_s;             // send to last token; failed: send to the failure (or NAN)
    uint64_t itl_first;       // index of its first gap in trc_measured.itl_s
    uint32_t n_itl;           // gaps saved for it (0 when the run saved none)
    uint32_t stage;           // load stage (inference-perf), else 0
    bool ok;                  // the client counted it a success
} trc_measured_req;

typedef struct trc_measured_summary {
    trc_measured_stat ttft_s, itl_s, tpot_s, e2e_s;
    uint64_t completed, failed;                     // requests
    double duration_s;                              // the span the throughputs divide by
    double request_rps;                             // completed / duration_s
    double input_tok_s, output_tok_s;               // tokens of completed requests / duration_s
    double input_tokens_mean, output_tokens_mean;   // per completed request
} trc_measured_summary;

#define TRC_MEAS_MAX_STAGES 16
#define TRC_MEAS_MAX_QUANTILES 16

typedef struct trc_measured_stage {
    double rate_rps;     // offered rate
    double duration_s;   // sending window
    double start_s;      // offset of its window from the run start (estimated when
                         // the run saved no per-request times: see notes)
    uint64_t requests;   // requests sent in it
} trc_measured_stage;

typedef struct trc_measured_config {
    char model[160];              // "" unknown
    char hardware[64];            // "" unknown (none of the formats records it by itself)
    char backend[32];             // server type / backend as the run names it
    char date[32];                // as recorded, "" unknown
    int tp;                       // tensor parallel size, 0 unknown
    int max_num_seqs;             // 0 unknown
    int max_num_batched_tokens;   // 0 unknown
    int max_model_len;            // 0 unknown
    int prefix_caching;           // 1 on, 0 off, -1 unknown
    double request_rate_rps;      // offered rate; INFINITY = all at once; NAN unknown
    double burstiness;            // gamma shape of the gaps (1 = Poisson); NAN unknown
    int max_concurrency;          // client limit on requests in flight, 0 = none
    double client_timeout_s;      // a request still open after this fails; NAN unknown
    bool ignore_eos;              // every request generates exactly its max_tokens
    uint32_t n_stages;            // load stages (inference-perf), 0 = one implicit stage
    trc_measured_stage stages[TRC_MEAS_MAX_STAGES];
    // Synthetic shared-prefix workload (inference-perf shared_prefix), prompts = 0 when none:
    // `prompts` fixed prompts sent in turn, each a group's system prompt + its own question.
    uint32_t prompts, prompt_groups;
    uint32_t system_prompt_len, question_len, output_len;   // tokens
} trc_measured_config;

typedef struct trc_measured {
    trc_measured_format format;
    char path[512];       // the file read (for inference-perf: the summary file)
    uint32_t runs, run;   // runs in the file, and the 0-based one read
    trc_measured_config config;
    trc_measured_summary summary;   // as the run itself reports it
    trc_measured_req *req;          // n_req requests in send order; empty when none saved
    uint64_t n_req;
    double *itl_s;   // n_itl gaps, s, request after request
    uint64_t n_itl;
    uint32_t n_len_q;                       // reported prompt-length distribution: at quantile
    double len_q[TRC_MEAS_MAX_QUANTILES];   // len_q[i] (0..1) the prompt has
    double len_q_tokens[TRC_MEAS_MAX_QUANTILES];   // len_q_tokens[i] tokens (inference-perf)
    double token_times_per_token;   // inference-perf, ignore_eos: ((E2E - TTFT) / output_len)
                                    // / ITL mean, the client's timestamps per generated token
                                    // (2.0 in validation/training: ITL = half a decode step);
                                    // NAN when not computable
    char notes[768];                // choices the reader made, for results to record
} trc_measured;

// Zeroes *m (every figure NAN, counts 0). trc_measured_read does it itself.
void trc_measured_init(trc_measured *m);
// Frees what *m owns and re-initialises it; NULL is allowed.
void trc_measured_free(trc_measured *m);
// Reads the run at path (file or, for inference-perf, folder) in format fmt (AUTO detects it
// from the content). run selects one run of a file holding several (vLLM --append-result,
// SGLang JSONL): 0-based, -1 = the last. On success *out owns its arrays (trc_measured_free).
// KVF_ENOENT for a missing path, KVF_EINVAL for a run index past the end, KVF_EPARSE for an
// undetectable format or an unreadable or inconsistent run ("file:line: field 'x': ...").
kvf_status trc_measured_read(const char *path, trc_measured_format fmt, int run, trc_measured *out,
                             kvf_err *err);
// Recomputes the summary from the per-request data as the benchmark tools do (numpy's linear
// percentiles; TTFT, TPOT and E2E over completed requests; TPOT = (e2e - ttft) / (output - 1)
// for vLLM and SGLang, (last - first token time) / (token times - 1) for inference-perf; ITL
// over every saved gap, or the per-request means when no gaps were saved; rates over
// m->summary.duration_s). KVF_EINVAL
// when the run saved no per-request data.
kvf_status trc_measured_summarize(const trc_measured *m, trc_measured_summary *out, kvf_err *err);
// Writes the run's requests as a canonical kvfleet trace (trc_writer; "-" = stdout) with
// block ids of block_tokens tokens, arrivals in send order. With per-request send times they
// are used as recorded; without them they are drawn (from seed) as the load generator drew
// them: inference-perf stages (exponential gaps scaled to each stage's window), vLLM gamma
// gaps of shape burstiness scaled to n / rate, SGLang exponential gaps. Lengths are the
// recorded ones; a failed request is flagged TRC_F_FAILED and keeps the length it asked for
// (output_len, else the completed mean); without per-request data none is flagged (which ones
// failed is unknown: config.client_timeout_s says when the client gave up). With a
// shared-prefix workload request k of a stage
// uses prompt k % prompts, prompt p belongs to group p % prompt_groups, and its blocks share
// ids with its group over system_prompt_len tokens and with itself over the whole prompt;
// without one no ids are written (the run does not say what was shared). Without per-request
// lengths, prompt p's length is the reported distribution's quantile (p + 0.5) / prompts.
// *n_written may be NULL. KVF_EINVAL for a run with no requests to write.
kvf_status trc_measured_write_trace(const trc_measured *m, const char *path, uint32_t block_tokens,
                                    uint64_t seed, uint64_t *n_written, kvf_err *err);
const char *trc_measured_format_name(trc_measured_format f);
bool trc_measured_format_parse(const char *s, trc_measured_format *out);

// A manifest of measured runs (CSV with a header; validation/training/manifest.csv): one row
// per run, columns experiment, model, hardware, tp, workload, overloaded (yes/no) at least.
typedef struct trc_measured_entry {
    char experiment[128];   // folder name, beside the manifest
    char dir[640];          // <manifest's folder>/<experiment>
    char model[160];
    char hardware[64];
    char workload[32];
    int tp;
    bool overloaded;   // client time-outs or queues that grew all run
} trc_measured_entry;
// Reads the manifest; *out (n entries) is the caller's to free(). KVF_EPARSE names the line
// and column of a bad or missing field.
kvf_status trc_measured_manifest_read(const char *path, trc_measured_entry **out, size_t *n,
                                      kvf_err *err);

#endif
