// tests/helpers/kvt.h -- shared test plumbing: where the sources and the shared traces are,
// running a scenario with overrides, reading summary figures, and the libcheck main.
#ifndef KVT_H
#define KVT_H

#include <check.h>
#include <jansson.h>
#include <stdbool.h>

// The repository root ($KVF_SOURCE_DIR, else ".").
const char *kvt_src(void);
// A file of the shared traces folder ($KVF_SHARED/traces/<name>); static buffer per call site
// is not needed: the result is copied into a ring of buffers, valid for the next 7 calls.
const char *kvt_shared_trace(const char *name);
// Loads scenarios/<scenario> (relative to the root), points workload.trace at trace (NULL keeps
// the scenario's), applies the overrides, validates and runs it. out_dir may be NULL. Fails the
// test with the message on any error.
json_t *kvt_run(const char *scenario, const char *trace, const char *const *sets, int n,
                const char *out_dir);
// When set, kvt_run lists every decode sequence per step (the reference path) instead of
// keeping running sums (sim_run_opts.decode_listed).
extern bool kvt_decode_listed;
// When set, kvt_run takes every decode step as its own event (sim_run_opts.decode_single).
extern bool kvt_decode_single;
// When set, kvt_run costs each run of decode steps whole as it is formed, not page by page
// (sim_run_opts.run_whole).
extern bool kvt_run_whole;
// When set, kvt_run's requests keep their block ids where nothing reads them
// (sim_run_opts.keep_blocks).
extern bool kvt_keep_blocks;
// When set, kvt_run asserts every min-load routing against a scan (sim_run_opts.router_check).
extern bool kvt_router_check;
// A number of the summary by dotted path ("ttft_ms.p90"); fails the test when missing.
double kvt_num(json_t *s, const char *path);
// The kvfleet binary under test ($KVF_BIN, else build/kvfleet).
const char *kvt_bin(void);
// A fresh temporary directory in kvt_tmp (prefix names it); kvt_tmp_remove deletes it.
extern char kvt_tmp[64];
void kvt_tmp_make(const char *prefix);
void kvt_tmp_remove(void);
// Removes path (a directory under /tmp) when the process that registered it exits normally: a
// test's process under fork mode when the test passed (a failed one's files stay); nothing is
// removed under KVF_TEST_KEEP. kvt_tmp_make registers its directory.
void kvt_tmp_register(const char *path);
// kvt_tmp/name, in one of 8 rotating static buffers (up to 8 paths live at once).
const char *kvt_tmp_path(const char *name);
// Runs a shell command line (printf-style) in the repository root: stdout into kvt_out,
// stderr into kvt_err; returns the exit status (128 when it did not exit normally).
extern char kvt_out[1 << 20], kvt_err[65536];
int kvt_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// A whole file as a NUL-terminated string (caller frees); fails the test when unreadable.
char *kvt_slurp(const char *path);
// Writes text to path (the test fails when it cannot).
void kvt_write(const char *path, const char *text);
// Occurrences of needle in hay (non-overlapping).
int kvt_count(const char *hay, const char *needle);
// Headless Chromium for page tests: the browser on PATH (chromium, chromium-browser,
// google-chrome), or NULL when none is installed (the test then exits 77).
const char *kvt_browser(void);
// Runs the browser on file `page` with extra args (e.g. --dump-dom), stdout into out, its
// stderr into logdir/browser.log; a fresh profile each time. Returns its exit status.
int kvt_browser_run(const char *page, const char *args, const char *out, const char *logdir);
// The value of attribute name in dom (its first occurrence) into out, or "" when absent.
void kvt_dom_attr(const char *dom, const char *name, char *out, size_t n);
// A shown figure read back in the unit summary.json keeps it in, independently of the
// formatter (key decides: _ms keys in ms, fractions as fractions): "943 ms", "5.40 s",
// "2.53 min", "58.1 %", "$0.0600", "$12,765", "37.6 k tokens/s", "4". NaN when unreadable.
double kvt_read_back(const char *key, const char *text);
// Takes a w x h screenshot of page into png and checks it: a PNG of that size and more than
// min_bytes (a blank page compresses to a few kB). Fails the test otherwise.
void kvt_browser_screenshot(const char *page, const char *png, unsigned w, unsigned h,
                            long min_bytes, const char *logdir);
// Runs the suite, returns the process exit code.
int kvt_main(Suite *s);

#endif
