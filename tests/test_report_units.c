// tests/test_report_units.c -- what a run's printed summary, report and trace show: byte
// counts in units, legends with their underscores, time-series charts from zero (a constant
// decode count is not drawn on the x axis), vision GPUs in the GPUs line, and the Perfetto
// trace of --trace-out (named tracks per instance for steps, KV transfers, storage reads and
// writes and queue depth, parsed with jansson), which leaves the run's results unchanged.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/kvt.h"
#include "kvf.h"
#include "rpt_util.h"
#include "sim_trace.h"

START_TEST(test_bytes_formatting) {
    char s[64];
    ck_assert_str_eq(rpt_fmt_bytes(9.99e12, s, sizeof s), "9.99 TB");
    ck_assert_str_eq(rpt_fmt_bytes(9999992488000.0, s, sizeof s), "10 TB");
    ck_assert_str_eq(rpt_fmt_bytes(512, s, sizeof s), "512 B");
    ck_assert_str_eq(rpt_fmt_bytes(1536000, s, sizeof s), "1.54 MB");
    ck_assert_str_eq(rpt_fmt_bytes(8388608, s, sizeof s), "8.39 MB");
    ck_assert_str_eq(rpt_fmt_bytes(192778600400.0, s, sizeof s), "193 GB");
    ck_assert_str_eq(rpt_fmt_bytes(NAN, s, sizeof s), "n/a");
    ck_assert(rpt_key_is_bytes("cache.stored_bytes_peak"));
    ck_assert(rpt_key_is_bytes("cache.block_bytes"));
    ck_assert(rpt_key_is_bytes("kv_store_bytes"));
    ck_assert(!rpt_key_is_bytes("economics.ssd_bytes_per_daily_token"));
    ck_assert(!rpt_key_is_bytes("ttft_ms.p90"));
    ck_assert_str_eq(rpt_fmt_keyed("cache.stored_bytes_peak", 2.5e9, s, sizeof s), "2.5 GB");
    ck_assert_str_eq(rpt_fmt_keyed("requests.arrived", 12031, s, sizeof s), "12031");
}
END_TEST

// One unit system: fractions in percent, durations and bytes by magnitude, 3-4 significant
// digits, never an exponent or 17 digits.
START_TEST(test_units_by_key) {
    char s[64];
    ck_assert_str_eq(rpt_fmt_keyed("economics.margin", 0.4988, s, sizeof s), "49.9 %");
    ck_assert_str_eq(rpt_fmt_keyed("slo.attainment", 1.0, s, sizeof s), "100 %");
    ck_assert_str_eq(rpt_fmt_keyed("cache.hit_rate", 0.0012, s, sizeof s), "0.120 %");
    ck_assert_str_eq(rpt_fmt_keyed("utilization.decode", 0.973461456, s, sizeof s), "97.3 %");
    ck_assert_str_eq(rpt_fmt_keyed("cache.by_tier.ssd", 0.098, s, sizeof s), "9.80 %");
    ck_assert_str_eq(rpt_fmt_keyed("e2e_ms.p99", 6812754.7, s, sizeof s), "1.89 h");
    ck_assert_str_eq(rpt_fmt_keyed("ttft_ms.p90", 942.77, s, sizeof s), "943 ms");
    ck_assert_str_eq(rpt_fmt_keyed("ttft_ms.p99", 5403.15, s, sizeof s), "5.40 s");
    ck_assert_str_eq(rpt_fmt_keyed("slo.tpot_p90_ms", 50, s, sizeof s), "50.0 ms");
    ck_assert_str_eq(rpt_fmt_keyed("sim.simulated_s", 151.678, s, sizeof s), "2.53 min");
    ck_assert_str_eq(rpt_fmt_keyed("sim.simulated_s", 3 * 86400.0, s, sizeof s), "3.00 d");
    ck_assert_str_eq(rpt_fmt_keyed("economics.payback_days", 266.12, s, sizeof s), "266 d");
    ck_assert_str_eq(rpt_fmt_keyed("economics.payback_days", INFINITY, s, sizeof s), "never");
    ck_assert_str_eq(rpt_fmt_keyed("economics.cost_per_mtok_usd.input", 0.06003542, s, sizeof s),
                     "$0.0600");
    ck_assert_str_eq(rpt_fmt_keyed("economics.cost_per_day_usd", 12765.4, s, sizeof s), "$12,765");
    ck_assert_str_eq(rpt_fmt_keyed("economics.capex_usd", 4.32e7, s, sizeof s), "$43.2 M");
    ck_assert_str_eq(rpt_fmt_keyed("throughput.output_tok_s", 963.05, s, sizeof s), "963 tokens/s");
    ck_assert_str_eq(rpt_fmt_keyed("throughput.input_tok_s", 37649.0, s, sizeof s),
                     "37.6 k tokens/s");
    ck_assert_str_eq(rpt_fmt_keyed("cache.stored_bytes_peak", 3.2e15, s, sizeof s), "3.2 PB");
    ck_assert_str_eq(rpt_fmt_keyed("gpu_hours", 0.2527968535, s, sizeof s), "0.2528");
    ck_assert_str_eq(rpt_fmt_keyed("sim.events", 29554, s, sizeof s), "29554");
    ck_assert_str_eq(rpt_fmt_keyed("sim.events", 1.234e9, s, sizeof s), "1.234 G");
    ck_assert_str_eq(rpt_fmt_text_value("0.69999999999999996", s, sizeof s), "0.7");
    ck_assert_str_eq(rpt_fmt_text_value("cache_aware", s, sizeof s), "cache_aware");
    ck_assert_str_eq(rpt_fmt_text_value("12", s, sizeof s), "12");
    rpt_buf tb = {0};
    rpt_buf_text_numbers(&tb, "sample_rate: 0.69999999999999996\nv2: [0.10000000000000001, 3]\n"
                              "id a1234567890123456789 -2.5");
    ck_assert_str_eq(tb.p, "sample_rate: 0.7\nv2: [0.1, 3]\nid a1234567890123456789 -2.5");
    rpt_buf_free(&tb);
    char w[128];
    rpt_key_words("cache.by_tier.hbm", w, sizeof w);   // a headline figure: its label
    ck_assert_str_eq(w, "hits from HBM");
    rpt_key_words("cache.by_tier_tokens.ssd", w, sizeof w);
    ck_assert_str_eq(w, "cache, by tier tokens, SSD");
    rpt_key_words("economics.cost_per_mtok_usd.input", w, sizeof w);
    ck_assert_str_eq(w, "cost per million input tokens");
    rpt_key_words("throughput.decode_output_tok_s_per_gpu", w, sizeof w);
    ck_assert_str_eq(w, "decode output tokens/s per GPU");
    rpt_key_words("saturation.wait_growth_s", w, sizeof w);
    ck_assert_str_eq(w, "saturation, wait growth");
    rpt_key_words("gen_tok_s_per_request.p50", w, sizeof w);
    ck_assert_str_eq(w, "generation tokens/s per request, p50");
    rpt_key_words("sim.events_per_s", w, sizeof w);
    ck_assert_str_eq(w, "sim, events");
    ck_assert_str_eq(rpt_fmt_keyed("cache.by_tier_tokens.hbm", 22169600, s, sizeof s), "22.17 M");
    ck_assert_str_eq(rpt_fmt_keyed("cache.load_bytes.ssd", 7.337e10, s, sizeof s), "73.4 GB");
    ck_assert_str_eq(rpt_fmt_keyed("economics.trace_start_utc_s", 0, s, sizeof s), "0 s");
}
END_TEST

// A quickstart run's report: units, legends, chart ranges.
START_TEST(test_report_units_and_charts) {
    kvt_tmp_make("kvf_rep_units");
    int rc = kvt_sh("%s run scenarios/quickstart.yaml --set workload.limit_requests=400 "
                    "-q -o %s/r",
                    kvt_bin(), kvt_tmp);
    ck_assert_msg(rc == 0, "run exited %d: %s", rc, kvt_err);
    char p[256];
    snprintf(p, sizeof p, "%s/r/report.md", kvt_tmp);
    char *md = kvt_slurp(p);
    // the KV store peak in units, never as a bare 10+ digit count
    const char *row = strstr(md, "| KV store peak |");
    ck_assert_msg(row, "no KV store peak row");
    ck_assert_msg(strstr(row, " GB |") || strstr(row, " TB |") || strstr(row, " MB |"),
                  "KV store peak: %.80s", row);
    row = strstr(md, "| cache, block bytes |");
    ck_assert_msg(row && !strncmp(row, "| cache, block bytes | 8.39 MB |", 32), "%.60s",
                  row ? row : "(no block_bytes row)");
    // no figure as a bare fraction or in 17 digits
    ck_assert_msg(!strstr(md, "99999999") && !strstr(md, "00000001"),
                  "17-digit numbers in report.md");
    row = strstr(md, "| margin |");
    ck_assert_msg(row && strstr(row, " %"), "margin not in percent: %.60s", row ? row : "");
    free(md);
    snprintf(p, sizeof p, "%s/r/report_files/charts.gp", kvt_tmp);
    char *gp = kvt_slurp(p);
    // legends in words, never the metrics' code names
    ck_assert_msg(strstr(gp, "title \"from HBM\""), "no 'from HBM' legend in the hit-rate chart");
    ck_assert_msg(!strstr(gp, "title \"hit_rate_hbm\"") && !strstr(gp, "title \"output_tok_s\""),
                  "a legend in code names");
    // output tokens on their own axis, not on the input axis
    const char *tp = strstr(gp, "set output \"throughput.svg\"");
    ck_assert(tp);
    const char *tpe = strstr(tp + 1, "set output");
    const char *y2 = strstr(tp, "axes x1y2 with lines lw 2 dt 2 title \"output tokens/s\"");
    ck_assert_msg(y2 && (!tpe || y2 < tpe), "output tokens/s not on the right axis");
    // the KV store axis in the unit of its largest value
    const char *kv = strstr(gp, "set output \"kv_store.svg\"");
    if (kv) {
        const char *kve = strstr(kv + 1, "set output");
        const char *yl = strstr(kv, "set ylabel \"stored KV (");
        ck_assert_msg(yl && (!kve || yl < kve), "KV store axis without its unit");
    }
    // the instances chart starts at zero with headroom, its second line dashed
    const char *ins = strstr(gp, "set output \"instances.svg\"");
    ck_assert(ins);
    const char *next = strstr(ins + 1, "set output");
    const char *yr = strstr(ins, "set yrange [0:*]");
    ck_assert_msg(yr && (!next || yr < next), "instances chart not from zero");
    const char *dec = strstr(ins, "title \"decode\"");
    ck_assert_msg(dec && (!next || dec < next), "no decode line in the instances chart");
    const char *dt = strstr(ins, " dt 2 title \"decode\"");
    ck_assert_msg(dt && (!next || dt < next), "the decode line is not dashed apart");
    free(gp);
    // gnuplot drew it: the decode line (2 instances) lies above the axis, inside the plot.
    // With gnuplot on PATH the chart must be there; without it the drawing goes unchecked,
    // and the test says so.
    snprintf(p, sizeof p, "%s/r/report_files/instances.svg", kvt_tmp);
    if (!getenv("KVF_NO_GNUPLOT") && system("command -v gnuplot >/dev/null 2>&1") == 0) {
        ck_assert_msg(access(p, R_OK) == 0, "gnuplot is on PATH but drew no %s", p);
        char *svg = kvt_slurp(p);
        ck_assert(strstr(svg, ">decode<") != NULL);
        free(svg);
    } else {
        fprintf(stderr, "test_report_units: no gnuplot (or KVF_NO_GNUPLOT set): "
                        "instances.svg not checked\n");
    }
    kvt_tmp_remove();
}
END_TEST

START_TEST(test_vision_gpus_printed) {
    kvt_tmp_make("kvf_rep_vision");
    int rc = kvt_sh("%s run scenarios/quickstart.yaml --set workload.limit_requests=150 "
                    "--set model=gemma-3-27b "   // a vision pool needs a vision encoder
                    "--set cluster.vision.instances=1 --set cluster.vision.gpus_per_instance=2 "
                    "--no-report -o %s/v",
                    kvt_bin(), kvt_tmp);
    ck_assert_msg(rc == 0, "run exited %d: %s", rc, kvt_err);
    ck_assert_msg(strstr(kvt_out, "GPUs         vision 2, prefill 4, decode 2;"), "%s", kvt_out);
    ck_assert_msg(strstr(kvt_out, "utilisation vision "), "%s", kvt_out);
    rc = kvt_sh("%s run scenarios/quickstart.yaml --set workload.limit_requests=150 --no-report "
                "-o %s/n",
                kvt_bin(), kvt_tmp);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(kvt_out, "GPUs         prefill 4, decode 2;"), "%s", kvt_out);
    kvt_tmp_remove();
}
END_TEST

static json_t *arg_of(json_t *e, const char *k) {
    return json_object_get(json_object_get(e, "args"), k);
}

// The Perfetto / Chrome trace of a window of a run.
START_TEST(test_trace_out_tracks) {
    kvt_tmp_make("kvf_rep_trace");
    int rc = kvt_sh("%s run scenarios/quickstart.yaml --set workload.limit_requests=600 -q "
                    "--no-report -o %s/t --trace-out %s/trace.json --trace-window 20:80",
                    kvt_bin(), kvt_tmp, kvt_tmp);
    ck_assert_msg(rc == 0, "run exited %d: %s", rc, kvt_err);
    char p[256];
    snprintf(p, sizeof p, "%s/trace.json", kvt_tmp);
    json_error_t je;
    json_t *doc = json_load_file(p, 0, &je);
    ck_assert_msg(doc, "trace.json is not JSON: line %d: %s", je.line, je.text);
    json_t *ev = json_object_get(doc, "traceEvents");
    ck_assert(json_is_array(ev));
    ck_assert_str_eq(json_string_value(json_object_get(doc, "displayTimeUnit")), "ms");
    int n_proc = 0, n_thread = 0, n_x = 0, n_b = 0, n_e = 0, n_c = 0, n_xfer = 0, n_read = 0,
        n_write = 0;
    json_t *open = json_object();      // "cat/id" -> begin ts
    json_t *threads = json_object();   // "pid/tid" -> name
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *name = json_string_value(json_object_get(e, "name"));
        ck_assert_msg(ph && name, "event %zu lacks ph or name", i);
        double ts = json_number_value(json_object_get(e, "ts"));
        int pid = (int)json_integer_value(json_object_get(e, "pid"));
        char key[128];
        if (!strcmp(ph, "M")) {
            if (!strcmp(name, "process_name")) {
                n_proc++;
                ck_assert(strstr(json_string_value(arg_of(e, "name")), " pool"));
            } else if (!strcmp(name, "thread_name")) {
                n_thread++;
                snprintf(key, sizeof key, "%d/%lld", pid,
                         (long long)json_integer_value(json_object_get(e, "tid")));
                json_object_set(threads, key, arg_of(e, "name"));
            }
            continue;
        }
        ck_assert_msg(ts >= 20e6 - 1 && isfinite(ts), "event at %.0f us, before the window", ts);
        if (!strcmp(ph, "X")) {
            n_x++;
            ck_assert(json_number_value(json_object_get(e, "dur")) > 0);
            ck_assert(ts <= 80e6 + 1);
            snprintf(key, sizeof key, "%d/%lld", pid,
                     (long long)json_integer_value(json_object_get(e, "tid")));
            ck_assert_msg(json_object_get(threads, key), "step on unnamed thread %s", key);
            ck_assert(json_is_integer(arg_of(e, "batch")));
        } else if (!strcmp(ph, "b") || !strcmp(ph, "e")) {
            const char *cat = json_string_value(json_object_get(e, "cat"));
            const char *id = json_string_value(json_object_get(e, "id"));
            ck_assert(cat && id);
            snprintf(key, sizeof key, "%s/%s/%s", cat, name, id);
            if (ph[0] == 'b') {
                n_b++;
                ck_assert_msg(!json_object_get(open, key), "span %s begun twice", key);
                json_object_set_new(open, key, json_real(ts));
                ck_assert(json_number_value(arg_of(e, "bytes")) > 0);
                if (strstr(name, "KV transfer out")) n_xfer++;
                if (strstr(name, " read")) n_read++;
                if (strstr(name, "SSD write")) n_write++;
                ck_assert(!strcmp(cat, strstr(name, "KV") ? "kv_transfer" : "storage"));
                ck_assert(!strncmp(name, "prefill ", 8) || !strncmp(name, "decode ", 7));
            } else {
                n_e++;
                json_t *b = json_object_get(open, key);
                ck_assert_msg(b, "span end %s without its begin", key);
                ck_assert(json_number_value(b) <= ts);
                json_object_del(open, key);
            }
        } else if (!strcmp(ph, "C")) {
            n_c++;
            ck_assert_msg(strstr(name, " queue"), "counter %s", name);
            ck_assert(json_is_number(arg_of(e, "queued")));
        } else {
            ck_abort_msg("unexpected phase %s", ph);
        }
    }
    ck_assert_int_eq(n_proc, 3);
    ck_assert_msg(n_thread >= 6, "%d thread names (4 prefill + 2 decode instances)", n_thread);
    ck_assert_msg(
        json_object_get(threads, "1/0") &&
            !strcmp(json_string_value(json_object_get(threads, "1/0")), "prefill 0 compute"),
        "prefill instance 0 not named");
    ck_assert_msg(n_x > 100, "%d steps", n_x);
    ck_assert_msg(n_xfer > 5, "%d KV transfers", n_xfer);
    ck_assert_msg(n_write > 5, "%d SSD writes", n_write);
    ck_assert_msg(n_c >= 6 * 5, "%d queue samples over 60 s for 6 instances", n_c);
    // the run drains every transfer it starts, so every span begun in the window has its end
    ck_assert_msg(n_e == n_b && json_object_size(open) == 0, "%d begins, %d ends", n_b, n_e);
    (void)n_read;   // reads need a warm store: quickstart may or may not load from SSD here
    json_decref(open);
    json_decref(threads);
    json_decref(doc);

    // the trace changes nothing in the results
    rc = kvt_sh("%s run scenarios/quickstart.yaml --set workload.limit_requests=600 -q "
                "--no-report -o %s/u",
                kvt_bin(), kvt_tmp);
    ck_assert_int_eq(rc, 0);
    json_t *a, *b;
    snprintf(p, sizeof p, "%s/t/summary.json", kvt_tmp);
    a = json_load_file(p, 0, &je);
    snprintf(p, sizeof p, "%s/u/summary.json", kvt_tmp);
    b = json_load_file(p, 0, &je);
    ck_assert(a && b);
    json_object_del(a, "sim");
    json_object_del(b, "sim");
    json_object_del(a, "config");
    json_object_del(b, "config");
    ck_assert_msg(json_equal(a, b), "summary differs with --trace-out");
    json_decref(a);
    json_decref(b);
    kvt_tmp_remove();
}
END_TEST

// The writer alone: many overlapping spans ended in another order, ends of spans never begun
// (or begun before the window) dropped, counters and steps, one valid JSON document.
START_TEST(test_trace_writer_spans) {
    kvt_tmp_make("kvf_trace_writer");
    char p[256];
    snprintf(p, sizeof p, "%s/w.json", kvt_tmp);
    static const char *const pools[] = {"vision", "prefill", "decode"};
    sim_trace *t;
    kvf_err err = {0};
    ck_assert_int_eq(sim_trace_open(&t, p, 1.0, 0, pools, 3, &err), KVF_OK);
    const int n = 5000;
    sim_trace_flow_begin(t, 500000000, 1, 0, "SSD read", 999999, 10);   // before the window
    for (int i = 0; i < n; i++)
        sim_trace_flow_begin(t, 1000000000 + i, 1 + i % 2, (uint32_t)(i % 7), "KV transfer out",
                             (uint64_t)i, 1e6);
    for (int i = 0; i < n; i++) {
        int j = (int)(((uint64_t)i * 7919) % (uint64_t)n);   // another order
        sim_trace_flow_end(t, 2000000000 + i, 1 + j % 2, (uint32_t)(j % 7), "KV transfer out",
                           (uint64_t)j);
    }
    sim_trace_flow_end(t, 2100000000, 1, 0, "SSD read", 999999);     // its begin was not written
    sim_trace_flow_end(t, 2100000000, 1, 0, "KV transfer out", 0);   // ended twice
    sim_trace_flow(t, 1500000000, 1600000000, 1, 3, "SSD write", 4096);
    sim_trace_counter(t, 1500000000, 2, 1, "queue", 12);
    sim_trace_step(t, 1500000000, 2000000, 2, 1, "decode", 8, 8, 1e9, 2e9);
    ck_assert_int_eq(sim_trace_close(t, &err), KVF_OK);
    json_error_t je;
    json_t *doc = json_load_file(p, 0, &je);
    ck_assert_msg(doc, "not JSON: %s", je.text);
    int nb = 0, ne = 0, nc = 0, nx = 0, nthread = 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "traceEvents"), i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *name = json_string_value(json_object_get(e, "name"));
        nb += !strcmp(ph, "b");
        ne += !strcmp(ph, "e");
        nc += !strcmp(ph, "C");
        nx += !strcmp(ph, "X");
        if (!strcmp(ph, "M") && !strcmp(name, "thread_name")) {
            nthread++;
            ck_assert_str_eq(json_string_value(arg_of(e, "name")), "decode 1 compute");
        }
        ck_assert(!strstr(name, "SSD read"));
    }
    ck_assert_int_eq(nb, n + 1);
    ck_assert_int_eq(ne, n + 1);
    ck_assert_int_eq(nc, 1);
    ck_assert_int_eq(nx, 1);
    ck_assert_int_eq(nthread, 1);
    json_decref(doc);
    kvt_tmp_remove();
}
END_TEST

int main(void) {
    Suite *s = suite_create("report_units");
    TCase *t = tcase_create("units");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_bytes_formatting);
    tcase_add_test(t, test_units_by_key);
    tcase_add_test(t, test_report_units_and_charts);
    tcase_add_test(t, test_vision_gpus_printed);
    tcase_add_test(t, test_trace_out_tracks);
    tcase_add_test(t, test_trace_writer_spans);
    suite_add_tcase(s, t);
    return kvt_main(s);
}
