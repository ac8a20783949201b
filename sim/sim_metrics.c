// sim/sim_metrics.c -- histograms and sample arrays (see sim_metrics.h).
#include "sim_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// Bin i >= 1 covers [B^(i-1-OFF), B^(i-OFF)) ms with B = 1.01 and OFF chosen so 1 ns maps
// to bin 1; values below that go to bin 1 too.
#define HIST_BASE 1.01
#define HIST_MIN 1e-6
static double log_base;

void sim_hist_init(sim_hist *h) {
    memset(h, 0, sizeof *h);
    log_base = log(HIST_BASE);
}

void sim_hist_free(sim_hist *h) {
    free(h->count);
    memset(h, 0, sizeof *h);
}

void sim_hist_add(sim_hist *h, double v, uint64_t w) {
    if (w == 0) return;
    size_t b = 0;
    if (v > 0) {
        double x = v < HIST_MIN ? HIST_MIN : v;
        b = 1 + (size_t)floor(log(x / HIST_MIN) / log_base);
    }
    if (b >= h->nbins) {
        size_t cap = h->nbins;
        kvf_grow((void **)&h->count, &cap, b + 1, sizeof *h->count);
        memset(h->count + h->nbins, 0, (cap - h->nbins) * sizeof *h->count);
        h->nbins = cap;
    }
    h->count[b] += w;
    h->total += w;
    h->sum += v * (double)w;
}

double sim_hist_percentile(const sim_hist *h, double p) {
    if (!h->total) return 0;
    double want = p / 100.0 * (double)h->total;
    uint64_t acc = 0;
    for (size_t b = 0; b < h->nbins; b++) {
        acc += h->count[b];
        if ((double)acc >= want && h->count[b]) {
            if (b == 0) return 0;
            // geometric middle of the bin
            return HIST_MIN * pow(HIST_BASE, (double)(b - 1) + 0.5);
        }
    }
    return HIST_MIN * pow(HIST_BASE, (double)h->nbins);
}

void sim_samples_add(sim_samples *s, double v) {
    if (s->n == s->cap) kvf_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v);
    s->v[s->n++] = v;
}

void sim_samples_free(sim_samples *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
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
    sim_samples_free(&m->queue_len);
    sim_hist_free(&m->itl_ms);
}
