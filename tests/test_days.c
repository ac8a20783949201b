// tests/test_days.c -- the generator's days mode (returning sessions over days, trc.h): hourly
// arrival counts follow the configured daily and weekly rhythm, each class's return times
// follow its configured distribution (median, probability), a return resends its session's
// prefix, runs are deterministic by seed, and the scenario keys are range-checked.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "helpers/kvt.h"
#include "trc.h"

typedef struct row {
    double t;   // s
    uint64_t session;
    uint8_t cls, flags;
    uint32_t nb;
    uint64_t head;     // hash of all block ids
    uint64_t prefix;   // hash of the ids of the previous request of the session (its length)
    bool prefix_ok;    // this request's first ids equal the previous request's ids
} row;

typedef struct rows {
    row *v;
    size_t n, cap;
    uint64_t digest;   // every field of every request
} rows;

static uint64_t hash_ids(const uint64_t *b, uint32_t n) {
    uint64_t h = 0x9e37;
    for (uint32_t i = 0; i < n; i++)
        h = kvf_hash_combine(h, b[i]);
    return h;
}

// Runs the generator; per session, remembers the last request's block hash and count, so each
// row knows whether it extends the previous request of its session.
static void collect(const trc_gen_options *g, rows *out) {
    memset(out, 0, sizeof *out);
    trc_reader *r;
    kvf_err err = {0};
    ck_assert_msg(!trc_gen_open(&r, g, NULL, &err), "%s", err.msg);
    enum { SLOTS = 1 << 20 };
    struct {
        uint64_t s, h;
        uint32_t nb;
    } *last = calloc(SLOTS, sizeof *last);
    ck_assert(last);
    trc_request q;
    int rc;
    out->digest = 1;
    while ((rc = trc_reader_next(r, &q, &err)) == 1) {
        if (out->n == out->cap) {
            out->cap = out->cap ? 2 * out->cap : 4096;
            out->v = realloc(out->v, out->cap * sizeof *out->v);
            ck_assert(out->v);
        }
        row *w = &out->v[out->n++];
        w->t = (double)q.arrival_ns / 1e9;
        w->session = q.session;
        w->cls = q.cls;
        w->flags = q.flags;
        w->nb = q.n_blocks;
        w->head = hash_ids(q.blocks, q.n_blocks);
        size_t k = q.session & (SLOTS - 1);
        while (last[k].s && last[k].s != q.session)
            k = (k + 1) & (SLOTS - 1);
        w->prefix_ok = false;
        if (last[k].s) {
            w->prefix_ok = last[k].nb <= q.n_blocks && hash_ids(q.blocks, last[k].nb) == last[k].h;
            w->prefix = last[k].h;
        }
        last[k].s = q.session;
        last[k].h = w->head;
        last[k].nb = q.n_blocks;
        uint64_t f[] = {(uint64_t)q.arrival_ns,
                        q.input_tokens,
                        q.output_tokens,
                        q.cls,
                        q.flags,
                        q.session,
                        q.turn,
                        (uint64_t)q.prev_id,
                        (uint64_t)q.think_ns,
                        w->head};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
            out->digest = kvf_hash_combine(out->digest, f[i]);
    }
    ck_assert_msg(rc == 0, "%s", err.msg);
    trc_reader_close(r);
    free(last);
}

// The rhythm as scenarios/README.md states it (written out again here, not taken from the
// generator): 1 + A cos(2 pi (hour - peak) / 24), times weekend_ratio on Saturday and Sunday.
static double rhythm(const trc_gen_options *g, double t) {
    double day = floor(t / 86400), hour = (t - day * 86400) / 3600;
    int wd = (int)(((long)day + g->start_weekday) % 7);
    return (1 + g->diurnal_amplitude * cos(2 * M_PI * (hour - g->peak_hour) / 24)) *
           (wd >= 5 ? g->weekend_ratio : 1);
}

static double corr(const double *a, const double *b, size_t n) {
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; i++)
        ma += a[i] / n, mb += b[i] / n;
    for (size_t i = 0; i < n; i++) {
        sab += (a[i] - ma) * (b[i] - mb);
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
    }
    return sab / sqrt(saa * sbb);
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_session_time(const void *a, const void *b) {
    const row *x = a, *y = b;
    if (x->session != y->session) return x->session < y->session ? -1 : 1;
    return (x->t > y->t) - (x->t < y->t);
}

// Two weeks of mixed traffic: hourly counts against the configured rhythm, the weekend dip,
// and the mean rate (returns included) against rate_rps.
START_TEST(test_days_hourly_counts_follow_rhythm) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.profile = TRC_GEN_MIXED;
    g.days = 14;
    g.rate_rps = 0.3;
    g.diurnal_amplitude = 0.6;
    g.peak_hour = 15;
    g.weekend_ratio = 0.5;
    g.start_weekday = 2;   // Wednesday
    rows r;
    collect(&g, &r);
    enum { H = 14 * 24 };
    static double cnt[H], prof[H];
    memset(cnt, 0, sizeof cnt);
    for (size_t i = 0; i < r.n; i++) {
        int h = (int)(r.v[i].t / 3600);
        ck_assert(h >= 0 && h < H);
        cnt[h]++;
    }
    for (int h = 0; h < H; h++)
        prof[h] = rhythm(&g, h * 3600.0 + 1800);
    double c = corr(cnt, prof, H);
    double wkd = 0, wke = 0;
    int nwkd = 0, nwke = 0;
    for (int h = 0; h < H; h++)
        if ((h / 24 + g.start_weekday) % 7 >= 5)
            wke += cnt[h], nwke++;
        else
            wkd += cnt[h], nwkd++;
    double ratio = (wke / nwke) / (wkd / nwkd);
    double rate = (double)r.n / (14 * 86400.0);
    fprintf(stderr,
            "days: %zu requests, hourly counts vs rhythm r = %.3f, weekend/weekday %.3f "
            "(configured %.2f), mean rate %.3f/s (configured %.2f)\n",
            r.n, c, ratio, g.weekend_ratio, rate, g.rate_rps);
    ck_assert_msg(c >= 0.9, "hourly counts correlate with the rhythm at only %.3f", c);
    ck_assert_msg(fabs(ratio - g.weekend_ratio) <= 0.1, "weekend ratio %.3f", ratio);
    ck_assert_msg(fabs(rate / g.rate_rps - 1) <= 0.1, "mean rate %.3f/s", rate);
    free(r.v);
}
END_TEST

// Forty days, returns counted from visits that end in the first twenty (so returns up to
// twenty days later are seen): per class, the median return time within 10 % of the configured
// one and the share of visits that return within 0.05 of p.
START_TEST(test_days_returns_follow_distribution) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.profile = TRC_GEN_MIXED;
    g.days = 40;
    g.rate_rps = 0.04;
    g.ret[TRC_GEN_CHATBOT] = (trc_gen_return){0.5, 12, 1.0};
    g.ret[TRC_GEN_AGENT] = (trc_gen_return){0.6, 3, 1.2};
    g.ret[TRC_GEN_CODING] = (trc_gen_return){0.75, 30, 0.8};
    rows r;
    collect(&g, &r);
    qsort(r.v, r.n, sizeof *r.v, cmp_session_time);
    static const uint8_t cls[3] = {TRC_CLASS_CHATBOT, TRC_CLASS_AGENT, TRC_CLASS_CODING};
    for (int k = 0; k < 3; k++) {
        double *gap = malloc(r.n * sizeof *gap);
        size_t ng = 0, visits = 0, returned = 0;
        for (size_t i = 0; i < r.n; i++) {
            const row *w = &r.v[i];
            if (w->cls != cls[k]) continue;
            bool last_of_visit = i + 1 == r.n || r.v[i + 1].session != w->session ||
                                 (r.v[i + 1].flags & TRC_F_RETURN);
            if (!last_of_visit || w->t >= 20 * 86400.0) continue;
            visits++;
            if (i + 1 < r.n && r.v[i + 1].session == w->session) {
                returned++;
                gap[ng++] = (r.v[i + 1].t - w->t) / 3600;
            }
        }
        qsort(gap, ng, sizeof *gap, cmp_dbl);
        double med = ng ? (ng % 2 ? gap[ng / 2] : 0.5 * (gap[ng / 2 - 1] + gap[ng / 2])) : 0;
        double share = visits ? (double)returned / visits : 0;
        fprintf(stderr,
                "days: %s: %zu returns of %zu visits (%.3f, p %.2f), median %.2f h "
                "(configured %.1f h)\n",
                trc_class_name(cls[k]), returned, visits, share, g.ret[k].p, med,
                g.ret[k].median_h);
        ck_assert_msg(ng >= 300, "%s: only %zu returns", trc_class_name(cls[k]), ng);
        ck_assert_msg(fabs(med / g.ret[k].median_h - 1) <= 0.10, "%s: median return %.2f h",
                      trc_class_name(cls[k]), med);
        ck_assert_msg(fabs(share - g.ret[k].p) <= 0.05, "%s: %.3f of visits return",
                      trc_class_name(cls[k]), share);
        free(gap);
    }
    free(r.v);
}
END_TEST

// A return resends the session's history: its first blocks are the previous request's blocks,
// unless the context overflowed and a new conversation began (rare with these lengths).
START_TEST(test_days_return_reuses_prefix) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.profile = TRC_GEN_MIXED;
    g.days = 3;
    g.rate_rps = 0.2;
    rows r;
    collect(&g, &r);
    size_t ret = 0, ok = 0, cont = 0, cont_ok = 0;
    for (size_t i = 0; i < r.n; i++) {
        const row *w = &r.v[i];
        if (w->flags & TRC_F_RETURN) {
            if (w->prefix || w->prefix_ok) ret++, ok += w->prefix_ok;
        } else if (w->prefix || w->prefix_ok)
            cont++, cont_ok += w->prefix_ok;
    }
    fprintf(stderr, "days: %zu returns, %zu extend the previous request; later turns %zu/%zu\n",
            ret, ok, cont_ok, cont);
    ck_assert_msg(ret >= 200, "only %zu returns seen", ret);
    ck_assert_msg(ok >= 0.95 * ret, "%zu of %zu returns resend their prefix", ok, ret);
    ck_assert_msg(cont_ok >= 0.95 * cont, "%zu of %zu turns extend their prefix", cont_ok, cont);
    free(r.v);
}
END_TEST

// workload.rate_rps on days-mode traffic sets the generator's rate (the day stays 24 h).
START_TEST(test_days_rate_keeps_the_clock) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.profile = TRC_GEN_CHATBOT;
    g.days = 2;
    g.rate_rps = 0.1;
    trc_options o;
    trc_options_default(&o);
    o.rate_rps = 0.3;
    trc_reader *r;
    kvf_err err = {0};
    ck_assert_msg(!trc_gen_open(&r, &g, &o, &err), "%s", err.msg);
    trc_request q;
    size_t n = 0;
    double last = 0;
    while (trc_reader_next(r, &q, &err) == 1)
        n++, last = (double)q.arrival_ns / 1e9;
    trc_reader_close(r);
    double rate = n / (2 * 86400.0);
    fprintf(stderr, "days: rate_rps 0.3 over 0.1: %zu requests, %.3f/s, last at %.0f s\n", n, rate,
            last);
    ck_assert_msg(last > 1.9 * 86400 && last <= 2 * 86400, "last request at %.0f s", last);
    ck_assert_msg(fabs(rate / 0.3 - 1) <= 0.15, "rate %.3f/s", rate);
}
END_TEST

START_TEST(test_days_deterministic_by_seed) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    g.profile = TRC_GEN_MIXED;
    g.days = 1;
    g.rate_rps = 0.2;
    g.closed_loop = true;
    rows a, b, c;
    collect(&g, &a);
    collect(&g, &b);
    g.seed = 2;
    collect(&g, &c);
    ck_assert_uint_eq(a.n, b.n);
    ck_assert_msg(a.digest == b.digest, "same seed, different traces");
    ck_assert_msg(a.digest != c.digest, "seeds 1 and 2 gave the same trace");
    free(a.v), free(b.v), free(c.v);
}
END_TEST

// Out-of-range keys: exit 2 naming the key.
START_TEST(test_days_keys_range_checked) {
    static const char *bad[][2] = {
        {"workload.generate.diurnal_amplitude=1.2", "workload.generate.diurnal_amplitude"},
        {"workload.generate.peak_hour=24", "workload.generate.peak_hour"},
        {"workload.generate.weekend_ratio=0", "workload.generate.weekend_ratio"},
        {"workload.generate.start_weekday=7", "workload.generate.start_weekday"},
        {"workload.generate.days=-1", "workload.generate.days"},
        {"workload.generate.return.agent.p=1", "workload.generate.return.agent.p"},
        {"workload.generate.return.coding.median_h=0", "workload.generate.return.coding.median_h"},
        {"workload.generate.return.chatbot.sigma=9", "workload.generate.return.chatbot.sigma"},
        {"workload.generate.return.batch.p=0.5", "workload.generate.return.batch.p"},
        {"workload.generate.mean_turns=0.5", "workload.generate.mean_turns"},
        {"workload.time_scale=2", "workload.time_scale"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = kvt_sh("%s run scenarios/fleet-days.yaml --set %s --no-report -o /tmp/kvf_days_x",
                        kvt_bin(), bad[i][0]);
        ck_assert_msg(rc == 2, "--set %s: exit %d (want 2): %s", bad[i][0], rc, kvt_err);
        ck_assert_msg(strstr(kvt_err, bad[i][1]), "--set %s: message does not name the key: %s",
                      bad[i][0], kvt_err);
    }
}
END_TEST

// Two days of returning sessions through a store that keeps every class 4 hours: the store
// grows while the run is younger than the retention, then holds what a day's cycle brings and
// no more (the same hour of day gives the same occupancy on both days), and the run reports
// per class what it wrote, held and needed, the economics billing the measured need.
static double hour_mean(sqlite3 *h, const char *metric, int hour) {
    char q[256];
    snprintf(q, sizeof q,
             "select avg(value) from timeseries where metric = '%s' and t_s >= %d and t_s < %d",
             metric, hour * 3600, (hour + 1) * 3600);
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(h, q, -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    double v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return v;
}

START_TEST(test_days_store_levels_off_at_retention) {
    const char *sets[] = {"workload.generate.days=2", "workload.generate.rate_rps=0.1",
                          "kv_cache.ssd.retention.chatbot=4h", "kv_cache.ssd.retention.agent=4h",
                          "kv_cache.ssd.retention.coding=4h"};
    kvt_tmp_make("kvf_days_store");
    json_t *s = kvt_run("fleet-days.yaml", NULL, sets, 5, kvt_tmp);
    char db[128];
    snprintf(db, sizeof db, "%s/results.db", kvt_tmp);
    sqlite3 *h = NULL;
    ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
    // filling: the first hours hold less than the same hours a day later
    double first = hour_mean(h, "kv_store_bytes", 1), later = hour_mean(h, "kv_store_bytes", 25);
    printf("store: hour 1 %.1f GB, hour 25 %.1f GB\n", first / 1e9, later / 1e9);
    ck_assert_msg(first < 0.8 * later, "hour 1 %.3g B not below hour 25 %.3g B", first, later);
    // levelled: past the retention, day 2 holds what day 1 held, on the day's mean and at its
    // busiest hour (hour by hour it is noisy: an hour carries few sessions at this rate)
    double d1 = 0, d2 = 0;
    for (int hr = 4; hr < 24; hr++) {
        d1 += hour_mean(h, "kv_store_bytes", hr) / 20;
        d2 += hour_mean(h, "kv_store_bytes", hr + 24) / 20;
    }
    printf("store: mean of hours 4-23 %.1f GB on day 1, %.1f GB on day 2\n", d1 / 1e9, d2 / 1e9);
    ck_assert_msg(fabs(d2 - d1) <= 0.1 * d1, "day 1 %.3g B, day 2 %.3g B", d1, d2);
    double p1 = 0, p2 = 0;
    for (int hr = 4; hr < 24; hr++) {
        p1 = fmax(p1, hour_mean(h, "kv_store_bytes", hr));
        p2 = fmax(p2, hour_mean(h, "kv_store_bytes", hr + 24));
    }
    printf("store: busiest hour %.1f GB on day 1, %.1f GB on day 2\n", p1 / 1e9, p2 / 1e9);
    ck_assert_msg(fabs(p2 - p1) <= 0.15 * p1, "busiest hour: day 1 %.3g B, day 2 %.3g B", p1, p2);
    sqlite3_close(h);
    // by class, from the run: every class wrote, held, and has a steady state under 4 h
    json_t *bc = json_object_get(json_object_get(s, "cache"), "by_class");
    ck_assert_ptr_nonnull(bc);
    const char *cls[] = {"chatbot", "agent", "coding"};
    double need = 0;
    for (int k = 0; k < 3; k++) {
        json_t *o = json_object_get(bc, cls[k]);
        ck_assert_msg(o != NULL, "no %s in cache.by_class", cls[k]);
        double hr = json_number_value(json_object_get(o, "hit_rate"));
        double sp = json_number_value(json_object_get(o, "stored_bytes_steady_peak"));
        double pk = json_number_value(json_object_get(o, "stored_bytes_peak"));
        double wr = json_number_value(json_object_get(o, "store_write_Bps"));
        printf("%s: hit rate %.3f, writes %.1f MB/s, steady peak %.1f GB, peak %.1f GB\n", cls[k],
               hr, wr / 1e6, sp / 1e9, pk / 1e9);
        ck_assert_msg(hr > 0 && hr < 1 && wr > 0 && sp > 0 && sp <= pk,
                      "%s: hit %.3f writes %g steady %g peak %g", cls[k], hr, wr, sp, pk);
        // a store kept 4 h cannot hold more than 4 h of the class's writes at their peak rate;
        // it holds at least a tenth of what 4 h at the mean rate write
        ck_assert_msg(sp >= 0.1 * wr * 4 * 3600, "%s: steady %g B against writes %g B/s", cls[k],
                      sp, wr);
        need += sp;
    }
    json_t *ec = json_object_get(s, "economics");
    const char *basis = json_string_value(json_object_get(ec, "ssd_basis"));
    ck_assert_msg(basis && strstr(basis, "measured"), "ssd basis '%s'", basis ? basis : "(none)");
    double billed = json_number_value(json_object_get(ec, "ssd_tb_billed")) * 1e12;
    ck_assert_msg(fabs(billed - need) <= 1e-6 * need, "billed %.6g B, classes need %.6g B", billed,
                  need);
    json_decref(s);
    kvt_tmp_remove();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("days");
    TCase *t = tcase_create("days");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_days_hourly_counts_follow_rhythm);
    tcase_add_test(t, test_days_returns_follow_distribution);
    tcase_add_test(t, test_days_return_reuses_prefix);
    tcase_add_test(t, test_days_rate_keeps_the_clock);
    tcase_add_test(t, test_days_deterministic_by_seed);
    tcase_add_test(t, test_days_keys_range_checked);
    tcase_add_test(t, test_days_store_levels_off_at_retention);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
