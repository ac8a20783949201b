// cli/cli_sweep.c -- `kvfleet sweep SCENARIO --vary K=V1,V2,... [--vary ...] [--set K=V]...
// [-j N] [-o DIR] [--json]`: runs the cross product of the varied keys, one full run per point,
// and gathers the points into DIR/sweep.db, DIR/sweep.csv and (with --json) stdout.
//
// Layout of DIR:
//   sweep.json                 the sweep's definition (scenario, --set, --vary); a rerun with
//                              another definition into the same DIR is refused
//   points/<idx>_<k>=<v>_.../  one run each: summary.json, results.db
//   points/<name>.error        the message of a point's run that failed (gone once it runs)
//   sweep.db, sweep.csv        one row per point: its keys and headline figures
//
// Invariants and tricks:
// - A point runs into points/<name>.partial/ and the directory is renamed to points/<name>/
//   only after sim_run wrote both files, so "points/<name>/summary.json exists" means the
//   point is complete. A rerun skips complete points (resume) and restarts the others; a
//   .partial left by an interrupted sweep is cleared first.
// - Points are numbered in row-major order of the --vary options (the last varies fastest).
// - Runs are deterministic, so a point's summary does not depend on which worker process or
//   MPI rank ran it, nor on -j; only the wall-clock figures under "sim" differ.
// - Workers are fork()ed children (-j N), each running one point at a time; the parent only
//   schedules and gathers. Under Open MPI (mpirun with more than one rank; the MPI module
//   libkvfleet-mpi.so is loaded then, see sim_mpi.h) point i runs on rank i mod size, in
//   process, and the ranks send each summary's JSON text to rank 0, which writes the outputs.
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"
#include "cli.h"
#include "cli_opts.h"
#include "sim_mpi.h"
#include "cli_points.h"
#include "cli_sweep.h"

// ---- the sweep's definition ---------------------------------------------------------------------
static volatile int g_interrupt;

static void on_signal(int sig) {
    (void)sig;
    g_interrupt = 1;
}

static int usage_sweep(FILE *f, int rc) {
    fprintf(f, "usage: kvfleet sweep SCENARIO --vary KEY=V1,V2,... [--vary ...] [--set K=V]...\n"
               "                     [-j N] [-o DIR] [--json]\n"
               "  runs every combination of the varied scenario keys (one full run each, in\n"
               "  DIR/points/) and gathers them into DIR/sweep.db and DIR/sweep.csv; a rerun\n"
               "  resumes (finished points are not run again); under mpirun the points are spread\n"
               "  over the ranks; DIR/sweep.html tabulates the points and charts cost against\n"
               "  SLO attainment\n");
    return rc;
}

// Parses "KEY=V1,V2,..." into k. Messages name the option.
static kvf_status parse_vary(sw_key *k, const char *arg, kvf_err *err) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        return kvf_fail(err, KVF_EINVAL, "--vary '%s': expected KEY=V1,V2,...", arg);
    size_t kl = (size_t)(eq - arg);
    if (kl >= sizeof k->key) return kvf_fail(err, KVF_EINVAL, "--vary '%s': key too long", arg);
    memcpy(k->key, arg, kl);
    k->key[kl] = '\0';
    const char *v = eq + 1;
    if (!*v) return kvf_fail(err, KVF_EINVAL, "--vary %s: empty list of values", k->key);
    k->n = 0;
    k->vals = NULL;
    size_t cap = 0;
    for (;;) {
        const char *c = strchr(v, ',');
        size_t n = c ? (size_t)(c - v) : strlen(v);
        if (n == 0)
            return kvf_fail(err, KVF_EINVAL, "--vary %s: empty value in '%s'", k->key, eq + 1);
        kvf_grow((void **)&k->vals, &cap, (size_t)k->n + 1, sizeof *k->vals);
        char *s = kvf_malloc(n + 1);
        memcpy(s, v, n);
        s[n] = '\0';
        k->vals[k->n++] = s;
        if (!c) break;
        v = c + 1;
    }
    return KVF_OK;
}

// Value index of key k at point idx (row-major, last key fastest).
int cli_sweep_point_val(const cli_sweep_state *s, int idx, int k) {
    for (int j = s->nkeys - 1; j > k; j--)
        idx /= s->keys[j].n;
    return idx % s->keys[k].n;
}

// Builds point idx's configuration: base + one assignment per varied key.
static kvf_status point_config(const cli_sweep_state *s, int idx, sim_config *c, kvf_err *err) {
    memcpy(c, s->base, sizeof *c);
    for (int k = 0; k < s->nkeys; k++) {
        char a[SIM_PATH_MAX + 128];
        snprintf(a, sizeof a, "%s=%s", s->keys[k].key,
                 s->keys[k].vals[cli_sweep_point_val(s, idx, k)]);
        kvf_status st = sim_config_set(c, a, err);
        if (st) return st;
    }
    return sim_config_validate(c, err);
}

// Directory name of point idx: "<idx>_<k1>=<v1>_<k2>=<v2>", characters that are unsafe in a
// file name replaced by '_'.
static char *point_name(const cli_sweep_state *s, int idx) {
    char buf[256];
    int width = 4;
    for (int n = s->npoints - 1; n >= 10000; n /= 10)
        width++;
    size_t len = (size_t)snprintf(buf, sizeof buf, "%0*d", width, idx);
    for (int k = 0; k < s->nkeys && len < sizeof buf - 1; k++) {
        len += (size_t)snprintf(buf + len, sizeof buf - len, "_%s=%s", s->keys[k].key,
                                s->keys[k].vals[cli_sweep_point_val(s, idx, k)]);
        if (len >= sizeof buf) len = sizeof buf - 1;
    }
    if (len > 200) len = 200;
    buf[len] = '\0';
    for (char *p = buf; *p; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-' || ch == '=' ||
                  ch == '+';
        if (!ok) *p = '_';
    }
    return kvf_strdup(buf);
}

static void point_path(const cli_sweep_state *s, int idx, const char *suffix, char *out, size_t n) {
    snprintf(out, n, "%s/points/%s%s", s->out, s->names[idx], suffix);
}

// Keeps the message of point idx's failed run in points/<name>.error (best effort: the reason
// is also printed on stderr).
static void point_error_write(const cli_sweep_state *s, int idx, const char *msg) {
    char p[SIM_PATH_MAX + 300];
    point_path(s, idx, ".error", p, sizeof p);
    FILE *f = fopen(p, "w");
    if (!f) return;
    fputs(msg, f);
    fclose(f);
}

// The message in points/<name>.error (owned), or NULL.
static char *point_error_read(const cli_sweep_state *s, int idx) {
    char p[SIM_PATH_MAX + 300];
    point_path(s, idx, ".error", p, sizeof p);
    char *txt = NULL;
    size_t len = 0;
    kvf_err err = {0};
    if (kvf_read_file(p, &txt, &len, &err)) return NULL;
    while (len && (txt[len - 1] == '\n' || txt[len - 1] == '\r'))
        txt[--len] = '\0';
    if (!len) {
        free(txt);
        return NULL;
    }
    return txt;
}

static void set_reason(cli_sweep_state *s, int idx, const char *why) {
    free(s->reason[idx]);
    s->reason[idx] = kvf_strdup(why);
}

static bool file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

// Removes a directory of plain files (a point's run directory). Missing is fine.
static void remove_flat_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[SIM_PATH_MAX + 300];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

// A point is done when its summary.json is a complete summary: it parses, and holds the
// request counts of a run that was not interrupted, and the configuration it ran is the one
// the point resolves to now (the scenario file may have been edited since: sweep.json records
// only the command line; a trace file's content is not compared). Anything else (a truncated file,
// a directory left by a killed process, a run of another configuration) is removed so the point
// runs again.
static bool point_done(const cli_sweep_state *s, int idx) {
    char p[SIM_PATH_MAX + 300];
    point_path(s, idx, "/summary.json", p, sizeof p);
    if (!file_exists(p)) return false;
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    bool ok = json_is_object(j) && json_is_object(json_object_get(j, "requests")) &&
              json_is_integer(json_object_get(json_object_get(j, "requests"), "arrived")) &&
              !json_object_get(j, "status");
    if (ok) {
        sim_config *c = kvf_malloc(sizeof *c);
        kvf_err err = {0};
        json_t *now = point_config(s, idx, c, &err) ? NULL : sim_config_to_json(c);
        free(c);
        if (!now || !json_equal(now, json_object_get(j, "config"))) {
            ok = false;
            if (now)   // each rank checks its own points: every rank says so
                fprintf(stderr,
                        "kvfleet sweep: point %d (%s) ran another configuration (the scenario "
                        "changed since); running it again\n",
                        idx, s->names[idx]);
        }
        json_decref(now);
    }
    json_decref(j);
    if (!ok) {
        point_path(s, idx, "", p, sizeof p);
        remove_flat_dir(p);
    }
    return ok;
}

// Runs point idx into its .partial directory and renames it into place. Prints nothing;
// the caller reports err.
static kvf_status run_point(const cli_sweep_state *s, int idx, kvf_err *err) {
    char fin[SIM_PATH_MAX + 300], part[SIM_PATH_MAX + 300];
    point_path(s, idx, "", fin, sizeof fin);
    point_path(s, idx, ".partial", part, sizeof part);
    remove_flat_dir(part);
    char ep[SIM_PATH_MAX + 300];
    point_path(s, idx, ".error", ep, sizeof ep);
    unlink(ep);
    sim_config *c = kvf_malloc(sizeof *c);
    kvf_status st = point_config(s, idx, c, err);
    void *sj = NULL;
    if (!st) {
        sim_run_opts o = {
            .out_dir = part, .quiet = true, .write_db = true, .interrupt = &g_interrupt};
        st = sim_run(c, &o, &sj, err);
        json_decref(sj);
    }
    free(c);
    if (st && st != KVF_EINTR) point_error_write(s, idx, err->msg);
    if (st) return st;
    remove_flat_dir(fin);
    if (rename(part, fin))
        return kvf_fail(err, KVF_EIO, "%s: cannot rename to %s: %s", part, fin, strerror(errno));
    return KVF_OK;
}

// ---- definition file: refuse to mix two different sweeps in one DIR ----------------------------
json_t *cli_sweep_definition(const cli_sweep_state *s) {
    json_t *d = json_object(), *sets = json_array(), *vary = json_array();
    json_object_set_new(d, "scenario", json_string(s->scenario));
    for (int i = 0; i < s->nsets; i++)
        json_array_append_new(sets, json_string(s->sets[i]));
    for (int k = 0; k < s->nkeys; k++) {
        json_t *o = json_object(), *v = json_array();
        json_object_set_new(o, "key", json_string(s->keys[k].key));
        for (int j = 0; j < s->keys[k].n; j++)
            json_array_append_new(v, json_string(s->keys[k].vals[j]));
        json_object_set_new(o, "values", v);
        json_array_append_new(vary, o);
    }
    json_object_set_new(d, "set", sets);
    json_object_set_new(d, "vary", vary);
    return d;
}

static kvf_status write_json_atomic(json_t *j, const char *path, kvf_err *err) {
    char tmp[SIM_PATH_MAX + 100];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    if (json_dump_file(j, tmp, JSON_INDENT(2)) || rename(tmp, path)) {
        unlink(tmp);
        return kvf_fail(err, KVF_EIO, "%s: cannot write", path);
    }
    return KVF_OK;
}

static kvf_status check_definition(const cli_sweep_state *s, kvf_err *err) {
    char p[SIM_PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/points", s->out);
    kvf_status st = kvf_mkdirs(p, err);
    if (st) return st;
    snprintf(p, sizeof p, "%s/sweep.json", s->out);
    json_t *want = cli_sweep_definition(s);
    if (file_exists(p)) {
        json_error_t je;
        json_t *have = json_load_file(p, 0, &je);
        bool same = have && json_equal(have, want);
        json_decref(have);
        json_decref(want);
        if (!same)
            return kvf_fail(err, KVF_EINVAL,
                            "%s holds another sweep (scenario, --set or --vary differ); "
                            "choose another -o DIR or remove it",
                            s->out);
        return KVF_OK;
    }
    st = write_json_atomic(want, p, err);
    json_decref(want);
    return st;
}

// ---- running
// -------------------------------------------------------------------------------------
static void report_failure(const cli_sweep_state *s, int idx, const kvf_err *err) {
    fprintf(stderr, "kvfleet sweep: point %d (%s): %s\n", idx, s->names[idx], err->msg);
}

// Runs the points idx with todo[idx] in this process, in order.
static int run_inline(cli_sweep_state *s, const bool *todo, rpt_progress *bar) {
    int failed = 0, done = 0;
    for (int i = 0; i < s->npoints && !g_interrupt; i++) {
        if (!todo[i]) continue;
        kvf_err err = {0};
        kvf_status st = run_point(s, i, &err);
        if (st && st != KVF_EINTR) {
            report_failure(s, i, &err);
            failed++;
            if (kvf_exit_code(st) == 2) s->bad_input = true;
        }
        if (st) set_reason(s, i, st == KVF_EINTR ? "interrupted" : err.msg);
        if (!st) s->ran[i] = true;
        rpt_progress_update(bar, ++done);
    }
    return failed;
}

// Runs the points with todo[idx] in up to s->jobs forked workers, one point per child.
static int run_forked(cli_sweep_state *s, const bool *todo, rpt_progress *bar) {
    pid_t *pid_of = kvf_calloc((size_t)s->npoints, sizeof *pid_of);
    pid_t parent = getpid();
    int running = 0, next = 0, failed = 0, done = 0;
    fflush(stdout);
    fflush(stderr);
    for (;;) {
        while (!g_interrupt && running < s->jobs && next < s->npoints) {
            if (!todo[next]) {
                next++;
                continue;
            }
            pid_t pid = fork();
            if (pid < 0) {
                char why[128];
                snprintf(why, sizeof why, "not run: fork: %s", strerror(errno));
                fprintf(stderr, "kvfleet sweep: point %d (%s): %s\n", next, s->names[next], why);
                set_reason(s, next, why);
                failed++;
                next++;
                continue;
            }
            if (pid == 0) {
                // a worker dies with its parent: no orphan keeps writing after a SIGKILL
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent) _exit(1);
                kvf_err err = {0};
                kvf_status st = run_point(s, next, &err);
                if (st && st != KVF_EINTR) report_failure(s, next, &err);
                fflush(stderr);
                _exit(st == KVF_EINTR ? 1 : kvf_exit_code(st));
            }
            pid_of[next++] = pid;
            running++;
        }
        if (running == 0) break;
        int wst = 0;
        pid_t p = waitpid(-1, &wst, 0);
        if (p < 0) {
            if (errno == EINTR) continue;
            break;
        }
        int idx = -1;
        for (int i = 0; i < s->npoints; i++)
            if (pid_of[i] == p) idx = i;
        if (idx < 0) continue;
        pid_of[idx] = 0;
        running--;
        bool ok = WIFEXITED(wst) && WEXITSTATUS(wst) == 0;
        if (ok)
            s->ran[idx] = true;
        else if (!g_interrupt) {
            if (WIFSIGNALED(wst)) {
                char why[64];
                snprintf(why, sizeof why, "worker killed by signal %d", WTERMSIG(wst));
                fprintf(stderr, "kvfleet sweep: point %d (%s): %s\n", idx, s->names[idx], why);
                set_reason(s, idx, why);
            }
            failed++;   // otherwise the worker left its message in points/<name>.error
            if (WIFEXITED(wst) && WEXITSTATUS(wst) == 2) s->bad_input = true;
        } else {
            set_reason(s, idx, "interrupted");
        }
        rpt_progress_update(bar, ++done);
    }
    free(pid_of);
    return failed;
}

static json_t *load_point(const cli_sweep_state *s, int idx) {
    char p[SIM_PATH_MAX + 300];
    point_path(s, idx, "/summary.json", p, sizeof p);
    json_error_t je;
    return json_load_file(p, 0, &je);
}

// Rank r != 0 sends, for each of its points in increasing idx, {idx, len} then len bytes of
// summary JSON (len 0: failed). Rank 0 receives them in the same order per source, so
// MPI's non-overtaking rule between a pair of ranks keeps them matched.
static void mpi_gather(cli_sweep_state *s) {
    enum { TAG_HDR = 11, TAG_TXT = 12 };
    if (s->rank != 0) {
        for (int i = s->rank; i < s->npoints; i += s->size) {
            char *txt = NULL;
            size_t len = 0;
            kvf_err err = {0};
            char p[SIM_PATH_MAX + 300];
            point_path(s, i, "/summary.json", p, sizeof p);
            if (!file_exists(p) || kvf_read_file(p, &txt, &len, &err)) len = 0;
            int hdr[2] = {i, (int)len};
            s->mpi->send_ints(hdr, 2, 0, TAG_HDR);
            if (len) s->mpi->send_chars(txt, (int)len, 0, TAG_TXT);
            free(txt);
        }
        return;
    }
    for (int i = 0; i < s->npoints; i++) {
        int src = i % s->size;
        if (src == 0) continue;
        int hdr[2];
        s->mpi->recv_ints(hdr, 2, src, TAG_HDR);
        KVF_ASSERT(hdr[0] == i);
        json_decref(s->summary[i]);
        s->summary[i] = NULL;
        if (hdr[1] > 0) {
            char *txt = kvf_malloc((size_t)hdr[1] + 1);
            s->mpi->recv_chars(txt, hdr[1], src, TAG_TXT);
            txt[hdr[1]] = '\0';
            json_error_t je;
            s->summary[i] = json_loads(txt, 0, &je);
            free(txt);
        }
    }
}

static bool mpi_wanted(void) {
    const char *e = getenv("OMPI_COMM_WORLD_SIZE");
    return e && atoi(e) > 1;
}

// The command line: scenario, --vary, --set, -j, -o, --json into *s (the --vary texts into
// vary, parsed later); CLI_GO or the exit code.
static int sweep_parse(cli_sweep_state *s, int argc, char **argv, cli_common *c, cli_list *vary) {
    const char *jobs = NULL;
    const cli_opt opts[] = {
        CLI_OPT_LIST("--vary", vary),
        {.name = "-j", .kind = CLI_STR, .dst = &jobs, .attached = true},
    };
    const cli_spec spec = {.cmd = "sweep",
                           .usage = usage_sweep,
                           .first = 1,
                           .opts = opts,
                           .nopts = (int)(sizeof opts / sizeof opts[0]),
                           .pos = &s->scenario,
                           .npos = 1,
                           .common = CLI_SET | CLI_OUT | CLI_JSON};
    int rc = cli_parse(&spec, argc, argv, c);
    if (rc != CLI_GO) return rc;
    s->sets = c->sets;
    s->nsets = c->nsets;
    s->out = c->out;
    s->json = c->json;
    if (!s->scenario) return usage_sweep(stderr, 2);
    if (vary->n == 0) {
        fprintf(stderr, "kvfleet sweep: give at least one --vary KEY=V1,V2,...\n");
        return usage_sweep(stderr, 2);
    }
    s->jobs = 1;
    if (jobs) {
        char *end = NULL;
        long j = strtol(jobs, &end, 10);
        if (!*jobs || *end || j < 1 || j > 1024) {
            fprintf(stderr, "kvfleet sweep: -j wants a number of workers (1..1024), not '%s'\n",
                    jobs);
            return 2;
        }
        s->jobs = (int)j;
    }
    return CLI_GO;
}

// Adds the --vary text arg as key s->nkeys: well formed, a new key, each value accepted by the
// scenario loader over the base configuration (tmp is scratch).
static kvf_status sweep_add_key(cli_sweep_state *s, const char *arg, sim_config *tmp,
                                kvf_err *err) {
    sw_key *k = &s->keys[s->nkeys];
    kvf_status st = parse_vary(k, arg, err);
    if (st) return st;
    s->nkeys++;
    for (int j = 0; j < s->nkeys - 1 && !st; j++)
        if (!strcmp(s->keys[j].key, k->key))
            st = kvf_fail(err, KVF_EINVAL, "--vary %s: key given twice", k->key);
    for (int j = 0; j < k->n && !st; j++) {
        char a[SIM_PATH_MAX + 128];
        memcpy(tmp, s->base, sizeof *tmp);
        snprintf(a, sizeof a, "%s=%s", k->key, k->vals[j]);
        st = sim_config_set(tmp, a, err);
        if (st) {
            // "--set KEY: what" -> "--vary KEY=VALUE: what"
            char what[sizeof err->msg];
            const char *m = err->msg, *colon = strstr(m, ": ");
            snprintf(what, sizeof what, "%s", !strncmp(m, "--set ", 6) && colon ? colon + 2 : m);
            kvf_fail(err, st, "--vary %s=%s: %s", k->key, k->vals[j], what);
        }
    }
    return st;
}

// The sweep's points over the base configuration (scenario + --set, loaded): every --vary
// key, and every point's configuration checked before anything runs.
static kvf_status sweep_define(cli_sweep_state *s, const cli_list *vary, kvf_err *err) {
    KVF_ASSERT(s->base && vary->n > 0);
    kvf_status st = KVF_OK;
    sim_config *tmp = kvf_malloc(sizeof *tmp);
    double npoints = 1;
    for (int v = 0; v < vary->n && !st; v++) {
        st = sweep_add_key(s, vary->v[v], tmp, err);
        if (!st) npoints *= s->keys[s->nkeys - 1].n;
    }
    // a key both set and varied would take the varied values unseen: say which one is meant
    for (int k = 0; !st && k < s->nkeys; k++)
        for (int i = 0; !st && i < s->nsets; i++) {
            size_t kl = strlen(s->keys[k].key);
            if (!strncmp(s->sets[i], s->keys[k].key, kl) && s->sets[i][kl] == '=')
                st = kvf_fail(err, KVF_EINVAL,
                              "--vary %s: the key is also given with --set (%s); set it or vary "
                              "it, not both",
                              s->keys[k].key, s->sets[i]);
        }
    if (!st && npoints > SW_POINTS_MAX)
        st = kvf_fail(err, KVF_EINVAL, "--vary: %.0f points, more than %d", npoints, SW_POINTS_MAX);
    s->npoints = (int)npoints;
    for (int i = 0; !st && i < s->npoints; i++) {
        st = point_config(s, i, tmp, err);
        if (st) {
            char where[512] = "";
            size_t n = 0;
            for (int k = 0; k < s->nkeys; k++)
                n += (size_t)snprintf(where + n, n < sizeof where ? sizeof where - n : 0, "%s%s=%s",
                                      k ? " " : "", s->keys[k].key,
                                      s->keys[k].vals[cli_sweep_point_val(s, i, k)]);
            kvf_err_prefix(err, "point %d (%s)", i, where);
        }
    }
    free(tmp);
    return st;
}

// DIR and its points' names, the definition file checked or written, and (one process, not
// MPI ranks sharing it) DIR/sweep.lock held; outbuf holds the default DIR.
static kvf_status sweep_prepare_dir(cli_sweep_state *s, char *outbuf, size_t n, kvf_err *err) {
    if (!s->out) {
        snprintf(outbuf, n, "out/sweep-%s", s->base->name[0] ? s->base->name : "run");
        s->out = outbuf;
    }
    s->names = kvf_calloc((size_t)s->npoints, sizeof *s->names);
    s->summary = kvf_calloc((size_t)s->npoints, sizeof *s->summary);
    s->ran = kvf_calloc((size_t)s->npoints, sizeof *s->ran);
    s->reason = kvf_calloc((size_t)s->npoints, sizeof *s->reason);
    for (int i = 0; i < s->npoints; i++)
        s->names[i] = point_name(s, i);
    kvf_status st = check_definition(s, err);
    int lock_fd = -1;
    if (!st && s->size == 1) {
        char lp[SIM_PATH_MAX + 32];
        snprintf(lp, sizeof lp, "%s/sweep.lock", s->out);
        st = sim_lock_file(lp, &lock_fd, err);   // held until the process ends
    }
    return st;
}

// Runs the points this process owns that are not done yet (under MPI: its share), inline or in
// forked workers, behind one progress bar. Returns the points that failed; *nran those run.
static int sweep_run_points(cli_sweep_state *s, int *nran) {
    bool *todo = kvf_calloc((size_t)s->npoints, sizeof *todo);
    int ntodo = 0;
    for (int i = 0; i < s->npoints; i++) {
        if (i % s->size != s->rank) continue;
        if (!point_done(s, i)) {
            todo[i] = true;
            ntodo++;
        }
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    rpt_progress bar;
    char label[64];
    snprintf(label, sizeof label, "sweep %d points", ntodo);
    rpt_progress_init(&bar, label, ntodo);
    if (s->rank != 0) bar.enabled = false;   // one bar, rank 0's share
    int failed =
        (s->jobs > 1 && s->size == 1) ? run_forked(s, todo, &bar) : run_inline(s, todo, &bar);
    if (g_interrupt && bar.drawn)
        fputc('\n', stderr);
    else if (ntodo)
        rpt_progress_done(&bar);
    free(todo);
    *nran = 0;
    for (int i = 0; i < s->npoints; i++)
        *nran += s->ran[i];
    return failed;
}

// Rank 0 (or the one process): sweep.db, sweep.csv, sweep.html, the table or JSON on stdout
// and the count line on stderr; the exit code.
const char *cli_sweep_reason(const cli_sweep_state *s, int idx) {
    return s->reason && s->reason[idx] ? s->reason[idx] : "not run";
}

static int sweep_report(cli_sweep_state *s, int nran) {
    int missing = 0;
    for (int i = 0; i < s->npoints; i++) {
        if (s->summary[i]) continue;
        missing++;
        if (s->reason[i]) continue;
        s->reason[i] = point_error_read(s, i);
        if (!s->reason[i])
            s->reason[i] =
                kvf_strdup(g_interrupt ? "not run: the sweep was interrupted" : "not run");
    }
    kvf_err err = {0};
    kvf_status st = cli_sweep_write_db(s, &err);
    if (!st) st = cli_sweep_write_csv(s, &err);
    if (!st) st = cli_sweep_write_html(s, &err);
    if (st) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return 1;
    }
    if (s->json)
        cli_sweep_print_json(s);
    else
        cli_sweep_print_table(s);
    fprintf(stderr, "kvfleet sweep: %d points: %d run now, %d already done, %d unfinished%s\n",
            s->npoints, nran, s->npoints - missing - nran, missing,
            s->size > 1 ? " (gathered over MPI ranks)" : "");
    if (g_interrupt) {
        fprintf(stderr, "kvfleet sweep: interrupted; rerun the same command to resume\n");
        return 1;
    }
    // a point refused as bad input (its configuration does not fit, a value out of range) makes
    // the sweep's exit 2, as the same configuration given to run does; any other failure 1
    return missing ? (s->bad_input ? 2 : 1) : 0;
}

static int sweep_main(cli_sweep_state *s, int argc, char **argv) {
    static cli_common c;   // static: s->sets points into it after the return
    const char *vary_v[SW_KEYS_MAX];
    cli_list vary = {vary_v, 0, SW_KEYS_MAX};
    int rc = sweep_parse(s, argc, argv, &c, &vary);
    if (rc != CLI_GO) return rc;
    kvf_err err = {0};
    s->base = kvf_malloc(sizeof *s->base);
    kvf_status st = sim_points_load(s->base, s->scenario, s->sets, s->nsets, &err);
    if (st) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(st);
    }
    st = sweep_define(s, &vary, &err);
    if (st) {
        if (s->rank == 0) fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(st);
    }
    char outbuf[SIM_PATH_MAX];
    st = sweep_prepare_dir(s, outbuf, sizeof outbuf, &err);
    if (st) {
        if (s->rank == 0) fprintf(stderr, "kvfleet: %s\n", err.msg);
        return kvf_exit_code(st);
    }
    int nran = 0, failed = sweep_run_points(s, &nran);
    // Gather: every point's summary from its directory (or, under MPI, from its rank).
    for (int i = 0; i < s->npoints; i++)
        if (i % s->size == s->rank) s->summary[i] = load_point(s, i);
    if (s->size > 1) {
        mpi_gather(s);
        int tot[3] = {0, 0, 0}, loc[3] = {nran, failed, s->bad_input};
        s->mpi->sum_to_root(loc, tot, 3);
        nran = tot[0];
        failed = tot[1];
        s->bad_input = tot[2] > 0;
    }
    if (s->rank != 0) return failed || g_interrupt ? 1 : 0;
    return sweep_report(s, nran);
}

int cli_sweep(int argc, char **argv) {
    static cli_sweep_state s;
    memset(&s, 0, sizeof s);
    s.size = 1;
    if (mpi_wanted()) {
        kvf_err err = {0};
        s.mpi = sim_mpi_load(&err);
        if (s.mpi)
            s.mpi->init(&s.rank, &s.size);
        else
            fprintf(stderr, "kvfleet sweep: %s; every rank runs the whole sweep\n", err.msg);
    }
    int rc = sweep_main(&s, argc, argv);
    if (s.mpi) s.mpi->finalize();
    for (int k = 0; k < s.nkeys; k++) {
        for (int j = 0; j < s.keys[k].n; j++)
            free(s.keys[k].vals[j]);
        free(s.keys[k].vals);
    }
    for (int i = 0; s.names && i < s.npoints; i++) {
        free(s.names[i]);
        free(s.reason[i]);
        json_decref(s.summary[i]);
    }
    free(s.names);
    free(s.summary);
    free(s.ran);
    free(s.reason);
    free(s.base);
    return rc;
}
