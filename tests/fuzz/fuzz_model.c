// tests/fuzz/fuzz_model.c -- libFuzzer target for model and hardware files. The first input
// byte picks which (even = model, odd = hardware); the rest is the file. A model that loads
// is also derived (parameter and KV sizes), where overflow or division by zero would show.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mdl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];   // the input as a file, removed at exit
static void remove_path(void) {
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/kvf_fuzz_%d_model.yaml", (int)getpid());
        atexit(remove_path);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    kvf_err err = {0};
    kvf_status st;
    if (data[0] & 1) {
        mdl_hardware h;
        st = mdl_hardware_load(&h, path, NULL, &err);
    } else {
        mdl_model m;
        st = mdl_model_load(&m, path, NULL, &err);
        if (!st) mdl_model_derive(&m);
    }
    if (st && !err.msg[0]) abort();
    return 0;
}
