// traces/trc_cli.c -- `kvfleet trace stats|gen|convert`. Parses arguments, drives the library,
// prints results; bad usage or input -> "kvfleet: <msg>" on stderr and exit code 2.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trc_int.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage:\n"
            "  kvfleet trace stats FILE [--format F] [--block-tokens N] [--json] [SHAPING]\n"
            "      [--cache-tokens N,N,...]\n"
            "  kvfleet trace gen --profile chatbot|agent|coding|mixed [--rate R] [--duration S]\n"
            "      [--arrival poisson|gamma|diurnal] [--cv X] [--input-len N] [--output-len N]\n"
            "      [--lengths FILE] [--images P] [--turns X] [--system-tokens N]\n"
            "      [--max-requests N] [--block-tokens N] [--seed N] [-o FILE] [--force]\n"
            "      days of returning sessions: --days D [--amplitude A] [--peak-hour H]\n"
            "      [--weekend-ratio X] [--start-weekday 0-6] [--warmup-days D]\n"
            "      [--return CLASS=P,MEDIAN_H,SIGMA]...   (CLASS chatbot|agent|coding)\n"
            "  kvfleet trace convert FILE -o OUT.jsonl [--force] [--format F] [--block-tokens N]\n"
            "      [SHAPING]\n"
            "  -o FILE is written beside itself and renamed into place; an existing FILE is kept\n"
            "  unless --force, and FILE may never be the input itself\n"
            "SHAPING: [--limit N] [--time-scale X] [--length-scale X] [--rate R] [--start S]\n"
            "         [--end S] [--bucket as_recorded|spread] [--seed N] [--skip-bad]\n"
            "         [--session-rate R] [--session-users N] [--source-block-tokens N]\n"
            "environment: KVFLEET_TRACE_CACHE=1 keeps a binary copy of each parsed trace in\n"
            "  $XDG_CACHE_HOME/kvfleet (else ~/.cache/kvfleet) that later reads replay\n"
            "formats: auto mooncake azure burstgpt sessions kvfleet\n");
}

static int fail(const char *fmt, const char *a) {
    fprintf(stderr, "kvfleet: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\n");
    return 2;
}

static bool num(const char *s, double *out) {
    if (!s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v)) return false;
    *out = v;
    return true;
}

static bool u64(const char *s, uint64_t *out) {
    double v;
    if (!num(s, &v) || v < 0 || v != floor(v) || v > 1.8e19) return false;
    *out = (uint64_t)v;
    return true;
}

// Parses a shaping option at argv[*i]; 1 = consumed, 0 = not a shaping option, -1 = bad.
static int shaping(int argc, char **argv, int *i, trc_options *o) {
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    double d;
    uint64_t n;
    if (!strcmp(a, "--skip-bad")) {
        o->skip_bad = true;
        return 1;
    }
#define NEEDV                                                                                      \
    do {                                                                                           \
        if (!v) return fail("%s needs a value", a), -1;                                            \
        (*i)++;                                                                                    \
    } while (0)
    if (!strcmp(a, "--format")) {
        NEEDV;
        if (!trc_format_parse(v, &o->format)) return fail("unknown format '%s'", v), -1;
    } else if (!strcmp(a, "--block-tokens")) {
        NEEDV;
        if (!u64(v, &n) || n < 1 || n > 1 << 20) return fail("bad --block-tokens '%s'", v), -1;
        o->block_tokens = (uint32_t)n;
    } else if (!strcmp(a, "--source-block-tokens")) {
        NEEDV;
        if (!u64(v, &n) || n < 1 || n > 1 << 20)
            return fail("bad --source-block-tokens '%s'", v), -1;
        o->source_block_tokens = (uint32_t)n;
    } else if (!strcmp(a, "--limit")) {
        NEEDV;
        if (!u64(v, &n) || n < 1) return fail("bad --limit '%s'", v), -1;
        o->limit_requests = (int64_t)n;
    } else if (!strcmp(a, "--time-scale")) {
        NEEDV;
        if (!num(v, &d) || d <= 0) return fail("bad --time-scale '%s'", v), -1;
        o->time_scale = d;
    } else if (!strcmp(a, "--length-scale")) {
        NEEDV;
        if (!num(v, &d) || d <= 0) return fail("bad --length-scale '%s'", v), -1;
        o->length_scale = d;
    } else if (!strcmp(a, "--rate")) {
        NEEDV;
        if (!num(v, &d) || d <= 0) return fail("bad --rate '%s'", v), -1;
        o->rate_rps = d;
    } else if (!strcmp(a, "--start") || !strcmp(a, "--end")) {
        NEEDV;
        int64_t ns;
        if (!kvf_parse_duration_ns(v, &ns)) return fail("bad duration '%s'", v), -1;
        if (a[2] == 's')
            o->start_ns = ns;
        else
            o->end_ns = ns;
    } else if (!strcmp(a, "--bucket")) {
        NEEDV;
        if (!strcmp(v, "spread"))
            o->bucket = TRC_BUCKET_SPREAD;
        else if (!strcmp(v, "as_recorded"))
            o->bucket = TRC_BUCKET_AS_RECORDED;
        else
            return fail("bad --bucket '%s' (as_recorded or spread)", v), -1;
    } else if (!strcmp(a, "--seed")) {
        NEEDV;
        if (!u64(v, &n)) return fail("bad --seed '%s'", v), -1;
        o->seed = n;
    } else if (!strcmp(a, "--session-rate")) {
        NEEDV;
        if (!num(v, &d) || d <= 0) return fail("bad --session-rate '%s'", v), -1;
        o->session_rate = d;
    } else if (!strcmp(a, "--session-users")) {
        NEEDV;
        if (!u64(v, &n) || n < 1 || n > 1000000) return fail("bad --session-users '%s'", v), -1;
        o->session_users = (uint32_t)n;
    } else
        return 0;
#undef NEEDV
    return 1;
}

static void print_len(const char *name, const trc_len_stats *l) {
    printf("%-15s mean %10.1f  p50 %9.0f  p90 %9.0f  p99 %9.0f  max %9llu\n", name, l->mean, l->p50,
           l->p90, l->p99, (unsigned long long)l->max);
}

static int cmd_stats(int argc, char **argv) {
    trc_options o;
    trc_options_default(&o);
    const char *path = NULL;
    bool json = false;
    double sizes[TRC_STATS_MAX_SIZES];
    uint32_t nsizes = 0;
    for (int i = 1; i < argc; i++) {
        int rc = shaping(argc, argv, &i, &o);
        if (rc < 0) return 2;
        if (rc) continue;
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--cache-tokens") && i + 1 < argc) {
            char *list = argv[++i], *save = NULL;
            for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                double b;
                if (nsizes == TRC_STATS_MAX_SIZES) return fail("at most 8 cache sizes%s", "");
                if (!num(t, &b) || b < 1) return fail("bad cache size '%s'", t);
                sizes[nsizes++] = b;
            }
        } else if (!strcmp(argv[i], "--cache-tokens"))
            return fail("trace stats: option '%s' needs a value", argv[i]);
        else if (argv[i][0] == '-')
            return fail("trace stats: unknown option '%s'", argv[i]);
        else if (!path)
            path = argv[i];
        else
            return fail("trace stats: unexpected argument '%s'", argv[i]);
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    kvf_err err = {0};
    trc_reader *r;
    kvf_status st = trc_reader_open(&r, path, &o, &err);
    if (st) return fprintf(stderr, "kvfleet: %s\n", err.msg), kvf_exit_code(st);
    trc_stats s;
    st = trc_stats_compute(r, nsizes ? sizes : NULL, nsizes, &s, &err);
    trc_reader_close(r);
    if (st) return fprintf(stderr, "kvfleet: %s\n", err.msg), kvf_exit_code(st);
    if (json) {
        char *j = trc_stats_json(&s);
        printf("%s\n", j);
        free(j);
        return 0;
    }
    printf("trace           %s (%s)\n", path, trc_format_name(s.format));
    printf("notes           %s\n", s.notes);
    printf("requests        %llu (sessions %llu, closed-loop %llu, failed %llu, images %llu, "
           "skipped lines %llu)\n",
           (unsigned long long)s.requests, (unsigned long long)s.sessions,
           (unsigned long long)s.closed_loop, (unsigned long long)s.failed,
           (unsigned long long)s.with_images, (unsigned long long)s.skipped);
    printf("span            %.1f s, rate %.3f req/s, inter-arrival CV %.3f\n", s.span_s, s.rate_rps,
           s.interarrival_cv);
    print_len("input tokens", &s.input_tokens);
    print_len("output tokens", &s.output_tokens);
    printf("classes        ");
    for (int c = 0; c < TRC_CLASS_COUNT; c++)
        if (s.classes[c]) printf(" %s %llu", trc_class_name(c), (unsigned long long)s.classes[c]);
    printf("\n");
    printf("ideal hit rate  %.4f (%llu of %llu input tokens; %u-token blocks, %llu distinct)\n",
           s.ideal_hit_rate, (unsigned long long)s.hit_tokens,
           (unsigned long long)s.input_tokens.total, s.block_tokens,
           (unsigned long long)s.distinct_blocks);
    if (s.closed_loop)   // the simulator's store keeps a turn's answer for the next turn
        printf("                each closed-loop turn's answer counted as computed by the turn "
               "before it (%llu turns)\n",
               (unsigned long long)s.closed_loop);
    for (uint32_t i = 0; i < s.n_sizes; i++)
        printf("  LRU %12.0f tokens: hit rate %.4f\n", s.cache_tokens[i], s.cache_hit_rate[i]);
    return 0;
}

static int copy_out(trc_reader *r, const char *out, uint32_t bt, bool force, const char *input) {
    kvf_err err = {0};
    trc_writer *w;
    kvf_status st = trc_writer_create(&w, out, bt, force ? TRC_W_FORCE : 0, input, &err);
    if (st) return fprintf(stderr, "kvfleet: %s\n", err.msg), kvf_exit_code(st);
    trc_request q;
    int rc;
    uint64_t n = 0;
    while ((rc = trc_reader_next(r, &q, &err)) == 1) {
        if ((st = trc_writer_put(w, &q, &err))) break;
        n++;
    }
    if (rc < 0) st = err.code ? err.code : KVF_EPARSE;
    kvf_err err2 = {0};
    kvf_status st2 = KVF_OK;
    if (st)
        trc_writer_discard(w);   // a failed read keeps any earlier output
    else
        st2 = trc_writer_close(w, &err2);
    if (st) return fprintf(stderr, "kvfleet: %s\n", err.msg), kvf_exit_code(st);
    if (st2) return fprintf(stderr, "kvfleet: %s\n", err2.msg), kvf_exit_code(st2);
    if (strcmp(out, "-"))
        fprintf(stderr, "kvfleet: wrote %llu requests to %s (%s)\n", (unsigned long long)n, out,
                trc_reader_notes(r));
    return 0;
}

static int cmd_convert(int argc, char **argv) {
    trc_options o;
    trc_options_default(&o);
    const char *path = NULL, *out = NULL;
    bool force = false;
    for (int i = 1; i < argc; i++) {
        int rc = shaping(argc, argv, &i, &o);
        if (rc < 0) return 2;
        if (rc) continue;
        if (!strcmp(argv[i], "--force"))
            force = true;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "-o"))
            return fail("trace convert: option '%s' needs a value", argv[i]);
        else if (argv[i][0] == '-')
            return fail("trace convert: unknown option '%s'", argv[i]);
        else if (!path)
            path = argv[i];
        else
            return fail("trace convert: unexpected argument '%s'", argv[i]);
    }
    if (!path || !out) {
        usage(stderr);
        return 2;
    }
    kvf_err err = {0};
    trc_reader *r;
    // the output is checked before the input is read: a refusal costs nothing
    kvf_status st = strcmp(out, "-") ? trc_output_check(out, path, force, &err) : KVF_OK;
    if (st) return fprintf(stderr, "kvfleet: %s\n", err.msg), kvf_exit_code(st);
    st = trc_reader_open(&r, path, &o, &err);
    if (st) return fprintf(stderr, "kvfleet: %s\n", err.msg), kvf_exit_code(st);
    int rc = copy_out(r, out, o.block_tokens, force, path);
    trc_reader_close(r);
    return rc;
}

static int cmd_gen(int argc, char **argv) {
    trc_gen_options g;
    trc_gen_options_default(&g);
    const char *out = "-";
    bool have_profile = false, force = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        uint64_t n;
        if (!strcmp(a, "--force")) {
            force = true;
            continue;
        }
        if (!v && a[0] == '-' && a[1] == '-')
            return fail("trace gen: option '%s' needs a value", a);
        if (!v && !strcmp(a, "-o")) return fail("trace gen: option '%s' needs a value", a);
        if (!v) return fail("trace gen: unknown option '%s'", a);
        i++;
        if (!strcmp(a, "--profile")) {
            if (!trc_gen_profile_parse(v, &g.profile)) return fail("unknown profile '%s'", v);
            have_profile = true;
        } else if (!strcmp(a, "--rate")) {
            if (!num(v, &d) || d <= 0) return fail("bad --rate '%s'", v);
            g.rate_rps = d;
        } else if (!strcmp(a, "--duration")) {
            int64_t ns;
            if (!kvf_parse_duration_ns(v, &ns) || ns <= 0) return fail("bad --duration '%s'", v);
            g.duration_s = (double)ns / 1e9;
        } else if (!strcmp(a, "--arrival")) {
            if (!trc_arrival_parse(v, &g.arrival)) return fail("unknown arrival '%s'", v);
        } else if (!strcmp(a, "--cv")) {
            if (!num(v, &d) || d <= 0) return fail("bad --cv '%s'", v);
            g.cv = d;
        } else if (!strcmp(a, "--input-len")) {
            if (!u64(v, &n) || n < 1 || n > 1 << 30) return fail("bad --input-len '%s'", v);
            g.input_len = (uint32_t)n;
        } else if (!strcmp(a, "--output-len")) {
            if (!u64(v, &n) || n < 1 || n > 1 << 30) return fail("bad --output-len '%s'", v);
            g.output_len = (uint32_t)n;
        } else if (!strcmp(a, "--lengths"))
            g.lengths_path = v;
        else if (!strcmp(a, "--images")) {
            if (!num(v, &d) || d < 0 || d > 1) return fail("bad --images '%s' (0..1)", v);
            g.images_p = d;
        } else if (!strcmp(a, "--seed")) {
            if (!u64(v, &n)) return fail("bad --seed '%s'", v);
            g.seed = n;
        } else if (!strcmp(a, "--think")) {
            if (!num(v, &d) || d < 0) return fail("bad --think '%s' (seconds >= 0)", v);
            g.think_s = d;
            g.closed_loop = true;
        } else if (!strcmp(a, "--turns")) {
            if (!num(v, &d) || d < 1) return fail("bad --turns '%s' (>= 1)", v);
            g.mean_turns = d;
        } else if (!strcmp(a, "--system-tokens")) {
            if (!u64(v, &n) || n > 1 << 24) return fail("bad --system-tokens '%s'", v);
            g.system_tokens = (int32_t)n;
        } else if (!strcmp(a, "--max-requests")) {
            if (!u64(v, &n) || n < 1) return fail("bad --max-requests '%s'", v);
            g.max_requests = (int64_t)n;
        } else if (!strcmp(a, "--block-tokens")) {
            if (!u64(v, &n) || n < 1 || n > 1 << 20) return fail("bad --block-tokens '%s'", v);
            g.block_tokens = (uint32_t)n;
        } else if (!strcmp(a, "--days")) {
            if (!num(v, &d) || !(d > 0)) return fail("bad --days '%s' (> 0)", v);
            g.days = d;
        } else if (!strcmp(a, "--amplitude")) {
            if (!num(v, &d)) return fail("bad --amplitude '%s'", v);
            g.diurnal_amplitude = d;
        } else if (!strcmp(a, "--peak-hour")) {
            if (!num(v, &d)) return fail("bad --peak-hour '%s'", v);
            g.peak_hour = d;
        } else if (!strcmp(a, "--weekend-ratio")) {
            if (!num(v, &d)) return fail("bad --weekend-ratio '%s'", v);
            g.weekend_ratio = d;
        } else if (!strcmp(a, "--start-weekday")) {
            if (!u64(v, &n) || n > 6) return fail("bad --start-weekday '%s' (0 = Monday .. 6)", v);
            g.start_weekday = (uint32_t)n;
        } else if (!strcmp(a, "--warmup-days")) {
            if (!num(v, &d)) return fail("bad --warmup-days '%s'", v);
            g.warmup_days = d;
        } else if (!strcmp(a, "--return")) {
            static const char *cls[3] = {"chatbot", "agent", "coding"};
            char name[16];
            double p, med, sg;
            int k = -1;
            if (sscanf(v, "%15[a-z]=%lf,%lf,%lf", name, &p, &med, &sg) == 4)
                for (int c = 0; c < 3; c++)
                    if (!strcmp(name, cls[c])) k = c;
            if (k < 0) return fail("bad --return '%s' (CLASS=P,MEDIAN_H,SIGMA)", v);
            g.ret[k] = (trc_gen_return){p, med, sg};
        } else if (!strcmp(a, "-o"))
            out = v;
        else
            return fail("trace gen: unknown option '%s'", a);
    }
    if (!have_profile) return fail("trace gen: --profile is required%s", "");
    kvf_err err = {0};
    trc_reader *r;
    kvf_status st = strcmp(out, "-") ? trc_output_check(out, g.lengths_path, force, &err) : KVF_OK;
    if (st) return fprintf(stderr, "kvfleet: %s\n", err.msg), kvf_exit_code(st);
    st = trc_gen_open(&r, &g, NULL, &err);
    if (st) return fprintf(stderr, "kvfleet: %s\n", err.msg), kvf_exit_code(st);
    int rc = copy_out(r, out, g.block_tokens, force, g.lengths_path);
    trc_reader_close(r);
    return rc;
}

int trc_cli_main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    bool known =
        !strcmp(argv[1], "stats") || !strcmp(argv[1], "gen") || !strcmp(argv[1], "convert");
    if (known && kvf_cli_help(argc - 1, argv + 1)) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "stats")) return cmd_stats(argc - 1, argv + 1);
    if (!strcmp(argv[1], "gen")) return cmd_gen(argc - 1, argv + 1);
    if (!strcmp(argv[1], "convert")) return cmd_convert(argc - 1, argv + 1);
    fprintf(stderr, "kvfleet: unknown trace command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
