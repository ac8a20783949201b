// sim/cluster/pools/pool_decode.c -- the decode side: admission by KV capacity, continuous
// batching, preemption (recompute or swap), the listed path (every sequence) and decode sums
// (the batch as running sums plus heaps of finish steps), and runs of identical steps.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cluster.h"
#include "sim_run.h"
#include "sim_sample.h"
#include "sim_trace.h"

void sim_decode_running_add(sim_inst *in, sim_req *r, uint32_t slot) {
    if (r->flags & TRC_F_STRUCTURED) in->n_structured++;
    if (in->n_running + 1 > in->running_cap) {
        size_t cap = in->running_cap;
        kvf_grow((void **)&in->running, &cap, in->n_running + 1, sizeof *in->running);
        in->running_cap = (uint32_t)cap;
    }
    r->qpos = in->n_running;
    in->running[in->n_running++] = slot;
    in->kv_prompt_held += r->input;
}

void sim_decode_running_remove(sim_cluster *c, sim_inst *in, uint32_t pos) {
    const sim_req *r = sim_req_at(c, in->running[pos]);
    if (r->flags & TRC_F_STRUCTURED) in->n_structured--;
    in->kv_prompt_held -= r->input;
    uint32_t last = in->running[--in->n_running];
    if (pos < in->n_running) {
        in->running[pos] = last;
        sim_req_at(c, last)->qpos = pos;
    }
}

// A decode instance keeps its batch as running sums (sim_dsum) so a step costs O(1) in the
// batch size, not O(batch): the step model takes (n, sum of contexts, sums capped by the
// window), a heap of finish steps retires requests, and the ITL histogram takes one weighted
// add per step. Every member emits one token per step (no draft tokens: speculative steps
// draw acceptance per sequence and take the listed path), so member i's context during step
// k + 1 is dctx0_i + k, and its produced count and last token time are brought up to date
// (dsum_sync) only when something reads them. Requests that rebuild their KV after a
// preemption are listed for that one step (recomp), then join.
//
// The listed path (sim_run_opts.decode_listed, and any instance whose step model needs every
// sequence) is kept as the reference: both give the same runs (tests/test_sim.c compares),
// because step models cost summed and listed one-token sequences to the bit and finishing
// requests leave the running array in the order the listed path visits them.
static void gheap_push(sim_gheap *h, uint64_t key, uint32_t slot, uint32_t gen) {
    if (h->n == h->cap) kvf_grow((void **)&h->e, &h->cap, h->n + 1, sizeof *h->e);
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h->e[p].key <= key) break;
        h->e[i] = h->e[p];
        i = p;
    }
    h->e[i] = (struct sim_gentry){key, slot, gen};
}

static struct sim_gentry gheap_pop(sim_gheap *h) {
    KVF_ASSERT(h->n > 0);
    struct sim_gentry top = h->e[0], last = h->e[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->e[c + 1].key < h->e[c].key) c++;
        if (h->e[c].key >= last.key) break;
        h->e[i] = h->e[c];
        i = c;
    }
    if (h->n) h->e[i] = last;
    return top;
}

static void gheap_free(sim_gheap *h) {
    free(h->e);
    memset(h, 0, sizeof *h);
}

static void u32_append(uint32_t **a, uint32_t *n, uint32_t *cap, uint32_t v) {
    if (*n == *cap) {
        size_t c2 = *cap;
        kvf_grow((void **)a, &c2, *n + 1, sizeof **a);
        *cap = (uint32_t)c2;
    }
    (*a)[(*n)++] = v;
}

static bool u32_remove(uint32_t *a, uint32_t *n, uint32_t v) {
    for (uint32_t i = 0; i < *n; i++)
        if (a[i] == v) {
            memmove(a + i, a + i + 1, (*n - i - 1) * sizeof *a);
            (*n)--;
            return true;
        }
    return false;
}

void sim_dsum_free(sim_dsum *d) {
    for (int j = 0; j < MDL_CAPS; j++)
        gheap_free(&d->below[j]);
    gheap_free(&d->fin);
    free(d->fresh);
    free(d->recomp);
    sim_rheap_free(&d->fin_pos);
    memset(d, 0, sizeof *d);
}

// Brings a member's produced count and last token time up to the instance's step count.
void sim_dsum_sync(sim_inst *in, sim_req *r) {
    if (!in->dsum_on || !r->dgen || in->ds.k <= r->dk0) return;
    r->produced += (uint32_t)(in->ds.k - r->dk0);
    r->last_ns = in->ds.last_end;
    r->dk0 = in->ds.k;
}

// r (running on in, produced and last_ns current) becomes a member from the next step on.
void sim_dsum_join(sim_cluster *c, sim_inst *in, uint32_t slot) {
    sim_dsum *d = &in->ds;
    sim_req *r = sim_req_at(c, slot);
    KVF_ASSERT(!r->dgen && !r->recompute && r->produced < r->output);
    if (++c->dgen == 0) c->dgen = 1;
    r->dgen = c->dgen;
    r->dk0 = d->k;
    r->dctx0 = (int64_t)sim_req_ctx_tokens(r) - (int64_t)d->k;
    d->n++;
    d->a += r->dctx0;
    for (uint32_t i = 0; i < d->ncaps; i++) {
        int j = d->cap_at[i];
        int64_t at = (int64_t)d->caps[j] - 1 - r->dctx0;   // step count reaching the cap
        if ((int64_t)d->k < at) {
            d->n_below[j]++;
            d->a_below[j] += r->dctx0;
            gheap_push(&d->below[j], (uint64_t)at, slot, r->dgen);
        }
    }
    gheap_push(&d->fin, d->k + (r->output - r->produced), slot, r->dgen);
    u32_append(&d->fresh, &d->n_fresh, &d->fresh_cap, slot);
}

// r (a member, synced) leaves the sums; its heap entries go stale.
void sim_dsum_leave(sim_cluster *c, sim_inst *in, uint32_t slot) {
    sim_dsum *d = &in->ds;
    sim_req *r = sim_req_at(c, slot);
    KVF_ASSERT(r->dgen && d->n > 0);
    d->n--;
    d->a -= r->dctx0;
    for (uint32_t i = 0; i < d->ncaps; i++) {
        int j = d->cap_at[i];
        if ((int64_t)d->k < (int64_t)d->caps[j] - 1 - r->dctx0) {
            d->n_below[j]--;
            d->a_below[j] -= r->dctx0;
        }
    }
    r->dgen = 0;
    if (r->dk0 == d->k) u32_remove(d->fresh, &d->n_fresh, slot);
}

// The batch's decode members as the step model's sums at step count k (>= d->k, and no
// member reaching a cap in between).
mdl_decode_sum sim_dsum_batch_at(const sim_dsum *d, uint64_t k) {
    mdl_decode_sum b = {.n = d->n, .sum_ctx = (double)(d->a + (int64_t)d->n * (int64_t)k)};
    for (uint32_t i = 0; i < d->ncaps; i++) {
        int j = d->cap_at[i];
        int64_t below = d->a_below[j] + (int64_t)d->n_below[j] * (int64_t)(k + 1);
        b.sum_min[j] = (double)(below + (int64_t)(d->n - d->n_below[j]) * d->caps[j]);
    }
    return b;
}

mdl_decode_sum sim_dsum_batch(const sim_dsum *d) {
    return sim_dsum_batch_at(d, d->k);
}

// Between two changes of a decode batch (an admission, a finish, a member reaching a window,
// a preemption) its steps differ only by each member's context growing by one. Such a stretch
// is one event: the steps' durations are computed one by one (the same step-model calls as
// single steps), only the last step's end is scheduled, and the steps before it are settled
// when it fires (dsum_run_settle). A request arriving for the instance meanwhile (its decode
// queue or, colocated, its prefill queue) cuts the run at the first step end not before it,
// where a single-step instance would admit it. What reads the instance between its steps
// sees the steps ended by then: the sampler (which settles them) and a decode router that
// balances KV (sim_inst_kv_used; step ends come first at their instant, so this holds at a
// step's own end too). Runs are not taken with per-step random skew, nor with a step
// timeline.

// Steps of the run in flight whose ends lie strictly before t (the last one excluded: its
// event settles it).
uint32_t sim_run_passed(const sim_inst *in, sim_time t) {
    uint32_t lo = 0, hi = in->run_m ? in->run_m - 1 : 0;   // first j with run_end[j] >= t
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (in->run_end[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

// x an integer with |x| + d below 2^53: x moved by d in steps stays an exact integer.
static bool exact_int(double x, uint64_t d) {
    return fabs(x) < 0x1p52 && d < (1ull << 52) && x == trunc(x);
}

// Settles steps [0, upto) of the run in flight: their tokens, ITL gaps and KV.
void sim_dsum_run_settle(sim_cluster *c, sim_inst *in, uint32_t upto) {
    if (!upto) return;
    sim_dsum *d = &in->ds;
    uint32_t n = d->n;
    // the first step: the fresh members' gaps run from their own last token
    uint32_t steady = n - d->n_fresh;
    if (steady) sim_hist_add_ns(&c->m.itl_ms, in->run_end[0] - d->last_end, steady);
    for (uint32_t i = 0; i < d->n_fresh; i++)
        sim_hist_add_ns(&c->m.itl_ms, in->run_end[0] - sim_req_at(c, d->fresh[i])->last_ns, 1);
    d->n_fresh = 0;
    // the later ones: every member's gap is the step
    sim_hist_add_gaps_ns(&c->m.itl_ms, in->run_end, upto, n, in->run_rising);
    bool reserve = c->cfg->serving.admission == SIM_ADMIT_RESERVE;
    uint64_t tok = (uint64_t)n * upto;
    // one addition a step, as single steps make them; at once where every partial sum is an
    // integer below 2^53 (each addition exact, so the same bits)
    if (exact_int(in->kv_used, tok) && (!reserve || exact_int(in->kv_reserved, tok))) {
        in->kv_used += (double)tok;
        if (reserve) in->kv_reserved -= (double)tok;
    } else {
        for (uint32_t j = 0; j < upto; j++) {
            in->kv_used += n;
            if (reserve) in->kv_reserved -= n;
        }
    }
    c->m.output_tokens += tok;
    if (upto > in->run_attr) c->m.iv_out += (uint64_t)n * (upto - in->run_attr);
    c->m.decode_step_tokens += tok;
    c->m.decode_step_seqs += tok;
    c->m.decode_steps += upto;
    d->k += upto;
    d->last_end = in->run_end[upto - 1];
}

// Steps of the run in flight that ended by t (at t included; the last one excluded: its
// event settles it). Step ends come first at their instant (sim_step.c), so at t every other
// event sees them as done.
uint32_t sim_run_done_by(const sim_inst *in, sim_time t) {
    uint32_t lo = 0, hi = in->run_m ? in->run_m - 1 : 0;   // first j with run_end[j] > t
    // the steps the router was told of ended by a time no later than t (every caller asks at
    // the simulation's now, which never decreases): the answer is at or past them, and most
    // often a step or two on
    if (in->run_told < hi) lo = in->run_told;
    for (int k = 0; k < 4 && lo < hi; k++, lo++)
        if (in->run_end[lo] > t) return lo;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (in->run_end[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

// KV held by the instance at now, with the steps of its run that have ended.
double sim_inst_kv_used(const sim_inst *in, sim_time now) {
    if (in->run_m <= 1 || !in->busy) return in->kv_used;
    return in->kv_used + (double)in->ds.n * sim_run_done_by(in, now);
}

// The end of a decode step on an instance keeping sums: every member emits one token; those
// whose last token it was finish, in the order the listed path would finish them.
void sim_dsum_step_done(sim_cluster *c, sim_inst *in) {
    sim_dsum *d = &in->ds;
    uint32_t n = d->n;
    if (n) {
        uint32_t steady = n - d->n_fresh;
        if (steady) sim_hist_add_ns(&c->m.itl_ms, c->now - d->last_end, steady);
        for (uint32_t i = 0; i < d->n_fresh; i++)
            sim_hist_add_ns(&c->m.itl_ms, c->now - sim_req_at(c, d->fresh[i])->last_ns, 1);
        d->n_fresh = 0;
        in->kv_used += n;
        if (c->cfg->serving.admission == SIM_ADMIT_RESERVE) in->kv_reserved -= n;
        c->m.output_tokens += n;
        c->m.iv_out += n;
        c->m.decode_step_tokens += n;
        c->m.decode_step_seqs += n;
    }
    d->k++;
    d->last_end = c->now;
    for (uint32_t i = 0; i < d->n_recomp; i++) {   // their KV is rebuilt: they decode from now
        sim_req *r = sim_req_at(c, d->recomp[i]);
        r->recompute = 0;
        sim_dsum_join(c, in, d->recomp[i]);
    }
    d->n_recomp = 0;
    for (uint32_t i = 0; i < d->ncaps; i++) {
        int j = d->cap_at[i];
        sim_gheap *h = &d->below[j];
        while (h->n && h->e[0].key <= d->k) {
            struct sim_gentry e = gheap_pop(h);
            sim_req *r = sim_req_at(c, e.slot);
            if (r->dgen != e.gen) continue;   // left since
            d->n_below[j]--;
            d->a_below[j] -= r->dctx0;
        }
    }
    // finishing members, by running-array position
    while (d->fin.n && d->fin.e[0].key <= d->k) {
        struct sim_gentry e = gheap_pop(&d->fin);
        sim_req *r = sim_req_at(c, e.slot);
        if (r->dgen != e.gen) continue;
        KVF_ASSERT(e.key == d->k);
        sim_dsum_sync(in, r);
        KVF_ASSERT(r->produced == r->output);
        r->dfin = true;
        sim_rheap_push(&d->fin_pos, r->qpos, r->qpos);
    }
    // The listed path walks the array upwards; a finished request's place is taken by the
    // last one, visited next. Stale positions (past the end) are skipped.
    uint32_t p;
    while (sim_rheap_pop(&d->fin_pos, &p)) {
        if (p >= in->n_running) continue;
        uint32_t slot = in->running[p];
        sim_req *r = sim_req_at(c, slot);
        if (!r->dfin) continue;
        r->dfin = false;
        sim_dsum_leave(c, in, slot);
        in->kv_used -= sim_req_ctx_tokens(r);
        sim_decode_running_remove(c, in, p);
        if (p < in->n_running && sim_req_at(c, in->running[p])->dfin)
            sim_rheap_push(&d->fin_pos, p, p);
        sim_req_finish(c, slot, SIM_OUT_COMPLETED);
    }
}

// Admits waiting requests while batch slots and KV capacity allow. A request that could never
// fit in an empty instance is rejected.
bool sim_decode_fits(const sim_cluster *c, const sim_inst *in, double need_now, double remaining) {
    const sim_serving_cfg *sv = &c->cfg->serving;
    double cap = in->kv_cap * (1 - sv->watermark);
    if (sv->admission == SIM_ADMIT_RESERVE)
        return in->kv_used + in->kv_reserved + need_now + remaining <= cap;
    return in->kv_used + need_now <= cap;
}

void sim_decode_admit(sim_cluster *c, sim_inst *in) {
    const sim_pool_cfg *pc = in->pcfg;
    uint32_t maxb = pc->max_batch_requests > 0 ? (uint32_t)pc->max_batch_requests : UINT32_MAX;
    // a decode pool's token budget caps its batch too (one token per sequence, plus drafts);
    // colocated, the budget is shared with prefill chunks when the step forms
    if (!c->colocated && pc->max_batch_tokens > 0)
        maxb = (uint32_t)KVF_MIN((int64_t)maxb,
                                 KVF_MAX(pc->max_batch_tokens / (int64_t)c->spec_seq_tokens, 1));
    while (in->dwait.n && in->n_running + in->n_prefilling < maxb) {
        uint32_t slot = in->dwait.slot[0];
        sim_req *r = sim_req_at(c, slot);
        double need = (double)sim_req_ctx_tokens(r) + 1;
        bool reserve = c->cfg->serving.admission == SIM_ADMIT_RESERVE;
        double remaining = reserve ? (double)(r->output - r->produced) : 0;
        if (need + remaining > in->kv_cap || r->abandoned) {
            uint32_t s2;
            sim_rheap_pop(&in->dwait, &s2);
            sim_req_reject(c, slot, r->abandoned ? SIM_OUT_TIMEOUT : SIM_OUT_REJECT_KV);
            continue;
        }
        if (!sim_decode_fits(c, in, need, remaining)) break;
        uint32_t s2;
        sim_rheap_pop(&in->dwait, &s2);
        r->queue_ns += c->now - r->enq_ns;
        sim_req_set_state(r, SIM_RS_DECODE);
        in->kv_used +=
            sim_req_ctx_tokens(r);   // KV held = tokens whose KV exists; steps add theirs
        in->kv_reserved += remaining;
        sim_decode_running_add(in, r, slot);
        if (in->dsum_on) {
            if (r->recompute)
                u32_append(&in->ds.recomp, &in->ds.n_recomp, &in->ds.recomp_cap, slot);
            else
                sim_dsum_join(c, in, slot);
        }
    }
}

// Preempts the most recently admitted requests until the KV held fits the capacity.
void sim_decode_preempt(sim_cluster *c, sim_inst *in) {
    while (in->kv_used > in->kv_cap && in->n_running > 1) {
        uint32_t slot = in->running[in->n_running - 1];
        sim_req *r = sim_req_at(c, slot);
        if (in->dsum_on) {
            if (r->dgen) {
                sim_dsum_sync(in, r);
                sim_dsum_leave(c, in, slot);
            } else {
                u32_remove(in->ds.recomp, &in->ds.n_recomp, slot);
            }
        }
        sim_decode_running_remove(c, in, in->n_running - 1);
        in->kv_used -= sim_req_ctx_tokens(r);
        if (c->cfg->serving.admission == SIM_ADMIT_RESERVE)
            in->kv_reserved -= r->output - r->produced;
        r->preemptions++;
        c->m.preemptions++;
        r->enq_ns = c->now;
        const mdl_hardware *hw = &sim_pool_of(c, in)->hw;
        if (c->cfg->cluster.preemption == SIM_PREEMPT_SWAP && hw->pcie_Bps > 0) {
            // out and back in over PCIe
            sim_req_set_state(r, SIM_RS_SWAPPED);
            double s = 2.0 * mdl_kv_seq_bytes(&c->model, sim_req_ctx_tokens(r)) / hw->pcie_Bps;
            sim_ev_push2(c, c->now + (sim_time)(s * 1e9), SIM_EV_SWAPIN, slot, r->gen);
        } else {
            r->recompute = sim_req_ctx_tokens(r);
            sim_req_set_state(r, SIM_RS_DECODE_WAIT);
            sim_rheap_push(&in->dwait, sim_queue_key(c, in->pcfg, r), slot);
        }
    }
}

// Emits the tokens of one decode step for running request at pos; returns true if it finished.
bool sim_decode_emit(sim_cluster *c, sim_inst *in, uint32_t pos) {
    uint32_t slot = in->running[pos];
    sim_req *r = sim_req_at(c, slot);
    bool reserve = c->cfg->serving.admission == SIM_ADMIT_RESERVE;
    if (r->abandoned) {   // its client gave up: aborted, its KV freed
        in->kv_used -= sim_req_ctx_tokens(r);
        if (reserve) in->kv_reserved -= r->output - r->produced;
        sim_decode_running_remove(c, in, pos);
        sim_req_reject(c, slot, SIM_OUT_TIMEOUT);
        return true;
    }
    if (r->recompute) {   // this step rebuilt its KV; no token
        r->recompute = 0;
        return false;
    }
    uint32_t k = 1;
    if (c->dspark) {
        // DSpark: draft i + 1 survives with accept[i] given the ones before it did (the last
        // entry repeats); the target's own token follows the first rejection
        const mdl_spec *sp = &c->spec;
        for (uint32_t d = 0; d + 1 < sp->block; d++) {
            double a = sp->accept[d < sp->naccept ? d : sp->naccept - 1];
            if (kvf_rng_uniform(&in->rng) >= a) break;
            k++;
        }
    } else {
        for (uint32_t d = 0; d < c->cfg->decoding.draft_tokens; d++) {
            if (kvf_rng_uniform(&in->rng) >= c->cfg->decoding.acceptance) break;
            k++;
        }
    }
    if (k > r->output - r->produced) k = r->output - r->produced;
    sim_hist_add_ns(&c->m.itl_ms, c->now - r->last_ns, 1);
    sim_hist_add_ns(&c->m.itl_ms, 0, k - 1);
    r->produced += k;
    r->last_ns = c->now;
    in->kv_used += k;
    if (reserve) in->kv_reserved -= k;
    c->m.output_tokens += k;
    c->m.iv_out += k;
    c->m.decode_step_tokens += k;
    c->m.decode_step_seqs++;
    if (r->produced < r->output) return false;
    in->kv_used -= sim_req_ctx_tokens(r);
    sim_decode_running_remove(c, in, pos);
    sim_req_finish(c, slot, SIM_OUT_COMPLETED);
    return true;
}

// ---- the pool's table (sim_pool.h) ---------------------------------------------------------
// A request whose KV reached the instance (transferred, or no link) waits for admission.
static void decode_enqueue(sim_cluster *c, sim_inst *in, uint32_t slot) {
    sim_req *r = sim_req_at(c, slot);
    sim_req_set_state(r, SIM_RS_DECODE_WAIT);
    r->enq_ns = c->now;
    sim_rheap_push(&in->dwait, sim_queue_key(c, in->pcfg, r), slot);
    sim_inst_kick(c, in);
}

static void decode_form_step(sim_cluster *c, sim_inst *in) {
    sim_step_form_batch(c, in, true, false);
}

static void decode_step_done(sim_cluster *c, sim_inst *in) {
    sim_step_settle_batch(c, in, true);
}

const sim_pool_ops sim_pool_decode_ops = {"decode", decode_enqueue, decode_form_step,
                                          decode_step_done, sim_inst_kv_used};
