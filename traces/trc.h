// traces/trc.h -- request traces: streaming readers for the public formats, the canonical
// kvfleet JSONL writer, the synthetic generator and trace statistics.
//
// Every reader yields the same trc_request. Readers stream: memory is constant in trace
// length (a rate rescale needs the mean rate first and takes it in a first pass over the file).
// Block ids are chained prefix ids already mapped onto the simulator's block size
// (opt.block_tokens): equal id at position i means equal content of tokens [0, (i+1)*bt).
// Only full blocks get ids; a partial last block is never shared.
#ifndef TRC_H
#define TRC_H

#include "kvf.h"

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
    trc_format format;        // TRC_FMT_AUTO detects from content
    uint32_t block_tokens;    // simulator block size (default 64)
    uint32_t source_block_tokens;  // override of the trace's own block size, 0 = format default
    double time_scale;        // multiply inter-arrival gaps (default 1)
    double rate_rps;          // > 0: rescale arrivals to this mean rate
    double length_scale;      // multiply input/output lengths (>= 1 token), default 1
    int64_t limit_requests;   // > 0: stop after this many
    int64_t start_ns, end_ns; // window on the original time axis, end 0 = none
    trc_bucket_mode bucket;   // for bucketed timestamps
    uint64_t seed;            // for spreading and session starts
    bool skip_bad;            // skip malformed lines (counted) instead of failing
    // sessions format: how sessions start
    double session_rate;      // > 0: Poisson session starts at this rate (per s)
    uint32_t session_users;   // > 0: N concurrent users, each starts the next session on finish
} trc_options;

// Fills *o with the defaults above.
void trc_options_default(trc_options *o);

typedef struct trc_reader trc_reader;

// Opens path for streaming. Fills *err with "path: ..." on a missing or unreadable file
// (KVF_ENOENT / KVF_EIO) or an undetectable format (KVF_EPARSE). Caller owns the reader.
kvf_status trc_reader_open(trc_reader **out, const char *path, const trc_options *opt,
                           kvf_err *err);
// Reads the next request into *out. Returns 1 when a request was read, 0 at end of trace,
// -1 on error with *err naming file:line:field (KVF_EPARSE). out->blocks stays valid until the
// next call or close.
int trc_reader_next(trc_reader *r, trc_request *out, kvf_err *err);
// Lines skipped as malformed under skip_bad.
uint64_t trc_reader_skipped(const trc_reader *r);
trc_format trc_reader_format(const trc_reader *r);
// A short description of choices the reader made that results must record
// (e.g. "bucket=spread", "prefix=none (trace has no block ids)").
const char *trc_reader_notes(const trc_reader *r);
void trc_reader_close(trc_reader *r);

const char *trc_format_name(trc_format f);
bool trc_format_parse(const char *s, trc_format *out);
const char *trc_class_name(int cls);
bool trc_class_parse(const char *s, int *out);

// Canonical JSONL writer (one request per line, every field kept).
typedef struct trc_writer trc_writer;
kvf_status trc_writer_open(trc_writer **out, const char *path, uint32_t block_tokens,
                           kvf_err *err);
kvf_status trc_writer_put(trc_writer *w, const trc_request *r, kvf_err *err);
kvf_status trc_writer_close(trc_writer *w, kvf_err *err);

// Command line: `kvfleet trace stats|gen|convert ...`; argv[0] is "trace". Returns exit code.
int trc_cli_main(int argc, char **argv);

#endif
