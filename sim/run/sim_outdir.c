// sim/run/sim_outdir.c -- result directories: a run writes into a temporary directory beside
// the final one and renames it into place when complete, under a lock, so the directory
// appears whole or not at all (scenarios/README.md, "Result directories").
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"
#include "sim_run.h"

// ---- result directories ------------------------------------------------------------------------
static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p) ? 0 : 0;   // best effort: keep going
}

void sim_remove_tree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (!S_ISDIR(sb.st_mode)) {
        unlink(path);
        return;
    }
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

kvf_status sim_lock_file(const char *path, int *fd, kvf_err *err) {
    *fd = -1;
    for (int tries = 0; tries < 8; tries++) {
        int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (f < 0) return kvf_fail(err, KVF_EIO, "%s: cannot create the lock: %s", path, strerror(errno));
        if (flock(f, LOCK_EX | LOCK_NB) != 0) {
            close(f);
            if (errno == EWOULDBLOCK)
                return kvf_fail(err, KVF_EINVAL,
                                "%s: another kvfleet process is writing this result; wait for "
                                "it or choose another -o", path);
            return kvf_fail(err, KVF_EIO, "%s: cannot lock: %s", path, strerror(errno));
        }
        // The holder before us may have unlinked the file after we opened it: the lock must
        // be on the file the path names now.
        struct stat a, b;
        if (fstat(f, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
            char pid[32];
            int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
            if (ftruncate(f, 0) == 0 && write(f, pid, (size_t)n) < 0) { /* informative only */ }
            *fd = f;
            return KVF_OK;
        }
        close(f);
    }
    return kvf_fail(err, KVF_EIO, "%s: cannot take the lock", path);
}

static bool dir_is_empty(const char *path) {
    DIR *d = opendir(path);
    if (!d) return false;
    struct dirent *e;
    bool empty = true;
    while (empty && (e = readdir(d)))
        empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    return empty;
}

// Removes DIR.tmp.* and DIR.old.* beside DIR: what a killed run left (we hold the lock).
static void remove_leftovers(const char *final) {
    char parent[SIM_PATH_MAX];
    snprintf(parent, sizeof parent, "%s", final);
    char *slash = strrchr(parent, '/');
    const char *base = slash ? slash + 1 : final;
    if (slash) *slash = '\0';
    DIR *d = opendir(slash ? (parent[0] ? parent : "/") : ".");
    if (!d) return;
    size_t bl = strlen(base);
    struct dirent *e;
    char p[SIM_PATH_MAX + 300];
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, base, bl) ||
            (strncmp(e->d_name + bl, ".tmp.", 5) && strncmp(e->d_name + bl, ".old.", 5)))
            continue;
        snprintf(p, sizeof p, "%s%s%s", slash ? (parent[0] ? parent : "") : "", slash ? "/" : "",
                 e->d_name);
        sim_remove_tree(p);
    }
    closedir(d);
}

kvf_status sim_outdir_begin(sim_outdir *d, const char *dir, bool force, kvf_err *err) {
    memset(d, 0, sizeof *d);
    d->lock_fd = -1;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (n == 0 || n >= sizeof d->final - 1)
        return kvf_fail(err, KVF_EINVAL, "-o '%s': not a usable directory name", dir);
    snprintf(d->final, sizeof d->final, "%.*s", (int)n, dir);
    const char *base = strrchr(d->final, '/');
    base = base ? base + 1 : d->final;
    if (!strcmp(base, ".") || !strcmp(base, "..") || !strcmp(d->final, "/"))
        return kvf_fail(err, KVF_EINVAL, "-o '%s': name a result directory, not '%s'", dir, base);
    char parent[SIM_PATH_MAX];
    snprintf(parent, sizeof parent, "%s", d->final);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        kvf_status st = kvf_mkdirs(parent, err);
        if (st) return st;
    }
    snprintf(d->lock, sizeof d->lock, "%s.lock", d->final);
    kvf_status st = sim_lock_file(d->lock, &d->lock_fd, err);
    if (st) return st;
    struct stat sb;
    if (stat(d->final, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) {
            sim_outdir_abort(d);
            return kvf_fail(err, KVF_EINVAL, "-o %s: exists and is not a directory", d->final);
        }
        if (!force && !dir_is_empty(d->final)) {
            sim_outdir_abort(d);
            return kvf_fail(err, KVF_EINVAL,
                            "-o %s: holds an earlier result, kept; give --force to replace it "
                            "or choose another directory", d->final);
        }
    }
    remove_leftovers(d->final);
    snprintf(d->tmp, sizeof d->tmp, "%s.tmp.%d", d->final, (int)getpid());
    if (mkdir(d->tmp, 0755) != 0) {
        kvf_fail(err, KVF_EIO, "%s: cannot create: %s", d->tmp, strerror(errno));
        d->tmp[0] = '\0';
        sim_outdir_abort(d);
        return KVF_EIO;
    }
    return KVF_OK;
}

static void release_lock(sim_outdir *d) {
    if (d->lock_fd < 0) return;
    unlink(d->lock);   // before the close: a waiter re-checks the inode (sim_lock_file)
    close(d->lock_fd);
    d->lock_fd = -1;
}

void sim_outdir_abort(sim_outdir *d) {
    if (d->tmp[0]) sim_remove_tree(d->tmp);
    d->tmp[0] = '\0';
    release_lock(d);
}

kvf_status sim_outdir_commit(sim_outdir *d, kvf_err *err) {
    char old[SIM_PATH_MAX + 32];
    snprintf(old, sizeof old, "%s.old.%d", d->final, (int)getpid());
    struct stat sb;
    bool had = stat(d->final, &sb) == 0;
    if (had && rename(d->final, old) != 0) {
        kvf_status st = kvf_fail(err, KVF_EIO, "%s: cannot move the earlier result aside: %s",
                                 d->final, strerror(errno));
        sim_outdir_abort(d);
        return st;
    }
    if (rename(d->tmp, d->final) != 0) {
        kvf_status st = kvf_fail(err, KVF_EIO, "%s: cannot rename to %s: %s", d->tmp, d->final,
                                 strerror(errno));
        if (had) rename(old, d->final);
        sim_outdir_abort(d);
        return st;
    }
    d->tmp[0] = '\0';
    if (had) sim_remove_tree(old);
    release_lock(d);
    return KVF_OK;
}

