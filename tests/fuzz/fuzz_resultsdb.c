// tests/fuzz/fuzz_resultsdb.c -- libFuzzer target for reading a results directory: the input
// is DIR/results.db (beside a fixed, valid summary.json), and `kvfleet report` (HTML and
// Markdown, gnuplot off) and `kvfleet compare` read it. A damaged or hostile database must end
// in a message, never a crash. Seed it with real results.db files.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void put(const char *name, const void *p, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    fwrite(p, 1, n, f);
    fclose(f);
}

// the directory and what the reports wrote in it, at exit
static void remove_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    (void)!system(cmd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/kvf_fuzz_%d_db", (int)getpid());
        mkdir(dir, 0755);
        atexit(remove_dir);
        setenv("KVF_NO_GNUPLOT", "1", 1);
        static const char summary[] =
            "{\"scenario\": \"fuzz\", \"model\": \"m\", \"hardware\": \"h\", \"mode\": "
            "\"disaggregated\", \"step_model\": \"roofline\", \"requests\": {\"arrived\": 3, "
            "\"completed\": 3, \"rejected\": 0, \"unfinished\": 0}, \"ttft_ms\": {\"mean\": 1, "
            "\"p50\": 1, \"p90\": 1, \"p99\": 1}, \"tpot_ms\": {\"mean\": 1, \"p50\": 1, "
            "\"p90\": 1, \"p99\": 1}}";
        put("summary.json", summary, sizeof summary - 1);
    }
    put("results.db", data, size);
    char jr[128];
    snprintf(jr, sizeof jr, "%s/results.db-journal", dir);
    unlink(jr);
    kvf_err err = {0};
    if (rpt_report_write(dir, true, true, &err) && !err.msg[0]) abort();
    FILE *devnull = fopen("/dev/null", "w");
    const char *dirs[1] = {dir};
    kvf_err e2 = {0};
    if (rpt_compare_write(devnull, dirs, 1, true, true, &e2) && !e2.msg[0]) abort();
    fclose(devnull);
    return 0;
}
