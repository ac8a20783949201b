// tests/test_store.c -- the SSD store as one shared thing: its own read bandwidth
// (kv_cache.ssd.store_read_GBps) and block IOPS shared by every prefill instance's loads,
// each load no faster than its instance's path (kv_cache.ssd.read_GBps). Eight instances
// behind a 1 GB/s store wait for it where eight 1 GB/s paths did not; a store as fast as the
// eight paths together changes little; IOPS bound the store like bandwidth does.
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>

#include "helpers/kvt.h"

static json_t *run8(const char *extra) {
    const char *sets[] = {"kv_cache.ssd.read_GBps=1", "cluster.prefill.instances=8",
                          "workload.limit_requests=3000", extra};
    return kvt_run("quickstart.yaml", NULL, sets, extra ? 4 : 3, NULL);
}

START_TEST(test_store_bandwidth_is_shared) {
    json_t *paths = run8(NULL);
    json_t *narrow = run8("kv_cache.ssd.store_read_GBps=1");
    json_t *wide = run8("kv_cache.ssd.store_read_GBps=8");
    json_t *iops = run8("kv_cache.ssd.store_iops=120");   // 120 x 8 MiB blocks ~ 1 GB/s
    double t_paths = kvt_num(paths, "ttft_ms.p90"), t_narrow = kvt_num(narrow, "ttft_ms.p90");
    double t_wide = kvt_num(wide, "ttft_ms.p90"), t_iops = kvt_num(iops, "ttft_ms.p90");
    ck_assert_msg(t_narrow > 2 * t_paths,
                  "a 1 GB/s store for 8 instances: TTFT p90 %g ms, "
                  "8 private 1 GB/s paths %g ms",
                  t_narrow, t_paths);
    ck_assert_msg(t_wide <= t_narrow, "an 8 GB/s store %g ms slower than a 1 GB/s one %g ms",
                  t_wide, t_narrow);
    ck_assert_msg(t_iops > 2 * t_paths, "120 IOPS: TTFT p90 %g ms, private paths %g ms", t_iops,
                  t_paths);
    // the loads are the same: the store only changes when they finish
    ck_assert_msg(
        fabs(kvt_num(narrow, "cache.load_bytes.ssd") - kvt_num(paths, "cache.load_bytes.ssd")) <=
            0.25 * kvt_num(paths, "cache.load_bytes.ssd"),
        "SSD bytes loaded %g with the store, %g without", kvt_num(narrow, "cache.load_bytes.ssd"),
        kvt_num(paths, "cache.load_bytes.ssd"));
    json_decref(paths);
    json_decref(narrow);
    json_decref(wide);
    json_decref(iops);
}
END_TEST

// A prompt repeated whole, its blocks only in the SSD store (no HBM cache, no DRAM), loaded
// before its prefill (overlap_load false): a paged cache attaches whole blocks and computes at
// least one token, so of its 16 blocks (1,024 tokens) 15 are hits and loaded, and the last one
// recomputed: 15 x 64 x 131,072 B (Llama-3.1-8B) = 125,829,120 B, loaded 62.9 ms slower at
// 1 GB/s than at 2 GB/s. The load was sized before the last block was trimmed (16 blocks,
// 8,388,608 B too many), and the time it took was counted as queueing (queue_s 0.134 s on an
// idle instance).
START_TEST(test_repeated_prompt_load_hand_worked) {
    kvt_tmp_make("kvf_store");
    char trace[200];
    snprintf(trace, sizeof trace, "%s/two.jsonl", kvt_tmp);
    char line[2][600];
    for (int i = 0; i < 2; i++) {
        int n = snprintf(line[i], sizeof line[i],
                         "{\"id\":%d,\"arrival_ns\":%lld,\"input_tokens\":1024,"
                         "\"output_tokens\":11,\"block_tokens\":64,\"blocks\":[",
                         i + 1, i * 10000000000LL);
        for (int b = 1; b <= 16; b++)
            n += snprintf(line[i] + n, sizeof line[i] - (size_t)n, "%s%d", b > 1 ? "," : "", b);
        snprintf(line[i] + n, sizeof line[i] - (size_t)n, "]}\n");
    }
    char text[1300];
    snprintf(text, sizeof text, "%s%s", line[0], line[1]);
    kvt_write(trace, text);
    double ttft[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        char bw[64], dir[200];
        snprintf(bw, sizeof bw, "kv_cache.ssd.read_GBps=%d", k + 1);
        snprintf(dir, sizeof dir, "%s/o%d", kvt_tmp, k);
        const char *sets[] = {"workload.format=kvfleet",
                              "cluster.prefill.instances=1",
                              "cluster.decode.instances=1",
                              "cluster.prefill.gpus_per_instance=1",
                              "cluster.decode.gpus_per_instance=1",
                              "kv_cache.hbm_cache_frac=0",
                              "kv_cache.dram.gb_per_node=0",
                              "kv_cache.ssd.capacity_tb=unlimited",
                              "kv_cache.overlap_load=false",
                              bw};
        json_t *s = kvt_run("quickstart.yaml", trace, sets, 10, dir);
        ck_assert_msg(kvt_num(s, "cache.load_bytes.ssd") == 15.0 * 64 * 131072,
                      "SSD bytes loaded %.0f, want 15 blocks = %.0f",
                      kvt_num(s, "cache.load_bytes.ssd"), 15.0 * 64 * 131072);
        ck_assert_msg(kvt_num(s, "cache.hit_tokens") == 960, "hit tokens %g",
                      kvt_num(s, "cache.hit_tokens"));
        json_decref(s);
        ck_assert(kvt_sh("sqlite3 %s/results.db 'select queue_s, ttft_s from request where id = 1'",
                         dir) == 0);
        double q = 0;
        ck_assert(sscanf(kvt_out, "%lf|%lf", &q, &ttft[k]) == 2);
        ck_assert_msg(q == 0, "%s: the repeated prompt queued %.6f s on an idle instance", bw, q);
    }
    double want = 15.0 * 64 * 131072 * (1 / 1e9 - 1 / 2e9);
    ck_assert_msg(fabs((ttft[0] - ttft[1]) - want) < 1e-6,
                  "TTFT at 1 GB/s - at 2 GB/s: %.6f s, want %.6f s", ttft[0] - ttft[1], want);
}
END_TEST

int main(void) {
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("store");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_store_bandwidth_is_shared);
    tcase_add_test(tc, test_repeated_prompt_load_hand_worked);
    suite_add_tcase(s, tc);
    return kvt_main(s);
}
