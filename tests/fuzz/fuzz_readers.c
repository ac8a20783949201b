// tests/fuzz/fuzz_readers.c -- libFuzzer target for the trace readers. Built once per format
// (-DFUZZ_FORMAT=TRC_FMT_...; TRC_FMT_AUTO exercises detection). The first input byte picks
// options (skip_bad, bucket spreading, block size, N users, statistics pass); the rest is the
// trace file. Any crash, sanitizer report or leak is a bug: readers must turn every input
// into requests or a KVF_EPARSE/KVF_EINVAL message naming file:line.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trc.h"

#ifndef FUZZ_FORMAT
#define FUZZ_FORMAT TRC_FMT_AUTO
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];   // the input as a file, removed at exit
static void remove_path(void) {
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/kvf_fuzz_%d.trace", (int)getpid());
        atexit(remove_path);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    uint8_t flags = data[0];
    static const uint32_t bts[4] = {16, 64, 512, 1024};
    trc_options o;
    trc_options_default(&o);
    o.format = FUZZ_FORMAT;
    o.skip_bad = flags & 1;
    o.bucket = flags & 2 ? TRC_BUCKET_SPREAD : TRC_BUCKET_AS_RECORDED;
    o.block_tokens = bts[(flags >> 3) & 3];
    if (flags & 0x20) o.session_users = 2;
    if (flags & 0x40) o.limit_requests = 50;
    if (flags & 0x80) o.length_scale = 0.5;
    kvf_err err = {0};
    trc_reader *r;
    if (trc_reader_open(&r, path, &o, &err)) {
        if (!err.msg[0]) abort();   // every failure carries a message
        return 0;
    }
    if (flags & 4) {
        double sizes[2] = {1e4, 1e6};
        trc_stats s;
        if (trc_stats_compute(r, sizes, 2, &s, &err) && !err.msg[0]) abort();
    } else {
        trc_request q;
        int rc, n = 0;
        while (n < 100000 && (rc = trc_reader_next(r, &q, &err)) == 1) {
            if (q.input_tokens < 1 || q.output_tokens < 1) abort();
            if (q.n_blocks > q.input_tokens / o.block_tokens) abort();
            if (q.prev_id >= (int64_t)q.id) abort();
            volatile uint64_t sink = 0;
            for (uint32_t i = 0; i < q.n_blocks; i++)
                sink ^= q.blocks[i];
            (void)sink;
            n++;
        }
        if (rc < 0 && !err.msg[0]) abort();
    }
    trc_reader_close(r);
    return 0;
}
