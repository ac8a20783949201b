// traces/trc_cache.c -- a parsed trace in binary: the source records (trc_rec, before the
// reader core shapes them) written once while the text is parsed, and read back without
// parsing. Two uses share one format:
//   - the spool: a rate rescale needs the trace's mean rate before the first request; the
//     measuring pass tees the records into an anonymous file and the reader then replays them
//     from it, so the text is parsed once, not twice;
//   - the cache (TRC_CACHE_ON): the same file kept in $XDG_CACHE_HOME/kvfleet (else
//     ~/.cache/kvfleet), named by a hash of its key, reused by later runs and sweeps.
// Only a complete pass (the source read to its end without error) is ever published, by
// renaming a temporary file (O_EXCL|O_NOFOLLOW) into place; a file whose key, version, size,
// structure or checksum disagrees is ignored, and rebuilt by the next complete pass.
//
// Layout (little-endian as the host writes it; every part a multiple of 8 bytes):
//   header   magic "KVFTRC\0\n", version, key (trace path, size, mtime, dev, inode, and the
//            options the source depends on), source metadata (format, bucket, notes)
//   records  per record: disk_rec (fixed) then nb block ids (uint64)
//   trailer  TRAILER_MAGIC, record count, final skipped count, checksum of the records
// The checksum runs over the records' 64-bit words; with the trailer's count and a bounds
// walk it is verified over the whole file before the first record is handed out.
// Files are read with pread into one window that moves along, not mapped: the window's pages
// are touched once and stay warm, where a mapping's first touch of each page costs more than
// the kernel's copy of it (a mapped spool of the 1,000-GPU hour, 101 MB, spent about 5 % of the
// loop on those first touches).
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trc_int.h"

#define CACHE_MAGIC "KVFTRC\0\n"
#define TRAILER_MAGIC 0x2e444e45435254ULL   // "TRCEND."

typedef struct disk_key {
    uint64_t size;      // trace bytes
    int64_t mtime_ns;   // trace modification time
    uint64_t dev, ino;
    int32_t format;   // requested (opt.format) and detected formats
    int32_t detected;
    uint32_t source_block_tokens;
    uint32_t skip_bad;
    uint64_t seed;            // sessions only (0 otherwise)
    double session_rate;      // sessions only
    uint32_t session_users;   // sessions only
    uint32_t path_len;        // bytes of the real path that follow the header
} disk_key;

typedef struct disk_head {
    char magic[8];
    uint32_t version;
    uint32_t head_bytes;   // sizeof(disk_head) + path bytes rounded up to 8
    disk_key key;
    int32_t fmt;      // source metadata
    uint32_t flags;   // 1 sorted, 2 origin_zero
    int64_t bucket_ns;
    char notes[256];
} disk_head;

typedef struct disk_rec {
    int64_t t_ns;
    uint32_t in, out;
    uint8_t cls, flags;
    uint16_t images;
    uint32_t turn;
    uint64_t session;
    uint64_t key;
    int64_t prev_key;
    int64_t think_ns;
    uint32_t src_bt, nb;
    int64_t line;
    uint64_t skipped;   // the source's skipped count when this record was read
} disk_rec;

typedef struct disk_tail {
    uint64_t magic;
    uint64_t n;
    uint64_t skipped;
    uint64_t checksum;
} disk_tail;

_Static_assert(sizeof(disk_rec) % 8 == 0, "records are word aligned");
_Static_assert(sizeof(disk_head) % 8 == 0, "header is word aligned");

static inline uint64_t sum_word(uint64_t h, uint64_t w) {
    return ((h << 5 | h >> 59) ^ w) * 0x9e3779b97f4a7c15ULL;
}
// The words are copied out, not read through a uint64_t pointer: p is a record or key struct
// (uint32_t and double members), and reading it as uint64_t broke the aliasing rule, which
// -O3 under AddressSanitizer acted on (the trailer's checksum disagreed with the records the
// same build wrote, the only 8 bytes that differed from the plain build's file: every cache it
// wrote failed its own verification and was built again).
static uint64_t sum_words(uint64_t h, const void *p, size_t bytes) {
    const unsigned char *b = p;
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, sizeof w);
        h = sum_word(h, w);
    }
    return h;
}

// ---- keys and paths -----------------------------------------------------------------------
bool trc_cache_enabled(const trc_options *o) {
    if (o->cache == TRC_CACHE_ON) return true;
    if (o->cache == TRC_CACHE_OFF) return false;
    const char *e = getenv("KVFLEET_TRACE_CACHE");
    return e && (!strcmp(e, "1") || !strcmp(e, "on"));
}

kvf_status trc_cache_dir(char *buf, size_t n, kvf_err *err) {
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int k;
    if (x && x[0] == '/')
        k = snprintf(buf, n, "%s/kvfleet", x);
    else if (home && home[0])
        k = snprintf(buf, n, "%s/.cache/kvfleet", home);
    else
        return kvf_fail(err, KVF_EINVAL, "trace cache: neither XDG_CACHE_HOME nor HOME is set");
    if (k < 0 || (size_t)k >= n) return kvf_fail(err, KVF_EINVAL, "trace cache: path too long");
    return KVF_OK;
}

struct trc_cache_key {
    disk_key k;
    char path[PATH_MAX + 256];   // real path, '\n', the name as given
};

static void key_fill(trc_cache_key *ck, const char *real, const struct stat *sb,
                     const trc_options *o, trc_format detected) {
    memset(ck, 0, sizeof *ck);
    snprintf(ck->path, sizeof ck->path, "%s", real);
    ck->k.size = (uint64_t)sb->st_size;
    ck->k.mtime_ns = (int64_t)sb->st_mtim.tv_sec * KVF_NS_PER_S + sb->st_mtim.tv_nsec;
    ck->k.dev = (uint64_t)sb->st_dev;
    ck->k.ino = (uint64_t)sb->st_ino;
    ck->k.format = (int32_t)o->format;
    ck->k.detected = (int32_t)detected;
    ck->k.source_block_tokens = o->source_block_tokens;
    ck->k.skip_bad = o->skip_bad;
    if (detected == TRC_FMT_SESSIONS) {   // only the sessions source draws from these
        ck->k.seed = o->seed;
        ck->k.session_rate = o->session_rate;
        ck->k.session_users = o->session_users;
    }
    ck->k.path_len = (uint32_t)strlen(ck->path);
}

static uint64_t key_hash(const trc_cache_key *ck) {
    uint64_t h = sum_words(0x6b76666361636865ULL, &ck->k, sizeof ck->k);
    for (const char *p = ck->path; *p; p++)
        h = sum_word(h, (uint8_t)*p);
    return kvf_hash64(h ^ TRC_CACHE_VERSION);
}

trc_cache_key *trc_cache_key_make(FILE *f, const char *path, const trc_options *o,
                                  trc_format detected, char *cpath, size_t n) {
    struct stat sb;
    char real[PATH_MAX + 256], dir[PATH_MAX];
    if (fstat(fileno(f), &sb) != 0 || !realpath(path, real)) return NULL;
    if (trc_cache_dir(dir, sizeof dir, NULL)) return NULL;
    // the name as given joins the real path: a CSV's class comes from its file name ("code"),
    // and a link may name the file differently
    const char *base = strrchr(path, '/');
    size_t rl = strlen(real);
    snprintf(real + rl, sizeof real - rl, "\n%s", base ? base + 1 : path);
    trc_cache_key *ck = kvf_malloc(sizeof *ck);
    key_fill(ck, real, &sb, o, detected);
    int k = snprintf(cpath, n, "%s/%016llx.trc", dir, (unsigned long long)key_hash(ck));
    if (k < 0 || (size_t)k >= n) {
        free(ck);
        return NULL;
    }
    return ck;
}

// ---- reading: a window over a file -----------------------------------------------------------
size_t trc_cache_win_bytes = 256u << 10;

typedef struct win {
    int fd;
    unsigned char *buf;
    size_t cap;        // bytes allocated
    size_t off, len;   // file offset of buf[0], bytes valid
} win;

// n bytes at file offset pos, read into the window where it does not hold them already; NULL
// when the file has not that many bytes there or a read fails.
static const unsigned char *win_at(win *w, size_t pos, size_t n) {
    if (pos >= w->off && pos - w->off <= w->len && w->len - (pos - w->off) >= n)
        return w->buf + (pos - w->off);
    if (n > w->cap) {
        size_t cap = n > 2 * w->cap ? n : 2 * w->cap;
        unsigned char *nb = realloc(w->buf, cap);
        if (!nb) return NULL;
        w->buf = nb;
        w->cap = cap;
    }
    w->off = pos;
    w->len = 0;
    while (w->len < w->cap) {
        ssize_t k = pread(w->fd, w->buf + w->len, w->cap - w->len, (off_t)(pos + w->len));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        w->len += (size_t)k;
    }
    return w->len >= n ? w->buf : NULL;
}

static bool win_open(win *w, int fd) {
    w->fd = fd;
    w->off = w->len = 0;
    w->cap = trc_cache_win_bytes ? trc_cache_win_bytes : 1;
    w->buf = malloc(w->cap);
    return w->buf != NULL;
}

static void win_close(win *w) {
    free(w->buf);
    if (w->fd >= 0) close(w->fd);
    w->buf = NULL;
    w->fd = -1;
}

typedef struct bsrc {
    trc_source base;
    win w;
    size_t pos, end;      // next record, end of records
    uint64_t n_done, n;   // records handed out, records in the file (complete files)
    uint64_t final_skipped;
    trc_source *cont;   // incomplete spool: the live source continues after the end
} bsrc;

static int bsrc_next(trc_source *s, trc_rec *rec, kvf_err *err) {
    bsrc *b = (bsrc *)s;
    if (b->pos + sizeof(disk_rec) > b->end) {
        if (!b->cont) {
            s->skipped = b->final_skipped;
            return 0;
        }
        int rc = b->cont->next(b->cont, rec, err);
        s->skipped = b->cont->skipped;
        return rc;
    }
    disk_rec d;
    const unsigned char *p = win_at(&b->w, b->pos, sizeof d), *q = NULL;
    if (p) memcpy(&d, p, sizeof d);
    bool ok = p && d.nb <= TRC_MAX_BLOCKS && (b->end - b->pos - sizeof d) / 8 >= d.nb &&
              (s->skip_blocks || !d.nb || (q = win_at(&b->w, b->pos + sizeof d, (size_t)d.nb * 8)));
    if (!ok) {
        // the file is ours and was read whole once: only an I/O error or a change under us
        kvf_fail(err, KVF_EIO,
                 "the trace's binary copy (spool or cache): record %llu could not be read back",
                 (unsigned long long)b->n_done + 1);
        return -1;
    }
    b->pos += sizeof d;
    if (q) {
        trc_rec_reserve(rec, d.nb);
        memcpy(rec->blocks, q, (size_t)d.nb * 8);
    }
    b->pos += (size_t)d.nb * 8;
    rec->t_ns = d.t_ns;
    rec->in = d.in;
    rec->out = d.out;
    rec->cls = d.cls;
    rec->flags = d.flags;
    rec->images = d.images;
    rec->session = d.session;
    rec->turn = d.turn;
    rec->key = d.key;
    rec->prev_key = d.prev_key;
    rec->think_ns = d.think_ns;
    rec->src_bt = d.src_bt;
    rec->nb = d.nb;   // under skip_blocks a count only (its checks), rec->blocks not filled
    rec->line = (long)d.line;
    s->skipped = d.skipped;
    b->n_done++;
    return 1;
}

static void bsrc_close(trc_source *s) {
    bsrc *b = (bsrc *)s;
    if (b->cont) b->cont->close(b->cont);
    win_close(&b->w);
    free(b);
}

static void meta_from_head(trc_source *s, const disk_head *h) {
    s->fmt = (trc_format)h->fmt;
    s->sorted = (h->flags & 1) != 0;
    s->origin_zero = (h->flags & 2) != 0;
    s->bucket_ns = h->bucket_ns;
    memcpy(s->notes, h->notes, sizeof s->notes);
    s->notes[sizeof s->notes - 1] = 0;
}

// Checks a complete file: header (version, key), trailer, a bounds walk of every record, count
// and checksum. Returns the end of the records, 0 when anything disagrees.
static size_t verify(win *w, size_t len, const trc_cache_key *want, disk_head *h, disk_tail *tail) {
    if (len < sizeof(disk_head) + sizeof(disk_tail)) return 0;
    const unsigned char *p = win_at(w, 0, sizeof *h);
    if (!p) return 0;
    memcpy(h, p, sizeof *h);
    if (memcmp(h->magic, CACHE_MAGIC, 8) || h->version != TRC_CACHE_VERSION) return 0;
    if (h->head_bytes < sizeof *h || h->head_bytes % 8 || h->head_bytes > len - sizeof *tail)
        return 0;
    if (want) {
        if (memcmp(&h->key, &want->k, sizeof h->key)) return 0;
        if (h->head_bytes - sizeof *h < want->k.path_len ||
            !(p = win_at(w, sizeof *h, want->k.path_len)) ||
            memcmp(p, want->path, want->k.path_len))
            return 0;
    }
    if (!(p = win_at(w, len - sizeof *tail, sizeof *tail))) return 0;
    memcpy(tail, p, sizeof *tail);
    if (tail->magic != TRAILER_MAGIC) return 0;
    size_t pos = h->head_bytes, end = len - sizeof *tail;
    uint64_t n = 0, sum = 0;
    while (pos < end) {
        if (end - pos < sizeof(disk_rec)) return 0;
        disk_rec d;
        if (!(p = win_at(w, pos, sizeof d))) return 0;
        memcpy(&d, p, sizeof d);
        if (d.nb > TRC_MAX_BLOCKS || (end - pos - sizeof d) / 8 < d.nb) return 0;
        size_t bytes = sizeof d + (size_t)d.nb * 8;
        if (!(p = win_at(w, pos, bytes))) return 0;
        sum = sum_words(sum, p, bytes);
        pos += bytes;
        n++;
    }
    if (n != tail->n || sum != tail->checksum) return 0;
    return end;
}

kvf_status trc_cache_open(trc_source **out, const char *cpath, const trc_cache_key *want) {
    *out = NULL;
    int fd = open(cpath, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return KVF_ENOENT;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0) {
        close(fd);
        return KVF_EPARSE;
    }
    bsrc *b = kvf_calloc(1, sizeof *b);
    if (!win_open(&b->w, fd)) {
        close(fd);
        free(b);
        return KVF_EIO;
    }
    disk_head h;
    disk_tail tail;
    size_t end = verify(&b->w, (size_t)sb.st_size, want, &h, &tail);
    if (!end) {
        win_close(&b->w);
        free(b);
        return KVF_EPARSE;
    }
    b->base.next = bsrc_next;
    b->base.close = bsrc_close;
    meta_from_head(&b->base, &h);
    b->pos = h.head_bytes;
    b->end = end;
    b->n = tail.n;
    b->final_skipped = tail.skipped;
    *out = &b->base;
    return KVF_OK;
}

// ---- writing: a tee source ------------------------------------------------------------------
#define TEE_BUF_BYTES (1u << 20)   // the spool's stdio buffer

typedef struct tsrc {
    trc_source base;
    trc_source *in;   // the live source (owned)
    FILE *f;          // spool / cache file being written, NULL after a failure
    char *tmp;        // its temporary name (cache), NULL for an anonymous spool
    char *publish;    // cache path to rename into at a complete end, NULL = spool only
    size_t head_bytes;
    uint64_t n, sum;
    bool complete;   // the live source reached its end without error
    bool failed;     // a write failed: nothing is published or replayed
    char *iobuf;     // f's buffer, freed after f is closed
} tsrc;

static void tee_drop(tsrc *t) {
    if (t->f && t->tmp)
        trc_atomic_commit(t->f, t->tmp, t->publish, false, NULL);
    else if (t->f)
        fclose(t->f);
    free(t->iobuf);
    t->iobuf = NULL;
    t->f = NULL;
    t->tmp = NULL;
    t->failed = true;
}

static bool tee_write(tsrc *t, const void *p, size_t n) {
    if (!t->f || t->failed) return false;
    if (n && fwrite(p, 1, n, t->f) != n) {
        tee_drop(t);
        return false;
    }
    return true;
}

static void tee_finish(tsrc *t) {
    disk_tail tail = {TRAILER_MAGIC, t->n, t->in->skipped, t->sum};
    if (!tee_write(t, &tail, sizeof tail)) return;
    if (fflush(t->f) != 0) {
        tee_drop(t);
        return;
    }
    if (t->publish && t->tmp) {
        // the descriptor stays open for the replay; the name moves into place
        if (rename(t->tmp, t->publish) != 0) unlink(t->tmp);
        free(t->tmp);
        t->tmp = NULL;
    }
}

static int tee_next(trc_source *s, trc_rec *rec, kvf_err *err) {
    tsrc *t = (tsrc *)s;
    int rc = t->in->next(t->in, rec, err);
    s->skipped = t->in->skipped;
    if (rc < 0) {
        tee_drop(t);
        return rc;
    }
    if (rc == 0) {
        if (!t->complete && !t->failed) {
            t->complete = true;
            tee_finish(t);
        }
        return 0;
    }
    if (t->failed || t->complete) return 1;
    disk_rec d;
    memset(&d, 0, sizeof d);
    d.t_ns = rec->t_ns;
    d.in = rec->in;
    d.out = rec->out;
    d.cls = rec->cls;
    d.flags = rec->flags;
    d.images = rec->images;
    d.turn = rec->turn;
    d.session = rec->session;
    d.key = rec->key;
    d.prev_key = rec->prev_key;
    d.think_ns = rec->think_ns;
    d.src_bt = rec->src_bt;
    d.nb = rec->nb;
    d.line = rec->line;
    d.skipped = t->in->skipped;
    t->sum = sum_words(t->sum, &d, sizeof d);
    t->sum = sum_words(t->sum, rec->blocks, (size_t)rec->nb * 8);
    if (tee_write(t, &d, sizeof d) && tee_write(t, rec->blocks, (size_t)rec->nb * 8)) t->n++;
    return 1;
}

static void tee_close(trc_source *s) {
    tsrc *t = (tsrc *)s;
    if (t->f) {
        if (t->tmp)
            trc_atomic_commit(t->f, t->tmp, t->publish, false, NULL);
        else
            fclose(t->f);
    }
    free(t->iobuf);
    if (t->in) t->in->close(t->in);
    free(t->publish);
    free(t);
}

trc_source *trc_tee_wrap(trc_source *in, const char *cpath, const trc_cache_key *ck) {
    FILE *f = NULL;
    char *tmp = NULL;
    if (cpath) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", cpath);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        if (kvf_mkdirs(dir, NULL) || trc_atomic_create(cpath, &f, &tmp, NULL)) f = NULL;
    }
    if (!f) {
        cpath = NULL;
        ck = NULL;
        f = tmpfile();
    }
    if (!f) return in;   // no spool at all: the caller measures the slow way
    tsrc *t = kvf_calloc(1, sizeof *t);
    // written in 1 MiB pieces, not the file's 4 KiB blocks (a write call each 4 KiB was 23,904
    // calls for the spool of the 1,000-GPU hour); glibc takes a size only with a buffer
    t->iobuf = malloc(TEE_BUF_BYTES);
    if (t->iobuf) setvbuf(f, t->iobuf, _IOFBF, TEE_BUF_BYTES);
    t->base = *in;   // metadata (format, bucket, notes) pass through
    t->base.next = tee_next;
    t->base.close = tee_close;
    t->in = in;
    t->f = f;
    t->tmp = tmp;
    t->publish = cpath ? kvf_strdup(cpath) : NULL;
    disk_head h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.version = TRC_CACHE_VERSION;
    size_t plen = ck ? ck->k.path_len : 0;
    h.head_bytes = (uint32_t)(sizeof h + (plen + 7) / 8 * 8);
    if (ck) h.key = ck->k;
    h.fmt = (int32_t)in->fmt;
    h.flags = (in->sorted ? 1u : 0u) | (in->origin_zero ? 2u : 0u);
    h.bucket_ns = in->bucket_ns;
    memcpy(h.notes, in->notes, sizeof h.notes);
    char pad[8] = {0};
    if (!tee_write(t, &h, sizeof h) || !tee_write(t, ck ? ck->path : "", plen) ||
        !tee_write(t, pad, h.head_bytes - sizeof h - plen))
        t->failed = true;
    t->head_bytes = h.head_bytes;
    return &t->base;
}

bool trc_is_tee(const trc_source *s) {
    return s && s->next == tee_next;
}

trc_source *trc_tee_replay(trc_source *s) {
    tsrc *t = (tsrc *)s;
    if (t->failed || !t->f || fflush(t->f) != 0) return NULL;
    long len = ftell(t->f);
    if (len <= 0) return NULL;
    int fd = fcntl(fileno(t->f), F_DUPFD_CLOEXEC, 0);   // the tee and its file may close below
    if (fd < 0) return NULL;
    bsrc *b = kvf_calloc(1, sizeof *b);
    if (!win_open(&b->w, fd)) {
        close(fd);
        free(b);
        return NULL;
    }
    b->base = t->base;
    b->base.next = bsrc_next;
    b->base.close = bsrc_close;
    b->base.skipped = 0;
    b->pos = t->head_bytes;
    b->end = t->complete ? (size_t)len - sizeof(disk_tail) : (size_t)len;
    b->final_skipped = t->in->skipped;
    b->n = t->n;
    // an incomplete spool (the measuring pass stopped early) continues with the live source;
    // a complete one no longer needs it, nor the tee
    b->cont = t->complete ? NULL : s;
    if (t->complete) tee_close(s);
    return &b->base;
}
