// sim/run/sim_outdir.c -- result directories: a run writes into a temporary directory beside
// the final one and renames it into place when complete, under a lock, so the directory
// appears whole or not at all (scenarios/README.md, "Result directories").
//
// Names: DIR.lock, DIR.tmp.<pid>.kvfleet and DIR.old.<pid>.kvfleet are the only names beside
// DIR that a run creates or removes; anything else there (a user's DIR.old.backup) is never
// touched. The commit swaps DIR and the temporary directory in one renameat2(RENAME_EXCHANGE)
// where the kernel has it, so no instant exists at which DIR is missing; elsewhere it moves
// DIR aside first, and the next run restores a DIR.old.<pid>.kvfleet whose DIR is missing.
// Every file created here is opened with O_NOFOLLOW | O_EXCL: nothing is written through a
// symbolic link a user (or another user) left at one of these names.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
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

#define OWN_SUFFIX ".kvfleet"

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

// Opens the lock file at path without following a link: the one there, or a new one made
// with O_EXCL. -1 with errno on failure (ELOOP: a symbolic link).
static int open_lock(const char *path) {
    for (int tries = 0; tries < 8; tries++) {
        int f = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (f >= 0 || errno != ENOENT) return f;
        f = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
        if (f >= 0 || errno != EEXIST) return f;
    }
    errno = EEXIST;
    return -1;
}

kvf_status sim_lock_file(const char *path, int *fd, kvf_err *err) {
    *fd = -1;
    struct stat ls;
    if (lstat(path, &ls) == 0 && (!S_ISREG(ls.st_mode) || ls.st_nlink > 1))
        return kvf_fail(err, KVF_EINVAL,
                        "%s: the lock is %s, not a file of kvfleet's; refused (nothing written "
                        "through it): remove it or choose another -o",
                        path,
                        S_ISLNK(ls.st_mode)   ? "a symbolic link"
                        : S_ISREG(ls.st_mode) ? "a hard link to another file"
                        : S_ISDIR(ls.st_mode) ? "a directory"
                                              : "a special file");
    for (int tries = 0; tries < 8; tries++) {
        int f = open_lock(path);
        if (f < 0 && errno == ELOOP)
            return kvf_fail(err, KVF_EINVAL,
                            "%s: the lock is a symbolic link; refused (nothing written through "
                            "it): remove it or choose another -o",
                            path);
        if (f < 0)
            return kvf_fail(err, KVF_EIO, "%s: cannot create the lock: %s", path, strerror(errno));
        struct stat a, b;
        if (fstat(f, &a) != 0 || !S_ISREG(a.st_mode) || a.st_nlink > 1) {
            close(f);
            return kvf_fail(err, KVF_EINVAL,
                            "%s: the lock is not a file of kvfleet's; refused: "
                            "remove it or choose another -o",
                            path);
        }
        if (flock(f, LOCK_EX | LOCK_NB) != 0) {
            close(f);
            if (errno == EWOULDBLOCK)
                return kvf_fail(err, KVF_EINVAL,
                                "%s: another kvfleet process is writing this result; wait for "
                                "it or choose another -o",
                                path);
            return kvf_fail(err, KVF_EIO, "%s: cannot lock: %s", path, strerror(errno));
        }
        // The holder before us may have unlinked the file after we opened it: the lock must
        // be on the file the path names now (lstat: a link put there since is not it).
        if (fstat(f, &a) == 0 && lstat(path, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev) {
            char pid[32];
            int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
            if (ftruncate(f, 0) == 0 && write(f, pid, (size_t)n) < 0) { /* informative only */
            }
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

// True when name is base + kind (".tmp." or ".old.") + digits + OWN_SUFFIX: a name a run
// made, never a user's.
static bool owned_name(const char *name, const char *base, const char *kind) {
    size_t bl = strlen(base), kl = strlen(kind), sl = strlen(OWN_SUFFIX);
    if (strncmp(name, base, bl) || strncmp(name + bl, kind, kl)) return false;
    const char *p = name + bl + kl, *q = p;
    while (*q >= '0' && *q <= '9')
        q++;
    return q > p && q - p <= 10 && !strcmp(q, OWN_SUFFIX) && strlen(q) == sl;
}

// What a killed run left beside DIR (we hold the lock): its DIR.tmp.<pid>.kvfleet is removed;
// a DIR.old.<pid>.kvfleet is the earlier result moved aside by a commit that died before the
// new one took its place, so it goes back to DIR when DIR is missing, else it is removed.
static void remove_leftovers(const char *final) {
    char parent[SIM_PATH_MAX];
    snprintf(parent, sizeof parent, "%s", final);
    char *slash = strrchr(parent, '/');
    const char *base = slash ? slash + 1 : final;
    if (slash) *slash = '\0';
    DIR *d = opendir(slash ? (parent[0] ? parent : "/") : ".");
    if (!d) return;
    struct dirent *e;
    char p[SIM_PATH_MAX + 300];
    while ((e = readdir(d))) {
        bool tmp = owned_name(e->d_name, base, ".tmp."), old = owned_name(e->d_name, base, ".old.");
        if (!tmp && !old) continue;
        snprintf(p, sizeof p, "%s%s%s", slash ? (parent[0] ? parent : "") : "", slash ? "/" : "",
                 e->d_name);
        struct stat sb;
        if (lstat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;   // not one a run made
        if (old && lstat(final, &sb) != 0 && errno == ENOENT && rename(p, final) == 0) continue;
        sim_remove_tree(p);
    }
    closedir(d);
}

kvf_status sim_outdir_begin(sim_outdir *d, const char *dir, bool force, kvf_err *err) {
    memset(d, 0, sizeof *d);
    d->lock_fd = -1;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
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
    remove_leftovers(d->final);   // first: it may bring back an earlier result
    struct stat sb;
    if (lstat(d->final, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) {
            sim_outdir_abort(d);
            return kvf_fail(err, KVF_EINVAL, "-o %s: exists and is not a directory%s", d->final,
                            S_ISLNK(sb.st_mode) ? " (a symbolic link)" : "");
        }
        d->had_result = !dir_is_empty(d->final);
        if (!force && d->had_result) {
            sim_outdir_abort(d);
            return kvf_fail(err, KVF_EINVAL,
                            "-o %s: holds an earlier result, kept; give --force to replace it "
                            "or choose another directory",
                            d->final);
        }
    }
    snprintf(d->tmp, sizeof d->tmp, "%s.tmp.%d" OWN_SUFFIX, d->final, (int)getpid());
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

// Blocks SIGINT and SIGTERM around the swap so a signal lands before or after it, not between
// its steps; *old gets the mask to restore.
static void block_stop_signals(sigset_t *old) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGHUP);
    sigprocmask(SIG_BLOCK, &s, old);
}

kvf_status sim_outdir_commit(sim_outdir *d, kvf_err *err) {
    KVF_ASSERT(d->tmp[0] && d->lock_fd >= 0);
    char old[SIM_PATH_MAX + 32];
    snprintf(old, sizeof old, "%s.old.%d" OWN_SUFFIX, d->final, (int)getpid());
    sigset_t mask;
    block_stop_signals(&mask);
    struct stat sb;
    bool had = lstat(d->final, &sb) == 0;
    kvf_status st = KVF_OK;
#ifdef RENAME_EXCHANGE
    if (had && renameat2(AT_FDCWD, d->tmp, AT_FDCWD, d->final, RENAME_EXCHANGE) == 0) {
        // the temporary name now holds the earlier result
        sim_remove_tree(d->tmp);
        d->tmp[0] = '\0';
        goto done;
    }
#endif
    if (had && rename(d->final, old) != 0) {
        st = kvf_fail(err, KVF_EIO, "%s: cannot move the earlier result aside: %s", d->final,
                      strerror(errno));
        goto done;
    }
    if (rename(d->tmp, d->final) != 0) {
        st = kvf_fail(err, KVF_EIO, "%s: cannot rename to %s: %s", d->tmp, d->final,
                      strerror(errno));
        if (had) rename(old, d->final);
        goto done;
    }
    d->tmp[0] = '\0';
    if (had) sim_remove_tree(old);
done:
    sigprocmask(SIG_SETMASK, &mask, NULL);
    sim_outdir_abort(d);   // what is left of the temporary directory, and the lock
    return st;
}

// ---- inputs and outputs -----------------------------------------------------------------------
kvf_status sim_outdir_check_input(const sim_outdir *d, const char *what, const char *path,
                                  kvf_err *err) {
    KVF_ASSERT(d && what && err);
    if (!path || !path[0]) return KVF_OK;
    char in[PATH_MAX], dir[PATH_MAX];
    if (!realpath(path, in) || !realpath(d->final, dir)) return KVF_OK;   // nothing to replace
    size_t n = strlen(dir);
    if (!strncmp(in, dir, n) && (in[n] == '/' || in[n] == '\0'))
        return kvf_fail(err, KVF_EINVAL,
                        "-o %s: the %s %s lies inside the result directory this run would "
                        "replace; refused (copy it elsewhere or choose another -o)",
                        d->final, what, path);
    return KVF_OK;
}

kvf_status sim_outdir_check_output(const sim_outdir *d, const char *what, const char *path,
                                   kvf_err *err) {
    KVF_ASSERT(d && what && err);
    if (!path || !path[0]) return KVF_OK;
    char parent[PATH_MAX], in[PATH_MAX], dir[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash == parent)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(parent, sizeof parent, ".");
    if (!realpath(parent, in) || !realpath(d->final, dir)) return KVF_OK;
    size_t n = strlen(dir);
    if (!strncmp(in, dir, n) && (in[n] == '/' || in[n] == '\0'))
        return kvf_fail(err, KVF_EINVAL,
                        "%s %s: inside the result directory %s, which this run replaces whole; "
                        "refused (write it elsewhere)",
                        what, path, d->final);
    return KVF_OK;
}

kvf_status sim_path_check_file(const char *what, const char *path, kvf_err *err) {
    KVF_ASSERT(what && path && err);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return KVF_OK;   // missing: an output to create, or the
                         // reader's own "not found"
    if (S_ISREG(sb.st_mode)) return KVF_OK;
    return kvf_fail(err, KVF_EINVAL, "%s %s: %s, not a regular file; refused", what, path,
                    S_ISDIR(sb.st_mode)                          ? "a directory"
                    : S_ISFIFO(sb.st_mode)                       ? "a FIFO"
                    : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                                                                 : "a special file");
}

bool sim_path_same_file(const char *a, const char *b) {
    struct stat x, y;
    if (!a || !b || !a[0] || !b[0] || stat(a, &x) != 0 || stat(b, &y) != 0) return false;
    return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int sim_config_inputs(const sim_config *c, char (*path)[SIM_PATH_MAX], const char **what, int max) {
    KVF_ASSERT(c && path && what && max >= SIM_INPUTS_MAX);
    int n = 0;
#define ADD(w, ...)                                                                                \
    do {                                                                                           \
        what[n] = (w);                                                                             \
        __VA_ARGS__;                                                                               \
        if (path[n][0]) n++;                                                                       \
    } while (0)
    ADD("scenario", snprintf(path[n], SIM_PATH_MAX, "%s", c->path));
    if (c->workload.trace[0])
        ADD("trace", sim_config_resolve(c, c->workload.trace, path[n], SIM_PATH_MAX));
    if (c->model[0]) ADD("model file", sim_config_model_path(c, path[n], SIM_PATH_MAX));
    if (c->hardware[0]) ADD("hardware file", sim_config_hardware_path(c, path[n], SIM_PATH_MAX));
    const sim_pool_cfg *pools[] = {&c->cluster.vision, &c->cluster.prefill, &c->cluster.decode};
    for (int i = 0; i < 3; i++)
        if (pools[i]->hardware[0])
            ADD("hardware file", sim_config_pool_hardware_path(c, pools[i], path[n], SIM_PATH_MAX));
    if (c->profile[0]) ADD("profile", sim_config_profile_path(c, path[n], SIM_PATH_MAX));
    if (c->serving.fit[0])
        ADD("fit file", sim_config_resolve(c, c->serving.fit, path[n], SIM_PATH_MAX));
#undef ADD
    KVF_ASSERT(n <= max);
    return n;
}

kvf_status sim_outdir_check_config(const sim_outdir *d, const sim_config *c, kvf_err *err) {
    char path[SIM_INPUTS_MAX][SIM_PATH_MAX];
    const char *what[SIM_INPUTS_MAX];
    int n = sim_config_inputs(c, path, what, SIM_INPUTS_MAX);
    kvf_status st = KVF_OK;
    for (int i = 0; !st && i < n; i++)
        st = sim_outdir_check_input(d, what[i], path[i], err);
    return st;
}

kvf_status sim_config_check_output(const sim_config *c, const char *opt, const char *out,
                                   kvf_err *err) {
    if (!out || !out[0]) return KVF_OK;
    struct stat ls;
    if (lstat(out, &ls) == 0 && S_ISLNK(ls.st_mode))
        return kvf_fail(err, KVF_EINVAL,
                        "%s %s: a symbolic link; refused (nothing is written "
                        "through a link): name the file itself",
                        opt, out);
    kvf_status st = sim_path_check_file(opt, out, err);
    if (st) return st;
    char path[SIM_INPUTS_MAX][SIM_PATH_MAX];
    const char *what[SIM_INPUTS_MAX];
    int n = sim_config_inputs(c, path, what, SIM_INPUTS_MAX);
    for (int i = 0; i < n; i++)
        if (sim_path_same_file(out, path[i]))
            return kvf_fail(err, KVF_EINVAL,
                            "%s %s: is the run's %s (%s); refused, an output "
                            "never overwrites an input",
                            opt, out, what[i], path[i]);
    return KVF_OK;
}
