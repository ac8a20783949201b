// traces/trc_reader.c -- the reader core shared by every format: opening and format
// detection, then per record: monotonic-time check, bucket spreading, time window, limit,
// time/rate scaling, length scaling, block-size mapping and id renumbering (see trc_int.h).
//
// Block mapping: a source block of S tokens and the simulator's B tokens must divide one
// another. S > B: source block i becomes S/B sub-blocks trc_block_sub_id(id_i, j). S < B:
// target block k takes the id of the last source block it covers (ids chain, so that id
// already names the whole prefix). S == B: ids pass unchanged. Only full B-token blocks
// within input_tokens get ids (n_blocks <= floor(input_tokens / B)).
//
// First pass (rate rescale, or trc_reader_open_pass): a second reader core without rescale
// reads the source through a tee that spools every source record in binary (trc_cache.c);
// the real reader then replays the spool, so the text is parsed once. Window, limit and
// spreading do not depend on the time factor, so both cores pull the same records.
//
// Bucket spreading keeps order: a bucket's k arrivals get k sorted uniform offsets within
// [t, min(t + bucket, next t)), so arrivals stay non-decreasing. Only one bucket is buffered.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trc_int.h"

void trc_options_default(trc_options *o) {
    memset(o, 0, sizeof *o);
    o->format = TRC_FMT_AUTO;
    o->block_tokens = 64;
    o->time_scale = 1.0;
    o->length_scale = 1.0;
    o->bucket = TRC_BUCKET_AS_RECORDED;
    o->seed = 1;
}

static const char *fmt_names[] = {"auto", "mooncake", "azure", "burstgpt", "sessions", "kvfleet"};

const char *trc_format_name(trc_format f) {
    return (unsigned)f < sizeof fmt_names / sizeof fmt_names[0] ? fmt_names[f] : "unknown";
}

bool trc_format_parse(const char *s, trc_format *out) {
    if (!s) return false;
    for (unsigned i = 0; i < sizeof fmt_names / sizeof fmt_names[0]; i++)
        if (!strcmp(s, fmt_names[i])) {
            *out = (trc_format)i;
            return true;
        }
    if (!strcmp(s, "weka") || !strcmp(s, "agentic")) {
        *out = TRC_FMT_SESSIONS;
        return true;
    }
    if (!strcmp(s, "canonical") || !strcmp(s, "jsonl")) {
        *out = TRC_FMT_KVFLEET;
        return true;
    }
    return false;
}

static const char *cls_names[] = {"chatbot", "agent", "coding", "batch", "other"};

const char *trc_class_name(int cls) {
    return cls >= 0 && cls < TRC_CLASS_COUNT ? cls_names[cls] : "other";
}

bool trc_class_parse(const char *s, int *out) {
    if (!s) return false;
    for (int i = 0; i < TRC_CLASS_COUNT; i++)
        if (!strcmp(s, cls_names[i])) {
            *out = i;
            return true;
        }
    return false;
}

void trc_rec_reserve(trc_rec *rec, size_t n) {
    if (n > rec->cap) kvf_grow((void **)&rec->blocks, &rec->cap, n, sizeof *rec->blocks);
}

bool trc_parse_u64(const char *s, uint64_t *out) {
    if (!s) return false;
    while (*s == ' ')
        s++;
    if (*s < '0' || *s > '9') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    while (*end == ' ')
        end++;
    if (errno || *end) return false;
    *out = v;
    return true;
}

// One line into l->buf (with its '\n' when there is one), at most TRC_LINE_MAX bytes. Bytes
// come from a read buffer in chunks and lines are found with memchr (not a getc per byte).
#define TRC_READ_CHUNK (256u << 10)
static long read_line(trc_lines *l) {
    size_t n = 0;
    bool nl = false;
    while (!nl) {
        if (l->rpos >= l->rlen) {
            if (!l->rb) l->rb = kvf_malloc(TRC_READ_CHUNK);
            l->rlen = fread(l->rb, 1, TRC_READ_CHUNK, l->f);
            l->rpos = 0;
            if (!l->rlen) break;
        }
        const char *s = l->rb + l->rpos;
        size_t avail = l->rlen - l->rpos;
        const char *e = memchr(s, '\n', avail);
        size_t take = e ? (size_t)(e - s) + 1 : avail;
        if (n + take + 2 > (size_t)TRC_LINE_MAX) {
            l->too_long = true;
            return -1;
        }
        if (n + take + 1 > l->cap) {
            size_t want = l->cap ? l->cap * 2 : 4096;
            while (want < n + take + 1)
                want *= 2;
            kvf_grow((void **)&l->buf, &l->cap, want, 1);
        }
        memcpy(l->buf + n, s, take);
        n += take;
        l->rpos += take;
        nl = e != NULL;
    }
    if (n == 0) return -1;
    l->buf[n] = 0;
    return (long)n;
}

void trc_lines_free(trc_lines *l) {
    free(l->buf);
    free(l->rb);
    l->buf = l->rb = NULL;
    l->cap = l->rpos = l->rlen = 0;
}

kvf_status trc_lines_error(const trc_lines *l, const char *path, kvf_err *err) {
    if (l->too_long)
        return kvf_fail(err, KVF_EPARSE, "%s:%ld: line longer than %ld MiB", path, l->line + 1,
                        TRC_LINE_MAX >> 20);
    if (ferror(l->f)) return kvf_fail(err, KVF_EIO, "%s:%ld: read error", path, l->line + 1);
    return KVF_OK;
}

long trc_lines_next(trc_lines *l, char **out) {
    for (;;) {
        long n = read_line(l);
        if (n < 0) return -1;
        l->line++;
        if (l->line == 1 && n >= 3 && !memcmp(l->buf, "\xEF\xBB\xBF", 3)) {   // UTF-8 BOM
            memmove(l->buf, l->buf + 3, (size_t)n - 2);
            n -= 3;
        }
        while (n > 0 && (l->buf[n - 1] == '\n' || l->buf[n - 1] == '\r'))
            l->buf[--n] = 0;
        long i = 0;
        while (i < n && (l->buf[i] == ' ' || l->buf[i] == '\t'))
            i++;
        if (i == n) continue;
        *out = l->buf;
        return (long)n;
    }
}

// The high 61 bits shared by sub-blocks 8g..8g+7 of source block id.
static inline uint64_t sub_group(uint64_t id, uint32_t g) {
    return kvf_hash64(kvf_hash64(id) + g) & ~(uint64_t)7;
}

uint64_t trc_block_sub_id(uint64_t id, uint32_t j) {
    // Sub-blocks 8m..8m+7 share the high 61 bits (a group the block index keeps together) and
    // carry j % 8 in the low 3. kvf_hash64 is a bijection, so distinct (id, j / 8) pairs
    // collide only by chance (2^-61). (kvf_hash_combine(id, j) collides for small ids.)
    return sub_group(id, j >> 3) | (j & 7);
}

// ---- the reader -------------------------------------------------------------------------
typedef struct key_range {
    uint64_t lo, hi;   // inclusive
} key_range;

struct trc_reader {
    trc_options opt;
    char *path;
    FILE *f;
    trc_source *src;
    kvf_rng rng;   // bucket spreading
    // bucket buffer: grp[0..ngrp) with next to hand out at igrp; look = first of next bucket
    trc_rec *grp;
    size_t ngrp, igrp, capgrp;
    trc_rec look;
    bool have_look, src_eof;
    trc_rec one;   // pass-through record when not spreading
    bool spread;
    // time axis
    bool have_first, have_last_open;
    int64_t first_t, last_open_t;
    double factor;   // multiplies gaps (time_scale or rate rescale)
    // ids
    bool have_key;
    uint64_t first_key, last_key;
    key_range *drops;
    size_t ndrops, capdrops;
    key_range *holes;          // keys the source skipped over (never records): a prev naming one
    size_t nholes, capholes;   // points nowhere
    uint64_t emitted;
    bool done;
    uint64_t skipped;   // core-level skips (non-monotonic lines)
    uint64_t *blocks;   // mapped ids of the request last returned
    size_t capblocks;
    bool no_blocks;   // counting only (a first pass, trc_count): requests carry no block ids
    trc_pass pass;    // the first pass, when one was made
    bool have_pass;
    char notes[512];
};

static void drop_key(trc_reader *r, uint64_t key) {
    if (r->ndrops && r->drops[r->ndrops - 1].hi + 1 == key) {
        r->drops[r->ndrops - 1].hi = key;
        return;
    }
    kvf_grow((void **)&r->drops, &r->capdrops, r->ndrops + 1, sizeof *r->drops);
    r->drops[r->ndrops++] = (key_range){key, key};
}

// Output id of an earlier key, -1 if it was dropped (or never existed).
static int64_t out_id_of(const trc_reader *r, uint64_t key) {
    if (!r->have_key || key < r->first_key || key > r->last_key) return -1;
    uint64_t below = 0;
    size_t lo = 0, hi = r->ndrops;   // ranges are sorted and disjoint
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->drops[mid].hi < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < r->ndrops && r->drops[lo].lo <= key) return -1;
    // sum of the sizes of ranges before lo: linear is fine (few ranges), but keep it bounded
    for (size_t i = 0; i < lo; i++)
        below += r->drops[i].hi - r->drops[i].lo + 1;
    return (int64_t)(key - r->first_key - below);
}

// True when key was never a record of the source: below the first key or in a hole.
static bool key_is_hole(const trc_reader *r, uint64_t key) {
    if (!r->have_key || key < r->first_key) return true;
    size_t lo = 0, hi = r->nholes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->holes[mid].hi < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->nholes && r->holes[lo].lo <= key;
}

// Registers a record's key (gaps in keys count as drops). False if keys do not increase.
static bool note_key(trc_reader *r, uint64_t key) {
    if (!r->have_key) {
        r->have_key = true;
        r->first_key = key;
        r->last_key = key;
        return true;
    }
    if (key <= r->last_key) return false;
    if (key > r->last_key + 1) {
        kvf_grow((void **)&r->holes, &r->capholes, r->nholes + 1, sizeof *r->holes);
        r->holes[r->nholes++] = (key_range){r->last_key + 1, key - 1};
    }
    for (uint64_t k = r->last_key + 1; k < key && k - r->last_key < 4; k++)
        drop_key(r, k);
    if (key - r->last_key >= 4) {
        // a wide gap: one range
        kvf_grow((void **)&r->drops, &r->capdrops, r->ndrops + 1, sizeof *r->drops);
        if (r->ndrops && r->drops[r->ndrops - 1].hi + 1 == r->last_key + 1)
            r->drops[r->ndrops - 1].hi = key - 1;
        else
            r->drops[r->ndrops++] = (key_range){r->last_key + 1, key - 1};
    }
    r->last_key = key;
    return true;
}

static void rec_swap(trc_rec *a, trc_rec *b) {
    trc_rec t = *a;
    *a = *b;
    *b = t;
}

// The name of a format's arrival-time field, for messages.
static const char *time_field(trc_format f) {
    switch (f) {
    case TRC_FMT_AZURE:
        return "TIMESTAMP";
    case TRC_FMT_BURSTGPT:
        return "Timestamp";
    case TRC_FMT_KVFLEET:
        return "arrival_ns";
    case TRC_FMT_SESSIONS:
        return "t";
    default:
        return "timestamp";
    }
}

// Reads one source record that passes the key and monotonic checks into *rec.
static int pull_checked(trc_reader *r, trc_rec *rec, kvf_err *err) {
    for (;;) {
        int rc = r->src->next(r->src, rec, err);
        if (rc <= 0) return rc;
        bool bad_time =
            r->src->sorted && rec->prev_key < 0 && r->have_last_open && rec->t_ns < r->last_open_t;
        if (!note_key(r, rec->key)) {
            if (r->opt.skip_bad) {
                r->skipped++;
                continue;
            }
            return kvf_fail(err, KVF_EPARSE, "%s:%ld: field 'id': not increasing", r->path,
                            rec->line),
                   -1;
        }
        if (bad_time) {
            if (r->opt.skip_bad) {
                r->skipped++;
                drop_key(r, rec->key);
                continue;
            }
            kvf_fail(err, KVF_EPARSE,
                     "%s:%ld: field '%s': time goes backwards (%.3f s after %.3f s)", r->path,
                     rec->line, time_field(r->src->fmt), (double)rec->t_ns / 1e9,
                     (double)r->last_open_t / 1e9);
            return -1;
        }
        if (!r->have_first) {   // the time origin is the first record as recorded
            r->have_first = true;
            r->first_t = r->src->origin_zero ? 0 : rec->t_ns;
        }
        if (rec->prev_key < 0 && r->src->sorted) {
            r->have_last_open = true;
            r->last_open_t = rec->t_ns;
        }
        return 1;
    }
}

// Sorts a group's offsets (at most 64): insertion sort, the order qsort gave (the keys are
// plain integers), without its call per comparison (qsort was 2 % of a replay's samples).
static void sort_offsets(uint64_t *v, size_t n) {
    for (size_t i = 1; i < n; i++) {
        uint64_t x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

static void grow_grp(trc_reader *r, size_t need) {
    size_t old = r->capgrp;
    kvf_grow((void **)&r->grp, &r->capgrp, need, sizeof *r->grp);
    if (r->capgrp > old) memset(r->grp + old, 0, (r->capgrp - old) * sizeof *r->grp);
}

// Next record in stream order (spread applied). *out points into reader storage.
static int pull(trc_reader *r, trc_rec **out, kvf_err *err) {
    if (!r->spread) {
        int rc = pull_checked(r, &r->one, err);
        if (rc == 1) *out = &r->one;
        return rc;
    }
    if (r->igrp < r->ngrp) {
        *out = &r->grp[r->igrp++];
        return 1;
    }
    r->ngrp = r->igrp = 0;
    grow_grp(r, 1);
    if (r->have_look) {
        rec_swap(&r->grp[0], &r->look);
        r->have_look = false;
    } else {
        if (r->src_eof) return 0;
        int rc = pull_checked(r, &r->grp[0], err);
        if (rc <= 0) {
            r->src_eof = rc == 0;
            return rc;
        }
    }
    r->ngrp = 1;
    for (;;) {
        int rc = pull_checked(r, &r->look, err);
        if (rc < 0) return rc;
        if (rc == 0) {
            r->src_eof = true;
            break;
        }
        if (r->look.t_ns != r->grp[0].t_ns || r->look.prev_key >= 0) {
            r->have_look = true;
            break;
        }
        grow_grp(r, r->ngrp + 1);
        rec_swap(&r->grp[r->ngrp++], &r->look);
    }
    int64_t t0 = r->grp[0].t_ns, width = r->src->bucket_ns;
    if (r->have_look && r->look.t_ns - t0 < width) width = r->look.t_ns - t0;
    if (width > 1 && r->ngrp > 0) {
        uint64_t off[64];
        for (size_t base = 0; base < r->ngrp; base += 64) {
            // groups beyond 64 rows: each chunk of 64 spread over its share of the bucket
            size_t n = KVF_MIN((size_t)64, r->ngrp - base);
            int64_t lo = t0 + (int64_t)((double)width * (double)base / (double)r->ngrp);
            int64_t hi = t0 + (int64_t)((double)width * (double)(base + n) / (double)r->ngrp);
            for (size_t i = 0; i < n; i++)
                off[i] = (uint64_t)((double)(hi - lo) * kvf_rng_uniform(&r->rng));
            sort_offsets(off, n);
            for (size_t i = 0; i < n; i++)
                r->grp[base + i].t_ns = lo + (int64_t)off[i];
        }
    }
    *out = &r->grp[r->igrp++];
    return 1;
}

// A scaled time (ns) into *out; false when it lies past TRC_MAX_TIME_S (never clamped: a
// clamped arrival would silently pile the tail of a trace onto one instant).
static bool scale_ns(double v, int64_t *out) {
    if (v != v) return false;
    if (v <= 0) {
        *out = 0;
        return true;
    }
    if (!(v <= TRC_MAX_TIME_S * 1e9)) return false;
    *out = (int64_t)llround(v);
    return true;
}

// A scaled length (tokens, >= 1) into *out; false past TRC_MAX_TOKENS.
static bool scale_len(uint32_t v, double s, uint32_t *out) {
    if (s == 1.0) {
        *out = v;
        return true;
    }
    double x = floor((double)v * s + 0.5);
    if (x < 1) x = 1;
    if (!(x <= TRC_MAX_TOKENS)) return false;
    *out = (uint32_t)x;
    return true;
}

// The name of a format's token-count fields, for messages.
static const char *len_field(trc_format f, bool input) {
    switch (f) {
    case TRC_FMT_AZURE:
        return input ? "ContextTokens" : "GeneratedTokens";
    case TRC_FMT_BURSTGPT:
        return input ? "Request tokens" : "Response tokens";
    case TRC_FMT_KVFLEET:
        return input ? "input_tokens" : "output_tokens";
    case TRC_FMT_SESSIONS:
        return input ? "in" : "out";
    default:
        return input ? "input_length" : "output_length";
    }
}

// Maps rec's blocks (S tokens) onto B tokens into r->blocks; returns the count.
static uint32_t map_blocks(trc_reader *r, const trc_rec *rec, uint32_t input) {
    uint32_t B = r->opt.block_tokens, S = rec->src_bt;
    if (!S || !rec->nb || !B) return 0;
    uint32_t want = input / B;
    uint64_t n = 0;
    if (S == B) {
        n = KVF_MIN((uint64_t)want, (uint64_t)rec->nb);
        kvf_grow((void **)&r->blocks, &r->capblocks, n + 1, sizeof *r->blocks);
        memcpy(r->blocks, rec->blocks, n * sizeof *r->blocks);
    } else if (S > B) {
        uint32_t k = S / B;
        n = KVF_MIN((uint64_t)want, (uint64_t)rec->nb * k);
        kvf_grow((void **)&r->blocks, &r->capblocks, n + 1, sizeof *r->blocks);
        // trc_block_sub_id(rec->blocks[i / k], i % k), its hash formed once per group of 8
        uint64_t hi = 0;
        for (uint64_t i = 0, src = 0; i < n; src++)
            for (uint32_t j = 0; j < k && i < n; j++, i++) {
                if (!(j & 7)) hi = sub_group(rec->blocks[src], j >> 3);
                r->blocks[i] = hi | (j & 7);
            }
    } else {
        uint32_t k = B / S;
        n = KVF_MIN((uint64_t)want, (uint64_t)rec->nb / k);
        kvf_grow((void **)&r->blocks, &r->capblocks, n + 1, sizeof *r->blocks);
        for (uint64_t i = 0; i < n; i++)
            r->blocks[i] = rec->blocks[(i + 1) * k - 1];
    }
    return (uint32_t)n;
}

int trc_reader_next(trc_reader *r, trc_request *out, kvf_err *err) {
    if (!r || r->done) return 0;
    for (;;) {
        if (r->opt.limit_requests > 0 && (int64_t)r->emitted >= r->opt.limit_requests) {
            r->done = true;
            return 0;
        }
        trc_rec *rec;
        int rc = pull(r, &rec, err);
        if (rc <= 0) {
            if (rc == 0) r->done = true;
            return rc;
        }
        int64_t rel = rec->t_ns - r->first_t;
        if (rel < r->opt.start_ns || (r->opt.end_ns > 0 && rel >= r->opt.end_ns)) {
            drop_key(r, rec->key);
            if (r->opt.end_ns > 0 && rel >= r->opt.end_ns && r->src->sorted && rec->prev_key < 0 &&
                r->src->fmt != TRC_FMT_SESSIONS) {
                r->done = true;
                return 0;
            }
            continue;
        }
        uint32_t S = rec->src_bt, B = r->opt.block_tokens;
        if (S && rec->nb && S % B && B % S) {
            r->done = true;
            kvf_fail(err, KVF_EINVAL,
                     "%s:%ld: field 'block_tokens': block size %u and the trace's %u-token "
                     "blocks do not divide one another",
                     r->path, rec->line, B, S);
            return -1;
        }
        memset(out, 0, sizeof *out);
        const char *scaled_by = r->opt.rate_rps > 0 ? "rate_rps" : "time_scale";
        double scale_v = r->opt.rate_rps > 0 ? r->opt.rate_rps : r->opt.time_scale;
        if (!scale_ns((double)(rel - r->opt.start_ns) * r->factor, &out->arrival_ns)) {
            r->done = true;
            kvf_fail(err, KVF_EINVAL,
                     "%s:%ld: field '%s': arrival %.6g s after %s %g is past the %g s limit",
                     r->path, rec->line, time_field(r->src->fmt),
                     (double)(rel - r->opt.start_ns) * r->factor / 1e9, scaled_by, scale_v,
                     TRC_MAX_TIME_S);
            return -1;
        }
        bool in_ok = scale_len(rec->in, r->opt.length_scale, &out->input_tokens);
        if (!in_ok || !scale_len(rec->out, r->opt.length_scale, &out->output_tokens)) {
            r->done = true;
            kvf_fail(err, KVF_EINVAL,
                     "%s:%ld: field '%s': %u tokens x length_scale %g is over the %g-token "
                     "limit",
                     r->path, rec->line, len_field(r->src->fmt, !in_ok), in_ok ? rec->out : rec->in,
                     r->opt.length_scale, TRC_MAX_TOKENS);
            return -1;
        }
        out->id = r->emitted++;
        out->cls = rec->cls;
        out->flags = rec->flags;
        out->images = rec->images;
        out->session = rec->session;
        out->turn = rec->turn;
        if (rec->prev_key >= 0 && !r->opt.skip_bad &&
            ((uint64_t)rec->prev_key >= rec->key || key_is_hole(r, (uint64_t)rec->prev_key))) {
            r->done = true;
            kvf_fail(err, KVF_EPARSE, "%s:%ld: field 'prev_id': %lld names %s", r->path, rec->line,
                     (long long)rec->prev_key,
                     (uint64_t)rec->prev_key == rec->key  ? "this request itself"
                     : (uint64_t)rec->prev_key > rec->key ? "a later request (must name an "
                                                            "earlier one)"
                                                          : "no request of the trace");
            return -1;
        }
        out->prev_id = rec->prev_key >= 0 ? out_id_of(r, (uint64_t)rec->prev_key) : -1;
        if (out->prev_id >= 0 && !scale_ns((double)rec->think_ns * r->factor, &out->think_ns)) {
            r->done = true;
            kvf_fail(err, KVF_EINVAL,
                     "%s:%ld: field '%s': think time %.6g s after %s %g is past the %g s limit",
                     r->path, rec->line,
                     r->src->fmt == TRC_FMT_SESSIONS ? "think_time" : "think_ns",
                     (double)rec->think_ns * r->factor / 1e9, scaled_by, scale_v, TRC_MAX_TIME_S);
            return -1;
        }
        out->n_blocks = r->no_blocks ? 0 : map_blocks(r, rec, out->input_tokens);
        out->blocks = r->blocks;
        return 1;
    }
}

void trc_reader_drop_blocks(trc_reader *r) {
    r->no_blocks = true;
    if (r->src) r->src->skip_blocks = true;
}

uint64_t trc_reader_skipped(const trc_reader *r) {
    return r ? r->skipped + (r->src ? r->src->skipped : 0) : 0;
}
trc_format trc_reader_format(const trc_reader *r) {
    return r && r->src ? r->src->fmt : TRC_FMT_AUTO;
}
const char *trc_reader_notes(const trc_reader *r) {
    return r ? r->notes : "";
}
uint32_t trc_reader_block_tokens(const trc_reader *r) {
    return r ? r->opt.block_tokens : 0;
}
bool trc_reader_in_arrival_order(const trc_reader *r) {
    // a canonical file's closed-loop turns may come before earlier arrivals (trace convert
    // keeps a sessions trace's order, one session's turns after another's)
    return r && r->src && r->src->sorted && r->src->fmt != TRC_FMT_SESSIONS &&
           r->src->fmt != TRC_FMT_KVFLEET;
}

static void rec_free(trc_rec *rec) {
    free(rec->blocks);
}

void trc_reader_close(trc_reader *r) {
    if (!r) return;
    if (r->src) r->src->close(r->src);
    if (r->f && r->f != stdin) fclose(r->f);
    for (size_t i = 0; i < r->capgrp; i++)
        rec_free(&r->grp[i]);
    free(r->grp);
    rec_free(&r->look);
    rec_free(&r->one);
    free(r->drops);
    free(r->holes);
    free(r->blocks);
    free(r->path);
    free(r);
}

// ---- opening ----------------------------------------------------------------------------
static kvf_status detect(FILE *f, const char *path, trc_format *out, kvf_err *err) {
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    if (ferror(f)) return kvf_fail(err, KVF_EIO, "%s: read error", path);
    rewind(f);
    buf[n] = 0;
    size_t i = n >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3) ? 3 : 0;   // UTF-8 byte-order mark
    long line = 1;
    while (i < n && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r')) {
        if (buf[i] == '\n') line++;
        i++;
    }
    if (i == n) return kvf_fail(err, KVF_EPARSE, "%s:%ld: empty file (no requests)", path, line);
    const char *s = buf + i;
    size_t m = strcspn(s, "\n");
    char first[4096];
    memcpy(first, s, m);
    first[m] = 0;
    if (memchr(buf + i, 0, n - i)) {
        // binary junk: let the JSON/CSV parsers name the line; guess from the first byte
    }
    if (s[0] == '{') {
        if (strstr(first, "\"requests\"") || strstr(first, "\"hash_id_scope\"") ||
            strstr(first, "\"block_size\""))
            *out = TRC_FMT_SESSIONS;
        else if (strstr(first, "\"arrival_ns\"") || strstr(first, "\"input_tokens\""))
            *out = TRC_FMT_KVFLEET;
        else if (strstr(first, "\"input_length\"") || strstr(first, "\"hash_ids\"") ||
                 strstr(first, "\"timestamp\""))
            *out = TRC_FMT_MOONCAKE;
        else if (m == sizeof first - 1 || m >= 4095)
            *out = TRC_FMT_SESSIONS;   // huge line
        else
            return kvf_fail(err, KVF_EPARSE,
                            "%s:%ld: cannot detect the format (JSON without 'timestamp', "
                            "'requests' or 'arrival_ns'); give --format",
                            path, line);
        return KVF_OK;
    }
    if (strstr(first, "ContextTokens"))
        *out = TRC_FMT_AZURE;
    else if (strstr(first, "Request tokens") || strstr(first, "Response tokens"))
        *out = TRC_FMT_BURSTGPT;
    else
        return kvf_fail(err, KVF_EPARSE,
                        "%s:%ld: cannot detect the format (neither JSON lines nor a known CSV "
                        "header); give --format",
                        path, line);
    return KVF_OK;
}

// JSON lines (0) or one of the CSV layouts (1 Azure, 2 BurstGPT): formats of different
// families never parse each other's files.
static int fmt_family(trc_format f) {
    return f == TRC_FMT_AZURE ? 1 : f == TRC_FMT_BURSTGPT ? 2 : 0;
}

// Whether a JSON-lines file cannot be format fmt: the key every line of fmt holds
// ("timestamp", "arrival_ns", "requests") is absent from its first line (its first 4 KiB).
// f is rewound.
static bool json_lacks_key(FILE *f, trc_format fmt) {
    const char *key = fmt == TRC_FMT_MOONCAKE   ? "\"timestamp\""
                      : fmt == TRC_FMT_KVFLEET  ? "\"arrival_ns\""
                      : fmt == TRC_FMT_SESSIONS ? "\"requests\""
                                                : NULL;
    if (!key) return false;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    bool err = ferror(f) != 0;
    rewind(f);
    if (err) return false;
    buf[n] = 0;
    buf[strcspn(buf, "\n")] = 0;   // the first line, or its first 4 KiB (formats put the key early)
    return !strstr(buf, key);
}

static kvf_status open_source(trc_source **src, FILE *f, const char *path, const trc_options *o,
                              trc_format fmt, kvf_err *err) {
    switch (fmt) {
    case TRC_FMT_MOONCAKE:
        return trc_src_mooncake(src, f, path, o, err);
    case TRC_FMT_AZURE:
    case TRC_FMT_BURSTGPT:
        return trc_src_csv(src, f, path, fmt, o, err);
    case TRC_FMT_SESSIONS:
        return trc_src_sessions(src, f, path, o, err);
    case TRC_FMT_KVFLEET:
        return trc_src_kvfleet(src, f, path, o, err);
    default:
        return kvf_fail(err, KVF_EINVAL, "%s: unknown format", path);
    }
}

static kvf_status check_options(const trc_options *o, kvf_err *err) {
    uint32_t B = o->block_tokens;
    if (B == 0) return kvf_fail(err, KVF_EINVAL, "block_tokens must be >= 1");
    if (!(o->time_scale >= 1e-6 && o->time_scale <= 1e6))
        return kvf_fail(err, KVF_EINVAL, "time_scale must be in [1e-6, 1e6], got %g",
                        o->time_scale);
    if (!(o->length_scale >= 1e-3 && o->length_scale <= 1e3))
        return kvf_fail(err, KVF_EINVAL, "length_scale must be in [0.001, 1000], got %g",
                        o->length_scale);
    if (!(o->rate_rps >= 0 && o->rate_rps <= 1e6))
        return kvf_fail(err, KVF_EINVAL, "rate_rps must be in [0, 1e6], got %g", o->rate_rps);
    if (o->session_users > 10000000)
        return kvf_fail(err, KVF_EINVAL, "session_users must be at most 1e7, got %u",
                        o->session_users);
    if (o->start_ns < 0 || o->end_ns < 0 || (o->end_ns > 0 && o->end_ns <= o->start_ns))
        return kvf_fail(err, KVF_EINVAL,
                        "bad time window: start %.9g s, end %.9g s (want 0 <= start < end, or "
                        "no end)",
                        (double)o->start_ns / 1e9, (double)o->end_ns / 1e9);
    if (!(o->session_rate >= 0 && o->session_rate <= 1e6))
        return kvf_fail(err, KVF_EINVAL, "session_rate must be in [0, 1e6], got %g",
                        o->session_rate);
    return KVF_OK;
}

kvf_status trc_reader_from_source(trc_reader **out, trc_source *src, FILE *f, const char *path,
                                  const trc_options *opt, kvf_err *err) {
    kvf_status st = check_options(opt, err);
    if (st) {   // the generator's readers come here without trc_reader_open's check
        *out = NULL;
        src->close(src);
        if (f && f != stdin) fclose(f);
        return st;
    }
    trc_reader *r = kvf_calloc(1, sizeof *r);
    r->opt = *opt;
    r->path = kvf_strdup(path);
    r->f = f;
    r->src = src;
    r->factor = opt->time_scale;
    kvf_rng_init(&r->rng, opt->seed, 0x5b7ead);
    r->spread = opt->bucket == TRC_BUCKET_SPREAD && src->bucket_ns > 0;
    if (src->bucket_ns > 0)
        snprintf(r->notes, sizeof r->notes, "format=%s; bucket=%s (%.0f ms buckets)",
                 trc_format_name(src->fmt), r->spread ? "spread" : "as_recorded",
                 (double)src->bucket_ns / 1e6);
    else
        snprintf(r->notes, sizeof r->notes, "format=%s", trc_format_name(src->fmt));
    if (src->notes[0]) {
        size_t n = strlen(r->notes);
        snprintf(r->notes + n, sizeof r->notes - n, "; %s", src->notes);
    }
    *out = r;
    return KVF_OK;
}

static void append_note(trc_reader *r, const char *fmt, double v) {
    size_t n = strlen(r->notes);
    char tmp[128];
    snprintf(tmp, sizeof tmp, fmt, v);
    snprintf(r->notes + n, sizeof r->notes - n, "; %s", tmp);
}

// Reads r (a reader without rescale) to its end or its stop: the first pass's figures.
static kvf_status run_pass(trc_reader *r, trc_pass *p, kvf_err *err) {
    trc_request q;
    uint64_t n = 0;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    int rc;
    while ((rc = trc_reader_next(r, &q, err)) == 1) {
        n++;
        lo = KVF_MIN(lo, q.arrival_ns);
        hi = KVF_MAX(hi, q.arrival_ns);
    }
    if (rc < 0) return err && err->code ? err->code : KVF_EPARSE;
    p->requests = n;
    p->span_s = n ? (double)(hi - lo) / 1e9 : 0;
    p->rate_rps = n >= 2 && hi > lo ? (double)(n - 1) / ((double)(hi - lo) / 1e9) : 0;
    return KVF_OK;
}

// The first pass over src, made by a reader core without rescale over the same source (the
// records it pulls are exactly the ones the real reader will pull: window, limit and bucket
// spreading do not depend on the time factor). The source stays with the caller.
static kvf_status pass_over(trc_source *src, const char *path, const trc_options *o, trc_pass *p,
                            kvf_err *err) {
    trc_options m = *o;
    m.rate_rps = 0;
    m.time_scale = 1;
    trc_reader *shadow;
    kvf_status ok = trc_reader_from_source(&shadow, src, NULL, path, &m, err);
    KVF_ASSERT(ok == KVF_OK);   // o was checked; a failure would close the borrowed source
    shadow->no_blocks = true;   // the pass counts arrivals; the real reader maps the blocks
    kvf_status st = run_pass(shadow, p, err);
    shadow->src = NULL;   // borrowed
    trc_reader_close(shadow);
    return st;
}

// The slow first pass: a second reader over the file (when no spool could be written).
static kvf_status pass_reopen(const char *path, const trc_options *o, trc_pass *p, kvf_err *err) {
    trc_options m = *o;
    m.rate_rps = 0;
    m.time_scale = 1;
    m.cache = TRC_CACHE_OFF;
    trc_reader *r;
    kvf_status st = trc_reader_open(&r, path, &m, err);
    if (st) return st;
    r->no_blocks = true;
    st = run_pass(r, p, err);
    trc_reader_close(r);
    return st;
}

// Opens the source of path: the cache when it holds this trace, else the parser (teed into
// the cache or a spool when spool is set or the cache is on). *f is the open file or NULL.
static kvf_status open_any(trc_source **src, FILE **fp, const char *path, const trc_options *o,
                           bool spool, kvf_err *err) {
    *src = NULL;
    FILE *f = kvf_open_input(path, err);
    *fp = f;
    if (!f) return err && err->code ? err->code : KVF_EIO;
    trc_format fmt = o->format;
    kvf_status st;
    if (fmt == TRC_FMT_AUTO && (st = detect(f, path, &fmt, err))) return st;
    if (fmt != TRC_FMT_AUTO && o->format != TRC_FMT_AUTO) {
        // a format given that cannot parse the file (JSON lines given a CSV, the other CSV
        // layout, or JSON lines without the given format's key) while the content names its
        // own: read it as what it is; the reader's notes say so (trc_reader_open_pass)
        trc_format seen;
        kvf_err e2 = {0};
        if (detect(f, path, &seen, &e2) == KVF_OK && seen != fmt &&
            (fmt_family(seen) != fmt_family(fmt) || json_lacks_key(f, fmt)))
            fmt = seen;
    }
    char cpath[PATH_MAX + 64];
    trc_cache_key *ck =
        trc_cache_enabled(o) ? trc_cache_key_make(f, path, o, fmt, cpath, sizeof cpath) : NULL;
    if (ck && trc_cache_open(src, cpath, ck) == KVF_OK) {
        free(ck);
        fclose(f);
        *fp = NULL;
        return KVF_OK;
    }
    if ((st = open_source(src, f, path, o, fmt, err))) {
        free(ck);
        return st;
    }
    if (ck || spool) *src = trc_tee_wrap(*src, ck ? cpath : NULL, ck);
    free(ck);
    return KVF_OK;
}

kvf_status trc_reader_open_pass(trc_reader **out, const char *path, const trc_options *opt,
                                trc_pass *pass, kvf_err *err) {
    *out = NULL;
    trc_options o;
    if (opt)
        o = *opt;
    else
        trc_options_default(&o);
    kvf_status st = check_options(&o, err);
    if (st) return st;
    bool want_pass = pass || o.rate_rps > 0;
    trc_source *src;
    FILE *f;
    if ((st = open_any(&src, &f, path, &o, want_pass, err))) {
        if (src) src->close(src);
        if (f) fclose(f);
        return st;
    }
    trc_pass p = {0};
    if (want_pass) {
        if ((st = pass_over(src, path, &o, &p, err))) {
            src->close(src);
            if (f) fclose(f);
            return st;
        }
        trc_source *again = NULL;
        if (trc_is_tee(src))
            again = trc_tee_replay(src);
        else if (!f) {   // a cache: open it once more from the start
            src->close(src);
            if ((st = open_any(&again, &f, path, &o, false, err))) {
                if (again) again->close(again);
                if (f) fclose(f);
                return st;
            }
        }
        if (!again) {   // no spool: read the text a second time
            src->close(src);
            if (f) fclose(f);
            if ((st = pass_reopen(path, &o, &p, err))) return st;
            o.cache = TRC_CACHE_OFF;
            if ((st = open_any(&again, &f, path, &o, false, err))) {
                if (again) again->close(again);
                if (f) fclose(f);
                return st;
            }
        }
        src = again;
    }
    trc_reader *r;
    if ((st = trc_reader_from_source(&r, src, f, path, &o, err))) return st;
    trc_format got = trc_reader_format(r);
    if ((o.session_rate > 0 || o.session_users > 0) && got != TRC_FMT_SESSIONS &&
        (o.format == TRC_FMT_AUTO || o.format == got)) {
        // they start the sessions of a sessions file; any other has its own arrivals. (Given
        // for a sessions format that the file turns out not to be, the note below covers them.)
        const char *k = o.session_rate > 0 ? "session_rate" : "session_users";
        kvf_fail(err, KVF_EINVAL,
                 "%s: %s (workload.%s, --%s) applies to a sessions trace only; this file is %s",
                 path, k, k, o.session_rate > 0 ? "session-rate" : "session-users",
                 trc_format_name(got));
        trc_reader_close(r);
        return KVF_EINVAL;
    }
    if (o.format != TRC_FMT_AUTO && trc_reader_format(r) != o.format) {
        char tmp[200];
        snprintf(tmp, sizeof tmp,
                 "; workload.format %s does not fit the file, whose content is %s: read as %s",
                 trc_format_name(o.format), trc_format_name(trc_reader_format(r)),
                 trc_format_name(trc_reader_format(r)));
        size_t n = strnlen(r->notes, sizeof r->notes);
        if (n < sizeof r->notes) snprintf(r->notes + n, sizeof r->notes - n, "%s", tmp);
    }
    if (want_pass) {
        r->pass = p;
        r->have_pass = true;
    }
    if (pass) *pass = p;
    if (o.rate_rps > 0) {
        if (p.rate_rps > 0) r->factor = p.rate_rps / o.rate_rps;
        append_note(r, "rate rescaled to %g req/s", o.rate_rps);
        append_note(r, "(trace mean %g req/s)", p.rate_rps);
    } else if (o.time_scale != 1.0)
        append_note(r, "time_scale=%g", o.time_scale);
    if (o.length_scale != 1.0) append_note(r, "length_scale=%g", o.length_scale);
    *out = r;
    return KVF_OK;
}

kvf_status trc_reader_open(trc_reader **out, const char *path, const trc_options *opt,
                           kvf_err *err) {
    return trc_reader_open_pass(out, path, opt, NULL, err);
}

const trc_pass *trc_reader_pass(const trc_reader *r) {
    return r && r->have_pass ? &r->pass : NULL;
}

kvf_status trc_count(const char *path, const trc_options *opt, uint64_t *n, kvf_err *err) {
    trc_reader *r;
    kvf_status st = trc_reader_open(&r, path, opt, err);
    if (st) return st;
    r->no_blocks = true;
    trc_request q;
    int rc;
    uint64_t c = 0;
    while ((rc = trc_reader_next(r, &q, err)) == 1)
        c++;
    trc_reader_close(r);
    if (rc < 0) return err ? err->code : KVF_EPARSE;
    *n = c;
    return KVF_OK;
}
