// bench/sim_speed.c -- simulator speed: events/s of a bare event-queue loop (the classic
// "hold" model: pop the earliest event, push one a random time later) next to a full run of a
// 1,000-GPU cluster replaying one simulated hour of real traffic, measured in the same process.
//
// usage: sim_speed [REPO_DIR] [SHARED_DIR] [HOURS] [OLD_KVFLEET] [OLD_REPO_DIR]
// OLD_KVFLEET (or KVF_BENCH_OLD): a previous release's kvfleet binary; each scenario is then
// also run by it (`OLD run SCENARIO --set ... -q --no-report -o DIR`, a child process, in the
// same bench run, one after the other so neither competes for a core), and each figure is
// printed beside that run's: its loop wall, events and the speed ratio new/old, with whether
// both simulated the same events. OLD_REPO_DIR (or KVF_BENCH_OLD_REPO): that release's
// checkout; the old binary then reads the scenario of the same name from it (its model files
// and keys: a model or scenario key added since would be refused), else this checkout's.
// The hour of traffic is the Mooncake conversation trace repeated back to back (hash ids of
// each copy offset so copies do not share prefixes beyond the trace's own system prompt),
// rescaled to the scenario's rate. Prints one line per figure; never part of the tests.
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "mdl.h"
#include "sim.h"
#include "sim_queue.h"
#include "sim_run.h"

#define BENCH_REPS 5

static double bare_queue_events_per_s(size_t live, uint64_t n) {
    sim_queue *q = sim_queue_create(live);
    kvf_rng r;
    kvf_rng_init(&r, 1, 1);
    for (size_t i = 0; i < live; i++) {
        sim_event ev = {.t = (sim_time)kvf_rng_below(&r, 1000000)};
        sim_queue_push(q, &ev);
    }
    int64_t t0 = kvf_wall_ns();
    sim_event ev;
    for (uint64_t i = 0; i < n; i++) {
        sim_queue_pop(q, &ev);
        ev.t += 1 + (sim_time)kvf_rng_below(&r, 1000000);
        sim_queue_push(q, &ev);
    }
    double s = (double)(kvf_wall_ns() - t0) * 1e-9;
    sim_queue_destroy(q);
    return (double)n / s;
}

// The scenario's step model on one pool's layout, made as a run makes it (sim_pool_parallel,
// sim_make_stepper), the model into *m; NULL when the model or hardware cannot be loaded.
static mdl_stepper *pool_stepper(const sim_config *cfg, const char *repo, const sim_pool_cfg *pool,
                                 mdl_model *m) {
    char dir[2100];
    snprintf(dir, sizeof dir, "%s/models", repo);
    static mdl_hardware hw;   // its kernel rows are a few hundred KB
    kvf_err err = {0};
    if (mdl_model_load(m, cfg->model, dir, &err) ||
        mdl_hardware_load(&hw, cfg->hardware, dir, &err))
        return NULL;
    mdl_parallel par = sim_pool_parallel(cfg, m, pool);
    mdl_stepper *st = NULL;
    return sim_make_stepper(cfg, m, &hw, &par, NULL, &st, &err) ? NULL : st;
}

// ns per decode step costed as the simulator costs them, in runs (mdl_stepper_cost_run): the
// scenario's model and step model on its decode pool's layout (sim_pool_parallel,
// sim_make_stepper), batches of about `seqs` sequences at `ctx` tokens of context whose count
// changes from run to run: the second half of the floor of one queue operation plus one step
// costing per event. 0 when the model cannot be loaded.
static double run_step_ns(const sim_config *cfg, const char *repo, double seqs, double ctx) {
    mdl_model m;
    mdl_stepper *st = pool_stepper(cfg, repo, &cfg->cluster.decode, &m);
    if (!st) return 0;
    uint32_t caps[MDL_CAPS];
    mdl_model_caps(&m, caps);
    enum { RUN = 64, RUNS = 20000 };
    int64_t ns[RUN], sink = 0;
    int64_t t0 = kvf_wall_ns();
    for (int k = 0; k < RUNS; k++) {
        uint32_t n = (uint32_t)(seqs * (0.5 + (k % 8) / 8.0)) + 1;
        mdl_decode_sum d0 = {0}, grow = {.sum_ctx = n};
        for (uint32_t i = 0; i < n; i++)
            mdl_decode_sum_add(&d0, caps, ctx + i);
        for (int c = 0; c < MDL_CAPS; c++)
            if (caps[c]) grow.sum_min[c] = n;
        if (!mdl_stepper_cost_run(st, &d0, &grow, RUN, ns)) break;
        sink += ns[RUN - 1];
    }
    double per = (double)(kvf_wall_ns() - t0) / ((double)RUNS * RUN);
    mdl_stepper_destroy(st);
    return sink > 0 ? per : 0;
}

// ns per event of the run's own event queue: every instance holds its step end in a slot of
// the queue (sim_queue_slots) and the heap holds a couple more events (the next arrival, a
// transfer), so a hold model over as many slots as the scenario has instances, each pop
// pushing its slot again. (The bare loop above, a heap of 100k live events, costs over twice
// as much an operation: a floor priced with it is a generous one.)
static double slot_queue_ns(uint32_t slots, uint64_t n) {
    sim_queue *q = sim_queue_create(16);
    sim_queue_slots(q, slots);
    kvf_rng r;
    kvf_rng_init(&r, 1, 1);
    for (uint32_t i = 0; i < slots; i++) {
        sim_event ev = {.t = (sim_time)kvf_rng_below(&r, 1000000), .dst = i};
        sim_queue_slot_push(q, i, &ev, false);
    }
    int64_t t0 = kvf_wall_ns();
    sim_event ev;
    for (uint64_t i = 0; i < n; i++) {
        sim_queue_pop(q, &ev);
        ev.t += 1 + (sim_time)kvf_rng_below(&r, 1000000);
        sim_queue_slot_push(q, ev.dst, &ev, false);
    }
    double ns = (double)(kvf_wall_ns() - t0) / (double)n;
    sim_queue_destroy(q);
    return ns;
}

// ns per prefill step costed as the simulator costs one (mdl_stepper_cost on the prefill
// pool's layout, sim_make_stepper): batches of about `seqs` prompts of `tokens` tokens each,
// their count and lengths varying from step to step. 0 when the model cannot be loaded.
static double prefill_step_ns(const sim_config *cfg, const char *repo, double seqs, double tokens) {
    mdl_model m;
    mdl_stepper *st = pool_stepper(cfg, repo, &cfg->cluster.prefill, &m);
    if (!st) return 0;
    enum { STEPS = 200000, MAXN = 64 };
    mdl_seq sq[MAXN];
    int64_t sink = 0;
    if (seqs < 1) seqs = 1;
    if (seqs > MAXN) seqs = MAXN;
    int64_t t0 = kvf_wall_ns();
    for (int k = 0; k < STEPS; k++) {
        // the counts floor(seqs) and ceil(seqs) in the proportion that makes their mean seqs
        uint32_t n = (uint32_t)(floor((k + 1) * seqs) - floor(k * seqs));
        for (uint32_t i = 0; i < n; i++)
            sq[i] = (mdl_seq){(uint32_t)(tokens * (0.5 + (k + i) % 8 / 8.0)) + 1, 0};
        mdl_batch b = {.phase = MDL_PREFILL, .seqs = sq, .n = n};
        mdl_step_cost out;
        mdl_stepper_cost(st, &b, &out);
        sink += out.ns;
    }
    double per = (double)(kvf_wall_ns() - t0) / STEPS;
    mdl_stepper_destroy(st);
    return sink > 0 ? per : 0;
}

static const char *old_bin;    // a previous release's kvfleet, or NULL
static const char *old_repo;   // its checkout (scenarios of the same name), or NULL
static double bare_eps;        // the bare loop's events/s, measured first
static double last_user_s;     // CPU user seconds of the last in-process run
static double last_loop_s;     // loop wall of the last bench_scenario (the least of its runs)

static double user_s(int who) {
    struct rusage r;
    getrusage(who, &r);
    return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec * 1e-6;
}

// Appends s to b single-quoted for the shell.
static void shell_quote(char *b, size_t n, const char *s) {
    size_t k = strlen(b);
    if (k + 1 < n) b[k++] = '\'';
    for (; *s && k + 5 < n; s++) {
        if (*s == '\'') {
            memcpy(b + k, "'\\''", 4);
            k += 4;
        } else {
            b[k++] = *s;
        }
    }
    if (k + 1 < n) b[k++] = '\'';
    b[k] = 0;
}

// Runs `old_bin run scenario --set sets...` (reps times, keeping the least loop wall, process
// wall and user time) and prints its loop wall and events beside the new binary's (loop wall
// new_loop for new_events events, the least of as many runs). Quiet when no old binary is given.
static void old_compare(const char *scenario, const char *const *sets, int n, double new_loop,
                        double new_events, int reps) {
    if (!old_bin) return;
    char opath[2048];
    if (old_repo) {
        const char *base = strrchr(scenario, '/');
        snprintf(opath, sizeof opath, "%s/scenarios/%s", old_repo, base ? base + 1 : scenario);
        if (access(opath, R_OK)) {
            printf("  old binary: no %s in the old checkout\n", opath);
            return;
        }
        scenario = opath;
    }
    char dir[] = "/tmp/kvf_bench_old_XXXXXX";
    if (!mkdtemp(dir)) return;
    char out[64], cmd[16384] = "";
    snprintf(out, sizeof out, "%s/r", dir);   // a fresh directory: no --force needed
    shell_quote(cmd, sizeof cmd, old_bin);
    strncat(cmd, " run ", sizeof cmd - strlen(cmd) - 1);
    shell_quote(cmd, sizeof cmd, scenario);
    for (int i = 0; i < n; i++) {
        strncat(cmd, " --set ", sizeof cmd - strlen(cmd) - 1);
        shell_quote(cmd, sizeof cmd, sets[i]);
    }
    strncat(cmd, " -q --no-report -o ", sizeof cmd - strlen(cmd) - 1);
    shell_quote(cmd, sizeof cmd, out);
    strncat(cmd, " >/dev/null 2>&1", sizeof cmd - strlen(cmd) - 1);
    char sp[96], rm_out[128];
    snprintf(sp, sizeof sp, "%s/summary.json", out);
    snprintf(rm_out, sizeof rm_out, "rm -rf '%s'", out);
    json_t *s = NULL;
    double wall = 0, user = 0, loop = 0;
    int rc = 0;
    for (int k = 0; k < reps && rc == 0; k++) {
        if (k && system(rm_out)) {
        }
        double u0 = user_s(RUSAGE_CHILDREN);
        int64_t t0 = kvf_wall_ns();
        rc = system(cmd);
        double w = (double)(kvf_wall_ns() - t0) * 1e-9;
        double u = user_s(RUSAGE_CHILDREN) - u0;
        json_t *sk = rc == 0 ? json_load_file(sp, 0, NULL) : NULL;
        if (!sk) {
            rc = rc ? rc : -1;
            break;
        }
        double l = json_number_value(json_object_get(json_object_get(sk, "sim"), "wall_s"));
        if (!s || l < loop) loop = l;
        if (!s || w < wall) wall = w;
        if (!s || u < user) user = u;
        if (s) json_decref(s);
        s = sk;
    }
    if (!s || rc) {
        printf("  old binary: failed (exit %d)\n", rc);
        if (s) json_decref(s);
        s = NULL;
    } else {
        json_t *si = json_object_get(s, "sim");
        double ev = json_number_value(json_object_get(si, "events"));
        // user time is the figure to quote on a shared machine (the loop's wall counts the
        // time other processes held the core); the old run's also holds its process start
        // (both write a results.db: run_with_db)
        if (reps > 1) printf("  (least of %d runs on each side)\n", reps);
        printf("  old binary: %.0f events, loop %.3f s (process %.2f s wall, %.2f s user): "
               "%.2f M events/s = %.1f %% of the bare queue; new/old speed %.2fx by loop wall, "
               "%.2fx by user time (new %.2f s); events %s\n",
               ev, loop, wall, user, ev / loop / 1e6, 100 * ev / loop / bare_eps, loop / new_loop,
               user / last_user_s, last_user_s, ev == new_events ? "the same" : "DIFFER");
        json_decref(s);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {
    }
}

// sim_run as `kvfleet run -o DIR --no-report` runs it: results.db (request rows, time series)
// and summary.json written into a fresh temporary directory, removed afterwards. The loop's
// wall then holds the rows it writes, as an old binary's run (old_compare) does.
static kvf_status run_with_db(const sim_config *cfg, void **sv, kvf_err *err) {
    char dir[] = "/tmp/kvf_bench_new_XXXXXX";
    if (!mkdtemp(dir)) return kvf_fail(err, KVF_EIO, "cannot create a temporary directory");
    char out[64];
    snprintf(out, sizeof out, "%s/r", dir);
    sim_run_opts o = {.quiet = true, .out_dir = out};
    kvf_status st = sim_run(cfg, &o, sv, err);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {
    }
    return st;
}

// Writes `copies` back-to-back copies of a Mooncake JSONL trace; returns requests written.
static long repeat_trace(const char *in, const char *out, int copies) {
    FILE *o = fopen(out, "w");
    if (!o) return -1;
    long n = 0;
    double span = 0;
    for (int k = 0; k < copies; k++) {
        FILE *f = fopen(in, "r");
        if (!f) return -1;
        char line[1 << 16];
        double last = 0;
        while (fgets(line, sizeof line, f)) {
            json_error_t e;
            json_t *j = json_loads(line, 0, &e);
            if (!j) continue;
            double ts = json_number_value(json_object_get(j, "timestamp"));
            last = ts;
            json_object_set_new(j, "timestamp", json_integer((json_int_t)(ts + span)));
            json_t *h = json_object_get(j, "hash_ids");
            size_t i;
            json_t *v;
            json_array_foreach(h, i, v) {
                json_int_t id = json_integer_value(v);
                if (id != 0) json_array_set_new(h, i, json_integer(id + (json_int_t)k * 100000000));
            }
            char *txt = json_dumps(j, JSON_COMPACT);
            fprintf(o, "%s\n", txt);
            free(txt);
            json_decref(j);
            n++;
        }
        fclose(f);
        span += last + 1000;
    }
    fclose(o);
    return n;
}

// Runs scenarios/<name> with the overrides; prints wall, events, events/s as a share of the
// bare loop, and the figures named. Returns the summary (caller decrefs) or NULL.
static json_t *bench_scenario(const char *repo, const char *label, const char *name,
                              const char *const *sets, int n, double bare) {
    static sim_config cfg;
    kvf_err err = {0};
    char path[2048];
    snprintf(path, sizeof path, "%s/scenarios/%s", repo, name);
    sim_config_default(&cfg);
    if (sim_config_load(&cfg, path, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (sim_config_set(&cfg, sets[i], &err)) {
            fprintf(stderr, "%s: %s\n", sets[i], err.msg);
            return NULL;
        }
    if (sim_config_validate(&cfg, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    // A run whose loop is under half a second is timed BENCH_REPS times on each side, the
    // least kept: at tens of ms one scheduling hiccup on a shared core is the whole figure.
    json_t *s = NULL;
    double wall = 0, loop = 0, user = 0;
    int reps = 1;
    for (int k = 0; k < reps; k++) {
        void *sv = NULL;
        int64_t t0 = kvf_wall_ns();
        double u0 = user_s(RUSAGE_SELF);
        if (run_with_db(&cfg, &sv, &err)) {
            fprintf(stderr, "%s: run failed: %s\n", label, err.msg);
            if (s) json_decref(s);
            return NULL;
        }
        double u = user_s(RUSAGE_SELF) - u0;
        double w = (double)(kvf_wall_ns() - t0) * 1e-9;
        double l = json_number_value(json_object_get(json_object_get(sv, "sim"), "wall_s"));
        if (!s || l < loop) loop = l;
        if (!s || w < wall) wall = w;
        if (!s || u < user) user = u;
        if (!s) {
            s = sv;
            if (loop < 0.5) reps = BENCH_REPS;
        } else {
            json_decref((json_t *)sv);
        }
    }
    last_user_s = user;
    last_loop_s = loop;
    json_t *si = json_object_get(s, "sim");
    double ev = json_number_value(json_object_get(si, "events"));
    printf(
        "%s: %lld requests, %.0f events, %.0f simulated s in %.2f s wall (loop %.3f s); "
        "%.2f M events/s = %.1f %% of the bare queue; %.0f ns per event\n",
        label,
        (long long)json_integer_value(json_object_get(json_object_get(s, "requests"), "arrived")),
        ev, json_number_value(json_object_get(si, "simulated_s")), wall, loop, ev / loop / 1e6,
        100 * ev / loop / bare, loop / ev * 1e9);
    old_compare(path, sets, n, loop, ev, reps);
    return s;
}

static void bench_ep_decode(const char *repo, double bare) {
    // One 144-GPU expert-parallel decode instance holding ~10 k sequences, 15 simulated minutes;
    // then two such units behind a least_kv decode router (which reads both instances' KV at
    // every routing: decode steps in runs must answer it).
    json_t *ep = bench_scenario(repo, "ep-decode-144 (15 simulated min)", "ep-decode-144.yaml",
                                NULL, 0, bare);
    if (ep) {
        json_t *st = json_object_get(ep, "steps");
        printf("  decode: %.0f steps, %.0f sequences per step on average, TPOT p50 %.1f ms\n",
               json_number_value(json_object_get(st, "decode_steps")),
               json_number_value(json_object_get(st, "decode_mean_batch")),
               json_number_value(json_object_get(json_object_get(ep, "tpot_ms"), "p50")));
        json_decref(ep);
    }
    const char *two[] = {"cluster.decode.instances=2", "cluster.prefill.instances=6",
                         "workload.generate.rate_rps=600"};
    json_decref(bench_scenario(repo, "two ep-decode-144 units, least_kv decode router",
                               "ep-decode-144.yaml", two, 3, bare));
}

static void bench_azure(const char *repo, const char *shared, double bare) {
    // The first 10,000 requests of the Azure 2023 conversation trace on 8 colocated
    // Llama-class instances, round-robin, no prefix cache (the workload Vidur's own benchmark
    // reports; 102.4 s for Vidur on this machine kind).
    char az[2300];
    snprintf(az, sizeof az, "workload.trace=%s/traces/azure2023_conv.csv", shared);
    const char *vid[] = {az,
                         "workload.format=azure",
                         "workload.limit_requests=10000",
                         "cluster.mode=colocated",
                         "cluster.prefill.instances=8",
                         "cluster.decode.instances=0",
                         "cluster.prefill.gpus_per_instance=1",
                         "kv_cache.prefix_cache=false",
                         "router.prefill=round_robin"};
    json_t *v = bench_scenario(repo, "azure 10k requests, 8 colocated instances", "quickstart.yaml",
                               vid, (int)(sizeof vid / sizeof *vid), bare);
    if (v) {
        printf("  vs Vidur's 102.4 s on the same workload: %.0fx\n", 102.4 / last_loop_s);
        json_decref(v);
    }
}

// returns 1 when the scale trace cannot be built
static int bench_scale(const char *repo, const char *src, double bare) {
    // Cost per event from 1 k to 10 k GPUs: 400 simulated seconds of the 1,000-GPU cluster and
    // of ten times its instances at ten times the rate (no prefix cache: the block index is
    // measured above; this is the kernel, routers and pools).
    char big[2048], t1[2300];
    snprintf(big, sizeof big, "/tmp/kvf_bench_trace_scale.jsonl");
    if (repeat_trace(src, big, 34) < 0) return 1;
    snprintf(t1, sizeof t1, "workload.trace=%s", big);
    const char *g1t[] = {t1, "kv_cache.prefix_cache=false", "workload.limit_requests=40000",
                         "output.requests=false"};
    const char *g10t[] = {t1,
                          "kv_cache.prefix_cache=false",
                          "workload.limit_requests=400000",
                          "output.requests=false",
                          "workload.rate_rps=1000",
                          "cluster.prefill.instances=600",
                          "cluster.decode.instances=650"};
    json_t *a =
        bench_scenario(repo, "1,000 GPUs, 400 simulated s", "cluster-1000gpu.yaml", g1t, 4, bare);
    json_t *b =
        bench_scenario(repo, "10,000 GPUs, 400 simulated s", "cluster-1000gpu.yaml", g10t, 7, bare);
    if (a && b) {
        double c1 = json_number_value(json_object_get(json_object_get(a, "sim"), "wall_s")) /
                    json_number_value(json_object_get(json_object_get(a, "sim"), "events"));
        double c10 = json_number_value(json_object_get(json_object_get(b, "sim"), "wall_s")) /
                     json_number_value(json_object_get(json_object_get(b, "sim"), "events"));
        printf("  cost per event 10k / 1k GPUs: %.2f\n", c10 / c1);
    }
    remove(big);

    json_decref(a);
    json_decref(b);
    return 0;
}

static void bench_fleet_days(const char *repo, double bare) {
    // Three simulated days of returning sessions under 3 d / 7 d retention: the store and hit
    // rate by class from the run.
    json_t *fd =
        bench_scenario(repo, "fleet-days (3 simulated days)", "fleet-days.yaml", NULL, 0, bare);
    if (fd) {
        json_t *bc = json_object_get(json_object_get(fd, "cache"), "by_class");
        const char *k;
        json_t *co;
        json_object_foreach(bc, k, co) {
            json_t *st = json_object_get(co, "stored_bytes_steady_peak");
            printf("  %-8s hit rate %.3f, store peak %.1f GB, end %.1f GB, steady %s\n", k,
                   json_number_value(json_object_get(co, "hit_rate")),
                   json_number_value(json_object_get(co, "stored_bytes_peak")) / 1e9,
                   json_number_value(json_object_get(co, "stored_bytes_end")) / 1e9,
                   json_is_number(st) ? "reached" : "not reached (run shorter than the retention)");
        }
        json_decref(fd);
    }
}

static void bench_fleet_day(const char *repo, double bare) {
    // One simulated day of a ~2,000-GPU fleet at ~7 M input / ~2 M output tokens/s, sampled at
    // 1/16 (set KVF_BENCH_FLEET_DAY=0 to skip: it takes minutes).
    const char *fdy = getenv("KVF_BENCH_FLEET_DAY");
    if (!fdy || strcmp(fdy, "0")) {
        const char *fs[] = {"workload.sample_rate=0.0625"};
        json_t *f = bench_scenario(repo, "fleet-day (1 simulated day, sampled 1/16)",
                                   "fleet-day.yaml", fs, 1, bare);
        if (f) {
            struct rusage ru2;
            getrusage(RUSAGE_SELF, &ru2);
            json_t *t = json_object_get(f, "throughput");
            printf(
                "  full fleet: %.2f M input, %.2f M output tok/s, hit rate %.3f, TTFT p90 %.0f ms, "
                "TPOT p90 %.1f ms, saturation %s; peak RSS of the process %.0f MB\n",
                json_number_value(json_object_get(t, "input_tok_s")) / 1e6,
                json_number_value(json_object_get(t, "output_tok_s")) / 1e6,
                json_number_value(json_object_get(json_object_get(f, "cache"), "hit_rate")),
                json_number_value(json_object_get(json_object_get(f, "ttft_ms"), "p90")),
                json_number_value(json_object_get(json_object_get(f, "tpot_ms"), "p90")),
                json_string_value(json_object_get(json_object_get(f, "saturation"), "state")),
                ru2.ru_maxrss / 1024.0);
            json_decref(f);
        }
    }
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);   // lines as they come: the bench takes minutes
    const char *repo = argc > 1 ? argv[1] : ".";
    const char *shared = argc > 2 ? argv[2] : "../shared";
    double hours = argc > 3 ? atof(argv[3]) : 1.0;
    old_bin = argc > 4 ? argv[4] : getenv("KVF_BENCH_OLD");
    if (old_bin && !*old_bin) old_bin = NULL;
    old_repo = argc > 5 ? argv[5] : getenv("KVF_BENCH_OLD_REPO");
    if (old_repo && !*old_repo) old_repo = NULL;
    if (old_bin && access(old_bin, X_OK)) {
        fprintf(stderr, "%s: not an executable (the previous release's kvfleet)\n", old_bin);
        return 1;
    }
    double bare = bare_queue_events_per_s(
        100000,
        getenv("KVF_BENCH_BARE_N") ? strtoull(getenv("KVF_BENCH_BARE_N"), NULL, 10) : 20000000);
    bare_eps = bare;
    printf("bare event queue (hold model, 100k live events): %.2f M events/s\n", bare / 1e6);
    if (old_bin)
        printf("previous release for comparison: %s%s%s\n", old_bin,
               old_repo ? ", scenarios from " : "", old_repo ? old_repo : "");

    static sim_config cfg;
    kvf_err err = {0};
    char path[2048], trace[2048], set[2200];
    snprintf(path, sizeof path, "%s/scenarios/cluster-1000gpu.yaml", repo);
    sim_config_default(&cfg);
    if (sim_config_load(&cfg, path, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    // one simulated hour at the scenario's rate: enough copies of the 12k-request trace
    int copies = (int)(cfg.workload.opt.rate_rps * 3600 * hours / 12031) + 1;
    snprintf(trace, sizeof trace, "/tmp/kvf_bench_trace_%d.jsonl", copies);
    char src[2048];
    snprintf(src, sizeof src, "%s/traces/mooncake_conversation.jsonl", shared);
    long n = repeat_trace(src, trace, copies);
    if (n < 0) {
        fprintf(stderr, "cannot build the bench trace from %s\n", src);
        return 1;
    }
    snprintf(set, sizeof set, "workload.trace=%s", trace);
    sim_config_set(&cfg, set, &err);
    char set_trace[2200];
    snprintf(set_trace, sizeof set_trace, "%s", set);
    snprintf(set, sizeof set, "workload.limit_requests=%ld",
             (long)(cfg.workload.opt.rate_rps * 3600 * hours));
    sim_config_set(&cfg, set, &err);
    if (sim_config_validate(&cfg, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    void *sv = NULL;
    // the same hour without the prefix cache: what the KV store costs per event
    static sim_config nocache;
    nocache = cfg;
    sim_config_set(&nocache, "kv_cache.prefix_cache=false", &err);
    double u0 = user_s(RUSAGE_SELF);
    if (run_with_db(&nocache, &sv, &err)) {
        fprintf(stderr, "run failed: %s\n", err.msg);
        return 1;
    }
    last_user_s = user_s(RUSAGE_SELF) - u0;
    json_t *si0 = json_object_get((json_t *)sv, "sim");
    double ev0 = json_number_value(json_object_get(si0, "events"));
    double w0 = json_number_value(json_object_get(si0, "wall_s"));
    printf("without prefix cache: %.0f events in %.2f s wall: %.2f M events/s (and %.0f page "
           "events of decode runs, not counted)\n",
           ev0, w0, ev0 / w0 / 1e6, json_number_value(json_object_get(si0, "page_events")));
    {
        // the floor: one queue operation per event and one step costing per step
        json_t *st = json_object_get((json_t *)sv, "steps");
        double steps = json_number_value(json_object_get(st, "steps"));
        double batch = json_number_value(json_object_get(st, "decode_mean_batch"));
        double step_ns = run_step_ns(&cfg, repo, batch, 1000);
        double floor_s = ev0 / bare_eps + steps * step_ns * 1e-9;
        if (step_ns > 0)
            printf("  floor: %.0f events x %.0f ns (bare queue) + %.0f steps x %.1f ns (a step "
                   "costed in a run) = %.2f s; the loop is %.2fx the floor\n",
                   ev0, 1e9 / bare_eps, steps, step_ns, floor_s, w0 / floor_s);
        // the same floor with each part priced as this run incurs it: a queue operation on
        // the run's own queue (a slot per instance) for every pop, the early pops between a
        // run's pages included; decode steps as costed in runs; prefill steps one by one
        double dsteps = json_number_value(json_object_get(st, "decode_steps"));
        double psteps = steps - dsteps;
        double pages = json_number_value(json_object_get(si0, "page_events"));
        double reqs = json_number_value(
            json_object_get(json_object_get((json_t *)sv, "requests"), "completed"));
        // the mean prompt: input tokens/s over the simulated span, per completed request
        double tok = reqs > 0 ? json_number_value(json_object_get(
                                    json_object_get((json_t *)sv, "throughput"), "input_tok_s")) *
                                    json_number_value(json_object_get(si0, "simulated_s")) / reqs
                              : 0;
        uint32_t inst =
            (uint32_t)(nocache.cluster.prefill.instances + nocache.cluster.decode.instances +
                       nocache.cluster.vision.instances);
        double q_ns = slot_queue_ns(inst, 5000000);
        double p_ns =
            psteps > 0 && reqs > 0 && tok > 0 ? prefill_step_ns(&cfg, repo, reqs / psteps, tok) : 0;
        double own_s = ((ev0 + pages) * q_ns + dsteps * step_ns + psteps * p_ns) * 1e-9;
        if (step_ns > 0 && p_ns > 0)
            printf("  floor as this run incurs it: %.0f pops x %.1f ns (its queue: %u instance "
                   "slots) + %.0f decode steps x %.1f ns + %.0f prefill steps x %.0f ns (one "
                   "costed alone) = %.3f s; the loop is %.2fx that floor\n",
                   ev0 + pages, q_ns, inst, dsteps, step_ns, psteps, p_ns, own_s, w0 / own_s);
    }
    char lim[128];
    snprintf(lim, sizeof lim, "workload.limit_requests=%ld",
             (long)(cfg.workload.opt.rate_rps * 3600 * hours));
    const char *sets_nc[] = {set_trace, lim, "kv_cache.prefix_cache=false"};
    old_compare(path, sets_nc, 3, w0, ev0, 1);
    json_decref(sv);
    int64_t t0 = kvf_wall_ns();
    u0 = user_s(RUSAGE_SELF);
    if (run_with_db(&cfg, &sv, &err)) {
        fprintf(stderr, "run failed: %s\n", err.msg);
        return 1;
    }
    last_user_s = user_s(RUSAGE_SELF) - u0;
    double wall = (double)(kvf_wall_ns() - t0) * 1e-9;
    json_t *s = sv, *si = json_object_get(s, "sim");
    double ev = json_number_value(json_object_get(si, "events"));
    double simulated = json_number_value(json_object_get(si, "simulated_s"));
    double loop_wall = json_number_value(json_object_get(si, "wall_s"));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf(
        "cluster-1000gpu: %lld requests, %.0f events, %.1f simulated s in %.2f s wall "
        "(loop %.2f s)\n",
        (long long)json_integer_value(json_object_get(json_object_get(s, "requests"), "arrived")),
        ev, simulated, wall, loop_wall);
    printf("simulator: %.2f M events/s = %.1f %% of the bare queue; %.0f simulated s per wall s\n",
           ev / loop_wall / 1e6, 100 * ev / loop_wall / bare, simulated / loop_wall);
    old_compare(path, sets_nc, 2, loop_wall, ev, 1);
    json_t *ca = json_object_get(s, "cache");
    printf("cache hit rate %.3f, saturation %s, peak RSS %.0f MB\n",
           json_number_value(json_object_get(ca, "hit_rate")),
           json_string_value(json_object_get(json_object_get(s, "saturation"), "state")),
           ru.ru_maxrss / 1024.0);
    printf("store index: %.1f bytes per stored block, %.0f blocks at the peak\n",
           json_number_value(json_object_get(ca, "index_bytes_per_block")),
           json_number_value(json_object_get(ca, "stored_bytes_peak")) /
               json_number_value(json_object_get(ca, "block_bytes")));
    json_decref(s);
    remove(trace);

    bench_ep_decode(repo, bare);
    bench_azure(repo, shared, bare);
    if (bench_scale(repo, src, bare)) return 1;
    bench_fleet_days(repo, bare);
    bench_fleet_day(repo, bare);
    return 0;
}
