// traces/trc_int.h -- internals shared by the files of the traces library (not public).
//
// A reader is a format-specific *source* that yields raw records on the trace's own axes
// (source time, source block size, source keys) and a common core (trc_reader.c) that turns
// them into trc_request: monotonic-time check, bucket spreading, window, limit, time and
// length scaling, block-size mapping and id renumbering.
//
// Keys: every source numbers its records with strictly increasing keys (its own sequence, or
// the canonical file's "id"); prev references name keys. The core keeps only the ranges of
// keys it dropped, so out_id(key) = key - first_key - dropped keys below it: memory stays
// proportional to the number of dropped ranges, not to the trace.
#ifndef TRC_INT_H
#define TRC_INT_H

#include <stdio.h>
#include <sys/types.h>

#include "trc.h"

typedef struct trc_rec {
    int64_t t_ns;       // source time axis (ns); absolute or relative, core subtracts first
    uint32_t in, out;   // tokens (already >= 1)
    uint8_t cls, flags;
    uint16_t images;
    uint64_t session;
    uint32_t turn;
    uint64_t key;       // strictly increasing within a source
    int64_t prev_key;   // key of the request this one waits for, -1 = open loop
    int64_t think_ns;   // closed-loop gap after prev completes
    uint32_t src_bt;    // tokens per entry of blocks (0 = no blocks)
    uint32_t nb;        // entries in blocks
    size_t cap;         // capacity of blocks
    uint64_t *blocks;   // owned by the record
    long line;          // source line (for messages)
} trc_rec;

typedef struct trc_source trc_source;
struct trc_source {
    // Returns 1 with *rec filled (rec->blocks reused/grown by the source), 0 at end, -1 on
    // error with *err "path:line: field 'x': ...". Under skip_bad, malformed lines are counted
    // in skipped and passed over.
    int (*next)(trc_source *s, trc_rec *rec, kvf_err *err);
    void (*close)(trc_source *s);
    trc_format fmt;
    int64_t bucket_ns;   // > 0: timestamps are bucketed at this width (spreadable)
    bool sorted;         // open-loop times must be non-decreasing (window end stops early)
    bool origin_zero;    // times are already relative to the trace start (else: first record)
    uint64_t skipped;
    char notes[256];    // format-specific choices, copied into the reader's notes
    bool skip_blocks;   // the reader maps no block ids: a source may leave rec->blocks unfilled
                        //   (rec->nb still counts them)
};

// Ensures rec->blocks holds n entries.
void trc_rec_reserve(trc_rec *rec, size_t n);

// Line reader over a FILE (long lines up to TRC_LINE_MAX, NUL bytes, CRLF, a UTF-8 byte-order
// mark before the first line).
#define TRC_LINE_MAX (64L << 20)
typedef struct trc_lines {
    FILE *f;
    char *buf;
    size_t cap;
    long line;       // number of the line last returned (1-based)
    bool too_long;   // stopped at a line over TRC_LINE_MAX bytes
    char *rb;        // read buffer: bytes rb[rpos..rlen) not yet consumed
    size_t rpos, rlen;
} trc_lines;
// Frees the buffers of l (not the FILE).
void trc_lines_free(trc_lines *l);
// Next non-blank line without its line end; returns its length, or -1 at end of file, on a
// read error or at a line over TRC_LINE_MAX (see trc_lines_error).
long trc_lines_next(trc_lines *l, char **out);
// After trc_lines_next returned -1: KVF_OK at a clean end of file, else the error (a read
// error, or a line too long) as "path:line: ..." in *err.
kvf_status trc_lines_error(const trc_lines *l, const char *path, kvf_err *err);

// Source constructors (formats.c, gen.c). path is kept for messages.
kvf_status trc_src_mooncake(trc_source **out, FILE *f, const char *path, const trc_options *o,
                            kvf_err *err);
kvf_status trc_src_sessions(trc_source **out, FILE *f, const char *path, const trc_options *o,
                            kvf_err *err);
kvf_status trc_src_kvfleet(trc_source **out, FILE *f, const char *path, const trc_options *o,
                           kvf_err *err);
kvf_status trc_src_csv(trc_source **out, FILE *f, const char *path, trc_format fmt,
                       const trc_options *o, kvf_err *err);
kvf_status trc_src_gen(trc_source **out, const trc_gen_options *g, kvf_err *err);

// Wraps a source into a reader (takes ownership of src and f, which may be NULL). Checks opt
// first: on bad options (KVF_EINVAL) src and f are closed and *out is NULL.
kvf_status trc_reader_from_source(trc_reader **out, trc_source *src, FILE *f, const char *path,
                                  const trc_options *opt, kvf_err *err);

// ---- binary spool and cache (trc_cache.c) ---------------------------------------------------
// Bump whenever a source's records change for the same input (a parser fix, a new field, a
// new rule): caches written before are then ignored and rebuilt.
#define TRC_CACHE_VERSION 1u
typedef struct trc_cache_key trc_cache_key;
// Whether o asks for the persistent cache (TRC_CACHE_ON, or AUTO and $KVFLEET_TRACE_CACHE).
bool trc_cache_enabled(const trc_options *o);
// The cache directory ($XDG_CACHE_HOME/kvfleet or $HOME/.cache/kvfleet) into buf.
kvf_status trc_cache_dir(char *buf, size_t n, kvf_err *err);
// The key of the trace open as f at path under o (format detected), and its cache file path
// into cpath; NULL when the trace cannot be keyed (no real path, no cache directory).
trc_cache_key *trc_cache_key_make(FILE *f, const char *path, const trc_options *o,
                                  trc_format detected, char *cpath, size_t n);
// A source replaying the cache file cpath when it is complete, intact and made for want:
// KVF_OK, else a status (the caller parses instead).
kvf_status trc_cache_open(trc_source **out, const char *cpath, const trc_cache_key *want);
// Wraps a live source so every record it yields is also written to a spool: the cache file
// cpath (renamed into place when the source ends cleanly) when cpath and ck are given and
// writable, else an anonymous temporary file. Returns in unchanged when no file can be made.
trc_source *trc_tee_wrap(trc_source *in, const char *cpath, const trc_cache_key *ck);
bool trc_is_tee(const trc_source *s);
// A source replaying what the tee s wrote, continuing with the live source if the tee had
// not reached the end; takes ownership of s. NULL (s untouched) when the spool failed.
trc_source *trc_tee_replay(trc_source *s);

// ---- files (trc_writer.c) ----------------------------------------------------------------
// "a FIFO (pipe)", "a directory", ... for a non-regular st_mode.
const char *trc_file_kind(mode_t m);
// Checks that an output path may be written: KVF_OK when it does not exist; KVF_EINVAL naming
// it when it is not a regular file, is the same file as input (dev + inode), or exists and
// !force.
kvf_status trc_output_check(const char *path, const char *input, bool force, kvf_err *err);
// Creates a temporary file beside path (O_CREAT|O_EXCL|O_NOFOLLOW), open for reading as well as
// writing (a trace cache being built is replayed from it); *tmp is its name (owned).
kvf_status trc_atomic_create(const char *path, FILE **f, char **tmp, kvf_err *err);
// Closes f; keep: renames tmp over path (fails on a write error), else removes tmp. Frees tmp.
kvf_status trc_atomic_commit(FILE *f, char *tmp, const char *path, bool keep, kvf_err *err);

// Mooncake and canonical JSON lines go through a hand-written scanner first (trc_json.c) and
// to jansson only when it gives up; false sends every line to jansson (the reference; tests
// compare the two).
extern bool trc_json_fast;

// Bytes of the window a spool or cache file is read through (trc_cache.c; 256 KB). Tests make
// it smaller than a record, which the window then grows to hold.
extern size_t trc_cache_win_bytes;

// Parses an unsigned decimal integer field (no sign, no junk); false on failure.
bool trc_parse_u64(const char *s, uint64_t *out);

// A closed-loop turn's answer is part of the next turn's prompt, and its KV was computed by the
// decode of the turn it waits for (prev_id): the simulator writes those blocks to the store
// when the next turn is looked up (kv_cache.persist_decode, sim_tier_persist_answer). The ideal
// hit rate and the store replays credit them by the same rule: the turn extends its previous
// turn's blocks (it holds at least as many and shares the last one), and its blocks from there
// up to (previous input + output tokens) / block_tokens count as present. Ids are the stream's
// (0-based, dense).
typedef struct trc_answers {
    uint32_t *n_blocks;   // per id: blocks of the request (0 = none or unknown)
    uint64_t *last;       // per id: its last block id
    uint64_t *tokens;     // per id: input + output tokens
    size_t cap;
} trc_answers;
// Records q's blocks and tokens (after its lookup). Returns false when out of memory.
bool trc_answers_add(trc_answers *a, const trc_request *q);
// The answer blocks of q (computed by the turn it waits for): q->blocks[*from .. *upto); false
// when none.
bool trc_answers_span(const trc_answers *a, const trc_request *q, uint32_t block_tokens,
                      uint32_t *from, uint32_t *upto);
void trc_answers_free(trc_answers *a);

#endif
