// tests/test_traces.c -- the traces library: readers, block mapping, time shaping, the
// canonical round trip, the generator against its parameters, statistics against independent
// counts, and every malformed-input case with its file:line:field message.
//
// Expected values are computed here by other means (own JSON scan, own maps), never copied
// from the library's output. Real traces come from $KVF_SHARED/traces (or traces/data).
#include <check.h>
#include <fcntl.h>
#include <time.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "trc_int.h"

// ---- helpers ------------------------------------------------------------------------------
static const char *write_tmp(const char *name, const char *content, size_t len) {
    const char *p = kvt_tmp_path(name);
    FILE *f = fopen(p, "wb");
    ck_assert(f != NULL);
    fwrite(content, 1, len, f);
    fclose(f);
    return p;
}
#define WRITE(name, s) write_tmp(name, s, strlen(s))

// Real trace path: $KVF_SHARED/traces/name, else traces/data/name. Every trace used here is
// bundled or in the shared folder (CTest sets KVF_SHARED): a missing one fails the test.
static const char *trace_path(const char *name) {
    static char buf[4][1024];
    static int k;
    char *p = buf[k++ % 4];
    const char *sh = getenv("KVF_SHARED");
    struct stat st;
    if (sh) {
        snprintf(p, 1024, "%s/traces/%s", sh, name);
        if (!stat(p, &st)) return p;
    }
    const char *src = getenv("KVF_SOURCE_DIR");
    snprintf(p, 1024, "%s/traces/data/%s", src ? src : ".", name);
    if (!stat(p, &st)) return p;
    ck_assert_msg(0, "%s: not in $KVF_SHARED/traces nor traces/data", name);
    return NULL;
}

static trc_options opts(uint32_t bt) {
    trc_options o;
    trc_options_default(&o);
    o.block_tokens = bt;
    return o;
}

// Reads the whole trace; returns the reader's final rc (0 ok, -1 error) and the count.
static int read_all(const char *path, const trc_options *o, uint64_t *n, kvf_err *err) {
    trc_reader *r;
    *n = 0;
    if (trc_reader_open(&r, path, o, err)) return -1;
    trc_request q;
    int rc;
    while ((rc = trc_reader_next(r, &q, err)) == 1)
        (*n)++;
    trc_reader_close(r);
    return rc;
}

static void expect_error(const char *path, const trc_options *o, const char *want1,
                         const char *want2) {
    kvf_err err = {0};
    uint64_t n;
    int rc = read_all(path, o, &n, &err);
    ck_assert_msg(rc < 0, "%s: expected an error containing '%s', read %llu requests", path, want1,
                  (unsigned long long)n);
    ck_assert_msg(strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)),
                  "message '%s' lacks '%s' / '%s'", err.msg, want1, want2 ? want2 : "");
    ck_assert_msg(err.code == KVF_EPARSE || err.code == KVF_EINVAL, "code %d", err.code);
}

static void req_eq(const trc_request *a, const trc_request *b, uint64_t i) {
    ck_assert_msg(a->id == b->id && a->arrival_ns == b->arrival_ns &&
                      a->input_tokens == b->input_tokens && a->output_tokens == b->output_tokens,
                  "req %llu: id %llu/%llu arrival %lld/%lld in %u/%u out %u/%u",
                  (unsigned long long)i, (unsigned long long)a->id, (unsigned long long)b->id,
                  (long long)a->arrival_ns, (long long)b->arrival_ns, a->input_tokens,
                  b->input_tokens, a->output_tokens, b->output_tokens);
    ck_assert_msg(a->cls == b->cls && a->flags == b->flags && a->images == b->images &&
                      a->session == b->session && a->turn == b->turn && a->prev_id == b->prev_id &&
                      a->think_ns == b->think_ns,
                  "req %llu: cls %u/%u flags %u/%u images %u/%u session %llu/%llu turn %u/%u "
                  "prev %lld/%lld think %lld/%lld",
                  (unsigned long long)i, a->cls, b->cls, a->flags, b->flags, a->images, b->images,
                  (unsigned long long)a->session, (unsigned long long)b->session, a->turn, b->turn,
                  (long long)a->prev_id, (long long)b->prev_id, (long long)a->think_ns,
                  (long long)b->think_ns);
    ck_assert_msg(a->n_blocks == b->n_blocks, "req %llu: n_blocks %u/%u", (unsigned long long)i,
                  a->n_blocks, b->n_blocks);
    for (uint32_t k = 0; k < a->n_blocks; k++)
        ck_assert_msg(a->blocks[k] == b->blocks[k], "req %llu block %u differs",
                      (unsigned long long)i, k);
}

// Reads path with o, writes canonical JSONL, reads that back and compares every field.
static uint64_t roundtrip(const char *path, const trc_options *o, const char *outname) {
    kvf_err err = {0};
    trc_reader *r;
    ck_assert_msg(!trc_reader_open(&r, path, o, &err), "%s", err.msg);
    const char *out = kvt_tmp_path(outname);
    trc_writer *w;
    ck_assert_msg(!trc_writer_open(&w, out, o->block_tokens, &err), "%s", err.msg);
    trc_request q;
    int rc;
    uint64_t n = 0;
    while ((rc = trc_reader_next(r, &q, &err)) == 1) {
        ck_assert(!trc_writer_put(w, &q, &err));
        n++;
    }
    ck_assert_msg(rc == 0, "%s", err.msg);
    ck_assert(!trc_writer_close(w, &err));
    trc_reader_close(r);
    trc_reader *a, *b;
    trc_options oc = opts(o->block_tokens);
    oc.format = TRC_FMT_AUTO;   // must detect the canonical format
    ck_assert_msg(!trc_reader_open(&a, path, o, &err), "%s", err.msg);
    ck_assert_msg(!trc_reader_open(&b, out, &oc, &err), "%s", err.msg);
    ck_assert_int_eq(trc_reader_format(b), TRC_FMT_KVFLEET);
    trc_request x, y;
    uint64_t m = 0;
    for (;;) {
        int ra = trc_reader_next(a, &x, &err);
        ck_assert_msg(ra >= 0, "%s", err.msg);
        int rb = trc_reader_next(b, &y, &err);
        ck_assert_msg(rb >= 0, "%s", err.msg);
        ck_assert_int_eq(ra, rb);
        if (!ra) break;
        req_eq(&x, &y, m++);
    }
    ck_assert_uint_eq(m, n);
    trc_reader_close(a);
    trc_reader_close(b);
    return n;
}

// ---- Mooncake: ideal reuse against an independent count -----------------------------------
// Scans the JSON text by hand and counts, per request, the leading 64-token sub-blocks of
// 512-token source blocks already seen; seen[id] = most sub-blocks of id any request held.
static void mooncake_independent(const char *path, uint32_t B, uint64_t *hit, uint64_t *total,
                                 uint64_t *nreq) {
    FILE *f = fopen(path, "r");
    ck_assert(f != NULL);
    size_t cap = 1 << 20;
    uint8_t *seen = calloc(cap, 1);
    char *line = NULL;
    size_t lcap = 0;
    long ids[4096];
    *hit = *total = *nreq = 0;
    uint32_t per = 512 / B;
    while (getline(&line, &lcap, f) > 0) {
        char *p = strstr(line, "\"input_length\":");
        ck_assert(p);
        long in = strtol(p + 15, NULL, 10);
        p = strstr(line, "\"hash_ids\": [");
        ck_assert(p);
        p += 13;
        int n = 0;
        while (*p && *p != ']') {
            ids[n++] = strtol(p, &p, 10);
            ck_assert(n < 4096);
            while (*p == ',' || *p == ' ')
                p++;
        }
        uint64_t h = 0;
        uint32_t need[4096];
        for (int i = 0; i < n; i++) {
            long left = in - (long)i * 512;
            long k = left <= 0 ? 0 : left / B;
            need[i] = (uint32_t)(k > per ? per : k);
        }
        for (int i = 0; i < n; i++) {
            ck_assert((size_t)ids[i] < cap);
            if (!need[i]) break;
            if (seen[ids[i]] >= need[i]) {
                h += need[i] * B;
                continue;
            }
            h += seen[ids[i]] * B;
            break;
        }
        // whole blocks, at least one token computed: a prompt cached whole recomputes its last
        // block, as the simulator's paged cache does
        if (h > (uint64_t)in - 1) h = (uint64_t)(in - 1) / B * B;
        for (int i = 0; i < n; i++)
            if (need[i] > seen[ids[i]]) seen[ids[i]] = (uint8_t)need[i];
        *hit += h;
        *total += (uint64_t)in;
        (*nreq)++;
    }
    free(line);
    free(seen);
    fclose(f);
}

// A prompt repeated whole counts the hit a paged cache gives it: whole blocks, its last one
// recomputed (960 of 1,024 tokens in 64-token blocks), as the simulator's unbounded store
// reaches; trace stats counted 1,023 (every token but one), an ideal no store reaches.
START_TEST(test_stats_repeated_prompt_whole_blocks) {
    kvt_tmp_make("kvf_trc");
    char text[1400];
    size_t u = 0;
    for (int i = 0; i < 2; i++) {
        u += (size_t)snprintf(text + u, sizeof text - u,
                              "{\"id\":%d,\"arrival_ns\":%d,\"input_tokens\":1024,"
                              "\"output_tokens\":11,\"block_tokens\":64,\"blocks\":[",
                              i + 1, i * 1000);
        for (int b = 1; b <= 16; b++)
            u += (size_t)snprintf(text + u, sizeof text - u, "%s%d", b > 1 ? "," : "", b);
        u += (size_t)snprintf(text + u, sizeof text - u, "]}\n");
    }
    const char *p = WRITE("rep.jsonl", text);
    trc_options o = opts(64);
    double size = 1e6;
    trc_reader *r;
    kvf_err err = {0};
    ck_assert_msg(!trc_reader_open(&r, p, &o, &err), "%s", err.msg);
    trc_stats s;
    ck_assert_msg(!trc_stats_compute(r, &size, 1, &s, &err), "%s", err.msg);
    trc_reader_close(r);
    ck_assert_msg(s.hit_tokens == 960, "ideal hit tokens %llu, want 960",
                  (unsigned long long)s.hit_tokens);
    ck_assert_msg(s.cache_hit_rate[0] == 960.0 / 2048, "LRU hit rate %.6f, want %.6f",
                  s.cache_hit_rate[0], 960.0 / 2048);
}
END_TEST

START_TEST(test_stats_mooncake_ideal_reuse) {
    const char *p = trace_path("mooncake_conversation.jsonl");
    ck_assert_msg(p != NULL, "mooncake trace not found");
    const uint32_t sizes[2] = {64, 512};
    for (int k = 0; k < 2; k++) {
        uint64_t hit, total, n;
        mooncake_independent(p, sizes[k], &hit, &total, &n);
        trc_options o = opts(sizes[k]);
        trc_stats s;
        kvf_err err = {0};
        ck_assert_msg(!trc_stats_file(p, &o, &s, &err), "%s", err.msg);
        ck_assert_uint_eq(s.requests, n);
        ck_assert_uint_eq(s.input_tokens.total, total);
        ck_assert_msg(s.hit_tokens == hit, "B=%u: library %llu hit tokens, independent %llu",
                      sizes[k], (unsigned long long)s.hit_tokens, (unsigned long long)hit);
        double rate = (double)hit / (double)total;
        ck_assert_msg(rate > 0.36 && rate < 0.39, "ideal reuse %.4f not ~37 %%", rate);
        ck_assert(fabs(s.ideal_hit_rate - rate) < 1e-12);
        // LRU curves: non-decreasing in size, never above the ideal
        for (uint32_t i = 0; i < s.n_sizes; i++) {
            ck_assert(s.cache_hit_rate[i] <= s.ideal_hit_rate + 1e-12);
            if (i) ck_assert(s.cache_hit_rate[i] >= s.cache_hit_rate[i - 1] - 1e-12);
        }
    }
}
END_TEST

// Percentiles and rate of Azure against an independent computation.
START_TEST(test_stats_azure_lengths_and_rate) {
    const char *p = trace_path("azure2023_conv.csv");
    ck_assert(p != NULL);
    FILE *f = fopen(p, "r");
    char line[256];
    ck_assert(fgets(line, sizeof line, f));
    double *in = malloc(40000 * sizeof *in), *out = malloc(40000 * sizeof *out);
    size_t n = 0;
    double t0 = 0, t1 = 0;
    while (fgets(line, sizeof line, f)) {
        int hh, mm;
        double ss;
        long a, b;
        ck_assert(sscanf(line, "%*d-%*d-%*d %d:%d:%lf,%ld,%ld", &hh, &mm, &ss, &a, &b) == 5);
        double t = hh * 3600.0 + mm * 60.0 + ss;
        if (!n) t0 = t;
        t1 = t;
        in[n] = (double)(a ? a : 1);
        out[n] = (double)(b ? b : 1);
        n++;
    }
    fclose(f);
    kvf_sort_doubles(in, n);
    kvf_sort_doubles(out, n);
    trc_options o = opts(64);
    trc_stats s;
    kvf_err err = {0};
    ck_assert_msg(!trc_stats_file(p, &o, &s, &err), "%s", err.msg);
    ck_assert_uint_eq(s.requests, n);
    ck_assert(fabs(s.input_tokens.p50 - kvf_percentile_sorted(in, n, 50)) < 1e-9);
    ck_assert(fabs(s.input_tokens.p90 - kvf_percentile_sorted(in, n, 90)) < 1e-9);
    ck_assert(fabs(s.input_tokens.p99 - kvf_percentile_sorted(in, n, 99)) < 1e-9);
    ck_assert(fabs(s.output_tokens.p99 - kvf_percentile_sorted(out, n, 99)) < 1e-9);
    ck_assert_msg(fabs(s.span_s - (t1 - t0)) < 1e-6, "span %f vs %f", s.span_s, t1 - t0);
    ck_assert(s.hit_tokens == 0 && s.ideal_hit_rate == 0);
    ck_assert(strstr(s.notes, "no block ids"));
    free(in);
    free(out);
    // rate rescale hits the asked rate exactly
    o.rate_rps = 20;
    ck_assert_msg(!trc_stats_file(p, &o, &s, &err), "%s", err.msg);
    ck_assert_msg(fabs(s.rate_rps - 20) < 1e-3, "rate %f", s.rate_rps);
    ck_assert(strstr(s.notes, "rate rescaled"));
}
END_TEST

// ---- block mapping ----------------------------------------------------------------------
START_TEST(test_block_mapping_512_to_64) {
    kvt_tmp_make("kvf_trc");
    // in 1300: 512-blocks [10, 11, 12(partial 276)] -> 64-blocks: floor(1300/64) = 20
    const char *p = WRITE("m.jsonl", "{\"timestamp\": 0, \"input_length\": 1300, "
                                     "\"output_length\": 5, \"hash_ids\": [10, 11, 12]}\n"
                                     "{\"timestamp\": 1000, \"input_length\": 1024, "
                                     "\"output_length\": 5, \"hash_ids\": [10, 11]}\n");
    trc_options o = opts(64);
    trc_reader *r;
    kvf_err err = {0};
    ck_assert(!trc_reader_open(&r, p, &o, &err));
    trc_request q;
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert_uint_eq(q.n_blocks, 1300 / 64);
    const uint64_t src[3] = {10, 11, 12};
    for (uint32_t i = 0; i < q.n_blocks; i++) {
        // one group per source block: its high 61 bits, the sub-block index in the low 3
        ck_assert_msg(q.blocks[i] == ((kvf_hash64(kvf_hash64(src[i / 8])) & ~7ULL) | (i % 8)),
                      "block %u", i);
        ck_assert_msg(i % 8 == 0 || (q.blocks[i] >> 3) == (q.blocks[i - 1] >> 3), "block %u", i);
        ck_assert_msg(i % 8 != 0 || i == 0 || (q.blocks[i] >> 3) != (q.blocks[i - 1] >> 3),
                      "block %u", i);
    }
    // more than 8 sub-blocks: every 8 get their own group
    ck_assert(trc_block_sub_id(11, 9) >> 3 != trc_block_sub_id(11, 1) >> 3);
    ck_assert_uint_eq(trc_block_sub_id(11, 9) & 7, 1);
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert_int_eq(q.arrival_ns, 1000LL * 1000000);
    ck_assert_uint_eq(q.n_blocks, 16);
    ck_assert(q.blocks[15] == trc_block_sub_id(11, 7));
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 0);
    trc_reader_close(r);
    // 512 -> 512: partial last block dropped, ids unchanged
    o = opts(512);
    ck_assert(!trc_reader_open(&r, p, &o, &err));
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert_uint_eq(q.n_blocks, 2);
    ck_assert(q.blocks[0] == 10 && q.blocks[1] == 11);
    trc_reader_close(r);
    // 512 -> 1024: one block named by the last source block it covers
    o = opts(1024);
    ck_assert(!trc_reader_open(&r, p, &o, &err));
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert_uint_eq(q.n_blocks, 1);
    ck_assert(q.blocks[0] == 11);
    trc_reader_close(r);
    // 512 -> 32: 16 sub-blocks a source block, two groups of 8 each (the reader forms a
    // group's hash once; every sub-block as the formula gives it)
    o = opts(32);
    ck_assert(!trc_reader_open(&r, p, &o, &err));
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert_uint_eq(q.n_blocks, 1300 / 32);
    for (uint32_t i = 0; i < q.n_blocks; i++) {
        uint32_t j = i % 16;
        uint64_t want = (kvf_hash64(kvf_hash64(src[i / 16]) + (j >> 3)) & ~7ULL) | (j & 7);
        ck_assert_msg(q.blocks[i] == want && want == trc_block_sub_id(src[i / 16], j), "block %u",
                      i);
    }
    trc_reader_close(r);
    // length_scale 0.5 -> in 650 -> 10 blocks of 64, the same leading ids
    o = opts(64);
    o.length_scale = 0.5;
    ck_assert(!trc_reader_open(&r, p, &o, &err));
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert_uint_eq(q.input_tokens, 650);
    ck_assert_uint_eq(q.output_tokens, 3);   // 2.5 rounds to 3
    ck_assert_uint_eq(q.n_blocks, 10);
    ck_assert(q.blocks[9] == trc_block_sub_id(11, 1));
    trc_reader_close(r);
    // 100 neither divides nor is divided by 512
    o = opts(100);
    expect_error(p, &o, "m.jsonl:1: field 'block_tokens'", "do not divide");
}
END_TEST

// ---- time shaping ---------------------------------------------------------------------------
START_TEST(test_mooncake_bucket_spread) {
    const char *p = trace_path("mooncake_conversation.jsonl");
    ck_assert(p != NULL);
    trc_options o = opts(64), s = opts(64);
    s.bucket = TRC_BUCKET_SPREAD;
    s.seed = 7;
    trc_reader *a, *b;
    kvf_err err = {0};
    ck_assert(!trc_reader_open(&a, p, &o, &err));
    ck_assert(!trc_reader_open(&b, p, &s, &err));
    ck_assert(strstr(trc_reader_notes(a), "bucket=as_recorded"));
    ck_assert(strstr(trc_reader_notes(b), "bucket=spread"));
    trc_request x, y;
    int64_t last = -1;
    uint64_t moved = 0, n = 0;
    while (trc_reader_next(a, &x, &err) == 1) {
        ck_assert_int_eq(trc_reader_next(b, &y, &err), 1);
        ck_assert(x.arrival_ns % 1000000 == 0);
        ck_assert_msg(y.arrival_ns >= x.arrival_ns && y.arrival_ns < x.arrival_ns + 3000000000LL,
                      "req %llu spread %lld outside its bucket at %lld", (unsigned long long)x.id,
                      (long long)y.arrival_ns, (long long)x.arrival_ns);
        ck_assert(y.arrival_ns >= last);
        last = y.arrival_ns;
        ck_assert(x.input_tokens == y.input_tokens && x.n_blocks == y.n_blocks);
        moved += y.arrival_ns != x.arrival_ns;
        n++;
    }
    ck_assert_int_eq(trc_reader_next(b, &y, &err), 0);
    ck_assert_uint_eq(n, 12031);
    ck_assert(moved > n / 2);
    trc_reader_close(a);
    trc_reader_close(b);
}
END_TEST

START_TEST(test_window_limit_timescale) {
    const char *p = trace_path("azure2023_conv.csv");
    trc_options o = opts(64);
    o.start_ns = 600LL * 1000000000;
    o.end_ns = 1200LL * 1000000000;
    o.time_scale = 0.5;
    trc_reader *r;
    kvf_err err = {0};
    ck_assert(!trc_reader_open(&r, p, &o, &err));
    trc_request q;
    uint64_t n = 0;
    while (trc_reader_next(r, &q, &err) == 1) {
        ck_assert(q.arrival_ns >= 0 && q.arrival_ns < 300LL * 1000000000);
        ck_assert_uint_eq(q.id, n);
        n++;
    }
    trc_reader_close(r);
    ck_assert(n > 1000 && n < 6000);
    o = opts(64);
    o.limit_requests = 123;
    uint64_t m;
    ck_assert(!trc_count(p, &o, &m, &err));
    ck_assert_uint_eq(m, 123);
}
END_TEST

// Azure 7-digit fractions, 2024-style offsets, BurstGPT failures and sessions.
START_TEST(test_csv_formats) {
    kvt_tmp_make("kvf_trc");
    const char *az = WRITE("az.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                     "2024-05-10 00:00:00.0000000+00:00,100,10\n"
                                     "2024-05-10 00:00:00.3194101+00:00,200,0\n"
                                     "2024-05-10 00:00:01.0000001+00:00,300,30\n");
    trc_options o = opts(64);
    trc_reader *r;
    kvf_err err = {0};
    ck_assert_msg(!trc_reader_open(&r, az, &o, &err), "%s", err.msg);
    ck_assert_int_eq(trc_reader_format(r), TRC_FMT_AZURE);
    trc_request q;
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert_int_eq(q.arrival_ns, 0);
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert_int_eq(q.arrival_ns, 319410100);
    ck_assert_uint_eq(q.output_tokens, 1);
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert_int_eq(q.arrival_ns, 1000000100);
    ck_assert_uint_eq(q.n_blocks, 0);
    trc_reader_close(r);
    const char *bg = WRITE("bg.csv", "Timestamp,Model,Request tokens,Response tokens,Total "
                                     "tokens,Log Type,Session ID,Elapsed time\n"
                                     "5,ChatGPT,472,18,490,Conversation log,s1,1.0\n"
                                     "45,ChatGPT,1087,0,1087,Conversation log,s2,2.0\n"
                                     "46.5,GPT-4,300,20,320,API log,s1,0.5\n");
    ck_assert_msg(!trc_reader_open(&r, bg, &o, &err), "%s", err.msg);
    ck_assert_int_eq(trc_reader_format(r), TRC_FMT_BURSTGPT);
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert(q.flags == 0 && q.turn == 0 && q.session != 0 && q.cls == TRC_CLASS_CHATBOT);
    uint64_t s1 = q.session;
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert(q.flags & TRC_F_FAILED);
    ck_assert(q.session != s1 && q.turn == 0 && q.arrival_ns == 40LL * 1000000000);
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert(q.session == s1 && q.turn == 1 && q.cls == TRC_CLASS_OTHER);
    ck_assert_int_eq(q.arrival_ns, 41500000000LL);
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 0);
    trc_reader_close(r);
    roundtrip(bg, &o, "bg.out.jsonl");
    roundtrip(az, &o, "az.out.jsonl");
}
END_TEST

// ---- canonical round trip of every reader ---------------------------------------------------
START_TEST(test_roundtrip_readers) {
    kvt_tmp_make("kvf_trc");
    trc_options o = opts(64);
    o.bucket = TRC_BUCKET_SPREAD;
    ck_assert_uint_eq(roundtrip(trace_path("mooncake_conversation.jsonl"), &o, "mc.jsonl"), 12031);
    o = opts(64);
    ck_assert_uint_eq(roundtrip(trace_path("azure2023_conv.csv"), &o, "az.jsonl"), 19366);
    const char *w = trace_path("weka_agentic_dev.jsonl");
    o = opts(64);
    o.limit_requests = 600;
    ck_assert_uint_eq(roundtrip(w, &o, "weka.jsonl"), 600);
    o = opts(32);
    o.session_users = 3;
    o.limit_requests = 900;
    ck_assert_uint_eq(roundtrip(w, &o, "weka_users.jsonl"), 900);
    // generated traffic: reader output vs canonical file
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.profile = TRC_GEN_MIXED;
    g.rate_rps = 20;
    g.duration_s = 60;
    g.images_p = 0.3;
    const char *gp = kvt_tmp_path("gen.jsonl");
    kvf_err err = {0};
    uint64_t n;
    ck_assert_msg(!trc_gen_write(&g, gp, &n, &err), "%s", err.msg);
    trc_reader *a, *b;
    ck_assert(!trc_gen_open(&a, &g, NULL, &err));
    trc_options oc = opts(64);
    ck_assert(!trc_reader_open(&b, gp, &oc, &err));
    trc_request x, y;
    uint64_t m = 0;
    while (trc_reader_next(a, &x, &err) == 1) {
        ck_assert_int_eq(trc_reader_next(b, &y, &err), 1);
        req_eq(&x, &y, m++);
    }
    ck_assert_int_eq(trc_reader_next(b, &y, &err), 0);
    ck_assert_uint_eq(m, n);
    trc_reader_close(a);
    trc_reader_close(b);
    // and canonical -> canonical
    ck_assert_uint_eq(roundtrip(gp, &oc, "gen2.jsonl"), n);
}
END_TEST

// ---- agentic sessions --------------------------------------------------------------------------
START_TEST(test_sessions_weka) {
    const char *w = trace_path("weka_agentic_dev.jsonl");
    trc_options o = opts(64);
    trc_reader *r;
    kvf_err err = {0};
    ck_assert_msg(!trc_reader_open(&r, w, &o, &err), "%s", err.msg);
    ck_assert_int_eq(trc_reader_format(r), TRC_FMT_SESSIONS);
    trc_request q;
    // blocks of session 1 and session 2 (both number their ids from 1) must not meet
    size_t cap = 1 << 22;
    uint64_t *set = calloc(cap, sizeof *set), *owner = calloc(cap, sizeof *owner);
    uint64_t n = 0, sessions = 0, shared = 0, first_turn_open = 0, same_prev = 0;
    int64_t *prev_of = calloc(4096, sizeof *prev_of);
    uint64_t *sess_of = calloc(4096, sizeof *sess_of);
    int64_t last_start = -1;
    while (trc_reader_next(r, &q, &err) == 1) {
        ck_assert(q.id < 4096);
        prev_of[q.id] = q.prev_id;
        sess_of[q.id] = q.session;
        if (q.turn == 0) {
            sessions++;
            first_turn_open += q.prev_id < 0;
            ck_assert(q.arrival_ns >= last_start);   // Poisson starts in file order
            last_start = q.arrival_ns;
        } else {
            ck_assert_msg(q.prev_id >= 0 && (uint64_t)q.prev_id < q.id, "req %llu prev %lld",
                          (unsigned long long)q.id, (long long)q.prev_id);
            ck_assert(sess_of[q.prev_id] == q.session);
            ck_assert(q.think_ns >= 0);
        }
        ck_assert_uint_le(q.n_blocks, q.input_tokens / 64);
        for (uint32_t i = 0; i < q.n_blocks; i++) {
            uint64_t k = q.blocks[i] ? q.blocks[i] : 1;   // 0 marks an empty slot
            size_t h = (size_t)(kvf_hash64(k) & (cap - 1));
            while (set[h] && set[h] != k)
                h = (h + 1) & (cap - 1);
            if (set[h] && owner[h] != q.session) shared++;
            set[h] = k;
            owner[h] = q.session;
        }
        n++;
    }
    trc_reader_close(r);
    ck_assert_uint_eq(n, 2641);
    ck_assert_uint_eq(sessions, 29);
    ck_assert_uint_eq(first_turn_open, 29);
    ck_assert_msg(shared == 0, "%llu block ids shared across sessions", (unsigned long long)shared);
    // a subagent: two requests wait on the same parent request (its next turn and the
    // subagent's first request run concurrently)
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = i + 1; j < n && j < i + 64; j++)
            if (prev_of[i] >= 0 && prev_of[i] == prev_of[j]) same_prev++;
    ck_assert_msg(same_prev >= 1, "no concurrent subagent found");
    free(set);
    free(owner);
    free(prev_of);
    free(sess_of);
    // N users: sessions beyond the first N wait for the end of an earlier session
    o.session_users = 4;
    ck_assert(!trc_reader_open(&r, w, &o, &err));
    ck_assert(strstr(trc_reader_notes(r), "4 concurrent users"));
    uint64_t waiting_first = 0;
    while (trc_reader_next(r, &q, &err) == 1)
        if (q.turn == 0 && q.prev_id >= 0) waiting_first++;
    trc_reader_close(r);
    ck_assert_uint_eq(waiting_first, 29 - 4);
}
END_TEST

// Distinct nonzero "session" values of a canonical JSONL file, read from each line's text.
static long distinct_sessions(const char *path) {
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    json_t *seen = json_object();
    char line[1 << 16];
    while (fgets(line, sizeof line, f)) {
        // the session field comes before the blocks, which may not fit the buffer
        const char *k = strstr(line, "\"session\":");
        ck_assert_msg(k != NULL, "%s: a line without a session", path);
        long long sid = strtoll(k + 10, NULL, 10);
        char key[32];
        snprintf(key, sizeof key, "%lld", sid);
        if (sid) json_object_set_new(seen, key, json_true());
        while (!strchr(line, '\n') && fgets(line, sizeof line, f)) {
        }
    }
    fclose(f);
    long n = (long)json_object_size(seen);
    json_decref(seen);
    return n;
}

// `trace stats` counts the sessions the requests read belong to: a window of the agentic trace
// (3,600-7,200 s: 506 requests of 17 sessions, none starting there) read 0, as only first turns
// were counted. Checked against the distinct session ids `trace convert` writes for the same
// window and limit, and, for the whole trace, against its lines (one session a line).
START_TEST(test_stats_sessions_counted_in_window) {
    kvt_tmp_make("kvf_trc_sess");
    const char *w = trace_path("weka_agentic_dev.jsonl");
    const char *shape[] = {"--start 3600 --end 7200", "--limit 100", ""};
    for (int i = 0; i < 3; i++) {
        const char *out = kvt_tmp_path("w.jsonl");
        int rc = kvt_sh("%s trace convert %s %s -o %s --force", kvt_bin(), w, shape[i], out);
        ck_assert_msg(rc == 0, "convert %s: exit %d: %s", shape[i], rc, kvt_err);
        long want = distinct_sessions(out);
        rc = kvt_sh("%s trace stats %s %s --json", kvt_bin(), w, shape[i]);
        ck_assert_msg(rc == 0, "stats %s: exit %d: %s", shape[i], rc, kvt_err);
        json_error_t je;
        json_t *j = json_loads(kvt_out, 0, &je);
        ck_assert_msg(j, "stats --json: %s", je.text);
        double got = kvt_num(j, "sessions");
        ck_assert_msg(want > 0 && got == want, "stats %s: %g sessions, the requests hold %ld",
                      shape[i], got, want);
        if (!*shape[i]) {
            char *txt = kvt_slurp(w);
            long lines = kvt_count(txt, "\n");
            free(txt);
            ck_assert_msg(got == lines, "whole trace: %g sessions in %ld lines", got, lines);
        }
        json_decref(j);
    }
    kvt_tmp_remove();
}
END_TEST

START_TEST(test_sessions_small) {
    kvt_tmp_make("kvf_trc");
    // two sessions with identical local ids; one subagent spawned after request 1
    const char *p = WRITE(
        "s.jsonl",
        "{\"id\":\"a\",\"block_size\":64,\"hash_id_scope\":\"local\",\"requests\":["
        "{\"t\":0,\"type\":\"n\",\"in\":200,\"out\":10,\"hash_ids\":[1,2,3],\"api_time\":1},"
        "{\"t\":5,\"type\":\"subagent\",\"requests\":["
        "{\"t\":0,\"type\":\"n\",\"in\":100,\"out\":5,\"hash_ids\":[7],\"api_time\":1},"
        "{\"t\":3,\"type\":\"n\",\"in\":150,\"out\":5,\"hash_ids\":[7,8],\"think_time\":2}]},"
        "{\"t\":10,\"type\":\"n\",\"in\":300,\"out\":10,\"hash_ids\":[1,2,3,4],\"think_time\":9}"
        "]}\n"
        "{\"id\":\"b\",\"block_size\":64,\"hash_id_scope\":\"local\",\"requests\":["
        "{\"t\":0,\"type\":\"n\",\"in\":200,\"out\":10,\"hash_ids\":[1,2,3]}]}\n");
    trc_options o = opts(64);
    o.session_rate = 0.5;
    trc_reader *r;
    kvf_err err = {0};
    ck_assert_msg(!trc_reader_open(&r, p, &o, &err), "%s", err.msg);
    trc_request q[5];
    uint64_t ids[5][4];
    for (int i = 0; i < 5; i++) {
        ck_assert_msg(trc_reader_next(r, &q[i], &err) == 1, "%s", err.msg);
        for (uint32_t k = 0; k < q[i].n_blocks; k++)
            ids[i][k] = q[i].blocks[k];
    }
    ck_assert_int_eq(trc_reader_next(r, &q[0], &err), 0);
    trc_reader_close(r);
    // order by recorded time: parent@0, sub@5, sub@8, parent@10; then session b
    ck_assert(q[0].prev_id == -1 && q[0].input_tokens == 200);
    ck_assert(q[1].input_tokens == 100 && q[1].prev_id == 0);
    ck_assert_int_eq(q[1].think_ns, 4000000000LL);   // 5 - (0 + 1 s api)
    ck_assert(q[2].input_tokens == 150 && q[2].prev_id == 1 && q[2].think_ns == 2000000000LL);
    ck_assert(q[3].input_tokens == 300 && q[3].prev_id == 0 && q[3].think_ns == 9000000000LL);
    ck_assert(q[4].prev_id == -1 && q[4].turn == 0 && q[4].session != q[0].session);
    ck_assert(q[4].arrival_ns > 0);
    for (int k = 0; k < 3; k++)
        ck_assert(ids[4][k] != ids[0][k]);                         // local scope kept apart
    ck_assert(ids[3][0] == ids[0][0] && ids[3][2] == ids[0][2]);   // same session shares
}
END_TEST

// trace stats of path read with *o, with one 640-token (ten-block) LRU cache.
static void stats_640(const char *path, const trc_options *o, trc_stats *s) {
    trc_reader *r;
    kvf_err err = {0};
    ck_assert_msg(!trc_reader_open(&r, path, o, &err), "%s", err.msg);
    double size = 640;
    ck_assert_msg(!trc_stats_compute(r, &size, 1, s, &err), "%s", err.msg);
    trc_reader_close(r);
}

// Two users' sessions (a, b), each two turns 100 s apart over the same 10 blocks of 64
// tokens, as a sessions trace (two.jsonl): read by two users their turns interleave in time
// (a0 b0 a1 b1).
static const char *two_sessions(void) {
    char ses[2][400];
    for (int k = 0; k < 2; k++)
        snprintf(
            ses[k], sizeof ses[k],
            "{\"id\":\"%c\",\"block_size\":64,\"hash_id_scope\":\"local\",\"requests\":["
            "{\"t\":0,\"type\":\"n\",\"in\":700,\"out\":10,\"hash_ids\":[1,2,3,4,5,6,7,8,9,10],"
            "\"api_time\":1},"
            "{\"t\":100,\"type\":\"n\",\"in\":700,\"out\":10,\"hash_ids\":[1,2,3,4,5,6,7,8,9,"
            "10],\"think_time\":99}]}\n",
            'a' + k);
    char text[900];
    snprintf(text, sizeof text, "%s%s", ses[0], ses[1]);
    return WRITE("two.jsonl", text);
}

// trace stats takes a sessions trace in arrival order: two users' sessions, each two turns over
// the same 10 blocks, interleave (a0 b0 a1 b1), so a 10-block LRU never holds a session's
// blocks when its next turn comes. Read session after session, as the file holds them, each
// second turn found its blocks (hit rate 0.457).
START_TEST(test_stats_sessions_in_arrival_order) {
    kvt_tmp_make("kvf_trc");
    const char *p = two_sessions();
    trc_options o = opts(64);
    o.session_users = 2;
    trc_stats s;
    stats_640(p, &o, &s);
    ck_assert_uint_eq(s.requests, 4);
    ck_assert_msg(s.ideal_hit_rate > 0.45, "ideal %.4f", s.ideal_hit_rate);
    ck_assert_msg(s.cache_hit_rate[0] == 0, "a 10-block LRU over interleaved sessions: %.4f",
                  s.cache_hit_rate[0]);
}
END_TEST

// trace stats of a canonical file whose requests carry no blocks: it is read whole and sorted
// (as a converted sessions trace is), with no block array at all. An offset was added to the
// null array (undefined behaviour: clang's sanitizer stops on it, and tests/fuzz/run.sh
// replays the input that found it; GCC's does not check it).
START_TEST(test_stats_canonical_without_blocks) {
    kvt_tmp_make("kvf_trc");
    const char *p = WRITE("noblk.jsonl",
                          "{\"id\":0,\"arrival_ns\":0,\"input_tokens\":130,\"output_tokens\":3,"
                          "\"class\":\"agent\"}\n"
                          "{\"id\":1,\"arrival_ns\":1000,\"input_tokens\":70,\"output_tokens\":2,"
                          "\"class\":\"chatbot\"}\n");
    trc_options o = opts(64);
    trc_stats s;
    stats_640(p, &o, &s);
    ck_assert_uint_eq(s.requests, 2);
    ck_assert_msg(s.ideal_hit_rate == 0 && s.cache_hit_rate[0] == 0, "hits %.4f / %.4f",
                  s.ideal_hit_rate, s.cache_hit_rate[0]);
}
END_TEST

// A canonical file written from a sessions trace (trace convert) keeps its order, one session's
// turns after another's, so turns come before earlier arrivals of later sessions; trace stats
// takes it in arrival order as it takes the source. The two sessions above, converted: their
// turns interleave in time (a0 b0 a1 b1), so a 10-block LRU finds nothing (read in file order,
// a0 a1 b0 b1, each second turn found its blocks: 0.457). The Weka dev trace converted (28
// places out of arrival order; 11 with 3 users) gives the source's statistics, every field;
// read in file order, its 1M-token LRU hit 0.9711 where the source's hits 0.9315.
START_TEST(test_stats_converted_sessions_match_source) {
    kvt_tmp_make("kvf_trc");
    const char *p = two_sessions();
    trc_options o = opts(64);
    o.session_users = 2;
    ck_assert_uint_eq(roundtrip(p, &o, "two_c.jsonl"), 4);
    trc_options oc = opts(64);
    trc_stats s;
    stats_640(kvt_tmp_path("two_c.jsonl"), &oc, &s);
    ck_assert_uint_eq(s.requests, 4);
    ck_assert_msg(s.cache_hit_rate[0] == 0, "a 10-block LRU over interleaved sessions: %.4f",
                  s.cache_hit_rate[0]);

    const char *w = trace_path("weka_agentic_dev.jsonl");
    trc_reader *r;
    kvf_err err = {0};
    for (int k = 0; k < 2; k++) {
        o = opts(64);
        o.session_users = k ? 3 : 0;
        const char *out = kvt_tmp_path(k ? "weka_users.jsonl" : "weka.jsonl");
        ck_assert_uint_eq(roundtrip(w, &o, k ? "weka_users.jsonl" : "weka.jsonl"), 2641);
        // the converted file is out of arrival order, or this checks nothing
        ck_assert_msg(!trc_reader_open(&r, out, &oc, &err), "%s", err.msg);
        trc_request q;
        int64_t last = INT64_MIN;
        uint64_t back = 0;
        while (trc_reader_next(r, &q, &err) == 1) {
            back += q.arrival_ns < last;
            last = q.arrival_ns;
        }
        trc_reader_close(r);
        ck_assert_msg(back > 0, "users %u: the converted file is in arrival order",
                      o.session_users);
        trc_stats a, b;
        ck_assert_msg(!trc_stats_file(w, &o, &a, &err), "%s", err.msg);
        ck_assert_msg(!trc_stats_file(out, &oc, &b, &err), "%s", err.msg);
        ck_assert(a.format == TRC_FMT_SESSIONS && b.format == TRC_FMT_KVFLEET);
        for (uint32_t i = 0; i < a.n_sizes; i++)
            ck_assert_msg(a.cache_hit_rate[i] == b.cache_hit_rate[i],
                          "users %u, LRU %.0f tokens: source %.4f, converted %.4f", o.session_users,
                          a.cache_tokens[i], a.cache_hit_rate[i], b.cache_hit_rate[i]);
        // every other field too (both zeroed before they are filled): all but format and notes
        b.format = a.format;
        memcpy(b.notes, a.notes, sizeof b.notes);
        ck_assert_msg(
            !memcmp(&a, &b, sizeof a),
            "users %u: statistics differ (span %.1f/%.1f s, CV %.4f/%.4f, ideal %.4f/%.4f)",
            o.session_users, a.span_s, b.span_s, a.interarrival_cv, b.interarrival_cv,
            a.ideal_hit_rate, b.ideal_hit_rate);
    }
}
END_TEST

// ---- generator --------------------------------------------------------------------------------
static void gen_stats(const trc_gen_options *g, trc_stats *s) {
    trc_reader *r;
    kvf_err err = {0};
    ck_assert_msg(!trc_gen_open(&r, g, NULL, &err), "%s", err.msg);
    ck_assert_msg(!trc_stats_compute(r, NULL, 0, s, &err), "%s", err.msg);
    trc_reader_close(r);
}

START_TEST(test_gen_rate_and_cv) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.rate_rps = 50;
    g.duration_s = 600;
    trc_stats s;
    gen_stats(&g, &s);
    ck_assert_msg(fabs(s.rate_rps - 50) < 1.5, "poisson rate %f", s.rate_rps);
    ck_assert_msg(fabs(s.interarrival_cv - 1) < 0.05, "poisson cv %f", s.interarrival_cv);
    ck_assert(s.span_s <= 600 && s.span_s > 590);
    g.arrival = TRC_ARRIVAL_GAMMA;
    g.cv = 3;
    gen_stats(&g, &s);
    ck_assert_msg(fabs(s.rate_rps - 50) < 5, "gamma rate %f", s.rate_rps);
    ck_assert_msg(fabs(s.interarrival_cv - 3) < 0.3, "gamma cv %f", s.interarrival_cv);
    g.arrival = TRC_ARRIVAL_DIURNAL;
    g.diurnal_period_s = 600;   // one whole day curve in the run: mean rate is the rate
    gen_stats(&g, &s);
    ck_assert_msg(fabs(s.rate_rps - 50) < 2, "diurnal rate %f", s.rate_rps);
    ck_assert_msg(s.interarrival_cv > 1.0, "diurnal cv %f", s.interarrival_cv);
}
END_TEST

START_TEST(test_gen_lengths) {
    // fixed lengths, single turn, no system prompt: every request exactly as asked
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.rate_rps = 20;
    g.duration_s = 100;
    g.input_len = 777;
    g.output_len = 55;
    g.mean_turns = 1;
    g.system_tokens = 0;
    g.images_p = 0.25;
    trc_stats s;
    gen_stats(&g, &s);
    ck_assert(s.input_tokens.p50 == 777 && s.input_tokens.p99 == 777 && s.input_tokens.max == 777);
    ck_assert(s.output_tokens.mean == 55);
    ck_assert_uint_eq(s.sessions, s.requests);
    ck_assert_uint_eq(s.hit_tokens, 0);
    double img = (double)s.with_images / (double)s.requests;
    ck_assert_msg(fabs(img - 0.25) < 0.05, "images share %f", img);
    // empirical lengths: percentiles follow the file's
    const char *lp = trace_path("sarathi_sharegpt8k_lengths.csv");
    ck_assert(lp != NULL);
    FILE *f = fopen(lp, "r");
    char line[512];
    ck_assert(fgets(line, sizeof line, f));
    double *in = malloc(40000 * sizeof *in), *out = malloc(40000 * sizeof *out);
    size_t n = 0;
    long a, b;
    while (fgets(line, sizeof line, f) && sscanf(line, "%ld,%ld", &a, &b) == 2) {
        in[n] = a ? (double)a : 1;
        out[n] = b ? (double)b : 1;
        n++;
    }
    fclose(f);
    kvf_sort_doubles(in, n);
    kvf_sort_doubles(out, n);
    trc_gen_options_default(&g);
    g.rate_rps = 100;
    g.duration_s = 300;
    g.lengths_path = lp;
    g.mean_turns = 1;
    g.system_tokens = 0;
    gen_stats(&g, &s);
    const double ps[3] = {50, 90, 99};
    const double gi[3] = {s.input_tokens.p50, s.input_tokens.p90, s.input_tokens.p99};
    const double go[3] = {s.output_tokens.p50, s.output_tokens.p90, s.output_tokens.p99};
    for (int i = 0; i < 3; i++) {
        double ei = kvf_percentile_sorted(in, n, ps[i]), eo = kvf_percentile_sorted(out, n, ps[i]);
        double tol = i == 2 ? 0.08 : 0.04;
        ck_assert_msg(fabs(gi[i] - ei) <= tol * ei, "input p%.0f %f vs file %f", ps[i], gi[i], ei);
        ck_assert_msg(fabs(go[i] - eo) <= tol * eo + 1, "output p%.0f %f vs file %f", ps[i], go[i],
                      eo);
    }
    free(in);
    free(out);
}
END_TEST

// Reuse: recompute the hit tokens from the session/turn structure the generator promises.
START_TEST(test_gen_reuse_matches_structure) {
    trc_gen_profile profs[2] = {TRC_GEN_CHATBOT, TRC_GEN_MIXED};
    for (int pi = 0; pi < 2; pi++) {
        trc_gen_options g;
        trc_gen_options_default(&g);
        g.profile = profs[pi];
        g.rate_rps = 30;
        g.duration_s = 300;
        g.input_len = 300;
        g.output_len = 200;
        g.system_tokens = 1000;
        g.mean_turns = 4;
        g.seed = 11;
        const uint32_t B = 64;
        trc_reader *r;
        kvf_err err = {0};
        ck_assert(!trc_gen_open(&r, &g, NULL, &err));
        size_t cap = 1 << 16;
        uint64_t *key = calloc(cap, sizeof *key);
        uint32_t *pin = calloc(cap, sizeof *pin), *pout = calloc(cap, sizeof *pout);
        bool cls_seen[TRC_CLASS_COUNT] = {0};
        uint64_t hit = 0, total = 0, n = 0, turns = 0;
        trc_request q;
        while (trc_reader_next(r, &q, &err) == 1) {
            size_t h = (size_t)(kvf_hash64(q.session) & (cap - 1));
            while (key[h] && key[h] != q.session)
                h = (h + 1) & (cap - 1);
            uint64_t e;
            if (q.turn == 0) {
                ck_assert(!key[h]);
                ck_assert_uint_eq(q.input_tokens, 1000 + 300);
                e = cls_seen[q.cls] ? (1000 / B) * B : 0;
            } else {
                ck_assert(key[h] == q.session);
                ck_assert_uint_eq(q.input_tokens, pin[h] + pout[h] + 300);
                e = (pin[h] / B) * B;
                turns++;
            }
            if (e > q.input_tokens - 1) e = q.input_tokens - 1;
            hit += e;
            total += q.input_tokens;
            key[h] = q.session;
            pin[h] = q.input_tokens;
            pout[h] = q.output_tokens;
            cls_seen[q.cls] = true;
            n++;
        }
        trc_reader_close(r);
        trc_stats s;
        gen_stats(&g, &s);
        ck_assert_uint_eq(s.requests, n);
        ck_assert_uint_eq(s.input_tokens.total, total);
        ck_assert_msg(s.hit_tokens == hit, "profile %d: stats %llu hit tokens, structure %llu", pi,
                      (unsigned long long)s.hit_tokens, (unsigned long long)hit);
        double mean_turns = (double)s.requests / (double)s.sessions;
        ck_assert_msg(fabs(mean_turns - 4) < 0.4, "mean turns %f", mean_turns);
        ck_assert(turns > n / 2);
        free(key);
        free(pin);
        free(pout);
    }
}
END_TEST

START_TEST(test_gen_deterministic) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.profile = TRC_GEN_AGENT;
    g.rate_rps = 5;
    g.duration_s = 120;
    trc_reader *a, *b;
    kvf_err err = {0};
    ck_assert(!trc_gen_open(&a, &g, NULL, &err));
    ck_assert(!trc_gen_open(&b, &g, NULL, &err));
    trc_request x, y;
    uint64_t i = 0;
    while (trc_reader_next(a, &x, &err) == 1) {
        ck_assert_int_eq(trc_reader_next(b, &y, &err), 1);
        req_eq(&x, &y, i++);
        ck_assert_uint_eq(x.cls, TRC_CLASS_AGENT);
    }
    ck_assert(i > 400);
    trc_reader_close(a);
    trc_reader_close(b);
    g.seed = 2;
    trc_stats s1, s2;
    gen_stats(&g, &s1);
    g.seed = 3;
    gen_stats(&g, &s2);
    ck_assert(s1.input_tokens.total != s2.input_tokens.total);
    // bad options are refused
    g.rate_rps = 0;
    ck_assert_int_eq(trc_gen_open(&a, &g, NULL, &err), KVF_EINVAL);
    trc_gen_options_default(&g);
    g.lengths_path = "/nonexistent/lengths.csv";
    ck_assert_int_eq(trc_gen_open(&a, &g, NULL, &err), KVF_ENOENT);
}
END_TEST

// The LRU curve for several sizes in one pass equals one pass per size, and a plain LRU
// written here agrees with the smallest size on a small trace.
static double naive_lru(const trc_gen_options *g, uint64_t cap_blocks) {
    trc_reader *r;
    kvf_err err = {0};
    ck_assert(!trc_gen_open(&r, g, NULL, &err));
    uint64_t *keys = calloc(cap_blocks, sizeof *keys), *stamp = calloc(cap_blocks, sizeof *stamp);
    uint64_t n = 0, clock = 0, hit = 0, total = 0;
    trc_request q;
    while (trc_reader_next(r, &q, &err) == 1) {
        uint32_t k = 0;
        for (; k < q.n_blocks; k++) {
            bool found = false;
            for (uint64_t i = 0; i < n && !found; i++)
                found = keys[i] == q.blocks[k];
            if (!found) break;
        }
        uint64_t h = (uint64_t)k * 64;
        hit += h < q.input_tokens ? h : q.input_tokens - 1;
        total += q.input_tokens;
        for (uint32_t b = q.n_blocks; b-- > 0;) {   // last to first
            uint64_t i = 0;
            while (i < n && keys[i] != q.blocks[b])
                i++;
            if (i == n) {
                if (n < cap_blocks)
                    n++;
                else {   // evict the least recent
                    uint64_t lo = 0;
                    for (uint64_t j = 1; j < n; j++)
                        if (stamp[j] < stamp[lo]) lo = j;
                    i = lo;
                }
                keys[i] = q.blocks[b];
            }
            stamp[i] = ++clock;
        }
    }
    trc_reader_close(r);
    free(keys);
    free(stamp);
    return (double)hit / (double)total;
}

START_TEST(test_stats_lru_sizes) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.rate_rps = 20;
    g.duration_s = 40;
    g.profile = TRC_GEN_MIXED;
    g.max_context = 8192;
    const double sizes[4] = {64e3, 8e3, 512e3, 32e3};
    trc_reader *r;
    kvf_err err = {0};
    trc_stats all, one;
    ck_assert(!trc_gen_open(&r, &g, NULL, &err));
    ck_assert(!trc_stats_compute(r, sizes, 4, &all, &err));
    trc_reader_close(r);
    for (int i = 0; i < 4; i++) {
        ck_assert(!trc_gen_open(&r, &g, NULL, &err));
        ck_assert(!trc_stats_compute(r, &sizes[i], 1, &one, &err));
        trc_reader_close(r);
        ck_assert(all.cache_tokens[i] == sizes[i]);
        ck_assert_msg(all.cache_hit_rate[i] == one.cache_hit_rate[0], "size %.0f: %f vs %f",
                      sizes[i], all.cache_hit_rate[i], one.cache_hit_rate[0]);
    }
    double naive = naive_lru(&g, 8000 / 64);
    ck_assert_msg(fabs(all.cache_hit_rate[1] - naive) < 1e-12, "LRU 8k tokens %f, naive %f",
                  all.cache_hit_rate[1], naive);
    ck_assert(all.cache_hit_rate[1] <= all.cache_hit_rate[3] &&
              all.cache_hit_rate[3] <= all.cache_hit_rate[0] &&
              all.cache_hit_rate[0] <= all.cache_hit_rate[2] &&
              all.cache_hit_rate[2] <= all.ideal_hit_rate + 1e-12);
}
END_TEST

// Histogram percentiles beyond the exact window stay within 0.2 %.
START_TEST(test_stats_sketch_large) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.rate_rps = 1000;
    g.duration_s = 100;   // ~100k requests, past the exact window
    g.mean_turns = 1;
    g.system_tokens = 0;
    trc_reader *r;
    kvf_err err = {0};
    ck_assert(!trc_gen_open(&r, &g, NULL, &err));
    size_t cap = 200000, n = 0;
    double *v = malloc(cap * sizeof *v);
    trc_request q;
    while (trc_reader_next(r, &q, &err) == 1) {
        ck_assert(n < cap);
        v[n++] = q.input_tokens;
    }
    trc_reader_close(r);
    ck_assert(n > 70000);
    kvf_sort_doubles(v, n);
    trc_stats s;
    gen_stats(&g, &s);
    const double ps[3] = {50, 90, 99},
                 got[3] = {s.input_tokens.p50, s.input_tokens.p90, s.input_tokens.p99};
    for (int i = 0; i < 3; i++) {
        double e = kvf_percentile_sorted(v, n, ps[i]);
        ck_assert_msg(fabs(got[i] - e) <= 0.002 * e + 0.5, "p%.0f %f vs %f", ps[i], got[i], e);
    }
    free(v);
}
END_TEST

// ---- malformed input ---------------------------------------------------------------------------
START_TEST(test_bad_inputs) {
    kvt_tmp_make("kvf_trc");
    trc_options o = opts(64);
    const char *ok1 = "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 5, "
                      "\"hash_ids\": [1]}\n";
    char buf[2048];
    snprintf(buf, sizeof buf, "%s%s{\"timestamp\": 5, \"input_length\": 1\n", ok1, ok1);
    expect_error(WRITE("badjson.jsonl", buf), &o, "badjson.jsonl:3: bad JSON", NULL);
    snprintf(buf, sizeof buf, "%s{\"timestamp\": 5, \"output_length\": 5, \"hash_ids\": []}\n",
             ok1);
    expect_error(WRITE("missing.jsonl", buf), &o, "missing.jsonl:2: field 'input_length'",
                 "missing");
    snprintf(buf, sizeof buf, "%s{\"timestamp\": 5, \"input_length\": 9, \"output_length\": -4}\n",
             ok1);
    expect_error(WRITE("neg.jsonl", buf), &o, "neg.jsonl:2: field 'output_length'", "negative");
    snprintf(buf, sizeof buf,
             "{\"timestamp\": 9000, \"input_length\": 1, \"output_length\": 1}\n"
             "{\"timestamp\": 9000, \"input_length\": 1, \"output_length\": 1}\n"
             "{\"timestamp\": 3000, \"input_length\": 1, \"output_length\": 1}\n");
    expect_error(WRITE("time.jsonl", buf), &o, "time.jsonl:3: field 'timestamp'", "backwards");
    trc_options sp = o;
    sp.bucket = TRC_BUCKET_SPREAD;
    expect_error(kvt_tmp_path("time.jsonl"), &sp, "time.jsonl:3: field 'timestamp'", "backwards");
    expect_error(WRITE("empty.jsonl", ""), &o, "empty.jsonl:1: empty file", NULL);
    expect_error(WRITE("blank.csv", "\n\n"), &o, "blank.csv:3: empty file", NULL);
    trc_options fa = o;
    fa.format = TRC_FMT_AZURE;
    expect_error(WRITE("empty.csv", ""), &fa, "empty.csv:1: empty file", NULL);
    fa.format = TRC_FMT_MOONCAKE;
    expect_error(kvt_tmp_path("empty.csv"), &fa, "empty.csv:1: empty file", NULL);
    expect_error(WRITE("semi.csv", "TIMESTAMP;ContextTokens;GeneratedTokens\n"
                                   "2023-11-16 18:15:46.6805900;374;44\n"),
                 &o, "semi.csv:1: field 'TIMESTAMP'", "wrong delimiter");
    expect_error(WRITE("azneg.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                    "2023-11-16 18:15:46.6805900,374,44\n"
                                    "2023-11-16 18:15:47.6805900,-3,44\n"),
                 &o, "azneg.csv:3: field 'ContextTokens'", "negative");
    expect_error(WRITE("azmiss.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                     "2023-11-16 18:15:46.6805900,374\n"),
                 &o, "azmiss.csv:2: field 'GeneratedTokens'", "missing");
    expect_error(WRITE("aztime.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                     "2023-11-16 18:15:46.6805900,374,4\n"
                                     "2023-11-16 18:15:45.0,374,4\n"),
                 &o, "aztime.csv:3: field 'TIMESTAMP'", "backwards");
    expect_error(WRITE("azhdr.csv", "TIMESTAMP,ContextTokens,Foo\n1,2,3\n"), &o,
                 "azhdr.csv:1: field 'GeneratedTokens'", "missing from the header");
    expect_error(WRITE("bgbad.csv", "Timestamp,Model,Request tokens,Response tokens,Total "
                                    "tokens,Log Type\n1,ChatGPT,abc,1,1,Conversation log\n"),
                 &o, "bgbad.csv:2: field 'Request tokens'", "not a token count");
    expect_error(WRITE("sess.jsonl", "{\"block_size\":64,\"requests\":[{\"t\":0,\"out\":3}]}\n"),
                 &o, "sess.jsonl:1: field 'in'", "missing");
    expect_error(WRITE("canon.jsonl", "{\"arrival_ns\":0,\"input_tokens\":5,\"output_tokens\":1}\n"
                                      "{\"arrival_ns\":1,\"input_tokens\":5}\n"),
                 &o, "canon.jsonl:2: field 'output_tokens'", "missing");
    // binary junk: NUL bytes and random bytes in a JSON-lines file and in a CSV file
    char junk[512];
    memcpy(junk, ok1, strlen(ok1));
    size_t jn = strlen(ok1);
    uint64_t x = 12345;
    for (int i = 0; i < 200; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        char c = (char)(x >> 56);
        junk[jn++] = c == '\n' ? 0 : c;
    }
    junk[jn++] = '\n';
    expect_error(write_tmp("junk.jsonl", junk, jn), &o, "junk.jsonl:2: bad JSON", NULL);
    char cj[600];
    const char *h = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
    size_t cn = strlen(h);
    memcpy(cj, h, cn);
    memcpy(cj + cn, junk + strlen(ok1), 200);
    cn += 200;
    cj[cn++] = '\n';
    for (size_t i = strlen(h); i < cn - 1; i++)
        if (cj[i] == '\n' || cj[i] == '"') cj[i] = 'x';
    expect_error(write_tmp("junk.csv", cj, cn), &o, "junk.csv:2: field 'TIMESTAMP'", NULL);
    // skip_bad: bad lines counted, good ones read
    snprintf(buf, sizeof buf,
             "%s{bad\n%s{\"timestamp\": 1, \"input_length\": -1, \"output_length\": 1}\n"
             "{\"timestamp\": 2, \"input_length\": 10, \"output_length\": 1}\n"
             "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 1}\n",
             ok1, ok1);
    const char *sb = WRITE("skip.jsonl", buf);
    trc_options sk = o;
    sk.skip_bad = true;
    trc_reader *r;
    kvf_err err = {0};
    ck_assert(!trc_reader_open(&r, sb, &sk, &err));
    trc_request q;
    uint64_t n = 0;
    while (trc_reader_next(r, &q, &err) == 1)
        n++;
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(trc_reader_skipped(r), 3);
    trc_reader_close(r);
    trc_stats s;
    ck_assert(!trc_stats_file(sb, &sk, &s, &err));
    ck_assert_uint_eq(s.skipped, 3);
    // missing file, undetectable format, bad options
    ck_assert_int_eq(trc_reader_open(&r, kvt_tmp_path("nope.jsonl"), &o, &err), KVF_ENOENT);
    ck_assert(strstr(err.msg, "nope.jsonl"));
    ck_assert_int_eq(trc_reader_open(&r, WRITE("what.txt", "hello world\n"), &o, &err), KVF_EPARSE);
    ck_assert(strstr(err.msg, "what.txt:1: cannot detect"));
    trc_options bo = o;
    bo.time_scale = -1;
    ck_assert_int_eq(trc_reader_open(&r, sb, &bo, &err), KVF_EINVAL);
}
END_TEST

// ---- command line ------------------------------------------------------------------------------
static int run_cmd(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    ck_assert(p != NULL);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *kvf_bin(void);

START_TEST(test_cli) {
    const char *bin = kvf_bin();
    kvt_tmp_make("kvf_trc");
    static char out[1 << 16];
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s trace stats %s --json", bin,
             trace_path("mooncake_conversation.jsonl"));
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    ck_assert_msg(j != NULL, "stats JSON: %s", je.text);
    const char *keys[] = {"requests",      "sessions",        "span_s",
                          "rate_rps",      "interarrival_cv", "input_tokens",
                          "output_tokens", "block_tokens",    "ideal_hit_rate"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(json_object_get(j, keys[i]), "key %s missing", keys[i]);
    const char *sub[] = {"mean", "p50", "p90", "p99"};
    for (size_t i = 0; i < 4; i++) {
        ck_assert(json_is_number(json_object_get(json_object_get(j, "input_tokens"), sub[i])));
        ck_assert(json_is_number(json_object_get(json_object_get(j, "output_tokens"), sub[i])));
    }
    ck_assert_int_eq(json_integer_value(json_object_get(j, "requests")), 12031);
    double ih = json_number_value(json_object_get(j, "ideal_hit_rate"));
    ck_assert(ih > 0.36 && ih < 0.39);
    json_decref(j);
    // gen -> convert -> stats
    snprintf(cmd, sizeof cmd,
             "%s trace gen --profile coding --rate 5 --duration 60 --seed 3 -o %s 2>/dev/null && "
             "%s trace convert %s -o %s 2>/dev/null && %s trace stats %s --json",
             bin, kvt_tmp_path("g.jsonl"), bin, kvt_tmp_path("g.jsonl"), kvt_tmp_path("c.jsonl"),
             bin, kvt_tmp_path("c.jsonl"));
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
    j = json_loads(out, 0, &je);
    ck_assert(j != NULL);
    ck_assert(json_integer_value(json_object_get(j, "requests")) > 200);
    json_decref(j);
    // bad input: exit 2 with file:line:field
    FILE *f = fopen(kvt_tmp_path("bad.jsonl"), "w");
    fputs("{\"timestamp\": 0, \"input_length\": 5, \"output_length\": -1}\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s trace stats %s 2>&1", bin, kvt_tmp_path("bad.jsonl"));
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "bad.jsonl:1: field 'output_length'"), "got: %s", out);
    snprintf(cmd, sizeof cmd, "%s trace gen --profile nope 2>&1", bin);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 2);
}
END_TEST

START_TEST(test_gen_closed_loop) {
    // closed loop: every continued turn names the previous turn of its own session and waits
    // a positive think time after it; first turns stay open loop
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.profile = TRC_GEN_AGENT;
    g.rate_rps = 5;
    g.duration_s = 300;
    g.closed_loop = true;
    g.think_s = 2;
    trc_reader *r = NULL;
    kvf_err err = {0};
    ck_assert_msg(!trc_gen_open(&r, &g, NULL, &err), "%s", err.msg);
    enum { MAXN = 4096 };
    static uint64_t sess[MAXN];
    static uint32_t turn[MAXN];
    trc_request q;
    uint64_t n = 0, closed = 0;
    double think = 0;
    while (trc_reader_next(r, &q, &err) > 0 && n < MAXN) {
        ck_assert_uint_eq(q.id, n);
        sess[n] = q.session;
        turn[n] = q.turn;
        if (q.turn == 0) {
            ck_assert_msg(q.prev_id == -1, "first turn %llu waits on %lld", (unsigned long long)n,
                          (long long)q.prev_id);
        } else {
            ck_assert_msg(q.prev_id >= 0 && (uint64_t)q.prev_id < n,
                          "turn %u of request %llu: prev %lld", q.turn, (unsigned long long)n,
                          (long long)q.prev_id);
            ck_assert_msg(sess[q.prev_id] == q.session && turn[q.prev_id] + 1 == q.turn,
                          "request %llu does not follow its session's previous turn",
                          (unsigned long long)n);
            ck_assert(q.think_ns >= 0);
            think += (double)q.think_ns * 1e-9;
            closed++;
        }
        n++;
    }
    trc_reader_close(r);
    ck_assert_msg(closed > 500, "only %llu closed-loop turns", (unsigned long long)closed);
    ck_assert_msg(fabs(think / (double)closed - 2.0) < 0.2, "mean think %.3f s, want 2",
                  think / (double)closed);
}
END_TEST

// ---- hardening: bounds, references, bytes, outputs ------------------------------------------
// The kvfleet binary (CTest builds it first and names it in KVF_BIN); fails the test without it.
static const char *kvf_bin(void) {
    const char *bin = getenv("KVF_BIN");
    struct stat st;
    ck_assert_msg(bin && !stat(bin, &st), "no kvfleet binary: KVF_BIN is '%s'", bin ? bin : "");
    return bin;
}

START_TEST(test_gen_bounds) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    trc_reader *r = NULL;
    kvf_err err = {0};
    // a vanishing rate in days mode drew a first arrival 1e30 s out (a float-to-long overflow
    // in the weekday): refused, naming the key and the option
    g.days = 1;
    g.rate_rps = 1e-30;
    ck_assert_int_eq(trc_gen_open(&r, &g, NULL, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "rate_rps") && strstr(err.msg, "--rate"), "%s", err.msg);
    // days x rate escaped the request cap (duration_s was checked, not the days)
    g.rate_rps = 1000;
    g.days = 3660;
    ck_assert_int_eq(trc_gen_open(&r, &g, NULL, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "days x 86400 x rate_rps") && strstr(err.msg, "--days"), "%s",
                  err.msg);
    // the same product under max_requests is bounded by it: the stream stops there
    g.max_requests = 50;
    g.warmup_days = 0;
    ck_assert_msg(!trc_gen_open(&r, &g, NULL, &err), "%s", err.msg);
    trc_request q;
    uint64_t n = 0;
    while (trc_reader_next(r, &q, &err) == 1)
        n++;
    trc_reader_close(r);
    ck_assert_uint_eq(n, 50);
    // the warm-up before t = 0 is work too
    g.rate_rps = 1e5;
    g.warmup_days = 365;
    ck_assert_int_eq(trc_gen_open(&r, &g, NULL, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "warmup_days"), "%s", err.msg);
    // the lowest rate allowed, over a month: far-off draws stay finite and inside the horizon
    trc_gen_options_default(&g);
    g.days = 30;
    g.rate_rps = TRC_GEN_MIN_RATE;
    ck_assert_msg(!trc_gen_open(&r, &g, NULL, &err), "%s", err.msg);
    while (trc_reader_next(r, &q, &err) == 1)
        ck_assert_msg(q.arrival_ns >= 0 && q.arrival_ns <= 30LL * 86400 * KVF_NS_PER_S,
                      "arrival %lld", (long long)q.arrival_ns);
    trc_reader_close(r);
    // open-loop mode: rate x duration, and the think time
    trc_gen_options_default(&g);
    g.rate_rps = 1e6;
    g.duration_s = 3e7;
    ck_assert_int_eq(trc_gen_open(&r, &g, NULL, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "rate_rps x duration_s") && strstr(err.msg, "--duration"), "%s",
                  err.msg);
    trc_gen_options_default(&g);
    g.closed_loop = true;
    g.think_s = 1e300;
    ck_assert_int_eq(trc_gen_open(&r, &g, NULL, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "think_s"), "%s", err.msg);
    trc_gen_options_default(&g);
    g.output_len = 1u << 30;
    ck_assert_int_eq(trc_gen_open(&r, &g, NULL, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "output_len"), "%s", err.msg);
    // the command: exit 2 with the option named
    const char *bin = kvf_bin();
    static char out[1 << 14];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s trace gen --profile chatbot --days 1 --rate 1e-30 2>&1", bin);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "--rate"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s trace gen --profile chatbot --days 3660 --rate 1000 2>&1", bin);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "--days x --rate"), "%s", out);
}
END_TEST

START_TEST(test_scaling_refused_not_clamped) {
    kvt_tmp_make("kvf_trc");
    trc_options o = opts(64);
    // 1e7 s x time_scale 1e6 = 1e13 s: used to become 9e9 s without a word
    const char *far =
        WRITE("far.jsonl", "{\"arrival_ns\":0,\"input_tokens\":5,\"output_tokens\":1}\n"
                           "{\"arrival_ns\":10000000000000000,\"input_tokens\":5,"
                           "\"output_tokens\":1}\n");
    o.time_scale = 1e6;
    expect_error(far, &o, "far.jsonl:2: field 'arrival_ns'", "time_scale");
    // in range: scaled exactly, not clamped
    const char *near =
        WRITE("near.jsonl", "{\"arrival_ns\":0,\"input_tokens\":5,\"output_tokens\":1}\n"
                            "{\"arrival_ns\":1000000000000,\"input_tokens\":5,"
                            "\"output_tokens\":1}\n");
    trc_reader *r;
    kvf_err err = {0};
    trc_request q;
    ck_assert_msg(!trc_reader_open(&r, near, &o, &err), "%s", err.msg);
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
    ck_assert_int_eq(q.arrival_ns, 1000000000000000000LL);
    trc_reader_close(r);
    // a rate rescale that stretches past the limit names rate_rps
    o = opts(64);
    o.rate_rps = 1e-10;
    expect_error(WRITE("two.jsonl", "{\"arrival_ns\":0,\"input_tokens\":5,\"output_tokens\":1}\n"
                                    "{\"arrival_ns\":1000000000,\"input_tokens\":5,"
                                    "\"output_tokens\":1}\n"),
                 &o, "two.jsonl:2: field 'arrival_ns'", "rate_rps");
    // think times scale too
    o = opts(64);
    o.time_scale = 1e6;
    expect_error(WRITE("think.jsonl",
                       "{\"id\":0,\"arrival_ns\":0,\"input_tokens\":5,\"output_tokens\":1}\n"
                       "{\"id\":1,\"arrival_ns\":5,\"input_tokens\":5,"
                       "\"output_tokens\":1,\"prev_id\":0,"
                       "\"think_ns\":100000000000000000}\n"),
                 &o, "think.jsonl:2: field 'think_ns'", "time_scale");
    // lengths: 1e5 tokens x 1000 is over the 1e7 limit (was clamped to 4e9)
    o = opts(64);
    o.length_scale = 1000;
    expect_error(
        WRITE("long.jsonl", "{\"arrival_ns\":0,\"input_tokens\":100000,\"output_tokens\":1}\n"), &o,
        "long.jsonl:1: field 'input_tokens'", "length_scale");
    expect_error(
        WRITE("longo.jsonl", "{\"arrival_ns\":0,\"input_tokens\":1,\"output_tokens\":20000}\n"), &o,
        "longo.jsonl:1: field 'output_tokens'", "length_scale");
    const char *mk = trace_path("mooncake_conversation.jsonl");
    if (mk) expect_error(mk, &o, "mooncake_conversation.jsonl:", "field 'input_length'");
}
END_TEST

START_TEST(test_prev_id_refused) {
    kvt_tmp_make("kvf_trc");
    const char *ok0 = "{\"id\":0,\"arrival_ns\":0,\"input_tokens\":5,\"output_tokens\":1}\n";
    char buf[1024];
    for (int fast = 1; fast >= 0; fast--) {
        trc_json_fast = fast;
        trc_options o = opts(64);
        snprintf(buf, sizeof buf,
                 "%s{\"id\":5,\"arrival_ns\":1,\"input_tokens\":5,"
                 "\"output_tokens\":1,\"prev_id\":3}\n",
                 ok0);
        const char *gap = WRITE("gap.jsonl", buf);
        expect_error(gap, &o, "gap.jsonl:2: field 'prev_id'", "no request");
        expect_error(WRITE("below.jsonl",
                           "{\"id\":10,\"arrival_ns\":0,\"input_tokens\":5,\"output_tokens\":1}\n"
                           "{\"id\":11,\"arrival_ns\":1,\"input_tokens\":5,\"output_tokens\":1,"
                           "\"prev_id\":4}\n"),
                     &o, "below.jsonl:2: field 'prev_id'", "no request");
        snprintf(buf, sizeof buf,
                 "%s{\"id\":1,\"arrival_ns\":1,\"input_tokens\":5,"
                 "\"output_tokens\":1,\"prev_id\":1}\n",
                 ok0);
        expect_error(WRITE("self.jsonl", buf), &o, "self.jsonl:2: field 'prev_id'", "earlier");
        snprintf(buf, sizeof buf,
                 "%s{\"id\":1,\"arrival_ns\":1,\"input_tokens\":5,"
                 "\"output_tokens\":1,\"prev_id\":2}\n",
                 ok0);
        expect_error(WRITE("fwd.jsonl", buf), &o, "fwd.jsonl:2: field 'prev_id'", "earlier");
        // without ids the key is the line's position: prev_id 1 on line 2 is itself
        expect_error(WRITE("noid.jsonl",
                           "{\"arrival_ns\":0,\"input_tokens\":5,\"output_tokens\":1}\n"
                           "{\"arrival_ns\":1,\"input_tokens\":5,\"output_tokens\":1,"
                           "\"prev_id\":1}\n"),
                     &o, "noid.jsonl:2: field 'prev_id'", NULL);
        // skip_bad: a reference into a hole becomes open loop
        trc_options sk = o;
        sk.skip_bad = true;
        trc_reader *r;
        kvf_err err = {0};
        trc_request q;
        ck_assert_msg(!trc_reader_open(&r, gap, &sk, &err), "%s", err.msg);
        ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
        ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
        ck_assert_int_eq(q.prev_id, -1);
        trc_reader_close(r);
        // a reference to a request the window dropped is legitimate: open loop, no error
        snprintf(buf, sizeof buf,
                 "%s{\"id\":1,\"arrival_ns\":2000000000,\"input_tokens\":5,"
                 "\"output_tokens\":1,\"prev_id\":0}\n",
                 ok0);
        const char *win = WRITE("win.jsonl", buf);
        trc_options wo = o;
        wo.start_ns = KVF_NS_PER_S;
        ck_assert_msg(!trc_reader_open(&r, win, &wo, &err), "%s", err.msg);
        ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
        ck_assert_int_eq(q.prev_id, -1);
        trc_reader_close(r);
        ck_assert_msg(!trc_reader_open(&r, win, &o, &err), "%s", err.msg);
        ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
        ck_assert_int_eq(trc_reader_next(r, &q, &err), 1);
        ck_assert_int_eq(q.prev_id, 0);
        trc_reader_close(r);
    }
}
END_TEST

START_TEST(test_csv_nul_refused) {
    kvt_tmp_make("kvf_trc");
    trc_options o = opts(64);
    static const char az[] = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                             "2023-11-16 18:15:46.6805900,374,44\n"
                             "2023-11-16 18:15:47.6805900,37\0"
                             "4,44\n";
    expect_error(write_tmp("nul.csv", az, sizeof az - 1), &o, "nul.csv:3: field 'ContextTokens'",
                 "NUL");
    static const char az2[] = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                              "2023-11-16 18:15:46.68\0"
                              "05900,374,44\n";
    expect_error(write_tmp("nult.csv", az2, sizeof az2 - 1), &o, "nult.csv:2: field 'TIMESTAMP'",
                 "NUL");
    // a field nothing parses as a number (the model name) was silently cut short
    static const char bg[] =
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "1,Chat\0"
        "GPT,10,5,15,Conversation log\n";
    expect_error(write_tmp("nulm.csv", bg, sizeof bg - 1), &o, "nulm.csv:2: field 'Model'", "NUL");
    static const char ex[] = "TIMESTAMP,ContextTokens,GeneratedTokens,Note\n"
                             "2023-11-16 18:15:46.6805900,374,44,a\0"
                             "b\n";
    expect_error(write_tmp("nulx.csv", ex, sizeof ex - 1), &o, "nulx.csv:2: field 'column 4'",
                 "NUL");
    static const char hd[] = "TIMESTAMP,Context\0"
                             "Tokens,GeneratedTokens\n"
                             "2023-11-16 18:15:46.6805900,374,44\n";
    o.format = TRC_FMT_AZURE;   // detection stops at the NUL
    expect_error(write_tmp("nulh.csv", hd, sizeof hd - 1), &o, "nulh.csv:1: field 'column 2'",
                 "NUL");
}
END_TEST

static bool dir_has_tmp(const char *dir) {
    char cmd[600], out[4096];
    snprintf(cmd, sizeof cmd, "ls -a %s", dir);
    run_cmd(cmd, out, sizeof out);
    return strstr(out, ".tmp.") != NULL;
}

static char *slurp(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    char *b = malloc((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, f);
    fclose(f);
    return b;
}

START_TEST(test_outputs_safe) {
    kvt_tmp_make("kvf_trc");
    const char *in =
        WRITE("in.jsonl", "{\"arrival_ns\":0,\"input_tokens\":5,\"output_tokens\":1}\n"
                          "{\"arrival_ns\":7,\"input_tokens\":9,\"output_tokens\":2}\n");
    size_t n0, n1;
    char *orig = slurp(in, &n0);
    static char same_buf[3][512], fifo[512], dirp[512], oldp[512];   // tmp_path's buffers rotate
    snprintf(same_buf[0], 512, "%s", in);
    snprintf(same_buf[1], 512, "%s", kvt_tmp_path("sym.jsonl"));
    snprintf(same_buf[2], 512, "%s", kvt_tmp_path("hard.jsonl"));
    in = same_buf[0];
    ck_assert(symlink(in, same_buf[1]) == 0);
    ck_assert(link(in, same_buf[2]) == 0);
    trc_writer *w;
    kvf_err err = {0};
    const char *same[] = {same_buf[0], same_buf[1], same_buf[2]};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(trc_writer_create(&w, same[i], 64, TRC_W_FORCE, in, &err), KVF_EINVAL);
        ck_assert_msg(strstr(err.msg, same[i]) && strstr(err.msg, "same file"), "%s", err.msg);
    }
    // an existing output is kept unless forced; a discarded write keeps it too
    snprintf(oldp, 512, "%s", WRITE("old.jsonl", "keep me\n"));
    const char *old = oldp;
    ck_assert_int_eq(trc_writer_create(&w, old, 64, 0, in, &err), KVF_EINVAL);
    ck_assert_msg(strstr(err.msg, "old.jsonl") && strstr(err.msg, "--force"), "%s", err.msg);
    ck_assert_msg(!trc_writer_create(&w, old, 64, TRC_W_FORCE, in, &err), "%s", err.msg);
    trc_request q = {.input_tokens = 1, .output_tokens = 1, .prev_id = -1};
    ck_assert(!trc_writer_put(w, &q, &err));
    ck_assert(dir_has_tmp(kvt_tmp));   // written beside, under a temporary name
    trc_writer_discard(w);
    size_t nk;
    char *kept = slurp(old, &nk);
    ck_assert(nk == 8 && !memcmp(kept, "keep me\n", 8));
    free(kept);
    ck_assert(!dir_has_tmp(kvt_tmp));
    ck_assert_msg(!trc_writer_create(&w, old, 64, TRC_W_FORCE, in, &err), "%s", err.msg);
    ck_assert(!trc_writer_put(w, &q, &err));
    ck_assert(!trc_writer_close(w, &err));
    kept = slurp(old, &nk);
    ck_assert(nk > 8 && !strncmp(kept, "{\"id\":0", 7));
    free(kept);
    ck_assert(!dir_has_tmp(kvt_tmp));
    // special files, as outputs and as inputs (a FIFO must not block the open)
    snprintf(fifo, 512, "%s", kvt_tmp_path("fifo"));
    snprintf(dirp, 512, "%s", kvt_tmp_path("dir"));
    ck_assert(mkfifo(fifo, 0600) == 0);
    ck_assert(mkdir(dirp, 0700) == 0);
    const char *special[] = {fifo, dirp, "/dev/null"};
    const char *kind[] = {"FIFO", "directory", "character device"};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(trc_writer_create(&w, special[i], 64, TRC_W_FORCE, NULL, &err),
                         KVF_EINVAL);
        ck_assert_msg(strstr(err.msg, special[i]) && strstr(err.msg, kind[i]), "%s", err.msg);
        trc_reader *r;
        ck_assert_int_ne(trc_reader_open(&r, special[i], NULL, &err), KVF_OK);
        ck_assert_msg(strstr(err.msg, special[i]) && strstr(err.msg, kind[i]), "%s", err.msg);
    }
    // the command: exit 2, the file named, the input intact
    const char *bin = kvf_bin();
    static char out[1 << 14];
    char cmd[2048];
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "%s trace convert %s -o %s --force 2>&1", bin, in, same[i]);
        ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 2);
        ck_assert_msg(strstr(out, same[i]) && strstr(out, "same file"), "%s", out);
        snprintf(cmd, sizeof cmd, "%s trace convert %s -o %s 2>&1", bin, same[i], in);
        ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 2);
    }
    char *now = slurp(in, &n1);
    ck_assert(n1 == n0 && !memcmp(now, orig, n0));
    free(now);
    snprintf(cmd, sizeof cmd, "%s trace convert %s -o %s 2>&1", bin, in, old);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "old.jsonl") && strstr(out, "--force"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s trace convert %s -o %s --force 2>&1", bin, in, old);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "%s trace convert %s -o %s 2>&1", bin, in, fifo);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "FIFO"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s trace gen --profile chatbot --duration 10 -o %s 2>&1", bin, old);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "%s trace gen --profile chatbot --duration 10 -o %s --force 2>&1",
             bin, old);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
    ck_assert(!dir_has_tmp(kvt_tmp));
    free(orig);
}
END_TEST

START_TEST(test_replay_retention_boundary) {
    // three requests on the same four blocks at 0 s, 10 s and 19.999999999 s: with a 10 s
    // retention the second finds them exactly 10 s old (expired, the rule of the simulator's
    // store: age >= retention), the third 9.999999999 s old (kept)
    kvt_tmp_make("kvf_trc");
    const char *p =
        WRITE("ret.jsonl",
              "{\"arrival_ns\":0,\"input_tokens\":256,\"output_tokens\":1,\"blocks\":[1,2,3,4]}\n"
              "{\"arrival_ns\":10000000000,\"input_tokens\":256,\"output_tokens\":1,"
              "\"blocks\":[1,2,3,4]}\n"
              "{\"arrival_ns\":19999999999,\"input_tokens\":256,\"output_tokens\":1,"
              "\"blocks\":[1,2,3,4]}\n");
    trc_options o = opts(64);
    trc_reader *r;
    kvf_err err = {0};
    ck_assert_msg(!trc_reader_open(&r, p, &o, &err), "%s", err.msg);
    trc_replay *rp;
    ck_assert_msg(!trc_replay_load(r, &rp, &err), "%s", err.msg);
    trc_reader_close(r);
    const double ttl[] = {10.0, 10.5, 9.0, 0};
    // hits: 10 s -> only the third; 10.5 s -> both; 9 s -> none; 0 -> both; a hit of a whole
    // prompt is its first three blocks (192 of 256 tokens: whole blocks, the last recomputed)
    const double want[] = {192.0 / 768, 384.0 / 768, 0.0, 384.0 / 768};
    double grid[4];
    const uint64_t caps[] = {0};
    ck_assert(!trc_replay_grid(rp, caps, 1, ttl, 4, grid, &err));
    for (int i = 0; i < 4; i++) {
        double h;
        ck_assert(!trc_replay_hit_rate(rp, 0, ttl[i], &h, &err));
        ck_assert_msg(fabs(h - want[i]) < 1e-12 && fabs(grid[i] - want[i]) < 1e-12,
                      "ttl %g s: hit rate %.6f, grid %.6f, want %.6f", ttl[i], h, grid[i], want[i]);
    }
    trc_replay_free(rp);
}
END_TEST

// ---- one parse, the cache, the fast scanner ---------------------------------------------------
// Reads a and b side by side and compares every request field by field; returns the count.
static uint64_t compare_reads(const char *pa, const trc_options *oa, const char *pb,
                              const trc_options *ob, bool notes) {
    trc_reader *a, *b;
    kvf_err ea = {0}, eb = {0};
    kvf_status sa = trc_reader_open(&a, pa, oa, &ea), sb = trc_reader_open(&b, pb, ob, &eb);
    ck_assert_msg(sa == sb && !strcmp(ea.msg, eb.msg), "open %s: %d '%s' vs %d '%s'", pa, sa,
                  ea.msg, sb, eb.msg);
    if (sa) return 0;
    if (notes) ck_assert_str_eq(trc_reader_notes(a), trc_reader_notes(b));
    trc_request x, y;
    uint64_t m = 0;
    for (;;) {
        int ra = trc_reader_next(a, &x, &ea), rb = trc_reader_next(b, &y, &eb);
        ck_assert_msg(ra == rb, "%s: request %llu: rc %d vs %d ('%s' / '%s')", pa,
                      (unsigned long long)m, ra, rb, ea.msg, eb.msg);
        if (ra < 0) ck_assert_str_eq(ea.msg, eb.msg);
        if (ra <= 0) break;
        req_eq(&x, &y, m++);
    }
    ck_assert_uint_eq(trc_reader_skipped(a), trc_reader_skipped(b));
    trc_reader_close(a);
    trc_reader_close(b);
    return m;
}

static void copy_file(const char *from, const char *to) {
    size_t n;
    char *b = slurp(from, &n);
    ck_assert(b != NULL);
    FILE *f = fopen(to, "wb");
    ck_assert(f && fwrite(b, 1, n, f) == n);
    fclose(f);
    free(b);
}

START_TEST(test_rate_rescale_one_parse) {
    kvt_tmp_make("kvf_trc");
    const char *names[] = {"mooncake_conversation.jsonl", "azure2023_conv.csv",
                           "weka_agentic_dev.jsonl"};
    for (int i = 0; i < 3; i++) {
        const char *src = trace_path(names[i]);
        for (int variant = 0; variant < (i == 2 ? 1 : 2); variant++) {   // sessions: slow
            trc_options o = opts(64);
            if (variant) {   // a first pass that stops early, with spreading
                o.limit_requests = 300;
                o.bucket = TRC_BUCKET_SPREAD;
            }
            // the reference: an unscaled read gives the trace's rate, then a plain time scale
            uint64_t n = 0;
            int64_t lo = INT64_MAX, hi = INT64_MIN;
            trc_reader *r;
            kvf_err err = {0};
            trc_request q;
            ck_assert_msg(!trc_reader_open(&r, src, &o, &err), "%s", err.msg);
            while (trc_reader_next(r, &q, &err) == 1) {
                n++;
                lo = KVF_MIN(lo, q.arrival_ns);
                hi = KVF_MAX(hi, q.arrival_ns);
            }
            trc_reader_close(r);
            double rate = (double)(n - 1) / ((double)(hi - lo) / 1e9), R = 7.5;
            trc_options ref = o, fast = o;
            ref.time_scale = rate / R;
            fast.rate_rps = R;
            // the text is parsed once: after the open, the file may even go away
            char path[600];
            snprintf(path, sizeof path, "%s/copy_%d", kvt_tmp, i);
            copy_file(src, path);
            trc_pass pass;
            ck_assert_msg(!trc_reader_open_pass(&r, path, &fast, &pass, &err), "%s", err.msg);
            ck_assert_uint_eq(pass.requests, n);
            ck_assert_msg(pass.rate_rps == rate, "%s: pass rate %.17g vs %.17g", names[i],
                          pass.rate_rps, rate);
            ck_assert(trc_reader_pass(r) && trc_reader_pass(r)->requests == n);
            FILE *t = fopen(path, "w");   // truncated under the open reader
            fclose(t);
            trc_reader *a;
            ck_assert_msg(!trc_reader_open(&a, src, &ref, &err), "%s", err.msg);
            trc_request x;
            uint64_t m = 0;
            int ra, rb;
            while ((ra = trc_reader_next(a, &x, &err)) == 1) {
                rb = trc_reader_next(r, &q, &err);
                ck_assert_msg(rb == 1, "%s: the spooled reader ended at %llu of %llu: %s", names[i],
                              (unsigned long long)m, (unsigned long long)n, err.msg);
                req_eq(&x, &q, m++);
            }
            ck_assert_int_eq(trc_reader_next(r, &q, &err), 0);
            ck_assert_uint_eq(m, n);
            trc_reader_close(a);
            trc_reader_close(r);
            // and the spooled reader with a rescale equals the plain one when the file stays
            copy_file(src, path);
            ck_assert_uint_eq(compare_reads(src, &ref, path, &fast, false), n);
        }
    }
}
END_TEST

static ino_t inode_of(const char *path) {
    struct stat st;
    return stat(path, &st) ? 0 : st.st_ino;
}

// The one cache file in dir into out (NULL if none or several).
static const char *only_cache_file(const char *dir, char *out, size_t n) {
    char cmd[1200], list[4096];
    snprintf(cmd, sizeof cmd, "ls %.1000s 2>/dev/null", dir);
    run_cmd(cmd, list, sizeof list);
    char *nl = strchr(list, '\n');
    if (!nl || strchr(nl + 1, '\n') || !strstr(list, ".trc")) return NULL;
    *nl = 0;
    snprintf(out, n, "%.700s/%.180s", dir, list);
    return out;
}

// A fresh temporary folder as $XDG_CACHE_HOME; dir gets the trace cache's folder under it.
static void cache_home(char *dir, size_t n) {
    kvt_tmp_make("kvf_trc");
    char home[600];
    snprintf(home, sizeof home, "%s/xdg", kvt_tmp);
    setenv("XDG_CACHE_HOME", home, 1);
    snprintf(dir, n, "%s/kvfleet", home);
}

START_TEST(test_cache_identical_and_robust) {
    char dir[700], cfile[900];
    cache_home(dir, sizeof dir);
    const char *names[] = {"mooncake_conversation.jsonl", "azure2023_conv.csv",
                           "weka_agentic_dev.jsonl"};
    for (int i = 0; i < 3; i++) {
        const char *src = trace_path(names[i]);
        char path[600];
        snprintf(path, sizeof path, "%s/t_%s", kvt_tmp, names[i]);
        copy_file(src, path);
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
        trc_options off = opts(64), on = opts(64);
        off.cache = TRC_CACHE_OFF;
        on.cache = TRC_CACHE_ON;
        uint64_t n = compare_reads(path, &off, path, &on, true);   // builds the cache
        ck_assert(n > 0);
        ck_assert_msg(only_cache_file(dir, cfile, sizeof cfile), "no cache file in %s", dir);
        ino_t ino = inode_of(cfile);
        ck_assert_uint_eq(compare_reads(path, &off, path, &on, true), n);   // read from the cache
        ck_assert_msg(inode_of(cfile) == ino, "a valid cache was rebuilt");
        if (i == 2) continue;   // the sessions trace is slow to parse: the rest on the others
        // shaping on top of the cache: rate, window, limit, spreading, another block size
        trc_options s1 = off, s2 = on;
        s1.rate_rps = s2.rate_rps = 3;
        s1.bucket = s2.bucket = TRC_BUCKET_SPREAD;
        s1.block_tokens = s2.block_tokens = 16;
        s1.limit_requests = s2.limit_requests = 1000;
        compare_reads(path, &s1, path, &s2, true);
        ck_assert(inode_of(cfile) == ino);
        // corrupt: one byte in the middle, one in the version; then truncated
        size_t len;
        char *b = slurp(cfile, &len);
        long offs[2] = {(long)len / 2, 8};
        for (int k = 0; k < 3; k++) {
            FILE *f = fopen(cfile, k < 2 ? "r+b" : "wb");
            ck_assert(f != NULL);
            if (k < 2) {
                fseek(f, offs[k], SEEK_SET);
                fputc(b[offs[k]] ^ 0x5a, f);
            } else
                ck_assert(fwrite(b, 1, len / 3, f) == len / 3);
            fclose(f);
            ino_t bad = inode_of(cfile);
            ck_assert_uint_eq(compare_reads(path, &off, path, &on, true), n);
            ck_assert_msg(inode_of(cfile) != bad, "%s: corrupt cache %d not rebuilt", names[i], k);
        }
        free(b);
        // stale: the trace changes (same size, later mtime) -> the new content is read
        b = slurp(path, &len);
        char *dig = NULL;
        for (char *c = b + len / 2; c < b + len; c++)
            if (*c >= '1' && *c <= '8') {
                dig = c;
                break;
            }
        ck_assert(dig != NULL);
        (*dig)++;
        FILE *f = fopen(path, "r+b");
        fwrite(b, 1, len, f);
        fclose(f);
        free(b);
        struct timespec ts[2] = {{0, UTIME_OMIT}, {time(NULL) + 100, 0}};
        ck_assert(utimensat(AT_FDCWD, path, ts, 0) == 0);
        compare_reads(path, &off, path, &on, true);
    }
    unsetenv("XDG_CACHE_HOME");
}
END_TEST

// The cache built by a run that rescales the rate: the measuring pass tees the records into the
// cache's temporary file and the reader replays them from it, so that file must be readable as
// well as writable. Read so, with no cache present, the requests are the text's; the cache is
// published and a second read comes from it unchanged.
START_TEST(test_cache_built_under_rate) {
    char dir[700], cfile[900];
    cache_home(dir, sizeof dir);
    const char *names[] = {"mooncake_conversation.jsonl", "azure2023_conv.csv"};
    for (int i = 0; i < 2; i++) {
        char path[600], cmd[1400];
        snprintf(path, sizeof path, "%s/r_%s", kvt_tmp, names[i]);
        copy_file(trace_path(names[i]), path);
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
        trc_options off = opts(64), on = opts(64);
        off.cache = TRC_CACHE_OFF;
        on.cache = TRC_CACHE_ON;
        off.rate_rps = on.rate_rps = 5;
        off.bucket = on.bucket = TRC_BUCKET_SPREAD;
        uint64_t n = compare_reads(path, &off, path, &on, true);   // builds the cache
        ck_assert_msg(n > 1000, "%s: %llu requests", names[i], (unsigned long long)n);
        ck_assert_msg(only_cache_file(dir, cfile, sizeof cfile), "no cache file in %s", dir);
        ino_t ino = inode_of(cfile);
        ck_assert_uint_eq(compare_reads(path, &off, path, &on, true), n);   // from the cache
        ck_assert_msg(inode_of(cfile) == ino, "a valid cache was rebuilt");
        // a limit stops the measuring pass early: the rest comes from the live source
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
        off.limit_requests = on.limit_requests = 500;
        ck_assert_uint_eq(compare_reads(path, &off, path, &on, true), 500);
    }
    unsetenv("XDG_CACHE_HOME");
}
END_TEST

// Every bundled trace file, both ways: the fast scanner against jansson, field by field.
static void fast_vs_jansson(const char *path, const trc_options *o) {
    trc_reader *a, *b;
    kvf_err ea = {0}, eb = {0};
    trc_json_fast = true;
    kvf_status sa = trc_reader_open(&a, path, o, &ea);
    trc_json_fast = false;
    kvf_status sb = trc_reader_open(&b, path, o, &eb);
    ck_assert_msg(sa == sb && !strcmp(ea.msg, eb.msg), "open %s: '%s' vs '%s'", path, ea.msg,
                  eb.msg);
    if (sa) return;
    trc_request x, y;
    uint64_t m = 0;
    for (;;) {
        trc_json_fast = true;
        int ra = trc_reader_next(a, &x, &ea);
        trc_json_fast = false;
        int rb = trc_reader_next(b, &y, &eb);
        ck_assert_msg(ra == rb, "%s: request %llu: fast %d '%s', jansson %d '%s'", path,
                      (unsigned long long)m, ra, ea.msg, rb, eb.msg);
        if (ra < 0) ck_assert_str_eq(ea.msg, eb.msg);
        if (ra <= 0) break;
        req_eq(&x, &y, m++);
    }
    ck_assert_uint_eq(trc_reader_skipped(a), trc_reader_skipped(b));
    trc_reader_close(a);
    trc_reader_close(b);
    trc_json_fast = true;
}

// Spools and cache files are read through a window (trc_cache_win_bytes) that moves along the
// file; at 512 bytes most records straddle its end and the largest do not fit, so the window
// refills and grows. Read so, the cache (built, then verified and read back) and the spool of
// a rate rescale give the same requests as the text.
START_TEST(test_cache_window_smaller_than_records) {
    char dir[700];
    cache_home(dir, sizeof dir);
    const char *names[] = {"mooncake_conversation.jsonl", "azure2023_conv.csv"};
    trc_cache_win_bytes = 512;
    for (int i = 0; i < 2; i++) {
        const char *src = trace_path(names[i]);
        trc_options off = opts(64), on = opts(64);
        off.cache = TRC_CACHE_OFF;
        on.cache = TRC_CACHE_ON;
        if (i == 0) {
            // records over the window: a record keeps the trace's own block ids (512 tokens
            // each in Mooncake, so read at 512 here), and their 8 bytes each alone exceed it
            trc_reader *r;
            kvf_err err = {0};
            trc_request q;
            uint32_t most = 0;
            trc_options src_blocks = opts(512);
            src_blocks.cache = TRC_CACHE_OFF;
            ck_assert_msg(!trc_reader_open(&r, src, &src_blocks, &err), "%s", err.msg);
            while (trc_reader_next(r, &q, &err) == 1)
                most = KVF_MAX(most, q.n_blocks);
            trc_reader_close(r);
            ck_assert_msg(most * 8 > 512, "the largest record has %u source blocks", most);
        }
        uint64_t n = compare_reads(src, &off, src, &on, true);   // builds the cache
        ck_assert(n > 0);
        ck_assert_uint_eq(compare_reads(src, &off, src, &on, true), n);   // reads it back
        trc_options ref = off, spool = off;
        spool.rate_rps = 2.5;   // the measuring pass spools, the reader replays the spool
        trc_reader *r;
        kvf_err err = {0};
        trc_pass pass;
        ck_assert_msg(!trc_reader_open_pass(&r, src, &spool, &pass, &err), "%s", err.msg);
        trc_reader_close(r);
        ref.time_scale = pass.rate_rps / spool.rate_rps;
        ck_assert_uint_eq(compare_reads(src, &ref, src, &spool, false), n);
    }
    trc_cache_win_bytes = 256u << 10;
    unsetenv("XDG_CACHE_HOME");
    kvt_tmp_remove();
}
END_TEST

START_TEST(test_json_fast_matches_jansson) {
    kvt_tmp_make("kvf_trc");
    char dirs[2][1100];
    const char *sh = getenv("KVF_SHARED"), *src = getenv("KVF_SOURCE_DIR");
    snprintf(dirs[0], sizeof dirs[0], "%s/traces/data", src ? src : ".");
    snprintf(dirs[1], sizeof dirs[1], "%s/traces", sh ? sh : "../shared");
    int files = 0;
    for (int d = 0; d < 2; d++) {
        char cmd[1200], list[8192];
        snprintf(cmd, sizeof cmd, "ls %.1000s 2>/dev/null", dirs[d]);
        run_cmd(cmd, list, sizeof list);
        for (char *save = NULL, *nm = strtok_r(list, "\n", &save); nm;
             nm = strtok_r(NULL, "\n", &save)) {
            if (strstr(nm, ".md")) continue;
            char path[1400];
            snprintf(path, sizeof path, "%.1000s/%.300s", dirs[d], nm);
            trc_options o = opts(64);
            fast_vs_jansson(path, &o);
            o.block_tokens = 512;
            o.skip_bad = true;
            fast_vs_jansson(path, &o);
            files++;
            // the canonical form of the trace (19-digit signed ids), both ways
            if (strstr(nm, ".jsonl")) {
                uint64_t n = roundtrip(path, &o, "canon.jsonl");
                ck_assert(n > 0);
                fast_vs_jansson(kvt_tmp_path("canon.jsonl"), &o);
            }
        }
    }
    ck_assert_msg(files >= 3, "only %d bundled traces found", files);
    // odd lines: each alone in a file, read both ways: the same requests or the same message
    static const char *mk[] = {
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"hash_ids\": [1, 2]}",
        "{ \"timestamp\" :1 ,\"input_length\":5,\t\"output_length\":3,\"hash_ids\":[ 1 , 2 ] } ",
        "{\"timestamp\": 1.5, \"input_length\": 5, \"output_length\": 3}",
        "{\"timestamp\": 1e3, \"input_length\": 5, \"output_length\": 3}",
        "{\"timestamp\": -1, \"input_length\": 5, \"output_length\": 3}",
        "{\"timestamp\": -0, \"input_length\": 5, \"output_length\": 3}",
        "{\"timestamp\": 01, \"input_length\": 5, \"output_length\": 3}",
        "{\"timestamp\": 9000000000001, \"input_length\": 5, \"output_length\": 3}",
        ("{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"hash_ids\": "
         "[9223372036854775807, -9223372036854775808]}"),
        ("{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"hash_ids\": "
         "[9223372036854775808]}"),
        ("{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"hash_ids\": "
         "[12345678901234567890123]}"),
        "{\"time\\u0073tamp\": 1, \"input_length\": 5, \"output_length\": 3}",
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"foo\": 1}",
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"timestamp\": 2}",
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"hash_ids\": true}",
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"x\": {\"a\": []}}",
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3,}",
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3}x",
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3",
        "{}",
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"hash_ids\": null}",
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"hash_ids\": []}",
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"hash_ids\": [1.0]}",
        "{\"timestamp\": 1, \"input_length\": \"5\", \"output_length\": 3}",
        "{\"timestamp\": 1, \"input_length\": 0, \"output_length\": 0}",
        "{\"timestamp\": 1, \"input_length\": 10000001, \"output_length\": 3}",
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"n\\u00e9\": 1}",
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"hash_ids\": [1,]}",
        "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 3, \"hash_ids\": [1 2]}",
    };
    static const char *kv[] = {
        ("{\"id\":0,\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"class\":\"agent\","
         "\"flags\":3,\"images\":1,\"session\":-7,\"turn\":2,\"prev_id\":-1,\"think_ns\":0,"
         "\"block_tokens\":64,\"blocks\":[-4879180131546014871]}"),
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"class\":\"unknown\"}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"class\":3}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"class\":9}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"class\":null}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"prev_id\":-5}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"prev_id\":null}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"flags\":256}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"flags\":1.5}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"images\":70000}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"turn\":4000000001}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"block_tokens\":0}",
        ("{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"block_tokens\":16,"
         "\"blocks\":[1,2,3,4]}"),
        "{\"id\":null,\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2}",
        "{\"id\":-3,\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2}",
        "{\"arrival_ns\":-5,\"input_tokens\":70,\"output_tokens\":2}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"think_ns\":-1}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"session\":\"a\"}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"extra\":1}",
        "{\"arrival_ns\":5,\"input_tokens\":70,\"output_tokens\":2,\"class\":\"ag\\u0065nt\"}",
    };
    trc_options o = opts(64);
    char line[512];
    for (size_t i = 0; i < sizeof mk / sizeof mk[0]; i++) {
        snprintf(line, sizeof line, "%s\n", mk[i]);
        trc_options om = o;
        om.format = TRC_FMT_MOONCAKE;
        fast_vs_jansson(WRITE("odd.jsonl", line), &om);
    }
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        snprintf(line, sizeof line, "%s\n", kv[i]);
        trc_options ok = o;
        ok.format = TRC_FMT_KVFLEET;
        fast_vs_jansson(WRITE("oddk.jsonl", line), &ok);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("traces");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(
        tc, 300);   // a hang guard: reading the full traces beside other work takes minutes
    tcase_add_test(tc, test_stats_mooncake_ideal_reuse);
    tcase_add_test(tc, test_stats_azure_lengths_and_rate);
    tcase_add_test(tc, test_block_mapping_512_to_64);
    tcase_add_test(tc, test_mooncake_bucket_spread);
    tcase_add_test(tc, test_window_limit_timescale);
    tcase_add_test(tc, test_csv_formats);
    tcase_add_test(tc, test_roundtrip_readers);
    tcase_add_test(tc, test_sessions_weka);
    tcase_add_test(tc, test_sessions_small);
    tcase_add_test(tc, test_stats_sessions_counted_in_window);
    tcase_add_test(tc, test_stats_sessions_in_arrival_order);
    tcase_add_test(tc, test_stats_converted_sessions_match_source);
    tcase_add_test(tc, test_stats_canonical_without_blocks);
    tcase_add_test(tc, test_stats_repeated_prompt_whole_blocks);
    tcase_add_test(tc, test_gen_rate_and_cv);
    tcase_add_test(tc, test_gen_lengths);
    tcase_add_test(tc, test_gen_reuse_matches_structure);
    tcase_add_test(tc, test_gen_deterministic);
    tcase_add_test(tc, test_gen_closed_loop);
    tcase_add_test(tc, test_stats_sketch_large);
    tcase_add_test(tc, test_stats_lru_sizes);
    tcase_add_test(tc, test_bad_inputs);
    tcase_add_test(tc, test_cli);
    tcase_add_test(tc, test_gen_bounds);
    tcase_add_test(tc, test_scaling_refused_not_clamped);
    tcase_add_test(tc, test_prev_id_refused);
    tcase_add_test(tc, test_csv_nul_refused);
    tcase_add_test(tc, test_outputs_safe);
    tcase_add_test(tc, test_replay_retention_boundary);
    tcase_add_test(tc, test_rate_rescale_one_parse);
    tcase_add_test(tc, test_cache_identical_and_robust);
    tcase_add_test(tc, test_cache_built_under_rate);
    tcase_add_test(tc, test_cache_window_smaller_than_records);
    tcase_add_test(tc, test_json_fast_matches_jansson);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
