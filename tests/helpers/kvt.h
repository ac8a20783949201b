// tests/helpers/kvt.h -- shared test plumbing: where the sources and the shared traces are,
// running a scenario with overrides, reading summary figures, and the libcheck main.
#ifndef KVT_H
#define KVT_H

#include <check.h>
#include <jansson.h>

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
// A number of the summary by dotted path ("ttft_ms.p90"); fails the test when missing.
double kvt_num(json_t *s, const char *path);
// Runs the suite, returns the process exit code.
int kvt_main(Suite *s);

#endif
