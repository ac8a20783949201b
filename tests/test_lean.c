// tests/test_lean.c -- the simulator starts lean: the kvfleet and kvfleet-engine executables
// link neither CUDA, MPI nor OpenBLAS (their ELF NEEDED entries, read here with <elf.h>); the
// CUDA backend and MPI sweeps live in modules beside them that carry those libraries, and a
// missing module is named in the error, not a crash. (Startup RSS is measured in
// bench/startup.sh: a figure of the machine, not a test.)
#include <check.h>
#include <elf.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/kvt.h"

enum { MAX_NEEDED = 64 };
static char needed[MAX_NEEDED][128];

// Fills needed[] with the DT_NEEDED names of the 64-bit ELF file at path; returns how many.
// Fails the test when the file is not a readable ELF64 with a dynamic section.
static int read_needed(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    ck_assert_msg(len > (long)sizeof(Elf64_Ehdr), "%s: too short", path);
    unsigned char *b = malloc((size_t)len);
    ck_assert(b);
    ck_assert(fread(b, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b;
    ck_assert_msg(!memcmp(eh->e_ident, ELFMAG, SELFMAG) && eh->e_ident[EI_CLASS] == ELFCLASS64,
                  "%s: not an ELF64 file", path);
    ck_assert((long)(eh->e_shoff + (Elf64_Off)eh->e_shnum * sizeof(Elf64_Shdr)) <= len);
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff);
    int n = 0;
    bool dyn = false;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNAMIC) continue;
        dyn = true;
        ck_assert(sh[i].sh_link < eh->e_shnum);
        const Elf64_Shdr *str = &sh[sh[i].sh_link];
        ck_assert((long)(sh[i].sh_offset + sh[i].sh_size) <= len);
        ck_assert((long)(str->sh_offset + str->sh_size) <= len);
        const Elf64_Dyn *d = (const Elf64_Dyn *)(b + sh[i].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof *d && d[k].d_tag != DT_NULL; k++) {
            if (d[k].d_tag != DT_NEEDED) continue;
            ck_assert(d[k].d_un.d_val < str->sh_size && n < MAX_NEEDED);
            snprintf(needed[n++], sizeof needed[0], "%s",
                     (const char *)b + str->sh_offset + d[k].d_un.d_val);
        }
    }
    free(b);
    ck_assert_msg(dyn, "%s: no dynamic section", path);
    return n;
}

// The first NEEDED entry of path that starts with prefix, or NULL.
static const char *needs(const char *path, int n, const char *prefix) {
    (void)path;
    for (int i = 0; i < n; i++)
        if (!strncmp(needed[i], prefix, strlen(prefix))) return needed[i];
    return NULL;
}

// <dir of the kvfleet binary>/<name> into out.
static void beside_bin(const char *name, char *out, size_t cap) {
    char b[4096];
    snprintf(b, sizeof b, "%s", kvt_bin());
    snprintf(out, cap, "%s/%s", dirname(b), name);
}

static const char *heavy[] = {"libcudart",   "libcublas",   "libcuda.",    "libnvidia", "libmpi",
                              "libopen-rte", "libopen-pal", "libopenblas", "libstdc++"};

static void check_lean(const char *path) {
    int n = read_needed(path);
    // the reader works: every dynamic executable here needs the C library
    ck_assert_msg(needs(path, n, "libc.so"), "%s: no libc.so among %d NEEDED entries", path, n);
    for (size_t h = 0; h < sizeof heavy / sizeof heavy[0]; h++) {
        const char *hit = needs(path, n, heavy[h]);
        ck_assert_msg(!hit, "%s links %s: it must be loaded only by the commands that use it", path,
                      hit);
    }
}

START_TEST(test_lean_simulator_links_no_cuda_mpi_blas) {
    check_lean(kvt_bin());
    char p[4200];
    beside_bin("kvfleet-engine", p, sizeof p);
    check_lean(p);
}
END_TEST

START_TEST(test_lean_modules_carry_their_libraries) {
    char p[4200];
    int checked = 0;
#ifdef KVF_HAVE_CUDA
    beside_bin("libkvfleet-cuda.so", p, sizeof p);
    int n = read_needed(p);
    ck_assert_msg(needs(p, n, "libcudart"), "%s does not need libcudart", p);
    ck_assert_msg(needs(p, n, "libcublas"), "%s does not need libcublas", p);
    checked++;
#endif
#ifdef KVF_HAVE_MPI
    beside_bin("libkvfleet-mpi.so", p, sizeof p);
    int m = read_needed(p);
    ck_assert_msg(needs(p, m, "libmpi"), "%s does not need libmpi", p);
    checked++;
#endif
    // Built without either: the modules must not be there (stale files would be loaded).
    if (!checked) {
        beside_bin("libkvfleet-cuda.so", p, sizeof p);
        ck_assert_msg(access(p, F_OK) != 0 || getenv("KVF_MODULE_DIR"), "stale %s", p);
    }
}
END_TEST

// kvt_tmp/kvfleet: a copy of the binary with no module beside it.
static void lone_copy(void) {
    kvt_tmp_make("lean");
    ck_assert_int_eq(kvt_sh("cp %s %s/kvfleet", kvt_bin(), kvt_tmp), 0);
}

// A copy of kvfleet alone in a directory: --engine cuda names the module it could not load
// (or says the build has no CUDA), exit 1, no crash.
START_TEST(test_lean_missing_cuda_module_is_named) {
    lone_copy();
    int rc = kvt_sh("env -u KVF_MODULE_DIR %s/kvfleet run scenarios/quickstart.yaml --engine cuda "
                    "--set workload.limit_requests=5 --no-report -o %s/out",
                    kvt_tmp, kvt_tmp);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, kvt_err);
#ifdef KVF_HAVE_CUDA
    ck_assert_msg(strstr(kvt_err, "cannot load libkvfleet-cuda.so"), "stderr: %s", kvt_err);
#else
    ck_assert_msg(strstr(kvt_err, "built without CUDA"), "stderr: %s", kvt_err);
#endif
    kvt_tmp_remove();
}
END_TEST

// Under an MPI launcher's environment but without the MPI module, a sweep says why and runs
// every point itself (exit 0), as a build without MPI does.
START_TEST(test_lean_missing_mpi_module_falls_back) {
    lone_copy();
    int rc = kvt_sh("env -u KVF_MODULE_DIR OMPI_COMM_WORLD_SIZE=2 %s/kvfleet sweep "
                    "scenarios/quickstart.yaml --set workload.limit_requests=20 "
                    "--vary cluster.decode.instances=1,2 -o %s/sw",
                    kvt_tmp, kvt_tmp);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, kvt_err);
#ifdef KVF_HAVE_MPI
    ck_assert_msg(strstr(kvt_err, "cannot load libkvfleet-mpi.so"), "stderr: %s", kvt_err);
#else
    ck_assert_msg(strstr(kvt_err, "built without MPI"), "stderr: %s", kvt_err);
#endif
    ck_assert_msg(strstr(kvt_err, "every rank runs the whole sweep"), "stderr: %s", kvt_err);
    ck_assert_msg(strstr(kvt_err, "2 points: 2 run now"), "stderr: %s", kvt_err);
    kvt_tmp_remove();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("lean");
    TCase *t = tcase_create("lean");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_lean_simulator_links_no_cuda_mpi_blas);
    tcase_add_test(t, test_lean_modules_carry_their_libraries);
    tcase_add_test(t, test_lean_missing_cuda_module_is_named);
    tcase_add_test(t, test_lean_missing_mpi_module_falls_back);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return kvt_main(suite());
}
