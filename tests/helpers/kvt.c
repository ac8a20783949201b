// tests/helpers/kvt.c -- see kvt.h.
#include "kvt.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"

const char *kvt_src(void) {
    const char *d = getenv("KVF_SOURCE_DIR");
    return d ? d : ".";
}

const char *kvt_shared_trace(const char *name) {
    static char ring[8][1024];
    static int k;
    const char *d = getenv("KVF_SHARED");
    char *b = ring[k++ & 7];
    snprintf(b, sizeof ring[0], "%s/traces/%s", d ? d : "../shared", name);
    // without the shared folder, the copies bundled in traces/data serve (same bytes)
    if (access(b, R_OK) != 0) {
        char alt[1024];
        snprintf(alt, sizeof alt, "%s/traces/data/%s", kvt_src(), name);
        if (access(alt, R_OK) == 0) snprintf(b, sizeof ring[0], "%s", alt);
    }
    return b;
}

bool kvt_decode_listed, kvt_decode_single, kvt_run_whole, kvt_router_check, kvt_keep_blocks;

json_t *kvt_run(const char *scenario, const char *trace, const char *const *sets, int n,
                const char *out_dir) {
    static sim_config cfg;
    kvf_err err = {0};
    char path[1024], a[1200];
    snprintf(path, sizeof path, "%s/scenarios/%s", kvt_src(), scenario);
    sim_config_default(&cfg);
    ck_assert_msg(sim_config_load(&cfg, path, &err) == KVF_OK, "%s", err.msg);
    if (trace) {
        snprintf(a, sizeof a, "workload.trace=%s", trace);
        ck_assert_msg(sim_config_set(&cfg, a, &err) == KVF_OK, "%s", err.msg);
    }
    for (int i = 0; i < n; i++)
        ck_assert_msg(sim_config_set(&cfg, sets[i], &err) == KVF_OK, "%s: %s", sets[i], err.msg);
    ck_assert_msg(sim_config_validate(&cfg, &err) == KVF_OK, "%s", err.msg);
    sim_run_opts o = {.out_dir = out_dir,
                      .quiet = true,
                      .write_db = out_dir != NULL,
                      .decode_listed = kvt_decode_listed,
                      .decode_single = kvt_decode_single,
                      .run_whole = kvt_run_whole,
                      .router_check = kvt_router_check,
                      .keep_blocks = kvt_keep_blocks};
    void *s = NULL;
    kvf_status st = sim_run(&cfg, &o, &s, &err);
    ck_assert_msg(st == KVF_OK, "run failed: %s", err.msg);
    return s;
}

double kvt_num(json_t *s, const char *path) {
    char k[256];
    snprintf(k, sizeof k, "%s", path);
    json_t *o = s;
    for (char *save = NULL, *t = strtok_r(k, ".", &save); t && o; t = strtok_r(NULL, ".", &save))
        o = json_object_get(o, t);
    ck_assert_msg(json_is_number(o), "summary lacks the number %s", path);
    return json_number_value(o);
}

int kvt_main(Suite *s) {
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}

const char *kvt_bin(void) {
    const char *b = getenv("KVF_BIN");
    return b ? b : "build/kvfleet";
}

char kvt_tmp[64];
char kvt_out[1 << 20], kvt_err[65536];

// Temporary directories this process made, removed when it exits normally: under libcheck's
// fork mode a test's own process after a test that passed (a failed test's process leaves by
// _exit, so its files stay to be looked at), else the suite's. Each names the process that
// made it, so a test's process, which inherits the list and the exit handler, leaves what the
// suite's process made for the tests after it.
enum { KVT_TMP_MAX = 256 };
static struct {
    pid_t pid;
    char path[128];
} tmp_made[KVT_TMP_MAX];
static int n_tmp_made;
static bool tmp_handler;

static void tmp_cleanup(void) {
    pid_t me = getpid();
    for (int i = 0; i < n_tmp_made; i++) {
        if (tmp_made[i].pid != me) continue;
        char cmd[160];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_made[i].path);
        (void)!system(cmd);
        tmp_made[i].pid = 0;
    }
}

void kvt_tmp_register(const char *path) {
    if (getenv("KVF_TEST_KEEP")) return;     // kept to be looked at (the suites print where)
    if (!tmp_handler) atexit(tmp_cleanup);   // inherited by the tests' processes
    tmp_handler = true;
    if (n_tmp_made == KVT_TMP_MAX || strlen(path) >= sizeof tmp_made[0].path ||
        strncmp(path, "/tmp/", 5) || strchr(path, '\''))
        return;
    tmp_made[n_tmp_made].pid = getpid();
    snprintf(tmp_made[n_tmp_made++].path, sizeof tmp_made[0].path, "%s", path);
}

void kvt_tmp_make(const char *prefix) {
    snprintf(kvt_tmp, sizeof kvt_tmp, "/tmp/%s_XXXXXX", prefix);
    ck_assert(mkdtemp(kvt_tmp));
    kvt_tmp_register(kvt_tmp);
}

void kvt_tmp_remove(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", kvt_tmp);
    (void)!system(cmd);
}

int kvt_sh(const char *fmt, ...) {
    char line[4096], cmd[8192], errp[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    // a test without its own directory gets a file of its own process: a shared name would
    // catch another test's stderr when the suites run side by side (ctest -j)
    bool own = !kvt_tmp[0];
    if (own)
        snprintf(errp, sizeof errp, "/tmp/kvt_stderr_%ld.txt", (long)getpid());
    else
        snprintf(errp, sizeof errp, "%s/stderr.txt", kvt_tmp);
    snprintf(cmd, sizeof cmd, "cd %s && %s 2>%s", kvt_src(), line, errp);
    FILE *p = popen(cmd, "r");
    ck_assert(p);
    size_t n = fread(kvt_out, 1, sizeof kvt_out - 1, p);
    kvt_out[n] = 0;
    int st = pclose(p);
    FILE *f = fopen(errp, "r");
    n = f ? fread(kvt_err, 1, sizeof kvt_err - 1, f) : 0;
    kvt_err[n] = 0;
    if (f) fclose(f);
    if (own) unlink(errp);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

void kvt_write(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_msg(f, "%s: cannot write", path);
    fputs(text, f);
    ck_assert_msg(fclose(f) == 0, "%s: cannot write", path);
}

char *kvt_slurp(const char *path) {
    char *t = NULL;
    size_t n;
    kvf_err err = {0};
    ck_assert_msg(kvf_read_file(path, &t, &n, &err) == KVF_OK, "%s", err.msg);
    return t;
}

int kvt_count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

const char *kvt_browser(void) {
    static char found[64];
    static const char *const names[] = {"chromium", "chromium-browser", "google-chrome"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !found[0]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", names[i]);
        if (system(cmd) == 0) snprintf(found, sizeof found, "%s", names[i]);
    }
    return found[0] ? found : NULL;
}

int kvt_browser_run(const char *page, const char *args, const char *out, const char *logdir) {
    const char *b = kvt_browser();
    ck_assert_ptr_nonnull(b);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "u=$(mktemp -d) && timeout 180 %s --headless --no-sandbox --disable-gpu "
             "--disable-quic --no-first-run --disable-background-networking "
             "--disable-component-update --disable-sync --user-data-dir=\"$u\" %s "
             "'file://%s' > '%s' 2>'%s/browser.log'; rc=$?; rm -rf \"$u\"; exit $rc",
             b, args, page, out, logdir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void kvt_browser_screenshot(const char *page, const char *png, unsigned w, unsigned h,
                            long min_bytes, const char *logdir) {
    char args[1200], out[1100];
    snprintf(args, sizeof args, "--window-size=%u,%u --hide-scrollbars --screenshot='%s'", w, h,
             png);
    snprintf(out, sizeof out, "%s/screenshot.log", logdir);
    int rc = kvt_browser_run(page, args, out, logdir);
    if (rc == 124) {
        // the headless browser hung past its 180 s (seen on a machine loaded by other jobs):
        // once more; a page that hangs it hangs it again and fails
        fprintf(stderr, "screenshot timed out; retrying once (%s/browser.log)\n", logdir);
        rc = kvt_browser_run(page, args, out, logdir);
    }
    ck_assert_msg(rc == 0, "screenshot exited %d (see %s/browser.log)", rc, logdir);
    FILE *f = fopen(png, "rb");
    ck_assert_msg(f != NULL, "no screenshot at %s", png);
    unsigned char hd[24];
    ck_assert_int_eq(fread(hd, 1, 24, f), 24);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    ck_assert(!memcmp(hd, "\x89PNG", 4));
    unsigned pw = (unsigned)hd[16] << 24 | (unsigned)hd[17] << 16 | (unsigned)hd[18] << 8 | hd[19];
    unsigned ph = (unsigned)hd[20] << 24 | (unsigned)hd[21] << 16 | (unsigned)hd[22] << 8 | hd[23];
    ck_assert_msg(pw == w && ph == h, "screenshot %ux%u, want %ux%u", pw, ph, w, h);
    ck_assert_msg(size > min_bytes, "screenshot of %ld bytes: blank page?", size);
}

void kvt_dom_attr(const char *dom, const char *name, char *out, size_t n) {
    char pat[80];
    snprintf(pat, sizeof pat, "%s=\"", name);
    const char *p = strstr(dom, pat);
    out[0] = 0;
    if (!p) return;
    p += strlen(pat);
    const char *e = strchr(p, '"');
    if (e) snprintf(out, n, "%.*s", (int)(e - p), p);
}

double kvt_read_back(const char *key, const char *text) {
    char num[64];
    size_t k = 0;
    const char *p = text;
    if (*p == '$') p++;
    for (; *p && k + 1 < sizeof num && (strchr("0123456789.-", *p) || *p == ','); p++)
        if (*p != ',') num[k++] = *p;
    num[k] = 0;
    if (!k) return NAN;
    double x = strtod(num, NULL);
    while (*p == ' ')
        p++;
    if (*p == 'k' && p[1] == ' ')
        x *= 1e3, p += 2;
    else if (*p == 'M' && p[1] == ' ')
        x *= 1e6, p += 2;
    else if (*p == 'G' && p[1] == ' ')
        x *= 1e9, p += 2;
    double s = 1;   // seconds per shown unit
    bool dur = true;
    if (!strncmp(p, "ms", 2))
        s = 1e-3;
    else if (!strncmp(p, "us", 2))
        s = 1e-6;
    else if (!strncmp(p, "min", 3))
        s = 60;
    else if (!strncmp(p, "s", 1) && (p[1] == 0 || p[1] == ' '))
        s = 1;
    else if (!strncmp(p, "h", 1) && p[1] == 0)
        s = 3600;
    else if (!strncmp(p, "d", 1) && p[1] == 0)
        s = 86400;
    else
        dur = false;
    if (*p == '%') return x / 100;
    if (dur) return strstr(key, "_ms") ? x * s * 1e3 : x * s;
    return x;
}

const char *kvt_tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", kvt_tmp, name);
    return p;
}
