// common/kvf_module.c -- loading the optional shared objects (see kvf_module_open in kvf.h).
// A module is looked for beside the executable first, so a build tree runs without installing
// anything and without LD_LIBRARY_PATH; the first place where the file exists is the one
// loaded (a file that exists but does not load is an error, not a reason to look further).
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvf.h"

enum { MOD_PATH_MAX = 4096 };

// Directory of the running executable into dir (no trailing slash); false if unknown.
static bool exe_dir(char *dir, size_t cap) {
    ssize_t n = readlink("/proc/self/exe", dir, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1) return false;
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash) return false;
    *slash = '\0';
    return true;
}

void *kvf_module_open(const char *file, bool global, kvf_err *err) {
    KVF_ASSERT(file && !strchr(file, '/'));
    int mode = RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL);
    char cand[4][MOD_PATH_MAX];
    int nc = 0;
    const char *env = getenv("KVF_MODULE_DIR");
    if (env && *env) snprintf(cand[nc++], MOD_PATH_MAX, "%s/%s", env, file);
    char dir[MOD_PATH_MAX - 64];
    if (exe_dir(dir, sizeof dir - 256)) {
        snprintf(cand[nc++], MOD_PATH_MAX, "%s/%s", dir, file);
        snprintf(cand[nc++], MOD_PATH_MAX, "%s/../%s", dir, file);
        snprintf(cand[nc++], MOD_PATH_MAX, "%s/../lib/kvfleet/%s", dir, file);
    }
    char tried[900] = "";
    size_t used = 0;
    for (int i = 0; i < nc; i++) {
        if (access(cand[i], F_OK) != 0) {
            if (used < sizeof tried)
                used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%s",
                                         used ? ", " : "", cand[i]);
            continue;
        }
        void *h = dlopen(cand[i], mode);
        if (!h) {
            kvf_fail(err, KVF_ENODEV, "cannot load %s: %s", cand[i], dlerror());
            return NULL;
        }
        return h;
    }
    void *h = dlopen(file, mode);
    if (h) return h;
    const char *why = dlerror();
    kvf_fail(err, KVF_ENODEV, "cannot load %s (not in %s; dlopen: %s)", file,
             used ? tried : "KVF_MODULE_DIR or beside the executable", why ? why : "not found");
    return NULL;
}

void *kvf_module_sym(void *h, const char *file, const char *name, kvf_err *err) {
    KVF_ASSERT(h && name);
    dlerror();
    void *p = dlsym(h, name);
    if (!p) kvf_fail(err, KVF_ENODEV, "%s: no symbol %s (stale build? rebuild it)", file, name);
    return p;
}
