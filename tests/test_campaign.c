// tests/test_campaign.c -- a campaign of malformed and extreme inputs against the kvfleet
// binary. Every case is one command with its expected exit code and message fragments; each
// outcome is classified:
//   good    exit code as expected and every fragment in the output
//   vague   a non-zero exit, but the wrong code or a message without the fragments
//   silent  exit 0 where an error was expected (a silent accept)
//   crash   killed by a signal, or a sanitizer / internal-error report
//   hang    still running at the per-case timeout
// The cases: every numeric scenario key (walked through sim_config_key_info, so keys added
// later are covered) with out-of-range, non-finite, malformed and non-scalar values, as --set
// overrides and in scenario files; then hand-written files: YAML bombs, non-regular files,
// malformed traces of every format, model and hardware files, command-line misuse, and
// extreme but valid inputs that must finish (exit 0) in bounded time.
// The test fails on any crash, hang, silent accept or vague message, and prints the table.
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "sim.h"

#define CASE_TIMEOUT_S 30

typedef struct kcase {
    char name[112];
    char cmd[1400];
    int want;            // expected exit code
    char frag[2][200];   // expected fragments ("" = none)
} kcase;

static kcase *cases;
static int ncases, capcases;
static char T[64];    // the campaign's directory
static char S[128];   // a small valid scenario in it
static int nfile;     // numbering of written files

static kcase *add(int want, const char *f1, const char *f2, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static kcase *add(int want, const char *f1, const char *f2, const char *name, const char *fmt,
                  ...) {
    if (ncases == capcases) {
        capcases = capcases ? capcases * 2 : 256;
        cases = realloc(cases, (size_t)capcases * sizeof *cases);
        ck_assert(cases);
    }
    kcase *c = &cases[ncases++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->cmd, sizeof c->cmd, fmt, ap);
    va_end(ap);
    c->want = want;
    snprintf(c->frag[0], sizeof c->frag[0], "%s", f1 ? f1 : "");
    snprintf(c->frag[1], sizeof c->frag[1], "%s", f2 ? f2 : "");
    return c;
}

// Writes text (len bytes; -1 = strlen) to T/<name> and returns the path (static ring).
static const char *put(const char *name, const char *text, long len) {
    static char ring[8][160];
    static int k;
    char *p = ring[k++ & 7];
    snprintf(p, 160, "%s/%s", T, name);
    FILE *f = fopen(p, "wb");
    ck_assert_msg(f, "%s: %s", p, strerror(errno));
    fwrite(text, 1, len < 0 ? strlen(text) : (size_t)len, f);
    fclose(f);
    return p;
}

// A fresh file name n<k>.<ext> in T.
static const char *fresh(const char *ext) {
    static char b[8][32];
    static int k;
    char *p = b[k++ & 7];
    snprintf(p, 32, "n%d.%s", nfile++, ext);
    return p;
}

// `kvfleet run` of scenario file sc with extra arguments, into a fresh output directory. Not
// -q: the cases that must finish are checked on the summary the run prints ("31 arrived").
#define RUN "%s run %s --no-report -o %s/o%d"
#define RUNARGS(sc) kvt_bin(), sc, T, ncases

// ---- generated: every numeric key ---------------------------------------------------------------
static void fmt_num(char *out, size_t n, double v) {
    snprintf(out, n, "%.17g", v);
}

static void key_cases(void) {
    const char *key;
    double lo, hi;
    bool integer, lo_open;
    for (size_t i = 0; sim_config_key_info(i, &key, &lo, &hi, &integer, &lo_open); i++) {
        char below[64], above[64], setk[160], name[112];
        fmt_num(below, sizeof below, lo_open ? lo : lo == 0 ? -1 : integer ? lo - 1 : lo / 2);
        fmt_num(above, sizeof above, integer ? hi + 1 : hi * 2);
        snprintf(setk, sizeof setk, "--set %s:", key);
        const struct {
            const char *v, *frag, *tag;
        } vals[] = {
            {below, "must be in", "below"},   {above, "must be in", "above"},
            {"1e300", "must be in", "1e300"}, {"-1e300", "must be in", "-1e300"},
            {"nan", "expects", "nan"},        {"1e999", "expects", "overflow"},
            {"twelve", "expects", "word"},    {"[1, 2]", "expects", "list"},
        };
        for (size_t j = 0; j < sizeof vals / sizeof vals[0]; j++) {
            snprintf(name, sizeof name, "set %s=%s", key, vals[j].tag);
            add(2, setk, vals[j].frag, name, RUN " --set '%s=%s'", RUNARGS(S), key, vals[j].v);
        }
        // the same key in a scenario file, nested as the file would write it
        const struct {
            const char *v, *frag, *tag;
        } fvals[] = {{below, "must be in", "below"},
                     {"1e300", "must be in", "1e300"},
                     {"{a: 1}", "expects", "mapping"}};
        for (size_t j = 0; j < sizeof fvals / sizeof fvals[0]; j++) {
            char yaml[512], want[200];
            size_t used = 0;
            int depth = 0;
            const char *k = key;
            for (const char *dot; (dot = strchr(k, '.')); k = dot + 1, depth++)
                used += (size_t)snprintf(yaml + used, sizeof yaml - used, "%*s%.*s:\n", 2 * depth,
                                         "", (int)(dot - k), k);
            snprintf(yaml + used, sizeof yaml - used, "%*s%s: %s\n", 2 * depth, "", k, fvals[j].v);
            const char *fn = fresh("yaml");
            put(fn, yaml, -1);
            snprintf(want, sizeof want, "%s:%d: key '%s'", fn, depth + 1, key);
            snprintf(name, sizeof name, "file %s=%s", key, fvals[j].tag);
            char path[160];
            snprintf(path, sizeof path, "%s/%s", T, fn);
            add(2, want, fvals[j].frag, name, RUN, RUNARGS(path));
        }
    }
}

// ---- hand-written scenario files ----------------------------------------------------------------
static void scenario_file(const char *name, const char *yaml, const char *f1, const char *f2) {
    const char *fn = fresh("yaml");
    const char *p = put(fn, yaml, -1);
    char want[200];
    snprintf(want, sizeof want, "%s%s", f1 && f1[0] == ':' ? fn : "", f1 ? f1 : "");
    add(2, want, f2, name, RUN, RUNARGS(p));
}

static char *deep_yaml(int depth, bool flow) {
    size_t n = (size_t)depth * 4 + 64;
    char *s = malloc(n);
    ck_assert(s);
    size_t u = 0;
    if (flow) {
        u += (size_t)sprintf(s + u, "economics: ");
        for (int i = 0; i < depth; i++)
            s[u++] = '[';
        for (int i = 0; i < depth; i++)
            s[u++] = ']';
        s[u++] = '\n';
    } else {
        for (int i = 0; i < depth; i++)
            s[u++] = '-', s[u++] = ' ';
        s[u++] = 'x';
        s[u++] = '\n';
    }
    s[u] = 0;
    return s;
}

static void scenario_cases(void) {
    scenario_file("alias loop under economics", "economics:\n  gpu_hour_usd: &r [1, *r]\n",
                  ":2:", "alias loop");
    scenario_file("alias loop in a mapping", "cluster: &c\n  prefill: *c\n", ":2:", "alias loop");
    scenario_file("billion laughs",
                  "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                  "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                  "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                  "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                  "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                  "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                  "g: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n",
                  ":6:", "aliases are expanded");
    char *d = deep_yaml(100000, true);
    scenario_file("100k-deep flow nesting", d, ":1:", "nested deeper");
    free(d);
    d = deep_yaml(20000, false);
    scenario_file("20k-deep block nesting", d, ":1:", "nested deeper");
    free(d);
    d = deep_yaml(65, true);
    scenario_file("65-deep nesting", d, ":1:", "nested deeper");
    free(d);
    scenario_file("second document", "name: a\n---\nname: b\n", ":3:", "second YAML document");
    scenario_file("a list at the top", "- 1\n- 2\n", ":1:", "must be a mapping");
    scenario_file("a scalar at the top", "hello\n", ":1:", "must be a mapping");
    scenario_file("unknown top key", "nmae: x\n", ":1:", "unknown key");
    scenario_file("unknown nested key", "cluster:\n  prefil: {instances: 1}\n",
                  ":2:", "unknown key");
    scenario_file("duplicate key", "seed: 1\nseed: 2\n", ":2:", "duplicate key");
    scenario_file("duplicate nested key", "slo:\n  ttft_p90_ms: 1\n  ttft_p90_ms: 2\n",
                  ":3:", "duplicate key");
    // the same key written nested and dotted, and twice in a schedule entry
    scenario_file("duplicate key, dotted after nested",
                  "slo: {ttft_p90_ms: 100}\nslo.ttft_p90_ms: 900\n",
                  ":2:", "duplicate key (first at line 1)");
    scenario_file("duplicate key, nested after dotted",
                  "cluster.decode.instances: 4\ncluster: {decode: {instances: 1}}\n",
                  ":2:", "duplicate key (first at line 1)");
    scenario_file("duplicate economics key",
                  "economics: {gpu_hour_usd: 3}\neconomics.gpu_hour_usd: 5\n",
                  ":2:", "duplicate key");
    {
        char key[400] = "";
        memset(key, 'k', 300);
        char yaml[420];
        snprintf(yaml, sizeof yaml, "%s: 1\n", key);
        scenario_file("a 300-character key", yaml, ":1:", "is too long (300 characters");
    }
    scenario_file("duplicate key in a schedule entry",
                  "cluster:\n  schedule: [{from_h: 0, prefill: 1, prefill: 3}]\n",
                  ":2:", "duplicate key");
    scenario_file("tab indentation", "cluster:\n\tprefill: 1\n", ":2:", "malformed YAML");
    scenario_file("unclosed flow", "cluster: {prefill: {instances: 1}\n", ":", "malformed YAML");
    scenario_file("unclosed quote", "name: \"abc\n", ":", "malformed YAML");
    scenario_file("bad enum", "cluster:\n  mode: sideways\n", ":2:", "unknown value 'sideways'");
    scenario_file("bad router", "router:\n  prefill: psychic\n", ":2:", "unknown value");
    scenario_file("bad step model", "step_model: magic\n", ":1:", "unknown value");
    scenario_file("bad bool", "kv_cache:\n  prefix_cache: maybe\n", ":2:", "true or false");
    scenario_file("bad duration", "kv_cache:\n  ssd:\n    retention: {chatbot: 7 fortnights}\n",
                  ":3:", "duration");
    scenario_file("negative duration", "kv_cache:\n  ssd:\n    retention: {chatbot: -3d}\n",
                  ":3:", "duration");
    scenario_file("huge duration", "kv_cache:\n  ssd:\n    retention: {chatbot: 1e300d}\n",
                  ":3:", "duration");
    scenario_file("capacity negative", "kv_cache:\n  ssd: {capacity_tb: -1}\n", ":2:", ">= 0");
    scenario_file("capacity huge", "kv_cache:\n  ssd: {capacity_tb: 1e300}\n", ":2:", "1e21");
    scenario_file("capacity bad unit", "kv_cache:\n  dram: {gb_per_node: 5 parsecs}\n",
                  ":2:", "size like");
    scenario_file("capacity size huge", "kv_cache:\n  ssd: {capacity_tb: 1e300PiB}\n",
                  ":2:", "1e21");
    scenario_file("seed negative", "seed: -1\n", ":1:", "whole number");
    scenario_file("seed too big", "seed: 99999999999999999999999\n", ":1:", "whole number");
    scenario_file("seed float", "seed: 1.5\n", ":1:", "whole number");
    scenario_file(
        "name too long",
        "name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
        ":1:", "longer than");
    scenario_file("key as a list", "[a, b]: 1\n", ":1:", "non-empty scalar");
    scenario_file("section as a scalar", "cluster: 5\n", ":1:", "expects a mapping");
    scenario_file("section as a list", "slo: [1, 2]\n", ":1:", "expects a mapping");
    scenario_file("schedule as a scalar", "cluster:\n  schedule: 5\n", ":2:", "list");
    scenario_file("schedule entry not a mapping", "cluster:\n  schedule: [5]\n", ":2:", "mapping");
    scenario_file("schedule unknown key", "cluster:\n  schedule: [{from_h: 0, gpus: 3}]\n",
                  ":2:", "unknown key");
    scenario_file("schedule hour 25", "cluster:\n  schedule: [{from_h: 25, prefill: 1}]\n",
                  ":2:", "[0, 24)");
    scenario_file("schedule out of order",
                  "cluster:\n  schedule: [{from_h: 5, prefill: 1}, {from_h: 2, prefill: 1}]\n",
                  ":2:", "increasing");
    scenario_file("schedule missing from_h", "cluster:\n  schedule: [{prefill: 1}]\n",
                  ":2:", "missing");
    scenario_file("schedule negative count", "cluster:\n  schedule: [{from_h: 1, prefill: -1}]\n",
                  ":2:", "whole number");
    scenario_file("empty economics key", "economics:\n  gpu_hour_usd: [1, 2, 3]\n",
                  ":2:", "economics.gpu_hour_usd");
    scenario_file("model missing", "model: no-such-model\n", ":1:", "No such file");
    scenario_file("hardware missing", "hardware: no-such-gpu\n", ":1:", "No such file");
    scenario_file("trace missing", "workload: {trace: /nonexistent/t.jsonl}\n",
                  ":1:", "No such file");
    scenario_file("binary junk", "\x01\x02\x03\xff\xfe\n", ":", "malformed YAML");
    scenario_file("invalid UTF-8", "name: \xc3\x28\n", ":", "malformed YAML");
    {   // a NUL byte: libyaml would stop there and drop the rest of the file
        const char *fn = fresh("yaml");
        const char *p = put(fn, "name: a\n\0seed: 2\n", 17);
        char want[64];
        snprintf(want, sizeof want, "%s:2:", fn);
        add(2, want, "NUL byte", "NUL byte", RUN, RUNARGS(p));
    }

    // a scenario that asks the impossible, caught by validation with the key named
    char y[1024];
    snprintf(y, sizeof y,
             "workload: {trace: %s/tiny.jsonl}\ncluster:\n  prefill: {instances: 2}\n"
             "  decode: {instances: 2}\n  schedule: [{from_h: 0, prefill: 10, decode: 1}]\n",
             T);
    scenario_file("schedule asks more instances than exist", y, ":5:", "more than the 2");
    snprintf(y, sizeof y,
             "workload: {trace: %s/tiny.jsonl}\ncluster:\n  prefill: {instances: 2}\n"
             "  decode: {instances: 2}\n  schedule: [{from_h: 0, prefill: 0, decode: 1}]\n",
             T);
    scenario_file("schedule asks 0 instances", y, ":5:", "asks 0 instances");
    snprintf(y, sizeof y, "workload: {trace: %s/tiny.jsonl}\ncluster: {prefill: {instances: 0}}\n",
             T);
    scenario_file("disaggregated without prefill", y, ":2:", "at least 1 prefill");
    snprintf(y, sizeof y, "workload: {trace: %s/tiny.jsonl, start_s: 10, end_s: 5}\n", T);
    scenario_file("window ends before it starts", y, ":1:", "workload.end_s");
    snprintf(y, sizeof y, "workload:\n  generate: {rate_rps: 1000000, duration_s: 3e7}\n");
    scenario_file("generated workload too large", y, ":", "over the");
    snprintf(
        y, sizeof y,
        "workload: {trace: %s/tiny.jsonl}\ncluster:\n  prefill: {gpus_per_instance: 8, tp: 3}\n",
        T);
    scenario_file("tp does not divide", y, ":3:", "must divide");
    snprintf(y, sizeof y,
             "model: llama-3.1-70b\nworkload: {trace: %s/tiny.jsonl}\n"
             "cluster: {prefill: {gpus_per_instance: 1}}\n",
             T);
    scenario_file("model does not fit its GPUs", y, ":3: key 'cluster.prefill.gpus_per_instance'",
                  "does not fit");
    snprintf(y, sizeof y, "model: %s/n_bad_model.yaml\nworkload: {trace: %s/tiny.jsonl}\n", T, T);
    put("n_bad_model.yaml", "name: x\nlayers: 2\nhidden: 64\nheads: 0\nvocab: 10\n", -1);
    scenario_file("model with zero heads", y, "n_bad_model.yaml:4", "heads");
}

// ---- non-regular files, sizes -----------------------------------------------------------------
static void file_kind_cases(void) {
    char fifo[160];
    snprintf(fifo, sizeof fifo, "%s/fifo", T);
    ck_assert(mkfifo(fifo, 0644) == 0);
    char dir[160];
    snprintf(dir, sizeof dir, "%s/adir", T);
    ck_assert(mkdir(dir, 0755) == 0);
    const struct {
        const char *path, *what, *frag;
    } kinds[] = {{"/dev/zero", "/dev/zero", "device"},
                 {fifo, "a FIFO", "FIFO"},
                 {dir, "a directory", "directory"},
                 {"/dev/null", "/dev/null", "device"}};
    char name[112];
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const char *p = kinds[i].path;
        snprintf(name, sizeof name, "%s as scenario", kinds[i].what);
        add(2, p, kinds[i].frag, name, RUN, RUNARGS(p));
        snprintf(name, sizeof name, "%s as trace", kinds[i].what);
        add(2, p, kinds[i].frag, name, RUN " --trace %s", RUNARGS(S), p);
        snprintf(name, sizeof name, "%s as model", kinds[i].what);
        add(2, "model", kinds[i].frag, name, RUN " --set model=%s", RUNARGS(S), p);
        snprintf(name, sizeof name, "%s as hardware", kinds[i].what);
        add(2, "hardware", kinds[i].frag, name, RUN " --set hardware=%s", RUNARGS(S), p);
        static const char *const fmts[] = {"mooncake", "azure",   "burstgpt",
                                           "sessions", "kvfleet", "auto"};
        for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
            snprintf(name, sizeof name, "trace stats %s --format %s", kinds[i].what, fmts[f]);
            add(2, p, kinds[i].frag, name, "%s trace stats %s --format %s", kvt_bin(), p, fmts[f]);
        }
        snprintf(name, sizeof name, "trace convert %s", kinds[i].what);
        add(2, p, kinds[i].frag, name, "%s trace convert %s --format sessions -o %s/conv%d.jsonl",
            kvt_bin(), p, T, ncases);
    }
    // a scenario over the size cap
    char big[160];
    snprintf(big, sizeof big, "%s/big.yaml", T);
    FILE *f = fopen(big, "w");
    ck_assert(f);
    ck_assert(ftruncate(fileno(f), 65L << 20) == 0);
    fclose(f);
    add(2, "big.yaml", "limit", "scenario over 64 MiB", RUN, RUNARGS(big));
    // one 65 MiB line of a trace
    char line[160];
    snprintf(line, sizeof line, "%s/longline.jsonl", T);
    f = fopen(line, "w");
    ck_assert(f);
    fputc('{', f);
    ck_assert(ftruncate(fileno(f), 65L << 20) == 0);
    fclose(f);
    add(2, "longline.jsonl:1", "line longer", "trace line over 64 MiB",
        "%s trace stats %s --format mooncake", kvt_bin(), line);
}

// ---- traces -----------------------------------------------------------------------------------
static const char *MOON_OK = "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 5, "
                             "\"hash_ids\": [1]}\n";

static void trace_case(const char *name, const char *fmt, const char *ext, const char *text,
                       long len, const char *f2) {
    const char *fn = fresh(ext);
    const char *p = put(fn, text, len);
    char want[200];
    snprintf(want, sizeof want, "%s:", fn);
    char nm[112];
    snprintf(nm, sizeof nm, "%s trace: %s (stats)", fmt, name);
    add(2, want, f2, nm, "%s trace stats %s --format %s", kvt_bin(), p, fmt);
    snprintf(nm, sizeof nm, "%s trace: %s (run)", fmt, name);
    add(2, want, f2, nm, RUN " --trace %s --set workload.format=%s", RUNARGS(S), p, fmt);
}

typedef struct row_case {
    const char *name, *row, *frag;
} row_case;

// One trace case per row: the text before (header, a good line) then the bad row.
static void row_cases(const char *fmt, const char *ext, const char *before, const row_case *r,
                      size_t n) {
    char t[4096];
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(t, sizeof t, "%s%s\n", before, r[i].row);
        ck_assert(len > 0 && (size_t)len < sizeof t);
        trace_case(r[i].name, fmt, ext, t, -1, r[i].frag);
    }
}

static void trace_cases(void) {
    char t[4096];
    // Mooncake
    static const row_case moon[] = {
        {"negative input", "{\"timestamp\": 0, \"input_length\": -4, \"output_length\": 5}",
         "input_length"},
        {"string input", "{\"timestamp\": 0, \"input_length\": \"x\", \"output_length\": 5}",
         "input_length"},
        {"huge input", "{\"timestamp\": 0, \"input_length\": 4e9, \"output_length\": 5}",
         "input_length"},
        {"2^63 input",
         "{\"timestamp\": 0, \"input_length\": 9223372036854775808, \"output_length\": 5}",
         "input_length"},
        {"2^63 hash id",
         "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1, "
         "99999999999999999999]}",
         "hash_ids"},
        {"fractional input", "{\"timestamp\": 0, \"input_length\": 1.5, \"output_length\": 5}",
         "input_length"},
        {"missing timestamp", "{\"input_length\": 10, \"output_length\": 5}", "timestamp"},
        {"negative timestamp", "{\"timestamp\": -5, \"input_length\": 10, \"output_length\": 5}",
         "timestamp"},
        {"huge timestamp", "{\"timestamp\": 1e300, \"input_length\": 10, \"output_length\": 5}",
         "timestamp"},
        {"missing output", "{\"timestamp\": 0, \"input_length\": 10}", "output_length"},
        {"hash_ids not a list",
         "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": 7}",
         "hash_ids"},
        {"hash id a string",
         "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [\"a\"]}",
         "hash_ids"},
        {"duplicate key",
         "{\"timestamp\": 0, \"input_length\": 10, \"input_length\": 900, \"output_length\": 5}",
         "duplicate"},
        {"not an object", "[1, 2, 3]", "not an object"},
        {"truncated JSON", "{\"timestamp\": 0, \"input_length\": 10, \"outp", "bad JSON"},
        {"binary junk", "\x01\x02\xff\xfe{", "JSON"},
        {"nested bomb",
         "{\"timestamp\": "
         "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
         "]]]]]]]]]]], \"input_length\": 10, \"output_length\": 5}",
         "timestamp"},
    };
    row_cases("mooncake", "jsonl", MOON_OK, moon, sizeof moon / sizeof moon[0]);
    // time going backwards (mooncake, kvfleet)
    snprintf(t, sizeof t,
             "%s{\"timestamp\": 5000, \"input_length\": 10, \"output_length\": 5}\n"
             "{\"timestamp\": 10, \"input_length\": 10, \"output_length\": 5}\n",
             MOON_OK);
    trace_case("time backwards", "mooncake", "jsonl", t, -1, "'timestamp': time goes backwards");
    trace_case("kvfleet time backwards", "kvfleet", "jsonl",
               "{\"id\":0,\"arrival_ns\":5000,\"input_tokens\":10,\"output_tokens\":3}\n"
               "{\"id\":1,\"arrival_ns\":10,\"input_tokens\":10,\"output_tokens\":3}\n",
               -1, "'arrival_ns': time goes backwards");
    trace_case("kvfleet ids not increasing", "kvfleet", "jsonl",
               "{\"id\":5,\"arrival_ns\":0,\"input_tokens\":10,\"output_tokens\":3}\n"
               "{\"id\":2,\"arrival_ns\":10,\"input_tokens\":10,\"output_tokens\":3}\n",
               -1, "'id'");
    trace_case(
        "kvfleet 2^63 tokens", "kvfleet", "jsonl",
        "{\"id\":0,\"arrival_ns\":0,\"input_tokens\":9223372036854775808,\"output_tokens\":3}\n",
        -1, "input_tokens");
    trace_case("kvfleet negative arrival", "kvfleet", "jsonl",
               "{\"id\":0,\"arrival_ns\":-1,\"input_tokens\":10,\"output_tokens\":3}\n", -1,
               "arrival_ns");
    trace_case("kvfleet bad class", "kvfleet", "jsonl",
               "{\"id\":0,\"arrival_ns\":0,\"input_tokens\":10,\"output_tokens\":3,\"class\":"
               "\"wizard\"}\n",
               -1, "class");
    trace_case("empty", "mooncake", "jsonl", "", 0, "empty file");
    trace_case("blank lines only", "mooncake", "jsonl", "\n\n   \n", -1, "empty file");
    // Azure CSV
    const char *AZ = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
    trace_case("header only", "azure", "csv", AZ, -1, "no requests");
    static const row_case az[] = {
        {"negative tokens", "2023-11-16 18:15:46.6805900,-5,44", "ContextTokens"},
        {"word tokens", "2023-11-16 18:15:46.6805900,lots,44", "ContextTokens"},
        {"huge tokens", "2023-11-16 18:15:46.6805900,99999999999999999999,44", "ContextTokens"},
        {"bad timestamp", "yesterday,374,44", "TIMESTAMP"},
        {"month 13", "2023-13-16 18:15:46,374,44", "TIMESTAMP"},
        {"November 31 (was read as December 1)", "2023-11-31 18:15:46,374,44", "TIMESTAMP"},
        {"missing column", "2023-11-16 18:15:46.6805900,374", "GeneratedTokens"},
        {"unclosed quote", "\"2023-11-16 18:15:46.6805900,374,44", "TIMESTAMP"},
    };
    snprintf(t, sizeof t, "%s2023-11-16 18:15:45.6805900,374,44\n", AZ);
    row_cases("azure", "csv", t, az, sizeof az / sizeof az[0]);
    snprintf(t, sizeof t, "%s2023-11-16 18:15:47,374,44\n2023-11-16 18:15:45,374,44\n", AZ);
    trace_case("time backwards", "azure", "csv", t, -1, "'TIMESTAMP': time goes backwards");
    trace_case("missing header column", "azure", "csv", "TIMESTAMP,ContextTokens\n1,2\n", -1,
               "GeneratedTokens");
    trace_case("BOM and missing column", "azure", "csv",
               "\xef\xbb\xbfTIMESTAMP,ContextTokens\n1,2\n", -1, "GeneratedTokens");
    // BurstGPT
    const char *BG = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";
    static const row_case bg[] = {
        {"negative tokens", "5,ChatGPT,-472,18,490,Conversation log", "Request tokens"},
        {"word timestamp", "soon,ChatGPT,472,18,490,Conversation log", "Timestamp"},
        {"negative timestamp", "-5,ChatGPT,472,18,490,Conversation log", "Timestamp"},
        {"huge response", "5,ChatGPT,472,1e300,490,Conversation log", "Response tokens"},
    };
    snprintf(t, sizeof t, "%s1,ChatGPT,472,18,490,Conversation log\n", BG);
    row_cases("burstgpt", "csv", t, bg, sizeof bg / sizeof bg[0]);
    // Sessions
    static const row_case ss[] = {
        {"negative api_time",
         "{\"requests\": [{\"t\": 0, \"in\": 10, \"out\": 5, \"api_time\": -3}]}", "api_time"},
        {"negative think_time",
         "{\"requests\": [{\"t\": 0, \"in\": 10, \"out\": 5, \"think_time\": -3}]}", "think_time"},
        {"negative t", "{\"requests\": [{\"t\": -1, \"in\": 10, \"out\": 5}]}", "'t'"},
        {"huge t", "{\"requests\": [{\"t\": 1e300, \"in\": 10, \"out\": 5}]}", "'t'"},
        {"requests not a list", "{\"requests\": 5}", "requests"},
        {"entry not an object", "{\"requests\": [5]}", "requests"},
        {"missing in", "{\"requests\": [{\"t\": 0, \"out\": 5}]}", "'in'"},
        {"huge out", "{\"requests\": [{\"t\": 0, \"in\": 10, \"out\": 1e12}]}", "'out'"},
        {"subagent without requests", "{\"requests\": [{\"t\": 0, \"type\": \"subagent\"}]}",
         "subagent"},
    };
    row_cases("sessions", "jsonl", "", ss, sizeof ss / sizeof ss[0]);
    // closed-loop references that name no earlier request
    const char *K0 = "{\"id\":0,\"arrival_ns\":0,\"input_tokens\":10,\"output_tokens\":3}\n";
    static const row_case kprev[] = {
        {"prev_id names nothing",
         "{\"id\":5,\"arrival_ns\":9,\"input_tokens\":10,\"output_tokens\":3,\"prev_id\":3}",
         "'prev_id'"},
        {"prev_id names itself",
         "{\"id\":1,\"arrival_ns\":9,\"input_tokens\":10,\"output_tokens\":3,\"prev_id\":1}",
         "'prev_id'"},
        {"prev_id names a later request",
         "{\"id\":1,\"arrival_ns\":9,\"input_tokens\":10,\"output_tokens\":3,\"prev_id\":7}",
         "'prev_id'"},
    };
    row_cases("kvfleet", "jsonl", K0, kprev, sizeof kprev / sizeof kprev[0]);
    // a NUL byte inside a CSV field
    static const char aznul[] = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                "2023-11-16 18:15:46.6805900,37\0"
                                "4,44\n";
    trace_case("NUL in a field", "azure", "csv", aznul, (long)sizeof aznul - 1, "NUL byte");
    // scaled arrivals past the time limit: refused, not clamped to 9e9 s
    const char *far = put(fresh("jsonl"),
                          "{\"id\":0,\"arrival_ns\":0,\"input_tokens\":10,\"output_tokens\":3}\n"
                          "{\"id\":1,\"arrival_ns\":10000000000000000,\"input_tokens\":10,"
                          "\"output_tokens\":3}\n",
                          -1);
    add(2, "'arrival_ns'", "time_scale", "time_scale past the arrival limit (run)",
        RUN " --trace %s --set workload.format=kvfleet --set workload.time_scale=1e6", RUNARGS(S),
        far);
    add(2, "'arrival_ns'", "time_scale", "time_scale past the arrival limit (stats)",
        "%s trace stats %s --time-scale 1e6", kvt_bin(), far);
    add(2, "'input_tokens'", "length_scale", "length_scale past the token limit",
        "%s trace stats %s --length-scale 1000 --format kvfleet", kvt_bin(),
        put(fresh("jsonl"), "{\"arrival_ns\":0,\"input_tokens\":100000,\"output_tokens\":3}\n",
            -1));
    // the generator's derived quantities
    add(2, "rate_rps", "--rate", "trace gen days with a vanishing rate",
        "%s trace gen --profile chatbot --days 1 --rate 1e-30", kvt_bin());
    add(2, "days x 86400 x rate_rps", NULL, "trace gen days x rate over the cap",
        "%s trace gen --profile chatbot --days 3660 --rate 1000", kvt_bin());
    // an output that is the input
    const char *in = put(fresh("jsonl"), MOON_OK, -1);
    add(2, in, "same file", "trace convert onto its input", "%s trace convert %s -o %s --force",
        kvt_bin(), in, in);
}

// ---- model and hardware files -----------------------------------------------------------------
static void model_cases(void) {
    const char *MODEL = "name: m\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\n";
    const char *HW = "name: g\nbf16_flops: 1e15\nhbm_bytes: 80e9\nhbm_Bps: 3e12\n";
    const struct {
        bool hw;
        const char *name, *extra, *frag;
    } m[] = {
        {false, "zero layers", "layers: 0\n", "layers"},
        {false, "negative hidden", "hidden: -64\n", "hidden"},
        {false, "huge heads", "heads: 1e300\n", "heads"},
        {false, "word vocab", "vocab: many\n", "vocab"},
        {false, "unknown key", "colour: red\n", "unknown key"},
        {false, "nested value", "layers: {a: 1}\n", "layers"},
        {false, "bad attention", "attention: psychic\n", "attention"},
        {false, "alias loop", "x: &a [*a]\n", "alias loop"},
        {true, "tiny flops", "bf16_flops: 1e-300\n", "bf16_flops"},
        {true, "tiny bandwidth", "hbm_Bps: 1e-300\n", "hbm_Bps"},
        {true, "zero bandwidth", "hbm_Bps: 0\n", "hbm_Bps"},
        {true, "negative memory", "hbm_bytes: -1\n", "hbm_bytes"},
        {true, "huge flops", "bf16_flops: 1e300\n", "bf16_flops"},
        {true, "nan flops", "bf16_flops: .nan\n", "bf16_flops"},
        {true, "inf bandwidth", "hbm_Bps: .inf\n", "hbm_Bps"},
        {true, "unknown key", "warp_drive: 1\n", "unknown key"},
        {true, "missing flops", NULL, "bf16_flops"},
    };
    char text[512], name[112];
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        const char *base = m[i].hw ? HW : MODEL;
        if (m[i].extra) {
            // the override replaces the base line with the same key, if any
            char key[64];
            size_t kl = strcspn(m[i].extra, ":");
            snprintf(key, sizeof key, "%.*s:", (int)kl, m[i].extra);
            text[0] = 0;
            const char *ln = base;
            while (*ln) {
                size_t l = strcspn(ln, "\n") + 1;
                if (strncmp(ln, key, strlen(key))) strncat(text, ln, l);
                ln += l;
            }
            strcat(text, m[i].extra);
        } else {
            snprintf(text, sizeof text, "name: g\nhbm_bytes: 80e9\nhbm_Bps: 3e12\n");
        }
        const char *fn = fresh("yaml");
        const char *p = put(fn, text, -1);
        snprintf(name, sizeof name, "%s file: %s", m[i].hw ? "hardware" : "model", m[i].name);
        add(2, fn, m[i].frag, name, RUN " --set %s=%s", RUNARGS(S), m[i].hw ? "hardware" : "model",
            p);
    }
}

// ---- the command line ---------------------------------------------------------------------------
static void cli_cases(void) {
    const char *B = kvt_bin();
    add(2, "usage", NULL, "no command", "%s", B);
    add(2, "unknown command", NULL, "unknown command", "%s frobnicate", B);
    add(2, "usage", NULL, "run without scenario", "%s run", B);
    add(2, "unknown option", NULL, "run unknown option", "%s run %s --frob", B, S);
    add(2, "No such file", NULL, "run missing scenario", "%s run %s/nope.yaml", B, T);
    add(2, "--trace-window", NULL, "window reversed",
        RUN " --trace-out %s/tl.json --trace-window 10:5", RUNARGS(S), T);
    add(2, "--trace-window", NULL, "window nan",
        RUN " --trace-out %s/tl.json --trace-window nan:nan", RUNARGS(S), T);
    add(2, "--trace-window", NULL, "window inf", RUN " --trace-out %s/tl.json --trace-window 0:inf",
        RUNARGS(S), T);
    add(2, "--trace-window", NULL, "window junk", RUN " --trace-out %s/tl.json --trace-window 1:2x",
        RUNARGS(S), T);
    add(2, "--trace-window", "--trace-out", "window without trace-out", RUN " --trace-window 1:2",
        RUNARGS(S));
    add(2, "--engine", NULL, "bad engine", RUN " --engine tpu", RUNARGS(S));
    add(2, "--set", "KEY=VALUE", "set without =", RUN " --set seed", RUNARGS(S));
    add(2, "--set", "empty key", "set empty key", RUN " --set =5", RUNARGS(S));
    add(2, "more than one YAML document", NULL, "set two documents", RUN " --set 'name=a\n---\nb'",
        RUNARGS(S));
    add(2, "--set name", "malformed", "set unclosed flow", RUN " --set 'name=[1'", RUNARGS(S));
    add(2, "alias", NULL, "set alias loop", RUN " --set 'economics.gpu_hour_usd=&r [1, *r]'",
        RUNARGS(S));
    add(2, "nested deeper", NULL, "set deep nesting",
        RUN
        " --set 'economics.x=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
        "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]'",
        RUNARGS(S));
    add(2, "--set seed", NULL, "seed word", RUN " --seed twelve", RUNARGS(S));
    add(2, "--set seed", NULL, "seed negative", RUN " --seed -4", RUNARGS(S));
    add(2, "unknown key", NULL, "set unknown key", RUN " --set warp.drive=1", RUNARGS(S));
    add(2, "session_users", "must be in", "session users 4e9",
        RUN " --set workload.session_users=4000000000", RUNARGS(S));
    add(2, "rate_rps", "must be in", "generate rate 1e300",
        RUN " --set workload.generate.rate_rps=1e300", RUNARGS(S));
    add(2, "duration_s", "must be in", "generate duration 1e300",
        RUN " --set workload.generate.duration_s=1e300", RUNARGS(S));
    add(2, "rate_rps", "at most", "trace gen rate 1e300",
        "%s trace gen --profile chatbot --rate 1e300 --duration 10 -o %s/g%d.jsonl", B, T, ncases);
    add(2, "duration", NULL, "trace gen duration 1e300",
        "%s trace gen --profile chatbot --duration 1e300 -o %s/g%d.jsonl", B, T, ncases);
    add(2, "length_scale", NULL, "trace stats length scale 1e300",
        "%s trace stats %s/tiny.jsonl --length-scale 1e300", B, T);
    add(2, "--time-scale", NULL, "trace stats time scale 0",
        "%s trace stats %s/tiny.jsonl --time-scale 0", B, T);
    add(2, "rate", NULL, "trace stats rate -1", "%s trace stats %s/tiny.jsonl --rate -1", B, T);
    add(2, "format", NULL, "trace stats bad format", "%s trace stats %s/tiny.jsonl --format xml", B,
        T);
    add(2, "not found", NULL, "report of a missing directory", "%s report %s/none", B, T);
    add(2, "--vary", NULL, "sweep without vary", "%s sweep %s -o %s/sw%d", B, S, T, ncases);
    add(2, "seed", NULL, "sweep bad vary value", "%s sweep %s --vary seed=1,x -o %s/sw%d -j 1", B,
        S, T, ncases);
    add(2, "output.steady_to_s", "above output.steady_from_s", "steady window ending at its start",
        RUN " --set output.steady_from_s=50 --set output.steady_to_s=50", RUNARGS(S));
    add(2, "output.steady_from_s", "needs output.steady_to_s", "steady window without an end",
        RUN " --set output.steady_from_s=50", RUNARGS(S));
    add(2, "also given with --set", "seed=3", "sweep --vary and --set of one key",
        "%s sweep %s --set seed=3 --vary seed=1,2 -o %s/sw%d -j 1", B, S, T, ncases);
    add(2, "bad time window: start 10 s, end 5 s", NULL, "trace stats end before start",
        "%s trace stats %s/tiny.jsonl --start 10 --end 5", B, T);
    // an existing result is kept unless --force (the directory holds a file)
    char keep[160];
    snprintf(keep, sizeof keep, "%s/kept", T);
    mkdir(keep, 0755);
    put("kept/summary.json", "{}", -1);
    add(2, "earlier result", "--force", "existing result kept", "%s run %s -q --no-report -o %s", B,
        S, keep);
    // a result directory held by another process: flock holds the lock until the run has
    // ended (L.done), and the run starts only once the lock is held (L.held); each wait is
    // bounded (20 s), a lock never taken exits 99 saying so
    char locked[160];
    snprintf(locked, sizeof locked, "%s/locked", T);
    add(2, "another kvfleet process", NULL, "locked result directory",
        "L=%s.lock; flock $L sh -c 'touch '$L'.held; i=0; while [ ! -e '$L'.done ] && "
        "[ $i -lt 200 ]; do i=$((i+1)); sleep 0.1; done' & f=$!; i=0; while [ ! -e $L.held ]; "
        "do i=$((i+1)); if [ $i -ge 200 ]; then echo 'flock never took the lock' >&2; exit 99; "
        "fi; sleep 0.1; done; %s run %s -q --no-report -o %s; rc=$?; touch $L.done; wait $f; "
        "exit $rc",
        locked, B, S, locked);
}

// ---- extreme but valid: must finish in bounded time with exit 0
// ----------------------------------
static void extreme_cases(void) {
    char t[8192];
    size_t u = 0;
    for (int i = 0; i < 30; i++)
        u += (size_t)snprintf(t + u, sizeof t - u,
                              "{\"timestamp\": %d, \"input_length\": 100, \"output_length\": 5, "
                              "\"hash_ids\": [%d]}\n",
                              i * 100, i);
    snprintf(
        t + u, sizeof t - u,
        "{\"timestamp\": 9e12, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1]}\n");
    const char *p = put("outlier.jsonl", t, -1);
    add(0, "31 arrived", NULL, "outlier timestamp 9e12 ms after 30 lines", RUN " --trace %s",
        RUNARGS(S), p);
    snprintf(
        t, sizeof t,
        "{\"id\":0,\"arrival_ns\":0,\"input_tokens\":10,\"output_tokens\":3}\n"
        "{\"id\":1,\"arrival_ns\":4000000000000000000,\"input_tokens\":10,\"output_tokens\":3}\n");
    p = put("far.jsonl", t, -1);
    add(0, "2 arrived", NULL, "arrival_ns 4e18", RUN " --trace %s --set workload.format=kvfleet",
        RUNARGS(S), p);
    snprintf(t, sizeof t,
             "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n"
             "2173-11-16 18:15:46.68,374,44\n");
    p = put("az2173.csv", t, -1);
    add(0, "2 arrived", NULL, "Azure row dated 2173", RUN " --trace %s --set workload.format=azure",
        RUNARGS(S), p);
    // 200 k block ids with the largest prompt allowed
    size_t cap = 200000 * 8 + 256, n = 0;
    char *big = malloc(cap);
    ck_assert(big);
    n += (size_t)sprintf(
        big,
        "{\"timestamp\": 0, \"input_length\": 10000000, \"output_length\": 2, \"hash_ids\": [");
    for (int i = 0; i < 200000; i++)
        n += (size_t)snprintf(big + n, cap - n, "%s%d", i ? "," : "", i);
    n += (size_t)sprintf(big + n, "]}\n");
    p = put("wide.jsonl", big, (long)n);
    add(0, "1 arrived", NULL, "200 k hash_ids, 10 M tokens", RUN " --trace %s", RUNARGS(S), p);
    n = (size_t)sprintf(big, "{\"timestamp\": 0, \"input_length\": 4000000000, \"output_length\": "
                             "2, \"hash_ids\": [1]}\n");
    p = put("wide4e9.jsonl", big, (long)n);
    add(2, "input_length", "too large", "input_length 4e9", RUN " --trace %s", RUNARGS(S), p);
    free(big);
    put("slowgpu.yaml", "name: slow\nbf16_flops: 1e9\nhbm_bytes: 80e9\nhbm_Bps: 1e6\n", -1);
    snprintf(t, sizeof t, "%s/slowgpu.yaml", T);
    add(2, "one batch step", "efficiency",
        "steps over an hour (slowest hardware, 0.001 efficiency)",
        RUN " --set hardware=%s --set efficiency.compute=0.001 --set efficiency.memory=0.001",
        RUNARGS(S), t);
    add(0, "arrived", NULL, "sample interval at its 1 ms floor",
        RUN " --set output.sample_interval_s=0.001", RUNARGS(S));
    put("bom.csv",
        "\xef\xbb\xbfTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n", -1);
    snprintf(t, sizeof t, "%s/bom.csv", T);
    add(0, "1 arrived", NULL, "Azure CSV with a byte-order mark",
        RUN " --trace %s --set workload.format=azure", RUNARGS(S), t);
}

// ---- outputs and inputs: nothing written through a link, over an input, or into a FIFO ---------
// Each command also checks that what it must leave alone is byte-identical (exit 99 if not).
static void safety_cases(void) {
    const char *B = kvt_bin();
    char d[96];
    snprintf(d, sizeof d, "%s/safe", T);
    add(2, "sl.lock", "symbolic link", "lock is a symbolic link",
        "mkdir -p %s; echo precious > %s/victim; ln -sf %s/victim %s/sl.lock; "
        "%s run %s -q --no-report -o %s/sl; rc=$?; [ \"$(cat %s/victim)\" = precious ] || exit 99; "
        "[ -L %s/sl.lock ] || exit 99; exit $rc",
        d, d, d, d, B, S, d, d, d);
    add(2, "fl.lock", "not a file of kvfleet's", "lock is a FIFO",
        "mkdir -p %s; mkfifo %s/fl.lock; %s run %s -q --no-report -o %s/fl", d, d, B, S, d);
    add(2, "dl.lock", "a directory", "lock is a directory",
        "mkdir -p %s/dl.lock; %s run %s -q --no-report -o %s/dl", d, B, S, d);
    add(2, "--trace-out", "the run's scenario", "--trace-out is the scenario",
        "cp %s %s/to.yaml && s=$(sha256sum < %s/to.yaml); %s run %s/to.yaml -q --no-report "
        "-o %s/to --trace-out %s/to.yaml; rc=$?; [ \"$(sha256sum < %s/to.yaml)\" = \"$s\" ] || "
        "exit 99; exit $rc",
        S, T, T, B, T, d, T, T);
    add(2, "--trace-out", "the run's trace", "--trace-out is the trace",
        "s=$(sha256sum < %s/tiny.jsonl); %s run %s -q --no-report -o %s/tt --trace-out "
        "%s/tiny.jsonl; rc=$?; [ \"$(sha256sum < %s/tiny.jsonl)\" = \"$s\" ] || exit 99; "
        "exit $rc",
        T, B, S, d, T, T);
    add(2, "--trace-out", "a FIFO", "--trace-out is a FIFO",
        "mkdir -p %s; mkfifo %s/tof; %s run %s -q --no-report -o %s/tf --trace-out %s/tof", d, d, B,
        S, d, d);
    add(2, "--trace-out", "a directory", "--trace-out is a directory",
        "%s run %s -q --no-report -o %s/td --trace-out %s", B, S, d, T);
    add(2, "more than one run", "by its number", "compare --baseline naming two runs",
        "%s run %s -q --no-report -o %s/b1/run && %s run %s -q --no-report -o %s/b2/run && "
        "%s compare %s/b1/run %s/b2/run --baseline run",
        B, S, d, B, S, d, B, d, d);
    add(2, "not a JSON object (a run's summary is one)", NULL, "compare over a summary.json array",
        "mkdir -p %s/cj && echo '[]' > %s/cj/summary.json && %s compare %s/cj", d, d, B, d);
    add(2, "summary", "a FIFO", "compare a FIFO named summary.json",
        "mkdir -p %s/cf; mkfifo %s/cf/summary.json; %s compare %s/cf", d, d, B, d);
    add(2, "input", "a FIFO", "report on a FIFO named summary.json",
        "mkdir -p %s/rf; mkfifo %s/rf/summary.json; %s report %s/rf", d, d, B, d);
    // a damaged results.db is bad input (exit 2), named, never a report of what was readable:
    // the run table's root page zeroed (it was exit 0, the section cut short), a file of junk
    add(2, "results.db: run", "damaged", "report over a zeroed page of results.db",
        "%s run %s -q --no-report -o %s/rz && dd if=/dev/zero of=%s/rz/results.db bs=4096 "
        "count=1 seek=1 conv=notrunc 2>/dev/null && %s report %s/rz",
        B, S, d, d, B, d);
    add(2, "not a database", "damaged", "report over a results.db of junk",
        "%s run %s -q --no-report -o %s/rj && head -c 5000 /dev/zero | tr '\\0' x > "
        "%s/rj/results.db && %s report %s/rj",
        B, S, d, d, B, d);
    add(2, "summary.json: not a JSON object", NULL, "report over a summary.json array",
        "%s run %s -q --no-report -o %s/ra && echo '[1,2]' > %s/ra/summary.json && %s report %s/ra",
        B, S, d, d, B, d);
    add(2, "report_files", "symbolic link", "report with report_files a link elsewhere",
        "%s run %s -q --no-report -o %s/rl && mkdir -p %s/rlv && rm -rf %s/rl/report_files && "
        "ln -s %s/rlv %s/rl/report_files && %s report %s/rl; rc=$?; "
        "[ -z \"$(ls -A %s/rlv)\" ] || exit 99; exit $rc",
        B, S, d, d, d, d, d, B, d, d);
    add(0, "report.html", NULL, "report with report.html a link to a user's file",
        "%s run %s -q --no-report -o %s/rh && echo precious > %s/rhv && rm -f %s/rh/report.html && "
        "ln -s %s/rhv %s/rh/report.html && %s report %s/rh; rc=$?; "
        "[ \"$(cat %s/rhv)\" = precious ] && [ ! -L %s/rh/report.html ] || exit 99; exit $rc",
        B, S, d, d, d, d, d, B, d, d, d);
    add(2, "--html", "summary of run", "compare --html over a run's summary.json",
        "%s run %s -q --no-report -o %s/ca && %s run %s -q --no-report -o %s/cb && "
        "s=$(sha256sum < %s/ca/summary.json); %s compare %s/ca %s/cb --html %s/ca/summary.json; "
        "rc=$?; [ \"$(sha256sum < %s/ca/summary.json)\" = \"$s\" ] || exit 99; exit $rc",
        B, S, d, B, S, d, d, B, d, d, d, d);
    add(2, "lies inside the result directory", "scenario", "--force over the scenario's folder",
        "%s run %s -q --no-report -o %s/in && cp %s %s/in/s.yaml && %s run %s/in/s.yaml -q "
        "--no-report -o %s/in --force; rc=$?; [ -f %s/in/s.yaml ] && [ -f %s/in/summary.json ] "
        "|| exit 99; exit $rc",
        B, S, d, S, d, B, d, d, d, d);
    add(2, "lies inside the result directory", "trace", "--force over the trace's folder",
        "%s run %s -q --no-report -o %s/it && cp %s/tiny.jsonl %s/it/t.jsonl && %s run %s "
        "--trace %s/it/t.jsonl -q --no-report -o %s/it --force; rc=$?; [ -f %s/it/t.jsonl ] "
        "|| exit 99; exit $rc",
        B, S, d, T, d, B, S, d, d, d);
    add(2, "seed", "5 # x", "--seed with a YAML comment is the literal text", RUN " --seed '5 # x'",
        RUNARGS(S));
    add(2, "workload.trace", "changes the trace", "assess --set workload.trace",
        "%s assess %s/tiny.jsonl --set workload.trace=%s/tiny.jsonl -q -o %s/as1", B, T, T, d);
    add(2, "workload.generate", "changes the trace", "assess --set workload.generate",
        "%s assess %s/tiny.jsonl --set 'workload.generate={profile: chatbot}' -q -o %s/as2", B, T,
        d);
    add(2, "workload", "changes the trace", "assess --set workload={...}",
        "%s assess %s/tiny.jsonl --set 'workload={trace: x}' -q -o %s/as3", B, T, d);
    add(2, "earlier result", "--force", "assess into a held result",
        "mkdir -p %s/as4 && echo x > %s/as4/keep && %s assess %s/tiny.jsonl -q -o %s/as4; rc=$?; "
        "[ \"$(cat %s/as4/keep)\" = x ] || exit 99; exit $rc",
        d, d, B, T, d, d);
    add(2, "earlier result", "--force", "engine serve into a held result",
        "mkdir -p %s/es && echo x > %s/es/keep && %s engine serve --trace %s/tiny.jsonl -o %s/es; "
        "rc=$?; [ \"$(cat %s/es/keep)\" = x ] || exit 99; exit $rc",
        d, d, B, T, d, d);
    add(2, "earlier result", "--force", "validate into a held result",
        "mkdir -p %s/va && echo x > %s/va/keep && %s validate --trace %s/tiny.jsonl -o %s/va; "
        "rc=$?; [ \"$(cat %s/va/keep)\" = x ] || exit 99; exit $rc",
        d, d, B, T, d, d);
    add(2, "unknown class 'chatbt'", "chatbot, agent", "economics price for a typo'd class",
        RUN " --set economics.prices_per_mtok.chatbt.output=1", RUNARGS(S));
    add(2, "unknown pool", "vision, prefill, decode, colocated", "economics price of a typo'd pool",
        RUN " --set economics.pools.prefil.gpu_hour_usd=3", RUNARGS(S));
    add(2, "economics.pools.prefill.rent", "gpu_hour_usd, capex_per_gpu_usd",
        "economics pool key that does not exist", RUN " --set economics.pools.prefill.rent=3",
        RUNARGS(S));
    add(2, "economics.pools.colocated.gpu_hour_usd", "no colocated pool",
        "a colocated pool's price on a disaggregated cluster",
        RUN " --set economics.pools.colocated.gpu_hour_usd=3", RUNARGS(S));
    add(2, "economics.pools.prefill.gpu_hour_usd", "cost_model own",
        "a pool's rent with owned GPUs",
        RUN " --set economics.cost_model=own --set economics.pools.prefill.gpu_hour_usd=3",
        RUNARGS(S));
    add(2, "economics.pools.decode.gpu_hour_usd", "a number in [0, 1e+09]", "a negative pool price",
        RUN " --set economics.pools.decode.gpu_hour_usd=-1", RUNARGS(S));
    FILE *f = fopen(S, "rb");
    char body[2048] = "";
    size_t n = f ? fread(body, 1, sizeof body - 200, f) : 0;
    if (f) fclose(f);
    body[n] = '\0';
    strcat(body, "economics:\n  prices_per_mtok:\n    agnet: {input: 1}\n");
    const char *p = put("econ_typo.yaml", body, -1);
    add(2, "econ_typo.yaml:", "unknown class 'agnet'", "economics class typo in a file (file:line)",
        RUN, RUNARGS(p));
    add(2, "cluster.vision.instances", "text only", "vision pool beside a text-only model",
        RUN " --set cluster.vision.instances=1", RUNARGS(S));
    add(2, "cluster.vision.gpus_per_instance", "text only", "vision key beside a text-only model",
        RUN " --set cluster.vision.gpus_per_instance=2", RUNARGS(S));
    add(2, "workload.generate.arrival", "does not apply", "arrival process in days mode",
        RUN " --set 'workload.generate={profile: chatbot, rate_rps: 1, days: 1}' "
            "--set workload.generate.arrival=gamma",
        RUNARGS(S));
    add(2, "workload.generate.cv", "does not apply", "arrival cv in days mode",
        RUN " --set 'workload.generate={profile: chatbot, rate_rps: 1, days: 1}' "
            "--set workload.generate.cv=3",
        RUNARGS(S));
    // and the other way: keys of one generator mode, of one router, of drafts, of MoE models,
    // each refused where it cannot apply (every one left the summary unchanged before), beside
    // the same key where it does apply
#define GEN " --set 'workload.generate={profile: chatbot, rate_rps: 2, duration_s: 20}'"
    static const struct {
        const char *set, *key, *frag;
    } noop[] = {
        {GEN " --set workload.generate.cv=3", "workload.generate.cv", "gamma arrivals only"},
        {GEN " --set workload.generate.diurnal_amplitude=0.2",
         "workload.generate.diurnal_amplitude", "diurnal arrivals"},
        {GEN " --set workload.generate.think_s=100", "workload.generate.think_s", "closed"},
        {GEN " --set workload.generate.warmup_days=2", "workload.generate.warmup_days",
         "days mode only"},
        {GEN " --set workload.generate.peak_hour=3", "workload.generate.peak_hour",
         "days mode only"},
        {GEN " --set workload.generate.return.agent.sigma=2",
         "workload.generate.return.agent.sigma", "days mode only"},
        {" --set router.reject_over_slo=true", "router.reject_over_slo", "ttft_estimate only"},
        {" --set speculative.acceptance=0.9", "speculative.acceptance", "draft_tokens > 0"},
        {" --set moe.ep_skew=2", "moe.ep_skew", "MoE models only"},
        {" --set moe.ep_skew_sd=0.5", "moe.ep_skew_sd", "MoE models only"},
        {" --set moe.redundant_experts=0.1", "moe.redundant_experts", "MoE models only"},
    };
    for (size_t i = 0; i < sizeof noop / sizeof noop[0]; i++)
        add(2, noop[i].key, noop[i].frag, noop[i].key, RUN "%s", RUNARGS(S), noop[i].set);
    add(2, "session_rate", "sessions trace only", "session_rate on a Mooncake trace",
        RUN " --set workload.session_rate=2", RUNARGS(S));
    add(2, "session_users", "sessions trace only", "session_users on a Mooncake trace",
        RUN " --set workload.session_users=3", RUNARGS(S));
    add(2, "kv_cache.persist_decode", "closed-loop sessions", "persist_decode on a Mooncake trace",
        RUN " --set kv_cache.persist_decode=false --set kv_cache.ssd.capacity_tb=1", RUNARGS(S));
    add(2, "workload.session_rate", "generated workload", "session_rate on a generated workload",
        RUN GEN " --set workload.session_rate=2", RUNARGS(S));
    add(0, "arrived", NULL, "persist_decode off for generated sessions with a store",
        RUN GEN " --set kv_cache.persist_decode=false --set kv_cache.ssd.capacity_tb=1",
        RUNARGS(S));
    add(0, "arrived", NULL, "gamma arrivals with their cv",
        RUN GEN " --set workload.generate.arrival=gamma --set workload.generate.cv=3", RUNARGS(S));
    add(0, "arrived", NULL, "diurnal arrivals with their amplitude",
        RUN GEN " --set workload.generate.arrival=diurnal "
                "--set workload.generate.diurnal_amplitude=0.2",
        RUNARGS(S));
    add(0, "arrived", NULL, "a closed loop's think time",
        RUN GEN " --set workload.generate.closed_loop=true --set workload.generate.think_s=3",
        RUNARGS(S));
    add(0, "arrived", NULL, "reject_over_slo under ttft_estimate",
        RUN " --set router.prefill=ttft_estimate --set router.reject_over_slo=true", RUNARGS(S));
    add(0, "arrived", NULL, "acceptance of draft tokens",
        RUN " --set speculative.draft_tokens=2 --set speculative.acceptance=0.9", RUNARGS(S));
#undef GEN
}

// ---- running ----------------------------------------------------------------------------------
enum { GOOD, VAGUE, SILENT, CRASH, HANG, NCLASS };
static const char *const class_names[NCLASS] = {"good error", "vague", "silent accept", "crash",
                                                "hang"};

static int classify(const kcase *c, int rc, double wall_s, const char *out) {
    if (wall_s >= CASE_TIMEOUT_S - 0.5 || rc == 124) return HANG;
    if (strstr(out, "Sanitizer") || strstr(out, "runtime error:") ||
        strstr(out, "internal error") || rc >= 128)
        return CRASH;
    bool frags =
        (!c->frag[0][0] || strstr(out, c->frag[0])) && (!c->frag[1][0] || strstr(out, c->frag[1]));
    if (c->want != 0 && rc == 0) return SILENT;
    if (rc == c->want && frags) return GOOD;
    return VAGUE;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

START_TEST(test_campaign) {
    snprintf(T, sizeof T, "/tmp/kvf_campaign_XXXXXX");
    ck_assert(mkdtemp(T));
    kvt_tmp_register(T);
    put("tiny.jsonl",
        "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 5, \"hash_ids\": [1]}\n"
        "{\"timestamp\": 100, \"input_length\": 200, \"output_length\": 5, \"hash_ids\": [1, 2]}\n"
        "{\"timestamp\": 200, \"input_length\": 300, \"output_length\": 5, \"hash_ids\": [1, 2, "
        "3]}\n",
        -1);
    char base[1024];
    snprintf(base, sizeof base,
             "name: camp\nmodel: llama-3.1-8b\nhardware: h100\n"
             "workload: {trace: %s/tiny.jsonl, format: mooncake}\n"
             "cluster:\n  prefill: {instances: 1, gpus_per_instance: 1}\n"
             "  decode: {instances: 1, gpus_per_instance: 1}\n",
             T);
    snprintf(S, sizeof S, "%s", put("base.yaml", base, -1));

    key_cases();
    scenario_cases();
    file_kind_cases();
    trace_cases();
    model_cases();
    cli_cases();
    extreme_cases();
    safety_cases();

    int count[NCLASS] = {0};
    double t_all = now_s();
    char *outbuf = malloc(1 << 20);
    ck_assert(outbuf);
    // JOBS cases at a time, each under timeout(1) in its own process
    enum { JOBS = 2 };
    struct {
        pid_t pid;
        int idx;
        double t0;
    } slot[JOBS] = {{0}};
    int next = 0, running = 0;
    char ts[16];
    snprintf(ts, sizeof ts, "%d", CASE_TIMEOUT_S);
    while (next < ncases || running) {
        while (running < JOBS && next < ncases) {
            int s_ = 0;
            while (slot[s_].pid)
                s_++;
            char outp[128];
            snprintf(outp, sizeof outp, "%s/case%d.out", T, s_);
            fflush(NULL);
            pid_t pid = fork();
            ck_assert(pid >= 0);
            if (pid == 0) {
                FILE *o = freopen(outp, "wb", stdout);
                if (!o || dup2(1, 2) < 0) _exit(99);
                // the command may hold quotes: it reaches sh as one argument
                execlp("timeout", "timeout", "-k", "5", ts, "sh", "-c", cases[next].cmd,
                       (char *)NULL);
                _exit(98);
            }
            slot[s_].pid = pid;
            slot[s_].idx = next++;
            slot[s_].t0 = now_s();
            running++;
        }
        int st;
        pid_t done = waitpid(-1, &st, 0);
        if (done < 0) break;
        int s_ = 0;
        while (s_ < JOBS && slot[s_].pid != done)
            s_++;
        if (s_ == JOBS) continue;
        double wall = now_s() - slot[s_].t0;
        int i = slot[s_].idx;
        slot[s_].pid = 0;
        running--;
        kcase *c = &cases[i];
        int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        char outp[128];
        snprintf(outp, sizeof outp, "%s/case%d.out", T, s_);
        FILE *f = fopen(outp, "rb");
        size_t n = f ? fread(outbuf, 1, (1 << 20) - 1, f) : 0;
        if (f) fclose(f);
        outbuf[n] = 0;
        int k = classify(c, rc, wall, outbuf);
        count[k]++;
        if (k != GOOD) {
            const char *nl = strchr(outbuf, '\n');
            fprintf(stderr, "campaign: %-13s #%d %s: exit %d (want %d), %.1f s: %.*s\n",
                    class_names[k], i, c->name, rc, c->want, wall,
                    (int)(nl ? nl - outbuf : (long)strlen(outbuf)), outbuf);
            fprintf(stderr, "          wanted '%s' '%s'; command: %s\n", c->frag[0], c->frag[1],
                    c->cmd);
        }
    }
    free(outbuf);
    printf("campaign: %d inputs in %.1f s\n", ncases, now_s() - t_all);
    for (int k = 0; k < NCLASS; k++)
        printf("  %-14s %4d\n", class_names[k], count[k]);
    fflush(stdout);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", T);
    (void)!system(rm);
    ck_assert_int_ge(ncases, 400);
    ck_assert_int_eq(count[CRASH], 0);
    ck_assert_int_eq(count[HANG], 0);
    ck_assert_int_eq(count[SILENT], 0);
    ck_assert_int_eq(count[VAGUE], 0);
    free(cases);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("campaign");
    TCase *tc = tcase_create("campaign");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, test_campaign);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
