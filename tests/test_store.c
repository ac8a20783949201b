// tests/test_store.c -- the SSD store as one shared thing: its own read bandwidth
// (kv_cache.ssd.store_read_GBps) and block IOPS shared by every prefill instance's loads,
// each load no faster than its instance's path (kv_cache.ssd.read_GBps). Eight instances
// behind a 1 GB/s store wait for it where eight 1 GB/s paths did not; a store as fast as the
// eight paths together changes little; IOPS bound the store like bandwidth does.
#include <check.h>
#include <jansson.h>
#include <math.h>

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

int main(void) {
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("store");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_store_bandwidth_is_shared);
    suite_add_tcase(s, tc);
    return kvt_main(s);
}
