// sim/sim_saturation.c -- the saturation verdict (design.md §10): did the run reach a steady
// state (stable), hold a standing or draining backlog (backlogged), or grow without bound
// (overloaded)? Read no capacity figure off a run that is not stable.
//
// Decided from trends over the second half of the arrivals, window W = [mid, last arrival]
// where mid is halfway between the first and the last arrival (the first half is warm-up):
//   - queue trend, per pool: the least-squares slope of the sampled queue length (requests
//     waiting, every output.sample_interval_s) over W, times W's length = the growth G over W;
//     the queue grows when G > saturation.queue_growth and G > saturation.queue_growth_frac x
//     its mean over W;
//   - waiting-time trend: per-request queueing time (all queues a request passed; completed
//     requests, binned by arrival: one sample interval, wider for long runs, sim_metrics.h),
//     the slope of the bins' means over W weighted by
//     their counts, times W's length = the growth Gw; and its mean over W.
//   - the queue's drain: from the last arrival until the sampled queues (requests waiting, and
//     transfers waiting on links; not requests running) first read empty. A long request still
//     decoding after the last arrival is service, not backlog: a few long answers near the end do
//     not make a drain.
// overloaded: both trends rise (a pool's queue grows and Gw > saturation.wait_growth_s); or
//   the queues take longer to drain than the arrivals lasted; or a queue grows and takes
//   longer to drain than the second half of the arrivals.
// backlogged: otherwise any of: one trend rises alone; the mean queueing time over W exceeds
//   saturation.max_wait_s (0: the TTFT SLO); the queues drained longer than saturation.drain_s
//   and saturation.drain_frac of the arrival span after the last arrival; more than
//   saturation.reject_frac of arrivals were rejected.
// stable: none of these.
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "sim.h"
#include "sim_run.h"

typedef struct fit {
    double sw, st, sy, stt, sty;
} fit;

static void fit_add(fit *f, double t, double y, double w) {
    f->sw += w;
    f->st += w * t;
    f->sy += w * y;
    f->stt += w * t * t;
    f->sty += w * t * y;
}

static double fit_slope(const fit *f) {
    double d = f->sw * f->stt - f->st * f->st;
    return f->sw > 0 && d > 0 ? (f->sw * f->sty - f->st * f->sy) / d : 0;
}

static double fit_mean(const fit *f) {
    return f->sw > 0 ? f->sy / f->sw : 0;
}

json_t *sim_saturation_json(const sim_cluster *c) {
    const sim_config *cfg = c->cfg;
    const sim_saturation_cfg *th = &cfg->sat;
    const sim_metrics *m = &c->m;
    static const char *const pools[SIM_POOLS] = {"vision", "prefill", "decode"};
    double t0 = (double)c->first_arrival_ns * 1e-9, t1 = (double)c->last_arrival_ns * 1e-9;
    if (!(t1 > t0)) t0 = t1 = 0;
    double span = t1 - t0, mid = t0 + span / 2, half = t1 - mid;
    double drain = (double)(c->now - c->last_arrival_ns) * 1e-9;

    // queue trend per pool
    json_t *by_pool = json_object();
    double g_max = 0;
    int g_pool = -1;
    bool queue_grows = false;
    for (int k = 0; k < SIM_POOLS; k++) {
        if (!c->pool[k].n) continue;
        fit f = {0};
        for (size_t i = 0; i < m->sample_t.n && i < m->pool_queue[k].n; i++)
            if (m->sample_t.v[i] >= mid && m->sample_t.v[i] <= t1)
                fit_add(&f, m->sample_t.v[i] - mid, m->pool_queue[k].v[i], 1);
        double g = f.sw >= 4 ? fit_slope(&f) * half : 0, mean = fit_mean(&f);
        bool grows = g > th->queue_growth && g > th->queue_growth_frac * mean;
        queue_grows = queue_grows || grows;
        if (g_pool < 0 || g > g_max) g_max = g, g_pool = k;
        json_t *o = json_object();
        json_object_set_new(o, "queue_mean", json_real(mean));
        json_object_set_new(o, "queue_growth", json_real(g));
        json_object_set_new(o, "grows", json_boolean(grows));
        json_object_set_new(by_pool, pools[k], o);
    }

    // waiting-time trend
    fit w = {0};
    for (size_t b = 0; b < m->wait_bins; b++) {
        double tb = ((double)b + 0.5) * m->wait_bin_s;
        if (!m->wait_n[b] || tb < mid || tb > t1) continue;
        fit_add(&w, tb - mid, m->wait_sum[b] / (double)m->wait_n[b], (double)m->wait_n[b]);
    }
    size_t bins = 0;
    for (size_t b = 0; b < m->wait_bins; b++) {
        double tb = ((double)b + 0.5) * m->wait_bin_s;
        bins += m->wait_n[b] && tb >= mid && tb <= t1;
    }
    double wait_growth = bins >= 4 ? fit_slope(&w) * half : 0, wait_mean = fit_mean(&w);
    bool wait_grows = wait_growth > th->wait_growth_s;
    double wait_limit = th->max_wait_s > 0 ? th->max_wait_s : cfg->slo.ttft_p90_ms * 1e-3;

    // the queues' drain: the first sample at or after the last arrival with nothing waiting
    double qdrain = drain;
    for (size_t i = 0; i < m->sample_t.n && i < m->backlog.n; i++)
        if (m->sample_t.v[i] >= t1 && m->backlog.v[i] <= 0) {
            qdrain = m->sample_t.v[i] - t1;
            break;
        }
    if (qdrain > drain) qdrain = drain;
    bool drains = qdrain > th->drain_frac * span && qdrain > th->drain_s;
    bool rejects = (double)c->rejected > th->reject_frac * (double)c->arrived + 1;
    const char *state = "stable", *reason = "queues and waiting times level over the second half";
    if (queue_grows && wait_grows) {
        state = "overloaded";
        reason = "queue length and waiting time grow over the second half";
    } else if (span > 0 && qdrain > span && qdrain > th->drain_s) {
        state = "overloaded";
        reason = "the queues took longer to drain than the arrivals lasted";
    } else if (queue_grows && qdrain > half && qdrain > th->drain_s) {
        state = "overloaded";
        reason = "a queue grows and took longer to drain than the second half of the arrivals";
    } else if (queue_grows || wait_grows) {
        state = "backlogged";
        reason = queue_grows ? "a queue grows over the second half"
                             : "waiting time grows over the second half";
    } else if (wait_mean > wait_limit) {
        state = "backlogged";
        reason = "mean queueing time over the second half above the limit";
    } else if (drains) {
        state = "backlogged";
        reason = "the queues took long to drain after the last arrival";
    } else if (rejects) {
        state = "backlogged";
        reason = "requests rejected";
    }
    json_t *s = json_object();
    json_object_set_new(s, "state", json_string(state));
    json_object_set_new(s, "reason", json_string(reason));
    json_object_set_new(s, "drain_s", json_real(drain));
    json_object_set_new(s, "queue_drain_s", json_real(qdrain));
    json_object_set_new(s, "queue_growth", json_real(g_max));
    json_object_set_new(s, "queue_growth_pool", json_string(g_pool >= 0 ? pools[g_pool] : ""));
    json_object_set_new(s, "wait_mean_s", json_real(wait_mean));
    json_object_set_new(s, "wait_growth_s", json_real(wait_growth));
    json_object_set_new(s, "wait_limit_s", json_real(wait_limit));
    json_object_set_new(s, "window_s", json_pack("[f, f]", mid, t1));
    json_object_set_new(s, "by_pool", by_pool);
    return s;
}
