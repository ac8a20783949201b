// reports/rpt_progress.c -- progress of long commands on stderr (rpt.h).
//
// On a terminal: a bar redrawn in place, at most ten times a second. Anywhere else (a log
// file, a pipe, CI): one plain line every interval_s seconds of wall-clock time (KVF_PROGRESS_S,
// default 10; 0 = none), the first one interval_s after the start, so a command shorter than
// that prints nothing. Wall-clock time is used for display only and never reaches a result.
//
// A simulation's fraction done is simulated time over the span it covers when the span is
// known (a multi-day run serves many more requests than a rate x duration count suggests),
// otherwise arrivals over the expected arrivals; it is clamped to [0, 1], and a count that has
// passed its expected total is shown as a count alone -- never "100.0% 11058/120".
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpt.h"
#include "rpt_util.h"

#define BAR_WIDTH 24
#define TTY_PERIOD_NS 100000000LL   // redraw a terminal bar at most every 0.1 s

double rpt_progress_interval_s(void) {
    const char *e = getenv("KVF_PROGRESS_S");
    if (!e || !*e) return 10;
    char *end = NULL;
    double v = strtod(e, &end);
    if (end == e || !(v >= 0) || !isfinite(v)) return 10;   // unreadable: the default
    return v;
}

static void start(rpt_progress *p, const char *label) {
    memset(p, 0, sizeof *p);
    p->label = label ? label : "";
    p->start_ns = kvf_wall_ns();
    p->tty = isatty(2) == 1;
    p->interval_s = rpt_progress_interval_s();
    p->enabled = p->tty || p->interval_s > 0;
    p->rate_ns = p->start_ns;
}

void rpt_progress_init(rpt_progress *p, const char *label, double total) {
    KVF_ASSERT(p);
    start(p, label);
    p->total = total;
}

void rpt_progress_init_sim(rpt_progress *p, const char *label, double span_s, double arrivals) {
    KVF_ASSERT(p);
    start(p, label);
    p->sim = true;
    p->span_s = span_s > 0 && isfinite(span_s) ? span_s : 0;
    p->arrivals = arrivals > 0 && isfinite(arrivals) ? arrivals : 0;
}

void rpt_progress_set_interval(rpt_progress *p, double interval_s) {
    KVF_ASSERT(p && interval_s >= 0);
    p->interval_s = interval_s;
    p->enabled = p->tty || interval_s > 0;
}

void rpt_progress_disable(rpt_progress *p) {
    if (p) p->enabled = false;
}

static void fmt_clock(double s, char *out, size_t n) {
    if (!(s >= 0) || s > 1e7)
        snprintf(out, n, "--:--");
    else if (s >= 3600)
        snprintf(out, n, "%d:%02d:%02d", (int)(s / 3600), (int)(s / 60) % 60, (int)s % 60);
    else
        snprintf(out, n, "%02d:%02d", (int)(s / 60), (int)s % 60);
}

static double clamp01(double x) {
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

// The fraction done, or -1 when it cannot be told.
static double fraction(const rpt_progress *p, double done) {
    if (p->sim) {
        if (p->span_s > 0) return clamp01(p->last.sim_s / p->span_s);
        if (p->arrivals > 0 && p->last.arrived <= p->arrivals)
            return clamp01(p->last.arrived / p->arrivals);
        return -1;
    }
    if (p->total > 0 && done <= p->total) return clamp01(done / p->total);
    return -1;
}

// What has been done, in words: "3/6", "45210 of 110000 arrivals (41.1 %)", "11058 done".
static void what_done(const rpt_progress *p, double done, char *out, size_t n) {
    char a[32], b[32], c[32];
    if (!p->sim) {
        if (p->total > 0 && done <= p->total)
            snprintf(out, n, "%.0f/%.0f", done, p->total);
        else
            snprintf(out, n, "%.0f done", done);
        return;
    }
    rpt_fmt_duration(p->last.sim_s, a, sizeof a);
    size_t k = 0;
    if (p->span_s > 0) {
        rpt_fmt_duration(p->span_s, b, sizeof b);
        k += (size_t)snprintf(out + k, n - k, "simulated %s of %s", a, b);
    } else {
        k += (size_t)snprintf(out + k, n - k, "simulated %s", a);
    }
    if (k >= n) return;
    if (p->arrivals > 0 && p->last.arrived <= p->arrivals) {
        rpt_fmt_pct(p->last.arrived / p->arrivals, c, sizeof c);
        snprintf(out + k, n - k, ", %.0f of %.0f arrivals (%s)", p->last.arrived, p->arrivals, c);
    } else {
        snprintf(out + k, n - k, ", %.0f arrivals", p->last.arrived);
    }
}

// Events per second since the previous draw (the whole run's rate on the first).
static double event_rate(rpt_progress *p, int64_t now) {
    double dt = (double)(now - p->rate_ns) / 1e9;
    double r = dt > 0 ? (p->last.events - p->rate_events) / dt : 0;
    p->rate_ns = now;
    p->rate_events = p->last.events;
    return r;
}

static void draw(rpt_progress *p, double done, int64_t now, bool final) {
    double frac = fraction(p, done);
    double el = (double)(now - p->start_ns) / 1e9;
    double eta = frac > 0 ? el * (1 - frac) / frac : -1;
    char e1[32], e2[32], wd[200], pct[32] = "", ev[64] = "";
    what_done(p, done, wd, sizeof wd);
    if (frac >= 0) snprintf(pct, sizeof pct, "%5.1f%%", 100 * frac);
    if (p->sim) {
        char r[32];
        double rate = event_rate(p, now);
        if (final) rate = el > 0 ? p->last.events / el : 0;   // the whole run's rate
        rpt_fmt_sig(rate, 3, r, sizeof r);
        snprintf(ev, sizeof ev, ", %s events/s", r);
    }
    if (p->tty) {
        char bar[BAR_WIDTH + 1];
        int fill = frac >= 0 ? (int)(frac * BAR_WIDTH + 0.5) : 0;
        for (int i = 0; i < BAR_WIDTH; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[BAR_WIDTH] = '\0';
        fmt_clock(el, e1, sizeof e1);
        fmt_clock(eta, e2, sizeof e2);
        fprintf(stderr, "\r%s [%s] %s %s%s  %s elapsed  ETA %s \033[K", p->label, bar,
                frac >= 0 ? pct : "", wd, ev, e1, frac >= 0 ? e2 : "--:--");
    } else {
        if (frac >= 0) snprintf(pct, sizeof pct, "%.1f%%", 100 * frac);
        rpt_fmt_duration(el, e1, sizeof e1);
        rpt_fmt_duration(eta, e2, sizeof e2);
        fprintf(stderr, "%s: %s%s%s, elapsed %s%s%s%s\n", p->label, frac >= 0 ? pct : "",
                frac >= 0 ? " done, " : "", wd, e1, ev, final || frac < 0 ? "" : ", ETA ",
                final || frac < 0 ? "" : e2);
        p->lines++;
    }
    fflush(stderr);
    p->drawn = true;
}

// Whether it is time for the next draw.
static bool due(rpt_progress *p, int64_t now) {
    int64_t period = p->tty ? TTY_PERIOD_NS : (int64_t)(p->interval_s * 1e9);
    int64_t since = p->last_ns ? p->last_ns : (p->tty ? 0 : p->start_ns);
    if (since && now - since < period) return false;
    p->last_ns = now;
    return true;
}

void rpt_progress_update(rpt_progress *p, double done) {
    if (!p || !p->enabled) return;
    int64_t now = kvf_wall_ns();
    if (due(p, now)) draw(p, done, now, false);
}

void rpt_progress_sim(rpt_progress *p, const rpt_progress_state *st) {
    if (!p || !p->enabled) return;
    KVF_ASSERT(st && p->sim);
    p->last = *st;
    int64_t now = kvf_wall_ns();
    if (due(p, now)) draw(p, st->finished, now, false);
}

void rpt_progress_sim_done(rpt_progress *p, const rpt_progress_state *st) {
    if (!p || !p->enabled) return;
    KVF_ASSERT(st && p->sim);
    p->last = *st;
    rpt_progress_done(p);
}

void rpt_progress_done(rpt_progress *p) {
    if (!p || !p->enabled) return;
    int64_t now = kvf_wall_ns();
    if (p->tty) {
        draw(p, p->sim ? p->last.finished : p->total, now, true);
        fputc('\n', stderr);
    } else if (p->lines) {   // a log that had lines gets the last one too
        draw(p, p->sim ? p->last.finished : p->total, now, true);
    }
    p->enabled = false;
}
