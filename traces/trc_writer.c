// traces/trc_writer.c -- the canonical kvfleet JSONL writer: one request per line, every
// field of trc_request kept, so any reader's output round-trips through it unchanged.
// Written with stdio directly (no JSON tree), as fast as the disk.
//
// Outputs are never written in place: lines go to a temporary file created beside the output
// with O_CREAT|O_EXCL|O_NOFOLLOW (a name nobody else holds, never through a link), which
// trc_writer_close renames over the output only once everything was written. An output that
// is the same file as the input (device and inode, so also through symlinks and hard links)
// or that is not a regular file (FIFO, device, directory) is refused before anything is
// created; an existing output is kept unless TRC_W_FORCE.
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trc_int.h"

struct trc_writer {
    FILE *f;
    char *path;
    char *tmp;   // temporary name beside path, NULL for stdout
    uint32_t block_tokens;
    bool failed;   // a write failed: close discards instead of renaming
};

const char *trc_file_kind(mode_t m) {
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO (pipe)"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

kvf_status trc_output_check(const char *path, const char *input, bool force, kvf_err *err) {
    struct stat so, si;
    if (stat(path, &so) != 0) {
        if (errno == ENOENT) {
            struct stat sl;   // a dangling symlink: rename would replace the link, refuse it
            if (lstat(path, &sl) == 0)
                return kvf_fail(err, KVF_EINVAL, "%s: is a symbolic link to a missing file", path);
            return KVF_OK;
        }
        return kvf_fail(err, KVF_EIO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (!S_ISREG(so.st_mode))
        return kvf_fail(err, KVF_EINVAL, "%s: is %s, not a regular file; refusing to write it",
                        path, trc_file_kind(so.st_mode));
    if (input && stat(input, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        return kvf_fail(err, KVF_EINVAL,
                        "%s: is the same file as the input %s; writing it would destroy the "
                        "input (choose another -o)",
                        path, input);
    if (!force)
        return kvf_fail(err, KVF_EINVAL,
                        "%s: exists, kept; give --force to replace it or choose another file",
                        path);
    return KVF_OK;
}

kvf_status trc_atomic_create(const char *path, FILE **f, char **tmp, kvf_err *err) {
    size_t n = strlen(path) + 64;
    char *t = kvf_malloc(n);
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path + 1) : 0;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        uint64_t r =
            kvf_hash64((uint64_t)kvf_wall_ns() ^ ((uint64_t)getpid() << 20) ^ (uint64_t)attempt);
        snprintf(t, n, "%.*s.%s.tmp.%016llx", dl, path, slash ? slash + 1 : path,
                 (unsigned long long)r);
        // read and write: a cache being built is replayed from this file (trc_tee_replay)
        fd = open(t, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        kvf_status st = kvf_fail(err, errno == EACCES || errno == ENOENT ? KVF_EINVAL : KVF_EIO,
                                 "%s: cannot write: %s", path, strerror(errno));
        free(t);
        return st;
    }
    *f = fdopen(fd, "w+b");
    if (!*f) {
        close(fd);
        unlink(t);
        free(t);
        return kvf_fail(err, KVF_ENOMEM, "%s: cannot write: %s", path, strerror(errno));
    }
    *tmp = t;
    return KVF_OK;
}

kvf_status trc_atomic_commit(FILE *f, char *tmp, const char *path, bool keep, kvf_err *err) {
    kvf_status st = KVF_OK;
    bool bad = fflush(f) != 0 || ferror(f);
    if (fclose(f) != 0) bad = true;
    if (keep && bad)
        st = kvf_fail(err, KVF_EIO, "%s: write error", path);
    else if (keep && rename(tmp, path) != 0)
        st = kvf_fail(err, KVF_EIO, "%s: cannot rename %s into place: %s", path, tmp,
                      strerror(errno));
    else if (!keep)
        st = KVF_OK;
    if (st || !keep) unlink(tmp);
    free(tmp);
    return st;
}

kvf_status trc_writer_create(trc_writer **out, const char *path, uint32_t block_tokens,
                             unsigned flags, const char *input, kvf_err *err) {
    *out = NULL;
    FILE *f = stdout;
    char *tmp = NULL;
    if (strcmp(path, "-")) {
        kvf_status st = trc_output_check(path, input, (flags & TRC_W_FORCE) != 0, err);
        if (st) return st;
        if ((st = trc_atomic_create(path, &f, &tmp, err))) return st;
    }
    trc_writer *w = kvf_calloc(1, sizeof *w);
    w->f = f;
    w->path = kvf_strdup(path);
    w->tmp = tmp;
    w->block_tokens = block_tokens ? block_tokens : 64;
    *out = w;
    return KVF_OK;
}

kvf_status trc_writer_open(trc_writer **out, const char *path, uint32_t block_tokens,
                           kvf_err *err) {
    return trc_writer_create(out, path, block_tokens, TRC_W_FORCE, NULL, err);
}

kvf_status trc_writer_put(trc_writer *w, const trc_request *r, kvf_err *err) {
    FILE *f = w->f;
    fprintf(f,
            "{\"id\":%llu,\"arrival_ns\":%lld,\"input_tokens\":%u,\"output_tokens\":%u,"
            "\"class\":\"%s\",\"flags\":%u,\"images\":%u,\"session\":%lld,\"turn\":%u,"
            "\"prev_id\":%lld,\"think_ns\":%lld,\"block_tokens\":%u,\"blocks\":[",
            (unsigned long long)r->id, (long long)r->arrival_ns, r->input_tokens, r->output_tokens,
            trc_class_name(r->cls), r->flags, r->images, (long long)(int64_t)r->session, r->turn,
            (long long)r->prev_id, (long long)r->think_ns, w->block_tokens);
    for (uint32_t i = 0; i < r->n_blocks; i++)
        fprintf(f, i ? ",%lld" : "%lld", (long long)(int64_t)r->blocks[i]);
    if (fputs("]}\n", f) == EOF || ferror(f)) {
        w->failed = true;
        return kvf_fail(err, KVF_EIO, "%s: write error", w->path);
    }
    return KVF_OK;
}

static kvf_status writer_end(trc_writer *w, bool keep, kvf_err *err) {
    if (!w) return KVF_OK;
    kvf_status st = KVF_OK;
    if (!w->tmp) {
        if (fflush(w->f) || w->failed) st = kvf_fail(err, KVF_EIO, "%s: write error", w->path);
    } else
        st = trc_atomic_commit(w->f, w->tmp, w->path, keep && !w->failed, err);
    if (!st && keep && w->failed) st = kvf_fail(err, KVF_EIO, "%s: write error", w->path);
    free(w->path);
    free(w);
    return st;
}

kvf_status trc_writer_close(trc_writer *w, kvf_err *err) {
    return writer_end(w, true, err);
}

void trc_writer_discard(trc_writer *w) {
    writer_end(w, false, NULL);
}
