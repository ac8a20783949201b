// sim/sim_trace.c -- writer of the Chrome / Perfetto trace (sim_trace.h).
//
// Tricks: names of threads are written the first time a step lands on them (a set of seen
// (pool, instance) pairs); a span's end is written only when its begin was (a hash set of
// open spans, keyed by pool, instance, name and id), so the window never leaves an end
// without its begin.
#include "sim_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_POOLS_MAX 8

struct sim_trace {
    FILE *f;
    double from_s, to_s;
    uint64_t events;
    char pool[TRACE_POOLS_MAX][32];
    int npools;
    uint8_t *named;     // named[pool * named_cap + inst]: thread name written
    size_t named_cap;   // instances per pool in named
    uint64_t *open;     // open-addressing set of open span keys (0 = empty)
    size_t open_cap, open_n;
    uint64_t next_id;   // ids of spans written whole
};

static uint64_t span_key(int pool, uint32_t inst, const char *what, uint64_t id) {
    uint64_t h = kvf_hash64(id ^ ((uint64_t)inst << 40) ^ ((uint64_t)(unsigned)pool << 60));
    for (const char *p = what; *p; p++)
        h = kvf_hash64(h ^ (uint8_t)*p);
    return h ? h : 1;
}

static bool set_has(const sim_trace *t, uint64_t k, size_t *slot) {
    size_t m = t->open_cap - 1, i = (size_t)k & m;
    while (t->open[i]) {
        if (t->open[i] == k) {
            *slot = i;
            return true;
        }
        i = (i + 1) & m;
    }
    *slot = i;
    return false;
}

static void set_add(sim_trace *t, uint64_t k) {
    if ((t->open_n + 1) * 2 > t->open_cap) {
        uint64_t *old = t->open;
        size_t oc = t->open_cap;
        t->open_cap = oc ? oc * 2 : 1024;
        t->open = kvf_calloc(t->open_cap, sizeof *t->open);
        t->open_n = 0;
        for (size_t i = 0; i < oc; i++)
            if (old[i]) set_add(t, old[i]);
        free(old);
    }
    size_t s;
    if (!set_has(t, k, &s)) {
        t->open[s] = k;
        t->open_n++;
    }
}

// Removes k (backward-shift deletion); false when it was not there.
static bool set_del(sim_trace *t, uint64_t k) {
    size_t s;
    if (!t->open_cap || !set_has(t, k, &s)) return false;
    size_t m = t->open_cap - 1, i = s, j = s;
    t->open[i] = 0;
    for (;;) {
        j = (j + 1) & m;
        if (!t->open[j]) break;
        size_t home = (size_t)t->open[j] & m;
        // move j back to i when its home is not cyclically in (i, j]
        if ((i <= j) ? (home <= i || home > j) : (home <= i && home > j)) {
            t->open[i] = t->open[j];
            t->open[j] = 0;
            i = j;
        }
    }
    t->open_n--;
    return true;
}

static bool in_window(const sim_trace *t, sim_time now) {
    double s = (double)now * 1e-9;
    return s >= t->from_s && !(t->to_s > 0 && s > t->to_s);
}

static const char *pool_name(const sim_trace *t, int pool) {
    return pool >= 0 && pool < t->npools ? t->pool[pool] : "pool";
}

static void sep(sim_trace *t) {
    fputs(t->events++ ? ",\n" : "", t->f);
}

kvf_status sim_trace_open(sim_trace **out, const char *path, double from_s, double to_s,
                          const char *const *pool_names, int npools, kvf_err *err) {
    *out = NULL;
    FILE *f = fopen(path, "w");
    if (!f) return kvf_fail(err, KVF_EIO, "%s: cannot write the timeline", path);
    sim_trace *t = kvf_calloc(1, sizeof *t);
    t->f = f;
    t->from_s = from_s;
    t->to_s = to_s;
    t->npools = npools < TRACE_POOLS_MAX ? npools : TRACE_POOLS_MAX;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
    for (int k = 0; k < t->npools; k++) {
        snprintf(t->pool[k], sizeof t->pool[k], "%s", pool_names[k]);
        sep(t);
        fprintf(f,
                "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"%s "
                "pool\"}}",
                k, t->pool[k]);
        sep(t);
        fprintf(f,
                "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,"
                "\"args\":{\"sort_index\":%d}}",
                k, k);
    }
    *out = t;
    return KVF_OK;
}

static void name_thread(sim_trace *t, int pool, uint32_t inst) {
    if (pool < 0 || pool >= t->npools) return;
    if (inst >= t->named_cap) {
        size_t cap = t->named_cap ? t->named_cap : 64;
        while (cap <= inst)
            cap *= 2;
        uint8_t *n = kvf_calloc((size_t)TRACE_POOLS_MAX * cap, 1);
        for (int p = 0; p < TRACE_POOLS_MAX && t->named; p++)
            memcpy(n + (size_t)p * cap, t->named + (size_t)p * t->named_cap, t->named_cap);
        free(t->named);
        t->named = n;
        t->named_cap = cap;
    }
    uint8_t *flag = &t->named[(size_t)pool * t->named_cap + inst];
    if (*flag) return;
    *flag = 1;
    sep(t);
    fprintf(t->f,
            "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,"
            "\"args\":{\"name\":\"%s %u compute\"}}",
            pool, inst, pool_name(t, pool), inst);
}

void sim_trace_step(sim_trace *t, sim_time now, sim_time dur_ns, int pool, uint32_t inst,
                    const char *what, uint32_t batch, uint64_t tokens, double flops, double bytes) {
    if (!t || !in_window(t, now)) return;
    name_thread(t, pool, inst);
    sep(t);
    fprintf(t->f,
            "{\"name\":\"%s\",\"cat\":\"step\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
            "\"pid\":%d,\"tid\":%u,\"args\":{\"batch\":%u,\"tokens\":%llu,\"flops\":%.4g,"
            "\"bytes\":%.4g}}",
            what, (double)now * 1e-3, (double)dur_ns * 1e-3, pool, inst, batch,
            (unsigned long long)tokens, flops, bytes);
}

static const char *cat_of(const char *what) {
    return strstr(what, "KV") ? "kv_transfer" : "storage";
}

static void span(sim_trace *t, char ph, sim_time now, int pool, uint32_t inst, const char *what,
                 uint64_t id, double bytes) {
    sep(t);
    fprintf(t->f,
            "{\"name\":\"%s %u %s\",\"cat\":\"%s\",\"ph\":\"%c\",\"id\":\"0x%llx\",\"ts\":%.3f,"
            "\"pid\":%d,\"tid\":%u",
            pool_name(t, pool), inst, what, cat_of(what), ph, (unsigned long long)id,
            (double)now * 1e-3, pool, inst);
    if (ph == 'b')
        fprintf(t->f, ",\"args\":{\"bytes\":%.6g}}", bytes);
    else
        fputs("}", t->f);
}

void sim_trace_flow_begin(sim_trace *t, sim_time now, int pool, uint32_t inst, const char *what,
                          uint64_t id, double bytes) {
    if (!t || !in_window(t, now)) return;
    set_add(t, span_key(pool, inst, what, id));
    span(t, 'b', now, pool, inst, what, id, bytes);
}

void sim_trace_flow_end(sim_trace *t, sim_time now, int pool, uint32_t inst, const char *what,
                        uint64_t id) {
    if (!t || !set_del(t, span_key(pool, inst, what, id))) return;
    span(t, 'e', now, pool, inst, what, id, 0);
}

void sim_trace_flow(sim_trace *t, sim_time start, sim_time end, int pool, uint32_t inst,
                    const char *what, double bytes) {
    if (!t || !in_window(t, start)) return;
    uint64_t id = (1ull << 63) | t->next_id++;
    span(t, 'b', start, pool, inst, what, id, bytes);
    span(t, 'e', end, pool, inst, what, id, 0);
}

void sim_trace_counter(sim_trace *t, sim_time now, int pool, uint32_t inst, const char *what,
                       double v) {
    if (!t || !in_window(t, now)) return;
    sep(t);
    fprintf(t->f,
            "{\"name\":\"%s %u %s\",\"cat\":\"queue\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":%d,"
            "\"args\":{\"queued\":%.6g}}",
            pool_name(t, pool), inst, what, (double)now * 1e-3, pool, v);
}

kvf_status sim_trace_close(sim_trace *t, kvf_err *err) {
    if (!t) return KVF_OK;
    if (!t->events) fputs("{\"name\":\"empty\",\"ph\":\"i\",\"ts\":0,\"pid\":0}", t->f);
    fputs("\n]}\n", t->f);
    bool bad = ferror(t->f) != 0;
    bad |= fclose(t->f) != 0;
    free(t->named);
    free(t->open);
    free(t);
    return bad ? kvf_fail(err, KVF_EIO, "trace: write failed") : KVF_OK;
}
