// engine/eng_serve.c -- a real continuous-batching server loop over an array of requests, on
// this machine's backend, timed with wall clocks. The ground truth the simulator is checked
// against.
//
// Request life: WAITING (arrived, queued FIFO; preempted requests go back to the front) ->
// RUNNING/prefill (chunks of its remaining context, oldest first, within the token budget) ->
// RUNNING/decode (one token per step) -> DONE. A preempted request loses its sequence (blocks
// released; full blocks stay in the prefix cache) and is recomputed from its prompt plus the
// tokens it had generated; the recompute emits no token, decoding resumes with the last one.
//
// Clock: ns since the start of the run. With no_sleep the clock jumps over idle gaps (an offset
// is added) instead of sleeping, so runs are fast and timestamps stay monotone.
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng_int.h"

enum { ST_PENDING = 0, ST_WAITING, ST_PREFILL, ST_DECODE, ST_DONE, ST_REJECTED };

typedef struct rq {
    uint32_t state;
    eng_seq *seq;
    int32_t *tok;    // prompt then generated tokens
    uint32_t ntok;   // prompt + generated
    uint32_t target; // tokens to hold in KV before decoding (ntok at admission, or -1)
    uint32_t generated;
    bool admitted_once;
} rq;

typedef struct loop {
    eng_engine *e;
    const eng_serve_config *c;
    const eng_request *req;
    size_t n;
    rq *rs;
    eng_serve_result *out;
    uint32_t *waiting, nwait; // request indices, FIFO (front = 0)
    uint32_t *running, nrun;  // admission order (last = newest)
    int64_t t0, skew;
    bool woke; // the last wait ended: arrivals taken next were seen at the wake-up
    int64_t last_end, idle_at_end; // end of the last recorded step, idle_ns then
    size_t cap_steps, cap_chunks;
    size_t left; // requests not yet done (rejected ones excluded)
} loop;

void eng_serve_config_default(eng_serve_config *c) {
    memset(c, 0, sizeof *c);
    c->model = "tiny-dense";
    c->backend = ENG_BACKEND_CPU;
    c->max_batch_tokens = 512;
    c->max_batch_requests = 32;
    c->block_tokens = 16;
    c->seed = 1;
}

int64_t eng_thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * KVF_NS_PER_S + ts.tv_nsec;
}

void eng_serve_result_free(eng_serve_result *r) {
    if (!r) return;
    free(r->requests);
    free(r->steps);
    free(r->chunks);
    memset(r, 0, sizeof *r);
}

static int64_t now_ns(const loop *L) {
    return kvf_wall_ns() - L->t0 + L->skew;
}

static void sleep_until(loop *L, int64_t t) {
    int64_t t0 = now_ns(L), d = t - t0;
    if (d <= 0) return;
    if (L->c->no_sleep) {
        L->skew += d;
        return;
    }
    if (L->c->idle_hook && d >= L->c->idle_min_ns) {
        L->c->idle_hook(L->c->idle_ctx, d);
        int64_t t1 = now_ns(L);
        L->out->probe_ns += t1 - t0;
        d = t - t1;
    }
    if (d > 0) {
        struct timespec ts = {(time_t)(d / KVF_NS_PER_S), (long)(d % KVF_NS_PER_S)};
        nanosleep(&ts, NULL);
    }
    int64_t t2 = now_ns(L);
    L->woke = true;
    L->out->idle_ns += t2 - t0;
    if (t2 > t) L->out->late_ns += t2 - t;
}

static void record_chunk(loop *L, uint32_t tokens, uint32_t context) {
    if (L->out->n_chunks == L->cap_chunks)
        kvf_grow((void **)&L->out->chunks, &L->cap_chunks, L->out->n_chunks + 1,
                 sizeof *L->out->chunks);
    L->out->chunks[L->out->n_chunks++] = (eng_chunk){tokens, context};
}

// Token j of request i's prompt: derived from the block id, so equal ids give equal tokens.
static int32_t prompt_token(const eng_request *r, size_t i, uint32_t j, uint32_t bt,
                            uint32_t vocab) {
    uint32_t b = j / bt;
    uint64_t h = b < r->n_blocks && r->blocks
                     ? kvf_hash_combine(r->blocks[b], j % bt)
                     : kvf_hash_combine(0x5eed0000u + i, j) ^ 0xa5a5a5a5a5a5a5a5ULL;
    return (int32_t)(h % vocab);
}

static void remove_at(uint32_t *v, uint32_t *n, uint32_t i) {
    memmove(v + i, v + i + 1, (*n - i - 1) * sizeof *v);
    (*n)--;
}

static void preempt(loop *L, uint32_t ri) {
    rq *q = &L->rs[ri];
    eng_seq_close(L->e, q->seq);
    q->seq = NULL;
    q->state = ST_WAITING;
    // recompute everything but the last generated token (it is the next decode input)
    q->target = q->generated ? q->ntok - 1 : q->ntok;
    L->out->requests[ri].preemptions++;
    L->out->preemptions++;
    for (uint32_t i = 0; i < L->nrun; i++)
        if (L->running[i] == ri) {
            remove_at(L->running, &L->nrun, i);
            break;
        }
    memmove(L->waiting + 1, L->waiting, L->nwait * sizeof *L->waiting);
    L->waiting[0] = ri;
    L->nwait++;
}

static void finish(loop *L, uint32_t ri, int64_t t) {
    rq *q = &L->rs[ri];
    eng_seq_close(L->e, q->seq);
    q->seq = NULL;
    q->state = ST_DONE;
    L->left--;
    L->out->requests[ri].last_token_ns = t;
    L->out->requests[ri].completion_ns = t;
    for (uint32_t i = 0; i < L->nrun; i++)
        if (L->running[i] == ri) {
            remove_at(L->running, &L->nrun, i);
            break;
        }
}

static void record_step(loop *L, const eng_step_record *s) {
    if (L->out->n_steps == L->cap_steps)
        kvf_grow((void **)&L->out->steps, &L->cap_steps, L->out->n_steps + 1, sizeof *s);
    L->out->steps[L->out->n_steps++] = *s;
}

// One step: decode every decoding request, then prefill chunks. Returns false when nothing
// could run (the caller waits for arrivals).
static kvf_status step(loop *L, bool *did, kvf_err *err) {
    eng_engine *e = L->e;
    const eng_serve_config *c = L->c;
    int64_t ts = now_ns(L), fwd = 0, cpu0 = eng_thread_cpu_ns();
    size_t chunk0 = L->out->n_chunks;
    eng_step_record rec = {0};
    rec.start_ns = ts;
    int64_t gap = L->out->n_steps ? ts - L->last_end - (L->out->idle_ns - L->idle_at_end) : 0;
    *did = false;
    // ---- decode set: oldest first, making room by preempting the newest -------------------
    eng_seq *dseq[1024];
    int32_t dtok[1024], dnext[1024];
    uint32_t dreq[1024], nd = 0;
    uint32_t maxd = KVF_MIN(c->max_batch_requests, 1024u);
    for (;;) {
        nd = 0;
        uint32_t need = 0;
        for (uint32_t i = 0; i < L->nrun && nd < maxd; i++) {
            uint32_t ri = L->running[i];
            if (L->rs[ri].state != ST_DECODE) continue;
            need += eng_kv_blocks_needed(e, L->rs[ri].seq, 1);
            dreq[nd++] = ri;
        }
        if (need <= eng_kv_blocks_available(e) || L->nrun <= 1) break;
        preempt(L, L->running[L->nrun - 1]);
    }
    if (nd) {
        for (uint32_t i = 0; i < nd; i++) {
            rq *q = &L->rs[dreq[i]];
            dseq[i] = q->seq;
            dtok[i] = q->tok[q->ntok - 1];
            rec.context_tokens += eng_seq_len(q->seq);
        }
        rec.decode_context = rec.context_tokens;
        rec.decode_seqs = nd;
        kvf_status st = eng_decode(e, dseq, dtok, nd, NULL, dnext, err);
        fwd += eng_last_forward_ns(e);
        if (st) return st;
        rec.batch += nd;
        rec.tokens += nd;
        L->out->decode_tokens += nd;
        *did = true;
    }
    // ---- prefill chunks within the remaining budget ---------------------------------------
    uint32_t budget = c->max_batch_tokens > nd ? c->max_batch_tokens - nd : 0;
    uint32_t slots = c->max_batch_requests > nd ? c->max_batch_requests - nd : 0;
    uint32_t pdone[1024], npd = 0; // requests whose prefill finished with a new token
    int32_t pnext[1024];
    for (uint32_t pass = 0; pass < 2 && budget && slots; pass++) {
        // pass 0: running prefills (oldest first); pass 1: admissions from the queue
        uint32_t i = 0;
        while (budget && slots) {
            uint32_t ri;
            if (pass == 0) {
                while (i < L->nrun && L->rs[L->running[i]].state != ST_PREFILL)
                    i++;
                if (i >= L->nrun) break;
                ri = L->running[i++];
            } else {
                if (!L->nwait || L->nrun >= c->max_batch_requests) break;
                ri = L->waiting[0];
            }
            rq *q = &L->rs[ri];
            eng_request_result *res = &L->out->requests[ri];
            if (pass == 1) {
                uint32_t cached = 0;
                kvf_status st = eng_seq_open(e, q->tok, q->target, &q->seq, &cached, err);
                if (st == KVF_ENOMEM) break; // no sequence slot: wait
                if (st) return st;
                uint32_t rest = q->target - cached;
                if (eng_kv_blocks_needed(e, q->seq, rest) > eng_kv_blocks_available(e)) {
                    eng_seq_close(e, q->seq); // the whole prompt must fit to be admitted
                    q->seq = NULL;
                    break;
                }
                remove_at(L->waiting, &L->nwait, 0);
                L->running[L->nrun++] = ri;
                q->state = ST_PREFILL;
                if (!q->admitted_once) {
                    q->admitted_once = true;
                    res->admitted_ns = ts;
                    res->cached_tokens = cached;
                    L->out->prompt_tokens += L->req[ri].input_tokens;
                    L->out->cached_tokens += cached;
                }
            }
            uint32_t len = eng_seq_len(q->seq);
            uint32_t chunk = KVF_MIN(budget, q->target - len);
            // shrink to the blocks that are free (a running prefill may have to wait)
            while (chunk && eng_kv_blocks_needed(e, q->seq, chunk) > eng_kv_blocks_available(e))
                chunk = chunk > e->bt ? chunk - e->bt : chunk - 1;
            if (!chunk) continue;
            rec.context_tokens += len;
            int32_t next = 0;
            kvf_status st = eng_prefill(e, q->seq, q->tok + len, chunk, NULL, &next, err);
            fwd += eng_last_forward_ns(e);
            if (st) return st;
            budget -= chunk;
            slots--;
            rec.batch++;
            rec.tokens += chunk;
            rec.prefill_tokens += chunk;
            record_chunk(L, chunk, len);
            L->out->prefill_tokens += chunk;
            *did = true;
            if (len + chunk == q->target) {
                q->state = ST_DECODE;
                if (q->target == q->ntok && npd < 1024) { // fresh prompt: its first token
                    pdone[npd] = ri;
                    pnext[npd++] = next;
                }
            }
        }
    }
    if (!*did && L->nrun > 1) {
        // running prefills are stuck behind each other: free the newest
        preempt(L, L->running[L->nrun - 1]);
        *did = true;
    }
    // ---- emit tokens at the end of the step ------------------------------------------------
    int64_t te = now_ns(L), cpu1 = eng_thread_cpu_ns();
    for (uint32_t i = 0; i < nd; i++) {
        rq *q = &L->rs[dreq[i]];
        q->tok[q->ntok++] = dnext[i];
        q->generated++;
        q->target = q->ntok;
        L->out->requests[dreq[i]].output_tokens = q->generated;
        L->out->requests[dreq[i]].last_token_ns = te;
        if (q->generated >= L->req[dreq[i]].output_tokens) finish(L, dreq[i], te);
    }
    for (uint32_t i = 0; i < npd; i++) {
        rq *q = &L->rs[pdone[i]];
        q->tok[q->ntok++] = pnext[i];
        q->generated++;
        q->target = q->ntok;
        eng_request_result *res = &L->out->requests[pdone[i]];
        res->output_tokens = q->generated;
        if (q->generated == 1) res->first_token_ns = te;
        res->last_token_ns = te;
        if (q->generated >= L->req[pdone[i]].output_tokens) finish(L, pdone[i], te);
    }
    if (rec.tokens) {
        rec.duration_ns = te - ts;
        rec.cpu_ns = cpu1 - cpu0;
        rec.chunk0 = (uint32_t)chunk0;
        rec.n_chunks = (uint32_t)(L->out->n_chunks - chunk0);
        rec.forward_ns = fwd;
        if (L->out->n_steps) L->out->steps[L->out->n_steps - 1].after_ns = gap > 0 ? gap : 0;
        L->last_end = te;
        L->idle_at_end = L->out->idle_ns;
        rec.phase = rec.prefill_tokens == 0            ? ENG_STEP_DECODE
                    : rec.prefill_tokens == rec.tokens ? ENG_STEP_PREFILL
                                                       : ENG_STEP_MIXED;
        record_step(L, &rec);
    } else {
        L->out->n_chunks = chunk0;
    }
    return KVF_OK;
}

static int cmp_arrival(const void *a, const void *b, void *ctx) {
    const eng_request *r = ctx;
    int64_t x = r[*(const uint32_t *)a].arrival_ns, y = r[*(const uint32_t *)b].arrival_ns;
    if (x != y) return x < y ? -1 : 1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

kvf_status eng_serve_on(eng_engine *e, const eng_serve_config *c, const eng_request *reqs, size_t n,
                        eng_serve_result *out, kvf_err *err) {
    memset(out, 0, sizeof *out);
    const eng_model_desc *m = eng_model(e);
    uint32_t arena = e->nblocks * e->bt;
    uint32_t maxlen = KVF_MIN(arena, e->o.max_context);
    loop L = {.e = e, .c = c, .req = reqs, .n = n, .out = out};
    out->requests = kvf_calloc(n ? n : 1, sizeof *out->requests);
    out->n_requests = n;
    snprintf(out->hardware, sizeof out->hardware, "%s", e->hw);
    snprintf(out->model, sizeof out->model, "%s", m->name);
    snprintf(out->backend, sizeof out->backend, "%s", eng_backend_name(e->o.backend));
    L.rs = kvf_calloc(n ? n : 1, sizeof *L.rs);
    L.waiting = kvf_malloc((n ? n : 1) * sizeof *L.waiting);
    L.running = kvf_malloc((n ? n : 1) * sizeof *L.running);
    uint32_t *order = kvf_malloc((n ? n : 1) * sizeof *order);
    for (size_t i = 0; i < n; i++) {
        const eng_request *r = &reqs[i];
        eng_request_result *res = &out->requests[i];
        res->arrival_ns = r->arrival_ns;
        res->input_tokens = r->input_tokens;
        res->first_token_ns = res->last_token_ns = res->completion_ns = res->admitted_ns = -1;
        order[i] = (uint32_t)i;
        if ((uint64_t)r->input_tokens + r->output_tokens > maxlen) {
            L.rs[i].state = ST_REJECTED;
            res->status = ENG_REQ_REJECTED;
            continue;
        }
        L.rs[i].tok = kvf_malloc((r->input_tokens + r->output_tokens) * sizeof(int32_t));
        for (uint32_t j = 0; j < r->input_tokens; j++)
            L.rs[i].tok[j] = prompt_token(r, i, j, e->bt, m->vocab);
        L.rs[i].ntok = L.rs[i].target = r->input_tokens;
    }
    qsort_r(order, n, sizeof *order, cmp_arrival, (void *)reqs);
    size_t next_arrival = 0;
    for (size_t i = 0; i < n; i++)
        L.left += L.rs[i].state != ST_REJECTED;
    kvf_status st = KVF_OK;
    L.t0 = kvf_wall_ns();
    while (L.left) {
        int64_t t = now_ns(&L);
        while (next_arrival < n && reqs[order[next_arrival]].arrival_ns <= t) {
            uint32_t ri = order[next_arrival++];
            if (L.rs[ri].state == ST_REJECTED) continue;
            L.rs[ri].state = ST_WAITING;
            L.waiting[L.nwait++] = ri;
            // woken from a wait: it was seen late by the wake-up latency (noise, not
            // scheduling); otherwise it was due while a step ran and is seen as it arrived
            out->requests[ri].seen_ns = L.woke ? t : reqs[ri].arrival_ns;
        }
        L.woke = false;
        bool did = false;
        if ((st = step(&L, &did, err))) break;
        if (!did && L.left) {
            if (next_arrival < n) {
                sleep_until(&L, reqs[order[next_arrival]].arrival_ns);
            } else if (!L.nrun && L.nwait) {
                st = kvf_fail(err, KVF_ERUN,
                              "serve: request %u cannot be admitted (KV arena "
                              "of %u blocks)",
                              L.waiting[0], e->nblocks);
                break;
            }
        }
    }
    out->wall_ns = now_ns(&L);
    for (size_t i = 0; i < n; i++) {
        if (L.rs[i].seq) eng_seq_close(e, L.rs[i].seq);
        free(L.rs[i].tok);
    }
    free(L.rs), free(L.waiting), free(L.running), free(order);
    if (st) eng_serve_result_free(out);
    return st;
}

kvf_status eng_serve_run(const eng_serve_config *c, const eng_request *reqs, size_t n,
                         eng_serve_result *out, kvf_err *err) {
    memset(out, 0, sizeof *out);
    uint64_t maxlen = 1;
    for (size_t i = 0; i < n; i++) {
        const eng_request *r = &reqs[i];
        if (!r->input_tokens || !r->output_tokens || r->arrival_ns < 0)
            return kvf_fail(err, KVF_EINVAL,
                            "request %zu: input_tokens and output_tokens must "
                            "be >= 1 and arrival_ns >= 0",
                            i);
        if (r->n_blocks && !r->blocks)
            return kvf_fail(err, KVF_EINVAL, "request %zu: n_blocks %u without blocks", i,
                            r->n_blocks);
        maxlen = KVF_MAX(maxlen, (uint64_t)r->input_tokens + r->output_tokens);
    }
    eng_model_desc m;
    kvf_status st = eng_model_desc_load(&m, c->model ? c->model : "tiny-dense", c->models_dir, err);
    if (st) return st;
    eng_options o;
    eng_options_default(&o);
    o.backend = c->backend;
    o.threads = c->threads;
    o.seed = c->seed ? c->seed : 1;
    o.block_tokens = c->block_tokens ? c->block_tokens : 16;
    uint32_t mbt = c->max_batch_tokens ? c->max_batch_tokens : 512;
    uint32_t mbr = c->max_batch_requests ? c->max_batch_requests : 32;
    if (mbr > 1024) return kvf_fail(err, KVF_EINVAL, "max_batch_requests (%u) above 1024", mbr);
    o.max_step_tokens = KVF_MAX(mbt, mbr);
    o.max_seqs = mbr + 2;
    // default arena (kv_blocks 0): every running request at the longest length, within the
    // engine's default KV budget (1 GiB cpu, 16 GiB cuda)
    o.kv_blocks = c->kv_blocks;
    if (maxlen > (1u << 24)) return kvf_fail(err, KVF_EINVAL, "requests longer than 16M tokens");
    o.max_context = (uint32_t)KVF_MAX(16, maxlen);
    if (o.kv_blocks)
        o.max_context =
            (uint32_t)KVF_MAX(16, KVF_MIN(maxlen, (uint64_t)o.kv_blocks * o.block_tokens));
    eng_engine *e = NULL;
    if ((st = eng_create(&e, &m, &o, err))) return st;
    eng_serve_config cc = *c;
    cc.max_batch_tokens = mbt;
    cc.max_batch_requests = mbr;
    // warm-up pass so that first-touch page faults and library start-up are not billed
    int32_t w[4] = {1, 2, 3, 4};
    eng_seq *s = NULL;
    if (eng_seq_open(e, w, 4, &s, NULL, err) == KVF_OK) {
        eng_prefill(e, s, w, 4, NULL, NULL, err);
        eng_seq_close(e, s);
    }
    st = eng_serve_on(e, &cc, reqs, n, out, err);
    eng_destroy(e);
    return st;
}
