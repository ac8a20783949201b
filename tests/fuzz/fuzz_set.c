// tests/fuzz/fuzz_set.c -- libFuzzer target for chains of `--set KEY=VALUE` (sim_config_set),
// as a command line gives them: the input is up to 32 assignments, NUL-separated, applied in
// order to the defaults, then sim_config_validate. Checked: every failure carries a message
// naming the override; a chain applied twice to fresh defaults gives the same resolved
// configuration (sim_config_to_json), so an override depends on nothing but the chain; and
// the first byte, when odd, makes the last assignment's value go through cli_set_literal as
// workload.trace, which must come back whole. Any crash, sanitizer report or hang is a bug.
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_opts.h"
#include "sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { SETS_MAX = 32 };

// Applies the chain to fresh defaults in *c; the status of the first failure (message in err).
static kvf_status apply(sim_config *c, char *const *sets, int n, kvf_err *err) {
    sim_config_default(c);
    kvf_status st = KVF_OK;
    for (int i = 0; !st && i < n; i++)
        st = sim_config_set(c, sets[i], err);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    bool literal = data[0] & 1;
    char *buf = malloc(size);
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    char *sets[SETS_MAX];
    int n = 0;
    for (size_t i = 0; i < size - 1 && n < SETS_MAX;) {
        sets[n++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    static sim_config a, b;
    kvf_err ea = {0}, eb = {0};
    kvf_status sa = apply(&a, sets, n, &ea), sb = apply(&b, sets, n, &eb);
    if (sa && !ea.msg[0]) abort();                     // every failure carries a message
    if (sa != sb || strcmp(ea.msg, eb.msg)) abort();   // deterministic
    if (!sa) {
        json_t *ja = sim_config_to_json(&a), *jb = sim_config_to_json(&b);
        char *ta = json_dumps(ja, JSON_SORT_KEYS), *tb = json_dumps(jb, JSON_SORT_KEYS);
        if (!ta || !tb || strcmp(ta, tb)) abort();
        free(ta), free(tb);
        json_decref(ja), json_decref(jb);
        kvf_err ev = {0};
        if (sim_config_validate(&a, &ev) && !ev.msg[0]) abort();
    }
    if (literal && n > 0) {
        const char *eq = strchr(sets[n - 1], '=');
        const char *v = eq ? eq + 1 : sets[n - 1];
        kvf_err el = {0};
        sim_config_default(&a);
        kvf_status sl = cli_set_literal(&a, "workload.trace", v, &el);
        if (sl && !el.msg[0]) abort();
        if (!sl && strcmp(a.workload.trace, v)) abort();   // literal, whole
    }
    free(buf);
    return 0;
}
