// common/kvf.h -- helpers shared by every kvfleet library: status codes with a message,
// always-on assertions, checked allocation, deterministic RNG streams and small numeric
// utilities. Plain C11, no dependencies, so the engine can build alone with it.
//
// Invariants: library code never prints and never exits; it fills a kvf_err and returns a
// status. Only main() turns a status into a message and an exit code (kvf_exit_code).
#ifndef KVF_H
#define KVF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KVF_VERSION "0.1.0"

typedef enum kvf_status {
    KVF_OK = 0,
    KVF_EPARSE,   // malformed input (file:line:field in the message) -> exit 2
    KVF_EINVAL,   // bad usage or bad value (key named in the message) -> exit 2
    KVF_ENOENT,   // missing file -> exit 2
    KVF_EIO,      // read/write failure of an existing resource -> exit 1
    KVF_ENOMEM,   // allocation failed -> exit 1
    KVF_ERUN,     // the run itself failed (database, engine, device) -> exit 1
    KVF_EINTR,    // interrupted by a signal; results written so far are kept -> exit 1
    KVF_ENODEV,   // no device for the requested backend -> exit 1 (tests: skip)
} kvf_status;

typedef struct kvf_err {
    kvf_status code;   // KVF_OK when nothing failed
    char msg[1024];    // human message; names file:line and field for input errors
} kvf_err;

// Formats the message into *err (may be NULL) and returns code. Use as
// `return kvf_fail(err, KVF_EPARSE, "%s:%d: unknown key '%s'", path, line, key);`
kvf_status kvf_fail(kvf_err *err, kvf_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// Prepends "prefix: " to an existing message (adds context while unwinding).
void kvf_err_prefix(kvf_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Process exit code for a status: 0 ok, 2 bad usage/input, 1 anything else.
int kvf_exit_code(kvf_status s);
const char *kvf_status_name(kvf_status s);

// Command-line helpers shared by the CLIs (pure: the caller prints).
// True when argv[1..] asks for help (--help or -h) before any "--".
bool kvf_cli_help(int argc, char **argv);
// True when option A is one of VALUED (space-separated, e.g. "-o --set --seed") and has no
// argument after it (LAST): its value is missing, rather than the option being unknown.
bool kvf_cli_missing_value(const char *a, bool last, const char *valued);

// Always-on assertion for bugs (never for bad input): prints expression and file:line, aborts.
#define KVF_ASSERT(c)                                                                              \
    do {                                                                                           \
        if (!(c)) kvf_assert_fail(#c, __FILE__, __LINE__);                                         \
    } while (0)
_Noreturn void kvf_assert_fail(const char *expr, const char *file, int line);

// Allocation, tier 1: small and bounded; on failure prints "kvfleet: out of memory ..." and
// exits 1 (a clean exit, not abort(): out of memory is a resource limit, not a bug).
void *kvf_malloc(size_t n);
void *kvf_calloc(size_t n, size_t size);
void *kvf_realloc(void *p, size_t n);
char *kvf_strdup(const char *s);
// n bytes aligned to align (a power of two), through the hook; free() releases it. From
// KVF_HUGE_MIN bytes up, aligned to KVF_HUGE_PAGE and advised onto huge pages.
enum { KVF_HUGE_PAGE = 2 << 20, KVF_HUGE_MIN = 4 << 20 };
void *kvf_aligned_malloc(size_t align, size_t n);
// A table that grows by doubling: n bytes of zeroed anonymous memory (page-aligned, on huge
// pages where the kernel allows them on request), through the hook; kvf_table_grow takes it
// to n bytes keeping its contents and the pages already written (mremap: nothing copied, no
// page faulted in again); kvf_table_free releases n bytes of it.
void *kvf_table_map(size_t n);
void *kvf_table_grow(void *p, size_t old_n, size_t n);
void kvf_table_free(void *p, size_t n);
// Allocation, tier 2: large or input-sized; returns NULL and fills *err (KVF_ENOMEM).
void *kvf_try_malloc(size_t n, kvf_err *err);
void *kvf_try_calloc(size_t n, size_t size, kvf_err *err);

// Allocator hook (fault injection in tests): every kvf_* allocation, jansson's and SQLite's
// (once rpt_ wires them) asks kvf_alloc_hook(n) first when it is set; false = behave as if the
// allocation failed. NULL (the default) costs one pointer test.
extern bool (*kvf_alloc_hook)(size_t n);
// malloc/realloc through the hook (for libraries that take allocator functions).
void *kvf_hooked_malloc(size_t n);
void *kvf_hooked_realloc(void *p, size_t n);

// Grows *buf (elements of elem bytes, capacity *cap) to hold at least need elements.
// Doubling; aborts on overflow or failure (tier 1).
void kvf_grow(void **buf, size_t *cap, size_t need, size_t elem);

// ---- deterministic random numbers -------------------------------------------------------
// xoshiro256** seeded through splitmix64 from (seed, stream). Every entity draws from its own
// stream, so adding draws in one entity never shifts another's sequence.
typedef struct kvf_rng {
    uint64_t s[4];
} kvf_rng;

void kvf_rng_init(kvf_rng *r, uint64_t seed, uint64_t stream);
// One stream per purpose ("router.p2c", "workload.structured", ...): seeded from the run's
// seed and the purpose's name, so adding draws for one purpose never moves another's.
void kvf_rng_init_named(kvf_rng *r, uint64_t seed, const char *purpose);
uint64_t kvf_rng_u64(kvf_rng *r);
double kvf_rng_uniform(kvf_rng *r);                             // [0, 1)
double kvf_rng_exp(kvf_rng *r, double mean);                    // exponential with this mean
double kvf_rng_normal(kvf_rng *r);                              // standard normal
double kvf_rng_gamma(kvf_rng *r, double shape, double scale);   // mean shape*scale
double kvf_rng_lognormal(kvf_rng *r, double mu, double sigma);
uint32_t kvf_rng_below(kvf_rng *r, uint32_t n);   // uniform in [0, n), n > 0

// 64-bit mixing hash (splitmix64 finaliser; inline: it sits in every hash-table probe) and a
// combiner for chained block ids.
static inline uint64_t kvf_hash64(uint64_t x) {
    uint64_t z = x + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
uint64_t kvf_hash_combine(uint64_t a, uint64_t b);

// ---- small numeric helpers --------------------------------------------------------------
// Percentile (p in [0,100]) of v[0..n) by linear interpolation between order statistics;
// sorts v in place. Returns 0 for n == 0.
double kvf_percentile_sorted(const double *sorted, size_t n, double p);
void kvf_sort_doubles(double *v, size_t n);

// Parses a duration like "7d", "3h", "90m", "30s", "250ms", "100us" or a bare number of
// seconds into ns. Returns false on a malformed string.
bool kvf_parse_duration_ns(const char *s, int64_t *out_ns);
// Parses a byte size like "100PiB", "4TB", "512GiB", "12345" into bytes (double).
bool kvf_parse_bytes(const char *s, double *out_bytes);

// Monotonic wall clock in ns (for wall-time figures only; never for simulated time).
int64_t kvf_wall_ns(void);

// Simple string helpers.
bool kvf_streq(const char *a, const char *b);
bool kvf_endswith(const char *s, const char *suffix);
// Reads a whole file into a NUL-terminated buffer (caller frees). KVF_ENOENT when missing;
// KVF_EINVAL (exit 2) for a path that is not a regular file (a directory, FIFO, device) or a
// file over KVF_READ_MAX bytes; KVF_EIO for a read error.
#define KVF_READ_MAX (64u << 20)
kvf_status kvf_read_file(const char *path, char **out, size_t *len, kvf_err *err);
// Opens an input file for reading, refusing anything but a regular file without blocking
// (a FIFO is opened non-blocking, checked, and refused). NULL with *err filled as above.
FILE *kvf_open_input(const char *path, kvf_err *err);
// Creates a directory and its parents (like mkdir -p). KVF_EIO on failure.
kvf_status kvf_mkdirs(const char *path, kvf_err *err);

// Optional parts built as shared objects beside the executables (libkvfleet-cuda.so,
// libkvfleet-mpi.so) and loaded only by the commands that use them, so the common paths start
// without CUDA or MPI in memory. kvf_module_open looks for `file` in $KVF_MODULE_DIR, in the
// running executable's directory, in its parent (build/bench -> build) and in
// <exe>/../lib/kvfleet, then lets dlopen search (LD_LIBRARY_PATH). Returns the handle (never
// closed: the module stays for the process's life), or NULL with KVF_ENODEV and every place
// tried (and dlopen's reason) in *err. global: make its symbols and its dependencies' visible
// to later loads (Open MPI loads its own plugins that way).
void *kvf_module_open(const char *file, bool global, kvf_err *err);
// The address of symbol `name` in module `h`, or NULL with KVF_ENODEV naming file and symbol.
void *kvf_module_sym(void *h, const char *file, const char *name, kvf_err *err);

#define KVF_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KVF_MAX(a, b) ((a) > (b) ? (a) : (b))
#define KVF_NS_PER_S 1000000000LL

#endif
