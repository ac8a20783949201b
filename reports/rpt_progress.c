// reports/rpt_progress.c -- a progress bar on stderr for long runs and sweeps.
//
// Draws only when stderr is a terminal (so logs and pipes stay clean) and at most ten times a
// second; the ETA extrapolates the average rate since rpt_progress_init. Wall-clock time is
// used for display only and never reaches a result.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rpt.h"

#define BAR_WIDTH 30

void rpt_progress_init(rpt_progress *p, const char *label, double total) {
    memset(p, 0, sizeof *p);
    p->label = label ? label : "";
    p->total = total;
    p->start_ns = kvf_wall_ns();
    p->last_ns = 0;
    p->enabled = isatty(2) == 1;
}

static void fmt_secs(double s, char *out, size_t n) {
    if (!(s >= 0) || s > 1e7)
        snprintf(out, n, "--:--");
    else if (s >= 3600)
        snprintf(out, n, "%d:%02d:%02d", (int)(s / 3600), (int)(s / 60) % 60, (int)s % 60);
    else
        snprintf(out, n, "%02d:%02d", (int)(s / 60), (int)s % 60);
}

static void draw(rpt_progress *p, double done, int64_t now) {
    double frac = p->total > 0 ? done / p->total : 0;
    if (frac < 0) frac = 0;
    if (frac > 1) frac = 1;
    double el = (double)(now - p->start_ns) / 1e9;
    double eta = frac > 0 ? el * (1 - frac) / frac : -1;
    char bar[BAR_WIDTH + 1], e1[32], e2[32];
    int fill = (int)(frac * BAR_WIDTH + 0.5);
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    fmt_secs(el, e1, sizeof e1);
    fmt_secs(eta, e2, sizeof e2);
    fprintf(stderr, "\r%s [%s] %5.1f%% %.0f/%.0f  %s elapsed  ETA %s ", p->label, bar,
            frac * 100, done, p->total, e1, e2);
    fflush(stderr);
    p->drawn = true;
}

void rpt_progress_update(rpt_progress *p, double done) {
    if (!p || !p->enabled) return;
    int64_t now = kvf_wall_ns();
    if (p->last_ns && now - p->last_ns < 100000000LL) return;
    p->last_ns = now;
    draw(p, done, now);
}

void rpt_progress_done(rpt_progress *p) {
    if (!p || !p->enabled) return;
    draw(p, p->total, kvf_wall_ns());
    fputc('\n', stderr);
    p->enabled = false;
}
