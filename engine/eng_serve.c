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
// is added) instead of sleeping, so runs are fast and timestamps stay monotone. The time spent
// in busy_hook is taken off it (the clock stands still while the hook probes).
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng_int.h"

enum { ST_PENDING = 0, ST_WAITING, ST_PREFILL, ST_DECODE, ST_DONE, ST_REJECTED };

typedef struct rq {
    uint32_t state;
    eng_seq *seq;
    int32_t *tok;      // prompt then generated tokens
    uint32_t ntok;     // prompt + generated
    uint32_t target;   // tokens to hold in KV before decoding (ntok at admission, or -1)
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
    uint32_t *waiting, nwait;   // request indices, FIFO (front = 0)
    uint32_t *running, nrun;    // admission order (last = newest)
    int64_t t0, skew;
    int64_t last_busy;   // the clock at busy_hook's last call (or the start)
    bool woke;           // the last wait ended: arrivals taken next were seen at the wake-up
    int64_t last_end, idle_at_end;   // end of the last recorded step, idle_ns then
    size_t cap_steps, cap_chunks;
    size_t left;   // requests not yet done (rejected ones excluded)
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

enum { STEP_MAX = 1024 };   // sequences one step decodes (and prefills ending in a first token)

// One step being assembled: its record, the decode batch, the prefills that end in a token.
typedef struct step_batch {
    eng_step_record rec;
    int64_t ts, fwd;           // start; forward time so far (ns)
    eng_seq *dseq[STEP_MAX];   // decode batch: sequences, their last tokens, their next ones
    int32_t dtok[STEP_MAX], dnext[STEP_MAX];
    uint32_t dreq[STEP_MAX], nd;     // request of each decode
    uint32_t pdone[STEP_MAX], npd;   // requests whose prefill finished with a new token
    int32_t pnext[STEP_MAX];
    uint32_t budget, slots;   // prefill tokens and sequences left in the step
    bool did;                 // something ran
} step_batch;

// The decode set, oldest first, making room by preempting the newest until the KV blocks
// its next tokens need are free (or one request is left).
static void step_decode_set(loop *L, step_batch *S) {
    eng_engine *e = L->e;
    uint32_t maxd = KVF_MIN(L->c->max_batch_requests, (uint32_t)STEP_MAX);
    for (;;) {
        S->nd = 0;
        uint32_t need = 0;
        for (uint32_t i = 0; i < L->nrun && S->nd < maxd; i++) {
            uint32_t ri = L->running[i];
            if (L->rs[ri].state != ST_DECODE) continue;
            need += eng_kv_blocks_needed(e, L->rs[ri].seq, 1);
            S->dreq[S->nd++] = ri;
        }
        if (need <= eng_kv_blocks_available(e) || L->nrun <= 1) break;
        preempt(L, L->running[L->nrun - 1]);
    }
}

// Decodes the decode set in one batch (next tokens into dnext, emitted at the step's end).
static kvf_status step_decode(loop *L, step_batch *S, kvf_err *err) {
    if (!S->nd) return KVF_OK;
    eng_step_record *rec = &S->rec;
    for (uint32_t i = 0; i < S->nd; i++) {
        rq *q = &L->rs[S->dreq[i]];
        S->dseq[i] = q->seq;
        S->dtok[i] = q->tok[q->ntok - 1];
        rec->context_tokens += eng_seq_len(q->seq);
    }
    rec->decode_context = rec->context_tokens;
    rec->decode_seqs = S->nd;
    kvf_status st = eng_decode(L->e, S->dseq, S->dtok, S->nd, NULL, S->dnext, err);
    S->fwd += eng_last_forward_ns(L->e);
    if (st) return st;
    rec->batch += S->nd;
    rec->tokens += S->nd;
    L->out->decode_tokens += S->nd;
    S->did = true;
    return KVF_OK;
}

// Admits the front of the queue, ri: a sequence (prefix cache looked up), and the KV blocks
// for the whole rest of its prompt. *wait when it cannot be admitted yet (nothing changed).
static kvf_status step_admit(loop *L, step_batch *S, uint32_t ri, bool *wait, kvf_err *err) {
    eng_engine *e = L->e;
    rq *q = &L->rs[ri];
    eng_request_result *res = &L->out->requests[ri];
    uint32_t cached = 0;
    *wait = false;
    kvf_status st = eng_seq_open(e, q->tok, q->target, &q->seq, &cached, err);
    if (st == KVF_ENOMEM) {   // no sequence slot: wait
        *wait = true;
        return KVF_OK;
    }
    if (st) return st;
    uint32_t rest = q->target - cached;
    if (eng_kv_blocks_needed(e, q->seq, rest) > eng_kv_blocks_available(e)) {
        eng_seq_close(e, q->seq);   // the whole prompt must fit to be admitted
        q->seq = NULL;
        *wait = true;
        return KVF_OK;
    }
    remove_at(L->waiting, &L->nwait, 0);
    L->running[L->nrun++] = ri;
    q->state = ST_PREFILL;
    if (!q->admitted_once) {
        q->admitted_once = true;
        res->admitted_ns = S->ts;
        res->cached_tokens = cached;
        L->out->prompt_tokens += L->req[ri].input_tokens;
        L->out->cached_tokens += cached;
    }
    return KVF_OK;
}

// One prefill chunk of ri within the step's budget, shrunk to the KV blocks that are free (a
// running prefill may have to wait: then nothing runs). A prompt computed to its end turns
// the request to decoding; a fresh one's first token is emitted at the step's end.
static kvf_status step_chunk(loop *L, step_batch *S, uint32_t ri, kvf_err *err) {
    eng_engine *e = L->e;
    rq *q = &L->rs[ri];
    uint32_t len = eng_seq_len(q->seq);
    uint32_t chunk = KVF_MIN(S->budget, q->target - len);
    while (chunk && eng_kv_blocks_needed(e, q->seq, chunk) > eng_kv_blocks_available(e))
        chunk = chunk > e->bt ? chunk - e->bt : chunk - 1;
    if (!chunk) return KVF_OK;
    S->rec.context_tokens += len;
    int32_t next = 0;
    kvf_status st = eng_prefill(e, q->seq, q->tok + len, chunk, NULL, &next, err);
    S->fwd += eng_last_forward_ns(e);
    if (st) return st;
    S->budget -= chunk;
    S->slots--;
    S->rec.batch++;
    S->rec.tokens += chunk;
    S->rec.prefill_tokens += chunk;
    record_chunk(L, chunk, len);
    L->out->prefill_tokens += chunk;
    S->did = true;
    if (len + chunk == q->target) {
        q->state = ST_DECODE;
        if (q->target == q->ntok && S->npd < STEP_MAX) {   // fresh prompt: its first token
            S->pdone[S->npd] = ri;
            S->pnext[S->npd++] = next;
        }
    }
    return KVF_OK;
}

// Prefill chunks within the budget the decodes left: pass 0 the running prefills (oldest
// first), pass 1 admissions from the queue.
static kvf_status step_prefills(loop *L, step_batch *S, kvf_err *err) {
    const eng_serve_config *c = L->c;
    S->budget = c->max_batch_tokens > S->nd ? c->max_batch_tokens - S->nd : 0;
    S->slots = c->max_batch_requests > S->nd ? c->max_batch_requests - S->nd : 0;
    for (uint32_t pass = 0; pass < 2 && S->budget && S->slots; pass++) {
        uint32_t i = 0;
        while (S->budget && S->slots) {
            uint32_t ri;
            kvf_status st;
            if (pass == 0) {
                while (i < L->nrun && L->rs[L->running[i]].state != ST_PREFILL)
                    i++;
                if (i >= L->nrun) break;
                ri = L->running[i++];
            } else {
                if (!L->nwait || L->nrun >= c->max_batch_requests) break;
                ri = L->waiting[0];
                bool wait;
                if ((st = step_admit(L, S, ri, &wait, err))) return st;
                if (wait) break;
            }
            if ((st = step_chunk(L, S, ri, err))) return st;
        }
    }
    return KVF_OK;
}

// Emits the step's tokens at its end te: each decode's next token, each finished prompt's
// first; requests that reached their output length finish.
static void step_emit(loop *L, step_batch *S, int64_t te) {
    for (uint32_t i = 0; i < S->nd; i++) {
        rq *q = &L->rs[S->dreq[i]];
        q->tok[q->ntok++] = S->dnext[i];
        q->generated++;
        q->target = q->ntok;
        L->out->requests[S->dreq[i]].output_tokens = q->generated;
        L->out->requests[S->dreq[i]].last_token_ns = te;
        if (q->generated >= L->req[S->dreq[i]].output_tokens) finish(L, S->dreq[i], te);
    }
    for (uint32_t i = 0; i < S->npd; i++) {
        rq *q = &L->rs[S->pdone[i]];
        q->tok[q->ntok++] = S->pnext[i];
        q->generated++;
        q->target = q->ntok;
        eng_request_result *res = &L->out->requests[S->pdone[i]];
        res->output_tokens = q->generated;
        if (q->generated == 1) res->first_token_ns = te;
        res->last_token_ns = te;
        if (q->generated >= L->req[S->pdone[i]].output_tokens) finish(L, S->pdone[i], te);
    }
}

// One step: decode every decoding request, then prefill chunks; tokens emitted at its end and
// the step recorded (with the loop's time since the previous one as that one's after_ns).
// *did false when nothing could run (the caller waits for arrivals).
static kvf_status step(loop *L, bool *did, kvf_err *err) {
    KVF_ASSERT(L && L->e && L->c && did);
    step_batch S;
    S.rec = (eng_step_record){0};
    S.fwd = 0;
    S.nd = S.npd = 0;
    S.did = false;
    int64_t cpu0 = eng_thread_cpu_ns();
    size_t chunk0 = L->out->n_chunks;
    S.ts = now_ns(L);
    S.rec.start_ns = S.ts;
    int64_t gap = L->out->n_steps ? S.ts - L->last_end - (L->out->idle_ns - L->idle_at_end) : 0;
    *did = false;
    step_decode_set(L, &S);
    kvf_status st = step_decode(L, &S, err);
    if (!st) st = step_prefills(L, &S, err);
    if (st) {
        *did = S.did;
        return st;
    }
    if (!S.did && L->nrun > 1) {
        // running prefills are stuck behind each other: free the newest
        preempt(L, L->running[L->nrun - 1]);
        S.did = true;
    }
    *did = S.did;
    int64_t te = now_ns(L), cpu1 = eng_thread_cpu_ns();
    step_emit(L, &S, te);
    eng_step_record *rec = &S.rec;
    if (rec->tokens) {
        rec->duration_ns = te - S.ts;
        rec->cpu_ns = cpu1 - cpu0;
        rec->chunk0 = (uint32_t)chunk0;
        rec->n_chunks = (uint32_t)(L->out->n_chunks - chunk0);
        rec->forward_ns = S.fwd;
        if (L->out->n_steps) L->out->steps[L->out->n_steps - 1].after_ns = gap > 0 ? gap : 0;
        L->last_end = te;
        L->idle_at_end = L->out->idle_ns;
        rec->phase = rec->prefill_tokens == 0             ? ENG_STEP_DECODE
                     : rec->prefill_tokens == rec->tokens ? ENG_STEP_PREFILL
                                                          : ENG_STEP_MIXED;
        record_step(L, rec);
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
        if (did && c->busy_hook && c->busy_every_ns > 0 && L.left) {
            int64_t tb = now_ns(&L);
            if (tb - L.last_busy >= c->busy_every_ns) {
                int64_t w0 = kvf_wall_ns();
                c->busy_hook(c->busy_ctx, tb);
                int64_t d = kvf_wall_ns() - w0;
                L.skew -= d;   // the clock stands still: it reads tb again
                out->busy_probe_ns += d;
                L.last_busy = tb;
            }
        }
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

// Warm-up before the first request, as a serving engine's start-up does (vLLM runs a forward
// at its token budget to size memory, then captures its decode batch sizes): one prefill at
// the step budget and one decode of the largest batch, so that the first-touch page faults of
// the activation arena and the GEMM library's buffers at every step size are paid here, not by
// the first served steps (a cold first prefill of 112 tokens ran 19 % over the profile).
// Whatever does not fit the arena is skipped; nothing stays in KV.
static void warm_up(eng_engine *e, uint32_t tokens, uint32_t seqs) {
    const eng_model_desc *m = eng_model(e);
    kvf_err ignore = {0};
    uint32_t n = KVF_MIN(tokens, e->o.max_context > 1 ? e->o.max_context - 1 : 1);
    n = KVF_MIN(n, e->o.max_step_tokens);
    int32_t *t = kvf_malloc((size_t)KVF_MAX(n, seqs) * sizeof *t);
    for (uint32_t i = 0; i < KVF_MAX(n, seqs); i++)
        t[i] = m->vocab > 1 ? (int32_t)(1 + i % (m->vocab - 1)) : 0;
    eng_seq *s = NULL;
    if (eng_seq_open(e, t, n, &s, NULL, &ignore) == KVF_OK) {
        eng_prefill(e, s, t, n, NULL, NULL, &ignore);
        eng_seq_forget(e, s);
        eng_seq_close(e, s);
    }
    seqs = KVF_MIN(seqs, e->o.max_seqs);
    eng_seq **q = kvf_calloc(seqs ? seqs : 1, sizeof *q);
    int32_t *next = kvf_malloc((seqs ? seqs : 1) * sizeof *next);
    uint32_t k = 0;
    while (k < seqs && eng_seq_open(e, t + k, 1, &q[k], NULL, &ignore) == KVF_OK)
        k++;
    if (k) eng_decode(e, q, t, k, NULL, next, &ignore);
    for (uint32_t i = 0; i < k; i++) {
        eng_seq_forget(e, q[i]);
        eng_seq_close(e, q[i]);
    }
    free(q), free(next), free(t);
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
    warm_up(e, mbt, mbr);
    st = eng_serve_on(e, &cc, reqs, n, out, err);
    eng_destroy(e);
    return st;
}
