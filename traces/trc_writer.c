// traces/trc_writer.c -- the canonical kvfleet JSONL writer: one request per line, every
// field of trc_request kept, so any reader's output round-trips through it unchanged.
// Written with stdio directly (no JSON tree), as fast as the disk.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trc_int.h"

struct trc_writer {
    FILE *f;
    char *path;
    uint32_t block_tokens;
};

kvf_status trc_writer_open(trc_writer **out, const char *path, uint32_t block_tokens,
                           kvf_err *err) {
    *out = NULL;
    FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
    if (!f) return kvf_fail(err, KVF_EIO, "%s: cannot write: %s", path, strerror(errno));
    trc_writer *w = kvf_calloc(1, sizeof *w);
    w->f = f;
    w->path = kvf_strdup(path);
    w->block_tokens = block_tokens ? block_tokens : 64;
    *out = w;
    return KVF_OK;
}

kvf_status trc_writer_put(trc_writer *w, const trc_request *r, kvf_err *err) {
    FILE *f = w->f;
    fprintf(f,
            "{\"id\":%llu,\"arrival_ns\":%lld,\"input_tokens\":%u,\"output_tokens\":%u,"
            "\"class\":\"%s\",\"flags\":%u,\"images\":%u,\"session\":%lld,\"turn\":%u,"
            "\"prev_id\":%lld,\"think_ns\":%lld,\"block_tokens\":%u,\"blocks\":[",
            (unsigned long long)r->id, (long long)r->arrival_ns, r->input_tokens,
            r->output_tokens, trc_class_name(r->cls), r->flags, r->images,
            (long long)(int64_t)r->session, r->turn, (long long)r->prev_id,
            (long long)r->think_ns, w->block_tokens);
    for (uint32_t i = 0; i < r->n_blocks; i++)
        fprintf(f, i ? ",%lld" : "%lld", (long long)(int64_t)r->blocks[i]);
    if (fputs("]}\n", f) == EOF || ferror(f))
        return kvf_fail(err, KVF_EIO, "%s: write error", w->path);
    return KVF_OK;
}

kvf_status trc_writer_close(trc_writer *w, kvf_err *err) {
    if (!w) return KVF_OK;
    kvf_status st = KVF_OK;
    if (w->f == stdout) {
        if (fflush(w->f)) st = kvf_fail(err, KVF_EIO, "%s: write error", w->path);
    } else if (fclose(w->f)) st = kvf_fail(err, KVF_EIO, "%s: write error", w->path);
    free(w->path);
    free(w);
    return st;
}
