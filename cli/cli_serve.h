// cli/cli_serve.h -- inside cli/: what `kvfleet engine serve` (cli_engine.c) and `kvfleet
// validate` (cli_validate.c) share: their options, the shaped trace both read, and the engine
// serving it.
//
// Both commands shape the trace the same way (design.md §8 TRACE-SHAPING) and write the shaped
// requests to one canonical JSONL file, open loop, that the engine and the simulator both read:
// whatever differs between the two runs is the model, never the input.
#ifndef CLI_SERVE_H
#define CLI_SERVE_H

#include <stdio.h>

#include "eng.h"
#include "sim.h"

// The options of engine serve and validate (validate adds --profile's use and --strict).
typedef struct cli_serve_args {
    const char *trace, *model, *backend, *out, *profile;
    int64_t limit;                     // --limit requests, 0 = all
    double time_scale, length_scale;   // --time-scale, --length-scale (> 0)
    double rate;                       // --rate req/s, 0 = the trace's own
    trc_format format;                 // --format, TRC_FMT_AUTO = detected
    bool skip_bad, json, strict;
    bool force;              // --force: replace an earlier result in -o
    double start_s, end_s;   // window on the trace's own time axis (end 0 = none)
    char out_abs[2048];      // out made absolute (relative: against the working directory)
    void (*idle_hook)(void *ctx, int64_t idle_ns);   // engine: probes in idle gaps
    void *idle_ctx;
    void (*busy_hook)(void *ctx, int64_t now_ns);   // and between steps, off the clock
    void *busy_ctx;
    int64_t busy_every_ns;
    uint32_t max_batch_tokens, max_batch_requests, kv_blocks, block_tokens, threads;
} cli_serve_args;

// Takes a's -o directory for writing (sim_outdir_begin: exit 2 when it holds a result and no
// --force, or another run writes it) and refuses the trace (and the profile) when it lies
// inside it or is not a regular file. The files go to od->tmp, renamed into place by
// sim_outdir_commit. KVF_OK or the status with *err set (nothing held).
kvf_status cli_serve_outdir(const cli_serve_args *a, sim_outdir *od, kvf_err *err);

// Prints the usage of cmd ("engine serve" or "validate") on f; returns rc.
int cli_serve_usage(FILE *f, const char *cmd, int rc);

// Parses the command line of engine serve (validate false: argv = engine serve ...) or validate
// (argv = validate ...) into *a, defaults first; out_abs is -o (default out/engine-serve or
// out/validate) made absolute. Returns CLI_GO, or the exit code after the message (0 after
// --help).
int cli_serve_parse(int argc, char **argv, bool validate, cli_serve_args *a);

// A whole (small) trace in memory: requests with their blocks in one array.
typedef struct cli_mem_trace {
    trc_request *r;   // n requests; r[i].blocks points into blocks once loaded
    uint64_t *blocks;
    size_t n;
} cli_mem_trace;

// Reads rd to its end into *t (t's arrays are the caller's to free with cli_mem_trace_free,
// also on failure). Returns the reader's error on a malformed line.
kvf_status cli_mem_trace_read(trc_reader *rd, cli_mem_trace *t, kvf_err *err);
// Frees t's arrays and clears it; t may be cleared already.
void cli_mem_trace_free(cli_mem_trace *t);

// Shapes a's trace and writes it, open loop (arrival order, ids 0..n-1), to path in canonical
// JSONL at a->block_tokens; *n requests, the reader's notes into notes[nn]. No requests left
// after shaping is an error.
kvf_status cli_serve_shape(const cli_serve_args *a, const char *path, size_t *n, char *notes,
                           size_t nn, kvf_err *err);

// Reads the shaped canonical file back into engine requests (*out, n of them) whose blocks
// point into *blocks; both arrays are the caller's to free.
kvf_status cli_serve_load(const char *path, uint32_t block_tokens, eng_request **out,
                          uint64_t **blocks, size_t *n, kvf_err *err);

// Runs the engine on the shaped trace: *ec the configuration it ran with (the KV arena made
// explicit, so the simulator can be given the same capacity), *res its results, *reqs and
// *blocks the requests it served (the caller frees them and res, also on failure).
kvf_status cli_serve_run(const cli_serve_args *a, const char *shaped, eng_serve_config *ec,
                         eng_serve_result *res, eng_request **reqs, uint64_t **blocks, size_t *n,
                         kvf_err *err);

// dir/steps.csv: every served step, its shape and its measured wall and thread CPU time; with
// pred (ns per step) the step model's prediction, its residual (resid, fraction) and a mark
// per step (flag[i] or none); resid and flag may be NULL with pred.
kvf_status cli_serve_steps_csv(const char *dir, const eng_serve_result *r, const double *pred,
                               const double *resid, const char *const *flag, kvf_err *err);

// Prints "kvfleet: <err->msg>" on stderr and returns st's exit code.
int cli_serve_fail(const kvf_err *err, kvf_status st);

#endif
