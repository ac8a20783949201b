// tests/fuzz/fuzz_scenario.c -- libFuzzer target for the scenario loader and --set. The first
// input byte picks the mode: even = the rest is a scenario file (sim_config_load, then
// sim_config_validate when it loads); odd = the rest is one `--set KEY=VALUE` (NUL bytes end
// it) applied to the defaults. Any crash, sanitizer report, hang or error without a message is
// a bug.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];   // the input as a file, removed at exit
static void remove_path(void) {
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static sim_config c;
    kvf_err err = {0};
    kvf_status st;
    if (data[0] & 1) {
        char *s = malloc(size);
        memcpy(s, data + 1, size - 1);
        s[size - 1] = 0;
        sim_config_default(&c);
        st = sim_config_set(&c, s, &err);
        free(s);
    } else {
        if (!path[0]) {
            snprintf(path, sizeof path, "/tmp/kvf_fuzz_%d.yaml", (int)getpid());
            atexit(remove_path);
        }
        FILE *f = fopen(path, "wb");
        if (!f) return 0;
        fwrite(data + 1, 1, size - 1, f);
        fclose(f);
        st = sim_config_load(&c, path, &err);
        if (!st) {
            st = sim_config_validate(&c, &err);
            if (st == KVF_OK) return 0;
        }
    }
    if (st && !err.msg[0]) abort();   // every failure carries a message
    return 0;
}
