// common/kvf.c -- implementation of the shared helpers (see kvf.h). The RNG is xoshiro256**
// (Blackman & Vigna), seeded by splitmix64 over (seed, stream) so streams are independent.
#define _POSIX_C_SOURCE 200809L
#include "kvf.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

kvf_status kvf_fail(kvf_err *err, kvf_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

void kvf_err_prefix(kvf_err *err, const char *fmt, ...) {
    if (!err) return;
    char pre[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(pre);
    if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
    memcpy(err->msg, pre, n);
    memcpy(err->msg + n, ": ", 2);
    size_t m = strlen(old);
    if (m > sizeof err->msg - n - 3) m = sizeof err->msg - n - 3;
    memcpy(err->msg + n + 2, old, m);
    err->msg[n + 2 + m] = 0;
}

int kvf_exit_code(kvf_status s) {
    switch (s) {
    case KVF_OK:
        return 0;
    case KVF_EPARSE:
    case KVF_EINVAL:
    case KVF_ENOENT:
        return 2;
    default:
        return 1;
    }
}

bool kvf_cli_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) return false;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return true;
    }
    return false;
}

bool kvf_cli_missing_value(const char *a, bool last, const char *valued) {
    if (!last || !a || a[0] != '-') return false;
    size_t n = strlen(a);
    for (const char *p = valued; (p = strstr(p, a)); p += n)
        if ((p == valued || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) return true;
    return false;
}

const char *kvf_status_name(kvf_status s) {
    static const char *names[] = {"ok",         "parse error", "invalid",
                                  "not found",  "i/o error",   "no memory",
                                  "run failed", "interrupted", "no device"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown";
}

void kvf_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "kvfleet: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
    abort();
}

bool (*kvf_alloc_hook)(size_t n);

static void *oom(size_t n) {
    fprintf(stderr, "kvfleet: out of memory allocating %zu bytes\n", n);
    fflush(stderr);
    _exit(1);
}

void *kvf_hooked_malloc(size_t n) {
    if (kvf_alloc_hook && !kvf_alloc_hook(n)) return NULL;
    return malloc(n ? n : 1);
}
void *kvf_hooked_realloc(void *p, size_t n) {
    if (kvf_alloc_hook && !kvf_alloc_hook(n)) return NULL;
    return realloc(p, n ? n : 1);
}
static void *hooked_calloc(size_t n, size_t size) {
    if (kvf_alloc_hook && !kvf_alloc_hook(n * size)) return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void *kvf_malloc(size_t n) {
    void *p = kvf_hooked_malloc(n);
    return p ? p : oom(n);
}
void *kvf_calloc(size_t n, size_t size) {
    void *p = hooked_calloc(n, size);
    return p ? p : oom(n * size);
}
void *kvf_realloc(void *p, size_t n) {
    void *q = kvf_hooked_realloc(p, n);
    return q ? q : oom(n);
}
void *kvf_aligned_malloc(size_t align, size_t n) {
    KVF_ASSERT(align && !(align & (align - 1)));
    // a table of 4 MiB or more goes on 2 MiB pages where the kernel allows them on request
    // (transparent huge pages in madvise mode): filling a fresh table otherwise takes a page
    // fault per 4 KiB, which on a virtual machine cost more than the fill itself
    bool huge = n >= KVF_HUGE_MIN;
    if (huge && align < KVF_HUGE_PAGE) align = KVF_HUGE_PAGE;
    size_t sz = (n + align - 1) / align * align;   // aligned_alloc wants a multiple
    if (kvf_alloc_hook && !kvf_alloc_hook(sz)) return oom(sz);
    void *p = aligned_alloc(align, sz ? sz : align);
    if (!p) return oom(sz);
#ifdef MADV_HUGEPAGE
    if (huge) (void)madvise(p, sz, MADV_HUGEPAGE);   // advice: refused, the table still works
#endif
    return p;
}
static size_t table_bytes(size_t n) {
    return (n + KVF_HUGE_PAGE - 1) / KVF_HUGE_PAGE * KVF_HUGE_PAGE;
}

static void table_advise(void *p, size_t sz) {
#ifdef MADV_HUGEPAGE
    (void)madvise(p, sz, MADV_HUGEPAGE);   // advice: refused, the table still works
#else
    (void)p, (void)sz;
#endif
}

void *kvf_table_map(size_t n) {
    size_t sz = table_bytes(n);
    if (kvf_alloc_hook && !kvf_alloc_hook(sz)) return oom(sz);
    void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return oom(sz);
    table_advise(p, sz);
    return p;
}

void *kvf_table_grow(void *p, size_t old_n, size_t n) {
    size_t osz = table_bytes(old_n), sz = table_bytes(n);
    if (sz <= osz) return p;
    if (kvf_alloc_hook && !kvf_alloc_hook(sz - osz)) return oom(sz - osz);
    void *q = mremap(p, osz, sz, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) return oom(sz);
    table_advise(q, sz);
    return q;
}

void kvf_table_free(void *p, size_t n) {
    if (p) munmap(p, table_bytes(n));
}

char *kvf_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(kvf_malloc(n), s, n);
}
void *kvf_try_malloc(size_t n, kvf_err *err) {
    void *p = kvf_hooked_malloc(n);
    if (!p) kvf_fail(err, KVF_ENOMEM, "cannot allocate %zu bytes", n);
    return p;
}
void *kvf_try_calloc(size_t n, size_t size, kvf_err *err) {
    void *p = hooked_calloc(n, size);
    if (!p) kvf_fail(err, KVF_ENOMEM, "cannot allocate %zu x %zu bytes", n, size);
    return p;
}

void kvf_grow(void **buf, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c >= SIZE_MAX / 2) oom(SIZE_MAX);
        c *= 2;
    }
    if (c > SIZE_MAX / elem) oom(SIZE_MAX);
    *buf = kvf_realloc(*buf, c * elem);
    *cap = c;
}

// ---- RNG --------------------------------------------------------------------------------
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// hash(hash(a) + b): distinct (a, b) pairs collide only by chance (2^-64), also for small ones
// (the boost-style xor-shift mix it replaces collided on small ids).
uint64_t kvf_hash_combine(uint64_t a, uint64_t b) {
    return kvf_hash64(kvf_hash64(a) + b);
}

void kvf_rng_init(kvf_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = kvf_hash_combine(seed, stream);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

void kvf_rng_init_named(kvf_rng *r, uint64_t seed, const char *purpose) {
    KVF_ASSERT(purpose && *purpose);
    uint64_t h = 0xcbf29ce484222325ULL;   // FNV-1a of the purpose's name
    for (const unsigned char *p = (const unsigned char *)purpose; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    kvf_rng_init(r, seed, h);
}

static inline uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

uint64_t kvf_rng_u64(kvf_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double kvf_rng_uniform(kvf_rng *r) {
    return (double)(kvf_rng_u64(r) >> 11) * 0x1.0p-53;
}

double kvf_rng_exp(kvf_rng *r, double mean) {
    return -mean * log1p(-kvf_rng_uniform(r));
}

double kvf_rng_normal(kvf_rng *r) {
    // Box-Muller, one value per call (the pair's second value is dropped to keep streams simple).
    double u1 = kvf_rng_uniform(r), u2 = kvf_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double kvf_rng_gamma(kvf_rng *r, double shape, double scale) {
    // Marsaglia & Tsang; shape < 1 boosted by U^(1/shape).
    if (shape <= 0) return 0;
    if (shape < 1) {
        double u = kvf_rng_uniform(r);
        return kvf_rng_gamma(r, shape + 1.0, scale) * pow(u < 1e-300 ? 1e-300 : u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = kvf_rng_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0);
        v = v * v * v;
        double u = kvf_rng_uniform(r);
        if (u < 1 - 0.0331 * x * x * x * x) return d * v * scale;
        if (log(u) < 0.5 * x * x + d * (1 - v + log(v))) return d * v * scale;
    }
}

double kvf_rng_lognormal(kvf_rng *r, double mu, double sigma) {
    return exp(mu + sigma * kvf_rng_normal(r));
}

uint32_t kvf_rng_below(kvf_rng *r, uint32_t n) {
    KVF_ASSERT(n > 0);
    return (uint32_t)(((kvf_rng_u64(r) >> 32) * (uint64_t)n) >> 32);
}

// ---- numeric ----------------------------------------------------------------------------
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// A double's bits as an unsigned key in the double's order: negative values have every bit
// flipped, the rest only the sign bit.
static inline uint64_t dkey(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u >> 63 ? ~u : u | (1ULL << 63);
}

static inline double dval(uint64_t k) {
    uint64_t u = k >> 63 ? k & ~(1ULL << 63) : ~k;
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

enum { RADIX_BITS = 11, RADIX = 1 << RADIX_BITS, RADIX_PASSES = 6, RADIX_MIN = 512 };

// LSD radix sort of the keys: six passes of 11 bits, a pass skipped where every key has the
// same digit. false (nothing changed) when the array holds a NaN or a negative zero, which
// compare unordered or equal to a different bit pattern: qsort's order is kept for those.
static bool radix_sort_doubles(double *v, size_t n) {
    uint64_t *a = malloc(2 * n * sizeof *a);
    uint32_t(*hist)[RADIX] = calloc(RADIX_PASSES, sizeof *hist);
    if (!a || !hist) {
        free(a), free(hist);
        return false;
    }
    uint64_t *b = a + n;
    for (size_t i = 0; i < n; i++) {
        if (isnan(v[i]) || (v[i] == 0 && signbit(v[i]))) {
            free(a), free(hist);
            return false;
        }
        uint64_t k = dkey(v[i]);
        a[i] = k;
        for (int p = 0; p < RADIX_PASSES; p++)
            hist[p][(k >> (p * RADIX_BITS)) & (RADIX - 1)]++;
    }
    for (int p = 0; p < RADIX_PASSES; p++) {
        uint32_t *h = hist[p];
        if (h[(a[0] >> (p * RADIX_BITS)) & (RADIX - 1)] == n) continue;   // one digit: in order
        uint32_t sum = 0;
        for (int d = 0; d < RADIX; d++) {
            uint32_t c = h[d];
            h[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            b[h[(a[i] >> (p * RADIX_BITS)) & (RADIX - 1)]++] = a[i];
        uint64_t *t = a;
        a = b, b = t;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = dval(a[i]);
    free(a < b ? a : b);
    free(hist);
    return true;
}

// Sorted ascending. Large arrays by radix (the same result as the comparison sort: doubles
// that compare equal are then the same bits), small ones, and any with a NaN or a negative
// zero, by qsort.
void kvf_sort_doubles(double *v, size_t n) {
    if (n < 2) return;
    if (n >= RADIX_MIN && n <= UINT32_MAX && radix_sort_doubles(v, n)) return;
    qsort(v, n, sizeof *v, cmp_double);
}

double kvf_percentile_sorted(const double *v, size_t n, double p) {
    if (n == 0) return 0;
    if (p <= 0) return v[0];
    if (p >= 100) return v[n - 1];
    double pos = p / 100.0 * (double)(n - 1);
    size_t i = (size_t)pos;
    double f = pos - (double)i;
    return i + 1 < n ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

// A non-negative finite number at the start of s; *unit points past it and any spaces.
static bool number_with_unit(const char *s, double *v, const char **unit) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    if (end == s || errno || !isfinite(*v) || *v < 0) return false;
    while (*end == ' ')
        end++;
    *unit = end;
    return true;
}

bool kvf_parse_duration_ns(const char *s, int64_t *out_ns) {
    double v;
    const char *end;
    if (!number_with_unit(s, &v, &end)) return false;
    double mult;
    if (!*end || !strcmp(end, "s"))
        mult = 1e9;
    else if (!strcmp(end, "ms"))
        mult = 1e6;
    else if (!strcmp(end, "us"))
        mult = 1e3;
    else if (!strcmp(end, "ns"))
        mult = 1;
    else if (!strcmp(end, "m") || !strcmp(end, "min"))
        mult = 60e9;
    else if (!strcmp(end, "h"))
        mult = 3600e9;
    else if (!strcmp(end, "d"))
        mult = 86400e9;
    else if (!strcmp(end, "w"))
        mult = 7 * 86400e9;
    else
        return false;
    double ns = v * mult;
    if (ns > 9.2e18) return false;
    *out_ns = (int64_t)llround(ns);
    return true;
}

bool kvf_parse_bytes(const char *s, double *out) {
    double v;
    const char *end;
    if (!number_with_unit(s, &v, &end)) return false;
    static const struct {
        const char *u;
        double m;
    } units[] = {{"", 1},
                 {"B", 1},
                 {"KB", 1e3},
                 {"MB", 1e6},
                 {"GB", 1e9},
                 {"TB", 1e12},
                 {"PB", 1e15},
                 {"KiB", 1024.0},
                 {"MiB", 1048576.0},
                 {"GiB", 1073741824.0},
                 {"TiB", 1099511627776.0},
                 {"PiB", 1125899906842624.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].u)) {
            *out = v * units[i].m;
            return true;
        }
    return false;
}

int64_t kvf_wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * KVF_NS_PER_S + ts.tv_nsec;
}

bool kvf_streq(const char *a, const char *b) {
    return a && b && !strcmp(a, b);
}

bool kvf_endswith(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

// Opens path for reading after checking what it is: never blocks on a FIFO (O_NONBLOCK, then
// fstat on the descriptor itself, so the check and the open see the same file).
static int open_regular(const char *path, struct stat *sb, kvf_err *err) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return kvf_fail(err, KVF_ENOENT, "%s: No such file", path), -1;
        if (errno == EISDIR)
            return kvf_fail(err, KVF_EINVAL, "%s: is a directory, not a file", path), -1;
        return kvf_fail(err, errno == EACCES ? KVF_EINVAL : KVF_EIO, "%s: cannot open: %s", path,
                        strerror(errno)),
               -1;
    }
    if (fstat(fd, sb) != 0) {
        kvf_fail(err, KVF_EIO, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(sb->st_mode)) {
        const char *what = S_ISDIR(sb->st_mode)    ? "a directory"
                           : S_ISFIFO(sb->st_mode) ? "a FIFO (pipe)"
                           : S_ISCHR(sb->st_mode)  ? "a character device"
                           : S_ISBLK(sb->st_mode)  ? "a block device"
                           : S_ISSOCK(sb->st_mode) ? "a socket"
                                                   : "not a regular file";
        kvf_fail(err, KVF_EINVAL, "%s: is %s, not a regular file", path, what);
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

FILE *kvf_open_input(const char *path, kvf_err *err) {
    struct stat sb;
    int fd = open_regular(path, &sb, err);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        kvf_fail(err, KVF_ENOMEM, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

kvf_status kvf_read_file(const char *path, char **out, size_t *len, kvf_err *err) {
    struct stat sb;
    int fd = open_regular(path, &sb, err);
    if (fd < 0) return err ? err->code : KVF_EIO;
    if (sb.st_size > (off_t)KVF_READ_MAX) {
        close(fd);
        return kvf_fail(err, KVF_EINVAL, "%s: %lld bytes, over the %u MiB limit for this file",
                        path, (long long)sb.st_size, KVF_READ_MAX >> 20);
    }
    char *buf = kvf_try_malloc((size_t)sb.st_size + 65536 + 1, err);
    if (!buf) {
        close(fd);
        return KVF_ENOMEM;
    }
    size_t cap = (size_t)sb.st_size + 65536, n = 0;
    bool bad = false;
    for (;;) {   // the file may grow while read: stop at the cap
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            bad = true;
            break;
        }
        if (got == 0) break;
        n += (size_t)got;
        if (n == cap) {
            if (cap > KVF_READ_MAX) {
                close(fd);
                free(buf);
                return kvf_fail(err, KVF_EINVAL, "%s: over the %u MiB limit for this file", path,
                                KVF_READ_MAX >> 20);
            }
            char *nb = kvf_hooked_realloc(buf, cap * 2 + 1);
            if (!nb) {
                close(fd);
                free(buf);
                return kvf_fail(err, KVF_ENOMEM, "%s: out of memory reading it", path);
            }
            buf = nb;
            cap *= 2;
        }
    }
    close(fd);
    if (bad) {
        free(buf);
        return kvf_fail(err, KVF_EIO, "%s: read error", path);
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return KVF_OK;
}

kvf_status kvf_mkdirs(const char *path, kvf_err *err) {
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp)
        return kvf_fail(err, KVF_EINVAL, "bad directory path '%s'", path);
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) && errno != EEXIST)
            return kvf_fail(err, KVF_EIO, "%s: cannot create directory: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) && errno != EEXIST)
        return kvf_fail(err, KVF_EIO, "%s: cannot create directory: %s", tmp, strerror(errno));
    return KVF_OK;
}
