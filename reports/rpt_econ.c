// reports/rpt_econ.c -- cost, revenue, margin, payback and their sensitivities.
//
// The model is written out in reports/rpt.h above rpt_econ_config. A day's figures place the
// run's traffic in a day by the day profile (flat unless economics.day_profile says otherwise):
// the day's tokens are the run's scaled by 86400 / E (E = the run's length weighted by the
// profile), and the off-peak share is the profile's, so a short run billed at 00:00 and at
// 09:00 gives the same day. A run of a day or more without a profile keeps its own schedule
// (requests bucketed peak/off-peak by arrival, rpt_econ_input_add).
//
// Sensitivity tables are closed-form re-evaluations of the same model with one input moved;
// no run is repeated. Margin against the hit rate is a ratio of two functions linear in the
// hit rate, so it is monotone in it: rising when the share of cost saved per unit of hit rate
// exceeds the share of revenue lost to the hit discount, falling otherwise.
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpt.h"

#define DAY_S 86400.0
#define HOURS_PER_YEAR 8760.0
#define DAYS_PER_MONTH (365.0 / 12.0)

void rpt_econ_config_default(rpt_econ_config *c) {
    memset(c, 0, sizeof *c);
    c->own = false;
    c->gpu_hour_usd = 2.0;
    c->capex_per_gpu_usd = 30000;
    c->depreciation_years = 4;
    c->power_w_per_gpu = 1000;
    c->host_w_per_gpu = 0;
    c->kwh_usd = 0.08;
    c->pue = 1.3;
    c->ssd_tb_month_usd = 10;
    c->dram_tb_month_usd = 0;
    c->network_usd_per_gpu_hour = 0;
    c->offpeak_on = true;
    c->offpeak_start_s = 16 * 3600 + 30 * 60;
    c->offpeak_end_s = 30 * 60;
    c->offpeak_price_factor = 0.5;
    c->prices = (rpt_econ_prices){0.028, 0.28, 0.42};
    c->n_cls = 0;
    c->free_share = 0;
    c->trace_start_s = 0;
    c->hit_cost_ratio = 0.05;
    for (int h = 0; h < 24; h++)
        c->day_profile[h] = 1.0 / 24;
    c->day_profile_set = false;
    for (int p = 0; p < RPT_POOL_N; p++)
        c->pool_gpu_hour_usd[p] = c->pool_capex_usd[p] = -1;
}

// ---- parsing ----------------------------------------------------------------------------

static bool parse_num(const char *v, double lo, double hi, double *out) {
    if (!v || !*v) return false;
    char *end;
    double x = strtod(v, &end);
    while (*end == ' ')
        end++;
    if (*end || !isfinite(x) || x < lo || x > hi) return false;
    *out = x;
    return true;
}

// "HH:MM" or "HH:MM:SS", 00:00 .. 24:00 -> seconds after midnight.
static bool parse_tod(const char *v, double *out) {
    if (!v) return false;
    int h = -1, m = -1, s = 0, n = 0;
    if (sscanf(v, "%d:%d%n", &h, &m, &n) != 2) return false;
    if (v[n] == ':') {
        int n2 = 0;
        if (sscanf(v + n + 1, "%d%n", &s, &n2) != 1) return false;
        n += 1 + n2;
    }
    if (v[n] != '\0' || h < 0 || h > 24 || m < 0 || m > 59 || s < 0 || s > 59) return false;
    double t = h * 3600.0 + m * 60.0 + s;
    if (t > DAY_S) return false;
    *out = t;
    return true;
}

static bool is_null(const char *v) {
    return v && (!strcmp(v, "null") || !strcmp(v, "~") || !strcmp(v, "none") || !strcmp(v, "off") ||
                 !strcmp(v, "false"));
}

static double *price_field(rpt_econ_prices *p, const char *f) {
    if (!strcmp(f, "input_hit")) return &p->input_hit;
    if (!strcmp(f, "input_miss")) return &p->input_miss;
    if (!strcmp(f, "output")) return &p->output;
    return NULL;
}

static kvf_status bad_value(kvf_err *err, const char *key, const char *value, const char *want) {
    return kvf_fail(err, KVF_EINVAL, "economics.%s: bad value '%s' (want %s)", key,
                    value ? value : "(none)", want);
}

static const char *const POOL_KEYS[RPT_POOL_N] = {"vision", "prefill", "decode", "colocated"};

// economics.pools.POOL.gpu_hour_usd | capex_per_gpu_usd.
static kvf_status set_pool_price(rpt_econ_config *c, const char *key, const char *value,
                                 kvf_err *err) {
    const char *pool = key + 6, *dot = strchr(pool, '.');
    int p = -1;
    for (int i = 0; dot && i < RPT_POOL_N; i++)
        if ((size_t)(dot - pool) == strlen(POOL_KEYS[i]) &&
            !strncmp(pool, POOL_KEYS[i], dot - pool))
            p = i;
    if (p < 0)
        return kvf_fail(err, KVF_EINVAL,
                        "economics.%s: unknown pool (pools: vision, prefill, decode, colocated)",
                        key);
    double *dst = !strcmp(dot + 1, "gpu_hour_usd")        ? &c->pool_gpu_hour_usd[p]
                  : !strcmp(dot + 1, "capex_per_gpu_usd") ? &c->pool_capex_usd[p]
                                                          : NULL;
    if (!dst)
        return kvf_fail(err, KVF_EINVAL,
                        "economics.%s: unknown key (a pool has gpu_hour_usd, capex_per_gpu_usd)",
                        key);
    double hi = dst == &c->pool_gpu_hour_usd[p] ? 1e9 : 1e12;
    char want[64];
    snprintf(want, sizeof want, "a number in [0, %g]", hi);
    if (!parse_num(value, 0, hi, dst)) return bad_value(err, key, value, want);
    return KVF_OK;
}

bool rpt_econ_pool_priced(const rpt_econ_config *c, int pool) {
    return pool >= 0 && pool < RPT_POOL_N &&
           (c->pool_gpu_hour_usd[pool] >= 0 || c->pool_capex_usd[pool] >= 0);
}

// The numeric keys below `economics.`: where each goes and its range (set and written back).
static const struct econ_num {
    const char *key;
    size_t off;
    double lo, hi;
} econ_nums[] = {
    {"gpu_hour_usd", offsetof(rpt_econ_config, gpu_hour_usd), 0, 1e9},
    {"capex_per_gpu_usd", offsetof(rpt_econ_config, capex_per_gpu_usd), 0, 1e12},
    {"depreciation_years", offsetof(rpt_econ_config, depreciation_years), 1e-3, 100},
    {"power_w_per_gpu", offsetof(rpt_econ_config, power_w_per_gpu), 0, 1e6},
    {"host_w_per_gpu", offsetof(rpt_econ_config, host_w_per_gpu), 0, 1e5},
    {"kwh_usd", offsetof(rpt_econ_config, kwh_usd), 0, 1e3},
    {"pue", offsetof(rpt_econ_config, pue), 1, 10},
    {"ssd_tb_month_usd", offsetof(rpt_econ_config, ssd_tb_month_usd), 0, 1e9},
    {"dram_tb_month_usd", offsetof(rpt_econ_config, dram_tb_month_usd), 0, 1e9},
    {"network_usd_per_gpu_hour", offsetof(rpt_econ_config, network_usd_per_gpu_hour), 0, 1e9},
    {"offpeak.price_factor", offsetof(rpt_econ_config, offpeak_price_factor), 0, 1e3},
    {"free_share", offsetof(rpt_econ_config, free_share), 0, 1},
    {"hit_cost_ratio", offsetof(rpt_econ_config, hit_cost_ratio), 0, 1},
};
#define N_ECON_NUMS (sizeof econ_nums / sizeof econ_nums[0])

// economics.day_profile: "[s0, s1, ..., s23]" (a YAML flow sequence as text), or null for
// a flat day.
static kvf_status set_day_profile(rpt_econ_config *c, const char *key, const char *value,
                                  kvf_err *err) {
    if (is_null(value)) {
        for (int h = 0; h < 24; h++)
            c->day_profile[h] = 1.0 / 24;
        c->day_profile_set = false;
        return KVF_OK;
    }
    const char *want = "a list of 24 shares >= 0 (hours 00-23 UTC), not all 0";
    const char *q = value;
    while (q && *q == ' ')
        q++;
    if (!q || *q != '[') return bad_value(err, key, value, want);
    q++;
    double v[24], sum = 0;
    int n = 0;
    for (;;) {
        while (*q == ' ')
            q++;
        if (*q == ']' && n == 0) break;
        char *end;
        double x = strtod(q, &end);
        if (end == q || !isfinite(x) || x < 0 || x > 1e12 || n == 24)
            return bad_value(err, key, value, want);
        v[n++] = x;
        sum += x;
        q = end;
        while (*q == ' ')
            q++;
        if (*q == ',') {
            q++;
            continue;
        }
        if (*q == ']') break;
        return bad_value(err, key, value, want);
    }
    q++;
    while (*q == ' ')
        q++;
    if (*q || n != 24 || !(sum > 0)) return bad_value(err, key, value, want);
    for (int h = 0; h < 24; h++)
        c->day_profile[h] = v[h] / sum, c->day_profile_given[h] = v[h];
    c->day_profile_set = true;
    return KVF_OK;
}

// The request classes a trace names (traces/trc.h trc_class_name, in its order; reports/ does
// not link traces/; tests/test_outputs_safety.c sets a price for every trc_class_name): a
// price for any other class would never apply, so it is refused rather than kept.
static const char *const rpt_econ_class_names[] = {"chatbot", "agent", "coding",
                                                   "batch",   "other", NULL};
#define RPT_ECON_CLASS_LIST "chatbot, agent, coding, batch, other"

static bool known_class(const char *s, size_t n) {
    for (int i = 0; rpt_econ_class_names[i]; i++)
        if (strlen(rpt_econ_class_names[i]) == n && !strncmp(rpt_econ_class_names[i], s, n))
            return true;
    return false;
}

// economics.prices_per_mtok.FIELD or .CLASS.FIELD; KVF_ENOENT for a key that is none of them.
static kvf_status set_price(rpt_econ_config *c, const char *key, const char *value, kvf_err *err) {
    static const char pfx[] = "prices_per_mtok.";
    const char *rest = key + sizeof pfx - 1;
    const char *dot = strchr(rest, '.');
    double x;
    if (!dot) {
        double *f = price_field(&c->prices, rest);
        if (!f) return KVF_ENOENT;
        if (!parse_num(value, 0, 1e9, &x)) return bad_value(err, key, value, "a price >= 0");
        *f = x;
        return KVF_OK;
    }
    size_t n = (size_t)(dot - rest);
    if (n == 0 || n >= RPT_ECON_NAME_LEN) return KVF_ENOENT;
    if (!known_class(rest, n))
        return kvf_fail(err, KVF_EINVAL, "economics.%s: unknown class '%.*s' (classes: %s)", key,
                        (int)n, rest, RPT_ECON_CLASS_LIST);
    rpt_econ_prices probe = {0, 0, 0};
    if (!price_field(&probe, dot + 1)) return KVF_ENOENT;
    if (!parse_num(value, 0, 1e9, &x)) return bad_value(err, key, value, "a price >= 0");
    int k;
    for (k = 0; k < c->n_cls; k++)
        if (strlen(c->cls[k].cls) == n && !strncmp(c->cls[k].cls, rest, n)) break;
    if (k == c->n_cls) {
        if (c->n_cls == RPT_ECON_MAX_CLASSES)
            return kvf_fail(err, KVF_EINVAL, "economics.%s: more than %d classes with prices", key,
                            RPT_ECON_MAX_CLASSES);
        memcpy(c->cls[k].cls, rest, n);
        c->cls[k].cls[n] = '\0';
        c->cls[k].p = (rpt_econ_prices){NAN, NAN, NAN};
        c->n_cls++;
    }
    *price_field(&c->cls[k].p, dot + 1) = x;
    return KVF_OK;
}

kvf_status rpt_econ_config_set(rpt_econ_config *c, const char *key, const char *value,
                               kvf_err *err) {
    KVF_ASSERT(c && err);
    if (!key) return kvf_fail(err, KVF_EINVAL, "economics: empty key");
    for (size_t i = 0; i < N_ECON_NUMS; i++) {
        if (strcmp(key, econ_nums[i].key)) continue;
        double *dst = (double *)((char *)c + econ_nums[i].off);
        if (!strcmp(key, "gpu_hour_usd") && is_null(value)) {
            c->own = true;   // no rent price: the GPUs are owned
            return KVF_OK;
        }
        char want[96];
        snprintf(want, sizeof want, "a number in [%g, %g]", econ_nums[i].lo, econ_nums[i].hi);
        if (!parse_num(value, econ_nums[i].lo, econ_nums[i].hi, dst))
            return bad_value(err, key, value, want);
        if (!strcmp(key, "offpeak.price_factor")) c->offpeak_on = true;
        return KVF_OK;
    }
    if (!strcmp(key, "gpu_hour_usd_range")) {
        double lo, hi;
        char tail;
        if (!value || sscanf(value, " [ %lf , %lf ] %c", &lo, &hi, &tail) != 2 || !isfinite(lo) ||
            !isfinite(hi) || lo < 0 || hi < lo || hi > 1e9)
            return bad_value(err, key, value, "[low, high] USD per GPU-hour, 0 <= low <= high");
        c->gpu_hour_range[0] = lo;
        c->gpu_hour_range[1] = hi;
        return KVF_OK;
    }
    if (!strcmp(key, "day_profile")) return set_day_profile(c, key, value, err);
    if (!strncmp(key, "pools.", 6)) return set_pool_price(c, key, value, err);
    if (!strcmp(key, "cost_model")) {
        if (value && !strcmp(value, "rent"))
            c->own = false;
        else if (value && !strcmp(value, "own"))
            c->own = true;
        else
            return bad_value(err, key, value, "rent or own");
        return KVF_OK;
    }
    if (!strcmp(key, "offpeak")) {
        if (!is_null(value)) return bad_value(err, key, value, "a mapping, or null");
        c->offpeak_on = false;
        return KVF_OK;
    }
    if (!strcmp(key, "offpeak.start_utc") || !strcmp(key, "offpeak.end_utc") ||
        !strcmp(key, "trace_start_utc")) {
        double t;
        if (!parse_tod(value, &t)) return bad_value(err, key, value, "a UTC time \"HH:MM\"");
        if (!strcmp(key, "offpeak.start_utc")) {
            c->offpeak_start_s = t;
            c->offpeak_on = true;
        } else if (!strcmp(key, "offpeak.end_utc")) {
            c->offpeak_end_s = t;
            c->offpeak_on = true;
        } else {
            c->trace_start_s = t;
        }
        return KVF_OK;
    }
    if (!strncmp(key, "prices_per_mtok.", 16)) {
        kvf_status st = set_price(c, key, value, err);
        if (st != KVF_ENOENT) return st;
    }
    return kvf_fail(err, KVF_EINVAL, "economics.%s: unknown key", key);
}

bool rpt_econ_is_offpeak(const rpt_econ_config *c, double t_s) {
    if (!c->offpeak_on || c->offpeak_start_s == c->offpeak_end_s) return false;
    // a time within the first day is its own time of day (fmod's answer, without the call
    // every served request would pay)
    double x = c->trace_start_s + t_s;
    double tod = x >= 0 && x < DAY_S ? x : fmod(x, DAY_S);
    if (tod < 0) tod += DAY_S;
    if (c->offpeak_start_s < c->offpeak_end_s)
        return tod >= c->offpeak_start_s && tod < c->offpeak_end_s;
    return tod >= c->offpeak_start_s || tod < c->offpeak_end_s;   // wraps midnight
}

// ---- inputs -----------------------------------------------------------------------------

void rpt_econ_input_init(rpt_econ_input *in) {
    memset(in, 0, sizeof *in);
    for (int p = 0; p < RPT_POOL_N; p++)
        in->utilization[p] = NAN;
    in->colocated_input_share = NAN;
    in->board_w_per_gpu = NAN;
}

int rpt_econ_input_class(rpt_econ_input *in, const char *cls) {
    KVF_ASSERT(in);
    if (!cls) cls = "default";
    int k;
    for (k = 0; k < in->n_cls; k++)
        if (!strncmp(in->cls[k].cls, cls, RPT_ECON_NAME_LEN - 1)) break;
    if (k == in->n_cls) {
        if (in->n_cls == RPT_ECON_MAX_CLASSES) {
            k = RPT_ECON_MAX_CLASSES - 1;   // overflow goes to the last slot
            snprintf(in->cls[k].cls, RPT_ECON_NAME_LEN, "other");
        } else {
            snprintf(in->cls[k].cls, RPT_ECON_NAME_LEN, "%s", cls);
            in->n_cls++;
        }
    }
    return k;
}

void rpt_econ_input_add_to(rpt_econ_input *in, const rpt_econ_config *c, int k, double arrival_s,
                           double hit_tokens, double miss_tokens, double output_tokens) {
    KVF_ASSERT(in && c && k >= 0 && k < in->n_cls);
    int p = rpt_econ_is_offpeak(c, arrival_s) ? 1 : 0;
    in->cls[k].hit[p] += hit_tokens;
    in->cls[k].miss[p] += miss_tokens;
    in->cls[k].output[p] += output_tokens;
}

void rpt_econ_input_add(rpt_econ_input *in, const rpt_econ_config *c, const char *cls,
                        double arrival_s, double hit_tokens, double miss_tokens,
                        double output_tokens) {
    KVF_ASSERT(in && c);
    rpt_econ_input_add_to(in, c, rpt_econ_input_class(in, cls), arrival_s, hit_tokens, miss_tokens,
                          output_tokens);
}

// ---- the model --------------------------------------------------------------------------

static rpt_econ_prices class_prices(const rpt_econ_config *c, const char *cls) {
    rpt_econ_prices p = c->prices;
    for (int k = 0; k < c->n_cls; k++) {
        if (strcmp(c->cls[k].cls, cls)) continue;
        if (!isnan(c->cls[k].p.input_hit)) p.input_hit = c->cls[k].p.input_hit;
        if (!isnan(c->cls[k].p.input_miss)) p.input_miss = c->cls[k].p.input_miss;
        if (!isnan(c->cls[k].p.output)) p.output = c->cls[k].p.output;
    }
    return p;
}

// Seconds of [a, b) inside the off-peak window, for 0 <= a <= b <= 86400 (time of day).
static double window_overlap(const rpt_econ_config *c, double a, double b) {
    if (!c->offpeak_on || c->offpeak_start_s == c->offpeak_end_s) return 0.0;
    double s = c->offpeak_start_s, e = c->offpeak_end_s;
    if (s < e) return KVF_MAX(0.0, KVF_MIN(b, e) - KVF_MAX(a, s));
    return KVF_MAX(0.0, b - KVF_MAX(a, s)) + KVF_MAX(0.0, KVF_MIN(b, e) - a);   // wraps
}

// How the run's traffic is placed in a day: the day's tokens per run token, the off-peak
// share of the day's tokens, and what the two rest on.
typedef struct day_place {
    bool own_schedule;      // use the run's own peak/off-peak buckets
    double scale;           // day tokens / run tokens
    double offpeak_share;   // share of the day's tokens off-peak (profile modes)
    const char *basis;
} day_place;

double rpt_econ_day_weight_s(const rpt_econ_config *c, double simulated_s) {
    // E = integral over the run of 24 x share(hour), walked hour by hour from trace_start_utc
    double e = 0, t = 0, T = simulated_s;
    while (t < T) {
        double tod = fmod(c->trace_start_s + t, DAY_S);
        int h = (int)(tod / 3600.0);
        if (h > 23) h = 23;
        double step = KVF_MIN((h + 1) * 3600.0 - tod, T - t);
        if (step <= 0) step = KVF_MIN(1e-6, T - t);
        e += 24.0 * c->day_profile[h] * step;
        t += step;
    }
    return e;
}

static day_place place_in_day(const rpt_econ_config *c, const rpt_econ_input *in) {
    day_place d = {false, DAY_S / in->simulated_s, 0.0, "flat day profile"};
    if (!c->day_profile_set && in->simulated_s >= DAY_S) {
        d.own_schedule = true;
        d.basis = "the run's own schedule (a day or more)";
        return d;
    }
    if (c->day_profile_set) d.basis = "day_profile";
    // off-peak share of a day: each hour's share x the part of the hour inside the window
    for (int h = 0; h < 24; h++)
        d.offpeak_share +=
            c->day_profile[h] * window_overlap(c, h * 3600.0, (h + 1) * 3600.0) / 3600.0;
    double e = rpt_econ_day_weight_s(c, in->simulated_s);
    d.scale = e > 0 ? DAY_S / e : 0.0;
    if (!(e > 0)) d.basis = "day_profile (the run falls in hours with no traffic share)";
    return d;
}

// How the revenue is re-evaluated: traffic scale, forced hit rate (NaN = as observed),
// price factor.
typedef struct rev_case {
    double traffic;
    double hit_rate;
    double price_factor;
} rev_case;

typedef struct rev_out {
    double total, input, output;   // USD/day
    double by_class[RPT_ECON_MAX_CLASSES];
    double out_mtok_weighted;   // billable output Mtok/day x period factor
} rev_out;

static rev_out revenue(const rpt_econ_config *c, const rpt_econ_input *in, const day_place *dp,
                       rev_case rc) {
    rev_out r;
    memset(&r, 0, sizeof r);
    double day = dp->scale * rc.traffic;
    double bill = (1.0 - c->free_share) * rc.price_factor;
    double off_f = c->offpeak_on ? c->offpeak_price_factor : 1.0;
    for (int k = 0; k < in->n_cls; k++) {
        const rpt_econ_class_usage *u = &in->cls[k];
        rpt_econ_prices p = class_prices(c, u->cls);
        // per period: tokens and price factor; in profile modes both buckets are pooled and
        // billed at the day's mean factor
        double hit[2], miss[2], out[2], f[2];
        if (dp->own_schedule) {
            for (int per = 0; per < 2; per++) {
                hit[per] = u->hit[per];
                miss[per] = u->miss[per];
                out[per] = u->output[per];
            }
            f[0] = 1.0;
            f[1] = off_f;
        } else {
            hit[0] = u->hit[0] + u->hit[1];
            miss[0] = u->miss[0] + u->miss[1];
            out[0] = u->output[0] + u->output[1];
            hit[1] = miss[1] = out[1] = 0;
            f[0] = 1.0 - dp->offpeak_share + dp->offpeak_share * off_f;
            f[1] = 0;
        }
        double cls_rev = 0;
        for (int per = 0; per < 2; per++) {
            double h = hit[per], m = miss[per];
            if (!isnan(rc.hit_rate)) {
                double t = h + m;
                h = rc.hit_rate * t;
                m = t - h;
            }
            double ri = f[per] * bill * (h * p.input_hit + m * p.input_miss) / 1e6 * day;
            double ro = f[per] * bill * out[per] * p.output / 1e6 * day;
            r.input += ri;
            r.output += ro;
            cls_rev += ri + ro;
            r.out_mtok_weighted += f[per] * (1.0 - c->free_share) * out[per] / 1e6 * day;
        }
        r.by_class[k] = cls_rev;
    }
    r.total = r.input + r.output;
    return r;
}

// Power per GPU (W, before PUE): the run's board power and the host share, else the
// configured wall power.
static double power_w(const rpt_econ_config *c, const rpt_econ_input *in) {
    return isfinite(in->board_w_per_gpu) && in->board_w_per_gpu > 0
               ? in->board_w_per_gpu + c->host_w_per_gpu
               : c->power_w_per_gpu;
}

// Electricity per GPU-hour as if owned (USD).
static double power_per_gpu_hour(const rpt_econ_config *c, const rpt_econ_input *in) {
    return power_w(c, in) / 1000.0 * c->pue * c->kwh_usd;
}

// A pool's GPU price per GPU-hour: rent, or (owned) its purchase price depreciated.
static double pool_per_gpu_h(const rpt_econ_config *c, int p) {
    if (c->own)
        return (c->pool_capex_usd[p] >= 0 ? c->pool_capex_usd[p] : c->capex_per_gpu_usd) /
               (c->depreciation_years * HOURS_PER_YEAR);
    return c->pool_gpu_hour_usd[p] >= 0 ? c->pool_gpu_hour_usd[p] : c->gpu_hour_usd;
}

// The GPU price per GPU-hour of the run: each pool's by its share of the GPU-hours (the
// scenario-wide price when no pool has its own, or the run has no GPU-hours).
static double gpu_price_per_h(const rpt_econ_config *c, const rpt_econ_input *in) {
    double gh = 0, cost = 0;
    for (int p = 0; p < RPT_POOL_N; p++) {
        gh += in->gpu_hours[p];
        cost += in->gpu_hours[p] * pool_per_gpu_h(c, p);
    }
    if (gh > 0) return cost / gh;
    return c->own ? c->capex_per_gpu_usd / (c->depreciation_years * HOURS_PER_YEAR)
                  : c->gpu_hour_usd;
}

// Purchase price of the run's GPUs, each pool at its own.
static double capex_of(const rpt_econ_config *c, const rpt_econ_input *in) {
    double s = 0;
    for (int p = 0; p < RPT_POOL_N; p++)
        s +=
            in->gpus[p] * (c->pool_capex_usd[p] >= 0 ? c->pool_capex_usd[p] : c->capex_per_gpu_usd);
    return s;
}

// Cost parts per day for gpu_h_day GPU-hours a day (split between the pools as the run's
// GPU-hours are) and ssd_tb of SSD billed.
static void cost_parts(const rpt_econ_config *c, const rpt_econ_input *in, double ssd_tb,
                       double gpu_h_day, double parts[RPT_COST_N]) {
    parts[RPT_COST_GPU] = gpu_price_per_h(c, in) * gpu_h_day;
    parts[RPT_COST_POWER] = c->own ? power_per_gpu_hour(c, in) * gpu_h_day : 0.0;
    parts[RPT_COST_SSD] = ssd_tb * c->ssd_tb_month_usd / DAYS_PER_MONTH;
    parts[RPT_COST_DRAM] = in->dram_tb * c->dram_tb_month_usd / DAYS_PER_MONTH;
    parts[RPT_COST_NETWORK] = c->network_usd_per_gpu_hour * gpu_h_day;
}

static double sum_parts(const double parts[RPT_COST_N]) {
    double s = 0;
    for (int i = 0; i < RPT_COST_N; i++)
        s += parts[i];
    return s;
}

static double payback(const rpt_econ_config *c, const rpt_econ_input *in, double ssd_tb,
                      double gpus, double gpu_h_day, double rev_day, double *opex_out) {
    double opex = power_per_gpu_hour(c, in) * gpu_h_day +
                  ssd_tb * c->ssd_tb_month_usd / DAYS_PER_MONTH +
                  in->dram_tb * c->dram_tb_month_usd / DAYS_PER_MONTH +
                  c->network_usd_per_gpu_hour * gpu_h_day;
    if (opex_out) *opex_out = opex;
    double all = 0;
    for (int p = 0; p < RPT_POOL_N; p++)
        all += in->gpus[p];
    // the run's GPUs at their pools' prices; another count (a sensitivity row) at their mean
    double capex = all > 0 ? capex_of(c, in) * gpus / all : c->capex_per_gpu_usd * gpus;
    if (capex <= 0) return 0.0;
    double gain = rev_day - opex;
    return gain > 0 ? capex / gain : INFINITY;
}

// The SSD to bill (TB) and what it rests on; fills by_class (TB, NaN where not by retention).
static double ssd_billed(const rpt_econ_input *in, const char **basis,
                         double by_class[RPT_ECON_MAX_CLASSES]) {
    for (int k = 0; k < RPT_ECON_MAX_CLASSES; k++)
        by_class[k] = NAN;
    double miss = 0;
    for (int k = 0; k < in->n_cls; k++)
        miss += in->cls[k].miss[0] + in->cls[k].miss[1];
    double steady = 0, forever_share = 0;
    bool any = false;
    int measured = 0, ret_classes = 0;
    for (int k = 0; k < in->n_cls; k++) {
        double share = miss > 0 ? (in->cls[k].miss[0] + in->cls[k].miss[1]) / miss : 0;
        if (in->cls[k].retention_s > 0) {
            // measured where the run outlasted the retention, else the class's write rate
            // (counted, or the store's split by misses) times its retention
            double wbps = in->cls[k].write_known ? in->cls[k].write_Bps : in->ssd_write_Bps * share;
            by_class[k] = in->cls[k].steady_known ? in->cls[k].steady_tb
                                                  : wbps * in->cls[k].retention_s / 1e12;
            measured += in->cls[k].steady_known;
            ret_classes++;
            steady += by_class[k];
            any = true;
        } else {
            forever_share += share;
        }
    }
    if (!in->ssd_unbounded) {
        *basis = "capacity";
        return in->ssd_tb;
    }
    double tb = steady + forever_share * in->ssd_tb;
    if (!any || tb < in->ssd_tb) {
        *basis = "peak stored during the run";
        return in->ssd_tb;
    }
    *basis = measured == ret_classes ? "retention steady state measured in the run"
             : measured ? "retention steady state (measured where the run outlasted the retention, "
                          "else class write rate x retention)"
                        : "retention steady state (class write rate x retention)";
    return tb;
}

static double margin_of(double rev, double cost) {
    return rev > 0 ? (rev - cost) / rev : NAN;
}

static void sens_insert(rpt_econ_sens *s, double x) {
    for (int i = 0; i < s->n; i++)
        if (fabs(s->row[i].x - x) < 1e-9) return;
    if (s->n == RPT_ECON_MAX_SENS) return;
    int i = s->n++;
    while (i > 0 && s->row[i - 1].x > x) {
        s->row[i] = s->row[i - 1];
        i--;
    }
    memset(&s->row[i], 0, sizeof s->row[i]);
    s->row[i].x = x;
}

static kvf_status check_in(const rpt_econ_input *in, kvf_err *err) {
    if (!(in->simulated_s > 0) || !isfinite(in->simulated_s))
        return kvf_fail(err, KVF_EINVAL, "economics: simulated time %g s is not positive",
                        in->simulated_s);
    for (int p = 0; p < RPT_POOL_N; p++)
        if (!(in->gpu_hours[p] >= 0) || !isfinite(in->gpu_hours[p]) || !(in->gpus[p] >= 0) ||
            !isfinite(in->gpus[p]))
            return kvf_fail(err, KVF_EINVAL, "economics: pool %d: bad GPU-hours or GPU count", p);
    if (!(in->ssd_tb >= 0) || !(in->dram_tb >= 0) || !isfinite(in->ssd_tb) ||
        !isfinite(in->dram_tb))
        return kvf_fail(err, KVF_EINVAL, "economics: bad SSD or DRAM terabytes");
    if (!(in->ssd_write_Bps >= 0) || !isfinite(in->ssd_write_Bps) || !(in->prefill_flops >= 0) ||
        !isfinite(in->prefill_flops) || !(in->prefill_flops_no_reuse >= 0) ||
        !isfinite(in->prefill_flops_no_reuse))
        return kvf_fail(err, KVF_EINVAL, "economics: bad SSD write rate or prefill FLOPs");
    if (in->n_cls < 0 || in->n_cls > RPT_ECON_MAX_CLASSES)
        return kvf_fail(err, KVF_EINVAL, "economics: bad class count %d", in->n_cls);
    for (int k = 0; k < in->n_cls; k++)
        for (int per = 0; per < 2; per++)
            if (!(in->cls[k].hit[per] >= 0) || !(in->cls[k].miss[per] >= 0) ||
                !(in->cls[k].output[per] >= 0) || !isfinite(in->cls[k].hit[per]) ||
                !isfinite(in->cls[k].miss[per]) || !isfinite(in->cls[k].output[per]))
                return kvf_fail(err, KVF_EINVAL, "economics: class '%s': bad token counts",
                                in->cls[k].cls);
    return KVF_OK;
}

// What rpt_econ_compute's steps share: the inputs, the day placement, the store billed, the
// run's revenue and the colocated pool's input share.
typedef struct econ_ctx {
    const rpt_econ_config *c;
    const rpt_econ_input *in;
    rpt_econ_result *r;
    day_place dp;
    double to_day;            // run seconds -> a day
    double gh_total;          // GPU-hours over the run, all pools
    double hit, miss, outp;   // the run's tokens
    double ssd_tb;            // SSD billed (TB)
    double coloc_in;          // share of colocated GPU time counted as input
    rev_out rv;               // revenue per day at the configured prices
} econ_ctx;

// GPUs, GPU-hours, the day's tokens and the hit rate.
static void econ_tokens(econ_ctx *x) {
    const rpt_econ_input *in = x->in;
    rpt_econ_result *r = x->r;
    double gpus = 0, off = 0;
    for (int p = 0; p < RPT_POOL_N; p++) {
        x->gh_total += in->gpu_hours[p];
        gpus += in->gpus[p];
    }
    r->gpus = gpus;
    r->gpu_hours = x->gh_total;
    r->gpu_hours_per_day = x->gh_total * x->to_day;
    for (int k = 0; k < in->n_cls; k++)
        for (int per = 0; per < 2; per++) {
            x->hit += in->cls[k].hit[per];
            x->miss += in->cls[k].miss[per];
            x->outp += in->cls[k].output[per];
            if (per) off += in->cls[k].hit[1] + in->cls[k].miss[1] + in->cls[k].output[1];
        }
    double all = x->hit + x->miss + x->outp;
    r->offpeak_share = x->dp.own_schedule ? (all > 0 ? off / all : 0) : x->dp.offpeak_share;
    r->hit_rate = x->hit + x->miss > 0 ? x->hit / (x->hit + x->miss) : NAN;
    r->input_tokens_per_day = (x->hit + x->miss) * x->dp.scale;
    r->output_tokens_per_day = x->outp * x->dp.scale;
    double ci = in->colocated_input_share;
    x->coloc_in = ci >= 0 && ci <= 1      ? ci
                  : x->miss + x->outp > 0 ? x->miss / (x->miss + x->outp)
                                          : 0.5;
}

// Cost by part, revenue, margin, and cost per million input and output tokens.
static void econ_money(econ_ctx *x) {
    const rpt_econ_input *in = x->in;
    rpt_econ_result *r = x->r;
    x->ssd_tb = ssd_billed(in, &r->ssd_basis, r->ssd_tb_by_class);
    r->ssd_tb_billed = x->ssd_tb;
    cost_parts(x->c, in, x->ssd_tb, r->gpu_hours_per_day, r->cost_per_day_by_part);
    r->cost_per_day_usd = sum_parts(r->cost_per_day_by_part);
    for (int i = 0; i < RPT_COST_N; i++)
        r->cost_per_gpu_hour_by_part[i] =
            r->gpu_hours_per_day > 0 ? r->cost_per_day_by_part[i] / r->gpu_hours_per_day : NAN;
    r->cost_per_gpu_hour_usd =
        r->gpu_hours_per_day > 0 ? r->cost_per_day_usd / r->gpu_hours_per_day : NAN;
    r->cost_usd = r->cost_per_day_usd * r->days;
    x->rv = revenue(x->c, in, &x->dp, (rev_case){1.0, NAN, 1.0});
    r->revenue_per_day_usd = x->rv.total;
    r->revenue_input_per_day_usd = x->rv.input;
    r->revenue_output_per_day_usd = x->rv.output;
    memcpy(r->revenue_per_day_by_class, x->rv.by_class, sizeof x->rv.by_class);
    if (x->dp.own_schedule || !x->c->day_profile_set) {
        r->revenue_usd = x->rv.total * r->days;
    } else {
        // a profile scales the run to the day's traffic, which the run's hours carry only a
        // share of: the day's revenue is not the run's. The run's own is its tokens at the
        // day's price mix, beside cost_usd, the run's own cost.
        day_place run = x->dp;
        run.scale = DAY_S / in->simulated_s;
        r->revenue_usd = revenue(x->c, in, &run, (rev_case){1.0, NAN, 1.0}).total * r->days;
    }
    r->margin = margin_of(x->rv.total, r->cost_per_day_usd);
    // cost per million tokens: GPU-proportional parts by GPU-hour share, storage to input
    double gh_in = in->gpu_hours[RPT_POOL_VISION] + in->gpu_hours[RPT_POOL_PREFILL] +
                   in->gpu_hours[RPT_POOL_COLOCATED] * x->coloc_in;
    double gpu_share_in = x->gh_total > 0 ? gh_in / x->gh_total : 0.5;
    // the GPU part by pool, each at its price; the input side's share of it by cost
    double gsum = 0, g_in = 0;
    for (int p = 0; p < RPT_POOL_N; p++) {
        r->gpu_cost_per_day_by_pool[p] = in->gpu_hours[p] * x->to_day * pool_per_gpu_h(x->c, p);
        gsum += r->gpu_cost_per_day_by_pool[p];
    }
    g_in = r->gpu_cost_per_day_by_pool[RPT_POOL_VISION] +
           r->gpu_cost_per_day_by_pool[RPT_POOL_PREFILL] +
           r->gpu_cost_per_day_by_pool[RPT_POOL_COLOCATED] * x->coloc_in;
    double gpu_cost_share_in = gsum > 0 ? g_in / gsum : gpu_share_in;
    double other_parts =
        r->cost_per_day_by_part[RPT_COST_POWER] + r->cost_per_day_by_part[RPT_COST_NETWORK];
    double cost_in = r->cost_per_day_by_part[RPT_COST_GPU] * gpu_cost_share_in +
                     other_parts * gpu_share_in + r->cost_per_day_by_part[RPT_COST_SSD] +
                     r->cost_per_day_by_part[RPT_COST_DRAM];
    double cost_out = r->cost_per_day_usd - cost_in;
    r->input_cost_share = r->cost_per_day_usd > 0 ? cost_in / r->cost_per_day_usd : NAN;
    r->cost_per_mtok_input_usd =
        r->input_tokens_per_day > 0 ? cost_in / (r->input_tokens_per_day / 1e6) : NAN;
    r->cost_per_mtok_output_usd =
        r->output_tokens_per_day > 0 ? cost_out / (r->output_tokens_per_day / 1e6) : NAN;
}

// Payback, break-even, the all-in price range and the GPU-hour weighted utilisation.
static void econ_limits(econ_ctx *x) {
    const rpt_econ_config *c = x->c;
    const rpt_econ_input *in = x->in;
    rpt_econ_result *r = x->r;
    r->capex_usd = capex_of(c, in);
    r->payback_days = payback(c, in, x->ssd_tb, r->gpus, r->gpu_hours_per_day, x->rv.total,
                              &r->cash_opex_per_day_usd);
    r->break_even_price_factor = x->rv.total > 0 ? r->cost_per_day_usd / x->rv.total : NAN;
    if (!(x->rv.out_mtok_weighted > 0)) {
        r->break_even_output_usd_per_mtok = NAN;
        snprintf(r->break_even_note, sizeof r->break_even_note,
                 "no billable output tokens: no output price breaks even on its own");
    } else {
        double be = (r->cost_per_day_usd - x->rv.input) / x->rv.out_mtok_weighted;
        if (be < 0) {
            snprintf(r->break_even_note, sizeof r->break_even_note,
                     "input revenue alone (%.4g USD/day) covers the cost (%.4g USD/day): any "
                     "output price >= 0 breaks even",
                     x->rv.input, r->cost_per_day_usd);
            be = 0;
        }
        r->break_even_output_usd_per_mtok = be;
    }
    // the all-in range: every GPU-hour at the low and the high price, storage as above
    for (int e = 0; e < 2; e++) {
        r->range_cost_per_day_usd[e] = NAN;
        r->range_margin[e] = NAN;
        if (!(c->gpu_hour_range[1] > 0)) continue;
        rpt_econ_config rc = *c;
        rc.own = false;
        rc.gpu_hour_usd = c->gpu_hour_range[e];
        for (int p = 0; p < RPT_POOL_N; p++)   // every pool at the range's price
            rc.pool_gpu_hour_usd[p] = -1;
        double parts[RPT_COST_N];
        cost_parts(&rc, in, x->ssd_tb, r->gpu_hours_per_day, parts);
        r->range_cost_per_day_usd[e] = sum_parts(parts);
        r->range_margin[e] = margin_of(x->rv.total, r->range_cost_per_day_usd[e]);
    }
    double uw = 0, ugh = 0, umax = 0;
    for (int p = 0; p < RPT_POOL_N; p++)
        if (in->utilization[p] >= 0 && in->gpu_hours[p] > 0) {
            uw += in->utilization[p] * in->gpu_hours[p];
            ugh += in->gpu_hours[p];
            umax = KVF_MAX(umax, in->utilization[p]);
        }
    r->utilization = ugh > 0 ? uw / ugh : NAN;
    r->capacity_utilization = umax > 0 ? r->utilization / umax : NAN;
}

// Sensitivity to the cache-hit rate. w(h) = 1 - s*h is the prefill work at hit rate h
// relative to no reuse; s from this run's prefill FLOPs where it has them.
static void econ_sens_hit(econ_ctx *x) {
    const rpt_econ_config *c = x->c;
    const rpt_econ_input *in = x->in;
    rpt_econ_result *r = x->r;
    rpt_econ_sens *sh = &r->by_hit_rate;
    static const double hgrid[] = {0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1};
    for (size_t i = 0; i < sizeof hgrid / sizeof hgrid[0]; i++)
        sens_insert(sh, hgrid[i]);
    double h0 = isnan(r->hit_rate) ? 0 : r->hit_rate;
    if (!isnan(r->hit_rate)) sens_insert(sh, h0);
    double sv = 1.0 - c->hit_cost_ratio;
    r->hit_basis = "hit_cost_ratio";
    if (in->prefill_flops > 0 && in->prefill_flops_no_reuse >= in->prefill_flops && h0 > 0) {
        sv = KVF_MIN(1.0, (1.0 - in->prefill_flops / in->prefill_flops_no_reuse) / h0);
        r->hit_basis = "prefill FLOPs of this run";
    }
    r->hit_saving = sv;
    double w0 = KVF_MAX(1 - sv * h0, 1e-9), ci = x->coloc_in;
    for (int i = 0; i < sh->n; i++) {
        rpt_econ_sens_row *row = &sh->row[i];
        double h = row->x;
        double ratio = KVF_MAX(1 - sv * h, 1e-9) / w0;
        double gh[RPT_POOL_N], g[RPT_POOL_N];
        for (int p = 0; p < RPT_POOL_N; p++) {
            gh[p] = in->gpu_hours[p];
            g[p] = in->gpus[p];
        }
        gh[RPT_POOL_PREFILL] *= ratio;
        g[RPT_POOL_PREFILL] *= ratio;
        gh[RPT_POOL_COLOCATED] *= ci * ratio + (1 - ci);
        g[RPT_POOL_COLOCATED] *= ci * ratio + (1 - ci);
        double ghd = 0, gs = 0, parts[RPT_COST_N];
        for (int p = 0; p < RPT_POOL_N; p++) {
            ghd += gh[p] * x->to_day;
            gs += g[p];
        }
        cost_parts(c, in, x->ssd_tb, ghd, parts);
        rev_out rh = revenue(c, in, &x->dp, (rev_case){1.0, isnan(r->hit_rate) ? NAN : h, 1.0});
        row->cost_per_day_usd = sum_parts(parts);
        row->revenue_per_day_usd = rh.total;
        row->margin = margin_of(rh.total, row->cost_per_day_usd);
        row->margin_fixed_revenue = margin_of(x->rv.total, row->cost_per_day_usd);
        row->payback_days = payback(c, in, x->ssd_tb, gs, ghd, rh.total, NULL);
        row->prefill_gpus = g[RPT_POOL_PREFILL] + g[RPT_POOL_COLOCATED] * ci;
    }
}

// Sensitivity to utilisation (same fleet, traffic scaled by u / u0) up to capacity, the
// utilisation at which the busiest pool is fully busy; and to the price factor.
static void econ_sens_util_price(econ_ctx *x) {
    const rpt_econ_config *c = x->c;
    const rpt_econ_input *in = x->in;
    rpt_econ_result *r = x->r;
    double pgpus = in->gpus[RPT_POOL_PREFILL] + in->gpus[RPT_POOL_COLOCATED] * x->coloc_in;
    if (r->utilization > 0) {
        rpt_econ_sens *su = &r->by_utilization;
        double ucap = r->capacity_utilization;
        for (int i = 1; i <= 10; i++)
            if (i / 10.0 < ucap - 1e-9) sens_insert(su, i / 10.0);
        sens_insert(su, r->utilization);
        sens_insert(su, ucap);
        for (int i = 0; i < su->n; i++) {
            rpt_econ_sens_row *row = &su->row[i];
            rev_out ru = revenue(c, in, &x->dp, (rev_case){row->x / r->utilization, NAN, 1.0});
            row->cost_per_day_usd = r->cost_per_day_usd;
            row->revenue_per_day_usd = ru.total;
            row->margin = margin_of(ru.total, r->cost_per_day_usd);
            row->margin_fixed_revenue = NAN;
            row->payback_days =
                payback(c, in, x->ssd_tb, r->gpus, r->gpu_hours_per_day, ru.total, NULL);
            row->prefill_gpus = pgpus;
            row->capped = fabs(row->x - ucap) < 1e-9;
        }
    }
    rpt_econ_sens *sp = &r->by_price;
    static const double pgrid[] = {0.1, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3};
    for (size_t i = 0; i < sizeof pgrid / sizeof pgrid[0]; i++)
        sens_insert(sp, pgrid[i]);
    if (isfinite(r->break_even_price_factor) && r->break_even_price_factor > 0 &&
        r->break_even_price_factor < 100)
        sens_insert(sp, r->break_even_price_factor);
    for (int i = 0; i < sp->n; i++) {
        rpt_econ_sens_row *row = &sp->row[i];
        double rev = x->rv.total * row->x;
        row->cost_per_day_usd = r->cost_per_day_usd;
        row->revenue_per_day_usd = rev;
        row->margin = margin_of(rev, r->cost_per_day_usd);
        row->margin_fixed_revenue = NAN;
        row->payback_days = payback(c, in, x->ssd_tb, r->gpus, r->gpu_hours_per_day, rev, NULL);
        row->prefill_gpus = pgpus;
    }
}

kvf_status rpt_econ_compute(const rpt_econ_config *c, const rpt_econ_input *in,
                            rpt_econ_result *out, kvf_err *err) {
    KVF_ASSERT(c && in && out);
    memset(out, 0, sizeof *out);
    kvf_status st = check_in(in, err);
    if (st) return st;
    econ_ctx x = {.c = c, .in = in, .r = out};
    x.to_day = DAY_S / in->simulated_s;   // GPU-hours: the fleet is provisioned all day
    x.dp = place_in_day(c, in);
    out->days = in->simulated_s / DAY_S;
    out->power_w_per_gpu = power_w(c, in);
    out->power_from_run = isfinite(in->board_w_per_gpu) && in->board_w_per_gpu > 0;
    out->day_basis = x.dp.basis;
    out->day_scale = x.dp.scale;
    econ_tokens(&x);
    econ_money(&x);
    econ_limits(&x);
    econ_sens_hit(&x);
    econ_sens_util_price(&x);
    return KVF_OK;
}

// ---- output -----------------------------------------------------------------------------

static const char *const PART_NAMES[RPT_COST_N] = {"gpu", "power", "ssd", "dram", "network"};

static json_t *jnum(double x) {
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *sens_json(const rpt_econ_sens *s) {
    json_t *a = json_array();
    for (int i = 0; i < s->n; i++) {
        const rpt_econ_sens_row *w = &s->row[i];
        json_t *o = json_object();
        json_object_set_new(o, "x", jnum(w->x));
        json_object_set_new(o, "cost_per_day_usd", jnum(w->cost_per_day_usd));
        json_object_set_new(o, "revenue_per_day_usd", jnum(w->revenue_per_day_usd));
        json_object_set_new(o, "margin", jnum(w->margin));
        json_object_set_new(o, "margin_fixed_revenue", jnum(w->margin_fixed_revenue));
        json_object_set_new(o, "payback_days", jnum(w->payback_days));
        json_object_set_new(o, "prefill_gpus", jnum(w->prefill_gpus));
        if (w->capped) json_object_set_new(o, "capacity", json_true());
        json_array_append_new(a, o);
    }
    return a;
}

json_t *rpt_econ_to_json(const rpt_econ_config *c, const rpt_econ_result *r) {
    KVF_ASSERT(r);   // c may be NULL: its keys are then left out
    json_t *o = json_object();
    json_object_set_new(o, "cost_usd", jnum(r->cost_usd));
    json_object_set_new(o, "revenue_usd", jnum(r->revenue_usd));
    json_object_set_new(o, "margin", jnum(r->margin));
    json_object_set_new(o, "cost_per_gpu_hour_usd", jnum(r->cost_per_gpu_hour_usd));
    json_t *mt = json_object();
    json_object_set_new(mt, "input", jnum(r->cost_per_mtok_input_usd));
    json_object_set_new(mt, "output", jnum(r->cost_per_mtok_output_usd));
    json_object_set_new(o, "cost_per_mtok_usd", mt);
    json_object_set_new(o, "payback_days", jnum(r->payback_days));
    json_object_set_new(o, "cost_model", json_string(c && c->own ? "own" : "rent"));
    json_object_set_new(o, "days", jnum(r->days));
    json_object_set_new(o, "gpus", jnum(r->gpus));
    json_object_set_new(o, "gpu_hours", jnum(r->gpu_hours));
    json_object_set_new(o, "gpu_hours_per_day", jnum(r->gpu_hours_per_day));
    json_object_set_new(o, "cost_per_day_usd", jnum(r->cost_per_day_usd));
    json_object_set_new(o, "revenue_per_day_usd", jnum(r->revenue_per_day_usd));
    json_object_set_new(o, "revenue_input_per_day_usd", jnum(r->revenue_input_per_day_usd));
    json_object_set_new(o, "revenue_output_per_day_usd", jnum(r->revenue_output_per_day_usd));
    json_t *pd = json_object(), *ph = json_object();
    for (int i = 0; i < RPT_COST_N; i++) {
        json_object_set_new(pd, PART_NAMES[i], jnum(r->cost_per_day_by_part[i]));
        json_object_set_new(ph, PART_NAMES[i], jnum(r->cost_per_gpu_hour_by_part[i]));
    }
    json_object_set_new(o, "cost_per_day_usd_by_part", pd);
    json_object_set_new(o, "cost_per_gpu_hour_usd_by_part", ph);
    json_t *gp = json_object();
    for (int p = 0; p < RPT_POOL_N; p++)
        if (r->gpu_cost_per_day_by_pool[p] > 0)
            json_object_set_new(gp, POOL_KEYS[p], jnum(r->gpu_cost_per_day_by_pool[p]));
    json_object_set_new(o, "gpu_cost_per_day_usd_by_pool", gp);
    json_object_set_new(o, "capex_usd", jnum(r->capex_usd));
    json_object_set_new(o, "cash_opex_per_day_usd", jnum(r->cash_opex_per_day_usd));
    json_object_set_new(o, "break_even_price_factor", jnum(r->break_even_price_factor));
    json_object_set_new(o, "break_even_output_usd_per_mtok",
                        jnum(r->break_even_output_usd_per_mtok));
    if (r->break_even_note[0])
        json_object_set_new(o, "break_even_note", json_string(r->break_even_note));
    json_object_set_new(o, "input_cost_share", jnum(r->input_cost_share));
    json_object_set_new(o, "day_basis", json_string(r->day_basis ? r->day_basis : ""));
    json_object_set_new(o, "offpeak_share", jnum(r->offpeak_share));
    json_object_set_new(o, "trace_start_utc_s", jnum(c ? c->trace_start_s : NAN));
    if (c && c->day_profile_set) {
        json_t *dpj = json_array();
        for (int h = 0; h < 24; h++)
            json_array_append_new(dpj, jnum(c->day_profile[h]));
        json_object_set_new(o, "day_profile", dpj);
    }
    if (c && c->gpu_hour_range[1] > 0) {
        // scalars, so a dotted path names each ("economics.gpu_hour_range.margin_at_high")
        json_t *g = json_object();
        json_object_set_new(g, "low_usd", jnum(c->gpu_hour_range[0]));
        json_object_set_new(g, "high_usd", jnum(c->gpu_hour_range[1]));
        json_object_set_new(g, "cost_per_day_usd_at_low", jnum(r->range_cost_per_day_usd[0]));
        json_object_set_new(g, "cost_per_day_usd_at_high", jnum(r->range_cost_per_day_usd[1]));
        json_object_set_new(g, "margin_at_low", jnum(r->range_margin[0]));
        json_object_set_new(g, "margin_at_high", jnum(r->range_margin[1]));
        json_object_set_new(o, "gpu_hour_range", g);
    }
    // a gigawatt of copies of this cluster: GPUs per GW from wall power and PUE
    if (c && r->power_w_per_gpu > 0 && r->gpus > 0) {
        double per_gw = 1e9 / (r->power_w_per_gpu * c->pue), k = per_gw / r->gpus;
        json_t *g = json_object();
        json_object_set_new(g, "gpus", jnum(per_gw));
        json_object_set_new(g, "power_w_per_gpu", jnum(r->power_w_per_gpu));
        json_object_set_new(
            g, "power_basis",
            json_string(r->power_from_run
                            ? "the run's board power by busy share + host_w_per_gpu, times pue"
                            : "economics.power_w_per_gpu, times pue"));
        json_object_set_new(g, "cost_per_day_usd", jnum(r->cost_per_day_usd * k));
        json_object_set_new(g, "revenue_per_day_usd", jnum(r->revenue_per_day_usd * k));
        json_object_set_new(g, "tokens_per_day",
                            jnum((r->input_tokens_per_day + r->output_tokens_per_day) * k));
        json_object_set_new(g, "ssd_tb", jnum(r->ssd_tb_billed * k));
        json_object_set_new(o, "per_gigawatt", g);
    }
    json_object_set_new(o, "ssd_tb_billed", jnum(r->ssd_tb_billed));
    double tok_day = r->input_tokens_per_day + r->output_tokens_per_day;
    json_object_set_new(o, "ssd_bytes_per_daily_token",
                        jnum(tok_day > 0 ? r->ssd_tb_billed * 1e12 / tok_day : NAN));
    json_object_set_new(o, "ssd_basis", json_string(r->ssd_basis ? r->ssd_basis : ""));
    json_object_set_new(o, "hit_saving_per_unit_hit_rate", jnum(r->hit_saving));
    json_object_set_new(o, "hit_sensitivity_basis", json_string(r->hit_basis ? r->hit_basis : ""));
    json_object_set_new(o, "capacity_utilization", jnum(r->capacity_utilization));
    json_object_set_new(o, "hit_rate", jnum(r->hit_rate));
    json_object_set_new(o, "utilization", jnum(r->utilization));
    json_object_set_new(o, "input_tokens_per_day", jnum(r->input_tokens_per_day));
    json_object_set_new(o, "output_tokens_per_day", jnum(r->output_tokens_per_day));
    json_t *sens = json_object();
    json_object_set_new(sens, "hit_rate", sens_json(&r->by_hit_rate));
    json_object_set_new(sens, "utilization", sens_json(&r->by_utilization));
    json_object_set_new(sens, "price", sens_json(&r->by_price));
    json_object_set_new(o, "sensitivity", sens);
    return o;
}

kvf_status rpt_econ_write_db(rpt_db *db, const rpt_econ_result *r, kvf_err *err) {
    KVF_ASSERT(r && err);
    if (!db) return KVF_OK;   // as the other writers: no database, nothing to write
    struct {
        const char *k;
        double v;
    } rows[] = {
        {"economics.cost_usd", r->cost_usd},
        {"economics.revenue_usd", r->revenue_usd},
        {"economics.margin", r->margin},
        {"economics.cost_per_gpu_hour_usd", r->cost_per_gpu_hour_usd},
        {"economics.cost_per_mtok_usd.input", r->cost_per_mtok_input_usd},
        {"economics.cost_per_mtok_usd.output", r->cost_per_mtok_output_usd},
        {"economics.payback_days", isfinite(r->payback_days) ? r->payback_days : NAN},
        {"economics.cost_per_day_usd", r->cost_per_day_usd},
        {"economics.revenue_per_day_usd", r->revenue_per_day_usd},
        {"economics.capex_usd", r->capex_usd},
        {"economics.cash_opex_per_day_usd", r->cash_opex_per_day_usd},
        {"economics.break_even_price_factor", r->break_even_price_factor},
        {"economics.break_even_output_usd_per_mtok", r->break_even_output_usd_per_mtok},
        {"economics.gpu_hours", r->gpu_hours},
        {"economics.hit_rate", r->hit_rate},
        {"economics.offpeak_share", r->offpeak_share},
        {"economics.ssd_tb_billed", r->ssd_tb_billed},
        {"economics.hit_saving_per_unit_hit_rate", r->hit_saving},
    };
    kvf_status s;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if ((s = rpt_db_summary_set(db, rows[i].k, rows[i].v, err))) return s;
    char key[96];
    for (int i = 0; i < RPT_COST_N; i++) {
        snprintf(key, sizeof key, "economics.cost_per_day_usd_by_part.%s", PART_NAMES[i]);
        if ((s = rpt_db_summary_set(db, key, r->cost_per_day_by_part[i], err))) return s;
        snprintf(key, sizeof key, "economics.cost_per_gpu_hour_usd_by_part.%s", PART_NAMES[i]);
        if ((s = rpt_db_summary_set(db, key, r->cost_per_gpu_hour_by_part[i], err))) return s;
    }
    sqlite3 *h = rpt_db_handle(db);
    if ((s = rpt_db_flush(db, err))) return s;
    char *msg = NULL;
    if (sqlite3_exec(h,
                     "CREATE TABLE IF NOT EXISTS econ_sensitivity(kind TEXT, x REAL,"
                     " cost_per_day_usd REAL, revenue_per_day_usd REAL, margin REAL,"
                     " margin_fixed_revenue REAL, payback_days REAL, prefill_gpus REAL);"
                     "DELETE FROM econ_sensitivity; BEGIN",
                     NULL, NULL, &msg) != SQLITE_OK) {
        s = kvf_fail(err, KVF_ERUN, "results database: econ_sensitivity: %s",
                     msg ? msg : sqlite3_errmsg(h));
        sqlite3_free(msg);
        return s;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, "INSERT INTO econ_sensitivity VALUES(?,?,?,?,?,?,?,?)", -1, &st,
                           NULL) != SQLITE_OK)
        goto fail;
    const struct {
        const char *kind;
        const rpt_econ_sens *s;
    } tabs[] = {{"hit_rate", &r->by_hit_rate},
                {"utilization", &r->by_utilization},
                {"price", &r->by_price}};
    for (size_t t = 0; t < 3; t++)
        for (int i = 0; i < tabs[t].s->n; i++) {
            const rpt_econ_sens_row *w = &tabs[t].s->row[i];
            double v[7] = {w->x,           w->cost_per_day_usd,     w->revenue_per_day_usd,
                           w->margin,      w->margin_fixed_revenue, w->payback_days,
                           w->prefill_gpus};
            sqlite3_bind_text(st, 1, tabs[t].kind, -1, SQLITE_STATIC);
            for (int j = 0; j < 7; j++) {
                if (isfinite(v[j]))
                    sqlite3_bind_double(st, 2 + j, v[j]);
                else
                    sqlite3_bind_null(st, 2 + j);
            }
            int rc = sqlite3_step(st);
            sqlite3_reset(st);
            if (rc != SQLITE_DONE) goto fail;
        }
    sqlite3_finalize(st);
    st = NULL;   // a failing COMMIT must not finalize it twice
    if (sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) goto fail;
    return KVF_OK;
fail:
    s = kvf_fail(err, KVF_ERUN, "results database: econ_sensitivity: %s", sqlite3_errmsg(h));
    sqlite3_finalize(st);
    sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
    return s;
}

// ---- the configuration back as scenario data ----------------------------------------------

static json_t *tod_json(double t) {
    char buf[48];
    int s = (int)lround(t < 0 ? 0 : t > DAY_S ? DAY_S : t);
    snprintf(buf, sizeof buf, "%02d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
    return json_string(buf);
}

static json_t *prices_json(const rpt_econ_prices *p) {
    json_t *o = json_object();
    if (!isnan(p->input_hit)) json_object_set_new(o, "input_hit", json_real(p->input_hit));
    if (!isnan(p->input_miss)) json_object_set_new(o, "input_miss", json_real(p->input_miss));
    if (!isnan(p->output)) json_object_set_new(o, "output", json_real(p->output));
    return o;
}

json_t *rpt_econ_config_to_json(const rpt_econ_config *c) {
    json_t *o = json_object();
    json_object_set_new(o, "cost_model", json_string(c->own ? "own" : "rent"));
    for (size_t i = 0; i < N_ECON_NUMS; i++) {
        double v = *(const double *)((const char *)c + econ_nums[i].off);
        const char *dot = strchr(econ_nums[i].key, '.');
        if (!dot) {
            json_object_set_new(o, econ_nums[i].key, json_real(v));
            continue;
        }
        if (!c->offpeak_on) continue;   // offpeak.*: only inside an active window
        char sec[32];
        snprintf(sec, sizeof sec, "%.*s", (int)(dot - econ_nums[i].key), econ_nums[i].key);
        json_t *sub = json_object_get(o, sec);
        if (!sub) json_object_set_new(o, sec, sub = json_object());
        json_object_set_new(sub, dot + 1, json_real(v));
    }
    if (c->offpeak_on) {
        json_t *w = json_object_get(o, "offpeak");
        json_object_set_new(w, "start_utc", tod_json(c->offpeak_start_s));
        json_object_set_new(w, "end_utc", tod_json(c->offpeak_end_s));
    } else {
        json_object_set_new(o, "offpeak", json_null());
    }
    json_t *pr = prices_json(&c->prices);
    for (int k = 0; k < c->n_cls; k++)
        json_object_set_new(pr, c->cls[k].cls, prices_json(&c->cls[k].p));
    json_object_set_new(o, "prices_per_mtok", pr);
    json_object_set_new(o, "trace_start_utc", tod_json(c->trace_start_s));
    if (c->day_profile_set) {
        json_t *a = json_array();
        for (int h = 0; h < 24; h++)
            json_array_append_new(a, json_real(c->day_profile_given[h]));
        json_object_set_new(o, "day_profile", a);
    } else {
        json_object_set_new(o, "day_profile", json_null());
    }
    json_object_set_new(o, "gpu_hour_usd_range",
                        json_pack("[f, f]", c->gpu_hour_range[0], c->gpu_hour_range[1]));
    json_t *pools = NULL;
    for (int p = 0; p < RPT_POOL_N; p++) {
        if (!rpt_econ_pool_priced(c, p)) continue;
        if (!pools) pools = json_object();
        json_t *q = json_object();
        if (c->pool_gpu_hour_usd[p] >= 0)
            json_object_set_new(q, "gpu_hour_usd", json_real(c->pool_gpu_hour_usd[p]));
        if (c->pool_capex_usd[p] >= 0)
            json_object_set_new(q, "capex_per_gpu_usd", json_real(c->pool_capex_usd[p]));
        json_object_set_new(pools, POOL_KEYS[p], q);
    }
    if (pools) json_object_set_new(o, "pools", pools);
    return o;
}
