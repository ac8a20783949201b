// sim/sim_metrics.c -- histograms and sample arrays (see sim_metrics.h).
#include "sim_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// Log-linear bins read straight off the double's bits (no log() per token): bin 0 holds
// exact zeros; bin 1 + ((exponent - EXP0) << 7 | top 7 mantissa bits) covers
// [2^e (1 + m/128), 2^e (1 + (m+1)/128)), so every bin is under 0.8 % wide. Values below
// 2^(EXP0 - 1023) ms (about 1 ns) share the first bin.
#define HIST_MBITS 7
#define HIST_EXP0 (1023 - 20)

void sim_hist_init(sim_hist *h) {
    memset(h, 0, sizeof *h);
}

void sim_hist_free(sim_hist *h) {
    free(h->count);
    free(h->gap_ns);
    memset(h, 0, sizeof *h);
}

static size_t hist_bin(double v) {
    if (!(v > 0)) return 0;
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    int64_t e = (int64_t)((bits >> 52) & 0x7ff) - HIST_EXP0;
    if (e < 0) return 1;
    return 1 + ((size_t)e << HIST_MBITS |
                (size_t)((bits >> (52 - HIST_MBITS)) & ((1u << HIST_MBITS) - 1)));
}

static double hist_mid(size_t b) {
    if (b == 0) return 0;
    b -= 1;
    double m = (double)(b & ((1u << HIST_MBITS) - 1)), e = (double)(b >> HIST_MBITS);
    return ldexp(1.0 + (m + 0.5) / (1 << HIST_MBITS), (int)e + HIST_EXP0 - 1023);
}

// Counts w in bin b, growing the bins as needed (total and sums are the caller's).
static void hist_put(sim_hist *h, size_t b, uint64_t w) {
    if (b >= h->nbins) {
        size_t cap = h->nbins;
        kvf_grow((void **)&h->count, &cap, b + 1, sizeof *h->count);
        memset(h->count + h->nbins, 0, (cap - h->nbins) * sizeof *h->count);
        h->nbins = cap;
    }
    h->count[b] += w;
}

// Counts w values in the bin of v (ms).
static void hist_count(sim_hist *h, double v, uint64_t w) {
    hist_put(h, hist_bin(v), w);
    h->total += w;
}

void sim_hist_add(sim_hist *h, double v, uint64_t w) {
    if (w == 0) return;
    hist_count(h, v, w);
    h->sum += v * (double)w;
}

void sim_hist_add_ns(sim_hist *h, int64_t ns, uint64_t w) {
    if (w == 0) return;
    hist_count(h, (double)ns * 1e-6, w);
    h->sum_ns += (__int128)ns * w;
}

static double bits_double(uint64_t bits) {
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

// The smallest g >= 0 whose g * 1e-6 (as sim_hist_add_ns computes it) is >= x, for
// 0 < x < 2^52 ns: g -> (double)g * 1e-6 never decreases (g exact below 2^53, the product
// correctly rounded), so that g is found next to ceil(x * 1e6). -1 outside that range.
static int64_t ns_at_least(double x) {
    double c = ceil(x * 1e6);
    if (!(x > 0 && c < 0x1p52)) return -1;
    int64_t g = (int64_t)c;
    while (g > 0 && (double)(g - 1) * 1e-6 >= x)
        g--;
    while ((double)g * 1e-6 < x)
        g++;
    return g;
}

// A run's step gaps grow slowly, so most fall in the bin of the one before: a positive value
// at or above the smallest bin's floor is in bin b exactly when its bits above the top
// HIST_MBITS mantissa bits are b's, i.e. when lo <= v < hi for b's first value lo and the
// next bin's hi (positive doubles order as their bits). Gaps are counted against that range,
// as the gaps in ns [glo, ghi) whose v lie in it (ns_at_least), and binned anew only when one
// leaves it: the counts are hist_bin's, gap by gap.
// With rising gaps the gaps in [glo, ghi) are one stretch from the gap that entered the bin:
// its end is the first later gap >= ghi. A bin's range is kept (h->gap_ns): a run's gaps fall
// in the bins of the runs before it.
void sim_hist_add_gaps_ns(sim_hist *h, const int64_t *ends, uint32_t m, uint64_t w, bool rising) {
    if (w == 0 || m < 2) return;
    // the gaps telescope: their sum is the span
    h->sum_ns += (__int128)(ends[m - 1] - ends[0]) * w;
    h->total += (uint64_t)(m - 1) * w;
    const int shift = 52 - HIST_MBITS;
    int64_t glo = 1, ghi = 0;   // an empty range: the first gap is binned
    size_t b = 0;
    uint64_t n = 0;   // gaps counted in bin b since it was entered
    for (uint32_t j = 1; j < m; j++) {
        int64_t g = ends[j] - ends[j - 1];
        if (g >= glo && g < ghi) {
            n++;
            continue;
        }
        if (n) hist_put(h, b, n * w);
        double v = (double)g * 1e-6;
        b = hist_bin(v);
        n = 1;
        glo = 1;
        ghi = 0;
        if (b > 1) {   // a bin of the log-linear range: its bounds in ns
            if (b >= h->ngap) {
                size_t cap = h->ngap;
                kvf_grow((void **)&h->gap_ns, &cap, b + 1, sizeof *h->gap_ns);
                memset(h->gap_ns + h->ngap, 0, (cap - h->ngap) * sizeof *h->gap_ns);
                h->ngap = cap;
            }
            int64_t *r = h->gap_ns[b];
            if (!r[0]) {   // a positive value's lo is at least 1 ns
                uint64_t bits;
                memcpy(&bits, &v, sizeof bits);
                uint64_t top = bits >> shift;
                int64_t l = ns_at_least(bits_double(top << shift)),
                        u = ns_at_least(bits_double((top + 1) << shift));
                r[0] = l >= 0 && u >= 0 ? l : -1;
                r[1] = u;
            }
            if (r[0] > 0) glo = r[0], ghi = r[1];
        }   // else zero, negative, below the first floor or past 2^52 ns: binned one by one
        if (rising && glo < ghi) {
            uint32_t lo = j + 1, hi = m;   // the first k in (j, m) whose gap is >= ghi
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (ends[mid] - ends[mid - 1] < ghi)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            n = lo - j;
            j = lo - 1;
        }
    }
    if (n) hist_put(h, b, n * w);
}

double sim_hist_mean(const sim_hist *h) {
    if (!h->total) return 0;
    return (h->sum + (double)h->sum_ns * 1e-6) / (double)h->total;
}

double sim_hist_percentile(const sim_hist *h, double p) {
    if (!h->total) return 0;
    double want = p / 100.0 * (double)h->total;
    uint64_t acc = 0;
    for (size_t b = 0; b < h->nbins; b++) {
        acc += h->count[b];
        if ((double)acc >= want && h->count[b]) return hist_mid(b);
    }
    return hist_mid(h->nbins ? h->nbins - 1 : 0);
}

// From this many values (2 MiB) an array lives in a table mapping (kvf_table_map: huge pages
// where the kernel allows them, grown by mremap): a metric of every request, filled a fault per
// 4 KiB page and copied on each doubling, was 3 % of a 360,000-request run's loop.
#define SAMPLES_TABLE_MIN ((size_t)1 << 18)

void sim_samples_grow(sim_samples *s) {
    if (s->cap < SAMPLES_TABLE_MIN / 2) {
        kvf_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v);
        return;
    }
    size_t cap = s->cap * 2;
    if (s->cap < SAMPLES_TABLE_MIN) {
        double *t = kvf_table_map(cap * sizeof *t);
        memcpy(t, s->v, s->n * sizeof *t);
        free(s->v);
        s->v = t;
    } else {
        s->v = kvf_table_grow(s->v, s->cap * sizeof *s->v, cap * sizeof *s->v);
    }
    s->cap = cap;
}

void sim_samples_free(sim_samples *s) {
    if (s->cap >= SAMPLES_TABLE_MIN)
        kvf_table_free(s->v, s->cap * sizeof *s->v);
    else
        free(s->v);
    memset(s, 0, sizeof *s);
}

// Bins start one sample interval wide; an arrival past the last bin doubles their width (pairs
// merged), so memory stays SIM_WAIT_BINS however long the trace runs.
void sim_metrics_wait_add(sim_metrics *m, double arrival_s, double queue_s, double interval_s) {
    if (!(interval_s > 0) || !(arrival_s >= 0) || !isfinite(arrival_s) || !isfinite(queue_s))
        return;
    if (!m->wait_sum) {
        m->wait_sum = kvf_calloc(SIM_WAIT_BINS, sizeof *m->wait_sum);
        m->wait_n = kvf_calloc(SIM_WAIT_BINS, sizeof *m->wait_n);
        m->wait_bin_s = interval_s;
    }
    while (arrival_s / m->wait_bin_s >= SIM_WAIT_BINS) {
        for (size_t i = 0; i < SIM_WAIT_BINS / 2; i++) {
            m->wait_sum[i] = m->wait_sum[2 * i] + m->wait_sum[2 * i + 1];
            m->wait_n[i] = m->wait_n[2 * i] + m->wait_n[2 * i + 1];
        }
        memset(m->wait_sum + SIM_WAIT_BINS / 2, 0, SIM_WAIT_BINS / 2 * sizeof *m->wait_sum);
        memset(m->wait_n + SIM_WAIT_BINS / 2, 0, SIM_WAIT_BINS / 2 * sizeof *m->wait_n);
        m->wait_bin_s *= 2;
        m->wait_bins = (m->wait_bins + 1) / 2;
    }
    size_t b = (size_t)(arrival_s / m->wait_bin_s);
    if (b >= m->wait_bins) m->wait_bins = b + 1;
    m->wait_sum[b] += queue_s;
    m->wait_n[b]++;
}

void sim_metrics_init(sim_metrics *m) {
    memset(m, 0, sizeof *m);
    sim_hist_init(&m->itl_ms);
}

void sim_metrics_free(sim_metrics *m) {
    sim_samples_free(&m->ttft_ms);
    sim_samples_free(&m->tpot_ms);
    sim_samples_free(&m->e2e_ms);
    sim_samples_free(&m->gen_tok_s);
    sim_samples_free(&m->st_ttft_ms);
    sim_samples_free(&m->st_tpot_ms);
    sim_samples_free(&m->st_gen_tok_s);
    sim_samples_free(&m->queue_len);
    sim_samples_free(&m->backlog);
    sim_samples_free(&m->sample_t);
    for (int k = 0; k < 3; k++)
        sim_samples_free(&m->pool_queue[k]);
    for (int k = 0; k < TRC_CLASS_COUNT; k++)
        for (int j = 0; j < 3; j++)
            sim_samples_free(&m->cls_lat[k][j]);
    free(m->wait_sum);
    free(m->wait_n);
    m->wait_sum = NULL;
    m->wait_n = NULL;
    m->wait_bins = 0;
    sim_hist_free(&m->itl_ms);
}
